"""torch's ``associative_scan`` (a higher-order op written for torch.compile) as a sequential scan the tracer
records op by op.

Libraries take it when they are told they are being compiled (``torch.compiler.is_compiling()`` answers True to
traced code, Note in thunder.core.introspection): transformers' Mamba and Jamba scan their state with it instead
of their eager loop. Its own implementation runs the combine function under ``torch.func.vmap``, which a trace
cannot hold; the sequential scan computes each prefix as the eager loop does (``state = a * state + b``, in that
order), so the values are eager's.

Layer: language. Imports: core.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import torch
from torch.utils import _pytree

from thunder.core.symbol_lookup import register_interpreted_replacement

__all__: list[str] = []


def _sequential_associative_scan(combine_fn: Callable, xs: Any, dim: int, reverse: bool = False,
                                 combine_mode: str = "pointwise") -> Any:  # fmt: skip
    """``associative_scan(combine_fn, xs, dim)``: prefix ``i`` is ``combine_fn`` folded over items ``0..i`` of
    ``xs`` along ``dim`` (with ``reverse``: of the flipped input, flipped back, as torch defines it)."""
    leaves, spec = _pytree.tree_flatten(xs)
    if reverse:
        leaves = [torch.flip(x, [dim]) for x in leaves]
    if len(leaves) == 2:
        stacked = _two_leaf_scan(combine_fn, leaves[0], leaves[1], spec, dim)
        if reverse:
            stacked = [torch.flip(x, [dim]) for x in stacked]
        return _pytree.tree_unflatten(stacked, spec)
    prefixes = []
    acc = None
    for i in range(leaves[0].shape[dim]):
        item = _pytree.tree_unflatten([x.select(dim, i) for x in leaves], spec)
        acc = item if acc is None else combine_fn(acc, item)
        prefixes.append(_pytree.tree_flatten(acc)[0])
    stacked = [torch.stack([p[k] for p in prefixes], dim) for k in range(len(leaves))]
    if reverse:
        stacked = [torch.flip(x, [dim]) for x in stacked]
    return _pytree.tree_unflatten(stacked, spec)


def _two_leaf_scan(combine_fn: Callable, a: torch.Tensor, b: torch.Tensor, spec: Any, dim: int) -> list:
    """The scan of two tensors (Mamba's and Jamba's ``(A, B)``), the same steps as the general loop, written so
    that its loop over a symbolic length is traced once (Note [Loops over a symbolic range] in thunder.core.loops):
    the first item before it, tensors as its only carried locals, one list per output."""
    acc_a, acc_b = a.select(dim, 0), b.select(dim, 0)
    first_a, first_b = acc_a, acc_b
    if a.shape[dim] == 1:
        return [first_a.unsqueeze(dim), first_b.unsqueeze(dim)]
    outs_a, outs_b = [], []
    for i in range(1, a.shape[dim]):
        pair = combine_fn(_pytree.tree_unflatten([acc_a, acc_b], spec),
                          _pytree.tree_unflatten([a.select(dim, i), b.select(dim, i)], spec))  # fmt: skip
        acc_a, acc_b = _pytree.tree_flatten(pair)[0]
        del pair
        outs_a.append(acc_a)
        outs_b.append(acc_b)
    return [torch.cat([first_a.unsqueeze(dim), torch.stack(outs_a, dim)], dim),
            torch.cat([first_b.unsqueeze(dim), torch.stack(outs_b, dim)], dim)]  # fmt: skip


register_interpreted_replacement(
    importlib.import_module("torch._higher_order_ops.associative_scan").associative_scan, _sequential_associative_scan
)
