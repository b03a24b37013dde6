"""Attribute reads and writes that native callables make, traced as the Python they stand for.

``operator.attrgetter``/``itemgetter``/``methodcaller`` objects and the ``__getattribute__``/``__setattr__``/
``__delattr__`` slots called by name read and write natively, past the interpreter's callbacks; the tracer's lookaside
(``thunder.core.special_calls``) runs them as ``getattr``/``setattr``/``delattr`` and interpreted Python instead, so
what they read is checked and what they write is replayed (Note [Operator getters], Note [Attribute slots called by
name] in ``special_calls``).

Layer: tracing. Imports: the interpreter.
"""

from __future__ import annotations

import functools
import operator
import types
from collections.abc import Callable
from typing import Any

from thunder.core.interpreter import NULL
from thunder.core.interpreter.execution import lookup_type_attr

__all__ = ["ATTRIBUTE_SLOTS", "plain_slot", "python_getter"]

# Note [Generic attribute slots]
# Before 3.13 a builtin type that sets an attribute slot to object's generic function (a module's and an exception's
# ``__setattr__``, a float's and a str's ``__getattribute__``) has a wrapper of its own in its ``__dict__``; 3.13 adds
# none for a slot the type inherits unchanged. Calling such a wrapper is calling object's, so it is the plain slot on
# every version: ``module.__setattr__("n", v)`` is traced as ``setattr`` (before 3.13 it ran natively, and the
# program's next read of ``module.n`` was the value read at tracing).
_GENERIC_SLOT_TYPES = {
    "__getattribute__": (float, str, frozenset, types.SimpleNamespace),
    "__setattr__": (types.ModuleType, BaseException, types.SimpleNamespace),
    "__delattr__": (types.ModuleType, BaseException, types.SimpleNamespace),
}
ATTRIBUTE_SLOTS = {
    slot: (getattr(object, slot), getattr(type, slot), *(vars(t)[slot] for t in generic if slot in vars(t)))
    for slot, generic in _GENERIC_SLOT_TYPES.items()
}


def plain_slot(cls: type, slot: str) -> bool:
    """Whether ``cls`` takes ``slot`` from ``object`` or ``type`` (and, for reads, has no ``__getattr__``): then
    calling the slot by name is ``getattr``/``setattr``/``delattr`` (Note [Attribute slots called by name])."""
    if lookup_type_attr(cls, slot) not in ATTRIBUTE_SLOTS[slot]:
        return False
    return slot != "__getattribute__" or lookup_type_attr(cls, "__getattr__") is NULL


# Note [Operator getters]
# ``operator.attrgetter("cfg.n")(obj)``, ``itemgetter``, ``methodcaller`` read natively, so an attribute they read was
# not checked (nor stores into what they return replayed): a counter reached through one stopped at 1. A call of one
# is interpreted as the Python it stands for, whose reads are the program's own.
def python_getter(fn: Any) -> Callable | None:
    cls = type(fn)
    if cls is operator.attrgetter:
        paths = [name.split(".") for name in fn.__reduce__()[1]]

        def attrgetter(obj):
            found = []
            for path in paths:
                value = obj
                for name in path:
                    value = getattr(value, name)
                found.append(value)
            return found[0] if len(found) == 1 else tuple(found)

        return attrgetter
    if cls is operator.itemgetter:
        keys = fn.__reduce__()[1]

        def itemgetter(obj):
            return obj[keys[0]] if len(keys) == 1 else tuple(obj[k] for k in keys)

        return itemgetter
    if cls is operator.methodcaller:
        made, args = fn.__reduce__()[:2]
        if type(made) is functools.partial:
            name, kwargs = made.args[0], made.keywords
        else:
            (name, *args), kwargs = args, {}

        def methodcaller(obj):
            return getattr(obj, name)(*args, **kwargs)

        return methodcaller
    return None
