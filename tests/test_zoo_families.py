"""Models from more families than Hugging Face's (``tests/test_model_zoo.py``): litgpt's configs at two layers,
diffusers' UNets, timm and torchvision image models, all with random weights (nothing downloaded). Each is
checked against eager: the forward in ``eval()`` under ``no_grad``, a training step in ``train()`` (the output
and every parameter's gradient), and a third training call that hits the cache (the second may recompile once, where the model changed its
own state on its first call, and the miss reason names that state).

A sample runs by default; the rest carries ``pytest.mark.zoo_full`` (``-m zoo_full`` or ``THUNDER_ZOO_FULL=1``).
timm and torchvision need a torch build their kernels load with (PyPI's default build; the CPU-only build
lacks the CUDA libraries torchvision links against): where they cannot be imported their cases skip.
"""

from __future__ import annotations

import copy
import importlib

import pytest
import torch

import thunder


def _import_or_skip(name: str):
    """The library, or a skip: absent, or (timm, torchvision) failing to load torchvision's kernels against this
    torch build."""
    try:
        return importlib.import_module(name)
    except Exception as e:
        pytest.skip(f"{name} cannot be imported with this torch build: {type(e).__name__}: {e}")


def _check_model(model: torch.nn.Module, make_inputs, output=lambda out: out, *, atol=1e-4, rtol=1e-3,
                 grad_atol=None, grad_rtol=1e-2, same_inputs_hit=True):  # fmt: skip
    """Eval forward and one training step (output and gradients) against eager; the third training call hits."""
    torch.manual_seed(0)
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    inputs = make_inputs()
    model.eval(), reference.eval()
    with torch.no_grad():
        torch.testing.assert_close(output(jm(**inputs)), output(reference(**inputs)), atol=atol, rtol=rtol)
    model.train(), reference.train()
    torch.manual_seed(1)
    actual = output(jm(**inputs))
    torch.manual_seed(1)
    expected = output(reference(**inputs))
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)
    actual.float().pow(2).mean().backward()
    expected.float().pow(2).mean().backward()
    for (name, p), q in zip(model.named_parameters(), reference.parameters()):
        if q.grad is None:
            assert p.grad is None or not p.grad.any(), name
            continue
        torch.testing.assert_close(p.grad, q.grad, atol=grad_atol or atol, rtol=grad_rtol,
                                   msg=lambda m, name=name: f"{name}: {m}")  # fmt: skip
    # A model that changes its own state on its first call (RWKV's rescaling flag) recompiles once: the third
    # training call must hit.
    for _ in range(2):
        misses = thunder.cache_misses(jm)
        torch.manual_seed(1)
        output(jm(**inputs)).float().pow(2).mean().backward()
    if same_inputs_hit:
        assert thunder.cache_misses(jm) == misses, thunder.cache_miss_reasons(jm)[-1]


def _cases(names: list[str], default: set[str]):
    return [pytest.param(n, marks=() if n in default else pytest.mark.zoo_full) for n in names]


# ---------------------------------------------------------------- litgpt

LITGPT = ["pythia-14m", "Llama-3.2-1B", "Mistral-7B-v0.1", "Mixtral-8x7B-v0.1", "phi-2", "Phi-3-mini-4k-instruct",
          "gemma-2b", "gemma-2-2b", "falcon-7b", "Qwen2.5-0.5B"]  # fmt: skip


@pytest.mark.parametrize("name", _cases(LITGPT, {"pythia-14m", "Llama-3.2-1B", "Mixtral-8x7B-v0.1"}))
def test_litgpt(name):
    litgpt = pytest.importorskip("litgpt")
    groups = {"pythia-14m": 4, "phi-2": 4, "falcon-7b": 1}.get(name, 2)
    extra = {"n_expert": 4, "n_expert_per_token": 2} if "Mixtral" in name else {}
    if "gemma" in name:
        extra["head_size"] = 16
    config = litgpt.Config.from_name(name, n_layer=2, n_embd=64, n_head=4, n_query_groups=groups,
                                     intermediate_size=128, padded_vocab_size=256, vocab_size=256, block_size=64,
                                     **extra)  # fmt: skip
    torch.manual_seed(0)
    ids = torch.randint(0, 256, (2, 16))
    _check_model(litgpt.GPT(config), lambda: {"idx": ids})


def test_litgpt_mixtral_with_new_tokens_each_call_stops_recompiling():
    """The experts' token counts change with the data: after the first change they are symbolic (Note [Symbolic
    data-dependent sizes]), so new tokens neither recompile nor give other values than eager."""
    litgpt = pytest.importorskip("litgpt")
    config = litgpt.Config.from_name("Mixtral-8x7B-v0.1", n_layer=2, n_embd=64, n_head=4, n_query_groups=2,
                                     intermediate_size=128, padded_vocab_size=256, vocab_size=256, block_size=64,
                                     n_expert=4, n_expert_per_token=2)  # fmt: skip
    torch.manual_seed(0)
    model = litgpt.GPT(config)
    jm = thunder.jit(model)
    for _ in range(5):
        ids = torch.randint(0, 256, (2, 16))
        out, expected = jm(ids), model(ids)
        torch.testing.assert_close(out, expected, atol=1e-4, rtol=1e-3)
        out.float().pow(2).mean().backward()
    assert thunder.cache_misses(jm) <= 2, thunder.cache_miss_reasons(jm)


# ---------------------------------------------------------------- diffusers

def _unet2d():
    from diffusers import UNet2DModel

    model = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(32, 64),
                        down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
                        norm_num_groups=8)  # fmt: skip
    return model, lambda: {"sample": torch.randn(2, 3, 16, 16), "timestep": torch.tensor([10, 20])}


def _unet2d_condition():
    from diffusers import UNet2DConditionModel

    model = UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                                 block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                 norm_num_groups=8, attention_head_dim=8)  # fmt: skip
    return model, lambda: {"sample": torch.randn(2, 4, 16, 16), "timestep": torch.tensor([10, 20]),
                           "encoder_hidden_states": torch.randn(2, 5, 32)}  # fmt: skip


@pytest.mark.parametrize("make", [_unet2d, _unet2d_condition], ids=["unet2d", "unet2d_condition"])
def test_diffusers(make):
    pytest.importorskip("diffusers")
    torch.manual_seed(0)
    model, make_inputs = make()
    inputs = make_inputs()
    _check_model(model, lambda: inputs, lambda out: out.sample)


# ---------------------------------------------------------------- timm

TIMM = [
    "resnet10t", "resnext26ts", "efficientnet_b0", "mobilenetv3_small_050", "regnetx_002", "densenet121",
    "inception_v3", "convnext_atto", "vit_tiny_patch16_224", "deit_tiny_patch16_224", "swin_tiny_patch4_window7_224",
    "beit_base_patch16_224", "levit_128s", "mixer_s32_224", "coatnet_nano_rw_224", "maxvit_nano_rw_256",
    "efficientformer_l1", "poolformer_s12", "ghostnet_050", "nfnet_l0", "cait_xxs24_224", "crossvit_tiny_240",
    "pvt_v2_b0", "xcit_nano_12_p16_224", "efficientformerv2_s0", "tiny_vit_5m_224", "resnet18", "resnet26d",
    "seresnext26d_32x4d", "ecaresnet26t", "efficientnet_lite0", "mobilenetv3_large_100", "mobilevit_xxs", "regnety_002",
    "dla34", "hrnet_w18_small", "res2net50_14w_8s", "rexnet_100", "convnext_femto", "convnextv2_atto",
    "edgenext_xx_small", "fastvit_t8", "repvgg_a0", "mobileone_s0", "vit_small_patch32_224", "deit3_small_patch16_224",
    "gcvit_xxtiny", "coat_lite_tiny", "sequencer2d_s", "gmlp_ti16_224", "resmlp_12_224", "volo_d1_224", "lcnet_050",
    "tinynet_e", "ghostnetv2_100", "cspresnet50",
    # one per family the timm sweep (benchmarks/sweep_timm_models.py) found agreeing, 2026-12-07
    "convit_tiny", "csatv2", "dpn48b", "fasternet_t0", "hgnetv2_b0", "inception_next_atto", "test_mambaout",
    "resnest14d", "shvit_s1", "vit_tiny_patch16_dinov3_qkvb", "davit_tiny", "efficientvit_m0", "hiera_tiny_224",
    "nest_tiny", "pit_ti_224", "repvit_m1", "starnet_s050", "twins_svt_small", "legacy_xception", "skresnet18",
]  # fmt: skip


@pytest.mark.parametrize("name", _cases(TIMM, {"resnet10t", "vit_tiny_patch16_224"}))
def test_timm(name):
    timm = _import_or_skip("timm")
    torch.manual_seed(0)
    model = timm.create_model(name, pretrained=False, num_classes=10)
    size = model.pretrained_cfg.get("input_size", (3, 224, 224))
    x = torch.randn(2, *size)
    if name in _TIMM_IN_FLOAT64:
        model, x = model.double(), x.double()
    _check_model(model, lambda: {"x": x}, atol=1e-3, rtol=1e-3)


# Compared in float64: at random initialisation, float32 rounding (thunder's kernels sum in other orders than
# eager's), amplified through the model's 17 batch-normed blocks, moves the early layers' gradients by more than a
# tolerance that still means something; in float64 thunder's equal eager's to 2e-13. skresnet18's selective-kernel
# attention batch-normalises pooled (batch, channels, 1, 1) values, two per channel at batch 2: eager's own float32
# gradients differ from its float64 ones by 43% of their largest element; in float64 thunder's equal eager's to 1e-14.
_TIMM_IN_FLOAT64 = {"rexnet_100", "skresnet18"}


# ---------------------------------------------------------------- torchvision

TORCHVISION = [
    "resnet18", "resnext50_32x4d", "wide_resnet50_2", "mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0",
    "regnet_y_400mf", "densenet121", "shufflenet_v2_x0_5", "squeezenet1_0", "mnasnet0_5", "convnext_tiny",
    "vit_b_16", "swin_t", "maxvit_t", "googlenet", "alexnet", "vgg11",
]  # fmt: skip


@pytest.mark.parametrize("name", _cases(TORCHVISION, {"resnet18", "mobilenet_v3_small"}))
def test_torchvision(name):
    torchvision = _import_or_skip("torchvision")
    torch.manual_seed(0)
    kwargs = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
    model = torchvision.models.get_model(name, weights=None, num_classes=10, **kwargs)
    size = 224 if name in ("vit_b_16", "swin_t", "maxvit_t", "alexnet", "vgg11") else 64
    x = torch.randn(2, 3, size, size)
    # float32 depthwise convolutions' weight gradients: thunder's kernels sum in another order (equal in float64)
    _check_model(model, lambda: {"x": x}, atol=1e-3, rtol=1e-3, grad_atol=1e-2)


# ---------------------------------------------------------------- more Hugging Face families

_V = 99


def _ids(batch: int = 2, seq: int = 16) -> torch.Tensor:
    return torch.randint(3, _V, (batch, seq))


def _hf_more() -> dict:
    """name -> (model builder, inputs, output attribute): speech, segmentation, vision, long context, state space,
    mixture of experts, encoder-decoders. Configs with two layers and random weights."""
    T = importlib.import_module("transformers")
    dec = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
               vocab_size=_V, max_position_embeddings=64)  # fmt: skip
    enc = dict(num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4, vocab_size=_V,
               max_position_embeddings=64)  # fmt: skip
    speech = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16),
                  conv_stride=(5, 4), conv_kernel=(10, 4), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
                  vocab_size=_V, mask_time_prob=0.0)  # fmt: skip
    seq2seq = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2,
                   encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=_V, max_position_embeddings=64)  # fmt: skip
    audio = lambda: {"input_values": torch.randn(2, 1600)}  # noqa: E731
    image = lambda: {"pixel_values": torch.randn(2, 3, 32, 32)}  # noqa: E731
    text = lambda: {"input_ids": _ids()}  # noqa: E731
    text2text = lambda: {"input_ids": _ids(), "decoder_input_ids": _ids(2, 8)}  # noqa: E731
    small_vit = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, image_size=32,
                     patch_size=8)  # fmt: skip
    stages = dict(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1])
    return {
        "wav2vec2": (lambda: T.Wav2Vec2ForCTC(T.Wav2Vec2Config(do_stable_layer_norm=True, **speech)), audio, "logits"),
        "hubert": (lambda: T.HubertForCTC(T.HubertConfig(**speech)), audio, "logits"),
        "segformer": (lambda: T.SegformerForSemanticSegmentation(T.SegformerConfig(
            num_attention_heads=[1, 1, 2, 2], decoder_hidden_size=32, num_labels=5,
            **stages)), image, "logits"),  # fmt: skip
        "dinov2": (lambda: T.Dinov2Model(T.Dinov2Config(**small_vit)), image, "last_hidden_state"),
        "data2vec_vision": (lambda: T.Data2VecVisionForImageClassification(T.Data2VecVisionConfig(num_labels=5, **small_vit)),
                            image, "logits"),  # fmt: skip
        "convnextv2": (lambda: T.ConvNextV2ForImageClassification(T.ConvNextV2Config(num_labels=5, **stages)), image,
                       "logits"),  # fmt: skip
        "mobilevit": (lambda: T.MobileViTForImageClassification(T.MobileViTConfig(
            image_size=32, hidden_sizes=[16, 24, 32], neck_hidden_sizes=[8, 8, 16, 16, 24, 24, 32], num_labels=5)),
            image, "logits"),  # fmt: skip
        "bigbird": (lambda: T.BigBirdForMaskedLM(T.BigBirdConfig(attention_type="original_full", **enc)), text, "logits"),
        "mamba": (lambda: T.MambaForCausalLM(T.MambaConfig(hidden_size=32, num_hidden_layers=2, vocab_size=_V,
                                                           state_size=8, expand=2)), text, "logits"),  # fmt: skip
        "rwkv": (lambda: T.RwkvForCausalLM(T.RwkvConfig(hidden_size=32, num_hidden_layers=2, attention_hidden_size=32,
                                                       intermediate_size=64, vocab_size=_V, context_length=64)),
                 text, "logits"),  # fmt: skip
        "jamba": (lambda: T.JambaForCausalLM(T.JambaConfig(num_experts=2, num_experts_per_tok=1, mamba_d_state=8,
                                                           mamba_dt_rank=4, attn_layer_period=2, attn_layer_offset=1,
                                                           expert_layer_period=2, expert_layer_offset=1, **dec)),
                  text, "logits"),  # fmt: skip
        "granitemoe": (lambda: T.GraniteMoeForCausalLM(T.GraniteMoeConfig(num_local_experts=4, num_experts_per_tok=2,
                                                                       **dec)), text, "logits"),  # fmt: skip
        "olmoe": (lambda: T.OlmoeForCausalLM(T.OlmoeConfig(num_experts=4, num_experts_per_tok=2, **dec)), text, "logits"),
        "qwen2_moe": (lambda: T.Qwen2MoeForCausalLM(T.Qwen2MoeConfig(num_experts=4, num_experts_per_tok=2,
                                                                     moe_intermediate_size=32,
                                                                     shared_expert_intermediate_size=32, **dec)),
                      text, "logits"),  # fmt: skip
        "funnel": (lambda: T.FunnelForMaskedLM(T.FunnelConfig(block_sizes=[1, 1], d_model=32, n_head=4, d_head=8,
                                                              d_inner=64, vocab_size=_V)), text, "logits"),  # fmt: skip
        "xlnet": (lambda: T.XLNetLMHeadModel(T.XLNetConfig(d_model=32, n_layer=2, n_head=4, d_inner=64, vocab_size=_V)),
                  text, "logits"),  # fmt: skip
        "mpnet": (lambda: T.MPNetForMaskedLM(T.MPNetConfig(**enc)), text, "logits"),
        "xlm_roberta": (lambda: T.XLMRobertaForMaskedLM(T.XLMRobertaConfig(**enc)), text, "logits"),
        "pegasus": (lambda: T.PegasusForConditionalGeneration(T.PegasusConfig(**seq2seq)), text2text, "logits"),
        "mt5": (lambda: T.MT5ForConditionalGeneration(T.MT5Config(d_model=32, d_ff=64, d_kv=8, num_layers=2, num_heads=4,
                                                                  vocab_size=_V)), text2text, "logits"),  # fmt: skip
        "granite": (lambda: T.GraniteForCausalLM(T.GraniteConfig(**dec)), text, "logits"),
        "longformer": (lambda: T.LongformerForMaskedLM(T.LongformerConfig(attention_window=4, **enc)), text, "logits"),
        "led": (lambda: T.LEDForConditionalGeneration(T.LEDConfig(attention_window=4, d_model=32, encoder_layers=2,
            decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
            decoder_ffn_dim=64, vocab_size=_V, max_encoder_position_embeddings=64, max_decoder_position_embeddings=64)),
            text2text, "logits"),  # fmt: skip
        # Its encoder makes no mask when told it is being compiled (as under torch.compile): the mask is passed.
        "switch_transformers": (lambda: T.SwitchTransformersForConditionalGeneration(T.SwitchTransformersConfig(
            d_model=32, d_ff=64, d_kv=8, num_layers=2, num_decoder_layers=2, num_heads=4, num_experts=4, vocab_size=_V,
            encoder_sparse_step=1, decoder_sparse_step=1)),
            lambda: {**text2text(), "attention_mask": torch.ones(2, 16, dtype=torch.long)}, "logits"),  # fmt: skip
        "cohere": (lambda: T.CohereForCausalLM(T.CohereConfig(**dec)), text, "logits"),
    }


HF_MORE = ["wav2vec2", "hubert", "segformer", "dinov2", "data2vec_vision", "convnextv2", "mobilevit", "bigbird", "mamba",
           "rwkv", "jamba", "granitemoe", "olmoe", "qwen2_moe", "funnel", "xlnet", "mpnet", "xlm_roberta",
           "pegasus", "mt5", "granite", "cohere", "switch_transformers", "longformer", "led"]  # fmt: skip


@pytest.mark.parametrize("name", _cases(HF_MORE, {"wav2vec2", "mamba", "qwen2_moe", "segformer"}))
def test_hugging_face_more_families(name):
    pytest.importorskip("transformers")
    make, make_inputs, attribute = _hf_more()[name]
    torch.manual_seed(0)
    model = make()
    torch.manual_seed(0)
    inputs = make_inputs()
    _check_model(model, lambda: inputs, lambda out: getattr(out, attribute))
