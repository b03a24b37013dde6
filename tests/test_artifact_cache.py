"""The on-disk cache of compiled regions (Note [The artifact cache] in ``thunder.executors.artifact_cache``): a second
process loads what the first compiled, and nothing compiled under other versions, code or options is reused."""

from __future__ import annotations

import inspect
import tempfile
import threading

import pytest
import torch

from thunder.executors import artifact_cache, inductor_pool
from thunder.executors.inductor_worker import Job, TensorSpec


def _job(source: str = "def region(x):\n  return (torch.sin(x) * 2,)\n", **changes) -> Job:
    job = Job(source, "region", {}, {"torch": "torch"}, (TensorSpec.of(torch.ones(3)),), False, "")
    return Job(**{**job.__dict__, **changes})


def _compile_in_a_fresh_pool(job: Job, *, workers_allowed: bool = True):
    """What a new process's pool answers for ``job`` (a pool that cannot start workers when told)."""
    pool, answers, done = inductor_pool._Pool(), [], threading.Event()
    if not workers_allowed:
        pool._start = lambda: (_ for _ in ()).throw(OSError("no worker may start in this test"))
    try:
        pool.submit(job, lambda compiled, reason: (answers.append((compiled, reason)), done.set()))
        assert done.wait(timeout=600)
    finally:
        pool.close()
    return answers[0]


def test_a_second_process_loads_what_the_first_compiled():
    x = torch.randn(3)
    (compiled, constants), reason = _compile_in_a_fresh_pool(_job())
    assert reason is None
    torch.testing.assert_close(tuple(compiled(x, *constants))[0], torch.sin(x) * 2)
    # A new pool that cannot start a worker (as a second process would not need one) still gets the graph.
    (compiled, constants), reason = _compile_in_a_fresh_pool(_job(), workers_allowed=False)
    assert reason is None
    torch.testing.assert_close(tuple(compiled(x, *constants))[0], torch.sin(x) * 2)


@pytest.mark.parametrize(
    "change",
    [
        {"source": "def region(x):\n  return (torch.cos(x) * 2,)\n"},  # other code
        {"inputs": (TensorSpec.of(torch.ones(4)),)},  # another input signature
        {"grad_enabled": True},  # another option
    ],
    ids=["code", "signature", "grad mode"],
)
def test_another_job_gets_another_key(change):
    assert artifact_cache.key_of(_job()) != artifact_cache.key_of(_job(**change))


def test_another_compiler_gets_another_key(monkeypatch):
    key = artifact_cache.key_of(_job())
    monkeypatch.setattr(artifact_cache, "_fingerprint", artifact_cache._compiler_fingerprint())
    assert artifact_cache.key_of(_job()) == key  # the same versions, code and options: the same key
    monkeypatch.setattr(torch, "__version__", "0.0.0-other")
    monkeypatch.setattr(artifact_cache, "_fingerprint", artifact_cache._compiler_fingerprint())
    assert artifact_cache.key_of(_job()) != key


def test_a_changed_library_gets_another_key(monkeypatch, tmp_path):
    library = tmp_path / "my_library_for_the_cache_test.py"
    library.write_text("def f(x):\n    return x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    job = _job(references={"f": "my_library_for_the_cache_test:f"})
    key = artifact_cache.key_of(job)
    library.write_text("def f(x):\n    return x + 1  # a new version\n")
    assert artifact_cache.key_of(job) != key


def test_no_cache_directory_keeps_nothing(monkeypatch):
    monkeypatch.setattr(artifact_cache, "CACHE_DIR", None)
    assert _compile_in_a_fresh_pool(_job())[1] is None
    assert artifact_cache.load(artifact_cache.key_of(_job())) is None


# Note [A compiled graph is loaded where it pays] (in thunder.executors.inductor_pool)


def test_the_worker_times_the_compiled_graph_against_torchs_kernels(monkeypatch):
    (compiled, constants), reason = _compile_in_a_fresh_pool(_job())
    assert reason is None
    (_, _, times) = artifact_cache.load(artifact_cache.key_of(_job()))
    compiled_s, uncompiled_s = times
    assert 0 < compiled_s < 1 and 0 < uncompiled_s < 1


def _store_measured(job, compiled_s: float, uncompiled_s: float) -> None:
    """A real artifact of ``job`` on disk, stored again with these timings as what the worker measured."""
    key = artifact_cache.key_of(job)
    _compile_in_a_fresh_pool(job)
    path, constants, _ = artifact_cache.load(key)
    with open(path, "rb") as f:
        artifact = f.read()
    staged = tempfile.mktemp()
    with open(staged, "wb") as f:
        f.write(artifact)
    artifact_cache.store(key, staged, constants, (compiled_s, uncompiled_s))


@pytest.mark.parametrize(
    "compiled_us, loaded_one, expected",
    [
        (50, True, None),  # (with no graph loaded yet it waits: test_the_first_load_waits_until_it_has_paid)
        (95, False, "the compiled graph saved less than 10%, not worth loading Inductor, "),
        (95, True, None),  # the first load's seconds are paid already: any gain pays
        (150, False, "torch's kernels were faster than the compiled graph "),
        (150, True, "torch's kernels were faster than the compiled graph "),
    ],
)
def test_a_graph_is_loaded_only_where_the_worker_measured_it_faster(monkeypatch, compiled_us, loaded_one, expected):
    # What the worker measured is kept with the artifact: a second process decides without importing Inductor.
    monkeypatch.setattr(inductor_pool, "LOAD_IF_FASTER", 0.9)
    job = _job()
    _store_measured(job, compiled_us * 1e-6, 100e-6)
    loads = []
    real_load = inductor_pool._load
    monkeypatch.setattr(inductor_pool, "_load", lambda p: loads.append(p) or real_load(p))
    monkeypatch.setattr(inductor_pool, "_loaded_one", lambda: loaded_one)
    compiled, reason = _compile_in_a_fresh_pool(job, workers_allowed=False)
    if expected is None:
        assert reason is None and len(loads) == 1
        x = torch.randn(3)
        torch.testing.assert_close(tuple(compiled[0](x, *compiled[1]))[0], torch.sin(x) * 2)
    else:
        assert compiled is None and loads == []
        assert reason == f"{expected}in the compile worker (100 µs a call against {compiled_us} µs compiled)"


def test_a_region_whose_graph_does_not_pay_settles_on_torchs_kernels(monkeypatch):
    # The worker's verdict ends the region's compiling: calls run its ops inline (Note [A settled region runs
    # inline]), with eager's values, and no other signature is submitted.
    import thunder
    from thunder.executors import torch_compile

    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 0.0)
    submitted = []

    def not_paying(job, done):
        submitted.append(job)
        done(None, "torch's kernels were faster than the compiled graph in the compile worker (1 µs against 2 µs)")

    monkeypatch.setattr(inductor_pool, "submit", not_paying)

    def chain(a, b):
        return torch.exp(torch.sin(a * b + 1.0) - b) * 0.5

    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    for x in (a, torch.randn(8, 4).t()):
        for _ in range(2):
            torch.testing.assert_close(jf(x, b), chain(x, b), rtol=0, atol=0)
    (region,) = [s.sym.python_impl for s in thunder.last_traces(jf)[-1].bound_symbols if s.sym.name.startswith("TorchCompile")]
    assert region.status().startswith("uncompiled: torch's kernels were faster than the compiled graph")
    assert region._settled is not None and len(submitted) == 1
    inlined = thunder.last_traces(jf)[-1].python_callable().__thunder_inlined__
    assert "TorchCompile" not in inspect.getsource(inlined)


@pytest.fixture
def no_graph_loaded(monkeypatch):
    """A process that has loaded no graph yet (Note [The first load waits until it has paid])."""
    monkeypatch.setattr(inductor_pool, "LOAD_IF_FASTER", 0.9)
    monkeypatch.setattr(inductor_pool, "_loaded", [])
    monkeypatch.setattr(inductor_pool, "_waiting", [])
    monkeypatch.setattr(inductor_pool, "_first_load_started", False)
    monkeypatch.setattr(inductor_pool, "_owed_s", 0.0)


def test_the_first_load_waits_until_it_has_paid(monkeypatch, no_graph_loaded):
    # Note [The first load waits until it has paid]: a graph the worker measured faster waits on disk until the calls
    # that ran torch's kernels instead would have saved FIRST_LOAD_S; then the graphs waiting load.
    job = _job()
    _store_measured(job, 50e-6, 100e-6)
    monkeypatch.setattr(inductor_pool, "_loaded", [])
    loads, loaded = [], threading.Event()
    real_load = inductor_pool._load
    monkeypatch.setattr(inductor_pool, "_load", lambda p: loads.append(p) or real_load(p))
    pool, answers = inductor_pool._Pool(), []
    pool._start = lambda: (_ for _ in ()).throw(OSError("no worker may start in this test"))
    try:
        pool.submit(job, lambda compiled, reason: (answers.append((compiled, reason)), len(answers) == 2 and loaded.set()))
        assert pool.wait(timeout=600)
        ((waiting, reason),) = answers
        assert isinstance(waiting, inductor_pool.Deferred) and reason is None and loads == []
        assert waiting.gain_s == pytest.approx(50e-6)
        calls = int(inductor_pool.FIRST_LOAD_S / waiting.gain_s)
        for _ in range(calls - 10):
            inductor_pool.owe(waiting.gain_s)
        assert loads == [] and not loaded.is_set()
        for _ in range(20):
            inductor_pool.owe(waiting.gain_s)
        assert loaded.wait(timeout=600)
    finally:
        pool.close()
    (compiled, constants), reason = answers[1]
    assert reason is None and len(loads) == 1
    x = torch.randn(3)
    torch.testing.assert_close(tuple(compiled(x, *constants))[0], torch.sin(x) * 2)


def test_a_region_whose_graph_waits_runs_torchs_kernels_then_the_graph(monkeypatch, no_graph_loaded):
    import thunder
    from thunder.executors import torch_compile

    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 0.0)
    monkeypatch.setattr(torch_compile, "TRIAL_CALLS", 0)
    monkeypatch.setattr(inductor_pool, "FIRST_LOAD_S", 1e-3)
    graph_calls = []

    def answer(job, done):
        waiting = inductor_pool.Deferred("unused", [], 4e-4)  # three calls owe the first load
        done(waiting, None)
        waiting.wait(done)

    monkeypatch.setattr(inductor_pool, "submit", answer)

    def chain(a, b):
        return torch.exp(torch.sin(a * b + 1.0) - b) * 0.5

    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(jf(a, b), chain(a, b), rtol=0, atol=0)
    (region,) = [s.sym.python_impl for s in thunder.last_traces(jf)[-1].bound_symbols if s.sym.name.startswith("TorchCompile")]
    graph = region.region_trace.python_callable()
    monkeypatch.setattr(inductor_pool, "_load", lambda path: (lambda *a: graph_calls.append(1) or graph(*a)))
    assert region.status() == "compiled, waiting to load"
    for _ in range(3):
        torch.testing.assert_close(jf(a, b), chain(a, b), rtol=0, atol=0)
    assert graph_calls == []
    for _ in range(100):  # the load runs on its own thread
        if region.status() != "compiled, waiting to load":
            break
        threading.Event().wait(0.05)
    torch.testing.assert_close(jf(a, b), chain(a, b), rtol=0, atol=0)
    assert region.status() != "compiled, waiting to load" and graph_calls  # then on trial against torch's kernels
