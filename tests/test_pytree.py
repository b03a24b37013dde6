"""``thunder.core.pytree.tree_leaves`` answers flat trees itself (Note [Flat trees are flattened in Python]): its
leaves must be optree's, in optree's order, for every kind of tree."""

import collections
import dataclasses

import optree
import pytest
import torch

from thunder.core.proxies import tensorproxy_from_tensor
from thunder.core.pytree import NAMESPACE, add_leaf_type, register_containers, tree_leaves
from thunder.core.trace import TraceCtx, tracectx

Pair = collections.namedtuple("Pair", "a b")


class MyInt(int):
    pass


class MyTuple(tuple):
    pass


@dataclasses.dataclass
class Holder:
    x: object


def _optree_leaves(tree):
    return optree.tree_leaves(tree, none_is_leaf=True, namespace=NAMESPACE)


def _trees(p):
    ordered = {"b": p, "a": 1}  # insertion order, not sorted
    registered = collections.OrderedDict(z=p, y=2)
    register_containers(registered)
    return [
        ((p, p), {}),
        ((p, 1, 2.0, None, True, "s", b"b", 3j, ...), {"dim": 1}),
        ((p, (1, [2, (3, [4, (5, p)])])), {}),  # deeper than the fast path goes
        ordered,
        ((slice(1, None, p),), {}),
        (torch.Size([2, 3]), p),
        (Pair(1, p),),
        [MyInt(3), p],
        (MyTuple((1, p)),),
        (registered, p),
        (Holder(p),),
        (torch.float32, torch.device("cpu"), p),
        collections.defaultdict(int, {"k": p}),
        [],
        {},
        None,
        p,
    ]


@pytest.mark.parametrize("index", range(17))
def test_tree_leaves_are_optrees(index):
    with tracectx(TraceCtx()):
        p = tensorproxy_from_tensor(torch.randn(2, 3))
        tree = _trees(p)[index]
        assert [id(x) for x in tree_leaves(tree)] == [id(x) for x in _optree_leaves(tree)]


def test_a_pytree_node_cannot_be_a_leaf_type():
    with pytest.raises(ValueError, match="pytree node"):
        add_leaf_type(torch.Size)
