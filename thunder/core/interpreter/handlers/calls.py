"""Handlers: calls, function creation, class bodies and the intrinsics (3.12+).

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
"""

from __future__ import annotations

import builtins
import dis
import sys
from types import CellType, FunctionType

from ..errors import NULL, InterpreterError
from ..execution import call, lookup_type_attr
from ..natives import interpreted_iterable
from ..opcodes import register_opcode_handler
from .containers import function_str, merge_kwargs, pop_n

_PY313 = sys.version_info >= (3, 13)


def _no_null(fn, args) -> None:
    """A NULL among a call's operands means the stack was misread: never pass it on to the program."""
    if fn is NULL or any(a is NULL for a in args):
        raise InterpreterError("a call's operands hold NULL: the interpreter misread the stack layout of the call")


def _pop_callable(stack: list, args: list):
    """Pops the callable and its self-or-NULL slot from below the arguments; returns the function to call
    (``args`` gets the ``self`` in front). 3.11 and 3.12 put ``NULL, callable`` or ``method, self`` there;
    3.13 puts ``callable, NULL`` or ``method, self``."""
    upper = stack.pop()
    lower = stack.pop()
    if _PY313:
        fn = lower
        if upper is not NULL:
            args.insert(0, upper)
    elif lower is NULL:
        fn = upper
    else:
        fn = lower
        args.insert(0, upper)
    return fn


def _call(frame, stack: list, argc: int, kw_names) -> None:
    args = pop_n(stack, argc)
    fn = _pop_callable(stack, args)
    kwargs = None
    if kw_names:
        n = len(kw_names)
        kwargs = dict(zip(kw_names, args[-n:]))
        del args[-n:]
    _no_null(fn, args)
    stack.append(call(frame.ctx, fn, tuple(args), kwargs))


@register_opcode_handler("CALL")
def CALL(inst, frame):
    kw_names = frame.kw_names
    if kw_names is not None:
        frame.kw_names = None
    _call(frame, frame.stack, inst.arg, kw_names)


@register_opcode_handler("CALL_KW", min_ver=(3, 13))
def CALL_KW(inst, frame):
    stack = frame.stack
    kw_names = stack.pop()
    _call(frame, stack, inst.arg, kw_names)


@register_opcode_handler("CALL_FUNCTION_EX")
def CALL_FUNCTION_EX(inst, frame):
    stack = frame.stack
    kwargs = stack.pop() if inst.arg & 1 else None
    args = stack.pop()
    if _PY313:
        stack.pop()  # NULL
        fn = stack.pop()
    else:
        fn = stack.pop()
        if stack and stack[-1] is NULL:
            stack.pop()
    if type(args) is not tuple:
        t = type(args)
        if lookup_type_attr(t, "__iter__") is NULL and lookup_type_attr(t, "__getitem__") is NULL:
            raise TypeError(f"{function_str(fn)} argument after * must be an iterable, not {t.__name__}")
        args = tuple(interpreted_iterable(frame.ctx, args, hint=True))  # (Note [Native callbacks])
    if kwargs is not None and type(kwargs) is not dict:
        d: dict = {}
        merge_kwargs(frame.ctx, fn, d, kwargs)
        kwargs = d
    _no_null(fn, args)
    stack.append(call(frame.ctx, fn, args, kwargs))


def _set_function_attribute(fn: FunctionType, flag: int, value) -> None:
    if flag == 0x08:
        # A closure can only be given when the function is made: make it again with it.
        new = FunctionType(fn.__code__, fn.__globals__, fn.__name__, fn.__defaults__, value)
        new.__qualname__ = fn.__qualname__
        new.__kwdefaults__ = fn.__kwdefaults__
        new.__annotations__ = fn.__annotations__
        return new
    if flag == 0x01:
        fn.__defaults__ = value
    elif flag == 0x02:
        fn.__kwdefaults__ = value
    elif flag == 0x04:
        if isinstance(value, tuple):
            value = dict(zip(value[::2], value[1::2]))
        fn.__annotations__ = value
    else:
        raise InterpreterError(f"SET_FUNCTION_ATTRIBUTE with unknown flag {flag:#x}")
    return fn


@register_opcode_handler("MAKE_FUNCTION")
def MAKE_FUNCTION(inst, frame):
    stack = frame.stack
    code = stack.pop()
    if _PY313:  # the attributes follow, one SET_FUNCTION_ATTRIBUTE each (the closure's first)
        placeholder = tuple(CellType() for _ in code.co_freevars) if code.co_freevars else None
        fn = FunctionType(code, frame.globals, code.co_name, None, placeholder)
        fn.__qualname__ = code.co_qualname
        stack.append(fn)
        return
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
        _set_function_attribute(fn, 0x04, annotations)
    stack.append(fn)


@register_opcode_handler("SET_FUNCTION_ATTRIBUTE", min_ver=(3, 13))
def SET_FUNCTION_ATTRIBUTE(inst, frame):
    stack = frame.stack
    fn = stack.pop()
    stack[-1] = _set_function_attribute(fn, inst.arg, stack[-1])


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


# -- intrinsics (3.12+) -------------------------------------------------------------------------------------


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
    return _native_intrinsic(1, oparg)(v)  # type parameters (PEP 695): TypeVar, ParamSpec, Generic[...], type X


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
    stack[-1] = _native_intrinsic(2, inst.arg)(v2, v1)  # type parameters: bounds, constraints, defaults


_native_intrinsics: dict[tuple[int, int], FunctionType] = {}


def _native_intrinsic(kind: int, oparg: int) -> FunctionType:
    """A function whose body is the one instruction ``CALL_INTRINSIC_<kind> oparg`` on its arguments, run by
    CPython itself: the type-parameter intrinsics (PEP 695) make objects with lazily evaluated parts (a
    TypeVar's bound, a type alias's value) that no public constructor can make."""
    fn = _native_intrinsics.get((kind, oparg))
    if fn is None:
        op = dis.opmap
        body = [op["RESUME"], 0, op["LOAD_FAST"], 0]
        if kind == 2:
            body += [op["LOAD_FAST"], 1]
        body += [op[f"CALL_INTRINSIC_{kind}"], oparg, op["RETURN_VALUE"], 0]
        names = ("a", "b")[:kind]
        code = _intrinsic_template.__code__.replace(
            co_code=bytes(body), co_argcount=kind, co_nlocals=kind, co_varnames=names, co_consts=(None,),
            co_names=(), co_stacksize=kind, co_exceptiontable=b"", co_linetable=b"", co_name=f"intrinsic_{kind}_{oparg}",
        )  # fmt: skip
        fn = _native_intrinsics[(kind, oparg)] = FunctionType(code, {"__builtins__": builtins})
    return fn


def _intrinsic_template(a, b):
    pass
