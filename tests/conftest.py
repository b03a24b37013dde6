"""Shared test setup: every test starts from the same random state, so sampled inputs (and
any tolerance failure they reveal) are reproducible."""

from __future__ import annotations

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


@pytest.fixture
def prims_only(monkeypatch):
    """The torch executor runs prims only, so every language symbol runs its decomposition."""
    import thunder.executors.torchex as torchex

    monkeypatch.setattr(torchex, "symbol_to_torch", {})
    monkeypatch.setattr(torchex.ex, "implmap", {})
