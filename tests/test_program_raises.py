"""A program that raises, against eager (Note [A program that raises] in thunder.compiler): the effects it makes
before its ``raise`` happen on every failing call, as in eager, and eager's exception propagates. Tracing records
effects for the computation to make, so a trace that stopped at the raise made none: a global list grew in eager
and not under thunder."""

from __future__ import annotations

import pytest
import torch

import thunder

LOG: list = []


def _appends_updates_draws_prints_then_raises(x, n):
    LOG.append(n)
    x.add_(1)
    noise = torch.rand(1)
    print("call", n)
    if n > 2:
        raise ValueError(f"n={n} is too big")
    return x * noise


def test_effects_before_a_raise_happen_on_every_failing_call(capsys):
    jitted = thunder.jit(_appends_updates_draws_prints_then_raises)
    eager_x, thunder_x = torch.zeros(2), torch.zeros(2)
    for n in (1, 3, 3, 1):
        runs = []
        for fn, x in ((_appends_updates_draws_prints_then_raises, eager_x), (jitted, thunder_x)):
            LOG.clear()
            torch.manual_seed(n)
            try:
                result = fn(x, n)
            except ValueError as e:
                result = str(e)
            runs.append((result, list(LOG), x.clone(), torch.rand(1), capsys.readouterr().out))
        (expected, *expected_effects), (actual, *actual_effects) = runs
        if isinstance(expected, str):
            assert actual == expected == f"n={n} is too big"
        else:
            torch.testing.assert_close(actual, expected)
        assert actual_effects[0] == expected_effects[0] and actual_effects[3] == expected_effects[3]  # list, print
        torch.testing.assert_close(actual_effects[1:3], expected_effects[1:3])  # the input, the generator
    assert thunder.cache_misses(jitted) == 3  # each failing call traced again: nothing is cached for it


def test_an_assert_and_a_module_that_counts_its_calls():
    def needs_three(x):
        assert x.shape[0] == 3, "needs 3 rows"
        return x + 1

    with pytest.raises(AssertionError, match="needs 3 rows"):
        thunder.jit(needs_three)(torch.zeros(2))

    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(2, 2)
            self.calls = 0

        def forward(self, x):
            self.calls += 1
            if x.ndim != 2:
                raise ValueError("expects a 2-d input")
            return self.linear(x)

    model = Counting()
    jitted = thunder.jit(model)
    with pytest.raises(ValueError, match="expects a 2-d input"):
        jitted(torch.zeros(3))
    assert model.calls == 1
    torch.testing.assert_close(jitted(torch.ones(1, 2)), model.linear(torch.ones(1, 2)))
    assert model.calls == 2


def test_where_tracing_raises_and_eager_does_not_the_call_runs_eagerly_with_a_warning():
    def refuses_compilers(x):
        if torch.compiler.is_compiling():  # thunder says True, as torch.compile does
            raise NotImplementedError("not under a compiler")
        return x + 1

    x = torch.zeros(2)
    with pytest.warns(UserWarning, match="stopped at NotImplementedError: not under a compiler.*ran eagerly"):
        result = thunder.jit(refuses_compilers)(x)
    torch.testing.assert_close(result, x + 1)


def test_an_exception_thunder_raises_is_not_run_eagerly():
    def unsupported(x):
        LOG.append("unsupported")
        return x.share_memory_()

    LOG.clear()
    with pytest.raises(NotImplementedError, match="share_memory_ is not supported"):
        thunder.jit(unsupported)(torch.zeros(2))
    assert LOG == []  # the program did not run


def test_an_iterator_argument_that_tracing_pulled_from():
    # the eager run got the slow path's wrapper of the iterator ("'ReplayableIterator' object is not iterable")
    def consumes_then_raises(x, items):
        for v in items:
            x = x + v
        LOG.append(x)
        if x.requires_grad:
            raise RuntimeError("refuses a tensor that requires grad")
        return x

    for make in (lambda: map(float, [1, 2]), lambda: iter([1.0, 2.0])):
        x = torch.ones(()).requires_grad_()
        LOG.clear()
        with pytest.raises(RuntimeError, match="refuses"):
            consumes_then_raises(x, make())
        with pytest.raises(RuntimeError, match="refuses"):
            thunder.jit(consumes_then_raises)(x, make())
        torch.testing.assert_close(LOG[1], LOG[0])  # the eager run saw every item


_LOG: list = []


def test_an_op_that_fails_before_a_value_the_program_needs_leaves_eagers_effects():
    """``LOG.append(...)``, then an op that fails on these inputs (an index out of range), then a value Python needs:
    tracing finds that eager fails at the op, and raised its error without the effects before it (found by the
    randomized tester). The call runs eagerly, as for any error of the program's."""

    def f(x):
        _LOG.append(x.shape[0])
        _ = x.take(torch.tensor([100]))
        acc = x + 0
        return acc, f"{acc}"  # formatting needs acc's values, which tracing works out by running what precedes

    _LOG.clear()
    with pytest.raises(IndexError, match="out of range"):
        f(torch.ones(2, 3))
    with pytest.raises(IndexError, match="out of range"):
        thunder.jit(f)(torch.ones(2, 3))
    assert _LOG == [2, 2]


def test_an_argument_check_after_effects_leaves_eagers_effects():
    """An op whose arguments eager rejects (``expand`` to a size that does not fit), after a draw from the
    program's own NumPy generator and an append: thunder's mirror of eager's check stopped tracing before any
    effect was made; the call now runs eagerly, so the draw and the append happen and eager's error propagates
    (the randomized tester's seed 1004356)."""
    import numpy

    def make():
        generator, log = numpy.random.RandomState(3), []

        def f(x):
            log.append(generator.random())
            return x.expand(5, 5)

        return f, generator, log

    (f, e_gen, e_log), (g, t_gen, t_log) = make(), make()
    jitted = thunder.jit(g)
    for _ in range(2):
        with pytest.raises(RuntimeError) as expected:
            f(torch.ones(4))
        with pytest.raises(RuntimeError) as actual:
            jitted(torch.ones(4))
        assert type(actual.value) is type(expected.value) and str(actual.value) == str(expected.value)
        assert t_log == e_log and t_gen.random() == e_gen.random()
