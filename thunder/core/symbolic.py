"""Symbolic numbers for ``cache="symbolic values"``.

Note [Symbolic values]
Under symbolic values, Python int/float inputs and the dims of input tensors become
``SymInt``/``SymFloat``: subclasses of ``int``/``float`` that carry their trace-time value
(so every meta function and every ``isinstance(x, int)`` works unchanged) plus an expression
over the prologue's names (``a_0``, ``(a_0 * 2)``). Arithmetic keeps the expression.
Whenever the program (or a meta function) branches on one — a comparison, ``bool``,
``int()``/``__index__`` — the outcome is recorded as a constraint, and the prologue checks
every constraint on each call. A trace is therefore reused for any inputs that satisfy the
same constraints, and recompiled only when one fails. Generated code prints a symbolic
number as its expression, so shapes computed from input shapes follow the inputs at run time.

Nothing may read the value silently. Each int/float method is overridden to do one of:
  - keep the expression: arithmetic, ``divmod``, ``abs``, rounding (``math.floor(f)`` is
    ``int(f // 1)``; rounding a float also records that it is finite, since nan and inf raise),
    ``bit_length``, ``real``/``numerator``/``conjugate``, ``copy``/``deepcopy``;
  - record the outcome: comparisons, ``bool``, ``float.is_integer``;
  - pin the value (record ``expr == value``, see ``value_constraint``): ``__index__``/``int()``,
    bitwise ops, ``**`` (but see Note [Symbolic float powers]), ``hash`` (a dict or set lookup that
    misses would compare nothing), ``str``/``repr``/``format`` (f-strings too), pickling, ``to_bytes``,
    ``hex``.
C code that reads an int subclass's value without calling a method (``range``, ``chr``,
``math.gcd``, ``str`` methods) is handled where traced code calls it: see Note [Native
consumers of symbolic numbers] in ``introspection``, which also makes ``type(n)`` say ``int``.

Layer: core. Imports: stdlib, core.interpreter (to mark its methods opaque).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator
from typing import Any

from thunder.core.tracectx import current_source_location

# The ordered set of constraint expressions being recorded, per thread (a ContextVar, not a
# global: two threads tracing at once must not see each other's constraints), each with the line of the program
# that first relied on it (None outside the program: a pass), which a miss reason names.
_constraints: contextvars.ContextVar[dict[str, object] | None] = contextvars.ContextVar(
    "thunder_constraints", default=None
)


# Whether the trace being recorded has made a ``SymStr`` (the tracer looks for one among operands only then).
_texts_made: contextvars.ContextVar[bool] = contextvars.ContextVar("thunder_texts_made", default=False)


@contextlib.contextmanager
def recording_constraints() -> Iterator[dict[str, object]]:
    """Collects the constraints recorded while tracing (in order, without duplicates), each with the source
    location (``SourceLocation``) where the program first relied on it."""
    recorded: dict[str, object] = {}
    token, texts = _constraints.set(recorded), _texts_made.set(False)
    try:
        yield recorded
    finally:
        _constraints.reset(token)
        _texts_made.reset(texts)


def texts_made() -> bool:
    """Whether the trace being recorded made text from symbolic numbers (Note [Text formatted from symbolic
    numbers])."""
    return _texts_made.get()


def _record(expr: str) -> None:
    recorded = _constraints.get()
    if recorded is not None and expr not in recorded:
        recorded[expr] = current_source_location()


def _expr(x) -> str:
    """``x`` as Python source in an expression or constraint."""
    if isinstance(x, (SymInt, SymFloat)):
        return x.expr
    if type(x) is float and not math.isfinite(x):
        return f"float({str(x)!r})"  # repr would print a name (inf, nan) the prologue does not define
    return repr(x)


def _is_sym(x) -> bool:
    return isinstance(x, (SymInt, SymFloat))


def is_symbolic(x) -> bool:
    """Whether ``x`` is a symbolic number, or text formatted from symbolic numbers (``SymStr``)."""
    return isinstance(x, (SymInt, SymFloat, SymStr))


def all_static(*shapes) -> bool:
    """Whether every size of ``shapes`` is a plain int: a pass may then compare them without
    recording constraints (a symbolic size is never compared)."""
    return all(type(d) is int for shape in shapes for d in shape)


_INVERSE = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def _cmp(op: str, pyop):
    def method(self, other):
        if isinstance(other, complex):  # complex compares the value natively: pin it
            return pyop(_concretize(self, self._base), other)
        if not isinstance(other, (int, float)):
            return NotImplemented
        ov = other.value if _is_sym(other) else other
        result = pyop(self.value, ov)
        if type(self.value) is int and type(ov) is int and _is_sym(other) and other.expr == self.expr:
            return result  # an int expression compared with itself: the outcome holds for every value
        # Record the comparison that holds, so equal constraints read the same way. With a float an
        # ordering's inverse is not its negation (NaN compares False both ways): negate it instead.
        if result or op in ("==", "!=") or (type(self.value) is int and type(ov) is int):
            _record(f"{self.expr} {op if result else _INVERSE[op]} {_expr(other)}")
        else:
            _record(f"not ({self.expr} {op} {_expr(other)})")
        return result

    return method


def _arith(op: str, pyop, reflected: bool = False):
    def method(self, other):
        if isinstance(other, complex) or (op == "*" and isinstance(other, _SEQUENCES)):
            # complex arithmetic and sequence repetition read the value natively: pin it.
            a, b = (other, _concretize(self, self._base)) if reflected else (_concretize(self, self._base), other)
            return pyop(a, b)
        if not isinstance(other, (int, float)):
            return NotImplemented
        if type(self.value) is int and type(other) is int and _is_identity(op, other, reflected):
            return self  # ``x * 1``, ``x + 0``, ``x - 0``, ``x // 1``: keeps expressions (and the prologue) short
        a, b = (other, self) if reflected else (self, other)
        av = a.value if _is_sym(a) else a
        bv = b.value if _is_sym(b) else b
        value = pyop(av, bv)
        return make_symbolic(value, f"({_expr(a)} {op} {_expr(b)})", self, other)

    return method


def _is_identity(op: str, n: int, reflected: bool) -> bool:
    """Whether an int expression combined with the plain int ``n`` by ``op`` is that expression."""
    return (n == 0 and (op == "+" or (op == "-" and not reflected))) or (n == 1 and (op == "*" or (op == "//" and not reflected)))


# Sequences whose repetition (``[0] * n``) reads an int natively.
_SEQUENCES = (list, tuple, str, bytes, bytearray)


def value_constraint(expr: str, value) -> str:
    """A Python expression that holds exactly when ``expr`` evaluates to ``value`` (``-0.0``, nan, inf included)."""
    if type(value) is float and (value == 0.0 or value != value or value in (math.inf, -math.inf)):
        return f"repr({expr}) == {repr(value)!r}"
    return f"{expr} == {value!r}"


def _concretize(self, kind):
    """The plain value of a symbolic number, recording that the trace relies on it."""
    _record(value_constraint(self.expr, self.value))
    return kind(self.value)


def pin(x):
    """The plain value of the symbolic number ``x``, recording ``x == value`` (a guarded specialisation)."""
    return _concretize(x, type(x.value))


def _plain(x):
    """``x``, pinned if it is a symbolic number (for native code that would read its value unrecorded)."""
    return pin(x) if _is_sym(x) else x


def pin_index(k):
    """An index or slice as C code reads it (a builtin sequence's ``__getitem__``, ``torch.Size``): that code
    takes an int subclass's value without calling ``__index__``, so each symbolic number is pinned first."""
    if isinstance(k, SymInt):
        return pin(k)
    if type(k) is slice and any(isinstance(v, SymInt) for v in (k.start, k.stop, k.step)):
        return slice(*(pin(v) if isinstance(v, SymInt) else v for v in (k.start, k.stop, k.step)))
    return k


def read_natively_by_operator(left: Any, right: Any) -> bool:
    """Whether CPython's ``left <op> right`` reads the symbolic ``right`` natively: the left operand's
    builtin slot goes first (``right`` is no subclass of its type) and accepts ints and floats (``2.5 + n``,
    ``True + n``, ``0.5 < n``), so neither number's Python methods see the operation."""
    if not isinstance(right, (SymInt, SymFloat)) or isinstance(left, (SymInt, SymFloat)):
        return False
    if isinstance(right, SymInt):
        return isinstance(left, (float, complex)) or (isinstance(left, int) and type(left) is not int)
    return isinstance(left, complex)


def _finite(self) -> None:
    """Records that a float is finite (``math.floor`` and friends raise otherwise)."""
    if self.value - self.value == 0:
        _record(f"{self.expr} - {self.expr} == 0")
    else:
        _concretize(self, float)


def make_symbolic(value, expr: str, *sources):
    """``value`` as a symbolic number with expression ``expr``, computed from the numbers ``sources`` (whose
    names, and the proxies defining them, it refers to)."""
    syms = [s for s in sources if _is_sym(s)]
    names = frozenset().union(*(s.names for s in syms))
    proxies = tuple({id(p): p for s in syms for p in s.proxies}.values())
    if type(value) is int:
        return SymInt(value, expr, names, proxies)
    if type(value) is float:
        return SymFloat(value, expr, names, proxies)
    return value


# Note [Guard-free min and max]
# ``max(a, b)`` of ints compares them, and a comparison of symbolic numbers records its outcome. A size that grows
# (a KV cache's length in a generation) then leaves the trace at the first step on the other side of a clamp: a
# slice ``x[:, -w:]`` of a dim shorter than ``w`` (its start ``max(n - w, 0)``), a cache's ``max(length - w + 1,
# 0)``; a sliding-window cache recompiled twice as it filled. Such a value needs no branch: it is the expression
# ``max(a, b)``, which the computation and the prologue evaluate from the inputs (``torch.compile`` makes a ``Max``
# of its symbols), and whatever later compares it records a constraint on it. One comparison is still recorded:
# where the one symbolic operand has already passed every constant one (``min(3, n)`` with ``n`` 10), the outcome
# holds as the size grows, and the result keeps the constant a branch gives (``x[:, :3]`` is 3 long, not
# ``min(3, n)``). That comparison is ``n >= c`` whatever the order of the arguments: the builtin's own comparison at
# ``n == c`` (``min(n, 15)`` with ``n`` 15) records ``n <= 15``, which the next size fails (a sliding-window cache's
# ``min(length, window - 1)`` compiled once more as it filled).
def sym_max(*args):
    """``max(*args)`` of ints, guard-free where one is symbolic (Note [Guard-free min and max])."""
    return _sym_extreme(max, args)


def sym_min(*args):
    """``min(*args)`` of ints, guard-free where one is symbolic (Note [Guard-free min and max])."""
    return _sym_extreme(min, args)


def _sym_extreme(fn, args):
    symbolic = [a for a in args if type(a) is SymInt]
    if len(args) < 2 or not symbolic or not all(type(a) in (int, SymInt) for a in args):
        return fn(*args)
    if len({a.expr for a in symbolic}) == 1:
        constants = [a for a in args if type(a) is int]
        if not constants:
            return symbolic[0]
        if symbolic[0].value >= max(constants) and symbolic[0] >= max(constants):  # (the second records it)
            return symbolic[0] if fn is max else min(constants)
    value = fn(a.value if type(a) is SymInt else a for a in args)
    return make_symbolic(value, f"{fn.__name__}({', '.join(_expr(a) for a in args)})", *args)


# Note [math functions of symbolic numbers]
# ``math.cos(math.pi * self.last_epoch / T_max)`` (a cosine learning-rate schedule) read its float natively, which
# pinned it: a schedule stepped inside a jitted step recompiled on every step. A one-argument ``math`` function of
# ``MATH_DOMAINS`` keeps the number symbolic instead: its result is the expression ``math.cos(...)``, which the
# generated code evaluates from each call's inputs (the printer puts ``math`` in its globals where an expression
# calls it: ``Printer.expression``). Where eager's call would raise (``math.sqrt(-1)``, ``math.cos(inf)``,
# ``math.exp(1000)``) for another value, the domain that makes the result defined is recorded as a constraint
# (``x >= 0``, finiteness), so such a value compiles again and raises where eager does; a value outside it at
# trace time is pinned, as before. Functions of two numbers (``atan2``, ``log(x, base)``) still pin. The argument of
# such a schedule is ``math.pi * n``, a plain float times a symbolic int: CPython's float slot reads the int
# natively, so the interpreter asks the symbolic number's reflected method first (``__interpreter_reflected_first__``,
# the same value), which keeps the expression.
def _finite_domain(x) -> bool:
    if type(x.value) is int:
        return True
    if x.value - x.value != 0:
        return False
    _finite(x)
    return True


def _bounded(low=None, high=None, strict=False):
    """The domain test of ``low <= x <= high`` (``low < x`` where ``strict``), recording the bounds that hold."""
    above = ">" if strict else ">="

    def holds(x) -> bool:
        v = x.value
        if (low is not None and not (v > low if strict else v >= low)) or (high is not None and not v <= high):
            return False
        if low is not None:
            _record(f"{x.expr} {above} {low!r}")
        if high is not None:
            _record(f"{x.expr} <= {high!r}")
        return True

    return holds


_ANY = lambda x: True  # noqa: E731 - defined for every float (nan gives nan)

#: The ``math`` functions of one number that keep it symbolic, each with the test of its domain.
MATH_DOMAINS = {
    math.cos: _finite_domain, math.sin: _finite_domain, math.tan: _finite_domain,
    math.atan: _ANY, math.tanh: _ANY, math.erf: _ANY, math.erfc: _ANY, math.fabs: _ANY,
    math.degrees: _ANY, math.radians: _ANY,
    math.sqrt: _bounded(low=0), math.exp: _bounded(high=709.0),
    math.log: _bounded(low=0, strict=True), math.log2: _bounded(low=0, strict=True),
    math.log10: _bounded(low=0, strict=True), math.log1p: _bounded(low=-1, strict=True),
    math.acos: _bounded(low=-1, high=1), math.asin: _bounded(low=-1, high=1),
}  # fmt: skip


def sym_math(fn, x):
    """``fn(x)`` for ``fn`` of ``MATH_DOMAINS`` and a symbolic ``x``: symbolic where ``x`` is in its domain, else of
    the pinned value (Note [math functions of symbolic numbers])."""
    if not MATH_DOMAINS[fn](x):
        return fn(pin(x))
    return make_symbolic(fn(x.value), f"math.{fn.__name__}({x.expr})", x)


import operator as _op  # noqa: E402


class _SymbolicMixin:
    """Shared behaviour of SymInt and SymFloat; ``_base`` is the Python type they extend."""

    _base: type
    # ``math.pi * n``: the interpreter asks ``n.__rmul__`` before float's native slot, which would read the value
    # (that pinned it); the value is the same (Note [math functions of symbolic numbers])
    __interpreter_reflected_first__ = True

    def __new__(cls, value, expr: str, names: frozenset = frozenset(), proxies: tuple = ()):
        self = cls._base.__new__(cls, value)
        fields = self.__dict__  # set directly: the program may not set attributes (see __setattr__)
        fields["value"] = cls._base(value)
        fields["expr"] = expr
        fields["names"] = names or frozenset({expr})
        # The computation's proxies that define some of ``names`` (a data-dependent size, Note [Symbolic
        # data-dependent sizes] in thunder.core.data_dependent): a bound symbol that takes this number reads them.
        fields["proxies"] = proxies
        return self

    # An int has no instance attributes: setting one fails as it does eagerly.
    def __setattr__(self, name, value):
        raise AttributeError(f"'{self._base.__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        raise AttributeError(f"'{self._base.__name__}' object has no attribute '{name}'")

    @property
    def name(self) -> str:
        return self.expr

    __eq__ = _cmp("==", _op.eq)
    __ne__ = _cmp("!=", _op.ne)
    __lt__ = _cmp("<", _op.lt)
    __le__ = _cmp("<=", _op.le)
    __gt__ = _cmp(">", _op.gt)
    __ge__ = _cmp(">=", _op.ge)
    __add__ = _arith("+", _op.add)
    __radd__ = _arith("+", _op.add, reflected=True)
    __sub__ = _arith("-", _op.sub)
    __rsub__ = _arith("-", _op.sub, reflected=True)
    __mul__ = _arith("*", _op.mul)
    __rmul__ = _arith("*", _op.mul, reflected=True)
    __floordiv__ = _arith("//", _op.floordiv)
    __rfloordiv__ = _arith("//", _op.floordiv, reflected=True)
    __mod__ = _arith("%", _op.mod)
    __rmod__ = _arith("%", _op.mod, reflected=True)
    __truediv__ = _arith("/", _op.truediv)
    __rtruediv__ = _arith("/", _op.truediv, reflected=True)

    def __neg__(self):
        return make_symbolic(-self.value, f"(-{self.expr})", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return make_symbolic(abs(self.value), f"abs({self.expr})", self)

    def __bool__(self):
        result = bool(self.value)
        _record(f"bool({self.expr})" if result else f"not {self.expr}")
        return result

    def __hash__(self):
        # Dicts and sets hash natively and compare with ``==`` only on a hash match, so a lookup that
        # misses would record nothing: the hash itself pins the value.
        return hash(_concretize(self, self._base))

    def __pow__(self, other, mod=None):
        if not isinstance(other, (int, float, complex)):
            return NotImplemented  # a tensor's ``__rpow__`` takes the symbolic number (Adam's ``beta1 ** step``)
        if mod is None:
            kept = _symbolic_pow(self, other)
            if kept is not None:
                return kept
        # both operands pinned: the native ``pow`` reads a symbolic operand's value without a constraint
        base, other = _concretize(self, self._base), _plain(other)
        return pow(base, other) if mod is None else pow(base, other, _plain(mod))

    def __rpow__(self, other, mod=None):
        if not isinstance(other, (int, float, complex)):
            return NotImplemented
        if mod is None:
            kept = _symbolic_pow(other, self)
            if kept is not None:
                return kept
        exp, other = _concretize(self, self._base), _plain(other)
        return pow(other, exp) if mod is None else pow(other, exp, _plain(mod))

    def __divmod__(self, other):
        q = self.__floordiv__(other)
        return q if q is NotImplemented else (q, self.__mod__(other))

    def __rdivmod__(self, other):
        q = self.__rfloordiv__(other)
        return q if q is NotImplemented else (q, self.__rmod__(other))

    # Text and serialisation read the value: each pins it (see Note [Symbolic values]).
    def __repr__(self) -> str:
        return repr(_concretize(self, self._base))

    def __str__(self) -> str:
        return str(_concretize(self, self._base))

    def __format__(self, spec):
        return format(_concretize(self, self._base), spec)

    def __interpreter_identity__(self):
        """The object eager's ``n is m`` compares: the plain number (CPython's cached small ints for an index ``i is
        0``), recording ``n == value``."""
        return pin(self)

    def __interpreter_format__(self, spec):
        """``format(n, spec)`` in the program (an f-string's field): text that keeps the expression (Note [Text
        formatted from symbolic numbers]); thunder's own formatting, which runs natively, pins (``__format__``)."""
        return SymStr(format(self.value, spec), f"format({self.expr}, {spec!r})", self)

    def __reduce__(self):
        return (self._base, (_concretize(self, self._base),))

    def __getnewargs__(self):
        return (_concretize(self, self._base),)

    # Numbers are immutable: a copy is the same symbolic number (``copy.deepcopy`` would otherwise
    # go through ``__reduce__`` and return a plain number).
    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def conjugate(self):
        return self

    @property
    def real(self):
        return self

    @property
    def imag(self):
        return self._base(0)


def _symbolic_pow(base, exp):
    """``base ** exp`` keeping the expression where a float power's result is a float without error for every value
    the recorded constraints allow (Note [Symbolic float powers]), else None (the caller pins)."""
    bv = base.value if _is_sym(base) else base
    ev = exp.value if _is_sym(exp) else exp
    if isinstance(bv, complex) or isinstance(ev, complex) or (type(bv) is not float and type(ev) is not float):
        return None  # complex, or an int power: an int or a float by the exponent's sign, unbounded
    if 0 <= bv <= 1 and ev >= 0:  # in [0, 1]
        bounds = ((base, ">=", 0), (base, "<=", 1), (exp, ">=", 0))
    elif bv >= 0 and 0 <= ev <= 1:  # at most max(base, 1)
        bounds = ((base, ">=", 0), (exp, ">=", 0), (exp, "<=", 1))
    elif bv >= 1 and ev <= 0:  # in (0, 1]
        bounds = ((base, ">=", 1), (exp, "<=", 0))
    else:
        return None
    for x, op, bound in bounds:
        if _is_sym(x):
            _record(f"{x.expr} {op} {bound}")
    return make_symbolic(pow(bv, ev), f"({_expr(base)} ** {_expr(exp)})", base, exp)


# Note [Symbolic float powers]
# ``**`` pinned its symbolic operands: whether a power is an int or a float, real or complex, finite or an
# OverflowError/ZeroDivisionError depends on the values. Adam's bias correction ``1 - beta1 ** step``, with the step
# count a symbolic number (Note [Symbolic data-dependent sizes] in thunder.core.data_dependent), would then be
# specialised on every step. A float power whose operands lie in one of three boxes is a float in [0, max(1, base)]
# for every value in the box: base in [0, 1] and exponent >= 0; base >= 0 and exponent in [0, 1]; base >= 1 and
# exponent <= 0. There the box is recorded as constraints on the symbolic operands and the expression is kept, so
# the computation evaluates the power in Python's doubles, as eager does. Any other power pins as before.


def _ndigits(ndigits):
    return ndigits.__index__() if _is_sym(ndigits) else ndigits


class SymInt(_SymbolicMixin, int):
    """An int that remembers the expression it came from (see Note [Symbolic values])."""

    _base = int
    # ``range(n)`` reaches the tracer's lookaside with the symbolic number (Note [Loops over a symbolic range] in
    # thunder.core.loops), which pins it unless it traces the loop once
    __interpreter_range_argument__ = True

    def __index__(self):
        return _concretize(self, int)

    def __int__(self):
        return _concretize(self, int)

    def __float__(self):
        return float(_concretize(self, int))

    def __and__(self, other):
        return _concretize(self, int) & other

    def __or__(self, other):
        return _concretize(self, int) | other

    def __xor__(self, other):
        return _concretize(self, int) ^ other

    def __lshift__(self, other):
        return _concretize(self, int) << other

    def __rshift__(self, other):
        return _concretize(self, int) >> other

    def __rand__(self, other):
        return other & _concretize(self, int)

    def __ror__(self, other):
        return other | _concretize(self, int)

    def __rxor__(self, other):
        return other ^ _concretize(self, int)

    def __rlshift__(self, other):
        return other << _concretize(self, int)

    def __rrshift__(self, other):
        return other >> _concretize(self, int)

    def __invert__(self):
        return make_symbolic(~self.value, f"(~{self.expr})", self)

    # Rounding an int is the identity: the result stays symbolic, nothing is pinned.
    def __trunc__(self):
        return self

    __floor__ = __ceil__ = __trunc__

    def __round__(self, ndigits=None):
        if ndigits is None:
            return self
        ndigits = _ndigits(ndigits)
        return make_symbolic(round(self.value, ndigits), f"round({self.expr}, {ndigits!r})", self)

    def bit_length(self):
        return make_symbolic(self.value.bit_length(), f"({self.expr}).bit_length()", self)

    def bit_count(self):
        return make_symbolic(self.value.bit_count(), f"({self.expr}).bit_count()", self)

    def is_integer(self):
        return True

    def as_integer_ratio(self):
        return (self, 1)

    def to_bytes(self, *args, **kwargs):
        return _concretize(self, int).to_bytes(*args, **kwargs)

    @classmethod
    def from_bytes(cls, *args, **kwargs):
        return int.from_bytes(*args, **kwargs)

    @property
    def numerator(self):
        return self

    @property
    def denominator(self):
        return 1


class SymFloat(_SymbolicMixin, float):
    """A float that remembers the expression it came from (see Note [Symbolic values])."""

    _base = float

    def __float__(self):
        return _concretize(self, float)

    def __int__(self):
        return int(_concretize(self, float))

    # Rounding to an int keeps the expression; it raises for nan and inf, so finiteness is recorded.
    def __trunc__(self):
        _finite(self)
        return make_symbolic(math.trunc(self.value), f"int({self.expr})", self)

    def __floor__(self):
        _finite(self)
        return make_symbolic(math.floor(self.value), f"int({self.expr} // 1)", self)

    def __ceil__(self):
        _finite(self)
        return make_symbolic(math.ceil(self.value), f"(-int(-{self.expr} // 1))", self)

    def __round__(self, ndigits=None):
        if ndigits is None:
            _finite(self)
            return make_symbolic(round(self.value), f"round({self.expr})", self)
        ndigits = _ndigits(ndigits)
        return make_symbolic(round(self.value, ndigits), f"round({self.expr}, {ndigits!r})", self)

    def is_integer(self):
        result = self.value.is_integer()
        _record(f"({self.expr}).is_integer()" if result else f"not ({self.expr}).is_integer()")
        return result

    def as_integer_ratio(self):
        return _concretize(self, float).as_integer_ratio()

    def hex(self):
        return _concretize(self, float).hex()

    @classmethod
    def fromhex(cls, string):
        return float.fromhex(string)


# Note [Text formatted from symbolic numbers]
# ``print(f"loss={loss.item():.4f}")``: the float is symbolic (Note [Symbolic data-dependent sizes] in
# thunder.core.data_dependent), and formatting it pinned it (``str``/``format`` read the value), so every new loss
# recompiled, although the text only went to ``print``, which a replay makes on every call with that call's values.
# Formatting a symbolic number in the program (an f-string's field, ``format(n, spec)``: the interpreter asks
# ``__interpreter_format__``) gives a ``SymStr`` instead: the text for the values traced, plus the expression that
# makes it (``format(u0, '.4f')``), which an f-string's pieces join (``BUILD_STRING`` asks
# ``__interpreter_build_string__``) and ``+`` extends. Printed code writes the expression, so a ``print`` of it (or
# returning it) gives each call's text. Any other use reads the text and pins it, recording ``<expr> == '<text>'``
# as for a number: its own methods (comparing, hashing, ``len``, ``split``, ...) and ``str``/``repr`` of it; and the
# tracer pins one that an instruction hands to native code (an argument of any call but ``print``, an item of a
# container, an attribute, a dict key: ``pin_native_operands``). Thunder's own formatting, native, still pins.
class SymStr(str):
    """Text formatted from symbolic numbers that remembers how (see Note [Text formatted from symbolic numbers])."""

    def __new__(cls, text: str, expr: str, *sources):
        self = str.__new__(cls, text)
        _texts_made.set(True)
        syms = [x for x in sources if is_symbolic(x)]
        fields = self.__dict__
        fields["value"] = str(text)
        fields["expr"] = expr
        fields["names"] = frozenset().union(*(x.names for x in syms))
        fields["proxies"] = tuple({id(p): p for x in syms for p in x.proxies}.values())
        return self

    def __setattr__(self, name, value):
        raise AttributeError(f"'str' object has no attribute '{name}'")

    @staticmethod
    def __interpreter_build_string__(parts) -> str:
        """An f-string's pieces joined (``BUILD_STRING``), keeping the expressions."""
        return SymStr("".join(parts), f"({' + '.join(map(_str_expr, parts))})", *parts)

    def __add__(self, other):
        if not isinstance(other, str):
            return str.__add__(self.value, other)  # eager's TypeError
        return SymStr(self.value + other, f"({self.expr} + {_str_expr(other)})", self, other)

    def __radd__(self, other):
        if not isinstance(other, str):
            return NotImplemented
        return SymStr(other + self.value, f"({_str_expr(other)} + {self.expr})", other, self)

    def __format__(self, spec):
        return self if spec == "" else SymStr(format(self.value, spec), f"format({self.expr}, {spec!r})", self)

    __interpreter_format__ = __format__

    def __str__(self):
        return self.pin()

    def __repr__(self):
        return repr(self.pin())

    def pin(self) -> str:
        """The text, recording ``<expr> == '<text>'``; from then on this text is a constant of the trace."""
        text = _concretize(self, str)
        self.__dict__.update(expr=repr(text), names=frozenset(), proxies=())
        return text


def _str_expr(x) -> str:
    return x.expr if type(x) is SymStr else repr(str(x))


def _pinning_str_method(name: str):
    method = getattr(str, name)

    def pinned(self, *args, **kwargs):
        return method(self.pin(), *args, **kwargs)

    pinned.__name__ = name
    return pinned


# Every other method of ``str`` reads the text: it pins.
for _name in dir(str):
    if _name not in vars(SymStr) and _name not in ("__new__", "__init__", "__init_subclass__", "__subclasshook__",
                                                   "__getattribute__", "__class__", "__doc__", "__dir__",
                                                   "__sizeof__", "maketrans", "pin"):  # fmt: skip
        setattr(SymStr, _name, _pinning_str_method(_name))


def _make_methods_opaque() -> None:
    # The interpreter runs these natively: they are thunder's bookkeeping, not the user's program.
    from thunder.core.interpreter import make_opaque

    for cls in (_SymbolicMixin, SymInt, SymFloat, SymStr):
        for attr in list(vars(cls).values()):
            if isinstance(attr, property):
                attr = attr.fget
            elif isinstance(attr, (staticmethod, classmethod)):
                attr = attr.__func__
            if callable(attr) and not isinstance(attr, type):
                make_opaque(attr)


_make_methods_opaque()
