"""Factory primitives: prims that make new tensors (filled, ranges, random, uninitialised,
from Python data) and that copy tensors (clone, device transfer).

Every factory takes its ``device`` and ``dtype`` explicitly: defaults are the torch
language's job. Random prims carry the ``RANDOM`` tag (CSE never merges two calls) and
``DONT_DCE`` (an unused draw still advances the global generator, as in eager PyTorch);
their reference implementations draw from torch's global generator the way the torch
factories do (``rand`` is ``empty().uniform_()``, ``randn`` is ``empty().normal_()``), so the
same seed gives the same numbers.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import enum
from numbers import Number

import torch

from thunder.core import dtypes
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import check_tensor, is_differentiable, is_number, make_prim, zero_grad_rule
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import grad_rules
from thunder.core.symbol import DONT_DCE, RANDOM, Symbol


class FactoryPrimIDs(enum.Enum):
    FULL = enum.auto()
    IOTA = enum.auto()
    EMPTY = enum.auto()
    UNIFORM = enum.auto()
    RANDN = enum.auto()
    RANDINT = enum.auto()
    TENSOR_FROM_SEQUENCE = enum.auto()
    CLONE = enum.auto()
    DEVICE_PUT = enum.auto()


F = FactoryPrimIDs


def _check_shape(op: str, shape) -> tuple[int, ...]:
    if not isinstance(shape, (tuple, list)) or not all(isinstance(n, int) and not isinstance(n, bool) for n in shape):
        raise ThunderTypeError(f"{op}: shape must be a tuple of ints, but got {shape!r}")
    for n in shape:
        if n < 0:
            raise ThunderValueError(f"{op}: Trying to create tensor with negative dimension {n}: {list(shape)}")
    return tuple(shape)


def _check_device_dtype(op: str, device, dtype) -> None:
    if not isinstance(device, torch.device):
        raise ThunderTypeError(f"{op}: device must be a torch.device, but got {device!r}")
    if not isinstance(dtype, torch.dtype):
        raise ThunderTypeError(f"{op}: dtype must be a torch.dtype, but got {dtype!r}")


def _full_meta(shape, fill_value, *, device, dtype):
    op = "prims.full"
    shape = _check_shape(op, shape)
    _check_device_dtype(op, device, dtype)
    if not is_number(fill_value):
        raise ThunderTypeError(f"{op}: fill_value must be a number, but got {type(fill_value).__name__}")
    return TensorProxy(shape=shape, dtype=dtype, device=device)


def _full_impl(shape, fill_value, *, device, dtype):
    return torch.full(shape, fill_value, device=device, dtype=dtype)


full = make_prim(F.FULL, "full", _full_meta, impl=_full_impl)


def _iota_meta(length, *, start, step, device, dtype):
    op = "prims.iota"
    _check_device_dtype(op, device, dtype)
    length = pyval(length)
    if not isinstance(length, int) or length < 0:
        raise ThunderValueError(f"{op}: length must be a non-negative int, but got {length!r}")
    if not is_number(start) or not is_number(step):
        raise ThunderTypeError(f"{op}: start and step must be numbers, but got {start!r} and {step!r}")
    return TensorProxy(shape=(length,), dtype=dtype, device=device)


def _iota_impl(length, *, start, step, device, dtype):
    """``start + i * step`` for ``i`` in ``range(length)``, computed in float64 for float outputs."""
    compute = torch.float64 if dtype.is_floating_point or dtype.is_complex else torch.int64
    idx = torch.arange(length, device=device, dtype=compute)
    return (idx * step + start).to(dtype)


iota = make_prim(F.IOTA, "iota", _iota_meta, impl=_iota_impl)


def _empty_meta(shape, *, device, dtype):
    op = "prims.empty"
    shape = _check_shape(op, shape)
    _check_device_dtype(op, device, dtype)
    return TensorProxy(shape=shape, dtype=dtype, device=device)


def _empty_impl(shape, *, device, dtype):
    return torch.empty(shape, device=device, dtype=dtype)


empty = make_prim(F.EMPTY, "empty", _empty_meta, impl=_empty_impl)

_RANDOM_TAGS = (RANDOM, DONT_DCE)


def _uniform_meta(shape, minval, maxval, *, device, dtype):
    op = "prims.uniform"
    shape = _check_shape(op, shape)
    _check_device_dtype(op, device, dtype)
    if not dtype.is_floating_point:
        raise ThunderTypeError(f"{op}: dtype {dtype} is not a floating point dtype; draw floats and convert")
    if not is_number(minval) or not is_number(maxval):
        raise ThunderTypeError(f"{op}: minval and maxval must be numbers, but got {minval!r} and {maxval!r}")
    return TensorProxy(shape=shape, dtype=dtype, device=device)


def _uniform_impl(shape, minval, maxval, *, device, dtype):
    return torch.empty(shape, device=device, dtype=dtype).uniform_(minval, maxval)


uniform = make_prim(F.UNIFORM, "uniform", _uniform_meta, impl=_uniform_impl, tags=_RANDOM_TAGS)


def _randn_meta(shape, *, device, dtype):
    op = "prims.randn"
    shape = _check_shape(op, shape)
    _check_device_dtype(op, device, dtype)
    if not dtypes.is_inexact_dtype(dtype):
        raise ThunderTypeError(f"{op}: dtype {dtype} is not a floating point or complex dtype")
    return TensorProxy(shape=shape, dtype=dtype, device=device)


def _randn_impl(shape, *, device, dtype):
    return torch.randn(shape, device=device, dtype=dtype)


randn = make_prim(F.RANDN, "randn", _randn_meta, impl=_randn_impl, tags=_RANDOM_TAGS)


def _randint_meta(low, high, shape, *, device, dtype):
    op = "prims.randint"
    shape = _check_shape(op, shape)
    _check_device_dtype(op, device, dtype)
    if not isinstance(pyval(low), int) or not isinstance(pyval(high), int):
        raise ThunderTypeError(f"{op}: low and high must be ints, but got {low!r} and {high!r}")
    if pyval(low) >= pyval(high):
        raise ThunderValueError(f"{op}: random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return TensorProxy(shape=shape, dtype=dtype, device=device)


def _randint_impl(low, high, shape, *, device, dtype):
    return torch.randint(low, high, shape, device=device, dtype=dtype)


randint = make_prim(F.RANDINT, "randint", _randint_meta, impl=_randint_impl, tags=_RANDOM_TAGS)


def _sequence_shape(op: str, data) -> tuple[int, ...]:
    if isinstance(data, (list, tuple)):
        if not data:
            return (0,)
        inner = [_sequence_shape(op, x) for x in data]
        if any(s != inner[0] for s in inner):
            raise ThunderValueError(f"{op}: expected a sequence of equal-length rows, but got {data!r}")
        return (len(data), *inner[0])
    if isinstance(data, Number) or is_number(data):
        return ()
    raise ThunderTypeError(
        f"{op}: data must be a number or a nested list of numbers, but found {type(data).__name__} {data!r}"
    )


def _tensor_from_sequence_meta(data, *, device, dtype):
    op = "prims.tensor_from_sequence"
    _check_device_dtype(op, device, dtype)
    return TensorProxy(shape=_sequence_shape(op, data), dtype=dtype, device=device)


def _tensor_from_sequence_impl(data, *, device, dtype):
    return torch.tensor(data, device=device, dtype=dtype)


tensor_from_sequence = make_prim(
    F.TENSOR_FROM_SEQUENCE, "tensor_from_sequence", _tensor_from_sequence_meta, impl=_tensor_from_sequence_impl
)


def _clone_meta(a):
    check_tensor("prims.clone", "a", a)
    return TensorProxy.like(a, requires_grad=False)


# A new tensor with ``a``'s values (never an alias of ``a``).
clone = make_prim(F.CLONE, "clone", _clone_meta, impl=torch.clone)


def _device_put_meta(a, device):
    check_tensor("prims.device_put", "a", a)
    if not isinstance(device, torch.device):
        raise ThunderTypeError(f"prims.device_put: device must be a torch.device, but got {device!r}")
    return TensorProxy.like(a, device=device, requires_grad=False)


def _device_put_impl(a, device):
    return a.to(device)


device_put = make_prim(F.DEVICE_PUT, "device_put", _device_put_meta, impl=_device_put_impl)


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]


# --- gradients (Note [VJP rules] in thunder.core.rules) ---
# New tensors depend on no tensor argument: no gradients. Copies pass the cotangent back.

grad_rules.register(full, iota, empty, uniform, randn, randint, tensor_from_sequence)(zero_grad_rule)


@grad_rules.register(clone)
def _clone_grad(g, out, a):
    return (g if is_differentiable(a) else None,)


@grad_rules.register(device_put)
def _device_put_grad(g, out, a, device):
    if not is_differentiable(a):
        return (None, None)
    return (device_put(g, a.device) if g.device != a.device else g, None)
