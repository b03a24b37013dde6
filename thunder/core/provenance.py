"""Provenance: what a value from outside the program becomes, and how the prologue unpacks and checks it.

Note [Provenance]
Each value that came from outside has a prologue expression: ``args[0]``, ``kwargs["x"]``,
``args[1].weight``, ``_globals0["SCALE"]``. ``_provenance`` maps an outside object (by id) to
the prologue proxy holding it, so an attribute read from it becomes an ``unpack_attr`` plus
a check in the prologue, recursively. Values created inside the program have no provenance
and need no checks.

``ProvenanceMixin`` is the part of ``Tracer`` (``thunder.core.jit_ext``) that binds the call's arguments
and unpacks each outside value: tensors, numbers, containers, functions, modules, iterators and other
objects; the state it keeps is set up by ``Tracer.__init__``.

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import collections.abc
import functools
import inspect
import sys
import types
from collections.abc import Callable
from numbers import Number
from typing import Any

import torch

from thunder.core import introspection, iterators, prims, proxies
from thunder.core.errors import MakesParameters, ThunderRuntimeError, ThunderValueError
from thunder.core.interpreter.execution import lookup_type_attr
from thunder.core.interpreter.protocols import abc_subclass
from thunder.core.proxies import Proxy, TensorProxy, tensorproxy_from_tensor
from thunder.core.pytree import (
    ATTRIBUTE_IS_ITEM,
    mapping_attrs,
    mapping_type,
    object_state,
    rebuild_mapping,
    slot_names,
)
from thunder.core.side_effects import _MUTATING_METHODS, LAZY_TYPES, LazyContainer
from thunder.core.symbol import SourceLocation, Symbol
from thunder.core.symbol_lookup import plain_attribute
from thunder.core.symbolic import SymInt
from thunder.core.trace import tracectx
from thunder.core.user_code import is_code_like, is_fixed_module, is_installed_code, is_library_module, source_location

_PARTIALMETHOD_CODE = functools.partialmethod(print)._make_unbound_method().__code__  # of the functions it makes
#: Where such a function keeps its partialmethod: ``_partialmethod`` before 3.13, ``__partialmethod__`` from 3.13.
_PARTIALMETHOD_ATTR = "__partialmethod__" if sys.version_info >= (3, 13) else "_partialmethod"


def is_dtensor(t: Any) -> bool:
    """Whether ``t`` is a ``torch.distributed.tensor.DTensor`` (without importing torch.distributed)."""
    return type(t).__name__ == "DTensor" and type(t).__module__.startswith("torch.distributed")


def dtensor_error(where: str) -> ThunderValueError:
    return ThunderValueError(
        f"{where} is a DTensor (torch.distributed's fully_shard/FSDP2 or tensor parallelism), which thunder.jit does "
        "not support: shard the module with thunder.distributed.fsdp(model) instead, or call the DTensor's "
        "full_tensor() outside the compiled function"
    )


def layout_error(where: str, t: torch.Tensor) -> ThunderValueError:
    """A sparse, nested, quantized or MKL-DNN tensor was traced as a dense one: its ops, ``is_sparse``,
    ``is_quantized``, ``layout`` and its results' layout were a dense tensor's, silently wrong."""
    kind = "a nested tensor" if t.is_nested else f"a tensor of layout {t.layout}"
    kind = f"a quantized tensor ({t.dtype})" if t.is_quantized else kind
    return ThunderValueError(
        f"{where} is {kind}, which thunder.jit does not trace (it traces strided, dense tensors): convert it before "
        "the call (.to_dense(), .dequantize(), or a padded tensor for a nested one), or call this function "
        "without thunder.jit"
    )


class ProvenanceMixin:
    """``Tracer``'s unpacking of the call's arguments and of the outside values the program reads."""

    def _prologue_proxy(self, name: str) -> Proxy:
        with tracectx(self.prologue):
            return Proxy(self.prologue.safe_name(name))

    def _emit(self, sym: Symbol, *args, output=None) -> None:
        self.prologue.bound_symbols.append(sym.bind(*args, output=output))

    def _check(self, sym: Symbol, *args) -> None:
        if self.checks:
            self._emit(sym, *args)

    def _constant(self, obj: Any, name: str) -> Proxy:
        """A prologue proxy holding ``obj`` itself (captured by identity)."""
        holder = self._constants.get(id(obj))
        if holder is None:
            holder = self._constants[id(obj)] = self._prologue_proxy(name)
            self._emit(prims.unpack_constant, obj, holder, output=holder)
            self._keepalive.append(obj)
        return holder

    def _object_input(self, holder: Proxy) -> Proxy:
        """The computation's parameter for the outside object that ``holder`` unpacks (to mutate it)."""
        p = self._object_inputs.get(holder.name)
        if p is None:
            with tracectx(self.computation):
                p = Proxy(self.computation.safe_name(holder.name))
            self._object_inputs[holder.name] = p
            self.inputs.append((holder, p))
        return p

    def unpack_value(self, value: Any, holder: Proxy, name: str) -> Any:
        """Registers an outside ``value`` held by prologue proxy ``holder``; returns what the program sees."""
        typ = type(value)  # asked of its class: Note [Reads a class's __getattribute__ sees] in thunder.core.outside_reads
        known = self._proxy_for.get(id(value))
        if known is not None:
            first = self._provenance[id(value)]
            if first is not holder:
                self._check(prims.check_is, holder, first)  # the trace assumed one object: it must stay one
            return known
        if issubclass(typ, torch.Tensor):
            return self._tensor_input(value, holder)
        if issubclass(typ, bool) or value is None or issubclass(typ, (str, bytes, torch.dtype, torch.device)):
            self._check(prims.check_value, holder, value)
            return value
        if issubclass(typ, (int, float)) and type(value) in (int, float):
            # A NaN stays the object it is, never a symbolic float (a new object): a dict or set finds a NaN key by
            # identity (``D[next(iter(D))]``), and no comparison or arithmetic of a NaN depends on its value anyway.
            nan = typ is float and value != value
            if self.symbolic and not nan:
                return self._number_input(value, holder)
            history = self.shape_history
            if history is not None and not nan:
                symbolic = self.automatic_dynamic and history.symbolic_number(holder.name, value)
                history.record_number(holder.name, value, symbolic)
                if symbolic:
                    return self._number_input(value, holder)
            self._check(prims.check_value, holder, value)
            return value
        if abc_subclass(typ, Number):
            self._check(prims.check_value, holder, value)
            return value
        if type(value) is tuple or (type(value) is frozenset and all(is_literal_key(k) for k in value)):
            self._check(prims.check_type, holder, type(value))
            seen = self._unpack_contents(value, holder, name)
            self._register(value, holder, seen)
            return seen
        if type(value) is torch.Size:  # a shape passed in: its dims are numbers (symbolic ones stay symbolic)
            self._check(prims.check_type, holder, torch.Size)
            seen = proxies.as_size(self._unpack_contents(tuple(value), holder, name))
            self._register(value, holder, seen)
            return seen
        if type(value) is slice or type(value) is range:
            # Read natively (``x[s]``, ``len(r)``): checked field by field, as reading ``s.stop`` is. A slice's
            # bounds may stay symbolic (indexing a tensor with them does); range() would read them natively.
            self._check(prims.check_type, holder, type(value))
            symbolic, self.symbolic = self.symbolic, self.symbolic and type(value) is slice
            try:
                attr_holder = functools.partial(self._attr_holder, holder)
                fields = [
                    self._read(("attr", id(value), a), getattr(value, a), functools.partial(attr_holder, a, value))
                    for a in ("start", "stop", "step")
                ]
            finally:
                self.symbolic = symbolic
            seen = type(value)(*fields) if type(value) is slice else value
            self._register(value, holder, seen)
            return seen
        if issubclass(typ, (list, tuple)) and type(value) not in (list, tuple):
            _check_sequence_subclass(value, self._member_paths.get(holder.name, holder.name))
        if issubclass(typ, tuple) and _rebuilt_as_tuple(type(value)):
            # Note [List and tuple subclasses]: a named tuple (``PackedSequence``, a user's record) or another
            # tuple subclass is seen as a copy of its type holding what its items unpack to, with its attributes.
            self._check(prims.check_type, holder, type(value))
            items = self._unpack_contents(tuple(value), holder, name)
            typ = type(value)
            seen = typ._make(items) if _is_namedtuple(typ) else typ(items) if _is_structseq(typ) else tuple.__new__(typ, items)
            self._register(value, holder, seen)
            return self._with_attributes(value, holder, seen)
        if type(value) in LAZY_TYPES or issubclass(typ, list):
            # Checked when the program first reads its contents (see Note [Outside containers]).
            self._check(prims.check_type, holder, type(value))
            if type(value) is collections.deque:  # how it drops items when full
                self._check(prims.check_expr, f"{holder.name}.maxlen == {value.maxlen}", (holder,))
            if type(value) in LAZY_TYPES:
                copy = value.copy()  # a defaultdict's keeps its default_factory, a deque its maxlen
            else:  # a list subclass (Note [List and tuple subclasses])
                copy = list.__new__(type(value))
                list.extend(copy, value)
            self._register(value, holder, copy)
            if type(value) not in LAZY_TYPES:
                self._with_attributes(value, holder, copy)
            self._keepalive.append(copy)
            self._lazy[id(copy)] = LazyContainer(holder, value, copy, name)
            return copy
        if issubclass(typ, dict):
            # A dict subclass (a Hugging Face ModelOutput passed back in as encoder_outputs): seen as a copy
            # holding what its items unpack to, so its methods (``__getitem__`` reading ``self.items()``
            # natively) give the program traced values; one its constructor cannot rebuild is seen as
            # itself (its values are unpacked when read through attributes). Changing it is refused.
            self._check(prims.check_type, holder, type(value))
            if all(is_literal_key(k) for k in value):
                seen = self._rebuilt_mapping(value, holder, name)
                if seen is not None:
                    self._register(value, holder, seen)
                    self._rebuilt[id(seen)] = holder
                    self._buffers.append((seen, _dict_items(seen), self._input_location(holder)))
                    return seen
                self._check_keys(holder, tuple(value))
                self._check_literal_items(holder, value)
            self._register(value, holder, value)
            return value
        if type(value) in (functools.partial, types.MethodType):
            # Descriptors make these afresh on each read (``functools.partialmethod``, a method read from
            # an instance): checked by what they hold, not by identity.
            self._check(prims.check_type, holder, type(value))
            symbolic, self.symbolic = self.symbolic, False  # numbers the call reads: constants (tensors: inputs)
            seen = {}
            try:
                for attr in ("func", "args", "keywords") if type(value) is functools.partial else ("__func__", "__self__"):
                    p = self._prologue_proxy(f"{holder.name}_{attr.strip('_')}")
                    self._emit(prims.unpack_attr, holder, attr, p, output=p)
                    if attr == "keywords":  # read by the call itself, not by the program: checked now
                        self._check(prims.check_type, p, dict)
                        seen[attr] = self._unpack_contents(value.keywords, p, p.name)
                    else:
                        seen[attr] = self.unpack_value(getattr(value, attr), p, p.name)
            finally:
                self.symbolic = symbolic
            self._register(value, holder, value)
            if type(value) is functools.partial:
                if not _same_items(seen["args"], value.args) or not _same_items(seen["keywords"], value.keywords):
                    self._call_instead(value, functools.partial(seen["func"], *seen["args"], **seen["keywords"]))
            elif seen["__self__"] is not value.__self__:  # a method of an input tensor, say
                self._call_instead(value, types.MethodType(seen["__func__"], seen["__self__"]))
            return value
        if type(value) is types.FunctionType and value.__code__ is _PARTIALMETHOD_CODE:
            # ``A.method`` of a ``functools.partialmethod``, read through the class, is made afresh on each
            # read: checked by what it is made of (the partialmethod, whose fields its code reads).
            self._check(prims.check_type, holder, types.FunctionType)
            for attr in ("__code__", _PARTIALMETHOD_ATTR):
                p = self._prologue_proxy(f"{holder.name}_{attr.strip('_')}")
                self._emit(prims.unpack_attr, holder, attr, p, output=p)
                self._check(prims.check_identity, p, getattr(value, attr))
            self._register(value, holder, value)
            return value
        if issubclass(typ, (types.FunctionType, types.BuiltinFunctionType, type, Symbol, functools.partial, types.MethodType)) or (
            issubclass(typ, types.ModuleType) and is_fixed_module(value)
        ):
            self._check(prims.check_identity, holder, value)
            if issubclass(typ, types.FunctionType):
                self._guard_function(value, holder)
                if not is_library_module(value.__module__ or "") and not is_installed_code(value.__code__):
                    self._register(value, holder, value)  # Note [Attributes of the user's functions]
            elif issubclass(typ, types.BuiltinMethodType) and isinstance(value.__self__, torch.Tensor):
                # ``t.add`` of an outside tensor: the tensor is an input, the call is the method of its proxy
                p = self._prologue_proxy(f"{holder.name}_self")
                self._emit(prims.unpack_attr, holder, "__self__", p, output=p)
                method = getattr(self.unpack_value(value.__self__, p, p.name), value.__name__, None)
                if method is not None:
                    self._call_instead(value, method)
            elif issubclass(typ, type) and not is_library_module(value.__module__):
                self._register(value, holder, value)  # its class attributes are read through attribute loads
            return value
        if issubclass(typ, types.ModuleType):  # the user's own module: its attributes are checked when read
            self._check(prims.check_identity, holder, value)
            self._register(value, holder, value)
            return value
        contents = prims.buffer_contents(value)
        if contents is not None and type(value) is bytearray:
            # Checked whole; the program changes a copy, which each call writes back (``_write_back_copies``).
            self._check(prims.check_type, holder, bytearray)
            self._check(prims.check_contents, holder, contents)
            copy = bytearray(value)
            self._register(value, holder, copy)
            self._keepalive.append(copy)
            self._copies[id(copy)] = (holder, copy, bytes(copy))
            self._copy_originals[id(copy)] = value
            return copy
        if contents is not None:  # read natively (``b[0]``): checked whole, and left unchanged (_check_buffers)
            self._check(prims.check_type, holder, type(value))
            self._check(prims.check_contents, holder, contents)
            self._buffers.append((value, contents, self._input_location(holder)))
            self._register(value, holder, value)
            return value
        if type(value) is iterators.ReplayableIterator or abc_subclass(typ, collections.abc.Iterator):
            return self._iterator_input(value, holder, name)
        if issubclass(typ, torch.nn.Module) and not self._module_paths:
            for path, sub in value.named_modules():
                self._module_paths.setdefault(id(sub), path)
        # Any other object: its type is checked, and each attribute the program reads is unpacked
        # and checked when it is read (see Note [Provenance]).
        self._check(prims.check_type, holder, type(value))
        self._register(value, holder, value)
        return value

    def _with_attributes(self, value: Any, holder: Proxy, seen: Any) -> Any:
        """``seen``, the program's copy of the list or tuple subclass ``value``, given ``value``'s attributes: each read
        from ``value`` by the prologue where the program reads it (Note [List and tuple subclasses])."""
        own = getattr(value, "__dict__", None)
        if own:
            seen.__dict__.update(own)
        for name in slot_names(type(value)):
            if hasattr(value, name):
                object.__setattr__(seen, name, getattr(value, name))
        self._provenance[id(seen)] = holder
        self._proxy_for[id(seen)] = seen  # (returned or stored as it is: the object itself)
        self._keepalive.append(seen)
        return seen

    # Note [A dict subclass's attributes]
    # The copy of an outside dict subclass that the program sees (``_rebuilt``) has the attributes its type gives a
    # copy. Attributes besides (``d.n = 1`` on a plain ``class D(dict)``) would be missing from it: such an object is
    # seen as itself. One with none when traced is checked to have none on later calls, so an attribute set between
    # calls (by the caller, or by the program: ``store_attr`` replays a store on the copy on the object) retraces
    # instead of the program reading the copy's "no such attribute" (``getattr(d, "n", 0)``) again.
    def _rebuilt_mapping(self, value: dict, holder: Proxy, name: str) -> dict | None:
        """A copy of the dict subclass ``value`` with its items unpacked, or None where its type cannot be
        rebuilt from its items (see ``unpack_value``)."""
        # Its items as stored, past an overriding ``__getitem__`` (transformers' ACT2FN makes a module per read).
        raw = type(value).__getitem__ is not dict.__getitem__
        items = {k: dict.__getitem__(value, k) for k in value} if raw else dict(value)
        attrs = mapping_attrs(value)
        typ = mapping_type(value)
        if isinstance(attrs, dict) and attrs:
            # Attributes besides its items (Note [Mappings with a constructor of their own]). Each an item or None (a
            # ``ModelOutput``'s fields): copied with them, the prologue checking that they still are. Otherwise
            # rebuilt by calling its type where that makes them again from the items as they are (an EasyDict).
            if _attributes_are_items(value, attrs):
                h = holder.name
                same = [f"[*{h}.__dict__] == {list(attrs)!r}"]
                for n, v in attrs.items():
                    same.append(f"{h}.__dict__[{n!r}] is {'None' if v is None else f'dict.__getitem__({h}, {n!r})'}")
                self._check(prims.check_expr, " and ".join(same), (holder,))
                seen = self._unpack_contents(items, holder, name, raw=raw)
                return rebuild_mapping(typ, seen, {n: None if v is None else seen[n] for n, v in attrs.items()})
            if not _remade_as_it_is(value, typ, items):
                return None
            return typ(self._unpack_contents(items, holder, name, raw=raw))
        if attrs is None and object_state(value):
            return None  # attributes besides its items that a copy made by its type would not have: seen as itself
        try:
            rebuild_mapping(typ, items, attrs)
        except Exception:
            return None
        if (attrs is None or attrs == {}) and hasattr(value, "__dict__"):  # none now: a later call checks that
            self._check(prims.check_expr, f"not {holder.name}.__dict__", (holder,))  # there still are none (Note
            # [A dict subclass's attributes]); not one whose attributes are its items (``self.__dict__ = self``)
        return rebuild_mapping(typ, self._unpack_contents(items, holder, name, raw=raw), attrs)

    def _register(self, obj: Any, holder: Proxy, seen_as: Any) -> None:
        self._provenance[id(obj)] = holder
        self._proxy_for[id(obj)] = seen_as
        self._keepalive.append(obj)

    def _unpack_contents(self, value: Any, holder: Proxy, name: str, *, raw: bool = False) -> Any:
        """The prologue's checks and unpacking of a container's items (of a dict, with ``raw``, through
        ``dict.__getitem__``: its type overrides ``__getitem__``); returns what the program sees."""
        if type(value) in (set, frozenset):
            self._check(prims.check_value, holder, frozenset(value))
            return type(value)(self._key_seen_as(k) for k in value)
        if isinstance(value, dict):
            keys = tuple(value)
            self._check_keys(holder, keys)
            seen = type(value)()
            for i, k in enumerate(keys):
                p = self._item_proxy(value[k], f"{name}_{k}" if is_literal_key(k) else f"{name}_key{i}")
                if raw:
                    self._emit(prims.unpack_call, dict.__getitem__, (holder, k), {}, p, output=p)
                else:
                    self._emit(prims.unpack_key, holder, k, p, output=p)
                seen[self._key_seen_as(k)] = self.unpack_value(value[k], p, p.name)
            return seen
        self._check(prims.check_expr, f"len({holder.name}) == {len(value)}", (holder,))
        items = [self._item_proxy(v, f"{name}_{i}") for i, v in enumerate(value)]
        self._emit(prims.unpack_sequence, holder, items, output=items)
        made = type(value) if type(value) in (list, tuple, collections.deque) else list  # (a list subclass's: a list)
        return made(self.unpack_value(v, p, p.name) for v, p in zip(value, items))

    def _item_proxy(self, value: Any, name: str) -> Proxy:
        """The prologue proxy of a container's item: a submodule (an item of ``ModuleList._modules``) is
        named by its path in the input module (``module_transformer_h_0``), anything else ``name``."""
        path = self._module_paths.get(id(value)) if isinstance(value, torch.nn.Module) else None
        if not path:
            return self._prologue_proxy(name)
        p = self._prologue_proxy("module_" + path.replace(".", "_"))
        self.prologue.input_paths[p.name] = path
        return p

    def _check_literal_items(self, holder: Proxy, value: dict) -> None:
        """The items of a dict subclass seen as itself that are numbers, strings or None: the program reads them
        natively, as the constants they are, so the prologue checks that they still are (floats by ``repr``: exact,
        NaN and -0.0 included)."""
        h, same = holder.name, []
        for k, v in dict.items(value):
            item = f"dict.__getitem__({h}, {k!r})"
            if v is None:
                same.append(f"{item} is None")
            elif type(v) is float:
                same.append(f"type({item}) is float and repr({item}) == {repr(v)!r}")
            elif type(v) in (int, bool, str):
                same.append(f"type({item}) is {type(v).__name__} and {item} == {v!r}")
        if same:
            self._check(prims.check_expr, " and ".join(same), (holder,))

    def _check_keys(self, holder: Proxy, keys: tuple) -> None:
        self._check(prims.check_keys, holder, keys)

    def _key_seen_as(self, key: Any) -> Any:
        """A key of an outside dict (an item of an outside set) as the program sees it. A tensor is the proxy the
        program has for it (an optimizer's ``state`` is keyed by the parameters it reads from ``param_groups``), so
        that ``state[p]`` finds it: where the program read it another way, the prologue checks that the tensor read
        so is this key; where it did not yet, the key is an input of its own (the tensor captured, which
        ``check_keys`` found in the dict), and a later read of it another way is checked to be it."""
        if not isinstance(key, torch.Tensor):
            return key
        p = self._proxy_for.get(id(key))
        holder = self._provenance.get(id(key))
        if isinstance(p, Proxy) and holder is not None:
            self._check(prims.check_identity, holder, key)
            return p
        holder = self._constant(key, "key")
        return self.unpack_value(key, holder, holder.name)

    def _iterator_input(self, it, holder: Proxy, name: str) -> iterators.TracedIterator:
        """An iterator argument: the program pulls items from it, and every call's prologue makes the same pulls
        (Note [Iterator arguments] in thunder.core.iterators)."""
        if type(it) is not iterators.ReplayableIterator:  # not an argument itself: the slow path did not wrap it
            loc = source_location()
            raise ThunderRuntimeError(
                f"{name} is an iterator ({type(it).__module__}.{type(it).__qualname__}) that the jitted function reads "
                f"from outside{f' (at {loc})' if loc else ''}, not one passed to it as an argument: thunder follows "
                "the items a program takes only from an iterator argument. Pass it as an argument, or pass the "
                "values it gives."
            )
        typ = type(it.source)
        view = self._prologue_proxy(f"{name}_iter")
        self._emit(prims.unpack_iterator, holder, typ, view, output=view)
        restorable = typ in iterators.RESTORABLE  # the prologue pulls from a copy: the computation advances it

        def on_item(i: int, item: Any) -> Any:
            self._check_constraints_so_far()
            p = self._prologue_proxy(f"{name}_{i}")
            self._emit(prims.unpack_next, view, p, output=p)
            if restorable:
                prims.advance_iterator(self._object_input(holder))
            return self.unpack_value(item, p, p.name)

        def on_end() -> None:
            self._emit(prims.check_iterator_end, view)
            if restorable:
                prims.advance_iterator(self._object_input(holder))

        def before() -> None:  # an item taken cannot be put back: first, would eager have failed already?
            if not restorable:
                self._raise_an_earlier_failure()

        traced = iterators.TracedIterator(it.view(), before, on_item, on_end, name, typ)
        self._register(it, holder, traced)
        return traced

    def _guard_home(self, fn: types.FunctionType, holder: Proxy) -> None:
        """A method of one of the user's classes (however the program found it: ``obj.method``, ``obj(...)`` through
        ``__call__``, ``obj[k]``, ``super().method``, a classmethod): the prologue checks the class still holds it
        under its name, so replacing it on the class retraces (Note [Methods read from objects] in
        ``thunder.core.outside_reads``). Classes defined inside functions are not found by name, and not checked."""
        owner_path, _, name = fn.__qualname__.rpartition(".")
        if not owner_path or "<" in owner_path:
            return
        owner: Any = sys.modules.get(fn.__module__)
        for part in owner_path.split("."):
            owner = getattr(owner, part, None)
        if not isinstance(owner, type):
            return
        slot = owner.__dict__.get(name)
        if (slot.__func__ if isinstance(slot, (classmethod, staticmethod)) else slot) is not fn:
            return
        key = ("method", id(owner), name)  # shared with ``_guard_method``: one check per class and name
        if key in self._asked_hasattr:
            return
        self._asked_hasattr.add(key)
        if isinstance(slot, classmethod):  # ``Owner.name`` binds anew on each read: the stored one is compared
            cls = self._constant(owner, owner.__name__)
            stored = f"getattr({cls.name}.__dict__.get({name!r}), '__func__', None)"
            self._check(prims.check_expr, f"{stored} is {holder.name}", (cls, holder))
        else:
            self._keepalive.append(owner)
            self._check(prims.check_class_attr, owner, name, fn)

    def _guard_function(self, fn: types.FunctionType, holder: Proxy | None = None) -> None:
        """A function's defaults are part of what a call of it computes: the prologue checks they are the
        same objects (assigning ``f.__defaults__`` makes new ones), and each value of ``__kwdefaults__``, a dict
        that can change in place. A tensor among them is an input, as a
        tensor read through a global is (so a change in place is seen), and a list, dict or set is an outside
        container (Note [Outside containers]: what the program changes in it is replayed on every call); calls
        of ``fn`` bind what the program sees for them."""
        if id(fn) in self._guarded_functions:
            return
        self._guarded_functions.add(id(fn))
        if is_library_module(getattr(fn, "__module__", None) or "") or is_installed_code(fn.__code__):
            return  # a library's function keeps its defaults (its globals are still checked when read)
        if self.checks:  # the user's own code: IPython's autoreload edits a function in place (``fn.__code__ = new``)
            holder = holder or self._constant(fn, fn.__name__)
            code = self._prologue_proxy(f"{holder.name}_code")
            self._emit(prims.unpack_attr, holder, "__code__", code, output=code)
            self._check(prims.check_identity, code, fn.__code__)
            self._guard_home(fn, holder)
        seen = {}
        for attr in ("__defaults__", "__kwdefaults__"):
            current = getattr(fn, attr)
            if current is None:
                continue
            keys = tuple(current) if attr == "__kwdefaults__" else range(len(current))
            inputs = [k for k in keys if _is_input_default(current[k])]
            if attr == "__kwdefaults__" and self.checks:
                inputs = list(keys)  # a dict: ``f.__kwdefaults__["k"] = 7`` keeps its identity, so each value is checked
            if not inputs and not self.checks:
                continue
            holder = holder or self._constant(fn, fn.__name__)
            p = self._prologue_proxy(f"{holder.name}{attr.rstrip('_')}")
            self._emit(prims.unpack_attr, holder, attr, p, output=p)
            self._check(prims.check_identity, p, current)
            if inputs:
                symbolic, self.symbolic = self.symbolic, False  # constants, as the identity check makes them
                try:
                    items = dict(current) if attr == "__kwdefaults__" else list(current)
                    for k in inputs:
                        item = self._prologue_proxy(f"{p.name}_{k}")
                        self._emit(prims.unpack_key, p, k, item, output=item)
                        items[k] = self.unpack_value(current[k], item, item.name)
                    seen[attr] = items if attr == "__kwdefaults__" else tuple(items)
                finally:
                    self.symbolic = symbolic
        if seen:
            defaults = seen.get("__defaults__", fn.__defaults__)
            bound = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, defaults, fn.__closure__)
            bound.__kwdefaults__ = seen.get("__kwdefaults__", fn.__kwdefaults__)
            bound.__qualname__ = fn.__qualname__
            self._guarded_functions.add(id(bound))
            self._call_instead(fn, bound)

    def _call_instead(self, fn: Callable, instead: Callable) -> None:
        """Calls of the outside callable ``fn`` run ``instead``: ``fn`` with the values the program sees for
        the tensors (and other outside values) it holds, a partial's arguments or a function's defaults."""
        self._calls_instead[id(fn)] = instead
        self._keepalive.extend((fn, instead))

    def _tensor_input(self, t: torch.Tensor, holder: Proxy) -> TensorProxy:
        if torch.nn.parameter.is_lazy(t):  # materialised by the module's first call, which runs eagerly
            raise MakesParameters(
                f"{self._member_paths.get(holder.name, holder.name)} is an uninitialized parameter of a lazy module, "
                "which its first call materialises (Note [Parameters made by the program] in thunder/__init__.py); "
                "this call would make it again. Call the module once before jitting it."
            )
        if is_dtensor(t):
            raise dtensor_error(self._member_paths.get(holder.name, holder.name))
        if t.layout is not torch.strided or t.is_nested or t.is_quantized:
            raise layout_error(self._member_paths.get(holder.name, holder.name), t)
        if type(t) is not torch.Tensor:
            self._check(prims.check_type, holder, type(t))  # a Parameter stays a Parameter
        # A tensor a transform made stand for a larger one (an fsdp shard) is traced with that one's shape; the
        # prologue checks its own (the transform gives the program what it traced, Note [Sharding] in fsdp).
        traced_shape = getattr(t, "_thunder_traced_shape", None)
        symbolic = self._symbolic_dims(holder.name, t) if traced_shape is None else frozenset()
        with tracectx(self.computation):
            name = holder.name if holder.name not in self.computation.names else None
            if symbolic:
                dims = [self._prologue_proxy(f"{holder.name}_{i}") for i in range(t.ndim)]
                self.computation.names.update(dims[i].name for i in symbolic)
                shape = tuple(SymInt(n, d.name) if i in symbolic else n for i, (n, d) in enumerate(zip(t.shape, dims)))
                p = tensorproxy_from_tensor(t, name, shape=shape)
            else:
                p = tensorproxy_from_tensor(t, name, shape=traced_shape)
        if symbolic:
            self._check(prims.check_tensor_rank, holder, t.ndim, t.device, t.dtype, t.requires_grad)
            self._emit(prims.unpack_shape, holder, dims, output=dims)
            constant = [i for i in range(t.ndim) if i not in symbolic]
            if constant:
                expr = " and ".join(f"{dims[i].name} == {t.shape[i]}" for i in constant)
                self._check(prims.check_expr, expr, tuple(dims[i] for i in constant))
            self.dims.extend((dims[i], p.shape[i]) for i in sorted(symbolic))
        else:
            self._check(prims.check_tensor, holder, tuple(t.shape), t.device, t.dtype, t.requires_grad)
        if self.shape_history is not None:
            self.shape_history.record(holder.name, tuple(t.shape), symbolic)
        path = self._member_paths.get(holder.name)
        if path is not None:
            self.computation.input_paths[p.name] = path
        introspection.note_input(p, t, functools.partial(self._input_location, holder))
        self._register(t, holder, p)
        self.inputs.append((holder, p))
        self._tensor_inputs[id(p)] = (holder, t)
        return p

    def _symbolic_dims(self, name: str, t: torch.Tensor) -> frozenset[int]:
        """The dims of input ``name`` the trace keeps symbolic: all under symbolic values, those whose size changed
        under automatic dynamic shapes (Note [Automatic dynamic shapes] in ``thunder.core.shape_history``)."""
        if self.symbolic:
            return frozenset(range(t.ndim))
        if self.automatic_dynamic:
            return self.shape_history.symbolic_dims(name, t.shape)
        return frozenset()

    def _input_location(self, holder: Proxy) -> str:
        """An input named for an error: where the program reads it, or for an argument (bound before the program
        runs), the function it is an argument of."""
        loc = source_location(self._module_paths)
        if loc is not None:
            return f"{holder.name} (read at {loc})"
        return f"{holder.name} (an argument of {self._definition})" if self._definition else holder.name

    def _check_buffers(self) -> None:
        """Refuses a trace whose program changed an outside buffer (``b.extend(...)``, ``arr.fill(0)``), or the copy
        of an outside dict subclass natively (``Counter.update`` counts in C): the change would happen once, while
        tracing, not on each call."""
        for value, contents, where in self._buffers:
            now = _dict_items(value) if isinstance(value, dict) else prims.buffer_contents(value)
            if now != contents:
                raise ThunderRuntimeError(
                    f"the program changed {where}, a {type(value).__name__} from outside the jitted function, in "
                    "place; thunder does not replay changes to such objects (a buffer, a dict subclass changed by native "
                    "code). Change a copy and return it instead"
                )

    def _check_strides(self) -> None:
        """Inputs whose layout the program depended on (see Note [Strides of traced tensors])."""
        for holder, t in self._tensor_inputs.values():
            p = self._proxy_for.get(id(t))
            if getattr(p, "strides_read", False):
                expr = f"{holder.name}.stride() == {tuple(t.stride())} and {holder.name}.storage_offset() == {t.storage_offset()}"
                self._check(prims.check_expr, expr, (holder,))

    def bind_arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Unpacks the call's arguments as the program will see them."""
        if getattr(self.fn, "_thunder_calls_module", False) and args:
            # ThunderModule calls ``_call_module(module, *inputs)``: name inputs after forward's parameters.
            params = ["module", *_parameter_names(args[0].forward, len(args) - 1, kwargs)]
        else:
            params = _parameter_names(self.fn, len(args), kwargs)
        self._definition = _definition(self.fn, args)
        self._bind_callable(self.fn)
        args_p, kwargs_p = self._prologue_proxy("args"), self._prologue_proxy("kwargs")
        self.prologue.args = []
        self._emit(prims.check_args_structure, args_p, kwargs_p, len(args), tuple(kwargs))
        holders = [self._prologue_proxy(n) for n in params[: len(args)]]
        if holders:
            self._emit(prims.unpack_sequence, args_p, holders, output=holders)
        seen_args = tuple(self.unpack_value(v, h, h.name) for v, h in zip(args, holders))
        seen_kwargs = {}
        for k, v in kwargs.items():
            h = self._prologue_proxy(k)
            self._emit(prims.unpack_key, kwargs_p, k, h, output=h)
            seen_kwargs[k] = self.unpack_value(v, h, h.name)
        if isinstance(self.fn, functools.partial):
            # The partial's own arguments are inputs too (read from it on every call, so changing
            # ``p.keywords`` is seen); the program is what it wraps.
            holder = self._constant(self.fn, "partial")
            bound = self._prologue_proxy("partial_args")
            self._emit(prims.unpack_attr, holder, "args", bound, output=bound)
            keywords = self._prologue_proxy("partial_keywords")
            self._emit(prims.unpack_attr, holder, "keywords", keywords, output=keywords)
            seen_args = (*self.unpack_value(self.fn.args, bound, bound.name), *seen_args)
            partial_kwargs = self.unpack_value(self.fn.keywords, keywords, keywords.name)
            if id(partial_kwargs) in self._lazy:  # read here, by thunder, not by an instruction
                self._read_contents(partial_kwargs)
            seen_kwargs = {**partial_kwargs, **seen_kwargs}
        return seen_args, seen_kwargs

    def _bind_callable(self, fn: Callable) -> None:
        """The jitted callable's own state: its defaults, and the object a bound method (or a callable
        object) reads its attributes from, captured by identity."""
        if isinstance(fn, functools.partial):
            fn = fn.func
        receiver = fn.__self__ if isinstance(fn, types.MethodType) else None
        func = fn.__func__ if isinstance(fn, types.MethodType) else fn
        if isinstance(func, types.FunctionType):
            self._guard_function(func)
        elif not isinstance(func, (types.BuiltinFunctionType, type)):
            receiver = func  # a callable object
        if receiver is not None and not isinstance(receiver, (types.ModuleType, type)):
            self.unpack_value(receiver, self._constant(receiver, "self"), "self")


def _definition(fn: Callable, args: tuple) -> SourceLocation | None:
    """Where the jitted program is defined (``def f(x):``), or None for one that is not Python code."""
    target = args[0].forward if getattr(fn, "_thunder_calls_module", False) and args else fn
    while isinstance(target, functools.partial):
        target = target.func
    if isinstance(target, torch.nn.Module):
        target = target.forward
    code = plain_attribute(plain_attribute(target, "__func__", target), "__code__")
    return SourceLocation(code.co_filename, code.co_firstlineno, code.co_qualname) if code is not None else None


# Note [List and tuple subclasses]
# A list or tuple subclass passed in (a user's ``class Batch(list)``, a named tuple with attributes of its own) was an
# object like any other: its items, read natively by ``xs[0]``, were the caller's tensors, not traced values. It is seen
# as a copy of its own type: a tuple's holding what its items unpack to, a list's as an outside list is (Note [Outside
# containers]: read lazily, its changes replayed), each with the object's attributes, which the program reads through
# the object's path. Its type may add methods and attributes, not replace what CPython and the prologue read natively
# (iteration, length, items, a list's changes): such a type is refused with a clear error.
_HEAP_TYPE = 1 << 9
_READ_NATIVELY = ("__iter__", "__len__")  # by the prologue
_WRITTEN_NATIVELY = ("__setitem__", *sorted(_MUTATING_METHODS))  # by the replay of a list's changes


def _check_sequence_subclass(value: Any, where: str) -> None:
    base = list if isinstance(value, list) else tuple
    names = (*_READ_NATIVELY, *_WRITTEN_NATIVELY) if base is list else _READ_NATIVELY
    replaced = [n for n in names if type(lookup_type_attr(type(value), n)) is types.FunctionType]
    if replaced:
        raise ThunderValueError(
            f"{where} is a {type(value).__qualname__}, a {base.__name__} subclass whose {', '.join(replaced)} "
            f"{'is' if len(replaced) == 1 else 'are'} Python code: thunder.jit traces a {base.__name__} subclass's items "
            f"where its type keeps {base.__name__}'s own. Pass {base.__name__}(x) (and the attributes apart), or call "
            "this function without thunder.jit"
        )


def _rebuilt_as_tuple(typ: type) -> bool:
    """Whether the program sees a copy of a tuple of type ``typ`` (Note [List and tuple subclasses]): a named tuple, a
    struct sequence whose fields are its items, a tuple subclass of the user's."""
    if _is_namedtuple(typ) or _is_structseq(typ):
        return True
    return bool(typ.__flags__ & _HEAP_TYPE) and not hasattr(typ, "n_sequence_fields")


def _is_structseq(typ: type) -> bool:
    """A C struct sequence whose fields are all items (``torch.return_types.max``, not ``os.stat_result``): made from a
    sequence of them."""
    n = getattr(typ, "n_sequence_fields", None)
    return isinstance(n, int) and getattr(typ, "n_fields", None) == n


def _is_namedtuple(typ: type) -> bool:
    return callable(getattr(typ, "_make", None)) and isinstance(getattr(typ, "_fields", None), tuple)


def _dict_items(d: dict) -> list:
    """A dict's items, compared by identity of the values (traced values have no usable ``==``)."""
    return [(k, id(v)) for k, v in dict.items(d)]


def _is_input_default(x: Any) -> bool:
    """A default value the prologue unpacks (see ``_guard_function``): a tensor, a tuple holding one, a list, dict
    or set the program may change, or an object whose attributes it reads (``def update(opt=opt)``: its tensors
    are the call's, not constants of the trace)."""
    if type(x) is tuple:
        return any(isinstance(v, torch.Tensor) or (type(v) is tuple and _is_input_default(v)) for v in x)
    if isinstance(x, torch.Tensor) or type(x) in LAZY_TYPES:
        return True
    return hasattr(x, "__dict__") and not isinstance(x, _NOT_OBJECT_DEFAULTS) and not is_code_like(x)


_NOT_OBJECT_DEFAULTS = (type, types.FunctionType, types.BuiltinFunctionType, types.MethodType, types.ModuleType,
                        functools.partial)  # fmt: skip


def _same_items(a: Any, b: Any) -> bool:
    """Whether two tuples (or dicts) hold the same objects."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(a[k] is b[k] for k in a)
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def is_literal_key(x: Any) -> bool:
    """Whether ``x`` prints as a literal in generated code (so it can be a checked key or element)."""
    if type(x) in (str, int, float, bool, type(None), complex):
        return True
    return type(x) is tuple and all(is_literal_key(v) for v in x)


def _parameter_names(fn: Callable, nargs: int, kwargs: dict) -> list[str]:
    """Names for the positional arguments of a call (parameter names where known)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return [f"arg{i}" for i in range(nargs)]
    names = []
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
        elif p.kind is p.VAR_POSITIONAL:
            names.extend(f"{p.name}{i}" for i in range(nargs - len(names)))
            break
    names.extend(f"arg{i}" for i in range(len(names), nargs))
    return names[:nargs]


def _attributes_are_items(value: dict, attrs: dict) -> bool:
    """Whether each of the attributes ``attrs`` of the dict subclass ``value`` (held in its ``__dict__``) is the
    item of its name (``mapping_attrs``' ``ATTRIBUTE_IS_ITEM``) or None."""
    return not slot_names(type(value)) and all(v is None or v is ATTRIBUTE_IS_ITEM for v in attrs.values())


def _remade_as_it_is(value: dict, typ: Callable, items: dict) -> bool:
    """Whether calling ``typ`` with ``value``'s items makes its items and attributes again: the same objects, or
    equal numbers and strings."""
    try:
        remade = typ(items)
    except Exception:
        return False

    def same(a: Any, b: Any) -> bool:
        return a is b or (type(a) is type(b) and type(a) in (int, float, str, bool) and a == b)

    ours, theirs, attrs = dict(dict.items(remade)), object_state(remade) or {}, object_state(value) or {}
    return (
        list(ours) == list(items) and all(same(ours[k], items[k]) for k in items)
        and theirs.keys() == attrs.keys() and all(same(v, attrs[k]) for k, v in theirs.items())
    )  # fmt: skip
