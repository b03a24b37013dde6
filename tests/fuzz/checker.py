"""Eager vs ``thunder.jit``: run a program's calls in two identical worlds and classify each.

Each world is the program's source executed into a fresh module dict (real globals), with
the same seeds, so the two hold equal but separate objects. Every call does, in each world:
the outside-state changes, ``torch.manual_seed``, the arguments, ``random.seed``, the call
with stdout captured; then the backward of the sum of the float outputs that require grad.
Then it compares results (values with ``equal_nan``, dtypes, shapes, requires_grad, Python
types: a float stays a float, a tuple a tuple, a ``torch.Size`` a ``torch.Size``), printed
output, the arguments afterwards (in-place ops on inputs), gradients of the inputs and of
module parameters, and the globals the program writes.

Outcomes: OK; CLEAR (thunder raised a thunder error, or the exception eager raised too);
WRONG (a silent mismatch, or a result where eager raised); INTERNAL (``InternalError``,
``InterpreterError``, or an exception eager did not raise that is not a thunder error);
CRASH (something the checker could not survive: a non-``Exception``, a ``RecursionError``,
or a failure inside the comparison).
"""

from __future__ import annotations

import builtins
import collections
import contextlib
import dataclasses
import enum
import io
import linecache
import math
import os
import random
import signal
import threading
import types
import warnings
from dataclasses import dataclass, field, replace

import numpy
import torch

import thunder
from tests.fuzz.programs import Call, Program, calls_for
from thunder.core.errors import InternalError, ThunderError
from thunder.core.interpreter import InterpreterError
from thunder.core.pytree import slot_names


class Outcome(enum.Enum):
    OK = "ok"
    CLEAR = "clear error"
    WRONG = "wrong result"
    INTERNAL = "internal error"
    CRASH = "crash"


FAILURES = (Outcome.WRONG, Outcome.INTERNAL, Outcome.CRASH)
# A call (trace + compile + run) that takes longer is counted as a hang.
CALL_TIMEOUT_S = float(os.environ.get("THUNDER_FUZZ_CALL_TIMEOUT", "10"))


class CallTimeout(BaseException):
    """Raised into a call that ran past ``CALL_TIMEOUT_S`` (not an Exception: the program
    under test cannot catch it)."""


@contextlib.contextmanager
def _deadline(seconds: float):
    if seconds <= 0 or threading.current_thread() is not threading.main_thread():
        yield
        return

    def on_alarm(signum, frame):
        raise CallTimeout(f"the call did not finish in {seconds:g} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    # It repeats: a raise that lands in a finalizer or a ``__del__`` is swallowed by Python.
    signal.setitimer(signal.ITIMER_REAL, seconds, 0.25)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@dataclass
class CallResult:
    index: int
    outcome: Outcome
    detail: str = ""


@dataclass
class ProgramResult:
    program: Program
    cache: str
    calls: list[CallResult] = field(default_factory=list)

    @property
    def failure(self) -> CallResult | None:
        return next((c for c in self.calls if c.outcome in FAILURES), None)


@dataclass
class Observation:
    out: object = None
    exc: BaseException | None = None
    stdout: str = ""
    warned: list = field(default_factory=list)  # (message, category, line) of the program's own warnings (``fuzz:``)
    eager_runs: list = field(default_factory=list)  # thunder's EagerRunWarning: tracing raised where eager did not
    aliases: list = field(default_factory=list)  # (where in the result, which argument) of each argument it returns
    args: object = None
    grads: list = field(default_factory=list)
    grad_exc: BaseException | None = None
    state: dict = field(default_factory=dict)
    mutation_errors: list = field(default_factory=list)
    torch_state: tuple = ()  # ``_torch_state()`` after the call


class World:
    """One execution of the program's module, eager or jitted."""

    def __init__(self, prog: Program, source: str, cache: str | None):
        filename = f"<fuzz {prog.family} {prog.seed}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        self.ns: dict = {"__name__": f"fuzz_{prog.family}_{prog.seed}", "__builtins__": builtins}
        torch.manual_seed(prog.seed)
        random.seed(prog.seed)
        exec(compile(source, filename, "exec"), self.ns)
        target = eval(prog.entry_expr, self.ns)
        self.fn = target if cache is None else thunder.jit(target, cache=cache)
        # id of each list, dict, set or object an earlier call returned -> (the call, where in its result); the
        # objects are kept so their ids stay theirs
        self.returned: dict[int, tuple[int, str]] = {}
        self.returned_objects: list = []
        self.calls = 0


def _flat(obj):
    if isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _flat(o)
    elif isinstance(obj, dict):
        for o in obj.values():
            yield from _flat(o)
    else:
        yield obj


def _snap(value, depth=0):
    """A copy of outside state that later calls cannot change."""
    if depth > 4:
        return repr(value)
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_snap(v, depth + 1) for v in value) if type(value) in (list, tuple) else value
    if isinstance(value, dict):
        return {k: _snap(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return set(value)
    if isinstance(value, (int, float, str, bytes, type(None), torch.dtype, torch.device, torch.Size)):
        return value
    if (
        hasattr(value, "__dict__")
        and not isinstance(value, type)
        and not callable(value)
        or isinstance(value, torch.nn.Module)
    ):
        simple = (int, float, str, bool, type(None), tuple, list, dict, torch.Tensor)
        return {
            "<attrs>": {
                k: _snap(v, depth + 1)
                for k, v in vars(value).items()
                if not k.startswith("_") and isinstance(v, simple)
            }
        }
    return f"<{type(value).__name__}>"


def _aliases(out, args: tuple, world: World) -> list:
    """Where the result holds an argument object itself (a list passed in, returned inside a new namespace), one
    object twice (``return l, l``), or an object an earlier call returned: eager's identities, which the compiled
    function must give too (a made object or set that the trace kept as a constant was returned by every call).
    Tensors are left out: an op that returns its input in eager (``flatten`` of a 1-d tensor) may return a view
    of it under thunder's autograd, the same memory."""
    scalars = (int, float, complex, str, bytes, bool, type(None), torch.Tensor)
    ids = {id(a): i for i, a in enumerate(args) if not isinstance(a, scalars)}
    found = []
    here: dict[int, str] = {}
    call = world.calls
    world.calls += 1

    def walk(v, path: str, depth: int) -> None:
        if id(v) in ids:
            found.append((path, ids[id(v)]))
            return
        if depth > 4 or isinstance(v, (torch.Tensor, str, bytes, type, types.ModuleType, types.FunctionType)):
            return
        mutable = (list, dict, set, collections.deque, bytearray)
        if isinstance(v, mutable) or (hasattr(v, "__dict__") and not isinstance(v, torch.nn.Module)):
            if id(v) in here:
                found.append((path, "same as", here[id(v)]))
                return
            here[id(v)] = path
            if id(v) in world.returned:
                found.append((path, "returned by an earlier call", world.returned[id(v)]))
            world.returned[id(v)] = (call, path)
            world.returned_objects.append(v)
        if isinstance(v, (list, tuple, collections.deque)):
            for i, x in enumerate(v):
                walk(x, f"{path}[{i}]", depth + 1)
        elif isinstance(v, dict):
            for k, x in v.items():
                walk(x, f"{path}[{k!r}]", depth + 1)
        elif hasattr(v, "__dict__") and not isinstance(v, torch.nn.Module):
            for k, x in vars(v).items():
                walk(x, f"{path}.{k}", depth + 1)

    walk(out, "result", 0)
    return found


def _args_after(args: tuple):
    """The arguments after a call, for comparing: an iterator argument by what it has left (a call must
    consume exactly what eager consumes)."""
    return _snap(tuple(("<iterator left>", list(a)) if _is_iterator(a) else a for a in args))


def _is_iterator(a) -> bool:
    return hasattr(type(a), "__next__") and not isinstance(a, (torch.Tensor, torch.nn.Module))


def _torch_state() -> tuple:
    """The global torch state a program may change between or in calls (grad mode, default dtype,
    deterministic algorithms)."""
    return torch.is_grad_enabled(), torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled()


def _set_torch_state(state: tuple) -> None:
    grad, dtype, deterministic = state
    torch.set_grad_enabled(grad)
    torch.set_default_dtype(dtype)
    torch.use_deterministic_algorithms(deterministic)


@contextlib.contextmanager
def _torch_state_restored():
    """Programs may change global torch state between calls: put it back afterwards, for the next program."""
    state = _torch_state()
    try:
        yield
    finally:
        _set_torch_state(state)


def _state_value(ns: dict, name: str):
    """A global the program writes, or an expression over the globals (``P0.grad``, ``list(OPT0.state.values())``)."""
    if name.isidentifier():
        return ns.get(name, "<unbound>")
    try:
        return eval(name, ns)
    except Exception as e:  # the same in both worlds where the state is the same
        return f"<{type(e).__name__}>"


def _module_params(ns: dict) -> list[torch.Tensor]:
    params = []
    for v in list(ns.values()):
        holders = [v] if isinstance(v, torch.nn.Module) else [getattr(v, "lin", None)] if hasattr(v, "lin") else []
        for h in holders:
            if isinstance(h, torch.nn.Module):
                params += [p for p in h.parameters() if not any(p is q for q in params)]  # (``in`` compares values)
    return params


def observe(world: World, prog: Program, call: Call, *, grad: bool = True) -> Observation:
    obs = Observation()
    ns = world.ns
    torch.manual_seed(call.seed)
    random.seed(call.seed)
    for _, stmt in call.before:
        try:
            exec(stmt, ns)
        except Exception as e:  # the same in both worlds; recorded and compared
            obs.mutation_errors.append(type(e).__name__)
    params = _module_params(ns)
    for p in params:
        p.grad = None
    torch.manual_seed(call.seed)
    args = eval(call.args, ns)
    random.seed(call.seed)
    numpy.random.seed(call.seed % 2**32)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        try:
            with _deadline(CALL_TIMEOUT_S):
                obs.out = world.fn(*args)
        except (Exception, CallTimeout) as e:
            obs.exc = e
        if obs.exc is None and grad:
            leaves = [a for a in _flat(args) if isinstance(a, torch.Tensor) and a.requires_grad and a.is_leaf]
            leaves += [p for p in params if p.requires_grad]
            leaves += [p for a in args if isinstance(a, torch.nn.Module) for p in a.parameters() if p.requires_grad]
            outs = [
                o for o in _flat(obs.out) if isinstance(o, torch.Tensor) and o.requires_grad and o.is_floating_point()
            ]
            if call.seed % 3 == 0:  # one output's gradient only: the others' parameters keep .grad None, as in eager
                outs = outs[:1]
            if leaves and outs:
                # What the backward adds to a .grad the leaf had (Note [Values computed in half precision])
                before = [None if p.grad is None else p.grad.detach().clone() for p in leaves]
                try:
                    sum(o.sum() for o in outs).backward()
                except Exception as e:
                    obs.grad_exc = e
                obs.grads = [
                    None if p.grad is None else p.grad.detach() - b if b is not None else p.grad.detach().clone()
                    for p, b in zip(leaves, before)
                ]
    obs.stdout = buf.getvalue()
    # The program's own warnings (torch's, such as item() of a tensor that requires grad, are not compared)
    obs.warned = [(str(w.message), w.category.__name__, w.lineno) for w in warned if str(w.message).startswith("fuzz:")]
    obs.eager_runs = [str(w.message) for w in warned if issubclass(w.category, thunder.EagerRunWarning)]
    obs.aliases = _aliases(obs.out, args, world)
    obs.args = _args_after(args)
    obs.state = {name: _snap(_state_value(ns, name)) for name in prog.state}
    obs.torch_state = _torch_state()
    return obs


def compare(e, j, path: str, *, check_requires_grad: bool = True) -> str | None:
    """The first difference between eager's ``e`` and thunder's ``j``, or None."""
    if isinstance(e, torch.Tensor):
        if not isinstance(j, torch.Tensor):
            return f"{path}: eager gives a tensor, thunder gives {type(j).__name__} {_short(j)}"
        if e.dtype != j.dtype:
            return f"{path}: dtype {e.dtype} in eager, {j.dtype} in thunder"
        if e.shape != j.shape:
            return f"{path}: shape {tuple(e.shape)} in eager, {tuple(j.shape)} in thunder"
        if check_requires_grad and e.requires_grad != j.requires_grad:
            return f"{path}: requires_grad {e.requires_grad} in eager, {j.requires_grad} in thunder"
        try:
            torch.testing.assert_close(j.detach(), e.detach(), equal_nan=True, check_stride=False, **_tolerances(e))
        except AssertionError as err:
            lines = [ln.strip() for ln in str(err).splitlines() if ln.strip()]
            return f"{path}: values differ ({'; '.join(lines[:3])})"
        return None
    if _type_name(e) != _type_name(j):  # a class the program defines is one per world
        return f"{path}: eager gives {type(e).__name__} {_short(e)}, thunder gives {type(j).__name__} {_short(j)}"
    if isinstance(e, float):
        if math.isnan(e) and math.isnan(j):
            return None
        # A float read from a tensor (``float(t.sum())``) carries the tensor's rounding, which a fusion or a
        # decomposition may change in the last bits: compared as tensors are (float32's tolerances).
        if not math.isclose(e, j, rel_tol=1.3e-6, abs_tol=1e-5) or math.copysign(1.0, e) != math.copysign(1.0, j):
            return f"{path}: {e!r} in eager, {j!r} in thunder"
        return None
    if isinstance(e, (tuple, list, collections.deque)):
        if len(e) != len(j):
            return f"{path}: length {len(e)} in eager, {len(j)} in thunder ({_short(e)} vs {_short(j)})"
        for i, (a, b) in enumerate(zip(e, j)):
            d = compare(a, b, f"{path}[{i}]", check_requires_grad=check_requires_grad)
            if d:
                return d
        return None
    if isinstance(e, dict):
        if list(e) != list(j):
            return f"{path}: keys {list(e)!r:.80} in eager, {list(j)!r:.80} in thunder"
        for k in e:
            d = compare(e[k], j[k], f"{path}[{k!r}]", check_requires_grad=check_requires_grad)
            if d:
                return d
        return None
    if isinstance(e, (int, str, bytes, bytearray, set, frozenset, type(None), torch.dtype, torch.device)):
        return None if e == j else f"{path}: {_short(e)} in eager, {_short(j)} in thunder"
    if isinstance(e, types.SimpleNamespace):  # the objects programs return
        return compare(vars(e), vars(j), path, check_requires_grad=check_requires_grad)
    if dataclasses.is_dataclass(e):  # fields, which may be slots
        fields = [f.name for f in dataclasses.fields(e)]
        return compare([getattr(e, f) for f in fields], [getattr(j, f) for f in fields], path, check_requires_grad=check_requires_grad)
    if slot_names(type(e)):  # an object with __slots__
        names = slot_names(type(e))
        return compare([getattr(e, n, None) for n in names], [getattr(j, n, None) for n in names], path,
                       check_requires_grad=check_requires_grad)  # fmt: skip
    return None  # iterators, functions, ...: compared by type only


# Note [Values computed in half precision]
# A float32 or float64 tensor whose values all fit float16 or bfloat16 exactly, some of them fractions, was computed
# in that precision (a gradient through ``x.half()``, a result of ``.to(torch.bfloat16).float()``). Thunder computes
# half-precision ops in float32 and rounds once where eager rounds after every op (the backward of ``exp`` multiplies
# by the float32 exponential, eager by the rounded one): the last bit of the narrow dtype may differ, which its own
# tolerances allow and the wide dtype's do not. Where an op cancels (``var``: ``x - mean``, the mean rounded), the
# error is one of the operands' last bits, not the result's: the absolute tolerance is the relative one of the
# tensor's largest value.
_NARROW = {torch.float16: (1e-3, 1e-5), torch.bfloat16: (1.6e-2, 1e-5)}


def _tolerances(e: torch.Tensor) -> dict:
    """``assert_close``'s tolerances for eager's ``e`` (Note [Values computed in half precision])."""
    if e.dtype not in (torch.float32, torch.float64) or not e.numel():
        return {}
    finite = e.detach()[e.detach().isfinite()]
    if not finite.numel() or bool((finite == finite.round()).all()):
        return {}
    for dtype, (rtol, atol) in _NARROW.items():
        if bool((finite.to(dtype).to(e.dtype) == finite).all()):
            return {"rtol": rtol, "atol": max(atol, rtol * float(finite.abs().max()))}
    return {}


def _type_name(v) -> tuple[str, str]:
    return type(v).__module__, type(v).__qualname__


def _short(v) -> str:
    text = repr(v).replace("\n", " ")
    return text if len(text) <= 70 else text[:67] + "..."


def _exc(e: BaseException) -> str:
    msg = str(e).strip().splitlines()
    return f"{type(e).__name__}: {msg[0][:160] if msg else ''}"


def _is_internal(e: BaseException) -> bool:
    return isinstance(e, (InternalError, InterpreterError)) or not isinstance(e, ThunderError)


def classify(e: Observation, j: Observation) -> tuple[Outcome, str]:
    if isinstance(j.exc, CallTimeout) or isinstance(e.exc, CallTimeout):
        return Outcome.CRASH, f"hang: {j.exc or e.exc}" + ("" if j.exc else " (eager)")
    if j.exc is not None and isinstance(j.exc, RecursionError):
        return Outcome.CRASH, f"thunder: {_exc(j.exc)}"
    if j.eager_runs:  # the values are eager's, but tracing failed where eager did not
        return Outcome.INTERNAL, j.eager_runs[0]
    if j.exc is not None and isinstance(j.exc, (InternalError, InterpreterError)):
        return Outcome.INTERNAL, f"thunder raised {_exc(j.exc)}" + (f" (eager raised {_exc(e.exc)})" if e.exc else "")
    if e.exc is not None and j.exc is not None:
        if isinstance(j.exc, type(e.exc)) and not isinstance(j.exc, ThunderError):
            # the same exception, at tracing (Note [A program that raises]) or raised by the computation at run time
            # (an index out of range): the effects made before it must be eager's
            for check in _effect_checks(e, j):
                d = check()
                if d:
                    return Outcome.WRONG, f"both raised {_exc(e.exc)}, but {d}"
        if isinstance(j.exc, type(e.exc)) or isinstance(j.exc, ThunderError):
            return Outcome.CLEAR, f"both raised: eager {_exc(e.exc)}; thunder {_exc(j.exc)}"
        return Outcome.INTERNAL, f"eager raised {_exc(e.exc)}, thunder raised {_exc(j.exc)}"
    if e.exc is not None:
        return Outcome.WRONG, f"eager raised {_exc(e.exc)}, thunder returned {_short(j.out)}"
    if j.exc is not None:
        if _is_internal(j.exc):
            return Outcome.INTERNAL, f"thunder raised {_exc(j.exc)}, eager returned {_short(e.out)}"
        return Outcome.CLEAR, f"thunder raised {_exc(j.exc)}"
    checks = (
        lambda: compare(e.out, j.out, "result"),
        *_effect_checks(e, j),
        lambda: None if e.aliases == j.aliases else f"the result holds the arguments {e.aliases!r:.100} in eager, "
        f"{j.aliases!r:.100} in thunder",
        lambda: _grad_diff(e, j),
        # A backward that raised in both leaves what the engine accumulated before the error, in its own order.
        lambda: None if e.grad_exc is not None else compare(e.grads, j.grads, "gradients", check_requires_grad=False),
        lambda: compare(e.mutation_errors, j.mutation_errors, "state changes before the call"),
    )
    for check in checks:
        d = check()
        if d:
            return Outcome.WRONG, d
    return Outcome.OK, ""


def _effect_checks(e: Observation, j: Observation) -> tuple:
    """What a call did besides its result: printed, warned, wrote into its arguments and the outside state."""
    return (
        lambda: None if e.stdout == j.stdout else f"printed {e.stdout!r:.100} in eager, {j.stdout!r:.100} in thunder",
        lambda: None if e.warned == j.warned else f"warned {e.warned!r:.100} in eager, {j.warned!r:.100} in thunder",
        lambda: compare(e.args, j.args, "arguments after the call", check_requires_grad=False),
        lambda: compare(e.state, j.state, "outside state after the call", check_requires_grad=False),
        lambda: None if e.torch_state == j.torch_state else f"torch's global state (grad mode, default dtype, "
        f"deterministic algorithms) after the call is {e.torch_state} in eager, {j.torch_state} in thunder",
    )


def _grad_diff(e: Observation, j: Observation) -> str | None:
    if (e.grad_exc is None) == (j.grad_exc is None):
        return None
    if e.grad_exc is not None:
        return f"backward: eager raised {_exc(e.grad_exc)}, thunder did not"
    return f"backward: thunder raised {_exc(j.grad_exc)}, eager did not"


def check_program(prog: Program, cache: str, *, jit=None, stop_at_failure: bool = True) -> ProgramResult:
    """Runs ``prog``'s calls for ``cache`` eagerly and jitted; one ``CallResult`` per call run.

    ``jit`` replaces ``thunder.jit`` (for testing the checker itself)."""
    with _torch_state_restored():
        return _check_program(prog, cache, jit, stop_at_failure)


def _check_program(prog: Program, cache: str, jit, stop_at_failure: bool) -> ProgramResult:
    result = ProgramResult(prog, cache)
    source = prog.source
    try:
        eager = World(prog, source, None)
    except Exception as e:  # a generator bug: the program does not even load eagerly
        result.calls.append(CallResult(-1, Outcome.CRASH, f"program does not load: {_exc(e)}"))
        return result
    try:
        jitted = World(prog, source, None)
        jitted.fn = (jit or thunder.jit)(jitted.fn, cache=None if cache == "default" else cache)
    except Exception as e:
        outcome = (
            Outcome.CLEAR if isinstance(e, ThunderError) and not isinstance(e, InternalError) else Outcome.INTERNAL
        )
        result.calls.append(CallResult(-1, outcome, f"thunder.jit itself raised {_exc(e)}"))
        return result
    for i, call in enumerate(calls_for(prog, cache)):
        try:
            # Both worlds start the call (its state changes first) from the same global torch state: the eager
            # world's changes (a new default dtype) must not reach the jitted world's state changes
            start = _torch_state()
            e = observe(eager, prog, call)
            _set_torch_state(start)
            j = observe(jitted, prog, call)
            outcome, detail = classify(e, j)
        except BaseException as err:  # a crash of the run is a finding too
            if isinstance(err, KeyboardInterrupt):
                raise
            result.calls.append(CallResult(i, Outcome.CRASH, f"checker could not finish the call: {_exc(err)}"))
            break
        result.calls.append(CallResult(i, outcome, detail))
        if outcome in FAILURES and stop_at_failure:
            break
        if e.exc is not None and compare(e.state, j.state, "") is not None:
            break  # both raised but left the worlds different: later calls would mean nothing
        if e.exc is None and j.exc is not None:
            break  # a clear error where eager ran: eager's effects were made in its world only
    return result


def _fails_last(prog: Program, cache: str, outcome: Outcome, jit=None) -> bool:
    res = check_program(prog, cache, jit=jit)
    f = res.failure
    return f is not None and f.outcome is outcome and f.index == len(calls_for(prog, cache)) - 1


def shrink(prog: Program, cache: str, *, jit=None, budget: int = 40) -> Program:
    """A smaller program and call sequence that still fails the same way on its last call."""
    res = check_program(prog, cache, jit=jit)
    failure = res.failure
    if failure is None or failure.index < 0 or failure.outcome is Outcome.CRASH:
        return prog  # a hang costs the timeout on every try: not worth shrinking
    outcome = failure.outcome
    if cache == "same input":
        prog = replace(prog, calls=prog.calls[: failure.index + 1])
    else:
        prog = replace(prog, calls=prog.calls[: failure.index + 1])
    tries = 0

    def attempt(candidate: Program) -> bool:
        nonlocal tries
        tries += 1
        return tries <= budget and _fails_last(candidate, cache, outcome, jit)

    i = 0
    while i < len(prog.calls) - 1:  # drop earlier calls
        cand = replace(prog, calls=prog.calls[:i] + prog.calls[i + 1 :])
        if attempt(cand):
            prog = cand
        else:
            i += 1
    i = 0
    while i < len(prog.snippets) and len(prog.snippets) > 1:  # drop snippets
        cand = prog.without_snippet(i)
        if attempt(cand):
            prog = cand
        else:
            i += 1
    for ci, call in enumerate(prog.calls):  # drop state changes
        k = 0
        while k < len(call.before):
            new_call = replace(call, before=call.before[:k] + call.before[k + 1 :])
            cand = replace(prog, calls=prog.calls[:ci] + [new_call] + prog.calls[ci + 1 :])
            if attempt(cand):
                prog, call = cand, new_call
            else:
                k += 1
    return prog


def reproducer(prog: Program, cache: str, detail: str = "") -> str:
    """The program and its calls as one script (thunder's results printed; eager's in comments)."""
    lines = [f"# family {prog.family}, seed {prog.seed}, cache={cache!r}, entry {prog.entry_expr}"]
    if detail:
        lines.append(f"# last call: {detail}")
    option = "" if cache == "default" else f", cache={cache!r}"
    lines += [prog.source.rstrip(), "", f"jfn = thunder.jit({prog.entry_expr}{option})"]
    for call in calls_for(prog, cache):
        for _, stmt in call.before:
            lines.append(stmt)
        lines.append(f"torch.manual_seed({call.seed}); args = {call.args}")
        lines.append(f"random.seed({call.seed}); print(jfn(*args))")
    return "\n".join(lines) + "\n"
