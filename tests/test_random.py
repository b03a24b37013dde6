"""Random ops follow eager's generator (Note [Random ops follow eager's generator]): the same seed,
set before the call or inside the jitted function, gives eager's numbers, call after call; what
cannot follow eager fails with a clear error."""

from __future__ import annotations

import itertools
import random

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder.core.errors import ThunderRuntimeError, UnsupportedOpError

DRAWS = {
    "rand": lambda x: torch.rand(3, 4) + x,
    "randn": lambda x: torch.randn(3, 4) * x,
    "randint": lambda x: torch.randint(0, 10, (3, 4)) + x,
    "rand_like": lambda x: torch.rand_like(x),
    "randn_like": lambda x: torch.randn_like(x),
    "randint_like": lambda x: torch.randint_like(x, 5),
    "randperm": lambda x: torch.randperm(7),
    "bernoulli": lambda x: torch.bernoulli(torch.sigmoid(x)),
    "bernoulli_p": lambda x: x.bernoulli(0.3),
    "multinomial": lambda x: torch.multinomial(x.abs() + 0.1, 3),
    "multinomial_replacement": lambda x: torch.multinomial((x.abs() + 0.1).reshape(-1), 20, replacement=True),
    "normal_tensors": lambda x: torch.normal(x, x.abs() + 1),
    "normal_floats": lambda x: torch.normal(2.0, 3.0, size=(5,)) + x.sum(),
    "poisson": lambda x: torch.poisson(x.abs() * 3),
    "dropout": lambda x: F.dropout(x, 0.5),
    "dropout2d": lambda x: F.dropout2d(x.reshape(1, 3, 4, 1), 0.5),
    "alpha_dropout": lambda x: F.alpha_dropout(x, 0.3, training=True),
    "rrelu": lambda x: F.rrelu(x, training=True),
    "uniform_": lambda x: torch.empty(3, 4).uniform_(-2, 2) + x,
    "normal_": lambda x: x.clone().normal_(1.0, 0.5),
    "exponential_": lambda x: x.clone().exponential_(),
    "random_": lambda x: x.clone().random_(0, 5),
    "two_draws_and_math": lambda x: torch.rand(3, 4).sin() * torch.randn(3, 4) + x,
}


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_seed_before_the_call_gives_eager_numbers(name):
    fn = DRAWS[name]
    jitted = thunder.jit(fn)
    x = torch.randn(3, 4)
    for seed in (0, 1, 0):
        torch.manual_seed(seed)
        expected = fn(x)
        after_eager = torch.rand(2)
        torch.manual_seed(seed)
        actual = jitted(x)
        after_jitted = torch.rand(2)
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
        torch.testing.assert_close(after_jitted, after_eager, rtol=0, atol=0)  # the generator advanced alike


@pytest.mark.parametrize("name", sorted(DRAWS))
def test_manual_seed_inside_the_function(name):
    draw = DRAWS[name]

    def fn(x, seed):
        torch.manual_seed(seed)
        return draw(x)

    jitted = thunder.jit(fn)
    x = torch.randn(3, 4)
    for seed in (3, 4, 3):
        torch.testing.assert_close(jitted(x, seed), fn(x, seed), rtol=0, atol=0)


def test_manual_seed_returns_the_default_generator():
    def fn(x):
        g = torch.manual_seed(5)
        return g, torch.randn(2, generator=g) + x

    g, y = thunder.jit(fn)(torch.zeros(2))
    assert g is torch.default_generator
    torch.manual_seed(5)
    torch.testing.assert_close(y, torch.randn(2), rtol=0, atol=0)


def test_rng_state_is_read_and_restored_where_the_program_does():
    def fn(x):
        state = torch.get_rng_state()
        a = torch.rand(4)
        torch.set_rng_state(state)
        b = torch.rand(4)
        with torch.random.fork_rng():
            torch.manual_seed(0)
            c = torch.rand(4)
        return a, b, c, torch.rand(4) + x

    jitted = thunder.jit(fn)
    for _ in range(2):
        torch.manual_seed(11)
        expected = fn(torch.ones(4))
        torch.manual_seed(11)
        actual = jitted(torch.ones(4))
        for e, a in zip(expected, actual):
            torch.testing.assert_close(a, e, rtol=0, atol=0)
    torch.testing.assert_close(actual[0], actual[1], rtol=0, atol=0)


def test_gradients_through_draws_match_eager():
    def fn(x, m):
        torch.manual_seed(7)
        return (F.dropout(x, 0.5) * torch.normal(m, 2.0)).sum()

    x = torch.randn(6, requires_grad=True)
    m = torch.randn(6, requires_grad=True)
    expected = torch.autograd.grad(fn(x, m), (x, m))
    actual = torch.autograd.grad(thunder.jit(fn)(x, m), (x, m))
    for e, a in zip(expected, actual):
        torch.testing.assert_close(a, e, rtol=0, atol=0)


def test_draws_are_not_merged_reordered_or_dropped():
    def fn(x):
        torch.manual_seed(0)
        unused = torch.rand(5)  # noqa: F841  still advances the generator
        a = torch.rand(3)
        b = torch.rand(3)
        return x * a, x * b

    jitted = thunder.jit(fn, executors=["torchcompile", "torch"])
    for e, a in zip(fn(torch.ones(3)), jitted(torch.ones(3))):
        torch.testing.assert_close(a, e, rtol=0, atol=0)


@pytest.mark.parametrize(
    "unused",
    [lambda x: F.dropout(x, 0.5, training=True), lambda x: torch.rand_like(x), lambda x: F.dropout1d(x, 0.3)],
    ids=["dropout", "rand_like", "dropout1d"],
)
def test_a_draw_whose_result_is_unused_still_draws(unused):
    """Dead-code elimination removed a dropout whose result nothing used (the last layer of XLNet's content
    stream, CANINE's final transformer): the draws after it, and the generator's state after the call, were
    not eager's."""

    def f(x):
        unused(x)
        return F.dropout(x, 0.5, training=True)

    x = torch.ones(4, 3, 8)
    torch.manual_seed(0)
    expected, after = f(x), torch.rand(3)
    torch.manual_seed(0)
    actual = thunder.jit(f)(x)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    torch.testing.assert_close(torch.rand(3), after, rtol=0, atol=0)


def test_a_generator_of_your_own_is_refused_clearly():
    g = torch.Generator().manual_seed(0)
    with pytest.raises(UnsupportedOpError, match="torch.Generator other than torch.s default one"):
        thunder.jit(lambda x: torch.randn(3, generator=g) + x)(torch.ones(3))
    with pytest.raises(UnsupportedOpError, match="torch.Generator other than torch.s default one"):
        thunder.jit(lambda x: torch.bernoulli(x, generator=g))(torch.full((3,), 0.5))


@pytest.mark.parametrize("call", [torch.seed, torch.initial_seed])
def test_seeds_the_trace_cannot_follow_are_refused(call):
    with pytest.raises(UnsupportedOpError, match=rf"torch.{call.__name__}\(\).*test_random.py"):
        thunder.jit(lambda x: x + call())(torch.ones(1))


def test_an_endless_iterator_from_outside_is_refused_not_consumed():
    counter = itertools.count()
    with pytest.raises(ThunderRuntimeError, match="itertools.count"):
        thunder.jit(lambda x: x + next(counter))(torch.ones(1))
    assert next(counter) == 0


def test_an_autograd_function_defined_inside_the_function():
    # torch.masked's ops define one on every call; its metaclass numbers it from a global counter
    def fn(x, mask):
        return torch.masked.sum(x, 0, mask=mask)

    x, mask = torch.randn(3, 4), torch.rand(3, 4) > 0.5
    torch.testing.assert_close(thunder.jit(fn)(x, mask), fn(x, mask))


def test_numpy_draws_on_the_first_call_and_a_generator_read_from_outside():
    # The first call drew twice from NumPy's global generator (tracing's draw was not put back, then the prologue
    # drew again): np.random.beta gave the second number of the seed. A generator held in a global (a
    # random.Random, a np.random.Generator) was the traced one on every call, even after the global was rebound.
    import numpy as np

    def mixup(x):
        lam = np.random.beta(0.4, 0.4)
        return lam * x, np.random.rand()

    jitted = thunder.jit(mixup)
    x = torch.ones(2)
    for seed in range(3):
        np.random.seed(seed)
        expected = mixup(x)
        np.random.seed(seed)
        actual = jitted(x)
        torch.testing.assert_close(actual[0], expected[0])
        assert actual[1] == expected[1]

    global _GENERATORS
    for make in (random.Random, np.random.default_rng):
        _GENERATORS = make(0)
        jitted = thunder.jit(_draws_from_a_global_generator)
        for seed in (0, 5, 7):
            _GENERATORS = make(seed)
            expected = _draws_from_a_global_generator(x)
            _GENERATORS = make(seed)
            torch.testing.assert_close(jitted(x), expected)


def _draws_from_a_global_generator(x):
    return x * _GENERATORS.random()


_GENERATORS = None


def test_a_call_that_runs_again_in_another_entry_draws_the_same_numbers_from_a_generator_of_its_own():
    # A call whose data-dependent count changed stops and runs again in another entry, whose prologue draws again:
    # the program's own generator (read from outside) gave its next number instead of the same one.
    import numpy as np

    global _GENERATORS
    for cache in ("constant values", "symbolic values"):
        mine, theirs = np.random.RandomState(3), np.random.RandomState(3)
        jitted = thunder.jit(_draws_then_counts, cache=cache)
        for seed in range(6):
            torch.manual_seed(seed)
            x = torch.randint(-3, 4, (3,)).float()
            _GENERATORS = mine
            actual = jitted(x)
            _GENERATORS = theirs
            expected = _draws_then_counts(x)
            assert actual[1] == expected[1]
            torch.testing.assert_close(actual[0], expected[0])


def _draws_then_counts(x):
    drawn = _GENERATORS.random()
    positive = x[x > 0]
    return x.sum() + positive.sum() * positive.shape[0], drawn


def test_a_call_does_not_import_numpy_random():
    # Reading NumPy's generator state imported numpy.random (30 ms on a first call) for a program that never draws
    # from it; the import registers abstract base classes, which changes abc.get_cache_token() that entries asking an
    # ABC check: such an entry compiled before the import recompiled once after it.
    import subprocess
    import sys

    code = (
        "import sys, collections.abc, torch, thunder\n"
        "jf = thunder.jit(lambda x, d: x + 1 if isinstance(d, collections.abc.Mapping) else x - 1)\n"
        "x = torch.ones(2)\n"
        "for _ in range(3): jf(x, {})\n"
        "assert 'numpy.random' not in sys.modules, 'a jitted call imported numpy.random'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
