"""Op coverage against PyTorch's own op database (``common_methods_invocations.op_db``).

Run: ``python -m benchmarks.opdb_coverage [--dtypes float32,float64] [--grad] [--ops add,mul]
[--jobs 2] [--timeout 60] [--json out.json] [--table] [--write-expected tests/opdb_expected.json]``. Needs ``expecttest`` (torch's
internal test utilities import it).

For every OpInfo entry and dtype it supports on the CPU, every sample input runs eagerly and
through ``thunder.jit``, and the results are compared with ``torch.testing.assert_close`` (exact
dtypes, NaNs equal; the OpInfo's own tolerance where it declares one for PyTorch's common tests; a
float32, bfloat16 or float16 result or gradient that differs from eager's by rounding only, no
further from the float64 result than eager's, counts as equal). With ``--grad``, differentiable float samples also compare the gradients
of the inputs that require grad, through a random cotangent. An op *passes* when every sample
does. A sample's outcome is one of:

- ``pass``; ``skip`` (eager itself raises on it: nothing to compare);
- ``unsupported``: thunder's clear ``UnsupportedOpError`` (the op is not in the torch language);
- ``error``: any other exception from thunder, where eager succeeded;
- ``wrong``: thunder returned a result that differs from eager's: a silent wrong result, the
  one outcome that must never happen;
- ``timeout``: the op's samples took longer than ``--timeout`` seconds (e.g. a hang).

Each op runs in a worker process (a crash or a hang costs one op, not the run). Prints a
summary by outcome; ``--table`` prints the README's table by op family. A benchmark script:
it asserts nothing.

Layer: benchmarks; imports thunder and torch's internal test database.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import multiprocessing.connection
import os
import signal
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass
from types import SimpleNamespace

OUTCOMES = ("pass", "unsupported", "error", "wrong", "timeout")


@dataclass
class OpResult:
    """One op of the database, at one dtype: the worst outcome over its samples."""

    name: str  # "add", "nn.functional.relu", "max.reduction_with_dim"
    family: str
    dtype: str
    outcome: str
    samples: int
    detail: str = ""  # the first failing sample's error, one line
    grad: bool = False  # the gradients were compared too


def _op_name(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def _family(op) -> str:
    name = op.name
    for prefix in ("nn.functional.", "linalg.", "fft.", "special.", "signal.", "sparse."):
        if name.startswith(prefix):
            return prefix.rstrip(".")
    kind = type(op).__name__
    return {
        "UnaryUfuncInfo": "elementwise unary",
        "BinaryUfuncInfo": "elementwise binary",
        "ReductionOpInfo": "reductions",
        "SpectralFuncInfo": "fft",
        "ShapeFuncInfo": "shape",
    }.get(kind, "other")


def _database():
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


def _is_tensor(x) -> bool:
    import torch

    return isinstance(x, torch.Tensor)


def _call(op, sample):
    return op.op(sample.input, *sample.args, **sample.kwargs)


def _one_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return f"{type(e).__name__}: {text[0][:200] if text else ''}"


def _sample_text(sample) -> str:
    """A sample as shapes and dtypes: ``(Tensor[5]:float32, 2, dim=0)``."""

    def short(x):
        if _is_tensor(x):
            return f"Tensor{list(x.shape)}:{str(x.dtype).removeprefix('torch.')}"
        if isinstance(x, (list, tuple)):
            return "[" + ", ".join(short(y) for y in x) + "]"
        return repr(x)[:40]

    parts = [short(sample.input)] + [short(a) for a in sample.args]
    parts += [f"{k}={short(v)}" for k, v in sample.kwargs.items()]
    return "(" + ", ".join(parts) + ")"


# Ops whose values are uninitialised memory: only their metadata is compared.
UNINITIALISED = frozenset({"empty", "empty_like", "new_empty", "new_empty_strided", "empty_strided", "empty_permuted"})


def _tolerance(op, dtype) -> dict:
    """The OpInfo's own tolerance for ``dtype`` in PyTorch's common tests (``toleranceOverride`` on
    ``TestCommon``; the largest if several), as ``assert_close`` keywords; empty: its defaults."""
    from torch.testing._comparison import default_tolerances
    from torch.testing._internal.common_device_type import toleranceOverride

    rtol, atol = default_tolerances(dtype)
    found = False
    for info in op.decorators:
        if getattr(info, "cls_name", None) not in (None, "TestCommon"):
            continue
        for dec in getattr(info, "decorators", [info]):
            if isinstance(dec, toleranceOverride) and dtype in dec.d:
                atol, rtol, found = max(atol, dec.d[dtype].atol), max(rtol, dec.d[dtype].rtol), True
    return {"atol": atol, "rtol": rtol} if found else {}


def _compare(expected, actual, *, values: bool = True, tolerance: dict | None = None) -> str | None:
    """None when ``actual`` is eager's ``expected`` (same structure, dtypes, values), else why not."""
    import torch
    from torch.utils._pytree import tree_flatten

    e_leaves, e_spec = tree_flatten(expected)
    a_leaves, a_spec = tree_flatten(actual)
    if e_spec != a_spec:
        return f"structure differs: {e_spec} vs {a_spec}"
    for i, (e, a) in enumerate(zip(e_leaves, a_leaves)):
        if _is_tensor(e) != _is_tensor(a):
            return f"leaf {i}: {type(e).__name__} vs {type(a).__name__}"
        try:
            if _is_tensor(e) and not values:
                if (e.shape, e.dtype, e.device) != (a.shape, a.dtype, a.device):
                    return f"leaf {i}: {a.shape} {a.dtype} {a.device} vs {e.shape} {e.dtype} {e.device}"
            elif _is_tensor(e):
                torch.testing.assert_close(a, e, equal_nan=True, check_device=True, check_dtype=True, **(tolerance or {}))
            elif isinstance(e, float) and isinstance(a, float) and e != e and a != a:
                continue
            elif e != a or type(e) is not type(a):
                return f"leaf {i}: {a!r} vs {e!r}"
        except AssertionError as err:
            return f"leaf {i}: " + " ".join(str(err).split())[:200]
    return None


def _grads(fn, sample):
    """The output and the gradients of ``fn(sample)`` w.r.t. its inputs that require grad, through
    a cotangent made from the output (fixed seed, so eager and thunder see the same one)."""
    import torch
    from torch.utils._pytree import tree_flatten

    inputs = [x for x in tree_flatten((sample.input, sample.args, sample.kwargs))[0] if _is_tensor(x) and x.requires_grad]
    out = fn(sample)
    outs = [o for o in tree_flatten(out)[0] if _is_tensor(o) and o.requires_grad]
    if not inputs or not outs:
        return out, None
    gen = torch.Generator().manual_seed(0)
    # drawn in float32 whatever the dtype: a float64 reference run gets the same cotangent
    cots = [
        torch.randn(o.shape, generator=gen).to(o.dtype) if o.is_floating_point() else torch.ones_like(o) for o in outs
    ]
    grads = torch.autograd.grad(outs, inputs, cots, allow_unused=True)
    return out, [g if g is not None else torch.zeros_like(x) for g, x in zip(grads, inputs)]


def _upcast(x):
    """``x`` with its floating tensors in float64 (requiring grad as they did)."""
    import torch

    if _is_tensor(x) and x.dtype in (torch.bfloat16, torch.float16, torch.float32):
        return x.detach().double().requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(_upcast(y) for y in x)
    if isinstance(x, dict):
        return {k: _upcast(v) for k, v in x.items()}
    return x


def _as_close_as_eager(op, sample, expected, actual, differentiable: bool) -> bool:
    """A result (or gradient) that differs from eager's by rounding only: each tensor's largest
    error against the float64 result (the same op on the upcast sample, the same random draws) is
    no larger than eager's, within a unit in the last place of the dtype."""
    import torch
    from torch.utils._pytree import tree_flatten

    upcast = SimpleNamespace(input=_upcast(sample.input), args=_upcast(sample.args), kwargs=_upcast(sample.kwargs))
    torch.manual_seed(0)
    try:
        reference = _grads(lambda s: _call(op, s), upcast) if differentiable else _call(op, upcast)
    except Exception:
        return False
    triples = zip(*(tree_flatten(x)[0] for x in (expected, actual, reference)))
    for e, a, r in triples:
        if not _is_tensor(e):
            continue
        if not (_is_tensor(a) and _is_tensor(r) and e.shape == a.shape == r.shape and e.dtype == a.dtype):
            return False
        ulp = 2.0**-7 if e.dtype in (torch.bfloat16, torch.float16) else 2.0**-20
        e, a, r = e.double(), a.double(), r.double()
        if a.numel() and not bool((a - r).abs().max() <= (e - r).abs().max() + ulp * (r.abs().max() + 2.0**-3)):
            return False
    return True


def check(op, dtype, grad: bool) -> tuple[str, int, str]:
    """The worst outcome of ``op``'s samples at ``dtype``, their count and the first failure."""
    import torch

    import thunder
    from thunder.core.errors import UnsupportedOpError

    differentiable = grad and op.supports_autograd and dtype in (torch.float32, torch.float64)
    outcome, count, detail = "pass", 0, ""
    rank = {name: i for i, name in enumerate(OUTCOMES)}
    samples = op.sample_inputs("cpu", dtype, requires_grad=differentiable)
    for sample in samples:
        torch.manual_seed(0)
        try:
            expected = _grads(lambda s: _call(op, s), sample) if differentiable else _call(op, sample)
        except Exception:
            continue  # eager rejects it too: nothing to compare
        count += 1
        jitted = thunder.jit(lambda *a, **k: op.op(*a, **k))
        torch.manual_seed(0)
        try:
            if differentiable:
                actual = _grads(lambda s, j=jitted: j(s.input, *s.args, **s.kwargs), sample)
            else:
                actual = jitted(sample.input, *sample.args, **sample.kwargs)
        except UnsupportedOpError as e:
            here, why = "unsupported", _one_line(e)
        except Exception as e:
            here, why = "error", _one_line(e)
        else:
            why = _compare(expected, actual, values=op.name not in UNINITIALISED, tolerance=_tolerance(op, dtype))
            low_precision = dtype in (torch.bfloat16, torch.float16, torch.float32)
            if why is not None and low_precision and _as_close_as_eager(op, sample, expected, actual, differentiable):
                why = None
            here = "pass" if why is None else "wrong"
        if rank[here] > rank[outcome]:
            outcome, detail = here, f"{why} at {_sample_text(sample)}"[:400]
        if outcome in ("unsupported",) and count >= 1:
            break  # the op is missing: its other samples say nothing more
    return outcome, count, detail


# When none of the requested dtypes is one the op supports, the first of these that it does.
_FALLBACK_DTYPES = ("float32", "float64", "int64", "int32", "bool", "complex64", "bfloat16", "float16", "uint8")


def _dtypes_for(op, wanted: list[str]) -> list[str]:
    import torch

    supported = {str(d).removeprefix("torch.") for d in op.supported_dtypes("cpu")}
    chosen = [d for d in wanted if d in supported]
    if not chosen:
        chosen = [d for d in _FALLBACK_DTYPES if d in supported][:1]
    return [d for d in chosen if hasattr(torch, d)]


def _worker(names: list[str], dtypes: list[str], grad: bool, timeout: float, conn) -> None:
    import torch

    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("timed out")))
    torch.set_num_threads(1)
    by_name = {_op_name(op): op for op in _database()}
    for name in names:
        op = by_name[name]
        for dtype_name in _dtypes_for(op, dtypes):
            signal.alarm(int(timeout))
            try:
                outcome, count, detail = check(op, getattr(torch, dtype_name), grad)
            except TimeoutError:
                outcome, count, detail = "timeout", 0, f"over {timeout:.0f} s"
            except Exception as e:
                outcome, count, detail = "error", 0, f"the harness: {_one_line(e)}"
            finally:
                signal.alarm(0)
            differentiable = grad and op.supports_autograd and dtype_name in ("float32", "float64")
            conn.send(asdict(OpResult(name, _family(op), dtype_name, outcome, count, detail, differentiable)))
        conn.send(name)  # this op is done
    conn.send(None)


_PER_WORKER = 25  # ops a worker runs before a fresh one takes over (memory, caches)


def run(names: list[str], dtypes: list[str], grad: bool, jobs: int, timeout: float) -> list[OpResult]:
    """Every op of ``names`` at each of ``dtypes``, in ``jobs`` worker processes. A worker that
    dies or hangs costs the op it was running (a ``timeout``); a new one goes on with the rest."""
    ctx = mp.get_context("spawn")
    pending = list(names)
    results: list[OpResult] = []
    workers: list[tuple] = []  # (connection, process, its ops not done yet)

    def start() -> None:
        part = pending[:_PER_WORKER]
        del pending[:_PER_WORKER]
        here, there = ctx.Pipe(duplex=False)
        proc = ctx.Process(target=_worker, args=(part, dtypes, grad, timeout, there), daemon=True)
        proc.start()
        there.close()
        workers.append((here, proc, part))

    while pending or workers:
        while pending and len(workers) < jobs:
            start()
        ready = mp.connection.wait([w[0] for w in workers], timeout=timeout * len(dtypes) + 90)
        if not ready:  # every worker is stuck: each loses the op it is on
            ready = [w[0] for w in workers]
            for here in ready:
                here.close()
        for here in ready:
            worker = next(w for w in workers if w[0] is here)
            _, proc, part = worker
            try:
                item = here.recv()
            except (EOFError, OSError):
                item = False  # died (or was given up on) while running part[0]
            if isinstance(item, dict):
                results.append(OpResult(**item))
                print(f"{item['name']:40} {item['dtype']:9} {item['outcome']:12} {item['detail'][:100]}", flush=True)
                continue
            if isinstance(item, str):
                part.remove(item)
                continue
            workers.remove(worker)
            proc.kill()
            if item is False and part:
                lost, rest = part[0], part[1:]
                results.append(OpResult(lost, "?", dtypes[0], "timeout", 0, "the worker died or hung"))
                print(f"{lost:40} {dtypes[0]:9} timeout      the worker died or hung", flush=True)
                pending[:0] = rest
    return results


def table(results: list[OpResult]) -> str:
    """Markdown: per family, how many ops pass every sample of every dtype tried."""
    ops: dict[str, dict] = {}
    for r in results:
        entry = ops.setdefault(r.name, {"family": r.family, "outcomes": set()})
        entry["outcomes"].add(r.outcome)
        if r.family != "?":
            entry["family"] = r.family
    families: dict[str, Counter] = {}
    for entry in ops.values():
        worst = max(entry["outcomes"], key=OUTCOMES.index)
        families.setdefault(entry["family"], Counter())[worst] += 1
    lines = ["| family | ops | pass | unsupported | error | wrong | timeout |", "|---|---:|---:|---:|---:|---:|---:|"]
    total = Counter()
    for family in sorted(families):
        c = families[family]
        total.update(c)
        lines.append(f"| {family} | {sum(c.values())} | " + " | ".join(str(c[o]) for o in OUTCOMES) + " |")
    lines.append(f"| **all** | {sum(total.values())} | " + " | ".join(str(total[o]) for o in OUTCOMES) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--dtypes", default="float32")
    parser.add_argument("--grad", action="store_true", help="also compare gradients (float32/float64)")
    parser.add_argument("--ops", default="", help="comma-separated op names (default: the whole database)")
    parser.add_argument("--jobs", type=int, default=max(1, min(4, os.cpu_count() or 1)))
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per op and dtype")
    parser.add_argument("--json", default="", help="write every result here")
    parser.add_argument("--table", action="store_true", help="print the README table")
    parser.add_argument("--write-expected", default="", help="write each op's outcome here (tests/opdb_expected.json)")
    args = parser.parse_args(argv)

    names = [_op_name(op) for op in _database()]
    if args.ops:
        wanted = set(args.ops.split(","))
        names = [n for n in names if n in wanted or n.split(".")[0] in wanted]
    start = time.perf_counter()
    results = run(names, args.dtypes.split(","), args.grad, args.jobs, args.timeout)
    took = time.perf_counter() - start
    counts = Counter(r.outcome for r in results)
    print(f"\n{len(results)} op×dtype results in {took:.0f} s: " + ", ".join(f"{counts[o]} {o}" for o in OUTCOMES))
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in results], f, indent=1)
    if args.write_expected:  # merged into what is there: a forward run and a --grad run fill their own keys
        expected: dict[str, dict] = {}
        if os.path.exists(args.write_expected):
            with open(args.write_expected) as f:
                expected = json.load(f)
        for r in sorted(results, key=lambda r: (r.name, r.dtype)):
            key = f"{r.dtype}/grad" if args.grad else r.dtype
            expected.setdefault(r.name, {})[key] = [r.outcome, r.detail] if r.outcome != "pass" else "pass"
        with open(args.write_expected, "w") as f:
            json.dump(expected, f, indent=0, sort_keys=True)
            f.write("\n")
    if args.table:
        print(table(results))
        if args.grad:
            print("\nDifferentiable ops, gradients compared:\n")
            print(table([r for r in results if r.grad]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
