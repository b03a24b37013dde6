"""The public entry point: ``interpret`` and the queries on an interpreted callable.

Layer: ``thunder.core.interpreter``. Imports: the standard library and the interpreter's modules.
"""

from __future__ import annotations

import dis
import functools
import sys
import threading
import weakref
from collections.abc import Callable
from types import FunctionType, MethodType

from . import natives as _natives  # noqa: F401  (registers the adapters of native callbacks: before conversions')

# isort: split
from . import conversions as _conversions  # noqa: F401  (registers the adapters of conversions)
from . import handlers as _handlers  # noqa: F401  (registers the opcode handlers)
from . import lookasides as _lookasides  # noqa: F401  (registers the interpreter's lookasides)
from .errors import InterpreterError
from .execution import call
from .runtime import InterpreterCallbacks, Runtime, make_opaque, runtime_stack
from .tracebacks import reraise_in_user_frames
from .versions import check_python_version

__all__ = ["interpret", "last_interpreted_instructions", "last_interpreter_log"]


# Each interpreted call nests about five Python frames of the interpreter (call, enter_function,
# run_function_frame, run_frame, the CALL handler). While the outermost interpretation runs, the recursion limit
# is raised by this factor so that interpreted programs can recurse about as deep as they can natively.
# The limit is process-wide while interpretations are per thread, so the first outermost interpretation in any
# thread raises it and the last one to finish restores it; a count under a lock keeps concurrent threads from
# compounding the factor.
_RECURSION_FACTOR = 6
_recursion_lock = threading.Lock()
_recursion_users = 0
_recursion_saved = 0


def _raise_recursion_limit() -> None:
    global _recursion_users, _recursion_saved
    with _recursion_lock:
        if _recursion_users == 0:
            _recursion_saved = sys.getrecursionlimit()
            sys.setrecursionlimit(_recursion_saved * _RECURSION_FACTOR)
        _recursion_users += 1


def _restore_recursion_limit() -> None:
    global _recursion_users
    with _recursion_lock:
        _recursion_users -= 1
        if _recursion_users == 0:
            sys.setrecursionlimit(_recursion_saved)


def _run(ctx: Runtime, fn, args: tuple, kwargs: dict):
    runtimes = runtime_stack()
    outermost = not runtimes
    if outermost:
        _raise_recursion_limit()
    runtimes.append(ctx)
    exc = None
    try:
        return call(ctx, fn, args, kwargs)
    except InterpreterError:
        raise
    except BaseException as e:
        exc = e
    finally:
        runtimes.pop()
        ctx.done = True
        ctx.propagating = None
        # The traceback entries of the last exception, which may have been caught (its traceback references the
        # interpreter's frames, which reference ctx: a cycle, broken here).
        frames = ctx.unwound[::-1] if exc is not None and ctx.unwound_exc is exc else []
        ctx.unwound_exc = None
        ctx.unwound = []
        if outermost:
            _restore_recursion_limit()
    # Outside the except clause, so nothing of the interpreter becomes the exception's context.
    try:
        reraise_in_user_frames(exc, frames)
    finally:
        exc = None


def interpret(
    fn: Callable,
    *,
    fn_lookaside: Callable | None = None,
    callbacks: InterpreterCallbacks | None = None,
    with_provenance_tracking: bool = False,
    record_history: bool = False,
    uncacheable_classes: tuple | None = None,
    **kwargs,
) -> Callable:
    """Returns a callable with ``fn``'s signature that runs ``fn`` under the bytecode interpreter.

    Args:
        fn: a function, bound method, callable object, class or builtin (builtins run natively).
        fn_lookaside: ``fn_lookaside(target)`` is asked before every call the program makes; a non-None result
            is called natively instead of ``target``. See Note [Calls under the interpreter] in ``execution``.
        callbacks: ``InterpreterCallbacks`` hooks (or a dict of them).
        with_provenance_tracking: accepted for compatibility; provenance is the tracing layer's job here.
        record_history: keep the full log for ``last_interpreter_log``.
        uncacheable_classes: accepted for compatibility; unused.

    Returns:
        The wrapper. ``last_interpreted_instructions(wrapper)`` and ``last_interpreter_log(wrapper)`` describe
        its last call.
    """
    check_python_version()
    if isinstance(callbacks, dict):
        callbacks = InterpreterCallbacks(**callbacks)

    def interpreted(*args, **kwargs):
        ctx = Runtime(fn_lookaside, callbacks, record_history)
        wrapper = itself()
        wrapper._last_interpreted_instructions = ctx.instructions
        wrapper._last_interpreter_log = ctx.log
        return _run(ctx, fn, args, kwargs)

    # Weakly: a wrapper that named itself would be a reference cycle, left for the garbage collector to find.
    itself = weakref.ref(interpreted)

    try:
        # A class's or object's __dict__ holds its attributes, not function metadata: copy names and docs only.
        functools.update_wrapper(interpreted, fn, updated=functools.WRAPPER_UPDATES if callable_is_function(fn) else ())
    except (AttributeError, TypeError):
        pass
    # Called by an interpreted program (directly or as a callback), it runs its own interpretation.
    make_opaque(interpreted)
    interpreted._interpreted_fn = fn
    interpreted._last_interpreted_instructions = None
    interpreted._last_interpreter_log = None
    return interpreted


def callable_is_function(fn) -> bool:
    return isinstance(fn, (FunctionType, MethodType, functools.partial))


def _check(fn: Callable, attr: str):
    if not hasattr(fn, "_interpreted_fn"):
        raise TypeError(f"{fn!r} is not a callable returned by interpret()")
    value = getattr(fn, attr)
    if value is None and attr == "_last_interpreted_instructions":
        raise TypeError(f"{fn!r} has not been called yet")
    return value


def last_interpreted_instructions(fn: Callable) -> list[dis.Instruction]:
    """The instructions run by the last call of ``fn`` (a callable returned by ``interpret``), in execution
    order across all interpreted frames."""
    return _check(fn, "_last_interpreted_instructions")


def last_interpreter_log(fn: Callable) -> list:
    """The log of the last call of ``fn``: instructions interleaved with Line, InterpreterCall,
    InterpreterReturn, Lookaside and Opaque entries (see ``log``). Without ``record_history=True`` only the
    instructions were recorded and that list is returned."""
    instructions = _check(fn, "_last_interpreted_instructions")
    log = fn._last_interpreter_log
    return list(instructions) if log is None else log
