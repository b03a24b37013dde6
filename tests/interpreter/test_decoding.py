"""The interpreter's bytecode decoding (Note [Decoding bytecode]) gives what ``dis.get_instructions`` gives, field for
field, on the code objects of real libraries, in the running Python's bytecode."""

from __future__ import annotations

import dis
import types

import torch.nn.modules.module
import transformers.generation.utils
import transformers.models.llama.modeling_llama

import thunder.core.interpreter.execution
from thunder.core.interpreter.instructions import JUMP_OPCODES, CodeInfo, instructions_of
from thunder.core.interpreter.opcodes import handler_for

_FIELDS = [f for f in dis.Instruction._fields if f not in ("argrepr", "cache_info")]  # left out by design


def _code_objects(*modules) -> list[types.CodeType]:
    found: dict[int, types.CodeType] = {}
    stack = [
        f.__code__
        for m in modules
        for v in vars(m).values()
        for f in ([v, *vars(v).values()] if isinstance(v, type) else [v])
        if isinstance(f, types.FunctionType)
    ]
    while stack:
        code = stack.pop()
        if id(code) not in found:
            found[id(code)] = code
            stack.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
    return list(found.values())


def _same(a, b) -> bool:
    return a is b or a == b or (a != a and b != b)  # a NaN constant


def test_decoding_agrees_with_dis_on_library_code():
    codes = _code_objects(
        dis, torch.nn.modules.module, transformers.generation.utils, transformers.models.llama.modeling_llama,
        thunder.core.interpreter.execution,
    )  # fmt: skip
    assert len(codes) > 500
    for code in codes:
        expected, got = tuple(dis.get_instructions(code)), instructions_of(code)
        assert len(got) == len(expected), code
        for e, g in zip(expected, got):
            differing = [f for f in _FIELDS if not _same(getattr(e, f), getattr(g, f))]
            assert not differing, f"{code.co_qualname} at {e.offset}: {e} decoded as {g} ({differing})"
            assert type(g) is dis.Instruction and type(g.positions) is dis.Positions


def test_decoding_agrees_with_dis_on_the_hard_cases():
    def hard(x, *args, **kwargs):
        big = 0
        for i in range(3):  # backward jumps
            try:
                big += {1: 2}.get(i, 0) if x is not None else -1
            except (KeyError, ValueError) as e:  # the exception table's targets
                raise RuntimeError from e
            finally:
                big -= 1
        f = f"{x!r:>10} {x!s} {x!a}"  # conversions
        nan = float("nan")
        cell = [nan, 1.5, -0.0]

        def inner():
            return cell, super  # free variables

        values = [print(k=i) for i in range(2)] + list(range(300))
        return big, f, inner, values, x == 1, x < 2, x is not None, x.attr, x.method(*args, **kwargs), 1e300

    source = "\n".join(f"v{i} = {i}" for i in range(300)) + "\nw = v299 + v0"  # more than 256 names
    inner = [c for c in hard.__code__.co_consts if isinstance(c, types.CodeType)]
    for code in (hard.__code__, *inner, compile(source, "m", "exec")):
        expected, got = tuple(dis.get_instructions(code)), instructions_of(code)
        assert [tuple(getattr(e, f) for f in _FIELDS) for e in expected] == [
            tuple(getattr(g, f) for f in _FIELDS) for g in got
        ]


def test_decoded_tables_agree_with_the_instructions():
    # ``CodeInfo`` makes its per-instruction tables from the raw decoding, not from the instructions it hands out:
    # they must say the same (handler, offset, jump target index, line) for every instruction.
    codes = _code_objects(torch.nn.modules.module, transformers.models.llama.modeling_llama, thunder.core.interpreter.execution)
    assert len(codes) > 100
    for code in codes:
        info = CodeInfo(code)
        insts = info.instructions
        assert insts == instructions_of(code)
        assert info.offsets == [i.offset for i in insts]
        assert info.handlers == [handler_for(i.opname) for i in insts]
        index = {i.offset: n for n, i in enumerate(insts)}
        assert info.targets == [index.get(i.argval, -1) if i.opcode in JUMP_OPCODES else -1 for i in insts], code
        assert info.lines == [i.positions.lineno for i in insts], code
