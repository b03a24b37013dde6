"""lightning-thunder's public API where code written for it needs it: ``thunder.trace``, the
default-executor functions at the top level, ``TensorProxy(like=...)``, ``thunder.core.codeutils``,
``thunder.torch.to_torch_dtype``, ``DebugOptions(check_traces=<level>)``,
``thunder.examine.get_fusions``, ``thunder.extend.single_op_executor``/``TemporaryExecutor``, the
``sdpa`` executor and CPU autocast of prims. Values are checked against eager PyTorch."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

import thunder
import thunder.examine
from thunder.core.proxies import TensorProxy
from thunder.extend import OperatorExecutor, deregister_executor


@pytest.fixture
def defaults_restored():
    """Tests that change the default executors leave them as they found them."""
    saved = thunder.get_default_executors()
    yield
    thunder.set_default_executors(saved)


def _sincos_executor(name: str):
    ex = OperatorExecutor(name)
    thunder.extend.register_executor(ex)

    def meta(a):
        return TensorProxy(like=a), TensorProxy(like=a)

    sincos = ex.register_operator("sincos", meta=meta, fn=lambda a: (torch.sin(a), torch.cos(a)))
    return ex, sincos


# --- TensorProxy(like=...) -----------------------------------------------------------------


def test_tensor_proxy_like_copies_metadata_in_a_meta_function():
    ex, sincos = _sincos_executor("lt_api_sincos")
    try:

        def f(a, b):
            s, c = sincos(a)
            return s + c + b

        a, b = torch.randn(3), torch.randn(3)
        jf = thunder.jit(f, executors=[ex])
        torch.testing.assert_close(jf(a, b), torch.sin(a) + torch.cos(a) + b)
        names = [b.sym.name for b in thunder.last_traces(jf)[-1].bound_symbols]
        assert "sincos" in names
    finally:
        deregister_executor(ex)


def test_tensor_proxy_like_with_changes_and_without_metadata():
    base = TensorProxy("base_like", shape=(2, 3), dtype=torch.float32, device=torch.device("cpu"), requires_grad=True)
    p = TensorProxy(like=base, dtype=torch.float16)
    assert (tuple(p.shape), p.dtype, p.device, p.requires_grad) == ((2, 3), torch.float16, torch.device("cpu"), True)
    with pytest.raises(TypeError, match="TensorProxy needs shape, dtype.*like="):
        TensorProxy("incomplete", device=torch.device("cpu"))


# --- thunder.trace --------------------------------------------------------------------------


def test_trace_returns_the_program_named_after_the_function():
    def fun(a, b):
        unused = a * 3  # noqa: F841 - dead code that DCE removes
        return torch.sin(a) + b

    a, b = torch.randn(4), torch.randn(4)
    trc = thunder.trace()(fun, a, b)
    assert isinstance(trc, thunder.TraceCtx)
    assert "def fun(a, b):" in str(trc)
    names = [bsym.sym.name for bsym in trc.bound_symbols]
    assert names == ["unpack_trivial", "unpack_trivial", "sin", "add", "python_return"]
    torch.testing.assert_close(trc.python_callable()(a, b), fun(a, b))


def test_trace_of_a_module_has_its_parameters_as_inputs():
    model = torch.nn.Linear(3, 2)
    x = torch.randn(4, 3)
    trc = thunder.trace()(model, x)
    assert [p.name for p in trc.args][1:] == ["t_weight", "t_bias"]  # named by module path, as in jit traces
    torch.testing.assert_close(trc.python_callable()(x, model.weight, model.bias), model(x))


def test_trace_options_keep_dead_code_and_drop_the_return():
    def fun(a):
        unused = a * 3  # noqa: F841
        return a + 1

    a = torch.randn(2)
    kept = thunder.trace(use_dce=False)(fun, a)
    assert [b.sym.name for b in kept.bound_symbols] == ["unpack_trivial", "mul", "add", "python_return"]
    no_return = thunder.trace(include_return_statement=False)(fun, a)
    assert [b.sym.name for b in no_return.bound_symbols] == ["unpack_trivial", "add"]


def test_trace_inlines_into_the_trace_being_recorded():
    from thunder.core.tracectx import tracectx

    outer = thunder.TraceCtx()
    x = TensorProxy("x_inline", shape=(2,), dtype=torch.float32, device=torch.device("cpu"))
    with tracectx(outer):
        result = thunder.trace()(lambda t: thunder.torch.sin(t), x)
    assert isinstance(result, TensorProxy)
    assert [b.sym.name for b in outer.bound_symbols] == ["sin"]


# --- executors at the top level and in thunder.extend -----------------------------------------


def test_add_default_executor_puts_it_first_and_returns_the_defaults(defaults_restored):
    ex, _ = _sincos_executor("lt_api_default")
    try:
        defaults = thunder.add_default_executor(ex)
        assert defaults[0] is ex and list(thunder.get_default_executors()) == defaults
        assert ex not in thunder.remove_default_executor(ex)
    finally:
        deregister_executor(ex)


def test_top_level_names_of_lightning_thunder():
    assert thunder.pythonex is thunder.python_executor
    assert thunder.prims.PrimIDs is thunder.core.prims.PrimIDs
    assert thunder.nvfuser_executor is None  # GPU only, not in this build
    assert isinstance(thunder.jit(torch.nn.Linear(2, 2)), thunder.ThunderModule)
    assert thunder.resolve_executors(("python", "torch")) == (thunder.pythonex, thunder.pytorch_executor)
    with pytest.raises(ValueError, match="Expected an Executor or the name of a registered Executor"):
        thunder.resolve_executors(("python", "no_such_executor"))


def test_register_operator_like_a_plain_function():
    ex = OperatorExecutor("lt_api_like_fn")
    try:
        mul2 = ex.register_operator("mul2", like=lambda a, b: a * b, fn=lambda a, b: a * b)
        a, b = torch.randn(3), torch.randn(3)
        jf = thunder.jit(lambda a, b: mul2(a, b) + 1, executors=[ex])
        torch.testing.assert_close(jf(a, b), a * b + 1)
        assert any(b.sym is mul2 for b in thunder.last_traces(jf)[-1].bound_symbols)
    finally:
        deregister_executor(ex)


def _official_add(a, b):
    return a + b


def _official_add2(a, b):
    return a + b


def test_register_operator_replaces_several_callables():
    ex = OperatorExecutor("lt_api_replaces")
    try:
        myadd = ex.register_operator(
            "myadd", like=_official_add, fn=_official_add, replaces=(_official_add, _official_add2)
        )
        a, b = torch.randn(2), torch.randn(2)
        for official in (_official_add, _official_add2):
            jf = thunder.jit(official, executors=[ex])
            torch.testing.assert_close(jf(a, b), a + b)
            assert any(bsym.sym is myadd for bsym in thunder.last_traces(jf)[-1].bound_symbols)
    finally:
        deregister_executor(ex)


def _mlp(a, b, c):
    return torch.relu(a @ b + c)


def _mlp_meta(a, b, c):
    return TensorProxy(like=c)


def test_single_op_executor_keeps_the_function_whole():
    ex = thunder.extend.single_op_executor("lt_api_mlpex", "mlp", fn=_mlp, meta=_mlp_meta)
    try:
        assert thunder.extend.get_executor("lt_api_mlpex") is ex
        a, b, c = (torch.randn(4, 4) for _ in range(3))
        for executors in ([ex], ["lt_api_mlpex"]):
            jf = thunder.jit(lambda a, b, c: _mlp(a, b, c), executors=executors)
            torch.testing.assert_close(jf(a, b, c), _mlp(a, b, c))
            (op,) = [b for b in thunder.last_traces(jf)[-1].bound_symbols if b.sym.name == "mlp"]
            assert op.sym.executor is ex
    finally:
        deregister_executor(ex)


def test_temporary_executor_names_are_unique():
    first, second = thunder.extend.TemporaryExecutor(), thunder.extend.TemporaryExecutor()
    assert first.name != second.name
    op1 = first.register_operator("temp_add", like=thunder.torch.add, fn=lambda a, b: a + b)
    op2 = first.register_operator("temp_add", like=thunder.torch.add, fn=lambda a, b: a + b)
    assert op1.name != op2.name and op1.name.startswith("temp_add") and op1.id != op2.id
    a = torch.randn(3)
    jf = thunder.jit(lambda a, b: op1(a, b), executors=[first])
    torch.testing.assert_close(jf(a, a), a + a)
    assert any(b.sym.executor is first for b in thunder.last_traces(jf)[-1].bound_symbols)


# --- codeutils, dtypes, debug options ---------------------------------------------------------


def test_codeutils_siginfo_of_a_function_and_by_hand():
    from thunder.core.codeutils import SigInfo, get_siginfo

    def foo(a, b=torch.float32, *args, c=(1, 2), **kw):
        return a

    info = get_siginfo(foo, (1,), {"d": 4})
    assert info.args == [("a", 1), ("b", torch.float32)]
    assert info.varargs == ("args", ()) and info.kwargs == {"c": (1, 2)} and info.varkwargs == ("kw", {"d": 4})
    assert info.prettyprint() == info.prettyprint() == "def foo(a, b, *args, c, **kw):"
    manual = SigInfo("my_trace")
    manual.args = [("x", None), ("y", None)]
    assert manual.prettyprint() == "def my_trace(x, y):"
    with pytest.raises(TypeError):
        get_siginfo(foo, (), {})


def test_codeutils_printables():
    from collections import namedtuple

    from thunder.core.codeutils import prettyprint, to_printable

    for leaf in ("abc", torch.Size([2, 2]), torch.ones(1)):
        assert to_printable(None, leaf) is leaf
    pair = namedtuple("Pair", ["x", "y"])("abc", "def")
    assert to_printable(None, pair) == pair and type(to_printable(None, pair)) is type(pair)
    p = TensorProxy("pp", shape=(2,), dtype=torch.float32, device=torch.device("cpu"))
    assert prettyprint((p, 1)) == "(pp, 1)"
    assert prettyprint((p, 1), literals_as_underscores=True) == "(pp, _)"
    assert prettyprint(p, with_type=True) == 'pp: "cpu f32[2]"'
    with pytest.raises(ValueError, match="literal"):
        prettyprint(3, literals_allowed=False)


def test_to_torch_dtype():
    to_torch_dtype = thunder.torch.to_torch_dtype
    assert to_torch_dtype(thunder.bfloat16) is torch.bfloat16
    assert to_torch_dtype(None) is None
    assert to_torch_dtype(float) is torch.get_default_dtype() and to_torch_dtype(int) is torch.int64
    with pytest.raises(TypeError, match="to_torch_dtype"):
        to_torch_dtype("float32")


def test_check_traces_accepts_a_level():
    for level in (True, 2):
        jf = thunder.jit(lambda a: a.sin() * 2, debug_options=thunder.DebugOptions(check_traces=level))
        a = torch.randn(3)
        torch.testing.assert_close(jf(a), a.sin() * 2)
    with pytest.raises(TypeError, match="check_traces"):
        thunder.DebugOptions(check_traces="all")


def test_debug_options_list_their_options_and_check_types():
    assert "check_traces" in thunder.DebugOptions.__doc__
    thunder.DebugOptions.register_option("lt_api_flag", bool, False, "a flag only this test reads")
    try:
        assert "a flag only this test reads" in thunder.DebugOptions.__doc__
        assert thunder.DebugOptions().lt_api_flag is False and thunder.DebugOptions(lt_api_flag=True).lt_api_flag
        with pytest.raises(TypeError, match="lt_api_flag"):
            thunder.DebugOptions(lt_api_flag=5)
    finally:
        del thunder.DebugOptions._options["lt_api_flag"]
        thunder.DebugOptions.__doc__ = thunder.DebugOptions._docstring()


# --- examine --------------------------------------------------------------------------------


def test_get_fusions_gives_each_fusion_and_its_callable():
    from thunder.examine import get_fusion_symbols, get_fusions

    def f(a):
        return (a.sin() * 2).cos()

    jf = thunder.jit(f, executors=["torchcompile"])
    a = torch.randn(5)
    jf(a)
    trace = thunder.last_traces(jf)[-1]
    ((name, fn),) = get_fusions(trace)
    assert name.startswith("TorchCompile") and get_fusion_symbols(trace)[0].sym.name == name
    torch.testing.assert_close(fn(a)[0], f(a))
    unfused = thunder.jit(f, executors=["torch"])
    unfused(a)
    assert get_fusions(thunder.last_traces(unfused)[-1]) == []


def test_examine_a_non_callable_says_so(capsys):
    result = thunder.examine.examine(torch.ones(2), torch.ones(2))
    assert "expected `fn` to be a callable" in capsys.readouterr().out
    assert result["jit_error"] is not None


# --- the sdpa executor ----------------------------------------------------------------------


def _attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_sdpa_executor_claims_attention_forward():
    from thunder.executors.sdpaex import sdpa_ex

    q, k, v = (torch.randn(2, 3, 5, 8) for _ in range(3))
    jf = thunder.jit(_attention, executors=["sdpa", "torchcompile"])
    torch.testing.assert_close(jf(q, k, v), _attention(q, k, v))
    executors = {
        b.sym.executor for b in thunder.last_traces(jf)[-1].bound_symbols if b.sym.name not in ("python_return", "unpack_trivial")
    }
    assert executors == {sdpa_ex}


def test_sdpa_executor_with_a_differentiable_mask_matches_eager():
    from thunder.executors.sdpaex import sdpa_ex

    def f(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    q, k, v = (torch.randn(2, 3, 5, 8, requires_grad=True) for _ in range(3))
    mask = torch.randn(5, 5, requires_grad=True)
    jf = thunder.jit(f, executors=[sdpa_ex])
    out, expected = jf(q, k, v, mask), f(q, k, v, mask)
    torch.testing.assert_close(out, expected)
    g = torch.randn_like(expected)
    inputs = (q, k, v, mask)
    torch.testing.assert_close(torch.autograd.grad(out, inputs, g), torch.autograd.grad(expected, inputs, g))
    assert any(b.sym.executor is sdpa_ex for b in thunder.last_traces(jf)[-1].bound_symbols)


def test_sdpa_executor_claims_attention_forward_and_backward():
    from thunder.executors.sdpaex import sdpa_ex

    q, k, v = (torch.randn(2, 3, 5, 8, requires_grad=True) for _ in range(3))
    jf = thunder.jit(_attention, executors=[sdpa_ex])
    out = jf(q, k, v)
    expected = _attention(q, k, v)
    torch.testing.assert_close(out, expected)
    g = torch.randn_like(expected)
    torch.testing.assert_close(torch.autograd.grad(out, (q, k, v), g), torch.autograd.grad(expected, (q, k, v), g))
    for trace in (thunder.last_traces(jf)[-1], thunder.last_backward_traces(jf)[-1]):
        assert any(b.sym.executor is sdpa_ex for b in trace.bound_symbols)


# --- autocast -------------------------------------------------------------------------------


def test_cpu_autocast_of_prims_linear_on_mixed_dtypes():
    x, w = torch.randn(16, 16, dtype=torch.bfloat16), torch.randn(16, 16)
    jf = thunder.jit(lambda x, w: thunder.prims.linear(x, w, None))
    with torch.autocast("cpu", torch.bfloat16):
        out = jf(x, w)
        expected = F.linear(x, w)
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("b_dtype", (torch.float32, torch.bfloat16))
def test_cpu_autocast_of_mixed_dtype_matmul(b_dtype):
    a = torch.rand(3, 1, 2, requires_grad=True)
    b = torch.rand(2, 3, dtype=b_dtype, requires_grad=True)
    jf = thunder.jit(torch.matmul)
    with torch.autocast("cpu", torch.bfloat16):
        out = jf(a, b)
        expected = torch.matmul(a, b)
    torch.testing.assert_close(out, expected)
    g = torch.ones_like(expected) / expected.numel()
    for got, want in zip(torch.autograd.grad(out, (a, b), g), torch.autograd.grad(expected, (a, b), g)):
        torch.testing.assert_close(got, want, rtol=5e-3, atol=5e-3)  # bfloat16 products, rounded in another order


def _calls_an_unsupported_op(x):
    return torch.special.gammainc(x, x)


def test_examine_show_call_stack_points_at_the_unsupported_call(capsys):
    assert thunder.torch.torch_to_thunder_map.get(torch.special.gammainc) is None  # pick another op if it is supported
    thunder.examine.examine(lambda x: _calls_an_unsupported_op(x) + 1, torch.rand(3) + 1, show_call_stack=1)
    out = capsys.readouterr().out
    assert "unsupported: torch.special.gammainc" in out
    assert "in _calls_an_unsupported_op" in out and "<lambda>" not in out  # only the innermost frame


def test_no_autocast_runs_a_trace_as_traced_and_restores_the_state():
    from thunder.executors.torchex import no_autocast

    @no_autocast
    def matmul(a, b):
        return a @ b

    a, b = torch.randn(2, 2), torch.randn(2, 2)
    with torch.autocast("cpu", torch.bfloat16):
        assert matmul(a, b).dtype == torch.float32
        assert torch.is_autocast_enabled("cpu")
        assert (a @ b).dtype == torch.bfloat16
    assert not torch.is_autocast_enabled("cpu")


def test_computation_traces_open_with_one_unpack_per_parameter():
    # lightning-thunder's tutorials index ``bound_symbols`` past them (thunder_trace_intro: [2] is the add).
    def fn(x, y):
        return torch.add(x, y)

    jfn = thunder.jit(fn)
    jfn(torch.randn(3, 3), torch.randn(3, 3, 3))
    for trace in (thunder.last_traces(jfn)[0], thunder.last_traces(jfn)[-1]):
        first, second, add = trace.bound_symbols[:3]
        assert first.sym is thunder.prims.unpack_trivial and first.args[0].name == "x"
        assert str(first) == '# x: "cpu f32[3, 3]"'
        assert second.args[0].name == "y" and add.sym.name == "add" and [a.name for a in add.args] == ["x", "y"]
    source = str(thunder.last_traces(jfn)[-1])
    assert source.count('# x: "cpu f32[3, 3]"') == 1  # printed once, where the header had it


def test_a_trace_built_by_hand_with_a_siginfo_prints_and_runs():
    # lightning-thunder's thunder_trace_intro tutorial, in our words.
    from thunder.core.codeutils import SigInfo
    from thunder.core.devices import Device
    from thunder.core.trace import TraceCtx, get_tracectx, reset_tracectx, set_tracectx, tracectx

    trc = TraceCtx()
    with tracectx(trc):
        x = thunder.TensorProxy("x", shape=(3, 3), device=Device("cpu"), dtype=thunder.float32, requires_grad=False)
        y = thunder.TensorProxy("y", shape=(3, 3, 3), device=Device("cpu"), dtype=thunder.float32, requires_grad=False)
        thunder.prims.python_return(thunder.torch.add(x, y))
    si = SigInfo("my_trace")
    si.args = [(v.name, None) for v in (x, y)]
    trc._siginfo = si
    assert trc.siginfo() is si
    assert "def my_trace(x, y):" in str(trc)
    a, b = torch.randn(3, 3), torch.randn(3, 3, 3)
    torch.testing.assert_close(trc.python_callable()(a, b), a + b)

    def add_fn(p, q):
        return p + q

    assert TraceCtx(add_fn).name == "add_fn" and TraceCtx(add_fn).kwargs == {}
    previous = set_tracectx(trc)
    assert get_tracectx() is trc
    reset_tracectx(previous)
    assert get_tracectx() is previous


# --- thunder.core.dtypes and thunder.core.devices -----------------------------------------------


def test_dtype_sets_and_predicates_agree_with_torch():
    from thunder.core import dtypes

    for d in (thunder.float32, thunder.bfloat16, torch.int8, torch.bool, torch.complex64):
        assert d in dtypes.all_dtypes
        assert dtypes.is_exact_dtype(d) == (not d.is_floating_point and not d.is_complex)
        assert (d in dtypes.float_math_dtypes) == (d.is_floating_point and torch.finfo(d).bits >= 16)
    assert dtypes.float_math_dtypes == {torch.float16, torch.bfloat16, torch.float32, torch.float64}
    assert dtypes.to_torch_dtype is thunder.torch.to_torch_dtype
    assert dtypes.to_torch_dtype(float) is torch.get_default_dtype()
    assert dtypes.to_dtype(None) is None and dtypes.to_dtype(torch.ones(1, dtype=torch.int16)) is torch.int16


def test_device_type_compares_with_a_torch_device_type():
    from thunder.core.devices import DeviceType, devicetype_string

    assert torch.ones(1).device.type == DeviceType.CPU
    assert DeviceType(torch.device("meta").type) is DeviceType.META and DeviceType("cuda") is DeviceType.CUDA
    assert devicetype_string(DeviceType.CUDA) == torch.device("cuda", 0).type


def _mul_as_add_executor(name: str, checker):
    ex = OperatorExecutor(name)
    ex.register_implementation(
        thunder.torch.mul, execution_transform=lambda a, b: thunder.torch.add(a, b), checker=checker
    )
    return ex


def test_an_executor_checker_using_device_type_claims_the_op():
    from thunder.core.devices import DeviceType

    ex = _mul_as_add_executor("lt_api_cpu_checker", lambda a, b: a.device.type == DeviceType.CPU)
    a, b = torch.randn(3), torch.randn(3)
    jf = thunder.jit(lambda a, b: a * b, executors=[ex, thunder.pytorch_executor])
    torch.testing.assert_close(jf(a, b), a + b)  # the executor's transform ran: it claimed the mul


def test_an_executor_checker_that_raises_is_reported_not_skipped():
    # lightning-thunder checkers read ``device.devicetype``; on a torch.device that raises, and the
    # op used to go silently to the next executor.
    ex = _mul_as_add_executor("lt_api_raising_checker", lambda a, b: a.device.devicetype == "cpu")
    jf = thunder.jit(lambda a, b: a * b, executors=[ex, thunder.pytorch_executor])
    with pytest.raises(thunder.core.errors.ThunderRuntimeError, match=r"(?s)lt_api_raising_checker.*AttributeError.*device\.type"):
        jf(torch.randn(3), torch.randn(3))


# --- prims.comment --------------------------------------------------------------------------


def test_comment_prints_in_the_trace_and_changes_nothing():
    def f(a):
        thunder.prims.comment("before the sine\nsecond line")
        return a.sin() * 2

    a = torch.randn(4)
    jf = thunder.jit(f)
    torch.testing.assert_close(jf(a), f(a))
    trace = thunder.last_traces(jf)[-1]
    assert "  # before the sine\n  # second line\n" in str(trace)
    (comment,) = [b for b in trace.bound_symbols if b.sym.id is thunder.prims.PrimIDs.COMMENT]
    assert comment.args == ("before the sine\nsecond line",)


def test_comment_bound_by_a_pass_runs_in_the_trace():
    from thunder.core.trace import from_trace

    def f(a):
        return a.cos() + 1

    a = torch.randn(3)
    jf = thunder.jit(f, executors=["torch"])
    jf(a)
    trace = thunder.last_traces(jf)[-1]
    commented = from_trace(trace)
    for bsym in trace.bound_symbols:
        if bsym.sym.name == "add":
            commented.bound_symbols.append(thunder.prims.comment.bind("the add", output=None))
        commented.bound_symbols.append(bsym)
    assert "# the add\n" in str(commented)
    torch.testing.assert_close(commented.python_callable()(a), f(a))


# --- ThunderModule.load_original_state_dict -------------------------------------------------


def test_load_original_state_dict_loads_some_entries_in_place():
    torch.manual_seed(0)
    model, source = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    jm = thunder.jit(model)
    x = torch.randn(4, 3)
    jm(x)
    old_bias = model.bias.detach().clone()
    jm.load_original_state_dict({"weight": source.weight.detach()})
    torch.testing.assert_close(model.weight, source.weight)
    torch.testing.assert_close(model.bias, old_bias)  # not in the dict: kept
    torch.testing.assert_close(jm(x), model(x))
    with pytest.raises(ValueError, match="wieght name no parameter"):
        jm.load_original_state_dict({"wieght": source.weight.detach(), "bias": source.bias.detach()})
    torch.testing.assert_close(model.bias, old_bias)  # nothing loaded


# --- thunder.transforms.autocast ------------------------------------------------------------


def _matmul_then_loss(a, b, c):
    return F.mse_loss(a @ (b + c), c)  # the matmul runs in bfloat16, the loss in float32


@pytest.mark.parametrize("fn", (_matmul_then_loss, lambda a, b, c: a @ b + c, lambda a, b, c: a + b - c))
def test_autocast_transform_matches_eager_autocast(fn):
    from thunder.transforms.autocast import autocast

    a, b, c = (torch.randn(3, 3, requires_grad=True) for _ in range(3))
    with torch.autocast("cpu", torch.bfloat16):
        expected = fn(a, b, c)
    traced = thunder.trace()(autocast(fn, dtype=thunder.bfloat16), a, b, c)
    jf = thunder.jit(autocast(fn, thunder.bfloat16))
    for out in (traced.python_callable()(a, b, c), jf(a, b, c), jf(a, b, c), autocast(fn, thunder.bfloat16)(a, b, c)):
        assert out.dtype == expected.dtype
        torch.testing.assert_close(out, expected)
    assert not torch.is_autocast_enabled("cpu") and thunder.cache_hits(jf) == 1
    g = torch.ones_like(expected)
    torch.testing.assert_close(torch.autograd.grad(jf(a, b, c), (a, b, c), g), torch.autograd.grad(expected, (a, b, c), g))


def test_autocast_transform_takes_only_low_precision_floats():
    from thunder.transforms.autocast import autocast

    with pytest.raises(ValueError, match="float16 or thunder.bfloat16"):
        autocast(torch.matmul, thunder.float64)


# --- functools.partialmethod read through the class -----------------------------------------


def _collect(*args, **kwargs):
    return args, kwargs


class _WithPartialMethods:
    first = functools.partialmethod(_collect, 1, k=2)
    nested = functools.partialmethod(first, 3)
    on_class = functools.partialmethod(classmethod(_collect), c=4)


@pytest.mark.parametrize(
    "call",
    (
        lambda o: _WithPartialMethods.first(o, 5),
        lambda o: _WithPartialMethods.nested(o, 6, d=7),
        lambda o: o.nested(6),
        lambda o: _WithPartialMethods.on_class(8),
    ),
)
def test_partialmethod_read_through_the_class_hits_the_cache(call):
    # Each read of the attribute makes a new function: guarded by what it is made of, not by identity.
    obj = _WithPartialMethods()
    jf = thunder.jit(call)
    for _ in range(3):
        assert jf(obj) == call(obj)
    assert (thunder.cache_misses(jf), thunder.cache_hits(jf)) == (1, 2)


def test_partialmethod_replaced_on_the_class_recompiles():
    class Holder:
        method = functools.partialmethod(_collect, 1)

    obj = Holder()
    jf = thunder.jit(lambda o: Holder.method(o, 2))
    assert jf(obj) == ((obj, 1, 2), {})
    Holder.method = functools.partialmethod(_collect, 10)
    assert jf(obj) == ((obj, 10, 2), {}) and thunder.cache_misses(jf) == 2


# --- torch.ops.higher_order.autograd_function_apply -----------------------------------------


class _ScaledSinForward(torch.nn.Module):
    def forward(self, x, scale):
        return torch.sin(x) * scale, (x, scale)


class _ScaledSinBackward(torch.nn.Module):
    def forward(self, grad, x, scale):
        return grad * torch.cos(x) * scale, grad * torch.sin(x)


_SCALED_SIN_GRAPHS = (torch.fx.symbolic_trace(_ScaledSinForward()), torch.fx.symbolic_trace(_ScaledSinBackward()))


def _apply_scaled_sin(x, scale):
    out = torch.ops.higher_order.autograd_function_apply(
        *_SCALED_SIN_GRAPHS, x, scale, non_differentiable_idx=[], saved_for_backward_idx=[0, 1]
    )
    return out * 2


def test_higher_order_autograd_function_apply_matches_eager():
    x, scale = torch.randn(4, requires_grad=True), torch.randn(4, requires_grad=True)
    jf = thunder.jit(_apply_scaled_sin)
    out, expected = jf(x, scale), _apply_scaled_sin(x, scale)
    torch.testing.assert_close(out, expected)
    g = torch.randn(4)
    torch.testing.assert_close(torch.autograd.grad(out, (x, scale), g), torch.autograd.grad(expected, (x, scale), g))
    torch.testing.assert_close(jf(x, scale), expected)
    assert thunder.cache_hits(jf) == 1


def test_higher_order_autograd_function_apply_runs_the_given_backward():
    # lightning-thunder's form: plain functions taking a ctx (None) first, ``args_tensor_mask``; the
    # forward switches grad off inside, and the backward is deliberately not sin's: it is what runs.
    def forward(ctx, x):
        with torch.no_grad():
            return torch.sin(x), (x,)

    def backward(ctx, grad, x):
        return grad * 2

    class Reference(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return torch.sin(x)

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    def f(x):
        return torch.ops.higher_order.autograd_function_apply(
            forward, backward, x, args_tensor_mask=[True], non_differentiable_idx=[]
        )

    x = torch.randn(3, requires_grad=True)
    out, expected = thunder.jit(f)(x), Reference.apply(x)
    torch.testing.assert_close(out, expected)
    assert out.requires_grad and torch.is_grad_enabled()  # the forward's no_grad ends inside it, as in eager
    g = torch.randn(3)
    torch.testing.assert_close(torch.autograd.grad(out, x, g), torch.autograd.grad(expected, x, g))


def test_higher_order_autograd_function_apply_non_differentiable_output():
    def forward(x):
        return (torch.sin(x), torch.argmax(x)), (x,)

    def backward(grad, grad_index, x):
        return grad * torch.cos(x)

    def f(x):
        value, index = torch.ops.higher_order.autograd_function_apply(
            forward, backward, x, non_differentiable_idx=[1], saved_for_backward_idx=[0]
        )
        return value, index

    x = torch.randn(5, requires_grad=True)
    value, index = thunder.jit(f)(x)
    assert index == torch.argmax(x) and not index.requires_grad
    torch.testing.assert_close(torch.autograd.grad(value.sum(), x)[0], torch.cos(x))


def test_autograd_function_switching_grad_mode_inside_leaves_it_as_it_was():
    class SinTwiceGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            with torch.no_grad():
                return torch.sin(x)

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    def f(x):
        return SinTwiceGrad.apply(x) * 3

    x = torch.randn(3, requires_grad=True)
    jf = thunder.jit(f)
    out = jf(x)
    assert torch.is_grad_enabled()  # it used to stay off after the call
    expected = f(x)
    assert out.requires_grad == expected.requires_grad
    torch.testing.assert_close(torch.autograd.grad(out.sum(), x), torch.autograd.grad(expected.sum(), x))


# --- an executor's own operators ------------------------------------------------------------


def test_operator_made_by_an_execution_transform_runs_its_fn_not_its_meta():
    # ``like=`` gives only the metadata: ``a + 0`` is not what ``double`` computes. It used to be
    # decomposed into its meta's ops (torch ran ``a + 0``): a silently wrong result.
    ex = OperatorExecutor("lt_api_double")
    double = ex.register_operator("lt_api_double_op", like=lambda a: a + 0, fn=lambda a: a * 2)
    assert double.id == "lt_api_double_op"  # lightning-thunder's ids are the operator's name
    ex.register_implementation(thunder.torch.neg, execution_transform=lambda a: double(a))
    a = torch.randn(3)
    for executors in ([ex], [ex, thunder.pytorch_executor]):
        jf = thunder.jit(lambda a: -a, executors=executors)
        torch.testing.assert_close(jf(a), a * 2)
        assert [b.sym for b in thunder.last_traces(jf)[-1].bound_symbols if b.sym.executor is ex] == [double]


def test_an_operator_replaces_its_function_only_where_its_executor_runs():
    """``register_operator(..., replaces=f)`` recorded the operator in every jit, and a jit without
    its executor then ran the ``like=`` ops (the meta's stand-in) instead of ``fn``: 1s where eager
    gives 2s. Without the executor the program's own function is traced; an operator called
    directly without its executor is a clear error."""
    ex = thunder.extend.OperatorExecutor("test_replacing_ex")
    thunder.extend.register_executor(ex)

    def double(a):
        return a * 2

    op = ex.register_operator("test_fast_double", like=lambda a: a + 0, fn=lambda a: a * 2, replaces=double)
    a = torch.ones(2)
    try:
        with_ex, without = thunder.jit(double, executors=[ex]), thunder.jit(double)
        torch.testing.assert_close(with_ex(a), double(a))
        torch.testing.assert_close(without(a), double(a))
        assert "test_fast_double" in str(thunder.last_traces(with_ex)[-1])
        assert "test_fast_double" not in str(thunder.last_traces(without)[-1])
        with pytest.raises(RuntimeError, match="operator of the executor 'test_replacing_ex'.*add it to executors="):
            thunder.jit(lambda a: op(a))(a)
    finally:
        thunder.extend.deregister_executor(ex)
        thunder.extend.replacements.pop(double, None)
