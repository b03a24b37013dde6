"""Multi-process programs as users write them (gloo on this machine, 2 processes), against eager torch on every rank:
torch's own DistributedDataParallel around or inside ``thunder.jit``, ``torch.distributed`` called inside a jitted
function, and ``thunder.distributed.ddp``/``fsdp`` with the situations of a training loop (unused and frozen
parameters, uneven batches, an optimizer, the cache on later steps, sharded checkpoints, lightning-thunder's options).

Every test runs its workers under a time limit (tests/distributed_harness.py): a hang fails.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import thunder
from thunder.core.errors import UnsupportedOpError

from .distributed_harness import run_workers

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")


class WithUnused(torch.nn.Module):
    """``extra`` is never used by ``forward`` (torch DDP's ``find_unused_parameters`` case)."""

    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(5, 7)
        self.fc2 = torch.nn.Linear(7, 3)
        self.extra = torch.nn.Linear(7, 3)

    def forward(self, x):
        return self.fc2(torch.tanh(self.fc1(x)))


def _batch(step: int, rank: int, rows: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(100 * step + rank)
    return torch.randn(rows, 5, generator=g), torch.randn(rows, 3, generator=g)


def _close(a, b, what: str) -> None:
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=lambda m: f"{what}: {m}")


def _step_alike(tm, ref, opts, x, y, where: str) -> None:
    """One training step of each model on ``(x, y)``: equal losses and gradients, then the optimizers step."""
    loss, ref_loss = F.mse_loss(tm(x), y), F.mse_loss(ref(x), y)
    loss.backward()
    ref_loss.backward()
    _close(loss, ref_loss, f"loss {where}")
    _close_gradients(tm, ref, where)
    for opt in opts:
        opt.step()
        opt.zero_grad()


def _close_gradients(tm, ref, where: str) -> None:
    """Each parameter's gradient equals torch DDP's (none where torch's has none, or zeros)."""
    for (name, p), q in zip(tm.named_parameters(), ref.parameters()):
        if q.grad is None:
            assert p.grad is None or not p.grad.any(), f"{name}: a gradient where torch DDP has none"
        else:
            _close(p.grad, q.grad, f"{name}.grad {where}")


# -- torch's DistributedDataParallel --------------------------------------------------------------------------


def _jit_of_torch_ddp_worker(rank, world):
    torch.manual_seed(0)
    # lightning-thunder's own test asserts this error (NotImplementedError, "DistributedDataParallel.*not supported")
    with pytest.raises(NotImplementedError, match=r"DistributedDataParallel.*not supported.*thunder.jit\(model\)"):
        thunder.jit(DistributedDataParallel(WithUnused()))

    class Outer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = DistributedDataParallel(WithUnused(), find_unused_parameters=True)

        def forward(self, x):
            return self.inner(x)

    with pytest.raises(UnsupportedOpError, match="the submodule 'inner'"):
        thunder.jit(Outer())
    from torch.distributed.fsdp import FullyShardedDataParallel

    sharded = FullyShardedDataParallel(WithUnused(), device_id=torch.device("cpu"), use_orig_params=True)
    with pytest.raises(NotImplementedError, match=r"FullyShardedDataParallel.*thunder.distributed.fsdp\("):
        thunder.jit(sharded)


def test_thunder_jit_of_torch_ddp_fails_clearly(tmp_path):
    # Before: thunder.jit(DistributedDataParallel(model)) traced DDP's forward, whose native reducer preparation ran
    # only while tracing: from the second step on each rank kept its own gradients, silently (torch DDP averages).
    # thunder.jit(FullyShardedDataParallel(model)) did not finish (its forward's native gathers ran while tracing).
    run_workers(_jit_of_torch_ddp_worker, 2, tmp_path)


class WithNorm(WithUnused):
    """A BatchNorm (buffers torch DDP broadcasts from rank 0 before each training forward) and an unused layer."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(7)

    def forward(self, x):
        return self.fc2(torch.tanh(self.norm(self.fc1(x))))


def _torch_ddp_of_jit_worker(rank, world):
    for options in ({"find_unused_parameters": True}, {"static_graph": True, "gradient_as_bucket_view": True}):
        torch.manual_seed(0)
        base = WithNorm()
        base.fc1.bias.requires_grad_(False)
        base.norm.running_mean.fill_(float(rank))  # differs between ranks: rank 0's wins in every training forward
        tm = DistributedDataParallel(thunder.jit(copy.deepcopy(base)), **options)
        ref = DistributedDataParallel(copy.deepcopy(base), **options)
        opts = [torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1) for m in (tm, ref)]
        for step in range(3):
            if step == 1:  # a micro-batch accumulated without synchronizing
                x, y = _batch(step + 10, rank)
                with tm.no_sync(), ref.no_sync():
                    F.mse_loss(tm(x), y).backward()
                    F.mse_loss(ref(x), y).backward()
            x, y = _batch(step, rank, rows=3 + 2 * rank)
            _step_alike(tm, ref, opts, x, y, f"{options}: at step {step}")
            for (name, b), c in zip(tm.named_buffers(), ref.buffers()):
                _close(b, c, f"{options}: {name} after step {step}")
        tm.eval()
        ref.eval()
        with torch.no_grad():
            _close(tm(x), ref(x), f"{options}: eval")


def test_torch_ddp_of_thunder_module_with_buffers_unused_params_and_no_sync(tmp_path):
    # the order the error above recommends: torch DDP's hooks see the compiled module's gradients
    run_workers(_torch_ddp_of_jit_worker, 2, tmp_path)


# -- torch.distributed inside the jitted function ---------------------------------------------------------------


def _untraced_calls_worker(rank, world):
    def with_barrier(x):
        dist.barrier()
        return x + 1

    def with_object(x, n):
        everyone = [None] * dist.get_world_size()
        dist.all_gather_object(everyone, n)
        return x * sum(everyone)

    def with_broadcast_object(x):
        box = [dist.get_rank()]
        dist.broadcast_object_list(box, src=0)
        return x + box[0]

    x = torch.ones(2)
    for fn, args, name in (
        (with_barrier, (x,), "barrier"),
        (with_object, (x, rank + 1), "all_gather_object"),
        (with_broadcast_object, (x,), "broadcast_object_list"),
    ):
        with pytest.raises(UnsupportedOpError, match=rf"torch.distributed.{name} inside the jitted function"):
            thunder.jit(fn)(*args)
    # what does work: rank-dependent constants and control flow, each rank its own trace
    def by_rank(x):
        if dist.get_rank() == 0:
            return x * dist.get_world_size()
        return x - 1

    jitted = thunder.jit(by_rank)
    for _ in range(2):
        _close(jitted(x), by_rank(x), f"rank {rank}'s result")
    assert thunder.cache_hits(jitted) == 1


def test_untraced_distributed_calls_inside_jit_fail_clearly(tmp_path):
    # Before: a barrier or an object collective ran natively while tracing and never again: a cached call did not
    # wait at the barrier, and the objects the other ranks sent were constants of the trace.
    run_workers(_untraced_calls_worker, 2, tmp_path)


# -- thunder.distributed in a training loop -------------------------------------------------------------------


def _ddp_training_worker(rank, world):
    """Unused and frozen parameters, a batch size that differs between ranks, SGD with momentum, cache hits."""
    from thunder.distributed import ddp

    torch.manual_seed(0)
    base = WithUnused()
    base.fc1.bias.requires_grad_(False)
    tm = ddp(thunder.jit(copy.deepcopy(base)), bucket_size_in_mb=0.0)  # lightning-thunder's keywords
    ref = DistributedDataParallel(copy.deepcopy(base), find_unused_parameters=True)
    opts = [torch.optim.SGD([p for p in m.parameters() if p.requires_grad], lr=0.1, momentum=0.9) for m in (tm, ref)]
    for step in range(3):
        x, y = _batch(step, rank, rows=3 + 2 * rank)
        _step_alike(tm, ref, opts, x, y, f"at step {step}")
        for (name, p), q in zip(tm.named_parameters(), ref.parameters()):
            _close(p, q, f"{name} after step {step}")
    assert thunder.cache_hits(tm) == 2


def test_ddp_unused_frozen_and_uneven_batches_train_like_torch_ddp(tmp_path):
    run_workers(_ddp_training_worker, 2, tmp_path)


def _fsdp_checkpoint_worker(rank, world):
    """ZeRO-3 with a frozen parameter and uneven batches against eager on the whole batch; its sharded state dict
    loads into a new sharded model; lightning-thunder's ``move_state_dict_to_cpu``."""
    from thunder.distributed import FSDPType, fsdp

    torch.manual_seed(0)
    base = WithUnused()
    base.fc1.weight.requires_grad_(False)
    tm = fsdp(thunder.jit(copy.deepcopy(base)), sharding_strategy=FSDPType.ZERO3, move_state_dict_to_cpu=True)
    eager = copy.deepcopy(base)
    opts = [torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=0.01) for m in (tm, eager)]
    rows = [3 + 2 * r for r in range(world)]
    for step in range(3):
        batches = [_batch(step, r, rows[r]) for r in range(world)]
        x, y = batches[rank]
        # each rank's share of the whole batch's mean: fsdp averages the gradients over the ranks
        (F.mse_loss(tm(x), y, reduction="sum") * world / (sum(rows) * 3)).backward()
        F.mse_loss(eager(torch.cat([b[0] for b in batches])), torch.cat([b[1] for b in batches])).backward()
        for opt in opts:
            opt.step()
            opt.zero_grad()
        full = tm.original_state_dict()
        for name, value in eager.state_dict().items():
            assert full[name].device.type == "cpu"
            _close(full[name], value, f"{name} after step {step}")
    assert thunder.cache_hits(tm) == 2
    sharded = {k: v.clone() for k, v in tm.state_dict().items()}
    torch.manual_seed(1)
    other = fsdp(thunder.jit(WithUnused()), sharding_strategy=FSDPType.ZERO3)
    other.load_state_dict(sharded)
    x, _ = _batch(9, rank)
    with torch.no_grad():
        _close(other(x), eager(x), "the reloaded sharded model's output")


def test_fsdp_frozen_uneven_checkpoint_and_lightning_options(tmp_path):
    # Before: fsdp(..., move_state_dict_to_cpu=True) (lightning-thunder's keyword) raised TypeError.
    run_workers(_fsdp_checkpoint_worker, 2, tmp_path)
