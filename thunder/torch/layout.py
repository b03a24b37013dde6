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

from thunder.core import proxies
from thunder.core.errors import ThunderRuntimeError
from thunder.core.proxies import NumberProxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.symbol import IN_PLACE, BoundSymbol
from thunder.core.symbolic import SymFloat, SymInt, is_symbolic
from thunder.core.tracectx import get_tracectx, tracectx
from thunder.torch import conversions
from thunder.torch.base import symbol_to_torch

__all__: list[str] = []


@dataclass
class _Replay:
    """The tensors (on ``device``) of one trace's values replayed so far."""

    device: str = "meta"
    metas: dict[str, torch.Tensor] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)  # name -> why its layout is not known
    unknown_offset: dict[str, str] = field(default_factory=dict)  # strides known, storage offset not
    done: set[int] = field(default_factory=set)  # uids of bound symbols already replayed


# A trace's replays live on the trace itself (``trace._layout_replays``: device -> _Replay), so
# they go away with it and two threads tracing at once never share one.
_STATE_ATTR = "_layout_replays"

# Note [Ambiguous layouts]
# Meta tensors follow torch's layout rules except in degenerate cases: a tensor with a size-1 (or
# size-0) dim whose stride is not the contiguous one (``torch.randn(6, 1).t()``, strides (1, 1))
# gets ``(x + 1).stride() == (1, 1)`` on the CPU but ``(6, 1)`` on meta, because meta's
# ``empty_like`` does not copy such strides. So after a meta replay, if any op of it read such a
# tensor, the values are replayed again on real CPU tensors (zeros), when every input and result
# involved is small enough; otherwise the layout is reported as unknown rather than guessed.
_CPU_REPLAY_LIMIT = 1 << 16  # elements per tensor


def _contiguous_strides(shape) -> tuple[int, ...]:
    strides, acc = [], 1
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


def _ambiguous(t: torch.Tensor) -> bool:
    """Whether ``t``'s layout is one where meta and real tensors may disagree (Note [Ambiguous layouts])."""
    return any(n <= 1 for n in t.shape) and t.stride() != _contiguous_strides(t.shape)


def _elements(q: TensorProxy) -> int:
    """Elements a CPU replay allocates for ``q`` (an input's whole strided extent)."""
    shape = tuple(map(pyval, q.shape))
    if q.strides is None or not all(shape):
        return math.prod(shape)
    return q.offset + sum((n - 1) * st for n, st in zip(shape, q.strides)) + 1

# Device moves keep the layout of a dense tensor (``memory_format=torch.preserve_format``).
_LAYOUT_PRESERVING = frozenset({conversions.cpu.id, conversions.cuda.id})
# Ops whose result is contiguous whatever their input's layout (storage offset aside: eager's
# ``contiguous()`` returns ``self`` when it already is).
_CONTIGUOUS_RESULT = frozenset({conversions.contiguous.id})


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
        t = state.metas[p.name] = proxies.input_layout_tensor(p, state.device)
        return t
    return None


def _fresh(state: _Replay, p: TensorProxy) -> torch.Tensor:
    """A contiguous tensor shaped like ``p`` on the replay's device."""
    make = torch.empty if state.device == "meta" else torch.zeros
    return make(_sizes(p), dtype=p.dtype, device=state.device)


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
                state.metas[o.name] = _fresh(state, o)
                state.unknown_offset[o.name] = (
                    f"it is {sym.print_name}() of a tensor whose layout is not known, which may return that "
                    "tensor itself"
                )
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
    impl = symbol_to_torch.get(sym) or (sym.python_impl if sym.is_prim else None)

    def conc(x):
        return _concrete(x, state.device)

    if not ins:
        # A factory: contiguous, unless it takes a device (and maybe strides) it can create on meta.
        if impl is not None and "device" in bsym.kwargs:
            kwargs = {**tree_map(conc, bsym.kwargs), "device": torch.device(state.device)}
            try:
                with torch.no_grad(), tracectx(None):
                    result = impl(*tree_map(conc, bsym.args), **kwargs)
                if _bind_results(state, outs, result):
                    return
            except Exception:
                pass
        for o in outs:
            state.metas[o.name] = _fresh(state, o)
        return
    if impl is None:
        for o in outs:
            state.unknown[o.name] = f"it is computed by {sym.print_name}{_where(bsym)}, which has no torch implementation"
        return

    def arg(x):
        if isinstance(x, TensorProxy):
            return state.metas[x.name]
        return conc(x)

    try:
        args, kwargs = tree_map(arg, bsym.args), tree_map(arg, bsym.kwargs)
        with torch.no_grad(), tracectx(None):  # an impl that calls symbols must not record into the trace
            result = impl(*args, **kwargs)
    except Exception as e:
        for o in outs:
            state.unknown[o.name] = (
                f"it is computed by {sym.print_name}{_where(bsym)}, which cannot run on meta tensors "
                f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"
            )
        return
    if _bind_results(state, outs, result):
        return
    in_names = {a.name for a in ins}
    for o in outs:
        if IN_PLACE in sym.tags and o.name in in_names:
            continue  # mutated in place (``__setitem__`` returns None): its tensor is the argument's
        state.unknown[o.name] = f"the results of {sym.print_name}{_where(bsym)} do not match its trace outputs"


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


def _run(trace, device: str, top: list[BoundSymbol], needed: list[int]) -> _Replay:
    """Replays the ``needed`` top-level bound symbols not replayed yet on ``device``."""
    states = trace.__dict__.setdefault(_STATE_ATTR, {})
    state = states.get(device)
    if state is None:
        state = states[device] = _Replay(device)
    for i in needed:
        bsym = top[i]
        if bsym.uid not in state.done:
            state.done.add(bsym.uid)
            _replay(state, bsym)
    return state


def meta_layout_of(p: TensorProxy, need_offset: bool = False) -> torch.Tensor:
    """A tensor (meta, or a small CPU one: Note [Ambiguous layouts]) laid out as eager lays out the
    intermediate ``p`` (``proxies.layout_provider``)."""
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
    state = _run(trace, "meta", top, needed)
    ambiguous = [
        a
        for i in needed
        for a in top[i].flat_proxy_args
        if isinstance(a, TensorProxy) and a.name in state.metas and _ambiguous(state.metas[a.name])
    ]
    if ambiguous and p.name not in state.unknown:
        too_big = [
            q
            for q in [*roots.values(), *(o for i in needed for o in top[i].flat_proxy_outs)]
            if isinstance(q, TensorProxy) and _elements(q) > _CPU_REPLAY_LIMIT
        ]
        a = ambiguous[0]
        if too_big:
            raise _unknown(
                p,
                f"it is computed from {a.name}, whose strides {state.metas[a.name].stride()} for size-1 dims of shape "
                f"{tuple(state.metas[a.name].shape)} make torch's layout rules device-dependent, and {too_big[0].name} "
                "is too large to replay on the CPU",
            )
        state = _run(trace, "cpu", top, needed)
    if p.name in state.unknown:
        raise _unknown(p, state.unknown[p.name])
    if need_offset and p.name in state.unknown_offset:
        raise ThunderRuntimeError(
            f"The storage offset of tensor {p.name} is not known while tracing: {state.unknown_offset[p.name]}."
        )
    # The inputs whose tensors were made are marked ``strides_read`` (``proxies.input_layout_tensor``).
    return state.metas[p.name]


proxies.layout_provider = meta_layout_of
