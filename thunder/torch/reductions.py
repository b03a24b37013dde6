"""Reductions and scans: sum, mean, var/std (and their ``_mean`` twins), amax/amin, max/min,
argmax/argmin, prod, any/all, count_nonzero, logsumexp, cumsum/cumprod, norm and
``linalg.vector_norm``, with PyTorch's semantics.

``dim`` may be an int, a tuple or list of ints, ``None`` or ``()`` (all dims), with negative
dims wrapped; ``keepdim`` is added after the prim by ``broadcast_in_dim`` (reduction prims
never keep dims). Sums and products of integers and bools give int64 unless ``dtype=`` says
otherwise; low-precision floats are accumulated in float32 and rounded once at the end.

Layer: language. Imports: core, torch.base, torch.elementwise.
"""

from __future__ import annotations

import builtins
import math

import torch

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderRuntimeError, ThunderTypeError, ThunderValueError
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import grad_rules
from thunder.core.trace import NO_GRAD_RESULTS
from thunder.torch.base import canonicalize_dim, is_tensor, maybe_convert_to_dtype, torchsymbol
from thunder.torch.eager_ops import EAGER_OPS
from thunder.torch.elementwise import maximum, minimum

__all__ = [
    "sum", "mean", "var", "std", "var_mean", "std_mean", "amax", "amin", "max", "min", "argmax", "argmin", "topk",
    "sort", "argsort", "histc",
    "prod", "any", "all", "count_nonzero", "logsumexp", "cumsum", "cumprod", "norm", "vector_norm", "nansum",
    "nanmean",
]  # fmt: skip


# ----------------------------------------------------------------------------------------
# Helpers
# ----------------------------------------------------------------------------------------


def _check_input(op: str, a) -> None:
    if not isinstance(a, TensorProxy):
        raise ThunderTypeError(f"{op}: expected input to be a tensor, but got {type(a).__name__} {a!r}")


def _is_int(x) -> bool:
    x = pyval(x)
    return isinstance(x, int) and not isinstance(x, bool)


def reduction_dims(op: str, a: TensorProxy, dim, *, empty_is_all: bool = True) -> tuple[int, ...]:
    """Canonical (sorted, non-negative, distinct) dims for ``dim``; ``None`` means every dim, and so
    does ``()`` unless ``empty_is_all`` is False (``torch.any(a, ())`` reduces nothing).

    A 0-d tensor accepts dim 0 or -1 and has no dims to reduce."""
    if dim is None:
        return tuple(range(a.ndim))
    if _is_int(dim):
        dims = (pyval(dim),)
    elif isinstance(dim, (tuple, list)):
        if not builtins.all(_is_int(d) for d in dim):
            raise ThunderTypeError(f"{op}: dim must be an int or a tuple of ints, but got {dim!r}")
        if len(dim) == 0:
            return tuple(range(a.ndim)) if empty_is_all else ()
        dims = tuple(pyval(d) for d in dim)
    else:
        raise ThunderTypeError(
            f"{op}: dim must be an int, a tuple of ints or None, but got {type(dim).__name__} {dim!r}"
        )
    canonical = [canonicalize_dim(op, a.ndim, d) for d in dims]
    for d in canonical:
        if canonical.count(d) > 1:
            raise ThunderValueError(f"{op}: dim {d} appears multiple times in the list of dims {list(dims)}")
    if a.ndim == 0:
        return ()
    return tuple(sorted(canonical))


def keep_dims(out: TensorProxy, a: TensorProxy, dims: tuple[int, ...], keepdim: bool) -> TensorProxy:
    """``out`` (``a`` reduced over ``dims``) with the reduced dims put back as length 1 when ``keepdim``."""
    if not keepdim or a.ndim == 0:
        return out
    shape = tuple(1 if i in dims else n for i, n in enumerate(a.shape))
    kept = tuple(i for i in range(a.ndim) if i not in dims)
    return prims.broadcast_in_dim(out, shape, kept)


def _computation_dtype(d: torch.dtype) -> torch.dtype:
    return torch.float32 if dtypes.is_low_precision_dtype(d) else d


def _check_dtype_arg(op: str, dtype) -> None:
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise ThunderTypeError(f"{op}: dtype must be a torch.dtype or None, but got {dtype!r}")


def _accumulate(op: str, prim, a: TensorProxy, dims, keepdim: bool, dtype) -> TensorProxy:
    """sum/prod: integers and bools accumulate in int64 unless ``dtype`` is given."""
    _check_dtype_arg(op, dtype)
    if dtype is None:
        dtype = torch.int64 if dtypes.is_integer_dtype(a.dtype) else a.dtype
    out = prim(maybe_convert_to_dtype(a, _computation_dtype(dtype)), dims)
    return keep_dims(maybe_convert_to_dtype(out, dtype), a, dims, keepdim)


def _reduced_numel(a: TensorProxy, dims) -> int:
    return math.prod(a.shape[d] for d in dims)


# ----------------------------------------------------------------------------------------
# Sums, means and moments
# ----------------------------------------------------------------------------------------


@torchsymbol(torch.sum, method_name="sum")
def sum(input, dim=None, keepdim=False, *, dtype=None):
    """``torch.sum``: integers and bools sum to int64; an empty reduction is 0."""
    op = "ltorch.sum"
    _check_input(op, input)
    return _accumulate(op, prims.sum, input, reduction_dims(op, input, dim), keepdim, dtype)


@torchsymbol(method_name="sum_to_size", id="Tensor.sum_to_size", torch_impl=torch.Tensor.sum_to_size)
def sum_to_size(input, *size):
    """``Tensor.sum_to_size``: summed down to ``size``, which must broadcast to the input's shape (the
    input itself when it has that shape already, as in eager)."""
    op = "ltorch.sum_to_size"
    _check_input(op, input)
    if not size:
        raise ThunderTypeError('sum_to_size() missing 1 required positional arguments: "size"')
    size = tuple(pyval(n) for n in (size[0] if len(size) == 1 and isinstance(size[0], (tuple, list)) else size))
    lead = input.ndim - len(size)
    if lead < 0 or builtins.any(n != 1 and n != input.shape[lead + i] for i, n in enumerate(size)):
        raise ThunderValueError(f"{op}: size {{{', '.join(map(str, size))}}} is not expandable to size {{{', '.join(map(str, input.shape))}}}.")
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(size) if n == 1 and input.shape[lead + i] != 1)
    if not dims:
        return input
    return prims.reshape(prims.sum(input, dims), size)


@torchsymbol(torch.prod, method_name="prod")
def prod(input, dim=None, keepdim=False, *, dtype=None):
    """``torch.prod``: over one dim or all; integers and bools multiply in int64; an empty product is 1."""
    op = "ltorch.prod"
    _check_input(op, input)
    if dim is not None and not _is_int(dim):
        raise ThunderTypeError(f"{op}: dim must be an int or None (torch.prod reduces one dim), but got {dim!r}")
    return _accumulate(op, prims.prod, input, reduction_dims(op, input, dim), keepdim, dtype)


@torchsymbol(torch.mean, method_name="mean")
def mean(input, dim=None, keepdim=False, *, dtype=None):
    """``torch.mean``: needs a floating point or complex input (or ``dtype=``); an empty mean is NaN."""
    op = "ltorch.mean"
    _check_input(op, input)
    _check_dtype_arg(op, dtype)
    result_dtype = dtype if dtype is not None else input.dtype
    if not dtypes.is_inexact_dtype(result_dtype):
        raise ThunderTypeError(
            f"{op}: could not infer output dtype. Input dtype must be either a floating point or complex dtype. "
            f"Got: {result_dtype}. Convert the input with .float() or pass dtype=torch.float32"
        )
    dims = reduction_dims(op, input, dim)
    computation_dtype = _computation_dtype(result_dtype)
    total = prims.sum(maybe_convert_to_dtype(input, computation_dtype), dims)
    out = prims.div(total, float(_reduced_numel(input, dims)))
    return keep_dims(maybe_convert_to_dtype(out, result_dtype), input, dims, keepdim)


def _without_nans(a: TensorProxy) -> TensorProxy:
    if not dtypes.is_inexact_dtype(a.dtype):
        return a
    return prims.where(prims.isnan(a), 0, a)


@torchsymbol(torch.nansum, method_name="nansum")
def nansum(input, dim=None, keepdim=False, *, dtype=None):
    """``torch.nansum``: ``sum`` with NaNs counted as zero."""
    op = "ltorch.nansum"
    _check_input(op, input)
    _reject_complex_nan_reduction(op, input)
    dims = reduction_dims(op, input, dim)
    return _accumulate(op, prims.sum, _without_nans(input), dims, keepdim, dtype)


def _reject_complex_nan_reduction(op: str, input) -> None:
    if input.dtype.is_complex:
        raise ThunderTypeError(f"{op}: nansum does not support complex inputs (dtype {input.dtype})")


@torchsymbol(torch.nanmean, method_name="nanmean")
def nanmean(input, dim=None, keepdim=False, *, dtype=None):
    """``torch.nanmean``: the mean of the non-NaN elements (NaN where there are none)."""
    op = "ltorch.nanmean"
    _check_input(op, input)
    _reject_complex_nan_reduction(op, input)
    _check_dtype_arg(op, dtype)
    result_dtype = dtype if dtype is not None else input.dtype
    if not dtypes.is_inexact_dtype(result_dtype):
        raise ThunderTypeError(
            f"{op}: nanmean(): expected input to have floating point or complex dtype but got {result_dtype}; "
            "convert the input with .float() or pass dtype=torch.float32"
        )
    dims = reduction_dims(op, input, dim)
    a = maybe_convert_to_dtype(input, _computation_dtype(result_dtype))
    total = prims.sum(_without_nans(a), dims)
    count = prims.sum(prims.convert_element_type(prims.bitwise_not(prims.isnan(a)), a.dtype), dims)
    out = prims.div(total, count)
    return keep_dims(maybe_convert_to_dtype(out, result_dtype), input, dims, keepdim)


def _correction(op: str, dim, unbiased, correction):
    """Resolves the old ``unbiased`` and the new ``correction`` spellings (``var(a, True)`` included)."""
    if isinstance(dim, bool):  # torch.var(a, unbiased)
        if unbiased is not None:
            raise ThunderTypeError(f"{op}: got unbiased twice ({dim!r} positionally and {unbiased!r})")
        dim, unbiased = None, dim
    if unbiased is not None and correction is not None:
        raise ThunderTypeError(f"{op}: pass either unbiased or correction, not both")
    if unbiased is not None:
        if not isinstance(unbiased, bool):
            raise ThunderTypeError(f"{op}: unbiased must be a bool, but got {unbiased!r}")
        return dim, int(unbiased)
    if correction is None:
        return dim, 1
    correction = pyval(correction)
    if isinstance(correction, bool) or not isinstance(correction, (int, float)):
        raise ThunderTypeError(f"{op}: correction must be a number, but got {correction!r}")
    return dim, correction


def sqrt_of_square_sum(v):
    """``sqrt(v)`` for a sum of squares ``v`` (a variance, a squared 2-norm), differentiated as eager's std and
    norm backward do: zero where the result is zero. (sqrt's own derivative there is inf, and its product
    with the zero derivative of ``v`` NaN.) The inner ``where`` keeps the derivative finite there."""
    zero = prims.eq(v, 0)
    return prims.where(zero, 0, prims.sqrt(prims.where(zero, 1, v)))


def _moments(op: str, input, dim, unbiased, keepdim, correction, *, with_mean: bool, std: bool):
    _check_input(op, input)
    if not dtypes.is_inexact_dtype(input.dtype):
        raise ThunderTypeError(
            f"{op}: std and var only support floating point and complex dtypes, but input has dtype {input.dtype}; "
            "convert it with .float()"
        )
    dim, correction = _correction(op, dim, unbiased, correction)
    dims = reduction_dims(op, input, dim)
    a = maybe_convert_to_dtype(input, _computation_dtype(input.dtype))
    if with_mean:
        v, m = prims.var_mean(a, dims, correction=correction)
    else:
        v, m = prims.var(a, dims, correction=correction), None
    if std:
        v = sqrt_of_square_sum(v)
    v = keep_dims(maybe_convert_to_dtype(v, dtypes.corresponding_real_dtype(input.dtype)), input, dims, keepdim)
    if not with_mean:
        return v
    return v, keep_dims(maybe_convert_to_dtype(m, input.dtype), input, dims, keepdim)


@torchsymbol(torch.var, method_name="var")
def var(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``torch.var``: ``correction`` (default 1) or the older ``unbiased`` flag."""
    return _moments("ltorch.var", input, dim, unbiased, keepdim, correction, with_mean=False, std=False)


@torchsymbol(torch.std, method_name="std")
def std(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``torch.std``: the square root of ``var``."""
    return _moments("ltorch.std", input, dim, unbiased, keepdim, correction, with_mean=False, std=True)


@torchsymbol(torch.var_mean)
def var_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``torch.var_mean``: ``(var, mean)`` in one pass."""
    return _moments("ltorch.var_mean", input, dim, unbiased, keepdim, correction, with_mean=True, std=False)


@torchsymbol(torch.std_mean)
def std_mean(input, dim=None, unbiased=None, keepdim=False, *, correction=None):
    """``torch.std_mean``: ``(std, mean)``."""
    return _moments("ltorch.std_mean", input, dim, unbiased, keepdim, correction, with_mean=True, std=True)


# ----------------------------------------------------------------------------------------
# Extrema
# ----------------------------------------------------------------------------------------


def _check_nonempty(op: str, a: TensorProxy, dims, dim_given: bool) -> None:
    if a.numel() != 0:
        return
    if not dim_given:
        raise ThunderValueError(
            f"{op}(): Expected reduction dim to be specified for input.numel() == 0. Specify the reduction dim "
            "with the 'dim' argument."
        )
    for d in dims:
        if a.shape[d] == 0:
            raise ThunderValueError(
                f"{op}(): Expected reduction dim {d} to have non-zero size: the {op} of no elements is undefined"
            )


def _extremum(name: str, prim, input, dim, keepdim):
    op = f"ltorch.{name}"
    _check_input(op, input)
    dims = reduction_dims(op, input, dim)
    _check_nonempty(op, input, dims, dim is not None and dim != () and dim != [])
    if input.dtype.is_complex:
        raise ThunderTypeError(f"{op}: {name} is not supported for complex inputs (dtype {input.dtype})")
    return keep_dims(prim(input, dims), input, dims, keepdim)


@torchsymbol(torch.amax, method_name="amax")
def amax(input, dim=(), keepdim=False):
    """``torch.amax``: the maximum over ``dim`` (all dims by default); NaN propagates."""
    return _extremum("amax", prims.amax, input, dim, keepdim)


@torchsymbol(torch.amin, method_name="amin")
def amin(input, dim=(), keepdim=False):
    """``torch.amin``: the minimum over ``dim`` (all dims by default); NaN propagates."""
    return _extremum("amin", prims.amin, input, dim, keepdim)


def _arg_extremum(name: str, prim, input, dim, keepdim):
    op = f"ltorch.{name}"
    _check_input(op, input)
    if input.dtype is torch.bool or input.dtype.is_complex:
        kind = "bool" if input.dtype is torch.bool else "complex"
        raise ThunderTypeError(f"{op}(): does not support {kind} input (dtype {input.dtype})")
    if dim is None:
        if input.numel() == 0:
            raise ThunderValueError(f"{op}(): Expected reduction dim to be specified for input.numel() == 0; pass dim=")
        out = prim(prims.reshape(input, (input.numel(),)), 0) if input.ndim != 1 else prim(input, 0)
        if keepdim and input.ndim > 0:
            out = prims.broadcast_in_dim(out, (1,) * input.ndim, ())
        return out
    if not _is_int(dim):
        raise ThunderTypeError(f"{op}: dim must be an int or None, but got {dim!r}")
    dims = reduction_dims(op, input, dim)
    if input.ndim == 0:
        return prims.full((), 0, device=input.device, dtype=torch.int64)
    _check_nonempty(op, input, dims, True)
    return keep_dims(prim(input, dims[0]), input, dims, keepdim)


@torchsymbol(torch.argmax, method_name="argmax")
def argmax(input, dim=None, keepdim=False):
    """``torch.argmax``: the index of the first maximum (of the flattened input when ``dim`` is None)."""
    return _arg_extremum("argmax", prims.argmax, input, dim, keepdim)


@torchsymbol(torch.argmin, method_name="argmin")
def argmin(input, dim=None, keepdim=False):
    """``torch.argmin``: the index of the first minimum."""
    return _arg_extremum("argmin", prims.argmin, input, dim, keepdim)


def _max_min(name: str, value_prim, index_prim, binary, result_type, input, dim, keepdim, other):
    op = f"ltorch.{name}"
    if other is not None or is_tensor(dim):  # torch.max(a, b) is torch.maximum(a, b)
        b = other if other is not None else dim
        return binary(input, b)
    _check_input(op, input)
    if dim is None:
        return (max_all if name == "max" else min_all)(input)
    if not _is_int(dim):
        raise ThunderTypeError(f"{op}: dim must be an int, but got {type(dim).__name__} {dim!r}")
    values = _extremum(name, value_prim, input, dim, keepdim)  # checks the call as torch does
    # eager's indices of a bool input are those of its first True (max) or False (min); argmax refuses bool
    ranked = prims.convert_element_type(input, torch.uint8) if input.dtype is torch.bool else input
    indices = _arg_extremum("arg" + name, index_prim, ranked, dim, keepdim)
    if input.ndim > 0 and not input.dtype.is_complex and input.dtype is not torch.bool:
        # The values are the input at the indices, as eager's backward sees them: the gradient goes
        # to the index (the first extremum, or the first NaN), not shared among ties.
        d = canonicalize_dim(op, input.ndim, dim)
        kept = indices if keepdim else prims.broadcast_in_dim(
            indices, tuple(1 if i == d else n for i, n in enumerate(input.shape)), tuple(i for i in range(input.ndim) if i != d)
        )  # fmt: skip
        values = prims.take_along_axis(input, kept, d)
        values = values if keepdim else prims.squeeze(values, (d,))
    return result_type((values, indices))


def _max_min_all(name: str, prim):
    def meta(input):
        return _extremum(name, prim, input, None, False)

    meta.__name__ = f"{name}_all"
    sym = torchsymbol(id=f"torch.{name}_all", torch_impl=getattr(torch, name))(meta)

    @grad_rules.register(sym)
    def _evenly_distributed(g, out, a):
        """As eager: the gradient is shared among the elements equal to the result (or, for a NaN
        result, among the NaNs)."""
        result = prims.broadcast_in_dim(out, a.shape, ())
        mask = prims.eq(a, result)
        if a.dtype.is_floating_point:
            mask = prims.bitwise_or(mask, prims.bitwise_and(prims.ne(a, a), prims.ne(result, result)))
        count = prims.sum(prims.convert_element_type(mask, a.dtype), tuple(range(a.ndim)))
        share = prims.broadcast_in_dim(prims.div(g, count), a.shape, ())
        return (prims.where(mask, share, 0),)

    return sym


max_all = _max_min_all("max", prims.amax)
min_all = _max_min_all("min", prims.amin)


@torchsymbol(torch.max, method_name="max")
def max(input, dim=None, keepdim=False, *, other=None):
    """``torch.max``: the maximum of all elements; with ``dim``, ``(values, indices)``; with a tensor, ``maximum``."""
    return _max_min("max", prims.amax, prims.argmax, maximum, torch.return_types.max, input, dim, keepdim, other)


@torchsymbol(torch.min, method_name="min")
def min(input, dim=None, keepdim=False, *, other=None):
    """``torch.min``: the minimum of all elements; with ``dim``, ``(values, indices)``; with a tensor, ``minimum``."""
    return _max_min("min", prims.amin, prims.argmin, minimum, torch.return_types.min, input, dim, keepdim, other)



# Eager's kernel picks the elements (its order of ties and of NaNs, which count as largest); the
# indices are all ``topk`` takes from it. Integer outputs: nothing to differentiate.
@torchsymbol(id="torch.topk_kernel", torch_impl=torch.topk)
def topk_kernel(input, k, dim, largest, sorted):
    """``torch.topk`` on canonical arguments (k in range, dim non-negative): (values, indices)."""
    shape = list(input.shape)
    shape[dim] = k
    values = TensorProxy.like(input, shape=tuple(shape), requires_grad=False)
    return values, TensorProxy.like(input, shape=tuple(shape), dtype=torch.int64, requires_grad=False)


grad_rules.register(topk_kernel)(lambda g, out, input, k, dim, largest, sorted: (None,) * 5)


@torchsymbol(torch.topk, method_name="topk")
def topk(input, k, dim=-1, largest=True, sorted=True):
    """``torch.topk``: the ``k`` largest (``largest=False``: smallest) elements along ``dim`` and their
    indices. The indices are eager's kernel's; the values are the input at those indices, so the
    gradient goes to the chosen elements (a scatter of the cotangent), as in eager."""
    op = "ltorch.topk"
    _check_input(op, input)
    if not _is_int(k):
        raise ThunderTypeError(f"{op}: k must be an int, but got {type(k).__name__} {k!r}")
    k = pyval(k)
    d = canonicalize_dim(op, input.ndim, dim)
    n = input.shape[d] if input.ndim else 1
    if not 0 <= k <= n:
        raise ThunderValueError(f"{op}: selected index k out of range (k={k}, size of dim {d}: {n})")
    if input.ndim == 0:  # eager: the element and index 0, for k 0 or 1
        a = prims.reshape(input, (1,))
        values, indices = topk(a, 1, 0, largest, sorted)
        return torch.return_types.topk((prims.reshape(values, ()), prims.reshape(indices, ())))
    _, indices = topk_kernel(input, k, d, bool(pyval(largest)), bool(pyval(sorted)))
    return torch.return_types.topk((prims.take_along_axis(input, indices, d), indices))



def _sort_indices_impl(input, dim, descending, stable):
    return torch.sort(input, dim=dim, descending=descending, stable=stable).indices


# As for topk: eager's kernel orders the elements (ties, NaNs last ascending), and sort takes only
# the permutation from it.
@torchsymbol(id="torch.sort_indices", torch_impl=_sort_indices_impl)
def sort_indices(input, dim, descending, stable):
    """The indices ``torch.sort`` returns, on canonical arguments (dim non-negative)."""
    return TensorProxy.like(input, dtype=torch.int64, requires_grad=False)


grad_rules.register(sort_indices)(lambda g, out, input, dim, descending, stable: (None,) * 4)


def _sorted(op: str, input, dim, descending, stable):
    """(values, indices) of ``torch.sort``; values gathered at the indices, so gradients scatter back."""
    _check_input(op, input)
    if not _is_int(dim):
        raise ThunderTypeError(f"{op}: dim must be an int, but got {type(dim).__name__} {dim!r}")
    d = canonicalize_dim(op, input.ndim, dim)
    if input.dtype.is_complex and input.device.type == "cpu":  # eager's kernel has none
        raise ThunderRuntimeError(f"{op}: Sort does not support complex dtypes on CPU (got {input.dtype})")
    if input.ndim == 0:
        return prims.reshape(input, ()), prims.full((), 0, device=input.device, dtype=dtypes.int64)
    indices = sort_indices(input, d, bool(pyval(descending)), bool(pyval(stable)))
    return prims.take_along_axis(input, indices, d), indices


@torchsymbol(torch.sort, method_name="sort")
def sort(input, dim=-1, descending=False, *, stable=False):
    """``torch.sort``: the elements along ``dim`` in order, and where each came from."""
    return torch.return_types.sort(_sorted("ltorch.sort", input, dim, descending, stable))


@torchsymbol(torch.argsort, method_name="argsort")
def argsort(input, dim=-1, descending=False, *, stable=False):
    """``torch.argsort``: the indices that sort ``input`` along ``dim``."""
    return _sorted("ltorch.argsort", input, dim, descending, stable)[1]


def _histc_impl(input, bins=100, min=0, max=0):
    return torch.histc(input, bins=bins, min=min, max=max)


@torchsymbol(torch.histc, method_name="histc", torch_impl=_histc_impl)
def histc(input, bins=100, min=0, max=0):
    """``torch.histc``: counts of ``input``'s elements in ``bins`` equal-width bins over ``[min, max]``
    (the data's own range when both are 0), as floats of the input's dtype. Eager's kernel counts
    (the range comes from the data); the counts never require grad, as in eager."""
    op = "ltorch.histc"
    _check_input(op, input)
    if not input.dtype.is_floating_point:
        raise ThunderTypeError(f"{op}: \"histogram_cpu\" not implemented for '{input.dtype}'; pass a float tensor")
    bins, lo, hi = pyval(bins), pyval(min), pyval(max)
    if not _is_int(bins) or bins <= 0:
        raise ThunderValueError(f"{op}: bins must be > 0, but got {bins}")
    if lo > hi:
        raise ThunderValueError(f"{op}: max must be larger than min")
    return TensorProxy.like(input, shape=(bins,), requires_grad=False)


NO_GRAD_RESULTS.add(histc.id)  # counts never require grad, as in eager

# ----------------------------------------------------------------------------------------
# Logical reductions and counting
# ----------------------------------------------------------------------------------------


def _count(a: TensorProxy, dims, *, nonzero: bool) -> TensorProxy:
    zero = False if a.dtype is torch.bool else 0
    flags = prims.ne(a, zero) if nonzero else prims.eq(a, zero)
    return prims.sum(prims.convert_element_type(flags, torch.int64), dims)


def _any_all(name: str, input, dim, keepdim):
    op = f"ltorch.{name}"
    _check_input(op, input)
    dims = reduction_dims(op, input, dim, empty_is_all=False)
    # any: some element is nonzero; all: no element is zero
    count = _count(input, dims, nonzero=name == "any")
    out = prims.ne(count, 0) if name == "any" else prims.eq(count, 0)
    if input.dtype is torch.uint8:
        out = prims.convert_element_type(out, torch.uint8)
    return keep_dims(out, input, dims, keepdim)


@torchsymbol(torch.any, method_name="any")
def any(input, dim=None, keepdim=False):
    """``torch.any``: bool (uint8 for uint8 inputs); NaN counts as true; empty gives False."""
    return _any_all("any", input, dim, keepdim)


@torchsymbol(torch.all, method_name="all")
def all(input, dim=None, keepdim=False):
    """``torch.all``: bool (uint8 for uint8 inputs); empty gives True."""
    return _any_all("all", input, dim, keepdim)


@torchsymbol(torch.count_nonzero, method_name="count_nonzero")
def count_nonzero(input, dim=None):
    """``torch.count_nonzero``: an int64 count over ``dim`` (all dims by default)."""
    op = "ltorch.count_nonzero"
    _check_input(op, input)
    return _count(input, reduction_dims(op, input, dim), nonzero=True)


# ----------------------------------------------------------------------------------------
# logsumexp, scans and norms
# ----------------------------------------------------------------------------------------


def _float_input(a: TensorProxy) -> tuple[TensorProxy, torch.dtype]:
    """``a`` in its computation dtype, and the result dtype (integers become the default float)."""
    result = a.dtype if dtypes.is_inexact_dtype(a.dtype) else dtypes.default_dtype()
    return maybe_convert_to_dtype(a, _computation_dtype(result)), result


@torchsymbol(torch.logsumexp, method_name="logsumexp")
def logsumexp(input, dim, keepdim=False):
    """``torch.logsumexp``: ``log(sum(exp(a)))`` computed stably (the max is subtracted first)."""
    op = "ltorch.logsumexp"
    _check_input(op, input)
    dims = reduction_dims(op, input, dim)
    a, result_dtype = _float_input(input)
    if _reduced_numel(input, dims) == 0 or input.numel() == 0:
        out = prims.log(prims.sum(prims.exp(a), dims))
    else:
        m = prims.amax(a, dims)
        # an infinite max would give inf - inf = NaN: subtract 0 there instead
        m = prims.where(prims.isinf(m), 0.0, m)
        m_kept = keep_dims(m, a, dims, True)
        if m_kept.shape != a.shape:
            m_kept = prims.broadcast_in_dim(m_kept, a.shape, tuple(range(a.ndim)))
        out = prims.add(prims.log(prims.sum(prims.exp(prims.sub(a, m_kept)), dims)), m)
    return keep_dims(maybe_convert_to_dtype(out, result_dtype), input, dims, keepdim)


def _scan(name: str, prim, input, dim, dtype):
    op = f"ltorch.{name}"
    _check_input(op, input)
    _check_dtype_arg(op, dtype)
    if not _is_int(dim):
        raise ThunderTypeError(f"{op}: dim must be an int, but got {type(dim).__name__} {dim!r}")
    d = canonicalize_dim(op, input.ndim, pyval(dim))
    if dtype is None:
        dtype = torch.int64 if dtypes.is_integer_dtype(input.dtype) else input.dtype
    a = maybe_convert_to_dtype(input, _computation_dtype(dtype))
    if input.ndim == 0:
        out = prims.reshape(prim(prims.reshape(a, (1,)), 0), ())
    else:
        out = prim(a, d)
    return maybe_convert_to_dtype(out, dtype)


@torchsymbol(torch.cumsum, method_name="cumsum")
def cumsum(input, dim, *, dtype=None):
    """``torch.cumsum``: integers and bools accumulate in int64 unless ``dtype`` is given."""
    return _scan("cumsum", prims.cumsum, input, dim, dtype)


@torchsymbol(torch.cumprod, method_name="cumprod")
def cumprod(input, dim, *, dtype=None):
    """``torch.cumprod``: integers and bools accumulate in int64 unless ``dtype`` is given."""
    return _scan("cumprod", prims.cumprod, input, dim, dtype)


def _power_norm(a, p: float, dims):
    """``sum(a ** p) ** (1 / p)`` of ``a >= 0``, differentiated as eager's ``norm_backward``: zero where an
    element is zero (pow's derivative is inf there for p < 1; for p > 0 as eager's masked product, which is NaN
    where the norm is inf) and, for p > 0, where the norm is zero (the outer pow's is inf there)."""
    zero = prims.eq(a, 0)
    if p > 0:  # (a + 1) ** p * 0 at a zero: its derivative is 0 times the incoming one, as eager's masked_fill
        shifted = prims.add(a, prims.convert_element_type(zero, a.dtype))
        powered = prims.mul(prims.pow(shifted, p), prims.convert_element_type(prims.bitwise_not(zero), a.dtype))
    else:
        powered = prims.where(zero, float("inf"), prims.pow(prims.where(zero, 1, a), p))
    total = prims.sum(powered, dims)
    if p < 0:
        return prims.pow(total, 1.0 / p)
    none = prims.eq(total, 0)
    return prims.where(none, 0, prims.pow(prims.where(none, 1, total), 1.0 / p))


def _vector_norm(op: str, x, ord, dim, keepdim, dtype):
    _check_input(op, x)
    _check_dtype_arg(op, dtype)
    if not dtypes.is_inexact_dtype(x.dtype):
        raise ThunderTypeError(
            f"{op}: Expected a floating point or complex tensor as input. Got {x.dtype}; convert it with .float()"
        )
    ord = pyval(ord)
    if isinstance(ord, bool) or not isinstance(ord, (int, float)):
        raise ThunderTypeError(f"{op}: ord must be a number, but got {ord!r}")
    dims = reduction_dims(op, x, dim)
    result_dtype = dtypes.corresponding_real_dtype(dtype if dtype is not None else x.dtype)
    a = maybe_convert_to_dtype(x, dtype) if dtype is not None else x
    a = maybe_convert_to_dtype(a, _computation_dtype(a.dtype))
    a = prims.abs(a)
    if ord == float("inf") or ord == float("-inf"):
        if _reduced_numel(x, dims) == 0:
            raise ThunderValueError(f"{op}: Expected a non-empty tensor along the reduced dims for ord={ord}")
        # a NaN makes the norm NaN and, as in eager's norm_backward, the gradient of its reduction zero
        nan = prims.isnan(a)
        extreme = (prims.amax if ord > 0 else prims.amin)(prims.where(nan, 0, a), dims)
        out = prims.where(prims.gt(prims.sum(prims.convert_element_type(nan, a.dtype), dims), 0), float("nan"), extreme)
    elif ord == 0:
        out = prims.sum(prims.convert_element_type(prims.ne(a, 0), a.dtype), dims)
    elif ord == 1:
        out = prims.sum(a, dims)
    elif ord == 2:
        out = sqrt_of_square_sum(prims.sum(prims.mul(a, a), dims))
    else:
        out = _power_norm(a, float(ord), dims)
    return keep_dims(maybe_convert_to_dtype(out, result_dtype), x, dims, keepdim)


@torchsymbol(torch.linalg.vector_norm)
def vector_norm(x, ord=2, dim=None, keepdim=False, *, dtype=None):
    """``torch.linalg.vector_norm``: the ``ord``-norm over ``dim`` (all dims by default)."""
    return _vector_norm("ltorch.vector_norm", x, ord, dim, keepdim, dtype)


@torchsymbol(torch.norm, method_name="norm")
def norm(input, p="fro", dim=None, keepdim=False, out=None, dtype=None):
    """``torch.norm``: vector norms (``p`` a number, or "fro", which is the 2-norm over the given dims)."""
    op = "ltorch.norm"
    if out is not None:
        raise ThunderTypeError(f"{op}: out= is not supported inside a jitted function; assign the result instead")
    if p == "fro" or p is None:
        p = 2
    elif isinstance(p, str):  # "nuc" and the like: as eager, torch.linalg.matrix_norm over dim (default: all)
        dim = tuple(range(input.ndim)) if dim is None else dim
        return EAGER_OPS[torch.linalg.matrix_norm](input, p, dim, keepdim, dtype=dtype)
    return _vector_norm(op, input, p, dim, keepdim, dtype)
