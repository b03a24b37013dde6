"""Sessions: recorded inputs, reruns with other executors, eager agreement, errors with the user's line."""

from __future__ import annotations

import gc
import random
import re
import weakref

import pytest
import torch

import thunder
from tests.viz import session_stubs
from thunder_viz.session import ErrorInfo, Session, compare_leaves, compare_outputs, session_for, tolerance_of


@pytest.fixture(autouse=True)
def _graph(monkeypatch):
    session_stubs.install(monkeypatch)


def mul_sin(x, y):
    return x * y + torch.sin(x)


def bump_in_place(x):
    x.add_(1)
    return x * 2


def bad_matmul(a, b):
    c = a + 1
    return c @ b  # the user's failing line


def bad_index(x, i):
    y = x * 2
    return torch.index_select(y, 0, i)  # fails only when it runs


def _session(fn, *args, **kwargs) -> Session:
    session = Session(thunder.jit(fn))
    session(*args, **kwargs)
    return session


def test_call_records_inputs_and_registers_the_session():
    x, y = torch.randn(3, 4), torch.randn(3, 4)
    jf = thunder.jit(mul_sin)
    session = Session(jf)
    out = session(x, y)
    torch.testing.assert_close(out, mul_sin(x, y))
    assert session.args[0] is x and session.args[1] is y
    assert session_for(jf) is session
    assert session.executors == [e.name for e in (*thunder.get_default_executors(), *thunder.get_always_executors())]


def test_a_session_nothing_uses_does_not_keep_the_function_and_inputs_alive():
    jf = thunder.jit(mul_sin)
    x = torch.randn(2)
    Session(jf)(x, x)
    gc.collect()
    assert session_for(jf) is None
    jf_ref = weakref.ref(jf)
    del jf
    gc.collect()
    assert jf_ref() is None


def test_rerun_records_a_run_with_time_agreement_and_cache_counters():
    session = _session(mul_sin, torch.randn(3, 4), torch.randn(3, 4))
    session.max_repeats = 5
    run = session.rerun(["torch"])
    assert session.runs[1:] == [run] and session.runs[0].first_call
    assert run.id == "r2" and run.error is None and not run.first_call
    assert run.executors == ["torch", "python"]
    assert run.tolerance == "float32: atol 1e-05, rtol 1.3e-06"
    assert run.median_ms > 0 and 1 <= run.repeats <= 5
    assert run.compile_ms == thunder.compile_stats(session.jitted).last_compile_ms > 0  # its one compilation
    assert run.max_abs_diff == 0.0 and run.matches_eager is True
    assert run.cache_misses == 1 and run.cache_hits == run.repeats + 1  # warm-up and timed calls hit
    assert run.fusions == []  # the torch executor fuses nothing
    assert session_for(session.jitted) is session


def test_a_run_says_where_each_fusion_stood_when_it_ended(monkeypatch):
    # A background-compiled region is timed with torch's kernels until a worker has compiled it: the
    # run row says so rather than passing those times off as the compiled region's.
    from thunder.executors import torch_compile

    session = _session(mul_sin, torch.randn(3, 4), torch.randn(3, 4))
    session.max_repeats = 3
    warming = session.rerun(["torchcompile_background"])
    assert warming.fusions == [{"name": "TorchCompile0", "status": "warming up"}]
    monkeypatch.setattr(torch_compile, "_compile", lambda fn, args: fn)  # "compiled" at once, in-process
    compiled = session.rerun(["torchcompile"])
    assert compiled.fusions == [{"name": "TorchCompile0", "status": "compiled"}]
    assert session.to_document()["runs"][-1]["fusions"] == compiled.fusions


def test_rerun_replaces_the_jitted_callable_keeping_other_options():
    jf = thunder.jit(mul_sin, cache="no caching")
    session = Session(jf)
    session(torch.randn(2), torch.randn(2))
    session.max_repeats = 2
    run = session.rerun(["python"])
    assert session.jitted is not jf
    assert thunder.cache_option(session.jitted) is thunder.CACHE_OPTIONS.NO_CACHING
    assert run.cache_hits == 0 and run.cache_misses == run.repeats + 2


def test_reruns_clone_the_inputs_a_program_mutates():
    x = torch.zeros(3)
    session = _session(bump_in_place, x)
    assert torch.equal(x, torch.ones(3))  # the user's own call mutates, as eager would
    session.max_repeats = 3
    first = session.rerun(["torch"])
    second = session.rerun(["torch"])
    assert torch.equal(x, torch.ones(3))  # reruns and the eager reference work on clones
    assert first.matches_eager and second.matches_eager and first.max_abs_diff == 0.0
    assert [r.id for r in session.runs] == ["r1", "r2", "r3"]


class KeyCache:
    """A cache the program grows in place, as a decoding step of ``generate`` grows a ``DynamicCache``."""

    def __init__(self, keys):
        self.keys = keys


def decode_step(x, cache):
    cache.keys = torch.cat([cache.keys, x], dim=1)
    return cache.keys.sum(dim=1) * 2


def test_reruns_copy_an_input_object_the_program_grows():
    """A rerun after ``generate`` shared the decoding step's cache between its calls: it said "not
    comparable" with a cache miss on every call, and grew the user's cache on each rerun."""
    cache = KeyCache(torch.randn(2, 3))
    session = _session(decode_step, torch.randn(2, 1), cache)
    kept = cache.keys
    session.max_repeats = 3
    run = session.rerun(["torch"])
    assert run.error is None and run.matches_eager is True and run.not_comparable is None
    assert run.max_abs_diff == 0.0
    assert (run.cache_misses, run.cache_hits) == (1, run.repeats + 1)  # every call the same shapes
    assert cache.keys is kept and cache.keys.shape == (2, 4)  # the user's cache as the call left it


def test_the_document_says_which_cache_entry_its_steps_are():
    """After ``generate`` (a prefill entry, then one for the decoding steps) the explorer showed the last
    compilation's steps without saying that another entry exists, or which one it shows."""
    jitted = thunder.jit(mul_sin)
    session = Session(jitted)
    session(torch.randn(2, 3), torch.randn(2, 3))
    assert "entries" not in session.to_document()  # one entry: nothing to say
    session(torch.randn(5, 3), torch.randn(5, 3))
    entries = session.to_document()["entries"]
    inputs = [item["inputs"] for item in entries["items"]]
    assert len(inputs) == 2 and "x: cpu f32[2, 3]" in inputs[0]
    assert inputs[entries["shown"]].startswith("x: cpu f32[x_0, 3], y: cpu f32[y_0, 3]")
    shown = thunder.compile_stats(jitted).entries[entries["shown"]]
    assert shown.computation_traces[-1] is thunder.last_traces(jitted)[-1]


def test_a_symbolic_size_is_shown_by_its_name_not_the_size_it_was_traced_with():
    """The decoding entry of ``generate`` runs every KV-cache length, but the explorer showed the length it was
    traced with (``f32[1, 2, 8, 16]``), which reads as the one length it runs."""
    jitted = thunder.jit(mul_sin)
    session = Session(jitted)
    session(torch.randn(2, 3), torch.randn(2, 3))
    session(torch.randn(5, 3), torch.randn(5, 3))  # the first size changed: the new entry's is symbolic
    doc = session.to_document()
    shown = doc["entries"]["items"][doc["entries"]["shown"]]["inputs"]
    x = torch.randn(7, 3)
    torch.testing.assert_close(jitted(x, x), mul_sin(x, x))
    assert thunder.cache_misses(jitted) == 2, "the shown entry runs another size"
    assert "5" not in shown and "symbolic" in shown
    prologue = thunder.last_prologue_traces(jitted)[-1].python()
    computation = [s for s in doc["steps"] if s["kind"] == "computation"][-1]
    [x_ref] = [v for v in computation["inputs"] if v["name"] == "x"]
    size = re.fullmatch(r"cpu f32\[(\w+), 3\]", x_ref["repr"]).group(1)
    assert x_ref["shape"] is None and size in prologue and f"x: cpu f32[{size}, 3]" in shown
    outputs = [v for n in computation["nodes"] for v in n["outputs"] if v["kind"] == "tensor"]
    assert outputs and all("5" not in v["repr"] for v in outputs)


def test_the_call_that_compiled_is_the_first_run():
    session = Session(thunder.jit(mul_sin))
    session(torch.randn(3), torch.randn(3))
    [first] = session.runs
    assert first.first_call and first.id == "r1" and first.repeats == 1 and first.error is None
    assert first.median_ms >= first.compile_ms > 0  # timed once, with its compilation
    assert first.cache_misses == 1 and first.cache_hits == 0
    assert first.max_abs_diff is None and first.matches_eager is None  # eager was not run again
    assert first.executors == session.executors
    assert session.to_document()["runs"][0]["first_call"] is True


def test_a_first_call_that_fails_is_a_run_with_its_error():
    session = Session(thunder.jit(lambda x: x.no_such_method()))
    with pytest.raises(AttributeError):
        session(torch.randn(2))
    [first] = session.runs
    assert first.first_call and first.error is not None and first.error.type == "AttributeError"
    assert session.error is first.error


def test_tolerances_are_those_of_each_output_dtype():
    out = {"a": torch.ones(2), "b": (torch.ones(2, dtype=torch.bfloat16), torch.ones(2, dtype=torch.int64))}
    assert tolerance_of(out) == "float32: atol 1e-05, rtol 1.3e-06; bfloat16: atol 1e-05, rtol 0.016; int64: exact"
    assert tolerance_of(3.0) is None


def test_rerun_without_inputs_or_with_unknown_executor_is_a_clear_error():
    jf = thunder.jit(mul_sin)
    with pytest.raises(ValueError, match="inputs of its last call are unknown"):
        Session(jf).rerun(["torch"])
    session = _session(mul_sin, torch.randn(2), torch.randn(2))
    with pytest.raises(ValueError, match="unknown executors \\['fastest'\\]"):
        session.rerun(["fastest"])


def test_tracing_failure_names_the_users_line_and_keeps_the_incomplete_trace():
    session = Session(thunder.jit(bad_matmul))
    with pytest.raises(thunder.core.errors.ThunderValueError):
        session(torch.randn(2, 3), torch.randn(2, 3))
    error = session.error
    assert error.type == "ThunderValueError" and error.stage == "tracing"
    assert error.user_frame.file == __file__ and error.user_frame.function == "bad_matmul"
    assert error.user_frame.code == "return c @ b  # the user's failing line"
    doc = session.to_document()
    assert doc["error"]["user_frame"]["line"] == error.user_frame.line
    computation = [s for s in doc["steps"] if s["kind"] == "computation"]
    assert [s["pass"] for s in computation] == ["Interpretation (incomplete)"]
    assert computation[0]["nodes"], "the ops recorded before the failure are shown"
    assert "while tracing" in error.one_line() and "inner dimensions" in error.one_line()


def test_running_failure_maps_generated_code_back_to_the_users_line_and_keeps_steps():
    session = Session(thunder.jit(bad_index))
    session.args, session.kwargs = (torch.randn(2, 3), torch.tensor([5])), {}
    run = session.rerun(["torch"])
    assert run.error is session.error
    assert run.error.type == "IndexError" and run.error.stage == "running"
    assert run.error.user_frame.function == "bad_index"
    assert run.error.user_frame.code == "return torch.index_select(y, 0, i)  # fails only when it runs"
    assert run.median_ms is None and run.cache_misses == 1
    doc = session.to_document()
    assert doc["steps"], "the compilation completed: its steps stay"
    assert doc["runs"][0]["error"]["stage"] == "running"
    session_stubs.validate(doc)


def test_an_exception_raised_by_the_user_points_at_the_raise():
    def explode(x):
        raise ValueError("no negative inputs")

    session = Session(thunder.jit(explode))
    with pytest.raises(ValueError):
        session(torch.randn(2))
    assert session.error.user_frame.code == 'raise ValueError("no negative inputs")'
    assert session.error.message == "no negative inputs"


def test_document_lists_an_executor_that_cannot_run_here_with_its_reason():
    """Every registered executor is listed; one that cannot run on this machine carries its reason,
    which the explorer shows on its greyed-out toggle."""
    from thunder.extend import OperatorExecutor, deregister_executor, register_executor

    class NeedsAGpu(OperatorExecutor):
        @property
        def unavailable_reason(self):
            return "needs a CUDA device"

    ex = NeedsAGpu("needs_a_gpu")
    register_executor(ex)
    try:
        session = _session(mul_sin, torch.randn(2), torch.randn(2))
        doc = session.to_document()
        session_stubs.validate(doc)
        assert "needs_a_gpu" in doc["executors"]["available"]
        assert doc["executors"]["unavailable"]["needs_a_gpu"] == "needs a CUDA device"
        assert "torch" not in doc["executors"]["unavailable"]
    finally:
        deregister_executor(ex)


def test_document_lists_executors_and_runs():
    session = _session(mul_sin, torch.randn(2), torch.randn(2))
    session.max_repeats = 2
    session.rerun(["python"])
    doc = session.to_document()
    session_stubs.validate(doc)
    assert doc["title"] == "mul_sin"
    ex = doc["executors"]
    assert ex["available"][-2:] == ["torch", "python"] and "torchcompile" in ex["available"]
    assert ex["selected"] == ["python", "torch"] and ex["always"] == ["torch", "python"]
    assert ex["interactive"] is True and ex["reason"] is None
    assert [r["id"] for r in doc["runs"]] == ["r1", "r2"]
    assert {"median_ms", "repeats", "max_abs_diff", "matches_eager", "cache_hits", "cache_misses"} <= set(
        doc["runs"][0]
    )


def test_document_without_inputs_is_not_interactive_and_says_why():
    jf = thunder.jit(mul_sin)
    jf(torch.randn(2), torch.randn(2))
    doc = Session(jf).to_document()
    assert doc["executors"]["interactive"] is False
    assert "args=" in doc["executors"]["reason"]
    assert [s["kind"] for s in doc["steps"]][:1] == ["prologue"]


def test_module_session_reruns_the_module():
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh())
    tm = thunder.jit(model)
    session = Session(tm)
    session(torch.randn(2, 4))
    assert session.original is model and session.title == "Sequential"
    session.max_repeats = 2
    run = session.rerun(["torch"])
    assert run.error is None and run.matches_eager and run.max_abs_diff < 1e-6


@pytest.mark.parametrize(
    "actual, expected, diff, ok",
    [
        (torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.5]), 0.5, False),
        ((torch.tensor([1.0]), 3), (torch.tensor([1.0 + 1e-7]), 3), pytest.approx(1e-7, rel=0.2), True),
        (torch.tensor([float("nan")]), torch.tensor([float("nan")]), 0.0, True),
        (torch.tensor([1, 2]), torch.tensor([1, 3]), 1.0, False),
        (torch.ones(2), torch.ones(3), None, False),
        (torch.tensor([float("inf"), 1.0]), torch.tensor([float("inf"), 1.0]), 0.0, True),
        (torch.tensor([float("nan")]), torch.tensor([1.0]), None, False),
        ([torch.ones(1)], (torch.ones(1),), None, False),
        (
            torch.ones(2, dtype=torch.bfloat16),
            torch.ones(2, dtype=torch.bfloat16) * 1.0078125,
            pytest.approx(0.0078125),
            True,
        ),
    ],
)
def test_compare_outputs(actual, expected, diff, ok):
    assert compare_outputs(actual, expected) == (diff, ok)


def test_error_info_to_json_follows_the_schema():
    try:
        bad_matmul(torch.randn(2, 3), torch.randn(2, 3))
    except RuntimeError as exc:
        info = ErrorInfo.from_exception(exc)
    assert set(info.to_json()) == {"type", "message", "stage", "user_frame"}
    assert set(info.to_json()["user_frame"]) == {"file", "line", "function", "code"}


def _gpt2_outputs():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64, n_positions=16)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg).eval()
    ids = torch.randint(0, 64, (1, 8))
    return model, ids


def test_outputs_with_a_cache_are_compared_leaf_by_leaf():
    """A ModelOutput holding a DynamicCache used to be one opaque leaf: "NO" with no difference."""
    model, ids = _gpt2_outputs()
    jitted = thunder.jit(model)
    got, expected = jitted(ids), model(ids)
    assert compare_outputs(got, expected) == (0.0, True)
    got.logits[0, 0, 0] += 1.0
    worst, matches, where = compare_leaves(got, expected)
    assert (matches, where) == (False, "logits") and worst == pytest.approx(1.0)
    cache = got.past_key_values
    keys = cache.layers[0].keys if hasattr(cache, "layers") else cache.key_cache[0]
    got.logits[0, 0, 0] -= 1.0
    keys[0, 0, 0, 0] += 2.0
    worst, matches, where = compare_leaves(got, expected)
    assert not matches and where.split(".")[0] in ("past_key_values", "cache") and "keys" in where
    assert worst == pytest.approx(2.0)


def test_a_rerun_of_a_model_with_a_cache_matches_eager():
    model, ids = _gpt2_outputs()
    session = Session(thunder.jit(model))
    session(ids)
    run = session.rerun(["torch"])
    assert run.error is None and run.matches_eager is True and run.differs_at is None
    assert run.max_abs_diff == 0.0


def _gpt2_training():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=16)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(cfg)  # built from a config: in training mode, dropout on
    return model, torch.randint(0, 64, (2, 8))


def test_a_rerun_in_training_mode_runs_eager_from_the_same_random_state():
    """Dropout made a rerun say "NO (logits)", max |Δ| 0.46: eager ran from another random state."""
    model, ids = _gpt2_training()
    assert model.training
    first, second = model(ids).logits, model(ids).logits
    assert (first - second).abs().max() > 1e-2  # dropout draws: two eager calls differ
    session = Session(thunder.jit(model))
    session(ids)
    torch.manual_seed(7)
    before = torch.get_rng_state()
    run = session.rerun(["torch"])
    assert run.error is None and run.not_comparable is None
    assert run.matches_eager is True and run.differs_at is None and run.max_abs_diff < 1e-5
    assert torch.equal(torch.get_rng_state(), before)  # the notebook's random stream is left as it was


def noisy(x):
    return x + torch.rand_like(x) * random.random()  # Python's generator: eager draws anew every call


def jittery(x):
    return x * random.random()


@pytest.mark.parametrize(("fn", "note"), [(noisy, "random ops"), (jittery, "nondeterministic ops")])
def test_values_eager_does_not_reproduce_are_not_comparable_instead_of_no(fn, note):
    session = _session(fn, torch.ones(4))
    run = session.rerun(["torch"])
    assert run.error is None and run.matches_eager is None
    assert run.not_comparable == f"{note}: values not comparable"
    assert run.to_json()["not_comparable"] == run.not_comparable


def dropout_then_double(x):
    return torch.nn.functional.dropout(x, 0.5) * 2


def test_a_real_difference_with_random_ops_still_says_no():
    """"Not comparable" is said only when a side does not reproduce itself from the random state:
    a compiled program that differs from eager every time (here eager is made to differ) is NO."""
    session = _session(dropout_then_double, torch.ones(64))
    session._rejit = lambda executors: thunder.jit(dropout_then_double, executors=executors)
    session.original = lambda x: torch.nn.functional.dropout(x, 0.5) * 3  # eager "disagrees" every time
    run = session.rerun(["torch"])
    assert run.error is None and run.not_comparable is None
    assert run.matches_eager is False and run.max_abs_diff == pytest.approx(2.0)


class CountingScale(torch.nn.Module):
    """Its output depends on a buffer its forward updates (a step counter, as schedulers and EMA modules keep)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("steps", torch.zeros(()))

    def forward(self, x):
        self.steps += 1
        return x * self.steps


def test_a_rerun_of_a_module_that_updates_its_buffers_matches_eager_and_leaves_them():
    """The rerun's timed calls advanced the counter before eager ran: "NO" on a correct model, and the user's
    module was left with the explorer's updates."""
    model = CountingScale()
    session = Session(thunder.jit(model))
    session(torch.ones(3))
    assert model.steps.item() == 1
    run = session.rerun(["torch"])
    assert run.error is None and run.matches_eager is True and run.max_abs_diff == 0.0
    assert model.steps.item() == 1  # as the user's own call left it


def test_reruns_and_profiles_leave_batch_norm_statistics_as_they_were():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.ReLU())
    session = Session(thunder.jit(model))
    session(torch.randn(2, 3, 8, 8))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    run = session.rerun(["torch"])
    assert run.error is None and run.matches_eager is True
    session.profile(calls=2)
    after = model.state_dict()
    for k, v in before.items():
        assert torch.equal(after[k], v), k
