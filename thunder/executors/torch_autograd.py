"""Connects a compiled forward and backward to ``torch.autograd``.

One ``torch.autograd.Function`` runs the forward callable and saves what the backward reads;
its backward runs the backward callable. So ``loss.backward()`` after a jitted call fills the
``.grad`` of parameters and inputs; saved tensors are freed after the backward unless
``retain_graph=True``, and a second backward then fails as in eager; changing a saved tensor
in place before the backward fails with torch's own error (its version counter); and double
backward (``create_graph=True``) fails clearly.

Layer: executors. Imports: core, torch.
"""

from __future__ import annotations

import sys
import weakref
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from thunder.core import prims
from thunder.core.errors import ThunderRuntimeError
from thunder.core.prims.base import is_differentiable
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import PARAMETER
from thunder.core.trace import NO_GRAD_RESULTS
from thunder.core.transforms import ForwardBackward
from thunder.core.transforms.autodiff import stale_reads

__all__ = ["AutogradPlan", "autograd_callable"]


@dataclass(frozen=True, slots=True)
class AutogradPlan:
    """What one cache entry's autograd function runs, and where each value goes."""

    forward: Callable  # (*inputs) -> (outputs, saved)
    backward: Callable  # (*saved, *cotangents) -> one gradient or None per input
    rebuild: Callable  # (*outputs) -> what the program returns
    saved_is_tensor: tuple[bool, ...]
    tensor_outputs: tuple[int, ...]  # positions of the tensors among the outputs
    differentiable_outputs: tuple[bool, ...]  # per tensor output: does it require grad
    output_is_input: tuple[int | None, ...]  # per output: the input it is, returned as is
    grad_positions: tuple[int | None, ...] | None  # per input: where the backward returns its gradient (None: as is)
    direct: str | None  # "tensor" or "tuple" when the program returns what the function returns, as is
    saves: str  # "nothing", "tensors" or "mixed" (tensors and numbers)
    all_differentiable: bool  # every tensor output requires grad (nothing to mark)
    tensor_inputs: bool  # every input is a tensor (no symbolic numbers)
    # Per traced input, the tensor outputs whose cotangents reach it; None with one tensor output
    # (then backward only runs with its cotangent). Note [Gradients that reach nothing].
    reaches: tuple[frozenset[int], ...] | None
    # Inputs that no op reads, only passed on (a stored list's old items): given to the function
    # detached, so that a backward does not reach into their own (maybe freed) graphs.
    passed_on: tuple[int, ...]
    # Per tensor output: whether the backward takes None for its cotangent (Note [Absent cotangents]
    # in thunder.transforms.absent_cotangents); the others are zeros when absent.
    absent_ok: tuple[bool, ...]
    # Per tensor output, the other tensor outputs computed from it differentiably (Note [Outputs that feed other
    # outputs]); None when no output feeds another.
    feeds: tuple[frozenset[int], ...] | None = None
    # Positions of the inputs the forward writes into in place, of those it reads after a write, and of those of
    # which it reads a view made before a write, after it (Note [Views whose history eager rebuilds]); None when
    # it writes into no input.
    stale: tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[str, ...]] | None = None
    # The positions of the saved values that are views, once the first call found them (Note [Saving views for
    # backward]): a list holding one tuple.
    saved_views: list = field(default_factory=list)
    # Per set of absent cotangents (positions), the backward that leaves out what only they feed and, per tensor
    # output, whether it takes None for its cotangent; made on first use by ``variant`` (Note [Backward without the
    # cotangents that are absent] in thunder.transforms.absent_cotangents); None where there is none for the set.
    variant: Callable[[frozenset[int]], tuple[Callable, tuple[bool, ...]] | None] | None = None
    variants: dict = field(default_factory=dict)


class ThunderFunction(torch.autograd.Function):
    """The compiled forward and backward of one cache entry, as one autograd node."""

    @staticmethod
    def forward(ctx, plan: AutogradPlan, holder: list, *inputs):
        outputs, saved = plan.forward(*inputs)
        ctx.plan = plan
        # Note [Saving views for backward]: a view saved by a Function keeps its base's autograd history, which for
        # a view of an output is this node: a cycle through C++ that nothing collects, so each call's outputs leaked.
        # Saved detached (the version counter is shared: in-place changes are still caught), as lightning-thunder's
        # ThunderFunction does; the backward is never differentiated (see ``backward``), so nothing is lost. Which
        # saved values are views is the trace's doing (views of its outputs): found on the first call, for the rest.
        views = plan.saved_views
        if not views:
            views.append(tuple(i for i, s in enumerate(saved) if type(s) is torch.Tensor and s._base is not None))
        if views[0]:
            saved = list(saved)
            for i in views[0]:
                saved[i] = saved[i].detach()
        if plan.saves == "tensors":
            ctx.save_for_backward(*saved)
        elif plan.saves == "mixed":
            ctx.save_for_backward(*(s for s, is_tensor in zip(saved, plan.saved_is_tensor) if is_tensor))
            ctx.others = [s for s, is_tensor in zip(saved, plan.saved_is_tensor) if not is_tensor]
        if plan.direct is not None:
            result = outputs
        else:
            holder.append(outputs)
            result = tuple(outputs[i] for i in plan.tensor_outputs)
        if not plan.all_differentiable:
            ctx.mark_non_differentiable(*(t for t, d in zip(result, plan.differentiable_outputs) if not d))
        if plan.reaches is not None:
            ctx.set_materialize_grads(False)
            ctx.like = [(t.shape, t.dtype, t.device) for t in (result if type(result) is tuple else (result,))]
        if plan.feeds is not None:
            ctx.outputs = [weakref.ref(t) if fed else None for t, fed in zip(result, plan.feeds)]
        return result

    @staticmethod
    def backward(ctx, *cotangents):
        if torch.is_grad_enabled():  # the engine runs a backward with grad on only for create_graph=True
            raise RuntimeError(
                "double backward through a function compiled by thunder.jit is not supported yet: its backward "
                "trace is not itself differentiated. Call backward/autograd.grad without create_graph=True, or "
                "jit with disable_torch_autograd=True and differentiate the eager function instead."
            )
        plan = ctx.plan
        if plan.feeds is not None:
            _refuse_partial_gradients(ctx.outputs, plan.feeds, cotangents)
        if plan.saves != "mixed":
            saved = ctx.saved_tensors
        else:
            tensors, others = iter(ctx.saved_tensors), iter(ctx.others)
            saved = [next(tensors) if is_tensor else next(others) for is_tensor in plan.saved_is_tensor]
        unreached = None
        backward = plan.backward
        if plan.reaches is not None and any(c is None for c in cotangents):
            missing = {j for j, c in enumerate(cotangents) if c is None}
            unreached = [r <= missing for r in plan.reaches]
            absent_ok = plan.absent_ok
            if plan.variant is not None and not all(absent_ok[j] for j in missing):
                key = frozenset(missing)
                variant = plan.variants.get(key, _UNMADE)
                if variant is _UNMADE:  # two threads may both make it: the same function
                    variant = plan.variants.setdefault(key, plan.variant(key))
                if variant is not None:
                    backward, absent_ok = variant
            cotangents = [
                torch.zeros(shape, dtype=dtype, device=device) if c is None and not ok else c
                for c, ok, (shape, dtype, device) in zip(cotangents, absent_ok, ctx.like)
            ]
        grads = backward(*saved, *cotangents)
        if unreached is not None:  # as in eager: no gradient (None) where no cotangent arrives
            grads = [None if u else g for g, u in zip(grads, unreached)]
        if plan.grad_positions is not None:
            grads = [None if i is None else grads[i] for i in plan.grad_positions]
        return (None, None, *grads)


_UNMADE = object()  # a variant not made yet


def make_plan(
    fb: ForwardBackward, inputs: list, forward: Callable, backward: Callable, rebuild: Callable,
    absent_ok: tuple[bool, ...] | None = None, variant: Callable | None = None,
) -> AutogradPlan:  # fmt: skip
    """``inputs``: the compiled forward's parameters (the prologue may pass fewer symbolic sizes
    than were traced, see ``Tracer.finish_prologue``); the backward returns a gradient per traced input;
    ``absent_ok``: per tensor output, whether the backward takes None for its cotangent (default: none may)."""
    outputs = fb.outputs
    tensor_outputs = tuple(i for i, p in enumerate(outputs) if isinstance(p, TensorProxy))
    names = [getattr(a, "name", None) for a in inputs]
    input_position = {n: i for i, n in enumerate(names) if n is not None}
    traced = {getattr(a, "name", None): i for i, a in enumerate(fb.forward.args)}
    grad_positions = tuple(traced.get(n) if n is not None else None for n in names)
    # what the backward updates in place is kept as is, not checked for changes (``ForwardBackward.rewritten``)
    saved_is_tensor = tuple(isinstance(s, TensorProxy) and s.name not in fb.rewritten for s in fb.saved)
    return AutogradPlan(
        forward=forward,
        backward=backward,
        rebuild=rebuild,
        saved_is_tensor=saved_is_tensor,
        tensor_outputs=tensor_outputs,
        differentiable_outputs=tuple(bool(outputs[i].requires_grad) for i in tensor_outputs),
        output_is_input=tuple(input_position.get(p.name) for p in outputs),
        grad_positions=None if grad_positions == tuple(range(len(fb.forward.args))) else grad_positions,
        direct=_direct(fb, outputs, input_position),
        all_differentiable=all(outputs[i].requires_grad for i in tensor_outputs),
        saves="nothing" if not fb.saved else "tensors" if all(saved_is_tensor) else "mixed",
        tensor_inputs=all(isinstance(a, TensorProxy) for a in inputs),
        reaches=_reaches(fb, tensor_outputs) if len(tensor_outputs) > 1 else None,
        passed_on=_passed_on(fb, names),
        absent_ok=absent_ok if absent_ok is not None else (False,) * len(tensor_outputs),
        feeds=_feeds(fb, tensor_outputs, input_position) if len(tensor_outputs) > 1 else None,
        stale=_stale(fb, names, input_position),
        variant=variant if len(tensor_outputs) > 1 else None,
    )


def _stale(fb: ForwardBackward, names: list, input_position: dict) -> tuple | None:
    """``AutogradPlan.stale``, from the names of the compiled forward's parameters."""
    reads = stale_reads(fb.forward)
    if reads is None or not (reads.read_after or reads.viewed_after):
        return None

    def positions(found: frozenset[str]) -> tuple[int, ...]:
        return tuple(input_position[n] for n in sorted(found) if n in input_position)

    return positions(reads.written), positions(reads.read_after), positions(reads.viewed_after), tuple(names)


def _refuse_rebuilt_view_histories(stale: tuple, inputs: tuple) -> None:
    """Note [Views whose history eager rebuilds]: raises where eager would drop the gradient of an input view
    (or of a view of it made before the write) whose base does not require grad, read after the program
    wrote into its memory."""
    written, read_after, viewed_after, names = stale
    memory = {inputs[i].untyped_storage().data_ptr() for i in written}
    for i in sorted({*read_after, *viewed_after}):
        t = inputs[i]
        if (
            t.requires_grad
            and t._is_view()
            and not t._base.requires_grad
            and (i in viewed_after or not t.is_leaf)
            and t.untyped_storage().data_ptr() in memory
        ):
            raise ThunderRuntimeError(
                f"thunder.jit: argument {names[i]!r} is a view of a tensor that does not require grad (as "
                "`b[1:].requires_grad_()` makes), and the program reads it or a view of it after writing into its "
                "memory in place (through `detach()`, the base or another view). Eager then rebuilds that view's "
                "autograd history from its base and drops its gradient; thunder's cannot. Pass a tensor that "
                "requires grad on its own (`b[1:].detach().requires_grad_()`) or write into a clone."
            )


def _passed_on(fb: ForwardBackward, names: list) -> tuple[int, ...]:
    """Positions (among ``names``, the compiled forward's parameters) of the tensors that require
    grad and that no op of the forward reads."""
    read = {a.name for b in fb.forward.bound_symbols[:-1] if PARAMETER not in b.sym.tags for a in b.flat_proxy_args}
    args = {a.name: a for a in fb.forward.args if isinstance(a, TensorProxy)}
    return tuple(i for i, n in enumerate(names) if n in args and args[n].requires_grad and n not in read)


# Note [Gradients that reach nothing]
# One autograd function stands for the whole program, so torch's engine calls its backward when
# any output gets a gradient, and (with materialized gradients) gives zeros for the others. Eager
# leaves ``.grad`` None on a parameter that only feeds outputs the loss does not use (the engine
# never reaches it); optimizers treat None and zeros differently (weight decay, momentum). So with
# several outputs the cotangents are not materialized: an absent one is zeros for the backward
# trace, and an input that only absent ones reach gets None.
def _reaches(fb: ForwardBackward, tensor_outputs: tuple[int, ...]) -> tuple[frozenset[int], ...]:
    """Per traced input, the positions (among the tensor outputs) of the outputs its gradient flows back from:
    the forward's data flow at the level of the ops' decompositions, through values of a differentiable dtype.
    ``kv.new_zeros(...)`` (a ``full``) or ``kv > 0`` (a bool) read ``kv`` but lead no gradient back to it (a
    DeepSeek-V4 parameter that fed only its unused cache got zeros instead of None)."""
    depends: dict[str, int] = {a.name: 1 << i for i, a in enumerate(fb.forward.args) if hasattr(a, "name")}
    _flow(fb.forward.bound_symbols, depends, fb.updated)
    masks = [depends.get(fb.outputs[i].name, 0) for i in tensor_outputs]
    return tuple(frozenset(j for j, m in enumerate(masks) if m >> i & 1) for i in range(len(fb.forward.args)))


def _flow(bsyms, depends: dict[str, int], updated: dict[str, str] | None = None) -> set[str]:
    """Adds to ``depends`` (name -> inputs it derives from, a bit each) what ``bsyms`` compute; returns the names
    they define. An op with a decomposition (not an executor's own, whose parts only describe its shapes) flows
    through its parts; an output its parts do not define gets what the op reads, as a whole. What an op whose
    results never require grad makes (``detach``, ``zeros_like``), and what an op run with grad off makes
    (``with torch.no_grad():``), leads no gradient back. ``updated``: the values that stand for a tensor updated in
    place (``ForwardBackward.updated``), which keep what the tensor derived from: eager's in-place node (``r.zero_()``
    of ``r = x.clone()``) sends its (zero) gradient on to ``x``."""
    defined: set[str] = set()
    grad = True
    for bsym in bsyms:
        if bsym.sym is prims.set_grad_enabled:
            grad = bsym.args[0] is not False
            continue
        if grad:
            defined |= _flow_one(bsym, depends)
        else:
            defined.update(o.name for o in bsym.flat_proxy_outs)
        for o in bsym.flat_proxy_outs if updated else ():
            if (old := updated.get(o.name)) is not None and depends.get(old):
                depends[o.name] = depends.get(o.name, 0) | depends[old]
    return defined


def _flow_one(bsym, depends: dict[str, int]) -> set[str]:
    """``_flow`` of one op run with grad on."""
    outs = bsym.flat_proxy_outs
    if bsym.sym.id in NO_GRAD_RESULTS:
        return {o.name for o in outs}
    defined: set[str] = set()
    if bsym.subsymbols and bsym.sym.executor is None:
        defined = _flow(bsym.subsymbols, depends)
        outs = [o for o in outs if o.name not in defined]
    mask = 0
    for a in bsym.flat_proxy_args if outs else ():
        mask |= depends.get(a.name, 0)
    for o in outs:
        defined.add(o.name)
        if mask and (not isinstance(o, TensorProxy) or is_differentiable(o)):
            depends[o.name] = depends.get(o.name, 0) | mask
    return defined


# Note [Outputs that feed other outputs]
# ``h = x * 2; return h, h.sin()``: one autograd node stands for the whole program, so the gradient that reaches
# ``h`` through ``h.sin()`` is computed inside its backward, after torch's engine has run the hooks on ``h`` and
# filled ``h.grad`` (``retain_grad``) with the part that came from outside. Eager runs them on the sum. (torch.compile
# has the same gap.) A hook on such an output would see a partial gradient, a silent wrong result, so the backward
# refuses it with an error that names the output and says how to get eager's gradient: two jitted functions, cut at
# that output. ``torch.autograd.grad(loss, h)`` cannot be caught this way (the node's backward does not run), and
# gets the partial gradient.
def _feeds(
    fb: ForwardBackward, tensor_outputs: tuple[int, ...], input_position: dict
) -> tuple[frozenset[int], ...] | None:
    """Per tensor output, the positions (among the tensor outputs) of the others computed from it differentiably;
    None when there are none. An output that is an input is the caller's tensor, whose hooks see the whole sum."""
    names = [fb.outputs[i].name for i in tensor_outputs]
    depends = {n: 1 << k for k, n in enumerate(names) if n not in input_position}
    if not depends:
        return None
    _flow(fb.forward.bound_symbols, depends)
    masks = [depends.get(n, 0) for n in names]
    feeds = tuple(frozenset(j for j, m in enumerate(masks) if j != k and m >> k & 1) for k in range(len(names)))
    return feeds if any(feeds) else None


def _refuse_partial_gradients(outputs: list, feeds: tuple[frozenset[int], ...], cotangents: tuple) -> None:
    """Note [Outputs that feed other outputs]: raises where a hook or ``retain_grad`` on an output saw only the
    gradient from outside while outputs computed from it got cotangents too."""
    for k, (ref, fed) in enumerate(zip(outputs, feeds)):
        t = ref() if ref is not None else None
        if t is None or not (t.retains_grad or _users_hooks(t)):
            continue
        if any(cotangents[j] is not None for j in fed):
            raise RuntimeError(
                f"thunder.jit: the compiled function's returned tensor #{k} (shape {tuple(t.shape)}) has a hook or "
                f"retain_grad(), and its returned tensor(s) #{', #'.join(map(str, sorted(fed)))} are computed from it: "
                "the gradient through those is added inside the compiled backward, after the hook ran, so the hook "
                "would see only part of eager's gradient. Jit the code that makes this tensor and the code that uses "
                "it as two functions, or hook a tensor that no other returned tensor is computed from."
            )


def _users_hooks(t: torch.Tensor) -> bool:
    hooks = t._backward_hooks
    return bool(hooks) and any(not isinstance(h, _FedWatch) for h in hooks.values())


# Note [Gradients asked of an output that feeds others]
# ``torch.autograd.grad(logits.sum(), h)`` (or ``backward(inputs=[h])``) takes ``h``'s gradient where torch's engine
# collects it, at the node's input, and then need not run the node: the part through ``logits`` (Note [Outputs that
# feed other outputs]) is never added, and the result is None ("not used in the graph") or the part from outside.
# So a call whose outputs feed others hooks the ones they feed: when one of those gets a cotangent, the hook asks the
# engine whether it will run the node (it will run it when it will run, or collect the gradient of, anything the node
# leads to: ``_will_engine_execute_node`` on its next nodes, which refuses, and so answers yes, for a leaf whose
# gradient ``autograd.grad`` collects). A node reached and not run is one an output of which was asked for: the hook
# raises there. Where the node's backward runs as well (``autograd.grad(loss, [h, w])``) the gradient taken for
# ``h`` is still partial: the engine takes it before it runs the node's tensor hooks and backward, and
# ``_will_engine_execute_node`` answers "needed or collected" in one bit (it refuses only for a node with no next
# edges, which ours never is), so a node that both runs and has an output collected looks like one that only runs
# (``autograd.grad(loss, [w])``, which must work). So the hook also looks at the backward in flight on its thread:
# torch's ``_engine_run_backward`` (which ``autograd.grad`` and ``backward(inputs=...)`` call) holds the tensors and
# gradient edges whose gradients it collects (``_collects_gradient_of``), and one of them being such an output is the
# same error. Where the engine runs the node on a device thread of its own (CUDA), no such frame is on that thread:
# the backwards in flight on all threads are looked at (another thread asking for this very tensor's gradient at the
# same moment would be refused too). Eager's gradient needs the backward split at such an output (two autograd
# nodes, the part after ``h`` adding into ``h``'s input before the engine collects it).
class _FedWatch:
    """A tensor hook on one call's output that other outputs feed (the Note above)."""

    __slots__ = ("node", "k", "feeding")

    def __init__(self, node: object, k: int, feeding: tuple[int, ...]):
        self.node, self.k, self.feeding = node, k, feeding  # this output, and the outputs it is computed from

    def __call__(self, grad: torch.Tensor | None) -> None:
        if grad is None:
            return
        if not _will_run(self.node) or _collects_gradient_of(self.node, self.feeding):
            raise RuntimeError(
                f"thunder.jit: a gradient was asked of the compiled function's returned tensor(s) "
                f"#{', #'.join(map(str, self.feeding))} (or of another returned tensor beside them) while returned "
                f"tensor #{self.k}, computed from them, carries gradient too: torch.autograd.grad(..., inputs=[...]) "
                "stops at the compiled function's one autograd node, so the part through the tensors computed from "
                "them would be missing from eager's gradient. Jit the code that makes such a tensor and the code that "
                "uses it as two functions, or ask for the gradient of an input of the compiled function instead."
            )


def _collects_gradient_of(node, positions: tuple[int, ...]) -> bool:
    """Whether the backward in flight (``autograd.grad``, ``backward(inputs=...)``) collects the gradient of an
    output of ``node`` at one of ``positions`` (the Note above): the one that called the engine on this thread, or,
    on an engine's device thread, any in flight on another thread."""
    f = _engine_call(sys._getframe(1))
    if f is not None:
        return _collects(f, node, positions)
    return any(
        _collects(f, node, positions)
        for f in map(_engine_call, sys._current_frames().values())  # (this thread's is in, and has none)
        if f is not None
    )


def _engine_call(f):
    """The frame of torch's ``_engine_run_backward`` on the stack of frame ``f``, or None."""
    while f is not None and f.f_code is not _ENGINE_RUN_BACKWARD:
        f = f.f_back
    return f


def _collects(f, node, positions: tuple[int, ...]) -> bool:
    args = f.f_locals.get("args")  # (grad_tensors, retain_graph, create_graph, inputs, ...)
    inputs = args[3] if type(args) is tuple and len(args) > 3 else None
    for i in inputs if isinstance(inputs, (tuple, list)) else ():
        if isinstance(i, torch.Tensor):
            found, nr = i.grad_fn, i.output_nr
        else:  # a GradientEdge
            found, nr = getattr(i, "node", None), getattr(i, "output_nr", None)
        if found is node and nr in positions:
            return True
    return False


# torch's own Python entry to the engine (torch 2.4 on); where a torch has none, no frame matches and only the
# engine's answer above is used.
_ENGINE_RUN_BACKWARD = getattr(getattr(torch.autograd.graph, "_engine_run_backward", None), "__code__", None)


def _will_run(node) -> bool:
    for n, _ in node.next_functions:
        if n is not None:
            try:
                if _will_engine_execute_node(n):
                    return True
            except RuntimeError:  # a leaf whose gradient autograd.grad collects
                return True
    return False


_will_engine_execute_node = torch._C._will_engine_execute_node
_grad_enabled = torch.is_grad_enabled


def _watch_fed_outputs(watched: tuple[tuple[int, tuple[int, ...]], ...], tensors: tuple) -> None:
    """Note [Gradients asked of an output that feeds others]: a hook on each output of one call that others feed.
    Set as ``Tensor.register_hook`` sets one, without its handle (which cost a small training step 5 us): the tensors
    are new, and a hook the user adds later joins the same dict."""
    node = tensors[watched[0][0]].grad_fn
    for k, feeding in watched:
        t = tensors[k]
        t._backward_hooks = OrderedDict(thunder=_FedWatch(node, k, feeding))
        node._register_hook_dict(t)


def _direct(fb: ForwardBackward, outputs: list, input_position: dict) -> str | None:
    """Whether the program returns one tensor, or a tuple of distinct tensors, none an input: then
    the autograd function's own result is what the program returns (the common case, kept cheap)."""
    if not outputs or any(not isinstance(p, TensorProxy) or p.name in input_position for p in outputs):
        return None
    (value,) = fb.rebuild.bound_symbols[-1].args
    if value is outputs[0] and len(outputs) == 1:
        return "tensor"
    if type(value) is tuple and len(value) == len(outputs) and all(v is p for v, p in zip(value, outputs)):
        return "tuple"
    return None


# ``ThunderFunction.apply`` without the Python layer of ``Function.apply`` (argument binding and
# a pytree walk to unwrap dead functorch wrappers: a third of a small call's cost) is torch's C
# entry, with dead wrappers unwrapped here; under functorch transforms, the whole of it.
_c_apply = super(torch.autograd.Function, ThunderFunction).apply
_functorch_active = torch._C._are_functorch_transforms_active
_unwrap_if_dead = torch._C._functorch.unwrap_if_dead


def _apply_under_functorch(plan: AutogradPlan, holder: list | None, *inputs):
    """``ThunderFunction.apply`` under a torch.func transform: one that differentiates (``torch.func.grad`` of a
    jitted module through ``functional_call``) needs the function's own rules for it, which it has not; torch's
    error spoke of a ``setup_context`` the user never wrote."""
    try:
        return ThunderFunction.apply(plan, holder, *inputs)
    except RuntimeError as e:
        if "setup_context" not in str(e):
            raise
        raise RuntimeError(
            "torch.func transforms that differentiate (torch.func.grad, vjp, jacrev, ...) are not supported over a "
            "function compiled by thunder.jit: its backward is thunder's, not a torch.func rule. Take the gradient of "
            "the jitted function's result with torch.autograd.grad (for a jitted module's parameters: "
            "torch.func.functional_call(jitted, params, args) with params that require grad), or apply the transform "
            "to the eager function."
        ) from None


def _applier(plan: AutogradPlan) -> Callable:
    """``apply(plan, holder, *inputs)``: ``ThunderFunction.apply`` through torch's C entry."""
    if plan.tensor_inputs:

        def apply(plan, holder, *inputs):
            if _functorch_active():
                return _apply_under_functorch(plan, holder, *inputs)
            return _c_apply(plan, holder, *map(_unwrap_if_dead, inputs))

    else:

        def apply(plan, holder, *inputs):
            if _functorch_active():
                return _apply_under_functorch(plan, holder, *inputs)
            return _c_apply(plan, holder, *(_unwrap_if_dead(x) if isinstance(x, torch.Tensor) else x for x in inputs))

    return apply


def autograd_callable(plan: AutogradPlan) -> Callable:
    """The entry's computation: runs the autograd function and returns the program's result.

    An output that is an input returned unchanged is the caller's own object, as in eager."""
    if plan.direct == "tensor" and plan.tensor_inputs and plan.stale is None:
        # The commonest case (a loss from tensors), one Python frame above torch's C entry.
        def computation(*inputs):
            if _functorch_active():
                return _apply_under_functorch(plan, None, *inputs)[0]
            return _c_apply(plan, None, *map(_unwrap_if_dead, inputs))[0]

        return computation
    apply = _applier(plan)
    if plan.stale is not None:
        unchecked = apply

        def apply(plan, holder, *inputs):
            _refuse_rebuilt_view_histories(plan.stale, inputs)
            return unchecked(plan, holder, *inputs)

    feeds = plan.feeds
    if feeds is not None:
        unwatched = apply
        watched = tuple(
            (j, tuple(k for k, fed in enumerate(feeds) if j in fed))
            for j, d in enumerate(plan.differentiable_outputs)
            if d and any(j in fed for fed in feeds)
        )

        def apply(plan, holder, *inputs):
            tensors = unwatched(plan, holder, *inputs)
            if watched and _grad_enabled():
                _watch_fed_outputs(watched, tensors)
            return tensors

    if plan.direct == "tensor":
        return lambda *inputs: apply(plan, None, *inputs)[0]
    if plan.direct == "tuple":
        return lambda *inputs: apply(plan, None, *inputs)
    rebuild = plan.rebuild
    tensor_outputs = plan.tensor_outputs
    aliases = [(i, j) for i, j in enumerate(plan.output_is_input) if j is not None]

    passed_on = plan.passed_on

    def computation(*inputs):
        holder: list = []
        if passed_on:
            tensors = apply(plan, holder, *(x.detach() if i in passed_on else x for i, x in enumerate(inputs)))
        else:
            tensors = apply(plan, holder, *inputs)
        outputs = list(holder[0])
        for i, t in zip(tensor_outputs, tensors):
            outputs[i] = t
        for i, j in aliases:
            outputs[i] = inputs[j]
        return rebuild(*outputs)

    return computation
