"""``torch.nn.functional`` in the torch language. This module holds convolution (plain and
transposed) and dropout, and re-exports the families split into sibling modules: activations
and softmax (``nn_activations``), normalisations (``nn_norms``), losses (``nn_losses``),
embeddings (``nn_embedding``), attention (``nn_attention``), pooling (``nn_pooling``),
upsampling and pixel shuffle (``nn_resample``) and recurrent layers (``nn_recurrent``).

Layer: language. Imports: core, torch.base, torch.elementwise, torch.nn_*.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import grad_rules
from thunder.core.symbol import RANDOM
from thunder.torch.base import make_inplace, maybe_convert_to_dtype, torchsymbol
from thunder.torch.eager_ops import eager_fallback
from thunder.torch.nn_activations import *  # noqa: F403
from thunder.torch.nn_activations import __all__ as _activations_all
from thunder.torch.nn_attention import *  # noqa: F403
from thunder.torch.nn_attention import __all__ as _attention_all
from thunder.torch.nn_embedding import *  # noqa: F403
from thunder.torch.nn_embedding import __all__ as _embedding_all
from thunder.torch.nn_losses import *  # noqa: F403
from thunder.torch.nn_losses import __all__ as _losses_all
from thunder.torch.nn_norms import *  # noqa: F403
from thunder.torch.nn_norms import __all__ as _norms_all
from thunder.torch.nn_pooling import *  # noqa: F403
from thunder.torch.nn_pooling import __all__ as _pooling_all
from thunder.torch.nn_recurrent import *  # noqa: F403
from thunder.torch.nn_recurrent import __all__ as _recurrent_all
from thunder.torch.nn_resample import *  # noqa: F403
from thunder.torch.nn_resample import __all__ as _resample_all
from thunder.torch.nn_utils import check_float, check_tensor, expand_param, register_inplace_dispatch, upcast

__all__ = [
    "conv1d",
    "conv2d",
    "conv3d",
    "conv_transpose1d",
    "conv_transpose2d",
    "conv_transpose3d",
    "dropout",
    "dropout_",
    "dropout_with_noise",
    *_activations_all,
    *_norms_all,
    *_losses_all,
    *_attention_all,
    *_embedding_all,
    *_pooling_all,
    *_resample_all,
    *_recurrent_all,
]


# ----------------------------------------------------------------------------------------
# convolution
# ----------------------------------------------------------------------------------------


def _check_conv_operands(op: str, name: str, n: int, input, weight, bias, weight_layout: str) -> None:
    """What eager checks of a convolution's (or transposed convolution's) operands."""
    check_tensor(op, "input", input)
    check_tensor(op, "weight", weight)
    if bias is not None:
        check_tensor(op, "bias", bias)
    if input.ndim not in (n + 1, n + 2):
        raise ThunderValueError(
            f"{op}: Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to {name}, but got input of size: "
            f"{list(input.shape)}"
        )
    if weight.ndim != n + 2:
        raise ThunderValueError(f"{op}: weight must be {n + 2}-D ({weight_layout}), got shape {list(weight.shape)}")
    for t, arg in ((weight, "weight"), (bias, "bias")):
        if t is not None and t.dtype != input.dtype:
            raise ThunderTypeError(
                f"{op}: input type ({input.dtype}) and {arg} type ({t.dtype}) should be the same; convert one, "
                f"e.g. {arg}.to({input.dtype})"
            )


#: Integer and complex convolutions, which the floating-point decomposition does not cover: torch
#: runs them (and rejects what eager rejects, e.g. integer convolutions on CUDA).
_NON_FLOAT_CONV = {
    fn.__name__: eager_fallback(fn, f"{fn.__name__}_non_float")
    for fn in (F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)
}


def _non_float(input) -> bool:
    return isinstance(input, TensorProxy) and not dtypes.is_float_dtype(input.dtype)


def _conv(n: int, input, weight, bias, stride, padding, dilation, groups):
    if _non_float(input):
        return _NON_FLOAT_CONV[f"conv{n}d"](input, weight, bias, stride, padding, dilation, groups)
    op = f"ltorch.conv{n}d"
    _check_conv_operands(op, f"conv{n}d", n, input, weight, bias, "out_channels, in_channels / groups, *kernel")
    stride = expand_param(op, "stride", stride, n)
    dilation = expand_param(op, "dilation", dilation, n)
    groups = pyval(groups)
    if not isinstance(groups, int) or groups < 1:
        raise ThunderValueError(f"{op}: non-positive groups is not supported (got groups={groups!r})")
    if any(s < 1 for s in stride):
        raise ThunderValueError(f"{op}: non-positive stride is not supported (got stride={stride})")
    if any(d < 1 for d in dilation):
        raise ThunderValueError(f"{op}: dilation should be greater than zero (got dilation={dilation})")
    unbatched = input.ndim == n + 1
    a = prims.reshape(input, (1, *input.shape)) if unbatched else input
    c_in = a.shape[1]
    if c_in != weight.shape[1] * groups:
        raise ThunderValueError(
            f"{op}: Given groups={groups}, weight of size {list(weight.shape)}, expected input{list(a.shape)} to have "
            f"{weight.shape[1] * groups} channels, but got {c_in} channels instead"
        )
    if weight.shape[0] % groups:
        raise ThunderValueError(
            f"{op}: Given groups={groups}, expected weight to be divisible by {groups} at dimension 0, but got weight "
            f"of size {list(weight.shape)} instead"
        )
    kernel = weight.shape[2:]
    if isinstance(padding, str):
        if padding not in ("same", "valid"):
            raise ThunderValueError(f"{op}: Invalid padding string {padding!r}, should be one of ['valid', 'same']")
        if padding == "valid":
            pads = (0,) * n
        else:
            if any(s != 1 for s in stride):
                raise ThunderValueError(f"{op}: padding='same' is not supported for strided convolutions")
            totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
            pads = tuple(t // 2 for t in totals)
            extra = [t - 2 * p for t, p in zip(totals, pads)]
            if any(extra):
                # PyTorch pads the odd remainder on the right, then convolves symmetrically.
                a = prims.pad(a, 0.0, ((0, 0, 0), (0, 0, 0), *((0, e, 0) for e in extra)))
    else:
        pads = expand_param(op, "padding", padding, n)
        if any(p < 0 for p in pads):
            raise ThunderValueError(f"{op}: negative padding is not supported (got padding={pads})")
    out = prims.convolution(a, weight, bias, stride, pads, dilation, False, (0,) * n, groups)
    return prims.reshape(out, out.shape[1:]) if unbatched else out


@torchsymbol(F.conv1d, torch.conv1d)
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``F.conv1d``: padding may be an int, a tuple, "valid" or "same"; unbatched input allowed."""
    return _conv(1, input, weight, bias, stride, padding, dilation, groups)


@torchsymbol(F.conv2d, torch.conv2d)
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``F.conv2d``: see ``conv1d``."""
    return _conv(2, input, weight, bias, stride, padding, dilation, groups)


@torchsymbol(F.conv3d, torch.conv3d)
def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``F.conv3d``: see ``conv1d``."""
    return _conv(3, input, weight, bias, stride, padding, dilation, groups)


def _conv_transpose(n: int, input, weight, bias, stride, padding, output_padding, groups, dilation):
    if _non_float(input):
        return _NON_FLOAT_CONV[f"conv_transpose{n}d"](
            input, weight, bias, stride, padding, output_padding, groups, dilation
        )
    op = f"ltorch.conv_transpose{n}d"
    _check_conv_operands(
        op, f"conv_transpose{n}d", n, input, weight, bias, "in_channels, out_channels / groups, *kernel"
    )
    stride = expand_param(op, "stride", stride, n)
    padding = expand_param(op, "padding", padding, n)
    output_padding = expand_param(op, "output_padding", output_padding, n)
    dilation = expand_param(op, "dilation", dilation, n)
    groups = pyval(groups)
    if not isinstance(groups, int) or groups < 1:
        raise ThunderValueError(f"{op}: non-positive groups is not supported (got groups={groups!r})")
    if any(s < 1 for s in stride) or any(d < 1 for d in dilation) or any(p < 0 for p in padding):
        raise ThunderValueError(
            f"{op}: stride and dilation must be positive and padding non-negative (got stride={stride}, "
            f"dilation={dilation}, padding={padding})"
        )
    if any(p < 0 or p >= max(s, d) for p, s, d in zip(output_padding, stride, dilation)):
        raise ThunderValueError(
            f"{op}: output padding must be smaller than either stride or dilation, but got output_padding="
            f"{output_padding}, stride={stride}, dilation={dilation}"
        )
    unbatched = input.ndim == n + 1
    a = prims.reshape(input, (1, *input.shape)) if unbatched else input
    if a.shape[1] != weight.shape[0] or weight.shape[0] % groups:
        raise ThunderValueError(
            f"{op}: Given transposed=1, weight of size {list(weight.shape)}, expected input{list(a.shape)} to have "
            f"{weight.shape[0]} channels (divisible by groups={groups}), but got {a.shape[1]} channels instead"
        )
    if bias is not None and tuple(bias.shape) != (weight.shape[1] * groups,):
        raise ThunderValueError(
            f"{op}: bias of shape {list(bias.shape)} does not match the {weight.shape[1] * groups} output channels"
        )
    sizes = [
        (i - 1) * s - 2 * p + d * (k - 1) + o + 1
        for i, s, p, d, k, o in zip(a.shape[2:], stride, padding, dilation, weight.shape[2:], output_padding)
    ]
    if any(size < 1 for size in sizes):
        raise ThunderValueError(
            f"{op}: Given input size per channel {list(a.shape[2:])}, calculated output size {sizes} is too small"
        )
    out = prims.convolution(a, weight, bias, stride, padding, dilation, True, output_padding, groups)
    return prims.reshape(out, out.shape[1:]) if unbatched else out


@torchsymbol(F.conv_transpose1d, torch.conv_transpose1d)
def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """``F.conv_transpose1d`` (``nn.ConvTranspose1d``): the gradient of ``conv1d`` w.r.t. its input, as
    a layer; ``prims.convolution`` with ``transposed=True``. Unbatched input allowed."""
    return _conv_transpose(1, input, weight, bias, stride, padding, output_padding, groups, dilation)


@torchsymbol(F.conv_transpose2d, torch.conv_transpose2d)
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """``F.conv_transpose2d``: see ``conv_transpose1d``."""
    return _conv_transpose(2, input, weight, bias, stride, padding, output_padding, groups, dilation)


@torchsymbol(F.conv_transpose3d, torch.conv_transpose3d)
def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """``F.conv_transpose3d``: see ``conv_transpose1d``."""
    return _conv_transpose(3, input, weight, bias, stride, padding, output_padding, groups, dilation)


# ----------------------------------------------------------------------------------------
# dropout
# ----------------------------------------------------------------------------------------


@torchsymbol(F.dropout, tags=(RANDOM,))
def dropout(input, p=0.5, training=True):
    """``F.dropout``: zeroes each element with probability ``p`` and scales the rest by ``1 / (1 - p)``.

    Identity when ``training`` is False, ``p`` is 0 or ``input`` is empty, of any dtype (no random numbers are
    drawn), as in eager.
    """
    op = "ltorch.dropout"
    check_tensor(op, "input", input)
    p = pyval(p)
    if not isinstance(p, (int, float)) or not 0 <= p <= 1:
        raise ThunderValueError(f"{op}: dropout probability has to be between 0 and 1, but got {p!r}")
    if not training or p == 0 or input.numel() == 0:
        return input
    check_float(op, "input", input)
    if p == 1:
        return maybe_convert_to_dtype(prims.mul(upcast(input), 0.0), input.dtype)
    out, _ = dropout_with_noise(input, p)
    return out


def _dropout_with_noise_impl(a: torch.Tensor, p: float):
    """What eager's ``F.dropout`` computes, with the scaled keep-mask it drew: on CPU the same
    draws as eager (ATen's ``_dropout_impl``: ``bernoulli_`` of a tensor like the input), elsewhere
    ``torch.native_dropout`` (the fused kernel eager uses there)."""
    if a.device.type == "cpu":
        noise = torch.empty_like(a).bernoulli_(1 - p)
        noise.div_(1 - p)
        return a * noise, noise
    out, mask = torch.native_dropout(a, p, True)
    return out, mask.to(a.dtype) / (1 - p)


@torchsymbol(id="torch.dropout_with_noise", tags=(RANDOM,), torch_impl=_dropout_with_noise_impl)
def dropout_with_noise(a, p):
    """Training-mode dropout (``0 < p < 1``) and its noise: the keep-mask scaled by ``1 / (1 - p)``,
    which the gradient multiplies by (the backward keeps it instead of drawing again)."""
    u = prims.uniform(a.shape, 0.0, 1.0, device=a.device, dtype=a.dtype)
    noise = prims.mul(prims.convert_element_type(prims.lt(u, 1.0 - p), a.dtype), 1.0 / (1.0 - p))
    return prims.mul(a, noise), noise


@grad_rules.register(dropout_with_noise)
def _dropout_with_noise_vjp(g, out, a, p):
    return prims.mul(g[0], out[1]), None


dropout_ = make_inplace(dropout)
register_inplace_dispatch(F.dropout, dropout, dropout_)
