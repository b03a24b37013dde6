"""In-place primitives: the only prims that mutate a tensor.

They carry the ``IN_PLACE`` and ``DONT_DCE`` tags: passes keep them, never move reads of the
mutated tensor across them, never merge them, and fusion executors leave them alone.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import enum

import torch

from thunder.core import prims
from thunder.core.prims.base import (
    check_same_device,
    check_same_dtype,
    check_same_shape,
    check_tensor,
    is_differentiable,
    make_prim,
)
from thunder.core.rules import grad_rules
from thunder.core.symbol import DONT_DCE, IN_PLACE, Symbol


class InplacePrimIDs(enum.Enum):
    COPY_ = enum.auto()


def _copy_meta(src, dst, *, recorded=True):
    op = "prims.copy_"
    check_tensor(op, "src", src)
    check_tensor(op, "dst", dst)
    check_same_shape(op, [src, dst], ["src", "dst"])
    check_same_dtype(op, [src, dst], ["src", "dst"])
    check_same_device(op, [src, dst], ["src", "dst"])
    if recorded and src.requires_grad and not dst.requires_grad and torch.is_grad_enabled():
        dst.requires_grad = True  # as in eager, the written tensor is now part of the autograd graph
    return dst


# ``copy_(src, dst)``: writes src into dst, returns dst. ``recorded=False``: outside autograd, as eager's kernels
# update batch norm's running statistics (the write gives ``dst`` no autograd history, and no gradient flows).
def _copy_impl(src, dst, *, recorded=True):
    if recorded:
        return dst.copy_(src)
    with torch.no_grad():
        return dst.copy_(src)


copy_ = make_prim(InplacePrimIDs.COPY_, "copy_", _copy_meta, impl=_copy_impl, tags=(IN_PLACE, DONT_DCE))


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]


# --- gradients (Note [VJP rules] in thunder.core.rules) ---


@grad_rules.register(copy_)
def _copy_grad(g, out, src, dst, *, recorded=True):
    """The written values come from ``src``; what ``dst`` held before is overwritten, so it gets none."""
    if not recorded or not is_differentiable(src):
        return (None, None)
    return (prims.convert_element_type(g, src.dtype) if g.dtype != src.dtype else g, None)
