"""Threads: tracing state is per thread, and one jitted function serves concurrent calls."""

from __future__ import annotations

import sys
import threading

import pytest
import torch

import thunder
from thunder.core import dtypes
from thunder.core.proxies import make_proxy_name
from thunder.core.symbolic import _record, recording_constraints
from thunder.core.trace import TraceCtx, tracectx
from thunder.core.tracectx import current_source_location, get_tracectx, source_location_provider

N_THREADS = 8
CALLS_PER_THREAD = 1000


@pytest.fixture
def switch_often():
    """Threads switch every few bytecodes, so races show up in a short run."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


def in_threads(fn, n: int = N_THREADS) -> list:
    """Runs ``fn(i)`` in ``n`` threads started together; returns results, re-raising the first error."""
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list = []

    def run(i):
        barrier.wait()
        try:
            results[i] = fn(i)
        except BaseException as e:  # noqa: B036 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def in_other_thread(fn):
    return in_threads(lambda _: fn(), n=1)[0]


def test_current_trace_is_not_seen_by_other_threads():
    with tracectx(TraceCtx(name="mine")):
        assert in_other_thread(get_tracectx) is None
        assert get_tracectx().name == "mine"


def test_source_location_provider_is_per_thread():
    with source_location_provider(lambda: "here"):
        assert in_other_thread(current_source_location) is None
        assert current_source_location() == "here"


def test_symbolic_constraints_are_recorded_per_thread():
    with recording_constraints() as mine:
        in_other_thread(lambda: _record("a_0 > 1"))
        assert mine == {}
        _record("b_0 == 2")
    assert list(mine) == ["b_0 == 2"]


def test_default_dtype_flag_is_per_thread():
    dtypes.default_dtype_was_read.set(False)
    in_other_thread(dtypes.default_dtype)
    assert dtypes.default_dtype_was_read.get() is False


def test_fallback_proxy_names_are_unique_across_threads(switch_often):
    names = in_threads(lambda _: [make_proxy_name() for _ in range(2000)])
    flat = [n for chunk in names for n in chunk]
    assert len(set(flat)) == len(flat)


def f(x, y):
    return (x * 2 + y).sin()


# A mix of shapes every thread shares (cached after their first use) and shapes only one
# thread uses (new entries compiled while other threads run cached ones).
SHARED_SHAPES = [(2, 4), (3, 4), (5, 4), (1, 4)]


def shape_for(thread: int, call: int) -> tuple[int, int]:
    if call % 50 == 7:
        return (6 + thread * 4 + call // 250, 4)  # new for this thread: 4 per thread
    return SHARED_SHAPES[(call * (thread + 1)) % len(SHARED_SHAPES)]


@pytest.mark.filterwarnings("ignore::thunder.RecompileWarning")
def test_concurrent_calls_of_one_jitted_function_are_correct_and_counted(switch_often):
    jf = thunder.jit(f, cache="constant values")

    def work(thread):
        g = torch.Generator().manual_seed(thread)
        wrong = 0
        for call in range(CALLS_PER_THREAD):
            x, y = torch.randn(shape_for(thread, call), generator=g), torch.randn(shape_for(thread, call), generator=g)
            wrong += not torch.allclose(jf(x, y), f(x, y))
        return wrong

    assert sum(in_threads(work)) == 0
    calls = N_THREADS * CALLS_PER_THREAD
    assert thunder.cache_hits(jf) + thunder.cache_misses(jf) == calls
    assert thunder.compile_stats(jf).calls == calls
    # Each distinct shape compiled once: concurrent misses on one shape wait for one compile.
    assert thunder.cache_misses(jf) == len(SHARED_SHAPES) + 4 * N_THREADS
    assert len(thunder.compile_stats(jf).entries) == thunder.cache_misses(jf)
    x = torch.randn(7, 3)
    torch.testing.assert_close(jf(x, x), f(x, x))


@pytest.mark.filterwarnings("ignore::thunder.RecompileWarning")
def test_concurrent_calls_of_one_thunder_module_are_correct_and_counted(switch_often):
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh(), torch.nn.Linear(3, 2))
    tm = thunder.jit(model, cache="constant values")

    def work(thread):
        g = torch.Generator().manual_seed(thread)
        wrong = 0
        with torch.no_grad():
            for call in range(CALLS_PER_THREAD):
                x = torch.randn(shape_for(thread, call), generator=g)
                wrong += not torch.allclose(tm(x), model(x))
        return wrong

    assert sum(in_threads(work)) == 0
    assert thunder.cache_hits(tm) + thunder.cache_misses(tm) == N_THREADS * CALLS_PER_THREAD
    assert thunder.cache_misses(tm) == len(SHARED_SHAPES) + 4 * N_THREADS
    x = torch.randn(9, 4)
    torch.testing.assert_close(tm(x), model(x))


def test_different_functions_trace_at_the_same_time(switch_often):
    """Each thread compiles its own function (symbolic values: constraints are recorded) at once."""

    def make(k):
        def g(x, n):
            return x * n + k if n > 1 else x - k

        return g

    fns = [make(k) for k in range(N_THREADS)]
    jitted = [thunder.jit(g, cache="symbolic values") for g in fns]

    def work(i):
        x = torch.randn(3, 2)
        out = [jitted[i](x, n) for n in (2, 3, 0)]
        return all(torch.allclose(o, fns[i](x, n)) for o, n in zip(out, (2, 3, 0)))

    assert all(in_threads(work))
    for j in jitted:
        assert thunder.cache_misses(j) == 2  # n > 1 and n <= 1


def test_concurrent_interpretations_leave_the_recursion_limit_as_they_found_it(switch_often):
    """The limit is process-wide: overlapping interpretations in threads must not compound its raise."""
    before = sys.getrecursionlimit()
    seen: list[int] = []

    def work(i):
        def f(x):
            seen.append(sys.getrecursionlimit())
            return x + i

        jf = thunder.jit(f, cache="no caching")
        x = torch.ones(2)
        return all(torch.equal(jf(x), x + i) for _ in range(30))

    assert all(in_threads(work))
    assert sys.getrecursionlimit() == before
    assert max(seen) <= before * 6
