"""The cache: what recompiles and what does not, for each cache option."""

from __future__ import annotations

import linecache

import pytest
import torch

import thunder


def add(a, b):
    return a + b


def scale(x, n):
    return x * n


def test_hit_after_first_call():
    jf = thunder.jit(add)
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    jf(a, b)
    jf(a, b)
    jf(torch.randn(2, 3), torch.randn(2, 3))
    assert (thunder.cache_misses(jf), thunder.cache_hits(jf)) == (1, 2)


@pytest.mark.parametrize(
    "change",
    [
        lambda t: t.reshape(3, 2),  # shape
        lambda t: t.double(),  # dtype
        lambda t: t.clone().requires_grad_(True),  # requires_grad
    ],
    ids=["shape", "dtype", "requires_grad"],
)
def test_recompiles_on_tensor_metadata_change(change):
    jf = thunder.jit(add)
    a = torch.randn(2, 3)
    jf(a, a)
    other = change(a)
    out = jf(other, other)
    torch.testing.assert_close(out, other + other)
    assert thunder.cache_misses(jf) == 2
    jf(a, a)  # the first entry still serves its inputs
    assert (thunder.cache_misses(jf), thunder.cache_hits(jf)) == (2, 1)


def test_recompiles_on_python_int_change_and_not_otherwise():
    jf = thunder.jit(scale)
    x = torch.randn(3)
    jf(x, 2)
    jf(x, 2)
    assert thunder.cache_misses(jf) == 1
    torch.testing.assert_close(jf(x, 3), x * 3)
    assert thunder.cache_misses(jf) == 2
    jf(x, 2.0)  # a float is not the int 2
    assert thunder.cache_misses(jf) == 3


GLOBAL_FACTOR = 2.0


def uses_global(x):
    return x * GLOBAL_FACTOR


def test_recompiles_when_a_guarded_global_changes():
    global GLOBAL_FACTOR
    jf = thunder.jit(uses_global)
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), x * 2.0)
    try:
        GLOBAL_FACTOR = 5.0
        torch.testing.assert_close(jf(x), x * 5.0)
        assert thunder.cache_misses(jf) == 2
    finally:
        GLOBAL_FACTOR = 2.0


def test_no_caching_always_recompiles():
    jf = thunder.jit(add, cache="no caching")
    a = torch.randn(2)
    jf(a, a)
    jf(a, a)
    assert (thunder.cache_misses(jf), thunder.cache_hits(jf)) == (2, 0)
    assert thunder.cache_option(jf) is thunder.CACHE_OPTIONS.NO_CACHING


def test_same_input_skips_checks():
    jf = thunder.jit(add, cache="same input")
    a = torch.randn(2)
    jf(a, a)
    jf(a, a)
    assert (thunder.cache_misses(jf), thunder.cache_hits(jf)) == (1, 1)
    prologue = str(thunder.last_prologue_traces(jf)[-1])
    assert "shape" not in prologue and "dtype" not in prologue


def test_symbolic_values_reuses_the_trace_for_new_shapes_and_ints():
    jf = thunder.jit(scale, cache="symbolic values")
    for n in (2, 3, 4):
        for size in (3, 5, 7):
            x = torch.randn(size, 4)
            torch.testing.assert_close(jf(x, n), x * n)
    assert thunder.cache_misses(jf) == 1
    assert thunder.cache_hits(jf) == 8


def test_symbolic_values_recompiles_when_a_constraint_fails():
    def f(x, y):
        return x + y

    jf = thunder.jit(f, cache="symbolic values")
    jf(torch.randn(3, 4), torch.randn(3, 4))
    jf(torch.randn(5, 6), torch.randn(5, 6))  # same constraints (no broadcasting)
    assert thunder.cache_misses(jf) == 1
    x, y = torch.randn(1, 6), torch.randn(5, 6)  # now dim 0 broadcasts: a constraint fails
    torch.testing.assert_close(jf(x, y), x + y)
    assert thunder.cache_misses(jf) == 2


def test_symbolic_values_branching_on_an_int_is_a_constraint():
    def f(x, n):
        if n > 2:
            return x * n
        return x - n

    jf = thunder.jit(f, cache="symbolic values")
    x = torch.randn(3)
    torch.testing.assert_close(jf(x, 3), x * 3)
    torch.testing.assert_close(jf(x, 10), x * 10)
    assert thunder.cache_misses(jf) == 1
    torch.testing.assert_close(jf(x, 1), x - 1)
    assert thunder.cache_misses(jf) == 2
    prologue = str(thunder.last_prologue_traces(jf)[-1])
    assert "n <= 2" in prologue


def test_lookup_does_not_depend_on_entry_order():
    jf = thunder.jit(add, cache="constant values")
    inputs = [(torch.randn(i + 1), torch.randn(i + 1)) for i in range(100)]
    for a, b in inputs:
        jf(a, b)
    assert thunder.cache_misses(jf) == 100
    for a, b in reversed(inputs):
        torch.testing.assert_close(jf(a, b), a + b)
    assert thunder.cache_misses(jf) == 100
    assert thunder.cache_hits(jf) == 100


def test_unknown_cache_option_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown cache option 'sometimes'.*constant values"):
        thunder.jit(add, cache="sometimes")


def test_recompiles_when_the_default_dtype_changes():
    def f(x):
        return x * 2 + torch.ones(3)

    jf = thunder.jit(f)
    x = torch.ones(3, dtype=torch.float64)
    assert jf(x).dtype == torch.float64
    assert "get_default_dtype" in str(thunder.last_prologue_traces(jf)[-1])
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        torch.testing.assert_close(jf(x), f(x))
        assert thunder.cache_misses(jf) == 2
    finally:
        torch.set_default_dtype(previous)


def test_default_dtype_is_not_checked_when_unused():
    jf = thunder.jit(add)
    jf(torch.randn(2), torch.randn(2))
    assert "get_default_dtype" not in str(thunder.last_prologue_traces(jf)[-1])


def _prologue_compiled(entry) -> tuple[bool, bool]:
    """(the diagnostic prologue, the fused prologue) of ``entry`` compiled?"""
    return entry.prologue._fn is not None, type(entry.run).__name__ != "FusedWhenReused"


def test_an_entry_run_once_compiles_no_prologue(monkeypatch):
    monkeypatch.setattr(thunder.compiler, "VERIFY_FIRST_INPUTS", False)  # the tests' check runs the prologue
    # Note [The first call runs no prologue]: the traced call takes its inputs from the tracer, and a call with
    # another input key is turned away without the prologue; the miss still names what changed.
    jf = thunder.jit(add)
    a = torch.randn(2, 3)
    jf(a, a)
    first = thunder.compile_stats(jf).entries[0]
    assert _prologue_compiled(first) == (False, False)
    b = a.double()
    torch.testing.assert_close(jf(b, b), b + b)
    assert _prologue_compiled(first) == (False, False)
    reason = thunder.cache_miss_reasons(jf)[-1]
    assert (reason.input, reason.check, reason.expected, reason.actual) == ("a", "dtype", torch.float32, torch.float64)
    c = torch.randn(4, 3)
    torch.testing.assert_close(jf(c, c), c + c)
    reason = thunder.cache_miss_reasons(jf)[-1]
    assert (reason.input, reason.check, reason.expected, reason.actual) == ("a", "shape", (2, 3), (4, 3))
    torch.testing.assert_close(jf(c, c), c + c)  # the last entry's input key again: its fused prologue decides
    assert _prologue_compiled(thunder.compile_stats(jf).entries[-1]) == (False, True)
    assert _prologue_compiled(first) == (False, False)
    assert (thunder.cache_misses(jf), thunder.cache_hits(jf)) == (3, 1)


def test_an_entry_run_once_claims_no_prologue(monkeypatch):
    # Note [The executed prologue is made when needed]: the prologue is claimed by its executors only to be compiled
    # or shown, and then once: the history shows it as the last prologue trace.
    monkeypatch.setattr(thunder.compiler, "VERIFY_FIRST_INPUTS", False)
    jf = thunder.jit(add)
    a = torch.randn(2, 3)
    jf(a, a)
    entry = thunder.compile_stats(jf).entries[0]
    assert len(entry.prologue_traces) == 1
    shown = thunder.last_prologue_traces(jf)
    assert shown is entry.prologue_traces and len(shown) == 2
    assert shown[-1].provenance.pass_name == "Transform for execution"
    torch.testing.assert_close(jf(a, a), a + a)  # reused: its fused prologue is compiled from the same trace
    assert _prologue_compiled(entry) == (False, True) and len(entry.prologue_traces) == 2
    jg = thunder.jit(add)
    jg(a, a)
    torch.testing.assert_close(jg(a, a), a + a)  # the fused prologue makes it when nothing showed it before
    assert len(thunder.compile_stats(jg).entries[0].prologue_traces) == 2
    assert str(thunder.last_prologue_traces(jg)[-1]) == str(shown[-1])


def test_a_fused_prologue_raises_its_misses_inside_its_try():
    # Note [A miss names its line]: inside the prologue's try a failed check raises, which compiles cheaper than a call
    # of the miss; test_a_miss_names_the_check_of_its_line checks that the miss still names its check.
    model = torch.nn.Sequential(*[torch.nn.Linear(3, 3) for _ in range(12)])
    jf, x = thunder.jit(model), torch.randn(2, 3)
    jf(x)
    jf(x)
    run = thunder.compile_stats(jf).entries[0].run
    source = "".join(linecache.getlines(run.__code__.co_filename))
    assert source.count("raise _MissedCheck") > 12 and "return _missed(" not in source, source


def test_a_miss_the_fused_prologue_found_is_explained_without_the_diagnostic_prologue(monkeypatch):
    monkeypatch.setattr(thunder.compiler, "VERIFY_FIRST_INPUTS", False)
    jf = thunder.jit(add)
    a = torch.randn(2, 3)
    jf(a, a)
    jf(a, a)
    entry = thunder.compile_stats(jf).entries[0]
    b = a.clone().requires_grad_(True)
    jf(b, a)
    reason = thunder.cache_miss_reasons(jf)[-1]
    assert (reason.input, reason.check, reason.expected, reason.actual) == ("a", "requires_grad", False, True)
    assert _prologue_compiled(entry) == (False, True)


_SCALE = 2.0


@pytest.mark.parametrize("layers", [1, 12], ids=["direct", "long"])
def test_a_miss_names_the_check_of_its_line(monkeypatch, layers):
    # Note [A miss names its line]: the fused prologue's failed check is found from its line, a tensor check among
    # the grouped ones too; a small prologue (the jitted function's own code) and a long one alike.
    monkeypatch.setattr(thunder.compiler, "VERIFY_FIRST_INPUTS", False)
    model = torch.nn.Sequential(*[torch.nn.Linear(3, 3) for _ in range(layers)])

    def f(m, x):
        return m(x) * _SCALE

    jf, x = thunder.jit(f), torch.randn(2, 3)
    jf(model, x)
    jf(model, x)
    entry = thunder.compile_stats(jf).entries[0]
    model[-1].bias.requires_grad_(False)
    torch.testing.assert_close(jf(model, x), f(model, x))
    reason = thunder.cache_miss_reasons(jf)[-1]
    assert (reason.check, reason.expected, reason.actual) == ("requires_grad", True, False), reason
    assert f"{layers - 1}.bias" in reason.input, reason
    assert _prologue_compiled(entry) == (False, True)
    model[-1].bias.requires_grad_(True)
    jf(model, x)  # the first entry's again
    monkeypatch.setitem(globals(), "_SCALE", 3.0)
    torch.testing.assert_close(jf(model, x), f(model, x))
    reason = thunder.cache_miss_reasons(jf)[-1]
    assert (reason.input, reason.expected, reason.actual) == ("_SCALE", 2.0, 3.0), reason


def test_a_nan_argument_has_one_input_key():
    jf = thunder.jit(scale)
    x = torch.randn(3)
    for _ in range(3):
        torch.testing.assert_close(jf(x, float("nan")), x * float("nan"), equal_nan=True)
    assert (thunder.cache_misses(jf), thunder.cache_hits(jf)) == (1, 2)


def _alternate(jf, calls, rounds: int) -> None:
    for _ in range(rounds):
        for args in calls:
            torch.testing.assert_close(jf(*args), add(*args))


@pytest.mark.parametrize("direct", [True, False])
def test_calls_alternating_between_two_entries_hit_without_lookup_or_diagnostics(monkeypatch, direct):
    # Note [The entry used before is tried next], Note [A miss of the fast path explains itself when asked]; with
    # ``direct`` False the fused prologues are called (no own code of the jitted function: a rejection keeps the
    # frame of a prologue that returned).
    from thunder.cache_diagnostics import Rejection
    from thunder.compiler import Cache

    if not direct:
        monkeypatch.setattr(thunder.core.trace, "DIRECT_MAX_LINES", 0)
    jf = thunder.jit(add, cache="constant values")
    inputs = [(torch.randn(i + 1, 2), torch.randn(i + 1, 2)) for i in range(10)]
    for args in inputs:
        jf(*args)
    first, last = inputs[0], inputs[-1]
    _alternate(jf, (first, last), 3)  # each entry found again by the lookup, then by the entry used before
    looked_up, explained = [], []
    lookup, values = Cache.lookup, Rejection.values
    monkeypatch.setattr(Cache, "lookup", lambda self, *a, **k: looked_up.append(a) or lookup(self, *a, **k))
    monkeypatch.setattr(Rejection, "values", property(lambda self: explained.append(self) or values.fget(self)))
    hits, misses = thunder.cache_hits(jf), thunder.cache_misses(jf)
    _alternate(jf, (first, last), 5)
    assert (thunder.cache_hits(jf), thunder.cache_misses(jf)) == (hits + 10, misses)
    assert looked_up == [] and explained == []
    middle = inputs[4]  # a third entry: found by the lookup, with no diagnostics either
    torch.testing.assert_close(jf(*middle), add(*middle))
    assert len(looked_up) == 1 and explained == [] and thunder.cache_hits(jf) == hits + 11


def test_a_miss_after_alternating_entries_says_why(monkeypatch):
    # The rejection's locals are read from the prologue's frame when the miss compiles (Note [A miss of the fast
    # path explains itself when asked]): a changed global, which no input key shows.
    global GLOBAL_FACTOR
    jf = thunder.jit(uses_global, cache="constant values")
    x, y = torch.randn(3), torch.randn(4)
    _alternate_global = [(x,), (y,)] * 4
    for args in _alternate_global:
        torch.testing.assert_close(jf(*args), uses_global(*args))
    try:
        GLOBAL_FACTOR = 5.0
        torch.testing.assert_close(jf(y), y * 5.0)
    finally:
        GLOBAL_FACTOR = 2.0
    reason = thunder.cache_miss_reasons(jf)[-1]
    assert (reason.check, reason.expected, reason.actual) == ("value", 2.0, 5.0), reason
    assert thunder.cache_misses(jf) == 3


def test_calls_cycling_through_three_entries_stop_trying_the_entry_used_before(monkeypatch):
    # Note [The entry used before is tried next]: it missed, so the lookup alone serves the cycle; calls that
    # alternate again take it again.
    from thunder.compiler import Cache

    jf = thunder.jit(add, cache="constant values")
    inputs = [(torch.randn(i + 1, 2), torch.randn(i + 1, 2)) for i in range(3)]
    _alternate(jf, inputs, 3)
    state = thunder._state(jf)
    tried, looked_up = [], []
    run_previous, lookup = type(state)._run_previous, Cache.lookup
    monkeypatch.setattr(type(state), "_run_previous", lambda self, *a: tried.append(a) or run_previous(self, *a))
    monkeypatch.setattr(Cache, "lookup", lambda self, *a, **k: looked_up.append(a) or lookup(self, *a, **k))
    hits = thunder.cache_hits(jf)
    _alternate(jf, inputs, 3)
    assert tried == [] and len(looked_up) == 9 and thunder.cache_hits(jf) == hits + 9
    # Alternating calls: the third finds the entry used before by the lookup, and later ones take it.
    _alternate(jf, inputs[:2], 3)
    assert len(looked_up) == 12 and len(tried) == 3 and thunder.cache_hits(jf) == hits + 15
