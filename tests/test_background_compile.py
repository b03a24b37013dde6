"""torchcompile_background: a region runs torch's kernels until a worker process has compiled it;
no call waits for Inductor, and every call matches eager PyTorch."""

from __future__ import annotations

import dataclasses
import functools
import os
import subprocess
import sys
import threading
import time

import pytest
import torch

import thunder
from thunder.executors import inductor_pool, torch_compile
from thunder.executors.inductor_worker import Job, TensorSpec


def chain(a, b):
    c = a * b + 1.0
    d = torch.sin(c) - b
    return torch.exp(d) * 0.5, d * d


def mlp_loss(x, w1, w2):
    return (torch.nn.functional.gelu(x @ w1) @ w2).tanh().sum()


def regions(trace) -> list[torch_compile._Compiled]:
    return [b.sym.python_impl for b in trace.bound_symbols if b.sym.name.startswith("TorchCompile")]


@pytest.fixture
def at_once(monkeypatch):
    """Regions are submitted on their first call and a compiled graph is kept without a trial."""
    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 0.0)
    monkeypatch.setattr(torch_compile, "TRIAL_CALLS", 0)


@pytest.fixture
def no_compile_here(monkeypatch):
    """Compiling in this process fails the test: the background mode compiles in a worker."""

    def here(fn, args):
        raise AssertionError("compiled in the calling process")

    monkeypatch.setattr(torch_compile, "_compile", here)


def test_first_calls_run_uncompiled_until_the_region_has_run_long_enough(no_compile_here, monkeypatch):
    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 3600.0)
    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    submitted = inductor_pool.counts()[0]
    for _ in range(3):
        for g, e in zip(jf(a, b), chain(a, b)):
            torch.testing.assert_close(g, e, rtol=0, atol=0)  # torch's kernels: eager's values exactly
    (region,) = regions(thunder.last_traces(jf)[-1])
    assert region.status() == "warming up"
    assert inductor_pool.counts()[0] == submitted


def test_building_a_regions_code_is_not_counted_as_its_run(no_compile_here, monkeypatch):
    """Note [The warm-up samples its calls]: the first call counts its run, not the build of the region's Python
    function (which took a generation's prefill regions past ``COMPILE_AFTER_S`` on their only call, and the job's
    printing and pickling onto the caller's thread during the first generation)."""
    from thunder.core import trace as trace_module

    compile_source = trace_module.compile_source

    def slow(*args, **kwargs):
        time.sleep(0.1)
        return compile_source(*args, **kwargs)

    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 0.05)
    monkeypatch.setattr(trace_module, "compile_source", slow)
    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    submitted = inductor_pool.counts()[0]
    for g, e in zip(jf(a, b), chain(a, b)):
        torch.testing.assert_close(g, e, rtol=0, atol=0)
    (region,) = regions(thunder.last_traces(jf)[-1])
    assert region.status() == "warming up"
    assert inductor_pool.counts()[0] == submitted


def test_a_hot_region_is_compiled_by_a_worker_forward_and_backward(no_compile_here, at_once):
    x = torch.randn(4, 8)
    w1, w2 = torch.randn(8, 16, requires_grad=True), torch.randn(16, 3, requires_grad=True)
    jf = thunder.jit(mlp_loss, executors=["torchcompile_background"])
    for _ in range(2):  # the first call submits both regions; the second runs them compiled
        got = jf(x, w1, w2)
        got_grads = torch.autograd.grad(got, (w1, w2))
        assert inductor_pool.wait(timeout=600)
        expected = mlp_loss(x, w1, w2)
        torch.testing.assert_close(got, expected)
        for g, e in zip(got_grads, torch.autograd.grad(expected, (w1, w2))):
            torch.testing.assert_close(g, e)
    compiled = [*regions(thunder.last_traces(jf)[-1]), *regions(thunder.last_backward_traces(jf)[-1])]
    assert len(compiled) == 2
    assert [r.status() for r in compiled] == ["compiled", "compiled"]
    assert thunder.cache_misses(jf) == 1


def test_a_regions_job_is_the_code_its_calls_ran_not_printed_again(monkeypatch):
    # The job sends the source and context of the region's uncompiled code, printed when the region first ran (printing
    # the region again cost a T5 training step's first 100 calls 10 ms); a worker compiles it to eager's values above.
    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 3600.0)
    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    jf(a, b)
    (region,) = regions(thunder.last_traces(jf)[-1])
    ran = region._uncompiled_trace.python_callable()
    printed = []
    monkeypatch.setattr(torch_compile, "trace_source", lambda *a, **k: printed.append(1))
    job = region._job((TensorSpec.of(a), TensorSpec.of(b)), True)
    assert printed == [] and job.source == ran.__thunder_source__ and "del " in job.source
    assert job.function_name == region.region_trace.function_name
    assert job.ctx == {k: v for k, v in ran.__globals__.items() if k != "__builtins__" and k not in job.references}


def test_a_job_is_made_on_a_pool_thread_not_the_callers(no_compile_here, at_once, monkeypatch):
    # Note [A job is made on the pool's thread]: the call that submits a region pays only its inputs' signature.
    real_job = torch_compile._Compiled._job
    made_on = []

    def recording(self, inputs, grad_enabled):
        made_on.append(threading.current_thread())
        return real_job(self, inputs, grad_enabled)

    monkeypatch.setattr(torch_compile._Compiled, "_job", recording)
    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    with torch.no_grad():
        for g, e in zip(jf(a, b), chain(a, b)):
            torch.testing.assert_close(g, e, rtol=0, atol=0)
    assert inductor_pool.wait(timeout=600)
    assert made_on and threading.main_thread() not in made_on
    (region,) = regions(thunder.last_traces(jf)[-1])
    assert region.status() == "compiled"  # the job made on the pool thread kept the call's grad mode (no_grad)
    with torch.no_grad():
        for g, e in zip(jf(a, b), chain(a, b)):
            torch.testing.assert_close(g, e)  # Inductor's kernels: eager's values to float rounding


def test_a_region_that_cannot_be_sent_runs_uncompiled_with_the_reason(no_compile_here, at_once, monkeypatch):
    real_job = torch_compile._Compiled._job

    def unpicklable(self, inputs, grad_enabled):
        job = real_job(self, inputs, grad_enabled)
        return dataclasses.replace(job, ctx={**job.ctx, "f": lambda: None})

    monkeypatch.setattr(torch_compile._Compiled, "_job", unpicklable)
    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    for _ in range(2):
        for g, e in zip(jf(a, b), chain(a, b)):
            torch.testing.assert_close(g, e, rtol=0, atol=0)
    assert inductor_pool.wait(timeout=600)  # the job is made and found unpicklable on a pool thread
    (region,) = regions(thunder.last_traces(jf)[-1])
    assert region.status().startswith("uncompiled: cannot be sent to a compile worker")
    for g, e in zip(jf(a, b), chain(a, b)):
        torch.testing.assert_close(g, e, rtol=0, atol=0)


def exit_now():
    """Called by the worker while it traces a job (see below): the worker dies mid-job."""
    os._exit(3)


def test_a_worker_that_dies_is_reported_and_replaced():
    answers = []
    done = threading.Event()

    def record(compiled, reason):
        answers.append((compiled, reason))
        done.set()

    source = "def region(x):\n  exit_now()\n  return (x,)\n"
    job = Job(source, "region", {"exit_now": exit_now}, {}, (TensorSpec.of(torch.ones(2)),), False, "")
    inductor_pool.submit(job, record)
    assert done.wait(timeout=600)
    ((compiled, reason),) = answers
    assert compiled is None and "the compile worker exited with code 3" in reason
    # the next job gets a new worker
    done.clear()
    job = dataclasses.replace(job, source="def region(x):\n  return (x * 2,)\n", ctx={})
    inductor_pool.submit(job, record)
    assert done.wait(timeout=600)
    (compiled, constants), reason = answers[1]
    assert reason is None and constants == []
    torch.testing.assert_close(tuple(compiled(torch.ones(2))), (torch.full((2,), 2.0),))


def test_threads_share_a_region_while_it_compiles(at_once):
    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(16, 8), torch.randn(16, 8)
    expected = chain(a, b)
    errors = []

    def calls():
        try:
            for _ in range(50):
                for g, e in zip(jf(a, b), expected):
                    torch.testing.assert_close(g, e)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=calls) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert inductor_pool.wait(timeout=600)
    (region,) = regions(thunder.last_traces(jf)[-1])
    assert region.status() == "compiled"  # one signature, submitted once


def test_exit_does_not_wait_for_a_compilation():
    script = (
        "import torch, thunder\n"
        "from thunder.executors import inductor_pool, inductor_worker\n"
        "job = inductor_worker.Job('def region(x):\\n  import time; time.sleep(600)\\n  return (x,)\\n', 'region', {}, {},\n"
        "    (inductor_worker.TensorSpec.of(torch.ones(2)),), False, '')\n"
        "inductor_pool.submit(job, lambda compiled, reason: None)\n"
        "assert not inductor_pool.wait(timeout=5)\n"  # the worker is busy sleeping
        "print('exiting')\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "exiting"


def with_a_constant(x):
    return (x * torch.tensor(3.0) + 1).sin(), x.cos()


def test_a_region_with_a_tensor_constant_compiles(no_compile_here, at_once):
    # make_fx keeps torch.tensor(3.0) as a graph attribute, which a saved artifact loses: the
    # loaded graph asked for one input more than the region has (GPT-2's first region did).
    jf = thunder.jit(with_a_constant, executors=["torchcompile_background"])
    x = torch.randn(8)
    jf(x)
    assert inductor_pool.wait(timeout=600)
    for g, e in zip(jf(x), with_a_constant(x)):
        torch.testing.assert_close(g, e)
    (region,) = regions(thunder.last_traces(jf)[-1])
    assert region.status() == "compiled"


def biased(x, b):
    return (x + b).sin().sum()


def test_every_region_of_a_training_step_reaches_a_worker(no_compile_here, at_once):
    # The backward reduces the broadcast gradient of b (prims.sum), whose reference impl was a
    # closure: the region could not be pickled and stayed uncompiled (GPT-2's backward did).
    x, b = torch.randn(4, 8), torch.randn(8, requires_grad=True)
    jf = thunder.jit(biased, executors=["torchcompile_background"])
    for _ in range(2):
        (got,) = torch.autograd.grad(jf(x, b), b)
        assert inductor_pool.wait(timeout=600)
    (expected,) = torch.autograd.grad(biased(x, b), b)
    torch.testing.assert_close(got, expected)
    compiled = [*regions(thunder.last_traces(jf)[-1]), *regions(thunder.last_backward_traces(jf)[-1])]
    assert compiled and all(r.status() == "compiled" for r in compiled), [r.status() for r in compiled]


def checking_layouts(fn, job):
    """``fn`` checking its inputs' sizes and strides against the job's first, as Inductor's graph does (Note [One
    signature needs no key])."""

    def checked(*args):
        for a, spec in zip(args, job.inputs):
            if isinstance(a, torch.Tensor) and (tuple(a.shape), a.stride()) != (spec.shape, spec.stride):
                raise AssertionError(f"expected size {spec.shape} and stride {spec.stride}")
        return fn(*args)

    return checked


@pytest.mark.parametrize("slower", ["compiled", "torch's kernels"])
def test_the_faster_of_the_compiled_graph_and_torchs_kernels_stays(monkeypatch, slower):
    # Inductor's wrapper can cost more than a small region's kernels (ResNet's forward was slower
    # with its regions compiled than with the torch executor alone): a new graph is on trial first.
    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 0.0)

    def slowly(fn):
        @functools.wraps(fn)  # (it stands for the region's code: a job sends its source)
        def slow(*args):
            time.sleep(0.002)
            return fn(*args)

        return slow

    submitted = []

    def compiled_at_once(make_job, done):  # a worker's answer, without a worker
        job = make_job()  # as the pool makes it (Note [A job is made on the pool's thread])
        submitted.append(job)
        region = done.func.__self__
        uncompiled = region.region_trace.python_callable()
        if slower == "compiled":
            done((checking_layouts(slowly(uncompiled), job), []), None)
        else:
            region._uncompiled_trace._callable = slowly(uncompiled)
            done((checking_layouts(uncompiled, job), []), None)

    monkeypatch.setattr(inductor_pool, "submit", compiled_at_once)
    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    jf(a, b)
    (region,) = regions(thunder.last_traces(jf)[-1])
    assert region.status() == "compiled, on trial"
    for _ in range(2 * (torch_compile.TRIAL_CALLS + 1)):
        for g, e in zip(jf(a, b), chain(a, b)):
            torch.testing.assert_close(g, e, rtol=0, atol=0)
    if slower == "compiled":
        assert region.status().startswith("uncompiled: torch's kernels were faster")
    else:
        assert region.status() == "compiled"
    # Other strides: a signature of its own, compiled unless torch's kernels won already (then
    # calls no longer pay for a signature).
    transposed = torch.randn(8, 4).t()
    for _ in range(2):
        for g, e in zip(jf(transposed, b), chain(transposed, b)):
            torch.testing.assert_close(g, e)
    assert len(submitted) == (1 if slower == "compiled" else 2)


def test_a_graph_faster_by_less_than_the_regions_call_keeps_torchs_kernels(monkeypatch):
    # Torch's kernels, once kept, run inline without the region's call, which a compiled graph goes on paying: a trial
    # counts it (Note [A trial times what the caller pays]). Here the graph saves 2 ms and the call costs 50 ms.
    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 0.0)
    monkeypatch.setattr(torch_compile, "region_call_s", lambda: 0.05)

    def compiled_at_once(make_job, done):
        job = make_job()  # as the pool makes it (Note [A job is made on the pool's thread])
        region = done.func.__self__
        uncompiled = region.region_trace.python_callable()

        def slow(*args):
            time.sleep(0.002)
            return uncompiled(*args)

        region._uncompiled_trace._callable = slow
        done((checking_layouts(uncompiled, job), []), None)

    monkeypatch.setattr(inductor_pool, "submit", compiled_at_once)
    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    for _ in range(2 * (torch_compile.TRIAL_CALLS + 2)):
        for g, e in zip(jf(a, b), chain(a, b)):
            torch.testing.assert_close(g, e, rtol=0, atol=0)
    (region,) = regions(thunder.last_traces(jf)[-1])
    assert region.status().startswith("uncompiled: torch's kernels were faster"), region.status()


@pytest.mark.parametrize("name", ["gpt2", "resnet"])
def test_a_model_under_the_default_executors_matches_eager_once_compiled(no_compile_here, at_once, name):
    """The default executors' regions, once workers have compiled them, give eager's outputs and
    gradients: GPT-2 (attention, layer norm, GELU) and ResNet in training mode (batch norm with
    its running statistics updated in place between regions)."""
    from tests import zoo

    call = zoo.CALL_MODES["plain"](zoo.ZOO[name])
    model, reference = zoo.build(name), zoo.build(name)
    jm = thunder.jit(model)
    assert [e.name for e in thunder.compile_data(jm).executors_list][0] == "torchcompile_background"
    params, ref_params = list(model.parameters()), list(reference.parameters())
    for _ in range(2):  # the first call submits every region; the second runs them compiled
        got = call.pick(jm(**call.kwargs))
        grads = torch.autograd.grad(got.sum(), params)
        expected = call.pick(reference(**call.kwargs))
        ref_grads = torch.autograd.grad(expected.sum(), ref_params)
        assert inductor_pool.wait(timeout=600)
    compiled = [*regions(thunder.last_traces(jm)[-1]), *regions(thunder.last_backward_traces(jm)[-1])]
    assert compiled and all(r.status() == "compiled" for r in compiled), [r.status() for r in compiled]
    torch.testing.assert_close(got, expected)
    for g, e in zip(grads, ref_grads):
        torch.testing.assert_close(g, e)
    for b, e in zip(model.buffers(), reference.buffers()):
        torch.testing.assert_close(b, e)


def test_a_warming_region_frees_its_intermediates_after_their_last_use():
    # While a region runs torch's kernels it must hold no more memory than the torch executor's trace: a region
    # that kept every intermediate to its end made a GPT-2 forward 10-18% slower than the torch executor.
    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    for expected, actual in zip(chain(a, b), jf(a, b)):
        torch.testing.assert_close(actual, expected)
    (region,) = regions(thunder.last_traces(jf)[-1])
    returned = {p.name for p in region.region_trace.bound_symbols[-1].flat_proxy_args}
    made = {p.name for b in region.region_trace.bound_symbols for p in b.flat_proxy_outs} - returned
    freed = {p.name for b in region._uncompiled_trace.bound_symbols if b.sym.name == "python_del" for p in b.flat_proxy_args}
    assert made and made <= freed


def worker_priority() -> str:
    """Called by the worker while it traces a job (see below)."""
    return f"niceness {os.nice(0)}, compile threads {os.environ.get('TORCHINDUCTOR_COMPILE_THREADS')}"


def test_a_compile_worker_yields_the_cpu_to_the_caller(monkeypatch):
    # Note [Compile workers do not starve the caller]: beside other work, a worker at normal priority compiling
    # C++ kernels in parallel jobs took the caller's time (a training loop 2.4x slower than the torch executor's).
    monkeypatch.setattr(inductor_pool, "NICENESS", 15)
    pool, answers, done = inductor_pool._Pool(), [], threading.Event()
    try:
        source = "def region(x):\n  raise RuntimeError(worker_priority())\n"
        job = Job(source, "region", {"worker_priority": worker_priority}, {}, (TensorSpec.of(torch.ones(2)),), False, "")
        pool.submit(job, lambda compiled, reason: (answers.append(reason), done.set()))
        assert done.wait(timeout=600)
    finally:
        pool.close()
    assert answers and f"niceness {min(19, os.nice(0) + 15)}, compile threads 1" in answers[0]


def counting_in_place(x, w, counter):
    counter.add_(1)  # batch norm's num_batches_tracked, beside the ops a region takes
    y = torch.relu(x @ w)
    y.mul_(2.0)  # an intermediate updated in place
    return torch.tanh(y) + 1.0


def test_an_in_place_op_runs_whole_beside_the_regions():
    # Its out-of-place part taken into a region left a copy_ after it: two kernels instead of torch's one while the
    # region runs uncompiled (ResNet's training step: 1.05x the torch executor's time).
    x, w = torch.randn(4, 8), torch.randn(8, 8)
    counter, expected_counter = torch.zeros((), dtype=torch.int64), torch.zeros((), dtype=torch.int64)
    jf = thunder.jit(counting_in_place, executors=["torchcompile_background"])
    for _ in range(2):
        torch.testing.assert_close(jf(x, w, counter), counting_in_place(x, w, expected_counter))
    assert counter.item() == expected_counter.item() == 2
    trace = thunder.last_traces(jf)[-1]
    names = [b.sym.name for b in trace.bound_symbols]
    assert "Tensor.add_" in names and "Tensor.mul_" in names, names
    assert not any("copy_" in n for n in names), names
    assert regions(trace)
