"""sharp_edges: what the trace cannot capture is reported as promised."""

from __future__ import annotations

import random
import time

import pytest
import torch

import thunder
from thunder.core.errors import SharpEdgeError

MUTABLE_GLOBAL = 3.0
CALLS: list = []


def reads_global(x):
    return x * MUTABLE_GLOBAL


def calls_random(x):
    return x * random.random()


def calls_time(x):
    return x + time.time()


def appends_to_global(x):
    CALLS.append(1)
    return x + 1


class Holder:
    value = 1.0


holder = Holder()


def sets_attribute(x, obj):
    obj.value = 2.0
    return x * 2


@pytest.mark.parametrize("fn", [reads_global, calls_random, calls_time, appends_to_global], ids=lambda f: f.__name__)
def test_error_mode_raises(fn):
    jf = thunder.jit(fn, sharp_edges="error")
    with pytest.raises(SharpEdgeError, match="sharp_edges='allow'"):
        jf(torch.randn(3))


@pytest.mark.parametrize("fn", [reads_global, calls_random, calls_time, appends_to_global], ids=lambda f: f.__name__)
def test_warn_mode_warns_and_runs(fn):
    jf = thunder.jit(fn, sharp_edges="warn")
    with pytest.warns(UserWarning):
        out = jf(torch.randn(3))
    assert out.shape == (3,)


def test_error_names_the_source_line():
    jf = thunder.jit(reads_global, sharp_edges="error")
    with pytest.raises(SharpEdgeError, match=r"MUTABLE_GLOBAL.*test_sharp_edges.py:\d+"):
        jf(torch.randn(3))


def test_mutating_an_input_object_is_caught():
    jf = thunder.jit(sets_attribute, sharp_edges="error")
    with pytest.raises(SharpEdgeError, match="Setting attribute 'value'"):
        jf(torch.randn(3), Holder())


def test_allow_is_the_default_and_silent(recwarn):
    jf = thunder.jit(reads_global)
    torch.testing.assert_close(jf(torch.randn(3) * 0), torch.zeros(3))
    assert not [w for w in recwarn if "global" in str(w.message)]


def test_pure_function_is_fine_under_error():
    def pure(x, y):
        return torch.sin(x) * y

    jf = thunder.jit(pure, sharp_edges="error")
    x, y = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(jf(x, y), pure(x, y))


def test_bad_sharp_edges_option():
    with pytest.raises(ValueError, match="unknown sharp_edges option"):
        thunder.jit(reads_global, sharp_edges="sometimes")


def test_library_internals_are_not_reported():
    def call_module(m, x):
        return m(x)

    jf = thunder.jit(call_module, sharp_edges="error")
    m = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    torch.testing.assert_close(jf(m, x), m(x))
