"""Delete-last-used: frees each intermediate right after its last use.

Layer: transforms. Imports: core.
"""

from __future__ import annotations

import enum

from thunder.core.prims.base import make_prim
from thunder.core.prims.python import python_return
from thunder.core.symbol import DONT_DCE
from thunder.core.trace import TraceCtx, from_trace, timed_pass


class DeletePrimIDs(enum.Enum):
    DEL = enum.auto()


def _print_del(bsym, printer):
    return ["del " + ", ".join(p.name for p in bsym.args)]


python_del = make_prim(DeletePrimIDs.DEL, "python_del", lambda *proxies: None, tags=(DONT_DCE,), printer=_print_del)


@timed_pass("Delete Last Used")
def delete_last_used(trace: TraceCtx) -> TraceCtx:
    """Inserts ``del`` statements after the last use of each value that is not returned."""
    new = from_trace(trace)
    bsyms = trace.bound_symbols
    # Parameters are held by the caller too: deleting them frees nothing.
    seen: set[str] = {getattr(a, "name", None) for a in trace.args}
    to_delete: list[list] = [[] for _ in bsyms]
    # Walk backwards: the first time a name is seen is its last use.
    for i in range(len(bsyms) - 1, -1, -1):
        bsym = bsyms[i]
        if bsym.sym is python_return:
            seen.update(p.name for p in bsym.flat_proxy_args)
            continue
        for p in bsym.flat_proxy_args + bsym.flat_proxy_outs:
            if p.name not in seen:
                seen.add(p.name)
                to_delete[i].append(p)
    for bsym, dels in zip(bsyms, to_delete):
        new.bound_symbols.append(bsym)
        if dels:
            unique = list({p.name: p for p in dels}.values())
            new.bound_symbols.append(python_del.bind(*unique, output=None))
    return new
