"""An entry's prologue when calls reuse it: the executed prologue made when first needed, the fused prologue
compiled on the first call with the entry's input key (``input_key``), and what tells the jitted function that the
entry's ``run`` changed.

Layer: entry points (beside ``thunder.compiler``, which builds entries with these). Imports: core, transforms,
common, cache_diagnostics, settled_autograd.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from thunder.common import CACHE_OPTIONS, MISS, CacheEntry
from thunder.core.iterators import ReplayableIterator
from thunder.core.trace import TraceCtx, TraceProvenance
from thunder.settled_autograd import SettledAutograd
from thunder.transforms import transform_for_execution


# Note [The executed prologue is made when needed]
# The prologue as its executors run it (``transform_for_execution``: a small Qwen2's 630 reads and checks claimed one
# by one, about 1 ms) is needed only to compile it: the fused prologue at the entry's first reuse, the diagnostic one
# (Note [The first call runs no prologue] in ``thunder.compiler``), or to show it (``thunder.last_prologue_traces``).
# An entry used once (a generation's prefill) never needs it, so it is made on the first of these, once, and appended
# to the entry's prologue traces then.
class ExecutedPrologue:
    """Makes ``prologue`` claimed by ``executors`` when first called, and appends it to ``traces`` (Note [The executed
    prologue is made when needed])."""

    __slots__ = ("prologue", "executors", "traces", "trace", "lock")

    def __init__(self, prologue: TraceCtx, executors: Sequence, traces: list[TraceCtx]):
        self.prologue, self.executors, self.traces = prologue, executors, traces
        self.trace: TraceCtx | None = None
        self.lock = threading.Lock()

    def __call__(self) -> TraceCtx:
        with self.lock:
            if self.trace is None:
                trace = transform_for_execution(self.prologue, self.executors)
                trace.set_provenance(TraceProvenance("Transform for execution", 0.0))
                self.traces.append(trace)
                self.trace = trace
            return self.trace


# Note [The fused prologue is compiled on reuse]
# The hot path runs an entry's prologue and computation in one generated function (``fused_prologue_callable``),
# a compilation of the prologue's few hundred lines. Many entries never run twice (a generation's prefill and
# first decode step: a GPT-2 generation compiles 2 entries and the prefill runs once), and their first call runs no
# prologue (Note [The first call runs no prologue] in ``thunder.compiler``): the fused function is compiled when a
# later call has the entry's input key, which a call with other shapes (the next decode step) has not: on the hot
# path, or when the slow path's lookup finds the entry again (``reused``; calls alternating between entries never
# meet it on the hot path).


class FusedWhenReused:
    """``entry.run(args, kwargs)`` until a call with the entry's input key, then its fused prologue. It refers to
    the entry weakly (and is no closure over itself): an evicted entry is freed by reference counting (Note
    [Generated code and its resources]). Where the fused prologue copies the computation's statements, a change of
    the computation's code makes it again (Note [The computation runs in the prologue's frame] in
    ``thunder.core.trace``)."""

    __slots__ = (
        "computation", "trace", "prologue", "owner", "option", "key", "fused", "lock", "made", "settled", "__weakref__",
    )  # fmt: skip

    def __init__(
        self, entry: CacheEntry, prologue: ExecutedPrologue, option: CACHE_OPTIONS, trace: TraceCtx | None = None,
        settled: SettledAutograd | None = None,
    ):  # fmt: skip
        """``trace``: the trace the computation is the compiled function of, if it is (no wrapper, no autograd)."""
        self.computation, self.prologue, self.option, self.key = entry.computation, prologue, option, entry.key
        self.trace = trace
        self.owner = weakref.ref(entry)
        self.fused: Callable | None = None
        self.lock = threading.Lock()
        # Fused prologues by the id of the trace they copy (0: none), with that trace (an id is reused once freed).
        self.made: dict[int, tuple[TraceCtx | None, Callable]] = {}
        # Note [A settled entry records with torch's autograd]: checked when the code of its traces changes.
        self.settled = settled
        for fn in [*([self.computation] if trace is not None else ()), *(settled.watched() if settled else ())]:
            self._watch(fn)

    def _watch(self, fn: Callable) -> None:
        """Tells ``self`` when the compiled trace function ``fn`` takes other code (``replace_code``)."""
        fn.__dict__.setdefault("__thunder_code_users__", []).append(weakref.ref(self))

    def __call__(self, args: tuple, kwargs: dict):
        fused = self.fused
        if fused is None:
            try:
                if input_key(self.option, args, kwargs) != self.key:
                    return MISS
            except TypeError:  # an unhashable input: the prologue decides
                pass
            fused = self._fuse()
        return fused(args, kwargs)

    def reused(self) -> None:
        """The slow path found the entry for a call with its input key: its next call runs the fused prologue."""
        self._fuse()

    def _fuse(self) -> Callable:
        with self.lock:
            if self.fused is None:
                entry = self.owner()
                missed = entry.misses.missed if entry is not None else (lambda bsym, frame, call, raised=None: MISS)
                ours = entry is not None and (entry.run is self or any(entry.run is f for _, f in self.made.values()))
                if self.settled is not None and entry is not None and self.settled.ready():
                    switched, self.settled = self.settled.switch(entry), None
                    if switched is not None:
                        (self.computation, self.trace), self.made = switched, {}
                        self._watch(self.computation)
                # What the computation's code prints now (Note [The computation runs in the prologue's frame]).
                inline = self.computation.__dict__.get("__thunder_trace__", self.trace) if self.trace else None
                made = self.made.get(id(inline) if inline is not None else 0)
                fused = made[1] if made is not None and made[0] is inline else None
                if fused is None:
                    # An entry that may change outcome or run again eagerly after a failure is called.
                    direct = entry is not None and not entry.outcomes and not entry.rerun_on_failure
                    fused = self.prologue().fused_prologue_callable(self.computation, missed, inline, direct)
                    copied = fused.__thunder_inlined_trace__
                    # Only the one that calls the computation and the one that copies its current code are kept.
                    self.made = {k: v for k, v in self.made.items() if k == 0}
                    self.made[id(copied) if copied is not None else 0] = (copied, fused)
                    if copied is not inline:
                        self.made[id(inline)] = (inline, fused)  # its names do not allow the copy: it is called
                self.fused = fused
                if ours:
                    entry.run = fused
                    run_changed(entry)
            return self.fused

    def code_changed(self) -> None:
        """The computation's code changed: the next call makes (or takes) the fused prologue that runs it."""
        with self.lock:
            old, self.fused = self.fused, None
            entry = self.owner()
            if entry is not None and old is not None and entry.run is old:
                entry.run = self
                run_changed(entry)


def run_changed(entry: CacheEntry) -> None:
    """Tells the jitted function whose cache holds ``entry`` that ``entry.run`` changed (Note [The fused prologue is
    the jitted function's code] in ``thunder.core.codegen``)."""
    owner = entry.owner() if entry.owner is not None else None
    if owner is not None:
        owner.install_hot_code()


def input_key(cache_option: CACHE_OPTIONS, args: tuple, kwargs: dict) -> Any:
    """A hashable summary of the inputs that every entry accepting them shares.

    The cache is a dict from this key to entries, so a lookup does not grow with the number
    of entries; the entries' prologues make the exact decision.
    """
    symbolic = cache_option is CACHE_OPTIONS.SYMBOLIC_VALUES
    return (len(args), tuple(kwargs), tuple(_leaf_key(a, symbolic) for a in args),
            tuple(_leaf_key(v, symbolic) for v in kwargs.values()))  # fmt: skip


def _leaf_key(x: Any, symbolic: bool) -> Any:
    typ = type(x)
    if issubclass(typ, torch.Tensor):  # (not isinstance: Note [Reads a class's __getattribute__ sees])
        try:
            shape = x.ndim if symbolic else tuple(x.shape)
        except RuntimeError:  # a nested tensor has no sizes: tracing refuses it clearly
            shape = None
        return (shape, x.dtype, x.device, x.requires_grad)
    if typ in (int, float):
        return (typ,) if symbolic else (typ, x if x == x else "nan")  # NaN != NaN: it must still find its entry
    if typ in (bool, str, type(None)):
        return (typ, x)
    if typ in (tuple, list):
        return (typ, tuple(_leaf_key(v, symbolic) for v in x))
    if typ is ReplayableIterator:  # the slow path's wrapper of an iterator argument has the iterator's key
        return (type(x.source),)
    if type(typ) is type or type(typ).__hash__ is not None:
        return (typ,)
    return (id(typ),)  # a class that cannot be hashed (its metaclass defines __eq__): the prologue checks its type
