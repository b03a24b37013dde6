"""The triton executor against eager PyTorch: values, dtypes and gradients, the fusions it makes
in forward and backward traces, what it declines, and its unavailability reason.

Without a GPU the kernels run in Triton's interpreter on CPU tensors: ``TRITON_INTERPRET`` is
set here, at import. Triton reads it when a kernel is decorated, which the executor does when
it builds one, so it works even where another test module imported triton first.
"""

from __future__ import annotations

import os
import subprocess
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest
import torch
import torch.nn.functional as F

pytest.importorskip("triton", reason="the triton executor's tests need triton (pip install triton)")

import thunder
from thunder.core.errors import ThunderRuntimeError
from thunder.executors import tritonex

# Masked-off lanes compute on the interpreter's zeros (0 / 0): numpy warns; so does eager's var
# with no degrees of freedom.
pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:var\\(\\). degrees of freedom:UserWarning"),
]

DEVICE = "cuda" if os.environ["TRITON_INTERPRET"] == "0" else "cpu"
FLOATS = [torch.float32, torch.float64, torch.bfloat16, torch.float16]


def _jit(fn):
    return thunder.jit(fn, executors=["triton", "torch"])


def _fusions(trace) -> list:
    return [b for b in trace.bound_symbols if b.sym.name.startswith("Triton")]


def _absorbed(trace) -> set[str]:
    return {s.sym.name for b in _fusions(trace) for s in b.subsymbols}


def _grads(out, args, cotangent):
    return torch.autograd.grad(out, [a for a in args if a.requires_grad], cotangent)


def _copy(args):
    return [a.detach().clone().requires_grad_(a.requires_grad) for a in args]


def _check(fn, *args):
    """Runs ``fn`` jitted and eagerly; values, dtypes and gradients agree.

    In bfloat16 and float16 a gradient may differ from eager's by a few ulps where the formula cancels (it
    does so with the torch executor too: thunder's formulas round differently from autograd's);
    there it must be as close to the float64 gradient as eager's is (twice its error, at most).
    """
    ours = _copy(args)
    jf = _jit(fn)
    got, expected = jf(*ours), fn(*args)
    torch.testing.assert_close(got, expected)
    cotangent = torch.randn_like(expected)
    g_got, g_expected = _grads(got, ours, cotangent), _grads(expected, args, cotangent)
    if expected.dtype not in (torch.bfloat16, torch.float16):
        torch.testing.assert_close(g_got, g_expected)
        return jf
    wide = [a.detach().double().requires_grad_(a.requires_grad) for a in args]
    for g, e, exact in zip(g_got, g_expected, _grads(fn(*wide), wide, cotangent.double())):
        assert g.dtype == e.dtype
        assert (g.double() - exact).abs().max() <= 2 * (e.double() - exact).abs().max() + 1e-3
    return jf


def _rand(*shape, dtype=torch.float32, grad=True):
    return torch.randn(*shape, dtype=dtype, device=DEVICE).requires_grad_(grad)


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_elementwise_chain_with_broadcasting_and_scalars(dtype):
    def f(x, b):
        return torch.exp(-(x * 0.5 + b)) / (1.0 + torch.abs(x)) - torch.sqrt(b * b + 1)

    jf = _check(f, _rand(4, 33, dtype=dtype), _rand(33, dtype=dtype))
    (fusion,) = _fusions(thunder.last_traces(jf)[-1])
    assert {"mul", "broadcast_in_dim", "add", "exp", "div", "sqrt"} <= {s.sym.name for s in fusion.subsymbols}
    assert _fusions(thunder.last_backward_traces(jf)[-1]), "the backward's elementwise ops are fused too"


def test_backward_region_is_fused():
    jf = _check(lambda x, y: torch.sin(x * y) * y, _rand(3, 17), _rand(3, 17))
    assert {"cos", "mul"} <= _absorbed(thunder.last_backward_traces(jf)[-1])


def test_backward_fusion_recomputes_what_only_fusions_read():
    """Note [Rematerialisation]: ``z = relu(t) * 2`` is recomputed by a backward kernel from relu's
    output, which torch's threshold backward reads anyway; what torch's layer-norm backward reads
    stays saved."""

    def f(x, w):
        z = torch.relu(x @ w) * 2
        return F.layer_norm(z * z + 1, (16,))

    jf = _check(f, _rand(8, 16), _rand(16, 16))
    backward = thunder.last_backward_traces(jf)[-1]
    saved = [a.name for a in backward.args if not a.name.startswith("g_")]
    (layer_norm,) = [b for b in thunder.last_traces(jf)[-1].bound_symbols if "layer_norm" in b.sym.name]
    assert layer_norm.args[0].name in saved
    assert len(saved) == 6  # with relu's output, layer norm's statistics, x and w; not z
    assert "mul" in _absorbed(backward)
    plain = thunder.jit(f, executors=["torch"])
    plain(*_copy([_rand(8, 16), _rand(16, 16)])).sum().backward()
    assert len(thunder.last_backward_traces(plain)[-1].args) == len(backward.args) + 1


def test_dtype_conversions_comparisons_and_where():
    def f(x, i):
        low = x.to(torch.bfloat16) * 3
        masked = torch.where(x > 0, low.float(), i.to(torch.float32) / 7)
        return masked, (x >= i).to(torch.int32) + i, (x < 0.25) & (i != 2)

    x, i = _rand(5, 9, grad=False), torch.randint(-3, 4, (5, 9), device=DEVICE)
    jf = _jit(f)
    for got, expected in zip(jf(x, i), f(x, i)):
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected)
    assert {"convert_element_type", "where", "gt", "bitwise_and"} <= _absorbed(thunder.last_traces(jf)[-1])


def test_bfloat16_rounds_to_nearest_even():
    x = torch.randn(4096, device=DEVICE)
    x[:3] = torch.tensor([float("nan"), float("inf"), 1 + 2**-8])  # a tie: rounds to the even 1.0
    jf = _jit(lambda x: (x * 1.0).to(torch.bfloat16) == (x + 0.0).to(torch.bfloat16))
    assert torch.equal(jf(x), x.to(torch.bfloat16) == x.to(torch.bfloat16))
    exact = {"rtol": 0, "atol": 0, "equal_nan": True}
    torch.testing.assert_close(_jit(lambda x: (x * 1.0).to(torch.bfloat16))(x), x.to(torch.bfloat16), **exact)


def test_bfloat16_ops_with_numbers_it_cannot_hold_run_as_eager():
    # Eager rounds 0.3 to bfloat16 before adding or comparing (thunder's decomposition would not):
    # those ops stay whole, with torch; numbers bfloat16 holds (1.0, 0.5) are fused.
    x = torch.tensor([0.3, 0.30078125, 0.298828125, 1.1, -2.0], device=DEVICE).to(torch.bfloat16)

    def f(x):
        y = x * 0.5 + 1.0
        return y, y == 0.3, y + 0.3, y - 0.3, y < 0.3

    jf = _jit(f)
    for got, expected in zip(jf(x), f(x)):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    trace = thunder.last_traces(jf)[-1]
    assert {"mul", "add"} <= _absorbed(trace)
    assert "torch.eq" in str(trace)


def test_number_in_a_bfloat16_prim_is_rounded_to_nearest_even():
    from thunder.core import prims

    x = torch.randn(64, device=DEVICE).to(torch.bfloat16)
    jf = _jit(lambda x: prims.where(prims.gt(x * 1.0, 0), x * 1.0, 0.3))
    assert torch.equal(jf(x), torch.where(x > 0, x, 0.3))
    assert "where" in _absorbed(thunder.last_traces(jf)[-1])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op", [torch.softmax, torch.log_softmax], ids=["softmax", "log_softmax"])
def test_softmax(op, dtype):
    jf = _check(lambda x: op(x * 2, -1), _rand(6, 50, dtype=dtype))
    assert {"amax", "sum", "exp"} <= _absorbed(thunder.last_traces(jf)[-1])


def test_long_rows_loop_over_the_row():
    jf = _check(lambda x: torch.softmax(x, -1) + 1, _rand(2, 5000))
    assert {"amax", "sum"} <= _absorbed(thunder.last_traces(jf)[-1])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_rms_norm(dtype):
    jf = _check(lambda x, w: F.rms_norm(x, (40,), w, eps=1e-6), _rand(2, 3, 40, dtype=dtype), _rand(40, dtype=dtype))
    assert "sum" in _absorbed(thunder.last_traces(jf)[-1])
    assert _fusions(thunder.last_backward_traces(jf)[-1])


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_layer_norm(dtype):
    def f(x, w, b):
        return F.layer_norm(x, (24,), w, b) * 3 + 1

    x, w, b = _rand(4, 24, dtype=dtype), _rand(24, dtype=dtype), _rand(24, dtype=dtype)
    # With gradients, thunder runs layer_norm on CPU as ATen's kernel (it keeps the statistics
    # for the backward): what surrounds it is fused.
    _check(f, x, w, b)
    with torch.no_grad():  # decomposed: var_mean and the normalisation in one kernel
        jf = _jit(f)
        torch.testing.assert_close(jf(x, w, b), f(x, w, b))
    assert {"var_mean", "rsqrt", "broadcast_in_dim"} <= _absorbed(thunder.last_traces(jf)[-1])


@pytest.mark.parametrize("correction", [0, 1, 30])
def test_var_mean_over_the_last_dim(correction):
    jf = _check(lambda x: torch.var(x * 2, -1, correction=correction) + torch.mean(x * 2, -1), _rand(3, 7))
    assert "var" in _absorbed(thunder.last_traces(jf)[-1])


@pytest.mark.parametrize("act", [F.gelu, F.silu], ids=["gelu", "silu"])
def test_mlp_forward_and_backward(act):
    w1, b1, w2 = _rand(32, 16), _rand(32), _rand(8, 32)

    def mlp(x, w1, b1, w2):
        return F.linear(act(F.linear(x, w1, b1)), w2).sum(-1)

    jf = _check(mlp, _rand(4, 16), w1, b1, w2)
    assert ({"erf"} if act is F.gelu else {"sigmoid"}) <= _absorbed(thunder.last_traces(jf)[-1])


@pytest.mark.parametrize("weight", ["tensor", 0.3, 0.7])
def test_bfloat16_lerp_in_a_region_rounds_once_as_eager(weight):
    # lerp decomposed into bfloat16 ops rounded after each (0.25 off at 75), and took one formula
    # where eager's kernel takes end - (end - start) * (1 - weight) for |weight| >= 0.5.
    gen = torch.Generator().manual_seed(0)
    a, b = (torch.randn(64, generator=gen) * 50).bfloat16(), (torch.randn(64, generator=gen) * 50).bfloat16()
    w = (torch.rand(64, generator=gen) * 1.4 - 0.2).bfloat16() if weight == "tensor" else weight

    def f(a, b, w):
        return torch.lerp(a * 1.0, b * 1.0, w) * 1.0

    jf = _jit(f)
    torch.testing.assert_close(jf(a, b, w), f(a, b, w), rtol=0, atol=0)
    assert len(_fusions(thunder.last_traces(jf)[-1])) == 1  # one kernel: the lerp is fused, not run by torch


def test_tanh_and_sigmoid_backward_kernels_are_fused():
    jf = _check(lambda x: torch.tanh(x * 2) * torch.sigmoid(x), _rand(3, 17))
    absorbed = _absorbed(thunder.last_backward_traces(jf)[-1])
    assert {"tanh_backward", "sigmoid_backward"}.isdisjoint(
        {b.sym.name for b in thunder.last_backward_traces(jf)[-1].bound_symbols}
    )
    assert {"mul", "sub"} <= absorbed


def test_non_contiguous_and_expanded_inputs():
    x = _rand(24, 6).t()  # strides (1, 6)
    b = torch.randn(1, 24, device=DEVICE).expand(6, 24)  # stride 0
    jf = _check(lambda x, b: torch.softmax(x + b, -1) * x, x, b)
    assert _fusions(thunder.last_traces(jf)[-1])


_NAN = float("nan")


@pytest.mark.parametrize(
    "fn, make",
    [
        (lambda x: (x * 2 + 1).sum(-1) * 3, lambda: torch.randn(5)),  # a 1-d row, a 0-d output
        (lambda x: x * 2 + 1, lambda: torch.tensor(3.0)),
        (lambda x: torch.softmax(x * 2, -1), lambda: torch.randn(0, 5)),  # no rows
        (lambda x: (x * 2).sum(-1) + 1, lambda: torch.randn(3, 0)),  # empty rows sum to 0
        (lambda x: (x * 3 - x * x) * x, lambda: torch.randint(-100, 100, (4, 5), dtype=torch.int8)),  # wraps
        (lambda x: (x.to(torch.int32) + 1) * 2, lambda: torch.randn(8) * 100),
        (lambda x: torch.amin(x * 1, -1) + 1, lambda: torch.tensor([[1.0, _NAN, 2.0], [3.0, -1.0, 0.0]])),
        (lambda x: (x * 1).to(torch.float64) + 1e-10, lambda: torch.randn(7)),
        (lambda x: x * 1 + 1e-10, lambda: torch.randn(7, dtype=torch.float64)),  # float64 constants are exact
    ],
    ids=["row-1d", "0d", "no-rows", "empty-rows", "int8", "float-to-int", "amin-nan", "to-float64", "f64-constant"],
)
def test_edge_cases(fn, make):
    x = make().to(DEVICE)
    jf = _jit(fn)
    got, expected = jf(x), fn(x)
    assert got.dtype == expected.dtype
    torch.testing.assert_close(
        got,
        expected,
        equal_nan=True,
        rtol=0 if x.dtype is torch.float64 else None,
        atol=0 if x.dtype is torch.float64 else None,
    )
    assert _fusions(thunder.last_traces(jf)[-1])


def test_nan_propagates_through_amax_and_maximum():
    x = torch.randn(3, 10, device=DEVICE)
    x[1, 4] = float("nan")
    jf = _jit(lambda x: (torch.softmax(x, -1), torch.maximum(x, x * 0 + 0.5), x.amax(-1) + 1))
    for got, expected in zip(jf(x), (torch.softmax(x, -1), torch.maximum(x, x * 0 + 0.5), x.amax(-1) + 1)):
        torch.testing.assert_close(got, expected, equal_nan=True)


def test_ops_it_cannot_generate_stay_with_torch():
    def f(x, i):
        return torch.tanh(x * 2) + 1, (i * 3) // 2, x.sum(0) * 2  # tanh, integer division, a sum over dim 0

    x, i = _rand(4, 5, grad=False), torch.randint(-9, 9, (4, 5), device=DEVICE)
    jf = _jit(f)
    for got, expected in zip(jf(x, i), f(x, i)):
        torch.testing.assert_close(got, expected)
    trace = thunder.last_traces(jf)[-1]
    assert not {"tanh", "floor_divide", "sum"} & _absorbed(trace)
    assert "torch.tanh" in str(trace)


def test_unavailable_executor_names_the_reason(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert not tritonex.ex.available()
    assert "TRITON_INTERPRET=1" in tritonex.ex.unavailable_reason
    with pytest.raises(ThunderRuntimeError, match="'triton' is unavailable: no CUDA device"):
        _jit(lambda x: x * 2 + 1)(torch.randn(3))

    monkeypatch.setattr(tritonex.importlib.util, "find_spec", lambda name, *a: None)
    assert tritonex.ex.unavailable_reason == "triton is not installed (pip install triton)"


def test_listed_among_the_executors_and_not_a_default():
    assert tritonex.ex in thunder.get_all_executors()
    assert tritonex.ex not in thunder.get_default_executors()
    assert tritonex.ex.available()


def test_gpt2_block_forward_and_backward():
    pytest.importorskip("transformers")
    from tests import zoo

    block = zoo.build("gpt2").transformer.h[0].to(DEVICE)
    params = list(block.parameters())
    x = _rand(2, 8, 32)
    jb = _jit(block)
    got, expected = jb(x)[0], block(x)[0]
    torch.testing.assert_close(got, expected)
    cotangent = torch.randn_like(expected)
    torch.testing.assert_close(
        torch.autograd.grad(got, [x, *params], cotangent), torch.autograd.grad(expected, [x, *params], cotangent)
    )
    assert _fusions(thunder.last_traces(jb)[-1]) and _fusions(thunder.last_backward_traces(jb)[-1])


def test_kernels_run_when_triton_was_imported_before_interpret_mode_was_set():
    # The full suite imports triton early (torch.compile does): the kernels must not call
    # triton.language's own @triton.jit functions, made for the mode of that first import.
    code = (
        "import os, triton, torch, thunder, thunder.executors.tritonex\n"
        "os.environ['TRITON_INTERPRET'] = '1'\n"
        "f = lambda x: torch.log_softmax(x * 2, -1) + torch.var(x, -1, keepdim=True)\n"
        "x = torch.randn(4, 30)\n"
        "torch.testing.assert_close(thunder.jit(f, executors=['triton', 'torch'])(x), f(x))\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, timeout=300)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16], ids=str)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_rows_forward_and_backward(dtype, reduction):
    """The target's log-probability is picked in the log-softmax kernel; the backward (nll_loss's
    and log_softmax's decompositions) runs in kernels too, nothing on torch but one small sum."""
    target = torch.randint(0, 33, (8,), device=DEVICE)
    target[2] = -100  # ignored

    def f(x):
        return F.cross_entropy(x, target, reduction=reduction)

    jf = _check(f, _rand(8, 33, dtype=dtype))
    forward, backward = thunder.last_traces(jf)[-1], thunder.last_backward_traces(jf)[-1]
    assert "take_along_axis" in _absorbed(forward)
    assert {"iota", "eq", "exp"} <= _absorbed(backward)
    on_torch = [b.sym.name for b in backward.bound_symbols if not b.sym.name.startswith("Triton")]
    assert not {"nll_loss_backward", "log_softmax_backward_data"} & set(on_torch)


def test_cross_entropy_of_one_row_and_class_weights():
    weight = torch.rand(33, device=DEVICE)
    _check(lambda x: F.cross_entropy(x, torch.tensor(5, device=DEVICE)), _rand(33))
    _check(lambda x: F.cross_entropy(x, torch.arange(8, device=DEVICE), weight=weight), _rand(8, 33))


def test_a_class_index_out_of_bounds_fails_as_eager_does():
    jf = _jit(lambda x, t: F.cross_entropy(x, t))
    x = _rand(4, 33)
    jf(x, torch.tensor([0, 1, 2, 3], device=DEVICE))
    with pytest.raises(RuntimeError, match="out of bounds for dimension 1 with size 33"):
        jf(x, torch.tensor([0, 40, 2, 3], device=DEVICE))
    with pytest.raises(RuntimeError, match="out of bounds"):
        jf(x, torch.tensor([0, -3, 2, 3], device=DEVICE))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("rows", [(8,), ()], ids=["batch", "one row"])
def test_nll_loss_backward_decomposition(reduction, weighted, rows):
    """nll_loss_backward's prims (class index compared per element, ignored rows 0) against eager;
    the first target of the batch is ignored."""
    weight = torch.rand(33, device=DEVICE) if weighted else None
    target = torch.tensor([3, 4, 8, 12, 16, 20, 24, 32], device=DEVICE) if rows else torch.tensor(5, device=DEVICE)

    def f(x):
        return F.nll_loss(x, target, weight=weight, reduction=reduction, ignore_index=3)

    _check(f, _rand(*rows, 33))


def test_forward_mode_ad_through_a_triton_fusion_is_a_clear_error():
    # the kernels dropped the dual tensors' tangents: the result's tangent was None, silently
    import torch.autograd.forward_ad as fwAD

    jf = thunder.jit(lambda x: x.sin() * 2 + x, executors=["triton"])
    jf(_rand(4))
    with fwAD.dual_level(), pytest.raises(ThunderRuntimeError, match="forward-mode AD .* through a Triton fusion"):
        jf(fwAD.make_dual(_rand(4), _rand(4)))
