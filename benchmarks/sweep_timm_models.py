"""One timm architecture per family (timm model module) that the test zoo lacks, random weights, thunder against
eager: the forward in ``eval()`` under ``no_grad``, a training step in ``train()`` (output, and every parameter's
gradient including which are None, from the mean square of the output) and two more training calls, the last of
which must hit the cache. The companion of ``sweep_hf_models.py`` for models nobody here wrote.

Run: ``python -m benchmarks.sweep_timm_models [--models a,b | --families eva,pit] [--timeout 300] [--sample 20] [--size 96]``. Each
family's smallest model (parameters counted on the meta device, at most 30M) runs in its own process under a time
limit. ``--size`` shrinks the input where the model takes any size (0: the model's own). A model eager itself
cannot run is skipped. Prints one JSON line per model, then the counts and every model that is not ok.
"""

from __future__ import annotations

import argparse
import json


def _zoo_modules(timm) -> set[str]:
    """The timm modules whose models tests/test_zoo_families.py runs."""
    import ast
    import pathlib

    source = (pathlib.Path(__file__).parents[1] / "tests" / "test_zoo_families.py").read_text()
    names = next(ast.literal_eval(n.value) for n in ast.parse(source).body
                 if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "TIMM")  # fmt: skip
    return {timm.models._registry._model_to_module[n] for n in names}


def _smallest(timm, torch, module: str) -> str | None:
    """The model of ``module`` with the fewest parameters (counted on meta), at most 30M; None when none builds."""
    best = None
    for name in timm.list_models(module=module):
        try:
            with torch.device("meta"):
                n = sum(p.numel() for p in timm.create_model(name, pretrained=False, num_classes=10).parameters())
        except Exception:  # noqa: BLE001 - a model that cannot be built on meta is not a candidate
            continue
        if n <= 30e6 and (best is None or n < best[0]):
            best = (n, name)
    return best and best[1]


def check(name: str, size: int) -> dict:
    """One model: eager first (a model eager cannot run is a skip), then thunder."""
    import copy
    import warnings

    import timm
    import torch

    import thunder
    from benchmarks.sweep_hf_models import gradient_differences

    warnings.simplefilter("error", thunder.EagerRunWarning)
    try:
        torch.manual_seed(0)
        model = timm.create_model(name, pretrained=False, num_classes=10)
        shape = model.pretrained_cfg.get("input_size", (3, 224, 224))
        x = torch.randn(2, *shape, generator=torch.Generator().manual_seed(1))
        if size and not model.pretrained_cfg.get("fixed_input_size", False):
            try:
                small = torch.randn(2, shape[0], size, size, generator=torch.Generator().manual_seed(1))
                copy.deepcopy(model).eval()(small)
                x = small
            except Exception:  # noqa: BLE001 - the model's own size then
                pass
        reference = copy.deepcopy(model)
        with torch.no_grad():
            expected = reference.eval()(x)
        torch.manual_seed(2)
        copy.deepcopy(reference).train()(x).pow(2).mean().backward()
    except Exception as e:  # noqa: BLE001
        return {"status": "skip", "why": f"eager: {type(e).__name__}: {str(e)[:100]}"}
    result: dict = {"input": list(x.shape)}
    try:
        jm = thunder.jit(model.eval())
        with torch.no_grad():
            result["eval_maxdiff"] = (jm(x) - expected).abs().max().item()
        model.train(), reference.train()
        torch.manual_seed(2)
        expected_out = reference(x)
        expected_out.pow(2).mean().backward()
        torch.manual_seed(2)
        out = jm(x)
        out.pow(2).mean().backward()
        result["train_maxdiff"] = (out - expected_out).abs().max().item()
        worst, none_differs = gradient_differences(model, reference)
        result["grad_reldiff"], result["grad_none_differs"] = worst, none_differs
        misses = []
        for _ in range(2):
            before = thunder.cache_misses(jm)
            torch.manual_seed(2)
            jm(x).pow(2).mean().backward()
            misses.append(thunder.cache_misses(jm) - before)
        result["misses_second_third"] = misses
        wrong = result["eval_maxdiff"] > 1e-3 or result["train_maxdiff"] > 1e-3 or worst > 1e-2 or none_differs
        result["status"] = "WRONG" if wrong else ("recompiles" if misses[1] else "ok")
    except Exception as e:  # noqa: BLE001
        result.update(status="error", why=f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated timm model names (default: one per family the zoo lacks)")
    ap.add_argument("--families", help="comma-separated timm modules (default: every one the zoo lacks)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per model")
    ap.add_argument("--sample", type=int, default=0, help="at most this many families (evenly spaced)")
    ap.add_argument("--size", type=int, default=96, help="input height and width where the model takes any (0: its own)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        print(json.dumps({"model": opts.child, **check(opts.child, opts.size)}))
        return
    if opts.models:
        names = opts.models.split(",")
    else:
        import timm
        import torch

        modules = opts.families.split(",") if opts.families else sorted(set(timm.list_modules()) - _zoo_modules(timm))
        if opts.sample and opts.sample < len(modules):
            modules = [modules[i * len(modules) // opts.sample] for i in range(opts.sample)]
        names = [n for n in (_smallest(timm, torch, m) for m in modules) if n]
    from benchmarks.sweep_hf_models import child_row, print_summary

    rows = []
    for name in names:
        row = child_row("benchmarks.sweep_timm_models", [name, "--size", str(opts.size)], name, opts.timeout)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print_summary(rows)

if __name__ == "__main__":
    main()
