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

Layer: core. Imports: stdlib, core.interpreter (to mark its methods opaque).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

# The ordered set of constraint expressions being recorded, per thread (a ContextVar, not a
# global: two threads tracing at once must not see each other's constraints).
_constraints: contextvars.ContextVar[dict[str, None] | None] = contextvars.ContextVar("thunder_constraints", default=None)


@contextlib.contextmanager
def recording_constraints() -> Iterator[dict[str, None]]:
    """Collects the constraints recorded while tracing (in order, without duplicates)."""
    recorded: dict[str, None] = {}
    token = _constraints.set(recorded)
    try:
        yield recorded
    finally:
        _constraints.reset(token)


def _record(expr: str) -> None:
    recorded = _constraints.get()
    if recorded is not None:
        recorded[expr] = None


def _expr(x) -> str:
    if isinstance(x, (SymInt, SymFloat)):
        return x.expr
    return repr(x)


def _is_sym(x) -> bool:
    return isinstance(x, (SymInt, SymFloat))


def is_symbolic(x) -> bool:
    """Whether ``x`` is a symbolic number."""
    return isinstance(x, (SymInt, SymFloat))


_INVERSE = {"==": "!=", "!=": "==", "<": ">=", ">=": "<", ">": "<=", "<=": ">"}


def _cmp(op: str, pyop):
    def method(self, other):
        if not isinstance(other, (int, float)):
            return NotImplemented
        result = pyop(self.value, other.value if _is_sym(other) else other)
        # Record the comparison that holds, so equal constraints read the same way.
        _record(f"{self.expr} {op if result else _INVERSE[op]} {_expr(other)}")
        return result

    return method


def _arith(op: str, pyop, reflected: bool = False):
    def method(self, other):
        if isinstance(other, bool) or not isinstance(other, (int, float)):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        av = a.value if _is_sym(a) else a
        bv = b.value if _is_sym(b) else b
        value = pyop(av, bv)
        return make_symbolic(value, f"({_expr(a)} {op} {_expr(b)})", self.names | getattr(other, "names", frozenset()))

    return method


def _concretize(self, kind):
    _record(f"{self.expr} == {self.value!r}")
    return kind(self.value)


def make_symbolic(value, expr: str, names: frozenset):
    if type(value) is int:
        return SymInt(value, expr, names)
    if type(value) is float:
        return SymFloat(value, expr, names)
    return value


import operator as _op  # noqa: E402


class _SymbolicMixin:
    """Shared behaviour of SymInt and SymFloat; ``_base`` is the Python type they extend."""

    _base: type

    def __new__(cls, value, expr: str, names: frozenset = frozenset()):
        self = cls._base.__new__(cls, value)
        self.value = cls._base(value)
        self.expr = expr
        self.names = names or frozenset({expr})
        return self

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
        return make_symbolic(-self.value, f"(-{self.expr})", self.names)

    def __pos__(self):
        return self

    def __abs__(self):
        return make_symbolic(abs(self.value), f"abs({self.expr})", self.names)

    def __bool__(self):
        result = bool(self.value)
        _record(f"bool({self.expr})" if result else f"not {self.expr}")
        return result

    def __hash__(self):
        return hash(self.value)

    def __pow__(self, other):
        return _concretize(self, type(self.value)) ** other

    def __rpow__(self, other):
        return other ** _concretize(self, type(self.value))

    def __divmod__(self, other):
        return divmod(_concretize(self, type(self.value)), other)

    def __round__(self, ndigits=None):
        return round(_concretize(self, type(self.value)), ndigits)

    def __trunc__(self):
        return int(_concretize(self, type(self.value)))

    def __repr__(self) -> str:
        return repr(self.value)

    __str__ = __repr__

    def __format__(self, spec):
        return format(self.value, spec)

    def __reduce__(self):
        return (type(self.value), (self.value,))


class SymInt(_SymbolicMixin, int):
    """An int that remembers the expression it came from (see Note [Symbolic values])."""

    _base = int

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

    def __invert__(self):
        return make_symbolic(~self.value, f"(~{self.expr})", self.names)


class SymFloat(_SymbolicMixin, float):
    """A float that remembers the expression it came from (see Note [Symbolic values])."""

    _base = float

    def __float__(self):
        return _concretize(self, float)

    def __int__(self):
        return int(_concretize(self, float))


def _make_methods_opaque() -> None:
    # The interpreter runs these natively: they are thunder's bookkeeping, not the user's program.
    from thunder.core.interpreter import make_opaque

    for cls in (_SymbolicMixin, SymInt, SymFloat):
        for attr in list(vars(cls).values()):
            if callable(attr) and not isinstance(attr, (type, staticmethod, classmethod)):
                make_opaque(attr)


_make_methods_opaque()
