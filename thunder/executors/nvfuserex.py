"""The nvfuser executor's entry: listed everywhere, unavailable in this build with the reason.

nvFuser fuses regions on CUDA devices only, and this build does not yet translate regions to
nvFuser fusion definitions. The executor is registered under its name so that executor lists
(``thunder.get_all_executors()``, the explorer's toggles) show it greyed out with why, and a
jit that lists it fails with that reason instead of ``unknown executor``. nvFuser itself is
never imported (it needs a CUDA device). ``thunder.nvfuser_executor`` stays None, as in
lightning-thunder wherever nvFuser cannot run.

Layer: executors. Imports: core, extend.
"""

from __future__ import annotations

import importlib.util

import torch

from thunder.core.errors import ThunderRuntimeError
from thunder.core.symbol import BoundSymbol
from thunder.extend import FusionExecutor, register_executor

__all__ = ["NvFuserExecutor", "ex", "nvfuserex"]


class NvFuserExecutor(FusionExecutor):
    @property
    def unavailable_reason(self) -> str:
        if importlib.util.find_spec("nvfuser") is None:
            return "nvFuser is not installed (its wheels are built per CUDA and torch version, for CUDA GPUs only)"
        if not torch.cuda.is_available():
            return "no CUDA device: nvFuser runs CUDA tensors only"
        return "this build does not translate regions to nvFuser fusion definitions yet; use torchcompile or triton"

    def can_execute(self, bsym: BoundSymbol) -> bool:
        raise ThunderRuntimeError(f"executor {self.name!r} is unavailable: {self.unavailable_reason}")


ex = register_executor(NvFuserExecutor("nvfuser"))
# lightning-thunder's name for its nvFuser executor, None where nvFuser cannot run (as thunder.nvfuser_executor)
nvfuserex = None
