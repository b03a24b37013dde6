"""What a program prints, writes to ``sys.stdout``/``sys.stderr``, warns and logs: recorded while tracing, so that every
call outputs its own values, in order, where eager's call would (the replays are ``prims.python_print``,
``python_warn`` and ``python_log``, run by ``thunder.core.replays``).

``ProgramOutputMixin`` is the part of ``Tracer`` (``thunder.core.jit_ext``) that handles these calls;
``SpecialCallsMixin``'s lookaside tables send ``print``, ``warnings.warn``, ``logging.Logger._log`` and the streams'
``write`` here. The state it reads (``_internal_objects``, ``_warnings_state``, ``_jitted_results``) is set up by
``Tracer.__init__``.

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
import warnings
from typing import Any

from thunder.core import prims
from thunder.core.codegen import is_generated
from thunder.core.errors import ThunderRuntimeError
from thunder.core.interpreter.runtime import frame_line, innermost_frame_objects
from thunder.core.lifting import holds, lift_objects
from thunder.core.nested_jit import as_returned, jitted_results
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_map
from thunder.core.side_effects import snapshot
from thunder.core.symbolic import SymStr
from thunder.core.user_code import _THUNDER_DIR, source_location


class ProgramOutputMixin:
    """``Tracer``'s handling of the program's output: ``print``, stream writes, warnings, logging."""

    def _print(self, *args, **kwargs) -> None:
        """``print`` in the program: recorded, so each call prints its own values in order. Into a stream the program
        made (an ``io.StringIO`` it reads back, ``sys.stdout`` redirected to one): printed now, as what it prints is
        fixed by the trace, or a clear error where it is not (a replay would print into a stream of the past)."""
        stream = kwargs.get("file")
        target = sys.stdout if stream is None else stream
        if id(target) in self._internal_objects:
            # text formatted from symbolic numbers is printed now, so its value is what the trace relies on
            args = tuple(a.pin() if type(a) is SymStr else a for a in args)
            if holds((args, kwargs), lambda v: isinstance(v, Proxy), depth=4):
                raise ThunderRuntimeError(
                    f"Printing traced values into a stream the jitted function made itself (a {type(target).__name__}"
                    f", at {source_location()}) is not supported: the text would be the trace's, not each call's. "
                    "Return the values and format them outside the function, or print to sys.stdout or a stream "
                    "passed in."
                )
            print(*args, **{**kwargs, "file": target})
            return
        if stream is not None and (stream is sys.stdout or stream is sys.stderr):  # the stream of each call's time
            kwargs = {**kwargs, "file": CURRENT_STDOUT if stream is sys.stdout else CURRENT_STDERR}
        if self._jitted_results:  # Note [Printing a jitted function's result] in thunder.core.nested_jit
            args = tree_map(self._as_printed, args)
        prims.python_print(snapshot(lift_objects(args)), snapshot(lift_objects(kwargs)))

    def _jitted_call(self, inner: Any, *args, **kwargs) -> Any:
        """A call of a function ``thunder.jit`` made, traced inline: its results are noted for ``_print``."""
        region = self.computation.scopes[-1]
        start = len(region)
        out = inner(*args, **kwargs)
        self._jitted_results.update(dict.fromkeys(jitted_results(region[start:], out), (region, len(region))))
        return out

    def _as_printed(self, v: Any) -> Any:
        if isinstance(v, TensorProxy) and v.requires_grad and v.name in self._jitted_results:
            region, end = self._jitted_results[v.name]
            return as_returned(self.computation, v, region[end:])
        return v

    def _stream_write(self, stream: Any, text: Any) -> int:
        """``sys.stdout.write(text)`` or ``sys.stderr.write(text)`` in the program: recorded as ``print(text, end="",
        file=stream)``, so each call writes, to the stream of its time (``_print``), as eager's write does."""
        if not isinstance(text, str):
            return stream.write(text)  # eager's TypeError
        self._print(text, end="", file=stream)
        return len(text)

    # Note [Warnings]
    # ``warnings.warn`` in the program is recorded (``prims.python_warn``) with what eager's call would be attributed
    # to, the file, line and module of the frame ``stacklevel`` names, and every call issues it again
    # (``warnings.warn_explicit``), so the caller's filters decide each time whether it shows, as for eager's (a
    # warning issued once at tracing showed once where eager's showed on every call under "always"). Filters the
    # program sets itself, ``with warnings.catch_warnings(): warnings.simplefilter("ignore")``, are set the same way
    # by every call, so they act at tracing: those functions run as they are (not traced: their changes to the
    # filter list were replayed onto the caller's list, which then ignored every warning after the first call), a
    # warning they ignore is not recorded, one they turn into an error raises, and one a ``catch_warnings(record=
    # True)`` of the program records is issued now, into the program's list. A bare ``simplefilter`` the program
    # leaves in place is made once, at tracing.
    def _warn(self, message: Any, category: Any = None, stacklevel: int = 1, source: Any = None, *,
              skip_file_prefixes: tuple = ()) -> None:  # fmt: skip
        """``warnings.warn`` in the program (Note [Warnings]). Past the interpreted frames, the frame is the jitted
        function's caller on the call traced (eager's is each call's)."""
        if isinstance(message, Warning):
            category = message.__class__
        if category is None:
            category = UserWarning
        if not (isinstance(category, type) and issubclass(category, Warning)):
            raise TypeError(f"category must be a Warning subclass, not '{type(category).__name__}'")
        if not isinstance(skip_file_prefixes, tuple):
            raise TypeError("skip_file_prefixes must be a tuple of strs")
        frame = _warning_frame(stacklevel, skip_file_prefixes)
        filename, lineno, namespace = frame if frame is not None else ("sys", 0, sys.__dict__)
        module = namespace.get("__name__", "<string>")
        if warnings_state() != self._warnings_state:  # the program's own filters or recorder
            action = _filter_action(message, category, lineno, module)
            if action == "ignore":
                return
            if action == "error":
                raise message if isinstance(message, Warning) else category(message)
            if warnings._showwarnmsg_impl is not self._warnings_state[2]:  # type: ignore[attr-defined]
                registry = namespace.setdefault("__warningregistry__", {})
                warnings.warn_explicit(message, category, filename, lineno, module, registry)  # as eager's: no globals
                return
        prims.python_warn(snapshot(lift_objects(message)), category, filename, lineno, prims.ModuleGlobals(namespace))

    def _log(self, logger: logging.Logger, level: int, msg: Any, args: tuple, **kwargs: Any) -> None:
        """A record the program logs (``log.warning(...)``; whether the logger is enabled was decided by the program's
        own reads, which the prologue checks): recorded, so each call logs its own values, as ``print``, from the
        program's line (``findCaller`` at the replay would find the generated code's frame)."""
        caller = _log_caller(bool(kwargs.pop("stack_info", False)), kwargs.pop("stacklevel", 1))
        prims.python_log(
            logger, level, snapshot(lift_objects(msg)), snapshot(lift_objects(args)), snapshot(lift_objects(kwargs)),
            caller,
        )


class _CurrentStream:
    """``sys.<name>`` at the time of each write: a replayed ``print(..., file=...)`` writes where eager's would."""

    def __init__(self, name: str):
        self.name = name

    def write(self, text: str) -> int:
        return getattr(sys, self.name).write(text)

    def flush(self) -> None:
        getattr(sys, self.name).flush()

    def __repr__(self) -> str:
        return f"sys.{self.name}"


CURRENT_STDOUT, CURRENT_STDERR = _CurrentStream("stdout"), _CurrentStream("stderr")

def warnings_state() -> tuple:
    """What decides whether a warning shows: the filter list and its contents, and the function that shows it."""
    return (warnings.filters, tuple(warnings.filters), warnings._showwarnmsg_impl, warnings.showwarning)  # type: ignore[attr-defined]


def _filter_action(message: Any, category: type, lineno: int, module: str) -> str:
    """The action of the first of the current ``warnings.filters`` that matches the warning (as ``warn_explicit``
    finds it), else the default one."""
    text = str(message)
    for action, msg, cat, mod, line in warnings.filters:
        if (msg is None or msg.match(text)) and issubclass(category, cat) and (mod is None or mod.match(module)) and (
            line == 0 or lineno == line
        ):
            return action
    return warnings.defaultaction


def _user_frames() -> list[tuple[str, int, str, dict]]:
    """(file, line, function, globals) of the program's frames, innermost first: the interpreted ones, then the real
    ones outside thunder (the caller of the jitted function and its callers)."""
    frames = [(f.code.co_filename, frame_line(f) or 0, f.code.co_name, f.globals) for f in innermost_frame_objects()]
    real = sys._getframe(1)
    while real is not None and (
        real.f_code.co_filename.startswith(_THUNDER_DIR) or is_generated(real.f_code.co_filename)
    ):  # (generated code: the jitted function's own, Note [The fused prologue is the jitted function's code])
        real = real.f_back
    while real is not None:
        frames.append((real.f_code.co_filename, real.f_lineno, real.f_code.co_name, real.f_globals))
        real = real.f_back
    return frames


def _log_caller(stack_info: bool, stacklevel: int) -> tuple[str, int, str, str | None]:
    """What ``logging.Logger.findCaller(stack_info, stacklevel)`` returns for the program's call: (file, line,
    function, stack text) of the ``stacklevel``-th frame outside ``logging`` (and importlib's bootstrap)."""
    frames = _user_frames()
    if not frames:
        return "(unknown file)", 0, "(unknown function)", None
    k = len(frames) - 1  # (past the outermost frame: that one, as findCaller)
    for i, (filename, *_) in enumerate(frames):
        filename = os.path.normcase(filename)
        if filename != logging._srcfile and not ("importlib" in filename and "_bootstrap" in filename):
            stacklevel -= 1
        if stacklevel <= 0:
            k = i
            break
    filename, lineno, function, _ = frames[k]
    sinfo = None
    if stack_info:
        summary = traceback.StackSummary.from_list([(f, n, name, None) for f, n, name, _ in reversed(frames[k:])])
        sinfo = ("Stack (most recent call last):\n" + "".join(summary.format())).rstrip("\n")
    return filename, lineno, function, sinfo


def _warning_frame(stacklevel: int, skip_file_prefixes: tuple) -> tuple[str, int, dict] | None:
    """(file, line, globals) of the frame ``warnings.warn(..., stacklevel)`` attributes a warning to, as CPython's
    ``warn`` finds it, over the interpreted frames and then the real ones outside thunder; None past the stack."""
    if skip_file_prefixes:
        stacklevel = max(2, stacklevel)
    frames = [(filename, lineno, namespace) for filename, lineno, _, namespace in _user_frames()]
    if not frames:
        return None

    def internal(filename: str) -> bool:
        return ("importlib" in filename and "_bootstrap" in filename) or filename.startswith(skip_file_prefixes)

    if stacklevel <= 1 or internal(frames[0][0]):
        return frames[max(stacklevel, 1) - 1] if max(stacklevel, 1) <= len(frames) else None
    i = 0
    for _ in range(stacklevel - 1):
        i += 1
        while i < len(frames) and internal(frames[i][0]):
            i += 1
        if i >= len(frames):
            return None
    return frames[i]

