"""Symbols and bound symbols.

A ``Symbol`` is a named operation. Its ``meta`` either computes output proxies (a primitive)
or is the decomposition: a Python function over other symbols, whose calls become the
bound symbol's ``subsymbols``. A ``BoundSymbol`` is one call of a symbol in a trace, with its
source location in the user's program and its lineage (the bound symbols of the previous
trace it was made from): the visualiser is built on both.

Layer: core. Imports: core.proxies, core.pytree, core.tracectx, core.errors.
"""

from __future__ import annotations

import functools
import itertools
import linecache
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from thunder.core.errors import ThunderError
from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_leaves
from thunder.core.symbolic import SymFloat, SymInt, SymStr
from thunder.core.tracectx import current_source_location, get_tracectx


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where in the user's program a bound symbol was recorded."""

    filename: str
    lineno: int
    function: str = ""
    module_path: str | None = None  # e.g. "transformer.h.0.attn" for nn.Modules
    # For a line inside torch (an ``nn.Module``'s forward, a functional): the innermost frame outside
    # torch and thunder, i.e. the line of the user's program (or of their library) that led there.
    call_site: SourceLocation | None = None

    @property
    def source_line(self) -> str:
        return linecache.getline(self.filename, self.lineno).strip()

    def short(self) -> str:
        return location_text(self.filename, self.lineno)

    def __str__(self) -> str:
        where = f"{self.short()} in {self.function}" if self.function else self.short()
        line = self.source_line
        return f"{where}: {line}" if line else where


def notebook_cell(filename: str) -> str | None:
    """``"Cell In[3]"`` when ``filename`` names the code of a Jupyter cell (``/tmp/ipykernel_1234/2890.py``),
    as IPython's tracebacks name it, else None. IPython's compiler keeps that map (a cell run again is
    named by its latest run); it is asked only when something has imported IPython already."""
    ipython = sys.modules.get("IPython")
    shell = getattr(ipython, "get_ipython", lambda: None)()
    format_code_name = getattr(getattr(shell, "compile", None), "format_code_name", None)
    named = format_code_name(filename) if format_code_name is not None else None
    return " ".join(named) if named else None


def location_text(filename: str, lineno: int, *, relative: bool = True) -> str:
    """Where a line is, as a person reads it: ``model.py:12`` (relative to the working directory when
    ``relative`` and inside it), or ``Cell In[3], line 5`` for a notebook cell."""
    cell = notebook_cell(filename)
    if cell is not None:
        return f"{cell}, line {lineno}"
    return f"{_display_path(filename) if relative else filename}:{lineno}"


@functools.lru_cache(maxsize=1024)
def _display_path(filename: str) -> str:
    """The path relative to the working directory when inside it; one line, always (it is
    printed in ``#`` comments of generated code)."""
    try:
        rel = os.path.relpath(filename)
        name = rel if not rel.startswith("..") else filename
    except ValueError:
        name = filename
    return name.replace("\r", "\\r").replace("\n", "\\n")


# Implementations used when a symbol is called outside any trace (a printed trace run by
# hand, or a symbol called on real tensors). Filled by the torch executor, keyed by symbol id.
eager_implementations: dict[Any, Callable] = {}

_uids = itertools.count(1)


@dataclass(eq=False)
class Symbol:
    """A named operation. ``id`` keys every rule table (executors, grads, printers)."""

    name: str
    meta: Callable | None
    id: Any = None
    is_prim: bool = False
    module: ModuleType | None = None  # printed as ``<module_alias>.<name>`` and put in the call context
    module_alias: str | None = None
    python_impl: Callable | None = None  # what runs, for executor symbols
    executor: Any = None
    printer: Callable | None = None  # custom printer: (bsym, printer) -> list of lines
    tags: frozenset = frozenset()
    # a call's arguments as torch binds them, for the meta: torch's keyword names (``input=``/``other=``/``axis=``)
    # translated, 0-d integer tensors given as sizes read as ints; None: as given
    binding: Callable[[tuple, dict], tuple[tuple, dict]] | None = None
    _is_fusion: bool = False

    def __post_init__(self):
        if self.id is None:
            self.id = self.name

    def __repr__(self) -> str:
        return f"[Symbol name={self.name}]"

    @property
    def print_name(self) -> str:
        return f"{self.module_alias}.{self.name}" if self.module_alias else self.name

    def __call__(self, *args, **kwargs):
        trace = get_tracectx()
        if trace is None:
            impl = self.python_impl or eager_implementations.get(self.id)
            if impl is None:
                raise ThunderError(
                    f"{self.print_name} was called outside a trace and has no eager implementation; "
                    "call it inside a function compiled with thunder.jit"
                )
            return impl(*args, **kwargs)
        if "out" in kwargs and not self.is_prim:
            kwargs = dict(kwargs)
            out = kwargs.pop("out")
            if out is not None:
                if out_writer is None:
                    raise ThunderError(f"{self.print_name}(..., out=...): no language writes into out= tensors")
                return out_writer(self, args, kwargs, out)
        if self.binding is not None:
            args, kwargs = self.binding(args, kwargs)
        return trace.record(self, args, kwargs)

    def bind(self, *args, output, subsymbols: Sequence[BoundSymbol] = (), source=None, lineage=(), **kwargs):
        """A bound symbol of this symbol without running its meta."""
        return BoundSymbol(self, args, kwargs, output, tuple(subsymbols), source=source, lineage=tuple(lineage))


# Set by the torch language: ``out_writer(symbol, args, kwargs, out)`` is ``symbol(*args, **kwargs, out=out)``,
# the result written into ``out`` as eager writes it.
out_writer: Callable[[Symbol, tuple, dict, Any], Any] | None = None

_SYMBOLIC = (SymInt, SymFloat, SymStr)


def _proxies_read(args: list) -> list[Proxy]:
    """The proxies among ``args``, and those defining the data-dependent sizes of their symbolic numbers (Note
    [Symbolic data-dependent sizes] in thunder.core.data_dependent): a pass sees that the op reads them."""
    read = []
    for a in args:
        if isinstance(a, Proxy):
            read.append(a)
        elif type(a) in _SYMBOLIC and a.proxies:
            read.extend(a.proxies)
    return read


class BoundSymbol:
    """One call of a symbol in a trace."""

    __slots__ = ("sym", "args", "kwargs", "output", "subsymbols", "source", "lineage", "uid", "header", "_flat")

    def __init__(
        self,
        sym: Symbol,
        args: tuple,
        kwargs: dict,
        output: Any,
        subsymbols: tuple = (),
        *,
        source: SourceLocation | None = None,
        lineage: tuple[int, ...] = (),
        header: str | None = None,
    ):
        self.sym = sym
        self.args = args
        self.kwargs = kwargs
        self.output = output
        self.subsymbols = subsymbols
        self.source = source
        self.lineage = lineage
        self.uid = next(_uids)
        self.header = header
        self._flat = None

    def __repr__(self) -> str:
        from thunder.core.codegen import bsym_lines

        return "\n".join(bsym_lines(self, print_depth=1))

    def _flatten(self):
        if self._flat is None:
            args = tree_leaves((self.args, self.kwargs))
            outs = tree_leaves(self.output)
            self._flat = (
                args,
                _proxies_read(args),
                outs,
                [o for o in outs if isinstance(o, Proxy)],
            )
        return self._flat

    @property
    def flat_args(self) -> list:
        return self._flatten()[0]

    @property
    def flat_proxy_args(self) -> list[Proxy]:
        return self._flatten()[1]

    @property
    def flat_outs(self) -> list:
        return self._flatten()[2]

    @property
    def flat_proxy_outs(self) -> list[Proxy]:
        return self._flatten()[3]

    def from_bsym(self, *, lineage: tuple[int, ...] | None = None, **changes) -> BoundSymbol:
        """A new bound symbol made from this one (new uid; lineage points back here)."""
        new = BoundSymbol(
            changes.get("sym", self.sym),
            changes.get("args", self.args),
            changes.get("kwargs", self.kwargs),
            changes.get("output", self.output),
            changes.get("subsymbols", self.subsymbols),
            source=changes.get("source", self.source),
            lineage=(self.uid,) if lineage is None else lineage,
            header=changes.get("header", self.header),
        )
        if "args" not in changes and "kwargs" not in changes and "output" not in changes:
            new._flat = self._flat  # the same values: their flattening holds
        return new

    def rename(self, swap: dict[str, Proxy]) -> BoundSymbol:
        """The same call with proxies replaced by name (``swap`` maps old names to proxies). An
        argument holding none of them is kept as the object it is (a replay's globals dict, say)."""
        from thunder.core.pytree import tree_leaves, tree_map

        def sub(x):
            return swap.get(x.name, x) if isinstance(x, Proxy) else x

        def renamed(x):
            if isinstance(x, Proxy):
                return sub(x)
            if not any(isinstance(leaf, Proxy) and leaf.name in swap for leaf in tree_leaves(x)):
                return x
            return tree_map(sub, x)

        new = BoundSymbol(
            self.sym,
            tuple(renamed(a) for a in self.args),
            {k: renamed(v) for k, v in self.kwargs.items()},
            renamed(self.output),
            tuple(s.rename(swap) for s in self.subsymbols),
            source=self.source,
            lineage=self.lineage,
            header=self.header,
        )
        new.uid = self.uid
        return new


def has_tags(bsym: BoundSymbol, tags: set) -> bool:
    return bool(bsym.sym.tags & tags)


def mutates(bsym: BoundSymbol) -> bool:
    """Whether ``bsym`` writes into a tensor (an IN_PLACE symbol, at any depth of its decomposition)."""
    return IN_PLACE in bsym.sym.tags or any(mutates(s) for s in bsym.subsymbols)


def current_source() -> SourceLocation | None:
    return current_source_location()


DONT_DCE = "dont_dce"  # side effects: never removed by dead-code elimination
IN_PLACE = "in_place"  # mutates an input: a barrier for reordering, CSE and fusion
RANDOM = "random"  # results differ between calls: never merged by CSE
MAY_RAISE = "may_raise"  # can raise at run time depending on values or layout (x // 0, a view): kept when unused
MAY_ALIAS = "may_alias"  # what runs may return its input itself or a view of it (contiguous, to, detach)
UNFUSIBLE = "unfusible"  # runs as its own torch call, never inside a fusion (it calls torch's autograd itself)
ESCAPES = "escapes"  # its arguments leave the function (a return, a store the caller sees): Note [Objects the program makes]
RERUN = "rerun"  # eager runs it again in the backward (a checkpointed region): Note [Activation checkpointing]
PARAMETER = "parameter"  # stands for a parameter of the trace (``unpack_trivial``): printed in its place
