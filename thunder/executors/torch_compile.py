"""The torchcompile fusion executor: regions of ops compiled by TorchInductor.

It accepts every op the torch executor can run except in-place and side-effecting ops (which
must stay in order with the reads around them), Python-level symbols and ops of symbolic
numbers. The shared region finder groups them (``thunder.extend.regions``); each region of two
or more ops becomes one ``TorchCompileN`` symbol whose decomposition lists the ops it absorbed,
built by ``fusion_bound_symbol``. On its first run the region is traced to aten ops and
compiled by Inductor for the inputs of that run (CPU and GPU); later runs call the compiled
graph directly, without dynamo's guards (thunder's cache guards the inputs already). Inductor's
on-disk caches serve a second process. Single ops are declined: the torch executor runs them.

``torchcompile_background`` fuses the same regions but never makes a call wait for Inductor:
a region runs torch's kernels until those runs have taken ``COMPILE_AFTER_S`` seconds, then a
worker process compiles it (``inductor_pool``) and the calls after that run the compiled graph.
The first call costs what the torch executor's costs; only regions that run long enough to
repay a compilation are compiled.

Layer: executors. Imports: core, extend, transforms, executors.torchex, executors.inductor_pool.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
import threading
import time
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import torch
import torch.autograd.forward_ad as _forward_ad

from thunder.core import prims
from thunder.core.codegen import Printer, compile_source, replace_code, trace_source
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import DONT_DCE, IN_PLACE, UNFUSIBLE, BoundSymbol, Symbol
from thunder.core.symbolic import SymFloat, SymInt
from thunder.core.trace import TraceCtx, from_trace
from thunder.executors import inductor_pool, torchex
from thunder.executors.inductor_worker import Job, TensorSpec
from thunder.extend import FusionExecutor, Region, fusion_bound_symbol, register_executor
from thunder.transforms.delete_last_used import delete_last_used, python_del

_NOT_FUSED = frozenset({IN_PLACE, DONT_DCE, UNFUSIBLE})  # tags of the ops a region never takes
_SYMBOLIC_NUMBERS = (SymInt, SymFloat)


class TorchCompileExecutor(FusionExecutor):
    def __init__(self, name: str, *, background: bool, only: Only | None = None):
        super().__init__(name)
        self.background = background
        self.only = only
        # Until its regions are compiled they run torch's kernels, one per op, and a recomputation
        # is then a kernel more: a GPT-2 training step took 1.33x eager's time instead of 1.04x.
        self.rematerializes = not background

    @property
    def unavailable_reason(self) -> str | None:
        """An executor of a few ops takes CUDA tensors' ops only (Note [Executors of a few ops]): without a CUDA device
        it takes nothing, so the explorer shows it as unavailable rather than as a toggle that changes nothing."""
        if self.only is not None and not torch.cuda.is_available():
            return "takes only ops on CUDA tensors (lightning-thunder's executor for nvFuser's slow regions); no CUDA device here"
        return None

    def lookup_implementation(self, sym: Symbol):
        if sym.tags & _NOT_FUSED or sym.printer is not None:
            return None
        return torchex.ex.lookup_implementation(sym)

    def can_execute(self, bsym: BoundSymbol) -> bool:
        # A symbolic number (``cache="symbolic values"``) is an expression of names that regions do
        # not list as inputs or outputs: ops reading or making one are left to the torch executor.
        # A small convolution runs the direct kernels (Note [Small convolutions]), which Inductor
        # lowers badly (its fallback rejects their non-contiguous gradients): the torch executor runs it.
        # In the background mode a tensor of symbolic shape is left to the torch executor too: a
        # compiled graph holds for one shape, so each new shape (each token of a generation) would
        # warm up anew and never compile, paying the region's timing on every call (a GPT-2 decode
        # step took 1.23x eager's time, 0.89x with the torch executor alone).
        info = self.lookup_implementation(bsym.sym)
        return (
            info is not None
            and (self.only is None or self.only.takes(bsym))
            and info.execution_transform is None
            and not self._symbolic(bsym)
            and not torchex.runs_direct_conv(bsym)
        )

    def declines_parts_of(self, bsym: BoundSymbol) -> bool:
        # An op of a symbolic size runs whole on torch: its parts of static shape (the indices' normalisation of
        # an indexing op) would take little work into a region and leave the rest as many small torch ops.
        # Batch norm on the CPU runs whole too (Note [Batch norm runs whole on the CPU]). In the background mode an
        # in-place op runs whole as well: its out-of-place part in a region and the ``copy_`` left after it are two
        # kernels where torch runs one, for as long as the region runs uncompiled, and for good where it settles
        # on torch's kernels (ResNet's ``num_batches_tracked.add_(1)``: its training step took 1.05x the torch
        # executor's time).
        if self._symbolic(bsym) or (self.background and IN_PLACE in bsym.sym.tags):
            return True
        return bsym.sym.id in _WHOLE_ON_CPU and all(
            a.device.type == "cpu" for a in bsym.flat_proxy_args if isinstance(a, TensorProxy)
        )

    def _symbolic(self, bsym: BoundSymbol) -> bool:
        # Asked of every op and every part of its decomposition when the trace is claimed: one loop, no generators.
        background = self.background
        for values in (bsym.flat_args, bsym.flat_outs):
            for a in values:
                if isinstance(a, _SYMBOLIC_NUMBERS):
                    return True
                if background and isinstance(a, TensorProxy):
                    for d in a.shape:
                        if type(d) is not int:
                            return True
        return False

    def fuse(self, region: Region, trace: TraceCtx) -> list[BoundSymbol] | None:
        """One ``TorchCompileN`` fusion for ``region``; a single op is declined (torch runs it)."""
        if len(region.bound_symbols) < 2:
            return None
        if self.only is not None and not any(b.sym.id in self.only.required for b in region.bound_symbols):
            return None
        # What the compiled region runs: the torch executor's symbol for each op (an op of a fusion being cut in
        # two, as thunder.distributed's ZeRO-3 cuts the backward's at a gathered parameter's last read, has it already).
        ops = [
            b if b.sym.executor is torchex.ex else b.from_bsym(sym=torchex.ex.lookup_implementation(b.sym).symbol,
                                                               lineage=b.lineage)
            for b in region.bound_symbols
        ]  # fmt: skip
        return [
            fusion_bound_symbol(
                region,
                trace,
                prefix="TorchCompile",
                factory=functools.partial(_Compiled, background=self.background),
                bound_symbols=ops,
            )
        ]


# Note [Executors of a few ops]
# lightning-thunder's ``torchcompile_cat`` and ``torchcompile_xentropy`` (listed by name in programs written for it,
# such as litgpt's, beside nvFuser) give Inductor only the regions nvFuser runs slowly: a region of a few ops on
# CUDA tensors that holds a concatenation (rotary embeddings) or a cross-entropy. Elsewhere they take nothing, and
# the executors after them in the list run the ops. The ops are named by this project's symbol ids.
@dataclasses.dataclass(frozen=True)
class Only:
    """What an executor of a few ops takes (Note [Executors of a few ops]): ops whose id is in ``ops``, on CUDA
    tensors only, in regions that hold one of ``required``."""

    ops: frozenset
    required: frozenset

    def takes(self, bsym: BoundSymbol) -> bool:
        return bsym.sym.id in self.ops and all(
            a.device.type == "cuda" for a in bsym.flat_proxy_args if isinstance(a, TensorProxy)
        )


_CAT = frozenset({"torch.cat", prims.cat.id})
_CROSS_ENTROPY = frozenset({"torch.log_softmax", "torch.nll_loss", "torch.cross_entropy"})
_CAT_OPS = _CAT | {"torch.split", "torch.sum"} | {
    p.id for p in (prims.add, prims.broadcast_in_dim, prims.convert_element_type, prims.full, prims.mul, prims.neg,
                   prims.pad, prims.reshape, prims.slice_prim, prims.transpose, prims.div, prims.erf)
}  # fmt: skip
_CROSS_ENTROPY_OPS = _CROSS_ENTROPY | {"torch.sum", "torch.take_along_dim", "torch.contiguous"} | {
    p.id for p in (prims.broadcast_in_dim, prims.convert_element_type, prims.div, prims.ne, prims.neg, prims.pad,
                   prims.reshape, prims.slice_prim, prims.where)
}  # fmt: skip


# Note [Batch norm runs whole on the CPU]
# Batch norm updates its running statistics in place, so this executor never takes it whole; it took its
# decomposition's parts, a dozen elementwise ops split over two regions (the parts that read only the running
# statistics join the region before). Run uncompiled those parts cost about twice torch's one batch_norm
# kernel, and compiled they were no faster than it: a small ResNet's forward took 0.71x eager's time with the
# defaults against 0.42x with the torch executor alone. On the CPU it runs whole, on torch's kernel (0.48x).
_WHOLE_ON_CPU = {"torch.batch_norm", "torch.batch_norm_with_stats"}


_functorch_active = torch._C._are_functorch_transforms_active


class _Compiled:
    """Runs the region as a graph compiled by Inductor, called directly: no dynamo, no guards.

    The region's Python callable is traced to an FX graph of aten ops (``make_fx``) and compiled
    by Inductor (``standalone_compile``) for the inputs of its first call; a compiled graph
    holds only for inputs like those, so there is one per input signature (``_signature``:
    shapes, strides, grad mode and the values of non-tensor inputs, baked in). Thunder's cache
    guards the rest, so a static trace meets one signature per layout of its inputs; with
    ``cache="symbolic values"`` each new shape compiles once, up to ``MAX_COMPILATIONS``;
    further signatures, and a region Inductor cannot compile, run the region's ops uncompiled
    (torch's kernels), with a warning. In the background mode a signature runs uncompiled
    until a worker has compiled it; ``status()`` says where each signature stands.
    """

    def __init__(self, region_trace: TraceCtx, *, background: bool = False):
        self.region_trace = region_trace
        # What runs uncompiled frees each intermediate after its last use, as the torch executor's trace does: a
        # region that kept them all to its end made a GPT-2 forward 10-18% slower while it warmed up.
        self._uncompiled_trace = delete_last_used(region_trace)
        self.background = background
        self.compiled: dict[tuple, Callable] = {}
        self.uncompiled_reasons: dict[tuple, str] = {}
        # Background mode: seconds the region has run uncompiled before its first compilation (None
        # after: then per signature, None once submitted). Until then no call pays for a signature.
        self._warm_up_s: float | None = 0.0 if background else None
        self._warm_up_calls = 0  # calls warming up (Note [The warm-up samples its calls])
        # Background mode: torch's kernels, once they beat the compiled graph of every signature met;
        # then calls skip the signature (a couple of microseconds a call on a small region).
        self._settled: Callable | None = None
        # The compiled graph of the only signature met, and the grad mode it was met in: calls skip the signature
        # (Note [One signature needs no key]).
        self._only: tuple[bool, Callable] | None = None
        # Background mode: while the only signature met compiles in a worker, the grad mode it was met in and
        # torch's kernels: calls skip the signature and the timing (Note [While the only signature compiles]).
        self._pending: tuple[bool, Callable] | None = None
        self._all_tensors = all(isinstance(a, TensorProxy) for a in region_trace.args)
        self._uncompiled_s: dict[tuple, float | None] = {}
        self._lock = threading.Lock()
        # (trace, its compiled function), weakly, for each compiled trace that calls this region: where it runs
        # inline once settled (Note [A settled region runs inline]).
        self._callers: list[tuple[weakref.ref, weakref.ref]] = []

    def __thunder_compiled_into__(self, trace: TraceCtx, fn: Callable) -> None:
        """``trace``, which calls this region, was compiled into ``fn`` (``TraceCtx.python_callable``)."""
        with self._lock:
            self._callers = [(t, f) for t, f in self._callers if t() is not None and f() is not None]
            self._callers.append((weakref.ref(trace), weakref.ref(fn)))
            settled = self._settled is not None
        if settled:
            _inline_settled(trace, fn)

    def __call__(self, *args):
        if _forward_ad._current_level >= 0 or _functorch_active():  # Note [Forward-mode AD runs torch's kernels]
            return self._uncompiled_trace.python_callable()(*args)
        only = self._only
        if only is not None and torch.is_grad_enabled() is only[0]:
            try:
                return only[1](*args)
            except AssertionError:  # another layout: Inductor's graph checks its inputs' sizes and strides first
                self._only = None
        pending = self._pending
        if pending is not None and torch.is_grad_enabled() is pending[0]:
            return pending[1](*args)
        if self._settled is not None:
            return self._settled(*args)
        if self._warm_up_s is not None:
            return self._warm_up(args)
        key = _signature(args)
        compiled = self.compiled.get(key)
        if compiled is None:
            if self.background:
                return self._run_until_compiled(key, args)
            compiled = self.compiled[key] = self._compile(key, args)
            if key not in self.uncompiled_reasons:
                self._keep_only(key, compiled)
        return compiled(*args)

    def _keep_only(self, key: tuple, graph: Callable) -> None:
        """``graph``, Inductor's for ``key``, serves calls without their signature while ``key`` is the only one."""
        signatures = set(self.compiled) | set(self._uncompiled_s)
        self._only = (key[0], graph) if self._all_tensors and signatures == {key} else None

    def _compile(self, key: tuple, args: tuple) -> Callable:
        fn = self._uncompiled_trace.python_callable()
        name = self.region_trace.name
        if len(self.compiled) >= MAX_COMPILATIONS:
            if len(self.compiled) == MAX_COMPILATIONS:
                warnings.warn(
                    f"torchcompile: {name} was compiled for {MAX_COMPILATIONS} input signatures "
                    "(shapes, strides or numbers); new ones run uncompiled",
                    stacklevel=3,
                )
            self.uncompiled_reasons[key] = f"compiled for {MAX_COMPILATIONS} input signatures already"
            return fn
        try:
            return _compile(fn, args)
        except Exception as e:  # e.g. an op whose output shape depends on values: torch's kernels run it
            self.uncompiled_reasons[key] = f"Inductor cannot compile it ({type(e).__name__}: {e})"
            warnings.warn(
                f"torchcompile: Inductor cannot compile {name} ({type(e).__name__}: {e}); it runs uncompiled",
                stacklevel=3,
            )
            return fn

    def _warm_up(self, args: tuple):
        """Background mode, before the first compilation: torch's kernels, one call in ``WARM_UP_SAMPLE`` timed
        (Note [The warm-up samples its calls])."""
        n = self._warm_up_calls = self._warm_up_calls + 1
        if n % WARM_UP_SAMPLE and COMPILE_AFTER_S:
            return self._uncompiled_trace.python_callable()(*args)
        out, spent = self._timed(args)
        with self._lock:
            if self._warm_up_s is None:  # another thread ended the warm-up meanwhile
                return out
            self._warm_up_s += spent * WARM_UP_SAMPLE
            first = self._warm_up_s >= COMPILE_AFTER_S
            if first:
                self._warm_up_s = None
        if first:  # this call's signature is the first to compile
            self._count(_signature(args), args, COMPILE_AFTER_S)
        return out

    def _run_until_compiled(self, key: tuple, args: tuple):
        """Background mode: torch's kernels for ``key`` until a worker has compiled it."""
        out, spent = self._timed(args)
        self._count(key, args, spent)
        return out

    def _timed(self, args: tuple) -> tuple[Any, float]:
        fn = self._uncompiled_trace.python_callable()  # (built on the first call: no run of the region's ops)
        start = time.perf_counter()
        out = fn(*args)
        return out, time.perf_counter() - start

    def _count(self, key: tuple, args: tuple, spent: float) -> None:
        """Adds ``spent`` seconds to ``key``'s uncompiled time; the call that brings it to
        ``COMPILE_AFTER_S`` submits ``key`` to a worker."""
        with self._lock:
            so_far = self._uncompiled_s.get(key, 0.0)
            if so_far is None or key in self.compiled:  # submitted, or finished meanwhile
                return
            if so_far + spent < COMPILE_AFTER_S:
                self._uncompiled_s[key] = so_far + spent
                return
            self._uncompiled_s[key] = None
            submitted = sum(1 for v in self._uncompiled_s.values() if v is None)
            if self._all_tensors and not self.compiled and set(self._uncompiled_s) == {key}:
                self._pending = (key[0], self._uncompiled_trace.python_callable())
        if submitted > MAX_COMPILATIONS:
            self._finish(key, None, f"compiled for {MAX_COMPILATIONS} input signatures already")
            return
        # Note [A job is made on the pool's thread]: here only what the call knows (its inputs' signature, grad mode).
        inputs = tuple(TensorSpec.of(a) if isinstance(a, torch.Tensor) else a for a in args)
        job = functools.partial(self._job, inputs, torch.is_grad_enabled())
        inductor_pool.submit(job, functools.partial(self._finish, key))

    def _job(self, inputs: tuple, grad_enabled: bool) -> Job:
        """What a worker compiles for ``inputs`` (``TensorSpec``s and the other values) in grad mode ``grad_enabled``:
        the source of the code the region's calls ran, printed when it first ran, and its context (printing it again
        cost a T5 training step's first 100 calls 10 ms)."""
        fn = self._uncompiled_trace.python_callable()
        source, env = fn.__thunder_source__, getattr(fn, "__wrapped__", fn).__globals__
        references = {k: r for k, v in env.items() if k != "__builtins__" and (r := _reference(v)) is not None}
        ctx = {k: v for k, v in env.items() if k != "__builtins__" and k not in references}
        return Job(source, self._uncompiled_trace.function_name, ctx, references, inputs, grad_enabled, "")

    def _finish(self, key: tuple, compiled: tuple | None, reason: str | None) -> None:
        """A worker's answer: later calls of ``key`` run the compiled graph, or torch's kernels and why."""
        uncompiled = self._uncompiled_trace.python_callable()
        pending, self._pending = self._pending, None
        if isinstance(compiled, inductor_pool.Deferred):  # Note [The first load waits until it has paid]
            runner = self.compiled[key] = _Waiting(uncompiled, compiled.gain_s)
            if pending is not None:
                self._pending = (pending[0], runner)
        elif compiled is None:
            with self._lock:
                self.uncompiled_reasons[key] = reason or "not compiled"
                self.compiled[key] = uncompiled
                callers = self._settle_if_uncompiled(uncompiled)
            _inline_into(callers)
        elif TRIAL_CALLS:
            self.compiled[key] = _Trial(self, key, _tuple_results(*compiled), uncompiled)
        else:
            graph = self.compiled[key] = _tuple_results(*compiled)
            self._keep_only(key, graph)

    def _decide(self, trial: _Trial, compiled_s: float, uncompiled_s: float) -> None:
        """The end of ``trial``: the faster of the compiled graph and torch's kernels stays, each timed as the caller
        will pay for it (Note [A trial times what the caller pays])."""
        compiled_s += region_call_s()
        with self._lock:
            if self.compiled.get(trial.key) is not trial:
                return
            if compiled_s < uncompiled_s:
                self.compiled[trial.key] = trial.contenders[0]
                self._keep_only(trial.key, trial.contenders[0])
            else:
                self.uncompiled_reasons[trial.key] = (
                    f"torch's kernels were faster ({uncompiled_s * 1e6:.0f} µs a call against "
                    f"{compiled_s * 1e6:.0f} µs compiled)"
                )
                self.compiled[trial.key] = trial.contenders[1]
            callers = self._settle_if_uncompiled(trial.contenders[1])
        _inline_into(callers)

    def _settle_if_uncompiled(self, uncompiled: Callable) -> list:
        """With the lock held: where every signature met runs torch's kernels, the region settles; returns the
        callers to inline it into (Note [A settled region runs inline])."""
        if self._settled is None and all(key in self.uncompiled_reasons for key in self._uncompiled_s):
            self._settled = uncompiled
        return list(self._callers) if self._settled is not None else []

    def stays_on_torch(self) -> bool | None:
        """True once the region runs torch's kernels for good (settled), None while a background region has never run
        (nothing is decided of it), False otherwise."""
        if self._settled is not None:
            return True
        if self.background and self._warm_up_s == 0.0 and self._warm_up_calls == 0:
            return None
        return False

    def status(self) -> str:
        """Where the region stands: 'warming up' (background mode: torch's kernels run, timed),
        'compiling', 'compiled, waiting to load' (Note [The first load waits until it has paid] in
        ``inductor_pool``), 'compiled, on trial', 'compiled' or 'uncompiled: why'; per input signature,
        joined by '; ' where they differ ('not run' before a call)."""
        if self._warm_up_s is not None:
            return "warming up"
        states = []
        for key in dict.fromkeys([*self._uncompiled_s, *self.compiled]):
            if key in self.uncompiled_reasons:
                states.append(f"uncompiled: {self.uncompiled_reasons[key]}")
            elif isinstance(self.compiled.get(key), _Waiting):
                states.append("compiled, waiting to load")
            elif key in self.compiled:
                states.append("compiled, on trial" if isinstance(self.compiled[key], _Trial) else "compiled")
            else:
                states.append("compiling" if self._uncompiled_s[key] is None else "warming up")
        return "; ".join(dict.fromkeys(states)) or "not run"

    def __repr__(self) -> str:
        return f"<Inductor compilation of {self.region_trace.name}>"


# Note [While the only signature compiles]
# A worker takes seconds to compile a region, and meanwhile every call ran torch's kernels after working out its
# signature and timing them (a couple of microseconds a call on a small region: `(a*b+c)*d-e` on 2x2 tensors took
# 2.3x eager's time in its first seconds). While the region's only signature met is being compiled, calls in its
# grad mode run torch's kernels directly. A call of another signature is then not counted towards compiling its
# own (it runs torch's kernels, correct whatever its signature); it is once the worker has answered.

# Note [One signature needs no key]
# A compiled graph holds for one signature of its inputs (``_signature``: shapes, strides, grad mode), and working
# the signature out costs a call as much as a small graph (7 us for 30 inputs, then hashing it). Most regions meet
# one signature in their life, so while a region has met only one and kept Inductor's graph for it, calls in the
# same grad mode run the graph at once: Inductor's graph checks its inputs' sizes and strides before it computes
# anything (``assert_size_stride``, in C; ``compile_region`` turns Inductor's ``size_asserts`` on) and raises
# AssertionError where they differ; that call, and every call after it, takes the keyed path. Only for regions
# whose inputs are all tensors (a number would be baked in).


# Note [Forward-mode AD runs torch's kernels]
# Inside ``torch.autograd.forward_ad.dual_level()`` the inputs may be dual tensors: torch's kernels carry their
# tangents, a graph compiled by Inductor drops them (the results' tangents were None, silently). Under a torch.func
# transform (``vmap(jitted)``) they may be functorch's wrappers, which a compiled graph cannot read ("Cannot access
# data pointer"). So then the region runs its ops uncompiled, as torch's kernels (two checks a call otherwise, 60 ns).


# Note [A settled region runs inline]
# A region whose trials kept torch's kernels for every signature it met (``_settled``) runs them on every call from
# then on, whatever the signature; called through the region it paid two Python frames and its dispatch (about
# 0.4 us a call, a tenth of `(a*b+c)*d-e` on 2x2 tensors). Once it settles, each compiled trace function that calls
# it (a trace's ``python_callable`` reports itself: ``__thunder_compiled_into__``) takes new code: its trace with
# every settled region replaced by the region's ops, intermediates freed after their last use as before
# (``delete_last_used`` again). The function object stays the one the cache entry, the fused prologue and the
# autograd function hold: only its ``__code__`` changes (as for profiling ranges, Note [Profiling ranges] in
# ``thunder.core.codegen``), in one assignment, so a call under way finishes on the old code, which still works.
# The inlined function is kept on the original (``__thunder_inlined__``) so that its lines stay known to tracebacks
# and runtime error notes. The traces shown (``last_traces``) keep the fusion; its ``status()`` says why it runs
# torch's kernels.
_inline_lock = threading.Lock()  # regions of one trace settling at once in two threads: one rewrite at a time


def _inline_into(callers: list[tuple[weakref.ref, weakref.ref]]) -> None:
    for trace, fn in callers:
        trace, fn = trace(), fn()
        if trace is not None and fn is not None:
            _inline_settled(trace, fn)


def _inline_settled(trace: TraceCtx, fn: Callable) -> None:
    """``fn``, the compiled ``trace``, runs the ops of ``trace``'s settled regions in place of their calls."""
    target = getattr(fn, "__wrapped__", fn)  # a decorated trace (``torch.no_grad()``): the function inside
    with _inline_lock:
        bsyms, inlined = [], False
        for bsym in trace.bound_symbols:
            impl = bsym.sym.python_impl
            if bsym.sym is python_del:
                continue
            if type(impl) is _Compiled and impl._settled is not None:
                bsyms.extend(bsym.subsymbols)
                inlined = True
            else:
                bsyms.append(bsym)
        if not inlined:
            return
        new = from_trace(trace)
        new.bound_symbols = bsyms
        new = delete_last_used(new)
        env = target.__globals__
        printer = Printer()
        printer.ctx.update((k, v) for k, v in env.items() if k != "__builtins__")  # the names keep their values
        try:
            source = trace_source(new, print_depth=1, printer=printer, source_text=False)
        except RuntimeError:  # a name of the new source means something else here: keep the region's call
            return
        runs = compile_source(
            source, new.function_name, printer.ctx, f"thunder.{trace.name}_inlined_{trace.uid}", printer.line_bsyms
        )
        inner = getattr(runs, "__wrapped__", runs)
        if inner.__code__.co_freevars or target.__code__.co_freevars:
            return
        for k, v in printer.ctx.items():
            env.setdefault(k, v)
        fn.__thunder_inlined__ = runs
        replace_code(target, inner.__code__, new)  # and fused prologues that copied its code follow it


def _reference(value: Any) -> str | None:
    """How a worker finds ``value`` (``module:attribute.path``) where it does not pickle: a module,
    or the C++ entry of an aten overload (``torchex.overload_of``); None for the rest."""
    if isinstance(value, types.ModuleType):
        return f"{value.__name__}:"
    overload = torchex.overload_of(value)
    if overload is not None:
        return f"torch:ops.{overload.namespace}.{overload._opname}.{overload._overloadname}"
    return None


class _Waiting:
    """Background mode: torch's kernels for a signature whose compiled graph waits for the first load; each call owes
    what the graph would have saved (Note [The first load waits until it has paid] in ``inductor_pool``)."""

    __slots__ = ("uncompiled", "gain_s")

    def __init__(self, uncompiled: Callable, gain_s: float):
        self.uncompiled, self.gain_s = uncompiled, gain_s

    def __call__(self, *args):
        inductor_pool.owe(self.gain_s)
        return self.uncompiled(*args)


class _Trial:
    """Background mode: a freshly loaded graph on trial. Calls alternate between it and torch's
    kernels, timed, until each has run ``TRIAL_CALLS`` times after a first untimed one; then the
    faster stays for the signature. Inductor's generated wrapper can cost more than a small
    region's kernels (a 3-op region of small tensors, ResNet's regions around convolutions)."""

    def __init__(self, owner: _Compiled, key: tuple, compiled: Callable, uncompiled: Callable):
        self.owner, self.key = owner, key
        self.contenders = (compiled, uncompiled)
        self.times: tuple[list[float], list[float]] = ([], [])
        self.calls = 0

    def __call__(self, *args):
        which = self.calls % 2
        self.calls += 1  # a lost update between threads only shifts the alternation
        wait = torch.cuda.synchronize if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args) else None
        start = time.perf_counter()
        out = self.contenders[which](*args)
        if wait is not None:  # the kernels' time, not only their launches'
            wait()
        self.times[which].append(time.perf_counter() - start)
        compiled, uncompiled = self.times
        if min(len(compiled), len(uncompiled)) > TRIAL_CALLS:
            self.owner._decide(self, statistics.median(compiled[1:]), statistics.median(uncompiled[1:]))
        return out


#: Background mode: timed calls of each of the compiled graph and torch's kernels before one is kept.
TRIAL_CALLS = 8

# Note [A trial times what the caller pays]
# A trial times each contender called alike, from ``_Trial.__call__``. Afterwards they are not called alike: a graph
# that stays is called through the region (``_Compiled.__call__``: a frame, the grad mode, the one-signature check),
# while torch's kernels, once every signature of the region kept them, run inline in the trace (Note [A settled
# region runs inline]) and pay nothing of it. So the compiled graph's time in a trial counts the region's call too
# (``region_call_s``, measured once in a process): a graph faster by less than that would make the program slower
# (the previous measurement: each of ResNet's regions won its trial while its training step took 1.15x the torch
# executor's time).


@functools.cache
def region_call_s() -> float:
    """Seconds a call of a compiled region spends in the region's own call (``_Compiled.__call__`` before the
    graph), measured here: the fastest of a few batches of calls of a region whose graph does nothing."""
    region = object.__new__(_Compiled)
    region._only = (torch.is_grad_enabled(), _nothing)
    calls, through, direct = 200, [], []
    for _ in range(5):
        for fn, batches in ((region, through), (_nothing, direct)):
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            batches.append(time.perf_counter() - start)
    return max(0.0, (min(through) - min(direct)) / calls)


def _nothing(*args) -> tuple:
    return ()


#: In the background mode, seconds of uncompiled runs after which a region signature is compiled.
COMPILE_AFTER_S = 0.02

#: While a region warms up, one call in this many is timed; it counts for all of them.
WARM_UP_SAMPLE = 8

# Note [The warm-up samples its calls]
# A region warms up until its runs on torch's kernels have taken ``COMPILE_AFTER_S``: a small region's thousands of
# calls. Timing each (two clock reads and the lock) cost a GPT-2 forward about 2.5% over the torch executor's calls
# for as long as its regions warmed up. Only the last call of every ``WARM_UP_SAMPLE`` is timed, and counts for
# them all: the others run the region's ops at once. The region's first call is not timed: it is cold (the region's
# code compiles, torch's kernels and caches are cold), so its time says nothing of the calls to come. Timed, even
# counted once, it alone passed ``COMPILE_AFTER_S`` for the regions of the zoo's GPT-2 and T5 (2 layers, a few ms a
# call): they were submitted on the first call, which paid for printing and sending their jobs (calling-thread CPU,
# 2026-12-07: 2 ms of GPT-2's forward, 10 ms of T5's training step), and a compile worker competed for the CPU from
# the first call on. Now they are submitted after 24-56 calls. (Nor is building the region's Python function a run
# of its ops: ``_timed`` builds it before its clock starts.) ``COMPILE_AFTER_S = 0`` still submits a region on its
# first call.

MAX_COMPILATIONS = 8  # per region, as torch.compile's recompile limit


def _signature(args: tuple) -> tuple:
    """What a compiled graph is specialized to beyond what thunder guards (dtypes, devices and
    ``requires_grad`` of its inputs, which fix those of every value in the trace): grad mode,
    shapes (symbolic under ``cache="symbolic values"``), strides, and the non-tensor values."""
    return (
        torch.is_grad_enabled(),
        *[(a.shape, a.stride()) if isinstance(a, torch.Tensor) else (type(a), a) for a in args],
    )


def _compile(fn: Callable, args: tuple) -> Callable:
    """``fn`` traced to aten ops and compiled by Inductor for ``args``; returns a tuple, as ``fn``."""
    with inductor_pool.INDUCTOR_LOCK:
        return _tuple_results(*compile_region(fn, list(args)))


def compile_region(fn: Callable, args: list, *, fake_mode: Any = None) -> tuple[Any, list[torch.Tensor]]:
    """``fn`` traced to aten ops (``make_fx``) and compiled by Inductor for ``args`` (real tensors,
    or fake ones of ``fake_mode``): the compiled artifact (``torch._inductor.CompiledArtifact``)
    and the constant tensors it takes after ``args``."""
    import torch._inductor  # a second of imports: only once something is compiled
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(fn, tracing_mode="fake")(*args)
    _views_as_reshapes(gm)
    constants = _constants_as_inputs(gm)
    inputs = [*args, *(fake_mode.from_tensor(c) if fake_mode is not None else c for c in constants)]
    # Specialized to the example inputs; unlike torch._inductor.compile, this gives Inductor a
    # shape environment, which its on-disk FX graph cache needs (a second process hits it).
    # The graph checks its inputs' sizes and strides (Note [One signature needs no key]), whatever the user set.
    with torch._inductor.config.patch(size_asserts=True):
        compiled = torch._inductor.standalone_compile(
            gm, inputs, dynamic_shapes="from_example_inputs", donate_graph_module=True, fake_mode=fake_mode
        )
    return compiled, constants


def _tuple_results(compiled: Callable, constants: list[torch.Tensor]) -> Callable:
    return lambda *a: tuple(compiled(*a, *constants))


def _constants_as_inputs(gm: torch.fx.GraphModule) -> list[torch.Tensor]:
    """The graph's tensor constants (``torch.tensor(3.0)`` in the region: make_fx keeps them as
    attributes) become inputs after the others, and are returned: an Inductor artifact saved by
    a worker and loaded here would not have them."""
    graph = gm.graph
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    constants = []
    for node in list(graph.nodes):
        value = getattr(gm, node.target, None) if node.op == "get_attr" else None
        if not isinstance(value, torch.Tensor):
            continue
        where = (
            graph.inserting_after(placeholders[-1]) if placeholders else graph.inserting_before(next(iter(graph.nodes)))
        )
        with where:
            placeholder = graph.placeholder(f"constant_{len(constants)}")
        node.replace_all_uses_with(placeholder)
        graph.erase_node(node)
        delattr(gm, node.target)
        placeholders.append(placeholder)
        constants.append(value)
    if constants:
        gm.recompile()
    return constants


def _views_as_reshapes(gm: torch.fx.GraphModule) -> None:
    """``aten.view`` nodes become ``aten.reshape``. make_fx records a view where the traced strides
    allowed one (matmul's decomposition reshapes its operands), but Inductor lays out
    intermediates its own way, where the same view may be impossible ("Cannot view a tensor with
    shape ... and strides ..."). A region is functional (in-place ops stay outside), so a copy where
    a view was is the same value."""
    view, reshape = torch.ops.aten.view.default, torch.ops.aten.reshape.default
    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is view:
            node.target, changed = reshape, True
    if changed:
        gm.recompile()


ex = TorchCompileExecutor("torchcompile", background=False)
register_executor(ex)
background_ex = TorchCompileExecutor("torchcompile_background", background=True)
register_executor(background_ex)
cat_ex = TorchCompileExecutor("torchcompile_cat", background=False, only=Only(_CAT_OPS, _CAT))
register_executor(cat_ex)
xentropy_ex = TorchCompileExecutor("torchcompile_xentropy", background=False, only=Only(_CROSS_ENTROPY_OPS, _CROSS_ENTROPY))
register_executor(xentropy_ex)
# lightning-thunder's names
torch_compile_ex, torch_compile_cat_ex, torch_compile_xentropy_ex = ex, cat_ex, xentropy_ex
