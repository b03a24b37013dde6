"""Reductions, factories and conversions: their prim decompositions against eager PyTorch, and
the behaviours the op database cannot express (identity of ``.to``, RNG consumption, tags,
default dtype, namedtuple results, clear device errors).

The torch executor runs a torch-language symbol by calling the torch function itself, so
``tests/test_ops.py`` checks the symbols' metadata and error handling; the decomposition test
here runs each traced program through its prims only (the path other executors take).
"""

from __future__ import annotations

import pytest
import torch

import thunder
import thunder.torch as ltorch
from tests.opinfos import reductions as reduction_ops
from tests.opinfos.conversions import opinfos as conversion_opinfos
from tests.opinfos.core import tolerance
from tests.opinfos.factories import opinfos as factory_opinfos
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.symbol import DONT_DCE, PARAMETER, RANDOM
from thunder.executors.torchex import eager_fallback

MY_OPINFOS = reduction_ops.opinfos + factory_opinfos + conversion_opinfos


def run_decomposed(trace, inputs: list):
    """Runs a computation trace prim by prim: every language symbol is replaced by its decomposition."""
    env = {p.name: v for p, v in zip(trace.args, inputs)}

    def read(x):
        return env[x.name] if isinstance(x, Proxy) else x

    def run(bsym):
        if PARAMETER in bsym.sym.tags:
            return None
        if bsym.sym.name == "python_return":
            return tree_map(read, bsym.args[0])
        if bsym.sym.is_prim or not bsym.subsymbols:
            impl = bsym.sym.python_impl if bsym.sym.is_prim else eager_fallback(bsym.sym)
            out = impl(*tree_map(read, bsym.args), **tree_map(read, bsym.kwargs))
            for p, v in zip(tree_leaves(bsym.output), tree_leaves(out)):
                if isinstance(p, Proxy):
                    env[p.name] = v
            _check_metadata(bsym, env)
            return None
        for sub in bsym.subsymbols:
            run(sub)
        _check_metadata(bsym, env)
        return None

    result = None
    for bsym in trace.bound_symbols:
        r = run(bsym)
        if bsym.sym.name == "python_return":
            result = r
    return result


def _check_metadata(bsym, env) -> None:
    """The proxies a symbol's meta returned describe the tensors its decomposition computed."""
    for p in tree_leaves(bsym.output):
        if isinstance(p, TensorProxy) and p.name in env:
            v = env[p.name]
            assert (tuple(v.shape), v.dtype, v.device) == (p.shape, p.dtype, p.device), (
                f"{bsym.sym.print_name}: meta says {p.type_string()}, computed {tuple(v.shape)} {v.dtype} {v.device}"
            )


def _tensor_inputs(sample) -> list[torch.Tensor]:
    seen, out = set(), []
    for leaf in tree_leaves((sample.args, sample.kwargs)):
        if isinstance(leaf, torch.Tensor) and id(leaf) not in seen:
            seen.add(id(leaf))
            out.append(leaf)
    return out


def _compare(actual, expected, dtype, info, sample):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _compare(a, e, dtype, info, sample)
        return
    if not isinstance(expected, torch.Tensor):
        assert actual == expected, f"{sample}: {actual} vs {expected}"
        return
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, f"{sample}: {actual} vs {expected}"
    if info.random:
        return
    tol = tolerance(dtype) if dtype is not torch.bfloat16 else {"atol": 2e-2, "rtol": 2e-2}
    torch.testing.assert_close(actual, expected, equal_nan=True, msg=lambda m: f"{sample}: {m}", **tol)


def _cases():
    for info in MY_OPINFOS:
        if info.name in ("cuda", "type_query", "contiguous_is_contiguous"):
            continue
        for dtype in info.dtypes:
            yield pytest.param(info, dtype, id=f"{info.name}-{str(dtype).removeprefix('torch.')}")


@pytest.mark.parametrize("info,dtype", list(_cases()))
def test_decomposition_vs_torch(info, dtype):
    for sample in info.sample_inputs(dtype, "cpu"):
        fn = lambda *args, **kwargs: info.op(*args, **kwargs)  # noqa: E731
        jfn = thunder.jit(fn)
        torch.manual_seed(0)
        expected = fn(*sample.args, **sample.kwargs)
        jfn(*sample.args, **sample.kwargs)
        trace = thunder.last_traces(jfn)[0]
        torch.manual_seed(0)
        actual = run_decomposed(trace, _tensor_inputs(sample))
        _compare(actual, expected, dtype, info, sample)


# --- behaviours --------------------------------------------------------------------------


def test_to_same_dtype_and_device_returns_input():
    x = torch.randn(3)
    assert thunder.jit(lambda a: a.to(torch.float32))(x) is x
    assert thunder.jit(lambda a: a.to("cpu"))(x) is x
    assert thunder.jit(lambda a: a.float())(x) is x
    assert thunder.jit(lambda a: a.to(torch.float32, copy=True))(x) is not x


def test_random_symbols_are_tagged():
    for sym in (ltorch.rand, ltorch.randn, ltorch.randint, ltorch.rand_like, ltorch.randn_like, ltorch.randint_like):
        assert RANDOM in sym.tags and DONT_DCE in sym.tags, sym


def test_random_calls_are_not_merged_and_follow_the_seed():
    def fn(a):
        return a + torch.rand(4), a + torch.rand(4), torch.randn_like(a)

    x = torch.zeros(4)
    torch.manual_seed(1234)
    expected = fn(x)
    torch.manual_seed(1234)
    actual = thunder.jit(fn)(x)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
    assert not torch.equal(actual[0], actual[1])


def test_unused_random_draw_advances_generator_as_eager():
    def fn(a):
        torch.rand(3)  # unused, but eager draws it
        return torch.rand(3) + a

    x = torch.zeros(3)
    torch.manual_seed(7)
    expected = fn(x)
    torch.manual_seed(7)
    torch.testing.assert_close(thunder.jit(fn)(x), expected)


def test_default_dtype_is_followed():
    previous = torch.get_default_dtype()
    try:
        torch.set_default_dtype(torch.float64)
        out = thunder.jit(
            lambda: (torch.zeros(2), torch.arange(0, 1, 0.5), torch.tensor([1.5]), torch.full((1,), 2.0))
        )()
        assert [t.dtype for t in out] == [torch.float64] * 4
    finally:
        torch.set_default_dtype(previous)


def test_max_with_dim_has_values_and_indices_inside_the_function():
    x = torch.randn(3, 5)
    out = thunder.jit(lambda a: (a.max(dim=1).values, torch.min(a, 0).indices))(x)
    torch.testing.assert_close(out[0], x.max(dim=1).values)
    torch.testing.assert_close(out[1], torch.min(x, 0).indices)


def test_empty_is_compared_by_metadata():
    out = thunder.jit(lambda: torch.empty(2, 3, dtype=torch.float16))()
    assert out.shape == (2, 3) and out.dtype is torch.float16


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(RuntimeError, match=r"ltorch.cuda: .*CUDA is not available.*Use device='cpu'"):
        thunder.jit(lambda a: a.cuda())(torch.randn(2))
    with pytest.raises(RuntimeError, match=r"ltorch.zeros: .*CUDA is not available"):
        thunder.jit(lambda: torch.zeros(2, device="cuda"))()


def test_reduction_trace_keeps_no_dims_at_prim_level():
    jfn = thunder.jit(lambda a: a.sum(dim=1, keepdim=True))
    jfn(torch.randn(2, 3))
    text = str(thunder.last_traces(jfn)[0])
    assert "prims.sum(a, (1,))" in text and "prims.broadcast_in_dim" in text


def test_sum_of_ints_and_bools_is_int64():
    out = thunder.jit(lambda a, b: (a.sum(), b.sum(0), torch.cumsum(b, 0)))(
        torch.arange(6, dtype=torch.int32), torch.tensor([True, False, True])
    )
    assert [t.dtype for t in out] == [torch.int64] * 3
    assert out[0].item() == 15 and out[1].item() == 2


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: torch.zeros(t),
        lambda t: torch.ones(t, 2),
        lambda t: torch.full((2, t), 1.5),
        lambda t: torch.empty([t]).shape,
        lambda t: torch.randn(size=(t, 1)).shape,
        lambda t: torch.randint(5, (t,)).shape,
        lambda t: t.new_zeros(t),
        lambda t: t.new_full((t, 1), 7),
        lambda t: torch.zeros(t.reshape(1, 1)),
    ],
)
def test_factory_sizes_given_as_integer_tensors_vs_eager(fn):
    # eager reads a one-element integer tensor as the int it holds (__index__): so does the trace,
    # checking the value on each call (a new value traces again)
    jfn = thunder.jit(fn)
    for n in (3, 3, 4):
        t = torch.tensor(n)
        actual, expected = jfn(t), fn(t)
        if isinstance(expected, torch.Tensor):
            assert actual.dtype == expected.dtype
            torch.testing.assert_close(actual, expected)
        else:
            assert actual == expected
    assert thunder.cache_misses(jfn) == 2


@pytest.mark.parametrize("t", [torch.tensor(3.0), torch.tensor(True), torch.tensor([2, 3])])
def test_factory_sizes_eager_rejects_are_rejected(t):
    with pytest.raises((TypeError, RuntimeError)):
        torch.zeros(t)
    with pytest.raises(TypeError, match=r"ltorch.zeros: size must be ints"):
        thunder.jit(lambda a: torch.zeros(a))(t)
