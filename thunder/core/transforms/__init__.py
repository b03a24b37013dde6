"""Gradient transforms of functions: ``vjp``, ``grad`` and ``value_and_grad``.

``thunder.jit(vjp(f))`` compiles one trace that computes ``f`` and its pullback: the tracer
records ``f``'s ops, then the backward ops of their VJP rules (``record_vjp``), so both show in
``last_traces`` and are optimised together. Called outside ``thunder.jit`` they compute the same
with torch's autograd. ``split_forward_backward`` is what ``thunder.jit`` uses for training: a
forward trace and a backward trace (Note [Forward and backward traces] in ``autodiff``).

Layer: core. Imports: core.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import torch

from thunder.core.errors import ThunderValueError
from thunder.core.pytree import tree_leaves
from thunder.core.transform_common import Transform
from thunder.core.transforms.autodiff import (
    ForwardBackward,
    NotDifferentiable,
    record_vjp,
    requires_grad_outputs,
    split_forward_backward,
)
from thunder.core.transforms.grad_transforms import get_grad, put_grad, put_grads

__all__ = [
    "ForwardBackward",
    "Transform",
    "get_grad",
    "put_grad",
    "put_grads",
    "NotDifferentiable",
    "grad",
    "record_vjp",
    "requires_grad_outputs",
    "split_forward_backward",
    "value_and_grad",
    "vjp",
    "vjp_call",
]


def vjp(fn: Callable) -> Callable:
    """``vjp(fn)(primals, cotangents, **kwargs) -> (outputs, grads)``.

    Args:
        fn: a function of tensors (and other values).

    Returns:
        A function of ``primals`` (a sequence: ``fn``'s positional arguments), ``cotangents``
        (a sequence with one tensor per tensor of ``fn``'s output, in pytree order) and ``fn``'s
        keyword arguments that returns ``fn(*primals, **kwargs)`` and the vector-Jacobian product:
        one gradient per primal (zeros for a floating tensor the output does not depend on, None
        for a non-tensor), then, when keyword arguments were given, a dict of theirs by name.

    See also: ``grad``, ``value_and_grad``.
    """

    @functools.wraps(fn)
    def pullback(primals: Sequence, cotangents: Sequence, **kwargs):
        primals = tuple(primals)
        if not kwargs:
            return vjp_call(fn, primals, tuple(cotangents))
        # The keyword arguments are differentiated as primals placed after the positional ones.
        names, n = tuple(kwargs), len(primals)

        def positional(*args):
            return fn(*args[:n], **dict(zip(names, args[n:])))

        out, grads = vjp_call(positional, primals + tuple(kwargs.values()), tuple(cotangents))
        return out, (*grads[:n], dict(zip(names, grads[n:])))

    return pullback


def vjp_call(fn: Callable, primals: tuple, cotangents: tuple):
    """``fn(*primals)`` and its pullback of ``cotangents``. Under ``thunder.jit`` the tracer records
    both (a lookaside); called eagerly, torch's autograd computes them."""
    inputs = [p.detach().requires_grad_() if _floating(p) else p for p in primals]
    with torch.enable_grad():
        out = fn(*inputs)
    leaves = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
    if cotangents is ONES:
        cotangents = tuple(torch.ones_like(t) for t in leaves)
    check_cotangents(leaves, cotangents)
    wrt = [p for p in inputs if _floating(p)]
    pairs = [(o, c) for o, c in zip(leaves, cotangents) if o.requires_grad and c is not None]
    found = (
        torch.autograd.grad([o for o, _ in pairs], wrt, [c for _, c in pairs], allow_unused=True) if pairs else ()
    )
    by_input = dict(zip(map(id, wrt), found))
    grads = []
    for p in inputs:
        g = by_input.get(id(p)) if _floating(p) else None
        grads.append(torch.zeros_like(p) if g is None and _floating(p) else g)
    detached = [t.detach() if isinstance(t, torch.Tensor) else t for t in tree_leaves(out)]
    from thunder.core.pytree import tree_flatten, tree_unflatten

    return tree_unflatten(tree_flatten(out)[1], detached), tuple(grads)


def check_cotangents(leaves: list, cotangents: Sequence) -> None:
    if len(leaves) != len(cotangents):
        raise ThunderValueError(
            f"vjp: the function returns {len(leaves)} tensor(s), but {len(cotangents)} cotangent(s) were given; "
            "pass one cotangent per output tensor, in the order of the output's pytree leaves"
        )


def grad(fn: Callable) -> Callable:
    """``grad(fn)(*args) -> grads``: the gradients of ``fn``'s output (each output tensor weighted by
    ones) with respect to each positional argument, one per argument (None for a non-tensor).

    See also: ``vjp``, ``value_and_grad``."""
    value_and_grad_fn = value_and_grad(fn)

    @functools.wraps(fn)
    def gradient(*args):
        return value_and_grad_fn(*args)[1]

    return gradient


def value_and_grad(fn: Callable) -> Callable:
    """``value_and_grad(fn)(*args) -> (fn(*args), grads)``, with ``grads`` as ``grad`` returns them.

    See also: ``vjp``, ``grad``."""

    @functools.wraps(fn)
    def both(*args):
        return vjp_call(fn, args, ONES)

    return both


class _Ones(tuple):
    """The cotangents of ``grad``: ones for every output tensor, however many there are."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "ONES"


ONES = _Ones()


def _floating(x) -> bool:
    return isinstance(x, torch.Tensor) and (x.dtype.is_floating_point or x.dtype.is_complex)
