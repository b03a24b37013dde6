"""The trace being recorded now, and the source-location provider.

Layer: core. Imports: stdlib only. Kept tiny so every core module can import it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

_current_trace: Any = None
# Set by the tracing layer while it records: returns the user's source location of the call
# being recorded (see ``thunder.core.symbol.SourceLocation``).
_source_location_provider: Callable[[], Any] | None = None


def get_tracectx():
    """The ``TraceCtx`` being recorded, or None."""
    return _current_trace


def set_tracectx(trace) -> Any:
    global _current_trace
    prev, _current_trace = _current_trace, trace
    return prev


@contextlib.contextmanager
def tracectx(trace) -> Iterator[Any]:
    """Record symbol calls into ``trace`` inside the ``with`` block."""
    prev = set_tracectx(trace)
    try:
        yield trace
    finally:
        set_tracectx(prev)


def current_source_location():
    return _source_location_provider() if _source_location_provider is not None else None


@contextlib.contextmanager
def source_location_provider(provider: Callable[[], Any] | None) -> Iterator[None]:
    global _source_location_provider
    prev, _source_location_provider = _source_location_provider, provider
    try:
        yield
    finally:
        _source_location_provider = prev
