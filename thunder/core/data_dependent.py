"""Data-dependent values: where a program needs the Python value of a tensor.

Note [Data-dependent values]
Where the program asks for the Python value of a tensor (``if mask.all():``, ``n = t.item()``,
``int(t)``, ``range(t)``, ``t.tolist()``) no trace can answer: the value depends on the data. The
tracer answers with the value for the inputs being traced, computed by running on them the ops
recorded so far that lead to the tensor (``evaluate``: no side effects, the inputs unchanged, the
RNG state as it was; each op once per trace: Note [Evaluating once per trace]), and goes on
tracing with it, as torch.compile goes on after a graph break with the branch taken. The
computation records ``check_outcome(t, kind, value, index)`` there: every call computes the value
again and, where it differs, raises ``OutcomeChanged``; the jitted function then runs the entry
whose trace continues with this call's value, or traces one, told the outcomes so far (which it
takes instead of evaluating again). So every outcome path compiles once and each call takes its
own; a changed outcome costs the ops before the check twice.

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
from thunder.core.trace import TraceCtx, draws
from thunder.core.transforms.autodiff import Memory

__all__ = ["Evaluations", "evaluate", "order_for_checks", "draws_random"]


class _CannotEvaluate(Exception):
    pass


# Note [Evaluating once per trace]
# A detector asks for values dozens of times (every ``nms``, every box count) and ``_raise_an_earlier_failure``
# evaluates at every op that may raise, each time on ops that start at the inputs: run from scratch, each question
# ran the backbone again (Faster R-CNN's first call ran its convolutions 1,100 times). So the tracer keeps one
# ``Evaluations`` for its trace: the values computed so far, by name, and which ops made them; a question runs only
# the ops its value needs that have not run. That gives eager's values as long as the ops run in the trace's order
# as far as memory and the generator can tell: an op that has not run may not read memory that an op after it has
# already written in place, nor draw from the generator after a later op drew. Where one would, the evaluations
# start again from the inputs (as every question did before). The first in-place update makes them start again
# on copies of the inputs, so that the caller's tensors, and views of them computed earlier, stay as they are.
# Draws go on from where the last evaluation's ended (the first from the generator's state when it was asked, as
# eager's do), and the caller's state is put back after each. The values are kept until tracing ends (as eager's
# forward keeps what autograd saves).
class Evaluations:
    """The real values of one trace's tensors computed so far (Note [Evaluating once per trace])."""

    def __init__(self) -> None:
        self._follow_anew()

    def _follow_anew(self) -> None:
        self._seen: list[BoundSymbol] = []  # the trace's ops in order, as far as followed
        self._position: dict[int, int] = {}  # id(op) -> its index in the trace
        self.flags: dict[int, tuple[bool, bool]] = {}  # id(op) -> (updates memory in place, draws)
        self.updates = False  # some op seen updates memory in place
        self._memory = Memory()
        self.start(cloned=False)

    def start(self, *, cloned: bool) -> None:
        """Forgets the values: the next question runs its ops from the inputs (copies of them if ``cloned``)."""
        self.env: dict[str, Any] = {}
        self.ran: dict[int, BoundSymbol] = {}
        self.cloned = cloned
        self.writes: list[BoundSymbol] = []  # ops that ran and updated memory or drew
        self.rng: torch.Tensor | None = None  # the generator's state after the last draw

    def follow(self, bsyms: list[BoundSymbol]) -> None:
        """Records the ops of ``bsyms`` not seen yet; forgets everything where the trace is not the one followed
        (``bsyms`` may be a prefix of it)."""
        known = min(len(bsyms), len(self._seen))
        if known and bsyms[known - 1] is not self._seen[known - 1]:
            self._follow_anew()
            known = 0
        for bsym in bsyms[known:]:
            self._position[id(bsym)] = len(self._seen)
            self._seen.append(bsym)
            self.flags[id(bsym)] = (mutates(bsym), draws(bsym))
            self.updates = self.updates or mutates(bsym)
            self._memory.record(bsym, False, [])

    def root(self, name: str) -> str:
        """A name standing for the memory of tensor ``name``: a view (``detach``, ``reshape``, a slice) shares its
        base's."""
        return self._memory.root(name) if self.updates else name

    def _out_of_order(self, todo: list[BoundSymbol]) -> bool:
        """Whether an op of ``todo`` reads or writes memory that a later op that ran already wrote (or read, for an
        op of ``todo`` that writes), or draws where a later op that ran drew."""
        if not self.writes and not any(self.flags[id(b)][0] for b in todo):
            return False
        pos, root = self._position, self.root

        def memory(bsym: BoundSymbol) -> set[str]:
            return {root(t.name) for t in _tensors_of(bsym)}

        for bsym in todo:
            i = pos[id(bsym)]
            writes, draws_ = self.flags[id(bsym)]
            mine = memory(bsym)
            for w in self.writes:
                if pos[id(w)] > i and (draws_ and self.flags[id(w)][1] or self.flags[id(w)][0] and mine & memory(w)):
                    return True
            if writes and any(pos[id(r)] > i and mine & memory(r) for r in self.ran.values()):
                return True
        return False


def evaluate(
    bsyms: list[BoundSymbol],
    target: Proxy,
    inputs: dict[str, torch.Tensor],
    eager_impl: Callable[[Symbol], Callable | None],
    memo: Evaluations | None = None,
) -> torch.Tensor | None:
    """The real value of ``target``: the ops among ``bsyms`` it depends on, run eagerly on the real
    ``inputs`` (by name); None where some op cannot run outside a trace. ``memo`` keeps what ran for the next
    question about the same trace (Note [Evaluating once per trace])."""
    memo = Evaluations() if memo is None else memo
    memo.follow(bsyms)
    updates, root, flags = memo.updates, memo.root, memo.flags
    needed = {target.name}
    needed_memory = {root(target.name)}
    part = []
    for bsym in reversed(bsyms):
        if any(o.name in needed for o in bsym.flat_proxy_outs) or (
            updates and flags[id(bsym)][0] and any(root(t.name) in needed_memory for t in _tensors_of(bsym))
        ):  # an in-place update of what the value is computed from, maybe through a view (``x.detach().mul_(2)``)
            part.append(bsym)
            for a in bsym.flat_proxy_args:
                needed.add(a.name)
                needed_memory.add(root(a.name))
    part.reverse()
    todo = [b for b in part if id(b) not in memo.ran]
    if any(flags[id(b)][0] for b in todo) and not memo.cloned or memo.ran and memo._out_of_order(todo):
        # the caller's tensors stay as they are; a value computed before stays as it was
        memo.start(cloned=memo.cloned or any(flags[id(b)][0] for b in part))
        todo = part
    env = memo.env
    for name, value in inputs.items():
        if name not in env:
            env[name] = value.clone() if memo.cloned and isinstance(value, torch.Tensor) else value
    rng = torch.random.get_rng_state()
    if memo.rng is not None:
        torch.random.set_rng_state(memo.rng)
    try:
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            for bsym in todo:
                _run(bsym, env, eager_impl)
                memo.ran[id(bsym)] = bsym
                if any(flags[id(bsym)]):
                    memo.writes.append(bsym)
    except _CannotEvaluate:
        return None
    finally:
        memo.rng = torch.random.get_rng_state()
        torch.random.set_rng_state(rng)
    return env.get(target.name)


def _tensors_of(bsym: BoundSymbol) -> list[Proxy]:
    return [p for p in (*bsym.flat_proxy_args, *bsym.flat_proxy_outs) if isinstance(p, TensorProxy)]


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
