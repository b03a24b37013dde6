"""Collectives as ops of the traces, run by ``torch.distributed`` through the torch executor.

Note [Pending tensors]
An async collective (``all_reduce``, ``all_gather``, ``reduce_scatter``) starts the communication and
returns its result tensor at once, *pending*: ``torch.distributed`` is still writing into it. Only
``wait`` reads a pending tensor: it waits for the communication (the ``Work`` rides on the tensor) and
returns the finished value under a new name. Between the two, the trace runs whatever compute the
data allows, which is where communication overlaps computation. A pending tensor's proxy has the shape
of the finished value.

Process groups are not values of a trace: each is registered once (``register_group``) and named in the
trace by a small integer, ``group=0``.

The ops and what carries them:
- ``synchronize(p, group)``: DDP's mark on a replicated parameter; the identity in the forward. Its
  gradient is the parameter's gradient, all-reduced by the bucketing pass of the backward
  (Note [Gradient buckets] in ``thunder.distributed.transforms.ddp``). Run outside thunder's autograd (torch's
  autograd running the trace), it all-reduces the gradient itself.
- ``pack_bucket(*grads, world_size)`` -> one flat tensor (``cat`` of the gradients / world size);
  ``unpack_bucket(flat, shapes)`` -> the gradients again, as views of the reduced bucket.
- ``all_gather(shard, group, dim0)``: FSDP's gather of a parameter's padded dim-0 shards, cut to its
  ``dim0`` rows; its gradient rule is ``reduce_scatter`` of the cotangent (padded, averaged).

Layer: distributed. Imports: core, executors (the torch executor runs the ops).
"""

from __future__ import annotations

import contextlib
import math
import re
import threading
import time
from collections.abc import Iterator

import torch
import torch.distributed as dist

from thunder.core import prims as core_prims
from thunder.core.errors import ThunderRuntimeError
from thunder.core.proxies import TensorProxy
from thunder.core.rules import grad_rules
from thunder.core.symbol import DONT_DCE, UNFUSIBLE, Symbol
from thunder.executors.torchex import ex as torch_ex

__all__ = [
    "all_gather",
    "all_reduce",
    "group_of",
    "pack_bucket",
    "reduce_scatter",
    "register_group",
    "synchronize",
    "gradient_ready",
    "unpack_bucket",
    "wait",
    "executable",
    "pack_shards",
    "unpack_gathered",
    "bucket_member",
    "last_read",
    "pack_gathered_grads",
    "GatheredMemory",
    "accumulate_unsharded",
    "register_store",
    "unsynced",
    "measure_gathered_memory",
    "program_check",
    "program_agreed",
    "register_program",
    "extend_program",
    "describe",
]

# torch 2.10 renamed these two (the old names warn)
_reduce_scatter_tensor = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
all_gather_tensor = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

_groups: list[dist.ProcessGroup] = []
_groups_lock = threading.Lock()


def register_group(group: dist.ProcessGroup) -> int:
    """The integer that names ``group`` in traces (registered on first use)."""
    with _groups_lock:
        for i, g in enumerate(_groups):
            if g is group:
                return i
        _groups.append(group)
        return len(_groups) - 1


def group_of(key: int) -> dist.ProcessGroup:
    return _groups[key]


# Note [A gloo group for the gradients]
# A gloo group runs its collectives on a couple of worker threads, in the order they were issued: in ZeRO-3's
# backward, a parameter's gather for the next layer queued behind the reduce-scatters of the gradients just computed,
# and the backward waited for them (each a millisecond or more of thread wake-ups on a loaded CPU). So ``fsdp`` gives a
# gloo group a second one over the same ranks for its reduce-scatters (``register_gradient_group``), as torch's FSDP
# gives them a stream of their own on CUDA; NCCL groups keep one.
_gradient_groups: dict[int, dist.ProcessGroup] = {}


def register_gradient_group(key: int) -> None:
    """Gives the gloo group named ``key`` a second group for its reduce-scatters (Note [A gloo group for the
    gradients]); every rank of the group calls it, in the same order."""
    group = group_of(key)
    if key in _gradient_groups or dist.get_backend(group) != "gloo" or dist.get_world_size(group) == 1:
        return
    ranks = dist.get_process_group_ranks(group)
    # fsdp of a subgroup runs on its ranks alone: only they synchronize to make it
    local = len(ranks) != dist.get_world_size()
    _gradient_groups[key] = dist.new_group(ranks, backend="gloo", use_local_synchronization=local)


def _symbol(name: str, meta, impl, *, barrier: bool = False) -> Symbol:
    """A collective symbol (printed ``dist.<name>``) that the torch executor runs with ``impl``, never inside a
    fusion (the passes after claiming place and count the collectives; a fusion would hide them). A ``barrier``
    (tagged DONT_DCE) stays where it is and no fusion region spans it (Note [Finding fusion regions] in
    thunder.extend.regions): a ``wait`` so that the ops reading a gathered parameter do not move above it (with
    them, the parameter's memory), a ``reduce_scatter`` so that it starts where its gradient is complete."""
    import thunder.distributed.prims as this_module

    tags = frozenset({UNFUSIBLE, DONT_DCE} if barrier else {UNFUSIBLE})
    sym = Symbol(name=name, meta=meta, id=f"thunder.distributed.{name}", module=this_module, module_alias="dist",
                 tags=tags)  # fmt: skip
    op = torch_ex.make_symbol(f"dist_{name}", impl, like=sym, tags=tags)
    torch_ex.register_implementation(sym, op=op)
    _executable[sym] = op
    return sym


_executable: dict[Symbol, Symbol] = {}


def executable(sym: Symbol) -> Symbol:
    """The torch executor's symbol that runs the collective ``sym``: what passes that run after the executors
    claimed the ops (the bucketing and scheduling passes) put in a trace."""
    return _executable[sym]


# -- pending tensors -------------------------------------------------------------------------------


def _start(result: torch.Tensor, work, finish=None, what: str = "", holders: int = 1) -> torch.Tensor:
    """``result``, pending on ``work``; ``holders``: the references to it (``_use_count``) besides the collective's."""
    result._thunder_pending = (work, finish, what, holders)
    return result


def _wait_impl(t: torch.Tensor) -> torch.Tensor:
    pending = t.__dict__.pop("_thunder_pending", None)
    if pending is None:
        raise ThunderRuntimeError("dist.wait: the tensor is not the result of an async collective (a bug in a trace)")
    work, finish, what, holders = pending
    try:
        work.wait()
    except RuntimeError as e:
        if "timed out" not in str(e).lower():
            raise
        raise ThunderRuntimeError(
            f"the {what} of {list(t.shape)} elements did not complete within the process group's timeout: another "
            "rank probably failed before it (see that rank's error) or runs a different program. Set the timeout with "
            f"torch.distributed.init_process_group(..., timeout=datetime.timedelta(...)). ({e})"
        ) from e
    del work, pending
    _released(t, holders)
    return finish(t) if finish is not None else t


def _released(t: torch.Tensor, holders: int, limit_s: float = 0.5) -> None:
    """Returns once no one but the trace holds the result of a finished collective. Gloo's worker thread drops its
    reference to the collective's tensors (its result and, for a reduce-scatter, the padded input) only after ``wait``
    returned, whenever the scheduler runs it (on a loaded machine, 2 ms later in one wait out of five): a buffer that
    the trace frees would stay allocated while the next gather allocates its own, above the schedule's peak (Note
    [ZeRO-3's schedule] in thunder.distributed.transforms.fsdp). NCCL's references are the watchdog's, on CUDA.
    ``limit_s`` only bounds a miscount: the wait is microseconds, milliseconds with both cores busy."""
    if t.device.type != "cpu":
        return
    deadline = time.perf_counter() + limit_s
    while t._use_count() > holders and time.perf_counter() < deadline:
        time.sleep(0)


def _wait_meta(t: TensorProxy) -> TensorProxy:
    return TensorProxy.like(t)


wait = _symbol("wait", _wait_meta, _wait_impl, barrier=True)


@grad_rules.register(wait)
def _wait_grad(g, out, t):
    return (g,)


# -- all_reduce ------------------------------------------------------------------------------------


def _all_reduce_impl(t: torch.Tensor, group: int) -> torch.Tensor:
    holders = t._use_count()
    return _start(t, dist.all_reduce(t, group=group_of(group), async_op=True), what="all_reduce", holders=holders)


all_reduce = _symbol("all_reduce", lambda t, group: TensorProxy.like(t, requires_grad=False), _all_reduce_impl)


# -- buckets ---------------------------------------------------------------------------------------


def _pack_impl(*grads_and_world):
    *grads, world = grads_and_world
    flat = torch.cat([g.reshape(-1) for g in grads])
    return flat.div_(world)


def _pack_meta(*grads_and_world):
    *grads, world = grads_and_world
    numel = sum(math.prod(int(d) for d in g.shape) for g in grads)  # parameters' shapes: static (ddp's _static)
    return TensorProxy(shape=(numel,), dtype=grads[0].dtype, device=grads[0].device, requires_grad=False)


pack_bucket = _symbol("pack_bucket", _pack_meta, _pack_impl)


def _unpack_impl(flat: torch.Tensor, shapes: tuple) -> tuple:
    sizes = [math.prod(s) for s in shapes]
    return tuple(part.view(s) for part, s in zip(torch.split(flat, sizes), shapes))


def _unpack_meta(flat: TensorProxy, shapes: tuple) -> tuple:
    return tuple(TensorProxy(shape=tuple(s), dtype=flat.dtype, device=flat.device, requires_grad=False) for s in shapes)


unpack_bucket = _symbol("unpack_bucket", _unpack_meta, _unpack_impl)


# -- DDP's mark on a replicated parameter ------------------------------------------------------------


class _AllReduceGrad(torch.autograd.Function):
    """The identity, whose backward all-reduces (averages) the gradient: ``synchronize`` under torch's autograd."""

    @staticmethod
    def forward(ctx, p, group):
        ctx.group = group
        return p.view_as(p)

    @staticmethod
    def backward(ctx, g):
        g = g / dist.get_world_size(group_of(ctx.group))
        dist.all_reduce(g, group=group_of(ctx.group))
        return g, None


def _synchronize_impl(p: torch.Tensor, group: int) -> torch.Tensor:
    if torch.is_grad_enabled() and p.requires_grad:  # torch's autograd runs the trace (Note in transforms/ddp.py)
        return _AllReduceGrad.apply(p, group)
    return p


synchronize = _symbol("synchronize", lambda p, group: TensorProxy.like(p), _synchronize_impl)


def _gradient_ready_meta(g: TensorProxy) -> TensorProxy:
    return TensorProxy.like(g, requires_grad=False)


# The identity on a parameter's finished gradient, and a barrier: fusion regions of the backward end there, so
# the bucket that needs this gradient can start before the rest of the backward runs (Note [Gradient buckets]).
gradient_ready = _symbol("gradient_ready", _gradient_ready_meta, lambda g: g, barrier=True)


@grad_rules.register(synchronize)
def _synchronize_grad(g, out, p, group):
    return (gradient_ready(g), None)


# -- FSDP: gather a parameter's shards, reduce-scatter its gradient --------------------------------


def _gather_padded(shard: torch.Tensor, group: dist.ProcessGroup) -> tuple[torch.Tensor, object]:
    world = dist.get_world_size(group)
    out = shard.new_empty((world * shard.shape[0], *shard.shape[1:]))
    _count_gathered(out)
    return out, all_gather_tensor(out, shard.contiguous(), group=group, async_op=True)


class _GatherFn(torch.autograd.Function):
    """``all_gather`` under torch's autograd (Note in transforms/fsdp.py): gathers now, reduce-scatters the gradient."""

    @staticmethod
    def forward(ctx, shard, group, dim0):
        ctx.group = group
        out, work = _gather_padded(shard, group_of(group))
        work.wait()
        return out[:dim0]

    @staticmethod
    def backward(ctx, g):
        pending = _reduce_scatter_impl(g, ctx.group)
        return _wait_impl(pending), None, None


def _all_gather_impl(shard: torch.Tensor, group: int, dim0: int) -> torch.Tensor:
    if torch.is_grad_enabled() and shard.requires_grad:
        full = _GatherFn.apply(shard, group, dim0)
        return _start(full, _Done(), holders=full._use_count())
    out, work = _gather_padded(shard, group_of(group))
    return _start(out, work, lambda t: t[:dim0] if t.shape[0] != dim0 else t, what="all_gather")


class _Done:
    def wait(self) -> None:
        return None


def _all_gather_meta(shard: TensorProxy, group: int, dim0: int) -> TensorProxy:
    return TensorProxy.like(shard, shape=(dim0, *shard.shape[1:]))


all_gather = _symbol("all_gather", _all_gather_meta, _all_gather_impl)


def _reduce_scatter_impl(g: torch.Tensor, group: int) -> torch.Tensor:
    pg = _gradient_groups[group] if group in _gradient_groups else group_of(group)
    world = dist.get_world_size(pg)
    rows = -(-g.shape[0] // world) * world
    padded = g.new_zeros((rows, *g.shape[1:]))
    padded[: g.shape[0]] = g
    padded.div_(world)
    out = g.new_empty((rows // world, *g.shape[1:]))
    return _start(out, _reduce_scatter_tensor(out, padded, group=pg, async_op=True), what="reduce_scatter")


def _reduce_scatter_meta(g: TensorProxy, group: int, rows: int) -> TensorProxy:
    return TensorProxy.like(g, shape=(rows, *g.shape[1:]), requires_grad=False)


reduce_scatter = _symbol(
    "reduce_scatter", _reduce_scatter_meta, lambda g, group, rows: _reduce_scatter_impl(g, group), barrier=True
)


@grad_rules.register(all_gather)
def _all_gather_grad(g, out, shard, group, dim0):
    return (wait(reduce_scatter(g, group, shard.shape[0])), None, None)


# -- FSDP under no_sync: the gradients accumulate unsharded, locally ---------------------------------
# Under ``no_sync`` each gathered parameter passes through ``unsynced`` (the identity), whose gradient rule adds the
# parameter's full gradient into a store of the transform's (``accumulate_unsharded``) and gives its input no
# gradient: the ``all_gather`` before it then has none to reduce-scatter. Leaving ``no_sync`` reduce-scatters what
# the store holds (Note [no_sync under fsdp] in thunder.distributed.transforms.fsdp).

_stores: list[dict[str, torch.Tensor]] = []


def register_store(store: dict[str, torch.Tensor]) -> int:
    """The integer that names ``store`` (parameter name -> accumulated full gradient) in traces."""
    with _groups_lock:
        _stores.append(store)
        return len(_stores) - 1


def _accumulate_impl(g: torch.Tensor, store: int, name: str) -> None:
    grads = _stores[store]
    if name in grads:
        grads[name].add_(g)
    else:
        grads[name] = g.detach().clone()


accumulate_unsharded = _symbol("accumulate_unsharded", lambda g, store, name: None, _accumulate_impl, barrier=True)


class _UnsyncedFn(torch.autograd.Function):
    """``unsynced`` under torch's autograd: the identity, whose backward accumulates the gradient."""

    @staticmethod
    def forward(ctx, full, store, name):
        ctx.store, ctx.name = store, name
        return full.view_as(full)

    @staticmethod
    def backward(ctx, g):
        _accumulate_impl(g, ctx.store, ctx.name)
        return None, None, None


def _unsynced_impl(full: torch.Tensor, store: int, name: str) -> torch.Tensor:
    if torch.is_grad_enabled() and full.requires_grad:
        return _UnsyncedFn.apply(full, store, name)
    return full


unsynced = _symbol("unsynced", lambda full, store, name: TensorProxy.like(full), _unsynced_impl)


@grad_rules.register(unsynced)
def _unsynced_grad(g, out, full, store, name):
    accumulate_unsharded(g, store, name)
    return (None, None, None)


def comment(text: str) -> None:
    """A comment line in the trace (what a collective carries)."""
    core_prims.comment(text)


# -- FSDP's buckets: several parameters' shards in one collective ----------------------------------
# A bucket's shards are packed into one flat tensor per rank (``pack_shards``), gathered (``all_gather`` of a 1-d
# tensor: W rank segments one after the other) and cut into the full parameters (``unpack_gathered``: parameter i
# is the i-th piece of every segment, stacked on dim 0 and cut to its rows). The gradients go back the same way:
# ``pack_gathered_grads`` lays them out as the gathered tensor was, ``reduce_scatter`` gives each rank its segment,
# ``unpack_bucket`` cuts it into the shards' gradients.


def _numel(shape) -> int:
    return math.prod(int(d) for d in shape)


def _pack_shards_meta(*shards):
    numel = sum(_numel(s.shape) for s in shards)
    return TensorProxy(
        shape=(numel,),
        dtype=shards[0].dtype,
        device=shards[0].device,
        requires_grad=any(s.requires_grad for s in shards),
    )


def _pack_shards_impl(*shards: torch.Tensor) -> torch.Tensor:
    """The shards one after the other: a view where they lie so already (``fsdp`` makes a bucket's shards views of
    one flat tensor), else a copy (and always a copy where torch's autograd records it)."""
    first = shards[0]
    adjacent = not torch.is_grad_enabled() and all(s.is_contiguous() for s in shards)
    if adjacent:
        start, size = first.data_ptr(), first.element_size()
        position = start
        for s in shards:
            adjacent = (
                adjacent
                and s.data_ptr() == position
                and s.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
            )
            position += s.numel() * size
    if adjacent:
        return first.as_strided((sum(s.numel() for s in shards),), (1,), first.storage_offset())
    return torch.cat([s.reshape(-1) for s in shards])


pack_shards = _symbol("pack_shards", _pack_shards_meta, _pack_shards_impl)


@grad_rules.register(pack_shards)
def _pack_shards_grad(g, out, *shards):
    return tuple(unpack_bucket(g, tuple(tuple(int(d) for d in s.shape) for s in shards)))


def _unpack_gathered_impl(flat: torch.Tensor, world: int, shapes: tuple, dim0s: tuple) -> tuple:
    segments = flat.view(world, -1)
    out, offset = [], 0
    for shape, dim0 in zip(shapes, dim0s):
        n = _numel(shape)
        out.append(segments[:, offset : offset + n].reshape(world * shape[0], *shape[1:])[:dim0])
        offset += n
        _count_gathered(out[-1])  # a copy (the rank segments interleave), counted until freed
    return tuple(out)


def _unpack_gathered_meta(flat: TensorProxy, world: int, shapes: tuple, dim0s: tuple) -> tuple:
    return tuple(
        TensorProxy(shape=(d0, *s[1:]), dtype=flat.dtype, device=flat.device, requires_grad=flat.requires_grad)
        for s, d0 in zip(shapes, dim0s)
    )


unpack_gathered = _symbol("unpack_gathered", _unpack_gathered_meta, _unpack_gathered_impl)


def _pack_gathered_grads_impl(*args):
    *grads, world, shapes = args
    columns = []
    for g, shape in zip(grads, shapes):
        padded = g.new_zeros((world * shape[0], *shape[1:]))
        padded[: g.shape[0]] = g
        columns.append(padded.reshape(world, -1))
    return torch.cat(columns, dim=1).reshape(-1)


def _pack_gathered_grads_meta(*args):
    *grads, world, shapes = args
    return TensorProxy(
        shape=(world * sum(_numel(s) for s in shapes),), dtype=grads[0].dtype, device=grads[0].device,
        requires_grad=False,
    )  # fmt: skip


pack_gathered_grads = _symbol("pack_gathered_grads", _pack_gathered_grads_meta, _pack_gathered_grads_impl)


@grad_rules.register(unpack_gathered)
def _unpack_gathered_grad(g, out, flat, world, shapes, dim0s):
    return (pack_gathered_grads(*g, world, shapes), None, None, None)


# A bucket's full parameter as ``unpack_gathered`` makes it: the identity, whose gradient rule marks where that
# parameter's gradient is complete (``gradient_ready``, a barrier). The bucket's gradient rule runs only once all its
# parameters' gradients are complete; without the marks, a fusion region of the backward would run on past a
# parameter's last read into the next parameters' (ZeRO-3 gathers them again in the backward: they would all be
# alive at once), where a parameter of its own ends the region with its reduce-scatter (Note [ZeRO-3's schedule] in
# thunder.distributed.transforms.fsdp).
bucket_member = _symbol("bucket_member", lambda full: TensorProxy.like(full), lambda full: full)


@grad_rules.register(bucket_member)
def _bucket_member_grad(g, out, full):
    return (gradient_ready(g),)


# ZeRO-3's mark after the last read of a gathered parameter in the forward: a barrier, so that the fusion region that
# reads it ends there and the parameter is freed before the compute that follows, where the next gather can start
# (Note [ZeRO-3's schedule] in thunder.distributed.transforms.fsdp). No result, no gradient; it goes after the split.
last_read = _symbol("last_read", lambda full: None, lambda full: None, barrier=True)


# -- the ranks run the same program ------------------------------------------------------------------
# Note [Ranks that run different programs]
# Every rank must issue the same collectives in the same order; a rank that took another path in Python (a branch on
# its rank, on a value that differs between ranks) compiles another program, and mismatched collectives abort the
# process inside gloo (different sizes) or wait until the group's timeout (different kinds). So each forward starts by
# gathering, asynchronously, a fingerprint of the collectives of the program it runs, forward and backward
# (``program_check``), and compares them before its first other collective or its return (``program_agreed``): where
# they differ, every rank raises, naming the first collective that differs. One small collective per call, whose
# round trip overlaps the forward's first ops.

_programs: list[list[str]] = []  # per compilation: what each of its collectives is, in order


def register_program(collectives: list[str]) -> int:
    """The integer that names, in traces, a compilation whose collectives ``collectives`` describes."""
    with _groups_lock:
        _programs.append(list(collectives))
        return len(_programs) - 1


def extend_program(key: int, collectives: list[str]) -> None:
    """Adds the backward's collectives to compilation ``key``'s (its forward calls the check)."""
    _programs[key].extend(collectives)


def _fingerprint(key: int) -> int:
    import hashlib

    digest = hashlib.blake2b("\n".join(_programs[key]).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _program_check_impl(group: int, key: int, world: int) -> torch.Tensor:
    pg = group_of(group)
    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend(pg) == "nccl" else "cpu"
    mine = torch.tensor([_fingerprint(key)], dtype=torch.int64, device=device)
    everyone = torch.empty(world, dtype=torch.int64, device=device)
    return _start(everyone, all_gather_tensor(everyone, mine, group=pg, async_op=True), what="program check")


program_check = _symbol(
    "program_check",
    lambda group, key, world: TensorProxy(
        shape=(world,), dtype=torch.int64, device=torch.device("cpu"), requires_grad=False
    ),
    _program_check_impl,
)


def _program_agreed_impl(everyone: torch.Tensor, group: int, key: int) -> None:
    fingerprints = everyone.tolist()
    if len(set(fingerprints)) == 1:
        return
    pg = group_of(group)
    ranks = dist.get_process_group_ranks(pg)
    descriptions: list = [None] * len(ranks)
    dist.all_gather_object(descriptions, _programs[key], group=pg)  # every rank is here: all saw the difference
    me = dist.get_rank()
    other = next(r for r, f in zip(ranks, fingerprints) if f != fingerprints[ranks.index(me)])
    mine, theirs = descriptions[ranks.index(me)], descriptions[ranks.index(other)]
    k = next((i for i, (a, b) in enumerate(zip(mine, theirs)) if a != b), min(len(mine), len(theirs)))

    def show(collectives):
        return collectives[k] if k < len(collectives) else f"nothing more (its {len(collectives)} collectives end)"

    raise ThunderRuntimeError(
        f"the ranks run different distributed programs: collective {k + 1} of rank {me}'s program is {show(mine)}, "
        f"rank {other}'s is {show(theirs)}. Every rank must take the same path through the model (a branch on the "
        "rank, on a value or a batch shape that differs between ranks compiles another program): make the branch "
        "the same on every rank, or move what differs out of the module given to ddp/fsdp (Note [Ranks that run "
        "different programs])."
    )


program_agreed = _symbol("program_agreed", lambda everyone, group, key: None, _program_agreed_impl, barrier=True)


def describe(trace) -> list[str]:
    """What each collective of ``trace`` is, in order (its kind, what it carries, shapes and dtypes)."""
    names = {"dist_all_gather", "dist_all_reduce", "dist_reduce_scatter"}
    out = []
    for b in trace.bound_symbols:
        if b.sym.name in names:
            t = b.args[0]
            what = "" if re.fullmatch(r"t\d+", t.name) else f"{t.name} "  # a parameter's name, not a number
            out.append(f"{b.sym.name.removeprefix('dist_')} of {what}({str(t.dtype).removeprefix('torch.')} "
                       f"{list(t.shape)}) into {list(b.output.shape)}")  # fmt: skip
    return out


# -- measuring the memory of gathered parameters at run time ---------------------------------------


class GatheredMemory:
    """What ``measure_gathered_memory`` measured: ``peak``, the most bytes of gathered parameters alive at once in
    this process (every buffer a gather fills and every full parameter a bucket's ``unpack_gathered`` copies out,
    from its allocation until its storage is freed), and ``allocations``, how many such buffers were made. The
    bytes alive rise only at these allocations, where they are summed, so ``peak`` is exact; it leaves out the
    local shards, which are the module's parameters."""

    def __init__(self):
        self.peak = 0
        self.allocations = 0
        self._live: list[tuple[object, int]] = []  # (weak reference to a storage, its bytes)
        self._lock = threading.Lock()

    def _allocated(self, t: torch.Tensor) -> None:
        from torch.multiprocessing.reductions import StorageWeakRef

        storage = t.untyped_storage()
        with self._lock:
            self._live = [(ref, n) for ref, n in self._live if not ref.expired()]
            if any(ref.cdata == storage._cdata for ref, _ in self._live):
                return  # a view of a buffer already counted (one rank: unpacking a bucket copies nothing)
            self._live.append((StorageWeakRef(storage), storage.nbytes()))
            self.allocations += 1
            self.peak = max(self.peak, sum(n for _, n in self._live))


_measuring: list[GatheredMemory] = []


def _count_gathered(t: torch.Tensor) -> None:
    for m in _measuring:
        m._allocated(t)


@contextlib.contextmanager
def measure_gathered_memory() -> Iterator[GatheredMemory]:
    """Measures, while inside, the peak bytes of gathered parameters this process holds at once (under ``fsdp``;
    ``GatheredMemory``): ``with measure_gathered_memory() as m: train_step(); print(m.peak)``."""
    m = GatheredMemory()
    _measuring.append(m)
    try:
        yield m
    finally:
        _measuring.remove(m)
