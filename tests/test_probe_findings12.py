"""Programs written as ML engineers write them (training loops with learning-rate schedulers, clipping, GradScaler
and weight averaging; parametrizations, functional calls, gradient penalties; collation, bucketing, unique and
scatter reductions, distributions; packed RNNs, attention with masks of every dtype, transformer encoders, einsum,
FFT filters), where the jitted call differed from eager: a property of a module assigned in the program (a
parametrized weight set to a new value runs its ``right_inverse``; a model's own ``@x.setter``) ran its setter
natively on the traced value, so the call fell back to eager; ``Tensor.set_`` of an input by a tensor of its shape
(how ``nn.utils.parametrize`` stores the new value) was refused; ``torch.vmap`` of a matmul or a reduction was
refused (no batching rule). Each runs the program eagerly and jitted on several
calls and compares values, what the program left behind, and the cache."""

import copy
import warnings

import pytest
import torch
import torch.nn as nn
import torch.nn.utils.parametrize as parametrize

import thunder


class _Positive(nn.Module):
    """A weight kept positive: ``exp`` of the stored parameter; assigning a weight stores its ``log``."""

    def forward(self, x):
        return x.exp()

    def right_inverse(self, y):
        return y.log()


def _set_weight_then_apply(model, x, new_weight):
    model.weight = new_weight  # runs the parametrization's right_inverse into parametrizations.weight.original
    return model(x)


def _positive(linear):
    return parametrize.register_parametrization(linear, "weight", _Positive())


def _orthogonal_matrix(a):
    return torch.linalg.qr(a)[0]


@pytest.mark.parametrize(
    "parametrized, weight_of",
    [(_positive, torch.abs), (nn.utils.parametrizations.orthogonal, _orthogonal_matrix)],
    ids=["positive", "orthogonal"],
)
def test_a_parametrized_weight_assigned_in_the_program_is_traced(parametrized, weight_of):
    # The setter ran natively on the traced value, and its ``isinstance(value, Tensor)`` refused it: every call ran
    # eagerly, with a warning asking for a report (the orthogonal one stores a value laid out as its transpose).
    torch.manual_seed(0)
    eager = parametrized(nn.Linear(3, 3))
    traced = copy.deepcopy(eager)
    jitted = thunder.jit(_set_weight_then_apply)
    for i in range(3):
        x, new_weight = torch.randn(2, 3), weight_of(torch.randn(3, 3) + i)
        expected = _set_weight_then_apply(eager, x, new_weight)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = jitted(traced, x, new_weight)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(traced.parametrizations.weight.original, eager.parametrizations.weight.original)
    assert thunder.cache_hits(jitted) == 2


class _Scaled(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale_", torch.ones(3))
        self.sets = 0

    @property
    def scale(self):
        return self.scale_

    @scale.setter
    def scale(self, value):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"scale must be a tensor, got {type(value).__name__}")
        self.sets += 1
        with torch.no_grad():
            self.scale_.copy_(value)

    def forward(self, x):
        self.scale = x.abs().amax(0)
        return x / self.scale


def test_a_property_setter_of_a_module_runs_traced_with_its_effects():
    eager = _Scaled()
    traced = copy.deepcopy(eager)
    jitted = thunder.jit(traced)
    for _ in range(3):
        x = torch.randn(4, 3)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            got = jitted(x)
        torch.testing.assert_close(got, eager(x))
        torch.testing.assert_close(traced.scale_, eager.scale_)
        assert traced.sets == eager.sets  # (the count the program reads changes: each call compiles, as documented)


def _set_under_no_grad(p, v):
    with torch.no_grad():
        p.set_(v * 2)
    return p + 1


def test_set_of_an_input_by_a_tensor_of_its_shape_writes_its_values():
    jitted = thunder.jit(_set_under_no_grad)
    for _ in range(3):
        p = torch.randn(2, 3, requires_grad=True)
        p_jitted, v = p.detach().clone().requires_grad_(), torch.randn(3, 2).t()  # (its strides: p's transposed)
        torch.testing.assert_close(jitted(p_jitted, v), _set_under_no_grad(p, v))
        torch.testing.assert_close(p_jitted, p)
    assert thunder.cache_hits(jitted) == 2
    with pytest.raises(thunder.core.errors.UnsupportedOpError, match="Tensor.set_"):
        jitted(torch.zeros(2, 3), torch.randn(3, 3))  # another shape: the input cannot change its own


def _per_example_scores(w, xs, ys):
    """A per-example loss under ``torch.vmap``: a matmul of each example, reductions of it, a batched dot product."""
    def score(x, y):
        h = (x @ w).sin()
        return (h - y).pow(2).mean() + h.var(0).sum() + h.amax() - (y @ y) * 1e-2

    return torch.vmap(score)(xs, ys)


def test_vmap_of_a_matmul_and_reductions_is_eagers():
    # Refused as "thunder has no batching rule" for matmul and for each reduction.
    jitted = thunder.jit(_per_example_scores)
    for _ in range(3):
        w = torch.randn(4, 3, requires_grad=True)
        xs, ys = torch.randn(6, 5, 4), torch.randn(6, 3)
        w_jitted = w.detach().clone().requires_grad_()
        expected, got = _per_example_scores(w, xs, ys), jitted(w_jitted, xs, ys)
        torch.testing.assert_close(got, expected)
        expected.sum().backward()
        got.sum().backward()
        torch.testing.assert_close(w_jitted.grad, w.grad)
    assert thunder.cache_hits(jitted) == 2
