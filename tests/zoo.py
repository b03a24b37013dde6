"""The model zoo: Hugging Face ``transformers`` models built from tiny configs (2 layers, hidden
32-64, small vocabularies, dropout off, random weights; nothing is downloaded), their inputs, and
the ways people call them (``CALL_MODES``). Used by ``tests/test_model_zoo.py`` and by
``benchmarks/bench_models.py`` / ``benchmarks/zoo_table.py``; not a test module.

Every model is one ``ZooModel`` entry: how to build it, what kind of inputs it takes (``kind``)
and which call modes apply to it. A call mode is a function ``(entry, model) -> Call``: the
inputs of one call and how to read what the test compares (the loss or the logits) from the
output. ``check_call`` runs one call through ``thunder.jit`` and through eager from the same
weights and compares outputs and, in training mode, parameter gradients.

Layer: tests (helpers). Imports: torch, transformers, thunder.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

import torch

import thunder

VOCAB = 100
BATCH, SEQ = 2, 8
IMAGE = 16  # vision models take BATCH x 3 x IMAGE x IMAGE pixel values
MEL_BINS, MEL_FRAMES = 16, 32  # Whisper's input features
NUM_LABELS = 3

# Config attributes that hold a dropout probability somewhere in the zoo: all set to 0 so that
# train() mode is deterministic and comparable with eager.
_DROPOUT_KEYS = (
    "attn_pdrop", "resid_pdrop", "embd_pdrop", "summary_first_dropout", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "attention_dropout", "hidden_dropout", "dropout", "activation_dropout",
    "classifier_dropout", "classifier_dropout_prob", "dropout_rate", "seq_classif_dropout", "qa_dropout",
    "drop_path_rate", "layerdrop", "encoder_layerdrop", "decoder_layerdrop", "router_jitter_noise",
    "projection_dropout", "ffn_dropout",
)  # fmt: skip


def _transformers():
    import transformers

    return transformers


def _decoder_kw(**extra) -> dict:
    """The common part of a Llama-style decoder config (2 layers, hidden 32, 4 query heads over
    2 key/value heads)."""
    return dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64, pad_token_id=0,
                bos_token_id=1, eos_token_id=2, **extra)  # fmt: skip


def _encoder_kw(**extra) -> dict:
    """The common part of a BERT-style encoder config."""
    return dict(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64, vocab_size=VOCAB,
                max_position_embeddings=64, **extra)  # fmt: skip


def _no_dropout(config):
    """Sets every dropout probability of ``config`` (and of its text and vision parts) to 0, before
    the model is built: many modules copy the probability into an attribute at construction."""
    for part in (config, getattr(config, "text_config", None), getattr(config, "vision_config", None)):
        for key in _DROPOUT_KEYS:
            if isinstance(getattr(part, key, None), float):
                setattr(part, key, 0.0)
    return config


def _build(cls_name: str, config_name: str, **kw) -> Callable[[], torch.nn.Module]:
    def build():
        t = _transformers()
        return getattr(t, cls_name)(_no_dropout(getattr(t, config_name)(**kw)))

    return build


@dataclasses.dataclass(frozen=True)
class ZooModel:
    """One model of the zoo.

    kind: ``causal`` (decoder LM: ``input_ids``, ``labels``, a KV cache, ``generate``),
    ``masked`` (encoder LM: ``input_ids``, ``token_type_ids`` where ``types`` is set),
    ``seq_cls``, ``token_cls`` and ``qa`` (classification and question-answering heads on ``input_ids``),
    ``seq2seq`` (encoder-decoder LM), ``speech`` (Whisper: ``input_features``), ``vision``
    (image classification: ``pixel_values``), ``clip`` (text and image towers, a contrastive loss).
    """

    name: str
    build: Callable[[], torch.nn.Module]
    kind: str
    types: bool = False  # takes token_type_ids
    generate: bool = False  # decoder with a KV cache: generate() applies


def _clip():
    t = _transformers()
    text = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                max_position_embeddings=SEQ, eos_token_id=2, pad_token_id=0, bos_token_id=1)  # fmt: skip
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2, image_size=IMAGE,
                  patch_size=4)  # fmt: skip
    return t.CLIPModel(_no_dropout(t.CLIPConfig(text_config=text, vision_config=vision, projection_dim=16)))


# The table is aligned by hand (one model per entry).
# fmt: off
_LM = "ForCausalLM"
ZOO: dict[str, ZooModel] = {
    m.name: m
    for m in [
        ZooModel("gpt2", _build("GPT2LMHeadModel", "GPT2Config", n_layer=2, n_head=2, n_embd=32, vocab_size=VOCAB,
                                n_positions=64, bos_token_id=0, eos_token_id=0), "causal", generate=True),
        ZooModel("gpt_neox", _build("GPTNeoX" + _LM, "GPTNeoXConfig", num_hidden_layers=2, num_attention_heads=2,
                                    hidden_size=32, intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=64,
                                    bos_token_id=1, eos_token_id=2), "causal", generate=True),
        ZooModel("opt", _build("OPT" + _LM, "OPTConfig", num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                               ffn_dim=64, word_embed_proj_dim=32, vocab_size=VOCAB, max_position_embeddings=64,
                               pad_token_id=1, bos_token_id=2, eos_token_id=2), "causal", generate=True),
        ZooModel("falcon", _build("Falcon" + _LM, "FalconConfig", num_hidden_layers=2, num_attention_heads=2,
                                  hidden_size=32, vocab_size=VOCAB, bos_token_id=1, eos_token_id=2), "causal",
                 generate=True),
        ZooModel("bloom", _build("Bloom" + _LM, "BloomConfig", n_layer=2, n_head=2, hidden_size=32, vocab_size=VOCAB,
                                 bos_token_id=1, eos_token_id=2), "causal", generate=True),
        ZooModel("gptj", _build("GPTJ" + _LM, "GPTJConfig", n_layer=2, n_head=2, n_embd=32, rotary_dim=8,
                                vocab_size=VOCAB, n_positions=64, bos_token_id=1, eos_token_id=2), "causal",
                 generate=True),
        ZooModel("llama", _build("Llama" + _LM, "LlamaConfig", **_decoder_kw()), "causal", generate=True),
        ZooModel("mistral", _build("Mistral" + _LM, "MistralConfig", **_decoder_kw(sliding_window=None)), "causal",
                 generate=True),
        ZooModel("mixtral", _build("Mixtral" + _LM, "MixtralConfig", **_decoder_kw(num_local_experts=4,
                                   num_experts_per_tok=2, sliding_window=None)), "causal", generate=True),
        ZooModel("qwen2", _build("Qwen2" + _LM, "Qwen2Config", **_decoder_kw()), "causal", generate=True),
        ZooModel("qwen3", _build("Qwen3" + _LM, "Qwen3Config", **_decoder_kw(head_dim=8)), "causal", generate=True),
        ZooModel("gemma", _build("Gemma" + _LM, "GemmaConfig", **_decoder_kw(head_dim=8)), "causal", generate=True),
        ZooModel("gemma2", _build("Gemma2" + _LM, "Gemma2Config", **_decoder_kw(head_dim=8, sliding_window=4,
                                  query_pre_attn_scalar=8)), "causal", generate=True),
        ZooModel("phi3", _build("Phi3" + _LM, "Phi3Config", **_decoder_kw()), "causal", generate=True),
        ZooModel("gpt_bigcode", _build("GPTBigCode" + _LM, "GPTBigCodeConfig", n_layer=2, n_head=2, n_embd=32,
                                       vocab_size=VOCAB, n_positions=64, bos_token_id=1, eos_token_id=2), "causal",
                 generate=True),
        ZooModel("starcoder2", _build("Starcoder2" + _LM, "Starcoder2Config", **_decoder_kw(sliding_window=None)),
                 "causal", generate=True),
        ZooModel("olmo", _build("Olmo" + _LM, "OlmoConfig", **_decoder_kw()), "causal", generate=True),
        ZooModel("stablelm", _build("StableLm" + _LM, "StableLmConfig", **_decoder_kw()), "causal", generate=True),
        ZooModel("mpt", _build("Mpt" + _LM, "MptConfig", n_layers=2, n_heads=2, d_model=32, expansion_ratio=2,
                               vocab_size=VOCAB, max_seq_len=64), "causal", generate=True),
        ZooModel("bert", _build("BertForMaskedLM", "BertConfig", **_encoder_kw()), "masked", types=True),
        ZooModel("roberta", _build("RobertaForMaskedLM", "RobertaConfig", **_encoder_kw(pad_token_id=1)), "masked"),
        ZooModel("distilbert", _build("DistilBertForMaskedLM", "DistilBertConfig", n_layers=2, n_heads=2, dim=32,
                                      hidden_dim=64, vocab_size=VOCAB, max_position_embeddings=64), "masked"),
        ZooModel("albert", _build("AlbertForMaskedLM", "AlbertConfig", **_encoder_kw(embedding_size=16)), "masked",
                 types=True),
        ZooModel("deberta_v2", _build("DebertaV2ForMaskedLM", "DebertaV2Config", **_encoder_kw()), "masked",
                 types=True),
        ZooModel("mobilebert", _build("MobileBertForMaskedLM", "MobileBertConfig", **_encoder_kw(embedding_size=16,
                                      intra_bottleneck_size=16, true_hidden_size=16, num_feedforward_networks=2)),
                 "masked", types=True),
        ZooModel("electra", _build("ElectraForMaskedLM", "ElectraConfig", **_encoder_kw(embedding_size=16)), "masked",
                 types=True),
        ZooModel("bert_seq_cls", _build("BertForSequenceClassification", "BertConfig",
                                        **_encoder_kw(num_labels=NUM_LABELS)), "seq_cls", types=True),
        ZooModel("bert_token_cls", _build("BertForTokenClassification", "BertConfig",
                                          **_encoder_kw(num_labels=NUM_LABELS)), "token_cls", types=True),
        ZooModel("bert_qa", _build("BertForQuestionAnswering", "BertConfig", **_encoder_kw(num_labels=2)), "qa",
                 types=True),
        ZooModel("gpt2_seq_cls", _build("GPT2ForSequenceClassification", "GPT2Config", n_layer=2, n_head=2, n_embd=32,
                                        vocab_size=VOCAB, n_positions=64, pad_token_id=0, num_labels=NUM_LABELS),
                 "seq_cls"),
        ZooModel("llama_seq_cls", _build("LlamaForSequenceClassification", "LlamaConfig",
                                         **_decoder_kw(num_labels=NUM_LABELS)), "seq_cls"),
        ZooModel("t5", _build("T5ForConditionalGeneration", "T5Config", num_layers=2, num_heads=2, d_model=32, d_kv=16,
                              d_ff=64, vocab_size=VOCAB, decoder_start_token_id=0), "seq2seq"),
        ZooModel("bart", _build("BartForConditionalGeneration", "BartConfig", encoder_layers=2, decoder_layers=2,
                                encoder_attention_heads=2, decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64,
                                decoder_ffn_dim=64, vocab_size=VOCAB, max_position_embeddings=64), "seq2seq"),
        ZooModel("whisper", _build("WhisperForConditionalGeneration", "WhisperConfig", encoder_layers=2,
                                   decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2, d_model=32,
                                   encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=VOCAB, num_mel_bins=MEL_BINS,
                                   max_source_positions=MEL_FRAMES // 2, max_target_positions=32,
                                   decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2),
                 "speech"),
        ZooModel("vit", _build("ViTForImageClassification", "ViTConfig", image_size=IMAGE, patch_size=4,
                               num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                               num_labels=NUM_LABELS), "vision"),
        ZooModel("deit", _build("DeiTForImageClassification", "DeiTConfig", image_size=IMAGE, patch_size=4,
                                num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                num_labels=NUM_LABELS), "vision"),
        ZooModel("beit", _build("BeitForImageClassification", "BeitConfig", image_size=IMAGE, patch_size=4,
                                num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                num_labels=NUM_LABELS, use_mean_pooling=True), "vision"),
        ZooModel("swin", _build("SwinForImageClassification", "SwinConfig", image_size=IMAGE, patch_size=2,
                                embed_dim=16, depths=[1, 1], num_heads=[2, 2], window_size=2, num_labels=NUM_LABELS),
                 "vision"),
        ZooModel("convnext", _build("ConvNextForImageClassification", "ConvNextConfig", num_stages=2, hidden_sizes=[8, 16],
                                    depths=[1, 1], num_labels=NUM_LABELS), "vision"),
        ZooModel("resnet", _build("ResNetForImageClassification", "ResNetConfig", embedding_size=8,
                                  hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic", num_labels=NUM_LABELS),
                 "vision"),
        ZooModel("clip", _clip, "clip"),
    ]
}
# fmt: on


def build(name: str) -> torch.nn.Module:
    """The zoo model ``name`` with seeded random weights and every dropout probability 0 (in the
    config, see ``_no_dropout``, and in every ``nn.Dropout``)."""
    torch.manual_seed(0)
    model = ZOO[name].build()
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model


@dataclasses.dataclass
class Call:
    """One call: keyword arguments, and what to compare from the output (``pick``)."""

    kwargs: dict[str, Any]
    pick: Callable[[Any], Any] = dataclasses.field(default=lambda out: out)


def _generator() -> torch.Generator:
    return torch.Generator().manual_seed(1234)


def input_ids(batch: int = BATCH, seq: int = SEQ) -> torch.Tensor:
    """Token ids that avoid 0-2 (pad/bos/eos in the zoo's configs)."""
    return torch.randint(3, VOCAB, (batch, seq), generator=_generator())


def padded_mask(batch: int = BATCH, seq: int = SEQ) -> torch.Tensor:
    """An attention mask with some zeros: the second row is left-padded by 3 (as a tokenizer pads
    a batch for generation), the first row is whole."""
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[1, :3] = 0
    return mask


# Kinds that take input_ids (and attention_mask, inputs_embeds, position_ids) like a decoder or
# an encoder LM does.
_TEXT = ("causal", "masked", "seq_cls", "token_cls", "qa")


def main_inputs(entry: ZooModel) -> dict[str, torch.Tensor]:
    """The inputs every call of the model passes."""
    g = _generator()
    if entry.kind in _TEXT:
        return {"input_ids": input_ids()}
    if entry.kind == "seq2seq":
        return {"input_ids": input_ids(), "decoder_input_ids": input_ids(seq=SEQ // 2)}
    if entry.kind == "speech":
        return {"input_features": torch.randn(BATCH, MEL_BINS, MEL_FRAMES, generator=g),
                "decoder_input_ids": input_ids(seq=SEQ // 2)}  # fmt: skip
    if entry.kind == "vision":
        return {"pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g)}
    if entry.kind == "clip":
        return {"input_ids": input_ids(), "pixel_values": torch.randn(BATCH, 3, IMAGE, IMAGE, generator=g)}
    raise AssertionError(entry.kind)


def labels(entry: ZooModel, inputs: dict[str, torch.Tensor]) -> dict[str, Any]:
    """The keyword arguments that make the model compute its loss."""
    if entry.kind == "vision":
        return {"labels": torch.tensor([0, NUM_LABELS - 1])}
    if entry.kind == "clip":
        return {"return_loss": True}
    if entry.kind == "seq_cls":
        return {"labels": torch.tensor([0, NUM_LABELS - 1])}
    if entry.kind == "token_cls":
        return {"labels": torch.randint(0, NUM_LABELS, (BATCH, SEQ), generator=_generator())}
    if entry.kind == "qa":
        return {"start_positions": torch.tensor([3, 4]), "end_positions": torch.tensor([5, 7])}
    if entry.kind in ("seq2seq", "speech"):
        return {"labels": inputs["decoder_input_ids"]}
    return {"labels": inputs["input_ids"]}


def _logits(out):
    return out.logits


def _loss(out):
    return out.loss


def _clip_logits(out):
    return out.logits_per_image


def _first(out):
    return out[0]


def _qa_logits(out):
    return out.start_logits, out.end_logits


def _default_pick(entry: ZooModel) -> Callable[[Any], Any]:
    return {"clip": _clip_logits, "qa": _qa_logits}.get(entry.kind, _logits)


# Call modes: each returns the Call of one way people call the model, or None where it does not apply.


def mode_plain(entry: ZooModel) -> Call:
    """``model(input_ids)`` (or ``pixel_values``, ...): the main inputs only."""
    return Call(main_inputs(entry), _default_pick(entry))


def mode_mask(entry: ZooModel) -> Call | None:
    """A padded batch: ``attention_mask`` with zeros."""
    if entry.kind not in (*_TEXT, "seq2seq", "clip"):
        return None
    return Call({**main_inputs(entry), "attention_mask": padded_mask()}, _default_pick(entry))


def mode_ones_mask(entry: ZooModel) -> Call | None:
    """An all-ones ``attention_mask``, as a tokenizer returns for unpadded text."""
    if entry.kind not in (*_TEXT, "seq2seq", "clip"):
        return None
    return Call({**main_inputs(entry), "attention_mask": torch.ones(BATCH, SEQ, dtype=torch.long)},
                _default_pick(entry))  # fmt: skip


def mode_labels(entry: ZooModel) -> Call:
    """With ``labels`` (``return_loss`` for CLIP): the model computes its loss."""
    inputs = main_inputs(entry)
    return Call({**inputs, **labels(entry, inputs)}, _loss)


def mode_labels_mask(entry: ZooModel) -> Call | None:
    """Fine-tuning on a padded batch: ``labels`` and an ``attention_mask`` with zeros."""
    call = mode_mask(entry)
    if call is None:
        return None
    return Call({**call.kwargs, **labels(entry, call.kwargs)}, _loss)


def mode_ignored_labels(entry: ZooModel) -> Call | None:
    """Fine-tuning as data collators pad: ``labels`` of ``-100`` (ignored by the loss) where the
    attention mask is 0."""
    call = mode_mask(entry)
    if call is None or entry.kind in ("clip", "seq_cls", "qa"):
        return None
    target = labels(entry, call.kwargs)["labels"].clone()
    if target.shape == call.kwargs["attention_mask"].shape:
        target[call.kwargs["attention_mask"] == 0] = -100
    return Call({**call.kwargs, "labels": target}, _loss)


def mode_inputs_embeds(entry: ZooModel) -> Call | None:
    """``inputs_embeds`` instead of ``input_ids`` (soft prompts, adapters), with a padded mask."""
    if entry.kind not in _TEXT:
        return None
    embeds = torch.randn(BATCH, SEQ, _hidden_size(entry), generator=_generator())
    return Call({"inputs_embeds": embeds, "attention_mask": padded_mask()}, _default_pick(entry))


def _hidden_size(entry: ZooModel) -> int:
    """The width of the model's input embeddings (ALBERT, ELECTRA and MobileBERT embed narrower)."""
    return build(entry.name).get_input_embeddings().embedding_dim


def mode_no_cache(entry: ZooModel) -> Call | None:
    """``use_cache=False`` (what training loops and benchmarks pass)."""
    if entry.kind not in ("causal", "seq2seq", "speech"):
        return None
    return Call({**main_inputs(entry), "use_cache": False}, _logits)


def mode_use_cache(entry: ZooModel) -> Call | None:
    """``use_cache=True``: the KV cache comes back; compare logits and the first layer's keys."""
    if entry.kind not in ("causal", "seq2seq", "speech"):
        return None
    return Call({**main_inputs(entry), "use_cache": True}, _logits_and_cache)


def _logits_and_cache(out):
    cache = out.past_key_values
    layer = getattr(cache, "self_attention_cache", cache).layers[0]
    return out.logits, layer.keys, layer.values


def mode_position_ids(entry: ZooModel) -> Call | None:
    """Explicit ``position_ids`` (shifted by 2, as after a prefix)."""
    if entry.kind not in _TEXT or entry.name in ("distilbert", "bloom", "mpt"):
        return None
    return Call({**main_inputs(entry), "position_ids": torch.arange(2, SEQ + 2).expand(BATCH, SEQ)},
                _default_pick(entry))  # fmt: skip


def mode_token_type_ids(entry: ZooModel) -> Call | None:
    """Explicit ``token_type_ids``: a sentence pair (first half 0, second half 1)."""
    if not entry.types:
        return None
    types = torch.zeros(BATCH, SEQ, dtype=torch.long)
    types[:, SEQ // 2 :] = 1
    return Call({**main_inputs(entry), "token_type_ids": types}, _default_pick(entry))


def mode_tuple(entry: ZooModel) -> Call:
    """``return_dict=False``: a tuple comes back; compare its first element."""
    return Call({**main_inputs(entry), "return_dict": False}, _first)


def mode_hidden_states(entry: ZooModel) -> Call:
    """``output_hidden_states=True``: every layer's hidden states come back; compare them all."""
    return Call({**main_inputs(entry), "output_hidden_states": True}, _hidden_states)


def _hidden_states(out):
    if hasattr(out, "vision_model_output"):  # CLIP: both towers
        return (*out.text_model_output.hidden_states, *out.vision_model_output.hidden_states)
    if hasattr(out, "encoder_hidden_states"):
        return (*out.encoder_hidden_states, *out.decoder_hidden_states)
    return tuple(out.hidden_states)


def mode_encoder_outputs(entry: ZooModel) -> Call | None:
    """An encoder-decoder called with precomputed ``encoder_outputs`` (a ``ModelOutput``), as
    ``generate`` calls it at every step."""
    if entry.kind not in ("seq2seq", "speech"):
        return None
    return Call({**main_inputs(entry), "encoder_outputs": _EncoderOutputs()}, _logits)


class _EncoderOutputs:
    """Stands for the encoder's output in a Call; ``check_call`` computes it from the model."""


CALL_MODES: dict[str, Callable[[ZooModel], Call | None]] = {
    "plain": mode_plain,
    "mask": mode_mask,
    "ones_mask": mode_ones_mask,
    "labels": mode_labels,
    "labels_mask": mode_labels_mask,
    "ignored_labels": mode_ignored_labels,
    "inputs_embeds": mode_inputs_embeds,
    "no_cache": mode_no_cache,
    "use_cache": mode_use_cache,
    "position_ids": mode_position_ids,
    "token_type_ids": mode_token_type_ids,
    "tuple": mode_tuple,
    "hidden_states": mode_hidden_states,
    "encoder_outputs": mode_encoder_outputs,
}

# Gradients: float32 sums over the batch and sequence in a different order than eager's kernels
# (CLIP's token-embedding gradient differs by 1.9e-5 where its entries reach 50; the direct kernels of
# small convolutions, Note [Small convolutions] in thunder.executors.torchex, move DeiT's cls-token
# gradient by 1.5e-3 where it reaches 2140: seven float32 roundings of its largest entry). So the
# absolute tolerance is 1e-4 or a millionth of the gradient's largest entry, still far below any
# real gradient error.
GRAD_TOL = {"atol": 1e-4, "rtol": 1e-5}
GRAD_TOL_OF_LARGEST = 1e-6


def _as_tensors(value) -> list[torch.Tensor]:
    return list(value) if isinstance(value, tuple) else [value]


def check_call(name: str, mode: str, train: bool) -> thunder.core.module.ThunderModule:
    """Calls zoo model ``name`` in call mode ``mode`` through ``thunder.jit`` and eagerly (two
    copies of the same weights), in ``train()`` or ``eval()``; asserts the compared outputs agree
    and, in training mode, that backward from their sum gives the same gradient for every
    parameter. Returns the jitted module (for cache statistics)."""
    entry = ZOO[name]
    call = CALL_MODES[mode](entry)
    assert call is not None, f"{mode} does not apply to {name}"
    model = build(name).train(train)
    eager = copy.deepcopy(model)
    jm = thunder.jit(model)
    with torch.set_grad_enabled(train):
        got = _as_tensors(call.pick(jm(**_resolved(call.kwargs, model))))
        expected = _as_tensors(call.pick(eager(**_resolved(call.kwargs, eager))))
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    if train:
        sum(t.float().sum() for t in got if t.requires_grad).backward()
        sum(t.float().sum() for t in expected if t.requires_grad).backward()
        compare_grads(model, eager)
    return jm


def _resolved(kwargs: dict[str, Any], model: torch.nn.Module) -> dict[str, Any]:
    """``kwargs`` with a placeholder ``encoder_outputs`` replaced by ``model``'s encoder's output
    (computed eagerly: the call under test is the decoder's)."""
    if not isinstance(kwargs.get("encoder_outputs"), _EncoderOutputs):
        return kwargs
    rest = {k: v for k, v in kwargs.items() if k not in ("encoder_outputs", "decoder_input_ids")}
    return {**kwargs, "encoder_outputs": model.get_encoder()(**rest)}


def compare_grads(model: torch.nn.Module, eager: torch.nn.Module) -> None:
    """Every parameter has the same gradient (or none) in both copies; at least one has one."""
    eager_params = dict(eager.named_parameters())
    some = False
    for n, p in model.named_parameters():
        e = eager_params[n]
        assert (p.grad is None) == (e.grad is None), n
        if p.grad is not None:
            some = True
            atol = max(GRAD_TOL["atol"], GRAD_TOL_OF_LARGEST * e.grad.abs().max().item())
            torch.testing.assert_close(p.grad, e.grad, rtol=GRAD_TOL["rtol"], atol=atol, msg=n)
    assert some


def generate_kwargs(name: str) -> dict[str, Any]:
    """Greedy decoding of 4 new tokens from a left-padded batch."""
    return {"input_ids": input_ids(), "attention_mask": padded_mask(), "do_sample": False, "max_new_tokens": 4,
            "min_new_tokens": 4, "pad_token_id": 0}  # fmt: skip


def jit_forward(model: torch.nn.Module, **jit_options) -> Callable:
    """Makes ``model.generate`` (and every other call of ``model(...)``) run compiled: the usual
    way people compile a model for generation, as with ``torch.compile``, is to replace the
    instance's ``forward`` by its jitted version. Returns the jitted forward."""
    jitted = thunder.jit(model.forward, **jit_options)
    model.forward = jitted
    return jitted
