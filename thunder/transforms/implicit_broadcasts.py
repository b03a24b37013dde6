"""Lets the elementwise ops of backward traces broadcast their operands themselves.

Prims take operands of one shape, so a gradient rule that combines a small tensor with a full-size
one expands it first: the backward of a norm's ``weight * x``, of a mean, of a scaled residual holds
``w.reshape((1, 1, 32)).expand((2, 8, 32))`` before a ``torch.mul(g, t)``. Torch broadcasts inside the
op: ``torch.mul(g, w)`` computes the same values (add, sub, mul and true division are exact per
element, whatever the strides) without the two view calls, a third of the cost. A Llama-style
decoder's backward holds about ten of these per layer.

This pass folds a ``broadcast_in_dim`` into the ops that use it when every use is such an op whose
other operand has the full shape: each becomes the torch language's op (``torch.mul``) on the
unexpanded tensor, its decomposition the broadcast and the prim as before, so an executor that does
not run the torch op still runs the prims. A broadcast that inserts dims in the middle (``(2, 8)`` to
``(2, 8, 32)``) keeps a reshape to ``(2, 8, 1)``. Backward traces only, as for ``remove_identities``:
no program sees their intermediate tensors.

Layer: transforms. Imports: core.
"""

from __future__ import annotations

import torch

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderValueError
from thunder.core.prims.shape import broadcast_shapes
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol
from thunder.core.symbol_lookup import symbol_for
from thunder.core.symbolic import all_static
from thunder.core.trace import TraceCtx, from_trace, timed_pass, tracectx

__all__ = ["fold_broadcasts"]

# The prims whose torch op broadcasts and gives, per element, exactly the prim's value.
_BROADCASTING = {prims.add: torch.add, prims.sub: torch.sub, prims.mul: torch.mul, prims.div: torch.div}


def _unexpanded_shape(bsym: BoundSymbol) -> tuple[int, ...] | None:
    """The shape that its uses take instead of the result of the ``broadcast_in_dim`` ``bsym``: its operand's
    where torch broadcasting (which aligns shapes on the right) expands that as ``bsym`` does, else the
    operand's with ones where dims are inserted (a reshape); None if it cannot say."""
    a, shape, dims = bsym.args
    if not all_static(a.shape, shape) or list(dims) != sorted(set(dims)):
        return None
    view = [1] * len(shape)
    for i, d in enumerate(dims):
        view[d] = a.shape[i]
    view = tuple(view)
    return tuple(a.shape) if tuple(a.shape) == view[len(view) - a.ndim :] else view


def _takes_it_unexpanded(use: BoundSymbol, name: str, shapes: dict[str, tuple], args: set[str]) -> bool:
    """Whether ``use``, a use of the expanded ``name``, is a broadcasting binary op of two tensors
    of one inexact dtype whose result keeps its shape (its rank too: ``()`` and ``(4,)`` broadcast to
    ``(4,)``, not ``(1, 4)``) when its operands have ``shapes`` (by name).
    An add or sub with a trace argument is left alone: it may be the add of a cotangent that
    ``accept_absent_cotangents`` turns into a choice."""
    if use.sym not in _BROADCASTING or use.kwargs or len(use.args) != 2:
        return False
    a, b = use.args
    out = use.output
    if not (isinstance(a, TensorProxy) and isinstance(b, TensorProxy) and isinstance(out, TensorProxy)):
        return False
    if not (a.dtype == b.dtype == out.dtype and dtypes.is_inexact_dtype(a.dtype)) or not all_static(out.shape):
        return False
    if use.sym is not prims.mul and (a.name in args or b.name in args):
        return False
    try:
        broadcast = broadcast_shapes("fold_broadcasts", *(shapes.get(x.name, tuple(x.shape)) for x in (a, b)))
    except ThunderValueError:
        return False
    return tuple(broadcast) == tuple(out.shape)


@timed_pass("Fold broadcasts")
def fold_broadcasts(trace: TraceCtx) -> TraceCtx:
    """``trace`` (a backward trace) with each foldable ``broadcast_in_dim`` left to the ops using it."""
    uses: dict[str, list[BoundSymbol]] = {}
    for bsym in trace.bound_symbols:
        for name in {a.name for a in bsym.flat_proxy_args}:
            uses.setdefault(name, []).append(bsym)
    args = {a.name for a in trace.args if isinstance(a, TensorProxy)}
    shapes: dict[str, tuple] = {}  # folded broadcast's output name -> the shape its uses get instead
    for bsym in trace.bound_symbols:
        if bsym.sym is not prims.broadcast_in_dim or not isinstance(bsym.output, TensorProxy):
            continue
        name, unexpanded = bsym.output.name, _unexpanded_shape(bsym)
        if unexpanded is None or not uses.get(name):
            continue
        shapes[name] = unexpanded
        if not all(_takes_it_unexpanded(u, name, shapes, args) for u in uses[name]):
            del shapes[name]
    if not shapes or any(symbol_for(fn) is None for fn in _BROADCASTING.values()):
        return trace  # (the torch language registers its symbols when imported)
    new = from_trace(trace)
    operand: dict[str, TensorProxy] = {}  # expanded name -> the tensor its uses take
    with tracectx(new):
        for bsym in trace.bound_symbols:
            if bsym.sym is prims.broadcast_in_dim and bsym.output.name in shapes:
                a = bsym.args[0]
                view = shapes[bsym.output.name]
                if view == tuple(a.shape):
                    operand[bsym.output.name] = a
                else:
                    reshaped = TensorProxy.like(a, shape=view, requires_grad=False)
                    new.bound_symbols.append(prims.reshape.bind(a, view, output=reshaped, source=bsym.source))
                    operand[bsym.output.name] = reshaped
                continue
            if any(isinstance(x, TensorProxy) and x.name in operand for x in bsym.args):
                bsym = _broadcasting_op(bsym, operand)
            new.bound_symbols.append(bsym)
    return new


def _broadcasting_op(use: BoundSymbol, operand: dict[str, TensorProxy]) -> BoundSymbol:
    """The torch language's op for the prim ``use`` on the unexpanded operands (``operand``: by the name
    of the expanded one); its decomposition: a broadcast of each of them (to a fresh name) and ``use``."""
    subsymbols, args, swap = [], [], {}
    for x in use.args:
        small = operand.get(x.name)
        if small is None:
            args.append(x)
            continue
        shape = tuple(x.shape)
        dims = tuple(range(len(shape) - small.ndim, len(shape)))
        swap[x.name] = TensorProxy.like(x, requires_grad=False)
        subsymbols.append(prims.broadcast_in_dim.bind(small, shape, dims, output=swap[x.name], source=use.source))
        args.append(small)
    sym = symbol_for(_BROADCASTING[use.sym])
    return use.from_bsym(sym=sym, args=tuple(args), subsymbols=(*subsymbols, use.rename(swap)))
