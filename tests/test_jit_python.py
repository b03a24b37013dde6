"""Python language features inside jitted functions: the interpreter and the tracer together."""

from __future__ import annotations

import dataclasses
import functools
import warnings

import numpy as np
import pytest
import torch

import thunder


def _check(fn, *args, **kwargs):
    expected = fn(*args, **kwargs)
    actual = thunder.jit(fn)(*args, **kwargs)
    torch.testing.assert_close(actual, expected)
    return actual


def test_generators_and_comprehensions():
    def gen(xs):
        for i, x in enumerate(xs):
            yield x * (i + 1)

    def f(xs):
        doubled = [x * 2 for x in xs]
        total = sum(gen(doubled), torch.zeros(3))
        squares = {i: x * x for i, x in enumerate(xs)}
        return total + squares[1]

    _check(f, [torch.randn(3) for _ in range(3)])


def test_dataclass_config_and_methods():
    @dataclasses.dataclass
    class Config:
        scale: float
        shift: float = 1.0

        def apply(self, x):
            return x * self.scale + self.shift

    def f(x, cfg):
        return cfg.apply(x)

    x = torch.randn(4)
    cfg = Config(2.0)
    jf = thunder.jit(f)
    torch.testing.assert_close(jf(x, cfg), f(x, cfg))
    cfg.scale = 3.0  # an attribute the trace read: the prologue notices
    torch.testing.assert_close(jf(x, cfg), f(x, cfg))
    assert thunder.cache_misses(jf) == 2


def test_classes_super_and_properties():
    class Base:
        def __init__(self, w):
            self.w = w

        def forward(self, x):
            return x * self.w

    class Child(Base):
        @property
        def bias(self):
            return 0.5

        def forward(self, x):
            return super().forward(x) + self.bias

    def f(x, w):
        return Child(w).forward(x)

    _check(f, torch.randn(3), torch.randn(3))


def test_match_statement_and_kwargs():
    def f(x, *, mode="relu", **extra):
        match mode:
            case "relu":
                y = torch.relu(x)
            case "neg":
                y = -x
            case _:
                y = x
        return y * extra.get("scale", 1.0)

    _check(f, torch.randn(4), mode="neg", scale=2.0)
    _check(f, torch.randn(4), mode="relu")


def test_exceptions_inside_the_traced_function():
    def f(x):
        try:
            raise KeyError("missing")
        except KeyError:
            y = x + 1
        finally:
            y = y * 2
        return y

    _check(f, torch.randn(3))


def test_functools_partial_and_lambda():
    def scale(x, factor):
        return x * factor

    def f(x):
        g = functools.partial(scale, factor=3.0)
        h = lambda t: t - 1  # noqa: E731
        return h(g(x))

    _check(f, torch.randn(3))


def test_star_unpacking_and_fstrings():
    def f(*xs):
        first, *rest = xs
        label = f"{len(rest):02d}"
        assert label == "02"
        return first + sum(rest)

    _check(f, torch.randn(2), torch.randn(2), torch.randn(2))


def test_recursion():
    def f(x, n):
        if n == 0:
            return x
        return f(x * 2, n - 1)

    _check(f, torch.randn(3), 3)


def test_dict_of_a_mapping_with_python_methods_is_its_items():
    """``dict(m)`` of an object with ``keys()`` and ``__getitem__`` takes its items; the tracer used to
    hand ``dict`` the object's iterator (its keys), so two-character keys became key/value pairs."""

    class Mapping:
        def __init__(self):
            self.d = {"ab": 1, "cd": 2}

        def keys(self):
            return self.d.keys()

        def __getitem__(self, k):
            return self.d[k]

        def __iter__(self):
            return iter(self.d)

    m = Mapping()

    def f(x):
        return x + len(dict(m)), dict(m)

    x = torch.ones(1)
    assert thunder.jit(f)(x)[1] == f(x)[1] == {"ab": 1, "cd": 2}


def test_frozen_dataclass_made_inside_the_function():
    # its __init__ assigns with object.__setattr__, past the frozen __setattr__ that raises
    @dataclasses.dataclass(frozen=True)
    class Options:
        scale: int
        shift: float = 2.0

    def f(x):
        o = Options(3)
        with_shift = dataclasses.replace(o, shift=0.5)
        return x * o.scale + with_shift.shift

    x = torch.ones(2)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


class _Scale:
    """An object that knows how to multiply and add a tensor (its reflected operators) and compares
    equal to anything."""

    def __init__(self, s):
        self.s = s

    def __rmul__(self, x):
        return x * self.s

    def __radd__(self, x):
        return x + self.s

    def __eq__(self, other):
        return "scale-eq"

    __hash__ = None


def _compares_with_none_and_strings(x):
    return x.sum() == None, x != None, None == x, None != x, x == "a", x != "a", x == [1, 2, 3]  # noqa: E711


def _operators_with_other_objects(x):
    s = _Scale(3.0)
    return x * s, x + s, x == s


def _operators_with_numpy_scalars(x):
    return x * np.int64(2), x + np.float32(0.5), x == np.bool_(True), x < np.float64(0.0)


@pytest.mark.parametrize(
    "fn", [_compares_with_none_and_strings, _operators_with_other_objects, _operators_with_numpy_scalars]
)
def test_an_operand_torch_does_not_take_goes_to_pythons_protocol_as_in_eager(fn):
    """``x.sum() == None`` is False in eager (the tensor's ``__eq__`` gives NotImplemented, Python compares
    identities); the trace raised "ltorch.eq: expected b to be a tensor or a number" and ``None != x`` stopped the
    interpreter. An object with ``__rmul__``/``__radd__``/``__eq__`` gets the call."""
    x = torch.tensor([-1.0, 0.5, 2.0])
    expected = fn(x)
    jf = thunder.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no eager run in place of the trace
        for _ in range(2):
            got = jf(x)
            assert [type(v) for v in got] == [type(v) for v in expected]
            for g, e in zip(got, expected):
                if isinstance(e, torch.Tensor):
                    torch.testing.assert_close(g, e, rtol=0, atol=0)
                else:
                    assert g == e
    assert thunder.cache_misses(jf) == 1


def test_an_operand_torch_does_not_take_is_eagers_type_error():
    def f(x):
        return x + None

    with pytest.raises(TypeError, match="unsupported operand type"):
        f(torch.ones(2))
    with pytest.raises(TypeError, match="unsupported operand type"):
        thunder.jit(f)(torch.ones(2))
