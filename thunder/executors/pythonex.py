"""The python executor: runs Python-level symbols (returning, unpacking, prologue checks),
which print as plain Python and need no other implementation.

Layer: executors. Imports: core, extend.
"""

from __future__ import annotations

from thunder.core.symbol import BoundSymbol, Symbol
from thunder.extend import ImplInfo, OperatorExecutor, register_executor


class PythonExecutor(OperatorExecutor):
    def lookup_implementation(self, sym: Symbol) -> ImplInfo | None:
        info = self.implmap.get(sym)
        if info is None and sym.printer is not None:
            info = self.implmap[sym] = ImplInfo(symbol=sym)
        return info

    def can_execute(self, bsym: BoundSymbol) -> bool:
        return self.lookup_implementation(bsym.sym) is not None


ex = PythonExecutor("python")
register_executor(ex)
