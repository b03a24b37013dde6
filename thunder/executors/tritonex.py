"""The triton fusion executor: regions of prims run as Triton kernels this project generates.

It claims the prims ``thunder.executors.triton_codegen`` can write code for (elementwise ops,
``broadcast_in_dim``, ``convert_element_type``, reshapes that insert or remove dims of size 1,
``sum``/``amax``/``amin``/``var``/``var_mean`` over the last dim, and ``take_along_axis`` with
one index per row, cross-entropy's pick of the target), so with ``executors=["triton", "torch"]`` torch-language ops such as softmax, rms_norm or
gelu are decomposed and their prims fused (Note [Claiming at the deepest level]). Each region
of two or more ops becomes one ``TritonN`` symbol that lists the ops it absorbed; a region no
kernel layout fits is declined (torch runs its ops). It is in no default list.

Triton is imported only when a kernel is built. Kernels run compiled on CUDA tensors and, on
CPU tensors, in Triton's interpreter when ``TRITON_INTERPRET=1`` (slow; for tests). Elsewhere
the executor is unavailable: ``ex.available()`` is False, ``ex.unavailable_reason`` says why,
and a jit that lists it fails with that reason.

Layer: executors. Imports: core, extend, executors.torchex, executors.triton_codegen.
"""

from __future__ import annotations

import importlib.util
import linecache
import math
import os

import torch
import torch.autograd.forward_ad as _forward_ad

from thunder.core import prims
from thunder.core.errors import ThunderRuntimeError
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.trace import TraceCtx
from thunder.executors import torchex
from thunder.executors import triton_codegen as codegen
from thunder.extend import FusionExecutor, ImplInfo, Region, find_regions, fusion_bound_symbol, register_executor

__all__ = ["TritonExecutor", "ex"]

_ELEMENTWISE_FLOAT = {*codegen.UNARY_FLOAT, *codegen.BINARY_FLOAT}
_ELEMENTWISE = {*_ELEMENTWISE_FLOAT, *codegen.UNARY_NUMERIC, *codegen.BINARY_NUMERIC, *codegen.BINARY_INTEGRAL}
_LAYOUT = (prims.broadcast_in_dim, prims.reshape, prims.take_along_axis, prims.iota)  # coordinates, picks along a row
# Exact in float32, so converting through it rounds to bfloat16 once, as eager's direct conversion.
_NARROW_INTEGERS = {torch.uint8, torch.int8, torch.int16}
_BF16_SOURCES = {torch.bfloat16, torch.float16, torch.float32, torch.bool, torch.int8, torch.uint8, torch.int16}


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


class TritonExecutor(FusionExecutor):
    """Claims the prims it can generate code for; each region becomes one Triton kernel."""

    def __init__(self, name: str):
        super().__init__(name)
        for sym in (*_ELEMENTWISE, *codegen.REDUCTIONS, *_LAYOUT, prims.where, prims.convert_element_type):
            self.implmap[sym] = ImplInfo()

    @property
    def unavailable_reason(self) -> str | None:
        """Why kernels cannot run here (None when they can)."""
        if importlib.util.find_spec("triton") is None:
            return "triton is not installed (pip install triton)"
        if not _interpreting() and not torch.cuda.is_available():
            return "no CUDA device; set TRITON_INTERPRET=1 to run the kernels on CPU tensors in Triton's interpreter"
        return None

    def can_execute(self, bsym: BoundSymbol) -> bool:
        if bsym.sym not in self.implmap:
            # Taken whole so that it is not decomposed; ``fuse`` gives it to the torch executor.
            return _rounds_number_first(bsym)
        reason = self.unavailable_reason
        if reason is not None:
            raise ThunderRuntimeError(f"executor {self.name!r} is unavailable: {reason}")
        return _accepts(bsym)

    def fuse(self, region: Region, trace: TraceCtx) -> list[BoundSymbol] | None:
        """``TritonN`` fusions for ``region``; single ops and regions no kernel fits are declined.

        Ops taken whole (``_rounds_number_first``) run on the torch executor, the prims around them
        in fusions of their own (the shared region finder orders the parts)."""
        if all(b.sym.is_prim for b in region.bound_symbols):
            return self._fuse(region, trace)
        claimed = [(self if b.sym.is_prim else torchex.ex, b) for b in region.bound_symbols]
        parts = find_regions(claimed, returned=region.outputs)
        return _each_fused_or_on_torch(parts, lambda part: self._fuse(part, trace) if part.is_fusion else None)

    def _fuse(self, region: Region, trace: TraceCtx, *, cut_after: bool = False) -> list[BoundSymbol] | None:
        if len(region.bound_symbols) < 2:
            return None
        kernels = codegen.generate(region.bound_symbols, region.inputs, region.outputs)
        if kernels is not None:
            return [fusion_bound_symbol(region, trace, prefix="Triton", fn=_Launcher(kernels, region.outputs))]
        stages = _stages(region, cut_after=cut_after)
        if len(stages) == 1:
            return None if cut_after else self._fuse(region, trace, cut_after=True)
        return _each_fused_or_on_torch(stages, lambda stage: self._fuse(stage, trace, cut_after=cut_after))


def _each_fused_or_on_torch(parts: list[Region], fuse) -> list[BoundSymbol] | None:
    """What ``fuse`` makes of each part, or its ops on the torch executor where it declines (None
    if torch cannot run one of them either)."""
    out: list[BoundSymbol] = []
    for part in parts:
        fused = fuse(part)
        if fused is None:
            fused = [_on_torch(b) for b in part.bound_symbols]
            if None in fused:
                return None
        out += fused
    return out


def _stages(region: Region, *, cut_after: bool = False) -> list[Region]:
    """``region`` cut before each reduction over another shape than the one before it: a rows
    kernel reduces one shape, so a reduction of what another reduced (a loss's mean over the rows'
    losses) starts a kernel of its own, reading what the one before wrote. ``cut_after``: also
    after each reduction (where what follows uses the reduced value in a larger shape: the mean's
    gradient spread over the classes)."""
    parts: list[list[BoundSymbol]] = [[]]
    shape = None
    for b in region.bound_symbols:
        reduces = b.sym in codegen.REDUCTIONS or b.sym is prims.take_along_axis
        if reduces:
            reduced = tuple(b.args[0].shape)
            if shape is not None and reduced != shape and parts[-1]:
                parts.append([])
            shape = reduced
        parts[-1].append(b)
        if reduces and cut_after:
            parts.append([])
            shape = None
    parts = [p for p in parts if p]
    if len(parts) == 1:
        return [region]
    made = [{o.name for b in part for o in b.flat_proxy_outs} for part in parts]
    later_reads = [set() for _ in parts]
    for k in range(len(parts) - 2, -1, -1):
        later_reads[k] = later_reads[k + 1] | {a.name for b in parts[k + 1] for a in b.flat_proxy_args}
    returned = {p.name for p in region.outputs}
    stages = []
    for k, part in enumerate(parts):
        inputs: dict[str, Proxy] = {}
        for b in part:
            for a in b.flat_proxy_args:
                if a.name not in made[k]:
                    inputs.setdefault(a.name, a)
        outputs = {o.name: o for b in part for o in b.flat_proxy_outs if o.name in returned or o.name in later_reads[k]}
        stages.append(Region(region.executor, part, list(inputs.values()), list(outputs.values())))
    return stages


def _on_torch(bsym: BoundSymbol) -> BoundSymbol | None:
    """``bsym`` as the torch executor runs it (None if it cannot)."""
    info = torchex.ex.lookup_implementation(bsym.sym)
    if info is None or info.symbol is None or info.execution_transform is not None:
        return None
    return bsym.from_bsym(sym=info.symbol, lineage=bsym.lineage)


def _accepts(bsym: BoundSymbol) -> bool:
    """Whether the generated code computes ``bsym`` as eager does, on a device kernels run on."""
    tensors = [a for a in bsym.flat_args if isinstance(a, TensorProxy)] + [
        o for o in bsym.flat_outs if isinstance(o, TensorProxy)
    ]
    if not tensors or any(t.dtype not in codegen.TL_DTYPES for t in tensors):
        return False
    device = tensors[0].device
    if any(t.device != device for t in tensors):
        return False
    if not (device.type == "cuda" or (device.type == "cpu" and _interpreting())):
        return False
    if any(type(a) not in (bool, int, float) for a in bsym.flat_args if not isinstance(a, TensorProxy)):
        if bsym.sym not in (*_LAYOUT, prims.convert_element_type, *codegen.REDUCTIONS):
            return False  # numbers computed at run time, complex numbers
    sym, dtype = bsym.sym, tensors[0].dtype
    if sym is prims.convert_element_type:
        src, dst = bsym.args[0].dtype, bsym.args[1]
        if src.is_floating_point and dst in _NARROW_INTEGERS:
            return False  # out of range, eager's CPU wraps and GPUs saturate
        return dst is not torch.bfloat16 or src in _BF16_SOURCES
    if sym is prims.broadcast_in_dim or sym is prims.where:
        return True
    if sym is prims.iota:
        kw = bsym.kwargs
        return kw["dtype"] is torch.int64 and all(type(kw[k]) is int for k in ("start", "step"))
    if sym is prims.reshape:
        return codegen.is_unit_reshape(tuple(bsym.args[0].shape), tuple(bsym.output.shape))
    if sym is prims.take_along_axis:  # cross-entropy's pick: one index per row, along the last dim
        a, index, dim = bsym.args[:3]
        return (
            a.dtype.is_floating_point
            and not index.dtype.is_floating_point
            and index.dtype is not torch.bool
            and dim in (a.ndim - 1, -1)
            and tuple(index.shape) == (*a.shape[:-1], 1)
        )
    if sym in codegen.REDUCTIONS:
        a, dims = bsym.args[0], tuple(bsym.args[1])
        return a.dtype.is_floating_point and a.ndim >= 1 and dims == (a.ndim - 1,)
    if sym in _ELEMENTWISE_FLOAT:
        return dtype.is_floating_point
    if sym in codegen.BINARY_INTEGRAL:
        return not dtype.is_floating_point
    return dtype is not torch.bool  # arithmetic and extrema on bools are not generated


def _rounds_number_first(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` is a language op of one elementwise prim on a low-precision tensor and a
    number that dtype cannot hold. Eager rounds such a number to the tensor's dtype first in some
    ops (``x + 0.3``, ``x == 0.3`` on bfloat16) but not in others (``x * 0.3``); the decomposition
    computes with it in float32, which is exact only for the latter. Such ops are kept whole."""
    if bsym.sym.is_prim:
        return False
    ops = [s for s in bsym.subsymbols if s.sym is not prims.convert_element_type]
    if len(ops) != 1 or ops[0].sym not in (*_ELEMENTWISE, prims.where):
        return False
    low = {a.dtype for a in bsym.flat_args if isinstance(a, TensorProxy) and a.dtype in codegen.LOW_PRECISION}
    numbers = [a for a in bsym.flat_args if type(a) in (int, float)]
    return any(torch.tensor(n, dtype=d).item() != n for d in low for n in numbers)


class _Launcher:
    """Runs a fusion's kernels: allocates the outputs, passes strides and sizes."""

    def __init__(self, kernels: list[codegen.Kernel], outputs: list[TensorProxy]):
        self.kernels = kernels
        self.outputs = [(tuple(o.shape), o.dtype) for o in outputs]

    def __call__(self, *inputs):
        if _forward_ad._current_level >= 0:  # the kernels would drop dual tensors' tangents, silently
            raise ThunderRuntimeError(
                "forward-mode AD (torch.autograd.forward_ad.dual_level) through a Triton fusion is not supported: its "
                "kernels do not carry tangents; jit the function without the triton executor for forward-mode AD"
            )
        device = inputs[self.kernels[0].tensor_inputs[0]].device
        outs = [torch.empty(shape, dtype=dtype, device=device) for shape, dtype in self.outputs]
        for k in self.kernels:
            args: list = []
            for i in k.tensor_inputs:
                args += [inputs[i], *inputs[i].stride()]
            for j in k.outputs:
                args += [outs[j], *outs[j].stride()]
            flags = None
            if k.checks:
                flags = torch.zeros(math.prod(k.domain[:-1]), dtype=torch.int8, device=device)
                args.append(flags)
            _launch(k, [*args, *k.domain])
            if flags is not None:  # raised at once on CPU, by the device on CUDA (no sync), as eager's gather
                torch._assert_async(
                    flags.max() == 0 if flags.numel() else torch.tensor(True),
                    f"index out of bounds for dimension {len(k.domain) - 1} with size {k.domain[-1]} "
                    "(take_along_axis in a Triton fusion: a class index outside [0, classes))",
                )
        return tuple(outs)

    def __repr__(self) -> str:
        return f"<{len(self.kernels)} generated Triton kernel(s)>"


_kernels: dict[str, object] = {}  # source -> triton.jit function (regions alike share kernels)
_blocks: dict[tuple[str, int], int] = {}  # (source, shape class) -> the BLOCK autotuning chose


def _launch(k: codegen.Kernel, args: list) -> None:
    """Launches ``k``: one program per row, or per ``BLOCK`` elements. ``BLOCK`` is fixed when
    interpreting; on CUDA the fastest of a few, timed on the first call per shape class (the
    power of two above the row length or element count)."""
    work = math.prod(k.domain[:-1]) if k.rows else math.prod(k.domain)
    if not work:
        return
    fn = _compiled(k)

    def run(block: int) -> None:
        fn[(work if k.rows else -(-work // block),)](*args, BLOCK=block)

    cap = _next_pow2(k.domain[-1] if k.rows else work)
    if _interpreting():
        return run(min(cap, 4096 if k.rows else 1024))
    block = _blocks.get((k.source, cap))
    if block is None:
        from triton.testing import do_bench

        candidates = [b for b in (128, 512, 1024, 2048, 4096) if b <= max(cap, 128)]
        block = _blocks[k.source, cap] = min(candidates, key=lambda b: do_bench(lambda: run(b)))
    run(block)


def _compiled(kernel: codegen.Kernel):
    fn = _kernels.get(kernel.source)
    if fn is None:
        # Triton reads a kernel's source back (inspect.getsource): keep it in linecache.
        filename = f"<thunder triton kernel {len(_kernels)}>"
        linecache.cache[filename] = (len(kernel.source), None, kernel.source.splitlines(True), filename)
        namespace: dict = {}
        exec(compile(kernel.source, filename, "exec"), namespace)
        fn = _kernels[kernel.source] = namespace[kernel.name]
    return fn


def _next_pow2(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


ex = TritonExecutor("triton")
register_executor(ex)
