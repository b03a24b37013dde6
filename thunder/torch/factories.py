"""Tensor factories: zeros/ones/full/empty, ranges (arange, linspace, eye), random tensors,
``torch.tensor`` from Python data, the ``*_like`` family and the ``Tensor.new_*`` methods.

PyTorch's defaults apply: sizes as varargs or one sequence, ``torch.get_default_dtype()`` for
floats, int64 for integer ``arange``/``randint``, a ``full`` dtype inferred from its fill
value, the input's dtype and device for ``*_like`` and ``new_*``. Random factories are tagged
``RANDOM`` (never merged by CSE) and ``DONT_DCE`` (an unused draw still advances torch's
global generator); the torch executor calls the torch function itself, so
``torch.manual_seed`` before eager and jitted calls gives the same numbers.

Layer: language. Imports: core, torch.base.
"""

from __future__ import annotations

import builtins
import functools
import math
import operator
from numbers import Number

import torch

from thunder.core import devices, dtypes, prims
from thunder.core.errors import ThunderRuntimeError, ThunderTypeError, ThunderValueError, UnsupportedOpError
from thunder.core.proxies import NumberProxy, TensorProxy, pyval, register_method
from thunder.core.symbol import DONT_DCE, RANDOM
from thunder.core.tracectx import current_source_location
from thunder.torch.base import is_number, torch_to_thunder_map, torchsymbol

__all__ = [
    "zeros", "ones", "full", "empty", "arange", "linspace", "eye", "rand", "randn", "randint", "tensor",
    "scalar_tensor", "as_tensor", "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like",
    "randint_like", "new_zeros", "new_ones", "new_full", "new_empty", "new_tensor",
]  # fmt: skip

_RANDOM_TAGS = (RANDOM, DONT_DCE)


# ----------------------------------------------------------------------------------------
# Argument handling shared by every factory
# ----------------------------------------------------------------------------------------


def factory_size(op: str, size: tuple, size_kw=None) -> tuple[int, ...]:
    """The size of a new tensor from ``*size`` varargs, one sequence, or ``size=``."""
    if size_kw is not None:
        if size:
            raise ThunderTypeError(f"{op}: got the size both positionally {size!r} and as size={size_kw!r}")
        size = (size_kw,)
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    dims = []
    for n in size:
        v = pyval(n)
        if isinstance(v, bool) or not isinstance(v, int):
            raise ThunderTypeError(
                f"{op}: size must be ints (as varargs or one tuple), but got {type(v).__name__} {v!r} in {size!r}"
            )
        dims.append(v)
    if builtins.any(n < 0 for n in dims):
        raise ThunderValueError(f"{op}: Trying to create tensor with negative dimension {builtins.min(dims)}: {dims}")
    return tuple(dims)


def factory_device(op: str, device, default: torch.device | None = None) -> torch.device:
    """``device`` as a ``torch.device`` (the default device when None); CUDA must be present to be used."""
    if device is None:
        return default if default is not None else torch.get_default_device()
    try:
        device = devices.to_device(device)
    except (TypeError, RuntimeError) as e:
        raise ThunderTypeError(f"{op}: cannot interpret device={device!r} as a device ({e})") from None
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise ThunderRuntimeError(
                f"{op}: device {device} was requested, but CUDA is not available on this machine "
                "(torch.cuda.is_available() is False). Use device='cpu', or run on a machine with a CUDA GPU."
            )
        if device.index is None:
            device = torch.device("cuda", torch.cuda.current_device())
    return device


def factory_dtype(op: str, dtype, default: torch.dtype) -> torch.dtype:
    if dtype is None:
        return default
    if dtype in dtypes.DTYPE_ARGUMENT_OF_PYTHON_TYPE:  # ``torch.tensor(0, dtype=int)``
        return dtypes.DTYPE_ARGUMENT_OF_PYTHON_TYPE[dtype]
    if not isinstance(dtype, torch.dtype):
        raise ThunderTypeError(f"{op}: dtype must be a torch.dtype, but got {type(dtype).__name__} {dtype!r}")
    return dtype


def check_generator(op: str, generator) -> None:
    """Only the default generator can be followed: it is the one the trace's random ops draw from
    (Note [Random ops follow eager's generator])."""
    if generator is not None and generator is not torch.default_generator:
        raise UnsupportedOpError(
            f"{op}: generator= with a torch.Generator other than torch's default one cannot be traced (the trace's "
            f"random ops follow only the default generator's state){_where()}; seed the default generator with "
            "torch.manual_seed, inside or before the function, or draw outside the function and pass the tensor in"
        )


def _where() -> str:
    loc = current_source_location()
    return f" (at {loc})" if loc is not None else ""


def _check_unsupported(op: str, *, out=None, layout=None, generator=None, pin_memory=False) -> None:
    if out is not None:
        raise ThunderTypeError(f"{op}: out= is not supported inside a jitted function; assign the result instead")
    if layout is not None and layout is not torch.strided:
        raise ThunderValueError(f"{op}: only layout=torch.strided is supported, but got {layout}")
    check_generator(op, generator)
    if pin_memory:
        raise ThunderValueError(f"{op}: pin_memory=True is not supported inside a jitted function")


def _finish(op: str, t: TensorProxy, requires_grad: bool) -> TensorProxy:
    """Marks the result as requiring grad, which PyTorch allows only for floating point and complex tensors."""
    if requires_grad:
        if not dtypes.is_inexact_dtype(t.dtype):
            raise ThunderRuntimeError(
                f"{op}: Only Tensors of floating point and complex dtype can require gradients, but dtype is {t.dtype}"
            )
        t.requires_grad = True
    return t


def _fill_dtype(value) -> torch.dtype:
    """The dtype ``torch.full`` infers from its fill value."""
    if isinstance(value, TensorProxy):
        return value.dtype
    return dtypes.python_type_to_dtype(value.python_type if isinstance(value, NumberProxy) else type(value))


def _check_fill(op: str, fill_value) -> None:
    if not is_number(fill_value):
        raise ThunderTypeError(f"{op}: fill_value must be a number, but got {type(fill_value).__name__} {fill_value!r}")
    dtypes.check_scalar(fill_value)


def _filled(op, shape, fill_value, device, dtype, requires_grad):
    return _finish(op, prims.full(shape, fill_value, device=device, dtype=dtype), requires_grad)


# ----------------------------------------------------------------------------------------
# Filled and uninitialised tensors
# ----------------------------------------------------------------------------------------


def _const_factory(name: str, fill_value):
    op = f"ltorch.{name}"

    def meta(
        *size, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False, size_kw=None
    ):
        _check_unsupported(op, out=out, layout=layout, pin_memory=pin_memory)
        shape = factory_size(op, size, size_kw)
        dtype = factory_dtype(op, dtype, dtypes.default_dtype())
        return _filled(op, shape, fill_value, factory_device(op, device), dtype, requires_grad)

    meta.__name__ = name
    meta.__doc__ = f"``torch.{name}``: a tensor of {fill_value}s (default dtype unless ``dtype=``)."
    return meta


def _with_size_kw(meta):
    """Lets ``torch.zeros(size=(2, 3))`` reach a meta whose varargs are also called ``size``."""

    def wrapper(*size, **kwargs):
        if "size" in kwargs:
            kwargs["size_kw"] = kwargs.pop("size")
        return meta(*size, **kwargs)

    wrapper.__name__ = meta.__name__
    wrapper.__doc__ = meta.__doc__
    return wrapper


zeros = torchsymbol(torch.zeros)(_with_size_kw(_const_factory("zeros", 0)))
ones = torchsymbol(torch.ones)(_with_size_kw(_const_factory("ones", 1)))


@torchsymbol(torch.full)
def full(size, fill_value, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """``torch.full``: the dtype follows ``fill_value`` (bool, int64, default float, complex) unless ``dtype=``."""
    op = "ltorch.full"
    _check_unsupported(op, out=out, layout=layout, pin_memory=pin_memory)
    _check_fill(op, fill_value)
    shape = factory_size(op, (size,))
    dtype = factory_dtype(op, dtype, _fill_dtype(fill_value))
    return _filled(op, shape, fill_value, factory_device(op, device), dtype, requires_grad)


def _empty(*size, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False,
           memory_format=None, size_kw=None):  # fmt: skip
    op = "ltorch.empty"
    _check_unsupported(op, out=out, layout=layout, pin_memory=pin_memory)
    shape = factory_size(op, size, size_kw)
    dtype = factory_dtype(op, dtype, dtypes.default_dtype())
    return _finish(op, prims.empty(shape, device=factory_device(op, device), dtype=dtype), requires_grad)


_empty.__name__ = "empty"
_empty.__doc__ = "``torch.empty``: an uninitialised tensor (only its metadata is meaningful)."
empty = torchsymbol(torch.empty)(_with_size_kw(_empty))


# ----------------------------------------------------------------------------------------
# Ranges
# ----------------------------------------------------------------------------------------


def _check_range_number(op: str, name: str, x):
    if isinstance(x, TensorProxy):
        raise UnsupportedOpError(
            f"{op}: {name} is a tensor, whose value is not known while tracing; pass a Python number"
        )
    if not is_number(x) or isinstance(pyval(x), complex):
        raise ThunderTypeError(f"{op}: {name} must be a real number, but got {type(x).__name__} {x!r}")
    dtypes.check_scalar(x)
    return pyval(x)


@torchsymbol(torch.arange, numbers=True)
def arange(start=0, end=None, step=1, *, out=None, dtype=None, layout=None, device=None, requires_grad=False,
           pin_memory=False):  # fmt: skip
    """``torch.arange``: int64 when start, end and step are all ints, else the default float dtype."""
    op = "ltorch.arange"
    _check_unsupported(op, out=out, layout=layout, pin_memory=pin_memory)
    if end is None:
        start, end = 0, start
    start, end, step = (_check_range_number(op, n, x) for n, x in (("start", start), ("end", end), ("step", step)))
    if step == 0:
        raise ThunderValueError(f"{op}: step must be nonzero")
    if (end - start) * step < 0:
        raise ThunderValueError(
            f"{op}: upper bound and larger bound inconsistent with step sign (start={start}, end={end}, step={step})"
        )
    all_int = builtins.all(isinstance(x, int) for x in (start, end, step))
    dtype = factory_dtype(op, dtype, torch.int64 if all_int else dtypes.default_dtype())
    length = math.ceil((end - start) / step) if not all_int else -((start - end) // step)
    out_t = prims.iota(length, start=start, step=step, device=factory_device(op, device), dtype=dtype)
    return _finish(op, out_t, requires_grad)


@torchsymbol(torch.linspace)
def linspace(start, end, steps, *, out=None, dtype=None, layout=None, device=None, requires_grad=False):
    """``torch.linspace``: ``steps`` evenly spaced values, exact at both ends (the second half counts down from end)."""
    op = "ltorch.linspace"
    _check_unsupported(op, out=out, layout=layout)
    start, end = _check_range_number(op, "start", start), _check_range_number(op, "end", end)
    steps = pyval(steps)
    if isinstance(steps, bool) or not isinstance(steps, int):
        raise ThunderTypeError(f"{op}: steps must be an int, but got {type(steps).__name__} {steps!r}")
    if steps < 0:
        raise ThunderValueError(f"{op}: number of steps must be non-negative, but got {steps}")
    dtype = factory_dtype(op, dtype, dtypes.default_dtype())
    device = factory_device(op, device)
    if steps <= 1:
        return _finish(op, prims.full((steps,), start, device=device, dtype=dtype), requires_grad)
    step = (end - start) / (steps - 1)
    idx = prims.iota(steps, start=0, step=1, device=device, dtype=torch.int64)
    fidx = prims.convert_element_type(idx, torch.float64)
    low = prims.add(prims.mul(fidx, step), float(start))
    high = prims.sub(float(end), prims.mul(prims.sub(float(steps - 1), fidx), step))
    values = prims.where(prims.lt(idx, steps // 2), low, high)
    return _finish(op, prims.convert_element_type(values, dtype), requires_grad)


@torchsymbol(torch.eye)
def eye(n, m=None, *, out=None, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """``torch.eye``: ones on the diagonal of an ``n`` x ``m`` matrix."""
    op = "ltorch.eye"
    _check_unsupported(op, out=out, layout=layout, pin_memory=pin_memory)
    m = n if m is None else m
    n, m = factory_size(op, (n, m))
    dtype = factory_dtype(op, dtype, dtypes.default_dtype())
    device = factory_device(op, device)
    rows = prims.broadcast_in_dim(prims.iota(n, start=0, step=1, device=device, dtype=torch.int64), (n, m), (0,))
    cols = prims.broadcast_in_dim(prims.iota(m, start=0, step=1, device=device, dtype=torch.int64), (n, m), (1,))
    return _finish(op, prims.convert_element_type(prims.eq(rows, cols), dtype), requires_grad)


# ----------------------------------------------------------------------------------------
# Random tensors
# ----------------------------------------------------------------------------------------


def _float_dtype(op: str, dtype) -> torch.dtype:
    dtype = factory_dtype(op, dtype, dtypes.default_dtype())
    if not dtype.is_floating_point:
        raise ThunderTypeError(
            f'{op}: "check_uniform_bounds" not implemented for {dtype}: a floating point dtype is required'
        )
    return dtype


def _rand(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
          pin_memory=False, size_kw=None):  # fmt: skip
    op = "ltorch.rand"
    _check_unsupported(op, out=out, layout=layout, generator=generator, pin_memory=pin_memory)
    shape = factory_size(op, size, size_kw)
    t = prims.uniform(shape, 0.0, 1.0, device=factory_device(op, device), dtype=_float_dtype(op, dtype))
    return _finish(op, t, requires_grad)


def _randn(*size, generator=None, out=None, dtype=None, layout=None, device=None, requires_grad=False,
           pin_memory=False, size_kw=None):  # fmt: skip
    op = "ltorch.randn"
    _check_unsupported(op, out=out, layout=layout, generator=generator, pin_memory=pin_memory)
    shape = factory_size(op, size, size_kw)
    dtype = factory_dtype(op, dtype, dtypes.default_dtype())
    if not dtypes.is_inexact_dtype(dtype):
        raise ThunderTypeError(f'{op}: "normal_kernel" not implemented for {dtype}: a floating point dtype is required')
    t = prims.randn(shape, device=factory_device(op, device), dtype=dtype)
    return _finish(op, t, requires_grad)


_rand.__name__, _randn.__name__ = "rand", "randn"
_rand.__doc__ = "``torch.rand``: uniform on [0, 1), drawn from torch's global generator."
_randn.__doc__ = "``torch.randn``: standard normal, drawn from torch's global generator."
rand = torchsymbol(torch.rand, tags=_RANDOM_TAGS)(_with_size_kw(_rand))
randn = torchsymbol(torch.randn, tags=_RANDOM_TAGS)(_with_size_kw(_randn))


def _randint_bounds(op: str, low, high):
    low, high = pyval(low), pyval(high)
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise ThunderTypeError(f"{op}: {name} must be an int, but got {type(v).__name__} {v!r}")
    if low >= high:
        raise ThunderValueError(f"{op}: random_ expects 'from' to be less than 'to', but got from={low} >= to={high}")
    return low, high


@torchsymbol(torch.randint, tags=_RANDOM_TAGS)
def randint(low=None, high=None, size=None, *, generator=None, out=None, dtype=None, layout=None, device=None,
            requires_grad=False, pin_memory=False):  # fmt: skip
    """``torch.randint(low=0, high, size)``: int64 unless ``dtype=``."""
    op = "ltorch.randint"
    _check_unsupported(op, out=out, layout=layout, generator=generator, pin_memory=pin_memory)
    if size is None and low is not None and high is not None:  # randint(high, size)
        low, high, size = 0, low, high
    if size is None or high is None:
        raise ThunderTypeError(f"{op}: expected randint(low=0, high, size), but high or size is missing")
    low, high = _randint_bounds(op, 0 if low is None else low, high)
    shape = factory_size(op, (size,))
    dtype = factory_dtype(op, dtype, torch.int64)
    t = prims.randint(low, high, shape, device=factory_device(op, device), dtype=dtype)
    return _finish(op, t, requires_grad)


# ----------------------------------------------------------------------------------------
# From Python data
# ----------------------------------------------------------------------------------------


def _holds_tensors(data) -> bool:
    if isinstance(data, (list, tuple)):
        return builtins.any(_holds_tensors(v) for v in data)
    return isinstance(data, TensorProxy)


def _from_tensors(op: str, data, dtype, device) -> TensorProxy:
    """``torch.tensor([x.sum(), x.max()])``: nested lists of one-element tensors (and numbers), each read as
    the number it holds, as eager does; the result's dtype promotes over them (a tensor counts with its dtype,
    a Python float as the default dtype, an int as int64), and it requires no grad."""
    from thunder.torch.conversions import detach  # (conversions imports this module)

    if dtype is None:
        leaves: list = []

        def gather(x):
            for v in x if isinstance(x, (list, tuple)) else (x,):
                (gather if isinstance(v, (list, tuple)) else leaves.append)(v)

        gather(data)
        dtype = functools.reduce(
            torch.promote_types,
            (v.dtype if isinstance(v, TensorProxy) else _infer_data_dtype(op, v) for v in leaves),
        )

    def build(x):
        if isinstance(x, (list, tuple)):
            parts = [build(v) for v in x]
            if not parts:
                return prims.tensor_from_sequence([], device=device, dtype=dtype)
            shape = parts[0].shape
            for part in parts[1:]:
                if part.shape != shape:
                    raise ThunderValueError(
                        f"{op}: expected sequence of length {shape[0] if shape else 1} at dim {len(shape)} (got "
                        f"{part.shape[0] if part.shape else 1})"
                    )
            return prims.cat([prims.reshape(part, (1, *shape)) for part in parts], 0)
        if isinstance(x, TensorProxy):
            if x.numel() != 1:
                raise ThunderValueError(f"{op}: only one element tensors can be converted to Python scalars")
            value = prims.reshape(x, ())
            value = value if value.device == device else prims.device_put(value, device)
            return value if value.dtype == dtype else prims.convert_element_type(value, dtype)
        return prims.full((), x, device=device, dtype=dtype)

    return detach(build(data))


def _number_kinds(op: str, x, kinds: set) -> None:
    """Adds the Python types of the numbers in ``x`` (nested lists and tuples) to ``kinds``."""
    if isinstance(x, (list, tuple)):
        for v in x:
            _number_kinds(op, v, kinds)
    elif is_number(x):
        kinds.add(pyval(x).__class__ if not isinstance(x, NumberProxy) else x.python_type)
    elif isinstance(x, Number):
        kinds.add(type(x))
    else:
        raise ThunderTypeError(
            f"{op}: data must be numbers or nested lists of numbers, but found {type(x).__name__} {x!r}"
        )


def _infer_data_dtype(op: str, data) -> torch.dtype:
    kinds: set = set()
    _number_kinds(op, data, kinds)  # (a recursive closure would be a reference cycle left by every compile)
    if builtins.any(issubclass(k, complex) for k in kinds):
        return dtypes.corresponding_complex_dtype(dtypes.default_dtype())
    if builtins.any(issubclass(k, float) for k in kinds):
        return dtypes.default_dtype()
    if builtins.any(issubclass(k, int) and k is not bool for k in kinds):
        return torch.int64
    if kinds:
        return torch.bool
    return dtypes.default_dtype()  # torch.tensor([]) is float


@torchsymbol(torch.tensor)
def tensor(data, *, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """``torch.tensor`` from Python numbers or nested lists (a constant of the trace)."""
    op = "ltorch.tensor"
    _check_unsupported(op, pin_memory=pin_memory)
    if isinstance(data, TensorProxy):
        raise ThunderTypeError(
            f"{op}: data is a tensor; use data.clone().detach() (or .to(dtype)) instead of torch.tensor(tensor)"
        )
    if _holds_tensors(data):
        dtype = None if dtype is None else factory_dtype(op, dtype, None)
        return _finish(op, _from_tensors(op, data, dtype, factory_device(op, device)), requires_grad)
    dtype = factory_dtype(op, dtype, _infer_data_dtype(op, data))
    t = prims.tensor_from_sequence(data, device=factory_device(op, device), dtype=dtype)
    return _finish(op, t, requires_grad)


@torchsymbol(torch.as_tensor)
def as_tensor(data, *, dtype=None, device=None):
    """``torch.as_tensor``: a tensor passes through (converted if asked); Python data becomes a constant."""
    op = "ltorch.as_tensor"
    if isinstance(data, TensorProxy):
        dtype = factory_dtype(op, dtype, data.dtype)
        target = factory_device(op, device, data.device)
        out = data if target == data.device else prims.device_put(data, target)
        return out if dtype == out.dtype else prims.convert_element_type(out, dtype)
    if _holds_tensors(data):
        return _from_tensors(op, data, None if dtype is None else factory_dtype(op, dtype, None), factory_device(op, device))
    dtype = factory_dtype(op, dtype, _infer_data_dtype(op, data))
    return prims.tensor_from_sequence(data, device=factory_device(op, device), dtype=dtype)


@torchsymbol(torch.scalar_tensor)
def scalar_tensor(s, *, dtype=None, layout=None, device=None, requires_grad=False, pin_memory=False):
    """``torch.scalar_tensor``: a 0-d tensor of the default float dtype unless ``dtype=``."""
    op = "ltorch.scalar_tensor"
    _check_unsupported(op, layout=layout, pin_memory=pin_memory)
    _check_fill(op, s)
    dtype = factory_dtype(op, dtype, dtypes.default_dtype())
    return _filled(op, (), s, factory_device(op, device), dtype, requires_grad)


# ----------------------------------------------------------------------------------------
# *_like
# ----------------------------------------------------------------------------------------


def _check_like_input(op: str, a) -> None:
    if not isinstance(a, TensorProxy):
        raise ThunderTypeError(f"{op}: expected input to be a tensor, but got {type(a).__name__} {a!r}")


def _like_factory(name: str, fill_value):
    op = f"ltorch.{name}"

    def meta(input, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None,
             pin_memory=False):  # fmt: skip
        _check_like_input(op, input)
        _check_unsupported(op, layout=layout, pin_memory=pin_memory)
        dtype = factory_dtype(op, dtype, input.dtype)
        device = factory_device(op, device, input.device)
        if fill_value is None:
            return _finish(op, prims.empty(input.shape, device=device, dtype=dtype), requires_grad)
        return _filled(op, input.shape, fill_value, device, dtype, requires_grad)

    meta.__name__ = name
    meta.__doc__ = f"``torch.{name}``: the shape, dtype and device of ``input`` unless given."
    return meta


zeros_like = torchsymbol(torch.zeros_like)(_like_factory("zeros_like", 0))
ones_like = torchsymbol(torch.ones_like)(_like_factory("ones_like", 1))
empty_like = torchsymbol(torch.empty_like)(_like_factory("empty_like", None))


@torchsymbol(torch.full_like)
def full_like(input, fill_value, *, dtype=None, layout=None, device=None, requires_grad=False, memory_format=None,
              pin_memory=False):  # fmt: skip
    """``torch.full_like``: ``input``'s dtype (not the fill value's) unless ``dtype=``."""
    op = "ltorch.full_like"
    _check_like_input(op, input)
    _check_unsupported(op, layout=layout, pin_memory=pin_memory)
    _check_fill(op, fill_value)
    dtype = factory_dtype(op, dtype, input.dtype)
    return _filled(op, input.shape, fill_value, factory_device(op, device, input.device), dtype, requires_grad)


@torchsymbol(torch.rand_like, tags=_RANDOM_TAGS)
def rand_like(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
              memory_format=None, pin_memory=False):  # fmt: skip
    """``torch.rand_like``: uniform on [0, 1) with ``input``'s shape, dtype and device."""
    op = "ltorch.rand_like"
    _check_like_input(op, input)
    _check_unsupported(op, layout=layout, generator=generator, pin_memory=pin_memory)
    dtype = _float_dtype(op, factory_dtype(op, dtype, input.dtype))
    t = prims.uniform(input.shape, 0.0, 1.0, device=factory_device(op, device, input.device), dtype=dtype)
    return _finish(op, t, requires_grad)


@torchsymbol(torch.randn_like, tags=_RANDOM_TAGS)
def randn_like(input, *, generator=None, dtype=None, layout=None, device=None, requires_grad=False,
               memory_format=None, pin_memory=False):  # fmt: skip
    """``torch.randn_like``: standard normal with ``input``'s shape, dtype and device."""
    op = "ltorch.randn_like"
    _check_like_input(op, input)
    _check_unsupported(op, layout=layout, generator=generator, pin_memory=pin_memory)
    dtype = factory_dtype(op, dtype, input.dtype)
    if not dtypes.is_inexact_dtype(dtype):
        raise ThunderTypeError(f'{op}: "normal_kernel" not implemented for {dtype}: a floating point dtype is required')
    t = prims.randn(input.shape, device=factory_device(op, device, input.device), dtype=dtype)
    return _finish(op, t, requires_grad)


@torchsymbol(torch.randint_like, tags=_RANDOM_TAGS)
def randint_like(input, low=0, high=None, *, generator=None, dtype=None, layout=None, device=None,
                 requires_grad=False, memory_format=None, pin_memory=False):  # fmt: skip
    """``torch.randint_like(input, low=0, high)``: ``input``'s dtype unless ``dtype=``."""
    op = "ltorch.randint_like"
    _check_like_input(op, input)
    _check_unsupported(op, layout=layout, generator=generator, pin_memory=pin_memory)
    if high is None:
        low, high = 0, low
    low, high = _randint_bounds(op, low, high)
    dtype = factory_dtype(op, dtype, input.dtype)
    t = prims.randint(low, high, input.shape, device=factory_device(op, device, input.device), dtype=dtype)
    return _finish(op, t, requires_grad)


# ----------------------------------------------------------------------------------------
# Tensor.new_*: the dtype and device of ``self`` unless given
# ----------------------------------------------------------------------------------------


def _new_factory(name: str, fill_value):
    op = f"ltorch.{name}"

    def meta(self, *size, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False, size_kw=None):
        _check_like_input(op, self)
        _check_unsupported(op, layout=layout, pin_memory=pin_memory)
        shape = factory_size(op, size, size_kw)
        dtype = factory_dtype(op, dtype, self.dtype)
        device = factory_device(op, device, self.device)
        if fill_value is None:
            return _finish(op, prims.empty(shape, device=device, dtype=dtype), requires_grad)
        return _filled(op, shape, fill_value, device, dtype, requires_grad)

    meta.__name__ = name
    meta.__doc__ = f"``Tensor.{name}``: a new tensor with the dtype and device of ``self`` unless given."

    def wrapper(self, *size, **kwargs):
        if "size" in kwargs:
            kwargs["size_kw"] = kwargs.pop("size")
        return meta(self, *size, **kwargs)

    wrapper.__name__, wrapper.__doc__ = name, meta.__doc__
    return torchsymbol(method_name=name, torch_impl=getattr(torch.Tensor, name))(wrapper)


new_zeros = _new_factory("new_zeros", 0)
new_ones = _new_factory("new_ones", 1)
new_empty = _new_factory("new_empty", None)


@torchsymbol(method_name="new_full", torch_impl=torch.Tensor.new_full)
def new_full(self, size, fill_value, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """``Tensor.new_full``: ``self``'s dtype (not the fill value's) unless ``dtype=``."""
    op = "ltorch.new_full"
    _check_like_input(op, self)
    _check_unsupported(op, layout=layout, pin_memory=pin_memory)
    _check_fill(op, fill_value)
    shape = factory_size(op, (size,))
    dtype = factory_dtype(op, dtype, self.dtype)
    return _filled(op, shape, fill_value, factory_device(op, device, self.device), dtype, requires_grad)


@torchsymbol(method_name="new_tensor", torch_impl=torch.Tensor.new_tensor)
def new_tensor(self, data, *, dtype=None, device=None, requires_grad=False, layout=None, pin_memory=False):
    """``Tensor.new_tensor``: Python data as a tensor with ``self``'s dtype and device unless given."""
    op = "ltorch.new_tensor"
    _check_like_input(op, self)
    _check_unsupported(op, layout=layout, pin_memory=pin_memory)
    _infer_data_dtype(op, data)  # validates the data
    dtype = factory_dtype(op, dtype, self.dtype)
    t = prims.tensor_from_sequence(data, device=factory_device(op, device, self.device), dtype=dtype)
    return _finish(op, t, requires_grad)


def new(self, *args, device=None):
    """``Tensor.new`` (the legacy constructor), with ``self``'s dtype and device: ``new()`` is empty, ``new(2, 3)``
    or ``new(torch.Size([2, 3]))`` uninitialized of that size, ``new([1., 2.])`` (any sequence) that data. Recorded
    as ``new_empty`` or ``new_tensor``. ``new(tensor)`` (an alias of that tensor's memory) is refused."""
    op = "ltorch.new"
    _check_like_input(op, self)
    if any(isinstance(a, TensorProxy) for a in args):
        raise UnsupportedOpError(
            f"{op}: Tensor.new(tensor) returns a tensor that shares the given tensor's memory, which thunder does not "
            "record; use tensor.detach() (or .clone()) instead"
        )
    if not args:
        return new_empty(self, 0, device=device)
    if len(args) == 1 and isinstance(args[0], (list, tuple)) and not isinstance(args[0], torch.Size):
        return new_tensor(self, args[0], device=device)
    if len(args) == 1 and not isinstance(args[0], (int, NumberProxy, torch.Size)):
        raise ThunderTypeError(f"{op}: new(): data must be a sequence (got {type(args[0]).__name__})")
    return new_empty(self, *args, device=device)


register_method("new", new)
torch_to_thunder_map[torch.Tensor.new] = new


# ----------------------------------------------------------------------------------------
# Sizes given as tensors
# ----------------------------------------------------------------------------------------


def read_as_int(x):
    """A tensor of one integer element as the int it holds, as eager reads it (``__index__``): here,
    where the program's data-dependent values are read (Note [Data-dependent values]; a symbol's meta
    cannot read them). Sequences are read item by item; anything else is left to the meta's checks,
    which reject it as eager does (a float, bool or longer tensor)."""
    if isinstance(x, TensorProxy):
        one_int = math.prod(x.shape) == 1 and dtypes.is_integer_dtype(x.dtype) and x.dtype is not torch.bool
        return operator.index(x) if one_int else x
    if isinstance(x, (tuple, list)):
        return type(x)(read_as_int(n) for n in x)
    return x


def _reading_sizes(sym, sizes: slice, *, sequences_only: bool = False):
    """``sym`` called with the tensors among its size arguments (``args[sizes]`` and ``size=``) read as ints."""

    def read(x):
        return read_as_int(x) if not sequences_only or isinstance(x, (tuple, list)) else x

    def call(*args, **kwargs):
        start, stop, _ = sizes.indices(len(args))
        args = (*args[:start], *(read(a) for a in args[start:stop]), *args[stop:])
        if "size" in kwargs:
            kwargs["size"] = read_as_int(kwargs["size"])
        return sym(*args, **kwargs)

    call.__name__ = call.__qualname__ = sym.name
    call.__doc__ = f"``ltorch.{sym.name}`` with sizes given as integer tensors read as ints (``read_as_int``)."
    return call


for _sym, _fn in ((zeros, torch.zeros), (ones, torch.ones), (empty, torch.empty), (rand, torch.rand),
                  (randn, torch.randn)):  # fmt: skip
    torch_to_thunder_map[_fn] = _reading_sizes(_sym, slice(None))
torch_to_thunder_map[torch.full] = _reading_sizes(full, slice(0, 1))
torch_to_thunder_map[torch.randint] = _reading_sizes(randint, slice(None), sequences_only=True)
# The methods (not ``torch.Tensor.new_zeros`` itself: the table's entry is the symbol, whose id is used).
for _sym in (new_zeros, new_ones, new_empty):
    register_method(_sym.name, _reading_sizes(_sym, slice(1, None)))
register_method("new_full", _reading_sizes(new_full, slice(1, 2)))
