"""The torchcompile fusion executor: regions of consecutive ops compiled by TorchInductor.

It claims every op the torch executor can run except in-place ops (which must stay in order
with the reads around them) and Python-level symbols. Each region of two or more claimed
ops becomes one ``TorchCompileN`` symbol whose decomposition lists the ops it absorbed; it is
compiled by ``torch.compile`` on its first run, for the shapes of that run (CPU and GPU).

Layer: executors. Imports: core, extend, executors.torchex.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import torch

from thunder.core.proxies import Proxy
from thunder.core.symbol import DONT_DCE, IN_PLACE, BoundSymbol, Symbol
from thunder.core.trace import TraceCtx
from thunder.executors import torchex
from thunder.extend import Executor, FusionExecutor, register_executor

_fusion_ids = itertools.count()


class TorchCompileExecutor(FusionExecutor):
    def lookup_implementation(self, sym: Symbol):
        if sym.tags & {IN_PLACE, DONT_DCE} or sym.printer is not None:
            return None
        return torchex.ex.lookup_implementation(sym)

    def can_execute(self, bsym: BoundSymbol) -> bool:
        info = self.lookup_implementation(bsym.sym)
        return info is not None and info.execution_transform is None

    def fuse(
        self, region: list[BoundSymbol], later: list[BoundSymbol], trace: TraceCtx, executors: Sequence[Executor]
    ) -> list[BoundSymbol]:
        """Replaces ``region`` by one fusion bound symbol (single ops go to the torch executor)."""
        claimed = [self._torch_claim(b) for b in region]
        if len(region) < 2:
            return claimed
        produced: dict[str, Proxy] = {}
        inputs: dict[str, Proxy] = {}
        for b in claimed:
            for a in b.flat_proxy_args:
                if a.name not in produced:
                    inputs.setdefault(a.name, a)
            for o in b.flat_proxy_outs:
                produced[o.name] = o
        used_later = {a.name for b in later for a in b.flat_proxy_args}
        outputs = [p for name, p in produced.items() if name in used_later]
        region_trace = TraceCtx(name=f"TorchCompile{next(_fusion_ids)}_region")
        region_trace.args = list(inputs.values())
        region_trace.names = set(trace.names)
        region_trace.bound_symbols.extend(claimed)
        from thunder.core import prims

        region_trace.bound_symbols.append(prims.python_return.bind(tuple(outputs), output=None))
        name = region_trace.name.removesuffix("_region")
        fn = _LazyCompiled(region_trace)
        sym = Symbol(name=name, meta=None, id=f"torchcompile.{name}", python_impl=fn, executor=self, _is_fusion=True)
        return [
            BoundSymbol(
                sym, tuple(inputs.values()), {}, tuple(outputs), tuple(claimed),
                source=region[0].source, lineage=tuple(b.uid for b in region),
            )  # fmt: skip
        ]

    def _torch_claim(self, bsym: BoundSymbol) -> BoundSymbol:
        info = torchex.ex.lookup_implementation(bsym.sym)
        return bsym.from_bsym(sym=info.symbol)


class _LazyCompiled:
    """Compiles the region with ``torch.compile`` on first call."""

    def __init__(self, region_trace: TraceCtx):
        self.region_trace = region_trace
        self.compiled = None

    def __call__(self, *args):
        if self.compiled is None:
            self.compiled = torch.compile(self.region_trace.python_callable(), fullgraph=True, dynamic=False)
        return self.compiled(*args)

    def __repr__(self) -> str:
        return f"<torch.compile of {self.region_trace.name}>"


ex = TorchCompileExecutor("torchcompile")
register_executor(ex)
