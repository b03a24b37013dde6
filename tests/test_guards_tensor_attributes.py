"""Attributes an input tensor has of its own (``t.scale = 2.0``, set before the call): the program reads what eager
reads, through ``t.name``, ``getattr`` and ``hasattr``, and the prologue checks it, so a later change retraces. Before,
the traced value had no such attribute: ``getattr(x, "scale", 1.0)`` gave 1.0 where eager gave 2.0 (a silent wrong
result on the first call) and ``x.scale`` raised."""

from __future__ import annotations

import pytest
import torch

import thunder


def _same(jf, f, *args):
    expected, got = f(*args), jf(*args)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def scaled(x):
    return x * getattr(x, "scale", 1.0)


def flagged(x):
    return x + 1 if hasattr(x, "flag") else x - 1


def direct(x):
    return x * x.scale


def test_getattr_reads_the_tensors_own_attribute_and_a_change_retraces():
    jf, a = thunder.jit(scaled), torch.ones(2)
    a.scale = 2.0
    _same(jf, scaled, a)
    a.scale = 4.0
    _same(jf, scaled, a)
    del a.scale
    _same(jf, scaled, a)
    assert thunder.cache_misses(jf) == 3
    _same(jf, scaled, a)
    assert thunder.cache_misses(jf) == 3


def test_an_attribute_set_after_tracing_retraces():
    jf, a = thunder.jit(flagged), torch.ones(2)
    _same(jf, flagged, a)
    a.flag = True
    _same(jf, flagged, a)
    assert thunder.cache_misses(jf) == 2


def test_reading_the_attribute_directly_and_its_absence():
    jf, a = thunder.jit(direct), torch.ones(2)
    a.scale = 3.0
    _same(jf, direct, a)
    del a.scale
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'scale'"):
        direct(a)
    with pytest.raises(AttributeError, match="'Tensor' object has no attribute 'scale'"):
        jf(a)


def test_a_parameters_attribute_read_through_a_module():
    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(2))
            self.weight.gain = 2.0

        def forward(self, x):
            return x * self.weight * self.weight.gain

    m = Scaled()
    jm = thunder.jit(m)
    x = torch.randn(2)
    torch.testing.assert_close(jm(x), m(x))
    m.weight.gain = 5.0
    torch.testing.assert_close(jm(x), m(x))


def test_a_tensor_held_as_an_attribute_is_an_input():
    def masked(x):
        return x * x.mask

    jf, a = thunder.jit(masked), torch.ones(3)
    a.mask = torch.tensor([1.0, 0.0, 1.0])
    _same(jf, masked, a)
    a.mask[1] = 7.0  # in place: the same tensor, read on every call
    _same(jf, masked, a)
    assert thunder.cache_misses(jf) == 1


def test_an_intermediate_has_no_attributes_of_its_own():
    def f(x):
        y = x * 2
        return y + getattr(y, "scale", 10.0)

    a = torch.ones(2)
    a.scale = 3.0  # the input's, not the intermediate's
    _same(thunder.jit(f), f, a)
