"""Absent cotangents: the backward takes None for the outputs that get no gradient.

Note [Absent cotangents]
torch's engine calls the backward of a program's one autograd function when any of its outputs
gets a gradient (Note [Gradients that reach nothing] in thunder.executors.torch_autograd); the
outputs a loss does not use (a model's logits next to its loss, its key/value cache) get none.
Eager adds up only the gradients that exist. The backward trace adds an output's cotangent to the
other gradients of that value (``t = torch.add(g_logits, t1)``); this pass rewrites those adds so
that a None cotangent leaves the other term as it is (``t = t1 if g_logits is None else ...``).
A cotangent whose every use is such an add may then be None: nothing is allocated or added for it,
and the sum is eager's (no ``x + 0``, which turns -0.0 into 0.0). Other cotangents are still zeros
when absent (the autograd function makes them).

Layer: transforms. Imports: core.
"""

from __future__ import annotations

import enum

import torch

from thunder.core import prims
from thunder.core.prims.base import make_prim
from thunder.core.prims.python import python_return
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import TraceCtx, from_trace, timed_pass
from thunder.transforms.delete_last_used import python_del

__all__ = ["accept_absent_cotangents", "without_absent_cotangents"]


class AbsentCotangentPrimIDs(enum.Enum):
    ADD_UNLESS_ABSENT = enum.auto()


def _print_add_unless_absent(bsym, printer):
    cotangent, other = bsym.args
    (add,) = bsym.subsymbols
    return [f"{bsym.output.name} = {other.name} if {cotangent.name} is None else {printer.call(add)}"]


# ``add_unless_absent(cotangent, other)``: its one subsymbol (a torch.add of the two), or ``other`` when
# the cotangent is None.
add_unless_absent = make_prim(
    AbsentCotangentPrimIDs.ADD_UNLESS_ABSENT, "add_unless_absent", lambda cotangent, other: other,
    printer=_print_add_unless_absent,
)  # fmt: skip


def _other_term(bsym: BoundSymbol, cotangent: str, cotangents: set[str]) -> TensorProxy | None:
    """The other operand of ``torch.add(cotangent, other)`` (either order) when the sum is exactly that
    operand for a zero cotangent: same shape, dtype and device, no ``alpha``, and not a cotangent itself."""
    if bsym.sym.python_impl is not torch.add or bsym.kwargs or len(bsym.args) != 2:
        return None
    a, b = bsym.args
    if not (isinstance(a, TensorProxy) and isinstance(b, TensorProxy)):
        return None
    other = b if a.name == cotangent else a if b.name == cotangent else None
    out = bsym.output
    if other is None or other.name in cotangents or not isinstance(out, TensorProxy):
        return None
    if tuple(other.shape) != tuple(out.shape) or other.dtype != out.dtype or other.device != out.device:
        return None
    return other


@timed_pass("Absent cotangents")
def _rewrite(trace: TraceCtx, names: frozenset[str]) -> TraceCtx:
    new = from_trace(trace)
    for bsym in trace.bound_symbols:
        cotangent = next((a.name for a in bsym.flat_proxy_args if a.name in names), None)
        other = _other_term(bsym, cotangent, names) if cotangent is not None else None
        if other is not None:
            g = next(a for a in bsym.args if a.name == cotangent)
            bsym = add_unless_absent.bind(g, other, output=bsym.output, subsymbols=(bsym,), source=bsym.source)
        new.bound_symbols.append(bsym)
    return new


def accept_absent_cotangents(trace: TraceCtx, n_saved: int) -> tuple[TraceCtx, tuple[bool, ...]]:
    """The backward ``trace`` (parameters: ``n_saved`` saved values, then the cotangents) taking None
    for the cotangents whose every use is an add into another gradient, or that it does not use
    (Note [Absent cotangents]),
    and which of the cotangents may be None. The trace is returned as it is when none may."""
    cotangents = [a.name for a in trace.args[n_saved:]]
    uses: dict[str, list[BoundSymbol]] = {n: [] for n in cotangents}
    for bsym in trace.bound_symbols:
        if bsym.sym is python_del:
            continue
        for a in {a.name for a in bsym.flat_proxy_args}:
            if a in uses:
                uses[a].append(bsym)
    names = set(cotangents)
    ok = frozenset(n for n, used in uses.items() if all(_other_term(b, n, names) is not None for b in used))
    if not ok:
        return trace, (False,) * len(cotangents)
    return _rewrite(trace, ok), tuple(n in ok for n in cotangents)


# Note [Backward without the cotangents that are absent]
# An absent cotangent that is not only added into another gradient (an output computed further from a value the
# loss also reads: ``1 / (x * 0.0)`` beside ``x + 1``) was given to the backward as zeros, and zeros times an
# infinite derivative is NaN: eager's engine never runs the nodes that only outputs without a gradient reach, so
# its gradient there was finite. The backward made for a set of absent cotangents leaves out what only they feed,
# as the engine does: an op whose inputs that come from cotangents all come from absent ones; an add of such a
# value and another of the sum's shape and dtype is that other; a gradient only they feed is None. Where such a
# value meets one that present cotangents feed in another op (the concatenation that is a split's backward), it
# is zeros there, as the engine gives a node zeros for its outputs that got no gradient. Made from the backward
# before executors claim its ops, so that no fusion computes what was left out, when a backward first runs with
# that set absent (``AutogradPlan.variant``).
def without_absent_cotangents(trace: TraceCtx, n_saved: int, absent: frozenset[int]) -> TraceCtx | None:
    """The backward ``trace`` (before executors; parameters: ``n_saved`` saved values, then the cotangents) for
    the cotangents at positions ``absent`` None (Note [Backward without the cotangents that are absent]); None
    where a value it leaves out is needed as zeros of a symbolic shape."""
    left = {trace.args[n_saved + i].name for i in absent}  # values only absent cotangents feed
    fed = {a.name for a in trace.args[n_saved:] if isinstance(a, TensorProxy)}  # values cotangents feed
    new = from_trace(trace)
    swap: dict[str, TensorProxy] = {}
    zeros: set[str] = set()
    for bsym in trace.bound_symbols:
        if swap and any(a.name in swap for a in bsym.flat_proxy_args):
            bsym = bsym.rename(swap)
        if bsym.sym is python_return:
            new.bound_symbols.append(bsym.from_bsym(args=_none_where(bsym.args, left)))
            continue
        args = [a for a in bsym.flat_proxy_args if a.name in fed]
        if args:
            fed.update(o.name for o in bsym.flat_proxy_outs)
        out_of = [a for a in args if a.name in left]
        if not out_of:
            new.bound_symbols.append(bsym)
            continue
        if len(out_of) == len(args):
            left.update(o.name for o in bsym.flat_proxy_outs)
            continue
        other = _other_term(bsym, out_of[0].name, set()) if len(args) == 2 else None
        if other is not None:
            swap[bsym.output.name] = other
            continue
        for a in out_of:
            if a.name in zeros:
                continue
            if not all(type(d) is int for d in a.shape):
                return None
            zeros.add(a.name)
            new.bound_symbols.append(prims.full.bind(tuple(a.shape), 0, device=a.device, dtype=a.dtype, output=a))
        new.bound_symbols.append(bsym)
    return new


def _none_where(value, names: set[str]):
    """``value`` (a return's arguments) with the tensors named in ``names`` replaced by None."""
    from thunder.core.pytree import tree_map

    return tree_map(lambda x: None if isinstance(x, TensorProxy) and x.name in names else x, value)
