"""The ``torch.nn`` layers real models use, under ``thunder.jit(module)`` against eager.

Each case builds a layer twice (same seed), runs one copy under ``thunder.jit`` and the other
eagerly, and compares the outputs, the gradients of the inputs and of every parameter for a
random cotangent, and the buffers afterwards (running statistics). Thunder's own backward
must have run (no fallback to torch's autograd), unless the case says why not.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import thunder


@dataclass
class Case:
    id: str
    make: Callable[[], nn.Module]
    inputs: Callable[[torch.dtype], tuple]  # the module's positional inputs for a dtype
    call: Callable | None = None  # (module, *inputs) -> outputs; default: module(*inputs)
    train: tuple[bool, ...] = (True,)  # the modes to check
    dtypes: tuple[torch.dtype, ...] = (torch.float64, torch.float32)
    kwargs: dict = field(default_factory=dict)


def _floats(*shapes, low=None):
    def inputs(dtype):
        return tuple(torch.randn(s, dtype=dtype) if low is None else torch.rand(s, dtype=dtype) + low for s in shapes)

    return inputs


def _ints(shape, high):
    return lambda dtype: (torch.randint(0, high, shape),)


_REPEATED = torch.tensor([[1, 8, 3, 1], [3, 3, 0, 8]])  # repeated indices and the padding rows 8 and 3
_OFFSETS = torch.tensor([0, 3, 5])


_CAUSAL = torch.ones(3, 3, dtype=torch.bool).triu(1)  # True: not attended
_KEY_PADDING = torch.tensor([[False, False, True], [False, False, False]])


def _self_attention(m, x):
    return m(x, x, x)


def _tensors(x) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (tuple, list)):
        return [t for y in x for t in _tensors(y)]
    return []


_TOL = {torch.float64: {"atol": 1e-7, "rtol": 1e-7}, torch.float32: {"atol": 1e-5, "rtol": 1e-4}}


def check_layer(case: Case, dtype: torch.dtype, train: bool) -> None:
    torch.manual_seed(0)
    eager = case.make().to(dtype).train(train)
    jitted = copy.deepcopy(eager)
    inputs = case.inputs(dtype)
    e_in = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    j_in = [x.clone().requires_grad_(x.is_floating_point()) for x in inputs]
    call = case.call or (lambda m, *xs: m(*xs))
    jm = thunder.jit(jitted)
    actual = _tensors(call(jm, *j_in))
    expected = _tensors(call(eager, *e_in))
    tol = _TOL[dtype]
    assert len(actual) == len(expected)
    for a, e in zip(actual, expected):
        assert a.dtype == e.dtype and a.shape == e.shape, f"{a.dtype}{list(a.shape)} vs {e.dtype}{list(e.shape)}"
        torch.testing.assert_close(a, e, **tol)
    for (name, a), e in zip(jitted.named_buffers(), eager.buffers()):
        torch.testing.assert_close(a, e, msg=lambda m, name=name: f"buffer {name}: {m}", **tol)

    j_leaves = [x for x in j_in if x.requires_grad] + list(jitted.parameters())
    e_leaves = [x for x in e_in if x.requires_grad] + list(eager.parameters())
    differentiable = [k for k, e in enumerate(expected) if e.requires_grad]
    assert [k for k, a in enumerate(actual) if a.requires_grad] == differentiable
    gen = torch.Generator().manual_seed(1)
    cot = [torch.randn(expected[k].shape, dtype=dtype, generator=gen) for k in differentiable]
    j_grads = torch.autograd.grad([actual[k] for k in differentiable], j_leaves, cot, allow_unused=True,
                                  materialize_grads=True)  # fmt: skip
    e_grads = torch.autograd.grad([expected[k] for k in differentiable], e_leaves, cot, allow_unused=True,
                                  materialize_grads=True)  # fmt: skip
    for k, (a, e) in enumerate(zip(j_grads, e_grads)):
        torch.testing.assert_close(a, e, msg=lambda m, k=k: f"gradient of leaf {k}: {m}", **tol)
    assert thunder.compile_stats(jm).last_autograd_fallback is None, thunder.compile_stats(jm).last_autograd_fallback


class Fn(nn.Module):
    """A functional call as a layer (``F.interpolate`` with the arguments no module exposes)."""

    def __init__(self, fn: Callable, **kwargs):
        super().__init__()
        self.fn, self.kwargs = fn, kwargs

    def forward(self, *args):
        return self.fn(*args, **self.kwargs)


class _Unpool(nn.Module):
    def __init__(self, pool: nn.Module, unpool: nn.Module):
        super().__init__()
        self.pool, self.unpool = pool, unpool

    def forward(self, x, output_size=None):
        out, idx = self.pool(x)
        return self.unpool(out, idx, output_size=output_size)


def _interp(**kwargs):
    return lambda: Fn(F.interpolate, **kwargs)


CASES = [
    # pooling
    Case("MaxPool1d", lambda: nn.MaxPool1d(3, 2, 1, dilation=2, return_indices=True), _floats((2, 3, 11))),
    Case("MaxPool1d_unbatched_ceil", lambda: nn.MaxPool1d(2, ceil_mode=True), _floats((3, 7))),
    Case("MaxPool2d", lambda: nn.MaxPool2d(2), _floats((2, 3, 8, 8))),
    Case(
        "MaxPool2d_options",
        lambda: nn.MaxPool2d((3, 2), (2, 1), (1, 0), dilation=(1, 2), ceil_mode=True, return_indices=True),
        _floats((2, 3, 9, 8)),
    ),  # fmt: skip
    Case("MaxPool2d_ties", lambda: nn.MaxPool2d(2, 1), lambda d: (torch.ones(1, 2, 4, 4, dtype=d),)),
    Case("MaxPool3d", lambda: nn.MaxPool3d(2, 2, 1, ceil_mode=True, return_indices=True), _floats((2, 2, 5, 4, 5))),
    Case("AvgPool1d", lambda: nn.AvgPool1d(3, 2, 1, ceil_mode=True, count_include_pad=False), _floats((2, 3, 10))),
    Case("AvgPool2d", lambda: nn.AvgPool2d(3, 2, 1), _floats((2, 3, 8, 8))),
    Case("AvgPool2d_divisor", lambda: nn.AvgPool2d((2, 3), ceil_mode=True, divisor_override=4), _floats((2, 3, 7, 8))),
    Case("AvgPool3d", lambda: nn.AvgPool3d(2, 1, 1, count_include_pad=False), _floats((2, 2, 4, 3, 4))),
    Case("AdaptiveAvgPool1d", lambda: nn.AdaptiveAvgPool1d(4), _floats((2, 3, 10))),
    Case("AdaptiveAvgPool2d", lambda: nn.AdaptiveAvgPool2d((3, None)), _floats((2, 3, 7, 5))),
    Case("AdaptiveAvgPool2d_1x1", lambda: nn.AdaptiveAvgPool2d(1), _floats((2, 3, 7, 5))),
    Case("AdaptiveAvgPool3d", lambda: nn.AdaptiveAvgPool3d((2, 3, 1)), _floats((2, 2, 5, 4, 3))),
    Case("AdaptiveMaxPool1d", lambda: nn.AdaptiveMaxPool1d(3, return_indices=True), _floats((2, 3, 10))),
    Case("AdaptiveMaxPool2d", lambda: nn.AdaptiveMaxPool2d((3, 4)), _floats((3, 7, 9))),
    Case("AdaptiveMaxPool3d", lambda: nn.AdaptiveMaxPool3d(2, return_indices=True), _floats((2, 2, 5, 4, 3))),
    Case("MaxUnpool1d", lambda: _Unpool(nn.MaxPool1d(2, return_indices=True), nn.MaxUnpool1d(2)), _floats((2, 3, 8))),
    Case(
        "MaxUnpool2d",
        lambda: _Unpool(nn.MaxPool2d(2, return_indices=True), nn.MaxUnpool2d(2)),
        _floats((2, 3, 5, 4)),
        call=lambda m, x: m(x, (5, 4)),
    ),  # fmt: skip
    Case(
        "MaxUnpool2d_overlapping",
        lambda: _Unpool(nn.MaxPool2d(3, 1, return_indices=True), nn.MaxUnpool2d(3, 1)),
        _floats((3, 5, 5)),
    ),  # fmt: skip
    Case(
        "MaxUnpool3d",
        lambda: _Unpool(nn.MaxPool3d(2, return_indices=True), nn.MaxUnpool3d(2)),
        _floats((1, 2, 4, 4, 4)),
    ),  # fmt: skip
    Case("LPPool1d", lambda: nn.LPPool1d(3, 2), _floats((2, 3, 7), low=0.1)),
    Case("LPPool2d", lambda: nn.LPPool2d(2, 2), _floats((2, 3, 6, 6), low=0.1)),
    Case("LPPool3d", lambda: nn.LPPool3d(1.5, 2), _floats((1, 2, 4, 4, 4), low=0.1)),
    Case("LocalResponseNorm", lambda: nn.LocalResponseNorm(3), _floats((2, 5, 4, 4))),
    Case("LocalResponseNorm_3d", lambda: nn.LocalResponseNorm(2), _floats((2, 4, 3, 3, 3))),
    # resampling
    Case("Upsample_nearest1d", lambda: nn.Upsample(scale_factor=2.5), _floats((2, 3, 5))),
    Case("Upsample_nearest2d_size", lambda: nn.Upsample(size=(7, 3)), _floats((2, 3, 4, 5))),
    Case("Upsample_nearest3d", lambda: nn.Upsample(scale_factor=(2, 1, 1.5)), _floats((1, 2, 3, 3, 4))),
    Case("interpolate_nearest_exact1d", _interp(scale_factor=1.7, mode="nearest-exact"), _floats((2, 3, 5))),
    Case("interpolate_nearest_exact2d", _interp(size=(3, 7), mode="nearest-exact"), _floats((2, 3, 5, 4))),
    Case("interpolate_nearest_exact3d", _interp(scale_factor=2, mode="nearest-exact"), _floats((1, 2, 2, 3, 2))),
    Case("Upsample_linear", lambda: nn.Upsample(scale_factor=1.5, mode="linear"), _floats((2, 3, 5))),
    Case("Upsample_linear_align", lambda: nn.Upsample(size=9, mode="linear", align_corners=True), _floats((2, 3, 5))),
    Case("Upsample_bilinear", lambda: nn.Upsample(scale_factor=2, mode="bilinear"), _floats((2, 3, 4, 5))),
    Case("UpsamplingBilinear2d", lambda: nn.UpsamplingBilinear2d(size=(6, 7)), _floats((2, 3, 4, 5))),
    Case("UpsamplingNearest2d", lambda: nn.UpsamplingNearest2d(scale_factor=3), _floats((2, 3, 2, 2))),
    Case("interpolate_bilinear_down", _interp(scale_factor=0.6, mode="bilinear"), _floats((2, 3, 7, 9))),
    Case(
        "interpolate_bilinear_recompute",
        _interp(scale_factor=1.7, mode="bilinear", recompute_scale_factor=True),
        _floats((2, 3, 4, 5)),
    ),  # fmt: skip
    Case("interpolate_bicubic", _interp(scale_factor=(1.5, 2), mode="bicubic"), _floats((2, 3, 4, 5))),
    Case("interpolate_bicubic_align", _interp(size=(5, 9), mode="bicubic", align_corners=True), _floats((2, 3, 4, 5))),
    Case(
        "interpolate_bilinear_antialias", _interp(size=(3, 2), mode="bilinear", antialias=True), _floats((2, 3, 7, 5))
    ),
    Case(
        "interpolate_bicubic_antialias",
        _interp(scale_factor=0.5, mode="bicubic", antialias=True),
        _floats((2, 3, 8, 6)),
    ),
    Case(
        "Upsample_trilinear", lambda: nn.Upsample(scale_factor=(1.5, 2, 1), mode="trilinear"), _floats((1, 2, 3, 3, 2))
    ),
    Case(
        "interpolate_trilinear_align",
        _interp(size=(4, 5, 3), mode="trilinear", align_corners=True),
        _floats((1, 2, 3, 3, 2)),
    ),  # fmt: skip
    Case("interpolate_lanczos", _interp(size=(3, 4), mode="lanczos", antialias=True), _floats((1, 2, 6, 6))),
    Case("interpolate_area1d", _interp(size=3, mode="area"), _floats((2, 3, 7))),
    Case("interpolate_area2d", _interp(scale_factor=0.5, mode="area"), _floats((2, 3, 6, 8))),
    Case("interpolate_area3d", _interp(size=(2, 3, 1), mode="area"), _floats((1, 2, 4, 5, 3))),
    Case("PixelShuffle", lambda: nn.PixelShuffle(2), _floats((2, 8, 3, 4))),
    Case("PixelShuffle_unbatched", lambda: nn.PixelShuffle(3), _floats((9, 2, 2))),
    Case("ChannelShuffle", lambda: nn.ChannelShuffle(3), _floats((2, 6, 2, 2))),
    Case("PixelUnshuffle", lambda: nn.PixelUnshuffle(2), _floats((2, 2, 4, 6))),
    # normalisation
    Case("InstanceNorm1d", lambda: nn.InstanceNorm1d(3), _floats((2, 3, 6))),
    Case("InstanceNorm1d_unbatched_affine", lambda: nn.InstanceNorm1d(3, affine=True), _floats((3, 6))),
    Case("InstanceNorm2d_affine", lambda: nn.InstanceNorm2d(3, affine=True), _floats((2, 3, 4, 5))),
    Case(
        "InstanceNorm2d_running",
        lambda: nn.InstanceNorm2d(3, affine=True, track_running_stats=True, momentum=0.3),
        _floats((2, 3, 4, 5)),
        train=(True, False),
    ),  # fmt: skip
    Case(
        "InstanceNorm3d_running",
        lambda: nn.InstanceNorm3d(2, track_running_stats=True),
        _floats((2, 2, 3, 2, 3)),
        train=(True, False),
    ),  # fmt: skip
    Case("GroupNorm", lambda: nn.GroupNorm(2, 4), _floats((2, 4, 3, 3))),
    Case("GroupNorm_no_affine", lambda: nn.GroupNorm(3, 6, affine=False, eps=1e-3), _floats((2, 6, 5))),
    Case("LayerNorm", lambda: nn.LayerNorm((3, 4)), _floats((2, 3, 4))),
    Case("LayerNorm_no_bias", lambda: nn.LayerNorm(4, bias=False), _floats((2, 3, 4))),
    Case("LayerNorm_no_affine", lambda: nn.LayerNorm(4, elementwise_affine=False, eps=1e-3), _floats((2, 3, 4))),
    Case("RMSNorm", lambda: nn.RMSNorm(4), _floats((2, 3, 4))),
    Case("RMSNorm_eps_no_affine", lambda: nn.RMSNorm((3, 4), eps=1e-4, elementwise_affine=False), _floats((2, 3, 4))),
    Case("BatchNorm1d", lambda: nn.BatchNorm1d(3), _floats((4, 3)), train=(True, False)),
    Case("BatchNorm1d_3d_input", lambda: nn.BatchNorm1d(3, momentum=0.2), _floats((4, 3, 5)), train=(True, False)),
    Case("BatchNorm2d", lambda: nn.BatchNorm2d(3), _floats((2, 3, 4, 4)), train=(True, False)),
    Case(
        "BatchNorm2d_no_running",
        lambda: nn.BatchNorm2d(3, track_running_stats=False, affine=False),
        _floats((2, 3, 4, 4)),
        train=(True, False),
    ),  # fmt: skip
    Case("BatchNorm3d", lambda: nn.BatchNorm3d(2), _floats((2, 2, 3, 2, 3)), train=(True, False)),
    Case(
        "BatchNorm2d_no_affine",
        lambda: nn.BatchNorm2d(3, affine=False, eps=1e-3),
        _floats((2, 3, 4, 4)),
        train=(True, False),
    ),  # fmt: skip
    Case("normalize", lambda: Fn(F.normalize, dim=1), _floats((3, 4))),
    Case("normalize_p1", lambda: Fn(F.normalize, p=1.0, dim=-1, eps=1e-3), _floats((2, 3, 4))),
    Case("normalize_p3", lambda: Fn(F.normalize, p=3, dim=0), _floats((3, 4))),
    Case("normalize_inf", lambda: Fn(F.normalize, p=float("inf"), dim=1), _floats((3, 4))),
    # embeddings
    Case("Embedding", lambda: nn.Embedding(10, 3), _ints((2, 5), 10)),
    Case("Embedding_padding_idx", lambda: nn.Embedding(10, 3, padding_idx=-2), lambda d: (_REPEATED,)),
    Case("Embedding_scale_grad_by_freq", lambda: nn.Embedding(10, 3, scale_grad_by_freq=True), lambda d: (_REPEATED,)),
    Case(
        "Embedding_scale_grad_padding",
        lambda: nn.Embedding(10, 3, padding_idx=3, scale_grad_by_freq=True),
        lambda d: (_REPEATED,),
    ),  # fmt: skip
    Case("EmbeddingBag_mean_2d", lambda: nn.EmbeddingBag(10, 3), _ints((3, 4), 10)),
    Case(
        "EmbeddingBag_sum_offsets",
        lambda: nn.EmbeddingBag(10, 3, mode="sum"),
        lambda d: (_REPEATED.flatten(), _OFFSETS),
    ),
    Case(
        "EmbeddingBag_max_offsets",
        lambda: nn.EmbeddingBag(10, 3, mode="max"),
        lambda d: (_REPEATED.flatten(), _OFFSETS),
    ),
    Case(
        "EmbeddingBag_per_sample_weights",
        lambda: nn.EmbeddingBag(10, 3, mode="sum", padding_idx=2),
        lambda d: (_REPEATED.flatten(), _OFFSETS, torch.rand(8, dtype=d)),
    ),  # fmt: skip
    Case(
        "EmbeddingBag_last_offset_scaled",
        lambda: nn.EmbeddingBag(10, 3, scale_grad_by_freq=True, include_last_offset=True),
        lambda d: (_REPEATED.flatten(), torch.tensor([0, 2, 5, 8])),
    ),  # fmt: skip
    Case(
        "EmbeddingBag_empty_bag",
        lambda: nn.EmbeddingBag(10, 3),
        lambda d: (_REPEATED.flatten(), torch.tensor([0, 3, 3])),
    ),
    # attention and transformers
    Case(
        "MultiheadAttention",
        lambda: nn.MultiheadAttention(8, 2),
        _floats((3, 2, 8)),
        call=_self_attention,
        train=(True, False),
    ),  # fmt: skip
    Case(
        "MultiheadAttention_batch_first_no_weights",
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        _floats((2, 3, 8)),
        call=lambda m, x: m(x, x, x, need_weights=False)[0],
        train=(True, False),
    ),  # fmt: skip
    Case(
        "MultiheadAttention_key_padding_mask",
        lambda: nn.MultiheadAttention(8, 2, batch_first=True),
        _floats((2, 3, 8)),
        call=lambda m, x: m(x, x, x, key_padding_mask=_KEY_PADDING),
        train=(True, False),
    ),  # fmt: skip
    Case(
        "MultiheadAttention_bool_mask_per_head",
        lambda: nn.MultiheadAttention(8, 2),
        _floats((3, 2, 8)),
        call=lambda m, x: m(x, x, x, attn_mask=_CAUSAL, average_attn_weights=False),
    ),  # fmt: skip
    Case(
        "MultiheadAttention_float_mask",
        lambda: nn.MultiheadAttention(8, 4, batch_first=True),
        _floats((2, 3, 8), (3, 3)),
        call=lambda m, x, mask: m(x, x, x, attn_mask=mask),
    ),  # fmt: skip
    Case(
        "MultiheadAttention_kdim_vdim",
        lambda: nn.MultiheadAttention(8, 2, kdim=5, vdim=6),
        _floats((3, 2, 8), (4, 2, 5), (4, 2, 6)),
        call=lambda m, q, k, v: m(q, k, v),
        train=(True, False),
    ),  # fmt: skip
    Case(
        "MultiheadAttention_bias_kv_zero_attn",
        lambda: nn.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True),
        _floats((3, 2, 8), (4, 2, 8)),
        call=lambda m, q, kv: m(q, kv, kv, key_padding_mask=_KEY_PADDING[:, :1].expand(2, 4)),
    ),  # fmt: skip
    Case(
        "TransformerEncoderLayer",
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0),
        _floats((3, 2, 8)),
        train=(True, False),
    ),  # fmt: skip
    Case(
        "TransformerEncoderLayer_norm_first_gelu_masks",
        lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, activation="gelu", norm_first=True, batch_first=True),
        _floats((2, 3, 8)),
        call=lambda m, x: m(x, src_mask=_CAUSAL, src_key_padding_mask=_KEY_PADDING),
        train=(True, False),
    ),  # fmt: skip
    Case(
        "TransformerEncoder",
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True), 2),
        _floats((2, 3, 8)),
        call=lambda m, x: m(x, src_key_padding_mask=_KEY_PADDING),
        train=(True, False),
    ),  # fmt: skip
    Case(
        "TransformerDecoderLayer",
        lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0),
        _floats((3, 2, 8), (4, 2, 8)),
        call=lambda m, t, mem: m(t, mem, tgt_mask=_CAUSAL, tgt_is_causal=True),
        train=(True, False),
    ),  # fmt: skip
    Case(
        "TransformerDecoderLayer_norm_first_gelu",
        lambda: nn.TransformerDecoderLayer(8, 2, 16, dropout=0.0, activation=F.gelu, norm_first=True, batch_first=True),
        _floats((2, 3, 8), (2, 4, 8)),
        call=lambda m, t, mem: m(t, mem, memory_key_padding_mask=_KEY_PADDING[:, :1].expand(2, 4)),
    ),  # fmt: skip
    Case(
        "Transformer",
        lambda: nn.Transformer(8, 2, 1, 1, 16, dropout=0.0, batch_first=True),
        _floats((2, 4, 8), (2, 3, 8)),
        call=lambda m, s, t: m(s, t, tgt_mask=_CAUSAL, src_key_padding_mask=_KEY_PADDING[:, :1].expand(2, 4)),
        train=(True, False),
    ),  # fmt: skip
    # transposed convolution
    Case(
        "ConvTranspose1d",
        lambda: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1),
        _floats((2, 3, 5)),
    ),  # fmt: skip
    Case("ConvTranspose1d_unbatched_no_bias", lambda: nn.ConvTranspose1d(2, 3, 2, bias=False), _floats((2, 5))),
    Case(
        "ConvTranspose2d",
        lambda: nn.ConvTranspose2d(4, 6, (3, 2), stride=(2, 1), padding=(1, 0), groups=2, dilation=(1, 2)),
        _floats((2, 4, 5, 4)),
    ),  # fmt: skip
    Case(
        "ConvTranspose2d_output_size",
        lambda: nn.ConvTranspose2d(3, 2, 3, stride=2),
        _floats((2, 3, 4, 4)),
        call=lambda m, x: m(x, output_size=[10, 9]),
    ),  # fmt: skip
    Case(
        "ConvTranspose3d",
        lambda: nn.ConvTranspose3d(2, 4, 2, stride=2, output_padding=(1, 0, 1), dilation=(2, 1, 2)),
        _floats((1, 2, 3, 2, 3)),
    ),  # fmt: skip
    # recurrent
    Case("LSTM", lambda: nn.LSTM(4, 5), _floats((3, 2, 4))),
    Case(
        "LSTM_batch_first_bidir_2layers",
        lambda: nn.LSTM(4, 5, 2, batch_first=True, bidirectional=True),
        _floats((2, 3, 4)),
        train=(True, False),
    ),  # fmt: skip
    Case(
        "LSTM_initial_state_proj",
        lambda: nn.LSTM(4, 5, 2, proj_size=3, bidirectional=True),
        _floats((3, 2, 4), (4, 2, 3), (4, 2, 5)),
        call=lambda m, x, h, c: m(x, (h, c)),
    ),  # fmt: skip
    Case("LSTM_no_bias_unbatched", lambda: nn.LSTM(4, 5, bias=False), _floats((3, 4))),
    Case("GRU", lambda: nn.GRU(4, 5, 3), _floats((3, 2, 4), (3, 2, 5))),
    Case("GRU_batch_first_bidir", lambda: nn.GRU(4, 5, batch_first=True, bidirectional=True), _floats((2, 3, 4))),
    Case("RNN_tanh", lambda: nn.RNN(4, 5, 2, bidirectional=True), _floats((3, 2, 4), (4, 2, 5))),
    Case(
        "RNN_relu_no_bias", lambda: nn.RNN(4, 5, nonlinearity="relu", bias=False, batch_first=True), _floats((2, 3, 4))
    ),  # fmt: skip
    Case("LSTMCell", lambda: nn.LSTMCell(4, 5), _floats((2, 4), (2, 5), (2, 5)), call=lambda m, x, h, c: m(x, (h, c))),
    Case("LSTMCell_zero_state_unbatched", lambda: nn.LSTMCell(4, 5), _floats((4,))),
    Case("GRUCell", lambda: nn.GRUCell(4, 5), _floats((2, 4), (2, 5))),
    Case("GRUCell_no_bias", lambda: nn.GRUCell(4, 5, bias=False), _floats((2, 4))),
    Case("RNNCell", lambda: nn.RNNCell(4, 5), _floats((2, 4), (2, 5))),
    Case("RNNCell_relu", lambda: nn.RNNCell(4, 5, nonlinearity="relu"), _floats((2, 4))),
    Case("PixelUnshuffle_batch_dims", lambda: nn.PixelUnshuffle(2), _floats((2, 2, 1, 4, 2))),
]


class _TinyUNet(nn.Module):
    """Down with a pool, up with a transposed convolution and an upsample, a skip connection."""

    def __init__(self):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.mid = nn.Sequential(nn.Conv2d(4, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.SiLU())
        self.up = nn.ConvTranspose2d(8, 4, 2, stride=2)
        self.out = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear"), nn.Conv2d(8, 2, 1))

    def forward(self, x):
        skip = self.down(x)
        return self.out(torch.cat([self.up(self.mid(self.pool(skip))), skip], 1))


class _TinyLanguageModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 6, padding_idx=0)
        self.rnn = nn.LSTM(6, 8, 2, batch_first=True)
        self.head = nn.Linear(8, 20)

    def forward(self, tokens):
        out, _ = self.rnn(self.embed(tokens))
        return self.head(out)


CASES += [
    Case(
        "model_conv_net",
        lambda: nn.Sequential(
            nn.Conv2d(3, 4, 3, padding=1),
            nn.BatchNorm2d(4),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(4, 6, 3),
            nn.AdaptiveAvgPool2d(1),
            nn.Flatten(),
            nn.Linear(6, 3),
        ),
        _floats((2, 3, 8, 8)),
        train=(True, False),
    ),  # fmt: skip
    Case("model_unet", _TinyUNet, _floats((2, 3, 8, 8)), train=(True, False)),
    Case("model_lstm_language_model", _TinyLanguageModel, _ints((2, 5), 20), train=(True, False)),
]


def _params():
    for case in CASES:
        for dtype in case.dtypes:
            for train in case.train:
                mode = "train" if train else "eval"
                yield pytest.param(case, dtype, train, id=f"{case.id}-{str(dtype).removeprefix('torch.')}-{mode}")


@pytest.mark.parametrize("case,dtype,train", list(_params()))
def test_layer_vs_eager(case, dtype, train):
    check_layer(case, dtype, train)


def test_functional_max_pool_with_indices_vs_eager():
    x = torch.randn(2, 3, 9, 8, dtype=torch.float64)
    jfn = thunder.jit(lambda a: F.max_pool2d_with_indices(a, 3, 2, 1, ceil_mode=True))
    for a, e in zip(jfn(x), F.max_pool2d_with_indices(x, 3, 2, 1, ceil_mode=True)):
        torch.testing.assert_close(a, e)


@pytest.mark.parametrize(
    "fn",
    [lambda a: torch._C._nn.upsample_bilinear2d(a, [5, 4], True), lambda a: torch._C._nn.upsample_nearest2d(a, [5, 4])],
)
def test_upsample_kernel_called_with_output_size_only(fn):
    # the kernels' overload without scale factors (models call it directly) is the .vec one with none
    x = torch.randn(1, 2, 3, 3, dtype=torch.float64, requires_grad=True)
    jfn = thunder.jit(fn)
    actual, expected = jfn(x), fn(x)
    torch.testing.assert_close(actual, expected)
    g = torch.randn_like(expected)
    torch.testing.assert_close(torch.autograd.grad(actual, x, g)[0], torch.autograd.grad(expected, x, g)[0])
    assert thunder.compile_stats(jfn).last_autograd_fallback is None


def test_pool_rejects_what_eager_rejects():
    x = torch.randn(1, 2, 4, 4)
    with pytest.raises(ValueError, match=r"ltorch.max_pool2d_kernel: .*Output size is too small"):
        thunder.jit(lambda a: F.max_pool2d(a, 6))(x)
    with pytest.raises(ValueError, match=r"ltorch.avg_pool2d_kernel: pad should be at most half"):
        thunder.jit(lambda a: F.avg_pool2d(a, 2, padding=2))(x)
    with pytest.raises(ValueError, match=r"ltorch.max_pool1d: Expected 2D \(unbatched\) or 3D \(batched\) input"):
        thunder.jit(lambda a: F.max_pool1d(a, 2))(x)
    with pytest.raises(RuntimeError, match=r"ltorch.max_unpool2d: elements in indices should be type int64"):
        thunder.jit(lambda a: F.max_unpool2d(a, a.int(), 2))(x)
    with pytest.raises(ValueError, match=r"ltorch.max_unpool2d: Expected shape of indices to be same as that of the"):
        thunder.jit(lambda a: F.max_unpool2d(a, a.long()[..., :2], 2))(x)


@pytest.mark.parametrize("make,shape", [(lambda: nn.BatchNorm1d(3, momentum=None), (4, 3)),
                                        (lambda: nn.BatchNorm2d(3, momentum=None), (4, 3, 5, 5))])  # fmt: skip
def test_batch_norm_cumulative_average_vs_eager(make, shape):
    # momentum=None divides by float(num_batches_tracked) after updating it in place: the factor is
    # traced as a tensor, so the steps share one trace and match eager's outputs, statistics and grads.
    torch.manual_seed(0)
    m = make()
    eager = copy.deepcopy(m)
    jm = thunder.jit(m)
    for _ in range(3):
        x = torch.randn(*shape, requires_grad=True)
        xe = x.detach().clone().requires_grad_()
        actual, expected = jm(x), eager(xe)
        torch.testing.assert_close(actual, expected)
        cot = torch.randn_like(expected)
        actual.backward(cot)
        expected.backward(cot)
        for a, e in ((x.grad, xe.grad), (m.weight.grad, eager.weight.grad), (m.bias.grad, eager.bias.grad)):
            torch.testing.assert_close(a, e)
        for name in ("running_mean", "running_var", "num_batches_tracked"):
            torch.testing.assert_close(getattr(m, name), getattr(eager, name))
    assert thunder.cache_misses(jm) == 1
    assert thunder.compile_stats(jm).last_autograd_fallback is None
    m.eval()
    eager.eval()
    x = torch.randn(*shape)
    torch.testing.assert_close(jm(x), eager(x))


@pytest.mark.parametrize(
    "make,call,kernel",
    [
        (lambda: nn.MultiheadAttention(8, 2, batch_first=True), _self_attention, "native_multi_head_attention"),
        (
            lambda: nn.MultiheadAttention(8, 2, batch_first=True),
            lambda m, x: m(x, x, x, need_weights=False),
            "native_multi_head_attention",
        ),  # fmt: skip
        (
            lambda: nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True),
            lambda m, x: m(x),
            "transformer_encoder_layer_fwd",
        ),  # fmt: skip
        (
            lambda: nn.TransformerEncoderLayer(
                8, 2, 16, dropout=0.0, batch_first=True, activation="gelu", norm_first=True
            ),
            lambda m, x: m(x, src_key_padding_mask=_KEY_PADDING),
            "transformer_encoder_layer_fwd",
        ),  # fmt: skip
    ],
)
def test_transformer_inference_fast_path_vs_eager(make, call, kernel):
    # In eval without grad the modules call their fused kernels: thunder runs the same kernels.
    torch.manual_seed(0)
    m = make().eval()
    x = torch.randn(2, 3, 8)
    jm = thunder.jit(m)
    with torch.no_grad():
        for a, e in zip(_tensors(call(jm, x)), _tensors(call(m, x))):
            torch.testing.assert_close(a, e)
    assert f"ltorch.{kernel}" in str(thunder.last_traces(jm)[0])


@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize("norm", [False, True])
def test_transformer_encoder_padding_mask_inference_matches_eagers_nested_path(batch_first, norm):
    """Eager runs a left-aligned padded batch as a nested tensor in inference: zeros at the padded
    positions (then the norm); otherwise (not aligned, or with grad) densely. Each call equals eager,
    and the alignment is a checked outcome (Note [Transformer fast paths])."""
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=batch_first)
    m = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(8) if norm else None, enable_nested_tensor=True).eval()
    if norm:
        nn.init.normal_(m.norm.bias)
    jm = thunder.jit(m)
    pads = (_KEY_PADDING, torch.tensor([[True, False, False], [False, False, False]]),
            torch.tensor([[False, True, True], [True, True, True]]))  # fmt: skip
    for pad in (*pads, pads[0]):
        x = torch.randn(2, 3, 8) if batch_first else torch.randn(3, 2, 8)
        with torch.no_grad():
            torch.testing.assert_close(jm(x, src_key_padding_mask=pad), m(x, src_key_padding_mask=pad))
    torch.testing.assert_close(jm(x, src_key_padding_mask=pads[0]), m(x, src_key_padding_mask=pads[0]))
    assert thunder.cache_misses(jm) == (3 if batch_first else 2)


@pytest.mark.parametrize("make", [lambda: nn.LSTM(4, 5, 3, dropout=0.5), lambda: nn.GRU(4, 5, 2, dropout=0.3)])
def test_rnn_dropout_between_layers_draws_as_eager(make):
    torch.manual_seed(0)
    m = make().double()
    jm = thunder.jit(copy.deepcopy(m))
    x = torch.randn(3, 2, 4, dtype=torch.float64, requires_grad=True)
    torch.manual_seed(5)
    expected = m(x)[0]
    torch.manual_seed(5)
    actual = jm(x)[0]
    torch.testing.assert_close(actual, expected)
    cot = torch.randn_like(expected)
    for a, e in zip(torch.autograd.grad(actual, x, cot), torch.autograd.grad(expected, x, cot)):
        torch.testing.assert_close(a, e)
    assert thunder.compile_stats(jm).last_autograd_fallback is None


@pytest.mark.parametrize("with_hx", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
@pytest.mark.parametrize(
    "make",
    [
        lambda: nn.GRU(3, 5),
        lambda: nn.LSTM(3, 5, 2, bidirectional=True),
        lambda: nn.LSTM(3, 5, proj_size=2),
        lambda: nn.RNN(3, 4, bidirectional=True),
        lambda: nn.RNN(3, 4, 2, nonlinearity="relu"),
    ],
)
def test_rnn_packed_sequence_vs_eager(make, enforce_sorted, with_hx):
    # The packed layers run as ATen's (the batch shrinks as sequences end); batch_sizes is read from
    # the data, so other lengths trace again.
    torch.manual_seed(0)
    m = make().double()
    jm = thunder.jit(copy.deepcopy(m))
    dirs = 2 if m.bidirectional else 1
    for lengths in ([4, 2, 3], [4, 2, 3], [2, 2, 1]):
        x = torch.randn(max(lengths), 3, 3, dtype=torch.float64, requires_grad=True)
        lengths = lengths if not enforce_sorted else sorted(lengths, reverse=True)
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, enforce_sorted=enforce_sorted)
        inputs = [x]
        args = (packed,)
        if with_hx:
            h = torch.randn(m.num_layers * dirs, 3, m.proj_size or m.hidden_size, dtype=torch.float64, requires_grad=True)
            inputs.append(h)
            c = torch.randn(m.num_layers * dirs, 3, m.hidden_size, dtype=torch.float64)
            args = (packed, (h, c) if isinstance(m, nn.LSTM) else h)
        (actual, actual_h), (expected, expected_h) = jm(*args), m(*args)
        actual_h, expected_h = _tensors(actual_h), _tensors(expected_h)
        for a, e in zip((*actual, *actual_h), (*expected, *expected_h)):
            torch.testing.assert_close(a, e)
        outs, cots = (actual.data, *actual_h), [torch.randn_like(t) for t in (expected.data, *expected_h)]
        wrt_actual, wrt_expected = (*inputs, *jm.parameters()), (*inputs, *m.parameters())
        grads = torch.autograd.grad(outs, wrt_actual, cots, retain_graph=True)
        for a, e in zip(grads, torch.autograd.grad((expected.data, *expected_h), wrt_expected, cots)):
            torch.testing.assert_close(a, e)
    assert thunder.cache_misses(jm) == 2
    assert thunder.compile_stats(jm).last_autograd_fallback is None


def test_lstm_cached_call_and_rebound_weight_vs_eager():
    torch.manual_seed(0)
    m = nn.LSTM(4, 5, batch_first=True)
    jm = thunder.jit(m)
    for _ in range(2):
        x = torch.randn(2, 3, 4)
        torch.testing.assert_close(jm(x)[0], m(x)[0])
    # A rebound parameter is read on the next call, as eager's forward refreshes its flat weights.
    m.weight_hh_l0 = nn.Parameter(torch.randn(20, 5))
    torch.testing.assert_close(jm(x)[0], m(x)[0])


@pytest.mark.parametrize("decomposed", [False, True])
@pytest.mark.parametrize(
    "make,tokens",
    [
        (lambda: nn.Embedding(10, 4, max_norm=1.0), torch.tensor([[1, 2, 2], [7, 1, 0]])),
        (lambda: nn.Embedding(10, 4, max_norm=0.5, norm_type=1.0, padding_idx=3), torch.tensor([3, 3, 9])),
        (lambda: nn.EmbeddingBag(10, 4, max_norm=1.0, mode="sum"), torch.tensor([[1, 2], [2, 5]])),
    ],
)
def test_embedding_max_norm_renormalises_in_place_as_eager(make, tokens, decomposed, request):
    # Without gradients of the weight (inference, or a frozen weight) the rows read are renormalised
    # in place, as eager does; with them too (tests/test_training_probes2.py trains such a model).
    if decomposed:
        if isinstance(make(), nn.EmbeddingBag):
            pytest.skip("embedding_bag runs eager's kernel (Note [Embedding bags]): no prim decomposition")
        request.getfixturevalue("prims_only")
    torch.manual_seed(0)
    eager = make()
    with torch.no_grad():
        eager.weight *= 3
    jitted = copy.deepcopy(eager)
    with torch.no_grad():
        expected = eager(tokens)
        actual = thunder.jit(jitted)(tokens)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(jitted.weight, eager.weight)
    eager.weight.requires_grad_(False)
    jitted.weight.requires_grad_(False)
    with torch.no_grad():
        eager.weight *= 3
        jitted.weight *= 3
    torch.testing.assert_close(thunder.jit(jitted)(tokens), eager(tokens))
    torch.testing.assert_close(jitted.weight, eager.weight)
    torch.manual_seed(0)
    eager = make()
    jitted = copy.deepcopy(eager)
    expected, actual = eager(tokens), thunder.jit(jitted)(tokens)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(jitted.weight, eager.weight)
    expected.sum().backward()
    actual.sum().backward()
    torch.testing.assert_close(jitted.weight.grad, eager.weight.grad)


# Layers whose symbols decompose into prims (the others run eager's kernels, Note [Pooling kernels]).
_DECOMPOSED = ("LSTM", "GRU", "RNN", "InstanceNorm", "normalize", "ConvTranspose", "PixelShuffle", "PixelUnshuffle",
               "ChannelShuffle", "Embedding_")  # fmt: skip


@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES if c.id.startswith(_DECOMPOSED)])
def test_layer_decomposition_vs_eager(case, prims_only):
    # the torch executor runs prims only: the decompositions' own values against eager
    torch.manual_seed(0)
    eager = case.make().double()
    jitted = copy.deepcopy(eager)
    inputs = case.inputs(torch.float64)
    call = case.call or (lambda m, *xs: m(*xs))
    with torch.no_grad():
        for a, e in zip(_tensors(call(thunder.jit(jitted), *inputs)), _tensors(call(eager, *inputs))):
            torch.testing.assert_close(a, e)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_max_unpool_decomposition_vs_eager(n, prims_only):
    torch.manual_seed(0)
    pooled, indices = getattr(F, f"max_pool{n}d")(torch.randn(2, 3, *(4,) * n), 2, return_indices=True)
    unpool = getattr(F, f"max_unpool{n}d")
    torch.testing.assert_close(thunder.jit(unpool)(pooled, indices, 2), unpool(pooled, indices, 2))


@pytest.mark.parametrize(
    "x_shape,w_shape,b_shape", [((2, 3, 4), (5, 4), (5,)), ((2, 3, 4), (5, 4), (1, 5)), ((2, 3, 4), (4,), ())]
)
def test_linear_on_batched_input_grads_vs_eager(x_shape, w_shape, b_shape):
    # The input's gradient of a weight matrix is one matmul(g, weight), as eager's; a bias that
    # broadcasts gets the cotangent summed to its shape.
    torch.manual_seed(0)
    x, w, b = (torch.randn(s, dtype=torch.float64, requires_grad=True) for s in (x_shape, w_shape, b_shape))
    jfn = thunder.jit(F.linear, executors=["torch"])
    actual, expected = jfn(x, w, b), F.linear(x, w, b)
    torch.testing.assert_close(actual, expected)
    cot = torch.randn_like(expected)
    for a, e in zip(torch.autograd.grad(actual, (x, w, b), cot), torch.autograd.grad(expected, (x, w, b), cot)):
        torch.testing.assert_close(a, e)
    if len(w_shape) == 2:
        bwd = thunder.last_backward_traces(jfn)[-1]
        weight = bwd.args[1].name  # the saved (input, weight), then the cotangent
        reads_weight = [s.sym.name for s in bwd.bound_symbols if weight in {getattr(a, "name", None) for a in s.flat_args}]
        assert reads_weight == ["matmul"], reads_weight
