"""Normalisations from ``torch.nn.functional``: layer_norm, rms_norm, group_norm, batch_norm,
instance_norm.

Statistics are computed with ``prims.var_mean``/``prims.sum`` in float32 for bf16/f16
inputs; the result has the input's dtype. ``batch_norm`` in training mode with running
statistics updates them in place, as PyTorch does (``prims.copy_``), so its symbol carries
the IN_PLACE and DONT_DCE tags: it is never merged with another call, never removed, and
earlier reads of the running statistics are not reused after it.

layer_norm and batch_norm have VJP rules (Note [VJP rules] in ``thunder.core.rules``) that
compute their gradients with eager's backward kernels, ``aten.native_layer_norm_backward`` and
``aten.native_batch_norm_backward``, as the symbols ``layer_norm_backward`` and
``batch_norm_backward``. Those kernels need the forward's statistics (mean and 1/std), which
``F.layer_norm``/``F.batch_norm`` do not return: the backward symbols recompute them from the
saved input with the forward kernels (``aten.native_layer_norm``, ``aten.native_batch_norm``
without running statistics, so nothing is updated twice), which give the statistics eager kept,
bit for bit. The forward is unchanged and keeps only the input.

``nn.BatchNorm*d``'s forward is traced from a copy (``_batch_norm_module_forward``) whose cumulative
average (``momentum=None``) keeps its factor a tensor: eager's ``float()`` of the counter it has just
updated in place could not be traced (a data-dependent value read after an in-place update).

Layer: language. Imports: core, torch.base, torch.nn_utils.
"""

from __future__ import annotations

import inspect
import math

import torch
import torch.nn.functional as F

from thunder.core import prims
from thunder.core.errors import ThunderTypeError, ThunderValueError, UnsupportedOpError
from thunder.core.prims.base import check_real_grad, grad_asked
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import forward_rules, grad_rules
from thunder.core.symbol import DONT_DCE, IN_PLACE
from thunder.core.symbol_lookup import register_interpreted_replacement
from thunder.torch.base import canonicalize_dim, maybe_convert_to_dtype, torchsymbol
from thunder.torch.eager_ops import eager_fallback
from thunder.torch.nn_utils import check_float, check_tensor, computation_dtype, keep, upcast
from thunder.torch.reductions import sqrt_of_square_sum, vector_norm

# Eager's kernels by their C++ entries (no packet dispatch on each call).
_aten_native_layer_norm = torch.ops.aten.native_layer_norm.default._op
_aten_native_layer_norm_backward = torch.ops.aten.native_layer_norm_backward.default._op
_aten_native_batch_norm = torch.ops.aten.native_batch_norm.default._op
_aten_native_batch_norm_backward = torch.ops.aten.native_batch_norm_backward.default._op

__all__ = [
    "layer_norm", "rms_norm", "group_norm", "batch_norm", "layer_norm_backward", "batch_norm_backward",
    "batch_norm_with_stats", "batch_norm_backward_from_stats", "layer_norm_with_stats",
    "layer_norm_backward_from_stats", "instance_norm", "normalize", "norm_except_dim", "weight_norm",
]  # fmt: skip


def _normalized_shape(op: str, input: TensorProxy, normalized_shape) -> tuple[int, ...]:
    ns = pyval(normalized_shape)
    if isinstance(ns, torch.Size):
        ns = tuple(ns)
    if not isinstance(ns, (tuple, list)) or not all(isinstance(pyval(n), int) for n in ns):
        raise ThunderTypeError(
            f"{op}: argument 'normalized_shape' must be tuple of ints, not {type(ns).__name__}: pass e.g. ({ns!r},)"
        )
    ns = tuple(pyval(n) for n in ns)
    if len(ns) == 0:
        raise ThunderValueError(
            f"{op}: Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one element"
        )
    if input.ndim < len(ns) or tuple(input.shape[input.ndim - len(ns) :]) != ns:
        raise ThunderValueError(
            f"{op}: Given normalized_shape={list(ns)}, expected input with shape [*, {', '.join(map(str, ns))}], but "
            f"got input of size{list(input.shape)}"
        )
    return ns


def _check_affine(op: str, name: str, t, shape: tuple[int, ...], input: TensorProxy, what: str) -> None:
    if t is None:
        return
    check_tensor(op, name, t)
    if tuple(t.shape) != shape:
        raise ThunderValueError(
            f"{op}: Expected {name} to be of same shape as {what}, but got {name} of shape {list(t.shape)} and "
            f"{what} = {list(shape)}"
        )
    if t.device != input.device:
        raise ThunderValueError(f"{op}: {name} is on {t.device} but input is on {input.device}")


def _affine(out: TensorProxy, weight, bias, dims: tuple[int, ...]) -> TensorProxy:
    """``out * weight + bias`` with weight/bias laid along ``dims`` of ``out`` (computed in out's dtype)."""
    if weight is not None:
        out = prims.mul(out, prims.broadcast_in_dim(maybe_convert_to_dtype(weight, out.dtype), out.shape, dims))
    if bias is not None:
        out = prims.add(out, prims.broadcast_in_dim(maybe_convert_to_dtype(bias, out.dtype), out.shape, dims))
    return out


def _normalize(a: TensorProxy, dims: tuple[int, ...], eps) -> tuple[TensorProxy, TensorProxy, TensorProxy]:
    """``(a - mean) / sqrt(var + eps)`` over ``dims`` (biased variance); also returns mean and var."""
    var, mean = prims.var_mean(a, dims, correction=0)
    rstd = prims.rsqrt(prims.add(var, eps))
    out = prims.mul(prims.sub(a, keep(mean, a.shape, dims)), keep(rstd, a.shape, dims))
    return out, mean, var


@torchsymbol(F.layer_norm)
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    """``F.layer_norm``: normalise over the trailing ``normalized_shape`` dims, then scale and shift."""
    op = "ltorch.layer_norm"
    check_float(op, "input", input)
    ns = _normalized_shape(op, input, normalized_shape)
    _check_affine(op, "weight", weight, ns, input, "normalized_shape")
    _check_affine(op, "bias", bias, ns, input, "normalized_shape")
    dims = tuple(range(input.ndim - len(ns), input.ndim))
    a = upcast(input)
    if math.prod(a.shape) == 0:
        out = a
    else:
        out, _, _ = _normalize(a, dims, eps)
    out = _affine(out, weight, bias, dims)
    return maybe_convert_to_dtype(out, input.dtype)


_complex_rms_norm = eager_fallback(F.rms_norm, "complex_rms_norm")


@torchsymbol(F.rms_norm)
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """``F.rms_norm``: ``x / sqrt(mean(x**2) + eps) * weight`` over the trailing dims; eps defaults to
    the machine epsilon of the input's dtype."""
    op = "ltorch.rms_norm"
    check_tensor(op, "input", input)
    if input.dtype.is_complex:
        return _complex_rms_norm(input, normalized_shape, weight, eps)
    check_float(op, "input", input)
    ns = _normalized_shape(op, input, normalized_shape)
    _check_affine(op, "weight", weight, ns, input, "normalized_shape")
    if eps is None:
        eps = torch.finfo(input.dtype).eps
    dims = tuple(range(input.ndim - len(ns), input.ndim))
    a = upcast(input)
    if math.prod(a.shape) == 0:
        out = a
    else:
        ms = prims.div(prims.sum(prims.mul(a, a), dims), float(math.prod(ns)))
        out = prims.mul(a, keep(prims.rsqrt(prims.add(ms, eps)), a.shape, dims))
    out = _affine(out, weight, None, dims)
    return maybe_convert_to_dtype(out, input.dtype)


@torchsymbol(F.group_norm)
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    """``F.group_norm``: normalise each group of ``C / num_groups`` channels (with their spatial dims)."""
    op = "ltorch.group_norm"
    check_float(op, "input", input)
    if input.ndim < 2:
        raise ThunderValueError(f"{op}: Expected at least 2 dimensions for input tensor but received {input.ndim}")
    n, c = input.shape[0], input.shape[1]
    if not isinstance(num_groups, int) or num_groups < 1 or c % num_groups:
        raise ThunderValueError(
            f"{op}: Expected number of channels in input to be divisible by num_groups, but got input of shape "
            f"{list(input.shape)} and num_groups={num_groups}"
        )
    _check_affine(op, "weight", weight, (c,), input, "the channel dim")
    _check_affine(op, "bias", bias, (c,), input, "the channel dim")
    a = upcast(input)
    if math.prod(a.shape) == 0:
        out = a
    else:
        grouped = prims.reshape(a, (n, num_groups, math.prod(a.shape[1:]) // num_groups))
        out, _, _ = _normalize(grouped, (2,), eps)
        out = prims.reshape(out, a.shape)
    out = _affine(out, weight, bias, (1,))
    return maybe_convert_to_dtype(out, input.dtype)


@torchsymbol(F.batch_norm, tags=(IN_PLACE, DONT_DCE))
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    """``F.batch_norm``: per-channel (dim 1) normalisation.

    Training: batch statistics; running statistics, when given, are updated in place with
    ``(1 - momentum) * running + momentum * batch`` (unbiased variance). Evaluation: the
    running statistics are used.
    """
    op = "ltorch.batch_norm"
    check_float(op, "input", input)
    if input.ndim < 2:
        raise ThunderValueError(f"{op}: Expected at least 2 dimensions for input tensor but received {input.ndim}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        _check_affine(op, name, t, (c,), input, "the channel dim of input")
    if (running_mean is None) != (running_var is None):
        raise ThunderValueError(f"{op}: running_mean and running_var must be both given or both None")
    if not training and running_mean is None:
        raise ThunderValueError(
            f"{op}: running_mean and running_var must be defined in evaluation mode (training=False); pass "
            "training=True to use batch statistics"
        )
    momentum = pyval(momentum)
    tensor_momentum = isinstance(momentum, TensorProxy)  # nn.BatchNorm's cumulative average (momentum=None)
    if tensor_momentum and (momentum.ndim != 0 or momentum.dtype is not torch.float64):
        raise ThunderTypeError(f"{op}: momentum must be a number (or a 0-d float64 tensor), but got {momentum!r}")
    if not tensor_momentum and not isinstance(momentum, (int, float)):
        raise ThunderTypeError(f"{op}: momentum must be a number, but got {momentum!r}")
    dims = (0, *range(2, input.ndim))
    count = math.prod(input.shape[d] for d in dims)
    a = upcast(input)
    if training:
        if count <= 1:
            raise ThunderValueError(
                f"{op}: Expected more than 1 value per channel when training, got input size {list(input.shape)}"
            )
        out, mean, var = _normalize(a, dims, eps)
        if running_mean is not None:
            unbiased = prims.mul(var, count / (count - 1))
            for running, batch in ((running_mean, mean), (running_var, unbiased)):
                if tensor_momentum:  # in float64, as eager's kernel updates with a double factor
                    r, batch = maybe_convert_to_dtype(running, torch.float64), maybe_convert_to_dtype(batch, torch.float64)
                    m = prims.broadcast_in_dim(momentum, r.shape, ())
                    updated = prims.add(prims.mul(r, prims.sub(1.0, m)), prims.mul(batch, m))
                else:
                    r = maybe_convert_to_dtype(upcast(running), batch.dtype)
                    updated = prims.add(prims.mul(r, 1.0 - momentum), prims.mul(batch, float(momentum)))
                # outside autograd, as eager's kernel: under torch's autograd (Note [Forward and backward traces])
                # the buffer must not come to require grad
                prims.copy_(maybe_convert_to_dtype(updated, running.dtype), running, grad_enabled=False)
    else:
        rm = maybe_convert_to_dtype(upcast(running_mean), a.dtype)
        rv = maybe_convert_to_dtype(upcast(running_var), a.dtype)
        rstd = prims.rsqrt(prims.add(rv, eps))
        out = prims.mul(
            prims.sub(a, prims.broadcast_in_dim(rm, a.shape, (1,))), prims.broadcast_in_dim(rstd, a.shape, (1,))
        )
    out = _affine(out, weight, bias, (1,))
    return maybe_convert_to_dtype(out, input.dtype)


_normalize_with_p = eager_fallback(F.normalize, "normalize_with_p")


@torchsymbol(F.normalize)
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """``F.normalize``: ``input / max(norm_p(input, dim), eps)``; other than a positive ``p`` or ``inf``, torch runs it.

    The norm is computed in the computation dtype with prims (``sqrt(sum(x * x))`` for ``p=2``, whose
    gradient at an all-zero slice is eager's masked zero; for other ``p`` it is not).
    """
    op = "ltorch.normalize"
    check_tensor(op, "input", input)
    if out is not None:
        raise UnsupportedOpError(f"{op}: out= is not supported; use the returned tensor")
    p, eps = pyval(p), pyval(eps)
    # other orders, 0-D and non-floating inputs: torch runs them (and rejects integers as eager does)
    if not isinstance(p, (int, float)) or not p > 0 or input.ndim == 0 or not input.dtype.is_floating_point:
        return _normalize_with_p(input, p, dim, eps)
    d = prims.canonicalize_dim(op, max(input.ndim, 1), dim)
    a = upcast(input)
    if p == math.inf:
        norm = prims.amax(prims.abs(a), (d,))
    elif p == 2:
        norm = sqrt_of_square_sum(prims.sum(prims.mul(a, a), (d,)))
    elif p == 1:
        norm = prims.sum(prims.abs(a), (d,))
    else:
        norm = prims.pow(prims.sum(prims.pow(prims.abs(a), float(p)), (d,)), 1.0 / p)
    norm = prims.where(prims.lt(norm, eps), eps, norm)
    return maybe_convert_to_dtype(prims.div(a, keep(norm, a.shape, (d,))), input.dtype)


def _repeat_channels(t, b: int):
    """A per-channel vector repeated for each of ``b`` instances (``t.repeat(b)``), or None."""
    if t is None:
        return None
    return prims.reshape(prims.broadcast_in_dim(t, (b, t.shape[0]), (1,)), (b * t.shape[0],))


@torchsymbol(F.instance_norm, tags=(IN_PLACE, DONT_DCE))
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.1, eps=1e-5):  # fmt: skip
    """``F.instance_norm``: each (instance, channel) normalised over its spatial dims, as ATen does it,
    a ``batch_norm`` of the input viewed as one instance of ``N * C`` channels.

    With ``use_input_stats`` and running statistics, these are updated in place with the mean over
    the instances of what each would update them to: ``(1 - momentum) * running + momentum * mean_n(stat)``
    (unbiased variance). Without ``use_input_stats`` the running statistics normalise.
    """
    op = "ltorch.instance_norm"
    check_float(op, "input", input)
    if input.ndim < 3:
        raise ThunderValueError(
            f"{op}: Expected at least 3 dimensions (batch, channels, *spatial) for input but received {input.ndim}"
        )
    b, c = input.shape[0], input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        _check_affine(op, name, t, (c,), input, "the channel dim of input")
    if (running_mean is None) != (running_var is None):
        raise ThunderValueError(f"{op}: running_mean and running_var must be both given or both None")
    use_input_stats = bool(pyval(use_input_stats))
    if not use_input_stats and running_mean is None:
        raise ThunderValueError(
            f"{op}: Expected running_mean and running_var to be defined when use_input_stats is false"
        )
    momentum = pyval(momentum)
    spatial = math.prod(input.shape[2:])
    if use_input_stats and spatial <= 1:
        raise ThunderValueError(
            f"{op}: Expected more than 1 spatial element when training, got input size {list(input.shape)}"
        )
    flat = prims.reshape(input, (1, b * c, *input.shape[2:]))
    stats = (None, None) if use_input_stats else (_repeat_channels(running_mean, b), _repeat_channels(running_var, b))
    out = batch_norm(flat, *stats, _repeat_channels(weight, b), _repeat_channels(bias, b), use_input_stats, 0.0, eps)
    if use_input_stats and running_mean is not None:
        var, mean = prims.var_mean(prims.reshape(upcast(input), (b, c, spatial)), (2,), correction=1)
        for running, batch in ((running_mean, mean), (running_var, var)):
            r = maybe_convert_to_dtype(upcast(running), batch.dtype)
            updated = prims.add(
                prims.mul(r, 1.0 - momentum), prims.mul(prims.div(prims.sum(batch, (0,)), float(b)), float(momentum))
            )
            prims.copy_(maybe_convert_to_dtype(updated, running.dtype), running, grad_enabled=False)  # as in batch_norm
    return prims.reshape(out, input.shape)


# ----------------------------------------------------------------------------------------
# Backward kernels and VJP rules
# ----------------------------------------------------------------------------------------


def _check_backward_call(op: str, grad_output, input, output_mask) -> None:
    check_tensor(op, "grad_output", grad_output)
    check_float(op, "input", input)
    if tuple(grad_output.shape) != tuple(input.shape) or grad_output.dtype != input.dtype:
        raise ThunderValueError(
            f"{op}: grad_output ({grad_output.dtype} {list(grad_output.shape)}) must have the input's shape and dtype "
            f"({input.dtype} {list(input.shape)})"
        )
    if grad_output.device != input.device:
        raise ThunderValueError(f"{op}: grad_output is on {grad_output.device} but input is on {input.device}")
    if len(output_mask) != 3 or not all(isinstance(m, bool) for m in output_mask):
        raise ThunderTypeError(f"{op}: output_mask must be three bools (input, weight, bias), got {output_mask!r}")


def _masked_grads(output_mask, input, weight, bias):
    want_input, want_weight, want_bias = output_mask
    return (
        TensorProxy.like(input, requires_grad=False) if want_input else None,
        TensorProxy.like(weight, requires_grad=False) if want_weight and weight is not None else None,
        TensorProxy.like(bias, requires_grad=False) if want_bias and bias is not None else None,
    )


def _layer_norm_backward_impl(grad_output, input, normalized_shape, weight, bias, eps, output_mask):
    _, mean, rstd = _aten_native_layer_norm(input, list(normalized_shape), weight, bias, eps)
    return tuple(
        _aten_native_layer_norm_backward(
            grad_output, input, list(normalized_shape), mean, rstd, weight, bias, list(output_mask)
        )
    )


@torchsymbol(id="torch.layer_norm_backward", torch_impl=_layer_norm_backward_impl)
def layer_norm_backward(grad_output, input, normalized_shape, weight, bias, eps, output_mask):
    """The gradients of ``layer_norm(input, normalized_shape, weight, bias, eps)`` for the inputs
    ``output_mask`` selects (None for the others), with ``aten.native_layer_norm_backward``; the
    statistics it needs are recomputed with ``aten.native_layer_norm``."""
    op = "ltorch.layer_norm_backward"
    _check_backward_call(op, grad_output, input, output_mask)
    ns = _normalized_shape(op, input, normalized_shape)
    _check_affine(op, "weight", weight, ns, input, "normalized_shape")
    _check_affine(op, "bias", bias, ns, input, "normalized_shape")
    return _masked_grads(output_mask, input, weight, bias)


def _batch_norm_backward_impl(grad_output, input, weight, bias, running_mean, running_var, training, eps, output_mask):
    if training:
        # Batch statistics, as the forward computed them; no running statistics, so nothing is updated.
        _, save_mean, save_invstd = _aten_native_batch_norm(input, weight, bias, None, None, True, 0.0, eps)
        running_mean = running_var = None
    else:
        save_mean = save_invstd = None
    return tuple(
        _aten_native_batch_norm_backward(
            grad_output, input, weight, running_mean, running_var, save_mean, save_invstd, training, eps,
            list(output_mask),
        )
    )  # fmt: skip


@torchsymbol(id="torch.batch_norm_backward", torch_impl=_batch_norm_backward_impl)
def batch_norm_backward(grad_output, input, weight, bias, running_mean, running_var, training, eps, output_mask):
    """The gradients of ``batch_norm`` for the inputs ``output_mask`` selects (input, weight, bias),
    with ``aten.native_batch_norm_backward``. In training the batch statistics are recomputed with
    ``aten.native_batch_norm`` (without running statistics: nothing is updated) and
    ``running_mean``/``running_var`` are not read (pass None); in evaluation the running
    statistics are the ones the forward used."""
    op = "ltorch.batch_norm_backward"
    _check_backward_call(op, grad_output, input, output_mask)
    if input.ndim < 2:
        raise ThunderValueError(f"{op}: Expected at least 2 dimensions for input tensor but received {input.ndim}")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var), ("weight", weight), ("bias", bias)):
        _check_affine(op, name, t, (c,), input, "the channel dim of input")
    if not training and (running_mean is None or running_var is None):
        raise ThunderValueError(f"{op}: running_mean and running_var are required in evaluation mode (training=False)")
    return _masked_grads(output_mask, input, weight, bias)


def _layer_norm_with_stats_impl(input, normalized_shape, weight, bias, eps):
    return tuple(_aten_native_layer_norm(input, list(normalized_shape), weight, bias, eps))


@torchsymbol(id="torch.layer_norm_with_stats", torch_impl=_layer_norm_with_stats_impl)
def layer_norm_with_stats(input, normalized_shape, weight, bias, eps):
    """``layer_norm`` that also returns the mean and 1/std its backward needs
    (``aten.native_layer_norm``, the kernel ``F.layer_norm`` runs on CPU): the augmented forward the
    autograd split records for it."""
    k = input.ndim - len(normalized_shape)
    stats = TensorProxy.like(input, shape=(*input.shape[:k], *(1,) * len(normalized_shape)), requires_grad=False)
    return TensorProxy.like(input, requires_grad=False), stats, TensorProxy.like(stats)


@forward_rules.register(layer_norm)
def _layer_norm_forward(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    # Only where the statistics are in the input's dtype for sure: CPU, weight and bias alike.
    if input.device.type != "cpu" or any(t is not None and t.dtype != input.dtype for t in (weight, bias)):
        return None
    ns = _normalized_shape("ltorch.layer_norm", input, normalized_shape)
    out, _, _ = layer_norm_with_stats(input, ns, weight, bias, eps)
    return out


def _layer_norm_backward_from_stats_impl(grad_output, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    return tuple(
        _aten_native_layer_norm_backward(
            grad_output, input, list(normalized_shape), mean, rstd, weight, bias, list(output_mask)
        )
    )


@torchsymbol(id="torch.layer_norm_backward_from_stats", torch_impl=_layer_norm_backward_from_stats_impl)
def layer_norm_backward_from_stats(grad_output, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    """``layer_norm_backward`` with the statistics the forward kept (no recomputation)."""
    _check_backward_call("ltorch.layer_norm_backward_from_stats", grad_output, input, output_mask)
    return _masked_grads(output_mask, input, weight, bias)


@grad_rules.register(layer_norm_with_stats)
def _layer_norm_with_stats_vjp(g, out, input, normalized_shape, weight, bias, eps):
    mask = (grad_asked(input), grad_asked(weight), grad_asked(bias))
    if not any(mask):
        return (None,) * 5
    _, mean, rstd = out
    gi, gw, gb = layer_norm_backward_from_stats(g[0], input, normalized_shape, mean, rstd, weight, bias, mask)
    return (gi, None, gw, gb, None)


def _batch_norm_with_stats_impl(input, running_mean, running_var, weight, bias, momentum, eps):
    return tuple(_aten_native_batch_norm(input, weight, bias, running_mean, running_var, True, momentum, eps))


@torchsymbol(id="torch.batch_norm_with_stats", tags=(IN_PLACE, DONT_DCE), torch_impl=_batch_norm_with_stats_impl)
def batch_norm_with_stats(input, running_mean, running_var, weight, bias, momentum, eps):
    """Training-mode ``batch_norm`` that also returns the batch statistics (mean, 1/std, in the
    computation dtype) its backward needs: ``aten.native_batch_norm``, the kernel ``F.batch_norm`` runs
    on CPU (so the values and the in-place update of the running statistics are eager's). It is what
    the autograd split records for a training ``batch_norm`` (its augmented forward)."""
    c = input.shape[1]
    stats = TensorProxy.like(input, shape=(c,), dtype=computation_dtype(input.dtype), requires_grad=False)
    return TensorProxy.like(input, requires_grad=False), stats, TensorProxy.like(stats)


@forward_rules.register(batch_norm)
def _batch_norm_forward(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1,
                        eps=1e-5):  # fmt: skip
    if not training or input.device.type != "cpu":  # elsewhere eager may run another kernel (cuDNN)
        return None
    if isinstance(momentum, TensorProxy):  # the kernel takes a number
        return None
    out, _, _ = batch_norm_with_stats(input, running_mean, running_var, weight, bias, float(pyval(momentum)), eps)
    return out


def _batch_norm_backward_from_stats_impl(grad_output, input, weight, save_mean, save_invstd, eps, output_mask):
    return tuple(
        _aten_native_batch_norm_backward(
            grad_output, input, weight, None, None, save_mean, save_invstd, True, eps, list(output_mask)
        )
    )


@torchsymbol(id="torch.batch_norm_backward_from_stats", torch_impl=_batch_norm_backward_from_stats_impl)
def batch_norm_backward_from_stats(grad_output, input, weight, save_mean, save_invstd, eps, output_mask):
    """``batch_norm_backward`` in training with the statistics the forward kept (no recomputation)."""
    op = "ltorch.batch_norm_backward_from_stats"
    _check_backward_call(op, grad_output, input, output_mask)
    return _masked_grads(output_mask, input, weight, weight)  # the bias gradient has the weight's shape


@grad_rules.register(batch_norm_with_stats)
def _batch_norm_with_stats_vjp(g, out, input, running_mean, running_var, weight, bias, momentum, eps):
    mask = (grad_asked(input), grad_asked(weight), grad_asked(bias))
    if not any(mask):
        return (None,) * 7
    _, save_mean, save_invstd = out
    gi, gw, gb = batch_norm_backward_from_stats(g[0], input, weight, save_mean, save_invstd, eps, mask)
    return (gi, None, None, gw, gb, None, None)


def _bound(sym, args: tuple, kwargs: dict) -> dict:
    """The call's arguments by name, defaults filled in (rules see the call as it was recorded)."""
    bound = inspect.signature(sym.meta).bind(*args, **kwargs)
    bound.apply_defaults()
    return {k: pyval(v) if not isinstance(v, TensorProxy) else v for k, v in bound.arguments.items()}


@grad_rules.register(layer_norm)
def _layer_norm_vjp(g, out, *args, **kwargs):
    a = _bound(layer_norm, args, kwargs)
    input, weight, bias = a["input"], a["weight"], a["bias"]
    check_real_grad("ltorch.layer_norm", input, weight, bias)
    mask = (grad_asked(input), grad_asked(weight), grad_asked(bias))
    if not any(mask):
        return (None,) * len(args)
    ns = tuple(pyval(n) for n in a["normalized_shape"])
    gi, gw, gb = layer_norm_backward(g, input, ns, weight, bias, a["eps"], mask)
    return (gi, None, gw, gb, None)[: len(args)]


@grad_rules.register(batch_norm)
def _batch_norm_vjp(g, out, *args, **kwargs):
    a = _bound(batch_norm, args, kwargs)
    input, weight, bias = a["input"], a["weight"], a["bias"]
    check_real_grad("ltorch.batch_norm", input, weight, bias)
    mask = (grad_asked(input), grad_asked(weight), grad_asked(bias))
    if not any(mask):
        return (None,) * len(args)
    training = bool(a["training"])
    stats = (None, None) if training else (a["running_mean"], a["running_var"])
    gi, gw, gb = batch_norm_backward(g, input, weight, bias, *stats, training, a["eps"], mask)
    # The running statistics get no gradient (buffers, as in eager).
    return (gi, None, None, gw, gb, None, None, None)[: len(args)]


@grad_rules.register(instance_norm)
def _instance_norm_vjp(g, out, *args, **kwargs):
    # The batch_norm of the decomposition updates nothing here but is an in-place symbol, which the
    # autograd split does not differentiate through: the gradient is that batch_norm's, with eager's
    # backward kernel, and the repeated weight and bias gradients summed over the instances.
    a = _bound(instance_norm, args, kwargs)
    input, weight, bias = a["input"], a["weight"], a["bias"]
    check_real_grad("ltorch.instance_norm", input, weight, bias)
    mask = (grad_asked(input), grad_asked(weight), grad_asked(bias))
    if not any(mask):
        return (None,) * len(args)
    b, c = input.shape[0], input.shape[1]
    flat_shape = (1, b * c, *input.shape[2:])
    training = bool(a["use_input_stats"])
    stats = (
        (None, None) if training else (_repeat_channels(a["running_mean"], b), _repeat_channels(a["running_var"], b))
    )
    gi, gw, gb = batch_norm_backward(
        prims.reshape(g, flat_shape), prims.reshape(input, flat_shape), _repeat_channels(weight, b),
        _repeat_channels(bias, b), *stats, training, a["eps"], mask,
    )  # fmt: skip
    gi = prims.reshape(gi, input.shape) if gi is not None else None
    gw, gb = (prims.sum(prims.reshape(t, (b, c)), (0,)) if t is not None else None for t in (gw, gb))
    return (gi, None, None, gw, gb, None, None, None)[: len(args)]


# ----------------------------------------------------------------------------------------
# nn.BatchNorm*d's forward
# ----------------------------------------------------------------------------------------


def _batch_norm_module_forward(self, input):
    """``_BatchNorm.forward`` as eager writes it, except for the cumulative average (``momentum=None``):
    eager's factor ``1.0 / float(self.num_batches_tracked)`` reads the buffer it has just updated in
    place, which would split the program after an in-place update of an input. Here the factor stays a
    float64 tensor, ``1 / num_batches_tracked`` (eager's double division), and updates the running
    statistics in float64 as eager's kernel does."""
    self._check_input_dim(input)
    exponential_average_factor = 0.0 if self.momentum is None else self.momentum
    if self.training and self.track_running_stats and self.num_batches_tracked is not None:
        self.num_batches_tracked.add_(1)
        if self.momentum is None:
            exponential_average_factor = torch.reciprocal(self.num_batches_tracked.double())
    bn_training = self.training or (self.running_mean is None and self.running_var is None)
    tracked = not self.training or self.track_running_stats
    return F.batch_norm(
        input, self.running_mean if tracked else None, self.running_var if tracked else None, self.weight, self.bias,
        bn_training, exponential_average_factor, self.eps,
    )  # fmt: skip


register_interpreted_replacement(torch.nn.modules.batchnorm._BatchNorm.forward, _batch_norm_module_forward)


@torchsymbol(torch.norm_except_dim)
def norm_except_dim(v, pow=2, dim=0):
    """``torch.norm_except_dim``: the ``pow``-norm over every dim but ``dim``, kept for broadcasting against ``v``
    (``dim=-1``: over all dims, a 0-d result)."""
    check_tensor("ltorch.norm_except_dim", "v", v)
    if dim == -1:
        return vector_norm(v, pow)
    kept = canonicalize_dim("ltorch.norm_except_dim", v.ndim, dim)
    dims = tuple(i for i in range(v.ndim) if i != kept)
    return vector_norm(v, pow, dims, keepdim=True) if dims else v.abs()


@torchsymbol(torch._weight_norm)
def weight_norm(v, g, dim=0):
    """``torch._weight_norm`` (``nn.utils.parametrizations.weight_norm``): ``v * (g / norm_except_dim(v, 2, dim))``."""
    return v * (g / norm_except_dim(v, 2, dim))
