"""``thunder.core.interpreter``: a CPython bytecode interpreter written in Python.

Layer: the interpreter (below tracing, above nothing: it knows nothing about torch or traces). Imports: the
Python standard library only.

It runs a program one bytecode instruction at a time (CPython 3.11, 3.12 and 3.13: handlers are registered
with version bounds; on any other version ``interpret`` refuses at once, see ``versions``), enters Python
callees, runs C functions natively and asks a *lookaside* hook before every call. The result (values,
exceptions, side effects) is what CPython gives on the running version. A failure of the interpreter itself
(an unhandled opcode, a stack it misread, the ``NULL`` of a call used as a value) is an ``InterpreterError``
that the interpreted program never catches.

Layout:
  ``errors``        ``InterpreterError``, the ``NULL`` / ``DELETED`` sentinels
  ``versions``      the supported CPythons and the error on any other
  ``opcodes``       the handler registry (``register_opcode_handler`` with version bounds, ``UNSUPPORTED``)
  ``instructions``  decoding code objects into ``CodeInfo`` (cached per code object)
  ``frame``         the interpreter's ``Frame``
  ``runtime``       the per-call ``Runtime``, ``InterpreterCallbacks``, ``is_jitting``, stack queries
  ``execution``     the run loop, the call protocol, function entry, generators
  ``protocols``     implicit dunder calls (see Note [Implicit calls])
  ``handlers/``     one module per opcode family
  ``lookasides``    builtins that need the interpreted frame (``super()``, ``locals()``, ...)
  ``natives``       native functions that call back into Python (``functools.reduce``, ``map``, ``sorted``...)
  ``tracebacks``    tracebacks through the user's lines for escaping exceptions
  ``log``           ``print_interpreter_log``
  ``api``           ``interpret`` and the ``last_*`` queries

Performance (measured on Python 3.11.7, the development machine's CPU): a simple instruction (LOAD_FAST,
BINARY_OP on ints, STORE_FAST, a jump) costs about 0.15-0.3 us; a 23-instruction arithmetic function takes
about 6.5 us per call under the interpreter (0.12 us natively) and about 0.22 ms on its first call, which is
dominated by decoding with ``dis`` (cached per code object afterwards). An interpreted call into another
Python function costs a few microseconds (argument binding, frame creation). Handlers are pre-resolved per
instruction, jump targets and the exception table are resolved to instruction indices once, and nothing is
logged unless ``record_history=True``.

Not supported: generators decorated with ``types.coroutine`` run natively (type-parameter intrinsics, PEP 695,
are run by CPython itself, one instruction each); ``sys._getframe`` and other frame inspection from natively run
code sees the interpreter's own frames (``locals()``, ``globals()``, ``vars()``, ``dir()``, ``eval``/``exec``
without namespaces, ``super()``, ``sys.exc_info()``, ``sys.exception()`` and ``collections.namedtuple``
are looked aside to see the interpreted frame instead).
"""

from .api import interpret, last_interpreted_instructions, last_interpreter_log
from .errors import DELETED, NULL, InterpreterError
from .execution import generator_code, unstarted_generator_call
from .log import print_interpreter_log
from .opcodes import HANDLERS, UNSUPPORTED, register_opcode_handler
from .runtime import (
    InterpreterCallbacks,
    InterpreterFrameInfo,
    constructing,
    current_source_location,
    get_interpreter_stack,
    innermost_frames,
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
    "innermost_frames",
    "constructing",
    "current_source_location",
    "generator_code",
    "unstarted_generator_call",
    "register_opcode_handler",
    "HANDLERS",
    "UNSUPPORTED",
]
