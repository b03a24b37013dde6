"""Traces: an ordered list of bound symbols with a signature.

Layer: core. Imports: core.symbol, core.proxies, core.codegen, core.tracectx.
"""

from __future__ import annotations

import contextlib
import dis
import itertools
import keyword
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from thunder.core.codegen import (
    POSITIONAL,
    OwnCode,
    Printer,
    bsym_raising,
    compile_source,
    embed_constants,
    trace_source,
)
from thunder.core.errors import ThunderError
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.rules import autocast_rules, grad_rules
from thunder.core.symbol import DONT_DCE, IN_PLACE, MAY_RAISE, RANDOM, BoundSymbol, Symbol
from thunder.core.torch_state import grad_mode_on
from thunder.core.tracectx import current_source_location, get_tracectx, reset_tracectx, set_tracectx, tracectx

__all__ = [
    "TraceCtx", "TraceProvenance", "from_trace", "get_tracectx", "set_tracectx", "reset_tracectx", "tracectx",
    "detached_trace",
]  # fmt: skip

_trace_ids = itertools.count()

# Ids of symbols whose results never require grad, whatever their inputs (filled by the torch language).
NO_GRAD_RESULTS: set = set()

# Note [Autocast]
# Under ``torch.autocast`` (entered around the call or inside the program) eager casts the floating
# inputs of some ops to the autocast dtype (matmul, linear, convolutions, ...) and of others to
# float32 (losses, norms, ...), per device type; ``autocast_rules`` holds those policies by symbol,
# as the torch language declares them. The trace records the casts as ``prims.convert_element_type``
# before the op, so the backward differentiates through them (gradients return in the inputs' own
# dtypes, as in eager). The prologue checks the autocast state the trace began in, and the compiled
# functions run with autocast off: their casts are explicit.
_AUTOCAST_ELIGIBLE = (torch.float32, torch.float16, torch.bfloat16)  # never float64, as in eager

# Names a trace may not give to proxies: they are globals of generated code.
RESERVED_NAMES = frozenset(
    {"torch", "ltorch", "prims", "thunder", "math", "float", "complex", "slice", "type", "len", "isinstance", "None", "True", "False"}
)


def _numbers_from_numpy(sym: Symbol, args: tuple, kwargs: dict, leaves: list) -> tuple[tuple, dict]:
    """A numpy scalar argument (``np.finfo(np.float32).eps``, ``np.int64(3)``) as the Python number it holds,
    as PyTorch's argument parser reads it (a wrapped number: ``x * np.float32(2)`` keeps ``x``'s dtype); a
    factory's ``data`` (``torch.tensor(np.int32(3))``) is left as it is. ``leaves``: those of the arguments."""
    np = sys.modules.get("numpy")
    if np is None:
        return args, kwargs
    generic = np.generic
    if not any(isinstance(a, generic) for a in leaves):
        return args, kwargs

    def number(x):
        return x.item() if isinstance(x, np.generic) and x.dtype.kind in "biufc" else x

    code = getattr(sym.meta, "__code__", None)
    if code is not None and code.co_argcount and code.co_varnames[0] == "data":
        kwargs = {k: v if k == "data" else tree_map(number, v) for k, v in kwargs.items()}
        return (*args[:1], *tree_map(number, args[1:])), kwargs
    return tree_map(number, args), tree_map(number, kwargs)


@dataclass(frozen=True)
class TraceProvenance:
    """Which pass made a trace, and how long it took."""

    pass_name: str
    ms: float = 0.0

    def __str__(self) -> str:
        return f"Constructed by {self.pass_name} (took {int(self.ms)} milliseconds)"


class TraceCtx:
    """An ordered list of bound symbols with a signature; prints as a Python function."""

    def __init__(self, fn: Callable | None = None, *, name: str | None = None):
        self.fn = fn
        # The function's name when one is given (lightning-thunder's ``TraceCtx(fn)``), else "computation".
        self.name = name if name is not None else getattr(fn, "__name__", None) or "computation"
        self.args: list[Any] = []  # positional parameters (proxies)
        self.kwargs: dict[str, Any] = {}  # lightning-thunder's spelling; parameters are ``args`` here
        self._siginfo = None  # a ``thunder.core.codeutils.SigInfo`` set by hand: the signature printed
        self.varargs: str | None = None  # ``*args`` parameter name, for prologues
        self.varkwargs: str | None = None
        self.bound_symbols: list[BoundSymbol] = []
        self.scopes: list[list[BoundSymbol]] = [self.bound_symbols]
        # A scope below the top whose bound symbols keep their source location too (a vmapped function's elements:
        # Note [torch.vmap in a trace] in thunder.core.traced_vmap names the line of an op it cannot batch)
        self.located_scope: list[BoundSymbol] | None = None
        self.names: set[str] = set()
        # Values read from the input module, by name: their qualified names in it
        # (``"transformer.h.0.ln_1.weight"``, ``"transformer.h.0"``), which the explorer and the
        # cache-miss reasons show them by.
        self.input_paths: dict[str, str] = {}
        self._counters: dict[str, Any] = {}
        self.provenance: TraceProvenance | None = None
        self.decorators: list[str] = []
        self.tags: set[str] = set()
        self.uid = next(_trace_ids)
        self.grad_mode_read = False  # whether what the trace computed depends on torch's grad mode
        self.inference_mode_read = False  # whether it depends on inference mode (``TensorProxy.is_inference``)
        self.autocast_read: set[str] = set()  # device types whose autocast state the trace depends on
        self.autocast_cast = False  # whether autocast changed a dtype in it
        # Whether torch.autocast casts the inputs of the ops recorded at its top level: in the trace of the
        # program's own code (Note [Autocast]), not in those the passes make (a gradient rule's matmul under a
        # caller's autocast would be cast to the autocast dtype).
        self.follows_autocast = False
        # (symbol, args, kwargs) -> eager's exception for a call whose meta raised, or None: Note [An op's failure
        # the program catches] in thunder.core.jit_ext
        self.eager_failure: Callable[[Symbol, tuple, dict], BaseException | None] | None = None
        # Set by the tracer: whether a ``try`` of the program's may handle a failure of the op being recorded
        self.in_program_try: Callable[[], bool] | None = None
        self._callable = None

    # --- names -------------------------------------------------------------------------
    def make_name(self, prefix: str = "t") -> str:
        counter = self._counters.get(prefix)
        if counter is None:
            counter = self._counters[prefix] = itertools.count()
        while True:
            name = f"{prefix}{next(counter)}"
            if name not in self.names:
                self.names.add(name)
                return name

    def add_name(self, name: str) -> None:
        if name in self.names:
            raise ThunderError(f"the name {name!r} is already used in trace {self.name}")
        if not name.isidentifier() or keyword.iskeyword(name) or name in RESERVED_NAMES:
            raise ThunderError(f"{name!r} cannot be the name of a value in a trace")
        self.names.add(name)

    def safe_name(self, name: str) -> str:
        """``name`` if free and valid, else a fresh variant of it (not reserved yet: a proxy made
        with it reserves it)."""
        if name.isidentifier():  # the usual case: no character to replace
            base = name
        else:
            base = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or "v"
            if base[0].isdigit():
                base = "_" + base
        candidate, i = base, 0
        while candidate in self.names or keyword.iskeyword(candidate) or candidate in RESERVED_NAMES:
            candidate = f"{base}_{i}"
            i += 1
        return candidate

    # --- recording ---------------------------------------------------------------------
    def record(self, sym: Symbol, args: tuple, kwargs: dict) -> Any:
        """Runs ``sym``'s meta and appends the bound symbol to the innermost scope."""
        scopes = self.scopes
        outer = scopes[-1]
        top = len(scopes) == 1
        leaves = None  # the arguments' leaves, flattened once for the steps below (while the arguments stay)
        if top and not sym.is_prim:  # prims at the top are replays: the objects they change are the outside ones
            args, kwargs = _snapshot(args), _snapshot(kwargs)
            leaves = tree_leaves((args, kwargs))
            new_args, new_kwargs = _numbers_from_numpy(sym, args, kwargs, leaves)
            if new_args is not args or new_kwargs is not kwargs:
                args, kwargs, leaves = new_args, new_kwargs, None
        if top and self.follows_autocast and sym in autocast_rules:
            new_args, new_kwargs = self._autocast(sym, args, kwargs)
            if new_args is not args or new_kwargs is not kwargs:
                args, kwargs, leaves = new_args, new_kwargs, None
        sub: list[BoundSymbol] = []
        scopes.append(sub)
        try:
            result = sym.meta(*args, **kwargs)
        except ThunderError as e:
            if top:
                _explain_untraced_tensors(e, args, kwargs)
                _locate_error(e, sym)
                eager = self.eager_failure(sym, args, kwargs) if self.eager_failure is not None else None
                if eager is not None:
                    raise eager from None
            raise
        finally:
            scopes.pop()
        if top and IN_PLACE in sym.tags and grad_mode_on() and self.in_program_try is not None and self.in_program_try():
            _refuse_leaf_writes(sub)
        if top:
            self._propagate_requires_grad(sym, args, kwargs, result, sub, leaves)
        located = top or outer is self.located_scope
        bsym = BoundSymbol(sym, args, kwargs, result, tuple(sub), source=current_source_location() if located else None)
        outer.append(bsym)
        return result

    def _autocast(self, sym: Symbol, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Under ``torch.autocast``, the call's floating inputs cast as eager's autocast casts them
        (Note [Autocast])."""
        from thunder.core import prims

        device_type = next((a.device.type for a in tree_leaves((args, kwargs)) if type(a) is TensorProxy), None)
        if device_type is None:
            return args, kwargs
        self.autocast_read.add(device_type)
        if not torch.is_autocast_enabled(device_type):
            return args, kwargs
        target = autocast_rules.get(sym)(device_type, torch.get_autocast_dtype(device_type))
        if target is None:
            return args, kwargs
        self.autocast_cast = True

        def cast(x):
            if type(x) is TensorProxy and x.device.type == device_type and x.dtype in _AUTOCAST_ELIGIBLE:
                return x if x.dtype == target else prims.convert_element_type(x, target)
            return x

        return tree_map(cast, args), tree_map(cast, kwargs)

    def _propagate_requires_grad(
        self, sym: Symbol, args: tuple, kwargs: dict, result: Any, subsymbols: list, leaves: list | None = None
    ) -> None:
        """As in eager: with grad mode on, a floating or complex result computed from a tensor that requires
        grad requires grad too (unless the symbol's results never do: ``detach``, ``zeros_like``, ...).
        "Computed from" is eager's: a symbol with a gradient rule of its own is an op with a derivative
        formula, differentiable in every input (``fill(a, v)``: a zero gradient for ``a``); one without is
        a composite, whose results are computed from what the parts of its decomposition read, one level
        down (``a.type_as(b)`` and ``a.expand_as(b)`` read only ``b``'s metadata, and require grad only if
        ``a`` does). A result no part makes (an opaque meta's) is computed from every input; an input
        returned as it is stays what it is, but for an in-place symbol's. The answer depends on the grad
        mode, which the trace then records it read."""
        if sym.id in NO_GRAD_RESULTS:
            return
        if leaves is None:
            leaves = tree_leaves((args, kwargs))
        active = {a.name for a in leaves if type(a) is TensorProxy and a.requires_grad}
        if not active:
            return
        self.grad_mode_read = True
        if not grad_mode_on():
            return
        made: set[str] = set()
        for s in subsymbols if grad_rules.get(sym) is None else ():
            if s.sym.id not in NO_GRAD_RESULTS and any(a.name in active for a in s.flat_proxy_args):
                active.update(o.name for o in s.flat_proxy_outs)
            made.update(o.name for o in s.flat_proxy_outs)
        read = {a.name for a in leaves if isinstance(a, Proxy)}
        for out in tree_leaves(result):
            if (
                type(out) is TensorProxy
                and (out.name in active or (out.name not in made and (out.name not in read or IN_PLACE in sym.tags)))
                and not out.requires_grad
                and (out.dtype.is_floating_point or out.dtype.is_complex)
                and not out.never_requires_grad  # the op's meta knows better (eager ops)
            ):
                out.requires_grad = True

    def add_bound_symbol(self, bsym: BoundSymbol) -> None:
        self.scopes[-1].append(bsym)

    # --- printing and running ----------------------------------------------------------
    @property
    def function_name(self) -> str:
        """The name of the function the trace prints as (a hand-set ``_siginfo``'s, else ``name``)."""
        return self._siginfo.name if self._siginfo is not None else self.name

    def siginfo(self):
        """The trace's signature as a ``thunder.core.codeutils.SigInfo`` (lightning-thunder's API)."""
        from thunder.core.codeutils import SigInfo

        if self._siginfo is not None:
            return self._siginfo
        return SigInfo(self.name, [(a.name if hasattr(a, "name") else str(a), None) for a in self.args])

    def signature(self) -> list[str]:
        if self._siginfo is not None:
            return self._siginfo.parameter_names()
        params = [a.name if hasattr(a, "name") else str(a) for a in self.args]
        if self.varargs:
            params.append(f"*{self.varargs}")
        if self.varkwargs:
            params.append(f"**{self.varkwargs}")
        return params

    def python(self, *, print_depth: int = 2) -> str:
        return trace_source(self, print_depth=print_depth)

    def __repr__(self) -> str:
        return self.python()

    def python_callable(self) -> Callable:
        """The trace compiled into a Python function (cached)."""
        if self._callable is None:
            printer = Printer()
            source = trace_source(self, print_depth=1, printer=printer, source_text=False)
            self._callable = compile_source(
                source, self.function_name, printer.ctx, f"thunder.{self.name}_{self.uid}", printer.line_bsyms
            )
            self._callable.__thunder_source__ = source
            # Callables of the context that want to know where they are called from (a region that may later run
            # inline: Note [A settled region runs inline] in thunder.executors.torch_compile).
            for value in printer.ctx.values():
                told = getattr(type(value), "__thunder_compiled_into__", None)
                if told is not None:
                    told(value, self, self._callable)
        return self._callable

    def fused_prologue_callable(
        self, computation: Callable, missed: Callable[..., Any], inline: TraceCtx | None = None, direct: bool = False
    ) -> Callable:
        """This prologue compiled together with the call of ``computation``: one call on a cache hit.

        It is called as ``fused(args, kwargs)`` (the call's positional arguments as a tuple, its keyword
        arguments as a dict: the hot path passes on what it received, without unpacking and packing them
        again); when a check fails it returns ``missed(the check's bound symbol, its frame, (args, kwargs))``, and
        when a read raises ``missed(the raising bound symbol, its frame, (args, kwargs), the exception)`` (Note [A
        prologue that raises misses]), else whatever ``computation`` returns. Its tensor checks try the C fast check
        first (Note [Tensor checks in C]). With ``inline``, the trace ``computation``'s code runs, its statements
        follow the checks in the same function (Note [The computation runs in the prologue's frame]) where their names
        allow.
        With ``direct``, a small one also gets ``__thunder_direct__``: a function whose code the jitted function can
        run as its own (Note [The fused prologue is the jitted function's code] in ``thunder.core.codegen``).
        """
        params = self.signature()
        if params != [f"*{self.varargs}", f"**{self.varkwargs}"]:
            raise ValueError(f"a prologue takes (*args, **kwargs), not ({', '.join(params)})")
        from thunder.core.prims.python import group_tensor_checks, positional_arity

        def printed(trace: TraceCtx, body: TraceCtx | None, own: bool = False) -> tuple[str, Printer]:
            checks: list = []  # the check of each miss printed, in order (Note [A miss names its line])
            at_line: dict[int, Any] = {}

            def raised_here(e: Exception, args: tuple, kwargs: dict) -> Any:
                if type(e) is _MissedCheck:  # a failed check, raised on its line (Note [A miss names its line])
                    return missed(at_line[e.__traceback__.tb_lineno], sys._getframe(1), (args, kwargs))
                return missed(bsym_raising(e), sys._getframe(1), (args, kwargs), e)

            def miss(p: Printer) -> str:
                checks.append(p.bsym)
                return f"_missed({self.varargs}, {self.varkwargs})"

            def missed_here(args: tuple, kwargs: dict) -> Any:
                # The prologue's frame, whose locals are read if the slow path asks why (Note [A miss of the fast path
                # explains itself when asked] in thunder.cache_diagnostics): passing ``locals()`` in each check's
                # source made the prologue an eighth slower to compile.
                frame = sys._getframe(1)
                return missed(at_line[frame.f_lineno], frame, (args, kwargs))

            arity = positional_arity(trace.bound_symbols, self.varargs, POSITIONAL) if own else None
            printer = Printer(
                miss=miss,
                return_call=None if body is not None else "_computation",
                tensor_types={},
                own=OwnCode(self.varargs, self.varkwargs, arity) if own else None,
                raises=None if own else "_MissedCheck",  # (own code leaves its loop on a miss)
            )
            printer.add_ctx("_missed", missed_here)
            if not own:
                printer.add_ctx("_MissedCheck", _MissedCheck)
            printer.add_ctx("_raised_here", raised_here)
            if body is None:
                printer.add_ctx("_computation", computation)
            signature = [f"*{self.varargs}", f"**{self.varkwargs}"] if own else [self.varargs, self.varkwargs]
            source = trace_source(
                trace, print_depth=1, printer=printer, signature=signature,
                guarded_count=len(grouped.bound_symbols) - 1,
                guarded=f"_raised_here(_raised, {self.varargs}, {self.varkwargs})", source_text=False,
            )  # fmt: skip
            lines = _lines_of_misses(source, (f"_missed({self.varargs}, {self.varkwargs})", "raise _MissedCheck"))
            if len(lines) != len(checks) or len(set(lines)) != len(lines):  # (an AssertionError: not caught below)
                raise AssertionError(f"a check printer printed a miss other than once on a line of its own:\n{source}")
            at_line.update(zip(lines, checks))
            return source, printer

        grouped = from_trace(self)
        grouped.bound_symbols = group_tensor_checks(self.bound_symbols)
        if inline is not None and _ops_run(inline) > INLINED_OPS_AT_MOST:
            inline = None  # Note [The computation runs in the prologue's frame]: a long one is called
        for body in ((inline,) if inline is not None else ()) + (None,):
            trace = grouped
            if body is not None:
                trace = _with_computation(grouped, body)
                if trace is None:
                    continue
            try:
                source, printer = printed(trace, body)
            except RuntimeError:  # two values want one global name: the computation is called instead
                continue
            if body is not None and not _names_apart(self, body, computation, printer.ctx):
                continue
            fused = compile_source(
                source, self.function_name, printer.ctx, f"thunder.{self.name}_fused_{self.uid}", printer.line_bsyms
            )
            fused.__thunder_inlined_trace__ = body
            if direct and source.count("\n") <= DIRECT_MAX_LINES and not trace.decorators:
                source, printer = printed(trace, body, own=True)
                own = compile_source(
                    source, self.function_name, printer.ctx, f"thunder.{self.name}_direct_{self.uid}",
                    printer.line_bsyms,
                )  # fmt: skip
                code = embed_constants(own, printer.ctx, source)
                if code is not None:
                    own.__code__ = code
                    fused.__thunder_direct__ = own
            return fused
        raise AssertionError("unreachable")

    def set_provenance(self, provenance: TraceProvenance) -> None:
        self.provenance = provenance


# Note [A miss names its line]
# A fused prologue's failed check raises ``_MissedCheck`` inside the prologue's ``try`` (Note [A prologue that raises
# misses] in ``thunder.core.codegen``), whose handler returns ``_missed`` of the check, the prologue's frame and the
# call's arguments (kept for the reason: Note [A miss of the fast path explains itself when asked]); the check is found
# from the line the exception's traceback names. A check outside the ``try`` (one of an inlined computation) returns
# ``_missed(args, kwargs)``, which finds its line in the prologue's frame. Naming the check in each line
# (``_missed(_check93)``, a global per check) was a tenth of the instructions CPython spends compiling a Qwen2 decoding
# entry's 630 checks (most of which parse the source), and a constant per check to print; the raise in place of the
# call a further 23% (60.0 -> 46.1 million instructions for its 390 checks, callgrind, 2026-12-07: the parser descends
# some twenty grammar rules for each name or literal, and ``return _missed(args, kwargs)`` has three). A hit runs
# neither; a miss pays the raise, about a microsecond. Each check printer prints its miss once, on a line of its own
# (a source that has otherwise is refused when printed: a printer's bug).


def _lines_of_misses(source: str, markers: tuple[str, ...]) -> list[int]:
    """The 1-based line of each occurrence of a marker in ``source``, in order (a line once per occurrence)."""
    found = []
    for marker in markers:
        at = source.find(marker)
        while at != -1:
            found.append(at)
            at = source.find(marker, at + len(marker))
    found.sort()
    lines, line, last = [], 1, 0
    for at in found:
        line += source.count("\n", last, at)
        lines.append(line)
        last = at
    return lines


class _MissedCheck(Exception):
    """What a fused prologue's failed check raises inside its ``try`` (Note [A miss names its line])."""


#: A fused prologue of at most this many lines also becomes code the jitted function runs itself (Note [The fused
#: prologue is the jitted function's code] in ``thunder.core.codegen``); a longer program's call costs enough that a
#: frame more is nothing, and the copy would double the compilation of its prologue.
DIRECT_MAX_LINES = 120


# Note [The computation runs in the prologue's frame]
# A cached call of a small program costs about as much in Python frames and checks as in torch's kernels (``a + b`` on
# 2x2 tensors: 1.4 us of kernel, 0.7 us of thunder), so the hot path runs the entry's checks and its computation's
# statements in one generated function: the computation's trace is printed after the prologue's checks, outside
# their ``try`` (its own exceptions propagate, with the op's runtime note), its parameters being the names the
# prologue returns. Only a computation that is its trace's plain function (no decorator, no autograd node, no
# wrapper) and whose names do not meet the prologue's is inlined; the rest are called. The computation's function
# stays what the slow path and the first call run, and a change of its code (a settled region inlined, profiling
# ranges) makes the fused function of every entry that inlined it be made again (``replace_code`` in
# ``thunder.core.codegen``), so what the hot path runs is always what the computation's function runs.
# A computation that runs more than ``INLINED_OPS_AT_MOST`` ops (a fusion counts its ops) is called instead: the call
# that inlining saves (about 1 us with 40 arguments) is noise beside its kernels, while copying it costs a compile of
# checking the prologue's names apart from its own (a 2-layer Qwen2's decoding step: 250 ops in 1 ms; its prologue's
# 630 checks made inlining cost 6 ms, a tenth of the entry's compile).
INLINED_OPS_AT_MOST = 64


def _ops_run(trace: TraceCtx) -> int:
    return sum(len(b.subsymbols) if b.sym._is_fusion else 1 for b in trace.bound_symbols)


def _with_computation(prologue: TraceCtx, computation: TraceCtx) -> TraceCtx | None:
    """``prologue``'s checks followed by ``computation``'s statements, or None where the prologue returns other
    names than ``computation``'s parameters."""
    *checks, ret = prologue.bound_symbols
    returned = ret.args[0] if ret.args else None
    if computation.decorators or type(returned) not in (tuple, list) or len(returned) != len(computation.args):
        return None
    if not all(isinstance(v, Proxy) and isinstance(a, Proxy) and v.name == a.name for v, a in zip(returned, computation.args)):
        return None
    fused = from_trace(prologue)
    fused.bound_symbols = [*checks, *computation.bound_symbols]
    return fused


def _names_apart(prologue: TraceCtx, computation: TraceCtx, fn: Callable, ctx: dict) -> bool:
    """Whether the computation's locals (those of ``fn``, its compiled code) are neither the prologue's (but the
    parameters it receives from it) nor globals of the fused code, and the globals ``fn`` reads are no locals of
    the prologue."""
    ours = {prologue.varargs, prologue.varkwargs, "_raised"}
    for bsym in prologue.bound_symbols:
        ours.update(p.name for p in bsym.flat_proxy_args)
        ours.update(p.name for p in bsym.flat_proxy_outs)
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    theirs = set(code.co_varnames) - {a.name for a in computation.args}
    read = {i.argval for i in dis.get_instructions(code) if i.opname == "LOAD_GLOBAL"}
    return not (theirs & ours or theirs & ctx.keys() or read & ours)


def from_trace(trace: TraceCtx) -> TraceCtx:
    """An empty trace with ``trace``'s signature and names (the start of a pass's output)."""
    t = TraceCtx(trace.fn, name=trace.name)
    t.args = list(trace.args)
    t.varargs, t.varkwargs = trace.varargs, trace.varkwargs
    t._siginfo = trace._siginfo
    t.names = set(trace.names)
    t.input_paths = dict(trace.input_paths)
    t._counters = trace._counters
    t.decorators = list(trace.decorators)
    t.tags = set(trace.tags)
    return t


def live_bound_symbols(
    bsyms: list[BoundSymbol], needed: set[str] | None = None, *, keep_may_raise: bool = True
) -> list[BoundSymbol]:
    """The bound symbols whose outputs are used (or that have side effects), in order.

    A draw from a random generator (``RANDOM``, itself or an op of its decomposition: ``dropout``) is kept
    though its result is unused: eager draws it, and the draws after it must be eager's. An op that eager
    could fail at run time (``MAY_RAISE``, itself or an op of its decomposition: an
    indexing ``__getitem__`` made of ``take``) is kept, so the program fails where eager fails, unless
    ``keep_may_raise`` is False (a backward recomputing what already ran)."""
    needed = set() if needed is None else needed
    kept: list[BoundSymbol] = []
    for bsym in reversed(bsyms):
        tags = bsym.sym.tags
        if (
            DONT_DCE in tags
            or any(o.name in needed for o in bsym.flat_proxy_outs)
            or not _has_outputs(bsym)
            or (keep_may_raise and may_raise(bsym))
            or draws(bsym)
        ):
            kept.append(bsym)
            needed.update(a.name for a in bsym.flat_proxy_args)
    kept.reverse()
    return kept


def may_raise(bsym: BoundSymbol) -> bool:
    return MAY_RAISE in bsym.sym.tags or any(may_raise(s) for s in bsym.subsymbols)


def draws(bsym: BoundSymbol) -> bool:
    """Whether the op draws from a random generator (Note [Random ops follow eager's generator])."""
    return RANDOM in bsym.sym.tags or any(draws(s) for s in bsym.subsymbols)


def _has_outputs(bsym: BoundSymbol) -> bool:
    # A call that produces nothing is kept only for its side effects, which DONT_DCE marks.
    return bool(bsym.flat_proxy_outs) or not isinstance(bsym.output, Proxy) and bsym.output is not None


def detached_trace():
    """A scratch trace for making proxies outside of any real trace."""
    return tracectx(TraceCtx(name="scratch"))


@contextlib.contextmanager
def recording_into(trace: TraceCtx, scratch: list[BoundSymbol]) -> Iterator[None]:
    """Symbols called inside are recorded into ``scratch`` (names from ``trace``), not into ``trace``."""
    with tracectx(trace):
        trace.scopes.append(scratch)
        try:
            yield
        finally:
            trace.scopes.pop()


def _snapshot(x: Any) -> Any:
    """A call's arguments with their lists and dicts copied: the program may change them after the call
    (``y = torch.cat(feats); feats.append(y)``), and the recorded call must keep what it read."""
    typ = type(x)
    if typ is list:
        return [_snapshot(v) for v in x]
    if typ is tuple:
        return tuple(_snapshot(v) for v in x)
    if typ is dict:
        return {k: _snapshot(v) for k, v in x.items()}
    return x


def _explain_untraced_tensors(e: ThunderError, args: tuple, kwargs: dict) -> None:
    """An op that refuses a real ``torch.Tensor`` ("expected a tensor, got Tensor") says where such a tensor
    comes from: code that ran without being traced made it."""

    if getattr(e, "_thunder_located", False) or not any(type(a) is torch.Tensor for a in tree_leaves((args, kwargs))):
        return
    msg = str(e.args[0]) if e.args else ""
    e.args = (
        msg + "\n  (a torch.Tensor reached it that thunder did not trace: code that thunder runs without looking "
        "inside, such as eval/exec or a C extension, made it; create it in the function's own code, or pass it "
        "in as an argument)",
        *e.args[1:],
    )


def _locate_error(e: ThunderError, sym: Symbol) -> None:
    if getattr(e, "_thunder_located", False):
        return
    src = current_source_location()
    msg = str(e.args[0]) if e.args else ""
    where = f"\n  in {sym.print_name}, called at {src}" if src is not None else f"\n  in {sym.print_name}"
    e.args = (msg + where, *e.args[1:])
    e._thunder_located = True


def timed_pass(name: str):
    """Decorator for passes: stamps the returned trace's provenance with name and time."""

    def deco(fn):
        def wrapper(trace, *args, **kwargs):
            start = time.perf_counter_ns()
            result = fn(trace, *args, **kwargs)
            ms = (time.perf_counter_ns() - start) / 1e6
            if result is trace:  # every pass leaves its own trace in the history
                result = from_trace(trace)
                result.bound_symbols.extend(trace.bound_symbols)
            result.set_provenance(TraceProvenance(name, ms))
            return result

        wrapper.__name__ = fn.__name__
        wrapper.__doc__ = fn.__doc__
        wrapper.pass_name = name
        return wrapper

    return deco


def _refuse_leaf_writes(sub: list[BoundSymbol]) -> None:
    """Eager's refusal of an in-place write into a leaf that requires grad, inside a ``try`` of the program's: raised
    where the program wrote (not at run time, after effects an eager rerun would repeat), as eager's own exception,
    so the handler runs as in eager and the trace takes it. ``is_leaf`` of an input is checked on every call (Note
    [Data-dependent values]). Outside a ``try`` the run-time failure names the op and line."""
    for b in sub:
        if b.sym.is_prim and b.sym.name == "copy_":
            dst = b.args[1]
            if b.kwargs.get("grad_enabled", True) and dst.requires_grad and dst.is_leaf:
                raise RuntimeError("a leaf Variable that requires grad is being used in an in-place operation.")
        else:
            _refuse_leaf_writes(b.subsymbols)
