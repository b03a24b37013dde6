"""Reductions and scans: sum, mean, var/std, amax/amin, max/min, argmax/argmin, prod, any/all,
count_nonzero, logsumexp, cumsum/cumprod, norms."""

from __future__ import annotations

import torch

from tests.opinfos.core import ALL, FLOATS, FLOATS_AND_INT, ErrorInput, OpInfo, SampleInput, has_nan, make

# (shape, noncontiguous, dim variants)
_SHAPES = [((), False), ((5,), False), ((3, 4), False), ((2, 3, 4), False), ((4, 6), True), ((0, 3), False)]


def _dims_for(ndim: int, *, tuples: bool = True):
    """dim arguments to try for a tensor of ``ndim`` dims: all, first, last (negative), a tuple."""
    if ndim == 0:
        return [None, 0, -1]
    out = [None, 0, -1]
    if tuples and ndim >= 2:
        out += [(0, -1), [1, 0]]
    if tuples:
        out.append(())
    return out


def _reduction_samples(*, tuples=True, keepdim=True, dtype_kw=None, empty_ok=True, low=None, high=None):
    def samples(dtype, device):
        for shape, noncontig in _SHAPES:
            if not empty_ok and 0 in shape:
                continue
            for dim in _dims_for(len(shape), tuples=tuples):
                a = make(shape, dtype, device, noncontiguous=noncontig, low=low, high=high)
                if dim is None:
                    yield SampleInput((a,))
                    continue
                yield SampleInput((a, dim))
                if keepdim:
                    yield SampleInput((make(shape, dtype, device, low=low, high=high),), {"dim": dim, "keepdim": True})
        if dtype_kw is not None:
            yield SampleInput((make((3, 4), dtype, device, low=low, high=high),), {"dtype": dtype_kw})
            yield SampleInput((make((3, 4), dtype, device, low=low, high=high), 1), {"dtype": dtype_kw})

    return samples


def _nonempty_samples(*, tuples=True):
    """Samples for extrema: an empty tensor only where the reduced dim is non-empty."""

    def samples(dtype, device):
        for shape, noncontig in _SHAPES[:-1]:
            for dim in _dims_for(len(shape), tuples=tuples):
                a = make(shape, dtype, device, noncontiguous=noncontig)
                yield SampleInput((a,) if dim is None else (a, dim))
                if dim is not None:
                    yield SampleInput((make(shape, dtype, device),), {"dim": dim, "keepdim": True})
        yield SampleInput((make((0, 3), dtype, device), 1))
        if dtype.is_floating_point:
            yield SampleInput((torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]], dtype=dtype), 1))
            yield SampleInput((torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]], dtype=dtype),))

    return samples


def _max_min_dim_samples(dtype, device):
    for shape, noncontig in _SHAPES[:-1]:
        for dim in (0, -1):
            yield SampleInput((make(shape, dtype, device, noncontiguous=noncontig), dim))
            yield SampleInput((make(shape, dtype, device),), {"dim": dim, "keepdim": True})
    yield SampleInput((make((0, 3), dtype, device), 1))
    if dtype.is_floating_point:
        yield SampleInput((torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]], dtype=dtype), 1))


def _max_binary_samples(dtype, device):
    yield SampleInput((make((3, 4), dtype, device), make((4,), dtype, device)))
    yield SampleInput((make((3, 4), dtype, device), make((3, 4), dtype, device, noncontiguous=True)))


def _moment_samples(dtype, device):
    yield from _reduction_samples()(dtype, device)
    a = make((3, 4), dtype, device)
    yield SampleInput((a, 1, True, True))  # (dim, unbiased, keepdim) positionally
    yield SampleInput((a, True))  # var(a, unbiased)
    yield SampleInput((a,), {"unbiased": False})
    yield SampleInput((a, 1), {"correction": 0})
    yield SampleInput((a, (0, 1)), {"correction": 2, "keepdim": True})
    yield SampleInput((make((1, 4), dtype, device), 0))  # one element per group: NaN


def _scan_samples(dtype, device):
    for shape, noncontig in _SHAPES:
        for dim in (0, -1):
            yield SampleInput((make(shape, dtype, device, noncontiguous=noncontig, low=-2, high=2), dim))
    yield SampleInput((make((3, 4), dtype, device, low=-2, high=2),), {"dim": 1, "dtype": torch.float64})


def _logsumexp_samples(dtype, device):
    for shape, noncontig in _SHAPES:
        for dim in (0, -1) if shape else (0,):
            yield SampleInput((make(shape, dtype, device, noncontiguous=noncontig), dim))
    yield SampleInput((make((2, 3, 4), dtype, device), (0, 2)), {"keepdim": True})
    if dtype.is_floating_point:
        inf = float("inf")
        yield SampleInput((torch.tensor([[-inf, -inf], [1.0, inf], [float("nan"), 1.0]], dtype=dtype), 1))


def _norm_samples(dtype, device):
    for ord in (2, 1, 0, 3, 0.5, float("inf"), float("-inf")):
        yield SampleInput((make((3, 4), dtype, device), ord))
        yield SampleInput((make((2, 3, 4), dtype, device, noncontiguous=True), ord, (0, -1), True))
    yield SampleInput((make((3, 4), dtype, device),), {"dim": 1})
    yield SampleInput((make((0, 4), dtype, device),), {"dim": 1})
    yield SampleInput((make((3, 4), dtype, device),), {"dtype": torch.float64})


def _torch_norm_samples(dtype, device):
    yield SampleInput((make((3, 4), dtype, device),))
    yield SampleInput((make((3, 4), dtype, device), "fro", (0, 1)))
    yield SampleInput((make((3, 4), dtype, device), 1, 1, True))
    yield SampleInput((make((2, 3, 4), dtype, device),), {"p": 3, "dim": -1})


def _nan_samples(dtype, device):
    yield from _reduction_samples(keepdim=False)(dtype, device)
    if dtype.is_floating_point:
        nan = float("nan")
        t = torch.tensor([[1.0, nan, 3.0], [nan, nan, nan]], dtype=dtype)
        yield SampleInput((t,))
        yield SampleInput((t, 1))
        yield SampleInput((t, 0), {"keepdim": True})


# --- error inputs --------------------------------------------------------------------------


def _dim_errors(device):
    a = make((3, 4), torch.float32, device)
    yield ErrorInput(
        SampleInput((a, 2)), IndexError, r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)"
    )
    yield ErrorInput(SampleInput((a, (0, 0))), ValueError, r"dim 0 appears multiple times")
    yield ErrorInput(SampleInput((a, 1.0)), TypeError, r"dim must be an int.*got float 1.0")


def _sum_errors(device):
    yield from _dim_errors(device)
    yield ErrorInput(
        SampleInput((make((3,), torch.float32, device),), {"dtype": "float"}), TypeError, r"dtype must be a torch.dtype"
    )


def _mean_errors(device):
    yield from _dim_errors(device)
    yield ErrorInput(
        SampleInput((make((3,), torch.int64, device),)), TypeError,
        r"ltorch.mean: could not infer output dtype.*Got: torch.int64",
    )  # fmt: skip


def _var_errors(device):
    yield from _dim_errors(device)
    yield ErrorInput(
        SampleInput((make((3,), torch.int64, device),)), TypeError, r"std and var only support floating point"
    )
    yield ErrorInput(
        SampleInput((make((3,), torch.float32, device),), {"unbiased": True, "correction": 1}),
        TypeError, r"either unbiased or correction",
    )  # fmt: skip


def _extremum_errors(name):
    def errors(device):
        yield from _dim_errors(device)
        yield ErrorInput(
            SampleInput((make((0, 3), torch.float32, device),)), ValueError, r"Expected reduction dim to be specified"
        )
        yield ErrorInput(
            SampleInput((make((0, 3), torch.float32, device), 0)),
            ValueError,
            r"Expected reduction dim 0 to have non-zero size",
        )

    return errors


def _arg_errors(device):
    a = make((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((a, 2)), IndexError, r"Dimension out of range")
    yield ErrorInput(SampleInput((a, (0, 1))), TypeError, r"dim must be an int or None")
    yield ErrorInput(
        SampleInput((make((0, 3), torch.float32, device),)), ValueError, r"Expected reduction dim to be specified"
    )


def _max_errors(device):
    yield ErrorInput(
        SampleInput((make((0, 3), torch.float32, device),)), ValueError, r"Expected reduction dim to be specified"
    )
    yield ErrorInput(SampleInput((make((3, 4), torch.float32, device), 2)), IndexError, r"Dimension out of range")
    yield ErrorInput(
        SampleInput((make((3, 4), torch.float32, device), make((3,), torch.float32, device))), ValueError,
        r"size of tensor a \(4\) must match the size of tensor b \(3\)",
    )  # fmt: skip


def _topk_samples(dtype, device):
    yield SampleInput((make((3, 6), dtype, device), 2))
    yield SampleInput((make((4, 5), dtype, device, noncontiguous=True), 3, 0))
    yield SampleInput((make((2, 3, 4), dtype, device), 4), {"largest": False})
    yield SampleInput((make((2, 5), dtype, device), 5), {"dim": 1, "sorted": True})
    yield SampleInput((make((2, 5), dtype, device), 0))
    yield SampleInput((make((), dtype, device), 1))
    if dtype.is_floating_point:  # NaN counts as the largest
        yield SampleInput((torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]], dtype=dtype, device=device), 2))


def _sort_samples(dtype, device):
    yield SampleInput((make((3, 6), dtype, device),))
    yield SampleInput((make((4, 5), dtype, device, noncontiguous=True), 0))
    yield SampleInput((make((2, 3, 4), dtype, device), 1, True))
    yield SampleInput((make((2, 5), dtype, device),), {"dim": -1, "descending": True, "stable": True})
    yield SampleInput((torch.tensor([[2, 1, 2, 1, 0]], dtype=dtype, device=device),), {"stable": True})  # ties
    yield SampleInput((make((0, 3), dtype, device), 1))
    yield SampleInput((make((), dtype, device),))
    if dtype.is_floating_point:  # NaN sorts last ascending
        yield SampleInput((torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, 6.0]], dtype=dtype, device=device),))


def _sort_errors(device):
    a = make((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((a, 2)), IndexError, r"Dimension out of range")
    yield ErrorInput(SampleInput((a, (0, 1))), TypeError, r"dim must be an int")


_SORT_SKIPS = (("test_decomposition_vs_torch", None, "the indices come from eager's sort kernel: no prim sorts"),)


def _histc_samples(dtype, device):
    yield SampleInput((make((3, 6), dtype, device),))
    yield SampleInput((make((20,), dtype, device, noncontiguous=True), 5, -1.0, 1.0))
    yield SampleInput((make((4, 5), dtype, device),), {"bins": 3, "min": 0, "max": 0})
    yield SampleInput((torch.tensor([1.0, 2.0, 1.0, 3.0], dtype=dtype, device=device), 4, 0, 3))  # edges


_HISTC_SKIPS = (("test_decomposition_vs_torch", None, "eager's kernel counts: no prim histogram"),)


def _histc_errors(device):
    a = make((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((a, 0)), ValueError, r"bins must be > 0, but got 0")
    yield ErrorInput(SampleInput((a, 3, 3, 1)), ValueError, r"max must be larger than min")
    yield ErrorInput(SampleInput((torch.ones(3, dtype=torch.int64, device=device),)), TypeError, r"not implemented")


_TOPK_SKIPS = (("test_decomposition_vs_torch", None, "the indices come from eager's topk kernel: no prim sorts"),)


def _topk_errors(device):
    a = make((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((a, 5)), ValueError, r"selected index k out of range")
    yield ErrorInput(SampleInput((a, 2, 2)), IndexError, r"Dimension out of range")
    yield ErrorInput(SampleInput((a, 1.5)), TypeError, r"k must be an int")


def _scan_errors(device):
    a = make((3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((a, 2)), IndexError, r"Dimension out of range")
    yield ErrorInput(SampleInput((a, (0, 1))), TypeError, r"dim must be an int")


def _prod_errors(device):
    yield ErrorInput(
        SampleInput((make((3, 4), torch.float32, device), (0, 1))), TypeError, r"torch.prod reduces one dim"
    )
    yield ErrorInput(SampleInput((make((3, 4), torch.float32, device), -3)), IndexError, r"Dimension out of range")


def _norm_errors(device):
    yield ErrorInput(
        SampleInput((make((3,), torch.int64, device),)), TypeError, r"Expected a floating point or complex tensor"
    )
    yield ErrorInput(SampleInput((make((0, 3), torch.float32, device), float("inf"))), ValueError, r"non-empty")


_MOMENT_GRAD = (
    (
        "numeric",
        lambda s: s.args[1:2] == ((),) or s.kwargs.get("dim", 0) == (),
        "dim=(): torch's forward reduces every dim but its backward reduces none (N=1, so inf/NaN gradients)",
    ),
)

_INT_DTYPES = (torch.int64, torch.bool)

opinfos: list[OpInfo] = [
    OpInfo("sum", torch.sum, _reduction_samples(dtype_kw=torch.float64), dtypes=ALL, error_inputs=_sum_errors),
    OpInfo("sum_method", lambda a, *args, **kw: a.sum(*args, **kw), _reduction_samples(), dtypes=FLOATS_AND_INT),
    OpInfo(
        "sum_int_dtype",
        lambda a, *args, **kw: torch.sum(a, *args, **kw, dtype=torch.int32),
        _reduction_samples(keepdim=False),
        dtypes=(torch.int64, torch.bool),
    ),
    OpInfo(
        "prod",
        torch.prod,
        _reduction_samples(tuples=False, dtype_kw=torch.float64, low=-1.5, high=1.5),
        dtypes=ALL,
        error_inputs=_prod_errors,
    ),
    OpInfo("mean", torch.mean, _reduction_samples(dtype_kw=torch.float64), dtypes=FLOATS, error_inputs=_mean_errors),
    OpInfo(
        "mean_int_with_dtype",
        lambda a, *args: torch.mean(a, *args, dtype=torch.float32),
        _reduction_samples(keepdim=False),
        dtypes=(torch.int64,),
    ),
    OpInfo("var", torch.var, _moment_samples, dtypes=FLOATS, error_inputs=_var_errors, grad=_MOMENT_GRAD),
    OpInfo("std", torch.std, _moment_samples, dtypes=FLOATS, grad=_MOMENT_GRAD),
    OpInfo("var_mean", torch.var_mean, _moment_samples, dtypes=FLOATS, grad=_MOMENT_GRAD),
    OpInfo("std_mean", torch.std_mean, _moment_samples, dtypes=FLOATS, grad=_MOMENT_GRAD),
    OpInfo(
        "var_method",
        lambda a, *args, **kw: a.var(*args, **kw),
        _moment_samples,
        dtypes=(torch.float32,),
        grad=_MOMENT_GRAD,
    ),
    OpInfo("amax", torch.amax, _nonempty_samples(), dtypes=ALL, error_inputs=_extremum_errors("amax")),
    OpInfo("amin", torch.amin, _nonempty_samples(), dtypes=ALL, error_inputs=_extremum_errors("amin")),
    OpInfo(
        "max",
        torch.max,
        _nonempty_samples(tuples=False),
        dtypes=FLOATS_AND_INT,
        error_inputs=_max_errors,
    ),
    OpInfo("min", torch.min, _nonempty_samples(tuples=False), dtypes=FLOATS_AND_INT),
    OpInfo("max_dim", torch.max, _max_min_dim_samples, dtypes=FLOATS_AND_INT),
    OpInfo("min_dim", torch.min, _max_min_dim_samples, dtypes=FLOATS_AND_INT),
    OpInfo(
        "max_dim_method_values",
        lambda a, *args, **kw: a.max(*args, **kw).values,
        _max_min_dim_samples,
        dtypes=(torch.float32,),
    ),
    OpInfo(
        "min_dim_method_indices",
        lambda a, *args, **kw: a.min(*args, **kw).indices,
        _max_min_dim_samples,
        dtypes=(torch.float32,),
    ),
    OpInfo("topk", torch.topk, _topk_samples, dtypes=FLOATS_AND_INT, error_inputs=_topk_errors, skips=_TOPK_SKIPS),
    OpInfo(
        "topk_method_values",
        lambda a, *args, **kw: a.topk(*args, **kw).values,
        _topk_samples,
        dtypes=(torch.float32,),
        skips=_TOPK_SKIPS,
    ),
    OpInfo("sort", torch.sort, _sort_samples, dtypes=FLOATS_AND_INT, error_inputs=_sort_errors, skips=_SORT_SKIPS),
    OpInfo(
        "argsort", torch.argsort, _sort_samples, dtypes=FLOATS_AND_INT, error_inputs=_sort_errors, skips=_SORT_SKIPS
    ),
    OpInfo(
        "sort_method_values",
        lambda a, *args, **kw: a.sort(*args, **kw).values,
        _sort_samples,
        dtypes=(torch.float32,),
        skips=_SORT_SKIPS,
    ),
    OpInfo(
        "histc",
        torch.histc,
        _histc_samples,
        dtypes=(torch.float32, torch.float64),
        error_inputs=_histc_errors,
        skips=_HISTC_SKIPS,
    ),
    OpInfo(
        "histc_method",
        lambda a, *args, **kw: a.histc(*args, **kw),
        _histc_samples,
        dtypes=(torch.float32,),
        skips=_HISTC_SKIPS,
    ),
    OpInfo("max_binary", torch.max, _max_binary_samples, dtypes=FLOATS_AND_INT),
    OpInfo("min_binary", torch.min, _max_binary_samples, dtypes=FLOATS_AND_INT),
    OpInfo("argmax", torch.argmax, _nonempty_samples(tuples=False), dtypes=FLOATS_AND_INT, error_inputs=_arg_errors),
    OpInfo("argmin", torch.argmin, _nonempty_samples(tuples=False), dtypes=FLOATS_AND_INT),
    OpInfo(
        "argmax_keepdim_all",
        lambda a: torch.argmax(a, keepdim=True),
        lambda dtype, device: (
            s for s in _nonempty_samples(tuples=False)(dtype, device) if len(s.args) == 1 and not s.kwargs
        ),
        dtypes=(torch.float32,),
    ),
    OpInfo("any", torch.any, _reduction_samples(), dtypes=ALL),
    OpInfo("all", torch.all, _reduction_samples(), dtypes=ALL),
    OpInfo(
        "any_uint8",
        lambda a, *args, **kw: torch.any(a.to(torch.uint8), *args, **kw),
        _reduction_samples(),
        dtypes=(torch.int64,),
    ),
    OpInfo("count_nonzero", torch.count_nonzero, _reduction_samples(keepdim=False), dtypes=ALL),
    OpInfo("logsumexp", torch.logsumexp, _logsumexp_samples, dtypes=FLOATS_AND_INT, error_inputs=_dim_errors),
    OpInfo("cumsum", torch.cumsum, _scan_samples, dtypes=ALL, error_inputs=_scan_errors),
    OpInfo("cumprod", torch.cumprod, _scan_samples, dtypes=ALL),
    OpInfo(
        "cumsum_method",
        lambda a, *args, **kw: a.cumsum(*args, **kw),
        _scan_samples,
        dtypes=(torch.float32, torch.int64),
    ),
    OpInfo("vector_norm", torch.linalg.vector_norm, _norm_samples, dtypes=FLOATS, error_inputs=_norm_errors),
    OpInfo("norm", torch.norm, _torch_norm_samples, dtypes=FLOATS),
    OpInfo("nansum", torch.nansum, _nan_samples, dtypes=FLOATS_AND_INT),
    OpInfo(
        "nanmean",
        torch.nanmean,
        _nan_samples,
        dtypes=FLOATS,
        grad=(
            (
                "skip",
                lambda s: len(s.args) > 1 and has_nan(s),
                "an all-NaN group: its value is NaN (0/0) and its gradient a convention; torch's is NaN "
                "(cotangent/count with count 0), thunder's 0 (NaN elements do not reach the value)",
            ),
        ),
    ),
]
