"""Activations and softmax from ``torch.nn.functional`` (and their ``torch``/``Tensor``
aliases): relu, relu6, hardtanh, leaky_relu, elu, gelu, silu, mish, softplus, hardswish,
hardsigmoid, softmax, log_softmax.

Each decomposes into elementwise prims (and ``amax``/``sum`` for softmax), computed in
float32 for bf16/f16 inputs. Functions with an ``inplace`` flag are routed by a dispatcher
(``nn_utils.register_inplace_dispatch``) to the pure symbol or its in-place twin.

relu, gelu, silu, tanh, sigmoid and the four softmax symbols have VJP rules (Note [VJP rules] in
``thunder.core.rules``) that compute their gradients with the backward kernels eager's autograd
uses, each a symbol of its own whose torch implementation is the aten op (``threshold_backward``,
``gelu_backward``, ``silu_backward``, ``tanh_backward``, ``sigmoid_backward``,
``softmax_backward_data``, ``log_softmax_backward_data``): the gradients are eager's, bit for bit,
one kernel where the prims' rule would run three. ``tanh_backward``, ``sigmoid_backward`` and the softmaxes'
backward symbols decompose into prims as well, so a fusion executor that claims prims fuses them. relu and the softmaxes read their output, as eager's do,
so the forward keeps the output rather than the input. The other backward symbols have no
decomposition; none has a rule of its own (no double backward, as in the rest of the transform).

Layer: language. Imports: core, torch.base, torch.elementwise, torch.nn_utils.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import check_real_grad, check_same_device, conj, is_differentiable
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import grad_rules
from thunder.torch.base import make_inplace, maybe_convert_to_dtype, torch_to_thunder_map, torchsymbol
from thunder.torch.elementwise import clamp, sigmoid, tanh
from thunder.torch.nn_utils import (
    amax_keep,
    check_choice,
    check_float,
    check_tensor,
    dim_arg,
    register_inplace_dispatch,
    sum_keep,
    upcast,
)

__all__ = [
    "relu", "relu_", "relu6", "relu6_", "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_", "elu", "elu_",
    "gelu", "silu", "silu_", "mish", "mish_", "softplus", "hardswish", "hardswish_", "hardsigmoid", "hardsigmoid_",
    "softmax", "log_softmax", "torch_softmax", "torch_log_softmax",
    "threshold_backward", "gelu_backward", "silu_backward", "tanh_backward", "sigmoid_backward",
    "softmax_backward_data", "log_softmax_backward_data",
]  # fmt: skip

# F.tanh / F.sigmoid are Python wrappers of the torch functions: the same symbols.
torch_to_thunder_map[F.tanh] = tanh
torch_to_thunder_map[F.sigmoid] = sigmoid


def _unary_float(op: str, a):
    """Validates a floating-point input; returns (upcast input, result dtype)."""
    check_float(op, "input", a)
    return upcast(a), a.dtype


def _finish(out, dtype):
    return maybe_convert_to_dtype(out, dtype)


@torchsymbol(torch.relu, method_name="relu")
def relu(input):
    """``torch.relu``: ``max(input, 0)``, NaN propagated; integer inputs allowed."""
    op = "ltorch.relu"
    check_tensor(op, "input", input)
    if input.dtype is torch.bool:
        raise ThunderTypeError(f'{op}: "relu" is not implemented for bool tensors (dtype torch.bool); convert to a numeric dtype')
    if input.dtype.is_complex:
        raise ThunderTypeError(f'{op}: "relu" is not implemented for complex tensors (dtype {input.dtype})')
    return prims.where(prims.le(input, 0), 0, input)


relu_ = make_inplace(relu, torch_fn=torch.relu_)
torch_to_thunder_map[F.relu_] = relu_
register_inplace_dispatch(F.relu, relu, relu_)


@torchsymbol(F.hardtanh)
def hardtanh(input, min_val=-1.0, max_val=1.0):
    """``F.hardtanh``: clamp to ``[min_val, max_val]``."""
    op = "ltorch.hardtanh"
    check_tensor(op, "input", input)
    if input.dtype is torch.bool:
        raise ThunderTypeError(f'{op}: "hardtanh" is not implemented for bool tensors (dtype torch.bool)')
    if input.dtype is torch.uint8 and (min_val < 0 or max_val < 0):
        raise ThunderValueError(
            f"{op}: cannot do hardtanh on an unsigned type (dtype {input.dtype}) with negative limits "
            f"(min_val={min_val}, max_val={max_val})"
        )
    if dtypes.is_integer_dtype(input.dtype):
        min_val, max_val = int(min_val), int(max_val)
    return clamp(input, min_val, max_val)


@grad_rules.register(hardtanh)
def _hardtanh_vjp(g, out, a, min_val=-1.0, max_val=1.0):
    """Eager's ``hardtanh_backward``: the gradient passes strictly inside the bounds (clamp's
    decomposition would pass it at a bound too). At NaN eager's CPU kernel is not consistent
    (its vectorised loop gives 0, its scalar tail the cotangent); this gives 0."""
    inside = prims.bitwise_and(prims.gt(a, min_val), prims.lt(a, max_val))
    return (prims.where(inside, g, 0), None, None)


hardtanh_ = make_inplace(hardtanh, torch_fn=F.hardtanh_)
register_inplace_dispatch(F.hardtanh, hardtanh, hardtanh_)


@torchsymbol(F.relu6)
def relu6(input):
    """``F.relu6``: ``hardtanh(input, 0, 6)``."""
    return hardtanh(input, 0.0, 6.0)


relu6_ = make_inplace(relu6)
register_inplace_dispatch(F.relu6, relu6, relu6_)


@torchsymbol(F.leaky_relu)
def leaky_relu(input, negative_slope=0.01):
    """``F.leaky_relu``: ``input`` where positive, ``negative_slope * input`` elsewhere."""
    a, dtype = _unary_float("ltorch.leaky_relu", input)
    return _finish(prims.where(prims.gt(a, 0), a, prims.mul(a, negative_slope)), dtype)


leaky_relu_ = make_inplace(leaky_relu, torch_fn=F.leaky_relu_)
register_inplace_dispatch(F.leaky_relu, leaky_relu, leaky_relu_)


@torchsymbol(F.elu)
def elu(input, alpha=1.0):
    """``F.elu``: ``input`` where positive, ``alpha * (exp(input) - 1)`` elsewhere."""
    a, dtype = _unary_float("ltorch.elu", input)
    return _finish(prims.where(prims.gt(a, 0), a, prims.mul(prims.expm1(a), alpha)), dtype)


elu_ = make_inplace(elu, torch_fn=F.elu_)
register_inplace_dispatch(F.elu, elu, elu_)


@torchsymbol(F.gelu)
def gelu(input, approximate="none"):
    """``F.gelu``: ``x * Phi(x)`` exactly (erf) or with the tanh approximation."""
    op = "ltorch.gelu"
    check_choice(op, "approximate", approximate, ("none", "tanh"))
    a, dtype = _unary_float(op, input)
    if approximate == "none":
        cdf = prims.mul(prims.add(prims.erf(prims.mul(a, 1 / math.sqrt(2.0))), 1.0), 0.5)
    else:
        inner = prims.mul(prims.add(a, prims.mul(prims.mul(prims.mul(a, a), a), 0.044715)), math.sqrt(2.0 / math.pi))
        cdf = prims.mul(prims.add(prims.tanh(inner), 1.0), 0.5)
    return _finish(prims.mul(a, cdf), dtype)


@torchsymbol(F.silu)
def silu(input):
    """``F.silu``: ``input * sigmoid(input)`` (floating-point or complex)."""
    if isinstance(input, TensorProxy) and input.dtype.is_complex:
        return prims.mul(input, prims.sigmoid(input))
    a, dtype = _unary_float("ltorch.silu", input)
    return _finish(prims.mul(a, prims.sigmoid(a)), dtype)


silu_ = make_inplace(silu)
register_inplace_dispatch(F.silu, silu, silu_)


def _softplus(a, beta, threshold):
    scaled = prims.mul(a, beta) if beta != 1 else a
    soft = prims.log1p(prims.exp(scaled))
    if beta != 1:
        soft = prims.div(soft, beta)
    return prims.where(prims.gt(scaled, threshold), a, soft)


@torchsymbol(F.mish)
def mish(input):
    """``F.mish``: ``input * tanh(softplus(input))``."""
    a, dtype = _unary_float("ltorch.mish", input)
    return _finish(prims.mul(a, prims.tanh(_softplus(a, 1, 20))), dtype)


mish_ = make_inplace(mish)
register_inplace_dispatch(F.mish, mish, mish_)


@torchsymbol(F.softplus)
def softplus(input, beta=1.0, threshold=20.0):
    """``F.softplus``: ``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    a, dtype = _unary_float("ltorch.softplus", input)
    return _finish(_softplus(a, beta, threshold), dtype)


def _relu6_shifted(a):
    """``relu6(a + 3)``; NaN propagates as in PyTorch."""
    shifted = prims.add(a, 3.0)
    return prims.where(prims.lt(shifted, 0.0), 0.0, prims.where(prims.gt(shifted, 6.0), 6.0, shifted))


@torchsymbol(F.hardswish)
def hardswish(input):
    """``F.hardswish``: ``x * relu6(x + 3) / 6``."""
    a, dtype = _unary_float("ltorch.hardswish", input)
    return _finish(prims.div(prims.mul(a, _relu6_shifted(a)), 6.0), dtype)


hardswish_ = make_inplace(hardswish)
register_inplace_dispatch(F.hardswish, hardswish, hardswish_)


@torchsymbol(F.hardsigmoid)
def hardsigmoid(input):
    """``F.hardsigmoid``: ``relu6(x + 3) / 6``."""
    a, dtype = _unary_float("ltorch.hardsigmoid", input)
    return _finish(prims.div(_relu6_shifted(a), 6.0), dtype)


hardsigmoid_ = make_inplace(hardsigmoid)
register_inplace_dispatch(F.hardsigmoid, hardsigmoid, hardsigmoid_)


# ----------------------------------------------------------------------------------------
# softmax
# ----------------------------------------------------------------------------------------


def _implicit_softmax_dim(ndim: int) -> int:
    # PyTorch's legacy choice when F.softmax is called without dim (it also warns).
    return 0 if ndim in (0, 1, 3) else 1


def _softmax_common(name: str, input, dim, dtype, *, log: bool):
    op = f"ltorch.{name}"
    check_tensor(op, "input", input)
    if dtype is not None:
        if not isinstance(dtype, torch.dtype):
            raise ThunderTypeError(f"{op}: dtype must be a torch.dtype, but got {dtype!r}")
        input = maybe_convert_to_dtype(input, dtype)
    if not dtypes.is_float_dtype(input.dtype):
        raise ThunderTypeError(
            f'{op}: "{name}" is not implemented for input of dtype {input.dtype}; pass dtype=torch.float32 or convert '
            "the input to a floating-point dtype"
        )
    if dim is None:
        dim = _implicit_softmax_dim(input.ndim)
    d = dim_arg(op, input, dim)
    result_dtype = input.dtype
    a = upcast(input)
    if a.ndim == 0:
        a = prims.reshape(a, (1,))
    if a.shape[d] == 0:
        out = a
    else:
        shifted = prims.sub(a, amax_keep(a, (d,)))
        e = prims.exp(shifted)
        s = sum_keep(e, (d,))
        out = prims.sub(shifted, prims.log(s)) if log else prims.div(e, s)
    if input.ndim == 0:
        out = prims.reshape(out, ())
    return maybe_convert_to_dtype(out, result_dtype)


@torchsymbol(F.softmax)
def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``F.softmax``: ``exp(x - max) / sum(exp(x - max))`` along ``dim`` (computed in ``dtype`` if given)."""
    return _softmax_common("softmax", input, dim, dtype, log=False)


@torchsymbol(F.log_softmax)
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    """``F.log_softmax``: ``x - max - log(sum(exp(x - max)))`` along ``dim``."""
    return _softmax_common("log_softmax", input, dim, dtype, log=True)


# torch.softmax / Tensor.softmax take ``dtype`` as the third positional argument, so they get
# their own symbols (the torch executor calls them with exactly the user's arguments).
@torchsymbol(torch.softmax, torch.special.softmax, method_name="softmax", id="torch.softmax_tensor")
def torch_softmax(input, dim, dtype=None):
    """``torch.softmax`` / ``Tensor.softmax``: see ``softmax``."""
    return _softmax_common("softmax", input, dim, dtype, log=False)


@torchsymbol(torch.log_softmax, torch.special.log_softmax, method_name="log_softmax", id="torch.log_softmax_tensor")
def torch_log_softmax(input, dim, dtype=None):
    """``torch.log_softmax`` / ``Tensor.log_softmax``: see ``log_softmax``."""
    return _softmax_common("log_softmax", input, dim, dtype, log=True)


# ----------------------------------------------------------------------------------------
# Backward kernels and VJP rules
# ----------------------------------------------------------------------------------------


def _check_grad_of(op: str, grad, name: str, t) -> None:
    """``grad`` is a cotangent of ``t``'s shape and device (as the rules call the backward kernels)."""
    check_tensor(op, "grad_output", grad)
    check_tensor(op, name, t)
    if tuple(grad.shape) != tuple(t.shape):
        raise ThunderValueError(
            f"{op}: grad_output of shape {list(grad.shape)} does not match {name} of shape {list(t.shape)}"
        )
    check_same_device(op, [grad, t], ["grad_output", name])


def _backward_dtype(op: str, grad, t, name: str, accepts) -> torch.dtype:
    """The result dtype of an eager backward kernel (a TensorIterator op: ``grad`` and ``t`` are
    promoted), or the error eager raises where ``accepts(grad dtype, promoted dtype)`` is False."""
    dtype = dtypes.result_type(grad, t)
    if not accepts(grad.dtype, dtype):
        raise ThunderTypeError(
            f'{op}: "{op.removeprefix("ltorch.")}" is not implemented for grad_output of dtype {grad.dtype} and '
            f"{name} of dtype {t.dtype} (computed in {dtype})"
        )
    return dtype


@torchsymbol(id="torch.threshold_backward", torch_impl=torch.ops.aten.threshold_backward)
def threshold_backward(grad_output, self, threshold):
    """``aten.threshold_backward``: ``grad_output`` where ``self > threshold``, 0 elsewhere (relu's
    backward, called with relu's output)."""
    op = "ltorch.threshold_backward"
    _check_grad_of(op, grad_output, "self", self)
    if isinstance(threshold, TensorProxy) or not isinstance(pyval(threshold), (int, float)):
        what = f"a tensor of dtype {threshold.dtype}" if isinstance(threshold, TensorProxy) else repr(threshold)
        raise ThunderTypeError(f"{op}: threshold must be a number, but got {what}")
    # Eager's kernel takes any promoted dtype but bool and complex.
    dtype = _backward_dtype(op, grad_output, self, "self", lambda g, d: d is not torch.bool and not d.is_complex)
    return TensorProxy.like(grad_output, dtype=dtype, requires_grad=False)


@torchsymbol(id="torch.gelu_backward", torch_impl=torch.ops.aten.gelu_backward)
def gelu_backward(grad_output, self, *, approximate="none"):
    """``aten.gelu_backward``: the gradient of ``gelu(self, approximate)``."""
    op = "ltorch.gelu_backward"
    check_choice(op, "approximate", approximate, ("none", "tanh"))
    _check_grad_of(op, grad_output, "self", self)

    def accepts(g, d):
        # A real floating result; eager's CPU kernel (oneDNN) also rejects bool and int64 cotangents.
        return dtypes.is_float_dtype(d) and (dtypes.is_float_dtype(g) or g is torch.uint8)

    dtype = _backward_dtype(op, grad_output, self, "self", accepts)
    return TensorProxy.like(grad_output, dtype=dtype, requires_grad=False)


@torchsymbol(id="torch.silu_backward", torch_impl=torch.ops.aten.silu_backward)
def silu_backward(grad_output, self):
    """``aten.silu_backward``: the gradient of ``silu(self)``."""
    op = "ltorch.silu_backward"
    _check_grad_of(op, grad_output, "self", self)
    dtype = _backward_dtype(op, grad_output, self, "self", lambda g, d: dtypes.is_inexact_dtype(d))
    return TensorProxy.like(grad_output, dtype=dtype, requires_grad=False)


def _output_backward(op: str, grad_output, output, derivative):
    """``grad_output * conj(derivative(output))`` computed as eager's kernel does: both promoted,
    reduced precision computed in float32 and rounded once."""
    _check_grad_of(op, grad_output, "output", output)
    dtype = _backward_dtype(op, grad_output, output, "output", lambda g, d: dtypes.is_inexact_dtype(d))
    computation = torch.float32 if dtype in dtypes.low_precision_dtypes else dtype
    g, y = (maybe_convert_to_dtype(t, computation) for t in (grad_output, output))
    return maybe_convert_to_dtype(derivative(g, y), dtype)


@torchsymbol(id="torch.tanh_backward", torch_impl=torch.ops.aten.tanh_backward)
def tanh_backward(grad_output, output):
    """``aten.tanh_backward``: ``grad_output * conj(1 - output**2)``, one kernel in eager."""
    return _output_backward(
        "ltorch.tanh_backward", grad_output, output, lambda g, y: prims.mul(g, conj(prims.sub(1, prims.mul(y, y))))
    )


@torchsymbol(id="torch.sigmoid_backward", torch_impl=torch.ops.aten.sigmoid_backward)
def sigmoid_backward(grad_output, output):
    """``aten.sigmoid_backward``: ``grad_output * conj((1 - output) * output)``, one kernel in eager."""

    def derivative(g, y):
        if dtypes.is_complex_dtype(y.dtype):
            return prims.mul(g, conj(prims.mul(prims.sub(1, y), y)))
        return prims.mul(prims.mul(g, prims.sub(1, y)), y)  # eager's order: (g * (1 - y)) * y

    return _output_backward("ltorch.sigmoid_backward", grad_output, output, derivative)


def _softmax_backward_meta(op: str, grad_output, output, dim, input_dtype):
    _check_grad_of(op, grad_output, "output", output)
    check_float(op, "output", output)
    if grad_output.dtype != output.dtype:
        raise ThunderTypeError(f"{op}: grad_output has dtype {grad_output.dtype} but output has dtype {output.dtype}")
    dim_arg(op, output, dim)
    if not isinstance(input_dtype, torch.dtype) or not dtypes.is_float_dtype(input_dtype):
        raise ThunderTypeError(f"{op}: input_dtype must be a floating-point torch.dtype, but got {input_dtype!r}")
    half_to_float = input_dtype in dtypes.low_precision_dtypes and output.dtype is torch.float32
    if input_dtype != output.dtype and not half_to_float:
        raise ThunderTypeError(
            f"{op}: input_dtype {input_dtype} must be the output's dtype {output.dtype} (or a half-precision dtype "
            "for a float32 output)"
        )
    return dim_arg(op, output, dim)


def _softmax_backward(op: str, grad_output, output, dim, input_dtype, formula):
    """``formula(g, y, d)`` in float32 for reduced precision (as eager's kernel computes), in
    ``input_dtype``: the decomposition a fusion executor that claims prims fuses."""
    d = _softmax_backward_meta(op, grad_output, output, dim, input_dtype)
    g, y = (upcast(t) for t in (grad_output, output))
    if y.ndim == 0:
        g, y = prims.reshape(g, (1,)), prims.reshape(y, (1,))
    result = formula(g, y, d) if y.shape[d] else g
    if output.ndim == 0:
        result = prims.reshape(result, ())
    return maybe_convert_to_dtype(result, input_dtype)


@torchsymbol(id="torch.softmax_backward_data", torch_impl=torch.ops.aten._softmax_backward_data)
def softmax_backward_data(grad_output, output, dim, input_dtype):
    """``aten._softmax_backward_data``: ``output * (grad_output - sum(grad_output * output, dim))``, in
    ``input_dtype`` (the dtype softmax's input had)."""

    def formula(g, y, d):
        return prims.mul(y, prims.sub(g, sum_keep(prims.mul(g, y), (d,))))

    return _softmax_backward("ltorch.softmax_backward_data", grad_output, output, dim, input_dtype, formula)


@torchsymbol(id="torch.log_softmax_backward_data", torch_impl=torch.ops.aten._log_softmax_backward_data)
def log_softmax_backward_data(grad_output, output, dim, input_dtype):
    """``aten._log_softmax_backward_data``: ``grad_output - exp(output) * sum(grad_output, dim)``, in
    ``input_dtype``."""

    def formula(g, y, d):
        return prims.sub(g, prims.mul(prims.exp(y), sum_keep(g, (d,))))

    return _softmax_backward("ltorch.log_softmax_backward_data", grad_output, output, dim, input_dtype, formula)


def _grads(first, rest) -> tuple:
    """One entry per positional argument: ``first`` for the input, None for the others (numbers, flags)."""
    return (first, *(None for _ in rest))


@grad_rules.register(relu)
def _relu_vjp(g, out, input):
    # Eager's rule: threshold_backward(grad, result, 0), so the forward's output is what is kept.
    return (threshold_backward(g, out, 0) if is_differentiable(input) else None,)


@grad_rules.register(tanh)
def _tanh_vjp(g, out, input):
    return (tanh_backward(g, out) if is_differentiable(input) else None,)


@grad_rules.register(sigmoid)
def _sigmoid_vjp(g, out, input):
    return (sigmoid_backward(g, out) if is_differentiable(input) else None,)


@grad_rules.register(gelu)
def _gelu_vjp(g, out, input, *rest, **kwargs):
    check_real_grad("ltorch.gelu", input)
    approximate = rest[0] if rest else kwargs.get("approximate", "none")
    return _grads(gelu_backward(g, input, approximate=approximate), rest)


@grad_rules.register(silu)
def _silu_vjp(g, out, input):
    if input.dtype.is_complex:
        # Eager's autograd refuses complex silu; thunder differentiates it as ``x * sigmoid(x)``:
        # ``g * conj(s + x * s * (1 - s))``.
        s = prims.sigmoid(input)
        d = prims.add(s, prims.mul(prims.mul(input, s), prims.sub(1, s)))
        return (prims.mul(g, conj(d)),)
    return (silu_backward(g, input),)


def _softmax_grad(backward_sym, g, out, input, dim):
    if dim is None:
        dim = _implicit_softmax_dim(input.ndim)
    d = prims.canonicalize_dim(f"ltorch.{backward_sym.name}", out.ndim, dim)
    # The symbol ran on ``input`` converted to ``dtype`` (the output's dtype); that conversion's
    # gradient converts back, as eager's ``input.to(dtype)`` does.
    grad = backward_sym(g, out, d, out.dtype)
    return maybe_convert_to_dtype(grad, input.dtype)


def _functional_softmax_vjp(backward_sym):
    # F.softmax(input, dim=None, _stacklevel=3, dtype=None) and F.log_softmax: dim is the only
    # argument besides input that the gradient depends on (dtype is the output's dtype).
    def rule(g, out, input, *rest, **kwargs):
        dim = rest[0] if rest else kwargs.get("dim")
        return _grads(_softmax_grad(backward_sym, g, out, input, dim), rest)

    return rule


grad_rules.register(softmax)(_functional_softmax_vjp(softmax_backward_data))
grad_rules.register(log_softmax)(_functional_softmax_vjp(log_softmax_backward_data))
# torch.softmax(input, dim, dtype=None) / Tensor.softmax: the same rule (dim is the second argument).
grad_rules.register(torch_softmax)(_functional_softmax_vjp(softmax_backward_data))
grad_rules.register(torch_log_softmax)(_functional_softmax_vjp(log_softmax_backward_data))
