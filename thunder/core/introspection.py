"""How traced values answer Python's questions about what they are.

Inside a jitted function a tensor is a ``TensorProxy`` and a symbolic number a ``SymInt``/``SymFloat``,
but the program must see what eager sees: ``isinstance(t, torch.Tensor)``, ``type(n) is int``. The
tracer consults ``lookaside`` before every call and ``proxy_attribute`` after every attribute load
on a proxy.

Layer: tracing. Imports: core, torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

_LOOKASIDES: dict[Callable, Callable] = {}


def lookaside(fn: Callable) -> Callable | None:
    """The replacement for ``fn`` when traced code calls it, or None."""
    try:
        return _LOOKASIDES.get(fn)
    except TypeError:  # unhashable callable
        return None


def proxy_attribute(obj: Any, name: str, value: Any) -> Any:
    """What traced code sees for ``obj.name`` when ``obj`` is a traced value (``value`` is what was loaded)."""
    return value
