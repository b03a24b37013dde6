"""Indexing primitives: gathering from and scattering into tensors by integer index tensors.

Index tensors hold int32 or int64 values; their values are data, so a prim cannot check that
they are in range: the executor that runs it does (PyTorch raises an IndexError). Like all
prims these do no broadcasting and no type promotion.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import enum
import math

import torch

from thunder.core import prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import (
    canonicalize_dim,
    check_same_device,
    check_same_dtype,
    check_tensor,
    is_differentiable,
    make_prim,
    zeros_like,
)
from thunder.core.proxies import TensorProxy
from thunder.core.rules import grad_rules
from thunder.core.symbol import MAY_RAISE, Symbol


class IndexingPrimIDs(enum.Enum):
    TAKE = enum.auto()
    TAKE_ALONG_AXIS = enum.auto()
    SCATTER = enum.auto()
    SCATTER_ADD = enum.auto()
    INDEX_ADD = enum.auto()
    INDEX_COPY = enum.auto()
    INDEX_PUT = enum.auto()
    SLICE_SCATTER = enum.auto()


IX = IndexingPrimIDs
_INDEX_DTYPES = (torch.int32, torch.int64)


def _check_index(op: str, arg: str, index) -> None:
    check_tensor(op, arg, index)
    if index.dtype not in _INDEX_DTYPES:
        raise ThunderTypeError(f"{op}: expected {arg} to have dtype int32 or int64, but it has dtype {index.dtype}")


def _take_meta(a, index, dim):
    op = "prims.take"
    check_tensor(op, "a", a)
    _check_index(op, "index", index)
    check_same_device(op, [a, index], ["a", "index"])
    if index.ndim != 1:
        raise ThunderValueError(f"{op}: index must be a vector (1-D), but has shape {index.shape}")
    dim = canonicalize_dim(op, a.ndim, dim)
    shape = list(a.shape)
    if a.ndim:
        shape[dim] = index.shape[0]
    elif index.shape[0] != 1:
        raise ThunderValueError(f"{op}: indexing a 0-d tensor needs exactly one index, got {index.shape[0]}")
    return TensorProxy.like(a, shape=tuple(shape), requires_grad=False)


def _take_impl(a, index, dim):
    try:
        return torch.index_select(a, dim, index)
    except RuntimeError:  # index_select's out-of-range error is a RuntimeError; eager's indexing raises IndexError
        n = a.shape[dim] if a.ndim else 1
        outside = index[(index >= n) | (index < -n)]
        if outside.numel():
            raise IndexError(f"index {outside[0].item()} is out of bounds for dimension {dim} with size {n}") from None
        raise


# ``take(a, index, dim)``: the slices of ``a`` at positions ``index`` (1-D) along ``dim``.
# Out-of-range index values make eager raise: such an op is kept when its result is unused (MAY_RAISE).
_INDEX_VALUES = (MAY_RAISE,)

take = make_prim(IX.TAKE, "take", _take_meta, impl=_take_impl, tags=_INDEX_VALUES)


def _check_along_axis(op: str, a, index, dim, src=None) -> int:
    check_tensor(op, "a", a)
    _check_index(op, "index", index)
    check_same_device(op, [a, index], ["a", "index"])
    dim = canonicalize_dim(op, a.ndim, dim)
    if index.ndim != a.ndim and not (a.ndim == 0 and index.ndim <= 1):
        raise ThunderValueError(
            f"{op}: index must have the same number of dimensions as a ({a.ndim}), but has shape {index.shape}"
        )
    for d, (n, m) in enumerate(zip(index.shape, a.shape)):
        if d != dim and n > m:
            raise ThunderValueError(f"{op}: index has size {n} at dim {d}, larger than a's size {m} there")
    if src is not None:
        check_tensor(op, "src", src)
        check_same_dtype(op, [a, src], ["a", "src"])
        check_same_device(op, [a, src], ["a", "src"])
        if src.ndim != index.ndim or any(n > m for n, m in zip(index.shape, src.shape)):
            raise ThunderValueError(f"{op}: src of shape {src.shape} must cover index of shape {index.shape}")
    return dim


def _take_along_axis_meta(a, index, dim):
    _check_along_axis("prims.take_along_axis", a, index, dim)
    return TensorProxy.like(a, shape=index.shape, requires_grad=False)


def _take_along_axis_impl(a, index, dim):
    return torch.gather(a, dim, index)


# ``take_along_axis(a, index, dim)``: torch.gather — out[i][j] = a[index[i][j]][j] for dim 0.
take_along_axis = make_prim(IX.TAKE_ALONG_AXIS, "take_along_axis", _take_along_axis_meta, impl=_take_along_axis_impl, tags=_INDEX_VALUES)


def _scatter_meta_for(name):
    def meta(a, index, src, dim):
        _check_along_axis(f"prims.{name}", a, index, dim, src)
        return TensorProxy.like(a, requires_grad=False)

    return meta


def _scatter_impl(a, index, src, dim):
    return torch.scatter(a, dim, index, src)


def _scatter_add_impl(a, index, src, dim):
    return torch.scatter_add(a, dim, index, src)


# ``scatter(a, index, src, dim)``: a copy of ``a`` with src[i][j] written at a[index[i][j]][j] (dim 0).
scatter = make_prim(IX.SCATTER, "scatter", _scatter_meta_for("scatter"), impl=_scatter_impl, tags=_INDEX_VALUES)
# ``scatter_add``: the same, but adding (duplicates accumulate).
scatter_add = make_prim(IX.SCATTER_ADD, "scatter_add", _scatter_meta_for("scatter_add"), impl=_scatter_add_impl, tags=_INDEX_VALUES)


def _index_update_meta_for(name):
    def meta(a, index, value, dim):
        op = f"prims.{name}"
        check_tensor(op, "a", a)
        _check_index(op, "index", index)
        check_tensor(op, "value", value)
        check_same_dtype(op, [a, value], ["a", "value"])
        check_same_device(op, [a, index, value], ["a", "index", "value"])
        dim = canonicalize_dim(op, a.ndim, dim)
        if index.ndim > 1:
            raise ThunderValueError(f"{op}: index must be a vector (1-D), but has shape {index.shape}")
        expected = list(a.shape)
        if a.ndim:
            expected[dim] = index.numel()
        if tuple(value.shape) != tuple(expected) and not (a.ndim == 0 and value.numel() == 1):
            raise ThunderValueError(f"{op}: value must have shape {tuple(expected)}, but has shape {value.shape}")
        return TensorProxy.like(a, requires_grad=False)

    return meta


def _index_add_impl(a, index, value, dim):
    return torch.index_add(a, dim, index, value)


def _index_copy_impl(a, index, value, dim):
    return torch.index_copy(a, dim, index, value)


# ``index_add(a, index, value, dim)``: a copy of ``a`` with value's slices added at positions ``index`` along dim.
index_add = make_prim(IX.INDEX_ADD, "index_add", _index_update_meta_for("index_add"), impl=_index_add_impl, tags=_INDEX_VALUES)
# ``index_copy(a, index, value, dim)``: the same, but overwriting.
index_copy = make_prim(IX.INDEX_COPY, "index_copy", _index_update_meta_for("index_copy"), impl=_index_copy_impl, tags=_INDEX_VALUES)


def advanced_index_shape(shape, indices) -> tuple[int, ...]:
    """The shape of ``a[indices]`` where ``indices`` holds, per leading dim, an index tensor
    (already broadcast to one shape) or None (a full slice): PyTorch's rule puts the index
    shape where the tensors are when they are adjacent, and first otherwise."""
    positions = [i for i, x in enumerate(indices) if x is not None]
    if not positions:
        return tuple(shape)
    bshape = tuple(indices[positions[0]].shape)
    rest = [n for i, n in enumerate(shape) if i >= len(indices) or indices[i] is None]
    if positions == list(range(positions[0], positions[-1] + 1)):
        first = positions[0]
        return tuple(rest[:first]) + bshape + tuple(rest[first:])
    return bshape + tuple(rest)


def _index_put_meta(a, indices, values, accumulate):
    op = "prims.index_put"
    check_tensor(op, "a", a)
    check_tensor(op, "values", values)
    check_same_dtype(op, [a, values], ["a", "values"])
    indices = tuple(indices)
    if len(indices) > a.ndim:
        raise ThunderValueError(f"{op}: {len(indices)} indices for a tensor of {a.ndim} dims")
    tensors = [x for x in indices if x is not None]
    if not tensors:
        raise ThunderValueError(f"{op}: expected at least one index tensor")
    for i, x in enumerate(tensors):
        _check_index(op, f"indices[{i}]", x)
        if x.shape != tensors[0].shape:
            raise ThunderValueError(f"{op}: index tensors must have one shape (prims do not broadcast)")
    check_same_device(op, [a, values, *tensors], ["a", "values"] + ["indices"] * len(tensors))
    expected = advanced_index_shape(a.shape, indices)
    if tuple(values.shape) != expected:
        raise ThunderValueError(f"{op}: values must have shape {expected}, but has shape {values.shape}")
    if not isinstance(accumulate, bool):
        raise ThunderTypeError(f"{op}: accumulate must be a bool, got {accumulate!r}")
    return TensorProxy.like(a, requires_grad=False)


def _index_put_impl(a, indices, values, accumulate):
    return torch.ops.aten.index_put(a, list(indices), values, accumulate)


# ``index_put(a, indices, values, accumulate)``: a copy of ``a`` with ``a[indices] = values``
# (``+=`` when accumulate); indices as for ``advanced_index_shape``.
index_put = make_prim(IX.INDEX_PUT, "index_put", _index_put_meta, impl=_index_put_impl, tags=_INDEX_VALUES)


def _slice_scatter_meta(a, src, start_indices, end_indices, strides):
    op = "prims.slice_scatter"
    check_tensor(op, "a", a)
    check_tensor(op, "src", src)
    check_same_dtype(op, [a, src], ["a", "src"])
    check_same_device(op, [a, src], ["a", "src"])
    if not (len(start_indices) == len(end_indices) == len(strides) == a.ndim):
        raise ThunderValueError(f"{op}: start, end and strides need one entry per dim of a {a.shape}")
    shape = []
    for s, e, st, n in zip(start_indices, end_indices, strides, a.shape):
        if not (0 <= s <= e <= n) or st < 1:
            raise ThunderValueError(f"{op}: bad slice [{s}:{e}:{st}] of a dim of length {n}")
        shape.append((e - s + st - 1) // st)
    if tuple(src.shape) != tuple(shape):
        raise ThunderValueError(f"{op}: src must have the slice's shape {tuple(shape)}, but has shape {src.shape}")
    return TensorProxy.like(a, requires_grad=False)


def _slice_scatter_impl(a, src, start_indices, end_indices, strides):
    out = a.clone()
    out[tuple(slice(s, e, st) for s, e, st in zip(start_indices, end_indices, strides))] = src
    return out


# ``slice_scatter(a, src, start, end, strides)``: a copy of ``a`` whose strided slice (as
# ``slice_prim`` reads it) is replaced by ``src``.
slice_scatter = make_prim(IX.SLICE_SCATTER, "slice_scatter", _slice_scatter_meta, impl=_slice_scatter_impl)


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]


# --- gradients (Note [VJP rules] in thunder.core.rules) ---
# A gather's gradient scatters (adding, since an index may repeat); a scatter's gradient
# gathers. Index tensors get None. Values are moved, never combined, so complex inputs need
# nothing special.


def _index_grads(indices) -> list | tuple:
    return type(indices)(None for _ in indices)


def _padded_to(x, shape):
    """``x`` padded at the end of each dim with zeros to ``shape`` (a scatter's ``src`` may be
    larger than its index; the part outside the index gets no gradient)."""
    if tuple(x.shape) == tuple(shape):
        return x
    return prims.pad(x, 0, [(0, n - m, 0) for m, n in zip(x.shape, shape)])


@grad_rules.register(take)
def _take_grad(g, out, a, index, dim):
    if not is_differentiable(a):
        return (None, None, None)
    return (index_add(zeros_like(a), index, g, dim), None, None)


@grad_rules.register(take_along_axis)
def _take_along_axis_grad(g, out, a, index, dim):
    if not is_differentiable(a):
        return (None, None, None)
    return (scatter_add(zeros_like(a), index, g, dim), None, None)


def _gathered_src(g, index, src, dim):
    return _padded_to(take_along_axis(g, index, dim), src.shape) if is_differentiable(src) else None


@grad_rules.register(scatter)
def _scatter_grad(g, out, a, index, src, dim):
    # torch: a gets the cotangent with the written positions zeroed; src gathers it
    ga = scatter(g, index, zeros_like(g, shape=index.shape), dim) if is_differentiable(a) else None
    return (ga, None, _gathered_src(g, index, src, dim), None)


@grad_rules.register(scatter_add)
def _scatter_add_grad(g, out, a, index, src, dim):
    return (g if is_differentiable(a) else None, None, _gathered_src(g, index, src, dim), None)


def _taken_value(g, index, value, dim):
    if not is_differentiable(value):
        return None
    taken = take(g, index, dim)
    return taken if tuple(taken.shape) == tuple(value.shape) else prims.reshape(taken, tuple(value.shape))


@grad_rules.register(index_add)
def _index_add_grad(g, out, a, index, value, dim):
    return (g if is_differentiable(a) else None, None, _taken_value(g, index, value, dim), None)


@grad_rules.register(index_copy)
def _index_copy_grad(g, out, a, index, value, dim):
    ga = index_copy(g, index, zeros_like(value), dim) if is_differentiable(a) else None
    return (ga, None, _taken_value(g, index, value, dim), None)


def _advanced_take(x, indices):
    """``x[indices]`` for ``index_put``'s indices (index tensors of one shape, or None for a full
    slice), from one ``take``: the indexed dims go first and are flattened into one, the index
    tensors into one linear index."""
    positions = [i for i, t in enumerate(indices) if t is not None]
    rest = [i for i in range(x.ndim) if i not in positions]
    rest_shape = tuple(x.shape[i] for i in rest)
    index_shape = tuple(indices[positions[0]].shape)
    rows = prims.reshape(
        prims.transpose(x, (*positions, *rest)), (math.prod(x.shape[p] for p in positions), *rest_shape)
    )
    linear = None
    for p in positions:
        i = prims.convert_element_type(indices[p], torch.int64)
        i = prims.where(prims.lt(i, 0), prims.add(i, x.shape[p]), i)  # negative indices count from the end
        linear = i if linear is None else prims.add(prims.mul(linear, x.shape[p]), i)
    flat = prims.reshape(linear, (math.prod(index_shape),))
    taken = prims.reshape(take(rows, flat, 0), (*index_shape, *rest_shape))
    first = positions[0]
    if positions == list(range(first, positions[-1] + 1)) and first > 0:
        # adjacent index tensors: their dims sit where the indexed dims were (advanced_index_shape)
        k = len(index_shape)
        taken = prims.transpose(
            taken, (*range(k, k + first), *range(k), *range(k + first, k + len(rest_shape)))
        )
    return taken


@grad_rules.register(index_put)
def _index_put_grad(g, out, a, indices, values, accumulate):
    ga = None
    if is_differentiable(a):
        ga = g if accumulate else index_put(g, indices, zeros_like(values), False)
    gv = _advanced_take(g, indices) if is_differentiable(values) else None
    return (ga, _index_grads(indices), gv, None)


@grad_rules.register(slice_scatter)
def _slice_scatter_grad(g, out, a, src, start_indices, end_indices, strides):
    ga = slice_scatter(g, zeros_like(src), start_indices, end_indices, strides) if is_differentiable(a) else None
    gs = prims.slice_prim(g, start_indices, end_indices, strides) if is_differentiable(src) else None
    return (ga, gs, None, None, None)
