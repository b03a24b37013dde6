"""Whose code the tracer runs: the user's, or a library's that it takes as fixed; and where the user's code is.

The tracer checks what the user's code reads from outside (its globals, a function's defaults) and takes the
code of torch, thunder, the standard library and installed packages as it is; it makes calls whose result
differs from call to call (``random.random()``, ``time.time()``) on every call rather than freezing one
result; and it names the user's source line (and module path) in traces, sharp-edge warnings and errors.

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import datetime
import os
import random
import sys
import sysconfig
import types
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.interpreter.runtime import frame_line, frame_receiver, innermost_frame_objects
from thunder.core.symbol import SourceLocation, Symbol

_THUNDER_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "")  # (not thunder_viz)
_TORCH_DIR = os.path.join(os.path.dirname(torch.__file__), "")
_INSTALLED_DIRS = tuple(
    {os.path.join(p, "") for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], _THUNDER_DIR)}
)

_LIBRARY_PREFIXES = ("torch.", "numpy.", "typing", "collections", "functools", "enum", "dataclasses", "abc")


def is_code_like(value: Any) -> bool:
    """Functions, classes, modules and symbols: fixed parts of a library's code."""
    return isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType, Symbol)) or (
        callable(value) and not isinstance(value, (torch.Tensor, torch.nn.Module))
    )


def is_installed_code(code: types.CodeType) -> bool:
    """Code of an installed package (site-packages) or of thunder itself, not the user's own."""
    return code.co_filename.startswith(_INSTALLED_DIRS)


def is_fixed_module(module: types.ModuleType) -> bool:
    """Modules whose attributes the program may read without checks: the standard library, torch, thunder."""
    return _is_fixed_module_name(module.__name__)


def _is_fixed_module_name(name: str) -> bool:
    root = name.partition(".")[0]
    return root in sys.stdlib_module_names or root in ("torch", "thunder", "numpy", "builtins") or is_library_module(name)


def is_library_module(name: str) -> bool:
    """Modules of torch, numpy and of the standard library the tracer takes as fixed code (by module name)."""
    return name == "torch" or name == "numpy" or name.startswith(_LIBRARY_PREFIXES)


def is_user_namespace(obj: Any) -> bool:
    """Whether ``obj`` is a class or a module of the user's (not of torch, thunder, numpy or the standard library),
    whose attributes the program may change."""
    if isinstance(obj, type):
        return not _is_fixed_module_name(getattr(obj, "__module__", None) or "builtins")
    return isinstance(obj, types.ModuleType) and not is_fixed_module(obj)


def is_thunder_module(globals_dict: dict) -> bool:
    """Whether ``globals_dict`` is the namespace of a thunder module (whose globals are thunder's own state)."""
    name = globals_dict.get("__name__", "")
    return name == "thunder" or name.startswith("thunder.")


# Functions whose results differ from call to call: a trace would freeze one result.
_NONDETERMINISTIC_MODULES = frozenset({"random", "time", "secrets", "uuid", "numpy.random"})
_NONDETERMINISTIC_CALLS = frozenset({os.urandom, os.getrandom} if hasattr(os, "getrandom") else {os.urandom})


def is_nondeterministic(fn: Callable, module: str | None, receiver: Any) -> bool:
    """Calls whose result differs from call to call: random numbers, clocks, entropy."""
    # (``type(receiver)``: Note [Type checks of the program's objects while tracing] in thunder.core.special_calls)
    if module in _NONDETERMINISTIC_MODULES or issubclass(type(receiver), random.Random):
        return True
    if receiver is not None and (type(receiver).__module__ or "").startswith("numpy.random"):
        return True
    if (receiver is datetime.datetime or receiver is datetime.date) and getattr(fn, "__name__", "") in ("now", "today", "utcnow"):
        return True
    try:
        return fn in _NONDETERMINISTIC_CALLS
    except TypeError:
        return False


def source_location(module_paths: dict[int, str] | None = None) -> SourceLocation | None:
    """The innermost interpreted frame that is the user's (thunder's own frames are skipped), with
    the qualified path of the innermost ``nn.Module`` whose method is running (``"encoder.layers.0"``)
    and, for a frame of torch's, the call site: the innermost frame outside torch and thunder."""
    module_path = None
    if module_paths:
        for f in innermost_frame_objects():
            receiver = frame_receiver(f)
            path = module_paths.get(id(receiver)) if receiver is not None else None
            if path is not None:
                module_path = path
                break
    frames = innermost_frame_objects()
    for frame in frames:
        filename = frame.code.co_filename
        if filename.startswith(_THUNDER_DIR):
            continue
        call_site = None
        if filename.startswith(_TORCH_DIR):
            for outer in frames:  # the frames outside this one
                if not outer.code.co_filename.startswith((_TORCH_DIR, _THUNDER_DIR)):
                    call_site = SourceLocation(outer.code.co_filename, frame_line(outer) or 0, outer.code.co_qualname)
                    break
        return SourceLocation(filename, frame_line(frame) or 0, frame.code.co_qualname, module_path, call_site)
    return None
