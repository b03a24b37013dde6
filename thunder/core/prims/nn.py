"""Neural-network primitives: ``convolution`` and ``embedding``, and their gradients
(``convolution_backward``, ``embedding_backward``).

Both stay prims because they do not decompose into the other prims without gathers or
im2col blow-ups that no backend wants to see; everything else in ``torch.nn.functional``
(softmax, norms, losses, attention, activations) decomposes in ``thunder/torch/nn*.py``.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import enum

import torch

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import (
    check_operands,
    check_real_grad,
    check_same_device,
    check_tensor,
    grad_asked,
    is_differentiable,
    make_prim,
)
from thunder.core.proxies import TensorProxy
from thunder.core.rules import grad_rules
from thunder.core.symbol import MAY_RAISE, Symbol


class NNPrimIDs(enum.Enum):
    CONVOLUTION = enum.auto()
    EMBEDDING = enum.auto()
    CONVOLUTION_BACKWARD = enum.auto()
    EMBEDDING_BACKWARD = enum.auto()


def _convolution_meta(a, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    op = "prims.convolution"
    check_operands(op, a=a, weight=weight, bias=bias)
    if not dtypes.is_inexact_dtype(a.dtype):
        raise ThunderTypeError(f"{op}: a has dtype {a.dtype}, but a floating-point dtype is required")
    nspatial = a.ndim - 2
    if nspatial < 1 or weight.ndim != a.ndim:
        raise ThunderValueError(
            f"{op}: expected a of shape (N, C, *spatial) and weight of the same rank, got {a.shape} and {weight.shape}"
        )
    for name, v in (
        ("stride", stride),
        ("padding", padding),
        ("dilation", dilation),
        ("output_padding", output_padding),
    ):
        if len(v) != nspatial or any(not isinstance(x, int) for x in v):
            raise ThunderValueError(f"{op}: {name} must have {nspatial} ints, got {v!r}")
    if any(s < 1 for s in stride) or any(d < 1 for d in dilation) or any(p < 0 for p in padding):
        raise ThunderValueError(f"{op}: stride and dilation must be >= 1 and padding >= 0")
    if not isinstance(groups, int) or groups < 1:
        raise ThunderValueError(f"{op}: groups must be a positive int, got {groups!r}")
    c_in = a.shape[1]
    kernel = weight.shape[2:]
    if transposed:
        c_out = weight.shape[1] * groups
        if weight.shape[0] != c_in or c_in % groups:
            raise ThunderValueError(
                f"{op}: weight {weight.shape} does not fit input channels {c_in} with groups={groups}"
            )
        spatial = [
            (n - 1) * s - 2 * p + d * (k - 1) + op_ + 1
            for n, s, p, d, k, op_ in zip(a.shape[2:], stride, padding, dilation, kernel, output_padding)
        ]
    else:
        c_out = weight.shape[0]
        if weight.shape[1] * groups != c_in or c_out % groups:
            raise ThunderValueError(
                f"{op}: weight of shape {weight.shape} with groups={groups} expects {weight.shape[1] * groups} input "
                f"channels, but a has {c_in} (shape {a.shape})"
            )
        spatial = [
            (n + 2 * p - d * (k - 1) - 1) // s + 1
            for n, s, p, d, k in zip(a.shape[2:], stride, padding, dilation, kernel)
        ]
        padded = tuple(n + 2 * p for n, p in zip(a.shape[2:], padding))
        dilated = tuple(d * (k - 1) + 1 for d, k in zip(dilation, kernel))
        if any(n < k for n, k in zip(padded, dilated)):
            raise ThunderValueError(
                f"{op}: calculated padded input size per channel {padded} is smaller than the (dilated) kernel size "
                f"{dilated}: kernel size can't be greater than actual input size"
            )
    if bias is not None and bias.shape != (c_out,):
        raise ThunderValueError(f"{op}: bias has shape {bias.shape}, expected ({c_out},)")
    return TensorProxy.like(a, shape=(a.shape[0], c_out, *spatial), requires_grad=False)


convolution = make_prim(NNPrimIDs.CONVOLUTION, "convolution", _convolution_meta, impl=torch.convolution)


def _embedding_meta(a, weight, padding_idx=None):
    op = "prims.embedding"
    check_tensor(op, "a", a)
    check_tensor(op, "weight", weight)
    check_same_device(op, [a, weight], ["a", "weight"])
    if a.dtype not in (torch.int32, torch.int64):
        raise ThunderTypeError(f"{op}: indices must be int32 or int64, but got {a.dtype}")
    if weight.ndim != 2:
        raise ThunderValueError(f"{op}: weight must be 2-D (num_embeddings, embedding_dim), got shape {weight.shape}")
    return TensorProxy(shape=(*a.shape, weight.shape[1]), dtype=weight.dtype, device=weight.device)


def _embedding_impl(a, weight, padding_idx=None):
    return torch.nn.functional.embedding(a, weight, padding_idx)


# padding_idx does not change the forward result; it is kept for the gradient rule.
embedding = make_prim(NNPrimIDs.EMBEDDING, "embedding", _embedding_meta, impl=_embedding_impl, tags=(MAY_RAISE,))


# The gradients of ``convolution`` and ``embedding`` are prims of their own: they do not
# decompose into other prims any better than the forward ops do, and PyTorch has a kernel for each.


def _convolution_backward_meta(
    g, a, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask
):
    op = "prims.convolution_backward"
    check_operands(op, g=g, a=a, weight=weight)
    if g.ndim != a.ndim or g.shape[0] != a.shape[0]:
        raise ThunderValueError(f"{op}: g of shape {g.shape} is not the output of a convolution of a {a.shape}")
    if len(output_mask) != 3 or not all(isinstance(m, bool) for m in output_mask):
        raise ThunderTypeError(f"{op}: output_mask must be three bools (a, weight, bias), got {output_mask!r}")
    expected = _convolution_meta(a, weight, None, stride, padding, dilation, transposed, output_padding, groups)
    if tuple(expected.shape) != tuple(g.shape):
        raise ThunderValueError(f"{op}: g has shape {g.shape}, but the convolution's output has shape {expected.shape}")
    want_a, want_weight, want_bias = output_mask
    return (
        TensorProxy.like(a, requires_grad=False) if want_a else None,
        TensorProxy.like(weight, requires_grad=False) if want_weight else None,
        TensorProxy.like(g, shape=(g.shape[1],), requires_grad=False) if want_bias else None,
    )


_aten_convolution_backward = torch.ops.aten.convolution_backward.default._op  # no packet dispatch per call


def _convolution_backward_impl(
    g, a, weight, stride, padding, dilation, transposed, output_padding, groups, output_mask
):
    bias_sizes = [g.shape[1]] if output_mask[2] else None
    return tuple(
        _aten_convolution_backward(
            g, a, weight, bias_sizes, stride, padding, dilation, transposed, output_padding, groups, list(output_mask)
        )
    )


# ``convolution_backward(g, a, weight, stride, padding, dilation, transposed, output_padding, groups,
# output_mask)``: the gradients (a, weight, bias) of ``convolution`` for the output cotangent ``g``;
# ``output_mask`` (three bools) says which to compute, the others are None.
convolution_backward = make_prim(
    NNPrimIDs.CONVOLUTION_BACKWARD, "convolution_backward", _convolution_backward_meta, impl=_convolution_backward_impl
)


def _embedding_backward_meta(g, indices, num_weights, padding_idx):
    op = "prims.embedding_backward"
    check_tensor(op, "g", g)
    check_tensor(op, "indices", indices)
    check_same_device(op, [g, indices], ["g", "indices"])
    if indices.dtype not in (torch.int32, torch.int64):
        raise ThunderTypeError(f"{op}: indices must be int32 or int64, but got {indices.dtype}")
    if not isinstance(num_weights, int) or num_weights < 0:
        raise ThunderValueError(f"{op}: num_weights must be a non-negative int, got {num_weights!r}")
    if tuple(g.shape[:-1]) != tuple(indices.shape) or g.ndim != indices.ndim + 1:
        raise ThunderValueError(f"{op}: g of shape {g.shape} must have shape (*indices.shape, embedding_dim)")
    if padding_idx is not None and not -num_weights <= padding_idx < num_weights:
        raise ThunderValueError(f"{op}: padding_idx {padding_idx} is out of range for {num_weights} embeddings")
    return TensorProxy(shape=(num_weights, g.shape[-1]), dtype=g.dtype, device=g.device)


def _embedding_backward_impl(g, indices, num_weights, padding_idx):
    if padding_idx is None:
        padding_idx = -1  # aten: no padding row
    elif padding_idx < 0:
        padding_idx += num_weights
    return torch.ops.aten.embedding_dense_backward(g, indices, num_weights, padding_idx, False)


# ``embedding_backward(g, indices, num_weights, padding_idx)``: the gradient of ``embedding``'s weight,
# the rows of ``g`` summed by index; the ``padding_idx`` row (if any) gets none, as in torch.
embedding_backward = make_prim(
    NNPrimIDs.EMBEDDING_BACKWARD, "embedding_backward", _embedding_backward_meta, impl=_embedding_backward_impl
)


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]


# --- gradients (Note [VJP rules] in thunder.core.rules) ---


@grad_rules.register(convolution)
def _convolution_grad(g, out, a, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    check_real_grad("prims.convolution", a)
    mask = (grad_asked(a), grad_asked(weight), bias is not None and grad_asked(bias))
    if not any(mask):
        return (None,) * 9
    ga, gw, gb = convolution_backward(
        g, a, weight, stride, padding, dilation, transposed, output_padding, groups, mask
    )
    return (ga, gw, gb, None, None, None, None, None, None)


@grad_rules.register(embedding)
def _embedding_grad(g, out, a, weight, *padding_idx):
    rest = (None,) * len(padding_idx)  # padding_idx is optional: one entry per argument given
    if not is_differentiable(weight):
        return (None, None, *rest)
    return (None, embedding_backward(g, a, weight.shape[0], padding_idx[0] if padding_idx else None), *rest)


@grad_rules.register(embedding_backward)
def _embedding_backward_grad(g, out, g_out, indices, num_weights, padding_idx):
    """``embedding_backward`` is linear in its cotangent: its transpose gathers the rows back,
    and the padding row contributed nothing."""
    gathered = embedding(indices, g)
    if padding_idx is not None:
        pad_row = padding_idx + num_weights if padding_idx < 0 else padding_idx
        is_pad = prims.broadcast_in_dim(prims.eq(indices, pad_row), tuple(gathered.shape), tuple(range(indices.ndim)))
        gathered = prims.where(is_pad, 0, gathered)
    return (gathered, None, None, None)
