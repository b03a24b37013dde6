"""Steady state and first call: thunder's torch executor, thunder with torchcompile fusion,
torch.compile and eager, on an elementwise chain, at a small and a large size.

Run: ``python benchmarks/bench_executors.py``. One process; medians.
"""

from __future__ import annotations

import time

import torch

import thunder
from benchmarks.bench_jit import median_call_us, twenty_ops


def first_call_s(make, args) -> float:
    fn = make()
    start = time.perf_counter()
    fn(*args)
    return time.perf_counter() - start


def main() -> None:
    torch.set_num_threads(2)
    rows = []
    for size in ((2, 2), (1024, 1024)):
        args = [torch.randn(*size) for _ in range(2)]
        batch = 2000 if size == (2, 2) else 20
        median_call_us(twenty_ops, args, batch=batch, repeats=3)  # warm the allocator
        eager = median_call_us(twenty_ops, args, batch=batch, repeats=11)
        makers = {
            "thunder (torch)": lambda: thunder.jit(twenty_ops),
            "thunder (torchcompile)": lambda: thunder.jit(twenty_ops, executors=["torchcompile"]),
            "torch.compile": lambda: torch.compile(twenty_ops),
        }
        for name, make in makers.items():
            torch._dynamo.reset()
            first = first_call_s(make, args)
            fn = make()
            fn(*args)
            steady = median_call_us(fn, args, batch=batch, repeats=11)
            rows.append([f"{size[0]}x{size[1]}", name, f"{first:.3f}", f"{steady:.1f}", f"{steady / eager:.2f}x"])
        rows.append([f"{size[0]}x{size[1]}", "eager", "-", f"{eager:.1f}", "1.00x"])
    header = ["size", "20 elementwise ops", "first call s", "steady us", "vs eager"]
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)))
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))


if __name__ == "__main__":
    main()
