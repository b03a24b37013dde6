"""The trace verifier: run between passes with ``DebugOptions(check_traces=True)``.

It checks what every pass must preserve: each value is defined before it is used, each name
is bound once (in-place ops rebind nothing), and the trace ends with its return.

Layer: core. Imports: core.
"""

from __future__ import annotations

from thunder.core.errors import InternalError
from thunder.core.pytree import tree_leaves
from thunder.core.symbolic import is_symbolic


def verify(trace) -> None:
    """Raises ``InternalError`` (with the trace) if ``trace`` breaks an invariant."""
    defined: set[str] = set()
    for p in trace.args:
        name = getattr(p, "name", None)
        if name is not None:
            if name in defined:
                _fail(trace, f"the parameter {name!r} appears twice in the signature")
            defined.add(name)
    for i, bsym in enumerate(trace.bound_symbols):
        for a in bsym.flat_proxy_args:
            if a.name not in defined:
                _fail(trace, f"line {i} ({bsym.sym.print_name}) uses {a.name!r} before it is defined")
        for leaf in tree_leaves((bsym.args, bsym.kwargs)):
            if is_symbolic(leaf) and not leaf.names <= defined:
                missing = sorted(leaf.names - defined)
                _fail(trace, f"line {i} ({bsym.sym.print_name}) uses the symbolic value(s) {missing} before definition")
        aliased = {a.name for a in bsym.flat_proxy_args}
        for o in bsym.flat_proxy_outs:
            if o.name in defined and o.name not in aliased:
                _fail(trace, f"line {i} ({bsym.sym.print_name}) binds {o.name!r}, which is already defined")
            defined.add(o.name)
    if trace.bound_symbols and trace.bound_symbols[-1].sym.name != "python_return":
        _fail(trace, "the trace does not end with a return")


def _fail(trace, message: str) -> None:
    raise InternalError(f"trace verification failed after {trace.provenance}: {message}\n{trace}")


__all__ = ["verify"]
