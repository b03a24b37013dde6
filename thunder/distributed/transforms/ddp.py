"""``ddp``: data parallel training with replicated parameters, gradients all-reduced in buckets.

Note [Gradient buckets]
Each replicated parameter enters the computation through ``dist.synchronize`` (the identity), placed just before
its first use, so the backward gives its gradient like any other, as ``dist.gradient_ready`` (the identity, and a
barrier: fusion regions end there) right after its last contribution. After the executors claimed the backward's
ops, the bucketing pass walks it in order and puts each parameter's gradient, as soon as the op that computes it
has run, into the open bucket of its dtype and device. When a bucket reaches ``bucket_size_in_mb`` (the first one:
at most 1 MiB, so that communication starts early, as torch DDP's first bucket) or the backward has no more
gradients for it, ``pack_bucket`` flattens it into one tensor divided by the world size (the only copy: the
averaged gradients are views of the reduced bucket, as torch DDP's ``gradient_as_bucket_view``) and an async
``all_reduce`` starts, right there: the rest of the backward runs while it communicates. The ``wait`` of each
bucket and the ``unpack_bucket`` that gives the averaged gradients back (views of the reduced bucket) come
last, just before the backward returns. All ranks compile the same backward, so their buckets match.

Note [Torch's autograd runs the trace]
Where thunder cannot differentiate a program, torch's autograd runs the forward trace
(``thunder.compile_stats(fn).last_autograd_fallback``). Then ``synchronize`` is an autograd function
whose backward all-reduces each gradient (one collective per parameter, not bucketed): slower, never wrong.

Layer: distributed. Imports: core, distributed.prims.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import torch
import torch.distributed as dist

from thunder.core.errors import ThunderValueError
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import PARAMETER
from thunder.core.trace import from_trace, recording_into
from thunder.core.transform_common import Transform
from thunder.distributed import prims as dist_prims
from thunder.distributed.common import (
    PerCompile,
    attach,
    broadcast_module,
    check_group,
    check_program,
    check_same_parameters,
    merge_adjacent_fusions,
    parameter_inputs,
)
from thunder.distributed.prims import executable as run

__all__ = ["ddp", "DDPTransform"]


def ddp(model: torch.nn.Module, *, broadcast_from: int | None = 0, bucket_size_in_mb: float = 25.0,
        process_group: dist.ProcessGroup | None = None) -> torch.nn.Module:  # fmt: skip
    """Makes ``model`` data parallel over the processes of ``process_group`` (default: all of them).

    Every rank checks that all ranks hold the same parameters (names, shapes, dtypes), then takes rank
    ``broadcast_from``'s parameters and buffers (None: keep each rank's own). In training, the gradients are
    averaged over the ranks in buckets of ``bucket_size_in_mb``, each all-reduced as soon as its last gradient
    is computed, while the rest of the backward runs (Note [Gradient buckets]).

    Args:
        model: a module, before or after ``thunder.jit``: ``ddp(thunder.jit(m))`` and ``thunder.jit(ddp(m))``
            compile the same.
        broadcast_from: the rank whose parameters every rank starts from, or None.
        bucket_size_in_mb: the size of a gradient bucket, in MiB (0: one bucket per gradient).
        process_group: the ranks that share the model.

    Returns:
        ``model`` itself (a ``ThunderModule`` when it was one).

    See also: ``fsdp``, ``ThunderModule.no_sync``.
    """
    group = check_group("ddp", process_group)
    if not isinstance(bucket_size_in_mb, (int, float)) or bucket_size_in_mb < 0:
        raise ThunderValueError(f"ddp: bucket_size_in_mb must be a number >= 0, got {bucket_size_in_mb!r}")
    original = getattr(model, "_model", model)
    check_same_parameters("ddp", original, group)
    if broadcast_from is not None:
        broadcast_module(original, broadcast_from, group)
    names = {name for name, _ in original.named_parameters()}
    return attach(model, DDPTransform(group, names, bucket_size_in_mb), "ddp")


class DDPTransform(Transform):
    """The trace changes of ``ddp``: ``synchronize`` on each parameter, gradient buckets in the backward."""

    distributed = True

    def __init__(self, group: dist.ProcessGroup, parameter_names: set[str], bucket_size_in_mb: float,
                 sync: bool = True):  # fmt: skip
        self.group = group
        self.group_key = dist_prims.register_group(group)
        self.world_size = dist.get_world_size(group)
        self.parameter_names = frozenset(parameter_names)
        self.bucket_bytes = int(bucket_size_in_mb * 2**20)
        self.sync = sync
        self._compile = PerCompile()

    def without_sync(self) -> DDPTransform:
        """This transform with no collective: what ``no_sync()`` compiles with."""
        return DDPTransform(self.group, self.parameter_names, self.bucket_bytes / 2**20, sync=False)

    def transform_traces_pre_prologue(self, prologue_trace, computation_trace, epilogue_trace, **kwargs):
        params = [(i, p, path) for i, p, path in parameter_inputs(computation_trace, self.parameter_names)
                  if p.requires_grad]  # fmt: skip
        self._compile.params = [(i, path) for i, _, path in params]
        if not self.sync or not params:
            return prologue_trace, computation_trace, epilogue_trace
        new = from_trace(computation_trace)
        body = computation_trace.bound_symbols
        # Each mark just before the parameter's first use: the backward then finishes the gradient (``gradient_ready``,
        # the mark's gradient) right after the parameter's last backward use (Note [Gradient buckets]).
        first: dict[str, int] = {}
        for k, b in enumerate(body):
            if PARAMETER not in b.sym.tags:
                for a in b.flat_proxy_args:
                    first.setdefault(a.name, k)
        marks: dict[int, list] = {}
        swap = {}
        for _, p, _ in params:
            with recording_into(new, marks.setdefault(first.get(p.name, len(body) - 1), [])):
                swap[p.name] = dist_prims.synchronize(p, self.group_key)
        for k, b in enumerate(body):
            new.bound_symbols.extend(marks.get(k, ()))
            # the inputs' own entries (PARAMETER) stay the inputs
            new.bound_symbols.append(b if PARAMETER in b.sym.tags else b.rename(swap))
        if computation_trace.provenance is not None:
            new.set_provenance(computation_trace.provenance)
        return prologue_trace, new, epilogue_trace

    def transform_trace_post_optimization(self, computation_trace, **kwargs):
        if computation_trace.name != "backward":
            if not any(b.sym is run(dist_prims.synchronize) for b in computation_trace.bound_symbols):
                return computation_trace
            # a step of its own, whose marks go once there is a backward (below): the explorer shows the previous
            # pass's trace as that pass made it
            forward = from_trace(computation_trace)
            forward.bound_symbols = list(computation_trace.bound_symbols)
            self._compile.forward = forward
            return forward
        forward, self._compile.forward = self._compile.forward, None
        if not self.sync or not self._compile.params:
            return computation_trace
        bw = bucket_gradients(computation_trace, self._compile.params, self.group_key, self.world_size,
                              self.bucket_bytes)  # fmt: skip
        # all the collectives are the backward's: it checks that the ranks run the same ones, its round trip
        # overlapping the backward up to the first bucket (Note [Ranks that run different programs] in distributed.prims)
        bw = check_program(bw, self.group_key, self.world_size)[0]
        # The marks have done their work: thunder's autograd differentiates the program (torch's would need the
        # forward's synchronize), the buckets are placed (Note [Fusions after the marks] in distributed.common).
        if forward is not None:  # the latest trace of the forward's history until the next pass: changed in place
            merged = merge_adjacent_fusions(_without_marks(forward, dist_prims.synchronize))
            forward.bound_symbols[:] = merged.bound_symbols
            forward.names.update(merged.names)
        return merge_adjacent_fusions(_without_marks(bw, dist_prims.gradient_ready))

    @contextlib.contextmanager
    def no_sync(self, module) -> Iterator[None]:
        """Runs ``module`` with its ``without_sync`` compilation; on exit, all-reduces the gradients the
        backwards inside accumulated (Note [no_sync] in thunder.core.module)."""
        with module._using_variant("no_sync", lambda: tuple(
            t.without_sync() if t is self else t for t in module._options.transforms
        )):  # fmt: skip
            yield
        all_reduce_grads(module, self.group, self.world_size, self.bucket_bytes)


@torch.no_grad()
def all_reduce_grads(module: torch.nn.Module, group: dist.ProcessGroup, world: int, bucket_bytes: int) -> None:
    """Averages the ``.grad`` of the module's parameters over the ranks, in buckets (their async all-reduces
    all start before the first wait). Parameters without a gradient are left so (on every rank alike: the
    ranks ran the same backward)."""
    grads = [p.grad for p in module.parameters() if p.grad is not None]
    buckets: dict[tuple, list[list[torch.Tensor]]] = {}
    for g in grads:
        open_ = buckets.setdefault((g.dtype, g.device), [[]])
        if open_[-1] and sum(x.numel() * x.element_size() for x in open_[-1]) >= max(bucket_bytes, 1):
            open_.append([])
        open_[-1].append(g)
    pending = []
    for bucket_list in buckets.values():
        for bucket in bucket_list:
            flat = torch.cat([g.reshape(-1) for g in bucket]).div_(world)
            pending.append((bucket, flat, dist.all_reduce(flat, group=group, async_op=True)))
    for bucket, flat, work in pending:
        work.wait()
        for g, part in zip(bucket, torch.split(flat, [g.numel() for g in bucket])):
            g.copy_(part.view_as(g))


#: The first bucket of a backward is at most this large (as torch DDP's): its all-reduce then starts early in the
#: backward instead of waiting for a quarter of the gradients (Note [Gradient buckets]).
FIRST_BUCKET_BYTES = 2**20


def bucket_gradients(bw, params: list[tuple[int, str]], group_key: int, world: int, bucket_bytes: int):
    """The backward with the parameters' gradients all-reduced in buckets (Note [Gradient buckets])."""
    ret = bw.bound_symbols[-1]
    grads = ret.args[0]
    carried: dict[str, tuple[TensorProxy, list[str]]] = {}  # gradient name -> (gradient, parameters it is for)
    for i, path in params:
        g = grads[i] if i < len(grads) else None
        if isinstance(g, TensorProxy):
            carried.setdefault(g.name, (g, []))[1].append(path)
    if not carried:
        return bw
    new = from_trace(bw)
    body = new.bound_symbols
    open_buckets: dict[tuple, list[TensorProxy]] = {}
    started: list[tuple[TensorProxy, list[TensorProxy]]] = []  # (pending bucket, its gradients)

    def start(key):
        members = open_buckets.pop(key)
        names = ", ".join(path for g in members for path in carried[g.name][1])
        size = sum(_nbytes(g) for g in members) / 2**20
        k = len(started)
        with recording_into(new, body):
            dist_prims.comment(f"bucket {k} ({size:.2f} MiB, {len(members)} gradients): {names}")
            flat = _named(new, body, run(dist_prims.pack_bucket)(*members, world), f"bucket{k}")
            started.append(
                (_named(new, body, run(dist_prims.all_reduce)(flat, group_key), f"bucket{k}_pending"), members)
            )

    def ready(g: TensorProxy):
        key = (g.dtype, g.device)
        bucket = open_buckets.setdefault(key, [])
        bucket.append(g)
        first = not any(m[0].dtype == g.dtype and m[0].device == g.device for _, m in started)
        if sum(_nbytes(x) for x in bucket) >= (min(bucket_bytes, FIRST_BUCKET_BYTES) if first else bucket_bytes):
            start(key)

    for a in bw.args:  # a gradient that is an input of the backward (a cotangent passed straight on)
        if getattr(a, "name", None) in carried:
            ready(carried[a.name][0])
    for bsym in bw.bound_symbols[:-1]:
        body.append(bsym)
        for o in bsym.flat_proxy_outs:
            if o.name in carried:
                ready(carried[o.name][0])
    for key in list(open_buckets):
        start(key)
    swap = {}
    with recording_into(new, body):
        for k, (pending, members) in enumerate(started):
            averaged = _named(new, body, run(dist_prims.wait)(pending), f"bucket{k}_averaged")
            reduced = run(dist_prims.unpack_bucket)(averaged, tuple(map(_static, members)))
            swap.update((g.name, r) for g, r in zip(members, reduced))
    body.append(ret.rename(swap))
    return new


def _without_marks(trace, mark):
    """``trace`` without its ``mark`` ops (identities), their results renamed to their inputs."""
    op = run(mark)
    swap = {b.output.name: b.args[0] for b in trace.bound_symbols if b.sym is op}
    if not swap:
        return trace
    new = from_trace(trace)
    new.bound_symbols = [b.rename(swap) for b in trace.bound_symbols if b.sym is not op]
    return new


def _named(trace, body: list, made: TensorProxy, name: str) -> TensorProxy:
    """``made``, the output of the last op of ``body``, under ``name`` (what the trace shows: ``bucket0``)."""
    named = made.replace_name(trace.safe_name(name))
    body[-1] = body[-1].rename({made.name: named})
    return named


def _static(t: TensorProxy) -> tuple[int, ...]:
    """A parameter's shape as ints: under ``cache="symbolic values"`` its dims are symbolic too, and a
    parameter's shape does not change (``int`` specialises them; the prologue checks it)."""
    return tuple(int(d) for d in t.shape)


def _nbytes(t: TensorProxy) -> int:
    return math.prod(_static(t)) * t.dtype.itemsize
