"""Reduction primitives: sum, prod, amax, amin, var, var_mean, argmax, argmin, cumsum, cumprod.

A reduction prim takes canonical ``dims`` (a tuple of distinct non-negative ints, possibly
empty) and never keeps the reduced dims: the torch language adds ``keepdim`` by
``broadcast_in_dim``. Reductions do no type promotion either: the output dtype is the input
dtype (argmax/argmin give int64; var gives the real dtype of its input). An empty ``dims``
reduces nothing (each element is its own group), unlike ``torch.sum(a, ())``, which reduces
every dim; the reference implementations take care of the difference.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import enum

import torch

from thunder.core import dtypes
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import check_tensor, make_prim
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import Symbol


class ReductionPrimIDs(enum.Enum):
    SUM = enum.auto()
    PROD = enum.auto()
    AMAX = enum.auto()
    AMIN = enum.auto()
    VAR = enum.auto()
    VAR_MEAN = enum.auto()
    ARGMAX = enum.auto()
    ARGMIN = enum.auto()
    CUMSUM = enum.auto()
    CUMPROD = enum.auto()


R = ReductionPrimIDs


def _check_dims(op: str, a: TensorProxy, dims) -> tuple[int, ...]:
    if not isinstance(dims, (tuple, list)) or not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
        raise ThunderTypeError(f"{op}: dims must be a tuple of ints, but got {dims!r}")
    dims = tuple(dims)
    for d in dims:
        if not 0 <= d < a.ndim:
            raise ThunderValueError(
                f"{op}: dim {d} is out of range for a tensor with {a.ndim} dims; prims take canonical (non-negative) "
                "dims, canonicalize them first"
            )
    if len(set(dims)) != len(dims):
        raise ThunderValueError(f"{op}: dims {dims} contain a repeated dim")
    return dims


def _reduced_shape(shape, dims) -> tuple[int, ...]:
    return tuple(n for i, n in enumerate(shape) if i not in dims)


def _reduction_meta(name: str, *, needs_elements: bool = False):
    op = f"prims.{name}"

    def meta(a, dims):
        check_tensor(op, "a", a)
        dims = _check_dims(op, a, dims)
        if needs_elements:
            for d in dims:
                if a.shape[d] == 0:
                    raise ThunderValueError(
                        f"{op}: Expected reduction dim {d} to have non-zero size ({name} of no elements has no "
                        "value); reduce a non-empty dim"
                    )
        return TensorProxy(shape=_reduced_shape(a.shape, dims), dtype=a.dtype, device=a.device)

    meta.__name__ = f"_{name}_meta"
    return meta


def _over_dims(fn):
    """A reference impl over several dims from a torch callable that takes one (or a tuple of) dims.

    Empty ``dims`` reduce a new trailing dim of length 1, so each element is its own group."""

    def impl(a, dims):
        dims = tuple(dims)
        if not dims:
            return fn(a.unsqueeze(-1), (a.ndim,))
        return fn(a, dims)

    return impl


def _sum_impl(a, dims):
    return torch.sum(a, dims, dtype=a.dtype)


def _prod_impl(a, dims):
    out = a
    for d in sorted(dims, reverse=True):
        out = torch.prod(out, d, dtype=a.dtype)
    return out


sum = make_prim(R.SUM, "sum", _reduction_meta("sum"), impl=_over_dims(_sum_impl))
prod = make_prim(R.PROD, "prod", _reduction_meta("prod"), impl=_over_dims(_prod_impl))
amax = make_prim(R.AMAX, "amax", _reduction_meta("amax", needs_elements=True), impl=_over_dims(torch.amax))
amin = make_prim(R.AMIN, "amin", _reduction_meta("amin", needs_elements=True), impl=_over_dims(torch.amin))


def _var_meta_common(op, a, dims, correction):
    check_tensor(op, "a", a)
    dims = _check_dims(op, a, dims)
    if not dtypes.is_inexact_dtype(a.dtype):
        raise ThunderTypeError(f"{op}: a has dtype {a.dtype}, but a floating point or complex dtype is required")
    if not isinstance(correction, (int, float)) or isinstance(correction, bool):
        raise ThunderTypeError(f"{op}: correction must be a number, but got {correction!r}")
    shape = _reduced_shape(a.shape, dims)
    return TensorProxy(shape=shape, dtype=dtypes.corresponding_real_dtype(a.dtype), device=a.device)


def _var_meta(a, dims, *, correction):
    return _var_meta_common("prims.var", a, dims, correction)


def _var_mean_meta(a, dims, *, correction):
    v = _var_meta_common("prims.var_mean", a, dims, correction)
    return v, TensorProxy.like(v, dtype=a.dtype)


def _var_impl(a, dims, *, correction):
    if not dims:
        return torch.var(a.unsqueeze(-1), -1, correction=correction)
    return torch.var(a, tuple(dims), correction=correction)


def _var_mean_impl(a, dims, *, correction):
    if not dims:
        return torch.var_mean(a.unsqueeze(-1), -1, correction=correction)
    return torch.var_mean(a, tuple(dims), correction=correction)


var = make_prim(R.VAR, "var", _var_meta, impl=_var_impl)
var_mean = make_prim(R.VAR_MEAN, "var_mean", _var_mean_meta, impl=_var_mean_impl)


def _arg_meta(name):
    op = f"prims.{name}"

    def meta(a, dim):
        check_tensor(op, "a", a)
        if dim is None:
            if a.numel() == 0:
                raise ThunderValueError(
                    f"{op}: Expected reduction dim to be specified for input.numel() == 0; pass a dim of non-zero size"
                )
            return TensorProxy(shape=(), dtype=torch.int64, device=a.device)
        (dim,) = _check_dims(op, a, (dim,))
        if a.shape[dim] == 0:
            raise ThunderValueError(f"{op}: Expected reduction dim {dim} to have non-zero size")
        return TensorProxy(shape=_reduced_shape(a.shape, (dim,)), dtype=torch.int64, device=a.device)

    meta.__name__ = f"_{name}_meta"
    return meta


argmax = make_prim(R.ARGMAX, "argmax", _arg_meta("argmax"), impl=torch.argmax)
argmin = make_prim(R.ARGMIN, "argmin", _arg_meta("argmin"), impl=torch.argmin)


def _scan_meta(name):
    op = f"prims.{name}"

    def meta(a, dim):
        check_tensor(op, "a", a)
        (dim,) = _check_dims(op, a, (dim,))
        return TensorProxy.like(a, requires_grad=False)

    meta.__name__ = f"_{name}_meta"
    return meta


def _cumsum_impl(a, dim):
    return torch.cumsum(a, dim, dtype=a.dtype)


def _cumprod_impl(a, dim):
    return torch.cumprod(a, dim, dtype=a.dtype)


cumsum = make_prim(R.CUMSUM, "cumsum", _scan_meta("cumsum"), impl=_cumsum_impl)
cumprod = make_prim(R.CUMPROD, "cumprod", _scan_meta("cumprod"), impl=_cumprod_impl)


__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]
