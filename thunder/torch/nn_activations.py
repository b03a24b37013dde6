"""Activations and softmax from ``torch.nn.functional`` (and their ``torch``/``Tensor``
aliases): relu, relu6, hardtanh, leaky_relu, elu, gelu, silu, mish, softplus, hardswish,
hardsigmoid, softmax, log_softmax.

Each decomposes into elementwise prims (and ``amax``/``sum`` for softmax), computed in
float32 for bf16/f16 inputs. Functions with an ``inplace`` flag are routed by a dispatcher
(``nn_utils.register_inplace_dispatch``) to the pure symbol or its in-place twin.

Layer: language. Imports: core, torch.base, torch.elementwise, torch.nn_utils.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.proxies import TensorProxy
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
