"""Shape and indexing behaviour beyond the op database (whose generic templates in
``tests/test_ops.py`` also run every decomposition): ``__setitem__`` forms, views and mutation
of inputs, and how index keys with tensors print in traces."""

from __future__ import annotations

import pytest
import torch

import thunder

# ------------------------------------------------------------------------------------------
# __setitem__ and views
# ------------------------------------------------------------------------------------------


def test_setitem_mutates_function_input():
    def f(a, v):
        a[1:, 0] = v
        a[:, -1] += 1

    a = torch.zeros(3, 4)
    b = a.clone()
    v = torch.arange(2.0)
    thunder.jit(f)(a, v)
    f(b, v)
    torch.testing.assert_close(a, b)


def test_setitem_through_a_view_mutates_the_base():
    def f(a):
        b = a.view(2, 6)
        b[0, ::2] = -1.0
        return a * 2

    a, b = torch.ones(12), torch.ones(12)
    out = thunder.jit(f)(a)
    torch.testing.assert_close(out, f(b))
    torch.testing.assert_close(a, b)


def test_setitem_is_in_place_in_trace():
    from thunder.core.symbol import DONT_DCE, IN_PLACE

    def f(a, i):
        a[i] = 0.0
        return a

    jfn = thunder.jit(f)
    jfn(torch.ones(4, 2), torch.tensor([0, 3]))
    trace = thunder.last_traces(jfn)[0]
    (bsym,) = [b for b in trace.bound_symbols if b.sym.name == "setitem"]
    assert {IN_PLACE, DONT_DCE} <= bsym.sym.tags
    assert any(s.sym.name == "copy_" for s in bsym.subsymbols)


def test_key_with_tensors_prints_and_runs():
    def f(a, i, j):
        return a[i, 1:, None, j]

    jfn = thunder.jit(f)
    a, i, j = torch.randn(3, 4, 5), torch.tensor([0, 2]), torch.tensor([[1], [-1]])
    torch.testing.assert_close(jfn(a, i, j), f(a, i, j))
    src = str(thunder.last_traces(jfn)[-1])
    assert "(i, slice(1, None, None), None, j)" in src


def test_bool_mask_getitem_matches_eager():
    jfn = thunder.jit(lambda a: a[a > 0])
    for a in (torch.randn(3), torch.randn(3), -torch.ones(3)):
        torch.testing.assert_close(jfn(a), a[a > 0])


def test_bool_mask_setitem_matches_eager():
    def f(a):
        a[a < 0] = 0.0
        return a

    a = torch.randn(4, 5)
    expected = f(a.clone())
    torch.testing.assert_close(thunder.jit(f)(a), expected)


def test_iterating_a_tensor_unbinds_it():
    def f(a):
        x, y = a
        return x - y

    a = torch.randn(2, 3)
    torch.testing.assert_close(thunder.jit(f)(a), a[0] - a[1])


def test_T_and_mT_properties():
    def f(a, b):
        return a.T, b.mT

    a, b = torch.randn(2, 3), torch.randn(4, 2, 3)
    for x, y in zip(thunder.jit(f)(a, b), f(a, b)):
        torch.testing.assert_close(x, y)


def test_chained_inplace_on_getitem_view():
    def f(a):
        a[0].mul_(3)
        return a

    a = torch.randn(2, 3)
    expected = f(a.clone())
    torch.testing.assert_close(thunder.jit(f)(a), expected)


def test_a_list_of_ints_is_wrapped_and_bounds_checked_while_tracing():
    """``x[:, [-1, 0]]`` (Falcon's fused query/key/value split): the negative index is wrapped once,
    while tracing, not by three ops on every call (and again in the backward); out of bounds is
    eager's IndexError."""
    x = torch.randn(3, 4, requires_grad=True)
    f = lambda x: x[:, [-1, 0]] * 2  # noqa: E731
    jf = thunder.jit(f)
    assert torch.equal(jf(x), f(x))
    names = [b.sym.name for b in thunder.last_traces(jf)[0].bound_symbols]
    assert "where" not in names and "lt" not in names
    jf(x).sum().backward()
    assert torch.equal(x.grad, torch.tensor([[2.0, 0, 0, 2.0]] * 3))
    with pytest.raises(IndexError, match="index -5 is out of bounds for dimension 1 with size 4"):
        thunder.jit(lambda x: x[:, [-5]])(x)


def test_setitem_called_as_a_method_returns_none_as_eager():
    def f(x):
        r = x.__setitem__(0, 5.0)
        return r is None, x

    x = torch.zeros(2)
    assert thunder.jit(f)(x.clone())[0] is True
    torch.testing.assert_close(thunder.jit(f)(x.clone())[1], f(x.clone())[1])


_I, _J = torch.tensor(1), torch.tensor(2)


def _nested_list_shape(x):
    y = x[[[0, 1], [1, 0]]]
    return y, y.shape, y.ndim


def _list_of_index_tensors(x):
    return (x * 2)[[_I, _J]] + 1


def _list_with_a_slice_set(x):
    y = x * 1
    y[[slice(None), 0]] += 5
    y[[[0, 1], [1, 0]]] = -1.0
    return y


@pytest.mark.filterwarnings("ignore:Using a non-tuple sequence")
@pytest.mark.parametrize("fn", [_nested_list_shape, _list_of_index_tensors, _list_with_a_slice_set])
@pytest.mark.parametrize("executors", [None, ["torch"]])
def test_a_list_key_with_tensors_slices_or_lists_indexes_several_dims_as_eager(fn, executors):
    """torch reads ``x[[i, j]]`` as ``x[i, j]`` when the list holds a tensor, a list, a slice, ``...`` or None
    (deprecated, still eager's behaviour): the trace gave ``x[[[0, 1], [1, 0]]]`` the shape (2, 2, 3) where
    eager's is (2,) (``.shape`` and ``.ndim`` were wrong), and refused the other forms."""
    x = torch.arange(12.0).reshape(4, 3)
    expected = fn(x)
    jf = thunder.jit(fn) if executors is None else thunder.jit(fn, executors=executors)
    for _ in range(2):
        got = jf(x)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
