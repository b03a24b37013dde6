"""What a fourth round of probing found (the earlier rounds' are in tests/test_probe_findings.py,
tests/test_probe_findings2.py and tests/test_probe_findings3.py), each kept as a regression test against eager."""

# ruff: noqa: UP030, UP031, UP032  (str.format and % formatting are what these tests check)

from __future__ import annotations

import abc
import contextlib
import itertools
import math
import operator
import random
import struct
import typing

import pytest
import torch

import thunder


class _Setting:
    """A user's object that C code converts by its Python dunders, each reading attributes that change."""

    def __init__(self):
        self.k, self.mode, self.calls = 1, "a", 0

    def __float__(self):
        self.calls += 1
        return self.k + 0.5

    def __index__(self):
        self.calls += 1
        return self.k

    def __str__(self):
        self.calls += 1
        return self.mode * (self.k + 1)

    def __format__(self, spec):
        self.calls += 1
        return format(self.mode, spec)

    def __repr__(self):
        return f"_Setting({self.mode})"


_CONVERSIONS = {
    "f-string": lambda x, s: x * 2 if f"{s}" == "a" else x,
    "f-string with spec": lambda x, s: (x + 1, f"{s:>3}|{s!s}|{s!r}|{s!a}"),
    "str": lambda x, s: (x - 1, str(s)),
    "repr": lambda x, s: x * 3 if repr(s) == "_Setting(a)" else x,
    "format": lambda x, s: (x, format(s, "<2")),
    "float": lambda x, s: x * float(s),
    "int": lambda x, s: x * int(s),
    "operator.index": lambda x, s: x + operator.index(s),
    "range": lambda x, s: x * len(range(s)),
    "hex": lambda x, s: (x, hex(s)),
    "list index": lambda x, s: x * [1.0, 2.0, 3.0, 4.0][s],
    "tuple slice": lambda x, s: (x, (1, 2, 3)[:s]),
    "list store": lambda x, s: _stored(s),
    "str.format": lambda x, s: x * 2 if "{}".format(s) == "a" else x,
    "str.format with a spec": lambda x, s: (x, "{:>3}|{!r}|{k}".format(s, s, k=s), str.format("{}", s)),
    "percent": lambda x, s: (x, "%s" % s),
    "percent of a tuple": lambda x, s: (x, "%s|%r|%d|%.1f|%x" % (s, s, s, s, s)),
    "percent of a dict": lambda x, s: (x, "%(k)s" % {"k": s}),
    "sequence repeat": lambda x, s: (x, [0] * s, s * "ab", (1,) * s),
}


def _stored(s):
    lst = [0, 0, 0]
    lst[s] = 9
    lst[s:] = [7]
    return lst


def _assert_same(actual, expected):
    assert type(actual) is type(expected)
    if isinstance(expected, tuple):
        for a, e in zip(actual, expected, strict=True):
            _assert_same(a, e)
    elif isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected)
    else:
        assert actual == expected


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
@pytest.mark.parametrize("name", list(_CONVERSIONS))
def test_a_users_conversion_dunders_run_on_every_call(name, cache):
    # str(obj), f"{obj}", float(obj), range(obj), [..][obj] call the object's Python __str__/__format__/__float__/
    # __index__ from C: they ran natively while tracing, so what they read went unchecked and a cached trace kept the
    # first call's string or number (a silently wrong result), and their own effects were made on the first call only
    fn = _CONVERSIONS[name]
    jitted = thunder.jit(fn, cache=cache)
    x = torch.randn(3)
    eager_obj, jit_obj = _Setting(), _Setting()
    for k, mode in ((1, "a"), (2, "a"), (2, "b"), (0, "a"), (1, "a")):
        eager_obj.k = jit_obj.k = k
        eager_obj.mode = jit_obj.mode = mode
        expected = fn(x, eager_obj)
        _assert_same(jitted(x, jit_obj), expected)
        assert jit_obj.calls == eager_obj.calls


class _Config:
    def __init__(self):
        self.name, self.sizes, self._v = "a", {"h": 1}, "own"


def _check_fields(f):
    jitted = thunder.jit(f)
    x, eager_cfg, jit_cfg = torch.randn(2), _Config(), _Config()
    for name, h in (("a", 1), ("b", 1), ("b", 2)):
        eager_cfg.name = jit_cfg.name = name
        eager_cfg.sizes["h"] = jit_cfg.sizes["h"] = h
        _assert_same(jitted(x, jit_cfg), f(x, eager_cfg))


def test_attributes_a_format_string_reads_are_checked_on_every_call():
    # str.format reads ``{0.name}`` natively: unchecked, the cached string was the first call's
    _check_fields(lambda x, cfg: (x, "{0.name}-{c.name}-{0._v}-{0.__class__}".format(cfg, c=cfg)))


def test_items_a_format_string_reads_are_checked_on_every_call():
    _check_fields(lambda x, cfg: (x, "{0.sizes[h]}".format(cfg)))


def test_conversion_dunders_returning_the_wrong_type_raise_eagers_error():
    class Bad:
        def __index__(self):
            return 1.5

        def __str__(self):
            return 3

    for fn in (lambda x, b: x * [1, 2][b], lambda x, b: (x, str(b)), lambda x, b: (x, f"{b}")):
        with pytest.raises(TypeError) as eager:
            fn(torch.ones(1), Bad())
        with pytest.raises(TypeError) as traced:
            thunder.jit(fn)(torch.ones(1), Bad())
        assert str(traced.value) == str(eager.value) or "returned non-" in str(traced.value)


def test_a_users_eq_called_by_a_list_s_contains_is_checked_on_every_call():
    class Named:
        def __init__(self):
            self.name = "a"

        def __eq__(self, other):
            return other == self.name

        __hash__ = object.__hash__

    def f(x, obj):
        return x * 2 if "a" in [obj] else x

    jitted = thunder.jit(f)
    obj, x = Named(), torch.ones(2)
    torch.testing.assert_close(jitted(x, obj), f(x, obj))
    obj.name = "b"
    torch.testing.assert_close(jitted(x, obj), f(x, obj))


def test_a_users_float_called_by_math_is_checked_on_every_call():
    def f(x, s):
        return x * math.sqrt(s) + math.atan2(s, 2.0) + math.comb(s, 1) + math.sqrt(x.sum())

    jitted = thunder.jit(f)
    s, x = _Setting(), torch.ones(2)
    torch.testing.assert_close(jitted(x, s), f(x, s))
    s.k = 3
    torch.testing.assert_close(jitted(x, s), f(x, s))


def test_a_users_index_object_indexes_a_tensor():  # (made to work by tests/test_eager_gaps.py's change)
    def f(x, s):
        return x[s:], x[s]

    x = torch.arange(4.0)
    torch.testing.assert_close(thunder.jit(f)(x, _Setting()), f(x, _Setting()))


@pytest.mark.parametrize(
    "case",
    [
        "cholesky of a matrix that is not positive-definite",
        "index out of range",
        "index out of range, finally",
        "index out of range, contextlib.suppress",
    ],
)
def test_a_run_time_failure_that_the_program_catches(case):
    def cholesky_with_jitter(a):
        try:
            return torch.linalg.cholesky(a)
        except RuntimeError:
            return torch.linalg.cholesky(a + 5 * torch.eye(a.shape[0]))

    def first_on_failure(x, i):
        try:
            return x[i]
        except IndexError:
            return x[0]

    def finally_counting(x, i):
        try:
            return x[i]
        finally:
            _COUNTS.append(1)

    def suppressing(x, i):
        with contextlib.suppress(IndexError):
            return x[i]
        return x[0] * 2

    x = torch.randn(4)
    if case.startswith("cholesky"):
        fn, calls = cholesky_with_jitter, [(torch.tensor([[1.0, 2.0], [2.0, 1.0]]),), (torch.eye(2) * 2,)]
        calls.append(calls[0])
    elif case == "index out of range":
        fn, calls = first_on_failure, [(x, torch.tensor(i)) for i in (7, 1, 9, 2)]
    elif case == "index out of range, contextlib.suppress":
        fn, calls = suppressing, [(x, torch.tensor(i)) for i in (1, 9, 2)]
    else:
        fn, calls = finally_counting, [(x, torch.tensor(i)) for i in (1, 9, 2)]
    jitted = thunder.jit(fn)
    for args in calls:  # a failing call first (the first call's), then on a cached entry between two that do not
        _COUNTS.clear()
        try:
            expected = fn(*args)
        except IndexError as e:
            expected = e
        eager_counts = list(_COUNTS)
        _COUNTS.clear()
        if isinstance(expected, Exception):
            with pytest.raises(type(expected), match=str(expected)):
                jitted(*args)
        else:
            torch.testing.assert_close(jitted(*args), expected)
        assert _COUNTS == eager_counts  # the finally ran once, as in eager


_COUNTS: list = []


def test_a_caught_run_time_failure_after_an_effect_raises_with_a_note():
    # eager runs the handler; the call cannot run again eagerly (the in-place update would be made twice)
    def f(x, i):
        x.add_(1)
        try:
            return x[i]
        except IndexError:
            return x[0]

    jitted = thunder.jit(f)
    x, expected_x = torch.zeros(4), torch.zeros(4)
    torch.testing.assert_close(jitted(x, torch.tensor(1)), f(expected_x, torch.tensor(1)))
    with pytest.raises(IndexError) as failed:
        jitted(x, torch.tensor(9))
    assert any("handler did not run" in n for n in failed.value.__notes__)
    f(expected_x, torch.tensor(9))
    torch.testing.assert_close(x, expected_x)  # the update was made once


class _Switch(type):
    """A metaclass whose ``isinstance`` answer is a flag that changes."""

    accept = True

    def __instancecheck__(cls, instance):
        return _Switch.accept


class _Switched(metaclass=_Switch):
    pass


@typing.runtime_checkable
class _Scales(typing.Protocol):
    def scale(self) -> float: ...


class _Plain:
    pass


def test_a_metaclass_s_instancecheck_is_checked_on_every_call():
    # isinstance calls a metaclass's Python __instancecheck__ natively: what it read (a flag, the attributes a
    # runtime-checkable Protocol looks for) went unchecked, and the cached trace kept its first answer
    def f(x, obj):
        return x * 2 if isinstance(obj, _Switched) else x, isinstance(obj, (int, _Scales))

    jitted = thunder.jit(f)
    x, obj = torch.randn(2), _Plain()
    try:
        for change in (lambda: None, lambda: setattr(_Switch, "accept", False), lambda: setattr(obj, "scale", abs)):
            change()
            _assert_same(jitted(x, obj), f(x, obj))
    finally:
        _Switch.accept = True


def test_an_abc_registered_after_the_first_call_is_seen():
    class Base(abc.ABC):  # noqa: B024  (a registry of virtual subclasses)
        pass

    class Other(abc.ABC):  # noqa: B024
        pass

    def f(x, obj):
        return x * 2 if isinstance(obj, Base) else x, issubclass(type(obj), Other)

    jitted = thunder.jit(f)
    x, obj = torch.randn(2), _Plain()
    for register in (lambda: None, lambda: Base.register(_Plain), lambda: Other.register(_Plain)):
        register()
        _assert_same(jitted(x, obj), f(x, obj))


def _draws_after(fails_before_the_draw, calls):
    """Results of each call, or the name of its exception, with a fresh ``random.Random(3)`` as ``_RNG``."""
    global _RNG
    _RNG = random.Random(3)
    out = []
    for args in calls:
        try:
            out.append(fails_before_the_draw(*args)[1])
        except Exception as e:
            out.append(type(e).__name__)
    return out


_RNG = random.Random(3)


def _write_then_draw(x):
    x.add_(1)
    return x, _RNG.random()


def test_a_draw_after_an_in_place_op_that_fails_is_not_made():
    """Found by the randomized tester (3.13, seed 3005996): an in-place op on a leaf that requires grad fails at
    run time, before the program's draw from a random generator; the prologue, which makes the draws, had drawn
    already, so every later call got the next number (a silently wrong result)."""
    calls = [(torch.randn(3, 1).requires_grad_(),), (torch.randn(1, 2),), (torch.randn(1, 2),)]
    expected = _draws_after(_write_then_draw, calls)
    assert _draws_after(thunder.jit(_write_then_draw), calls) == expected


def _index_then_draw(x, i):
    return x[i], _RNG.random()


def _draw_then_index(x, i):
    r = _RNG.random()
    return x[i] * r, r


@pytest.mark.parametrize("fn", [_index_then_draw, _draw_then_index])
def test_a_draw_after_an_op_that_fails_on_a_later_call_s_values_is_not_made(fn):
    # (the prologue draws before the computation runs: eager made the draw only where it comes first)
    calls = [(torch.arange(4.0), torch.tensor(i)) for i in (1, 9, 2, 9, 3)]
    expected = _draws_after(fn, calls)
    assert _draws_after(thunder.jit(fn), calls) == expected


class _Dunders:
    """A user's object whose Python dunders, which C functions call, each read an attribute that changes."""

    def __init__(self):
        self.k, self.calls = 1, 0

    def _read(self):
        self.calls += 1
        return self.k

    def __index__(self):
        return self._read()

    def __float__(self):
        return float(self._read())

    def __bytes__(self):
        return b"x" * self._read()

    def __len__(self):
        return self._read()

    def __bool__(self):
        return self._read() > 1

    def __hash__(self):
        return self._read()

    def __eq__(self, other):
        return self._read() == other

    def __lt__(self, other):
        return self._read() < other

    def __gt__(self, other):
        return self._read() > other

    def __add__(self, other):
        return self._read() + other

    __radd__ = __add__

    def __divmod__(self, other):
        return divmod(self._read(), other)

    def __pow__(self, other):
        return self._read() ** other

    def __round__(self, n=None):
        return self._read() + 100

    def __abs__(self):
        return self._read() + 200

    def __neg__(self):
        return -self._read()

    def __floor__(self):
        return self._read() + 300

    def __ceil__(self):
        return self._read() + 400

    def __trunc__(self):
        return self._read() + 500

    def __complex__(self):
        return complex(self._read(), 1)

    def __contains__(self, v):
        return v == self._read()

    def __getitem__(self, i):
        return self._read() + i


_NATIVE_DUNDER_CALLS = {
    "bytes": lambda d: bytes(d),
    "bytearray": lambda d: bytes(bytearray(d)),
    "itertools.islice": lambda d: list(itertools.islice(range(10), d)),
    "itertools.islice start stop": lambda d: list(itertools.islice(range(10), d, 5)),
    "enumerate start": lambda d: list(enumerate("ab", d)),
    "chr": lambda d: chr(d),
    "struct.pack": lambda d: struct.pack("i", d),
    "hash": lambda d: hash(d),
    "divmod": lambda d: divmod(d, 2),
    "round": lambda d: round(d),
    "abs": lambda d: abs(d),
    "pow": lambda d: pow(d, 2),
    "complex": lambda d: complex(d),
    "math.floor": lambda d: math.floor(d),
    "math.ceil": lambda d: math.ceil(d),
    "math.trunc": lambda d: math.trunc(d),
    "math.fsum": lambda d: math.fsum([d, 1.5]),
    "operator.add": lambda d: operator.add(d, 1),
    "operator.lt": lambda d: operator.lt(d, 2),
    "operator.eq": lambda d: operator.eq(d, 1),
    "operator.neg": lambda d: operator.neg(d),
    "operator.contains": lambda d: operator.contains(d, 1),
    "operator.getitem": lambda d: operator.getitem(d, 1),
    "operator.length_hint": lambda d: operator.length_hint(d),
    "max": lambda d: max([d, 2]) is d,
    "min": lambda d: min(d, 2) is d,
    "sorted": lambda d: [v is d for v in sorted([d, 2])],
    "sorted reverse": lambda d: sorted([1, 3, 2], reverse=d),
    "sum": lambda d: sum([d, 1]),
    "sum start": lambda d: sum([1, 2], d),
    "any": lambda d: any([d]),
    "all": lambda d: all([d, 1]),
    "list.pop": lambda d: [1, 2, 3, 4].pop(d),
    "list.insert": lambda d: (lst := [1, 2, 3]).insert(d, 9) or lst,
    "in a set": lambda d: d in {1},
}


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
@pytest.mark.parametrize("name", list(_NATIVE_DUNDER_CALLS))
def test_dunders_that_c_functions_call_run_on_every_call(name, cache):
    # bytes(obj), itertools.islice(it, obj), hash(obj), max([obj, 2]), operator.add(obj, 1), lst.index(obj) ... call
    # obj's Python dunders from C: natively, what they read went unchecked (the cached trace kept the first call's
    # value) and their own effects were made on the first call only (Note [Dunders called by C functions])
    fn = _NATIVE_DUNDER_CALLS[name]

    def program(x, d):
        return x + 1, fn(d)

    jitted = thunder.jit(program, cache=cache)
    x, eager_obj, jit_obj = torch.randn(2), _Dunders(), _Dunders()
    for k in (1, 2, 3, 2):
        eager_obj.k = jit_obj.k = k
        expected = program(x, eager_obj)
        _assert_same(jitted(x, jit_obj), expected)
        assert jit_obj.calls == eager_obj.calls
