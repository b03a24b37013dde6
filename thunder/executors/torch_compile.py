"""The torchcompile fusion executor: regions of ops compiled by TorchInductor.

It accepts every op the torch executor can run except in-place and side-effecting ops (which
must stay in order with the reads around them), Python-level symbols and ops of symbolic
numbers. The shared region finder groups them (``thunder.extend.regions``); each region of two
or more ops becomes one ``TorchCompileN`` symbol whose decomposition lists the ops it absorbed,
built by ``fusion_bound_symbol``. On its first run the region is traced to aten ops and
compiled by Inductor for the inputs of that run (CPU and GPU); later runs call the compiled
graph directly, without dynamo's guards (thunder's cache guards the inputs already). Inductor's
on-disk caches serve a second process. Single ops are declined: the torch executor runs them.

Layer: executors. Imports: core, extend, executors.torchex.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

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
        # A small convolution runs the direct kernels (Note [Small convolutions]), which Inductor
        # lowers badly (its fallback rejects their non-contiguous gradients): the torch executor runs it.
        info = self.lookup_implementation(bsym.sym)
        return (
            info is not None
            and info.execution_transform is None
            and not any(is_symbolic(a) for a in (*bsym.flat_args, *bsym.flat_outs))
            and not torchex.runs_direct_conv(bsym)
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
    by Inductor (``standalone_compile``) for the inputs of its first call; a compiled graph
    holds only for inputs like those, so there is one per input signature (``_signature``:
    shapes, strides, grad mode and the values of non-tensor inputs, baked in). Thunder's cache
    guards the rest, so a static trace meets one signature per layout of its inputs; with
    ``cache="symbolic values"`` each new shape compiles once, up to ``MAX_COMPILATIONS``;
    further signatures, and a region Inductor cannot compile, run the region's ops uncompiled
    (torch's kernels), with a warning.
    """

    def __init__(self, region_trace: TraceCtx):
        self.region_trace = region_trace
        self.compiled: dict[tuple, Callable] = {}

    def __call__(self, *args):
        key = _signature(args)
        compiled = self.compiled.get(key)
        if compiled is None:
            compiled = self.compiled[key] = self._compile(args)
        return compiled(*args)

    def _compile(self, args: tuple) -> Callable:
        fn = self.region_trace.python_callable()
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
            return _compile(fn, args)
        except Exception as e:  # e.g. an op whose output shape depends on values: torch's kernels run it
            warnings.warn(f"torchcompile: Inductor cannot compile {name} ({type(e).__name__}: {e}); it runs uncompiled", stacklevel=3)
            return fn

    def __repr__(self) -> str:
        return f"<Inductor compilation of {self.region_trace.name}>"


MAX_COMPILATIONS = 8  # per region, as torch.compile's recompile limit


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
    _views_as_reshapes(gm)
    # Specialized to the example inputs; unlike torch._inductor.compile, this gives Inductor a
    # shape environment, which its on-disk FX graph cache needs (a second process hits it).
    compiled = torch._inductor.standalone_compile(
        gm, list(args), dynamic_shapes="from_example_inputs", donate_graph_module=True
    )
    return lambda *a: tuple(compiled(*a))


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


ex = TorchCompileExecutor("torchcompile")
register_executor(ex)
