"""Behaviour of the nn and linalg ops that the op database does not cover.

Every nn/linalg decomposition is run against eager by the generic
``test_decomposition_vs_torch`` in ``tests/test_ops.py``; the tests here check behaviour
specific to these ops.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

import thunder
from thunder.torch.base import symbol_to_torch

LANGUAGE_SYMBOLS = frozenset(symbol_to_torch)


def _assert_no_language_symbols(jfn):
    final = thunder.last_traces(jfn)[-1]
    left = [b.sym.id for b in final.bound_symbols if b.sym in LANGUAGE_SYMBOLS]
    assert not left, f"language symbols not decomposed: {left}"


def test_decomposed_trace_has_only_prims(prims_only):
    jfn = thunder.jit(lambda x, w: F.softmax(x @ w, dim=-1))
    jfn(torch.randn(2, 3), torch.randn(3, 4))
    _assert_no_language_symbols(jfn)
    text = str(thunder.last_traces(jfn)[-1])
    assert all(name in text for name in ("matmul", "amax", "exp", "sum", "div"))


def test_inplace_relu_with_unused_result_mutates_input():
    def f(x):
        F.relu(x, inplace=True)
        return x

    x = torch.randn(5)
    expected = torch.relu(x)
    thunder.jit(f)(x)
    torch.testing.assert_close(x, expected)


def test_dropout_is_random_and_scaled():
    x = torch.ones(1000)
    out = thunder.jit(lambda a: F.dropout(a, 0.25))(x)
    kept = out[out != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 1 / 0.75))
    assert 0.6 < kept.numel() / 1000 < 0.9


def test_dropout_decomposition_is_random_and_scaled(prims_only):
    x = torch.ones(1000, dtype=torch.float64)
    out = thunder.jit(lambda a: F.dropout(a, 0.5))(x)
    kept = out[out != 0]
    torch.testing.assert_close(kept, torch.full_like(kept, 2.0))
    assert 0.35 < kept.numel() / 1000 < 0.65


def test_matmul_trace_prints_prims():
    jfn = thunder.jit(lambda a, b: a @ b)
    jfn(torch.randn(3), torch.randn(2, 3, 4))
    text = str(thunder.last_traces(jfn)[0])
    assert "ltorch.matmul" in text and "prims.matmul" in text and "prims.squeeze" in text
