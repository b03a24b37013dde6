"""Tracing through a jitted function called by the function being traced.

``thunder.jit(g)`` where ``g`` calls ``f = thunder.jit(h)``: while ``g`` is traced, the call of
``f`` must not run ``f``'s own cache machinery on proxies (its prologue would reject them and
it would try to compile a trace inside a trace). The tracer's lookaside asks
``inner_jitted_lookaside(fn)``; for a function made by ``thunder.jit`` (it has ``_thunder``, its
state, and ``__wrapped__``, what it compiles) it returns a replacement that interprets
``__wrapped__`` in the running interpretation, so ``h``'s operations are recorded into ``g``'s
trace as if ``g`` had called ``h``. ``f``'s own options (executors, cache) do not apply inside
``g``: ``g``'s do.

Layer: tracing. Imports: the interpreter.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

from thunder.core.interpreter.execution import call
from thunder.core.interpreter.runtime import current_runtime

__all__ = ["inner_jitted_lookaside"]


def inner_jitted_lookaside(fn: Any) -> Callable | None:
    """For a function returned by ``thunder.jit``: a callable that traces what it wraps; else None."""
    if type(fn) is not types.FunctionType:
        return None
    attrs = fn.__dict__
    if "_thunder" not in attrs:
        return None
    wrapped = attrs.get("__wrapped__")
    if wrapped is None:
        return None
    return functools.partial(_interpret_wrapped, wrapped)


def _interpret_wrapped(wrapped: Callable, *args, **kwargs) -> Any:
    """Runs ``wrapped`` under the interpretation that called the jitted function (this thread's)."""
    ctx = current_runtime()
    if ctx is None:  # not under the interpreter: nothing to trace into
        return wrapped(*args, **kwargs)
    return call(ctx, wrapped, args, kwargs or None)
