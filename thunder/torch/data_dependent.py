"""Ops whose result's shape depends on tensor values: ``nonzero``, ``argwhere``, ``masked_select``,
indexing with boolean masks (``a[mask]``); and ``element in tensor``, a Python bool.

Their size is a data-dependent value: the program is split on it (Note [Data-dependent values]
in ``thunder.core.data_dependent``: the count is computed, checked on every call, and the trace
continues for it), and the op then runs with a known size, as ``*_of_size`` symbols whose torch
implementation is eager's own op. So these functions are plain Python run by the tracer at the
top level of the trace, not symbols: a split cannot happen inside a symbol's decomposition.
"""

from __future__ import annotations

from numbers import Number

import torch

from thunder.core import dtypes, prims
from thunder.core.errors import (
    ThunderIndexError,
    ThunderRuntimeError,
    ThunderTypeError,
    ThunderValueError,
    UnsupportedOpError,
)
from thunder.core.prims.base import is_differentiable
from thunder.core.proxies import TensorProxy, pyval, register_method
from thunder.core.rules import grad_rules
from thunder.torch.base import broadcast_shapes, torch_to_thunder_map, torchsymbol
from thunder.torch.elementwise import eq
from thunder.torch.elementwise import where as _where
from thunder.torch.factories import full_like, read_as_int
from thunder.torch.indexing import getitem, index_add, index_key, index_put, index_put_, mask_key, setitem
from thunder.torch.rearrange import repeat_interleave as _repeat_interleave
from thunder.torch.reductions import all as all_
from thunder.torch.reductions import any as any_
from thunder.torch.reductions import sort
from thunder.torch.shape import check_dim, expand, unbind, unsqueeze
from thunder.torch.shape import narrow as _narrow
from thunder.torch.shape import tensor_split as _tensor_split

__all__ = ["allclose", "argwhere", "contains", "equal", "masked_select", "nonzero", "getitem_with_masks", "setitem_with_masks", "bincount", "tensor_split", "narrow"]


def _count(mask: TensorProxy) -> int:
    """How many elements of ``mask`` are nonzero, as a Python int: a data-dependent value."""
    ones = prims.convert_element_type(prims.ne(mask, False if mask.dtype is torch.bool else 0), dtypes.int64)
    return prims.sum(ones, tuple(range(mask.ndim))).item()  # not int(): that would pin a symbolic count


def _check(op: str, a) -> None:
    if not isinstance(a, TensorProxy):
        raise ThunderTypeError(f"{op}: expected a tensor, got {type(a).__name__}")


def _nonzero_of_size_impl(a, n):
    return torch.nonzero(a)


@torchsymbol(id="torch.nonzero_of_size", torch_impl=_nonzero_of_size_impl)
def nonzero_of_size(a, n):
    """``torch.nonzero(a)`` where ``a`` has ``n`` nonzero elements (the program checked it)."""
    return TensorProxy.like(a, shape=(n, a.ndim), dtype=dtypes.int64, requires_grad=False)


def nonzero(a, *, as_tuple: bool = False):
    """``torch.nonzero``: the indices of the nonzero elements of ``a``, one row each (or, with
    ``as_tuple``, one index tensor per dim)."""
    _check("ltorch.nonzero", a)
    if as_tuple and a.ndim == 0:  # torch treats a 0-d tensor as 1-d here
        a = prims.reshape(a, (1,))
    indices = nonzero_of_size(a, _count(a))
    return tuple(unbind(indices, 1)) if as_tuple else indices


def argwhere(a):
    """``torch.argwhere``: ``torch.nonzero(a)``."""
    _check("ltorch.argwhere", a)
    return nonzero(a)


def _masked_select_of_size_impl(a, mask, n):
    return torch.masked_select(a, mask)


@torchsymbol(id="torch.masked_select_of_size", torch_impl=_masked_select_of_size_impl)
def masked_select_of_size(a, mask, n):
    """``torch.masked_select`` of same-shape ``a`` and ``mask`` with ``n`` True elements."""
    return TensorProxy.like(a, shape=(n,))


def _masked_select_backward_impl(g, mask):
    return torch.zeros(mask.shape, dtype=g.dtype, device=g.device).masked_scatter_(mask, g)


@torchsymbol(id="torch.masked_select_backward", torch_impl=_masked_select_backward_impl)
def masked_select_backward(g, mask):
    """The gradient of ``masked_select``: ``g`` scattered to where ``mask`` is True, zeros elsewhere."""
    return TensorProxy.like(g, shape=tuple(mask.shape), requires_grad=False)


@grad_rules.register(masked_select_of_size)
def _masked_select_of_size_vjp(g, out, a, mask, n):
    return (masked_select_backward(g, mask) if is_differentiable(a) else None, None, None)


def masked_select(a, mask):
    """``torch.masked_select``: the elements of ``a`` where ``mask`` (broadcast with it) is True."""
    op = "ltorch.masked_select"
    _check(op, a)
    _check(op, mask)
    if mask.dtype is not torch.bool:
        raise ThunderTypeError(f"{op}: masked_select: expected BoolTensor for mask, got {mask.dtype}")
    shape = broadcast_shapes(op, tuple(a.shape), tuple(mask.shape))
    a, mask = expand(a, shape), expand(mask, shape)
    return masked_select_of_size(a, mask, _count(mask))


def _repeat_interleave_of_size_impl(a, repeats, dim, n, output_size=None):
    # Not ``output_size=n``: torch trusts it without checking the counts (negative ones corrupt memory).
    return torch.repeat_interleave(a, repeats, dim=dim, output_size=output_size)


@torchsymbol(id="torch.repeat_interleave_of_size", torch_impl=_repeat_interleave_of_size_impl)
def repeat_interleave_of_size(a, repeats, dim, n, output_size=None):
    """``torch.repeat_interleave(a, repeats, dim, output_size=output_size)`` with per-element ``repeats`` (a vector
    as long as ``a``'s dim) that sum to ``n``."""
    return TensorProxy.like(a, shape=(*a.shape[:dim], n, *a.shape[dim + 1 :]))


@grad_rules.register(repeat_interleave_of_size)
def _repeat_interleave_of_size_vjp(g, out, a, repeats, dim, n, output_size=None):
    """Each element's cotangent is the sum of its copies': added at the positions they were copied from."""
    if not is_differentiable(a):
        return (None, None, None, None, None)
    positions = prims.iota(a.shape[dim], start=0, step=1, device=a.device, dtype=dtypes.int64)
    source = repeat_interleave_of_size(positions, repeats, 0, n, output_size)
    return (index_add(full_like(a, 0), dim, source, g), None, None, None, None)


def repeat_interleave(a, repeats=None, dim=None, *, output_size=None):
    """``torch.repeat_interleave``. Per-element ``repeats`` (a tensor) make the result's size their sum, a
    data-dependent value (given by ``output_size`` where the program knows it); the one-argument form
    ``torch.repeat_interleave(repeats)`` repeats each index ``repeats[i]`` times."""
    op = "ltorch.repeat_interleave"
    if repeats is None and isinstance(a, TensorProxy):
        if a.ndim > 1:
            raise ThunderValueError(f"{op}: repeats must be 0-dim or 1-dim tensor")
        a, repeats, dim = prims.iota(a.numel(), start=0, step=1, device=a.device, dtype=a.dtype), a, 0
    if not (isinstance(a, TensorProxy) and isinstance(repeats, TensorProxy)):
        return _repeat_interleave(a, repeats, dim, output_size=output_size)
    if repeats.dtype not in (dtypes.int32, dtypes.int64):
        raise ThunderTypeError(f"{op}: repeats has to be Long or Int tensor")
    if repeats.ndim > 1:
        raise ThunderValueError(f"{op}: repeats must be 0-dim or 1-dim tensor")
    if dim is None:
        a, d = prims.reshape(a, (a.numel(),)), 0
    else:
        d = check_dim(op, a.ndim, dim)
        if a.ndim == 0:
            a = prims.reshape(a, (1,))
    if repeats.numel() == 1 and a.shape[d] != 1:  # one count for every element, as an int would be
        repeats = expand(prims.reshape(repeats, (1,)), (a.shape[d],))
    if repeats.ndim == 0:
        repeats = prims.reshape(repeats, (1,))
    if repeats.shape[0] != a.shape[d]:
        raise ThunderValueError(
            f"{op}: repeats must have the same size as input along dim, but got repeats.size(0) = {repeats.shape[0]} "
            f"and input.size(0) = {a.shape[d]}"
        )
    if output_size is not None:
        return repeat_interleave_of_size(a, repeats, d, output_size, output_size)
    n = prims.sum(prims.convert_element_type(repeats, dtypes.int64), (0,)).item()
    return repeat_interleave_of_size(a, repeats, d, n)


def _bincount_of_size_impl(a, weights, minlength, n):
    return torch.bincount(a, weights, minlength)


@torchsymbol(id="torch.bincount_of_size", torch_impl=_bincount_of_size_impl)
def bincount_of_size(a, weights, minlength, n):
    """``torch.bincount(a, weights, minlength)`` where the result has ``n`` bins (the program checked it)."""
    dtype = dtypes.int64 if weights is None else dtypes.float32 if weights.dtype is dtypes.float32 else dtypes.float64
    return TensorProxy.like(a, shape=(n,), dtype=dtype, requires_grad=False)


def bincount(a, weights=None, minlength=0):
    """``torch.bincount``: how often each value of ``a`` occurs (the sum of their ``weights``), in
    ``max(a.max() + 1, minlength)`` bins, a data-dependent count."""
    op = "ltorch.bincount"
    _check(op, a)
    if a.ndim != 1 or a.dtype not in (dtypes.uint8, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64):
        raise ThunderRuntimeError(f"{op}: bincount only supports 1-d non-negative integral inputs.")
    if weights is not None:
        _check(op, weights)
        if weights.ndim != 1 or weights.shape[0] != a.shape[0]:
            raise ThunderRuntimeError(f"{op}: weights should be 1-d and have the same length as input")
        if weights.device.type != "cpu":  # the result's dtype is the CPU kernel's
            raise UnsupportedOpError(f"{op}: weights on {weights.device} are not supported yet; call it outside the jitted function")
    minlength = pyval(minlength)
    if minlength < 0:
        raise ThunderRuntimeError(f"{op}: minlength should be >= 0")
    if a.shape[0] == 0:
        return bincount_of_size(a, weights, minlength, minlength)
    top = prims.convert_element_type(prims.amax(a, (0,)), dtypes.int64)
    n = prims.maximum(prims.add(top, 1), prims.full((), minlength, device=a.device, dtype=dtypes.int64)).item()
    return bincount_of_size(a, weights, minlength, n)


def one_hot(tensor, num_classes=-1):
    """``F.one_hot``; without ``num_classes`` the number of classes is ``tensor.max() + 1``, a data-dependent
    value the program splits on (with it, the eager op as it is)."""
    from thunder.torch.eager_ops import EAGER_OPS  # (declared after this module)

    op = "ltorch.one_hot"
    _check(op, tensor)
    if pyval(num_classes) == -1:
        if tensor.numel() == 0:
            raise ThunderRuntimeError(f"{op}: Can not infer total number of classes from empty tensor.")
        top = prims.convert_element_type(prims.amax(tensor, tuple(range(tensor.ndim))), dtypes.int64)
        num_classes = prims.add(top, 1).item()
    return EAGER_OPS[torch.nn.functional.one_hot](tensor, num_classes)


def _unique_of_size_impl(a, consecutive, return_inverse, return_counts, n, dim=None):
    kwargs = {"return_inverse": return_inverse, "return_counts": return_counts, "dim": dim}
    return torch.unique_consecutive(a, **kwargs) if consecutive else torch.unique(a, **kwargs)


@torchsymbol(id="torch.unique_of_size", torch_impl=_unique_of_size_impl)
def unique_of_size(a, consecutive, return_inverse, return_counts, n, dim=None):
    """``torch.unique`` (``unique_consecutive`` with ``consecutive``) of ``a`` flattened, which has ``n`` distinct
    values (the program checked it); with the inverse indices and the counts where asked. With ``dim``: of the
    slices along ``dim``, ``n`` distinct ones."""
    if dim is None:
        outs = [TensorProxy.like(a, shape=(n,))]
        inverse_shape = a.shape
    else:
        outs = [TensorProxy.like(a, shape=(*a.shape[:dim], n, *a.shape[dim + 1 :]))]
        inverse_shape = (a.shape[dim],)
    if return_inverse:
        outs.append(TensorProxy.like(a, shape=inverse_shape, dtype=dtypes.int64, requires_grad=False))
    if return_counts:
        outs.append(TensorProxy.like(a, shape=(n,), dtype=dtypes.int64, requires_grad=False))
    return tuple(outs) if len(outs) > 1 else outs[0]


def _unique_count_impl(a, consecutive, dim):
    out = torch.unique_consecutive(a, dim=dim) if consecutive else torch.unique(a, dim=dim)
    return torch.tensor(out.shape[dim], device=a.device)


@torchsymbol(id="torch.unique_count", torch_impl=_unique_count_impl)
def unique_count(a, consecutive, dim):
    """How many distinct slices along ``dim`` ``torch.unique`` finds in ``a`` (runs of equal ones with
    ``consecutive``), as a 0-d int64 tensor: eager's own unique, counted."""
    return TensorProxy.like(a, shape=(), dtype=dtypes.int64, requires_grad=False)


def _unique_dim(op: str, consecutive: bool, input, return_inverse, return_counts, dim):
    """``torch.unique(input, dim=dim)``: the number of distinct slices is eager's unique's, a data-dependent value."""
    if input.ndim == 0:
        raise ThunderIndexError(f"{op}: Dimension specified as {dim} but tensor has no dimensions")
    d = check_dim(op, input.ndim, dim)
    if input.numel() == 0 and input.shape[d] != 0:
        raise ThunderRuntimeError(
            f"{op}: There are 0 sized dimensions, and they aren't selected, so unique cannot be applied"
        )
    n = 0 if input.shape[d] == 0 else unique_count(input, consecutive, d).item()
    return unique_of_size(input, consecutive, bool(return_inverse), bool(return_counts), n, d)


def _unique(op: str, consecutive: bool, input, return_inverse, return_counts, dim):
    _check(op, input)
    if dim is not None:
        return _unique_dim(op, consecutive, input, return_inverse, return_counts, dim)
    flat = prims.reshape(input, (input.numel(),))
    if input.numel() == 0:
        n = 0
    else:  # the distinct values: where neighbours differ (NaNs are all distinct, as torch's), in sorted order
        ordered = flat if consecutive else sort(flat)[0]
        size = input.numel()
        differ = prims.ne(prims.slice_prim(ordered, (1,), (size,), (1,)), prims.slice_prim(ordered, (0,), (size - 1,), (1,)))
        n = prims.add(prims.sum(prims.convert_element_type(differ, dtypes.int64), (0,)), 1).item()
    return unique_of_size(input, consecutive, bool(return_inverse), bool(return_counts), n)


def unique(input, sorted=True, return_inverse=False, return_counts=False, dim=None):
    """``torch.unique``: its size is the number of distinct values, a data-dependent value."""
    return _unique("ltorch.unique", False, input, return_inverse, return_counts, dim)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):
    """``torch.unique_consecutive``: its size is the number of runs of equal values, a data-dependent value."""
    return _unique("ltorch.unique_consecutive", True, input, return_inverse, return_counts, dim)


def _split_points(t: TensorProxy):
    """The sections (0-d) or indices (1-d) that ``torch.tensor_split`` reads from the CPU int64 tensor ``t``:
    data-dependent values, pinned (each distinct value is its own continuation)."""
    op = "tensor_split"
    if t.device.type != "cpu":
        raise ThunderRuntimeError(f"{op} expected tensor_indices_or_sections to be on cpu, but it's on {t.device}")
    if t.dtype is not dtypes.int64:
        name = {dtypes.int32: "Int", dtypes.float32: "Float"}.get(t.dtype, str(t.dtype))
        raise ThunderRuntimeError(f"{op} expected tensor_indices_or_sections to have dtype of long, but got {name}")
    if t.ndim > 1:
        raise ThunderRuntimeError(
            f"{op} expected tensor_indices_or_sections to be a zero-dimensional or one-dimensional tensor, but got "
            f"a tensor with {t.ndim} dims"
        )
    if t.ndim == 0:
        return int(t.item())
    return [int(v) for v in t.tolist()]


def tensor_split(*args, **kwargs):
    """``torch.tensor_split``; indices or sections given as a tensor are its values, data-dependent (read as
    eager reads them), and the split is then the one with those numbers."""
    if len(args) > 1 and isinstance(args[1], TensorProxy):
        args = (args[0], _split_points(args[1]), *args[2:])
    if isinstance(kwargs.get("tensor_indices_or_sections"), TensorProxy):
        points = _split_points(kwargs.pop("tensor_indices_or_sections"))
        kwargs["sections" if isinstance(points, int) else "indices"] = points
    return _tensor_split(*args, **kwargs)


def narrow(*args, **kwargs):
    """``torch.narrow``; a start given as a 0-d integer tensor is its value, data-dependent (read as eager reads it)."""
    if len(args) > 2 and isinstance(args[2], TensorProxy):
        args = (*args[:2], _start(args[2]), *args[3:])
    if isinstance(kwargs.get("start"), TensorProxy):
        kwargs["start"] = _start(kwargs["start"])
    return _narrow(*args, **kwargs)


def _start(t: TensorProxy) -> int:
    if t.ndim != 0 or not dtypes.is_nonboolean_integer_dtype(t.dtype):
        raise ThunderRuntimeError("start must be an 0-dim integral Tensor.")
    return int(t.item())


def _is_mask(x) -> bool:
    return isinstance(x, TensorProxy) and x.dtype is torch.bool


def _mask_indices(a, key) -> tuple:
    """``key`` with each boolean mask replaced by the indices of its True elements, one index tensor per dim
    it covers (how torch indexes with it); raises eager's error for a mask whose shape does not match."""
    items = key if isinstance(key, tuple) else (key,)
    new, dim = [], 0
    for k in items:
        if k is Ellipsis:
            dim = None  # positions after it are counted from the end: torch checks those itself
        if _is_mask(k):
            if dim is not None:
                indexed = tuple(a.shape[dim : dim + k.ndim])
                if tuple(k.shape) != indexed:
                    raise ThunderIndexError(
                        f"ltorch.getitem: The shape of the mask {list(k.shape)} at index {dim} does not match the shape "
                        f"of the indexed tensor {list(a.shape)} at index {dim}"
                    )
                dim += k.ndim
            new.extend(nonzero(k, as_tuple=True))
            continue
        new.append(k)
        if dim is not None and k is not None:
            dim += 1
    return tuple(new)


def _read_slice_bounds(key):
    """``key`` with the integer tensors given as slice bounds read as ints, as eager reads them (``__index__``: a
    data-dependent value, checked per call; DeBERTa's ``rel_embeddings[m - att_span : m + att_span]``)."""
    def read(k):
        if isinstance(k, slice) and any(isinstance(x, TensorProxy) for x in (k.start, k.stop, k.step)):
            return slice(read_as_int(k.start), read_as_int(k.stop), read_as_int(k.step))
        return k

    return tuple(read(k) for k in key) if isinstance(key, tuple) else read(key)


def getitem_with_masks(a, key):
    """``a[key]``; a boolean mask in ``key`` stands for the indices of its True elements, so the result's size
    is a data-dependent value. Other keys go to ``getitem`` as they are."""
    key = _read_slice_bounds(index_key(key))
    items = key if isinstance(key, tuple) else (key,)
    if not any(_is_mask(k) for k in items):
        return getitem(a, key)
    if _is_mask(key) and key.ndim == 0:  # ``a[m]``, ``m`` 0-d: a new leading dim, of size 1 where ``m`` is True
        a, key = unsqueeze(a, 0), unsqueeze(key, 0)
    return getitem(a, _mask_indices(a, key))


def _selects_by_count(a, key, value, accumulate: bool = False) -> bool:
    """Whether ``a[key] = value`` (``+=`` with ``accumulate``) must index by the True elements of the masks in
    ``key``: a value with one element per selected element (``a[m] *= 2``), an accumulation, or a mask after
    other indices. A leading mask with a value for every selected element is a ``where``, whose shapes do not
    depend on data (``setitem``)."""
    if not isinstance(a, TensorProxy) or not any(_is_mask(k) for k in (key if isinstance(key, tuple) else (key,))):
        return False
    mask = mask_key(key)
    if mask is None or accumulate:
        return True
    rest = a.ndim - mask.ndim
    return isinstance(value, TensorProxy) and value.ndim > rest and not (value.ndim == rest + 1 and value.shape[0] == 1)


def setitem_with_masks(a, key, value) -> None:
    """``a[key] = value``, a mask selecting by its True elements where ``_selects_by_count`` says so. Returns
    None, as ``Tensor.__setitem__`` does (``x.__setitem__(i, v) or x``)."""
    key = _read_slice_bounds(index_key(key))
    setitem(a, _mask_indices(a, key) if _selects_by_count(a, key, value) else key, value)


def _index_put_with_masks(sym):
    """``sym`` (``index_put`` or ``index_put_``) with its masks selecting by their True elements where
    ``_selects_by_count`` says so (torch indexes with a mask's ``nonzero()``)."""

    def index_put(a, indices, values, accumulate=False):
        if isinstance(indices, (tuple, list)) and _selects_by_count(a, tuple(indices), values, bool(accumulate)):
            indices = _mask_indices(a, tuple(indices))
        return sym(a, indices, values, accumulate)

    index_put.__name__ = sym.name
    return index_put


# ``a[mask]`` and ``a[mask] = v`` reach the tracer as ``Tensor.__getitem__`` and ``Tensor.__setitem__``:
# those entries (set by the declarations in thunder.torch.indexing, which this module imports first) are
# replaced here.
torch_to_thunder_map[torch.Tensor.__getitem__] = getitem_with_masks
register_method("__getitem__", getitem_with_masks)
torch_to_thunder_map[torch.Tensor.__setitem__] = setitem_with_masks
register_method("__setitem__", setitem_with_masks)
for _sym, _torch_fns in ((index_put, (torch.index_put, torch.Tensor.index_put)), (index_put_, (torch.index_put_, torch.Tensor.index_put_))):
    _with_masks = _index_put_with_masks(_sym)
    for _torch_fn in _torch_fns:
        torch_to_thunder_map[_torch_fn] = _with_masks
    register_method(_sym.name, _with_masks)

for _fn, _torch_fns in ((nonzero, (torch.nonzero, torch.Tensor.nonzero)), (argwhere, (torch.argwhere, torch.Tensor.argwhere)),
                        (masked_select, (torch.masked_select, torch.Tensor.masked_select)),
                        (repeat_interleave, (torch.repeat_interleave, torch.Tensor.repeat_interleave)),
                        (bincount, (torch.bincount, torch.Tensor.bincount)),
                        (unique, (torch.unique, torch.Tensor.unique)),
                        (unique_consecutive, (torch.unique_consecutive, torch.Tensor.unique_consecutive)),
                        (tensor_split, (torch.tensor_split, torch.Tensor.tensor_split)),
                        (narrow, (torch.narrow, torch.Tensor.narrow))):  # fmt: skip
    for _torch_fn in _torch_fns:
        torch_to_thunder_map[_torch_fn] = _fn
    register_method(_fn.__name__, _fn)


def where(condition, input=None, other=None):
    """``torch.where``; its one-argument form, ``torch.where(condition)``, is
    ``torch.nonzero(condition, as_tuple=True)``: data-dependent shapes."""
    if input is None and other is None:
        return nonzero(condition, as_tuple=True)
    return _where(condition, input, other)


torch_to_thunder_map[torch.where] = where


def contains(a, element) -> bool:
    """``element in a``: whether some element of ``a`` equals ``element`` (torch's
    ``(element == a).any()``), a data-dependent truth value. Without it Python's ``in`` iterates
    ``a`` and asks the truth value of each row, which fails for more than one dim."""
    if not isinstance(element, (TensorProxy, Number)):
        raise ThunderRuntimeError(
            f"Tensor.__contains__ only supports Tensor or scalar, but you passed in a {type(element)}."
        )
    return bool(any_(eq(a, element)))


torch_to_thunder_map[torch.Tensor.__contains__] = contains
register_method("__contains__", contains)


def equal(a, b) -> bool:
    """``torch.equal``: same shape and equal elements, a data-dependent truth value."""
    _check("torch.equal", a)
    _check("torch.equal", b)
    if a.shape != b.shape:
        return False
    return bool(all_(eq(a, b)))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """``torch.allclose``: ``isclose`` everywhere, a data-dependent truth value."""
    from thunder.torch.eager_ops import EAGER_OPS

    _check("torch.allclose", a)
    _check("torch.allclose", b)
    return bool(all_(EAGER_OPS[torch.isclose](a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)))


for _fn, _torch_fns in ((equal, (torch.equal, torch.Tensor.equal)), (allclose, (torch.allclose, torch.Tensor.allclose))):
    for _torch_fn in _torch_fns:
        torch_to_thunder_map[_torch_fn] = _fn
    register_method(_fn.__name__, _fn)
