"""Handlers: jumps, loops and iteration.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
"""

from __future__ import annotations

import sys

from ..opcodes import register_opcode_handler
from ..protocols import _NATIVE_ITERATORS, get_iter, iter_next, truth

#: Instructions FOR_ITER skips at its target when the iterator is exhausted: none (3.11), END_FOR (3.12),
#: END_FOR and POP_TOP (3.13).
_FOR_ITER_SKIP = {(3, 11): 0, (3, 12): 1}.get(sys.version_info[:2], 2)


def _jump(inst, frame):
    frame.pc = frame.info.targets[frame.pc - 1]


for _name in ("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT"):
    register_opcode_handler(_name)(_jump)


def _pop_jump_if_false(inst, frame):
    v = frame.stack.pop()
    if v is False or (v is not True and not truth(frame.ctx, v)):
        frame.pc = frame.info.targets[frame.pc - 1]


def _pop_jump_if_true(inst, frame):
    v = frame.stack.pop()
    if v is True or (v is not False and truth(frame.ctx, v)):
        frame.pc = frame.info.targets[frame.pc - 1]


def _pop_jump_if_none(inst, frame):
    if frame.stack.pop() is None:
        frame.pc = frame.info.targets[frame.pc - 1]


def _pop_jump_if_not_none(inst, frame):
    if frame.stack.pop() is not None:
        frame.pc = frame.info.targets[frame.pc - 1]


_CONDITIONAL = {
    "FALSE": _pop_jump_if_false,
    "TRUE": _pop_jump_if_true,
    "NONE": _pop_jump_if_none,
    "NOT_NONE": _pop_jump_if_not_none,
}

for _cond, _fn in _CONDITIONAL.items():
    register_opcode_handler(f"POP_JUMP_FORWARD_IF_{_cond}", max_ver=(3, 11))(_fn)
    register_opcode_handler(f"POP_JUMP_BACKWARD_IF_{_cond}", max_ver=(3, 11))(_fn)
    register_opcode_handler(f"POP_JUMP_IF_{_cond}", min_ver=(3, 12))(_fn)


@register_opcode_handler("JUMP_IF_FALSE_OR_POP", max_ver=(3, 11))
def JUMP_IF_FALSE_OR_POP(inst, frame):
    stack = frame.stack
    v = stack[-1]
    if v is False or (v is not True and not truth(frame.ctx, v)):
        frame.pc = frame.info.targets[frame.pc - 1]
    else:
        stack.pop()


@register_opcode_handler("JUMP_IF_TRUE_OR_POP", max_ver=(3, 11))
def JUMP_IF_TRUE_OR_POP(inst, frame):
    stack = frame.stack
    v = stack[-1]
    if v is True or (v is not False and truth(frame.ctx, v)):
        frame.pc = frame.info.targets[frame.pc - 1]
    else:
        stack.pop()


@register_opcode_handler("GET_ITER")
def GET_ITER(inst, frame):
    stack = frame.stack
    stack[-1] = get_iter(frame.ctx, stack[-1])


_DONE = object()


@register_opcode_handler("FOR_ITER")
def FOR_ITER(inst, frame):
    stack = frame.stack
    it = stack[-1]
    if type(it) in _NATIVE_ITERATORS:
        v = next(it, _DONE)
    elif (step := type(it).__dict__.get("__interpreter_for_iter__")) is not None:
        # an iterator that steps itself with the frame in hand (a traced loop: Note [Loops over a symbolic
        # range] in thunder.core.loops); StopIteration ends the loop as usual
        try:
            v = step(it, frame)
        except StopIteration:
            v = _DONE
    else:
        try:
            v = iter_next(frame.ctx, it)
        except StopIteration:
            v = _DONE
    if v is _DONE:
        stack.pop()
        frame.pc = frame.info.targets[frame.pc - 1] + _FOR_ITER_SKIP
    else:
        stack.append(v)
