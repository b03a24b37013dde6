"""Dead-code elimination.

Layer: transforms. Imports: core.
"""

from __future__ import annotations

from thunder.core.trace import TraceCtx, from_trace, live_bound_symbols, timed_pass


@timed_pass("Dead Code Elimination")
def dce(trace: TraceCtx) -> TraceCtx:
    """Removes bound symbols whose outputs nothing uses."""
    new = from_trace(trace)
    new.bound_symbols.extend(live_bound_symbols(trace.bound_symbols))
    return new
