"""The sdpa executor: scaled dot-product attention through PyTorch's fused kernels.

It claims ``torch.nn.functional.scaled_dot_product_attention`` whole (the torch language's
``scaled_dot_product_attention``, which would otherwise decompose into matmuls and a softmax for
a fusion executor listed before torch) and the two symbols the autograd split records for it
where eager uses its CPU kernels: ``sdpa_flash_cpu`` (the output and the logsumexp of the
scores) or ``sdpa_math`` (the output and the attention weights) in the forward, and
``sdpa_flash_cpu_backward`` or ``sdpa_math_backward`` in the backward. Each runs what the torch
language says eager runs for it (``thunder.torch.base.symbol_to_torch``), so results are eager's.

``thunder.jit(fn, executors=[sdpa_ex])``, or by name: ``executors=["sdpa"]``. lightning-thunder
code imports it as ``from thunder.executors.sdpaex import sdpa_ex``.

Layer: executors. Imports: core, extend, torch (the language's tables).
"""

from __future__ import annotations

from thunder.core.symbol import Symbol
from thunder.extend import OperatorExecutor, register_executor
from thunder.torch.base import symbol_to_torch
from thunder.torch.nn_attention import (
    scaled_dot_product_attention,
    sdpa_flash_cpu,
    sdpa_flash_cpu_backward,
    sdpa_math,
    sdpa_math_backward,
)

__all__ = ["sdpa_ex", "CLAIMED"]

sdpa_ex = OperatorExecutor("sdpa")
register_executor(sdpa_ex)

#: The torch-language symbols this executor runs, forward and backward.
CLAIMED: tuple[Symbol, ...] = (
    scaled_dot_product_attention, sdpa_flash_cpu, sdpa_flash_cpu_backward, sdpa_math, sdpa_math_backward
)

for _sym in CLAIMED:
    sdpa_ex.register_implementation(
        _sym, sdpa_ex.make_symbol(_sym.name, symbol_to_torch[_sym], like=_sym, tags=_sym.tags)
    )
