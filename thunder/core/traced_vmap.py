"""``torch.vmap`` called inside a jitted function.

Note [torch.vmap in a trace]
``torch.vmap(f, in_dims, out_dims)(*args)`` runs ``f`` once, on each mapped argument with its mapped dimension
hidden (a tensor of shape ``(N, *e)`` is seen as one of shape ``e``), and torch's batching rules run each op on all
``N`` elements at once. Traced, that is the same two steps: ``f`` is traced once on *element* proxies (shape ``e``)
into a scratch scope, so it sees the shapes, ``ndim`` and Python values vmap shows it, and then each op it recorded
is batched: a prim with a batched operand is replayed on the batched values (``(N, *e)``, the batch dimension
first) by its rule in ``thunder.core.rules.batching_rules``, a torch-language op without a rule by its
decomposition, one level down, and an op that reads no batched value is recorded again as it was. Each rule is
exact for its prim (an elementwise prim on operands of shape ``e`` computes each element from the same element of
each operand, so on ``(N, *e)`` it computes every element at once; an unbatched operand is broadcast along the
batch dimension; a reshape, transpose, slice or broadcast of each element is the same op with the batch dimension
kept in front; ``take`` from an unbatched tensor at batched positions is one ``take`` at all of them; a reduction
of each element is the same reduction one dimension further along; a ``matmul`` of same-rank operands has the batch
dimension as one more batch dimension of both), so the result is vmap's. A prim without a rule (a scan, an index
reduction, a gather from a batched tensor, an in-place update, a random draw, anywhere in ``f``) is refused with the op and the line of ``f`` that made it. A Python decision on
a batched value (``if idx > 2:``, ``.item()``) is refused as vmap refuses it: the element has no value while
tracing. Each output is returned with its batch dimension at ``out_dims``; one that does not depend on a mapped
argument is expanded along it, as vmap expands it. An argument that is a pytree (a dict of stacked parameters, as
``torch.func.stack_module_state`` makes them) is mapped leaf by leaf, by one in_dim or by a pytree of them, as vmap
maps it.

Note [Type promotion under vmap]
Type promotion ranks a 0-d tensor below a tensor with dimensions, and vmap's batching rules do not all promote a
batched element as the 0-d tensor it is to ``f`` (``torch.where`` promotes the batched tensor, which has the batch
dimension): ``where(a > b, a, b.double())`` of a mapped ``(5, 3)`` float32 and a mapped ``(5,)`` float64 is float64
in eager, where ``f``'s own ops on the elements would make float32. So a torch-language op whose operands have more
than one dtype is batched only where the dtype it promotes them to is the same whichever of its 0-d tensors are
taken to have dimensions (a batched element has them in torch's batching rules, an outer vmap's element too);
otherwise it is refused. The mask functions' ops mix no dtypes, or mix them where every choice gives one dtype
(indexing a bool mask by int64 indices).

Nested vmaps (transformers' ``_vmap_expansion_sdpa`` maps the batch, head, query and key indices of a mask function
with four) need nothing more: the inner vmap runs while the outer traces ``f``'s elements, and records its batched
prims into the outer's scratch scope, which the outer then batches in turn.

A torch-language op that has a gradient rule of its own (``clamp``, ``relu``, ``rounded_div``) is batched through
its decomposition, whose gradient may differ from eager's at some values: with grad mode on and a floating result
it is refused. Under ``torch.autocast`` an op that autocast would cast is refused (the element trace is not cast).

Layer: tracing. Imports: core.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.utils._pytree as torch_pytree
from torch._prims_common import ELEMENTWISE_TYPE_PROMOTION_KIND, elementwise_dtypes

from thunder.core import prims
from thunder.core.errors import UnsupportedOpError
from thunder.core.interpreter.execution import call as interpreter_call
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.prims.elementwise import ElementwisePrimIDs
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_flatten, tree_map, tree_unflatten
from thunder.core.rules import autocast_rules, batching_rules, grad_rules
from thunder.core.symbol import IN_PLACE, RANDOM, BoundSymbol, mutates
from thunder.core.tracectx import get_tracectx
from thunder.core.user_code import source_location

__all__ = ["vmap_impl"]

_DEFAULT_PROMOTION = ELEMENTWISE_TYPE_PROMOTION_KIND.DEFAULT


class _Refused(Exception):
    """An op of ``f`` that cannot be batched: ``bsym`` and why (turned into the user's error by ``vmap_impl``)."""

    def __init__(self, bsym: BoundSymbol, why: str):
        super().__init__(why)
        self.bsym, self.why = bsym, why


def _elementwise(replay: _Replay, bsym: BoundSymbol, *args, **kwargs):
    """An elementwise prim: its tensor operands all have the element shape; unbatched ones are broadcast."""
    shape = next(replay.batched[a.name].shape for a in bsym.flat_proxy_args if a.name in replay.batched)

    def batch(x):
        b = replay.batched.get(x.name) if isinstance(x, TensorProxy) else None
        if b is not None:
            return b
        x = replay.value(x)
        return prims.broadcast_in_dim(x, shape, tuple(range(1, x.ndim + 1))) if isinstance(x, TensorProxy) else x

    return bsym.sym(*(batch(a) for a in args), **{k: batch(v) for k, v in kwargs.items()})


def _broadcast_in_dim(replay: _Replay, bsym: BoundSymbol, a, shape, broadcast_dimensions):
    return prims.broadcast_in_dim(
        replay.batched[a.name], (replay.size, *shape), (0, *(d + 1 for d in broadcast_dimensions))
    )


def _reshape(replay: _Replay, bsym: BoundSymbol, a, shape):
    return prims.reshape(replay.batched[a.name], (replay.size, *shape))


def _transpose(replay: _Replay, bsym: BoundSymbol, a, permutation):
    return prims.transpose(replay.batched[a.name], (0, *(p + 1 for p in permutation)))


def _slice(replay: _Replay, bsym: BoundSymbol, a, start_indices, end_indices, strides=None):
    strides = (1,) * a.ndim if strides is None else tuple(strides)
    b = replay.batched[a.name]
    return prims.slice_prim(b, (0, *start_indices), (replay.size, *end_indices), (1, *strides))


def _squeeze(replay: _Replay, bsym: BoundSymbol, a, dims):
    return prims.squeeze(replay.batched[a.name], tuple(d % a.ndim + 1 for d in dims))


def _take(replay: _Replay, bsym: BoundSymbol, a, index, dim):
    """``take`` from an unbatched tensor at batched positions: one ``take`` at all of them, the batch dimension (which
    lands at ``dim``) moved to the front."""
    if a.name in replay.batched or index.name not in replay.batched or a.ndim == 0:
        raise _Refused(bsym, "it reads a batched tensor at positions (a gather per element)")
    a, index, n = replay.value(a), replay.batched[index.name], replay.size
    k = index.shape[1]
    dim = dim % a.ndim
    taken = prims.take(a, prims.reshape(index, (n * k,)), dim)
    split = prims.reshape(taken, (*a.shape[:dim], n, k, *a.shape[dim + 1 :]))
    if dim == 0:
        return split
    return prims.transpose(split, (dim, *range(dim), *range(dim + 1, split.ndim)))


def _matmul(replay: _Replay, bsym: BoundSymbol, a, b):
    """``matmul`` of same-rank operands: the batch dimension is one more batch dimension of both (an unbatched operand
    is broadcast along it)."""

    def batch(x):
        if x.name in replay.batched:
            return replay.batched[x.name]
        x = replay.value(x)
        return prims.broadcast_in_dim(x, (replay.size, *x.shape), tuple(range(1, x.ndim + 1)))

    return prims.matmul(batch(a), batch(b))


def _reduction(replay: _Replay, bsym: BoundSymbol, a, dims, **kwargs):
    """A reduction over ``dims`` of each element: the same reduction over those dims, one further along."""
    return bsym.sym(replay.batched[a.name], tuple(d + 1 for d in dims), **kwargs)


batching_rules.register(*(p for p in prims.all_prims.values() if isinstance(p.id, ElementwisePrimIDs)))(_elementwise)
batching_rules.register(prims.matmul)(_matmul)
batching_rules.register(prims.sum, prims.prod, prims.amax, prims.amin, prims.var)(_reduction)
batching_rules.register(prims.broadcast_in_dim)(_broadcast_in_dim)
batching_rules.register(prims.reshape)(_reshape)
batching_rules.register(prims.transpose)(_transpose)
batching_rules.register(prims.slice_prim)(_slice)
batching_rules.register(prims.squeeze)(_squeeze)
batching_rules.register(prims.take)(_take)


class _Replay:
    """The batched replay of one vmap level: element proxy names -> batched proxies, and the unbatched values of
    ``f`` recorded again (old name -> new proxy)."""

    def __init__(self, size: Any, batched: dict[str, TensorProxy]):
        self.size, self.batched, self.renamed = size, batched, {}

    def value(self, x: Any) -> Any:
        return self.renamed.get(x.name, x) if isinstance(x, Proxy) else x

    def run(self, bsym: BoundSymbol) -> None:
        batched = self.batched
        _refuse_effects(bsym)
        if not any(a.name in batched for a in bsym.flat_proxy_args):
            out = bsym.sym(*tree_map(self.value, bsym.args), **tree_map(self.value, bsym.kwargs))
            self._name_outputs(bsym, out, self.renamed)
            return
        rule = batching_rules.get(bsym.sym)
        if rule is not None:
            self._name_outputs(bsym, rule(self, bsym, *bsym.args, **bsym.kwargs), batched)
            return
        ins = {a.name for a in bsym.flat_proxy_args}
        outs = bsym.flat_proxy_outs
        if not bsym.subsymbols and outs and all(o.name in ins for o in outs):  # returns its input (``t.to(t.device)``)
            return
        if bsym.sym.is_prim or not bsym.subsymbols:
            raise _Refused(bsym, "thunder has no batching rule for it")
        if not _promotes_alike(bsym):
            raise _Refused(bsym, "the dtype it promotes its operands to depends on which of them vmap batches")
        floating = any(o.dtype.is_floating_point or o.dtype.is_complex for o in outs if isinstance(o, TensorProxy))
        if floating and torch.is_grad_enabled() and grad_rules.get(bsym.sym) is not None:
            raise _Refused(bsym, "its gradient is its own rule's, which its batched decomposition would not follow")
        if bsym.sym in autocast_rules and any(torch.is_autocast_enabled(d) for d in ("cpu", "cuda")):
            raise _Refused(bsym, "torch.autocast would cast its inputs, which the batched decomposition would not")
        for sub in bsym.subsymbols:
            self.run(sub)
        for o in outs:  # every output is made by the decomposition or is an input
            if o.name not in batched and o.name not in self.renamed and o.name not in ins:
                raise _Refused(bsym, "its decomposition does not make its result")

    @staticmethod
    def _name_outputs(bsym: BoundSymbol, out: Any, into: dict) -> None:
        old = [o for o in tree_flatten(bsym.output)[0] if isinstance(o, Proxy)]
        new = [o for o in tree_flatten(out)[0] if isinstance(o, Proxy)]
        into.update((o.name, n) for o, n in zip(old, new))


def _promotes_alike(bsym: BoundSymbol) -> bool:
    """Whether torch's type promotion of ``bsym``'s operands gives one dtype however many of its 0-d tensors are
    batched (Note [Type promotion under vmap])."""
    tensors = [a for a in bsym.flat_proxy_args if isinstance(a, TensorProxy)]
    if len({t.dtype for t in tensors}) < 2:
        return True
    scalars = [t for t in tensors if t.ndim == 0]
    if len(scalars) > 6:
        return False
    numbers = [a for a in tree_flatten((bsym.args, bsym.kwargs))[0] if type(a) in (bool, int, float, complex)]
    others = [torch.empty((1,) * t.ndim, dtype=t.dtype, device="meta") for t in tensors if t.ndim]
    found = set()
    for batched in range(2 ** len(scalars)):
        metas = [
            torch.empty((1,) if batched >> i & 1 else (), dtype=t.dtype, device="meta") for i, t in enumerate(scalars)
        ]
        found.add(elementwise_dtypes(*others, *metas, *numbers, type_promotion_kind=_DEFAULT_PROMOTION)[1])
    return len(found) == 1


def _refuse_effects(bsym: BoundSymbol) -> None:
    """vmap refuses random draws (``randomness="error"``, its default) and in-place updates of unbatched tensors by
    batched values; thunder refuses every draw and update in ``f``."""
    def draws(b: BoundSymbol) -> bool:
        return RANDOM in b.sym.tags or any(draws(s) for s in b.subsymbols)

    if draws(bsym):
        raise _Refused(bsym, "it draws random numbers")
    if IN_PLACE in bsym.sym.tags or mutates(bsym):
        raise _Refused(bsym, "it updates a tensor in place")


def _vmap_error(fn: Any, why: str) -> UnsupportedOpError:
    loc = source_location()
    loc = loc and (loc.call_site or loc)  # the user's line that calls the vmapped function, not torch's
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    return UnsupportedOpError(
        f"torch.vmap of {name} inside the jitted function{f' (called at {loc})' if loc else ''} is not supported: {why}"
    )


def vmap_impl(func: Callable, in_dims: Any, out_dims: Any, randomness: str, chunk_size: Any, *args, **kwargs) -> Any:
    """torch's ``vmap_impl``, which the function ``torch.vmap(func, in_dims, out_dims, randomness, chunk_size)``
    returns calls, in traced code: recorded into the current trace (Note [torch.vmap in a trace])."""
    trace = get_tracectx()
    if isinstance(in_dims, int):
        in_dims = (in_dims,) * len(args)
    if not isinstance(in_dims, (tuple, list)) or len(in_dims) != len(args):
        raise ValueError(
            f"vmap(in_dims={in_dims!r}, ...)(<inputs>): in_dims is not compatible with the structure of `inputs`. "
            f"in_dims has structure {type(in_dims).__name__} but inputs has {len(args)} positional arguments."
        )
    flat_args, args_spec = torch_pytree.tree_flatten(tuple(args))
    flat_in_dims = torch_pytree._broadcast_to_and_flatten(tuple(in_dims), args_spec)
    if flat_in_dims is None:
        raise ValueError(
            f"vmap(in_dims={in_dims!r}, ...)(<inputs>): in_dims is not compatible with the structure of `inputs`."
        )
    if any(d is not None and type(d) is not int for d in flat_in_dims):
        raise _vmap_error(func, f"in_dims={in_dims!r}: thunder maps each argument by an int or None")
    if type(out_dims) is not int:
        raise _vmap_error(func, f"out_dims={out_dims!r}: thunder puts every output's batch dimension at one int")
    size, element_args, batched = None, [], {}
    for i, (a, d) in enumerate(zip(flat_args, flat_in_dims)):
        if d is None:
            element_args.append(a)
            continue
        if not isinstance(a, TensorProxy):
            raise ValueError(
                f"vmap(in_dims={tuple(in_dims)!r}, ...)(<inputs>): Got in_dim={d} for an input but the input is of "
                f"type {type(a)}. We cannot vmap over non-Tensor arguments, please use None as the respective in_dim"
            )
        if not -a.ndim <= d < a.ndim:
            raise ValueError(
                f"vmap(in_dims={tuple(in_dims)!r}, ...)(<inputs>): Got in_dim={d} for some input, but that input is "
                f"a Tensor of dimensionality {a.ndim} so expected in_dim to satisfy -{a.ndim} <= in_dim < {a.ndim}."
            )
        d %= a.ndim
        if size is None:
            size = a.shape[d]
        elif a.shape[d] != size:
            raise ValueError(
                f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes {size} and "
                f"{a.shape[d]} for the mapped dimension (argument {i})"
            )
        b = a if d == 0 else prims.transpose(a, (d, *range(d), *range(d + 1, a.ndim)))
        element = TensorProxy.like(a, shape=tuple(b.shape[1:]))
        batched[element.name] = b
        element_args.append(element)
    if size is None:
        raise ValueError(
            "vmap(f, in_dims=..., ...)(<inputs>): at least one input must be a Tensor mapped over a dimension "
            "(in_dims not None)"
        )
    element_args = torch_pytree.tree_unflatten(element_args, args_spec)
    scratch: list[BoundSymbol] = []
    trace.scopes.append(scratch)
    outer_located, trace.located_scope = trace.located_scope, scratch
    try:
        out = interpreter_call(current_runtime(), func, tuple(element_args), kwargs)
    finally:
        trace.scopes.pop()
        trace.located_scope = outer_located
    replay = _Replay(size, batched)
    try:
        for bsym in scratch:
            replay.run(bsym)
    except _Refused as e:
        op = e.bsym.sym.name
        at = f" at {e.bsym.source}" if e.bsym.source is not None else ""
        raise _vmap_error(func, f"{op}{at} cannot be batched: {e.why}. Batch it by hand (broadcast the mapped "
                          "arguments against each other), or call torch.vmap outside the jitted function.") from None

    def result(x: Any) -> Any:
        if not isinstance(x, TensorProxy):
            raise ValueError(
                f"vmap: {getattr(func, '__qualname__', func)}: must only return Tensors, got type {type(x)}. Did you "
                "mean to set out_dims= to None for output?"
            )
        b = batched.get(x.name)
        if b is None:
            x = replay.value(x)
            b = prims.broadcast_in_dim(x, (size, *x.shape), tuple(range(1, x.ndim + 1)))
        if not -b.ndim <= out_dims < b.ndim:
            raise ValueError(f"vmap: out_dims={out_dims} is out of range for an output of {b.ndim - 1} dimensions")
        d = out_dims % b.ndim
        if d == 0:
            return b
        return prims.transpose(b, (*range(1, d + 1), 0, *range(d + 1, b.ndim)))

    leaves, spec = tree_flatten(out)
    return tree_unflatten(spec, [result(x) for x in leaves])
