"""Forms of Python programs that either work as in eager or fail with a message saying what to do."""

from __future__ import annotations

import functools

import pytest
import torch

import thunder
from thunder.core.errors import ThunderRuntimeError, UnsupportedOpError

X = torch.ones(3)


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_returned_shape_is_a_torch_size(cache):
    jf = thunder.jit(lambda t: (t.shape, t.size(), t.shape[1:]), cache=cache)
    for t in (torch.ones(2, 3), torch.ones(4, 5)):
        got = jf(t)
        assert [type(v) for v in got] == [torch.Size] * 3
        assert got == (t.shape, t.size(), t.shape[1:])


def test_returning_a_generator_is_a_clear_error():
    def gen(t):
        yield t + 1

    with pytest.raises(ThunderRuntimeError, match=r"returned a generator.*Return a list or tuple"):
        thunder.jit(gen)(X)
    with pytest.raises(ThunderRuntimeError, match=r"returned a generator"):
        thunder.jit(lambda t: (t * i for i in range(2)))(X)


def test_out_argument_is_a_clear_error():
    def f(t, o):
        torch.add(t, 1, out=o)
        return o

    with pytest.raises(UnsupportedOpError, match=r"out=\.\.\.\) is not supported.*out\.copy_"):
        thunder.jit(f)(X, torch.empty(3))


def scaled(t, k=1, m=2):
    return t * k + m


@pytest.mark.parametrize(
    "p, args",
    [(functools.partial(scaled, k=3), (X,)), (functools.partial(scaled, m=5), (X, 2)), (functools.partial(scaled, X), ())],
    ids=["kw", "kw-and-positional", "positional"],
)
def test_partial_with_keyword_arguments(p, args):
    torch.testing.assert_close(thunder.jit(p)(*args), p(*args))


def test_partial_keywords_are_checked():
    p = functools.partial(scaled, k=3)
    jp = thunder.jit(p)
    jp(X)
    p.keywords["k"] = 10  # a partial's keywords dict can be changed in place
    torch.testing.assert_close(jp(X), p(X))


def test_partial_of_a_torch_function():
    p = functools.partial(torch.add, alpha=2)
    torch.testing.assert_close(thunder.jit(p)(X, X), p(X, X))
