"""Reverse-mode differentiation of traces: the backward trace of a computation, and its split.

Note [Forward and backward traces]
``split_forward_backward(trace)`` differentiates a computation trace with respect to its inputs
that require grad and returns two traces:

- the **forward**: the computation itself, op for op (so its values are eager's), except that a
  call with an augmented forward (``forward_rules``: ``batch_norm`` keeping its statistics) is
  recorded as that, and a decomposition that draws random numbers is run by the forward itself
  (its draws cannot be repeated in the backward); it
  returns ``(outputs, saved)``: the distinct proxies of what the program returns, and the
  forward values the backward reads; a third small trace, ``rebuild(*outputs)``, puts the
  outputs back into the structure the program returns;
- the **backward**: ``backward(*saved, *cotangents)`` returning one gradient (or None) per
  input of the computation; ``cotangents`` has one entry per tensor among ``outputs``.

The backward walks the computation's top-level bound symbols in reverse. A symbol with a rule
in ``grad_rules`` (Note [VJP rules] in ``thunder.core.rules``) contributes its rule; a symbol
without one is differentiated through its decomposition: its subsymbols are recomputed in the
backward from the symbol's inputs (intermediates are cheaper to recompute than to keep alive
between forward and backward), down to the symbols that have rules. Whatever forward value the
backward then reads is saved; dead-code elimination of the backward decides which.

Every backward bound symbol carries the forward symbol whose gradient it computes as its
lineage and source location, so the explorer links the two.

Where only zeros reach an input (``floor``), its gradient is zeros, as in eager, not None.

What the transform cannot differentiate (an op with neither a rule nor a decomposition, an
in-place update of a value that requires grad, a value that requires grad but comes from no
input, one that is printed and would show no autograd history; a stored one is an output, Note
[Stored values that require grad])
raises ``NotDifferentiable``, and the caller runs the computation under torch's own autograd
instead, which is always correct.

Layer: core. Imports: core.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field

from thunder.core import prims
from thunder.core.codegen import bsym_lines
from thunder.core.errors import ThunderError, ThunderRuntimeError
from thunder.core.prims.base import asking_grads
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.replays import OUTPUTS, REPLAYS
from thunder.core.rules import eager_saves, forward_rules, grad_rules
from thunder.core.symbol import DONT_DCE, IN_PLACE, MAY_ALIAS, PARAMETER, RANDOM, RERUN, BoundSymbol, mutates
from thunder.core.symbolic import is_symbolic
from thunder.core.trace import (
    NO_GRAD_RESULTS,
    TraceCtx,
    draws,
    from_trace,
    live_bound_symbols,
    recording_into,
    tracectx,
)  # fmt: skip
from thunder.core.tracectx import get_tracectx, source_location_provider
from thunder.core.transforms.grad_transforms import expand_grad_transform

__all__ = ["NotDifferentiable", "ForwardBackward", "split_forward_backward", "requires_grad_outputs"]


class NotDifferentiable(ThunderError):
    """The transform cannot differentiate this computation (see Note [Forward and backward traces])."""


@dataclass
class ForwardBackward:
    """The two traces of ``split_forward_backward`` and how their values line up."""

    forward: TraceCtx
    backward: TraceCtx
    saved: list  # forward values the backward reads (proxies, symbolic inputs), in the backward's parameter order
    outputs: list  # the distinct proxies (and symbolic inputs) the program returns, as the forward returns them
    rebuild: TraceCtx  # ``rebuild(*outputs)`` returns what the program returns
    # Saved tensors the backward updates in place (a checkpointed region's buffers): handed to it as they are
    # then, unchecked, as eager's recomputation reads them (Note [What a recomputed region does again]).
    rewritten: frozenset[str] = frozenset()
    # The value that stands for a tensor updated in place (``_functional_updates``) -> the tensor's name before
    updated: dict[str, str] = field(default_factory=dict)


def _differentiable(p) -> bool:
    return isinstance(p, TensorProxy) and (p.dtype.is_floating_point or p.dtype.is_complex)


def requires_grad_outputs(trace: TraceCtx) -> bool:
    """Whether any tensor the computation returns requires grad: only then is there a backward."""
    ret = trace.bound_symbols[-1]
    return any(isinstance(p, TensorProxy) and p.requires_grad for p in tree_leaves(ret.args))


def split_forward_backward(
    trace: TraceCtx, grad_transform_for: Callable[[BoundSymbol], Callable | None] | None = None
) -> ForwardBackward:
    """The forward and backward traces of ``trace`` (Note [Forward and backward traces]);
    ``grad_transform_for(bsym)``: the gradient an executor gives that call, if any (Note [Grad
    transforms] in thunder.core.transforms.grad_transforms)."""
    try:
        return _split(trace, grad_transform_for)
    except NotDifferentiable as e:
        # torch's autograd runs a checkpointed region once: what it does outside itself would not happen again
        for bsym in trace.bound_symbols:
            if RERUN in bsym.sym.tags:
                _refuse_lost_rerun(bsym, f"the program runs under torch's autograd ({e})")
        raise


def _split(
    trace: TraceCtx, grad_transform_for: Callable[[BoundSymbol], Callable | None] | None
) -> ForwardBackward:
    if not trace.bound_symbols or trace.bound_symbols[-1].sym is not prims.python_return:
        raise NotDifferentiable("the computation does not end in a return")
    updated: dict[str, str] = {}
    bsyms, functional, _ = _functional_updates(
        trace.bound_symbols, {a.name for a in trace.args if isinstance(a, Proxy)}, updated
    )
    *body, ret = bsyms
    active = {a.name for a in trace.args if _differentiable(a) and a.requires_grad}
    body, augmented = _augment_forwards(body, trace, grad_transform_for)
    body, exposed, kept_regions = _expose_random_parts(body)
    exposed |= augmented | functional
    escaping = _check_forward(body, active, exposed)
    body, late = _replays_after_the_function(body, escaping)

    by_name = {a.name: a for a in trace.args if isinstance(a, Proxy) or is_symbolic(a)}
    returned = [p for leaf in tree_leaves(ret.args) for p in _refs(leaf, by_name)]
    outputs = list({p.name: p for p in (*returned, *_free_values(late, set(), by_name))}.values())
    tensor_outputs = _tensors(outputs)

    bw = from_trace(trace)
    bw.name = "backward"
    bw.args = []
    grads = _Gradients()
    with tracectx(bw):
        cotangents = [TensorProxy.like(p, bw.safe_name(f"g_{p.name}"), requires_grad=False) for p in tensor_outputs]
        for p, c in zip(tensor_outputs, cotangents):
            if p.name in active:
                grads.add(p, c)
        _backprop(body, grads, active, bw, forward_top=True, kept_regions=kept_regions)
        input_grads = tuple(_input_grad(a, grads) for a in trace.args)
        prims.python_return(input_grads)

    # Recomputed parts that were fine in the forward cannot raise here: unused, they go.
    bw.bound_symbols[:] = live_bound_symbols(bw.bound_symbols, keep_may_raise=False)
    saved = _free_values(bw.bound_symbols, {c.name for c in cotangents}, by_name)
    bw.args = [*saved, *cotangents]

    fw = from_trace(trace)
    fw.bound_symbols.extend(body)
    with tracectx(fw):
        if late:  # shown where they are in the program's order; they run after the autograd function
            lines = "\n".join(f"  {line}" for b in late for line in bsym_lines(b))
            prims.comment(f"run after the autograd function, with the tensors it returns:\n{lines}")
        prims.python_return((tuple(outputs), tuple(saved)))
    fw.bound_symbols[-1].source = ret.source

    rebuild = from_trace(trace)
    rebuild.name = "outputs"
    rebuild.args = list(outputs)
    rebuild.bound_symbols.extend((*late, ret))
    rewritten = frozenset(d.name for b in bw.bound_symbols if IN_PLACE in b.sym.tags for d in _destinations(b))
    rewritten &= {getattr(p, "name", None) for p in saved}
    return ForwardBackward(fw, bw, saved, outputs, rebuild, rewritten, updated)


# Prims whose result may share its input's memory (a view; ``real``/``imag`` of a complex tensor);
# anything else makes a new tensor.
_ALIASING_PRIMS = frozenset(
    {prims.reshape, prims.transpose, prims.broadcast_in_dim, prims.slice_prim, prims.squeeze, prims.real, prims.imag}
)  # fmt: skip


def _aliased_args(bsym: BoundSymbol) -> set[str]:
    """The names of ``bsym``'s arguments whose memory its results may share: what runs may return
    them (``MAY_ALIAS``: ``contiguous``, ``to``, ``detach``, the views ``as_strided`` and ``unfold``, whose
    decompositions take elements), the argument itself, or a chain of shape prims in its
    decomposition leads from them to a result (an opaque kernel, such as a convolution, makes new
    tensors; ``sum(t, keepdim=True)`` ends in a broadcast of a new tensor, not of ``t``)."""
    if MAY_ALIAS in bsym.sym.tags:
        return {a.name for a in bsym.flat_proxy_args}
    if not bsym.subsymbols:
        if bsym.sym in _ALIASING_PRIMS:
            return {a.name for a in bsym.flat_proxy_args}
        # a call that returns an argument itself (``conj`` of a real tensor inside ``mH``, an in-place update)
        return {a.name for a in bsym.flat_proxy_args} & {o.name for o in bsym.flat_proxy_outs}
    shares: dict[str, set[str]] = {a.name: {a.name} for a in bsym.flat_proxy_args}
    for sub in bsym.subsymbols:
        via = set().union(*(shares.get(n, ()) for n in _aliased_args(sub)))
        for o in sub.flat_proxy_outs:
            shares[o.name] = via
    return set().union(*(shares.get(o.name, ()) for o in bsym.flat_proxy_outs))


def _functional_updates(
    body: list[BoundSymbol], inputs: set[str], updated: dict[str, str] | None = None
) -> tuple[list[BoundSymbol], set[int], dict[str, Proxy]]:
    """The body with each in-place update of a tensor that nothing else can see (made here by an op
    that does not alias, not an input, no view of it taken, saved by no earlier op's autograd, the op that made
    it included: eager refuses the backward after such an update) replaced by the op that computes the
    new value (``out += identity`` in a ResNet block, ``relu_``): later uses
    read the new value by its own name. Nothing can tell the difference (no other tensor shares
    that memory), and the update is differentiated like any op instead of sending the whole
    program to torch's autograd (Note [Forward and backward traces]). Inside a checkpointed region too (its
    ``relu_``, as a ResNet block's: the region's own inputs are what others see). Returns the body, the uids
    of the new ops and the new names of the values updated so; ``updated`` gets, per new value, the name it
    stands for (``ForwardBackward.updated``)."""
    new: list[BoundSymbol] = []
    made: set[int] = set()
    made_by: dict[str, BoundSymbol] = {}
    viewed: set[str] = set()
    readers: dict[str, list[BoundSymbol]] = {}  # name -> the calls taking part in autograd that read it
    swap: dict[str, Proxy] = {}
    grad_on = True  # (an update under ``torch.no_grad()`` is no op of autograd's: eager's gradient skips it)
    for bsym in body:
        if swap:
            bsym = bsym.rename(swap)
        if bsym.sym is prims.set_grad_enabled:
            grad_on = bool(bsym.args[0])
        if RERUN in bsym.sym.tags and bsym.subsymbols:
            parts, _, inner = _functional_updates(list(bsym.subsymbols), {a.name for a in bsym.flat_proxy_args}, updated)
            if inner:  # the region returns the new values by their names
                swap.update({o.name: inner[o.name] for o in bsym.flat_proxy_outs if o.name in inner})
                bsym = bsym.from_bsym(subsymbols=tuple(parts), output=bsym.rename(inner).output, lineage=bsym.lineage)
        update = _functional_form(bsym, made_by, viewed, inputs, readers) if grad_on else None
        if update is not None:
            value, old = update.output, bsym.args[0].name
            value.requires_grad = bsym.args[0].requires_grad  # the new value stands for the updated tensor
            for k, v in list(swap.items()):  # an earlier name of the same tensor reads the new value too
                if v.name == old:
                    swap[k] = value
            swap[old] = value
            if updated is not None:
                updated[value.name] = old
            bsym = update.from_bsym(lineage=(bsym.uid,), source=bsym.source)
            made.add(bsym.uid)
        else:
            viewed.update(_aliased_args(bsym))
            if any(getattr(o, "requires_grad", False) for o in bsym.flat_proxy_outs):
                for a in _tensors(bsym.flat_proxy_args):
                    readers.setdefault(a.name, []).append(bsym)
        for o in bsym.flat_proxy_outs:  # an in-place update returns its tensor: that keeps the op that made it
            made_by.setdefault(o.name, bsym)
        new.append(bsym)
    return new, made, swap


def _functional_form(
    bsym: BoundSymbol, made_by: dict, viewed: set[str], inputs: set[str], readers: dict[str, list[BoundSymbol]]
) -> BoundSymbol | None:
    """For ``dst.op_(...)`` (an in-place symbol whose decomposition computes the new value, then
    copies it into ``dst``) on a tensor nothing else sees: the bound symbol that computes the new
    value. Otherwise None."""
    if IN_PLACE not in bsym.sym.tags or len(bsym.subsymbols) < 2 or not bsym.args:
        return None
    dst, *_ = bsym.args
    *compute, last = bsym.subsymbols
    if (
        not isinstance(dst, TensorProxy)
        or bsym.output is not dst and getattr(bsym.output, "name", None) != dst.name
        or last.sym is not prims.copy_
        or last.args[1].name != dst.name
        or len(compute) != 1
        or compute[0].output is not last.args[0]
        or dst.name in inputs
        or dst.name in viewed
        or dst.name not in made_by
        or _aliased_args(made_by[dst.name])
        or any(_saves(reader, dst.name) for reader in readers.get(dst.name, ()))
        or _saved_by_its_maker(made_by[dst.name], dst.name)
        or any(IN_PLACE in s.sym.tags for s in compute)
        # ``dst.copy_(src)``, ``zero_()``: the new value does not come from the old one, but in eager the
        # old one stays in the graph (a zero gradient, not None); those keep torch's autograd
        or dst.name not in {a.name for a in compute[0].flat_proxy_args}
    ):
        return None
    return compute[0]


def _saved_by_its_maker(maker: BoundSymbol, name: str) -> bool:
    """Whether eager's autograd is known to keep ``name``, a result of ``maker``, for ``maker``'s backward
    (``tanh``, ``sigmoid``, ``exp``: eager refuses the backward after ``y.add_(1)`` on it). Where torch cannot
    tell (a ``batch_norm`` whose momentum the program computes), no: such makers are of the normalisations and
    linear maps, which keep their inputs."""
    if not any(getattr(o, "requires_grad", False) for o in maker.flat_proxy_outs):
        return False
    saved = eager_saves(maker)
    return saved is not None and name in saved


def _augment_forwards(
    body: list[BoundSymbol], trace: TraceCtx, grad_transform_for: Callable[[BoundSymbol], Callable | None] | None
) -> tuple[list[BoundSymbol], set[int]]:
    """The forward body with each call that needs a gradient and has an augmented forward
    (``forward_rules``) replaced by the ops that rule records, which also keep what the backward
    reads; their outputs take the call's own names. Returns the body and the uids of the new ops."""
    new: list[BoundSymbol] = []
    made: set[int] = set()
    for bsym in body:
        needs_grad = any(o.requires_grad for o in _tensors(bsym.flat_proxy_outs))
        executor_grad = grad_transform_for(bsym) if needs_grad and grad_transform_for is not None else None
        if executor_grad is not None:
            parts = expand_grad_transform(bsym, executor_grad, trace)
            if parts is not None:
                _put_parts(bsym, parts, new, made)
                continue
        rule = forward_rules.get(bsym.sym)
        if rule is None or not needs_grad:
            new.append(bsym)
            continue
        scratch: list[BoundSymbol] = []
        with recording_into(trace, scratch):
            out = rule(*bsym.args, **bsym.kwargs)
        if out is None:
            new.append(bsym)
            continue
        swap = {
            o.name: p
            for o, p in zip(tree_leaves(out), tree_leaves(bsym.output))
            if isinstance(o, Proxy) and isinstance(p, Proxy) and o.name != p.name
        }
        _put_parts(bsym, [part.rename(swap) for part in scratch], new, made)
    return new, made


def _expose_random_parts(body: list[BoundSymbol]) -> tuple[list[BoundSymbol], set[int], dict[int, BoundSymbol]]:
    """The forward body with each symbol that requires grad, has no rule and draws random numbers
    in its decomposition replaced by that decomposition (down to symbols with rules): random draws
    cannot be recomputed in the backward, so the forward must make what the backward keeps
    (``dropout`` becomes ``dropout_with_noise``, whose noise is saved). Returns the new body, the
    uids of the exposed parts and, by the uid of its last part, each checkpointed region exposed so that does
    something again in the backward (Note [What a recomputed region does again])."""
    new: list[BoundSymbol] = []
    exposed: set[int] = set()
    kept_regions: dict[int, BoundSymbol] = {}
    for bsym in body:
        needs = any(o.requires_grad for o in _tensors(bsym.flat_proxy_outs))
        if not needs or grad_rules.get(bsym.sym) is not None or not bsym.subsymbols:
            new.append(bsym)
            continue
        parts = _rule_level(bsym)
        if not any(RANDOM in p.sym.tags for p in parts):
            new.append(bsym)
            continue
        _put_parts(bsym, parts, new, exposed)
        if RERUN in bsym.sym.tags and _effect_seen_outside(bsym) is not None:
            kept_regions[new[-1].uid] = bsym
    return new, exposed, kept_regions


def _put_parts(bsym: BoundSymbol, parts: list[BoundSymbol], body: list[BoundSymbol], uids: set[int]) -> None:
    """Appends ``parts`` to ``body`` in place of ``bsym`` (its lineage and source), noting their uids."""
    for part in parts:
        part = part.from_bsym(lineage=(bsym.uid,), source=bsym.source)
        uids.add(part.uid)
        body.append(part)


def _rule_level(bsym: BoundSymbol) -> list[BoundSymbol]:
    return [
        p
        for sub in bsym.subsymbols
        for p in ([sub] if grad_rules.get(sub.sym) is not None or not sub.subsymbols else _rule_level(sub))
    ]


#: Note [Module backward hooks in the program] in thunder.core.prims.effects
_MODULE_HOOKS = (prims.module_hook_inputs, prims.module_hook_outputs)
_HOOK_NAMES = {
    prims.register_hook: "a hook (Tensor.register_hook)",
    **dict.fromkeys(_MODULE_HOOKS, "a module backward hook (register_full_backward_hook)"),
}


def _check_forward(body: list[BoundSymbol], active: set[str], exposed: set[int]) -> list[BoundSymbol]:
    """Refuses what the transform cannot differentiate, and checks that every value that
    requires grad comes from an input that does (a tensor made inside with requires_grad=True
    is a leaf of its own: torch's autograd handles it). Parts exposed from a decomposition
    (``exposed``) have no requires_grad marks: what they make from values that require grad does.
    Returns the replays that store a value that requires grad (Note [Stored values that require grad])."""
    stores: list[BoundSymbol] = []
    memory = Memory()
    for bsym in body:
        if PARAMETER in bsym.sym.tags:
            continue
        if bsym.sym.printer is not None and DONT_DCE in bsym.sym.tags:
            escaping = [a.name for a in bsym.flat_proxy_args if a.name in active]
            if escaping and bsym.sym in REPLAYS and bsym.sym not in OUTPUTS:
                stores.append(bsym)
            elif escaping and bsym.sym in (prims.register_hook, prims.retain_grad, *_MODULE_HOOKS):
                what = _HOOK_NAMES.get(bsym.sym, "retain_grad()")
                raise NotDifferentiable(
                    f"{escaping[0]} has {what}, which torch's autograd runs where eager's would"
                )  # Note [Tensor hooks in the program] in thunder.core.side_effects
            elif escaping:
                # print(t) shows the tensor's grad_fn in eager, which no compiled tensor has.
                raise NotDifferentiable(
                    f"{bsym.sym.print_name} lets {escaping[0]}, which requires grad, leave the computation"
                )
        reads_active = any(a.name in active for a in bsym.flat_proxy_args)
        written = written_in_place(bsym) if IN_PLACE in bsym.sym.tags else _writes_into_arguments(bsym)
        for dst in written:
            if memory.saved_by_autograd(dst.name):
                # ``y = x * w; w.mul_(2)``, ``x.detach().mul_(2)``: eager's autograd may have saved that memory and
                # refuses the backward (its version counter moved); the backward here would read the new values.
                raise NotDifferentiable(
                    f"{bsym.sym.print_name} updates {dst.name} in place after eager's autograd saved its memory"
                )
        memory.record(bsym, reads_active, written)
        if written:
            # ``y.add_(1)`` on a value that requires grad, or ``buf.copy_(x)`` that makes ``buf`` require
            # grad, changes the autograd graph in place; so does the write of an exposed part (``dropout_`` of a
            # view, in place: the backward would not see it). Writes outside autograd (the running statistics of
            # ``batch_norm``: ``_written`` leaves them out) are not differentiated in eager either.
            returned = {o.name for o in bsym.flat_proxy_outs}
            marked = bsym.uid not in exposed  # exposed parts carry no requires_grad marks
            for dst in written:
                if dst.name in active or (marked and dst.requires_grad) or (reads_active and dst.name in returned):
                    raise NotDifferentiable(f"{bsym.sym.print_name} updates a tensor that requires grad in place")
        if bsym.uid in exposed:
            if reads_active and bsym.sym.id not in NO_GRAD_RESULTS:
                active.update(o.name for o in _tensors(bsym.flat_proxy_outs) if _differentiable(o))
            continue
        for out in _tensors(bsym.flat_proxy_outs):
            if out.requires_grad and _differentiable(out):
                if not reads_active:
                    raise NotDifferentiable(
                        f"{out.name} (made by {bsym.sym.print_name}) requires grad but depends on no input that does"
                    )
                active.add(out.name)
    return stores


class Memory:
    """Which tensors of a forward may share memory (a view, ``detach``: ``_aliased_args``), and which calls taking
    part in autograd read or made each memory, so that an in-place update of memory eager's autograd saved is
    told apart (Note [What eager's autograd saves] in thunder.core.rules)."""

    def __init__(self):
        self._root: dict[str, str] = {}
        self._users: dict[str, list[tuple[BoundSymbol, str]]] = {}  # root -> (call, the name it read or made)

    def root(self, name: str) -> str:
        while (up := self._root.get(name, name)) != name:
            name = up
        return name

    def saved_by_autograd(self, name: str) -> bool:
        return any(_saves(call, used) for call, used in self._users.get(self.root(name), ()))

    def record(self, bsym: BoundSymbol, reads_active: bool, written: list[TensorProxy]) -> None:
        outs = _tensors(bsym.flat_proxy_outs)
        for arg in _aliased_args(bsym):
            for o in outs:
                joined, into = self.root(o.name), self.root(arg)
                if joined != into:
                    self._root[joined] = into
                    self._users.setdefault(into, []).extend(self._users.pop(joined, ()))
        if reads_active:
            # what the call writes itself (``batch_norm``'s running statistics) is not what it saves
            own = {self.root(d.name) for d in written}
            for t in (*_tensors(bsym.flat_proxy_args), *outs):
                if self.root(t.name) not in own:
                    self._users.setdefault(self.root(t.name), []).append((bsym, t.name))


def _saves(call: BoundSymbol, name: str) -> bool:
    """Whether eager's autograd keeps ``name``, an argument or result of ``call``, for its backward (where that is
    not known: yes)."""
    saved = eager_saves(call)
    return saved is None or name in saved


# Note [Stored values that require grad]
# ``self.cache = t``, ``outside_list.append(t)``, transformers' hidden-states collector: in eager
# the stored tensor carries its autograd history, and a loss computed from it later backpropagates
# into the parameters. A tensor made inside the autograd function's forward has none; the function's
# outputs do. So the replays from the first such store on (in order, replays only store references:
# nothing in the computation reads what they did) run after the autograd function, in ``rebuild``,
# and the values they store become outputs of the forward (with cotangents, like any output).
def _replays_after_the_function(
    body: list[BoundSymbol], stores: list[BoundSymbol]
) -> tuple[list[BoundSymbol], list[BoundSymbol]]:
    """``body`` without the replays from the first of ``stores`` on, and those replays."""
    if not stores:
        return body, []
    first = body.index(stores[0])
    late = [b for b in body[first:] if b.sym in REPLAYS]
    for b in late:
        if b.sym in OUTPUTS and any(isinstance(a, TensorProxy) for a in b.flat_proxy_args):
            # It would print after the forward, not where eager prints: a later in-place update shows.
            raise NotDifferentiable(
                f"{stores[0].sym.print_name} stores a value that requires grad, and a print of a tensor follows it"
            )
    moved = {id(b) for b in late}
    return [*body[:first], *(b for b in body[first:] if id(b) not in moved)], late


def _writes_into_arguments(bsym: BoundSymbol) -> list[TensorProxy]:
    """What a symbol that is not in place itself writes into its arguments through an in-place part (``embedding``
    with ``max_norm`` renormalises its weight: ``embedding_renorm_``)."""
    if not any(IN_PLACE in sub.sym.tags for sub in bsym.subsymbols):
        return []
    args = {a.name for a in bsym.flat_proxy_args}
    return [dst for dst in _destinations(bsym) if dst.name in args]


def written_in_place(bsym: BoundSymbol) -> list[TensorProxy]:
    """The tensors ``bsym`` writes in place, in autograd: the destinations of the ``prims.copy_`` it decomposes to
    (not of those with ``grad_enabled=False``, batch norm's statistics, nor of a copy onto itself: ``dropout_`` in eval)."""
    if bsym.sym is prims.copy_:
        src, dst = bsym.args
        return [dst] if bsym.kwargs.get("grad_enabled", True) and getattr(src, "name", None) != dst.name else []
    return [dst for sub in bsym.subsymbols for dst in written_in_place(sub)]


# Note [Views whose history eager rebuilds]
# A view shares its base's version counter. When the counter moved after the view's grad_fn was recorded (an
# in-place write into that memory through any alias: ``x.detach().mul_(3)``, the base itself), eager rebuilds the
# view's grad_fn from its base as an op reads it (``AsStridedBackward0`` into the base's history). That is the same
# gradient, except where the base does not require grad: ``x = b[1:].requires_grad_()`` is a leaf whose views have
# ``b`` for base, and the rebuilt history of ``x.expand(...)`` (an argument, or made in the program before the
# write) reaches nothing: eager drops that gradient. Thunder's autograd function takes its arguments' histories
# when it is called, before the program writes, and would send the gradient on. The trace tells which arguments
# the program writes into and reads after a write (``StaleReads``); only the tensors tell whether one is such a
# view: the call checks them (``thunder.executors.torch_autograd``) and raises a clear error.


# Symbols whose result shares its argument's memory but not its version counter (``x.data``)
_OWN_VERSION = frozenset({"torch.Tensor.data"})


@dataclass(frozen=True, slots=True)
class StaleReads:
    """Names of a forward's tensor arguments: those whose memory it writes in place; those an op that takes part in
    autograd reads after such a write; those of which such an op reads, after a write, a view made before it."""

    written: frozenset[str]
    read_after: frozenset[str]
    viewed_after: frozenset[str]


def stale_reads(trace: TraceCtx) -> StaleReads | None:
    """Note [Views whose history eager rebuilds]: what ``trace`` reads of its arguments after writing into their
    memory in place; None where it writes into none."""
    args = {a.name for a in trace.args if isinstance(a, TensorProxy)}
    family: dict[str, frozenset[str]] = {n: frozenset((n,)) for n in args}  # name -> the arguments it may share
    made_at: dict[str, int] = {}
    written: set[str] = set()
    read_after: set[str] = set()
    viewed_after: set[str] = set()
    last_write = -1
    for i, bsym in enumerate(trace.bound_symbols):
        if written:
            for a in _tensors(bsym.flat_proxy_args):
                if not a.requires_grad:
                    continue
                if a.name in args:
                    read_after.add(a.name)
                elif made_at.get(a.name, last_write) < last_write:
                    viewed_after.update(family[a.name])
        via = frozenset().union(*(family.get(n, ()) for n in _aliased_args(bsym)))
        for o in _tensors(bsym.flat_proxy_outs) if via and bsym.sym.id not in _OWN_VERSION else ():
            if o.name not in family:
                family[o.name], made_at[o.name] = via, i
        if mutates(bsym):
            hit = frozenset().union(*(family.get(d.name, ()) for d in _destinations(bsym)))
            if hit:
                written.update(hit)
                last_write = i
    if not written:
        return None
    return StaleReads(frozenset(written), frozenset(read_after), frozenset(viewed_after))


def _destinations(bsym: BoundSymbol) -> list[TensorProxy]:
    """Every tensor ``bsym`` writes in place (batch norm's statistics too)."""
    if bsym.sym is prims.copy_:
        return [bsym.args[1]]
    return [dst for sub in bsym.subsymbols for dst in _destinations(sub)]


def _input_grad(a, grads: _Gradients):
    """The gradient of input ``a``: None where no cotangent reached it (as in eager), zeros where
    only zeros did."""
    if not isinstance(a, TensorProxy):
        return None
    g = grads.get(a.name)
    if g is None and a.name in grads.reached:
        g = prims.full(a.shape, 0, device=a.device, dtype=a.dtype)
    return g


def _tensors(proxies) -> list[TensorProxy]:
    return [p for p in proxies if isinstance(p, TensorProxy)]


class _Gradients:
    """Cotangents by value name, summed as contributions arrive, and the values a cotangent
    reached at all: where every contribution was zero (``floor``'s rule returns None), eager's
    gradient is a tensor of zeros, not None (the value is part of the autograd graph)."""

    def __init__(self):
        self.by_name: dict[str, TensorProxy] = {}
        self.reached: set[str] = set()

    def add(self, value: TensorProxy, grad) -> None:
        self.reached.add(value.name)
        if grad is None:
            return
        if not isinstance(grad, TensorProxy) or grad.shape != value.shape or grad.dtype != value.dtype:
            got = f"{grad.dtype} {list(grad.shape)}" if isinstance(grad, TensorProxy) else repr(grad)
            raise ThunderError(
                f"a gradient rule returned {got} for {value.name}, a {value.dtype} {list(value.shape)}; "
                "rules must return gradients of exactly their arguments' shapes and dtypes (a bug in the rule)"
            )
        previous = self.by_name.get(value.name)
        self.by_name[value.name] = grad if previous is None else prims.add(previous, grad)

    def get(self, name: str):
        return self.by_name.get(name)


def _backprop(
    bsyms: list[BoundSymbol], grads: _Gradients, active: set[str], bw: TraceCtx, forward_top: bool,
    kept_regions: dict[int, BoundSymbol] | None = None,
) -> None:  # fmt: skip
    for bsym in reversed(bsyms):
        region = kept_regions.get(bsym.uid) if kept_regions else None
        if region is not None and any(o.name in grads.reached for o in _tensors(region.flat_proxy_outs)):
            with source_location_provider(lambda src=region.source: src):
                _rerun_kept_region(region, bw)
        read = {a.name for a in bsym.flat_proxy_args}
        outs = [o for o in _tensors(bsym.flat_proxy_outs) if o.name in active and o.name not in read]
        if bsym.sym.id in NO_GRAD_RESULTS:
            continue
        if not any(grads.get(o.name) is not None for o in outs):
            if any(o.name in grads.reached for o in outs):  # only zeros arrive: the inputs get zeros too
                grads.reached.update(a.name for a in bsym.flat_proxy_args if a.name in active)
            continue
        if forward_top:
            with source_location_provider(lambda src=bsym.source: src):
                start = len(bw.bound_symbols)
                _backprop_one(bsym, grads, active, bw)
            for new in bw.bound_symbols[start:]:
                new.lineage = (bsym.uid,)
                new.source = bsym.source
        else:
            _backprop_one(bsym, grads, active, bw)


def _backprop_one(bsym: BoundSymbol, grads: _Gradients, active: set[str], bw: TraceCtx) -> None:
    rule = grad_rules.get(bsym.sym)
    if rule is not None:
        args, kwargs = _positional(bsym, active)
        g = tree_map(lambda o: _cotangent_of(o, grads, active), bsym.output)
        with asking_grads(lambda x: isinstance(x, TensorProxy) and x.name in active):
            result = rule(g, bsym.output, *args, **kwargs)
        _accumulate(args, result, grads, active, bsym)
        return
    if not bsym.subsymbols:
        raise NotDifferentiable(f"{bsym.sym.print_name} has no gradient rule and no decomposition")
    parts = _recompute(bsym, grads, active, bw, rerun=RERUN in bsym.sym.tags)
    _backprop(parts, grads, active, bw, forward_top=False)


def _positional(bsym: BoundSymbol, active: set[str]) -> tuple[tuple, dict]:
    """The call's arguments with those passed by keyword moved into their positions
    (``F.layer_norm(x, shape, weight=w)``): rules return gradients by position."""
    if not any(isinstance(v, TensorProxy) and v.name in active for v in tree_leaves(bsym.kwargs)):
        return bsym.args, bsym.kwargs
    try:
        bound = inspect.signature(bsym.sym.meta).bind(*bsym.args, **bsym.kwargs)
        bound.apply_defaults()  # F.layer_norm(x, shape, bias=b): weight's default fills its place
    except (TypeError, ValueError):
        bound = None
    if bound is None or any(isinstance(v, TensorProxy) and v.name in active for v in tree_leaves(bound.kwargs)):
        raise NotDifferentiable(f"{bsym.sym.print_name} takes a tensor that requires grad as a keyword-only argument")
    return bound.args, bound.kwargs


def _cotangent_of(o, grads: _Gradients, active: set[str]):
    if not isinstance(o, TensorProxy):
        return None
    g = grads.get(o.name) if o.name in active else None
    if g is None and _differentiable(o):
        return prims.full(o.shape, 0, device=o.device, dtype=o.dtype)
    return g


def _accumulate(args, result, grads: _Gradients, active: set[str], bsym: BoundSymbol) -> None:
    if result is None:
        return
    # Entries past the positional arguments (a rule written for the whole signature, called with
    # some arguments by keyword) must be None.
    if not isinstance(result, (tuple, list)) or any(g is not None for g in result[len(args) :]):
        raise ThunderError(
            f"the gradient rule of {bsym.sym.print_name} returned {result!r}: expected a tuple with one entry per "
            f"positional argument ({len(args)})"
        )
    for a, g in zip(args, result):
        if isinstance(a, (tuple, list)):
            if g is not None:
                _accumulate(a, g, grads, active, bsym)
        elif isinstance(a, TensorProxy) and a.name in active:
            grads.add(a, g)  # None: reached, with a zero gradient


def _recompute(
    bsym: BoundSymbol, grads: _Gradients, active: set[str], bw: TraceCtx, rerun: bool = False
) -> list[BoundSymbol]:
    """Appends ``bsym``'s decomposition, down to symbols with rules, to the backward; returns the
    parts to differentiate.

    A part that makes only ``bsym``'s own outputs is not recomputed: the forward has its values
    (``torch.tanh``'s rule reads the forward's ``tanh``, as eager saves it). Other parts that
    produce some of them get fresh names (the forward value keeps its name; a trace defines each
    name once), and the cotangents follow the renaming. With ``rerun`` (a checkpointed region), its
    in-place updates and replays run again where they were (Note [What a recomputed region does again])."""
    reruns: set[int] | None = set() if rerun else None
    parts = _expand(bsym, active, reruns)
    own = {o.name for o in bsym.flat_proxy_outs}
    swap: dict[str, Proxy] = {}
    emitted = []
    for part in parts:
        if reruns is not None and id(part) in reruns:
            bw.bound_symbols.append(_rerun(part, swap, bw, bsym))
            continue
        outs = part.flat_proxy_outs
        if not swap and outs and all(o.name in own for o in outs):
            emitted.append(part.from_bsym(lineage=(bsym.uid,)))
            continue
        renamed = part.rename(swap) if swap else part
        for o in renamed.flat_proxy_outs:
            if o.name in own and o.name not in swap:
                swap[o.name] = o.replace_name(bw.safe_name(f"{o.name}_r"))
        renamed = renamed.rename(swap) if swap else renamed
        new = renamed.from_bsym(lineage=(bsym.uid,))
        bw.bound_symbols.append(new)
        emitted.append(new)
    for old, new_proxy in swap.items():
        active.add(new_proxy.name)
        g = grads.get(old)
        if g is not None:
            grads.by_name[new_proxy.name] = g
        if old in grads.reached:
            grads.reached.add(new_proxy.name)
    return emitted


def _refuse_lost_rerun(region: BoundSymbol, why: str, effect: str | None = None) -> None:
    """Raises where ``region`` (a checkpointed region, which eager runs again in the backward) does something
    outside itself (``effect``, by default the first one it does) that would not happen again as in eager here."""
    effect = effect or _effect_seen_outside(region)
    if effect is None:
        return
    where = region.source
    at = f" (its first op at {where.call_site or where})" if where is not None else ""
    raise ThunderRuntimeError(
        f"a checkpointed region{at} {effect}: eager's torch.utils.checkpoint runs the region again in the "
        f"backward, which does that again, but thunder.jit cannot run this region again: {why}. Move that out of "
        "the checkpointed function, or do not checkpoint it"
    )


def _effect_seen_outside(region: BoundSymbol) -> str | None:
    """What ``region`` does that its caller can see, besides returning values: an in-place update of memory it was
    given (batch norm's running statistics) or a replay (``print``, a store, a change to a list); None if nothing."""
    given = {a.name for a in region.flat_proxy_args}
    for sub in region.subsymbols:
        if sub.sym in REPLAYS:
            return f"does {sub.sym.print_name}"
        written = [d.name for d in _destinations(sub) if d.name in given]
        if written:
            return f"updates {written[0]} in place ({sub.sym.print_name})"
        if given & _aliased_args(sub):
            given.update(o.name for o in sub.flat_proxy_outs)
    return None


def _rerun(
    part: BoundSymbol, swap: dict[str, Proxy], bw: TraceCtx, region: BoundSymbol, renamed_into: dict | None = None
) -> BoundSymbol:
    """``part`` (an in-place update or a replay of ``region``) run again in the backward, reading the recomputed
    values: what it computes besides its writes gets fresh names (the recomputation for the gradient defines them),
    recorded in ``renamed_into`` if given."""
    renamed = part.rename(swap) if swap else part
    read = {a.name for a in renamed.flat_proxy_args}
    fresh = {
        o.name: o.replace_name(bw.safe_name(f"{o.name}_again")) for o in renamed.flat_proxy_outs if o.name not in read
    }
    renamed = renamed.rename(fresh) if fresh else renamed
    if renamed_into is not None:
        renamed_into.update(fresh)
    return renamed.from_bsym(lineage=(region.uid,))


def _rerun_kept_region(region: BoundSymbol, bw: TraceCtx) -> None:
    """Appends to the backward what a checkpointed region that the forward ran and kept (it draws random numbers)
    does again in eager's second run: its updates of memory it was given (BatchNorm's statistics), what reads that
    memory, and its replays; the rest reads the forward's values, which eager's second run makes again alike (it
    restores the random state) (Note [What a recomputed region does again])."""
    given = {a.name for a in region.flat_proxy_args}
    written = {d.name for sub in region.subsymbols for d in _destinations(sub) if d.name in given}
    swap: dict[str, Proxy] = {}
    for sub in region.subsymbols:
        writes = any(d.name in given for d in _destinations(sub))
        if sub.sym in REPLAYS and sub.sym not in _RERUNNABLE_REPLAYS:
            why = "it would store the values of the first run again, not those the second run computes"
            _refuse_lost_rerun(region, why, f"does {sub.sym.print_name}")
        if writes or sub.sym in REPLAYS or any(a.name in written for a in sub.flat_proxy_args):
            if draws(sub):
                why = "it draws random numbers from what it updates, which its forward, kept, cannot draw again"
                _refuse_lost_rerun(region, why)
            bw.bound_symbols.append(_rerun(sub, swap, bw, region, swap))
            if not writes:  # what reads the updated memory (``1 / num_batches_tracked``) is made again, but not
                # what an update computes besides (batch norm's result in training reads no statistics)
                written.update(o.name for o in sub.flat_proxy_outs)
        if given & _aliased_args(sub):
            given.update(o.name for o in sub.flat_proxy_outs)


# Note [What a recomputed region does again]
# Eager's ``torch.utils.checkpoint`` (reentrant or not) runs a region's forward again in the backward, before the
# region's gradients and after those of what came later (regions go in reverse order). So what the region does
# besides computing happens twice a step: a BatchNorm in training updates its running statistics again
# (``num_batches_tracked`` goes up by 2; the second momentum update starts from the first's result, with the same
# batch statistics; ``momentum=None``'s factor is 1 / the new count), an in-place update of a value made inside
# is made again (later ops read the updated value), and ``print``/``LOG.append`` run again. The backward's
# recomputation of a ``checkpoint`` symbol (tagged ``RERUN``) therefore emits each in-place op of the region whole
# (batch_norm runs as torch's own kernel: eager's numbers), and each output or container replay, where it was in
# the region, reading the recomputed values; its other results get fresh names. A region that draws random
# numbers is not recomputed (the forward keeps its values, which eager's second run makes again alike: it restores
# the random state): the backward runs again only its updates of memory it was given, what reads that memory
# (``momentum=None``'s factor) and its replays (``_rerun_kept_region``). The buffers it updates are
# handed to the backward as they are when it runs (``ForwardBackward.rewritten``): a second call before the
# backward moved them on, as in eager. A region that updates nothing recomputes only what the gradient needs.
# Where the region cannot run again as eager's, a ``ThunderRuntimeError`` at trace time names it and what it does
# (``_refuse_lost_rerun``), instead of a silent difference: a store (``self.calls += 1``: the replay would store the
# first run's value again), a random draw from updated memory in a kept region, and a program that runs under
# torch's autograd (which runs the region once).
# A replay's values are the first run's; a region that changes an outside container it reads (``LOG.append(len(LOG))``,
# where eager's second run appends one more) is refused when traced (``_refuse_container_changes_in_region``); a
# printed tensor shows no grad_fn.

#: The replays a recomputed region makes again (Note [What a recomputed region does again]); a store would store
#: the values of the forward again, where eager's second run may compute others (``self.calls += 1``).
_RERUNNABLE_REPLAYS = OUTPUTS | {prims.container_call}


def _expand(bsym: BoundSymbol, active: set[str], reruns: set[int] | None = None) -> list[BoundSymbol]:
    """``bsym``'s subsymbols, each replaced by its own subsymbols until it has a rule (or needs
    no gradient); marks the intermediates that require grad in ``active``. In-place writes and other
    side effects are left out: they happened in the forward. An op that also computes values
    (``batch_norm`` in training updating its running statistics, ``x.add_(1)``) is replaced by its
    decomposition without the writes, so what it computes is still recomputed and differentiated.
    With ``reruns`` (a set: a checkpointed region), each in-place update and replay also comes whole,
    after what it computes, and its ``id`` is added to ``reruns`` (Note [What a recomputed region does again])."""
    out: list[BoundSymbol] = []
    for sub in bsym.subsymbols:
        if sub.sym.tags & {IN_PLACE, DONT_DCE}:
            if IN_PLACE in sub.sym.tags and sub.subsymbols:
                out.extend(_expand(sub, active))
            if reruns is not None and sub.sym in REPLAYS and sub.sym not in _RERUNNABLE_REPLAYS:
                why = "it would store the values of the first run again, not those the second run computes"
                _refuse_lost_rerun(bsym, why, f"does {sub.sym.print_name}")
            if reruns is not None and (IN_PLACE in sub.sym.tags or sub.sym in REPLAYS):
                reruns.add(id(sub))
                out.append(sub)
            continue  # a side effect happens once, in the forward (but in a checkpointed region)
        reads_active = any(a.name in active for a in sub.flat_proxy_args)
        needs = reads_active and sub.sym.id not in NO_GRAD_RESULTS
        # Down to symbols with rules even where no gradient is needed: a decomposition may call a
        # torch-language symbol with arguments its torch function refuses (it never ran whole before).
        if grad_rules.get(sub.sym) is None and sub.subsymbols:
            out.extend(_expand(sub, active, reruns))
            continue
        if needs:
            for o in _tensors(sub.flat_proxy_outs):
                if _differentiable(o):
                    active.add(o.name)
        out.append(sub)
    return out


def _refs(leaf, by_name: dict) -> list:
    """The named values ``leaf`` refers to: itself if a proxy; the symbols of a symbolic number
    (``n * 2`` refers to the input ``n``, see ``thunder.core.symbolic``)."""
    if isinstance(leaf, Proxy):
        return [leaf]
    if is_symbolic(leaf):  # and the proxies defining its data-dependent sizes (Note [Symbolic data-dependent sizes])
        return [by_name[n] for n in sorted(leaf.names) if n in by_name] + list(leaf.proxies)
    return []


def _free_values(bsyms: list[BoundSymbol], given: set[str], by_name: dict) -> list:
    """Values the bound symbols read before (or without) defining them, in first-use order."""
    defined = set(given)
    free: dict[str, object] = {}
    for bsym in bsyms:
        for leaf in bsym.flat_args:
            for a in _refs(leaf, by_name):
                if a.name not in defined and a.name not in free:
                    free[a.name] = a
        defined.update(o.name for o in bsym.flat_proxy_outs)
    return list(free.values())


def record_vjp(body: list[BoundSymbol], primals: list, outputs: list, cotangents: list) -> list:
    """Records into the current trace the pullback of ``body`` (bound symbols of the current trace,
    which computed ``outputs`` from ``primals``) applied to ``cotangents``; returns one gradient per
    primal (zeros for a floating tensor that ``outputs`` do not depend on, None for anything else).

    Every floating tensor among ``primals`` is differentiated, whether or not it requires grad: this
    is ``vjp`` of a function, not torch's autograd."""
    active = {p.name for p in primals if _differentiable(p)}
    for bsym in body:
        if any(a.name in active for a in bsym.flat_proxy_args):
            if IN_PLACE in bsym.sym.tags:
                raise NotDifferentiable(f"vjp: {bsym.sym.print_name} updates a tensor in place")
            if bsym.sym.id not in NO_GRAD_RESULTS:
                active.update(o.name for o in _tensors(bsym.flat_proxy_outs) if _differentiable(o))
    trace = get_tracectx()
    grads = _Gradients()
    for o, c in zip(outputs, cotangents):
        if isinstance(o, TensorProxy) and o.name in active and c is not None:
            grads.add(o, c)
    _backprop(body, grads, active, trace, forward_top=True)
    result = []
    for p in primals:
        g = grads.get(p.name) if isinstance(p, TensorProxy) else None
        if g is None and _differentiable(p):
            g = prims.full(p.shape, 0, device=p.device, dtype=p.dtype)
        result.append(g)
    return result
