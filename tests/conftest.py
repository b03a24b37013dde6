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
