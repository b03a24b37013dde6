"""Implicit protocol calls: truth value, operators, iteration, subscripts, attributes, instantiation.

Layer: ``thunder.core.interpreter``. Imports: the standard library, ``errors``, ``execution``.

Note [Implicit calls]
    CPython calls dunders implicitly (``a + b`` calls ``__add__``). The interpreter *interprets* such a call
    (entering it through ``execution.call``, so the lookaside is asked for it) when the dunder found on the
    type is a Python function, for these protocols:
      - instantiation: ``__new__`` and ``__init__`` (``type.__call__`` emulated, also when called explicitly, as a
        metaclass ``__call__`` does with ``super().__call__``) and a metaclass ``__call__``;
      - callable objects: ``__call__``;
      - truth value (conditional jumps, ``not``): ``__bool__``, then ``__len__``;
      - unary and binary operators, in-place operators, rich comparisons (CPython's dispatch order, including
        reflected operands and the subclass rule, and ``!=`` falling back to an inverted ``__eq__``);
      - ``__getitem__``, ``__setitem__``, ``__delitem__``, ``__contains__``, ``__len__`` (GET_LEN);
      - iteration: ``__iter__`` (GET_ITER), ``__next__`` (FOR_ITER), ``__getitem__`` of a sequence without
        ``__iter__``;
      - ``with``: ``__enter__`` and ``__exit__``;
      - attribute loads through a Python ``__getattribute__`` (a class's own, which reaches ``object``'s by
        ``super().__getattribute__``: Note [Reads through a Python __getattribute__]) or that hit a ``property``
        whose getter is a Python function (when the type does not override ``__getattribute__``, or at
        ``object.__getattribute__`` reached from one; on a class: its metaclass's property), with ``__getattr__``
        as fallback on AttributeError.
    Everything else runs natively (through ``operator``/builtins), e.g. ``object.__getattribute__``/``__getattr__``
    for plain loads, ``__setattr__``, other descriptors' ``__get__``/``__set__``, ``__hash__`` and ``__eq__``
    called by dicts and sets, ``__init_subclass__``/``__set_name__`` (called by ``type.__new__``), and any dunder
    called by a C function, except the conversions of Note [Conversions interpreted] in ``conversions``
    (``__str__``/``__repr__``/``__format__`` of f-strings and ``str()``, ``__float__``, ``__int__``, ``__index__``).
    Builtin types take a fast native path without looking anything up.
"""

from __future__ import annotations

import collections
import operator
import types
from types import FunctionType, MethodType

from .errors import NULL
from .execution import call, call_back, lookup_type_attr

__all__ = [
    "truth",
    "as_index",
    "binary_op",
    "unary_op",
    "compare_op",
    "get_iter",
    "iter_next",
    "reverse",
    "getitem",
    "index",
    "setitem",
    "delitem",
    "contains",
    "load_attr",
    "generic_load_attr",
    "getattribute_load",
    "property_store",
    "interpreted_getter",
    "instantiate",
    "type_call",
    "FAST_TYPES",
    "TypeSet",
    "abc_subclass",
]


class TypeSet(frozenset):
    """A set of types whose ``in`` says False for a type that cannot be hashed (a class whose metaclass defines
    ``__eq__`` without ``__hash__``), which no such set holds: frozenset's raised ``TypeError: unhashable type``
    where eager runs the program."""

    __slots__ = ()

    def __contains__(self, t, _contains=frozenset.__contains__) -> bool:
        try:
            return _contains(self, t)
        except TypeError:
            return False


def abc_subclass(t: type, abc: type) -> bool:
    """``issubclass(t, abc)`` for an abstract base class ``abc``, also where ``t`` cannot be hashed (as ``TypeSet``),
    which the ABC's caches raise for: then only its bases or the ABC's structural hook (``Iterator``'s ``__next__``)
    make it one (registering it would have hashed it)."""
    try:
        return issubclass(t, abc)
    except TypeError:
        hook = abc.__subclasshook__(t)
        return hook is True or (hook is NotImplemented and any(c is abc for c in t.__mro__))


#: Types whose dunders are all C: operations on them go straight to the native operator.
FAST_TYPES = TypeSet(
    (
        int,
        float,
        complex,
        bool,
        str,
        bytes,
        bytearray,
        list,
        tuple,
        dict,
        set,
        frozenset,
        type(None),
        slice,
        range,
        type(Ellipsis),
        type(NotImplemented),
        types.ModuleType,
        types.FunctionType,
        types.BuiltinFunctionType,
        types.MethodType,
        types.CodeType,
        memoryview,
    )
)

_FUNC = FunctionType


def _is_py(f) -> bool:
    return type(f) is _FUNC


# -- truth value --------------------------------------------------------------------------------------------


def truth(ctx, v) -> bool:
    t = type(v)
    if t is bool:
        return v
    if t in FAST_TYPES:
        return bool(v)
    f = lookup_type_attr(t, "__bool__")
    if _is_py(f):
        r = call(ctx, f, (v,))
        if type(r) is not bool:
            raise TypeError(f"__bool__ should return bool, returned {type(r).__name__}")
        return r
    if f is NULL:
        ln = lookup_type_attr(t, "__len__")
        if _is_py(ln):
            return _check_len(call(ctx, ln, (v,))) != 0
    return bool(v)


def _check_len(r):
    n = operator.index(r)
    if n < 0:
        raise ValueError("__len__() should return >= 0")
    return n


def length(ctx, v) -> int:
    t = type(v)
    if t not in FAST_TYPES:
        ln = lookup_type_attr(t, "__len__")
        if _is_py(ln):
            return _check_len(call(ctx, ln, (v,)))
    return len(v)


# -- operators -----------------------------------------------------------------------------------------------

#: symbol -> (native op, dunder, reflected dunder)
BINARY_OPS = {
    "+": (operator.add, "__add__", "__radd__"),
    "&": (operator.and_, "__and__", "__rand__"),
    "//": (operator.floordiv, "__floordiv__", "__rfloordiv__"),
    "<<": (operator.lshift, "__lshift__", "__rlshift__"),
    "@": (operator.matmul, "__matmul__", "__rmatmul__"),
    "*": (operator.mul, "__mul__", "__rmul__"),
    "%": (operator.mod, "__mod__", "__rmod__"),
    "|": (operator.or_, "__or__", "__ror__"),
    "**": (operator.pow, "__pow__", "__rpow__"),
    ">>": (operator.rshift, "__rshift__", "__rrshift__"),
    "-": (operator.sub, "__sub__", "__rsub__"),
    "/": (operator.truediv, "__truediv__", "__rtruediv__"),
    "^": (operator.xor, "__xor__", "__rxor__"),
}

#: in-place symbol -> (native op, in-place dunder, binary symbol)
INPLACE_OPS = {
    "+=": (operator.iadd, "__iadd__", "+"),
    "&=": (operator.iand, "__iand__", "&"),
    "//=": (operator.ifloordiv, "__ifloordiv__", "//"),
    "<<=": (operator.ilshift, "__ilshift__", "<<"),
    "@=": (operator.imatmul, "__imatmul__", "@"),
    "*=": (operator.imul, "__imul__", "*"),
    "%=": (operator.imod, "__imod__", "%"),
    "|=": (operator.ior, "__ior__", "|"),
    "**=": (operator.ipow, "__ipow__", "**"),
    ">>=": (operator.irshift, "__irshift__", ">>"),
    "-=": (operator.isub, "__isub__", "-"),
    "/=": (operator.itruediv, "__itruediv__", "/"),
    "^=": (operator.ixor, "__ixor__", "^"),
}


def _call_slot(ctx, f, a, b):
    if _is_py(f):
        return call(ctx, f, (a, b))
    if f is None:
        return NotImplemented
    get = getattr(type(f), "__get__", None)
    if get is not None and a is not None:  # bound to None, a slot wrapper stays unbound (``None != x``)
        return get(f, a, type(a))(b)
    return f(a, b)


# Builtin types whose ``__mul__``/``__add__`` are sequence slots (repeat, concat), not number slots.
_SEQUENCE_SLOT_TYPES = TypeSet({list, tuple, str, bytes, bytearray, collections.deque})


_PLAIN_NUMBERS = TypeSet((int, float, complex, bool))


def _binary_dispatch(ctx, a, b, name, rname):
    """CPython's binary operator dispatch; returns NotImplemented when no operand handles it."""
    ta = type(a)
    tb = type(b)
    fa = lookup_type_attr(ta, name)
    fb = lookup_type_attr(tb, rname) if tb is not ta else NULL
    if fb is not NULL and ta in _PLAIN_NUMBERS and getattr(tb, "__interpreter_reflected_first__", False):
        # A number type that asks for its reflected method before a plain number's native slot, which would read
        # its value (a symbolic number: Note [math functions of symbolic numbers] in thunder.core.symbolic). Only
        # before the builtin numbers' slots: another left operand (a numpy float) keeps its own result type.
        r = _call_slot(ctx, fb, b, a)
        if r is not NotImplemented:
            return r
        fb = NULL
    if fb is not NULL and ta in _SEQUENCE_SLOT_TYPES and name in ("__mul__", "__add__"):
        # CPython tries the number protocol before a sequence's repeat/concat: ``[0] * n`` asks ``n`` first.
        r = _call_slot(ctx, fb, b, a)
        if r is not NotImplemented:
            return r
        fb = NULL
    if fb is not NULL and issubclass(tb, ta) and fb is not lookup_type_attr(ta, rname):
        r = _call_slot(ctx, fb, b, a)
        if r is not NotImplemented:
            return r
        fb = NULL
    if fa is not NULL:
        r = _call_slot(ctx, fa, a, b)
        if r is not NotImplemented:
            return r
    if fb is not NULL:
        r = _call_slot(ctx, fb, b, a)
        if r is not NotImplemented:
            return r
    return NotImplemented


def _has_py_dunder(t, *names) -> bool:
    for n in names:
        if _is_py(lookup_type_attr(t, n)):
            return True
    return False


def binary_op(ctx, sym: str, a, b):
    ta = type(a)
    tb = type(b)
    if ta in _SEQUENCE_SLOT_TYPES or tb in _SEQUENCE_SLOT_TYPES:
        a, b = _converted_operands(ctx, sym, a, b)
        ta, tb = type(a), type(b)
    entry = BINARY_OPS.get(sym)
    if entry is not None:
        native, name, rname = entry
        if (ta in FAST_TYPES and tb in FAST_TYPES) or not (
            _has_py_dunder(ta, name, rname) or _has_py_dunder(tb, name, rname)
        ):
            return native(a, b)
        r = _binary_dispatch(ctx, a, b, name, rname)
        if r is NotImplemented:
            raise TypeError(f"unsupported operand type(s) for {sym}: '{ta.__name__}' and '{tb.__name__}'")
        return r
    native, iname, bsym = INPLACE_OPS[sym]
    _, name, rname = BINARY_OPS[bsym]
    if (ta in FAST_TYPES and tb in FAST_TYPES) or not (
        _has_py_dunder(ta, iname, name, rname) or _has_py_dunder(tb, name, rname)
    ):
        return native(a, b)
    fi = lookup_type_attr(ta, iname)
    if fi is not NULL:
        r = _call_slot(ctx, fi, a, b)
        if r is not NotImplemented:
            return r
    r = _binary_dispatch(ctx, a, b, name, rname)
    if r is NotImplemented:
        raise TypeError(f"unsupported operand type(s) for {sym}: '{ta.__name__}' and '{tb.__name__}'")
    return r


def _converted_operands(ctx, sym: str, a, b):
    """``str % obj``, ``seq * obj`` and ``lst += obj``: what C would read of ``obj`` by its Python dunders (``__str__``,
    ``__index__``, ``__iter__``, ...) read as the program would (Note [Conversions interpreted] in ``conversions``,
    Note [Native callbacks] in ``natives``)."""
    if sym in ("%", "%=") and type(a) is str and not _has_py_dunder(type(b), "__rmod__"):
        from .conversions import percent_operand  # (conversions imports this module)

        return a, percent_operand(ctx, b)
    if sym == "+=" and type(a) is list and type(b) not in FAST_TYPES:  # ``list.__iadd__`` iterates ``b`` natively
        from .natives import interpreted_iterable  # (natives imports this module)

        return a, interpreted_iterable(ctx, b, hint=True)
    if sym in ("*", "*="):
        if type(a) in _SEQUENCE_SLOT_TYPES and _reads_index(b, "__rmul__"):
            return a, as_index(ctx, b)
        if type(b) in _SEQUENCE_SLOT_TYPES and _reads_index(a, "__mul__"):
            return as_index(ctx, a), b
    return a, b


def _reads_index(v, name: str) -> bool:
    t = type(v)
    return t not in FAST_TYPES and not _has_py_dunder(t, name) and _is_py(lookup_type_attr(t, "__index__"))


UNARY_OPS = {
    "UNARY_NEGATIVE": (operator.neg, "__neg__"),
    "UNARY_POSITIVE": (operator.pos, "__pos__"),
    "UNARY_INVERT": (operator.invert, "__invert__"),
}


def unary_op(ctx, opname: str, v):
    native, name = UNARY_OPS[opname]
    t = type(v)
    if t not in FAST_TYPES:
        f = lookup_type_attr(t, name)
        if _is_py(f):
            return call(ctx, f, (v,))
    return native(v)


#: comparison -> (native op, dunder, reflected dunder)
COMPARE_OPS = {
    "<": (operator.lt, "__lt__", "__gt__"),
    "<=": (operator.le, "__le__", "__ge__"),
    "==": (operator.eq, "__eq__", "__eq__"),
    "!=": (operator.ne, "__ne__", "__ne__"),
    ">": (operator.gt, "__gt__", "__lt__"),
    ">=": (operator.ge, "__ge__", "__le__"),
}

_object_ne = object.__ne__


def _cmp_slot(ctx, f, a, b, name):
    if f is _object_ne and name == "__ne__":
        # object.__ne__ inverts __eq__ unless it is NotImplemented; interpret a Python __eq__.
        eq = lookup_type_attr(type(a), "__eq__")
        if _is_py(eq):
            r = call(ctx, eq, (a, b))
            if r is NotImplemented:
                return r
            return not truth(ctx, r)
    return _call_slot(ctx, f, a, b)


def compare_op(ctx, sym: str, a, b):
    native, name, rname = COMPARE_OPS[sym]
    ta = type(a)
    tb = type(b)
    if (ta in FAST_TYPES and tb in FAST_TYPES) or not (
        _has_py_dunder(ta, name, rname, "__eq__") or _has_py_dunder(tb, name, rname, "__eq__")
    ):
        return native(a, b)
    fa = lookup_type_attr(ta, name)
    fb = lookup_type_attr(tb, rname)
    checked_reflected = False
    if tb is not ta and issubclass(tb, ta) and fb is not NULL:
        checked_reflected = True
        r = _cmp_slot(ctx, fb, b, a, rname)
        if r is not NotImplemented:
            return r
    if fa is not NULL:
        r = _cmp_slot(ctx, fa, a, b, name)
        if r is not NotImplemented:
            return r
    if not checked_reflected and fb is not NULL:
        r = _cmp_slot(ctx, fb, b, a, rname)
        if r is not NotImplemented:
            return r
    if sym == "==":
        return a is b
    if sym == "!=":
        return a is not b
    raise TypeError(f"'{sym}' not supported between instances of '{ta.__name__}' and '{tb.__name__}'")


# -- containers ----------------------------------------------------------------------------------------------


def as_index(ctx, v):
    """``operator.index(v)``, a Python ``__index__`` called as the program would (Note [Conversions interpreted] in
    ``conversions``)."""
    t = type(v)
    f = NULL if t in FAST_TYPES else lookup_type_attr(t, "__index__")
    if not _is_py(f):
        return operator.index(v)
    r = call(ctx, f.__get__(v, t), ())
    if not isinstance(r, int):
        raise TypeError(f"__index__ returned non-int (type {type(r).__name__})")
    return r if type(r) is int else type(r).__index__(r)  # CPython's plain int (thunder's SymInt records the read)


def _index(ctx, k):
    """An index as a builtin container reads it: CPython takes the value of an int subclass without
    calling ``__index__``; asking it lets the subclass see the read (thunder's SymInt records it). Another
    object's Python ``__index__`` is called as the program would; a slice's bounds are read alike."""
    tk = type(k)
    if tk is int or tk is bool:
        return k
    if isinstance(k, int):
        return tk.__index__(k)
    if tk is slice:
        bounds = (k.start, k.stop, k.step)
        if all(v is None or type(v) is int for v in bounds):
            return k
        return slice(*(_index(ctx, v) if v is not None else None for v in bounds))
    return as_index(ctx, k) if _is_py(lookup_type_attr(tk, "__index__")) else k


#: builtin containers that read a key by ``__index__`` (a dict hashes it)
_INDEXED_TYPES = TypeSet((list, tuple, str, bytes, bytearray, range, memoryview, collections.deque))


def index(ctx, k):
    """``k`` read as an index where its ``__index__`` is a Python function (``as_index``: what it reads is traced);
    anything else as it is (the caller's native operation reads it)."""
    return as_index(ctx, k) if _is_py(lookup_type_attr(type(k), "__index__")) else k


def getitem(ctx, c, k):
    t = type(c)
    if t not in FAST_TYPES:
        f = lookup_type_attr(t, "__getitem__")
        if _is_py(f):
            return call(ctx, f, (c, k))
        if f is _DICT_GETITEM and not dict.__contains__(c, k):
            return _missing(ctx, c, k)
        if f is NULL and isinstance(c, type):  # ``C[k]``: C's ``__class_getitem__`` (a classmethod), interpreted
            g = lookup_type_attr(c, "__class_getitem__")
            if type(g) is classmethod and _is_py(g.__func__):
                return call(ctx, g.__func__, (c, k))
        return c[k]
    if t is dict and type(k) not in FAST_TYPES:  # Note [Lookups in sets and dicts]
        return stored_value(ctx, c, k, _key_error)
    return c[_index(ctx, k)] if t in _INDEXED_TYPES else c[k]


_DICT_GETITEM = dict.__dict__["__getitem__"]
_DEFAULTDICT_MISSING = collections.defaultdict.__dict__["__missing__"]


def _missing(ctx, c: dict, k):
    """``c[k]`` of a dict subclass without the key: dict's C ``__getitem__`` would call ``__missing__`` natively,
    and ``defaultdict``'s calls ``default_factory`` natively; both are called for the program instead."""
    m = lookup_type_attr(type(c), "__missing__")
    if m is _DEFAULTDICT_MISSING and c.default_factory is not None:
        value = call(ctx, c.default_factory, ())
        setitem(ctx, c, k, value)
        return value
    if _is_py(m):
        return call(ctx, m, (c, k))
    return c[k]


def setitem(ctx, c, k, v) -> None:
    t = type(c)
    if t not in FAST_TYPES:
        f = lookup_type_attr(t, "__setitem__")
        if _is_py(f):
            call(ctx, f, (c, k, v))
            return
        c[k] = v
        return
    c[_index(ctx, k) if t in _INDEXED_TYPES else k] = v


def delitem(ctx, c, k) -> None:
    t = type(c)
    if t not in FAST_TYPES:
        f = lookup_type_attr(t, "__delitem__")
        if _is_py(f):
            call(ctx, f, (c, k))
            return
    del c[k]


def contains(ctx, container, item) -> bool:
    t = type(container)
    if t not in FAST_TYPES:
        f = lookup_type_attr(t, "__contains__")
        if _is_py(f):
            return truth(ctx, call(ctx, f, (container, item)))
    if t in _COMPARING_SEQUENCES and (type(item) not in FAST_TYPES or any(type(v) not in FAST_TYPES for v in container)):
        # CPython's search: identity, then ``element == item``, whose Python ``__eq__`` is called as the program
        # would (natively, what it reads would go unchecked: Note [Native callbacks])
        return any(v is item or truth(ctx, compare_op(ctx, "==", v, item)) for v in tuple(container))
    if t in _HASHING_CONTAINERS and type(item) not in FAST_TYPES:
        return stored_key(ctx, container, item) is not NULL
    return item in container


# Note [Lookups in sets and dicts]
# ``obj in a_set``, ``d[obj]``, ``d.get(obj)`` call ``obj``'s ``__hash__`` and, for each key stored with that hash,
# ``key == obj`` from C: run natively, what they read went unchecked and what they did was done once, while tracing.
# So the lookup is made here, as CPython makes it: the item's hash (its Python ``__hash__`` interpreted, through its
# stand-in: Note [Dunders called by C functions] in ``conversions``), then, for each key stored with that hash, in
# the order CPython meets them, ``key is obj`` or ``key == obj`` called as the program would (the key's ``__eq__``
# given the item itself, as CPython gives it: a stand-in would fail its ``isinstance`` check). The keys stored with
# that hash are found without reading their hashes (CPython keeps them stored; calling a key's Python ``__hash__``
# again was a call eager does not make): a native lookup of a ``_Probe`` that has the item's hash and records each
# key the lookup compares it with. Where a key's type has a Python ``__eq__``, C would call it with the probe first,
# so there the keys' hashes are read by ``hash(key)`` natively (calls eager does not make). ``d[obj]`` and
# ``d.get(obj)`` then read the value of the key found (``stored_value``).
class _Probe:
    """A lookup key with a given hash that records each key it is compared with and equals only ``match``."""

    __slots__ = ("hash", "seen", "match")

    def __init__(self, h: int, match=NULL):
        self.hash, self.seen, self.match = h, [], match

    def __hash__(self):
        return self.hash

    def __eq__(self, other):
        self.seen.append(other)
        return other is self.match


def _key_error(key):
    raise KeyError(key)


def stored_key(ctx, container, item):
    """The key of the set or dict ``container`` that ``item`` finds, or NULL (Note [Lookups in sets and dicts])."""
    return _lookup(ctx, container, item)[0]


def _keys_compare_in_python(container) -> bool:
    return any(_is_py(lookup_type_attr(tk, "__eq__")) for tk in {type(k) for k in container})


def _lookup(ctx, container, item):
    """``(key found or NULL, the item's hash)``."""
    from .conversions import standing_in  # (conversions imports this module)

    h = hash(standing_in(ctx, item))
    if _keys_compare_in_python(container):
        candidates = [k for k in tuple(container) if hash(k) == h]
    else:
        probe = _Probe(h)
        probe in container  # noqa: B015 (records the keys stored with hash ``h``)
        candidates = probe.seen
    for k in candidates:
        if k is item or truth(ctx, compare_op(ctx, "==", k, item)):
            return k, h
    return NULL, h


def stored_value(ctx, d: dict, key, missing):
    """``d[key]`` as the program's lookup finds it, ``missing(key)`` where it finds none (Note [Lookups in sets and
    dicts])."""
    from .conversions import NATIVE_VALUE_TYPES  # (conversions imports this module)

    tk = type(key)
    if tk in FAST_TYPES or issubclass(tk, tuple(NATIVE_VALUE_TYPES)) or not _has_py_dunder(tk, "__eq__", "__hash__"):
        v = dict.get(d, key, NULL)  # (the item's dunders are C's or thunder's own)
        return missing(key) if v is NULL else v
    k, h = _lookup(ctx, d, key)
    if k is NULL:
        return missing(key)
    if not _keys_compare_in_python(d):
        return d[_Probe(h, k)]
    return next(v for s, v in dict.items(d) if s is k)  # (``d[k]`` would hash ``k`` again)


_HASHING_CONTAINERS = (set, frozenset, dict)


_COMPARING_SEQUENCES = (list, tuple, collections.deque)


# -- iteration -----------------------------------------------------------------------------------------------

_NATIVE_ITERATORS = TypeSet(
    {type(iter(x))
     for x in ([], (), {}, set(), "", b"", range(1), {}.keys(), {}.values(), {}.items(), zip(), enumerate(()))}
    | {types.GeneratorType, map, filter, zip, enumerate, reversed}
)  # fmt: skip


def get_iter(ctx, v):
    t = type(v)
    if t not in FAST_TYPES and t not in _NATIVE_ITERATORS:
        f = lookup_type_attr(t, "__iter__")
        if _is_py(f):
            it = call(ctx, f, (v,))
            if lookup_type_attr(type(it), "__next__") is NULL:
                raise TypeError(f"iter() returned non-iterator of type '{type(it).__name__}'")
            return it
        if f is NULL:
            getitem_fn = lookup_type_attr(t, "__getitem__")
            if _is_py(getitem_fn):
                return _sequence_iterator(ctx, v, getitem_fn)
    return iter(v)


def _sequence_iterator(ctx, seq, getitem_fn):
    """CPython's iterator over an object with ``__getitem__`` and no ``__iter__`` (``seq[0]``, ``seq[1]``, ...
    until IndexError or StopIteration), each ``__getitem__`` interpreted."""
    i = 0
    while True:
        try:
            value = call_back(ctx, getitem_fn, (seq, i))
        except (IndexError, StopIteration):
            return
        yield value
        i += 1


def reverse(ctx, v):
    """``reversed(v)``: a Python ``__reversed__`` interpreted; for a sequence whose ``__len__`` or ``__getitem__``
    is Python code, CPython's reversed iterator with both interpreted (natively, the length a ``__len__`` returns
    would be read without the callbacks seeing it, and a length that depends on the input went unchecked)."""
    t = type(v)
    if t not in FAST_TYPES and t not in _NATIVE_ITERATORS:
        f = lookup_type_attr(t, "__reversed__")
        if _is_py(f):
            return call(ctx, f, (v,))
        getitem_fn = lookup_type_attr(t, "__getitem__")
        if f is NULL and (_is_py(getitem_fn) or _is_py(lookup_type_attr(t, "__len__"))) and not isinstance(v, dict):
            indices = call(ctx, range, (call(ctx, len, (v,)),))  # the callbacks see the length
            return _reversed_sequence(ctx, v, getitem_fn, indices)
    return reversed(v)


def _reversed_sequence(ctx, seq, getitem_fn, indices):
    """CPython's reversed iterator over a sequence (``seq[n - 1]`` ... ``seq[0]``, stopping at IndexError or
    StopIteration), each ``__getitem__`` called as the program would."""
    for i in reversed(indices):
        try:
            value = call_back(ctx, getitem_fn, (seq, i))
        except (IndexError, StopIteration):
            return
        yield value


def iter_next(ctx, it):
    """``next(it)``; raises StopIteration when exhausted."""
    t = type(it)
    if t not in _NATIVE_ITERATORS:
        f = lookup_type_attr(t, "__next__")
        if _is_py(f):
            return call(ctx, f, (it,))
    return next(it)


# -- attributes ----------------------------------------------------------------------------------------------

_object_getattribute = object.__getattribute__


_type_getattribute = type.__getattribute__


# Note [Reads through a Python __getattribute__]
# A class's own ``__getattribute__`` (transformers' configs map names and refuse per-layer ones while a heterogeneity
# spec is in the instance dict) computes ``obj.name`` from other attributes, which the program may change before the
# read (a per-layer config pops the spec from its copy's ``__dict__``). Run natively, the read was checked as a whole
# (``getattr(obj, name)``) by the prologue, before the program's changes: it raised, or answered otherwise. So it is
# interpreted, and what it reads is checked where it reaches ``object.__getattribute__`` (``super().__getattribute__``):
# the leaf, read by the prologue as ``object.__getattribute__(obj, name)`` (``generic_load_attr`` here, the tracer's
# ``_raw_getattr``).
def getattribute_load(obj):
    """The Python ``__getattribute__`` of ``obj``'s type, which ``load_attr`` interprets; else None."""
    t = type(obj)
    if t in FAST_TYPES or t is type:
        return None
    f = lookup_type_attr(t, "__getattribute__")
    return f if _is_py(f) else None


def generic_load_attr(ctx, obj, name: str):
    """``object.__getattribute__(obj, name)``, a Python property's getter or descriptor's ``__get__`` interpreted."""
    found = interpreted_getter(obj, name, raw=True)
    if found is not None:
        return call(ctx, *found)
    return _object_getattribute(obj, name)


def interpreted_getter(obj, name: str, raw: bool = False) -> tuple | None:
    """``(function, args)`` of what ``obj.name`` runs that ``load_attr`` interprets: the type's Python
    ``__getattribute__`` (not with ``raw``: the one ``object.__getattribute__`` reads), else the Python getter of a
    ``property`` (where the type's ``__getattribute__`` is ``object``'s or ``type``'s; a metaclass property, like an
    instance's, takes precedence over the class's own attributes), else the Python ``__get__`` of a data descriptor
    that is not a property (where it is ``object``'s: natively, what it did besides returning, a log, a counter, was
    not seen); None for a native read. Two lookups on the MRO: an attribute read asks this twice, here and in the
    tracer's callback."""
    t = type(obj)
    if t in FAST_TYPES or t is type:
        return None
    ga = lookup_type_attr(t, "__getattribute__")
    if not raw and _is_py(ga):
        return ga, (obj, name)
    attr = lookup_type_attr(t, name)
    if attr is NULL:
        return None
    dt = type(attr)
    if dt is property:
        f = attr.fget
        if _is_py(f) and (raw or ga is _object_getattribute or ga is _type_getattribute):
            return f, (obj,)
        return None
    if not (raw or ga is _object_getattribute):
        return None
    get = lookup_type_attr(dt, "__get__")
    if not _is_py(get) or (lookup_type_attr(dt, "__set__") is NULL and lookup_type_attr(dt, "__delete__") is NULL):
        return None
    return get, (attr, obj, t)


def load_attr(ctx, obj, name: str):
    found = interpreted_getter(obj, name)  # Note [Reads through a Python __getattribute__]
    if found is None:
        return getattr(obj, name)
    getter, args = found
    getattr_fallback = lookup_type_attr(type(obj), "__getattr__")
    if getattr_fallback is NULL:
        return call(ctx, getter, args)
    failed = False
    try:
        return call(ctx, getter, args)
    except AttributeError:
        failed = True
    if failed:
        if _is_py(getattr_fallback):
            return call(ctx, getattr_fallback, (obj, name))
        return getattr_fallback(obj, name)


def property_store(obj, name: str, deleting: bool):
    """The Python setter (or deleter) that ``obj.name = v`` (``del obj.name``) runs, where it is a ``property``'s and
    the type's ``__setattr__``/``__delattr__`` is ``object``'s: interpreted, so that the stores it makes are seen as
    the program's own (run natively, they were not); else None."""
    t = type(obj)
    if t in FAST_TYPES or isinstance(obj, type):
        return None
    attr = lookup_type_attr(t, name)
    if type(attr) is not property:
        return None
    f = attr.fdel if deleting else attr.fset
    slot = lookup_type_attr(t, "__delattr__" if deleting else "__setattr__")
    if not _is_py(f) or slot is not (object.__delattr__ if deleting else object.__setattr__):
        return None
    return f


def bound_special(obj, f):
    """``f`` (found on ``type(obj)``) bound to ``obj``."""
    if _is_py(f):
        return MethodType(f, obj)
    get = getattr(type(f), "__get__", None)
    if get is not None:
        return get(f, obj, type(obj))
    return f


# -- instantiation -------------------------------------------------------------------------------------------

_type_call = type.__call__
_object_new = object.__new__


def instantiate(ctx, cls: type, args: tuple, kwargs: dict | None):
    """``cls(*args, **kwargs)``, interpreting a Python metaclass ``__call__``, ``__new__`` and ``__init__``."""
    meta = type(cls)
    if meta is not type:
        mcall = lookup_type_attr(meta, "__call__")
        if mcall is not _type_call:
            if _is_py(mcall):
                return call(ctx, mcall, (cls, *args), kwargs)
            return cls(*args, **kwargs) if kwargs else cls(*args)
    return type_call(ctx, cls, args, kwargs)


# Note [Classes made by the program]
# ``type.__new__`` makes a class natively, and from C it calls the ``__init_subclass__`` its bases define, so that
# Python function ran natively: what it did to outside state (a registry of subclasses) was made once, while tracing,
# and never replayed. So where a base defines one (other than ``object``'s), the class is made with it set aside
# (each defining base's entry in its ``__dict__`` is a no-op for that moment) and then called under the interpreter,
# as ``super(cls, cls).__init_subclass__(**kwargs)``, which is the call ``type.__new__`` makes. A class with no such
# base is made natively, as before. (``__set_name__`` of the namespace's objects is still called natively. Another
# thread that makes a subclass of such a base in that moment would skip its ``__init_subclass__``.)
_type_new = type.__new__


@classmethod
def _init_subclass_set_aside(cls, **kwargs):
    pass


def new_class(ctx, args: tuple, kwargs: dict | None):
    """``type.__new__(meta, name, bases, namespace, **kwargs)`` (``args``: those four) with the bases'
    ``__init_subclass__`` interpreted (Note [Classes made by the program])."""
    kwargs = kwargs or {}
    bases = args[2] if len(args) == 4 and type(args[2]) is tuple else ()
    definers = {
        k: k.__dict__["__init_subclass__"]
        for b in bases
        if isinstance(b, type)
        for k in b.__mro__
        if k is not object and "__init_subclass__" in k.__dict__
    }
    if not definers:
        return _type_new(*args, **kwargs)
    try:
        for k in definers:
            type.__setattr__(k, "__init_subclass__", _init_subclass_set_aside)
        cls = _type_new(*args, **kwargs)
    finally:
        for k, original in definers.items():
            type.__setattr__(k, "__init_subclass__", original)
    if ctx.cb_made_object is not None:  # the program's own class before its ``__init_subclass__`` sets attributes
        ctx.cb_made_object(cls)
    call(ctx, super(cls, cls).__init_subclass__, (), kwargs)
    return cls


def type_call(ctx, cls: type, args: tuple, kwargs: dict | None):
    """``type.__call__(cls, *args, **kwargs)`` (what a metaclass ``__call__`` reaches with ``super().__call__``),
    interpreting Python ``__new__`` and ``__init__``."""
    if cls is type:
        if len(args) == 3:  # ``type(name, bases, ns)`` makes a class
            made = new_class(ctx, (type, *args), kwargs)
            if ctx.cb_made_object is not None:
                ctx.cb_made_object(made)
            return made
        return type(*args, **kwargs) if kwargs else type(*args)
    new = lookup_type_attr(cls, "__new__")
    init = lookup_type_attr(cls, "__init__")
    py_new = type(new) is staticmethod and _is_py(new.__func__)
    if new is _type_new and not _is_py(init) and issubclass(cls, type):  # a metaclass without Python methods
        obj = new_class(ctx, (cls, *args), kwargs)
        type.__init__(obj, *args, **(kwargs or {}))
        if ctx.cb_made_object is not None:
            ctx.cb_made_object(obj)
        return obj
    if not py_new and not _is_py(init):
        if ctx.log is not None:
            ctx.log_opaque(cls)
        obj = _type_call(cls, *args, **kwargs) if kwargs else _type_call(cls, *args)
        if ctx.cb_made_object is not None:
            ctx.cb_made_object(obj)
        return obj
    if py_new:
        obj = call(ctx, new.__func__, (cls, *args), kwargs)
    elif new is _type_new and issubclass(cls, type):
        obj = new_class(ctx, (cls, *args), kwargs)
    else:
        new_fn = cls.__new__
        obj = new_fn(cls, *args, **kwargs) if kwargs else new_fn(cls, *args)
    if not isinstance(obj, cls):
        return obj
    init = lookup_type_attr(type(obj), "__init__")
    if _is_py(init):
        r = call(ctx, init, (obj, *args), kwargs)
    else:
        bound = bound_special(obj, init)
        r = bound(*args, **kwargs) if kwargs else bound(*args)
    if r is not None:
        raise TypeError(f"__init__() should return None, not '{type(r).__name__}'")
    if ctx.cb_made_object is not None:
        ctx.cb_made_object(obj)
    return obj
