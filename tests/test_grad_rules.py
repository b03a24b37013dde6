"""The VJP rules of the prims (Note [VJP rules] in thunder.core.rules) against torch autograd.

An OpInfo-style database: each prim with a rule has sample generators (``SAMPLES``), each
called with a dtype and giving ``(args, kwargs)`` for one call of the prim. The templates run
the rule eagerly on real tensors and compare every gradient with ``torch.autograd.grad`` of
the prim's reference implementation; they also run it on proxies inside a trace (rules are
written with prims only, so they must trace) and check each gradient's shape and dtype.

Samples are small and avoid the points where torch's own gradient is arbitrary (duplicate
indices of a non-accumulating scatter, out-of-domain inputs); edge cases torch defines (zeros
for prod, cumprod and pow, ties for maximum and amax) are included on purpose.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch

import thunder
from thunder.core import prims
from thunder.core.errors import UnsupportedOpError
from thunder.core.prims.base import all_prims
from thunder.core.prims.effects import EffectPrimIDs
from thunder.core.prims.python import PythonPrimIDs
from thunder.core.proxies import TensorProxy, tensorproxy_from_tensor
from thunder.core.rules import grad_rules
from thunder.core.trace import TraceCtx, tracectx
from thunder.transforms.absent_cotangents import add_unless_absent

CPU = torch.device("cpu")
F64, F32, C128 = torch.float64, torch.float32, torch.complex128

# Prims that can produce a floating output but have no rule, each with its reason.
NO_RULE = {
    prims.trigamma: "its derivative is polygamma(2, x), which has no prim; only digamma's rule uses it",
    prims.convolution_backward: "double backward of convolution is not supported (no prim for its gradient)",
    add_unless_absent: "a line of compiled backward traces only (Note [Absent cotangents]), never differentiated",
    prims.check_no_partial_overlap: "a run-time check with no output, before an out= write (which autograd refuses)",
}


def _is_python_prim(sym) -> bool:
    return isinstance(sym.id, (PythonPrimIDs, EffectPrimIDs)) or sym.name == "python_del"


# --- sample inputs ----------------------------------------------------------------------------


def _gen(seed=0):
    return torch.Generator().manual_seed(seed)


def randn(*shape, dtype=F64, seed=0):
    if dtype.is_complex:
        return torch.randn(shape, generator=_gen(seed), dtype=dtype)
    if not dtype.is_floating_point:
        return torch.randint(-5, 5, shape, generator=_gen(seed), dtype=dtype)
    return torch.randn(shape, generator=_gen(seed), dtype=F64).to(dtype)


def uniform(lo, hi, *shape, dtype=F64, seed=0):
    return (torch.rand(shape, generator=_gen(seed), dtype=F64) * (hi - lo) + lo).to(dtype)


def away_from_zero(*shape, dtype=F64, seed=0):
    x = uniform(0.5, 2.0, *shape, dtype=F64, seed=seed)
    sign = torch.where(randn(*shape, seed=seed + 100) > 0, 1.0, -1.0).to(F64)
    return (x * sign).to(dtype)


def tensor(data, dtype=F64):
    return torch.tensor(data, dtype=dtype)


SHAPES = ((), (3,), (2, 3))


@dataclass(frozen=True)
class GradSample:
    """One call: ``make(dtype) -> (args, kwargs)`` and the dtypes it runs in."""

    name: str
    make: Callable
    dtypes: tuple = (F64, F32)
    reference: Callable | None = None  # differentiated instead of the prim's reference impl


SAMPLES: dict = {}


def samples(sym, *items: GradSample) -> None:
    SAMPLES.setdefault(sym, []).extend(items)


def unary_samples(sym, make_input, dtypes=(F64, F32)) -> None:
    samples(
        sym,
        *(GradSample(f"shape{s}", lambda d, s=s: ((make_input(*s, dtype=d),), {}), dtypes) for s in SHAPES),
    )


_ANY = lambda *s, dtype: randn(*s, dtype=dtype)  # noqa: E731
_POSITIVE = lambda *s, dtype: uniform(0.5, 3.0, *s, dtype=dtype)  # noqa: E731
_UNIT = lambda *s, dtype: uniform(-0.9, 0.9, *s, dtype=dtype)  # noqa: E731

for _sym in (prims.exp, prims.exp2, prims.expm1, prims.sin, prims.cos, prims.tan, prims.atan, prims.sinh):
    unary_samples(_sym, _ANY, (F64, F32, C128))
for _sym in (prims.cosh, prims.tanh, prims.asinh, prims.sigmoid, prims.neg):
    unary_samples(_sym, _ANY, (F64, F32, C128))
for _sym in (prims.log, prims.log2, prims.log10, prims.sqrt, prims.rsqrt):
    unary_samples(_sym, _POSITIVE, (F64, F32, C128))
for _sym in (prims.asin, prims.acos, prims.atanh):
    unary_samples(_sym, _UNIT, (F64, F32, C128))
unary_samples(prims.log1p, lambda *s, dtype: uniform(-0.5, 2.0, *s, dtype=dtype), (F64, F32, C128))
unary_samples(prims.acosh, lambda *s, dtype: uniform(1.5, 3.0, *s, dtype=dtype), (F64, F32, C128))
unary_samples(prims.reciprocal, away_from_zero, (F64, F32, C128))
unary_samples(prims.abs, away_from_zero, (F64, F32, C128))
samples(prims.abs, GradSample("zeros", lambda d: ((tensor([0.0, -1.0, 2.0, 0.0], d),), {}), (F64, F32, C128)))
for _sym in (prims.erf, prims.erfc):
    unary_samples(_sym, _ANY)
unary_samples(prims.erfinv, _UNIT)
for _sym in (prims.lgamma, prims.digamma):
    unary_samples(_sym, _POSITIVE)
samples(prims.lgamma, GradSample("negative", lambda d: ((tensor([-0.5, -1.5, -2.3], d),), {})))
samples(prims.digamma, GradSample("negative", lambda d: ((tensor([-0.5, -1.5, -2.3], d),), {})))
unary_samples(prims.real, _ANY, (F64, F32, C128))
unary_samples(prims.imag, _ANY, (C128,))

# zero almost everywhere: torch gives zeros (or, for bool outputs, nothing to differentiate)
for _sym in (prims.sign, prims.floor, prims.ceil, prims.round, prims.trunc, prims.signbit):
    unary_samples(_sym, _ANY)
for _sym in (prims.isfinite, prims.isnan, prims.isinf):
    unary_samples(_sym, _ANY, (F64, C128))
unary_samples(prims.bitwise_not, _ANY, (torch.int64,))


def binary_samples(sym, make_a, make_b, dtypes=(F64, F32), numbers=(2.5,), number_first=True) -> None:
    """Same-shape tensors, and a number as ``b`` (and as ``a`` where the torch kernel takes one first)."""
    items = [
        GradSample(f"shape{s}", lambda d, s=s: ((make_a(*s, dtype=d), make_b(*s, dtype=d)), {}), dtypes) for s in SHAPES
    ]
    for n in numbers:
        items.append(GradSample(f"b={n}", lambda d, n=n: ((make_a(2, 3, dtype=d), n), {}), dtypes))
        if number_first:
            items.append(GradSample(f"a={n}", lambda d, n=n: ((n, make_b(2, 3, dtype=d)), {}), dtypes))
    samples(sym, *items)


def _other(*s, dtype):
    return randn(*s, dtype=dtype, seed=1)


binary_samples(prims.add, _ANY, _other, (F64, F32, C128))
binary_samples(prims.sub, _ANY, _other, (F64, F32, C128))
binary_samples(prims.mul, _ANY, _other, (F64, F32, C128))
samples(prims.mul, GradSample("complex number", lambda d: ((randn(3, dtype=d), 2 - 1j), {}), (C128,)))
binary_samples(prims.div, _ANY, lambda *s, dtype: away_from_zero(*s, dtype=dtype, seed=1), (F64, F32, C128))
samples(
    prims.div, GradSample("integers", lambda d: ((tensor([7, -7, 3], d), tensor([2, 2, -2], d)), {}), (torch.int64,))
)
for _sym in (prims.fmod, prims.remainder):
    binary_samples(
        _sym,
        lambda *s, dtype: 3 * randn(*s, dtype=dtype),
        lambda *s, dtype: away_from_zero(*s, dtype=dtype, seed=1),
        number_first=False,  # fmod's kernel takes no number first; remainder's has no derivative then
    )
samples(
    prims.remainder,
    GradSample(
        "a=2.5",
        lambda d: ((2.5, away_from_zero(2, 3, dtype=d)), {}),
        reference=lambda a, b: torch.remainder(torch.full_like(b, a), b),
    ),
)
binary_samples(prims.atan2, _ANY, _other, numbers=())
binary_samples(prims.pow, _POSITIVE, _other, (F64, F32, C128), numbers=(2.0, 0.5))
samples(
    prims.pow,
    # zeros in the base and the exponent: torch's masks (0 ** b for b >= 0, a ** 0)
    GradSample("zeros", lambda d: ((tensor([0.0, 0.0, 2.0, 1.5, 0.0], d), tensor([2.0, 0.0, 0.0, 3.0, 1.0], d)), {})),
    GradSample("b=0", lambda d: ((tensor([0.0, 2.0], d), 0.0), {})),
    GradSample("a=0", lambda d: ((0.0, tensor([0.0, 2.0, 1.0], d)), {})),
    GradSample("negative base, integer exponents", lambda d: ((tensor([-2.0, -1.5], d), 3.0), {})),
    GradSample(
        "complex zeros",
        lambda d: ((tensor([0j, 0j, 1 + 1j, 0j, -2j], d), tensor([2 + 0j, 0j, 0.5 - 1j, 1j, 2j], d)), {}),
        (C128,),
    ),
)
_TIES = (tensor([1.0, 2.0, 2.0, -1.0, 0.0]), tensor([1.0, 1.0, 3.0, -1.0, 5.0]))
for _sym in (prims.maximum, prims.minimum):
    binary_samples(_sym, _ANY, _other, numbers=())
    samples(_sym, GradSample("ties", lambda d: (tuple(t.to(d) for t in _TIES), {})))
    samples(_sym, GradSample("nan", lambda d: ((tensor([1.0, math.nan, 2.0], d), tensor([math.nan, 1.0, 2.0], d)), {})))
binary_samples(prims.copysign, _ANY, _other, number_first=False)
samples(
    prims.copysign,
    GradSample("zeros", lambda d: ((tensor([0.0, -0.0, 1.0, -2.0], d), tensor([-1.0, 1.0, -0.0, 3.0], d)), {})),
)

for _sym in (prims.eq, prims.ne, prims.lt, prims.le, prims.gt, prims.ge):
    binary_samples(_sym, _ANY, _other, numbers=(0.0,), number_first=False)
for _sym in (prims.bitwise_and, prims.bitwise_or, prims.bitwise_xor):
    binary_samples(_sym, _ANY, _other, (torch.int64,), numbers=())
for _sym in (prims.bitwise_left_shift, prims.bitwise_right_shift):
    binary_samples(
        _sym,
        lambda *s, dtype: randn(*s, dtype=dtype).abs(),
        lambda *s, dtype: uniform(0, 3, *s, dtype=dtype),
        (torch.int64,),
        numbers=(),
    )
samples(
    prims.nextafter, GradSample("shape(3,)", lambda d: ((randn(3, dtype=d), _other(3, dtype=d)), {}))
)

samples(
    prims.where,
    GradSample(
        "tensors", lambda d: ((randn(2, 3) > 0, randn(2, 3, dtype=d), _other(2, 3, dtype=d)), {}), (F64, F32, C128)
    ),
    GradSample("b number", lambda d: ((randn(2, 3) > 0, randn(2, 3, dtype=d), 0.0), {}), (F64, F32, C128)),
    GradSample("a number", lambda d: ((randn(4) > 0, 1.5, randn(4, dtype=d)), {})),
    GradSample("0-d", lambda d: ((torch.tensor(True), randn(dtype=d), _other(dtype=d)), {})),
)
samples(
    prims.convert_element_type,
    GradSample("to float32", lambda d: ((randn(2, 3, dtype=d), F32), {})),
    GradSample("to float64", lambda d: ((randn(2, 3, dtype=d), F64), {})),
    GradSample("to bfloat16", lambda d: ((randn(2, 3, dtype=d), torch.bfloat16), {})),
    GradSample("to complex", lambda d: ((randn(2, 3, dtype=d), torch.complex128), {})),
    GradSample("to int", lambda d: ((randn(2, 3, dtype=d), torch.int64), {})),
    GradSample("from int", lambda d: ((randn(2, 3, dtype=d), F64), {}), (torch.int64,)),
    GradSample("complex to real", lambda d: ((randn(2, 3, dtype=d), F64), {}), (C128,)),
)

# --- reductions ---

_ROWS = (2, 3, 4)
_PROD_ZEROS = tensor([[1.0, 0.0, 2.0, 3.0], [0.0, 0.0, 3.0, 1.0], [2.0, 3.0, 4.0, 0.5]])


def reduction_samples(sym, make, dtypes=(F64, F32), **kwargs) -> None:
    cases = [((3,), (0,)), ((2, 3, 4), (1,)), ((2, 3, 4), (0, 2)), ((2, 3, 4), (0, 1, 2)), ((2, 3), ()), ((), ())]
    samples(
        sym,
        *(
            GradSample(
                f"{shape} dims={dims}{''.join(f' {k}={v}' for k, v in kwargs.items())}",
                lambda d, shape=shape, dims=dims: ((make(*shape, dtype=d), dims), dict(kwargs)),
                dtypes,
            )
            for shape, dims in cases
        ),
    )


reduction_samples(prims.sum, _ANY, (F64, F32, C128))
reduction_samples(prims.prod, _ANY, (F64, F32, C128))
samples(
    prims.prod,
    *(
        GradSample(f"zeros dims={dims}", lambda d, dims=dims: ((_PROD_ZEROS.to(d), dims), {}), (F64, F32, C128))
        for dims in ((1,), (0,), (0, 1))
    ),
    GradSample("empty", lambda d: ((randn(2, 0, dtype=d), (1,)), {})),
)
for _sym in (prims.amax, prims.amin):
    reduction_samples(_sym, _ANY)
    samples(_sym, GradSample("ties", lambda d: ((tensor([[1.0, 3.0, 3.0], [-2.0, -2.0, -2.0]], d), (1,)), {})))
    samples(
        _sym, GradSample("ties all dims", lambda d: ((tensor([[1.0, 3.0, 3.0], [3.0, -2.0, -2.0]], d), (0, 1)), {}))
    )
    samples(_sym, GradSample("nan", lambda d: ((tensor([[1.0, math.nan, 3.0], [2.0, 2.0, 1.0]], d), (1,)), {})))
for _correction in (0, 1):
    reduction_samples(prims.var, _ANY, (F64, F32, C128), correction=_correction)
    reduction_samples(prims.var_mean, _ANY, (F64, F32, C128), correction=_correction)
samples(prims.var, GradSample("correction 0.5", lambda d: ((randn(2, 5, dtype=d), (1,)), {"correction": 0.5})))
for _sym in (prims.argmax, prims.argmin):
    samples(
        _sym,
        GradSample("dim", lambda d: ((randn(2, 3, dtype=d), 1), {})),
        GradSample("all", lambda d: ((randn(2, 3, dtype=d), None), {})),
    )
for _sym in (prims.cumsum, prims.cumprod):
    samples(
        _sym,
        *(
            GradSample(
                f"{shape} dim={dim}",
                lambda d, shape=shape, dim=dim: ((randn(*shape, dtype=d), dim), {}),
                (F64, F32, C128),
            )
            for shape, dim in (((5,), 0), ((3, 4), 0), ((3, 4), 1))
        ),
    )
_CUMPROD_ZEROS = tensor(
    [
        [0.0, 2.0, 3.0, 0.5, 2.0],
        [1.5, 0.0, 2.0, 0.0, 3.0],
        [2.0, 0.5, 3.0, 1.5, 0.0],
        [0.0, 0.0, 2.0, 1.0, 1.0],
        [1.0, 2.0, 0.5, 3.0, 2.0],
    ]
)
samples(
    prims.cumprod,
    GradSample("zeros", lambda d: ((_CUMPROD_ZEROS.to(d), 1), {}), (F64, F32, C128)),
    GradSample("zeros dim 0", lambda d: ((_CUMPROD_ZEROS.to(d), 0), {}), (F64, F32, C128)),
)

# --- shapes ---

samples(
    prims.broadcast_in_dim,
    GradSample("new leading dim", lambda d: ((randn(3, dtype=d), (2, 3), (1,)), {}), (F64, F32, C128)),
    GradSample("expand ones", lambda d: ((randn(1, 3, dtype=d), (2, 4, 3), (0, 2)), {})),
    GradSample("from 0-d", lambda d: ((randn(dtype=d), (2, 2), ()), {})),
    GradSample("ones kept", lambda d: ((randn(1, 3, 1, dtype=d), (1, 3, 2), (0, 1, 2)), {})),
    GradSample("identity", lambda d: ((randn(2, 3, dtype=d), (2, 3), (0, 1)), {})),
)
samples(
    prims.reshape,
    GradSample("flatten", lambda d: ((randn(2, 3, 4, dtype=d), (24,)), {}), (F64, F32, C128)),
    GradSample("0-d", lambda d: ((randn(dtype=d), (1, 1)), {})),
)
samples(
    prims.squeeze,
    GradSample("dims", lambda d: ((randn(1, 3, 1, dtype=d), (0, 2)), {})),
    GradSample("none", lambda d: ((randn(2, dtype=d), ()), {})),
)
samples(prims.transpose, GradSample("3-d", lambda d: ((randn(2, 3, 4, dtype=d), (2, 0, 1)), {}), (F64, F32, C128)))
samples(prims.flip, GradSample("dims", lambda d: ((randn(2, 3, 4, dtype=d), (0, 2)), {})))
samples(
    prims.slice_prim,
    GradSample("strided", lambda d: ((randn(5, 7, dtype=d), (1, 0), (5, 7), (2, 3)), {}), (F64, F32, C128)),
    GradSample("no strides", lambda d: ((randn(5, 7, dtype=d), (1, 2), (4, 3)), {})),
    GradSample("stride past the end", lambda d: ((randn(6, dtype=d), (1,), (6,), (4,)), {})),
    GradSample("empty", lambda d: ((randn(4, 3, dtype=d), (2, 0), (2, 3), (1, 1)), {})),
)
samples(
    prims.cat,
    GradSample(
        "list",
        lambda d: (([randn(2, 3, dtype=d), _other(1, 3, dtype=d), randn(4, 3, dtype=d, seed=3)], 0), {}),
        (F64, F32, C128),
    ),
    GradSample("tuple dim 1", lambda d: (((randn(2, 3, dtype=d), _other(2, 1, dtype=d)), 1), {})),
)
samples(
    prims.pad,
    GradSample("lo hi", lambda d: ((randn(2, 3, dtype=d), 0.0, ((1, 2, 0), (0, 1, 0))), {}), (F64, F32, C128)),
    GradSample("interior", lambda d: ((randn(3, 4, dtype=d), 1.5, ((1, 0, 2), (0, 2, 1))), {})),
    GradSample("negative", lambda d: ((randn(4, 5, dtype=d), 0.0, ((-1, 2, 0), (1, -2, 1))), {})),
)

# --- indexing ---

_I = lambda *data: torch.tensor(data, dtype=torch.int64)  # noqa: E731

samples(
    prims.take,
    GradSample("repeats", lambda d: ((randn(4, 3, dtype=d), _I(0, 2, 2, 3, 0), 0), {}), (F64, F32, C128)),
    GradSample("dim 1", lambda d: ((randn(4, 3, dtype=d), _I(2, 1).to(torch.int32), 1), {})),
    GradSample("0-d", lambda d: ((randn(dtype=d), _I(0), 0), {})),
)
samples(
    prims.take_along_axis,
    GradSample("dim 0", lambda d: ((randn(3, 4, dtype=d), _I([0, 2, 2, 1], [1, 1, 0, 2]), 0), {}), (F64, F32, C128)),
    GradSample("dim 1", lambda d: ((randn(3, 4, dtype=d), _I([0, 3], [1, 1], [2, 0]), 1), {})),
)
samples(
    prims.scatter,
    # distinct positions along dim: torch's gradient is only defined without duplicates
    GradSample(
        "dim 0",
        lambda d: ((randn(3, 4, dtype=d), _I([0, 2, 1, 1], [2, 0, 0, 2]), _other(2, 4, dtype=d), 0), {}),
        (F64, F32, C128),
    ),
    # torch's own scatter backward fails when src is larger than index: compare with the same
    # scatter of the part of src that index covers
    GradSample(
        "src larger",
        lambda d: ((randn(3, 4, dtype=d), _I([1, 3], [0, 2]), _other(3, 5, dtype=d), 1), {}),
        reference=lambda a, index, src, dim: torch.scatter(a, dim, index, src[:2, :2]),
    ),
)
samples(
    prims.scatter_add,
    GradSample(
        "duplicates",
        lambda d: ((randn(3, 4, dtype=d), _I([0, 2, 0, 1], [0, 2, 0, 1]), _other(2, 4, dtype=d), 0), {}),
        (F64, F32, C128),
    ),
    GradSample(
        "src larger",
        lambda d: ((randn(3, 4, dtype=d), _I([1, 1], [0, 2]), _other(3, 5, dtype=d), 1), {}),
        reference=lambda a, index, src, dim: torch.scatter_add(a, dim, index, src[:2, :2]),
    ),
)
samples(
    prims.index_add,
    GradSample(
        "repeats", lambda d: ((randn(4, 3, dtype=d), _I(0, 2, 0), _other(3, 3, dtype=d), 0), {}), (F64, F32, C128)
    ),
    GradSample("dim 1", lambda d: ((randn(4, 3, dtype=d), _I(2, 1), _other(4, 2, dtype=d), 1), {})),
)
samples(
    prims.index_copy,
    GradSample("dim 0", lambda d: ((randn(4, 3, dtype=d), _I(3, 1), _other(2, 3, dtype=d), 0), {}), (F64, F32, C128)),
    GradSample("dim 1", lambda d: ((randn(4, 3, dtype=d), _I(2, 0), _other(4, 2, dtype=d), 1), {})),
)
for _acc in (False, True):
    samples(
        prims.index_put,
        GradSample(
            f"first acc={_acc}",
            lambda d, acc=_acc: ((randn(4, 3, dtype=d), (_I(3, 1, -4),), _other(3, 3, dtype=d), acc), {}),
            (F64, F32, C128),
        ),
        GradSample(
            f"two adjacent acc={_acc}",
            lambda d, acc=_acc: (
                (randn(2, 4, 3, 5, dtype=d), (None, _I(3, 1), _I(0, -1)), _other(2, 2, 5, dtype=d), acc),
                {},
            ),
        ),
        GradSample(
            f"separated acc={_acc}",
            lambda d, acc=_acc: (
                (
                    randn(4, 2, 3, dtype=d),
                    (_I([0, 1], [3, 2]), None, _I([2, 0], [1, 1])),
                    _other(2, 2, 2, dtype=d),
                    acc,
                ),
                {},
            ),
        ),
        GradSample(
            f"middle acc={_acc}",
            lambda d, acc=_acc: ((randn(2, 4, 3, dtype=d), [None, _I(2, 0, 1)], _other(2, 3, 3, dtype=d), acc), {}),
        ),
    )
samples(
    prims.index_put,
    GradSample(
        "repeats accumulate", lambda d: ((randn(4, 3, dtype=d), (_I(1, 1, 2),), _other(3, 3, dtype=d), True), {})
    ),
)
samples(
    prims.slice_scatter,
    GradSample(
        "strided",
        lambda d: ((randn(5, 6, dtype=d), _other(2, 3, dtype=d), (1, 0), (5, 6), (2, 2)), {}),
        (F64, F32, C128),
    ),
)

# --- factories, copies, in-place ---

samples(prims.full, GradSample("full", lambda d: (((2, 3), 1.5), {"device": CPU, "dtype": d})))
samples(prims.iota, GradSample("iota", lambda d: ((5,), {"start": 1, "step": 2, "device": CPU, "dtype": d})))
samples(prims.empty, GradSample("empty", lambda d: (((2, 3),), {"device": CPU, "dtype": d})))
samples(prims.uniform, GradSample("uniform", lambda d: (((2, 3), 0.0, 1.0), {"device": CPU, "dtype": d})))
samples(prims.randn, GradSample("randn", lambda d: (((2, 3),), {"device": CPU, "dtype": d})))
samples(prims.randint, GradSample("randint", lambda d: ((0, 5, (2, 3)), {"device": CPU, "dtype": d}), (torch.int64,)))
samples(
    prims.tensor_from_sequence,
    GradSample("nested", lambda d: (([[1.0, 2.0], [3.0, 4.0]],), {"device": CPU, "dtype": d})),
)
samples(prims.clone, GradSample("clone", lambda d: ((randn(2, 3, dtype=d),), {}), (F64, F32, C128)))
samples(prims.device_put, GradSample("cpu", lambda d: ((randn(2, 3, dtype=d), CPU), {})))
samples(
    prims.copy_, GradSample("copy_", lambda d: ((randn(2, 3, dtype=d), _other(2, 3, dtype=d)), {}), (F64, F32, C128))
)

# --- linear algebra and nn ---

samples(
    prims.matmul,
    GradSample("2-d", lambda d: ((randn(2, 3, dtype=d), _other(3, 4, dtype=d)), {}), (F64, F32, C128)),
    GradSample("batched", lambda d: ((randn(2, 2, 3, dtype=d), _other(2, 3, 4, dtype=d)), {}), (F64, F32, C128)),
)
samples(
    prims.linear,
    GradSample(
        "bias",
        lambda d: ((randn(5, 3, dtype=d), _other(4, 3, dtype=d), randn(4, dtype=d, seed=2)), {}),
        (F64, F32, C128),
    ),
    GradSample("no bias 3-d", lambda d: ((randn(2, 5, 3, dtype=d), _other(4, 3, dtype=d), None), {})),
    GradSample("1-d input", lambda d: ((randn(3, dtype=d), _other(4, 3, dtype=d), randn(4, dtype=d, seed=2)), {})),
    GradSample("1-d weight", lambda d: ((randn(2, 3, dtype=d), _other(3, dtype=d), None), {}), (F64, F32, C128)),
    GradSample(
        "1-d input and weight, bias", lambda d: ((randn(3, dtype=d), _other(3, dtype=d), randn(dtype=d, seed=2)), {})
    ),
    GradSample("both 1-d", lambda d: ((randn(3, dtype=d), _other(3, dtype=d), None), {})),
)
samples(
    prims.convolution,
    GradSample(
        "2-d stride padding bias",
        lambda d: (
            (
                randn(2, 4, 6, 5, dtype=d),
                _other(6, 2, 3, 2, dtype=d),
                randn(6, dtype=d, seed=2),
                (2, 1),
                (1, 0),
                (1, 2),
                False,
                (0, 0),
                2,
            ),
            {},
        ),
    ),
    GradSample(
        "1-d no bias",
        lambda d: ((randn(1, 2, 7, dtype=d), _other(3, 2, 3, dtype=d), None, (1,), (0,), (1,), False, (0,), 1), {}),
    ),
    GradSample(
        "1-d transposed",
        lambda d: (
            (
                randn(2, 4, 5, dtype=d),
                _other(4, 3, 3, dtype=d),
                randn(3, dtype=d, seed=2),
                (2,),
                (1,),
                (1,),
                True,
                (1,),
                1,
            ),
            {},
        ),
    ),
)
samples(
    prims.embedding,
    GradSample("repeats", lambda d: ((_I([0, 2], [2, 4]), randn(5, 3, dtype=d)), {})),
    GradSample("padding_idx", lambda d: ((_I([0, 2], [2, 1]), randn(5, 3, dtype=d), 2), {})),
    # torch's embedding has no complex autograd: indexing is the same gather
    GradSample(
        "complex", lambda d: ((_I([0, 2], [2, 4]), randn(5, 3, dtype=d)), {}), (C128,), reference=lambda a, w: w[a]
    ),
    GradSample("negative padding_idx", lambda d: ((_I(4, 2, 4), randn(5, 3, dtype=d), -1), {})),
)
samples(
    prims.embedding_backward,
    GradSample("no padding", lambda d: ((randn(2, 2, 3, dtype=d), _I([0, 2], [2, 4]), 5, None), {})),
    GradSample("padding_idx", lambda d: ((randn(2, 2, 3, dtype=d), _I([0, 2], [2, 1]), 5, 2), {})),
    GradSample(
        "complex",
        lambda d: ((randn(2, 2, 3, dtype=d), _I([0, 2], [2, 4]), 5, None), {}),
        (C128,),
        reference=lambda g, i, n, p: torch.zeros(n, 3, dtype=g.dtype).index_add(0, i.flatten(), g.reshape(-1, 3)),
    ),
    GradSample("negative padding_idx", lambda d: ((randn(3, 3, dtype=d), _I(4, 2, 4), 5, -1), {})),
)


# --- templates --------------------------------------------------------------------------------


def _cases():
    for sym, items in SAMPLES.items():
        for s in items:
            for d in s.dtypes:
                yield pytest.param(sym, s, d, id=f"{sym.name}-{s.name}-{str(d)[6:]}")


def _leaves(args):
    """(position, index in a list argument or None, tensor) of every differentiable tensor argument."""
    out = []
    for i, a in enumerate(args):
        items = a if isinstance(a, (list, tuple)) else [a]
        for j, x in enumerate(items):
            if isinstance(x, torch.Tensor) and (x.dtype.is_floating_point or x.dtype.is_complex):
                out.append((i, j if isinstance(a, (list, tuple)) else None, x))
    return out


def _tree_map(fn, x):
    if isinstance(x, (list, tuple)):
        return type(x)(_tree_map(fn, y) for y in x)
    return fn(x)


def _cotangent(out, seed=7):
    def one(t):
        if t is None or not isinstance(t, torch.Tensor):
            return t
        if t.dtype.is_floating_point or t.dtype.is_complex:
            return randn(*t.shape, dtype=t.dtype, seed=seed)
        return torch.zeros_like(t)

    return _tree_map(one, out)


def _entry(grads, i, j):
    g = grads[i]
    if j is None:
        return g
    assert isinstance(g, (list, tuple)), f"argument {i} is a sequence, its gradient entry must be one too, got {g!r}"
    return g[j]


def _tolerance(dtype):
    if dtype in (F32, torch.complex64):
        return {"rtol": 1e-4, "atol": 1e-5}
    return {}


def _torch_grads(fn, args, kwargs, g, leaves):
    """torch autograd's gradients of the reference impl, for each leaf (None where unused)."""
    copies = {}

    def prepare(i, j, x):
        key = (i, j)
        for li, lj, t in leaves:
            if (li, lj) == key and t is x:
                leaf = x.detach().clone().requires_grad_(True)
                copies[key] = leaf
                return leaf.clone()  # a non-leaf, so in-place prims may write it
        return x

    new_args = []
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)):
            new_args.append(type(a)(prepare(i, j, x) for j, x in enumerate(a)))
        else:
            new_args.append(prepare(i, None, a))
    out = fn(*new_args, **kwargs)
    outs = [o for o in (out if isinstance(out, (list, tuple)) else [out]) if isinstance(o, torch.Tensor)]
    gs = [c for c in (g if isinstance(g, (list, tuple)) else [g]) if isinstance(c, torch.Tensor)]
    pairs = [(o, c) for o, c in zip(outs, gs) if o.requires_grad]
    inputs = [copies[(i, j)] for i, j, _ in leaves]
    if not pairs or not inputs:
        return [None] * len(leaves)
    return list(torch.autograd.grad([o for o, _ in pairs], inputs, [c for _, c in pairs], allow_unused=True))


@pytest.mark.parametrize("sym, sample, dtype", list(_cases()))
def test_rule_matches_torch_autograd(sym, sample, dtype):
    args, kwargs = sample.make(dtype)
    rule = grad_rules.get(sym)
    assert rule is not None, f"{sym.print_name} has samples but no rule"
    snapshot = _tree_map(lambda x: x.clone() if isinstance(x, torch.Tensor) else x, args)
    out = sym(*args, **kwargs)
    g = _cotangent(out)
    grads = rule(g, out, *args, **kwargs)
    assert isinstance(grads, tuple) and len(grads) == len(args), f"one entry per positional argument, got {grads!r}"
    for i, a in enumerate(args):
        if isinstance(a, (list, tuple)):
            assert grads[i] is None or (isinstance(grads[i], type(a)) and len(grads[i]) == len(a))
    leaves = _leaves(snapshot)
    leaf_keys = {(i, j) for i, j, _ in leaves}
    # arguments that are not differentiable tensors get None
    for i, a in enumerate(args):
        for j, _ in enumerate(a if isinstance(a, (list, tuple)) else [a]):
            key = (i, j if isinstance(a, (list, tuple)) else None)
            if key not in leaf_keys and grads[i] is not None:
                assert _entry(grads, *key) is None, f"argument {key} is not differentiable but got a gradient"
    fn = sample.reference or sym.python_impl
    expected = _torch_grads(fn, snapshot, kwargs, g, leaves)
    for (i, j, x), want in zip(leaves, expected):
        got = _entry(grads, i, j) if grads[i] is not None else None
        if got is None:
            assert want is None or not want.any(), f"argument {(i, j)}: no gradient, torch gives {want}"
            continue
        assert tuple(got.shape) == tuple(x.shape), f"argument {(i, j)}: gradient shape {got.shape}, argument {x.shape}"
        assert got.dtype == x.dtype, f"argument {(i, j)}: gradient dtype {got.dtype}, argument {x.dtype}"
        if want is None:
            want = torch.zeros_like(x)
        torch.testing.assert_close(got, want, equal_nan=True, **_tolerance(dtype))


def _proxy(x):
    return tensorproxy_from_tensor(x) if isinstance(x, torch.Tensor) else x


@pytest.mark.parametrize("sym, sample, dtype", [c for c in _cases() if c.values[2] in (F64, C128)])
def test_rule_traces_with_the_argument_metadata(sym, sample, dtype):
    """Inside a trace a rule records prims on proxies; its gradients carry each argument's shape,
    dtype and device."""
    args, kwargs = sample.make(dtype)
    trace = TraceCtx()
    with tracectx(trace):
        pargs = _tree_map(_proxy, args)
        out = sym(*pargs, **kwargs)
        g = _tree_map(lambda o: TensorProxy.like(o) if isinstance(o, TensorProxy) else o, out)
        grads = grad_rules.get(sym)(g, out, *pargs, **kwargs)
    assert len(grads) == len(args)
    for (i, j, _), _ in zip(_leaves(args), range(100)):
        arg = pargs[i] if j is None else pargs[i][j]
        got = grads[i] if j is None or grads[i] is None else grads[i][j]
        if got is None:
            continue
        assert isinstance(got, TensorProxy), f"argument {(i, j)}: expected a proxy, got {type(got).__name__}"
        assert (tuple(got.shape), got.dtype, got.device) == (tuple(arg.shape), arg.dtype, arg.device)
    assert all(bsym.sym.is_prim for bsym in trace.bound_symbols), "rules record prims only"


def test_every_prim_with_a_floating_output_has_a_rule():
    missing = [
        s.name for s in all_prims.values() if not _is_python_prim(s) and s not in grad_rules and s not in NO_RULE
    ]
    assert not missing, f"prims without a VJP rule (add one, or list them in NO_RULE with a reason): {missing}"


def test_no_rule_list_is_current():
    assert all(sym not in grad_rules for sym in NO_RULE), "a prim in NO_RULE has a rule now; remove it from the list"
    assert all(reason for reason in NO_RULE.values())


def test_every_rule_is_sampled():
    unsampled = [s.name for s in grad_rules if s.is_prim and not SAMPLES.get(s)]
    assert not unsampled, f"rules without grad samples: {unsampled}"


@pytest.mark.parametrize(
    "sym, args",
    [
        # the rules fail before they read g or out (torch's CPU kernels have no complex versions of these)
        (
            prims.convolution,
            (randn(1, 2, 5, dtype=C128), _other(3, 2, 3, dtype=C128), None, (1,), (0,), (1,), False, (0,), 1),
        ),
        (prims.amax, (randn(2, 3, dtype=C128), (1,))),
        (prims.erf, (randn(3, dtype=C128),)),
    ],
    ids=["convolution", "amax", "erf"],
)
def test_rules_without_complex_support_say_so(sym, args):
    with pytest.raises(UnsupportedOpError, match=f"{sym.print_name}.*complex"):
        grad_rules.get(sym)(None, None, *args)


def test_trigamma_is_digammas_derivative():
    x = uniform(0.5, 3.0, 5).requires_grad_(True)
    (want,) = torch.autograd.grad(torch.digamma(x).sum(), x)
    torch.testing.assert_close(prims.trigamma(x.detach()), want)


def test_convolution_backward_matches_autograd_with_a_partial_mask():
    a, w = randn(1, 2, 6), randn(3, 2, 3, seed=1)
    g = randn(1, 3, 4, seed=5)
    ga, gw, gb = prims.convolution_backward(g, a, w, (1,), (0,), (1,), False, (0,), 1, (False, True, False))
    assert ga is None and gb is None
    w_ = w.clone().requires_grad_(True)
    (want,) = torch.autograd.grad(torch.convolution(a, w_, None, (1,), (0,), (1,), False, (0,), 1), w_, g)
    torch.testing.assert_close(gw, want)


def test_cumprod_rule_is_exact_with_zeros():
    """Division by the input would give nan or inf at zeros; the rule gives torch's values."""
    a = tensor([2.0, 0.0, 3.0, 0.0, 4.0])
    g = torch.ones(5, dtype=F64)
    (got, _) = grad_rules.get(prims.cumprod)(g, prims.cumprod(a, 0), a, 0)
    assert torch.isfinite(got).all()
    a_ = a.clone().requires_grad_(True)
    (want,) = torch.autograd.grad(torch.cumprod(a_, 0), a_, g)
    torch.testing.assert_close(got, want)
    assert math.isclose(got[1].item(), 2.0 + 2.0 * 3.0)


# --- through thunder's own backward -------------------------------------------------------------
# The transform (thunder.core.transforms.autodiff) calls the rules on the proxies of a real trace;
# these programs reach the rules whose gradients need the most prims.

_PROGRAMS = {
    "prod with zeros": (lambda a: a.prod(1), [_PROD_ZEROS]),
    "cumprod with zeros": (lambda a: a.cumprod(1), [_CUMPROD_ZEROS]),
    "var_mean": (lambda a: torch.var_mean(a, 1)[0] * torch.var_mean(a, 1)[1], [randn(3, 4)]),
    "conv2d": (
        lambda x, w, b: torch.nn.functional.conv2d(x, w, b, stride=2, padding=1),
        [randn(2, 3, 6, 6), randn(4, 3, 3, 3, seed=1), randn(4, seed=2)],
    ),
    "embedding": (lambda w: torch.nn.functional.embedding(_I([0, 2], [2, 1]), w, padding_idx=1), [randn(4, 3)]),
    "index_put": (lambda a, v: a.index_put((_I(0, 2),), v), [randn(3, 4), randn(2, 4, seed=1)]),
    "advanced indexing": (lambda a: a[_I(0, 2), 1:3] * 2, [randn(3, 4)]),
    "pad and flip": (lambda a: torch.nn.functional.pad(a, (1, 2, 0, 1)).flip(0), [randn(3, 4)]),
    "maximum ties": (lambda a, b: torch.maximum(a, b) * a, list(_TIES)),
    "pow": (lambda a, b: a.abs() ** b + 2**a, [randn(3, 4), randn(3, 4, seed=1)]),
}


@pytest.mark.parametrize("name", list(_PROGRAMS))
def test_rules_in_thunders_backward_match_eager(name):
    fn, inputs = _PROGRAMS[name]
    xs = [x.clone().requires_grad_(True) for x in inputs]
    ys = [x.clone().requires_grad_(True) for x in inputs]
    jfn = thunder.jit(fn)
    out, expected = jfn(*xs), fn(*ys)
    torch.testing.assert_close(out, expected)
    g = randn(*out.shape, seed=9)
    out.backward(g)
    expected.backward(g)
    assert thunder.compile_stats(jfn).last_autograd_fallback is None, "thunder's own backward must have run"
    for x, y in zip(xs, ys):
        torch.testing.assert_close(x.grad, y.grad)
