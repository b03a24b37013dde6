"""What ``ddp`` and ``fsdp`` share: the process group's checks, the parameters' agreement across ranks,
and how a transform reaches the module before or after ``thunder.jit``.

Layer: distributed. Imports: core.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import torch
import torch.distributed as dist

from thunder.core.errors import ThunderValueError
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, from_trace

__all__ = [
    "check_group",
    "check_same_parameters",
    "broadcast_module",
    "attach",
    "parameter_inputs",
    "check_program",
    "fuse_again",
    "merge_adjacent_fusions",
]


def check_group(what: str, group: dist.ProcessGroup | None) -> dist.ProcessGroup:
    """The group to use (the default one when None); a clear error when torch.distributed is not set up."""
    if not dist.is_available():
        raise ThunderValueError(f"{what}: this build of PyTorch has no torch.distributed")
    if not dist.is_initialized():
        raise ThunderValueError(
            f"{what}: no torch.distributed process group is initialized. Call "
            "torch.distributed.init_process_group(backend, ...) in every process first (launch the processes with "
            "torchrun, or pass init_method=, rank= and world_size=); use backend='gloo' on CPU, 'nccl' on CUDA."
        )
    return group if group is not None else dist.group.WORLD


def check_same_parameters(what: str, module: torch.nn.Module, group: dist.ProcessGroup) -> None:
    """Raises on every rank (so none waits forever in a later collective) where the ranks' parameters differ in
    names, shapes or dtypes, naming the first parameter that differs and what each of two ranks holds."""
    local = [(name, tuple(p.shape), str(p.dtype).removeprefix("torch.")) for name, p in module.named_parameters()]
    everyone: list = [None] * dist.get_world_size(group)
    dist.all_gather_object(everyone, local, group=group)
    ranks = dist.get_process_group_ranks(group)
    first = dict((n, (s, d)) for n, s, d in everyone[0])
    for rank, theirs in zip(ranks[1:], everyone[1:]):
        other = dict((n, (s, d)) for n, s, d in theirs)
        for name in [*first, *(n for n in other if n not in first)]:  # in the module's order
            a, b = first.get(name), other.get(name)
            if a != b:

                def show(x):
                    return "no such parameter" if x is None else f"{x[1]} {list(x[0])}"

                raise ThunderValueError(
                    f"{what}: the parameter {name!r} differs between ranks: rank {ranks[0]} has {show(a)}, rank {rank} "
                    f"has {show(b)}. Every process must build the same model (same configuration) before {what}."
                )


@torch.no_grad()
def broadcast_module(module: torch.nn.Module, src: int, group: dist.ProcessGroup, *, buffers: bool = True) -> None:
    """Every rank's parameters (and buffers) become rank ``src``'s."""
    tensors = [p for p in module.parameters()] + ([b for b in module.buffers()] if buffers else [])
    for t in tensors:
        dist.broadcast(t.data, src=src, group=group)


def parameter_inputs(computation: TraceCtx, names: set[str]) -> Iterator[tuple[int, TensorProxy, str]]:
    """(position, proxy, qualified name) of each input of the computation that is one of the module's
    parameters ``names`` and requires grad (``TraceCtx.input_paths`` says which member an input is)."""
    for i, a in enumerate(computation.args):
        path = computation.input_paths.get(getattr(a, "name", None))
        if isinstance(a, TensorProxy) and path in names:
            yield i, a, path


def check_program(forward: TraceCtx, group_key: int, world: int) -> tuple[TraceCtx, int]:
    """``forward`` (the first trace of a step that has collectives: fsdp's forward, ddp's backward) with the check
    that every rank runs the same collectives (Note [Ranks that run different programs] in
    thunder.distributed.prims): it starts first and is waited for just before the first other collective (or the
    return); and the key that names the program's collectives (a later trace's join them)."""
    from thunder.core.trace import recording_into
    from thunder.distributed import prims as dist_prims
    from thunder.distributed.prims import executable as run

    key = dist_prims.register_program(dist_prims.describe(forward))
    body = forward.bound_symbols
    collectives = {run(s) for s in (dist_prims.all_gather, dist_prims.all_reduce, dist_prims.reduce_scatter)}
    at = next((i for i, b in enumerate(body) if b.sym in collectives), len(body) - 1)
    if at > 0 and body[at - 1].sym is run(dist_prims.pack_shards):
        at -= 1
    new = from_trace(forward)
    start, finish = [], []
    with recording_into(new, start):
        pending = run(dist_prims.program_check)(group_key, key, world)
    with recording_into(new, finish):
        run(dist_prims.program_agreed)(run(dist_prims.wait)(pending), group_key, key)
    new.bound_symbols = [*start, *body[:at], *finish, *body[at:]]
    return new, key


class PerCompile(threading.local):
    """What one compilation's hooks hand on to its later hooks (pre-prologue to post-optimization): one
    function compiles under its lock in one thread, so per-thread state is per-compilation state."""

    def __init__(self):
        self.params: list[tuple[int, str]] = []  # (position among the computation's inputs, qualified name)
        self.forward = None  # FSDP: the forward trace its post-optimization hook made (ZeRO-3 changes what it saves)
        # FSDP AUTO: the bytes of gathered parameters alive at once (Note [Automatic buckets])
        self.budget: int | None = None
        # FSDP: a bucket's marks, dropped after the split (Note [Gradients of a bucket's parameters])
        self.members: dict = {}
        # the key of the compilation's collectives (Note [Ranks that run different programs] in distributed.prims)
        self.program: int | None = None


# Note [ddp and fsdp before or after thunder.jit]
# ``ddp(thunder.jit(m))`` adds its transform to the ThunderModule, which compiles again with it. ``ddp(m)`` of
# a plain module changes ``m`` now (broadcast, sharding) and leaves the transform on it; ``thunder.jit(m)``
# picks it up, so both orders compile the same. Until then a call of ``m`` itself fails with a clear error
# (a forward pre-hook that ``thunder.jit`` removes): eager calls would neither synchronise nor gather.


def attach(model: torch.nn.Module, transform, what: str) -> torch.nn.Module:
    """Gives ``transform`` to ``model``: a ThunderModule compiles again with it; a plain module keeps it for
    ``thunder.jit`` (Note [ddp and fsdp before or after thunder.jit])."""
    from thunder.core.module import PENDING_TRANSFORMS, ThunderModule

    if isinstance(model, ThunderModule):
        if any(getattr(t, "distributed", False) for t in model._options.transforms):
            raise ThunderValueError(f"{what}: the module is already data parallel (ddp or fsdp was applied to it)")
        model._add_transform(transform)
        return model
    if model.__dict__.get(PENDING_TRANSFORMS):
        raise ThunderValueError(f"{what}: the module is already data parallel (ddp or fsdp was applied to it)")

    def refuse(module, args):
        raise ThunderValueError(
            f"this module was given to {what}, which works on the compiled module: call thunder.jit(module) and use "
            "what it returns (an eager call would not synchronise the processes)"
        )

    handle = model.register_forward_pre_hook(refuse)
    model.__dict__[PENDING_TRANSFORMS] = [(transform, handle)]
    return model


# Note [Fusions after the marks]
# The marks that ``ddp`` and ``fsdp`` put in the program before fusion (``synchronize``, ``gradient_ready``) are ops of
# their own, so the fusion regions end at each of them: where that serves the schedule (a bucket's all-reduce starts
# right after its last gradient), well; elsewhere it only costs a call per region and the fusion of its neighbours
# (ddp's forward of a 4-layer GPT-2 ran 28 regions where thunder.jit alone runs 2; its backward 27 against 1). Once
# the collectives are placed, the marks go and the fusions they separated are merged again (``merge_adjacent_fusions``)
# by the fusion executor that made them; ZeRO-3 cuts a backward fusion where a gathered parameter is last read
# instead (Note [ZeRO-3's schedule] in thunder.distributed.transforms.fsdp). Both rebuild fusions with ``fuse_again``.


def fuse_again(trace: TraceCtx, fusion, ops: list, escaping: set[str]) -> list | None:
    """``ops`` (executable ops of fusions that ``fusion``'s executor made) as one fusion of that executor, with the
    values named in ``escaping`` among its outputs; a single op as itself; None where the executor declines them."""
    from thunder.extend.regions import Region

    if len(ops) == 1:
        return list(ops)
    made = {o.name for b in ops for o in b.flat_proxy_outs}
    inputs = list({a.name: a for b in ops for a in b.flat_proxy_args if a.name not in made}.values())
    outputs = list({o.name: o for b in ops for o in b.flat_proxy_outs if o.name in escaping}.values())
    ex = fusion.sym.executor
    return ex.fuse(Region(ex, list(ops), inputs, outputs), trace)


def merge_adjacent_fusions(trace: TraceCtx) -> TraceCtx:
    """``trace`` with each run of consecutive fusions of one executor merged into one (Note [Fusions after the
    marks]): the order of the ops stays, so the dataflow does."""
    body = trace.bound_symbols
    runs: list[list] = []
    for b in body:
        last = runs[-1][-1] if runs else None
        if b.sym._is_fusion and last is not None and last.sym._is_fusion and last.sym.executor is b.sym.executor:
            runs[-1].append(b)
        else:
            runs.append([b])
    if all(len(run) == 1 for run in runs):
        return trace
    last_read = {a.name: k for k, run in enumerate(runs) for b in run for a in b.flat_proxy_args}
    new = from_trace(trace)
    for k, run in enumerate(runs):
        if len(run) == 1:
            new.bound_symbols.append(run[0])
            continue
        made = [o.name for f in run for o in f.flat_proxy_outs]
        later = {name for name in made if last_read.get(name, -1) > k}
        merged = fuse_again(new, run[0], [op for f in run for op in f.subsymbols], later)
        new.bound_symbols.extend(run if merged is None else merged)
    return new
