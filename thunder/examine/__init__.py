"""``thunder.examine``: which torch operations a program calls, and which thunder supports.

Layer: entry points. Imports: thunder, torch.
"""

from __future__ import annotations

import textwrap
import traceback
from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, resolve_name

from thunder.core.proxies import TensorProxy

__all__ = ["examine", "collect_torch_calls", "get_fusions", "get_fusion_symbols", "fusion_status"]


class _Collector(TorchFunctionMode):
    def __init__(self, record_stacks: bool = False):
        super().__init__()
        self.calls: Counter = Counter()
        self.record_stacks = record_stacks
        self.first_stacks: dict[Callable, traceback.StackSummary] = {}  # where each op was first called

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls[func] += 1
        if self.record_stacks and func not in self.first_stacks:
            self.first_stacks[func] = traceback.extract_stack()[:-1]
        return func(*args, **(kwargs or {}))


def _user_frames(stack: traceback.StackSummary, limit: bool | int) -> list[traceback.FrameSummary]:
    """The frames of ``stack`` in the user's code (not thunder's or torch's), the last ``limit`` of
    them when ``limit`` is a number, all of them when it is True."""
    here = __file__
    frames = [f for f in stack if f.filename != here and "/torch/" not in f.filename.replace("\\", "/")]
    if type(limit) is int and limit > 0:
        frames = frames[-limit:]
    return frames


def collect_torch_calls(fn: Callable, *args, **kwargs) -> Counter:
    """Runs ``fn`` eagerly and counts the torch functions and Tensor methods it calls."""
    collector = _Collector()
    with collector:
        fn(*args, **kwargs)
    return collector.calls


def _name(func) -> str:
    return resolve_name(func) or getattr(func, "__qualname__", None) or repr(func)


def examine(fn: Callable, *args, show: bool = True, show_call_stack: bool | int = False, **kwargs) -> dict[str, Any]:
    """Runs ``fn`` eagerly, lists the torch operations it calls and whether thunder supports
    each, then tries ``thunder.jit(fn)`` on the same inputs.

    Args:
        fn: the function or module, called as ``fn(*args, **kwargs)``.
        show: print the findings.
        show_call_stack: also print where each unsupported operation was first called in the
            user's code: all its frames (True) or the innermost ``n`` (an int), as lightning-thunder's.

    Returns a dict with ``supported``, ``unsupported`` (names -> call counts), ``untraceable``
    (names -> why they have no meaning in a trace: ``data_ptr``, storages) and ``jit_error`` (None if
    the jitted function ran and matched).
    """
    import thunder
    from thunder.torch import UNTRACEABLE_FUNCTIONS, torch_to_thunder_map
    from thunder.torch.custom_ops import is_supported_custom_op

    if not callable(fn):
        message = f"examine: expected `fn` to be a callable (a function or module), got {type(fn).__name__}"
        if show:
            print(message)
        return {"supported": {}, "unsupported": {}, "jit_error": message}
    collector = _Collector(record_stacks=bool(show_call_stack))
    with collector:
        fn(*args, **kwargs)
    calls = collector.calls
    stacks: dict[str, traceback.StackSummary] = {}
    ignored = {torch.Tensor.__get__, torch.Tensor.__repr__} if hasattr(torch.Tensor, "__get__") else set()
    supported: dict[str, int] = {}
    unsupported: dict[str, int] = {}
    untraceable: dict[str, str] = {}
    for func, count in calls.items():
        if func in ignored or getattr(func, "__name__", "") in ("__get__", "__set__"):
            continue
        name = _name(func)
        method = name.removeprefix("torch.Tensor.") if name.startswith("torch.Tensor.") else None
        if method in TensorProxy.UNTRACEABLE:
            untraceable[name] = TensorProxy.UNTRACEABLE[method]
            continue
        if func in UNTRACEABLE_FUNCTIONS:
            untraceable[name] = UNTRACEABLE_FUNCTIONS[func]
            continue
        answered = method is not None and _answered_by_proxies(method)
        target = supported if answered or func in torch_to_thunder_map or is_supported_custom_op(func) else unsupported
        target[name] = target.get(name, 0) + count
        if target is unsupported and func in collector.first_stacks:
            stacks.setdefault(_name(func), collector.first_stacks[func])
    jit_error = None
    try:
        thunder.jit(fn)(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - reported to the user, not swallowed silently
        jit_error = f"{type(e).__name__}: {e}"
    if show:
        total = len(supported) + len(unsupported)
        print(f"Found {total} distinct torch operations, of which {len(supported)} are supported by thunder.")
        for name, count in sorted(unsupported.items()):
            print(f"  unsupported: {name} ({count} call{'s' if count != 1 else ''})")
            if name in stacks:
                print("    first called at:")
                for line in traceback.format_list(_user_frames(stacks[name], show_call_stack)):
                    print(textwrap.indent(line.rstrip("\n"), "    "))
        for name, why in sorted(untraceable.items()):
            print(f"  no meaning in a trace: {name} ({why})")
        if jit_error is None:
            print("thunder.jit ran the function on these inputs.")
        else:
            print(f"thunder.jit failed: {jit_error}")
    return {"supported": supported, "unsupported": unsupported, "untraceable": untraceable, "jit_error": jit_error}


def _answered_by_proxies(method: str) -> bool:
    """Whether traced tensors answer ``Tensor.<method>`` themselves (``size``, ``dim``, ``__bool__``
    by a split; ``__reversed__`` through the ops it is written with)."""
    return method == "__reversed__" or any(method in vars(c) for c in TensorProxy.__mro__[:-1])


def get_fusion_symbols(trace, warn_if_fusions_unavailable: bool = True) -> list:
    """The bound symbols of ``trace`` (a ``TraceCtx``, e.g. ``thunder.last_traces(fn)[-1]``) that are
    fusions: regions of ops a fusion executor (``torchcompile``, ...) runs as one call, in trace order.

    ``warn_if_fusions_unavailable`` is accepted for lightning-thunder's signature (see ``get_fusions``)."""
    return [bsym for bsym in trace.bound_symbols if bsym.sym._is_fusion]


def get_fusions(trace, warn_if_fusions_unavailable: bool = True) -> list[tuple[str, Callable]]:
    """``(name, callable)`` for each fusion of ``trace``: the fusion's name as the trace prints it
    (``TorchCompile0``) and what runs it (called with the fusion's inputs, it returns its outputs).

    ``warn_if_fusions_unavailable`` is accepted for lightning-thunder's signature: every fusion
    executor here runs on this machine's devices, so there is nothing to warn about."""
    return [(bsym.sym.name, bsym.sym.python_impl) for bsym in get_fusion_symbols(trace)]


def fusion_status(fn: Callable) -> list[tuple[str, str]]:
    """``(name, status)`` of each fusion of the jitted ``fn``'s last forward and backward traces whose
    callable reports where it stands: a torchcompile region is ``warming up``, ``compiling``,
    ``compiled, waiting to load``, ``compiled, on trial``, ``compiled`` or ``uncompiled: <why>`` (``torch_compile._Compiled.status``)."""
    import thunder

    traces = [thunder.last_traces(fn)[-1]]
    try:
        traces += thunder.last_backward_traces(fn)[-1:]
    except TypeError:  # no backward
        pass
    return [
        (name, impl.status())
        for trace in traces
        for name, impl in get_fusions(trace)
        if callable(getattr(impl, "status", None))
    ]
