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
