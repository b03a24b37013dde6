"""Handlers: unary, binary and in-place operators, comparisons, identity and membership tests.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
"""

from __future__ import annotations

import dis
import sys

from ..opcodes import register_opcode_handler
from ..protocols import BINARY_OPS, FAST_TYPES, INPLACE_OPS, binary_op, compare_op, contains, truth, unary_op

#: BINARY_OP's arg -> operator symbol ("+", "+=", ...), from dis's own table.
NB_SYMBOLS = tuple(sym for _, sym in dis._nb_ops)
#: BINARY_OP's arg -> the native operator function.
NB_NATIVE = tuple(BINARY_OPS[s][0] if s in BINARY_OPS else INPLACE_OPS[s][0] for s in NB_SYMBOLS)

_FAST = FAST_TYPES
#: ``str % holder``: the values it holds are converted by their dunders (Note [Conversions interpreted])
_HOLDERS = (tuple, dict)


@register_opcode_handler("BINARY_OP")
def BINARY_OP(inst, frame):
    stack = frame.stack
    b = stack.pop()
    a = stack[-1]
    ta = type(a)
    if ta in _FAST and type(b) in _FAST and (ta is not str or type(b) not in _HOLDERS):
        stack[-1] = NB_NATIVE[inst.arg](a, b)
    else:
        stack[-1] = binary_op(frame.ctx, NB_SYMBOLS[inst.arg], a, b)


def _unary(inst, frame):
    stack = frame.stack
    stack[-1] = unary_op(frame.ctx, inst.opname, stack[-1])


register_opcode_handler("UNARY_NEGATIVE")(_unary)
register_opcode_handler("UNARY_INVERT")(_unary)
register_opcode_handler("UNARY_POSITIVE", max_ver=(3, 11))(_unary)


@register_opcode_handler("UNARY_NOT")
def UNARY_NOT(inst, frame):
    stack = frame.stack
    stack[-1] = not truth(frame.ctx, stack[-1])


@register_opcode_handler("TO_BOOL", min_ver=(3, 13))
def TO_BOOL(inst, frame):
    stack = frame.stack
    v = stack[-1]
    if v is not True and v is not False:
        stack[-1] = truth(frame.ctx, v)


#: COMPARE_OP's operator is ``arg >> 4`` (3.12) or ``arg >> 5`` (3.13, where bit 4 asks for the result's truth).
_CMP_SHIFT = 5 if sys.version_info >= (3, 13) else 4 if sys.version_info >= (3, 12) else 0


@register_opcode_handler("COMPARE_OP")
def COMPARE_OP(inst, frame):
    stack = frame.stack
    b = stack.pop()
    arg = inst.arg
    v = compare_op(frame.ctx, dis.cmp_op[arg >> _CMP_SHIFT], stack[-1], b)
    if _CMP_SHIFT == 5 and arg & 16 and v is not True and v is not False:
        v = truth(frame.ctx, v)
    stack[-1] = v


@register_opcode_handler("IS_OP")
def IS_OP(inst, frame):
    stack = frame.stack
    b = stack.pop()
    a = stack[-1]
    same = a is b
    if not same:  # a tool's stand-in for a value (a symbolic int) is eager's object as far as ``is`` can tell
        ia, ib = getattr(type(a), "__interpreter_identity__", None), getattr(type(b), "__interpreter_identity__", None)
        if ia is not None or ib is not None:
            same = (a if ia is None else ia(a)) is (b if ib is None else ib(b))
    stack[-1] = same ^ bool(inst.arg)


@register_opcode_handler("CONTAINS_OP")
def CONTAINS_OP(inst, frame):
    stack = frame.stack
    container = stack.pop()
    stack[-1] = contains(frame.ctx, container, stack[-1]) ^ bool(inst.arg)
