"""Handlers: structural pattern matching (``match`` statements).

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..execution import call
from ..opcodes import register_opcode_handler

# Classes whose single positional sub-pattern matches the whole subject (PEP 634).
_SELF_MATCH = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)

_MISSING = object()


@register_opcode_handler("MATCH_MAPPING")
def MATCH_MAPPING(inst, frame):
    stack = frame.stack
    stack.append(isinstance(stack[-1], Mapping))


@register_opcode_handler("MATCH_SEQUENCE")
def MATCH_SEQUENCE(inst, frame):
    stack = frame.stack
    v = stack[-1]
    stack.append(isinstance(v, Sequence) and not isinstance(v, (str, bytes, bytearray)))


@register_opcode_handler("MATCH_KEYS")
def MATCH_KEYS(inst, frame):
    stack = frame.stack
    keys = stack[-1]
    subject = stack[-2]
    if not keys:
        stack.append(())
        return
    get = subject.get
    seen = []
    values = []
    for k in keys:
        if k in seen:
            raise ValueError(f"mapping pattern checks duplicate key ({k!r})")
        seen.append(k)
        v = get(k, _MISSING)
        if v is _MISSING:
            stack.append(None)
            return
        values.append(v)
    stack.append(tuple(values))


def _match_class(ctx, subject, cls, nargs: int, kw_names: tuple):
    # ``isinstance`` and ``getattr`` are called as the program's calls (through the lookaside), so a
    # tracer's stand-in values answer them as the values they stand for.
    if not isinstance(cls, type):
        raise TypeError("called match pattern must be a class")
    if not call(ctx, isinstance, (subject, cls)):
        return None
    seen: list[str] = []
    attrs = []
    if nargs:
        match_args = getattr(cls, "__match_args__", _MISSING)
        match_self = False
        if match_args is _MISSING:
            match_args = ()
            match_self = issubclass(cls, _SELF_MATCH)
        elif not isinstance(match_args, tuple):
            raise TypeError(f"{cls.__name__}.__match_args__ must be a tuple (got {type(match_args).__name__})")
        allowed = 1 if match_self else len(match_args)
        if nargs > allowed:
            s = "" if allowed == 1 else "s"
            raise TypeError(f"{cls.__name__}() accepts {allowed} positional sub-pattern{s} ({nargs} given)")
        if match_self:
            attrs.append(subject)
        else:
            for name in match_args[:nargs]:
                if not isinstance(name, str):
                    raise TypeError(f"__match_args__ elements must be strings (got {type(name).__name__})")
                if name in seen:
                    raise TypeError(f"{cls.__name__}() got multiple sub-patterns for attribute {name!r}")
                seen.append(name)
                v = call(ctx, getattr, (subject, name, _MISSING))
                if v is _MISSING:
                    return None
                attrs.append(v)
    for name in kw_names:
        if name in seen:
            raise TypeError(f"{cls.__name__}() got multiple sub-patterns for attribute {name!r}")
        seen.append(name)
        v = call(ctx, getattr, (subject, name, _MISSING))
        if v is _MISSING:
            return None
        attrs.append(v)
    return tuple(attrs)


@register_opcode_handler("MATCH_CLASS")
def MATCH_CLASS(inst, frame):
    stack = frame.stack
    kw_names = stack.pop()
    cls = stack.pop()
    subject = stack.pop()
    stack.append(_match_class(frame.ctx, subject, cls, inst.arg, kw_names))
