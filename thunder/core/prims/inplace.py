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
    CHECK_NO_PARTIAL_OVERLAP = enum.auto()


def _copy_meta(src, dst, *, grad_enabled=True):
    op = "prims.copy_"
    check_tensor(op, "src", src)
    check_tensor(op, "dst", dst)
    check_same_shape(op, [src, dst], ["src", "dst"])
    check_same_dtype(op, [src, dst], ["src", "dst"])
    check_same_device(op, [src, dst], ["src", "dst"])
    if grad_enabled and src.requires_grad and not dst.requires_grad and torch.is_grad_enabled():
        dst.requires_grad = True  # as in eager, the written tensor is now part of the autograd graph
    return dst


# ``copy_(src, dst)``: writes src into dst, returns dst. ``grad_enabled=False`` (lightning-thunder's keyword): outside
# autograd, as eager's kernels update batch norm's running statistics (the write gives ``dst`` no autograd history,
# and no gradient flows).
def _copy_impl(src, dst, *, grad_enabled=True):
    if grad_enabled:
        return dst.copy_(src)
    with torch.no_grad():
        return dst.copy_(src)


copy_ = make_prim(InplacePrimIDs.COPY_, "copy_", _copy_meta, impl=_copy_impl, tags=(IN_PLACE, DONT_DCE))


def no_partial_overlap(dst: torch.Tensor, srcs: tuple) -> None:
    """Eager's check before an op writes ``dst`` from ``srcs`` (ATen's ``assert_no_partial_overlap``): a source may be
    the written tensor itself, or memory apart from it, but not part of it (``torch.add(x, 1, out=x.mT)``)."""
    for src in srcs:
        if src is dst or not dst.numel() or not src.numel():
            continue
        if not _dense(dst) or not _dense(src):
            continue  # eager's "too hard": not checked
        if dst.untyped_storage().data_ptr() != src.untyped_storage().data_ptr():
            continue
        d0, s0 = dst.data_ptr(), src.data_ptr()
        d1, s1 = d0 + dst.numel() * dst.element_size(), s0 + src.numel() * src.element_size()
        if (d0, d1) == (s0, s1) and dst.stride() == src.stride() or not (d0 < s1 and s0 < d1):
            continue
        raise RuntimeError(
            "unsupported operation: some elements of the input tensor and the written-to tensor refer to a single "
            "memory location. Please clone() the tensor before performing the operation."
        )


def _dense(t: torch.Tensor) -> bool:
    """Whether ``t``'s elements fill a block of memory once each, in some order of its dims (ATen's
    ``is_non_overlapping_and_dense``)."""
    expected = 1
    for stride, size in sorted((st, n) for st, n in zip(t.stride(), t.shape) if n != 1):
        if stride != expected:
            return False
        expected *= size
    return True


def _print_check_no_partial_overlap(bsym, printer):
    dst, srcs = bsym.args
    return [f"{printer.add_ctx('_no_partial_overlap', no_partial_overlap)}({printer.value(dst)}, {printer.value(srcs)})"]


# ``check_no_partial_overlap(dst, srcs)``: before an ``out=`` write (``write_out`` in thunder.torch.inplace), the
# sources do not share part of its memory, which only the tensors of a call can tell (two arguments that alias).
check_no_partial_overlap = make_prim(
    InplacePrimIDs.CHECK_NO_PARTIAL_OVERLAP, "check_no_partial_overlap", lambda dst, srcs: None, tags=(DONT_DCE,),
    printer=_print_check_no_partial_overlap,
)  # fmt: skip


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]


# --- gradients (Note [VJP rules] in thunder.core.rules) ---


@grad_rules.register(copy_)
def _copy_grad(g, out, src, dst, *, grad_enabled=True):
    """The written values come from ``src``; what ``dst`` held before is overwritten, so it gets none."""
    if not grad_enabled or not is_differentiable(src):
        return (None, None)
    return (prims.convert_element_type(g, src.dtype) if g.dtype != src.dtype else g, None)
