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


def _hidden_and_logits(x, w):
    h = x * 2
    return h, (h.sin() @ w), (x * 3)  # the logits are computed from h; x * 3 from nothing returned


def _hooked_backward(fn, x, w, position, loss_of):
    outs = fn(x, w)
    seen = []
    outs[position].register_hook(lambda g: seen.append(g.clone()))
    outs[position].retain_grad()
    loss_of(outs).backward()
    return seen, outs[position].grad, x.grad


@pytest.mark.parametrize(
    "position, loss_of",
    [(1, lambda o: o[1].sum()), (2, lambda o: sum(t.sum() for t in o)), (0, lambda o: o[0].sum())],
    ids=["logits", "unconnected", "only-its-own-gradient"],
)
def test_hooks_on_returned_tensors_see_eagers_gradient(position, loss_of):
    torch.manual_seed(0)
    x, w = torch.randn(3, 4), torch.randn(4, 2)
    got = _hooked_backward(thunder.jit(_hidden_and_logits), x.requires_grad_(), w, position, loss_of)
    expected = _hooked_backward(_hidden_and_logits, x.detach().requires_grad_(), w, position, loss_of)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("hook", ["register_hook", "retain_grad"])
def test_a_hook_on_a_returned_tensor_that_other_returned_tensors_are_computed_from_is_refused(hook):
    # Note [Outputs that feed other outputs]: the hook would see only the gradient from outside (eager: the sum)
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2)
    h, logits, _ = thunder.jit(_hidden_and_logits)(x, w)
    if hook == "register_hook":
        h.register_hook(lambda g: g)
    else:
        h.retain_grad()
    with pytest.raises(
        RuntimeError,
        match=r"returned tensor #0 .* has a hook or retain_grad\(\), and its returned tensor\(s\) #1 are computed from it",
    ):
        (h.sum() + logits.sum()).backward()
