"""Handlers: stack manipulation, no-ops and constants.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
"""

from __future__ import annotations

from ..errors import NULL
from ..opcodes import RETURN, mark_unsupported, register_opcode_handler

mark_unsupported("CACHE", "inline cache entries are skipped by dis.get_instructions and never executed")
mark_unsupported("INTERPRETER_EXIT", "only ends CPython's own entry frames", min_ver=(3, 12))
mark_unsupported("RESERVED", "not a real instruction", min_ver=(3, 12))
mark_unsupported(
    "ENTER_EXECUTOR",
    "only in code specialised by CPython's tier-2 optimizer; co_code and dis show the original instruction",
    min_ver=(3, 13),
)
mark_unsupported(
    "EXIT_INIT_CHECK", "only in the shim frame CPython makes for a specialised __init__ call", min_ver=(3, 13)
)


@register_opcode_handler("NOP")
def NOP(inst, frame):
    pass


@register_opcode_handler("RESUME")
def RESUME(inst, frame):
    pass


@register_opcode_handler("EXTENDED_ARG")
def EXTENDED_ARG(inst, frame):
    # dis folds the extension into the next instruction's arg.
    pass


@register_opcode_handler("PRECALL", max_ver=(3, 11))
def PRECALL(inst, frame):
    pass


@register_opcode_handler("POP_TOP")
def POP_TOP(inst, frame):
    frame.stack.pop()


@register_opcode_handler("PUSH_NULL")
def PUSH_NULL(inst, frame):
    frame.stack.append(NULL)


@register_opcode_handler("COPY")
def COPY(inst, frame):
    stack = frame.stack
    stack.append(stack[-inst.arg])


@register_opcode_handler("SWAP")
def SWAP(inst, frame):
    stack = frame.stack
    i = -inst.arg
    stack[-1], stack[i] = stack[i], stack[-1]


@register_opcode_handler("LOAD_CONST")
def LOAD_CONST(inst, frame):
    frame.stack.append(inst.argval)


@register_opcode_handler("RETURN_CONST", min_ver=(3, 12))
def RETURN_CONST(inst, frame):
    frame.retval = inst.argval
    return RETURN


@register_opcode_handler("RETURN_VALUE")
def RETURN_VALUE(inst, frame):
    frame.retval = frame.stack.pop()
    return RETURN


@register_opcode_handler("END_FOR", min_ver=(3, 12), max_ver=(3, 12))
def END_FOR(inst, frame):
    del frame.stack[-2:]


@register_opcode_handler("END_FOR", min_ver=(3, 13))
def END_FOR_313(inst, frame):
    # 3.13: END_FOR pops the value and a POP_TOP follows (both skipped when FOR_ITER ends the loop).
    frame.stack.pop()


@register_opcode_handler("KW_NAMES", max_ver=(3, 12))
def KW_NAMES(inst, frame):
    # dis does not resolve KW_NAMES' constant in 3.11.
    frame.kw_names = frame.code.co_consts[inst.arg]
