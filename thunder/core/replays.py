"""Replays: what the program did to the outside world, done again by every call.

``print``, logging and warnings, assignments to outside globals, cells and attributes, changes to outside
containers and the items taken from iterator arguments (Note [Iterator arguments]) are recorded during
tracing as bound symbols of the computation (Note [What a trace relied on] in ``thunder.core.jit_ext``); the
computation replays them in order with each call's values. Nothing in the computation reads what a replay did, so a replay can move later among the
ops as long as the replays keep their order.

Layer: tracing. Imports: core.
"""

from __future__ import annotations

from collections.abc import Callable

from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx

__all__ = ["OUTPUTS", "REPLAYS", "place_after_their_values", "becomes_in_place"]

REPLAYS = frozenset(
    {prims.python_print, prims.python_log, prims.python_warn, prims.store_attr, prims.store_global, prims.store_cell,
     prims.replace_contents, prims.container_call, prims.advance_iterator, prims.set_torch_state}
)  # fmt: skip

#: The replays that show values (output), not store them.
OUTPUTS = frozenset({prims.python_print, prims.python_log, prims.python_warn})

#: What moves after the values it refers to: the replays, and the program's tensor hooks, registered at any point
#: before the backward (Note [Tensor hooks in the program] in thunder.core.side_effects).
_MOVABLE = REPLAYS | {prims.register_hook}


def place_after_their_values(trace: TraceCtx) -> None:
    """Moves each replay that refers to values computed after it (``self.cache = outs`` where the
    program appends to ``outs`` later: the replay assigns what ``outs`` holds at the end) to just
    after the last of them; the replays between go with it, so all keep their order."""
    bsyms = trace.bound_symbols
    defined_at = _defined_at(bsyms)
    i = 0
    while i < len(bsyms):
        bsym = bsyms[i]
        if bsym.sym in _MOVABLE:
            last = max((defined_at.get(a.name, -1) for a in bsym.flat_proxy_args), default=-1)
            if last > i:
                block = [b for b in bsyms[i : last + 1] if b.sym in _MOVABLE]
                rest = [b for b in bsyms[i : last + 1] if b.sym not in _MOVABLE]
                bsyms[i : last + 1] = rest + block
                defined_at = _defined_at(bsyms)
                i += len(rest)
                continue
        i += 1


def _defined_at(bsyms: list) -> dict[str, int]:
    """Where each value is first computed. An in-place op's result that is its argument (``x.add_(1)`` on an input)
    computes no new value: a ``print(x)`` before it must stay there, to show ``x`` before the change."""
    defined_at = {}
    for i, bsym in enumerate(bsyms):
        args = {a.name for a in bsym.flat_proxy_args}
        for o in bsym.flat_proxy_outs:
            if o.name not in args:
                defined_at.setdefault(o.name, i)
    return defined_at


def becomes_in_place(trace: TraceCtx, a: TensorProxy, compute: Callable[[TensorProxy], TensorProxy]) -> TensorProxy:
    """The tensor object ``a`` becomes ``compute``'s result, in place (Note [In-place shape changes] in
    ``thunder.torch.shape``): what was recorded so far reads a proxy of the old value (same name, old metadata),
    but for stores, which keep the object; ``a`` takes the result's name and metadata, so the trace stays in
    SSA form and later ops depend on the change. Returns ``a``."""
    before = TensorProxy.like(a)
    before.name, before.never_requires_grad = a.name, a.never_requires_grad
    bsyms = trace.bound_symbols
    for i, b in enumerate(bsyms):
        if b.sym in REPLAYS and b.sym not in OUTPUTS:
            continue  # a store keeps the object (see the Note)
        if any(p is a for p in (*b.flat_proxy_args, *b.flat_proxy_outs)):
            bsyms[i] = b.rename({a.name: before})
    out = compute(before)
    a.name, a.shape, a.ndim = out.name, out.shape, out.ndim
    a.requires_grad, a.never_requires_grad = out.requires_grad, out.never_requires_grad
    bsyms[-1] = bsyms[-1].rename({out.name: a})
    return a
