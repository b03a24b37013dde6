"""The instruction model: decoding code objects into what the run loop needs.

Layer: ``thunder.core.interpreter``. Imports: the standard library, ``opcodes``.

Instructions are ``dis.Instruction`` objects (immutable named tuples: ``opname``, ``opcode``, ``arg``,
``argval``, ``offset``, ``positions`` ...), decoded once per code object by ``dis.get_instructions``.
``decode(code)`` returns a ``CodeInfo`` with everything the run loop would otherwise recompute per
instruction: the handler of each instruction, jump targets as instruction indices, the exception table
resolved per instruction, the line of each instruction and the names of the fast-local slots.
"""

from __future__ import annotations

import bisect
import dis
import sys
from types import CodeType

from .opcodes import handler_for

__all__ = ["CodeInfo", "decode", "parse_exception_table", "JUMP_OPCODES"]

#: Opcodes whose ``argval`` is a jump target offset.
JUMP_OPCODES = frozenset(dis.hasjrel) | frozenset(dis.hasjabs)

_PY312 = sys.version_info >= (3, 12)


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
    )

    def __init__(self, code: CodeType):
        self.code = code
        insts = tuple(dis.get_instructions(code))
        self.instructions = insts
        self.handlers = [handler_for(i.opname) for i in insts]
        self.offsets = [i.offset for i in insts]
        offset_to_index = {i.offset: idx for idx, i in enumerate(insts)}
        self.offset_to_index = offset_to_index
        self.targets = [
            offset_to_index.get(i.argval, -1) if i.opcode in JUMP_OPCODES and isinstance(i.argval, int) else -1
            for i in insts
        ]
        lines = []
        for i in insts:
            pos = i.positions
            lines.append(pos.lineno if pos is not None else None)
        self.lines = lines
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
