"""Side effects: what the program does to outside state, done while tracing and replayed on every call.

Assignments to outside globals, closure cells and attributes are made while tracing (the rest of the
trace sees them), undone when tracing ends, and replayed by the computation, in order, with each call's
values (``thunder.core.replays``). Outside lists, dicts and sets are copied for the program
(Note [Outside containers]); a copy the program changed is written back by every call.
Changes thunder cannot replay (to other outside containers) are refused with an error.

Note [Outside containers]
An outside list, dict, set or deque (whose ``maxlen`` the prologue checks) is copied for the program, and its contents are checked only once the
program reads them: a native operation on it (indexing, iterating, ``len``, ``in``, truth, passing it
to a native function, storing it somewhere) is reported by the interpreter (Note [Operand reads]),
and the prologue then checks and unpacks its items; after each call the container holds what the
program left in it. Until then, changes that do not depend on the contents (``append``, a dict's
``d[k] = v``, ``set.add``) are recorded and made again by every call on the object the path holds, so
a function that logs into a global list does not recompile on every call. A ``defaultdict`` is such a dict
too (its copy keeps the ``default_factory``): reading a missing key reads its contents, and the insertion the
factory makes (called under the interpreter, ``protocols.getitem``) is written back like any other change.
A change is made by the computation where the program made it (a read container's contents are written back
whole after its last change the tracer saw), so a call that fails at run time after it (an index out of range)
leaves the container changed, as eager does. An outside bytearray, whose contents the prologue checks whole, is
copied for the program too; what the program leaves in the copy is written back by each call.

``SideEffectsMixin`` is the part of ``Tracer`` (``thunder.core.jit_ext``) that handles them; the state it
keeps is set up by ``Tracer.__init__``.

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import sys
import types
from collections.abc import Callable
from typing import Any

import torch

from thunder.core import introspection, prims
from thunder.core.errors import ThunderRuntimeError, UnsupportedOpError
from thunder.core.interpreter.errors import DELETED, NULL
from thunder.core.interpreter.execution import call as interpreter_call
from thunder.core.interpreter.execution import lookup_type_attr
from thunder.core.interpreter.instructions import call_operands
from thunder.core.interpreter.protocols import property_store
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.lifting import (
    ABSENT,
    BUILTIN_VALUES,
    NOT_REBUILT,
    all_reachable_ids,
    cell_contents,
    children_of,
    held_by_callable,
    holds,
    holds_tensors,
    lift_objects,
    made_closure,
    reachable_ids,
)
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import (
    ObjectWithProxies,
    mapping_attrs,
    mapping_type,
    object_state,
    rebuild_mapping,
    slot_names,
)
from thunder.core.symbol import Symbol, mutates
from thunder.core.symbol_lookup import bound_self, plain_attribute
from thunder.core.tracectx import get_tracectx
from thunder.core.user_code import (
    is_code_like,
    is_installed_code,
    is_library_module,
    is_nondeterministic,
    is_thunder_module,
    is_user_namespace,
    source_location,
)

# Outside containers copied for the program and read lazily; the changes to each that need not read its contents.
LAZY_TYPES = (list, dict, collections.OrderedDict, collections.defaultdict, set, collections.deque)
_PURE_WRITES = {
    list: frozenset({"append", "extend", "insert", "clear"}),
    collections.deque: frozenset({"append", "appendleft", "extend", "extendleft", "clear"}),
    dict: frozenset({"update", "clear", "__setitem__"}),
    collections.OrderedDict: frozenset({"update", "clear", "__setitem__"}),
    collections.defaultdict: frozenset({"update", "clear", "__setitem__"}),
    set: frozenset({"add", "update", "discard", "clear"}),
}


def _pure_writes(container: Any) -> frozenset:
    """The changes to an outside container that need not read it (a list subclass's are a list's: Note [List and tuple
    subclasses] in thunder.core.provenance)."""
    return _PURE_WRITES.get(type(container)) or (_PURE_WRITES[list] if isinstance(container, list) else frozenset())


@dataclasses.dataclass
class LazyContainer:
    """An outside container whose contents the program has not read yet: ``copy`` is what it sees, ``writes``
    the changes it made (Note [Outside containers])."""

    holder: Proxy
    original: Any
    copy: Any
    name: str
    writes: list = dataclasses.field(default_factory=list)


# Methods that mutate the builtin container they are bound to.
_MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "add", "discard",
     "sort", "reverse", "__setitem__", "__delitem__", "appendleft", "extendleft", "popleft", "rotate"}
)  # fmt: skip

# What a restore helper is given for a global, cell or attribute that had no value of its own.
class SideEffectsMixin:
    """``Tracer``'s handling of what the program does to outside state."""

    # --- outside containers (Note [Outside containers]) -------------------------------------
    def _read_contents(self, copy: Any) -> None:
        """The program is about to read an outside container's contents: from now on they are checked,
        unpacked, and the container ends each call as the program left it (see Note [Outside containers])."""
        lazy = self._lazy.pop(id(copy))
        seen = self._unpack_contents(lazy.original, lazy.holder, lazy.name)
        first = _contents(seen)
        copy.clear()
        if isinstance(copy, (list, collections.deque)):
            copy.extend(seen)
        else:
            copy.update(seen)
        for method, args in lazy.writes:
            getattr(copy, method)(*args)
        if lazy.writes:  # the computation makes them where the program made them (``_record_write``)
            self._copy_at_read[id(copy)] = _contents(copy)
        self._copies[id(copy)] = (lazy.holder, copy, first)
        self._copy_originals[id(copy)] = lazy.original

    def _read_operand_containers(self, inst, values) -> None:
        """The outside containers an instruction uses natively (Note [Operand reads]) are read."""
        name = inst.opname
        if name == "CALL" or name == "CALL_KW":
            fn, args = call_operands(values)
            receiver = bound_self(fn)
            if id(receiver) in self._lazy and plain_attribute(fn, "__name__") not in _pure_writes(receiver):
                self._read_contents(receiver)
            if self._interpreted(fn):  # its own instructions report what it reads
                return
            values = args
        elif name == "STORE_SUBSCR":  # the container's side is decided by store_subscr
            values = (values[0], values[2])
        self._read_lazies_in(values, 2)

    @functools.cached_property
    def _interpreted_functions(self) -> dict:
        """``_is_interpreted`` of the plain functions called so far: decided by the function alone."""
        return {}

    def _interpreted(self, fn: Any) -> bool:
        """``_is_interpreted(fn)``, asked once per plain function of a trace (it is asked at every call)."""
        if type(fn) is not types.FunctionType:
            return _is_interpreted(fn, self.symbol_lookup)
        known = self._interpreted_functions.get(fn)
        if known is None:
            known = self._interpreted_functions[fn] = _is_interpreted(fn, self.symbol_lookup)
        return known

    def _read_lazies_in(self, values, depth: int) -> None:
        """Outside containers among ``values`` are read, also inside tuples, lists and dicts the interpreter
        built without an instruction (a frame's ``*args`` and ``**kwargs``)."""
        lazy = self._lazy
        for v in values:
            found = lazy.get(id(v))
            if found is not None and found.copy is v:
                self._read_contents(v)
            elif depth and type(v) in (tuple, list, dict):
                self._read_lazies_in(v.values() if type(v) is dict else v, depth - 1)

    def _write(self, copy: Any, method: str, args: tuple) -> None:
        """A change to an outside container whose contents were not read: made now, and made again at the
        end of every call on the object the path holds then (``log.append(x)`` need not check ``log``)."""
        if method in ("extend", "extendleft", "update"):
            args = tuple(dict(a) if method == "update" else list(a) for a in args)
        getattr(copy, method)(*args)
        self._record_write(self._lazy[id(copy)], method, args)

    def _record_write(self, lazy: LazyContainer, method: str, args: tuple) -> None:
        """The computation makes the change where the program made it, so a call that fails later at run time
        leaves it made, as eager does; with the values as they are at the end (``lift_stored_objects_again``: Note
        [Objects the program makes])."""
        lazy.writes.append((method, args))
        prims.container_call(self._object_input(lazy.holder), method, self.escaping(args))
        self._escapes_again(2, args)

    def _changed_copy(self, copy: Any) -> None:
        """The program changes an outside container it has read: the computation writes it back after the last
        such change (``_write_back_copies``), so a call that fails at run time after it leaves it changed."""
        bsyms = self.computation.bound_symbols
        self._copy_changed_after[id(copy)] = bsyms[-1] if bsyms else None

    def _container_method(self, fn: Callable, receiver: Any) -> Callable | None:
        """What a call of a builtin method that changes its container (``append``, ``__setitem__``) becomes when
        the container is from outside: a recorded change, a sharp edge or a refusal; None for anything else."""
        if not (isinstance(fn, (types.BuiltinMethodType, types.MethodWrapperType)) and fn.__name__ in _MUTATING_METHODS):
            return None
        if id(receiver) in self._object_dicts:
            return self._object_dict_call(receiver, fn.__name__)
        lazy = self._lazy.get(id(receiver))
        if lazy is not None and lazy.copy is receiver and fn.__name__ in _pure_writes(receiver):
            return self._lazy_write_call(receiver, fn.__name__)
        if id(receiver) in self._copies:
            self._changed_copy(receiver)
            return self._sharp_call(fn, f"Mutating a {type(receiver).__name__} from outside the function with .{fn.__name__}()")
        if id(receiver) in self._rebuilt or (
            id(receiver) in self._provenance and not isinstance(receiver, (types.ModuleType, type))
        ):
            return self._refuse_mutation(fn)
        return None

    def _lazy_write_call(self, copy: Any, method: str) -> Callable:
        def call(*args, **kwargs):
            self.sharp_edge(f"Mutating a {type(copy).__name__} from outside the function with .{method}()", replayed=True)
            if kwargs:  # ``d.update(act=y)``: the keywords are one more mapping
                if method != "update":
                    raise TypeError(f"{type(copy).__name__}.{method}() takes no keyword arguments")
                args = (dict(*args, **kwargs),)
            self._write(copy, method, args)

        return call

    # Note [Writes into an object's __dict__]
    # ``obj.__dict__.pop("name", None)``, ``vars(obj)["n"] = 1``, ``obj.__dict__.update(...)`` on an object from
    # outside (transformers' per-layer configs do the first to a ``copy.copy`` of the model's config in the forward)
    # change its attributes past its type's ``__setattr__``: they are made as what they are, stores and deletions of
    # its attributes by ``object.__setattr__`` / ``object.__delattr__`` (``store_attr(raw=True)``), replayed on every
    # call (a write through the dict was made once, while tracing). Where a name is not one an ``object.__setattr__``
    # would store in the dict (not a str, or a data descriptor of the type's), the write stays a clear error.
    def _object_dict_call(self, receiver: dict, method: str) -> Callable:
        """A call of a method that changes the ``__dict__`` of an outside object (Note [Writes into an object's
        __dict__]): run on a copy of its items, then made as the attribute stores that change them so."""
        table, owner = self._object_dicts[id(receiver)]
        if _is_module_globals(table):
            return self._refuse_object_dict_write

        def call(*args: Any, **kwargs: Any) -> Any:
            if id(receiver) in self._lazy:
                self._read_contents(receiver)
            after = dict(receiver)
            result = getattr(after, method)(*args, **kwargs)  # eager's result and errors
            changes = {name: DELETED for name in receiver.keys() - after.keys()}
            changes.update({k: v for k, v in after.items() if k not in receiver or receiver[k] is not v})
            self._store_through_object_dict(owner, table, changes)
            if receiver is not table:
                receiver.clear()
                receiver.update(after)
            return result

        return call

    def _store_through_object_dict(self, owner: Any, table: dict, changes: dict) -> None:
        """``changes`` (name -> value or ``DELETED``) written into ``owner``'s ``__dict__``, ``table``, as raw
        attribute stores (Note [Writes into an object's __dict__])."""
        cls = type(owner)
        for name in changes:
            descriptor = lookup_type_attr(cls, name) if type(name) is str else NULL
            if type(name) is not str or hasattr(type(descriptor), "__set__") or hasattr(type(descriptor), "__delete__"):
                self._refuse_object_dict_write()
        for name, value in changes.items():
            if not self.store_attr(owner, name, value, raw=True):
                if value is DELETED:
                    table.pop(name, None)
                else:
                    table[name] = value

    def _refuse_object_dict_write(self, *args: Any, **kwargs: Any) -> None:
        raise ThunderRuntimeError(
            f"Changing an object from outside the jitted function through its __dict__, vars() or globals() is not "
            f"supported (at {source_location()}): the change would be made once, while tracing. Set the attribute "
            "instead (obj.name = value, setattr(obj, name, value); a global: globals()[name] = value or a `global "
            "name` statement): thunder replays that on every call."
        )

    def _refuse_mutation(self, fn: Callable) -> Callable:
        def call(*args, **kwargs):
            raise ThunderRuntimeError(
                f"Changing a {type(fn.__self__).__name__} from outside the jitted function with .{fn.__name__}() is "
                f"not supported (at {source_location()}): thunder replays changes to outside lists, dicts and sets, "
                "not to other containers. Return the new value instead, or change it outside the function."
            )

        return call

    def _sharp_call(self, fn: Callable, what: str) -> Callable:
        def call(*args, **kwargs):
            self.sharp_edge(what, replayed=True)
            return fn(*args, **kwargs)

        return call

    # Assignments to outside state: done now (the rest of the trace sees them), undone when tracing
    # ends, and replayed by the computation on every call (see Note [What a trace relied on]).
    def store_global(self, globals_dict: dict, name: str, value: Any) -> None:
        if is_thunder_module(globals_dict):
            return
        self.sharp_edge(f"Assigning the global {name!r}", replayed=True)
        key = ("global", id(globals_dict), name)
        self._remember(key, lambda: globals_dict.get(name, ABSENT), lambda old: _restore_item(globals_dict, name, old))
        deleted = value is DELETED
        prims.store_global(globals_dict, name, None if deleted else self.escaping(value), deleted)
        self._note_region_store(key)
        if not deleted:
            self._escapes_again(2, value)

    def store_deref(self, code, name: str, value: Any, cell) -> None:
        if id(cell) in self._internal_cells:
            return
        self.sharp_edge(f"Assigning the closure variable {name!r} of an enclosing function", replayed=True)
        self._remember(("cell", id(cell)), lambda: cell_contents(cell), lambda old: _restore_cell(cell, old))
        self._keepalive.append(cell)
        prims.store_cell(cell, self.escaping(value))
        self._note_region_store(("cell", id(cell)))
        self._escapes_again(1, value)

    def store_attr(self, obj: Any, name: str, value: Any, raw: bool = False) -> bool:
        """The program's ``obj.name = value`` (``value`` is ``DELETED`` for a ``del``; ``raw``: by
        ``object.__setattr__``, past the type's own): true where this made the store (an attribute of a traced tensor,
        ``set_tensor_attribute``; a ``__setattr__`` of the user's class, interpreted), else it records what the store
        changes outside and the caller makes it."""
        self.refuse_a_made_parameter(value)
        if isinstance(obj, TensorProxy) and value is not DELETED and not hasattr(torch.Tensor, name):
            self.set_tensor_attribute(obj, name, value)
            return True
        if isinstance(obj, TensorProxy) and name == "grad":
            self.set_grad(obj, None if value is DELETED else value)
            return True
        if isinstance(obj, TensorProxy) and name == "data":
            self.set_data(obj, value)
            return True
        if isinstance(obj, TensorProxy) and name == "requires_grad":  # as ``obj.requires_grad_(value)``
            if not isinstance(value, bool):  # eager's error, ``del t.requires_grad`` included
                raise RuntimeError("requires_grad must be a bool")
            self.set_requires_grad(obj, value)
            return True
        if not raw and (fset := _module_property_store(obj, name, value)) is not None:
            interpreter_call(current_runtime(), fset, (obj,) if value is DELETED else (obj, value))
            return True
        if not raw and (slot := _users_setattr(obj, value is DELETED)) is not None:
            interpreter_call(current_runtime(), slot, (obj, name) if value is DELETED else (obj, name, value))
            return True
        if type(name) is str and (store := _users_descriptor_store(obj, name, value is DELETED)) is not None:
            interpreter_call(current_runtime(), store[0], (store[1], obj) if value is DELETED else (*store[1:], obj, value))
            return True
        # (an outside dict subclass is seen as a copy, ``_rebuilt``: the store is made on it and replayed on the object)
        holder = self._provenance.get(id(obj)) or self._rebuilt.get(id(obj))
        if holder is None and (isinstance(obj, torch.nn.Module) or is_user_namespace(obj)):
            holder = self._captured_outside(obj)
        if holder is None or isinstance(obj, Proxy):
            return False
        self.sharp_edge(f"Setting attribute {name!r} of an object from outside the function", replayed=True)
        key = ("attr", id(obj), name)
        self._remember(key, lambda: _own_attribute(obj, name), lambda old: _restore_attr(obj, name, old))
        deleted = value is DELETED
        prims.store_attr(self._object_input(holder), name, None if deleted else self.escaping(value), deleted, raw)
        self._note_region_store(key)
        if not deleted:
            self._escapes_again(2, value)
        self._store_in_dict_copy(obj, name, value)
        return False

    def _store_in_dict_copy(self, obj: Any, name: str, value: Any) -> None:
        """``obj.name = value`` where the program holds a copy of ``obj.__dict__`` (``vars(obj)``, a class's
        ``__dict__``): the copy, a view of the attributes in eager, shows the store (Note [Reads and writes through
        an object's __dict__] in thunder.core.outside_reads)."""
        copy = self._dict_copies.get(id(obj))
        if copy is None or type(name) is not str:
            return
        cls = type(obj)
        descriptor = lookup_type_attr(cls, name)
        if cls.__setattr__ not in (object.__setattr__, type.__setattr__) or hasattr(type(descriptor), "__set__"):
            return  # not stored in the table as it is
        if value is DELETED:
            copy.pop(name, None)
        else:
            copy[name] = value

    def store_subscr(self, container: Any, key: Any, value: Any) -> None:
        self.refuse_a_made_parameter(value)
        if id(container) in self._object_dicts:
            table, owner = self._object_dicts[id(container)]
            if value is DELETED and id(container) in self._lazy:
                self._read_contents(container)  # a deletion depends on what is there
            if value is DELETED and key not in container:
                return  # the instruction raises eager's KeyError
            if not _is_module_globals(table):
                self._store_through_object_dict(owner, table, {key: value})  # Note [Writes into an object's __dict__]
                return  # the instruction makes it in the program's copy
            if type(key) is not str:
                self._refuse_object_dict_write()
                return  # the instruction raises eager's KeyError
            # ``globals()[name] = value``: the assignment of a global it is (replayed); the program's copy of the
            # dict takes it from the instruction, the module's dict here (read back by a later ``name``)
            self.store_global(table, key, value)
            if container is table:
                return
            if value is DELETED:
                del table[key]
            else:
                table[key] = value
            return
        lazy = self._lazy.get(id(container))
        if lazy is not None and lazy.copy is container:
            self.sharp_edge("Assigning into a container from outside the function", replayed=True)
            if isinstance(container, dict) and value is not DELETED:
                self._record_write(lazy, "__setitem__", (key, value))
                return
            self._read_contents(container)  # a list item or a deletion depends on what is there
            return
        if id(container) in self._copies:
            self.sharp_edge("Assigning into a container from outside the function", replayed=True)
            self._changed_copy(container)
        elif id(container) in self._rebuilt or (
            id(container) in self._provenance
            and not _python_slot(container, "__delitem__" if value is DELETED else "__setitem__")
        ):  # (a ``__setitem__`` in Python is interpreted: what it does is traced; a dict subclass's copy is refused)
            raise ThunderRuntimeError(
                f"Assigning into a {type(container).__name__} from outside the jitted function is not supported "
                f"(at {source_location()}): thunder replays changes to outside lists, dicts and sets, not to other "
                "containers. Return the new value instead, or change it outside the function."
            )

    def made_object(self, obj: Any) -> None:
        """The interpreter made ``obj`` (``C(...)``, a dataclass, a ``SimpleNamespace``, a class the program defines):
        the program's own."""
        if isinstance(obj, type):  # its attributes are the program's, not read or replayed (``_captured_outside``)
            self._internal_objects.add(id(obj))
            self._keepalive.append(obj)
            return
        if (type(obj).__dictoffset__ or slot_names(type(obj))) and not isinstance(obj, (*NOT_REBUILT, *BUILTIN_VALUES)):
            self._internal_objects.add(id(obj))
            self._keepalive.append(obj)

    def _setattr(self, obj: Any, name: str, value: Any, *, setter: Callable = setattr) -> None:
        """``setattr(obj, name, value)`` (or ``object.__setattr__``, which a frozen dataclass's
        ``__init__`` calls past its own ``__setattr__``) called by the program: a STORE_ATTR."""
        if type(name) is str and (fset := property_store(obj, name, False)) is not None:
            return interpreter_call(current_runtime(), fset, (obj, value))  # as STORE_ATTR runs it
        if self.store_attr(obj, name, value, raw=setter is object.__setattr__):
            return
        if isinstance(obj, Proxy):  # a traced value answers as what it stands for
            return (introspection.lookaside(setattr) or setattr)(obj, name, value)
        setter(obj, name, value)

    # Note [Assigning a tensor's .data]
    # ``w.data = w.data.clamp(-c, c)`` (weight clipping), ``w.data *= mask`` (a masked convolution: ``*=`` reads
    # ``w.data``, multiplies it in place and assigns it back): eager points ``w`` at the new tensor's memory, out of
    # autograd's sight. The trace writes the new values into ``w``'s memory instead, as ``w.data.copy_(value)`` does:
    # every later read of ``w`` in the program, the caller's tensor after the call and the gradients are eager's. Only
    # the storage differs (a later in-place change of ``value`` does not reach ``w``), which no traced program can
    # tell. A value of another shape, dtype or device would change the tensor's metadata: refused, as an input's
    # shape change in place is (Note [In-place shape changes] in thunder.torch.shape).
    def set_data(self, p: TensorProxy, value: Any) -> None:
        """``p.data = value`` (Note [Assigning a tensor's .data])."""
        if value is DELETED:
            raise RuntimeError("Deleting tensor data is not allowed. Delete tensor instead!")
        if not isinstance(value, TensorProxy):
            raise TypeError(f"Variable data has to be a tensor, but got {type(value).__name__}")
        if (tuple(value.shape), value.dtype, value.device) != (tuple(p.shape), p.dtype, p.device):
            raise UnsupportedOpError(
                f"Assigning {p.name}.data a tensor of another shape, dtype or device ({value.dtype} {list(value.shape)} "
                f"on {value.device} for {p.dtype} {list(p.shape)} on {p.device}; at {source_location()}) is not "
                "supported: thunder cannot change the metadata of a tensor in place. Make a new tensor instead, or "
                "call it outside the jitted function."
            )
        interpreter_call(current_runtime(), torch.Tensor.copy_, (p.data, value))

    def set_tensor_attribute(self, p: TensorProxy, name: str, value: Any) -> None:
        """``p.name = value`` where ``torch.Tensor`` has no attribute ``name`` (``nn.Buffer`` sets ``persistent``):
        later reads in the program see it, and the computation sets it on the call's tensor (a replay), which may
        leave the function or be the caller's."""
        self._tensor_attributes.setdefault(id(p), {})[name] = value
        self._keepalive.append(p)
        prims.store_attr(p, name, self.escaping(value), False)
        self._escapes_again(2, value)

    def set_grad(self, p: TensorProxy, value: Any) -> None:
        """``p.grad = value`` (``optimizer.zero_grad()`` sets it to None; ``del p.grad`` too): later reads in the
        program see it, and the computation sets it on the call's tensor, with eager's checks."""
        if value is not None:
            if not isinstance(value, TensorProxy):
                raise TypeError(f"assigned grad expected to be a Tensor or None but got grad of type {type(value).__name__}")
            if value.dtype != p.dtype or value.device != p.device:
                raise RuntimeError(
                    f"assigned grad has data of a different type or device: {value.dtype} on {value.device}, the "
                    f"tensor's is {p.dtype} on {p.device}"
                )
            if tuple(value.shape) != tuple(p.shape):
                raise RuntimeError("assigned grad has data of a different size")
        self._tensor_attributes.setdefault(id(p), {})["grad"] = value
        self._keepalive.append(p)
        prims.store_attr(p, "grad", value, False)

    # Note [Tensor hooks in the program]
    # ``y.register_hook(hook)`` in the program is recorded (``prims.register_hook``) and made again by every call on
    # that call's tensor, with the hook as it leaves the function (``escaping``: a lambda the program makes is made
    # again, with what it holds, which is one object with what the program stores or returns; the registration moves
    # after the values the hook holds, as a replay does: ``replays.place_after_their_values``). Its computation then has torch's autograd for its backward (autodiff refuses it: NotDifferentiable),
    # so torch runs the hook where eager's would run: on the whole gradient of ``y``, before it reaches ``.grad``
    # for a leaf, in eager's order, with its result replacing the gradient. The handle the program gets removes the
    # recorded hook while tracing (``handle.remove()`` before the backward: no hook, as in eager); outside it means
    # nothing (each call registers its own hook): removing it there is a clear error. ``y.retain_grad()`` of a tensor
    # that is not a leaf is made the same way (``prims.retain_grad``): the ``.grad`` of the tensor the caller gets (a
    # returned or stored ``y``) is then eager's.
    def register_hook(self, p: TensorProxy, hook: Any) -> _HookHandle | None:
        """``p.register_hook(hook)`` in the program, or with ``hook`` None ``p.retain_grad()`` of a tensor that is not
        a leaf (Note [Tensor hooks in the program])."""
        if hook is None:
            prims.retain_grad(p)
            return None
        if not p.requires_grad:
            raise RuntimeError("cannot register a hook on a tensor that doesn't require gradient")
        prims.register_hook(p, self.escaping(hook))
        self._escapes_again(1, hook)  # what the hook holds is one object with what the program stores or returns
        return _HookHandle(self.computation.bound_symbols, self.computation.bound_symbols[-1])

    def _delattr(self, obj: Any, name: str, *, deleter: Callable = delattr) -> None:
        if type(name) is str and (fdel := property_store(obj, name, True)) is not None:
            return interpreter_call(current_runtime(), fdel, (obj,))  # as DELETE_ATTR runs it
        if self.store_attr(obj, name, DELETED, raw=deleter is object.__delattr__):
            return
        deleter(obj, name)

    def _remember(self, key: tuple, current: Callable[[], Any], restore: Callable[[Any], None]) -> None:
        for region in self._store_regions:  # before the store: the value the region found
            region.setdefault(key, (current, current(), []))
        if key not in self._written:
            self._written.add(key)
            old = current()
            self._undo.append(lambda: restore(old))

    def _note_region_store(self, key: tuple) -> None:
        """The store just recorded, kept by each open checkpointed region (Note [Stores a checkpointed region
        undoes])."""
        for region in self._store_regions:
            region[key][2].append(self.computation.scopes[-1][-1])

    def stores_undone(self, region: dict[tuple, tuple]) -> list:
        """The stores of ``region`` (what ``_store_regions`` recorded for one checkpointed call) on what the region
        left as it found it (the same object): with nothing outside running between them, they change nothing
        (Note [Stores a checkpointed region undoes]). Each such thing must also end the call as the region found it,
        checked when tracing ends."""
        undone = []
        for current, old, bsyms in region.values():
            if current() is old:
                undone.extend(bsyms)
                self._restored_by_regions.append((current, old, bsyms[0]))
        return undone

    def _check_stores_undone(self) -> None:
        """Refuses a call whose checkpointed region set and restored something that a later part of the call left
        different: eager's second run of the region, in the backward, would restore it to that later value."""
        for current, old, bsym in self._restored_by_regions:
            if current() is not old:
                raise ThunderRuntimeError(
                    f"a checkpointed region (at {bsym.source}) sets and restores what the program later changes "
                    f"({bsym.sym.print_name}): eager's torch.utils.checkpoint runs the region again in the backward, "
                    "which would restore the later value, and thunder.jit cannot run this region again. Move that "
                    "out of the checkpointed function, or do not checkpoint it"
                )

    def contents_of_read_containers(self) -> dict[int, Any]:
        """What each outside container the program read holds now (``read_containers_changed_since``)."""
        return {key: _contents(c) for key, (_, c, _) in self._copies.items()}

    def read_containers_changed_since(self, contents: dict[int, Any]) -> list[Proxy]:
        """The holders of the outside containers the program read whose contents changed since ``contents``
        (those read since then: since they were read)."""
        return [h for key, (h, c, first) in self._copies.items() if _contents(c) != contents.get(key, first)]

    def _changed_outside_state(self, value: Any) -> bool:
        """Whether the program has changed, so far, anything from outside that ``value`` holds (looking a few levels
        into its attributes and items): an attribute of such an object, an outside container (any: it may be
        shared), or a tensor where ``value`` holds tensors (a module, a container of tensors). Globals and closure
        cells are not held by an object that ``copy`` copies."""
        everything = all_reachable_ids(value)
        reachable = everything if everything is not None else reachable_ids(value)
        changed_containers = [lazy.original for lazy in self._lazy.values() if lazy.writes] + [
            self._copy_originals[key] for key, (_, c, first) in self._copies.items() if _contents(c) != first
        ]
        return (
            any(key[0] == "attr" and key[1] in reachable for key in self._written)
            # A changed container counts where ``value`` reaches it; any, where that cannot be known completely.
            or any(everything is None or id(c) in everything for c in changed_containers)
            or (holds_tensors(value) and any(map(mutates, self.computation.bound_symbols)))
        )

    # --- after the program ------------------------------------------------------------------
    def _write_back_copies(self, memo: dict[int, Any]) -> None:
        """Outside containers the program changed and read end each call as the program left them (the changes to
        those it did not read are made where it made them: ``_record_write``)."""
        for holder, copy, first in self._copies.values():
            now, at_read = _contents(copy), self._copy_at_read.get(id(copy), first)
            if now != first or now != at_read:
                self._refuse_unchecked_state(holder.name)
            # from what the computation's own replayed changes leave: ``D['k'] = t`` made before reading ``D``, then
            # ``D['k'] = None`` ends as ``D`` began, not as the replayed change left it
            if now != at_read:
                state = _state(copy)
                prims.replace_contents(self._object_input(holder), self.escaping(state, memo))
                self._move_after(self._copy_changed_after.get(id(copy), ABSENT))

    def _move_after(self, marker: Any) -> None:
        """Moves the last bound symbol to just after ``marker`` (to the start where it is None; left at the end where
        it is ``ABSENT`` or no longer in the trace). ``replays.place_after_their_values`` moves it later again
        where it refers to values computed after ``marker``."""
        bsyms = self.computation.bound_symbols
        if marker is ABSENT:
            return
        at = 0 if marker is None else next((i + 1 for i, b in enumerate(bsyms) if b is marker), None)
        if at is not None:
            bsyms.insert(at, bsyms.pop())

    def escaping(self, value: Any, memo: dict[int, Any] | None = None) -> Any:
        """``value`` as it leaves the function (returned, or stored where the caller sees it): each outside object
        is the object itself, what the program made is made again by each call, and an object met twice (in
        ``memo``, shared by the values lifted at the end of tracing) is one object (Note [Objects the program
        makes])."""
        as_inputs = functools.partial(self._outside_objects_as_inputs, depth=0, memo={})
        lifted = lift_objects(as_inputs(value), self._internal_objects, memo=memo, as_inputs=as_inputs)
        self._refuse_functions_holding_traced_values(value)
        return lifted

    def _refuse_functions_holding_traced_values(self, value: Any) -> None:
        """A function, ``functools.partial`` or bound method leaving the function that holds a traced value (a
        closure over ``y = x * 2``) would compute on the trace's proxy when called: a clear error instead. What it
        holds through an outside object (a hook's closure over the module) is the caller's, not the trace's."""

        found = []
        made = self._internal_objects

        def refused(v: Any) -> bool:
            if type(v) is types.FunctionType and made_closure(v, made):
                return False  # made again by each call (``_lift_function``)
            return any(self._holds_traced(h) for h in held_by_callable(v)) and not found.append(v)

        holds(value, refused)
        if found:
            loc = source_location()
            raise ThunderRuntimeError(
                f"a {type(found[0]).__name__} that holds a value the function computes (a closure over a tensor, a "
                f"partial of one) leaves the jitted function{f' at {loc}' if loc else ''}: thunder cannot make it "
                "again on each call. Return or store the values instead, and make the function outside."
            )

    def _holds_traced(self, v: Any, depth: int = 3) -> bool:
        """Whether ``v`` is or holds (``depth`` levels down) a traced value; not through a module or an outside object.
        A method, not a closure: a recursive closure is a reference cycle, which a compile must not leave (Note [No
        garbage collection while compiling] in thunder.compiler)."""
        if isinstance(v, Proxy):
            return True
        if isinstance(v, torch.nn.Module) or id(v) in self._provenance or depth == 0:
            return False
        return any(self._holds_traced(c, depth - 1) for c in children_of(v))

    def _escapes_again(self, position: int, raw: Any) -> None:
        """The bound symbol just recorded stores ``raw`` (its argument at ``position``, escaped as it is now): it is
        escaped again at the end of tracing (``lift_stored_objects_again``)."""
        self._stored_values.append((self.computation.scopes[-1][-1], position, raw))

    def lift_stored_objects_again(self, memo: dict[int, Any]) -> None:
        """At the end of tracing: every value that a store or a change of an outside container makes leave the
        function is escaped again, as it is now (the program's later changes to what it stored included), with the
        memo the result is escaped with: an object stored twice, or stored and returned, is one object, as in eager
        (Note [Objects the program makes])."""
        for bsym, position, raw in self._stored_values:
            args = list(bsym.args)
            args[position] = self.escaping(raw, memo)
            bsym.args, bsym._flat = tuple(args), None

    def _outside_objects_as_inputs(self, x: Any, depth: int = 0, memo: dict[int, Any] | None = None) -> Any:
        """The result with each outside object (or the program's copy of an outside container) replaced by
        the computation's parameter holding that object: the caller gets the object itself, as in eager
        (with the changes the program made, which the computation replays before returning)."""
        if memo is None:
            memo = {}
        elif id(x) in memo:
            return memo[id(x)]
        result = memo[id(x)] = self._as_inputs(x, depth, memo)
        return result

    def _as_inputs(self, x: Any, depth: int, memo: dict[int, Any]) -> Any:
        copied = self._copies.get(id(x))
        if copied is not None:
            return self._object_input(copied[0])
        lazy = self._lazy.get(id(x))
        if lazy is not None and lazy.copy is x:
            return self._object_input(lazy.holder)
        if isinstance(x, (Proxy, torch.Tensor, str, bytes, int, float, complex, bool, type(None))) or depth > 6:
            return x
        if id(x) in self._rebuilt:  # the program's copy of an outside dict subclass (never changed): the object
            return self._object_input(self._rebuilt[id(x)])
        holder = self._provenance.get(id(x))
        if holder is not None and self._proxy_for.get(id(x)) is x and not is_code_like(x) and not isinstance(x, types.ModuleType):
            return self._object_input(holder)
        if type(x) in (list, tuple):
            items = [self._outside_objects_as_inputs(v, depth + 1, memo) for v in x]
            return x if all(a is b for a, b in zip(items, x)) else type(x)(items)
        if isinstance(x, dict):  # a dict subclass too (a Hugging Face ModelOutput holding the cache passed in)
            items = {k: self._outside_objects_as_inputs(v, depth + 1, memo) for k, v in x.items()}
            attrs = None if type(x) is dict else mapping_attrs(x)
            own = attrs if isinstance(attrs, dict) else {}  # a dataclass mapping's fields among them
            inner = {k: self._outside_objects_as_inputs(v, depth + 1, memo) for k, v in own.items()}
            if all(items[k] is v for k, v in x.items()) and all(inner[k] is v for k, v in own.items()):
                return x
            if type(x) is dict:
                return items
            return rebuild_mapping(mapping_type(x), items, inner if isinstance(attrs, dict) else attrs)
        attrs = object_state(x)
        if attrs is None or holder is not None or isinstance(x, NOT_REBUILT):
            return x
        # An object the program made, holding an outside one: rebuilt around it (``lift_objects``' rebuild)
        inner = {k: self._outside_objects_as_inputs(v, depth + 1, memo) for k, v in attrs.items()}
        changed = {k: v for k, v in inner.items() if v is not attrs[k]}
        if not changed:
            return x
        made = self._internal_objects
        lifted = lift_objects(x, made, depth)
        base = lifted.attrs if isinstance(lifted, ObjectWithProxies) else {}
        return ObjectWithProxies(x, {**base, **{k: lift_objects(v, made, depth + 1) for k, v in changed.items()}})

    def _refuse_unchecked_state(self, what: str) -> None:
        """Under ``cache="same input"`` nothing is checked: a program that reads outside state it also
        changes would reuse, on the next call, the value it read on this one."""
        if self.checks:
            return
        raise ThunderRuntimeError(
            f"thunder.jit(..., cache='same input'): the function reads and changes outside state ({what}), so the "
            "next call cannot reuse this trace unchecked: it would see the value read now. Use the default "
            "cache='constant values' (or 'symbolic values'), which checks that state on every call."
        )

    def _check_reads_of_written_state(self) -> None:
        for key in self._written:
            # (read, or found absent: ``hasattr``, a NameError the program caught)
            if key in self._reads or key in self._asked_hasattr or key[0] == "attr" and key[1:] in self._asked_hasattr:
                kind = {"global": "a global", "cell": "a closure variable", "attr": f"attribute {key[-1]!r}"}[key[0]]
                self._refuse_unchecked_state(kind if key[0] != "global" else f"the global {key[-1]!r}")


def _is_interpreted(fn: Any, symbol_lookup: Callable[[Callable], Symbol | None]) -> bool:
    """Whether the interpreter runs ``fn``'s instructions (so they report their own reads)."""
    func = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if type(func) is not types.FunctionType or "_thunder" in func.__dict__:
        return False
    if isinstance(fn, types.MethodType) and issubclass(type(fn.__self__), Proxy):
        return False  # a traced value's method (``x.reshape(shape)``) runs natively: ``Tracer.lookaside``
    if is_nondeterministic(fn, getattr(fn, "__module__", None), bound_self(fn)):
        return False  # made by the prologue
    try:
        return symbol_lookup(fn) is None and introspection.lookaside(fn) is None
    except TypeError:
        return False


def _state(copy: Any) -> Any:
    """What ``replace_contents`` gives an outside container the program changed: a list's, dict's or set's items as
    such, a deque's as a tuple (it has no slice assignment), a bytearray's as bytes."""
    if isinstance(copy, list):
        return list(copy)
    if isinstance(copy, dict):
        return dict(copy)
    if isinstance(copy, collections.deque):
        return tuple(copy)
    if isinstance(copy, bytearray):
        return bytes(copy)
    return set(copy)


def _contents(container: Any) -> Any:
    """A shallow snapshot of a list, dict, set, deque or bytearray, compared by identity of the items."""
    if isinstance(container, bytearray):
        return bytes(container)
    if isinstance(container, (list, collections.deque)):
        return _IdentityList(container)
    if isinstance(container, dict):
        return _IdentityList(container.items(), mapping=True)
    return frozenset(container)


class _IdentityList(list):
    """Items compared by identity (tensors and proxies have no usable ``==``)."""

    def __init__(self, items, mapping: bool = False):
        super().__init__(items)
        self.mapping = mapping

    def __eq__(self, other):
        if len(self) != len(other):
            return False
        if self.mapping:
            return all(v1 is v2 and (k1 is k2 or (not isinstance(k1, (Proxy, torch.Tensor)) and k1 == k2))
                       for (k1, v1), (k2, v2) in zip(self, other))  # fmt: skip
        return all(a is b for a, b in zip(self, other))

    def __ne__(self, other):
        return not self == other


def snapshot(x: Any) -> Any:
    """Copies the containers in ``x`` so later changes by the program do not alter what was recorded."""
    if type(x) in (list, tuple):
        return type(x)(snapshot(v) for v in x)
    if type(x) is dict:
        return {k: snapshot(v) for k, v in x.items()}
    return x


def _restore_cell(cell, old) -> None:
    if old is ABSENT:
        try:
            del cell.cell_contents
        except ValueError:
            pass
    else:
        cell.cell_contents = old


def _is_module_globals(table: dict) -> bool:
    """Whether ``table`` is the namespace of an imported module (what ``globals()`` gives in its functions)."""
    name = table.get("__name__")
    return type(name) is str and getattr(sys.modules.get(name), "__dict__", None) is table


def _restore_item(mapping: dict, key, old) -> None:
    if old is ABSENT:
        mapping.pop(key, None)
    else:
        mapping[key] = old


def _own_attribute(obj, name: str) -> Any:
    """The object's own value of attribute ``name`` (its ``__dict__``, or a module's parameters, buffers
    and submodules), or ABSENT when it has none of its own (a class attribute, or nothing)."""
    own = getattr(obj, "__dict__", None)
    if own is not None and name in own:
        return own[name]
    if isinstance(obj, torch.nn.Module):
        for table in (obj._parameters, obj._buffers, obj._modules):
            if name in table:
                return table[name]
    return ABSENT


# Note [Stores a checkpointed region undoes]
# Code that sets outside state and restores it before it returns (``token = var.set(x); ...; var.reset(token)``:
# transformers' kernel functions, in every attention layer, keep a global where a compiler runs them) does that again
# in eager's second run of a checkpointed region, from the same state: nothing changes. A store in a region is
# otherwise refused (its replay would store the first run's value again: Note [What a recomputed region does again]
# in thunder.core.transforms.autodiff). The tracer notes, for each thing a region stores to (an attribute, a global,
# a closure cell), the object it held when the region began; where the region leaves the same object there, the
# region's stores to it are dropped from the trace: replayed in order with nothing outside in between, they change
# nothing. The call must end with it still so (checked when tracing ends: after a later store, eager's second run
# would restore that later value; a clear error).

# Note [A __setattr__ of the user's class]
# ``obj.name = value`` on an object whose class defines ``__setattr__`` (or ``__delattr__``) in the user's code ran that
# method natively while tracing, and the store was replayed as ``obj.name = value``, which ran it again: what it did
# besides the store (a log, a counter) happened twice on the first call, and a frozen dataclass's refused the replay of
# the ``object.__setattr__`` that made the store. The method is interpreted, as a property's setter is: the stores it
# makes by ``object.__setattr__`` (or ``super().__setattr__``) are replayed as such, and its other effects as the
# program's own (a module's, through ``nn.Module.__setattr__``, interpreted too). A library's ``__setattr__``
# (``nn.Module``'s, a config class's) called by the store itself still runs natively. The same holds for a data
# descriptor of the user's (its ``__set__``/``__delete__`` here; its ``__get__``: ``protocols.interpreted_getter``).
def _python_slot(obj: Any, name: str) -> bool:
    return type(lookup_type_attr(type(obj), name)) is types.FunctionType


def _users_setattr(obj: Any, deleting: bool) -> Callable | None:
    if isinstance(obj, (Proxy, type)):
        return None
    slot = lookup_type_attr(type(obj), "__delattr__" if deleting else "__setattr__")
    if type(slot) is not types.FunctionType or is_installed_code(slot.__code__):
        return None
    return None if is_library_module(getattr(slot, "__module__", None) or "") else slot


# Note [A property of a module]
# ``module.name = value`` where ``name`` is a ``property`` of the module's class (``nn.utils.parametrize`` makes its
# tensor a property whose setter runs the parametrization's ``right_inverse``; a model's ``@x.setter``) runs
# ``nn.Module.__setattr__``, natively, which ends in ``object.__setattr__`` and so in the setter, run natively on the
# traced value: its ``isinstance(value, Tensor)`` saw a ``TensorProxy``, and its stores were not the program's. Where
# ``nn.Module.__setattr__`` (``__delattr__``) would reach the property (the name is none of the module's parameters,
# buffers or submodules, and the value is not one that it registers), the setter (deleter) is interpreted, as a
# property's of a plain object is (``protocols.property_store``).
def _module_property_store(obj: Any, name: Any, value: Any) -> Callable | None:
    """The Python setter (deleter, where ``value`` is ``DELETED``) that ``nn.Module.__setattr__`` (``__delattr__``)
    reaches for ``obj.name = value`` (Note [A property of a module]); else None."""
    if not isinstance(obj, torch.nn.Module) or type(name) is not str:
        return None
    deleting = value is DELETED
    module_slot = torch.nn.Module.__delattr__ if deleting else torch.nn.Module.__setattr__
    if lookup_type_attr(type(obj), "__delattr__" if deleting else "__setattr__") is not module_slot:
        return None
    prop = lookup_type_attr(type(obj), name)
    if type(prop) is not property:
        return None
    f = prop.fdel if deleting else prop.fset
    if type(f) is not types.FunctionType or any(name in obj.__dict__.get(t, ()) for t in _MODULE_TABLES):
        return None
    registered = (torch.nn.Parameter, torch.nn.Module, torch.nn.Buffer)
    return None if not deleting and issubclass(introspection.eager_type(value), registered) else f


_MODULE_TABLES = ("_parameters", "_buffers", "_modules")


def _users_descriptor_store(obj: Any, name: str, deleting: bool) -> tuple[Callable, Any] | None:
    """``(__set__, descriptor)`` (``__delete__`` where ``deleting``) of a data descriptor of the user's that
    ``obj.name = value`` runs, interpreted as a ``__setattr__`` of the user's is (a ``property``'s setter already is)."""
    if isinstance(obj, (Proxy, type)) or lookup_type_attr(type(obj), "__setattr__") is not object.__setattr__:
        return None
    desc = lookup_type_attr(type(obj), name)
    if desc is NULL or type(desc) is property:
        return None
    slot = lookup_type_attr(type(desc), "__delete__" if deleting else "__set__")
    if type(slot) is not types.FunctionType or is_installed_code(slot.__code__):
        return None
    return None if is_library_module(getattr(slot, "__module__", None) or "") else (slot, desc)


def _restore_attr(obj, name: str, old) -> None:
    """Undoes tracing's store, past a ``__setattr__`` of the user's class (Note [A __setattr__ of the user's class])."""
    if isinstance(obj, (type, types.ModuleType)) or (isinstance(obj, torch.nn.Module) and not _users_setattr(obj, False)):
        setter, deleter = setattr, delattr
    elif isinstance(obj, torch.nn.Module):
        setter, deleter = torch.nn.Module.__setattr__, torch.nn.Module.__delattr__
    else:
        setter, deleter = object.__setattr__, object.__delattr__
    if old is ABSENT:
        try:
            deleter(obj, name)
        except AttributeError:
            pass
    else:
        setter(obj, name, old)


class _HookHandle:
    """What ``register_hook`` in the program returns (Note [Tensor hooks in the program]): ``remove()`` while tracing
    takes the recorded hook out of the trace, as eager's handle takes it off the tensor."""

    def __init__(self, bsyms: list, bsym: Any) -> None:
        self._bsyms, self._bsym = bsyms, bsym

    def remove(self) -> None:
        if get_tracectx() is None:
            raise ThunderRuntimeError(
                "this hook handle was made by Tensor.register_hook inside a jitted function: every call registers its "
                "own hook on its own tensor, so it cannot be removed from outside. Remove it inside the function, or "
                "register the hook on the returned tensor outside it."
            )
        if self._bsym in self._bsyms:
            self._bsyms.remove(self._bsym)

    def __enter__(self) -> _HookHandle:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.remove()
