"""Handlers: imports and the interactive-only PRINT_EXPR.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
"""

from __future__ import annotations

import sys

from ..execution import call
from ..opcodes import register_opcode_handler

_MISSING = object()


@register_opcode_handler("IMPORT_NAME")
def IMPORT_NAME(inst, frame):
    stack = frame.stack
    fromlist = stack.pop()
    level = stack.pop()
    b = frame.builtins
    if not isinstance(b, dict):
        b = b.__dict__
    import_fn = b.get("__import__", _MISSING)
    if import_fn is _MISSING:
        raise ImportError("__import__ not found")
    stack.append(call(frame.ctx, import_fn, (inst.argval, frame.globals, frame.locals, fromlist, level)))


@register_opcode_handler("IMPORT_FROM")
def IMPORT_FROM(inst, frame):
    module = frame.stack[-1]
    name = inst.argval
    v = getattr(module, name, _MISSING)
    if v is _MISSING:
        pkgname = getattr(module, "__name__", _MISSING)
        if isinstance(pkgname, str):
            v = sys.modules.get(f"{pkgname}.{name}", _MISSING)
        if v is _MISSING:
            if not isinstance(pkgname, str):
                pkgname = "<unknown module name>"
            path = getattr(module, "__file__", None)
            where = path if isinstance(path, str) else "unknown location"
            raise ImportError(f"cannot import name '{name}' from '{pkgname}' ({where})", name=pkgname, path=path)
    frame.stack.append(v)


def import_star(frame, module) -> None:
    loc = frame.locals
    if loc is None:
        raise SystemError("no locals found during 'import *'")
    names = getattr(module, "__all__", _MISSING)
    if names is _MISSING:
        names = [n for n in module.__dict__ if not n.startswith("_")]
    for n in names:
        loc[n] = getattr(module, n)


@register_opcode_handler("IMPORT_STAR", max_ver=(3, 11))
def IMPORT_STAR(inst, frame):
    import_star(frame, frame.stack.pop())


@register_opcode_handler("PRINT_EXPR", max_ver=(3, 11))
def PRINT_EXPR(inst, frame):
    sys.displayhook(frame.stack.pop())
