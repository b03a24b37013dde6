"""Executors: torchcompile fusion, the extend API, user transforms."""

from __future__ import annotations

import itertools
import re

import pytest
import torch

import thunder
from thunder.core.errors import ThunderRuntimeError
from thunder.extend import OperatorExecutor, deregister_executor, register_executor


def elementwise_chain(a, b):
    c = a * b + 1.0
    d = torch.sin(c) - b
    return torch.exp(d) * 0.5


@pytest.mark.slow
def test_torchcompile_fuses_regions_and_matches_eager():
    jf = thunder.jit(elementwise_chain, executors=["torchcompile"])
    a, b = torch.randn(4, 8), torch.randn(4, 8)
    torch.testing.assert_close(jf(a, b), elementwise_chain(a, b))
    torch.testing.assert_close(jf(a, b), elementwise_chain(a, b))
    executed = thunder.last_traces(jf)[-1]
    fusions = [b for b in executed.bound_symbols if b.sym.name.startswith("TorchCompile")]
    assert len(fusions) == 1
    fusion = fusions[0]
    assert len(fusion.subsymbols) == 6 and len(fusion.lineage) == 6
    assert "TorchCompile" in str(executed)


def test_torchcompile_leaves_inplace_ops_to_torch():
    def g(x):
        y = x * 2
        x.add_(1)
        return y + x

    jf = thunder.jit(g, executors=["torchcompile"])
    x = torch.randn(3)
    xe = x.clone()
    torch.testing.assert_close(jf(x), g(xe))
    torch.testing.assert_close(x, xe)
    executed = thunder.last_traces(jf)[-1]
    # add_ is decomposed (torchcompile accepts its out-of-place add); the copy into x is a barrier
    # the torch executor runs, outside any fusion; x * 2 and x + 1 fuse, y + x (one op) is declined.
    names = [b.sym.name for b in executed.bound_symbols if b.sym.name not in ("python_del", "unpack_trivial")]
    assert names == ["TorchCompile0", "torch_copy_", "add", "python_return"], names
    fusion = executed.bound_symbols[1]
    assert [s.sym.name for s in fusion.subsymbols] == ["mul", "add"]


def test_executors_listed_highest_priority_first_and_extended_by_always():
    jf = thunder.jit(elementwise_chain, executors=["torchcompile"])
    names = [e.name for e in thunder.compile_data(jf).executors_list]
    assert names == ["torchcompile", "torch", "python"]


def test_register_operator_shows_in_traces_and_runs():
    ex = OperatorExecutor("test_custom_ex")
    register_executor(ex)
    calls = []

    def my_mul_impl(a, b):
        calls.append(1)
        return a * b

    my_mul = ex.register_operator("my_mul", like=thunder.torch.mul, fn=my_mul_impl)
    try:

        def g(x, y):
            return my_mul(x, y) + 1

        jg = thunder.jit(g, executors=[ex])
        x, y = torch.randn(3), torch.randn(3)
        torch.testing.assert_close(jg(x, y), x * y + 1)
        assert calls
        assert "my_mul(x, y)" in str(thunder.last_traces(jg)[-1])
    finally:
        deregister_executor(ex)


def test_register_implementation_claims_an_existing_symbol():
    ex = OperatorExecutor("test_sin_ex")
    register_executor(ex)
    seen = []

    def sin_impl(a):
        seen.append(a.shape)
        return torch.sin(a)

    sin_op = ex.register_operator("sin_via_ex", like=thunder.torch.sin, fn=sin_impl)
    ex.register_implementation(thunder.torch.sin, sin_op, checker=lambda a: a.ndim == 1)
    try:

        def g(x):
            return torch.sin(x)

        jg = thunder.jit(g, executors=[ex])
        torch.testing.assert_close(jg(torch.ones(3)), torch.sin(torch.ones(3)))
        assert seen == [torch.Size([3])]
        torch.testing.assert_close(jg(torch.ones(2, 2)), torch.sin(torch.ones(2, 2)))  # checker says no: torch runs it
        assert len(seen) == 1
    finally:
        deregister_executor(ex)


def test_user_transform_post_optimization_shows_in_last_traces():
    class CountOps(thunder.Transform):
        def __init__(self):
            self.seen = 0

        def transform_trace_post_optimization(self, trace, **kwargs):
            self.seen = len(trace.bound_symbols)
            from thunder.core.trace import from_trace

            new = from_trace(trace)
            new.bound_symbols.extend(trace.bound_symbols)
            return new

    t = CountOps()
    jf = thunder.jit(elementwise_chain, transforms=[t])
    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(jf(a, b), elementwise_chain(a, b))
    assert t.seen > 0
    assert thunder.list_transforms(jf) == [t]
    assert "CountOps" in [tr.provenance.pass_name for tr in thunder.last_traces(jf)]


def test_an_operator_returning_a_tensor_and_a_number_binds_its_outputs():
    from thunder.extend import OperatorExecutor, deregister_executor, register_executor

    ex = register_executor(OperatorExecutor("tensor_and_number_ex"))
    try:
        op = ex.register_operator(
            "twice_and_zero", meta=lambda a: (thunder.TensorProxy(like=a), 0), fn=lambda a: (a * 2, 0)
        )

        def f(x):
            y, z = op(x)
            return y + z

        jf = thunder.jit(f, executors=[ex])
        torch.testing.assert_close(jf(torch.ones(2)), torch.full((2,), 2.0))
    finally:
        deregister_executor(ex)


def test_an_executors_grad_transform_is_the_gradient_of_the_ops_it_claims():
    from thunder.core.transforms import get_grad, put_grads
    from thunder.extend import OperatorExecutor, deregister_executor, register_executor

    ex = register_executor(OperatorExecutor("sin_with_grad_ex"))
    backward_calls = []
    try:
        sin_fwd = ex.register_operator(
            "sin_fwd", meta=lambda a: (thunder.TensorProxy(like=a), thunder.TensorProxy(like=a)),
            fn=lambda a: (torch.sin(a), torch.cos(a)),
        )  # fmt: skip
        sin_bwd = ex.register_operator(
            "sin_bwd", meta=lambda g, c: thunder.TensorProxy(like=g), fn=lambda g, c: backward_calls.append(1) or g * c
        )

        def grad_transform(a):
            out, cos = sin_fwd(a)
            put_grads((a,), (sin_bwd(get_grad(out), cos),))
            return out

        ex.register_implementation(
            thunder.torch.sin, checker=lambda a: a.ndim == 1, execution_transform=lambda a: sin_fwd(a)[0],
            grad_transform=grad_transform,
        )  # fmt: skip

        def f(x):
            return (torch.sin(x * 2) * 3).sum()

        for shape, uses_it in (((4,), True), ((2, 2), False)):  # the checker decides
            backward_calls.clear()
            x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
            y = x.detach().clone().requires_grad_()
            jf = thunder.jit(f, executors=[ex])
            jf(x).backward()
            f(y).backward()
            torch.testing.assert_close(x.grad, y.grad)
            assert thunder.compile_stats(jf).last_autograd_fallback is None
            backward = str(thunder.last_backward_traces(jf)[-1])
            assert ("sin_bwd" in backward) is uses_it and backward_calls == ([1] if uses_it else [])
        with pytest.raises(thunder.core.errors.ThunderError, match="get_grad is for an executor's grad_transform"):
            get_grad(None)
    finally:
        deregister_executor(ex)


def _conv_lines(trace) -> list[str]:
    return [line.strip() for line in str(trace).splitlines() if "conv" in line and not line.lstrip().startswith("#")]


@pytest.mark.parametrize("channels_last", [False, True])
def test_small_convolutions_run_the_direct_kernels_forward_and_backward(channels_last):
    """A small float32 conv2d on CPU runs the direct im2col-and-GEMM kernels, not oneDNN (5-7x faster at
    this size; Note [Small convolutions] in thunder.executors.torchex); a depthwise one and one above the
    size limit keep torch.conv2d and its backward. Values and gradients agree with eager's to float
    rounding, for a channels-last input too and when the input needs no gradient."""
    torch.manual_seed(0)
    small, depthwise, large = torch.nn.Conv2d(3, 8, 4, stride=4), torch.nn.Conv2d(8, 8, 3, padding=1, groups=8), torch.nn.Conv2d(8, 64, 3)
    x = torch.randn(2, 3, 16, 16)
    big = torch.randn(4, 8, 40, 40)  # 64 * 38 * 38 * 4 * 72 multiply-adds: above DIRECT_CONV_MACS
    if channels_last:
        x, big = x.to(memory_format=torch.channels_last), big.to(memory_format=torch.channels_last)

    def f(x, big):
        return depthwise(small(x)).square().mean() + large(big).mean()

    jf = thunder.jit(f, executors=["torch"])
    loss = jf(x, big)
    expected = f(x, big)
    torch.testing.assert_close(loss, expected)
    got = torch.autograd.grad(loss, list(small.parameters()) + list(large.parameters()))
    want = torch.autograd.grad(expected, list(small.parameters()) + list(large.parameters()))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b)
    forward, backward = _conv_lines(thunder.last_traces(jf)[-1]), _conv_lines(thunder.last_backward_traces(jf)[-1])
    assert sum("conv2d_direct(x," in line for line in forward) == 1, forward
    assert sum("torch.conv2d(" in line for line in forward) == 2, forward
    assert sum("conv2d_direct_backward(" in line and "x," in line and "[False, True, True]" in line for line in backward) == 1, backward
    assert sum("torch_convolution_backward(" in line for line in backward) == 2, backward


def test_the_direct_convolution_limit_is_read_when_a_function_compiles(monkeypatch):
    """``DIRECT_CONV_MACS = 0`` keeps eager's convolution kernels (bit for bit) in functions compiled after it."""
    from thunder.executors import torchex

    monkeypatch.setattr(torchex, "DIRECT_CONV_MACS", 0)
    conv, x = torch.nn.Conv2d(3, 8, 4, stride=4), torch.randn(2, 3, 16, 16)
    jf = thunder.jit(conv)
    assert torch.equal(jf(x), conv(x))
    assert not any("conv2d_direct" in line for line in _conv_lines(thunder.last_traces(jf)[-1]))


def test_nvfuser_is_listed_unavailable_with_its_reason_and_a_jit_naming_it_says_so():
    from thunder.executors import nvfuserex

    assert nvfuserex.ex in thunder.get_all_executors() and nvfuserex.ex not in thunder.get_default_executors()
    assert thunder.nvfuser_executor is None  # lightning-thunder's value where nvFuser cannot run
    reason = nvfuserex.ex.unavailable_reason
    assert not nvfuserex.ex.available() and reason
    with pytest.raises(ThunderRuntimeError, match=f"'nvfuser' is unavailable: {re.escape(reason)}"):
        thunder.jit(lambda x: x * 2 + 1, executors=["nvfuser"])(torch.randn(3))


def test_the_direct_convolutions_layout_rule_is_suggest_memory_format():
    # The direct kernel lays its output out channels-last where eager's oneDNN would (suggest_memory_format); its
    # cheap test (two C calls for the common contiguous case) must say what suggest_memory_format says everywhere.
    from torch._prims_common import suggest_memory_format

    from thunder.executors.torchex import _channels_last

    for shape in itertools.product([1, 2, 3], repeat=4):
        a = torch.randn(*shape)
        layouts = [a, a.contiguous(memory_format=torch.channels_last), a.permute(0, 2, 3, 1), a.transpose(2, 3),
                   a[:, :, ::2], a.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)]  # fmt: skip
        for t in layouts:
            assert _channels_last(t) == (suggest_memory_format(t) is torch.channels_last), (shape, t.stride())


def test_an_in_place_op_none_of_whose_parts_fuse_runs_whole():
    """Note [Unfused parts run whole]: ``z += y`` between ops that torch runs whole was an ``add`` (a fusion of one op,
    declined) and a ``copy_``; now torch's one ``add_``. Where its ``add`` fuses with a neighbour it stays split under
    ``torchcompile``; the defaults (``torchcompile_background``) run an in-place op whole anyway."""

    def alone(x, y, mean, var):
        z = torch.nn.functional.batch_norm(x, mean, var)
        z += y
        return z

    def fused(x, y):
        z = x * 2
        z += y
        return z.sin() * 3

    x, y, mean, var = torch.randn(2, 3, 4), torch.randn(2, 3, 4), torch.randn(3), torch.rand(3) + 1
    for executors in (None, ["torchcompile"]):
        jf = thunder.jit(alone, executors=executors)
        torch.testing.assert_close(jf(x, y, mean, var), alone(x, y, mean, var))
        names = [b.sym.name for b in thunder.last_traces(jf)[-1].bound_symbols]
        assert "Tensor.add_" in names and "copy_" not in names, names
        jf = thunder.jit(fused, executors=executors)
        torch.testing.assert_close(jf(x, y), fused(x, y))
        names = [b.sym.name for b in thunder.last_traces(jf)[-1].bound_symbols]
        assert any(n.startswith("TorchCompile") for n in names), names
        if executors is None:
            assert "Tensor.add_" in names and "torch_copy_" not in names, names
        else:
            assert "torch_copy_" in names, names


def test_the_torch_executor_asks_its_tables_once_about_a_prim_it_declines(monkeypatch):
    # Every claim of a prologue asks about each of its checks (636 in a Qwen2 decoding entry): Note [Declines are kept].
    from thunder.core.prims.python import check_identity
    from thunder.executors import torchex

    class Counting(dict):
        asked = 0

        def get(self, key, default=None):
            Counting.asked += 1
            return super().get(key, default)

    table = Counting(torchex.symbol_to_torch)
    monkeypatch.setattr(torchex, "symbol_to_torch", table)
    monkeypatch.setattr(torchex, "_declined", {}, raising=False)
    assert torchex.ex.lookup_implementation(check_identity) is None
    assert torchex.ex.lookup_implementation(check_identity) is None
    assert Counting.asked == 1
    table[object()] = None  # a symbol registered since (a custom op): the decline is looked up again
    assert torchex.ex.lookup_implementation(check_identity) is None
    assert Counting.asked == 2
    # and the prologue's checks still run, on the python executor
    f = thunder.jit(lambda x: x * _SCALE)
    assert torch.equal(f(torch.ones(2)), torch.ones(2) * 3)


_SCALE = 3
