"""Pytrees for thunder: optree with ``None`` as a leaf, in thunder's own namespace.

Layer: core. Imports: optree.
"""

from __future__ import annotations

import collections
import copy
import functools
import types
from collections.abc import Callable
from typing import Any

import optree

NAMESPACE = "thunder"

# Dicts flatten in insertion order, as Python iterates them (optree sorts their keys by default: a dict keyed by
# tensors, such as an optimizer's ``state``, would compare them). Set for good: the mode is global per namespace.
_INSERTION_ORDER = optree.dict_insertion_ordered(True, namespace=NAMESPACE)  # kept: closing it would end the mode
_INSERTION_ORDER.__enter__()

# Slices are nodes, not leaves: an index key such as ``(slice(i, None), t)`` may hold proxies,
# and a bound symbol's flat args must find them (and ``rename`` must substitute them).
optree.register_pytree_node(
    slice, lambda s: ((s.start, s.stop, s.step), None), lambda _, c: slice(*c), namespace=NAMESPACE
)


_registered: set[type] = set()


def register_containers(tree: Any) -> None:
    """Registers the dict subclasses found in ``tree`` (e.g. Hugging Face ``ModelOutput``) as
    pytree nodes, so their values are found and their type survives flattening."""
    stack = [tree]
    while stack:
        x = stack.pop()
        typ = type(x)
        if isinstance(x, dict):
            if typ is not dict and typ not in _registered and not _known_to_optree(typ):
                optree.register_pytree_node(
                    typ, _flatten_mapping, functools.partial(_unflatten_mapping, typ), namespace=NAMESPACE
                )
                _registered.add(typ)
            stack.extend(mapping_items(x).values())
        elif typ in (list, tuple) or isinstance(x, tuple):
            stack.extend(x)


def mapping_items(d: dict) -> dict:
    """The items that rebuild the dict subclass ``d`` (its attributes, a dataclass mapping's fields among them, are
    ``mapping_attrs``)."""
    return dict(d)


def mapping_type(d: dict) -> Callable:
    """What ``rebuild_mapping`` rebuilds ``d`` with: its type, or for a ``defaultdict`` its type given
    ``d``'s ``default_factory``."""
    if isinstance(d, collections.defaultdict):
        return functools.partial(type(d), d.default_factory)
    return type(d)


def rebuild_mapping(typ: type, items: dict, attrs: dict | object | None = None) -> Any:
    """An instance of the dict subclass ``typ`` with these items; where its type's ``__init__`` is its own,
    made as ``copy`` makes one, with ``attrs`` its attributes (Note [Mappings with a constructor of their own])."""
    if not builds_with_own_code(typ):
        return typ(items)
    new = typ.__new__(typ)
    store = _builtin_mapping(typ).__setitem__
    for k, v in items.items():
        store(new, k, v)
    if attrs is ATTRIBUTES_ARE_ITEMS:
        object.__setattr__(new, "__dict__", new)
    elif attrs:
        item = _builtin_mapping(typ).__getitem__
        for name, value in attrs.items():
            object.__setattr__(new, name, item(new, name) if value is ATTRIBUTE_IS_ITEM else value)
    return new


# Note [Mappings with a constructor of their own]
# A dict subclass leaving or entering the jitted function is made again from its items (the caller must never get a
# proxy, and the program reads an input's items as traced values). Calling its type with the items is right only
# where the type stores them as given: an ``__init__`` of the user's may change them (``{k: 2 * v ...}``: eager's
# value doubled again on each rebuild), count, or log. Such a mapping is made as ``copy`` makes one: the type's
# ``__new__``, its items stored by the builtin mapping it derives from, and its instance attributes set (an
# ``AttrDict`` whose ``__dict__`` is itself keeps being so). A dataclass mapping (a Hugging Face ``ModelOutput``,
# diffusers' outputs) is one of them: its generated ``__init__`` runs a ``__post_init__`` that may transform a field
# (``self.logits = self.logits * 2``), so a rebuild by its constructor applied it once more on every call and ran its
# side effects again; its fields are attributes (those that are not None items too, in a ``ModelOutput``), carried
# with it. An ``OrderedDict`` subclass with only a ``__setitem__`` of its own is still built by its type:
# ``OrderedDict``'s C ``__init__`` calls that ``__setitem__`` natively, which tracing cannot follow, so the rebuild
# is what runs it on each call as eager's construction does. An attribute that is the item of its name (a
# ``ModelOutput``'s field: ``out.hidden_states is out["hidden_states"]``) is ``ATTRIBUTE_IS_ITEM`` in its attributes,
# and the rebuild sets it to the rebuilt item: made apart (a tuple or list printed twice, flattened twice), the two
# were different objects, and such an output, passed back in (a generation's ``encoder_outputs``), failed the input
# check that its fields are its items and was read as itself, its items untraced tensors.
ATTRIBUTES_ARE_ITEMS = object()  # ``mapping_attrs`` of a mapping whose ``__dict__`` is itself
ATTRIBUTE_IS_ITEM = object()  # in ``mapping_attrs``: the attribute is the item of its name
_BUILTIN_MAPPINGS = (collections.OrderedDict, collections.Counter, collections.defaultdict, dict)


def _builtin_mapping(typ: type) -> type:
    return next(base for base in typ.__mro__ if base in _BUILTIN_MAPPINGS)


def builds_with_own_code(typ: Callable) -> bool:
    """Whether ``typ(items)`` runs an ``__init__`` of the dict subclass ``typ``'s own (Note [Mappings with a
    constructor of their own])."""
    if not isinstance(typ, type):
        return False
    return typ.__init__ is not _builtin_mapping(typ).__init__


def mapping_attrs(d: dict) -> dict | object | None:
    """The instance attributes ``rebuild_mapping`` gives a copy of ``d``: None where its type stores its items
    as given (Note [Mappings with a constructor of their own])."""
    if not builds_with_own_code(type(d)):
        return None
    attrs = object_state(d)
    if attrs is d:
        return ATTRIBUTES_ARE_ITEMS

    def is_item(name: str, value: Any) -> bool:
        return value is not None and dict.__contains__(d, name) and dict.__getitem__(d, name) is value

    return {n: ATTRIBUTE_IS_ITEM if is_item(n, v) else v for n, v in (attrs or {}).items()}


def _flatten_mapping(d: dict) -> tuple[list, tuple, list]:
    items, attrs = mapping_items(d), mapping_attrs(d)
    order = list(attrs) if isinstance(attrs, dict) else []
    names = [n for n in order if attrs[n] is not ATTRIBUTE_IS_ITEM]  # the others are rebuilt from the items
    values = [*items.values(), *(attrs[n] for n in names)]
    meta = (list(items), order, names, attrs is ATTRIBUTES_ARE_ITEMS)
    return values, meta, [*items, *(f".{n}" for n in names)]


def _unflatten_mapping(typ: type, meta: tuple, values: list) -> Any:
    keys, order, names, attributes_are_items = meta
    if attributes_are_items:
        attrs = ATTRIBUTES_ARE_ITEMS
    else:
        own = dict(zip(names, values[len(keys) :]))
        attrs = {n: own.get(n, ATTRIBUTE_IS_ITEM) for n in order}
    return rebuild_mapping(typ, dict(zip(keys, values)), attrs)


def _known_to_optree(typ: type) -> bool:
    return optree.register_pytree_node.get(typ, namespace=NAMESPACE) is not None


class ObjectWithProxies:
    """A returned object whose attributes hold traced values (a Hugging Face ``DynamicCache``,
    say). Generated code rebuilds it on every call: a shallow copy of the trace-time object with
    those attributes set to the call's values, so no proxy ever escapes to the caller. For a list
    subclass, ``items`` are its items (``rebuild_list``); None for any other object."""

    __slots__ = ("template", "attrs", "items")

    def __init__(self, template: Any, attrs: dict[str, Any], items: list | None = None):
        self.template = template
        self.attrs = attrs
        self.items = items


def rebuild_list(template: list, attrs: dict[str, Any], items: list) -> list:
    """A new object of the list subclass of ``template`` holding ``items`` and the attributes ``attrs`` (made as
    ``copy`` makes one: its ``__init__`` is not called)."""
    new = type(template).__new__(type(template))
    list.extend(new, items)
    for name, value in attrs.items():
        object.__setattr__(new, name, value)
    return new


def rebuild_object(template: Any, attrs: dict[str, Any]) -> Any:
    try:
        new = copy.copy(template)
    except TypeError:  # a class that cannot be hashed (its metaclass defines __eq__): copy's dispatch table hashes it
        new = copy._reconstruct(template, None, *template.__reduce_ex__(4))
    new.__dict__.update(attrs)
    return new


def rebuild_function(template: types.FunctionType, attrs: dict[str, Any]) -> types.FunctionType:
    """A new function like ``template`` (a closure the program made) with the call's closure cells and defaults, as
    each eager call makes its own (Note [Objects the program makes] in thunder.core.lifting)."""
    fn = types.FunctionType(template.__code__, template.__globals__, template.__name__, attrs["__defaults__"], attrs["__closure__"])
    fn.__kwdefaults__ = attrs["__kwdefaults__"]
    fn.__qualname__, fn.__module__, fn.__doc__ = template.__qualname__, template.__module__, template.__doc__
    fn.__dict__.update(template.__dict__)
    return fn


def rebuild_generator(template: types.GeneratorType, attrs: dict[str, Any]) -> types.GeneratorType:
    """A new generator, not started: the generator function called again with the call's arguments."""
    return attrs["function"](*attrs["args"], **attrs["kwargs"])


#: Iterators over a tuple, list or range: ``rebuild_iterator`` makes one again from its sequence and position.
SEQUENCE_ITERATORS = (type(iter(())), type(iter([])), type(iter(range(0))))


def rebuild_iterator(template: Any, attrs: dict[str, Any]) -> Any:
    """A new iterator over the sequence ``attrs["seq"]`` (a tuple, list or range), advanced to ``attrs["at"]``."""
    it = iter(attrs["seq"])
    it.__setstate__(attrs["at"])
    return it


def rebuild_cell(template: types.CellType, attrs: dict[str, Any]) -> types.CellType:
    """A new closure cell holding ``attrs["cell_contents"]`` (empty without it)."""
    return types.CellType(attrs["cell_contents"]) if "cell_contents" in attrs else types.CellType()


def rebuild_slotted_object(template: Any, attrs: dict[str, Any]) -> Any:
    """``rebuild_object`` for a type with ``__slots__`` (the printer picks it: no per-call type test)."""
    new = copy.copy(template)
    for name, value in attrs.items():
        object.__setattr__(new, name, value)  # past a frozen dataclass's own __setattr__, as copy does
    return new


def slot_names(cls: type) -> tuple[str, ...]:
    """The attributes ``cls``'s instances hold in slots (``__slots__`` of it and its bases)."""
    try:
        return _slot_names(cls)
    except TypeError:  # a class that cannot be hashed (its metaclass defines __eq__): not cached
        return _slot_names.__wrapped__(cls)


@functools.cache
def _slot_names(cls: type) -> tuple[str, ...]:
    names: list[str] = []
    for c in cls.__mro__:
        slots = c.__dict__.get("__slots__", ())
        for name in (slots,) if isinstance(slots, str) else slots:
            if name not in ("__dict__", "__weakref__") and name not in names:
                names.append(name)
    return tuple(names)


_UNSET = object()


def object_state(x: Any) -> dict[str, Any] | None:
    """``x``'s attributes: its ``__dict__`` and the slots that are set (a ``dataclass(slots=True)``), or None where
    it has neither."""
    own = getattr(x, "__dict__", None)
    slots = slot_names(type(x))
    if not slots:
        return own if isinstance(own, dict) else None
    state = dict(own) if isinstance(own, dict) else {}
    for name in slots:
        value = getattr(x, name, _UNSET)
        if value is not _UNSET:
            state[name] = value
    return state


def _flatten_object(o: ObjectWithProxies) -> tuple[list, tuple]:
    n_items = None if o.items is None else len(o.items)
    return [*(o.items or ()), *o.attrs.values()], (o.template, list(o.attrs), n_items)


def _unflatten_object(meta: tuple, values: list) -> ObjectWithProxies:
    template, names, n_items = meta
    skip = n_items or 0
    return ObjectWithProxies(template, dict(zip(names, values[skip:])), None if n_items is None else values[:skip])


optree.register_pytree_node(ObjectWithProxies, _flatten_object, _unflatten_object, namespace=NAMESPACE)


def tree_flatten(tree: Any) -> tuple[list, Any]:
    return optree.tree_flatten(tree, none_is_leaf=True, namespace=NAMESPACE)


def tree_unflatten(spec: Any, leaves: list) -> Any:
    return optree.tree_unflatten(spec, leaves)


# Note [Flat trees are flattened in Python]
# Tracing flattens the arguments of every op it records, several times (the record, requires-grad propagation, a
# bound symbol's flat arguments and outputs), and those are nearly always a few numbers and tensors in a tuple, a
# list or a dict. optree takes 4-7 us for such a tree (the namespace's registry and the insertion-order mode are
# looked up each time); ``tree_leaves`` answers those trees itself, in the order optree gives (insertion order for
# dicts), and hands anything else to optree: a container of another type, a leaf whose exact type is not in
# ``_LEAF_TYPES`` (so a subclass of a leaf type, which may be registered as a node, goes to optree too) or a tree
# deeper than ``_FAST_DEPTH``. Only types that are never pytree nodes are in ``_LEAF_TYPES``; proxies add theirs
# (``add_leaf_type``).
_LEAF_TYPES: set[type] = {int, float, bool, complex, str, bytes, type(None), type(Ellipsis)}
_FAST_DEPTH = 4


def add_leaf_type(typ: type) -> None:
    """Makes ``typ`` (exactly that type, which must not be registered as a pytree node) a leaf that ``tree_leaves``
    finds without optree (Note [Flat trees are flattened in Python])."""
    if _known_to_optree(typ):
        raise ValueError(f"{typ.__qualname__} is a pytree node, not a leaf")
    _LEAF_TYPES.add(typ)


def _fast_leaves(tree: Any, out: list, depth: int) -> bool:
    """Appends ``tree``'s leaves to ``out``; False (with ``out`` partly filled) where optree must decide."""
    typ = type(tree)
    if typ in _LEAF_TYPES:
        out.append(tree)
        return True
    if depth == 0:
        return False
    if typ is tuple or typ is list:
        items = tree
    elif typ is dict:
        items = tree.values()
    elif typ is slice:  # a node (below)
        items = (tree.start, tree.stop, tree.step)
    else:
        return False
    for x in items:
        if type(x) in _LEAF_TYPES:
            out.append(x)
        elif not _fast_leaves(x, out, depth - 1):
            return False
    return True


def tree_leaves(tree: Any) -> list:
    out: list = []
    if _fast_leaves(tree, out, _FAST_DEPTH):
        return out
    return optree.tree_leaves(tree, none_is_leaf=True, namespace=NAMESPACE)


def tree_map(fn, tree: Any, *rest: Any) -> Any:
    return optree.tree_map(fn, tree, *rest, none_is_leaf=True, namespace=NAMESPACE)
