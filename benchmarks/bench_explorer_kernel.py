"""The explorer's cost in the kernel on a 12-layer GPT-2, and the cost of a profile.

Run: ``python benchmarks/bench_explorer_kernel.py [--layers 12] [--width 768] [--tokens 64] [--repeats 3]``.

A ``transformers.GPT2LMHeadModel`` from a config (GPT-2 small's by default: 768 wide, 12 heads,
50,257 tokens; random weights, nothing downloaded), in eval mode, on the CPU. It measures, each a
median over ``--repeats``:

- ``thunder.jit`` + the first call (a fresh jit each time): what ``%thunder_jit model(ids)`` costs
  without the explorer;
- what the explorer adds in the kernel: the session's document (every step, forward), the widget
  (the packed document) and its display (the saved form and the HTML snapshot), as
  ``%thunder_jit`` and ``thunder_viz.explore`` do it. Target (issue "shows where time and memory
  go"): at most 1 s;
- ``thunder_viz.profile(jm, ids, calls=1)``: the profile of one call (thunder's calls with a range
  per statement, eager's with a range per module, attribution). Target: under 3 s. A call of the
  model itself (thunder's and eager's, timed alone) is printed beside it.

CPU time is printed too, the process's (``time.process_time``: torch's threads included) and the
calling thread's (``time.thread_time``: the Python side), with the load average: on a shared machine
they move less than wall time. A profile taken right after the first call runs while the torch.compile
workers still compile in the background (their processes are not counted; they compete for the
cores); ``--settled`` waits for them first (``inductor_pool.wait()``) and measures a profile again.
``--ratio N`` then alternates, N times, a profile of one call with the two calls it cannot do without
(thunder's and eager's, unprofiled) and prints the medians and their ratio: what profiling adds over
running the model twice, which the load moves far less than either wall time.
A benchmark: prints, asserts nothing.

Layer: benchmarks; imports torch, transformers, thunder, thunder_viz (and ipywidgets' comm, replaced
by one that sends nothing).
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time


def _timed(fn) -> tuple[tuple[float, float, float], object]:
    w, c, t = time.perf_counter(), time.process_time(), time.thread_time()
    out = fn()
    return (time.perf_counter() - w, time.process_time() - c, time.thread_time() - t), out


def _row(name: str, samples: list[tuple[float, float, float]], target: str = "") -> None:
    wall, cpu, thread = (statistics.median(s[i] for s in samples) for i in range(3))
    print(f"{name:50} wall {wall:7.3f} s   cpu {cpu:7.3f} s   thread {thread:7.3f} s   {target}")


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--settled", action="store_true", help="also profile once the background compiles are done")
    parser.add_argument(
        "--ratio", type=int, default=0, help="alternate a profile with a thunder and an eager call N times"
    )
    args = parser.parse_args()

    import comm
    import torch
    import transformers
    from comm.base_comm import BaseComm

    import thunder
    import thunder_viz
    from thunder.executors import inductor_pool
    from thunder_viz.session import Session
    from thunder_viz.widget import ExplorerWidget

    class Silent(BaseComm):
        def publish_msg(self, *a, **k):
            pass

    comm.create_comm = Silent
    transformers.logging.set_verbosity_error()
    config = transformers.GPT2Config(n_layer=args.layers, n_embd=args.width, n_head=max(1, args.width // 64))
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (1, args.tokens))
    print(
        f"GPT-2, {args.layers} layers, {args.width} wide, {args.tokens} tokens, forward; torch threads {torch.get_num_threads()}"
    )

    first, explorer, profile, calls_thunder, calls_eager, settled = [], [], [], [], [], []
    print(f"before: {_load()}")

    def jit_and_call() -> Session:
        session = Session(thunder.jit(model))
        session(ids)
        return session

    def build(session: Session) -> ExplorerWidget:
        widget = ExplorerWidget(session)
        widget._repr_mimebundle_()
        return widget

    for _ in range(args.repeats):
        t, session = _timed(jit_and_call)
        first.append(t)
        jm = session.jitted
        t, _ = _timed(functools.partial(build, session))
        explorer.append(t)
        t, _ = _timed(functools.partial(jm, ids))
        calls_thunder.append(t)
        t, _ = _timed(functools.partial(model, ids))
        calls_eager.append(t)
        t, p = _timed(functools.partial(thunder_viz.profile, jm, ids, calls=1))
        profile.append(t)
        if args.settled:
            inductor_pool.wait()
            t, p = _timed(functools.partial(thunder_viz.profile, jm, ids, calls=1))
            settled.append(t)
    ratio_profile, ratio_calls = [], []
    if args.ratio:
        inductor_pool.wait()

        def both() -> None:
            jm(ids)
            model(ids)

        for _ in range(args.ratio):
            t, p = _timed(functools.partial(thunder_viz.profile, jm, ids, calls=1))
            ratio_profile.append(t)
            t, _ = _timed(both)
            ratio_calls.append(t)
    print(f"after:  {_load()}")
    _row("thunder.jit + first call", first)
    _row("explorer in the kernel (document, widget, display)", explorer, "target <= 1 s")
    _row("one call: thunder", calls_thunder)
    _row("one call: eager", calls_eager)
    _row("thunder_viz.profile(jm, ids, calls=1)", profile, "target < 3 s")
    if settled:
        _row("  the same once the compiles are done", settled, "target < 3 s")
    if ratio_profile:
        _row(f"alternated x{args.ratio}: profile of one call", ratio_profile)
        _row("  thunder's call + eager's call, unprofiled", ratio_calls)
        ratios = [
            statistics.median(a[i] for a in ratio_profile) / statistics.median(b[i] for b in ratio_calls)
            for i in range(3)
        ]
        print(f"  ratio of the medians: wall {ratios[0]:.2f}   cpu {ratios[1]:.2f}   thread {ratios[2]:.2f}")
    print(p.table(5))


if __name__ == "__main__":
    main()
