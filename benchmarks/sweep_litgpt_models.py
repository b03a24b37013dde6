"""litgpt's models (``litgpt.GPT`` from its named configs, shrunk to 2 layers, 64 wide, a vocabulary of 256, random
weights), thunder against eager: the forward in ``eval()``, a training step (output and every parameter's gradient)
and two more training calls that must hit the cache, as ``sweep_timm_models.py`` checks its models; ``--generate``
checks litgpt's own greedy generation loop with its KV cache instead (``litgpt.generate.base.generate``, which calls
the model once for the prompt and once per new token): the tokens against eager's, and a second generation that must
compile nothing new. The companion of ``sweep_hf_models.py`` for models nobody here wrote.

Run: ``python -m benchmarks.sweep_litgpt_models [--models pythia-14m,Gemma-2-2b] [--generate] [--timeout 300]``.
"""

from __future__ import annotations

import argparse
import json

# One config per family: GPT-NeoX (parallel residual), Llama 3, Mistral, Mixtral (mixture of experts), Phi 2 (partial
# rotary), Phi 3, Gemma (scaled embeddings, GeGLU), Gemma 2 (soft-capping, sliding window), Falcon (multi-query),
# Qwen 3 (q/k norms), OLMo 2 (norms after), Falcon 3.
MODELS = ["pythia-14m", "Llama-3.2-1B", "Mistral-7B-v0.1", "Mixtral-8x7B-v0.1", "phi-2", "Phi-3-mini-4k-instruct",
          "Gemma-2b", "Gemma-2-2b", "falcon-7b", "Qwen3-0.6B", "OLMo-2-1124-7B", "Falcon3-1B-Base"]  # fmt: skip


def tiny_config(name: str):
    """``name``'s litgpt config at 2 layers of width 64 (4 heads of 16; grouped-query and multi-query attention kept
    as such), a vocabulary of 256, 64 positions and, for a mixture of experts, 4 experts of which 2 per token."""
    from litgpt import Config

    full = Config.from_name(name)
    groups = 4 if full.n_query_groups == full.n_head else 1 if full.n_query_groups == 1 else 2
    moe = dict(n_expert=4, n_expert_per_token=2) if full.n_expert else {}
    window = dict(sliding_window_size=8) if full.sliding_window_size else {}
    return Config.from_name(name, n_layer=2, n_embd=64, n_head=4, n_query_groups=groups, head_size=16,
                            intermediate_size=128, moe_intermediate_size=32, vocab_size=256, padded_vocab_size=256,
                            block_size=64, **moe, **window)  # fmt: skip


def _case(name: str):
    """The model and its input: (model, eval arguments, train arguments)."""
    import litgpt
    import torch

    model = litgpt.GPT(tiny_config(name))
    idx = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    return model, (idx,), (idx,)


def check_generate(name: str) -> dict:
    """litgpt's greedy generation (8 new tokens after a prompt of 5) of the compiled model against eager's."""
    import copy
    import warnings

    import litgpt
    import torch
    from litgpt.generate.base import generate

    import thunder
    from benchmarks.sweep_hf_models import error_text

    warnings.simplefilter("error", thunder.EagerRunWarning)
    prompt = torch.randint(0, 256, (5,), generator=torch.Generator().manual_seed(1))
    try:
        torch.manual_seed(0)
        model = litgpt.GPT(tiny_config(name)).eval()
        reference = copy.deepcopy(model)
        reference.set_kv_cache(batch_size=1)
        expected = generate(reference, prompt, 13, temperature=0.0)
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "why": f"eager: {type(e).__name__}: {str(e)[:100]}"}
    result: dict = {}
    try:
        model.set_kv_cache(batch_size=1)
        jm = thunder.jit(model)
        got = generate(jm, prompt, 13, temperature=0.0)
        misses = thunder.cache_misses(jm)
        again = generate(jm, prompt, 13, temperature=0.0)
        result["misses_first_second_generation"] = [misses, thunder.cache_misses(jm) - misses]
        result["tokens_equal"] = torch.equal(got, expected) and torch.equal(again, expected)
        result["status"] = "WRONG" if not result["tokens_equal"] else (
            "recompiles" if result["misses_first_second_generation"][1] else "ok")
    except Exception as e:  # noqa: BLE001
        result.update(status="error", why=error_text(e))
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated litgpt config names (default: MODELS)")
    ap.add_argument("--timeout", type=float, default=300.0, help="CPU seconds per model")
    ap.add_argument("--generate", action="store_true", help="check litgpt's generation loop instead")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        from benchmarks.sweep_timm_models import check

        row = check_generate(opts.child) if opts.generate else check(opts.child, 0, make=lambda: _case(opts.child))
        print(json.dumps({"model": opts.child, **row}))
        return
    from benchmarks.sweep_hf_models import child_row, print_summary

    rows = []
    for name in opts.models.split(",") if opts.models else MODELS:
        row = child_row("benchmarks.sweep_litgpt_models", [name, *(["--generate"] if opts.generate else [])], name,
                        opts.timeout)  # fmt: skip
        print(json.dumps(row), flush=True)
        rows.append(row)
    print_summary(rows)


if __name__ == "__main__":
    main()
