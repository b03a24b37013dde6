"""thunder.distributed against torch's DDP and FSDP2 (``fully_shard``): 2 processes, gloo, CPU, a GPT-2-style model.

Run: ``python benchmarks/bench_distributed.py [--steps 10] [--layers 4] [--embd 128] [--only ddp|fsdp]
[--fsdp ZERO3:AUTO ...]``.

Per configuration: the median step time (forward, backward, optimizer step) of thunder and of torch, timed
alternately in the same processes (so both see the same load), the median of their step-by-step ratios and the CPU
time of the main thread (what waiting for the other rank or for a core does not count); the collectives per step of thunder's program
(counted in its traces: DDP bucketed with 25 MiB and unbucketed); and, for FSDP, the peak parameter memory per
rank against the whole model's parameters, twice: as the executed traces hold it (local shards plus the gathered
parameters alive at once, from the traces' ``del`` statements) and measured while a step runs
(``thunder.distributed.measure_gathered_memory``: every gathered buffer from its allocation until its storage is
freed, plus the local shards). CPU time on a shared machine is noisy: read ratios, run it twice.
"""

from __future__ import annotations

import argparse
import copy
import math
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

WORLD = 2
BATCH = 4  # per rank
SEQ = 64
VOCAB = 512


def _model(layers: int, embd: int) -> torch.nn.Module:
    import transformers

    config = transformers.GPT2Config(n_layer=layers, n_head=4, n_embd=embd, vocab_size=VOCAB, n_positions=SEQ,
                                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)  # fmt: skip
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config)


def _batch(step: int, rank: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(step * WORLD + rank)
    return torch.randint(0, VOCAB, (BATCH, SEQ), generator=g)


def _step(model, opt, ids) -> tuple[float, float]:
    """The step's wall time and the CPU time of this (the main) thread."""
    start, cpu = time.perf_counter(), time.thread_time()
    loss = model(ids, labels=ids).loss
    loss.backward()
    opt.step()
    opt.zero_grad()
    return time.perf_counter() - start, time.thread_time() - cpu


def _collectives(trace) -> int:
    return sum(
        1 for b in trace.bound_symbols if b.sym.name in ("dist_all_reduce", "dist_all_gather", "dist_reduce_scatter")
    )


def _parameter_peak(forward, backward, shard_bytes: int) -> int:
    """Bytes of parameters a rank holds at the worst point of the executed traces: its shards, plus every buffer the
    gathers make (from the ``dist_all_gather`` that allocates it, through its ``dist_wait``, to its ``del``) and the
    full parameters ``dist_unpack_gathered`` cuts out of a bucket (``dist_pack_shards`` makes a view of the shards,
    which fsdp lays out one after the other); what the forward saves for the backward stays alive in between (the
    backward frees none of its inputs)."""
    from thunder.core.proxies import TensorProxy

    def nbytes(p):
        return math.prod(p.shape) * p.dtype.itemsize

    peak = 0
    alive: dict[str, int] = {}
    for trace in (forward, backward):
        if trace is backward:  # once each (a bucket's packed shards fill several saved slots)
            saved = forward.bound_symbols[-1].args[0][1]
            alive = {s.name: alive[s.name] for s in saved if isinstance(s, TensorProxy) and s.name in alive}
        for b in trace.bound_symbols:
            name = b.sym.name
            if name == "dist_all_gather":  # the buffer it fills: world size times the shard
                alive[b.output.name] = WORLD * nbytes(b.args[0])
            elif name == "dist_wait" and b.args[0].name in alive:
                alive[b.output.name] = alive.pop(b.args[0].name)
            elif name == "dist_unpack_gathered":
                for o in b.flat_proxy_outs:
                    alive[o.name] = nbytes(o)
            elif name == "python_del":
                for a in b.flat_proxy_args:
                    alive.pop(a.name, None)
            peak = max(peak, sum(alive.values()))
    return shard_bytes + peak


def _worker(rank: int, store: str, args) -> None:
    from thunder.executors import torch_compile

    torch_compile.COMPILE_AFTER_S = math.inf  # torch's kernels, as the tests run them
    torch.set_num_threads(1)
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=WORLD)
    from torch.distributed.fsdp import fully_shard
    from torch.nn.parallel import DistributedDataParallel

    import thunder
    from thunder.distributed import FSDPBucketingStrategy, FSDPType, ddp, fsdp, measure_gathered_memory

    base = _model(args.layers, args.embd)
    full_bytes = sum(p.numel() * p.element_size() for p in base.parameters())
    rows = []

    def compare(name, thunder_model, torch_model, note=""):
        opts = [torch.optim.SGD(m.parameters(), lr=1e-3) for m in (thunder_model, torch_model)]
        times, cpus = ([], []), ([], [])
        for step in range(args.warmup + args.steps):
            ids = _batch(step, rank)
            for i, m in enumerate((thunder_model, torch_model)):
                dist.barrier()
                t, c = _step(m, opts[i], ids)
                if step >= args.warmup:
                    times[i].append(t)
                    cpus[i].append(c)
        medians = [statistics.median(t) for t in times]
        ratios = statistics.median(a / b for a, b in zip(*times))  # step by step: both saw the same load
        cpu = "/".join(f"{statistics.median(c) * 1e3:.1f}" for c in cpus)
        rows.append((name, medians[0] * 1e3, medians[1] * 1e3, ratios, cpu, note))

    def counts(tm) -> str:
        fw, bw = thunder.last_traces(tm)[-1], thunder.last_backward_traces(tm)[-1]
        return f"{_collectives(fw)} fw + {_collectives(bw)} bw"

    if "ddp" in args.only:
        unbucketed = ddp(thunder.jit(copy.deepcopy(base)), bucket_size_in_mb=0)
        unbucketed(_batch(0, rank), labels=_batch(0, rank)).loss.backward()
        tm = ddp(thunder.jit(copy.deepcopy(base)))
        compare("DDP 25 MiB buckets", tm, DistributedDataParallel(copy.deepcopy(base)))
        rows[-1] = (*rows[-1][:5], f"collectives/step: {counts(tm)} (unbucketed: {counts(unbucketed)})")
        tm = ddp(thunder.jit(copy.deepcopy(base)), bucket_size_in_mb=1.0)
        compare("DDP 1 MiB buckets", tm, DistributedDataParallel(copy.deepcopy(base), bucket_cap_mb=1.0))
        rows[-1] = (*rows[-1][:5], f"collectives/step: {counts(tm)}")
    fsdp_configs = [c.split(":") for c in args.fsdp]
    for kind, bucketing in fsdp_configs if "fsdp" in args.only else ():
        kind = FSDPType[kind]
        tm = fsdp(
            thunder.jit(copy.deepcopy(base)),
            sharding_strategy=kind,
            bucketing_strategy=FSDPBucketingStrategy[bucketing],
        )
        reference = copy.deepcopy(base)  # torch's FSDP2 as its docs shard a transformer: each block, then the root
        for block in reference.transformer.h:
            fully_shard(block, reshard_after_forward=kind is FSDPType.ZERO3)
        fully_shard(reference, reshard_after_forward=kind is FSDPType.ZERO3)
        compare(f"FSDP {kind.name} {bucketing} vs fully_shard", tm, reference)
        shard_bytes = sum(p.numel() * p.element_size() for p in tm.parameters())
        peak = _parameter_peak(thunder.last_traces(tm)[-1], thunder.last_backward_traces(tm)[-1], shard_bytes)
        with measure_gathered_memory() as measured:
            _step(tm, torch.optim.SGD(tm.parameters(), lr=0.0), _batch(0, rank))
        measured_peak = shard_bytes + measured.peak
        rows[-1] = (
            *rows[-1][:5],
            f"collectives/step: {counts(tm)}; peak parameter memory/rank of the model's {full_bytes / 2**20:.2f} MiB: "
            f"traces {peak / full_bytes:.3f}, measured {measured_peak / full_bytes:.3f}",
        )
    if rank == 0:
        print(f"GPT-2 style, {args.layers} layers, n_embd {args.embd}, batch {BATCH}x{SEQ} per rank, {WORLD} processes "
              f"(gloo, CPU, 1 thread each); medians of {args.steps} steps after {args.warmup}; times in ms; ratio: "
              f"median of the step-by-step ratios; load average {load} at the start, "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")  # fmt: skip
        print(f"| {'configuration':<32} | thunder | torch | ratio | main-thread CPU thunder/torch | notes |")
        print(f"|{'-' * 34}|--------:|------:|------:|------:|-------|")
        for name, a, b, r, cpu, note in rows:
            print(f"| {name:<32} | {a:7.1f} | {b:5.1f} | {r:5.2f} | {cpu} | {note} |")
    dist.destroy_process_group()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--embd", type=int, default=128)
    parser.add_argument("--only", nargs="+", choices=("ddp", "fsdp"), default=("ddp", "fsdp"))
    parser.add_argument("--fsdp", nargs="+", default=("ZERO2:BLOCK", "ZERO3:BLOCK", "ZERO3:LAYER", "ZERO3:NONE", "ZERO3:AUTO"),
                        help="the FSDP configurations, sharding:bucketing")  # fmt: skip
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        mp.spawn(_worker, args=(os.path.join(tmp, "store"), args), nprocs=WORLD)


if __name__ == "__main__":
    main()
