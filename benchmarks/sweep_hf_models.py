"""Every Hugging Face model class of a kind (a head) that the test zoo lacks, from a tiny config with random weights:
thunder against eager, forward in ``eval()`` (every floating-point tensor of the output), a training step (loss and
every parameter's gradient, including which are None) and two more training calls that must hit the cache. A sweep
over programs nobody here wrote: it found the DeepSeek-V4 gradient that was zeros where eager's is None.

Run: ``python -m benchmarks.sweep_hf_models [--heads ForCausalLM,ForMaskedLM] [--models A,B] [--timeout 180]
[--sample 40] [--workers 2]``. The heads it knows are the keys of ``INPUTS`` (default: ``DEFAULT_HEADS``, the
backbones the causal LMs do not cover; ``--heads ForCausalLM`` sweeps those; also sequence, token and multiple-choice
classification, question answering, next-sentence prediction, conditional generation (encoder-decoders and
vision-language models on text), audio and video classification, x-vectors, object detection, depth estimation,
backbones, segmentation, masked image modeling, pretraining heads and ``Model``: the base models, given the inputs
their forward names). A head without labels trains on the mean square of its floating-point outputs. Sub-configs
(text, vision, backbone) are made tiny too. Each model runs in its own process under a time limit, ``--workers`` at
once; ``--sample`` takes that many classes of a head, evenly spread. A model whose tiny config eager itself cannot
run is skipped. Prints one JSON line per model, then the counts per head and every model that is not ok (the third
training call must hit the cache: ``recompiles`` where it does not).
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import subprocess
import sys

# Families the test zoo covers (tests/zoo.py, tests/test_zoo_families.py): their causal LMs are not swept again.
ZOO = set(
    "GPT2 GPTNeoX OPT Falcon Bloom GPTJ Llama Mistral Mixtral Qwen2 Qwen3 Gemma Gemma2 Phi3 GPTBigCode Starcoder2 Olmo "
    "StableLm Mpt Bart Whisper Granite Cohere Olmoe Qwen2Moe GraniteMoe Jamba Mamba Rwkv Pegasus".split()
)
IMAGE_TOKEN = 255  # no text token (_ids draws below it)
# Set where the default config has the same field with a value of the same type (an int for an int, ...).
TINY = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=256, head_dim=16, max_position_embeddings=128, n_layer=2, n_embd=64, n_head=4, d_model=64,
            num_layers=2, num_heads=4, ffn_dim=128, n_positions=128, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, attention_dropout=0.0, hidden_dropout=0.0, dropout=0.0, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, num_experts=4, num_local_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, n_routed_experts=4, decoder_layers=2, decoder_attention_heads=4,
            decoder_ffn_dim=128, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128,
            tie_word_embeddings=False, image_size=64, projection_dim=64, patch_size=8, embed_dim=16,
            num_channels=3, mask_time_prob=0.0, layerdrop=0.0, drop_path_rate=0.0, max_source_positions=32,
            input_feat_per_channel=16, conv_channels=32, num_mel_bins=16, speech_encoder_layers=2, speech_encoder_attention_heads=4,
            speech_encoder_intermediate_size=128, feature_projection_input_dim=16, t2u_encoder_layers=2,
            t2u_decoder_layers=2, unit_hifi_gan_vocab_size=16, t2u_vocab_size=64)  # fmt: skip
# Set always (often None by default): the token ids (none of which the inputs hold but bos, made by no input), and
# the placeholder a vision-language model replaces by image features (in the shrunk vocabulary: see _ids).
TOKEN_IDS = dict(pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=0, image_token_id=IMAGE_TOKEN,
                 image_token_index=IMAGE_TOKEN)  # fmt: skip
# Per-stage lists of vision configs, made as long as the default's.
TINY_LISTS = dict(depths=lambda n: [1] * n, hidden_sizes=lambda n: [16 * 2**i for i in range(n)],
                  embed_dims=lambda n: [16 * 2**i for i in range(n)], num_heads=lambda n: [2] * n,
                  num_attention_heads=lambda n: [2] * n)  # fmt: skip

BATCH, TOKENS = 2, 12
DEFAULT_HEADS = ("ForMaskedLM", "ForImageClassification", "ForSemanticSegmentation", "ForCTC")



def child_row(module: str, args: list[str], name: str, timeout: float) -> dict:
    """One model checked by ``python -m module --child *args`` in its own process (a crash or a hang of one model
    does not stop the sweep): the last JSON row it printed. ``timeout`` is seconds of CPU time (on a machine shared
    with other work a wall-clock limit times out models that are merely waiting), with ten times as long in wall
    clock for a model that waits on something else."""
    import resource
    import signal

    def limit_cpu() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (int(timeout), int(timeout) + 5))

    try:
        out = subprocess.run([sys.executable, "-m", module, "--child", *args], preexec_fn=limit_cpu,
                             capture_output=True, text=True, timeout=10 * timeout, check=False)  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"model": name, "status": "timeout", "why": f"over {10 * timeout:.0f} s wall clock"}
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
    if lines:
        return json.loads(lines[-1])
    if out.returncode in (-signal.SIGXCPU, -signal.SIGKILL):
        return {"model": name, "status": "timeout", "why": f"over {timeout:.0f} s CPU time"}
    return {"model": name, "status": "crash", "why": out.stderr[-200:]}


def error_text(e: Exception) -> str:
    """A sweep row's one-line ``why`` of an error: its type and the start of its message's first line."""
    return f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"


def print_summary(rows: list[dict]) -> None:
    """The count of each status, then every row that is neither ok nor a skip."""
    print("\n", dict(collections.Counter(r["status"] for r in rows)))
    for r in rows:
        if r["status"] not in ("ok", "skip"):
            print(f"- {r['model']}: {r['status']} {r.get('why') or r.get('grad_none_differs') or ''}")


def gradient_differences(model, reference) -> tuple[float, list[str]]:
    """The largest difference of a parameter's gradient from eager's, relative to that gradient's largest element or
    to a thousandth of the largest of all when it is smaller (a bias whose gradient sums to about zero differs from
    eager's by rounding alone), and the first names whose gradient is None on one side only."""
    worst, none_differs = 0.0, []
    scale = max((q.grad.abs().max().item() for q in reference.parameters() if q.grad is not None), default=0.0)
    for (n, p), q in zip(model.named_parameters(), reference.parameters()):
        if (p.grad is None) != (q.grad is None):
            none_differs.append(n)
        elif p.grad is not None:
            floor = max(q.grad.abs().max().item(), 1e-3 * scale, 1e-12)
            worst = max(worst, (p.grad - q.grad).abs().max().item() / floor)
    return worst, none_differs[:3]

def _ids(torch):
    return torch.randint(3, IMAGE_TOKEN, (BATCH, TOKENS), generator=torch.Generator().manual_seed(1))


def _pixels(torch, config):
    """Images at the config's size and channels (its vision sub-config's, for a vision-language model)."""
    config = getattr(config, "vision_config", None) or config
    size = getattr(config, "image_size", 64)
    size = size if isinstance(size, int) else size[0]
    channels = getattr(config, "num_channels", 3)
    return torch.randn(BATCH, channels, size, size, generator=torch.Generator().manual_seed(1))


def _text(labels):
    return lambda torch, config: ({"input_ids": _ids(torch)}, labels(torch, config))


# head -> (torch, config) -> (inputs, the labels' keyword arguments)
INPUTS = {
    "ForCausalLM": _text(lambda torch, config: {"labels": _ids(torch)}),
    "ForMaskedLM": _text(lambda torch, config: {"labels": _ids(torch)}),
    "ForSequenceClassification": _text(lambda torch, config: {"labels": torch.tensor([0, 1])}),
    "ForTokenClassification": _text(lambda torch, config: {"labels": _ids(torch) % 2}),
    "ForQuestionAnswering": _text(lambda torch, config: {"start_positions": torch.tensor([1, 2]),
                                                         "end_positions": torch.tensor([3, 5])}),
    "ForImageClassification": lambda torch, config: ({"pixel_values": _pixels(torch, config)},
                                                     {"labels": torch.tensor([0, 1])}),
    "ForSemanticSegmentation": lambda torch, config: (
        {"pixel_values": _pixels(torch, config)},
        {"labels": torch.randint(0, 2, _pixels(torch, config).shape[-2:]).expand(BATCH, -1, -1).contiguous()},
    ),
    "ForCTC": lambda torch, config: ({"input_values": torch.randn(BATCH, 4000, generator=torch.Generator().manual_seed(1))},
                                     {"labels": torch.randint(3, 256, (BATCH, 4))}),
    # Two different choices (the same twice gives equal logits, a loss of log 2 and gradients of rounding noise).
    "ForMultipleChoice": lambda torch, config: ({"input_ids": torch.stack([_ids(torch), _ids(torch).flip(-1)], 1)},
                                                {"labels": torch.tensor([0, 1])}),
    "ForConditionalGeneration": None,  # _generation
    "ForAudioClassification": lambda torch, config: (_audio(torch, config), {"labels": torch.tensor([0, 1])}),
    # No labels: forward only (their losses need a matcher in scipy, or are not implemented).
    "ForObjectDetection": lambda torch, config: ({"pixel_values": _pixels(torch, config)}, None),
    "ForDepthEstimation": lambda torch, config: ({"pixel_values": _pixels(torch, config)}, None),
    "Backbone": lambda torch, config: ({"pixel_values": _pixels(torch, config)}, None),
    "ForUniversalSegmentation": lambda torch, config: ({"pixel_values": _pixels(torch, config)}, None),
    "ForInstanceSegmentation": lambda torch, config: ({"pixel_values": _pixels(torch, config)}, None),
    "ForMaskedImageModeling": lambda torch, config: ({"pixel_values": _pixels(torch, config)}, None),
    "ForPreTraining": _text(lambda torch, config: None),
    "ForNextSentencePrediction": _text(lambda torch, config: {"labels": torch.tensor([0, 1])}),
    "ForVideoClassification": lambda torch, config: ({"pixel_values": _video(torch, config)},
                                                     {"labels": torch.tensor([0, 1])}),
    "ForAudioFrameClassification": lambda torch, config: (
        {"input_values": torch.randn(BATCH, 4000, generator=torch.Generator().manual_seed(1))}, None),
    "ForXVector": lambda torch, config: ({"input_values": torch.randn(BATCH, 16000, generator=torch.Generator().manual_seed(1))},
                                         {"labels": torch.tensor([0, 1])}),
    "ForSpeechToText": None,  # _generation
    # Base models (and the heads named ...Model): the inputs their forward takes (see _model_inputs). Last, so that a
    # class of another head is not taken for one of these.
    "Model": None,
}  # fmt: skip


def _generation(torch, cls, config, model) -> list[tuple[dict, dict]]:
    """Candidate inputs of a conditional generation model. An encoder-decoder's decoder gets 7 tokens (eval has no
    labels to make them from), its encoder text or, where its forward takes no text, a spectrogram (Whisper,
    Speech2Text); a vision-language model gets an image and text that starts with as many image placeholders as the
    image has features (counted from eager's error for one), then text alone."""
    import inspect

    params = inspect.signature(cls.forward).parameters
    if getattr(config, "is_encoder_decoder", False):
        target = _ids(torch)[:, :7].contiguous()
        source = _audio(torch, config) if "input_ids" not in params else {"input_ids": _ids(torch)}
        return [({**source, "decoder_input_ids": target}, {"labels": target})]
    text = ({"input_ids": _ids(torch)}, {"labels": _ids(torch)})
    if "pixel_values" not in params:
        return [text]
    pixels = _pixels(torch, config)
    if "qformer_input_ids" in params:  # InstructBLIP's Q-Former reads the instruction too
        pixels = {"pixel_values": pixels, "qformer_input_ids": _ids(torch)}
    else:
        pixels = {"pixel_values": pixels}
    both = [({"input_ids": _ids(torch), **pixels}, {"labels": _ids(torch)})]
    counts = []
    try:
        with torch.no_grad():
            model.eval()(input_ids=torch.cat([torch.full((BATCH, 1), IMAGE_TOKEN), _ids(torch)], 1), **pixels)
    except Exception as e:  # noqa: BLE001 - its message counts the features (or their elements)
        import re

        found = re.search(r"tokens:? *(?:tensor\()?(\d+).*features:? *(?:tensor\()?(\d+)", str(e))
        hidden = getattr(getattr(config, "text_config", config), "hidden_size", 1)
        counts = [] if not found else dict.fromkeys(
            n for n in (int(found[2]) // int(found[1]), int(found[2]) // int(found[1]) // hidden) if n)
    placed = []
    for n in counts:
        ids = torch.cat([torch.full((BATCH, n), IMAGE_TOKEN), _ids(torch)], 1)
        placed.append(({"input_ids": ids, **pixels}, {"labels": ids.masked_fill(ids == IMAGE_TOKEN, -100)}))
    return [*placed, *both, text]


def _video(torch, config):
    """(batch, frames, channels, height, width) at the config's frame count and image size."""
    frames = next((v for k in ("num_frames", "frames_per_clip") if isinstance(v := getattr(config, k, None), int)), 8)
    return _pixels(torch, config).unsqueeze(1).expand(-1, frames, -1, -1, -1).contiguous()


def _model_inputs(torch, cls, config) -> list[tuple[dict, None]]:
    """Candidate inputs of a base model, from the names its forward takes: text and image together first (CLIP-like
    models need both), then each alone; eager's first success is used."""
    import inspect

    params = inspect.signature(cls.forward).parameters
    text = {"input_ids": _ids(torch)} if "input_ids" in params else {}
    if text and getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        text["decoder_input_ids"] = _ids(torch)[:, :7].contiguous()
    image = {"pixel_values": _pixels(torch, config)} if "pixel_values" in params else {}
    audio = {}
    if "input_features" in params or "input_values" in params and hasattr(config, "num_mel_bins"):
        audio = _audio(torch, config)
    elif "input_values" in params:
        audio = {"input_values": torch.randn(BATCH, 4000, generator=torch.Generator().manual_seed(1))}
    candidates = [{**text, **image}, text, image, audio] if text and image else [text, image, audio]
    return [(c, None) for c in candidates if c]


def _audio(torch, config) -> dict:
    """A spectrogram as the model wants it: Whisper's (mel bins, frames), Speech2Text's (frames, features) that
    its convolutions subsample fourfold, SeamlessM4T's (frames, features), AST's (frames, mel bins)."""
    g = torch.Generator().manual_seed(1)
    if hasattr(config, "input_feat_per_channel"):
        features = config.input_feat_per_channel * config.input_channels
        return {"input_features": torch.randn(BATCH, 2 * config.max_source_positions, features, generator=g)}
    if hasattr(config, "feature_projection_input_dim"):
        return {"input_features": torch.randn(BATCH, 40, config.feature_projection_input_dim, generator=g)}
    if hasattr(config, "max_source_positions"):
        return {"input_features": torch.randn(BATCH, config.num_mel_bins, 2 * config.max_source_positions, generator=g)}
    return {"input_values": torch.randn(BATCH, config.max_length, config.num_mel_bins, generator=g)}


def _config(cls):
    return _tiny(cls.config_class)


def _tiny(config_class, depth: int = 0):
    """``config_class`` with the TINY values it has, its sub-configs (text, vision, backbone) made tiny too."""
    defaults = config_class()
    kwargs = dict(TOKEN_IDS)
    for key in getattr(defaults, "sub_configs", {}) if depth < 2 else ():
        sub = getattr(defaults, key, None)
        if sub is not None and hasattr(sub, "to_dict"):
            kwargs[key] = _tiny(type(sub), depth + 1)
    for key, value in TINY.items():
        default = getattr(defaults, key, None)
        if default is not None and type(default) is type(value):
            kwargs[key] = value
    for key, make in TINY_LISTS.items():
        default = getattr(defaults, key, None)
        if isinstance(default, (list, tuple)) and default:
            kwargs[key] = make(len(default))
    try:
        return config_class(**kwargs)
    except Exception:  # noqa: BLE001 - a config that rejects some value: its defaults
        return defaults


def _float_tensors(torch, out) -> list:
    """Every floating-point tensor of a model's output, in order (nested tuples of hidden states included)."""
    items = out.to_tuple() if hasattr(out, "to_tuple") else out
    if isinstance(items, torch.Tensor):
        return [items] if items.is_floating_point() else []
    if isinstance(items, (tuple, list)):
        return [t for item in items for t in _float_tensors(torch, item)]
    return []


def _loss(torch, out, labels):
    """The model's loss where labels were given, else the mean square of every floating-point output that requires
    grad (a model with none of those raises: eager cannot train it, a skip)."""
    if labels is not None:
        return out.loss
    return sum(t.float().pow(2).mean() for t in _float_tensors(torch, out) if t.requires_grad)


def check(name: str, head: str) -> dict:
    """One model: eager first (a config eager cannot run is a skip), then thunder."""
    import copy
    import warnings

    import torch
    import transformers

    import thunder

    warnings.simplefilter("error", thunder.EagerRunWarning)  # a call that ran eagerly is an error here, not a pass
    try:
        cls = getattr(transformers, name)
        config = _config(cls)
        with torch.device("meta"):  # counted before it is made: a config too large for memory is a skip too
            too_large = sum(p.numel() for p in cls(config).parameters()) > 30e6
        if too_large:
            return {"status": "skip", "why": "over 30M parameters at the tiny config"}
        torch.manual_seed(0)
        model = cls(config)
        if head == "Model":
            candidates = _model_inputs(torch, cls, config)
        elif INPUTS[head] is None:
            candidates = _generation(torch, cls, config, copy.deepcopy(model))
        else:
            candidates = [INPUTS[head](torch, config)]
        if not candidates:
            return {"status": "skip", "why": "its forward takes none of input_ids, pixel_values, input_values"}
        reference = copy.deepcopy(model)
        for i, candidate in enumerate(candidates):
            inputs, labels = candidate
            try:
                with torch.no_grad():
                    expected = _float_tensors(torch, reference.eval()(**inputs))
                break
            except Exception:
                if i == len(candidates) - 1:
                    raise
        _loss(torch, copy.deepcopy(reference).train()(**inputs, **(labels or {})), labels).backward()
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "why": f"eager: {type(e).__name__}: {str(e)[:100]}"}
    result: dict = {}
    try:
        jm = thunder.jit(model.eval())
        with torch.no_grad():
            got = _float_tensors(torch, jm(**inputs))
        if [t.shape for t in got] != [t.shape for t in expected]:
            raise AssertionError(f"output shapes {[t.shape for t in got]} vs eager's {[t.shape for t in expected]}")
        result["eval_maxdiff"] = max(((a - b).abs().max().item() for a, b in zip(got, expected) if b.numel()),
                                     default=0.0)  # fmt: skip
        model.train(), reference.train()
        torch.manual_seed(2)
        expected_loss = _loss(torch, reference(**inputs, **(labels or {})), labels)
        expected_loss.backward()
        torch.manual_seed(2)
        loss = _loss(torch, jm(**inputs, **(labels or {})), labels)
        loss.backward()
        result["loss_diff"] = abs(loss.item() - expected_loss.item())
        worst, none_differs = gradient_differences(model, reference)
        result["grad_reldiff"], result["grad_none_differs"] = worst, none_differs
        misses = []
        for _ in range(2):
            before = thunder.cache_misses(jm)
            torch.manual_seed(2)
            _loss(torch, jm(**inputs, **(labels or {})), labels).backward()
            misses.append(thunder.cache_misses(jm) - before)
        result["misses_second_third"] = misses
        wrong = result["eval_maxdiff"] > 1e-3 or result["loss_diff"] > 1e-3 or worst > 1e-2 or none_differs
        result["status"] = "WRONG" if wrong else ("recompiles" if misses[1] else "ok")
    except Exception as e:  # noqa: BLE001
        result.update(status="error", why=error_text(e))
    return result


def check_generate(name: str) -> dict:
    """``generate()`` of the compiled model against eager's: greedy, 4 new tokens, tokens and scores; an
    encoder-decoder on text (or a spectrogram, for speech), any other on text alone. Two generations: the second
    must compile nothing new."""
    import inspect
    import warnings

    import torch
    import transformers

    import thunder

    warnings.simplefilter("error", thunder.EagerRunWarning)
    kwargs = dict(do_sample=False, max_new_tokens=4, min_new_tokens=4, return_dict_in_generate=True, output_scores=True)
    try:
        cls = getattr(transformers, name)
        config = _config(cls)
        with torch.device("meta"):
            if sum(p.numel() for p in cls(config).parameters()) > 30e6:
                return {"status": "skip", "why": "over 30M parameters at the tiny config"}
        torch.manual_seed(0)
        model = cls(config).eval()
        params = inspect.signature(cls.forward).parameters
        inputs = _audio(torch, config) if "input_ids" not in params and "input_features" in params else {
            "input_ids": _ids(torch)}
        expected = model.generate(**inputs, **kwargs)
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "why": f"eager: {type(e).__name__}: {str(e)[:100]}"}
    result: dict = {}
    try:
        jm = thunder.jit(model)
        got = jm.generate(**inputs, **kwargs)
        misses = thunder.cache_misses(jm)
        again = jm.generate(**inputs, **kwargs)
        result["misses_second_generation"] = thunder.cache_misses(jm) - misses
        result["tokens_equal"] = torch.equal(got.sequences, expected.sequences) and torch.equal(
            again.sequences, expected.sequences)
        # Equal scores (a suppressed token's -inf too) differ by 0, not by inf - inf = nan.
        result["scores_maxdiff"] = max(torch.where(a == b, 0, a - b).abs().max().item()
                                       for a, b in zip(got.scores, expected.scores))  # fmt: skip
        wrong = not result["tokens_equal"] or not result["scores_maxdiff"] <= 1e-3
        result["status"] = "WRONG" if wrong else ("recompiles" if result["misses_second_generation"] else "ok")
    except Exception as e:  # noqa: BLE001
        result.update(status="error", why=error_text(e))
    return result


def _names(head: str) -> list[str]:
    import transformers

    names = [n for n in dir(transformers) if n.endswith(head) and not n.startswith(("TF", "Flax", "Auto", "DataCollator"))]
    if head == "Model":
        names = [n for n in names if not n.endswith(("PreTrainedModel", "PretrainedModel"))]  # by name: getattr imports the model's module
    return [n for n in names if head != "ForCausalLM" or n[: -len(head)] not in ZOO]


def _sample(names: list[str], n: int) -> list[str]:
    """``n`` of ``names`` spread evenly over the sorted list (all when ``n`` is 0 or not smaller)."""
    if not n or n >= len(names):
        return names
    return [names[i * len(names) // n] for i in range(n)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--heads", default=",".join(DEFAULT_HEADS), help="comma-separated heads (keys of INPUTS)")
    ap.add_argument("--models", help="comma-separated class names (default: every class of the heads)")
    ap.add_argument("--timeout", type=float, default=180.0, help="CPU seconds per model")
    ap.add_argument("--sample", type=int, default=0, help="at most this many classes per head (evenly spaced)")
    ap.add_argument("--workers", type=int, default=1, help="models run at once")
    ap.add_argument("--generate", action="store_true", help="check generate() instead (greedy, 4 new tokens)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        name, head = opts.child.split(":")
        print(json.dumps({"model": name, **(check_generate(name) if opts.generate else check(name, head))}))
        return
    heads = opts.heads.split(",")
    if opts.models:
        jobs = [(n, next(h for h in INPUTS if n.endswith(h))) for n in opts.models.split(",")]
    else:
        jobs = [(n, h) for h in heads for n in _sample(_names(h), opts.sample)]

    def run(job: tuple[str, str]) -> dict:
        name, head = job
        row = child_row("benchmarks.sweep_hf_models", [f"{name}:{head}", *(["--generate"] if opts.generate else [])],
                        name, opts.timeout)  # fmt: skip
        print(json.dumps({"head": head, **row}), flush=True)
        return {"head": head, **row}

    with concurrent.futures.ThreadPoolExecutor(opts.workers) as pool:
        rows = list(pool.map(run, jobs))
    for head in dict.fromkeys(h for _, h in jobs):
        print(head, dict(collections.Counter(r["status"] for r in rows if r["head"] == head)))
    print_summary(rows)


if __name__ == "__main__":
    main()
