"""Losses from ``torch.nn.functional``: mse_loss, l1_loss, binary_cross_entropy_with_logits,
nll_loss and cross_entropy (class indices or probabilities, weight, ignore_index,
label_smoothing), with PyTorch's reductions ("none", "mean", "sum" and the legacy
``size_average``/``reduce`` flags).

Computed in float32 for bf16/f16 inputs. ``nll_loss`` picks the target's log-probability
with ``prims.take_along_axis`` and the class weights with ``prims.take``.

``nll_loss`` has a VJP rule (Note [VJP rules] in ``thunder.core.rules``) computing its gradient
with eager's kernel (``aten.nll_loss_backward``/``nll_loss2d_backward``, as the symbol
``nll_loss_backward``). ``cross_entropy`` with class-index targets decomposes, as eager's does,
into ``log_softmax`` of the input (in the input's dtype) and ``nll_loss`` (plus the label-smoothing
term, in prims): it has no rule of its own, so the backward recomputes that ``log_softmax`` from
the saved input and applies the rules of ``nll_loss`` and ``log_softmax``, eager's backward
kernels; the label-smoothing term and probability targets are differentiated through their prims.

Layer: language. Imports: core, torch.base, torch.elementwise, torch.nn_utils, torch.nn_activations.
"""

from __future__ import annotations

import inspect
import math

import torch
import torch.nn.functional as F

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import check_real_grad, is_differentiable
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import forward_rules, grad_rules
from thunder.torch.base import broadcast_shapes, expand_to, maybe_convert_to_dtype, torchsymbol
from thunder.torch.eager_ops import eager_fallback
from thunder.torch.nn_activations import log_softmax
from thunder.torch.nn_utils import check_float, check_tensor, computation_dtype, upcast

__all__ = ["mse_loss", "l1_loss", "binary_cross_entropy_with_logits", "nll_loss", "cross_entropy", "nll_loss_backward"]


def _reduction(op: str, size_average, reduce, reduction) -> str:
    if size_average is not None or reduce is not None:
        # PyTorch's legacy flags (``_Reduction.legacy_get_string``); both default to True.
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        return "mean" if size_average and reduce else "sum" if reduce else "none"
    if reduction not in ("none", "mean", "sum"):
        raise ThunderValueError(f"{op}: {reduction} is not a valid value for reduction; use 'none', 'mean' or 'sum'")
    return reduction


def _sum_all(a: TensorProxy) -> TensorProxy:
    return prims.sum(a, tuple(range(a.ndim)))


def _apply_reduction(loss: TensorProxy, reduction: str) -> TensorProxy:
    if reduction == "none":
        return loss
    total = _sum_all(loss)
    if reduction == "sum":
        return total
    return prims.div(total, float(math.prod(loss.shape)))  # empty input: 0 / 0 = nan, as in PyTorch


def _pointwise_loss_inputs(op: str, input, target):
    """Broadcast, promoted and upcast (input, target), and the result dtype."""
    check_tensor(op, "input", input)
    check_tensor(op, "target", target)
    dtype = dtypes.result_type(input, target)
    if not dtypes.is_float_dtype(dtype):
        raise ThunderTypeError(
            f"{op}: expected floating-point input and target, but got {input.dtype} and {target.dtype}"
        )
    shape = broadcast_shapes(op, input.shape, target.shape)
    cdt = computation_dtype(dtype)
    a = maybe_convert_to_dtype(expand_to(input, shape), cdt)
    b = maybe_convert_to_dtype(expand_to(target, shape), cdt)
    return a, b, dtype


def _weighted_pointwise(op: str, per_elem, input, weight, reduction, dtype):
    if weight is None:
        return maybe_convert_to_dtype(_apply_reduction(per_elem, reduction), dtype)
    check_tensor(op, "weight", weight)
    if tuple(weight.shape) != tuple(input.shape):
        raise ThunderValueError(
            f"{op}: Weights and input must have the same size ({list(weight.shape)} vs {list(input.shape)})"
        )
    dtype = dtypes.result_type(dtype, weight.dtype)
    w = maybe_convert_to_dtype(expand_to(weight, per_elem.shape), computation_dtype(dtype))
    per_elem = prims.mul(maybe_convert_to_dtype(per_elem, w.dtype), w)
    if reduction == "mean":
        return maybe_convert_to_dtype(prims.div(_sum_all(per_elem), _sum_all(w)), dtype)
    return maybe_convert_to_dtype(_apply_reduction(per_elem, reduction), dtype)


@torchsymbol(F.mse_loss)
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """``F.mse_loss``: ``(input - target) ** 2``, broadcast, reduced."""
    op = "ltorch.mse_loss"
    reduction = _reduction(op, size_average, reduce, reduction)
    a, b, dtype = _pointwise_loss_inputs(op, input, target)
    diff = prims.sub(a, b)
    return _weighted_pointwise(op, prims.mul(diff, diff), input, weight, reduction, dtype)


_non_float_l1_loss = eager_fallback(F.l1_loss, "non_float_l1_loss")


@torchsymbol(F.l1_loss)
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """``F.l1_loss``: ``|input - target|``, broadcast, reduced; torch runs the integer and complex cases."""
    op = "ltorch.l1_loss"
    check_tensor(op, "input", input)
    check_tensor(op, "target", target)
    if not dtypes.is_float_dtype(dtypes.result_type(input, target)):
        return _non_float_l1_loss(input, target, size_average, reduce, reduction, weight=weight)
    reduction = _reduction(op, size_average, reduce, reduction)
    a, b, dtype = _pointwise_loss_inputs(op, input, target)
    return _weighted_pointwise(op, prims.abs(prims.sub(a, b)), input, weight, reduction, dtype)


@torchsymbol(F.binary_cross_entropy_with_logits)
def binary_cross_entropy_with_logits(
    input, target, weight=None, size_average=None, reduce=None, reduction="mean", pos_weight=None
):
    """``F.binary_cross_entropy_with_logits``: ``(1 - t) * x - (1 + (pos_weight - 1) * t) * log_sigmoid(x)``,
    times ``weight``; ``log_sigmoid`` is computed stably as ``min(x, 0) - log1p(exp(-|x|))``."""
    op = "ltorch.binary_cross_entropy_with_logits"
    reduction = _reduction(op, size_average, reduce, reduction)
    check_tensor(op, "input", input)
    check_tensor(op, "target", target)
    if tuple(target.shape) != tuple(input.shape):
        raise ThunderValueError(
            f"{op}: Target size (torch.Size({list(target.shape)})) must be the same as input size "
            f"(torch.Size({list(input.shape)}))"
        )
    dtype = dtypes.result_type(input, target, *(t for t in (weight, pos_weight) if t is not None))
    if not dtypes.is_float_dtype(dtype):
        raise ThunderTypeError(
            f"{op}: expected floating-point input and target, but got {input.dtype} and {target.dtype}"
        )
    cdt = computation_dtype(dtype)
    x = maybe_convert_to_dtype(input, cdt)
    t = maybe_convert_to_dtype(target, cdt)
    log_sig = prims.sub(prims.where(prims.lt(x, 0.0), x, 0.0), prims.log1p(prims.exp(prims.neg(prims.abs(x)))))
    if pos_weight is not None:
        check_tensor(op, "pos_weight", pos_weight)
        broadcast_shapes(op, x.shape, pos_weight.shape)
        pw = expand_to(maybe_convert_to_dtype(pos_weight, cdt), x.shape)
        log_weight = prims.add(prims.mul(prims.sub(pw, 1.0), t), 1.0)
        log_sig = prims.mul(log_weight, log_sig)
    loss = prims.sub(prims.mul(prims.sub(1.0, t), x), log_sig)
    if weight is not None:
        check_tensor(op, "weight", weight)
        broadcast_shapes(op, x.shape, weight.shape)
        loss = prims.mul(loss, expand_to(maybe_convert_to_dtype(weight, cdt), x.shape))
    return maybe_convert_to_dtype(_apply_reduction(loss, reduction), dtype)


# ----------------------------------------------------------------------------------------
# nll_loss and cross_entropy
# ----------------------------------------------------------------------------------------


def _check_class_target(op: str, input: TensorProxy, target: TensorProxy, weight) -> int:
    """Validates (input, class-index target, weight); returns the number of classes."""
    if target.dtype not in (torch.int64, torch.uint8):
        raise ThunderTypeError(
            f"{op}: expected target dtype to be Long or Byte, but got {target.dtype}; convert it with target.long()"
        )
    if input.ndim < 1:
        raise ThunderValueError(f"{op}: input must have a class dim, but got a 0-d tensor")
    if input.ndim == 1:
        if target.ndim != 0:
            raise ThunderValueError(
                f"{op}: 0D or 1D target tensor expected, multi-target not supported (got target of shape {list(target.shape)})"
            )
    else:
        if target.ndim >= 1 and input.shape[0] != target.shape[0]:
            raise ThunderValueError(
                f"{op}: Expected input batch_size ({input.shape[0]}) to match target batch_size ({target.shape[0]})."
            )
        expected = (input.shape[0], *input.shape[2:])
        if tuple(target.shape) != expected:
            raise ThunderValueError(
                f"{op}: expected target of shape {list(expected)} for input of shape {list(input.shape)}, but got "
                f"{list(target.shape)}" if target.ndim != 1 or input.ndim != 2 else
                f"{op}: 0D or 1D target tensor expected, multi-target not supported"
            )  # fmt: skip
    c = input.shape[0] if input.ndim == 1 else input.shape[1]
    if weight is not None:
        check_tensor(op, "weight", weight)
        if tuple(weight.shape) != (c,):
            raise ThunderValueError(
                f"{op}: weight tensor should be defined either for all {c} classes or no classes but got weight "
                f"tensor of shape: {list(weight.shape)}"
            )
    return c


def _nll_parts(logp: TensorProxy, target: TensorProxy, weight, ignore_index: int):
    """Per-element ``-w[t] * logp[t]`` and per-element weights ``w[t]`` (0 where ignored)."""
    class_dim = 0 if logp.ndim == 1 else 1
    safe, w_t, ignored = _target_weights(target, weight, ignore_index, logp.dtype)
    idx_shape = list(safe.shape)
    idx_shape.insert(class_dim, 1)
    picked = prims.take_along_axis(logp, prims.reshape(safe, tuple(idx_shape)), class_dim)
    picked = prims.reshape(picked, safe.shape)
    return prims.neg(prims.mul(picked, w_t)), w_t, ignored


def _target_weights(target: TensorProxy, weight, ignore_index: int, dtype: torch.dtype):
    """The int64 targets (0 where ignored), their weights ``w[t]`` in ``dtype`` (0 where ignored),
    and where they are ignored."""
    ignored = prims.eq(target, ignore_index)
    safe = prims.where(ignored, 0, target)
    if safe.dtype is not torch.int64:
        safe = prims.convert_element_type(safe, torch.int64)
    if weight is not None:
        w = maybe_convert_to_dtype(weight, dtype)
        flat = prims.reshape(safe, (math.prod(safe.shape),))
        w_t = prims.reshape(prims.take(w, flat, 0), safe.shape)
    else:
        w_t = prims.add(prims.mul(prims.convert_element_type(safe, dtype), 0.0), 1.0)
    return safe, prims.where(ignored, 0.0, w_t), ignored


def _reduce_nll(losses, weights, reduction: str):
    if reduction == "none":
        return losses
    total = _sum_all(losses)
    if reduction == "sum":
        return total
    return prims.div(total, _sum_all(weights))


@torchsymbol(F.nll_loss)
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """``F.nll_loss``: ``-weight[t] * input[t]`` over class indices; "mean" divides by the sum of the
    weights of the targets that are not ``ignore_index``."""
    op = "ltorch.nll_loss"
    reduction = _reduction(op, size_average, reduce, reduction)
    check_float(op, "input", input)
    check_tensor(op, "target", target)
    _check_class_target(op, input, target, weight)
    logp = maybe_convert_to_dtype(input, computation_dtype(input.dtype))
    losses, weights, _ = _nll_parts(logp, target, weight, ignore_index)
    return maybe_convert_to_dtype(_reduce_nll(losses, weights, reduction), input.dtype)


@torchsymbol(F.cross_entropy)
def cross_entropy(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0
):
    """``F.cross_entropy``: ``nll_loss(log_softmax(input, class_dim), target)`` for class indices, or
    ``-sum(weight * target * log_softmax(input))`` over the class dim for probabilities; both with
    label smoothing as in PyTorch."""
    op = "ltorch.cross_entropy"
    reduction = _reduction(op, size_average, reduce, reduction)
    check_float(op, "input", input)
    check_tensor(op, "target", target)
    ls = pyval(label_smoothing)
    if not isinstance(ls, (int, float)) or not 0.0 <= ls <= 1.0:
        raise ThunderValueError(f"{op}: label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing!r}")
    if input.ndim == 0:
        raise ThunderValueError(f"{op}: input must have a class dim, but got a 0-d tensor")
    class_dim = 0 if input.ndim == 1 else 1
    c = input.shape[class_dim]
    # As eager: log_softmax in the input's dtype (its symbol computes in float32 and rounds once).
    logp_in = log_softmax(input, class_dim)
    logp = upcast(logp_in)

    def class_weights(shape):
        return prims.broadcast_in_dim(maybe_convert_to_dtype(weight, logp.dtype), shape, (class_dim,))

    if dtypes.is_float_dtype(target.dtype):
        # Probabilities: target has the input's shape.
        if tuple(target.shape) != tuple(input.shape):
            raise ThunderValueError(
                f"{op}: class-probability target must have the input's shape {list(input.shape)}, but got "
                f"{list(target.shape)} (for class indices use an int64 target)"
            )
        if weight is not None and tuple(weight.shape) != (c,):
            raise ThunderValueError(
                f"{op}: weight should have {c} elements (one per class), got shape {list(weight.shape)}"
            )
        t = maybe_convert_to_dtype(target, logp.dtype)
        if ls > 0:
            t = prims.add(prims.mul(t, 1.0 - ls), ls / c)
        prod = prims.mul(logp, t)
        if weight is not None:
            prod = prims.mul(prod, class_weights(prod.shape))
        losses = prims.neg(prims.sum(prod, (class_dim,)))
        if reduction == "none":
            out = losses
        elif reduction == "sum":
            out = _sum_all(losses)
        else:
            out = prims.div(_sum_all(losses), float(math.prod(input.shape) // c) if c else 0.0)
        return maybe_convert_to_dtype(out, input.dtype)

    _check_class_target(op, input, target, weight)
    # The nll_loss symbol (its rule is eager's kernel), tensors passed positionally.
    nll = nll_loss(logp_in, target, weight, None, ignore_index, None, reduction)
    if ls == 0:
        return nll
    _, weights, ignored = _nll_parts(logp, target, weight, ignore_index)
    nll = upcast(nll)
    weighted = prims.mul(logp, class_weights(logp.shape)) if weight is not None else logp
    smooth = prims.where(ignored, 0.0, prims.neg(prims.sum(weighted, (class_dim,))))
    if reduction == "none":
        smooth_red = smooth
    elif reduction == "sum":
        smooth_red = _sum_all(smooth)
    elif weight is not None:
        smooth_red = prims.div(_sum_all(smooth), _sum_all(weights))
    else:
        kept = prims.convert_element_type(prims.eq(ignored, False), logp.dtype)
        smooth_red = prims.div(_sum_all(smooth), _sum_all(kept))
    out = prims.add(prims.mul(nll, 1.0 - ls), prims.mul(smooth_red, ls / c))
    return maybe_convert_to_dtype(out, input.dtype)


# ----------------------------------------------------------------------------------------
# Backward kernels and VJP rules
# ----------------------------------------------------------------------------------------

_REDUCTION_ENUM = {"none": 0, "mean": 1, "sum": 2}  # at::Reduction


@forward_rules.register(cross_entropy)
def _cross_entropy_forward(
    input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean", label_smoothing=0.0
):
    """Where it needs a gradient, class-index ``cross_entropy`` without label smoothing as eager computes
    it (``nll_loss(log_softmax(input))``), so the backward reads the log-probabilities the forward made
    instead of computing them again (a vocabulary-wide log_softmax per token, for a language model)."""
    if dtypes.is_float_dtype(target.dtype) or pyval(label_smoothing) != 0 or input.ndim == 0:
        return None
    reduction = _reduction("ltorch.cross_entropy", size_average, reduce, reduction)
    _check_class_target("ltorch.cross_entropy", input, target, weight)
    return nll_loss(log_softmax(input, 0 if input.ndim == 1 else 1), target, weight, None, ignore_index, None, reduction)


def _nll_loss_backward_impl(grad_output, input, target, weight, reduction, ignore_index):
    """Eager's ``nll_loss_nd`` backward: ``nll_loss_backward`` for 1-d and 2-d inputs,
    ``nll_loss2d_backward`` for 4-d ones and for others viewed as (N, C, 1, -1). The total weight
    of the targets that the "mean" reduction divides by is recomputed by the forward kernel."""
    aten = torch.ops.aten
    red = _REDUCTION_ENUM[reduction]
    if input.ndim <= 2:
        _, total_weight = aten.nll_loss_forward(input, target, weight, red, ignore_index)
        return aten.nll_loss_backward(grad_output, input, target, weight, red, ignore_index, total_weight)
    x, t, g = input, target, grad_output
    if input.ndim != 4:
        n, c = input.shape[0], input.shape[1]
        x = input.contiguous().view(n, c, 1, -1) if input.numel() > 0 else input.contiguous().view(n, c, 0, 0)
        t = target.contiguous().view(n, 1, -1) if target.numel() > 0 else target.contiguous().view(n, 0, 0)
        if red == 0:
            g = grad_output.reshape(t.shape)
    _, total_weight = aten.nll_loss2d_forward(x, t, weight, red, ignore_index)
    return aten.nll_loss2d_backward(g, x, t, weight, red, ignore_index, total_weight).view(input.shape)


@torchsymbol(id="torch.nll_loss_backward", torch_impl=_nll_loss_backward_impl)
def nll_loss_backward(grad_output, input, target, weight, reduction, ignore_index):
    """The gradient of ``nll_loss(input, target, weight, ignore_index=, reduction=)`` with respect to
    ``input``, with eager's kernels (``aten.nll_loss_backward``/``aten.nll_loss2d_backward``)."""
    op = "ltorch.nll_loss_backward"
    check_float(op, "input", input)
    check_tensor(op, "grad_output", grad_output)
    check_tensor(op, "target", target)
    _check_class_target(op, input, target, weight)
    if reduction not in _REDUCTION_ENUM:
        raise ThunderValueError(f"{op}: {reduction} is not a valid value for reduction; use 'none', 'mean' or 'sum'")
    expected = tuple(target.shape) if reduction == "none" else ()
    if tuple(grad_output.shape) != expected or grad_output.dtype != input.dtype:
        raise ThunderValueError(
            f"{op}: grad_output must be a {input.dtype} tensor of shape {list(expected)} (the loss's), but got "
            f"{grad_output.dtype} {list(grad_output.shape)}"
        )
    if not isinstance(pyval(ignore_index), int):
        raise ThunderTypeError(f"{op}: ignore_index must be an int, but got {ignore_index!r}")
    if input.ndim > 2 or input.numel() == 0:
        return TensorProxy.like(input, requires_grad=False)  # eager's kernel only (nll_loss2d's layout)
    return _nll_loss_backward_parts(grad_output, input, target, weight, reduction, pyval(ignore_index))


def _nll_loss_backward_parts(grad_output, input, target, weight, reduction: str, ignore_index: int):
    """``-weight[t] * grad`` (over the total weight for "mean") at each row's target class, 0
    elsewhere and on ignored rows: the prims a fusion executor fuses with log_softmax's backward
    (one comparison with the class index per element, no scatter)."""
    class_dim = input.ndim - 1
    compute = computation_dtype(input.dtype)
    safe, w_t, ignored = _target_weights(target, weight, ignore_index, compute)
    rows = tuple(target.shape)
    g = prims.neg(maybe_convert_to_dtype(grad_output, compute))
    if reduction == "mean":
        g = prims.div(g, _sum_all(w_t))
    if reduction != "none":
        g = prims.broadcast_in_dim(g, rows, ())
    per_row = prims.mul(w_t, g)
    safe = prims.where(ignored, -1, safe)  # an ignored row hits no class (its gradient is 0, even where g is not finite)
    shape = tuple(input.shape)
    row_dims = tuple(range(len(rows)))
    classes = prims.iota(shape[class_dim], start=0, step=1, device=input.device, dtype=torch.int64)
    hit = prims.eq(prims.broadcast_in_dim(classes, shape, (class_dim,)), prims.broadcast_in_dim(safe, shape, row_dims))
    grad = prims.where(hit, prims.broadcast_in_dim(per_row, shape, row_dims), 0.0)
    return maybe_convert_to_dtype(grad, input.dtype)


@grad_rules.register(nll_loss)
def _nll_loss_vjp(g, out, *args, **kwargs):
    bound = inspect.signature(nll_loss.meta).bind(*args, **kwargs)
    bound.apply_defaults()
    a = bound.arguments
    input, target, weight = a["input"], a["target"], a["weight"]
    check_real_grad("ltorch.nll_loss", input)
    if isinstance(weight, TensorProxy) and weight.requires_grad:
        from thunder.core.transforms.autodiff import NotDifferentiable

        # Eager: "the derivative for 'weight' is not implemented"; torch's autograd says so.
        raise NotDifferentiable("ltorch.nll_loss: the derivative for 'weight' is not implemented")
    if not is_differentiable(input):
        return (None,) * len(args)
    reduction = _reduction("ltorch.nll_loss", a["size_average"], a["reduce"], a["reduction"])
    grad = nll_loss_backward(g, input, target, weight, reduction, pyval(a["ignore_index"]))
    return (grad, *(None for _ in args[1:]))
