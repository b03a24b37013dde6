"""``fsdp``: fully sharded data parallel training (ZeRO-2 and ZeRO-3) with the collectives in the traces.

Note [Sharding]
Each parameter of ``d0`` rows is padded with zero rows to ``ceil(d0 / W) * W`` and cut into ``W`` equal dim-0
shards; rank ``r`` keeps shard ``r`` as the module's parameter (so ``state_dict()`` and the optimizer see only
local shards). In the forward trace each sharded parameter is gathered, ``t_w_full = dist.wait(dist.all_gather(t_w,
group, d0))`` (cut back to ``d0`` rows), and the program reads the full tensor; the gradient rule of
``all_gather`` is ``dist.reduce_scatter`` of the cotangent (padded, divided by ``W``), so each rank's shard gets
the average of the ranks' gradients of its rows.

Note [ZeRO-2 and ZeRO-3]
ZeRO-2 keeps the gathered parameters that the backward reads from the forward to the backward (saved like any
value): its gathers all start at the top of the forward and each is waited for just before its first use.
ZeRO-3 keeps only shards: in the forward each gathered parameter is freed after its last read, the backward saves
the shard instead and gathers it again where it reads it; gathers are prefetched without raising the peak of
gathered parameters (Note [ZeRO-3's schedule]). In both, each gradient's reduce-scatter starts as soon as the
gradient is computed and is waited for just before the backward returns.

Note [Buckets]
With ``FSDPBucketingStrategy.LAYER`` the parameters of one module (a Linear's weight and bias), with ``BLOCK``
those of one element of a ``ModuleList`` (a transformer block; parameters outside one are bucketed by module),
share one gather and one reduce-scatter: ``dist.pack_shards`` packs the bucket's shards, one ``dist.all_gather``
gathers them, ``dist.unpack_gathered`` cuts the full parameters out; the gradients go back through
``dist.pack_gathered_grads``, one ``dist.reduce_scatter`` and ``dist.unpack_bucket``. Fewer, larger collectives;
under ZeRO-3 a bucket is gathered whole, so its parameters are alive together.

Note [Torch's autograd runs the trace]: as for ``ddp``, ``all_gather`` run under torch's autograd is an
autograd function that reduce-scatters its gradient.

Layer: distributed. Imports: core, distributed.prims.
"""

from __future__ import annotations

import contextlib
import enum
import math
import weakref
from collections.abc import Iterator
from dataclasses import dataclass

import torch
import torch.distributed as dist

from thunder.core.errors import ThunderValueError
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import PARAMETER
from thunder.core.trace import from_trace, recording_into, tracectx
from thunder.core.transform_common import Transform
from thunder.distributed import prims as dist_prims
from thunder.distributed.common import (
    PerCompile,
    attach,
    broadcast_module,
    check_group,
    check_program,
    check_same_parameters,
    fuse_again,
    parameter_inputs,
)
from thunder.distributed.prims import executable as run

__all__ = ["fsdp", "FSDPType", "FSDPBucketingStrategy", "FSDPTransform"]


class FSDPType(enum.Enum):
    """What stays gathered between forward and backward (Note [ZeRO-2 and ZeRO-3])."""

    ZERO2 = enum.auto()  # the gathered parameters the backward reads
    ZERO3 = enum.auto()  # nothing: the backward gathers again


class FSDPBucketingStrategy(enum.Enum):
    """How parameters are grouped into collectives (Note [Buckets])."""

    NONE = enum.auto()
    LAYER = enum.auto()
    BLOCK = enum.auto()
    AUTO = enum.auto()  # from the program: as few gathers as keep ZeRO-3's peak (Note [Automatic buckets])


def fsdp(
    model: torch.nn.Module,
    *,
    device: torch.device | str | None = None,
    broadcast_from: int | None = None,
    sharding_strategy: FSDPType = FSDPType.ZERO2,
    bucketing_strategy: FSDPBucketingStrategy = FSDPBucketingStrategy.NONE,
    process_group: dist.ProcessGroup | None = None,
    move_state_dict_to_cpu: bool | None = None,
) -> torch.nn.Module:
    """Shards ``model``'s parameters over the processes of ``process_group`` (Note [Sharding]).

    Args:
        model: a module, before or after ``thunder.jit`` (both orders compile the same).
        device: where the parameters and buffers go first (default: where they are).
        broadcast_from: the rank whose parameters and buffers every rank takes before sharding, or None.
        sharding_strategy: ``FSDPType.ZERO2`` or ``FSDPType.ZERO3`` (Note [ZeRO-2 and ZeRO-3]).
        bucketing_strategy: an ``FSDPBucketingStrategy``: one collective per parameter (NONE), per module (LAYER),
            per block of a ``ModuleList`` (BLOCK) (Note [Buckets]), or chosen from the program (AUTO: consecutive
            parameters share a collective where that keeps the peak of gathered parameters, Note [Automatic buckets]).
        process_group: the ranks that share the model (default: all).
        move_state_dict_to_cpu: ``original_state_dict()`` moves each gathered parameter to the CPU as soon as it is
            gathered (None, the default: keep it on the parameter's device), as lightning-thunder's option does.

    Returns:
        ``model`` itself, its parameters now the local shards. ``ThunderModule.original_state_dict()`` gathers
        the full tensors; ``load_original_state_dict`` shards full tensors.

    See also: ``ddp``.
    """
    group = check_group("fsdp", process_group)
    if not isinstance(sharding_strategy, FSDPType):
        raise ThunderValueError(
            f"fsdp: sharding_strategy must be an FSDPType (ZERO2 or ZERO3), got {sharding_strategy!r}"
        )
    if not isinstance(bucketing_strategy, FSDPBucketingStrategy):
        raise ThunderValueError(
            "fsdp: bucketing_strategy must be an FSDPBucketingStrategy (NONE, LAYER, BLOCK or AUTO), got "
            f"{bucketing_strategy!r}"
        )
    original = getattr(model, "_model", model)
    check_same_parameters("fsdp", original, group)
    if device is not None:
        original.to(device)
    if broadcast_from is not None:
        broadcast_module(original, broadcast_from, group)
    keys = _bucket_keys(original, bucketing_strategy)
    shapes = _shard_module(original, group, keys)
    transform = FSDPTransform(group, shapes, sharding_strategy, bucketing_strategy, keys)
    transform.move_state_dict_to_cpu = bool(move_state_dict_to_cpu)
    dist_prims.register_gradient_group(transform.group_key)
    transform.module = weakref.ref(original)  # AUTO lays the shards of its buckets out together (_lay_out)
    return attach(model, transform, "fsdp")


def _bucket_keys(module: torch.nn.Module, strategy: FSDPBucketingStrategy) -> dict[str, str]:
    """The bucket of each parameter (Note [Buckets]): LAYER, the module that holds it; BLOCK, the element of a
    ``ModuleList`` it is in (a transformer block), else the module that holds it; NONE, none; AUTO, none yet (the
    program decides, ``_auto_bucket_keys``)."""
    if strategy in (FSDPBucketingStrategy.NONE, FSDPBucketingStrategy.AUTO):
        return {}
    blocks = set()
    if strategy is FSDPBucketingStrategy.BLOCK:
        for name, sub in module.named_modules():
            if isinstance(sub, torch.nn.ModuleList):
                blocks.update(f"{name}.{child}" if name else child for child, _ in sub.named_children())
    keys = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        owner = name.rpartition(".")[0]
        parts = owner.split(".") if owner else []
        block = next((".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in blocks), None)
        keys[name] = f"{block if block is not None else owner}/{p.dtype}/{p.device}"
    return keys


def _buckets(params: list, computation, keys: dict[str, str]) -> list[list]:
    """The parameters ``params`` ((position, proxy, name), the computation's inputs) grouped by bucket, the buckets
    in the order of their first use in the computation."""
    body = [b for b in computation.bound_symbols if PARAMETER not in b.sym.tags]
    first = _first_uses(body, {p.name for _, p, _ in params})
    order = sorted(params, key=lambda item: first.get(item[1].name, len(body)))
    buckets: dict[str, list] = {}
    for item in order:
        buckets.setdefault(keys.get(item[2], f"#{item[2]}"), []).append(item)
    rank = {name: i for i, name in enumerate(keys)}  # inside a bucket, the module's order: its shards' layout
    return [sorted(members, key=lambda item: rank.get(item[2], 0)) for members in buckets.values()]


# Note [Automatic buckets]
# One collective per parameter keeps the fewest gathered bytes alive but costs a collective's latency (a round trip
# and the wake-ups of the communication threads, with ranks that must meet) for each of many small parameters; one
# per block halves the collectives' count but holds a whole block. AUTO decides from the program: walking the
# parameters in the order it first reads them, each joins the previous one's bucket where that keeps the bytes of
# gathered parameters alive at once within the peak of one gather per parameter (times 1 + AUTO_PEAK_SLACK), in the
# forward (a bucket's parameters are gathered at its first read, each freed after its own last) and in the backward
# (mirrored: gathered at its last read, each freed at its own first), counting the gathered buffer alive beside the
# parameters copied out of it while a bucket is unpacked (Note [Buckets]). So the small parameters (biases, norms) ride
# with a neighbouring weight, and weights join while they are small against the largest. A parameter read in places
# far apart (a tied embedding and output layer, gathered again for each group of reads) keeps its own gathers.
AUTO_PEAK_SLACK = 0.25
AUTO_CANDIDATES = 4  # how many of the latest buckets a parameter may join


def _auto_bucket_keys(params: list, computation) -> tuple[dict[str, str], int]:
    """The bucket of each parameter ``params`` ((position, proxy, name)) for AUTO (Note [Automatic buckets]), in
    the order the computation first reads them, and the bytes of gathered parameters that may be alive at once."""
    body = [b for b in computation.bound_symbols if PARAMETER not in b.sym.tags]
    by_name = {p.name: (p, path) for _, p, path in params}
    reads: dict[str, list[int]] = {name: [] for name in by_name}
    for i, b in enumerate(body):
        for name in {a.name for a in b.flat_proxy_args if a.name in by_name}:
            reads[name].append(i)
    firsts = sorted(r[0] for r in reads.values() if r)
    forward, backward = [0] * len(body), [0] * len(body)  # gathered bytes alive while each op runs

    def add(changes: list) -> None:
        for live, start, stop, size in changes:
            for i in range(start, stop):
                live[i] += size

    alone = set()
    for name, r in reads.items():
        size = _nbytes(by_name[name][0])
        groups = [[r[0]]] if r else []
        for previous, i in zip(r, r[1:]):  # reads that another parameter's first read interrupts: gathered again
            if any(previous < f < i for f in firsts):
                groups.append([i])
            else:
                groups[-1].append(i)
        if len(groups) != 1:
            alone.add(name)
        add([(live, g[0], g[-1] + 1, size) for g in groups for live in (forward, backward)])
    budget = int(max(forward, default=0) * (1 + AUTO_PEAK_SLACK))

    def unpacking(first: int, last: int, size: int) -> list:
        """While a bucket of ``size`` bytes is unpacked, its gathered buffer is alive beside the copies."""
        return [(forward, first, first + 1, size), (backward, last, last + 1, size)]

    def joining(bucket: dict, r: list[int], n: int) -> list:
        """The changes to the bytes alive when a parameter of ``n`` bytes read at ``r`` joins ``bucket``: in the
        forward it is gathered from the bucket's first read; in the backward (mirrored) the bucket lives to the later
        of their last reads; the bucket unpacks a larger buffer."""
        first, last, size = bucket["first"], bucket["last"], bucket["size"]
        grow = [(forward, first, r[0], n)]
        grow += [(backward, last + 1, r[-1] + 1, size)] if r[-1] > last else [(backward, r[-1] + 1, last + 1, n)]
        if len(bucket["members"]) > 1:
            grow += [(live, a, b, -k) for live, a, b, k in unpacking(first, last, size)]
        return grow + unpacking(first, max(last, r[-1]), size + n)

    keys: dict[str, str] = {}
    buckets: list[dict] = []  # the buckets a parameter may join: the latest few (small ones gathered far ahead)
    for name in sorted(by_name, key=lambda n: reads[n][0] if reads[n] else len(body)):
        p, path = by_name[name]
        r, n = reads[name], _nbytes(p)
        joined = None
        for bucket in reversed(buckets[-AUTO_CANDIDATES:] if r and name not in alone else ()):
            if bucket["kind"] != (p.dtype, p.device):
                continue
            grow = joining(bucket, r, n)
            add(grow)
            if all(live[i] <= budget for live, a, b, _ in grow for i in range(a, b)):
                joined = bucket
                break
            add([(live, a, b, -k) for live, a, b, k in grow])
        if joined is not None:
            joined["last"], joined["size"] = max(joined["last"], r[-1]), joined["size"] + n
            joined["members"].append(path)
        else:  # a bucket of its own, which later parameters may join
            joined = {"kind": (p.dtype, p.device), "first": r[0] if r else 0, "last": r[-1] if r else 0, "size": n,
                      "members": [path], "key": f"auto{len(keys)}"}  # fmt: skip
            if r and name not in alone:
                buckets.append(joined)
        keys[path] = joined["key"]
    return keys, budget


def _rows(dim0: int, world: int) -> int:
    return -(-dim0 // world)


def _shard(t: torch.Tensor, group: dist.ProcessGroup) -> torch.Tensor:
    world, rank = dist.get_world_size(group), dist.get_rank(group)
    rows = _rows(t.shape[0], world)
    padded = torch.nn.functional.pad(t, (0, 0) * (t.ndim - 1) + (0, rows * world - t.shape[0])) if t.ndim else t
    return padded[rank * rows : (rank + 1) * rows].clone()


@torch.no_grad()
def _shard_module(module: torch.nn.Module, group: dist.ProcessGroup, keys: dict[str, str]) -> dict[str, torch.Size]:
    """Makes each parameter its local shard, in place (``p.data``): the same ``Parameter`` objects, so tied parameters
    stay tied and an optimizer made before ``fsdp`` steps the shards (any ``.grad`` of the full parameter is dropped).
    The shards of a bucket (``keys``) are views of one flat tensor, in the module's order, so that
    ``dist.pack_shards`` packs them without a copy. Returns the full shapes by name."""
    shapes: dict[str, torch.Size] = {}
    for name, p in module.named_parameters(remove_duplicate=False):
        if p.ndim == 0:
            raise ThunderValueError(
                f"fsdp: the parameter {name!r} is 0-dimensional; fsdp shards dim 0 of each parameter. Keep it out of "
                "the module given to fsdp, or make it 1-dimensional (shape [1])"
            )
        shapes[name] = p.shape
    buckets: dict[str, list[torch.nn.Parameter]] = {}
    for name, p in module.named_parameters():
        full_shape = p.shape
        p.data = _shard(p.data, group)
        p.grad = None
        p._thunder_traced_shape = full_shape  # the program is traced with the full parameter
        buckets.setdefault(keys.get(name, f"#{name}"), []).append(p)
    for members in buckets.values():
        _lay_out(members)
    return shapes


@torch.no_grad()
def _lay_out(params: list[torch.nn.Parameter]) -> None:
    """Makes the shards ``params`` views of one flat tensor, one after the other (where they are not already), so
    that ``dist.pack_shards`` packs them without a copy and the forward saves no copy for the backward."""
    first = params[0].data
    position = first.data_ptr()
    adjacent = True
    for p in params:
        adjacent = adjacent and p.data.is_contiguous() and p.data.data_ptr() == position
        adjacent = adjacent and p.data.untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
        position += p.numel() * p.element_size()
    if adjacent or len(params) == 1:
        return
    flat = torch.cat([p.data.reshape(-1) for p in params])
    offset = 0
    for p in params:
        p.data = flat[offset : offset + p.numel()].view(p.shape)
        offset += p.numel()


class FSDPTransform(Transform):
    """The trace changes of ``fsdp`` (Notes [Sharding], [ZeRO-2 and ZeRO-3])."""

    distributed = True

    def __init__(self, group: dist.ProcessGroup, shapes: dict[str, torch.Size], sharding_strategy: FSDPType,
                 bucketing_strategy: FSDPBucketingStrategy, bucket_keys: dict[str, str] | None = None,
                 unsynced: tuple[dict, int] | None = None):  # fmt: skip
        self.group = group
        self.group_key = dist_prims.register_group(group)
        self.world_size = dist.get_world_size(group)
        self.shapes = dict(shapes)
        self.sharding_strategy = sharding_strategy
        self.bucketing_strategy = bucketing_strategy
        self.bucket_keys = dict(bucket_keys or {})  # parameter name -> its bucket (absent: a bucket of its own)
        # under no_sync: the store of accumulated full gradients and its key (Note [no_sync under fsdp])
        self.unsynced = unsynced
        self._without_sync: FSDPTransform | None = None
        self.module: weakref.ref | None = None  # the sharded module (AUTO lays out its buckets' shards)
        self._compile = PerCompile()
        self.move_state_dict_to_cpu = False  # original_state_dict()'s gathered tensors go to the CPU

    def without_sync(self) -> FSDPTransform:
        """This transform with no reduce-scatter: what ``no_sync()`` compiles with (Note [no_sync under fsdp])."""
        store: dict[str, torch.Tensor] = {}
        return FSDPTransform(self.group, self.shapes, self.sharding_strategy, FSDPBucketingStrategy.NONE,
                             unsynced=(store, dist_prims.register_store(store)))  # fmt: skip

    @contextlib.contextmanager
    def no_sync(self, module) -> Iterator[None]:
        """Runs ``module`` with its ``without_sync`` compilation; on exit, reduce-scatters the full gradients the
        backwards inside accumulated into the shards' ``.grad`` (Note [no_sync under fsdp])."""
        if self._without_sync is None:  # one for the module's no_sync compilation (``_using_variant`` keeps it)
            self._without_sync = self.without_sync()
        variant = self._without_sync
        store = variant.unsynced[0]
        with module._using_variant("no_sync", lambda: tuple(
            variant if t is self else t for t in module._options.transforms
        )):  # fmt: skip
            try:
                yield
            except BaseException:
                store.clear()  # a micro-batch failed (maybe on this rank only): no collective, nothing kept
                raise
        _reduce_scatter_accumulated(module._model, store, self.group_key)

    # -- traces --------------------------------------------------------------------------------------

    def transform_traces_pre_prologue(self, prologue_trace, computation_trace, epilogue_trace, **kwargs):
        params = list(parameter_inputs(computation_trace, set(self.shapes)))
        self._compile.forward = self._compile.program = None
        self._compile.params = [(i, path) for i, _, path in params]
        if not params:
            return prologue_trace, computation_trace, epilogue_trace
        new = from_trace(computation_trace)
        args = list(new.args)
        for i, p, _ in params:  # traced with the full shape (Note [Sharding]); what arrives is the local shard
            args[i] = TensorProxy.like(p, p.name, shape=(_rows(p.shape[0], self.world_size), *p.shape[1:]))
        gathers: list = []
        swap = {}  # parameter name -> its gathered full tensor
        with recording_into(new, gathers):
            keys, self._compile.budget = self.bucket_keys, None
            if self.bucketing_strategy is FSDPBucketingStrategy.AUTO:
                keys, self._compile.budget = _auto_bucket_keys(params, computation_trace)
            buckets = _buckets(params, computation_trace, keys)
            if self.bucketing_strategy is FSDPBucketingStrategy.AUTO:
                self._lay_out(buckets)
            for bucket in buckets:
                shards = [args[i] for i, _, _ in bucket]
                dim0s = tuple(self.shapes[path][0] for _, _, path in bucket)
                if len(bucket) == 1:
                    fulls = [dist_prims.wait(dist_prims.all_gather(shards[0], self.group_key, dim0s[0]))]
                else:
                    packed = dist_prims.pack_shards(*shards)
                    gathered = dist_prims.wait(
                        dist_prims.all_gather(packed, self.group_key, self.world_size * packed.shape[0])
                    )
                    shapes = tuple(tuple(int(d) for d in s.shape) for s in shards)
                    fulls = dist_prims.unpack_gathered(gathered, self.world_size, shapes, dim0s)
                for (_, p, _), full in zip(bucket, fulls):
                    swap[p.name] = full
        new.args = args
        names = {}
        for _, p, _ in params:  # the gathered parameter is named after its shard: t_0_weight -> t_0_weight_full
            names[swap[p.name].name] = swap[p.name].replace_name(new.safe_name(f"{p.name}_full"))
            swap[p.name] = names[swap[p.name].name]
        new.bound_symbols.extend(b.rename(names) for b in gathers)
        if self.unsynced is not None:  # no_sync: the full gradients accumulate locally (Note [no_sync under fsdp])
            with recording_into(new, new.bound_symbols):
                for _, p, path in params:
                    swap[p.name] = dist_prims.unsynced(swap[p.name], self.unsynced[1], path)
        shards = {p.name: args[i] for i, p, _ in params}
        members = (
            {p.name for bucket in buckets if len(bucket) > 1 for _, p, _ in bucket} if self.unsynced is None else set()
        )
        for b in computation_trace.bound_symbols:  # the inputs' own entries (PARAMETER) are the shards
            if PARAMETER in b.sym.tags:
                new.bound_symbols.append(b.rename(shards))
                continue
            with recording_into(new, new.bound_symbols):  # Note [Gradients of a bucket's parameters]
                for name in [a.name for a in b.flat_proxy_args if a.name in members]:
                    members.discard(name)
                    swap[name] = dist_prims.bucket_member(swap[name])
            new.bound_symbols.append(b.rename(swap))
        if self._zero3 and self.unsynced is None:
            new.bound_symbols = _mark_last_reads(new, new.bound_symbols, {f.name for f in swap.values()})
        # Placed now, before fusion: the regions then end at each wait (a barrier), so that under ZeRO-3 a fusion
        # does not need every gathered parameter at once.
        new = _schedule_gathers(new, self._zero3, after_split=False)
        if computation_trace.provenance is not None:
            new.set_provenance(computation_trace.provenance)
        return prologue_trace, new, epilogue_trace

    def _lay_out(self, buckets: list[list]) -> None:
        """AUTO: each bucket's shards views of one flat tensor, as ``fsdp`` lays out the other strategies' (the module's
        parameters stay the same objects, their shards only move)."""
        module = self.module() if self.module is not None else None
        if module is None:
            return
        params = dict(module.named_parameters(remove_duplicate=False))
        for bucket in buckets:
            if len(bucket) > 1:
                _lay_out([params[path] for _, _, path in bucket])

    @property
    def _zero3(self) -> bool:
        return self.sharding_strategy is FSDPType.ZERO3

    def transform_trace_post_optimization(self, computation_trace, **kwargs):
        if computation_trace.name == "backward":
            return self._backward(_without_marks(computation_trace, self._compile.members))
        self._compile.members = _members(computation_trace)
        computation_trace = _without_marks(computation_trace, self._compile.members)
        new = _schedule_gathers(computation_trace, self._zero3, budget=self._compile.budget)
        if self._compile.params:
            new, self._compile.program = check_program(new, self.group_key, self.world_size)
        self._compile.forward = new
        return new

    def _backward(self, bw):
        forward = self._compile.forward
        if self._zero3 and forward is not None:
            bw = _regather_in_backward(forward, bw, self.group_key, self._compile.budget)
        bw = _schedule_reduce_scatters(bw, self._compile.params)
        if self._compile.program is not None:
            dist_prims.extend_program(self._compile.program, dist_prims.describe(bw))
        return bw

    # -- state dicts ---------------------------------------------------------------------------------

    def _full_shape(self, key: str, submodule_name: str, value) -> tuple | None:
        """The unsharded shape of state-dict entry ``key`` (None: not a sharded tensor, kept as it is)."""
        if not isinstance(value, torch.Tensor):
            return None
        return self.shapes.get(key[len(submodule_name) :] if key.startswith(submodule_name) else key)

    def reverse_transform_state_dict_for_submodule(self, model, submodule_name: str, state_dict: dict) -> dict:
        """Full tensors from the local shards (a collective per parameter: every rank must call it)."""
        out = {}
        for key, value in state_dict.items():
            shape = self._full_shape(key, submodule_name, value)
            if shape is None:
                out[key] = value
                continue
            shard = value.detach()
            full = shard.new_empty((shard.shape[0] * self.world_size, *shard.shape[1:]))
            dist_prims.all_gather_tensor(full, shard.contiguous(), group=self.group)
            out[key] = full[: shape[0]].to("cpu", copy=True) if self.move_state_dict_to_cpu else full[: shape[0]].clone()
        return out

    def transform_state_dict_for_submodule(self, model, submodule_name: str, state_dict: dict) -> dict:
        """Local shards of full tensors (such as ``original_state_dict`` gives, at any world size)."""
        out = {}
        for key, value in state_dict.items():
            shape = self._full_shape(key, submodule_name, value)
            if shape is None:
                out[key] = value
                continue
            if tuple(value.shape) != tuple(shape):
                raise ThunderValueError(
                    f"load_original_state_dict: {key!r} has shape {list(value.shape)}, but the parameter's full shape "
                    f"is {list(shape)}: pass the full tensors (original_state_dict()); the local shards load with "
                    "load_state_dict"
                )
            out[key] = _shard(value.detach(), self.group)
        return out


# Note [Gradients of a bucket's parameters]
# The gradient rule of a bucket's ``unpack_gathered`` runs once all its parameters' gradients are complete, and
# emits their reduce-scatter there: a barrier that ends the backward's fusion regions. A parameter of its own has its
# barrier where its gradient completes, so no region of the backward reads parameters of two gathers that need not
# be alive together (ZeRO-3 gathers them again in the backward); in a bucket, a region would run on from a parameter's
# last read into the next parameters'. So each parameter of a bucket reaches its readers through ``bucket_member``
# (the identity), placed before its first reader, whose gradient rule is ``gradient_ready`` (a barrier): the autograd
# emits it where that parameter's gradient completes. After the split the marks have done their work and go
# (``_without_members``): the forward and backward read the unpacked parameters.


def _members(trace) -> dict[str, TensorProxy]:
    """The ``bucket_member`` marks of a trace: the name of each mark's result -> the unpacked parameter it marks."""
    return {b.output.name: b.args[0] for b in trace.bound_symbols if _is(b, dist_prims.bucket_member)}


def _without_marks(trace, members: dict[str, TensorProxy]):
    """The trace without its ``bucket_member`` marks (their results renamed to what they mark, in the backward's
    inputs too: the forward saves the marked parameters), Note [Gradients of a bucket's parameters], and without its
    ``last_read`` marks (``_mark_last_reads``)."""
    marks = (dist_prims.bucket_member, dist_prims.last_read)
    if not members and not any(_is(b, m) for b in trace.bound_symbols for m in marks):
        return trace
    new = from_trace(trace)
    new.args = [members.get(getattr(a, "name", None), a) for a in trace.args]
    new.bound_symbols = [b.rename(members) for b in trace.bound_symbols if not any(_is(b, m) for m in marks)]
    return new


def _mark_last_reads(trace, bsyms: list, fulls: set[str]) -> list:
    """``bsyms`` with a ``last_read`` mark (a barrier) after the last op that reads each gathered parameter ``fulls``
    (the return aside): the fusion region that reads it ends there, so ZeRO-3 frees it before the compute that
    follows and can start the next gather there (Note [ZeRO-3's schedule])."""
    last: dict[str, int] = {}
    for i, b in enumerate(bsyms[:-1]):
        for a in b.flat_proxy_args:
            if a.name in fulls:
                last[a.name] = i
    after: dict[int, list] = {}
    for name, i in last.items():
        full = next(a for a in bsyms[i].flat_proxy_args if a.name == name)
        with recording_into(trace, after.setdefault(i, [])):
            dist_prims.last_read(full)
    return [x for i, b in enumerate(bsyms) for x in (b, *after.get(i, ()))]


def _is(bsym, sym) -> bool:
    return bsym.sym is run(sym) or bsym.sym is sym


def _first_uses(bsyms: list, names: set[str]) -> dict[str, int]:
    first: dict[str, int] = {}
    for i, b in enumerate(bsyms):
        for a in b.flat_proxy_args:
            if a.name in names and a.name not in first:
                first[a.name] = i
    return first


@dataclass
class _Gather:
    """One gather of the forward: the ops that start it (``pack_shards`` of a bucket, ``all_gather``), the ops that
    finish it (``wait``, a bucket's ``unpack_gathered``) and the full parameters it makes."""

    starts: list
    finishes: list
    fulls: list

    @property
    def unpack(self):
        """A bucket's ``unpack_gathered`` (None for a parameter of its own)."""
        return next((b for b in self.finishes if _is(b, dist_prims.unpack_gathered)), None)

    @property
    def source(self) -> TensorProxy:
        """What the gather gathers: a parameter's shard, or a bucket's packed shards."""
        return self.starts[-1].args[0]


def _find_gathers(bsyms: list) -> list[_Gather]:
    produced = {o.name: b for b in bsyms for o in b.flat_proxy_outs}
    readers: dict[str, list] = {}
    for b in bsyms:
        for a in b.flat_proxy_args:
            readers.setdefault(a.name, []).append(b)
    found = []
    for b in bsyms:
        if not _is(b, dist_prims.all_gather):
            continue
        pack = produced.get(b.args[0].name)
        starts = [pack, b] if pack is not None and _is(pack, dist_prims.pack_shards) else [b]
        wait = next(r for r in readers[b.output.name] if _is(r, dist_prims.wait))
        unpack = next((r for r in readers.get(wait.output.name, ()) if _is(r, dist_prims.unpack_gathered)), None)
        finishes = [wait] if unpack is None else [wait, unpack]
        found.append(_Gather(starts, finishes, [wait.output] if unpack is None else list(unpack.output)))
    return found


def _schedule_gathers(trace, zero3: bool, *, after_split: bool = True, budget: int | None = None):
    """The trace with its gathers placed (Note [ZeRO-2 and ZeRO-3]): ZeRO-2 starts them all at the top; ZeRO-3 as
    Note [ZeRO-3's schedule] says, where ``after_split``, prefetching within ``budget`` bytes of gathered parameters
    (at least the trace's own peak); before the autograd split each starts just before its wait (Note [ZeRO-3's
    schedule])."""
    gathers = _find_gathers(trace.bound_symbols)
    if not gathers:
        return trace
    new = from_trace(trace)
    moved = {id(b) for g in gathers for b in (*g.starts, *g.finishes)}
    rest = [b for b in trace.bound_symbols if id(b) not in moved]
    if zero3 and after_split:
        # names given by replace_name are not all reserved in the trace: the repeats' names must differ from them
        new.names.update(p.name for b in trace.bound_symbols for p in (*b.flat_proxy_args, *b.flat_proxy_outs))
        rest, gathers = _gather_per_reads(new, rest, gathers)
    for _, _, _, bsyms in sorted(_placements(rest, gathers, zero3, prefetch=after_split, budget=budget)):
        new.bound_symbols.extend(bsyms)
    return new


# Note [ZeRO-3's schedule]
# Each gather finishes (its wait) just before the first op that reads a parameter it makes; the gathered tensors are
# freed after their last reader (delete-last-used). A parameter read in places far apart, such that other parameters
# are gathered between its reads (a tied embedding and lm_head), is gathered again for each group of reads instead
# of staying alive in between. Prefetch: a gather starts as early as the gathered tensors alive at once stay within
# what the trace needs at its worst op without prefetching (or AUTO's budget, Note [Automatic buckets]), counting a
# bucket's gathered buffer beside its unpacked parameters: prefetching overlaps communication with compute without
# raising the peak of parameter memory, and small gathers start far ahead. All this is done after the autograd split
# and fusion; before them, each gather starts just before its wait, which is a barrier: then the gradient rule of each
# gather, a reduce-scatter (a barrier too), comes right after the backward's last read of the parameter, so that no
# fusion region of the forward or the backward reads parameters of different gathers that need not be alive together.
# And a ``last_read`` mark (a barrier, gone after the split) after each parameter's last read in the forward ends the
# region that reads it there: the parameter is freed before the compute that follows (the GELU after a linear layer,
# the attention after its input projection), and the next gather starts there and overlaps that compute. In the
# backward, where no mark can go before fusion, a fusion that reads a gathered parameter is cut after the fact
# (``_end_regions_at_last_reads``): what it reads from first, then the ops computed from the parameter, then the
# rest (a linear layer's weight gradient reads only activations), so the parameter is freed before the rest and the
# next gather overlaps it (Note [Fusions after the marks] in thunder.distributed.common).


def _reads(rest: list, gathers: list[_Gather]) -> dict[int, list[int]]:
    """Per gather (``id``): the positions in ``rest`` of the ops that read a tensor it makes (the return aside)."""
    maker = {f.name: id(g) for g in gathers for f in g.fulls}
    reads: dict[int, list[int]] = {id(g): [] for g in gathers}
    for i, b in enumerate(rest[:-1]):
        for gid in {maker[a.name] for a in b.flat_proxy_args if a.name in maker}:
            reads[gid].append(i)
    return reads


def _gather_per_reads(trace, rest: list, gathers: list[_Gather]) -> tuple[list, list[_Gather]]:
    """``rest`` and ``gathers`` where a gather whose reads are interrupted by another gather's first read is repeated
    for each group of reads, the later reads renamed to the repeat's tensors (Note [ZeRO-3's schedule])."""
    reads = _reads(rest, gathers)
    firsts = sorted(r[0] for r in reads.values() if r)
    rest, out = list(rest), []
    for g in gathers:
        out.append(g)
        positions = reads[id(g)]
        current = g
        for previous, i in zip(positions, positions[1:]):
            if not any(previous < f < i for f in firsts):
                continue
            again = _repeat_gather(trace, current)
            swap = {f.name: r for f, r in zip(current.fulls, again.fulls)}
            rest[i:] = [b.rename(swap) for b in rest[i:]]
            out.append(again)
            current = again
    return rest, out


def _repeat_gather(trace, g: _Gather) -> _Gather:
    """Another gather of what ``g`` gathers, its tensors named after ``g``'s (``t_wte_weight_full_0``)."""
    scratch: list = []
    with recording_into(trace, scratch):
        source = run(dist_prims.pack_shards)(*g.starts[0].args) if len(g.starts) == 2 else g.source
        gathered = run(dist_prims.wait)(run(dist_prims.all_gather)(source, *g.starts[-1].args[1:]))
        if g.unpack is not None:
            run(dist_prims.unpack_gathered)(gathered, *g.unpack.args[1:])
    made = scratch[-1].flat_proxy_outs
    names = {}
    for m, f in zip(made, g.fulls):
        with tracectx(trace):  # reserves the name
            names[m.name] = m.replace_name(trace.safe_name(f.name))
    scratch[-1] = scratch[-1].rename(names)
    n = len(g.starts)
    return _Gather(scratch[:n], scratch[n:], list(scratch[-1].flat_proxy_outs))


def _placements(
    rest: list, gathers: list[_Gather], zero3: bool, prefetch: bool, budget: int | None
) -> list[tuple[int, int, int, list]]:
    """Where each op goes, as sortable ``(position in rest, 0 start | 1 finish | 2 the op itself, k, bsyms)``
    (Note [ZeRO-3's schedule]); every rank runs the same trace, so all issue the collectives in one order."""
    reads = _reads(rest, gathers)
    end = len(rest) - 1
    first = {id(g): reads[id(g)][0] if reads[id(g)] else end for g in gathers}
    order = sorted(gathers, key=lambda g: first[id(g)])
    out = [(i, 2, 0, [b]) for i, b in enumerate(rest)]
    if not zero3:
        for k, g in enumerate(order):
            out += [(0, 0, k, g.starts), (first[id(g)], 1, k, g.finishes)]
        return out
    size = {id(g): sum(_nbytes(f) for f in g.fulls) for g in gathers}
    live = [0] * len(rest)  # bytes of gathered tensors alive while each op runs (and while a bucket unpacks before it)
    for g in gathers:
        for i in range(first[id(g)], (reads[id(g)] or [end])[-1] + 1):
            live[i] += size[id(g)]
        if g.unpack is not None:  # a bucket's gathered buffer, alive beside the parameters copied out of it
            live[first[id(g)]] += size[id(g)]
    budget = max(max(live), budget or 0)
    for k, g in enumerate(order):
        at = first[id(g)]
        start = at
        while prefetch and start > 0 and live[start - 1] + size[id(g)] <= budget:
            start -= 1
        for i in range(start, at):
            live[i] += size[id(g)]
        out += [(start, 0, k, g.starts), (at, 1, k, g.finishes)]
    return out


def _regather_in_backward(forward, bw, group_key: int, budget: int | None):
    """ZeRO-3: the forward saves the shards of the gathered parameters (a bucket's packed shards) instead of the
    full tensors, which it frees after their last use, and the backward gathers them again where it reads them
    (Note [ZeRO-3's schedule])."""
    ret = forward.bound_symbols[-1]
    outputs, saved = ret.args[0]
    gathers = _find_gathers(forward.bound_symbols)
    of = {f.name: g for g in gathers for f in g.fulls}
    saved_names = {getattr(s, "name", None) for s in saved}
    if not saved_names & of.keys() or any(getattr(o, "name", None) in of for o in outputs):
        return bw
    forward.bound_symbols[-1] = ret.from_bsym(
        args=((outputs, tuple(of[s.name].source if getattr(s, "name", None) in of else s for s in saved)),),
        lineage=ret.lineage,
    )
    bw = _end_regions_at_last_reads(bw, {a.name for a in bw.args if getattr(a, "name", None) in of})
    new = from_trace(bw)
    args, local = [], {}  # local: id(gather) -> the backward's parameter holding its source
    for a in bw.args:
        g = of.get(getattr(a, "name", None))
        if g is None:
            args.append(a)
            continue
        with tracectx(new):  # reserves the name (a bucket's packed shards fill one slot per parameter saved)
            proxy = TensorProxy.like(g.source, new.safe_name(f"{g.source.name}_shard"), requires_grad=False)
        local.setdefault(id(g), proxy)
        args.append(proxy)
    new.args = args
    full_args = {a.name: a for a in bw.args if getattr(a, "name", None) in of}
    for g in gathers:  # each gather at the top; _schedule_gathers places them
        if id(g) not in local:
            continue
        scratch: list = []
        with recording_into(new, scratch):
            gathered = run(dist_prims.wait)(run(dist_prims.all_gather)(local[id(g)], *g.starts[-1].args[1:]))
            if g.unpack is not None:
                run(dist_prims.unpack_gathered)(gathered, *g.unpack.args[1:])
        # the gathered parameters take the names the backward reads
        made = scratch[-1].flat_proxy_outs
        scratch[-1] = scratch[-1].rename(
            {m.name: full_args[f.name] for m, f in zip(made, g.fulls) if f.name in full_args}
        )
        new.bound_symbols.extend(scratch)
    new.bound_symbols.extend(bw.bound_symbols)
    return _schedule_gathers(new, zero3=True, budget=budget)


def _end_regions_at_last_reads(bw, fulls: set[str]):
    """The backward with each fusion that reads gathered parameters ``fulls`` cut in two: first the ops that read
    them and what those need, then the rest (a linear layer's weight gradient, which reads only activations), so
    the parameters are freed before the rest runs and the next gather overlaps it (Note [ZeRO-3's schedule])."""
    out, changed = [], False
    for b in bw.bound_symbols:
        reads = fulls & {a.name for a in b.flat_proxy_args}
        parts = _cut_at_reads(b, fulls, bw) if b.sym._is_fusion and reads else None
        changed |= parts is not None
        out.extend(parts or (b,))
    if not changed:
        return bw
    new = from_trace(bw)
    new.bound_symbols = out
    return new


def _cut_at_reads(fusion, fulls: set[str], trace) -> list | None:
    """``fusion`` as up to three fusions of its executor, in this order: the ops that those computed from ``fulls``
    (a view of a parameter included) read from, these ops, then the rest, which reads nothing made from the
    parameters (Note [ZeRO-3's schedule]); None where nothing is cut off or the executor declines a part."""
    ops = list(fusion.subsymbols)
    producer = {o.name: i for i, b in enumerate(ops) for o in b.flat_proxy_outs}
    derived, reading = set(fulls), set()
    for i, b in enumerate(ops):  # the ops computed from the parameters (the trace is in SSA form: one pass)
        if derived & {a.name for a in b.flat_proxy_args}:
            derived.update(o.name for o in b.flat_proxy_outs)
            reading.add(i)
    before: set[int] = set()
    pending = [producer[a.name] for i in reading for a in ops[i].flat_proxy_args if a.name in producer]
    while pending:  # what they read from, transitively
        i = pending.pop()
        if i not in before and i not in reading:
            before.add(i)
            pending.extend(producer[a.name] for a in ops[i].flat_proxy_args if a.name in producer)
    after = set(range(len(ops))) - reading - before
    if not reading or len(reading) == len(ops):
        return None
    groups = [[ops[i] for i in sorted(part)] for part in (before, reading, after) if part]
    escaping = {o.name for o in fusion.flat_proxy_outs}
    fused = []
    for k, group in enumerate(groups):
        later = escaping | {a.name for g in groups[k + 1 :] for b in g for a in b.flat_proxy_args}
        part = fuse_again(trace, fusion, group, later)
        if part is None:
            return None
        fused.extend(part)
    return fused


def _carried(bw, params: list[tuple[int, str]]) -> dict[str, str]:
    """Per reduce-scatter (its output's name): the parameters whose gradients it carries (``params``: position among
    the backward's results, name), through its wait and, for a bucket, its ``unpack_bucket``."""
    grads = bw.bound_symbols[-1].args[0]
    by_grad: dict[str, list[str]] = {}
    for i, path in params:
        if i < len(grads) and isinstance(grads[i], TensorProxy):
            by_grad.setdefault(grads[i].name, []).append(path)
    waited = {b.args[0].name: b.output.name for b in bw.bound_symbols if _is(b, dist_prims.wait)}
    unpacked = {
        b.args[0].name: [o.name for o in b.flat_proxy_outs]
        for b in bw.bound_symbols
        if _is(b, dist_prims.unpack_bucket)
    }
    labels = {}
    for b in bw.bound_symbols:
        if _is(b, dist_prims.reduce_scatter):
            done = waited.get(b.output.name)
            names = [path for g in unpacked.get(done, [done]) for path in by_grad.get(g, ())]
            labels[b.output.name] = ", ".join(names)
    return labels


def _schedule_reduce_scatters(bw, params: list[tuple[int, str]]):
    """Each reduce-scatter right after the op computing its gradient, after a comment naming the parameters whose
    gradients it carries; its wait (and a bucket's ``unpack_bucket``, which reads the finished result) just before
    the first use of the gradients (the return), so that communication overlaps the rest of the backward."""
    labels = _carried(bw, params)
    body = bw.bound_symbols
    starts = [b for b in body if _is(b, dist_prims.reduce_scatter)]
    if not starts:
        return bw
    started = {b.output.name for b in starts}
    waits = [b for b in body if _is(b, dist_prims.wait) and b.args[0].name in started]
    waited = {w.output.name: w for w in waits}
    unpacks = {
        id(waited[b.args[0].name]): b for b in body if _is(b, dist_prims.unpack_bucket) and b.args[0].name in waited
    }
    moved = {id(b) for b in starts} | {id(b) for b in waits} | {id(b) for b in unpacks.values()}
    rest = [b for b in body if id(b) not in moved]
    produced_at = {a.name: -1 for a in bw.args if hasattr(a, "name")}
    for i, b in enumerate(rest):
        for o in b.flat_proxy_outs:
            produced_at[o.name] = i
    after: dict[int, list] = {}
    new = from_trace(bw)
    for s in starts:
        at = max((produced_at.get(a.name, -1) for a in s.flat_proxy_args), default=-1)
        if labels.get(s.output.name):
            with recording_into(new, after.setdefault(at, [])):
                dist_prims.comment(f"reduce-scatter of the gradients of {labels[s.output.name]}")
        after.setdefault(at, []).append(s)
    finished = {id(w): [w, unpacks[id(w)]] if id(w) in unpacks else [w] for w in waits}
    results = {id(w): [o.name for o in finished[id(w)][-1].flat_proxy_outs] for w in waits}
    first = _first_uses(rest, {name for names in results.values() for name in names})
    before: dict[int, list] = {}
    for w in waits:
        at = min((first[n] for n in results[id(w)] if n in first), default=len(rest) - 1)
        before.setdefault(at, []).extend(finished[id(w)])
    new.bound_symbols.extend(after.get(-1, ()))
    for i, b in enumerate(rest):
        new.bound_symbols.extend(before.get(i, ()))
        new.bound_symbols.append(b)
        new.bound_symbols.extend(after.get(i, ()))
    return new


def _nbytes(t: TensorProxy) -> int:
    return math.prod(t.shape) * t.dtype.itemsize


# Note [no_sync under fsdp]
# As torch's FSDP: the backwards inside ``no_sync`` reduce-scatter nothing; each parameter's full (unsharded) gradient
# accumulates locally, in a store of the no_sync compilation's transform (``dist.unsynced`` on each gathered parameter,
# whose gradient rule is ``dist.accumulate_unsharded``). That compilation gathers each parameter on its own (no
# buckets) and, under ZeRO-3 too, keeps the gathered parameters for its backward. Leaving the context reduce-scatters
# the accumulated gradients into the shards' ``.grad``; the next backward, outside, reduce-scatters its own, which
# autograd adds: ``.grad`` = ReduceScatter(g_1 + ... + g_{k-1}) + ReduceScatter(g_k), torch FSDP's
# ReduceScatter(g_1 + ... + g_k) up to float rounding. Each rank holds full-size gradients meanwhile, as in torch.


@torch.no_grad()
def _reduce_scatter_accumulated(module: torch.nn.Module, store: dict[str, torch.Tensor], group_key: int) -> None:
    """Adds each accumulated full gradient, reduce-scattered (averaged over the ranks), into its shard's ``.grad``
    and empties ``store``. The names in order (every rank issues the same collectives in the same order)."""
    params = dict(module.named_parameters(remove_duplicate=False))
    pending = [(params[name], dist_prims._reduce_scatter_impl(store[name], group_key)) for name in sorted(store)]
    store.clear()
    for p, part in pending:
        part = dist_prims._wait_impl(part)
        if p.grad is None:
            p.grad = part
        else:
            p.grad.add_(part)
