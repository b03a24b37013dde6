"""Every causal LM of the installed ``transformers`` that the test zoo lacks, from a tiny config with random weights:
thunder against eager, forward in ``eval()``, a training step (loss and every parameter's gradient, including
which are None) and two more training calls that must hit the cache. A sweep over programs nobody here wrote:
it found the DeepSeek-V4 gradient that was zeros where eager's is None.

Run: ``python -m benchmarks.sweep_causal_lms [--models A,B] [--timeout 180]``. Each model runs in its own process
under a time limit; a model whose tiny config eager itself cannot run is skipped. Prints one JSON line per model,
then the counts and every model that is not ok.
"""

from __future__ import annotations

import argparse
import collections
import json
import subprocess
import sys

# Families the test zoo covers (tests/zoo.py, tests/test_zoo_families.py).
ZOO = set(
    "GPT2 GPTNeoX OPT Falcon Bloom GPTJ Llama Mistral Mixtral Qwen2 Qwen3 Gemma Gemma2 Phi3 GPTBigCode Starcoder2 Olmo "
    "StableLm Mpt Bart Whisper Granite Cohere Olmoe Qwen2Moe GraniteMoe Jamba Mamba Rwkv Pegasus".split()
)
TINY = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
            vocab_size=256, head_dim=16, max_position_embeddings=128, n_layer=2, n_embd=64, n_head=4, d_model=64,
            num_layers=2, num_heads=4, ffn_dim=128, n_positions=128, hidden_dropout_prob=0.0,
            attention_probs_dropout_prob=0.0, attention_dropout=0.0, hidden_dropout=0.0, dropout=0.0, resid_pdrop=0.0,
            embd_pdrop=0.0, attn_pdrop=0.0, num_experts=4, num_local_experts=4, num_experts_per_tok=2,
            moe_intermediate_size=32, n_routed_experts=4, decoder_layers=2, decoder_attention_heads=4,
            decoder_ffn_dim=128, encoder_layers=2, encoder_attention_heads=4, encoder_ffn_dim=128, pad_token_id=0,
            bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)  # fmt: skip


def _build(name: str):
    import torch
    import transformers

    cls = getattr(transformers, name)
    torch.manual_seed(0)
    try:
        config = cls.config_class(**TINY)
    except Exception:  # noqa: BLE001 - a config that rejects some keyword: set what it has
        config = cls.config_class()
        for k, v in TINY.items():
            if hasattr(config, k):
                try:
                    setattr(config, k, v)
                except Exception:  # noqa: BLE001
                    pass
    return cls(config)


def check(name: str) -> dict:
    """One model: eager first (a config eager cannot run is a skip), then thunder."""
    import copy
    import warnings

    import torch

    import thunder

    warnings.simplefilter("error", thunder.EagerRunWarning)  # a call that ran eagerly is an error here, not a pass
    try:
        model = _build(name)
        if sum(p.numel() for p in model.parameters()) > 30e6:
            return {"status": "skip", "why": "over 30M parameters at the tiny config"}
        reference = copy.deepcopy(model)
        ids = torch.randint(3, 256, (2, 12), generator=torch.Generator().manual_seed(1))
        with torch.no_grad():
            expected = reference.eval()(input_ids=ids).logits
        copy.deepcopy(reference).train()(input_ids=ids, labels=ids).loss.backward()
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "why": f"eager: {type(e).__name__}: {str(e)[:100]}"}
    result: dict = {}
    try:
        jm = thunder.jit(model.eval())
        with torch.no_grad():
            result["eval_maxdiff"] = (jm(input_ids=ids).logits - expected).abs().max().item()
        model.train(), reference.train()
        torch.manual_seed(2)
        expected_loss = reference(input_ids=ids, labels=ids).loss
        expected_loss.backward()
        torch.manual_seed(2)
        loss = jm(input_ids=ids, labels=ids).loss
        loss.backward()
        result["loss_diff"] = abs(loss.item() - expected_loss.item())
        worst, none_differs = 0.0, []
        for (n, p), q in zip(model.named_parameters(), reference.parameters()):
            if (p.grad is None) != (q.grad is None):
                none_differs.append(n)
            elif p.grad is not None:
                worst = max(worst, ((p.grad - q.grad).abs().max() / (q.grad.abs().max() + 1e-6)).item())
        result["grad_reldiff"], result["grad_none_differs"] = worst, none_differs[:3]
        misses = thunder.cache_misses(jm)
        for _ in range(2):
            torch.manual_seed(2)
            jm(input_ids=ids, labels=ids).loss.backward()
        result["misses_after_first_training_call"] = thunder.cache_misses(jm) - misses
        wrong = result["eval_maxdiff"] > 1e-3 or result["loss_diff"] > 1e-3 or worst > 1e-2 or none_differs
        result["status"] = "WRONG" if wrong else "ok"
    except Exception as e:  # noqa: BLE001
        result.update(status="error", why=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated class names (default: every causal LM the zoo lacks)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds per model")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        print(json.dumps({"model": opts.child, **check(opts.child)}))
        return
    import transformers

    names = opts.models.split(",") if opts.models else [
        n for n in dir(transformers)
        if n.endswith("ForCausalLM") and n != "AutoModelForCausalLM" and not n.startswith(("TF", "Flax"))
        and n[: -len("ForCausalLM")] not in ZOO
    ]  # fmt: skip
    rows = []
    for name in names:
        try:
            out = subprocess.run([sys.executable, "-m", "benchmarks.sweep_causal_lms", "--child", name],
                                 capture_output=True, text=True, timeout=opts.timeout, check=False)  # fmt: skip
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            row = json.loads(lines[-1]) if lines else {"model": name, "status": "crash", "why": out.stderr[-200:]}
        except subprocess.TimeoutExpired:
            row = {"model": name, "status": "timeout"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n", dict(collections.Counter(r["status"] for r in rows)))
    for r in rows:
        if r["status"] not in ("ok", "skip"):
            print(f"- {r['model']}: {r['status']} {r.get('why') or r.get('grad_none_differs') or ''}")


if __name__ == "__main__":
    main()
