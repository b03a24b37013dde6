"""Tracing through a jitted function called by the function being traced.

``thunder.jit(g)`` where ``g`` calls ``f = thunder.jit(h)``: while ``g`` is traced, the call of
``f`` must not run ``f``'s own cache machinery on proxies (its prologue would reject them and
it would try to compile a trace inside a trace). The tracer's lookaside asks
``inner_jitted_lookaside(fn)``; for a function made by ``thunder.jit`` (it has ``_thunder``, its
state, and ``__wrapped__``, what it compiles) it returns a replacement that interprets
``__wrapped__`` in the running interpretation, so ``h``'s operations are recorded into ``g``'s
trace as if ``g`` had called ``h``. ``f``'s own options (executors, cache) do not apply inside
``g``: ``g``'s do. What ``print`` shows of ``f``'s results: Note [Printing a jitted function's result].

Layer: tracing. Imports: the interpreter, core.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any

import torch

from thunder.core import prims
from thunder.core.interpreter.execution import call
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_leaves
from thunder.core.replays import OUTPUTS
from thunder.core.symbol import BoundSymbol, Symbol

__all__ = ["as_returned", "inner_jitted_lookaside", "jitted_results"]


def inner_jitted_lookaside(fn: Any) -> Callable | None:
    """For a function returned by ``thunder.jit``: a callable that traces what it wraps; else None."""
    if type(fn) is not types.FunctionType:
        return None
    attrs = fn.__dict__
    if "_thunder" not in attrs:
        return None
    wrapped = attrs.get("__wrapped__")
    if wrapped is None:
        return None
    return functools.partial(_interpret_wrapped, wrapped)


def _interpret_wrapped(wrapped: Callable, *args, **kwargs) -> Any:
    """Runs ``wrapped`` under the interpretation that called the jitted function (this thread's)."""
    ctx = current_runtime()
    if ctx is None:  # not under the interpreter: nothing to trace into
        return wrapped(*args, **kwargs)
    return call(ctx, wrapped, args, kwargs or None)


# Note [Printing a jitted function's result]
# Called on its own, ``f = thunder.jit(h)`` returns tensors made by its autograd node (``ThunderFunction`` in
# thunder.executors.torch_autograd): ``print(f(x))`` shows ``grad_fn=<ThunderFunctionBackward>`` where the result
# requires grad. So does ``print(f(x))`` in an eager ``g``, the reference for ``thunder.jit(g)``. Traced inside ``g``,
# ``h``'s ops are recorded inline, and a print of a value that requires grad makes ``g``'s computation run under
# torch's autograd (Note [VJP rules]), where the value's grad_fn is that of ``h``'s last op (``AddBackward0``). So a
# print of a result of ``f``, not updated in place since (eager's grad_fn is then the update's), prints it through
# ``as_returned``: the identity as an autograd node of the same name, made for the print alone (the program's later
# ops use the value itself). Where ``h`` itself prints a value that requires grad, ``f`` runs under torch's autograd
# when called on its own too and shows its op's grad_fn: its results are not marked then.
class ThunderFunction(torch.autograd.Function):
    """The identity, named as thunder.executors.torch_autograd's ``ThunderFunction``: its grad_fn prints the same."""

    @staticmethod
    def forward(ctx, t: torch.Tensor) -> torch.Tensor:
        return t.clone()

    @staticmethod
    def backward(ctx, g: torch.Tensor) -> torch.Tensor:
        return g


def _apply_thunder_function(t: torch.Tensor) -> torch.Tensor:
    with torch.enable_grad():  # eager's grad_fn shows under no_grad too
        return ThunderFunction.apply(t)


def _print_as_returned(bsym: BoundSymbol, printer) -> list[str]:
    fn = printer.constant(_apply_thunder_function, "_as_returned")
    return [f"{bsym.output.name} = {fn}({bsym.args[0].name})"]


_AS_RETURNED = Symbol(name="as_returned", meta=None, id="thunder.nested_jit.as_returned", printer=_print_as_returned)


def as_returned(trace, t: TensorProxy, since: list[BoundSymbol]) -> TensorProxy:
    """``t`` as the jitted function returned it, for a print, where ``since``, the bound symbols recorded after that
    call, do not update it in place; else ``t`` (Note [Printing a jitted function's result])."""
    if any(_writes(b, t.name) for b in since):
        return t
    out = TensorProxy.like(t)
    trace.add_bound_symbol(_AS_RETURNED.bind(t, output=out))
    return out


def _writes(bsym: BoundSymbol, name: str) -> bool:
    if bsym.sym is prims.copy_:
        return bsym.args[1].name == name
    return any(_writes(sub, name) for sub in bsym.subsymbols)


def jitted_results(region: list[BoundSymbol], out: Any) -> list[str]:
    """The names of the tensors in ``out``, a jitted function's result traced as ``region``, that its own call would
    return from its autograd node (Note [Printing a jitted function's result])."""
    made = {o.name for b in region for o in b.flat_proxy_outs}
    for b in region:
        if b.sym in OUTPUTS and any(isinstance(a, TensorProxy) and a.requires_grad for a in b.flat_proxy_args):
            return []
    return [t.name for t in tree_leaves(out) if isinstance(t, TensorProxy) and t.requires_grad and t.name in made]
