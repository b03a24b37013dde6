"""Elementwise torch ops: unary and binary math, comparisons, logical and bitwise ops,
``where`` and ``clamp``, with PyTorch's broadcasting and type promotion.

One-to-one ops and their in-place twins are generated from the tables below.

Layer: language. Imports: core, torch.base.
"""

from __future__ import annotations

import builtins

import torch

from thunder.core import dtypes, prims
from thunder.core.dtypes import ELEMENTWISE_TYPE_PROMOTION_KIND as K
from thunder.core.errors import NATIVE_TENSOR_HINT, ThunderTypeError
from thunder.core.interpreter import make_opaque
from thunder.core.prims.base import grad_asked
from thunder.core.proxies import TensorProxy, pyval, register_method
from thunder.core.rules import grad_rules
from thunder.core.symbol import DONT_DCE, MAY_RAISE, UNFUSIBLE
from thunder.torch.base import (
    _as_method,
    is_number,
    is_tensor,
    make_inplace,
    maybe_broadcast,
    maybe_convert_to_dtype,
    register_reflected,
    torch_to_thunder_map,
    torchsymbol,
)
from thunder.torch.eager_ops import eager_fallback

__all__: list[str] = []


def _export(sym):
    globals()[sym.name] = sym
    __all__.append(sym.name)
    return sym


# Note [Dtype rules]
# A meta validates like eager: an op that eager rejects for a dtype (``-x`` on bool, ``x & y`` on
# floats, ``floor`` of a complex) raises while tracing, inside the meta, so it fails even when its
# result is dead code. Each rule below says which dtypes an op's kernel rejects, in terms of its
# operands' dtypes and the dtype it computes in (after type promotion); ``tests/
# test_trace_semantics.py`` checks every op of this module against eager over bool, uint8, int64,
# float32 and complex64. A rule returns None (accepted) or the reason, which the error names with
# the op and the dtype.


def _no_bool(d):
    return "bool" if d is torch.bool else None


def _no_complex(d):
    return "complex" if d.is_complex else None


def _no_bool_or_complex(d):
    return _no_bool(d) or _no_complex(d)


def _floating_only(d):
    return None if d.is_floating_point else "non-floating-point"


def _complex_only(d):
    return None if d.is_complex else "non-complex"


def _reject(op: str, rule, dtype, what: str = "dtype") -> None:
    if rule is None:
        return
    why = rule(dtype)
    if why is not None:
        raise ThunderTypeError(f'ltorch.{op}: "{op}" is not implemented for {what} {dtype} ({why} dtypes are not supported)')


def _unary(name: str, prim, kind: K, *, methods=(), torch_fn=None, inplace: bool = True, reject=None, options=None):
    """``options``: keyword arguments the decomposition takes at their defaults only (``round``'s
    ``decimals=0``); other values run the torch function as an eager op (Note [Eager ops])."""
    torch_fn = torch_fn or getattr(torch, name)
    options = options or {}
    fallback = eager_fallback(torch_fn, f"{name}_with_options") if options else None

    def meta(a, **kwargs):
        for key in kwargs:
            if key not in options:
                raise ThunderTypeError(f"ltorch.{name}() got an unexpected keyword argument '{key}'")
        if any(pyval(v) != options[k] for k, v in kwargs.items()):
            return fallback(a, **kwargs)
        if not is_tensor(a):
            raise ThunderTypeError(f"ltorch.{name}: expected a tensor, got {type(a).__name__} {a!r}")
        _reject(name, reject, a.dtype)
        computation_dtype, result_dtype = dtypes.elementwise_type_promotion(a, kind=kind)
        out = prim(maybe_convert_to_dtype(a, computation_dtype))
        return maybe_convert_to_dtype(out, result_dtype)

    meta.__name__ = name
    meta.__doc__ = f"``torch.{name}``: elementwise, decomposed into ``prims.{prim.name}``."
    sym = _export(torchsymbol(torch_fn, method_name=(name, *methods))(meta))
    if inplace:
        _export(make_inplace(sym))
    return sym


# Note [Convert before broadcasting]
# An operand is converted to the computation dtype before it is broadcast, as eager's kernels read it: the gradient of
# a broadcast operand is then summed in the computation dtype and rounded once to the operand's dtype (eager's
# ``sum_to_size`` then cast). Broadcast first, the gradient would be rounded elementwise to a low-precision operand's
# dtype (a bfloat16 parameter times a float32 activation) and summed there, a few last bits off.
def _binary_decomposition(name: str, prim, kind: K, a, b, allowed=None, reject=None):
    """``allowed``: a predicate each operand's dtype must satisfy; ``reject``: a rule (see Note
    [Dtype rules]) for the dtype the op computes in."""
    op = f"ltorch.{name}"
    for arg, n in ((a, "a"), (b, "b")):
        if not (is_tensor(arg) or is_number(arg)):
            hint = NATIVE_TENSOR_HINT if isinstance(arg, torch.Tensor) else ""
            raise ThunderTypeError(f"{op}: expected {n} to be a tensor or a number, got {type(arg).__name__}{hint}")
    if allowed is not None:
        for arg, n in ((a, "a"), (b, "b")):
            if not allowed(dtypes.to_dtype(arg)):
                raise ThunderTypeError(f'{op}: "{name}" is not implemented for {n} of dtype {dtypes.to_dtype(arg)}')
    computation_dtype, result_dtype = dtypes.elementwise_type_promotion(a, b, kind=kind)
    if reject is not None:
        _reject(name, reject, dtypes.result_type(a, b), "operands of dtype")
    # Converted before broadcast: Note [Convert before broadcasting]
    a, b = maybe_convert_to_dtype(a, computation_dtype), maybe_convert_to_dtype(b, computation_dtype)
    out = prim(*maybe_broadcast(a, b, op=op))
    return maybe_convert_to_dtype(out, result_dtype)


def _number_as_tensor(a, b):
    """``torch.add(1, 2)``: for add, sub, mul, div and floor_divide, eager's argument parser makes a number
    ``input`` a 0-d CPU tensor of the number's dtype (int64, bool, the default float or complex dtype) when
    ``other`` is a number too."""
    if is_tensor(a) or is_tensor(b) or not is_number(a) or not is_number(b):
        return a
    return prims.full((), a, device=torch.device("cpu"), dtype=dtypes.to_dtype(a))


def _binary(
    name: str, prim, kind: K, *, methods=(), reflected=(), torch_fns=None, inplace=True, allowed=None, reject=None, tags=(),
    numbers=False,
):  # fmt: skip
    torch_fns = torch_fns or (getattr(torch, name),)

    def meta(input, other):  # torch's names, so that ``torch.mul(x, other=2)`` binds as in eager
        if numbers:
            input = _number_as_tensor(input, other)
        return _binary_decomposition(name, prim, kind, input, other, allowed, reject)

    meta.__name__ = name
    meta.__doc__ = f"``torch.{name}``: elementwise with broadcasting and type promotion."
    sym = _export(torchsymbol(*torch_fns, method_name=(name, *methods), tags=tags)(meta))
    for r in reflected:
        register_reflected(r, sym)
    if inplace:
        _export(make_inplace(sym))
    return sym


def _checked(twin, check):
    """``twin`` (an in-place symbol) with an extra check before its meta (an in-place-only dtype rule)."""
    meta = twin.meta

    def checked(a, *args, **kwargs):
        check(a, *args, **kwargs)
        return meta(a, *args, **kwargs)

    checked.__name__ = meta.__name__
    checked.__wrapped__ = meta  # its signature is meta's
    twin.meta = checked
    return twin


def _integral(d):
    return dtypes.is_integer_dtype(d)


def _not_complex(d):
    return not d.is_complex


# name, prim, promotion, extra methods, dtype rule
_unary("abs", prims.abs, K.COMPLEX_TO_FLOAT, methods=("__abs__",), reject=_no_bool, inplace=False)
_unary("neg", prims.neg, K.DEFAULT, methods=("__neg__",), inplace=False)
_unary("sign", prims.sign, K.DEFAULT, reject=_no_complex)
_unary("signbit", prims.signbit, K.ALWAYS_BOOL, inplace=False, reject=_no_complex)
for _name in (
    "exp", "exp2", "expm1", "log", "log1p", "log2", "log10", "sin", "cos", "tan", "asin", "acos", "atan",
    "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "sqrt", "rsqrt", "reciprocal", "sigmoid",
):  # fmt: skip
    _unary(_name, getattr(prims, _name), K.INT_TO_FLOAT)
for _name in ("erf", "erfc", "erfinv", "lgamma", "digamma"):
    _unary(_name, getattr(prims, _name), K.INT_TO_FLOAT, reject=_no_complex)
for _name in ("floor", "ceil", "trunc"):
    _unary(_name, getattr(prims, _name), K.DEFAULT, reject=_no_bool_or_complex)
_unary("round", prims.round, K.DEFAULT, reject=_no_bool_or_complex, options={"decimals": 0})
_unary("bitwise_not", prims.bitwise_not, K.DEFAULT, methods=("__invert__",), reject=lambda d: None if _integral(d) else "floating-point and complex")
_unary("isfinite", prims.isfinite, K.ALWAYS_BOOL, inplace=False)
_unary("isnan", prims.isnan, K.ALWAYS_BOOL, inplace=False)
_unary("isinf", prims.isinf, K.ALWAYS_BOOL, inplace=False)
_unary("real", prims.real, K.COMPLEX_TO_FLOAT, inplace=False)
_unary("imag", prims.imag, K.COMPLEX_TO_FLOAT, inplace=False, reject=_complex_only)
# ``Tensor.real`` and ``Tensor.imag`` are properties in eager, not methods.
for _name in ("real", "imag"):
    setattr(TensorProxy, _name, property(make_opaque(_as_method(globals()[_name])), doc=f"``Tensor.{_name}``"))


_conj_of_complex = eager_fallback(torch.conj_physical, "conj_of_complex")


@torchsymbol(torch.conj_physical, method_name="conj_physical")
def conj_physical(a):
    """``torch.conj_physical``: the tensor itself when it is real (as in eager); torch conjugates a complex one."""
    if not is_tensor(a):
        raise ThunderTypeError(f"ltorch.conj_physical: expected a tensor, got {type(a).__name__}")
    return _conj_of_complex(a) if a.dtype.is_complex else a


@torchsymbol(torch.conj, method_name="conj")
def conj(a):
    """``torch.conj``: the tensor itself when it is real (as in eager), its conjugate (a copy) when complex."""
    if not is_tensor(a):
        raise ThunderTypeError(f"ltorch.conj: expected a tensor, got {type(a).__name__}")
    return conj_physical(a) if a.dtype.is_complex else a


@torchsymbol(torch.resolve_conj, method_name="resolve_conj")
def resolve_conj(a):
    """``torch.resolve_conj``: the tensor itself (a traced conjugate is always materialised)."""
    return a


@torchsymbol(torch.resolve_neg, method_name="resolve_neg")
def resolve_neg(a):
    """``torch.resolve_neg``: the tensor itself (a traced negation is always materialised)."""
    return a


__all__ += ["conj", "conj_physical", "resolve_conj", "resolve_neg"]


def _neg_check(a, *args):
    if is_tensor(a) and a.dtype is torch.bool:
        raise ThunderTypeError(
            "ltorch.neg: negation, the `-` operator, on a bool tensor is not supported (dtype torch.bool). "
            "To invert a mask, use the `~` or logical_not() operator instead."
        )


neg = _checked(globals()["neg"], _neg_check)
neg_ = _export(make_inplace(neg))


def _abs__check(a, *args):
    if is_tensor(a) and a.dtype.is_complex:
        raise ThunderTypeError(
            f"ltorch.abs_: in-place abs is not supported for complex tensors (dtype {a.dtype}): the result is real. "
            "Use torch.abs(x) out of place."
        )


abs_ = _export(_checked(make_inplace(globals()["abs"]), _abs__check))

_binary("atan2", prims.atan2, K.INT_TO_FLOAT, methods=("arctan2",), reject=_no_complex)
_binary("fmod", prims.fmod, K.DEFAULT, reject=_no_bool_or_complex, tags=(MAY_RAISE,))
_binary(
    "remainder", prims.remainder, K.DEFAULT, methods=("__mod__",), reflected=("__rmod__",), reject=_no_bool_or_complex,
    tags=(MAY_RAISE,),
)  # fmt: skip
_binary("pow", prims.pow, K.DEFAULT, methods=("__pow__",), reflected=("__rpow__",))


def _pow_check(a, b):
    # A bool tensor exponent has no kernel when the base is bool too; a Python exponent is fine.
    if is_tensor(b) and dtypes.result_type(a, b) is torch.bool:
        raise ThunderTypeError('ltorch.pow: "pow" is not implemented for operands of dtype torch.bool (a bool base with a '
                               "bool tensor exponent); convert one of them to an integer dtype")  # fmt: skip
    # Eager refuses a negative Python int exponent of an integer or bool tensor before it computes anything (a
    # tensor exponent is not checked): raised while tracing, a ``try`` of the program catches it where eager's does
    # (a symbolic exponent's sign is a constraint).
    n = pyval(b)
    integral = is_tensor(a) and not (a.dtype.is_floating_point or a.dtype.is_complex)
    if integral and isinstance(n, int) and not isinstance(n, bool) and n < 0:
        raise RuntimeError("Integers to negative integer powers are not allowed.")


pow = _checked(globals()["pow"], _pow_check)
_binary("maximum", prims.maximum, K.DEFAULT, inplace=False, allowed=_not_complex)
_binary("minimum", prims.minimum, K.DEFAULT, inplace=False, allowed=_not_complex)
_binary("copysign", prims.copysign, K.INT_TO_FLOAT, reject=_no_complex)
_binary("nextafter", prims.nextafter, K.DEFAULT, reject=_floating_only)
# torch's spelled-out aliases (``torch.greater``, ``x.not_equal(y)``): the same ops.
for _name, _dunder, _alias in (("eq", "__eq__", None), ("ne", "__ne__", "not_equal")):
    _binary(_name, getattr(prims, _name), K.ALWAYS_BOOL, methods=(_dunder, *filter(None, [_alias])),
            torch_fns=(getattr(torch, _name), *([getattr(torch, _alias)] if _alias else [])))  # fmt: skip
for _name, _dunder, _alias in (("lt", "__lt__", "less"), ("le", "__le__", "less_equal"), ("gt", "__gt__", "greater"),
                               ("ge", "__ge__", "greater_equal")):  # fmt: skip
    _binary(_name, getattr(prims, _name), K.ALWAYS_BOOL, methods=(_dunder, _alias), reject=_no_complex,
            torch_fns=(getattr(torch, _name), getattr(torch, _alias)))  # fmt: skip
eq, ne, lt, le, gt, ge = (globals()[_n] for _n in ("eq", "ne", "lt", "le", "gt", "ge"))
isnan = globals()["isnan"]
for _name, _dunder, _rdunder in (
    ("bitwise_and", "__and__", "__rand__"),
    ("bitwise_or", "__or__", "__ror__"),
    ("bitwise_xor", "__xor__", "__rxor__"),
):
    _binary(_name, getattr(prims, _name), K.DEFAULT, methods=(_dunder,), reflected=(_rdunder,), allowed=_integral)
for _name, _dunder, _rdunder in (
    ("bitwise_left_shift", "__lshift__", "__rlshift__"),
    ("bitwise_right_shift", "__rshift__", "__rrshift__"),
):
    _binary(_name, getattr(prims, _name), K.DEFAULT, methods=(_dunder,), reflected=(_rdunder,), allowed=_integral,
            reject=_no_bool)  # fmt: skip


def _scaled(b, alpha):
    if alpha is None or (not isinstance(alpha, TensorProxy) and pyval(alpha) == 1):
        return b
    if not isinstance(b, TensorProxy) and not isinstance(alpha, TensorProxy):
        return b * alpha  # two numbers: Python arithmetic (symbolic numbers stay symbolic)
    return mul(b, alpha)


@torchsymbol(torch.add, method_name=("add", "__add__"))
def add(a, b, *, alpha=None):
    """``torch.add``: ``a + alpha * b`` with broadcasting and type promotion."""
    a = _number_as_tensor(a, b)
    return _binary_decomposition("add", prims.add, K.DEFAULT, a, _scaled(b, alpha))


@torchsymbol(torch.sub, torch.subtract, method_name=("sub", "subtract", "__sub__"))
def sub(a, b, *, alpha=None):
    """``torch.sub``: ``a - alpha * b``."""
    a = _number_as_tensor(a, b)
    if dtypes.to_dtype(a) is torch.bool and dtypes.to_dtype(b) is torch.bool:
        raise ThunderTypeError(
            "ltorch.sub: subtraction of two bool tensors (dtype torch.bool) is not supported; use the ^ operator "
            "or logical_xor"
        )
    if dtypes.to_dtype(a) is torch.bool or dtypes.to_dtype(b) is torch.bool:
        raise ThunderTypeError(
            "ltorch.sub: subtraction, the `-` operator, with a bool operand (dtype torch.bool) is not supported; "
            "to invert a mask use the `~` or logical_not() operator instead"
        )
    return _binary_decomposition("sub", prims.sub, K.DEFAULT, a, _scaled(b, alpha))


mul = _binary("mul", prims.mul, K.DEFAULT, methods=("multiply", "__mul__"), reflected=("__rmul__",),
              torch_fns=(torch.mul, torch.multiply), numbers=True)  # fmt: skip
register_reflected("__radd__", add)
register_reflected("__rsub__", sub)
__all__ += ["add", "sub"]
add_ = _export(make_inplace(add))
sub_ = _export(make_inplace(sub))


@torchsymbol(
    torch.div, torch.divide, torch.true_divide, method_name=("div", "divide", "true_divide", "__truediv__"), tags=(MAY_RAISE,)
)
def div(a, b, *, rounding_mode=None):
    """``torch.div``: true division, or ``rounding_mode`` "trunc" / "floor"."""
    op = "ltorch.div"
    a = _number_as_tensor(a, b)
    if rounding_mode is None:
        computation_dtype, result_dtype = dtypes.elementwise_type_promotion(a, b, kind=K.INT_TO_FLOAT)
        a, b = maybe_convert_to_dtype(a, computation_dtype), maybe_convert_to_dtype(b, computation_dtype)
        out = prims.div(*maybe_broadcast(a, b, op=op))  # Note [Convert before broadcasting]
        return maybe_convert_to_dtype(out, result_dtype)
    if rounding_mode not in ("trunc", "floor"):
        raise ThunderTypeError(
            f"{op}: rounding_mode must be None, 'trunc' or 'floor', but got {rounding_mode!r}"
        )
    computation_dtype, result_dtype = dtypes.elementwise_type_promotion(a, b, kind=K.DEFAULT)
    _reject(f"div (rounding_mode={rounding_mode!r})", _no_bool_or_complex, dtypes.result_type(a, b), "operands of dtype")
    a, b = maybe_broadcast(a, b, op=op)
    if not is_tensor(a):
        # fmod takes no number ``a``: a tensor, as eager wraps the scalar (float64 or int64) and casts it
        # to the result dtype (a second operand the kernel reads as its computation dtype, as prims do)
        wide = torch.float64 if dtypes.is_inexact_dtype(computation_dtype) else torch.int64
        a = maybe_convert_to_dtype(prims.full(tuple(b.shape), a, device=b.device, dtype=wide), result_dtype)
    a, b = maybe_convert_to_dtype(a, computation_dtype), maybe_convert_to_dtype(b, computation_dtype)
    return maybe_convert_to_dtype(rounded_div(a, b, rounding_mode), result_dtype)


def _rounded_div_impl(a, b, rounding_mode):
    return torch.div(a, b, rounding_mode=rounding_mode)


@torchsymbol(id="torch.rounded_div", torch_impl=_rounded_div_impl)
def rounded_div(a, b, rounding_mode):
    """``div`` with ``rounding_mode`` of same-shape operands in their computation dtype: a symbol of its own for
    eager's gradient, zero wherever the values are (its decomposition's gradient was NaN at a NaN input)."""
    if rounding_mode == "floor":
        return _floor_div(a, b)
    q = prims.div(a, b)  # truncates integers
    return prims.trunc(q) if dtypes.is_inexact_dtype(q.dtype) else q


@grad_rules.register(rounded_div)
def _rounded_div_vjp(g, out, a, b, rounding_mode):
    def zeros(x):
        return prims.full(tuple(x.shape), 0, device=x.device, dtype=x.dtype) if grad_asked(x) else None

    return (zeros(a), zeros(b), None)


def _floor_div(a, b):
    """torch's floor division (``c10::div_floor_integer`` and ``div_floor_floating``): the quotient of
    ``a - fmod(a, b)``, less one where the remainder's sign is not ``b``'s. For floats that quotient is
    exact where ``floor(a / b)`` rounds (``1 // 0.1`` is 9, as in Python); it is NaN for an infinite
    ``a`` (fmod is NaN), and ``a / b`` for a zero ``b`` and where that overflows (torch's vectorized
    fmod is NaN there)."""
    if not a.dtype.is_signed:
        return prims.div(a, b)  # unsigned: truncation (a negative number ``b`` wraps, as in eager)
    mod = prims.fmod(a, b)
    b_negative = prims.lt(b, 0) if is_tensor(b) else b < 0
    adjust = prims.bitwise_and(prims.ne(mod, 0), prims.ne(prims.lt(mod, 0), b_negative))
    if not dtypes.is_inexact_dtype(a.dtype):
        q = prims.div(a, b)  # truncates
        return prims.where(adjust, prims.sub(q, 1), q)
    true_q = prims.div(a, b)
    if not is_tensor(b) and b == 0:
        return true_q
    q = prims.div(prims.sub(a, mod), b)
    q = prims.where(adjust, prims.sub(q, 1), q)
    rounded = prims.floor(q)
    rounded = prims.where(prims.gt(prims.sub(q, rounded), 0.5), prims.add(rounded, 1), rounded)
    rounded = prims.where(prims.eq(q, 0), prims.copysign(q, true_q), rounded)  # a zero takes the sign of a / b
    use_true_q = prims.bitwise_and(prims.isinf(true_q), prims.isfinite(a))
    if is_tensor(b):
        use_true_q = prims.bitwise_or(prims.eq(b, 0), use_true_q)
    return prims.where(use_true_q, true_q, rounded)


def _reflected_div(b, a):
    """``b / a`` for a tensor ``a``: eager's ``Tensor.__rtruediv__`` is ``a.reciprocal() * b``, which rounds twice, so
    it is computed so (``torch.div(b, a)`` differs from it in the last bit: Adam's ``lr / bias_correction1``)."""
    return mul(globals()["reciprocal"](a), b)


register_reflected("__rtruediv__", _reflected_div)
div_ = make_inplace(div)


@torchsymbol(torch.floor_divide, method_name=("floor_divide", "__floordiv__"), tags=(MAY_RAISE,))
def floor_divide(a, b):
    """``torch.floor_divide``: division rounded towards negative infinity."""
    return div(a, b, rounding_mode="floor")


def _no_derivative_impl(like, message):
    raise RuntimeError(message)


@torchsymbol(id="torch.no_derivative", torch_impl=_no_derivative_impl, tags=(DONT_DCE, UNFUSIBLE))
def no_derivative(like, message):
    """The gradient of an op eager has no derivative for: raises eager's error when the backward runs."""
    return TensorProxy.like(like, requires_grad=False)


@grad_rules.register(floor_divide)
def _floor_divide_vjp(g, out, a, b):
    # Eager: "derivative for aten::floor_divide is not implemented" (div with rounding_mode="floor" has 0).
    message = "derivative for aten::floor_divide is not implemented"
    return tuple(no_derivative(x, message) if grad_asked(x) else None for x in (a, b))


register_reflected("__rfloordiv__", floor_divide)
floor_divide_ = make_inplace(floor_divide)
__all__ += ["div", "div_", "floor_divide", "floor_divide_"]


@torchsymbol(torch.where)
def where(condition, input=None, other=None):
    """``torch.where(condition, input, other)``, with broadcasting and promotion of input and other."""
    if input is None and other is None:  # reached by calling the symbol itself: torch.where goes to data_dependent
        raise ThunderTypeError(
            "ltorch.where: the one-argument form is data-dependent and has no symbol; call torch.where(condition), "
            "which thunder splits as torch.nonzero(condition, as_tuple=True)"
        )
    if is_tensor(condition) and condition.dtype is not torch.bool:
        raise ThunderTypeError(f"ltorch.where: expected condition to be a bool tensor, but got dtype {condition.dtype}")
    dtype = dtypes.result_type(input, other)
    input, other = maybe_convert_to_dtype(input, dtype), maybe_convert_to_dtype(other, dtype)
    condition, input, other = maybe_broadcast(condition, input, other, op="ltorch.where")  # Note [Convert before broadcasting]
    if not is_tensor(input) and not is_tensor(other) and not is_tensor(condition):
        raise ThunderTypeError("ltorch.where: expected at least one tensor")
    if not is_tensor(input) and not is_tensor(other):
        input = prims.convert_element_type(prims.where(condition, input, other), dtype)
        return input
    return prims.where(condition, input, other)


@torchsymbol(torch.Tensor.where, method_name="where")
def where_method(self, condition, other):
    """``Tensor.where(condition, other)``: ``torch.where(condition, self, other)`` (the tensor is the input, not
    the condition)."""
    return where(condition, self, other)


@torchsymbol(torch.clamp, torch.clip, method_name=("clamp", "clip"))
def clamp(a, min=None, max=None):
    """``torch.clamp``: NaN stays NaN; ``min`` greater than ``max`` gives ``max``."""
    if min is None and max is None:
        raise ThunderTypeError("ltorch.clamp: at least one of 'min' or 'max' must not be None")
    for x, n in ((a, "input"), (min, "min"), (max, "max")):
        if x is not None and dtypes.to_dtype(x).is_complex:
            raise ThunderTypeError(f"ltorch.clamp: clamp is not supported for complex types ({n} has dtype {dtypes.to_dtype(x)})")
    out = a
    for bound, beyond in ((min, lt), (max, gt)):
        if bound is None:
            continue
        dtype = dtypes.result_type(out, bound)
        if is_tensor(bound):
            taken = logical_or(beyond(out, bound), isnan(bound))
        elif bound != bound:  # a NaN bound is taken everywhere: the result is NaN and its gradient zero, as eager
            taken = logical_not(beyond(out, bound))
        else:
            taken = beyond(out, bound)
        out = maybe_convert_to_dtype(where(taken, bound, out), dtype)
    return out


@grad_rules.register(clamp)
def _clamp_vjp(g, out, a, min=None, max=None):
    """Eager's ``clamp_backward`` and ``clamp_backward_min_max``: ``a``'s gradient passes where
    ``min <= a <= max`` (not at NaN, nor anywhere when min > max or a bound is NaN); a tensor bound's where ``a``
    went past it, unless (both given) the other bound wins: min only where ``min < max``, max also where ``max < min``."""
    both = min is not None and max is not None
    if both:
        inside = logical_and(ge(a, min), le(a, max))
    else:
        inside = ge(a, min) if min is not None else le(a, max)
    grads = [_reduced_like(where(inside, g, 0), a) if grad_asked(a) else None, None, None]
    if grad_asked(min):
        past_min = lt(a, min)
        grads[1] = _reduced_like(where(logical_and(past_min, lt(min, max)) if both else past_min, g, 0), min)
    if grad_asked(max):
        past_max = gt(a, max)
        grads[2] = _reduced_like(where(logical_or(past_max, lt(max, min)) if both else past_max, g, 0), max)
    return tuple(grads)


def _reduced_like(grad, arg):
    """``grad`` summed to ``arg``'s shape and converted to its dtype, as eager's engine does with the gradient of
    a broadcast input."""
    if tuple(grad.shape) != tuple(arg.shape):
        grad = torch_to_thunder_map[torch.Tensor.sum_to_size](grad, tuple(arg.shape))
    return maybe_convert_to_dtype(grad, arg.dtype)


clamp_ = make_inplace(clamp)
__all__ += ["where", "where_method", "clamp", "clamp_"]


def _to_bool(a):
    if is_tensor(a):
        return a if a.dtype is torch.bool else prims.ne(a, False if a.dtype is torch.bool else 0)
    return bool(pyval(a))


def _logical(name, prim):
    def meta(a, b):
        a, b = maybe_broadcast(a, b, op=f"ltorch.{name}")
        return prim(_to_bool(a), _to_bool(b))

    meta.__name__ = name
    sym = _export(torchsymbol(getattr(torch, name), method_name=name)(meta))
    _export(make_inplace(sym))
    return sym


logical_and = _logical("logical_and", prims.bitwise_and)
logical_or = _logical("logical_or", prims.bitwise_or)
logical_xor = _logical("logical_xor", prims.bitwise_xor)


@torchsymbol(torch.logical_not, method_name="logical_not")
def logical_not(a):
    """``torch.logical_not``: True where ``a`` is zero."""
    return prims.eq(a, False if a.dtype is torch.bool else 0)


logical_not_ = make_inplace(logical_not)


@torchsymbol(torch.positive, method_name=("positive", "__pos__"))
def positive(a):
    """``torch.positive``: ``a`` itself (eager rejects bool tensors)."""
    if is_tensor(a) and a.dtype is torch.bool:
        raise ThunderTypeError("ltorch.positive: the `+` operator on a bool tensor (dtype torch.bool) is not supported")
    return a


@torchsymbol(torch.lerp, method_name="lerp")
def lerp(start, end, weight):
    """``torch.lerp`` as eager's kernel computes it: ``start + weight * (end - start)`` where
    ``|weight| < 0.5``, else ``end - (end - start) * (1 - weight)`` (exact at ``weight == 1``), in
    float32 for reduced precision and rounded once; no type promotion between the tensors."""
    op = "ltorch.lerp"
    for x, n in ((end, "end"), (weight, "weight")):
        if is_tensor(x) and x.dtype != start.dtype:
            raise ThunderTypeError(f"{op}: expected dtype {start.dtype} for `{n}` but got dtype {x.dtype}")
    _reject("lerp", lambda d: None if d.is_floating_point or d.is_complex else "integer and bool", start.dtype)
    computation = torch.float32 if start.dtype in dtypes.low_precision_dtypes else start.dtype
    s, e = (maybe_convert_to_dtype(x, computation) for x in (start, end))
    diff = sub(e, s)
    if is_tensor(weight):
        w = maybe_convert_to_dtype(weight, computation)
        out = where(lt(globals()["abs"](w), 0.5), add(s, mul(w, diff)), sub(e, mul(diff, sub(1, w))))
    else:
        w = pyval(weight)
        out = add(s, mul(weight, diff)) if builtins.abs(w) < 0.5 else sub(e, mul(diff, 1 - w))
    return maybe_convert_to_dtype(out, start.dtype)


lerp_ = make_inplace(lerp)


@torchsymbol(torch.addcmul, method_name="addcmul")
def addcmul(a, tensor1, tensor2, *, value=1):
    """``torch.addcmul``: ``a + value * tensor1 * tensor2``."""
    _reject("addcmul", _no_bool, dtypes.result_type(dtypes.result_type(a, tensor1), tensor2), "operands of dtype")
    return add(a, mul(mul(tensor1, tensor2), value))


@torchsymbol(torch.addcdiv, method_name="addcdiv")
def addcdiv(a, tensor1, tensor2, *, value=1):
    """``torch.addcdiv``: ``a + value * tensor1 / tensor2`` (true division; integer operands are rejected)."""
    if dtypes.is_integer_dtype(dtypes.to_dtype(tensor1)) and dtypes.is_integer_dtype(dtypes.to_dtype(tensor2)):
        raise ThunderTypeError(
            f"ltorch.addcdiv: integer division with addcdiv is not supported (tensor1 has dtype "
            f"{dtypes.to_dtype(tensor1)}, tensor2 {dtypes.to_dtype(tensor2)}); use torch.addcmul(input, tensor1, "
            "torch.reciprocal(tensor2)) or convert to a floating-point dtype"
        )
    return add(a, mul(div(tensor1, tensor2), value))


addcmul_ = make_inplace(addcmul)
addcdiv_ = make_inplace(addcdiv)


@torchsymbol(torch.square, method_name="square")
def square(a):
    return mul(a, a)


@torchsymbol(torch.nan_to_num, method_name="nan_to_num")
def nan_to_num(a, nan=0.0, posinf=None, neginf=None):
    """``torch.nan_to_num``: replaces NaN and infinities by finite values of ``a``'s dtype."""
    if not a.dtype.is_floating_point:
        return a
    info = torch.finfo(a.dtype)
    out = where(isnan(a), nan, a)
    out = where(eq(out, float("inf")), info.max if posinf is None else posinf, out)
    return where(eq(out, float("-inf")), info.min if neginf is None else neginf, out)


__all__ += ["logical_not", "logical_not_", "positive", "lerp", "lerp_", "addcmul", "addcmul_", "addcdiv", "addcdiv_", "square",
            "nan_to_num"]

# Augmented assignment (``x += y``) mutates the tensor in place, as in eager PyTorch.
for _dunder, _name in (
    ("__iadd__", "add_"), ("__isub__", "sub_"), ("__imul__", "mul_"), ("__itruediv__", "div_"),
    ("__ifloordiv__", "floor_divide_"), ("__imod__", "remainder_"), ("__ipow__", "pow_"),
    ("__iand__", "bitwise_and_"), ("__ior__", "bitwise_or_"), ("__ixor__", "bitwise_xor_"),
    ("__ilshift__", "bitwise_left_shift_"), ("__irshift__", "bitwise_right_shift_"),
):  # fmt: skip
    register_method(_dunder, _as_method(globals()[_name], _dunder))
