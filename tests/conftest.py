"""Shared test setup: every test starts from the same random state, so sampled inputs (and
any tolerance failure they reveal) are reproducible; a run that skipped browser tests says so."""

from __future__ import annotations

import os
import random

import pytest
import torch


@pytest.fixture(autouse=True)
def _seed_everything():
    torch.manual_seed(0)
    random.seed(0)


@pytest.fixture(autouse=True)
def _no_background_compiles(monkeypatch):
    """The default torchcompile_background never compiles in tests that do not ask for it: its
    regions run torch's kernels, and no test starts compile workers by running long enough."""
    import math

    from thunder.executors import torch_compile

    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", math.inf)


@pytest.fixture(autouse=True)
def _verify_first_inputs(monkeypatch):
    """Every first call of an entry also runs its prologue, which must return the inputs known from tracing
    (Note [The first call runs no prologue] in thunder.compiler)."""
    from thunder import compiler

    monkeypatch.setattr(compiler, "VERIFY_FIRST_INPUTS", True)


@pytest.fixture(autouse=True)
def _compile_workers_at_normal_priority(monkeypatch):
    """Tests that wait for a compile worker run beside another test process on a 2-core machine: at the workers'
    usual niceness they would get a few percent of a core (Note [Compile workers do not starve the caller]), and
    every graph a worker compiles is loaded."""
    from thunder.executors import inductor_pool

    monkeypatch.setattr(inductor_pool, "NICENESS", 0)
    # Tests that wait for a compiled region get its graph whatever the worker measured of it, which depends on the
    # machine's load (Note [A compiled graph is loaded where it pays]; tests/test_artifact_cache.py tests the rule).
    monkeypatch.setattr(inductor_pool, "LOAD_IF_FASTER", None)


@pytest.fixture(autouse=True)
def _own_artifact_cache(monkeypatch, tmp_path):
    """Each test compiles into a cache of its own (Note [The artifact cache]): nothing read from an earlier run, nothing
    written to the user's home."""
    from thunder.executors import artifact_cache

    monkeypatch.setattr(artifact_cache, "CACHE_DIR", str(tmp_path / "thunder-cache"))


@pytest.fixture(autouse=True)
def _full_zoo_on_request(request):
    """Skips ``zoo_full`` cases (the zoos' full matrices) unless the marker expression names the marker
    (``-m zoo_full``) or ``THUNDER_ZOO_FULL=1`` is set."""
    if request.node.get_closest_marker("zoo_full") is None or os.environ.get("THUNDER_ZOO_FULL") == "1":
        return
    if "zoo_full" not in (request.config.option.markexpr or ""):
        pytest.skip("the zoo's full matrix: run with -m zoo_full or THUNDER_ZOO_FULL=1")


@pytest.fixture
def prims_only(monkeypatch):
    """The torch executor runs prims only, so every language symbol runs its decomposition."""
    import thunder.executors.torchex as torchex

    monkeypatch.setattr(torchex, "symbol_to_torch", {})
    monkeypatch.setattr(torchex.ex, "implmap", {})


# tests/browser/conftest.py starts its skip reasons with this (here, not imported: under xdist the
# controller that writes the summary never loads that conftest).
_BROWSER_SKIP = "browser test skipped: "


def pytest_terminal_summary(terminalreporter) -> None:
    """A visible line when browser tests were skipped (no Chromium, JupyterLab or playwright), so a
    green run does not hide that the explorer was never opened in a browser."""
    reasons: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
        reason = reason.removeprefix("Skipped: ")
        if reason.startswith(_BROWSER_SKIP):
            key = reason.removeprefix(_BROWSER_SKIP)
            reasons[key] = reasons.get(key, 0) + 1
    if not reasons:
        return
    terminalreporter.section("browser tests skipped", sep="=", yellow=True, bold=True)
    for reason, count in reasons.items():
        terminalreporter.line(f"{count} browser test{'' if count == 1 else 's'} did not run: {reason}", yellow=True)
    terminalreporter.line("CI sets THUNDER_VIZ_REQUIRE_BROWSER=1, which turns these skips into failures.")
