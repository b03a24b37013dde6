"""Elementwise ops: unary, binary, where, clamp, comparisons, logical and bitwise."""

from __future__ import annotations

import operator

import torch

from tests.opinfos.core import (
    ALL,
    FLOATS,
    FLOATS_AND_INT,
    ErrorInput,
    OpInfo,
    SampleInput,
    elementwise_binary_shapes,
    elementwise_unary_shapes,
    make,
)


def _unary_samples(low=None, high=None):
    def samples(dtype, device):
        for shape, noncontig in elementwise_unary_shapes():
            yield SampleInput((make(shape, dtype, device, low=low, high=high, noncontiguous=noncontig),))

    return samples


def _binary_samples(exclude_zero=False, scalars=True):
    def samples(dtype, device):
        for sa, sb in elementwise_binary_shapes():
            yield SampleInput((make(sa, dtype, device), make(sb, dtype, device, exclude_zero=exclude_zero)))
        yield SampleInput(
            (make((3, 4), dtype, device, noncontiguous=True), make((3, 4), dtype, device, exclude_zero=exclude_zero))
        )
        if scalars and dtype is not torch.bool:
            yield SampleInput((make((2, 3), dtype, device), 2))
            yield SampleInput((make((2, 3), dtype, device), 0.5 if dtype.is_floating_point else 3))

    return samples


def _mixed_dtype_samples(dtype, device):
    yield SampleInput((make((2, 3), dtype, device), make((2, 3), torch.float32, device)))
    yield SampleInput((make((2, 3), dtype, device), make((), torch.float64, device)))


_POSITIVE = {"log", "log1p", "log2", "log10", "sqrt", "rsqrt", "lgamma", "digamma", "acosh"}
_UNIT = {"asin", "acos", "atanh", "erfinv"}

opinfos: list[OpInfo] = []
for _name in (
    "abs", "neg", "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos",
    "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "reciprocal", "sign", "floor", "ceil",
    "round", "trunc", "erf", "erfc", "erfinv", "sigmoid", "isfinite", "isnan", "isinf", "signbit", "square",
):  # fmt: skip
    low, high = (None, None)
    if _name in _POSITIVE:
        low, high = (1.0, 5.0) if _name == "acosh" else (0.1, 5.0)
    if _name in _UNIT:
        low, high = -0.9, 0.9
    dts = FLOATS if _name in _POSITIVE | _UNIT else FLOATS_AND_INT
    opinfos.append(OpInfo(_name, getattr(torch, _name), _unary_samples(low, high), dtypes=dts))

opinfos += [
    OpInfo("lgamma", torch.lgamma, _unary_samples(0.1, 5.0), dtypes=(torch.float32, torch.float64)),
    OpInfo("bitwise_not", torch.bitwise_not, _unary_samples(), dtypes=(torch.int64, torch.bool)),
    OpInfo("neg_operator", operator.neg, _unary_samples(), dtypes=FLOATS_AND_INT),
    OpInfo("abs_builtin", abs, _unary_samples(), dtypes=FLOATS_AND_INT),
    OpInfo("invert_operator", operator.invert, _unary_samples(), dtypes=(torch.int64, torch.bool)),
    OpInfo("logical_not", torch.logical_not, _unary_samples(), dtypes=ALL),
]

for _name, _op in (
    ("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("maximum", torch.maximum), ("minimum", torch.minimum),
    ("add_operator", operator.add), ("sub_operator", operator.sub), ("mul_operator", operator.mul),
    ("atan2", torch.atan2), ("copysign", torch.copysign),
):  # fmt: skip
    opinfos.append(
        OpInfo(_name, _op, _binary_samples(scalars=_name not in ("maximum", "minimum", "atan2", "copysign")))
    )

opinfos += [
    OpInfo("add_alpha", lambda a, b: torch.add(a, b, alpha=2), _binary_samples(scalars=False)),
    OpInfo("add_mixed_dtypes", torch.add, _mixed_dtype_samples),
    OpInfo("div", torch.div, _binary_samples(exclude_zero=True)),
    OpInfo("truediv_operator", operator.truediv, _binary_samples(exclude_zero=True)),
    OpInfo("div_floor", lambda a, b: torch.div(a, b, rounding_mode="floor"), _binary_samples(exclude_zero=True)),
    OpInfo("div_trunc", lambda a, b: torch.div(a, b, rounding_mode="trunc"), _binary_samples(exclude_zero=True)),
    OpInfo(
        "floordiv_operator",
        operator.floordiv,
        _binary_samples(exclude_zero=True),
        grad=(("skip", None, "eager has no derivative for aten::floor_divide: its backward raises, and so does "
               "thunder's (test_floor_divide_has_no_derivative_as_in_eager)"),),
    ),
    OpInfo("remainder", torch.remainder, _binary_samples(exclude_zero=True)),
    OpInfo("fmod", torch.fmod, _binary_samples(exclude_zero=True)),
    OpInfo(
        "pow",
        torch.pow,
        lambda dtype, device: (
            SampleInput((make((3, 4), dtype, device, low=0.5, high=2.0), make((4,), dtype, device, low=0, high=3))),
            SampleInput((make((3, 4), dtype, device, low=0.5, high=2.0), 2)),
        ),
        dtypes=FLOATS,
    ),
    OpInfo("rpow_operator", lambda a: 2**a, _unary_samples(-2, 2), dtypes=FLOATS),
    OpInfo("radd_operator", lambda a: 1.5 + a, _unary_samples(), dtypes=FLOATS_AND_INT),
    OpInfo("rsub_operator", lambda a: 3 - a, _unary_samples(), dtypes=FLOATS_AND_INT),
    OpInfo("rtruediv_operator", lambda a: 3 / a, _unary_samples(0.5, 3), dtypes=FLOATS),
]
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    opinfos.append(OpInfo(_name, getattr(torch, _name), _binary_samples(), dtypes=ALL[:-1]))
    opinfos.append(OpInfo(f"{_name}_operator", getattr(operator, _name), _binary_samples(), dtypes=FLOATS_AND_INT))
for _name in ("bitwise_and", "bitwise_or", "bitwise_xor"):
    opinfos.append(
        OpInfo(_name, getattr(torch, _name), _binary_samples(scalars=False), dtypes=(torch.int64, torch.bool))
    )
for _name in ("logical_and", "logical_or", "logical_xor"):
    opinfos.append(OpInfo(_name, getattr(torch, _name), _binary_samples(scalars=False), dtypes=ALL))


def _where_samples(dtype, device):
    yield SampleInput((make((3, 4), torch.bool, device), make((3, 4), dtype, device), make((3, 4), dtype, device)))
    yield SampleInput((make((3, 1), torch.bool, device), make((4,), dtype, device), make((3, 4), dtype, device)))
    yield SampleInput((make((3, 4), torch.bool, device), make((3, 4), dtype, device), 0))
    yield SampleInput((make((0, 4), torch.bool, device), make((0, 4), dtype, device), make((4,), dtype, device)))


def _clamp_samples(dtype, device):
    yield SampleInput((make((3, 4), dtype, device),), {"min": -1, "max": 1})
    yield SampleInput((make((3, 4), dtype, device),), {"min": 0})
    yield SampleInput((make((3, 4), dtype, device, noncontiguous=True),), {"max": 1})
    yield SampleInput((make((3, 4), dtype, device), make((4,), dtype, device), make((3, 4), dtype, device)))


def _binary_errors(device):
    yield ErrorInput(
        SampleInput((make((3, 4), torch.float32, device), make((5,), torch.float32, device))),
        RuntimeError, r"size of tensor a \(4\) must match the size of tensor b \(5\).*non-singleton dimension 1",
    )  # fmt: skip


def _bitwise_errors(device):
    yield ErrorInput(
        SampleInput((make((3,), torch.float32, device), make((3,), torch.float32, device))),
        TypeError, r"bitwise_and.*not implemented for a of dtype torch.float32",
    )  # fmt: skip


opinfos += [
    OpInfo("where", torch.where, _where_samples, dtypes=ALL),
    OpInfo("clamp", torch.clamp, _clamp_samples, dtypes=FLOATS_AND_INT),
    OpInfo(
        "add_broadcast_error",
        torch.add,
        _binary_samples(scalars=False),
        dtypes=(torch.float32,),
        error_inputs=_binary_errors,
    ),
    OpInfo(
        "bitwise_error",
        torch.bitwise_and,
        _binary_samples(scalars=False),
        dtypes=(torch.int64,),
        error_inputs=_bitwise_errors,
    ),
    OpInfo(
        "lerp",
        torch.lerp,
        lambda dtype, device: (
            SampleInput((make((3, 4), dtype, device), make((3, 4), dtype, device), 0.3)),
            SampleInput((make((3, 4), dtype, device), make((4,), dtype, device), make((3, 4), dtype, device))),
        ),
        dtypes=FLOATS,
    ),
    OpInfo(
        "nan_to_num",
        torch.nan_to_num,
        lambda dtype, device: (
            SampleInput((torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0], dtype=dtype),)),
        ),
        dtypes=FLOATS,
    ),
]
