"""The torchcompile executor: regions compiled by Inductor once per input signature and called
directly (no dynamo), forward and backward, checked against eager PyTorch."""

from __future__ import annotations

import copy

import pytest
import torch

import thunder
from thunder.executors import torch_compile


@pytest.fixture
def compiles(monkeypatch) -> list[tuple]:
    """The signatures ``torch_compile._compile`` is called for, one entry per compilation."""
    calls: list[tuple] = []
    real = torch_compile._compile

    def counting(fn, args):
        calls.append(torch_compile._signature(args))
        return real(fn, args)

    monkeypatch.setattr(torch_compile, "_compile", counting)
    return calls


def fusions(trace) -> list:
    return [b for b in trace.bound_symbols if b.sym.name.startswith("TorchCompile")]


def chain(a, b):
    c = a * b + 1.0
    d = torch.sin(c) - b
    return torch.exp(d) * 0.5, d.to(torch.float64)


def test_a_region_compiles_once_and_cached_calls_skip_dynamo(compiles, monkeypatch):
    def no_dynamo(*args, **kwargs):
        raise AssertionError("torch.compile called")

    monkeypatch.setattr(torch, "compile", no_dynamo)
    jf = thunder.jit(chain, executors=["torchcompile"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    for _ in range(3):
        got, expected = jf(a, b), chain(a, b)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e)
            assert g.dtype == e.dtype
    assert len(fusions(thunder.last_traces(jf)[-1])) == 1
    assert len(compiles) == 1
    transposed = torch.randn(8, 4).t()  # same shape, other strides: thunder's cache hits, Inductor's graph does not
    for g, e in zip(jf(transposed, b), chain(transposed, b)):
        torch.testing.assert_close(g, e)
    assert len(compiles) == 2 and thunder.cache_misses(jf) == 1
    jf(torch.randn(2, 3), torch.randn(2, 3))  # a new shape: a new cache entry, its own compilation
    assert len(compiles) == 3


def test_a_region_met_with_one_signature_skips_it_until_another_layout_comes(compiles, monkeypatch):
    """Note [One signature needs no key]: calls run the graph without working out their signature; an input of
    another layout (same shape, so the same entry) is caught by the graph's own check and gets its own graph."""
    signatures = []
    real = torch_compile._signature
    monkeypatch.setattr(torch_compile, "_signature", lambda args: signatures.append(1) or real(args))
    jf = thunder.jit(chain, executors=["torchcompile"])
    a, b = torch.randn(4, 6), torch.randn(4, 6)
    jf(a, b)
    first = len(signatures)
    for _ in range(3):
        for g, e in zip(jf(a, b), chain(a, b)):
            torch.testing.assert_close(g, e)
    assert len(signatures) == first  # only the first call worked one out
    transposed = torch.randn(6, 4).t()  # the same shape, other strides
    for _ in range(2):
        for g, e in zip(jf(transposed, b), chain(transposed, b)):
            torch.testing.assert_close(g, e)
        for g, e in zip(jf(a, b), chain(a, b)):
            torch.testing.assert_close(g, e)
    assert thunder.cache_misses(jf) == 1
    assert len(compiles) == 2  # one graph per layout


def test_symbolic_values_compile_once_per_shape(compiles):
    jf = thunder.jit(chain, executors=["torchcompile"], cache="symbolic values")
    for n in (3, 5, 3, 5):
        a, b = torch.randn(n, 4), torch.randn(n, 4)
        for g, e in zip(jf(a, b), chain(a, b)):
            torch.testing.assert_close(g, e)
    assert thunder.cache_misses(jf) == 1
    assert len(compiles) == 2  # one per shape


def test_ops_of_symbolic_numbers_are_left_to_torch(compiles):
    def scaled(x, s):
        y = torch.cos(torch.sin(x) + 1.0)
        return y * s + s

    jf = thunder.jit(scaled, executors=["torchcompile"], cache="symbolic values")
    x = torch.randn(6)
    for s in (2.0, 3.0):
        torch.testing.assert_close(jf(x, s), scaled(x, s))
    (fusion,) = fusions(thunder.last_traces(jf)[-1])
    assert [b.sym.name for b in fusion.subsymbols] == ["sin", "add", "cos"]
    assert len(compiles) == 1


def test_an_indexing_op_of_a_symbolic_size_runs_whole_on_torch():
    """Inductor's executor cannot take ``x[idx]`` of a data-dependent length whole; it used to take the parts of its
    decomposition of static shape, leaving the rest to run as a dozen small torch ops."""

    def f(x, mask):
        idx = torch.nonzero(mask).squeeze(1)
        return (x[idx] * 2).sum(0)

    jf = thunder.jit(f)  # the background mode leaves tensors of symbolic shape to torch
    for n in (3, 5, 6, 4):  # counts change: the second entry keeps the count symbolic
        x, mask = torch.randn(8, 4), torch.arange(8) < n
        torch.testing.assert_close(jf(x, mask), f(x, mask))
    names = [b.sym.name for b in thunder.last_traces(jf)[-1].bound_symbols]
    assert "torch_getitem" in names and "where" not in names, names


def test_batch_norm_runs_whole_on_the_cpu():
    """Note [Batch norm runs whole on the CPU]: not its decomposition's parts in regions."""
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU()).eval()
    jm = thunder.jit(model, executors=["torchcompile"])
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(jm(x), model(x))
    names = [b.sym.name for b in thunder.last_traces(jm)[-1].bound_symbols]
    assert "nn.functional.batch_norm" in names, names


def test_past_the_limit_a_region_runs_uncompiled(compiles, monkeypatch):
    monkeypatch.setattr(torch_compile, "MAX_COMPILATIONS", 1)
    jf = thunder.jit(chain, executors=["torchcompile"], cache="symbolic values")
    jf(torch.randn(2, 2), torch.randn(2, 2))
    a, b = torch.randn(3, 2), torch.randn(3, 2)
    with pytest.warns(UserWarning, match="run uncompiled"):
        got = jf(a, b)
    for g, e in zip(got, chain(a, b)):
        torch.testing.assert_close(g, e)
    assert len(compiles) == 1


def test_a_region_inductor_cannot_compile_runs_uncompiled(monkeypatch):
    def cannot(fn, args):
        raise RuntimeError("unsupported op")

    monkeypatch.setattr(torch_compile, "_compile", cannot)
    jf = thunder.jit(chain, executors=["torchcompile"])
    a, b = torch.randn(3, 2), torch.randn(3, 2)
    with pytest.warns(UserWarning, match="cannot compile TorchCompile0.*unsupported op"):
        got = jf(a, b)
    for g, e in zip(got, chain(a, b)):
        torch.testing.assert_close(g, e)


def mlp_loss(x, w1, w2):
    return (torch.nn.functional.gelu(x @ w1) @ w2).tanh().sum()


def test_forward_and_backward_regions_match_eager(compiles):
    x = torch.randn(4, 8)
    w1, w2 = torch.randn(8, 16, requires_grad=True), torch.randn(16, 3, requires_grad=True)
    jf = thunder.jit(mlp_loss, executors=["torchcompile"])
    got = jf(x, w1, w2)
    got_grads = torch.autograd.grad(got, (w1, w2))
    expected = mlp_loss(x, w1, w2)
    torch.testing.assert_close(got, expected)
    for g, e in zip(got_grads, torch.autograd.grad(expected, (w1, w2))):
        torch.testing.assert_close(g, e)
    # matmuls included: one region each way
    assert len(fusions(thunder.last_traces(jf)[-1])) == 1
    assert len(fusions(thunder.last_backward_traces(jf)[-1])) == 1
    assert len(compiles) == 2
    torch.autograd.grad(jf(x, w1, w2), (w1, w2))
    assert len(compiles) == 2


def test_explorer_reruns_compile_each_region_once_per_rerun(compiles):
    from thunder_viz.session import Session

    session = Session(thunder.jit(mlp_loss))
    x, w1, w2 = torch.randn(4, 8), torch.randn(8, 16), torch.randn(16, 3)
    session(x, w1, w2)
    session.max_repeats = 5
    for i in range(3):
        run = session.rerun(["torchcompile"])
        assert run.error is None and run.matches_eager
        assert run.repeats == 5
        # one call, the estimate and the timed calls: all run the one compiled graph
        assert thunder.cache_hits(session.jitted) == 6 and thunder.cache_misses(session.jitted) == 1
        assert len(compiles) == i + 1


@pytest.mark.slow
def test_gpt2_forward_and_backward_match_eager():
    from tests import zoo

    call = zoo.CALL_MODES["plain"](zoo.ZOO["gpt2"])
    model = zoo.build("gpt2").train()
    eager = copy.deepcopy(model)
    jm = thunder.jit(model, executors=["torchcompile"])
    got, expected = call.pick(jm(**call.kwargs)), call.pick(eager(**call.kwargs))
    torch.testing.assert_close(got, expected)
    got.sum().backward()
    expected.sum().backward()
    for (name, p), e in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, e.grad, **zoo.GRAD_TOL, msg=name)
    assert len(fusions(thunder.last_backward_traces(jm)[-1])) == 1


@pytest.mark.slow
@pytest.mark.parametrize("name", ["t5", "convnext"])
def test_every_region_compiles_forward_and_backward(compiles, name):
    # T5: make_fx records matmul's reshapes as aten.view where the traced strides allow one;
    # Inductor's layouts made one impossible ("Cannot view a tensor with shape [2, 2, 16, 4]").
    # ConvNeXt: a small convolution's direct backward kernel inside a region, which Inductor's
    # lowering rejected ("slow_conv2d: grad_weight must be contiguous"); the torch executor runs it.
    # Either region ran uncompiled, with a warning.
    import warnings

    from tests import zoo

    call = zoo.CALL_MODES["plain"](zoo.ZOO[name])
    model = zoo.build(name).train()
    eager = copy.deepcopy(model)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="torchcompile")
        jm = thunder.jit(model, executors=["torchcompile"])
        got = call.pick(jm(**call.kwargs))
        got.sum().backward()
    expected = call.pick(eager(**call.kwargs))
    expected.sum().backward()
    torch.testing.assert_close(got, expected)
    for (name, p), e in zip(model.named_parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, e.grad, **zoo.GRAD_TOL, msg=name)


@pytest.mark.parametrize(
    "update",
    [lambda x: torch.nn.functional.elu(x, inplace=True), lambda x: x.clamp_(-0.5, 0.5), lambda x: x.mul_(2.0)],
    ids=["elu_", "clamp_", "mul_"],
)
def test_an_in_place_update_of_a_tensor_that_requires_grad_runs_whole(update):
    # With a fusion executor first, the in-place op was decomposed into its out-of-place op (which
    # saved its input for torch's autograd) and copy_ (which overwrote it): the backward failed with
    # "modified by an inplace operation". Note [In-place ops stay whole].
    def fn(x):
        return update(x)

    leaf = torch.randn(5, dtype=torch.float64, requires_grad=True)
    expected_leaf = leaf.detach().clone().requires_grad_(True)
    got = thunder.jit(fn, executors=["torchcompile"])(leaf.clone())
    expected = fn(expected_leaf.clone())
    torch.testing.assert_close(got, expected)
    cotangent = torch.randn(5, dtype=torch.float64)
    (got_grad,) = torch.autograd.grad(got, leaf, cotangent)
    (expected_grad,) = torch.autograd.grad(expected, expected_leaf, cotangent)
    torch.testing.assert_close(got_grad, expected_grad)
