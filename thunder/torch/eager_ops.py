"""Torch functions recorded as one op each and run by torch itself (Note [Eager ops]).

Note [Eager ops]
A torch function that the torch language has no decomposition for, listed in ``EAGER_OPS``, is
recorded as one opaque symbol (``ltorch.cross``) that the torch executor runs by calling the
function, as eager does: the values are eager's own. Its meta is the same function run on fake
tensors with the proxies' metadata (``thunder.torch.fake``), so the shapes, dtypes and argument
errors are eager's too. Refused with ``UnsupportedOpError``, never guessed: a call whose output
shape depends on the values (the fake run cannot know it), a result that aliases an input (a view:
writes through it would have to reach the input), and ``out=``.

Gradients: the symbol's VJP rule records ``<op>_vjp(g, *args, **kwargs)``, which runs the function
again under torch's autograd in the backward and returns the gradients of its positional tensor
arguments (recomputed from the saved inputs, not saved from the forward). A tensor that needs a
gradient passed by keyword or inside a list makes the call not differentiable here, and the
computation runs under torch's autograd instead (Note [VJP rules]), which is eager's own.

A decomposition into prims beats an entry here where an executor can fuse it or a better rule
needs it; an entry is the way to have an op run, exactly, before that.

Layer: language. Imports: core, torch.base, torch.factories, torch.fake.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.overrides import resolve_name

from thunder.core.errors import UnsupportedOpError
from thunder.core.prims.shape import broadcast_shapes
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.rules import grad_rules
from thunder.core.symbol import DONT_DCE, MAY_RAISE, RANDOM, UNFUSIBLE, Symbol
from thunder.core.symbolic import all_static, is_symbolic
from thunder.core.tracectx import current_source_location
from thunder.core.transforms.autodiff import NotDifferentiable
from thunder.torch.base import torchsymbol
from thunder.torch.factories import check_generator
from thunder.torch.fake import run_on_fake

__all__ = ["EAGER_OPS", "declare_table", "eager_fallback", "eager_op"]


def _where() -> str:
    loc = current_source_location()
    return f" (called at {loc})" if loc is not None else ""


def _differentiable(x: Any) -> bool:
    return isinstance(x, (TensorProxy, torch.Tensor)) and (x.dtype.is_floating_point or x.dtype.is_complex)


def _proxy_of(t: Any, shape: tuple | None = None) -> Any:
    """A proxy for a fake result (of ``shape``, symbolic sizes included, where given); one that torch says needs no
    grad (``P`` of ``linalg.lu``) never will."""
    if not isinstance(t, torch.Tensor):
        return t
    proxy = TensorProxy(shape=t.shape if shape is None else shape, dtype=t.dtype, device=t.device)
    if not t.requires_grad and torch.is_grad_enabled():
        proxy.never_requires_grad = True
    return proxy


def _fake_meta(fn: Callable, name: str) -> Callable:
    def meta(*args, **kwargs):
        check_generator(name, kwargs.get("generator"))
        shaped = _with_symbolic_sizes(fn, name, args, kwargs)
        if shaped is not None:
            return shaped
        try:
            out, fake_args, fake_kwargs = run_on_fake(fn, args, kwargs, grad=True)
        except (torch._subclasses.fake_tensor.DynamicOutputShapeException,
                torch._subclasses.fake_tensor.DataDependentOutputException) as e:  # fmt: skip
            if fn in _SHAPES_WITHOUT_VALUES:
                return _SHAPES_WITHOUT_VALUES[fn](*args, **kwargs)
            raise UnsupportedOpError(
                f"{name}'s output depends on the values of its inputs ({e}){_where()}; thunder does not record it "
                "yet. Call it outside the jitted function."
            ) from e
        except torch._subclasses.fake_tensor.UnsupportedOperatorException as e:
            raise UnsupportedOpError(
                f"{name} has no meta kernel for these arguments ({e}){_where()}. Call it outside the jitted function."
            ) from e
        inputs = [t for t in tree_leaves((fake_args, fake_kwargs)) if isinstance(t, torch.Tensor)]
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor) and any(torch._C._is_alias_of(t, i) for i in inputs):
                raise UnsupportedOpError(
                    f"{name} returns a view of its input here{_where()}, which thunder does not record as an opaque "
                    "op. Call it outside the jitted function, or .clone() its result there."
                )
        return tree_map(_proxy_of, out)

    meta.__name__ = name
    return meta


# Note [Eager ops of symbolic sizes]
# The fake run takes plain sizes: a symbolic size given to it is pinned, so an eager op in a program traced with
# symbolic sizes made the trace hold for one size only, and a loop over lengths recompiled every step (a rotary
# embedding's ``torch.outer(torch.arange(T).float(), inv_freq)``: one compile per token). The ops whose result's
# shape follows from their inputs' shapes by a rule that holds for every size (elementwise ops: the broadcast of
# their tensors' shapes; ops that keep their first tensor's shape: cumulative ops, ``tril``, ``flip``, ``softmax``;
# ``outer``) run the fake kernel on the sizes' values without relying on them, and the result gets the rule's
# symbolic shape, checked against the kernel's. The kernel's argument checks that read sizes are left to the real
# call (the op runs as torch's function, which raises where eager's does); anything else pins, as before.
def _broadcast(name: str, tensors: list) -> tuple:
    return broadcast_shapes(name, *(tuple(t.shape) for t in tensors))


def _first_shape(name: str, tensors: list) -> tuple:
    return tuple(tensors[0].shape)


def _outer_shape(name: str, tensors: list) -> tuple | None:
    a, b = tensors
    return (a.shape[0], b.shape[0]) if a.ndim == 1 and b.ndim == 1 else None


_ELEMENTWISE = (
    "deg2rad rad2deg fmax fmin frac logaddexp logaddexp2 hypot ldexp xlogy heaviside copysign nextafter gcd lcm "
    "float_power logit sinc i0 nan_to_num signbit sgn angle isposinf isneginf isreal isclose polar complex clamp_min "
    "clamp_max igamma igammac rsub mvlgamma polygamma celu selu positive special.entr special.erfcx special.i0e "
    "special.i1 special.i1e special.ndtr special.ndtri special.log_ndtr special.xlog1py special.zeta "
    "special.polygamma special.multigammaln special.logit special.sinc special.round special.airy_ai special.bessel_j0 "
    "special.bessel_j1 special.bessel_y0 special.bessel_y1 special.modified_bessel_i0 special.modified_bessel_i1 "
    "special.modified_bessel_k0 special.modified_bessel_k1 special.scaled_modified_bessel_k0 "
    "special.scaled_modified_bessel_k1 special.spherical_bessel_j0 special.chebyshev_polynomial_t "
    "special.chebyshev_polynomial_u special.chebyshev_polynomial_v special.chebyshev_polynomial_w "
    "special.hermite_polynomial_h special.hermite_polynomial_he special.laguerre_polynomial_l "
    "special.legendre_polynomial_p special.shifted_chebyshev_polynomial_t special.shifted_chebyshev_polynomial_u "
    "special.shifted_chebyshev_polynomial_v special.shifted_chebyshev_polynomial_w nn.functional.hardshrink "
    "nn.functional.softshrink nn.functional.tanhshrink nn.functional.threshold nn.functional.logsigmoid "
    "nn.functional.softsign"
)
_KEEPS_FIRST_SHAPE = (
    "cumprod logcumsumexp tril triu roll flip fliplr flipud special.log_softmax special.softmax index_fill index_copy "
    "index_reduce masked_scatter"
)


def _resolve(path: str) -> Callable | None:
    obj: Any = torch
    for part in path.split("."):
        obj = getattr(obj, part, None)
    return obj


_SHAPE_RULES: dict[Callable, Callable] = {
    **{f: _broadcast for f in map(_resolve, _ELEMENTWISE.split()) if f is not None},
    **{f: _first_shape for f in map(_resolve, _KEEPS_FIRST_SHAPE.split()) if f is not None},
    torch.outer: _outer_shape,
    torch.ger: _outer_shape,
}


def _with_symbolic_sizes(fn: Callable, name: str, args: tuple, kwargs: dict) -> TensorProxy | None:
    """The result's proxy with symbolic sizes (Note [Eager ops of symbolic sizes]), or None where the op has no rule,
    no input of a symbolic size, or the rule does not give the kernel's shape."""
    rule = _SHAPE_RULES.get(fn)
    tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, TensorProxy)]
    if rule is None or not tensors or all_static(*(t.shape for t in tensors)):
        return None
    try:
        out, fake_args, fake_kwargs = run_on_fake(fn, args, kwargs, grad=True, pinned=False)
    except Exception:  # noqa: BLE001 - the pinned run that follows raises it, with its message
        return None
    inputs = [t for t in tree_leaves((fake_args, fake_kwargs)) if isinstance(t, torch.Tensor)]
    if not isinstance(out, torch.Tensor) or any(torch._C._is_alias_of(out, i) for i in inputs):
        return None
    shape = rule(name, tensors)
    if shape is None or tuple(d.value if is_symbolic(d) else d for d in shape) != tuple(out.shape):
        return None
    return _proxy_of(out, shape)


def _ctc_loss_meta(log_probs, targets, input_lengths, target_lengths, blank=0, reduction=1, zero_infinity=False):
    """``torch.ctc_loss`` reads tensor lengths' values (``.tolist()``), which a fake run cannot; its output's
    shape does not depend on them: one loss a sample (``reduction=0``, batched) or a number."""
    batched = reduction == 0 and log_probs.ndim == 3
    return TensorProxy(shape=(log_probs.shape[1],) if batched else (), dtype=log_probs.dtype, device=log_probs.device)


def _istft_meta(input, n_fft, hop_length=None, win_length=None, window=None, center=True, normalized=False,
                onesided=None, length=None, return_complex=False):  # fmt: skip
    """``torch.istft`` checks the window's overlap-add (the NOLA condition) on its values; its output's shape follows
    from the frames, the hop and ``center`` (or is ``length``), its dtype from ``return_complex``."""
    hop = n_fft // 4 if hop_length is None else hop_length
    if length is None:
        length = n_fft + hop * (input.shape[-1] - 1) - (2 * (n_fft // 2) if center else 0)
    dtype = input.dtype if return_complex else input.dtype.to_real()
    return TensorProxy(shape=(*input.shape[:-2], length), dtype=dtype, device=input.device)


def _cov_meta(input, *, correction=1, fweights=None, aweights=None):
    """``torch.cov`` checks the degrees of freedom on the weights' values (it warns, and clamps them, where they are
    not positive); its output is one variance for one variable (a vector, or one row), else variables by variables,
    of the input's dtype promoted with ``aweights``', a floating one."""
    dtype = input.dtype if aweights is None else torch.promote_types(input.dtype, aweights.dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        dtype = torch.get_default_dtype()
    n = input.shape[0] if input.ndim == 2 else 1
    return TensorProxy(shape=(n, n) if n != 1 else (), dtype=dtype, device=input.device)


def _corrcoef_meta(input):
    """``torch.corrcoef``: ``cov(input)`` normalised."""
    return _cov_meta(input)


#: Eager ops whose fake run reads a value (Note [Eager ops]) but whose output's metadata does not
#: depend on it: the function that gives the output's proxy instead.
_SHAPES_WITHOUT_VALUES: dict[Callable, Callable] = {
    torch.ctc_loss: _ctc_loss_meta, torch.istft: _istft_meta, torch.cov: _cov_meta, torch.corrcoef: _corrcoef_meta,
}


def _pairs(out, g):
    """(output, cotangent) for each tensor output, by position: a None cotangent (an output nothing
    used, or one with no gradient) keeps its place, which flattening would drop."""
    if isinstance(out, (tuple, list)):
        cots = g if isinstance(g, (tuple, list)) else [None] * len(out)
        for o, c in zip(out, cots):
            yield from _pairs(o, c)
    elif isinstance(out, torch.Tensor):
        yield out, g


def _vjp_impl(fn: Callable) -> Callable:
    """``fn``'s VJP at run time: the gradients of the positional tensor arguments that ``wanted``
    marks (those that required grad when traced: torch refuses others, a ``target`` say)."""

    def vjp(g, *args, wanted: tuple[bool, ...], **kwargs):
        inputs = [a.detach().requires_grad_(True) if w else a for a, w in zip(args, wanted)]
        with torch.enable_grad():
            out = fn(*inputs, **kwargs)
        pairs = [
            (o, c) for o, c in _pairs(out, g) if o.requires_grad and isinstance(c, torch.Tensor)
        ]
        wanted = [a for a in inputs if isinstance(a, torch.Tensor) and a.requires_grad]
        grads = list(torch.autograd.grad([o for o, _ in pairs], wanted, [c for _, c in pairs], allow_unused=True)) if pairs else [None] * len(wanted)
        found = iter(grads)
        result = []
        for a in inputs:
            if isinstance(a, torch.Tensor) and a.requires_grad:
                grad = next(found)
                result.append(torch.zeros_like(a) if grad is None else grad)
            else:
                result.append(None)
        return tuple(result)

    return vjp


def _vjp_symbol(fn: Callable, name: str) -> Symbol:
    def meta(g, *args, wanted: tuple[bool, ...], **kwargs):
        return tuple(TensorProxy.like(a) if w else None for a, w in zip(args, wanted))

    meta.__name__ = f"{name}_vjp"
    impl = _vjp_impl(fn)
    sym = Symbol(
        name=meta.__name__, meta=meta, id=f"torch.{meta.__name__}", python_impl=impl, tags=frozenset({UNFUSIBLE})
    )
    from thunder.torch.base import symbol_to_torch

    symbol_to_torch[sym] = impl
    return sym


def eager_op(
    fn: Callable, *, method_name: str | None = None, differentiable: bool = True, random: bool = False, name: str = ""
) -> Symbol:
    """Declares ``fn`` an eager op (Note [Eager ops]); ``method_name``: its ``Tensor`` method too.

    A ``random`` op draws from torch's global generator: it is never merged, dropped or fused, and
    has no VJP rule (recomputing it in the backward would draw again), so a gradient through it is
    torch autograd's. ``name``: the symbol's name when ``fn`` is not a torch function."""
    torch_fns = () if name else (fn,)  # a named op is a helper of another symbol: no torch function maps to it
    path = f"torch.{name}" if name else resolve_name(fn) or f"torch.{fn.__name__}"
    name = name or path.removeprefix("torch.").removeprefix("Tensor.").replace(".", "_")
    # MAY_RAISE: eager raises on some values (cholesky of a matrix that is not positive-definite), kept when unused
    tags = (MAY_RAISE, RANDOM, DONT_DCE) if random else (MAY_RAISE,)
    sym = torchsymbol(*torch_fns, method_name=method_name, id=path, tags=tags, torch_impl=fn)(_fake_meta(fn, name))
    ALL_EAGER_SYMBOLS.append(sym)
    if differentiable and not random:
        vjp = _vjp_symbol(fn, name)
        ALL_EAGER_SYMBOLS.append(vjp)

        def rule(g, out, *args, **kwargs):
            if any(_differentiable(t) and t.requires_grad for a in args if isinstance(a, (list, tuple)) for t in tree_leaves(a)):
                raise NotDifferentiable(f"{name} takes a list of tensors that require grad")
            wanted = tuple(_differentiable(a) and bool(getattr(a, "requires_grad", False)) for a in args)
            return vjp(g, *args, wanted=wanted, **kwargs)

        grad_rules.register(sym)(rule)
    return sym


# torch function -> its Tensor method (or None), one line each. Not here: random ops (recorded as
# opaque ops they would draw from the generator in another order than eager's), ops that return
# views, ops whose output shape depends on the values.
_TABLE: tuple[tuple[Callable, str | None], ...] = (
    (torch.clamp_min, "clamp_min"),
    (torch.clamp_max, "clamp_max"),
    (torch.addmv, "addmv"),
    (torch.addbmm, "addbmm"),
    (torch.addr, "addr"),
    (torch.dot, "dot"),
    (torch.vdot, "vdot"),
    (torch.block_diag, None),
    (torch.cartesian_prod, None),
    (torch.cdist, None),
    (torch.cross, "cross"),
    (torch.linalg.cross, None),
    (torch.cummax, "cummax"),
    (torch.cummin, "cummin"),
    (torch.deg2rad, "deg2rad"),
    (torch.rad2deg, "rad2deg"),
    (torch.diff, "diff"),
    (torch.diag, "diag"),
    (torch.diag_embed, "diag_embed"),
    (torch.diagonal_scatter, "diagonal_scatter"),
    (torch.fmax, "fmax"),
    (torch.fmin, "fmin"),
    (torch.frac, "frac"),
    (torch.frexp, "frexp"),
    (torch.outer, "outer"),
    (torch.ger, "ger"),
    (torch.inner, "inner"),
    (torch.kron, "kron"),
    (torch.trace, "trace"),
    (torch.tril_indices, None),
    (torch.triu_indices, None),
    (torch.vander, None),
    (torch.logcumsumexp, "logcumsumexp"),
    (torch.cumprod, "cumprod"),
    (torch.logaddexp, "logaddexp"),
    (torch.logaddexp2, "logaddexp2"),
    (torch.hypot, "hypot"),
    (torch.ldexp, "ldexp"),
    (torch.xlogy, "xlogy"),
    (torch.heaviside, "heaviside"),
    (torch.copysign, "copysign"),
    (torch.nextafter, "nextafter"),
    (torch.gcd, "gcd"),
    (torch.lcm, "lcm"),
    (torch.float_power, "float_power"),
    (torch.logit, "logit"),
    (torch.sinc, "sinc"),
    (torch.i0, "i0"),
    (torch.mvlgamma, "mvlgamma"),
    (torch.polygamma, None),  # its method takes (n), the function (n, input): declare_table
    (torch.nan_to_num, "nan_to_num"),
    (torch.renorm, "renorm"),
    (torch.histc, "histc"),
    (torch.bucketize, None),
    (torch.searchsorted, None),
    (torch.isin, None),
    (torch.narrow_copy, "narrow_copy"),
    (torch.diagonal_copy, None),
    (torch.permute_copy, None),
    (torch.t_copy, None),
    (torch.transpose_copy, None),
    (torch.unsqueeze_copy, None),
    (torch.squeeze_copy, None),
    (torch.expand_copy, None),
    (torch.view_copy, None),
    (torch.unfold_copy, None),
    (torch.select_copy, None),
    (torch.slice_copy, None),
    (torch.alias_copy, None),
    (torch.detach_copy, None),
    (torch.index_reduce, "index_reduce"),
    (torch.index_fill, "index_fill"),
    (torch.index_copy, "index_copy"),
    (torch.masked_scatter, "masked_scatter"),
    (torch.put, "put"),
    (torch.take, "take"),
    (torch.take_along_dim, "take_along_dim"),
    (torch.select_scatter, "select_scatter"),
    (torch.slice_scatter, "slice_scatter"),
    (torch.rot90, "rot90"),
    (torch.roll, "roll"),
    (torch.flip, "flip"),
    (torch.fliplr, "fliplr"),
    (torch.flipud, "flipud"),
    (torch.tril, "tril"),
    (torch.triu, "triu"),
    (torch.aminmax, "aminmax"),
    (torch.nanmean, "nanmean"),
    (torch.nansum, "nansum"),
    (torch.logdet, "logdet"),
    (torch.det, "det"),
    (torch.slogdet, "slogdet"),
    (torch.cholesky, "cholesky"),
    (torch.cholesky_solve, "cholesky_solve"),
    (torch.cholesky_inverse, "cholesky_inverse"),
    (torch.inverse, "inverse"),
    (torch.pinverse, "pinverse"),
    (torch.trapezoid, None),
    (torch.trapz, None),
    (torch.cumulative_trapezoid, None),
    (torch.linalg.cholesky, None),
    (torch.linalg.cholesky_ex, None),
    (torch.linalg.det, None),
    (torch.linalg.slogdet, None),
    (torch.linalg.inv, None),
    (torch.linalg.inv_ex, None),
    (torch.linalg.solve, None),
    (torch.linalg.solve_ex, None),
    (torch.linalg.solve_triangular, None),
    (torch.linalg.lu_factor, None),
    (torch.linalg.lu_factor_ex, None),
    (torch.linalg.lu, None),
    (torch.linalg.lu_solve, None),
    (torch.linalg.ldl_factor, None),
    (torch.linalg.ldl_factor_ex, None),
    (torch.linalg.ldl_solve, None),
    (torch.linalg.qr, None),
    (torch.linalg.eigh, None),
    (torch.linalg.eigvalsh, None),
    (torch.linalg.svd, None),
    (torch.linalg.svdvals, None),
    (torch.linalg.pinv, None),
    (torch.linalg.matrix_power, None),
    (torch.linalg.matrix_exp, None),
    (torch.linalg.multi_dot, None),
    (torch.linalg.householder_product, None),
    (torch.linalg.tensorinv, None),
    (torch.linalg.tensorsolve, None),
    (torch.linalg.vander, None),
    (torch.linalg.vecdot, None),
    (torch.linalg.cond, None),
    (torch.linalg.matrix_rank, None),
    (torch.linalg.lstsq, None),
    (torch.qr, "qr"),
    (torch.svd, "svd"),
    (torch.geqrf, "geqrf"),
    (torch.ormqr, "ormqr"),
    (torch.triangular_solve, "triangular_solve"),
    (torch.lu_unpack, None),
    (torch.lu_solve, "lu_solve"),
    (torch.kthvalue, "kthvalue"),
    (torch.nanmedian, "nanmedian"),
    (torch.median, "median"),
    (torch.mode, "mode"),
    (torch.msort, "msort"),
    (torch.corrcoef, "corrcoef"),
    (torch.cov, "cov"),
    (torch.histogram, "histogram"),
    (torch.signbit, "signbit"),
    (torch.positive, None),
    (torch.float_power, "float_power"),
    (torch.special.entr, None),
    (torch.special.erfcx, None),
    (torch.special.i0e, None),
    (torch.special.i1, None),
    (torch.special.i1e, None),
    (torch.special.ndtr, None),
    (torch.special.ndtri, None),
    (torch.special.log_ndtr, None),
    (torch.special.xlog1py, None),
    (torch.special.zeta, None),
    (torch.special.polygamma, None),
    (torch.special.multigammaln, None),
    (torch.special.log_softmax, None),
    (torch.special.softmax, None),
    (torch.special.logit, None),
    (torch.special.sinc, None),
    (torch.special.round, None),
    (torch.special.airy_ai, None),
    (torch.special.bessel_j0, None),
    (torch.special.bessel_j1, None),
    (torch.special.bessel_y0, None),
    (torch.special.bessel_y1, None),
    (torch.special.modified_bessel_i0, None),
    (torch.special.modified_bessel_i1, None),
    (torch.special.modified_bessel_k0, None),
    (torch.special.modified_bessel_k1, None),
    (torch.special.scaled_modified_bessel_k0, None),
    (torch.special.scaled_modified_bessel_k1, None),
    (torch.special.spherical_bessel_j0, None),
    (torch.special.chebyshev_polynomial_t, None),
    (torch.special.chebyshev_polynomial_u, None),
    (torch.special.chebyshev_polynomial_v, None),
    (torch.special.chebyshev_polynomial_w, None),
    (torch.special.hermite_polynomial_h, None),
    (torch.special.hermite_polynomial_he, None),
    (torch.special.laguerre_polynomial_l, None),
    (torch.special.legendre_polynomial_p, None),
    (torch.special.shifted_chebyshev_polynomial_t, None),
    (torch.special.shifted_chebyshev_polynomial_u, None),
    (torch.special.shifted_chebyshev_polynomial_v, None),
    (torch.special.shifted_chebyshev_polynomial_w, None),
    (torch.fft.fft, None),
    (torch.fft.ifft, None),
    (torch.fft.fft2, None),
    (torch.fft.ifft2, None),
    (torch.fft.fftn, None),
    (torch.fft.ifftn, None),
    (torch.fft.rfft, None),
    (torch.fft.irfft, None),
    (torch.fft.rfft2, None),
    (torch.fft.irfft2, None),
    (torch.fft.rfftn, None),
    (torch.fft.irfftn, None),
    (torch.fft.hfft, None),
    (torch.fft.ihfft, None),
    (torch.fft.hfft2, None),
    (torch.fft.ihfft2, None),
    (torch.fft.hfftn, None),
    (torch.fft.ihfftn, None),
    (torch.fft.fftshift, None),
    (torch.fft.ifftshift, None),
    (torch.nn.functional.glu, None),
    (torch.nn.functional.prelu, None),
    (torch.nn.functional.hardshrink, None),
    (torch.nn.functional.softshrink, None),
    (torch.nn.functional.tanhshrink, None),
    (torch.nn.functional.threshold, None),
    (torch.nn.functional.logsigmoid, None),
    (torch.nn.functional.softsign, None),
    (torch.nn.functional.pdist, None),
    (torch.nn.functional.pairwise_distance, None),
    (torch.nn.functional.cosine_similarity, None),
    (torch.nn.functional.pixel_shuffle, None),
    (torch.nn.functional.pixel_unshuffle, None),
    (torch.nn.functional.channel_shuffle, None),
    (torch.nn.functional.fold, None),
    (torch.nn.functional.unfold, None),
    (torch.igamma, "igamma"),
    (torch.igammac, "igammac"),
    (torch.dist, "dist"),
    (torch.sgn, "sgn"),
    (torch.rsub, None),
    (torch.angle, "angle"),
    (torch.isposinf, "isposinf"),
    (torch.isneginf, "isneginf"),
    (torch.isreal, "isreal"),
    (torch.isclose, "isclose"),
    (torch.polar, None),
    (torch.complex, None),
    (torch.conj_physical, "conj_physical"),
    (torch.column_stack, None),
    (torch.dstack, None),
    (torch.combinations, None),
    (torch.logspace, None),
    (torch.matrix_exp, "matrix_exp"),
    (torch.quantile, "quantile"),
    (torch.nanquantile, "nanquantile"),
    (torch.gradient, None),
    (torch.stft, "stft"),
    (torch.istft, "istft"),
    (torch.hann_window, None),
    (torch.hamming_window, None),
    (torch.blackman_window, None),
    (torch.bartlett_window, None),
    (torch.kaiser_window, None),
    (torch.diagflat, "diagflat"),
    (torch.scatter_reduce, "scatter_reduce"),
    (torch.segment_reduce, None),
    (torch.tensordot, None),
    (torch.constant_pad_nd, None),
    (torch.celu, None),
    (torch.selu, None),
    (torch.bilinear, None),
    (torch.native_layer_norm, None),
    (torch.native_group_norm, None),
    (torch.margin_ranking_loss, None),
    (torch.triplet_margin_loss, None),
    (torch.cosine_embedding_loss, None),
    (torch.hinge_embedding_loss, None),
    (torch.poisson_nll_loss, None),
    (torch.kl_div, None),
    (torch.ctc_loss, None),
    (torch._C._nn.soft_margin_loss, None),
    (torch._C._nn.multilabel_margin_loss, None),
    (torch._C._nn.multi_margin_loss, None),
    (torch._C._nn.binary_cross_entropy, None),
    (torch._C._nn.fractional_max_pool2d, None),
    (torch._C._nn.fractional_max_pool3d, None),
    (torch.grid_sampler, None),
    (torch.affine_grid_generator, None),
    (torch.grid_sampler_2d, None),
    (torch.grid_sampler_3d, None),
    (torch.nonzero_static, "nonzero_static"),
    (torch.linalg.eig, None),
    (torch.linalg.eigvals, None),
    (torch.linalg.norm, None),
    (torch.linalg.matrix_norm, None),
    (torch.linalg.vector_norm, None),
    (torch.split_with_sizes_copy, None),
    (torch._unsafe_masked_index, None),
    (torch._unsafe_masked_index_put_accumulate, None),
    (torch.empty_strided, None),
    (torch.empty_permuted, None),
    (torch.Tensor.new_empty_strided, "new_empty_strided"),
    (torch._lu_with_info, None),
    (torch.ops.aten._softmax_backward_data, None),
    (torch.ops.aten._upsample_bilinear2d_aa, None),
    (torch.ops.aten._safe_softmax.default, None),
    (torch.ops.aten.max_pool2d_with_indices_backward.default, None),
    (torch.ops.aten.native_dropout_backward.default, None),
    (torch.nn.functional.local_response_norm, None),
    (torch.nn.functional.normalize, None),
    (torch.nn.functional.huber_loss, None),
    (torch.nn.functional.smooth_l1_loss, None),
    (torch.nn.functional.one_hot, None),
    (torch.unbind_copy, None),
    (torch.hash_tensor, "hash_tensor"),
    (torch._chunk_cat, None),
    (torch.histogramdd, None),
    (torch.fake_quantize_per_tensor_affine, None),
    (torch.fake_quantize_per_channel_affine, None),
    (torch._fake_quantize_learnable_per_tensor_affine, None),
    (torch._fake_quantize_learnable_per_channel_affine, None),
)


#: Every eager-op symbol, also the helpers other symbols call: ``thunder.torch`` exports them by name.
ALL_EAGER_SYMBOLS: list[Symbol] = []

#: torch function -> its eager-op symbol (Note [Eager ops]), filled by ``declare_table``.
EAGER_OPS: dict[Callable, Symbol] = {}


def declare_table() -> None:
    """Declares the table's ops that the torch language does not have already: called once every
    family of the language is declared (a decomposition wins over an opaque op)."""
    from thunder.torch.base import torch_to_thunder_map

    for fn, method in _TABLE:
        if fn in torch_to_thunder_map:
            continue
        if method is not None and getattr(torch.Tensor, method, None) in torch_to_thunder_map:
            method = None
        EAGER_OPS[fn] = eager_op(fn, method_name=method)
    _declare_polygamma_method(torch_to_thunder_map)


def _declare_polygamma_method(torch_to_thunder_map: dict) -> None:
    """``x.polygamma(n)`` is ``torch.polygamma(n, x)``: the method's tensor is the function's second argument; its
    in-place twin ``x.polygamma_(n)`` computes that and copies it into ``x``."""
    from thunder.torch.base import make_inplace

    polygamma = EAGER_OPS[torch.polygamma]

    def polygamma_method(a, n):
        return polygamma(n, a)

    method = torchsymbol(method_name="polygamma", id="torch.Tensor.polygamma", torch_impl=torch.Tensor.polygamma)(
        polygamma_method
    )
    torch_to_thunder_map[torch.Tensor.polygamma] = method
    torch_to_thunder_map[torch.Tensor.polygamma_] = make_inplace(method, method_name="polygamma_")
    lu_with_info = EAGER_OPS[torch._lu_with_info]

    def lu(a, pivot=True, get_infos=False):
        """``Tensor.lu`` (deprecated in eager, which still runs it) as its Python code: ``torch._lu_with_info``."""
        factors, pivots, infos = lu_with_info(a, pivot=pivot, check_errors=not get_infos)
        return (factors, pivots, infos) if get_infos else (factors, pivots)

    torch_to_thunder_map[torch.Tensor.lu] = torchsymbol(method_name="lu", id="torch.Tensor.lu", torch_impl=torch.Tensor.lu)(lu)


def eager_fallback(fn: Callable, name: str) -> Symbol:
    """``fn`` as an eager op named ``name``, which the torch language's own symbol for ``fn`` calls for
    the arguments its decomposition does not cover (``round(x, decimals=2)``)."""

    def call(*args, **kwargs):
        return fn(*args, **kwargs)

    return eager_op(call, name=name)
