"""Rematerialisation: the backward recomputes cheap values of the forward's fusions instead of
having them saved.

Note [Rematerialisation]
The split (Note [Forward and backward traces]) saves every forward value the backward reads:
for ``layer_norm(gelu(x @ w) * 2)`` the product, the gelu and the matmul's result. Inside fusions
this is wasteful both ways: the forward writes each saved value to memory and keeps it alive until
the backward, and the backward reads it back, where recomputing ``gelu`` from ``x @ w`` (which the
backward reads anyway) costs a few arithmetic instructions in a kernel that runs regardless.

So, before the executors claim the traces, each region of a fusion executor in the forward (as
``find_regions`` will form it) is looked at on its own. Its ops form a graph whose values are
either *saved* (they cross from forward to backward) or *recomputed* in the backward from saved
ones. The choice is a minimum cut, by bytes saved, between what the forward must compute itself
and what the backward reads: every value node is split in two joined by an edge of its size, the
region's inputs and the outputs of ops that are not cheap (a matmul, a convolution, anything
random, anything an executor runs opaquely) hang from the source, and the values the backward
reads hang from the sink. Cheap ops are prims of the elementwise, shape and reduction families
(and torch-level ops made only of them); on a CPU, not the math-library functions (``exp``,
``erf``, ``tanh``, ...), which cost more to recompute there than to read back. Inputs of the whole program cost nothing to save (the
caller holds them, parameters live anyway); ties go to saving the later value, so nothing is
recomputed that saves no memory.

Only executors whose regions run compiled from the first call take part (``FusionExecutor.
rematerializes``): ``torchcompile_background`` runs a region as torch's kernels until it is
compiled, and there a recomputation is one kernel more per op (a GPT-2 training step 1.33x
eager's time instead of 1.04x).

A value is only recomputed where every op of the backward that reads it belongs to the same
fusion executor as its forward region, so the recomputation lands inside a backward fusion (the
region finder puts the copied ops right before their first reader, in its group) and never costs
a kernel of its own. The copied ops keep their names (values the backward no longer receives)
and their lineage, so the explorer links them to the forward op they repeat.

It changes nothing where no fusion executor is listed or where a size is symbolic. A forward
that writes in place into a value of its own (or a view) is left alone; where it writes into an
input of the program (batch norm's running statistics), nothing that depends on the written
tensor is recomputed or newly saved: a recomputation, or a view saved after the write, would
read the new contents.
Recomputing a value from a program input means saving that input; torch then raises, as for
any saved input, if the caller modifies it in place before the backward.

Layer: transforms. Imports: core, extend, transforms.execution.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import networkx as nx
from networkx.algorithms.flow import boykov_kolmogorov

from thunder.core import prims
from thunder.core.prims.elementwise import ElementwisePrimIDs
from thunder.core.prims.factory import FactoryPrimIDs
from thunder.core.prims.reduction import ReductionPrimIDs
from thunder.core.prims.shape import ShapePrimIDs
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import DONT_DCE, IN_PLACE, RANDOM, BoundSymbol
from thunder.core.trace import TraceCtx, from_trace, live_bound_symbols
from thunder.extend import Executor, FusionExecutor, Region, find_regions
from thunder.transforms.execution import claim_bound_symbols

__all__ = ["rematerialize"]

_CHEAP_REDUCTIONS = frozenset(
    {ReductionPrimIDs.SUM, ReductionPrimIDs.PROD, ReductionPrimIDs.AMAX, ReductionPrimIDs.AMIN, ReductionPrimIDs.VAR,
     ReductionPrimIDs.VAR_MEAN}
)  # fmt: skip
_CHEAP_FACTORIES = frozenset({FactoryPrimIDs.FULL, FactoryPrimIDs.IOTA})
_IMPURE = frozenset({IN_PLACE, DONT_DCE, RANDOM})
# Functions that cost a math-library call per element: on a CPU, where a kernel is bound by its
# arithmetic rather than by memory, recomputing them costs more than reading them back (measured:
# a Linear-GELU-Linear training step 3% slower when the backward recomputes GELU).
_E = ElementwisePrimIDs
_MATH_LIBRARY = frozenset(
    {_E.EXP, _E.EXP2, _E.EXPM1, _E.LOG, _E.LOG1P, _E.LOG2, _E.LOG10, _E.SIN, _E.COS, _E.TAN, _E.ASIN, _E.ACOS,
     _E.ATAN, _E.SINH, _E.COSH, _E.TANH, _E.ASINH, _E.ACOSH, _E.ATANH, _E.ERF, _E.ERFC, _E.ERFINV, _E.LGAMMA,
     _E.DIGAMMA, _E.TRIGAMMA, _E.SIGMOID, _E.POW, _E.ATAN2}
)  # fmt: skip
_SOURCE, _SINK = "source", "sink"


def rematerialize(
    forward: TraceCtx, backward: TraceCtx, saved: Sequence, executors: Sequence[Executor]
) -> tuple[TraceCtx, TraceCtx, list] | None:
    """The forward and backward traces with the saved values chosen by Note [Rematerialisation],
    and the new saved list (the backward's leading parameters); None when nothing changes."""
    if not any(isinstance(ex, FusionExecutor) and ex.rematerializes for ex in executors):
        return None
    program_inputs = {a.name for a in forward.args if isinstance(a, Proxy)}
    written = _written(forward.bound_symbols)
    if not written <= program_inputs:
        return None  # a write into a value of the trace (or a view): its readers are left alone
    cheap = _Cheapness()
    claimed = claim_bound_symbols(forward.bound_symbols, executors, names=set(forward.names))
    tainted = _reading_written(claimed, written)
    read_by = _backward_readers(backward, executors)
    saved_names = {p.name for p in saved if isinstance(p, Proxy)}
    top_level = set(program_inputs)
    top_level.update(o.name for b in forward.bound_symbols for o in b.flat_proxy_outs)

    keep: set[str] = set()  # values the cuts save
    producers: dict[str, BoundSymbol] = {}  # value -> the cheap region op that computes it
    considered: set[str] = set()  # saved values that belong to a fusion region
    for region in find_regions(claimed):
        if not region.is_fusion or not region.executor.rematerializes:
            continue
        targets = [p for p in _region_values(region) if p.name in saved_names]
        if not targets:
            continue
        cut = _cut(region, targets, read_by, program_inputs, saved_names, top_level - tainted, tainted, cheap)
        if cut is None:
            continue
        save, recomputable = cut
        keep |= save
        producers.update(recomputable)
        considered.update(p.name for p in targets)

    recomputed = considered - keep
    if not recomputed:
        return None
    steps = _recomputation(recomputed, keep | (saved_names - considered), producers)
    if steps is None:
        return None
    by_name = {p.name: p for p in _proxies(forward)}
    new_saved = [p for p in saved if not (isinstance(p, Proxy) and p.name in recomputed)]
    present = {p.name for p in new_saved if isinstance(p, Proxy)}
    new_saved += [p for n, p in by_name.items() if n in keep and n not in present]  # in definition order
    # A recomputing op may not define what the backward defines or receives (a backward that
    # recomputes a decomposition itself, the other output of a ``var_mean`` that stays saved).
    taken = {o.name for b in backward.bound_symbols for o in b.flat_proxy_outs}
    taken |= {p.name for p in new_saved if isinstance(p, Proxy)}
    if any(o.name in taken for b in steps for o in b.flat_proxy_outs):
        return None
    return _forward_saving(forward, new_saved), _backward_recomputing(backward, saved, new_saved, steps), new_saved


def _region_values(region: Region) -> list[TensorProxy]:
    """The tensors the region's ops produce, in order."""
    return [o for b in region.bound_symbols for o in b.flat_proxy_outs if isinstance(o, TensorProxy)]


def _cut(
    region: Region,
    targets: list[TensorProxy],
    read_by: dict[str, set[int]],
    program_inputs: set[str],
    saved_names: set[str],
    savable: set[str],
    tainted: set[str],
    cheap: _Cheapness,
) -> tuple[set[str], dict[str, BoundSymbol]] | None:
    """The values of ``region`` to save (a minimum cut, Note [Rematerialisation]) and the cheap
    ops that compute the others; None where a size is symbolic. ``savable``: the values that may
    be saved anew (the forward returns them before the executors decompose anything, so they are
    of its top level; none depends on a tensor written in place). ``tainted``: the values that
    depend on a tensor written in place, never recomputed from."""
    ex = id(region.executor)
    g = nx.DiGraph()
    g.add_nodes_from((_SOURCE, _SINK))
    order: dict[str, int] = {}
    sizes: dict[str, int] = {}

    def value(p: TensorProxy, *, from_source: bool, savable: bool = True) -> bool:
        if p.name in order:
            return True
        size = _bytes(p)
        if size is None:
            return False
        order[p.name], sizes[p.name] = len(order), size
        if from_source:
            g.add_edge(_SOURCE, (p.name, "in"))
        if savable:
            g.add_edge((p.name, "in"), (p.name, "out"), capacity=None)  # set below, when the order is known
        else:
            g.add_edge((p.name, "in"), (p.name, "out"))  # no capacity: infinite
        return True

    for p in region.inputs:
        if isinstance(p, TensorProxy) and not value(
            p, from_source=True, savable=p.name in savable or p.name in saved_names
        ):
            return None
    recomputable: dict[str, BoundSymbol] = {}
    for b in region.bound_symbols:
        outs = b.flat_proxy_outs
        args = b.flat_proxy_args
        ok = cheap(b) and all(isinstance(p, TensorProxy) and p.name not in tainted for p in (*args, *outs))
        for o in outs:
            if not isinstance(o, TensorProxy):
                continue
            if not value(o, from_source=not ok, savable=o.name in savable or o.name in saved_names):
                return None
            if ok:
                recomputable[o.name] = b
                for a in b.flat_proxy_args:
                    g.add_edge((a.name, "out"), (o.name, "in"))
    for t in targets:
        g.add_edge((t.name, "out"), _SINK)
        if read_by.get(t.name, set()) - {ex}:  # read outside this executor's fusions: saved as it is
            g.add_edge(_SOURCE, (t.name, "in"))

    # Bytes first; among equal sizes the later value is cheaper (fewer recomputations).
    scale = len(order) + 1
    for name, pos in order.items():
        edge = g.edges[(name, "in"), (name, "out")]
        if "capacity" in edge:
            free = name in program_inputs or (name in saved_names and name not in recomputable)
            edge["capacity"] = (0 if free else sizes[name]) * scale + (scale - pos)
    try:
        _, (reachable, _) = nx.minimum_cut(g, _SOURCE, _SINK, flow_func=boykov_kolmogorov)
    except nx.NetworkXUnbounded:  # a value the backward reads can be neither saved nor recomputed
        return None
    save = {name for name in order if (name, "in") in reachable and (name, "out") not in reachable}
    return save, recomputable


def _recomputation(
    recomputed: set[str], available: set[str], producers: dict[str, BoundSymbol]
) -> list[BoundSymbol] | None:
    """The ops that compute ``recomputed`` from ``available``, each once, inputs first."""
    steps: list[BoundSymbol] = []
    done = set(available)
    seen: set[int] = set()

    def visit(name: str) -> bool:
        if name in done:
            return True
        b = producers.get(name)
        if b is None:
            return False
        if id(b) in seen:
            return True
        seen.add(id(b))
        if not all(visit(a.name) for a in b.flat_proxy_args):
            return False
        steps.append(b)
        done.update(o.name for o in b.flat_proxy_outs)
        return True

    return steps if all(visit(n) for n in sorted(recomputed)) else None


def _forward_saving(forward: TraceCtx, saved: list) -> TraceCtx:
    """The forward returning ``saved`` for the backward (what only fed the old saved values goes)."""
    ret = forward.bound_symbols[-1]
    outputs, _ = ret.args[0]
    new = from_trace(forward)
    body = [*forward.bound_symbols[:-1], prims.python_return.bind((outputs, tuple(saved)), output=None)]
    body[-1].source = ret.source
    new.bound_symbols.extend(live_bound_symbols(body))
    return new


def _backward_recomputing(backward: TraceCtx, saved: Sequence, new_saved: list, steps: list[BoundSymbol]) -> TraceCtx:
    """The backward taking ``new_saved``, with each recomputing op right before its first reader."""
    new = from_trace(backward)
    new.args = [*new_saved, *backward.args[len(saved) :]]
    made_by = {o.name: b for b in steps for o in b.flat_proxy_outs}
    for b in steps:
        new.names.update(o.name for o in b.flat_proxy_outs)
    placed: set[int] = set()

    def place(b: BoundSymbol) -> None:
        if id(b) in placed:
            return
        placed.add(id(b))
        for a in b.flat_proxy_args:
            if a.name in made_by:
                place(made_by[a.name])
        new.bound_symbols.append(b)

    for bsym in backward.bound_symbols:
        for a in bsym.flat_proxy_args:
            if a.name in made_by:
                place(made_by[a.name])
        new.bound_symbols.append(bsym)
    return new


class _Cheapness:
    """Whether an op is cheap to recompute: elementwise, shape and reduction prims, or made only of
    them; never random, in place or with side effects; on CPU, no math-library function (memoized
    per bound symbol)."""

    def __init__(self):
        self._memo: dict[tuple[int, bool], bool] = {}

    def __call__(self, bsym: BoundSymbol) -> bool:
        on_cpu = any(o.device.type == "cpu" for o in bsym.flat_proxy_outs if isinstance(o, TensorProxy))
        return self._cheap(bsym, on_cpu)

    def _cheap(self, bsym: BoundSymbol, on_cpu: bool) -> bool:
        key = (id(bsym), on_cpu)
        found = self._memo.get(key)
        if found is None:
            found = self._memo[key] = self._decide(bsym, on_cpu)
        return found

    def _decide(self, bsym: BoundSymbol, on_cpu: bool) -> bool:
        sym = bsym.sym
        if sym.tags & _IMPURE or sym.executor is not None:
            return False
        if not bsym.subsymbols:
            ident = getattr(sym, "id", None)
            if ident in _MATH_LIBRARY:
                return not on_cpu
            return (
                isinstance(ident, (ElementwisePrimIDs, ShapePrimIDs))
                or ident in _CHEAP_REDUCTIONS
                or ident in _CHEAP_FACTORIES
            )
        return all(self._cheap(s, on_cpu) for s in bsym.subsymbols)


def _written(bsyms: Sequence[BoundSymbol]) -> set[str]:
    """The names of the tensors the ops write in place: ``copy_``'s destination, every tensor
    argument of another in-place op that has no parts."""
    names: set[str] = set()
    for b in bsyms:
        if b.subsymbols:
            names |= _written(b.subsymbols)
        elif b.sym is prims.copy_:
            names.add(b.args[1].name)
        elif IN_PLACE in b.sym.tags:
            names.update(a.name for a in b.flat_proxy_args if isinstance(a, TensorProxy))
    return names


def _reading_written(claimed: Sequence[tuple[Executor, BoundSymbol]], written: set[str]) -> set[str]:
    """``written`` and every value computed from one of them (views included), in claim order."""
    tainted = set(written)
    if written:
        for _, b in claimed:
            if any(a.name in tainted for a in b.flat_proxy_args):
                tainted.update(o.name for o in b.flat_proxy_outs)
    return tainted


def _backward_readers(backward: TraceCtx, executors: Sequence[Executor]) -> dict[str, set[int]]:
    """Per value the backward reads, the executors (by id) of the claimed ops that read it."""
    readers: dict[str, set[int]] = {}
    for ex, b in claim_bound_symbols(backward.bound_symbols, executors, names=set(backward.names)):
        for a in b.flat_proxy_args:
            readers.setdefault(a.name, set()).add(id(ex))
    return readers


def _bytes(p: TensorProxy) -> int | None:
    if not all(type(d) is int for d in p.shape):
        return None
    return math.prod(p.shape) * p.dtype.itemsize


def _proxies(trace: TraceCtx):
    yield from (a for a in trace.args if isinstance(a, Proxy))
    for b in trace.bound_symbols:
        yield from _all_outs(b)


def _all_outs(bsym: BoundSymbol):
    yield from bsym.flat_proxy_outs
    for s in bsym.subsymbols:
        yield from _all_outs(s)
