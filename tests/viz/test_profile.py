"""thunder_viz.profile: time and memory per statement of the traces that ran, per module, beside eager.

Checked against what is known to be true: a big matmul takes the time and allocates its output,
the compiled function runs its own code again afterwards, gradients and the random state are left
as they were, and the document maps each cost onto a node of the steps that ran.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

import thunder
import thunder_viz
from thunder_viz.graph import validate_document
from thunder_viz.profile import last_profile
from thunder_viz.session import Session

N = 384  # a matmul of N x N floats: milliseconds, and N*N*4 bytes of output


def big_and_small(a, b, c):
    return a @ b, c.sum() + 1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 32)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x))).square().mean()


def test_the_time_goes_to_the_matmul_and_its_output_is_the_memory_it_leaves():
    jf = thunder.jit(big_and_small, executors=["torch"])
    a, b, c = torch.randn(N, N), torch.randn(N, N), torch.randn(3)
    jf(a, b, c)
    p = thunder_viz.profile(jf, a, b, c, calls=2)
    assert not p.backward and p.calls == 2 and p.device == "cpu"
    ranked = p.top()
    assert [s.ms for s in ranked] == sorted((s.ms for s in p.statements), reverse=True)[: len(ranked)]
    [top] = [s for s in p.statements if "matmul" in s.op]
    rest = [s for s in p.statements if s is not top]
    assert top.kind == "computation" and top.ms > 0  # measured times are not compared: they flake under load
    assert top.bytes == N * N * 4, "a new N x N float32 tensor"
    assert sorted(s.bytes for s in rest) == [4, 4], "two new scalars"
    assert top.source.startswith("test_profile.py:") and "a @ b" in top.source
    assert 0 < p.attributed_ms() and p.call_ms > 0 and p.eager_call_ms > 0
    assert "matmul" in str(p)


def test_the_compiled_function_runs_its_own_code_again_after_profiling():
    jf = thunder.jit(big_and_small, executors=["torch"])
    a, b, c = torch.randn(8, 8), torch.randn(8, 8), torch.randn(3)
    jf(a, b, c)
    fn = thunder.last_traces(jf)[-1].python_callable()
    code = fn.__code__
    thunder_viz.profile(jf, a, b, c, calls=1)
    assert fn.__code__ is code
    with torch.autograd.profiler.profile() as prof:
        out = jf(a, b, c)
    assert not [e for e in prof.function_events if e.name.startswith("thunder:")]
    torch.testing.assert_close(out, big_and_small(a, b, c))
    assert thunder.cache_misses(jf) == 1, "profiling compiled nothing"


def test_training_profiles_forward_and_backward_and_leaves_gradients_and_random_state_alone():
    torch.manual_seed(0)
    model = Net()
    jm = thunder.jit(model, executors=["torch"])  # one node per op: every module has its own
    x = torch.randn(8, 16)
    jm(x).backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.fc2.bias.grad = None
    rng = torch.random.get_rng_state()
    p = thunder_viz.profile(jm, x, calls=2)
    assert p.backward
    assert {s.kind for s in p.statements} == {"computation", "backward"}
    for n, param in model.named_parameters():
        if n == "fc2.bias":
            assert param.grad is None
        else:
            assert torch.equal(param.grad, grads[n]), n
    assert torch.equal(torch.random.get_rng_state(), rng)
    modules = {m.path: m for m in p.modules}
    assert {"fc1", "act", "fc2"} <= set(modules)
    assert all(modules[k].eager_ms is not None and modules[k].eager_ms > 0 for k in ("fc1", "act", "fc2"))
    assert modules["fc1"].ms > 0 and modules["fc1"].backward_ms > 0
    # what the forward made and saved, read from the backward trace; less and less of it is still needed
    assert p.saved_bytes and p.saved_bytes_before_remat
    amounts = [b for _, b in p.saved_timeline]
    assert amounts[0] == p.saved_bytes and amounts == sorted(amounts, reverse=True)


def test_a_training_profile_with_outputs_the_loss_does_not_use_times_the_backward_that_runs():
    # A model returning its loss beside outputs without a gradient (logits, a cache) runs the backward made for them
    # (Note [Backward without the cotangents that are absent]); its profile ranged the full backward instead, which
    # never ran: the backward's statements all had 0 ms
    model = Net()

    def loss_and_logits(x):
        logits = model.fc2(model.act(model.fc1(x)))
        return logits.square().mean(), logits.exp()  # (the profile's backward is the scalar's only)

    jitted = thunder.jit(loss_and_logits, executors=["torch"])
    p = thunder_viz.profile(jitted, torch.randn(8, 16), calls=2)
    assert p.backward and p.attributed_ms("backward") > 0


class Block(nn.Module):
    """A big matmul's module beside a tiny one's."""

    def __init__(self):
        super().__init__()
        self.big = nn.Linear(N, N)
        self.small = nn.Linear(N, 2)

    def forward(self, x):
        h = self.big(x)
        return (h.sum() + self.small(x).sum()) / 2


class Tower(nn.Module):
    def __init__(self):
        super().__init__()
        self.block = Block()

    def forward(self, x):
        return self.block(x)


@pytest.fixture
def one_thread():
    """torch on one thread: on a loaded machine two threads wait milliseconds for each other on every
    op, which would bury a small op's time."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_eagers_backward_is_measured_per_module_beside_thunders(one_thread):
    torch.manual_seed(0)
    model = Tower()
    x = torch.randn(N, N)
    jm = thunder.jit(model, executors=["torch"])
    jm(x).backward()
    p = thunder_viz.profile(jm, x, calls=2)
    modules = {m.path: m for m in p.modules}
    big, small = modules["block.big"], modules["block.small"]
    assert big.eager_backward_ms > 0 and small.eager_backward_ms > 0 and big.backward_ms > 0
    # eager's backward of the modules fits in the block's (their ops run inside its range); no comparison of two
    # timings, which a loaded machine can turn around (the attribution itself: the fake events below)
    block = modules["block"].eager_backward_ms
    assert big.eager_backward_ms + small.eager_backward_ms <= block
    assert "eager bwd" in p.table()
    # no backward ran: nothing to compare
    with torch.no_grad():
        q = thunder_viz.profile(jm, x, calls=1)
    assert not q.backward and all(m.eager_backward_ms is None for m in q.modules)


class _LoadedClock:
    """The profile's clock (``thunder_viz.profile.time``), virtual: a call of thunder costs 2 ms and one of
    eager 1 ms, wall and CPU time alike, but the first ``loaded`` calls, whichever side made them, cost ten
    times as much (a load on the machine that goes away while profiling). Each reading charges the calls
    made since the last one: thunder's counted by its cache hits, eager's by the wrapper it calls."""

    COST_NS = {"thunder": 2_000_000, "eager": 1_000_000}

    def __init__(self, jitted, loaded: int, running: int = 1, compiling: int = 0):
        self.jitted, self.loaded, self.running = jitted, loaded, running  # CPU time: wall time / running
        self.compiling = compiling  # thunder's first calls cost ten times as much too: they compile
        self.now = self.made = self.thunder_calls = self.eager_calls = self.eager_seen = 0
        self.hits = thunder.cache_hits(jitted)

    def eager(self, fn):
        def counted(*args, **kwargs):
            self.eager_calls += 1
            return fn(*args, **kwargs)

        return counted

    def perf_counter_ns(self) -> int:
        hits = thunder.cache_hits(self.jitted)
        for side, n in (("thunder", hits - self.hits), ("eager", self.eager_calls - self.eager_seen)):
            for _ in range(n):
                compiles = side == "thunder" and self.thunder_calls < self.compiling
                self.now += self.COST_NS[side] * (10 if self.made < self.loaded or compiles else 1)
                self.made += 1
                self.thunder_calls += side == "thunder"
        self.hits, self.eager_seen = hits, self.eager_calls
        return self.now

    def thread_time_ns(self) -> int:
        return self.perf_counter_ns() // self.running

    def perf_counter(self) -> float:
        return self.perf_counter_ns() / 1e9


def test_a_load_that_goes_away_while_profiling_leaves_the_comparison_with_eager_true(monkeypatch):
    """Measuring all of thunder's calls, then all of eager's, put the load on thunder only: a compiled
    call ten times slower than eager's where it was twice as slow. Alternated calls share it."""
    import sys

    profile_module = sys.modules["thunder_viz.profile"]  # the package's ``profile`` is the function
    jf = thunder.jit(big_and_small, executors=["torch"])
    args = torch.randn(4, 4), torch.randn(4, 4), torch.randn(3)
    jf(*args)
    session = Session(jf, args=args, kwargs={})
    clock = _LoadedClock(jf, loaded=4)
    session.original = clock.eager(big_and_small)
    monkeypatch.setattr(profile_module, "time", clock)
    p = session.profile(calls=5)
    assert clock.made >= 10
    assert p.call_ms / p.eager_call_ms == pytest.approx(2.0), "thunder's calls cost twice eager's"
    assert p.call_cpu_ms / p.eager_call_cpu_ms == pytest.approx(2.0)
    assert p.unsteady and "load changed" in p.measured(), "the calls varied ten-fold: the profile says so"
    assert "5 rounds" in p.table()
    doc = session.to_document()
    validate_document(doc)
    assert doc["profile"]["unsteady"] and doc["profile"]["measured"] == p.measured()
    assert doc["profile"]["call_cpu_ms"] == pytest.approx(2.0)


def test_calls_that_wait_for_the_cpu_most_of_their_time_are_flagged(monkeypatch):
    """A loaded machine that stays loaded: the calls are steady, but their wall times are three times the
    CPU time they got, and the statements' wall times with them; the profile says to compare CPU times."""
    import sys

    jf = thunder.jit(big_and_small, executors=["torch"])
    args = torch.randn(4, 4), torch.randn(4, 4), torch.randn(3)
    jf(*args)
    session = Session(jf, args=args, kwargs={})
    clock = _LoadedClock(jf, loaded=0, running=3)
    session.original = clock.eager(big_and_small)
    monkeypatch.setattr(sys.modules["thunder_viz.profile"], "time", clock)
    p = session.profile(calls=3)
    assert p.call_ms / p.eager_call_ms == pytest.approx(2.0) and p.call_cpu_ms == pytest.approx(2 / 3)
    assert p.unsteady and "waited for the CPU" in p.measured() and "varied" not in p.measured()


def test_what_the_first_call_compiles_is_not_measured(monkeypatch):
    """A function called before (its forward compiled) whose next call compiles more (a backward's fusions
    compile on its first run): that call is not one of the measured ones."""
    import sys

    jf = thunder.jit(big_and_small, executors=["torch"])
    args = torch.randn(4, 4), torch.randn(4, 4), torch.randn(3)
    jf(*args)
    session = Session(jf, args=args, kwargs={})
    clock = _LoadedClock(jf, loaded=0, compiling=1)
    session.original = clock.eager(big_and_small)
    monkeypatch.setattr(sys.modules["thunder_viz.profile"], "time", clock)
    p = session.profile(calls=1)
    assert p.call_ms / p.eager_call_ms == pytest.approx(2.0)


class _Event:
    """What _backward_by_module reads of one of torch's profiler events."""

    def __init__(self, name, start, duration, seq=-1, fwd_thread=0):
        self._name, self._start, self._duration, self._seq, self._fwd = name, start, duration, seq, fwd_thread

    def name(self):
        return self._name

    def start_ns(self):
        return self._start

    def duration_ns(self):
        return self._duration

    def sequence_nr(self):
        return self._seq

    def fwd_thread_id(self):
        return self._fwd

    def start_thread_id(self):
        return 1


def test_a_statement_costs_its_median_over_the_calls_not_a_share_of_one_slow_call():
    from types import SimpleNamespace

    from thunder_viz.profile import _range_costs

    calls = [_Event("profiled call of thunder:", start, 1000) for start in (0, 1000, 2000)]
    # one statement per call, the second slowed by a burst of load; another that ran in two calls only
    ranges = [_Event("thunder:f1", 10, 2000), _Event("thunder:f1", 1010, 200_000), _Event("thunder:f1", 2010, 3000)]
    ranges += [_Event("thunder:f2", 20, 100), _Event("thunder:f2", 30, 100), _Event("thunder:f2", 1020, 50)]
    prof = SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: calls + ranges))
    costs = _range_costs(prof, "thunder:", cuda=False)
    assert costs["thunder:f1"][0] == 3.0, "µs: the median call's, not the mean's 68"
    assert costs["thunder:f2"][0] == 0.05, "µs: 0.2, 0.05 and none"


def test_on_cuda_a_statement_costs_its_median_over_the_calls_too():
    """The CUDA path reads torch's function events (kernel time by range); checked here without a device."""
    from types import SimpleNamespace

    from thunder_viz.profile import _range_costs

    def event(name, start, cpu_us=0.0, device_us=0.0, nbytes=0):
        return SimpleNamespace(
            name=name, time_range=SimpleNamespace(start=start, end=start + 900), cpu_time_total=cpu_us,
            device_time_total=device_us, device_memory_usage=nbytes, cpu_memory_usage=0,
        )  # fmt: skip

    events = [event("profiled call of thunder:", start) for start in (0, 1000, 2000)]
    events += [event("thunder:f1", 10 + start, 5.0, device_us, 64) for start, device_us in ((0, 7), (1000, 900), (2000, 9))]
    events.append(event("eager:fc", 20))  # the other side's: not a statement
    prof = SimpleNamespace(function_events=events)
    assert _range_costs(prof, "thunder:", cuda=True) == {"thunder:f1": (5.0, 9.0, 64)}


def test_a_backward_node_counts_in_the_module_of_the_op_that_made_it():
    from types import SimpleNamespace

    from thunder_viz.profile import _backward_by_module

    events = [
        _Event("eager:block", 0, 100),
        # a view of an input that needs no grad records the number of the next node without making it
        _Event("aten::view", 5, 1, seq=0),
        _Event("eager:block.big", 10, 50),
        _Event("aten::linear", 20, 10, seq=0),  # makes node 0
        _Event("aten::sum", 70, 5, seq=1),  # the block's own op: node 1
        _Event("autograd::engine::evaluate_function: SumBackward0", 200, 3000, seq=1, fwd_thread=1),
        _Event("autograd::engine::evaluate_function: AddmmBackward0", 300, 7000, seq=0, fwd_thread=1),
        _Event("autograd::engine::evaluate_function: AccumulateGrad", 400, 9, seq=-1, fwd_thread=1),
    ]
    prof = SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events))
    assert _backward_by_module(prof, "eager:") == {"block": 10.0, "block.big": 7.0}


def test_a_module_whose_ops_run_in_a_fusion_with_other_modules_names_that_fusion():
    """A fusion counts in the scope around all its ops (Note [A fusion across modules]): the profile of a small
    conv net said "bn 0.3 ms, eager 20 ms" and a backward of 0 ms for every module of a backward fused whole."""
    from thunder_viz.profile import StatementCost, _modules

    def statement(kind, op, ms, module, members=()):
        return StatementCost(kind, 0, op, ms, ms, 0.0, 0, module, "", member_modules=members)

    statements = [
        statement("computation", "batch_norm", 0.3, "block.bn"),
        statement("computation", "TorchCompile0", 5.0, "block", ("block.bn", "block.fc")),
        statement("backward", "TorchCompile1", 9.0, None, ("block.bn", "block.fc")),
    ]
    eager = {"block": 20.0, "block.bn": 6.0, "block.fc": 14.0}
    modules = {m.path: m for m in _modules(statements, eager, {"block": 30.0})}
    assert list(modules) == ["block", "block.bn", "block.fc"]
    block, bn, fc = modules.values()
    assert block.ms == pytest.approx(5.3)  # its own statements, the fusion and bn's batch_norm
    assert (block.shared, block.backward_ms, block.backward_shared) == ([], 0.0, ["TorchCompile1"])
    assert (bn.ms, bn.shared, bn.backward_shared) == (0.3, ["TorchCompile0"], ["TorchCompile1"])
    assert (fc.ms, fc.shared, fc.eager_ms) == (0.0, ["TorchCompile0"], 14.0)


def test_the_table_and_the_document_say_which_module_times_are_partial():
    model = Net()
    x = torch.randn(8, 16)
    jm = thunder.jit(model)  # the defaults fuse fc2's and the loss's ops together
    jm(x).backward()
    p = thunder_viz.profile(jm, x, calls=1)
    doc = Session(jm, args=(x,)).to_document()
    validate_document(doc)
    by_path = {m["path"]: m for m in doc["profile"]["modules"]}
    fused = {m.path for m in p.modules if m.shared or m.backward_shared}
    assert fused and all(by_path[path]["shared"] or by_path[path]["backward_shared"] for path in fused)
    assert "+: and part of a fusion" in p.table()


def test_a_forward_only_profile_shows_no_backward_columns():
    model = Net().requires_grad_(False)
    x = torch.randn(8, 16)
    jm = thunder.jit(model, executors=["torch"])
    jm(x)
    p = thunder_viz.profile(jm, x, calls=1)
    assert not p.backward and p.modules
    assert "bwd" not in p.table(), "no backward ran: its columns would read as a backward costing 0 ms"


def test_a_profile_says_which_fusions_ran_torchs_kernels_while_warming_up():
    """Profiled right after the first call, the default executor's fusions were still warming up on torch's
    kernels: their times were shown as the fusions' with nothing saying so (Note [Fusions that ran torch's
    kernels while profiled])."""
    model = Net()
    x = torch.randn(8, 16)
    jm = thunder.jit(model)
    jm(x).backward()
    warming = [name for name, status in thunder.examine.fusion_status(jm) if status == "warming up"]
    assert warming  # a background-compiled region warms up for tens of calls
    p = thunder_viz.profile(jm, x, calls=1)
    assert [name for name, _ in p.uncompiled] == warming
    assert "Not compiled when the calls began: " + warming[0] in p.measured()
    doc = Session(jm, args=(x,)).to_document()
    assert set(doc["profile"]["uncompiled"]) == set(warming)
    on_torch = thunder.jit(Net(), executors=["torch"])  # no fusions: nothing to say
    on_torch(x).backward()
    q = thunder_viz.profile(on_torch, x, calls=1)
    assert q.uncompiled == [] and "Not compiled" not in q.measured()


def test_the_document_maps_costs_onto_the_nodes_of_the_steps_that_ran():
    model = Net()
    jm = thunder.jit(model)
    x = torch.randn(8, 16)
    jm(x).backward()
    session = Session(jm, args=(x,), kwargs={})
    p = session.profile(calls=1)
    doc = session.to_document()
    validate_document(doc)
    prof = doc["profile"]
    last = {s["kind"]: s for s in doc["steps"]}
    assert set(prof["steps"]) == {last["computation"]["id"], last["backward"]["id"]}
    for kind in ("computation", "backward"):
        step = last[kind]
        by_id = {n["id"]: n for n in step["nodes"]}
        costs = prof["steps"][step["id"]]["nodes"]
        assert costs and all(nid in by_id and by_id[nid]["fused_into"] is None for nid in costs)
        measured = {s.uid: s.ms for s in p.statements if s.kind == kind}
        assert {by_id[nid]["uid"] for nid in costs} == set(measured)
    saved = prof["saved"]
    assert saved["step"] == last["backward"]["id"] and saved["timeline"][0][1] == saved["bytes"]
    assert last_profile(jm) is p


def test_a_rerun_drops_the_profile_of_the_function_it_replaced():
    jm = thunder.jit(Net())
    x = torch.randn(8, 16)
    session = Session(jm)
    session(x)
    session.profile(calls=1)
    assert "profile" in session.to_document()
    session.max_repeats = 1
    session.rerun(["torch"])
    assert "profile" not in session.to_document()


def test_profiling_without_inputs_says_how_to_give_them():
    jm = thunder.jit(Net())
    jm(torch.randn(2, 16))
    with pytest.raises(ValueError, match="inputs of its last call are unknown"):
        Session(jm).profile()


def test_a_document_with_a_profile_of_an_unknown_step_is_refused():
    jf = thunder.jit(big_and_small, executors=["torch"])
    a = torch.randn(4, 4)
    session = Session(jf, args=(a, a, a), kwargs={})
    jf(a, a, a)
    session.profile(calls=1)
    doc = session.to_document()
    doc["profile"]["steps"]["s999"] = {"total_ms": 1.0, "nodes": {}}
    with pytest.raises(thunder_viz.graph.DocumentError, match="no step has this id"):
        validate_document(doc)


def test_profiling_a_new_function_or_new_inputs_profiles_what_those_inputs_run():
    jf = thunder.jit(big_and_small, executors=["torch"])
    p = thunder_viz.profile(jf, torch.randn(8, 8), torch.randn(8, 8), torch.randn(3), calls=1)  # never called
    assert max(s.bytes for s in p.statements) == 8 * 8 * 4
    p = thunder_viz.profile(jf, torch.randn(32, 32), torch.randn(32, 32), torch.randn(3), calls=1)  # compiles again
    assert p.traces["computation"] is thunder.last_traces(jf)[-1]
    assert max(s.bytes for s in p.statements) == 32 * 32 * 4
    assert all(s.ms > 0 for s in p.statements), "every statement was measured"


def test_the_profiler_log_lines_are_dropped_and_other_output_kept(capfd):
    import os
    import sys

    from thunder_viz.profile import _without_profiler_log

    with _without_profiler_log():
        os.write(2, b"USDT:2026-12-05 12:00:00 1:1 SyncActivityProfilerHandler.cpp:52] profiler_start\n")
        os.write(2, b"a warning of the program\n")
    sys.stderr.flush()
    err = capfd.readouterr().err
    assert "profiler_start" not in err and "a warning of the program" in err
    jf = thunder.jit(big_and_small, executors=["torch"])
    a = torch.randn(4, 4)
    thunder_viz.profile(jf, a, a, a, calls=1)
    assert "USDT" not in capfd.readouterr().err


def test_inputs_that_run_an_older_cache_entry_are_refused_not_shown_as_zeros():
    jf = thunder.jit(big_and_small, executors=["torch"], cache="constant values")
    single = torch.randn(4, 4), torch.randn(4, 4), torch.randn(3)
    jf(*single)
    jf(*(t.double() for t in single))  # the last compilation is for float64
    with pytest.raises(RuntimeError, match="cache entry compiled before the last compilation"):
        thunder_viz.profile(jf, *single, calls=1)


def _saved_by_torch(jm, model, *args):
    """What torch's autograd keeps for the backward of one call of ``jm``: the logical bytes of each
    saved tensor that is not a view of an input or a parameter (those hold no memory of their own)."""
    saved = []

    def pack(t):
        saved.append(t)
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        jm(*args)
    held = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers(), *args]}
    return sum(t.numel() * t.element_size() for t in saved if t.untyped_storage().data_ptr() not in held)


class TinyGPT2Loss(nn.Module):
    """A 2-layer GPT-2 and its loss: the forward's fusions return views of the input ids (the labels)."""

    def __init__(self):
        import transformers

        super().__init__()
        config = transformers.GPT2Config(
            n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=64, resid_pdrop=0, embd_pdrop=0, attn_pdrop=0
        )
        self.model = transformers.GPT2LMHeadModel(config)

    def forward(self, ids):
        return self.model(ids, labels=ids).loss


@pytest.mark.parametrize("make", [Net, TinyGPT2Loss], ids=["mlp", "gpt2"])
def test_the_saved_for_backward_bytes_are_what_torchs_autograd_saves(make):
    torch.manual_seed(0)
    model = make()
    x = torch.randn(8, 16) if make is Net else torch.randint(0, 128, (2, 16))
    jm = thunder.jit(model)
    jm(x).backward()
    p = thunder_viz.profile(jm, x, calls=1)
    assert p.saved_bytes == _saved_by_torch(jm, model, x) > 0
    assert p.saved_timeline[0][1] == p.saved_bytes
