"""Embeddings from ``torch.nn.functional``: ``embedding`` and ``embedding_bag``.

``embedding`` is ``prims.embedding``, whose gradient (``prims.embedding_backward``) skips the
``padding_idx`` row. ``scale_grad_by_freq`` divides each row's gradient by how often its index
occurs in the batch: a symbol with the same forward whose VJP calls eager's
``aten.embedding_dense_backward`` with the scaling on.

Note [Embedding bags]
``embedding_bag`` runs eager's ``aten._embedding_bag`` kernel (sum, mean or max of the rows of
each bag, optionally weighted). Besides the bags, the kernel returns helpers for its backward
(``offset2bag``, ``bag_size``, ``max_indices``) whose shapes depend on the device and on
the path the kernel took (on CPU a sum leaves ``offset2bag`` empty), so they are no outputs of
the symbol: its backward symbols recompute them with the same kernel (they are cheap next to
the gradient) and call ``aten._embedding_bag_backward`` for the weight and
``aten._embedding_bag_per_sample_weights_backward`` for the per-sample weights, as eager's
autograd does.

``max_norm`` renormalises, in place, the rows of ``weight`` that the lookup reads and whose norm
exceeds it (``torch.embedding_renorm_``, under ``no_grad`` in eager), then looks them up: the
symbol ``embedding_renorm_`` (in place, never removed) does the update, also where the weight's
gradient is wanted (training): as eager's, under ``no_grad``, the gradient is the lookup's alone.
``sparse=True`` is refused when the weight's gradient is wanted (eager's gradient is then a sparse
tensor).

Layer: language. Imports: core, torch.base, torch.nn_utils.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from thunder.core import prims
from thunder.core.errors import ThunderTypeError, ThunderValueError, UnsupportedOpError
from thunder.core.prims.base import grad_asked
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import grad_rules
from thunder.core.symbol import DONT_DCE, IN_PLACE
from thunder.torch.base import torchsymbol
from thunder.torch.nn_utils import check_tensor, kernel_outputs, upcast

__all__ = [
    "embedding", "embedding_bag", "embedding_renorm_", "embedding_scaled_by_freq", "embedding_scaled_by_freq_backward",
    "embedding_bag_kernel", "embedding_bag_backward", "embedding_bag_per_sample_weights_backward",
]  # fmt: skip

aten = torch.ops.aten


def _check_indices(op: str, name: str, t: TensorProxy, label: str) -> None:
    check_tensor(op, name, t)
    if t.dtype not in (torch.int32, torch.int64):
        raise ThunderTypeError(
            f"{op}: Expected tensor for argument {label} to have one of the following scalar types: Long, Int; "
            f"but got {t.dtype} instead: convert it with {name}.long()"
        )


def _check_weight(op: str, weight) -> None:
    check_tensor(op, "weight", weight)
    if weight.ndim != 2:
        raise ThunderValueError(
            f"{op}: 'weight' must be 2-D (num_embeddings, embedding_dim), but got shape {list(weight.shape)}"
        )


def _refuse_sparse(op: str, weight: TensorProxy, sparse) -> None:
    # The grad mode is the traced program's (the trace records that it read it: the weight requires grad).
    wants_grad = weight.requires_grad and torch.is_grad_enabled()
    if pyval(sparse) and wants_grad:
        raise UnsupportedOpError(
            f"{op}: sparse=True is not supported for a weight that requires grad (eager's gradient would be a "
            "sparse tensor); pass sparse=False"
        )


def _padding_index(op: str, padding_idx, num: int) -> int | None:
    padding_idx = pyval(padding_idx)
    if padding_idx is None:
        return None
    if not -num <= padding_idx < num:
        raise ThunderValueError(f"{op}: Padding_idx must be within num_embeddings (got {padding_idx} for {num})")
    return padding_idx + num if padding_idx < 0 else padding_idx


@torchsymbol(F.embedding)
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, sparse=False):
    """``F.embedding`` (``nn.Embedding``): rows of ``weight`` at ``input``. ``padding_idx`` and
    ``scale_grad_by_freq`` only affect the gradient; ``max_norm`` renormalises the rows it reads in place
    (see the module docstring)."""
    op = "ltorch.embedding"
    _check_indices(op, "input", input, "#1 'indices'")
    _check_weight(op, weight)
    _refuse_sparse(op, weight, sparse)
    padding_idx = _padding_index(op, padding_idx, weight.shape[0])
    if max_norm is not None:
        weight = embedding_renorm_(weight, input, max_norm, norm_type)
    if pyval(scale_grad_by_freq):
        return embedding_scaled_by_freq(input, weight, padding_idx)
    return prims.embedding(input, weight, padding_idx)


def _embedding_renorm_impl(weight, input, max_norm, norm_type):
    with torch.no_grad():
        return torch.embedding_renorm_(weight, input, max_norm, norm_type)


@torchsymbol(id="torch.embedding_renorm_", tags=(IN_PLACE, DONT_DCE), torch_impl=_embedding_renorm_impl)
def embedding_renorm_(weight, input, max_norm, norm_type):
    """``torch.embedding_renorm_``: each row of ``weight`` that ``input`` reads and whose ``norm_type``-norm
    exceeds ``max_norm`` is scaled, in place, by ``max_norm / (norm + 1e-7)``; returns ``weight``."""
    op = "ltorch.embedding_renorm_"
    _check_indices(op, "input", input, "'indices'")
    _check_weight(op, weight)
    max_norm, norm_type = float(pyval(max_norm)), float(pyval(norm_type))
    a = upcast(weight)
    magnitude = prims.abs(a)
    if norm_type == math.inf:
        norm = prims.amax(magnitude, (1,))
    else:
        norm = prims.pow(prims.sum(prims.pow(magnitude, norm_type), (1,)), 1.0 / norm_type)
    flat = prims.reshape(input, (math.prod(input.shape),))
    ones = prims.full(flat.shape, True, device=weight.device, dtype=torch.bool)
    read = prims.scatter(prims.full((weight.shape[0],), False, device=weight.device, dtype=torch.bool), flat, ones, 0)
    scale = prims.where(
        prims.bitwise_and(read, prims.gt(norm, max_norm)), prims.div(max_norm, prims.add(norm, 1e-7)), 1.0
    )
    renormed = prims.mul(a, prims.broadcast_in_dim(scale, a.shape, (0,)))
    if renormed.dtype != weight.dtype:
        renormed = prims.convert_element_type(renormed, weight.dtype)
    return prims.copy_(renormed, weight, grad_enabled=False)  # under no_grad, as eager's


def _embedding_scaled_impl(input, weight, padding_idx):
    return F.embedding(input, weight, padding_idx, scale_grad_by_freq=True)


@torchsymbol(id="torch.embedding_scaled_by_freq", torch_impl=_embedding_scaled_impl)
def embedding_scaled_by_freq(input, weight, padding_idx):
    """``embedding`` whose weight gradient is divided, row by row, by the count of the row's index."""
    return prims.embedding(input, weight, padding_idx)


def _embedding_scaled_backward_impl(g, input, num_weights, padding_idx):
    return aten.embedding_dense_backward(g, input, num_weights, -1 if padding_idx is None else padding_idx, True)


@torchsymbol(id="torch.embedding_scaled_by_freq_backward", torch_impl=_embedding_scaled_backward_impl)
def embedding_scaled_by_freq_backward(g, input, num_weights, padding_idx):
    """``aten.embedding_dense_backward`` with ``scale_grad_by_freq``: the weight gradient."""
    return TensorProxy(shape=(num_weights, g.shape[-1]), dtype=g.dtype, device=g.device, requires_grad=False)


@grad_rules.register(embedding_scaled_by_freq)
def _embedding_scaled_vjp(g, out, input, weight, padding_idx):
    if not grad_asked(weight):
        return (None, None, None)
    return (None, embedding_scaled_by_freq_backward(g, input, weight.shape[0], padding_idx), None)


# ----------------------------------------------------------------------------------------
# embedding_bag (Note [Embedding bags])
# ----------------------------------------------------------------------------------------

_MODES = {"sum": 0, "mean": 1, "max": 2}


def _bags(weight, indices, offsets, scale_grad_by_freq, mode, per_sample_weights, include_last_offset, padding_idx):
    return torch.ops.aten._embedding_bag(
        weight, indices, offsets, scale_grad_by_freq, mode, False, per_sample_weights, include_last_offset, padding_idx
    )


def _bag_kernel_impl(weight, indices, offsets, scale_grad_by_freq, mode, per_sample_weights, include_last_offset,
                     padding_idx):  # fmt: skip
    return _bags(weight, indices, offsets, scale_grad_by_freq, mode, per_sample_weights, include_last_offset,
                 padding_idx)[0]  # fmt: skip


@torchsymbol(id="torch.embedding_bag_kernel", torch_impl=_bag_kernel_impl)
def embedding_bag_kernel(weight, indices, offsets, scale_grad_by_freq, mode, per_sample_weights, include_last_offset,
                         padding_idx):  # fmt: skip
    """The bags of ``aten._embedding_bag`` (``mode``: 0 sum, 1 mean, 2 max; ``padding_idx`` -1 for none)."""
    return kernel_outputs("ltorch.embedding_bag", _bags, weight, indices, offsets, scale_grad_by_freq, mode,
                          per_sample_weights, include_last_offset, padding_idx)[0]  # fmt: skip


def _bag_backward_impl(g, weight, indices, offsets, scale_grad_by_freq, mode, per_sample_weights, include_last_offset,
                       padding_idx):  # fmt: skip
    _, offset2bag, bag_size, max_indices = _bags(weight, indices, offsets, scale_grad_by_freq, mode,
                                                 per_sample_weights, include_last_offset, padding_idx)  # fmt: skip
    return aten._embedding_bag_backward(g, indices, offsets, offset2bag, bag_size, max_indices, weight.shape[0],
                                        scale_grad_by_freq, mode, False, per_sample_weights, padding_idx)  # fmt: skip


@torchsymbol(id="torch.embedding_bag_backward", torch_impl=_bag_backward_impl)
def embedding_bag_backward(g, weight, indices, offsets, scale_grad_by_freq, mode, per_sample_weights,
                           include_last_offset, padding_idx):  # fmt: skip
    """The weight gradient of ``embedding_bag_kernel``: ``aten._embedding_bag_backward`` (Note [Embedding bags])."""
    return TensorProxy.like(weight, requires_grad=False)


def _bag_weights_backward_impl(g, weight, indices, offsets, mode, per_sample_weights, include_last_offset,
                               padding_idx):  # fmt: skip
    _, offset2bag, _, _ = _bags(weight, indices, offsets, False, mode, per_sample_weights, include_last_offset,
                                padding_idx)  # fmt: skip
    return aten._embedding_bag_per_sample_weights_backward(g, weight, indices, offsets, offset2bag, mode, padding_idx)


@torchsymbol(id="torch.embedding_bag_per_sample_weights_backward", torch_impl=_bag_weights_backward_impl)
def embedding_bag_per_sample_weights_backward(g, weight, indices, offsets, mode, per_sample_weights,
                                              include_last_offset, padding_idx):  # fmt: skip
    """The per-sample-weights gradient of ``embedding_bag_kernel`` (sum mode)."""
    return TensorProxy.like(per_sample_weights, requires_grad=False)


@grad_rules.register(embedding_bag_kernel)
def _embedding_bag_vjp(g, out, weight, indices, offsets, scale_grad_by_freq, mode, per_sample_weights,
                       include_last_offset, padding_idx):  # fmt: skip
    args = (indices, offsets, scale_grad_by_freq, mode, per_sample_weights, include_last_offset, padding_idx)
    gw = embedding_bag_backward(g, weight, *args) if grad_asked(weight) else None
    gp = None
    if per_sample_weights is not None and grad_asked(per_sample_weights):
        gp = embedding_bag_per_sample_weights_backward(
            g, weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx
        )
    return (gw, None, None, None, None, gp, None, None)


@torchsymbol(F.embedding_bag)
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False, mode="mean",
                  sparse=False, per_sample_weights=None, include_last_offset=False, padding_idx=None):  # fmt: skip
    """``F.embedding_bag`` (``nn.EmbeddingBag``): the sum, mean or max of the rows of ``weight`` in each
    bag, eager's kernel (Note [Embedding bags]). A 2-D input is a batch of fixed-length bags."""
    op = "ltorch.embedding_bag"
    _check_indices(op, "input", input, "#1 'indices'")
    _check_weight(op, weight)
    _refuse_sparse(op, weight, sparse)
    if per_sample_weights is not None:
        check_tensor(op, "per_sample_weights", per_sample_weights)
        if tuple(per_sample_weights.shape) != tuple(input.shape):
            raise ThunderValueError(
                f"{op}: If per_sample_weights ({list(per_sample_weights.shape)}) is not None, then it must have the "
                f"same shape as the input ({list(input.shape)})"
            )
    include_last_offset = bool(pyval(include_last_offset))
    if input.ndim == 2:
        if offsets is not None:
            raise ThunderValueError(f"{op}: if input is 2D, then offsets has to be None")
        bags, length = input.shape
        offsets = prims.iota(bags, start=0, step=length, device=input.device, dtype=input.dtype)
        include_last_offset = False
        input = prims.reshape(input, (bags * length,))
        if per_sample_weights is not None:
            per_sample_weights = prims.reshape(per_sample_weights, (bags * length,))
    elif input.ndim == 1:
        if offsets is None:
            raise ThunderValueError(f"{op}: offsets has to be a 1D Tensor but got None")
        _check_indices(op, "offsets", offsets, "'offsets'")
        if offsets.ndim != 1:
            raise ThunderValueError(f"{op}: offsets has to be a 1D Tensor")
    else:
        raise ThunderValueError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    mode = pyval(mode)
    if mode not in _MODES:
        raise ThunderValueError(f"{op}: mode has to be one of sum, mean or max, but got {mode!r}")
    scale_grad_by_freq = bool(pyval(scale_grad_by_freq))
    if mode == "max" and scale_grad_by_freq:
        raise ThunderValueError(f"{op}: max mode does not support scaling the gradient by the frequency")
    if per_sample_weights is not None and mode != "sum":
        raise UnsupportedOpError(
            f"{op}: per_sample_weights was not None. per_sample_weights is only supported for mode='sum' (got "
            f"mode='{mode}')"
        )
    padding_idx = _padding_index(op, padding_idx, weight.shape[0])
    if max_norm is not None:
        weight = embedding_renorm_(weight, input, max_norm, norm_type)
    return embedding_bag_kernel(weight, input, offsets, scale_grad_by_freq, _MODES[mode], per_sample_weights,
                                include_last_offset, -1 if padding_idx is None else padding_idx)  # fmt: skip
