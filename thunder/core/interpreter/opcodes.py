"""The opcode handler registry.

Layer: ``thunder.core.interpreter``. Imports: the standard library and ``errors`` only.

A handler is a function ``handler(inst: dis.Instruction, frame: Frame) -> int | None`` registered for one
opcode name with Python-version bounds. It returns ``None`` to continue with the next instruction
(``frame.pc`` already points at it; jumps assign ``frame.pc``) or a signal (``RETURN`` / ``YIELD``)
to leave the frame's run loop.
"""

from __future__ import annotations

import dis
import sys
from collections.abc import Callable

from .errors import InterpreterError

__all__ = [
    "RETURN",
    "YIELD",
    "HANDLERS",
    "UNSUPPORTED",
    "register_opcode_handler",
    "handler_for",
]

#: Signals a handler can return to its run loop.
RETURN = 1
YIELD = 2

#: opname -> handler for the running Python.
HANDLERS: dict[str, Callable] = {}

#: opname -> reason, for the opcodes of the running Python that are deliberately not handled.
UNSUPPORTED: dict[str, str] = {}


def register_opcode_handler(
    name: str, *, min_ver: tuple[int, int] | None = None, max_ver: tuple[int, int] | None = None
) -> Callable[[Callable], Callable]:
    """Registers the decorated function as the handler of opcode ``name`` for Pythons within
    ``[min_ver, max_ver]`` (inclusive, ``(major, minor)``). Outside the bounds the decorator is a no-op,
    so one module can hold the 3.11 and the 3.12 variant of an opcode."""

    def decorator(fn: Callable) -> Callable:
        ver = sys.version_info[:2]
        if (min_ver is None or ver >= min_ver) and (max_ver is None or ver <= max_ver):
            if name in HANDLERS:
                raise InterpreterError(f"Opcode {name} has two handlers: {HANDLERS[name]} and {fn}")
            HANDLERS[name] = fn
        return fn

    return decorator


def mark_unsupported(name: str, reason: str, *, min_ver=None, max_ver=None) -> None:
    ver = sys.version_info[:2]
    if (min_ver is None or ver >= min_ver) and (max_ver is None or ver <= max_ver):
        UNSUPPORTED[name] = reason


def _make_unsupported_handler(opname: str) -> Callable:
    reason = UNSUPPORTED.get(opname, "no handler is registered for it")

    def unsupported(inst, frame):
        code = frame.code
        raise InterpreterError(
            f"Encountered unsupported opcode {opname} (offset {inst.offset}) in {code.co_qualname} "
            f"({code.co_filename}:{frame.current_line()}): {reason}"
        )

    return unsupported


_unsupported_cache: dict[str, Callable] = {}


def handler_for(opname: str) -> Callable:
    """The handler of ``opname``; an opcode without one gets a handler that raises ``InterpreterError``
    when (and only when) it is executed."""
    h = HANDLERS.get(opname)
    if h is not None:
        return h
    h = _unsupported_cache.get(opname)
    if h is None:
        h = _unsupported_cache[opname] = _make_unsupported_handler(opname)
    return h


def unhandled_opcodes() -> set[str]:
    """Opcodes of the running Python with neither a handler nor an entry in ``UNSUPPORTED``."""
    return {name for name in dis.opmap if name not in HANDLERS and name not in UNSUPPORTED}
