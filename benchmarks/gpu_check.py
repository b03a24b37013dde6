"""The GPU check: every executor on CUDA, agreement with eager and speed against eager and ``torch.compile``.

Run: ``python -m benchmarks.gpu_check`` on a machine with a CUDA device (under 5 minutes on an
H200); elsewhere it says so and exits 0. ``--device cpu --tiny`` runs the same code on small
models on the CPU, to prepare it where no GPU is at hand (Triton there needs TRITON_INTERPRET=1).

Two parts, one table each, printed as they go:

- **Fusion cases**: the first sample of each elementwise, reduction and normalisation op of the
  op-consistency database (``tests/opinfos``), in float32 and bfloat16, through each fusion
  executor, compared with eager within the database's tolerances.
- **Models** (from ``transformers`` configs, random weights): a GPT-2-style decoder at GPT-2
  small's width, a BERT-style encoder at BERT-base's width with a padding mask, and a ResNet-18,
  in float32 and bfloat16, forward (``no_grad``) and forward+backward (the loss's ``backward()``),
  through eager, each thunder configuration and ``torch.compile``: agreement with eager (max |Δ|
  of the logits, or of the loss and the first parameter's gradient), first-call seconds, and
  the median call time (CUDA-synchronized wall time) as a ratio to eager.

A time budget (``--budget-s``, default 270) skips what remains once it is spent, and says what.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import thunder  # noqa: E402
from benchmarks.bench_executors import EXECUTORS, compiled, unavailable  # noqa: E402

FUSION_EXECUTORS = ("triton", "torchcompile")
DTYPES = (torch.float32, torch.bfloat16)


class Budget:
    def __init__(self, seconds: float):
        self.deadline = time.perf_counter() + seconds

    def spent(self) -> bool:
        return time.perf_counter() > self.deadline


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


# ---------------------------------------------------------------------------------------------
# Fusion cases


def _in_a_region(op: Callable) -> Callable:
    """``op`` between exact multiplications by 1 of its floating inputs and outputs: fusion
    executors decline a region of one op (the torch executor runs it), so the op gets neighbours."""

    def scaled(x):
        return x * 1.0 if isinstance(x, torch.Tensor) and x.is_floating_point() else x

    def fn(*args, **kwargs):
        out = op(*(scaled(a) for a in args), **kwargs)
        return tuple(scaled(o) for o in out) if isinstance(out, tuple) else scaled(out)

    return fn


def fusion_cases(device: str, budget: Budget) -> list[list[str]]:
    from tests.opinfos import elementwise, nn_norms, reductions
    from tests.opinfos.core import tolerance

    infos = [*elementwise.opinfos, *reductions.opinfos, *nn_norms.opinfos]
    rows, skipped = [], 0
    for ex in FUSION_EXECUTORS:
        reason = unavailable(ex)
        if reason:
            rows.append([ex, "-", "-", "-", f"unavailable: {reason}"])
            continue
        for dtype in DTYPES:
            passed, failed = 0, []
            for info in infos:
                if budget.spent():
                    skipped += 1
                    continue
                if dtype not in info.dtypes or info.random:
                    continue
                sample = next(iter(info.sample_inputs(dtype, device)), None)
                if sample is None:
                    continue
                fn = _in_a_region(info.op)
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        expected = fn(*sample.args, **sample.kwargs)
                except Exception:  # eager rejects this sample on this device: nothing to compare
                    continue
                try:
                    with warnings.catch_warnings(
                        record=True
                    ) as caught:  # eager's own warnings too: keep them out of the table
                        warnings.simplefilter("always")
                        actual = thunder.jit(fn, executors=[ex])(*sample.args, **sample.kwargs)
                    tol = tolerance(dtype)
                    if dtype in info.atol:
                        tol = {"atol": info.atol[dtype], "rtol": info.rtol.get(dtype, info.atol[dtype])}
                    torch.testing.assert_close(actual, expected, equal_nan=True, **tol)
                    if any("uncompiled" in str(w.message) for w in caught):
                        failed.append(f"{info.name} (ran uncompiled)")
                    else:
                        passed += 1
                except Exception as e:
                    failed.append(f"{info.name} ({type(e).__name__})")
            rows.append([ex, str(dtype).removeprefix("torch."), str(passed), str(len(failed)), ", ".join(failed)[:300]])
    if skipped:
        rows.append(["-", "-", "-", "-", f"time budget spent: {skipped} cases not run"])
    return rows


# ---------------------------------------------------------------------------------------------
# Models


def gpt(tiny: bool):
    from transformers import GPT2Config, GPT2LMHeadModel

    width, layers, batch, seq = (64, 2, 2, 16) if tiny else (768, 4, 8, 512)
    vocab = 1000 if tiny else 50257
    config = GPT2Config(
        n_embd=width, n_layer=layers, n_head=max(1, width // 64), n_positions=max(seq, 64), vocab_size=vocab,
        bos_token_id=vocab - 1, eos_token_id=vocab - 1,
    )  # fmt: skip
    config.attn_pdrop = config.resid_pdrop = config.embd_pdrop = 0.0
    ids = torch.randint(0, config.vocab_size, (batch, seq))
    return GPT2LMHeadModel(config), {"input_ids": ids, "labels": ids}


def bert(tiny: bool):
    from transformers import BertConfig, BertForMaskedLM

    width, layers, batch, seq = (64, 2, 2, 16) if tiny else (768, 4, 8, 512)
    config = BertConfig(
        hidden_size=width, num_hidden_layers=layers, num_attention_heads=max(1, width // 64),
        intermediate_size=4 * width, max_position_embeddings=max(seq, 64), vocab_size=1000 if tiny else 30522,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    ids = torch.randint(0, config.vocab_size, (batch, seq))
    mask = torch.ones(batch, seq, dtype=torch.long)
    mask[0, seq // 2 :] = 0  # a padded row
    return BertForMaskedLM(config), {"input_ids": ids, "attention_mask": mask, "labels": ids}


def resnet(tiny: bool):
    from transformers import ResNetConfig, ResNetForImageClassification

    config = ResNetConfig(depths=[2, 2, 2, 2], hidden_sizes=[64, 128, 256, 512], layer_type="basic", num_labels=1000)
    if tiny:
        config = ResNetConfig(depths=[1, 1], hidden_sizes=[8, 16], embedding_size=8, layer_type="basic", num_labels=10)
    batch, side = (2, 32) if tiny else (32, 224)
    return ResNetForImageClassification(config), {
        "pixel_values": torch.randn(batch, 3, side, side),
        "labels": torch.randint(0, config.num_labels, (batch,)),
    }


MODELS = {"gpt": gpt, "bert": bert, "resnet": resnet}


def run(fn: Callable, kwargs: dict, backward: bool, params: list[torch.Tensor]):
    """What is compared with eager: the logits (forward), or the loss and the first parameter's gradient."""
    if not backward:
        with torch.no_grad():
            return (fn(**{k: v for k, v in kwargs.items() if k != "labels"}).logits,)
    for p in params:
        p.grad = None
    loss = fn(**kwargs).loss
    loss.backward()
    return loss.detach(), params[0].grad.detach().clone()


def max_rel_diff(got: tuple, expected: tuple) -> float:
    worst = 0.0
    for g, e in zip(got, expected):
        scale = max(e.float().abs().max().item(), 1e-6)
        worst = max(worst, (g.float() - e.float()).abs().max().item() / scale)
    return worst


def model_rows(device: str, tiny: bool, budget: Budget, repeats: int) -> list[list[str]]:
    rows = []
    configs = ["eager", *EXECUTORS, "torch.compile"]
    for name, build in MODELS.items():
        for dtype in DTYPES:
            torch.manual_seed(0)
            model, kwargs = build(tiny)
            model = model.to(device=device, dtype=dtype)
            kwargs = {
                k: v.to(device=device, dtype=dtype if v.is_floating_point() else v.dtype) for k, v in kwargs.items()
            }
            # relative max |Δ| eager's own rounding allows: bf16 keeps 8 bits of mantissa
            tol = 5e-2 if dtype is torch.bfloat16 else 2e-3
            for backward in (False, True):
                mode = "fwd+bwd" if backward else "fwd"
                model.train(backward)
                params = [p for p in model.parameters() if p.requires_grad]
                expected, eager_ms = None, None
                for config in configs:
                    label = [name, str(dtype).removeprefix("torch."), mode, config]
                    reason = unavailable(config)
                    if reason:
                        rows.append([*label, "-", "-", "-", "-", f"unavailable: {reason[:80]}"])
                        continue
                    if budget.spent():
                        rows.append([*label, "-", "-", "-", "-", "skipped: time budget spent"])
                        continue
                    try:
                        fn = compiled(config, model)
                        sync(device)
                        start = time.perf_counter()
                        got = run(fn, kwargs, backward, params)
                        sync(device)
                        first = time.perf_counter() - start
                        run(fn, kwargs, backward, params)  # a warm-up call: allocator, autotuning
                        samples = []
                        for _ in range(repeats):
                            start = time.perf_counter()
                            run(fn, kwargs, backward, params)
                            sync(device)
                            samples.append((time.perf_counter() - start) * 1e3)
                        ms = statistics.median(samples)
                    except Exception as e:
                        rows.append([*label, "-", "-", "-", "-", f"error: {type(e).__name__}: {str(e)[:120]}"])
                        continue
                    if config == "eager":
                        expected, eager_ms = got, ms
                    diff = max_rel_diff(got, expected) if expected is not None else math.nan
                    ok = "yes" if diff <= tol else "NO"
                    ratio = f"{ms / eager_ms:.2f}x" if eager_ms else "-"
                    rows.append([*label, f"{diff:.1e} ({ok})", f"{first:.2f}", f"{ms:.2f}", ratio, ""])
    return rows


def print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(str(c).ljust(w) for c, w in zip(r, widths)) + " |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=None, help="default: cuda, where present")
    parser.add_argument("--tiny", action="store_true", help="small models (to prepare the script on a CPU)")
    parser.add_argument("--budget-s", type=float, default=270.0)
    parser.add_argument("--fusion-budget-s", type=float, default=90.0)
    parser.add_argument("--repeats", type=int, default=10)
    opts = parser.parse_args()
    device = opts.device or ("cuda" if torch.cuda.is_available() else None)
    if device is None:
        print(
            "gpu_check: no CUDA device here: nothing to check (pass --device cpu --tiny to try the script on the CPU)"
        )
        return 0
    start = time.perf_counter()
    where = torch.cuda.get_device_name() if device.startswith("cuda") else "CPU"
    print(
        f"gpu_check on {where}: torch {torch.__version__}, thunder executors {[e.name for e in thunder.get_all_executors()]}"
    )
    budget = Budget(opts.budget_s)
    print("\nFusion cases (first sample of each elementwise, reduction and normalisation op)\n")
    print_table(
        ["executor", "dtype", "pass", "fail", "failures / notes"],
        fusion_cases(device, Budget(min(opts.fusion_budget_s, opts.budget_s))),
    )
    print("\nModels (max |Δ| relative to eager's largest value; first call s; median ms; vs eager)\n")
    rows = model_rows(device, opts.tiny, budget, opts.repeats)
    print_table(["model", "dtype", "mode", "config", "max |Δ| (ok)", "first s", "ms", "vs eager", "note"], rows)
    print(f"\ngpu_check took {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
