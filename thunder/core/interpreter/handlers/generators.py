"""Handlers: generators and ``yield from``. Coroutines and async generators run natively.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
See ``execution._generator_driver`` for how an interpreted generator is resumed.
"""

from __future__ import annotations

import sys
import types

from ..execution import GENERATOR, call
from ..opcodes import YIELD, mark_unsupported, register_opcode_handler
from ..protocols import get_iter, iter_next

_PY312 = sys.version_info >= (3, 12)

_ASYNC_REASON = "coroutines and async generators are called natively, so their bytecode is never interpreted"
for _name in (
    "GET_AWAITABLE",
    "GET_AITER",
    "GET_ANEXT",
    "END_ASYNC_FOR",
    "BEFORE_ASYNC_WITH",
    "ASYNC_GEN_WRAP",
):
    mark_unsupported(_name, _ASYNC_REASON)


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
