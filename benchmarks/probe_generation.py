"""Generation probe: ``thunder.jit(model).generate(...)`` (and ``model.forward = thunder.jit(model.forward)``) against
eager ``model.generate(...)`` for many Hugging Face families (small configs, random weights) and generation
configurations (greedy, sampling from the same seed, beam search, penalties, eos, padded batches, static cache,
scores, ``use_cache=False``, assisted and prompt-lookup decoding, ...). Each case checks the tokens and every
returned tensor (scores, logits, hidden states), that thunder's cache counted every call of the model, that no
thunder warning (a call run eagerly) came, and a second generation; it reports the compiles.

Run: ``python -m benchmarks.probe_generation FAMILIES|all CONFIGS|all [OUT.jsonl] [--seq]`` (``--seq``: one jitted
model per family for all its configurations, in order). One JSON line per case; not a test (minutes per family).
"""

import contextlib
import copy
import json
import signal
import sys
import time
import traceback
import warnings

import torch
import transformers as T

import thunder

warnings.filterwarnings("ignore")
V = 96

def dec(**extra):
    return dict(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, hidden_size=32,
                intermediate_size=64, vocab_size=V, max_position_embeddings=128, pad_token_id=0,
                bos_token_id=1, eos_token_id=2, **extra)

def B(model_cls, config_cls, **kw):
    return lambda: getattr(T, model_cls)(getattr(T, config_cls)(**kw))

FAMILIES = {
    "gpt2": B("GPT2LMHeadModel", "GPT2Config", n_layer=2, n_head=2, n_embd=32, vocab_size=V, n_positions=128, bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "gptj": B("GPTJForCausalLM", "GPTJConfig", n_layer=2, n_head=2, n_embd=32, rotary_dim=8, vocab_size=V, n_positions=128, bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "gpt_neox": B("GPTNeoXForCausalLM", "GPTNeoXConfig", num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64, vocab_size=V, max_position_embeddings=128, bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "opt": B("OPTForCausalLM", "OPTConfig", num_hidden_layers=2, num_attention_heads=2, hidden_size=32, ffn_dim=64, word_embed_proj_dim=32, vocab_size=V, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2),
    "bloom": B("BloomForCausalLM", "BloomConfig", n_layer=2, n_head=2, hidden_size=32, vocab_size=V, bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "falcon": B("FalconForCausalLM", "FalconConfig", num_hidden_layers=2, num_attention_heads=2, hidden_size=32, vocab_size=V, bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "falcon_alibi": B("FalconForCausalLM", "FalconConfig", num_hidden_layers=2, num_attention_heads=2, hidden_size=32, vocab_size=V, alibi=True, bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "llama": B("LlamaForCausalLM", "LlamaConfig", **dec()),
    "mistral": B("MistralForCausalLM", "MistralConfig", **dec(sliding_window=None)),
    "mixtral": B("MixtralForCausalLM", "MixtralConfig", **dec(num_local_experts=4, num_experts_per_tok=2, sliding_window=None)),
    "qwen2": B("Qwen2ForCausalLM", "Qwen2Config", **dec()),
    "qwen2_moe": B("Qwen2MoeForCausalLM", "Qwen2MoeConfig", **dec(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32, shared_expert_intermediate_size=32)),
    "qwen3": B("Qwen3ForCausalLM", "Qwen3Config", **dec(head_dim=8)),
    "qwen3_moe": B("Qwen3MoeForCausalLM", "Qwen3MoeConfig", **dec(head_dim=8, num_experts=4, num_experts_per_tok=2, moe_intermediate_size=32)),
    "phi": B("PhiForCausalLM", "PhiConfig", **dec(partial_rotary_factor=0.5)),
    "phi3": B("Phi3ForCausalLM", "Phi3Config", **dec()),
    "gemma": B("GemmaForCausalLM", "GemmaConfig", **dec(head_dim=8)),
    "gemma2": B("Gemma2ForCausalLM", "Gemma2Config", **dec(head_dim=8, sliding_window=8, query_pre_attn_scalar=8)),
    "gemma3": B("Gemma3ForCausalLM", "Gemma3TextConfig", **dec(head_dim=8, sliding_window=8, query_pre_attn_scalar=8)),
    "stablelm": B("StableLmForCausalLM", "StableLmConfig", **dec()),
    "starcoder2": B("Starcoder2ForCausalLM", "Starcoder2Config", **dec(sliding_window=None)),
    "olmo": B("OlmoForCausalLM", "OlmoConfig", **dec()),
    "olmo2": B("Olmo2ForCausalLM", "Olmo2Config", **dec()),
    "cohere": B("CohereForCausalLM", "CohereConfig", **dec()),
    "gpt_bigcode": B("GPTBigCodeForCausalLM", "GPTBigCodeConfig", n_layer=2, n_head=2, n_embd=32, vocab_size=V, n_positions=128, bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "mpt": B("MptForCausalLM", "MptConfig", n_layers=2, n_heads=2, d_model=32, expansion_ratio=2, vocab_size=V, max_seq_len=128, bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "mamba": B("MambaForCausalLM", "MambaConfig", num_hidden_layers=2, hidden_size=32, state_size=8, vocab_size=V, bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "t5": B("T5ForConditionalGeneration", "T5Config", num_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64, vocab_size=V, decoder_start_token_id=0, pad_token_id=0, eos_token_id=2),
    "bart": B("BartForConditionalGeneration", "BartConfig", encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, max_position_embeddings=128, pad_token_id=0, bos_token_id=1, eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=None),
    "pegasus": B("PegasusForConditionalGeneration", "PegasusConfig", encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, max_position_embeddings=128, pad_token_id=0, eos_token_id=2, decoder_start_token_id=0),
    "marian": B("MarianMTModel", "MarianConfig", encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, max_position_embeddings=128, pad_token_id=0, eos_token_id=2, decoder_start_token_id=0),
    "whisper": B("WhisperForConditionalGeneration", "WhisperConfig", encoder_layers=2, decoder_layers=2, encoder_attention_heads=2, decoder_attention_heads=2, d_model=32, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=V, num_mel_bins=16, max_source_positions=16, max_target_positions=128, decoder_start_token_id=1, pad_token_id=0, bos_token_id=1, eos_token_id=2),
}
ENC_DEC = {"t5", "bart", "pegasus", "marian", "whisper"}

def prompt(name, batch, pad):
    g = torch.Generator().manual_seed(1234)
    if name == "whisper":
        return {"input_features": torch.randn(batch, 16, 32, generator=g)}
    ids = torch.randint(3, V, (batch, 7), generator=g)
    out = {"input_ids": ids}
    if pad:
        mask = torch.ones_like(ids)
        mask[1, :3] = 0
        ids[1, :3] = 0
        out["attention_mask"] = mask
    return out

N = 8
CONFIGS = {
    "greedy": dict(max_new_tokens=N, do_sample=False),
    "sample": dict(max_new_tokens=N, do_sample=True, temperature=0.7, top_k=20, top_p=0.9),
    "sample_default": dict(max_new_tokens=N, do_sample=True),
    "sample_nret": dict(max_new_tokens=N, do_sample=True, top_p=0.8, num_return_sequences=2),
    "beam": dict(max_new_tokens=6, num_beams=3, do_sample=False),
    "beam_nret": dict(max_new_tokens=6, num_beams=3, num_return_sequences=2, length_penalty=0.5, early_stopping=True),
    "rep_ngram": dict(max_new_tokens=N, do_sample=False, repetition_penalty=1.5, no_repeat_ngram_size=2),
    "min_eos": dict(max_new_tokens=N, min_new_tokens=4, do_sample=False),  # eos set from eager greedy
    "batch_pad": dict(max_new_tokens=N, do_sample=False),
    "batch_pad_sample": dict(max_new_tokens=N, do_sample=True, top_k=10),
    "static": dict(max_new_tokens=N, do_sample=False, cache_implementation="static"),
    "scores": dict(max_new_tokens=N, do_sample=True, top_k=30, output_scores=True, output_logits=True, return_dict_in_generate=True),
    "beam_scores": dict(max_new_tokens=5, num_beams=2, output_scores=True, return_dict_in_generate=True),
    "no_cache": dict(max_new_tokens=5, do_sample=False, use_cache=False),
    "fwd_jit": dict(max_new_tokens=N, do_sample=False),
    "long64": dict(max_new_tokens=64, min_new_tokens=64, do_sample=False),
}
CONFIGS2 = {
    "guidance": dict(max_new_tokens=6, do_sample=False, guidance_scale=1.5),
    "prompt_lookup": dict(max_new_tokens=N, do_sample=False, prompt_lookup_num_tokens=3),
    "assisted": dict(max_new_tokens=N, do_sample=False),
    "assisted_sample": dict(max_new_tokens=N, do_sample=True, top_k=5),
    "min_p": dict(max_new_tokens=N, do_sample=True, min_p=0.05, output_scores=True, return_dict_in_generate=True),
    "typical": dict(max_new_tokens=N, do_sample=True, typical_p=0.9, epsilon_cutoff=3e-4),
    "eta": dict(max_new_tokens=N, do_sample=True, eta_cutoff=1e-3, temperature=1.3, top_k=0),
    "bad_words": dict(max_new_tokens=N, do_sample=False, bad_words_ids=[[5], [7, 8]], sequence_bias={(9,): 5.0}, suppress_tokens=[10], begin_suppress_tokens=[11]),
    "renorm": dict(max_new_tokens=N, do_sample=False, renormalize_logits=True, repetition_penalty=1.2, output_scores=True, return_dict_in_generate=True),
    "hidden": dict(max_new_tokens=4, do_sample=False, output_hidden_states=True, return_dict_in_generate=True),
    "attn": dict(max_new_tokens=4, do_sample=False, output_attentions=True, return_dict_in_generate=True),
    "inputs_embeds": dict(max_new_tokens=N, do_sample=False),
    "prefix_cache": dict(max_new_tokens=4, do_sample=False),
    "bf16": dict(max_new_tokens=N, do_sample=False),
    "max_length": dict(max_length=12, do_sample=False),
    "exp_decay": dict(max_new_tokens=N, do_sample=False, exponential_decay_length_penalty=(2, 1.5)),
    "streamer": dict(max_new_tokens=N, do_sample=False),
    "sliding_cache": dict(max_new_tokens=N, do_sample=False, cache_implementation="sliding_window"),
    "static_beam": dict(max_new_tokens=5, num_beams=2, cache_implementation="static"),
    "static_sample_scores": dict(max_new_tokens=N, do_sample=True, top_p=0.9, cache_implementation="static", output_scores=True, return_dict_in_generate=True),
}
CONFIGS3 = {
    "inference_mode": dict(max_new_tokens=N, do_sample=True, top_k=10, _ctx="inference"),
    "autocast_bf16": dict(max_new_tokens=N, do_sample=False, _ctx="autocast"),
    "bool_mask": dict(max_new_tokens=N, do_sample=False, _boolmask=True),
    "symbolic": dict(max_new_tokens=N, do_sample=False, _jit=dict(cache="symbolic values")),
    "fp16": dict(max_new_tokens=N, do_sample=False),
    "beam_sample": dict(max_new_tokens=6, num_beams=2, do_sample=True, top_k=10),
    "topk_big": dict(max_new_tokens=N, do_sample=True, top_k=1000),
    "weights_change": dict(max_new_tokens=N, do_sample=False),
    "enable_grad": dict(max_new_tokens=N, do_sample=False, _ctx="grad"),
}
CONFIGS.update(CONFIGS2)
CONFIGS.update(CONFIGS3)
BATCHED = {"bool_mask", "min_eos", "batch_pad", "batch_pad_sample", "static", "fwd_jit", "scores", "long64"}

class Timeout(Exception):
    pass

def _alarm(*a):
    raise Timeout()

def compare(e, a, path="out"):
    if isinstance(e, torch.Tensor):
        assert isinstance(a, torch.Tensor), f"{path}: {type(a)}"
        assert e.shape == a.shape and e.dtype == a.dtype, f"{path}: {e.shape}/{e.dtype} vs {a.shape}/{a.dtype}"
        if e.dtype in (torch.long, torch.int, torch.bool):
            assert torch.equal(e, a), f"{path}: tokens differ\n{e}\n{a}"
        else:
            torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-5, msg=lambda m: f"{path}: {m}")
            assert torch.equal(torch.isinf(e), torch.isinf(a)), f"{path}: inf positions differ"
        return
    if isinstance(e, (tuple, list)):
        assert type(a) is type(e) and len(a) == len(e), f"{path}: {type(e)}[{len(e)}] vs {type(a)}"
        for i, (x, y) in enumerate(zip(e, a)):
            compare(x, y, f"{path}[{i}]")
        return
    if isinstance(e, dict):
        assert type(a) is type(e), f"{path}: {type(e)} vs {type(a)}"
        assert list(e.keys()) == list(a.keys()), f"{path}: keys {list(e.keys())} vs {list(a.keys())}"
        for k in e.keys():
            if k == "past_key_values":
                continue
            compare(e[k], a[k], f"{path}.{k}")
        return
    if e is None or isinstance(e, (int, float, str, bool)):
        assert e == a, f"{path}: {e} vs {a}"

def build(name):
    torch.manual_seed(0)
    m = FAMILIES[name]().eval()
    return m

def run_case(name, cname, model=None, jm=None):
    model = build(name) if model is None else model
    kw = dict(CONFIGS[cname])
    batched = cname in BATCHED
    inputs = prompt(name, 2 if batched else 1, pad=batched and name != "whisper")
    if name != "whisper":
        kw.setdefault("pad_token_id", 0)
    if cname == "min_eos":
        ref = model.generate(**inputs, max_new_tokens=N, do_sample=False)
        seq = ref if isinstance(ref, torch.Tensor) else ref.sequences
        kw["eos_token_id"] = int(seq[0, -N + 2]) if name not in ENC_DEC else int(seq[0, 3])
    if cname in ("assisted", "assisted_sample"):
        torch.manual_seed(7)
        kw["assistant_model"] = FAMILIES[name]().eval()
    if cname == "attn":
        model.set_attn_implementation("eager")
    if cname == "bf16":
        model.to(torch.bfloat16)
    if cname == "inputs_embeds":
        inputs = {"inputs_embeds": model.get_input_embeddings()(inputs["input_ids"])}
    if cname == "prefix_cache":
        first = model.generate(**inputs, max_new_tokens=3, do_sample=False, pad_token_id=0, return_dict_in_generate=True)
        inputs = {"input_ids": first.sequences}
        prefix = first.past_key_values
        kw["past_key_values"] = copy.deepcopy(prefix)
    ctx = kw.pop("_ctx", None)
    jit_opts = kw.pop("_jit", {})
    if kw.pop("_boolmask", False) and "attention_mask" in inputs:
        inputs["attention_mask"] = inputs["attention_mask"].bool()
    if cname == "fp16":
        model.to(torch.float16)
    def context():
        if ctx == "inference":
            return torch.inference_mode()
        if ctx == "autocast":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        if ctx == "grad":
            return torch.enable_grad()
        return contextlib.nullcontext()
    streamed = []
    if cname == "streamer":
        class S(T.generation.streamers.BaseStreamer):
            def put(self, v):
                streamed.append(v.clone())

            def end(self):
                streamed.append("end")
        kw["streamer"] = S()
    calls = [0]
    hook = model.register_forward_pre_hook(lambda *a: calls.__setitem__(0, calls[0] + 1))
    torch.manual_seed(42)
    try:
        with context():
            expected = model.generate(**inputs, **kw)
    except Exception as eager_error:
        hook.remove()
        jm = thunder.jit(model, **jit_opts) if jm is None else jm
        try:
            torch.manual_seed(42)
            jm.generate(**inputs, **kw)
        except Exception as e:
            assert type(e) is type(eager_error), f"eager raised {eager_error!r}, thunder {e!r}"
            return dict(note=f"both raise {type(e).__name__}", misses=None)
        raise AssertionError(f"eager raised {eager_error!r}, thunder did not") from None
    eager_calls = calls[0]
    hook.remove()
    eager_streamed = list(streamed)
    streamed.clear()
    if cname == "prefix_cache":
        kw["past_key_values"] = copy.deepcopy(prefix)
    if cname == "fwd_jit":
        jf = thunder.jit(model.forward, **jit_opts)
        model.forward = jf
        target, stats = model, jf
    else:
        jm = thunder.jit(model, **jit_opts) if jm is None else jm
        target, stats = jm, jm
    m0, h0 = thunder.cache_misses(stats), thunder.cache_hits(stats)
    torch.manual_seed(42)
    with warnings.catch_warnings(record=True) as ws:
        warnings.simplefilter("always")
        with context():
            actual = target.generate(**inputs, **kw)
    eager_runs = [str(w.message)[:300] for w in ws if "thunder" in type(w.message).__module__ or "thunder" in str(w.message)]
    misses, hits = thunder.cache_misses(stats) - m0, thunder.cache_hits(stats) - h0
    compare(expected, actual)
    if cname == "streamer":
        compare(eager_streamed, list(streamed), "streamed")
        streamed.clear()
    if cname == "prefix_cache":
        kw["past_key_values"] = copy.deepcopy(prefix)
    note = ""
    if misses + hits != eager_calls:
        note = f"calls: thunder {misses + hits} vs eager {eager_calls}"
    if eager_runs:
        note += f" warnings: {eager_runs}"
    # Second generation on the same jitted module: equal again
    torch.manual_seed(42)
    with context():
        again = target.generate(**inputs, **kw)
    compare(expected, again, "again")
    m2 = thunder.cache_misses(stats) - m0
    if cname == "weights_change":
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(1.5)
        torch.manual_seed(42)
        expected = model.generate(**inputs, **kw)
        torch.manual_seed(42)
        compare(expected, target.generate(**inputs, **kw), "after weights change")
    return dict(misses=misses, misses_after_second=m2, calls=misses + hits, eager_calls=eager_calls, note=note)

def main():
    fams = sys.argv[1].split(",") if len(sys.argv) > 1 and sys.argv[1] != "all" else list(FAMILIES)
    cfgs = sys.argv[2].split(",") if len(sys.argv) > 2 and sys.argv[2] != "all" else list(CONFIGS)
    out = open(sys.argv[3] if len(sys.argv) > 3 else "probe_generation.jsonl", "a")
    signal.signal(signal.SIGALRM, _alarm)
    seq = "--seq" in sys.argv
    for name in fams:
        shared = (build(name), None) if seq else None
        if seq:
            shared = (shared[0], thunder.jit(shared[0]))
        for cname in cfgs:
            if seq and cname == "fwd_jit":
                continue
            if cname == "static" and name in ("mamba",):
                continue
            t = time.process_time()
            signal.alarm(300)
            try:
                r = run_case(name, cname, *(shared or ()))
                r["status"] = "ok" if not r["note"] else ("eager_raises" if r["note"].startswith("both raise") else "note")
            except Timeout:
                r = dict(status="timeout")
            except Exception as ex:
                tb = traceback.format_exc()
                r = dict(status="FAIL", error=f"{type(ex).__name__}: {str(ex)[:600]}", tb=tb[-3000:])
            finally:
                signal.alarm(0)
            r.update(family=name, config=cname, cpu=round(time.process_time() - t, 1))
            out.write(json.dumps(r) + "\n")
            out.flush()
            short = {k: v for k, v in r.items() if k != "tb"}
            print(json.dumps(short)[:900], flush=True)

if __name__ == "__main__":
    main()
