"""Conversions by a value's own dunders: ``str``/``repr``/``format`` (f-strings), ``float``, ``int``, ``__index__``.

Layer: ``thunder.core.interpreter``. Imports: the standard library, the interpreter's modules.

Note [Conversions interpreted]
    ``str(obj)``, ``f"{obj}"``, ``float(obj)``, ``range(obj)`` or ``[...][obj]`` call the object's
    ``__str__``/``__format__``/``__float__``/``__index__`` from C. Run natively, the Python code of such a
    dunder is invisible to the lookaside and the callbacks: what it reads (``self.mode``, a global) goes
    unguarded, so a cached trace kept the string or number of its first call when the object changed, and
    what it does (a counter) was done on the first call only. So where the dunder CPython would call is a
    Python function, it is called as the program would (``execution.call``, bound, so the lookaside sees
    the object), its result checked as CPython checks it, and the native conversion applied to that result.
    ``str.format`` and ``str % args`` get each argument with such dunders in a stand-in of the same type name
    whose dunders call the argument's as the program would (``converting``), as are the attribute loads of a
    format's fields (``"{0.name}"``, and the items, ``"{0[key]}"``, read as the program's subscript is); ``seq * obj``
    reads ``obj``'s ``__index__`` so, and ``math``'s functions of real numbers and of integers (``math.sqrt(obj)``,
    ``math.comb(obj, 2)``) get their arguments converted so (a float or int, subclasses included, is read by C
    without a dunder, as CPython reads it). Other C callers of these dunders (``bytes(obj)``, ``math.floor``'s
    ``__floor__``) still call them natively; ``protocols.contains`` calls a list's, tuple's or deque's elements'
    ``__eq__`` so.
"""

from __future__ import annotations

import builtins
import math
import operator
import types

from .errors import NULL
from .execution import (
    call,
    current_frame,
    lookup_type_attr,
    register_default_lookaside,
    register_method_adapter,
    register_native_adapter,
)
from .protocols import FAST_TYPES, _is_py, as_index

__all__ = ["as_index", "as_str", "as_repr", "as_ascii", "formatted", "converting"]

_OBJECT_STR = object.__dict__["__str__"]
_OBJECT_FORMAT = object.__dict__["__format__"]


def _dunder(v, name: str):
    """The Python function ``name`` of ``type(v)``, NULL if the type has none or a native one."""
    t = type(v)
    if t in FAST_TYPES:
        return NULL
    f = lookup_type_attr(t, name)
    return f if _is_py(f) else NULL


def _called(ctx, f, v, *args):
    return call(ctx, f.__get__(v, type(v)), args)


def _checked(r, kind: type, message: str):
    if not isinstance(r, kind):
        raise TypeError(message.format(type(r).__name__))
    return r


def as_repr(ctx, v) -> str:
    """``repr(v)``."""
    f = _dunder(v, "__repr__")
    if f is NULL:
        return repr(v)
    return _checked(_called(ctx, f, v), str, "__repr__ returned non-string (type {})")


def as_ascii(ctx, v) -> str:
    """``ascii(v)``."""
    return as_repr(ctx, v).encode("ascii", "backslashreplace").decode("ascii")


def as_str(ctx, v) -> str:
    """``str(v)``: ``object.__str__`` is ``repr``."""
    t = type(v)
    if t in FAST_TYPES:
        return str(v)
    f = lookup_type_attr(t, "__str__")
    if f is _OBJECT_STR:
        return as_repr(ctx, v)
    if not _is_py(f):
        return str(v)
    return _checked(_called(ctx, f, v), str, "__str__ returned non-string (type {})")


def formatted(ctx, v, spec: str = "") -> str:
    """``format(v, spec)``: ``object.__format__`` is ``str`` for an empty spec."""
    t = type(v)
    if t in FAST_TYPES:
        return format(v, spec)
    f = lookup_type_attr(t, "__format__")
    if f is _OBJECT_FORMAT and spec == "":
        return as_str(ctx, v)
    if not _is_py(f):
        return format(v, spec)
    return _checked(_called(ctx, f, v, spec), str, "__format__ must return a str, not {}")


def _as_number(ctx, v, name: str, kind: type):
    f = _dunder(v, name)
    if f is not NULL:
        r = _called(ctx, f, v)
        return _checked(r, kind, f"{type(v).__name__}.{name} returned non-{kind.__name__} (type {{}})")
    if lookup_type_attr(type(v), name) is NULL and _dunder(v, "__index__") is not NULL:
        return as_index(ctx, v)
    return v


def _one_argument(convert):
    def adapt(ctx, args, kwargs):
        if len(args) == 1 and not kwargs:
            return (convert(ctx, args[0]),), kwargs
        return args, kwargs

    return adapt


def _format_adapter(ctx, args, kwargs):
    if 1 <= len(args) <= 2 and not kwargs:
        return (formatted(ctx, *args),), None
    return args, kwargs


def _indices_adapter(ctx, args, kwargs):
    return tuple(as_index(ctx, a) for a in args), kwargs


for _fn, _adapt in (
    (builtins.str, _one_argument(as_str)),
    (builtins.format, _format_adapter),
    (builtins.float, _one_argument(lambda ctx, v: _as_number(ctx, v, "__float__", float))),
    (builtins.int, _one_argument(lambda ctx, v: _as_number(ctx, v, "__int__", int))),
    (operator.index, _one_argument(as_index)),
    (builtins.hex, _one_argument(as_index)),
    (builtins.oct, _one_argument(as_index)),
    (builtins.bin, _one_argument(as_index)),
    (builtins.range, _indices_adapter),
):
    register_native_adapter(_fn, _adapt)


def _math_adapter(convert):
    """``math``'s arguments converted as its C code converts them, a Python dunder called as the program would."""

    def adapt(ctx, args, kwargs):
        return tuple(a if isinstance(a, (int, float)) else convert(ctx, a) for a in args), kwargs

    return adapt


_MATH_OF_REALS = (
    "acos acosh asin asinh atan atan2 atanh cbrt copysign cos cosh degrees erf erfc exp exp2 expm1 fabs fmod frexp "
    "gamma hypot isclose isfinite isinf isnan lgamma log log10 log1p log2 modf nextafter pow radians remainder sin "
    "sinh sqrt tan tanh ulp"
)
_MATH_OF_INTEGERS = "comb factorial gcd isqrt lcm perm"
for _names, _convert in (
    (_MATH_OF_REALS, lambda ctx, v: _as_number(ctx, v, "__float__", float)),
    (_MATH_OF_INTEGERS, as_index),
):
    for _name in _names.split():
        if hasattr(math, _name):  # (cbrt, exp2: 3.11 on)
            register_native_adapter(getattr(math, _name), _math_adapter(_convert))


def _one_call(fn, convert):
    def lookaside(ctx, args, kwargs):
        if len(args) == 1 and not kwargs:
            return convert(ctx, args[0])
        return fn(*args, **(kwargs or {}))

    return lookaside


for _fn, _convert in ((builtins.repr, as_repr), (builtins.ascii, as_ascii)):  # (their result is not their argument)
    register_default_lookaside(_fn)(_one_call(_fn, _convert))


# -- stand-ins for str.format and str % args -------------------------------------------------------------------

_CONVERSION_DUNDERS = ("__str__", "__repr__", "__format__", "__index__", "__int__", "__float__")


class _Converting:
    """A stand-in for a value that C code converts: its conversions are the value's, called as the program would,
    and so are the attribute loads (every one, ``__class__`` too) and subscripts of a format's fields
    (``"{0.name}"``, ``"{0[key]}"``)."""

    __slots__ = ("_ctx", "_v")

    def __init__(self, ctx, v):
        self._ctx, self._v = ctx, v

    def __getattribute__(self, name):
        from .handlers.variables import _load_attr  # (the handlers import this module)

        ctx, v = _parts(self)
        return converting(ctx, _load_attr(current_frame(ctx), v, name), True)

    def __getitem__(self, key):
        from .protocols import getitem

        ctx, v = _parts(self)
        if ctx.cb_operands is not None:  # read as the program's ``v[key]`` is (Note [Operand reads])
            ctx.cb_operands(_SUBSCRIPT, (v, key))
        return converting(ctx, getitem(ctx, v, key), True)


_SUBSCRIPT = types.SimpleNamespace(opname="BINARY_SUBSCR", arg=None)  # the instruction a field's item stands for


_CTX = _Converting.__dict__["_ctx"].__get__
_VALUE = _Converting.__dict__["_v"].__get__


def _parts(stand_in: _Converting):
    return _CTX(stand_in), _VALUE(stand_in)


_STAND_INS = {
    "__str__": lambda self: as_str(*_parts(self)),
    "__repr__": lambda self: as_repr(*_parts(self)),
    "__format__": lambda self, spec: formatted(*_parts(self), spec),
    "__index__": lambda self: as_index(*_parts(self)),
    "__int__": lambda self: int(_as_number(*_parts(self), "__int__", int)),
    "__float__": lambda self: float(_as_number(*_parts(self), "__float__", float)),
}
_stand_in_types: dict[type, type] = {}


def _stand_in_type(t: type) -> type:
    """A subclass of ``_Converting`` named as ``t``, with the conversions ``t`` has (a ``%d`` of an object
    without ``__int__`` fails as for ``t``)."""
    st = _stand_in_types.get(t)
    if st is None:
        ns = {n: f for n, f in _STAND_INS.items() if lookup_type_attr(t, n) is not NULL}
        st = _stand_in_types[t] = type(t.__name__, (_Converting,), {"__slots__": (), **ns})
    return st


def converting(ctx, v, fields: bool = False):
    """``v``, or its stand-in when one of its conversions is a Python function or, with ``fields``, when a format
    may read its attributes or items."""
    t = type(v)
    if t in FAST_TYPES and not (fields and t in (list, tuple, dict)):
        return v
    if not fields and not any(_is_py(lookup_type_attr(t, n)) for n in _CONVERSION_DUNDERS):
        return v
    return _stand_in_type(t)(ctx, v)


def _converting_arguments(ctx, template, args, kwargs):
    fields = type(template) is str and ("." in template or "[" in template)
    args = tuple(converting(ctx, a, fields) for a in args)
    if kwargs:
        kwargs = {k: converting(ctx, a, fields) for k, a in kwargs.items()}
    return args, kwargs


def _converting_unbound_format(ctx, args, kwargs):  # ``str.format(template, *args)``
    if not args:
        return args, kwargs
    rest, kwargs = _converting_arguments(ctx, args[0], args[1:], kwargs)
    return args[:1] + rest, kwargs


def percent_operand(ctx, b):
    """The right operand of ``str % b``, its values stood in for (a tuple's items, a plain dict's values)."""
    tb = type(b)
    if tb is tuple:
        return tuple(converting(ctx, a) for a in b)
    if tb is dict:
        return {k: converting(ctx, a) for k, a in b.items()}
    return converting(ctx, b)


register_method_adapter(str, "format", _converting_arguments)
register_native_adapter(str.format, _converting_unbound_format)
