"""Iterator arguments, consumed by every call of a jitted function exactly as eager consumes them.

Note [Iterator arguments]
The program sees an iterator argument as a ``TracedIterator``, which takes an item from the real iterator
each time the program asks for one (``next``, a ``for`` loop, ``sum``, ``zip``, ...). The tracer records each
such pull, and the prologue makes the same pulls on every call (``it_0 = next(it_iter, _END)``), checks the
items like any input and, where the program found the end, checks that the iterator ends there too. So a call
takes exactly what eager takes: a partially consumed iterator is left where eager leaves it, and an endless
one (``itertools.count()``) is fine. The program may only iterate it: anything else (``send``, returning or
storing it) is refused with an error naming it.

A prologue that rejects the call after pulling has taken items that the next prologue tried, and the tracer,
must see again, and most iterators cannot be put back. So a prologue's pulls are recorded (``IteratorView``, kept
per thread by ``iterator_view``), and the slow path hands every prologue it tries and the tracer a
``ReplayableIterator``, which gives the recorded items first and then pulls from the real iterator. Should the
entry that finally runs take fewer items than were pulled (a rejected entry took more before one of its later
checks failed), the call fails with an error naming the argument (``check_replayed``) rather than leave the
iterator further on than eager would.

That is for iterators that cannot be put back (generators, ``map``/``zip``/``enumerate`` objects, files, ...):
the prologue's pulls are the ones eager makes, so a call that fails at run time (an index out of range before
the loop) has already taken every item the program would take. The builtin iterators over a sequence
(``RESTORABLE``: over a list, tuple, range, str, bytes, and ``reversed`` of a sequence) can be copied at their
position (``__reduce__``): every prologue, and the tracer, pull from a copy (``copy_at_position``) and leave
the argument where it was, and the computation advances the argument itself (``advance_iterator``, a replay:
``next(it, None)`` at each point where the program took an item or found the end), in order with the other
replays and the ops that may fail, so a call that fails stops it where eager stops it. For the others, the
tracer, before each item it takes, checks that eager would not have failed already on these inputs (the ops
that may fail and the in-place ops, which fail on memory their tensor shares with itself (an expanded input), run
on copies of the real tensors laid out as they are; an in-place change of a leaf that requires grad): where it would, the
call runs eagerly (Note [A program that raises] in thunder.compiler) and the iterator is untouched. A cached
trace that fails at run time on values it was not traced with, before any effect, runs the call eagerly on the
items its prologue pulled (Note [A run that fails before its effects] in thunder.compiler): eager's error where
eager takes them too, else an error naming the argument (they cannot be put back). One that fails after an effect
(a print before the failure) still leaves the iterator where its prologue left it.

Layer: core. Imports: stdlib, torch, core.errors, core.interpreter (``make_opaque``).
"""

from __future__ import annotations

import collections.abc
import threading
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.errors import ThunderRuntimeError
from thunder.core.interpreter import make_opaque
from thunder.core.interpreter.protocols import abc_subclass

END = object()  # what ``next(view, END)`` gives when the iterator has ended
#: The iterators whose ``__reduce__`` makes an independent copy at their position (see the Note).
RESTORABLE = frozenset(
    type(x) for x in (
        iter([]), iter(()), iter(range(0)), iter(range(2**64, 2**64)), iter(""), iter("\u00e9"), reversed([]),
        reversed(()), iter(b""), iter(bytearray()),
    )
)  # fmt: skip
_KEPT = 32  # views kept per thread: the iterator arguments of the call in flight, at least
_views = threading.local()  # id(iterator) -> the view the last prologue on this thread pulled through


class IteratorView:
    """One pass of a prologue (or of the tracer) over an iterator argument: it gives what earlier passes pulled
    (``pulled``, shared, ``END`` where the iterator ended), then pulls from ``source``, recording each pull."""

    __slots__ = ("source", "pulled", "taken")

    def __init__(self, source, pulled: list):
        self.source, self.pulled, self.taken = source, pulled, 0

    def __iter__(self):
        return self

    def __next__(self):
        pulled, taken = self.pulled, self.taken
        if taken < len(pulled):
            item = pulled[taken]
        else:
            item = next(self.source, END)
            pulled.append(item)
        self.taken = taken + 1
        if item is END:
            raise StopIteration
        return item


def copy_at_position(it):
    """A new iterator of a ``RESTORABLE`` one's kind over the same sequence, at the same position."""
    fn, args, *state = it.__reduce__()
    copy = fn(*args)
    if state and state[0] is not None:
        copy.__setstate__(state[0])
    return copy


class ReplayableIterator:
    """An iterator argument on the slow path: each prologue tried, and the tracer, pass over it from the start
    (``iterator_view``), seeing the items pulled so far and then the real iterator's next ones (a ``RESTORABLE``
    one: a copy of it). The computation's ``advance_iterator`` advances the real one (``__next__``)."""

    __slots__ = ("source", "pulled", "last", "name")

    def __init__(self, source, pulled: list, name: str):
        self.source, self.pulled, self.last, self.name = source, pulled, None, name

    def view(self) -> IteratorView:
        if type(self.source) in RESTORABLE:
            self.last = IteratorView(copy_at_position(self.source), [])
        else:
            self.last = IteratorView(self.source, self.pulled)
        return self.last

    def __next__(self):
        return next(self.source)


def iterator_view(it, typ: type):
    """What a prologue makes of an iterator argument of type ``typ`` before pulling from it (None for anything
    else: a miss): a copy of a ``RESTORABLE`` one, a recording ``IteratorView`` of any other."""
    if type(it) is ReplayableIterator:
        return it.view() if type(it.source) is typ else None
    if type(it) is not typ:
        return None
    if typ in RESTORABLE:
        return copy_at_position(it)
    view = IteratorView(it, [])
    kept = getattr(_views, "kept", None)
    if kept is None:
        kept = _views.kept = {}
    kept.pop(id(it), None)
    kept[id(it)] = view
    if len(kept) > _KEPT:
        del kept[next(iter(kept))]
    return view


_Tensor = torch.Tensor


def _has_iterator(values) -> bool:
    for v in values:
        # (a tensor first: the ABC's check of a type that is no iterator costs a tenth of a slow-path call)
        if type(v) is not _Tensor and abc_subclass(type(v), collections.abc.Iterator):
            return True
    return False


def replayable_arguments(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args``/``kwargs`` with iterators made replayable (the slow path), holding what a prologue pulled."""
    if not _has_iterator(args) and not (kwargs and _has_iterator(kwargs.values())):
        return args, kwargs
    kept = getattr(_views, "kept", None) or {}

    def replayable(x, name: str):
        if not isinstance(x, collections.abc.Iterator) or type(x) is ReplayableIterator:
            return x
        view = kept.pop(id(x), None)
        return ReplayableIterator(x, view.pulled if view is not None and view.source is x else [], name)

    return (
        tuple(replayable(a, f"positional argument {i}") for i, a in enumerate(args)),
        {k: replayable(v, f"argument {k!r}") for k, v in kwargs.items()},
    )


def eager_arguments(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args``/``kwargs`` for running the program eagerly after tracing it (Note [A program that raises] in
    thunder.compiler): an iterator argument is the caller's own, or, where tracing or a prologue pulled items from
    it, those items and then the rest of it."""

    def original(x):
        if type(x) is not ReplayableIterator:
            return x
        return IteratorView(x.source, x.pulled) if x.pulled else x.source

    return tuple(map(original, args)), {k: original(v) for k, v in kwargs.items()}


def check_replayed(args: tuple, kwargs: dict) -> None:
    """After the slow path ran a call: raises if the entry that ran took fewer items of an iterator argument
    than prologues pulled from it (see Note [Iterator arguments])."""
    for it in (*args, *kwargs.values()):
        if type(it) is ReplayableIterator and it.last is not None and it.last.taken < len(it.pulled):
            raise ThunderRuntimeError(
                f"thunder.jit: the iterator passed as {it.name} was advanced further than the function consumes it "
                f"({len(it.pulled)} next() calls were made, the function makes {it.last.taken}): a cached trace took "
                "items to check them before it turned out not to apply, and an iterator cannot be put back. Pass a "
                "list or tuple instead of the iterator."
            )


class TracedIterator:
    """What the program sees for an iterator argument while it is traced (Note [Iterator arguments]): ``before``
    runs before each pull, each item it asks for is pulled through ``view`` and handed to ``on_item`` (its index
    and value; it returns what the program sees), the end to ``on_end``. It answers ``type()`` and ``isinstance``
    as the real iterator (of type ``typ``)."""

    __slots__ = ("_view", "_before", "_on_item", "_on_end", "name", "_eager_type", "_count")

    def __init__(
        self,
        view: IteratorView,
        before: Callable[[], None],
        on_item: Callable[[int, Any], Any],
        on_end: Callable[[], None],
        name: str,
        typ: type,
    ):
        self._view, self._before, self._on_item, self._on_end, self.name = view, before, on_item, on_end, name
        self._eager_type, self._count = typ, 0

    def __iter__(self):
        return self

    def __next__(self):
        self._before()
        item = next(self._view, END)
        if item is END:
            self._on_end()
            raise StopIteration
        self._count += 1
        return self._on_item(self._count - 1, item)

    @property
    def __class__(self):
        return self._eager_type

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        raise self._refused(f"{self.name}.{name}")

    def __reduce_ex__(self, protocol):  # copy.copy, copy.deepcopy, pickle
        raise self._refused(f"copying {self.name}")

    def _refused(self, what: str) -> ThunderRuntimeError:
        return ThunderRuntimeError(
            f"{what}: {self.name} is an iterator argument, which thunder follows only as the program takes items "
            "from it (next(), for loops, sum(), ...). Pass the values it gives instead."
        )


for _method in (TracedIterator.__iter__, TracedIterator.__next__, TracedIterator.__getattr__, TracedIterator.__reduce_ex__):
    make_opaque(_method)
