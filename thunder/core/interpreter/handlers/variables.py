"""Handlers: loads, stores and deletes of locals, cells, globals, names and attributes.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
"""

from __future__ import annotations

import sys
from types import CellType

from ..errors import DELETED, NULL
from ..execution import call
from ..opcodes import register_opcode_handler
from ..protocols import load_attr, property_store

_PY313 = sys.version_info >= (3, 13)

# -- fast locals ---------------------------------------------------------------------------------------------


def _unbound_local(name: str) -> UnboundLocalError:
    return UnboundLocalError(f"cannot access local variable '{name}' where it is not associated with a value")


@register_opcode_handler("LOAD_FAST")
def LOAD_FAST(inst, frame):
    v = frame.fast[inst.arg]
    if v is NULL:
        raise _unbound_local(inst.argval)
    frame.stack.append(v)


@register_opcode_handler("LOAD_FAST_CHECK", min_ver=(3, 12))
def LOAD_FAST_CHECK(inst, frame):
    LOAD_FAST(inst, frame)


@register_opcode_handler("LOAD_FAST_AND_CLEAR", min_ver=(3, 12))
def LOAD_FAST_AND_CLEAR(inst, frame):
    fast = frame.fast
    frame.stack.append(fast[inst.arg])
    fast[inst.arg] = NULL


@register_opcode_handler("STORE_FAST")
def STORE_FAST(inst, frame):
    frame.fast[inst.arg] = frame.stack.pop()


# 3.13's fused pairs: the first slot in the high four bits of the argument, the second in the low four.


def _load_slot(frame, i: int):
    v = frame.fast[i]
    if v is NULL:
        raise _unbound_local(frame.info.names[i])
    return v


@register_opcode_handler("LOAD_FAST_LOAD_FAST", min_ver=(3, 13))
def LOAD_FAST_LOAD_FAST(inst, frame):
    arg = inst.arg
    frame.stack.extend((_load_slot(frame, arg >> 4), _load_slot(frame, arg & 15)))


@register_opcode_handler("STORE_FAST_LOAD_FAST", min_ver=(3, 13))
def STORE_FAST_LOAD_FAST(inst, frame):
    arg = inst.arg
    frame.fast[arg >> 4] = frame.stack.pop()
    frame.stack.append(_load_slot(frame, arg & 15))


@register_opcode_handler("STORE_FAST_STORE_FAST", min_ver=(3, 13))
def STORE_FAST_STORE_FAST(inst, frame):
    arg = inst.arg
    stack = frame.stack
    fast = frame.fast
    fast[arg >> 4] = stack.pop()
    fast[arg & 15] = stack.pop()


@register_opcode_handler("DELETE_FAST")
def DELETE_FAST(inst, frame):
    fast = frame.fast
    if fast[inst.arg] is NULL:
        raise _unbound_local(inst.argval)
    fast[inst.arg] = NULL


# -- cells -----------------------------------------------------------------------------------------------------


def _unbound_deref(frame, i: int) -> NameError:
    name = frame.info.names[i]
    if i < frame.info.free_start:
        return _unbound_local(name)
    return NameError(f"cannot access free variable '{name}' where it is not associated with a value in enclosing scope")


def _cell_get(cell):
    try:
        return cell.cell_contents
    except ValueError:
        return NULL


@register_opcode_handler("MAKE_CELL")
def MAKE_CELL(inst, frame):
    fast = frame.fast
    v = fast[inst.arg]
    cell = fast[inst.arg] = CellType() if v is NULL else CellType(v)
    cb = frame.ctx.cb_make_cell
    if cb is not None:
        cb(cell)


@register_opcode_handler("COPY_FREE_VARS")
def COPY_FREE_VARS(inst, frame):
    # The closure is copied into the free slots when the frame is made (execution.make_frame).
    pass


@register_opcode_handler("LOAD_CLOSURE")
def LOAD_CLOSURE(inst, frame):
    frame.stack.append(frame.fast[inst.arg])


def _load_cell(frame, i: int, name: str):
    cell = frame.fast[i]
    v = _cell_get(cell)
    if v is NULL:
        raise _unbound_deref(frame, i)
    cb = frame.ctx.cb_load_deref
    if cb is not None and i >= frame.info.free_start:
        v = cb(frame.code, name, v, cell)
    return v


@register_opcode_handler("LOAD_DEREF")
def LOAD_DEREF(inst, frame):
    frame.stack.append(_load_cell(frame, inst.arg, frame.info.names[inst.arg]))


@register_opcode_handler("LOAD_CLASSDEREF", max_ver=(3, 11))
def LOAD_CLASSDEREF(inst, frame):
    name = frame.info.names[inst.arg]
    loc = frame.locals
    if loc is not None and name in loc:
        frame.stack.append(loc[name])
        return
    frame.stack.append(_load_cell(frame, inst.arg, name))


@register_opcode_handler("LOAD_FROM_DICT_OR_DEREF", min_ver=(3, 12))
def LOAD_FROM_DICT_OR_DEREF(inst, frame):
    mapping = frame.stack.pop()
    name = frame.info.names[inst.arg]
    if name in mapping:
        frame.stack.append(mapping[name])
        return
    frame.stack.append(_load_cell(frame, inst.arg, name))


@register_opcode_handler("STORE_DEREF")
def STORE_DEREF(inst, frame):
    v = frame.stack.pop()
    cb = frame.ctx.cb_store_deref
    cell = frame.fast[inst.arg]
    if cb is not None:
        cb(frame.code, frame.info.names[inst.arg], v, cell)
    cell.cell_contents = v


@register_opcode_handler("DELETE_DEREF")
def DELETE_DEREF(inst, frame):
    cell = frame.fast[inst.arg]
    if _cell_get(cell) is NULL:
        raise _unbound_deref(frame, inst.arg)
    del cell.cell_contents


# -- globals and names ----------------------------------------------------------------------------------------


def _name_error(name: str) -> NameError:
    return NameError(f"name '{name}' is not defined", name=name)


def _load_global(frame, name: str):
    g = frame.globals
    if name in g:
        v = g[name]
        is_builtin = False
    else:
        b = frame.builtins
        if not isinstance(b, dict):
            b = b.__dict__
        if name not in b:
            missing = frame.ctx.cb_missing_global
            if missing is not None:
                missing(g, name)
            raise _name_error(name)
        v = b[name]
        is_builtin = True
    cb = frame.ctx.cb_load_global
    if cb is not None:
        v = cb(g, name, v, is_builtin)
    return v


@register_opcode_handler("LOAD_GLOBAL", max_ver=(3, 12))
def LOAD_GLOBAL(inst, frame):
    v = _load_global(frame, inst.argval)
    if inst.arg & 1:
        frame.stack.append(NULL)
    frame.stack.append(v)


@register_opcode_handler("LOAD_GLOBAL", min_ver=(3, 13))
def LOAD_GLOBAL_313(inst, frame):
    frame.stack.append(_load_global(frame, inst.argval))
    if inst.arg & 1:  # 3.13 puts the NULL after the callable
        frame.stack.append(NULL)


@register_opcode_handler("STORE_GLOBAL")
def STORE_GLOBAL(inst, frame):
    v = frame.stack.pop()
    cb = frame.ctx.cb_store_global
    if cb is not None:
        cb(frame.globals, inst.argval, v)
    frame.globals[inst.argval] = v


@register_opcode_handler("DELETE_GLOBAL")
def DELETE_GLOBAL(inst, frame):
    name = inst.argval
    if name not in frame.globals:
        raise _name_error(name)
    cb = frame.ctx.cb_store_global
    if cb is not None:
        cb(frame.globals, name, DELETED)
    del frame.globals[name]


def _locals(frame, opname: str):
    loc = frame.locals
    if loc is None:
        raise SystemError(f"no locals when {opname}")
    return loc


@register_opcode_handler("LOAD_NAME")
def LOAD_NAME(inst, frame):
    name = inst.argval
    loc = _locals(frame, "loading")
    if name in loc:
        frame.stack.append(loc[name])
        return
    frame.stack.append(_load_global(frame, name))


@register_opcode_handler("LOAD_FROM_DICT_OR_GLOBALS", min_ver=(3, 12))
def LOAD_FROM_DICT_OR_GLOBALS(inst, frame):
    mapping = frame.stack.pop()
    name = inst.argval
    if name in mapping:
        frame.stack.append(mapping[name])
        return
    frame.stack.append(_load_global(frame, name))


@register_opcode_handler("LOAD_LOCALS", min_ver=(3, 12))
def LOAD_LOCALS(inst, frame):
    frame.stack.append(_locals(frame, "loading locals"))


@register_opcode_handler("STORE_NAME")
def STORE_NAME(inst, frame):
    v = frame.stack.pop()
    loc = _locals(frame, f"storing {inst.argval!r}")
    cb = frame.ctx.cb_store_global
    if cb is not None and loc is frame.globals:
        cb(loc, inst.argval, v)
    loc[inst.argval] = v


@register_opcode_handler("DELETE_NAME")
def DELETE_NAME(inst, frame):
    name = inst.argval
    loc = _locals(frame, f"deleting {name!r}")
    if name not in loc:
        raise _name_error(name)
    cb = frame.ctx.cb_store_global
    if cb is not None and loc is frame.globals:
        cb(loc, name, DELETED)
    del loc[name]


# -- attributes -------------------------------------------------------------------------------------------------


def _load_attr(frame, obj, name: str):
    try:
        v = load_attr(frame.ctx, obj, name)
    except AttributeError:
        missing = frame.ctx.cb_missing_attr
        found = NULL if missing is None else missing(obj, name)
        if found is NULL:
            raise
        return found
    cb = frame.ctx.cb_load_attr
    if cb is not None:
        v = cb(obj, name, v)
    return v


@register_opcode_handler("LOAD_ATTR", max_ver=(3, 11))
def LOAD_ATTR_311(inst, frame):
    stack = frame.stack
    stack[-1] = _load_attr(frame, stack[-1], inst.argval)


def _push_callable(stack: list, v, method_load: bool) -> None:
    """A method load pushes the bound attribute with a NULL (the valid form besides ``method, self``) in the
    running version's order: ``NULL, callable`` before 3.13, ``callable, NULL`` from 3.13."""
    if not method_load:
        stack.append(v)
    elif _PY313:
        stack.append(v)
        stack.append(NULL)
    else:
        stack.append(NULL)
        stack.append(v)


@register_opcode_handler("LOAD_ATTR", min_ver=(3, 12))
def LOAD_ATTR_312(inst, frame):
    stack = frame.stack
    obj = stack.pop()
    _push_callable(stack, _load_attr(frame, obj, inst.argval), inst.arg & 1)


@register_opcode_handler("LOAD_METHOD", max_ver=(3, 11))
def LOAD_METHOD(inst, frame):
    stack = frame.stack
    obj = stack.pop()
    v = _load_attr(frame, obj, inst.argval)
    stack.append(NULL)
    stack.append(v)


@register_opcode_handler("LOAD_SUPER_ATTR", min_ver=(3, 12))
def LOAD_SUPER_ATTR(inst, frame):
    stack = frame.stack
    self_ = stack.pop()
    cls = stack.pop()
    global_super = stack.pop()
    sup = call(frame.ctx, global_super, (cls, self_))
    _push_callable(stack, _load_attr(frame, sup, inst.argval), inst.arg & 1)


@register_opcode_handler("STORE_ATTR")
def STORE_ATTR(inst, frame):
    stack = frame.stack
    obj = stack.pop()
    v = stack.pop()
    setter = property_store(obj, inst.argval, False)
    if setter is not None:
        call(frame.ctx, setter, (obj, v))
        return
    cb = frame.ctx.cb_store_attr
    if cb is not None and cb(obj, inst.argval, v):
        return
    setattr(obj, inst.argval, v)


@register_opcode_handler("DELETE_ATTR")
def DELETE_ATTR(inst, frame):
    obj = frame.stack.pop()
    deleter = property_store(obj, inst.argval, True)
    if deleter is not None:
        call(frame.ctx, deleter, (obj,))
        return
    cb = frame.ctx.cb_store_attr
    if cb is not None and cb(obj, inst.argval, DELETED):
        return
    delattr(obj, inst.argval)
