"""thunder.jit for functions: results, traces, the query API, errors."""

from __future__ import annotations

import dis
import re
import sys

import pytest
import torch

import thunder
from thunder.core.errors import ThunderValueError, UnsupportedOpError


def f(a, b):
    c = a + b
    d = torch.sin(c) * 2.0
    return d - b


def test_matches_eager():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    torch.testing.assert_close(thunder.jit(f)(a, b), f(a, b))


def test_last_traces_start_with_the_program_and_end_with_what_runs():
    jf = thunder.jit(f)
    jf(torch.randn(3), torch.randn(3))
    traces = thunder.last_traces(jf)
    names = [t.provenance.pass_name for t in traces]
    assert names == [
        "Interpretation",
        "Dead Code Elimination",
        "Common Subexpression Elimination",
        "Transform for execution",
        "Delete Last Used",
    ]
    assert len({id(t) for t in traces}) == len(traces)  # each trace once
    # the last trace is the one that runs: its callable is the cache entry's computation
    assert thunder.compile_stats(jf).entries[-1].computation is traces[-1].python_callable()


def test_trace_prints_as_runnable_python_with_provenance_and_decompositions():
    jf = thunder.jit(f, executors=["torch"])  # a fusion prints as a call of its callable, not as runnable text
    a, b = torch.randn(3), torch.randn(3)
    jf(a, b)
    first, last = thunder.last_traces(jf)[0], thunder.last_traces(jf)[-1]
    text = str(first)
    assert re.match(r"# Constructed by Interpretation \(took \d+ milliseconds\)", text)
    assert "t0 = ltorch.add(a, b)" in text
    assert "# t0 = prims.add(a, b)" in text  # the decomposition, as a comment
    assert "test_jit.py:" in text and "c = a + b" in text  # the user's source line
    dce_text = str(thunder.last_traces(jf)[1])
    assert dce_text.startswith("# Constructed by Dead Code Elimination (took ")
    # the printed text of the executed trace runs and gives the same result
    namespace: dict = {}
    exec(str(last).replace("_Tensor", "torch.Tensor"), namespace)
    torch.testing.assert_close(namespace["computation"](a, b), f(a, b))


def test_printed_language_trace_runs_eagerly():
    jf = thunder.jit(f)
    a, b = torch.randn(3), torch.randn(3)
    jf(a, b)
    namespace: dict = {}
    exec(str(thunder.last_traces(jf)[0]), namespace)
    torch.testing.assert_close(namespace["computation"](a, b), f(a, b))


def test_bound_symbols_carry_source_and_lineage():
    jf = thunder.jit(f)
    jf(torch.randn(3), torch.randn(3))
    traces = thunder.last_traces(jf)
    first_uids = {b.uid for b in traces[0].bound_symbols}
    executed = [b for b in traces[3].bound_symbols if b.sym.name not in ("python_return", "unpack_trivial")]
    for bsym in executed:
        assert bsym.lineage and set(bsym.lineage) <= first_uids | {b.uid for b in traces[2].bound_symbols}
    add = traces[0].bound_symbols[2]  # after the parameters' unpack_trivial
    assert add.source.lineno == f.__code__.co_firstlineno + 1
    assert add.source.function == "f"


def test_dce_removes_unused_and_cse_merges_repeats():
    def g(x):
        unused = torch.exp(x)  # noqa: F841
        y = torch.sin(x)
        z = torch.sin(x)
        return y + z

    jg = thunder.jit(g)
    x = torch.randn(4)
    torch.testing.assert_close(jg(x), g(x))
    traces = thunder.last_traces(jg)
    assert "exp" in str(traces[0]) and "exp" not in str(traces[1])
    assert str(traces[1]).count("ltorch.sin(") == 2
    assert str(traces[2]).count("ltorch.sin(") == 1


def test_delete_last_used_frees_intermediates():
    jf = thunder.jit(f, executors=["torch"])
    jf(torch.randn(3), torch.randn(3))
    text = str(thunder.last_traces(jf)[-1])
    assert "del t0" in text


def test_query_api():
    jf = thunder.jit(f, executors=["torch"], my_option=3)
    jf(torch.randn(2), torch.randn(2))
    cd = thunder.compile_data(jf)
    assert [e.name for e in cd.executors_list][:1] == ["torch"]
    assert thunder.cache_option(jf) is thunder.CACHE_OPTIONS.CONSTANT_VALUES
    assert thunder.compile_stats(jf).cache_misses == 1
    assert thunder.list_transforms(jf) == []
    assert len(thunder.last_prologue_traces(jf)) >= 1
    assert thunder.last_backward_traces(jf) == []
    instructions = thunder.last_interpreted_instructions(jf)
    assert instructions and all(isinstance(i, dis.Instruction) for i in instructions)
    assert any(i.opname == "BINARY_OP" for i in instructions)


def test_last_compile_options_reports_unused(capsys):
    jf = thunder.jit(f, my_option=3)
    jf(torch.randn(2), torch.randn(2))
    thunder.last_compile_options(jf)
    out = capsys.readouterr().out
    assert "Unused compile options:" in out and "my_option=3" in out


def test_interpreter_log_with_debug_option():
    jf = thunder.jit(f, debug_options=thunder.DebugOptions(record_interpreter_history=True))
    jf(torch.randn(2), torch.randn(2))
    log = thunder.last_interpreter_log(jf)
    assert any(isinstance(e, dis.Instruction) for e in log)
    assert len(log) > len(thunder.last_interpreted_instructions(jf))


def test_debug_options_register_option():
    thunder.DebugOptions.register_option("test_only_flag", bool, False, "for a test")
    assert thunder.DebugOptions(test_only_flag=True).test_only_flag is True
    with pytest.raises(ValueError, match="unknown option"):
        thunder.DebugOptions(not_an_option=1)


def test_from_thunder_import_star():
    namespace: dict = {}
    exec("from thunder import *", namespace)
    for name in ("jit", "last_traces", "cache_hits", "CACHE_OPTIONS", "DebugOptions"):
        assert name in namespace


def test_unknown_executor_name_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown executor 'nope'.*torch"):
        thunder.jit(f, executors=["nope"])


def test_unsupported_torch_function_names_it_and_the_line():
    def uses_gammainc(x):
        return torch.special.gammainc(x, x)

    with pytest.raises(UnsupportedOpError) as excinfo:
        thunder.jit(uses_gammainc)(torch.randn(4))
    message = str(excinfo.value)
    assert "gammainc" in message and "test_jit.py:" in message and "torchsymbol" in message


def test_bad_input_error_names_op_argument_and_line():
    def bad(a, b):
        return a + b

    with pytest.raises(ThunderValueError) as excinfo:
        thunder.jit(bad)(torch.randn(3, 4), torch.randn(5))
    message = str(excinfo.value)
    assert "ltorch.add" in message and "must match" in message and "return a + b" in message


def test_user_exceptions_propagate_as_themselves():
    class MyError(Exception):
        pass

    def raises(x):
        if x.shape[0] == 3:
            raise MyError("three")
        return x

    with pytest.raises(MyError, match="three"):
        thunder.jit(raises)(torch.randn(3))


def test_data_dependent_control_flow_follows_each_calls_values():
    def branch(x):
        if x.sum() > 0:
            return x
        return -x

    jf = thunder.jit(branch)
    for x in (torch.ones(3), -torch.ones(3), torch.ones(3)):
        torch.testing.assert_close(jf(x), branch(x))


def test_python_control_flow_on_metadata_and_containers():
    def g(xs, scale, *, flip=False):
        out = []
        for i, x in enumerate(xs):
            y = x * scale if i % 2 == 0 else x - scale
            out.append(-y if flip else y)
        return {"sum": out[0] + out[1], "parts": tuple(out)}

    xs = [torch.randn(3), torch.randn(3), torch.randn(3)]
    jg = thunder.jit(g)
    expected = g(xs, 2.0, flip=True)
    actual = jg(xs, 2.0, flip=True)
    torch.testing.assert_close(actual, expected)
    assert thunder.cache_misses(jg) == 1
    jg(xs, 2.0, flip=True)
    assert thunder.cache_hits(jg) == 1


def test_closure_and_nested_function():
    w = torch.randn(3)

    def outer(x):
        def inner(y):
            return y * w

        return inner(x) + 1

    x = torch.randn(3)
    torch.testing.assert_close(thunder.jit(outer)(x), outer(x))


def test_inplace_on_input_is_visible_to_the_caller():
    def g(x, y):
        x.add_(y)
        x.mul_(2)
        return x + 1

    x, y = torch.randn(3), torch.randn(3)
    xe = x.clone()
    expected = g(xe, y)
    actual = thunder.jit(g)(x, y)
    torch.testing.assert_close(actual, expected)
    torch.testing.assert_close(x, xe)


def test_augmented_assignment_mutates_in_place():
    def g(x):
        x += 1
        x *= 3
        return x

    x = torch.randn(3)
    xe = x.clone()
    torch.testing.assert_close(thunder.jit(g)(x), g(xe))
    torch.testing.assert_close(x, xe)


def test_jit_of_non_callable_is_a_type_error():
    with pytest.raises(TypeError, match="function or torch.nn.Module"):
        thunder.jit(3)


def test_query_on_plain_function_is_a_clear_error():
    with pytest.raises(TypeError, match="not a function returned by thunder.jit"):
        thunder.last_traces(f)


def test_check_traces_verifies_every_pass():
    jf = thunder.jit(f, debug_options=thunder.DebugOptions(check_traces=True))
    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(jf(a, b), f(a, b))


def test_verifier_catches_use_before_definition():
    from thunder.core.errors import InternalError
    from thunder.core.verifier import verify

    jf = thunder.jit(f)
    jf(torch.randn(3), torch.randn(3))
    trace = thunder.last_traces(jf)[1]
    broken = trace.bound_symbols[:2] + trace.bound_symbols[3:]  # drop the op that defines t0
    trace.bound_symbols = broken
    with pytest.raises(InternalError, match="uses 't0' before it is defined"):
        verify(trace)


def test_unsupported_tensor_method_names_it_and_how_to_add_it():
    def g(x):
        return x.share_memory_()

    with pytest.raises(UnsupportedOpError, match=r"Tensor.share_memory_ is not supported.*test_jit.py:\d+.*method_name='share_memory_'"):
        thunder.jit(g)(torch.randn(2))


def test_returns_keep_namedtuple_and_structseq_types():
    import collections

    Pair = collections.namedtuple("Pair", "a b")

    def g(x):
        return torch.max(x, dim=0), Pair(x + 1, x - 1)

    x = torch.randn(3, 4)
    result, pair = thunder.jit(g)(x)
    expected, _ = g(x)
    assert type(result) is type(expected) and isinstance(pair, Pair)
    torch.testing.assert_close(result.values, expected.values)
    torch.testing.assert_close(pair.b, x - 1)


def test_a_failure_while_tracing_leaves_the_recorded_ops_visible():
    def g(a, b):
        c = torch.sin(a)
        return c + b  # shapes do not broadcast

    jg = thunder.jit(g)
    with pytest.raises(ValueError):
        jg(torch.randn(3), torch.randn(4))
    (partial,) = thunder.last_traces(jg)
    assert partial.provenance.pass_name == "Interpretation (incomplete)"
    assert "ltorch.sin(a)" in str(partial)


def test_every_language_symbol_is_reachable_by_its_printed_name():
    # printed traces say ``ltorch.<name>(...)``: running them needs thunder.torch.<name> to be that symbol
    from thunder.core.symbol import Symbol

    for sym in set(s for s in thunder.torch.torch_to_thunder_map.values() if isinstance(s, Symbol)):
        assert getattr(thunder.torch, sym.name, None) is sym, sym.name


def test_a_returned_dataclass_with_tensors_inside_containers_holds_tensors():
    import dataclasses

    @dataclasses.dataclass
    class Out:
        pair: tuple
        extra: dict
        t: torch.Tensor

    def f(x):
        return Out((x * 2, 1), {"y": [x + 1]}, x - 1)

    x = torch.ones(2)
    for _ in range(2):
        got, want = thunder.jit(f)(x), f(x)
        assert type(got.pair[0]) is torch.Tensor and type(got.extra["y"][0]) is torch.Tensor
        torch.testing.assert_close(got.pair[0], want.pair[0])
        torch.testing.assert_close(got.extra["y"][0], want.extra["y"][0])
        assert got.pair[1] == 1


def test_the_compiling_call_lets_go_of_its_inputs():
    """The tracer and the interpreted function refer to each other: the first (compiling) call kept
    its inputs alive until the garbage collector ran, also when tracing failed (found by
    lightning-thunder's leak tests)."""
    import gc
    import weakref

    def fails(x):
        raise ValueError("while tracing")

    recording = thunder._recording_inputs()  # the explorer's reruns keep the last inputs on purpose
    thunder._record_last_inputs(False)
    gc.disable()
    try:
        for jf in (thunder.jit(lambda x: x * 2), thunder.jit(fails)):
            x = torch.randn(3)
            ref = weakref.ref(x)
            try:
                jf(x)
            except ValueError:
                pass
            del x
            assert ref() is None
    finally:
        gc.enable()
        thunder._record_last_inputs(recording)


def test_the_garbage_collector_is_paused_while_compiling_and_restored():
    """Note [No garbage collection while compiling]: on during calls, off while tracing, as the user left it."""
    import gc

    seen = []

    def f(x):
        seen.append(gc.isenabled())  # runs while tracing
        return x + 1

    assert gc.isenabled()
    thunder.jit(f)(torch.randn(2))
    assert seen == [False] and gc.isenabled()
    gc.disable()
    try:
        thunder.jit(f)(torch.randn(2))
        assert not gc.isenabled()  # the user's choice stays
    finally:
        gc.enable()


def _cyclic_garbage_of(run) -> list:
    """The objects in reference cycles that ``run()`` makes and leaves (found by a full collection after it).
    Objects older than ``run()`` are not counted: a cycle an earlier test made (a module whose hook closes over
    it) may be let go meanwhile by a cache that held it."""
    import gc

    gc.collect()
    older = gc.get_objects()  # held: none of them can become garbage meanwhile
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        run()
        gc.collect()
        return [type(o).__name__ for o in gc.garbage]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        del older


_SURVIVORS_TO_OLDEST = pytest.mark.skipif(
    sys.version_info[:2] != (3, 11),
    reason="a compile's objects go to the oldest generation on Python 3.11 only (cycles are left on 3.12)",
)


@_SURVIVORS_TO_OLDEST
def test_a_compile_leaves_no_cyclic_garbage():
    """Note [No garbage collection while compiling]: what a compile leaves is moved to the oldest generation
    unscanned, which is right only because a compile leaves no reference cycles (a cycle holding a call's tensors
    would keep them until a full collection). Recursive closures, an interpreted generator closed early (``any``
    over a generator expression) and tracebacks held by the interpreter's frames all made some."""

    def f(x, m):
        if any(d > 1 for d in x.shape):  # a generator expression closed early
            x = x + torch.tensor([1, 2.0, 3])  # torch.tensor's data walked
        return m(x).relu() * 2

    m = torch.nn.Linear(3, 3)
    assert _cyclic_garbage_of(lambda: thunder.jit(f)(torch.randn(2, 3), m)) == []
    jm = thunder.jit(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.GELU(), torch.nn.Linear(4, 1)))
    assert _cyclic_garbage_of(lambda: jm(torch.randn(2, 3)).sum().backward()) == []
    transformers = pytest.importorskip("transformers")
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=100, n_positions=64)
    model = thunder.jit(transformers.GPT2LMHeadModel(config).eval())
    ids = torch.randint(0, 100, (1, 5))
    generate = lambda: model.generate(ids, max_new_tokens=3, do_sample=False, pad_token_id=0)  # noqa: E731
    assert _cyclic_garbage_of(generate) == []
    assert thunder.cache_misses(model) == 2


@_SURVIVORS_TO_OLDEST
def test_a_compile_moves_its_objects_to_the_oldest_generation_but_leaves_frozen_objects_frozen():
    import gc

    def f(x):
        return x * 2 + 1

    gc.collect()
    thunder.jit(f)(torch.randn(2))
    assert gc.get_count()[0] < 100  # the compile's objects are no longer young
    frozen = [object() for _ in range(3)]
    gc.freeze()
    try:
        count = gc.get_freeze_count()
        thunder.jit(f)(torch.randn(2))
        assert gc.get_freeze_count() > count // 2  # not released (a few frozen temporaries are freed meanwhile)
    finally:
        gc.unfreeze()
    del frozen
