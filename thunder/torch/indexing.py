"""Indexing ops of the torch language: ``a[key]`` and ``a[key] = value`` with PyTorch's basic
and advanced indexing, and the gather/scatter family (index_select, gather, scatter,
scatter_add, index_add, index_copy, index_put, masked_fill), with in-place twins.

Note [Indexing]
A key is split into a basic part (ints, slices, None, Ellipsis) and an advanced part (integer
index tensors, or lists of ints). The basic part becomes one ``slice_prim`` (ints are slices of
length one, then squeezed; None inserts size-1 dims). On the result ``T`` the index tensors
sit at known dims: PyTorch handles ints before tensors, so adjacency is judged in ``T``'s
layout. Index tensors broadcast to one shape ``B``; the result has ``B`` where the tensors
were when they are adjacent, and in front otherwise. ``a[key] = value`` runs the same steps
backwards: ``value`` is broadcast to the shape of ``a[key]``, put into ``T``'s layout with
``index_put``, reshaped to the slice's layout, written with ``slice_scatter`` and copied into
``a`` with ``prims.copy_`` (so the symbol is IN_PLACE, as eager's ``__setitem__``). Boolean
masks make shapes depend on data: ``a[mask]`` and ``a[mask] = one value per selected element``
are refused here and handled in ``thunder.torch.data_dependent`` (which splits the program on the
count); ``a[mask] = value`` with a value for every selected element keeps shapes and becomes a
``where``.

The torch executor runs ``operator.getitem`` / ``operator.setitem`` with the user's key.

Layer: language. Imports: core, torch.base, torch.shape.
"""

from __future__ import annotations

import math
import operator
import sys
from dataclasses import dataclass, field

import torch

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderIndexError, ThunderRuntimeError, ThunderTypeError, ThunderValueError
from thunder.core.prims.indexing import advanced_index_shape
from thunder.core.proxies import NumberProxy, TensorProxy, pyval
from thunder.core.symbol import DONT_DCE, IN_PLACE
from thunder.core.symbolic import pin_index, sym_max, sym_min
from thunder.torch.base import broadcast_shapes, expand_to, make_inplace, maybe_convert_to_dtype, torchsymbol
from thunder.torch.eager_ops import eager_fallback
from thunder.torch.shape import check_dim

__all__: list[str] = []

_INDEX_DTYPES = (torch.int64, torch.int32)
_VALID_INDICES = "only integers, slices (`:`), ellipsis (`...`), None and long or byte Variables are valid indices"


def _export(*syms):
    for sym in syms:
        globals()[sym.name] = sym
        __all__.append(sym.name)


def _is_int(x) -> bool:
    v = pyval(x)
    return isinstance(v, int) and not isinstance(v, bool)


def _data_dependent_mask(op: str, what: str):
    return ThunderRuntimeError(
        f"{op}: indexing with a boolean mask ({what}) gives a result whose shape depends on the mask's values, "
        "which are not known while tracing. Use torch.where(mask, a, other) or a.masked_fill(...), "
        "or index outside the jitted function."
    )


@dataclass
class _Plan:
    """The basic part of a key over ``a``: one strided slice, then squeezes and insertions."""

    starts: list[int]
    ends: list[int]
    strides: list[int]
    squeeze_dims: list[int] = field(default_factory=list)  # dims of the slice removed by ints
    none_positions: list[int] = field(default_factory=list)  # dims of T inserted by None
    tensors: dict[int, TensorProxy] = field(default_factory=dict)  # dim of T -> index tensor
    in_range: set[int] = field(default_factory=set)  # dims of T whose index tensor is a list wrapped here

    def slice_shape(self) -> tuple[int, ...]:
        return tuple(max(0, (e - s + st - 1) // st) for s, e, st in zip(self.starts, self.ends, self.strides))

    def is_full(self, shape) -> bool:
        # The length first: ``x[:, i] = v`` of a symbolic index ``i`` then records ``(i + 1) - i != n``, which holds
        # for every ``i``, not ``i != 0`` (Note [Loops over a symbolic range] in thunder.core.loops)
        return all(
            st == 1 and e - s == n and s == 0 and e == n
            for s, e, st, n in zip(self.starts, self.ends, self.strides, shape)
        )


def _index_tensor_from(op: str, a: TensorProxy, x):
    """An index tensor for a list of ints (or a tensor), refusing masks."""
    if isinstance(x, TensorProxy):
        t = x
    else:
        flat = []

        def walk(v):
            if isinstance(v, (list, tuple)):
                for y in v:
                    walk(y)
            else:
                flat.append(pyval(v))

        walk(x)
        if any(isinstance(v, bool) for v in flat):
            raise _data_dependent_mask(op, "a list of bools")
        if any(not isinstance(v, int) for v in flat):
            raise ThunderIndexError(f"{op}: {_VALID_INDICES} (got a list holding {flat!r})")
        t = prims.tensor_from_sequence(x, device=a.device, dtype=torch.int64)
    if t.dtype in (torch.bool, torch.uint8):
        raise _data_dependent_mask(op, f"a {t.dtype} tensor of shape {list(t.shape)}")
    if t.dtype not in _INDEX_DTYPES:
        raise ThunderIndexError(f"{op}: tensors used as indices must be long, int, byte or bool tensors, got {t.dtype}")
    return t


def _slice_range(start, stop, step, n):
    """``slice(start, stop, step).indices(n)`` for a positive step, keeping a symbolic ``n``
    symbolic (``slice.indices`` is C code that would read its value): ``a[:]`` of a dim of length
    ``n`` ends at ``n`` itself, so the result's dim is the same expression."""
    step = 1 if step is None else step

    def bound(x, default):  # clamped without a branch on a symbolic ``n`` (Note [Guard-free min and max])
        if x is None:
            return default
        return sym_max(x + n, 0) if x < 0 else sym_min(x, n)

    return bound(start, 0), bound(stop, n), step


def index_key(key):
    """``key`` as torch reads it: a list of fewer than 32 items that holds a tensor, a sequence, a slice,
    ``...`` or None indexes several dims, as the tuple of its items would (NumPy's old rule, torch's
    ``treatSequenceAsTuple``, deprecated but still what eager does: ``x[[i, j]]`` with tensors ``i``, ``j``
    is ``x[i, j]``, ``x[[[0, 1], [1, 0]]]`` is ``x[[0, 1], [1, 0]]``). Any other list is one index tensor."""
    if isinstance(key, list) and len(key) < 32:
        for k in key:
            if k is None or k is Ellipsis or isinstance(k, (TensorProxy, torch.Tensor, list, tuple, slice)):
                return tuple(key)
    if isinstance(key, tuple):
        return tuple(_array_index(k) for k in key)
    return _array_index(key)


def _array_index(k):
    """A NumPy array in a key is the tensor torch converts it to (its dtype: an int64 array is an index tensor, a bool
    one a mask), one index however many dims it has; a constant of the trace (an argument's contents are checked)."""
    numpy = sys.modules.get("numpy")
    if numpy is None or type(k) is not numpy.ndarray:
        return k
    dtype = torch.from_numpy(numpy.empty(0, k.dtype)).dtype
    return prims.tensor_from_sequence(k.tolist(), device=torch.device("cpu"), dtype=dtype)


def _plan(op: str, a: TensorProxy, key) -> _Plan:
    """Walks the key (see Note [Indexing])."""
    key = index_key(key)
    if not isinstance(key, tuple):
        key = (key,)
    if sum(1 for k in key if k is Ellipsis) > 1:
        raise ThunderIndexError(f"{op}: an index can only have a single ellipsis ('...')")
    consumed = sum(0 if (k is None or k is Ellipsis or isinstance(k, bool)) else 1 for k in key)
    if consumed > a.ndim:
        raise ThunderIndexError(f"{op}: too many indices for tensor of dimension {a.ndim}")
    plan = _Plan([0] * a.ndim, list(a.shape), [1] * a.ndim)
    d = 0  # dim of a
    r = 0  # dim of T
    for k in key:
        if k is None:
            plan.none_positions.append(r)
            r += 1
        elif k is Ellipsis:
            n_dims = a.ndim - consumed
            d += n_dims
            r += n_dims
        elif isinstance(k, bool):
            if not k:
                raise ThunderIndexError(f"{op}: indexing with the Python bool False is not supported")
            plan.none_positions.append(r)
            r += 1
        elif _is_int(k):
            i, n = pyval(k), a.shape[d]
            if not -n <= i < n:
                raise ThunderIndexError(f"{op}: index {i} is out of bounds for dimension {d} with size {n}")
            i = i + n if i < 0 else i
            plan.starts[d], plan.ends[d] = i, i + 1
            plan.squeeze_dims.append(d)
            d += 1
        elif isinstance(k, slice):
            parts = [pyval(x) for x in (k.start, k.stop, k.step)]
            for x in parts:
                if isinstance(x, TensorProxy):
                    raise ThunderRuntimeError(
                        f"{op}: a tensor as a slice bound is data-dependent; use a Python int in slices"
                    )
                if x is not None and not _is_int(x):
                    raise ThunderTypeError(
                        f"{op}: slice indices must be integers or None or have an __index__ method, got {x!r}"
                    )
            if parts[2] is not None and parts[2] <= 0:
                if parts[2] == 0:
                    raise ThunderValueError(f"{op}: slice step cannot be zero")
                raise ThunderValueError(
                    f"{op}: step must be greater than zero (negative steps are not supported by PyTorch; use flip)"
                )
            start, stop, step = _slice_range(*parts, a.shape[d])
            # (``start`` is at most ``n``: the slice to the end ends there)
            plan.starts[d], plan.ends[d], plan.strides[d] = start, stop if k.stop is None else sym_max(start, stop), step
            d += 1
            r += 1
        elif isinstance(k, (TensorProxy, list, tuple)):
            if isinstance(k, TensorProxy) and k.dtype in (torch.bool, torch.uint8):
                raise _data_dependent_mask(op, f"a {k.dtype} tensor of shape {list(k.shape)}")
            n = a.shape[d]
            if isinstance(k, (list, tuple)) and type(n) is int:  # wrapped and bounds-checked now, not per call
                k = _wrapped_list(op, k, d, n)
                plan.in_range.add(r)
            plan.tensors[r] = _index_tensor_from(op, a, k)
            d += 1
            r += 1
        elif isinstance(k, torch.Tensor):
            raise ThunderRuntimeError(f"{op}: a torch.Tensor made outside the trace cannot be used as an index")
        else:
            raise ThunderIndexError(f"{op}: {_VALID_INDICES} (got {type(k).__name__})")
    return plan


def _basic(a: TensorProxy, plan: _Plan) -> TensorProxy:
    """``T``: ``a`` with the basic part of the key applied."""
    t = prims.slice_prim(a, tuple(plan.starts), tuple(plan.ends), tuple(plan.strides))
    if plan.squeeze_dims:
        t = prims.squeeze(t, tuple(plan.squeeze_dims))
    if plan.none_positions:
        shape = list(t.shape)
        for p in plan.none_positions:
            shape.insert(p, 1)
        kept = tuple(i for i in range(len(shape)) if i not in plan.none_positions)
        t = prims.broadcast_in_dim(t, tuple(shape), kept)
    return t


def _wrapped_list(op: str, k, d: int, n: int):
    """A list (or tuple, nested) of int indices into a dim of length ``n``, negatives wrapped; an index
    out of bounds is eager's IndexError. Anything else is left to ``_index_tensor_from`` to refuse."""
    if isinstance(k, (list, tuple)):
        return [_wrapped_list(op, v, d, n) for v in k]
    i = pyval(k)
    if not _is_int(i) or isinstance(i, bool):
        return k
    if not -n <= i < n:
        raise ThunderIndexError(f"{op}: index {i} is out of bounds for dimension {d} with size {n}")
    return i + n if i < 0 else i


def _wrapped_indices(op: str, t: TensorProxy, plan: _Plan) -> dict[int, TensorProxy]:
    """Index tensors broadcast to one shape, as int64, negative values wrapped (but for the lists the
    plan wrapped already)."""
    bshape = broadcast_shapes(op, *(x.shape for x in plan.tensors.values()))
    out = {}
    for p, x in sorted(plan.tensors.items()):
        x = expand_to(maybe_convert_to_dtype(x, torch.int64), bshape)
        n = t.shape[p]
        out[p] = x if p in plan.in_range else prims.where(prims.lt(x, 0), prims.add(x, n), x)
    return out


def _advanced(t: TensorProxy, idx: dict[int, TensorProxy]) -> TensorProxy:
    """``t[idx]`` for index tensors (broadcast and wrapped) at dims ``idx`` of ``t``."""
    positions = sorted(idx)
    bshape = idx[positions[0]].shape
    result_shape = advanced_index_shape(t.shape, [idx.get(i) for i in range(t.ndim)])
    others = [i for i in range(t.ndim) if i not in idx]
    if len(positions) == 1:
        p = positions[0]
        flat = prims.reshape(idx[p], (math.prod(bshape),))
        out = prims.take(t, flat, p)
        return prims.reshape(out, result_shape)
    # Several index tensors: index dims to the front, merged into one, indexed by a linear index.
    moved = prims.transpose(t, (*positions, *others))
    sizes = [t.shape[p] for p in positions]
    merged = prims.reshape(moved, (math.prod(sizes), *(t.shape[i] for i in others)))
    linear = None
    stride = 1
    for p, n in reversed(list(zip(positions, sizes))):
        term = idx[p] if stride == 1 else prims.mul(idx[p], stride)
        linear = term if linear is None else prims.add(linear, term)
        stride *= n
    out = prims.take(merged, prims.reshape(linear, (math.prod(bshape),)), 0)
    out = prims.reshape(out, (*bshape, *(t.shape[i] for i in others)))
    if not _is_adjacent(positions) or positions[0] == 0:
        return out
    return _to_layout(out, len(bshape), positions[0])


def _to_layout(out: TensorProxy, nb: int, first: int) -> TensorProxy:
    """Moves the leading ``nb`` dims (the index shape) to position ``first`` (adjacent index tensors)."""
    rest = list(range(nb, out.ndim))
    perm = rest[:first] + list(range(nb)) + rest[first:]
    return prims.transpose(out, tuple(perm))


def _is_adjacent(positions) -> bool:
    return positions == list(range(positions[0], positions[-1] + 1))


@torchsymbol(method_name="__getitem__", torch_impl=operator.getitem)
def getitem(a, key):
    """``a[key]``: basic and advanced (integer tensor) indexing; see Note [Indexing]."""
    op = "ltorch.getitem"
    plan = _plan(op, a, key)
    t = _basic(a, plan)
    if not plan.tensors:
        return t
    return _advanced(t, _wrapped_indices(op, t, plan))


def mask_key(key):
    """The bool mask of ``a[mask] = v`` (a bool tensor alone, or with trailing full slices / Ellipsis)."""
    key = index_key(key)
    if isinstance(key, TensorProxy) and key.dtype in (torch.bool, torch.uint8):
        return key
    if isinstance(key, tuple) and key and isinstance(key[0], TensorProxy) and key[0].dtype in (torch.bool, torch.uint8):
        if all(k is Ellipsis or k == slice(None) for k in key[1:]):
            return key[0]
    return None


def _value_tensor(op: str, a: TensorProxy, value, shape) -> TensorProxy:
    """``value`` converted to ``a``'s dtype and broadcast to ``shape`` (leading size-1 dims dropped)."""
    if isinstance(value, TensorProxy):
        if value.device != a.device and value.ndim != 0:
            raise ThunderValueError(f"{op}: value is on {value.device} but the indexed tensor is on {a.device}")
        v = value
        while v.ndim > len(shape) and v.shape[0] == 1:
            v = prims.squeeze(v, (0,))
        try:
            common = broadcast_shapes(op, v.shape, shape)
        except ThunderValueError:
            common = None
        if common != tuple(shape):
            raise ThunderValueError(
                f"{op}: shape mismatch: value tensor of shape {list(value.shape)} cannot be broadcast to indexing "
                f"result of shape {list(shape)}"
            )
        return expand_to(maybe_convert_to_dtype(v, a.dtype), shape)
    if isinstance(value, (int, float, bool, complex, NumberProxy)):
        return prims.full(
            tuple(shape), dtypes.dtype_to_python_type(a.dtype)(pyval(value)), device=a.device, dtype=a.dtype
        )
    raise ThunderTypeError(f"{op}: can only assign a tensor or a number, but got {type(value).__name__}")


def _masked_set(op: str, a: TensorProxy, mask: TensorProxy, value):
    """``a`` with ``value`` where ``mask`` (which covers a's leading dims) is True."""
    if mask.ndim > a.ndim or tuple(mask.shape) != tuple(a.shape[: mask.ndim]):
        bad = next((i for i in range(min(mask.ndim, a.ndim)) if mask.shape[i] != a.shape[i]), 0)
        raise ThunderIndexError(
            f"{op}: The shape of the mask {list(mask.shape)} at index {bad} does not match the shape of the "
            f"indexed tensor {list(a.shape)} at index {bad}"
        )
    rest = tuple(a.shape[mask.ndim :])
    if isinstance(value, TensorProxy) and value.ndim > len(rest):
        if value.ndim != len(rest) + 1 or value.shape[0] != 1:
            raise _data_dependent_mask(op, "assigning one value per selected element needs the number of True values")
    v = _value_tensor(op, a, value, rest)
    m = mask if mask.dtype is torch.bool else prims.ne(mask, 0)
    m = prims.broadcast_in_dim(m, tuple(a.shape), tuple(range(mask.ndim)))
    return prims.where(m, expand_to(v, a.shape), a)


def _check_index_put_dtype(op: str, a: TensorProxy, value) -> None:
    """Eager's ``index_put_`` takes a tensor value only of ``a``'s dtype (it makes a number one)."""
    if isinstance(value, TensorProxy) and value.dtype != a.dtype:
        raise ThunderRuntimeError(
            f"{op}: Index put requires the source and destination dtypes match, got {a.dtype} for the destination "
            f"and {value.dtype} for the source."
        )


def _put(op: str, a: TensorProxy, key, value, accumulate: bool) -> TensorProxy:
    """The tensor ``a`` would be after ``a[key] = value`` (or ``+=`` with accumulate), out of place.

    Eager writes through ``index_put_`` where the key holds an index tensor, and so converts no tensor
    value there (``_check_index_put_dtype``): but for a mask (of one dim or more) and a value of one
    element on the CPU, which it writes with ``masked_fill_``, and for 0-d integer tensors, which select."""
    mask = mask_key(key)
    if mask is not None:
        if accumulate:
            raise _data_dependent_mask(op, "accumulate=True")
        fills = not isinstance(value, TensorProxy) or (value.numel() == 1 and value.device.type == "cpu")
        if mask.ndim == 0 or not fills:
            _check_index_put_dtype(op, a, value)
        return _masked_set(op, a, mask, value)
    plan = _plan(op, a, key)
    t = _basic(a, plan)
    if any(x.ndim > 0 for x in plan.tensors.values()):
        _check_index_put_dtype(op, a, value)
    if plan.tensors:
        idx = _wrapped_indices(op, t, plan)
        target_shape = advanced_index_shape(t.shape, [idx.get(i) for i in range(t.ndim)])
        v = _value_tensor(op, a, value, target_shape)
        new_t = prims.index_put(t, tuple(idx.get(i) for i in range(max(idx) + 1)), v, accumulate)
    else:
        v = _value_tensor(op, a, value, t.shape)
        new_t = prims.add(t, v) if accumulate else v
    # Back to the slice's layout: drop None dims, restore the dims ints removed.
    if plan.none_positions:
        new_t = prims.squeeze(new_t, tuple(plan.none_positions))
    src = prims.reshape(new_t, plan.slice_shape())
    if plan.is_full(a.shape):
        return src
    return prims.slice_scatter(a, src, tuple(plan.starts), tuple(plan.ends), tuple(plan.strides))


@torchsymbol(method_name="__setitem__", torch_impl=operator.setitem, tags=(IN_PLACE, DONT_DCE))
def setitem(a, key, value):
    """``a[key] = value``: in place; see Note [Indexing]."""
    op = "ltorch.setitem"
    if not isinstance(a, TensorProxy):
        raise ThunderTypeError(f"{op}: expected a tensor, got {type(a).__name__}")
    if type(pyval(value)) is int and not -(2**63) <= pyval(value) < 2**63:  # eager reads an int as an int64
        raise ThunderValueError(f"{op}: Overflow when unpacking long long: {pyval(value)} does not fit in int64")
    out = _put(op, a, key, value, False)
    prims.copy_(out, a)
    return a


@torchsymbol(torch.index_put, method_name="index_put")
def index_put(a, indices, values, accumulate=False):
    """``torch.index_put``: ``a[indices] = values`` (``+=`` when accumulate), out of place."""
    op = "ltorch.index_put"
    if not isinstance(indices, (tuple, list)):
        raise ThunderTypeError(f"{op}: indices must be a tuple of tensors, got {type(indices).__name__}")
    if not isinstance(values, TensorProxy):
        raise ThunderTypeError(f"{op}: values must be a tensor, got {type(values).__name__}")
    _check_index_put_dtype(op, a, values)
    return _put(op, a, tuple(indices), values, bool(accumulate))


# ----------------------------------------------------------------------------------------
# The gather/scatter family
# ----------------------------------------------------------------------------------------


def _index_arg(op: str, index, *, name: str = "index", vector: bool = False) -> TensorProxy:
    if not isinstance(index, TensorProxy):
        raise ThunderTypeError(f"{op}: expected {name} to be a tensor, got {type(index).__name__}")
    if index.dtype not in _INDEX_DTYPES:
        raise ThunderTypeError(f"{op}: Expected dtype int32/int64 for {name}, but got {index.dtype}")
    if vector and index.ndim > 1:
        raise ThunderIndexError(f"{op}: Index is supposed to be a vector")
    return index


@torchsymbol(torch.index_select, method_name="index_select")
def index_select(a, dim, index):
    """``torch.index_select``: the slices at ``index`` (a vector) along ``dim``."""
    op = "ltorch.index_select"
    index = _index_arg(op, index, vector=True)
    d = check_dim(op, a.ndim, dim)
    if index.ndim == 0:
        index = prims.reshape(index, (1,))
    return prims.take(a, index, d)


def _check_gather_shapes(op: str, a, d, index, src=None):
    if index.ndim != a.ndim and not (a.ndim == 0 and index.ndim <= 1) and index.numel():
        raise ThunderValueError(f"{op}: Index tensor must have the same number of dimensions as input tensor")
    for i, (n, m) in enumerate(zip(index.shape, a.shape)):
        if i != d and n > m:
            raise ThunderValueError(
                f"{op}: Size does not match at dimension {i} expected index {list(index.shape)} to be smaller than "
                f"self {list(a.shape)} apart from dimension {d}"
            )
    if src is not None:
        if src.ndim != index.ndim and index.numel():
            raise ThunderValueError(f"{op}: Index tensor must have the same number of dimensions as src tensor")
        for n, m in zip(index.shape, src.shape):
            if n > m:
                raise ThunderValueError(
                    f"{op}: Expected index {list(index.shape)} to be smaller than self {list(a.shape)} apart from "
                    f"dimension {d} and to be smaller size than src {list(src.shape)}"
                )


@torchsymbol(torch.gather, method_name="gather")
def gather(a, dim, index, *, sparse_grad=False):
    """``torch.gather``: ``out[i][j] = a[index[i][j]][j]`` for dim 0 (``prims.take_along_axis``)."""
    op = "ltorch.gather"
    empty = isinstance(index, TensorProxy) and index.numel() == 0  # eager checks neither its dtype nor its rank
    if not empty:
        index = _index_arg(op, index)
    d = check_dim(op, a.ndim, dim)
    _check_gather_shapes(op, a, d, index)
    if empty:
        flat = prims.reshape(a, (a.numel(),))
        none = prims.slice_prim(flat, (0,), (0,), (1,))  # in a's graph, so a's gradient is zeros, as eager's
        return prims.reshape(none, tuple(index.shape))
    return prims.take_along_axis(a, index, d)


@torchsymbol(torch.take_along_dim, method_name="take_along_dim")
def take_along_dim(a, indices, dim=None):
    """``torch.take_along_dim``: gather with broadcasting of ``a`` and ``indices`` (dim None: flattened)."""
    op = "ltorch.take_along_dim"
    indices = _index_arg(op, indices, name="indices")
    if dim is None:
        return prims.take_along_axis(prims.reshape(a, (a.numel(),)), prims.reshape(indices, (indices.numel(),)), 0)
    d = check_dim(op, a.ndim, dim)
    if indices.ndim != a.ndim:
        raise ThunderValueError(
            f"{op}: input and indices should have the same number of dimensions, but got {a.ndim} dimensions for input, and {indices.ndim} dimensions for indices"
        )
    a_shape = list(a.shape)
    i_shape = list(indices.shape)
    a_shape[d] = i_shape[d] = 1
    common = list(broadcast_shapes(op, a_shape, i_shape))
    ca, ci = list(common), list(common)
    ca[d], ci[d] = a.shape[d], indices.shape[d]
    a = expand_to(a, tuple(ca))
    indices = expand_to(maybe_convert_to_dtype(indices, torch.int64), tuple(ci))
    n = a.shape[d]
    indices = prims.where(prims.lt(indices, 0), prims.add(indices, n), indices)
    return prims.take_along_axis(a, indices, d)


def _src_tensor(op: str, a, src, index):
    """``src`` as a tensor of ``a``'s dtype (a number fills the index's shape)."""
    if isinstance(src, TensorProxy):
        if src.dtype != a.dtype:
            raise ThunderTypeError(
                f"{op}: Expected self.dtype to be equal to src.dtype, but got {a.dtype} and {src.dtype}"
            )
        return src
    if isinstance(src, (int, float, bool, complex, NumberProxy)):
        return prims.full(
            tuple(index.shape), dtypes.dtype_to_python_type(a.dtype)(pyval(src)), device=a.device, dtype=a.dtype
        )
    raise ThunderTypeError(f"{op}: src must be a tensor or a number, got {type(src).__name__}")


_scatter_with_reduce = eager_fallback(torch.scatter, "scatter_with_reduce")


@torchsymbol(torch.scatter, method_name="scatter")
def scatter(a, dim, index, src=None, value=None, *, reduce=None):
    """``torch.scatter``: a copy of ``a`` with ``src`` (a tensor or a number, also as ``value=``)
    written at ``index`` along ``dim``."""
    op = "ltorch.scatter"
    if reduce is not None:  # the deprecated reduce modes: torch runs them
        if src is not None:
            return _scatter_with_reduce(a, dim, index, src, reduce=reduce)
        return _scatter_with_reduce(a, dim, index, value=value, reduce=reduce)
    if src is None and value is None:
        raise ThunderTypeError(f"{op}: expected src or value")
    index = _index_arg(op, index)
    d = check_dim(op, a.ndim, dim)
    s = _src_tensor(op, a, src if src is not None else value, index)
    _check_gather_shapes(op, a, d, index, s)
    return prims.scatter(a, index, s, d)


@torchsymbol(torch.scatter_add, method_name="scatter_add")
def scatter_add(a, dim, index, src):
    """``torch.scatter_add``: like scatter, but adding (duplicate indices accumulate)."""
    op = "ltorch.scatter_add"
    index = _index_arg(op, index)
    d = check_dim(op, a.ndim, dim)
    s = _src_tensor(op, a, src, index)
    _check_gather_shapes(op, a, d, index, s)
    return prims.scatter_add(a, index, s, d)


def _index_update(op: str, prim, a, dim, index, source):
    index = _index_arg(op, index, vector=True)
    d = check_dim(op, a.ndim, dim)
    if not isinstance(source, TensorProxy):
        raise ThunderTypeError(f"{op}: source must be a tensor, got {type(source).__name__}")
    if source.dtype != a.dtype:
        raise ThunderTypeError(f"{op}: self ({a.dtype}) and source ({source.dtype}) must have the same scalar type")
    if index.ndim == 0:
        index = prims.reshape(index, (1,))
    expected = list(a.shape)
    if a.ndim:
        expected[d] = index.shape[0]
    if list(source.shape) != expected and not (a.ndim == 0 and source.numel() == 1):
        raise ThunderValueError(
            f"{op}: source of shape {list(source.shape)} does not match the expected shape {expected} "
            f"(self {list(a.shape)} with dim {d} of size len(index) = {index.shape[0]})"
        )
    if a.ndim == 0 and source.shape != ():
        source = prims.reshape(source, ())
    return prim(a, index, source, d)


@torchsymbol(torch.index_add, method_name="index_add")
def index_add(a, dim, index, source, *, alpha=1):
    """``torch.index_add``: adds ``alpha * source``'s slices into ``a`` at positions ``index`` along ``dim``."""
    op = "ltorch.index_add"
    if pyval(alpha) != 1 and isinstance(source, TensorProxy):
        source = prims.mul(source, dtypes.dtype_to_python_type(source.dtype)(pyval(alpha)))
    return _index_update(op, prims.index_add, a, dim, index, source)


@torchsymbol(torch.index_copy, method_name="index_copy")
def index_copy(a, dim, index, source):
    """``torch.index_copy``: writes ``source``'s slices into ``a`` at positions ``index`` along ``dim``."""
    return _index_update("ltorch.index_copy", prims.index_copy, a, dim, index, source)


@torchsymbol(torch.index_fill, method_name="index_fill")
def index_fill(a, dim, index, value):
    """``torch.index_fill``: ``value`` (a number or 0-d tensor) in the slices at ``index`` along ``dim``."""
    op = "ltorch.index_fill"
    index = _index_arg(op, index, vector=True)
    d = check_dim(op, a.ndim, dim)
    if index.ndim == 0:
        index = prims.reshape(index, (1,))
    shape = list(a.shape)
    if a.ndim:
        shape[d] = index.shape[0]
    if isinstance(value, TensorProxy):
        if value.ndim != 0:
            raise ThunderValueError(
                f"{op}: index_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.ndim} "
                "dimension(s)."
            )
        fill = expand_to(maybe_convert_to_dtype(value, a.dtype), tuple(a.shape))
    else:
        dtypes.check_scalar(value)
        fill = _value_tensor(op, a, value, tuple(a.shape))
    n = a.shape[d] if a.ndim else 1
    index = prims.where(prims.lt(index, 0), prims.add(index, n), index)
    # A mask of the filled slices, so that a slice named twice is filled (and gets value's gradient) once, as in eager.
    hit = prims.full(tuple(shape), True, device=a.device, dtype=torch.bool)
    mask = prims.index_copy(prims.full(tuple(a.shape), False, device=a.device, dtype=torch.bool), index, hit, d)
    return prims.where(mask, fill, a)


@torchsymbol(torch.take, method_name="take")
def take(a, index):
    """``torch.take``: elements of the flattened ``a`` at ``index``, in ``index``'s shape."""
    op = "ltorch.take"
    index = _index_arg(op, index)
    if a.numel() == 0 and index.numel() != 0:  # every index is out of range: eager raises whatever their values
        raise ThunderIndexError(f"{op}: take(): tried to take from an empty tensor")
    flat = prims.reshape(a, (a.numel(),))
    idx = prims.reshape(maybe_convert_to_dtype(index, torch.int64), (index.numel(),))
    idx = prims.where(prims.lt(idx, 0), prims.add(idx, a.numel()), idx)
    return prims.reshape(prims.take(flat, idx, 0), tuple(index.shape))


@torchsymbol(torch.masked_fill, method_name="masked_fill")
def masked_fill(a, mask, value):
    """``torch.masked_fill``: ``value`` (a number or 0-d tensor) where ``mask`` is True."""
    op = "ltorch.masked_fill"
    if not isinstance(mask, TensorProxy) or mask.dtype is not torch.bool:
        got = mask.dtype if isinstance(mask, TensorProxy) else type(mask).__name__
        raise ThunderTypeError(f"{op}: masked_fill only supports boolean masks, but got mask with dtype {got}")
    if isinstance(value, TensorProxy):
        if value.ndim != 0:
            raise ThunderValueError(
                f"{op}: masked_fill_ only supports a 0-dimensional value tensor, but got tensor with {value.ndim} "
                "dimension(s)."
            )
        v = maybe_convert_to_dtype(value, a.dtype)
    elif isinstance(value, (int, float, bool, complex, NumberProxy)):
        dtypes.check_scalar(value)
        v = pyval(value)
        if isinstance(v, float) and not (a.dtype.is_floating_point or a.dtype.is_complex):
            if a.dtype is torch.bool:
                v = bool(v)
            elif math.isfinite(v):
                v = int(v)  # else torch's fill raises, as eager does ("cannot be converted ... without overflow")
        else:
            v = dtypes.dtype_to_python_type(a.dtype)(v)
    else:
        raise ThunderTypeError(f"{op}: value must be a number or a 0-d tensor, got {type(value).__name__}")
    shape = broadcast_shapes(op, a.shape, mask.shape)
    a_b, m_b = expand_to(a, shape), expand_to(mask, shape)
    if isinstance(v, TensorProxy):
        v = expand_to(v, shape)
    else:
        v = prims.full(shape, v, device=a.device, dtype=a.dtype)
    return prims.where(m_b, v, a_b)


@torchsymbol(id="torch.Tensor.fill_diagonal")
def fill_diagonal(a, fill_value, wrap=False):
    """The value ``Tensor.fill_diagonal_`` writes (the method has no out-of-place twin): ``fill_value`` where all
    indices are equal; in a matrix taller than wide, with ``wrap``, the diagonal starts again one row below its end,
    every ``cols + 1`` elements of the flattened matrix (numpy's ``fill_diagonal``)."""
    op = "Tensor.fill_diagonal_"
    if a.ndim < 2:
        raise ThunderRuntimeError(f"{op}: dimensions must larger than 1")
    if a.ndim > 2 and any(n != a.shape[0] for n in a.shape):
        raise ThunderRuntimeError(f"{op}: all dimensions of input must be of equal length")
    numel = math.prod(pin_index(n) for n in a.shape)
    step = sum(math.prod(a.shape[k + 1 :]) for k in range(a.ndim))  # from one diagonal element to the next
    flat = prims.iota(numel, start=0, step=1, device=a.device, dtype=torch.int64)
    on = prims.eq(prims.remainder(flat, step), 0)
    if a.ndim == 2 and not wrap:
        on = prims.bitwise_and(on, prims.lt(flat, min(a.shape) * step))
    return masked_fill(a, prims.reshape(on, tuple(a.shape)), fill_value)


_export(getitem, setitem, index_put, index_select, gather, take_along_dim, scatter, scatter_add, index_add,
        index_copy, index_fill, take, masked_fill, fill_diagonal)  # fmt: skip
_export(
    make_inplace(index_put),
    make_inplace(scatter),
    make_inplace(scatter_add),
    make_inplace(index_add),
    make_inplace(index_copy),
    make_inplace(index_fill),
    make_inplace(masked_fill),
    make_inplace(fill_diagonal),
)


# ----------------------------------------------------------------------------------------
# Selections whose indices are known while tracing
# ----------------------------------------------------------------------------------------


@torchsymbol(torch.combinations)
def combinations(input, r=2, with_replacement=False):
    """``torch.combinations``: the length-``r`` combinations of a 1-D tensor's elements, in
    ``itertools`` order; their indices are known from the shape, so it is one ``index_select`` per
    column (eager masks a grid with a data-dependent ``masked_select``)."""
    import itertools

    op = "ltorch.combinations"
    if not isinstance(input, TensorProxy) or input.ndim != 1:
        raise ThunderValueError(f"{op}: Expect a 1D vector, but got shape {getattr(input, 'shape', input)}")
    r = pyval(r)
    if r < 0:
        raise ThunderValueError(f"{op}: Expect a non-negative number, but got {r}")
    if r == 0:
        return prims.full((0,), 0, device=input.device, dtype=input.dtype)
    choose = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    rows = list(choose(range(pin_index(input.shape[0])), r))  # as many rows as the size says: pinned
    if not rows:
        return prims.full((0, r), 0, device=input.device, dtype=input.dtype)
    columns = []
    for j in range(r):
        index = prims.tensor_from_sequence([row[j] for row in rows], device=input.device, dtype=dtypes.int64)
        columns.append(prims.take(input, index, 0))
    return prims.cat([prims.reshape(c, (len(rows), 1)) for c in columns], 1)


@torchsymbol(torch.cartesian_prod)
def cartesian_prod(*tensors):
    """``torch.cartesian_prod``: the rows of the ``ij`` meshgrid of 1-D tensors (one tensor: itself, as in eager)."""
    from thunder.torch.rearrange import meshgrid

    op = "ltorch.cartesian_prod"
    for t in tensors:
        if not isinstance(t, TensorProxy) or t.ndim != 1:
            raise ThunderValueError(f"{op}: Expect a 1D vector, but got shape {getattr(t, 'shape', t)}")
    if len(tensors) == 1:
        return tensors[0]
    grids = meshgrid(*tensors, indexing="ij")
    n = 1
    for t in tensors:
        n *= t.shape[0]
    return prims.cat([prims.reshape(g, (n, 1)) for g in grids], 1)


__all__ += ["combinations", "cartesian_prod"]
