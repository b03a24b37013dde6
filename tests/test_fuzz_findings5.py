"""Regression tests of the silent wrong results that the fifth round of the randomized tester found (``tests/fuzz``,
the ``models`` family: module-level code as users write it in models). Each checks ``thunder.jit`` against eager."""

import math

import pytest
import torch

import thunder


def _grad(fn, param, *args):
    param.grad = None
    fn(*args).sum().backward()
    return param.grad.clone()


@pytest.mark.parametrize(
    "op",
    [lambda x, w: x * w, lambda x, w: w * x, lambda x, w: x / w, lambda x, w: torch.where(x < 0, w, x) * x],
    ids=["mul", "rmul", "div", "where"],
)
def test_gradient_of_a_low_precision_parameter_broadcast_against_a_wider_activation_is_rounded_once(op):
    # A bfloat16 scalar parameter times a float64 vector: eager sums the gradient in float64 and rounds it once; the
    # decomposition broadcast the parameter before converting it, so its gradient was rounded elementwise to bfloat16
    # and summed there (a few last bits off)
    w = torch.nn.Parameter(torch.tensor(-1.0, dtype=torch.bfloat16))
    x = torch.randn(3, dtype=torch.float64, generator=torch.Generator().manual_seed(22)) * 5

    def f(x):
        return op(x, w)

    torch.testing.assert_close(_grad(thunder.jit(f), w, x), _grad(f, w, x), rtol=0, atol=0)


def _unused_output_reciprocal(x, w):
    return x * w, 1 / (x * 0.0)


def _unused_output_log_of_masked_softmax(x, w):
    h = x @ w
    p = torch.softmax(h.masked_fill(h > 0, float("-inf")), -1)
    return (h**2).mean(), p.log()


def _three_outputs(x, w):
    y = (x * w).sin()
    return y, (y * 0).reciprocal(), y.cos()


def _split_then_log(x, w):
    a, b = (x * w).split(2, dim=0)
    return a.exp(), b.log()


def _gradients(fn, which, x, w):
    x, w = x.clone().requires_grad_(), w.clone().requires_grad_()
    for _ in range(2):  # the second call runs the cached entry and the backward made for the first
        x.grad = w.grad = None
        out = fn(x, w)
        sum(out[i].sum() for i in which).backward()
    return x.grad, w.grad


@pytest.mark.parametrize(
    "program, which, x, w",
    [
        (_unused_output_reciprocal, (0,), torch.tensor([0.5, -2.0]), torch.tensor([3.0, 4.0])),
        (_unused_output_log_of_masked_softmax, (0,), torch.randn(3, 4), torch.randn(4, 5)),
        (_three_outputs, (0,), torch.randn(3), torch.randn(3)),
        (_three_outputs, (0, 2), torch.randn(3), torch.randn(3)),
        (_three_outputs, (2,), torch.randn(3), torch.randn(3)),
        (_split_then_log, (0,), torch.tensor([[1.0, 2, 3]] * 2 + [[0.0, 1, 2]] * 2), torch.ones(4, 3)),
    ],
    ids=["reciprocal", "masked-log-softmax", "three-first", "three-first-last", "three-last", "split"],
)
def test_an_output_without_a_gradient_adds_nothing_to_the_gradients(program, which, x, w):
    # Found by this round (left alone by its helper): the cotangent of an output the loss does not use was zeros in
    # the backward, and zeros times the infinite derivative of that output's ops is NaN, where eager's engine never
    # runs them (Note [Backward without the cotangents that are absent]). At a split's backward the left-out part is
    # zeros, as the engine gives it.
    expected = _gradients(program, which, x, w)
    got = _gradients(thunder.jit(program), which, x, w)
    assert all(torch.isfinite(g).all() for g in expected)
    torch.testing.assert_close(got, expected)


def test_a_backward_for_each_set_of_outputs_without_a_gradient():
    # The backward made for one set of absent cotangents is kept for it, and another set gets its own
    x, w = torch.randn(3), torch.randn(3)
    jitted = thunder.jit(_three_outputs)
    for which in ((0,), (0, 2), (2,), (0,)):
        torch.testing.assert_close(_gradients(jitted, which, x, w), _gradients(_three_outputs, which, x, w))
    assert thunder.cache_misses(jitted) == 1
    # the entry's last backward trace is the one made for the last set (the explorer shows it, a profile ranges it)
    traces = thunder.last_backward_traces(jitted)
    made = [t.provenance.pass_name == "Backward without absent cotangents" for t in traces]
    assert made[-3:] == [True] * 3 and not any(made[:-3])  # one per set: (0,), (0, 2), (2,)

    def ops(trace):  # a fusion counts its ops
        return sum(max(1, len(b.subsymbols)) for b in trace.bound_symbols)

    assert ops(traces[-1]) < ops(traces[-4])  # the last set's, (2,), leaves out the ops of the first two outputs


@pytest.mark.parametrize("cache", ["symbolic values", "constant values"])
@pytest.mark.parametrize("items", [lambda a: [a, 0.1], lambda a: (v for v in (a, 0.1))], ids=["list", "generator"])
def test_fsum_of_a_symbolic_float_reads_each_calls_value(cache, items):
    # Found by the 3.12/3.13 round's campaign: math.fsum reads a float's double natively, and a symbolic float is a
    # float, so every later call returned the first call's sum
    def f(x, a):
        return x * math.fsum(items(a))

    jitted = thunder.jit(f, cache=cache)
    for a in (1.0, 2.0, 3.0):
        torch.testing.assert_close(jitted(torch.ones(1), a), f(torch.ones(1), a))
