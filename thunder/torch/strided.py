"""``torch.as_strided`` in a trace: a view whose elements are named by storage positions.

Note [as_strided in a trace]
``a.as_strided(size, stride, offset)`` reads the storage ``a`` lives in, at ``offset + sum(i_k * stride_k)`` for each
index ``i`` of the result. Values in a trace have no storage, but thunder knows where eager keeps each element of
``a`` (Note [Strides of traced tensors]: the layout eager gives ``a`` at that point of the program, which is also
what the program's own ``a.stride()`` answered when it computed ``stride``, as Longformer's overlapping chunks do).
Where that layout is dense (``a``'s elements fill the positions ``offset(a) .. offset(a) + numel - 1``, in some
order of its dims) and the result reads only those positions, the result is a function of ``a``'s values: the
elements of ``a`` in storage order, taken at the positions the result names. That is its meaning in the trace (and
its gradient: the scatter-add of the take). At run time the executor calls ``as_strided`` on ``a`` itself when
``a`` has eager's layout there, a view as in eager (so that a write through it reaches ``a``), and otherwise on a
copy of ``a`` laid out as eager's. A layout that is not dense (a broadcast, a slice with gaps) or positions
outside ``a`` (memory eager would read from ``a``'s base) are refused with a clear error.

Layer: language. Imports: core, torch.base.
"""

from __future__ import annotations

import math

import torch

from thunder.core import prims
from thunder.core.errors import UnsupportedOpError
from thunder.core.proxies import meta_layout
from thunder.core.symbolic import is_symbolic, pin
from thunder.core.tracectx import current_source_location
from thunder.torch.base import maybe_broadcast, torchsymbol
from thunder.torch.factories import arange
from thunder.torch.indexing import take
from thunder.torch.shape import permute, reshape

__all__ = ["as_strided"]


def _in_layout_impl(a: torch.Tensor, size, stride, offset: int, layout_stride, layout_offset: int) -> torch.Tensor:
    """The run-time ``as_strided``: a view of ``a`` where it has eager's layout, else of a copy laid out so."""
    if a.stride() == tuple(layout_stride) and a.storage_offset() == layout_offset:
        return a.as_strided(size, stride, offset)
    laid_out = torch.empty_strided(a.shape, layout_stride, dtype=a.dtype, device=a.device)
    laid_out.copy_(a)
    return laid_out.as_strided(size, stride, offset - layout_offset)


@torchsymbol(id="torch.as_strided_in_layout", torch_impl=_in_layout_impl)
def as_strided_in_layout(a, size, stride, offset, layout_stride, layout_offset):
    """``a.as_strided(size, stride, offset)`` for ``a`` laid out with ``layout_stride`` at ``layout_offset``
    (dense): the elements of ``a`` in storage order, taken at the positions the result names."""
    op = "ltorch.as_strided"
    order = sorted(range(a.ndim), key=lambda d: -layout_stride[d] if a.shape[d] > 1 else 0)
    flat = reshape(permute(a, order), (a.numel(),))
    position = prims.full((), offset - layout_offset, device=a.device, dtype=torch.int64)
    k = len(size)
    for d, (n, s) in enumerate(zip(size, stride)):
        steps = arange(0, n * s, s, device=a.device) if s else prims.full((n,), 0, device=a.device, dtype=torch.int64)
        position = prims.add(*maybe_broadcast(position, reshape(steps, (*[1] * d, n, *[1] * (k - d - 1))), op=op))
    return take(flat, position)


@torchsymbol(torch.as_strided, method_name="as_strided", sizes=True)
def as_strided(a, size, stride, storage_offset=None):
    """``torch.as_strided`` (Note [as_strided in a trace])."""
    op = "ltorch.as_strided"
    size, stride = [_constant(n) for n in size], [_constant(s) for s in stride]
    if len(size) != len(stride):
        raise UnsupportedOpError(f"{op}: mismatch in length of strides and shape ({len(stride)} and {len(size)})")
    layout = meta_layout(a, need_offset=True)
    layout_stride, layout_offset = tuple(layout.stride()), layout.storage_offset()
    offset = layout_offset if storage_offset is None else storage_offset
    offset = _constant(offset)
    where = current_source_location()
    where = f" (at {where})" if where else ""
    if not _dense(a.shape, layout_stride):
        raise UnsupportedOpError(
            f"{op}: tensor {a.name} is laid out with strides {layout_stride} for shape {tuple(a.shape)} in eager, "
            f"which leaves gaps or repeats in its memory{where}; thunder gives as_strided a meaning only over a tensor "
            "whose elements fill their memory. Call .contiguous() first."
        )
    if math.prod(size) > 0:
        low = offset + sum((n - 1) * s for n, s in zip(size, stride) if s < 0)
        high = offset + sum((n - 1) * s for n, s in zip(size, stride) if s > 0)
        if low < layout_offset or high >= layout_offset + a.numel():
            raise UnsupportedOpError(
                f"{op}: size {tuple(size)}, stride {tuple(stride)} and offset {offset} read memory positions "
                f"{low}..{high}, outside those of tensor {a.name} ({layout_offset}..{layout_offset + a.numel() - 1}) "
                f"{where}; eager would read the memory of the tensor it is a view of, which a trace does not have."
            )
    return as_strided_in_layout(a, tuple(size), tuple(stride), offset, layout_stride, layout_offset)


def _dense(shape, stride) -> bool:
    """Whether a tensor of ``shape`` laid out with ``stride`` fills its memory exactly (a permuted contiguous one)."""
    expected = 1
    for n, s in sorted(((n, s) for n, s in zip(shape, stride) if n > 1), key=lambda t: t[1]):
        if s != expected:
            return False
        expected *= n
    return True


def _constant(n):
    """A size, stride or offset as a plain int: a symbolic one is pinned (the positions are baked into the trace)."""
    return pin(n) if is_symbolic(n) else n
