"""Outside values the tracer must see through (tensors held by partials, defaults and methods; numpy values;
defaultdicts), and errors that name the problem and the user's line, compared with eager PyTorch."""

from __future__ import annotations

import collections
import functools

import numpy as np
import pytest
import torch

import thunder
from thunder.core.errors import ThunderError


def _same(a, b):
    assert type(a) is type(b)
    if isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape and a.requires_grad == b.requires_grad
        torch.testing.assert_close(a, b)
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _same(a[k], b[k])
    else:
        assert a == b


# --- 1. tensors held by partials, defaults and bound methods: inputs, not constants -----------------------------

PARTIAL_KEYWORD = torch.tensor(2.0)
BY_KEYWORD = functools.partial(torch.mul, other=PARTIAL_KEYWORD)
PARTIAL_ARG = torch.tensor([1.0, 2.0, 3.0])
BY_ARG = functools.partial(torch.add, PARTIAL_ARG)


def calls_keyword_partial(x):
    return BY_KEYWORD(x)


def calls_positional_partial(x):
    return BY_ARG(x)


@pytest.mark.parametrize(
    "fn, held", [(calls_keyword_partial, PARTIAL_KEYWORD), (calls_positional_partial, PARTIAL_ARG)], ids=["keywords", "args"]
)
def test_tensor_in_partial_is_an_input(fn, held):
    x = torch.randn(3)
    jfn = thunder.jit(fn)
    _same(jfn(x), fn(x))
    with torch.no_grad():
        held.add_(1.5)  # changed in place between calls: the next call sees it
    _same(jfn(x), fn(x))
    assert thunder.cache_misses(jfn) == 1


def test_tensor_in_partial_argument():
    x = torch.randn(3)
    p = functools.partial(torch.mul, other=torch.ones(3))
    jfn = thunder.jit(lambda x, p: p(x))
    _same(jfn(x, p), p(x))
    p.keywords["other"].mul_(3)
    _same(jfn(x, p), p(x))


DEFAULT = torch.tensor(3.0)
KWDEFAULT = torch.tensor([0.5, 1.0, 2.0])


def with_default(x, y=DEFAULT):
    return x * y


def with_kwdefault(x, *, y=KWDEFAULT):
    return x + y


@pytest.mark.parametrize("callee, held", [(with_default, DEFAULT), (with_kwdefault, KWDEFAULT)], ids=["defaults", "kwdefaults"])
def test_tensor_default_is_an_input(callee, held):
    x = torch.randn(3)

    def fn(x):
        return callee(x)

    jfn = thunder.jit(fn)
    _same(jfn(x), fn(x))
    held.add_(1)
    _same(jfn(x), fn(x))
    assert thunder.cache_misses(jfn) == 1


def test_tensor_default_gets_its_gradient():
    w = torch.tensor(2.0, requires_grad=True)

    def loss(x, w=w):
        return (x * w).sum()

    x = torch.randn(3)
    thunder.jit(lambda x: loss(x))(x).backward()
    torch.testing.assert_close(w.grad, x.sum())


def test_list_default_changed_by_the_program_as_in_eager():
    def run():
        def callee(x, seen=[]):  # noqa: B006 - the mutable default is the point
            seen.append(1)
            return x * len(seen)

        return callee

    eager, traced = run(), run()
    jfn = thunder.jit(lambda x: traced(x))
    x = torch.randn(3)
    for _ in range(3):
        _same(jfn(x), eager(x))
    assert traced.__defaults__[0] == eager.__defaults__[0] == [1, 1, 1]


class Scaler:
    def __init__(self):
        self.w = torch.tensor(4.0)

    def scale(self, x, b=torch.tensor(1.0)):  # noqa: B008
        return x * self.w + b


SCALER = Scaler()
BOUND = SCALER.scale
TENSOR = torch.ones(3)
TENSOR_ADD = TENSOR.add


def test_bound_method_attributes_and_defaults_are_inputs():
    x = torch.randn(3)
    fn = lambda x: BOUND(x)  # noqa: E731
    jfn = thunder.jit(fn)
    _same(jfn(x), fn(x))
    SCALER.w.add_(1)
    Scaler.scale.__defaults__[0].add_(1)
    _same(jfn(x), fn(x))
    assert thunder.cache_misses(jfn) == 1


def test_method_of_outside_tensor_is_an_input():
    x = torch.randn(3)
    fn = lambda x: TENSOR_ADD(x)  # noqa: E731
    jfn = thunder.jit(fn)
    _same(jfn(x), fn(x))
    TENSOR.mul_(3)
    _same(jfn(x), fn(x))


# --- 2. numpy values ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x * np.finfo(np.float32).eps,
        lambda x: x.clamp(min=np.finfo(np.float32).tiny),
        lambda x: x.half() * np.float32(3),
        lambda x: np.float32(2) * x,
        lambda x: x + np.iinfo(np.int32).max,
        lambda x: x.long() + np.int8(3),
        lambda x: x * np.bool_(True),
        lambda x: x.reshape(np.int64(3)),
        lambda x: (x * 2, np.float32(0.1) * 3),
    ],
)
def test_numpy_scalars_as_in_eager(fn):
    x = torch.randn(3)
    _same(thunder.jit(fn, sharp_edges="error")(x), fn(x))


def test_numpy_array_of_a_traced_tensor_has_its_values():
    def fn(x):
        return np.asarray(x * 2), np.array(x, dtype=np.float64)

    jfn = thunder.jit(fn)
    for _ in range(2):  # each call's values, not an array of proxies
        x = torch.randn(3)
        for a, e in zip(jfn(x), fn(x)):
            assert type(a) is np.ndarray and a.dtype == e.dtype
            np.testing.assert_allclose(a, e)


# --- 3. nn.Parameter made inside the function -----------------------------------------------------------------


# The first call that makes one runs eagerly, as a one-time setup (Note [Parameters made by the program]); the next
# that makes one again is refused.
def test_parameter_inside_the_function_is_refused_clearly():
    def fn(x):
        return torch.nn.Parameter(x * 2)

    jf = thunder.jit(fn)
    assert type(jf(torch.randn(3))) is torch.nn.Parameter
    with pytest.raises(ThunderError, match=r"Parameter\(\.\.\.\) makes a new parameter.*test_tracing_errors\.py:\d+ in .*fn"):
        jf(torch.randn(3))


def test_module_built_inside_the_function_is_refused_clearly():
    def fn(x):
        return torch.nn.Linear(3, 3)(x)

    jf = thunder.jit(fn)
    jf(torch.randn(3))
    with pytest.raises(ThunderError, match=r"makes a new parameter.*test_tracing_errors\.py:\d+ in .*fn"):
        jf(torch.randn(3))


def test_changing_torch_defaults_inside_the_function_is_refused_clearly():
    # ``torch.set_default_dtype(torch.float64)`` inside changed the default while tracing only: the ``torch.ones(2)``
    # after it was float32 (the caller's default) where eager's is float64, and a cached call left the default as
    # it was, where eager changes it.
    def fn(x):
        torch.set_default_dtype(torch.float64)
        return x + torch.ones(2)

    with pytest.raises(ThunderError, match=r"torch.set_default_dtype inside the jitted function.*test_tracing_errors"):
        thunder.jit(fn)(torch.randn(2))
    assert torch.get_default_dtype() is torch.float32


# --- 4. defaultdicts ------------------------------------------------------------------------------------------


def test_returned_defaultdict():
    def fn(x):
        return collections.defaultdict(int, {"a": x * 2})

    x = torch.randn(3)
    out = thunder.jit(fn)(x)
    _same(out, fn(x))
    assert out.default_factory is int


def test_own_defaultdict_with_a_traced_factory():
    def fn(x):
        d = collections.defaultdict(lambda: torch.ones(3))
        d["a"] = d["a"] + x
        return d["a"] * d["b"]

    x = torch.randn(3)
    _same(thunder.jit(fn)(x), fn(x))


def _counting():
    counts = collections.defaultdict(int)
    lists = collections.defaultdict(list)
    stored = collections.defaultdict(list)

    def fn(x):
        counts["calls"] += 1
        lists["seen"].append(x * 2)
        stored["last"] = x
        return x + counts["calls"], counts["never_set"]

    return counts, lists, stored, fn


def test_outside_defaultdict_writes_and_missing_keys_as_in_eager():
    eager, traced = _counting(), _counting()
    jfn = thunder.jit(traced[-1])
    x = torch.randn(3)
    for _ in range(3):
        _same(jfn(x), eager[-1](x))
        for e, t in zip(eager[:-1], traced[:-1]):
            assert type(t) is collections.defaultdict and t.default_factory is e.default_factory
            _same(dict(t), dict(e))


def test_defaultdict_argument_as_in_eager():
    def fn(x, d):
        d["n"] += 1
        return x * d["n"]

    x, de, dt = torch.randn(3), collections.defaultdict(int), collections.defaultdict(int)
    jfn = thunder.jit(fn)
    for _ in range(2):
        _same(jfn(x, dt), fn(x, de))
        assert dict(dt) == dict(de)


# --- 5. errors name the user's line ---------------------------------------------------------------------------


class _Subclass(torch.Tensor):
    pass


def _adds_one(x):
    return x + 1


def test_tensor_subclass_argument_error_names_the_function():
    x = torch.randn(3).as_subclass(_Subclass)
    with pytest.raises(ThunderError, match=r"input x \(an argument of .*test_tracing_errors\.py:\d+ in _adds_one"):
        thunder.jit(_adds_one)(x)


SUBCLASS_GLOBAL = torch.randn(3).as_subclass(_Subclass)


def test_tensor_subclass_global_error_names_the_line():
    def fn(x):
        return x + SUBCLASS_GLOBAL

    with pytest.raises(ThunderError, match=r"input SUBCLASS_GLOBAL \(read at .*test_tracing_errors\.py:\d+ in .*fn"):
        thunder.jit(fn)(torch.randn(3))


def test_returned_generator_error_names_the_line():
    def fn(x):
        g = (x * i for i in range(3))
        next(g)  # (one not started yet is made again by each call)
        return g

    with pytest.raises(ThunderError, match=r"returned a generator \(.*genexpr.* at .*test_tracing_errors\.py:\d+"):
        thunder.jit(fn)(torch.randn(3))
