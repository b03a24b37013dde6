"""Dead-code elimination.

Layer: transforms. Imports: core.
"""

from __future__ import annotations

from thunder.core.proxies import Proxy
from thunder.core.symbol import DONT_DCE, MAY_RAISE, BoundSymbol
from thunder.core.trace import TraceCtx, from_trace, timed_pass


def live_bound_symbols(bsyms: list[BoundSymbol], needed: set[str] | None = None) -> list[BoundSymbol]:
    """The bound symbols whose outputs are used (or that have side effects), in order."""
    needed = set() if needed is None else needed
    kept: list[BoundSymbol] = []
    for bsym in reversed(bsyms):
        outs = bsym.flat_proxy_outs
        tags = bsym.sym.tags
        # An op that eager could fail at run time is kept, so the program fails where eager fails.
        if DONT_DCE in tags or MAY_RAISE in tags or any(o.name in needed for o in outs) or not _has_outputs(bsym):
            kept.append(bsym)
            needed.update(a.name for a in bsym.flat_proxy_args)
    kept.reverse()
    return kept


def _has_outputs(bsym: BoundSymbol) -> bool:
    # A call that produces nothing is kept only for its side effects, which DONT_DCE marks.
    return bool(bsym.flat_proxy_outs) or not isinstance(bsym.output, Proxy) and bsym.output is not None


@timed_pass("Dead Code Elimination")
def dce(trace: TraceCtx) -> TraceCtx:
    """Removes bound symbols whose outputs nothing uses."""
    new = from_trace(trace)
    new.bound_symbols.extend(live_bound_symbols(trace.bound_symbols))
    return new
