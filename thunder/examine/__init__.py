"""``thunder.examine``: which torch operations a program calls, and which thunder supports.

Layer: entry points. Imports: thunder, torch.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import TorchFunctionMode, resolve_name

__all__ = ["examine", "collect_torch_calls", "get_fusions", "get_fusion_symbols"]


class _Collector(TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls: Counter = Counter()

    def __torch_function__(self, func, types, args=(), kwargs=None):
        self.calls[func] += 1
        return func(*args, **(kwargs or {}))


def collect_torch_calls(fn: Callable, *args, **kwargs) -> Counter:
    """Runs ``fn`` eagerly and counts the torch functions and Tensor methods it calls."""
    collector = _Collector()
    with collector:
        fn(*args, **kwargs)
    return collector.calls


def _name(func) -> str:
    return resolve_name(func) or getattr(func, "__qualname__", None) or repr(func)


def examine(fn: Callable, *args, show: bool = True, **kwargs) -> dict[str, Any]:
    """Runs ``fn`` eagerly, lists the torch operations it calls and whether thunder supports
    each, then tries ``thunder.jit(fn)`` on the same inputs.

    Returns a dict with ``supported``, ``unsupported`` (names -> call counts) and ``jit_error``
    (None if the jitted function ran and matched).
    """
    import thunder
    from thunder.torch import torch_to_thunder_map

    if not callable(fn):
        message = f"examine: expected `fn` to be a callable (a function or module), got {type(fn).__name__}"
        if show:
            print(message)
        return {"supported": {}, "unsupported": {}, "jit_error": message}
    calls = collect_torch_calls(fn, *args, **kwargs)
    ignored = {torch.Tensor.__get__, torch.Tensor.__repr__} if hasattr(torch.Tensor, "__get__") else set()
    supported: dict[str, int] = {}
    unsupported: dict[str, int] = {}
    for func, count in calls.items():
        if func in ignored or getattr(func, "__name__", "") in ("__get__", "__set__"):
            continue
        target = supported if func in torch_to_thunder_map else unsupported
        target[_name(func)] = target.get(_name(func), 0) + count
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
        if jit_error is None:
            print("thunder.jit ran the function on these inputs.")
        else:
            print(f"thunder.jit failed: {jit_error}")
    return {"supported": supported, "unsupported": unsupported, "jit_error": jit_error}


def get_fusion_symbols(trace) -> list:
    """The bound symbols of ``trace`` (a ``TraceCtx``, e.g. ``thunder.last_traces(fn)[-1]``) that are
    fusions: regions of ops a fusion executor (``torchcompile``, ...) runs as one call, in trace order."""
    return [bsym for bsym in trace.bound_symbols if bsym.sym._is_fusion]


def get_fusions(trace, warn_if_fusions_unavailable: bool = True) -> list[tuple[str, Callable]]:
    """``(name, callable)`` for each fusion of ``trace``: the fusion's name as the trace prints it
    (``TorchCompile0``) and what runs it (called with the fusion's inputs, it returns its outputs).

    ``warn_if_fusions_unavailable`` is accepted for lightning-thunder's signature: every fusion
    executor here runs on this machine's devices, so there is nothing to warn about."""
    return [(bsym.sym.name, bsym.sym.python_impl) for bsym in get_fusion_symbols(trace)]
