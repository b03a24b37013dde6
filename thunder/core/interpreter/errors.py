"""Sentinels and the exception type of the interpreter itself.

Layer: ``thunder.core.interpreter`` (the bytecode interpreter). Imports: the standard library only.
"""

from __future__ import annotations

__all__ = ["InterpreterError", "NULL", "DELETED"]


class InterpreterError(Exception):
    """A failure of the interpreter itself: an unsupported opcode or Python version, a bad stack, the ``NULL``
    of a call used as a value, an internal bug.

    Never raised for an exception the interpreted program raises; those propagate as themselves. The run loop
    never lets the interpreted program catch it (its exception table is not consulted), so an internal failure
    can never select another branch of the user's program.
    """


class _Sentinel:
    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __reduce__(self):
        return self._name


class _Null(_Sentinel):
    """The C ``NULL``. It is only ever compared by identity; any use of it as a value (calling it, reading an
    attribute, truth, ``str``, iteration) means the interpreter misread the stack, and raises ``InterpreterError``
    instead of reaching the user's program (where it could print "NULL" or be caught by an ``except``)."""

    __slots__ = ()

    def _misuse(self, *args, **kwargs):
        raise InterpreterError("the interpreter used NULL (an empty stack slot) as a value: its stack is corrupt")

    __call__ = __bool__ = __str__ = __format__ = __iter__ = __len__ = _misuse

    def __getattr__(self, name):
        self._misuse()

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


#: The C ``NULL``: pushed by ``PUSH_NULL`` and friends, and the value of an unbound local slot.
NULL = _Null("NULL")

#: Passed as ``value`` to the ``store_global`` callback when a global is deleted.
DELETED = _Sentinel("DELETED")
