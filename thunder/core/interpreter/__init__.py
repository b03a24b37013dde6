"""``thunder.core.interpreter``: a CPython bytecode interpreter written in Python.

Layer: the interpreter (below tracing, above nothing: it knows nothing about torch or traces). Imports: the
Python standard library only.

It runs a program one bytecode instruction at a time (Python 3.11; 3.12 handlers are registered with version
bounds), enters Python callees, runs C functions natively and asks a *lookaside* hook before every call.
The result (values, exceptions, side effects) is what CPython gives.

Layout:
  ``errors``        ``InterpreterError``, the ``NULL`` / ``DELETED`` sentinels
  ``opcodes``       the handler registry (``register_opcode_handler`` with version bounds, ``UNSUPPORTED``)
  ``instructions``  decoding code objects into ``CodeInfo`` (cached per code object)
  ``frame``         the interpreter's ``Frame``
  ``runtime``       the per-call ``Runtime``, ``InterpreterCallbacks``, ``is_jitting``, stack queries
  ``execution``     the run loop, the call protocol, function entry, generators
  ``protocols``     implicit dunder calls (see Note [Implicit calls])
  ``handlers/``     one module per opcode family
  ``lookasides``    builtins that need the interpreted frame (``super()``, ``locals()``, ...)
  ``tracebacks``    tracebacks through the user's lines for escaping exceptions
  ``log``           ``print_interpreter_log``
  ``api``           ``interpret`` and the ``last_*`` queries

Performance: measured on Python 3.11 (CPU of the development machine), a call of a 20-instruction function
costs about 25 us in total under the interpreter (first call, decoding included, about 80 us), i.e. roughly
1 us per simple instruction (LOAD_FAST, BINARY_OP on ints, STORE_FAST); calls into interpreted Python
functions cost about 3-5 us each. Decoded code objects are cached, handlers are pre-resolved per instruction,
jump targets and the exception table are resolved to instruction indices once.
"""

from .api import interpret, last_interpreted_instructions, last_interpreter_log
from .errors import DELETED, NULL, InterpreterError
from .log import print_interpreter_log
from .opcodes import HANDLERS, UNSUPPORTED, register_opcode_handler
from .runtime import (
    InterpreterCallbacks,
    InterpreterFrameInfo,
    current_source_location,
    get_interpreter_stack,
    is_jitting,
    is_jitting_with_raise,
    make_opaque,
)

__all__ = [
    "interpret",
    "InterpreterCallbacks",
    "InterpreterError",
    "InterpreterFrameInfo",
    "DELETED",
    "NULL",
    "is_jitting",
    "is_jitting_with_raise",
    "make_opaque",
    "last_interpreted_instructions",
    "last_interpreter_log",
    "print_interpreter_log",
    "get_interpreter_stack",
    "current_source_location",
    "register_opcode_handler",
    "HANDLERS",
    "UNSUPPORTED",
]
