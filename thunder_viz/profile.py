"""Where time and memory go: a jitted callable run a few times under torch's profiler, its measured
time and memory attributed to each statement of the traces that ran (forward and backward), to each
module scope, and set beside eager PyTorch's profile of the same modules.

Note [Profile attribution]
While profiling, the compiled functions of the last computation and backward traces run a copy of
their code with a profiler range around each statement (Note [Profiling ranges] in
``thunder.core.codegen``), named after the statement's bound symbol. A statement's time is its
range's: CPU time (what Python and torch's dispatcher spend, and CPU kernels), and on CUDA the time
of the kernels launched inside it; its memory is what its range left allocated (the profiler's
memory events: what it allocated minus what it freed). A fusion is one statement. A module scope
sums the statements whose source is in it (a fusion counts in the scope holding all its ops: Note [A
fusion across modules]). What
the traces do not contain (the prologue's checks, the autograd node, returning to Python) is the
difference between a call's wall time and the sum of its statements, reported as such.

Note [A fusion across modules]
A fusion is one statement with one time, so it cannot be split between the modules its ops come
from: it counts in the innermost scope holding all of them (a GPT-2's forward fused whole counts in
``transformer``; a backward fused with the loss, in no module). A module below that scope then has
only its other statements' time (often none) while eager's time of the same module is all of it:
"bn 0.3 ms, eager 20 ms" or a backward of 0 ms would read as thunder being faster. So each module
lists the fusions that run some of its ops beside other modules' (``shared``, ``backward_shared``):
the explorer and the table say its time is its own statements' plus part of those, and do not rank it
against eager's.

Note [Fair comparison with eager]
Thunder's and eager's calls alternate in rounds under one profiler (each round one call of each, the
side that goes first alternating), after an unmeasured call of each: a load that changes while
profiling (other programs on the machine) then falls on both sides alike, where measuring one side
after the other once showed a compiled call ten times slower than eager under a test suite that
came and went. Each call's wall time is taken, and on the CPU also the CPU time of the calling thread
(what preemption by other programs does not inflate); the profile reports their medians and their
range, and says when the calls varied so much that the machine's load changed. A statement's or a
module's time is the median over its side's calls of its time in each call (a range around each
call tells which call a range ran in), so one call slowed by a burst of load does not count as a
share of every call (eager's backward by module too); its memory is the mean over the calls. Both
sides' times include the profiler's own cost (a range per statement under thunder; a range and two
hooks per submodule call under eager), which weighs most on small programs: the runs table's times
are measured without it.

Eager's profile of each module is taken with a range around each submodule's forward (hooks that
are removed before thunder runs: a hook would change what thunder's cache guards). Eager's backward
is split by module without hooks: each autograd node the backward evaluates carries the sequence
number of the forward op that made it (torch's profiler records both), so its time counts in the
module whose forward range held that op, and in the modules around it, as a forward range's time
counts in the ranges around it.

The saved-for-backward timeline is read from the backward trace: at each statement, the bytes of
the tensors the forward made and saved that the backward still reads from there on (their logical
sizes, as ``thunder.compile_stats`` counts them). A saved value that was a view of an input or a
parameter when the profiled call ran (a fusion's output can be; its trace does not tell) holds no
memory of its own and is left out: torch's saved tensors of that call say which. torch's autograd
holds them all until the backward returns; the timeline shows what the backward still needs, and
beside it what was saved before rematerialization. The profiler's memory events are not needed for
it; they give each statement's memory (what its range left allocated).

Layer: thunder_viz. Imports: torch (its profiler), thunder (public API, core codegen and proxies),
thunder_viz.session (input clones, random state), thunder_viz.graph (module paths).
"""

from __future__ import annotations

import bisect
import contextlib
import math
import os
import re
import statistics
import sys
import tempfile
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.autograd import profiler as torch_profiler

import thunder
from thunder.core.codegen import profiling_ranges
from thunder.core.prims.python import python_return
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import PARAMETER, BoundSymbol
from thunder.examine import fusion_status
from thunder.transforms.delete_last_used import python_del

__all__ = ["Profile", "StatementCost", "ModuleCost", "profile"]

_PREFIX = "thunder:"
_EAGER = "eager:"
_KIND_TAG = {"computation": "f", "backward": "b"}


@dataclass
class StatementCost:
    """One statement (bound symbol) of an execution trace: time and memory per call."""

    kind: str  # "computation" or "backward"
    uid: int  # the bound symbol's uid: the explorer's node of the last step of that kind
    op: str
    ms: float  # per call: CPU time, or CUDA kernel time where the statement ran on CUDA
    cpu_ms: float
    device_ms: float
    bytes: int  # left allocated by the statement, per call (net; negative when it freed more)
    module: str | None  # the module scope it counts in
    source: str  # ``file:line  code`` of the user's line, or ""
    # a fusion: the module paths of its ops (Note [A fusion across modules]); () for other statements
    member_modules: tuple[str, ...] = ()


@dataclass
class ModuleCost:
    """A module scope: the time of its statements under thunder (forward, backward) and of its
    forward in eager PyTorch, per call."""

    path: str
    ms: float = 0.0
    backward_ms: float = 0.0
    eager_ms: float | None = None
    eager_backward_ms: float | None = None  # None when eager ran no backward, or not this module's
    # fusions that run some of the module's ops with other modules' ops: their time counts in an enclosing
    # scope, not in this module's (Note [A fusion across modules])
    shared: list[str] = field(default_factory=list)
    backward_shared: list[str] = field(default_factory=list)


@dataclass
class CallTimes:
    """One side's measured calls (ms each, in call order): wall time, and on the CPU the CPU time of the
    calling thread (``None`` on CUDA, where kernels run beside the thread)."""

    wall: list[float]
    cpu: list[float] | None = None

    @property
    def wall_ms(self) -> float:
        return statistics.median(self.wall)

    @property
    def cpu_ms(self) -> float | None:
        return None if self.cpu is None else statistics.median(self.cpu)

    @property
    def spread(self) -> float:
        """How much the calls' wall times varied: (slowest - fastest) / median."""
        return (max(self.wall) - min(self.wall)) / max(self.wall_ms, 1e-9)

    @property
    def waited(self) -> bool:
        """Whether the calls ran for less than half their wall time (on the CPU): they waited for it."""
        return self.cpu is not None and self.wall_ms > WAITED * self.cpu_ms

    def text(self) -> str:
        cpu = "" if self.cpu is None else f", {_ms(self.cpu_ms)} CPU"
        return f"{_ms(self.wall_ms)} wall{cpu} (calls {_ms(min(self.wall))} to {_ms(max(self.wall))} wall)"


# Calls whose wall times vary by more than this share of their median: the load changed while measuring.
UNSTEADY_SPREAD = 0.5
# Calls on the CPU whose wall time is more than this many times their thread's CPU time waited for the
# CPU (other programs ran, or other threads held the GIL): their wall times say more of the load than of them.
WAITED = 2.0


def _ms(x: float) -> str:
    return f"{x:.3g} ms" if x < 100 else f"{x:.0f} ms"


@dataclass
class Profile:
    """What :func:`profile` measured. ``str()`` is a table of the costliest statements."""

    calls: int
    device: str
    call_ms: float  # median wall time of a profiled call (forward, and backward when there is one)
    eager_call_ms: float | None
    backward: bool  # whether the calls ran a backward (of the scalar outputs that require grad: a loss)
    statements: list[StatementCost]
    modules: list[ModuleCost]
    # the backward's saved tensors: (uid of a backward statement, bytes still read from there on)
    saved_timeline: list[tuple[int, int]] = field(default_factory=list)
    saved_bytes: int | None = None  # made by the forward and saved for the backward
    saved_bytes_before_remat: int | None = None  # the same before rematerialization
    profile_s: float = 0.0  # how long profiling took
    times: CallTimes | None = None  # thunder's calls (Note [Fair comparison with eager])
    eager_times: CallTimes | None = None  # eager's calls, alternating with thunder's; None when eager failed
    # fusions not compiled when the profiled calls began, with where they stood at the end: their times are
    # torch's kernels' (Note [Fusions that ran torch's kernels while profiled])
    uncompiled: list[tuple[str, str]] = field(default_factory=list)
    # the traces profiled: what the explorer maps uids against (not serialised)
    traces: dict[str, Any] = field(default_factory=dict, repr=False)

    def top(self, n: int = 10) -> list[StatementCost]:
        """The ``n`` statements that took the longest, longest first."""
        return sorted(self.statements, key=lambda s: -s.ms)[:n]

    @property
    def call_cpu_ms(self) -> float | None:
        """Median CPU time of the calling thread per call (on the CPU; ``None`` on CUDA)."""
        return None if self.times is None else self.times.cpu_ms

    @property
    def eager_call_cpu_ms(self) -> float | None:
        return None if self.eager_times is None else self.eager_times.cpu_ms

    @property
    def unsteady(self) -> bool:
        """Whether the machine's load disturbed the times: the calls varied so much that it changed while
        measuring, or they waited for the CPU most of the time."""
        return any(t is not None and (t.spread > UNSTEADY_SPREAD or t.waited) for t in (self.times, self.eager_times))

    def measured(self) -> str:
        """How the times were measured, with the medians and ranges of both sides, and a warning when
        the load changed (Note [Fair comparison with eager])."""
        if self.times is None:
            return ""
        text = [f"{self.calls} rounds of one thunder call and one eager call, in turn, under one profiler."]
        text.append(f"Medians per call: thunder {self.times.text()}")
        text[-1] += "." if self.eager_times is None else f"; eager {self.eager_times.text()}."
        if self.device == "cuda":
            text.append("Wall times wait for the device; statement times are CUDA kernel time.")
        else:
            others = torch.get_num_threads() - 1
            more = f" (torch may run ops on {others} more thread{'s' if others > 1 else ''}, not counted)"
            text.append(f"CPU = the calling thread's CPU time{more if others else ''}.")
        sides = [t for t in (self.times, self.eager_times) if t is not None]
        if any(t.spread > UNSTEADY_SPREAD for t in sides):
            text.append(
                f"Unsteady: one side's calls varied by more than {UNSTEADY_SPREAD:.0%}, so the machine's load "
                "changed while measuring; alternated calls share it, the CPU times least affected."
            )
        if any(t.waited for t in sides):
            text.append(
                "Loaded: calls ran for less than half their wall time and waited for the CPU the rest (other "
                "programs, or threads holding the GIL); wall times, the statements' too, are inflated: compare "
                "the CPU times."
            )
        if self.unsteady:
            text.append("Profile again on a quieter machine for steadier numbers.")
        if self.uncompiled:
            by_status: dict[str, list[str]] = {}
            for name, status in self.uncompiled:
                by_status.setdefault(status, []).append(name)
            names = "; ".join(
                f"{', '.join(n[:3])}{f' and {len(n) - 3} more' if len(n) > 3 else ''} ({status})"
                for status, n in by_status.items()
            )
            text.append(
                f"Not compiled when the calls began: {names}; their times are torch's kernels', not compiled "
                "code's (a region compiles in the background once it has run long enough): call the function "
                "more, then profile again."
            )
        return " ".join(text)

    def attributed_ms(self, kind: str | None = None) -> float:
        return sum(s.ms for s in self.statements if kind is None or s.kind == kind)

    def table(self, n: int = 10) -> str:
        """The costliest statements and the modules, as text."""
        where = "forward and backward" if self.backward else "forward"
        eager = f", eager {self.eager_call_ms:.2f} ms" if self.eager_call_ms is not None else ""
        lines = [
            f"profile of {self.calls} calls ({where}, {self.device}): {self.call_ms:.2f} ms per call{eager}; "
            f"{self.attributed_ms():.2f} ms in the traces' statements",
            *([self.measured()] if self.times is not None else []),
            f"{'ms':>8} {'share':>6} {'MB':>8}  {'op':<28} source",
        ]
        total = self.attributed_ms() or 1.0
        for s in self.top(n):
            tag = " (bwd)" if s.kind == "backward" else ""
            lines.append(
                f"{s.ms:8.3f} {100 * s.ms / total:5.1f}% {s.bytes / 2**20:8.2f}  {(s.op + tag)[:28]:<28} {s.source}"
            )
        shown = [m for m in self.modules if m.path.count(".") <= 2][:n]
        if shown:
            # a forward-only profile has no backward columns (zeros there would read as a free backward)
            bwd_head = f" {'bwd ms':>8} {'eager bwd':>9}" if self.backward else ""
            lines.append(f"{'module':<32} {'thunder ms':>10} {'eager ms':>9}{bwd_head}")
            for m in shown:
                eager_ms = f"{m.eager_ms:9.3f}" if m.eager_ms is not None else f"{'-':>9}"
                ms = f"{m.ms:.3f}{'+' if m.shared else ''}"
                bwd_cols = ""
                if self.backward:
                    eager_bwd = f"{m.eager_backward_ms:9.3f}" if m.eager_backward_ms is not None else f"{'-':>9}"
                    bwd = f"{m.backward_ms:.3f}{'+' if m.backward_shared else ''}"
                    bwd_cols = f" {bwd:>8} {eager_bwd}"
                lines.append(f"{m.path[:32]:<32} {ms:>10} {eager_ms}{bwd_cols}")
            if any(m.shared or m.backward_shared for m in shown):
                lines.append(
                    "+: and part of a fusion that also runs other modules' ops, counted in the scope around them"
                )
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def to_json(self, steps: Sequence[dict]) -> dict:
        """The document's ``profile`` (docs/trace-schema.md): costs by node of the last step of
        each kind among ``steps`` (a statement whose node is not there is left out)."""
        last = {}
        for step in steps:
            if step["kind"] in _KIND_TAG:
                last[step["kind"]] = step
        by_uid = {
            kind: {n["uid"]: n["id"] for n in step["nodes"] if n["fused_into"] is None} for kind, step in last.items()
        }
        out_steps: dict[str, dict] = {}
        for kind, step in last.items():
            nodes = {}
            for s in self.statements:
                nid = by_uid[kind].get(s.uid) if s.kind == kind else None
                if nid is not None:
                    nodes[nid] = {"ms": _round(s.ms), "bytes": s.bytes}
            if nodes:
                out_steps[step["id"]] = {"total_ms": _round(self.attributed_ms(kind)), "nodes": nodes}
        saved = None
        backward = last.get("backward")
        if backward is not None and self.saved_timeline:
            ids = by_uid["backward"]
            timeline = [[ids[uid], b] for uid, b in self.saved_timeline if uid in ids]
            saved = {
                "step": backward["id"],
                "bytes": self.saved_bytes,
                "bytes_before_remat": self.saved_bytes_before_remat,
                "timeline": timeline,
            }
        return {
            "calls": self.calls,
            "device": self.device,
            "call_ms": _round(self.call_ms),
            "eager_call_ms": None if self.eager_call_ms is None else _round(self.eager_call_ms),
            "call_cpu_ms": None if self.call_cpu_ms is None else _round(self.call_cpu_ms),
            "eager_call_cpu_ms": None if self.eager_call_cpu_ms is None else _round(self.eager_call_cpu_ms),
            "measured": self.measured(),
            "unsteady": self.unsteady,
            "uncompiled": dict(self.uncompiled),
            "backward": self.backward,
            "attributed_ms": _round(self.attributed_ms()),
            "steps": out_steps,
            "modules": [
                {
                    "path": m.path,
                    "ms": _round(m.ms),
                    "backward_ms": _round(m.backward_ms),
                    "eager_ms": None if m.eager_ms is None else _round(m.eager_ms),
                    "eager_backward_ms": None if m.eager_backward_ms is None else _round(m.eager_backward_ms),
                    "shared": m.shared,
                    "backward_shared": m.backward_shared,
                }
                for m in self.modules
            ],
            "saved": saved,
        }


def _round(x: float) -> float:
    return round(float(x), 4)


# jitted callable -> its last profile, while it lives (a rerun's new callable has none)
_LAST: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def last_profile(jitted: Any) -> Profile | None:
    """The last profile of ``jitted``, if it was profiled and has not compiled again since."""
    try:
        found = _LAST.get(jitted)
    except TypeError:
        return None
    if found is None:
        return None
    current = thunder.last_traces(jitted)
    return found if current and found.traces.get("computation") is current[-1] else None


def set_last_profile(jitted: Any, result: Profile) -> None:
    with contextlib.suppress(TypeError):  # not weak-referenceable: the explorer will not show it
        _LAST[jitted] = result


def profile(jitted: Any, *args: Any, calls: int = 3, **kwargs: Any) -> Profile:
    """Runs ``jitted(*args, **kwargs)`` ``calls`` times under torch's profiler (CPU, and CUDA where
    present), in turn with as many calls of eager PyTorch, after one call of each that is not
    measured, and says where the time and memory went: per statement of the traces that ran
    (forward, and backward when an output requires grad), per module, beside eager PyTorch's profile
    of the same calls. See Note [Profile attribution] and Note [Fair comparison with eager].

    When the output holds a scalar that requires grad (a loss), each call also runs its backward,
    as a training step does. Gradients that accumulate meanwhile in the parameters and the module's
    buffers (batch-norm running statistics) are put back as they were; the random state is left as
    it was; tensor inputs are cloned for each call.

    The explorer of ``jitted`` (``thunder_viz.explore``) shows the last profile.

    Returns:
        The :class:`Profile` (``print`` it for a table of the costliest statements).
    """
    from thunder_viz.session import Session, session_for

    thunder.compile_data(jitted)  # a clear TypeError for something that is not jitted
    session = session_for(jitted)
    if session is None or session.jitted is not jitted:
        session = Session(jitted, args=args, kwargs=kwargs)
    else:
        session.args, session.kwargs = args, kwargs
    return session.profile(calls=calls)


def measure(jitted: Any, original: Any, args: tuple, kwargs: dict, *, calls: int = 3) -> Profile:
    """The measurement behind :func:`profile` (the caller keeps the random state and gradients)."""
    from thunder_viz.session import clone_inputs

    if calls < 1:
        raise ValueError(f"profile: calls must be at least 1, got {calls}")
    start = time.perf_counter()
    cuda = torch.cuda.is_available() and torch.cuda.is_initialized()

    aliased: set[str] = set()  # the backward's saved values that are views of the call's inputs

    def call(fn: Callable, prefix: str, backward_trace: Any = None) -> tuple[bool, float, float]:
        """One call (and its backward) in a range named for ``prefix``'s side: whether it ran a
        backward, its wall and thread CPU time in ms."""
        a, k = clone_inputs(args, kwargs)
        wall, cpu = time.perf_counter_ns(), time.thread_time_ns()
        with torch_profiler.record_function(_CALL + prefix):
            out = fn(*a, **k)
            if backward_trace is not None and not aliased:  # bookkeeping, not the call's: not timed
                wall_aside, cpu_aside = time.perf_counter_ns(), time.thread_time_ns()
                leaves = [*_tensor_leaves((a, k)), *_state_of(original)]
                aliased.update(_saved_aliasing_inputs(out, backward_trace, leaves))
                wall -= time.perf_counter_ns() - wall_aside
                cpu -= time.thread_time_ns() - cpu_aside
            ran_backward = _backward_of(out)
            _synchronize(cuda)
        return ran_backward, (time.perf_counter_ns() - wall) / 1e6, (time.thread_time_ns() - cpu) / 1e6

    # One call of each side first, not measured: it compiles what is not compiled yet (a backward that
    # never ran: its fusions compile on its first call), and fills eager's caches.
    call(jitted, _PREFIX)
    eager_runs = True
    try:
        call(original, _EAGER)
    except Exception:  # eager fails where thunder did not: nothing to compare with
        eager_runs = False
    # The calls are profiled with the ranges put in the traces of the last compilation; when a call
    # compiles again instead (other inputs than the last call's), they are profiled once more.
    for _ in range(2):
        misses = thunder.cache_misses(jitted)
        traces = _profiled_traces(jitted)
        labels = {kind: _labels(trace, _KIND_TAG[kind]) for kind, trace in traces.items()}
        times, eager_times = CallTimes([], None if cuda else []), CallTimes([], None if cuda else [])
        ran_backward = []
        # Note [Fusions that ran torch's kernels while profiled]
        # A background-compiled fusion warms up on torch's kernels for its first calls (tens of them for a
        # small region), so a profile made right after the first call times torch's kernels under the
        # fusion's name: "TorchCompile0 is slow" where its compiled code never ran. The fusions not compiled
        # when the calls begin are listed, with where they stood at the end.
        before = fusion_status(jitted)
        with contextlib.ExitStack() as stack:
            for kind, trace in traces.items():
                stack.enter_context(profiling_ranges(trace, lambda i, b, names=labels[kind]: names.get(i)))
            prof = stack.enter_context(_profiler(cuda))
            # rounds of one call each, in turn (Note [Fair comparison with eager])
            for r in range(calls):
                for side in ("thunder", "eager") if r % 2 == 0 else ("eager", "thunder"):
                    if side == "thunder":
                        backward, wall, cpu = call(jitted, _PREFIX, traces.get("backward"))
                        ran_backward.append(backward)
                        _record(times, wall, cpu)
                    elif eager_runs:
                        try:
                            with _module_ranges(original):  # removed before thunder runs: it would change its guards
                                _, wall, cpu = call(original, _EAGER)
                        except Exception:  # as in the unmeasured call
                            eager_runs = False
                        else:
                            _record(eager_times, wall, cpu)
        if thunder.cache_misses(jitted) == misses:
            break
    after = dict(fusion_status(jitted))
    uncompiled = [(name, after.get(name, status)) for name, status in before if not status.startswith("compiled")]
    backward = any(ran_backward)
    if not backward:
        traces.pop("backward", None)
    if eager_runs:
        eager_modules, eager_backward = _eager_totals(prof, cuda)
    else:
        eager_times, eager_modules, eager_backward = None, {}, {}
    events = _range_costs(prof, _PREFIX, cuda)
    if labels["computation"] and not any(name in events for name in labels["computation"].values()):
        # never a table of zeros: the calls ran code this profile cannot see into
        raise RuntimeError(
            "profile: these inputs ran a cache entry compiled before the last compilation, and only the "
            "last compilation's traces (thunder.last_traces) can be profiled and shown: profile a fresh "
            "thunder.jit of the function with these inputs"
        )
    statements = []
    for kind, trace in traces.items():
        for i, name in labels[kind].items():
            cpu_us, device_us, mem = events.get(name, (0.0, 0.0, 0))
            bsym = trace.bound_symbols[i]
            cpu_ms, device_ms = cpu_us / 1e3, device_us / 1e3
            statements.append(
                StatementCost(
                    kind=kind,
                    uid=bsym.uid,
                    op=bsym.sym.name,
                    ms=device_ms if cuda and device_ms > 0 else cpu_ms,
                    cpu_ms=cpu_ms,
                    device_ms=device_ms,
                    bytes=mem,
                    module=_scope(bsym),
                    source=_source_text(bsym),
                    member_modules=_member_modules(bsym),
                )
            )
    timeline, saved, saved_before = _saved_for_backward(jitted, aliased) if backward else ([], None, None)
    return Profile(
        calls=calls,
        device="cuda" if cuda else "cpu",
        call_ms=times.wall_ms,
        eager_call_ms=None if eager_times is None else eager_times.wall_ms,
        backward=backward,
        statements=statements,
        modules=_modules(statements, eager_modules, eager_backward),
        saved_timeline=timeline,
        saved_bytes=saved,
        saved_bytes_before_remat=saved_before,
        profile_s=time.perf_counter() - start,
        traces=traces,
        times=times,
        eager_times=eager_times,
        uncompiled=uncompiled,
    )


def _record(times: CallTimes, wall_ms: float, cpu_ms: float) -> None:
    times.wall.append(wall_ms)
    if times.cpu is not None:
        times.cpu.append(cpu_ms)


def _profiled_traces(jitted: Any) -> dict[str, Any]:
    """The execution traces of the last compilation: what the calls run."""
    traces = {"computation": thunder.last_traces(jitted)[-1]}
    bw = thunder.last_backward_traces(jitted)
    if bw:
        traces["backward"] = bw[-1]
    return traces


def _labels(trace: Any, tag: str) -> dict[int, str]:
    """Range names of the statements worth a range: not unpacking, ``del`` or ``return``."""
    out = {}
    for i, bsym in enumerate(trace.bound_symbols):
        if PARAMETER in bsym.sym.tags or bsym.sym is python_del or bsym.sym is python_return:
            continue
        out[i] = f"{_PREFIX}{tag}{i}"
    return out


@contextlib.contextmanager
def _profiler(cuda: bool) -> Iterator[Any]:
    # torch.autograd.profiler directly: torch.profiler.profile first imports torch._inductor (seconds)
    with _without_profiler_log():
        with torch_profiler.profile(use_cpu=True, use_device="cuda" if cuda else None, profile_memory=True) as prof:
            yield prof


# What torch's profiler logs from C++ straight to the process's stderr: each start and stop, and once a
# warning that memory allocated before it started is not counted (the inputs, the parameters).
_PROFILER_LOG = re.compile(r"^(USDT|STAGE):|CPUAllocator\.cpp.*before the profiling started")


@contextlib.contextmanager
def _without_profiler_log() -> Iterator[None]:
    """Drops the profiler's own log lines (they would fill a notebook cell, with timestamps); anything
    else written to the process's stderr meanwhile is written back afterwards."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no file descriptor 2 to borrow
        yield
        return
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines = sink.read().decode("utf-8", "replace").splitlines(keepends=True)
            kept = "".join(line for line in lines if not _PROFILER_LOG.search(line))
            if kept:
                sys.stderr.write(kept)


def _range_costs(prof: Any, prefix: str, cuda: bool) -> dict[str, tuple[float, float, int]]:
    """name -> (CPU µs, device µs, net bytes) per call of the ranges whose name starts with ``prefix``:
    each call's sum over the ranges of that name, then the median over the calls (a burst of load in
    one call does not count as a share of every call); the bytes are the mean. The calls are the
    ranges named ``_CALL + prefix`` (Note [Fair comparison with eager]).

    On CPU the profiler's raw events are read directly (building its per-op event objects costs
    seconds on a 12-layer GPT-2): a range's time is its duration, its memory the allocations and
    frees recorded inside it on its thread, attributed to the innermost range holding them. On CUDA
    torch's own attribution of kernel time and device memory to ranges is used."""
    ranges, calls = _function_event_ranges(prof, prefix) if cuda else _event_ranges(prof, prefix)
    calls.sort()
    starts = [c[0] for c in calls]
    per_call: dict[str, list] = {}  # name -> [CPU µs of each call, device µs of each call, bytes]
    for start, name, cpu_us, device_us, nbytes in ranges:
        k = bisect.bisect_right(starts, start) - 1
        t = per_call.setdefault(name, [[0.0] * len(calls), [0.0] * len(calls), 0])
        t[2] += nbytes
        if k >= 0 and start <= calls[k][1]:
            t[0][k] += cpu_us
            t[1][k] += device_us
    n = max(len(calls), 1)
    return {
        name: (statistics.median(cpu or [0.0]), statistics.median(dev or [0.0]), round(nbytes / n))
        for name, (cpu, dev, nbytes) in per_call.items()
    }


_CALL = "profiled call of "  # the range around each profiled call: "profiled call of thunder:"

Ranges = list[tuple[int | float, str, float, float, int]]  # (start, name, CPU µs, device µs, bytes)


def _event_ranges(prof: Any, prefix: str) -> tuple[Ranges, list[tuple[int, int]]]:
    """The ranges named ``prefix...`` among the raw events, and the calls' (start, end) (see _range_costs)."""
    ranges: list[tuple[int, int, int, str]] = []  # (start, end, thread, name)
    calls: list[tuple[int, int]] = []
    memory: list[tuple[int, int, int]] = []  # (time, thread, bytes)
    for e in prof.kineto_results.events():
        name = e.name()
        if name.startswith(prefix):
            start = e.start_ns()
            ranges.append((start, start + e.duration_ns(), e.start_thread_id(), name))
        elif name == "[memory]":
            memory.append((e.start_ns(), e.start_thread_id(), e.nbytes()))
        elif name == _CALL + prefix:
            calls.append((e.start_ns(), e.start_ns() + e.duration_ns()))
    ranges.sort()
    starts = [r[0] for r in ranges]
    held = [0] * len(ranges)
    for when, thread, nbytes in memory:
        i = bisect.bisect_right(starts, when) - 1
        # the innermost range holding it: the latest started that is still open (ranges nest only
        # a few deep, so a few steps back suffice; none when it happened between statements)
        for j in range(i, max(-1, i - _NESTING), -1):
            start, end, rthread, name = ranges[j]
            if rthread == thread and end >= when:
                held[j] += nbytes
                break
    out = [(start, name, (end - start) / 1e3, 0.0, b) for (start, end, _, name), b in zip(ranges, held)]
    return out, calls


_NESTING = 32


def _function_event_ranges(prof: Any, prefix: str) -> tuple[Ranges, list[tuple[float, float]]]:
    ranges: Ranges = []
    calls: list[tuple[float, float]] = []
    for e in prof.function_events:
        if e.name == _CALL + prefix:
            calls.append((e.time_range.start, e.time_range.end))
        if not e.name.startswith(prefix):
            continue
        dev_us = float(getattr(e, "device_time_total", 0.0) or 0.0)
        mem_b = int(e.device_memory_usage or e.cpu_memory_usage)
        ranges.append((e.time_range.start, e.name, e.cpu_time_total, dev_us, mem_b))
    return ranges, calls


def _eager_totals(prof: Any, cuda: bool) -> tuple[dict[str, float], dict[str, float]]:
    """Eager's forward and backward time per module path, ms per call (the backward's is empty when
    the calls ran none), from the ranges of its calls in ``prof``."""
    modules = {}
    for name, (cpu_us, dev_us, _) in _range_costs(prof, _EAGER, cuda).items():
        modules[name[len(_EAGER) :]] = (dev_us if cuda and dev_us > 0 else cpu_us) / 1e3
    backward = {path: us / 1e3 for path, us in _backward_by_module(prof, _EAGER).items()}
    return modules, backward


_BACKWARD_NODE = "autograd::engine::evaluate_function: "


def _backward_by_module(prof: Any, prefix: str) -> dict[str, float]:
    """µs per call of the backward's autograd nodes by module path (Note [Profile attribution]): a node
    counts in the innermost range named ``prefix + path`` that held the forward op that made it, and in
    each range around that one. CPU time of the node (on CUDA too: its kernels are not linked to it);
    the median over the calls (ranges named ``_CALL + prefix``; all one call when there are none)."""
    ranges: list[tuple[int, int, int, str]] = []  # (start, end, thread, path)
    made: list[tuple[int, int, int]] = []  # (start, thread, sequence number) of forward ops
    nodes: list[tuple[int, int, int, int]] = []  # (forward thread, sequence number, start, duration) of nodes
    calls: list[tuple[int, int]] = []
    for e in prof.kineto_results.events():
        name = e.name()
        if name.startswith(prefix):
            start = e.start_ns()
            ranges.append((start, start + e.duration_ns(), e.start_thread_id(), name[len(prefix) :]))
        elif name.startswith(_BACKWARD_NODE):
            nodes.append((e.fwd_thread_id(), e.sequence_nr(), e.start_ns(), e.duration_ns()))
        elif name == _CALL + prefix:
            calls.append((e.start_ns(), e.start_ns() + e.duration_ns()))
        elif e.sequence_nr() >= 0 and e.fwd_thread_id() == 0:
            made.append((e.start_ns(), e.start_thread_id(), e.sequence_nr()))
    if not nodes or not ranges:
        return {}
    ranges.sort()
    starts = [r[0] for r in ranges]
    # An op records the sequence number the next autograd node will take, whether or not it makes
    # one; making one moves it on. So the node numbered n was made by the last op to start with n.
    module_of: dict[tuple[int, int], str | None] = {}
    for when, thread, seq in sorted(made):
        module_of[(thread, seq)] = None
        i = bisect.bisect_right(starts, when) - 1
        for j in range(i, max(-1, i - _NESTING), -1):  # the innermost open range (see _event_ranges)
            start, end, rthread, path = ranges[j]
            if rthread == thread and end >= when:
                module_of[(thread, seq)] = path
                break
    paths = {r[3] for r in ranges}
    calls = sorted(calls) or [(-math.inf, math.inf)]
    call_starts = [c[0] for c in calls]
    per_call: dict[str, list[float]] = {}
    for thread, seq, when, duration_ns in nodes:
        path = module_of.get((thread, seq))
        c = bisect.bisect_right(call_starts, when) - 1
        if path is None or c < 0 or when > calls[c][1]:
            continue
        parts = path.split(".")
        for k in range(1, len(parts) + 1):
            enclosing = ".".join(parts[:k])
            if enclosing in paths:
                per_call.setdefault(enclosing, [0.0] * len(calls))[c] += duration_ns / 1e3
    return {path: statistics.median(us) for path, us in per_call.items()}


@contextlib.contextmanager
def _module_ranges(original: Any) -> Iterator[None]:
    """A profiler range around the forward of each submodule of ``original`` (none for a function)."""
    if not isinstance(original, torch.nn.Module):
        yield
        return
    enter = torch.ops.profiler._record_function_enter_new
    leave = torch.ops.profiler._record_function_exit
    handles = []
    for path, module in original.named_modules():
        if not path:
            continue
        open_ranges: list = []

        def pre(_m, _args, name=f"{_EAGER}{path}", stack=open_ranges):
            stack.append(enter(name))

        def post(_m, _args, _out, stack=open_ranges):
            if stack:
                leave(stack.pop())

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post, always_call=True))
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def _backward_of(out: Any) -> bool:
    """Runs the backward of the scalars in ``out`` that require grad (losses), if any (see :func:`profile`)."""
    from thunder_viz.session import _leaves

    losses = [
        x
        for _, x in _leaves(out)
        if isinstance(x, torch.Tensor) and x.requires_grad and x.grad_fn is not None and x.numel() == 1
    ]
    if not losses:
        return False
    torch.autograd.backward(losses)
    return True


def _synchronize(cuda: bool) -> None:
    if cuda:
        torch.cuda.synchronize()


def _scope(bsym: BoundSymbol) -> str | None:
    """The module scope a statement counts in: its own, or for a fusion the scope of all its ops."""
    from thunder_viz.graph import _common_prefix, _module_path

    if bsym.sym._is_fusion:
        return _common_prefix([_module_path(m) for m in bsym.subsymbols] or [None])
    return _module_path(bsym)


def _member_modules(bsym: BoundSymbol) -> tuple[str, ...]:
    """The module paths of a fusion's ops (none for another statement)."""
    from thunder_viz.graph import _module_path

    if not bsym.sym._is_fusion:
        return ()
    return tuple(dict.fromkeys(p for p in map(_module_path, bsym.subsymbols) if p))


def _source_text(bsym: BoundSymbol) -> str:
    from thunder.core.symbol import notebook_cell

    src = bsym.source
    if bsym.sym._is_fusion and src is None:
        src = next((m.source for m in bsym.subsymbols if m.source is not None), None)
    if src is None:
        return ""
    file = notebook_cell(src.filename) or src.filename.rsplit("/", 1)[-1]
    return f"{file}:{src.lineno}  {src.source_line.strip()}"


def _modules(
    statements: list[StatementCost], eager: dict[str, float], eager_backward: dict[str, float]
) -> list[ModuleCost]:
    """Each module scope with its statements' time summed (a statement counts in every enclosing
    scope), in the order of first appearance, with eager's time of the same module (forward and
    backward), and the fusions whose time counts in an enclosing scope although some of their ops are
    the module's (Note [A fusion across modules])."""
    costs: dict[str, ModuleCost] = {}
    for s in statements:
        parts = s.module.split(".") if s.module else []
        for k in range(1, len(parts) + 1):
            path = ".".join(parts[:k])
            m = costs.setdefault(path, ModuleCost(path))
            if s.kind == "backward":
                m.backward_ms += s.ms
            else:
                m.ms += s.ms
        for member in s.member_modules:  # a fusion: the modules below its scope that it runs ops of
            inner = member.split(".")
            for k in range(len(parts) + 1, len(inner) + 1):
                m = costs.setdefault(".".join(inner[:k]), ModuleCost(".".join(inner[:k])))
                shared = m.backward_shared if s.kind == "backward" else m.shared
                if s.op not in shared:
                    shared.append(s.op)
    for path, m in costs.items():
        m.eager_ms = eager.get(path)
        m.eager_backward_ms = eager_backward.get(path)
    return list(costs.values())


def _tensor_bytes(p: Any) -> int | None:
    if not isinstance(p, TensorProxy) or not all(type(d) is int for d in p.shape):
        return None
    return math.prod(p.shape) * p.dtype.itemsize


def _saved_for_backward(
    jitted: Any, aliased: set[str] = frozenset()
) -> tuple[list[tuple[int, int]], int | None, int | None]:
    """The timeline of the bytes the backward still reads of what the forward made and saved
    (Note [Profile attribution]), their total, and the total before rematerialization. ``aliased``:
    saved values that were views of the inputs when the forward ran (no memory of their own)."""
    forward = thunder.last_traces(jitted)
    backward = thunder.last_backward_traces(jitted)
    if not forward or not backward:
        return [], None, None
    made = _made_by_forward(forward[-1]) - aliased

    def saved_of(trace: Any) -> dict[str, int]:
        out = {}
        for a in trace.args:
            if isinstance(a, TensorProxy) and a.name in made:
                size = _tensor_bytes(a)
                if size is not None:
                    out[a.name] = size
        return out

    final = backward[-1]
    saved = saved_of(final)
    first = saved_of(backward[0])
    last_use: dict[str, int] = {}
    for i, bsym in enumerate(final.bound_symbols):
        if bsym.sym is python_del:
            continue
        for p in bsym.flat_proxy_args:
            if p.name in saved:
                last_use[p.name] = i
    timeline = []
    for i, bsym in enumerate(final.bound_symbols):
        if PARAMETER in bsym.sym.tags or bsym.sym is python_del or bsym.sym is python_return:
            continue
        timeline.append((bsym.uid, sum(b for name, b in saved.items() if last_use.get(name, -1) >= i)))
    return timeline, sum(saved.values()), sum(first.values())


def _made_by_forward(forward: Any) -> set[str]:
    """Names of the values the forward computes (not its inputs): what saving them costs memory."""
    inputs = {a.name for a in forward.args if hasattr(a, "name")}
    made = set()
    for bsym in forward.bound_symbols:
        for p in bsym.flat_proxy_outs:
            if p.name not in inputs:
                made.add(p.name)
    return made


def _saved_aliasing_inputs(out: Any, backward: Any, inputs: Sequence[torch.Tensor]) -> set[str]:
    """Names of the values ``backward`` is given that were views of ``inputs`` (the call's tensors,
    the module's parameters and buffers) when the forward that made ``out`` ran. A fusion's outputs
    can be views of its inputs, which its trace does not tell; torch's saved tensors do. The saved
    tensors are the backward's first arguments, in order (``ThunderFunction.forward``)."""
    from thunder.executors.torch_autograd import ThunderFunction
    from thunder_viz.session import _leaves

    node = next(
        (
            x.grad_fn
            for _, x in _leaves(out)
            if isinstance(x, torch.Tensor) and isinstance(x.grad_fn, ThunderFunction._backward_cls)
        ),
        None,
    )
    if node is None:
        return set()
    saved = [a for a, is_tensor in zip(backward.args, node.plan.saved_is_tensor) if is_tensor]
    tensors = node.saved_tensors
    if len(saved) != len(tensors):
        return set()
    storages = {t.untyped_storage().data_ptr() for t in inputs if t.device.type != "meta"}
    return {
        p.name
        for p, t in zip(saved, tensors)
        if isinstance(p, TensorProxy) and isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() in storages
    }


def _tensor_leaves(tree: Any) -> list[torch.Tensor]:
    from thunder_viz.session import _leaves

    return [x for _, x in _leaves(tree) if isinstance(x, torch.Tensor)]


def _state_of(original: Any) -> list[torch.Tensor]:
    """A module's parameters and buffers (nothing for a function)."""
    if not isinstance(original, torch.nn.Module):
        return []
    return [*original.parameters(), *original.buffers()]
