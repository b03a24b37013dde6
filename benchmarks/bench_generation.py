"""Greedy generation of 64 tokens with Hugging Face ``generate`` on small GPT-2, Llama and Qwen2 configs: eager
against ``thunder.jit(model).generate`` (default options) and ``torch.compile`` of the model's forward (Hugging
Face's recipe; ``torch.compile(model).generate`` runs the original module eagerly), first run
(compiles included) and warm (the median of the runs after it), as tokens per second, and the main thread's CPU time
against eager's (``time.thread_time``: on a loaded machine the wall-clock ratios scatter, the CPU-time ones much less;
thunder's background compile workers are not counted in it). A full garbage collection runs, untimed, before each
contender's first run: the one that importing torch and transformers and building the models left due otherwise falls
on whichever contender first moves enough new objects to the oldest generation (a compile does: thunder's first run,
right after eager's, paid 0.2-0.3 s of CPU for it, more than eager's whole run).

Run: ``python -m benchmarks.bench_generation [--tokens 64] [--runs 3] [--threads 1] [--no-torch-compile]``.
One process, one thread by default. Each contender gets a fresh copy of the model; the first run of each is
timed once, then the contenders' warm runs alternate. Every contender's tokens are checked against eager's.
"""

from __future__ import annotations

import argparse
import copy
import gc
import statistics
import time

import torch
import transformers

import thunder

BATCH, PROMPT, VOCAB = 1, 16, 1000


def _models() -> dict:
    small = dict(num_hidden_layers=2, hidden_size=128, intermediate_size=256, num_attention_heads=4, vocab_size=VOCAB)
    return {
        "gpt2": lambda: transformers.GPT2LMHeadModel(
            transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=VOCAB, n_positions=512)
        ),
        "llama": lambda: transformers.LlamaForCausalLM(transformers.LlamaConfig(num_key_value_heads=2, **small)),
        "qwen2": lambda: transformers.Qwen2ForCausalLM(transformers.Qwen2Config(num_key_value_heads=2, **small)),
    }


def _timed(generate, ids, tokens: int) -> tuple[float, float, torch.Tensor]:
    """Wall-clock and main-thread CPU seconds of one generation, and its tokens."""
    start, cpu = time.perf_counter(), time.thread_time()
    out = generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0)
    return time.perf_counter() - start, time.thread_time() - cpu, out


def bench(name: str, make, tokens: int, runs: int, with_torch_compile: bool) -> list[str]:
    torch.manual_seed(0)
    model = make().eval()
    ids = torch.randint(0, VOCAB, (BATCH, PROMPT))
    contenders = {"eager": model.generate, "thunder": thunder.jit(copy.deepcopy(model)).generate}
    if with_torch_compile:  # Hugging Face's recipe: ``torch.compile(model).generate`` would run the model eagerly
        compiled = copy.deepcopy(model)
        compiled.forward = torch.compile(compiled.forward)
        contenders["torch.compile"] = compiled.generate
    first, first_cpu, warm, warm_cpu, reference = {}, {}, {n: [] for n in contenders}, {n: [] for n in contenders}, None
    with torch.no_grad():
        for n, generate in contenders.items():
            gc.collect()
            first[n], first_cpu[n], out = _timed(generate, ids, tokens)
            reference = out if reference is None else reference
            if not torch.equal(out, reference):
                raise AssertionError(f"{name}: {n}'s tokens differ from eager's")
        for _ in range(runs):
            for n, generate in contenders.items():
                wall, cpu, _ = _timed(generate, ids, tokens)
                warm[n].append(wall)
                warm_cpu[n].append(cpu)
    rows = []
    for n in contenders:
        w, wc = statistics.median(warm[n]), statistics.median(warm_cpu[n])
        rows.append(
            f"| {name} | {n} | {tokens / first[n]:,.0f} ({first[n] / first['eager']:.2f}x eager's time) | "
            f"{tokens / w:,.0f} ({w / statistics.median(warm['eager']):.2f}x) | "
            f"{first_cpu[n] / first_cpu['eager']:.2f}x | {wc / statistics.median(warm_cpu['eager']):.2f}x |"
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--models", default="gpt2,llama,qwen2")
    ap.add_argument("--no-torch-compile", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(
        "| model | contender | first run: tokens/s | warm: tokens/s (time vs eager) | first run: CPU vs eager "
        "| warm: CPU vs eager |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    models = _models()
    for name in args.models.split(","):
        for row in bench(name, models[name], args.tokens, args.runs, not args.no_torch_compile):
            print(row, flush=True)


if __name__ == "__main__":
    main()
