"""Differences from eager that earlier sessions found and left alone, each compared with eager PyTorch."""

from __future__ import annotations

import functools

import pytest
import torch

import thunder

CALLS = []


@functools.lru_cache
def _scale(n):
    CALLS.append(n)
    return n * 2.0


def _updates_a_leaf_then_calls_a_cached_function(x, acc):
    x.add_(1)  # eager raises here on a leaf that requires grad
    return acc * _scale(acc.ndim)


def _indexes_then_calls_a_cached_function(x, i):
    y = x[i]  # eager raises here for an index out of range
    return y * _scale(y.ndim + 5)


@pytest.mark.parametrize(
    "fn, make_args",
    [
        (_updates_a_leaf_then_calls_a_cached_function, lambda: (torch.randn(3, requires_grad=True), torch.randn(3))),
        (_indexes_then_calls_a_cached_function, lambda: (torch.randn(3), torch.tensor([0, 7]))),
    ],
    ids=["leaf-update", "index-out-of-range"],
)
def test_a_cached_function_eager_never_reaches_is_not_called_while_tracing(fn, make_args):
    # Eager fails before the call, so the lru_cache body (with its effects) never runs (Note [A run that fails
    # before its effects] in thunder.compiler).
    results = []
    for run in (fn, thunder.jit(fn)):
        CALLS.clear()
        _scale.cache_clear()
        with pytest.raises((RuntimeError, IndexError)) as raised:
            run(*make_args())
        results.append((type(raised.value), list(CALLS), _scale.cache_info().currsize))
    assert results[1] == results[0]
