"""Pytrees for thunder: optree with ``None`` as a leaf, in thunder's own namespace.

Layer: core. Imports: optree.
"""

from __future__ import annotations

from typing import Any

import optree

NAMESPACE = "thunder"

# Slices are nodes, not leaves: an index key such as ``(slice(i, None), t)`` may hold proxies,
# and a bound symbol's flat args must find them (and ``rename`` must substitute them).
optree.register_pytree_node(
    slice, lambda s: ((s.start, s.stop, s.step), None), lambda _, c: slice(*c), namespace=NAMESPACE
)


def tree_flatten(tree: Any) -> tuple[list, Any]:
    return optree.tree_flatten(tree, none_is_leaf=True, namespace=NAMESPACE)


def tree_unflatten(spec: Any, leaves: list) -> Any:
    return optree.tree_unflatten(spec, leaves)


def tree_leaves(tree: Any) -> list:
    return optree.tree_leaves(tree, none_is_leaf=True, namespace=NAMESPACE)


def tree_map(fn, tree: Any, *rest: Any) -> Any:
    return optree.tree_map(fn, tree, *rest, none_is_leaf=True, namespace=NAMESPACE)
