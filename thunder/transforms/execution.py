"""Transform for execution: every bound symbol is given to the highest-priority executor that
can run it. Fusion executors get regions of consecutive symbols they claim; a symbol no
executor can run is replaced by its decomposition, recursively.

Lineage: a claimed symbol points back to the one it replaces; a decomposed symbol's parts
point to their parent; a fusion lists every symbol it absorbed.

Layer: transforms. Imports: core, extend.
"""

from __future__ import annotations

from collections.abc import Sequence

from thunder.core.errors import ThunderRuntimeError
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import TraceCtx, from_trace, timed_pass
from thunder.extend import Executor, FusionExecutor


def _claim(bsym: BoundSymbol, executors: Sequence[Executor], out: list[tuple[Executor, BoundSymbol]], parent=None):
    for ex in executors:
        if not ex.can_execute(bsym):
            continue
        if isinstance(ex, FusionExecutor):
            out.append((ex, bsym))
            return
        info = ex.lookup_implementation(bsym.sym)
        if info.execution_transform is not None:
            from thunder.core.trace import tracectx

            scratch = from_trace(TraceCtx(name="scratch"))
            scratch.names = set()
            with tracectx(scratch):
                result = info.execution_transform(*bsym.args, **bsym.kwargs)
            swap = _output_swap(result, bsym.output)
            for sub in scratch.bound_symbols:
                sub = sub.rename(swap) if swap else sub
                sub = sub.from_bsym(source=bsym.source, lineage=(bsym.uid,))
                _claim(sub, [e for e in executors if e is not ex] + [ex], out, bsym)
            return
        out.append((ex, bsym if info.symbol is bsym.sym else bsym.from_bsym(sym=info.symbol, subsymbols=bsym.subsymbols)))
        return
    if not bsym.subsymbols and _is_identity(bsym):
        return  # e.g. dropout in eval mode: the output is an input, nothing runs
    if not bsym.subsymbols:
        where = f" (called at {bsym.source})" if bsym.source else ""
        names = ", ".join(e.name for e in executors)
        raise ThunderRuntimeError(
            f"no executor can run {bsym.sym.print_name}{where}: none of [{names}] implements it. "
            "Add an executor that implements it, or register an implementation with "
            "OperatorExecutor.register_implementation."
        )
    for sub in bsym.subsymbols:
        _claim(sub.from_bsym(source=sub.source or bsym.source, lineage=(bsym.uid,)), executors, out, bsym)


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


@timed_pass("Transform for execution")
def transform_for_execution(trace: TraceCtx, executors: Sequence[Executor]) -> TraceCtx:
    """Claims every bound symbol for an executor, fusing regions for fusion executors."""
    claimed: list[tuple[Executor, BoundSymbol]] = []
    for bsym in trace.bound_symbols:
        _claim(bsym, executors, claimed)
    new = from_trace(trace)
    i = 0
    while i < len(claimed):
        ex, bsym = claimed[i]
        if not isinstance(ex, FusionExecutor):
            new.bound_symbols.append(bsym)
            i += 1
            continue
        j = i
        while j < len(claimed) and claimed[j][0] is ex:
            j += 1
        region = [b for _, b in claimed[i:j]]
        later = [b for _, b in claimed[j:]]
        new.bound_symbols.extend(ex.fuse(region, later, new, executors))
        i = j
    return new
