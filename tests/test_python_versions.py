"""Programs whose bytecode differs between the supported CPythons (3.11, 3.12, 3.13), jitted and checked against
eager on whichever one runs the tests: calls (the NULL's place on the stack, keyword calls), fused and new
opcodes, closures and defaults, loops that run to their end, f-strings, ``locals()``, ``functools`` helpers."""

from __future__ import annotations

import contextlib
import dis
import functools
import io
import pickle
import sys
import types

import pytest
import torch

import thunder


def _check(fn, *args):
    expected = fn(*args)
    actual = thunder.jit(fn)(*args)
    torch.testing.assert_close(actual, expected)
    return actual


# -- the silent wrong results 3.13 gave when the NULL of a call was passed as an argument ----------------------------


def test_a_call_in_a_try_block_takes_the_branch_eager_takes():
    def f(x):
        try:
            return torch.relu(x)
        except TypeError:
            return x

    x = torch.tensor([-1.0, 2.0])
    torch.testing.assert_close(thunder.jit(f)(x), torch.tensor([0.0, 2.0]))


def test_a_native_call_gets_exactly_its_arguments():
    f = lambda x, n: x + len(pickle.dumps(n))
    _check(f, torch.ones(2), 3)


def test_a_callable_held_in_a_local_prints_only_its_arguments():
    def f(x):
        p = print
        p("hi", x.shape[0])
        return x + 1

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        thunder.jit(f)(torch.ones(2))
    assert out.getvalue() == "hi 2\n"


# -- calls in every form ----------------------------------------------------------------------------------------------


class _Scaler:
    def __init__(self, k):
        self.k = k

    def scale(self, x, *, by=1.0):
        return x * self.k * by

    @staticmethod
    def shift(x, d=1.0):
        return x + d

    @classmethod
    def make(cls, k):
        return cls(k)


def test_method_static_class_and_keyword_calls():
    def f(x, s):
        y = s.scale(x, by=2.0)
        y = _Scaler.shift(y, d=0.5)
        z = _Scaler.make(3).scale(y)
        args, kwargs = (z,), {"by": 0.25}
        return s.scale(*args, **kwargs) + torch.add(x, y, alpha=2)

    _check(f, torch.randn(3), _Scaler(2.0))


def test_super_calls_and_modules():
    class Base(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.fc(x).relu()

    class Child(Base):
        def forward(self, x):
            return super().forward(x) * 2

    m = Child()
    x = torch.randn(2, 4)
    torch.testing.assert_close(thunder.jit(m)(x), m(x))


def test_closures_lambdas_and_defaults():
    def f(x, n):
        scale = 2.0

        def inner(y, *, bias=n):
            return y * scale + bias

        g = lambda y, k=3: inner(y) * k
        return g(x) + (lambda: scale)()

    _check(f, torch.randn(3), 1.5)


def test_partialmethod_and_partial():
    class A:
        def combine(self, x, k):
            return x * k

        triple = functools.partialmethod(combine, k=3)

    def f(x):
        return A().triple(x) + functools.partial(torch.mul, other=2)(x)

    _check(f, torch.randn(3))


# -- control flow and new opcodes -------------------------------------------------------------------------------------


def test_loops_that_run_to_their_end_and_break():
    def f(x, xs):
        for t in xs:
            x = x + t
        for i in range(3):
            if i == 1:
                break
            x = x * 2
        total = sum(t.sum() for t in xs)
        squares = [t * t for t in xs if t.numel()]
        return x + total + squares[-1]

    _check(f, torch.randn(3), [torch.randn(3) for _ in range(3)])


def test_swaps_fused_loads_and_comparisons():
    def f(a, b, n):
        a, b = b, a
        c = a if n < 3 else b
        ok = not (n == 2)
        return (a - b) * c + (1 if ok else 0) + (n is None)

    _check(f, torch.randn(3), torch.randn(3), 2)


def test_fstrings_with_conversions_and_specs():
    def f(x, n, w):
        label = f"{n}|{n!r}|{n:>{w}}|{x.shape[0]:03d}|{'s'!a}"
        return x + len(label), label

    x = torch.randn(3)
    out, label = thunder.jit(f)(x, 7, 4)
    assert label == f(x, 7, 4)[1]


def test_locals_follows_the_running_version():
    def f(x):
        a = 1
        first = locals()
        b = 2  # noqa: F841
        second = locals()
        # From 3.13 (PEP 667) each call makes a new snapshot; before, one dict per frame refreshed by each call.
        return x + len(first) + len(second) + (first is second)

    _check(f, torch.ones(2))


def test_match_statements_and_with_blocks():
    def f(x, spec):
        match spec:
            case {"op": "scale", "k": k}:
                y = x * k
            case [a, b]:
                y = x + a - b
            case _:
                y = x
        with torch.no_grad():
            z = y * 2
        return y + z

    _check(f, torch.randn(3), {"op": "scale", "k": 2.0})
    _check(f, torch.randn(3), [1.0, 0.5])


def test_the_running_versions_opcodes_are_all_handled_or_explicitly_refused():
    from thunder.core.interpreter import HANDLERS, UNSUPPORTED

    assert [n for n in dis.opmap if n not in HANDLERS and n not in UNSUPPORTED] == []
    new_in_313 = {"LOAD_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST", "STORE_FAST_LOAD_FAST", "TO_BOOL", "CALL_KW",
                  "FORMAT_SIMPLE", "FORMAT_WITH_SPEC", "CONVERT_VALUE", "SET_FUNCTION_ATTRIBUTE"}  # fmt: skip
    if sys.version_info >= (3, 13):
        assert new_in_313 <= set(HANDLERS)
    else:
        assert not new_in_313 & set(HANDLERS)


@pytest.mark.parametrize("version", [(3, 10), (3, 14)])
def test_versions_outside_the_supported_ones_are_refused_with_a_clear_error(monkeypatch, version):
    from thunder.core.interpreter import InterpreterError, versions

    monkeypatch.setattr(versions, "running_python", lambda: version)
    with pytest.raises(InterpreterError, match=rf"Python {version[0]}\.{version[1]}"):
        thunder.jit(torch.nn.Linear(2, 2))


_TYPE_PARAMETERS = '''
def f(x):
    def ident[T: (int, float)](v: T) -> T:
        return v

    class Box[T, *Ts, **P]:
        def __init__(self, v: T):
            self.v = v

        def get(self) -> T:
            return self.v * 2

    type Alias[K] = dict[K, Undefined]  # lazy: never evaluated
    bound = ident.__type_params__[0]
    return x + ident(1.5) + Box(x).get(), Alias.__name__, [p.__name__ for p in Box.__type_params__], bound.__constraints__
'''


# -- attribute lookups that changed with the version -----------------------------------------------------------------


@pytest.mark.parametrize("value", [2.5, 3], ids=["float", "int"])
def test_a_symbolic_numbers_own_attributes_stay_hidden_as_in_eager(value):
    """From 3.13 float has no ``__getattribute__`` of its own (object's is found), so the property ``SymFloat.name``
    was interpreted and returned as it was: ``hasattr(v, "name")`` was True where eager's float has no such
    attribute."""

    def f(x, v):
        try:
            read = v.name
        except AttributeError as e:
            read = str(e)
        return x + 1, hasattr(v, "name"), getattr(v, "name", "no name"), read

    x = torch.ones(2)
    expected = f(x, value)
    actual = thunder.jit(f, cache="symbolic values")(x, value)
    torch.testing.assert_close(actual[0], expected[0])
    assert actual[1:] == expected[1:]


class _Tagged(float):
    pass


_TAGGED = _Tagged(1.0)
_ERROR = ValueError("outside")
_NAMESPACE = types.SimpleNamespace(n=0)


def test_attribute_slots_called_by_name_act_as_on_313(monkeypatch):
    """Before 3.13 a module's, an exception's and a SimpleNamespace's ``__setattr__`` and a float's ``__getattribute__``
    were wrappers of their own (3.13 finds object's): called by name, they ran natively, so a later read in the program
    gave the value of the traced call and a cached call read a stale attribute (Note [Generic attribute slots])."""
    module = types.ModuleType("_thunder_test_settings")
    module.v = 0
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(_ERROR, "n", 0, raising=False)
    monkeypatch.setattr(_NAMESPACE, "n", 0)
    monkeypatch.setattr(_TAGGED, "k", 2.0, raising=False)

    def f(x):
        module.__setattr__("v", module.v + 1)
        _ERROR.__setattr__("n", _ERROR.n + 1)
        _NAMESPACE.__setattr__("n", _NAMESPACE.n + 1)
        return x * module.v + _ERROR.n + _NAMESPACE.n, _TAGGED.__getattribute__("k")

    def run(fn):
        module.v = _ERROR.n = _NAMESPACE.n = 0
        _TAGGED.k = 2.0
        out = [fn(torch.ones(2)) for _ in range(2)]
        _TAGGED.k = 3.0
        out.append(fn(torch.ones(2)))
        return out, (module.v, _ERROR.n, _NAMESPACE.n)

    expected, expected_state = run(f)
    actual, actual_state = run(thunder.jit(f))
    assert actual_state == expected_state
    for (a, ak), (e, ek) in zip(actual, expected):
        torch.testing.assert_close(a, e)
        assert ak == ek


# -- sum: floats compensated from 3.12 (Note [sum of symbolic numbers]) ---------------------------------------------


def _sums(x, *vals):
    return x, sum(vals), sum(v for v in vals), sum(vals, 0.5), sum(iter(vals), 1)


@pytest.mark.parametrize(
    "calls",
    [
        [[0.1] * 10, [0.7] * 10],  # 3.12+: 1.0 compensated, 0.9999999999999999 added plainly
        [[1e16, 1.0, -1e16, 0.25], [1e16, 3.0, -1e16, 0.5]],
        [[0.5, 2, 0.1, True], [1.5, 3, 0.2, False]],  # ints and bools join a float sum as doubles
        [[3, 0.1, 2**70, 0.2], [4, 0.3, 2**70, 0.4]],  # past a C long: plain additions from there
        [[float("inf"), 0.1, 1.0], [float("inf"), 0.2, 2.0]],  # an infinite sum is not compensated into a nan
    ],
)
def test_a_sum_of_symbolic_numbers_is_eagers_sum(calls):
    """A SymFloat is no exact float and a SymInt no exact int, so native ``sum`` added them with ``+``: from 3.12 the
    float sum was not compensated (one ulp from eager's), and an int added to a float sum was read natively."""
    jf = thunder.jit(_sums, cache="symbolic values")
    x = torch.ones(1)
    for vals in calls:
        assert jf(x, *vals)[1:] == _sums(x, *vals)[1:]


def test_an_int_added_to_a_float_sum_stays_symbolic():
    def f(x, n):
        return x * sum([0.5, n]), sum([n], 0.25)

    jf = thunder.jit(f, cache="symbolic values")
    x = torch.ones(2)
    for n in (1, 2, 3):
        actual, expected = jf(x, n), f(x, n)
        torch.testing.assert_close(actual[0], expected[0])
        assert actual[1] == expected[1]
    assert thunder.cache_misses(jf) == 1


@pytest.mark.skipif(sys.version_info < (3, 12), reason="type parameter syntax (PEP 695) is new in 3.12")
def test_type_parameters_run_as_cpython_runs_them():
    namespace: dict = {}
    exec(compile(_TYPE_PARAMETERS, "<pep695>", "exec"), namespace)
    f = namespace["f"]
    x = torch.randn(3)
    out, *rest = thunder.jit(f)(x)
    expected, *expected_rest = f(x)
    torch.testing.assert_close(out, expected)
    assert rest == expected_rest


def test_a_warning_of_a_script_issues_no_warning_of_its_own():
    """3.12+: ``warnings.warn_explicit`` given the globals of a module without ``__spec__.loader`` (a script's) warns
    "Module globals is missing a __spec__.loader"; eager's ``warnings.warn`` passes no globals, so neither does the
    replay."""
    import importlib.machinery
    import warnings

    namespace = {"__name__": "__main__", "__spec__": None, "warnings": warnings,
                 "__loader__": importlib.machinery.SourceFileLoader("__main__", __file__)}  # fmt: skip
    exec("def f(x):\n    warnings.warn('careful')\n    return x + 1", namespace)

    def collect(fn):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            fn(torch.ones(2))
        return [(w.category, str(w.message)) for w in caught]

    assert collect(thunder.jit(namespace["f"])) == collect(namespace["f"]) == [(UserWarning, "careful")]


@pytest.mark.parametrize(
    "table", ["_DEPRECATE_KWARG_DIGEST", "_MODEL_OUTPUT_DIGEST", "_KERNELIZED_DIGEST", "_MASK_SIZES_DIGEST",
              "_CONFIG_GETATTRIBUTE_DIGEST"],
)  # fmt: skip
def test_every_library_wrapper_is_recognised_on_the_running_version(table):
    """The wrappers of ``thunder.core.library_wrappers`` are recognised by a digest of their bytecode, one per
    Python: three had 3.11's only, so on 3.12 and 3.13 transformers' ``deprecate_kwarg`` wrapper, ``ModelOutput``
    construction and the kernels hub's routing were interpreted (slower tracing, more prologue checks) where 3.11
    ran them as the notes say. ``tests/test_generation.py`` checks that the installed transformers' code is the one
    each digest names."""
    from thunder.core import library_wrappers

    assert sys.version_info[:2] in getattr(library_wrappers, table)
