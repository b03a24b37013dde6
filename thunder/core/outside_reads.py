"""Reads of outside state: each global, closure cell and attribute the program reads from outside is a path,
unpacked and checked by the prologue once.

The interpreter reports each load of a global, a cell and an attribute (``InterpreterCallbacks``); a value
reached through a path (an argument, a global, a cell, an attribute of an object that has a path) is unpacked
the first time it is read (Note [Provenance] in ``thunder.core.provenance``), and the program sees that same
value on later reads. ``getattr``, ``hasattr`` and ``.grad`` of an input tensor are read the same way.

Note [Methods read from objects]
``obj.method`` binds a function found on ``obj``'s class, which the prologue's type check fixes but whose contents
it does not: a method replaced on the class (``Model.forward = patched``) or set on the instance (``model.forward =
...``, an attribute of its own that hides the class's) after tracing must retrace. So for each class and name the
prologue checks that ``Class.name`` is still the function the trace ran, and for each object that it has no
attribute of that name of its own (``'name' not in obj.__dict__``): a C lookup and a dict lookup a call. A method
found otherwise (through a descriptor or ``__getattr__``) is read and checked as the bound method it is.

Note [Class attributes read through an instance]
``self.factor``, ``self.shift(t)``, ``self.double`` of an object the program made (``Scaler()(x)``), or a property
of any object: what the class holds (a class attribute, a static method, a property), which the check of the
object's type does not fix, and which ``Scaler.factor = 3`` or ``Base.double = property(...)`` after tracing changes.
So for each class of the user's and name read that way the prologue checks that the class's lookup (its MRO, as
``_PyType_Lookup``) still finds the object the trace found (``check_class_attr``); for ``super().name``, the part
of the MRO after the method's class. A library's classes are taken as fixed, except the settings torch keeps on a
class (``Distribution._validate_args``, which ``set_default_validate_args`` changes: ``torch_state.class_setting``),
checked so.

Note [Attributes of the user's functions]
A function is checked by identity and code (``_guard_function``), but its ``__dict__`` can change: a counter kept
on it (``step.calls = getattr(step, "calls", 0) + 1``), a setting (``forward.scale = 2``), a memo made on first use
(``if not hasattr(f, "table")``). A function of the user's (not of a library) reached through a path is registered
as its holder, so ``f.name``, ``getattr`` and ``hasattr`` of it are read and checked as an object's attributes are,
and ``f.name = value`` is replayed on every call. A library's functions stay fixed code.

Note [Module members]
``module.weight`` finds a parameter, buffer or submodule through ``nn.Module.__getattr__``, a Python
function that runs only after the instance and its class have no such attribute: about half a
microsecond per read, and a model's prologue reads every parameter and submodule on every call. So
where the tracer saw ``nn.Module.__getattr__`` answer (the class defines neither ``__getattr__``,
``__getattribute__`` nor the name, and the instance dict lacks it), the prologue reads the table it
answered from: ``module._parameters.get("weight", _NOT_A_MEMBER)``. ``nn.Module.__setattr__`` and
``__delattr__`` keep a name in one place, so the table read is what ``module.weight`` gives; a
name that left the table reads ``_NOT_A_MEMBER``, which the check after every such read rejects.
As in torch.compile's guards, a name put into the instance ``__dict__`` behind ``__setattr__``'s
back while it is also a member is not noticed.

``OutsideReadsMixin`` is the part of ``Tracer`` (``thunder.core.jit_ext``) that handles these reads; the
state it keeps is set up by ``Tracer.__init__``.

Note [Reads and writes through an object's __dict__]
``vars(obj)["n"]``, ``obj.__dict__.get("n")``: the dict is the object's attribute table, which dunder reads left
unchecked, so a cached trace kept the value it read while tracing (``O.n = 5`` afterwards was not seen), and a
write into it (``vars(obj)["n"] += 1``) was made once, while tracing, and never by the calls (a counter stopped at
1). So the ``__dict__`` of an object from outside (``vars(obj)`` reads it as ``obj.__dict__`` does) is read as an
outside dict is, each item checked where the program reads it, and a write into it is made as the attribute store
it is (Note [Writes into an object's __dict__] in thunder.core.side_effects), replayed on every call. A class's own ``__dict__`` is a read-only mappingproxy: the program gets a mappingproxy of its copy,
whose items (the class's methods and attributes) the prologue checks at the first read of ``C.__dict__`` (a program
that reads it at all pays for checks of every item). In eager the dict is a view of the attributes, so the
program's ``obj.name = value`` after it read the dict shows in its copy too (``_store_in_dict_copy``).

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch

from thunder.core import introspection, prims, torch_state
from thunder.core.errors import ThunderRuntimeError
from thunder.core.interpreter import NULL, constructing
from thunder.core.interpreter.execution import lookup_type_attr
from thunder.core.interpreter.protocols import generic_load_attr, getattribute_load, interpreted_getter
from thunder.core.interpreter.protocols import load_attr as interpreted_load_attr
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.replays import becomes_in_place
from thunder.core.symbolic import SymStr
from thunder.core.tracectx import get_tracectx
from thunder.core.user_code import (
    is_code_like,
    is_library_module,
    is_thunder_module,
    is_user_namespace,
    source_location,
)

_NOT_SEEN = object()  # a path not read yet; an attribute the class does not define
_MODULE_TABLES = ("_parameters", "_buffers", "_modules")  # nn.Module.__getattr__'s order


def _module_member_table(obj: Any, name: str) -> str | None:
    """The table of ``obj`` that ``nn.Module.__getattr__`` answers ``obj.name`` from (Note [Module members]),
    or None where the attribute is found otherwise."""
    cls = type(obj)
    if not issubclass(cls, torch.nn.Module):  # (not isinstance: Note [Reads a class's __getattribute__ sees])
        return None
    if cls.__getattr__ is not torch.nn.Module.__getattr__ or cls.__getattribute__ is not object.__getattribute__:
        return None
    instance = obj.__dict__
    # (a class attribute is found before the tables; ``inspect.getattr_static`` took a tenth of a ms)
    if name in instance or lookup_type_attr(cls, name) is not NULL:
        return None
    return next((t for t in _MODULE_TABLES if name in instance.get(t, ())), None)


_UNWRITTEN = object()


# Set by the torch language: ``leaf_requiring_grad(t)`` records ``t.requires_grad_()`` on a computed tensor (its
# ``requires_grad_`` symbol), which the torch executor runs on the same tensor.
leaf_requiring_grad: Callable[[TensorProxy], TensorProxy] | None = None


class OutsideReadsMixin:
    """``Tracer``'s handling of the program's reads of globals, closure cells and attributes."""

    def _read(self, key: tuple, value: Any, make_holder: Callable[[], Proxy]) -> Any:
        """What the program sees for ``value`` read through path ``key`` (checked once per path)."""
        if key in self._written:
            return value
        seen = self._reads.get(key, _NOT_SEEN)
        if seen is _NOT_SEEN:
            holder = make_holder()
            seen = self._reads[key] = self.unpack_value(value, holder, holder.name)
        return seen

    def load_global(self, globals_dict: dict, name: str, value: Any, is_builtin: bool) -> Any:
        if is_builtin or is_thunder_module(globals_dict):
            return value
        module = globals_dict.get("__name__", "?")
        if is_library_module(module) and is_code_like(value):
            return value  # torch's own functions, classes and modules are taken as fixed
        key = ("global", id(globals_dict), name)
        if key not in self._reads and not is_code_like(value) and not is_library_module(module):
            self.sharp_edge(f"Reading the global {name!r} of module {module!r}")

        def holder():
            h = self._prologue_proxy(name)
            self._emit(prims.unpack_global, prims.ModuleGlobals(globals_dict), name, h, output=h)
            return h

        return self._read(key, value, holder)

    def missing_global(self, globals_dict: dict, name: str) -> None:
        """The program read an undefined global (a NameError it may catch): the trace holds while it stays
        undefined, so the prologue checks that it still is."""
        key = ("global", id(globals_dict), name)
        if key not in self._written and key not in self._asked_hasattr and not is_thunder_module(globals_dict):
            self._asked_hasattr.add(key)
            self._check(prims.check_global_absent, prims.ModuleGlobals(globals_dict), name)

    def load_deref(self, code, name: str, value: Any, cell) -> Any:
        if id(cell) in self._internal_cells or isinstance(value, Proxy):
            return value

        def holder():
            h = self._prologue_proxy(name)
            self._emit(prims.unpack_cell, cell, h, output=h)
            self._keepalive.append(cell)
            return h

        return self._read(("cell", id(cell)), value, holder)

    def make_cell(self, cell) -> None:
        self._internal_cells.add(id(cell))
        self._internal_objects.add(id(cell))  # a closure leaving the function gets a new one per call (``_lift_function``)
        self._keepalive.append(cell)

    def load_attr(self, obj: Any, name: str, value: Any, raw: bool = False) -> Any:
        """What the program sees for ``obj.name``, which gave ``value`` (``raw``: ``object.__getattribute__(obj,
        name)``, reached from a Python ``__getattribute__``)."""
        getter = interpreted_getter(obj, name, raw)
        if getter is not None and len(getter[1]) == 2:  # ``(obj, name)``: the type's own ``__getattribute__``
            return value  # interpreted: its reads were checked where they reached ``object.__getattribute__``
        cls = type(obj)  # Note [Type checks of the program's objects while tracing] in special_calls
        if name == "__dict__" and type(value) is dict:
            return self._object_dict(obj, value, raw)
        if name == "__dict__" and type(value) is types.MappingProxyType and isinstance(obj, type):
            return self._class_dict(obj, value)
        if getter is not None:  # a property's getter or a descriptor's ``__get__``, interpreted
            self._check_class_attr(obj, name)
            # what the interpreted getter computed: its own reads are checked; kept as read once, it went stale when
            # the program changed what the getter reads (``obj._v = ...; obj.v``). A traced value's own property
            # stays hidden as its other attributes are: ``SymFloat.name`` is a property interpreted from 3.13 (where
            # float's attribute lookup is object's own), read natively before
            if issubclass(cls, (Proxy, int, float, SymStr)):
                return introspection.proxy_attribute(obj, name, value)
            return value
        if issubclass(cls, torch.nn.Module) and not name.startswith("__"):
            written = self._member_written(obj, name)  # Note [Module members the program writes]
            if written is not _UNWRITTEN:
                return written
        holder = self._provenance.get(id(obj))
        if holder is None:
            self._check_class_attr(obj, name)
            flag = torch_state.backend_flag(obj, name)  # ``torch.backends.cudnn.deterministic``
            if flag is not None:
                self.torch_state_read.add(flag)
                return value
            if issubclass(cls, (Proxy, int, float, SymStr)):
                return introspection.proxy_attribute(obj, name, value)
            namespace = is_user_namespace(obj) and not name.startswith("__")  # (dunder reads are not checked)
            if not (issubclass(cls, torch.nn.Module) or namespace) and not (
                isinstance(value, torch.Tensor) and not isinstance(obj, (torch.Tensor, types.ModuleType))
            ):
                return value
            holder = self._captured_outside(obj)
            if holder is None:
                return value
        if type(value) is types.MethodType and not name.startswith("__"):
            if value.__self__ is obj and self._guard_method(holder, obj, name, value.__func__, raw):
                return value
            # bound otherwise (a classmethod read through an instance, a bound method stored as an attribute): read
            # on every call and checked by what it binds
            return self._read(("attr", id(obj), name), value, lambda: self._attr_holder(holder, name, obj, raw))
        if issubclass(type(value), (types.MethodType, types.BuiltinMethodType, Proxy)) or name.startswith("__"):
            return value  # a proxy: computed by the program (a property's getter, ``parametrize``'s weight)
        return self._read(("attr", id(obj), name), value, lambda: self._attr_holder(holder, name, obj, raw))

    def _raw_getattr(self, obj: Any, name: Any) -> Any:
        """``object.__getattribute__(obj, name)`` where ``obj``'s class has a ``__getattribute__`` of its own (which
        calls it by ``super().__getattribute__``): read and checked at this leaf (Note [Reads through a Python
        __getattribute__] in thunder.core.interpreter.protocols)."""
        if type(name) is not str:
            return object.__getattribute__(obj, name)
        return self.load_attr(obj, name, generic_load_attr(current_runtime(), obj, name), raw=True)

    def _object_dict(self, obj: Any, table: dict, raw: bool = False) -> Any:
        """``obj.__dict__`` (and ``vars(obj)``) of an object from outside: an outside container whose items are
        checked where they are read, and whose writes are attribute stores (Note [Reads and writes through an object's
        __dict__]); an object the program made, or one not checked, gives its own dict."""
        holder = self._provenance.get(id(obj))
        if holder is None and (is_user_namespace(obj) or isinstance(obj, torch.nn.Module)):
            holder = self._captured_outside(obj)
        if holder is None:
            return table
        seen = self._read(("attr", id(obj), "__dict__"), table, lambda: self._attr_holder(holder, "__dict__", obj, raw))
        self._object_dicts[id(table)] = self._object_dicts[id(seen)] = (table, obj)  # (``_reads`` keeps the copy alive)
        self._dict_copies[id(obj)] = seen
        return seen

    def _class_dict(self, cls: type, table: types.MappingProxyType) -> Any:
        """``cls.__dict__`` (and ``vars(cls)``) of a class of the user's from outside: a read-only view of the
        program's copy of the class's attribute table, every item checked by the prologue (Note [Reads and writes
        through an object's __dict__]); a class the program made, or a library's, gives its own."""
        if not is_user_namespace(cls):  # a library's class is taken as fixed
            return table
        holder = self._provenance.get(id(cls)) or self._captured_outside(cls)
        if holder is None:
            return table
        key = ("attr", id(cls), "__dict__")
        seen = self._reads.get(key)
        if seen is None:
            h = self._attr_holder(holder, "__dict__", cls)
            self._check(prims.check_type, h, types.MappingProxyType)
            copy = self._unpack_contents(dict(table), h, h.name)
            seen = self._reads[key] = types.MappingProxyType(copy)
            self._dict_copies[id(cls)] = copy
        return seen

    def _guard_method(self, holder: Proxy, obj: Any, name: str, func: Any, raw: bool = False) -> bool:
        """``obj.name`` gave the method ``func`` of ``obj``'s class: the prologue checks that the class still has
        that function under ``name`` and that ``obj`` has no attribute of its own by that name, so a method (or a
        ``forward``) replaced on the class or set on the instance after tracing retraces (Note [Methods read
        from objects]). False where the method is found otherwise (a descriptor, ``__getattr__``): the caller
        checks the bound method itself."""
        cls = type(obj)
        instance = _instance_dict(obj)  # Note [Reads a class's __getattribute__ sees]
        plain = raw or _plain_getattribute(cls)
        if not plain or lookup_type_attr(cls, name) is not func or (instance is not None and name in instance):
            return False
        if ("attr", id(obj), name) in self._written:
            return True
        class_key = ("method", id(cls), name)
        if class_key not in self._asked_hasattr:
            self._asked_hasattr.add(class_key)
            self._keepalive.append(cls)
            self._check(prims.check_class_attr, cls, name, func)
        instance_key = ("own method", id(obj), name)
        if instance is not None and instance_key not in self._asked_hasattr:
            self._asked_hasattr.add(instance_key)
            own = f"{holder.name}.__dict__" if _plain_getattribute(cls) else f"object.__getattribute__({holder.name}, '__dict__')"
            self._check(prims.check_expr, f"{name!r} not in {own}", (holder,))
        return True

    def _check_class_attr(self, obj: Any, name: str) -> None:
        """``obj.name`` found on the class of ``obj``, a class of the user's, where no check of ``obj``'s own
        covers it (Note [Class attributes read through an instance])."""
        cls, after = type(obj), None
        if cls is super:  # ``super().name``: looked up on the MRO of the object's class after the method's class
            cls, after = obj.__self_class__, obj.__thisclass__
            if cls is None or not is_user_namespace(after):
                return
        elif isinstance(obj, type) or not (is_user_namespace(cls) or torch_state.class_setting(cls, name)):
            return
        if name.startswith("__"):
            return
        mro = cls.__mro__
        attr = next((k.__dict__[name] for k in mro[mro.index(after) + 1 if after else 0 :] if name in k.__dict__), NULL)
        own = getattr(obj, "__dict__", None) if after is None else None
        if attr is NULL or (own is not None and name in own and lookup_type_attr(type(attr), "__set__") is NULL):
            return
        key = ("class attr", id(cls), id(after), name)
        if key in self._asked_hasattr or ("attr", id(cls), name) in self._written:
            return
        self._asked_hasattr.add(key)
        self._keepalive.append(cls)
        self._check(prims.check_class_attr, cls, name, attr, *((after,) if after else ()))

    # Note [Slots a call runs]
    # ``T(...)`` runs ``T.__new__`` and ``T.__init__`` (and a metaclass's ``__call__``), ``obj(...)`` runs
    # ``type(obj).__call__``: C code finds them on the class, so no attribute read of the program's checks them.
    # ``_guard_home`` checks a method by the class it finds by name, which a class defined inside a function (or in a
    # module that is not imported under its name) has not: ``T.__init__ = patched`` after tracing went unseen. So a
    # call of a class of the user's, or of its instance, checks the slots it runs that are the user's Python
    # functions on the class itself (one check per class and slot, shared with ``_guard_home``'s).
    def check_call_slots(self, fn: Any) -> None:
        """The slots that calling ``fn`` runs, where ``fn`` is a class of the user's or an instance of one (Note
        [Slots a call runs])."""
        if isinstance(fn, type):
            if is_user_namespace(fn):
                self._check_slot(fn, "__new__")
                self._check_slot(fn, "__init__")
            if is_user_namespace(type(fn)):
                self._check_slot(type(fn), "__call__")
        elif is_user_namespace(type(fn)):
            self._check_slot(type(fn), "__call__")

    def _check_slot(self, cls: type, name: str) -> None:
        owner = next((k for k in cls.__mro__ if name in k.__dict__), None)
        attr = owner.__dict__[name] if owner is not None else NULL
        func = attr.__func__ if isinstance(attr, (staticmethod, classmethod)) else attr
        if type(func) is not types.FunctionType or is_library_module(getattr(func, "__module__", None) or ""):
            return
        key = ("method", id(owner), name)
        if key in self._asked_hasattr:
            return
        self._asked_hasattr.add(key)
        self._keepalive.append(cls)
        self._check(prims.check_class_attr, cls, name, attr)

    def missing_attr(self, obj: Any, name: str) -> Any:
        """``obj.name`` raised AttributeError, which the program may catch: the trace holds while the attribute
        stays absent, so the prologue checks that it still is (a later ``obj.name = ...`` must retrace). A
        module member the program added itself (``self.register_buffer(...)``) is what it added (returned)."""
        if isinstance(obj, torch.nn.Module):
            written = self._member_written(obj, name)
            if written is not _UNWRITTEN:
                return written
        holder = self._provenance.get(id(obj))
        if holder is not None and type(name) is str and not name.startswith("__"):
            self._check_hasattr(holder, obj, name, False)
        return NULL

    # Note [Module members the program writes]
    # A module's parameters, buffers and submodules live in its ``_parameters``, ``_buffers`` and ``_modules`` dicts,
    # which ``nn.Module.__getattr__`` reads natively. The program's writes to those dicts go to its copy of them
    # (Note [Outside containers]): ``torch.func.functional_call`` swaps parameters with ``module._parameters[name] =
    # tensor``, ``register_buffer`` adds one, code swaps a weight for a masked one. So a read of ``module.name``
    # answers from the program's copy of the table where the program wrote ``name`` (eager reads what was written),
    # not from the module's own table, which the end of the call updates.
    def _member_written(self, module: torch.nn.Module, name: str) -> Any:
        """What the program left under ``name`` in a member table of ``module`` that it wrote (the first table that
        has it, as ``nn.Module.__getattr__`` looks), or ``_UNWRITTEN`` where it wrote nothing there."""
        tables = module.__dict__
        for table in _MODULE_TABLES:
            original = tables.get(table)
            view = self._proxy_for.get(id(original)) if original is not None else None
            if view is None or view is original:
                continue
            if name in view:
                if name in original and view[name] is original[name]:
                    return _UNWRITTEN  # as the module holds it: read as usual
                return view[name]
            if name in original:  # the program deleted it (functional_call of a missing key): eager's error
                raise AttributeError(f"'{type(module).__name__}' object has no attribute '{name}'")
        return _UNWRITTEN

    def _captured_outside(self, obj: Any) -> Proxy | None:
        """The prologue proxy of ``obj``, reached without provenance, captured by identity so that its attributes are
        checked when read and its stores replayed: an nn.Module (a submodule yielded by iterating a ModuleList, say),
        an object holding a tensor, a class of the user's (``type(self)``, ``obj.__class__``: the prologue's type
        check fixes which class it is, not its attributes), a module of the user's (``sys.modules[__name__]``).
        None for an object the program made."""
        if not self._is_outside(obj):
            return None
        if isinstance(obj, (type, types.ModuleType)):  # held by identity: nothing to check but its attributes
            holder = self._constant(obj, obj.__name__.rpartition(".")[2].lower())
            self._register(obj, holder, obj)
            return holder
        holder = self._constant(obj, type(obj).__name__.lower())
        self.unpack_value(obj, holder, holder.name)
        return holder

    def _is_outside(self, obj: Any) -> bool:
        """Whether ``obj``, reached without provenance, existed before the program ran. An object the
        program made is seen first while its constructor runs (``nn.ModuleList.__getitem__`` of a slice
        builds a new ModuleList, say); it is remembered as the program's own."""
        if id(obj) in self._internal_objects:
            return False
        if constructing(obj):
            self._internal_objects.add(id(obj))
            self._keepalive.append(obj)
            return False
        return True

    def _attr_holder(self, holder: Proxy, name: str, obj: Any, raw: bool = False) -> Proxy:
        table = _module_member_table(obj, name)
        path = self._member_path(obj, name)
        if path is None and holder.name in self.prologue.input_paths:  # ``config.problem_type`` of a module's config
            path = f"{self.prologue.input_paths[holder.name]}.{name}"
        if path is not None and table in ("_parameters", "_buffers"):
            attr = self._prologue_proxy("t_" + path.replace(".", "_"))
            self._member_paths[attr.name] = path
        elif path is not None and table == "_modules":
            attr = self._prologue_proxy("module_" + path.replace(".", "_"))
        else:
            attr = self._prologue_proxy(f"{holder.name}_{name}")
        if path is not None:
            self.prologue.input_paths[attr.name] = path
        if table is not None:
            self._emit(prims.unpack_module_member, holder, table, name, attr, output=attr)
        elif raw:
            self._emit(prims.unpack_raw_attr, holder, name, attr, output=attr)
        else:
            self._emit(prims.unpack_attr, holder, name, attr, output=attr)
        return attr

    def _member_path(self, module: torch.nn.Module, name: str) -> str | None:
        """The qualified name of ``module``'s attribute ``name`` (``"transformer.h.0.ln_1.weight"``), or None
        for an object outside the input module. Parameters and buffers are named by it in the traces
        (``t_transformer_h_0_ln_1_weight``, lightning-thunder's names) and the explorer, submodules as
        ``module_transformer_h_0``; cache-miss reasons say it (``TraceCtx.user_names``)."""
        prefix = self._module_paths.get(id(module))
        if prefix is None:
            return None
        return f"{prefix}.{name}" if prefix else name

    def _getattr(self, obj, name, *default):
        """``getattr(obj, name[, default])`` called by the program: read as ``obj.name`` is (a property's getter
        interpreted; natively, it ran twice while tracing and its value was kept; through a Python
        ``__getattribute__``, interpreted)."""
        if type(name) is str and getattribute_load(obj) is not None:  # interpreted, as ``obj.name`` is
            try:
                return interpreted_load_attr(current_runtime(), obj, name)
            except AttributeError:
                holder = self._provenance.get(id(obj))
                if holder is not None:
                    self._check_hasattr(holder, obj, name, False)
                if default:
                    return default[0]
                raise
        traced = introspection.lookaside(getattr)  # a traced value answers as what it stands for
        holder = self._provenance.get(id(obj))
        if holder is None or type(name) is not str or len(default) > 1:
            return (traced or getattr)(obj, name, *default)
        try:
            return traced(obj, name)
        except AttributeError:
            found = self.missing_attr(obj, name)  # the prologue checks that it stays absent
            if found is not NULL:
                return found
            if not default:
                raise
        return default[0]

    def _hasattr(self, obj, name) -> bool:
        if type(name) is str and getattribute_load(obj) is not None:
            return self._getattr(obj, name, _NOT_SEEN) is not _NOT_SEEN
        holder = self._provenance.get(id(obj))
        if holder is None:
            traced = introspection.lookaside(hasattr)
            return (traced or hasattr)(obj, name)
        present = hasattr(obj, name)
        if type(name) is str:
            self._check_hasattr(holder, obj, name, present)
        return present

    def _check_hasattr(self, holder: Proxy, obj: Any, name: str, present: bool) -> None:
        """The prologue checks, once per object and name, that ``hasattr(obj, name)`` is still ``present``."""
        key = (id(obj), name)
        if ("attr", id(obj), name) not in self._written and key not in self._asked_hasattr:
            self._asked_hasattr.add(key)
            self._check(prims.check_hasattr, holder, name, present)

    def read_tensor_attribute(self, p: TensorProxy, name: str) -> Any:
        """``p.name`` (also through ``getattr`` and ``hasattr``) where ``torch.Tensor`` has no attribute ``name``: what
        the input tensor has under that name (an attribute of its own, ``t.scale = 2.0``, or its subclass's), read and
        checked by the prologue as an object's; where it has none, eager's AttributeError, and the prologue checks
        that it still has none. An intermediate has none, as in eager, but for those the program set
        (``set_tensor_attribute``)."""
        written = self._tensor_attributes.get(id(p))
        if written is not None and name in written:
            return written[name]
        found = self._tensor_inputs.get(id(p))
        if found is None:
            raise AttributeError(f"'Tensor' object has no attribute {name!r}")
        holder, t = found
        value = getattr(t, name, _NOT_SEEN)
        if value is _NOT_SEEN:
            self._check_hasattr(holder, t, name, False)
            raise AttributeError(f"{type(t).__name__!r} object has no attribute {name!r}")
        return self._read(("attr", id(t), name), value, lambda: self._attr_holder(holder, name, t))

    def set_requires_grad(self, p: TensorProxy, requires_grad: bool) -> TensorProxy:
        """``p.requires_grad_(flag)`` in the program. On a value the program computed, as eager's: ``True`` makes the
        ops after it require grad (its own inputs get no gradient through it where they needed none: transformers'
        gradient checkpointing does this to the embeddings' output); ``False`` is eager's error where ``p`` was
        computed from values that require grad. On an input it changes nothing (a clear error where it would change the
        caller's tensor: that would happen once, at tracing)."""
        requires_grad = bool(requires_grad)
        if requires_grad == p.requires_grad:
            return p
        if id(p) in self._tensor_inputs:
            raise ThunderRuntimeError(
                f"{p.name}.requires_grad_({requires_grad}) changes a tensor the jitted function was given (at "
                f"{source_location()}): it would change once, while tracing. Set requires_grad before the call."
            )
        if not requires_grad:
            raise RuntimeError(
                "you can only change requires_grad flags of leaf variables. If you want to use a computed variable in a "
                "subgraph that doesn't require differentiation use var_no_grad = var.detach()."
            )
        if not (p.dtype.is_floating_point or p.dtype.is_complex):
            raise RuntimeError("only Tensors of floating point and complex dtype can require gradients")
        record = leaf_requiring_grad
        trace = get_tracectx()
        if record is None or trace is None or len(trace.scopes) != 1:
            p.requires_grad = True
            return p
        return becomes_in_place(trace, p, record)  # the run's tensor requires grad too (a leaf, as in eager)

    def read_grad(self, p: TensorProxy) -> Any:
        """``p.grad`` in the program: the real ``.grad`` of an input tensor, read (and checked) by the
        prologue; an intermediate has none, as in eager."""
        written = self._tensor_attributes.get(id(p))
        if written is not None and "grad" in written:  # the program set it (``SideEffectsMixin.set_grad``)
            return written["grad"]
        found = self._tensor_inputs.get(id(p))
        if found is None:
            return None
        holder, t = found
        return self._read(("attr", id(t), "grad"), t.grad, lambda: self._attr_holder(holder, "grad", t))


# Note [Reads a class's __getattribute__ sees]
# A class of the program's with a ``__getattribute__`` of its own (a config that counts or remaps its reads) sees every
# attribute read of its objects, thunder's own ones too, and may act on them (a counter, a log). Thunder's questions
# about such an object are asked of its type or through ``object.__getattribute__``: what kind of input it is
# (``unpack_value``), the input key of a call (``_leaf_key``), whether a method is its own (``_guard_method``: the
# prologue's check reads ``object.__getattribute__(obj, '__dict__')``, not ``obj.__dict__``, on every call), whether
# it is a module or an iterator. ``isinstance(obj, C)`` is no such question: where ``type(obj)`` is no subclass of
# ``C`` it reads ``obj.__class__``. So the object sees the reads eager makes, on every call, tracing included.


def _instance_dict(obj: Any) -> dict | None:
    """``obj``'s own attributes, read as ``object.__getattribute__`` reads them (no code of the program runs)."""
    try:
        return object.__getattribute__(obj, "__dict__")
    except AttributeError:
        return None


def _plain_getattribute(cls: type) -> bool:
    return cls.__getattribute__ in (object.__getattribute__, torch.nn.Module.__getattribute__)
