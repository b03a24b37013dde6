"""Error messages for bad input: they name the op, the argument and the user's source line."""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.core import prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.proxies import TensorProxy
from thunder.core.trace import TraceCtx, tracectx

CPU = torch.device("cpu")


def _proxy(shape, dtype=torch.float32, device=CPU):
    return TensorProxy(shape=shape, dtype=dtype, device=device)


def test_prim_rejects_shape_mismatch():
    with tracectx(TraceCtx()):
        with pytest.raises(ThunderValueError, match=r"prims.add: .*a has shape \(2, 3\) and b has shape \(3,\)"):
            prims.add(_proxy((2, 3)), _proxy((3,)))


def test_prim_rejects_dtype_mismatch():
    with tracectx(TraceCtx()):
        with pytest.raises(ThunderTypeError, match=r"prims.mul: .*a is torch.float32 and b is torch.float64"):
            prims.mul(_proxy((2,)), _proxy((2,), torch.float64))


def test_prim_rejects_device_mismatch():
    with tracectx(TraceCtx()):
        with pytest.raises(ThunderValueError, match=r"prims.sub: .*a is on cpu and b is on meta.*\.to\(device\)"):
            prims.sub(_proxy((2,)), _proxy((2,), device=torch.device("meta")))


def test_prim_rejects_non_tensor():
    with tracectx(TraceCtx()):
        with pytest.raises(ThunderTypeError, match=r"prims.neg: expected a to be a tensor or a number, but got str"):
            prims.neg("x")


def test_device_mismatch_through_jit_names_the_source_line():
    def f(a, b):
        return a * b  # the line the error must show

    with pytest.raises(ValueError) as excinfo:
        thunder.jit(f)(torch.randn(2), torch.randn(2, device="meta"))
    message = str(excinfo.value)
    assert "same device" in message and "ltorch.mul" in message
    assert "return a * b  # the line the error must show" in message


def test_wrong_dtype_for_op_names_argument():
    def f(a, b):
        return a & b

    with pytest.raises(TypeError, match=r"bitwise_and.*a of dtype torch.float32"):
        thunder.jit(f)(torch.randn(2), torch.randn(2))


def test_failed_compile_leaves_no_half_written_state():
    def f(a, b):
        return a + b

    jf = thunder.jit(f)
    with pytest.raises(ValueError):
        jf(torch.randn(3), torch.randn(4))
    a, b = torch.randn(3), torch.randn(3)
    torch.testing.assert_close(jf(a, b), a + b)
    assert thunder.cache_misses(jf) == 2 and len(thunder.compile_stats(jf).entries) == 1


def test_an_op_given_a_tensor_made_natively_says_where_it_came_from():
    # ``x + torch.from_numpy(a)`` of an array the program made said only "expected b to be a tensor or a number,
    # got Tensor": the tensor is real, made by code thunder ran natively, and the trace has no values for it.
    # (``torch.from_numpy`` of such an array is a constant of the trace since: tests/test_models_outside.py.)
    import numpy

    def f(x):
        return x + torch.asarray(numpy.arange(2.0))

    with pytest.raises(ThunderTypeError, match="made inside the function by code thunder runs natively"):
        thunder.jit(f)(torch.ones(2, dtype=torch.float64))
