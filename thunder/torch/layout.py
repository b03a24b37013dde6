"""Layouts of traced tensors: the strides eager PyTorch gives an intermediate result.

See Note [Strides of traced tensors] in ``thunder.core.proxies``. An input proxy knows the real
strides of its tensor; an intermediate's layout follows torch's own rules (an elementwise op on a
transposed tensor is not contiguous in eager). This module answers ``stride()``,
``is_contiguous()`` and ``storage_offset()`` for intermediates by replaying the top-level bound
symbols that produced the value, with the torch callables the torch executor runs, on
``device="meta"`` tensors laid out like the inputs: torch itself computes the layout, so it is
eager's. What cannot be replayed raises a ThunderRuntimeError that names the op: never a guess.

Replays are incremental per trace: each top-level bound symbol runs at most once, in program
order, and only when a queried value depends on it.

Layer: language. Imports: core, torch.base, torch.conversions.
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass, field

import torch

from thunder.core import loops, proxies
from thunder.core.errors import ThunderRuntimeError
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.symbol import IN_PLACE, BoundSymbol
from thunder.core.symbolic import SymFloat, SymInt, is_symbolic
from thunder.core.tracectx import get_tracectx, tracectx
from thunder.torch import conversions, data_dependent
from thunder.torch.base import symbol_to_torch

__all__: list[str] = []


@dataclass
class _Replay:
    """The meta tensors of one trace's values replayed so far."""

    metas: dict[str, torch.Tensor] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)  # name -> why its layout is not known
    unknown_offset: dict[str, str] = field(default_factory=dict)  # strides known, storage offset not
    done: set[int] = field(default_factory=set)  # uids of bound symbols already replayed


# A trace's replay lives on the trace itself (``trace._layout_replays``), so
# they go away with it and two threads tracing at once never share one.
_STATE_ATTR = "_layout_replays"

# Note [Ambiguous layouts]
# Meta tensors follow torch's layout rules except in degenerate cases: a tensor with a size-1 (or
# size-0) dim whose stride is not the contiguous one (``torch.randn(6, 1).t()``, strides (1, 1))
# gets ``(x + 1).stride() == (1, 1)`` on the CPU but ``(6, 1)`` on meta, because meta's
# ``empty_like`` does not copy such strides. So an op that reads such a tensor is replayed on real
# CPU tensors (zeros laid out as the meta ones: the meta layouts before it are eager's, by
# induction), and its results go back to meta with the layouts the CPU gave them. Only that op's
# operands are made, so it works on a real model's sizes (Longformer pads its sequence to 512 and
# reads a mask of shape (2, 1, 512, 1): replaying every op before it on the CPU was refused as too
# large); an op whose operands and results hold more than ``_CPU_REPLAY_LIMIT`` elements is
# reported as unknown rather than guessed.
_CPU_REPLAY_LIMIT = 1 << 24  # elements of one op's operands and results together


def contiguous_strides(shape) -> tuple[int, ...]:
    """The strides of a contiguous tensor of ``shape`` (eager's: a size-0 or size-1 dim steps as a size-1 one)."""
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _ambiguous(t: torch.Tensor) -> bool:
    """Whether ``t``'s layout is one where meta and real tensors may disagree (Note [Ambiguous layouts])."""
    return any(n <= 1 for n in t.shape) and t.stride() != contiguous_strides(t.shape)


def _extent(t: torch.Tensor) -> int:
    """Elements of the storage that ``t``'s size, strides and storage offset reach."""
    if not t.numel():
        return t.storage_offset()
    return t.storage_offset() + sum((n - 1) * st for n, st in zip(t.shape, t.stride())) + 1


def _laid_out_like(t: torch.Tensor, device: str) -> torch.Tensor:
    """A tensor on ``device`` (zeros on a real one) with ``t``'s size, strides, storage offset and dtype."""
    make = torch.empty if device == "meta" else torch.zeros
    return make(_extent(t), dtype=t.dtype, device=device).as_strided(t.shape, t.stride(), t.storage_offset())

# Device moves keep the layout of a dense tensor (``memory_format=torch.preserve_format``).
_LAYOUT_PRESERVING = frozenset({conversions.cpu.id, conversions.cuda.id})
# Ops whose result is contiguous whatever their input's layout (storage offset aside: eager's
# ``contiguous()`` returns ``self`` when it already is).
_CONTIGUOUS_RESULT = frozenset({conversions.contiguous.id})




# Note [Layouts of data-dependent results]
# An op whose result's size comes from the data (``nonzero``, ``masked_select``, ``bincount``, ``unique``) cannot run
# on meta tensors, but its result is a fresh tensor whose layout eager fixes from its shape alone: ``nonzero``'s
# ``(n, ndim)`` indices are stored column by column (strides ``(1, n)``, so ``nonzero(as_tuple=True)`` gives
# contiguous columns), the others are contiguous (``unique`` along a dim is not: its layout stays unknown). The shape
# may be symbolic: the layout follows its value, as any replay's does (Longformer's global attention reads the
# strides of hidden states indexed with ``nonzero``'s result for its ``as_strided`` chunking).
def _nonzero_layout(bsym: BoundSymbol, outs: list[TensorProxy]) -> list[torch.Tensor] | None:
    n, k = _sizes(outs[0])
    return [torch.empty_strided((n, k), (1, n), dtype=outs[0].dtype, device="meta")]


def _contiguous_layouts(bsym: BoundSymbol, outs: list[TensorProxy]) -> list[torch.Tensor] | None:
    return [_fresh(o) for o in outs]


def _unique_layouts(bsym: BoundSymbol, outs: list[TensorProxy]) -> list[torch.Tensor] | None:
    dim = bsym.kwargs.get("dim", bsym.args[5] if len(bsym.args) > 5 else None)
    return [_fresh(o) for o in outs] if dim is None else None


_DATA_DEPENDENT_LAYOUTS = {
    data_dependent.nonzero_of_size.id: _nonzero_layout,
    data_dependent.masked_select_of_size.id: _contiguous_layouts,
    data_dependent.bincount_of_size.id: _contiguous_layouts,
    data_dependent.unique_of_size.id: _unique_layouts,
}


def _where(bsym: BoundSymbol) -> str:
    return f" (at {bsym.source})" if bsym.source is not None else ""


def _unknown(p: TensorProxy, reason: str) -> ThunderRuntimeError:
    return ThunderRuntimeError(
        f"The strides of tensor {p.name} are not known while tracing: {reason}. "
        f"Call .contiguous() on it first to get a tensor with a known layout."
    )


_DEVICE_STRING = re.compile(r"(cpu|cuda|meta|mps|xpu|hpu)(:\d+)?")


def _concrete(x, device: str):
    """A value of a bound symbol's arguments, for replaying it on ``device``: symbolic numbers are
    concretised (the layout depends on them, so a constraint is recorded), devices become ``device``."""
    if isinstance(x, (SymInt, SymFloat)):
        return int(x) if isinstance(x, SymInt) else float(x)
    if isinstance(x, NumberProxy):
        return x.value
    if isinstance(x, torch.device) or (isinstance(x, str) and _DEVICE_STRING.fullmatch(x)):
        return torch.device(device)
    return x


def _ancestors(top: list[BoundSymbol], p: TensorProxy) -> tuple[list[int], dict[str, TensorProxy]]:
    """Indices of the top-level bound symbols ``p`` (as it is now) depends on, in order, and the
    values with no producer (inputs) by name. An in-place op outputs the tensor it reads, so an
    argument's producer is the last one *before* the reading bound symbol."""
    producers: dict[str, list[int]] = {}
    for i, bsym in enumerate(top):
        for out in bsym.flat_proxy_outs:
            producers.setdefault(out.name, []).append(i)
    needed: set[int] = set()
    roots: dict[str, TensorProxy] = {}
    stack, seen = [(p, len(top))], set()
    while stack:
        q, before = stack.pop()
        if (q.name, before) in seen:
            continue
        seen.add((q.name, before))
        k = bisect.bisect_left(producers.get(q.name, ()), before)
        if k == 0:
            roots[q.name] = q
            continue
        i = producers[q.name][k - 1]
        needed.add(i)
        stack.extend((a, i) for a in top[i].flat_proxy_args if isinstance(a, TensorProxy))
    return sorted(needed), roots


def _meta_of(state: _Replay, p: TensorProxy) -> torch.Tensor | None:
    if p.name in state.metas:
        return state.metas[p.name]
    if p.strides is not None:
        t = state.metas[p.name] = proxies.input_layout_tensor(p)
        return t
    return None


def _fresh(p: TensorProxy) -> torch.Tensor:
    """A contiguous meta tensor shaped like ``p``."""
    return torch.empty(_sizes(p), dtype=p.dtype, device="meta")


def _replay(state: _Replay, bsym: BoundSymbol) -> None:
    outs = [o for o in bsym.flat_proxy_outs if isinstance(o, TensorProxy)]
    if not outs:
        return
    ins = [a for a in bsym.flat_proxy_args if isinstance(a, TensorProxy)]
    missing = [a for a in ins if a.name in state.unknown or _meta_of(state, a) is None]
    sym = bsym.sym
    if sym.id in _CONTIGUOUS_RESULT and bsym.kwargs.get("memory_format", torch.contiguous_format) is torch.contiguous_format:
        if missing:
            for o in outs:
                state.metas[o.name] = _fresh(o)
                state.unknown_offset[o.name] = (
                    f"it is {sym.print_name}() of a tensor whose layout is not known, which may return that "
                    "tensor itself"
                )
            return
    rule = _DATA_DEPENDENT_LAYOUTS.get(sym.id)  # Note [Layouts of data-dependent results]
    metas = rule(bsym, outs) if rule is not None else None
    if metas is not None:
        state.metas.update((o.name, t) for o, t in zip(outs, metas))
        return
    if missing:
        a = missing[0]
        why = state.unknown.get(a.name) or f"its input {a.name} is not an input of the traced function"
        for o in outs:
            state.unknown[o.name] = why
        return
    if sym.id in _LAYOUT_PRESERVING:
        for o in outs:
            state.metas[o.name] = state.metas[ins[0].name]
        return
    impl = symbol_to_torch.get(sym) or (sym.python_impl if sym.is_prim or loops.is_loop(sym) else None)

    if not ins:
        # A factory: contiguous, unless it takes a device (and maybe strides) it can create on meta.
        if impl is not None and "device" in bsym.kwargs:
            try:
                if _bind_results(state, outs, _call(impl, bsym, "meta", lambda x: x, factory=True)):
                    return
            except Exception:
                pass
        for o in outs:
            state.metas[o.name] = _fresh(o)
        return
    if impl is None:
        for o in outs:
            state.unknown[o.name] = f"it is computed by {sym.print_name}{_where(bsym)}, which has no torch implementation"
        return
    operands = [state.metas[a.name] for a in ins]
    device = "cpu" if any(_ambiguous(t) for t in operands) else "meta"  # Note [Ambiguous layouts]
    if device == "cpu":
        size = sum(map(_extent, operands)) + sum(math.prod(_sizes(o)) for o in outs)
        if size > _CPU_REPLAY_LIMIT:
            a = next(a for a in ins if _ambiguous(state.metas[a.name]))
            t = state.metas[a.name]
            for o in outs:
                state.unknown[o.name] = (
                    f"it is computed by {sym.print_name}{_where(bsym)} from {a.name}, whose strides {t.stride()} for "
                    f"size-1 dims of shape {tuple(t.shape)} make torch's layout rules device-dependent, and the op's "
                    f"tensors ({size} elements) are too large to replay on the CPU"
                )
            return
    made = {a.name: (t if device == "meta" else _laid_out_like(t, "cpu")) for a, t in zip(ins, operands)}
    try:
        result = _call(impl, bsym, device, lambda x: made[x.name])
    except Exception as e:
        for o in outs:
            state.unknown[o.name] = (
                f"it is computed by {sym.print_name}{_where(bsym)}, which cannot run on {device} tensors "
                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
            )
        return
    if device == "cpu":
        result = tree_map(lambda x: _laid_out_like(x, "meta") if isinstance(x, torch.Tensor) else x, result)
    if _bind_results(state, outs, result):
        return
    in_names = {a.name for a in ins}
    for o in outs:
        if IN_PLACE in sym.tags and o.name in in_names:
            continue  # mutated in place (``__setitem__`` returns None): its tensor is the argument's
        state.unknown[o.name] = f"the results of {sym.print_name}{_where(bsym)} do not match its trace outputs"


def _call(impl, bsym: BoundSymbol, device: str, tensor, factory: bool = False):
    """``impl`` on ``bsym``'s arguments on ``device``: each tensor proxy given by ``tensor``, symbolic numbers
    concretised, devices replaced by ``device`` (a factory's ``device`` keyword too, even None)."""

    def arg(x):
        return tensor(x) if isinstance(x, TensorProxy) else _concrete(x, device)

    args, kwargs = tree_map(arg, bsym.args), tree_map(arg, bsym.kwargs)
    if factory:
        kwargs["device"] = torch.device(device)
    with torch.no_grad(), tracectx(None):  # an impl that calls symbols must not record into the trace
        return impl(*args, **kwargs)


def _bind_results(state: _Replay, outs: list[TensorProxy], result) -> bool:
    tensors = [r for r in tree_leaves(result) if isinstance(r, torch.Tensor)]
    if len(tensors) != len(outs) or any(tuple(t.shape) != tuple(map(pyval, o.shape)) for t, o in zip(tensors, outs)):
        return False
    for t, o in zip(tensors, outs):
        state.metas[o.name] = t
        state.unknown.pop(o.name, None)
        state.unknown_offset.pop(o.name, None)
    return True


def pyval(d):
    return d.value if is_symbolic(d) else d


def _sizes(p: TensorProxy) -> tuple[int, ...]:
    """``p``'s shape as ints; symbolic dims are concretised (a fresh layout depends on them)."""
    return tuple(int(d) for d in p.shape)


def _run(trace, top: list[BoundSymbol], needed: list[int]) -> _Replay:
    """Replays the ``needed`` top-level bound symbols not replayed yet."""
    state = trace.__dict__.get(_STATE_ATTR)
    if state is None:
        state = trace.__dict__[_STATE_ATTR] = _Replay()
    for i in needed:
        bsym = top[i]
        if bsym.uid not in state.done:
            state.done.add(bsym.uid)
            _replay(state, bsym)
    return state


def meta_layout_of(p: TensorProxy, need_offset: bool = False) -> torch.Tensor:
    """A meta tensor laid out as eager lays out the intermediate ``p`` (``proxies.layout_provider``)."""
    trace = get_tracectx()
    if trace is None:
        raise _unknown(p, "it is not part of a trace being built")
    top = trace.scopes[0]
    needed, roots = _ancestors(top, p)
    if p.name in roots:
        raise _unknown(
            p,
            "it is not an input of the traced function, nor a result of the ops recorded so far (a value inside "
            "the decomposition of an op)",
        )
    state = _run(trace, top, needed)
    if p.name in state.unknown:
        raise _unknown(p, state.unknown[p.name])
    if need_offset and p.name in state.unknown_offset:
        raise ThunderRuntimeError(
            f"The storage offset of tensor {p.name} is not known while tracing: {state.unknown_offset[p.name]}."
        )
    # The inputs whose tensors were made are marked ``strides_read`` (``proxies.input_layout_tensor``).
    return state.metas[p.name]


proxies.layout_provider = meta_layout_of
