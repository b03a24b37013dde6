"""Runs a test's worker in several processes with a gloo process group on this machine, under a time limit.

``run_workers(fn, world_size, tmp_path, *args)`` spawns ``world_size`` processes that each call
``fn(rank, world_size, *args)`` inside an initialized gloo group (a file store under ``tmp_path``: no ports);
an exception in any worker fails the test with its traceback; a worker still running after ``timeout`` seconds
fails it too (every process is killed), so a hang never blocks the suite. ``group_timeout_s``: the process group's
own timeout for collectives; ``backend="nccl"``: one CUDA device per rank.
"""

from __future__ import annotations

import datetime
import math
import os
import sys
import time

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

DEFAULT_TIMEOUT_S = 180.0


def _worker(
    rank: int, fn, world_size: int, store: str, args: tuple, group_timeout_s: float | None, backend: str
) -> None:
    from thunder.executors import torch_compile

    torch_compile.COMPILE_AFTER_S = math.inf  # no background compile workers in tests (as in conftest)
    torch.set_num_threads(1)
    torch.manual_seed(0)
    timeout = {} if group_timeout_s is None else {"timeout": datetime.timedelta(seconds=group_timeout_s)}
    if backend == "nccl":
        torch.cuda.set_device(rank)
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world_size, **timeout)
    fn(rank, world_size, *args)
    dist.barrier()
    dist.destroy_process_group()
    # Gloo's threads at interpreter exit now and then abort the process ("terminate called without an active
    # exception"), failing a test that passed: a finished worker leaves without the exit-time teardown. (A worker
    # that raised leaves through spawn, which keeps its traceback for the test even if the exit then aborts.)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_workers(
    fn,
    world_size: int,
    tmp_path,
    *args,
    timeout: float = DEFAULT_TIMEOUT_S,
    group_timeout_s: float | None = None,
    backend: str = "gloo",
) -> None:
    store = os.path.join(str(tmp_path), f"store-{time.monotonic_ns()}")
    context = mp.start_processes(
        _worker,
        args=(fn, world_size, store, args, group_timeout_s, backend),
        nprocs=world_size,
        join=False,
        start_method="spawn",
    )
    deadline = time.monotonic() + timeout
    try:
        while not context.join(timeout=max(0.1, deadline - time.monotonic())):
            if time.monotonic() > deadline:
                pytest.fail(f"{fn.__name__}: the workers did not finish within {timeout:.0f} s (a hang?)")
    finally:
        for p in context.processes:
            if p.is_alive():
                p.kill()
                p.join(5)
