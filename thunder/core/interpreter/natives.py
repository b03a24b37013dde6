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
        iterator's ``__next__`` is Python code, becomes a generator interpreting one ``__next__`` per step.
    Once the interpretation has ended (a ``map`` object returned by the program, consumed later) both run
    natively. What the native function does with the values themselves (``any``'s truth tests,
    ``sorted``'s comparisons) stays native.
"""

from __future__ import annotations

import builtins
import dataclasses
import functools
import itertools
import math

from .errors import NULL
from .execution import call_back, lookup_type_attr, register_native_adapter
from .protocols import _NATIVE_ITERATORS, FAST_TYPES, _is_py, get_iter
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


def interpreted_iterable(ctx: Runtime, v):
    """``v`` for a native function that iterates it: ``v`` itself when iterating it runs no Python code, else
    its iterator with the Python code interpreted (Note [Native callbacks])."""
    t = type(v)
    if t in FAST_TYPES or t in _NATIVE_ITERATORS:
        return v
    iter_fn = lookup_type_attr(t, "__iter__")
    sequence = iter_fn is NULL and _is_py(lookup_type_attr(t, "__getitem__"))
    if not (_is_py(iter_fn) or _is_py(lookup_type_attr(t, "__next__")) or sequence):
        return v
    it = get_iter(ctx, v)
    next_fn = lookup_type_attr(type(it), "__next__")
    return _stepping(ctx, it, next_fn) if _is_py(next_fn) else it


@dataclasses.dataclass(frozen=True)
class _Spec:
    """Which arguments of a native function it calls or iterates. ``callbacks`` and ``iterables`` (the
    positional arguments from ``iterables[0]`` to ``iterables[1]``, None: the last) apply when the call has
    ``nargs`` positional arguments (any number if None);
    ``keywords`` name callable keyword arguments."""

    callbacks: tuple[int, ...] = ()
    iterables: tuple[int, int | None] = (0, 0)
    keywords: tuple[str, ...] = ()
    nargs: int | None = None


_FIRST = (0, 1)
_SECOND = (1, 2)
_ALL = (0, None)

_SPECS = {
    functools.reduce: _Spec(callbacks=(0,), iterables=_SECOND),
    builtins.map: _Spec(callbacks=(0,), iterables=(1, None)),
    builtins.filter: _Spec(callbacks=(0,), iterables=_SECOND),
    builtins.iter: _Spec(callbacks=(0,), nargs=2),
    builtins.sorted: _Spec(iterables=_FIRST, keywords=("key",)),
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
        for fn in (builtins.enumerate, builtins.any, builtins.all, builtins.sum, builtins.list, builtins.tuple,
                   builtins.set, builtins.frozenset, itertools.islice, itertools.cycle, math.fsum, math.prod)  # fmt: skip
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
                args[i] = interpreted_iterable(ctx, args[i])
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
