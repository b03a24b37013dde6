"""Transform for execution: every bound symbol is given to an executor, at the deepest level of
its decomposition that a higher-priority executor accepts (Note [Claiming at the deepest
level]); fusion executors then get regions from the shared region finder
(``thunder.extend.regions``) and replace each by what their ``fuse`` returns.

Lineage: a claimed symbol points back to the one it replaces; the parts of a decomposed (or
execution-transformed) symbol point to the symbol of the input trace they were part of; a
fusion lists every input-trace symbol it absorbed.

Layer: transforms. Imports: core, extend.
"""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core.errors import ThunderRuntimeError
from thunder.core.symbol import IN_PLACE, BoundSymbol, SourceLocation
from thunder.core.trace import TraceCtx, from_trace, timed_pass, tracectx
from thunder.extend import Executor, FusionExecutor, find_regions

__all__ = ["transform_for_execution", "claim_bound_symbols"]

# Note [Claiming at the deepest level]
# Executors are ordered by priority, 0 the highest. For a bound symbol b let
#   whole(b) = the first executor that accepts b as it is (``can_execute``), and
#   deep(b)  = the first executor that accepts some bound symbol strictly inside b
#              (its subsymbols, recursively): min over the subsymbols s of whole(s), deep(s).
# Walking the trace top-down, b is taken whole by whole(b) unless deep(b) comes before it (or
# nobody takes b whole): then b is replaced by its subsymbols, each claimed the same way. So
# with [X, torch], where the fusion executor X accepts only prims, ``ltorch.gelu`` (torch takes
# it whole, X accepts its prims) is decomposed and X gets the prims; with [torch] alone it
# stays whole. Both answers are memoized per bound symbol (subsymbols are shared objects),
# so the pass visits each node of the decomposition forest once per executor: linear in the
# size of the trace with its decompositions.
#
# A fusion executor may decline the parts of a symbol it cannot take whole (``declines_parts_of``): Inductor's
# executor cannot take ops of a symbolic size, and taking the few parts of an indexing op whose shapes are
# static would leave the rest to run as a dozen small torch ops instead of torch's one call.
#
# Special cases kept from before: an operator executor's ``execution_transform`` runs the
# symbol as other ops, which are claimed with that executor moved last (so it cannot take its
# own output forever); a symbol nobody runs whose outputs are all inputs (dropout in eval mode)
# computes nothing and is dropped.

# Note [In-place ops stay whole]
# An in-place op decomposes into the op that computes the new value and ``copy_`` into the
# operand. Where torch's autograd records the trace (the updates thunder's split cannot
# differentiate), that is not the same program: the out-of-place op saves its input for its
# backward, and the ``copy_`` then overwrites it ("one of the variables needed for gradient
# computation has been modified by an inplace operation"), where eager's in-place kernel saves
# what its backward needs. So where an operand requires grad, an executor that takes the in-place
# op whole runs it whole, even when a fusion executor of higher priority would take the
# out-of-place part (``elu_`` under torchcompile); the regions stop at it either way, at its
# ``copy_``. Where the written tensor does not require grad (inference, batch_norm's running
# statistics) nothing of it is recorded, and the out-of-place part may fuse (``torchcompile``; the default
# ``torchcompile_background`` declines the parts of an in-place op, ``declines_parts_of``: while its regions run
# torch's kernels the split op is two kernels where torch runs one).

_NONE = 1 << 30  # "no executor": larger than any executor index


class _Claimer:
    """Claims bound symbols for one priority list of executors (memoized, see the Note)."""

    def __init__(self, executors: Sequence[Executor], names: set[str] | None = None):
        self.executors = tuple(executors)
        self.names = set() if names is None else names  # the output trace's names (new values reserve theirs)
        self._whole: dict[BoundSymbol, int] = {}
        self._deep: dict[BoundSymbol, int] = {}
        self._reordered: dict[int, _Claimer] = {}
        self.checks = 0  # executor acceptance checks made (for the linearity test)

    def whole(self, bsym: BoundSymbol) -> int:
        found = self._whole.get(bsym)
        if found is None:
            found = _NONE
            for i, ex in enumerate(self.executors):
                self.checks += 1
                if ex.can_execute(bsym):
                    found = i
                    break
            self._whole[bsym] = found
        return found

    def deep(self, bsym: BoundSymbol) -> int:
        found = self._deep.get(bsym)
        if found is None:
            found = _NONE
            for s in bsym.subsymbols:
                found = min(found, self.whole(s), self.deep(s))
                if found == 0:
                    break
            self._deep[bsym] = found
        return found

    def _decomposes(self, bsym: BoundSymbol, w: int) -> bool:
        """Whether an executor before ``w``, the one taking ``bsym`` whole, takes some of its parts, and wants them."""
        d = self.deep(bsym)
        if d >= w:
            return False
        ex = self.executors[d]
        return not (isinstance(ex, FusionExecutor) and ex.declines_parts_of(bsym))

    def claim(
        self,
        bsym: BoundSymbol,
        out: list[tuple[Executor, BoundSymbol]],
        *,
        lineage: tuple[int, ...] | None = None,
        source: SourceLocation | None = None,
    ) -> None:
        """Appends (executor, executable bound symbol) for ``bsym`` to ``out``.

        ``lineage`` and ``source`` are those of a part of a decomposition (None for a symbol of
        the input trace: it keeps its own source and its lineage is itself).
        """
        top = lineage is None
        lineage = (bsym.uid,) if top else lineage
        source = bsym.source if top else (bsym.source or source)
        w = self.whole(bsym)
        # An executor's own operator computes its ``fn``: its subsymbols are its meta's (``like=``) ops,
        # which need not compute the same (only the same shapes), so they never stand in for it.
        opaque = bsym.sym.executor is not None
        # An in-place op that an executor takes whole stays whole (Note [In-place ops stay whole]).
        parts = bsym.subsymbols if not opaque else ()
        if parts and (w == _NONE or (w > 0 and self._decomposes(bsym, w) and not _updates_what_requires_grad(bsym))):
            for sub in parts:
                self.claim(sub, out, lineage=lineage, source=source)
            return
        if w == _NONE:
            if _is_identity(bsym):
                return  # e.g. dropout in eval mode: the output is an input, nothing runs
            where = f" (called at {source})" if source else ""
            names = ", ".join(e.name for e in self.executors)
            if bsym.sym.executor is not None:
                raise ThunderRuntimeError(
                    f"{bsym.sym.print_name}{where} is an operator of the executor {bsym.sym.executor.name!r}, which "
                    f"this function is not jitted with (executors: [{names}]): add it to executors="
                )
            raise ThunderRuntimeError(
                f"no executor can run {bsym.sym.print_name}{where}: none of [{names}] implements it. "
                "Add an executor that implements it, or register an implementation with "
                "OperatorExecutor.register_implementation."
            )
        ex = self.executors[w]
        if isinstance(ex, FusionExecutor):
            # Kept with its own symbol: the executor's ``fuse`` decides how the region runs.
            out.append((ex, bsym.from_bsym(source=source, lineage=lineage)))
            return
        info = ex.lookup_implementation(bsym.sym)
        if info.execution_transform is not None:
            self._execution_transform(ex, info.execution_transform, bsym, out, lineage, source)
            return
        sym = info.symbol if info.symbol is not None else bsym.sym
        if top and sym is bsym.sym:
            out.append((ex, bsym))  # unchanged: the same bound symbol
        else:
            out.append((ex, bsym.from_bsym(sym=sym, source=source, lineage=lineage)))

    def _execution_transform(self, ex, transform, bsym, out, lineage, source) -> None:
        scratch = from_trace(TraceCtx(name="scratch"))
        scratch.names = self.names  # the new ops' values get names free in the output trace
        with tracectx(scratch):
            result = transform(*bsym.args, **bsym.kwargs)
        swap = _output_swap(result, bsym.output)
        others = self._reordered.get(id(ex))
        if others is None:
            others = self._reordered[id(ex)] = _Claimer([e for e in self.executors if e is not ex] + [ex], self.names)
        for sub in scratch.bound_symbols:
            sub = sub.rename(swap) if swap else sub
            others.claim(sub, out, lineage=lineage, source=source)
        self.checks += others.checks
        others.checks = 0


def _updates_what_requires_grad(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` is an in-place op whose write (its innermost in-place op, e.g. ``prims.copy_``)
    is to a tensor that requires grad: ``elu_``'s operand, not batch_norm's running statistics."""

    def writes(b: BoundSymbol) -> bool:
        if not b.subsymbols:
            return IN_PLACE in b.sym.tags and any(getattr(a, "requires_grad", False) for a in b.flat_proxy_args)
        return any(writes(s) for s in b.subsymbols)

    return IN_PLACE in bsym.sym.tags and writes(bsym)


def _is_identity(bsym: BoundSymbol) -> bool:
    """Whether every output of ``bsym`` is one of its inputs (a decomposition that computes nothing)."""
    inputs = {p.name for p in bsym.flat_proxy_args}
    outs = bsym.flat_proxy_outs
    return bool(outs) and all(o.name in inputs for o in outs)


def _output_swap(result, original) -> dict:
    from thunder.core.proxies import Proxy
    from thunder.core.pytree import tree_leaves

    swap = {}
    for r, o in zip(tree_leaves(result), tree_leaves(original)):
        if isinstance(r, Proxy) and isinstance(o, Proxy) and r.name != o.name:
            swap[r.name] = o
    return swap


def claim_bound_symbols(
    bsyms: Sequence[BoundSymbol],
    executors: Sequence[Executor],
    *,
    names: set[str] | None = None,
    parts: bool = False,
    stats: dict | None = None,
) -> list[tuple[Executor, BoundSymbol]]:
    """Each bound symbol (or the parts of its decomposition) with the executor that claimed it,
    in trace order (Note [Claiming at the deepest level]).

    Args:
        names: the names used in the output trace (values new ops make reserve theirs here).
        parts: ``bsyms`` were made by an earlier claim (their lineage and source are kept).
        stats: if given, receives the number of acceptance checks made under ``"checks"``.
    """
    claimer = _Claimer(executors, names)
    claimed: list[tuple[Executor, BoundSymbol]] = []
    for bsym in bsyms:
        if parts:
            claimer.claim(bsym, claimed, lineage=bsym.lineage or (bsym.uid,), source=bsym.source)
        else:
            claimer.claim(bsym, claimed)
    if stats is not None:
        stats["checks"] = stats.get("checks", 0) + claimer.checks
    return claimed


@timed_pass("Transform for execution")
def transform_for_execution(trace: TraceCtx, executors: Sequence[Executor]) -> TraceCtx:
    """Claims every bound symbol for an executor; fusion executors replace their regions."""
    new = from_trace(trace)
    claimer = _Claimer(executors, new.names)
    claimed: list[tuple[Executor, BoundSymbol]] = []
    starts: list[int] = []  # where the claimed ops of each input-trace symbol begin
    for bsym in trace.bound_symbols:
        starts.append(len(claimed))
        claimer.claim(bsym, claimed)
    if not any(isinstance(ex, FusionExecutor) for ex, _ in claimed):  # (a prologue: its checks claimed one by one)
        new.bound_symbols.extend(b for _, b in claimed)
        return new
    starts.append(len(claimed))
    top_of: dict[int, int] = {}  # id of a claimed op -> index of the input-trace symbol it is (part of)
    for i in range(len(starts) - 1):
        top_of.update((id(b), i) for _, b in claimed[starts[i] : starts[i + 1]])
    operators = [e for e in executors if not isinstance(e, FusionExecutor)]
    out: list[tuple[BoundSymbol, int | None]] = []  # each op, with its input-trace symbol (None: a fusion)
    fused: set[int] = set()  # input-trace symbols with a part in a fusion
    for region in find_regions(claimed):
        if not region.is_fusion:
            out.extend((b, top_of[id(b)]) for b in region.bound_symbols)
            continue
        fusion = region.executor.fuse(region, new)
        if fusion is None:  # declined: the operator executors run its ops
            for b in region.bound_symbols:
                declined = claim_bound_symbols([b], operators, names=new.names, parts=True)
                out.extend((d, top_of[id(b)]) for _, d in declined)
            continue
        fused.update(top_of[id(b)] for b in region.bound_symbols)
        out.extend((f, None) for f in fusion)
    new.bound_symbols.extend(_unfused_parts_whole(out, claimed, top_of, fused, trace.bound_symbols, operators, new.names))
    return new


# Note [Unfused parts run whole]
# A fusion executor that accepts some parts of an op it cannot take whole (the out-of-place part of an in-place op:
# ``add_`` is ``add`` and ``copy_``) gets the op decomposed for it (Note [Claiming at the deepest level]). Where none
# of those parts ends up in a fusion (a region of one op is declined), the decomposition gained nothing and costs
# kernels: the op runs whole on the operator executors, as without the fusion executor (a ResNet's residual
# ``hidden += residual`` ran as an ``add`` and a ``copy_``). Only where the op's parts are consecutive in the new
# trace, so the whole op takes their place without moving anything across it.


def _unfused_parts_whole(
    out: list[tuple[BoundSymbol, int | None]],
    claimed: list[tuple[Executor, BoundSymbol]],
    top_of: dict[int, int],
    fused: set[int],
    tops: list[BoundSymbol],
    operators: list[Executor],
    names: set[str],
) -> list[BoundSymbol]:
    """``out``'s ops, each run of consecutive parts of one input-trace symbol that a fusion executor had parts of and
    that has none in a fusion replaced by the symbol as the operator executors claim it (Note [Unfused parts run
    whole])."""
    parts: dict[int, int] = {}
    split: set[int] = set()  # decomposed input-trace symbols with a part a fusion executor claimed
    for ex, b in claimed:
        t = top_of[id(b)]
        parts[t] = parts.get(t, 0) + 1
        if isinstance(ex, FusionExecutor):
            split.add(t)
    whole = {t for t in split - fused if parts[t] > 1}
    first: dict[int, int] = {}
    count: dict[int, int] = {}
    for i, (_, t) in enumerate(out):
        if t in whole:
            first.setdefault(t, i)
            count[t] = count.get(t, 0) + 1
    # Where the parts are consecutive, the whole op takes their place without moving anything across it.
    runs = {t for t in first if all(out[k][1] == t for k in range(first[t], first[t] + count[t]))}
    result: list[BoundSymbol] = []
    for i, (b, t) in enumerate(out):
        if t not in runs:
            result.append(b)
        elif i == first[t]:
            result.extend(d for _, d in claim_bound_symbols([tops[t]], operators, names=names))
    return result
