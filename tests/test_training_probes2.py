"""Training programs written as users write them, run under ``thunder.jit`` and eagerly side by side: losses,
gradients, parameters, optimizer state, buffers and Python side effects are eager's step by step."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

import thunder


class _ReentrantRegion(torch.nn.Module):
    """A region that draws nothing and keeps statistics, checkpointed with eager's reentrant variant."""

    def __init__(self, use_reentrant: bool | None):
        super().__init__()
        self.a, self.bn, self.b = torch.nn.Linear(8, 16), torch.nn.BatchNorm1d(16), torch.nn.Linear(16, 4)
        self.use_reentrant = use_reentrant
        self.calls = []

    def region(self, x):
        self.calls.append("region")
        return torch.relu(self.bn(self.a(x)))

    def forward(self, x):
        kwargs = {} if self.use_reentrant is None else {"use_reentrant": self.use_reentrant}
        return self.b(checkpoint(self.region, x, **kwargs))


@pytest.mark.parametrize("use_reentrant", [True, None], ids=["reentrant", "default"])
@pytest.mark.parametrize("input_requires_grad", [False, True], ids=["input without grad", "input with grad"])
def test_reentrant_checkpoint_without_an_input_that_requires_grad_gives_no_gradients_as_eager(
    use_reentrant, input_requires_grad
):
    # Eager's reentrant checkpoint runs the region under no_grad: with no argument that requires grad, the region's
    # parameters get no gradient (None: an optimizer skips them) and it never runs again. thunder differentiated it
    # and trained its parameters, and ran it (and its BatchNorm update) again in the backward.
    torch.manual_seed(0)
    model = _ReentrantRegion(use_reentrant)
    eager = copy.deepcopy(model)
    jitted = thunder.jit(model)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=0.01) for m in (model, eager)]
    for _ in range(3):
        x, target = torch.randn(6, 8, requires_grad=input_requires_grad), torch.randn(6, 4)
        caught = []
        for m, opt in zip((jitted, eager), optimizers):
            opt.zero_grad()
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                loss = F.mse_loss(m(x), target)
            loss.backward()
            opt.step()
            caught.append(sorted(str(x.message) for x in w))
        assert caught[0] == caught[1]
        for (name, p), e in zip(model.named_parameters(), eager.parameters()):
            assert (p.grad is None) == (e.grad is None), name
            torch.testing.assert_close(p, e, msg=name)
        torch.testing.assert_close(dict(model.named_buffers()), dict(eager.named_buffers()))
        assert model.calls == eager.calls


def test_reentrant_checkpoint_refuses_keyword_arguments_as_eager():
    def f(x):
        return checkpoint(lambda t, *, scale: t * scale, x, scale=2.0, use_reentrant=True)

    x = torch.randn(3, requires_grad=True)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        f(x)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        thunder.jit(f)(x)


def _sums(grads) -> list:
    return [None if g is None else round(g.sum().item(), 4) for g in grads]


def _hook(log: list, name: str, scale: float | None = None):
    """A full backward hook that logs what it gets and, with ``scale``, changes the module's input gradients."""

    def hook(module, grad_input, grad_output):
        log.append((name, type(module).__name__, _sums(grad_input), _sums(grad_output)))
        if scale is not None:
            return tuple(None if g is None else g * scale for g in grad_input)

    return hook


def _pre_hook(log: list, name: str, scale: float | None = None):
    def hook(module, grad_output):
        log.append((name, type(module).__name__, _sums(grad_output)))
        if scale is not None:
            return tuple(None if g is None else g * scale for g in grad_output)

    return hook


class _Block(torch.nn.Module):
    """Tensor and non-tensor arguments; results of which one needs no gradient."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(8, 8)

    def forward(self, x, y, scale, z):
        return self.lin(x) * scale + y, (x * 2).detach(), z.sum()


class _Hooked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.first, self.block, self.shared = torch.nn.Linear(8, 8), _Block(), torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 4)

    def forward(self, x):
        a, b, c = self.block(torch.relu(self.first(x)), x * 2, 3.0, torch.ones(2))
        return self.head(self.shared(torch.tanh(self.shared(a + b)))) + c


def _register(model: _Hooked, log: list, step: int) -> None:
    if step == 0:
        model.first.register_full_backward_hook(_hook(log, "first", scale=3.0))
        model.block.register_full_backward_hook(_hook(log, "block"))
        model.block.register_full_backward_pre_hook(_pre_hook(log, "block pre", scale=0.5))
        model.shared.register_full_backward_hook(_hook(log, "shared"))  # called twice: runs twice
        model.head.register_full_backward_pre_hook(_pre_hook(log, "head pre"))
    elif step == 2:
        model.block._backward_hooks.clear()  # as handle.remove() does
        model.head.register_full_backward_hook(_hook(log, "head", scale=2.0))


@pytest.mark.parametrize("input_requires_grad", [False, True], ids=["input without grad", "input with grad"])
def test_module_backward_hooks_run_as_eagers(input_requires_grad):
    # ``register_full_backward_hook``/``register_full_backward_pre_hook`` on submodules of the jitted model were refused;
    # now eager's hooks run where, when and with what eager's do (the order of the calls and the gradients each gets),
    # a gradient a hook returns replaces eager's, and hooks added or removed between steps are seen.
    torch.manual_seed(0)
    model = _Hooked()
    eager = copy.deepcopy(model)
    jitted = thunder.jit(model)
    logs = [], []
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model, eager)]
    for step in range(4):
        x = torch.randn(3, 8)
        caught = []
        for m, raw, log, opt in zip((jitted, eager), (model, eager), logs, optimizers):
            _register(raw, log, step)
            xi = x.clone().requires_grad_(input_requires_grad)
            opt.zero_grad()
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                m(xi).pow(2).sum().backward()
            opt.step()
            log.append(("x", None if xi.grad is None else round(xi.grad.sum().item(), 4)))
            caught.append(sorted(str(x.message) for x in w))
        assert logs[0] == logs[1]
        assert caught[0] == caught[1]
        torch.testing.assert_close(dict(model.named_parameters()), dict(eager.named_parameters()))
    assert thunder.cache_misses(jitted) == 2  # the hooks changed once


def test_a_global_module_backward_hook_runs_as_eagers():
    logs = [], []
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    eager = copy.deepcopy(model)
    for m, log in zip((thunder.jit(model), eager), logs):
        handle = torch.nn.modules.module.register_module_full_backward_hook(_hook(log, "global"))
        try:
            m(torch.ones(2, 8)).sum().backward()
        finally:
            handle.remove()
    assert logs[0] == logs[1] and logs[0]
    for p, e in zip(model.parameters(), eager.parameters()):
        torch.testing.assert_close(p.grad, e.grad)


def test_torch_func_grad_over_a_jitted_module_is_a_clear_error():
    # torch's own error spoke of a ``setup_context`` staticmethod the user never wrote.
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    jitted = thunder.jit(model)
    x = torch.randn(3, 4)
    params = {name: p.detach() for name, p in model.named_parameters()}

    def loss(params, module):
        return torch.func.functional_call(module, params, (x,)).pow(2).sum()

    with pytest.raises(RuntimeError, match="not supported over a function compiled by thunder.jit.*functional_call"):
        torch.func.grad(loss)(params, jitted)
    # what the message suggests gives eager's gradients
    expected = torch.func.grad(loss)(params, model)
    given = {name: p.clone().requires_grad_() for name, p in params.items()}
    actual = torch.autograd.grad(loss(given, jitted), list(given.values()))
    torch.testing.assert_close(dict(zip(given, actual)), expected)


CALLS: list = []


class _CountingRegion(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def region(self, x):
        CALLS.append(len(CALLS))  # eager's second run, in the backward, appends 1
        return torch.tanh(self.lin(x))

    def forward(self, x):
        return checkpoint(self.region, x, use_reentrant=False).sum()


def test_a_checkpointed_region_that_changes_a_container_it_reads_is_refused():
    # The change was made once, where eager's second run makes it again with its own values: CALLS ended [0], not
    # eager's [0, 1]. An append alone (no read) is made again, as in eager (tests/test_checkpoint.py).
    CALLS.clear()
    model = _CountingRegion()
    model(torch.randn(2, 4)).backward()
    assert CALLS == [0, 1]
    with pytest.raises(thunder.core.errors.ThunderRuntimeError, match="checkpointed region .* changes an outside container"):
        thunder.jit(model)(torch.randn(2, 4))
    with torch.no_grad():  # no backward: the region runs once, in eager too
        CALLS.clear()
        thunder.jit(model)(torch.randn(2, 4))
        assert CALLS == [0]


class _RenormalisedEmbeddings(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tokens = torch.nn.Embedding(10, 8, max_norm=1.0, padding_idx=0)
        self.bags = torch.nn.EmbeddingBag(10, 8, max_norm=0.5, norm_type=1.0, mode="sum")
        self.head = torch.nn.Linear(8, 4)

    def forward(self, ids):
        return self.head(self.tokens(ids).mean(1) + self.bags(ids))


def test_embeddings_with_max_norm_train_as_eager():
    # max_norm renormalises the rows read in place, under no_grad, before the lookup: with a weight that requires grad
    # it was refused ("renormalise the weight outside the jitted function").
    torch.manual_seed(0)
    model = _RenormalisedEmbeddings()
    eager = copy.deepcopy(model)
    jitted = thunder.jit(model)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=0.1) for m in (model, eager)]
    for _ in range(3):
        ids, target = torch.randint(0, 10, (4, 5)), torch.randn(4, 4)
        losses = []
        for m, opt in zip((jitted, eager), optimizers):
            opt.zero_grad()
            losses.append(F.mse_loss(m(ids), target))
            losses[-1].backward()
            opt.step()
        torch.testing.assert_close(losses[0], losses[1])
        for (name, p), e in zip(model.named_parameters(), eager.parameters()):
            torch.testing.assert_close(p.grad, e.grad, msg=name)
            torch.testing.assert_close(p, e, msg=name)
    assert thunder.cache_misses(jitted) == 1


def _head_before_lookup(w, ids):
    logits = (w * w).sum()  # eager's autograd saves ``w``, which the lookup then renormalises in place
    return logits + F.embedding(ids, w, max_norm=1.0).sum()


def test_a_renormalised_weight_that_autograd_saved_fails_as_eager():
    ids = torch.tensor([1, 2, 2, 5])
    for fn in (_head_before_lookup, thunder.jit(_head_before_lookup)):
        w = torch.randn(10, 4, requires_grad=True)
        out = fn(w, ids)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            out.backward()
