"""Sentinels and the exception type of the interpreter itself.

Layer: ``thunder.core.interpreter`` (the bytecode interpreter). Imports: the standard library only.
"""

from __future__ import annotations

__all__ = ["InterpreterError", "NULL", "DELETED"]


class InterpreterError(Exception):
    """A failure of the interpreter itself: an unsupported opcode, an invalid state, an internal bug.

    Never raised for an exception the interpreted program raises; those propagate as themselves.
    """


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self):
        return self._name


#: The C ``NULL``: pushed by ``PUSH_NULL`` and friends, and the value of an unbound local slot.
NULL = _Sentinel("NULL")

#: Passed as ``value`` to the ``store_global`` callback when a global is deleted.
DELETED = _Sentinel("DELETED")
