"""Neural-network primitives: ``convolution`` and ``embedding``.

Both stay prims because they do not decompose into the other prims without gathers or
im2col blow-ups that no backend wants to see; everything else in ``torch.nn.functional``
(softmax, norms, losses, attention, activations) decomposes in ``thunder/torch/nn*.py``.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import enum

import torch

from thunder.core import dtypes
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import check_operands, check_same_device, check_tensor, make_prim
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol


class NNPrimIDs(enum.Enum):
    CONVOLUTION = enum.auto()
    EMBEDDING = enum.auto()


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
embedding = make_prim(NNPrimIDs.EMBEDDING, "embedding", _embedding_meta, impl=_embedding_impl)


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]
