"""The speed a user sees from the first call on, compilation included (issue 32).

Two tables:

- **windows**: one process calls eager, ``executors=["torch"]`` and the defaults (``torchcompile_background``
  first) in turn for ``--seconds`` seconds after the first call, and gives per 2-second window the median call
  time of each as a ratio to eager's, and the defaults against the torch executor (the target: at most 1.10x in
  every window). ``--load`` runs a CPU-bound process beside it (another job on the machine).
- **N calls**: the wall time of the first N calls (N = 10, 100, 1,000, 10,000), compilation included, of eager,
  the defaults, the torch executor and ``torch.compile``, each in a fresh process, forward (``eval()``, no_grad)
  and training steps (forward + ``loss.backward()``); then a second process of the defaults with the first's
  on-disk caches (a warm start), and when each process of the defaults reached its compiled speed (the first
  call from which the running median of 20 calls is within 10% of its last 20 calls' median).

Every process gets empty Inductor and thunder cache directories (``TORCHINDUCTOR_CACHE_DIR``, ``THUNDER_CACHE_DIR``),
except the warm start, which reuses the defaults' directories. Models: the test zoo's (``tests/zoo.py``: 2 layers, hidden 32, batch 2,
sequence 8) and an MLP; the window table's default is the issue's GPT-2 (2 layers, 128 wide, batch 4x64).

Run: ``python -m benchmarks.bench_first_calls [--table windows|ncalls|both] [--models gpt2,llama,...]
[--threads 1] [--seconds 30] [--max-calls 10000] [--load]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

NS = (10, 100, 1_000, 10_000)
MODELS = ("gpt2", "llama", "bert", "t5", "vit", "resnet", "convnext", "mlp")


# --------------------------------------------------------------------------- what one process runs


def _workload(model_name: str, mode: str):
    """(model, a function calling it once): the forward under no_grad, or a training step."""
    import torch

    from tests import zoo

    if model_name == "mlp":
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256))
        x = torch.randn(64, 256)

        def call(m):
            return m(x) if mode == "forward" else m(x).pow(2).mean()

    elif model_name == "gpt2-128":  # the window-table model
        import transformers

        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=128, n_head=4, vocab_size=1000))
        ids = torch.randint(0, 1000, (4, 64))

        def call(m):
            out = m(input_ids=ids, labels=ids if mode == "train" else None)
            return out.logits if mode == "forward" else out.loss

    else:
        entry = zoo.ZOO[model_name]
        model = zoo.build(model_name)
        c = zoo.mode_plain(entry) if mode == "forward" else zoo.mode_labels(entry)

        def call(m):
            return c.pick(m(**c.kwargs))

    if mode == "forward":
        model.eval()

        def run(m):
            with torch.no_grad():
                call(m)

    else:
        model.train()

        def run(m):
            for p in m.parameters():
                p.grad = None
            call(m).backward()

    return model, run


def _contender(model, name: str):
    import torch

    import thunder

    if name == "eager":
        return model
    if name == "defaults":
        return thunder.jit(model)
    if name == "torch":
        return thunder.jit(model, executors=["torch"])
    if name == "torch.compile":
        return torch.compile(model)
    raise ValueError(name)


def _child_ncalls(opts) -> dict:
    """Cumulative wall time at each N of the first calls of one contender, and per-call times."""
    import torch

    torch.set_num_threads(opts.threads)
    model, run = _workload(opts.models, opts.mode)
    fn = _contender(model, opts.contender)
    start = time.perf_counter()
    at, per_call, deadline = {}, [], start + opts.budget
    for i in range(1, opts.max_calls + 1):
        t = time.perf_counter()
        run(fn)
        now = time.perf_counter()
        per_call.append(now - t)
        if i in NS:
            at[i] = now - start
        if now > deadline:
            break
    return {"at": at, "per_call": per_call}


def _child_windows(opts) -> dict:
    """Alternating calls of eager, the torch executor and the defaults, timestamped from the first call."""
    import copy

    import torch

    torch.set_num_threads(opts.threads)
    model, run = _workload(opts.models, opts.mode)
    fns = {name: _contender(copy.deepcopy(model) if name != "eager" else model, name)
           for name in ("eager", "torch", "defaults")}  # fmt: skip
    samples = {name: [] for name in fns}
    start = time.perf_counter()
    while time.perf_counter() - start < opts.seconds:
        for name, fn in fns.items():
            t = time.perf_counter()
            run(fn)
            samples[name].append((t - start, time.perf_counter() - t))
    return samples


# --------------------------------------------------------------------------- the tables


def _spawn(args: list[str], cache_dir: str, load: bool = False) -> dict:
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache_dir, "THUNDER_CACHE_DIR": cache_dir}
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if load else None
    try:
        out = subprocess.run([sys.executable, "-m", "benchmarks.bench_first_calls", "--child", *args], env=env,
                             capture_output=True, text=True, timeout=1800, check=False)  # fmt: skip
    finally:
        if burner is not None:
            burner.kill()
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else f"exit {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _settled_after(per_call: list[float]) -> float | None:
    """Seconds from the first call to the first call whose running median (20 calls) is within 10% of the last
    20 calls' median; None with fewer than 60 calls."""
    if len(per_call) < 60:
        return None
    final = statistics.median(per_call[-20:])
    elapsed = 0.0
    for i in range(len(per_call) - 20):
        if statistics.median(per_call[i : i + 20]) <= 1.10 * final:
            return elapsed
        elapsed += per_call[i]
    return elapsed


def _seconds(s: float) -> str:
    return f"{s * 1e3:.1f} ms" if s < 1 else f"{s:.2f} s"


def table_ncalls(opts) -> None:
    from benchmarks.bench_training import _print_table

    header = ["model", "mode", "contender", *[f"N={n:,}" for n in NS], "compiled speed after"]
    rows = []
    for model in opts.models.split(","):
        for mode in ("forward", "train"):
            results = {}
            with tempfile.TemporaryDirectory() as defaults_cache:
                runs = [("eager", None), ("torch", None), ("defaults", defaults_cache), ("torch.compile", None),
                        ("defaults, warm start", defaults_cache)]  # fmt: skip
                for name, cache in runs:
                    args = ["ncalls", "--models", model, "--mode", mode, "--threads", str(opts.threads),
                            "--max-calls", str(opts.max_calls), "--budget", str(opts.budget),
                            "--contender", name.split(",")[0]]  # fmt: skip
                    try:
                        with tempfile.TemporaryDirectory() as fresh:
                            results[name] = _spawn(args, cache or fresh, opts.load)
                    except Exception as e:  # noqa: BLE001 - a failing contender is a row, not the end of the run
                        results[name] = {"error": f"{type(e).__name__}: {str(e)[:60]}"}
            for name, r in results.items():
                if "error" in r:
                    rows.append([model, mode, name, r["error"], *[""] * len(NS)])
                    continue
                cells = [_seconds(r["at"][str(n)]) if str(n) in r["at"] else "" for n in NS]
                settled = _settled_after(r["per_call"]) if name.startswith("defaults") else None
                rows.append([model, mode, name, *cells, "" if settled is None else _seconds(settled)])
            print(f"{model} {mode} done", file=sys.stderr, flush=True)
    _print_table(header, rows)


def table_windows(opts) -> None:
    from benchmarks.bench_training import _print_table

    for model in opts.window_models.split(","):
        args = ["windows", "--models", model, "--mode", opts.mode, "--threads", str(opts.threads),
                "--seconds", str(opts.seconds)]  # fmt: skip
        with tempfile.TemporaryDirectory() as cache:
            samples = _spawn(args, cache, opts.load)
        edges = list(range(0, int(opts.seconds) + 2, 2))
        header, rows = ["contender", *[f"{a}-{b} s" for a, b in zip(edges, edges[1:])]], []
        medians = {}
        for name, pts in samples.items():
            medians[name] = [statistics.median([d for t, d in pts if a <= t < b] or [float("nan")])
                             for a, b in zip(edges, edges[1:])]  # fmt: skip
        for name in ("torch", "defaults"):
            rows.append([f"{name} / eager", *[f"{m / e:.2f}x" for m, e in zip(medians[name], medians["eager"])]])
        rows.append(["defaults / torch", *[f"{d / t:.2f}x" for d, t in zip(medians["defaults"], medians["torch"])]])
        rows.append(["eager (ms)", *[f"{e * 1e3:.2f}" for e in medians["eager"]]])
        load = ", a CPU-bound process beside it" if opts.load else ""
        print(f"\n{model}, {opts.mode}, {opts.threads} torch thread(s){load}:\n")
        _print_table(header, rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", choices=["ncalls", "windows"], help=argparse.SUPPRESS)
    ap.add_argument("--contender", help=argparse.SUPPRESS)
    ap.add_argument("--mode", default="forward", choices=["forward", "train"])
    ap.add_argument("--table", default="both", choices=["windows", "ncalls", "both"])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--window-models", default="gpt2-128")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=30.0, help="how long the window table runs")
    ap.add_argument("--max-calls", type=int, default=NS[-1])
    ap.add_argument("--budget", type=float, default=120.0, help="seconds at most per N-calls process")
    ap.add_argument("--load", action="store_true", help="a CPU-bound process runs beside the measurement")
    opts = ap.parse_args()
    if opts.child == "ncalls":
        print(json.dumps(_child_ncalls(opts)))
        return
    if opts.child == "windows":
        print(json.dumps(_child_windows(opts)))
        return
    import torch

    print(f"torch {torch.__version__}, {opts.threads} torch thread(s), {os.cpu_count()} cores")
    if opts.table in ("windows", "both"):
        table_windows(opts)
    if opts.table in ("ncalls", "both"):
        print()
        table_ncalls(opts)


if __name__ == "__main__":
    main()
