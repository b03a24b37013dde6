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
from thunder.core.trace import TraceCtx

__all__ = ["check_group", "check_same_parameters", "broadcast_module", "attach", "parameter_inputs", "check_program"]


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
    from thunder.core.trace import from_trace, recording_into
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
