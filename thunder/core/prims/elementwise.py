"""Elementwise primitives: unary, binary and ternary ops over tensors of one shape.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import enum
import math
from numbers import Number

import torch

from thunder.core import dtypes
from thunder.core.errors import NATIVE_TENSOR_HINT, ThunderTypeError
from thunder.core.prims.base import (
    check_real_grad,
    check_same_device,
    check_same_dtype,
    check_same_shape,
    conj,
    full_like,
    is_differentiable,
    is_number,
    is_tensor,
    make_prim,
    zero_grad_rule,
    zeros_like,
)
from thunder.core.proxies import NumberProxy, TensorProxy, pyval
from thunder.core.rules import grad_rules
from thunder.core.symbol import Symbol


class ElementwisePrimIDs(enum.Enum):
    # unary
    ABS = enum.auto()
    NEG = enum.auto()
    EXP = enum.auto()
    EXP2 = enum.auto()
    EXPM1 = enum.auto()
    LOG = enum.auto()
    LOG1P = enum.auto()
    LOG2 = enum.auto()
    LOG10 = enum.auto()
    SIN = enum.auto()
    COS = enum.auto()
    TAN = enum.auto()
    ASIN = enum.auto()
    ACOS = enum.auto()
    ATAN = enum.auto()
    SINH = enum.auto()
    COSH = enum.auto()
    TANH = enum.auto()
    ASINH = enum.auto()
    ACOSH = enum.auto()
    ATANH = enum.auto()
    SQRT = enum.auto()
    RSQRT = enum.auto()
    RECIPROCAL = enum.auto()
    SIGN = enum.auto()
    SIGNBIT = enum.auto()
    FLOOR = enum.auto()
    CEIL = enum.auto()
    ROUND = enum.auto()
    TRUNC = enum.auto()
    ERF = enum.auto()
    ERFC = enum.auto()
    ERFINV = enum.auto()
    LGAMMA = enum.auto()
    DIGAMMA = enum.auto()
    TRIGAMMA = enum.auto()  # polygamma(1, x): the derivative of digamma
    SIGMOID = enum.auto()
    BITWISE_NOT = enum.auto()
    ISFINITE = enum.auto()
    ISNAN = enum.auto()
    ISINF = enum.auto()
    REAL = enum.auto()
    IMAG = enum.auto()
    # binary
    ADD = enum.auto()
    SUB = enum.auto()
    MUL = enum.auto()
    DIV = enum.auto()
    FMOD = enum.auto()
    REMAINDER = enum.auto()
    POW = enum.auto()
    ATAN2 = enum.auto()
    MAXIMUM = enum.auto()
    MINIMUM = enum.auto()
    EQ = enum.auto()
    NE = enum.auto()
    LT = enum.auto()
    LE = enum.auto()
    GT = enum.auto()
    GE = enum.auto()
    BITWISE_AND = enum.auto()
    BITWISE_OR = enum.auto()
    BITWISE_XOR = enum.auto()
    BITWISE_LEFT_SHIFT = enum.auto()
    BITWISE_RIGHT_SHIFT = enum.auto()
    COPYSIGN = enum.auto()
    NEXTAFTER = enum.auto()
    # ternary
    WHERE = enum.auto()
    # dtype
    CONVERT_ELEMENT_TYPE = enum.auto()


# Note [Prim dtype rules]
# A prim's meta rejects the dtypes its reference implementation (PyTorch's kernel) rejects, so a
# trace never holds a prim that no executor can run: ``prims.floor`` of a complex tensor fails
# while tracing, not when the computation runs. Prims do not promote, so a rule looks at the one
# dtype all tensor operands share; a third entry names the operand that must be a tensor for the
# rule to apply. (The torch language applies eager's rules before promotion,
# see Note [Dtype rules] in ``thunder.torch.elementwise``.)
def _not_bool(d):
    return d is not torch.bool


def _not_complex(d):
    return not d.is_complex


def _real_not_bool(d):
    return d is not torch.bool and not d.is_complex


def _integral(d):
    return not d.is_floating_point and not d.is_complex


def _integral_not_bool(d):
    return _integral(d) and d is not torch.bool


def _floating(d):
    return d.is_floating_point


def _complex(d):
    return d.is_complex


_RULES = {
    "abs": (_not_bool, "bool"),
    "neg": (_not_bool, "bool"),
    "sign": (_not_complex, "complex"),
    "signbit": (_not_complex, "complex"),
    "floor": (_real_not_bool, "bool and complex"),
    "ceil": (_real_not_bool, "bool and complex"),
    "round": (_real_not_bool, "bool and complex"),
    "trunc": (_real_not_bool, "bool and complex"),
    "erf": (_not_complex, "complex"),
    "erfc": (_not_complex, "complex"),
    "erfinv": (_not_complex, "complex"),
    "lgamma": (_not_complex, "complex"),
    "digamma": (_not_complex, "complex"),
    "trigamma": (_not_complex, "complex"),
    "bitwise_not": (_integral, "floating-point and complex"),
    "imag": (_complex, "non-complex"),
    "sub": (_not_bool, "bool"),
    "div": (_not_bool, "bool"),
    "fmod": (_real_not_bool, "bool and complex"),
    "remainder": (_real_not_bool, "bool and complex"),
    "pow": (_not_bool, "bool", "b"),  # a Python exponent has a bool kernel; a tensor one does not
    "atan2": (_not_complex, "complex"),
    "maximum": (_not_complex, "complex"),
    "minimum": (_not_complex, "complex"),
    "lt": (_not_complex, "complex"),
    "le": (_not_complex, "complex"),
    "gt": (_not_complex, "complex"),
    "ge": (_not_complex, "complex"),
    "bitwise_and": (_integral, "floating-point and complex"),
    "bitwise_or": (_integral, "floating-point and complex"),
    "bitwise_xor": (_integral, "floating-point and complex"),
    "bitwise_left_shift": (_integral_not_bool, "bool, floating-point and complex"),
    "bitwise_right_shift": (_integral_not_bool, "bool, floating-point and complex"),
    "copysign": (_not_complex, "complex"),
    "nextafter": (_floating, "non-floating-point"),
}


def _elementwise_meta(op: str, names: tuple[str, ...], output_dtype):
    """Meta for an elementwise prim: same shapes, devices and dtypes; numbers allowed; the
    dtype rule of Note [Prim dtype rules]."""
    rule = _RULES.get(op)

    def meta(*args):
        for a, n in zip(args, names):
            if not isinstance(a, TensorProxy) and not is_number(a):
                hint = NATIVE_TENSOR_HINT if isinstance(a, torch.Tensor) else ""
                raise ThunderTypeError(f"prims.{op}: expected {n} to be a tensor or a number, but got {type(a).__name__}{hint}")
        tensors = [a for a in args if isinstance(a, TensorProxy)]
        tnames = [n for a, n in zip(args, names) if isinstance(a, TensorProxy)]
        if not tensors:
            raise ThunderTypeError(f"prims.{op}: expected at least one tensor argument, got only numbers")
        check_same_shape(f"prims.{op}", tensors, tnames)
        check_same_device(f"prims.{op}", tensors, tnames)
        check_same_dtype(f"prims.{op}", tensors, tnames)
        t = tensors[0]
        applies = rule is not None and (len(rule) < 3 or isinstance(args[names.index(rule[2])], TensorProxy))
        if applies and not rule[0](t.dtype):
            raise ThunderTypeError(
                f"prims.{op}: not implemented for dtype {t.dtype} ({rule[1]} dtypes are not supported by its kernel)"
            )
        return TensorProxy(shape=t.shape, dtype=output_dtype(t.dtype), device=t.device, requires_grad=False)

    return meta


def _same(d):
    return d


def _to_bool(d):
    return torch.bool


def _to_real(d):
    return dtypes.corresponding_real_dtype(d)


def _unary(id, name, output_dtype=_same, impl=None):
    return make_prim(id, name, _elementwise_meta(name, ("a",), output_dtype), impl=impl or getattr(torch, name))


def _binary(id, name, output_dtype=_same, impl=None):
    return make_prim(id, name, _elementwise_meta(name, ("a", "b"), output_dtype), impl=impl or getattr(torch, name))


def _div_impl(a, b):
    """True division for inexact dtypes, C-style truncation for integers (as the prim promises)."""
    if isinstance(a, torch.Tensor):
        inexact = a.dtype.is_floating_point or a.dtype.is_complex
    else:
        inexact = b.dtype.is_floating_point or b.dtype.is_complex
    return torch.div(a, b) if inexact else torch.div(a, b, rounding_mode="trunc")


def _trigamma_impl(a):
    return torch.polygamma(1, a)


def _torch_real(a):
    return torch.real(a).clone() if a.is_complex() else a


def _torch_imag(a):
    return torch.imag(a).clone()


E = ElementwisePrimIDs
abs = _unary(E.ABS, "abs", _to_real)
neg = _unary(E.NEG, "neg")
exp = _unary(E.EXP, "exp")
exp2 = _unary(E.EXP2, "exp2")
expm1 = _unary(E.EXPM1, "expm1")
log = _unary(E.LOG, "log")
log1p = _unary(E.LOG1P, "log1p")
log2 = _unary(E.LOG2, "log2")
log10 = _unary(E.LOG10, "log10")
sin = _unary(E.SIN, "sin")
cos = _unary(E.COS, "cos")
tan = _unary(E.TAN, "tan")
asin = _unary(E.ASIN, "asin")
acos = _unary(E.ACOS, "acos")
atan = _unary(E.ATAN, "atan")
sinh = _unary(E.SINH, "sinh")
cosh = _unary(E.COSH, "cosh")
tanh = _unary(E.TANH, "tanh")
asinh = _unary(E.ASINH, "asinh")
acosh = _unary(E.ACOSH, "acosh")
atanh = _unary(E.ATANH, "atanh")
sqrt = _unary(E.SQRT, "sqrt")
rsqrt = _unary(E.RSQRT, "rsqrt")
reciprocal = _unary(E.RECIPROCAL, "reciprocal")
sign = _unary(E.SIGN, "sign")
signbit = _unary(E.SIGNBIT, "signbit", _to_bool)
floor = _unary(E.FLOOR, "floor")
ceil = _unary(E.CEIL, "ceil")
round = _unary(E.ROUND, "round")
trunc = _unary(E.TRUNC, "trunc")
erf = _unary(E.ERF, "erf")
erfc = _unary(E.ERFC, "erfc")
erfinv = _unary(E.ERFINV, "erfinv")
lgamma = _unary(E.LGAMMA, "lgamma")
digamma = _unary(E.DIGAMMA, "digamma")
trigamma = _unary(E.TRIGAMMA, "trigamma", impl=_trigamma_impl)
sigmoid = _unary(E.SIGMOID, "sigmoid")
bitwise_not = _unary(E.BITWISE_NOT, "bitwise_not")
isfinite = _unary(E.ISFINITE, "isfinite", _to_bool)
isnan = _unary(E.ISNAN, "isnan", _to_bool)
isinf = _unary(E.ISINF, "isinf", _to_bool)
real = _unary(E.REAL, "real", _to_real, impl=_torch_real)
imag = _unary(E.IMAG, "imag", _to_real, impl=_torch_imag)

add = _binary(E.ADD, "add")
sub = _binary(E.SUB, "sub")
mul = _binary(E.MUL, "mul")
div = _binary(E.DIV, "div", impl=_div_impl)  # true division for inexact dtypes, truncation for integers
fmod = _binary(E.FMOD, "fmod")
remainder = _binary(E.REMAINDER, "remainder")
pow = _binary(E.POW, "pow")
atan2 = _binary(E.ATAN2, "atan2")
maximum = _binary(E.MAXIMUM, "maximum")
minimum = _binary(E.MINIMUM, "minimum")
eq = _binary(E.EQ, "eq", _to_bool)
ne = _binary(E.NE, "ne", _to_bool)
lt = _binary(E.LT, "lt", _to_bool)
le = _binary(E.LE, "le", _to_bool)
gt = _binary(E.GT, "gt", _to_bool)
ge = _binary(E.GE, "ge", _to_bool)
bitwise_and = _binary(E.BITWISE_AND, "bitwise_and")
bitwise_or = _binary(E.BITWISE_OR, "bitwise_or")
bitwise_xor = _binary(E.BITWISE_XOR, "bitwise_xor")
bitwise_left_shift = _binary(E.BITWISE_LEFT_SHIFT, "bitwise_left_shift")
bitwise_right_shift = _binary(E.BITWISE_RIGHT_SHIFT, "bitwise_right_shift")
copysign = _binary(E.COPYSIGN, "copysign")
nextafter = _binary(E.NEXTAFTER, "nextafter")


def _where_meta(pred, a, b):
    op = "prims.where"
    tensors = [(x, n) for x, n in ((pred, "pred"), (a, "a"), (b, "b")) if isinstance(x, TensorProxy)]
    if not tensors:
        raise ThunderTypeError(f"{op}: expected at least one tensor argument")
    if isinstance(pred, TensorProxy) and pred.dtype is not torch.bool:
        raise ThunderTypeError(f"{op}: pred must be a bool tensor, but has dtype {pred.dtype}")
    check_same_shape(op, [x for x, _ in tensors], [n for _, n in tensors])
    check_same_device(op, [x for x, _ in tensors], [n for _, n in tensors])
    values = [x for x in (a, b) if isinstance(x, TensorProxy)]
    if len(values) == 2:
        check_same_dtype(op, values, ["a", "b"])
    if values:
        dtype = values[0].dtype
    else:
        dtype = dtypes.to_dtype(a)
    t = tensors[0][0]
    return TensorProxy(shape=t.shape, dtype=dtype, device=t.device)


where = make_prim(E.WHERE, "where", _where_meta, impl=torch.where)


def _convert_element_type_meta(a, dtype):
    if not isinstance(dtype, torch.dtype):
        raise ThunderTypeError(f"prims.convert_element_type: dtype must be a torch.dtype, got {dtype!r}")
    if isinstance(a, TensorProxy):
        return TensorProxy.like(a, dtype=dtype, requires_grad=False)
    if isinstance(a, (Number, NumberProxy)):
        return dtypes.dtype_to_python_type(dtype)(pyval(a))
    raise ThunderTypeError(f"prims.convert_element_type: expected a tensor or number, got {type(a).__name__}")


def _convert_element_type_impl(a, dtype):
    if isinstance(a, torch.Tensor):
        return a.to(dtype)
    return dtypes.dtype_to_python_type(dtype)(a)


convert_element_type = make_prim(
    E.CONVERT_ELEMENT_TYPE, "convert_element_type", _convert_element_type_meta, impl=_convert_element_type_impl
)


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]


# --- gradients (Note [VJP rules] in thunder.core.rules) ---
# Complex inputs follow torch's convention, the cotangent times the conjugate derivative
# (``g * conj(f'(z))``), for the holomorphic ops; the others reject them (``check_real_grad``).
# A number operand gets None; where a formula needs both operands as tensors, the number first
# becomes one (``full_like``).

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)
_SQRT_PI_OVER_TWO = math.sqrt(math.pi) / 2.0


def _sq(x):
    return mul(x, x)


def _register_unary(sym: Symbol, derivative, *, complex_ok: bool = True) -> None:
    """``g * conj(f'(a))`` with ``f'(a) = derivative(a, out)``."""
    op = sym.print_name

    def rule(g, out, a):
        if not is_differentiable(a):
            return (None,)
        if not complex_ok:
            check_real_grad(op, a)
        return (mul(g, conj(derivative(a, out))),)

    rule.__name__ = rule.__qualname__ = f"_{sym.name}_grad"
    grad_rules.register(sym)(rule)


for _sym, _derivative in (
    (exp, lambda a, out: out),
    (exp2, lambda a, out: mul(out, _LN2)),
    (expm1, lambda a, out: add(out, 1)),
    (log1p, lambda a, out: reciprocal(add(a, 1))),
    (log2, lambda a, out: reciprocal(mul(a, _LN2))),
    (log10, lambda a, out: reciprocal(mul(a, _LN10))),
    (sin, lambda a, out: cos(a)),
    (cos, lambda a, out: neg(sin(a))),
    (tan, lambda a, out: add(_sq(out), 1)),
    (asin, lambda a, out: rsqrt(sub(1, _sq(a)))),
    (acos, lambda a, out: neg(rsqrt(sub(1, _sq(a))))),
    (atan, lambda a, out: reciprocal(add(_sq(a), 1))),
    (sinh, lambda a, out: cosh(a)),
    (cosh, lambda a, out: sinh(a)),
    (tanh, lambda a, out: sub(1, _sq(out))),
    (asinh, lambda a, out: rsqrt(add(_sq(a), 1))),
    (acosh, lambda a, out: rsqrt(sub(_sq(a), 1))),
    (atanh, lambda a, out: reciprocal(sub(1, _sq(a)))),
    (sqrt, lambda a, out: div(0.5, out)),
    (rsqrt, lambda a, out: mul(mul(out, _sq(out)), -0.5)),
    (reciprocal, lambda a, out: neg(_sq(out))),
    (sigmoid, lambda a, out: mul(out, sub(1, out))),
):
    _register_unary(_sym, _derivative)

for _sym, _derivative in (
    (erf, lambda a, out: mul(exp(neg(_sq(a))), _TWO_OVER_SQRT_PI)),
    (erfc, lambda a, out: mul(exp(neg(_sq(a))), -_TWO_OVER_SQRT_PI)),
    (erfinv, lambda a, out: mul(exp(_sq(out)), _SQRT_PI_OVER_TWO)),
    (lgamma, lambda a, out: digamma(a)),
    (digamma, lambda a, out: trigamma(a)),
):
    _register_unary(_sym, _derivative, complex_ok=False)  # their metas reject complex inputs too

# Zero almost everywhere, with a float result: eager's gradient is a tensor of zeros (``zeros_like(grad)`` in torch's
# derivatives), which goes on through the ops before: ``(x * nan).sign()`` gives x a NaN gradient (0 * NaN), not 0.
@grad_rules.register(sign, floor, ceil, round, trunc)
def _zeros_grad(g, out, a):
    return (zeros_like(g),)


# No gradient (predicates, bit operations: results that are not floats).
grad_rules.register(
    signbit,
    bitwise_not,
    isfinite,
    isnan,
    isinf,
    eq,
    ne,
    lt,
    le,
    gt,
    ge,
    bitwise_and,
    bitwise_or,
    bitwise_xor,
    bitwise_left_shift,
    bitwise_right_shift,
)(zero_grad_rule)


@grad_rules.register(nextafter)
def _nextafter_grad(g, out, a, b):
    # torch's NextafterBackward: the cotangent for ``a`` (one ulp away is the identity to first order), none for ``b``
    return (g if is_differentiable(a) else None, None)


@grad_rules.register(log)
def _log_grad(g, out, a):
    # Eager's ``grad / conj(a)``: one division, rounded once (a reciprocal and a product round twice).
    return (div(g, conj(a)) if is_differentiable(a) else None,)


@grad_rules.register(neg)
def _neg_grad(g, out, a):
    return (neg(g) if is_differentiable(a) else None,)


@grad_rules.register(abs)
def _abs_grad(g, out, a):
    if not is_differentiable(a):
        return (None,)
    if not a.dtype.is_complex:
        return (mul(g, sign(a)),)
    # torch: g * sgn(z), sgn(z) = z / |z| (0 at 0); g is real, z complex
    is_zero = eq(out, 0)
    sgn = where(is_zero, 0, div(a, convert_element_type(where(is_zero, 1, out), a.dtype)))
    return (mul(convert_element_type(g, a.dtype), sgn),)


@grad_rules.register(real)
def _real_grad(g, out, a):
    if not is_differentiable(a):
        return (None,)
    return (convert_element_type(g, a.dtype) if a.dtype.is_complex else g,)


@grad_rules.register(imag)
def _imag_grad(g, out, a):
    return (mul(convert_element_type(g, a.dtype), 1j),)


def _both(a, b):
    """Both operands as tensors: a number becomes a tensor like the other operand."""
    return (a if is_tensor(a) else full_like(b, a)), (b if is_tensor(b) else full_like(a, b))


@grad_rules.register(add)
def _add_grad(g, out, a, b):
    return (g if is_differentiable(a) else None, g if is_differentiable(b) else None)


@grad_rules.register(sub)
def _sub_grad(g, out, a, b):
    return (g if is_differentiable(a) else None, neg(g) if is_differentiable(b) else None)


@grad_rules.register(mul)
def _mul_grad(g, out, a, b):
    return (
        mul(g, conj(b)) if is_differentiable(a) else None,
        mul(g, conj(a)) if is_differentiable(b) else None,
    )


@grad_rules.register(div)
def _div_grad(g, out, a, b):
    if not (is_differentiable(a) or is_differentiable(b)):
        return (None, None)  # integer (truncating) division
    ga = div(g, conj(b))
    return (ga if is_differentiable(a) else None, neg(mul(ga, conj(out))) if is_differentiable(b) else None)


def _register_rounding_division(sym: Symbol, rounding) -> None:
    """``a - rounding(a / b) * b``: d/da = 1, d/db = -rounding(a / b) (torch's formulas)."""

    def rule(g, out, a, b):
        return (
            g if is_differentiable(a) else None,
            neg(mul(g, rounding(div(a, b)))) if is_differentiable(b) else None,
        )

    rule.__name__ = rule.__qualname__ = f"_{sym.name}_grad"
    grad_rules.register(sym)(rule)


_register_rounding_division(fmod, trunc)
_register_rounding_division(remainder, floor)


@grad_rules.register(pow)
def _pow_grad(g, out, a, b):
    if not (is_differentiable(a) or is_differentiable(b)):
        return (None, None)
    if type(b) in (int, float) and is_differentiable(a):
        # A plain number exponent, as torch's pow_backward: (b * a**(b - 1)) * g, zeros for b == 0.
        if b == 0:
            return (zeros_like(a), None)
        power = a if b - 1 == 1 and not a.dtype.is_complex else pow(a, b - 1)  # a**1 is a, exactly
        return (mul(g, conj(mul(power, b))), None)
    ta, tb = _both(a, b)
    ga = gb = None
    if is_differentiable(a):  # b * a**(b - 1), and 0 where b == 0 (torch: even at a == 0)
        ga = where(eq(tb, 0), 0, mul(g, conj(mul(tb, pow(ta, sub(tb, 1))))))
    if is_differentiable(b):  # a**b * log(a), and 0 where a == 0 and b >= 0 (a real b, for complex b)
        b_nonnegative = (
            bitwise_and(eq(imag(tb), 0), ge(real(tb), 0)) if tb.dtype.is_complex else ge(tb, 0)
        )
        gb = where(bitwise_and(eq(ta, 0), b_nonnegative), 0, mul(g, conj(mul(out, log(ta)))))
    return ga, gb


@grad_rules.register(atan2)
def _atan2_grad(g, out, a, b):
    ta, tb = _both(a, b)
    denom = add(_sq(ta), _sq(tb))
    return (
        mul(g, div(tb, denom)) if is_differentiable(a) else None,
        mul(g, div(neg(ta), denom)) if is_differentiable(b) else None,
    )


def _register_extremum(sym: Symbol, a_loses) -> None:
    """torch's rule: ties split the cotangent in half; a NaN operand passes it to both."""

    def rule(g, out, a, b):
        ta, tb = _both(a, b)
        half = where(eq(ta, tb), mul(g, 0.5), g)
        return (
            where(a_loses(ta, tb), 0, half) if is_differentiable(a) else None,
            where(a_loses(tb, ta), 0, half) if is_differentiable(b) else None,
        )

    rule.__name__ = rule.__qualname__ = f"_{sym.name}_grad"
    grad_rules.register(sym)(rule)


_register_extremum(maximum, lt)
_register_extremum(minimum, gt)


@grad_rules.register(copysign)
def _copysign_grad(g, out, a, b):
    if not is_differentiable(a):
        return (None, None)
    is_zero = eq(a, 0)  # torch: g * (out / a), 0 where a == 0; b gets none
    return (where(is_zero, 0, mul(g, div(out, where(is_zero, 1, a)))), None)


@grad_rules.register(where)
def _where_grad(g, out, pred, a, b):
    if not is_tensor(pred):
        return (None, g if pred and is_differentiable(a) else None, g if not pred and is_differentiable(b) else None)
    return (
        None,
        where(pred, g, 0) if is_differentiable(a) else None,
        where(pred, 0, g) if is_differentiable(b) else None,
    )


@grad_rules.register(convert_element_type)
def _convert_element_type_grad(g, out, a, dtype):
    if not is_differentiable(a) or not dtypes.is_inexact_dtype(dtype):
        return (None, None)  # conversions to integers and bools have no gradient (as in torch)
    if g.dtype.is_complex and not a.dtype.is_complex:
        g = real(g)  # torch: a real -> complex conversion passes back the real part
    return (convert_element_type(g, a.dtype) if g.dtype != a.dtype else g, None)
