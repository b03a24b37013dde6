"""Iterator arguments, consumed by every call of a jitted function as eager consumes them.

A prologue takes all of an iterator argument's items (``consume_iterator``); if a later check rejects
the call, the slow path must still see those items, so they are remembered per thread, and the slow
path hands every prologue it tries (and the tracer) a ``ReplayableIterator`` over them.

Layer: core. Imports: stdlib only.
"""

from __future__ import annotations

import collections.abc
import threading

_consumed = threading.local()  # iterators a prologue consumed on this thread: id -> (iterator, items)


class ReplayableIterator:
    """An iterator argument's items, which every prologue (and the tracer) can consume again: the slow
    path makes one, so trying several cache entries and tracing all see the items the call was given."""

    def __init__(self, items: list):
        self._items = items
        self._it = iter(items)

    def __iter__(self):
        return iter(self._items)

    def __next__(self):
        return next(self._it)


def consume_iterator(it) -> tuple:
    """What a prologue does with an iterator argument: take all its items, remembered for the slow path
    (a check after this one may reject the call, which must then see the same items)."""
    if type(it) is ReplayableIterator:
        return tuple(it)
    items = tuple(it)
    store = getattr(_consumed, "items", None)
    if store is None:
        store = _consumed.items = {}
    store[id(it)] = (it, items)
    return items


def replayable_arguments(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with iterators made replayable (the slow path; see ``consume_iterator``)."""
    store = getattr(_consumed, "items", None) or {}

    def fix(x):
        if not isinstance(x, collections.abc.Iterator) or type(x) is ReplayableIterator:
            return x
        it, items = store.pop(id(x), (x, None))
        return ReplayableIterator(list(items) if items is not None and it is x else list(x))

    if not any(isinstance(a, collections.abc.Iterator) for a in (*args, *kwargs.values())):
        return args, kwargs
    return tuple(fix(a) for a in args), {k: fix(v) for k, v in kwargs.items()}
