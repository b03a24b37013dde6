"""Linear-algebra primitives: ``matmul`` and ``linear``.

``matmul`` is the batched matrix product of two tensors of the same rank (>= 2) with
identical batch dims; the torch language handles 1-D operands and batch broadcasting.
``linear`` stays a prim (not mul+sum) because every backend has a fused GEMM-with-bias for it
and fusion executors match on it.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import enum
import math

import torch

from thunder.core import prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import (
    check_operands,
    check_same_device,
    check_same_dtype,
    check_tensor,
    conj,
    is_differentiable,
    make_prim,
)
from thunder.core.proxies import TensorProxy
from thunder.core.rules import grad_rules
from thunder.core.symbol import Symbol


class LinalgPrimIDs(enum.Enum):
    MATMUL = enum.auto()
    LINEAR = enum.auto()


def _check_matmul_dtype(op: str, a: TensorProxy) -> None:
    if a.dtype is torch.bool:
        raise ThunderTypeError(f"{op}: bool tensors are not supported; convert them first, e.g. a.to(torch.float32)")


def _matmul_meta(a, b):
    op = "prims.matmul"
    check_tensor(op, "a", a)
    check_tensor(op, "b", b)
    check_same_device(op, [a, b], ["a", "b"])
    check_same_dtype(op, [a, b], ["a", "b"])
    _check_matmul_dtype(op, a)
    if a.ndim < 2 or a.ndim != b.ndim:
        raise ThunderValueError(
            f"{op}: expected a and b of the same rank >= 2, but got shapes {a.shape} and {b.shape} "
            "(ltorch.matmul handles 1-D operands and broadcasting)"
        )
    if a.shape[:-2] != b.shape[:-2]:
        raise ThunderValueError(f"{op}: batch dims of a {a.shape} and b {b.shape} differ (prims do not broadcast)")
    if a.shape[-1] != b.shape[-2]:
        raise ThunderValueError(
            f"{op}: a has shape {a.shape} and b has shape {b.shape}: inner dimensions {a.shape[-1]} and "
            f"{b.shape[-2]} differ"
        )
    return TensorProxy.like(a, shape=(*a.shape[:-1], b.shape[-1]), requires_grad=False)


matmul = make_prim(LinalgPrimIDs.MATMUL, "matmul", _matmul_meta, impl=torch.matmul)


def _linear_meta(a, w, bias):
    op = "prims.linear"
    check_operands(op, a=a, w=w, bias=bias)
    _check_matmul_dtype(op, a)
    if a.ndim < 1 or w.ndim not in (1, 2):
        raise ThunderValueError(f"{op}: expected a of rank >= 1 and w of rank 1 or 2, got {a.shape} and {w.shape}")
    if a.shape[-1] != w.shape[-1]:
        raise ThunderValueError(
            f"{op}: a has shape {a.shape} and w has shape {w.shape}: in_features {a.shape[-1]} and {w.shape[-1]} differ"
        )
    out_shape = (*a.shape[:-1], w.shape[0]) if w.ndim == 2 else a.shape[:-1]
    if bias is not None:
        expected = out_shape[-1:] if w.ndim == 2 else ()
        if bias.shape != expected:
            raise ThunderValueError(f"{op}: bias has shape {bias.shape}, expected {expected}")
    return TensorProxy(shape=out_shape, dtype=a.dtype, device=a.device)


linear = make_prim(LinalgPrimIDs.LINEAR, "linear", _linear_meta, impl=torch.nn.functional.linear)


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]


# --- gradients (Note [VJP rules] in thunder.core.rules) ---
# Complex operands: the cotangent times the conjugate of the other operand (torch's convention).


def _mT(x):
    return prims.transpose(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


@grad_rules.register(matmul)
def _matmul_grad(g, out, a, b):
    return (
        matmul(g, _mT(conj(b))) if is_differentiable(a) else None,
        matmul(_mT(conj(a)), g) if is_differentiable(b) else None,
    )


@grad_rules.register(linear)
def _linear_grad(g, out, a, w, bias):
    """``out = a @ w.T + bias``; the leading dims of ``a`` are flattened into rows for ``w``'s gradient."""
    lead = tuple(range(a.ndim - 1))
    ga = gw = gb = None
    if w.ndim == 2:
        # As eager's addmm backward: ``g @ w`` and ``g.T @ a``, with no reshapes for 2-D operands.
        if is_differentiable(a):
            ga = matmul(g, conj(w)) if g.ndim == 2 else linear(g, prims.transpose(conj(w), (1, 0)), None)
        if is_differentiable(w):
            rows = math.prod(a.shape[:-1])
            g2 = g if g.ndim == 2 else prims.reshape(g, (rows, w.shape[0]))
            a2 = conj(a) if a.ndim == 2 else prims.reshape(conj(a), (rows, w.shape[1]))
            gw = matmul(prims.transpose(g2, (1, 0)), a2)
        if bias is not None and is_differentiable(bias):
            gb = prims.sum(g, lead)
    else:  # w is a vector: out = (a * w).sum(-1) + bias
        g_rows = prims.broadcast_in_dim(g, tuple(a.shape), lead)
        if is_differentiable(a):
            ga = prims.mul(g_rows, prims.broadcast_in_dim(conj(w), tuple(a.shape), (a.ndim - 1,)))
        if is_differentiable(w):
            gw = prims.sum(prims.mul(g_rows, conj(a)), lead)
        if bias is not None and is_differentiable(bias):
            gb = prims.sum(g, tuple(range(g.ndim)))
    return ga, gw, gb
