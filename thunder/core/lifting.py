"""Objects that leave the jitted function: made again by the computation on each call, so no proxy escapes.

Note [Objects the program makes] says how; ``holds``/``holds_tensors``/``children_of`` and the reachability helpers say
what a value holds (the tracer asks them before it copies, lifts or refuses a value).

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import collections
import enum
import functools
import types
import weakref
from collections.abc import Callable, Container, Iterator
from typing import Any

import torch

from thunder.core import iterators
from thunder.core.errors import ThunderRuntimeError
from thunder.core.interpreter.execution import unstarted_generator_call
from thunder.core.proxies import Proxy
from thunder.core.pytree import (
    SEQUENCE_ITERATORS,
    ObjectWithProxies,
    mapping_attrs,
    mapping_type,
    object_state,
    rebuild_mapping,
    tree_leaves,
)
from thunder.core.symbolic import is_symbolic
from thunder.core.user_code import source_location

ABSENT = object()  # a cell without contents; an attribute, global or item without a value of its own


def cell_contents(cell) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return ABSENT


NOT_REBUILT = (types.ModuleType, type, types.FunctionType, torch.nn.Module)  # returned as they are
# Subclasses of builtin values and containers (a namedtuple such as ``PackedSequence``, a list subclass): their state
# is their items, which the pytree and the printer rebuild, not their attributes.
BUILTIN_VALUES = (tuple, list, dict, set, frozenset, collections.deque, str, bytes, bytearray, int, float, complex)


# Note [Objects the program makes]
# What leaves the function (returned, stored in an attribute, global or closure cell, written into an outside
# container) is printed into the computation as an expression that makes it on each call: a list or set literal,
# ``_rebuild_object(template, attrs)`` for an object (a shallow copy of the object tracing made, with the call's
# attribute values). An outside object is the computation's input that holds it, so the caller gets the object
# itself. An object the program made (the interpreter ran its class call: ``made_object``) is rebuilt on every
# call even where it holds no traced value: as a constant of the trace, every call returned the first call's
# object, and a change the caller made to one result showed in the next. An object held twice by one value
# (``return l, l``; ``self.st = c; return c``) is made once and bound to a name (``Printer.share_repeated``); what a
# store or a change of an outside container holds is escaped again at the end, as it is then and with the result's
# memo (``lift_stored_objects_again``), so an object stored and returned is one object: a store replays after the
# values it refers to (``replays.place_after_their_values``). A list subclass is made like a list, of its items, with
# its type and attributes (``rebuild_list``). A closure the program made is made by ``rebuild_function`` around cells
# made by the call (``rebuild_cell``; a cell two closures share is made once, through the memo; a cell of an enclosing
# function outside the jitted one is that cell), so calling it later computes on the call's values, natively, as
# eager's does, and a ``nonlocal`` counter starts afresh on each call. A generator the program made and has not
# started is made by calling its function again with the call's arguments (``rebuild_generator``), and an iterator
# over a tuple, list or range from its sequence and position (``rebuild_iterator``). An object that holds itself
# cannot be made by an expression: a clear error where it would be rebuilt.


def lift_objects(
    x: Any,
    made: Container[int] = (),
    depth: int = 0,
    memo: dict[int, Any] | None = None,
    as_inputs: Callable[[Any], Any] | None = None,
) -> Any:
    """``x`` with every plain object that holds proxies in its attributes, or that the program made (its id in
    ``made``), replaced by an ``ObjectWithProxies`` (rebuilt by the generated code on each call), so no proxy
    escapes to the caller and no call returns an object an earlier call returned (Note [Objects the program
    makes]). An object met twice is lifted once (``memo``): the generated code builds it once. ``as_inputs`` (kept in
    the memo for the calls below) gives what a closure cell the program made holds as it leaves the function: the
    caller's object where the program read an outside one (the tracer's ``_outside_objects_as_inputs``)."""
    if isinstance(x, (Proxy, torch.Tensor, str, bytes, int, float, complex, bool, type(None))):
        return x
    memo = {} if memo is None else memo
    if as_inputs is not None:
        memo[_AS_INPUTS] = as_inputs
    lifted = memo.get(id(x), ABSENT)
    if lifted is _LIFTING:  # met inside itself: a cycle, which an object left as it is may keep
        if isinstance(x, (list, tuple, dict, set, frozenset, collections.deque)):  # printed as literals
            _refuse_cycle(x)
        memo.setdefault(_CYCLES, set()).add(id(x))
        return x
    if lifted is ABSENT:
        memo[id(x)] = _LIFTING
        lifted = memo[id(x)] = _lift(x, made, depth, memo)
        if lifted is not x and id(x) in memo.get(_CYCLES, ()):
            _refuse_cycle(x)
    return lifted


_LIFTING = object()  # in ``lift_objects``' memo: being lifted
_CYCLES = object()  # ``lift_objects``' memo key of the ids of the objects met inside themselves
_AS_INPUTS = object()  # ``lift_objects``' memo key of its ``as_inputs``


def _refuse_cycle(x: Any) -> None:
    loc = source_location()
    raise ThunderRuntimeError(
        f"a {type(x).__name__} that holds itself (a cycle, as ``l.append(l)`` or ``c.me = c`` make) leaves the jitted "
        f"function{f' at {loc}' if loc else ''}: thunder makes what the function returns or stores again on each call, "
        "and cannot make a cycle. Return or store its parts instead."
    )


def _lift(x: Any, made: Container[int], depth: int, memo: dict[int, Any]) -> Any:
    if type(x) is iterators.TracedIterator:
        loc = source_location()
        raise ThunderRuntimeError(
            f"{x.name}, an iterator argument, leaves the jitted function (returned, stored or printed)"
            f"{f' at {loc}' if loc else ''}: thunder follows only the items the program takes from it. Return or "
            "store the items instead."
        )
    if isinstance(x, (Proxy, torch.Tensor, str, bytes, int, float, complex, bool, type(None))) or depth > 6:
        return x
    if type(x) in (list, tuple, collections.deque):
        items = [lift_objects(v, made, depth + 1, memo) for v in x]
        if all(a is b for a, b in zip(items, x)):
            return x
        return collections.deque(items, x.maxlen) if type(x) is collections.deque else type(x)(items)
    if isinstance(x, dict):
        changed = {k: lift_objects(v, made, depth + 1, memo) for k, v in x.items()}
        attrs = None if type(x) is dict else mapping_attrs(x)
        own = attrs if isinstance(attrs, dict) else {}  # a dataclass mapping's fields among them
        lifted = {k: lift_objects(v, made, depth + 1, memo) for k, v in own.items()}
        if all(changed[k] is v for k, v in x.items()) and all(lifted[k] is v for k, v in own.items()):
            return x
        if type(x) is dict:
            return changed
        return rebuild_mapping(mapping_type(x), changed, lifted if isinstance(attrs, dict) else attrs)
    if isinstance(x, ObjectWithProxies):  # rebuilt around an outside object it holds (``_outside_objects_as_inputs``)
        attrs = {k: lift_objects(v, made, depth + 1, memo) for k, v in x.attrs.items()}
        return x if all(attrs[k] is v for k, v in x.attrs.items()) else ObjectWithProxies(x.template, attrs, x.items)
    if type(x) is types.FunctionType and made_closure(x, made):
        return _lift_function(x, made, depth, memo)
    if type(x) is types.GeneratorType:
        call = unstarted_generator_call(x)
        if call is None:
            return x  # refused by the tracer's result check
        # Made again by each call, as eager's ``g()`` makes it, and run natively when iterated.
        fn, args, kwargs = call
        if any(isinstance(a, Iterator) and type(a) not in SEQUENCE_ITERATORS for a in (*args, *kwargs.values())):
            return x  # (an iterator over a sequence, a generator expression's argument, is made again: below)
        parts = {"function": fn, "args": args, "kwargs": kwargs}
        return ObjectWithProxies(x, {k: lift_objects(v, made, depth + 1, memo) for k, v in parts.items()})
    if type(x) in SEQUENCE_ITERATORS:  # ``iter((x, y))``: made again by each call over its items, at its position
        _, (seq,), at = x.__reduce__()
        return ObjectWithProxies(x, {"seq": lift_objects(seq, made, depth + 1, memo), "at": at})
    if isinstance(x, list):  # a list subclass: made on each call, as a list is, of its items and attributes
        items = [lift_objects(v, made, depth + 1, memo) for v in x]
        state = object_state(x) or {}
        return ObjectWithProxies(x, {k: lift_objects(v, made, depth + 1, memo) for k, v in state.items()}, items)
    attrs = object_state(x)
    if attrs is None or isinstance(x, NOT_REBUILT):
        return x
    lifted = {k: lift_objects(v, made, depth + 1, memo) for k, v in attrs.items()}
    if id(x) in made:
        return ObjectWithProxies(x, lifted)
    changed = {k: v for k, v in lifted.items() if v is not attrs[k] or _holds_proxy(v)}
    return ObjectWithProxies(x, changed) if changed else x


def made_closure(fn: types.FunctionType, made: Container[int]) -> bool:
    """Whether ``fn`` is a function the program made around its own closure cells, or with traced defaults."""
    return any(id(c) in made for c in fn.__closure__ or ()) or _holds_proxy((fn.__defaults__, fn.__kwdefaults__))


def _lift_function(fn: types.FunctionType, made: Container[int], depth: int, memo: dict[int, Any]) -> ObjectWithProxies:
    """A closure the program made, made again by each call as eager makes it: its own cells (one cell shared by two
    closures stays one, through ``memo``) holding the call's values; cells of enclosing functions outside the
    jitted one are those cells themselves."""

    def cell(c: types.CellType) -> Any:
        if id(c) not in made:
            return c
        lifted = memo.get(id(c), ABSENT)
        if lifted is ABSENT:
            contents = cell_contents(c)
            as_inputs = memo.get(_AS_INPUTS)
            if as_inputs is not None and contents is not ABSENT:
                contents = as_inputs(contents)  # (``seen.append`` of an outside list ``seen``: the caller's list)
            attrs = {} if contents is ABSENT else {"cell_contents": lift_objects(contents, made, depth + 1, memo)}
            lifted = memo[id(c)] = ObjectWithProxies(c, attrs)
        return lifted

    return ObjectWithProxies(fn, {
        "__closure__": tuple(cell(c) for c in fn.__closure__) if fn.__closure__ else None,
        "__defaults__": lift_objects(fn.__defaults__, made, depth + 1, memo),
        "__kwdefaults__": lift_objects(fn.__kwdefaults__, made, depth + 1, memo),
    })  # fmt: skip


def _holds_proxy(x: Any) -> bool:
    """Whether ``x`` is a proxy or a symbolic number (an int argument's value in an entry for every int), or a
    list, tuple or dict holding one (as ``(t, 1)`` does): a value of the call, not of the trace."""
    return any(isinstance(leaf, Proxy) or is_symbolic(leaf) for leaf in tree_leaves(x))


def held_by_callable(fn: Any) -> list:
    """What a function (its closure cells and defaults), a ``functools.partial`` (its arguments) or a bound method
    (its object) holds."""
    if isinstance(fn, types.FunctionType):
        cells = [cell_contents(c) for c in fn.__closure__ or ()]
        return [*cells, *(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values()]
    if isinstance(fn, functools.partial):
        return [fn.func, *fn.args, *fn.keywords.values()]
    if isinstance(fn, types.MethodType) and not isinstance(fn.__self__, torch.nn.Module):
        return [fn.__self__]
    return []


def children_of(value: Any) -> Any:
    if isinstance(value, dict):
        return value.values()
    if isinstance(value, (list, tuple, set, frozenset, collections.deque)):
        return value
    if not isinstance(value, (type, types.ModuleType)):  # (a module's namespace is not what a value holds)
        state = object_state(value)
        if state is not None:
            return state.values()
    return ()


# What ``copy.deepcopy`` copies as itself, holding nothing it would copy.
_ATOMIC = (type(None), bool, int, float, complex, str, bytes, type, types.FunctionType, types.BuiltinFunctionType,
           types.ModuleType, types.CodeType, torch.dtype, torch.device, range, enum.Enum, weakref.ref, property)  # fmt: skip
_PLAIN_REDUCE = (object.__reduce_ex__, object.__reduce__, getattr(object, "__getstate__", None))


def all_reachable_ids(value: Any, budget: int = 20_000) -> set[int] | None:
    """Ids of everything ``copy.deepcopy(value)`` would copy (tensors aside), or None where that cannot be known
    for sure: an object that copies itself its own way (``__deepcopy__``, ``__reduce__``, ``__getstate__``,
    ``__slots__``), or more than ``budget`` objects."""
    seen: set[int] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, _ATOMIC) or isinstance(v, torch.Tensor) or id(v) in seen:
            continue
        seen.add(id(v))
        if len(seen) > budget:
            return None
        cls = type(v)
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, (list, tuple, set, frozenset)):
            stack.extend(v)
        elif (getattr(cls, "__deepcopy__", None) is not None or "__slots__" in cls.__dict__ or not hasattr(v, "__dict__")
              or (cls.__reduce_ex__, cls.__reduce__, getattr(cls, "__getstate__", None)) != _PLAIN_REDUCE):  # fmt: skip
            return None
        if hasattr(v, "__dict__"):
            stack.extend(vars(v).values())
    return seen


def reachable_ids(value: Any, depth: int = 4) -> set[int]:
    """Ids of ``value`` and of what its attributes and items hold, ``depth`` levels deep."""
    seen: set[int] = set()
    level = [value]
    for _ in range(depth + 1):
        nxt = []
        for v in level:
            if id(v) not in seen:
                seen.add(id(v))
                nxt.extend(children_of(v))
        level = nxt
    return seen


def holds(value: Any, is_leaf: Callable[[Any], bool], depth: int = 3) -> bool:
    """Whether ``value`` or what its attributes and items hold, ``depth`` levels deep, satisfies ``is_leaf``."""
    return is_leaf(value) or (depth > 0 and any(holds(v, is_leaf, depth - 1) for v in children_of(value)))


def holds_tensors(value: Any) -> bool:
    """Whether ``value`` holds a tensor (itself, a module's parameters or buffers, an item, an attribute); a
    configuration object of numbers and strings does not."""
    return holds(value, _is_tensor_holder)


def _is_tensor_holder(v: Any) -> bool:
    if isinstance(v, torch.nn.Module):
        return any(True for _ in v.parameters()) or any(True for _ in v.buffers())
    return isinstance(v, torch.Tensor)
