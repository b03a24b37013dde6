"""thunder.distributed: ddp and fsdp in 1, 2 and 4 processes (gloo on this machine), against single-process eager
training on the concatenated batch and against torch's DistributedDataParallel.

Every multi-process test runs its workers under a time limit (tests/distributed_harness.py): a hang fails.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import thunder
from thunder.core.errors import ThunderValueError

from .distributed_harness import run_workers

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available")

LOCAL_BATCH = 3
STEPS = 3


class Net(torch.nn.Module):
    """Rows that do not divide by 2 or 4 (padding of fsdp's shards), a normalization, a nonlinearity."""

    def __init__(self, hidden: int = 7):
        super().__init__()
        self.fc1 = torch.nn.Linear(5, hidden)
        self.norm = torch.nn.LayerNorm(hidden)
        self.fc2 = torch.nn.Linear(hidden, 3)

    def forward(self, x):
        return self.fc2(self.norm(F.gelu(self.fc1(x))))


def _batch(step: int, world: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1000 + step)
    return torch.randn(world * LOCAL_BATCH, 5, generator=g), torch.randn(world * LOCAL_BATCH, 3, generator=g)


def _local(t: torch.Tensor, rank: int) -> torch.Tensor:
    return t[rank * LOCAL_BATCH : (rank + 1) * LOCAL_BATCH]


def _optimizer(name: str, params):
    if name == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)
    return torch.optim.AdamW(params, lr=0.01, weight_decay=0.1)


def _close(a: torch.Tensor, b: torch.Tensor, what: str) -> None:
    torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=lambda m: f"{what}: {m}")


def _same_on_every_rank(t: torch.Tensor, what: str) -> None:
    everyone = [torch.empty_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(everyone, t.detach().contiguous())
    for r, other in enumerate(everyone):
        assert torch.equal(other, t), f"{what} differs between rank {dist.get_rank()} and rank {r}"


def _collectives(trace) -> list[str]:
    marks = ("dist_wait", "dist_gradient_ready", "dist_program_check", "dist_program_agreed")
    return [b.sym.name for b in trace.bound_symbols if b.sym.name.startswith("dist_") and b.sym.name not in marks]


# -- without a process group ---------------------------------------------------------------------------


def test_importable_and_clear_error_without_process_group():
    import thunder.distributed as td

    assert {"ddp", "fsdp", "FSDPType", "FSDPBucketingStrategy"} <= set(td.__all__)
    assert not dist.is_initialized()
    for make in (td.ddp, td.fsdp):
        with pytest.raises(ThunderValueError, match="init_process_group"):
            make(thunder.jit(Net()))


def test_no_sync_without_data_parallel_is_harmless():
    tm = thunder.jit(Net())
    with tm.no_sync():
        tm(torch.randn(2, 5)).sum().backward()
    assert all(p.grad is not None for p in tm.parameters())


# -- ddp ---------------------------------------------------------------------------------------------


def _ddp_worker(rank, world, order, optimizer, bucket_size_in_mb):
    from thunder.distributed import ddp

    torch.manual_seed(0)
    base = Net()
    model = copy.deepcopy(base)
    if rank != 0:  # ddp starts every rank from rank 0's parameters
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1.0)
    if order == "ddp_of_jit":
        tm = ddp(thunder.jit(model, executors=["torch"]), bucket_size_in_mb=bucket_size_in_mb)
    else:
        tm = thunder.jit(ddp(model, bucket_size_in_mb=bucket_size_in_mb), executors=["torch"])
    eager = copy.deepcopy(base)
    torch_ddp = DistributedDataParallel(copy.deepcopy(base))
    opts = [_optimizer(optimizer, m.parameters()) for m in (tm, eager, torch_ddp)]
    for step in range(STEPS):
        x, y = _batch(step, world)
        loss = F.mse_loss(tm(_local(x, rank)), _local(y, rank))
        loss.backward()
        F.mse_loss(eager(x), y).backward()
        torch_loss = F.mse_loss(torch_ddp(_local(x, rank)), _local(y, rank))
        torch_loss.backward()
        _close(loss, torch_loss, f"loss at step {step}")
        for opt in opts:
            opt.step()
            opt.zero_grad()
        for (name, p), e, d in zip(tm.named_parameters(), eager.parameters(), torch_ddp.parameters()):
            _close(p, e, f"{name} after step {step} vs eager on the whole batch")
            _close(p, d, f"{name} after step {step} vs torch DDP")
            _same_on_every_rank(p, name)
    backward = thunder.last_backward_traces(tm)[-1]
    reduces = _collectives(backward)
    # 0: one bucket per gradient; 25 MiB: all in one; 100 bytes (25 floats): fc2 and norm.bias (31 floats), the rest
    expected = {0: len(list(base.parameters())), 25.0: 1, 100 / 2**20: 2}[bucket_size_in_mb]
    assert reduces.count("dist_all_reduce") == expected, str(backward)
    if expected > 1:  # the first bucket starts before the last gradient is computed: overlap
        names = [b.sym.name for b in backward.bound_symbols]
        assert names.index("dist_all_reduce") < max(i for i, n in enumerate(names) if n == "dist_pack_bucket")
        reduced = {b.output.name for b in backward.bound_symbols if b.sym.name == "dist_all_reduce"}
        waits = [
            i for i, b in enumerate(backward.bound_symbols) if b.sym.name == "dist_wait" and b.args[0].name in reduced
        ]
        assert min(waits) > max(i for i, n in enumerate(names) if n == "dist_all_reduce")
    assert "# bucket 0" in str(backward)


@pytest.mark.parametrize(
    "order, optimizer, bucket_size_in_mb",
    [("ddp_of_jit", "sgd", 25.0), ("jit_of_ddp", "adamw", 0)],
)
def test_ddp_trains_like_eager_and_torch_ddp(tmp_path, order, optimizer, bucket_size_in_mb):
    run_workers(_ddp_worker, 2, tmp_path, order, optimizer, bucket_size_in_mb)


def test_ddp_four_processes(tmp_path):
    run_workers(_ddp_worker, 4, tmp_path, "ddp_of_jit", "adamw", 100 / 2**20)


def test_ddp_world_size_one(tmp_path):
    run_workers(_ddp_worker, 1, tmp_path, "jit_of_ddp", "sgd", 25.0)


def _no_sync_worker(rank, world):
    from thunder.distributed import ddp

    base = Net()
    tm = ddp(thunder.jit(copy.deepcopy(base), executors=["torch"]), bucket_size_in_mb=0)
    torch_ddp = DistributedDataParallel(copy.deepcopy(base))
    eager = copy.deepcopy(base)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (tm, torch_ddp, eager)]
    micro = 3
    for step in range(2):
        batches = [_batch(10 * step + i, world) for i in range(micro)]
        with tm.no_sync(), torch_ddp.no_sync():
            for x, y in batches[:-1]:
                F.mse_loss(tm(_local(x, rank)), _local(y, rank)).backward()
                F.mse_loss(torch_ddp(_local(x, rank)), _local(y, rank)).backward()
            inside = thunder.last_backward_traces(tm)[-1]
            assert _collectives(inside) == [], str(inside)
        x, y = batches[-1]
        F.mse_loss(tm(_local(x, rank)), _local(y, rank)).backward()
        F.mse_loss(torch_ddp(_local(x, rank)), _local(y, rank)).backward()
        for x, y in batches:
            F.mse_loss(eager(x), y).backward()
        for (name, p), d, e in zip(tm.named_parameters(), torch_ddp.parameters(), eager.parameters()):
            _close(p.grad, d.grad, f"{name}.grad after {micro} micro-batches vs torch DDP's no_sync")
            _close(p.grad, e.grad, f"{name}.grad after {micro} micro-batches vs eager")
        for opt in opts:
            opt.step()
            opt.zero_grad()
    assert _collectives(thunder.last_backward_traces(tm)[-1]), "the backward outside no_sync synchronises"


def test_no_sync_accumulates_like_torch_ddp(tmp_path):
    run_workers(_no_sync_worker, 2, tmp_path)


def _fsdp_no_sync_worker(rank, world, strategy, bucketing):
    from torch.distributed.fsdp import fully_shard

    from thunder.distributed import FSDPBucketingStrategy, FSDPType, fsdp

    base = Blocks() if bucketing == "BLOCK" else Net()
    options = {"sharding_strategy": FSDPType[strategy], "bucketing_strategy": FSDPBucketingStrategy[bucketing]}
    tm = fsdp(thunder.jit(copy.deepcopy(base), executors=["torch"]), **options)
    torch_fsdp = fully_shard(copy.deepcopy(base))  # FSDP2: set_requires_gradient_sync(False) is its no_sync
    eager = copy.deepcopy(base)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (tm, torch_fsdp, eager)]
    micro = 3
    for step in range(2):
        batches = [_batch(10 * step + i, world) for i in range(micro)]
        with tm.no_sync():
            torch_fsdp.set_requires_gradient_sync(False)
            for x, y in batches[:-1]:
                F.mse_loss(tm(_local(x, rank)), _local(y, rank)).backward()
                F.mse_loss(torch_fsdp(_local(x, rank)), _local(y, rank)).backward()
            inside = thunder.last_backward_traces(tm)[-1]
            assert "dist_reduce_scatter" not in _collectives(inside), str(inside)
        torch_fsdp.set_requires_gradient_sync(True)
        x, y = batches[-1]
        F.mse_loss(tm(_local(x, rank)), _local(y, rank)).backward()
        F.mse_loss(torch_fsdp(_local(x, rank)), _local(y, rank)).backward()
        for x, y in batches:
            F.mse_loss(eager(x), y).backward()
        for (name, p), t, e in zip(tm.named_parameters(), torch_fsdp.parameters(), eager.parameters()):
            rows = p.shape[0]
            padded = F.pad(e.grad, (0, 0) * (e.grad.ndim - 1) + (0, rows * world - e.grad.shape[0]))
            _close(
                p.grad,
                padded[rank * rows : (rank + 1) * rows],
                f"{name}.grad (a shard) after {micro} micro-batches vs eager",
            )
            _close(t.grad.full_tensor(), e.grad, f"torch FSDP2's {name}.grad vs eager (the reference agrees)")
        for opt in opts:
            opt.step()
            opt.zero_grad()
    assert "dist_reduce_scatter" in _collectives(thunder.last_backward_traces(tm)[-1]), "outside no_sync: synchronised"


@pytest.mark.parametrize("strategy, bucketing", [("ZERO2", "NONE"), ("ZERO3", "NONE"), ("ZERO3", "BLOCK")])
def test_fsdp_no_sync_skips_the_reduce_scatter_and_accumulates_like_eager(tmp_path, strategy, bucketing):
    run_workers(_fsdp_no_sync_worker, 2, tmp_path, strategy, bucketing)


def _optimizer_before_fsdp_worker(rank, world):
    from thunder.distributed import fsdp

    base = Net()
    model = copy.deepcopy(base)
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)  # made before fsdp: it must step the shards
    tm = fsdp(thunder.jit(model, executors=["torch"]))
    eager = copy.deepcopy(base)
    eager_opt = torch.optim.AdamW(eager.parameters(), lr=0.01)
    for step in range(STEPS):
        x, y = _batch(step, world)
        F.mse_loss(tm(_local(x, rank)), _local(y, rank)).backward()
        F.mse_loss(eager(x), y).backward()
        for o in (opt, eager_opt):
            o.step()
            o.zero_grad()
    full = tm.original_state_dict()
    for name, value in eager.state_dict().items():
        _close(full[name], value, f"{name} after {STEPS} steps of an optimizer made before fsdp vs eager")


def test_optimizer_made_before_fsdp_steps_the_shards(tmp_path):
    run_workers(_optimizer_before_fsdp_worker, 2, tmp_path)


class TiedLM(torch.nn.Module):
    """An embedding whose weight is also the output layer's (as GPT-2's wte and lm_head), and two linear layers."""

    def __init__(self):
        super().__init__()
        self.wte = torch.nn.Embedding(16, 8)
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 16, bias=False)
        self.head.weight = self.wte.weight

    def forward(self, ids):
        return self.head(torch.tanh(self.fc2(torch.tanh(self.fc1(self.wte(ids))))))


def _zero3_memory_worker(rank, world):
    from thunder.distributed import FSDPType, fsdp, measure_gathered_memory

    base = TiedLM()
    tm = fsdp(thunder.jit(copy.deepcopy(base), executors=["torch"]), sharding_strategy=FSDPType.ZERO3)
    eager = copy.deepcopy(base)
    ids = torch.arange(12).reshape(2, 6) % 16
    tm(ids[rank : rank + 1]).sum().backward()  # compiles
    peaks = []
    for _ in range(STEPS):  # the same schedule each step: a buffer gloo's thread releases late raises one step's peak
        tm.zero_grad()
        with measure_gathered_memory() as measured:
            tm(ids[rank : rank + 1]).sum().backward()
        peaks.append(measured.peak)
    eager(ids).sum().backward()
    # Each parameter is freed after the op that reads it, the tied weight too (gathered again for the output layer),
    # and prefetching never holds more than the largest gathered parameter: 16 x 8 floats.
    wte = 16 * 8 * 4
    assert min(peaks) == wte, f"peaks of gathered parameters {peaks} bytes, expected {wte}"
    forward = str(thunder.last_traces(tm)[-1])
    assert forward.count("dist_all_gather(t_wte_weight,") == 2, forward
    full = {}
    for name, p in tm.named_parameters():
        full[name] = torch.cat([torch.zeros_like(p.grad)] * world)
        dist.all_gather_into_tensor(full[name], p.grad.contiguous())
    for name, p in eager.named_parameters():
        _close(full[name][: p.shape[0]] * world, p.grad, f"{name}.grad (the ranks' mean gradient) vs eager")


def test_zero3_frees_each_gathered_parameter_after_its_reads_tied_weights_too(tmp_path):
    run_workers(_zero3_memory_worker, 2, tmp_path)


class ThreeLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = (torch.nn.Linear(8, 8, bias=False) for _ in range(3))

    def forward(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))


def _zero3_backward_overlap_worker(rank, world):
    from thunder.distributed import FSDPType, fsdp, measure_gathered_memory

    base = ThreeLinear()
    tm = fsdp(thunder.jit(copy.deepcopy(base)), sharding_strategy=FSDPType.ZERO3)  # default executors: fusions
    eager = copy.deepcopy(base)
    x = torch.randn(2 * world, 8, generator=torch.Generator().manual_seed(0))
    tm(x[2 * rank : 2 * rank + 2]).sum().backward()  # compiles
    tm.zero_grad()
    with measure_gathered_memory() as measured:
        tm(x[2 * rank : 2 * rank + 2]).sum().backward()
    eager(x).sum().backward()
    for name, p in tm.named_parameters():
        full = torch.empty(world * p.shape[0], *p.shape[1:])
        dist.all_gather_into_tensor(full, p.grad.contiguous())
        _close(full[:8] * world, eager.get_parameter(name).grad, f"{name}.grad (the ranks' mean) vs eager")
    # The backward's fusion that reads fc3's weight is cut after its last read: the gather of fc2's weight starts
    # before fc3's weight gradient (which reads only activations) is computed, and overlaps it; before, the fusion
    # computed both and fc2's gather waited for its end. One gathered weight alive at a time all the same.
    backward = thunder.last_backward_traces(tm)[-1]
    body = backward.bound_symbols
    gather_fc2 = next(
        i for i, b in enumerate(body) if b.sym.name == "dist_all_gather" and "fc2_weight" in b.args[0].name
    )
    scatter_fc3 = next(
        i
        for i, b in enumerate(body)
        if b.sym.name == "comment" and b.args and "gradients of fc3.weight" in str(b.args[0])
    )
    grad_fc3 = body[scatter_fc3 + 1].args[0].name
    computed_at = next(i for i, b in enumerate(body) if grad_fc3 in {o.name for o in b.flat_proxy_outs})
    assert gather_fc2 < computed_at, str(backward)
    assert measured.peak == 8 * 8 * 4, measured.peak


def test_zero3_backward_gathers_the_next_weight_while_the_weight_gradient_is_computed(tmp_path):
    run_workers(_zero3_backward_overlap_worker, 2, tmp_path)


def _tiny_gpt2() -> torch.nn.Module:
    """GPT-2 in small: a tied embedding and output layer, norms and biases among large weights."""
    import transformers

    config = transformers.GPT2Config(n_layer=2, n_head=2, n_embd=16, vocab_size=64, n_positions=8, resid_pdrop=0.0,
                                     embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)


def _zero3_auto_worker(rank, world):
    from thunder.distributed import FSDPBucketingStrategy, FSDPType, fsdp, measure_gathered_memory
    from thunder.distributed.transforms.fsdp import AUTO_PEAK_SLACK

    base = _tiny_gpt2()
    peaks, gathers = {}, {}
    for bucketing in ("NONE", "AUTO"):
        tm = fsdp(thunder.jit(copy.deepcopy(base)), sharding_strategy=FSDPType.ZERO3,
                  bucketing_strategy=FSDPBucketingStrategy[bucketing])  # fmt: skip
        eager = copy.deepcopy(base)
        opts = [_optimizer("sgd", m.parameters()) for m in (tm, eager)]
        step_peaks = []
        for step in range(STEPS):
            ids = torch.arange(16).reshape(2, 8).mul(5 + step) % 64
            with measure_gathered_memory() as measured:
                tm(ids[rank : rank + 1], labels=ids[rank : rank + 1]).loss.backward()
            step_peaks.append(measured.peak)
            eager(ids, labels=ids).loss.backward()
            for opt in opts:
                opt.step()
                opt.zero_grad()
            full = tm.original_state_dict()
            for name, value in eager.state_dict().items():
                if name in full:
                    _close(full[name], value, f"{bucketing}: {name} after step {step} vs eager on the whole batch")
        # Every step runs the same schedule; a buffer that gloo's thread releases late (under a loaded machine) can
        # only raise one step's peak, so the least of the steps is the schedule's.
        peaks[bucketing] = min(step_peaks)
        traces = (thunder.last_traces(tm)[-1], thunder.last_backward_traces(tm)[-1])
        gathers[bucketing] = sum(_collectives(t).count("dist_all_gather") for t in traces)
    # AUTO: fewer gathers, within its bound on the gathered parameters alive at once. Each parameter's gradient ends
    # the backward's fusion regions where it completes, as a parameter of its own does; without that, a region of the
    # backward of the output layer and the final norm runs on into the last block's, all their weights alive at once.
    assert 2 * gathers["AUTO"] <= gathers["NONE"], gathers
    assert peaks["AUTO"] <= (1 + AUTO_PEAK_SLACK) * peaks["NONE"], (peaks, gathers)


def test_zero3_auto_buckets_keep_the_peak_of_gathered_parameters_with_fewer_gathers(tmp_path):
    run_workers(_zero3_auto_worker, 2, tmp_path)


def _gradient_group_worker(rank, world):
    import thunder.distributed.prims as dist_prims
    from thunder.distributed import FSDPType, fsdp

    groups = []
    original = dist_prims._reduce_scatter_tensor

    def recording(out, padded, group, async_op):
        groups.append(group)
        return original(out, padded, group=group, async_op=async_op)

    dist_prims._reduce_scatter_tensor = recording
    base = _tiny_gpt2()
    tm = fsdp(thunder.jit(copy.deepcopy(base)), sharding_strategy=FSDPType.ZERO3)
    ids = torch.arange(16).reshape(2, 8) % 64
    tm(ids[rank : rank + 1], labels=ids[rank : rank + 1]).loss.backward()
    gradient_group = dist_prims._gradient_groups[dist_prims.register_group(dist.group.WORLD)]
    assert gradient_group is not dist.group.WORLD
    assert dist.get_process_group_ranks(gradient_group) == list(range(world))
    assert groups and all(g is gradient_group for g in groups), groups
    eager = copy.deepcopy(base)
    eager(ids, labels=ids).loss.backward()
    for m in (tm, eager):
        torch.optim.SGD(m.parameters(), lr=0.1).step()
    full = tm.original_state_dict()
    for name, value in eager.state_dict().items():
        if name in full:
            _close(full[name], value, f"{name} after a step vs eager on the whole batch")


def test_zero3_reduce_scatters_run_on_a_second_gloo_group(tmp_path):
    """Note [A gloo group for the gradients]: the backward's gathers do not queue behind the reduce-scatters."""
    run_workers(_gradient_group_worker, 2, tmp_path)


def _mismatch_worker(rank, world, which):
    from thunder.distributed import ddp, fsdp

    model = Net(hidden=7 if rank == 0 else 8)
    make = ddp if which == "ddp" else fsdp
    with pytest.raises(ThunderValueError) as info:
        make(thunder.jit(model))
    message = str(info.value)
    assert "fc1.weight" in message and "[7, 5]" in message and "[8, 5]" in message, message


@pytest.mark.parametrize("which", ["ddp", "fsdp"])
def test_parameter_shapes_that_differ_between_ranks_fail_clearly(tmp_path, which):
    run_workers(_mismatch_worker, 2, tmp_path, which, timeout=90)


def _eager_call_worker(rank, world):
    from thunder.distributed import ddp

    model = ddp(Net())
    with pytest.raises(ThunderValueError, match="thunder.jit"):
        model(torch.randn(2, 5))
    tm = thunder.jit(model, executors=["torch"])
    tm(torch.randn(2, 5)).sum().backward()
    with pytest.raises(ThunderValueError, match="already data parallel"):
        ddp(tm)


def test_ddp_module_called_without_jit_fails_clearly(tmp_path):
    run_workers(_eager_call_worker, 2, tmp_path, timeout=90)


def _fusions(trace) -> int:
    return sum(1 for b in trace.bound_symbols if b.sym._is_fusion)


def _ddp_fusions_worker(rank, world):
    from thunder.distributed import ddp

    base = Net()
    plain = thunder.jit(copy.deepcopy(base))  # the default executors: torch.compile's fusions
    tm = ddp(thunder.jit(copy.deepcopy(base)))
    eager = copy.deepcopy(base)
    x, y = _batch(0, world)
    for m in (plain, tm):
        F.mse_loss(m(_local(x, rank)), _local(y, rank)).backward()
    F.mse_loss(eager(x), y).backward()
    for (name, p), e in zip(tm.named_parameters(), eager.parameters()):
        _close(p.grad, e.grad, f"{name}.grad vs eager on the whole batch")
    # The marks that place the buckets go once placed and their fusions merge again (Note [Fusions after the marks]):
    # the forward fuses as thunder.jit alone does; with one bucket (this small model's) no distributed op is left
    # between the backward's fusions (a gradient_ready after each gradient ended a region there)
    forward, backward = thunder.last_traces(tm)[-1], thunder.last_backward_traces(tm)[-1]
    assert _fusions(forward) == _fusions(thunder.last_traces(plain)[-1]), str(forward)
    ops = ["fusion" if b.sym._is_fusion else b.sym.name for b in backward.bound_symbols]
    last = max(i for i, name in enumerate(ops) if name == "fusion")
    assert [name for name in ops[:last] if name.startswith("dist_")] == ["dist_program_check"], str(backward)
    assert "dist_synchronize" not in str(forward) and "dist_gradient_ready" not in str(backward)


def test_ddp_fuses_the_forward_and_backward_as_without_ddp(tmp_path):
    run_workers(_ddp_fusions_worker, 2, tmp_path)


# -- torch's DistributedDataParallel around a thunder module -------------------------------------------


def _torch_ddp_of_thunder_worker(rank, world):
    base = Net()
    wrapped = DistributedDataParallel(thunder.jit(copy.deepcopy(base), executors=["torch"]))
    torch_ddp = DistributedDataParallel(copy.deepcopy(base))
    opts = [torch.optim.AdamW(m.parameters(), lr=0.01) for m in (wrapped, torch_ddp)]
    for step in range(STEPS):
        x, y = _batch(step, world)
        for m in (wrapped, torch_ddp):
            F.mse_loss(m(_local(x, rank)), _local(y, rank)).backward()
        for opt in opts:
            opt.step()
            opt.zero_grad()
        for (name, p), d in zip(wrapped.module.named_parameters(), torch_ddp.parameters()):
            _close(p, d, f"{name} after step {step}")


def test_torch_ddp_of_thunder_module(tmp_path):
    run_workers(_torch_ddp_of_thunder_worker, 2, tmp_path)


# -- fsdp --------------------------------------------------------------------------------------------


class Blocks(torch.nn.Module):
    """Net's layers in a ModuleList of two blocks (FSDPBucketingStrategy.BLOCK), with a layer outside them."""

    def __init__(self):
        super().__init__()
        net = Net()
        self.fc1 = net.fc1
        self.blocks = torch.nn.ModuleList(
            [torch.nn.Sequential(net.norm, torch.nn.GELU()), torch.nn.Sequential(net.fc2)]
        )

    def forward(self, x):
        x = self.fc1(x)
        for block in self.blocks:
            x = block(x)
        return x


def _fsdp_worker(rank, world, order, strategy, optimizer, checkpoint, bucketing="NONE"):
    from thunder.distributed import FSDPBucketingStrategy, FSDPType, fsdp

    base = Blocks() if bucketing == "BLOCK" else Net()
    model = copy.deepcopy(base)
    kind = FSDPType[strategy]
    options = {"sharding_strategy": kind, "bucketing_strategy": FSDPBucketingStrategy[bucketing]}
    if order == "fsdp_of_jit":
        tm = fsdp(thunder.jit(model, executors=["torch"]), **options)
    else:
        tm = thunder.jit(fsdp(model, **options), executors=["torch"])
    rows = -(-7 // world)
    assert tm.get_parameter("fc1.weight").shape == (rows, 5), "each rank holds a padded dim-0 shard"
    if bucketing not in ("NONE", "AUTO"):  # a bucket's shards are views of one flat tensor: gathered without a copy
        weight, bias = tm.get_parameter("fc1.weight"), tm.get_parameter("fc1.bias")
        assert bias.data_ptr() == weight.data_ptr() + weight.numel() * weight.element_size()
    assert tuple(tm.state_dict()["fc1.bias"].shape) == (rows,)
    eager = copy.deepcopy(base)
    opts = [_optimizer(optimizer, m.parameters()) for m in (tm, eager)]
    for step in range(STEPS):
        x, y = _batch(step, world)
        loss = F.mse_loss(tm(_local(x, rank)), _local(y, rank))
        loss.backward()
        with torch.no_grad():  # this rank's loss, by the single-process model (the same parameters so far)
            _close(loss, F.mse_loss(eager(_local(x, rank)), _local(y, rank)), f"rank {rank}'s loss at step {step}")
        F.mse_loss(eager(x), y).backward()
        for opt in opts:
            opt.step()
            opt.zero_grad()
        full = tm.original_state_dict()
        for name, value in eager.state_dict().items():
            _close(full[name], value, f"{name} after step {step} vs eager on the whole batch")
    forward, backward = thunder.last_traces(tm)[-1], thunder.last_backward_traces(tm)[-1]
    if (
        bucketing == "AUTO"
    ):  # fewer collectives than parameters; a bucket's shards laid out together since its first call
        buckets = _collectives(forward).count("dist_all_gather")
        assert buckets < len(list(base.parameters())), str(forward)
        assert _collectives(backward).count("dist_reduce_scatter") == buckets, str(backward)
        assert "dist_bucket_member" not in str(forward) + str(backward)  # the marks go after the split
    else:
        buckets = len(list(base.parameters())) if bucketing == "NONE" else 3  # LAYER, BLOCK: fc1, norm, fc2
        assert _collectives(forward).count("dist_all_gather") == buckets, str(forward)
        assert _collectives(backward).count("dist_reduce_scatter") == buckets, str(backward)
        carried = "fc1.weight" if bucketing == "NONE" else "fc1.weight, fc1.bias"
        assert f"# reduce-scatter of the gradients of {carried}\n" in str(backward), str(backward)
    # the reduce-scatters overlap the rest of the backward: each (a bucket's too) is waited for only after the last
    # one started, and its bucket unpacked after its wait
    names = [b.sym.name for b in backward.bound_symbols]
    scattered = {b.output.name for b in backward.bound_symbols if b.sym.name == "dist_reduce_scatter"}
    rs_waits = [
        i for i, b in enumerate(backward.bound_symbols) if b.sym.name == "dist_wait" and b.args[0].name in scattered
    ]
    last_start = max(i for i, n in enumerate(names) if n == "dist_reduce_scatter")
    assert min(rs_waits) > last_start, str(backward)
    regathered = _collectives(backward).count("dist_all_gather")
    if kind is FSDPType.ZERO3:  # the backward gathers again what it reads; the forward saves no full parameter
        assert regathered > 0, str(backward)
        saved = forward.bound_symbols[-1].args[0][1]
        assert not any(s.name.endswith("_full") for s in saved), saved
    else:
        assert regathered == 0, str(backward)
    if checkpoint is not None and rank == 0:
        torch.save(tm.original_state_dict(), checkpoint)
    elif checkpoint is not None:
        tm.original_state_dict()  # a collective: every rank takes part


@pytest.mark.parametrize(
    "order, strategy, optimizer, bucketing",
    [
        ("fsdp_of_jit", "ZERO2", "sgd", "NONE"),
        ("jit_of_fsdp", "ZERO3", "adamw", "NONE"),
        ("fsdp_of_jit", "ZERO3", "sgd", "LAYER"),
        ("jit_of_fsdp", "ZERO2", "adamw", "BLOCK"),
        ("fsdp_of_jit", "ZERO3", "adamw", "BLOCK"),
        ("jit_of_fsdp", "ZERO3", "adamw", "AUTO"),
        ("fsdp_of_jit", "ZERO2", "sgd", "AUTO"),
    ],
)
def test_fsdp_trains_like_eager(tmp_path, order, strategy, optimizer, bucketing):
    run_workers(_fsdp_worker, 2, tmp_path, order, strategy, optimizer, None, bucketing)


def test_fsdp_four_processes(tmp_path):
    run_workers(_fsdp_worker, 4, tmp_path, "fsdp_of_jit", "ZERO3", "adamw", None)


def _load_checkpoint_worker(rank, world, checkpoint):
    from thunder.distributed import fsdp

    state = torch.load(checkpoint)
    tm = fsdp(thunder.jit(Net(), executors=["torch"]))
    tm.load_original_state_dict(state)
    full = tm.original_state_dict()
    for name, value in state.items():
        assert torch.equal(full[name], value), name
    shard = tm.state_dict()["fc1.weight"]
    rows = -(-7 // world)
    padded = F.pad(state["fc1.weight"], (0, 0, 0, rows * world - 7))
    assert torch.equal(shard, padded[rank * rows : (rank + 1) * rows]), "the local shard of the loaded tensor"
    if world > 1:
        with pytest.raises(ThunderValueError, match="full shape"):
            tm.load_original_state_dict({"fc1.weight": shard})
    x = torch.randn(2, 5)
    reference = Net()
    reference.load_state_dict(state)
    _close(tm(x), reference(x), "the loaded model's output")
    again = fsdp(thunder.jit(Net(), executors=["torch"]))  # the local shards load with load_state_dict
    again.load_state_dict(tm.state_dict())
    for name, value in again.original_state_dict().items():
        assert torch.equal(value, state[name]), f"{name} loaded from the local shards"
    _close(again(x), reference(x), "the output of the model loaded from the local shards")


def test_fsdp_checkpoint_loads_at_another_world_size(tmp_path):
    checkpoint = str(tmp_path / "full.pt")
    run_workers(_fsdp_worker, 2, tmp_path, "fsdp_of_jit", "ZERO2", "adamw", checkpoint)
    run_workers(_load_checkpoint_worker, 1, tmp_path, checkpoint)
    run_workers(_load_checkpoint_worker, 4, tmp_path, checkpoint)


# -- torch's autograd running the trace, default executors, FSDP2 ----------------------------------


class InPlaceOnView(Net):
    """An in-place update of a view of a value that requires grad: thunder's autograd leaves it to torch's."""

    def forward(self, x):
        h = self.fc1(x)
        h[:, 0].mul_(2)
        return self.fc2(self.norm(F.gelu(h)))


def _fallback_and_defaults_worker(rank, world, which, model_cls):
    from thunder.distributed import FSDPType, ddp, fsdp

    base = model_cls()
    tm = thunder.jit(copy.deepcopy(base))  # the default executors
    tm = ddp(tm) if which == "ddp" else fsdp(tm, sharding_strategy=FSDPType.ZERO3)
    eager = copy.deepcopy(base)
    opts = [torch.optim.SGD(m.parameters(), lr=0.1) for m in (tm, eager)]
    for step in range(2):
        x, y = _batch(step, world)
        F.mse_loss(tm(_local(x, rank)), _local(y, rank)).backward()
        F.mse_loss(eager(x), y).backward()
        for opt in opts:
            opt.step()
            opt.zero_grad()
        full = tm.original_state_dict()
        for name, value in eager.state_dict().items():
            _close(full[name], value, f"{name} after step {step}")
    fallback = thunder.compile_stats(tm).last_autograd_fallback
    assert (fallback is not None) == (model_cls is InPlaceOnView), fallback
    if fallback is None:  # the collectives stay ops of their own, outside the fusions
        forward, backward = thunder.last_traces(tm)[-1], thunder.last_backward_traces(tm)[-1]
        if which == "ddp":
            assert _collectives(backward) == ["dist_pack_bucket", "dist_all_reduce", "dist_unpack_bucket"], str(
                backward
            )
        else:
            n_params = len(list(base.parameters()))
            assert _collectives(forward).count("dist_all_gather") == n_params, str(forward)
            assert _collectives(backward).count("dist_reduce_scatter") == n_params, str(backward)
            assert _collectives(backward).count("dist_all_gather") > 0, str(backward)
            # ZeRO-3 ends the fusion region that reads fc1's weight at its last read: the weight is freed before the
            # GELU, which the gather of the next parameters overlaps
            for region in (b for b in forward.bound_symbols if b.subsymbols):
                if any("fc1_weight" in a.name for a in region.flat_proxy_args):
                    assert not any("gelu" in sub.sym.name for sub in region.subsymbols), str(region)
            assert "last_read" not in str(forward)  # the marks go after the split


@pytest.mark.parametrize("which", ["ddp", "fsdp"])
@pytest.mark.parametrize("model_cls", [Net, InPlaceOnView], ids=["thunder_autograd", "torch_autograd"])
def test_default_executors_and_torch_autograd_fallback(tmp_path, which, model_cls):
    run_workers(_fallback_and_defaults_worker, 2, tmp_path, which, model_cls)


def _fsdp2_worker(rank, world):
    from torch.distributed.fsdp import fully_shard

    model = fully_shard(Net())
    with pytest.raises(ThunderValueError, match="'fc1.weight' is a DTensor.*thunder.distributed.fsdp"):
        thunder.jit(model)


def test_fsdp2_fully_shard_fails_at_once_with_a_clear_error(tmp_path):
    run_workers(_fsdp2_worker, 2, tmp_path, timeout=90)


def _batch_size_changes_worker(rank, world, which):
    """A smaller last batch recompiles with symbolic shapes (the parameters' dims are symbolic too)."""
    from thunder.distributed import FSDPType, ddp, fsdp

    base = Net()
    tm = thunder.jit(copy.deepcopy(base), executors=["torch"])
    tm = ddp(tm, bucket_size_in_mb=0) if which == "ddp" else fsdp(tm, sharding_strategy=FSDPType.ZERO3)
    eager = copy.deepcopy(base)
    for n in (3, 2, 1):
        x = torch.randn(world * n, 5, generator=torch.Generator().manual_seed(n))
        tm(x[rank * n : (rank + 1) * n]).square().mean().backward()
        eager(x).square().mean().backward()  # the mean over the whole batch: the average of the ranks
    assert thunder.cache_misses(tm) >= 2
    grads = {n: p.grad for n, p in tm.named_parameters()}
    for name, p in eager.named_parameters():
        g = grads[name]
        if which == "fsdp":
            everyone = [torch.empty_like(g) for _ in range(world)]
            dist.all_gather(everyone, g)
            g = torch.cat(everyone)[: p.shape[0]]
        _close(g, p.grad, f"{name}.grad summed over batches of 3, 2 and 1 rows per rank")


@pytest.mark.parametrize("which", ["ddp", "fsdp"])
def test_batch_size_changes(tmp_path, which):
    run_workers(_batch_size_changes_worker, 2, tmp_path, which)


def test_pack_shards_views_adjacent_shards_and_copies_others():
    from thunder.distributed.prims import _pack_shards_impl

    flat = torch.arange(10.0)
    a, b = flat[:6].view(2, 3), flat[6:]
    with torch.no_grad():
        packed = _pack_shards_impl(a, b)
        assert packed.data_ptr() == flat.data_ptr() and torch.equal(packed, flat)  # fsdp's bucket layout: no copy
        swapped = _pack_shards_impl(b, a)
        assert swapped.data_ptr() != flat.data_ptr() and torch.equal(swapped, torch.cat([b, a.reshape(-1)]))
    assert _pack_shards_impl(a, b).data_ptr() != flat.data_ptr()  # where autograd records it: a copy


class RankBranch(Net):
    """Net whose first layer the ranks with ``skip`` set leave out (padding the input instead): another program, with
    other collectives, on those ranks; ``scale``: a constant that may differ between ranks (the same collectives)."""

    skip = False
    scale = 1.0

    def forward(self, x):
        h = F.pad(x, (0, 2)) if self.skip else self.fc1(x)
        return self.fc2(self.norm(F.gelu(h))) * self.scale


def _rank_branch_worker(rank, world, which, when):
    import time

    from thunder.core.errors import ThunderRuntimeError
    from thunder.distributed import FSDPType, ddp, fsdp

    model = RankBranch()
    if when == "constant":
        model.scale = 1.0 + rank
    elif when == "first":
        model.skip = rank == 1
    tm = thunder.jit(model)
    tm = ddp(tm) if which == "ddp" else fsdp(tm, sharding_strategy=FSDPType.ZERO3)
    start = time.monotonic()
    for step in range(2):
        if when == "later":
            model.skip = rank == 1 and step == 1  # rank 1 compiles another program for its second step
        x, y = _batch(step, world)
        differs = when == "first" or (when == "later" and step == 1)
        if differs:  # every rank fails at once, naming what differs
            with pytest.raises(ThunderRuntimeError, match="the ranks run different distributed programs: collective"):
                F.mse_loss(tm(_local(x, rank)), _local(y, rank)).backward()
            assert time.monotonic() - start < 60
            return
        F.mse_loss(tm(_local(x, rank)), _local(y, rank)).backward()
    assert when == "constant"  # the same collectives with other constants: no complaint


@pytest.mark.parametrize("which", ["ddp", "fsdp"])
@pytest.mark.parametrize("when", ["first", "later", "constant"])
def test_ranks_that_trace_different_programs_fail_together_and_clearly(tmp_path, which, when):
    run_workers(_rank_branch_worker, 2, tmp_path, which, when, timeout=120, group_timeout_s=30)


def _rank_fails_worker(rank, world):
    import os
    import time

    from thunder.core.errors import ThunderRuntimeError
    from thunder.distributed import ddp

    tm = ddp(thunder.jit(Net(), executors=["torch"]))
    x = torch.randn(2, 5 if rank == 0 else 6)  # rank 1's batch has the wrong width: its forward raises
    if rank == 1:
        with pytest.raises(ThunderValueError, match="in_features"):
            tm(x)
        time.sleep(8)  # alive (not in a collective) while rank 0 waits for it
    else:
        start = time.monotonic()
        # waiting in the forward's program check (Note [Ranks that run different programs]), else in an all-reduce
        with pytest.raises(
            ThunderRuntimeError,
            match="(program check|all_reduce) .* did not complete within the process group's timeout",
        ):
            tm(x).sum().backward()
        assert time.monotonic() - start < 30
    os._exit(0)  # the group is broken: no barrier, no teardown


def test_a_rank_that_fails_leaves_the_others_a_timeout_error(tmp_path):
    run_workers(_rank_fails_worker, 2, tmp_path, timeout=90, group_timeout_s=3)


# -- NCCL on CUDA --------------------------------------------------------------------------------------


def _nccl_worker(rank, world):
    from thunder.distributed import FSDPType, ddp, fsdp

    device = torch.device("cuda", rank)
    base = Net().to(device)
    for make in (lambda m: ddp(m, bucket_size_in_mb=0), lambda m: fsdp(m, sharding_strategy=FSDPType.ZERO3)):
        tm = make(thunder.jit(copy.deepcopy(base)))
        eager = copy.deepcopy(base)
        opts = [torch.optim.AdamW(m.parameters(), lr=0.01) for m in (tm, eager)]
        for step in range(STEPS):
            x, y = (t.to(device) for t in _batch(step, world))
            F.mse_loss(tm(_local(x, rank)), _local(y, rank)).backward()
            F.mse_loss(eager(x), y).backward()
            for opt in opts:
                opt.step()
                opt.zero_grad()
        full = tm.original_state_dict()
        for name, value in eager.state_dict().items():
            torch.testing.assert_close(full[name], value, rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_nccl_ddp_and_fsdp_on_cuda(tmp_path):
    run_workers(_nccl_worker, min(2, torch.cuda.device_count()), tmp_path, backend="nccl")
