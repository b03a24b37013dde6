"""The instruction model: decoding code objects into what the run loop needs.

Layer: ``thunder.core.interpreter``. Imports: the standard library, ``opcodes``.

Instructions are ``dis.Instruction`` objects (immutable named tuples: ``opname``, ``opcode``, ``arg``,
``argval``, ``offset``, ``positions`` ...), decoded once per code object (Note [Decoding bytecode]).
``decode(code)`` returns a ``CodeInfo`` with everything the run loop would otherwise recompute per
instruction: the handler of each instruction, jump targets as instruction indices, the exception table
resolved per instruction, the line of each instruction and the names of the fast-local slots.
"""

from __future__ import annotations

import bisect
import dis
import sys
from types import CodeType

from .errors import NULL
from .opcodes import HANDLERS, handler_for

__all__ = ["CodeInfo", "decode", "parse_exception_table", "JUMP_OPCODES", "call_operands"]

#: Opcodes whose ``argval`` is a jump target offset.
JUMP_OPCODES = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)

_PY313 = sys.version_info >= (3, 13)


def parse_exception_table(code: CodeType) -> list[tuple[int, int, int, int, bool]]:
    """Parses ``co_exceptiontable`` (3.11+) into ``(start, end, target, depth, lasti)`` entries, offsets in
    bytes, ``end`` exclusive. The format is a sequence of 6-bit varints (bit 6: continuation; bit 7 marks
    the first byte of an entry), four per entry: start, length, target (in code units) and
    ``depth << 1 | lasti``."""
    table = code.co_exceptiontable
    n = len(table)
    pos = 0

    def read() -> int:
        nonlocal pos
        b = table[pos]
        pos += 1
        val = b & 63
        while b & 64:
            b = table[pos]
            pos += 1
            val = (val << 6) | (b & 63)
        return val

    entries = []
    while pos < n:
        start = read() * 2
        length = read() * 2
        target = read() * 2
        dl = read()
        entries.append((start, start + length, target, dl >> 1, bool(dl & 1)))
    return entries


# Note [Decoding bytecode]
# ``dis.get_instructions`` took 16 ms of the first compile of a small Qwen2 generation (the 86 code objects it
# runs, 3 us an instruction): it formats every argument for display (the repr of each constant), finds
# the jump labels in a second pass and builds each named tuple through its Python ``__new__``. ``instructions_of``
# makes the same ``dis.Instruction`` tuples for what the interpreter reads (``opname``, ``opcode``, ``arg``,
# ``argval``, ``offset``, ``positions``, the line fields and jump labels) in one pass, 2.4 times faster; it
# leaves ``argrepr`` empty (the log shows ``argval``) and, on 3.13, ``cache_info`` None. The rules are dis's own for
# each version (3.11: ``KW_NAMES`` keeps ``dis.UNKNOWN``; 3.12: ``LOAD_ATTR``'s name index is shifted; 3.13: the
# paired ``LOAD_FAST_LOAD_FAST``...), and a test compares both decodings over thousands of code objects.
def _cache_size(op: int, name: str) -> int:
    """The inline cache entries after opcode ``op`` (dis's private tables: the decoding test checks the result)."""
    if _PY313:
        return dis._get_cache_size(name)  # type: ignore[attr-defined]
    table = dis._inline_cache_entries  # type: ignore[attr-defined]
    return table[op] if op < len(table) else 0


_OP = dis.opmap
_EXTENDED_ARG = _OP["EXTENDED_ARG"]
_CONVERSIONS = (None, str, repr, ascii)
_PY312 = sys.version_info >= (3, 12)  # from 3.12 a relative jump also skips its own caches, LOAD_ATTR's index shifts
_CMP_SHIFT = 5 if _PY313 else 4 if _PY312 else 0
# How each opcode's argument becomes ``argval``, decided once per opcode (in dis's order of tests).
_NO_ARG, _PLAIN, _CONST, _UNKNOWN, _NAME, _NAME_1, _NAME_2 = range(7)
_FORWARD, _BACKWARD, _ABSOLUTE, _LOCAL, _LOCALS, _CMP, _FORMAT, _CONVERT = range(7, 15)


def _argument_kind(op: int) -> int:
    name = dis.opname[op]
    if op not in (dis.hasarg if hasattr(dis, "hasarg") else range(dis.HAVE_ARGUMENT, 256)):
        return _NO_ARG
    if op in dis.hasconst:
        return _UNKNOWN if name == "KW_NAMES" and not _PY312 else _CONST  # 3.11 leaves KW_NAMES' constant
    if op in dis.hasname:
        if name == "LOAD_GLOBAL" or (_PY312 and name == "LOAD_ATTR"):
            return _NAME_1
        return _NAME_2 if _PY312 and name == "LOAD_SUPER_ATTR" else _NAME
    if op in dis.hasjrel:
        return _BACKWARD if "JUMP_BACKWARD" in name else _FORWARD
    if op in dis.hasjabs:
        return _ABSOLUTE
    if name in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"):
        return _LOCALS
    if op in dis.haslocal or op in dis.hasfree:
        return _LOCAL
    if op in dis.hascompare:
        return _CMP
    return _FORMAT if name == "FORMAT_VALUE" else _CONVERT if name == "CONVERT_VALUE" else _PLAIN


_KINDS = tuple(_argument_kind(op) for op in range(256))
_CACHES = tuple(_cache_size(op, name) for op, name in enumerate(dis.opname))
_new = tuple.__new__


def instructions_of(code: CodeType) -> tuple[dis.Instruction, ...]:
    """The instructions of ``code`` (inline caches omitted), as ``dis.get_instructions`` gives them (Note
    [Decoding bytecode])."""
    decoded, jump_targets = _decoded(code)
    return _instructions(code, decoded, jump_targets, list(code.co_positions()))


def _decoded(code: CodeType) -> tuple[list, set]:
    """``(offset, start_offset, op, arg, argval)`` of each instruction of ``code``, and the jump targets' offsets."""
    raw = code.co_code
    consts, names, varname = code.co_consts, code.co_names, code._varname_from_oparg  # type: ignore[attr-defined]
    decoded = []  # (offset, start_offset, op, arg, argval)
    jump_targets = set()
    kinds, cache_sizes = _KINDS, _CACHES
    ext = ext_count = 0
    offset, end = 0, len(raw)
    while offset < end:
        op = raw[offset]
        caches = cache_sizes[op]
        kind = kinds[op]
        if kind == _NO_ARG:
            arg = argval = None
            ext = 0
        else:
            arg = argval = raw[offset + 1] | ext
            ext = 0
            if kind == _PLAIN:
                if op == _EXTENDED_ARG:
                    ext = arg << 8
                    if ext >= 1 << 31:
                        ext -= 1 << 32
            elif kind == _LOCAL:
                argval = varname(arg)
            elif kind == _CONST:
                argval = consts[arg]
            elif kind == _NAME:
                argval = names[arg]
            elif kind == _NAME_1:
                argval = names[arg >> 1]
            elif kind == _FORWARD:
                argval = offset + 2 + 2 * arg + (2 * caches if _PY312 else 0)
                jump_targets.add(argval)
            elif kind == _BACKWARD:
                argval = offset + 2 - 2 * arg + (2 * caches if _PY312 else 0)
                jump_targets.add(argval)
            elif kind == _LOCALS:
                argval = (varname(arg >> 4), varname(arg & 15))
            elif kind == _CMP:
                argval = dis.cmp_op[arg >> _CMP_SHIFT]
            elif kind == _NAME_2:
                argval = names[arg >> 2]
            elif kind == _ABSOLUTE:
                argval = 2 * arg
                jump_targets.add(argval)
            elif kind == _UNKNOWN:
                argval = dis.UNKNOWN
            elif kind == _FORMAT:
                argval = (_CONVERSIONS[arg & 3], bool(arg & 4))
            elif kind == _CONVERT:
                argval = _CONVERSIONS[arg]
        if op == _EXTENDED_ARG:
            ext_count += 1
            decoded.append((offset, offset, op, arg, argval))
        else:
            decoded.append((offset, offset - 2 * ext_count, op, arg, argval))
            ext_count = 0
        offset += 2 + 2 * caches  # past the inline caches
    return decoded, jump_targets


def _instructions(code: CodeType, decoded: list, jump_targets: set, positions: list) -> tuple[dis.Instruction, ...]:
    """``dis.Instruction`` tuples of the decoded ``(offset, start_offset, op, arg, argval)``, with their source
    positions (``positions``: ``code.co_positions()``, one per code unit), lines and jump labels
    (``dis.get_instructions`` leaves the exception table's targets out)."""
    linestarts: dict = {}
    if _PY313:  # as ``dis.findlinestarts``: 3.13 also starts the lines that are None
        last = False
        for start, _, line in code.co_lines():
            if line is not last:
                linestarts[start] = last = line
    else:
        last = None
        for start, _, line in code.co_lines():
            if line is not None and line != last:
                linestarts[start] = last = line
    opname, Instruction, Positions = dis.opname, dis.Instruction, dis.Positions
    if not _PY313:
        return tuple(
            _new(Instruction, (opname[op], op, arg, argval, "", offset, linestarts.get(offset), offset in jump_targets,
                               _new(Positions, positions[offset >> 1])))
            for offset, _, op, arg, argval in decoded
        )  # fmt: skip
    labels = {t: i + 1 for i, t in enumerate(sorted(jump_targets))}
    out, line = [], None
    for offset, start_offset, op, arg, argval in decoded:
        starts = offset in linestarts
        if starts:
            line = linestarts[offset]
        pos = _new(Positions, positions[offset >> 1])
        out.append(_new(Instruction, (opname[op], op, arg, argval, "", offset, start_offset, starts, line, labels.get(offset), pos, None)))
    return tuple(out)


def localsplus_names(code: CodeType) -> tuple[str, ...]:
    """Names of the fast-local slots in CPython's order: arguments and locals, cells that are not
    arguments, then free variables. ``LOAD_FAST``/``LOAD_DEREF``... index into this."""
    varnames = code.co_varnames
    cells = tuple(c for c in code.co_cellvars if c not in varnames)
    return varnames + cells + code.co_freevars


class CodeInfo:
    """Everything the run loop needs about one code object, computed once.

    Fields:
      code: the code object.
      instructions: the ``dis.Instruction`` tuple (caches omitted).
      handlers: the handler of each instruction (same index).
      targets: the instruction index each jump goes to (-1 for non-jumps).
      exc_handlers: per instruction, ``(target_index, depth, lasti)`` of the innermost exception
        handler covering it, or None.
      lines: per instruction, its line number (None for artificial instructions).
      offsets: per instruction, its byte offset.
      names: the fast-local slot names (see ``localsplus_names``).
      free_start: the first slot index holding a free variable.
      ncells_plain: cell slots created by MAKE_CELL that are not arguments (start after varnames).
    """

    __slots__ = (
        "code",
        "instructions",
        "handlers",
        "targets",
        "exc_handlers",
        "lines",
        "offsets",
        "names",
        "free_start",
        "offset_to_index",
        "nlocalsplus",
        "_watched",
    )

    def __init__(self, code: CodeType):
        # Every table is made from the decoded tuples (reading a named tuple's fields by name is slower), in one pass
        # each: decoding is most of what the first trace of a program does more than later ones.
        self.code = code
        decoded, jump_targets = _decoded(code)
        positions = list(code.co_positions())
        insts = _instructions(code, decoded, jump_targets, positions)
        self.instructions = insts
        opname, handlers, jumps = dis.opname, HANDLERS, JUMP_OPCODES
        # a lookup per instruction; ``handler_for`` for the few without a handler
        self.handlers = [handlers.get(opname[d[2]]) or handler_for(opname[d[2]]) for d in decoded]
        offsets = self.offsets = [d[0] for d in decoded]
        offset_to_index = self.offset_to_index = dict(zip(offsets, range(len(offsets))))
        self.targets = [
            offset_to_index.get(argval, -1) if op in jumps and type(argval) is int else -1
            for _, _, op, _, argval in decoded
        ]
        self.lines = [positions[d[0] >> 1][0] for d in decoded]
        exc = [None] * len(insts)
        offsets = self.offsets
        for start, end, target, depth, lasti in parse_exception_table(code):
            entry = (offset_to_index[target], depth, lasti)
            for idx in range(bisect.bisect_left(offsets, start), bisect.bisect_left(offsets, end)):
                if exc[idx] is None:
                    exc[idx] = entry
        self.exc_handlers = exc
        self.names = localsplus_names(code)
        self.nlocalsplus = len(self.names)
        self.free_start = self.nlocalsplus - len(code.co_freevars)
        self._watched = None

    def watched_handlers(self) -> list:
        """``handlers``, with each instruction that uses its operands' contents natively (see
        ``OPERAND_READS``) first reporting them to the ``operands`` callback."""
        if self._watched is None:
            self._watched = [_watching(h, i) if i.opname in OPERAND_READS else h for h, i in zip(self.handlers, self.instructions)]
        return self._watched


def _operand_count(inst) -> int:
    n = OPERAND_READS[inst.opname]
    if n >= 0:
        return n
    arg = inst.arg or 0
    if inst.opname == "BUILD_MAP":
        return 2 * arg
    if inst.opname == "BUILD_CONST_KEY_MAP":
        return arg + 1
    if inst.opname == "CALL":
        return arg + 2
    return arg + 3 if inst.opname == "CALL_KW" else arg


def call_operands(values: list) -> tuple:
    """``(callable, positional and keyword argument values)`` from the operands of a CALL or CALL_KW (as the
    ``operands`` callback gets them), in the running version's stack layout (see ``handlers.calls``)."""
    lower, upper = values[0], values[1]
    if _PY313:
        return (lower, values[2:]) if upper is NULL else (lower, values[1:])
    return (upper, values[2:]) if lower is NULL else (lower, values[1:])


# (handler, operand count) -> the watching handler: one per pair, not one per decoded instruction
_watchers: dict[tuple, object] = {}


def _watching(handler, inst):
    n = _operand_count(inst)
    watched = _watchers.get((handler, n))
    if watched is not None:
        return watched

    def watched(inst, frame):
        cb = frame.ctx.cb_operands
        if cb is not None and n:
            cb(inst, frame.stack[-n:])
        return handler(inst, frame)

    _watchers[handler, n] = watched
    return watched


# Note [Operand reads]
# Opcodes the interpreter runs natively on the values they pop, by the number of stack operands
# they use (-1: it depends on the argument). A tool that tracks values through the program (the
# tracer's outside containers) learns from these when a value's contents are read, or when the
# value escapes into another container, an attribute or a native call. Moving values between the
# stack and variables, and loading attributes, are not reads.
OPERAND_READS: dict[str, int] = {
    "BINARY_SUBSCR": 2, "BINARY_SLICE": 3, "STORE_SUBSCR": 3, "STORE_SLICE": 4, "DELETE_SUBSCR": 2,
    "GET_ITER": 1, "CONTAINS_OP": 2, "UNPACK_SEQUENCE": 1, "UNPACK_EX": 1, "COMPARE_OP": 2, "BINARY_OP": 2,
    "UNARY_NOT": 1, "UNARY_NEGATIVE": 1, "UNARY_INVERT": 1, "TO_BOOL": 1, "GET_LEN": 1, "MATCH_SEQUENCE": 1,
    "MATCH_MAPPING": 1, "MATCH_KEYS": 2, "MATCH_CLASS": 3,
    "POP_JUMP_FORWARD_IF_TRUE": 1, "POP_JUMP_FORWARD_IF_FALSE": 1, "POP_JUMP_BACKWARD_IF_TRUE": 1,
    "POP_JUMP_BACKWARD_IF_FALSE": 1, "POP_JUMP_IF_TRUE": 1, "POP_JUMP_IF_FALSE": 1, "JUMP_IF_TRUE_OR_POP": 1,
    "JUMP_IF_FALSE_OR_POP": 1,
    "LIST_EXTEND": 1, "SET_UPDATE": 1, "DICT_UPDATE": 1, "DICT_MERGE": 1, "LIST_APPEND": 1, "SET_ADD": 1,
    "MAP_ADD": 2, "BUILD_LIST": -1, "BUILD_TUPLE": -1, "BUILD_SET": -1, "BUILD_MAP": -1, "BUILD_CONST_KEY_MAP": -1,
    "BUILD_STRING": -1, "FORMAT_VALUE": 2, "STORE_ATTR": 2, "STORE_GLOBAL": 1, "STORE_DEREF": 1, "YIELD_VALUE": 1,
    "CALL": -1, "CALL_KW": -1, "CALL_FUNCTION_EX": 3, "CONVERT_VALUE": 1, "FORMAT_SIMPLE": 1,
    "FORMAT_WITH_SPEC": 2,
}  # fmt: skip


# Keyed by id(code): hashing a code object hashes its contents (slow for big functions). The entry keeps the
# code alive, so the id cannot be reused while the entry exists; the cache is cleared when it grows large.
_cache: dict[int, CodeInfo] = {}
_CACHE_LIMIT = 20_000


def decode(code: CodeType) -> CodeInfo:
    """The (cached) ``CodeInfo`` of ``code``."""
    info = _cache.get(id(code))
    if info is not None and info.code is code:
        return info
    if len(_cache) >= _CACHE_LIMIT:
        _cache.clear()
    info = _cache[id(code)] = CodeInfo(code)
    return info


def instruction_line(info: CodeInfo, index: int) -> int | None:
    """The line of instruction ``index``, searching backwards over artificial instructions."""
    lines = info.lines
    while index >= 0:
        ln = lines[index]
        if ln is not None:
            return ln
        index -= 1
    return info.code.co_firstlineno
