"""Handlers: generators, ``yield from``, ``await``, ``async with`` and ``async for``.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
See ``execution._generator_driver`` for how an interpreted generator (coroutine, async generator) is resumed.
"""

from __future__ import annotations

import sys
import types

from ..errors import NULL
from ..execution import GENERATOR, AsyncGenValue, call, lookup_type_attr
from ..opcodes import YIELD, register_opcode_handler
from ..protocols import bound_special, get_iter, iter_next

_PY312 = sys.version_info >= (3, 12)

@register_opcode_handler("RETURN_GENERATOR")
def RETURN_GENERATOR(inst, frame):
    return GENERATOR


@register_opcode_handler("YIELD_VALUE")
def YIELD_VALUE(inst, frame):
    frame.retval = frame.stack.pop()
    return YIELD


@register_opcode_handler("GET_YIELD_FROM_ITER")
def GET_YIELD_FROM_ITER(inst, frame):
    stack = frame.stack
    v = stack[-1]
    if isinstance(v, types.CoroutineType):
        if not frame.code.co_flags & (0x80 | 0x100):
            raise TypeError("cannot 'yield from' a coroutine object in a non-coroutine generator")
        return
    if isinstance(v, types.GeneratorType):
        return
    stack[-1] = get_iter(frame.ctx, v)


_DONE = object()


def _send(frame, receiver, v):
    """CPython's ``PyIter_Send``: returns ``(returned, value)``."""
    try:
        if isinstance(receiver, (types.GeneratorType, types.CoroutineType)):
            return False, receiver.send(v)
        if v is None and hasattr(type(receiver), "__next__"):
            return False, iter_next(frame.ctx, receiver)
        return False, call(frame.ctx, receiver.send, (v,))
    except StopIteration as e:
        return True, e.value


@register_opcode_handler("SEND")
def SEND(inst, frame):
    stack = frame.stack
    v = stack.pop()
    returned, r = _send(frame, stack[-1], v)
    if returned:
        if _PY312:
            stack.append(r)
        else:
            stack[-1] = r
        frame.pc = frame.info.targets[frame.pc - 1]
    else:
        stack.append(r)


@register_opcode_handler("END_SEND", min_ver=(3, 12))
def END_SEND(inst, frame):
    stack = frame.stack
    v = stack.pop()
    stack[-1] = v


# -- coroutines and async generators --------------------------------------------------------------------------

_CO_ITERABLE_COROUTINE = 0x100


def _is_coroutine(v) -> bool:
    return isinstance(v, types.CoroutineType) or (
        isinstance(v, types.GeneratorType) and bool(v.gi_code.co_flags & _CO_ITERABLE_COROUTINE)
    )


def _awaitable_iter(frame, v, error: str | None = None):
    """CPython's ``_PyCoro_GetAwaitableIter``, interpreting a Python ``__await__``."""
    if _is_coroutine(v):
        return v
    t = type(v)
    await_ = lookup_type_attr(t, "__await__")
    if await_ is NULL:
        raise TypeError(error or f"object {t.__name__} can't be used in 'await' expression")
    it = call(frame.ctx, bound_special(v, await_), ())
    if _is_coroutine(it):
        raise TypeError("__await__() returned a coroutine")
    if lookup_type_attr(type(it), "__next__") is NULL:
        raise TypeError(f"__await__() returned non-iterator of type '{type(it).__name__}'")
    return it


_AWAIT_WHERE = {
    1: "'async with' received an object from __aenter__ that does not implement __await__: {}",
    2: "'async with' received an object from __aexit__ that does not implement __await__: {}",
}


@register_opcode_handler("GET_AWAITABLE")
def GET_AWAITABLE(inst, frame):
    stack = frame.stack
    v = stack[-1]
    where = _AWAIT_WHERE.get(inst.arg)
    it = _awaitable_iter(frame, v, where.format(type(v).__name__) if where else None)
    if isinstance(it, types.CoroutineType) and it.cr_await is not None:
        raise RuntimeError("coroutine is being awaited already")
    stack[-1] = it


@register_opcode_handler("BEFORE_ASYNC_WITH")
def BEFORE_ASYNC_WITH(inst, frame):
    stack = frame.stack
    mgr = stack.pop()
    t = type(mgr)
    enter = lookup_type_attr(t, "__aenter__")
    if enter is NULL:
        raise TypeError(f"'{t.__name__}' object does not support the asynchronous context manager protocol")
    exit_ = lookup_type_attr(t, "__aexit__")
    if exit_ is NULL:
        raise TypeError(
            f"'{t.__name__}' object does not support the asynchronous context manager protocol "
            "(missed __aexit__ method)"
        )
    stack.append(bound_special(mgr, exit_))
    stack.append(call(frame.ctx, bound_special(mgr, enter), ()))


@register_opcode_handler("GET_AITER")
def GET_AITER(inst, frame):
    stack = frame.stack
    obj = stack[-1]
    aiter = lookup_type_attr(type(obj), "__aiter__")
    if aiter is NULL:
        raise TypeError(f"'async for' requires an object with __aiter__ method, got {type(obj).__name__}")
    it = call(frame.ctx, bound_special(obj, aiter), ())
    if lookup_type_attr(type(it), "__anext__") is NULL:
        raise TypeError(
            f"'async for' received an object from __aiter__ that does not implement __anext__: {type(it).__name__}"
        )
    stack[-1] = it


@register_opcode_handler("GET_ANEXT")
def GET_ANEXT(inst, frame):
    stack = frame.stack
    it = stack[-1]
    t = type(it)
    if t is types.AsyncGeneratorType:
        stack.append(it.__anext__())
        return
    anext = lookup_type_attr(t, "__anext__")
    if anext is NULL:
        raise TypeError(f"'async for' requires an iterator with __anext__ method, got {t.__name__}")
    awaitable = call(frame.ctx, bound_special(it, anext), ())
    error = f"'async for' received an invalid object from __anext__: {type(awaitable).__name__}"
    stack.append(_awaitable_iter(frame, awaitable, error))


@register_opcode_handler("END_ASYNC_FOR")
def END_ASYNC_FOR(inst, frame):
    stack = frame.stack
    exc = stack.pop()
    if isinstance(exc, StopAsyncIteration):
        stack.pop()
        return
    try:
        raise exc
    finally:
        del exc


@register_opcode_handler("ASYNC_GEN_WRAP", max_ver=(3, 11))
def ASYNC_GEN_WRAP(inst, frame):
    stack = frame.stack
    stack[-1] = AsyncGenValue(stack[-1])
