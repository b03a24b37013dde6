"""``warnings.warn`` and writes to ``sys.stderr`` in a jitted function happen on every call, as eager's do (Note
[Warnings] in ``thunder.core.special_calls``). Before, a warning was issued once, at tracing, and a function that set
its own filters (``with warnings.catch_warnings(): warnings.simplefilter("ignore")``) left an "ignore everything"
filter in the caller's list after its first call."""

from __future__ import annotations

import contextlib
import io
import sys
import warnings

import pytest
import torch

import thunder


def _helper(x):
    warnings.warn("from a helper", FutureWarning, stacklevel=2)
    return x


def two_warnings(x):
    y = _helper(x)  # the helper's warning is attributed to this line, as eager's
    warnings.warn("direct", stacklevel=1)
    return y + 1


def _issued(fn, calls: int, action: str) -> list[tuple]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter(action)
        for _ in range(calls):
            fn(torch.ones(1))
    return [(str(w.message), w.category, w.filename, w.lineno) for w in caught]


@pytest.mark.parametrize("action", ["always", "default", "ignore"])
def test_every_call_warns_as_eager_under_the_callers_filters(action):
    expected = _issued(two_warnings, 3, action)
    assert _issued(thunder.jit(two_warnings), 3, action) == expected
    assert len(expected) == {"always": 6, "default": 2, "ignore": 0}[action]
    assert expected[:1] == [] or expected[0][2:] == (__file__, two_warnings.__code__.co_firstlineno + 1)


def test_a_warning_attributed_past_the_jitted_function_names_its_caller():
    def top(x):
        warnings.warn("to my caller", stacklevel=2)
        return x

    (issued,) = _issued(thunder.jit(top), 1, "always")
    assert [issued] == _issued(top, 1, "always")  # the line in ``_issued`` that called it


def quiet(x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        warnings.warn("hidden", stacklevel=1)
    warnings.warn("shown", stacklevel=1)
    return x + 1


def test_the_programs_own_filters_act_and_leave_the_callers_alone():
    jf = thunder.jit(quiet)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        before = list(warnings.filters)
        assert _issued(jf, 2, "always") == _issued(quiet, 2, "always")
        jf(torch.ones(1))
        jf(torch.ones(1))
        assert list(warnings.filters) == before  # no "ignore" left behind
    assert [w[0] for w in _issued(jf, 2, "always")] == ["shown", "shown"]


def recorded(x):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.warn("one", stacklevel=1)
        warnings.warn("two", stacklevel=1)
    return x + len(caught)


def turned_into_an_error(x):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            warnings.warn("boom", stacklevel=1)
        except UserWarning:
            return x - 1
    return x + 1


@pytest.mark.parametrize("fn", [recorded, turned_into_an_error])
def test_the_programs_own_recorder_and_errors(fn):
    jf = thunder.jit(fn)
    with warnings.catch_warnings(record=True) as outside:
        warnings.simplefilter("always")
        for _ in range(2):
            torch.testing.assert_close(jf(torch.ones(1)), fn(torch.ones(1)))
    assert outside == []


def test_stderr_writes_happen_on_every_call_to_the_stream_of_the_time():
    def f(x):
        sys.stderr.write("w\n")
        print("p", file=sys.stderr)
        print("o", file=sys.stdout)
        return x

    jf = thunder.jit(f)
    jf(torch.ones(1))
    for _ in range(2):
        err, out = io.StringIO(), io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            jf(torch.ones(1))
            jf(torch.ones(1))
        assert (err.getvalue(), out.getvalue()) == ("w\np\n" * 2, "o\n" * 2)
