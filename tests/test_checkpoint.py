"""``torch.utils.checkpoint`` in jitted programs, against eager: eager runs a checkpointed region again in the
backward, so what the region does besides computing (BatchNorm's running statistics, a list it appends to)
happens twice a step (Note [What a recomputed region does again] in thunder.core.transforms.autodiff)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

import thunder
from thunder.core.errors import ThunderRuntimeError
from thunder.core.symbol import IN_PLACE

LOG: list = []


class _ConvBlock(torch.nn.Module):
    def __init__(self, reentrant: bool, momentum: float | None = 0.1):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4, momentum=momentum)
        self.reentrant = reentrant

    def region(self, x):
        LOG.append("region")
        return torch.relu(self.bn(self.conv(x)))

    def forward(self, x):
        return checkpoint(self.region, x, use_reentrant=self.reentrant).mean()


class _SharedNorm(torch.nn.Module):
    """One BatchNorm in two regions: the backward updates its statistics in eager's order (the second region first)."""

    def __init__(self):
        super().__init__()
        self.lin, self.bn = torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)

    def forward(self, x):
        h = checkpoint(lambda t: self.bn(self.lin(t)).tanh(), x, use_reentrant=False)
        return checkpoint(lambda t: self.bn(t * 3).sin(), h, use_reentrant=False).sum()


class _BasicBlock(torch.nn.Module):
    """torchvision's ResNet block: in-place ReLU and residual add inside the region."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = torch.nn.Conv2d(3, 3, 3, padding=1, bias=False), torch.nn.BatchNorm2d(3)
        self.conv2, self.bn2 = torch.nn.Conv2d(3, 3, 3, padding=1, bias=False), torch.nn.BatchNorm2d(3)
        self.relu = torch.nn.ReLU(inplace=True)

    def block(self, x):
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        out += x
        return self.relu(out)

    def forward(self, x):
        return checkpoint(self.block, checkpoint(self.block, x, use_reentrant=False), use_reentrant=False).mean()


class _Sequential(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layers = [torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU()]
        self.seq = torch.nn.Sequential(*layers, torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.BatchNorm2d(4))
        self.reentrant = False

    def forward(self, x):
        return checkpoint_sequential(self.seq, 2, x, use_reentrant=False).mean()


def _train_side_by_side(model: torch.nn.Module, shape, steps: int = 3, calls: int = 1):
    """Trains ``model`` and a jitted copy alike (SGD with momentum) and checks, step by step, that buffers,
    parameters and what the program appended to ``LOG`` are eager's; returns the jitted module."""
    mine = copy.deepcopy(model)
    jitted = thunder.jit(mine)
    optimizers = [torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9) for m in (model, mine)]
    for step in range(steps):
        # without reentrant checkpointing, a region is recomputed also when only the parameters need gradients
        x = torch.randn(*shape, dtype=torch.float64, requires_grad=step % 2 == 0 or getattr(model, "reentrant", False))
        logs = []
        for m, optimizer in zip((model, jitted), optimizers):
            LOG.clear()
            torch.manual_seed(step)  # dropout draws eager's numbers
            optimizer.zero_grad()
            sum(m(x * (i + 1)).sum() for i in range(calls)).backward()
            optimizer.step()
            logs.append(list(LOG))
        assert logs[1] == logs[0]
        torch.testing.assert_close(dict(mine.named_buffers()), dict(model.named_buffers()))
        torch.testing.assert_close(dict(mine.named_parameters()), dict(model.named_parameters()))
    assert thunder.compile_stats(jitted).last_autograd_fallback is None
    return jitted


@pytest.mark.parametrize("reentrant", [False, True], ids=["non-reentrant", "reentrant"])
@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative average"])
def test_a_checkpointed_batch_norm_updates_its_statistics_again_in_the_backward(reentrant, momentum):
    torch.manual_seed(0)
    model = _ConvBlock(reentrant, momentum).double()
    _train_side_by_side(model, (2, 3, 5, 5))
    assert int(model.bn.num_batches_tracked) == 6
    assert LOG == ["region", "region"]  # the append replayed in the backward too


@pytest.mark.parametrize("model", [_SharedNorm, _BasicBlock, _Sequential], ids=["shared", "resnet block", "sequential"])
def test_checkpointed_regions_update_buffers_as_in_eager(model):
    torch.manual_seed(0)
    shape = (6, 4) if model is _SharedNorm else (2, 3, 5, 5)
    _train_side_by_side(model().double(), shape)


def test_two_calls_before_one_backward_update_the_statistics_as_in_eager():
    # The backward takes the statistics as they are when it runs (the second call changed them since the first),
    # as eager's recomputation reads them; it is not refused as a saved tensor changed in place.
    torch.manual_seed(0)
    _train_side_by_side(_ConvBlock(False).double(), (2, 3, 5, 5), calls=2)


def test_an_in_place_update_in_a_recomputed_region_is_recomputed():
    # The backward recomputed ``m`` without its ``add_``: x's gradient was 2 * x where eager's is 2 * x + 1.
    def region(x):
        m = x.detach() * 2
        m.add_(1)
        return x * m

    def f(x):
        return checkpoint(region, x, use_reentrant=False).sum()

    x = torch.randn(3, requires_grad=True)
    y = x.detach().clone().requires_grad_()
    thunder.jit(f)(x).backward()
    f(y).backward()
    torch.testing.assert_close(x.grad, y.grad)


def test_a_region_that_only_computes_is_recomputed_as_before():
    # Nothing to do again: the backward recomputes only what the gradient needs, and writes nothing.
    lin, norm = torch.nn.Linear(4, 4), torch.nn.LayerNorm(4)
    jitted = thunder.jit(lambda x: checkpoint(lambda t: norm(lin(t)).relu(), x, use_reentrant=False).sum())
    jitted(torch.randn(6, 4, requires_grad=True)).backward()
    backward = thunder.last_backward_traces(jitted)[-1]
    assert not any(IN_PLACE in b.sym.tags for b in backward.bound_symbols)


class _Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin, self.calls = torch.nn.Linear(3, 3), 0

    def region(self, x):
        self.calls += 1
        return self.lin(x)

    def forward(self, x):
        return checkpoint(self.region, x, use_reentrant=False).sum()


class _DropoutNorm(torch.nn.Module):
    """Random draws in the region: its forward is kept, and only what it does again runs in the backward."""

    def __init__(self, momentum: float | None = 0.1):
        super().__init__()
        self.conv, self.bn = torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4, momentum=momentum)

    def region(self, t):
        LOG.append("region")
        h = self.bn(torch.nn.functional.dropout(self.conv(t), 0.3)).relu_()
        return torch.nn.functional.dropout(h, 0.2)

    def forward(self, x):
        return checkpoint(self.region, x, use_reentrant=False).mean()


@pytest.mark.parametrize("momentum", [0.1, None], ids=["momentum", "cumulative average"])
def test_a_region_that_draws_random_numbers_updates_its_statistics_again(momentum):
    torch.manual_seed(0)
    model = _DropoutNorm(momentum).double()
    _train_side_by_side(model, (2, 3, 5, 5))
    assert int(model.bn.num_batches_tracked) == 6 and LOG == ["region", "region"]


class _UnderTorchAutograd(torch.nn.Module):
    """An in-place update through a view of a value that requires grad: the program runs under torch's autograd."""

    def __init__(self):
        super().__init__()
        self.lin, self.bn = torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)

    def region(self, x):
        h = self.lin(x)
        h.view(-1).add_(1)
        return self.bn(h)

    def forward(self, x):
        return checkpoint(self.region, x, use_reentrant=False).sum()


@pytest.mark.parametrize(
    "model, said",
    [(_Counting, "store_attr"), (_UnderTorchAutograd, "torch's autograd")],
    ids=["store", "torch autograd"],
)
def test_what_a_region_cannot_do_again_is_refused_at_trace_time(model, said):
    # eager's second run does it again (``calls`` goes up by 2 a step); once here would be a silent difference.
    with pytest.raises(ThunderRuntimeError, match="checkpointed region") as info:
        thunder.jit(model())(torch.randn(4, 3))
    assert said in str(info.value)


def test_timm_grad_checkpointing_trains_as_eager():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model("resnet18", pretrained=False, num_classes=3).double()
    model.set_grad_checkpointing(True)
    _train_side_by_side(model, (2, 3, 32, 32), steps=2)


class _Segments(torch.nn.Module):
    def __init__(self, body: torch.nn.Sequential):
        super().__init__()
        self.body = body

    def forward(self, x):
        return checkpoint_sequential(self.body, 3, x, use_reentrant=False)


def test_torchvision_resnet_under_checkpoint_sequential_trains_as_eager():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    net = torchvision.models.resnet18(num_classes=3)
    model = _Segments(torch.nn.Sequential(*list(net.children())[:-1], torch.nn.Flatten(), net.fc))
    # (batches of 8: with 2, layer4's 1x1 BatchNorm divides by tiny variances and float64 rounding grows)
    _train_side_by_side(model.double(), (8, 3, 64, 64), steps=2)
