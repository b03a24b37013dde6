"""Every executor configuration against eager PyTorch and ``torch.compile``: steady state and first call.

Run: ``python -m benchmarks.bench_executors [--models mlp,chain,gpt2,<any zoo name>|zoo]
[--contenders defaults,torch,torchcompile,triton,torch.compile] [--warm] [--no-first-call]``.

Contenders: ``defaults`` (``thunder.jit(model)``), ``torch`` (the torch executor alone),
``torchcompile``, ``torchcompile_background`` (timed once its background compilations have
settled), ``triton`` (timed only where it runs compiled, on CUDA; Triton's interpreter
is a correctness tool), ``torch.compile`` and ``eager``. Models: ``mlp`` and ``chain`` (the
20-op elementwise function of ``bench_jit`` with a parameter) and the test zoo's models.

Steady state: one process, one thread (``torch.set_num_threads(1)``), the first compiled graphs loaded at once
(``inductor_pool.FIRST_LOAD_S = 0``: what a long-running program reaches), the contenders timed
alternately in rounds, medians of process CPU time per call (the machine is shared: CPU time is
what the call costs, wall time adds the neighbours' load). Forward runs under ``no_grad``;
forward+backward is a training step's forward and ``backward()`` of the sum of the output. The
first warm-up call's wall time is the ``compile s`` column.

First call: each contender in a fresh subprocess with an empty Inductor cache directory (its
on-disk caches must not serve it what another contender compiled), warmed up on a tiny other
program (imports, the C++ compiler's checks), wall time of the first forward and of the first
forward+backward.
``--warm`` runs that subprocess a second time with the first one's cache directory: how long a
second process takes for the same program.

The last lines are the summary: per contender and mode, the geometric mean of the steady-state
ratios over the models, the slowest model, and the largest first call as a share of
``torch.compile``'s.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import torch

import thunder
from benchmarks.bench_jit import twenty_ops
from thunder.examine import fusion_status
from thunder.executors import inductor_pool

CONTENDERS = ("defaults", "torch", "torchcompile", "torchcompile_background", "triton", "torch.compile", "eager")
MODELS = ("mlp", "chain", "gpt2", "llama", "bert", "t5", "vit", "resnet", "convnext")
#: The thunder configurations by name: the ``executors=`` each jits with.
EXECUTORS: dict[str, list[str] | None] = {
    "defaults": None, "torch": [], "sdpa": ["sdpa"], "torchcompile": ["torchcompile"],
    "torchcompile_background": ["torchcompile_background"], "triton": ["triton"], "nvfuser": ["nvfuser"],
}  # fmt: skip


def _mlp() -> tuple[torch.nn.Module, dict]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64))
    return model, {"input": torch.randn(32, 64)}


class _Chain(torch.nn.Module):
    """``twenty_ops`` of a 256x256 input with a parameter (so forward+backward has a gradient)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(256, 256))

    def forward(self, x):
        return twenty_ops(x, self.w)


def _zoo(name: str) -> tuple[torch.nn.Module, dict]:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from tests import zoo

    call = zoo.CALL_MODES["plain"](zoo.ZOO[name])
    model = zoo.build(name)
    # the logits: what the zoo's tests compare
    return _Picked(model, call.pick), call.kwargs


class _Picked(torch.nn.Module):
    def __init__(self, model, pick):
        super().__init__()
        self.model, self.pick = model, pick

    def forward(self, **kwargs):
        return self.pick(self.model(**kwargs))


def build(name: str) -> tuple[torch.nn.Module, dict]:
    """A model and the keyword arguments of one call."""
    if name == "mlp":
        return _mlp()
    if name == "chain":
        torch.manual_seed(0)
        return _Chain(), {"x": torch.randn(256, 256)}
    return _zoo(name)


def zoo_names() -> list[str]:
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
    from tests import zoo

    return list(zoo.ZOO)


def compiled(contender: str, model: torch.nn.Module) -> Callable:
    if contender in EXECUTORS:
        return thunder.jit(model, executors=EXECUTORS[contender])
    if contender == "torch.compile":
        # Dynamo caches per code object, and every zoo model runs through ``_Picked.forward``: without a
        # reset the models before would fill its recompile limit and the next would run eagerly.
        torch._dynamo.reset()
        return torch.compile(model)
    return model


def step(fn: Callable, kwargs: dict, backward: bool) -> None:
    if backward:
        fn(**kwargs).sum().backward()
    else:
        with torch.no_grad():
            fn(**kwargs)


def settle(fn: Callable, kwargs: dict, backward: bool, *, quiet_s: float = 1.0, limit_s: float = 600.0) -> None:
    """Calls ``fn`` until no background compilation is pending, none has started for ``quiet_s``
    seconds of calls and no compiled graph waits to load or is on trial: the steady state of
    ``torchcompile_background`` (a no-op for the others). Names the regions left uncompiled."""
    deadline = time.perf_counter() + limit_s
    last, quiet_since = inductor_pool.counts(), time.perf_counter()
    while time.perf_counter() < deadline:
        step(fn, kwargs, backward)
        now = inductor_pool.counts()
        if now != last:
            last, quiet_since = now, time.perf_counter()
        elif (
            now[0] == now[1]
            and time.perf_counter() - quiet_since > quiet_s
            and not any(s in status for _, status in fusion_status(fn) for s in ("waiting to load", "on trial"))
        ):
            break
        if now[0] != now[1]:
            inductor_pool.wait(0.05)  # let the worker and its loader have the machine
    for name, status in fusion_status(fn):
        if status != "compiled":
            print(f"  {name}: {status}", file=sys.stderr, flush=True)


def unavailable(contender: str) -> str | None:
    """Why an executor of ``contender`` cannot run here (None: they all can)."""
    for name in EXECUTORS.get(contender) or ():
        ex = thunder.extend.get_executor(name)
        if ex is not None and not ex.available():
            return ex.unavailable_reason
    return None


def skip_reason(contender: str) -> str | None:
    """Why ``contender`` is not timed here (None: it is)."""
    reason = unavailable(contender)
    if reason is None and contender == "triton" and not torch.cuda.is_available():
        reason = "runs in Triton's interpreter here (correctness only)"
    return reason


def steady_state(
    name: str, backward: bool, contenders: tuple[str, ...] = CONTENDERS, *, rounds: int, min_batch_s: float = 0.02
) -> tuple[dict[str, float], dict[str, float]]:
    """Median CPU microseconds per call of each contender (eager always among them), timed
    alternately, and the wall seconds of each one's first warm-up call (its compile)."""
    contenders = (*(c for c in contenders if c != "eager"), "eager")
    fns, compile_s = {}, {}
    for c in contenders:
        model, kwargs = build(name)
        model.train(backward)
        fn = compiled(c, model)
        try:
            start = time.perf_counter()
            step(fn, kwargs, backward)
            compile_s[c] = time.perf_counter() - start
            for _ in range(2):
                step(fn, kwargs, backward)
            if c in EXECUTORS:
                settle(fn, kwargs, backward)
        except Exception as e:
            print(f"{name} {c}: {type(e).__name__}: {str(e)[:200]}", file=sys.stderr)
            continue
        fns[c] = fn
    start = time.process_time()
    step(fns["eager"], kwargs, backward)
    batch = max(1, int(min_batch_s / max(time.process_time() - start, 1e-6)))
    samples: dict[str, list[float]] = {c: [] for c in contenders}
    for _ in range(rounds):
        for c, fn in fns.items():
            start = time.process_time()
            for _ in range(batch):
                step(fn, kwargs, backward)
            samples[c].append((time.process_time() - start) / batch * 1e6)
    return {c: statistics.median(s) if s else float("nan") for c, s in samples.items()}, compile_s


def first_call(contender: str, name: str, cache_dir: str) -> dict[str, float]:
    """The first forward and the first forward+backward, in a subprocess using ``cache_dir``."""
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache_dir)
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_executors", "--child", contender, name],
        env=env, capture_output=True, text=True, cwd=os.path.join(os.path.dirname(__file__), ".."),
    )  # fmt: skip
    if out.returncode:
        print(f"{name} {contender} first call failed: {out.stderr[-300:]}", file=sys.stderr)
        return {"fwd": float("nan"), "fwd+bwd": float("nan")}
    return json.loads(out.stdout.strip().splitlines()[-1])


def _child(contender: str, name: str) -> None:
    torch.set_num_threads(1)
    # Warm-up on another program: imports, the C++ compiler's checks (shared by every program).
    warm_up = compiled(contender, torch.nn.Linear(3, 3))
    step(warm_up, {"input": torch.randn(2, 3)}, backward=True)
    result = {}
    for backward in (False, True):
        model, kwargs = build(name)
        model.train(backward)
        fn = compiled(contender, model)
        start = time.perf_counter()
        step(fn, kwargs, backward)
        result["fwd+bwd" if backward else "fwd"] = time.perf_counter() - start
    print(json.dumps(result))


def geomean(xs: list[float]) -> float:
    xs = [x for x in xs if x == x]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def summary(ratios: dict, firsts: dict) -> list[str]:
    """Per contender and mode: geometric mean and maximum of the steady-state ratios to eager over the
    models, and the largest first call as a share of torch.compile's (same model and mode)."""
    lines = []
    for (c, mode), by_model in sorted(ratios.items()):
        if c == "eager" or not by_model:
            continue
        worst = max(by_model, key=lambda m: by_model[m])
        line = f"summary  {mode}  {c}  geomean {geomean(list(by_model.values())):.2f}x  max {by_model[worst]:.2f}x ({worst})"
        shares = {
            m: firsts[c, mode, m] / firsts["torch.compile", mode, m]
            for m in by_model
            if (c, mode, m) in firsts and ("torch.compile", mode, m) in firsts and c != "torch.compile"
        }
        if shares:
            m = max(shares, key=shares.get)
            line += f"  first call <= {shares[m]:.2f} of torch.compile's ({m})"
        lines.append(line)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(MODELS), help="names, or 'zoo' for every zoo model")
    parser.add_argument("--contenders", default=",".join(CONTENDERS), help=f"some of {', '.join(CONTENDERS)}")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--warm", action="store_true", help="also time a second process's first call")
    parser.add_argument("--no-first-call", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        return _child(*opts.child)
    torch.set_num_threads(1)
    # The steady state a long-running program reaches: its first graphs load at once rather than after the calls
    # that pay for loading Inductor (Note [The first load waits until it has paid]), which bench_first_calls times.
    inductor_pool.FIRST_LOAD_S = 0.0
    models = zoo_names() if opts.models == "zoo" else opts.models.split(",")
    contenders = []
    for c in opts.contenders.split(","):
        reason = skip_reason(c)
        if reason:
            print(f"{c}: not timed: {reason}", flush=True)
        else:
            contenders.append(c)
    print(
        "model  mode  contender  steady CPU us  vs eager  compile s / first call s  warm second process s", flush=True
    )
    ratios: dict[tuple[str, str], dict[str, float]] = {}
    firsts: dict[tuple[str, str, str], float] = {}
    for name in models:
        for backward in (False, True):
            mode = "fwd+bwd" if backward else "fwd"
            steady, compile_s = steady_state(name, backward, tuple(contenders), rounds=opts.rounds)
            for c in steady:
                ratio = steady[c] / steady["eager"]
                ratios.setdefault((c, mode), {})[name] = ratio
                print(
                    f"{name}  {mode}  {c}  {steady[c]:.1f} us  {ratio:.2f}x  compile {compile_s.get(c, float('nan')):.2f} s",
                    flush=True,
                )
        if opts.no_first_call:
            continue
        for c in (c for c in contenders if c != "eager"):
            with tempfile.TemporaryDirectory() as cache_dir:
                cold = first_call(c, name, cache_dir)
                warm = first_call(c, name, cache_dir) if opts.warm else None
            for mode in ("fwd", "fwd+bwd"):
                firsts[c, mode, name] = cold[mode]
                warm_s = f"{warm[mode]:.2f} s" if warm else "-"
                print(f"{name}  {mode}  {c}  first call {cold[mode]:.2f} s  {warm_s}", flush=True)
    for line in summary(ratios, firsts):
        print(line, flush=True)


if __name__ == "__main__":
    main()
