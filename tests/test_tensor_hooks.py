"""``Tensor.register_hook`` inside a jitted function (Note [Tensor hooks in the program] in
thunder.core.side_effects): each call registers the hook on its own tensor and torch's autograd runs it where
eager's would, so gradients, what the hooks see and what they do are eager's, call after call."""

from __future__ import annotations

import pytest
import torch

import thunder


class _Holder:
    pass


def _store_closure(h):
    def f(x):
        grads = {}
        y = x * 2
        y.register_hook(lambda g: grads.__setitem__("y", g.clone()))
        grads["x"] = x.detach() * 5  # filled after the registration: the hook holds the dict as it ends
        h.grads = grads  # one object with the hook's
        return y.sin()

    return f


def _changing_factor(x, k):
    y = x * 2
    y.register_hook(lambda g: g * k)
    return y.sin()


def _intermediate_in_closure(x):
    y = x * 2
    s = x.detach().sum()
    y.register_hook(lambda g: g * s)
    return y.sin()


def _two_hooks_and_uses(x):
    y = x * 3
    y.register_hook(lambda g: g + 1)
    y.register_hook(lambda g: g * 2)  # sees the first one's result: eager's order
    return y * y, y.exp()


def _removed(x):
    y = x * 2
    handle = y.register_hook(lambda g: g * 100)
    handle.remove()
    with y.register_hook(lambda g: g * 1000):
        pass
    return y.sin()


def _hooked_output(x):
    y = x * 3
    y.register_hook(lambda g: g + 1)
    return y


PROGRAMS = {
    "closure over a dict the program stores": lambda h: (_store_closure(h), lambda i: (torch.full((2,), float(i), requires_grad=True),)),
    "closure over an int that changes": lambda h: (_changing_factor, lambda i: (torch.ones(2, requires_grad=True), i + 2)),
    "closure over an intermediate": lambda h: (_intermediate_in_closure, lambda i: (torch.full((2,), float(i + 1), requires_grad=True),)),
    "two hooks, the value used twice": lambda h: (_two_hooks_and_uses, lambda i: (torch.full((2,), float(i), requires_grad=True),)),
    "handle removed inside": lambda h: (_removed, lambda i: (torch.full((2,), float(i), requires_grad=True),)),
    "hook on the returned tensor": lambda h: (_hooked_output, lambda i: (torch.full((2,), float(i), requires_grad=True),)),
}  # fmt: skip


def _run(fn, make_args, holder, calls=4):
    seen = []
    for i in range(calls):
        args = make_args(i)
        out = fn(*args)
        outs = out if isinstance(out, tuple) else (out,)
        sum(o.sum() for o in outs).backward()
        grads = getattr(holder, "grads", None)
        seen.append(([o.detach() for o in outs], [a.grad for a in args if isinstance(a, torch.Tensor)], grads))
    return seen


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_a_hook_registered_in_the_program_runs_as_eager_s(name):
    eager_holder, thunder_holder = _Holder(), _Holder()
    fn, make_args = PROGRAMS[name](eager_holder)
    expected = _run(fn, make_args, eager_holder)
    jfn, _ = PROGRAMS[name](thunder_holder)
    jitted = thunder.jit(jfn)
    got = _run(jitted, make_args, thunder_holder)
    torch.testing.assert_close(got, expected)
    assert thunder.cache_misses(jitted) <= 2


def test_a_hook_on_an_input_is_added_by_every_call_as_in_eager():
    def f(x, seen):
        x.register_hook(lambda g: seen.append(1) or g * 2)
        return x.sin()

    results = []
    for fn in (f, thunder.jit(f)):
        x, seen = torch.ones(2, requires_grad=True), []
        for _ in range(3):
            fn(x, seen).sum().backward()
        results.append((x.grad, len(seen)))
    torch.testing.assert_close(results[1], results[0])
    assert results[0][1] == 6  # 1 + 2 + 3 hooks ran


def test_a_module_forward_hook_that_hooks_its_output():
    """The pattern of attribution libraries: a forward hook registers a tensor hook on the module's output."""
    torch.manual_seed(0)
    models = [torch.nn.Linear(3, 3) for _ in range(2)]
    models[1].load_state_dict(models[0].state_dict())

    def hook_output(mod, inp, out):
        out.register_hook(lambda g: setattr(mod, "backprops", g.clone()))

    for m in models:
        m.register_forward_hook(hook_output)
    runs = []
    for m, call in zip(models, (models[0], thunder.jit(models[1]))):
        seen = []
        for i in range(3):
            call(torch.full((2, 3), float(i), requires_grad=True)).relu().sum().backward()
            seen.append((m.backprops, m.weight.grad.clone()))
        runs.append(seen)
    torch.testing.assert_close(runs[1], runs[0])


def test_a_hook_on_a_tensor_that_needs_no_grad_is_eager_s_error():
    def f(x):
        y = x * 2
        y.register_hook(lambda g: g)
        return y

    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        f(torch.ones(2))
    with pytest.raises(RuntimeError, match="cannot register a hook on a tensor that doesn't require gradient"):
        thunder.jit(f)(torch.ones(2))


def test_the_handle_cannot_be_removed_outside():
    def f(x):
        y = x * 2
        return y.sin(), y.register_hook(lambda g: g)

    with pytest.raises(thunder.core.errors.ThunderRuntimeError, match="cannot be removed from outside"):
        thunder.jit(f)(torch.ones(2, requires_grad=True))[1].remove()


def test_retain_grad_of_a_tensor_the_program_computes_and_returns_or_stores():
    holder = {}

    def f(x):
        y = x * 2
        y.retain_grad()
        z = y.sin()
        z.retain_grad()
        holder["z"] = z
        return y, (y * y).sum() + z.sum()

    runs = []
    for fn in (f, thunder.jit(f)):
        grads = []
        for i in range(3):
            x = torch.full((2,), float(i), requires_grad=True)
            y, loss = fn(x)
            loss.backward()
            grads.append((y.grad, holder["z"].grad, x.grad))
        runs.append(grads)
    torch.testing.assert_close(runs[1], runs[0])
    assert runs[0][0][0] is not None
