"""Silent wrong results found in round 3, each checked against eager PyTorch: values, dtypes,
requires_grad, gradients, and the errors eager raises (from metadata alone, used or not)."""

from __future__ import annotations

import math

import pytest
import torch

import thunder

INF, NAN = float("inf"), float("nan")


def _same_values(actual, expected):
    """Equal as eager's: the same NaNs, the same signs of zero, the same dtype."""
    assert actual.dtype == expected.dtype
    assert torch.equal(actual.isnan(), expected.isnan()), (actual, expected)
    both = ~expected.isnan()
    assert torch.equal(actual[both], expected[both]), (actual, expected)
    assert torch.equal(actual[both].signbit(), expected[both].signbit()), (actual, expected)


def _grad(fn, x, *args):
    x = x.detach().clone().requires_grad_()
    fn(x, *args).sum().backward()
    return x.grad


# ---------------------------------------------------------------- 1. floor division of floats


_DIVIDENDS = [INF, -INF, NAN, 0.0, -0.0, 3.0, -3.0, 1.0, 7.5, -7.5, 0.3, -0.7, 1e-30, 1e30]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_floor_division_with_a_symbolic_number_is_eagers(dtype):
    # Under symbolic values ``x // n`` was floor(x / n): inf // 2 was inf (eager: nan), 1 // 0.1 was 10 (eager: 9).
    jfn = thunder.jit(lambda x, n: x // n, cache="symbolic values")
    x = torch.tensor(_DIVIDENDS, dtype=dtype)
    for n in (2.0, -2.0, 0.1, 0.3, INF, -INF, 0.0, 1e-30):
        _same_values(jfn(x, n), x // n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_floor_division_of_a_symbolic_number_by_a_tensor_is_eagers(dtype):
    jfn = thunder.jit(lambda x, n: n // x, cache="symbolic values")
    x = torch.tensor(_DIVIDENDS, dtype=dtype)
    for n in (2.0, -3.0, 0.3, INF, 0.0):
        _same_values(jfn(x, n), n // x)


def test_floor_division_decomposed_for_inductor_is_eagers():
    # With symbolic values the torchcompile executor takes the decomposition's prims.
    fn = lambda x, y: torch.div(x, y, rounding_mode="floor") * 1  # noqa: E731
    jfn = thunder.jit(fn, cache="symbolic values", executors=["torchcompile"])
    x = torch.tensor(_DIVIDENDS)
    for n in (2.0, -0.7, INF):
        _same_values(jfn(x, n), fn(x, n))


def test_integer_floor_division_with_a_symbolic_number_is_eagers():
    jfn = thunder.jit(lambda x, n: (x // n, n // x), cache="symbolic values")
    x = torch.tensor([2, -3, 4, 7, -7])
    for n in (7, -2, 3):
        for actual, expected in zip(jfn(x, n), (x // n, n // x)):
            assert torch.equal(actual, expected) and actual.dtype == expected.dtype
    u = torch.tensor([1, 2, 3, 7, 100], dtype=torch.uint8)
    assert torch.equal(jfn(u, 3)[0], u // 3)


# ---------------------------------------------------------------- 2. legacy tensor types


_LEGACY = [torch.FloatTensor, torch.DoubleTensor, torch.HalfTensor, torch.BFloat16Tensor, torch.LongTensor,
           torch.IntTensor, torch.ShortTensor, torch.CharTensor, torch.ByteTensor, torch.BoolTensor,
           torch.cuda.FloatTensor]  # fmt: skip


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.int64, torch.int32,
                                   torch.uint8, torch.bool])  # fmt: skip
def test_isinstance_of_a_legacy_tensor_type(dtype):
    def fn(x):
        return (*(isinstance(x, t) for t in _LEGACY), isinstance(x, (int, torch.FloatTensor)),
                isinstance(x, int | torch.LongTensor), isinstance(x, torch.Tensor))  # fmt: skip

    x = torch.zeros(2, dtype=dtype)
    assert thunder.jit(fn)(x) == fn(x)


# ---------------------------------------------------------------- 3. requires_grad of metadata-only uses


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b, c: a.type_as(b),
        lambda a, b, c: a.to(b),
        lambda a, b, c: a.expand_as(c),
        lambda a, b, c: a.view_as(c),
        lambda a, b, c: a.reshape_as(c),
        lambda a, b, c: torch.broadcast_tensors(a, c)[0],
        lambda a, b, c: a.type_as(b) * 2,
        lambda a, b, c: torch.fill(b, 1.0),
        lambda a, b, c: torch.fill(a, b[0]),
    ],
    ids=["type_as", "to_other", "expand_as", "view_as", "reshape_as", "broadcast_tensors", "type_as_used", "fill",
         "fill_value"],  # fmt: skip
)
def test_requires_grad_follows_eager(fn):
    a = torch.randn(3)
    b = torch.randn(3, dtype=torch.float64, requires_grad=True)
    c = torch.randn(1, 3, requires_grad=True)
    expected, actual = fn(a, b, c), thunder.jit(fn)(a, b, c)
    assert (actual.requires_grad, actual.dtype) == (expected.requires_grad, expected.dtype)


# ---------------------------------------------------------------- 4. setitem of another dtype


def _set(key):
    def fn(y, idx, t):
        y = y.clone()
        y[key(idx)] = t
        return y

    return fn


@pytest.mark.parametrize(
    "key, idx",
    [
        (lambda i: (..., i), torch.tensor([1])),
        (lambda i: i, torch.tensor([1])),
        (lambda i: [0, 1], None),
        (lambda i: i, torch.tensor(True)),
    ],
    ids=["ellipsis_tensor", "tensor", "list", "0d_bool"],
)
def test_setitem_through_index_put_rejects_another_dtype(key, idx):
    fn = _set(key)
    y, t = torch.zeros(2, 3, dtype=torch.float16), torch.tensor(1.0)
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
        fn(y, idx, t)
    with pytest.raises(RuntimeError, match="Index put requires the source and destination dtypes match"):
        thunder.jit(fn)(y, idx, t)


@pytest.mark.parametrize(
    "key, idx",
    [
        (lambda i: (..., i), torch.tensor(1)),  # a 0-d integer tensor selects
        (lambda i: i, torch.tensor([True, False])),  # one mask and one value: masked_fill_
        (lambda i: 1, None),
        (lambda i: (slice(None), 1), None),
    ],
    ids=["0d_int", "mask", "int", "slice"],
)
def test_setitem_that_eager_converts(key, idx):
    fn = _set(key)
    y, t = torch.zeros(2, 3, dtype=torch.float16), torch.tensor(1.0)
    expected, actual = fn(y, idx, t), thunder.jit(fn)(y, idx, t)
    assert actual.dtype == expected.dtype and torch.equal(actual, expected)


# ---------------------------------------------------------------- 5. std and var where the values are equal


@pytest.mark.parametrize(
    "x, kwargs",
    [
        (torch.ones(2, 3), dict(dim=-1)),
        (torch.ones(2, 3), dict(dim=-1, correction=0)),
        (torch.tensor([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]]), dict(dim=-1)),
        (torch.tensor(2.0), dict(correction=0)),
        (torch.tensor(2.0), dict(dim=0, correction=0)),
        (torch.tensor(2.0), dict()),  # one element, correction 1: NaN in eager too
    ],
)
@pytest.mark.parametrize("op", ["std", "var", "std_mean", "var_mean"])
def test_std_and_var_gradients_at_equal_values(x, kwargs, op):
    def fn(t):
        out = getattr(torch, op)(t, **kwargs)
        return out[0] + out[1] if isinstance(out, tuple) else out

    torch.testing.assert_close(_grad(thunder.jit(fn), x), _grad(fn, x), equal_nan=True)


@pytest.mark.parametrize(
    "fn",
    [lambda x: torch.linalg.vector_norm(x, dim=-1), lambda x: x.norm(dim=-1),
     lambda x: torch.nn.functional.normalize(x, dim=-1)],  # fmt: skip
    ids=["vector_norm", "norm", "normalize"],
)
def test_2_norm_gradient_at_zero(fn):
    x = torch.tensor([[0.0, 0.0, 0.0], [3.0, 0.0, 4.0]])
    torch.testing.assert_close(_grad(thunder.jit(fn), x), _grad(fn, x))


# ---------------------------------------------------------------- 6. cumprod at nan and inf


@pytest.mark.parametrize(
    "values, shape, dim",
    [
        ([2.0, INF, 3.0], (3, 1), 1),
        ([NAN, 1.0], (2, 1), 1),
        ([INF], (), 0),
        ([NAN], (1,), 0),
        ([0.0, 0.0], (2, 1), 1),
        ([2.0, INF, 3.0], (3,), 0),
        ([NAN, 1.0], (2,), 0),
        ([0.0, 0.0, 2.0], (3,), 0),
        ([2.0, 0.0, 3.0, 0.0], (4,), 0),
    ],
)
def test_cumprod_gradient_is_eagers(values, shape, dim):
    def fn(x):
        return torch.cumprod(x, dim) * torch.arange(1.0, 1.0 + x.numel()).reshape(x.shape)

    x = torch.tensor(values).reshape(shape)
    torch.testing.assert_close(_grad(thunder.jit(fn), x), _grad(fn, x), equal_nan=True)


# ---------------------------------------------------------------- 7. fill_ and zero_ reach their input


def _fill_(x):
    v = x * 1
    v.fill_(1.5)
    return v


def _zero_(x):
    v = x * 1
    v.zero_()
    return v


def _fill_clone(x):
    v = x.clone()
    v.fill_(2.0)
    return v


@pytest.mark.parametrize("fn", [_fill_, _zero_, _fill_clone, lambda x: torch.fill(x * 1, 1.5)])
def test_fill_gives_its_input_a_zero_gradient(fn):
    x = torch.randn(3)
    expected = _grad(fn, x)
    actual = _grad(thunder.jit(fn), x)
    assert expected is not None and actual is not None
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_fill_with_a_tensor_value_that_requires_grad(dtype):
    def fn(x, v):
        y = x * 2
        y.fill_(v)
        return y * torch.arange(3.0)

    def grads(f):
        x, v = torch.randn(3, requires_grad=True), torch.tensor(1.5, dtype=dtype, requires_grad=True)
        f(x, v).sum().backward()
        return x.grad, v.grad

    (xe, ve), (xa, va) = grads(fn), grads(thunder.jit(fn))
    torch.testing.assert_close(xa, xe)
    torch.testing.assert_close(va, ve)


# ---------------------------------------------------------------- 8. errors from metadata, result unused


def _take_from_empty(x, idx):
    x.take(idx)
    return x + 1


def _permute_without_dims(x):
    x.permute()
    return x + 1


def _add_a_huge_int(x):
    x + math.ceil(1e30)
    return x + 1


@pytest.mark.parametrize(
    "fn, args, exc, match",
    [
        (_take_from_empty, (torch.empty(0), torch.tensor([0])), IndexError, "take from an empty tensor"),
        (_permute_without_dims, (torch.tensor(1.0),), TypeError, 'missing 1 required positional arguments: "dims"'),
        (_permute_without_dims, (torch.randn(2, 3),), TypeError, 'missing 1 required positional arguments: "dims"'),
        (_add_a_huge_int, (torch.randn(3),), OverflowError, "too big to convert"),
    ],
    ids=["take_empty", "permute_0d", "permute_2d", "huge_int"],
)
def test_error_eager_raises_from_metadata_even_when_unused(fn, args, exc, match):
    with pytest.raises(exc, match=match):
        fn(*args)
    with pytest.raises(exc, match=match):
        thunder.jit(fn)(*args)


@pytest.mark.parametrize(
    "fn",
    [lambda x: x * 10**30, lambda x: 10**30 - x, lambda x: x > 2**64, lambda x: x + (-(2**63) - 1),
     lambda x: torch.full((2,), 10**30), lambda x: torch.full_like(x, 10**30), lambda x: x.masked_fill(x > 0, 10**30),
     lambda x: x.index_fill(0, torch.tensor([0]), 10**30), lambda x: torch.arange(10**30),
     lambda x: x.clamp(max=10**30)],  # fmt: skip
)
def test_python_int_too_big_for_a_scalar(fn):
    def unused(x):
        fn(x)
        return x + 1

    x = torch.randn(3)
    with pytest.raises(OverflowError):
        unused(x)
    with pytest.raises(OverflowError):
        thunder.jit(unused)(x)


def test_python_ints_a_scalar_holds():
    fn = lambda x: (x + 2**63, x + (2**64 - 1), x + (-(2**63)))  # noqa: E731
    x = torch.randn(3)
    for actual, expected in zip(thunder.jit(fn)(x), fn(x)):
        torch.testing.assert_close(actual, expected)


def test_setitem_of_an_int_beyond_int64():
    def fn(x):
        x[0] = 10**30
        return x

    with pytest.raises(ValueError, match="Overflow when unpacking long"):
        fn(torch.zeros(3))
    with pytest.raises(ValueError, match="Overflow when unpacking long"):
        thunder.jit(fn)(torch.zeros(3))


# ---------------------------------------------------------------- torch's keyword names


@pytest.mark.parametrize(
    "fn",
    [lambda x: torch.sub(x, other=x * 2), lambda x: torch.add(x, other=x, alpha=2), lambda x: x.sub(other=x, alpha=3),
     lambda x: torch.add(x1=x, x2=x), lambda x: torch.sub(other=x, input=x * 2),
     lambda x: torch.div(x, other=x + 3, rounding_mode="floor"), lambda x: torch.floor_divide(x, other=x + 3),
     lambda x: torch.pow(x, exponent=2), lambda x: torch.logical_and(x, other=x).float(),
     lambda x: torch.cat(tensors=[x, x], axis=0), lambda x: torch.mean(x, axis=1, keepdims=True),
     lambda x: torch.clamp(input=x, min=0.5), lambda x: torch.transpose(input=x, dim0=0, dim1=1),
     lambda x: torch.gather(x, dim=1, index=torch.zeros(2, 1, dtype=torch.long)),
     lambda x: torch.addcmul(x, tensor1=x, tensor2=x, value=2)],  # fmt: skip
)
def test_torch_keyword_names_bind_as_in_eager(fn):
    """``torch.sub(x, other=y)``, numpy's ``axis=``/``keepdims=``/``x1=``: the names torch accepts."""
    x = torch.randn(2, 3)
    torch.testing.assert_close(thunder.jit(fn)(x), fn(x))


def test_a_tensor_thunder_did_not_trace_is_named_as_such():
    with pytest.raises(thunder.core.errors.ThunderTypeError, match="a torch.Tensor reached it that thunder did not trace"):
        thunder.jit(lambda x: x + eval("torch.ones(2, 3)", {"torch": torch}))(torch.randn(2, 3))  # runs natively


# ---------------------------------------------------------------- in-place updates of what autograd saved


def _mul_then_update_input(x, w):
    y = x * w  # eager's mul saves w for x's gradient
    w.mul_(2)
    return y


def _mul_then_update_a_detached_alias(x, w):
    y = x * x
    x.detach().mul_(2)
    return y


def _foreach_then_update_a_detached_alias(x, w):
    y = torch._foreach_mul([x], [x])[0]
    x.detach().mul_(2)
    return y


def _foreach_add_then_update_a_detached_alias(x, w):
    y = torch._foreach_add([x, x * 2], 1.0)[0]  # eager's foreach saves x, which add would not
    x.detach().mul_(2)
    return y


def _sin_then_update_its_input(x, w):
    h = x * 1
    y = h.sin()  # saves h
    h.mul_(2)
    return y


def _exp_then_update_its_result(x, w):
    h = x.exp()  # saves its result
    h.detach().add_(1)
    return h * 1


def _add_then_update_input(x, w):
    y = x + w  # saves nothing: eager's backward works
    w.mul_(2)
    return y


def _add_then_update_a_detached_alias(x, w):
    h = x * 1
    y = h + 1
    h.detach().mul_(2)
    return y


@pytest.mark.parametrize(
    "fn",
    [_mul_then_update_input, _mul_then_update_a_detached_alias, _foreach_then_update_a_detached_alias,
     _foreach_add_then_update_a_detached_alias,
     _sin_then_update_its_input, _exp_then_update_its_result, _add_then_update_input,
     _add_then_update_a_detached_alias],  # fmt: skip
)
def test_an_in_place_update_of_what_autograd_saved(fn):
    """Eager's backward refuses when a tensor its autograd saved was updated in place; the compiled backward
    refuses too (it would read the new values) or, where eager saved nothing, gives eager's gradients."""

    def run(f):
        x = torch.linspace(-1, 1, 3, dtype=torch.float64).requires_grad_()
        w = torch.full((3,), 0.5, dtype=torch.float64)
        out = f(x * 1, w)
        try:
            out.sum().backward()
        except RuntimeError as e:
            return out.detach(), w, "modified by an inplace operation" in str(e)
        return out.detach(), w, x.grad

    jf = thunder.jit(fn)
    expected, actual = run(fn), run(jf)
    torch.testing.assert_close(actual[:2], expected[:2])
    if isinstance(expected[2], bool):
        assert actual[2] is True
    else:
        torch.testing.assert_close(actual[2], expected[2])
        assert thunder.compile_stats(jf).last_autograd_fallback is None  # what eager did not save: thunder's backward


# ---------------------------------------------------------------- clamp and p-norm gradients at edge values


def _values_and_grads(fn, *args):
    args = [a.detach().clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
    out = fn(*args)
    out.sum().backward()
    return out.detach(), [a.grad for a in args if isinstance(a, torch.Tensor)]


_EDGES = torch.tensor([NAN, -INF, -1.0, 0.0, 0.5, 1.0, 2.0, INF])


@pytest.mark.parametrize("low", [None, NAN, -1.0, 0.5, 2.0])
@pytest.mark.parametrize("high", [None, NAN, 0.5, 2.0])
@pytest.mark.parametrize("tensor_bounds", [False, True])
def test_clamp_gradient_is_eagers(low, high, tensor_bounds):
    """Eager's: none at a NaN input, none anywhere for equal or crossed bounds, a tensor bound's only where it won."""
    if low is None and high is None:
        pytest.skip("clamp needs a bound")
    if tensor_bounds:
        low = None if low is None else torch.full((8,), low)
        high = None if high is None else torch.full((1,), high, dtype=torch.float64)  # broadcast, another dtype
    fn = lambda x, lo, hi: torch.clamp(x, lo, hi)  # noqa: E731
    (out, grads), (expected_out, expected_grads) = _values_and_grads(thunder.jit(fn), _EDGES, low, high), _values_and_grads(fn, _EDGES, low, high)
    _same_values(out, expected_out)
    for actual, expected in zip(grads, expected_grads):
        _same_values(actual, expected)


@pytest.mark.parametrize("ord", [3, 2.5, 1.5, 0.5, -1, -0.5, INF, -INF])
@pytest.mark.parametrize(
    "x", [torch.zeros(3), torch.tensor([[0.0, 0.0], [1.0, -2.0]]), torch.tensor([0.0, 1.0, -3.0]), torch.tensor([NAN, 1.0])],
    ids=["zeros", "a_zero_row", "a_zero", "nan"],
)
def test_vector_norm_gradient_at_zero_and_nan_is_eagers(ord, x):
    fn = lambda x: torch.linalg.vector_norm(x, ord=ord, dim=-1)  # noqa: E731
    (out, grads), (expected_out, expected_grads) = _values_and_grads(thunder.jit(fn), x), _values_and_grads(fn, x)
    _same_values(out, expected_out)
    torch.testing.assert_close(grads[0], expected_grads[0], equal_nan=True)


# ---------------------------------------------------------------- buffers read natively


_BUFFERS = {
    "bytearray": lambda v: bytearray([v]),
    "array_i": lambda v: __import__("array").array("i", [v]),
    "array_d": lambda v: __import__("array").array("d", [v]),
    "numpy": lambda v: __import__("numpy").array([float(v)]),
    "memoryview": lambda v: memoryview(bytearray([v])),
}


@pytest.mark.parametrize("make", _BUFFERS.values(), ids=_BUFFERS.keys())
def test_a_buffer_argument_is_checked_by_its_contents(make):
    jf = thunder.jit(lambda x, b: x + b[0])
    x = torch.zeros(2)
    assert jf(x, make(1)).tolist() == [1.0, 1.0]
    assert jf(x, make(5)).tolist() == [5.0, 5.0]
    assert jf(x, make(5)).tolist() == [5.0, 5.0]
    assert thunder.cache_misses(jf) == 2


def test_a_buffer_read_from_a_global_is_checked_by_its_contents():
    buffer = bytearray([1])
    jf = thunder.jit(lambda x: x + buffer[0])
    assert jf(torch.zeros(2)).tolist() == [1.0, 1.0]
    buffer[0] = 9
    assert jf(torch.zeros(2)).tolist() == [9.0, 9.0]


def test_a_buffer_changed_by_the_program_is_refused():
    def fill(x, a):
        a.fill(3.0)
        return x + a[0]

    with pytest.raises(thunder.core.errors.ThunderRuntimeError, match="changed .* a ndarray from outside"):
        thunder.jit(fill)(torch.zeros(2), __import__("numpy").zeros(2))


def test_slice_indices_under_symbolic_values():
    """``sl.indices(n)`` reads the bounds natively: they are pinned, so another slice misses the cache."""
    jf = thunder.jit(lambda x, sl: (x + 1, sl.indices(5)), cache="symbolic values")
    x = torch.randn(2)
    assert jf(x, slice(1, None))[1] == (1, 5, 1)
    assert jf(x, slice(-2, None))[1] == (3, 5, 1)


def test_in_place_dropout_of_a_view_is_differentiated():
    """torchvision's EfficientNet classifier: ``nn.Dropout(inplace=True)`` on ``flatten(pool(x))``, a view. The
    update was an exposed random part whose write the backward did not see: gradients without the dropout."""

    def f(x, w):
        y = torch.flatten(torch.nn.functional.adaptive_avg_pool2d(x * w, 1), 1)
        y = torch.nn.functional.dropout(y, 0.5, training=True, inplace=True)
        return y * 2

    x = torch.randn(4, 3, 2, 2)
    grads = []
    for fn in (f, thunder.jit(f)):
        w = torch.randn(3, 1, 1, generator=torch.Generator().manual_seed(0)).requires_grad_()
        torch.manual_seed(0)
        fn(x, w).pow(2).sum().backward()
        grads.append(w.grad)
    torch.testing.assert_close(grads[1], grads[0])


@pytest.mark.parametrize("bound_requires_grad", [False, True])
def test_clamp_with_a_tensor_bound_by_keyword(bound_requires_grad):
    def f(x, w):
        return torch.clamp(x, min=w) * 2

    results = []
    for fn in (f, thunder.jit(f)):
        x = torch.linspace(-1, 1, 32).reshape(4, 2, 4).requires_grad_()
        w = torch.linspace(-0.5, 0.5, 4).requires_grad_(bound_requires_grad)
        fn(x, w).sum().backward()
        results.append((x.grad, w.grad))
    torch.testing.assert_close(results[1], results[0])
