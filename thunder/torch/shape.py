"""Shape ops of the torch language: reshaping, permuting, squeezing, expanding, joining,
splitting and slicing, with PyTorch's argument forms (varargs or a sequence, keyword names,
negative dims) and its error text. Flipping, rolling, padding, triangles and the other
spellings of these ops are in ``rearrange``.

Each symbol decomposes into shape prims. The torch executor runs the torch function itself,
so view ops return real views at run time and an in-place op on a view mutates its base, as
in eager PyTorch.

Layer: language. Imports: core, torch.base.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

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
from thunder.core.proxies import NumberProxy, TensorProxy, meta_layout, pyval, register_method
from thunder.core.replays import becomes_in_place
from thunder.core.rules import grad_rules
from thunder.core.symbol import MAY_ALIAS, MAY_RAISE
from thunder.core.symbolic import is_symbolic, pin, pin_index
from thunder.core.tracectx import current_source_location, get_tracectx
from thunder.torch.base import (
    maybe_convert_to_dtype,
    torch_to_thunder_map,
    torchsymbol,
)

__all__: list[str] = []


# ----------------------------------------------------------------------------------------
# Argument helpers
# ----------------------------------------------------------------------------------------


def check_dim(op: str, ndim: int, dim, *, extra: int = 0) -> int:
    """``dim`` wrapped into ``[0, ndim + extra)``; PyTorch's IndexError text when out of range.

    ``extra=1`` for ops that insert a dim (unsqueeze, stack). 0-d tensors accept -1 and 0.
    """
    dim = pyval(dim)
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ThunderTypeError(f"{op}: dim must be an int, but got {type(dim).__name__} {dim!r}")
    rank = max(ndim + extra, 1)
    if not -rank <= dim < rank:
        raise ThunderIndexError(
            f"{op}: Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})"
        )
    return dim + rank if dim < 0 else dim


def check_dims(op: str, ndim: int, dims, *, unique: bool = True) -> tuple[int, ...]:
    if isinstance(dims, (int, NumberProxy)):
        dims = (dims,)
    out = tuple(check_dim(op, ndim, d) for d in dims)
    if unique and len(set(out)) != len(out):
        dup = next(d for d in out if out.count(d) > 1)
        raise ThunderValueError(f"{op}: dim {dup} appears multiple times in the list of dims")
    return out


def shape_arg(op: str, args: tuple, kw=None, name: str = "shape") -> tuple[int, ...]:
    """The shape given as varargs (``view(2, 3)``), one sequence (``view((2, 3))``) or keyword."""
    if kw is not None:
        if args:
            raise ThunderTypeError(f"{op}: got {name} both positionally and as a keyword")
        args = (kw,)
    elif not args:  # ``x.permute()``: eager's TypeError, even for a 0-d tensor (for which () would do)
        raise ThunderTypeError(f'{op}: {op.rpartition(".")[2]}() missing 1 required positional arguments: "{name}"')
    if len(args) == 1 and isinstance(args[0], (tuple, list, torch.Size)):
        args = tuple(args[0])
    out = []
    for s in args:
        v = pyval(s)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ThunderTypeError(f"{op}: {name} must be a sequence of ints, but got {type(s).__name__} {s!r}")
        out.append(v)
    return tuple(out)


def infer_shape(op: str, shape: Sequence[int], numel: int) -> tuple[int, ...]:
    """Resolves one ``-1`` in ``shape`` for a tensor of ``numel`` elements (PyTorch's errors)."""
    if sum(1 for s in shape if s == -1) > 1:
        raise ThunderValueError(f"{op}: only one dimension can be inferred")
    for s in shape:
        if s < -1:
            raise ThunderValueError(f"{op}: invalid shape dimension {s}")
    known = math.prod(s for s in shape if s != -1)
    if -1 in shape:
        if known == 0:
            raise ThunderValueError(
                f"{op}: cannot reshape tensor of 0 elements into shape {list(shape)} because the unspecified "
                "dimension size -1 can be any value and is ambiguous"
            )
        if numel % known:
            raise ThunderValueError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel}")
        return tuple(numel // known if s == -1 else s for s in shape)
    if known != numel:
        raise ThunderValueError(f"{op}: shape '{list(shape)}' is invalid for input of size {numel}")
    return tuple(shape)


def _check_tensor(op: str, a, name: str = "input") -> None:
    if not isinstance(a, TensorProxy):
        raise ThunderTypeError(f"{op}: expected {name} to be a tensor, but got {type(a).__name__} {a!r}")


def _reshape(a: TensorProxy, shape) -> TensorProxy:
    return prims.reshape(a, tuple(shape))


def unsqueeze_to(a: TensorProxy, shape: Sequence[int], new_dims: Sequence[int]) -> TensorProxy:
    """``a`` with size-1 dims inserted at ``new_dims`` of the result ``shape``."""
    kept = tuple(i for i in range(len(shape)) if i not in set(new_dims))
    return prims.broadcast_in_dim(a, tuple(shape), kept)


# ----------------------------------------------------------------------------------------
# Reshaping
# ----------------------------------------------------------------------------------------


def _reshape_decomp(op: str, a, args, shape_kw, name: str = "shape"):
    _check_tensor(op, a)
    shape = infer_shape(op, shape_arg(op, args, shape_kw, name), a.numel())
    return _reshape(a, shape)


@torchsymbol(torch.reshape, method_name="reshape", torch_impl=torch.Tensor.reshape, sizes=True, one_sequence="shape")
def reshape(a, *args, shape=None):
    """``torch.reshape`` / ``Tensor.reshape``: the shape as varargs or a sequence, with one -1 inferred."""
    return _reshape_decomp("ltorch.reshape", a, args, shape)


@torchsymbol(method_name="view", torch_impl=torch.Tensor.view, tags=(MAY_RAISE,), sizes=True)
def view(a, *args, size=None):
    """``Tensor.view``: like reshape; at run time the torch executor returns a real view."""
    if len(args) == 1 and isinstance(args[0], torch.dtype):
        return view_dtype(a, args[0])
    if isinstance(size, torch.dtype):
        return view_dtype(a, size)
    return _reshape_decomp("ltorch.view", a, args, size, "size")


def _view_dtype_impl(a: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return a.view(dtype)


@torchsymbol(id="torch.view_dtype", torch_impl=_view_dtype_impl, tags=(MAY_RAISE, MAY_ALIAS))
def view_dtype(a, dtype):
    """``Tensor.view(dtype)``: ``a``'s memory read as ``dtype``, a view (writes through it reach ``a``). Another
    element size scales the last dim, which needs eager's layout of ``a``: torch's own rule on a meta tensor laid out
    so gives the shape and eager's errors. Never differentiable: eager's result requires no grad."""
    _check_tensor("ltorch.view", a)
    if dtype.itemsize == a.dtype.itemsize:
        shape = a.shape
    else:
        try:
            shape = tuple(meta_layout(a, need_offset=True).view(dtype).shape)
        except RuntimeError as e:
            raise ThunderRuntimeError(str(e)) from None
    return TensorProxy.like(a, shape=shape, dtype=dtype, requires_grad=False)


@torchsymbol(method_name="view_as", torch_impl=torch.Tensor.view_as)
def view_as(a, other):
    return _reshape_decomp("ltorch.view_as", a, (other.shape,), None)


@torchsymbol(method_name="reshape_as", torch_impl=torch.Tensor.reshape_as)
def reshape_as(a, other):
    return _reshape_decomp("ltorch.reshape_as", a, (other.shape,), None)


@torchsymbol(torch.flatten, method_name="flatten")
def flatten(a, start_dim=0, end_dim=-1):
    """``torch.flatten``: dims ``start_dim..end_dim`` merged into one (a 0-d tensor becomes 1-D)."""
    op = "ltorch.flatten"
    _check_tensor(op, a)
    if a.ndim == 0:
        return _reshape(a, (1,))
    s, e = check_dim(op, a.ndim, start_dim), check_dim(op, a.ndim, end_dim)
    if s > e:
        raise ThunderValueError(f"{op}: flatten() has invalid args: start_dim cannot come after end_dim")
    shape = a.shape[:s] + (math.prod(a.shape[s : e + 1]),) + a.shape[e + 1 :]
    return _reshape(a, shape)


@torchsymbol(torch.unflatten, method_name="unflatten", sizes=True)
def unflatten(a, dim, sizes):
    """``torch.unflatten``: dim ``dim`` split into ``sizes`` (one -1 inferred)."""
    op = "ltorch.unflatten"
    _check_tensor(op, a)
    d = check_dim(op, a.ndim, dim)
    sizes = shape_arg(op, (sizes,), name="sizes")
    if not sizes:
        raise ThunderValueError(f"{op}: sizes must be non-empty")
    n = a.shape[d] if a.ndim else 1
    try:
        sizes = infer_shape(op, sizes, n)
    except ThunderValueError:
        raise ThunderValueError(
            f"{op}: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} ({n}) in the input tensor"
        ) from None
    return _reshape(a, a.shape[:d] + sizes + a.shape[d + 1 :])


@torchsymbol(torch.ravel, method_name="ravel")
def ravel(a):
    """``torch.ravel``: the elements as a 1-D tensor."""
    _check_tensor("ltorch.ravel", a)
    return _reshape(a, (a.numel(),))


@torchsymbol(torch.squeeze, method_name="squeeze")
def squeeze(a, dim=None):
    """``torch.squeeze``: drops size-1 dims (all, one, or a tuple); other sizes are left alone."""
    op = "ltorch.squeeze"
    _check_tensor(op, a)
    dims = range(a.ndim) if dim is None else check_dims(op, a.ndim, dim, unique=False)
    dims = tuple(sorted({d for d in dims if a.ndim and a.shape[d] == 1}))
    return prims.squeeze(a, dims)


@torchsymbol(torch.unsqueeze, method_name="unsqueeze")
def unsqueeze(a, dim):
    """``torch.unsqueeze``: a size-1 dim inserted at ``dim`` (in ``[-ndim-1, ndim]``)."""
    op = "ltorch.unsqueeze"
    _check_tensor(op, a)
    d = check_dim(op, a.ndim, dim, extra=1)
    return unsqueeze_to(a, a.shape[:d] + (1,) + a.shape[d:], (d,))


# Note [In-place shape changes]
# ``x.unsqueeze_(0)`` changes the tensor object itself: it returns ``x``, and every reference to it
# sees the new shape, while the ops recorded before it read the old one. So the trace records the
# out-of-place op, applied to a proxy that takes the object's place in what was recorded so far
# (same name, old metadata), and the object becomes that op's result (its name and metadata): the
# trace stays in SSA form, and is differentiated and fused like the out-of-place op. Replays that
# store the tensor (``self.cache = x``, ``outside_list.append(x)``) keep the object: eager stored
# the tensor whose shape then changed. An input's shape cannot change so (the prologue, the trace's
# parameters and the caller's tensor have the old one): that is refused, as is a tensor made in
# another trace (a region traced on its own).


def made_here(op: str, a: TensorProxy, fix: str):
    """The trace, where ``a`` was made by the program at its top level (Note [In-place shape changes]); else a clear
    error: an input's shape cannot change in place. ``fix``: what to do instead."""
    _check_tensor(op, a, "self")
    trace = get_tracectx()
    if (
        a.strides is None  # not an input (Note [Strides of traced tensors])
        and trace is not None
        and len(trace.scopes) == 1
        and any(o is a for b in trace.bound_symbols for o in b.flat_proxy_outs)
    ):
        return trace
    loc = current_source_location()
    raise UnsupportedOpError(
        f"{op} changes the shape of {a.name}, an input of the jitted function (or of a region traced on its "
        f"own), in place{f' (called at {loc})' if loc else ''}: thunder cannot change the shape of a tensor "
        f"it was given. {fix}, or call it outside the jitted function."
    )


def _in_place_view(sym, name: str) -> None:
    """Installs ``Tensor.<name>``: the tensor takes the shape of ``sym(tensor, ...)`` in place."""

    def method(a, *args, **kwargs):
        op = f"Tensor.{name}"
        trace = made_here(op, a, f"Use the out-of-place op instead (x = x.{name[:-1]}(...))")
        if a.requires_grad and torch.is_grad_enabled() and a.is_leaf:
            raise ThunderRuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        return becomes_in_place(trace, a, lambda before: sym(before, *args, **kwargs))

    method.__name__ = name
    register_method(name, method)
    torch_to_thunder_map[getattr(torch.Tensor, name)] = method


_in_place_view(squeeze, "squeeze_")
_in_place_view(unsqueeze, "unsqueeze_")


# ----------------------------------------------------------------------------------------
# Permuting
# ----------------------------------------------------------------------------------------


@torchsymbol(torch.permute, method_name="permute", torch_impl=torch.Tensor.permute, one_sequence="dims")
def permute(a, *args, dims=None):
    """``torch.permute`` / ``Tensor.permute``: dims as varargs or a sequence."""
    op = "ltorch.permute"
    _check_tensor(op, a)
    perm = shape_arg(op, args, dims, name="dims")
    if len(perm) != a.ndim:
        raise ThunderValueError(
            f"{op}: number of dimensions in the tensor input does not match the length of the desired ordering "
            f"of dimensions i.e. input.dim() = {a.ndim} is not equal to len(dims) = {len(perm)}"
        )
    perm = tuple(check_dim(op, a.ndim, d) for d in perm)
    if len(set(perm)) != len(perm):
        raise ThunderValueError(f"{op}: permute(): duplicate dims are not allowed.")
    return prims.transpose(a, perm)


def _swap(op: str, a, d0, d1):
    _check_tensor(op, a)
    d0, d1 = check_dim(op, a.ndim, d0), check_dim(op, a.ndim, d1)
    perm = list(range(a.ndim))
    if a.ndim:
        perm[d0], perm[d1] = perm[d1], perm[d0]
    return prims.transpose(a, tuple(perm))


@torchsymbol(torch.transpose, method_name="transpose")
def transpose(a, dim0, dim1):
    """``torch.transpose``: swaps two dims."""
    return _swap("ltorch.transpose", a, dim0, dim1)


@torchsymbol(torch.swapaxes, method_name="swapaxes")
def swapaxes(a, axis0, axis1):
    return _swap("ltorch.swapaxes", a, axis0, axis1)


@torchsymbol(torch.swapdims, method_name="swapdims")
def swapdims(a, dim0, dim1):
    return _swap("ltorch.swapdims", a, dim0, dim1)


@torchsymbol(torch.t, method_name="t")
def t(a):
    """``torch.t``: transposes a matrix; 0-d and 1-D tensors are returned as they are."""
    op = "ltorch.t"
    _check_tensor(op, a)
    if a.ndim > 2:
        raise ThunderValueError(f"{op}: t() expects a tensor with <= 2 dimensions, but self is {a.ndim}D")
    return prims.transpose(a, tuple(reversed(range(a.ndim))))


_in_place_view(transpose, "transpose_")
_in_place_view(swapaxes, "swapaxes_")
_in_place_view(swapdims, "swapdims_")
_in_place_view(t, "t_")


def _tensor_T(a):
    return a.T


def _tensor_mT(a):
    return a.mT


@torchsymbol(torch_impl=_tensor_T)
def T(a):
    """``Tensor.T``: all dims reversed (PyTorch warns at run time for tensors that are not 2-D)."""
    return prims.transpose(a, tuple(reversed(range(a.ndim))))


@torchsymbol(torch_impl=_tensor_mT)
def mT(a):
    """``Tensor.mT``: the last two dims swapped."""
    if a.ndim < 2:
        raise ThunderValueError(
            f"ltorch.mT: tensor.mT is only supported on matrices or batches of matrices. Got {a.ndim}-D tensor."
        )
    return _swap("ltorch.mT", a, -2, -1)


def _adjoint(name: str, a):
    """``Tensor.H`` (``name`` "H": 0-D or 2-D) and ``Tensor.mH`` (0-D or batches of matrices)."""
    from thunder.torch.elementwise import conj

    if a.ndim == 0:
        return conj(a)
    if name == "H" and a.ndim != 2:
        raise ThunderValueError(f"tensor.H is only supported on matrices (2-D tensors). Got {a.ndim}-D tensor.")
    if a.ndim < 2:
        raise ThunderValueError(
            f"tensor.mH is only supported on matrices or batches of matrices. Got {a.ndim}-D tensor."
        )
    dims = list(range(a.ndim))
    dims[-2], dims[-1] = dims[-1], dims[-2]
    return conj(prims.transpose(a, tuple(dims)))


@torchsymbol(id="Tensor.H", torch_impl=lambda a: a.H)
def H(a):
    """``Tensor.H``: the conjugate transpose of a matrix."""
    return _adjoint("H", a)


@torchsymbol(id="Tensor.mH", torch_impl=lambda a: a.mH)
def mH(a):
    """``Tensor.mH``: the conjugate transpose of each matrix of a batch."""
    return _adjoint("mH", a)


register_method("H", property(lambda self: H(self)))
register_method("mH", property(lambda self: mH(self)))


register_method("T", property(lambda self: T(self)))
register_method("mT", property(lambda self: mT(self)))


def _movedim_dims(op, ndim, x, name):
    dims = (x,) if isinstance(x, (int, NumberProxy)) else tuple(x)
    out = tuple(check_dim(op, ndim, d) for d in dims)
    if len(set(out)) != len(out):
        raise ThunderValueError(f"{op}: movedim: repeated dim in `{name}` ({list(dims)})")
    return out


def _movedim(op, a, source, destination):
    _check_tensor(op, a)
    src = _movedim_dims(op, a.ndim, source, "source")
    dst = _movedim_dims(op, a.ndim, destination, "destination")
    if len(src) != len(dst):
        raise ThunderValueError(
            f"{op}: movedim: Invalid source or destination dims: source ({list(src)} dims) should contain the same "
            f"number of dims as destination ({list(dst)} dims)"
        )
    if a.ndim == 0:  # dims 0 and -1 name the tensor itself (check_dim): nothing moves
        return prims.transpose(a, ())
    perm = [-1] * a.ndim
    for s, d in zip(src, dst):
        perm[d] = s
    rest = iter(d for d in range(a.ndim) if d not in src)
    perm = tuple(p if p != -1 else next(rest) for p in perm)
    return prims.transpose(a, perm)


@torchsymbol(torch.movedim, method_name="movedim")
def movedim(a, source, destination):
    """``torch.movedim``: moves dims ``source`` to positions ``destination``; others keep their order."""
    return _movedim("ltorch.movedim", a, source, destination)


@torchsymbol(torch.moveaxis, method_name="moveaxis")
def moveaxis(a, source, destination):
    return _movedim("ltorch.moveaxis", a, source, destination)


# ----------------------------------------------------------------------------------------
# Expanding and repeating
# ----------------------------------------------------------------------------------------


def _expand(op: str, a, sizes):
    _check_tensor(op, a)
    if len(sizes) < a.ndim:
        raise ThunderValueError(
            f"{op}: the number of sizes provided ({len(sizes)}) must be greater or equal to the number of "
            f"dimensions in the tensor ({a.ndim})"
        )
    offset = len(sizes) - a.ndim
    shape = []
    for i, s in enumerate(sizes):
        if i < offset:
            if s < 0:
                raise ThunderValueError(
                    f"{op}: The expanded size of the tensor ({s}) isn't allowed in a leading, non-existing dimension {i}"
                )
            shape.append(s)
            continue
        n = a.shape[i - offset]
        if s == -1:
            s = n
        elif n != 1 and s != n:
            raise ThunderValueError(
                f"{op}: The expanded size of the tensor ({s}) must match the existing size ({n}) at non-singleton "
                f"dimension {i}.  Target sizes: {list(sizes)}.  Tensor sizes: {list(a.shape)}"
            )
        shape.append(s)
    return prims.broadcast_in_dim(a, tuple(shape), tuple(range(offset, len(shape))))


@torchsymbol(method_name="expand", torch_impl=torch.Tensor.expand, sizes=True)
def expand(a, *args, size=None):
    """``Tensor.expand``: size-1 dims broadcast to the given sizes (-1 keeps a size); new dims in front."""
    return _expand("ltorch.expand", a, shape_arg("ltorch.expand", args, size, name="size"))


@torchsymbol(method_name="expand_as", torch_impl=torch.Tensor.expand_as)
def expand_as(a, other):
    return _expand("ltorch.expand_as", a, tuple(other.shape))


@torchsymbol(torch.broadcast_to, method_name="broadcast_to", torch_impl=torch.Tensor.broadcast_to, sizes=True, one_sequence="size")
def broadcast_to(a, *args, size=None):
    """``torch.broadcast_to`` / ``Tensor.broadcast_to`` (whose size may be varargs, as ``expand``'s)."""
    return _expand("ltorch.broadcast_to", a, shape_arg("ltorch.broadcast_to", args, size, name="size"))


@torchsymbol(method_name="repeat", torch_impl=torch.Tensor.repeat, sizes=True)
def repeat(a, *args, repeats=None):
    """``Tensor.repeat``: tiles ``a``; extra leading repeats add dims."""
    op = "ltorch.repeat"
    _check_tensor(op, a)
    reps = shape_arg(op, args, repeats, name="repeats")
    if len(reps) < a.ndim:
        raise ThunderValueError(
            f"{op}: Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor"
        )
    if any(r < 0 for r in reps):
        raise ThunderValueError(f"{op}: Trying to create tensor with negative dimension: repeats {list(reps)}")
    shape = (1,) * (len(reps) - a.ndim) + tuple(a.shape)
    # (n0, n1) -> (1, n0, 1, n1) -> (r0, n0, r1, n1) -> (r0 * n0, r1 * n1)
    inter = tuple(x for n in shape for x in (1, n))
    big = tuple(x for r, n in zip(reps, shape) for x in (r, n))
    out = _reshape(a, inter)
    out = prims.broadcast_in_dim(out, big, tuple(range(len(big))))
    return _reshape(out, tuple(r * n for r, n in zip(reps, shape)))


@torchsymbol(torch.tile, method_name="tile", torch_impl=torch.Tensor.tile, sizes=True, one_sequence="dims")
def tile(a, *args, dims=None):
    """``torch.tile(a, dims)`` / ``Tensor.tile(*dims)``: ``repeat`` with ``dims`` padded by leading 1s to ``a``'s rank."""
    op = "ltorch.tile"
    _check_tensor(op, a)
    reps = shape_arg(op, args, dims, name="dims")
    return repeat(a, (1,) * (a.ndim - len(reps)) + reps)


# ----------------------------------------------------------------------------------------
# Joining
# ----------------------------------------------------------------------------------------


def _tensor_list(op: str, tensors) -> list[TensorProxy]:
    if isinstance(tensors, TensorProxy) or not isinstance(tensors, (tuple, list)):
        raise ThunderTypeError(f"{op}: expected a tuple or list of tensors, but got {type(tensors).__name__}")
    if not tensors:
        raise ThunderValueError(f"{op}: expected a non-empty list of Tensors")
    for i, x in enumerate(tensors):
        _check_tensor(op, x, f"tensors[{i}]")
    return list(tensors)


def _promote_all(tensors):
    dtype = dtypes.result_type(*tensors)
    return [maybe_convert_to_dtype(x, dtype) for x in tensors]


def _cat(op: str, tensors, dim):
    tensors = _tensor_list(op, tensors)
    for i, x in enumerate(tensors):
        if x.ndim == 0:
            raise ThunderValueError(f"{op}: zero-dimensional tensor (at position {i}) cannot be concatenated")
    # PyTorch skips legacy empty 1-D tensors of shape (0,) when the others have more dims.
    nonempty = [(i, x) for i, x in enumerate(tensors) if not (x.ndim == 1 and x.shape[0] == 0)]
    ref = nonempty[0][1] if nonempty else tensors[0]
    d = check_dim(op, ref.ndim, dim)
    dtype = dtypes.result_type(*tensors)
    nonempty = nonempty or [(0, tensors[0])]
    for i, x in nonempty:
        if x.ndim != ref.ndim:
            raise ThunderValueError(f"{op}: Tensors must have same number of dimensions: got {ref.ndim} and {x.ndim}")
        for j, (m, n) in enumerate(zip(ref.shape, x.shape)):
            if j != d and m != n:
                raise ThunderValueError(
                    f"{op}: Sizes of tensors must match except in dimension {d}. Expected size {m} but got size {n} "
                    f"for tensor number {i} in the list."
                )
    parts = [maybe_convert_to_dtype(x, dtype) for _, x in nonempty]
    return prims.cat(parts, d)


@torchsymbol(torch.cat, torch.concat)
def cat(tensors, dim=0):
    """``torch.cat``: joins tensors along an existing dim, promoting dtypes as PyTorch does."""
    return _cat("ltorch.cat", tensors, dim)


@torchsymbol(torch.concatenate)
def concatenate(tensors, axis=0):
    return _cat("ltorch.concatenate", tensors, axis)


@torchsymbol(torch.stack)
def stack(tensors, dim=0):
    """``torch.stack``: joins equal-shaped tensors along a new dim."""
    op = "ltorch.stack"
    tensors = _tensor_list(op, tensors)
    first = tensors[0]
    for i, x in enumerate(tensors):
        if x.shape != first.shape:
            raise ThunderValueError(
                f"{op}: stack expects each tensor to be equal size, but got {list(first.shape)} at entry 0 and "
                f"{list(x.shape)} at entry {i}"
            )
    d = check_dim(op, first.ndim, dim, extra=1)
    shape = first.shape[:d] + (1,) + first.shape[d:]
    return prims.cat([unsqueeze_to(x, shape, (d,)) for x in _promote_all(tensors)], d)


@torchsymbol(torch.hstack)
def hstack(tensors):
    """``torch.hstack``: cat along dim 1, or dim 0 for 1-D tensors."""
    tensors = [x if x.ndim else _reshape(x, (1,)) for x in _tensor_list("ltorch.hstack", tensors)]
    return _cat("ltorch.hstack", tensors, 0 if tensors[0].ndim == 1 else 1)


@torchsymbol(torch.vstack)
def vstack(tensors):
    """``torch.vstack``: cat along dim 0 after making each tensor at least 2-D."""
    tensors = _tensor_list("ltorch.vstack", tensors)
    tensors = [x if x.ndim >= 2 else _reshape(x, (1, x.numel())) for x in tensors]
    return _cat("ltorch.vstack", tensors, 0)


# ----------------------------------------------------------------------------------------
# Slicing and splitting
# ----------------------------------------------------------------------------------------


def slice_dim(a: TensorProxy, dim: int, start: int, stop: int, step: int = 1) -> TensorProxy:
    """``a`` sliced along one dim (start/stop already in range)."""
    starts = [0] * a.ndim
    ends = list(a.shape)
    strides = [1] * a.ndim
    starts[dim], ends[dim], strides[dim] = start, max(start, stop), step
    return prims.slice_prim(a, tuple(starts), tuple(ends), tuple(strides))


@torchsymbol(torch.ops.aten.slice, torch.ops.aten.slice.Tensor, id="torch.ops.aten.slice",
             torch_impl=torch.ops.aten.slice.Tensor)  # fmt: skip
def aten_slice(a, dim=0, start=None, end=None, step=1):
    """``torch.ops.aten.slice``: ``a[start:end:step]`` along ``dim``, bounds clamped as Python slices clamp them
    (``torch._higher_order_ops``' generic scans call it)."""
    op = "ltorch.aten_slice"
    _check_tensor(op, a)
    d = check_dim(op, a.ndim, dim)
    if pyval(step) <= 0:
        raise ThunderValueError(f"{op}: slice step must be positive")
    first, last, step = slice(pyval(start), pyval(end), pyval(step)).indices(a.shape[d])
    return slice_dim(a, d, first, max(first, last), step)


@torchsymbol(torch.narrow, method_name="narrow", sizes=True)
def narrow(a, dim, start, length):
    """``torch.narrow``: ``length`` elements of dim ``dim`` from ``start`` (negative start wraps)."""
    op = "ltorch.narrow"
    _check_tensor(op, a)
    if a.ndim == 0:
        raise ThunderValueError(f"{op}: narrow() cannot be applied to a 0-dim tensor.")
    d = check_dim(op, a.ndim, dim)
    start, length = pyval(start), pyval(length)
    if isinstance(start, TensorProxy):
        raise UnsupportedOpError(f"{op}: a tensor start is data-dependent; pass a Python int")
    n = a.shape[d]
    if not -n <= start <= n:
        raise ThunderIndexError(f"{op}: start out of range (expected to be in range of [{-n}, {n}], but got {start})")
    if start < 0:
        start += n
    if length < 0:
        raise ThunderValueError(f"{op}: narrow(): length must be non-negative.")
    if start + length > n:
        raise ThunderValueError(f"{op}: start ({start}) + length ({length}) exceeds dimension size ({n}).")
    return slice_dim(a, d, start, start + length)


@torchsymbol(torch.select, method_name="select")
def select(a, dim, index):
    """``torch.select``: the slice at ``index`` of dim ``dim``, with that dim removed."""
    op = "ltorch.select"
    _check_tensor(op, a)
    if a.ndim == 0:
        raise ThunderIndexError(f"{op}: select() cannot be applied to a 0-dim tensor.")
    d = check_dim(op, a.ndim, dim)
    i, n = pyval(index), a.shape[d]
    if not -n <= i < n:
        raise ThunderIndexError(
            f"{op}: select(): index {i} out of range for tensor of size {list(a.shape)} at dimension {d}"
        )
    i = i + n if i < 0 else i
    return prims.squeeze(slice_dim(a, d, i, i + 1), (d,))


def _split_at(a, d, bounds):
    return tuple(slice_dim(a, d, s, e) for s, e in zip(bounds[:-1], bounds[1:]))


def _split_impl(a, split_size_or_sections=None, dim=0, *, split_size=None):
    # torch.split names the argument split_size_or_sections, Tensor.split names it split_size.
    return torch.split(a, split_size if split_size is not None else split_size_or_sections, dim)


@torchsymbol(torch.split, method_name="split", torch_impl=_split_impl)
def split(a, split_size_or_sections=None, dim=0, *, split_size=None):
    """``torch.split``: pieces of ``split_size`` (the last may be smaller) or of the given sizes."""
    if split_size is not None:
        split_size_or_sections = split_size
    if split_size_or_sections is None:
        raise ThunderTypeError("ltorch.split: missing the split_size_or_sections argument")
    op = "ltorch.split"
    _check_tensor(op, a)
    d = check_dim(op, a.ndim, dim)
    n = a.shape[d] if a.ndim else 1
    sizes = split_size_or_sections
    if isinstance(sizes, (int, NumberProxy)):
        size = pyval(sizes)
        if size < 0:
            raise ThunderValueError(f"{op}: split expects split_size be non-negative, but got split_size={size}")
        if size == 0:
            if n != 0:
                raise ThunderValueError(
                    f"{op}: split_size can only be 0 if dimension size is 0, but got dimension size of {n}"
                )
            return (slice_dim(a, d, 0, 0),)
        return _split_at(a, d, _even_bounds(n, size) if n else [0, 0])
    sizes = [pyval(s) for s in sizes]
    if sum(sizes) != n or any(s < 0 for s in sizes):
        raise ThunderValueError(
            f"{op}: split_with_sizes expects split_sizes to sum exactly to {n} (input tensor's size at dimension "
            f"{d}), but got split_sizes={sizes}"
        )
    return _split_at(a, d, [0, *_cumsum(sizes)])


def _even_bounds(n, size) -> list:
    """``[0, size, 2 * size, ..., n]``: the bounds of the pieces of ``size`` elements (the last one may be
    shorter) of a dim of ``n``. How many pieces there are is the number of results: under symbolic values
    it is pinned (a constraint the prologue checks, so a size that makes another count recompiles), while
    the bounds follow ``n``. (``range(0, n, size)`` would read a symbolic ``n`` natively, unchecked.)"""
    count = -(-n // size)
    if is_symbolic(count):
        count = pin(count)
    return [0, *(i * size for i in range(1, count)), n]


def _cumsum(xs):
    total, out = 0, []
    for x in xs:
        total += x
        out.append(total)
    return out


@torchsymbol(torch.chunk, method_name="chunk")
def chunk(a, chunks, dim=0):
    """``torch.chunk``: pieces of ``ceil(n / chunks)`` elements (possibly fewer than ``chunks`` pieces)."""
    op = "ltorch.chunk"
    _check_tensor(op, a)
    chunks = pyval(chunks)
    if chunks <= 0:
        raise ThunderValueError(f"{op}: chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = check_dim(op, a.ndim, dim)
    n = a.shape[d]
    size = -(-n // chunks)
    if size == 0:
        return tuple(slice_dim(a, d, 0, 0) for _ in range(chunks))
    return _split_at(a, d, _even_bounds(n, size))


@torchsymbol(torch.tensor_split, method_name="tensor_split")
def tensor_split(a, indices_or_sections, dim=0):
    """``torch.tensor_split``: ``sections`` near-equal pieces, or pieces cut at the given indices."""
    op = "ltorch.tensor_split"
    _check_tensor(op, a)
    if a.ndim == 0:
        raise ThunderValueError(
            f"{op}: tensor_split expected at least a 1-dimensional tensor, but got a tensor with 0 dims"
        )
    d = check_dim(op, a.ndim, dim)
    n = a.shape[d]
    if isinstance(indices_or_sections, TensorProxy):
        raise UnsupportedOpError(f"{op}: indices given as a tensor are data-dependent; pass a list of ints")
    if isinstance(indices_or_sections, (int, NumberProxy)):
        s = pyval(indices_or_sections)
        if s <= 0:
            raise ThunderValueError(f"{op}: number of sections must be larger than 0, got {s}")
        q, r = divmod(n, s)
        bounds = [0]
        for i in range(s):
            bounds.append(bounds[-1] + q + (1 if i < r else 0))
        return _split_at(a, d, bounds)
    bounds = [0]
    for i in indices_or_sections:
        i = pyval(i)
        i = i + n if i < 0 else i
        bounds.append(min(max(i, 0), n))
    bounds.append(n)
    return tuple(slice_dim(a, d, s, max(s, e)) for s, e in zip(bounds[:-1], bounds[1:]))


@torchsymbol(torch.unbind, method_name="unbind")
def unbind(a, dim=0):
    """``torch.unbind``: the slices along ``dim``, each with that dim removed."""
    op = "ltorch.unbind"
    _check_tensor(op, a)
    if a.ndim == 0:
        raise ThunderIndexError(f"{op}: Dimension specified as 0 but tensor has no dimensions")
    d = check_dim(op, a.ndim, dim)
    n = pin_index(a.shape[d])  # the number of results: pinned under symbolic values (see _even_bounds)
    return tuple(prims.squeeze(slice_dim(a, d, i, i + 1), (d,)) for i in range(n))


def _pieces_vjp(name: str, dim_position: int, squeezed: bool = False):
    """The rule of an op that cuts ``a`` into pieces that cover it once, in order (``split``,
    ``chunk``, ``unbind``): the pieces' cotangents concatenated, as eager's backward does, instead
    of one zero-padded tensor per piece summed up."""

    def rule(g, out, a, *rest, **kwargs):
        nones = tuple(None for _ in rest)
        if not is_differentiable(a):
            return (None, *nones)
        dim = rest[dim_position - 1] if len(rest) >= dim_position else kwargs.get("dim", 0)
        d = check_dim(f"ltorch.{name}", a.ndim, dim)
        pieces = list(g)
        if squeezed:
            pieces = [prims.reshape(p, (*p.shape[:d], 1, *p.shape[d:])) for p in pieces]
        return (prims.cat(pieces, d), *nones)

    rule.__name__ = rule.__qualname__ = f"_{name}_vjp"
    return rule


grad_rules.register(split)(_pieces_vjp("split", 2))
grad_rules.register(chunk)(_pieces_vjp("chunk", 2))
grad_rules.register(unbind)(_pieces_vjp("unbind", 1, squeezed=True))


@torchsymbol(torch.diagonal, method_name="diagonal")
def diagonal(a, offset=0, dim1=0, dim2=1):
    """``torch.diagonal``: the (offset) diagonal of dims dim1 and dim2, appended as the last dim."""
    op = "ltorch.diagonal"
    _check_tensor(op, a)
    if a.ndim < 2:
        raise ThunderValueError(f"{op}: diagonal requires a tensor with at least 2 dimensions, got {a.ndim}")
    d1, d2 = check_dim(op, a.ndim, dim1), check_dim(op, a.ndim, dim2)
    if d1 == d2:
        raise ThunderValueError(f"{op}: diagonal dimensions cannot be identical {dim1}, {dim2}")
    offset = pyval(offset)
    rest = [d for d in range(a.ndim) if d not in (d1, d2)]
    x = prims.transpose(a, (*rest, d1, d2))
    n, m = a.shape[d1], a.shape[d2]
    length = max(0, min(n, m - offset) if offset >= 0 else min(n + offset, m))
    x = _reshape(x, (*x.shape[:-2], n * m))
    start = offset if offset >= 0 else -offset * m
    if length == 0:
        start = 0
    x = slice_dim(x, x.ndim - 1, start, start + max(length - 1, 0) * (m + 1) + (1 if length else 0), m + 1)
    return x


@torchsymbol(torch.Tensor.unfold, method_name="unfold", tags=(MAY_ALIAS,))
def unfold(a, dimension, size, step):
    """``Tensor.unfold``: the windows of ``size`` elements every ``step`` elements along ``dimension``, in a new
    last dim (audio framing, patch extraction). Eager's is a view, which the torch executor runs; the
    decomposition takes the windows' elements with ``take``."""
    op = "ltorch.unfold"
    _check_tensor(op, a)
    d = check_dim(op, a.ndim, dimension)
    size, step = pyval(size), pyval(step)
    x = a if a.ndim else prims.reshape(a, (1,))
    length = x.shape[d]
    if size > length:
        raise ThunderRuntimeError(f"{op}: maximum size for tensor at dimension {d} is {length} but size is {size}")
    if step <= 0:
        raise ThunderRuntimeError(f"{op}: step is {step} but must be > 0")
    if size < 0:
        raise ThunderRuntimeError(f"{op}: size is {size} but must be >= 0")
    n = (length - size) // step + 1
    starts = prims.iota(n, start=0, step=step, device=a.device, dtype=torch.int64)
    offsets = prims.iota(size, start=0, step=1, device=a.device, dtype=torch.int64)
    index = prims.add(prims.broadcast_in_dim(starts, (n, size), (0,)), prims.broadcast_in_dim(offsets, (n, size), (1,)))
    taken = prims.take(x, prims.reshape(index, (n * size,)), d)
    windows = prims.reshape(taken, (*x.shape[:d], n, size, *x.shape[d + 1 :]))
    if a.ndim == 0:  # eager's windows of a 0-d tensor have no dim for their count
        return prims.reshape(windows, (size,))
    return prims.transpose(windows, (*range(d + 1), *range(d + 2, windows.ndim), d + 1))


@torchsymbol(torch.linalg.diagonal)
def linalg_diagonal(A, *, offset=0, dim1=-2, dim2=-1):
    """``torch.linalg.diagonal``: ``torch.diagonal`` with the matrix dims last by default."""
    return diagonal(A, offset, dim1, dim2)


for _sym in (
    ravel, reshape, view, view_as, reshape_as, flatten, unflatten, squeeze, unsqueeze, permute, transpose, swapaxes,
    swapdims, t, T, mT, H, mH, movedim, moveaxis, expand, expand_as, broadcast_to, repeat, tile, cat, concatenate, stack,
    hstack, vstack, narrow, select, split, chunk, tensor_split, unbind, diagonal, unfold, linalg_diagonal, aten_slice,
):  # fmt: skip
    __all__.append(_sym.name)
