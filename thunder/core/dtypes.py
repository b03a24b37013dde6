"""Dtypes: thunder uses ``torch.dtype`` objects directly, plus the classification and
type-promotion rules the torch language needs.

Layer: core. Imports: torch, core.errors.
"""

from __future__ import annotations

import contextvars
import enum
from numbers import Number

import torch

from thunder.core.errors import ThunderOverflowError

dtype = torch.dtype

bool8 = torch.bool
uint8 = torch.uint8
int8 = torch.int8
int16 = torch.int16
int32 = torch.int32
int64 = torch.int64
float16 = torch.float16
bfloat16 = torch.bfloat16
float32 = torch.float32
float64 = torch.float64
complex64 = torch.complex64
complex128 = torch.complex128

_SHORT_NAMES = {
    torch.bool: "b8",
    torch.uint8: "ui8",
    torch.int8: "i8",
    torch.int16: "i16",
    torch.int32: "i32",
    torch.int64: "i64",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float32: "f32",
    torch.float64: "f64",
    torch.complex64: "c64",
    torch.complex128: "c128",
}
for _name in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64", "complex32"):
    if hasattr(torch, _name):
        _SHORT_NAMES.setdefault(getattr(torch, _name), _name)

low_precision_dtypes = frozenset({torch.float16, torch.bfloat16})

# lightning-thunder's dtype sets, of torch dtypes (which thunder's dtypes are).
all_dtypes = frozenset(_SHORT_NAMES)
boolean_dtypes = frozenset({torch.bool})
float_dtypes = frozenset(d for d in all_dtypes if d.is_floating_point)
float_math_dtypes = frozenset(d for d in float_dtypes if d.itemsize >= 2)  # the floats ops compute in: no float8
complex_dtypes = frozenset(d for d in all_dtypes if d.is_complex)
inexact_dtypes = float_dtypes | complex_dtypes
exact_dtypes = integer_dtypes = all_dtypes - inexact_dtypes  # bool included, as in ``is_integer_dtype``
nonboolean_integer_dtypes = integer_dtypes - boolean_dtypes


# Set whenever a trace's meaning depends on torch's default dtype; the tracer then has the
# prologue check it (see ``thunder.core.jit_ext``). A ContextVar, so each thread tracing at
# once has its own flag: ``.set(False)`` before tracing, ``.get()`` after.
default_dtype_was_read: contextvars.ContextVar[bool] = contextvars.ContextVar("thunder_default_dtype_was_read", default=False)


def default_dtype() -> torch.dtype:
    """``torch.get_default_dtype()``, noting that the trace being recorded depends on it."""
    default_dtype_was_read.set(True)
    return torch.get_default_dtype()


def short_name(d: torch.dtype) -> str:
    """The short name used in printed traces, e.g. ``f32``."""
    return _SHORT_NAMES.get(d, str(d).removeprefix("torch."))


def is_boolean_dtype(d: torch.dtype) -> bool:
    return d is torch.bool


def is_integer_dtype(d: torch.dtype) -> bool:
    """Integer dtypes, bool included (as in PyTorch's ``isIntegralType(..., includeBool=True)``)."""
    return not d.is_floating_point and not d.is_complex


is_exact_dtype = is_integer_dtype


def is_nonboolean_integer_dtype(d: torch.dtype) -> bool:
    return is_integer_dtype(d) and d is not torch.bool


def is_float_dtype(d: torch.dtype) -> bool:
    return d.is_floating_point


def is_complex_dtype(d: torch.dtype) -> bool:
    return d.is_complex


def is_inexact_dtype(d: torch.dtype) -> bool:
    return d.is_floating_point or d.is_complex


def is_low_precision_dtype(d: torch.dtype) -> bool:
    return d in low_precision_dtypes


def corresponding_real_dtype(d: torch.dtype) -> torch.dtype:
    return {torch.complex64: torch.float32, torch.complex128: torch.float64}.get(d, d)


def corresponding_complex_dtype(d: torch.dtype) -> torch.dtype:
    return {torch.float64: torch.complex128, torch.float32: torch.complex64, torch.float16: torch.complex64}.get(
        d, torch.complex64
    )


def python_type_to_dtype(typ: type) -> torch.dtype:
    """The dtype PyTorch gives a Python scalar of this type (floats use the default dtype)."""
    if typ is bool:
        return torch.bool
    if issubclass(typ, int):
        return torch.int64
    if issubclass(typ, float):
        return default_dtype()
    if issubclass(typ, complex):
        return corresponding_complex_dtype(default_dtype())
    raise TypeError(f"Python type {typ.__name__} has no corresponding dtype")


def dtype_to_python_type(d: torch.dtype) -> type:
    if d is torch.bool:
        return bool
    if d.is_complex:
        return complex
    if d.is_floating_point:
        return float
    return int


class ELEMENTWISE_TYPE_PROMOTION_KIND(enum.Enum):
    """How an elementwise op's result dtype follows from its promoted input dtype."""

    DEFAULT = enum.auto()  # result is the promoted dtype
    INT_TO_FLOAT = enum.auto()  # integer and bool results become the default float dtype (sin, true division)
    ALWAYS_BOOL = enum.auto()  # comparisons
    COMPLEX_TO_FLOAT = enum.auto()  # abs of a complex is real
    BOOL_TO_LONG = enum.auto()  # sum of bools is int64
    NO_OPMATH = enum.auto()  # like DEFAULT, computed in the input dtype


def _category(d: torch.dtype) -> int:
    if d is torch.bool:
        return 0
    if d.is_complex:
        return 3
    if d.is_floating_point:
        return 2
    return 1


def _combine_categories(higher: torch.dtype | None, lower: torch.dtype | None) -> torch.dtype | None:
    # PyTorch's rule (c10 ``combine_categories``): a lower-priority group only changes the
    # result when it belongs to a higher category.
    if higher is None:
        return lower
    if lower is None:
        return higher
    if higher.is_complex:
        return higher
    if lower.is_complex:
        return corresponding_complex_dtype(higher) if higher.is_floating_point else lower
    if higher.is_floating_point:
        return higher
    if higher is torch.bool or lower.is_floating_point:
        return torch.promote_types(higher, lower)
    return higher


def _promote(acc: torch.dtype | None, d: torch.dtype) -> torch.dtype:
    return d if acc is None else torch.promote_types(acc, d)


def check_scalar(x) -> None:
    """Raises eager's OverflowError for a Python int that a PyTorch scalar cannot hold (an int64 or, above
    its range, a uint64): ``x + 10**30`` fails, used or not."""
    v = getattr(x, "value", x)  # a NumberProxy's value; a symbolic int is left alone (its type is not int)
    if type(v) is int and not -(2**63) <= v < 2**64:
        raise ThunderOverflowError(f"Python int {v} is too big to convert to a PyTorch scalar (int64 or uint64)")


def result_type(*args) -> torch.dtype:
    """``torch.result_type`` over tensors (proxies with ``dtype`` and ``ndim``), Python numbers and dtypes.

    Dimensioned tensors beat zero-dim tensors, which beat Python scalars, unless a lower
    group is of a higher category (bool < int < float < complex).
    """
    dim_result = zero_result = wrapped_result = None
    for a in args:
        if a is None:
            continue
        if isinstance(a, torch.dtype):
            dim_result = _promote(dim_result, a)
        elif hasattr(a, "dtype") and hasattr(a, "ndim"):
            if a.ndim > 0:
                dim_result = _promote(dim_result, a.dtype)
            else:
                zero_result = _promote(zero_result, a.dtype)
        elif isinstance(a, Number) or hasattr(a, "python_type"):
            typ = a.python_type if hasattr(a, "python_type") else type(a)
            check_scalar(a)
            wd = python_type_to_dtype(typ)
            if wd.is_floating_point:
                wd = default_dtype()
            wrapped_result = _promote(wrapped_result, wd)
        else:
            raise TypeError(f"cannot compute a result dtype from {type(a).__name__} {a!r}")
    result = _combine_categories(dim_result, _combine_categories(zero_result, wrapped_result))
    if result is None:
        raise TypeError("result_type needs at least one tensor or number")
    return result


def elementwise_type_promotion(
    *args, kind: ELEMENTWISE_TYPE_PROMOTION_KIND = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT
) -> tuple[torch.dtype, torch.dtype]:
    """Returns ``(computation_dtype, result_dtype)`` for an elementwise op over ``args``.

    The computation dtype is float32 for low-precision floats, so decompositions round once,
    as PyTorch's fused kernels do.
    """
    promoted = result_type(*args)
    K = ELEMENTWISE_TYPE_PROMOTION_KIND
    if kind is K.INT_TO_FLOAT and not promoted.is_floating_point and not promoted.is_complex:
        promoted = default_dtype()
    if kind is K.ALWAYS_BOOL:
        result = torch.bool
    elif kind is K.COMPLEX_TO_FLOAT:
        result = corresponding_real_dtype(promoted)
    elif kind is K.BOOL_TO_LONG and promoted is torch.bool:
        result = promoted = torch.int64
    else:
        result = promoted
    computation = torch.float32 if promoted in low_precision_dtypes and kind is not K.NO_OPMATH else promoted
    return computation, result


def to_dtype(x, *, true_dtype: bool = False) -> torch.dtype | None:
    """The dtype of a tensor, number or dtype-like value (None for None)."""
    if x is None or isinstance(x, torch.dtype):
        return x
    if hasattr(x, "dtype"):
        return x.dtype
    if hasattr(x, "python_type"):
        return python_type_to_dtype(x.python_type)
    if isinstance(x, type):
        return python_type_to_dtype(x)
    return python_type_to_dtype(type(x))


def can_cast(from_: torch.dtype, to: torch.dtype) -> bool:
    """Whether PyTorch's in-place ops may write a ``from_`` result into a ``to`` tensor."""
    return torch.can_cast(from_, to)


# What torch makes of a Python type given as ``dtype=`` (``torch.tensor(0, dtype=float)`` is float64, whatever the
# default dtype).
DTYPE_ARGUMENT_OF_PYTHON_TYPE = {bool: torch.bool, int: torch.int64, float: torch.float64, complex: torch.complex128}


def to_torch_dtype(x: torch.dtype | type | None) -> torch.dtype | None:
    """lightning-thunder's ``to_torch_dtype``: the ``torch.dtype`` for ``x``.

    thunder's dtypes are torch's own, so a ``torch.dtype`` (``thunder.float32`` included) and None are
    returned as they are; a Python number type maps to the dtype torch gives its values (``float`` ->
    the default float dtype, ``int`` -> int64, ``bool`` -> bool)."""
    if x is None or isinstance(x, torch.dtype):
        return x
    if x in (bool, int, float, complex):
        return python_type_to_dtype(x)
    raise TypeError(f"to_torch_dtype: expected a torch.dtype, None or a Python number type, got {x!r}")
