"""The region finder and the fusion-symbol builder that every fusion executor shares.

``find_regions`` partitions the claimed bound symbols of a trace (in trace order, each with
the executor that claimed it) into an ordered list of ``Region``s: maximal groups of ops of
one fusion executor, merged across ops that executor cannot take where dataflow allows, and
single ops of operator executors. ``fusion_bound_symbol`` turns one region into the bound
symbol that runs it. See Note [Finding fusion regions].

Layer: extend. Imports: core.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from thunder.core.proxies import Proxy
from thunder.core.symbol import DONT_DCE, IN_PLACE, BoundSymbol, Symbol
from thunder.core.trace import TraceCtx

if TYPE_CHECKING:
    from thunder.extend import Executor

__all__ = ["Region", "find_regions", "fusion_bound_symbol", "is_barrier"]

# Note [Finding fusion regions]
# The claimed ops arrive in trace order. Each op is put into a *group*; groups run in index
# order, an op inside a group after the ops of that group that precede it in the trace.
#
# - An op of an operator executor starts a new group of its own (ops of operator executors
#   never move relative to each other).
# - An op of a fusion executor X may join the latest group of X when that group is not
#   earlier than `earliest`, the largest group index among the producers of the op's inputs
#   and the last barrier; otherwise it starts a new group of X. Joining moves the op earlier,
#   past the groups in between: it reads nothing they write (its producers are in groups up to
#   `earliest`), and, traces being in SSA form, it writes nothing they read (they precede it).
# - A barrier (an op tagged IN_PLACE or DONT_DCE, or containing one, or an op that redefines a
#   name) is never moved and nothing is moved across it: it joins only a group that is the last
#   one (the order stays as it was), and every later op is placed in a later group.
#
# Every op lands in a group at least as late as the groups of its producers, so the
# concatenated groups are a topological order of the trace, and no group depends on a later
# one (a fusion runs all at once). One pass over the ops and their proxies: linear time.
#
# Region inputs are the values a group reads that another group (or the trace's signature)
# produces; outputs are the values it produces that another group reads or that are returned.
# Both come from one producer table and one pass over the reads; nothing is re-scanned per
# region.


def is_barrier(bsym: BoundSymbol, _memo: dict | None = None) -> bool:
    """Whether ``bsym`` mutates state or has side effects (IN_PLACE or DONT_DCE, at any depth)."""
    if bsym.sym.tags & _BARRIER_TAGS:
        return True
    if not bsym.subsymbols:
        return False
    if _memo is not None:
        found = _memo.get(bsym)
        if found is None:
            found = _memo[bsym] = any(is_barrier(s, _memo) for s in bsym.subsymbols)
        return found
    return any(is_barrier(s) for s in bsym.subsymbols)


_BARRIER_TAGS = frozenset({IN_PLACE, DONT_DCE})


@dataclass(eq=False)
class Region:
    """Consecutive ops (after reordering) that one executor runs.

    ``inputs``: values the region reads that are produced before it or outside the trace, in
    order of first use. ``outputs``: values it produces that are used after it or returned, in
    order of definition. For a fusion executor's region, the ops are the bound symbols as
    claimed (their own symbols, not yet executable); an operator executor's region is one op.
    """

    executor: Executor
    bound_symbols: list[BoundSymbol] = field(default_factory=list)
    inputs: list[Proxy] = field(default_factory=list)
    outputs: list[Proxy] = field(default_factory=list)

    @property
    def is_fusion(self) -> bool:
        from thunder.extend import FusionExecutor

        return isinstance(self.executor, FusionExecutor)

    @property
    def lineage(self) -> tuple[int, ...]:
        """The uids of the previous trace's bound symbols the region's ops were made from."""
        seen: dict[int, None] = {}
        for b in self.bound_symbols:
            for uid in b.lineage or (b.uid,):
                seen.setdefault(uid, None)
        return tuple(seen)

    def __repr__(self) -> str:
        ops = ", ".join(b.sym.name for b in self.bound_symbols)
        ins = ", ".join(p.name for p in self.inputs)
        outs = ", ".join(p.name for p in self.outputs)
        return f"Region({self.executor.name}: [{ops}] ({ins}) -> ({outs}))"


def find_regions(
    claimed: Sequence[tuple[Executor, BoundSymbol]], *, returned: Iterable[Proxy | str] = ()
) -> list[Region]:
    """Partitions ``claimed`` (trace order) into regions, in an order that respects dataflow.

    Ops of one fusion executor are merged into one region across ops it does not take when
    dependencies allow (see Note [Finding fusion regions]); each op of an operator executor is
    a region of its own. ``returned`` names values that are outputs of the whole computation
    (a ``python_return`` among the ops counts as a reader already). Linear in the number of
    ops and proxies.
    """
    from thunder.extend import FusionExecutor

    groups: list[Region] = []
    producer: dict[str, int] = {}  # value name -> group index of the op that produced it
    last_group_of: dict[int, int] = {}  # id(fusion executor) -> its latest group index
    barrier = -1  # no later op may be placed in a group before this one
    barrier_memo: dict = {}
    reads: list[tuple[int, list[Proxy]]] = []  # (group, proxies read) per op

    fusion_executors: dict[int, bool] = {}  # id(executor) -> whether it is a fusion executor
    for ex, bsym in claimed:
        args = bsym.flat_proxy_args
        outs = bsym.flat_proxy_outs
        if args and outs:
            arg_names = {a.name for a in args}
            produced = [o for o in outs if o.name not in arg_names]
        else:
            produced = outs
        is_fusion = fusion_executors.get(id(ex))
        if is_fusion is None:
            is_fusion = fusion_executors[id(ex)] = isinstance(ex, FusionExecutor)
        fence = is_barrier(bsym, barrier_memo)
        if not fence:
            for o in produced:
                if o.name in producer:
                    fence = True
                    break

        earliest = barrier
        for a in args:
            g = producer.get(a.name, -1)
            if g > earliest:
                earliest = g
        target = last_group_of.get(id(ex), -1) if is_fusion else -1
        if target < 0 or target < earliest or (fence and target != len(groups) - 1):
            target = len(groups)
            groups.append(Region(ex))
            if is_fusion:
                last_group_of[id(ex)] = target
        groups[target].bound_symbols.append(bsym)
        if fence:
            barrier = target
        for o in produced:
            producer[o.name] = target
        reads.append((target, args))

    # Inputs and outputs: one pass over the reads with the producer table.
    escaping: set[str] = {r if isinstance(r, str) else r.name for r in returned}
    seen_inputs: list[set[str]] = [set() for _ in groups]
    for g, args in reads:
        for a in args:
            src = producer.get(a.name, -1)
            if src == g:
                continue
            if src >= 0:
                escaping.add(a.name)
            if a.name not in seen_inputs[g]:
                seen_inputs[g].add(a.name)
                groups[g].inputs.append(a)
    for g, region in enumerate(groups):
        seen: set[str] = set()
        for bsym in region.bound_symbols:
            for o in bsym.flat_proxy_outs:
                if o.name in escaping and producer.get(o.name) == g and o.name not in seen:
                    seen.add(o.name)
                    region.outputs.append(o)
    return groups


def fusion_bound_symbol(
    region: Region,
    trace: TraceCtx,
    *,
    prefix: str,
    fn: Callable | None = None,
    factory: Callable[[TraceCtx], Callable] | None = None,
    bound_symbols: Sequence[BoundSymbol] | None = None,
) -> BoundSymbol:
    """The bound symbol that runs ``region`` as one call (a fusion).

    Args:
        region: the region it replaces (its executor owns the new symbol).
        trace: the trace being built; it reserves the fusion's name (``<prefix>0``, ...).
        prefix: the fusion's name without its number, e.g. ``"TorchCompile"``.
        fn: the callable that runs the region: ``fn(*region.inputs) -> tuple(region.outputs)``.
        factory: instead of ``fn``, builds it from the region's trace (a ``TraceCtx`` whose
            signature is the inputs, whose ops are ``bound_symbols`` and which returns the
            outputs), e.g. to compile the region.
        bound_symbols: the ops the fusion runs (default: the region's); they are its
            ``subsymbols``, printed as comments below the fusion.

    Returns:
        A bound symbol whose ``lineage`` lists every previous-trace symbol the region absorbed
        and whose source location is its first op's.
    """
    from thunder.core.prims import python_return

    if (fn is None) == (factory is None):
        raise ValueError("fusion_bound_symbol: pass exactly one of fn= or factory=")
    ops = tuple(region.bound_symbols if bound_symbols is None else bound_symbols)
    name = trace.make_name(prefix)
    outputs = tuple(region.outputs)
    if fn is None:
        region_trace = TraceCtx(name=f"{name}_region")
        region_trace.args = list(region.inputs)
        region_trace.names = set(trace.names)
        region_trace.bound_symbols.extend(ops)
        region_trace.bound_symbols.append(python_return.bind(outputs, output=None))
        fn = factory(region_trace)
    ex = region.executor
    sym = Symbol(name=name, meta=None, id=f"{ex.name}.{name}", python_impl=fn, executor=ex, _is_fusion=True)
    source = next((b.source for b in region.bound_symbols if b.source is not None), None)
    return BoundSymbol(sym, tuple(region.inputs), {}, outputs, ops, source=source, lineage=region.lineage)
