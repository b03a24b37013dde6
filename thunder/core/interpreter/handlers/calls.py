"""Handlers: calls, function creation, class bodies and 3.12's intrinsics.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
"""

from __future__ import annotations

import sys
from types import FunctionType

from ..errors import NULL, InterpreterError
from ..execution import call, lookup_type_attr
from ..opcodes import register_opcode_handler
from .containers import function_str, merge_kwargs


@register_opcode_handler("CALL")
def CALL(inst, frame):
    stack = frame.stack
    argc = inst.arg
    if argc:
        args = stack[-argc:]
        del stack[-argc:]
    else:
        args = []
    callable_or_self = stack.pop()
    method = stack.pop()
    if method is NULL:
        fn = callable_or_self
    else:
        fn = method
        args.insert(0, callable_or_self)
    kw_names = frame.kw_names
    kwargs = None
    if kw_names:
        frame.kw_names = None
        n = len(kw_names)
        kwargs = dict(zip(kw_names, args[-n:]))
        del args[-n:]
    stack.append(call(frame.ctx, fn, tuple(args), kwargs))


@register_opcode_handler("CALL_FUNCTION_EX")
def CALL_FUNCTION_EX(inst, frame):
    stack = frame.stack
    kwargs = stack.pop() if inst.arg & 1 else None
    args = stack.pop()
    fn = stack.pop()
    if stack and stack[-1] is NULL:
        stack.pop()
    if type(args) is not tuple:
        t = type(args)
        if lookup_type_attr(t, "__iter__") is NULL and lookup_type_attr(t, "__getitem__") is NULL:
            raise TypeError(f"{function_str(fn)} argument after * must be an iterable, not {t.__name__}")
        args = tuple(args)
    if kwargs is not None and type(kwargs) is not dict:
        d: dict = {}
        merge_kwargs(fn, d, kwargs)
        kwargs = d
    stack.append(call(frame.ctx, fn, args, kwargs))


@register_opcode_handler("MAKE_FUNCTION")
def MAKE_FUNCTION(inst, frame):
    stack = frame.stack
    code = stack.pop()
    flags = inst.arg
    closure = stack.pop() if flags & 0x08 else None
    annotations = stack.pop() if flags & 0x04 else None
    kwdefaults = stack.pop() if flags & 0x02 else None
    defaults = stack.pop() if flags & 0x01 else None
    fn = FunctionType(code, frame.globals, code.co_name, defaults, closure)
    fn.__qualname__ = code.co_qualname
    if kwdefaults is not None:
        fn.__kwdefaults__ = kwdefaults
    if annotations is not None:
        if isinstance(annotations, tuple):
            annotations = dict(zip(annotations[::2], annotations[1::2]))
        fn.__annotations__ = annotations
    stack.append(fn)


@register_opcode_handler("LOAD_BUILD_CLASS")
def LOAD_BUILD_CLASS(inst, frame):
    b = frame.builtins
    if not isinstance(b, dict):
        b = b.__dict__
    if "__build_class__" not in b:
        raise NameError("__build_class__ not found")
    frame.stack.append(b["__build_class__"])


@register_opcode_handler("SETUP_ANNOTATIONS")
def SETUP_ANNOTATIONS(inst, frame):
    loc = frame.locals
    if loc is None:
        raise SystemError("no locals found when setting up annotations")
    if "__annotations__" not in loc:
        loc["__annotations__"] = {}


# -- 3.12 intrinsics ----------------------------------------------------------------------------------------


def _intrinsic_stopiteration_error(frame, exc):
    if isinstance(exc, StopIteration):
        flags = frame.code.co_flags
        kind = "async generator" if flags & 0x200 else ("coroutine" if flags & 0x80 else "generator")
        err = RuntimeError(f"{kind} raised StopIteration")
    elif flags_async(frame) and isinstance(exc, StopAsyncIteration):
        err = RuntimeError("async generator raised StopAsyncIteration")
    else:
        return exc
    err.__cause__ = exc
    err.__context__ = exc
    return err


def flags_async(frame) -> bool:
    return bool(frame.code.co_flags & 0x200)


def _intrinsic_import_star(frame, module):
    from .imports import import_star

    import_star(frame, module)
    return None


def _intrinsic_1(frame, oparg, v):
    if oparg == 1:  # INTRINSIC_PRINT
        sys.displayhook(v)
        return None
    if oparg == 2:
        return _intrinsic_import_star(frame, v)
    if oparg == 3:
        return _intrinsic_stopiteration_error(frame, v)
    if oparg == 4:  # INTRINSIC_ASYNC_GEN_WRAP
        from ..execution import AsyncGenValue

        return AsyncGenValue(v)
    if oparg == 5:
        from ..protocols import unary_op

        return unary_op(frame.ctx, "UNARY_POSITIVE", v)
    if oparg == 6:
        return tuple(v)
    raise InterpreterError(f"CALL_INTRINSIC_1 with oparg {oparg} (type parameters) is not supported")


@register_opcode_handler("CALL_INTRINSIC_1", min_ver=(3, 12))
def CALL_INTRINSIC_1(inst, frame):
    stack = frame.stack
    stack[-1] = _intrinsic_1(frame, inst.arg, stack[-1])


@register_opcode_handler("CALL_INTRINSIC_2", min_ver=(3, 12))
def CALL_INTRINSIC_2(inst, frame):
    stack = frame.stack
    v1 = stack.pop()
    v2 = stack[-1]
    if inst.arg == 1:  # INTRINSIC_PREP_RERAISE_STAR
        from .exceptions import prep_reraise_star

        stack[-1] = prep_reraise_star(v2, v1)
        return
    raise InterpreterError(f"CALL_INTRINSIC_2 with oparg {inst.arg} (type parameters) is not supported")
