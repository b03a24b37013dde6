"""Programs written as ML engineers write them, where the jitted call differed from eager: state kept on the user's
own functions (a call counter, a setting, a memo made on first use); a tensor's ``.data`` assigned (a PixelCNN masked
convolution's ``weight.data *= mask``, WGAN's weight clipping); a lazy module jitted before its first call; torch settings the program reads (the thread count, anomaly mode, the
float32 matmul precision, cuBLAS's TF32 flag) changed between calls; NumPy arrays as operands and indices; ``is_inference()`` of a tensor made in an inference-mode region; sparse constructors and ``torch.asarray`` of a
traced tensor. Each runs the program eagerly and jitted on
several calls and compares the values and what the program left behind."""

from __future__ import annotations

import copy
import operator
import warnings

import numpy as np
import pytest
import torch

import thunder
from thunder.core.errors import UnsupportedOpError


def _counted(x):
    _counted.calls = getattr(_counted, "calls", 0) + 1
    return x * _counted.calls


def _preset(x):
    _preset.calls += 1
    return x * _preset.calls


def _memo(x):
    if not hasattr(_memo, "table"):
        _memo.table = torch.arange(3.0)
    return x + _memo.table


def _scaled(x):
    return x * getattr(_scaled, "scale", 1)


def _results(f, calls: int = 3) -> list:
    return [f(torch.ones(3)) for _ in range(calls)]


def _reset():
    for f, names in ((_counted, ("calls",)), (_memo, ("table",)), (_scaled, ("scale",))):
        for n in names:
            f.__dict__.pop(n, None)
    _preset.calls = 0


def test_a_counter_kept_on_the_function_counts_every_call():
    for f in (_counted, _preset):
        _reset()
        expected, eager_calls = _results(f), f.calls
        _reset()
        got = _results(thunder.jit(f))
        assert f.calls == eager_calls == 3
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e)


def test_a_memo_made_on_the_function_on_first_use_is_made_once_and_read_after():
    _reset()
    expected = _results(_memo)
    _reset()
    jf = thunder.jit(_memo)
    got = _results(jf)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)
    _memo.table = torch.ones(3)  # replaced from outside: the next call reads the new table
    torch.testing.assert_close(jf(torch.ones(3)), _memo(torch.ones(3)))


def test_a_setting_put_on_the_function_after_a_call_is_seen_by_the_next():
    _reset()
    jf = thunder.jit(_scaled)
    torch.testing.assert_close(jf(torch.ones(3)), _scaled(torch.ones(3)))
    _scaled.scale = 5
    torch.testing.assert_close(jf(torch.ones(3)), _scaled(torch.ones(3)))
    _scaled.scale = 2
    torch.testing.assert_close(jf(torch.ones(3)), _scaled(torch.ones(3)))
    _reset()


# -- assigning a tensor's .data ---------------------------------------------------------------------------------------


class _MaskedConv(torch.nn.Conv2d):
    """PixelCNN's masked convolution as tutorials write it: the mask applied to the weight's data in ``forward``."""

    def __init__(self):
        super().__init__(2, 3, 3, padding=1)
        self.register_buffer("mask", torch.ones_like(self.weight))
        self.mask[:, :, 1, 1:] = 0
        self.mask[:, :, 2:] = 0

    def forward(self, x):
        self.weight.data *= self.mask
        return super().forward(x)


def _clip_and_apply(m, x):
    for p in m.parameters():  # WGAN's weight clipping
        p.data = p.data.clamp(-0.05, 0.05)
    return m(x)


def _trains_as_eager(eager: torch.nn.Module, step, make_input) -> None:
    """``step(model, x)`` on a copy of ``eager``, jitted, three times: values, the input's and the parameters'
    gradients and the parameters after each call are eager's, and it traces once."""
    model = copy.deepcopy(eager)
    jitted = thunder.jit(step)
    for _ in range(3):
        x = make_input().requires_grad_()
        x2 = x.detach().clone().requires_grad_()
        expected, got = step(eager, x), jitted(model, x2)
        torch.testing.assert_close(got, expected)
        expected.square().sum().backward()
        got.square().sum().backward()
        torch.testing.assert_close(x2.grad, x.grad)
        for p, q in zip(eager.parameters(), model.parameters()):
            torch.testing.assert_close(q, p)
            torch.testing.assert_close(q.grad, p.grad)
    assert thunder.cache_misses(jitted) == 1


def test_a_masked_convolution_assigning_its_weights_data_trains_as_eager():
    torch.manual_seed(0)
    _trains_as_eager(_MaskedConv(), lambda m, x: m(x), lambda: torch.randn(2, 2, 5, 5))


def test_weight_clipping_by_assigning_data_trains_as_eager():
    torch.manual_seed(0)
    _trains_as_eager(torch.nn.Linear(4, 3), _clip_and_apply, lambda: torch.randn(2, 4))


def test_assigning_data_of_a_computed_tensor_keeps_its_gradient_as_eager():
    def f(x):
        y = x * 2
        z = y * y
        y.data = x.data + 1  # later reads see the new values; the gradient is still y's
        return y * 3 + z

    x = torch.randn(3, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    expected, got = f(x), thunder.jit(f)(x2)
    torch.testing.assert_close(got, expected)
    expected.sum().backward()
    got.sum().backward()
    torch.testing.assert_close(x2.grad, x.grad)


def test_assigning_data_of_another_shape_is_a_clear_error():
    def f(x):
        x.data = torch.zeros(2)
        return x

    with pytest.raises(UnsupportedOpError, match=r"x\.data a tensor of another shape"):
        thunder.jit(f)(torch.ones(3))
    with pytest.raises(TypeError, match="Variable data has to be a tensor, but got int"):
        thunder.jit(lambda x: setattr(x, "data", 5))(torch.ones(3))


# -- a lazy module jitted before its first call -----------------------------------------------------------------------


def test_a_lazy_module_jitted_before_its_first_call_materialises_as_eager_then_traces():
    make = lambda: torch.nn.Sequential(torch.nn.LazyConv2d(4, 3), torch.nn.LazyBatchNorm2d(), torch.nn.Flatten(), torch.nn.LazyLinear(2))  # noqa: E731
    eager, model = make(), make()
    jitted = thunder.jit(model)
    for i in range(3):
        x = torch.randn(2, 3, 5, 5)
        torch.manual_seed(i)  # the first call draws the new weights
        expected = eager(x)
        torch.manual_seed(i)
        got = jitted(x)
        torch.testing.assert_close(got, expected)
        expected.sum().backward()
        got.sum().backward()
    for p, q in zip(eager.parameters(), model.parameters()):
        assert type(q) is type(p) is torch.nn.Parameter
        torch.testing.assert_close(q.grad, p.grad)
    torch.testing.assert_close(model[1].running_mean, eager[1].running_mean)
    assert thunder.cache_misses(jitted) == 2  # the first call ran eagerly, the second traced, the third hit


# -- torch settings the program reads, changed between calls ----------------------------------------------------------


def _restoring(get, set_):
    before = get()
    return lambda: set_(before)


_SETTINGS = {
    # name: (program reading it, a value setter taking the call's index, getter, setter)
    "num_threads": (
        lambda x: x * torch.get_num_threads(), lambda i: torch.set_num_threads(1 + i % 2),
        torch.get_num_threads, torch.set_num_threads,
    ),
    "anomaly": (
        lambda x: x * 2 if torch.is_anomaly_enabled() else x, lambda i: torch.autograd.set_detect_anomaly(i == 1),
        torch.is_anomaly_enabled, torch.autograd.set_detect_anomaly,
    ),
    "matmul_precision": (
        lambda x: x * 2 if torch.get_float32_matmul_precision() == "high" else x,
        lambda i: torch.set_float32_matmul_precision("high" if i == 1 else "highest"),
        torch.get_float32_matmul_precision, torch.set_float32_matmul_precision,
    ),
    "cublas_tf32": (
        lambda x: x * 2 if torch.backends.cuda.matmul.allow_tf32 else x,
        lambda i: setattr(torch.backends.cuda.matmul, "allow_tf32", i == 1),
        lambda: torch.backends.cuda.matmul.allow_tf32, lambda v: setattr(torch.backends.cuda.matmul, "allow_tf32", v),
    ),
}


@pytest.mark.parametrize("setting", sorted(_SETTINGS))
def test_a_torch_setting_changed_between_calls_is_read_again(setting):
    program, set_for_call, get, set_ = _SETTINGS[setting]
    restore = _restoring(get, set_)
    try:
        jitted = thunder.jit(program)
        for i in range(3):
            set_for_call(i)
            torch.testing.assert_close(jitted(torch.ones(2)), program(torch.ones(2)))
    finally:
        restore()


# -- NumPy arrays as operands and indices -----------------------------------------------------------------------------


_ARRAYS = [np.array([1.0, 2.0, 3.0]), np.array([1, 2, 3]), np.array(2.5), np.array([[1.0], [2.0]], dtype=np.float32)]


@pytest.mark.parametrize("op", ["mul", "add", "sub", "truediv", "pow", "eq"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_a_numpy_array_operand_gives_eagers_tensor_and_dtype(op, dtype):
    def f(x, a):
        return getattr(operator, op)(x, a)  # x * a: numpy's ufunc, its result handed back as a tensor

    jitted = thunder.jit(f)
    for i, a in enumerate(_ARRAYS):
        x = torch.arange(1, 4, dtype=dtype) + i
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # numpy's, about torch's __array_wrap__
            expected = f(x, a)
        got = jitted(x, a)
        assert type(got) is type(expected) is torch.Tensor
        assert got.dtype == expected.dtype
        torch.testing.assert_close(got, expected)


def test_augmented_assignment_with_a_numpy_array_rebinds_as_eager():
    def f(x, a):
        y = x.clone()
        z = y
        y += a  # torch's __iadd__ gives way: y = y + a, a new float64 tensor; z keeps the old one
        y *= 2
        return y, z

    x, a = torch.arange(3.0), np.array([1.0, 2.0, 3.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        expected = f(x, a)
    got = thunder.jit(f)(x, a)
    for e, g in zip(expected, got):
        assert g.dtype == e.dtype
        torch.testing.assert_close(g, e)


def test_a_numpy_array_operand_of_a_tensor_that_requires_grad_raises_eagers_error():
    x = torch.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match="Can't call numpy"):
        x * np.ones(3)
    with pytest.raises(RuntimeError, match="Can't call numpy"):
        thunder.jit(lambda x, a: x * a)(x, np.ones(3))


@pytest.mark.parametrize(
    "index", [lambda a: a, lambda a: (a, slice(1, None)), lambda a: (slice(None), a), lambda a: a.reshape(1, -1)]
)
def test_a_numpy_array_index_is_eagers(index):
    def f(x, a):
        return x[index(a)]

    jitted = thunder.jit(f)
    x = torch.arange(20.0).view(4, 5)
    for i in range(2):
        a = np.array([0, 2 + i])
        torch.testing.assert_close(jitted(x, a), f(x, a))


# -- a tensor made in an inference-mode region of the program ---------------------------------------------------------


def test_is_inference_of_a_tensor_made_in_an_inference_mode_region_asked_after_it_is_refused():
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return y.is_inference()  # eager: True (the trace's result is an ordinary tensor)

    assert f(torch.ones(2)) is True
    with pytest.raises(UnsupportedOpError, match="computed in inference mode"):
        thunder.jit(f)(torch.ones(2))

    def g(x):
        with torch.inference_mode():
            y = x * 2
        return (x * 3).is_inference(), y  # made outside the region: eager's False

    assert thunder.jit(g)(torch.ones(2))[0] is g(torch.ones(2))[0] is False


# -- constructors whose argument parser reads a traced tensor as a sequence -------------------------------------------


@pytest.mark.parametrize(
    "program",
    [
        lambda i, v: torch.sparse_coo_tensor(i, v, (3, 3)).to_dense(),
        lambda i, v: torch.sparse_csr_tensor(torch.tensor([0, 1, 2, 3]), i[1], v, (3, 3)).to_dense(),
        lambda i, v: torch.asarray(v) * 2,
    ],
    ids=["sparse_coo_tensor", "sparse_csr_tensor", "asarray"],
)
def test_a_sparse_constructor_or_asarray_of_a_traced_tensor_is_a_clear_error(program):
    with pytest.raises(UnsupportedOpError, match=r"torch\.(sparse_\w+|asarray) inside the jitted function"):
        thunder.jit(program)(torch.tensor([[0, 1, 1], [2, 0, 2]]), torch.randn(3))
