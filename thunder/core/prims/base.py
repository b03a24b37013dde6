"""The primitive factory and the checks prim meta functions share.

A prim is an enum ID plus one declaration (``make_prim``). Prims do no broadcasting and no
type promotion: that is the torch language's job. Each family lives in its own module with
its own ID enum; all are re-exported by ``thunder.core.prims``.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
from collections.abc import Callable, Iterator, Sequence
from numbers import Number

import torch

from thunder.core import dtypes
from thunder.core.errors import ThunderIndexError, ThunderTypeError, ThunderValueError, UnsupportedOpError
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.core.symbol import Symbol

# Every prim by ID, for executors and rule tables.
all_prims: dict = {}


def make_prim(
    id,
    name: str,
    meta: Callable,
    *,
    impl: Callable | None = None,
    tags: Sequence[str] = (),
    printer: Callable | None = None,
) -> Symbol:
    """Declares a primitive: ``prims.<name>`` with its meta function and reference ``impl``
    (a PyTorch callable with the prim's signature; the torch executor runs it)."""
    sym = Symbol(
        name=name,
        meta=meta,
        id=id,
        is_prim=True,
        module=importlib.import_module("thunder.core.prims"),
        module_alias="prims",
        printer=printer,
        tags=frozenset(tags),
        python_impl=impl,
    )
    all_prims[id] = sym
    return sym


def is_number(x) -> bool:
    return isinstance(x, (Number, NumberProxy)) and not isinstance(x, torch.Tensor)


def check_tensor(op: str, arg: str, x) -> None:
    if not isinstance(x, TensorProxy):
        raise ThunderTypeError(f"{op}: expected {arg} to be a tensor, but got {type(x).__name__} {x!r}")


def check_same_shape(op: str, tensors: Sequence[TensorProxy], names: Sequence[str]) -> None:
    first = tensors[0]
    for t, n in zip(tensors[1:], names[1:]):
        if t.shape != first.shape:
            raise ThunderValueError(
                f"{op}: expected tensors of the same shape, but {names[0]} has shape {tuple(first.shape)} "
                f"and {n} has shape {tuple(t.shape)} (prims do not broadcast)"
            )


def check_same_device(op: str, tensors: Sequence[TensorProxy], names: Sequence[str]) -> None:
    devs = [(n, t.device) for t, n in zip(tensors, names) if isinstance(t, TensorProxy)]
    for n, d in devs[1:]:
        if d != devs[0][1]:
            raise ThunderValueError(
                f"{op}: expected all tensors on the same device, but {devs[0][0]} is on {devs[0][1]} and "
                f"{n} is on {d}. Move them with .to(device) first."
            )


def check_same_dtype(op: str, tensors: Sequence[TensorProxy], names: Sequence[str]) -> None:
    ds = [(n, t.dtype) for t, n in zip(tensors, names) if isinstance(t, TensorProxy)]
    for n, d in ds[1:]:
        if d != ds[0][1]:
            raise ThunderTypeError(
                f"{op}: expected tensors of the same dtype, but {ds[0][0]} is {ds[0][1]} and {n} is {d} "
                "(prims do not promote types; convert first)"
            )


def check_operands(op: str, **named) -> None:
    """Each named argument that is not None must be a tensor, all on one device with one dtype
    (an optional bias is passed as None when absent)."""
    present = {name: t for name, t in named.items() if t is not None}
    for name, t in present.items():
        check_tensor(op, name, t)
    check_same_device(op, list(present.values()), list(present))
    check_same_dtype(op, list(present.values()), list(present))


def check_dtype(op: str, arg: str, x, allowed: Callable[[torch.dtype], bool], what: str) -> None:
    d = dtypes.to_dtype(x)
    if not allowed(d):
        raise ThunderTypeError(f"{op}: {arg} has dtype {d}, but {what} is required")


def canonicalize_dim(op: str, ndim: int, dim: int, *, wrap_scalar: bool = True) -> int:
    """``dim`` as a non-negative index into ``ndim`` dims, with PyTorch's error text when out of range."""
    rank = max(ndim, 1) if wrap_scalar else ndim
    if not isinstance(dim, int):
        raise ThunderTypeError(f"{op}: dim must be an int, but got {type(dim).__name__} {dim!r}")
    if dim < -rank or dim >= rank:
        raise ThunderIndexError(
            f"{op}: Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})"
        )
    return dim + rank if dim < 0 else dim


def canonicalize_dims(op: str, ndim: int, dims) -> tuple[int, ...]:
    if isinstance(dims, int):
        dims = (dims,)
    return tuple(canonicalize_dim(op, ndim, d) for d in dims)


# --- gradient helpers (Note [VJP rules] in thunder.core.rules) ---
# Shared by the rule sections at the bottom of each family module. They call prims through the
# package (looked up when a rule runs, so the families may use each other's prims), and work on
# proxies inside a trace and on real tensors outside one.


def is_tensor(x) -> bool:
    return isinstance(x, (TensorProxy, torch.Tensor))


def is_differentiable(x) -> bool:
    """A tensor that can have a gradient: floating point or complex."""
    return is_tensor(x) and dtypes.is_inexact_dtype(x.dtype)


# Which arguments' gradients a rule is asked for (``grad_asked``): set by the autograd transform.
_grads_asked: contextvars.ContextVar[Callable[[object], bool] | None] = contextvars.ContextVar(
    "thunder_grads_asked", default=None
)


def grad_asked(x) -> bool:
    """Whether a VJP rule is asked for the gradient of its argument ``x``: within the autograd
    transform, for the values that require grad; elsewhere (a rule run eagerly) for every
    differentiable tensor. Rules whose one kernel computes several gradients
    (``convolution_backward``'s output mask) compute only those asked for, as eager does."""
    asked = _grads_asked.get()
    return is_differentiable(x) and (asked is None or asked(x))


@contextlib.contextmanager
def asking_grads(asked: Callable[[object], bool]) -> Iterator[None]:
    """Rules called inside are asked for the gradients of the arguments ``asked`` accepts."""
    token = _grads_asked.set(asked)
    try:
        yield
    finally:
        _grads_asked.reset(token)


def zeros_like(x, *, shape=None, dtype=None):
    from thunder.core import prims

    shape = tuple(x.shape) if shape is None else tuple(shape)
    return prims.full(shape, 0, device=x.device, dtype=x.dtype if dtype is None else dtype)


def full_like(x, value):
    """``value`` as a tensor of ``x``'s shape, dtype and device; numbers in elementwise rules
    become tensors this way, so one formula covers tensor and number operands."""
    from thunder.core import prims

    return prims.full(tuple(x.shape), value, device=x.device, dtype=x.dtype)


def conj(x):
    """The complex conjugate of a tensor or number (the identity for real ones).

    There is no conj prim: ``2 * real(z) - z`` is exact (the doubled real part and both
    differences are exactly representable)."""
    from thunder.core import prims

    if not is_tensor(x):
        return x.conjugate() if isinstance(x, complex) else x
    if not x.dtype.is_complex:
        return x
    return prims.sub(prims.mul(prims.convert_element_type(prims.real(x), x.dtype), 2), x)


def check_real_grad(op: str, *args) -> None:
    """Rules that do not implement torch's complex convention call this, so they fail loudly
    instead of returning a wrong gradient."""
    for i, a in enumerate(args):
        if is_tensor(a) and a.dtype.is_complex:
            raise UnsupportedOpError(
                f"the gradient of {op} is not implemented for complex inputs (argument {i} has dtype {a.dtype}); "
                "compute it on the real and imaginary parts separately"
            )


def zero_grad_rule(g, out, *args, **kwargs) -> tuple:
    """The rule of a prim whose gradient is zero almost everywhere, or whose arguments are not
    differentiable (factories): no argument gets a gradient."""
    return (None,) * len(args)
