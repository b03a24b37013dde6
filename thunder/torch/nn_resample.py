"""Resampling from ``torch.nn.functional``: the upsampling kernels ``F.interpolate`` (and
``nn.Upsample``) calls, and the shuffles ``pixel_shuffle``, ``pixel_unshuffle`` and ``channel_shuffle``.

Note [Upsampling kernels]
``F.interpolate`` is Python: the tracer runs it, so its argument handling (size or
scale_factor, recompute_scale_factor, align_corners defaults and warnings, the ``area`` mode's
adaptive average pool) is eager's own. What it reaches are the aten kernels
``torch._C._nn.upsample_nearest2d``, ``upsample_bilinear2d``, ``_upsample_bicubic2d_aa``, ...
(their ``.vec`` overloads: ``output_size`` or ``scale_factors``). Each is a symbol here that runs
that kernel, with a meta that runs it on ``device="meta"`` tensors (``kernel_outputs``), and a VJP
rule that calls eager's backward kernel (``aten.upsample_bilinear2d_backward``, ...) with the
output size and the scales eager's autograd records for the call: ``scale_factors`` when given
(the kernel interpolates with them, not with the ratio of sizes), else none.

``pixel_shuffle``/``pixel_unshuffle`` and ``channel_shuffle`` are reshapes and a permutation.

Layer: language. Imports: core, torch.base, torch.nn_utils.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from thunder.core import prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import grad_rules
from thunder.core.symbol import Symbol
from thunder.torch.base import torchsymbol
from thunder.torch.nn_utils import check_tensor, kernel_outputs

__all__ = [
    "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "upsample_nearest_exact1d",
    "upsample_nearest_exact2d", "upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
    "upsample_bicubic2d", "upsample_trilinear3d", "upsample_bilinear2d_aa", "upsample_bicubic2d_aa",
    "upsample_lanczos2d_aa", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
    *(f"{name}_backward" for name in (
        "upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d", "upsample_nearest_exact1d",
        "upsample_nearest_exact2d", "upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
        "upsample_bicubic2d", "upsample_trilinear3d", "upsample_bilinear2d_aa", "upsample_bicubic2d_aa",
        "upsample_lanczos2d_aa",
    )),
]  # fmt: skip

aten = torch.ops.aten


def _scales(op: str, input: TensorProxy, n: int, output_size, scale_factors=None) -> tuple:
    """The ``.vec`` overload's (output_size, scale_factors), checked: exactly one of them given."""
    output_size, scale_factors = pyval(output_size), pyval(scale_factors)
    if (output_size is None) == (scale_factors is None):
        raise ThunderValueError(f"{op}: Must specify exactly one of output_size and scale_factors")
    if scale_factors is not None:
        if not isinstance(scale_factors, (tuple, list)) or len(scale_factors) != n:
            raise ThunderTypeError(
                f"{op}: scale_factors must be a list of {n} floats (the .vec overload F.interpolate calls), but got "
                f"{scale_factors!r}"
            )
        return None, tuple(float(pyval(s)) for s in scale_factors)
    if not isinstance(output_size, (tuple, list, torch.Size)) or len(output_size) != n:
        raise ThunderTypeError(f"{op}: output_size must be a list of {n} ints, but got {output_size!r}")
    return tuple(int(pyval(s)) for s in output_size), None


def _make_upsample(name: str, n: int, interpolates: bool, aten_name: str | None = None) -> tuple[Symbol, Symbol]:
    """The symbol for ``torch._C._nn.<aten_name>`` (``.vec``), its backward symbol, and its VJP
    (Note [Upsampling kernels]).

    ``interpolates``: the kernel takes ``align_corners`` (linear, cubic and antialiased modes).
    """
    aten_name = aten_name or name
    kernel = getattr(torch._C._nn, aten_name)
    backward_kernel = getattr(aten, f"{aten_name}_backward")

    def backward_meta(g, output_size, input_size, *rest):
        return kernel_outputs(f"ltorch.{name}_backward", backward_kernel, g, output_size, input_size, *rest)

    backward_meta.__name__ = f"{name}_backward"
    backward_meta.__doc__ = f"``aten.{aten_name}_backward``: the gradient of ``{name}``'s input."
    backward = torchsymbol(id=f"torch.{name}_backward", torch_impl=backward_kernel)(backward_meta)

    def check(op, input):
        check_tensor(op, "input", input)
        if input.ndim != n + 2:
            raise ThunderValueError(
                f"{op}: Expected a {n + 2}D input (batch, channels and {n} spatial dims), but got input of size: "
                f"{list(input.shape)}"
            )

    if interpolates:

        def meta(input, output_size, align_corners, scale_factors=None):
            op = f"ltorch.{name}"
            check(op, input)
            size, scales = _scales(op, input, n, output_size, scale_factors)
            return kernel_outputs(op, kernel, input, size, bool(pyval(align_corners)), scales)

        def vjp(g, out, input, output_size, align_corners, *scale_factors):
            _, scales = _scales(name, input, n, output_size, *scale_factors)
            extra = scales or (None,) * n
            gi = backward(g, out.shape[2:], input.shape, bool(pyval(align_corners)), *extra)
            return (gi, None, None, *(None,) * len(scale_factors))

    else:

        def meta(input, output_size, scale_factors=None):
            op = f"ltorch.{name}"
            check(op, input)
            size, scales = _scales(op, input, n, output_size, scale_factors)
            return kernel_outputs(op, kernel, input, size, scales)

        def vjp(g, out, input, output_size, *scale_factors):
            _, scales = _scales(name, input, n, output_size, *scale_factors)
            extra = scales or (None,) * n
            return (backward(g, out.shape[2:], input.shape, *extra), None, *(None,) * len(scale_factors))

    meta.__name__ = name
    meta.__doc__ = f"``torch._C._nn.{aten_name}`` (the ``.vec`` overload): eager's kernel (Note [Upsampling kernels])."
    sym = torchsymbol(kernel, id=f"torch.{name}")(meta)
    grad_rules.register(sym)(vjp)
    return sym, backward


upsample_nearest1d, upsample_nearest1d_backward = _make_upsample("upsample_nearest1d", 1, False)
upsample_nearest2d, upsample_nearest2d_backward = _make_upsample("upsample_nearest2d", 2, False)
upsample_nearest3d, upsample_nearest3d_backward = _make_upsample("upsample_nearest3d", 3, False)
upsample_nearest_exact1d, upsample_nearest_exact1d_backward = _make_upsample(
    "upsample_nearest_exact1d", 1, False, "_upsample_nearest_exact1d"
)
upsample_nearest_exact2d, upsample_nearest_exact2d_backward = _make_upsample(
    "upsample_nearest_exact2d", 2, False, "_upsample_nearest_exact2d"
)
upsample_nearest_exact3d, upsample_nearest_exact3d_backward = _make_upsample(
    "upsample_nearest_exact3d", 3, False, "_upsample_nearest_exact3d"
)
upsample_linear1d, upsample_linear1d_backward = _make_upsample("upsample_linear1d", 1, True)
upsample_bilinear2d, upsample_bilinear2d_backward = _make_upsample("upsample_bilinear2d", 2, True)
upsample_bicubic2d, upsample_bicubic2d_backward = _make_upsample("upsample_bicubic2d", 2, True)
upsample_trilinear3d, upsample_trilinear3d_backward = _make_upsample("upsample_trilinear3d", 3, True)
upsample_bilinear2d_aa, upsample_bilinear2d_aa_backward = _make_upsample(
    "upsample_bilinear2d_aa", 2, True, "_upsample_bilinear2d_aa"
)
upsample_bicubic2d_aa, upsample_bicubic2d_aa_backward = _make_upsample(
    "upsample_bicubic2d_aa", 2, True, "_upsample_bicubic2d_aa"
)
upsample_lanczos2d_aa, upsample_lanczos2d_aa_backward = _make_upsample(
    "upsample_lanczos2d_aa", 2, True, "_upsample_lanczos2d_aa"
)


# ----------------------------------------------------------------------------------------
# pixel shuffle
# ----------------------------------------------------------------------------------------


def _check_factor(op: str, name: str, factor) -> int:
    factor = pyval(factor)
    if isinstance(factor, bool) or not isinstance(factor, int) or factor < 1:
        raise ThunderValueError(f"{op}: {name} must be greater than 0, but got {factor!r}")
    return factor


@torchsymbol(F.pixel_shuffle, torch.pixel_shuffle)
def pixel_shuffle(input, upscale_factor):
    """``F.pixel_shuffle``: ``(*, C * r * r, H, W)`` -> ``(*, C, H * r, W * r)``."""
    op = "ltorch.pixel_shuffle"
    check_tensor(op, "input", input)
    r = _check_factor(op, "upscale_factor", upscale_factor)
    if input.ndim < 3:
        raise ThunderValueError(
            f"{op}: pixel_shuffle expects input to have at least 3 dimensions, but got input with {input.ndim} dimension(s)"
        )
    *batch, c, h, w = input.shape
    if c % (r * r):
        raise ThunderValueError(
            f"{op}: pixel_shuffle expects its input's 'channel' dimension to be divisible by the square of upscale_factor, "
            f"but input.size(-3)={c} is not divisible by {r * r}"
        )
    k = len(batch)
    a = prims.reshape(input, (*batch, c // (r * r), r, r, h, w))
    a = prims.transpose(a, (*range(k), k, k + 3, k + 1, k + 4, k + 2))
    return prims.reshape(a, (*batch, c // (r * r), h * r, w * r))


@torchsymbol(F.pixel_unshuffle, torch.pixel_unshuffle)
def pixel_unshuffle(input, downscale_factor):
    """``F.pixel_unshuffle``: ``(*, C, H * r, W * r)`` -> ``(*, C * r * r, H, W)``."""
    op = "ltorch.pixel_unshuffle"
    check_tensor(op, "input", input)
    r = _check_factor(op, "downscale_factor", downscale_factor)
    if input.ndim < 3:
        raise ThunderValueError(
            f"{op}: pixel_unshuffle expects input to have at least 3 dimensions, but got input with {input.ndim} "
            "dimension(s)"
        )
    *batch, c, h, w = input.shape
    if h % r or w % r:
        raise ThunderValueError(
            f"{op}: pixel_unshuffle expects height and width to be divisible by downscale_factor, but got "
            f"input.size(-2)={h} and input.size(-1)={w} for downscale_factor={r}"
        )
    k = len(batch)
    a = prims.reshape(input, (*batch, c, h // r, r, w // r, r))
    a = prims.transpose(a, (*range(k), k, k + 2, k + 4, k + 1, k + 3))
    return prims.reshape(a, (*batch, c * r * r, h // r, w // r))


@torchsymbol(F.channel_shuffle, torch.native_channel_shuffle)
def channel_shuffle(input, groups):
    """``F.channel_shuffle`` (``nn.ChannelShuffle``): ``(N, g * k, *)`` -> ``(N, k * g, *)``, the channels
    of the ``g`` groups interleaved."""
    op = "ltorch.channel_shuffle"
    check_tensor(op, "input", input)
    groups = pyval(groups)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ThunderValueError(
            f"{op}: Number of groups to divide channels in must be positive. Value of groups:{groups}"
        )
    if input.ndim <= 2:
        raise ThunderValueError(
            f"{op}: channel_shuffle expects input with > 2 dims, but got input with sizes {list(input.shape)}"
        )
    n, c, *spatial = input.shape
    if c % groups:
        raise ThunderValueError(
            f"{op}: Number of channels must be divisible by groups. Got {c} channels and {groups} groups."
        )
    a = prims.reshape(input, (n, groups, c // groups, *spatial))
    a = prims.transpose(a, (0, 2, 1, *range(3, a.ndim)))
    return prims.reshape(a, tuple(input.shape))
