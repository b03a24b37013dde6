"""The cache's policy: a bounded LRU, generated code freed with its entry, the recompile-storm
warning, and ``thunder.cache_miss_reasons``."""

from __future__ import annotations

import gc
import linecache
import warnings

import pytest
import torch

import thunder
from thunder.compiler import DEFAULT_CACHE_SIZE_LIMIT
from thunder.core.errors import ThunderValueError


def add_one(x):
    return x + 1


def scale(x, n):
    return x * n


def generated_lines() -> int:
    return sum(1 for name in linecache.cache if name.startswith("thunder."))


def test_default_cache_size_limit_is_256():
    assert DEFAULT_CACHE_SIZE_LIMIT == 256
    assert thunder.compile_stats(thunder.jit(add_one)).cache.limit == 256


def test_cache_keeps_at_most_cache_size_limit_entries():
    jf = thunder.jit(add_one, cache="constant values", cache_size_limit=3)
    for n in range(1, 11):
        x = torch.randn(n)
        torch.testing.assert_close(jf(x), x + 1)
    assert len(thunder.compile_stats(jf).entries) == 3
    assert [e.computation_traces[0].args[0].shape for e in thunder.compile_stats(jf).entries] == [(8,), (9,), (10,)]


def test_least_recently_used_entry_is_evicted():
    jf = thunder.jit(add_one, cache="constant values", cache_size_limit=2)
    a, b, c = torch.randn(1), torch.randn(2), torch.randn(3)
    jf(a)
    jf(b)
    jf(a)  # a is now more recent than b
    jf(c)  # evicts b
    misses = thunder.cache_misses(jf)
    jf(a)
    assert thunder.cache_misses(jf) == misses
    jf(b)
    assert thunder.cache_misses(jf) == misses + 1


def test_cache_size_limit_is_a_used_compile_option(capsys):
    jf = thunder.jit(add_one, cache_size_limit=4)
    jf(torch.randn(2))
    thunder.last_compile_options(jf)
    out = capsys.readouterr().out
    assert out.index("cache_size_limit=4") < out.index("Unused compile options:")


@pytest.mark.parametrize("bad", [0, -1, 2.5, "8"])
def test_bad_cache_size_limit_is_rejected(bad):
    with pytest.raises(ThunderValueError, match="cache_size_limit must be a positive int"):
        thunder.jit(add_one, cache_size_limit=bad)


def _generated_names() -> set[str]:
    return {name for name in linecache.cache if name.startswith("thunder.")}


def test_generated_code_leaves_linecache_with_its_function():
    before = _generated_names()
    jf = thunder.jit(add_one)
    jf(torch.randn(3))
    mine = _generated_names() - before  # other tests' functions may be collected meanwhile: count only ours
    assert mine
    del jf
    gc.collect()
    assert not mine & _generated_names()


@pytest.mark.filterwarnings("ignore::thunder.RecompileWarning")
def test_evicted_entries_free_their_linecache_entries_without_gc():
    before = generated_lines()
    jf = thunder.jit(add_one, cache="constant values", cache_size_limit=4)
    gc.disable()  # freed by reference counting when evicted, not by a later collection
    try:
        for n in range(1, 60):
            jf(torch.randn(n))
        grown = generated_lines() - before
    finally:
        gc.enable()
    # Each live entry: its (diagnostic) prologue, its computation and its prologue fused with the computation.
    assert grown <= 4 * 3


def test_the_fused_prologue_is_compiled_when_an_entry_is_reused():
    # Note [The fused prologue is compiled on reuse]: an entry that runs once compiles no fused prologue.
    before = _generated_names()
    jf = thunder.jit(add_one)
    x = torch.randn(3)
    torch.testing.assert_close(jf(x), x + 1)
    assert not any("_fused_" in name for name in _generated_names() - before)
    for _ in range(3):
        torch.testing.assert_close(jf(x), x + 1)
    assert any("_fused_" in name for name in _generated_names() - before)
    assert thunder.cache_hits(jf) == 3 and thunder.cache_misses(jf) == 1
    y = torch.randn(4)  # the fused prologue rejects another shape: a miss, then a new entry
    torch.testing.assert_close(jf(y), y + 1)
    assert thunder.cache_misses(jf) == 2


def test_recompile_storm_warns_once_with_the_reason():
    jf = thunder.jit(add_one, cache="constant values")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(1, 101):
            jf(torch.randn(n))
    storm = [w for w in caught if issubclass(w.category, thunder.RecompileWarning)]
    assert len(storm) == 1
    message = str(storm[0].message)
    assert "add_one" in message
    assert "x shape changed" in message
    assert "cache='symbolic values'" in message
    assert storm[0].filename == __file__  # points at the call


def test_recompile_warning_of_a_module_points_at_the_call():
    tm = thunder.jit(torch.nn.Linear(3, 2), recompile_warning_limit=2)
    with pytest.warns(thunder.RecompileWarning, match="Linear has been compiled 2 times") as record:
        for n in (1, 2):
            tm(torch.randn(n, 3))
    assert record[0].filename == __file__


def test_recompile_warning_limit_is_configurable():
    jf = thunder.jit(scale, recompile_warning_limit=3, cache="constant values")  # each n compiles
    x = torch.randn(2)
    with pytest.warns(thunder.RecompileWarning, match=r"n value changed 2 -> 3"):
        for n in (1, 2, 3):
            jf(x, n)


def test_reading_the_counts_does_not_bring_the_recompile_warning_forward():
    jf = thunder.jit(scale, recompile_warning_limit=3, cache="constant values")
    x = torch.randn(2)
    jf(x, 1)
    for _ in range(5):
        assert thunder.cache_misses(jf) == 1 and thunder.cache_hits(jf) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", thunder.RecompileWarning)
        jf(x, 2)  # the second compilation of three
    assert thunder.cache_misses(jf) == 2
    with pytest.warns(thunder.RecompileWarning, match=r"n value changed 2 -> 3"):
        jf(x, 3)


def test_recompile_warning_is_a_user_warning():
    assert issubclass(thunder.RecompileWarning, UserWarning)


# --- cache_miss_reasons -----------------------------------------------------------------------------


def reasons(jf) -> list[str]:
    return [str(r) for r in thunder.cache_miss_reasons(jf)]


def test_first_miss_is_the_first_call():
    jf = thunder.jit(add_one)
    jf(torch.randn(2))
    assert reasons(jf) == ["first call: nothing was compiled yet"]


def test_hits_add_no_reason():
    jf = thunder.jit(add_one)
    x = torch.randn(2)
    jf(x)
    jf(x)
    assert len(thunder.cache_miss_reasons(jf)) == 1


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda x: torch.randn(5), "x shape changed (4,) -> (5,)"),
        (lambda x: x.double(), "x dtype changed torch.float32 -> torch.float64"),
        (lambda x: x.clone().requires_grad_(), "x requires_grad changed False -> True"),
        (lambda x: 3, "x type changed Tensor -> int"),
    ],
    ids=["shape", "dtype", "requires_grad", "type"],
)
def test_tensor_miss_names_the_input_the_check_and_both_values(change, expected):
    jf = thunder.jit(add_one, cache="constant values")
    x = torch.randn(4)
    jf(x)
    try:
        jf(change(x))
    except Exception:
        pass  # the new input may not be valid for the program: the reason is recorded before tracing
    assert reasons(jf)[-1] == expected


def test_reason_fields():
    jf = thunder.jit(add_one)
    jf(torch.randn(4))
    jf(torch.randn(5))
    reason = thunder.cache_miss_reasons(jf)[-1]
    assert isinstance(reason, thunder.CacheMissReason)
    assert (reason.input, reason.check, reason.expected, reason.actual) == ("x", "shape", (4,), (5,))


def test_python_number_miss():
    jf = thunder.jit(scale)
    x = torch.randn(2)
    jf(x, 2)
    jf(x, 3)
    jf(x, 3.0)
    changed, retyped = reasons(jf)[1:]
    assert changed.startswith("n value changed 2 -> 3; the sizes and numbers that changed are symbolic in this entry")
    assert retyped == "n type changed int -> float"
    jf(x, 4)  # the int entry has n symbolic (automatic dynamic shapes): no compile
    assert thunder.cache_misses(jf) == 3


@pytest.mark.parametrize("to_one", [lambda jf: jf(torch.randn(2), 1), lambda jf: jf(torch.randn(1), 5)], ids=["int", "size"])
def test_a_change_to_one_says_it_stays_constant(to_one):
    """0 and 1 are specialised (as torch.compile does): the reason does not say the value became symbolic."""
    jf = thunder.jit(scale)
    jf(torch.randn(2), 5)
    to_one(jf)
    assert "stays constant in this entry" in reasons(jf)[-1]
    assert "symbolic in this entry" not in reasons(jf)[-1]


def test_argument_structure_miss():
    jf = thunder.jit(scale)
    x = torch.randn(2)
    jf(x, 2)
    jf(x, n=2)
    assert reasons(jf)[-1] == "args length changed 2 -> 1"


def test_miss_on_a_module_parameter_names_its_prologue_input():
    model = torch.nn.Linear(4, 3)
    tm = thunder.jit(model)
    tm(torch.randn(2, 4))
    model.weight = torch.nn.Parameter(torch.randn(3, 4, dtype=torch.float64))
    try:
        tm(torch.randn(2, 4))
    except Exception:
        pass
    last = thunder.cache_miss_reasons(tm)[-1]
    assert (last.check, last.expected, last.actual) == ("dtype", torch.float32, torch.float64)
    assert last.input.endswith("weight")


GLOBAL_N = 2


def uses_global(x):
    return x * GLOBAL_N


def test_global_miss():
    global GLOBAL_N
    jf = thunder.jit(uses_global)
    x = torch.randn(2)
    jf(x)
    try:
        GLOBAL_N = 5
        torch.testing.assert_close(jf(x), x * 5)
    finally:
        GLOBAL_N = 2
    last = thunder.cache_miss_reasons(jf)[-1]
    assert (last.check, last.expected, last.actual) == ("value", 2, 5)
    assert "GLOBAL_N" in last.input


def branchy(x, n):
    return x * n if n > 2 else x - n


def test_symbolic_constraint_miss():
    jf = thunder.jit(branchy, cache="symbolic values")
    x = torch.randn(2)
    jf(x, 5)
    jf(x, 7)  # same constraints: a hit
    jf(x, 1)
    last = thunder.cache_miss_reasons(jf)[-1]
    assert (last.input, last.check) == ("n", "constraint")
    assert str(last) == "constraint n > 2 no longer holds (n is 1)"


def reads_strides(x):
    return x * x.stride()[0]


def test_guard_expression_miss_names_the_part_that_changed():
    jf = thunder.jit(reads_strides)
    jf(torch.randn(3, 4))
    jf(torch.randn(4, 3).t())
    assert reasons(jf)[-1] == "x.stride() changed (4, 1) -> (1, 3)"


def add(a, b):
    return a + b


def test_alias_miss():
    jf = thunder.jit(add)
    x = torch.randn(3)
    jf(x, x)
    jf(x, x.clone())
    assert reasons(jf)[-1] == "b is no longer the same object as a"


def test_no_caching_reason():
    jf = thunder.jit(add_one, cache="no caching")
    jf(torch.randn(2))
    jf(torch.randn(2))
    assert reasons(jf) == ["cache='no caching': every call compiles"] * 2


@pytest.mark.filterwarnings("ignore::thunder.RecompileWarning")
def test_cache_miss_reasons_keeps_the_last_64():
    jf = thunder.jit(add_one, cache="constant values")
    for n in range(1, 101):
        jf(torch.randn(n))
    got = reasons(jf)
    assert len(got) == 64
    assert got[-1] == "x shape changed (99,) -> (100,)"


def test_cache_miss_reasons_of_a_plain_function_is_a_type_error():
    with pytest.raises(TypeError, match="not a function returned by thunder.jit"):
        thunder.cache_miss_reasons(add_one)


def test_cache_miss_reasons_is_public_and_documented():
    assert "cache_miss_reasons" in thunder.__all__
    assert "Returns" in thunder.cache_miss_reasons.__doc__
