"""Rearranging ops of the torch language: flipping, rolling, repeat_interleave, diff, padding,
triangles, and the other spellings of the shape ops (split_with_sizes, hsplit/vsplit/dsplit,
atleast_*d, broadcast_tensors, meshgrid), with PyTorch's argument forms and error text.

Split from ``shape`` (whose helpers they use) to keep each module to one family.

Layer: language. Imports: core, torch.base, torch.shape.
"""

from __future__ import annotations

import functools

import torch

from thunder.core import dtypes, prims
from thunder.core.errors import (
    ThunderTypeError,
    ThunderValueError,
    UnsupportedOpError,
)
from thunder.core.proxies import NumberProxy, TensorProxy, pyval
from thunder.torch.base import (
    broadcast_shapes,
    expand_to,
    make_inplace,
    torchsymbol,
)

__all__: list[str] = []

from thunder.torch.shape import (
    _cat,
    _check_tensor,
    _reshape,
    check_dim,
    check_dims,
    chunk,
    shape_arg,
    slice_dim,
    split,
    tensor_split,
    unsqueeze,
)

__all__: list[str] = []


def _export(sym):
    globals()[sym.name] = sym
    __all__.append(sym.name)
    return sym

# ----------------------------------------------------------------------------------------
# Flipping, rolling, padding, triangles
# ----------------------------------------------------------------------------------------


@torchsymbol(torch.flip, method_name="flip", torch_impl=torch.Tensor.flip, one_sequence="dims")
def flip(a, *args, dims=None):
    """``torch.flip``: reverses the order of elements along ``dims``."""
    op = "ltorch.flip"
    _check_tensor(op, a)
    dims = check_dims(op, a.ndim, shape_arg(op, args, dims, name="dims"))
    return prims.flip(a, dims)


@torchsymbol(torch.fliplr, method_name="fliplr")
def fliplr(a):
    if a.ndim < 2:
        raise ThunderValueError("ltorch.fliplr: Input must be >= 2-d.")
    return prims.flip(a, (1,))


@torchsymbol(torch.flipud, method_name="flipud")
def flipud(a):
    if a.ndim < 1:
        raise ThunderValueError("ltorch.flipud: Input must be >= 1-d.")
    return prims.flip(a, (0,))


def _roll_dim(a, shift, d):
    n = a.shape[d]
    if n == 0:
        return a
    s = shift % n
    if s == 0:
        return a
    return prims.cat([slice_dim(a, d, n - s, n), slice_dim(a, d, 0, n - s)], d)


@torchsymbol(torch.roll, method_name="roll")
def roll(a, shifts, dims=None):
    """``torch.roll``: elements shifted cyclically along ``dims`` (the flattened tensor when None)."""
    op = "ltorch.roll"
    _check_tensor(op, a)
    shifts = (shifts,) if isinstance(shifts, (int, NumberProxy)) else tuple(shifts)
    shifts = tuple(pyval(s) for s in shifts)
    if dims is None or (isinstance(dims, (tuple, list)) and not dims):
        if len(shifts) != 1:
            raise ThunderValueError(f"{op}: shifts and dimensions must align. shifts: {len(shifts)}, dims:0")
        out = _roll_dim(_reshape(a, (a.numel(),)), shifts[0], 0)
        return _reshape(out, a.shape)
    dims = (dims,) if isinstance(dims, (int, NumberProxy)) else tuple(dims)
    if len(shifts) != len(dims):
        raise ThunderValueError(f"{op}: shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    out = a
    for s, d in zip(shifts, dims):
        out = _roll_dim(out, s, check_dim(op, a.ndim, d))
    if out is a:
        out = prims.slice_prim(a, (0,) * a.ndim, a.shape, (1,) * a.ndim)
    return out


@torchsymbol(torch.repeat_interleave, method_name="repeat_interleave")
def repeat_interleave(a, repeats, dim=None, *, output_size=None):
    """``torch.repeat_interleave``: each element repeated ``repeats`` times along ``dim`` (of the
    flattened tensor when None), for an int ``repeats``: a new dim after ``dim``, broadcast, merged.
    Tensor ``repeats`` (per-element counts) give a shape that depends on their values."""
    op = "ltorch.repeat_interleave"
    _check_tensor(op, a)
    if isinstance(repeats, TensorProxy):
        raise UnsupportedOpError(
            f"{op}: repeats given as a tensor make the output's shape depend on its values, which are not known "
            "while tracing; pass a Python int"
        )
    repeats = pyval(repeats)
    if isinstance(repeats, bool) or not isinstance(repeats, int):
        raise ThunderTypeError(f"{op}: repeats must be an int, but got {type(repeats).__name__} {repeats!r}")
    if repeats < 0:
        raise ThunderValueError(f"{op}: Repeats must be non-negative")
    if dim is None:
        a, d = _reshape(a, (a.numel(),)), 0
    else:
        d = check_dim(op, a.ndim, dim)
    if a.ndim == 0:
        a = _reshape(a, (1,))
    out_shape = (*a.shape[:d], a.shape[d] * repeats, *a.shape[d + 1 :])
    if output_size is not None and pyval(output_size) != out_shape[d]:
        raise ThunderValueError(f"{op}: output_size {pyval(output_size)} does not match the output's {out_shape[d]}")
    spread = (*a.shape[: d + 1], repeats, *a.shape[d + 1 :])
    kept = tuple(i if i <= d else i + 1 for i in range(a.ndim))
    return _reshape(prims.broadcast_in_dim(a, spread, kept), out_shape)


@torchsymbol(torch.diff, method_name="diff")
def diff(a, n=1, dim=-1, prepend=None, append=None):
    """``torch.diff``: the ``n``-th forward difference along ``dim`` (``a[1:] - a[:-1]``, or
    ``a[1:] ^ a[:-1]`` for bool), after joining ``prepend`` and ``append`` (same number of dims as
    ``a``) to its ends. An ``n`` at least the length of the dim gives an empty dim; ``n=0`` the input.

    Built from slices, ``cat`` and ``sub``, so its gradient is theirs: each input element's
    cotangent is the difference of its neighbours' cotangents, as in eager."""
    op = "ltorch.diff"
    _check_tensor(op, a)
    n = pyval(n)
    if not isinstance(n, int):
        raise ThunderTypeError(f"{op}: n must be an int, but got {type(n).__name__}")
    if n < 0:
        raise ThunderValueError(f"{op}: order must be non-negative but got {n}")
    if a.ndim == 0:
        raise ThunderValueError(f"{op}: diff expects input to be at least one-dimensional")
    d = check_dim(op, a.ndim, dim)
    parts = [a]
    for name, extra in (("prepend", prepend), ("append", append)):
        if extra is None:
            continue
        if not isinstance(extra, TensorProxy):
            raise ThunderTypeError(f"{op}: {name} must be a tensor, but got {type(extra).__name__}")
        if extra.ndim != a.ndim:
            raise ThunderValueError(
                f"{op}: diff expects prepend or append to be the same dimension as input, but {name} has "
                f"{extra.ndim} dims and input {a.ndim}"
            )
        parts.insert(0 if name == "prepend" else len(parts), extra)
    out = _cat(op, parts, d) if len(parts) > 1 else a
    if n == 0:  # eager checks prepend and append, then returns a copy of the input
        return prims.clone(a)
    for _ in range(n):
        length = out.shape[d]
        if length == 0:
            break
        later, earlier = slice_dim(out, d, 1, length), slice_dim(out, d, 0, length - 1)
        out = prims.ne(later, earlier) if out.dtype is dtypes.bool8 else prims.sub(later, earlier)
    if out is a:  # n == 0 and nothing joined: a new tensor, as eager returns
        out = prims.slice_prim(a, (0,) * a.ndim, a.shape, (1,) * a.ndim)
    return out


def _pad_nonconstant(op, a, pairs, mode):
    """reflect / replicate / circular padding of the trailing dims, built from slices and cat."""
    out = a
    for d, (lo, hi) in pairs:
        n = out.shape[d]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ThunderValueError(
                f"{op}: Padding size should be less than the corresponding input dimension, but got: padding "
                f"({lo}, {hi}) at dimension {d} of input {list(a.shape)}"
            )
        if mode == "circular" and (lo > n or hi > n):
            raise ThunderValueError(f"{op}: Padding value causes wrapping around more than once.")
        if mode == "replicate" and (lo < 0 or hi < 0):
            # eager reads each output position j at clamp(j - lo, 0, n - 1): a crop past the far edge
            # still replicates that edge
            size = n + lo + hi
            if size < 1:
                raise ThunderValueError(f"{op}: input (size {n} at dimension {d}) is too small. Calculated output size: {size}")
            idx = prims.iota(size, start=-lo, step=1, device=out.device, dtype=torch.int64)
            bound = functools.partial(prims.full, (size,), device=out.device, dtype=torch.int64)
            out = prims.take(out, prims.minimum(prims.maximum(idx, bound(0)), bound(n - 1)), d)
            continue
        if lo < 0 or hi < 0:
            out = slice_dim(out, d, max(-lo, 0), n - max(-hi, 0))
            lo, hi, n = max(lo, 0), max(hi, 0), out.shape[d]
        parts = []
        if lo:
            if mode == "reflect":
                parts.append(prims.flip(slice_dim(out, d, 1, lo + 1), (d,)))
            elif mode == "replicate":
                edge = slice_dim(out, d, 0, 1)
                shape = list(out.shape)
                shape[d] = lo
                parts.append(prims.broadcast_in_dim(edge, tuple(shape), tuple(range(out.ndim))))
            else:
                parts.append(slice_dim(out, d, n - lo, n))
        parts.append(out)
        if hi:
            if mode == "reflect":
                parts.append(prims.flip(slice_dim(out, d, n - 1 - hi, n - 1), (d,)))
            elif mode == "replicate":
                edge = slice_dim(out, d, n - 1, n)
                shape = list(out.shape)
                shape[d] = hi
                parts.append(prims.broadcast_in_dim(edge, tuple(shape), tuple(range(out.ndim))))
            else:
                parts.append(slice_dim(out, d, 0, hi))
        out = prims.cat(parts, d) if len(parts) > 1 else out
    return out


@torchsymbol(torch.nn.functional.pad)
def pad(input, pad, mode="constant", value=None):
    """``torch.nn.functional.pad``: ``pad`` lists (left, right) pairs from the last dim backwards;
    negative amounts crop. Modes: constant, reflect, replicate, circular."""
    op = "ltorch.pad"
    a = input
    _check_tensor(op, a)
    amounts = [pyval(p) for p in pad]
    if len(amounts) % 2:
        raise ThunderValueError(f"{op}: Padding length must be divisible by 2")
    if len(amounts) // 2 > a.ndim:
        raise ThunderValueError(
            f"{op}: Padding length should be less than or equal to two times the input dimension but got padding length {len(amounts)} and input of dimension {a.ndim}"
        )
    pairs = [(a.ndim - 1 - i, (amounts[2 * i], amounts[2 * i + 1])) for i in range(len(amounts) // 2)]
    if mode == "constant":
        config = [(0, 0, 0)] * a.ndim
        for d, (lo, hi) in pairs:
            config[d] = (lo, hi, 0)
            if a.shape[d] + lo + hi < 0:
                raise ThunderValueError(
                    f"{op}: The input size {a.shape[d]}, plus negative padding {lo} and {hi} resulted in a negative "
                    f"output size, which is invalid. Check dimension {d} of your input."
                )
        fill = 0 if value is None else pyval(value)
        fill = dtypes.dtype_to_python_type(a.dtype)(fill) if not a.dtype.is_floating_point else float(fill)
        return prims.pad(a, fill, tuple(config))
    if mode not in ("reflect", "replicate", "circular"):
        raise ThunderValueError(
            f"{op}: Unrecognised padding mode {mode!r}; expected 'constant', 'reflect', 'replicate' or 'circular'"
        )
    if value is not None and pyval(value) != 0:
        raise ThunderValueError(f'{op}: Padding mode "{mode}" doesn\'t take in value argument')
    return _pad_nonconstant(op, a, pairs, mode)


def _triangle(op: str, a, diagonal, lower: bool):
    _check_tensor(op, a)
    if a.ndim < 2:
        raise ThunderValueError(f"{op}: input tensor must have at least 2 dimensions")
    n, m = a.shape[-2], a.shape[-1]
    rows = prims.iota(n, start=0, step=1, device=a.device, dtype=torch.int64)
    cols = prims.iota(m, start=0, step=1, device=a.device, dtype=torch.int64)
    rows = prims.broadcast_in_dim(rows, (n, m), (0,))
    cols = prims.broadcast_in_dim(cols, (n, m), (1,))
    diff = prims.sub(cols, rows)
    k = pyval(diagonal)
    mask = (
        prims.le(diff, prims.full((n, m), k, device=a.device, dtype=torch.int64))
        if lower
        else prims.ge(diff, prims.full((n, m), k, device=a.device, dtype=torch.int64))
    )
    mask = expand_to(mask, a.shape)
    zero = False if a.dtype is torch.bool else 0
    zeros = prims.full(a.shape, zero, device=a.device, dtype=a.dtype)
    return prims.where(mask, a, zeros)


@torchsymbol(torch.tril, method_name="tril")
def tril(a, diagonal=0):
    """``torch.tril``: elements on and below the ``diagonal``-th diagonal; the rest are zero."""
    return _triangle("ltorch.tril", a, diagonal, True)


@torchsymbol(torch.triu, method_name="triu")
def triu(a, diagonal=0):
    """``torch.triu``: elements on and above the ``diagonal``-th diagonal; the rest are zero."""
    return _triangle("ltorch.triu", a, diagonal, False)


tril_ = make_inplace(tril)
triu_ = make_inplace(triu)

for _sym in (tril_, triu_, flip, fliplr, flipud, roll, diff, pad, tril, triu, repeat_interleave):
    __all__.append(_sym.name)


# ----------------------------------------------------------------------------------------
# Other spellings of the ops above
# ----------------------------------------------------------------------------------------


@torchsymbol(torch.split_with_sizes, method_name="split_with_sizes")
def split_with_sizes(a, split_sizes, dim=0):
    """``torch.split_with_sizes``: ``split`` with a list of sizes."""
    return split(a, list(split_sizes), dim)


@torchsymbol(torch.unsafe_split, method_name="unsafe_split")
def unsafe_split(a, split_size, dim=0):
    """``torch.unsafe_split``: ``split`` (the pieces are new values here, so nothing is unsafe)."""
    return split(a, split_size, dim)


@torchsymbol(torch.unsafe_chunk, method_name="unsafe_chunk")
def unsafe_chunk(a, chunks, dim=0):
    """``torch.unsafe_chunk``: ``chunk``."""
    return chunk(a, chunks, dim)


def _directional_split(name: str, min_ndim: int, dim_of):
    def meta(a, indices_or_sections):
        op = f"ltorch.{name}"
        _check_tensor(op, a)
        if a.ndim < min_ndim:
            raise ThunderValueError(
                f"{op}: torch.{name} requires a tensor with at least {min_ndim} dimension, but got a tensor with "
                f"{a.ndim} dimensions!"
            )
        d = dim_of(a)
        if isinstance(indices_or_sections, (int, NumberProxy)):
            s = pyval(indices_or_sections)
            if s != 0 and a.shape[d] % s != 0:
                raise ThunderValueError(
                    f"{op}: torch.{name} attempted to split along dimension {d}, but the size of the dimension "
                    f"{a.shape[d]} is not divisible by the split_size {s}!"
                )
        return tensor_split(a, indices_or_sections, d)

    meta.__name__ = name
    meta.__doc__ = f"``torch.{name}``: ``tensor_split`` along dim {dim_of.__doc__}."
    return torchsymbol(getattr(torch, name), method_name=name)(meta)


def _h(a):
    """0 for 1-D tensors, else 1"""
    return 0 if a.ndim == 1 else 1


def _v(a):
    """0"""
    return 0


def _d(a):
    """2"""
    return 2


hsplit = _directional_split("hsplit", 1, _h)
vsplit = _directional_split("vsplit", 2, _v)
dsplit = _directional_split("dsplit", 3, _d)


def _tensors_arg(op: str, tensors: tuple) -> tuple[list, bool]:
    """``f(a)``, ``f(a, b)`` or ``f([a, b])`` as (the tensors, whether one tensor was passed alone)."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0]), False
    for t in tensors:
        _check_tensor(op, t)
    return list(tensors), len(tensors) == 1


def _atleast(name: str, ndim: int):
    def grow(a):
        if a.ndim >= ndim:
            return a
        if a.ndim == 0:
            return _reshape(a, (1,) * ndim)
        if ndim == 2 or a.ndim == 2:  # (n,) -> (1, n) for 2-D; (m, n) -> (m, n, 1) for 3-D
            return unsqueeze(a, 0 if ndim == 2 else -1)
        return _reshape(a, (1, a.shape[0], 1))

    def meta(*tensors):
        tensors, alone = _tensors_arg(f"ltorch.{name}", tensors)
        out = tuple(grow(t) for t in tensors)
        return out[0] if alone else out

    meta.__name__ = name
    meta.__doc__ = f"``torch.{name}``: each tensor viewed with at least {ndim} dimensions."
    return torchsymbol(getattr(torch, name))(meta)


atleast_1d = _atleast("atleast_1d", 1)
atleast_2d = _atleast("atleast_2d", 2)
atleast_3d = _atleast("atleast_3d", 3)


@torchsymbol(torch.broadcast_tensors)
def broadcast_tensors(*tensors):
    """``torch.broadcast_tensors``: every tensor expanded to their common shape."""
    op = "ltorch.broadcast_tensors"
    tensors, _ = _tensors_arg(op, tensors)
    shape = broadcast_shapes(op, *(t.shape for t in tensors))
    return tuple(expand_to(t, tuple(shape)) for t in tensors)


@torchsymbol(torch.meshgrid)
def meshgrid(*tensors, indexing=None):
    """``torch.meshgrid``: the grids of 0-D or 1-D tensors, ``indexing`` "ij" (the default) or "xy"."""
    op = "ltorch.meshgrid"
    tensors, _ = _tensors_arg(op, tensors)
    if not tensors:
        raise ThunderValueError(f"{op}: torch.meshgrid expects a non-empty TensorList")
    indexing = "ij" if indexing is None else indexing
    if indexing not in ("ij", "xy"):
        raise ThunderValueError(f'{op}: torch.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for t in tensors:
        if t.ndim > 1:
            raise ThunderValueError(f"{op}: torch.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t}")
        if t.dtype != tensors[0].dtype or t.device != tensors[0].device:
            raise ThunderValueError(f"{op}: torch.meshgrid: all tensors must have the same dtype and device")
    swap = indexing == "xy" and len(tensors) >= 2
    if swap:
        tensors = [tensors[1], tensors[0], *tensors[2:]]
    sizes = tuple(t.numel() for t in tensors)
    grids = []
    for i, t in enumerate(tensors):
        shape = [1] * len(tensors)
        shape[i] = sizes[i]
        grids.append(expand_to(_reshape(t, tuple(shape)), sizes))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


for _sym in (
    split_with_sizes, unsafe_split, unsafe_chunk, hsplit, vsplit, dsplit, atleast_1d, atleast_2d, atleast_3d,
    broadcast_tensors, meshgrid,
):  # fmt: skip
    __all__.append(_sym.name)
