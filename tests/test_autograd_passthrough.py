"""Until thunder's own autograd transform lands, results are connected to torch autograd
through the ops the executors run; ``disable_torch_autograd`` disconnects them."""

from __future__ import annotations

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
