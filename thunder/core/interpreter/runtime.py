"""The runtime context of one interpretation, and the queries about it.

Layer: ``thunder.core.interpreter``. Imports: the standard library, ``errors``, ``instructions``.

A ``Runtime`` is created per call of an interpreted callable. It holds the options (lookaside, callbacks),
the stack of interpreted frames, the handled-exception state of the interpreted program and the record of
executed instructions. Runtimes are kept on a thread-local stack so that natively called code (lookaside
replacements, natively run dunders) can ask ``is_jitting()`` and ``get_interpreter_stack()``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any

from .errors import NULL, InterpreterError
from .instructions import instruction_line

__all__ = [
    "InterpreterCallbacks",
    "Runtime",
    "InterpreterFrameInfo",
    "current_runtime",
    "is_jitting",
    "is_jitting_with_raise",
    "make_opaque",
    "is_opaque",
    "get_interpreter_stack",
    "current_source_location",
]


@dataclasses.dataclass(frozen=True)
class InterpreterCallbacks:
    """Optional hooks called by the interpreter; a hook left ``None`` costs nothing.

    - ``load_global(globals_dict, name, value, is_builtin) -> value``: after LOAD_GLOBAL / LOAD_NAME resolved
      ``name`` in the globals (``is_builtin=False``) or the builtins (``is_builtin=True``). LOAD_NAME calls it
      only when the name was not found in the frame's locals mapping. The returned value is pushed.
    - ``missing_global(globals_dict, name)``: when LOAD_GLOBAL found ``name`` in neither the globals nor the
      builtins (before its NameError propagates).
    - ``store_global(globals_dict, name, value)``: before STORE_GLOBAL, DELETE_GLOBAL (``value is DELETED``),
      and STORE_NAME / DELETE_NAME when the frame's locals mapping is its globals (module-level code).
    - ``load_attr(obj, name, value) -> value``: after LOAD_ATTR / LOAD_METHOD (and 3.12's LOAD_SUPER_ATTR)
      loaded ``obj.name``; for method loads ``value`` is the bound method. The returned value is pushed.
    - ``missing_attr(obj, name)``: when loading ``obj.name`` raised AttributeError (before it propagates); what
      it returns, unless ``NULL``, is the attribute's value instead.
    - ``store_attr(obj, name, value)``: before STORE_ATTR and DELETE_ATTR (``value is DELETED``); a true return
      means it made the store itself (an attribute of a traced tensor), and the instruction makes none.
    - ``store_subscr(container, key, value)``: before STORE_SUBSCR / DELETE_SUBSCR (``value is DELETED``) and
      3.12's STORE_SLICE (``key`` is the slice).
    - ``load_deref(fn_code, name, value, cell) -> value``: when LOAD_DEREF / LOAD_CLASSDEREF (3.12:
      LOAD_FROM_DICT_OR_DEREF) reads a *free* variable of the code object ``fn_code`` (a closure cell of the
      function, not a cell the function created itself). The returned value is pushed.
    - ``store_deref(fn_code, name, value, cell)``: before STORE_DEREF (any cell, free or own).
    - ``make_cell(cell)``: after MAKE_CELL made a cell for an interpreted frame (cells made while interpreting
      are the program's own; any other cell a frame reads came from outside).
    - ``made_object(obj)``: after a class call the interpreter ran (``cls(...)``, its ``__new__`` and ``__init__``)
      made ``obj``, an object of the program's own; also after a class statement or ``type(name, bases, ns)``.
    - ``operands(inst, values)``: before an instruction that uses the contents of its stack operands natively
      (see Note [Operand reads] in ``instructions``); ``values`` are those operands, ``NULL`` included.
    """

    load_global: Callable | None = None
    missing_global: Callable | None = None
    store_global: Callable | None = None
    load_attr: Callable | None = None
    missing_attr: Callable | None = None
    store_attr: Callable | None = None
    store_subscr: Callable | None = None
    load_deref: Callable | None = None
    store_deref: Callable | None = None
    make_cell: Callable | None = None
    made_object: Callable | None = None
    operands: Callable | None = None


_NO_CALLBACKS = InterpreterCallbacks()


class Runtime:
    """State of one interpretation (one call of an interpreted callable).

    Fields:
      fn_lookaside: the user's lookaside (or None).
      callbacks: ``InterpreterCallbacks``.
      frames: the interpreted frames, innermost last.
      exc_slots: handled-exception slots, like CPython's ``exc_info`` chain: slot 0 is the thread's, each
        running generator pushes its own. The handled exception is the last non-None slot.
      instructions: every instruction executed, in order.
      log: the interpreter log (only with ``record_history``), else None.
      record: appends one instruction (to ``instructions``, and to ``log`` when recording history).
      unwound_exc, unwound: an exception and its traceback entries ``[(code, lineno), ...]``, innermost first:
        the interpreted frames it was raised in or passed through.
      propagating: the exception that last left an interpreted frame (so callers do not treat it as new).
    """

    __slots__ = (
        "fn_lookaside",
        "callbacks",
        "cb_load_global",
        "cb_missing_global",
        "cb_store_global",
        "cb_load_attr",
        "cb_missing_attr",
        "cb_store_attr",
        "cb_store_subscr",
        "cb_load_deref",
        "cb_store_deref",
        "cb_make_cell",
        "cb_made_object",
        "cb_operands",
        "frames",
        "exc_slots",
        "instructions",
        "log",
        "record",
        "unwound_exc",
        "unwound",
        "propagating",
        "done",
    )

    def __init__(self, fn_lookaside=None, callbacks: InterpreterCallbacks | None = None, record_history=False):
        self.fn_lookaside = fn_lookaside
        cb = callbacks if callbacks is not None else _NO_CALLBACKS
        self.callbacks = cb
        self.cb_load_global = cb.load_global
        self.cb_missing_global = cb.missing_global
        self.cb_store_global = cb.store_global
        self.cb_load_attr = cb.load_attr
        self.cb_missing_attr = cb.missing_attr
        self.cb_store_attr = cb.store_attr
        self.cb_store_subscr = cb.store_subscr
        self.cb_load_deref = cb.load_deref
        self.cb_store_deref = cb.store_deref
        self.cb_make_cell = cb.make_cell
        self.cb_made_object = cb.made_object
        self.cb_operands = cb.operands
        self.frames: list = []
        self.exc_slots: list = [None]
        self.instructions: list = []
        self.unwound_exc = None
        self.unwound: list = []
        self.propagating = None
        self.done = False
        if record_history:
            log: list = []
            self.log = log
            instructions = self.instructions
            frames = self.frames

            def record(inst):
                instructions.append(inst)
                if inst.starts_line is not None and inst.starts_line is not False and frames:  # 3.13: a bool
                    code = frames[-1].code
                    log.append(
                        {
                            "kind": "Line",
                            "fn": code.co_qualname,
                            "filename": code.co_filename,
                            "position": inst.positions,
                        }
                    )
                log.append(inst)

            self.record = record
        else:
            self.log = None
            self.record = self.instructions.append

    # -- handled exception (sys.exc_info of the interpreted program) --
    def handled_exception(self):
        slots = self.exc_slots
        for i in range(len(slots) - 1, -1, -1):
            e = slots[i]
            if e is not None:
                return e
        return None

    # -- log entries --
    def log_call(self, fn) -> None:
        if self.log is not None:
            prev = self.frames[-1].code.co_qualname if self.frames else None
            self.log.append({"kind": "InterpreterCall", "fn": fn, "prev_frame": prev})

    def log_return(self, fn, value, *, exception: bool = False) -> None:
        if self.log is not None:
            self.log.append(
                {
                    "kind": "InterpreterReturn",
                    "fn": fn,
                    "is_signal": exception,
                    "rval": value if exception else type(value),
                }
            )

    def log_lookaside(self, fn) -> None:
        if self.log is not None:
            self.log.append({"kind": "Lookaside", "fn": fn})

    def log_opaque(self, fn) -> None:
        if self.log is not None:
            self.log.append({"kind": "Opaque", "fn": fn})


class _RuntimeStack(threading.local):
    def __init__(self):
        self.stack: list[Runtime] = []


_runtimes = _RuntimeStack()


def runtime_stack() -> list[Runtime]:
    return _runtimes.stack


def current_runtime() -> Runtime | None:
    s = _runtimes.stack
    return s[-1] if s else None


def is_jitting() -> bool:
    """True while code runs under the interpreter (interpreted, or called natively from interpreted code)."""
    return bool(_runtimes.stack)


def is_jitting_with_raise() -> bool:
    """Like ``is_jitting`` but strict: under the interpreter a call to this function is looked aside and
    returns True. Reaching this body while an interpretation is active means the caller runs natively
    where it was expected to be interpreted, which raises ``InterpreterError``. Outside the interpreter it
    returns False."""
    if _runtimes.stack:
        raise InterpreterError(
            "is_jitting_with_raise() was called natively while the interpreter is active: the calling code is "
            "not being interpreted (it was called natively, e.g. as an implicit dunder or from a lookaside)"
        )
    return False


_OPAQUE_ATTR = "__thunder_interpreter_opaque__"
_opaque_ids: dict[int, Any] = {}


def make_opaque(fn):
    """Marks ``fn`` so that the interpreter calls it natively and never enters it. Returns ``fn``."""
    try:
        setattr(fn, _OPAQUE_ATTR, True)
    except (AttributeError, TypeError):
        _opaque_ids[id(fn)] = fn
    return fn


def is_opaque(fn) -> bool:
    d = getattr(fn, "__dict__", None)
    if d is not None and d.get(_OPAQUE_ATTR, False):
        return True
    return _opaque_ids.get(id(fn)) is fn if _opaque_ids else False


@dataclasses.dataclass(frozen=True)
class InterpreterFrameInfo:
    """One interpreted user frame: ``code``, current ``lineno``, ``name`` (co_name), ``qualname``, ``filename``,
    and ``receiver``: the value of a method's ``self`` parameter (None for other frames)."""

    code: CodeType
    lineno: int | None
    name: str
    qualname: str
    filename: str
    receiver: object = None


def get_interpreter_stack() -> list[InterpreterFrameInfo]:
    """The interpreted frames of all active interpretations on this thread, outermost first."""
    return [_frame_info(f) for rt in _runtimes.stack for f in rt.frames]


def innermost_frames() -> Iterator[InterpreterFrameInfo]:
    """The interpreted frames, innermost first, made as they are asked for: a search that stops at the first few
    (the user's line of each recorded op) does not describe the whole stack."""
    for f in innermost_frame_objects():
        yield _frame_info(f)


def innermost_frame_objects() -> Iterator:
    """The interpreter's own frames (``Frame``), innermost first: for searches that read one or two fields of
    many frames (``frame.code``, ``frame_receiver``, ``frame_line``) before describing the one they want."""
    for rt in reversed(_runtimes.stack):
        yield from reversed(rt.frames)


def frame_line(f) -> int | None:
    """The line ``f`` is running."""
    return instruction_line(f.info, f.pc - 1)


def constructing(obj: object) -> bool:
    """Whether an interpreted frame is running ``obj``'s ``__init__``, ``__new__`` or ``__post_init__``."""
    return any(
        f.code.co_name in _CONSTRUCTORS and frame_receiver(f) is obj for rt in _runtimes.stack for f in rt.frames
    )


_CONSTRUCTORS = frozenset({"__init__", "__new__", "__post_init__"})


def _frame_info(f) -> InterpreterFrameInfo:
    code = f.code
    return InterpreterFrameInfo(
        code, frame_line(f), code.co_name, code.co_qualname, code.co_filename, frame_receiver(f)
    )


def frame_receiver(f) -> object:
    """The ``self`` of the method ``f`` runs, or None."""
    code = f.code
    if not code.co_argcount or code.co_varnames[0] != "self" or not f.fast:
        return None
    value = f.fast[0]
    if type(value).__name__ == "cell":
        try:
            value = value.cell_contents
        except ValueError:
            return None
    return None if value is NULL else value


def current_source_location() -> tuple[str, int | None, str] | None:
    """``(filename, lineno, qualname)`` of the innermost interpreted frame, or None."""
    for rt in reversed(_runtimes.stack):
        if rt.frames:
            f = rt.frames[-1]
            code = f.code
            return code.co_filename, instruction_line(f.info, f.pc - 1), code.co_qualname
    return None
