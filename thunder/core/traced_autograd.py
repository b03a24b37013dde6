"""``torch.autograd.Function`` subclasses called inside a jitted function.

Note [Custom autograd functions]
``MyFn.apply(*args)`` is traced as eager runs it: the user's ``forward`` runs (its ops are
recorded, with grad mode off, so nothing inside is differentiated), then its ``backward`` is
traced once, right away, on placeholder cotangents, into a scratch scope that is not part of the
computation. The call's outputs come from one bound symbol of a symbol made for this call site,
``MyFn.apply``, that only renames ``forward``'s outputs (it prints as an assignment) and reads
every forward value the backward refers to (so dead-code elimination keeps them). Its VJP rule is
the traced backward, with the placeholders replaced by the real cotangents; the gradients go to
``forward``'s inputs. So the user's own backward is what runs, as in eager, inside thunder's
backward trace.

Layer: core. Imports: core.
"""

from __future__ import annotations

import itertools
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from thunder.core import prims
from thunder.core.dtypes import is_inexact_dtype
from thunder.core.errors import UnsupportedOpError
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.rules import grad_rules
from thunder.core.symbol import MAY_ALIAS, RERUN, BoundSymbol, Symbol
from thunder.core.trace import TraceCtx, from_trace

__all__ = [
    "applied_as_themselves",
    "checkpoint_region",
    "higher_order_function",
    "is_autograd_function_apply",
    "trace_autograd_function",
]

_APPLY = torch.autograd.Function.apply.__func__


def is_autograd_function_apply(fn: Any) -> bool:
    """Whether ``fn`` is ``SomeFunction.apply`` of a ``torch.autograd.Function`` subclass."""
    return type(fn) is types.MethodType and fn.__func__ is _APPLY and isinstance(fn.__self__, type)


class TracedContext:
    """The ``ctx`` a traced ``forward``/``backward`` sees: what they save and mark, on proxies."""

    def __init__(self, inputs: tuple):
        self.saved_tensors: tuple = ()
        self.needs_input_grad = tuple(isinstance(a, TensorProxy) and a.requires_grad for a in inputs)
        self.non_differentiable: list = []
        self.materialize_grads = True

    def save_for_backward(self, *tensors) -> None:
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors) -> None:
        pass

    def mark_non_differentiable(self, *tensors) -> None:
        # Kept as objects: the interpreter runs this method, where a proxy's ``name`` is eager's ``Tensor.name``.
        self.non_differentiable.extend(tensors)

    def set_materialize_grads(self, value: bool) -> None:
        self.materialize_grads = value

    def mark_dirty(self, *tensors) -> None:
        raise UnsupportedOpError(
            "ctx.mark_dirty (a torch.autograd.Function that changes its inputs in place) is not supported inside "
            "thunder.jit yet; return new tensors instead"
        )


# Note [What a Function returns]
# ``apply`` makes autograd outputs of what ``forward`` returns: the tensor it returns, or each tensor item of the
# tuple it returns. Anything else, a list of tensors included, is passed through untouched: its tensors were made
# with grad mode off and do not require grad, and backward gets None for it. So backward takes exactly one
# cotangent per item of the tuple.
def trace_autograd_function(cls: type, args: tuple, trace: TraceCtx, call: Callable) -> Any:
    """Traces ``cls.apply(*args)`` into ``trace`` (Note [Custom autograd functions]); ``call(fn, args)``
    runs Python code under the interpreter. Returns what the program gets."""
    ctx = TracedContext(args)
    grad_enabled = torch.is_grad_enabled()
    torch._C._set_grad_enabled(False)  # eager runs forward and backward with grad mode off
    start = len(trace.bound_symbols)
    try:
        if _overrides_setup_context(cls):
            out = call(cls.forward, args)
            call(cls.setup_context, (ctx, args, out))
        else:
            out = call(cls.forward, (ctx, *args))
        switched = any(b.sym is prims.set_grad_enabled for b in trace.bound_symbols[start:])
        if switched:
            # ``forward`` switched grad mode (``with torch.no_grad():``), which the computation replays;
            # it leaves the mode it found, as eager does, not the off that forward ran in.
            prims.set_grad_enabled(grad_enabled)
        # Eager's outputs are forward's result or the items of the tuple it returns (Note [What a Function
        # returns]); backward takes one cotangent per output, None for those that are not tensors.
        returned = out if isinstance(out, tuple) else (out,)
        outputs = [t for t in returned if isinstance(t, TensorProxy)]
        placeholders = [TensorProxy.like(t, requires_grad=False) for t in outputs]
        cotangents = iter(placeholders)
        backward_args = [next(cotangents) if isinstance(t, TensorProxy) else None for t in returned]
        scratch: list[BoundSymbol] = []
        inputs = [a for a in args if isinstance(a, TensorProxy)]
        differentiable = grad_enabled and any(a.requires_grad for a in inputs) and bool(outputs)
        if differentiable and not ctx.materialize_grads and len(outputs) > 1:
            # Note [A Function that does not materialize gradients]
            applied = _applied_as_itself(cls, args, out, trace, start)
            if applied is None:
                raise UnsupportedOpError(
                    f"{cls.__qualname__}.forward calls ctx.set_materialize_grads(False) and returns several tensors "
                    "(or changes outside state): its backward gets None for the outputs that no gradient reaches, "
                    "which thunder cannot trace yet; leave grads materialized, or call it outside thunder.jit"
                )
            return applied
        if differentiable:
            trace.scopes.append(scratch)
            failure = None
            try:
                grads = call(cls.backward, (ctx, *backward_args))
            except Exception as e:  # noqa: BLE001 - whatever stops it, eager meets it only in a backward
                failure = e
            finally:
                trace.scopes.pop()
            if failure is not None:
                applied = _applied_as_itself(cls, args, out, trace, start)
                if applied is None:
                    raise failure
                return applied
        else:  # eager never runs the backward (``Dirichlet.sample()``'s reads ops thunder has no symbol for)
            grads = (None,) * len(args)
    finally:
        torch._C._set_grad_enabled(grad_enabled)
    grads = grads if isinstance(grads, tuple) else (grads,)
    if len(grads) != len(args):
        raise UnsupportedOpError(
            f"{cls.__qualname__}.backward returned {len(grads)} gradients, but forward takes {len(args)} inputs "
            "(torch requires one per input, None for those without one)"
        )
    defined = {o.name for b in scratch for o in b.flat_proxy_outs} | {p.name for p in placeholders}
    reads = {a.name: a for b in scratch for a in b.flat_proxy_args if a.name not in defined}
    reads.update((g.name, g) for g in grads if isinstance(g, Proxy) and g.name not in defined)
    input_grads = [g for a, g in zip(args, grads) if isinstance(a, TensorProxy)]
    extra = [p for name, p in reads.items() if name not in {a.name for a in inputs}]

    marked = {t.name for t in ctx.non_differentiable if isinstance(t, Proxy)}
    results = [
        TensorProxy.like(t, requires_grad=differentiable and t.name not in marked and is_inexact_dtype(t.dtype))
        for t in outputs
    ]
    # Tensors forward made and returned inside another item (a list) are no outputs: cut from autograd.
    passed = {a.name for a in inputs} | {t.name for t in outputs}
    within = {t.name: t for x in returned if not isinstance(x, TensorProxy) for t in tree_leaves(x)
              if isinstance(t, TensorProxy) and t.name not in passed}
    cut = {name: TensorProxy.like(t, requires_grad=False) for name, t in within.items()}
    kept_off = [r for r in (*results, *cut.values()) if is_inexact_dtype(r.dtype) and not r.requires_grad]
    if kept_off and grad_enabled and any(a.requires_grad for a in inputs):
        _forward_with_grad_off(trace, start, switched, grad_enabled)
    # Note [A Function that returns a view]
    views = differentiable and _returns_views(outputs, inputs, trace.bound_symbols[start:])
    tags = frozenset({MAY_ALIAS}) if views else frozenset()
    sym = Symbol(
        name=f"{cls.__name__}.apply", meta=None, id=_site_id("autograd_function", cls), printer=_print_alias, tags=tags
    )
    n_out = len(outputs) + len(cut)
    marker_args = (*outputs, *within.values(), *inputs, *extra)
    grad_rules.register(sym)(_backward_rule(scratch, placeholders, input_grads, marker_args, n_out, len(extra)))
    _MARKED_CALLS[sym] = _MarkedCall(cls, args, n_out, len(inputs), out, _forward_effect(trace, start))
    trace.add_bound_symbol(sym.bind(*marker_args, output=(*results, *cut.values()), source=None))
    from thunder.core.tracectx import current_source_location

    trace.bound_symbols[-1].source = current_source_location()
    last = {t.name: r for t, r in zip(outputs, results)}  # a tensor returned twice is the later output, as in eager
    applied = tuple(
        last[x.name] if isinstance(x, TensorProxy)
        else tree_map(lambda t: cut.get(t.name, t) if isinstance(t, TensorProxy) else t, x)
        for x in returned
    )
    return applied if isinstance(out, tuple) else applied[0]


# Note [A Function that returns a view]
# Eager's ``apply`` makes each differentiable output that is one of its inputs returned as-is, or a view, a view
# "created inside a custom Function": an in-place update of it under grad mode raises (autograd's view+inplace
# logic would replace the user's backward). The marker only renames forward's outputs, so such an update became a
# new value of the split's and ran. So the marker of such a call is tagged ``MAY_ALIAS``: its results may share
# its inputs' memory, an update of one is no functional update (``_functional_updates`` in
# thunder.core.transforms.autodiff) and the program runs under torch's autograd, where the Function is applied as
# itself (Note [A Function in a program torch's autograd runs]) and torch raises eager's error. Which outputs are
# views is told as the split tells it (``_aliased_args``: a reshape counts, though eager's may copy): where one is
# not, torch's autograd runs the Function as eager does, only more slowly.
def _returns_views(outputs: list[TensorProxy], inputs: list[TensorProxy], forward: list[BoundSymbol]) -> bool:
    """Whether one of ``outputs`` is one of ``inputs`` or a view made by the ``forward`` ops (Note above)."""
    from thunder.core.transforms.autodiff import _aliased_args  # (autodiff imports this module)

    names = {o.name for o in outputs}
    return bool(names & {a.name for a in inputs}) or any(
        _aliased_args(b) and names & {o.name for o in b.flat_proxy_outs} for b in forward
    )


# Note [Results of a Function that do not require grad]
# Eager runs ``forward`` with grad mode off: what it returns marked non-differentiable (``ctx.mark_non_differentiable``),
# or inside a list, does not require grad though it was computed from inputs that do. The trace says so, but a
# computation with no result that requires grad runs under torch's autograd as it is (there is no split), and its
# ops would record a graph: the result would require grad. So where such a result exists, the forward's ops are
# recorded between switches of grad mode, off and back, as eager runs them.
def _forward_with_grad_off(trace: TraceCtx, start: int, switched: bool, grad_enabled: bool) -> None:
    """Puts the ops ``forward`` recorded from ``start`` on under grad mode off (the Note above)."""
    prims.set_grad_enabled(False)
    trace.bound_symbols.insert(start, trace.bound_symbols.pop())
    if not switched:  # (where forward switched, the switch back is recorded already)
        prims.set_grad_enabled(grad_enabled)


def higher_order_function(
    fwd: Callable, bwd: Callable, *, args_tensor_mask=None, non_differentiable_idx=(), saved_for_backward_idx=None,
    dirty_idx=(),
) -> type:
    """The ``torch.autograd.Function`` that ``torch.ops.higher_order.autograd_function_apply(fwd, bwd, *args,
    **kwargs)`` applies (what ``torch.compile`` makes of one): ``fwd(*args)`` returns the outputs and the
    values ``bwd(*grads, *saved)`` reads. Older torch (and lightning-thunder) pass ``args_tensor_mask`` and a
    ``ctx`` first argument, None. ``saved_for_backward_idx`` only tags eager's saved values: not needed here."""
    ctx_arg = () if args_tensor_mask is None else (None,)

    class HigherOrderFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *args):
            out, ctx.saved_values = fwd(*ctx_arg, *args)
            outputs = out if isinstance(out, (tuple, list)) else (out,)
            ctx.mark_non_differentiable(*(outputs[i] for i in non_differentiable_idx))
            if dirty_idx:
                ctx.mark_dirty(*(outputs[i] for i in dirty_idx))
            return out

        @staticmethod
        def backward(ctx, *grads):
            return bwd(*ctx_arg, *grads, *ctx.saved_values)

    return HigherOrderFunction


# Note [One symbol per call site]
# Each ``cls.apply`` call has its own symbol, with an id no other call shares, so common-subexpression elimination
# never merges two calls of one Function on the same inputs (``F.apply(t) * F.apply(t)``): their forward values are
# equal, but the user's backward runs once per call, on that call's cotangent, and need not be linear in it (a
# gradient clipped, a constant added). Merged, it ran once, on the sum.
_SITES = itertools.count()


def _site_id(kind: str, cls: type) -> str:
    return f"{kind}.{cls.__qualname__}.{next(_SITES)}"


def _overrides_setup_context(cls: type) -> bool:
    from torch.autograd.function import _SingleLevelFunction

    return getattr(cls, "setup_context", None) is not _SingleLevelFunction.setup_context


# Note [A Function that does not materialize gradients]
# After ``ctx.set_materialize_grads(False)`` eager's backward gets None, not zeros, for each output that no gradient
# reached, and it may branch on that (``if g2 is None``). Which outputs those are is known only when the program's
# backward is split off, after the backward was traced on placeholders: such a Function with several outputs is
# applied as itself (the Note below), so torch's engine passes what eager's does. With one output, a backward that
# runs always gets a gradient.

# Note [A backward that cannot be traced]
# A Function whose ``backward`` cannot be traced (it asserts ``ctx.training`` as Reformer's does, or calls what
# thunder has no symbol for) is applied as itself: the computation calls ``cls.apply`` (an op no split
# differentiates, so the computation runs under torch's autograd, Note [VJP rules]), and the Function's own
# backward runs, or raises, when eager's would. Forward's traced ops are dropped; a forward that changed outside
# state or printed (replays the tracer recorded) keeps the error instead.
def _applied_as_itself(cls: type, args: tuple, out: Any, trace: TraceCtx, start: int) -> Any:
    from thunder.core.replays import REPLAYS

    outputs = out if isinstance(out, tuple) else (out,)
    if not all(isinstance(o, TensorProxy) for o in outputs) or any(b.sym in REPLAYS for b in trace.bound_symbols[start:]):
        return None
    del trace.bound_symbols[start:]
    results = tuple(TensorProxy.like(o, requires_grad=o.dtype.is_floating_point or o.dtype.is_complex) for o in outputs)
    from thunder.core.tracectx import current_source_location

    sym = _apply_symbol(cls, isinstance(out, tuple))
    trace.add_bound_symbol(sym.bind(cls.apply, *args, output=results, source=current_source_location()))
    return results if isinstance(out, tuple) else results[0]


def _apply_symbol(cls: type, returns_tuple: bool) -> Symbol:
    """The symbol of one call of ``cls.apply`` run by torch: ``t5 = _apply(t3, False)``, or ``(t5,) = ...`` where
    forward returns a tuple."""

    def print_apply(bsym: BoundSymbol, printer) -> list[str]:
        fn, *args = bsym.args
        call = f"{printer.constant(fn, '_apply')}({', '.join(printer.value(a) for a in args)})"
        lhs = ", ".join(o.name for o in bsym.output)
        return [f"({lhs},) = {call}" if returns_tuple else f"{lhs} = {call}"]

    return Symbol(
        name=f"{cls.__name__}.apply", meta=None, id=_site_id("autograd_function_applied", cls), printer=print_apply
    )


# Note [A Function in a program torch's autograd runs]
# Where the split cannot differentiate the program, its computation runs under torch's autograd as it is. A
# Function's marker only renames forward's outputs, so torch differentiated forward's ops and the user's backward
# never ran (a backward that is not forward's derivative: another gradient, silently). There each marker becomes the
# Function applied as itself (Note [A backward that cannot be traced]): torch runs forward again and records the
# user's backward; forward's traced ops are left to dead-code elimination. A forward that changed outside state or
# printed would do that twice, and a forward returning tensors inside a list cannot be applied as itself: clear errors.
class _MarkedCall:
    """What a marker needs to become its call again: the Function, the call's arguments (the tensors among them are
    the marker's inputs, as passes may have renamed them), how many outputs precede them in the marker's arguments,
    whether forward returned a tuple, and what stops applying it again (an effect of forward's, or a result that is
    not a tensor)."""

    __slots__ = ("cls", "args", "n_outputs", "n_inputs", "returns_tuple", "obstacle")

    def __init__(self, cls: type, args: tuple, n_outputs: int, n_inputs: int, out: Any, effect: str | None):
        self.cls, self.args, self.n_outputs, self.n_inputs = cls, args, n_outputs, n_inputs
        self.returns_tuple = isinstance(out, tuple)
        returned = out if self.returns_tuple else (out,)
        self.obstacle = (
            f"its forward calls {effect}" if effect is not None
            else None if all(isinstance(o, TensorProxy) for o in returned)
            else "its forward returns what is not a tensor"
        )  # fmt: skip


_MARKED_CALLS: weakref.WeakKeyDictionary[Symbol, _MarkedCall] = weakref.WeakKeyDictionary()


def _forward_effect(trace: TraceCtx, start: int) -> str | None:
    from thunder.core.replays import REPLAYS

    return next((b.sym.name for b in trace.bound_symbols[start:] if b.sym in REPLAYS), None)


def applied_as_themselves(trace: TraceCtx, why: str) -> TraceCtx | None:
    """``trace`` with each Function's marker replaced by the Function applied as itself, for torch's autograd to run
    (Note [A Function in a program torch's autograd runs]; ``why``: why the split did not differentiate it); None when
    it has no marker."""
    new, changed = from_trace(trace), False
    for bsym in trace.bound_symbols:
        call = _MARKED_CALLS.get(bsym.sym)
        if call is None:
            new.bound_symbols.append(bsym)
            continue
        if call.obstacle is not None:
            at = f" (at {bsym.source})" if bsym.source is not None else ""
            raise UnsupportedOpError(
                f"{call.cls.__qualname__}.apply{at}: the program runs under torch's autograd ({why}), where the "
                f"Function is applied as itself so that its backward runs, but {call.obstacle}. Change that, or "
                "call the Function outside thunder.jit"
            )
        inputs = iter(bsym.args[call.n_outputs : call.n_outputs + call.n_inputs])
        args = tuple(next(inputs) if isinstance(a, TensorProxy) else a for a in call.args)
        sym = _apply_symbol(call.cls, call.returns_tuple)
        new.bound_symbols.append(sym.bind(call.cls.apply, *args, output=bsym.output, source=bsym.source))
        changed = True
    return new if changed else None


def _print_alias(bsym: BoundSymbol, printer) -> list[str]:
    """``(t5, t6) = (t3, t4)``: the outputs are forward's own."""
    n = len(bsym.output)
    if n == 0:
        return ["pass"]
    lhs = ", ".join(o.name for o in bsym.output)
    rhs = ", ".join(a.name for a in bsym.args[:n])
    return [f"({lhs},) = ({rhs},)"]


def _backward_rule(
    scratch: list[BoundSymbol], placeholders: list, input_grads: list, traced_args: tuple, n_outputs: int, n_extra: int
):
    """The VJP rule of one call site: the traced backward on the real cotangents. The marker's
    arguments are (forward's outputs, forward's tensor inputs, other forward values the backward
    reads); gradients go to the inputs, position by position (the same tensor twice sums).

    The backward was traced on the names the marker had when it was made (``traced_args``); passes before the
    split may have renamed them (common subexpression elimination makes ``x.float()`` computed twice one value),
    so the backward reads the marker's arguments as they are now."""

    def rule(g, out, *marker_args):
        from thunder.core.trace import get_tracectx

        swap = {t.name: a for t, a in zip(traced_args, marker_args) if isinstance(a, Proxy) and t.name != a.name}
        swap.update((p.name, c) for p, c in zip(placeholders, g))
        trace = get_tracectx()
        for bsym in scratch:
            trace.add_bound_symbol(bsym.rename(swap).from_bsym())
        grads = [swap.get(x.name, x) if isinstance(x, Proxy) else x for x in input_grads]
        inputs = marker_args[n_outputs : len(marker_args) - n_extra]
        grads = [_as_the_engine_takes(x, a) if isinstance(x, TensorProxy) else x for x, a in zip(grads, inputs)]
        return (None,) * n_outputs + tuple(grads) + (None,) * n_extra

    return rule


def _as_the_engine_takes(g: TensorProxy, a: TensorProxy) -> TensorProxy:
    """Gradient ``g`` that a Function's backward returned for input ``a``, as torch's engine passes it on
    (``validate_outputs``): summed to ``a``'s shape where ``a`` expands to it, then cast to ``a``'s dtype (an AMP
    ``custom_fwd(cast_inputs=torch.float32)`` forward's backward returns float32 for a bfloat16 input)."""
    shape, lead = tuple(a.shape), len(g.shape) - len(a.shape)
    if tuple(g.shape) != shape and lead >= 0 and all(n in (1, m) for n, m in zip(shape, g.shape[lead:])):
        dims = (*range(lead), *(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1))
        g = prims.reshape(prims.sum(g, dims), shape)
    if g.dtype != a.dtype and is_inexact_dtype(a.dtype) and not (g.dtype.is_complex and not a.dtype.is_complex):
        g = prims.convert_element_type(g, a.dtype)
    return g


# Note [Activation checkpointing]
# ``torch.utils.checkpoint.checkpoint(fn, *args)`` runs ``fn`` and, in eager, keeps only its
# inputs: the backward runs ``fn`` again. Traced, the ops ``fn`` recorded become the decomposition
# of one ``checkpoint`` bound symbol, which no executor runs whole (claiming runs its parts) and
# which has no gradient rule: the autograd split differentiates it through its decomposition,
# recomputed in the backward from the region's inputs, so what the region made inside is not
# saved, as in eager. (A region that draws random numbers is run by the forward and kept: its
# draws cannot be repeated.) What the region does besides computing (BatchNorm's running statistics,
# a replay) is done again in the backward, as eager's second run does: Note [What a recomputed region
# does again] in thunder.core.transforms.autodiff.
checkpoint = Symbol(name="checkpoint", meta=None, id="torch.utils.checkpoint.checkpoint", tags=frozenset({RERUN}))


def checkpoint_region(trace: TraceCtx, start: int, result: Any) -> None:
    """Folds the bound symbols ``trace`` recorded from ``start`` on (one checkpointed call that
    returned ``result``) into one ``checkpoint`` bound symbol (Note [Activation checkpointing])."""
    region = trace.bound_symbols[start:]
    if not region:
        return
    defined: set[str] = set()
    inputs: dict[str, Proxy] = {}
    tags: set = {RERUN}
    for bsym in region:
        for a in bsym.flat_proxy_args:
            if a.name not in defined:
                inputs.setdefault(a.name, a)
        defined.update(o.name for o in bsym.flat_proxy_outs)
        tags |= bsym.sym.tags
    outputs = tuple({p.name: p for p in tree_leaves(result) if isinstance(p, Proxy) and p.name in defined}.values())
    if tags != checkpoint.tags:
        sym = Symbol(name="checkpoint", meta=None, id=checkpoint.id, tags=frozenset(tags))
    else:
        sym = checkpoint
    del trace.bound_symbols[start:]
    trace.add_bound_symbol(
        sym.bind(*inputs.values(), output=outputs, subsymbols=region, source=region[0].source)
    )
