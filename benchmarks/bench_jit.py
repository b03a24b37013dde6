"""Cached-call overhead and compile time of thunder.jit against eager PyTorch.

Run: ``python benchmarks/bench_jit.py [--torch-compile] [--cpu-time]``. Medians of batched timings, one
process, thunder's batches alternating with eager's, ratios against eager measured in the same run;
each cached call twice: in the first seconds after the first call (a region may still warm up or
compile in the background) and once background compilation has settled. ``--cpu-time`` times the
calling thread's CPU time (``time.thread_time_ns``) instead of the wall clock: on a shared machine
the ratios scatter less.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import thunder
from thunder.examine import get_fusions
from thunder.executors import inductor_pool

_clock = time.perf_counter_ns  # ``--cpu-time``: time.thread_time_ns


def median_call_us(fn, args, *, batch: int = 2000, repeats: int = 31) -> float:
    """Median time of one call in microseconds, timed in batches."""
    for _ in range(200):
        fn(*args)
    samples = []
    for _ in range(repeats):
        start = _clock()
        for _ in range(batch):
            fn(*args)
        samples.append((_clock() - start) / batch / 1e3)
    return statistics.median(samples)


def alternating_us(fn, eager, args, *, batch: int = 2000, repeats: int = 31) -> tuple[float, float]:
    """Median times of one call of ``fn`` and of ``eager`` in microseconds, their batches alternating."""
    for _ in range(200):
        fn(*args)
        eager(*args)
    samples: tuple[list, list] = ([], [])
    for _ in range(repeats):
        for f, out in zip((fn, eager), samples):
            start = _clock()
            for _ in range(batch):
                f(*args)
            out.append((_clock() - start) / batch / 1e3)
    return statistics.median(samples[0]), statistics.median(samples[1])


def settle(jfn, args, *, limit_s: float = 300.0) -> None:
    """Calls ``jfn`` until no background compilation is pending and every region of its forward has
    decided (compiled, or torch's kernels)."""
    deadline = time.perf_counter() + limit_s
    while time.perf_counter() < deadline:
        for _ in range(200):
            jfn(*args)
        pending, done = inductor_pool.counts()
        states = [impl.status() for _, impl in get_fusions(thunder.last_traces(jfn)[-1]) if hasattr(impl, "status")]
        if pending == done and not any(s in st for st in states for s in ("warming", "compiling", "waiting to load", "on trial")):
            return
        if pending != done:
            inductor_pool.wait(0.05)


def add(a, b):
    return a + b


def five_inputs(a, b, c, d, e):
    return (a * b + c) * d - e


def twenty_ops(a, b):
    x = a + b
    x = x * a
    x = x - b
    x = torch.sin(x)
    x = x * 2.0
    x = torch.exp(x)
    x = x / 3.0
    x = torch.tanh(x)
    x = x + a
    x = torch.cos(x)
    x = x * b
    x = torch.abs(x)
    x = x + 1.0
    x = torch.log(x)
    x = x - a
    x = torch.sigmoid(x)
    x = x * x
    x = torch.sqrt(x + 1.0)
    x = torch.neg(x)
    return x * 0.5


def first_call_ms(fn, args, repeats: int = 7) -> float:
    """Median time of the first call (trace, passes, codegen, run) of a fresh jit."""
    samples = []
    for _ in range(repeats):
        jfn = thunder.jit(fn)
        start = time.perf_counter_ns()
        jfn(*args)
        samples.append((time.perf_counter_ns() - start) / 1e6)
    return statistics.median(samples)


def cache_with_entries_us(n_entries: int, cache: str | None = "constant values") -> tuple[float, float]:
    """Cached-call time after calls with ``n_entries`` shapes: hitting the last entry, and alternating the first and
    last shapes. ``"constant values"``: an entry per shape; None (the default option): the second shape compiles a
    symbolic entry that serves the rest (automatic dynamic shapes)."""
    jfn = thunder.jit(add, cache=cache)
    inputs = [(torch.randn(i + 1, 2), torch.randn(i + 1, 2)) for i in range(n_entries)]
    for args in inputs:
        jfn(*args)
    assert thunder.cache_misses(jfn) == (n_entries if cache else min(n_entries, 2))
    same = median_call_us(jfn, inputs[0], batch=1000, repeats=15)
    first, last = inputs[0], inputs[-1]

    def alternating(a, b, c, d):
        jfn(a, b)
        jfn(c, d)

    alt = median_call_us(alternating, (*first, *last), batch=500, repeats=15) / 2
    return same, alt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--torch-compile", action="store_true", help="also time torch.compile")
    parser.add_argument("--cpu-time", action="store_true", help="time the thread's CPU time, not the wall clock")
    opts = parser.parse_args()
    global _clock
    if opts.cpu_time:
        _clock = time.thread_time_ns
    torch.set_num_threads(1)
    rows = []
    cases = [
        ("a + b (2x2)", add, [torch.randn(2, 2) for _ in range(2)]),
        ("(a*b+c)*d-e (2x2)", five_inputs, [torch.randn(2, 2) for _ in range(5)]),
        ("20 elementwise ops (2x2)", twenty_ops, [torch.randn(2, 2) for _ in range(2)]),
        ("nn.Linear(8, 8) on 2x8", torch.nn.Linear(8, 8), [torch.randn(2, 8)]),
    ]
    for name, fn, args in cases:
        jfn = thunder.jit(fn)
        jfn(*args)
        early, eager = alternating_us(jfn, fn, args, repeats=11)
        settle(jfn, args)
        jit, eager_settled = alternating_us(jfn, fn, args)
        row = [name, f"{eager_settled:.2f}", f"{early / eager:.2f}x", f"{jit:.2f}", f"{jit / eager_settled:.2f}x"]
        if opts.torch_compile:
            cfn = torch.compile(fn)
            cfn(*args)
            tc, _ = alternating_us(cfn, fn, args)
            row += [f"{tc:.2f}", f"{tc / eager_settled:.2f}x"]
        rows.append(row)
    header = ["cached call", "eager us", "first seconds: thunder/eager", "settled: thunder us", "thunder/eager"]
    if opts.torch_compile:
        header += ["torch.compile us", "compile/eager"]
    _print_table(header, rows)

    print()
    args = [torch.randn(2, 2) for _ in range(2)]
    _print_table(
        ["first call (trace + compile + run)", "thunder ms"],
        [["20 elementwise ops", f"{first_call_ms(twenty_ops, args):.1f}"], ["a + b", f"{first_call_ms(add, args):.1f}"]],
    )

    print()
    rows = []
    for n, cache in ((1, "constant values"), (10, "constant values"), (100, "constant values"), (100, None)):
        same, alt = cache_with_entries_us(n, cache)
        rows.append([str(n) if cache else f"{n} shapes, default option (2 entries)", f"{same:.2f}", f"{alt:.2f}"])
    _print_table(["cache entries", "same entry us", "alternating first/last entry us"], rows)


def _print_table(header: list[str], rows: list[list[str]]) -> None:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    print("  ".join("-" * w for w in widths))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
