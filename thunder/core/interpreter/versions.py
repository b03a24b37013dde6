"""The CPython versions the interpreter is built for, and the clear error on any other.

Layer: ``thunder.core.interpreter``. Imports: the standard library and ``errors`` only.

Each CPython release changes its bytecode (new and fused opcodes, the layout of a call on the stack, how a
``for`` loop ends). Run on a version it was not built for, the interpreter could misread a program and give a
wrong result, so it refuses at once instead.
"""

from __future__ import annotations

import sys

from .errors import InterpreterError

__all__ = ["SUPPORTED_PYTHONS", "check_python_version", "running_python", "unsupported_python_message"]

#: (major, minor) of every CPython the handlers cover.
SUPPORTED_PYTHONS: tuple[tuple[int, int], ...] = ((3, 11), (3, 12), (3, 13))


def running_python() -> tuple[int, int]:
    return sys.version_info[:2]


def unsupported_python_message(version: tuple[int, int]) -> str | None:
    """Why ``version`` cannot run the interpreter, or None when it can."""
    if tuple(version) in SUPPORTED_PYTHONS:
        return None
    supported = ", ".join(f"{major}.{minor}" for major, minor in SUPPORTED_PYTHONS)
    return (
        f"thunder's bytecode interpreter does not support Python {version[0]}.{version[1]} (its bytecode differs "
        f"from the versions it was built for: {supported}); run on one of those"
    )


def check_python_version() -> None:
    """Raises ``InterpreterError`` naming the running and the supported versions when they differ."""
    message = unsupported_python_message(running_python())
    if message is not None:
        raise InterpreterError(message)
