"""The interpreter's frame.

Layer: ``thunder.core.interpreter``. Imports: the standard library, ``instructions``.
"""

from __future__ import annotations

from types import CodeType

from .instructions import CodeInfo, instruction_line

__all__ = ["Frame"]


class Frame:
    """One activation of a code object under the interpreter.

    Fields:
      ctx: the ``Runtime`` it runs in.
      code, info: the code object and its decoded ``CodeInfo``.
      func: the function object (None for class bodies run by ``__build_class__``).
      globals, builtins: the namespaces for LOAD_GLOBAL.
      locals: the locals mapping for LOAD_NAME/STORE_NAME (class bodies, module code), else None.
      fast: the fast-local slots (``info.names``): plain values, cells, or ``NULL`` when unbound.
      stack: the value stack.
      pc: index (into ``info.instructions``) of the next instruction to run.
      kw_names: the tuple set by KW_NAMES for the next CALL (None otherwise).
      retval: the value returned or yielded by the last RETURN/YIELD signal.
      gen_exc: a generator's own handled-exception slot while it is suspended.
      locals_snapshot: the dict ``locals()`` returns in a function frame (one per frame, refreshed on each
        call, like CPython before 3.13).
    """

    __slots__ = (
        "ctx",
        "code",
        "info",
        "func",
        "globals",
        "builtins",
        "locals",
        "fast",
        "stack",
        "pc",
        "kw_names",
        "retval",
        "gen_exc",
        "locals_snapshot",
    )

    def __init__(self, ctx, code: CodeType, info: CodeInfo, func, globals_, builtins_, locals_, fast: list):
        self.ctx = ctx
        self.code = code
        self.info = info
        self.func = func
        self.globals = globals_
        self.builtins = builtins_
        self.locals = locals_
        self.fast = fast
        self.stack: list = []
        self.pc = 0
        self.kw_names = None
        self.retval = None
        self.gen_exc = None
        self.locals_snapshot = None

    def current_line(self) -> int | None:
        return instruction_line(self.info, self.pc - 1)

    def __repr__(self) -> str:
        return f"<interpreter frame {self.code.co_qualname} at {self.code.co_filename}:{self.current_line()}>"
