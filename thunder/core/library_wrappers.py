"""Library wrappers the tracer runs itself: a wrapper whose outcome, on the path a call takes, depends on a few values
it reads from outside, which are read (and checked) as the interpreter reads them, and nothing else of it is run.

Note [deprecate_kwarg's wrapper]
transformers wraps most model, decoder-layer and attention forwards in ``deprecate_kwarg``'s ``wrapped_func``.
Interpreted, each call runs about 100 instructions (410 per Qwen2 trace) and the prologue checks every closure cell
it reads (``func``, ``is_instance_method``, ``old_name``, ``is_greater_or_equal_version``, ...) and the members of the
``Action`` enum. Where the call does not pass the deprecated keyword, the wrapper builds a name for a message it
does not make and calls ``func(*args, **kwargs)``: its outcome depends on ``old_name`` (whether the call passes it),
``func``, ``is_instance_method`` and ``is_class_method`` (the name reads ``args[0]``, which fails without positional
arguments) and the ``Action`` global (its members compared: an enum's members cannot be reassigned, so the class
fixes them). Those are read as the interpreter reads them (the same checks: a cell or global changed after tracing
retraces) and ``func`` is called under the interpreter; the other cells only matter once the keyword is passed,
and such a call, or one whose first argument's name could not be read plainly, is interpreted as before.
The wrapper is recognised by its code object and that code's bytecode digest: another transformers or Python
version (whose wrapper may do something else) is interpreted (``tests/test_program_forms.py`` checks the digest
still matches the installed version).

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import enum
import hashlib
import sys
import types
from collections.abc import Callable
from typing import Any

from thunder.core.interpreter.execution import call as interpreter_call
from thunder.core.interpreter.execution import enter_function, lookup_type_attr
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.proxies import Proxy

_DEPRECATE_KWARG_DIGEST = {(3, 11): "0ee21e46173a3eee"}  # sha256 of wrapped_func's co_code, first 16 digits
_OBJECT_CLASS = object.__dict__["__class__"]
_TYPE_NAME = type.__dict__["__name__"]
_codes: dict[int, tuple[types.CodeType, Callable]] = {}
_looked_for: set[str] = set()


def _nested_code(code: types.CodeType, *names: str) -> types.CodeType | None:
    for name in names:
        code = next((c for c in code.co_consts if isinstance(c, types.CodeType) and c.co_name == name), None)
        if code is None:
            return None
    return code


def _plain_name(cls: type) -> bool:
    """``cls.__name__`` is read through ``type``'s own slot (no metaclass of the class's defines it)."""
    return lookup_type_attr(type(cls), "__name__") is _TYPE_NAME


def _find_deprecate_kwarg() -> None:
    module = sys.modules.get("transformers.utils.deprecation")
    outer = getattr(getattr(module, "deprecate_kwarg", None), "__code__", None)
    code = _nested_code(outer, "wrapper", "wrapped_func") if outer is not None else None
    if code is None or not isinstance(getattr(module, "Action", None), enum.EnumMeta):
        return
    if hashlib.sha256(code.co_code).hexdigest()[:16] == _DEPRECATE_KWARG_DIGEST.get(sys.version_info[:2]):
        _codes[id(code)] = (code, _deprecate_kwarg_call)


def native_wrapper(fn: types.FunctionType) -> Callable | None:
    """The tracer's own run of ``fn`` (taking the tracer, ``fn`` and the call's arguments), or None."""
    if "transformers.utils.deprecation" not in _looked_for and "transformers.utils.deprecation" in sys.modules:
        _looked_for.add("transformers.utils.deprecation")
        _find_deprecate_kwarg()
    found = _codes.get(id(fn.__code__))
    return found[1] if found is not None and found[0] is fn.__code__ else None


def _deprecate_kwarg_call(tracer: Any, fn: types.FunctionType, *args: Any, **kwargs: Any) -> Any:
    """``deprecate_kwarg``'s ``wrapped_func`` called without the deprecated keyword (Note [deprecate_kwarg's
    wrapper]); otherwise interpreted."""
    code, cells = fn.__code__, dict(zip(fn.__code__.co_freevars, fn.__closure__))

    def read(name: str) -> Any:
        cell = cells[name]
        return tracer.load_deref(code, name, cell.cell_contents, cell)

    runtime = current_runtime()
    old_name = read("old_name")
    plain = type(old_name) is str and old_name not in kwargs
    if plain:
        if read("is_instance_method"):  # ``args[0].__class__.__name__``
            plain = bool(args) and not isinstance(args[0], Proxy)
            plain = (
                plain and lookup_type_attr(type(args[0]), "__class__") is _OBJECT_CLASS and _plain_name(type(args[0]))
            )
        elif read("is_class_method"):  # ``args[0].__name__``
            plain = bool(args) and isinstance(args[0], type) and _plain_name(args[0])
    globals_dict = fn.__globals__
    if plain and "Action" in globals_dict:
        action = tracer.load_global(globals_dict, "Action", globals_dict["Action"], False)
        plain = (
            isinstance(action, enum.EnumMeta)
            and len({action.NONE, action.RAISE, action.NOTIFY, action.NOTIFY_ALWAYS}) == 4
        )
    else:
        plain = False
    if not plain:
        return enter_function(runtime, fn, args, kwargs)
    return interpreter_call(runtime, read("func"), args, kwargs)
