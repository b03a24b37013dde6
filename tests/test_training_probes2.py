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
