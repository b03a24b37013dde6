"""Conversions by a value's own dunders: ``str``/``repr``/``format`` (f-strings), ``float``, ``int``, ``__index__``,
and the other dunders C functions call (``bytes``, ``hash``, ``max``, ``operator.add``, ...).

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
    without a dunder, as CPython reads it). Other C callers of a value's dunders (``bytes(obj)``, ``math.floor``'s
    ``__floor__``, ``hash``, ``max``, ``operator.add``) get a stand-in of it (Note [Dunders called by C functions]);
    ``protocols.contains`` calls a list's, tuple's or deque's elements' ``__eq__`` as the program would.
"""

from __future__ import annotations

import builtins
import functools
import itertools
import math
import operator
import struct
import sys
import types

from .errors import NULL
from .execution import (
    call,
    current_frame,
    lookup_type_attr,
    register_default_lookaside,
    register_method_adapter,
    register_method_lookaside,
    register_native_adapter,
)
from .protocols import FAST_TYPES, _cmp_slot, _is_py, as_index, compare_op, stored_value, truth

__all__ = ["as_index", "as_str", "as_repr", "as_ascii", "formatted", "converting", "standing_in", "stood_for", "NATIVE_VALUE_TYPES"]

_OBJECT_STR = object.__dict__["__str__"]
_OBJECT_FORMAT = object.__dict__["__format__"]
_OBJECT_NE = object.__dict__["__ne__"]


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
    f = lookup_type_attr(t, "__interpreter_format__")
    if f is not NULL:  # a tool's own value formats itself for the program (a symbolic number: its text keeps how)
        return _checked(f(v, spec), str, "__format__ must return a str, not {}")
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


def _range_adapter(ctx, args, kwargs):
    """``range``'s arguments as indices, but for a number whose type asks to reach the lookaside as it is (a
    symbolic size, which the tracer may loop over without reading its value: Note [Loops over a symbolic range] in
    thunder.core.loops)."""
    return tuple(a if getattr(type(a), "__interpreter_range_argument__", False) else as_index(ctx, a) for a in args), kwargs


for _fn, _adapt in (
    (builtins.str, _one_argument(as_str)),
    (builtins.format, _format_adapter),
    (builtins.float, _one_argument(lambda ctx, v: _as_number(ctx, v, "__float__", float))),
    (builtins.int, _one_argument(lambda ctx, v: _as_number(ctx, v, "__int__", int))),
    (operator.index, _one_argument(as_index)),
    (builtins.hex, _one_argument(as_index)),
    (builtins.oct, _one_argument(as_index)),
    (builtins.bin, _one_argument(as_index)),
    (builtins.range, _range_adapter),
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


# -- stand-ins for C functions that call a value's dunders -------------------------------------------------------

# Note [Dunders called by C functions]
#     ``bytes(obj)``, ``itertools.islice(it, obj)``, ``hash(obj)``, ``abs``/``round``/``divmod``/``pow``/``complex``,
#     ``math.floor``, ``operator.add``/``lt``/``getitem``/..., ``max``/``min``/``sorted``/``sum``/``any``/``all`` of a
#     user's objects, ``lst.index(obj)``, ``d.get(obj)``, ``obj in a_set`` call the objects' dunders from C: run
#     natively, what a Python dunder read went unchecked (a cached trace kept its first answer) and what it did was
#     done on the first call only, as Note [Conversions interpreted] says of the conversions. So these functions get,
#     in place of such an argument (or of the items they iterate), a stand-in (``standing_in``): an object of a type
#     named as the value's, with the dunders the value's type has, each calling the value's as the program would (a
#     Python one interpreted, a C one natively), the stand-ins among its arguments replaced by their values. Where the
#     function returns what it was given (``max``, ``sorted``), the result is the value again (``sum`` is run in
#     Python instead: Note [sum of symbolic numbers] in thunder.core.introspection).
#     Not where a C function compares the argument with items it holds (``lst.index(obj)``, ``d.get(obj)``): an item's
#     ``__eq__`` would be given the stand-in (``isinstance(other, Key)`` fails); ``obj in a_set`` is looked up in
#     Python instead (``protocols.contains``), and so is ``seq.index(obj)``, whose native call is then given the item
#     found where it finds it by identity (``_found_index``).
#     Only where no argument is kept: a stand-in stored (``d[obj] = v``, ``d.setdefault(obj)``) would be seen later.
#     Values of a type with a builtin base (an ``int`` subclass: C reads the int without a dunder) and thunder's own
#     (``NATIVE_VALUE_TYPES``: proxies, whose dunders record ops) are given as they are.

_FORWARDED = (
    "__hash__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __bool__ __len__ __length_hint__ __index__ __int__ __float__ "
    "__complex__ __bytes__ __round__ __floor__ __ceil__ __trunc__ __abs__ __neg__ __pos__ __invert__ __contains__ "
    "__getitem__ __iter__ __str__ __repr__ __format__"
).split() + [
    f"__{p}{op}__"
    for op in "add sub mul matmul truediv floordiv mod divmod pow lshift rshift and xor or".split()
    for p in ("", "r", "i")
]

_READ_AS_NUMBERS = frozenset(("__hash__", "__len__", "__length_hint__", "__index__", "__int__", "__float__"))
#: Types whose values C functions get as they are (filled by the tracing layer: its proxies).
NATIVE_VALUE_TYPES: list[type] = []


class _StandIn:
    """A value as a C function sees it (Note [Dunders called by C functions])."""

    __slots__ = ("_ctx", "_v")

    def __init__(self, ctx, v):
        self._ctx, self._v = ctx, v


_STAND_IN_CTX = _StandIn.__dict__["_ctx"].__get__
_STAND_IN_VALUE = _StandIn.__dict__["_v"].__get__


def stood_for(v):
    """The value a stand-in stands for (Note [Dunders called by C functions]); any other value as it is."""
    return _STAND_IN_VALUE(v) if isinstance(v, _StandIn) else v


def _forwarding(name: str):
    def dunder(self, *args):
        v = _STAND_IN_VALUE(self)
        f = lookup_type_attr(type(v), name)
        args = tuple(map(stood_for, args))
        if f is _OBJECT_NE:  # inverts a Python ``__eq__``, called as the program would (``protocols._cmp_slot``)
            return _cmp_slot(_STAND_IN_CTX(self), f, v, *args, name)
        if not _is_py(f):
            return f.__get__(v, type(v))(*args)
        r = call(_STAND_IN_CTX(self), f.__get__(v, type(v)), args)
        tr = type(r)
        if name in _READ_AS_NUMBERS and tr is not int and tr is not float and isinstance(r, (int, float)):
            # C reads the number natively: asking its type lets a subclass see the read (thunder's SymInt records it)
            return tr.__index__(r) if isinstance(r, int) else tr.__float__(r)
        return r

    dunder.__name__ = name
    return dunder


_FORWARDING = {n: _forwarding(n) for n in _FORWARDED}
_standing_in_types: dict[type, type | None] = {}


def _standing_in_type(t: type) -> type | None:
    """The stand-in type for values of ``t``, or None where they are given as they are."""
    try:
        return _standing_in_types[t]
    except KeyError:
        pass
    st = None
    own = [lookup_type_attr(t, n) for n in _FORWARDED]
    heap = all(c is object or c.__flags__ & _HEAP_TYPE for c in t.__mro__)
    if heap and not issubclass(t, (_StandIn, *NATIVE_VALUE_TYPES)) and any(map(_is_py, own)):
        ns = {n: _FORWARDING[n] for n, f in zip(_FORWARDED, own) if f is not NULL}
        if own[0] is None:  # unhashable
            ns["__hash__"] = None
        st = type(t.__name__, (_StandIn,), {"__slots__": (), **ns})
    _standing_in_types[t] = st
    return st


_HEAP_TYPE = 1 << 9


def standing_in(ctx, v):
    """``v``, or its stand-in for a C function that calls its dunders (Note [Dunders called by C functions])."""
    t = type(v)
    if t in FAST_TYPES:
        return v
    st = _standing_in_type(t)
    return v if st is None else st(ctx, v)


def _standing_in_all(ctx, args, kwargs):
    return tuple(standing_in(ctx, a) for a in args), kwargs


def _standing_in_from(start: int, keyword: str | None = None):
    def adapt(ctx, args, kwargs):
        args = args[:start] + tuple(standing_in(ctx, a) for a in args[start:])
        if keyword is not None and kwargs and keyword in kwargs:
            kwargs = {**kwargs, keyword: standing_in(ctx, kwargs[keyword])}
        return args, kwargs

    return adapt


def _standing_in_items(ctx, args, kwargs):  # (the iterable adapted already: Note [Native callbacks])
    if len(args) == 1:
        return (map(functools.partial(standing_in, ctx), args[0]),), kwargs
    return args, kwargs


_OPERATORS = (
    "add sub mul matmul truediv floordiv mod pow lshift rshift and_ or_ xor iadd isub imul imatmul itruediv ifloordiv "
    "imod ipow ilshift irshift iand ior ixor lt le eq ne gt ge neg pos abs invert inv not_ truth contains getitem "
    "length_hint countOf indexOf concat"
)
for _fn in (
    builtins.bytes, builtins.bytearray, builtins.chr, builtins.hash, builtins.abs, builtins.round, builtins.divmod,
    builtins.pow, builtins.complex, math.floor, math.ceil, math.trunc, struct.pack,
    *(getattr(operator, n) for n in _OPERATORS.split()),
):  # fmt: skip
    register_native_adapter(_fn, _standing_in_all)
register_native_adapter(itertools.islice, _standing_in_from(1))
register_native_adapter(builtins.enumerate, _standing_in_from(1, "start"))
for _fn in (builtins.any, builtins.all, math.fsum, math.prod):
    register_native_adapter(_fn, _standing_in_items)


def _given_back(fn, items: bool = False):
    """``fn`` of stand-ins where no ``key`` is given, what it returns given back as the values (``max``, ``sorted``;
    ``sum`` is ``thunder.core.introspection._sum``'s, CPython's algorithm in Python)."""

    def lookaside(ctx, args, kwargs):
        if kwargs and kwargs.get("key") is not None:
            return fn(*args, **kwargs)
        args, _ = _standing_in_items(ctx, args, None) if len(args) == 1 else _standing_in_all(ctx, args, None)
        if kwargs and "reverse" in kwargs:  # (``sorted``'s)
            kwargs = {**kwargs, "reverse": standing_in(ctx, kwargs["reverse"])}
        r = fn(*args, **(kwargs or {}))
        return [stood_for(v) for v in r] if items else stood_for(r)

    return lookaside


for _fn, _items in ((builtins.max, False), (builtins.min, False), (builtins.sorted, True)):  # (sum: introspection._sum)
    register_default_lookaside(_fn)(_given_back(_fn, _items))


def _standing_in_first(ctx, receiver, args, kwargs):
    return (standing_in(ctx, args[0]), *args[1:]) if args else args, kwargs


# The position a list's ``pop``/``insert`` reads by ``__index__``. (Not ``list.count``/``remove``, ``tuple.count``,
# ``dict.get``/``pop``: they compare the items they hold with the argument, whose ``__eq__`` would see a stand-in and
# fail its ``isinstance`` check.)
for _name in ("pop", "insert"):
    register_method_adapter(list, _name, _standing_in_first)


def _found_index(ctx, receiver, args, kwargs):
    """``seq.index(x[, start[, stop]])`` where ``x`` or an item has a Python ``__eq__``: the search made here, each
    ``item == x`` called as the program would (``protocols.contains``), and the native call given the item found
    and its position, which it finds by identity without comparing (or an empty range: eager's ValueError)."""
    if not args or len(args) > 3 or kwargs:
        return args, kwargs
    x = args[0]
    if type(x) in FAST_TYPES and all(type(v) in FAST_TYPES for v in receiver):
        return args, kwargs
    start, stop = (as_index(ctx, a) for a in (*args[1:], 0, sys.maxsize)[:2])
    n = len(receiver)
    start, stop = (max(i + n, 0) if i < 0 else min(i, n) for i in (start, stop))
    items = tuple(receiver)
    for i in range(start, stop):
        v = items[i]
        if v is x or truth(ctx, compare_op(ctx, "==", v, x)):
            return (v, i, i + 1), None
    return (x, 0, 0), None


for _tp in (list, tuple):
    register_method_adapter(_tp, "index", _found_index)


def _dict_get(ctx, d, args, kwargs):  # ``d.get(obj)``: Note [Lookups in sets and dicts] in ``protocols``
    if kwargs or not 1 <= len(args) <= 2:
        return d.get(*args, **(kwargs or {}))
    return stored_value(ctx, d, args[0], lambda key: args[1] if len(args) == 2 else None)


register_method_lookaside(dict, "get", _dict_get)
