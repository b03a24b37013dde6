"""Native functions that call back into Python: what they call runs under the interpreter.

Layer: ``thunder.core.interpreter``. Imports: the standard library and the interpreter's modules.

Note [Native callbacks]
    A C function such as ``functools.reduce``, ``map`` or ``sorted`` calls the functions it is given, and
    the ``__iter__``/``__next__`` of the iterables it is given, itself: run natively, that Python code would
    be invisible to lookasides and callbacks (a global read in a ``sorted`` key would go unguarded). So
    ``execution.call`` adapts the arguments of the functions in ``_SPECS`` before anything else (the user's
    lookaside, if it replaces the function, gets the adapted arguments too):
      - a callable the function calls becomes a trampoline that calls it as the program would
        (``execution.call``: lookasides asked, Python code interpreted);
      - an iterable whose ``__iter__`` or ``__next__`` (or, without ``__iter__``, ``__getitem__``) is Python
        code has its ``__iter__`` interpreted now (where the native function would call it) and, when its
        iterator's ``__next__`` is Python code, becomes a generator interpreting one ``__next__`` per step;
      - where the function then asks the iterable for its length (``list``, ``tuple``, ``sorted``, ``list.extend``,
        ``lst += it``: ``PyObject_LengthHint``), a Python ``__len__`` or ``__length_hint__`` is called so
        (``length_hint``).
    The opcodes that iterate natively (``[*it]``, ``{*it}``, ``f(*it)``, ``a, b = it``) adapt their iterable alike.
    Once the interpretation has ended (a ``map`` object returned by the program, consumed later) both run
    natively. What the native function does with the values themselves (``any``'s truth tests,
    ``sorted``'s comparisons) stays native.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import functools
import itertools
import math
import operator

from .errors import NULL
from .execution import call_back, lookup_type_attr, register_method_adapter, register_native_adapter
from .protocols import _NATIVE_ITERATORS, FAST_TYPES, _is_py, get_iter, length
from .runtime import Runtime

__all__ = ["interpreting_callable", "interpreted_iterable"]


def interpreting_callable(ctx: Runtime, fn):
    """A function that calls ``fn`` as the interpreted program would; natively once ``ctx`` is done."""

    def trampoline(*args, **kwargs):
        return call_back(ctx, fn, args, kwargs)

    return trampoline


def _stepping(ctx: Runtime, it, next_fn):
    while True:
        try:
            value = call_back(ctx, next_fn, (it,))
        except StopIteration:
            return
        yield value


def interpreted_iterable(ctx: Runtime, v, hint: bool = False):
    """``v`` for a native function that iterates it: ``v`` itself when iterating it runs no Python code, else
    its iterator with the Python code interpreted (Note [Native callbacks]). ``hint``: the function asks ``v``
    for its length after taking its iterator (``PyObject_LengthHint``), which is done here, as it would."""
    t = type(v)
    if t in FAST_TYPES or t in _NATIVE_ITERATORS:
        return v
    iter_fn = lookup_type_attr(t, "__iter__")
    sequence = iter_fn is NULL and _is_py(lookup_type_attr(t, "__getitem__"))
    hinted = hint and (_is_py(lookup_type_attr(t, "__len__")) or _is_py(lookup_type_attr(t, "__length_hint__")))
    if not (_is_py(iter_fn) or _is_py(lookup_type_attr(t, "__next__")) or sequence or hinted):
        return v
    it = get_iter(ctx, v)
    if hinted:
        length_hint(ctx, v)
    next_fn = lookup_type_attr(type(it), "__next__")
    return _stepping(ctx, it, next_fn) if _is_py(next_fn) else it


def length_hint(ctx: Runtime, v, default: int = 0) -> int:
    """``operator.length_hint(v, default)`` (CPython's ``PyObject_LengthHint``), a Python ``__len__`` or
    ``__length_hint__`` called as the program would."""
    t = type(v)
    if lookup_type_attr(t, "__len__") is not NULL:
        try:
            return length(ctx, v)
        except TypeError:
            pass
    f = lookup_type_attr(t, "__length_hint__")
    if not _is_py(f):
        return operator.length_hint(v, default) if f is not NULL else default
    try:
        r = call_back(ctx, f, (v,))
    except TypeError:
        return default
    if r is NotImplemented:
        return default
    if not isinstance(r, int):
        raise TypeError(f"__length_hint__ must be an integer, not {type(r).__name__}")
    if r < 0:
        raise ValueError("__length_hint__() should return >= 0")
    return r


@dataclasses.dataclass(frozen=True)
class _Spec:
    """Which arguments of a native function it calls or iterates. ``callbacks`` and ``iterables`` (the
    positional arguments from ``iterables[0]`` to ``iterables[1]``, None: the last) apply when the call has
    ``nargs`` positional arguments (any number if None);
    ``keywords`` name callable keyword arguments; ``hint``: it asks the iterables for their length."""

    callbacks: tuple[int, ...] = ()
    iterables: tuple[int, int | None] = (0, 0)
    keywords: tuple[str, ...] = ()
    nargs: int | None = None
    hint: bool = False


_FIRST = (0, 1)
_SECOND = (1, 2)
_ALL = (0, None)

_SPECS = {
    functools.reduce: _Spec(callbacks=(0,), iterables=_SECOND),
    builtins.map: _Spec(callbacks=(0,), iterables=(1, None)),
    builtins.filter: _Spec(callbacks=(0,), iterables=_SECOND),
    builtins.iter: _Spec(callbacks=(0,), nargs=2),
    builtins.sorted: _Spec(iterables=_FIRST, keywords=("key",), hint=True),
    builtins.list: _Spec(iterables=_FIRST, hint=True),
    builtins.tuple: _Spec(iterables=_FIRST, hint=True),
    tuple.__new__: _Spec(iterables=_SECOND, hint=True),
    collections.deque: _Spec(iterables=_FIRST),
    collections._count_elements: _Spec(iterables=_SECOND),  # (``Counter(it)``, ``Counter.update``)
    builtins.min: _Spec(iterables=_FIRST, keywords=("key",), nargs=1),
    builtins.max: _Spec(iterables=_FIRST, keywords=("key",), nargs=1),
    builtins.zip: _Spec(iterables=_ALL),
    itertools.starmap: _Spec(callbacks=(0,), iterables=_SECOND),
    itertools.filterfalse: _Spec(callbacks=(0,), iterables=_SECOND),
    itertools.takewhile: _Spec(callbacks=(0,), iterables=_SECOND),
    itertools.dropwhile: _Spec(callbacks=(0,), iterables=_SECOND),
    itertools.accumulate: _Spec(callbacks=(1,), iterables=_FIRST, keywords=("func",)),
    itertools.groupby: _Spec(callbacks=(1,), iterables=_FIRST, keywords=("key",)),
    itertools.chain: _Spec(iterables=_ALL),
    itertools.zip_longest: _Spec(iterables=_ALL),
    **{
        fn: _Spec(iterables=_FIRST)
        for fn in (builtins.enumerate, builtins.any, builtins.all, builtins.sum, builtins.set, builtins.frozenset,
                   itertools.islice, itertools.cycle, math.fsum, math.prod)  # fmt: skip
    },
}


def _adapter(spec: _Spec):
    def adapt(ctx: Runtime, args: tuple, kwargs: dict | None) -> tuple[tuple, dict | None]:
        if spec.nargs is None or len(args) == spec.nargs:
            args = list(args)
            for i in spec.callbacks:
                if i < len(args) and callable(args[i]):
                    args[i] = interpreting_callable(ctx, args[i])
            for i in range(len(args))[slice(*spec.iterables)]:
                args[i] = interpreted_iterable(ctx, args[i], spec.hint)
            args = tuple(args)
        if kwargs:
            for name in spec.keywords:
                f = kwargs.get(name)
                if f is not None and callable(f):
                    kwargs = {**kwargs, name: interpreting_callable(ctx, f)}
        return args, kwargs

    return adapt


for _fn, _spec in _SPECS.items():
    register_native_adapter(_fn, _adapter(_spec))


def _method_adapter(spec: _Spec):
    adapt = _adapter(spec)
    return lambda ctx, receiver, args, kwargs: adapt(ctx, args, kwargs)


# The methods of builtin containers that iterate their argument (``dict.fromkeys`` is bound to its class).
for _tp, _name, _spec in (
    (list, "extend", _Spec(iterables=_FIRST, hint=True)),
    (set, "update", _Spec(iterables=_ALL)),
    (collections.deque, "extend", _Spec(iterables=_FIRST)),
    (collections.deque, "extendleft", _Spec(iterables=_FIRST)),
    (type, "fromkeys", _Spec(iterables=_FIRST)),
):
    register_method_adapter(_tp, _name, _method_adapter(_spec))
