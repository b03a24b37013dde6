"""The model zoo (``tests/zoo.py``) under thunder.jit against eager PyTorch: first call, steady-state
forward and steady-state forward + backward, per model.

Run: ``python -m benchmarks.bench_models [--runs N] [--threads T] [--models gpt2,llama,...]``.
One process; thunder and eager alternate run by run, and the table gives medians and ratios
measured in the same run (wall clock and the process's CPU time, as in ``bench_training.py``:
with one thread the CPU time is the stable measure on a loaded machine).

For each model (the zoo's tiny configs: 2 layers, hidden 32, batch 2, sequence 8, dropout off):

- first call: a fresh ``thunder.jit``'s first forward in ``eval()`` under ``torch.no_grad()``
  (acquiring the trace, the passes, codegen, the run), in ms, and eager's first call next to it;
- forward: the cached call in ``eval()`` under ``torch.no_grad()`` with the zoo's plain inputs;
- forward + backward: in ``train()``, the zoo's loss (``labels``; ``return_loss`` for CLIP) and
  ``loss.backward()``, gradients set to None before each step.

and how many times each compiled (2 for a training step whose first call writes the config, as
the image classifiers' loss sets ``config.problem_type``: the next call reads the new value).
A model that fails under thunder gets a row with the error instead of numbers (the zoo's tests
say which failures are known).
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch

import thunder
from benchmarks.bench_training import _print_table
from tests import zoo


def _cpu_and_wall_ms(fn) -> tuple[float, float]:
    start, cpu = time.perf_counter_ns(), time.process_time_ns()
    fn()
    return (time.perf_counter_ns() - start) / 1e6, (time.process_time_ns() - cpu) / 1e6


def _alternating(eager_fn, jit_fn, runs: int) -> tuple[float, float, float, float]:
    """Medians of alternating eager and thunder runs: eager and thunder wall clock, then CPU time."""
    for _ in range(3):
        eager_fn()
        jit_fn()
    eager, jit = [], []
    for _ in range(runs):
        eager.append(_cpu_and_wall_ms(eager_fn))
        jit.append(_cpu_and_wall_ms(jit_fn))
    return (statistics.median(w for w, _ in eager), statistics.median(w for w, _ in jit),
            statistics.median(c for _, c in eager), statistics.median(c for _, c in jit))  # fmt: skip


def _ratio(jit: float, eager: float) -> str:
    return f"{jit / eager:.2f}x"


def bench_model(name: str, runs: int) -> list[str]:
    """One row of the table: first call, forward and forward + backward of zoo model ``name``."""
    entry = zoo.ZOO[name]
    plain, loss_call = zoo.mode_plain(entry), zoo.mode_labels(entry)

    model = zoo.build(name).eval()
    jm = thunder.jit(model)
    with torch.no_grad():
        eager_first, _ = _cpu_and_wall_ms(lambda: model(**plain.kwargs))
        first, _ = _cpu_and_wall_ms(lambda: jm(**plain.kwargs))
        fw = _alternating(lambda: model(**plain.kwargs), lambda: jm(**plain.kwargs), runs)

    train = zoo.build(name).train()
    eager_train = copy.deepcopy(train)
    jt = thunder.jit(train)

    def step(m, owner):
        def run():
            for p in owner.parameters():
                p.grad = None
            loss_call.pick(m(**loss_call.kwargs)).backward()

        return run

    fwbw = _alternating(step(eager_train, eager_train), step(jt, train), runs)
    fallback = thunder.compile_stats(jt).last_autograd_fallback
    return [name, f"{first:.0f}", f"{eager_first:.1f}",
            f"{fw[0]:.2f}", f"{fw[1]:.2f}", _ratio(fw[1], fw[0]), _ratio(fw[3], fw[2]),
            f"{fwbw[0]:.2f}", f"{fwbw[1]:.2f}", _ratio(fwbw[1], fwbw[0]), _ratio(fwbw[3], fwbw[2]),
            f"{thunder.cache_misses(jm)}, {thunder.cache_misses(jt)}",
            "thunder" if fallback is None else f"torch ({fallback})"]  # fmt: skip


HEADER = ["model", "first call ms", "eager first ms", "fwd eager ms", "fwd thunder ms", "fwd ratio",
          "fwd ratio (CPU)", "fwd+bwd eager ms", "fwd+bwd thunder ms", "fwd+bwd ratio", "fwd+bwd ratio (CPU)",
          "compiles (fwd, fwd+bwd)", "backward by"]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=21, help="alternating steady-state runs per model and mode")
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    parser.add_argument("--models", default=",".join(zoo.ZOO), help="comma-separated zoo names (default: all)")
    opts = parser.parse_args()
    torch.set_num_threads(opts.threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), {opts.runs} runs\n")
    rows = []
    for name in opts.models.split(","):
        try:
            rows.append(bench_model(name, opts.runs))
        except Exception as e:  # a failing model is a row of the table, not the end of the run
            message = str(e).splitlines()[0][:70] if str(e) else ""
            rows.append([name, f"fails: {type(e).__name__}: {message}", *[""] * (len(HEADER) - 2)])
        print(" | ".join(rows[-1][:2]), flush=True)
    print()
    _print_table(HEADER, rows)


if __name__ == "__main__":
    main()
