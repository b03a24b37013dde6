"""``autocast(fn, dtype)``: lightning-thunder's autocast function transform
(``from thunder.transforms.autocast import autocast``).

The transformed function runs ``fn`` under ``torch.autocast(device_type, dtype)`` for the device
types of its tensor arguments, so it gives what eager autocast gives: the ops autocast lists run in
``dtype`` (or float32), per device type, as the torch language declares them (Note [Autocast] in
``thunder.core.trace``). Traced (``thunder.jit``, ``thunder.trace``), the casts are recorded in the
trace; called outside a trace, it is eager autocast itself.

Layer: transforms. Imports: core.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable

import torch

from thunder.core.pytree import tree_leaves

__all__ = ["autocast"]

_AUTOCAST_DTYPES = (torch.float16, torch.bfloat16)


def autocast(fn: Callable, dtype: torch.dtype) -> Callable:
    """``fn`` run under ``torch.autocast`` to ``dtype`` (``thunder.float16`` or ``thunder.bfloat16``) on the
    device types of its tensor arguments (CPU when it has none)."""
    if dtype not in _AUTOCAST_DTYPES:
        raise ValueError(f"autocast: dtype must be thunder.float16 or thunder.bfloat16, got {dtype!r}")

    @functools.wraps(fn)
    def autocast_fn(*args, **kwargs):
        device_types = {x.device.type for x in tree_leaves((args, kwargs)) if hasattr(x, "device") and hasattr(x, "dtype")}
        with contextlib.ExitStack() as stack:
            for device_type in sorted(device_types or {"cpu"}):
                stack.enter_context(torch.autocast(device_type, dtype))
            return fn(*args, **kwargs)

    return autocast_fn
