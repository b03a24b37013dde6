"""The trace being recorded now, and the source-location provider.

Both live in ``contextvars`` (one value per thread, and per asyncio task), never in module
globals: two threads tracing at once each see their own trace (see "Threads" in
``ARCHITECTURE.md``).

Layer: core. Imports: stdlib only. Kept tiny so every core module can import it.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator
from typing import Any

_current_trace: contextvars.ContextVar[Any] = contextvars.ContextVar("thunder_current_trace", default=None)
# Set by the tracing layer while it records: returns the user's source location of the call
# being recorded (see ``thunder.core.symbol.SourceLocation``).
_source_location_provider: contextvars.ContextVar[Callable[[], Any] | None] = contextvars.ContextVar(
    "thunder_source_location_provider", default=None
)


def get_tracectx():
    """The ``TraceCtx`` being recorded (on this thread), or None."""
    return _current_trace.get()


def set_tracectx(trace) -> Any:
    """Makes ``trace`` the current trace of this thread; returns the previous one."""
    prev = _current_trace.get()
    _current_trace.set(trace)
    return prev


def reset_tracectx(previous) -> None:
    """Makes ``previous`` (what ``set_tracectx`` returned) the current trace again."""
    _current_trace.set(previous)


class tracectx:
    """Record symbol calls into ``trace`` inside the ``with`` block. (A class, not a generator context manager:
    tracing enters one for every proxy of the prologue, and ``contextlib``'s cost a microsecond more each.)"""

    __slots__ = ("trace", "token")

    def __init__(self, trace):
        self.trace = trace

    def __enter__(self) -> Any:
        self.token = _current_trace.set(self.trace)
        return self.trace

    def __exit__(self, *exc_info) -> None:
        _current_trace.reset(self.token)


def current_source_location():
    provider = _source_location_provider.get()
    return provider() if provider is not None else None


@contextlib.contextmanager
def source_location_provider(provider: Callable[[], Any] | None) -> Iterator[None]:
    token = _source_location_provider.set(provider)
    try:
        yield
    finally:
        _source_location_provider.reset(token)
