"""Pretty-printing of the interpreter log.

Layer: ``thunder.core.interpreter``. Imports: the standard library only.

A log (``last_interpreter_log``) is a list whose items are ``dis.Instruction`` objects and dicts with a
``"kind"`` key:
  - ``{"kind": "Line", "fn": qualname, "filename": str, "position": dis.Positions}``: a new source line starts;
  - ``{"kind": "InterpreterCall", "fn": callable, "prev_frame": caller qualname | None}``: a frame is entered;
  - ``{"kind": "InterpreterReturn", "fn": callable, "is_signal": bool, "rval": type | exception}``: it left
    (``is_signal`` True when it left by an exception, then ``rval`` is the exception, else the value's type);
  - ``{"kind": "Lookaside", "fn": callable}``: a call was replaced by a lookaside;
  - ``{"kind": "Opaque", "fn": callable}``: a callable was called natively.
"""

from __future__ import annotations

import dis
import linecache
from collections.abc import Callable

__all__ = ["print_interpreter_log", "format_log_item"]

_COLORS = {
    "instruction": "\x1b[32m",
    "internal": "\x1b[2m",
    "InterpreterCall": "\x1b[1;34m",
    "InterpreterReturn": "\x1b[34m",
    "Lookaside": "\x1b[35m",
    "Opaque": "\x1b[33m",
    "Line": "\x1b[36m",
}
_RESET = "\x1b[0m"


def _fn_name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def format_log_item(item, *, print_source_code: bool = True) -> str:
    if isinstance(item, dis.Instruction):
        # (the interpreter's decoding leaves ``argrepr`` empty: Note [Decoding bytecode])
        shown = item.argrepr or (repr(item.argval) if item.argval is not None and item.argval != item.arg else "")
        arg = f" {shown}" if shown else (f" {item.arg}" if item.arg is not None else "")
        return f"{item.offset:>4} {item.opname}{arg}"
    kind = item["kind"]
    if kind == "Line":
        pos = item["position"]
        lineno = pos.lineno if pos is not None else None
        s = f"Line {item['filename']}:{lineno} in {item['fn']}"
        if print_source_code and lineno is not None:
            src = linecache.getline(item["filename"], lineno).strip()
            if src:
                s += f"\n  {src}"
        return s
    if kind == "InterpreterCall":
        return f"Interpreting call to {_fn_name(item['fn'])} from {item['prev_frame']}"
    if kind == "InterpreterReturn":
        if item["is_signal"]:
            return f"Exception {type(item['rval']).__name__} leaving {_fn_name(item['fn'])}"
        return f"Returning from {_fn_name(item['fn'])} with a value of type {getattr(item['rval'], '__name__', '?')}"
    if kind == "Lookaside":
        return f"Lookaside for {_fn_name(item['fn'])}"
    if kind == "Opaque":
        return f"Opaque call to {_fn_name(item['fn'])}"
    return repr(item)


def print_interpreter_log(
    log: list,
    *,
    use_colors: bool = True,
    indent: bool = True,
    max_depth: int | None = None,
    color_internals: bool = False,
    print_fn: Callable = print,
    print_source_code: bool = True,
) -> None:
    """Prints ``log`` one item per line, indented by call depth.

    Args:
        log: a log from ``last_interpreter_log``.
        use_colors: colour items with ANSI escapes.
        indent: indent items by call depth.
        max_depth: skip items nested deeper than this.
        color_internals: also colour instructions of frames outside the first interpreted file (library
            code); by default they are dimmed.
        print_fn: called with each formatted line.
        print_source_code: print the source line under each Line item.
    """
    depth = 0
    user_file = None
    current_file = None
    for item in log:
        is_inst = isinstance(item, dis.Instruction)
        kind = "instruction" if is_inst else item["kind"]
        if kind == "Line":
            current_file = item["filename"]
            if user_file is None:
                user_file = current_file
        if kind == "InterpreterReturn":
            depth = max(depth - 1, 0)
        if max_depth is None or depth <= max_depth:
            text = format_log_item(item, print_source_code=print_source_code)
            if use_colors:
                color_kind = kind
                if is_inst and not color_internals and current_file is not None and current_file != user_file:
                    color_kind = "internal"
                text = f"{_COLORS.get(color_kind, '')}{text}{_RESET}"
            if indent:
                pad = "  " * depth
                text = "\n".join(pad + line for line in text.split("\n"))
            print_fn(text)
        if kind == "InterpreterCall":
            depth += 1
