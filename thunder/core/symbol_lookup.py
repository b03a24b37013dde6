"""Which symbol a callable stands for: the tables the layers above fill.

The tracer diverts a call of a torch function (or of anything else a symbol stands for) to that
symbol, and the introspection lookaside leaves such a call to it. Core knows no torch function:
the torch language registers its table (``thunder.torch.torch_to_thunder_map``) when it is
imported, and the entry layer registers the callables that user operators replace
(``thunder.extend.replacements``, ``register_operator(..., replaces=fn)``) in front of it, the
way JAX's lax registers its rules into tables that the core consults. Tables are registered as
the live dicts their owners keep filling, so a symbol added later is found.

Layer: core. Imports: the interpreter.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Mapping
from typing import Any

from thunder.core.interpreter.errors import NULL
from thunder.core.interpreter.execution import lookup_type_attr

__all__ = [
    "bound_self",
    "plain_attribute",
    "interpreted_replacement",
    "register_interpreted_replacement",
    "register_symbol_table",
    "symbol_for",
    "unreplaced",
]

_tables: tuple[Mapping[Callable, Any], ...] = ()  # consulted in order; replaced whole, never mutated


def register_symbol_table(table: Mapping[Callable, Any], *, first: bool = False) -> None:
    """Adds ``table`` (callable -> symbol) to the lookup, after the others or, with ``first``, before them.

    Registering a table that is already registered does nothing."""
    global _tables
    if any(t is table for t in _tables):
        return
    _tables = (table, *_tables) if first else (*_tables, table)


def symbol_for(fn: Any, accept: Callable[[Any], bool] | None = None) -> Any:
    """The symbol that ``fn`` stands for in the first table that has one (that ``accept`` accepts,
    when given), or None (also for an unhashable ``fn``)."""
    try:
        for table in _tables:
            found = table.get(fn)
            if found is not None and (accept is None or accept(found)):
                return found
    except TypeError:  # unhashable callable
        return None
    return None


def plain_attribute(obj: Any, name: str, default: Any = None) -> Any:
    """``getattr(obj, name, default)`` for the tracer's own questions about a callable (``__self__``, ``__name__``,
    ``__func__``): never runs the object's ``__getattr__``, which may raise something other than AttributeError
    (a module whose ``__getattr__`` looks names up in a dict raises KeyError) for a name eager never asks for."""
    cls = type(obj)
    plain = _PLAIN_TYPES.get(cls)
    if plain is None:  # (a type without __getattr__ answers getattr as object.__getattribute__ does, and faster)
        plain = _PLAIN_TYPES[cls] = lookup_type_attr(cls, "__getattr__") is NULL
    if plain:
        return getattr(obj, name, default)
    try:
        return object.__getattribute__(obj, name)
    except AttributeError:
        return default


_PLAIN_TYPES: dict[type, bool] = {}


def bound_self(fn: Any) -> Any:
    """The object ``fn`` is bound to (a method's ``__self__``), or None."""
    cls = type(fn)
    if cls is types.FunctionType:
        return None
    if cls is types.MethodType or cls is types.BuiltinMethodType:
        return fn.__self__
    return plain_attribute(fn, "__self__")


# Python functions whose traced calls run another Python function, interpreted like the program's
# own code (so the modules it calls are traced and checked): for library code whose eager behaviour
# depends on something a trace cannot hold (nn.TransformerEncoder's nested tensors).
_replacements: dict[Callable, Callable] = {}


def register_interpreted_replacement(fn: Callable, replacement: Callable) -> None:
    """Traced calls of ``fn`` (a function, or the function of a bound method) interpret ``replacement``
    with the same arguments (the bound object first)."""
    _replacements[fn] = replacement


def interpreted_replacement(fn: Any) -> Callable | None:
    """The replacement registered for ``fn``, or None (also for an unhashable ``fn``)."""
    try:
        return _replacements.get(fn)
    except TypeError:
        return None


def unreplaced(fn: types.FunctionType) -> types.FunctionType:
    """``fn``'s code as another function object, which no replacement stands for: what a replacement
    calls to run the original (calling ``fn`` itself would run the replacement again)."""
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__ = fn.__kwdefaults__
    return copy
