"""In-place tensor methods that have no out-of-place twin in the tables: ``copy_``, ``zero_``,
``fill_`` (and ``torch.fill``). Each computes its new value and writes it with ``prims.copy_``,
so the mutation is visible to the caller exactly as in eager PyTorch.

Layer: language. Imports: core, torch.base, torch.factories.
"""

from __future__ import annotations

import torch

from thunder.core import prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import is_differentiable
from thunder.core.rules import grad_rules
from thunder.core.symbol import DONT_DCE, IN_PLACE
from thunder.torch import base
from thunder.torch.base import is_number, is_tensor, torchsymbol
from thunder.torch.factories import full_like

__all__ = ["copy_", "zero_", "fill_", "fill"]

_INPLACE = (IN_PLACE, DONT_DCE)


def _fill_value(op: str, value):
    if is_tensor(value):
        if value.ndim != 0:
            raise ThunderValueError(
                f"{op}: fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
            )
        return value
    if not is_number(value):
        raise ThunderTypeError(f"{op}: value must be a number or a 0-dim tensor, got {type(value).__name__}")
    return value


@torchsymbol(torch.fill, method_name="fill")
def fill(a, value):
    """``torch.fill``: a tensor like ``a`` filled with ``value``."""
    value = _fill_value("ltorch.fill", value)
    if is_tensor(value):
        return base.expand_to(base.maybe_convert_to_dtype(value, a.dtype), a.shape)
    return full_like(a, value)


@grad_rules.register(fill)
def _fill_vjp(g, out, a, value):
    """Eager's: ``a`` is reached with a zero gradient (zeros, not None), a tensor ``value`` gets the sum of ``g``."""
    if not is_differentiable(value):
        return (None, None)
    return (None, base.maybe_convert_to_dtype(prims.sum(g, tuple(range(g.ndim))), value.dtype))


@torchsymbol(method_name="copy_", tags=_INPLACE, torch_impl=torch.Tensor.copy_)
def copy_(a, src, non_blocking=False):
    """``Tensor.copy_``: writes ``src`` (broadcast and converted) into ``a``."""
    if not is_tensor(src):
        raise ThunderTypeError(f"ltorch.copy_: src must be a tensor, got {type(src).__name__}")
    base.broadcast_shapes("ltorch.copy_", a.shape, src.shape)
    return base.copy_(src, a)


@torchsymbol(method_name="fill_", tags=_INPLACE, torch_impl=torch.Tensor.fill_)
def fill_(a, value):
    """``Tensor.fill_``: every element of ``a`` becomes ``value``."""
    return base.copy_(fill(a, value), a)


@torchsymbol(torch.zero_, method_name="zero_", tags=_INPLACE, torch_impl=torch.Tensor.zero_)
def zero_(a):
    """``Tensor.zero_``: every element of ``a`` becomes zero."""
    return base.copy_(fill(a, 0), a)
