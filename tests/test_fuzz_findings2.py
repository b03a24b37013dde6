"""Regression tests of what the randomized tester (``tests/fuzz``) and its targeted probes found, from the
eighteenth session on: loops traced once, grad mode around failing calls, prints before in-place changes, identity
of symbolic numbers (the earlier findings are in test_fuzz_findings.py)."""

from __future__ import annotations

import re
import warnings

import pytest
import torch

import thunder


@pytest.mark.parametrize("cache", ["symbolic values", None])
def test_a_write_in_place_between_a_traced_loop_and_the_stack_of_its_list_is_seen(cache):
    # A loop traced once stacked its appended list when it ended; eager stacks at torch.stack, after the program
    # wrote into the memory the elements are views of (or into the carried tensor it appended): the stack missed
    # the write (Note [Loops over a symbolic range]). Such a loop unrolls now.
    def views_then_zeroed(x):
        y = x.clone()
        o = []
        for i in range(y.shape[0]):
            o.append(y[i])
        y.zero_()
        return torch.stack(o)

    def carried_then_written(x):
        h = x[0] * 0
        o = []
        for i in range(x.shape[0]):
            h = h + x[i]
            o.append(h)
        h.add_(1)
        return torch.stack(o, -1), h

    for fn in (views_then_zeroed, carried_then_written):
        jfn = thunder.jit(fn, cache=cache)
        for n in (2, 3, 4, 5):
            x = torch.randn(n, 3)
            expected, actual = fn(x), jfn(x)
            for e, a in zip(expected if isinstance(expected, tuple) else (expected,),
                            actual if isinstance(actual, tuple) else (actual,), strict=True):  # fmt: skip
                torch.testing.assert_close(a, e, rtol=0, atol=0)


@pytest.mark.parametrize("cache", ["symbolic values", None])
def test_a_local_first_bound_in_a_traced_loop_to_the_carried_tensor_holds_its_last_value(cache):
    # ``prev = h`` in the body: after the loop eager's prev is h at the start of the last iteration; the loop
    # traced once left prev the tensor h was before the loop (Note [Loops over a symbolic range]).
    def fn(x):
        h = x[0] * 0
        for i in range(x.shape[0]):
            prev = h
            h = h + x[i]
        return prev, h

    jfn = thunder.jit(fn, cache=cache)
    for n in (2, 3, 4, 5):
        x = torch.randn(n, 3)
        for e, a in zip(fn(x), jfn(x), strict=True):
            torch.testing.assert_close(a, e, rtol=0, atol=0)


@pytest.mark.parametrize("cache", ["symbolic values", None])
def test_a_traced_loops_results_have_eagers_strides_and_values_for_python(cache):
    # After a loop traced once, a stride query of its result raised "no torch implementation", and a tensor value
    # Python needs (``.item()``, a branch) "not known while tracing": neither could run the loop's symbol.
    def strides(x):
        h = x[0].t() * 0
        for i in range(x.shape[0]):
            h = h + x[i].t()
        return h, h.stride(), h.is_contiguous()

    def item_after(x, n):
        acc = x
        for _ in range(1, n):
            acc = acc * 2
        return acc, acc[0].item()

    def branch_after(x):
        h = x[0] * 0
        for i in range(x.shape[0]):
            h = h + x[i]
        if h.sum() > 0:
            h = h + 1
        return h

    cases = (
        (strides, lambda k: (torch.randn(k, 3, 2),)),
        (item_after, lambda k: (torch.randn(3), k)),
        (branch_after, lambda k: (torch.randn(k, 2),)),
    )
    for fn, make in cases:
        jfn = thunder.jit(fn, cache=cache)
        for k in (2, 3, 4, 5):
            args = make(k)
            expected, actual = fn(*args), jfn(*args)
            expected = expected if isinstance(expected, tuple) else (expected,)
            actual = actual if isinstance(actual, tuple) else (actual,)
            for e, a in zip(expected, actual, strict=True):
                if isinstance(e, torch.Tensor):
                    torch.testing.assert_close(a, e, rtol=0, atol=0)
                else:
                    assert a == e


@pytest.mark.parametrize("cache", ["symbolic values", None])
def test_a_loop_whose_body_steps_an_iterator_or_grows_a_native_buffer_unrolls(cache):
    # The loop's check of outside state compared lists, dicts, sets, cells and objects' attributes only: a body
    # that stepped an iterator or a generator, or appended to a bytearray, was traced once with the first
    # iteration's value for every iteration (Note [Loops over a symbolic range]).
    import array
    import itertools

    def gen():
        k = 0
        while True:
            k += 1
            yield k

    makers = (lambda: iter([1.0, 2.0, 3.0, 4.0, 5.0]), lambda: (v * 2 for v in range(9)), lambda: itertools.count(1),
              gen, lambda: map(float, [1, 2, 3, 4, 5]))  # fmt: skip

    def stepped(x, make):
        it = make()
        h = x[0] * 0
        for _ in range(x.shape[0]):
            h = h + next(it)
        return h

    def grown(x, make):
        buf = make()
        h = x[0] * 0
        for _ in range(x.shape[0]):
            h = h + 1
            buf.append(3)
        return h, len(buf)

    for make in makers:
        jfn = thunder.jit(stepped, cache=cache)
        for n in (2, 3, 4, 5):
            x = torch.randn(n, 2)
            torch.testing.assert_close(jfn(x, make), stepped(x, make), rtol=0, atol=0)
    for make in (bytearray, lambda: array.array("d")):
        jfn = thunder.jit(grown, cache=cache)
        for n in (2, 3, 4, 5):
            x = torch.randn(n, 2)
            (e, e_len), (a, a_len) = grown(x, make), jfn(x, make)
            torch.testing.assert_close(a, e, rtol=0, atol=0)
            assert a_len == e_len


@pytest.mark.parametrize("cache", ["symbolic values", None])
def test_a_loop_whose_body_takes_items_of_an_iterator_argument_unrolls(cache):
    # A generator or map argument stepped in the body: the prologue pulled one item, and the loop traced once used
    # it in every iteration (Note [Iterator arguments], Note [Loops over a symbolic range]).
    def fn(x, it):
        h = x[0] * 0
        for _ in range(x.shape[0]):
            h = h + next(it, 0.5)
        return h, list(it)

    for make in (lambda: (v for v in [1.0, 2.0, 3.0]), lambda: map(float, [1, 2, 3, 4])):
        jfn = thunder.jit(fn, cache=cache)
        for n in (2, 3, 4, 5):
            x = torch.randn(n, 2)
            (e, e_rest), (a, a_rest) = fn(x, make()), jfn(x, make())
            torch.testing.assert_close(a, e, rtol=0, atol=0)
            assert a_rest == e_rest


def test_an_in_place_update_under_no_grad_of_a_tensor_that_requires_grad_is_no_op_of_the_gradient():
    # Eager: ``b.mul_(2)`` under no_grad changes b's values, not its history: the gradient through b is that of
    # ``x + 0``. Thunder differentiated the update as ``b * 2`` (the fuzzer's seed 8003091, on every cache option).
    def under_no_grad(x):
        b = x + 0
        with torch.no_grad():
            b.mul_(2)
        return b * 3

    def grad_mode_switched(x):
        b = x * 1
        prev = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        b.add_(b)
        torch.set_grad_enabled(prev)
        return b.sin()

    for fn in (under_no_grad, grad_mode_switched):
        x = torch.randn(2, 3, dtype=torch.float64, requires_grad=True)
        expected = fn(x)
        (ge,) = torch.autograd.grad(expected.sum(), x)
        x2 = x.detach().requires_grad_()
        actual = thunder.jit(fn)(x2)
        (ga,) = torch.autograd.grad(actual.sum(), x2)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(ga, ge)


_IDENTITY_PROGRAMS = '''
def index_is_zero(x):
    h = x[0] * 0
    for i in range(x.shape[0]):
        h = h + int(i is 0)
    return h


def number_is_three(x, n):
    return x + 1 if n is 3 else x - 1
'''


@pytest.mark.parametrize("cache", [None, "symbolic values"])
def test_is_of_a_symbolic_int_and_a_small_int_is_eagers(cache):
    # a loop traced once compared its symbolic index by identity: ``i is 0`` was False for i = 0 (eager: True, the
    # cached small int); the symbolic number is eager's plain int as far as ``is`` can tell
    namespace = {"torch": torch}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)  # (``is`` with a literal)
        exec(_IDENTITY_PROGRAMS, namespace)
    f, g = namespace["index_is_zero"], namespace["number_is_three"]
    jf, jg = (thunder.jit(f), thunder.jit(g)) if cache is None else (thunder.jit(f, cache=cache), thunder.jit(g, cache=cache))
    for n in (2, 3, 4, 5):
        x = torch.ones(n, 2)
        assert torch.equal(jf(x), f(x)), n
        assert torch.equal(jg(x, n), g(x, n)), n


def _print_then_add(x):
    print(x)
    x.add_(1)
    print(x.sum())


def _print_then_setitem(x):
    items = [x]
    print(items)
    x[0] = 5
    print(items)


def _log_then_copy(x):
    import logging

    logging.getLogger("tests.fuzz_findings").warning("%s", x)
    x.copy_(x * 0)
    logging.getLogger("tests.fuzz_findings").warning("%s", x)


def _logged(caplog) -> str:
    return re.sub(r":\S+:\d+ ", " ", caplog.text)  # the text formatted when logged; not where from (left alone)


@pytest.mark.parametrize("fn", [_print_then_add, _print_then_setitem, _log_then_copy])
@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_an_input_printed_before_an_in_place_change_shows_its_value_before(fn, cache, capsys, caplog):
    jfn = thunder.jit(fn, cache=cache)
    for x in (torch.tensor([1.0, 2.0]), torch.tensor([-3.0, 0.5])):
        expected_x = x.clone()
        fn(expected_x)
        expected = capsys.readouterr().out, _logged(caplog)
        caplog.clear()
        jfn(x)
        assert (capsys.readouterr().out, _logged(caplog)) == expected
        caplog.clear()
        torch.testing.assert_close(x, expected_x)


def test_a_run_that_fails_under_no_grad_and_reruns_eagerly_leaves_grad_mode_on():
    def f(x):
        acc = x
        try:
            with torch.no_grad():
                acc.add_(1)  # an expanded input: torch refuses the write at run time
        except RuntimeError:
            acc = acc + 1
        return acc

    x = torch.randn(1).expand(3)
    expected = f(x)
    assert torch.is_grad_enabled()
    try:
        torch.testing.assert_close(thunder.jit(f)(x), expected)
        assert torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


def test_eagers_failure_a_handler_caught_is_checked_against_the_symbolic_sizes_it_read():
    def f(x):
        try:
            return x @ x
        except RuntimeError as e:
            return type(e).__name__, str(e)

    jfn = thunder.jit(f, cache="symbolic values")
    for x in (torch.ones(4, 1, dtype=torch.bool), torch.ones(1, 1, dtype=torch.bool), torch.ones(3, 1, dtype=torch.bool)):
        assert jfn(x) == f(x)


def test_a_failure_inside_no_grad_that_propagates_leaves_grad_mode_on_as_eager():
    # (3.11 seeds 6007807, 6008140) the overlap error inside ``with torch.no_grad():`` left grad mode off after the
    # call, on the slow and the hot path alike; eager's ``with`` block restores it as the error leaves it
    def f(x):
        with torch.no_grad():
            x.detach().mul_(1)
            c = x.sum()
        return x + c

    jf = thunder.jit(f)
    for _ in range(3):
        torch.testing.assert_close(jf(torch.ones(2, 2, 3)), f(torch.ones(2, 2, 3)))
        for fn in (f, jf):
            with pytest.raises(RuntimeError, match="single memory location"):
                fn(torch.randn(1, 2, 3).expand(2, 2, 3))
            assert torch.is_grad_enabled(), fn
