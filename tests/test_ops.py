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


# ----------------------------------------------------------------------------------------
# gradients: thunder's backward (VJP rules, or decompositions) against torch's autograd
# ----------------------------------------------------------------------------------------

# Every sample of every op in float64 (float32 where that is its only floating dtype), at tight
# tolerances, so that a rule that is slightly wrong shows; an op's own atol/rtol for the dtype
# (decompositions that round differently from torch's kernels) loosen them. Expectations per
# sample are data in the op's ``grad`` entries (OpInfo in tests/opinfos/core.py).
_VJP_DTYPES = (torch.float64, torch.float32)
_VJP_TOLERANCE = {torch.float64: {"atol": 1e-7, "rtol": 1e-7}, torch.float32: {"atol": 1e-5, "rtol": 1e-4}}
# An op checked in float64 is also checked in float32 on its first samples.
_VJP_FLOAT32_SAMPLES = 2


def _floating_tensors(x) -> list:
    """The floating tensors in a sample argument (lists and tuples of tensors included)."""
    if isinstance(x, torch.Tensor):
        return [x] if x.dtype.is_floating_point else []
    if isinstance(x, (list, tuple)):
        return [t for y in x for t in _floating_tensors(y)]
    return []


_VJP_SAMPLES: dict = {}


def _vjp_samples(info, dtype) -> list:
    """The op's samples with a floating tensor to differentiate, drawn once (the test copies them)."""
    key = (id(info), dtype)
    if key not in _VJP_SAMPLES:
        torch.manual_seed(0)
        samples = info.sample_inputs(dtype, "cpu")
        _VJP_SAMPLES[key] = [s for s in samples if _floating_tensors([*s.args, *s.kwargs.values()])]
    return _VJP_SAMPLES[key]


def _vjp_cases():
    for info in OPINFOS:
        dtypes = [d for d in _VJP_DTYPES if d in info.dtypes][:1]
        if dtypes == [torch.float64] and torch.float32 in info.dtypes:
            dtypes.append(torch.float32)  # its first samples only: float32 rounding, at float32 tolerances
        for dtype in dtypes:  # none: integer and bool ops only
            samples = _vjp_samples(info, dtype)  # none for factories: nothing to differentiate
            if dtype is not dtypes[0]:
                samples = samples[:_VJP_FLOAT32_SAMPLES]
            skip = info.skip_reason("test_vjp_vs_torch", dtype)
            for index, sample in enumerate(samples):
                marks = [pytest.mark.skip(reason=skip)] if skip else []
                bug = info.grad_expectation(sample, "xfail")
                if bug:
                    marks.append(pytest.mark.xfail(strict=True, reason=bug))
                name = f"{info.name}-{str(dtype).removeprefix('torch.')}-{index}"
                yield pytest.param(info, dtype, index, id=name, marks=marks)


def _with_leaves(sample, info, leaves=None):
    """A copy of ``sample`` (args, kwargs) whose differentiable floating tensors come from
    ``leaves`` (fresh leaves requiring grad when None), those leaves, and the tensors passed in
    their place: the leaves themselves, but ``leaf.clone()`` for an in-place op (eager refuses an
    in-place update of a leaf that requires grad) and for given leaves (central differences
    perturb them)."""
    given = iter(leaves) if leaves is not None else None
    used, passed = [], []

    def convert(x, key):
        if isinstance(x, (list, tuple)):
            return type(x)(convert(y, key) for y in x)
        if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point or key in info.no_grad_args:
            return _clone(x)
        leaf = next(given) if given is not None else x.detach().clone().requires_grad_(True)
        used.append(leaf)
        passed.append(leaf.clone() if info.mutates or given is not None else leaf)
        return passed[-1]

    args = tuple(convert(a, i) for i, a in enumerate(sample.args))
    kwargs = {k: convert(v, k) for k, v in sample.kwargs.items()}
    return args, kwargs, used, passed


def _grad_outputs(result, passed, info) -> list:
    """The tensors gradients flow back from: what the op returns and, for an in-place op, the
    tensors it was given (the new values of those it updated are results too)."""

    def flat(x):
        if isinstance(x, torch.Tensor):
            return [x]
        return [t for y in x for t in flat(y)] if isinstance(x, (list, tuple)) else []

    return flat(result) + (list(passed) if info.mutates else [])


# Central differences: step, and how close thunder's gradient must come to them.
_NUMERIC = {torch.float64: (1e-6, {"atol": 1e-5, "rtol": 1e-5}), torch.float32: (1e-2, {"atol": 1e-2, "rtol": 1e-2})}


def _numeric_vjp(call, leaves, cotangents, eps):
    """sum(cotangent * d call(leaves) / d leaf) for each leaf, by central differences."""
    grads = []
    with torch.no_grad():
        for leaf in leaves:
            grad = torch.zeros_like(leaf)
            for i in range(leaf.numel()):
                values = []
                for step in (eps, -eps):
                    leaf.view(-1)[i] += step
                    values.append(sum((o * c).sum() for o, c in zip(call(leaves), cotangents)))
                    leaf.view(-1)[i] -= step
                grad.view(-1)[i] = (values[0] - values[1]) / (2 * eps)
            grads.append(grad)
    return grads


@pytest.mark.parametrize("info,dtype,index", list(_vjp_cases()))
def test_vjp_vs_torch(info, dtype, index):
    """One sample of one op, its floating tensors requiring grad: the forward matches eager, and
    the gradients of thunder's backward for a random cotangent match torch's autograd."""
    sample = _vjp_samples(info, dtype)[index]
    fn = lambda *args, **kwargs: info.op(*args, **kwargs)  # noqa: E731
    e_args, e_kwargs, e_leaves, e_passed = _with_leaves(sample, info)
    j_args, j_kwargs, j_leaves, j_passed = _with_leaves(sample, info)
    jfn = thunder.jit(fn)
    torch.manual_seed(0)
    expected = fn(*e_args, **e_kwargs)
    torch.manual_seed(0)
    actual = jfn(*j_args, **j_kwargs)
    _assert_same(actual, expected, dtype, info, sample)

    e_outs = _grad_outputs(expected, e_passed, info)
    j_outs = _grad_outputs(actual, j_passed, info)
    assert len(j_outs) == len(e_outs), f"{sample}: {len(j_outs)} tensor results vs eager's {len(e_outs)}"
    for k, (j, e) in enumerate(zip(j_outs, e_outs)):
        assert j.requires_grad == e.requires_grad, (
            f"{sample}: result {k} requires_grad={j.requires_grad}, eager's {e.requires_grad}"
        )
    differentiable = [k for k, e in enumerate(e_outs) if e.requires_grad]
    if not differentiable:
        return  # not differentiable (comparisons, indices, integer results): it ran, and agrees
    if info.random:
        pytest.skip("random results: eager and thunder draw different values, so gradients differ too")

    stats = thunder.compile_stats(jfn)
    fallback = info.grad_expectation(sample, "fallback")
    if fallback is None:
        assert stats.last_autograd_fallback is None, f"{sample}: torch's autograd ran: {stats.last_autograd_fallback}"
        assert thunder.last_backward_traces(jfn), f"{sample}: no backward trace"
    else:
        assert stats.last_autograd_fallback is not None or not thunder.last_backward_traces(jfn), (
            f"{sample}: thunder's backward ran; remove the expected fallback ({fallback})"
        )
    skip = info.grad_expectation(sample, "skip")
    if skip:
        pytest.skip(skip)

    gen = torch.Generator().manual_seed(1)
    cotangents = [torch.randn(e_outs[k].shape, dtype=e_outs[k].dtype, generator=gen) for k in differentiable]
    actual_grads = torch.autograd.grad(
        [j_outs[k] for k in differentiable], j_leaves, cotangents, allow_unused=True, materialize_grads=True
    )
    if info.grad_expectation(sample, "numeric"):
        # torch's autograd is no reference here (the entry says why): central differences are.
        def call(leaves):
            args, kwargs, _, passed = _with_leaves(sample, info, leaves)
            outs = _grad_outputs(fn(*args, **kwargs), passed, info)
            return [outs[k] for k in differentiable]

        leaves = [t.detach().clone(memory_format=torch.contiguous_format) for t in e_leaves]
        eps, tol = _NUMERIC[dtype]
        expected_grads = _numeric_vjp(call, leaves, cotangents, eps)
    else:
        expected_grads = torch.autograd.grad(
            [e_outs[k] for k in differentiable], e_leaves, cotangents, allow_unused=True, materialize_grads=True
        )
        tol = dict(_VJP_TOLERANCE[dtype])
        if dtype in info.atol:
            tol = {"atol": max(tol["atol"], info.atol[dtype]), "rtol": max(tol["rtol"], info.rtol.get(dtype, 0))}
    for k, (a, e) in enumerate(zip(actual_grads, expected_grads)):
        torch.testing.assert_close(
            a, e, equal_nan=True, msg=lambda m, k=k: f"{sample}: gradient of input {k}: {m}", **tol
        )
