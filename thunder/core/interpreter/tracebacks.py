"""User-facing tracebacks for exceptions leaving the interpreter.

Layer: ``thunder.core.interpreter``. Imports: the standard library only.

Note [Tracebacks through interpreted frames]
    Interpreted frames are not Python frames, so an exception leaving ``interpret`` would show the
    interpreter's internals. Instead the run loop records the interpreted frames the exception was raised
    in or passed through (``Runtime.unwound``, innermost first). ``reraise_in_user_frames`` drops the interpreter's own entries
    from the traceback and re-raises the exception through a chain of tiny stub functions, one per
    interpreted frame, whose code objects carry the user's file name, line number and function name (and
    no column information, so no misleading carets are printed). The resulting traceback reads like
    CPython's: ``File "user.py", line 12, in foo`` with the source line, down to the line that raised,
    followed by the native frames (if any) that raised it.
"""

from __future__ import annotations

import os
from types import CodeType, FunctionType, TracebackType

__all__ = ["strip_internal_frames", "reraise_in_user_frames"]

_PKG_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _is_internal(code: CodeType) -> bool:
    return code.co_filename.startswith(_PKG_DIR)


def strip_internal_frames(tb: TracebackType | None) -> TracebackType | None:
    """``tb`` without the entries of the interpreter's own modules."""
    kept = []
    while tb is not None:
        if not _is_internal(tb.tb_frame.f_code):
            kept.append(tb)
        tb = tb.tb_next
    new = None
    for t in reversed(kept):
        new = TracebackType(new, t.tb_frame, t.tb_lasti, t.tb_lineno)
    return new


def _no_columns_linetable(ncodeunits: int) -> bytes:
    # Location table entries (PEP 657 format, 3.11+): code 13 = "no column info", followed by a signed varint
    # line delta (0: the line stays co_firstlineno). Each entry covers at most 8 code units.
    out = bytearray()
    while ncodeunits > 0:
        n = min(ncodeunits, 8)
        out.append(0x80 | (13 << 3) | (n - 1))
        out.append(0)
        ncodeunits -= n
    return bytes(out)


_stub_cache: dict[tuple, CodeType] = {}


def _stub_code(filename: str, lineno: int, name: str, qualname: str, innermost: bool) -> CodeType:
    key = (filename, lineno, name, qualname, innermost)
    code = _stub_cache.get(key)
    if code is None:
        src = "raise __thunder_exc__" if innermost else "__thunder_next__()"
        base = compile(src, filename, "exec")
        code = base.replace(
            co_name=name,
            co_qualname=qualname,
            co_firstlineno=max(lineno or 1, 1),
            co_linetable=_no_columns_linetable(len(base.co_code) // 2),
        )
        if len(_stub_cache) > 4096:
            _stub_cache.clear()
        _stub_cache[key] = code
    return code


def reraise_in_user_frames(exc: BaseException, frames: list) -> None:
    """Raises ``exc`` with a traceback made of ``frames`` (``(code, lineno)``, outermost first) followed by
    the non-interpreter entries of its current traceback. Restores ``__context__`` if raising changed it."""
    context, suppress = exc.__context__, exc.__suppress_context__
    exc.__traceback__ = strip_internal_frames(exc.__traceback__)
    fn = None
    innermost_globals: dict = {}
    for i in range(len(frames) - 1, -1, -1):
        code, lineno = frames[i]
        innermost = i == len(frames) - 1
        stub = _stub_code(code.co_filename, lineno, code.co_name, code.co_qualname, innermost)
        if innermost:
            innermost_globals["__thunder_exc__"] = exc
            g = innermost_globals
        else:
            g = {"__thunder_next__": fn}
        fn = FunctionType(stub, g)
    try:
        if fn is None:
            raise exc
        fn()
    except BaseException as e:
        e.__context__, e.__suppress_context__ = context, suppress
        e.__traceback__ = strip_internal_frames(e.__traceback__)
        # The stub frames stay in the traceback: they must not reference the exception (a cycle).
        innermost_globals.clear()
        raise
    finally:
        del exc, fn
