"""Why a call missed the cache, and the warning for a function that keeps recompiling.

Note [Cache miss reasons]
An entry has two compiled prologues. The hot path runs the one fused with the computation,
which returns ``MISS`` when a check fails. The slow path (lookups among the other entries)
runs the *diagnostic* one: the same trace printed by the same printer, with ``printer.miss``
(what a failed check returns) replaced by ``_Rejection(<the check's bound symbol>, _locals())``.
The printer knows the bound symbol it is printing, so every check printer works unchanged.
On a miss (every candidate rejected the inputs) the most recently used entry's diagnostic
prologue runs once more and ``explain`` turns its rejection into a ``CacheMissReason``: the
bound symbol's arguments name the checked proxy and hold the values the trace assumed, the
generated code's locals hold this call's values by proxy name, and a table keyed by prim ID
says how to compare them (a check prim with no row gets a generic reason). Nothing here runs
on a hit, and no extra code is compiled: the slow-path prologue is needed anyway.

Layer: entry points. Imports: core (the codegen printer, the Python prims).
"""

from __future__ import annotations

import ast
import dataclasses
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from thunder.common import CacheEntry
from thunder.core.codegen import Printer, bsym_raising, compile_source, is_generated, trace_source
from thunder.core.iterators import ReplayableIterator
from thunder.core.prims.python import NOT_A_MEMBER
from thunder.core.prims.python import PythonPrimIDs as P
from thunder.core.proxies import Proxy
from thunder.core.symbol import BoundSymbol
from thunder.core.torch_state import TORCH_STATE

__all__ = ["CacheMissReason", "RecompileWarning", "Rejection", "DiagnosticPrologue", "MissRecord", "diagnose_miss", "explain"]

#: How many reasons ``thunder.cache_miss_reasons`` keeps per function.
MISS_REASONS_KEPT = 64
#: After this many cache misses of one function, ``RecompileWarning`` is issued (once); the
#: compile option ``recompile_warning_limit`` changes it.


class RecompileWarning(UserWarning):
    """A jitted function keeps compiling new cache entries (a recompile storm)."""


@dataclass(frozen=True)
class CacheMissReason:
    """Why one call missed the cache.

    Attributes:
        input: the checked input as the program names it (``x``, ``args``), or what it read from its
            module by qualified name (``fc1.weight``, ``transformer.h.0``); None for state that is not
            an input (grad mode, the default dtype).
        check: what was checked: ``shape``, ``dtype``, ``device``, ``requires_grad``, ``rank``,
            ``type``, ``value``, ``object``, ``length``, ``keys``, ``constraint``, ...
        expected: the value the cached trace was made for.
        actual: the value of this call.
        message: the reason in words (``str(reason)``).
    """

    input: str | None
    check: str
    expected: Any = None
    actual: Any = None
    message: str = ""

    def __str__(self) -> str:
        if self.message:
            return self.message
        what = f"{self.input} {self.check}" if self.input else self.check
        return f"{what} changed {_short(self.expected)} -> {_short(self.actual)}"


FIRST_CALL = CacheMissReason(None, "empty cache", message="first call: nothing was compiled yet")
NO_CACHING = CacheMissReason(None, "no caching", message="cache='no caching': every call compiles")


def _short(value: Any, limit: int = 80) -> str:
    if isinstance(value, torch.Tensor):  # metadata, not values: checks are about metadata
        return f"<Tensor {tuple(value.shape)} {value.dtype} {value.device}>"
    if isinstance(value, type):
        text = value.__qualname__
    elif callable(value) and hasattr(value, "__qualname__"):
        text = f"<{type(value).__name__} {value.__qualname__}>"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


# --- the diagnostic prologue --------------------------------------------------------------------


class Rejection:
    """What a diagnostic prologue returns when a check fails: the check and the prologue's locals; or when a read
    raises: the raising bound symbol (None if unknown), the locals and the exception (Note [A prologue that raises
    misses] in ``thunder.core.codegen``). A fused prologue's rejection (``MissRecord``) keeps the prologue's frame and
    the call's ``(args, kwargs)`` instead of the locals, which are read from the frame only when asked for (Note
    [A miss of the fast path explains itself when asked])."""

    __slots__ = ("bsym", "_values", "raised", "_frame", "call")

    def __init__(
        self, bsym: BoundSymbol | None, values: dict[str, Any] | None, raised: Exception | None = None,
        frame: Any = None, call: tuple[tuple, dict] | None = None,
    ):  # fmt: skip
        self.bsym, self._values, self.raised, self._frame, self.call = bsym, values, raised, frame, call

    @property
    def values(self) -> dict[str, Any]:
        """The prologue's locals when the check failed, by name."""
        if self._values is None:
            frame, self._frame = self._frame, None
            self._values = dict(frame.f_locals) if frame is not None else {}
        return self._values

    def __repr__(self) -> str:
        return f"Rejection({explain(self)})"

    def rejects(self, args: tuple, kwargs: dict) -> bool:
        """Whether this is the rejection of a call with these arguments."""
        if self.call is not None:
            seen_args, seen_kwargs = self.call
            if seen_args is args and seen_kwargs is kwargs:
                return True
        else:
            seen_args, seen_kwargs = self.values.get("args", ()), self.values.get("kwargs", {})
        return (
            len(seen_args) == len(args)
            and all(a is b for a, b in zip(seen_args, args))
            and seen_kwargs.keys() == kwargs.keys()
            and all(seen_kwargs[k] is v for k, v in kwargs.items())
        )


class DiagnosticPrologue:
    """The prologue trace that ``make_trace()`` gives as a function that returns its inputs (a tuple) or a
    ``Rejection``, compiled at its first call: most entries never need it (Note [The first call runs no prologue] in
    ``thunder.compiler``)."""

    __slots__ = ("make_trace", "_fn", "_lock")

    def __init__(self, make_trace: Callable[[], Any]):
        self.make_trace = make_trace
        self._fn: Callable | None = None
        self._lock = threading.Lock()

    def __call__(self, *args, **kwargs):
        fn = self._fn
        if fn is None:
            fn = self.compiled()
        return fn(*args, **kwargs)

    def compiled(self) -> Callable:
        with self._lock:
            if self._fn is None:
                trace = self.make_trace()
                printer = Printer(miss=_miss_expression)
                printer.add_ctx("_Rejection", Rejection)
                printer.add_ctx("_locals", locals)
                printer.add_ctx("_bsym_raising", bsym_raising)
                guarded = "_Rejection(_bsym_raising(_raised), _locals(), _raised)"
                source = trace_source(trace, print_depth=1, printer=printer, guarded=guarded, source_text=False)
                fn = compile_source(
                    source, trace.name, printer.ctx, f"thunder.{trace.name}_{trace.uid}", printer.line_bsyms
                )
                fn.__thunder_source__ = source
                self._fn = fn
            return self._fn


# Note [A miss of the fast path explains itself when asked]
# A call that the last entry's fused prologue rejects goes on to the slow path, which mostly finds another entry
# (calls alternating between two shapes): the rejection's reason is needed only when the call compiles a new entry.
# So the fused prologue's miss records the failed check, the prologue's frame and the call's ``(args, kwargs)``
# (``MissRecord.missed``), and the frame's locals, which the reason is made from, are read only when the slow path
# asks (``Rejection.values``): the dict of a small prologue's locals was a third of such a miss. One rejection is kept
# per thread, whichever entry made it, so a rejection that no slow path took (another thread changed the last entry
# meanwhile) holds one frame at most, until the thread's next miss.
_last_rejection = threading.local()


class MissRecord:
    """Where an entry's fused prologue records the check it failed, so the slow path explains the miss without
    compiling the diagnostic prologue (Note [The first call runs no prologue] in thunder.compiler; Note [A miss of
    the fast path explains itself when asked]). ``missed`` is what the fused prologue returns then: ``MISS``."""

    __slots__ = ("miss",)

    def __init__(self, miss: Any):
        self.miss = miss

    def missed(self, bsym: BoundSymbol | None, frame: Any, call: tuple, raised: Exception | None = None) -> Any:
        """Records that the fused prologue running in ``frame`` on ``call`` (its ``(args, kwargs)``) failed the check
        ``bsym`` (or a read raised ``raised``)."""
        _last_rejection.value = (self, Rejection(bsym, None, raised, frame, call))
        return self.miss

    def take(self) -> Rejection | None:
        """This thread's last rejection if this entry made it, forgotten (it holds the call's arguments)."""
        last = getattr(_last_rejection, "value", None)
        if last is None or last[0] is not self:
            return None
        _last_rejection.value = None
        return last[1]


def _miss_expression(printer: Printer) -> str:
    return f"_Rejection({printer.constant(printer.bsym, '_check')}, _locals())"


def diagnose_miss(
    entry: CacheEntry, args: tuple, kwargs: dict, key: Any = None, rejection: Rejection | None = None
) -> CacheMissReason:
    """Why ``entry``'s prologue rejects these inputs (see Note [Cache miss reasons]); ``key``: their input key
    (``thunder.entry_run.input_key``), which names a changed shape or number without compiling the prologue;
    ``rejection``: what the entry's fused prologue said of them (``MissRecord``, ``Rejection.rejects``), if it ran
    on them."""
    if key is not None and entry.key is not None and key != entry.key:
        reason = _key_difference(entry, key)
        if reason is not None:
            return reason
    if rejection is not None:
        trace = entry.prologue_traces[-1] if entry.prologue_traces else None
        return in_user_names(explain(rejection), getattr(trace, "input_paths", {}))
    try:
        out = entry.prologue(*args, **kwargs)
    except Exception as e:  # its reads are guarded (they return a Rejection): anything else, said
        return CacheMissReason(None, "prologue", message=f"the prologue raised {type(e).__name__}: {e}")
    if type(out) is Rejection:
        trace = entry.prologue_traces[-1] if entry.prologue_traces else None
        return in_user_names(explain(out), getattr(trace, "input_paths", {}))
    return CacheMissReason(None, "none", message="the most recent entry accepts these inputs (compiled meanwhile)")


def _key_difference(entry: CacheEntry, key: tuple) -> CacheMissReason | None:
    """A tensor argument's shape or an int argument's value that differs between ``entry``'s input key and
    ``key`` (the keys of Note [The first call runs no prologue]), as the prologue's check would say it; None for
    any other difference, which the prologue explains."""
    count, names, leaves, values = key
    old_count, old_names, old_leaves, old_values = entry.key
    if count != old_count or names != old_names:
        return None
    positional = _positional_names(entry)
    pairs = [(positional[i] if i < len(positional) else None, a, b) for i, (a, b) in enumerate(zip(old_leaves, leaves))]
    pairs += list(zip(names, old_values, values))
    for name, old, new in pairs:
        if old == new:
            continue
        if name is None or len(old) != len(new):
            return None
        if isinstance(old[0], tuple) and isinstance(new[0], tuple):  # a tensor's (shape, dtype, device, requires_grad)
            check, expected, actual = next((c, a, b) for c, a, b in zip(_TENSOR_KEY, old, new) if a != b)
            return CacheMissReason(name, check, expected, actual)
        if old[0] is int and new[0] is int and len(old) == 2:
            return CacheMissReason(name, "value", old[1], new[1])
        return None
    return None


_TENSOR_KEY = ("shape", "dtype", "device", "requires_grad")  # what a tensor's input key holds, in order


def _positional_names(entry: CacheEntry) -> list[str]:
    """The names the prologue gives the positional arguments (``module, input = args``)."""
    trace = entry.prologue_traces[0] if entry.prologue_traces else None
    for bsym in trace.bound_symbols if trace is not None else ():
        if bsym.sym.id is P.UNPACK_SEQUENCE and getattr(bsym.args[0], "name", None) == "args":
            return [getattr(o, "name", None) for o in bsym.output]
    return []


def explain(rejection: Rejection) -> CacheMissReason:
    """The reason a diagnostic prologue's check failed."""
    bsym = rejection.bsym
    if rejection.raised is not None:
        e = rejection.raised
        out = bsym.flat_proxy_outs if bsym is not None else ()
        what = f"reading {out[0].name}" if out else "a read"
        return CacheMissReason(
            out[0].name if out else None, "prologue", message=f"{what} raised {type(e).__name__}: {e}"
        )
    checked = bsym.args[0] if bsym.args else None
    if isinstance(checked, Proxy) and rejection.values.get(checked.name) is NOT_A_MEMBER:
        return CacheMissReason(
            checked.name, "module member", message=f"{checked.name} is no longer a parameter, buffer or submodule of "
            "its module (removed, or now a plain attribute)",
        )  # fmt: skip
    explainer = _EXPLAINERS.get(bsym.sym.id, _explain_generic)
    try:
        return explainer(bsym, rejection.values)
    except Exception as e:  # never let a diagnostic hide the miss itself
        return CacheMissReason(None, bsym.sym.name, message=f"{bsym.sym.print_name} failed ({type(e).__name__}: {e})")


def in_user_names(reason: CacheMissReason, names: dict[str, str]) -> CacheMissReason:
    """``reason`` naming what the program read from its module as the user knows it: the prologue's
    ``t_transformer_h_0_ln_1_weight`` as ``transformer.h.0.ln_1.weight`` (``TraceCtx.input_paths``)."""
    if not names:
        return reason

    def rename(text: str) -> str:
        return _IDENTIFIER.sub(lambda m: names.get(m.group(0), m.group(0)), text)

    return dataclasses.replace(
        reason, input=names.get(reason.input, reason.input), check=rename(reason.check), message=rename(reason.message)
    )


def _value(values: dict[str, Any], p: Any) -> Any:
    return values.get(p.name, "<unbound>") if isinstance(p, Proxy) else p


def _explain_args_structure(bsym, values):
    args_p, kwargs_p, nargs, kwnames = bsym.args
    args, kwargs = _value(values, args_p), _value(values, kwargs_p)
    if len(args) != nargs:
        return CacheMissReason("args", "length", nargs, len(args))
    return CacheMissReason("kwargs", "keys", tuple(sorted(kwnames)), tuple(sorted(kwargs)))


def _explain_tensor(bsym, values):
    t, shape_or_rank, device, dtype, requires_grad = bsym.args
    x = _value(values, t)
    name = t.name
    if not isinstance(x, torch.Tensor):
        return CacheMissReason(name, "type", torch.Tensor, type(x))
    if bsym.sym.id is P.CHECK_TENSOR_RANK:
        if x.ndim != shape_or_rank:
            return CacheMissReason(name, "rank", shape_or_rank, x.ndim)
    elif tuple(x.shape) != tuple(shape_or_rank):
        return CacheMissReason(name, "shape", tuple(shape_or_rank), tuple(x.shape))
    if x.dtype is not dtype:
        return CacheMissReason(name, "dtype", dtype, x.dtype)
    if x.device != device:
        return CacheMissReason(name, "device", device, x.device)
    return CacheMissReason(name, "requires_grad", requires_grad, x.requires_grad)


def _explain_value(bsym, values):
    p, expected = bsym.args
    x = _value(values, p)
    if type(x) is not type(expected):
        return CacheMissReason(p.name, "type", type(expected), type(x))
    return CacheMissReason(p.name, "value", expected, x)


def _explain_identity(bsym, values):
    p, expected = bsym.args
    return CacheMissReason(p.name, "object", expected, _value(values, p))


def _explain_type(bsym, values):
    p, expected = bsym.args
    return CacheMissReason(p.name, "type", expected, type(_value(values, p)))


def _explain_torch_state(bsym, values):
    expr, expected = bsym.args
    return CacheMissReason(None, expr, expected, TORCH_STATE[expr]())


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")


def _explain_expr(bsym, values):
    """A guard expression (``x.stride() == (4, 1) and x.storage_offset() == 0``, ``a_0 > 1``): the
    first of its ``and``-ed parts that is false now, re-evaluated over the prologue's locals."""
    expr, proxies = bsym.args
    part, left, right = _failing_part(expr, values)
    names = [p.name for p in proxies if isinstance(p, Proxy)]
    names += [n for n in _IDENTIFIER.findall(part) if n in values and n not in names]
    name = names[0] if names else None
    if left is not None:
        now = _eval(left, values)
        if right is not None:  # ``left == right``: say what the left side is now
            # and where the program took the value (Tracer._check_constraint): a size it loops over (``range`` of
            # it) holds the trace to that size, so each size compiles its own entry.
            took = f"; the trace holds for that value only, which the program took at {bsym.source}"
            where = took if bsym.source is not None else ""
            return CacheMissReason(
                name,
                left,
                _eval(right, values),
                now,
                message=f"{left} changed {_short(_eval(right, values))} -> {_short(now)}{where}",
            )
        return CacheMissReason(
            name, "constraint", part, now, message=f"constraint {part} no longer holds ({left} is {_short(now)})"
        )
    now = ", ".join(f"{n}={_short(values[n], 40)}" for n in names)
    return CacheMissReason(
        name, "constraint", part, None, message=f"constraint {part} no longer holds" + (f" ({now})" if now else "")
    )


def _failing_part(expr: str, values: dict) -> tuple[str, str | None, str | None]:
    """(the false part of ``expr``, its compared left side or None, the right side if it is ``==``)."""
    try:
        tree = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return expr, None, None
    parts = tree.values if isinstance(tree, ast.BoolOp) and isinstance(tree.op, ast.And) else [tree]
    for part in parts:
        if _eval(ast.unparse(part), values, True):
            continue
        src = ast.unparse(part)
        if isinstance(part, ast.Compare) and len(part.ops) == 1:
            right = ast.unparse(part.comparators[0]) if isinstance(part.ops[0], ast.Eq) else None
            return src, ast.unparse(part.left), right
        return src, None, None
    return expr, None, None


def _eval(source: str, values: dict, default: Any = "<unknown>") -> Any:
    """A sub-expression of generated guard code, evaluated over the prologue's locals."""
    try:
        return eval(source, {}, values)  # noqa: S307 (thunder's own generated code, already run by the prologue)
    except Exception:
        return default


def _explain_is(bsym, values):
    p, other = bsym.args
    return CacheMissReason(
        p.name, "alias", other.name, None, message=f"{p.name} is no longer the same object as {other.name}"
    )


def _explain_hasattr(bsym, values):
    p, name, present = bsym.args
    return CacheMissReason(p.name, f"hasattr {name!r}", present, not present)


def _explain_global_absent(bsym, values):
    globals_, name = bsym.args
    module = globals_.namespace.get("__name__", "?")
    return CacheMissReason(
        name, "global defined", False, True,
        message=f"the global {name!r} of module {module!r} is defined now; it was not when the function was traced",
    )  # fmt: skip


def _explain_iterator(bsym, values):
    it, typ, _ = bsym.args
    x = _value(values, it)
    return CacheMissReason(it.name, "type", typ, type(x.source) if type(x) is ReplayableIterator else type(x))


def _explain_next(bsym, values):
    view, item = bsym.args
    return CacheMissReason(view.name, "length", message=f"the iterator ({view.name}) ended before {item.name}, which the trace took")


def _explain_iterator_end(bsym, values):
    (view,) = bsym.args
    return CacheMissReason(view.name, "length", message=f"the iterator ({view.name}) has more items where the trace found its end")


def _explain_generic(bsym, values):
    """A check prim without a row in the table: its proxies' values against its other arguments."""
    proxies = [a for a in bsym.args if isinstance(a, Proxy)]
    expected = [a for a in bsym.args if not isinstance(a, Proxy)]
    name = proxies[0].name if proxies else None
    now = ", ".join(f"{p.name}={_short(_value(values, p), 40)}" for p in proxies)
    return CacheMissReason(
        name,
        bsym.sym.name,
        tuple(expected),
        tuple(_value(values, p) for p in proxies),
        message=f"{bsym.sym.print_name} failed"
        + (f" for {now}" if now else "")
        + (f"; traced with {_short(tuple(expected))}" if expected else ""),
    )


_EXPLAINERS: dict[Any, Callable[[BoundSymbol, dict], CacheMissReason]] = {
    P.CHECK_ARGS_STRUCTURE: _explain_args_structure,
    P.CHECK_TENSOR: _explain_tensor,
    P.CHECK_TENSOR_RANK: _explain_tensor,
    P.CHECK_VALUE: _explain_value,
    P.CHECK_IDENTITY: _explain_identity,
    P.CHECK_TYPE: _explain_type,
    P.CHECK_TORCH_STATE: _explain_torch_state,
    P.CHECK_EXPR: _explain_expr,
    P.UNPACK_ITERATOR: _explain_iterator,
    P.UNPACK_NEXT: _explain_next,
    P.CHECK_ITERATOR_END: _explain_iterator_end,
}
# Check prims added later (another part of issue 7 adds them): a row each where they exist.
for _name, _explainer in (
    ("CHECK_IS", _explain_is), ("CHECK_HASATTR", _explain_hasattr), ("CHECK_GLOBAL_ABSENT", _explain_global_absent),
):
    if hasattr(P, _name):
        _EXPLAINERS[getattr(P, _name)] = _explainer


# --- the recompile warning ---------------------------------------------------------------------


def warn_recompiles(name: str, misses: int, reason: CacheMissReason, cache_option, cache_size_limit: int) -> None:
    """Warns that the jitted function ``name`` has missed the cache ``misses`` times, naming the last reason.

    The warning points at the user's call of the jitted function (or of the module)."""
    from thunder.common import CACHE_OPTIONS

    advice = ""
    if cache_option is CACHE_OPTIONS.CONSTANT_VALUES:
        advice = (
            " Under cache='constant values' every new input shape or Python number compiles a new entry; "
            f"if these inputs keep changing, use thunder.jit({name}, cache='symbolic values')."
        )
    warnings.warn(
        f"thunder.jit: {name} has been compiled {misses} times; the last recompile was because {reason}."
        f"{advice} thunder.cache_miss_reasons() lists the recent reasons. The cache keeps the "
        f"{cache_size_limit} most recently used entries (compile option cache_size_limit).",
        RecompileWarning,
        stacklevel=_callers_stacklevel(),
    )


_THUNDER_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_TORCH_NN_DIR = os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "nn") + os.sep


def _callers_stacklevel() -> int:
    """The ``stacklevel`` of the innermost frame outside thunder and ``torch.nn`` (Module.__call__)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and (
        frame.f_code.co_filename.startswith((_THUNDER_DIR, _TORCH_NN_DIR)) or is_generated(frame.f_code.co_filename)
    ):  # (the jitted function's own code is generated: Note [The fused prologue is the jitted function's code])
        frame, level = frame.f_back, level + 1
    return level
