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
# A detector asks for values hundreds of times (every ``nms``, every box count, every box of Mask R-CNN's mask
# pasting) and ``_raise_an_earlier_failure`` evaluates at every op that may raise. Each question ran the ops its
# value needs from the inputs (Faster R-CNN's first call ran its convolutions 1,100 times), and found them by a scan
# of the whole trace (Mask R-CNN's 2,700 questions scanned it each). So the tracer keeps one ``Evaluations`` for its
# trace: the values computed so far, by name, and which ops made them, and an index of the trace (the ops making
# each name, the in-place updates of each memory); a question looks up from its value back to the values computed
# already and runs only the ops it found, in the trace's order. That gives eager's values as long as the ops run in
# the trace's order as far as memory and the generator can tell: an op that has not run may not read memory that
# an op after it has already written in place, nor write memory that an op after it has already read, nor draw
# where a later op drew. Where one would, the evaluations start again from the inputs (as every question did
# before). The first in-place update makes them start again on copies of the inputs, so that the caller's tensors,
# and views of them computed earlier, stay as they are. Draws go on from where the last evaluation's ended (the
# first from the generator's state when it was asked, as eager's do), and the caller's state is put back after
# each. The values are kept until tracing ends (as eager's forward keeps what autograd saves).
class Evaluations:
    """The real values of one trace's tensors computed so far (Note [Evaluating once per trace])."""

    def __init__(self) -> None:
        self._follow_anew()

    def _follow_anew(self) -> None:
        self._seen: list[BoundSymbol] = []  # the trace's ops in order, as far as followed
        self.position: dict[int, int] = {}  # id(op) -> its index in the trace
        self.flags: dict[int, tuple[bool, bool]] = {}  # id(op) -> (updates memory in place, draws)
        self._producers: dict[str, list[BoundSymbol]] = {}  # name -> the ops that make it
        self._writers: list[BoundSymbol] = []  # the ops that update memory in place, in order
        self._writers_of: dict[str, list[BoundSymbol]] = {}  # memory root -> those of them that touch it
        self._indexed = (0, 0)  # (writers, merges) that _writers_of holds
        self._names: set[str] = set()  # the tensors seen
        self.merges = 0  # how many times two memories turned out one (roots changed)
        self.updates = False  # some op seen updates memory in place
        self._memory = Memory()
        self.start(cloned=False)

    def start(self, *, cloned: bool) -> None:
        """Forgets the values: the next question runs its ops from the inputs (copies of them if ``cloned``)."""
        self.env: dict[str, Any] = {}
        self.ran: dict[int, BoundSymbol] = {}
        self.cloned = cloned
        self.rng: torch.Tensor | None = None  # the generator's state after the last draw
        self._last_read: dict[str, int] = {}  # memory root -> the last position of an op that ran and touched it
        self._last_written: dict[str, int] = {}  # memory root -> the last position of an op that ran and wrote it
        self._last_draw = -1
        self._run_merges = self.merges
        self._copied_storages: dict[tuple, torch.UntypedStorage] = {}

    def private_copy(self, v: Any) -> Any:
        """A copy of input ``v`` laid out in memory as it is: views of one storage stay views of one copy (two inputs
        that alias see each other's writes) and an expanded tensor stays expanded (an in-place op on it fails as it
        does in eager)."""
        if not isinstance(v, torch.Tensor):
            return v
        if v.layout is not torch.strided or v.is_meta or v.is_conj() or v.is_neg() or type(v) not in (torch.Tensor, torch.nn.Parameter):
            return v.clone()
        storage = v.untyped_storage()
        key = (storage.data_ptr(), storage.nbytes(), v.device)
        if key not in self._copied_storages:
            self._copied_storages[key] = storage.clone()
        return torch.empty(0, dtype=v.dtype, device=v.device).set_(
            self._copied_storages[key], v.storage_offset(), v.size(), v.stride()
        )

    def follow(self, bsyms: list[BoundSymbol]) -> None:
        """Records the ops of ``bsyms`` not seen yet; forgets everything where the trace is not the one followed
        (``bsyms`` may be a prefix of it)."""
        known = min(len(bsyms), len(self._seen))
        if known and bsyms[known - 1] is not self._seen[known - 1]:
            self._follow_anew()
            known = 0
        memory = self._memory
        for bsym in bsyms[known:]:
            self.position[id(bsym)] = len(self._seen)
            self._seen.append(bsym)
            writes = mutates(bsym)
            self.flags[id(bsym)] = (writes, draws(bsym))
            for o in bsym.flat_proxy_outs:
                self._producers.setdefault(o.name, []).append(bsym)
            if writes:
                self.updates = True
                self._writers.append(bsym)
            tensors = [t.name for t in _tensors_of(bsym)]
            before = [(n, memory.root(n)) for n in tensors if n in self._names]
            memory.record(bsym, False, [])
            if any(memory.root(n) != r for n, r in before):
                self.merges += 1
            self._names.update(tensors)

    def root(self, name: str) -> str:
        """A name standing for the memory of tensor ``name``: a view (``detach``, ``reshape``, a slice) shares its
        base's."""
        return self._memory.root(name) if self.updates else name

    def _memories(self, bsym: BoundSymbol) -> set[str]:
        return {self.root(t.name) for t in _tensors_of(bsym)}

    def part(self, n: int, target: Proxy) -> list[BoundSymbol]:
        """The ops among the first ``n`` of the trace that ``target``'s value after them depends on, in order: the
        ops making the values it is computed from and the in-place updates of their memory before they are read,
        maybe through a view (``x.detach().mul_(2)``); ops that ran already are there, what they read is not."""
        pos, root, ran, updates = self.position, self.root, self.ran, self.updates
        if updates and self._indexed != (len(self._writers), self.merges):
            done, merges = self._indexed
            if merges != self.merges:
                self._writers_of, done = {}, 0
            for w in self._writers[done:]:
                for r in self._memories(w):
                    self._writers_of.setdefault(r, []).append(w)
            self._indexed = (len(self._writers), self.merges)
        found: dict[int, BoundSymbol] = {}
        names_done: dict[str, int] = {}  # name -> the position before which its makers were looked for
        roots_done: dict[str, int] = {}
        names, roots = [(target.name, n)], [(root(target.name), n)] if updates else []
        while names or roots:
            if names:
                key, before = names.pop()
                done, candidates = names_done, self._producers.get(key, ())
            else:
                key, before = roots.pop()
                done, candidates = roots_done, self._writers_of.get(key, ())
            if done.get(key, -1) >= before:
                continue
            done[key] = before
            for bsym in candidates:
                if pos[id(bsym)] < before and id(bsym) not in found:
                    found[id(bsym)] = bsym
                    if id(bsym) not in ran:
                        at = pos[id(bsym)]
                        for a in bsym.flat_proxy_args:
                            names.append((a.name, at))
                            if updates:
                                roots.append((root(a.name), at))
        return sorted(found.values(), key=lambda b: pos[id(b)])

    def out_of_order(self, todo: list[BoundSymbol]) -> bool:
        """Whether an op of ``todo`` reads or writes memory that a later op that ran already wrote (or read, for an
        op of ``todo`` that writes), or draws where a later op that ran drew."""
        if self._run_merges != self.merges:  # the memories the ops that ran touched, by their roots now
            self._run_merges, ran = self.merges, list(self.ran.values())
            self._last_read, self._last_written, self._last_draw = {}, {}, -1
            self.ran_in_order(sorted(ran, key=lambda b: self.position[id(b)]))
        for bsym in todo:
            i = self.position[id(bsym)]
            writes, draws_ = self.flags[id(bsym)]
            if draws_ and self._last_draw > i:
                return True
            for r in self._memories(bsym):
                if self._last_written.get(r, -1) > i or writes and self._last_read.get(r, -1) > i:
                    return True
        return False

    def ran_in_order(self, bsyms: list[BoundSymbol]) -> None:
        """Records that ``bsyms`` ran (their values are in ``env``)."""
        for bsym in bsyms:
            self.ran[id(bsym)] = bsym
            i = self.position[id(bsym)]
            writes, draws_ = self.flags[id(bsym)]
            if draws_:
                self._last_draw = max(self._last_draw, i)
            for r in self._memories(bsym) if self.updates else ():
                self._last_read[r] = max(self._last_read.get(r, -1), i)
                if writes:
                    self._last_written[r] = max(self._last_written.get(r, -1), i)


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
    todo = [b for b in memo.part(len(bsyms), target) if id(b) not in memo.ran]
    writes = any(memo.flags[id(b)][0] for b in todo)
    if writes and not memo.cloned or memo.ran and memo.out_of_order(todo):
        # the caller's tensors stay as they are; a value computed before stays as it was
        memo.start(cloned=memo.cloned or writes)
        todo = memo.part(len(bsyms), target)
        memo.cloned = memo.cloned or any(memo.flags[id(b)][0] for b in todo)
    env = memo.env
    for name, value in inputs.items():
        if name not in env:
            env[name] = memo.private_copy(value) if memo.cloned else value
    rng = torch.random.get_rng_state()
    if memo.rng is not None:
        torch.random.set_rng_state(memo.rng)
    try:
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            for bsym in todo:
                _run(bsym, env, eager_impl)
                memo.ran_in_order([bsym])
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
