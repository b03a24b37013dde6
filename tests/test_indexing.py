"""Shape and indexing behaviour beyond the op database: the prim decompositions of every shape
and indexing op evaluated against eager PyTorch, ``__setitem__`` forms, views and mutation
of inputs, and how index keys with tensors print in traces."""

from __future__ import annotations

import pytest
import torch

import thunder
from tests.opinfos import indexing as indexing_ops
from tests.opinfos import shape as shape_ops
from tests.opinfos.core import tolerance
from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_flatten, tree_map, tree_unflatten

# ------------------------------------------------------------------------------------------
# Decompositions: the torch executor runs torch itself, so the database alone does not check
# the prims a symbol decomposes into. Here each traced op is run prim by prim.
# ------------------------------------------------------------------------------------------


def _run_prims(trace, args):
    env = {p.name: a for p, a in zip(trace.args, args)}

    def read(x):
        return env[x.name] if isinstance(x, Proxy) else x

    def run(bsym):
        if bsym.sym.name == "python_return":
            return tree_map(read, bsym.args[0])
        if bsym.sym.is_prim:
            out = bsym.sym.python_impl(*tree_map(read, bsym.args), **tree_map(read, bsym.kwargs))
            leaves, _ = tree_flatten(bsym.output)
            values, _ = tree_flatten(out)
            for p, v in zip(leaves, values):
                if isinstance(p, Proxy):
                    env[p.name] = v
            return None
        assert bsym.subsymbols, f"{bsym.sym.name} has no decomposition"
        for sub in bsym.subsymbols:
            run(sub)
        return None

    result = None
    for bsym in trace.bound_symbols:
        r = run(bsym)
        if bsym.sym.name == "python_return":
            result = r
    return result


def _cases():
    for info in shape_ops.opinfos + indexing_ops.opinfos:
        for dtype in info.dtypes:
            yield pytest.param(info, dtype, id=f"{info.name}-{str(dtype).removeprefix('torch.')}")


def _clone(x):
    return x.clone() if isinstance(x, torch.Tensor) else [_clone(y) for y in x] if isinstance(x, list) else x


def _compare(actual, expected, dtype, sample):
    a_leaves, _ = tree_flatten(actual)
    e_leaves, _ = tree_flatten(expected)
    assert len(a_leaves) == len(e_leaves), sample
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor):
            assert a.shape == e.shape and a.dtype == e.dtype, f"{sample}: {a.shape} {a.dtype} vs {e.shape} {e.dtype}"
            torch.testing.assert_close(a, e, equal_nan=True, msg=lambda m: f"{sample}: {m}", **tolerance(dtype))


@pytest.mark.parametrize("info,dtype", list(_cases()))
def test_decomposition_matches_torch(info, dtype):
    for sample in info.sample_inputs(dtype, "cpu"):
        flat, spec = tree_flatten((sample.args, sample.kwargs))
        eager_args, eager_kwargs = tree_unflatten(spec, [_clone(x) for x in flat])
        expected = info.op(*eager_args, **eager_kwargs)
        jfn = thunder.jit(lambda *a, **k: info.op(*a, **k))  # noqa: B023
        jfn(*_clone(list(sample.args)), **sample.kwargs)
        trace = thunder.last_traces(jfn)[0]
        prologue = thunder.last_prologue_traces(jfn)[-1]
        inputs = prologue.python_callable()(
            *_clone(list(sample.args)), **{k: _clone(v) for k, v in sample.kwargs.items()}
        )
        actual = _run_prims(trace, inputs)
        _compare(actual, expected, dtype, sample)
        if info.mutates:
            tensors = [x for x in inputs if isinstance(x, torch.Tensor)]
            eager_tensors = [x for x in tree_flatten((eager_args, eager_kwargs))[0] if isinstance(x, torch.Tensor)]
            _compare(tensors[: len(eager_tensors)], eager_tensors[: len(tensors)], dtype, sample)


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


def test_bool_mask_getitem_is_a_clear_error():
    with pytest.raises(RuntimeError, match="boolean mask"):
        thunder.jit(lambda a: a[a > 0])(torch.randn(3))


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
