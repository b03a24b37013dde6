"""An entry whose regions all stay on torch's kernels records its forward with torch's own autograd.

Note [A settled entry records with torch's autograd]
With the defaults (``torchcompile_background``), a program that needs gradients runs as one autograd node
(``thunder.executors.torch_autograd``) over its forward and backward traces, whose regions run torch's kernels until
a compiled graph beats them. Where every region of the forward has settled on torch's kernels (Note [A settled
region runs inline] in ``thunder.executors.torch_compile``) and every region of the backward has too or has never run
(no backward yet: an evaluation under grad mode, a forward-only loop), the node only adds its cost (about 5 us a
call: nn.Linear(8, 8) took 1.65x eager's time, 1.10x without autograd) to the same torch ops that eager runs. So the
entry's computation becomes its program before the autograd split, on torch's kernels, and torch's autograd records
it as it records eager: eager's gradients, from the same ops. Only where nothing of thunder's would be lost: no user
transform, no rematerialization, no grad-mode switch or data-dependent check, and every op of the program a torch
language symbol or primitive (a ``torch.autograd.Function``, a custom op with its own gradient formula and a
checkpointed region are not: their backward or saved-tensor policy is thunder's). The switch happens on the first
call after the last region settled (the regions' code changes tell the entry's fused prologue). What is shown tells
the truth: the computation traces end with the trace that runs, the backward traces are emptied, and
``CompileStats.last_autograd_fallback`` says why, as for a program the split cannot differentiate.

Layer: entry points. Imports: core, transforms, executors.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from thunder.core import prims
from thunder.core.trace import TraceCtx, TraceProvenance
from thunder.executors import pythonex, torchex
from thunder.executors.torch_compile import _Compiled
from thunder.transforms import delete_last_used, transform_for_execution

PASS_NAME = "Torch autograd (every region stays on torch's kernels)"
REASON = (
    "every region of this entry stays on torch's kernels: its forward runs torch's ops under torch's autograd, "
    "which records the backward as in eager (no backward trace)"
)
_TORCH_LANGUAGE = ("thunder.torch", "thunder.core.prims")


def _regions(trace: TraceCtx) -> list[_Compiled]:
    return [b.sym.python_impl for b in trace.bound_symbols if type(b.sym.python_impl) is _Compiled]


class SettledAutograd:
    """What an entry with a backward switches to once its regions settle on torch's kernels."""

    __slots__ = ("program", "forward", "backward", "stats")

    def __init__(self, program: TraceCtx, forward: TraceCtx, backward: TraceCtx, stats: Callable):
        self.program, self.forward, self.backward, self.stats = program, forward, backward, stats

    def watched(self) -> list[Callable]:
        """The compiled functions whose code changes when a region of theirs settles."""
        return [self.forward.python_callable(), self.backward.python_callable()]

    def ready(self) -> bool:
        return all(r.stays_on_torch() is True for r in _regions(self.forward)) and all(
            r.stays_on_torch() is not False for r in _regions(self.backward)
        )

    def switch(self, entry) -> tuple[Callable, TraceCtx] | None:
        """The entry's new computation and its trace (recorded in its traces and the function's stats), or None if
        its parameters are not the prologue's outputs."""
        start = time.perf_counter_ns()
        trace = delete_last_used(transform_for_execution(self.program, [torchex.ex, pythonex.ex]))
        if [getattr(a, "name", None) for a in trace.args] != [getattr(a, "name", None) for a in self.forward.args]:
            return None
        trace.set_provenance(TraceProvenance(PASS_NAME, (time.perf_counter_ns() - start) / 1e6))
        computation = trace.python_callable()
        entry.computation_traces.append(trace)
        entry.backward_traces.clear()
        cs = self.stats()
        if cs is not None and cs.last_traces is entry.computation_traces:
            cs.last_autograd_fallback = REASON
            cs.last_saved_for_backward_bytes = None
        entry.computation = computation
        return computation, trace


def settled_autograd(options, stats, traces: list[TraceCtx], split_name: str, backward: TraceCtx) -> SettledAutograd | None:
    """Where an entry may switch to torch's autograd once settled (Note [A settled entry records with torch's
    autograd]): its plan, else None. ``traces``: its computation traces; ``split_name``: the split's pass name."""
    from thunder.executors.torch_compile import background_ex

    if options.transforms or background_ex not in options.executors:
        return None
    names = [t.provenance.pass_name if t.provenance is not None else None for t in traces]
    if "Rematerialization" in names or split_name not in names or names.index(split_name) == 0:
        return None
    program, forward = traces[names.index(split_name) - 1], traces[-1]
    for bsym in program.bound_symbols:
        module = getattr(bsym.sym.module, "__name__", None)
        if module not in _TORCH_LANGUAGE or bsym.sym is prims.set_grad_enabled:
            return None
    for trace in (forward, backward):
        for bsym in trace.bound_symbols:
            impl = bsym.sym.python_impl
            if type(impl) is _Compiled:
                if not impl.background:
                    return None
            elif bsym.sym.executor not in (None, torchex.ex, pythonex.ex):
                return None
    return SettledAutograd(program, forward, backward, stats)
