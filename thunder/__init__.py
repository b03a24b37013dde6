"""thunder: a just-in-time compiler for PyTorch programs.

``thunder.jit(fn)`` returns a callable that traces ``fn`` under thunder's bytecode
interpreter on its first call (and whenever a cached entry does not fit its inputs),
optimises the trace, hands each operation to an executor, and runs the result. The
functions below it look at what happened.

Layer: entry points. Imports: everything below.
"""

from __future__ import annotations

import builtins
import collections
import dataclasses
import functools
import sys
import threading
import types
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import thunder.executors.pythonex as _pythonex
import thunder.executors.torchex as _torchex
import thunder.torch  # noqa: F401  (binds thunder.torch, the torch language)
from thunder import extend
from thunder.cache_diagnostics import (
    FIRST_CALL,
    MISS_REASONS_KEPT,
    NO_CACHING,
    CacheMissReason,
    RecompileWarning,
    Rejection,
    diagnose_miss,
    warn_recompiles,
)
from thunder.common import (
    CACHE_OPTIONS,
    MISS,
    SHARP_EDGES_OPTIONS,
    AtomicCounter,
    CacheEntry,
    CompileData,
    CompileStats,
    DebugOptions,
    make_compile_options,
)
from thunder.compiler import (
    Cache,
    EagerRunWarning,
    ProgramRaised,
    compile_entry,
    continues,
    draws_per_call,
    generator_draws,
    python_random_state,
    restore_python_random_state,
)
from thunder.core import codegen, devices, dtypes, prims
from thunder.core.errors import MakesParameters, ThunderRuntimeError, ThunderValueError
from thunder.core.interpreter import InterpreterError
from thunder.core.interpreter.versions import check_python_version, running_python, unsupported_python_message
from thunder.core.iterators import IteratorView, check_replayed, eager_arguments, replayable_arguments
from thunder.core.module import ThunderModule
from thunder.core.module import install_jit_entry as _install_jit_entry
from thunder.core.module import running_eagerly as _running_eagerly
from thunder.core.prims.python import OutcomeChanged, SymbolicOutcome
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.shape_history import ShapeHistory
from thunder.core.symbol import Symbol
from thunder.core.trace import TraceCtx
from thunder.core.transform_common import Transform
from thunder.entry_run import input_key
from thunder.executors import nvfuserex as _nvfuserex  # registers the name; never imports nvFuser
from thunder.executors import sdpaex as _sdpaex
from thunder.executors import torch_compile as _torch_compile
from thunder.executors import tritonex as _tritonex  # imports triton only when a kernel is built
from thunder.extend import (
    Executor,
    FusionExecutor,
    OperatorExecutor,
    add_always_executor,
    add_default_executor,
    remove_always_executor,
    remove_default_executor,
    resolve_executors,
    set_always_executors,
    set_default_executors,
)
from thunder.runtime_errors import add_runtime_note, reruns_after

__version__ = "0.1.0"

# On a Python the interpreter was not built for, say so at import; ``jit`` refuses (never a wrong result).
_unsupported_python = unsupported_python_message(running_python())
if _unsupported_python is not None:
    import warnings as _warnings

    _warnings.warn(_unsupported_python, RuntimeWarning, stacklevel=2)

__all__ = [
    "jit",
    "compile_data",
    "compile_stats",
    "last_traces",
    "last_backward_traces",
    "last_prologue_traces",
    "cache_option",
    "cache_hits",
    "cache_misses",
    "cache_miss_reasons",
    "CacheMissReason",
    "RecompileWarning",
    "EagerRunWarning",
    "list_transforms",
    "last_interpreted_instructions",
    "last_interpreter_log",
    "last_compile_options",
    "DebugOptions",
    "CACHE_OPTIONS",
    "SHARP_EDGES_OPTIONS",
    "Transform",
    "TraceCtx",
    "Symbol",
    "Proxy",
    "TensorProxy",
    "Executor",
    "OperatorExecutor",
    "FusionExecutor",
    "dtypes",
    "devices",
    "extend",
    "get_default_executors",
    "get_always_executors",
    "get_all_executors",
    "pytorch_executor",
    "torch_compile_executor",
    "sdpa_executor",
    "triton_executor",
    "trace",
    "ThunderModule",
    "prims",
    "add_default_executor",
    "add_always_executor",
    "remove_default_executor",
    "remove_always_executor",
    "set_default_executors",
    "set_always_executors",
    "resolve_executors",
]

# dtype shortcuts, as lightning-thunder exposes them
float32, float64, float16, bfloat16 = dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16
int8, int16, int32, int64, uint8, bool8 = dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.bool8

pytorch_executor = _torchex.ex
python_executor = pythonex = _pythonex.ex
nvfuser_executor = None  # as lightning-thunder's where nvFuser cannot run; "nvfuser" is listed unavailable (_nvfuserex)
torch_compile_executor = _torch_compile.ex
sdpa_executor = _sdpaex.sdpa_ex
triton_executor = _tritonex.ex
get_default_executors = extend.get_default_executors
get_always_executors = extend.get_always_executors
get_all_executors = extend.get_all_executors

extend.set_always_executors([_torchex.ex, _pythonex.ex])
# Chosen by measurement (README, "Executors" and "Speed"): regions run torch's kernels until hot, then
# compile in a worker process, and a compiled graph stays only where it beats torch's kernels.
extend.set_default_executors([_torch_compile.background_ex])


class _Jitted:
    """The state behind a jitted function (reached through ``fn._thunder``).

    Note [Concurrent calls]
    Any number of threads may call one jitted function. The hot path (``fn_`` in
    ``_make_jitted``, or the last entry's fused prologue run as ``fn_``'s own code) reads ``last_entry``
    (one attribute read, none in the fused prologue's code) and bumps a lock-free counter.
    The slow path looks entries up without a lock (Note [The cache under threads] in
    ``thunder.compiler``); only a miss takes ``lock``, looks again (another thread may have
    compiled the entry meanwhile), then traces and compiles while holding it, so one function
    compiles one entry at a time and the counters, the cache and ``cs``'s last traces change
    together. Computations run outside the lock. Tracing state is per thread (``contextvars``),
    so different functions compile in parallel.
    """

    __slots__ = (
        "cd", "cs", "cache", "last_entry", "lock", "miss_reasons", "warned_recompiles", "ran_setup", "last_inputs",
        "draws_with_outcomes", "shape_history", "fn", "dispatch_code", "previous_entry", "try_previous", "hits_mark",
        "__weakref__",
    )  # fmt: skip

    def __init__(self, cd: CompileData):
        self.cd = cd
        self.cache = Cache(cd.options.cache_size_limit)
        self.cs = CompileStats(cache=self.cache, hits=AtomicCounter(_recording_last_inputs))
        self.last_entry: CacheEntry | None = None
        self.previous_entry: CacheEntry | None = None  # Note [The entry used before is tried next]
        self.try_previous = True  # (it is, until it misses; then again once the lookup finds it)
        self.hits_mark = 0  # the function's hits when the last entry became the last (Note [Cache hits of each entry])
        self.lock = threading.RLock()
        self.miss_reasons: collections.deque[CacheMissReason] = collections.deque(maxlen=MISS_REASONS_KEPT)
        self.warned_recompiles = False
        self.ran_setup = False  # Note [Parameters made by the program]
        self.last_inputs: tuple | None = None  # (args, kwargs) of the last call, while recording (below)
        # Some entry draws per-call values (random.random()) and checks data-dependent values: a call
        # that changes entry must draw once (the slow path puts the generators back).
        self.draws_with_outcomes = False
        automatic = cd.options.automatic_dynamic and cd.cache_option is CACHE_OPTIONS.CONSTANT_VALUES
        self.shape_history = ShapeHistory() if automatic else None  # Note [Automatic dynamic shapes]
        self.fn: weakref.ref | None = None  # the jitted function, whose code ``install_hot_code`` sets
        self.dispatch_code: Any = None  # its code when it runs no fused prologue as its own

    # Note [Cache hits of each entry]
    # The explorer says how many calls each entry ran (``generate``: one prefill, then every decoding step), but the
    # hot path counts only the function's hits: a counter of its own entry would cost it a call. Every hit between two
    # changes of the last entry is the last entry's, since a hit of another entry makes that one the last (``use``),
    # so ``use`` settles the hits counted since the last change on the entry it replaces (``CacheEntry.hits`` adds
    # those of the current last entry). The slow path therefore counts a hit after ``use``: it is the new entry's.
    # Threads that call one function with inputs of different entries at once may credit a hit to the wrong entry.
    def use(self, entry: CacheEntry) -> None:
        """Makes ``entry`` the one the hot path tries first, and the last one the one tried next."""
        last = self.last_entry
        if last is not entry:
            self.previous_entry = last if last is not None and last.tried_next and self.dispatch_code else None
            hits = self.cs.hits.value
            if last is not None:
                last.settled_hits += hits - self.hits_mark
            self.hits_mark = hits
        self.last_entry = entry
        self.install_hot_code()

    # Note [The entry used before is tried next]
    # Calls that alternate between two entries (two shapes, a training and an evaluation step) each miss the last
    # entry and went through the lookup: the input key, the entries' diagnostic prologue, then the computation, 14-20
    # us where the 2026-12-05 code took 7 (now 6-8: README, Speed). So the slow path first runs the entry used before the last one as the hot
    # path runs the last (its fused prologue and computation in one call, ``run``), where that entry's run can neither
    # change outcome, run the call again eagerly, nor draw per-call values in a prologue that then misses
    # (``CacheEntry.tried_next``), and the option is one the hot path serves. An entry evicted meanwhile is not tried.
    # Calls that cycle through more entries would pay a miss of that entry on each call (1.5 us): once it misses, it
    # is tried again only after the lookup found the entry used before the last, the sign of calls alternating.
    def _run_previous(self, args: tuple, kwargs: dict, last: CacheEntry | None) -> Any:
        """The call run by the entry used before the last one, or ``MISS``."""
        entry = self.previous_entry
        if entry is None or entry is last:
            return MISS
        try:
            result = entry.run(args, kwargs)
        except Exception as e:
            add_runtime_note(e)
            raise
        if result is MISS:
            entry.misses.take()  # (it holds the prologue's frame) the lookup runs the entry's prologue again if keyed
            self.try_previous = False
            return MISS
        self.cache.touch(entry)
        self.use(entry)
        next(self.cs.hits.count)  # after ``use``: the new last entry's hit (Note [Cache hits of each entry])
        return result

    def install_hot_code(self) -> None:
        """Gives the jitted function the code of the last entry's fused prologue where it has one, else the code
        that calls the entry (Note [The fused prologue is the jitted function's code] in ``thunder.core.codegen``).
        Any code it runs is right for any call: a thread that sets an older entry's code last costs speed only."""
        fn = self.fn() if self.fn is not None else None
        if fn is None:
            return
        entry = self.last_entry
        own = getattr(entry.run, "__thunder_direct__", None) if entry is not None else None
        code = own.__code__ if own is not None else self.dispatch_code
        # CPython fills missing positional arguments from the last defaults: never more parameters than defaults.
        fn.__code__ = _skipped_by_dynamo(code if code.co_argcount <= len(fn.__defaults__ or ()) else self.dispatch_code)

    def slow_call(self, args: tuple, kwargs: dict, changed: OtherOutcome | None = None) -> Any:
        """Everything but the hot path: other cache entries, then compiling a new one; ``changed``:
        the call stopped at a data-dependent value its entry's trace was not made for
        (Note [Data-dependent values] in ``thunder.core.data_dependent``)."""
        # What the last entry's fused prologue said of these arguments on the hot path, if it ran on them.
        last = self.last_entry
        rejection = last.misses.take() if last is not None and last.misses is not None else None
        called = args, kwargs
        args, kwargs = replayable_arguments(args, kwargs)
        if changed is None and self.try_previous and self.previous_entry is not None:
            result = self._run_previous(args, kwargs, last)
            if result is not MISS:
                check_replayed(args, kwargs)
                return result
        if rejection is not None and (changed is not None or not rejection.rejects(*called)):
            rejection = None
        rejected = (last, rejection) if rejection is not None else None
        while True:
            state = python_random_state() if self.draws_with_outcomes else None
            try:
                result = self._call(args, kwargs, changed, rejected)
            except ProgramRaised as stopped:
                return self.run_eagerly(args, kwargs, stopped.raised)
            except MakesParameters as making:
                return self.run_setup(args, kwargs, making)
            except _FailedBeforeEffects as failed:
                return self.rerun_after_failure(args, kwargs, failed.error, failed.entry)
            if type(result) is not OtherOutcome:
                check_replayed(args, kwargs)
                return result
            if state is not None:
                restore_python_random_state(state, generator_draws(result.entry))
            if changed is not None and len(result.outcomes) <= len(changed.outcomes):
                raise ThunderRuntimeError(
                    f"{result.describe()}, though the same call gave {changed.outcomes[result.index]!r} moments ago: "
                    "the value is not deterministic, so no trace can be chosen for it. Compute it outside the "
                    "jitted function, or make the ops that produce it deterministic."
                )
            changed = result

    def run_eagerly(self, args: tuple, kwargs: dict, raised: Exception) -> Any:
        """The call, run eagerly: tracing it stopped at ``raised``, an exception that is not thunder's (Note [A
        program that raises] in thunder.compiler)."""
        args, kwargs = eager_arguments(args, kwargs)
        result = self._eager_call(args, kwargs)
        warnings.warn(
            f"thunder.jit: tracing {self._name(args)} stopped at {type(raised).__name__}: {raised}, which the same call "
            "run eagerly did not raise; the call ran eagerly (its values are eager's). This is a difference between "
            "tracing and eager execution: please report it.",
            EagerRunWarning,
            stacklevel=3,
        )
        return result

    # Note [Parameters made by the program]
    # A module may build modules, parameters and all, in its forward, once: a lazy module materialises its weights,
    # BigBird swaps its block-sparse attention for a full one (a new module, its weights replaced by the old one's)
    # when the input is too short. A trace cannot make leaves, but eager's first call makes the change, after which
    # the program builds nothing (the prologue of the next trace checks the state it changed). So the first call that
    # makes a parameter while traced runs eagerly: eager's values, parameters and random draws; the next call traces
    # what the program does now. A program that makes one again (a module built on every call) is refused then, with
    # ``MakesParameters``'s clear error. Under user transforms, which change what the program does, it is refused at once.
    def run_setup(self, args: tuple, kwargs: dict, making: MakesParameters) -> Any:
        """The call, run eagerly: tracing it made a parameter (Note [Parameters made by the program])."""
        if self.ran_setup or self.cd.options.transforms:
            raise making
        self.ran_setup = True
        args, kwargs = eager_arguments(args, kwargs)
        return self._eager_call(args, kwargs)

    def rerun_after_failure(self, args: tuple, kwargs: dict, raised: Exception, entry: CacheEntry) -> Any:
        """The call, run eagerly: its compiled run raised ``raised`` before it made any effect, and ``entry`` makes
        effects in another order than eager, took items of an iterator argument before the run, or ran ops inside a
        ``try`` of the program's (Note [A run that fails before its effects], Note [A run-time failure the program
        handles] in thunder.compiler). Raises what eager raises, after eager's effects, with its prologue's draws put
        back first."""
        for draw in reversed(generator_draws(entry)):
            draw.put_back()
        args, kwargs = replayable_arguments(args, kwargs)
        given = (*args, *kwargs.values())
        eager_args, eager_kwargs = eager_arguments(args, kwargs)
        views = [(a, v) for a, v in zip(given, (*eager_args, *eager_kwargs.values())) if type(v) is IteratorView]
        try:
            result = self._eager_call(eager_args, eager_kwargs)
        except Exception as eager_error:
            _check_taken(views, eager_error)
            if eager_error.__context__ is raised or type(eager_error.__context__) is _FailedBeforeEffects:
                eager_error.__context__ = None  # (raised while the compiled run's failure was handled)
            raise
        _check_taken(views, None)
        if entry.caught:  # the program's handler ran (as expected: the trace took the try body)
            return result
        warnings.warn(
            f"thunder.jit: the compiled {self._name(args)} raised {type(raised).__name__}: {raised}, which the same "
            "call run eagerly did not raise; the call ran eagerly (its values are eager's). This is a difference "
            "between compiled and eager execution: please report it.",
            EagerRunWarning,
            stacklevel=3,
        )
        return result

    def _eager_call(self, args: tuple, kwargs: dict) -> Any:
        fn = self.cd.fn
        if getattr(fn, "_thunder_calls_module", False):  # the module's own call, not a compiled one it may route to
            with _running_eagerly():
                return args[0]._call_impl(*args[1:], **kwargs)
        return fn(*args, **kwargs)

    def _name(self, args: tuple) -> str:
        fn = self.cd.fn
        return type(args[0]).__qualname__ if self.cd.is_module and args else getattr(fn, "__qualname__", repr(fn))

    def _call(
        self, args: tuple, kwargs: dict, changed: OtherOutcome | None, rejected: tuple[CacheEntry, Rejection] | None = None
    ) -> Any:
        """One try of ``slow_call``; ``rejected``: the entry whose prologue rejected these inputs on the hot path,
        and what it said."""
        option = self.cd.cache_option
        outcomes = None if changed is None else changed.outcomes
        if option is CACHE_OPTIONS.SAME_INPUT:
            entry = self.last_entry
            if entry is not None and (outcomes is None or continues(entry, outcomes)):
                inputs = entry.prologue(*args, **kwargs)
                if type(inputs) is tuple and (outcomes is None or continues(entry, outcomes, inputs)):
                    self.cs.hits.bump()
                    return _run(entry, inputs)
        elif option is not CACHE_OPTIONS.NO_CACHING:
            rejected_by = rejected[0] if rejected is not None else None
            found = self.cache.lookup(option, args, kwargs, outcomes, rejected_by)
            if found is None:
                with self.lock:
                    found = self.cache.lookup(option, args, kwargs, outcomes, rejected_by)  # compiled meanwhile?
                    if found is None:
                        before = python_random_state()
                        entry, inputs = self._compile(option, args, kwargs, changed, rejected)
                if found is None:  # the computation runs outside the lock
                    return _first_run(entry, inputs, before)
            entry, inputs = found
            self.cache.touch(entry)
            fuser = entry.fuser
            if fuser is not None and fuser.fused is None:
                fuser.reused()  # Note [The fused prologue is compiled on reuse] in thunder.entry_run
            if entry is not self.last_entry:
                if entry is self.previous_entry:  # calls alternate between two entries
                    self.try_previous = True
                self.use(entry)
            next(self.cs.hits.count)  # after ``use`` (Note [Cache hits of each entry])
            return _run(entry, inputs)
        with self.lock:
            found = self._lookup_again(option, args, kwargs, outcomes)
            if found is None:
                before = python_random_state()
                entry, inputs = self._compile(option, args, kwargs, changed)
        if found is not None:
            next(self.cs.hits.count)
            return _run(*found)
        return _first_run(entry, inputs, before)

    def _lookup_again(
        self, option: CACHE_OPTIONS, args: tuple, kwargs: dict, outcomes: tuple | None
    ) -> tuple[CacheEntry, Any] | None:
        """Under the lock, "same input" and "no caching": the entry another thread compiled meanwhile."""
        entry = self.last_entry if option is CACHE_OPTIONS.SAME_INPUT else None
        if entry is None or (outcomes is not None and not continues(entry, outcomes)):
            return None
        inputs = entry.prologue(*args, **kwargs)
        if type(inputs) is not tuple or (outcomes is not None and not continues(entry, outcomes, inputs)):
            return None  # a Rejection: a read raised (Note [A prologue that raises misses])
        return entry, inputs

    def _compile(
        self, option: CACHE_OPTIONS, args: tuple, kwargs: dict, changed: OtherOutcome | None = None,
        rejected: tuple[CacheEntry, Rejection] | None = None,
    ) -> tuple[CacheEntry, Any]:
        """Under the lock: a miss. Records why, compiles and caches a new entry."""
        cd, cs = self.cd, self.cs
        misses = cs.misses.bump()
        reason = changed.reason() if changed is not None else self._miss_reason(option, args, kwargs, rejected)
        self.miss_reasons.append(reason)
        limit, warn_after = cd.options.cache_size_limit, cd.options.recompile_warning_limit
        automatic = _automatic_dynamic(cd, option, reason)
        # What changed once stays symbolic whatever the miss (Note [Automatic dynamic shapes]): a constraint of a
        # symbolic entry that fails (a KV cache reaching its sliding window) recompiles with the cache still symbolic.
        history = self.shape_history
        symbolic = automatic or (history is not None and history.has_symbolic() and _automatic_dynamic_on(cd, option))
        if automatic and changed is not None and history is not None:
            site = changed.site()
            if site is not None:  # every count asked there is symbolic in the new entry
                history.dynamic_sites.add(site)
        outcomes = changed.outcomes if changed is not None else ()
        entry, inputs = compile_entry(cd, cs, args, kwargs, outcomes, option, history, symbolic)
        if automatic:
            symbolic = entry.symbolic or any(type(o) is SymbolicOutcome for o in entry.outcomes)
            self.miss_reasons[-1] = _dynamic_reason(reason, symbolic)
        self.draws_with_outcomes |= bool(entry.outcomes) and draws_per_call(entry)
        if option is not CACHE_OPTIONS.NO_CACHING:
            self.cache.limit = limit
            evicted = self.cache.add(entry)  # the evicted entries are freed when the last reference goes
            entry.owner = weakref.ref(self)
            self.use(entry)
            if any(e is self.previous_entry for e in evicted):
                self.previous_entry = None
        if not self.warned_recompiles and warn_after is not None and misses >= warn_after:
            self.warned_recompiles = True
            name = type(args[0]).__qualname__ if cd.is_module and args else getattr(cd.fn, "__qualname__", repr(cd.fn))
            warn_recompiles(name, misses, reason, option, limit)
        return entry, inputs

    def _miss_reason(
        self, option: CACHE_OPTIONS, args: tuple, kwargs: dict, rejected: tuple[CacheEntry, Rejection] | None = None
    ) -> CacheMissReason:
        if option is CACHE_OPTIONS.NO_CACHING:
            return NO_CACHING
        entry = self.last_entry
        if entry is None:
            return FIRST_CALL
        try:
            key = input_key(CACHE_OPTIONS.SYMBOLIC_VALUES if entry.symbolic else option, args, kwargs)
        except TypeError:  # an unhashable input
            key = None
        rejection = rejected[1] if rejected is not None and rejected[0] is entry else None
        return diagnose_miss(entry, args, kwargs, key, rejection)


def _automatic_dynamic(cd: CompileData, option: CACHE_OPTIONS, reason: CacheMissReason) -> bool:
    """Whether the entry for this miss makes the sizes that changed symbolic (Note [Automatic dynamic shapes] in
    ``thunder.core.shape_history``)."""
    kind = type(reason.actual)  # an int or a float input, or a data-dependent one (``t.item()``: a step count)
    changed_number = (
        reason.check in ("value", "data-dependent value")
        and kind in (int, float)
        and type(reason.expected) in (kind, SymbolicOutcome)
    )
    return _automatic_dynamic_on(cd, option) and (reason.check == "shape" or changed_number)


def _automatic_dynamic_on(cd: CompileData, option: CACHE_OPTIONS) -> bool:
    return option is CACHE_OPTIONS.CONSTANT_VALUES and cd.options.automatic_dynamic


def _dynamic_reason(reason: CacheMissReason, symbolic: bool) -> CacheMissReason:
    """``reason``, saying what automatic dynamic shapes made of it in the new entry (``symbolic``: whether the
    entry has symbolic values)."""
    if not symbolic:  # every size or int that changed went to 0 or 1 (or the program pinned it)
        what = "it stays constant in this entry: sizes and ints that change to 0 or 1 are specialised, as torch.compile does"
    elif reason.check == "data-dependent value":
        what = f"the data-dependent {'values' if type(reason.actual) is float else 'sizes'} of this line are symbolic in this entry"
    else:
        what = "the sizes and numbers that changed are symbolic in this entry"
    message = f"{reason}; {what} (automatic dynamic shapes: pass cache='constant values' to keep them constant)"
    return dataclasses.replace(reason, message=message)


class OtherOutcome:
    """A call that stopped at a data-dependent value: ``entry``'s check ``index`` found ``value``."""

    __slots__ = ("entry", "index", "value", "outcomes")

    def __init__(self, entry: CacheEntry, index: int, value: Any, earlier: tuple = ()):
        self.entry, self.index, self.value = entry, index, value
        # What this call's values begin with: ``earlier`` gives those of the entry's symbolic outcomes.
        values = iter(earlier)
        known = tuple(next(values) if type(o) is SymbolicOutcome else o for o in entry.outcomes[:index])
        self.outcomes = known + (value,)

    def _check(self):
        return next(
            (b for b in self.entry.computation_traces[0].bound_symbols
             if b.sym is prims.check_outcome and b.args[3] == self.index),
            None,
        )  # fmt: skip

    def site(self) -> tuple[str, int] | None:
        """Where in the program the value was asked: (file, line)."""
        check = self._check()
        return None if check is None or check.source is None else (check.source.filename, check.source.lineno)

    def describe(self) -> str:
        check = self._check()
        if check is None:
            return f"data-dependent value {self.index} is {self.value!r}"
        t, kind = check.args[:2]
        asked = "the truth value" if kind == "bool" else f"{kind}()"
        where = f" at {check.source}" if check.source else ""
        return f"{asked} of tensor {t.name}{where} is {self.value!r}"

    def reason(self) -> CacheMissReason:
        expected = self.entry.outcomes[self.index]
        if type(expected) is SymbolicOutcome:
            message = (
                f"{self.describe()}, outside what the trace holds for (it keeps the value symbolic as "
                f"{expected.name}, where {' and '.join(expected.constraints)}): it continues differently"
            )
        else:
            message = f"{self.describe()}, not {expected!r} as when the trace was made: it continues differently"
        return CacheMissReason(None, "data-dependent value", expected, self.value, message=message)


class _FailedBeforeEffects(Exception):
    """An entry's computation raised ``error`` before any effect, and the call must run eagerly (Note [A run that
    fails before its effects] in thunder.compiler): from ``_run`` to ``slow_call``, which has the arguments."""

    def __init__(self, error: Exception, entry: CacheEntry):
        super().__init__(error)
        self.error, self.entry = error, entry


def _check_taken(views: list, eager_error: Exception | None) -> None:
    """After a call ran eagerly on iterator arguments replayed from what a prologue took (``views``: the argument
    as given, and the view eager pulled through): raises where eager took fewer items than the prologue had, which
    cannot be put back."""
    for given, view in views:
        if view.taken < len(view.pulled):
            what = f"raised {type(eager_error).__name__}: {eager_error}" if eager_error is not None else "ran"
            raise ThunderRuntimeError(
                f"thunder.jit: the call failed at run time, and run eagerly it {what} after taking {view.taken} items "
                f"of the iterator passed as {getattr(given, 'name', 'an argument')}, of the {len(view.pulled)} that "
                "the cached trace's prologue had taken to check them, which cannot be put back: the iterator is "
                "further on than eager leaves it. Pass a list or tuple instead of the iterator."
            ) from eager_error


def _run(entry: CacheEntry, inputs: Any) -> Any:
    """Runs an entry's computation; an exception it raises is noted with the op and the user's line.
    A call that stops at a data-dependent value returns an ``OtherOutcome``."""
    try:
        return entry.computation(*inputs)
    except OutcomeChanged as changed:
        return OtherOutcome(entry, changed.index, changed.value, changed.earlier)
    except Exception as e:
        add_runtime_note(e)
        if entry.rerun_on_failure and reruns_after(e, entry):
            raise _FailedBeforeEffects(e, entry) from None
        raise


def _first_run(entry: CacheEntry, inputs: Any, before: tuple) -> Any:
    """The first call of a new entry, whose inputs (the prologue's per-call draws among them) were made while it
    compiled, from the generators' state ``before``: a call that stops at a data-dependent value puts back what they
    drew, so that the entry it continues in draws them again as eager does once (``slow_call`` puts them back itself
    once it knows the function draws)."""
    result = _run(entry, inputs)
    if type(result) is OtherOutcome:
        restore_python_random_state(before, generator_draws(entry))
    return result


def jit(
    fn: Callable,
    /,
    *,
    langctx=None,
    executors: Sequence[Executor | str] | None = None,
    sharp_edges=None,
    cache=None,
    disable_torch_autograd: bool = False,
    transforms: Sequence[Transform] | None = None,
    debug_options: DebugOptions | None = None,
    **compile_options,
) -> Callable:
    """Compiles ``fn`` (a function or ``torch.nn.Module``) just in time.

    Args:
        fn: what to compile.
        langctx: the language to emulate (only ``"torch"``).
        executors: executors or names, highest priority first (default:
            ``thunder.extend.get_default_executors()``), always extended by torch and python.
        sharp_edges: ``"allow"``, ``"warn"`` or ``"error"`` for things a trace cannot capture.
        cache: ``"no caching"``, ``"constant values"`` (default), ``"same input"`` or ``"symbolic values"``.
        disable_torch_autograd: do not connect results to torch autograd.
        transforms: ``thunder.Transform`` instances.
        debug_options: a ``thunder.DebugOptions``.
        compile_options: named options (see ``last_compile_options``), among them
            ``cache_size_limit``: how many entries the cache keeps (default 256); beyond it the
            least recently used entry is evicted, with its generated code; and
            ``recompile_warning_limit``: after this many cache misses a ``thunder.RecompileWarning``
            says why the function keeps recompiling (default 32; None: never).

    Returns:
        A callable with ``fn``'s signature. See ``thunder.last_traces`` and friends.

    Raises:
        InterpreterError: at once, on a Python version the interpreter does not support.
    """
    import torch as _torch

    check_python_version()

    if isinstance(fn, _torch.nn.Module):
        from thunder.core.module import ThunderModule

        options = make_compile_options(
            executors=executors, cache=cache, sharp_edges=sharp_edges, disable_torch_autograd=disable_torch_autograd,
            transforms=transforms, debug_options=debug_options, langctx=langctx, extra=compile_options,
        )  # fmt: skip
        return ThunderModule(fn, options)
    if not callable(fn):
        raise TypeError(f"thunder.jit expects a function or torch.nn.Module, got {type(fn).__name__}")
    options = make_compile_options(
        executors=executors, cache=cache, sharp_edges=sharp_edges, disable_torch_autograd=disable_torch_autograd,
        transforms=transforms, debug_options=debug_options, langctx=langctx, extra=compile_options,
    )  # fmt: skip
    return _make_jitted(fn, CompileData(fn, options))


# Note [Recording the last inputs]
# A tool that reruns what the user ran (thunder_viz's explorer, opened after an ordinary training
# step) needs the inputs of the last call. While ``_record_last_inputs(True)`` is in effect each
# call keeps a reference to its arguments in its function's state (``_last_inputs``); otherwise
# nothing is kept. The flag is a list that holds ``True`` while recording and nothing otherwise, so its truth
# is the flag's: the bump of a function's hit counter returns it (``AtomicCounter``), and the jitted function's
# own code (Note [The fused prologue is the jitted function's code] in ``thunder.core.codegen``) asks nothing
# more on a hit (``if next(_thunder_hits): <record>``, after its checks; before the slow path on a miss).
_recording_last_inputs: list = []


def _record_last_inputs(enabled: bool = True) -> None:
    """Turns recording of each jitted function's last inputs on or off (Note [Recording the last inputs])."""
    _recording_last_inputs[:] = [True] if enabled else []


def _recording_inputs() -> bool:
    """Whether each jitted function records its last inputs (Note [Recording the last inputs])."""
    return bool(_recording_last_inputs)


def _last_inputs(fn) -> tuple[tuple, dict] | None:
    """The (args, kwargs) of ``fn``'s last call while recording; for a module, without the module."""
    state = _state(fn)
    if state.last_inputs is None:
        return None
    args, kwargs = state.last_inputs
    return (args[1:], kwargs) if state.cd.is_module else (args, kwargs)


# The hot path of a jitted function whose last entry's fused prologue is not its own code (Note [The fused prologue is
# the jitted function's code] in ``thunder.core.codegen``): the last entry's prologue decides, with no exceptions, no
# lookups and no lock (Note [Concurrent calls]); the ``try`` costs nothing unless the computation raises (Note [Runtime
# errors] in ``thunder.runtime_errors``). It reads the globals the fused prologues' own code reads, and a few more. It
# is compiled as the lines of this file it stands on: thunder's own code, which tracebacks show and which what looks
# for the caller's frame skips, not generated code.
_DISPATCH_SOURCE = """
def fn_(*args, **kwargs):
    if _thunder_recording:
        _thunder_state.last_inputs = (args, kwargs)
    entry = _thunder_state.last_entry
    if entry is not None:
        try:
            result = entry.run(args, kwargs)  # the tuple and dict as they are: no repacking
        except _OutcomeChanged as changed:
            return _thunder_slow(args, kwargs, _OtherOutcome(entry, changed.index, changed.value, changed.earlier))
        except Exception as e:
            _thunder_note(e)
            if entry.rerun_on_failure and _reruns_after(e, entry):
                return _thunder_state.rerun_after_failure(args, kwargs, e, entry)
            raise
        if result is not _MISS:
            next(_thunder_hits)
            return result
    return _thunder_slow(args, kwargs)
"""
_LINE = sys._getframe().f_lineno  # the line after the source: the source's first line is _LINE - its newlines - 1
_DISPATCH = compile("\n" * (_LINE - 2 - _DISPATCH_SOURCE.count("\n")) + _DISPATCH_SOURCE, __file__, "exec")
_DISPATCH_CODE = next(c for c in _DISPATCH.co_consts if isinstance(c, types.CodeType))
del _LINE, _DISPATCH


# Note [A jitted function under torch.compile]
# ``torch.compile(thunder.jit(f))``, or a torch.compiled function that calls a jitted one (Hugging Face's ``generate``
# compiles the model's call where its cache is static on a GPU): Dynamo traced the jitted function's code, the fused
# prologue's own code and thunder's cache and compiled code behind it: a crash on the prologue's constants, or minutes
# per call with thunder's cache counters off. Dynamo now runs the jitted function as is, a graph break: its function
# carries ``torch.compiler.disable``'s mark (``_torchdynamo_disable``), which Dynamo reads where it would inline the
# call, and each code the function runs (the dispatch code, every fused prologue's own code) is skipped by Dynamo's
# frame evaluation with everything it calls (``set_code_exec_strategy``: SKIP, recursively). Both are set once, where
# the function is made and where a code is installed, so the hot path stays as it is (``torch.compiler.disable`` would
# wrap each call: about a microsecond); the strategy is torch's C extension's, so nothing imports ``torch._dynamo``.
# Dynamo guards its graph on the jitted function's ``__code__``: a call whose last entry changed recompiles the
# caller's frame once per code (Dynamo keeps up to ``recompile_limit`` of them).
try:
    from torch._C._dynamo.eval_frame import _FrameAction, _FrameExecStrategy
    from torch._C._dynamo.eval_frame import set_code_exec_strategy as _set_code_exec_strategy

    _DYNAMO_SKIPS = _FrameExecStrategy(_FrameAction.SKIP, _FrameAction.SKIP)
except ImportError:  # (a torch before frame strategies: the function's mark alone)
    _set_code_exec_strategy = None


def _skipped_by_dynamo(code: types.CodeType) -> types.CodeType:
    """``code``, which Dynamo now runs as is with everything it calls (Note [A jitted function under
    torch.compile])."""
    if _set_code_exec_strategy is not None:
        _set_code_exec_strategy(code, _DYNAMO_SKIPS)
    return code


def _make_jitted(fn: Callable, cd: CompileData) -> Callable:
    state = _Jitted(cd)
    recording = _recording_last_inputs
    cs = state.cs
    slow_call = state.slow_call

    if cd.cache_option is CACHE_OPTIONS.CONSTANT_VALUES or cd.cache_option is CACHE_OPTIONS.SYMBOLIC_VALUES:
        hooks = {
            "__builtins__": builtins, "_thunder_recording": recording, "_thunder_state": state,
            "_thunder_slow": slow_call, "_thunder_hits": cs.hits.count, "_thunder_note": add_runtime_note,
            "_OutcomeChanged": OutcomeChanged, "_OtherOutcome": OtherOutcome, "_MISS": MISS,
            "_reruns_after": reruns_after,
            "_thunder_absent": codegen.ABSENT, "_thunder_args": codegen.positional_args,
        }  # fmt: skip
        # (its defaults: Note [Positional arguments of the jitted function's own code] in thunder.core.codegen)
        fn_ = types.FunctionType(_DISPATCH_CODE, hooks, "fn_", (codegen.ABSENT,) * codegen.POSITIONAL)
        state.fn, state.dispatch_code = weakref.ref(fn_), fn_.__code__
    else:

        def fn_(*args, **kwargs):
            if recording:
                state.last_inputs = (args, kwargs)
            return slow_call(args, kwargs)

    functools.update_wrapper(fn_, fn)
    _skipped_by_dynamo(fn_.__code__)  # Note [A jitted function under torch.compile]
    fn_._torchdynamo_disable = True
    fn_._torchdynamo_disable_msg = "thunder.jit's function runs as is"
    fn_._thunder = state
    fn_._lc_cd = cd
    fn_._lc_cs = cs
    return fn_


# ThunderModule (thunder.core.module) compiles its forward through this entry: core imports nothing above it.
_install_jit_entry(lambda fn, options: _make_jitted(fn, CompileData(fn, options, is_module=True)))


def _state(fn) -> _Jitted:
    state = getattr(fn, "_thunder", None)
    if state is None:
        raise TypeError(
            f"{getattr(fn, '__name__', fn)!r} is not a function returned by thunder.jit; call thunder.jit on it first"
        )
    return state


def compile_data(fn) -> CompileData:
    """The options ``fn`` was compiled with."""
    return _state(fn).cd


def compile_stats(fn) -> CompileStats:
    """Counters, timings and trace histories of ``fn``'s last compilation."""
    return _state(fn).cs


def last_traces(fn) -> list[TraceCtx]:
    """The computation traces of the last compilation: the traced program, then one per pass."""
    traces = _state(fn).cs.last_traces
    if traces is None:
        raise TypeError("no traces yet: call the jitted function first")
    return traces


def last_prologue_traces(fn) -> list[TraceCtx]:
    cs = _state(fn).cs
    traces = cs.last_prologue_traces
    if traces is None:
        raise TypeError("no traces yet: call the jitted function first")
    if cs.executed_prologue is not None:  # Note [The executed prologue is made when needed] in thunder.entry_run
        cs.executed_prologue()
    return traces


def last_backward_traces(fn) -> list[TraceCtx]:
    traces = _state(fn).cs.last_backward_traces
    if traces is None:
        raise TypeError("no traces yet: call the jitted function first")
    return traces


def cache_option(fn) -> CACHE_OPTIONS:
    return _state(fn).cd.cache_option


def cache_hits(fn) -> int:
    return _state(fn).cs.cache_hits


def cache_misses(fn) -> int:
    return _state(fn).cs.cache_misses


def cache_miss_reasons(fn) -> list[CacheMissReason]:
    """Why the recent calls of ``fn`` missed the cache, oldest first (the last 64 misses).

    Each ``thunder.CacheMissReason`` names the check that failed (``shape``, ``dtype``, ``value``,
    ``type``, ...), the input it failed on by its prologue name (``x``, ``args``,
    ``self_fc1_weight``), the value the cached trace was made for and the value of the call:
    ``str(reason)`` reads like ``"x shape changed (4,) -> (5,)"``. The first call's reason is
    that nothing was compiled yet. A reason compares the call with the most recently used entry.
    Like ``TORCH_LOGS=recompiles`` for ``torch.compile``.

    Args:
        fn: a function or module returned by ``thunder.jit``.

    Returns:
        A list of ``thunder.CacheMissReason``.

    See also: ``thunder.cache_misses``, the compile option ``cache_size_limit``.
    """
    return list(_state(fn).miss_reasons)


def list_transforms(fn) -> list:
    return _state(fn).cd.transforms


def last_interpreted_instructions(fn) -> list:
    """The bytecode instructions the interpreter ran on the last cache miss."""
    instructions = _state(fn).cs.last_interpreted_instructions
    if instructions is None:
        raise TypeError("no interpretation yet: call the jitted function first")
    return instructions


def last_interpreter_log(fn) -> list:
    """Instructions, calls, returns and lookasides of the last cache miss.

    Recorded only with ``debug_options=thunder.DebugOptions(record_interpreter_history=True)``.
    """
    log = _state(fn).cs.last_interpreter_log
    if log is None:
        raise TypeError(
            "no interpreter log: jit with debug_options=thunder.DebugOptions(record_interpreter_history=True) "
            "and call the function first"
        )
    return log


def last_compile_options(fn, /) -> None:
    """Prints which named compile options were used by the last compilation and which were not."""
    cd = _state(fn).cd
    used = sorted(k for k in cd.compile_options if k in cd._used_compile_options)
    unused = sorted(k for k in cd.compile_options if k not in cd._used_compile_options)
    print("Used compile options:")
    for k in used:
        print(f"  {k}={cd.compile_options[k]!r}")
    print("Unused compile options:")
    for k in unused:
        print(f"  {k}={cd.compile_options[k]!r}")


def trace(
    compile_data: CompileData | None = None,
    inline_trace: bool = True,
    rename_proxies: bool = True,
    include_return_statement: bool = True,
    use_dce: bool = True,
) -> Callable[..., TraceCtx]:
    """lightning-thunder's ``thunder.trace()(fn, *args, **kwargs)``: the trace of ``fn`` for these
    inputs, without running anything.

    The program is traced as ``thunder.jit`` traces it (under the interpreter, torch calls
    recorded as torch-language symbols) and, with ``use_dce``, dead code is eliminated; no
    executor claims anything and nothing is cached. The trace is named after ``fn``.

    Args:
        compile_data: options to trace with (its executors and transforms are not applied;
            its cache and sharp-edges options are); default: ``thunder.jit``'s defaults.
        inline_trace: when called while another trace is being recorded, call ``fn`` so that
            its operations join that trace (and return its result) instead of making a new one.
        rename_proxies: accepted for lightning-thunder's signature: the inputs always become
            new proxies, named after ``fn``'s parameters.
        include_return_statement: keep the final ``return`` of the trace.
        use_dce: eliminate dead code.

    Returns:
        A function ``(fn, *args, **kwargs) -> TraceCtx``.
    """
    from thunder.compiler import acquire_traces
    from thunder.core.tracectx import get_tracectx
    from thunder.transforms import dce

    def trace_fn(fn: Callable, *args, **kwargs) -> TraceCtx:
        if inline_trace and get_tracectx() is not None:
            return fn(*args, **kwargs)
        options = compile_data.options if compile_data is not None else make_compile_options(
            executors=None, cache=None, sharp_edges=None, disable_torch_autograd=True, transforms=None,
            debug_options=None, langctx=None, extra={},
        )  # fmt: skip
        _, computation, _ = acquire_traces(CompileData(fn, options), args, kwargs)
        result = dce(computation) if use_dce else computation
        if not include_return_statement and result.bound_symbols and result.bound_symbols[-1].sym is prims.python_return:
            result.bound_symbols = result.bound_symbols[:-1]
            result.scopes = [result.bound_symbols]
        name = getattr(fn, "__name__", None)
        if name is not None and name.isidentifier():
            result.name = name
        return result

    return trace_fn
