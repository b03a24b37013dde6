"""Behaviour of the nn and linalg ops that the op database does not cover.

The op database compares ``thunder.jit`` with eager PyTorch, but the torch executor claims
each language symbol and calls the torch function itself, so the decompositions are not
run there. ``test_decomposition_vs_torch`` runs every nn/linalg sample with the torch
executor restricted to prims, so each symbol is replaced by its decomposition.
"""

from __future__ import annotations

import importlib

import pytest
import torch
import torch.nn.functional as F

import thunder
import thunder.executors.torchex as torchex
from tests.opinfos.core import tolerance
from thunder.torch.base import symbol_to_torch

LANGUAGE_SYMBOL_IDS = frozenset(symbol_to_torch)

_DOMAINS = ("nn", "linalg")


def _infos():
    for domain in _DOMAINS:
        try:
            module = importlib.import_module(f"tests.opinfos.{domain}")
        except ModuleNotFoundError:
            continue
        yield from module.opinfos


def _cases():
    for info in _infos():
        for dtype in info.dtypes:
            yield pytest.param(info, dtype, id=f"{info.name}-{str(dtype).removeprefix('torch.')}")


@pytest.fixture
def prims_only(monkeypatch):
    """The torch executor runs prims only: every language symbol runs its decomposition."""
    monkeypatch.setattr(torchex, "symbol_to_torch", {})
    monkeypatch.setattr(torchex.ex, "implmap", {})
    yield


def _clone(x):
    return x.clone() if isinstance(x, torch.Tensor) else x


# Decompositions round differently from PyTorch's fused kernels.
_DECOMP_TOL = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-4},
    torch.float64: {"atol": 1e-7, "rtol": 1e-7},
    torch.bfloat16: {"atol": 3e-2, "rtol": 3e-2},
    torch.int64: {"atol": 0, "rtol": 0},
}


def _compare(actual, expected, dtype, info, sample):
    if isinstance(expected, (tuple, list)):
        for a, e in zip(actual, expected):
            _compare(a, e, dtype, info, sample)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected
        return
    assert actual.shape == expected.shape, f"{sample}: {actual.shape} vs {expected.shape}"
    assert actual.dtype == expected.dtype, f"{sample}: {actual.dtype} vs {expected.dtype}"
    if info.random:
        return
    tol = dict(_DECOMP_TOL.get(dtype, tolerance(dtype)))
    if dtype in info.atol:
        tol = {
            "atol": max(tol["atol"], info.atol[dtype]),
            "rtol": max(tol["rtol"], info.rtol.get(dtype, info.atol[dtype])),
        }
    torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{sample}: {m}", **tol)


@pytest.mark.parametrize("info,dtype", list(_cases()))
def test_decomposition_vs_torch(info, dtype, prims_only):
    reason = info.skip_reason("test_decomposition_vs_torch", dtype) or info.skip_reason(
        "test_core_vs_torch_consistency", dtype
    )
    if reason:
        pytest.xfail(reason)
    for sample in info.sample_inputs(dtype, "cpu"):
        fn = lambda *args, **kwargs: info.op(*args, **kwargs)  # noqa: E731
        eager_args = [_clone(a) for a in sample.args]
        jit_args = [_clone(a) for a in sample.args]
        expected = fn(*eager_args, **sample.kwargs)
        jfn = thunder.jit(fn)
        actual = jfn(*jit_args, **sample.kwargs)
        _compare(actual, expected, dtype, info, sample)
        if info.mutates:
            _compare(jit_args, eager_args, dtype, info, sample)
        _assert_no_language_symbols(jfn)


def _assert_no_language_symbols(jfn):
    final = thunder.last_traces(jfn)[-1]
    left = [b.sym.id for b in final.bound_symbols if b.sym.id in LANGUAGE_SYMBOL_IDS]
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
