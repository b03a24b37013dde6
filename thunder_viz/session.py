"""Sessions: a jitted callable, the inputs of its last call, and the runs made from the explorer.

A :class:`Session` is what the explorer widget and the ``%thunder_jit`` magic hold on to. It
knows the original function (or ``nn.Module``) and the compile options, so it can jit it again
with other executors and rerun it with the inputs of the last call (:meth:`Session.rerun`),
timing it and comparing its outputs with eager PyTorch. Failures while tracing, compiling or
running become an :class:`ErrorInfo` that points at the user's source line.

The document shown by the front end is built by :mod:`thunder_viz.graph` (see
``docs/trace-schema.md``); this module only adds runs, executors and errors to it.

Layer: thunder_viz sessions. Imports: torch, thunder (public API and ``thunder.core`` data
types), thunder_viz.graph (lazily). Never imported by ``thunder``.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import dataclasses
import itertools
import linecache
import math
import os
import re
import statistics
import sysconfig
import time
import traceback
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

import thunder
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.core.pytree import tree_map
from thunder.core.symbol import notebook_cell
from thunder.core.symbolic import SymInt
from thunder.examine import fusion_status

__all__ = ["ErrorInfo", "Run", "Session", "UserFrame", "compare_leaves", "compare_outputs", "session_for", "tolerance_of"]

STAGES = ("tracing", "compiling", "running")
_CELL = re.compile(r"Cell In\[\d+\]")  # a notebook cell, as notebook_cell names it

# Tolerances of torch.testing.assert_close, by dtype (rtol, atol).
_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float16: (1e-3, 1e-5),
    torch.bfloat16: (1.6e-2, 1e-5),
    torch.float32: (1.3e-6, 1e-5),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1.3e-6, 1e-5),
    torch.complex128: (1e-7, 1e-7),
}


@dataclass(frozen=True)
class UserFrame:
    """A line of the user's program (``ErrorInfo.user_frame`` in the schema)."""

    file: str  # a notebook cell's as IPython's tracebacks name it: "Cell In[3]"
    line: int
    function: str
    code: str

    @classmethod
    def at(cls, filename: str, line: int, function: str, code: str) -> UserFrame:
        return cls(file=notebook_cell(filename) or filename, line=line, function=function, code=code)

    def place(self) -> str:
        """``model.py:12``, or ``Cell In[3], line 5`` for a notebook cell (as IPython's tracebacks say)."""
        return f"{self.file}, line {self.line}" if _CELL.fullmatch(self.file) else f"{self.file}:{self.line}"


@dataclass(frozen=True)
class ErrorInfo:
    """A failure while tracing, compiling or running, as the explorer's error panel shows it."""

    type: str
    message: str
    stage: str
    user_frame: UserFrame | None = None

    def to_json(self) -> dict:
        return asdict(self)

    def one_line(self) -> str:
        """What failed, in one line (the magic prints this)."""
        first = self.message.strip().splitlines()[0] if self.message.strip() else ""
        where = ""
        if self.user_frame is not None:
            where = f" at {self.user_frame.place()}"
            if self.user_frame.code:
                where += f" ({self.user_frame.code})"
        return f"{self.type} while {self.stage}{where}: {first}"

    @classmethod
    def from_exception(cls, exc: BaseException, *, jitted: Any = None, stage: str | None = None) -> ErrorInfo:
        """Describes ``exc``; the stage is read from the traceback unless given."""
        frames = traceback.extract_tb(exc.__traceback__)
        return cls(
            type=type(exc).__name__,
            message=str(exc),
            stage=stage or _stage_of(frames),
            user_frame=_user_frame(frames, jitted),
        )


@dataclass
class Run:
    """One execution made from the explorer (``Run`` in the schema)."""

    id: str
    executors: list[str]
    # the call that compiled (``%thunder_jit``'s, ``explore(args=...)``'s): timed once, with its
    # compilation, and not compared with eager (that would run the program a second time)
    first_call: bool = False
    median_ms: float | None = None
    repeats: int = 0
    compile_ms: float | None = None  # the run's compilations (the rerun's new jit compiles on its first call)
    max_abs_diff: float | None = None
    matches_eager: bool | None = None
    differs_at: str | None = None  # the path of the first output leaf that differs from eager's (``logits``)
    tolerance: str | None = None  # the tolerances the comparison used, per dtype of the outputs
    # why the values could not be compared although both sides ran ("random ops: values not
    # comparable": eager, or the compiled function, gives other values from the same random state)
    not_comparable: str | None = None
    cache_hits: int = 0
    cache_misses: int = 0
    # Where each fusion stood when the run ended (a background-compiled region may still be warming
    # up or compiling: its calls were timed with torch's kernels), from thunder.examine.fusion_status.
    fusions: list[dict] = field(default_factory=list)
    error: ErrorInfo | None = None

    def to_json(self) -> dict:
        out = asdict(self)
        out["error"] = None if self.error is None else self.error.to_json()
        return out


# Which stage a failure belongs to, from the compiler function it escaped from. See
# thunder/compiler.py: compile_entry = acquire_traces (tracing) + passes and codegen (compiling).
def _stage_of(frames: traceback.StackSummary) -> str:
    names = {(os.path.basename(f.filename), f.name) for f in frames}
    if ("compiler.py", "acquire_traces") in names:
        return "tracing"
    if ("compiler.py", "compile_entry") in names:
        return "compiling"
    return "running"


def _library_dirs() -> tuple[str, ...]:
    """Directories whose frames are never the user's: the compiler, the visualiser, torch, Python itself."""
    import IPython  # only for its location

    dirs = [
        os.path.dirname(thunder.__file__),
        os.path.dirname(os.path.abspath(__file__)),
        os.path.dirname(torch.__file__),
        os.path.dirname(IPython.__file__),
        sysconfig.get_paths()["stdlib"],
    ]
    return tuple(os.path.join(os.path.realpath(d), "") for d in dirs)


_LIBRARY_DIRS: tuple[str, ...] | None = None


def _is_library_file(filename: str) -> bool:
    global _LIBRARY_DIRS
    if _LIBRARY_DIRS is None:
        _LIBRARY_DIRS = _library_dirs()
    if filename.startswith("<frozen"):
        return True
    return os.path.realpath(filename).startswith(_LIBRARY_DIRS)


def _user_frame(frames: traceback.StackSummary, jitted: Any) -> UserFrame | None:
    """The innermost frame of the user's program.

    Frames of generated trace code (file names like ``thunder.computation_5``) are mapped back,
    through the bound symbol printed on that line, to where the user wrote the op.
    """
    for frame in reversed(frames):
        if frame.filename.startswith("thunder."):
            mapped = _frame_of_generated_line(frame, jitted)
            if mapped is not None:
                return mapped
            continue
        if _is_library_file(frame.filename):
            continue
        code = frame.line or linecache.getline(frame.filename, frame.lineno or 0).strip()
        return UserFrame.at(frame.filename, frame.lineno or 0, frame.name, code)
    return None


def _frame_of_generated_line(frame: traceback.FrameSummary, jitted: Any) -> UserFrame | None:
    if jitted is None:
        return None
    line = frame.line or linecache.getline(frame.filename, frame.lineno or 0).strip()
    try:
        statement = ast.parse(line.strip()).body[0]
    except (SyntaxError, IndexError):
        return None
    targets = statement.targets if isinstance(statement, ast.Assign) else []
    names = {n.id for target in targets for n in ast.walk(target) if isinstance(n, ast.Name)}
    if not names:
        return None
    try:
        traces = list(thunder.last_traces(jitted)) + list(thunder.last_prologue_traces(jitted))
    except TypeError:
        return None
    for trace in traces[::-1]:
        for bsym in trace.bound_symbols:
            outs = {getattr(p, "name", None) for p in bsym.flat_proxy_outs}
            if names & outs and bsym.source is not None:
                src = bsym.source
                return UserFrame.at(src.filename, src.lineno, src.function, src.source_line)
    return None


def _clone(x: Any) -> Any:
    """A copy of a tensor input with the same dtype, device, strides and requires_grad; a copy of
    an object holding tensors (a ``DynamicCache``: Note [Cloning the objects an input holds])."""
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    if _holds_tensors(x):
        # each tensor cloned as above (deepcopy refuses a non-leaf that requires grad), the rest deep-copied
        memo = {id(t): _clone(t) for _, t in _leaves(x) if isinstance(t, torch.Tensor)}
        return copy.deepcopy(x, memo)
    return x


# Note [Cloning the objects an input holds]
# A decoding step of ``generate`` gets a ``DynamicCache`` and appends this step's keys and values to
# it. Were it shared between the calls a rerun makes (the compiled call, the timed calls, eager's
# reference), each would append again: a longer cache every call (a cache miss each), eager's logits
# from another cache than the compiled call's ("not comparable"), and the user's cache grown by every
# rerun. So an input object that holds tensors is copied for each call, as a tensor input is.


def clone_inputs(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """Copies of the tensors among the inputs and of the objects holding tensors (other values are shared)."""
    return tree_map(_clone, args), tree_map(_clone, kwargs)


def compare_outputs(actual: Any, expected: Any) -> tuple[float | None, bool]:
    """(max abs difference over all tensor leaves, whether they match with dtype-aware tolerances).

    The difference is None when the outputs are not comparable (different structure, shapes
    or kinds of leaves, or no numbers at all). ``first_difference`` says where they differ.
    """
    worst, matches, _ = compare_leaves(actual, expected)
    return worst, matches


def compare_leaves(actual: Any, expected: Any) -> tuple[float | None, bool, str | None]:
    """``compare_outputs`` and the path of the first leaf that differs (``logits``,
    ``past_key_values.layers[0].keys``; ``""`` for the output itself), None when all agree.

    Leaves are found through tuples, lists, dicts (Hugging Face's ``ModelOutput`` is one),
    dataclasses and the attributes of other objects (a ``DynamicCache``); an object that holds
    no tensor and cannot be compared is not counted as a difference.
    """
    a_leaves, e_leaves = list(_leaves(actual)), list(_leaves(expected))
    if [p for p, _ in a_leaves] != [p for p, _ in e_leaves]:
        where = next((p for (p, _), (q, _) in zip(a_leaves, e_leaves) if p != q), None)
        return None, False, where if where is not None else "(the structure)"
    worst: float | None = None
    first_bad: str | None = None
    comparable = True
    for (path, a), (_, e) in zip(a_leaves, e_leaves):
        if isinstance(a, torch.Tensor) and isinstance(e, torch.Tensor):
            diff, ok = _compare_tensors(a.detach(), e.detach())
        elif isinstance(a, (int, float, complex)) and isinstance(e, (int, float, complex)):
            diff, ok = float(abs(a - e)), a == e or abs(a - e) <= 1e-7 + 1e-7 * abs(e)
        elif isinstance(a, _Container) or isinstance(e, _Container):
            diff, ok = None, a == e
        else:
            diff, ok = None, type(a) is type(e) and (_safe_equal(a, e) or not _comparable(a))
        if not ok and first_bad is None:
            first_bad = path
        if diff is None and not ok:
            comparable = False
        if diff is not None:
            worst = diff if worst is None else max(worst, diff)
    if not comparable or (worst is not None and not math.isfinite(worst)):  # strict JSON: no infinity
        worst = None
    return worst, first_bad is None, first_bad


def tolerance_of(expected: Any) -> str | None:
    """The tolerances :func:`compare_leaves` applies to these outputs, one per floating dtype
    (``"float32: atol 1e-05, rtol 1.3e-06"``); exact for the others; None without tensors."""
    dtypes = list(dict.fromkeys(leaf.dtype for _, leaf in _leaves(expected) if isinstance(leaf, torch.Tensor)))
    parts = []
    for dtype in dtypes:
        name = str(dtype).removeprefix("torch.")
        rtol, atol = _TOLERANCES.get(dtype, (0.0, 0.0))
        parts.append(f"{name}: atol {atol:g}, rtol {rtol:g}" if rtol or atol else f"{name}: exact")
    return "; ".join(parts) or None


@dataclass(frozen=True)
class _Container:
    """A container's kind among the leaves, so that a list and a tuple of the same tensors differ."""

    kind: type


_ATOMS = (bool, int, float, complex, str, bytes, type(None), torch.dtype, torch.device, torch.Tensor)


def _leaves(x: Any, path: str = "", seen: frozenset = frozenset(), depth: int = 0):
    """(path, leaf) pairs of an output structure, containers included as ``_Container`` markers."""
    if isinstance(x, _ATOMS) or depth > 12 or id(x) in seen:
        yield path, x
        return
    inner = seen | {id(x)}
    if isinstance(x, Mapping):
        yield path, _Container(type(x))
        for k, v in x.items():
            yield from _leaves(v, f"{path}.{k}" if path else str(k), inner, depth + 1)
    elif isinstance(x, (list, tuple)):
        yield path, _Container(type(x))
        for i, v in enumerate(x):
            yield from _leaves(v, f"{path}[{i}]", inner, depth + 1)
    elif dataclasses.is_dataclass(x) and not isinstance(x, type):
        yield path, _Container(type(x))
        for f in dataclasses.fields(x):
            yield from _leaves(getattr(x, f.name), f"{path}.{f.name}" if path else f.name, inner, depth + 1)
    elif _holds_tensors(x):
        yield path, _Container(type(x))
        for k, v in vars(x).items():
            yield from _leaves(v, f"{path}.{k}" if path else k, inner, depth + 1)
    else:
        yield path, x


def _holds_tensors(x: Any, depth: int = 0) -> bool:
    """Whether ``x`` is a plain object (a cache, not a module or function) with tensors among its attributes."""
    if isinstance(x, (torch.nn.Module, type)) or callable(x) or not hasattr(x, "__dict__") or depth > 3:
        return False
    for v in vars(x).values():
        if isinstance(v, torch.Tensor):
            return True
        if isinstance(v, (list, tuple)) and any(isinstance(i, torch.Tensor) or _holds_tensors(i, depth + 1) for i in v):
            return True
        if _holds_tensors(v, depth + 1):
            return True
    return False


def _comparable(x: Any) -> bool:
    """Whether ``x`` has an equality of its own (not object identity)."""
    return type(x).__eq__ is not object.__eq__


def _safe_equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b)
    except Exception:
        return False


def _compare_tensors(a: torch.Tensor, e: torch.Tensor) -> tuple[float | None, bool]:
    if a.shape != e.shape:
        return None, False
    if a.numel() == 0:
        return 0.0, a.dtype == e.dtype
    wide = torch.complex128 if (a.is_complex() or e.is_complex()) else torch.float64
    a64, e64 = a.cpu().to(wide), e.cpu().to(wide)
    same = (a64 == e64) | (torch.isnan(a64) & torch.isnan(e64))  # equal infinities and NaNs agree
    diff = torch.where(same, torch.zeros_like(a64), a64 - e64).abs()
    max_diff = float(torch.nan_to_num(diff, nan=math.inf).max())
    rtol, atol = _TOLERANCES.get(e.dtype, (0.0, 0.0))
    ok = a.dtype == e.dtype and bool(torch.allclose(a64, e64, rtol=rtol, atol=atol, equal_nan=True))
    return max_diff, ok


def _original_of(jitted: Any) -> Any:
    """The function or module that ``jitted`` compiles."""
    from thunder.core.module import ThunderModule

    if isinstance(jitted, ThunderModule):
        return jitted._model
    return thunder.compile_data(jitted).fn


def _name_of(obj: Any) -> str:
    if isinstance(obj, torch.nn.Module):
        return type(obj).__name__
    return getattr(obj, "__name__", None) or type(obj).__name__


def executor_names(executors: Sequence[Any]) -> list[str]:
    return [e if isinstance(e, str) else e.name for e in executors]


def unavailable_executors() -> dict[str, str]:
    """The registered executors that cannot run here, with the reason each gives."""
    return {e.name: e.unavailable_reason for e in thunder.get_all_executors() if e.unavailable_reason is not None}


def available_executors() -> list[str]:
    """The registered executors, in priority order: optional ones first, always-on ones last."""
    always = executor_names(thunder.get_always_executors())
    others = [name for name in executor_names(thunder.get_all_executors()) if name not in always]
    return others + always


# jitted callable -> weak reference to its session, so explore(jf) finds the inputs a live
# session recorded. Both sides are weak: a session holds its jitted callable and its inputs,
# and must not keep them alive once nothing (no widget) uses it.
_SESSIONS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def session_for(jitted: Any) -> Session | None:
    """The live session that last recorded a call of ``jitted`` (or reran it), if any."""
    try:
        ref = _SESSIONS.get(jitted)
    except TypeError:
        return None
    return None if ref is None else ref()


@dataclass(eq=False)  # sessions are compared by identity (their inputs are tensors)
class Session:
    """A jitted callable, the inputs of its last call, and the runs made since.

    Inputs are kept by reference, as the caller passed them. Every rerun (and the eager
    reference it is compared with) gets its own clones of the tensor inputs, so a program that
    mutates its inputs in place leaves them as they were and reruns are reproducible. The
    buffers of a module (batch-norm running statistics, step counters) are put back after each
    rerun and profile, and eager's reference run starts from the values the compiled run started
    with; parameters are not cloned.

    Args:
        jitted: what ``thunder.jit`` returned (a function or a ``ThunderModule``).
        args, kwargs: the inputs of the last call, when known.
    """

    jitted: Any
    args: tuple | None = None
    kwargs: dict | None = None
    runs: list[Run] = field(default_factory=list)
    error: ErrorInfo | None = None
    time_budget_s: float = 1.0  # about how long rerun may spend timing
    max_repeats: int = 20

    def __post_init__(self) -> None:
        self.original = _original_of(self.jitted)
        self.options = thunder.compile_data(self.jitted).options
        self._run_ids = itertools.count(1)
        _register(self.jitted, self)

    @property
    def has_inputs(self) -> bool:
        return self.args is not None

    @property
    def title(self) -> str:
        return _name_of(self.original)

    @property
    def executors(self) -> list[str]:
        """The executors the current jitted callable uses, highest priority first."""
        return executor_names(thunder.compile_data(self.jitted).executors_list)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Calls the jitted callable, recording the inputs and the call as a run (``first_call``);
        a failure is recorded, then re-raised."""
        self.args, self.kwargs = args, kwargs
        self.error = None
        run = Run(id=f"r{next(self._run_ids)}", executors=self.executors, first_call=True, repeats=1)
        self.runs.append(run)
        start = time.perf_counter_ns()
        try:
            out = self.jitted(*args, **kwargs)
            _synchronize()
        except Exception as exc:
            run.error = self.error = ErrorInfo.from_exception(exc, jitted=self.jitted)
            raise
        finally:
            run.median_ms = (time.perf_counter_ns() - start) / 1e6
            _record_statistics(run, self.jitted)
        return out

    def record_earlier_call(self) -> Run:
        """The row of the call(s) made before the session existed (``jm(x); explore(jm)``), as
        ``%thunder_jit`` shows its first call: the executors, compile time and cache counters of the
        compilation (its time was not measured, and it was not compared with eager)."""
        run = Run(id=f"r{next(self._run_ids)}", executors=self.executors, first_call=True)
        _record_statistics(run, self.jitted)
        run.repeats = run.cache_hits + run.cache_misses
        self.runs.append(run)
        return run

    def rerun(self, executors: Sequence[Any]) -> Run:
        """Jits the original again with ``executors`` (other options unchanged) and reruns it.

        The new callable replaces ``jitted``; the returned :class:`Run` (also appended to
        ``runs``) has the median time, the agreement with eager PyTorch and the cache counters.
        A failure becomes the run's ``error`` (and the session's), never an exception.
        """
        if not self.has_inputs:
            raise ValueError(
                f"cannot rerun {self.title!r}: the inputs of its last call are unknown; "
                "call it through the session or pass args= to thunder_viz.explore"
            )
        names = executor_names(executors)
        unknown = [n for n in names if n not in available_executors()]
        if unknown:
            raise ValueError(f"unknown executors {unknown}: available are {available_executors()}")
        run = Run(id=f"r{next(self._run_ids)}", executors=list(names))
        self.error = None
        try:
            jitted = self._rejit(names)
        except Exception as exc:  # bad options: nothing was traced
            run.error = self.error = ErrorInfo.from_exception(exc, stage="compiling")
            self.runs.append(run)
            return run
        self.jitted = jitted
        _register(jitted, self)
        run.executors = self.executors
        # the explorer's runs leave the notebook's random stream and the module's buffers as they were
        with _keeping_rng_state(), _keeping_buffers(self.original) as buffers:
            start = _rng_state()
            try:
                args, kwargs = clone_inputs(self.args, self.kwargs)
                outputs = jitted(*args, **kwargs)
                run.median_ms, run.repeats = self._time(jitted)
            except Exception as exc:
                run.error = self.error = ErrorInfo.from_exception(exc, jitted=jitted)
            else:
                self._against_eager(run, jitted, outputs, start, buffers)
        _record_statistics(run, jitted)
        self.runs.append(run)
        return run

    def profile(self, calls: int = 3) -> Any:
        """Profiles the current jitted callable with the inputs of the last call
        (:func:`thunder_viz.profile`); the document then carries it. Returns the
        :class:`~thunder_viz.profile.Profile`; raises what the calls raise."""
        from thunder_viz.profile import measure, set_last_profile

        if not self.has_inputs:
            raise ValueError(
                f"cannot profile {self.title!r}: the inputs of its last call are unknown; "
                "call it through the session or pass its inputs to thunder_viz.profile"
            )
        with _keeping_rng_state(), _keeping_grads(self.jitted, self.original), _keeping_buffers(self.original):
            result = measure(self.jitted, self.original, self.args, self.kwargs or {}, calls=calls)
        set_last_profile(self.jitted, result)
        return result

    def _rejit(self, executors: list[str]) -> Any:
        o = self.options
        return thunder.jit(
            self.original,
            executors=executors,
            cache=o.cache_option,
            sharp_edges=o.sharp_edges,
            disable_torch_autograd=o.disable_torch_autograd,
            transforms=list(o.transforms),
            debug_options=o.debug_options,
            **dict(o.extra),
        )

    def _time(self, jitted: Callable) -> tuple[float, int]:
        """Median wall time of a call, in ms, over up to ``max_repeats`` calls within the budget, each
        on its own copies of the inputs (Note [Cloning the objects an input holds])."""

        def timed_call() -> int:
            args, kwargs = clone_inputs(self.args, self.kwargs)
            _synchronize()
            start = time.perf_counter_ns()
            jitted(*args, **kwargs)
            _synchronize()  # CUDA kernels run asynchronously: wait for them
            return time.perf_counter_ns() - start

        estimate_s = timed_call() / 1e9  # warm-up, and an estimate of one call
        repeats = max(1, min(self.max_repeats, int(self.time_budget_s / max(estimate_s, 1e-9))))
        samples = [timed_call() for _ in range(repeats)]
        return statistics.median(samples) / 1e6, repeats

    def _against_eager(self, run: Run, jitted: Callable, outputs: Any, start: tuple, buffers: Callable) -> None:
        """Compares ``outputs`` (of the call made from the random state ``start`` and the buffers
        ``buffers()`` puts back) with eager PyTorch's, run from the same state: the compiler draws
        eager's random numbers in eager's order (Note [Random ops follow eager's generator]), so a
        model in training mode (dropout) compares equal, and a module that updates a buffer (a step
        counter) runs from the value the compiled call started with. When they differ, both sides
        are run again from that state: if either gives other values than it gave before, the
        values are not comparable and the run says so instead of "NO"."""
        buffers()
        expected = self._eager_from(start)
        if expected is _FAILED:  # eager PyTorch fails where thunder did not: nothing to compare with
            return
        run.max_abs_diff, run.matches_eager, run.differs_at = compare_leaves(outputs, expected)
        run.tolerance = tolerance_of(expected)
        if run.matches_eager:
            return
        buffers()
        eager_again = self._eager_from(start)
        buffers()
        _set_rng_state(start)
        args, kwargs = clone_inputs(self.args, self.kwargs)
        try:
            compiled_again = jitted(*args, **kwargs)
        except Exception:  # it ran before: a failure now says nothing about the draws; the NO stands
            return
        eager_repeats = eager_again is not _FAILED and compare_leaves(eager_again, expected)[1]
        if not eager_repeats or not compare_leaves(compiled_again, outputs)[1]:
            run.matches_eager = None
            random = "random ops" if _draws_random_numbers(jitted) else "nondeterministic ops"
            run.not_comparable = f"{random}: values not comparable"

    def _eager_from(self, state: tuple) -> Any:
        """The original's outputs on clones of the inputs, from the random state ``state``."""
        _set_rng_state(state)
        args, kwargs = clone_inputs(self.args, self.kwargs)
        try:
            with torch.no_grad() if self.options.disable_torch_autograd else contextlib.nullcontext():
                return self.original(*args, **kwargs)
        except Exception:
            return _FAILED

    def executors_json(self, *, interactive: bool | None = None, reason: str | None = None) -> dict:
        """The ``executors`` object of the document."""
        if interactive is None:
            interactive = self.has_inputs
            if not interactive and reason is None:
                reason = "the inputs of the last call are unknown: pass args= to thunder_viz.explore"
        return {
            "available": available_executors(),
            "selected": self.executors,
            "always": executor_names(thunder.get_always_executors()),
            "unavailable": unavailable_executors(),
            "interactive": bool(interactive),
            "reason": None if interactive else reason,
        }

    def steps(self) -> list:
        """The steps of the last compilation. After a failure these are the traces thunder made
        before it (an incomplete "Interpretation" when tracing failed), so the explorer shows how
        far the compiler got."""
        from thunder_viz import graph

        try:
            thunder.last_traces(self.jitted)
        except TypeError:  # never compiled
            return []
        return graph.steps_from_jitted(self.jitted)

    def to_document(self, *, interactive: bool | None = None, reason: str | None = None) -> dict:
        """The JSON document of ``docs/trace-schema.md`` for this session: with several cache entries, the steps
        of each (Note [Steps of each cache entry])."""
        from thunder_viz import graph
        from thunder_viz.profile import last_profile

        entries, shown = self._entries()
        if shown is None:  # one entry, or the last compilation failed: its steps as far as it got
            steps = shown_steps = self.steps()
        else:
            steps, shown_steps = [], []
            for j in _entries_with_steps(len(entries), shown):
                entry = entries[j]
                made = graph.steps_of_compilation(
                    _prologue_traces(entry), entry.computation_traces, entry.backward_traces, entry=j
                )
                steps += made
                if j == shown:
                    shown_steps = made
        profile = last_profile(self.jitted)
        return graph.document(
            title=self.title,
            steps=steps,
            runs=[run.to_json() for run in self.runs],
            executors=self.executors_json(interactive=interactive, reason=reason),
            error=None if self.error is None else self.error.to_json(),
            profile=None if profile is None else profile.to_json(shown_steps),
            autograd=self.autograd_fallback(),
            entries=_entries_json(entries, shown, steps) if len(entries) > 1 else None,
        )

    def _entries(self) -> tuple[list, int | None]:
        """The cache entries (least recently used first) and the index of the one the last compilation made (None
        with one entry, or when the last compilation failed)."""
        try:
            entries = thunder.compile_stats(self.jitted).entries
            last = thunder.last_traces(self.jitted)[-1]
        except (TypeError, IndexError):  # never compiled
            return [], None
        if len(entries) < 2:
            return entries, None
        shown = next((i for i, e in enumerate(entries) if e.computation_traces and e.computation_traces[-1] is last), None)
        return entries, shown

    def autograd_fallback(self) -> str | None:
        """Why torch's autograd records the backward of the last compilation instead of thunder's backward traces
        (a program the split cannot differentiate, an entry settled on torch's kernels), or None."""
        try:
            return thunder.compile_stats(self.jitted).last_autograd_fallback
        except TypeError:  # never compiled
            return None


# Note [Steps of each cache entry]
# ``generate`` compiles a prefill entry, then a decoding entry whose cache length is symbolic; the last compiled is
# what thunder.last_traces gives, but a user asks as much why the prefill is slow. So a document of several entries
# holds the steps of each, one entry after the other, each step naming its entry (``entry``, and its id: ``e1s3``),
# and the explorer shows one entry at a time, the last compiled first, with a picker. The steps are built from each
# entry's own traces (``CacheEntry.computation_traces``), never from the last compilation's. Only the last compiled
# entry and the most recently used others, ``ENTRIES_WITH_STEPS`` in all, carry their steps (a function called with
# many shapes would make a document as many times the size); the others are listed, with their inputs and counts.
# A profile measures the last compiled entry, so it goes with that entry's steps.
ENTRIES_WITH_STEPS = 4
_CACHE_NAME = re.compile(r"cache|past_key", re.IGNORECASE)  # Hugging Face's cache tensors: cache_layers_0_keys


def _entries_with_steps(n: int, shown: int) -> list[int]:
    """The entries whose steps the document carries, in cache order (Note [Steps of each cache entry])."""
    recent = [j for j in range(n - 1, -1, -1) if j != shown][: ENTRIES_WITH_STEPS - 1]
    return sorted([shown, *recent])


def _prologue_traces(entry: Any) -> list:
    """An entry's prologue traces, its executed prologue made if it was not yet (as thunder.last_prologue_traces
    does for the last compilation: Note [The executed prologue is made when needed] in thunder.entry_run)."""
    executed = getattr(entry.fuser, "prologue", None)
    if callable(executed):
        executed()
    return entry.prologue_traces


def _entry_values(entry: Any) -> list:
    """An entry's tensor and number inputs as its first computation trace has them, the module's parameters left out."""
    trace = entry.computation_traces[0]
    return [a for a in trace.args if isinstance(a, (TensorProxy, NumberProxy)) and a.name not in trace.input_paths]


def _entries_json(entries: Sequence, shown: int | None, steps: Sequence[dict]) -> dict:
    """The document's ``entries``: each entry's label (``prefill: input_ids i64[1, 8]``), inputs, cache hits and
    compile time, whether the document carries its steps, and the one the explorer opens on."""
    from thunder_viz.graph import type_text

    carried = {s.get("entry") for s in steps}
    values = [_entry_values(e) for e in entries]
    generation = any(_CACHE_NAME.search(v.name) for vs in values for v in vs)
    items = []
    for j, (entry, vs) in enumerate(zip(entries, values)):
        text = ", ".join(f"{a.name}: {type_text(a) if isinstance(a, TensorProxy) else a.type_string()}" for a in vs)
        symbolic = " (symbolic: other values of the named sizes run it too)" if entry.symbolic else ""
        items.append({
            "label": _entry_label(j, vs, generation),
            "inputs": (text or "no tensor inputs") + symbolic,
            "symbolic": bool(entry.symbolic),
            "hits": entry.hits,
            "compile_ms": round(entry.compile_ms, 3),
            "steps": j in carried,
        })  # fmt: skip
    return {"items": items, "shown": shown}


def _entry_label(j: int, values: Sequence, generation: bool) -> str:
    """What tells an entry from the others at a glance: in a generation, ``prefill: input_ids i64[1, 8]`` or
    ``decode: input_ids i64[1, 1], cache length symbolic`` (an entry with cache tensors among its inputs decodes);
    otherwise ``entry 2: x f32[5, 3]``. A symbolic size shows by its name."""
    from thunder_viz.graph import type_text

    def short(a: Any) -> str:
        return f"{a.name} {type_text(a).split(' ', 1)[1]}" if isinstance(a, TensorProxy) else f"{a.name} {a.type_string()}"

    cache = [a for a in values if isinstance(a, TensorProxy) and _CACHE_NAME.search(a.name)]
    parts = [short(a) for a in values if not any(a is c for c in cache)]
    if cache:
        lengths = {d.expr if isinstance(d, SymInt) else str(d) for a in cache if a.ndim >= 2 for d in a.shape[-2:-1]}
        symbolic = any(isinstance(d, SymInt) for a in cache for d in a.shape)
        length = "symbolic" if symbolic else ", ".join(sorted(lengths)) or "?"
        parts.append(f"cache length {length}")
    role = ("decode" if cache else "prefill") if generation else f"entry {j + 1}"
    return f"{role}: {', '.join(parts) or 'no tensor inputs'}"


def _record_statistics(run: Run, jitted: Any) -> None:
    """The run's compile time, where its fusions stood, and the cache counters, once it ended."""
    with contextlib.suppress(TypeError):  # it failed before compiling: no compile statistics
        run.compile_ms = thunder.compile_stats(jitted).total_compile_ms
    run.fusions = [{"name": n, "status": s} for n, s in fusion_status(jitted)]
    run.cache_hits = thunder.cache_hits(jitted)
    run.cache_misses = thunder.cache_misses(jitted)


_FAILED = object()  # eager PyTorch raised


def _rng_state() -> tuple:
    """The state of torch's global generators (CPU, and each CUDA device once CUDA is in use)."""
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() and torch.cuda.is_initialized() else None
    return torch.random.get_rng_state(), cuda


def _set_rng_state(state: tuple) -> None:
    cpu, cuda = state
    torch.random.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)


@contextlib.contextmanager
def _keeping_rng_state():
    state = _rng_state()
    try:
        yield
    finally:
        _set_rng_state(state)


@contextlib.contextmanager
def _keeping_grads(*holders: Any):
    """The ``.grad`` of the parameters of the modules among ``holders`` is put back afterwards
    (profiling runs backwards whose gradients the user did not ask for)."""
    params = {id(p): p for h in holders if isinstance(h, torch.nn.Module) for p in h.parameters()}
    grads = [(p, p.grad, None if p.grad is None else p.grad.detach().clone()) for p in params.values()]
    try:
        yield
    finally:
        with torch.no_grad():
            for p, grad, value in grads:
                if grad is not None:
                    grad.copy_(value)  # backwards accumulate into it in place
                p.grad = grad


@contextlib.contextmanager
def _keeping_buffers(*holders: Any):
    """The buffers of the modules among ``holders`` (batch-norm running statistics, step counters)
    are put back afterwards, the same tensors with their values of before: the explorer's reruns
    and profiles are not the user's training. Yields a function that puts them back now."""
    kept = [
        (m, name, b, b.detach().clone())
        for h in holders
        if isinstance(h, torch.nn.Module)
        for m in h.modules()
        for name, b in m._buffers.items()
        if b is not None
    ]

    def put_back() -> None:
        with torch.no_grad():
            for m, name, b, value in kept:
                b.copy_(value)
                m._buffers[name] = b  # (a forward may have bound a new tensor)

    try:
        yield put_back
    finally:
        put_back()


def _draws_random_numbers(jitted: Any) -> bool:
    """Whether the last compilation of ``jitted`` has random ops (forward or backward)."""
    from thunder.core.symbol import RANDOM

    traces = [*thunder.last_traces(jitted), *(thunder.last_backward_traces(jitted) or [])]
    return any(RANDOM in bsym.sym.tags for trace in traces for bsym in _flat(trace.bound_symbols))


def _flat(bsyms: Sequence) -> Any:
    for bsym in bsyms:
        yield bsym
        yield from _flat(bsym.subsymbols)


def _synchronize() -> None:
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.synchronize()


def _register(jitted: Any, session: Session) -> None:
    try:
        _SESSIONS[jitted] = weakref.ref(session)
    except TypeError:  # not weak-referenceable: explore then needs args=
        pass
