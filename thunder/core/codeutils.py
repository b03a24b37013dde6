"""Signatures and printable values, as lightning-thunder's ``thunder.core.codeutils`` offers them.

Tools and tutorials written for lightning-thunder build signatures by hand (``SigInfo``), read
a function's signature for given arguments (``get_siginfo``) and print values the way traces
print them (``prettyprint``). Values print through the trace printer
(``thunder.core.codegen.Printer``), so the text is the text a trace would show.

Layer: core. Imports: core.codegen, core.proxies.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from thunder.core.codegen import Printer
from thunder.core.proxies import Proxy

__all__ = ["SigInfo", "get_siginfo", "to_printable", "prettyprint", "is_literal"]


@dataclass
class SigInfo:
    """A function signature: its name, positional parameters with their values or defaults
    (``args``: ``(name, value)`` pairs), ``*varargs``, keyword-only parameters and ``**varkwargs``.

    ``prettyprint()`` gives the ``def`` line a trace with this signature would print."""

    name: str
    args: list[tuple[str, Any]] = field(default_factory=list)
    varargs: tuple[str, Any] | None = None
    kwargs: dict[str, Any] = field(default_factory=dict)
    varkwargs: tuple[str, Any] | None = None

    def parameter_names(self) -> list[str]:
        """The parameters as a trace's signature lists them (``*args``/``**kwargs`` starred)."""
        names = [name for name, _ in self.args]
        if self.varargs is not None:
            names.append(f"*{self.varargs[0]}")
        elif self.kwargs:
            names.append("*")
        names.extend(self.kwargs)
        if self.varkwargs is not None:
            names.append(f"**{self.varkwargs[0]}")
        return names

    def prettyprint(self) -> str:
        """``def name(a, b, *args, c, **kw):`` (values are not printed: they are the call's inputs)."""
        return f"def {self.name}({', '.join(self.parameter_names())}):"


def get_siginfo(fn: Callable, args: tuple, kwargs: dict) -> SigInfo:
    """The signature of ``fn`` bound to ``args`` and ``kwargs``; unbound parameters get their defaults.

    Raises ``TypeError`` (Python's, from ``inspect.Signature.bind``) when the arguments do not fit."""
    signature = inspect.signature(fn)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    info = SigInfo(getattr(fn, "__name__", type(fn).__name__))
    for name, param in signature.parameters.items():
        value = bound.arguments.get(name)
        if param.kind is inspect.Parameter.VAR_POSITIONAL:
            info.varargs = (name, tuple(value or ()))
        elif param.kind is inspect.Parameter.VAR_KEYWORD:
            info.varkwargs = (name, dict(value or {}))
        elif param.kind is inspect.Parameter.KEYWORD_ONLY:
            info.kwargs[name] = value
        else:
            info.args.append((name, value))
    return info


def is_literal(x: Any) -> bool:
    """Whether ``x`` prints as a Python literal (no name of a trace value in it)."""
    if isinstance(x, Proxy):
        return False
    if isinstance(x, (tuple, list)):
        return all(is_literal(v) for v in x)
    if isinstance(x, dict):
        return all(is_literal(k) and is_literal(v) for k, v in x.items())
    return True


def to_printable(trace: Any, x: Any) -> Any:
    """``x`` in a form a trace can print: collections are rebuilt around their printable items,
    everything else (proxies, numbers, strings, tensors, arrays, ``torch.Size``) is returned as is.

    ``trace`` is accepted for lightning-thunder's signature; printing needs nothing from it."""
    if isinstance(x, torch.Size) or not isinstance(x, (tuple, list, dict)):
        return x
    if isinstance(x, dict):
        return type(x)((k, to_printable(trace, v)) for k, v in x.items())
    items = [to_printable(trace, v) for v in x]
    if hasattr(x, "_fields"):  # a namedtuple
        return type(x)(*items)
    return type(x)(items)


def prettyprint(
    x: Any, *, with_type: bool = False, literals_as_underscores: bool = False, literals_allowed: bool = True
) -> str:
    """``x`` as a trace prints it: a proxy by its name, a collection item by item.

    Args:
        x: the value.
        with_type: append the proxy's type comment (``t0: "cpu f32[2]"``).
        literals_as_underscores: print literals as ``_`` (the left-hand side of a binding).
        literals_allowed: if False, a literal is an error (an argument that must be a trace value).
    """
    if isinstance(x, Proxy):
        return f'{x.name}: "{x.type_string()}"' if with_type and hasattr(x, "type_string") else x.name
    if isinstance(x, (tuple, list)) and not isinstance(x, torch.Size):
        inner = [
            prettyprint(v, literals_as_underscores=literals_as_underscores, literals_allowed=literals_allowed)
            for v in x
        ]
        if isinstance(x, list):
            return "[" + ", ".join(inner) + "]"
        return f"({inner[0]},)" if len(inner) == 1 else "(" + ", ".join(inner) + ")"
    if literals_as_underscores:
        return "_"
    if not literals_allowed:
        raise ValueError(f"prettyprint: {x!r} is a literal where a trace value (a proxy) is required")
    return Printer().value(x)
