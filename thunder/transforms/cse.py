"""Common-subexpression elimination.

Two bound symbols of the same symbol with the same arguments compute the same value unless
the symbol is random or in-place; after an in-place op, earlier results that read the
mutated tensor are no longer reused.

Note [CSE and mutation]
Merging ``b = x + 1`` into an earlier ``a = x + 1`` makes ``a`` and ``b`` one tensor. That is
only right if neither is mutated afterwards: ``a.add_(1)`` must not change ``b``. A value is
mutated when an in-place op writes it or a view of it, and the trace does not say which ops
return views, so every value an in-place op writes is followed back through the ops that made
it (any of them may be a view of its inputs): no bound symbol that produces one of those values
is merged or reused. Merging two identical view ops would be harmless, but they are kept apart
too: the cost is only a missed merge in programs that mutate.

Ops under different grad modes are not merged: ``x * 2`` computed with grad on and again inside
``torch.no_grad()`` are two values, one differentiable and one not (merged, the second carried a
gradient where eager's does not).

Note [CSE before the autograd split]
Two calls ``x * w`` whose results require grad are two nodes of eager's autograd graph: the backward multiplies
each use's gradient by ``x`` and adds the products, ``g1 * x + g2 * x``. Merged before the split, they are one
value whose gradients add up first, ``(g1 + g2) * x``: equal in exact arithmetic, but not in floating point, and
not at ``x = inf`` where ``g1`` is 0 (eager's ``nan``, the merged ``inf``). So the CSE before the split leaves such
calls apart (``keep_differentiable``): the split differentiates each as eager does, and a fusion executor that
fuses both still computes the value once. Calls whose results need no gradient (masks, position ids, shapes, the
bulk of what the pass merges in real models) merge as before, and so does everything when nothing is split.

Layer: transforms. Imports: core.
"""

from __future__ import annotations

from collections.abc import Hashable

import torch

from thunder.core import prims
from thunder.core.proxies import Proxy
from thunder.core.symbol import DONT_DCE, IN_PLACE, RANDOM, BoundSymbol, mutates
from thunder.core.symbolic import is_symbolic
from thunder.core.trace import TraceCtx, from_trace, timed_pass

_NOT_MERGED = frozenset({RANDOM, IN_PLACE, DONT_DCE})


def _key(x) -> Hashable:
    if isinstance(x, Proxy):
        return ("proxy", x.name)
    if is_symbolic(x):
        return ("symbolic", x.expr)
    if isinstance(x, (list, tuple)):
        kind = "tuple" if type(x) is torch.Size else type(x).__name__  # a shape either way
        return (kind, tuple(_key(v) for v in x))
    if isinstance(x, dict):
        return ("dict", tuple((k, _key(v)) for k, v in x.items()))
    if type(x) is slice:  # hashable from 3.12: hashing would pin symbolic bounds to their values
        return ("slice", _key(x.start), _key(x.stop), _key(x.step))
    if isinstance(x, (float, complex)):  # by repr: ``-0.0 == 0.0``, yet ``t // -0.0`` is not ``t // 0.0``; nans alike
        return (type(x).__name__, repr(x))
    hash(x)
    return (type(x).__name__, x)


def _bsym_key(bsym: BoundSymbol, swap: dict[str, Proxy]) -> Hashable | None:
    try:
        args = tuple(_key(swap.get(a.name, a) if isinstance(a, Proxy) else a) for a in bsym.args)
        kwargs = tuple((k, _key(v)) for k, v in bsym.kwargs.items())
        return (bsym.sym.id, args, kwargs)
    except TypeError:
        return None


def _written(bsym: BoundSymbol) -> set[str]:
    """Names of the values an in-place bound symbol (or one in its decomposition) writes."""
    names = {o.name for o in bsym.flat_proxy_outs} if IN_PLACE in bsym.sym.tags else set()
    for s in bsym.subsymbols:
        names |= _written(s)
    return names


def possibly_mutated(bsyms: list[BoundSymbol], writes: list[bool] | None = None) -> set[str]:
    """Names of values that an in-place op writes, directly or through a chain of ops that may
    return views (see Note [CSE and mutation]; ``clone`` is known not to). ``writes``: ``mutates`` of each bound
    symbol, where the caller has it."""
    writes = [mutates(b) for b in bsyms] if writes is None else writes
    mutated: set[str] = set()
    for bsym, w in zip(bsyms, writes):
        if w:
            mutated |= _written(bsym)
    if not mutated:
        return mutated
    for bsym, w in zip(reversed(bsyms), reversed(writes)):
        if bsym.sym.name == "clone":  # new memory: writing the copy leaves what it copied alone
            continue
        if not w and any(o.name in mutated for o in bsym.flat_proxy_outs):
            mutated.update(a.name for a in bsym.flat_proxy_args)
    return mutated


@timed_pass("Common Subexpression Elimination")
def cse(trace: TraceCtx, *, keep_differentiable: bool = False) -> TraceCtx:
    """Replaces repeated computations by the first result (see Note [CSE and mutation]); with
    ``keep_differentiable``, not those whose results require grad (Note [CSE before the autograd split])."""
    new = from_trace(trace)
    seen: dict[Hashable, BoundSymbol] = {}
    swap: dict[str, Proxy] = {}
    writes = [mutates(b) for b in trace.bound_symbols]  # (renaming changes no symbol: the same for a renamed one)
    mutated = possibly_mutated(trace.bound_symbols, writes)
    grad_mode = None  # the call's own until the trace switches it
    for bsym, w in zip(trace.bound_symbols, writes):
        if swap and any(a.name in swap for a in bsym.flat_proxy_args):
            bsym = bsym.rename(swap)
        if bsym.sym is prims.set_grad_enabled:
            grad_mode = bool(bsym.args[0])
        if w or bsym.sym.tags & _NOT_MERGED:
            if w:
                seen.clear()
            new.bound_symbols.append(bsym)
            continue
        if mutated and any(o.name in mutated for o in bsym.flat_proxy_outs) or keep_differentiable and any(
            getattr(o, "requires_grad", False) for o in bsym.flat_proxy_outs
        ):
            new.bound_symbols.append(bsym)
            continue
        key = _bsym_key(bsym, swap)
        key = (grad_mode, key) if key is not None else None
        prior = seen.get(key) if key is not None else None
        if prior is not None and len(prior.flat_proxy_outs) == len(bsym.flat_proxy_outs):
            for old, kept in zip(bsym.flat_proxy_outs, prior.flat_proxy_outs):
                swap[old.name] = kept
            continue
        if key is not None:
            seen[key] = bsym
        new.bound_symbols.append(bsym)
    return new
