"""Removes ops that return their input unchanged from backward traces.

Gradient rules are written for the general case, so a backward trace holds ops that do nothing for
the shapes at hand: the slice that takes a whole dim, the pad of zero width, the reshape or broadcast
to the shape a value has already, the cast to its own dtype. Each costs a call per backward. This pass
drops them, renaming their outputs to their inputs. Only backward traces: they are functional and no
program sees their intermediate tensors, so a value and its unchanged copy need not be two objects
(in a forward trace ``y = x.reshape(x.shape)`` is a new tensor the program may compare or mutate).

Layer: transforms. Imports: core.
"""

from __future__ import annotations

from thunder.core import prims
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.symbolic import all_static
from thunder.core.trace import TraceCtx, from_trace, timed_pass

__all__ = ["remove_identities"]


def _is_identity_prim(bsym: BoundSymbol) -> bool:
    """Whether the prim ``bsym`` returns its first argument unchanged."""
    sym, args = bsym.sym, bsym.args
    a = args[0] if args else None
    if not isinstance(a, TensorProxy) or not all_static(a.shape):
        return False
    shape = tuple(a.shape)
    if sym is prims.slice_prim:
        starts, ends = tuple(args[1]), tuple(args[2])
        strides = args[3] if len(args) > 3 else bsym.kwargs.get("strides")
        return (
            all_static(starts + ends) and all(s == 0 for s in starts) and ends == shape
            and (strides is None or all(type(s) is int and s == 1 for s in strides))
        )  # fmt: skip
    if sym is prims.pad:
        return all(tuple(c) == (0, 0, 0) for c in args[2])
    if sym is prims.broadcast_in_dim or sym is prims.reshape:
        return all_static(args[1]) and tuple(args[1]) == shape
    if sym is prims.transpose:
        return tuple(args[1]) == tuple(range(len(shape)))
    if sym is prims.squeeze:
        return not tuple(args[1])
    if sym is prims.convert_element_type:
        return args[1] == a.dtype
    return False


def _identity_of(bsym: BoundSymbol) -> TensorProxy | None:
    """The input that ``bsym`` returns unchanged: a prim of the kinds above, or a language symbol whose
    decomposition is a chain of them from its first argument to its output."""
    out = bsym.output
    if not isinstance(out, TensorProxy) or not bsym.args or not isinstance(bsym.args[0], TensorProxy):
        return None
    a = bsym.args[0]
    if tuple(out.shape) != tuple(a.shape) or out.dtype != a.dtype or not all_static(out.shape):
        return None
    if bsym.sym.is_prim:
        return a if _is_identity_prim(bsym) else None
    if not bsym.subsymbols:
        return None
    current = a.name
    for sub in bsym.subsymbols:
        if _identity_of(sub) is None or sub.args[0].name != current:
            return None
        current = sub.output.name
    return a if current == out.name else None


@timed_pass("Remove identities")
def remove_identities(trace: TraceCtx) -> TraceCtx:
    """``trace`` without the ops that return their input unchanged (for backward traces only)."""
    new = from_trace(trace)
    swap: dict[str, Proxy] = {}
    for bsym in trace.bound_symbols:
        if swap and any(a.name in swap for a in bsym.flat_proxy_args):
            bsym = bsym.rename(swap)
        source = _identity_of(bsym)
        if source is not None:
            swap[bsym.output.name] = source
            continue
        new.bound_symbols.append(bsym)
    return new
