"""What a trace read from outside the program's inputs and cannot hold as a constant: random numbers, clocks and
environment variables are read again by every call (or refused clearly), as eager reads them. See
``test_guards.py`` for the checks on everything else a trace relied on."""

from __future__ import annotations

import os

import pytest
import torch

import thunder
from thunder.core.errors import ThunderRuntimeError

from .test_guards import X, _same_as_eager

# --- random numbers and clocks -------------------------------------------------------------------------------


def test_random_number_drawn_on_every_call():
    import random

    f = lambda t: t * random.random()  # noqa: E731
    jf = thunder.jit(f)
    random.seed(1)
    got = [jf(X) for _ in range(3)]
    random.seed(1)
    expected = [f(X) for _ in range(3)]
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    assert thunder.cache_misses(jf) == 1


def test_branch_on_a_random_number_is_a_clear_error():
    import random

    def f(t):
        if random.random() > 0.5:
            return t + 1
        return t - 1

    with pytest.raises(ThunderRuntimeError, match=r"needs the Python value of random\.random\(\)"):
        thunder.jit(f)(X)


def test_clock_read_on_every_call():
    import time

    f = lambda t: t + (time.perf_counter_ns() % 1000)  # noqa: E731
    jf = thunder.jit(f)
    values = {float(jf(torch.zeros(1))[0]) for _ in range(20)}
    assert len(values) > 1
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize(
    "make",
    [
        lambda: (lambda t: t * __import__("numpy").random.rand()),
        lambda: (lambda t: t + __import__("os").urandom(1)[0]),
    ],
    ids=["numpy.random", "os.urandom"],
)
def test_other_sources_of_randomness_are_not_frozen(make):
    f = make()
    try:
        jf = thunder.jit(f)
        values = {float(jf(torch.ones(1))[0]) for _ in range(8)}
    except ThunderRuntimeError as e:  # a clear refusal is fine; a frozen value is not
        assert "every call" in str(e) or "only numbers" in str(e)
        return
    assert len(values) > 1


def test_datetime_now_is_a_clear_error():
    import datetime

    with pytest.raises(ThunderRuntimeError, match=r"datetime\.datetime\.now\(\) returned a datetime"):
        thunder.jit(lambda t: t + datetime.datetime.now().microsecond)(X)


SCALE = 2.0


def draws_and_scales(t):
    import random

    return t * random.random() * SCALE


def test_a_recompile_draws_once_like_eager():
    import random

    global SCALE
    jf = thunder.jit(draws_and_scales)
    try:
        for k in (2.0, 3.0, 2.0, 4.0):  # each new value recompiles or switches entries
            SCALE = k
            random.seed(1)
            expected = draws_and_scales(X)
            random.seed(1)
            torch.testing.assert_close(jf(X), expected)
            after_call = random.random()
            random.seed(1)
            random.random()
            assert after_call == random.random()  # the call drew exactly once
    finally:
        SCALE = 2.0


@pytest.mark.parametrize(
    "f",
    [lambda t: t * __import__("random").randint(0, 3), lambda t: t * __import__("random").uniform(1.0, 2.0)],
    ids=["randint", "uniform"],
)
def test_python_level_random_methods_are_drawn_per_call(f):
    import random

    jf = thunder.jit(f)
    random.seed(3)
    got = [jf(X) for _ in range(6)]
    random.seed(3)
    for g in got:
        torch.testing.assert_close(g, f(X))


@pytest.mark.parametrize(
    "f, message",
    [
        (lambda t: (t, __import__("random").choice(["a", "b"])), r"random\.choice\(\) returned a str"),
        (lambda t: (__import__("random").shuffle([1, 2, 3]), t)[1], r"random\.shuffle\(\) changes a list in place"),
    ],
    ids=["choice-of-strings", "shuffle"],
)
def test_random_calls_thunder_cannot_make_per_call_are_clear_errors(f, message):
    with pytest.raises(ThunderRuntimeError, match=message):
        thunder.jit(f)(X)


# --- environment variables (Note [Environment variables] in thunder.core.special_calls) ------------------------


@pytest.fixture
def environ_var(monkeypatch):
    name = "THUNDER_TEST_GUARDS_VAR"
    monkeypatch.delenv(name, raising=False)
    return name


def _reads_with_get(t, name):
    return t + 1 if os.environ.get(name) == "1" else t - 1


def _reads_with_getitem(t, name):
    try:
        return t + float(os.environ[name])
    except KeyError:
        return t - 5


def _reads_with_in_and_getenv(t, name):
    return t + (name in os.environ) + (os.getenv(name, "0") == "1")


def _reads_all_names(t, name):
    return t + sum(1 for k in os.environ if k == name) + len(os.environ) * 0


@pytest.mark.parametrize("f", [_reads_with_get, _reads_with_getitem, _reads_with_in_and_getenv, _reads_all_names])
def test_environment_variable_changed_between_calls(f, environ_var, monkeypatch):
    jf = thunder.jit(f)
    for value in (None, "1", "2", None, "1"):
        if value is None:
            monkeypatch.delenv(environ_var, raising=False)
        else:
            monkeypatch.setenv(environ_var, value)
        _same_as_eager(jf, f, X, environ_var)


def test_setting_an_environment_variable_inside_is_a_clear_error(environ_var):
    def f(t):
        os.environ[environ_var] = "1"
        return t

    with pytest.raises(ThunderRuntimeError, match="sets the environment variable .* does not replay"):
        thunder.jit(f)(X)
    assert environ_var not in os.environ
