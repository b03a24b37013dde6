"""Time to build the trace document of a big compilation (target: < 1 s for 5,000 ops).

Run: ``python benchmarks/bench_graph.py [--ops 5000] [--executors torch]``. It jits a
generated function of ``--ops`` elementwise ops (with some dead code and repeated
subexpressions, so every pass changes something), then times ``steps_from_jitted`` +
``document`` (median of several builds) and, separately, ``json.dumps`` of the result.
Not a test: it prints and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import linecache
import statistics
import time

import torch

import thunder
from thunder_viz.graph import document, steps_from_jitted

_OPS = ("torch.sin({})", "({} * 1.5)", "({} + b)", "torch.tanh({})", "({} - 0.5)")


def generated_function(n_ops: int):
    """``f(a, b)`` with ``n_ops`` ops in one chain, every 10th op dead, every 7th repeated."""
    lines = ["def generated(a, b):", "    v0 = a"]
    count, i = 0, 0
    while count < n_ops:
        expr = _OPS[i % len(_OPS)].format(f"v{i}")
        lines.append(f"    v{i + 1} = {expr}")
        count += 1
        if i % 10 == 3:
            lines.append(f"    dead{i} = torch.cos(v{i})")
            count += 1
        if i % 7 == 5:
            lines.append(f"    again{i} = {expr}")
            lines.append(f"    v{i + 1} = v{i + 1} + again{i}")
            count += 2
        i += 1
    lines.append(f"    return v{i}")
    source = "\n".join(lines) + "\n"
    filename = f"<generated {n_ops} ops>"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    namespace = {"torch": torch}
    exec(compile(source, filename, "exec"), namespace)
    return namespace["generated"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=5000)
    parser.add_argument("--executors", default="torch", help="comma-separated, e.g. torch or torchcompile,torch")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    fn = generated_function(args.ops)
    jf = thunder.jit(fn, executors=args.executors.split(","))
    a, b = torch.randn(4), torch.randn(4)
    start = time.perf_counter()
    jf(a, b)
    print(f"jit + first call of {args.ops} ops: {time.perf_counter() - start:.2f} s")
    times, cpu_times, doc = [], [], None
    for _ in range(args.repeats):
        start, cpu_start = time.perf_counter(), time.process_time()
        doc = document(steps_from_jitted(jf), title=fn.__name__)
        times.append(time.perf_counter() - start)
        cpu_times.append(time.process_time() - cpu_start)
    nodes = [len(s["nodes"]) for s in doc["steps"]]
    print(f"steps: {len(doc['steps'])}, nodes per step: {nodes}")
    wall, cpu = statistics.median(times) * 1e3, statistics.median(cpu_times) * 1e3
    print(f"steps_from_jitted + document: median {wall:.0f} ms wall, {cpu:.0f} ms CPU (target < 1000 ms)")
    start = time.perf_counter()
    text = json.dumps(doc)
    print(f"json.dumps: {(time.perf_counter() - start) * 1e3:.0f} ms, {len(text) / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
