"""Printing traces as Python source, and compiling that source into callables.

Note [Trace printing]
A trace prints as a runnable Python function: a provenance comment, the imports it needs,
the signature, one line per bound symbol with the output's metadata as a comment, the
symbol's decomposition as indented comments (``print_depth``), and a ``# file:line`` comment
whenever the user's source line changes. Values that have no literal form (functions,
objects) become named constants of the function's globals (the "context"), so the text and
the callable agree.

Layer: core. Imports: core.proxies, core.symbol, core.dtypes, core.devices.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import itertools
import linecache
import math
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.devices import device_str
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy
from thunder.core.pytree import (
    ATTRIBUTE_IS_ITEM,
    ATTRIBUTES_ARE_ITEMS,
    SEQUENCE_ITERATORS,
    ObjectWithProxies,
    mapping_attrs,
    mapping_items,
    mapping_type,
    rebuild_cell,
    rebuild_function,
    rebuild_generator,
    rebuild_iterator,
    rebuild_list,
    rebuild_mapping,
    rebuild_object,
    rebuild_slotted_object,
    slot_names,
)
from thunder.core.symbol import ESCAPES, PARAMETER, BoundSymbol
from thunder.core.symbolic import SymFloat, SymInt, SymStr


class Printer:
    """Turns values into source text, collecting the globals the text needs.

    ``miss`` is the expression a failed prologue check returns: a string, or a function of the
    printer that makes one from ``printer.bsym``, the bound symbol being printed (a diagnostic
    prologue returns why the check failed; see ``thunder.cache_diagnostics``). ``line_bsyms``
    maps each line of the source ``trace_source`` returns (1-based, the lines of
    ``source.split("\\n")``) that prints a top-level bound symbol to it: its statement and, with
    ``print_depth > 1``, its decomposition comments, not the ``# file:line`` comment before it.
    ``tensor_types``: in a prologue compiled for the hot path, a dict where the printer of a type
    check records the type each input must have, so its tensor check can take the C fast check
    (Note [Tensor checks in C]); None elsewhere (printed traces keep the plain conditions). ``own``: the checks are
    printed as the jitted function's own code (Note [The fused prologue is the jitted function's code]); a check
    prints ``on_miss``, never a ``return`` of its own. ``raises``: the global name of an exception class that a
    failed check raises inside a guarded prologue's ``try`` instead of returning ``miss`` (Note [A miss names its line]
    in ``thunder.core.trace``)."""

    def __init__(
        self, *, miss: str | Callable[[Printer], str] = "None", return_call: str | None = None,
        tensor_types: dict[str, type] | None = None, own: OwnCode | None = None, raises: str | None = None,
    ):  # fmt: skip
        self.ctx: dict[str, Any] = {}
        self._const_names: dict[int, str] = {}
        self.reserved: set[str] = set()  # the names of the traces printed (their parameters: the user's names)
        self._miss = miss
        self.own = own
        self._own_checks: OwnCode | None = None  # ``own`` while the checks print (trace_source)
        self._raises = raises
        self._raising = False  # a check printed now stands in the guarded ``try`` (trace_source)
        self.return_call = return_call  # a prologue's return calls this global with its outputs
        self.tensor_types = tensor_types
        self.bsym: BoundSymbol | None = None  # the bound symbol being printed
        self.line_bsyms: dict[int, BoundSymbol] = {}
        self._shared: dict[int, str] = {}  # id(object the values leaving the function hold twice) -> its local name
        self._bound: set[int] = set()  # the objects of ``_shared`` printed (and bound) already

    @property
    def miss(self) -> str:
        """What a failed prologue check returns (an expression)."""
        miss = self._miss
        return miss if type(miss) is str else miss(self)

    @property
    def on_miss(self) -> str:
        """What a failed prologue check does (a statement): return ``miss`` (which is made all the same: a printer's
        ``miss`` may record the check), or inside a guarded ``try`` raise ``raises``; in the jitted function's own
        code, evaluate it and leave the checks' loop for the slow path, the call's ``args`` made again first where the
        code took them as parameters (Note [Positional arguments of the jitted function's own code])."""
        own = self._own_checks
        if own is None:
            miss = self.miss
            return f"raise {self._raises}" if self._raising else f"return {miss}"
        return f"{own.remake}; {self.miss}; break" if own.positional else f"{self.miss}; break"

    def add_ctx(self, name: str, value: Any) -> str:
        prev = self.ctx.get(name, value)
        if prev is not value:
            raise RuntimeError(f"two different values want the global name {name!r} in a trace")
        self.ctx[name] = value
        return name

    def expression(self, expr: str) -> str:
        """A symbolic number's expression, ``math`` made a global where it calls a ``math`` function (Note [math
        functions of symbolic numbers] in thunder.core.symbolic)."""
        if "math." in expr:
            self.add_ctx("math", math)
        return expr

    def constant(self, value: Any, hint: str = "_const") -> str:
        """A global name for ``value`` (one per object), never one the source already uses for another value:
        with the hint ``_c`` the 65th constant was ``_c64``, the name of the complex64 dtype in a tensor check; nor a
        name of the trace: a parameter ``_captured0`` of the user's was read as the constant of that name, and every
        call missed."""
        key = id(value)
        name = self._const_names.get(key)
        if name is None:
            n = len(self._const_names)
            name = f"{hint}{n}"
            while name in self.ctx or name in self.reserved:
                n += 1
                name = f"{hint}{n}"
            self._const_names[key] = name
            self.ctx[name] = value
        return name

    def share_repeated(self, bsyms: list[BoundSymbol]) -> None:
        """A list, dict, set or rebuilt object that the values leaving the function (the arguments of ``ESCAPES``
        symbols: a return, stores) hold twice (``return l, l``; ``self.st = c; return c``) is made once and bound
        to a local name where first printed (``(_shared0 := [1]), _shared0``): the caller gets one object, as
        from eager (Note [Objects the program makes])."""
        self._shared, self._bound = {}, set()
        counts: dict[int, int] = {}
        for bsym in bsyms:
            if ESCAPES in bsym.sym.tags:
                _count_mutables(bsym.args, counts)
        for key, n in counts.items():
            if n > 1:
                self._shared[key] = f"_shared{len(self._shared)}"

    def value(self, x: Any) -> str:
        if isinstance(x, Proxy):
            return x.name
        typ = type(x)
        if typ is int or typ is str or typ is bool or x is None:  # (as ``_literal``, without its other tests)
            return repr(x)
        if self._shared and id(x) in self._shared:
            name = self._shared[id(x)]
            if id(x) in self._bound:
                return name
            self._bound.add(id(x))
            return f"({name} := {self._literal(x)})"
        return self._literal(x)

    def _literal(self, x: Any) -> str:
        if isinstance(x, (SymInt, SymFloat, SymStr)):
            return self.expression(x.expr)
        typ = type(x)
        if x is None or typ is bool or typ is int or typ is str:
            return repr(x)
        if typ is float:
            if math.isfinite(x):
                return repr(x)
            return f"float({str(x)!r})"
        if typ is complex:
            return f"complex({self.value(x.real)}, {self.value(x.imag)})"
        if isinstance(x, torch.dtype):
            self.add_ctx("torch", torch)
            return str(x)
        if isinstance(x, torch.device):
            self.add_ctx("torch", torch)
            return f"torch.device({device_str(x)!r})"
        if isinstance(x, tuple):
            inner = ", ".join(self.value(v) for v in x)
            items = f"({inner},)" if len(x) == 1 else f"({inner})"
            if isinstance(x, torch.Size):  # a shape the program returns or prints stays a torch.Size
                return f"{self.add_ctx('_Size', torch.Size)}({items})"
            if hasattr(x, "_fields"):  # a namedtuple, made as copy makes one (its own ``__new__`` may change items)
                return f"{self.add_ctx('_tuple_new', tuple.__new__)}({self.constant(type(x), '_tuple_type')}, {items})"
            if hasattr(type(x), "n_fields"):  # a structseq such as torch.return_types.max
                return f"{self.constant(type(x), '_tuple_type')}({items})"
            return items
        if isinstance(x, list):
            return "[" + ", ".join(self.value(v) for v in x) + "]"
        if type(x) is collections.deque:
            maxlen = "" if x.maxlen is None else f", maxlen={x.maxlen}"
            return f"{self.add_ctx('_deque', collections.deque)}([{', '.join(self.value(v) for v in x)}]{maxlen})"
        if type(x) is bytearray:
            return f"bytearray({bytes(x)!r})"
        if type(x) in (set, frozenset):  # made by each call: a set one call returns is not the next call's
            items = ", ".join(self.value(v) for v in x)
            literal = f"{{{items}}}" if x else ""
            return f"frozenset({literal})" if type(x) is frozenset else literal or "set()"
        if isinstance(x, dict):
            pairs = x.items() if type(x) is dict else mapping_items(x).items()
            items = "{" + ", ".join(f"{self.value(k)}: {self.value(v)}" for k, v in pairs) + "}"
            if type(x) is dict:
                return items
            # A dict subclass (an OrderedDict, a Hugging Face ModelOutput) is rebuilt as its type.
            self.add_ctx("_rebuild_mapping", rebuild_mapping)
            typ = self.constant(mapping_type(x), "_mapping_type")
            attrs = mapping_attrs(x)
            if attrs is None:
                return f"_rebuild_mapping({typ}, {items})"
            if attrs is ATTRIBUTES_ARE_ITEMS:
                attrs = self.constant(attrs, "_attributes_are_items")
            else:  # an attribute that is an item is set to the rebuilt item (Note [Mappings with a constructor ...])
                is_item = self.constant(ATTRIBUTE_IS_ITEM, "_attribute_is_item")
                pairs = (f"{n!r}: {is_item if v is ATTRIBUTE_IS_ITEM else self.value(v)}" for n, v in attrs.items())
                attrs = "{" + ", ".join(pairs) + "}"
            return f"_rebuild_mapping({typ}, {items}, {attrs})"
        if isinstance(x, ObjectWithProxies) and x.items is not None:
            self.add_ctx("_rebuild_list", rebuild_list)
            return f"_rebuild_list({self.constant(x.template, '_template')}, {self.value(x.attrs)}, {self.value(x.items)})"
        if isinstance(x, ObjectWithProxies):
            name, rebuild = (
                ("_rebuild_function", rebuild_function)
                if type(x.template) is types.FunctionType
                else ("_rebuild_cell", rebuild_cell)
                if type(x.template) is types.CellType
                else ("_rebuild_generator", rebuild_generator)
                if type(x.template) is types.GeneratorType
                else ("_rebuild_iterator", rebuild_iterator)
                if type(x.template) in SEQUENCE_ITERATORS
                else ("_rebuild_slotted_object", rebuild_slotted_object)
                if slot_names(type(x.template))
                else ("_rebuild_object", rebuild_object)
            )
            self.add_ctx(name, rebuild)
            return f"{name}({self.constant(x.template, '_template')}, {self.value(x.attrs)})"
        if isinstance(x, slice):
            return f"slice({self.value(x.start)}, {self.value(x.stop)}, {self.value(x.step)})"
        if x is Ellipsis:
            return "..."
        if isinstance(x, types.ModuleType):
            return self.add_ctx(x.__name__.replace(".", "_"), x)
        return self.constant(x)

    def target(self, out: Any) -> str | None:
        """The left-hand side that binds a symbol's output, or None when nothing is bound."""
        if isinstance(out, Proxy):
            return out.name
        if isinstance(out, (tuple, list)) and _is_bindable(out):
            names = [self.target(o) or "_" for o in out]
            return f"({names[0]},)" if len(names) == 1 else "(" + ", ".join(names) + ")"
        return None

    def call(self, bsym: BoundSymbol) -> str:
        sym = bsym.sym
        callee = sym.print_name
        if sym.module is not None:
            read = self._read_from_dict(sym) if self.own is not None else None
            if read is None:
                self.add_ctx(sym.module_alias, sym.module)
            callee = read or callee
        elif sym.python_impl is not None:
            self.add_ctx(sym.name, sym.python_impl)
        parts = [self.value(a) for a in bsym.args]
        parts += [f"{k}={self.value(v)}" for k, v in bsym.kwargs.items()]
        return f"{callee}({', '.join(parts)})"

    def _read_from_dict(self, sym) -> str | None:
        """``sym``'s callee read from its module's dict where the module has a ``__getattr__`` (Note [A module with
        __getattr__ is read from its dict]), else None."""
        module, (first, _, rest) = sym.module, sym.name.partition(".")
        namespace = getattr(module, "__dict__", None)
        if (
            not isinstance(module, types.ModuleType) or "__getattr__" not in namespace or first not in namespace
            or hasattr(type(module), first)
        ):  # fmt: skip
            return None
        name = self.add_ctx(f"_{sym.module_alias}_dict", namespace)
        return f"{name}[{first!r}]" + (f".{rest}" if rest else "")


# Note [A module with __getattr__ is read from its dict]
# ``torch.add`` in a trace reads the attribute of the module on every call, which CPython (3.11 to 3.13) does not
# specialise for a module that defines ``__getattr__``, as torch does: a lookup through the generic attribute code,
# about 3% of a cached ``a + b``'s own cost. The jitted function's own code (Note [The fused prologue is the jitted
# function's code]) reads it from the module's ``__dict__`` instead (``_torch_dict['add']``), a specialised dict
# subscript: the same value, read on every call as before (a later ``torch.add = ...`` is seen), for a name that the
# dict holds and the module's type does not define (where the module's own attribute lookup finds it in the dict).
# Printed traces and the other compiled code keep ``torch.add``.


def _count_mutables(x: Any, counts: dict[int, int], depth: int = 0) -> None:
    """How often each list, dict, set and rebuilt object occurs in ``x`` (by identity)."""
    if isinstance(x, (list, dict, set, collections.deque, bytearray, ObjectWithProxies)):
        counts[id(x)] = counts.get(id(x), 0) + 1
        if counts[id(x)] > 1:
            return
    if depth > 8:
        return
    if isinstance(x, (list, tuple, set, frozenset, collections.deque)):
        for v in x:
            _count_mutables(v, counts, depth + 1)
    elif isinstance(x, dict):
        for v in x.values():
            _count_mutables(v, counts, depth + 1)
    elif isinstance(x, ObjectWithProxies):
        _count_mutables(x.attrs, counts, depth + 1)
        if x.items is not None:
            _count_mutables(x.items, counts, depth + 1)


def _is_bindable(o) -> bool:
    """Proxies, and tuples of them where an output that is no proxy (None, e.g. a gradient not asked
    for, or a number an operator returns as it is) binds ``_``."""
    return isinstance(o, Proxy) or (
        isinstance(o, (tuple, list))
        and any(_is_bindable(x) for x in o)
        and all(_is_bindable(x) or not isinstance(x, (tuple, list, dict)) for x in o)
    )


def type_comment(out: Any) -> str:
    if isinstance(out, (TensorProxy, NumberProxy)):  # (the common case: one output)
        return f'{out.name}: "{out.type_string()}"'
    if out is None:
        return ""
    proxies = [o for o in _iter_leaves(out) if isinstance(o, (TensorProxy, NumberProxy))]
    return ", ".join(f'{p.name}: "{p.type_string()}"' for p in proxies)


def _iter_leaves(x):
    if isinstance(x, (tuple, list)):
        for v in x:
            yield from _iter_leaves(v)
    elif isinstance(x, dict):
        for v in x.values():
            yield from _iter_leaves(v)
    else:
        yield x


def bsym_lines(bsym: BoundSymbol, *, print_depth: int = 1, printer: Printer | None = None, indent: int = 0) -> list[str]:
    """Source lines for one bound symbol (and its decomposition, as comments, to ``print_depth``)."""
    printer = printer or Printer()
    pad = "  " * indent
    printer.bsym = bsym
    if bsym.sym.printer is not None:
        lines = [pad + line for line in bsym.sym.printer(bsym, printer)]
    else:
        call = printer.call(bsym)
        # In-place ops return their (mutated) input: nothing new to bind.
        aliased = isinstance(bsym.output, Proxy) and any(bsym.output is a for a in bsym.flat_proxy_args)
        target = None if aliased else printer.target(bsym.output)
        comment = type_comment(bsym.output)
        line = f"{target} = {call}" if target else call
        lines = [pad + line + (f"  # {comment}" if comment else "")]
    if print_depth > 1 and bsym.subsymbols:
        sub_printer = Printer()  # comments need no globals
        for sub in bsym.subsymbols:
            for sub_line in bsym_lines(sub, print_depth=print_depth - 1, printer=sub_printer):
                lines.append(pad + "  # " + sub_line)
    return lines


def _lines_of(bsym: BoundSymbol, print_depth: int, printer: Printer, cache: dict | None) -> list[str]:
    """``bsym_lines`` at indent 1, from ``cache`` when it holds this bound symbol's lines."""
    if cache is None or printer._shared or printer._own_checks is not None:  # lines that bind or read a shared
        # object's name are this trace's; so are checks printed as the jitted function's own code
        return bsym_lines(bsym, print_depth=print_depth, printer=printer, indent=1)
    key = (id(bsym), print_depth)
    hit = cache.get(key)
    if hit is not None and hit[0] is bsym:
        for name, value in hit[2]:
            printer.add_ctx(name, value)
        return hit[1]
    consts, known = len(printer._const_names), len(printer.ctx)
    lines = bsym_lines(bsym, print_depth=print_depth, printer=printer, indent=1)
    if len(printer._const_names) == consts:  # a constant's name depends on the trace it is printed in
        # the names it added: the printer's globals only grow, in order (a set of them per bound
        # symbol made printing a 2,000-statement prologue quadratic)
        cache[key] = (bsym, lines, list(itertools.islice(printer.ctx.items(), known, None)))
    return lines


# Note [Compiled code names the user's lines without their text]
# A printed trace shows the user's line before the statements made from it (``# model.py:12: \tx = self.fc(x)``):
# reading that text reads the user's source files whole (``linecache``), 3 ms of a 2-layer GPT-2's first call of 75
# (ten files of transformers and torch). The code a trace compiles into runs the same statements, and nobody reads
# its comments (a traceback shows the statement's line, a runtime error note reads the user's line itself), so it is
# printed with ``source_text=False``: the comment names the file and line only, on the same lines as the shown trace.


def trace_source(
    trace,
    *,
    print_depth: int = 2,
    printer: Printer | None = None,
    with_header: bool = True,
    ranges: Callable[[int, BoundSymbol], str | None] | None = None,
    lines_cache: dict | None = None,
    signature: list[str] | None = None,
    guarded: str | None = None,
    guarded_count: int | None = None,
    source_text: bool = True,
) -> str:
    """The Python source of a trace (its parameters: ``signature`` where given, else the trace's).

    ``source_text=False``: each ``# file:line`` comment without the line's text (Note [Compiled code names the user's
    lines without their text]).

    ``guarded``: a prologue's statements before its final ``return`` (those of its first ``guarded_count`` bound
    symbols where given: a prologue followed by its computation) run in a ``try`` whose handler returns this
    expression, where ``_raised`` is the exception (Note [A prologue that raises misses]).

    With a ``printer`` whose ``own`` is set, and ``guarded`` and ``guarded_count``: the source of a fused prologue
    that is the jitted function's own code (Note [The fused prologue is the jitted function's code]).

    ``ranges(i, bsym)`` names a profiler range around the statement of the ``i``-th bound symbol
    (None: no range); see Note [Profiling ranges]. ``lines_cache`` (a dict the caller keeps while it
    prints traces that share bound symbols, such as the steps of one compilation) reuses the lines of
    a bound symbol printed before, when they named no constant of their own."""
    printer = printer or Printer()
    printer.reserved |= trace.names
    if ranges is not None:
        printer.add_ctx("_range_enter", torch.ops.profiler._record_function_enter_new)
        printer.add_ctx("_range_exit", torch.ops.profiler._record_function_exit)
    body: list[str] = []
    commented = [p for p in trace.args if isinstance(p, (TensorProxy, NumberProxy))]
    if commented:  # (a prologue's parameters are no proxies: its thousand bound symbols need no scan)
        unpacked = {b.args[0].name for b in trace.bound_symbols if PARAMETER in b.sym.tags}
        body.extend(f'  # {p.name}: "{p.type_string()}"' for p in commented if p.name not in unpacked)
    last_source = None
    printer.share_repeated(trace.bound_symbols)
    spans: list[tuple[int, int, BoundSymbol]] = []  # body lines [start, stop) of each bound symbol
    own = printer.own if guarded is not None and guarded_count else None
    raising = printer._raises is not None and own is None and guarded is not None and guarded_count is not None
    for i, bsym in enumerate(trace.bound_symbols):
        printer._own_checks = own if own is not None and i < guarded_count else None
        printer._raising = raising and i < guarded_count
        src = bsym.source
        if src is not None and src is not last_source and src != last_source and print_depth > 0:
            text = src.source_line if source_text else ""
            body.append(f"  # {src.short()}: \t{text}" if text else f"  # {src.short()}")
            last_source = src
        name = ranges(i, bsym) if ranges is not None else None
        if name is not None:
            body.append(f"  _thunder_range = _range_enter({name!r})")
        start = len(body)
        body.extend(_lines_of(bsym, print_depth, printer, lines_cache))
        spans.append((start, len(body), bsym))
        if name is not None:
            body.append("  _range_exit(_thunder_range)")
    printer._own_checks, printer._raising = None, False
    if own is not None:
        body, spans = _direct_body(body, spans, guarded, spans[guarded_count - 1][1], own)
        signature = [*own.positional, "/", *signature] if own.positional else signature
    elif guarded is not None and guarded_count is not None:
        body, spans = _guarded_body(body, spans, guarded, spans[guarded_count - 1][1] if guarded_count else 0)
    elif guarded is not None and body and body[-1].startswith("  return "):
        body, spans = _guarded_body(body, spans, guarded, len(body) - 1)
    signature = ", ".join(trace.signature() if signature is None else signature)
    if any(deco.startswith("torch.") for deco in trace.decorators):
        printer.add_ctx("torch", torch)
    lines = []
    if with_header:
        if trace.provenance is not None:
            lines.append(f"# {trace.provenance}")
        for name, value in sorted(printer.ctx.items()):
            if isinstance(value, types.ModuleType):
                if sys.modules.get(value.__name__) is not value:  # (``types.ModuleType("m")``: not importable)
                    lines.append(f"# {name}: the module object {value.__name__!r}, not one of sys.modules")
                    continue  # the code finds it in its globals, as every name of the context
                lines.append(f"import {value.__name__}" + (f" as {name}" if name != value.__name__ else ""))
        lines.append("")
    for deco in trace.decorators:
        lines.append(f"@{deco}")
    lines.append(f"def {getattr(trace, 'function_name', trace.name)}({signature}):")
    if own is not None:
        lines.extend(_direct_prelude(printer.ctx))
    # 1-based line of each body piece; a piece may hold newlines (a custom printer's lines).
    header = sum(piece.count("\n") + 1 for piece in lines)
    line_of = list(itertools.accumulate((piece.count("\n") + 1 for piece in body), initial=header + 1))
    line_bsyms = printer.line_bsyms
    for start, stop, bsym in spans:
        for n in range(line_of[start], line_of[stop]):
            line_bsyms[n] = bsym
    lines.extend(body or ["  pass"])
    return "\n".join(lines)


# Note [A prologue that raises misses]
# A prologue reads what the program read (attributes, globals, items) in the program's order, but before the
# computation runs. A read that raises (an attribute the user deleted since) is no answer about the call: eager
# might fail earlier, in an op of the computation (an index out of range), or the program might catch the error
# and go on. So a prologue's checks run in a ``try``, and an exception is a miss (``Rejection.raised``); the retrace
# runs the program as eager does and fails where eager fails, with eager's error (``_raise_an_earlier_failure`` in
# ``thunder.core.jit_ext``). The ``try`` costs nothing on a hit; the final ``return`` (the computation's call in a
# fused prologue) stays outside it, so the computation's own errors pass through.


def _guarded_body(body: list[str], spans: list, guarded: str, end: int) -> tuple[list[str], list]:
    """``body`` with its lines before ``end`` inside ``try:``, and ``spans`` moved with the lines."""
    if end == 0:
        return body, spans
    inner = ["  " + piece.replace("\n", "\n  ") for piece in body[:end]]
    guarded_body = ["  try:", *inner, f"  except Exception as _raised:\n    return {guarded}", *body[end:]]
    moved = [(start + 1, stop + 1, b) if start < end else (start + 2, stop + 2, b) for start, stop, b in spans]
    return guarded_body, moved


# Note [The fused prologue is the jitted function's code]
# A cached call of a small program (``a + b`` on 2x2 tensors: 1.4 us of kernel) paid a Python frame for the jitted
# function itself (``fn_`` in ``thunder._make_jitted``), which only called the last entry's fused prologue (a few
# percent of the call: 1.47x -> 1.43x eager, medians of five rounds, 2026-12-06, a loaded 2-core machine). So a small
# fused prologue is printed a second time as code the jitted function runs itself (``fn_.__code__``, swapped by
# ``thunder._Jitted.install_hot_code`` whenever the last entry or its fused prologue changes): the same checks and
# statements, and what ``fn_`` did around them: it records the inputs while asked (``thunder._record_last_inputs``),
# counts the hit, adds the runtime note to an exception of the computation, and on a miss calls the slow path: the
# checks run in a ``while True`` and the printers print each failed check as leaving it (``Printer.on_miss``: the
# miss, then ``break``) where the fused prologue returns the miss (``trace_source`` with a printer's ``own``). Its
# globals are ``fn_``'s, which hold only these hooks (``_thunder_*``) and the builtins: every name of the fused
# prologue's context is a constant of the code object or a local unpacked from one (``embed_constants``, Note
# [Constants of the jitted function's own code]), so a code object is complete in itself and a thread still running
# the code of the entry before keeps running it unchanged.
# Generated frames now stand between the caller and the slow path, so what looks for the caller's frame (a traced
# ``warnings.warn``, the recompile warning) skips generated code (``is_generated``) as it skips thunder's files. An
# entry that may change outcome (Note [Data-dependent values]) or that runs the call again eagerly after a failure
# (Note [A run that fails before its effects]) keeps the call.
_DIRECT_HOOKS = (
    "_thunder_hits", "_thunder_slow", "_thunder_note", "_thunder_recording", "_thunder_state", "_thunder_absent",
    "_thunder_args",
)  # fmt: skip
_CONSTANTS = "__thunder_constants__"

# Note [Positional arguments of the jitted function's own code]
# A function of ``(*args, **kwargs)`` builds a tuple of the arguments on every call, which the prologue then measures
# and unpacks (the dict of ``**kwargs`` is built either way): about 3% of a cached ``a + b`` (1.43x -> 1.40x eager,
# medians of five rounds, 2026-12-06, a loaded 2-core machine). So the own code of an entry whose calls pass N <=
# ``POSITIONAL`` arguments by position and none by name takes them as N positional-only parameters, before ``*args,
# **kwargs``, named as the prologue's unpacking of ``args`` names them, so nothing is unpacked (a cached ``a + b``:
# 14,061 -> 14,000 instructions a call, callgrind, 2026-12-07): the jitted function's ``__defaults__`` is ``POSITIONAL``
# times ``ABSENT`` for good, so a call with fewer arguments finds ``ABSENT`` in the last one (CPython fills the last N
# defaults; no code it runs has more positional parameters than there are defaults), one with more has them in ``args``,
# and both miss. The prologue's printers say so: its arity check prints as a test of the last parameter and of ``args``,
# its unpacking of ``args`` as a comment naming the parameters (``thunder.core.prims.python.positional_arity`` says
# whether the prologue reads its ``args`` only so). On a miss ``args`` is made again (``positional_args``) before the
# check's diagnostics and the slow path see it. (A caller that passed ``ABSENT`` itself, read from ``__defaults__``,
# would lose that argument.)
POSITIONAL = 8


@dataclasses.dataclass(frozen=True)
class OwnCode:
    """A fused prologue printed as the jitted function's own code (Note [The fused prologue is the jitted function's
    code]): its ``*args`` and ``**kwargs`` names, and the parameters that take the call's positional arguments (None:
    it reads them from ``varargs``; Note [Positional arguments of the jitted function's own code])."""

    varargs: str
    varkwargs: str
    positional: tuple[str, ...] | None = None

    @property
    def remake(self) -> str:
        """A statement that makes the call's ``varargs`` from the parameters (and what ``varargs`` holds)."""
        return f"{self.varargs} = {self.args}"

    @property
    def args(self) -> str:
        """The call's positional arguments, an expression."""
        if not self.positional:
            return self.varargs
        return f"_thunder_args(({', '.join(self.positional)},), {self.varargs})"


class _Absent:
    """A positional argument the call did not pass (Note [Positional arguments of the jitted function's own code])."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


def positional_args(given: tuple, rest: tuple) -> tuple:
    """The positional arguments of a call of the jitted function's own code: those of ``given`` it passed, then
    ``rest``."""
    return (*(a for a in given if a is not ABSENT), *rest)


def _direct_prelude(ctx: dict[str, Any]) -> list[str]:
    names = sorted(ctx)
    return [f"  {', '.join(names)}, = {_CONSTANTS!r}"] if names else []


def _direct_body(body: list[str], spans: list, guarded: str, end: int, own: OwnCode) -> tuple[list[str], list]:
    """``body`` (checks before ``end``, printed with ``on_miss`` leaving the loop, then the computation) as the jitted
    function's code (Note [The fused prologue is the jitted function's code]), and its spans."""
    checks = ["    " + piece.replace("\n", "\n    ") for piece in body[:end]]
    computation = ["    " + piece.replace("\n", "\n    ") for piece in body[end:]]
    remake = f"\n      {own.remake}" if own.positional else ""
    record = "_thunder_state.last_inputs = ({}, " + f"{own.varkwargs})"  # Note [Recording the last inputs]
    direct = [
        "  while True:", "    try:", *checks,
        f"    except Exception as _raised:{remake}\n      {guarded}\n      break",
        f"    if next(_thunder_hits): {record.format(own.args)}", "    try:", *computation,
        "    except Exception as _thunder_raised:\n      _thunder_note(_thunder_raised)\n      raise",
        f"  if _thunder_recording: {record.format(own.varargs)}", f"  return _thunder_slow({own.varargs}, {own.varkwargs})",
    ]  # fmt: skip
    moved = [(start + 2, stop + 2, b) if start < end else (start + 5, stop + 5, b) for start, stop, b in spans]
    return direct, moved


# Note [Constants of the jitted function's own code]
# The names of the fused prologue's context are values fixed when it is compiled (the function's code object, the C
# tensor check, the miss hooks), which the jitted function's own code reads without a global: one constant of the
# code, a tuple, unpacked into locals at the top of each call, cost about as much as the rest of its bookkeeping
# (eight names: 300 of the 3,600 instructions a cached ``a + b`` spends beyond eager's, callgrind, 2026-12-07). So a
# name that the code reads only where a constant may stand is a constant of the code itself (``LOAD_CONST``, as
# ``None`` is): the object whose attribute is read or method called, an argument of a call, the value of an
# assignment, and, in the body of a check's ``if`` (a miss, the Python conditions where the C tensor check declines)
# or its ``except``, the function called, as ``<constant>.__call__(...)``. Elsewhere (``x is _obj``, ``_dict[key]``,
# ``if _flag:``) CPython would warn about a literal, fold it, or decide the branch when compiling, so those names are
# unpacked as before. The source is compiled again from its syntax tree with such names as placeholder strings, which
# the values then replace in the code's constants; each placeholder must be loaded as often as the name was read, or
# the code is refused (a value the compiler folded or duplicated).
def embed_constants(fn: Callable, ctx: dict[str, Any], source: str) -> types.CodeType | None:
    """The code of ``fn``, compiled from ``source`` (``trace_source`` with a printer's ``own``), with the values of
    ``ctx`` as its constants (Note [Constants of the jitted function's own code]); None where it would read another
    global than the hooks and the builtins, a ``break`` could leave another loop than its own, or a check returns (a
    printer that does not print ``on_miss``) (Note [The fused prologue is the jitted function's code])."""
    import ast
    import builtins
    import dis

    code = fn.__code__
    allowed = {*_DIRECT_HOOKS, *vars(builtins)}
    if code.co_freevars or {*code.co_varnames, *code.co_cellvars} & set(_DIRECT_HOOKS):
        return None
    tree = ast.parse(source)
    function = next(n for n in tree.body if isinstance(n, ast.FunctionDef))
    loop = next(n for n in ast.walk(function) if isinstance(n, ast.While))
    if any(isinstance(n, (ast.For, ast.AsyncFor, ast.While)) for stmt in loop.body for n in ast.walk(stmt)):
        return None
    checks = loop.body[0]  # the ``try`` of the checks
    if any(isinstance(n, ast.Return) for stmt in checks.body for n in ast.walk(stmt)):
        return None
    body = function.body[1:] if ctx else function.body  # (after the unpacking of ``_direct_prelude``)
    cold = [*(s for stmt in checks.body if isinstance(stmt, ast.If) for s in (*stmt.body, *stmt.orelse))]
    cold = {id(n) for stmt in (*cold, *(s for h in checks.handlers for s in h.body)) for n in ast.walk(stmt)}
    reads: dict[str, list] = {}  # name -> (its node's parent, field, index in the field's list), and how it may stand
    for parent in (n for stmt in body for n in ast.walk(stmt)):
        for field, value in ast.iter_fields(parent):
            for index, node in enumerate(value) if isinstance(value, list) else ((None, value),):
                if isinstance(node, ast.Name) and node.id in ctx:
                    reads.setdefault(node.id, []).append((parent, field, index, _as_constant(parent, field, cold)))
    constant = sorted(name for name, at in reads.items() if all(how is not None for *_, how in at))
    kept = sorted(name for name in reads if name not in constant)
    marks = {f"__thunder_constant_{name}__": name for name in constant}
    for mark, name in marks.items():
        for parent, field, index, how in reads[name]:
            old = getattr(parent, field) if index is None else getattr(parent, field)[index]
            node = ast.copy_location(ast.Constant(mark), old)
            if how == "called":
                node = ast.copy_location(ast.Attribute(node, "__call__", ast.Load()), old)
            if index is None:
                setattr(parent, field, node)
            else:
                getattr(parent, field)[index] = node
    if ctx:
        function.body[0].targets[0].elts = [ast.Name(name, ast.Store()) for name in kept]
        if not kept:
            del function.body[0]
    module = compile(ast.fix_missing_locations(tree), code.co_filename, "exec", dont_inherit=True)
    compiled = next(c for c in module.co_consts if isinstance(c, types.CodeType) and c.co_name == code.co_name)
    values = {mark: ctx[name] for mark, name in marks.items()}
    values[_CONSTANTS] = tuple(ctx[name] for name in kept)
    loads: collections.Counter = collections.Counter()

    def embedded(c: types.CodeType) -> types.CodeType:
        for i in dis.get_instructions(c):
            if i.opname == "LOAD_GLOBAL" and i.argval not in allowed:
                loads["a global"] += 1  # (refused)
            elif i.opname == "LOAD_CONST" and type(i.argval) is str and i.argval in values:
                loads[i.argval] += 1
        consts = (values.get(k, k) if type(k) is str else embedded(k) if type(k) is types.CodeType else k for k in c.co_consts)
        return c.replace(co_consts=tuple(consts))

    result = embedded(compiled)
    expected = collections.Counter({mark: len(reads[name]) for mark, name in marks.items()})
    if ctx and kept:
        expected[_CONSTANTS] = 1
    return result if loads == expected else None


def _as_constant(parent: Any, field: str, cold: set[int]) -> str | None:
    """How a name read as ``parent``'s ``field`` may be a constant (Note [Constants of the jitted function's own
    code]): "value", "called" (as ``<constant>.__call__``) or not at all (None)."""
    import ast

    if isinstance(parent, (ast.Attribute, ast.keyword)) or (
        isinstance(parent, ast.Call) and field == "args" or isinstance(parent, ast.Assign) and field == "value"
    ):
        return "value"
    if isinstance(parent, ast.Call) and field == "func" and id(parent) in cold:
        return "called"
    return None


# Note [Generated code and its resources]
# Each compiled trace registers its source in ``linecache`` (so tracebacks through it show its
# lines) and its line -> bound symbol map in ``_generated`` (so a runtime error can name the op
# and the user's line, see ``bsym_at``). Both are removed when the function is freed: a
# ``weakref.finalize`` on it. The function is not kept in its own globals, so nothing but its
# owners (a cache entry, a trace) holds it and refcounting frees it as soon as they go; an
# evicted cache entry takes its linecache entries with it.
_generated: dict[str, dict[int, BoundSymbol]] = {}
_file_ids = itertools.count(1)


def compile_source(
    source: str, name: str, ctx: dict[str, Any], filename: str, line_bsyms: dict[int, BoundSymbol] | None = None
) -> Any:
    """Compiles generated source and returns the function ``name`` it defines.

    ``filename`` names it in tracebacks and ``linecache`` (made unique if already taken);
    ``line_bsyms`` maps its lines to the bound symbols printed there (see ``bsym_at``)."""
    if filename in _generated:
        filename = f"{filename}_{next(_file_ids)}"
    code = compile(source, filename, "exec")
    namespace = dict(ctx)
    exec(code, namespace)
    fn = namespace.pop(name)  # not in its own globals: no reference cycle (Note [Generated code and its resources])
    # Tracebacks through generated code show its lines.
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    _generated[filename] = line_bsyms or {}
    weakref.finalize(fn, _release, filename).atexit = False
    return fn


# Note [Profiling ranges]
# To say which statement of a trace the time and memory went to, the trace is printed again with a
# torch profiler range (``record_function``) around each statement (``trace_source(ranges=...)``)
# and, while profiling, its compiled function runs that code instead of its own: the function
# object stays the one the cache entry, the fused prologue and the autograd node hold, so exactly
# what a call runs is profiled, and the ordinary code has nothing added to its hot path. Only
# ``__code__`` is swapped (generated functions have no closures, and the ranged source needs the
# same globals plus the two range functions, which are added to the function's globals).
@contextlib.contextmanager
def profiling_ranges(trace, ranges: Callable[[int, BoundSymbol], str | None]):
    """While inside, the compiled function of ``trace`` (``trace.python_callable()``) records a
    profiler range named ``ranges(i, bsym)`` around the statement of its ``i``-th bound symbol.

    Calls made meanwhile from other threads are ranged too. Raises RuntimeError when the
    function cannot take the ranged code (a global of the ranged source that means something else)."""
    fn = trace.python_callable()
    fn = getattr(fn, "__wrapped__", fn)  # a decorated trace (``torch.no_grad()``): the function inside
    printer = Printer()
    source = trace_source(trace, print_depth=1, printer=printer, ranges=ranges)
    ranged = compile_source(
        source, trace.function_name, printer.ctx, f"thunder.{trace.name}_ranged_{trace.uid}", printer.line_bsyms
    )
    inner = getattr(ranged, "__wrapped__", ranged)
    env = fn.__globals__
    clash = [k for k, v in printer.ctx.items() if k in env and env[k] is not v]
    if clash or inner.__code__.co_freevars or fn.__code__.co_freevars:
        raise RuntimeError(f"cannot profile {trace.name}: its code and the ranged code disagree on {clash}")
    for k, v in printer.ctx.items():
        env.setdefault(k, v)
    original, shown = fn.__code__, fn.__dict__.get("__thunder_trace__", OWN_TRACE)
    replace_code(fn, inner.__code__, None)  # the hot path calls the ranged function (no inlined copy of its code)
    try:
        yield
    finally:
        replace_code(fn, original, shown)
        del ranged, inner  # its linecache entries go with it


#: ``replace_code``'s ``trace`` for a function given back the code of the trace it was compiled from.
OWN_TRACE = object()


def replace_code(fn: Callable, code: Any, trace: Any = OWN_TRACE) -> None:
    """Gives the compiled function ``fn`` other ``code``, that of ``trace`` (None: code no trace prints), and tells
    the fused prologues that copied its statements (Note [The computation runs in the prologue's frame] in
    ``thunder.core.trace``), which are made again on their next call. ``fn.__thunder_trace__`` keeps ``trace``,
    except its own trace (which holds ``fn``: no reference cycle, so an evicted entry is freed by refcounting)."""
    fn.__code__ = code
    if trace is OWN_TRACE:
        fn.__dict__.pop("__thunder_trace__", None)
    else:
        fn.__thunder_trace__ = trace
    for ref in list(getattr(fn, "__thunder_code_users__", ())):
        user = ref()
        if user is not None:
            user.code_changed()


def _release(filename: str) -> None:
    linecache.cache.pop(filename, None)
    _generated.pop(filename, None)


def bsym_at(filename: str, lineno: int) -> BoundSymbol | None:
    """The bound symbol printed at line ``lineno`` of generated code ``filename``, or None."""
    lines = _generated.get(filename)
    return lines.get(lineno) if lines is not None else None


def bsyms_up_to(filename: str, lineno: int) -> list[BoundSymbol]:
    """The bound symbols printed at line ``lineno`` of generated code ``filename`` and before it."""
    lines = _generated.get(filename) or {}
    return [b for n, b in lines.items() if n <= lineno]


def bsym_raising(e: BaseException) -> BoundSymbol | None:
    """The bound symbol whose statement raised ``e`` in the generated function that caught it, or None."""
    tb = e.__traceback__
    return bsym_at(tb.tb_frame.f_code.co_filename, tb.tb_lineno) if tb is not None else None


def is_generated(filename: str) -> bool:
    """Whether ``filename`` names generated code that is alive."""
    return filename in _generated
