"""Shape primitives: broadcasting, reshaping, permuting, slicing, concatenating, padding.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence

import torch

from thunder.core import prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import check_same_device, check_same_dtype, check_tensor, is_differentiable, make_prim
from thunder.core.proxies import TensorProxy
from thunder.core.rules import grad_rules
from thunder.core.symbol import Symbol


class ShapePrimIDs(enum.Enum):
    BROADCAST_IN_DIM = enum.auto()
    RESHAPE = enum.auto()
    TRANSPOSE = enum.auto()
    SLICE = enum.auto()
    SQUEEZE = enum.auto()
    CAT = enum.auto()
    PAD = enum.auto()
    FLIP = enum.auto()


S = ShapePrimIDs


def broadcast_shapes(op: str, *shapes: Sequence[int]) -> tuple[int, ...]:
    """PyTorch's broadcasting of shapes, with its error text (``torch.broadcast_shapes`` imports sympy on its first
    call: a third of a second)."""
    ndim = max((len(s) for s in shapes), default=0)
    result = [1] * ndim
    for s in shapes:
        offset = ndim - len(s)
        for i, n in enumerate(s):
            cur = result[offset + i]
            if cur == 1:
                result[offset + i] = n
            elif n != 1 and n != cur:
                raise ThunderValueError(
                    f"{op}: the size of tensor a ({cur}) must match the size of tensor b ({n}) at non-singleton "
                    f"dimension {offset + i}: shapes {[list(x) for x in shapes]} cannot be broadcast"
                )
    return tuple(result)


def _broadcast_in_dim_meta(a, shape, broadcast_dimensions):
    op = "prims.broadcast_in_dim"
    check_tensor(op, "a", a)
    shape = tuple(shape)
    if len(broadcast_dimensions) != a.ndim:
        raise ThunderValueError(f"{op}: broadcast_dimensions {broadcast_dimensions} must have one entry per dim of a {a.shape}")
    for i, d in enumerate(broadcast_dimensions):
        if not 0 <= d < len(shape) or a.shape[i] not in (1, shape[d]):
            raise ThunderValueError(f"{op}: cannot broadcast a of shape {a.shape} to {shape} along dims {broadcast_dimensions}")
    return TensorProxy.like(a, shape=shape, requires_grad=False)


def _broadcast_in_dim_impl(a, shape, broadcast_dimensions):
    view_shape = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        view_shape[d] = a.shape[i]
    return a.reshape(view_shape).expand(shape)


broadcast_in_dim = make_prim(S.BROADCAST_IN_DIM, "broadcast_in_dim", _broadcast_in_dim_meta, impl=_broadcast_in_dim_impl)


def _reshape_meta(a, shape):
    op = "prims.reshape"
    check_tensor(op, "a", a)
    shape = tuple(shape)
    if any(not isinstance(d, int) or d < 0 for d in shape):
        raise ThunderValueError(f"{op}: shape {shape} must be non-negative ints (no -1 at the prim level)")
    if math.prod(shape) != math.prod(a.shape):
        raise ThunderValueError(f"{op}: shape {list(shape)} is invalid for input of size {math.prod(a.shape)}")
    return TensorProxy.like(a, shape=shape, requires_grad=False)


reshape = make_prim(S.RESHAPE, "reshape", _reshape_meta, impl=torch.reshape)


def _transpose_meta(a, permutation):
    op = "prims.transpose"
    check_tensor(op, "a", a)
    permutation = tuple(permutation)
    if sorted(permutation) != list(range(a.ndim)):
        raise ThunderValueError(f"{op}: {permutation} is not a permutation of the {a.ndim} dims of a")
    return TensorProxy.like(a, shape=tuple(a.shape[p] for p in permutation), requires_grad=False)


transpose = make_prim(S.TRANSPOSE, "transpose", _transpose_meta, impl=torch.permute)


def _slice_meta(a, start_indices, end_indices, strides=None):
    op = "prims.slice_prim"
    check_tensor(op, "a", a)
    strides = tuple(strides) if strides is not None else (1,) * a.ndim
    if not (len(start_indices) == len(end_indices) == len(strides) == a.ndim):
        raise ThunderValueError(f"{op}: start, end and strides need one entry per dim of a {a.shape}")
    shape = []
    for s, e, st, n in zip(start_indices, end_indices, strides, a.shape):
        if not (0 <= s <= e <= n) or st < 1:
            raise ThunderValueError(f"{op}: bad slice [{s}:{e}:{st}] of a dim of length {n}")
        shape.append((e - s + st - 1) // st)
    return TensorProxy.like(a, shape=tuple(shape), requires_grad=False)


def _slice_impl(a, start_indices, end_indices, strides=None):
    strides = strides or (1,) * a.ndim
    return a[tuple(slice(s, e, st) for s, e, st in zip(start_indices, end_indices, strides))]


slice_prim = make_prim(S.SLICE, "slice_prim", _slice_meta, impl=_slice_impl)


def _squeeze_meta(a, dims):
    op = "prims.squeeze"
    check_tensor(op, "a", a)
    dims = tuple(dims)
    for d in dims:
        if a.shape[d] != 1:
            raise ThunderValueError(f"{op}: cannot squeeze dim {d} of length {a.shape[d]}")
    return TensorProxy.like(a, shape=tuple(n for i, n in enumerate(a.shape) if i not in dims), requires_grad=False)


def _squeeze_impl(a, dims):
    return a.squeeze(tuple(dims)) if dims else a


squeeze = make_prim(S.SQUEEZE, "squeeze", _squeeze_meta, impl=_squeeze_impl)


def _cat_meta(tensors, dim):
    op = "prims.cat"
    if not tensors:
        raise ThunderValueError(f"{op}: expected a non-empty list of tensors")
    for i, t in enumerate(tensors):
        check_tensor(op, f"tensors[{i}]", t)
    names = [f"tensors[{i}]" for i in range(len(tensors))]
    check_same_device(op, tensors, names)
    check_same_dtype(op, tensors, names)
    first = tensors[0]
    for i, t in enumerate(tensors):
        if t.ndim != first.ndim or any(x != y for j, (x, y) in enumerate(zip(t.shape, first.shape)) if j != dim):
            raise ThunderValueError(
                f"{op}: tensors[{i}] has shape {t.shape}, which does not match {first.shape} outside dim {dim}"
            )
    shape = list(first.shape)
    shape[dim] = sum(t.shape[dim] for t in tensors)
    return TensorProxy.like(first, shape=tuple(shape), requires_grad=False)


cat = make_prim(S.CAT, "cat", _cat_meta, impl=torch.cat)


def _pad_meta(a, padding_value, padding_config):
    op = "prims.pad"
    check_tensor(op, "a", a)
    if len(padding_config) != a.ndim:
        raise ThunderValueError(f"{op}: padding_config needs (lo, hi, interior) for each of the {a.ndim} dims")
    shape = []
    for n, (lo, hi, interior) in zip(a.shape, padding_config):
        if interior < 0:
            raise ThunderValueError(f"{op}: interior padding must be >= 0")
        size = n + lo + hi + max(n - 1, 0) * interior
        if size < 0:
            raise ThunderValueError(f"{op}: padding {padding_config} gives a negative size")
        shape.append(size)
    return TensorProxy.like(a, shape=tuple(shape), requires_grad=False)


def _pad_impl(a, padding_value, padding_config):
    # Interior padding: scatter into a strided view of a filled tensor; then crop or pad the edges.
    if any(interior for _, _, interior in padding_config):
        shape = [n + max(n - 1, 0) * i for n, (_, _, i) in zip(a.shape, padding_config)]
        out = torch.full(shape, padding_value, dtype=a.dtype, device=a.device)
        out[tuple(slice(None, None, i + 1) for _, _, i in padding_config)] = a
        a = out
    pads = []
    for lo, hi, _ in reversed(padding_config):
        pads += [lo, hi]
    return torch.nn.functional.pad(a, pads, value=padding_value)


pad = make_prim(S.PAD, "pad", _pad_meta, impl=_pad_impl)


def _flip_meta(a, dims):
    check_tensor("prims.flip", "a", a)
    if not isinstance(dims, (tuple, list)):
        raise ThunderTypeError("prims.flip: dims must be a tuple of ints")
    return TensorProxy.like(a, requires_grad=False)


flip = make_prim(S.FLIP, "flip", _flip_meta, impl=torch.flip)


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]


# --- gradients (Note [VJP rules] in thunder.core.rules) ---
# Shape prims move values without changing them: each gradient moves the cotangent back
# (complex values need nothing special).


@grad_rules.register(broadcast_in_dim)
def _broadcast_in_dim_grad(g, out, a, shape, broadcast_dimensions):
    """Sum over the new dims and over the dims of length 1 that were expanded."""
    if not is_differentiable(a):
        return (None, None, None)
    expanded = [d for i, d in enumerate(broadcast_dimensions) if a.shape[i] == 1 and shape[d] != 1]
    summed = tuple(sorted({d for d in range(len(shape)) if d not in broadcast_dimensions} | set(expanded)))
    grad = prims.sum(g, summed) if summed else g
    return (_reshaped_like(grad, a), None, None)


def _reshaped_like(g, a):
    """``g`` with ``a``'s shape (``g`` itself where it already has it)."""
    return g if tuple(g.shape) == tuple(a.shape) else reshape(g, tuple(a.shape))


@grad_rules.register(reshape)
def _reshape_grad(g, out, a, shape):
    return (_reshaped_like(g, a) if is_differentiable(a) else None, None)


@grad_rules.register(squeeze)
def _squeeze_grad(g, out, a, dims):
    return (_reshaped_like(g, a) if is_differentiable(a) else None, None)


@grad_rules.register(transpose)
def _transpose_grad(g, out, a, permutation):
    if not is_differentiable(a):
        return (None, None)
    inverse = tuple(tuple(permutation).index(i) for i in range(a.ndim))
    return (transpose(g, inverse), None)


@grad_rules.register(flip)
def _flip_grad(g, out, a, dims):
    return (flip(g, dims) if is_differentiable(a) else None, None)


def _unslice_config(shape, start_indices, end_indices, strides):
    """The lax padding config that puts a slice's elements back where they came from, zeros elsewhere."""
    config = []
    for n, s, e, st in zip(shape, start_indices, end_indices, strides):
        length = (e - s + st - 1) // st
        if length == 0:
            config.append((s, n - s, 0))
        else:
            last = s + (length - 1) * st
            config.append((s, n - last - 1, st - 1))
    return config


@grad_rules.register(slice_prim)
def _slice_grad(g, out, a, start_indices, end_indices, *strides):
    params = (None,) * (2 + len(strides))  # strides is optional: one entry per argument given
    if not is_differentiable(a):
        return (None, *params)
    strides = tuple(strides[0]) if strides and strides[0] is not None else (1,) * a.ndim
    config = _unslice_config(a.shape, start_indices, end_indices, strides)
    if all(type(n) is int and n == 0 for edge in config for n in edge):
        return (g, *params)  # the whole of ``a`` (GPT-2's ``hidden_states[:, -0:, :]``)
    return (pad(g, 0, config), *params)


@grad_rules.register(cat)
def _cat_grad(g, out, tensors, dim):
    grads, offset = [], 0
    for t in tensors:
        n = t.shape[dim]
        if is_differentiable(t):
            start = [0] * g.ndim
            end = list(g.shape)
            start[dim], end[dim] = offset, offset + n
            grads.append(slice_prim(g, start, end, (1,) * g.ndim))
        else:
            grads.append(None)
        offset += n
    return (type(tensors)(grads) if isinstance(tensors, (list, tuple)) else grads, None)


@grad_rules.register(pad)
def _pad_grad(g, out, a, padding_value, padding_config):
    """Undo the edges (negative padding crops, so cropped elements get zeros back), then take
    every ``interior + 1``-th element."""
    if not is_differentiable(a):
        return (None, None, None)
    inner = pad(g, 0, [(-lo, -hi, 0) for lo, hi, _ in padding_config])
    start = [0] * a.ndim
    grad = slice_prim(inner, start, list(inner.shape), [interior + 1 for _, _, interior in padding_config])
    return (grad, None, None)
