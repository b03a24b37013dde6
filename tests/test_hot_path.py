"""The cached call's hot path: the prologue fused with the computation (Note [The fused prologue is compiled on
reuse]), its tensor checks in C (Note [Tensor checks in C]), and settled regions run inline (Note [A settled
region runs inline]). Every shortcut must accept exactly the inputs the plain checks accept."""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.core.codegen import Printer
from thunder.core.prims.python import _hooked, _tensor_conditions, _tensor_guard, _TensorConditions, check_no_hooks
from thunder.core.proxies import Proxy


def add(a, b):
    return a + b


def _hot(jf, *args):
    """``jf`` called until its entry runs the fused prologue (compiled at the second accepted call)."""
    for _ in range(3):
        jf(*args)


def _plain_accepts(t, shape, device, dtype, requires_grad) -> bool:
    """The Python conditions of a prologue's tensor check, as ``_tensor_conditions`` prints them."""
    device_ok = t.is_cpu if device.type == "cpu" else t.device.type == device.type
    return (
        isinstance(t, torch.Tensor)
        and t.shape == tuple(shape)
        and t.dtype is dtype
        and device_ok
        and t.requires_grad is requires_grad
    )


def _candidates() -> list:
    base = torch.randn(2, 3)
    sparse = torch.randn(2, 3).to_sparse()
    complex_ = torch.randn(2, 3, dtype=torch.complex64)
    return [
        base,
        base.t().contiguous().t(),  # another layout of strides
        torch.randn(3, 2).t(),
        torch.randn(2, 3, requires_grad=True),
        torch.nn.Parameter(torch.randn(2, 3)),
        torch.nn.Parameter(torch.randn(2, 3), requires_grad=False),
        torch.randn(2, 3, dtype=torch.float64),
        torch.randn(3, 2),
        torch.randn(6),
        torch.randn(2, 3, device="meta"),
        sparse,
        complex_,
        complex_.conj(),
        torch.randn(2, 3).to(torch.bfloat16),
        torch.zeros(2, 3, dtype=torch.int64),
    ]


@pytest.mark.parametrize(
    "shape, dtype, requires_grad, typ",
    [
        ((2, 3), torch.float32, False, torch.Tensor),
        ((2, 3), torch.float32, True, torch.Tensor),
        ((2, 3), torch.float32, True, torch.nn.Parameter),
        ((2, 3), torch.float32, False, torch.nn.Parameter),
        ((2, 3), torch.complex64, False, torch.Tensor),
        ((2, 3), torch.int64, False, torch.Tensor),
        ((None, 3), torch.float32, False, torch.Tensor),
    ],
)
def test_the_c_tensor_check_accepts_only_what_the_python_conditions_accept(shape, dtype, requires_grad, typ):
    printer = Printer(tensor_types={"x": typ})
    guard = _tensor_guard(printer, "x", list(shape), torch.device("cpu"), dtype, requires_grad)
    assert guard is not None
    accepted = 0
    for grad_mode in (True, False):
        with torch.set_grad_enabled(grad_mode):
            for t in _candidates():
                if guard.check(t):
                    accepted += 1
                    expected = [s if s is not None else t.shape[i] for i, s in enumerate(shape)]
                    assert _plain_accepts(t, expected, torch.device("cpu"), dtype, requires_grad), t
                    assert type(t) is typ
    if dtype is torch.float32 and shape[0] is not None:
        assert accepted >= 2  # the plain tensor of that type, in both grad modes (the check does take something)


def test_no_c_tensor_check_where_it_cannot_be_exact():
    printer = Printer(tensor_types={})
    assert _tensor_guard(Printer(), "x", [2], torch.device("cpu"), torch.float32, False) is None  # a printed trace
    assert _tensor_guard(printer, "x", None, torch.device("cpu"), torch.float32, False) is None  # symbolic sizes
    assert _tensor_guard(printer, "x", [2], torch.device("meta"), torch.float32, False) is None

    class MyTensor(torch.Tensor):
        pass

    printer.tensor_types["y"] = MyTensor
    assert _tensor_guard(printer, "y", [2], torch.device("cpu"), torch.float32, False) is None


def _inline(printer_source: str, ctx: dict):
    """The condition of a printed check ``if <cond>: return ...`` as a function of ``x``."""
    cond = printer_source.split(": return")[0].removeprefix("if ")
    return eval(f"lambda x: bool({cond})", ctx)


@pytest.mark.parametrize("device", [torch.device("cpu"), torch.device("meta")])
@pytest.mark.parametrize("requires_grad", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.complex64])
def test_tensor_conditions_as_one_call_accept_what_the_printed_conditions_accept(dtype, requires_grad, device):
    # Note [Tensor conditions as one call]: the hot path's object against the conditions a printed trace shows.
    printer = Printer()
    line = _tensor_conditions(
        printer, Proxy("x"), "{x}.shape == (2, 3)", device, dtype, requires_grad, None, fast=False
    )
    inline = _inline(line.replace("if not ", "if ", 1), printer.ctx)
    one_call = _TensorConditions((2, 3), dtype, device, requires_grad)
    candidates = [*_candidates(), torch.randn(2, 3, device="meta", requires_grad=True), 1.0, None]
    for grad_mode in (True, False):
        with torch.set_grad_enabled(grad_mode):
            for t in candidates:
                assert one_call(t) is inline(t), t


def test_the_hot_paths_module_check_is_the_printed_one():
    bsym = check_no_hooks.bind(Proxy("x"), output=None)
    printed = _inline(bsym.sym.printer(bsym, Printer())[0], {})
    modules = [torch.nn.Linear(2, 2) for _ in range(6)]
    modules[1].register_forward_hook(lambda *a: None)
    modules[2].register_forward_pre_hook(lambda *a: None)
    modules[3].register_full_backward_hook(lambda *a: None)
    modules[4].forward = lambda x: x
    modules[5]._compiled_call_impl = lambda *a: None
    assert [bool(_hooked(m)) for m in modules] == [printed(m) for m in modules] == [False, *[True] * 5]


def _fused_globals(jf) -> dict:
    run = jf._thunder.last_entry.run
    return run.__globals__


def test_the_fused_prologue_checks_tensors_in_c():
    jf = thunder.jit(add)
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    _hot(jf, a, b)
    guards = [v for k, v in _fused_globals(jf).items() if k.startswith("_tensor_guard")]
    assert len(guards) == 1  # consecutive checks: one C check of both tensors
    assert guards[0].check(a, b) and not guards[0].check(a, a)  # distinct tensors only (aliases: the Python conditions)


@pytest.mark.parametrize("make", [lambda v: iter(v), lambda v: (i for i in v)], ids=["list iterator", "generator"])
def test_an_iterator_argument_takes_the_hot_path(make):
    # The entry's input key was the slow path's wrapper's (ReplayableIterator): every call missed the hot path.
    def f(t, it):
        return t + sum(it)

    jf = thunder.jit(f)
    t = torch.randn(2)
    for _ in range(3):
        jf(t, make([1, 2]))
    assert thunder.cache_hits(jf) == 2 and callable(jf._thunder.last_entry.run)
    assert "_iterator_view" in _fused_globals(jf)  # the fused prologue runs
    it = make([1, 2, 3])
    torch.testing.assert_close(jf(t, it), f(t, make([1, 2, 3])))  # a miss on the hot path, after its pulls
    assert list(it) == []


@pytest.mark.parametrize(
    "other",
    [
        lambda: (torch.randn(2, 3), torch.randn(2, 3)),
        lambda: (torch.randn(2, 2, dtype=torch.float64), torch.randn(2, 2)),
        lambda: (torch.randn(2, 2), torch.randn(2, 2, requires_grad=True)),
        lambda: (torch.randn(2, 2), torch.randn(2)),
        lambda: (torch.randn(2, 2), 1.0),
        lambda: (torch.randn(2, 2, device="meta"), torch.randn(2, 2, device="meta")),
    ],
    ids=["shape", "dtype", "requires_grad", "rank", "number", "device"],
)
def test_the_hot_path_rejects_inputs_that_differ(other):
    jf = thunder.jit(add)
    _hot(jf, torch.randn(2, 2), torch.randn(2, 2))
    misses = thunder.cache_misses(jf)
    args = other()
    out = jf(*args)
    expected = add(*args)
    assert thunder.cache_misses(jf) == misses + 1
    assert out.shape == expected.shape and out.dtype == expected.dtype and out.device == expected.device
    assert out.requires_grad == expected.requires_grad
    if out.device.type != "meta":
        torch.testing.assert_close(out, expected)


def test_the_hot_path_rejects_a_tensor_that_requires_grad_under_no_grad():
    jf = thunder.jit(add)
    with torch.no_grad():
        _hot(jf, torch.randn(2, 2), torch.randn(2, 2))
        misses = thunder.cache_misses(jf)
        a = torch.randn(2, 2, requires_grad=True)
        jf(a, torch.randn(2, 2))
    assert thunder.cache_misses(jf) == misses + 1


def test_inputs_the_c_check_declines_still_hit_through_the_python_conditions():
    # The same tensor twice, a subclass instance, a call under inference mode: the C check says no (aliasing,
    # exact type, dispatch keys), the Python conditions accept, as before: a hit with eager's values.
    class Sub(torch.Tensor):
        pass

    jf = thunder.jit(add)
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    _hot(jf, a, b)
    misses = thunder.cache_misses(jf)
    torch.testing.assert_close(jf(a, a), a + a)
    sub = torch.randn(2, 2).as_subclass(Sub)
    torch.testing.assert_close(jf(sub, b), torch.Tensor(sub) + b)
    with torch.inference_mode():
        torch.testing.assert_close(jf(a, b), a + b)
    assert thunder.cache_misses(jf) == misses


def test_a_module_call_checks_its_parameters_in_c_and_sees_them_change():
    model = torch.nn.Linear(4, 3)
    tm = thunder.jit(model)
    x = torch.randn(2, 4)
    _hot(tm, x)
    guards = [k for k in _fused_globals(tm) if k.startswith("_tensor_guard")]
    assert len(guards) == 3  # the input and both parameters
    misses = thunder.cache_misses(tm)
    with torch.no_grad():
        model.weight.mul_(2)
    torch.testing.assert_close(tm(x), model(x))
    model.weight.requires_grad_(False)
    torch.testing.assert_close(tm(x), model(x))
    assert thunder.cache_misses(tm) == misses + 1
    model.bias = torch.nn.Parameter(torch.randn(3))  # another object of the same kind: read anew
    torch.testing.assert_close(tm(x), model(x))
    model.bias = torch.nn.Parameter(torch.randn(3, dtype=torch.float64))
    with pytest.raises(Exception, match="dtype"):  # as eager, an error on the mixed dtypes
        tm(x)


# --- Note [A settled region runs inline] -------------------------------------------------------------------------


def five_inputs(a, b, c, d, e):
    return (a * b + c) * d - e


def chain(a, b):
    c = a * b + 1.0
    d = torch.sin(c) - b
    return torch.exp(d) * 0.5, d * d


@pytest.fixture
def torch_kernels_win(monkeypatch):
    """Regions are submitted on their first call; the worker's graph (here: the region's own ops, slowed down)
    loses its trial, so each region settles on torch's kernels."""
    import time

    from thunder.executors import inductor_pool, torch_compile

    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 0.0)
    monkeypatch.setattr(torch_compile, "TRIAL_CALLS", 2)

    def compiled_at_once(job, done):
        uncompiled = done.func.__self__.region_trace.python_callable()

        def slow(*args):
            time.sleep(0.05)  # far beyond a loaded machine's noise: the trial's outcome is certain
            return uncompiled(*args)

        done((slow, []), None)

    monkeypatch.setattr(inductor_pool, "submit", compiled_at_once)
    return torch_compile


def _region_calls(monkeypatch, torch_compile) -> list:
    calls = []
    original = torch_compile._Compiled.__call__

    def counted(self, *args):
        calls.append(self)
        return original(self, *args)

    monkeypatch.setattr(torch_compile._Compiled, "__call__", counted)
    return calls


def test_a_settled_region_runs_inline_in_the_computation(torch_kernels_win, monkeypatch):
    torch_compile = torch_kernels_win
    jf = thunder.jit(five_inputs, executors=["torchcompile_background"])
    args = [torch.randn(2, 2) for _ in range(5)]
    for _ in range(10):
        torch.testing.assert_close(jf(*args), five_inputs(*args), rtol=0, atol=0)
    trace = thunder.last_traces(jf)[-1]
    (fusion,) = [b for b in trace.bound_symbols if b.sym.name.startswith("TorchCompile")]
    assert fusion.sym.python_impl.status().startswith("uncompiled: torch's kernels were faster")
    computation = trace.python_callable()
    assert fusion.sym.name not in computation.__code__.co_names  # the region's ops, not its call
    assert "TorchCompile" in str(trace)  # the trace shown keeps the fusion
    calls = _region_calls(monkeypatch, torch_compile)
    for _ in range(3):
        torch.testing.assert_close(jf(*args), five_inputs(*args), rtol=0, atol=0)
    assert calls == []
    # The prologue still decides: another shape is a miss, with eager's values.
    misses = thunder.cache_misses(jf)
    other = [torch.randn(3, 2) for _ in range(5)]
    torch.testing.assert_close(jf(*other), five_inputs(*other), rtol=0, atol=0)
    assert thunder.cache_misses(jf) == misses + 1


def _step(f, a, b):
    a, b = a.detach().requires_grad_(), b.detach().requires_grad_()
    x, y = f(a, b)
    (x.sum() + y.sum()).backward()
    return x, y, a.grad, b.grad


def test_a_settled_training_step_records_with_torchs_autograd_and_eagers_gradients(torch_kernels_win, monkeypatch):
    # Note [A settled entry records with torch's autograd]
    from thunder import settled_autograd

    torch_compile = torch_kernels_win
    jf = thunder.jit(chain, executors=["torchcompile_background"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    for _ in range(12):
        for g, e in zip(_step(jf, a, b), _step(chain, a, b)):
            torch.testing.assert_close(g, e)
    traces = thunder.last_traces(jf)
    assert traces[-1].provenance.pass_name == settled_autograd.PASS_NAME
    assert "TorchCompile" not in str(traces[-1])  # torch's ops, which torch's autograd records
    fusions = [b for b in traces[-2].bound_symbols if b.sym.name.startswith("TorchCompile")]
    assert fusions and all(f.sym.python_impl._settled is not None for f in fusions)
    assert thunder.last_backward_traces(jf) == []  # the truth: no backward trace runs
    assert thunder.compile_stats(jf).last_autograd_fallback == settled_autograd.REASON
    calls = _region_calls(monkeypatch, torch_compile)
    for _ in range(2):
        for g, e in zip(_step(jf, a, b), _step(chain, a, b)):
            torch.testing.assert_close(g, e)
    assert calls == []
    x, _ = jf(a.detach().requires_grad_(), b.detach().requires_grad_())
    assert type(x.grad_fn).__name__ == "MulBackward0"  # eager's node, not thunder's autograd function


def test_a_forward_whose_backward_never_ran_records_with_torchs_autograd():
    from thunder import settled_autograd

    model = torch.nn.Linear(8, 8)
    jm = thunder.jit(model)
    x = torch.randn(2, 8)
    _hot(jm, x)
    out = jm(x)
    assert type(out.grad_fn).__name__ == "AddmmBackward0"
    assert thunder.compile_stats(jm).last_autograd_fallback == settled_autograd.REASON
    assert thunder.last_backward_traces(jm) == []
    expected = torch.nn.Linear(8, 8)
    expected.load_state_dict(model.state_dict())
    out.sum().backward()
    expected(x).sum().backward()
    for p, q in zip(model.parameters(), expected.parameters()):
        assert torch.equal(p.grad, q.grad)


def test_a_backward_that_ran_and_has_not_settled_stays_thunders():
    model = torch.nn.Linear(8, 8)
    jm = thunder.jit(model)
    x = torch.randn(2, 8)
    for _ in range(3):
        jm(x).sum().backward()
    assert type(jm(x).grad_fn).__name__ == "ThunderFunctionBackward"
    assert thunder.compile_stats(jm).last_autograd_fallback is None
    assert thunder.last_backward_traces(jm)


class _Doubled(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 3  # not the derivative of its forward: only its own backward gives eager's gradient


def test_a_custom_autograd_function_keeps_thunders_backward():
    def f(x, w):
        return _Doubled.apply(x @ w).sum()

    jf = thunder.jit(f)
    x, w = torch.randn(2, 3), torch.randn(3, 3, requires_grad=True)
    _hot(jf, x, w)
    loss = jf(x, w)
    assert thunder.compile_stats(jf).last_autograd_fallback is None
    (grad,) = torch.autograd.grad(loss, w)
    (expected,) = torch.autograd.grad(f(x, w), w)
    torch.testing.assert_close(grad, expected)


def test_the_computation_runs_in_the_fused_prologues_frame():
    # Note [The computation runs in the prologue's frame]
    jf = thunder.jit(add, executors=["torch"])
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    _hot(jf, a, b)
    run = jf._thunder.last_entry.run
    assert "_computation" not in run.__code__.co_names and "torch" in run.__code__.co_names
    torch.testing.assert_close(jf(a, b), a + b)


def test_a_computation_of_many_ops_is_called_from_the_fused_prologue():
    # Note [The computation runs in the prologue's frame]: past INLINED_OPS_AT_MOST ops (a fusion counts its ops) the
    # call that inlining saves is noise, and copying the statements costs the compile more
    from thunder.core.trace import INLINED_OPS_AT_MOST

    def many(a, b):
        for _ in range(INLINED_OPS_AT_MOST):
            a = a * b + 1
        return a

    a, b = torch.randn(2, 3), torch.randn(2, 3) / 4
    for executors in (["torch"], ["torchcompile_background"]):  # one op per statement; one fusion of them all
        jf = thunder.jit(many, executors=executors)
        _hot(jf, a, b)
        assert "_computation" in jf._thunder.last_entry.run.__code__.co_names
        torch.testing.assert_close(jf(a, b), many(a, b))
    jf = thunder.jit(add, executors=["torchcompile_background"])  # a fusion of one op is copied
    _hot(jf, a, b)
    assert "_computation" not in jf._thunder.last_entry.run.__code__.co_names


def test_a_region_that_has_not_settled_keeps_its_call(monkeypatch):
    from thunder.executors import torch_compile

    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 3600.0)  # warming up all along
    jf = thunder.jit(five_inputs, executors=["torchcompile_background"])
    args = [torch.randn(2, 2) for _ in range(5)]
    _hot(jf, *args)
    calls = _region_calls(monkeypatch, torch_compile)
    torch.testing.assert_close(jf(*args), five_inputs(*args), rtol=0, atol=0)
    assert len(calls) == 1


def test_while_the_only_signature_compiles_calls_skip_its_signature(monkeypatch):
    # Note [While the only signature compiles]
    from thunder.executors import inductor_pool, torch_compile

    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 0.0)
    monkeypatch.setattr(torch_compile, "TRIAL_CALLS", 0)
    answers = []
    monkeypatch.setattr(inductor_pool, "submit", lambda job, done: answers.append(done))  # a worker still busy
    jf = thunder.jit(five_inputs, executors=["torchcompile_background"])
    args = [torch.randn(2, 2) for _ in range(5)]
    torch.testing.assert_close(jf(*args), five_inputs(*args), rtol=0, atol=0)
    assert len(answers) == 1
    signatures = []
    original = torch_compile._signature
    monkeypatch.setattr(torch_compile, "_signature", lambda args: signatures.append(args) or original(args))
    for _ in range(3):
        torch.testing.assert_close(jf(*args), five_inputs(*args), rtol=0, atol=0)
    transposed = [torch.randn(2, 2).t() for _ in range(5)]  # another signature: torch's kernels, correct
    torch.testing.assert_close(jf(*transposed), five_inputs(*transposed), rtol=0, atol=0)
    with torch.no_grad():  # another grad mode: the keyed path
        torch.testing.assert_close(jf(*args), five_inputs(*args), rtol=0, atol=0)
    assert len(signatures) == 1
    # The worker's answer: the graph (here the region's own ops) serves the signature it was made for.
    (region,) = [
        b.sym.python_impl for b in thunder.last_traces(jf)[-1].bound_symbols if b.sym.name.startswith("TorchCompile")
    ]
    graph_calls = []
    uncompiled = region.region_trace.python_callable()
    answers[0]((lambda *a: graph_calls.append(a) or uncompiled(*a), []), None)
    torch.testing.assert_close(jf(*args), five_inputs(*args), rtol=0, atol=0)
    assert region.status() == "compiled; compiling" and len(graph_calls) == 1  # the no_grad signature compiles


def test_a_warming_region_times_one_call_in_a_sample(monkeypatch):
    # Note [The warm-up samples its calls]: the last call of every WARM_UP_SAMPLE is timed and counts for them all; the
    # first call, cold, is not timed (timed, it alone submitted the zoo's GPT-2 and T5 regions on their first call).
    from thunder.executors import torch_compile

    monkeypatch.setattr(torch_compile, "COMPILE_AFTER_S", 3600.0)  # warming up all along
    jf = thunder.jit(five_inputs, executors=["torchcompile_background"])
    args = [torch.randn(2, 2) for _ in range(5)]
    timed = []
    original = torch_compile._Compiled._timed
    monkeypatch.setattr(
        torch_compile._Compiled, "_timed", lambda self, a: (timed.append(1) or original(self, a)[0], 1e-3)
    )
    jf(*args)  # the first call: cold, not timed
    (region,) = [
        b.sym.python_impl for b in thunder.last_traces(jf)[-1].bound_symbols if b.sym.name.startswith("TorchCompile")
    ]
    assert timed == [] and region._warm_up_s == 0.0
    for _ in range(2 * torch_compile.WARM_UP_SAMPLE - 1):
        torch.testing.assert_close(jf(*args), five_inputs(*args), rtol=0, atol=0)
    assert len(timed) == 2 and region.status() == "warming up"
    assert region._warm_up_s == pytest.approx(1e-3 * 2 * torch_compile.WARM_UP_SAMPLE)


def test_profiling_ranges_reach_a_computation_the_fused_prologue_copied():
    # Note [The computation runs in the prologue's frame]: while the computation runs other code, the hot path calls it
    from thunder.core.codegen import profiling_ranges

    jf = thunder.jit(add, executors=["torch"])
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    _hot(jf, a, b)
    trace = thunder.last_traces(jf)[-1]
    entered = []
    real_enter = torch.ops.profiler._record_function_enter_new
    with profiling_ranges(trace, lambda i, bsym: "thunder:add" if bsym.sym.name == "add" else None):
        fn = trace.python_callable()
        fn.__globals__["_range_enter"] = lambda name: entered.append(name) or real_enter(name)
        torch.testing.assert_close(jf(a, b), a + b)
        torch.testing.assert_close(jf(a, b), a + b)
    assert entered == ["thunder:add", "thunder:add"]
    torch.testing.assert_close(jf(a, b), a + b)
    run = jf._thunder.last_entry.run
    assert "_computation" not in run.__code__.co_names  # the copy again, once the ranges are gone


# Note [The fused prologue is the jitted function's code]


def _python_calls(fn, *args) -> list[str]:
    """The names of the Python functions a call of ``fn`` runs (``fn``'s own code included), while no inputs are
    recorded (importing ``thunder_viz`` records them: its tests may have run before)."""
    import sys

    calls: list[str] = []
    recording = thunder._recording_inputs()
    thunder._record_last_inputs(False)
    sys.setprofile(lambda frame, event, arg: calls.append(frame.f_code.co_name) if event == "call" else None)
    try:
        fn(*args)
    finally:
        sys.setprofile(None)
        thunder._record_last_inputs(recording)
    return calls


def test_a_small_cached_call_runs_in_the_jitted_functions_own_frame():
    jf = thunder.jit(add)
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    _hot(jf, a, b)
    assert _python_calls(jf, a, b) == ["prologue"]  # one frame: the checks and the computation
    hits = thunder.cache_hits(jf)
    torch.testing.assert_close(jf(a, b), a + b)
    assert thunder.cache_hits(jf) == hits + 1
    # A miss from that code compiles another entry, whose fused prologue becomes the function's code in turn.
    c = torch.randn(3, dtype=torch.float64)
    for _ in range(3):
        torch.testing.assert_close(jf(c, c), c + c)
    assert thunder.cache_misses(jf) == 2 and _python_calls(jf, c, c) == ["prologue"]
    torch.testing.assert_close(jf(a, b), a + b)  # back to the first entry
    assert thunder.cache_misses(jf) == 2 and _python_calls(jf, a, b) == ["prologue"]


def test_the_jitted_functions_own_code_takes_positional_arguments_and_misses_on_other_calls():
    # Note [Positional arguments of the jitted function's own code]
    def scaled(x, y=2.0, *rest, **named):
        return x * y + sum(rest) + sum(named.values())

    jf = thunder.jit(scaled)
    x = torch.randn(3)
    _hot(jf, x, 3.0)
    # the two arguments the entry was traced with, as parameters named as the prologue names them: nothing to unpack
    assert jf.__code__.co_varnames[: jf.__code__.co_argcount] == ("x", "y")
    calls = [(x,), (x, 3.0), (x, 3.0, 1.0), (x,), ((x,) * 9), (x, 3.0)]
    kwargs = [{}, {}, {}, {"y": 4.0}, {}, {"z": 1.0}]
    for args, named in zip(calls, kwargs):
        torch.testing.assert_close(jf(*args, **named), scaled(*args, **named))
    with pytest.raises(TypeError):  # eager's error, from the slow path
        jf()
    reasons = thunder.cache_miss_reasons(jf)
    assert len(reasons) == thunder.cache_misses(jf)
    assert thunder._state(jf).last_entry.run is not None


def test_a_miss_of_the_jitted_functions_own_code_says_why():
    jf = thunder.jit(add)
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    _hot(jf, a, b)
    jf(a, b.double())
    assert "float64" in str(thunder.cache_miss_reasons(jf)[-1])


def test_an_entry_that_may_change_outcome_keeps_its_call():
    def branch(x):
        return x * 2 if bool(x.sum() > 0) else x - 1

    jf = thunder.jit(branch)
    x = torch.ones(3)
    _hot(jf, x)
    assert _python_calls(jf, x)[:2] == ["fn_", "prologue"]  # the fused prologue is called, wrapped
    for t in (x, -x, x):
        torch.testing.assert_close(jf(t), branch(t))


def test_the_jitted_functions_own_code_notes_runtime_errors_and_records_inputs():
    def index(x, i):
        return x[i]

    jf = thunder.jit(index)
    x = torch.randn(3)
    _hot(jf, x, torch.tensor(1))
    assert _python_calls(jf, x, torch.tensor(1)) == ["prologue"]
    with pytest.raises(IndexError) as raised:
        jf(x, torch.tensor(5))
    assert any(n.startswith("while running torch_getitem") for n in getattr(raised.value, "__notes__", ()))
    recording = thunder._recording_inputs()
    thunder._record_last_inputs(True)
    try:
        i = torch.tensor(2)
        torch.testing.assert_close(jf(x, i), x[i])
        assert thunder._last_inputs(jf)[0][1] is i
    finally:
        thunder._record_last_inputs(recording)


def test_a_warning_traced_on_a_miss_of_the_jitted_functions_own_code_names_the_caller():
    import warnings

    def warns(x):
        warnings.warn("look", stacklevel=2)
        return x + 1

    jf = thunder.jit(warns)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _hot(jf, torch.randn(2))
        line = _line() + 1
        jf(torch.randn(5))  # a miss: traced from the fused prologue's code, which is generated
    assert thunder.cache_misses(jf) == 2
    assert (seen[-1].filename, seen[-1].lineno) == (__file__, line)


def _line() -> int:
    import sys

    return sys._getframe(1).f_lineno


def test_the_jitted_functions_own_code_reads_torchs_ops_from_its_dict_at_each_call(monkeypatch):
    # Note [A module with __getattr__ is read from its dict]: no attribute read of the torch module on the hot path,
    # and the op is still what the module holds at the call.
    jf = thunder.jit(add)
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    _hot(jf, a, b)
    assert _python_calls(jf, a, b) == ["prologue"]
    assert "add" not in jf.__code__.co_names  # no ``torch.add`` read through the module's attribute lookup
    real, calls = torch.add, []
    monkeypatch.setattr(torch, "add", lambda *args: calls.append(args) or real(*args))
    torch.testing.assert_close(jf(a, b), a + b)
    assert len(calls) == 1
    monkeypatch.undo()
    torch.testing.assert_close(jf(a, b), a + b)
    assert len(calls) == 1


def test_hits_are_counted_exactly_from_threads():
    import threading

    jf = thunder.jit(add)
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    _hot(jf, a, b)
    before = thunder.cache_hits(jf)

    def calls():
        for _ in range(2000):
            jf(a, b)

    threads = [threading.Thread(target=calls) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert thunder.cache_hits(jf) == before + 8000 and thunder.cache_misses(jf) == 1


def test_a_parameter_named_like_a_generated_constant_hits_the_cache():
    # The jitted function's own code names its parameters as the user does; a constant the prologue needed took the
    # name ``_captured0`` too, so the parameter was read as the constant's name and every call missed.
    def g(x, y, _captured0=2.0, _const0=3.0):
        return x * y + _captured0 + _const0

    jg, x = thunder.jit(g), torch.ones(2)
    for _ in range(3):
        torch.testing.assert_close(jg(x, x, 3.0, 4.0), g(x, x, 3.0, 4.0))
    assert thunder.cache_misses(jg) == 1


def _own_code_accepts(jf, *args, **kwargs) -> bool:
    """Whether the jitted function's own code (Note [The fused prologue is the jitted function's code]) takes the
    call's hit path: run with its own globals but a slow path that only says it was asked."""
    import types

    missed = object()
    hooks = {**jf.__globals__, "_thunder_slow": lambda args, kwargs: missed}
    own = types.FunctionType(jf.__code__, hooks, "own", jf.__defaults__)
    return own(*args, **kwargs) is not missed


def test_the_jitted_functions_own_code_accepts_exactly_what_its_prologue_accepts():
    # Its checks, read from its constants (Note [Constants of the jitted function's own code]), against the entry's
    # plain prologue, over what the C check and the Python conditions tell apart.
    class Sub(torch.Tensor):
        pass

    jf = thunder.jit(add)
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    _hot(jf, a, b)
    entry = jf._thunder.last_entry
    assert jf.__code__ is not thunder._state(jf).dispatch_code
    with torch.inference_mode():
        made_in_inference = torch.randn(2, 2)
    candidates = {
        "same": lambda: (a, b), "other tensors": lambda: (torch.randn(2, 2), torch.randn(2, 2)),
        "one tensor twice": lambda: (a, a), "strides": lambda: (a, torch.randn(2, 2).t()),
        "dtype": lambda: (a, b.double()), "shape": lambda: (a, torch.randn(2, 1)), "rank": lambda: (a, torch.randn(2)),
        "requires_grad": lambda: (a, torch.randn(2, 2, requires_grad=True)),
        "parameter": lambda: (a, torch.nn.Parameter(torch.randn(2, 2))), "device": lambda: (a, b.to("meta")),
        "subclass": lambda: (a, torch.randn(2, 2).as_subclass(Sub)), "inference tensor": lambda: (a, made_in_inference),
        "number": lambda: (a, 1.0), "missing": lambda: (a,), "extra": lambda: (a, b, b),
    }  # fmt: skip
    accepted = set()
    for mode in ("grad", "no_grad", "inference_mode"):
        for name, make in candidates.items():
            with torch.inference_mode() if mode == "inference_mode" else torch.set_grad_enabled(mode == "grad"):
                args = make()
                expected = not isinstance(entry.prologue(*args), thunder.Rejection)
                assert _own_code_accepts(jf, *args) is expected, (mode, name)
                if expected:
                    accepted.add(name)
    assert {"same", "other tensors", "one tensor twice", "strides"} <= accepted  # (it does accept something)
    assert not {"dtype", "shape", "rank", "requires_grad", "device", "number", "missing", "extra"} & accepted
    assert not _own_code_accepts(jf, a, b, c=1)


def test_the_jitted_functions_own_code_reads_its_constants_as_constants():
    # Note [Constants of the jitted function's own code]: the C check, the miss hooks and the function whose code is
    # checked are constants of the code; only what the compiler cannot take as a constant is unpacked into a local.
    import dis

    jf = thunder.jit(add)
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    _hot(jf, a, b)
    loaded = [i.argval for i in dis.get_instructions(jf.__code__) if i.opname == "LOAD_CONST"]
    guards = [c for c in loaded if type(c).__name__ == "TensorGuards"]
    assert len(guards) == 1 and guards[0].check(a, b)
    assert add in loaded  # (``add = _captured0``)
    names = set(jf.__code__.co_varnames)
    assert not any(n.startswith(("_tensor_guard", "_missed", "_raised_here", "_captured")) for n in names), names
    recording = thunder._recording_inputs()
    thunder._record_last_inputs(False)
    try:
        hits, misses = thunder.cache_hits(jf), thunder.cache_misses(jf)
        torch.testing.assert_close(jf(a, b), a + b)
        assert (thunder.cache_hits(jf), thunder.cache_misses(jf)) == (hits + 1, misses)
        torch.testing.assert_close(jf(a, b.double()), a + b.double())  # a miss, through the constant miss hook
        assert thunder.cache_misses(jf) == misses + 1 and "float64" in str(thunder.cache_miss_reasons(jf)[-1])
    finally:
        thunder._record_last_inputs(recording)


def test_the_jitted_functions_own_code_records_the_inputs_of_a_hit_and_of_a_miss():
    # Note [Recording the last inputs]: a hit records after its checks (the bump of its hit counter says whether to),
    # a miss before the slow path.
    jf = thunder.jit(add)
    a, b = torch.randn(2, 2), torch.randn(2, 2)
    _hot(jf, a, b)
    recording = thunder._recording_inputs()
    try:
        thunder._record_last_inputs(True)
        c = torch.randn(2, 2)
        jf(a, c)
        assert thunder._last_inputs(jf)[0][1] is c
        d = torch.randn(3)
        jf(d, d)  # a miss
        recorded = thunder._last_inputs(jf)[0]
        assert len(recorded) == 2 and all(x is d for x in recorded)
        thunder._record_last_inputs(False)
        jf(a, b)
        assert thunder._last_inputs(jf)[0][0] is d  # nothing recorded
    finally:
        thunder._record_last_inputs(recording)


def test_checks_of_tensors_alike_share_one_c_check_and_still_tell_them_apart():
    # Note [One C check per kind of tensor]: two layers' weights alike, one C check; a change of either misses.
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 4))
    tm = thunder.jit(model)
    x = torch.randn(2, 4)
    _hot(tm, x)
    guards = {k: v for k, v in _fused_globals(tm).items() if k.startswith("_tensor_guard")}
    assert len({id(v) for v in guards.values()}) == len(guards) == 3  # the input, the weights, the biases
    misses = thunder.cache_misses(tm)
    model[2].weight.requires_grad_(False)
    torch.testing.assert_close(tm(x), model(x))
    assert thunder.cache_misses(tm) == misses + 1
    model[0].bias = torch.nn.Parameter(torch.randn(4, dtype=torch.float64))
    with pytest.raises(RuntimeError):
        model(x)  # eager refuses the mixed dtypes
    with pytest.raises(RuntimeError):
        tm(x)
