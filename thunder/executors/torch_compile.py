"""The torchcompile fusion executor: regions of ops compiled by TorchInductor.

It accepts every op the torch executor can run except in-place and side-effecting ops (which
must stay in order with the reads around them), Python-level symbols and ops of symbolic
numbers. The shared region finder groups them (``thunder.extend.regions``); each region of two
or more ops becomes one ``TorchCompileN`` symbol whose decomposition lists the ops it absorbed,
built by ``fusion_bound_symbol``. A region is traced to aten ops and compiled by Inductor for
the inputs it runs with (CPU and GPU), in the background once it has run long enough to be
worth it (Note [Compiling in the background]); compiled, it is called directly, without
dynamo's guards (thunder's cache guards the inputs already). Inductor's on-disk caches serve a
second process. Single ops are declined: the torch executor runs them.

Layer: executors. Imports: core, extend, executors.torchex.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import functools
import threading
import time
import warnings
from collections.abc import Callable, Iterator

import torch

from thunder.core.symbol import DONT_DCE, IN_PLACE, BoundSymbol, Symbol
from thunder.core.symbolic import is_symbolic
from thunder.core.trace import TraceCtx
from thunder.executors import torchex
from thunder.extend import FusionExecutor, Region, fusion_bound_symbol, register_executor


class TorchCompileExecutor(FusionExecutor):
    def lookup_implementation(self, sym: Symbol):
        if sym.tags & {IN_PLACE, DONT_DCE} or sym.printer is not None:
            return None
        return torchex.ex.lookup_implementation(sym)

    def can_execute(self, bsym: BoundSymbol) -> bool:
        # A symbolic number (``cache="symbolic values"``) is an expression of names that regions do
        # not list as inputs or outputs: ops reading or making one are left to the torch executor.
        info = self.lookup_implementation(bsym.sym)
        return (
            info is not None
            and info.execution_transform is None
            and not any(is_symbolic(a) for a in (*bsym.flat_args, *bsym.flat_outs))
        )

    def fuse(self, region: Region, trace: TraceCtx) -> list[BoundSymbol] | None:
        """One ``TorchCompileN`` fusion for ``region``; a single op is declined (torch runs it)."""
        if len(region.bound_symbols) < 2:
            return None
        # What the compiled region runs: the torch executor's symbol for each op.
        ops = [
            b.from_bsym(sym=torchex.ex.lookup_implementation(b.sym).symbol, lineage=b.lineage)
            for b in region.bound_symbols
        ]
        return [fusion_bound_symbol(region, trace, prefix="TorchCompile", factory=_Compiled, bound_symbols=ops)]


class _Compiled:
    """Runs the region as a graph compiled by Inductor, called directly: no dynamo, no guards.

    The region's Python callable is traced to an FX graph of aten ops (``make_fx``) and compiled
    by Inductor (``standalone_compile``) for the inputs of one call, in the background or on the
    first call (Note [Compiling in the background]); a compiled graph holds only for inputs like those, so there is one per input signature (``_signature``:
    shapes, strides, grad mode and the values of non-tensor inputs, baked in). Thunder's cache
    guards the rest, so a static trace meets one signature per layout of its inputs; with
    ``cache="symbolic values"`` each new shape compiles once, up to ``MAX_COMPILATIONS``;
    further signatures, and a region Inductor cannot compile, run the region's ops uncompiled
    (torch's kernels), with a warning.
    """

    def __init__(self, region_trace: TraceCtx):
        self.region_trace = region_trace
        self.compiled: dict[tuple, Callable] = {}
        # Read when the function compiles: a rerun in the explorer compiles on the first call.
        self.background_after_s = None if _ON_FIRST_CALL.get() else BACKGROUND_AFTER_S
        self.uncompiled_s: dict[tuple, float] = {}  # per signature: seconds run uncompiled (inf: queued)
        self._lock = threading.Lock()

    @functools.cached_property
    def uncompiled(self) -> Callable:
        """The region's ops on torch's kernels. Generated on the first call, not while tracing: printing
        reads the shapes, which would constrain symbolic ones."""
        return self.region_trace.python_callable()

    def __call__(self, *args):
        key = _signature(args)
        compiled = self.compiled.get(key)
        if compiled is not None:
            return compiled(*args)
        if self.background_after_s is None:
            compiled = self.compiled[key] = self._compile(args)
            return compiled(*args)
        start = time.perf_counter()
        outputs = self.uncompiled(*args)
        spent = time.perf_counter() - start
        with self._lock:
            spent += self.uncompiled_s.get(key, 0.0)
            queue_it = spent >= self.background_after_s and spent != float("inf")
            self.uncompiled_s[key] = float("inf") if queue_it else spent
        if queue_it:
            _queue(self, key, args)
        return outputs

    def _compile_in_background(self, key: tuple, args: tuple) -> None:
        if _exiting():  # nobody will call it
            return
        with torch.set_grad_enabled(key[0]):
            self.compiled[key] = self._compile(args)

    def _compile(self, args: tuple) -> Callable:
        fn = self.uncompiled
        name = self.region_trace.name
        if len(self.compiled) >= MAX_COMPILATIONS:
            if len(self.compiled) == MAX_COMPILATIONS:
                warnings.warn(
                    f"torchcompile: {name} was compiled for {MAX_COMPILATIONS} input signatures "
                    "(shapes, strides or numbers); new ones run uncompiled",
                    stacklevel=3,
                )
            return fn
        try:
            with _INDUCTOR:
                return _compile(fn, args)
        except Exception as e:  # e.g. an op whose output shape depends on values: torch's kernels run it
            warnings.warn(f"torchcompile: Inductor cannot compile {name} ({type(e).__name__}: {e}); it runs uncompiled", stacklevel=3)
            return fn

    def __repr__(self) -> str:
        return f"<Inductor compilation of {self.region_trace.name}>"


MAX_COMPILATIONS = 8  # per region, as torch.compile's recompile limit

# Note [Compiling in the background]
# Inductor takes seconds per region (lowering, then a C++ or Triton compile), far more than a
# call of a small model costs, and most of it would never be repaid by a function that runs a
# few times. So a region first runs its ops on torch's kernels, exactly as the torch executor
# would, timing itself; once it has spent ``BACKGROUND_AFTER_S`` seconds so (per input
# signature) it is queued, with the inputs of that call as Inductor's example inputs, and one
# background thread compiles the queued regions in turn. The calls meanwhile keep running
# uncompiled; the first call after the compile finishes runs the compiled graph. A function
# therefore answers its first call at the torch executor's speed and reaches its fused steady
# state after its regions have compiled (``finish_compiling()`` waits for that). Results are
# eager's within the compiled kernels' rounding either way. ``BACKGROUND_AFTER_S = None``, or
# ``compile_on_first_call()`` around the call that compiles a function, compiles each region
# on its first call instead, blocking it (the explorer's reruns do, to show the fused state).
# Compiles are serialized (``_INDUCTOR``); at interpreter exit, queued ones are dropped.

#: Seconds a region runs uncompiled before it is queued to compile in the background; None:
#: compile on the first call, blocking. Read when a function compiles.
BACKGROUND_AFTER_S: float | None = 0.1

_ON_FIRST_CALL: contextvars.ContextVar[bool] = contextvars.ContextVar("thunder_torchcompile_on_first_call", default=False)
_INDUCTOR = threading.Lock()  # one Inductor compile at a time: its configuration is global
_WORKER = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="thunder-torchcompile")
_pending: set[concurrent.futures.Future] = set()
_pending_lock = threading.Lock()


@contextlib.contextmanager
def compile_on_first_call() -> Iterator[None]:
    """Within it (in this thread), functions that compile compile their regions on their first
    call, blocking it, instead of in the background."""
    token = _ON_FIRST_CALL.set(True)
    try:
        yield
    finally:
        _ON_FIRST_CALL.reset(token)


def _exiting() -> bool:
    return not threading.main_thread().is_alive()  # the main thread stops before others are joined


def _queue(region: _Compiled, key: tuple, args: tuple) -> None:
    future = _WORKER.submit(region._compile_in_background, key, args)
    with _pending_lock:
        _pending.add(future)
    future.add_done_callback(_done)


def _done(future: concurrent.futures.Future) -> None:
    with _pending_lock:
        _pending.discard(future)


def finish_compiling(timeout: float | None = None) -> bool:
    """Waits until the regions queued to compile in the background have compiled (or failed,
    with a warning, to run uncompiled); True unless ``timeout`` seconds passed first."""
    with _pending_lock:
        futures = set(_pending)
    _, not_done = concurrent.futures.wait(futures, timeout=timeout)
    return not not_done


def _signature(args: tuple) -> tuple:
    """What a compiled graph is specialized to beyond what thunder guards (dtypes, devices and
    ``requires_grad`` of its inputs, which fix those of every value in the trace): grad mode,
    shapes (symbolic under ``cache="symbolic values"``), strides, and the non-tensor values."""
    return (torch.is_grad_enabled(), *[(a.shape, a.stride()) if isinstance(a, torch.Tensor) else (type(a), a) for a in args])


def _compile(fn: Callable, args: tuple) -> Callable:
    """``fn`` traced to aten ops and compiled by Inductor for ``args``; returns a tuple, as ``fn``."""
    import torch._inductor  # a second of imports: only once something is compiled
    from torch.fx.experimental.proxy_tensor import make_fx

    gm = make_fx(fn, tracing_mode="fake")(*args)
    # Specialized to the example inputs; unlike torch._inductor.compile, this gives Inductor a
    # shape environment, which its on-disk FX graph cache needs (a second process hits it).
    compiled = torch._inductor.standalone_compile(
        gm, list(args), dynamic_shapes="from_example_inputs", donate_graph_module=True
    )
    return lambda *a: tuple(compiled(*a))


ex = TorchCompileExecutor("torchcompile")
register_executor(ex)
