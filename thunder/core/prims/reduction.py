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
import functools
import math

import torch

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import (
    check_real_grad,
    check_tensor,
    conj,
    is_differentiable,
    make_prim,
    zero_grad_rule,
    zeros_like,
)
from thunder.core.proxies import TensorProxy
from thunder.core.rules import grad_rules
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

    Empty ``dims`` reduce a new trailing dim of length 1, so each element is its own group. A
    partial of module functions, not a closure: torchcompile_background's workers unpickle it."""
    return functools.partial(_reduce_over_dims, fn)


def _reduce_over_dims(fn, a, dims):
    dims = tuple(dims)
    if not dims:
        return fn(a.unsqueeze(-1), (a.ndim,))
    return fn(a, dims)


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


# --- gradients (Note [VJP rules] in thunder.core.rules) ---
# A reduction's cotangent has the reduced shape; ``_expand`` broadcasts it back over the
# reduced dims. Products take the conjugate of their factors for complex inputs (torch's
# convention: the cotangent times the conjugate derivative, and the derivative is a product).


def _kept_dims(a, dims) -> tuple[int, ...]:
    return tuple(i for i in range(a.ndim) if i not in dims)


def _expand(x, a, dims):
    """``x`` (of ``a``'s shape with ``dims`` reduced away) broadcast back to ``a``'s shape."""
    return prims.broadcast_in_dim(x, tuple(a.shape), _kept_dims(a, dims))


def _numel_of(a, dims) -> int:
    return math.prod(a.shape[d] for d in dims)


def _reverse_cumsum(x, dim):
    return prims.flip(cumsum(prims.flip(x, (dim,)), dim), (dim,))


@grad_rules.register(sum)
def _sum_grad(g, out, a, dims):
    return (_expand(g, a, dims) if is_differentiable(a) else None, None)


def _exclusive_cumprod(x, dim):
    """The product of the elements strictly before each one along ``dim``."""
    config = [(0, 0, 0)] * x.ndim
    config[dim] = (1, -1, 0)  # prepend a 1, drop the last element
    return cumprod(prims.pad(x, 1, config), dim)


@grad_rules.register(prod)
def _prod_grad(g, out, a, dims):
    """torch's rule (``prod_backward``): where ``a`` has no zero at all, ``g * (out / a)`` (so an inf
    element gets ``inf / inf``, NaN); otherwise ``g`` times the product of the other elements of the
    group (``_prod_others``), and for a product of all elements with more than one zero, zeros."""
    if not is_differentiable(a):
        return (None, None)
    if not dims:
        return (g, None)  # every element is its own group
    if a.numel() == 0:
        return (zeros_like(a), None)
    everywhere = tuple(range(a.ndim))
    zeros = sum(prims.convert_element_type(prims.eq(a, 0), torch.int64), everywhere)
    no_zero = prims.broadcast_in_dim(prims.eq(zeros, 0), tuple(a.shape), ())
    ratio = prims.mul(_expand(g, a, dims), conj(prims.div(_expand(out, a, dims), a)))
    others = _prod_others(g, a, dims)
    if len(dims) == a.ndim:
        several = prims.broadcast_in_dim(prims.gt(zeros, 1), tuple(a.shape), ())
        others = prims.where(several, zeros_like(a), others)
    return (prims.where(no_zero, ratio, others), None)


def _prod_others(g, a, dims):
    """``g`` times the product of the other elements of the group, from exclusive cumulative products in
    both directions (torch's ``prod_safe_zeros_backward``): no division, so zeros are exact."""
    kept = _kept_dims(a, dims)
    perm = kept + tuple(dims)
    kept_shape = tuple(a.shape[d] for d in kept)
    n = _numel_of(a, dims)
    rows = prims.reshape(prims.transpose(conj(a), perm), (*kept_shape, n))
    last = len(kept_shape)
    before = _exclusive_cumprod(rows, last)
    after = prims.flip(_exclusive_cumprod(prims.flip(rows, (last,)), last), (last,))
    grad_rows = prims.mul(prims.mul(before, after), prims.broadcast_in_dim(g, (*kept_shape, n), tuple(range(last))))
    grad = prims.reshape(grad_rows, tuple(a.shape[p] for p in perm))
    inverse = tuple(perm.index(i) for i in range(a.ndim))
    return prims.transpose(grad, inverse)


def _register_extremum(sym: Symbol) -> None:
    """torch's rule: the cotangent is shared evenly among the elements equal to the extremum."""
    op = sym.print_name

    def rule(g, out, a, dims):
        if not is_differentiable(a):
            return (None, None)
        check_real_grad(op, a)
        # as torch: a group whose extremum is NaN matches no element, and 0 / 0 makes its gradient NaN
        is_extremum = prims.convert_element_type(prims.eq(a, _expand(out, a, dims)), a.dtype)
        count = sum(is_extremum, dims)
        return (prims.mul(_expand(prims.div(g, count), a, dims), is_extremum), None)

    rule.__name__ = rule.__qualname__ = f"_{sym.name}_grad"
    grad_rules.register(sym)(rule)


_register_extremum(amax)
_register_extremum(amin)
grad_rules.register(argmax, argmin)(zero_grad_rule)


def _var_part(g, a, dims, correction):
    """d var / d a: ``2 (a - mean) / (N - correction)``, times the (real) cotangent."""
    n = _numel_of(a, dims)
    mean = _expand(prims.div(sum(a, dims), n), a, dims)
    g = prims.convert_element_type(g, a.dtype) if g.dtype != a.dtype else g
    # Divided by the (possibly symbolic) count as a tensor op: ``2.0 / n`` with a symbolic ``n`` would
    # be a plain float (float's own division runs first), silently fixed to this trace's size; a
    # zero count divides to inf as in torch.
    scaled = prims.div(prims.mul(prims.sub(a, mean), 2.0), n - correction)
    return prims.mul(_expand(g, a, dims), scaled)


@grad_rules.register(var)
def _var_grad(g, out, a, dims, *, correction):
    return (_var_part(g, a, dims, correction), None)


@grad_rules.register(var_mean)
def _var_mean_grad(g, out, a, dims, *, correction):
    g_var, g_mean = g
    mean_part = _expand(prims.div(g_mean, _numel_of(a, dims)), a, dims)
    return (prims.add(_var_part(g_var, a, dims, correction), mean_part), None)


@grad_rules.register(cumsum)
def _cumsum_grad(g, out, a, dim):
    return (_reverse_cumsum(g, dim) if is_differentiable(a) else None, None)


@grad_rules.register(cumprod)
def _cumprod_grad(g, out, a, dim):
    """``grad_i = sum_{k >= i} g_k prod_{j <= k, j != i} a_j``, exact with zeros: before the first
    zero it is ``reverse_cumsum(g * out)_i / a_i`` (no zero to divide by); at the first zero, the
    cumulative product with that element replaced by 1 gives the products; after it, 0."""
    if not is_differentiable(a):
        return (None, None)
    if a.shape[dim] == 1:
        return (g, None)  # out is a: its cotangent as it is (torch's rule too, even at inf and NaN)
    a, out = conj(a), conj(out)
    is_zero = prims.eq(a, 0)
    zeros_so_far = cumsum(prims.convert_element_type(is_zero, torch.int64), dim)
    before = prims.eq(zeros_so_far, 0)
    first = prims.bitwise_and(is_zero, prims.eq(zeros_so_far, 1))
    g_before = prims.div(_reverse_cumsum(prims.mul(g, out), dim), prims.where(before, a, 1))
    g_first = _reverse_cumsum(prims.mul(g, cumprod(prims.where(first, 1, a), dim)), dim)
    return (prims.where(before, g_before, prims.where(first, g_first, 0)), None)
