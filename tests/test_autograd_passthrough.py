"""Results are connected to torch autograd (through thunder's backward, or torch's own where the
split falls back); ``disable_torch_autograd`` disconnects them. See also ``test_autograd.py``."""

from __future__ import annotations

import pytest
import torch

import thunder


def f(a, b):
    return (torch.sin(a) * b + a).sum()


def test_backward_matches_eager():
    a = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(3, 4, requires_grad=True)
    ae, be = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    thunder.jit(f)(a, b).backward()
    f(ae, be).backward()
    torch.testing.assert_close(a.grad, ae.grad)
    torch.testing.assert_close(b.grad, be.grad)


def test_disable_torch_autograd():
    a = torch.randn(3, requires_grad=True)
    jf = thunder.jit(f, disable_torch_autograd=True)
    out = jf(a, torch.randn(3))
    assert not out.requires_grad
    assert "@torch.no_grad()" in str(thunder.last_traces(jf)[-1])


def test_no_grad_block_inside_the_function_matches_eager():
    def g(x):
        with torch.no_grad():
            y = x * 2  # not connected to autograd
        return (y + x).sum()

    x = torch.randn(3, requires_grad=True)
    xe = x.detach().clone().requires_grad_()
    jg = thunder.jit(g)
    jg(x).backward()
    g(xe).backward()
    torch.testing.assert_close(x.grad, xe.grad)  # ones, not threes
    assert torch.is_grad_enabled()
    with torch.no_grad():  # the recorded switches assumed grad was on: a different mode recompiles
        assert not jg(x).requires_grad
    assert thunder.cache_misses(jg) == 2


def test_failure_inside_no_grad_restores_grad_mode():
    def g(x):
        with torch.no_grad():
            return x @ torch.ones(5)  # shapes do not match

    with pytest.raises(ValueError):
        thunder.jit(g)(torch.randn(3, 4))
    assert torch.is_grad_enabled()
