"""Operator and container protocols the interpreter runs natively, compared with CPython."""

from __future__ import annotations

import pytest

from thunder.core.interpreter import interpret


class Reflected(int):
    def __rmul__(self, other):
        return ("rmul", other)

    def __radd__(self, other):
        return ("radd", other)


class CountsIndex(int):
    calls = 0

    def __index__(self):
        CountsIndex.calls += 1
        return int(self)


@pytest.mark.parametrize(
    "f",
    [lambda: [0] * Reflected(3), lambda: "ab" * Reflected(2), lambda: (1,) * Reflected(2), lambda: [1] + Reflected(1)],
    ids=["list-times", "str-times", "tuple-times", "list-plus"],
)
def test_sequence_on_the_left_asks_the_number_first(f):
    _as_cpython(f)


def _as_cpython(f) -> None:
    """``interpret(f)()`` gives ``f()``'s value, or raises its TypeError."""
    try:
        expected = f()
    except TypeError as e:
        with pytest.raises(type(e)):
            interpret(f)()
        return
    assert interpret(f)() == expected


@pytest.mark.parametrize(
    "f, expected",
    [
        (lambda k: (10, 20, 30)[k], 20),
        (lambda k: "abc"[k], "b"),
        (lambda k: [1, 2, 3][:k], [1]),
    ],
    ids=["tuple", "str", "list-slice"],
)
def test_an_int_subclass_index_is_asked_for_its_value(f, expected):
    CountsIndex.calls = 0
    assert interpret(f)(CountsIndex(1)) == expected
    assert CountsIndex.calls == 1  # so a tracer's symbolic int sees that its value was read


def test_setitem_with_an_int_subclass_index():
    def f(k):
        items = [0, 0]
        items[k] = 5
        return items

    CountsIndex.calls = 0
    assert interpret(f)(CountsIndex(1)) == [0, 5]
    assert CountsIndex.calls == 1


class Countdown:
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        if i >= self.n:
            raise IndexError(i)
        return i * 10


class OwnReversed:
    def __reversed__(self):
        return "own"


@pytest.mark.parametrize(
    "f",
    [lambda: list(reversed(Countdown(3))), lambda: reversed(OwnReversed()), lambda: list(reversed([1, 2])),
     lambda: list(reversed({"a": 1, "b": 2})), lambda: list(reversed(range(4))), lambda: reversed({1, 2})],
    ids=["sequence", "own-reversed", "list", "dict", "range", "set"],
)  # fmt: skip
def test_reversed_as_cpython(f):
    _as_cpython(f)
