"""Exceptions raised while compiled code runs point at the user's op and line.

Note [Runtime errors]
When generated code raises (``x.view(-1)`` of a transposed tensor, integer division by zero),
the traceback ends in ``thunder.computation_N``, which the user did not write. The jitted
function's call site catches the exception (a ``try`` around the whole call: free in Python
3.11 when nothing raises), walks the traceback to the innermost frame of generated code, looks
up the bound symbol printed on that line (``thunder.core.codegen.bsym_at``) and adds a note
(PEP 678) naming the op and the source line it came from. The exception keeps its type and
message; only ``__notes__`` grows, once.

Layer: entry points. Imports: core.
"""

from __future__ import annotations

import functools

from thunder.core import prims
from thunder.core.codegen import bsym_at, bsyms_up_to, is_generated
from thunder.core.replays import REPLAYS
from thunder.core.symbol import RANDOM, BoundSymbol, location_text, mutates
from thunder.core.symbolic_numbers import GeneratorDraw

__all__ = ["add_runtime_note", "NOTE_PREFIX", "failed_before_effects", "reruns_after"]

NOTE_PREFIX = "while running "


def add_runtime_note(e: BaseException) -> None:
    """Adds "while running <op> at <file>:<line>" to ``e`` if it came from generated code."""
    try:
        _add_note(e)
    except Exception:  # the note is a courtesy: never replace the user's exception with ours
        pass


def _add_note(e: BaseException) -> None:
    if any(isinstance(n, str) and n.startswith(NOTE_PREFIX) for n in getattr(e, "__notes__", ())):
        return  # noted already (a jitted function called inside another one)
    found: tuple[BoundSymbol, str, int] | None = None
    tb = e.__traceback__
    while tb is not None:  # outermost first: the last match is the innermost generated frame
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith("thunder."):
            bsym = bsym_at(filename, tb.tb_lineno)
            if bsym is not None:
                found = (bsym, filename, tb.tb_lineno)
        tb = tb.tb_next
    if found is None:
        return
    bsym, filename, lineno = found
    e.add_note(_describe(bsym, filename, lineno))


def _describe(bsym: BoundSymbol, filename: str, lineno: int) -> str:
    op = bsym.sym.print_name
    src = _source_of(bsym)
    if src is None:
        return f"{NOTE_PREFIX}{op} (generated code {filename}, line {lineno})"
    where = location_text(src.filename, src.lineno, relative=False)
    if src.function:
        where += f", in {src.function}"
    if src.module_path:
        where += f" (module {src.module_path})"
    text = src.source_line
    return f"{NOTE_PREFIX}{op} at {where}" + (f"\n    {text}" if text else "")


def _source_of(bsym: BoundSymbol, depth: int = 0):
    """The user's source location of ``bsym``, or of the first op it is made of that has one (a fusion)."""
    if bsym.source is not None or depth > 4:
        return bsym.source
    for sub in bsym.subsymbols:
        src = _source_of(sub, depth + 1)
        if src is not None:
            return src
    return None


def failed_before_effects(e: BaseException) -> bool:
    """Whether generated code raised ``e`` before it made any effect that running the call again would repeat: a
    replay (an outside store, a print), a write into a tensor, a random draw (Note [A run that fails before its
    effects] in thunder.compiler). Each generated frame on the way is looked at up to the line that raised, that
    line's op included (a fusion may have run part of itself)."""
    tb, frames = e.__traceback__, []
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if filename.startswith("thunder.") and is_generated(filename):
            frames.append((filename, tb.tb_lineno))
        tb = tb.tb_next
    for k, (filename, lineno) in enumerate(frames):
        bsyms = bsyms_up_to(filename, lineno)
        if k == len(frames) - 1 and bsyms and _refused_before_writing(e, bsyms[-1]):
            bsyms = bsyms[:-1]
        if any(_has_effect(b) for b in bsyms):
            return False
    return bool(frames)


# What torch's in-place ops check before they write anything: that no two elements of the tensor they write share
# memory (an expanded input), autograd's rules for views and leaves, the result's dtype.
_REFUSALS = (
    "more than one element of the written-to tensor refers to a single memory location",
    "is a view and is being modified inplace",
    "a leaf Variable that requires grad is being used in an in-place operation",
    "can't be cast to the desired output type",
)


def _refused_before_writing(e: BaseException, bsym: BoundSymbol) -> bool:
    """Whether ``bsym``, the single op (not a fusion) that raised ``e``, made no write: torch refused the tensor."""
    return isinstance(e, RuntimeError) and not bsym.sym._is_fusion and any(r in str(e) for r in _REFUSALS)


def reruns_after(e: BaseException, entry) -> bool:
    """Whether the call whose ``entry`` may run again eagerly after a failure does so for ``e`` (it failed before
    its effects); where the program's ``try`` may have handled ``e``, a note says why it did not (Note [A run-time
    failure the program handles] in thunder.compiler)."""
    if failed_before_effects(e):
        return True
    if entry.caught:
        e.add_note(
            "thunder: this failure happened inside a try body of the program, after effects (an in-place update, a "
            "store outside, a print) that running the call again eagerly would repeat, so the program's handler did "
            "not run as it does in eager. Move the op that can fail before those effects, or out of the jitted function."
        )
    return False


def _has_effect(bsym: BoundSymbol) -> bool:
    if bsym.sym is prims.unpack_call:  # a draw that is put back before the call runs again is none
        if type(bsym.args[0]) is functools._lru_cache_wrapper:
            return False  # nor an lru_cache lookup: the eager run's call finds what this one cached
        return not (type(bsym.args[0]) is GeneratorDraw and bsym.args[0].keeps)
    if bsym.sym in REPLAYS or mutates(bsym):
        return True
    return RANDOM in bsym.sym.tags or any(_has_effect(s) for s in bsym.subsymbols)
