"""Indexing ops: ``a[key]`` (basic and advanced), ``a[key] = value``, index_select, gather,
take_along_dim, scatter, scatter_add, index_add, index_copy, index_put, masked_fill and the
in-place twins."""

from __future__ import annotations

import operator

import torch

from tests.opinfos.core import ALL, GRAD_INPLACE_FALLBACK, ErrorInput, OpInfo, SampleInput, make


def _s(*args, **kwargs):
    return SampleInput(args, kwargs)


def _idx(values, device="cpu", dtype=torch.int64):
    return torch.tensor(values, device=device, dtype=dtype)


def _rand_idx(shape, high, device, dtype=torch.int64):
    return torch.randint(0, high, shape, device=device, dtype=dtype)


def _perm_idx(n, k, device):
    """``k`` distinct indices below ``n`` (for writes, where duplicates make the result order-dependent)."""
    return torch.randperm(n, device=device)[:k]


def _getitem_samples(dtype, device):
    a = make((4, 5, 6), dtype, device)
    yield _s(a, 1)
    yield _s(a, -1)
    yield _s(a, (slice(1, 3), 2))
    yield _s(a, (slice(None, None, 2), slice(-4, -1), slice(5, 1)))
    yield _s(a, (Ellipsis, slice(1, None, 3)))
    yield _s(a, (None, 0, None, Ellipsis, None))
    yield _s(a, Ellipsis)
    yield _s(a, (slice(-100, 100),))
    yield _s(make((4, 6), dtype, device, noncontiguous=True), (slice(1, None), -2))
    yield _s(make((0, 3), dtype, device), (slice(None), 1))
    yield _s(make((), dtype, device), None)
    yield _s(make((), dtype, device), Ellipsis)
    # advanced indexing
    yield _s(a, _idx([0, 3, -1, 2], device))
    yield _s(a, (slice(None), _idx([[0, -1], [2, 4]], device)))
    yield _s(a, (_idx([0, 1], device), _idx([1, 2], device)))
    yield _s(a, (_idx([[0], [3]], device), slice(1, 3), _idx([0, 5, 1], device)))  # separated: index dims first
    yield _s(a, (slice(None), _idx([0, 1], device), _idx([[1], [2]], device)))  # adjacent, not leading
    yield _s(a, (0, slice(None), _idx([1, 2], device)))  # ints are basic in PyTorch
    yield _s(a, (_idx([1, 2], device), 0, _idx([0, 5], device)))
    yield _s(a, (_idx([1, 2], device, torch.int32), None))
    yield _s(a, (Ellipsis, _idx(2, device)))  # 0-d index tensor
    yield _s(a, ([0, 2, -1], slice(None, 2)))  # a list of ints
    yield _s(make((3, 4), dtype, device), _idx([], device))


def _getitem_errors(device):
    a = make((2, 3, 4), torch.float32, device)
    yield ErrorInput(_s(a, 5), IndexError, r"index 5 is out of bounds for dimension 0 with size 2")
    yield ErrorInput(_s(a, (0, -4)), IndexError, r"index -4 is out of bounds for dimension 1 with size 3")
    yield ErrorInput(_s(a, (0, 0, 0, 0)), IndexError, r"too many indices for tensor of dimension 3")
    yield ErrorInput(_s(a, (Ellipsis, Ellipsis)), IndexError, r"an index can only have a single ellipsis")
    yield ErrorInput(_s(a, 1.5), IndexError, r"only integers, slices .* are valid indices")
    yield ErrorInput(_s(a, slice(None, None, -1)), ValueError, r"step must be greater than zero")
    yield ErrorInput(_s(a, _idx([True, False, True], device, torch.bool)), IndexError, r"shape of the mask \[3\] at index 0 does not match")
    yield ErrorInput(_s(a, _idx([0.5], device, torch.float32)), IndexError, r"tensors used as indices must be long")


def _setitem(a, key, value):
    a[key] = value
    return a


def _setitem_input_only(a, key, value):
    a[key] = value


def _setitem_samples(dtype, device):
    def a():
        return make((4, 5, 6), dtype, device)

    def v(*shape):
        return make(shape, dtype, device)

    yield _s(a(), 1, v(5, 6))
    yield _s(a(), 1, v(6))  # broadcast
    yield _s(a(), (slice(1, 3), -1), 3)  # a number
    yield _s(a(), (slice(None, None, 2), slice(-4, -1), slice(5, 1)), v())
    yield _s(a(), (Ellipsis, slice(1, None, 3)), v(4, 5, 2))
    yield _s(a(), (None, 0, Ellipsis, None), v(1, 1, 5, 6, 1))
    yield _s(a(), Ellipsis, v(1, 6))
    yield _s(make((4, 6), dtype, device, noncontiguous=True), (slice(1, None), -2), v(3))
    yield _s(a(), 2, make((5, 6), torch.float64, device))  # converted to a's dtype
    # advanced indexing
    yield _s(a(), _perm_idx(4, 2, device), v(2, 5, 6))
    yield _s(a(), (slice(None), _perm_idx(5, 3, device)), v(6))
    yield _s(a(), (_idx([0, 1], device), _idx([1, -2], device)), v(2, 6))
    yield _s(a(), (_idx([[0], [3]], device), slice(1, 3), _idx([0, 5, 1], device)), v(2, 3, 2))
    yield _s(a(), (slice(1, 3), _idx([0, 4], device), _idx([[1], [2]], device)), v(2, 2, 2))
    yield _s(a(), (0, slice(None), _idx([1, 2], device)), 7)
    yield _s(a(), (_idx([1, 2], device), 0, _idx([0, 5], device)), v(2))
    # boolean masks keep shapes when the value is one element (or broadcast per row)
    yield _s(a(), make((4, 5, 6), torch.bool, device), 0)
    yield _s(a(), make((4, 5), torch.bool, device), v(6))
    yield _s(a(), (make((4,), torch.bool, device), Ellipsis), v())


def _setitem_errors(device):
    a = make((2, 3, 4), torch.float32, device)
    yield ErrorInput(_s(a, 5, 0.0), IndexError, r"index 5 is out of bounds for dimension 0 with size 2")
    yield ErrorInput(
        _s(a, 0, make((2,), torch.float32, device)), ValueError, r"value tensor of shape \[2\] cannot be broadcast"
    )
    yield ErrorInput(
        _s(a, make((2, 3, 4), torch.bool, device), make((25,), torch.float32, device)),
        ValueError,
        r"value tensor of shape \[25\] cannot be broadcast to indexing result of shape \[\d+\]",
    )
    yield ErrorInput(
        _s(a, make((3,), torch.bool, device), 1.0), IndexError, r"The shape of the mask \[3\] at index 0 does not match"
    )


def _index_select_samples(dtype, device):
    yield _s(make((4, 5), dtype, device), 0, _idx([0, 3, 3, 1], device))
    yield _s(make((4, 5), dtype, device), -1, _idx([4, 0], device, torch.int32))
    yield _s(make((4, 5), dtype, device, noncontiguous=True), dim=1, index=_idx([2], device))
    yield _s(make((4, 5), dtype, device), 0, _idx(2, device))
    yield _s(make((0, 5), dtype, device), 1, _idx([1, 1], device))
    yield _s(make((), dtype, device), 0, _idx([0], device))


def _index_select_errors(device):
    a = make((4, 5), torch.float32, device)
    yield ErrorInput(_s(a, 2, _idx([0], device)), IndexError, r"Dimension out of range")
    yield ErrorInput(_s(a, 0, _idx([[0]], device)), IndexError, r"Index is supposed to be a vector")
    yield ErrorInput(_s(a, 0, make((1,), torch.float32, device)), TypeError, r"Expected dtype int32/int64 for index")


def _gather_samples(dtype, device):
    yield _s(make((4, 5), dtype, device), 0, _rand_idx((3, 5), 4, device))
    yield _s(make((4, 5), dtype, device), 1, _rand_idx((4, 7), 5, device))
    yield _s(make((4, 5, 3), dtype, device), -1, _rand_idx((2, 2, 2), 3, device))
    yield _s(make((4, 6), dtype, device, noncontiguous=True), dim=1, index=_rand_idx((4, 2), 6, device))
    yield _s(make((4, 5), dtype, device), 0, _rand_idx((0, 5), 4, device))


def _gather_errors(device):
    a = make((2, 3), torch.float32, device)
    yield ErrorInput(
        _s(a, 0, _rand_idx((2, 3, 1), 2, device)), ValueError, r"Index tensor must have the same number of dimensions"
    )
    yield ErrorInput(_s(a, 0, make((2, 3), torch.float32, device)), TypeError, r"Expected dtype int32/int64 for index")
    yield ErrorInput(_s(a, 2, _rand_idx((2, 3), 2, device)), IndexError, r"Dimension out of range")
    yield ErrorInput(_s(a, 0, _rand_idx((2, 5), 2, device)), ValueError, r"Size does not match at dimension 1")


def _take_along_dim_samples(dtype, device):
    yield _s(make((4, 5), dtype, device), _rand_idx((4, 2), 5, device), 1)
    yield _s(make((4, 5), dtype, device), _rand_idx((3, 1), 4, device), dim=0)  # broadcasts
    yield _s(make((4, 5), dtype, device), _rand_idx((6,), 20, device))


def _scatter_samples(dtype, device):
    # distinct indices along the scatter dim so the result does not depend on write order
    idx0 = torch.stack([_perm_idx(4, 3, device) for _ in range(5)], 1)
    yield _s(make((4, 5), dtype, device), 0, idx0, make((3, 5), dtype, device))
    idx1 = torch.stack([_perm_idx(5, 2, device) for _ in range(4)], 0)
    yield _s(make((4, 5), dtype, device), -1, idx1, make((4, 3), dtype, device))
    yield _s(make((4, 5), dtype, device), 1, idx1, 2)
    yield _s(make((4, 5), dtype, device), dim=1, index=idx1, value=-1)
    yield _s(make((4, 6), dtype, device, noncontiguous=True), 1, idx1, make((4, 2), dtype, device))


def _scatter_add_samples(dtype, device):
    yield _s(make((4, 5), dtype, device), 0, _rand_idx((6, 5), 4, device), make((6, 5), dtype, device))
    yield _s(make((4, 5), dtype, device), 1, _rand_idx((2, 3), 5, device), make((3, 4), dtype, device))
    yield _s(make((4, 5), dtype, device), dim=-1, index=_rand_idx((4, 0), 5, device), src=make((4, 0), dtype, device))


def _scatter_errors(device):
    a = make((2, 3), torch.float32, device)
    yield ErrorInput(
        _s(a, 0, _rand_idx((2, 3), 2, device), make((2, 3), torch.float64, device)),
        TypeError,
        r"Expected self.dtype to be equal to src.dtype",
    )
    yield ErrorInput(
        _s(a, 0, _rand_idx((2, 3), 2, device), make((1, 3), torch.float32, device)),
        ValueError,
        r"to be smaller size than src",
    )


def _index_add_samples(dtype, device):
    yield _s(make((4, 5), dtype, device), 0, _rand_idx((6,), 4, device), make((6, 5), dtype, device))
    yield _s(make((4, 5), dtype, device), -1, _idx([0, 0, 4], device), make((4, 3), dtype, device), alpha=2)
    yield _s(
        make((4, 6), dtype, device, noncontiguous=True),
        dim=1,
        index=_idx([1], device),
        source=make((4, 1), dtype, device),
    )


def _index_copy_samples(dtype, device):
    yield _s(make((4, 5), dtype, device), 0, _perm_idx(4, 2, device), make((2, 5), dtype, device))
    yield _s(make((4, 5), dtype, device), 1, _perm_idx(5, 5, device), make((4, 5), dtype, device))


def _index_update_errors(device):
    a = make((4, 5), torch.float32, device)
    yield ErrorInput(
        _s(a, 0, _idx([0, 1], device), make((3, 5), torch.float32, device)), ValueError, r"source of shape \[3, 5\]"
    )
    yield ErrorInput(
        _s(a, 0, _idx([[0]], device), make((1, 5), torch.float32, device)),
        IndexError,
        r"Index is supposed to be a vector",
    )


def _index_put_samples(dtype, device):
    yield _s(make((4, 5), dtype, device), (_perm_idx(4, 3, device),), make((3, 5), dtype, device))
    yield _s(make((4, 5), dtype, device), (_idx([0, 1], device), _idx([1, 3], device)), make((2,), dtype, device))
    yield _s(make((4, 5), dtype, device), (_idx([0, 0, 1], device),), make((5,), dtype, device), accumulate=True)
    yield _s(make((4, 5), dtype, device), [_idx([3, 3], device), _idx([4, 4], device)], make((), dtype, device), True)


def _masked_fill_samples(dtype, device):
    yield _s(make((4, 5), dtype, device), make((4, 5), torch.bool, device), 2)
    yield _s(make((4, 5), dtype, device), make((5,), torch.bool, device), make((), dtype, device))
    yield _s(make((4, 5), dtype, device, noncontiguous=True), mask=make((4, 1), torch.bool, device), value=-1)
    yield _s(make((0, 5), dtype, device), make((5,), torch.bool, device), 0)
    if dtype.is_floating_point:
        yield _s(make((4, 5), dtype, device), make((4, 5), torch.bool, device), float("-inf"))


def _masked_fill_errors(device):
    a = make((2, 4), torch.float32, device)
    yield ErrorInput(
        _s(a, make((4,), torch.bool, device), make((2,), torch.float32, device)),
        ValueError,
        r"only supports a 0-dimensional value tensor, but got tensor with 1 dimension",
    )
    yield ErrorInput(_s(a, make((4,), torch.float32, device), 1.0), TypeError, r"only supports boolean masks")
    yield ErrorInput(_s(a, make((5,), torch.bool, device), 1.0), ValueError, r"size of tensor a \(4\) must match")


def _index_fill_samples(dtype, device):
    yield _s(make((4, 5), dtype, device), 0, _idx([0, 3, 3], device), 2)
    yield _s(make((4, 5), dtype, device), -1, _idx([-1], device), make((), dtype, device))
    yield _s(make((4, 6), dtype, device, noncontiguous=True), dim=1, index=_idx(2, device), value=0)


# Samples torch's own autograd gets wrong (test_vjp_vs_torch checks them by central differences).
_TORCH_SCATTER_SRC = (
    "src larger than index: torch's backward returns a gradient of index's shape for src (RuntimeError)"
)
_TORCH_INDEX_FILL_NEGATIVE = (
    "a negative index: torch's index_fill backward raises 'INDICES element is out of DATA bounds'"
)


def _src_beyond_index(s) -> bool:
    index = s.args[2] if len(s.args) > 2 else s.kwargs["index"]
    src = s.args[3] if len(s.args) > 3 else s.kwargs.get("src")
    return isinstance(src, torch.Tensor) and src.shape != index.shape


def _negative_index(s) -> bool:
    index = s.args[2] if len(s.args) > 2 else s.kwargs["index"]
    return bool((index < 0).any())


def _take_samples(dtype, device):
    yield _s(make((4, 5), dtype, device), _idx([0, 19, -1, 7], device))
    yield _s(make((4, 5), dtype, device), _rand_idx((2, 3), 20, device))
    yield _s(make((4, 6), dtype, device, noncontiguous=True), _idx(5, device))


def _inplace(name):
    def op(a, *args, **kwargs):
        return getattr(a, name)(*args, **kwargs)

    return op


opinfos: list[OpInfo] = [
    OpInfo("getitem", operator.getitem, _getitem_samples, dtypes=ALL, error_inputs=_getitem_errors),
    OpInfo(
        "setitem",
        _setitem,
        _setitem_samples,
        dtypes=ALL,
        error_inputs=_setitem_errors,
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
    ),
    OpInfo(
        "setitem_returns_nothing", _setitem_input_only, _setitem_samples, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)
    ),
    OpInfo("index_select", torch.index_select, _index_select_samples, dtypes=ALL, error_inputs=_index_select_errors),
    OpInfo("gather", torch.gather, _gather_samples, dtypes=ALL, error_inputs=_gather_errors),
    OpInfo("take_along_dim", torch.take_along_dim, _take_along_dim_samples),
    OpInfo(
        "scatter",
        torch.scatter,
        _scatter_samples,
        error_inputs=_scatter_errors,
        grad=(("numeric", _src_beyond_index, _TORCH_SCATTER_SRC),),
    ),
    OpInfo(
        "scatter_",
        _inplace("scatter_"),
        _scatter_samples,
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK, ("skip", _src_beyond_index, _TORCH_SCATTER_SRC + ": the fallback raises")),
    ),
    OpInfo(
        "scatter_add",
        torch.scatter_add,
        _scatter_add_samples,
        grad=(("numeric", _src_beyond_index, _TORCH_SCATTER_SRC),),
    ),
    OpInfo(
        "scatter_add_",
        _inplace("scatter_add_"),
        _scatter_add_samples,
        dtypes=(torch.float64, torch.int64),
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK, ("skip", _src_beyond_index, _TORCH_SCATTER_SRC + ": the fallback raises")),
    ),
    OpInfo("index_add", torch.index_add, _index_add_samples, error_inputs=_index_update_errors),
    OpInfo(
        "index_add_",
        _inplace("index_add_"),
        _index_add_samples,
        dtypes=(torch.float64, torch.int64),
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
    ),
    OpInfo("index_copy", torch.index_copy, _index_copy_samples, dtypes=ALL),
    OpInfo("index_copy_", _inplace("index_copy_"), _index_copy_samples, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)),
    OpInfo(
        "index_fill",
        torch.index_fill,
        _index_fill_samples,
        dtypes=ALL,
        grad=(("numeric", _negative_index, _TORCH_INDEX_FILL_NEGATIVE),),
    ),
    OpInfo(
        "index_fill_",
        _inplace("index_fill_"),
        _index_fill_samples,
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK, ("skip", _negative_index, _TORCH_INDEX_FILL_NEGATIVE + ": the fallback raises")),
    ),
    OpInfo("take", torch.take, _take_samples, dtypes=ALL),
    OpInfo("index_put", torch.index_put, _index_put_samples),
    OpInfo(
        "index_put_",
        _inplace("index_put_"),
        _index_put_samples,
        dtypes=(torch.float64, torch.int64),
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
    ),
    OpInfo("masked_fill", torch.masked_fill, _masked_fill_samples, dtypes=ALL, error_inputs=_masked_fill_errors),
    OpInfo("masked_fill_", _inplace("masked_fill_"), _masked_fill_samples, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)),
]
