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
from thunder.core.errors import ThunderRuntimeError, UnsupportedOpError
from thunder.core.proxies import TensorProxy, meta_layout, register_method
from thunder.core.replays import becomes_in_place
from thunder.core.symbol import MAY_ALIAS
from thunder.core.symbolic import is_symbolic, pin
from thunder.core.tracectx import current_source_location, get_tracectx
from thunder.core.transforms.autodiff import _aliased_args
from thunder.torch.base import maybe_broadcast, torch_to_thunder_map, torchsymbol
from thunder.torch.factories import arange, empty
from thunder.torch.indexing import index_put, take
from thunder.torch.inplace import copy_
from thunder.torch.layout import contiguous_strides
from thunder.torch.shape import cat, made_here, narrow, permute, reshape

__all__ = ["as_strided", "as_strided_scatter", "resize_", "set_"]


def _in_layout_impl(a: torch.Tensor, size, stride, offset: int, layout_stride, layout_offset: int) -> torch.Tensor:
    """The run-time ``as_strided``: a view of ``a`` where it has eager's layout, else of a copy laid out so."""
    if a.stride() == tuple(layout_stride) and a.storage_offset() == layout_offset:
        return a.as_strided(size, stride, offset)
    laid_out = torch.empty_strided(a.shape, layout_stride, dtype=a.dtype, device=a.device)
    laid_out.copy_(a)
    return laid_out.as_strided(size, stride, offset - layout_offset)


def _storage_order(a, layout_stride) -> list[int]:
    """``a``'s dims from the outermost in memory to the innermost, for its layout ``layout_stride``."""
    return sorted(range(a.ndim), key=lambda d: -layout_stride[d] if a.shape[d] > 1 else 0)


def _positions(op: str, a, size, stride, offset: int):
    """The storage positions, from ``offset``, of each element of a view of ``size`` and ``stride`` (an int64 tensor
    of shape ``size``)."""
    position = prims.full((), offset, device=a.device, dtype=torch.int64)
    k = len(size)
    for d, (n, s) in enumerate(zip(size, stride)):
        steps = arange(0, n * s, s, device=a.device) if s else prims.full((n,), 0, device=a.device, dtype=torch.int64)
        position = prims.add(*maybe_broadcast(position, reshape(steps, (*[1] * d, n, *[1] * (k - d - 1))), op=op))
    return position


@torchsymbol(id="torch.as_strided_in_layout", torch_impl=_in_layout_impl, tags=(MAY_ALIAS,))
def as_strided_in_layout(a, size, stride, offset, layout_stride, layout_offset):
    """``a.as_strided(size, stride, offset)`` for ``a`` laid out with ``layout_stride`` at ``layout_offset``
    (dense): the elements of ``a`` in storage order, taken at the positions the result names."""
    flat = reshape(permute(a, _storage_order(a, layout_stride)), (a.numel(),))
    return take(flat, _positions("ltorch.as_strided", a, size, stride, offset - layout_offset))


def _checked_view(op: str, a, size, stride, storage_offset) -> tuple[list, list, int, tuple, int]:
    """``size``, ``stride`` and the offset of ``a.as_strided(size, stride, storage_offset)`` as plain ints, with
    ``a``'s eager layout (strides, offset), where that view reads only ``a``'s own dense memory; a clear error
    otherwise (Note [as_strided in a trace])."""
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
    return size, stride, offset, layout_stride, layout_offset


@torchsymbol(torch.as_strided, method_name="as_strided", sizes=True)
def as_strided(a, size, stride, storage_offset=None):
    """``torch.as_strided`` (Note [as_strided in a trace])."""
    size, stride, offset, layout_stride, layout_offset = _checked_view("ltorch.as_strided", a, size, stride, storage_offset)
    return as_strided_in_layout(a, tuple(size), tuple(stride), offset, layout_stride, layout_offset)


@torchsymbol(torch.as_strided_scatter, method_name="as_strided_scatter", sizes=True)
def as_strided_scatter(a, src, size, stride, storage_offset=None):
    """``torch.as_strided_scatter``: a copy of ``a`` (eager's keeps its strides and storage offset) whose elements at
    the positions ``a.as_strided(size, stride, storage_offset)`` reads are ``src``'s (Note [as_strided in a trace]).
    Positions a view names twice are refused: which of ``src``'s values eager leaves there is not defined. So is an
    ``a`` that requires grad: eager's gradient for it is ``grad`` at the scattered positions and zero elsewhere, not
    the derivative (the other way round), and thunder does not pick one of the two."""
    op = "ltorch.as_strided_scatter"
    if a.requires_grad:
        where = current_source_location()
        raise UnsupportedOpError(
            f"{op}: input {a.name} requires grad{f' (at {where})' if where else ''}; eager PyTorch's gradient for it "
            "is the incoming gradient at the scattered positions and zero elsewhere, which is not the derivative "
            "(zero there, the gradient elsewhere), so thunder does not differentiate it. Scatter into "
            "input.detach(), or write through a view of a clone: out = input.clone(); out.as_strided(size, stride, "
            "offset).copy_(src)."
        )
    size, stride, offset, layout_stride, layout_offset = _checked_view(op, a, size, stride, storage_offset)
    contiguous = all(s == c for n, s, c in zip(a.shape, layout_stride, contiguous_strides(a.shape)) if n > 1)
    if src.requires_grad and (not contiguous or (storage_offset is not None and layout_offset != 0)):
        raise UnsupportedOpError(
            f"{op}: src {src.name} requires grad and input {a.name} is laid out with strides {layout_stride} at "
            f"offset {layout_offset} in eager, whose gradient for src reads the incoming gradient as if the input "
            "were contiguous from offset 0 (not the derivative, or an error); thunder differentiates it only there. "
            "Call .contiguous() on the input first."
        )
    if list(src.shape) != size:
        raise ThunderRuntimeError(
            f"{op}: expected src to have a size equal to the slice of self. src size = {list(src.shape)}, slice size "
            f"= {size}"
        )
    if not _without_repeats(size, stride):
        raise UnsupportedOpError(
            f"{op}: size {tuple(size)} and stride {tuple(stride)} name some memory positions more than once; which of "
            "src's values eager writes there is not defined. Use a view without overlaps."
        )
    order = _storage_order(a, layout_stride)
    permuted = permute(a, order)
    positions = reshape(_positions(op, a, size, stride, offset - layout_offset), (math.prod(size),))
    values = reshape(src, (math.prod(size),)).to(a.dtype)
    flat = index_put(reshape(permuted, (a.numel(),)), (positions,), values)
    return permute(reshape(flat, permuted.shape), sorted(range(a.ndim), key=order.__getitem__))


def _without_repeats(size, stride) -> bool:
    """Whether a view of ``size`` and ``stride`` names each of its positions once (each dim, by stride, steps past
    all the positions of the dims with smaller strides)."""
    extent = 0
    for n, s in sorted(((n, abs(s)) for n, s in zip(size, stride) if n > 1), key=lambda t: t[1]):
        if s <= extent:
            return False
        extent += (n - 1) * s
    return True


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


# Note [resize_ and set_ in a trace]
# ``t.resize_(size)`` and ``t.set_(source)`` change which memory the tensor object ``t`` reads: the object takes a
# new value in place, as ``unsqueeze_`` makes it take a new shape (Note [In-place shape changes] in
# thunder.torch.shape), so only a tensor the program made can (an input's cannot change for the caller). Where eager's
# new value is a function of values the trace has, it is recorded so: ``resize_`` to no more elements than the tensor
# has, over eager's contiguous layout of it, is its first elements in memory order (a view, as eager's is of the same
# memory); to more, of a tensor with memory of its own (not a view), those elements then uninitialized ones, as
# eager's new memory holds (``torch.empty``'s). ``set_(source)`` makes the tensor a view of ``source`` (writes through
# either reach the other). ``set_(source)`` of an input (``nn.utils.parametrize`` stores a new value into its
# ``original`` parameter so) whose shape and device are ``source``'s changes, for the caller, only which memory it reads
# (and its strides: eager gives it ``source``'s): the trace writes ``source``'s values into the input's memory, as
# assigning ``.data`` does (Note [Assigning a tensor's .data] in thunder.core.side_effects). Everything else (a view grown past its elements, which eager fills from the memory it is
# a view of; a storage or explicit strides given to ``set_``; gradients through them) is a clear error.


def _resized(op: str, a, size):
    numel = math.prod(size)
    if any(n < 0 for n in size):
        raise ThunderRuntimeError(f"{op}: Trying to create tensor with negative dimension {min(size)}: {list(size)}")
    stride = tuple(meta_layout(a).stride())
    if not _dense(a.shape, stride):
        raise UnsupportedOpError(
            f"{op}: tensor {a.name} is laid out with strides {stride} for shape {tuple(a.shape)} in eager, which leaves "
            "gaps or repeats in its memory: its elements in memory order are not a value of the trace. Call "
            ".contiguous() first, or resize outside the jitted function."
        )
    in_memory_order = sorted(range(a.ndim), key=lambda d: -stride[d])  # (a transposed tensor's memory: its rows)
    flat = reshape(permute(a, in_memory_order), (a.numel(),))
    if numel <= a.numel():
        return reshape(narrow(flat, 0, 0, numel), size)
    trace = get_tracectx()
    maker = next((b for b in reversed(trace.bound_symbols) if any(o is a for o in b.flat_proxy_outs)), None)
    if maker is None or _aliased_args(maker):
        raise UnsupportedOpError(
            f"{op}: tensor {a.name} is a view of other memory, which eager's resize_ reads past its {a.numel()} "
            "elements and a trace does not have. Resize a tensor made by torch.empty (or a copy), or resize outside "
            "the jitted function."
        )
    fresh = empty((numel - a.numel(),), device=a.device, dtype=a.dtype)
    return reshape(cat([flat, fresh], 0), size)


def resize_(a, *size, memory_format=None):
    """``Tensor.resize_`` of a tensor the program made (Note [resize_ and set_ in a trace])."""
    op = "Tensor.resize_"
    trace = made_here(op, a, "Make a new tensor instead (x = x.new_empty(size), x = x.reshape(size))")
    if memory_format not in (None, torch.contiguous_format):
        raise UnsupportedOpError(f"{op}: memory_format={memory_format} is not supported; call it outside the jitted function")
    if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
        size = tuple(size[0])
    size = tuple(_constant(n) for n in size)
    if a.requires_grad and torch.is_grad_enabled():
        raise ThunderRuntimeError("cannot resize variables that require grad")
    return becomes_in_place(trace, a, lambda before: _resized(op, before, size))


def resize_as_(a, other, memory_format=None):
    """``Tensor.resize_as_``: ``resize_`` to ``other``'s shape."""
    return resize_(a, tuple(other.shape), memory_format=memory_format)


def set_(a, source=None, *args, **kwargs):
    """``Tensor.set_(source)`` of a tensor the program made: it becomes a view of ``source``; of an input, where
    ``source`` has its shape: it takes ``source``'s values (Note [resize_ and set_ in a trace])."""
    op = "Tensor.set_"
    if not isinstance(source, TensorProxy) or args or kwargs:
        raise UnsupportedOpError(
            f"{op}: only set_(source) with a tensor is supported (a storage, an offset or strides name memory a trace "
            "does not have); call it outside the jitted function."
        )
    if source.dtype != a.dtype:  # eager's error, from its own check
        try:
            torch.empty(0, dtype=a.dtype, device="meta").set_(torch.empty(0, dtype=source.dtype, device="meta"))
        except RuntimeError as e:
            raise ThunderRuntimeError(str(e)) from None
    if source.requires_grad and torch.is_grad_enabled():
        raise UnsupportedOpError(
            f"{op}: source {source.name} requires grad; eager's autograd records no gradient formula for set_ "
            "(its grad_fn is NotImplemented), which thunder does not follow. Use the source tensor itself."
        )
    if a.strides is not None and (tuple(a.shape), a.device) == (tuple(source.shape), source.device):
        return copy_(a, source)  # an input (Note [Strides of traced tensors]) given a tensor of its metadata
    trace = made_here(op, a, "Use the source tensor itself instead of setting another to it")
    return becomes_in_place(trace, a, lambda before: reshape(source, tuple(source.shape)))


for _name, _fn in (("resize_", resize_), ("resize_as_", resize_as_), ("set_", set_)):
    register_method(_name, _fn)
    torch_to_thunder_map[getattr(torch.Tensor, _name)] = _fn
torch_to_thunder_map[torch.resize_as_] = resize_as_
