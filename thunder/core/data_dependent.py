"""Data-dependent values: where a program needs the Python value of a tensor.

Note [Data-dependent values]
Where the program asks for the Python value of a tensor (``if mask.all():``, ``n = t.item()``,
``int(t)``, ``range(t)``, ``t.tolist()``) no trace can answer: the value depends on the data. The
tracer answers with the value for the inputs being traced, computed by running on them the ops
recorded so far that lead to the tensor (``evaluate``: no side effects, the inputs unchanged, the
RNG state as it was), and goes on tracing with it, as torch.compile goes on after a graph break
with the branch taken. The computation records ``check_outcome(t, kind, value, index)`` there:
every call computes the value again and, where it differs, raises ``OutcomeChanged``; the jitted
function then runs the entry whose trace continues with this call's value, or traces one, told
the outcomes so far (which it takes instead of evaluating again). So every outcome path compiles
once and each call takes its own; a changed outcome costs the ops before the check twice.

A call can stop at a check and start again in another entry, so nothing it does before its last
check may be seen: replays of side effects (``print``, assignments to outside state) move after
the last check (``order_for_checks``; they read values the trace has anyway; a call that fails at run time before
them makes them as eager does: Note [A run that fails before its effects] in thunder.compiler), the RNG state is
put back when a check fails (``draws_random``: the caller wraps such computations), and so are the input
tensors written in place before a check that may fail (the caller copies them at the start of each call of such
an entry: ``_restoring_inputs_on_changed_outcome`` in thunder.compiler).

Note [Symbolic data-dependent sizes]
A size that comes from the data (how many elements a mask selects: ``torch.where(mask)``, ``x[mask]``,
``nonzero``; ``n = t.item()`` used as a size) changes from call to call in some programs (a mixture of experts'
routing), and one entry per value would compile on every call. So such a size is kept symbolic, as
torch.compile's unbacked symbols: under ``cache="symbolic values"`` from the first trace; with automatic dynamic
shapes (the default cache) once it has changed between entries (``ShapeHistory.outcomes``, by outcome index),
together with every size asked at the same line (``ShapeHistory.dynamic_sites``). ``check_outcome`` is then
given a ``SymbolicOutcome`` instead of the value and binds the value to a proxy (``u0 = _symbolic_outcome(...)``),
the program sees a ``SymInt`` named after it, and the ops' shapes follow it at run time. The ``SymInt`` carries
the proxy, so every op that takes the number reads the proxy (``BoundSymbol.flat_proxy_args``): passes keep
the order, and a backward that needs the size takes it as a saved value. The constraints the trace records on
the symbol (a comparison, a branch) are checked by the computation where it binds the value, and a value that
breaks them raises ``OutcomeChanged`` like a changed constant; a constraint that also refers to the prologue's
symbols (``u0 <= x_0`` from ``x[:n]``) is checked there too, with their values passed in (``SymbolicOutcome.given``;
``continues`` reads them from the prologue's result), except one the passes record late or beside numbers the
prologue draws per call, which pins the sizes it names. ``int(t)`` and ``t.__index__()`` pin too:
CPython turns what they return into a plain int, which the trace would then hold as a constant. A call that
stops at a check reports the values of the symbolic outcomes before it (``OutcomeChanged.earlier``), so the
entry it continues in is chosen, and traced, from values only. Values 0 and 1 stay constant, as sizes do.
A float ``t.item()`` (an optimizer's step count: Note [torch.optim's numbers under thunder] in
thunder.core.introspection) is kept symbolic the same way, as a ``SymFloat``, whatever its value; with automatic
dynamic shapes a number that changed since an earlier entry is symbolic whatever the new entry missed on (the
optimizer's second step misses on its new state, by which time the step count has changed).

Layer: tracing. Imports: core.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from thunder.core import prims
from thunder.core.prims.python import tensor_value
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.replays import REPLAYS
from thunder.core.symbol import IN_PLACE, RANDOM, BoundSymbol, Symbol, mutates
from thunder.core.symbolic import SymFloat, SymInt
from thunder.core.trace import TraceCtx
from thunder.core.transforms.autodiff import Memory

__all__ = ["evaluate", "order_for_checks", "draws_random"]


class _CannotEvaluate(Exception):
    pass


def evaluate(
    bsyms: list[BoundSymbol],
    target: Proxy,
    inputs: dict[str, torch.Tensor],
    eager_impl: Callable[[Symbol], Callable | None],
) -> torch.Tensor | None:
    """The real value of ``target``: the ops among ``bsyms`` it depends on, run eagerly on the real
    ``inputs`` (by name); None where some op cannot run outside a trace."""
    updates = any(mutates(b) for b in bsyms)
    root = _memory_roots(bsyms) if updates else str  # (no update: no memory to follow)
    needed = {target.name}
    needed_memory = {root(target.name)}
    part = []
    for bsym in reversed(bsyms):
        if any(o.name in needed for o in bsym.flat_proxy_outs) or (
            updates and mutates(bsym) and any(root(t.name) in needed_memory for t in _tensors_of(bsym))
        ):  # an in-place update of what the value is computed from, maybe through a view (``x.detach().mul_(2)``)
            part.append(bsym)
            for a in bsym.flat_proxy_args:
                needed.add(a.name)
                needed_memory.add(root(a.name))
    part.reverse()
    env: dict[str, Any] = dict(inputs)
    if any(mutates(b) for b in part):  # the caller's tensors stay as they are
        env = _private_copies(env)
    rng = torch.random.get_rng_state()
    try:
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            for bsym in part:
                _run(bsym, env, eager_impl)
    except _CannotEvaluate:
        return None
    finally:
        torch.random.set_rng_state(rng)
    return env.get(target.name)


def _private_copies(env: dict[str, Any]) -> dict[str, Any]:
    """``env`` with each tensor a copy laid out in memory as it is: views of one storage stay views of one copy (two
    inputs that alias see each other's writes) and an expanded tensor stays expanded (an in-place op on it fails as
    it does in eager)."""
    storages: dict[tuple, torch.UntypedStorage] = {}

    def copy(v: Any) -> Any:
        if not isinstance(v, torch.Tensor):
            return v
        if v.layout is not torch.strided or v.is_meta or v.is_conj() or v.is_neg() or type(v) not in (torch.Tensor, torch.nn.Parameter):
            return v.clone()
        storage = v.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes(), v.device)
        if key not in storages:
            storages[key] = storage.clone()
        return torch.empty(0, dtype=v.dtype, device=v.device).set_(
            storages[key], v.storage_offset(), v.size(), v.stride()
        )

    return {k: copy(v) for k, v in env.items()}


def _tensors_of(bsym: BoundSymbol) -> list[Proxy]:
    return [p for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs) if isinstance(p, TensorProxy)]


def _memory_roots(bsyms: list[BoundSymbol]) -> Callable[[str], str]:
    """Per tensor name, a name standing for its memory: a view (``detach``, ``reshape``, a slice) shares its base's."""
    memory = Memory()
    for bsym in bsyms:
        memory.record(bsym, False, [])
    return memory.root


def _run(bsym: BoundSymbol, env: dict, eager_impl: Callable[[Symbol], Callable | None]) -> None:
    if bsym.sym is prims.check_outcome:  # a symbolic outcome's value, read by the ops after it
        if bsym.output is not None:
            t, kind = bsym.args[:2]
            env[bsym.output.name] = tensor_value(env[t.name], kind)
        return
    impl = eager_impl(bsym.sym)
    if impl is None:
        if not bsym.subsymbols:
            raise _CannotEvaluate(bsym.sym.print_name)
        for sub in bsym.subsymbols:
            _run(sub, env, eager_impl)
        return
    args, kwargs = tree_map(lambda x: _real(x, env), (bsym.args, bsym.kwargs))
    out = impl(*args, **kwargs)
    if out is None and IN_PLACE in bsym.sym.tags and args:  # ``Tensor.__setitem__``: the updated tensor is the result
        out = args[0]
    if isinstance(out, tuple) and type(out) is not tuple:  # torch.return_types
        out = tuple(out)
    outs = [o for o in tree_leaves(bsym.output)]
    values = tree_leaves(out)
    if len(outs) != len(values):
        raise _CannotEvaluate(bsym.sym.print_name)
    for o, v in zip(outs, values):
        if isinstance(o, Proxy):
            env[o.name] = v


def _real(x: Any, env: dict) -> Any:
    if isinstance(x, SymInt):
        return int.__int__(x)
    if isinstance(x, SymFloat):
        return float.__float__(x)
    if isinstance(x, Proxy):
        try:
            return env[x.name]
        except KeyError:
            raise _CannotEvaluate(x.name) from None
    return x


def order_for_checks(trace: TraceCtx) -> bool:
    """Moves the replays of side effects after the last ``check_outcome`` (Note [Data-dependent values]); whether
    it moved any."""
    bsyms = trace.bound_symbols
    last = max((i for i, b in enumerate(bsyms) if b.sym is prims.check_outcome), default=None)
    if last is None:
        return False
    replays = [b for b in bsyms[:last] if b.sym in REPLAYS]
    if replays:
        moved = {id(b) for b in replays}
        rest = [b for b in bsyms if id(b) not in moved]
        after = next(i for i, b in enumerate(rest) if b is bsyms[last]) + 1
        bsyms[:] = rest[:after] + replays + rest[after:]
    return bool(replays)


def draws_random(trace: TraceCtx) -> bool:
    """Whether the computation draws random numbers (then a failed check must put the RNG state back)."""

    def draws(bsym: BoundSymbol) -> bool:
        return RANDOM in bsym.sym.tags or any(draws(s) for s in bsym.subsymbols)

    return any(draws(b) for b in trace.bound_symbols)
