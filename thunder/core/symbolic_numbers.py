"""Symbolic numbers: the numbers a trace takes as inputs, where Python needs their values, and the
constraints on them that the prologue checks.

Under ``cache="symbolic values"`` a number argument is a ``SymInt``/``SymFloat``, and so is the result of a
call whose value differs from call to call (``random.random()``, ``time.time()``): the prologue makes that call
on every call and passes the number in. Where the program needs a symbolic number's Python value (a branch,
an index, a conversion) the value is pinned and the prologue checks the constraint recorded for it
(``thunder.core.symbolic``); this module also pins numbers that CPython reads natively, which the numbers'
own methods never see (Note [Operand reads] in ``thunder.core.interpreter.instructions``).

``SymbolicNumbersMixin`` is the part of ``Tracer`` (``thunder.core.jit_ext``) that makes these inputs and
checks their constraints; the state it keeps is set up by ``Tracer.__init__``.

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import random
import re
import sys
import threading
import types
from collections.abc import Callable
from numbers import Number
from typing import Any

from thunder.core import prims
from thunder.core.errors import ThunderRuntimeError
from thunder.core.interpreter.handlers.arithmetic import NB_SYMBOLS
from thunder.core.interpreter.instructions import call_operands
from thunder.core.provenance import is_literal_key
from thunder.core.proxies import Proxy
from thunder.core.symbol_lookup import bound_self, plain_attribute
from thunder.core.symbolic import SymFloat, SymInt, SymStr, pin, pin_index, read_natively_by_operator, texts_made
from thunder.core.trace import may_raise
from thunder.core.user_code import source_location


class SymbolicNumbersMixin:
    """``Tracer``'s symbolic number inputs, numbers drawn by the prologue, and constraint checks."""

    def _number_input(self, value: Number, holder: Proxy):
        self._check(prims.check_type, holder, type(value))
        self.computation.names.add(holder.name)
        sym = SymInt(value, holder.name) if type(value) is int else SymFloat(value, holder.name)
        self.inputs.append((holder, sym))
        return sym

    def _hoisted_call(self, fn: Callable, what: str) -> Callable:
        """A call whose result differs from call to call (``random.random()``, ``time.time()``): the
        prologue makes it on every call and passes a number in; the program sees a symbolic number."""

        def call(*args, **kwargs):
            self.sharp_edge(f"Calling {what}()", replayed=True)
            leaves = [*args, *kwargs.values()]
            if any(not _is_literal_argument(a) for a in leaves):
                raise ThunderRuntimeError(
                    f"{what}() is called with values computed inside the jitted function (at {source_location()}); "
                    "thunder makes such calls in the prologue, from constant arguments only. Call it outside the "
                    "function and pass the result as an argument."
                )
            # the prologue draws before the computation runs: would eager have failed before this draw?
            self._raise_an_earlier_failure()
            if not self.draws_after_may_raise:  # a later call may fail before it (Note [A run-time failure ...])
                self.draws_after_may_raise = any(may_raise(b) for b in self.computation.bound_symbols)
            receiver = bound_self(fn)
            put_back = _generator_state(receiver)
            value = fn(*args, **kwargs)
            # A generator the program read from outside (``rng = np.random.default_rng()`` as a global): every call
            # draws from the one it reads then, which the prologue checks, not from the one traced (the two differ
            # once the global is rebound).
            read = self._provenance.get(id(receiver)) if receiver is not None else None
            if read is not None:
                call, call_args = GeneratorDraw(getattr(type(receiver), fn.__name__)), (read, *args)
            elif put_back is not None:  # (``random.random``: a method bound to the module's generator)
                call, call_args = GeneratorDraw(fn, bound=True, keeps=False), args
            else:
                call, call_args = fn, args
            if value is None:  # called for its effect (random.seed): every call makes it
                if any(type(a) is list for a in leaves):  # random.shuffle(items): changes the program's list
                    raise ThunderRuntimeError(
                        f"{what}() changes a list in place (at {source_location()}), which thunder cannot make on "
                        "every call from the prologue. Draw a permutation with torch.randperm instead, or call it "
                        "outside the jitted function."
                    )
                self._emit(prims.unpack_call, call, call_args, kwargs, None)
                self._keepalive.append(call)
                return None
            if type(value) not in (int, float):
                raise ThunderRuntimeError(
                    f"{what}() returned a {type(value).__name__}, which thunder cannot make an input of the trace "
                    f"(at {source_location()}); only numbers can be. Call it outside the jitted function and pass "
                    "the result as an argument."
                )
            if put_back is not None:  # the first call's prologue draws this same number again
                put_back()
            holder = self._prologue_proxy(plain_attribute(fn, "__name__", "value"))
            self._hoisted[holder.name] = what
            self._emit(prims.unpack_call, call, call_args, kwargs, holder, output=holder)
            self._keepalive.append(call)
            self.computation.names.add(holder.name)
            sym = SymInt(value, holder.name) if type(value) is int else SymFloat(value, holder.name)
            self.inputs.append((holder, sym))
            return sym

        return call

    def _check_constraints_so_far(self) -> None:
        """Before the prologue pulls another item from an iterator argument: the constraints recorded so far, so a
        call that the trace does not apply to takes no more items than the program would."""
        if self.checks:
            for expr in self._recorded:
                if expr not in self._checked_early and not self._on_outcomes(expr):
                    self._checked_early.add(expr)
                    self._check_constraint(expr)

    def check_constraints(self, constraints) -> None:
        """Adds to the prologue constraints that passes after tracing relied on (a gradient rule that
        branched on a symbolic size, say), so an entry is never reused where they do not hold."""
        if self.checks:
            known = set(self.constraints)
            for expr in self._constraints_on_outcomes(constraints, late=True):
                if expr not in known:
                    self.constraints.append(expr)
                    self._check_constraint(expr)

    def _check_constraint(self, expr: str) -> None:
        """The prologue's check of constraint ``expr``, with the line of the program that relied on it: a miss
        reason names it (a loop over ``range`` of a size takes the size's value: each size compiles its entry)."""
        check = prims.check_expr.bind(expr, (), output=None, source=self._recorded.get(expr))
        self.prologue.bound_symbols.append(check)

    def _on_outcomes(self, expr: str) -> list[str]:
        """The symbolic data-dependent sizes that constraint ``expr`` refers to."""
        if not self.symbolic_outcomes:
            return []
        return [name for name in self.symbolic_outcomes if re.search(rf"\b{name}\b", expr)]

    def _constraints_on_outcomes(self, constraints, *, late: bool = False) -> list[str]:
        """Gives each constraint on symbolic data-dependent sizes to the last of them the computation checks (Note
        [Symbolic data-dependent sizes] in thunder.core.data_dependent); returns the others, which the prologue
        checks. A constraint that also refers to the prologue's symbols (an input's symbolic size) is checked there
        too, given their values; ``late`` (recorded by the passes, after the computation's checks are made) or
        beside numbers the prologue draws per call, it pins the sizes it refers to instead."""
        symbols = {h.name: v for h, v in self.inputs if isinstance(v, (SymInt, SymFloat))}
        symbols.update((d.name, v) for d, v in self.dims)
        for_prologue = []
        for expr in constraints:
            names = self._on_outcomes(expr)
            if not names:
                for_prologue.append(expr)
                continue
            given = [n for n in dict.fromkeys(re.findall(r"[A-Za-z_]\w*", expr)) if n in symbols]
            outcome = self.symbolic_outcomes[names[-1]][0]
            if given and (late or self._hoisted):
                for name in names:
                    outcome, _, value = self.symbolic_outcomes[name]
                    outcome.constraints.append(f"{name} == {value!r}")
                    expr = re.sub(rf"\b{name}\b", repr(value), expr)
                for_prologue.append(expr)
                continue
            outcome.given = tuple(dict.fromkeys((*outcome.given, *given)))
            if expr not in outcome.constraints:
                outcome.constraints.append(expr)
        if not late:
            self._give_symbols_to_checks(symbols)
        return for_prologue

    def _give_symbols_to_checks(self, symbols: dict) -> None:
        """Each check of a symbolic outcome whose constraints refer to the prologue's symbols takes their values
        (after the earlier outcomes' proxies): the computation gets them as parameters."""
        bsyms = self.computation.bound_symbols
        for i, bsym in enumerate(bsyms):
            if bsym.sym is prims.check_outcome and bsym.output is not None:
                outcome = bsym.args[2]
                if outcome.given:
                    t, kind, _, index, earlier = bsym.args[:5]
                    given = tuple(symbols[n] for n in outcome.given)
                    bsyms[i] = bsym.from_bsym(args=(t, kind, outcome, index, (*earlier, *given)), lineage=bsym.lineage)

    def _refuse_branches_on_hoisted(self, where: dict) -> None:
        """A branch on ``random.random()`` would pick a trace per draw, and trying the traces draws again; ``where``:
        each constraint's source location, named in the error."""
        for expr in self.constraints:
            for name, what in self._hoisted.items():
                if re.search(rf"\b{re.escape(name)}\b", expr):
                    at = f" at {where[expr]}" if where.get(expr) is not None else ""
                    raise ThunderRuntimeError(
                        f"The program needs the Python value of {what}(){at} ({expr}: a branch, a conversion such as "
                        "float(), or an index), which changes on every call; thunder passes such results into the trace "
                        "as values and cannot decide Python control flow with them. "
                        "Draw the number outside the jitted function and pass it as an argument, or use torch.rand "
                        "and torch.where."
                    )


# BINARY_OP's arguments for ``%`` and ``%=`` (the interpreter's instructions leave ``argrepr`` empty: Note [Decoding
# bytecode] in ``thunder.core.interpreter.instructions``).
_PRINTF_OPS = frozenset(i for i, symbol in enumerate(NB_SYMBOLS) if symbol in ("%", "%="))
_ADD_OPS = frozenset(i for i, symbol in enumerate(NB_SYMBOLS) if symbol in ("+", "+="))


def pin_native_operands(inst, values) -> None:
    """Pins the symbolic numbers among an instruction's operands that CPython reads natively (Note [Operand
    reads]): an index that C code reads, the right operand of a builtin operator slot that goes first, an
    argument of printf-style formatting."""
    name = inst.opname
    if texts_made() and name not in _KEEP_TEXT and any(type(v) is SymStr for v in values) and not _joins_text(inst, values):
        _pin_text(name, values)
    if name in _SUBSCRIPTS:
        _pin_native_subscript(name, values)
    elif (name == "BINARY_OP" or name == "COMPARE_OP") and len(values) == 2:
        left, right = values
        # (an operator's reflected method goes first: ``__interpreter_reflected_first__``)
        if name == "COMPARE_OP" and read_natively_by_operator(left, right):
            pin(right)  # records ``n == value``, checked by the prologue
        elif isinstance(left, (str, bytes)) and name == "BINARY_OP" and inst.arg in _PRINTF_OPS:  # printf-style formatting
            items = right.values() if isinstance(right, dict) else right if type(right) is tuple else (right,)
            for v in items:
                if isinstance(v, (SymInt, SymFloat)):
                    pin(v)


# Instructions that keep a ``SymStr`` (Note [Text formatted from symbolic numbers] in thunder.core.symbolic): the
# pieces of an f-string joined, a field formatted (its own ``__format__``).
_KEEP_TEXT = frozenset({"BUILD_STRING", "FORMAT_VALUE", "FORMAT_SIMPLE", "FORMAT_WITH_SPEC"})


def _joins_text(inst, values) -> bool:
    """``a + b`` (or ``+=``) of two strings: the ``SymStr``'s own ``__add__``/``__radd__`` keep the expression."""
    return inst.opname == "BINARY_OP" and inst.arg in _ADD_OPS and all(isinstance(v, str) for v in values)


def _pin_text(opname: str, values) -> None:
    """Pins the ``SymStr`` operands of an instruction that hands them to native code, but the arguments of a call
    of ``print`` (which prints each call's text: a replay of the expression), ``type`` or ``isinstance``."""
    if opname in ("CALL", "CALL_KW"):
        fn = call_operands(values)[0]
        if fn is print or fn is type or fn is isinstance:
            return
    for v in values:
        if type(v) is SymStr:
            v.pin()


# Instructions that index a container: (the container's position among the operands, the method that reads the
# index, the position of the first operand that is (part of) the index).
_SUBSCRIPTS = {
    "BINARY_SUBSCR": (-2, "__getitem__", -1), "STORE_SUBSCR": (-2, "__setitem__", -1),
    "DELETE_SUBSCR": (-2, "__delitem__", -1), "BINARY_SLICE": (-3, "__getitem__", -2), "STORE_SLICE": (-3, "__setitem__", -2),
}  # fmt: skip


def _pin_native_subscript(opname: str, values) -> None:
    """``c[n]`` where C code indexes ``c`` (a ``torch.Size``, a named tuple) reads a symbolic ``n`` natively: pinned."""
    at, method, keys = _SUBSCRIPTS[opname]
    if type(getattr(type(values[at]), method, None)) is not types.FunctionType:
        for k in values[keys:]:
            pin_index(k)


class GeneratorDraw:
    """A prologue's draw from a generator: one the program read from outside (``self.rng.random()``, the generator
    its first argument), or with ``bound``, a method bound to a module's own (``random.random``). Where it ``keeps``,
    it keeps for each thread what puts the generator back as it was before its last draw: a call that stops at a
    changed data-dependent value runs again in another entry, whose prologue draws again, and must draw the same
    numbers (``put_back``; the global generators are put back with ``python_random_state`` there), and a call that
    fails before its effects runs again eagerly (Note [A run-time failure the program handles] in
    ``thunder.compiler``). A bound draw keeps only where its entry may run again so: saving a generator's state costs
    more than the draw."""

    __slots__ = ("method", "last", "__name__", "bound", "keeps")

    def __init__(self, method: Callable, bound: bool = False, keeps: bool = True):
        self.method, self.last, self.__name__ = method, threading.local(), method.__name__
        self.bound, self.keeps = bound, keeps

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.keeps:
            self.last.put_back = _generator_state(self.method.__self__ if self.bound else args[0])
        return self.method(*args, **kwargs)

    def put_back(self) -> None:
        put_back, self.last.put_back = getattr(self.last, "put_back", None), None
        if put_back is not None:
            put_back()


def _generator_state(receiver: Any) -> Callable[[], None] | None:
    """What puts back the state of the generator a draw is a method of (``random.random``'s ``random.Random``, NumPy's
    global ``RandomState`` behind ``np.random.rand``/``beta``/..., a ``np.random.Generator``), or None."""
    if isinstance(receiver, random.Random):
        state = receiver.getstate()
        return lambda: receiver.setstate(state)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(receiver, np.random.RandomState):
        np_state = receiver.get_state()
        return lambda: receiver.set_state(np_state)
    if np is not None and isinstance(receiver, np.random.Generator):
        bit_state = receiver.bit_generator.state
        return lambda: setattr(receiver.bit_generator, "state", bit_state)
    return None


def _is_literal_argument(x: Any) -> bool:
    """A constant argument the prologue can pass again (a literal, or a list/tuple of literals)."""
    if isinstance(x, (Proxy, SymInt, SymFloat)):
        return False
    if type(x) in (list, tuple):
        return all(_is_literal_argument(v) for v in x)
    return is_literal_key(x)
