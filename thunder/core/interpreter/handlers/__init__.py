"""Opcode handlers, one module per family; importing this package registers them all.

Layer: ``thunder.core.interpreter`` handlers. Imports: the standard library, the interpreter's modules.
"""

# 3.12 lists pseudo-instructions and instrumented variants in dis.opmap; none occur in co_code we decode.
import dis as _dis

from ..opcodes import mark_unsupported
from . import arithmetic, calls, containers, control, exceptions, generators, imports, matching, stack, variables

for _name in _dis.opmap:
    if _name.startswith("INSTRUMENTED_"):
        mark_unsupported(_name, "instrumented instructions only appear while sys.monitoring is active")
    elif _dis.opmap[_name] >= 256:
        mark_unsupported(_name, "pseudo-instruction of the compiler, never in co_code")

__all__ = [
    "arithmetic",
    "calls",
    "containers",
    "control",
    "exceptions",
    "generators",
    "imports",
    "matching",
    "stack",
    "variables",
]
