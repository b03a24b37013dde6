"""The torch executor: runs every prim and every torch-language symbol with PyTorch itself.

Language symbols map to the torch callable they stand for (so results match eager PyTorch
exactly); prims map to their reference implementation. Implementations are found on first
use, so symbols declared after this module was imported are covered too. One choice is its own:
small convolutions run the direct kernels instead of oneDNN (Note [Small convolutions]), equal to
eager's to float rounding.

Layer: executors. Imports: core, extend, torch (the language's tables).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import torch
from torch._prims_common import suggest_memory_format

from thunder.core import loops, prims
from thunder.core.codegen import type_comment
from thunder.core.prims.base import all_prims
from thunder.core.symbol import Symbol, eager_implementations
from thunder.core.symbolic import all_static
from thunder.core.tracectx import tracectx
from thunder.extend import ImplInfo, OperatorExecutor, register_executor, register_symbol_table
from thunder.torch.base import symbol_to_torch, symbols_by_id

# Registrations may name torch-language symbols by id ("torch.sin").
register_symbol_table(symbols_by_id)


class TorchExecutor(OperatorExecutor):
    def lookup_implementation(self, sym: Symbol) -> ImplInfo | None:
        info = self.implmap.get(sym)
        if info is not None:
            return info
        tables = (len(symbol_to_torch), len(all_prims))
        if sym.is_prim and _declined.get(sym) == tables:  # a prologue's checks, at every claim (Note [Declines are kept])
            return None
        fn = symbol_to_torch.get(sym)
        if fn is None and sym.is_prim and all_prims.get(sym.id) is sym:
            fn = sym.python_impl
        if fn is None:
            if sym.is_prim:
                _declined[sym] = tables
            return None
        printer = _INLINE_PRINTERS.get(sym) or (_print_convolution if fn is torch.conv2d else None)
        fn = _direct(fn)
        made = self.make_symbol(f"torch_{sym.name}", fn, like=sym, tags=sym.tags)
        made.printer = printer
        info = self.implmap[sym] = ImplInfo(symbol=made)
        # eager_implementations is core's table (keyed by id there): symbols called outside a trace.
        eager_implementations.setdefault(sym.id, fn)
        return info


# Note [Declines are kept]
# A prim the torch executor cannot run (a prologue's check or unpacking, which the python executor runs) is asked
# about again by every claim of every trace that has it: a Qwen2 decoding entry's prologue, 636 of them, each
# looked up in both tables (``all_prims`` by the prim's enum id, whose hash is Python code). The answer is kept with
# the sizes of the tables, which only grow: one registered later is looked up again. Only prims are kept (declared
# once, in ``all_prims`` for good): a symbol made per trace (a fusion's) would be kept alive by it.
_declined: dict[Symbol, tuple[int, int]] = {}


def _direct(fn):
    """An aten op packet (``torch.ops.aten.threshold_backward``) as its default overload's C++ entry:
    what a call without ``out=`` runs, without the packet's Python dispatch (a microsecond or two a
    call, on every call of a backward)."""
    if isinstance(fn, torch._ops.OpOverloadPacket) and set(fn.overloads()) <= {"default", "out", "grad_input"}:
        _overloads[fn.default._op] = fn.default
        return fn.default._op
    return fn


_overloads: dict[Any, torch._ops.OpOverload] = {}  # what _direct made: C++ entry -> its overload


def overload_of(fn: Any) -> torch._ops.OpOverload | None:
    """The aten overload whose C++ entry ``fn`` is (what ``_direct`` made), else None: the entries
    do not pickle, their overloads can be named."""
    try:
        return _overloads.get(fn)
    except TypeError:  # unhashable
        return None


# Note [Shape prims printed inline]
# The reference implementations of broadcast_in_dim, pad and slice_prim work out their torch call in
# Python on every call (a loop over dims, a generator of slices, F.pad's checks). Backward traces are
# full of them, so the torch executor prints what they compute for the trace's static shapes as the
# tensor expression itself: ``a.reshape((2, 1)).expand((2, 3))``, ``torch.constant_pad_nd(a, [0, 4], 0)``,
# ``a[:, 0:4]``. The same torch ops run, with the same results; symbolic shapes keep the call.


def _line(bsym, printer, expression: str | None) -> list[str]:
    """``out = expression``, or the symbol's call where there is no expression for these arguments."""
    comment = type_comment(bsym.output)
    return [f"{printer.target(bsym.output)} = {expression or printer.call(bsym)}" + (f"  # {comment}" if comment else "")]


def _print_broadcast_in_dim(bsym, printer) -> list[str]:
    a, shape, dims = bsym.args
    if not all_static(a.shape, shape):
        return _line(bsym, printer, None)
    view = [1] * len(shape)
    for i, d in enumerate(dims):
        view[d] = a.shape[i]
    reshaped = a.name if tuple(view) == tuple(a.shape) else f"{a.name}.reshape({tuple(view)})"
    return _line(bsym, printer, f"{reshaped}.expand({tuple(shape)})")


def _print_pad(bsym, printer) -> list[str]:
    a, value, config = bsym.args
    if any(interior for _, _, interior in config) or not all_static(*(c[:2] for c in config)):
        return _line(bsym, printer, None)
    pads = [p for lo, hi, _ in reversed(config) for p in (lo, hi)]
    printer.add_ctx("torch", torch)
    return _line(bsym, printer, f"torch.constant_pad_nd({a.name}, {pads}, {printer.value(value)})")


def _print_slice(bsym, printer) -> list[str]:
    a, starts, ends = bsym.args[:3]
    strides = bsym.args[3] if len(bsym.args) > 3 else bsym.kwargs.get("strides")
    strides = strides or (1,) * a.ndim
    if not all_static(a.shape, starts, ends, strides):
        return _line(bsym, printer, None)
    parts = []
    for s, e, st, n in zip(starts, ends, strides, a.shape):
        if s == 0 and e == n and st == 1:
            parts.append(":")
        else:
            parts.append(f"{s}:{e}" + (f":{st}" if st != 1 else ""))
    while len(parts) > 1 and parts[-1] == ":":
        parts.pop()
    return _line(bsym, printer, f"{a.name}[{', '.join(parts) or '()'}]")  # a 0-d tensor: a[()]


# Note [Small convolutions]
# Eager PyTorch runs float32 convolutions on CPU with oneDNN, which spends about 100 us setting up
# each forward call and 200-300 us each backward, whatever the size: a 2x3x16x16 image through a 4x4
# patchify conv takes 97 us forward and 223 us backward, against 13 and 31 us for the direct
# (im2col and GEMM) kernels eager itself runs when oneDNN is off or the kernel is 1x1. Measured on
# this project's CPU machine (``benchmarks/bench_convolutions.py``), the direct kernels are faster up to
# about half a million multiply-adds per call (1.4-7.6x forward, 1.9-7.2x backward) and slower
# beyond a few million. So a 2-d convolution with one group, no dilation and at most
# ``DIRECT_CONV_MACS`` multiply-adds, float32 on CPU, with static shapes, prints as the direct
# kernels' call in forward and backward traces. The same convolution, summed in another order: the
# values agree with eager's to float rounding, not bit for bit (the other torch-executor ops match
# eager exactly). Depthwise convolutions keep oneDNN, which is the faster of the two for them.
DIRECT_CONV_MACS = 1 << 19

_slow_conv2d_forward = torch.ops.aten._slow_conv2d_forward.default._op
_slow_conv2d_backward = torch.ops.aten._slow_conv2d_backward.output_mask._op


def conv2d_direct(a, weight, bias, kernel_size, stride, padding):
    """A 2-d convolution by the direct kernel (Note [Small convolutions]), its output laid out as eager's:
    channels-last where the input or the weight is (oneDNN's rule), so that what follows runs on the layout
    eager's does (dropout draws its mask in memory order: SegFormer's decode head differed from eager's)."""
    out = _slow_conv2d_forward(a.contiguous(), weight.contiguous(), kernel_size, bias, stride, padding)
    if _channels_last(a) or _channels_last(weight):
        return out.contiguous(memory_format=torch.channels_last)
    return out


def _channels_last(t: torch.Tensor) -> bool:
    """Whether ``t``'s strides are channels-last's, as ``Tensor.suggest_memory_format`` says. A contiguous tensor
    that is not also contiguous channels-last (sizes of 1 make both hold) is not: two C calls decide the common
    case, ``suggest_memory_format`` in Python (about 20 us, twice per convolution) the others."""
    if t.is_contiguous() and not t.is_contiguous(memory_format=torch.channels_last):
        return False
    return suggest_memory_format(t) is torch.channels_last


def conv2d_direct_backward(g, a, weight, kernel_size, stride, padding, output_mask):
    """The gradients (input, weight, bias; None where ``output_mask`` says not) of ``conv2d_direct``."""
    return _slow_conv2d_backward(g.contiguous(), a.contiguous(), weight.contiguous(), kernel_size, stride, padding,
                                 output_mask)  # fmt: skip


def _direct_conv(a, weight, stride, dilation, transposed, output_padding, groups, out) -> bool:
    """Whether the convolution (as ``prims.convolution``'s arguments, ``out`` its output) runs by the
    direct kernels (Note [Small convolutions])."""
    if a.ndim != 4 or transposed or groups != 1 or a.dtype is not torch.float32 or a.device.type != "cpu":
        return False
    if weight.dtype is not torch.float32 or not all_static(a.shape, weight.shape, out.shape, stride, dilation):
        return False
    if any(d != 1 for d in dilation) or any(p != 0 for p in output_padding):
        return False
    return math.prod(out.shape) * math.prod(weight.shape[1:]) <= DIRECT_CONV_MACS


def _direct_conv_of(bsym):
    """The convolution ``bsym`` stands for, if it runs by the direct kernels (Note [Small convolutions]):
    ``bsym`` itself for ``prims.convolution_backward`` (or this executor's symbol of it), the
    ``prims.convolution`` of the prim or of a torch-language conv whose decomposition is one; else None."""
    if bsym.sym.name.removeprefix("torch_") == prims.convolution_backward.name:
        g, a, weight, stride, padding, dilation, transposed, output_padding, groups, _ = bsym.args
        return bsym if _direct_conv(a, weight, stride, dilation, transposed, output_padding, groups, g) else None
    conv = bsym if bsym.sym.id == prims.convolution.id else (bsym.subsymbols[0] if len(bsym.subsymbols) == 1 else None)
    if conv is None or conv.sym.id != prims.convolution.id or conv.output is not bsym.output:
        return None
    a, weight, bias, stride, padding, dilation, transposed, output_padding, groups = conv.args
    return conv if _direct_conv(a, weight, stride, dilation, transposed, output_padding, groups, bsym.output) else None


def runs_direct_conv(bsym) -> bool:
    """Whether ``bsym`` (a convolution, forward or backward) prints as the direct kernels."""
    return _direct_conv_of(bsym) is not None


def _print_convolution(bsym, printer) -> list[str]:
    """``prims.convolution``, or the torch language's conv2d whose decomposition is one, as
    ``conv2d_direct`` where it fits (Note [Small convolutions])."""
    conv = _direct_conv_of(bsym)
    if conv is None:
        return _line(bsym, printer, None)
    a, weight, bias, stride, padding = conv.args[:5]
    fn = printer.add_ctx("conv2d_direct", conv2d_direct)
    args = ", ".join(printer.value(x) for x in (a, weight, bias, tuple(weight.shape[2:]), tuple(stride), tuple(padding)))
    return _line(bsym, printer, f"{fn}({args})")


def _print_convolution_backward(bsym, printer) -> list[str]:
    if _direct_conv_of(bsym) is None:
        return _line(bsym, printer, None)
    g, a, weight, stride, padding, *_, output_mask = bsym.args
    fn = printer.add_ctx("conv2d_direct_backward", conv2d_direct_backward)
    args = (g, a, weight, tuple(weight.shape[2:]), tuple(stride), tuple(padding), list(output_mask))
    return _line(bsym, printer, f"{fn}({', '.join(printer.value(x) for x in args)})")


_INLINE_PRINTERS = {
    prims.broadcast_in_dim: _print_broadcast_in_dim, prims.pad: _print_pad, prims.slice_prim: _print_slice,
    prims.convolution: _print_convolution, prims.convolution_backward: _print_convolution_backward,
}  # fmt: skip

ex = TorchExecutor("torch", version=None)
register_executor(ex)

# A trace's own callable (``thunder.trace()(fn, ...).python_callable()``) calls language symbols and
# prims outside any trace: each runs its torch implementation. Symbols declared later get theirs
# on first lookup (above).
for _sym, _fn in symbol_to_torch.items():
    eager_implementations.setdefault(_sym.id, _fn)
for _prim in all_prims.values():
    if _prim.python_impl is not None:
        eager_implementations.setdefault(_prim.id, _prim.python_impl)


def no_autocast(fn: Callable) -> Callable:
    """``fn`` run with ``torch.autocast`` off on CPU and CUDA, the state restored after it.

    lightning-thunder's printed traces decorate the computation with it
    (``from thunder.executors.torchex import no_autocast``), so such a trace pasted into a script
    runs as it was traced: its casts are explicit in it. The state in effect at each call is
    restored, not the one at decoration."""

    @functools.wraps(fn)
    def without_autocast(*args, **kwargs):
        previous = torch.is_autocast_enabled("cpu"), torch.is_autocast_enabled("cuda")
        torch.set_autocast_enabled("cpu", False)
        torch.set_autocast_enabled("cuda", False)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_autocast_enabled("cpu", previous[0])
            torch.set_autocast_enabled("cuda", previous[1])

    return without_autocast


def eager_fallback(sym: Symbol):
    """The torch implementation of ``sym`` (for running language symbols outside a trace)."""
    if loops.is_loop(sym):  # it runs its body's trace (Note [Loops over a symbolic range]), whose symbols call
        impl = sym.python_impl  # their torch implementations where no trace is being built

        def outside_the_trace(*args, **kwargs):
            with tracectx(None):
                return impl(*args, **kwargs)

        return outside_the_trace
    info = ex.lookup_implementation(sym)
    return info.symbol.python_impl if info is not None else None
