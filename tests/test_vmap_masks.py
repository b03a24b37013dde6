"""``torch.vmap`` inside a jitted function (Note [torch.vmap in a trace] in thunder.core.traced_vmap): transformers'
attention masks built with custom mask functions (``sdpa_mask(..., use_vmap=True)``: four nested vmaps over the
batch, head, query and key indices), plain vmaps of elementwise functions, the functions thunder refuses to batch,
and the models whose masks need it (Gemma3 bidirectional and with images, T5Gemma2), all against eager."""

from __future__ import annotations

import copy

import pytest
import torch

import thunder
from thunder.core.errors import UnsupportedOpError

transformers = pytest.importorskip("transformers")
from transformers import masking_utils as mu  # noqa: E402


def _same(actual, expected):
    for a, e in zip(torch.utils._pytree.tree_leaves(actual), torch.utils._pytree.tree_leaves(expected), strict=True):
        assert a.shape == e.shape and a.dtype == e.dtype
        torch.testing.assert_close(a, e, rtol=0, atol=0)


def _check(fn, *args):
    jfn = thunder.jit(fn)
    _same(jfn(*args), fn(*args))
    _same(jfn(*args), fn(*args))
    assert thunder.cache_hits(jfn) == 1
    return jfn


def _window(left: int, right: int):
    """t5gemma2's, gemma4's and moonshine_streaming's uni/bidirectional sliding window."""
    def inner_mask(batch_idx, head_idx, q_idx, kv_idx):
        dist = q_idx - kv_idx
        return ((dist >= 0) & (dist < left)) | ((dist < 0) & (-dist < right))
    return inner_mask


def _chunked_limited(left_ctx: int, right_ctx: int):
    """nemotron_asr_streaming's chunked mask (``torch.div`` with rounding)."""
    chunk = right_ctx + 1
    def inner_mask(batch_idx, head_idx, q_idx, kv_idx):
        diff = torch.div(q_idx, chunk, rounding_mode="trunc") - torch.div(kv_idx, chunk, rounding_mode="trunc")
        return (diff >= 0) & (diff <= left_ctx // chunk)
    return inner_mask


def _prefill(kv_offset: int, prefill_length: float):
    """unlimited_ocr's prefill overlay: a comparison with a float (``inf``)."""
    return mu.and_masks(mu.causal_mask_function, lambda b, h, q, kv: kv - kv_offset < prefill_length)


_BLOCKS = torch.tensor([[-1, 0, 0, 0, -1, -1, 1, 1, -1], [0, 0, -1, -1, 1, 1, 1, -1, -1], [-1] * 9])
_PADDING = torch.tensor([[0, 0, 1, 1, 1, 1, 1, 1, 1], [1] * 9, [1, 1, 1, 1, 1, 1, 1, 0, 0]], dtype=torch.bool)
_MASKS = {
    "causal": lambda: mu.causal_mask_function,
    "bidirectional": lambda: mu.or_masks(mu.causal_mask_function, lambda *args: torch.tensor(True, dtype=torch.bool)),
    "sliding_causal": lambda: mu.sliding_window_causal_mask_function(3),
    "gemma3_bidirectional_window": lambda: mu.or_masks(
        mu.sliding_window_causal_mask_function(4), lambda b, h, q, kv: abs(q - kv) < 4
    ),
    "sliding_bidirectional": lambda: mu.sliding_window_bidirectional_mask_function(2),
    "blockwise": lambda: mu.or_masks(mu.causal_mask_function, mu.blockwise_overlay(_BLOCKS)),
    "blockwise_sliding": lambda: mu.and_masks(
        mu.or_masks(mu.causal_mask_function, mu.blockwise_overlay(_BLOCKS)), mu.sliding_window_overlay(3)
    ),
    "chunked": lambda: mu.chunked_causal_mask_function(3, torch.tensor([0, 2, 1])),
    "packed": lambda: mu.and_masks(
        mu.causal_mask_function, mu.packed_sequence_mask_function(torch.tensor([[0, 0, 0, 1, 1, 1, 1, 2, 2]] * 3))
    ),
    "window": lambda: mu.and_masks(mu.causal_mask_function, _window(3, 2)),
    "chunked_limited": lambda: mu.and_masks(mu.causal_mask_function, _chunked_limited(4, 1)),
    "prefill": lambda: _prefill(1, float("inf")),
}


@pytest.mark.parametrize("mask", sorted(_MASKS))
@pytest.mark.parametrize("batch, q_length, kv_length, q_offset, kv_offset, padded", [
    (3, 9, 9, 0, 0, True), (2, 4, 9, 5, 0, False), (1, 3, 7, 4, 2, True),
])  # fmt: skip
def test_sdpa_mask_with_vmap_matches_eager(mask, batch, q_length, kv_length, q_offset, kv_offset, padded):
    """transformers' vmap mask construction (a custom mask function: or_mask_function/and_mask_function,
    token_type_ids' blocks) over padding, offsets and batches: eager's mask."""
    mask_function = _MASKS[mask]()

    def build(attention_mask):
        return mu.sdpa_mask(batch, q_length, kv_length, q_offset=q_offset, kv_offset=kv_offset,
                            mask_function=mask_function, attention_mask=attention_mask, allow_is_causal_skip=False,
                            use_vmap=True)  # fmt: skip

    _check(build, _PADDING[:batch, : kv_length + kv_offset] if padded else None)


def test_create_causal_mask_with_or_and_mask_functions_matches_eager():
    """``create_causal_mask`` with both an or and an and mask function (Gemma3's image masks)."""
    config = transformers.Gemma3TextConfig(num_hidden_layers=1, hidden_size=16, sliding_window=3)
    config._attn_implementation = "sdpa"

    def build(embeds, attention_mask, blocks):
        return mu.create_causal_mask(config=config, inputs_embeds=embeds, attention_mask=attention_mask, cache=None,
                                     position_ids=None, or_mask_function=mu.blockwise_overlay(blocks),
                                     and_mask_function=mu.sliding_window_overlay(3))  # fmt: skip

    _check(build, torch.randn(3, 9, 16), _PADDING.long(), _BLOCKS)


@pytest.mark.parametrize("case", ["scalar_and_mapped", "in_dims_1", "out_dims_1", "two_d", "reads_shape", "nested"])
def test_vmap_of_elementwise_function_matches_eager(case):
    """vmap of elementwise functions (values, dtypes, shapes), with the element shapes and Python values vmap shows
    the function (``x.shape``, ``x.ndim``: of one element)."""
    x, m, s = torch.randn(5), torch.randn(5, 3), torch.randn(())
    fns = {
        "scalar_and_mapped": (lambda x, s: torch.vmap(lambda a, b: (a * 2 + b).sin() > 0.1, in_dims=(0, None))(x, s),
                              (x, s)),
        "in_dims_1": (lambda m: torch.vmap(lambda a: a.exp() + torch.arange(5.0), in_dims=1)(m), (m,)),
        "out_dims_1": (lambda m: torch.vmap(lambda a: a * torch.arange(3.0), out_dims=1)(m), (m,)),
        "two_d": (lambda m, x: torch.vmap(lambda a, b: torch.where(a > b, a, b * 2))(m, x), (m, x)),
        "reads_shape": (lambda m: torch.vmap(lambda a: a.new_ones(a.shape) * a + a.ndim + a.shape[0])(m), (m,)),
        "nested": (lambda x, m: torch.vmap(lambda a: torch.vmap(lambda b, c: b * a - c)(m[0], m[1]))(x), (x, m)),
    }  # fmt: skip
    fn, args = fns[case]
    _check(fn, *args)


@pytest.mark.parametrize("case, refused", [
    ("scan", "cumsum cannot be batched: thunder has no batching rule for it"),
    ("index_reduction", "argmax cannot be batched"),
    ("in_place", "mul_ at "),
    ("random", "rand at "),
    ("promotion", "gt at .* the dtype it promotes its operands to depends on which of them vmap batches"),
])  # fmt: skip
def test_vmap_of_what_thunder_cannot_batch_is_refused(case, refused):
    """An op without a batching rule (a scan, an index reduction), an in-place update, a random draw, a promotion whose
    dtype depends on what is batched: a clear error that names the op and its line, not a wrong result."""
    fns = {
        "scan": lambda m: torch.vmap(lambda a: a.cumsum(0) + 1)(m),
        "index_reduction": lambda m: torch.vmap(lambda a: a.argmax())(m),
        "in_place": lambda m: torch.vmap(lambda a: a.mul_(2))(m),
        "random": lambda m: torch.vmap(lambda a: a * torch.rand(()))(m),
        # eager: float64 (where promotes the batched b, which has dimensions); f on elements: float32
        "promotion": lambda m: torch.vmap(lambda a, b: torch.where(a > b, a, b))(m, m[:, 0].double()),
    }
    with pytest.raises(UnsupportedOpError, match=rf"torch\.vmap of .* \(called at .*test_vmap_masks.py.*{refused}"):
        thunder.jit(fns[case])(torch.randn(5, 3))


def test_vmap_with_a_python_decision_on_an_element_is_refused():
    """``if idx > 2:`` on a mapped value: vmap refuses it, and so does thunder (the element has no value)."""
    with pytest.raises(RuntimeError, match="vmap"):
        torch.vmap(lambda a: a * 2 if a > 2 else a)(torch.arange(5))
    with pytest.raises(thunder.core.errors.ThunderRuntimeError, match="Data-dependent control flow"):
        thunder.jit(lambda x: torch.vmap(lambda a: a * 2 if a > 2 else a)(x))(torch.arange(5))


def test_vmap_of_clamp_with_gradients_is_refused():
    """clamp's gradient is its own rule's (eager's at the bounds), which its batched decomposition would not follow."""
    x = torch.randn(5, requires_grad=True)
    with pytest.raises(UnsupportedOpError, match="clamp at .* cannot be batched: its gradient"):
        thunder.jit(lambda x: torch.vmap(lambda a: a.clamp(0, 1))(x))(x)


def test_vmap_gradient_matches_eager():
    """The batched prims are differentiated as eager differentiates vmap."""
    x, w = torch.randn(5, requires_grad=True), torch.randn((), requires_grad=True)

    def fn(x, w):
        return torch.vmap(lambda a, b: (a * b).sin() * a, in_dims=(0, None))(x, w).sum()

    jfn = thunder.jit(fn)
    (gx, gw) = torch.autograd.grad(jfn(x, w), (x, w))
    (ex, ew) = torch.autograd.grad(fn(x, w), (x, w))
    torch.testing.assert_close((gx, gw), (ex, ew))


# Tiny configs: text (Gemma3 and T5Gemma2) and a SigLIP vision tower whose 16x16 image makes 4 image tokens.
_TEXT = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
             head_dim=8, vocab_size=100, sliding_window=4, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
             eos_token_id=2)  # fmt: skip
_VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=16,
               patch_size=4)  # fmt: skip
_IMAGE_TOKEN = 99


def _text_inputs() -> dict:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, 90, (2, 10), generator=g)
    attention_mask = torch.ones(2, 10, dtype=torch.long)
    attention_mask[1, 7:] = 0
    return {"input_ids": ids, "attention_mask": attention_mask}


def _image_inputs() -> dict:
    inputs = _text_inputs()
    inputs["input_ids"][:, 2:6] = _IMAGE_TOKEN
    inputs["token_type_ids"] = (inputs["input_ids"] == _IMAGE_TOKEN).long()
    inputs["pixel_values"] = torch.randn(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return inputs


def _gemma3_bidirectional():
    return transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(use_bidirectional_attention=True, **_TEXT))


def _gemma3_image():
    config = transformers.Gemma3Config(
        text_config=transformers.Gemma3TextConfig(**_TEXT), vision_config=transformers.SiglipVisionConfig(**_VISION),
        mm_tokens_per_image=4, image_token_index=_IMAGE_TOKEN, boi_token_index=97, eoi_token_index=98,
    )
    return transformers.Gemma3ForConditionalGeneration(config)


def _t5gemma2():
    config = transformers.T5Gemma2Config(
        encoder=transformers.T5Gemma2EncoderConfig(text_config=_TEXT, vision_config=_VISION, mm_tokens_per_image=4),
        decoder=transformers.T5Gemma2DecoderConfig(**_TEXT), image_token_index=_IMAGE_TOKEN,
    )
    return transformers.T5Gemma2ForConditionalGeneration(config)


def _t5gemma2_inputs() -> dict:
    inputs = _text_inputs()
    return {**inputs, "decoder_input_ids": inputs["input_ids"][:, :7].contiguous()}


@pytest.mark.parametrize("build, make_inputs", [
    (_gemma3_bidirectional, _text_inputs), (_gemma3_image, _image_inputs), (_t5gemma2, _t5gemma2_inputs),
], ids=["gemma3_bidirectional", "gemma3_image", "t5gemma2"])  # fmt: skip
def test_models_with_vmap_masks_match_eager(build, make_inputs):
    """Models whose masks take a custom mask function: the forward, a training step's loss and gradients as eager's,
    and the next call a cache hit."""
    torch.manual_seed(0)
    model = build()
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    inputs = make_inputs()
    model.eval(), reference.eval()
    with torch.no_grad():
        torch.testing.assert_close(jm(**inputs).logits, reference(**inputs).logits)
    model.train(), reference.train()
    labels = inputs.get("decoder_input_ids", inputs["input_ids"])
    loss, expected = jm(**inputs, labels=labels).loss, reference(**inputs, labels=labels).loss
    torch.testing.assert_close(loss, expected)
    loss.backward(), expected.backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        assert (p.grad is None) == (q.grad is None), name
        if q.grad is not None:
            torch.testing.assert_close(p.grad, q.grad, atol=1e-4, rtol=1e-3, msg=lambda m, name=name: f"{name}: {m}")
    hits = thunder.cache_hits(jm)
    jm(**inputs, labels=labels)
    assert thunder.cache_hits(jm) == hits + 1


def test_esmc_with_chains_matches_eager():
    """ESMC's chain-aware attention (``sequence_id``: a bidirectional mask with a packed-sequence and_mask_function)."""
    torch.manual_seed(0)
    config = transformers.EsmcConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)
    model = transformers.EsmcForMaskedLM(config).eval()
    ids = torch.randint(4, 60, (2, 9), generator=torch.Generator().manual_seed(0))
    chains = torch.tensor([[0, 0, 0, 1, 1, 1, 1, 2, 2], [0, 0, 0, 0, 0, 1, 1, 1, 1]])
    jm = thunder.jit(copy.deepcopy(model))
    with torch.no_grad():
        for _ in range(2):
            torch.testing.assert_close(jm(input_ids=ids, sequence_id=chains).logits,
                                       model(input_ids=ids, sequence_id=chains).logits)  # fmt: skip
    assert thunder.cache_hits(jm) == 1
