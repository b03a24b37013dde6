"""``torch.nn.functional.scaled_dot_product_attention`` in the torch language.

Decomposed into the math formulation ``softmax(q @ k^T * scale + mask) @ v`` (matmul,
amax/exp/sum, where), with the causal mask built from ``prims.iota``; computed in float32
for bf16/f16 inputs. The ``sdpa`` executor claims the whole symbol when it can.

Layer: language. Imports: core, torch.base, torch.linalg, torch.nn_utils, torch.nn_activations.
"""

from __future__ import annotations

import math

import torch
import torch.nn.attention
import torch.nn.functional as F

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import forward_rules, grad_rules
from thunder.core.symbol import RANDOM
from thunder.core.symbol_lookup import register_interpreted_replacement, unreplaced
from thunder.torch.base import broadcast_shapes, expand_to, maybe_convert_to_dtype, torchsymbol
from thunder.torch.linalg import _matmul
from thunder.torch.nn_utils import amax_keep, check_float, kernel_outputs, sum_keep, upcast

__all__ = ["scaled_dot_product_attention"]


def _repeat_heads(t, r: int):
    """``t.repeat_interleave(r, dim=-3)`` as broadcast + reshape (grouped-query attention)."""
    if r == 1:
        return t
    shape = t.shape
    expanded = (*shape[:-2], r, *shape[-2:])
    dims = tuple(d for d in range(len(expanded)) if d != len(shape) - 2)
    t = prims.broadcast_in_dim(t, expanded, dims)
    return prims.reshape(t, (*shape[:-3], shape[-3] * r, *shape[-2:]))


@torchsymbol(F.scaled_dot_product_attention, tags=(RANDOM,))
def scaled_dot_product_attention(
    query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False
):
    """``F.scaled_dot_product_attention``: ``softmax(q @ k^T * scale + mask) @ v``.

    ``attn_mask`` is a bool mask (True takes part) or a float bias added to the scores;
    ``is_causal`` masks keys after each query; ``enable_gqa`` repeats key/value heads.
    """
    op = "ltorch.scaled_dot_product_attention"
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_float(op, name, t)
        if t.ndim < 2:
            raise ThunderValueError(
                f"{op}: {name} must have at least 2 dims (..., L, E), but got shape {list(t.shape)}"
            )
    if not (query.dtype == key.dtype == value.dtype):
        raise ThunderTypeError(
            f"{op}: Expected query, key, and value to have the same dtype, but got query.dtype: {query.dtype} "
            f"key.dtype: {key.dtype} and value.dtype: {value.dtype} instead."
        )
    if query.shape[-1] != key.shape[-1]:
        raise ThunderValueError(
            f"{op}: query and key must have the same embedding dim, but got query {list(query.shape)} and key "
            f"{list(key.shape)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ThunderValueError(
            f"{op}: key and value must have the same sequence length, but got key {list(key.shape)} and value "
            f"{list(value.shape)}"
        )
    if is_causal and attn_mask is not None:
        raise ThunderValueError(f"{op}: Explicit attn_mask should not be set when is_causal=True")
    dropout_p = pyval(dropout_p)
    if not 0.0 <= dropout_p <= 1.0:
        raise ThunderValueError(f"{op}: dropout_p must be in [0, 1], but got {dropout_p!r}")
    q, k, v = upcast(query), upcast(key), upcast(value)
    if enable_gqa and q.ndim >= 3 and k.shape[-3] != q.shape[-3]:
        hq, hk = q.shape[-3], k.shape[-3]
        if hk == 0 or hq % hk or v.shape[-3] != hk:
            raise ThunderValueError(
                f"{op}: with enable_gqa the number of query heads ({hq}) must be a multiple of the key/value heads "
                f"({hk}, {v.shape[-3]})"
            )
        k, v = _repeat_heads(k, hq // hk), _repeat_heads(v, hq // hk)
    L, S, E = q.shape[-2], k.shape[-2], q.shape[-1]
    scale = 1.0 / math.sqrt(E) if scale is None else float(pyval(scale))
    kt = prims.transpose(k, (*range(k.ndim - 2), k.ndim - 1, k.ndim - 2))
    scores = prims.mul(_matmul(q, kt), scale)
    if is_causal:
        rows = prims.broadcast_in_dim(prims.iota(L, start=0, step=1, device=q.device, dtype=dtypes.int64), (L, S), (0,))
        cols = prims.broadcast_in_dim(prims.iota(S, start=0, step=1, device=q.device, dtype=dtypes.int64), (L, S), (1,))
        attn_mask = prims.le(cols, rows)
    if attn_mask is not None:
        shape = broadcast_shapes(op, scores.shape, attn_mask.shape)
        if shape != scores.shape:
            raise ThunderValueError(
                f"{op}: attn_mask of shape {list(attn_mask.shape)} does not broadcast to the scores {list(scores.shape)}"
            )
        mask = expand_to(attn_mask, shape)
        if mask.dtype is dtypes.bool8:
            scores = prims.where(mask, scores, -math.inf)
        else:
            scores = prims.add(scores, maybe_convert_to_dtype(mask, scores.dtype))
    if S == 0:
        probs = scores
    else:
        # A row whose scores are all -inf (fully masked) is 0, as eager's safe softmax makes it; its max
        # and sum are replaced where they would make NaN, so its gradient is 0 too, not NaN.
        top = amax_keep(scores, (scores.ndim - 1,))
        top = prims.where(prims.eq(top, -math.inf), 0.0, top)
        e = prims.exp(prims.sub(scores, top))
        total = sum_keep(e, (scores.ndim - 1,))
        probs = prims.div(e, prims.where(prims.eq(total, 0.0), 1.0, total))
    if dropout_p > 0:
        from thunder.torch.nn import dropout

        probs = dropout(probs, dropout_p, True)
    out = _matmul(probs, v)
    return maybe_convert_to_dtype(out, query.dtype)


# ----------------------------------------------------------------------------------------
# The gradient, with PyTorch's own fused kernels where eager uses them
# ----------------------------------------------------------------------------------------


def _flash_cpu_impl(query, key, value, is_causal, attn_mask, scale, enable_gqa):
    """Eager's output, and the logsumexp of the scores. Eager runs the CPU flash kernel when
    ``torch._fused_sdp_choice`` picks it for these tensors (it looks at their strides too); then
    this runs it on them as well. Otherwise eager's own choice computes the output, and the flash
    kernel on contiguous copies gives the logsumexp its backward needs."""
    if _picks_flash(query, key, value, attn_mask, is_causal, scale, enable_gqa):
        return tuple(
            torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
                query, key, value, 0.0, is_causal, attn_mask=attn_mask, scale=scale
            )
        )
    out = F.scaled_dot_product_attention(
        query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa
    )
    q, k, v, m = _contiguous(query, key, value, attn_mask)
    _, logsumexp = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, 0.0, is_causal, attn_mask=m, scale=scale
    )
    return out, logsumexp


def _eagers_kernel(query, key, value, attn_mask, is_causal, scale, enable_gqa) -> int:
    """The CPU kernel eager's attention runs for these tensors without dropout (``_FLASH``, ``_MATH``)."""
    return torch._fused_sdp_choice(query, key, value, attn_mask, 0.0, is_causal, scale=scale, enable_gqa=enable_gqa)


def _picks_flash(query, key, value, attn_mask, is_causal, scale, enable_gqa) -> bool:
    return _eagers_kernel(query, key, value, attn_mask, is_causal, scale, enable_gqa) == _FLASH


def _contiguous(*tensors):
    return tuple(t.contiguous() if t is not None else None for t in tensors)


@torchsymbol(id="torch.sdpa_flash_cpu", torch_impl=_flash_cpu_impl)
def sdpa_flash_cpu(query, key, value, is_causal, attn_mask, scale, enable_gqa):
    """Attention as eager computes it, with the logsumexp of the scores that eager's fused CPU
    backward (``aten._scaled_dot_product_flash_attention_for_cpu_backward``) needs: the augmented
    forward the autograd split records."""
    out = TensorProxy.like(query, shape=(*query.shape[:-1], value.shape[-1]), requires_grad=False)
    return out, TensorProxy.like(query, shape=tuple(query.shape[:-1]), dtype=torch.float32, requires_grad=False)


def _flash_cpu_backward_impl(grad_out, query, key, value, out, logsumexp, is_causal, attn_mask, scale, enable_gqa):
    """Eager's backward: the fused one where eager ran the flash kernel; otherwise the backward of
    the kernel eager chose, by torch's autograd on a recomputation (a layout the flash kernel refuses)."""
    if not _picks_flash(query, key, value, attn_mask, is_causal, scale, enable_gqa):
        with torch.enable_grad():
            q, k, v = (t.detach().requires_grad_() for t in (query, key, value))
            recomputed = F.scaled_dot_product_attention(
                q, k, v, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa
            )
            return torch.autograd.grad(recomputed, (q, k, v), grad_out)
    return tuple(
        torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward(
            grad_out, query, key, value, out, logsumexp, 0.0, is_causal, attn_mask=attn_mask, scale=scale
        )
    )


@torchsymbol(id="torch.sdpa_flash_cpu_backward", torch_impl=_flash_cpu_backward_impl)
def sdpa_flash_cpu_backward(grad_out, query, key, value, out, logsumexp, is_causal, attn_mask, scale, enable_gqa):
    """The gradients of ``sdpa_flash_cpu`` for query, key and value (eager's fused backward kernel)."""
    return tuple(TensorProxy.like(t, requires_grad=False) for t in (query, key, value))


@grad_rules.register(sdpa_flash_cpu)
def _sdpa_flash_cpu_vjp(g, out, query, key, value, is_causal, attn_mask, scale, enable_gqa):
    gq, gk, gv = sdpa_flash_cpu_backward(
        g[0], query, key, value, out[0], out[1], is_causal, attn_mask, scale, enable_gqa
    )
    return (gq, gk, gv, None, None, None, None)


def _math_impl(query, key, value, attn_mask, is_causal, scale, enable_gqa, mask_requires_grad):
    """Eager's output, and the attention weights its math kernel's backward reads. Where eager runs
    the math kernel (``torch._fused_sdp_choice``; always for a mask that requires grad), this runs it;
    otherwise eager's own choice computes the output, and the math kernel the weights."""
    out, weights = torch.ops.aten._scaled_dot_product_attention_math(
        query, key, value, attn_mask, 0.0, is_causal, scale=scale, enable_gqa=enable_gqa
    )
    if not mask_requires_grad and _eagers_kernel(query, key, value, attn_mask, is_causal, scale, enable_gqa) != _MATH:
        out = F.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa
        )
    return out, weights


@torchsymbol(id="torch.sdpa_math", torch_impl=_math_impl)
def sdpa_math(query, key, value, attn_mask, is_causal, scale, enable_gqa, mask_requires_grad):
    """Attention as eager's math kernel computes it (``aten._scaled_dot_product_attention_math``:
    ``softmax(q√s @ kᵀ√s + mask) @ v``), with the attention weights: the augmented forward the
    autograd split records where eager differentiates that kernel."""
    return kernel_outputs(
        "ltorch.sdpa_math", lambda q, k, v, m: torch.ops.aten._scaled_dot_product_attention_math(
            q, k, v, m, 0.0, is_causal, scale=scale, enable_gqa=enable_gqa
        ), query, key, value, attn_mask,
    )  # fmt: skip


def _math_backward_impl(grad_out, query, key, value, weights, mask_shape, scale, enable_gqa):
    """The gradients eager's autograd computes through the math kernel, for query, key, value and
    (when ``mask_shape`` is given) the additive mask, in its order: each matmul's, the softmax's
    (``_softmax_backward_data``), the sums over broadcast heads before the scale, then over the
    heads grouped-query attention repeated."""
    root = math.sqrt(1.0 / math.sqrt(query.shape[-1]) if scale is None else abs(scale))
    q_root = -root if scale is not None and scale < 0 else root
    k, v = key, value
    groups = query.shape[-3] // key.shape[-3] if enable_gqa and key.shape[-3] != query.shape[-3] else 1
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=-3), v.repeat_interleave(groups, dim=-3)
    # Broadcast heads or batches are copied out as eager's matmul copies them: the layouts (and so the
    # roundings) of the backward's matmuls are eager's.
    batch = broadcast_shapes("scaled_dot_product_attention", query.shape[:-2], k.shape[:-2])

    def batched(t):
        return t if t.shape[:-2] == batch else t.expand(*batch, *t.shape[-2:]).contiguous()

    grad_v = torch.matmul(weights.transpose(-2, -1), grad_out).sum_to_size(v.shape)
    grad_scores = torch._softmax_backward_data(
        torch.matmul(grad_out, batched(v).transpose(-2, -1)), weights, -1, weights.dtype
    )
    k_scaled = batched(k.transpose(-2, -1) * root).transpose(-2, -1)
    grad_q = torch.matmul(grad_scores, k_scaled).sum_to_size(query.shape) * q_root
    kt_shape = (*k.shape[:-2], k.shape[-1], k.shape[-2])
    grad_kt = torch.matmul(batched(query * q_root).transpose(-2, -1), grad_scores).sum_to_size(kt_shape) * root
    grad_k = grad_kt.transpose(-2, -1)
    if groups > 1:
        grad_k = grad_k.unflatten(-3, (key.shape[-3], groups)).sum(-3)
        grad_v = grad_v.unflatten(-3, (value.shape[-3], groups)).sum(-3)
    grad_mask = None if mask_shape is None else grad_scores.sum_to_size(mask_shape)
    return grad_q, grad_k, grad_v, grad_mask


@torchsymbol(id="torch.sdpa_math_backward", torch_impl=_math_backward_impl)
def sdpa_math_backward(grad_out, query, key, value, weights, mask_shape, scale, enable_gqa):
    """The gradients of ``sdpa_math`` for query, key, value and the mask (None without ``mask_shape``)."""
    grads = tuple(TensorProxy.like(t, requires_grad=False) for t in (query, key, value))
    mask = None if mask_shape is None else TensorProxy.like(query, shape=tuple(mask_shape), requires_grad=False)
    return (*grads, mask)


@grad_rules.register(sdpa_math)
def _sdpa_math_vjp(g, out, query, key, value, attn_mask, is_causal, scale, enable_gqa, mask_requires_grad):
    mask_shape = tuple(attn_mask.shape) if mask_requires_grad else None
    gq, gk, gv, gm = sdpa_math_backward(g[0], query, key, value, out[1], mask_shape, scale, enable_gqa)
    return (gq, gk, gv, gm, None, None, None, None)


@forward_rules.register(scaled_dot_product_attention)
def _sdpa_forward(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """On CPU without dropout, the kernel eager chooses (``torch._fused_sdp_choice``) with what its
    backward needs: the flash kernel (``sdpa_flash_cpu``, keeping the logsumexp for eager's fused
    backward) or, in float32 and float64, the math kernel (``sdpa_math``, keeping the attention
    weights, as eager's autograd does), also for a mask that requires grad. Elsewhere (dropout,
    other devices, the math kernel in reduced precision, which computes in float32 inside) the call
    stays as it is and its gradient is its decomposition's. A bool mask becomes what eager passes the
    kernels (0 where True, -inf where False): a fully masked row is 0 and so is its gradient, as in
    eager. Grouped-query attention (``enable_gqa``) runs in the same kernels, as in eager."""
    if (
        query.device.type != "cpu"
        or pyval(dropout_p) != 0
        or not (query.ndim == key.ndim == value.ndim == 4)
        or (attn_mask is not None and attn_mask.dtype not in (query.dtype, torch.bool))
    ):
        return None
    mask_requires_grad = attn_mask is not None and bool(attn_mask.requires_grad)
    if attn_mask is not None and attn_mask.dtype is torch.bool:
        additive = prims.where(attn_mask, 0.0, -math.inf)
        attn_mask = maybe_convert_to_dtype(additive, query.dtype)
    scale = None if scale is None else float(pyval(scale))
    try:  # contiguous stand-ins: which kernel eager can run at all (strides are decided per call)
        q, k, v = (torch.empty(tuple(t.shape), dtype=t.dtype) for t in (query, key, value))
        mask = None
        if attn_mask is not None:
            mask = torch.empty(tuple(attn_mask.shape), dtype=attn_mask.dtype, requires_grad=mask_requires_grad)
        choice = _eagers_kernel(q, k, v, mask, bool(is_causal), scale, bool(enable_gqa))
    except (RuntimeError, TypeError):
        return None
    if choice == _FLASH and not mask_requires_grad:
        out, _ = sdpa_flash_cpu(query, key, value, bool(is_causal), attn_mask, scale, bool(enable_gqa))
        return out
    if choice == _MATH and query.dtype in (torch.float32, torch.float64):
        out, _ = sdpa_math(query, key, value, attn_mask, bool(is_causal), scale, bool(enable_gqa), mask_requires_grad)
        return out
    return None


# What torch._fused_sdp_choice returns for the kernels: 1 and 0.
_FLASH, _MATH = int(torch.nn.attention.SDPBackend.FLASH_ATTENTION), int(torch.nn.attention.SDPBackend.MATH)
__all__ += ["sdpa_flash_cpu", "sdpa_flash_cpu_backward", "sdpa_math", "sdpa_math_backward"]


# Note [Transformer fast paths]
# In evaluation without gradients, nn.MultiheadAttention and nn.TransformerEncoderLayer call fused
# kernels when their conditions hold (batch_first, self-attention, no autocast, ...):
# ``torch._native_multi_head_attention`` and ``torch._transformer_encoder_layer_fwd``. They are symbols
# that run those kernels, so the values are eager's own; their metas run the kernels on meta tensors.
# They have no gradient: the modules take these paths only when no input requires grad.
#
# nn.TransformerEncoder with a padding mask, in inference, runs the batch as a nested tensor when the
# mask is left-aligned (padding at the end): its output has zeros at the padded positions (before
# the final norm). Traces hold no nested tensors, so its traced calls run ``_encoder_forward``: the
# same conditions, checked as eager checks them (the alignment is a data-dependent value), then the
# layers densely with the mask, and zeros where eager's ``to_padded_tensor`` puts them. At the other
# positions the values are the dense kernels', which equal the nested ones within rounding.


@torchsymbol(torch._native_multi_head_attention)
def native_multi_head_attention(query, key, value, embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                mask=None, need_weights=True, average_attn_weights=True, mask_type=None):  # fmt: skip
    """``torch._native_multi_head_attention``: nn.MultiheadAttention's fused inference kernel
    (Note [Transformer fast paths]): (output, weights or None)."""
    return kernel_outputs("ltorch.native_multi_head_attention", torch._native_multi_head_attention, query, key, value,
                          embed_dim, num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask, need_weights,
                          average_attn_weights, mask_type)  # fmt: skip


@torchsymbol(torch._transformer_encoder_layer_fwd)
def transformer_encoder_layer_fwd(src, embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias,
                                  use_gelu, norm_first, eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2,
                                  ffn_weight_1, ffn_bias_1, ffn_weight_2, ffn_bias_2, mask=None, mask_type=None):  # fmt: skip
    """``torch._transformer_encoder_layer_fwd``: nn.TransformerEncoderLayer's fused inference kernel
    (Note [Transformer fast paths])."""
    return kernel_outputs("ltorch.transformer_encoder_layer_fwd", torch._transformer_encoder_layer_fwd, src,
                          embed_dim, num_heads, qkv_weight, qkv_bias, proj_weight, proj_bias, use_gelu, norm_first,
                          eps, norm_weight_1, norm_bias_1, norm_weight_2, norm_bias_2, ffn_weight_1, ffn_bias_1,
                          ffn_weight_2, ffn_bias_2, mask, mask_type)  # fmt: skip


__all__ += ["native_multi_head_attention", "transformer_encoder_layer_fwd"]


_ENCODER_FORWARD = torch.nn.TransformerEncoder.forward
_dense_encoder_forward = unreplaced(_ENCODER_FORWARD)


def _encoder_forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
    """``nn.TransformerEncoder.forward`` in traced code (Note [Transformer fast paths])."""
    padding = _nested_padding(self, src, mask, src_key_padding_mask)
    if padding is None:
        return _dense_encoder_forward(self, src, mask, src_key_padding_mask, is_causal)
    output = src
    for layer in self.layers:
        output = layer(output, src_mask=None, is_causal=bool(is_causal), src_key_padding_mask=padding)
    output = output.masked_fill(padding.unsqueeze(-1), 0.0)
    return output if self.norm is None else self.norm(output)


def _nested_padding(self, src, mask, src_key_padding_mask):
    """The bool padding mask (True: padded) when eager would run ``src`` as a nested tensor, else None."""
    if src_key_padding_mask is None or mask is not None or src.dim() != 3 or src.is_nested:
        return None
    first = self.layers[0]
    if not torch.backends.mha.get_fastpath_enabled() or not getattr(self, "use_nested_tensor", False):
        return None
    if first.training or torch.is_autocast_enabled() or src.device.type not in ("cpu", "cuda"):
        return None
    weights = (first.self_attn.in_proj_weight, first.self_attn.in_proj_bias, first.self_attn.out_proj.weight,
               first.self_attn.out_proj.bias, first.norm1.weight, first.norm1.bias, first.norm2.weight,
               first.norm2.bias, first.linear1.weight, first.linear1.bias, first.linear2.weight, first.linear2.bias)  # fmt: skip
    if torch.is_grad_enabled() and (src.requires_grad or any(w.requires_grad for w in weights)):
        return None
    canonical = F._canonical_mask(mask=src_key_padding_mask, mask_name="src_key_padding_mask", other_type=None,
                                  other_name="mask", target_type=src.dtype)  # fmt: skip
    keep = canonical.logical_not()
    if getattr(self, "mask_check", True):
        # torch._nested_tensor_from_mask_left_aligned: each row keeps a prefix.
        prefix = torch.arange(keep.shape[-1], device=keep.device) < keep.sum(-1, keepdim=True)
        if not bool((keep == prefix).all()):
            return None
    return keep.logical_not()


register_interpreted_replacement(_ENCODER_FORWARD, _encoder_forward)
