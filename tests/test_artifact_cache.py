"""The on-disk cache of compiled regions (Note [The artifact cache] in ``thunder.executors.artifact_cache``): a second
process loads what the first compiled, and nothing compiled under other versions, code or options is reused."""

from __future__ import annotations

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
