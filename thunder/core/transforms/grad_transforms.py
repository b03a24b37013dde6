"""Executors' own gradients: ``register_implementation(sym, ..., grad_transform=fn)``.

Note [Grad transforms]
An executor may give a symbol it runs its own gradient (lightning-thunder's API). ``fn`` takes the
symbol's arguments and records, as one function: the forward ops (whose result is the symbol's
output), then ``get_grad(output)`` (the output's cotangent), the backward ops, and
``put_grads(inputs, grads)``. The autograd split calls it where such a symbol needs a gradient
(``split_forward_backward(trace, grad_transform_for=...)``, where the caller says which
executor's ``fn`` applies): the ops that do not depend on a cotangent go into the forward, in
place of the call; the others become the gradient rule of that call site, with the cotangents of
the real backward in place of ``get_grad``'s placeholders (the same marker as a
``torch.autograd.Function``'s, Note [Custom autograd functions] in thunder.core.traced_autograd).

Layer: core. Imports: core.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from thunder.core import prims
from thunder.core.errors import ThunderError
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_leaves
from thunder.core.rules import grad_rules
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import TraceCtx, recording_into, tracectx
from thunder.core.traced_autograd import _backward_rule, _print_alias

__all__ = ["get_grad", "put_grad", "put_grads", "expand_grad_transform"]


class _Recording:
    def __init__(self):
        self.placeholders: dict[str, TensorProxy] = {}  # output name -> its cotangent's placeholder
        self.grads: dict[str, Any] = {}  # input name -> gradient


_recording: contextvars.ContextVar[_Recording | None] = contextvars.ContextVar("thunder_grad_transform", default=None)


def _active(what: str) -> _Recording:
    rec = _recording.get()
    if rec is None:
        raise ThunderError(
            f"{what} is for an executor's grad_transform (register_implementation(..., grad_transform=fn)), "
            "which the autograd split calls; it cannot be called elsewhere"
        )
    return rec


def get_grad(x: TensorProxy) -> TensorProxy:
    """The cotangent of the forward value ``x`` (inside a grad transform, Note [Grad transforms])."""
    rec = _active("get_grad")
    found = rec.placeholders.get(x.name)
    if found is None:
        found = rec.placeholders[x.name] = TensorProxy.like(x, requires_grad=False)
    return found


def put_grad(x: TensorProxy, grad: Any) -> None:
    """Gives the input ``x`` the gradient ``grad`` (summed with one already given)."""
    rec = _active("put_grad")
    if not isinstance(x, TensorProxy) or grad is None:
        return
    previous = rec.grads.get(x.name)
    rec.grads[x.name] = grad if previous is None else prims.add(previous, grad)


def put_grads(xs: Any, grads: Any) -> None:
    """``put_grad`` for each tensor of ``xs`` and the gradient at its place in ``grads``."""
    _active("put_grads")
    for x, g in zip(tree_leaves(xs), tree_leaves(grads)):
        put_grad(x, g)


def expand_grad_transform(bsym: BoundSymbol, fn: Callable, trace: TraceCtx) -> list[BoundSymbol] | None:
    """The forward ops of ``fn`` for the call ``bsym`` and the marker that gives ``bsym``'s outputs,
    whose gradient rule is ``fn``'s backward (Note [Grad transforms]); None where ``fn`` recorded
    no ``get_grad``."""
    scratch: list[BoundSymbol] = []
    rec = _Recording()
    token = _recording.set(rec)
    try:
        with recording_into(trace, scratch):
            out = fn(*bsym.args, **bsym.kwargs)
    finally:
        _recording.reset(token)
    if not rec.placeholders:
        return None
    results = [o for o in tree_leaves(bsym.output) if isinstance(o, TensorProxy)]
    outputs = [o for o in tree_leaves(out) if isinstance(o, TensorProxy)]
    if len(outputs) != len(results):
        raise ThunderError(
            f"the grad_transform of {bsym.sym.print_name} returned {len(outputs)} tensors; the symbol has "
            f"{len(results)} tensor outputs"
        )
    after_grad = {p.name for p in rec.placeholders.values()}
    forward, backward = [], []
    for part in scratch:
        if any(a.name in after_grad for a in part.flat_proxy_args):
            after_grad.update(o.name for o in part.flat_proxy_outs)
            backward.append(part)
        else:
            forward.append(part)
    with tracectx(trace):  # an output whose cotangent the transform did not ask for gets an unused one
        placeholders = [
            rec.placeholders[o.name] if o.name in rec.placeholders else TensorProxy.like(o, requires_grad=False)
            for o in outputs
        ]
    inputs = list({a.name: a for a in tree_leaves((bsym.args, bsym.kwargs)) if isinstance(a, TensorProxy)}.values())
    defined = {o.name for b in backward for o in b.flat_proxy_outs} | {p.name for p in placeholders}
    known = {p.name for p in (*outputs, *inputs)}
    extra = list({a.name: a for b in backward for a in b.flat_proxy_args if a.name not in defined | known}.values())
    input_grads = [rec.grads.get(a.name) for a in inputs]
    sym = Symbol(name=f"{bsym.sym.name}_grad_transform", meta=None, id=f"grad_transform.{bsym.sym.id}",
                 printer=_print_alias)  # fmt: skip
    marker_args = (*outputs, *inputs, *extra)
    grad_rules.register(sym)(_backward_rule(backward, placeholders, input_grads, marker_args, len(outputs), len(extra)))
    marker = sym.bind(*marker_args, output=tuple(results), source=bsym.source)
    return [*forward, marker]

