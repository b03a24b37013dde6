"""Common-subexpression elimination.

Two bound symbols of the same symbol with the same arguments compute the same value unless
the symbol is random or in-place; after an in-place op, earlier results that read the
mutated tensor are no longer reused.

Layer: transforms. Imports: core.
"""

from __future__ import annotations

from collections.abc import Hashable

from thunder.core.proxies import Proxy
from thunder.core.symbol import DONT_DCE, IN_PLACE, RANDOM, BoundSymbol
from thunder.core.symbolic import is_symbolic
from thunder.core.trace import TraceCtx, from_trace, timed_pass

_NOT_MERGED = frozenset({RANDOM, IN_PLACE, DONT_DCE})


def _key(x) -> Hashable:
    if isinstance(x, Proxy):
        return ("proxy", x.name)
    if is_symbolic(x):
        return ("symbolic", x.expr)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__, tuple(_key(v) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((k, _key(v)) for k, v in x.items()))
    if isinstance(x, float) and x != x:
        return ("nan",)
    hash(x)
    return (type(x).__name__, x)


def _bsym_key(bsym: BoundSymbol, swap: dict[str, Proxy]) -> Hashable | None:
    try:
        args = tuple(_key(swap.get(a.name, a) if isinstance(a, Proxy) else a) for a in bsym.args)
        kwargs = tuple((k, _key(v)) for k, v in bsym.kwargs.items())
        return (bsym.sym.id, args, kwargs)
    except TypeError:
        return None


@timed_pass("Common Subexpression Elimination")
def cse(trace: TraceCtx) -> TraceCtx:
    """Replaces repeated computations by the first result."""
    new = from_trace(trace)
    seen: dict[Hashable, BoundSymbol] = {}
    swap: dict[str, Proxy] = {}
    for bsym in trace.bound_symbols:
        if swap and any(a.name in swap for a in bsym.flat_proxy_args):
            bsym = bsym.rename(swap)
        if bsym.sym.tags & _NOT_MERGED:
            if IN_PLACE in bsym.sym.tags:
                seen.clear()
            new.bound_symbols.append(bsym)
            continue
        key = _bsym_key(bsym, swap)
        prior = seen.get(key) if key is not None else None
        if prior is not None and len(prior.flat_proxy_outs) == len(bsym.flat_proxy_outs):
            for old, kept in zip(bsym.flat_proxy_outs, prior.flat_proxy_outs):
                swap[old.name] = kept
            continue
        if key is not None:
            seen[key] = bsym
        new.bound_symbols.append(bsym)
    return new
