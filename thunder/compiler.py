"""The compile pipeline of ``thunder.jit``: acquire the traces, run the passes, build the
callables, and find cached entries.

Each step is a small function over explicit state (``CompileData``, ``CompileStats``,
``CacheEntry``); nothing here closes over compile state.

Layer: entry points. Imports: core, extend, transforms, executors.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import gc
import math
import random
import sys
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any

import torch

from thunder.cache_diagnostics import DiagnosticPrologue, MissRecord, Rejection, explain
from thunder.common import CACHE_OPTIONS, DEFAULT_CACHE_SIZE_LIMIT, MISS, CacheEntry, CompileData, CompileStats
from thunder.core import prims
from thunder.core.data_dependent import draws_random
from thunder.core.errors import InternalError
from thunder.core.iterators import RESTORABLE
from thunder.core.jit_ext import Tracer, copies_per_call
from thunder.core.prims.python import OutcomeChanged, SymbolicOutcome, same_outcome
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_leaves
from thunder.core.shape_history import ShapeHistory
from thunder.core.symbol import BoundSymbol
from thunder.core.symbol_lookup import symbol_for
from thunder.core.symbolic import is_symbolic, recording_constraints
from thunder.core.symbolic_numbers import GeneratorDraw
from thunder.core.trace import TraceCtx, TraceProvenance
from thunder.core.traced_autograd import applied_as_themselves
from thunder.core.transforms import ForwardBackward, NotDifferentiable, requires_grad_outputs, split_forward_backward
from thunder.entry_run import ExecutedPrologue, FusedWhenReused, input_key
from thunder.executors.torch_autograd import autograd_callable, make_plan
from thunder.executors.torchex import eager_fallback
from thunder.settled_autograd import settled_autograd
from thunder.transforms import (
    accept_absent_cotangents,
    cse,
    dce,
    delete_last_used,
    fold_broadcasts,
    rematerialize,
    remove_identities,
    transform_for_execution,
    without_absent_cotangents,
)
from thunder.transforms.cse import possibly_mutated


def acquire_traces(
    cd: CompileData, args: tuple, kwargs: dict, cs: CompileStats | None = None, outcomes: tuple = (),
    cache_option: CACHE_OPTIONS | None = None, shape_history: ShapeHistory | None = None, automatic_dynamic: bool = False,
    eager_on_raise: bool = False,
) -> tuple[TraceCtx, TraceCtx, Tracer]:
    """Runs the program under the interpreter: the prologue and computation traces.

    ``outcomes``: data-dependent values known for these inputs (Note [Data-dependent values] in
    ``thunder.core.data_dependent``). If the program fails while being traced, what was recorded up
    to the failure is published in ``cs`` (as the "Interpretation (incomplete)" trace) before the
    error propagates; with ``eager_on_raise``, an exception that is not thunder's comes as ``ProgramRaised``
    (Note [A program that raises])."""
    start = time.perf_counter_ns()
    executors_or_none = {None, *cd.options.executors}
    unroll: frozenset = frozenset()
    history = None if shape_history is None else {k: copy.copy(getattr(shape_history, k)) for k in ShapeHistory.__slots__}
    while True:
        if unroll and history is not None:  # a retrace decides what is symbolic as the first try did
            for k, v in history.items():
                setattr(shape_history, k, copy.copy(v))
        tracer = Tracer(
            cd.fn,
            # A function that a user operator replaces is that operator only where its executor runs.
            symbol_lookup=lambda fn: symbol_for(fn, accept=lambda sym: getattr(sym, "executor", None) in executors_or_none),
            cache_option=cache_option or cd.cache_option,
            sharp_edges=cd.sharp_edges,
            record_history=cd.debug_options.record_interpreter_history,
            eager_impl=eager_fallback,
            outcomes=outcomes,
            shape_history=shape_history,
            automatic_dynamic=automatic_dynamic,
            unroll=unroll,
        )
        try:
            tracer.trace(args, kwargs)
        except BaseException as e:
            # (a KeyboardInterrupt inside a loop's body is the user's, not the loop's; a site refused twice ends it)
            refused = None if isinstance(e, (KeyboardInterrupt, SystemExit)) else tracer.refused_loop()
            if refused is not None and refused not in unroll:  # traced again, that loop unrolled (Note [Loops over a symbolic range])
                tracer.release()
                unroll |= {refused}
                continue
            if not isinstance(e, Exception):
                raise
            if cs is not None:
                partial = tracer.computation
                partial.set_provenance(TraceProvenance("Interpretation (incomplete)", (time.perf_counter_ns() - start) / 1e6))
                cs.last_traces, cs.last_prologue_traces, cs.last_backward_traces = [partial], [tracer.prologue], []
                cs.executed_prologue = None
            raised = tracer.program_raised is e
            tracer.release()
            if raised and eager_on_raise and not cd.options.transforms:
                raise ProgramRaised(e) from None
            raise
        refused = tracer.refused_loop()
        if refused is None or refused in unroll:
            break
        tracer.release()
        unroll |= {refused}
    ms = (time.perf_counter_ns() - start) / 1e6
    tracer.computation.set_provenance(TraceProvenance("Interpretation", ms))
    tracer.prologue.set_provenance(TraceProvenance("Interpretation", ms))
    return tracer.prologue, tracer.computation, tracer


@dataclasses.dataclass(frozen=True)
class Pass:
    """A named step of the pipeline: ``run(cd, trace) -> trace``."""

    name: str
    run: Callable[[CompileData, TraceCtx], TraceCtx]
    backward_only: bool = False  # after the split: runs on the backward trace only
    # After the split, on both traces at once: ``run(cd, forward, backward, split)`` returns the
    # new forward, backward and split, or None when it changes nothing (then it leaves no trace).
    joint: bool = False


#: The slot of the pipeline where a computation that needs gradients is split into a forward
#: and a backward trace; every pass after it runs on both.
AUTOGRAD_SPLIT = Pass("Forward and backward split", lambda cd, trace: trace)


def _user_transforms(cd: CompileData, trace: TraceCtx) -> TraceCtx:
    """The users' ``Transform.transform_trace_post_optimization`` hooks, each leaving a trace if it changes it."""
    for transform in cd.options.transforms:
        start = time.perf_counter_ns()
        new = transform.transform_trace_post_optimization(trace, executors_list=list(cd.options.executors))
        if new is not trace:
            new.set_provenance(TraceProvenance(type(transform).__name__, (time.perf_counter_ns() - start) / 1e6))
            trace = new
    return trace


#: The computation pipeline, in order (Note [The pipeline]).
PIPELINE: tuple[Pass, ...] = (
    Pass("Dead Code Elimination", lambda cd, t: dce(t)),
    # (Note [CSE before the autograd split] in thunder.transforms.cse)
    Pass("Common Subexpression Elimination", lambda cd, t: cse(t, keep_differentiable=_splits(cd, t))),
    AUTOGRAD_SPLIT,
    # The forward is the computation as it was; the backward, built from rules, drops the ops that
    # do nothing for its shapes, leaves broadcasts to the elementwise ops and gets its own CSE.
    Pass("Remove identities", lambda cd, t: remove_identities(t), backward_only=True),
    Pass("Fold broadcasts", lambda cd, t: fold_broadcasts(t), backward_only=True),
    Pass("Common Subexpression Elimination", lambda cd, t: cse(t), backward_only=True),
    Pass("Rematerialization", lambda cd, fw, bw, split: _rematerialize(cd, fw, bw, split), joint=True),
    Pass("Transform for execution", lambda cd, t: transform_for_execution(t, cd.options.executors)),
    Pass("User transforms", _user_transforms),
    Pass("Delete Last Used", lambda cd, t: delete_last_used(t)),
)


# Note [The pipeline]
# Each pass leaves its own trace (``timed_pass``), appended to the history as soon as it exists, so
# a pass that fails leaves the steps before it visible. A user transform that changes nothing leaves
# no trace. At the autograd slot, a computation whose outputs require grad (and whose function was not
# jitted with ``disable_torch_autograd``) becomes a forward trace, continuing ``traces``, and a backward
# trace, starting ``backward_traces`` (Note [Forward and backward traces] in thunder.core.transforms);
# the passes after the slot run on both. What the split cannot differentiate runs under torch's
# autograd instead (``CompileStats.last_autograd_fallback`` says why).
def run_passes(
    cd: CompileData,
    computation: TraceCtx,
    traces: list[TraceCtx] | None = None,
    backward_traces: list[TraceCtx] | None = None,
    cs: CompileStats | None = None,
) -> ForwardBackward | None:
    """Runs ``PIPELINE`` over the computation; returns the autograd split, if there was one."""
    traces = traces if traces is not None else []
    backward_traces = backward_traces if backward_traces is not None else []
    traces.append(computation)
    split: ForwardBackward | None = None
    for step in PIPELINE:
        if step is AUTOGRAD_SPLIT:
            split = _autograd_split(cd, traces[-1], cs, traces)
            if split is not None:
                traces.append(split.forward)
                backward_traces.append(split.backward)
            continue
        if (step.backward_only or step.joint) and split is None:
            continue
        if step.joint:
            start = time.perf_counter_ns()
            changed = step.run(cd, traces[-1], backward_traces[-1], split)
            if changed is not None:
                forward, backward, split = changed
                provenance = TraceProvenance(step.name, (time.perf_counter_ns() - start) / 1e6)
                for history, new in ((traces, forward), (backward_traces, backward)):
                    new.set_provenance(provenance)
                    history.append(new)
                    _maybe_verify(cd, new)
            continue
        histories = (backward_traces,) if step.backward_only else (traces, backward_traces) if split else (traces,)
        for history in histories:
            new = step.run(cd, history[-1])
            if new is not history[-1]:
                history.append(new)
                _maybe_verify(cd, new)
    return split


def _autograd_split(
    cd: CompileData, trace: TraceCtx, cs: CompileStats | None, traces: list[TraceCtx]
) -> ForwardBackward | None:
    """The split of ``trace``, or None; where torch's autograd runs the program instead, ``traces`` gets the
    computation it runs (Note [A Function in a program torch's autograd runs])."""
    if not _splits(cd, trace):
        return None
    start = time.perf_counter_ns()
    try:
        split = split_forward_backward(trace, functools.partial(_executor_grad_transform, cd.options.executors))
    except NotDifferentiable as e:
        if cs is not None:
            cs.last_autograd_fallback = str(e)
        applied = applied_as_themselves(trace, str(e))
        if applied is not None:
            applied = dce(applied)
            applied.set_provenance(TraceProvenance("Functions applied as themselves for torch's autograd", 0.0))
            traces.append(applied)
        return None
    ms = (time.perf_counter_ns() - start) / 1e6
    split.forward.set_provenance(TraceProvenance(AUTOGRAD_SPLIT.name, ms))
    split.backward.set_provenance(TraceProvenance(AUTOGRAD_SPLIT.name, ms))
    return split


def _splits(cd: CompileData, trace: TraceCtx) -> bool:
    """Whether the autograd slot splits ``trace``: some output requires grad and torch's autograd is not disabled."""
    return not cd.disable_torch_autograd and requires_grad_outputs(trace)


def _rematerialize(cd: CompileData, forward: TraceCtx, backward: TraceCtx, split: ForwardBackward):
    """Note [Rematerialisation]: the split with fewer values saved, where fusions recompute them."""
    changed = rematerialize(forward, backward, split.saved, cd.options.executors)
    if changed is None:
        return None
    forward, backward, saved = changed
    return forward, backward, dataclasses.replace(split, saved=saved)


def _executor_grad_transform(executors, bsym) -> Callable | None:
    """The gradient the highest-priority executor that gives ``bsym`` one (and accepts its arguments) gives."""
    for ex in executors:
        info = getattr(ex, "implmap", {}).get(bsym.sym)
        if info is not None and info.grad_transform is not None and ex.can_execute(bsym):
            return info.grad_transform
    return None


def _maybe_verify(cd: CompileData, trace: TraceCtx) -> None:
    if cd.debug_options.check_traces:
        from thunder.core.verifier import verify

        verify(trace)


# Note [A run that fails before its effects]
# Two kinds of entry make effects in another order than eager does: a program split at data-dependent values makes
# its replays after the last check (Note [Data-dependent values]), and a prologue takes the items of an iterator
# argument that cannot be put back before the computation runs (Note [Iterator arguments]). A call whose computation
# then raises at run time (an index out of range, for values it was not traced with) left out the effects eager
# made before the failure (an append to a list), or took items eager had not taken. So where the computation raised
# before it made any effect that a second run would repeat (no replay, no write into a tensor, no random draw:
# ``failed_before_effects`` reads the generated frames of the traceback; an in-place op that torch refused, autograd's
# rule for a view or overlapping memory, wrote nothing), the call runs eagerly, on the iterator
# arguments replayed from what the prologue took (``rerun_after_failure``): eager's effects are made and eager's
# exception propagates. Where eager took fewer items of an iterator than the prologue had, the call fails with an
# error naming the argument (the items are gone). A computation that raised after an effect raises as before (a
# split program's replays then already ran after its last check; a rerun would repeat them). The prologue's draws
# from random generators (``random.random()``) are put back before the eager run, which draws as eager does; its
# other per-call calls (a copy of an outside object) count as effects. Calls tracing makes for real (an ``lru_cache``
# function's body, a draw), which eager makes only if it gets there, first raise the failure eager would meet before
# them on these inputs (``_raise_an_earlier_failure`` in ``thunder.core.jit_ext``): the call then runs eagerly.


# Note [A run-time failure the program handles]
# An op that fails at run time on the values (cholesky of a matrix that is not positive-definite, an index out of
# range) inside the program's ``try`` body: eager runs the handler, but the trace took the try body, and the
# computation raised out of the call. So an entry whose ops were recorded while a ``try``'s ``except`` or ``finally``
# of an interpreted frame covered them, or a ``with`` whose exit may suppress the exception (``contextlib.suppress``,
# a user's; not torch's grad mode, autocast or profiling ranges) (``Tracer.ops_in_try``) runs the call
# eagerly when its computation raises before any effect (Note [A run that fails before its effects]): eager runs the
# handler, or raises, and no warning is given, as that difference is expected. Tracing the failure path instead
# would need the op's failure as a data-dependent value, run before the try body's effects, for every op that may
# fail; a failure is rare, and the eager run is exact. After an effect the failure propagates, with a note saying
# the handler did not run and why. Such entries pay on the hot path only for the generic dispatch (no direct fused
# prologue). A draw the prologue makes per call for the program after an op that may fail at run time
# (``MAY_RAISE``) is the same case: a later call whose computation fails at that op had drawn where eager had not,
# so such an entry runs the failing call eagerly too, with its draws put back first (``GeneratorDraw.keeps``).


# Note [A program that raises]
# A program may raise (``raise ValueError(...)`` for bad input, an ``assert``, a missing attribute of its own object)
# after effects eager makes before the exception: an append to a global list, an in-place update of an input, a
# random draw, a print. Tracing records those effects for the computation to make, so a trace that stops at the
# exception made none of them: eager's list grew on every failing call, thunder's did not. So when tracing stops at
# an exception that is not thunder's (not a ``ThunderError``: the program's own, or a native call's), the call runs
# eagerly instead (``_Jitted.run_eagerly``): eager's effects happen and eager's exception propagates, with eager's
# traceback. Nothing is cached for such a call. Where the eager run does not raise (tracing took another path than
# eager did, or a native call failed on the trace's values), its result is returned with a warning: eager's values,
# never a guess, and an ``EagerRunWarning``: tracing and eager differed, which may be a bug of thunder's own code (an
# exception raised inside thunder looks the same from here), so the tests make that warning an error and the
# randomized tester counts it as an internal error. A thunder error (an unsupported op, a refused program) propagates
# as before, without running the program; so does every exception under user transforms, which change what the
# program does. But thunder's mirror of an argument check eager makes (a ``ThunderValueError`` where ``expand`` gets a
# size that does not fit) after the program made effects (a replay, an in-place op, a random draw) runs the call
# eagerly too: eager makes those effects before its own check raises.


class EagerRunWarning(UserWarning):
    """A call ran eagerly because tracing it raised where eager did not (Note [A program that raises]): its values
    are eager's, but tracing and eager execution differed, which is a bug to report. The tests make it an error."""


class ProgramRaised(Exception):
    """Tracing stopped at an exception that is not thunder's (``raised``): the call runs eagerly (Note [A program
    that raises])."""

    def __init__(self, raised: Exception):
        super().__init__(f"the program raised {type(raised).__name__} while traced")
        self.raised = raised


def compile_entry(
    cd: CompileData, cs: CompileStats, args: tuple, kwargs: dict, outcomes: tuple = (),
    cache_option: CACHE_OPTIONS | None = None, shape_history: ShapeHistory | None = None, automatic_dynamic: bool = False,
) -> tuple[CacheEntry, tuple]:
    """Traces and compiles a new cache entry for these inputs (whose data-dependent values
    begin with ``outcomes``), with ``cache_option`` (default: the function's); ``shape_history``: the sizes
    seen so far, and with ``automatic_dynamic`` the sizes that changed are symbolic (Note [Automatic dynamic
    shapes] in ``thunder.core.shape_history``). Returns the entry and its computation's inputs for this call."""
    start = time.perf_counter_ns()
    cache_option = cache_option or cd.cache_option
    with _collector_paused(), _random_state_kept() as drawn:
        prologue, computation, tracer = acquire_traces(
            cd, args, kwargs, cs, outcomes, cache_option, shape_history, automatic_dynamic, eager_on_raise=True
        )
        if tracer.dims or any(is_symbolic(v) for _, v in tracer.inputs):
            cache_option = CACHE_OPTIONS.SYMBOLIC_VALUES  # some sizes or ints are symbolic: keyed as such
        try:
            entry = _compile_traced(cd, cs, args, kwargs, prologue, computation, tracer, start, cache_option)
            # A property or __getattr__ that tracing ran may have drawn: the prologue must draw again for the call.
            first = tracer.first_inputs() if not cd.options.transforms and not drawn() else None
        finally:
            tracer.release()
    # (a prologue that copies per call is not run again to verify: the copy would be made twice)
    if first is None or (VERIFY_FIRST_INPUTS and not any(map(copies_per_call, entry.prologue_traces[0].bound_symbols))):
        accepted = check_prologue_accepts(entry, args, kwargs)
        if first is not None:
            _check_same_inputs(first, accepted, entry)
        first = accepted
    return entry, first


# Note [The first call runs no prologue]
# An entry's prologue is a few hundred lines of checks that CPython compiles in about 10 ms (a GPT-2's: 630 lines,
# 74 KB), more than the rest of a small entry's codegen. Many entries run once (a generation's prefill and first
# decode step), and the call an entry was traced for needs no checks: tracing read every value the prologue would
# return. So that call takes its inputs from the tracer (``Tracer.first_inputs``) where the prologue only reads and
# checks and tracing drew no random numbers; one that draws numbers or pulls items from an iterator for the program
# runs, so its effects happen once, and so does one whose tracing drew (a property the tracer read natively, whose
# draw the restored generators undo: the prologue must draw it again for the call).
# A later call that meets the entry compares the input key first (``input_key``: a different key cannot pass the
# prologue), then compiles the fused prologue (Note [The fused prologue is compiled on reuse] in ``thunder.entry_run``);
# the diagnostic prologue compiles when a miss must be explained or another lookup tries the entry
# (``DiagnosticPrologue``). The tests set ``VERIFY_FIRST_INPUTS``: every first call also runs the prologue and must get the same objects.
VERIFY_FIRST_INPUTS = False


def _same_input(a: Any, b: Any) -> bool:
    """The same object, an equal number, or (a property computing it on each read) an equal tensor."""
    if a is b or (type(a) is type(b) and type(a) in (int, float, bool) and a == b):
        return True
    return (
        isinstance(a, torch.Tensor)
        and type(a) is type(b)
        and (a.shape, a.dtype, a.device, a.requires_grad) == (b.shape, b.dtype, b.device, b.requires_grad)
        and (torch.equal(a, b) or (a.is_floating_point() and torch.allclose(a, b, rtol=0, atol=0, equal_nan=True)))
    )


def _check_same_inputs(first: tuple, accepted: tuple, entry: CacheEntry) -> None:
    same = len(first) == len(accepted) and all(map(_same_input, first, accepted))
    if not same:
        raise InternalError(
            f"the inputs known from tracing differ from what the prologue returns: {first!r} against {accepted!r}. "
            f"Prologue:\n{entry.prologue_traces[-1]}"
        )


@contextlib.contextmanager
def _random_state_kept() -> Iterator[Callable[[], bool]]:
    """Compiling draws no random numbers of the program's: what tracing runs for real (the small CPU replays
    that find eager's layouts, Note [Ambiguous layouts]) may draw from torch's generators, which are put back,
    so that the first call draws what eager draws (Longformer's first training call differed from eager's)."""
    cpu = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    python = python_random_state()

    def drawn() -> bool:
        """Whether compiling has drawn from torch's, Python's or NumPy's generators so far."""
        if not _same_python_random_state(python_random_state(), python):
            return True
        if not torch.equal(torch.random.get_rng_state(), cpu):
            return True
        return cuda is not None and not all(map(torch.equal, torch.cuda.get_rng_state_all(), cuda))

    try:
        yield drawn
    finally:
        torch.random.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


# Note [No garbage collection while compiling]
# A compile allocates hundreds of thousands of small objects (proxies, bound symbols, decoded instructions),
# which trigger Python's cyclic collector again and again, each pass scanning the whole heap of a process that
# imported torch and transformers: a third of a first GPT-2 generation's compile time (0.18 of 0.45 s). The
# collector is paused while any thread compiles and resumed after (if it was on); refcounting still frees what
# is not cyclic, and the next collection finds the rest.
# What a compile leaves alive (the entry's traces, generated code: tens of thousands of objects for a small model)
# lives as long as the cache entry, and a compile leaves no cyclic garbage (``Tracer.release`` breaks the cycles;
# ``tests/test_jit.py`` checks it). Left in the youngest generation, it would be scanned by the first collection
# after the compile and again by the next middle-generation one, for nothing (a first Qwen2 generation's two
# compiles: about 5 ms). So the young generations are collected before the compile (the program's own young
# garbage is freed as usual; a few thousand objects at most) and what is young after it, the compile's, is moved
# to the oldest generation unscanned (``gc.freeze``/``gc.unfreeze``; skipped where the program froze objects
# itself, which ``gc.unfreeze`` would release). Only on Python 3.11, where the tests show no cycles are left: on 3.12
# the interpreter's other paths still leave some, and there the compile's objects stay young as before.
_SURVIVORS_TO_OLDEST = sys.version_info[:2] == (3, 11)
_compiling = 0
_compiling_lock = threading.Lock()
_collector_was_enabled = False


@contextlib.contextmanager
def _collector_paused():
    global _compiling, _collector_was_enabled
    with _compiling_lock:
        if _compiling == 0:
            _collector_was_enabled = gc.isenabled()
            if _SURVIVORS_TO_OLDEST and _collector_was_enabled and not gc.get_freeze_count():
                gc.collect(1)
            gc.disable()
        _compiling += 1
    try:
        yield
    finally:
        with _compiling_lock:
            _compiling -= 1
            if _compiling == 0 and _collector_was_enabled:
                if _SURVIVORS_TO_OLDEST and not gc.get_freeze_count():
                    gc.freeze()
                    gc.unfreeze()
                gc.enable()


def _compile_traced(cd: CompileData, cs: CompileStats, args: tuple, kwargs: dict, prologue: TraceCtx,
                    computation: TraceCtx, tracer: Tracer, start: int, cache_option: CACHE_OPTIONS) -> CacheEntry:  # fmt: skip
    """The passes and codegen of ``compile_entry`` for the traces ``tracer`` made."""
    for transform in cd.options.transforms:
        prologue, computation, _ = transform.transform_traces_pre_prologue(prologue, computation, None, compile_data=cd)
    # Published before the passes run: if one fails, the traces made so far stay inspectable.
    traces: list[TraceCtx] = []
    backward_traces: list[TraceCtx] = []
    cs.last_traces, cs.last_prologue_traces, cs.last_backward_traces = traces, [prologue], backward_traces
    cs.executed_prologue = None
    cs.last_autograd_fallback = None
    with recording_constraints() as late:  # what the passes specialised on symbolic values, checked too
        split = run_passes(cd, computation, traces, backward_traces, cs)
    tracer.check_constraints(late)
    final = traces[-1]
    used = _used_symbol_names(final) | (_used_symbol_names(backward_traces[-1]) if split is not None else set())
    final.args = tracer.finish_prologue(used)
    if cd.disable_torch_autograd:
        final.decorators.append("torch.no_grad()")
    prologue_traces = [prologue]
    executed_prologue = ExecutedPrologue(prologue, cd.options.executors, prologue_traces)
    switches = [b.args[0] for b in computation.bound_symbols if b.sym is prims.set_grad_enabled]
    if split is None:
        computation_fn = final.python_callable()
    else:
        backward, absent_ok = accept_absent_cotangents(backward_traces[-1], len(split.saved))
        if backward is not backward_traces[-1]:
            backward_traces.append(backward)
        variant = _backward_variant(cd, backward_traces, len(split.saved))
        computation_fn = _autograd_computation(split, final, backward, absent_ok, variant)
        cs.last_saved_for_backward_bytes = _saved_bytes(split)
        if switches:
            computation_fn = _switching_grad_mode(computation_fn, switches[-1])
    if tracer.outcomes and draws_random(computation):
        computation_fn = _restoring_rng_on_changed_outcome(computation_fn)
    if switches:
        computation_fn = _restoring_grad_mode_on_failure(computation_fn)
    written = _inputs_written_before_a_check(computation, final.args) if tracer.outcomes else ()
    if written:
        computation_fn = _restoring_inputs_on_changed_outcome(computation_fn, written)
    entry = CacheEntry(
        prologue=DiagnosticPrologue(executed_prologue),  # Note [Cache miss reasons]
        computation=computation_fn,
        run=MISS,  # set below, once the entry exists
        prologue_traces=prologue_traces,
        computation_traces=traces,
        backward_traces=backward_traces,
        key=input_key(cache_option, args, kwargs),
        symbolic=cache_option is CACHE_OPTIONS.SYMBOLIC_VALUES,
        outcomes=tuple(tracer.outcomes),
    )
    entry.misses = MissRecord(MISS)
    entry.caught = tracer.ops_in_try  # Note [A run-time failure the program handles]
    entry.rerun_on_failure = (
        _effects_out_of_eager_order(entry, tracer.moved_replays) or entry.caught or tracer.draws_after_may_raise
    )
    if entry.rerun_on_failure:
        for draw in generator_draws(entry):  # put back before the call runs again
            draw.keeps = True
    settled = None
    if split is not None and not switches and not tracer.outcomes:
        settled = settled_autograd(cd.options, weakref.ref(cs), traces, AUTOGRAD_SPLIT.name, backward_traces[-1])
    plain = final if computation_fn is final.python_callable() else None
    entry.run = entry.fuser = FusedWhenReused(entry, executed_prologue, cache_option, plain, settled)
    if entry.outcomes and draws_per_call(entry):
        entry.run = _restoring_draws_on_changed_outcome(entry.run, entry)
    # What the hot path does around an entry's run, but for its plain call: no outcomes to change, no eager run
    # after a failure, no per-call draws of a prologue that may miss (Note [The entry used before is tried next]).
    entry.tried_next = not entry.outcomes and not entry.rerun_on_failure and not draws_per_call(entry)
    cs.last_trace_tracing_ms = computation.provenance.ms
    cs.last_compile_ms = entry.compile_ms = (time.perf_counter_ns() - start) / 1e6
    cs.total_compile_ms += cs.last_compile_ms
    cs.last_traces = traces
    cs.last_prologue_traces = prologue_traces
    cs.executed_prologue = executed_prologue
    cs.last_backward_traces = backward_traces
    from thunder.core.interpreter import last_interpreted_instructions, last_interpreter_log

    cs.last_interpreted_instructions = last_interpreted_instructions(tracer.interpreted)
    cs.last_interpreter_log = last_interpreter_log(tracer.interpreted) if cd.debug_options.record_interpreter_history else None
    return entry


def _effects_out_of_eager_order(entry: CacheEntry, moved_replays: bool) -> bool:
    """Whether a run of ``entry`` that fails before its effects runs the call eagerly (Note [A run that fails
    before its effects])."""
    return moved_replays or any(
        b.sym is prims.unpack_iterator and b.args[1] not in RESTORABLE for b in entry.prologue_traces[0].bound_symbols
    )


def _inputs_written_before_a_check(computation: TraceCtx, args: list) -> tuple[int, ...]:
    """The positions among ``args`` of the tensors that the program writes (directly or through views) before its
    last data-dependent check (Note [Data-dependent values])."""
    bsyms = computation.bound_symbols
    last = max((i for i, b in enumerate(bsyms) if b.sym is prims.check_outcome and _may_fail(b)), default=-1)
    if last < 0:
        return ()
    written = possibly_mutated(bsyms[:last])
    return tuple(i for i, a in enumerate(args) if isinstance(a, TensorProxy) and a.name in written)


def _may_fail(check: BoundSymbol) -> bool:
    """Whether a data-dependent check may stop a call: all but a symbolic value with no constraint (any int)."""
    expected = check.args[2]
    return type(expected) is not SymbolicOutcome or bool(expected.constraints)


def _restoring_inputs_on_changed_outcome(computation: Callable, written: tuple[int, ...]) -> Callable:
    """A call that stops at a changed data-dependent value runs again in another entry, from the start: the input
    tensors it wrote before the check get their values back first, so the writes happen once (``x.mul_(2)`` then
    ``int((x > 0).sum())`` doubled ``x`` twice when the count changed). Each call copies their storages (an
    expanded input's elements share memory, which ``copy_`` into the tensor refuses)."""

    def run(*inputs):
        storages = {s.data_ptr(): s for s in (inputs[i].untyped_storage() for i in written)}
        saved = [(s, s.clone()) for s in storages.values()]
        try:
            return computation(*inputs)
        except OutcomeChanged:
            for storage, contents in saved:
                storage.copy_(contents)
            raise

    return run


def _restoring_rng_on_changed_outcome(computation: Callable) -> Callable:
    """A call that stops at a changed data-dependent value runs again in another entry: the random
    numbers it drew before the check are drawn again (Note [Data-dependent values])."""

    def run(*inputs):
        state = torch.random.get_rng_state()
        cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
        try:
            return computation(*inputs)
        except OutcomeChanged:
            torch.random.set_rng_state(state)
            if cuda is not None:
                torch.cuda.set_rng_state_all(cuda)
            raise

    return run


def _restoring_grad_mode_on_failure(computation: Callable) -> Callable:
    """A program that switches grad mode (``with torch.no_grad():``) and fails between the switches leaves the mode
    the call began in, as eager's ``with`` block does when the error propagates (a later training step recorded no
    graph). A call that stops at a changed data-dependent value, which runs again in another entry from the start,
    does so in the call's grad mode too (an optimizer's step runs under ``set_grad_enabled(False)``: the next entry
    was traced with grad off and left it off after the call). (A bare ``torch.set_grad_enabled(False)`` before the
    failure would leave eager's mode off: taken as a ``with``.)"""

    def run(*inputs):
        mode = torch.is_grad_enabled()
        try:
            return computation(*inputs)
        except BaseException:
            torch._C._set_grad_enabled(mode)
            raise

    return run


def _switching_grad_mode(computation: Callable, final: bool) -> Callable:
    """The autograd function of a program that switches grad mode (``torch.set_grad_enabled(b)``):
    it is applied with grad on, so what the program computes with grad on is differentiable even
    when the call starts with it off (the outputs that do not require grad are marked so), and the
    call ends in the mode the program left, as in eager (``Function.apply`` restores the mode)."""

    def run(*inputs):
        torch._C._set_grad_enabled(True)
        try:
            return computation(*inputs)
        finally:
            torch._C._set_grad_enabled(final)

    return run


def draws_per_call(entry: CacheEntry) -> bool:
    """Whether the entry's prologue calls ``random.random()`` and the like for the program."""
    return any(b.sym is prims.unpack_call for b in entry.prologue_traces[0].bound_symbols)


def python_random_state() -> tuple:
    """The state of Python's and NumPy's generators, which per-call values draw from. NumPy's only once something
    imported ``numpy.random``: reading ``numpy.random`` imports it (30 ms), which registers abstract base classes and
    so changes ``abc.get_cache_token()``, which entries compiled before it check (Note [Torch state])."""
    np_random = sys.modules.get("numpy.random")
    return random.getstate(), (np_random.get_state() if np_random is not None else None)


def _same_python_random_state(a: tuple, b: tuple) -> bool:
    (py_a, np_a), (py_b, np_b) = a, b
    if py_a != py_b or (np_a is None) != (np_b is None):
        return False
    if np_a is None:
        return True
    import numpy as np

    return np_a[0] == np_b[0] and np.array_equal(np_a[1], np_b[1]) and np_a[2:] == np_b[2:]


def restore_python_random_state(state: tuple, draws: tuple[GeneratorDraw, ...] = ()) -> None:
    """Puts Python's and NumPy's generators back to ``state``, and those of the program's own that ``draws`` drew from
    (last first)."""
    py, np_state = state
    random.setstate(py)
    if np_state is not None:
        sys.modules["numpy.random"].set_state(np_state)
    for draw in reversed(draws):
        draw.put_back()


def _restoring_draws_on_changed_outcome(run: Callable, entry: CacheEntry) -> Callable:
    """A call that stops at a changed data-dependent value runs again in another entry, whose
    prologue draws the per-call values again: they must be the draws this call made."""
    draws = generator_draws(entry)

    def restoring(args: tuple, kwargs: dict):
        state = python_random_state()
        try:
            return run(args, kwargs)
        except OutcomeChanged:
            restore_python_random_state(state, draws)
            raise

    return restoring


def generator_draws(entry: CacheEntry) -> tuple[GeneratorDraw, ...]:
    """The draws the entry's prologue makes from generators the program read from outside."""
    calls = (b.args[0] for b in entry.prologue_traces[0].bound_symbols if b.sym is prims.unpack_call)
    return tuple(c for c in calls if type(c) is GeneratorDraw)


def _autograd_computation(
    split: ForwardBackward, forward: TraceCtx, backward: TraceCtx, absent_ok: tuple[bool, ...],
    variant: Callable | None = None,
) -> Callable:  # fmt: skip
    """The computation of an entry with a backward: one autograd node over the compiled traces;
    ``absent_ok``: per cotangent, whether the backward takes None for it (Note [Absent cotangents])."""
    plan = make_plan(
        split, forward.args, forward.python_callable(), backward.python_callable(), split.rebuild.python_callable(),
        absent_ok, variant,
    )  # fmt: skip
    return autograd_callable(plan)


def _backward_variant(cd: CompileData, backward_traces: list[TraceCtx], n_saved: int) -> Callable | None:
    """What makes the backward for a set of absent cotangents from the backward before executors claimed its ops
    (Note [Backward without the cotangents that are absent]); None under users' transforms, which it would skip."""
    passes = [t.provenance.pass_name if t.provenance is not None else None for t in backward_traces]
    if cd.options.transforms or "Transform for execution" not in passes:
        return None
    before = backward_traces[passes.index("Transform for execution") - 1]

    def make(absent: frozenset[int]) -> tuple[Callable, tuple[bool, ...]] | None:
        start = time.perf_counter_ns()
        trace = without_absent_cotangents(before, n_saved, absent)
        if trace is None:
            return None
        trace = delete_last_used(transform_for_execution(dce(trace), cd.options.executors))
        trace, absent_ok = accept_absent_cotangents(trace, n_saved)
        fn = trace.python_callable()
        # the entry's last backward trace is then what its backward runs (the explorer shows it, a profile ranges it)
        trace.set_provenance(TraceProvenance("Backward without absent cotangents", (time.perf_counter_ns() - start) / 1e6))
        backward_traces.append(trace)
        return fn, tuple(ok or j in absent for j, ok in enumerate(absent_ok))

    return make


def _saved_bytes(split: ForwardBackward) -> int | None:
    """Bytes of the tensors the forward keeps for the backward (None when a size is symbolic)."""
    total = 0
    for p in split.saved:
        if isinstance(p, TensorProxy):
            if not all(type(d) is int for d in p.shape):
                return None
            total += math.prod(p.shape) * p.dtype.itemsize
    return total


def _used_symbol_names(trace: TraceCtx) -> set[str]:
    """Names of symbolic numbers the trace's code refers to."""
    names: set[str] = set()
    for bsym in trace.bound_symbols:
        _add_symbolic_names((bsym.args, bsym.kwargs), names)
    return names


def _add_symbolic_names(value: Any, names: set[str], depth: int = 0) -> None:
    """The names of the symbolic numbers in ``value``, also where the pytree does not look but the printed code
    does: a set's items and a dict's keys (a replay's ``s.update([1, x_0])``, ``d.update({(x_0,): 5})``)."""
    if is_symbolic(value):
        names |= value.names
    elif depth < 8 and isinstance(value, (set, frozenset, tuple, list)):
        for v in value:
            _add_symbolic_names(v, names, depth + 1)
    elif depth < 8 and isinstance(value, dict):
        for k, v in value.items():
            _add_symbolic_names(k, names, depth + 1)
            _add_symbolic_names(v, names, depth + 1)
    elif depth < 8:  # another pytree node (an object rebuilt with its values, a slice)
        leaves = tree_leaves(value)
        if len(leaves) != 1 or leaves[0] is not value:  # (not ``!=``: a proxy's ``==`` is an op)
            for leaf in leaves:
                _add_symbolic_names(leaf, names, depth + 1)


class Cache:
    """Entries by input key; the least recently used entry is evicted beyond ``limit``.

    Note [The cache under threads]
    Lookups take no lock. ``by_key`` maps a key to a tuple of entries that is replaced, never
    changed (copy on write), so a reader sees the old tuple or the new one, each complete.
    Adding and evicting happen under the jitted function's compile lock. Recency is an
    ``OrderedDict`` of entry ids, least recent first; a hit moves its entry to the end. Each of
    its operations is one C call on int keys, atomic under the GIL, so ``touch`` needs no lock.
    Hits on the hot path (the last entry used) do not touch: that entry is the most recent one.
    An evicted entry drops its last references here and is freed, with its generated code and
    linecache entries (Note [Generated code and its resources] in ``thunder.core.codegen``).
    """

    __slots__ = ("by_key", "_lru", "limit", "symbolic_entries")

    def __init__(self, limit: int = DEFAULT_CACHE_SIZE_LIMIT):
        self.by_key: dict[Any, tuple[CacheEntry, ...]] = {}
        self._lru: OrderedDict[int, CacheEntry] = OrderedDict()
        self.limit = limit
        self.symbolic_entries = False  # some entry of a "constant values" cache is symbolic (automatic dynamic)

    @property
    def entries(self) -> list[CacheEntry]:
        """The entries, least recently used first."""
        return list(self._lru.values())

    def __len__(self) -> int:
        return len(self._lru)

    def add(self, entry: CacheEntry) -> list[CacheEntry]:
        """Adds ``entry`` as the most recently used; returns the entries evicted to stay within ``limit``."""
        self.by_key[entry.key] = (entry, *self.by_key.get(entry.key, ()))
        self._lru[id(entry)] = entry
        self.symbolic_entries |= entry.symbolic
        evicted = []
        while len(self._lru) > self.limit:
            _, old = self._lru.popitem(last=False)
            rest = tuple(e for e in self.by_key.get(old.key, ()) if e is not old)
            if rest:
                self.by_key[old.key] = rest
            else:
                self.by_key.pop(old.key, None)
            evicted.append(old)
        return evicted

    def touch(self, entry: CacheEntry) -> None:
        """Marks ``entry`` as the most recently used."""
        try:
            self._lru.move_to_end(id(entry))
        except KeyError:  # evicted meanwhile by another thread
            pass

    def lookup(
        self, cache_option: CACHE_OPTIONS, args: tuple, kwargs: dict, outcomes: tuple | None = None,
        rejected_by: CacheEntry | None = None,
    ) -> tuple[CacheEntry, Any] | None:
        """An entry that accepts the inputs (and whose data-dependent outcomes begin with ``outcomes``); the entry
        ``rejected_by`` has rejected them already."""
        rest = (args, kwargs, outcomes, rejected_by)
        try:
            candidates = self.by_key.get(input_key(cache_option, args, kwargs), ())
        except TypeError:  # an unhashable input
            return self._first_accepting([e for group in tuple(self.by_key.values()) for e in group], *rest)
        found = self._first_accepting(candidates, *rest)
        if found is None and self.symbolic_entries and cache_option is not CACHE_OPTIONS.SYMBOLIC_VALUES:
            # the symbolic entries' key only when no entry of the constant key accepts (it cost as much again)
            symbolic = self.by_key.get(input_key(CACHE_OPTIONS.SYMBOLIC_VALUES, args, kwargs), ())
            found = self._first_accepting(symbolic, *rest)
        return found

    @staticmethod
    def _first_accepting(
        candidates, args: tuple, kwargs: dict, outcomes: tuple | None, rejected_by: CacheEntry | None
    ) -> tuple[CacheEntry, Any] | None:
        for entry in candidates:
            if entry is rejected_by or (outcomes is not None and not continues(entry, outcomes)):
                continue
            inputs = entry.prologue(*args, **kwargs)
            if type(inputs) is not tuple:  # a Rejection
                continue
            if outcomes is None or continues(entry, outcomes, inputs):
                return entry, inputs
        return None


def continues(entry: CacheEntry, outcomes: tuple, inputs: tuple | None = None) -> bool:
    """Whether ``entry``'s trace was made for data-dependent values beginning with ``outcomes`` (a symbolic
    outcome: for every value its constraints accept, given the values of the prologue's symbols among ``inputs``,
    what the entry's prologue returned). Without ``inputs``, a constraint that needs them passes: a first sieve
    that runs no prologue (an entry that draws per call has no such constraint)."""
    if len(entry.outcomes) < len(outcomes):
        return False
    known: dict[str, Any] = {}
    for expected, actual in zip(entry.outcomes, outcomes):
        if type(expected) is SymbolicOutcome:
            if expected.given and inputs is None:
                known[expected.name] = actual
                continue
            if expected.given and not all(n in known for n in expected.given):
                names = (getattr(a, "name", None) for a in entry.computation_traces[-1].args)
                known.update((n, v) for n, v in zip(names, inputs) if n in expected.given)
            if not expected.accepts(actual, known):
                return False
            known[expected.name] = actual
        elif not same_outcome(expected, actual):
            return False
    return True


def check_prologue_accepts(entry: CacheEntry, args: tuple, kwargs: dict):
    inputs = entry.prologue(*args, **kwargs)
    if type(inputs) is not tuple:
        raise InternalError(
            "the prologue of a newly compiled entry rejected the inputs it was traced with "
            f"({explain(inputs) if type(inputs) is Rejection else inputs!r}); this is a bug in thunder. "
            f"Prologue:\n{entry.prologue_traces[-1]}"
        )
    return inputs
