"""Custom operators (``torch.library``) called inside ``thunder.jit``, against eager (Note [Custom ops]
in ``thunder.torch.custom_ops``)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

import thunder
import thunder.examine
from thunder.core.errors import UnsupportedOpError
from thunder.torch.custom_ops import custom_ops


@torch.library.custom_op("thunder_test::scaled_sin", mutates_args=())
def scaled_sin(x: torch.Tensor, scale: float = 1.0, *, shift: int = 0) -> torch.Tensor:
    return x.sin() * scale + shift


@scaled_sin.register_fake
def _(x, scale=1.0, *, shift=0):
    return torch.empty_like(x)


def _scaled_sin_setup(ctx, inputs, keyword_only_inputs, output):
    ctx.save_for_backward(inputs[0])
    ctx.scale = inputs[1]


def _scaled_sin_backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * x.cos() * ctx.scale, None


scaled_sin.register_autograd(_scaled_sin_backward, setup_context=_scaled_sin_setup)


# A forward whose backward is a custom op of its own (as transformers' grouped_mm_fallback).
@torch.library.custom_op("thunder_test::rowwise_mul", mutates_args=())
def rowwise_mul(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w[:, None]


@rowwise_mul.register_fake
def _(x, w):
    return torch.empty_like(x)


@torch.library.custom_op("thunder_test::rowwise_mul_backward", mutates_args=())
def rowwise_mul_backward(x: torch.Tensor, w: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return g * w[:, None], (g * x).sum(1)


@rowwise_mul_backward.register_fake
def _(x, w, g):
    return torch.empty_like(x), torch.empty_like(w)


def _rowwise_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _rowwise_backward(ctx, g):
    x, w = ctx.saved_tensors
    return torch.ops.thunder_test.rowwise_mul_backward(x, w, g)


rowwise_mul.register_autograd(_rowwise_backward, setup_context=_rowwise_setup)


@torch.library.custom_op("thunder_test::split_at", mutates_args=())
def split_at(x: torch.Tensor, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    return x[:n].clone(), x[n:].clone()


@split_at.register_fake
def _(x, n):
    return x.new_empty(n, *x.shape[1:]), x.new_empty(x.shape[0] - n, *x.shape[1:])


split_at.register_autograd(lambda ctx, ga, gb: (torch.cat([ga, gb]), None))


@torch.library.custom_op("thunder_test::no_formula", mutates_args=())
def no_formula(x: torch.Tensor) -> torch.Tensor:
    return x.exp()


@no_formula.register_fake
def _(x):
    return torch.empty_like(x)


@torch.library.custom_op("thunder_test::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x + 1


@torch.library.custom_op("thunder_test::add_into", mutates_args=("out",))
def add_into(x: torch.Tensor, out: torch.Tensor) -> None:
    out.add_(x)


@add_into.register_fake
def _(x, out):
    return None


@torch.library.custom_op("thunder_test::scale_and_norm", mutates_args=("x", "acc"))
def scale_and_norm(x: torch.Tensor, s: float, acc: torch.Tensor | None = None) -> torch.Tensor:
    x.mul_(s)
    if acc is not None:
        acc.add_(x)
    return x.norm().reshape(1)


@scale_and_norm.register_fake
def _(x, s, acc=None):
    return x.new_empty(1)


@torch.library.custom_op("thunder_test::zero_all", mutates_args=("xs",))
def zero_all(xs: list[torch.Tensor]) -> None:
    for x in xs:
        x.zero_()


@zero_all.register_fake
def _(xs):
    return None


@torch.library.custom_op("thunder_test::repeat_rows", mutates_args=())
def repeat_rows(x: torch.Tensor, n: int) -> torch.Tensor:
    return x.repeat(n, 1)


@repeat_rows.register_fake
def _(x, n):
    return x.new_empty(x.shape[0] * n, x.shape[1])


@torch.library.custom_op("thunder_test::weighted_sum", mutates_args=())
def weighted_sum(xs: list[torch.Tensor], w: torch.Tensor) -> torch.Tensor:
    return sum(x * wi for x, wi in zip(xs, w))


@weighted_sum.register_fake
def _(xs, w):
    return torch.empty_like(xs[0])


def _weighted_sum_setup(ctx, inputs, output):
    ctx.save_for_backward(*inputs[0], inputs[1])


def _weighted_sum_backward(ctx, g):
    *xs, w = ctx.saved_tensors
    return [g * wi for wi in w], torch.stack([(g * x).sum() for x in xs])


weighted_sum.register_autograd(_weighted_sum_backward, setup_context=_weighted_sum_setup)


@torch.library.custom_op("thunder_test::looked_up_by_threads", mutates_args=())
def looked_up_by_threads(x: torch.Tensor) -> torch.Tensor:
    return x.abs()


@looked_up_by_threads.register_fake
def _(x):
    return torch.empty_like(x)


# An op made with torch.library.define + impl, with two overloads.
_lib = torch.library.Library("thunder_test", "FRAGMENT")
_lib.define("affine(Tensor x) -> Tensor")
_lib.define("affine.scaled(Tensor x, float a, float b=0.0) -> Tensor")
torch.library.impl("thunder_test::affine", "CompositeExplicitAutograd", lib=_lib)(lambda x: x + 1)
torch.library.impl("thunder_test::affine.scaled", "CompositeExplicitAutograd", lib=_lib)(lambda x, a, b=0.0: x * a + b)
torch.library.register_fake("thunder_test::affine", lambda x: torch.empty_like(x), lib=_lib)
torch.library.register_fake("thunder_test::affine.scaled", lambda x, a, b=0.0: torch.empty_like(x), lib=_lib)
_lib.define("same(Tensor(a) x) -> Tensor(a)")
torch.library.impl("thunder_test::same", "CompositeExplicitAutograd", lib=_lib)(lambda x: x)
torch.library.register_fake("thunder_test::same", lambda x: x, lib=_lib)
_lib.define("cube(Tensor x) -> Tensor")
torch.library.impl("thunder_test::cube", "CompositeExplicitAutograd", lib=_lib)(lambda x: x * x * x)
torch.library.register_fake("thunder_test::cube", lambda x: torch.empty_like(x), lib=_lib)
torch.library.register_autograd(
    "thunder_test::cube",
    lambda ctx, g: g * 3 * ctx.saved_tensors[0] ** 2,
    setup_context=lambda ctx, inputs, output: ctx.save_for_backward(inputs[0]),
    lib=_lib,
)


def _grads(fn, *inputs):
    out = fn(*inputs)
    return out, torch.autograd.grad(out.sum(), [i for i in inputs if i.requires_grad])


def test_forward_matches_eager_and_runs_the_op_whole():
    def f(x):
        return torch.ops.thunder_test.scaled_sin(x, 2.0, shift=1) * 3

    x = torch.randn(4, 3)
    jf = thunder.jit(f, executors=["torch"])
    torch.testing.assert_close(jf(x), f(x))
    names = [b.sym.name for b in thunder.last_traces(jf)[-1].bound_symbols]
    assert any("thunder_test_scaled_sin" in n for n in names), names


def test_arguments_by_keyword_and_defaults_match_eager():
    def f(x):
        return scaled_sin(x) + scaled_sin(x, scale=0.5) + torch.ops.thunder_test.scaled_sin.default(x, 3.0, shift=2)

    x = torch.randn(5)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


def test_registered_formula_is_thunders_backward():
    def f(x):
        return scaled_sin(x, 1.5, shift=1).tanh()

    x = torch.randn(4, 3, requires_grad=True)
    jf = thunder.jit(f)
    (out, (gx,)), (ref, (rx,)) = _grads(jf, x), _grads(f, x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(gx, rx)
    assert thunder.compile_stats(jf).last_autograd_fallback is None
    backward = str(thunder.last_backward_traces(jf)[-1])
    assert "cos" in backward  # the formula's own ops


def test_backward_that_calls_another_custom_op():
    def f(x, w):
        return torch.ops.thunder_test.rowwise_mul(x, w).relu()

    x, w = torch.randn(4, 3, requires_grad=True), torch.randn(4, requires_grad=True)
    jf = thunder.jit(f)
    (out, grads), (ref, expected) = _grads(jf, x, w), _grads(f, x, w)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(grads, expected)
    assert thunder.compile_stats(jf).last_autograd_fallback is None
    assert "thunder_test_rowwise_mul_backward" in str(thunder.last_backward_traces(jf)[-1])


def test_several_outputs_with_their_gradients():
    def f(x):
        a, b = split_at(x * 2, 2)
        return a.sum() + b.exp().sum() + b[0, 0]

    x = torch.randn(5, 3, requires_grad=True)
    jf = thunder.jit(f)
    out, ref = jf(x), f(x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(torch.autograd.grad(out, x), torch.autograd.grad(ref, x))
    assert thunder.compile_stats(jf).last_autograd_fallback is None


def test_op_without_formula_fails_at_backward_as_in_eager():
    x = torch.randn(3, requires_grad=True)
    out, ref = thunder.jit(no_formula)(x), no_formula(x)
    torch.testing.assert_close(out, ref)
    with pytest.raises(RuntimeError, match="no autograd formula was registered") as eager:
        ref.sum().backward()
    with pytest.raises(RuntimeError) as jitted:
        out.sum().backward()
    assert str(jitted.value) == str(eager.value)


def test_op_without_formula_needs_none_without_grad():
    x = torch.randn(3, requires_grad=True)
    with torch.no_grad():
        torch.testing.assert_close(thunder.jit(no_formula)(x), no_formula(x))
    torch.testing.assert_close(thunder.jit(no_formula)(x.detach()), no_formula(x.detach()))


def test_defined_op_with_overloads_resolved_like_the_dispatcher():
    def f(x):
        return torch.ops.thunder_test.affine(x) + torch.ops.thunder_test.affine(x, 2.0, b=0.5)

    x = torch.randn(3)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


def test_defined_op_with_registered_autograd_matches_eager_gradient():
    def f(x):
        return torch.ops.thunder_test.cube(x) * 2

    x = torch.randn(4, requires_grad=True)
    (out, grads), (ref, expected) = _grads(thunder.jit(f), x), _grads(f, x)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(grads, expected)


def test_tensor_list_argument_gets_eagers_gradients():
    def f(a, b, w):
        return weighted_sum([a, b.tanh()], w).exp()

    inputs = (torch.randn(3, requires_grad=True), torch.randn(3, requires_grad=True), torch.randn(2, requires_grad=True))
    (out, grads), (ref, expected) = _grads(thunder.jit(f), *inputs), _grads(f, *inputs)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(grads, expected)


def test_op_that_returns_a_view_is_refused():
    with pytest.raises(UnsupportedOpError, match=r"thunder_test\.same.*returns a view of its argument"):
        thunder.jit(lambda x: torch.ops.thunder_test.same(x) + 1)(torch.randn(3))


def test_op_without_fake_kernel_is_refused_with_the_fix():
    with pytest.raises(UnsupportedOpError, match=r"thunder_test\.no_fake.*register_fake\('thunder_test::no_fake'\)"):
        thunder.jit(lambda x: no_fake(x) * 2)(torch.randn(3))


def test_op_that_writes_its_arguments_matches_eager():
    def f(x, out, acc):
        add_into(x, out)
        y = out * 2
        n = scale_and_norm(out, 3.0, acc=acc)
        m = scale_and_norm(x[1:], 2.0)  # through a view: x changes too
        return y, n, m, out + 1

    inputs = (torch.randn(4), torch.randn(4), torch.zeros(4))
    jf = thunder.jit(f)
    for _ in range(2):
        eager_inputs, jit_inputs = [t.clone() for t in inputs], [t.clone() for t in inputs]
        torch.testing.assert_close(jf(*jit_inputs), f(*eager_inputs))
        torch.testing.assert_close(jit_inputs, eager_inputs)
    assert thunder.cache_hits(jf) == 1


def test_op_that_writes_a_list_of_tensors_matches_eager():
    def f(a, b):
        c = a * 2
        zero_all([a, c])
        return a + b + c

    jf = thunder.jit(f)
    for _ in range(2):
        a, b = torch.randn(3), torch.randn(3)
        eager_a = a.clone()
        torch.testing.assert_close(jf(a, b), f(eager_a, b))
        torch.testing.assert_close(a, eager_a)
    zero_all([])  # an empty list: nothing to write back
    torch.testing.assert_close(thunder.jit(lambda x: (zero_all([]), x + 1)[1])(b), b + 1)


def test_second_call_hits_the_cache_and_the_symbol_is_made_once():
    def f(x):
        return scaled_sin(x, 2.0) + 1

    jf = thunder.jit(f)
    x = torch.randn(3)
    jf(x)
    torch.testing.assert_close(jf(x), f(x))
    assert (thunder.cache_misses(jf), thunder.cache_hits(jf)) == (1, 1)
    assert custom_ops[scaled_sin] is custom_ops[torch.ops.thunder_test.scaled_sin.default]


def test_threads_tracing_at_once_share_one_recording():
    op = torch.ops.thunder_test.looked_up_by_threads.default
    barrier = threading.Barrier(4)

    def work():
        barrier.wait()
        found = custom_ops[op]
        x = torch.randn(3)
        torch.testing.assert_close(thunder.jit(lambda t: looked_up_by_threads(t) * 2)(x), x.abs() * 2)
        return found

    with ThreadPoolExecutor(4) as pool:
        found = list(pool.map(lambda _: work(), range(4)))
    assert all(f is found[0] for f in found)


def test_symbolic_values_follow_the_fake_kernels_shapes():
    jf = thunder.jit(repeat_rows, cache="symbolic values")
    for rows, n in ((2, 3), (2, 3), (4, 2)):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(jf(x, n), repeat_rows(x, n))
    assert thunder.cache_misses(jf) == 2  # the fake kernel saw plain numbers: each new one is a new entry


def test_examine_counts_custom_ops_as_supported():
    def f(x):
        return torch.ops.thunder_test.affine(x) + scaled_sin(x)

    found = thunder.examine.examine(f, torch.randn(3), show=False)
    assert found["unsupported"] == {}
    assert found["jit_error"] is None
    no_fake_found = thunder.examine.examine(no_fake, torch.randn(3), show=False)
    assert list(no_fake_found["unsupported"]) == ["thunder_test.no_fake.default"]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_transformers_grouped_mm_fallback_is_recorded_as_the_aten_op_eager_runs(dtype):
    """transformers calls its ``grouped_mm_fallback`` loop where it sees a compiler and ``torch._grouped_mm``
    in eager: in the dtypes ``_grouped_mm`` has, thunder records that op, with eager's values and gradients
    (Note [Custom ops that stand for eager ops]); in others, the custom op itself."""
    pytest.importorskip("transformers")
    # Importing it registers the op; its dispatcher is what eager runs (torch._grouped_mm).
    from transformers.integrations.moe import _grouped_mm as eagers_dispatch

    torch.manual_seed(0)
    x = torch.randn(6, 4, dtype=dtype, requires_grad=True)
    w = torch.randn(3, 4, 8, dtype=dtype, requires_grad=True)
    offs = torch.tensor([2, 2, 6], dtype=torch.int32)

    def f(x, w, offs):
        return torch.ops.transformers.grouped_mm_fallback(x, w, offs)

    jf = thunder.jit(f)
    out = jf(x, w, offs)
    expected = eagers_dispatch(x, w, offs) if dtype is torch.float32 else f(x, w, offs)
    assert torch.equal(out, expected)
    grads = torch.autograd.grad(out.square().sum(), (x, w))
    for got, want in zip(grads, torch.autograd.grad(expected.square().sum(), (x, w))):
        torch.testing.assert_close(got, want)
    names = {b.sym.name for b in thunder.last_traces(jf)[-1].bound_symbols}
    assert ("_grouped_mm" in names) is (dtype is torch.float32)


@torch.library.custom_op("thunder_test::kept_and_count", mutates_args=())
def kept_and_count(x: torch.Tensor, threshold: float) -> tuple[torch.Tensor, torch.Tensor]:
    """What torchvision's ``nms`` is to a detector: how many rows it keeps comes from the data."""
    keep = (x.sum(1) > threshold).nonzero().squeeze(1)
    return keep, x[keep] * 2


@kept_and_count.register_fake
def _(x, threshold):
    n = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty((n,), dtype=torch.int64), x.new_empty((n, x.shape[1]))


def test_a_custom_op_whose_result_sizes_come_from_the_data():
    """Note [Custom ops whose sizes come from the data]: recorded (it ran eagerly, with a warning, on every call,
    tracing it each time), values as eager's, and a count that changes turns symbolic: no compile per count."""

    def f(x):
        keep, rows = kept_and_count(x, 0.0)
        return rows.sin() + keep.unsqueeze(1), keep.shape[0]

    jf = thunder.jit(f)
    counts = set()
    for seed in range(6):
        torch.manual_seed(seed)
        x = torch.randn(40, 3)  # counts far from 0 and 1, which are specialised as sizes are
        expected, got = f(x), jf(x)
        torch.testing.assert_close(got, expected)
        counts.add(expected[1])
    assert len(counts) > 3
    assert thunder.cache_misses(jf) <= 2
