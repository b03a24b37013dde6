"""The torchcompile fusion executor: regions of ops compiled by TorchInductor.

It accepts every op the torch executor can run except in-place and side-effecting ops (which
must stay in order with the reads around them) and Python-level symbols. The shared region
finder groups them (``thunder.extend.regions``); each region of two or more ops becomes one
``TorchCompileN`` symbol whose decomposition lists the ops it absorbed, built by
``fusion_bound_symbol``; it is compiled by ``torch.compile`` on its first run, for the shapes
of that run (CPU and GPU). Single ops are declined: the torch executor runs them.

Layer: executors. Imports: core, extend, executors.torchex.
"""

from __future__ import annotations

import torch

from thunder.core.symbol import DONT_DCE, IN_PLACE, BoundSymbol, Symbol
from thunder.core.trace import TraceCtx
from thunder.executors import torchex
from thunder.extend import FusionExecutor, Region, fusion_bound_symbol, register_executor


class TorchCompileExecutor(FusionExecutor):
    def lookup_implementation(self, sym: Symbol):
        if sym.tags & {IN_PLACE, DONT_DCE} or sym.printer is not None:
            return None
        return torchex.ex.lookup_implementation(sym)

    def can_execute(self, bsym: BoundSymbol) -> bool:
        info = self.lookup_implementation(bsym.sym)
        return info is not None and info.execution_transform is None

    def fuse(self, region: Region, trace: TraceCtx) -> list[BoundSymbol] | None:
        """One ``TorchCompileN`` fusion for ``region``; a single op is declined (torch runs it)."""
        if len(region.bound_symbols) < 2:
            return None
        # What the compiled region runs: the torch executor's symbol for each op.
        ops = [
            b.from_bsym(sym=torchex.ex.lookup_implementation(b.sym).symbol, lineage=b.lineage)
            for b in region.bound_symbols
        ]
        return [fusion_bound_symbol(region, trace, prefix="TorchCompile", factory=_LazyCompiled, bound_symbols=ops)]


class _LazyCompiled:
    """Compiles the region with ``torch.compile`` on first call."""

    def __init__(self, region_trace: TraceCtx):
        self.region_trace = region_trace
        self.compiled = None

    def __call__(self, *args):
        if self.compiled is None:
            self.compiled = torch.compile(self.region_trace.python_callable(), fullgraph=True, dynamic=False)
        return self.compiled(*args)

    def __repr__(self) -> str:
        return f"<torch.compile of {self.region_trace.name}>"


ex = TorchCompileExecutor("torchcompile")
register_executor(ex)
