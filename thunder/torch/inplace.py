"""In-place tensor methods that have no out-of-place twin in the tables: ``copy_``, ``zero_``,
``fill_`` (and ``torch.fill``), and the ``out=`` argument of every torch function. Each computes its new value
and writes it with ``prims.copy_``, so the mutation is visible to the caller exactly as in eager PyTorch.

Layer: language. Imports: core, torch.base, torch.factories.
"""

from __future__ import annotations

import torch

from thunder.core import dtypes, prims
from thunder.core import symbol as _symbol
from thunder.core.errors import ThunderRuntimeError, ThunderTypeError, ThunderValueError, UnsupportedOpError
from thunder.core.prims.base import is_differentiable
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.rules import grad_rules
from thunder.core.symbol import DONT_DCE, IN_PLACE, Symbol
from thunder.core.torch_state import grad_mode_on
from thunder.torch import base
from thunder.torch.base import is_number, is_tensor, torchsymbol
from thunder.torch.factories import full_like

__all__ = ["copy_", "zero_", "fill_", "fill"]

_INPLACE = (IN_PLACE, DONT_DCE)


def _fill_value(op: str, value):
    if is_tensor(value):
        if value.ndim != 0:
            raise ThunderValueError(
                f"{op}: fill_ only supports 0-dimension value tensor but got tensor with {value.ndim} dimensions."
            )
        return value
    if not is_number(value):
        raise ThunderTypeError(f"{op}: value must be a number or a 0-dim tensor, got {type(value).__name__}")
    return value


@torchsymbol(torch.fill, method_name="fill")
def fill(a, value):
    """``torch.fill``: a tensor like ``a`` filled with ``value``."""
    value = _fill_value("ltorch.fill", value)
    if is_tensor(value):
        return base.expand_to(base.maybe_convert_to_dtype(value, a.dtype), a.shape)
    return full_like(a, value)


@grad_rules.register(fill)
def _fill_vjp(g, out, a, value):
    """Eager's: ``a`` is reached with a zero gradient (zeros, not None), a tensor ``value`` gets the sum of ``g``."""
    if not is_differentiable(value):
        return (None, None)
    return (None, base.maybe_convert_to_dtype(prims.sum(g, tuple(range(g.ndim))), value.dtype))


@torchsymbol(method_name="copy_", tags=_INPLACE, torch_impl=torch.Tensor.copy_)
def copy_(a, src, non_blocking=False):
    """``Tensor.copy_``: writes ``src`` (broadcast and converted) into ``a``."""
    if not is_tensor(src):
        raise ThunderTypeError(f"ltorch.copy_: src must be a tensor, got {type(src).__name__}")
    base.broadcast_shapes("ltorch.copy_", a.shape, src.shape)
    if src is a:  # ``x.copy_(x)`` is an in-place op as any other (eager refuses it on a leaf that requires grad); a
        src = prims.clone(src)  # copy onto itself is none (``written_in_place``: ``dropout_`` in eval)
    return base.copy_(src, a)


@torchsymbol(method_name="fill_", tags=_INPLACE, torch_impl=torch.Tensor.fill_)
def fill_(a, value):
    """``Tensor.fill_``: every element of ``a`` becomes ``value``."""
    return base.copy_(fill(a, value), a)


@torchsymbol(torch.zero_, method_name="zero_", tags=_INPLACE, torch_impl=torch.Tensor.zero_)
def zero_(a):
    """``Tensor.zero_``: every element of ``a`` becomes zero."""
    return base.copy_(fill(a, 0), a)


def write_out(sym: Symbol, args: tuple, kwargs: dict, out):
    """``sym(*args, **kwargs, out=out)`` as eager runs it (``F.normalize(..., out=self._u)`` in spectral norm's
    power iteration): the result is computed, then written into ``out`` (a tensor, or a tuple of them for an op
    with several results), which is returned. Eager's refusals are kept: an argument that requires grad where
    grad is enabled, a result dtype that cannot be cast to ``out``'s, an argument that shares part of ``out``'s memory
    (checked when the computation runs); where eager would resize an ``out`` of another shape, this is an error."""
    name = sym.print_name
    _check_eager_takes_out(sym, args, kwargs, out)
    if grad_mode_on() and any(
        isinstance(t, TensorProxy) and t.requires_grad for t in tree_leaves((args, kwargs, out))
    ):
        raise ThunderRuntimeError(
            f"{name}(): functions with out=... arguments don't support automatic differentiation, but one of the "
            "arguments requires grad."
        )
    result = sym(*args, **kwargs)
    several = isinstance(result, (tuple, list))
    outs = out if isinstance(out, (tuple, list)) else (out,)
    results = result if several else (result,)
    if len(outs) != len(results) or not all(isinstance(o, TensorProxy) for o in outs):
        raise ThunderTypeError(
            f"{name}(): out= must be {f'a tuple of {len(results)} tensors' if several else 'a tensor'}, "
            f"got {type(out).__name__}"
        )
    sources = tuple(t for t in tree_leaves((args, kwargs)) if isinstance(t, TensorProxy))
    written = []
    for o, r in zip(outs, results):
        base.check_castable(f"{name}()", r.dtype, o.dtype)
        if r.device != o.device:
            raise ThunderRuntimeError(f"{name}(): expected the out tensor on {r.device}, but it is on {o.device}")
        if tuple(r.shape) != tuple(o.shape):
            raise UnsupportedOpError(  # (not eager's check: eager resizes ``out``)
                f"{name}(): the out tensor has shape {list(o.shape)} but the result has shape {list(r.shape)}; eager "
                "would resize it in place, which thunder does not: pass an out tensor of the result's shape, or use "
                "the returned tensor"
            )
        if sources:  # arguments that share memory are known at run time only
            prims.check_no_partial_overlap(o, sources)
        written.append(base.copy_(r, o))
    if not several:
        return written[0]
    kind = type(result)  # torch.max(..., out=) gives a torch.return_types.max_out
    return getattr(torch.return_types, f"{kind.__name__}_out", kind)(written)


def _check_eager_takes_out(sym: Symbol, args: tuple, kwargs: dict, out) -> None:
    """A torch function takes ``out=`` in some of its overloads only (``torch.sum(x, out=o)`` without a dim is a
    TypeError in eager): eager binds the call, on meta tensors of the arguments' shapes and dtypes, and its TypeError
    is raised (the program's own error: the call then runs eagerly, Note [A program that raises] in
    thunder.compiler)."""
    fn = base.symbol_to_torch.get(sym)
    if fn is None:
        return

    def meta(v):
        if isinstance(v, TensorProxy):
            shape = tuple(int(getattr(d, "value", d)) for d in v.shape)
            return torch.empty(shape, dtype=dtypes.to_torch_dtype(v.dtype), device="meta")
        return getattr(v, "value", v) if isinstance(v, Proxy) else v

    try:
        a, k, o = tree_map(meta, (args, kwargs, out))
        fn(*a, **k, out=o)
    except TypeError:
        raise
    except Exception:  # noqa: BLE001 - a value or shape eager rejects later is checked below, as before
        pass


_symbol.out_writer = write_out
