"""Exceptions raised while compiled code runs name the op and the user's line; a jitted
function called inside another one is traced through."""

from __future__ import annotations

import functools
import inspect

import pytest
import torch

import thunder
from thunder.core.nested_jit import inner_jitted_lookaside
from thunder.runtime_errors import NOTE_PREFIX


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def eager_and_jitted_errors(fn, *args):
    with pytest.raises(Exception) as eager:
        fn(*args)
    with pytest.raises(Exception) as jitted:
        thunder.jit(fn)(*args)
    return eager.value, jitted.value


def flatten(x):
    y = x * 2
    return y.view(-1)


def test_view_of_a_transposed_tensor_names_the_op_and_line():
    eager, jitted = eager_and_jitted_errors(flatten, torch.randn(3, 4).t())
    assert type(jitted) is type(eager) and str(jitted) == str(eager)
    (note,) = jitted.__notes__
    assert note.startswith(f"{NOTE_PREFIX}torch.Tensor.view at {__file__}:{line_of(flatten, 'view(-1)')}")
    assert "return y.view(-1)" in note


def bump(w):
    w.add_(1)
    return w * 2


def test_in_place_op_on_a_leaf_that_requires_grad_names_the_op_and_line():
    eager, jitted = eager_and_jitted_errors(bump, torch.randn(3, requires_grad=True))
    assert type(jitted) is type(eager) and str(jitted) == str(eager)
    assert jitted.__notes__[0].startswith(f"{NOTE_PREFIX}torch.Tensor.add_ at {__file__}:{line_of(bump, 'add_')}")


def floor_div(a, b):
    return a // b


def test_integer_division_by_zero_on_a_cached_call_names_the_op_and_line():
    jf = thunder.jit(floor_div)
    a = torch.tensor([4, 6])
    torch.testing.assert_close(jf(a, torch.tensor([2, 3])), torch.tensor([2, 2]))
    with pytest.raises(RuntimeError) as eager:
        floor_div(a, torch.tensor([1, 0]))
    with pytest.raises(RuntimeError) as jitted:
        jf(a, torch.tensor([1, 0]))  # a cache hit: the hot path
    assert thunder.cache_hits(jf) == 0 and thunder.cache_misses(jf) == 1
    assert str(jitted.value) == str(eager.value)
    assert jitted.value.__notes__[0].startswith(
        f"{NOTE_PREFIX}torch.floor_divide at {__file__}:{line_of(floor_div, 'a // b')}, in floor_div"
    )


def test_the_function_still_works_after_a_runtime_error():
    jf = thunder.jit(floor_div)
    with pytest.raises(RuntimeError):
        jf(torch.tensor([1]), torch.tensor([0]))
    torch.testing.assert_close(jf(torch.tensor([9]), torch.tensor([3])), torch.tensor([3]))


class Reshaper(torch.nn.Module):
    def forward(self, x):
        return x.view(-1)


def test_runtime_error_in_a_module_names_the_module_line():
    tm = thunder.jit(torch.nn.Sequential(Reshaper()))
    with pytest.raises(RuntimeError) as info:
        tm(torch.randn(3, 4).t())
    note = info.value.__notes__[0]
    assert f"{__file__}:{line_of(Reshaper.forward, 'view(-1)')}" in note
    assert "(module 0)" in note


def test_errors_raised_while_tracing_get_no_runtime_note():
    def bad(x):
        raise KeyError("mine")

    with pytest.raises(KeyError) as info:
        thunder.jit(bad)(torch.randn(2))
    assert not any(n.startswith(NOTE_PREFIX) for n in getattr(info.value, "__notes__", ()))


# --- a jitted function calling another jitted function ---------------------------------------------


def inner(x, k=2):
    return x.sin() * k


def test_jitted_function_calling_a_jitted_function_traces_through_it():
    jinner = thunder.jit(inner)

    def outer(x):
        return jinner(x, k=3) + jinner(x)

    jouter = thunder.jit(outer)
    x = torch.randn(4)
    torch.testing.assert_close(jouter(x), inner(x, k=3) + inner(x))
    assert thunder.cache_misses(jinner) == 0  # traced into outer's trace, not compiled on its own
    assert "torch.sin" in str(thunder.last_traces(jouter)[-1])


def test_jitted_function_calling_a_thunder_module():
    model = torch.nn.Linear(4, 2)
    tm = thunder.jit(model)

    def outer(x):
        return tm(x).relu()

    x = torch.randn(3, 4)
    torch.testing.assert_close(thunder.jit(outer)(x), model(x).relu())


def test_inner_jitted_lookaside_ignores_other_callables():
    assert inner_jitted_lookaside(inner) is None
    assert inner_jitted_lookaside(torch.sin) is None
    assert inner_jitted_lookaside(thunder.jit(inner)) is not None


HISTORY: list = []
COUNTS: dict = {}


def log_then_index(x, i):
    HISTORY.append(x.sum())  # an outside list the program does not read
    COUNTS[i] = "seen"
    y = x[torch.tensor(i)]  # out of range at run time for i >= 3
    HISTORY.append("after")
    return y


def read_log_then_index(x, i):
    if len(HISTORY) > 10:  # read: the program's copy is written back whole
        HISTORY.clear()
    HISTORY.append(x * 2)
    return x[torch.tensor(i)]


@pytest.mark.parametrize("fn", [log_then_index, read_log_then_index])
def test_changes_to_outside_containers_before_an_op_that_fails_at_run_time_are_made(fn):
    # The changes were written back at the end of the computation only: a call that failed at run time (an index
    # out of range, caught by the caller) left ``HISTORY`` as it was, where eager's had grown.
    def run(f):
        HISTORY.clear()
        COUNTS.clear()
        seen = []
        for i in (1, 7, 2, 9):
            try:
                seen.append(f(torch.ones(3), i))
            except IndexError:
                seen.append("IndexError")
            seen.append([t.tolist() if isinstance(t, torch.Tensor) else t for t in HISTORY])
            seen.append(dict(COUNTS))
        return [s.tolist() if isinstance(s, torch.Tensor) else s for s in seen]

    assert run(thunder.jit(fn)) == run(fn)


def index_then_sum_iterator(x, i, it):
    _ = x[..., torch.tensor([i])]  # out of range at run time for i >= 2, before the loop
    for v in it:
        x = x + v
    return x


def pull_index_pull(x, i, it):
    x = x + next(it)
    x = x[..., torch.tensor([i])]  # out of range at run time for i >= 2, between the pulls
    for v in it:
        x = x + v
    return x


@pytest.mark.parametrize("fn", [index_then_sum_iterator, pull_index_pull])
@pytest.mark.parametrize(
    "make",
    [lambda v: iter(v), lambda v: iter(tuple(v)), lambda v: iter(range(v[0], v[0] + len(v))), lambda v: reversed(v)],
    ids=["list", "tuple", "range", "reversed"],
)
def test_an_iterator_argument_is_left_where_eager_leaves_it_by_a_call_that_fails_at_run_time(fn, make):
    # The prologue pulled every item the program takes before the computation ran: a call that failed at run time
    # (an index out of range, caught by the caller) left the iterator consumed, where eager's had not moved.
    def run(f):
        seen = []
        for i in (1, 9, 0, 5, 1):
            it = make([3, 4, 5])
            try:
                seen.append(f(torch.zeros(4, 2), i, it).tolist())
            except IndexError:
                seen.append("IndexError")
            seen.append(list(it))
        return seen

    assert run(thunder.jit(fn)) == run(fn)


def double_leaf_then_count(x, it):
    x.mul_(2)  # eager refuses an in-place change of a leaf that requires grad
    return sum(1 for _ in it)


@pytest.mark.parametrize(
    "fn, x",
    [
        (functools.partial(index_then_sum_iterator, i=9), torch.zeros(4, 2)),
        (functools.partial(pull_index_pull, i=9), torch.zeros(4, 2)),
        (double_leaf_then_count, torch.zeros(2, requires_grad=True)),
    ],
    ids=["index before the loop", "index between pulls", "leaf changed in place"],
)
@pytest.mark.parametrize(
    "make", [lambda v: (i for i in v), lambda v: map(float, v), lambda v: filter(None, v)], ids=["generator", "map", "filter"]
)
def test_an_iterator_that_cannot_be_put_back_is_left_where_eager_leaves_it_by_a_call_eager_fails(fn, x, make):
    # Tracing took the items (they cannot be put back) before the computation failed at run time: the call now
    # runs eagerly when eager would fail before the pull (Note [Iterator arguments]). (A cached trace that fails
    # at run time on other values: the test below.)
    jf = thunder.jit(fn)
    for _ in range(2):
        left = []
        for f in (fn, jf):
            it = make([3, 4, 5])
            with pytest.raises((IndexError, RuntimeError)):
                f(x, it=it)
            left.append(list(it))
        assert left[1] == left[0]


def index_by_tensor_then_sum_iterator(x, index, it):
    _ = x[..., index]  # out of range for a large index: fails at run time on a cached call, before the loop
    for v in it:
        x = x + v
    return x


def sum_iterator_then_index_by_tensor(x, index, it):
    for v in it:
        x = x + v
    return x[..., index]


@pytest.mark.parametrize(
    "make", [lambda v: (i for i in v), lambda v: map(float, v), lambda v: filter(None, v)], ids=["generator", "map", "filter"]
)
def test_a_cached_trace_that_fails_at_run_time_after_its_prologue_took_iterator_items_says_so(make):
    # The cached trace's prologue took the items (they cannot be put back) before its computation failed: the
    # caller got eager's IndexError with the iterator consumed, where eager's had not moved. Now the call runs eagerly
    # (Note [A run that fails before its effects] in thunder.compiler): where eager takes the items too, its error;
    # where it takes fewer, an error that says the iterator is further on.
    x = torch.zeros(4, 2)
    for fn, eager_takes_them in ((index_by_tensor_then_sum_iterator, False), (sum_iterator_then_index_by_tensor, True)):
        jf = thunder.jit(fn)
        jf(x, torch.tensor([0]), make([3, 4, 5]))
        it = make([3, 4, 5])
        if eager_takes_them:
            with pytest.raises(IndexError):
                jf(x, torch.tensor([9]), it)
        else:
            with pytest.raises(thunder.core.errors.ThunderRuntimeError, match="positional argument 2.*list or tuple") as e:
                jf(x, torch.tensor([9]), it)
            assert isinstance(e.value.__cause__, IndexError)
        assert list(it) == [] and thunder.cache_misses(jf) == 1
