"""Op consistency: every op in the database through thunder.jit against eager PyTorch."""

from __future__ import annotations

import re

import pytest
import torch

import thunder
from tests.opinfos import all_opinfos
from tests.opinfos.core import tolerance

OPINFOS = all_opinfos()


def _cases():
    for info in OPINFOS:
        for dtype in info.dtypes:
            yield pytest.param(info, dtype, id=f"{info.name}-{str(dtype).removeprefix('torch.')}")


def _clone(x):
    return x.clone() if isinstance(x, torch.Tensor) else x


def _assert_same(actual, expected, dtype, info, sample, tolerance_override=None):
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)) and len(actual) == len(expected), f"{sample}: {actual} vs {expected}"
        for a, e in zip(actual, expected):
            _assert_same(a, e, dtype, info, sample, tolerance_override)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected or (actual != actual and expected != expected), f"{sample}: {actual} vs {expected}"
        return
    assert isinstance(actual, torch.Tensor), f"{sample}: expected a tensor, got {type(actual).__name__}"
    assert actual.shape == expected.shape, f"{sample}: shape {actual.shape} vs {expected.shape}"
    assert actual.dtype == expected.dtype, f"{sample}: dtype {actual.dtype} vs {expected.dtype}"
    assert actual.device == expected.device
    if info.random:
        return
    tol = tolerance_override or tolerance(dtype)
    if dtype in info.atol:
        tol = {
            "atol": max(tol.get("atol", 0), info.atol[dtype]),
            "rtol": max(tol.get("rtol", 0), info.rtol.get(dtype, info.atol[dtype])),
        }
    torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{sample}: {m}", **tol)


@pytest.mark.parametrize("info,dtype", list(_cases()))
def test_core_vs_torch_consistency(info, dtype):
    reason = info.skip_reason("test_core_vs_torch_consistency", dtype)
    if reason:
        pytest.xfail(reason)
    samples = list(info.sample_inputs(dtype, "cpu"))
    assert samples, f"{info.name} has no samples for {dtype}"
    for sample in samples:
        fn = lambda *args, **kwargs: info.op(*args, **kwargs)  # noqa: E731
        jfn = thunder.jit(fn)
        eager_args = [_clone(a) for a in sample.args]
        jit_args = [_clone(a) for a in sample.args]
        torch.manual_seed(0)
        expected = fn(*eager_args, **sample.kwargs)
        torch.manual_seed(0)
        actual = jfn(*jit_args, **sample.kwargs)
        _assert_same(actual, expected, dtype, info, sample)
        if info.mutates:
            _assert_same(jit_args, eager_args, dtype, info, sample)
        _assert_metas_match(jfn, actual, sample)


def _assert_metas_match(jfn, actual, sample):
    """The metadata the trace promised for each output (its meta functions' work) is what ran."""
    from thunder.core.proxies import TensorProxy
    from thunder.core.pytree import tree_leaves

    returned = thunder.last_traces(jfn)[0].bound_symbols[-1].args[0]
    promised, produced = tree_leaves(returned), tree_leaves(actual)
    assert len(promised) == len(produced), f"{sample}: trace returns {len(promised)} values, call {len(produced)}"
    for p, value in zip(promised, produced):
        if isinstance(p, TensorProxy):
            assert tuple(p.shape) == tuple(value.shape), f"{sample}: meta shape {p.shape} vs {tuple(value.shape)}"
            assert p.dtype == value.dtype, f"{sample}: meta dtype {p.dtype} vs {value.dtype}"
            assert p.device == value.device, f"{sample}: meta device {p.device} vs {value.device}"


def _error_cases():
    for info in OPINFOS:
        if info.error_inputs is not None:
            yield pytest.param(info, id=info.name)


@pytest.mark.parametrize("info", list(_error_cases()))
def test_errors(info):
    for err in info.error_inputs("cpu"):
        # eager PyTorch rejects it too: thunder must reject it with a clear message, not compute something
        with pytest.raises(err.exc_type) as excinfo:
            thunder.jit(lambda *a, **k: info.op(*a, **k))(*err.sample.args, **err.sample.kwargs)
        assert re.search(err.match, str(excinfo.value)), f"{err.sample}: {excinfo.value!s} does not match {err.match!r}"


# Decompositions round differently from PyTorch's fused kernels.
_DECOMPOSITION_TOLERANCE = {
    torch.float32: {"atol": 1e-5, "rtol": 1e-4},
    torch.float64: {"atol": 1e-7, "rtol": 1e-7},
    torch.bfloat16: {"atol": 3e-2, "rtol": 3e-2},
}

# Symbols that are views of their input have no value-level decomposition: the torch executor
# always runs them itself.
_NO_DECOMPOSITION = {"detach": "a view with no prim decomposition; the torch executor runs it"}


@pytest.mark.parametrize("info,dtype", list(_cases()))
def test_decomposition_vs_torch(info, dtype, prims_only):
    """test_core_vs_torch_consistency runs each symbol's torch function; this runs its prims."""
    reason = (
        _NO_DECOMPOSITION.get(info.name)
        or info.skip_reason("test_decomposition_vs_torch", dtype)
        or info.skip_reason("test_core_vs_torch_consistency", dtype)
    )
    if reason:
        pytest.xfail(reason)
    for sample in info.sample_inputs(dtype, "cpu"):
        fn = lambda *args, **kwargs: info.op(*args, **kwargs)  # noqa: E731
        eager_args = [_clone(a) for a in sample.args]
        jit_args = [_clone(a) for a in sample.args]
        torch.manual_seed(0)
        expected = fn(*eager_args, **sample.kwargs)
        jfn = thunder.jit(fn)
        torch.manual_seed(0)
        actual = jfn(*jit_args, **sample.kwargs)
        tol = dict(_DECOMPOSITION_TOLERANCE.get(dtype, {}))
        _assert_same(actual, expected, dtype, info, sample, tolerance_override=tol)
        if info.mutates:
            _assert_same(jit_args, eager_args, dtype, info, sample, tolerance_override=tol)
        language = set(thunder.torch.symbol_to_torch)
        left = [b.sym.id for b in thunder.last_traces(jfn)[-1].bound_symbols if b.sym in language]
        assert not left, f"language symbols not decomposed: {left}"
