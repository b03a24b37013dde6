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


@pytest.fixture
def prims_only(monkeypatch):
    """The torch executor runs prims only, so every language symbol runs its decomposition."""
    import thunder.executors.torchex as torchex

    monkeypatch.setattr(torchex, "symbol_to_torch", {})
    monkeypatch.setattr(torchex.ex, "implmap", {})
