"""Tracing: the thunder layer on the interpreter.

The user's function runs under ``thunder.core.interpreter``. Its inputs become proxies that
remember where they came from (provenance); torch calls are diverted to torch-language
symbols and recorded in the computation trace; Python values the program reads from outside
(arguments, globals, closure cells, attributes of input objects) are specialised, and the
prologue trace unpacks them and checks what the computation assumed.

Note [Provenance]
Each value that came from outside has a prologue expression: ``args[0]``, ``kwargs["x"]``,
``args[1].weight``, ``_globals0["SCALE"]``. ``_provenance`` maps an outside object (by id) to
the prologue proxy holding it, so an attribute read from it becomes an ``unpack_attr`` plus
a check in the prologue, recursively. Values created inside the program have no provenance
and need no checks.

Layer: tracing. Imports: core only. Which symbol a torch callable stands for comes from
``symbol_lookup`` (filled by the torch language and the entry layer) or the lookup the caller
hands to ``Tracer``; the option enums come from ``thunder.core.options``.
"""

from __future__ import annotations

import collections
import collections.abc
import contextlib
import contextvars
import dataclasses
import datetime
import functools
import inspect
import itertools
import os
import random
import re
import sys
import sysconfig
import types
import warnings
from collections.abc import Callable
from numbers import Number
from typing import Any

import torch
import torch.utils.checkpoint

from thunder.core import data_dependent, dtypes, introspection, prims, proxies, replays, transforms
from thunder.core.errors import SharpEdgeError, ThunderRuntimeError, UnsupportedOpError
from thunder.core.interpreter import InterpreterCallbacks, get_interpreter_stack, interpret
from thunder.core.interpreter.errors import DELETED
from thunder.core.interpreter.execution import call as interpreter_call
from thunder.core.interpreter.instructions import call_operands
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.nested_jit import inner_jitted_lookaside
from thunder.core.options import CACHE_OPTIONS, SHARP_EDGES_OPTIONS
from thunder.core.prims.python import tensor_value
from thunder.core.proxies import Proxy, TensorProxy, tensorproxy_from_tensor
from thunder.core.pytree import ObjectWithProxies, rebuild_mapping, register_containers, tree_leaves
from thunder.core.symbol import SourceLocation, Symbol
from thunder.core.symbol_lookup import interpreted_replacement, register_interpreted_replacement, symbol_for, unreplaced
from thunder.core.symbolic import SymFloat, SymInt, pin, recording_constraints
from thunder.core.trace import TraceCtx, tracectx
from thunder.core.tracectx import source_location_provider
from thunder.core.traced_autograd import (
    checkpoint_region,
    higher_order_function,
    is_autograd_function_apply,
    trace_autograd_function,
)

_SIMPLE_VALUE_TYPES = (bool, int, float, complex, str, type(None), torch.dtype, torch.device, slice, type(Ellipsis))
# Functions whose results differ from call to call: a trace would freeze one result.
_NONDETERMINISTIC_MODULES = frozenset({"random", "time", "secrets", "uuid", "numpy.random"})
_NONDETERMINISTIC_CALLS = frozenset({os.urandom, os.getrandom} if hasattr(os, "getrandom") else {os.urandom})


# Note [Module calls]
# ``module(x)`` runs ``nn.Module._wrapped_call_impl``, which reads ``_compiled_call_impl``, the four hook
# dicts of the module and the four global ones before it calls ``forward``. Traced as it is, each read
# is an attribute guard of its own (a type check and a check that the dict is empty): about a dozen
# lines of the prologue per module, most of a cached call's checking on a model with a hundred
# modules. So traced calls run ``_module_call`` instead: for a module the program did not make, with
# no hooks and not compiled (as nearly every module is), it calls ``forward`` directly and the prologue
# checks all of that in one line; otherwise it runs torch's own code.


def _hookless(module: torch.nn.Module) -> bool:
    """Answered by the tracer (``Tracer._hookless``) in traced code."""
    raise ThunderRuntimeError("thunder.core.jit_ext._hookless is only called by traced code")


_WRAPPED_CALL_IMPL = torch.nn.Module._wrapped_call_impl
_torch_module_call = unreplaced(_WRAPPED_CALL_IMPL)


def _module_call(self, *args, **kwargs):
    """``nn.Module.__call__`` in traced code (Note [Module calls])."""
    if _hookless(self):
        return self.forward(*args, **kwargs)
    return _torch_module_call(self, *args, **kwargs)


register_interpreted_replacement(_WRAPPED_CALL_IMPL, _module_call)


# Note [Module members]
# ``module.weight`` finds a parameter, buffer or submodule through ``nn.Module.__getattr__``, a Python
# function that runs only after the instance and its class have no such attribute: about half a
# microsecond per read, and a model's prologue reads every parameter and submodule on every call. So
# where the tracer saw ``nn.Module.__getattr__`` answer (the class defines neither ``__getattr__``,
# ``__getattribute__`` nor the name, and the instance dict lacks it), the prologue reads the table it
# answered from: ``module._parameters.get("weight", _NOT_A_MEMBER)``. ``nn.Module.__setattr__`` and
# ``__delattr__`` keep a name in one place, so the table read is what ``module.weight`` gives; a
# name that left the table reads ``_NOT_A_MEMBER``, which the check after every such read rejects.
# As in torch.compile's guards, a name put into the instance ``__dict__`` behind ``__setattr__``'s
# back while it is also a member is not noticed.
_MODULE_TABLES = ("_parameters", "_buffers", "_modules")  # nn.Module.__getattr__'s order


def _module_member_table(obj: Any, name: str) -> str | None:
    """The table of ``obj`` that ``nn.Module.__getattr__`` answers ``obj.name`` from (Note [Module members]),
    or None where the attribute is found otherwise."""
    if not isinstance(obj, torch.nn.Module):
        return None
    cls = type(obj)
    if cls.__getattr__ is not torch.nn.Module.__getattr__ or cls.__getattribute__ is not object.__getattribute__:
        return None
    instance = obj.__dict__
    if name in instance or inspect.getattr_static(cls, name, _NOT_SEEN) is not _NOT_SEEN:
        return None
    return next((t for t in _MODULE_TABLES if name in instance.get(t, ())), None)


def _is_namedtuple(typ: type) -> bool:
    return callable(getattr(typ, "_make", None)) and isinstance(getattr(typ, "_fields", None), tuple)


def _is_nondeterministic(fn: Callable, module: str | None, receiver: Any) -> bool:
    """Calls whose result differs from call to call: random numbers, clocks, entropy."""
    if module in _NONDETERMINISTIC_MODULES or isinstance(receiver, random.Random):
        return True
    if receiver is not None and (type(receiver).__module__ or "").startswith("numpy.random"):
        return True
    if (receiver is datetime.datetime or receiver is datetime.date) and getattr(fn, "__name__", "") in ("now", "today", "utcnow"):
        return True
    try:
        return fn in _NONDETERMINISTIC_CALLS
    except TypeError:
        return False
# Methods that mutate the builtin container they are bound to.
_MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "add", "discard",
     "sort", "reverse", "__setitem__", "__delitem__"}
)  # fmt: skip


_NOT_SEEN = object()
_PARTIALMETHOD_CODE = functools.partialmethod(print)._make_unbound_method().__code__  # of the functions it makes
#: Where such a function keeps its partialmethod: ``_partialmethod`` before 3.13, ``__partialmethod__`` from 3.13.
_PARTIALMETHOD_ATTR = "__partialmethod__" if sys.version_info >= (3, 13) else "_partialmethod"


class Tracer:
    """The state of one trace acquisition: the two traces being built and the provenance map.

    Note [What a trace relied on]
    Everything the program reads from outside goes through ``unpack_value`` with a prologue
    expression (its *path*: an argument, a global, a closure cell, an attribute of an object that
    has a path, a captured constant), which emits the prologue's check for it. Each path is read
    and checked once (``_reads``); a path the program assigned is the program's own from then on
    (``_written``). Outside lists, dicts and sets are copied for the program (the prologue
    unpacks their items); a copy the program changed is written back at the end of every call.
    Assignments to outside globals, cells and attributes are undone when tracing ends and
    replayed by the computation, in order, with each call's values; so are ``print`` calls.
    """

    def __init__(
        self,
        fn: Callable,
        *,
        cache_option: CACHE_OPTIONS,
        sharp_edges: SHARP_EDGES_OPTIONS,
        record_history: bool = False,
        symbol_lookup: Callable[[Callable], Symbol | None] = symbol_for,
        eager_impl: Callable[[Symbol], Callable | None] | None = None,
        outcomes: tuple = (),
    ):
        # ``symbol_lookup(fn)``: the symbol a call of ``fn`` is recorded as, or None (also for an
        # unhashable ``fn``); by default the tables of ``thunder.core.symbol_lookup``.
        self.fn = fn
        self.symbolic = cache_option is CACHE_OPTIONS.SYMBOLIC_VALUES
        self.checks = cache_option is not CACHE_OPTIONS.SAME_INPUT
        self.sharp_edges = sharp_edges
        self.record_history = record_history
        self.symbol_lookup = symbol_lookup
        self.computation = TraceCtx(fn, name="computation")
        self.prologue = TraceCtx(fn, name="prologue")
        self.prologue.varargs, self.prologue.varkwargs = "args", "kwargs"
        self.inputs: list[tuple[Proxy, Any]] = []  # (prologue proxy, what the computation sees), in order
        self.dims: list[tuple[Proxy, SymInt]] = []  # symbolic dims of input tensors (symbolic values)
        self.constraints: list[str] = []
        self.grad_mode_switched = False
        self._provenance: dict[int, Proxy] = {}  # id(outside object) -> prologue proxy
        self._proxy_for: dict[int, Any] = {}  # id(outside object) -> what the program sees instead
        self._keepalive: list[Any] = []  # outside objects, kept so their ids stay unique
        self._global_hooks_checked = False  # the prologue checks that no module hooks are registered globally
        self._reads: dict[tuple, Any] = {}  # path -> what the program saw (see Note [What a trace relied on])
        self._written: set[tuple] = set()
        self._undo: list[Callable[[], None]] = []
        self._internal_cells: set[int] = set()  # cells the program made itself
        self._internal_objects: set[int] = set()  # objects the program made itself (see _is_outside)
        self._copies: dict[int, tuple[Proxy, Any, Any]] = {}  # id(copy) -> (holder, copy, its first contents)
        self._lazy: dict[int, _LazyContainer] = {}  # id(copy) -> an outside container not read yet
        self._constants: dict[int, Proxy] = {}  # id(object) -> prologue proxy capturing it by identity
        self._object_inputs: dict[str, Proxy] = {}  # prologue name -> the computation's proxy for that object
        self._guarded_functions: set[int] = set()
        self._asked_hasattr: set[tuple[int, str]] = set()  # (id(outside object), name): checked once
        self._tensor_inputs: dict[int, tuple[Proxy, torch.Tensor]] = {}  # id(proxy) -> (holder, real tensor)
        self._hoisted: dict[str, str] = {}  # prologue name -> the call that makes it (random.random)
        self._module_paths: dict[int, str] = {}  # id(nn.Module) -> qualified name under the input module
        self._member_paths: dict[str, str] = {}  # prologue name of a parameter or buffer -> its qualified name
        self.interpreted: Callable | None = None
        # Note [Data-dependent values] in thunder.core.data_dependent: ``eager_impl(sym)`` runs a symbol on
        # real tensors (None: the program cannot ask for tensor values); ``forced`` are the outcomes known
        # for these inputs, ``outcomes`` those the trace continued with.
        self.eager_impl = eager_impl
        self.forced = tuple(outcomes)
        self.outcomes: list = []

    # --- the prologue ---------------------------------------------------------------------
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
        known = self._proxy_for.get(id(value))
        if known is not None:
            first = self._provenance[id(value)]
            if first is not holder:
                self._check(prims.check_is, holder, first)  # the trace assumed one object: it must stay one
            return known
        if isinstance(value, torch.Tensor):
            return self._tensor_input(value, holder)
        if isinstance(value, bool) or value is None or isinstance(value, (str, torch.dtype, torch.device)):
            self._check(prims.check_value, holder, value)
            return value
        if isinstance(value, (int, float)) and type(value) in (int, float):
            if self.symbolic:
                return self._number_input(value, holder)
            self._check(prims.check_value, holder, value)
            return value
        if isinstance(value, Number):
            self._check(prims.check_value, holder, value)
            return value
        if type(value) is tuple or (type(value) is frozenset and all(_is_literal_key(k) for k in value)):
            self._check(prims.check_type, holder, type(value))
            seen = self._unpack_contents(value, holder, name)
            self._register(value, holder, seen)
            return seen
        if isinstance(value, tuple) and _is_namedtuple(type(value)):
            # A named tuple (``PackedSequence``, a user's record): its items are unpacked as a tuple's, so
            # indexing and unpacking it give traced values as its attributes do.
            self._check(prims.check_type, holder, type(value))
            seen = type(value)._make(self._unpack_contents(tuple(value), holder, name))
            self._register(value, holder, seen)
            return seen
        if type(value) in _LAZY_TYPES:
            # Checked when the program first reads its contents (see Note [Outside containers]).
            self._check(prims.check_type, holder, type(value))
            copy = type(value)(value)
            self._register(value, holder, copy)
            self._keepalive.append(copy)
            self._lazy[id(copy)] = _LazyContainer(holder, value, copy, name)
            return copy
        if isinstance(value, dict):
            # A dict subclass (a Hugging Face ModelOutput passed back in as encoder_outputs): seen as a copy
            # holding what its items unpack to, so its methods (``__getitem__`` reading ``self.items()``
            # natively) give the program traced values; one its constructor cannot rebuild is seen as
            # itself (its values are unpacked when read through attributes). Changing it is refused.
            self._check(prims.check_type, holder, type(value))
            if all(_is_literal_key(k) for k in value):
                seen = self._rebuilt_mapping(value, holder, name)
                if seen is not None:
                    self._register(value, holder, seen)
                    return seen
                self._check_keys(holder, tuple(value))
            self._register(value, holder, value)
            return value
        if type(value) in (functools.partial, types.MethodType):
            # Descriptors make these afresh on each read (``functools.partialmethod``, a method read from
            # an instance): checked by what they hold, not by identity.
            self._check(prims.check_type, holder, type(value))
            symbolic, self.symbolic = self.symbolic, False  # the call reads the values itself: as constants
            try:
                for attr in ("func", "args", "keywords") if type(value) is functools.partial else ("__func__", "__self__"):
                    p = self._prologue_proxy(f"{holder.name}_{attr.strip('_')}")
                    self._emit(prims.unpack_attr, holder, attr, p, output=p)
                    if attr == "keywords":  # read by the call itself, not by the program: checked now
                        self._check(prims.check_type, p, dict)
                        self._unpack_contents(value.keywords, p, p.name)
                    else:
                        self.unpack_value(getattr(value, attr), p, p.name)
            finally:
                self.symbolic = symbolic
            self._register(value, holder, value)
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
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type, Symbol, functools.partial, types.MethodType)) or (
            isinstance(value, types.ModuleType) and _is_fixed_module(value)
        ):
            self._check(prims.check_identity, holder, value)
            if isinstance(value, types.FunctionType):
                self._guard_function(value, holder)
            elif isinstance(value, type) and not _is_library_module(value.__module__):
                self._register(value, holder, value)  # its class attributes are read through attribute loads
            return value
        if isinstance(value, types.ModuleType):  # the user's own module: its attributes are checked when read
            self._check(prims.check_identity, holder, value)
            self._register(value, holder, value)
            return value
        if isinstance(value, collections.abc.Iterator):
            return self._iterator_input(value, holder, name)
        if isinstance(value, torch.nn.Module) and not self._module_paths:
            for path, sub in value.named_modules():
                self._module_paths.setdefault(id(sub), path)
        # Any other object: its type is checked, and each attribute the program reads is unpacked
        # and checked when it is read (see Note [Provenance]).
        self._check(prims.check_type, holder, type(value))
        self._register(value, holder, value)
        return value

    def _rebuilt_mapping(self, value: dict, holder: Proxy, name: str) -> dict | None:
        """A copy of the dict subclass ``value`` with its items unpacked, or None where its type cannot be
        rebuilt from its items (see ``unpack_value``)."""
        try:
            rebuild_mapping(type(value), dict(value))
        except Exception:
            return None
        return rebuild_mapping(type(value), self._unpack_contents(dict(value), holder, name))

    def _register(self, obj: Any, holder: Proxy, seen_as: Any) -> None:
        self._provenance[id(obj)] = holder
        self._proxy_for[id(obj)] = seen_as
        self._keepalive.append(obj)

    def _unpack_contents(self, value: Any, holder: Proxy, name: str) -> Any:
        """The prologue's checks and unpacking of a container's items; returns what the program sees."""
        if type(value) in (set, frozenset):
            self._check(prims.check_value, holder, frozenset(value))
            return type(value)(value)
        if isinstance(value, dict):
            keys = tuple(value)
            self._check_keys(holder, keys)
            seen = type(value)()
            for i, k in enumerate(keys):
                p = self._item_proxy(value[k], f"{name}_{k}" if _is_literal_key(k) else f"{name}_key{i}")
                self._emit(prims.unpack_key, holder, k, p, output=p)
                seen[k] = self.unpack_value(value[k], p, p.name)
            return seen
        self._check(prims.check_expr, f"len({holder.name}) == {len(value)}", (holder,))
        items = [self._item_proxy(v, f"{name}_{i}") for i, v in enumerate(value)]
        self._emit(prims.unpack_sequence, holder, items, output=items)
        return type(value)(self.unpack_value(v, p, p.name) for v, p in zip(value, items))

    def _item_proxy(self, value: Any, name: str) -> Proxy:
        """The prologue proxy of a container's item: a submodule (an item of ``ModuleList._modules``) is
        named by its path in the input module (``module_transformer_h_0``), anything else ``name``."""
        path = self._module_paths.get(id(value)) if isinstance(value, torch.nn.Module) else None
        if not path:
            return self._prologue_proxy(name)
        p = self._prologue_proxy("module_" + path.replace(".", "_"))
        self.prologue.input_paths[p.name] = path
        return p

    def _check_keys(self, holder: Proxy, keys: tuple) -> None:
        self._check(prims.check_keys, holder, keys)

    def _read_contents(self, copy: Any) -> None:
        """The program is about to read an outside container's contents: from now on they are checked,
        unpacked, and the container ends each call as the program left it (see Note [Outside containers])."""
        lazy = self._lazy.pop(id(copy))
        seen = self._unpack_contents(lazy.original, lazy.holder, lazy.name)
        first = _contents(seen)
        copy.clear()
        if isinstance(copy, list):
            copy.extend(seen)
        else:
            copy.update(seen)
        for method, args in lazy.writes:
            getattr(copy, method)(*args)
        self._copies[id(copy)] = (lazy.holder, copy, first)

    def operands(self, inst, values) -> None:
        """Interpreter callback (Note [Operand reads]): an outside container used natively is read; a
        symbolic number that CPython's own operator would read natively is pinned."""
        name = inst.opname
        if (name == "BINARY_OP" or name == "COMPARE_OP") and len(values) == 2:
            left, right = values
            if _read_natively_by_operator(left, right):
                pin(right)  # records ``n == value``, checked by the prologue
            elif isinstance(left, (str, bytes)) and inst.argrepr in ("%", "%="):  # printf-style formatting
                items = right.values() if isinstance(right, dict) else right if type(right) is tuple else (right,)
                for v in items:
                    if isinstance(v, (SymInt, SymFloat)):
                        pin(v)
        lazy = self._lazy
        if not lazy:
            return
        if name == "CALL" or name == "CALL_KW":
            fn, args = call_operands(values)
            receiver = getattr(fn, "__self__", None)
            if id(receiver) in lazy and getattr(fn, "__name__", None) not in _PURE_WRITES.get(type(receiver), ()):
                self._read_contents(receiver)
            if _is_interpreted(fn, self.symbol_lookup):  # its own instructions report what it reads
                return
            values = args
        elif name == "STORE_SUBSCR":  # the container's side is decided by store_subscr
            values = (values[0], values[2])
        self._read_lazies_in(values, 2)

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
        if method in ("extend", "update"):
            args = tuple(list(a) if method == "extend" else dict(a) for a in args)
        getattr(copy, method)(*args)
        self._lazy[id(copy)].writes.append((method, _snapshot(args)))

    def _iterator_input(self, it, holder: Proxy, name: str):
        """An iterator argument: every call consumes it whole (the prologue does, into a tuple whose items
        are checked like a tuple's), and the program iterates over those items. A program that stops
        early consumes more than eager would (see the closing note of issue 7)."""
        if isinstance(it, (itertools.count, itertools.cycle, itertools.repeat)):
            raise ThunderRuntimeError(
                f"{name} is an itertools.{type(it).__name__}, which may never end: thunder cannot read it from outside "
                f"the jitted function (at {_source_location()}). Pass the values it gives as arguments instead."
            )
        seq = self._prologue_proxy(f"{name}_items")
        self._emit(prims.unpack_iterator, holder, seq, output=seq)
        return iter(self._unpack_contents(tuple(it), seq, name))

    def _guard_function(self, fn: types.FunctionType, holder: Proxy | None = None) -> None:
        """A function's defaults are part of what a call of it computes: the prologue checks they are the
        same objects (assigning ``f.__defaults__`` makes new ones)."""
        if id(fn) in self._guarded_functions or not self.checks:
            return
        self._guarded_functions.add(id(fn))
        if _is_library_module(getattr(fn, "__module__", None) or "") or _is_installed_code(fn.__code__):
            return  # a library's function keeps its defaults (its globals are still checked when read)
        for attr in ("__defaults__", "__kwdefaults__"):
            current = getattr(fn, attr)
            if current is None:
                continue
            holder = holder or self._constant(fn, fn.__name__)
            p = self._prologue_proxy(f"{holder.name}{attr.rstrip('_')}")
            self._emit(prims.unpack_attr, holder, attr, p, output=p)
            self._check(prims.check_identity, p, current)

    def _tensor_input(self, t: torch.Tensor, holder: Proxy) -> TensorProxy:
        if type(t) is not torch.Tensor:
            self._check(prims.check_type, holder, type(t))  # a Parameter stays a Parameter
        with tracectx(self.computation):
            name = holder.name if holder.name not in self.computation.names else None
            if self.symbolic:
                dims = [self._prologue_proxy(f"{holder.name}_{i}") for i in range(t.ndim)]
                self.computation.names.update(d.name for d in dims)
                shape = tuple(SymInt(n, d.name) for n, d in zip(t.shape, dims))
                p = tensorproxy_from_tensor(t, name, shape=shape)
            else:
                p = tensorproxy_from_tensor(t, name)
        if self.symbolic:
            self._check(prims.check_tensor_rank, holder, t.ndim, t.device, t.dtype, t.requires_grad)
            if dims:
                self._emit(prims.unpack_shape, holder, dims, output=dims)
                self.dims.extend((d, s) for d, s in zip(dims, p.shape))
        else:
            self._check(prims.check_tensor, holder, tuple(t.shape), t.device, t.dtype, t.requires_grad)
        path = self._member_paths.get(holder.name)
        if path is not None:
            self.computation.input_paths[p.name] = path
        introspection.note_input(p, t)
        self._register(t, holder, p)
        self.inputs.append((holder, p))
        self._tensor_inputs[id(p)] = (holder, t)
        return p

    def read_grad(self, p: TensorProxy) -> Any:
        """``p.grad`` in the program: the real ``.grad`` of an input tensor, read (and checked) by the
        prologue; an intermediate has none, as in eager."""
        found = self._tensor_inputs.get(id(p))
        if found is None:
            return None
        holder, t = found
        return self._read(("attr", id(t), "grad"), t.grad, lambda: self._attr_holder(holder, "grad", t))

    def read_value(self, p: TensorProxy, kind: str) -> Any:
        """The Python value the program asks of ``p`` (Note [Data-dependent values]), or None where
        it cannot be had: the trace continues with it and the computation checks it."""
        trace = self.computation
        if self.eager_impl is None or len(trace.scopes) > 1:  # inside a region traced on its own
            return None
        index = len(self.outcomes)
        if index < len(self.forced):
            value = self.forced[index]
        else:
            inputs = {q.name: self._tensor_inputs[id(q)][1] for _, q in self.inputs if id(q) in self._tensor_inputs}
            real = data_dependent.evaluate(trace.bound_symbols, p, inputs, self.eager_impl)
            if real is None:
                return None
            value = tensor_value(real, kind)
        if self.sharp_edges is not SHARP_EDGES_OPTIONS.ALLOW:
            loc = _source_location(self._module_paths)
            asked = "the truth value" if kind == "bool" else f"{kind}()"
            msg = (
                f"Data-dependent value: the program needs {asked} of tensor {p.name}{f' at {loc}' if loc else ''}. "
                "thunder splits the program there: each call checks the value and runs the trace made for it. Use "
                "sharp_edges='allow' to accept this, or torch.where / masking to keep the value a tensor."
            )
            if self.sharp_edges is SHARP_EDGES_OPTIONS.ERROR:
                raise SharpEdgeError(msg)
            warnings.warn(msg, stacklevel=2)
        prims.check_outcome(p, kind, value, index)
        self.outcomes.append(value)
        return value

    def _check_strides(self) -> None:
        """Inputs whose layout the program depended on (see Note [Strides of traced tensors])."""
        for holder, t in self._tensor_inputs.values():
            p = self._proxy_for.get(id(t))
            if getattr(p, "strides_read", False):
                expr = f"{holder.name}.stride() == {tuple(t.stride())} and {holder.name}.storage_offset() == {t.storage_offset()}"
                self._check(prims.check_expr, expr, (holder,))

    def _number_input(self, value: Number, holder: Proxy):
        self._check(prims.check_type, holder, type(value))
        self.computation.names.add(holder.name)
        sym = SymInt(value, holder.name) if type(value) is int else SymFloat(value, holder.name)
        self.inputs.append((holder, sym))
        return sym

    def bind_arguments(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """Unpacks the call's arguments as the program will see them."""
        if getattr(self.fn, "_thunder_calls_module", False) and args:
            # ThunderModule calls ``_call_module(module, *inputs)``: name inputs after forward's parameters.
            params = ["module", *_parameter_names(args[0].forward, len(args) - 1, kwargs)]
        else:
            params = _parameter_names(self.fn, len(args), kwargs)
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

    # --- interpreter callbacks --------------------------------------------------------------
    def sharp_edge(self, what: str, *, replayed: bool = False) -> None:
        if self.sharp_edges is SHARP_EDGES_OPTIONS.ALLOW:
            return
        loc = _source_location()
        where = f" at {loc}" if loc else ""
        if replayed:
            consequence = "thunder replays it on every call, after the ops before it"
        else:
            consequence = "a value read from outside is guarded (a change recompiles)"
        msg = (
            f"{what}{where}. The trace captures it when the function is compiled: {consequence}. Pass the value "
            "as an argument (or return it) instead, or use sharp_edges='allow' to accept this."
        )
        if self.sharp_edges is SHARP_EDGES_OPTIONS.ERROR:
            raise SharpEdgeError(msg)
        warnings.warn(msg, stacklevel=2)

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
        if is_builtin or _is_thunder_module(globals_dict):
            return value
        module = globals_dict.get("__name__", "?")
        if _is_library_module(module) and _is_code_like(value):
            return value  # torch's own functions, classes and modules are taken as fixed
        key = ("global", id(globals_dict), name)
        if key not in self._reads and not _is_code_like(value) and not _is_library_module(module):
            self.sharp_edge(f"Reading the global {name!r} of module {module!r}")

        def holder():
            h = self._prologue_proxy(name)
            self._emit(prims.unpack_global, globals_dict, name, h, output=h)
            return h

        return self._read(key, value, holder)

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
        self._keepalive.append(cell)

    def load_attr(self, obj: Any, name: str, value: Any) -> Any:
        holder = self._provenance.get(id(obj))
        if holder is None:
            if isinstance(obj, (Proxy, int, float)):
                return introspection.proxy_attribute(obj, name, value)
            if not isinstance(obj, torch.nn.Module) and not (
                isinstance(value, torch.Tensor) and not isinstance(obj, (torch.Tensor, types.ModuleType))
            ):
                return value
            if not self._is_outside(obj):
                return value
            # An nn.Module (or an object holding a tensor) reached without provenance (a submodule yielded
            # by iterating a ModuleList, say): captured by identity, its attributes checked when read.
            holder = self._constant(obj, type(obj).__name__.lower())
            self.unpack_value(obj, holder, holder.name)
        if isinstance(value, (types.MethodType, types.BuiltinMethodType)) or name.startswith("__"):
            return value
        return self._read(("attr", id(obj), name), value, lambda: self._attr_holder(holder, name, obj))

    def _is_outside(self, obj: Any) -> bool:
        """Whether ``obj``, reached without provenance, existed before the program ran. An object the
        program made is seen first while its constructor runs (``nn.ModuleList.__getitem__`` of a slice
        builds a new ModuleList, say); it is remembered as the program's own."""
        if id(obj) in self._internal_objects:
            return False
        for frame in get_interpreter_stack():
            if frame.receiver is obj and frame.name in ("__init__", "__new__", "__post_init__"):
                self._internal_objects.add(id(obj))
                self._keepalive.append(obj)
                return False
        return True

    def _attr_holder(self, holder: Proxy, name: str, obj: Any) -> Proxy:
        table = _module_member_table(obj, name)
        path = self._member_path(obj, name)
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
        """``getattr(obj, name[, default])`` called by the program: read like ``obj.name``."""
        holder = self._provenance.get(id(obj))
        if holder is None or type(name) is not str:
            traced = introspection.lookaside(getattr)  # a traced value answers as what it stands for
            return (traced or getattr)(obj, name, *default)
        present = hasattr(obj, name)
        if not present and default:
            self._check_hasattr(holder, obj, name, False)
            return default[0]
        return self.load_attr(obj, name, getattr(obj, name))

    def _hasattr(self, obj, name) -> bool:
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

    # Assignments to outside state: done now (the rest of the trace sees them), undone when tracing
    # ends, and replayed by the computation on every call (see Note [What a trace relied on]).
    def store_global(self, globals_dict: dict, name: str, value: Any) -> None:
        if _is_thunder_module(globals_dict):
            return
        self.sharp_edge(f"Assigning the global {name!r}", replayed=True)
        key = ("global", id(globals_dict), name)
        self._remember(key, lambda: globals_dict.get(name, _NOT_SEEN), lambda old: _restore_item(globals_dict, name, old))
        deleted = value is DELETED
        prims.store_global(globals_dict, name, None if deleted else _lift_objects(value), deleted)

    def store_deref(self, code, name: str, value: Any, cell) -> None:
        if id(cell) in self._internal_cells:
            return
        self.sharp_edge(f"Assigning the closure variable {name!r} of an enclosing function", replayed=True)
        self._remember(("cell", id(cell)), lambda: _cell_contents(cell), lambda old: _restore_cell(cell, old))
        self._keepalive.append(cell)
        prims.store_cell(cell, _lift_objects(value))

    def store_attr(self, obj: Any, name: str, value: Any) -> None:
        holder = self._provenance.get(id(obj))
        if holder is None and isinstance(obj, torch.nn.Module) and self._is_outside(obj):
            holder = self._constant(obj, type(obj).__name__.lower())
            self.unpack_value(obj, holder, holder.name)
        if holder is None or isinstance(obj, Proxy):
            return
        self.sharp_edge(f"Setting attribute {name!r} of an object from outside the function", replayed=True)
        self._remember(("attr", id(obj), name), lambda: _own_attribute(obj, name), lambda old: _restore_attr(obj, name, old))
        deleted = value is DELETED
        prims.store_attr(self._object_input(holder), name, None if deleted else _lift_objects(value), deleted)

    def store_subscr(self, container: Any, key: Any, value: Any) -> None:
        lazy = self._lazy.get(id(container))
        if lazy is not None and lazy.copy is container:
            self.sharp_edge("Assigning into a container from outside the function", replayed=True)
            if isinstance(container, dict) and value is not DELETED:
                lazy.writes.append(("__setitem__", (key, _snapshot(value))))
                return
            self._read_contents(container)  # a list item or a deletion depends on what is there
            return
        if id(container) in self._copies:
            self.sharp_edge("Assigning into a container from outside the function", replayed=True)
        elif id(container) in self._provenance:
            raise ThunderRuntimeError(
                f"Assigning into a {type(container).__name__} from outside the jitted function is not supported "
                f"(at {_source_location()}): thunder replays changes to outside lists, dicts and sets, not to other "
                "containers. Return the new value instead, or change it outside the function."
            )

    def _setattr(self, obj: Any, name: str, value: Any, *, setter: Callable = setattr) -> None:
        """``setattr(obj, name, value)`` (or ``object.__setattr__``, which a frozen dataclass's
        ``__init__`` calls past its own ``__setattr__``) called by the program: a STORE_ATTR."""
        self.store_attr(obj, name, value)
        if isinstance(obj, Proxy):  # a traced value answers as what it stands for
            return (introspection.lookaside(setattr) or setattr)(obj, name, value)
        setter(obj, name, value)

    def _delattr(self, obj: Any, name: str, *, deleter: Callable = delattr) -> None:
        self.store_attr(obj, name, DELETED)
        deleter(obj, name)

    def _remember(self, key: tuple, current: Callable[[], Any], restore: Callable[[Any], None]) -> None:
        if key not in self._written:
            self._written.add(key)
            old = current()
            self._undo.append(lambda: restore(old))

    # --- lookaside ------------------------------------------------------------------------
    def lookaside(self, fn: Callable) -> Callable | None:
        if fn is len:
            return self._len
        size_numel = proxies.torch_size_lookaside(fn)
        if size_numel is not None:
            return size_numel
        if fn is getattr:
            return self._getattr
        if fn is hasattr:
            return self._hasattr
        if fn is setattr:
            return self._setattr
        if fn is object.__setattr__:
            return functools.partial(self._setattr, setter=object.__setattr__)
        if fn is delattr:
            return self._delattr
        if fn is object.__delattr__:
            return functools.partial(self._delattr, deleter=object.__delattr__)
        replacement = introspection.lookaside(fn)
        if replacement is not None:
            return replacement
        sym = self.symbol_lookup(fn)
        if sym is not None:
            return sym
        if fn in _NO_TORCH_FUNCTION:
            return _no_torch_function
        if fn is torch._C._set_grad_enabled:
            return self._set_grad_enabled
        if fn is transforms.vjp_call:
            return self._vjp_call
        if is_autograd_function_apply(fn):
            return functools.partial(self._autograd_function, fn.__self__)
        if fn is torch.ops.higher_order.autograd_function_apply:
            return self._higher_order_autograd_function
        if fn is torch.utils.checkpoint.checkpoint:
            return self._checkpoint
        if fn is torch.autograd.function.FunctionMeta:
            # A torch.autograd.Function class defined inside the function (torch.masked's ops do):
            # the metaclass numbers it from a global itertools.count, which tracing cannot snapshot.
            return fn
        if fn is _hookless:
            return self._hookless
        if fn is print:
            return self._print
        if isinstance(fn, Symbol):
            return fn
        inner = inner_jitted_lookaside(fn)
        if inner is not None:
            return inner
        self_obj = getattr(fn, "__self__", None)
        if isinstance(self_obj, Proxy):
            return fn
        module = getattr(fn, "__module__", None)
        func = fn.__func__ if isinstance(fn, types.MethodType) else fn
        replacement = interpreted_replacement(func)
        if replacement is not None:
            bound = (self_obj,) if isinstance(fn, types.MethodType) else ()
            return lambda *a, **k: interpreter_call(current_runtime(), replacement, (*bound, *a), k)
        if isinstance(func, types.FunctionType) and not _is_nondeterministic(fn, module, self_obj):
            self._guard_function(func)
            return None
        if _is_nondeterministic(fn, module, self_obj):
            owner = self_obj if isinstance(self_obj, type) else type(self_obj)
            where = module or (f"{owner.__module__}.{owner.__qualname__}" if isinstance(self_obj, type) else owner.__module__)
            return self._hoisted_call(fn, f"{where}.{getattr(fn, '__name__', fn)}")
        if isinstance(fn, (types.BuiltinMethodType, types.MethodWrapperType)) and fn.__name__ in _MUTATING_METHODS:
            lazy = self._lazy.get(id(self_obj))
            if lazy is not None and lazy.copy is self_obj and fn.__name__ in _PURE_WRITES[type(self_obj)]:
                return self._lazy_write_call(self_obj, fn.__name__)
            if id(self_obj) in self._copies:
                return self._sharp_call(fn, f"Mutating a {type(self_obj).__name__} from outside the function with .{fn.__name__}()")
            if id(self_obj) in self._provenance and not isinstance(self_obj, (types.ModuleType, type)):
                return self._refuse_mutation(fn)
        return None

    def _len(self, obj) -> int:
        """``len(obj)`` of an object whose ``__len__`` is Python code runs that code under the interpreter."""
        method = getattr(type(obj), "__len__", None)
        if type(method) is types.FunctionType and not isinstance(obj, (Proxy, torch.Tensor)):
            return interpreter_call(current_runtime(), method, (obj,))
        traced = introspection.lookaside(len)
        return (traced or len)(obj)

    def _set_grad_enabled(self, enabled: bool) -> None:
        """``with torch.no_grad():`` and friends: switch now (tracing continues in that mode) and
        record the switch, so the computation switches at the same point."""
        enabled = bool(enabled)
        torch._C._set_grad_enabled(enabled)
        self.grad_mode_switched = True
        prims.set_grad_enabled(enabled)

    def _print(self, *args, **kwargs) -> None:
        """``print`` in the program: recorded, so each call prints its own values in order."""
        prims.python_print(_snapshot(_lift_objects(args)), _snapshot(_lift_objects(kwargs)))

    def _hoisted_call(self, fn: Callable, what: str) -> Callable:
        """A call whose result differs from call to call (``random.random()``, ``time.time()``): the
        prologue makes it on every call and passes a number in; the program sees a symbolic number."""

        def call(*args, **kwargs):
            self.sharp_edge(f"Calling {what}()", replayed=True)
            leaves = [*args, *kwargs.values()]
            if any(not _is_literal_argument(a) for a in leaves):
                raise ThunderRuntimeError(
                    f"{what}() is called with values computed inside the jitted function (at {_source_location()}); "
                    "thunder makes such calls in the prologue, from constant arguments only. Call it outside the "
                    "function and pass the result as an argument."
                )
            rng = fn.__self__ if isinstance(getattr(fn, "__self__", None), random.Random) else None
            state = rng.getstate() if rng is not None else None
            value = fn(*args, **kwargs)
            if value is None:  # called for its effect (random.seed): every call makes it
                if any(type(a) is list for a in leaves):  # random.shuffle(items): changes the program's list
                    raise ThunderRuntimeError(
                        f"{what}() changes a list in place (at {_source_location()}), which thunder cannot make on "
                        "every call from the prologue. Draw a permutation with torch.randperm instead, or call it "
                        "outside the jitted function."
                    )
                self._emit(prims.unpack_call, fn, args, kwargs, None)
                self._keepalive.append(fn)
                return None
            if type(value) not in (int, float):
                raise ThunderRuntimeError(
                    f"{what}() returned a {type(value).__name__}, which thunder cannot make an input of the trace "
                    f"(at {_source_location()}); only numbers can be. Call it outside the jitted function and pass "
                    "the result as an argument."
                )
            if state is not None:  # the first call's prologue draws this same number again
                rng.setstate(state)
            holder = self._prologue_proxy(getattr(fn, "__name__", "value"))
            self._hoisted[holder.name] = what
            self._emit(prims.unpack_call, fn, args, kwargs, holder, output=holder)
            self._keepalive.append(fn)
            self.computation.names.add(holder.name)
            sym = SymInt(value, holder.name) if type(value) is int else SymFloat(value, holder.name)
            self.inputs.append((holder, sym))
            return sym

        return call

    def _lazy_write_call(self, copy: Any, method: str) -> Callable:
        def call(*args):
            self.sharp_edge(f"Mutating a {type(copy).__name__} from outside the function with .{method}()", replayed=True)
            self._write(copy, method, args)

        return call

    def _refuse_mutation(self, fn: Callable) -> Callable:
        def call(*args, **kwargs):
            raise ThunderRuntimeError(
                f"Changing a {type(fn.__self__).__name__} from outside the jitted function with .{fn.__name__}() is "
                f"not supported (at {_source_location()}): thunder replays changes to outside lists, dicts and sets, "
                "not to other containers. Return the new value instead, or change it outside the function."
            )

        return call

    def _sharp_call(self, fn: Callable, what: str) -> Callable:
        def call(*args, **kwargs):
            self.sharp_edge(what, replayed=True)
            return fn(*args, **kwargs)

        return call

    def _hookless(self, module: torch.nn.Module) -> bool:
        """Whether calling ``module`` skips its hooks (Note [Module calls]); if so, checked by one guard."""
        holder = self._provenance.get(id(module))
        if (
            holder is None
            or torch._C._get_tracing_state()
            or type(module)._call_impl is not torch.nn.Module._call_impl  # a class that changes the call
            or module._compiled_call_impl is not None
            or any(self._as_seen(getattr(module, h)) for h in prims.python.MODULE_HOOK_DICTS)
            or any(getattr(torch.nn.modules.module, h) for h in prims.python.GLOBAL_HOOK_DICTS)
        ):
            return False  # traced as torch's own code, which reads (and guards) each of these
        if not self._global_hooks_checked:
            self._global_hooks_checked = True
            self._check(prims.check_no_hooks, None)
        self._check(prims.check_no_hooks, holder)
        return True

    def _as_seen(self, value: Any) -> Any:
        """``value`` as the program sees it: an outside container the program read or changed is its copy
        (a hook the program registered is in the copy of the hook dict, not yet in the module's own)."""
        return self._proxy_for.get(id(value), value)

    def _checkpoint(self, function, *args, use_reentrant=None, context_fn=None, determinism_check=None,
                    debug=None, preserve_rng_state=True, **kwargs):  # fmt: skip
        """``torch.utils.checkpoint.checkpoint`` (Note [Activation checkpointing])."""
        body = self.computation.bound_symbols
        start = len(body)
        result = interpreter_call(current_runtime(), function, args, kwargs)
        if len(self.computation.scopes) == 1:
            checkpoint_region(self.computation, start, result)
        return result

    def _autograd_function(self, cls: type, *args, **kwargs):
        """``cls.apply(*args)`` of a ``torch.autograd.Function`` (Note [Custom autograd functions])."""
        if kwargs:
            raise UnsupportedOpError(
                f"{cls.__qualname__}.apply(...) with keyword arguments is not supported inside thunder.jit: "
                "pass them positionally"
            )
        return trace_autograd_function(
            cls, args, self.computation, lambda fn, a: interpreter_call(current_runtime(), fn, tuple(a))
        )

    def _higher_order_autograd_function(self, fwd: Callable, bwd: Callable, *args, **kwargs):
        """``torch.ops.higher_order.autograd_function_apply(fwd, bwd, *args, ...)``: the autograd.Function it applies."""
        return self._autograd_function(higher_order_function(fwd, bwd, **kwargs), *args)

    def _vjp_call(self, fn: Callable, primals: tuple, cotangents: tuple):
        """``vjp(fn)`` inside a jitted function: ``fn``'s ops, then their pullback, in this trace."""
        body = self.computation.bound_symbols
        start = len(body)
        out = interpreter_call(current_runtime(), fn, tuple(primals))
        leaves = [t for t in tree_leaves(out) if isinstance(t, TensorProxy)]
        if cotangents is transforms.ONES:
            cotangents = tuple(prims.full(t.shape, 1, device=t.device, dtype=t.dtype) for t in leaves)
        transforms.check_cotangents(leaves, cotangents)
        grads = transforms.record_vjp(body[start:], list(primals), leaves, list(cotangents))
        return out, tuple(grads)

    # --- running ----------------------------------------------------------------------------
    def trace(self, args: tuple, kwargs: dict) -> Any:
        """Runs the program on proxies; returns its (proxy) result."""
        callbacks = InterpreterCallbacks(
            load_global=self.load_global,
            store_global=self.store_global,
            load_attr=self.load_attr,
            store_attr=self.store_attr,
            store_subscr=self.store_subscr,
            load_deref=self.load_deref,
            store_deref=self.store_deref,
            make_cell=self.make_cell,
            operands=self.operands,
        )
        program = self.fn.func if isinstance(self.fn, functools.partial) else self.fn
        if not isinstance(program, (types.FunctionType, types.MethodType)) and isinstance(self.fn, functools.partial):
            program = _calling(program)  # functools.partial(torch.add, alpha=2): the call itself is the program
        self.interpreted = interpret(
            program, fn_lookaside=self.lookaside, callbacks=callbacks, record_history=self.record_history
        )
        dtypes.default_dtype_was_read.set(False)
        grad_enabled = torch.is_grad_enabled()
        autocast_at_entry = {d: (torch.is_autocast_enabled(d), torch.get_autocast_dtype(d)) for d in ("cpu", "cuda")}
        provider = functools.partial(_source_location, self._module_paths)
        active = _active_tracer.set(self)
        try:
            with (
                tracectx(self.computation),
                source_location_provider(provider),
                recording_constraints() as cs,
                _restoring_grad_mode(grad_enabled),
            ):
                seen_args, seen_kwargs = self.bind_arguments(args, kwargs)
                result = _lift_objects(self._outside_objects_as_inputs(self.interpreted(*seen_args, **seen_kwargs)))
                register_containers(result)
                _check_result(result)
                self._write_back_copies()
                prims.python_return(result)
        finally:
            _active_tracer.reset(active)
            for undo in reversed(self._undo):
                undo()
        self.constraints = list(cs)
        self._refuse_branches_on_hoisted()
        self._check_reads_of_written_state()
        self._check_strides()
        if dtypes.default_dtype_was_read.get():
            self._check(prims.check_default_dtype, torch.get_default_dtype())
        if self.grad_mode_switched or self.computation.grad_mode_read:
            # the recorded switches restore the mode the trace began in; requires_grad answers depend on it
            self._check(prims.check_grad_enabled, grad_enabled)
        for device_type in sorted(self.computation.autocast_read):  # Note [Autocast] in thunder.core.trace
            enabled, dtype = autocast_at_entry.get(device_type, (False, None))
            self._check(prims.check_autocast, device_type, enabled, dtype if enabled else None)
            if enabled or self.computation.autocast_cast:
                self.computation.decorators.append(f"torch.autocast({device_type!r}, enabled=False)")
        if self.checks:
            for expr in self.constraints:
                self._emit(prims.check_expr, expr, ())
        self.computation.args = [p for _, p in self.inputs] + [s for _, s in self.dims]
        parameters = [prims.unpack_trivial.bind(p, output=None) for _, p in self.inputs if isinstance(p, TensorProxy)]
        self.computation.bound_symbols[:0] = parameters
        replays.place_after_their_values(self.computation)
        if self.outcomes:
            data_dependent.order_for_checks(self.computation, {p.name for _, p in self.inputs if isinstance(p, Proxy)})
        return result

    def release(self) -> None:
        """Lets go of the program's objects once the entry is compiled: the tracer and the interpreted
        function refer to each other, and that cycle would keep this call's inputs alive until the
        garbage collector runs."""
        vars(self).clear()

    def _outside_objects_as_inputs(self, x: Any, depth: int = 0) -> Any:
        """The result with each outside object (or the program's copy of an outside container) replaced by
        the computation's parameter holding that object: the caller gets the object itself, as in eager
        (with the changes the program made, which the computation replays before returning)."""
        copied = self._copies.get(id(x))
        if copied is not None:
            return self._object_input(copied[0])
        lazy = self._lazy.get(id(x))
        if lazy is not None and lazy.copy is x:
            return self._object_input(lazy.holder)
        if isinstance(x, (Proxy, torch.Tensor, str, bytes, int, float, complex, bool, type(None))) or depth > 6:
            return x
        holder = self._provenance.get(id(x))
        if holder is not None and self._proxy_for.get(id(x)) is x and not _is_code_like(x) and not isinstance(x, types.ModuleType):
            return self._object_input(holder)
        if type(x) in (list, tuple):
            items = [self._outside_objects_as_inputs(v, depth + 1) for v in x]
            return x if all(a is b for a, b in zip(items, x)) else type(x)(items)
        if type(x) is dict:
            items = {k: self._outside_objects_as_inputs(v, depth + 1) for k, v in x.items()}
            return x if all(items[k] is v for k, v in x.items()) else items
        return x

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
            if key in self._reads:
                kind = {"global": "a global", "cell": "a closure variable", "attr": f"attribute {key[-1]!r}"}[key[0]]
                self._refuse_unchecked_state(kind if key[0] != "global" else f"the global {key[-1]!r}")

    def _refuse_branches_on_hoisted(self) -> None:
        """A branch on ``random.random()`` would pick a trace per draw, and trying the traces draws again."""
        for expr in self.constraints:
            for name, what in self._hoisted.items():
                if re.search(rf"\b{re.escape(name)}\b", expr):
                    raise ThunderRuntimeError(
                        f"The program needs the Python value of {what}() ({expr}: a branch, a conversion such as "
                        "float(), or an index), which changes on every call; thunder passes such results into the trace "
                        "as values and cannot decide Python control flow with them. "
                        "Draw the number outside the jitted function and pass it as an argument, or use torch.rand "
                        "and torch.where."
                    )

    def _write_back_copies(self) -> None:
        """Outside containers the program changed end each call as the program left them."""
        for lazy in self._lazy.values():
            for method, args in lazy.writes:
                prims.container_call(self._object_input(lazy.holder), method, _lift_objects(args))
        for holder, copy, first in self._copies.values():
            if _contents(copy) != first:
                self._refuse_unchecked_state(holder.name)
                state = list(copy) if isinstance(copy, list) else dict(copy) if isinstance(copy, dict) else set(copy)
                prims.replace_contents(self._object_input(holder), _lift_objects(state))

    def check_constraints(self, constraints) -> None:
        """Adds to the prologue constraints that passes after tracing relied on (a gradient rule that
        branched on a symbolic size, say), so an entry is never reused where they do not hold."""
        if self.checks:
            known = set(self.constraints)
            for expr in constraints:
                if expr not in known:
                    self.constraints.append(expr)
                    self._emit(prims.check_expr, expr, ())

    def finish_prologue(self, used_names: set[str]) -> list:
        """Ends the prologue with the computation's inputs; returns the computation's parameters.

        Symbolic dims are passed only when the final computation uses them. Calls the prologue makes
        for the program (``random.random()``) come last, after every check, so a call that another
        entry serves (or that recompiles) draws once, as eager does; no check depends on them.
        """
        bsyms = self.prologue.bound_symbols
        draws = [b for b in bsyms if b.sym is prims.unpack_call]
        if draws:
            bsyms[:] = [b for b in bsyms if b.sym is not prims.unpack_call] + draws
        pairs = list(self.inputs) + [(d, s) for d, s in self.dims if s.name in used_names]
        self.prologue.bound_symbols.append(prims.python_return.bind(tuple(h for h, _ in pairs), output=None))
        return [p for _, p in pairs]


# Note [Outside containers]
# An outside list, dict or set is copied for the program, and its contents are checked only once the
# program reads them: a native operation on it (indexing, iterating, ``len``, ``in``, truth, passing it
# to a native function, storing it somewhere) is reported by the interpreter (Note [Operand reads]),
# and the prologue then checks and unpacks its items; at the end of each call the container holds what
# the program left in it. Until then, changes that do not depend on the contents (``append``, a dict's
# ``d[k] = v``, ``set.add``) are recorded and made again by every call on the object the path holds, so
# a function that logs into a global list does not recompile on every call.
_LAZY_TYPES = (list, dict, collections.OrderedDict, set)
_PURE_WRITES = {
    list: frozenset({"append", "extend", "insert", "clear"}),
    dict: frozenset({"update", "clear", "__setitem__"}),
    collections.OrderedDict: frozenset({"update", "clear", "__setitem__"}),
    set: frozenset({"add", "update", "discard", "clear"}),
}


@dataclasses.dataclass
class _LazyContainer:
    holder: Proxy
    original: Any
    copy: Any
    name: str
    writes: list = dataclasses.field(default_factory=list)


def _is_interpreted(fn: Any, symbol_lookup: Callable[[Callable], Symbol | None]) -> bool:
    """Whether the interpreter runs ``fn``'s instructions (so they report their own reads)."""
    func = fn.__func__ if isinstance(fn, types.MethodType) else fn
    if type(func) is not types.FunctionType or "_thunder" in func.__dict__:
        return False
    if _is_nondeterministic(fn, getattr(fn, "__module__", None), getattr(fn, "__self__", None)):
        return False  # made by the prologue
    try:
        return symbol_lookup(fn) is None and introspection.lookaside(fn) is None
    except TypeError:
        return False


def _contents(container: Any) -> Any:
    """A shallow snapshot of a list, dict or set, compared by identity of the items."""
    if isinstance(container, list):
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
            return all(k1 == k2 and v1 is v2 for (k1, v1), (k2, v2) in zip(self, other))
        return all(a is b for a, b in zip(self, other))

    def __ne__(self, other):
        return not self == other


def _snapshot(x: Any) -> Any:
    """Copies the containers in ``x`` so later changes by the program do not alter what was recorded."""
    if type(x) in (list, tuple):
        return type(x)(_snapshot(v) for v in x)
    if type(x) is dict:
        return {k: _snapshot(v) for k, v in x.items()}
    return x


def _is_literal_key(x: Any) -> bool:
    """Whether ``x`` prints as a literal in generated code (so it can be a checked key or element)."""
    if type(x) in (str, int, float, bool, type(None), complex):
        return True
    return type(x) is tuple and all(_is_literal_key(v) for v in x)


def _read_natively_by_operator(left: Any, right: Any) -> bool:
    """Whether CPython's ``left <op> right`` reads the symbolic ``right`` natively: the left operand's
    builtin slot goes first (``right`` is no subclass of its type) and accepts ints and floats (``2.5 + n``,
    ``True + n``, ``0.5 < n``), so neither number's Python methods see the operation."""
    if not isinstance(right, (SymInt, SymFloat)) or isinstance(left, (SymInt, SymFloat)):
        return False
    if isinstance(right, SymInt):
        return isinstance(left, (float, complex)) or (isinstance(left, int) and type(left) is not int)
    return isinstance(left, complex)


def _calling(fn: Callable) -> Callable:
    def call(*args, **kwargs):
        return fn(*args, **kwargs)

    return call


def _is_literal_argument(x: Any) -> bool:
    """A constant argument the prologue can pass again (a literal, or a list/tuple of literals)."""
    if isinstance(x, (Proxy, SymInt, SymFloat)):
        return False
    if type(x) in (list, tuple):
        return all(_is_literal_argument(v) for v in x)
    return _is_literal_key(x)


def _is_code_like(value: Any) -> bool:
    """Functions, classes, modules and symbols: fixed parts of a library's code."""
    return isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType, Symbol)) or (
        callable(value) and not isinstance(value, (torch.Tensor, torch.nn.Module))
    )


_THUNDER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TORCH_DIR = os.path.join(os.path.dirname(torch.__file__), "")
_INSTALLED_DIRS = tuple(
    {os.path.join(p, "") for p in (sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], _THUNDER_DIR)}
)


def _is_installed_code(code: types.CodeType) -> bool:
    """Code of an installed package (site-packages) or of thunder itself, not the user's own."""
    return code.co_filename.startswith(_INSTALLED_DIRS)


def _is_fixed_module(module: types.ModuleType) -> bool:
    """Modules whose attributes the program may read without checks: the standard library, torch, thunder."""
    name = module.__name__
    root = name.partition(".")[0]
    return root in sys.stdlib_module_names or root in ("torch", "thunder", "numpy", "builtins") or _is_library_module(name)


def _cell_contents(cell) -> Any:
    try:
        return cell.cell_contents
    except ValueError:
        return _NOT_SEEN


def _restore_cell(cell, old) -> None:
    if old is _NOT_SEEN:
        try:
            del cell.cell_contents
        except ValueError:
            pass
    else:
        cell.cell_contents = old


def _restore_item(mapping: dict, key, old) -> None:
    if old is _NOT_SEEN:
        mapping.pop(key, None)
    else:
        mapping[key] = old


def _own_attribute(obj, name: str) -> Any:
    """The object's own value of attribute ``name`` (its ``__dict__``, or a module's parameters, buffers
    and submodules), or _NOT_SEEN when it has none of its own (a class attribute, or nothing)."""
    own = getattr(obj, "__dict__", None)
    if own is not None and name in own:
        return own[name]
    if isinstance(obj, torch.nn.Module):
        for table in (obj._parameters, obj._buffers, obj._modules):
            if name in table:
                return table[name]
    return _NOT_SEEN


def _restore_attr(obj, name: str, old) -> None:
    if old is _NOT_SEEN:
        try:
            delattr(obj, name)
        except AttributeError:
            pass
    else:
        setattr(obj, name, old)


_active_tracer: contextvars.ContextVar[Tracer | None] = contextvars.ContextVar("thunder_active_tracer", default=None)


def _read_grad(p: TensorProxy) -> Any:
    tracer = _active_tracer.get()
    return tracer.read_grad(p) if tracer is not None else None


proxies.grad_reader = _read_grad


def _read_value(p: TensorProxy, kind: str) -> Any:
    tracer = _active_tracer.get()
    return tracer.read_value(p, kind) if tracer is not None else None


proxies.value_reader = _read_value



@contextlib.contextmanager
def _restoring_grad_mode(enabled: bool):
    """A program that fails inside ``with torch.no_grad():`` must not leave autograd off."""
    try:
        yield
    finally:
        torch._C._set_grad_enabled(enabled)


def _source_location(module_paths: dict[int, str] | None = None) -> SourceLocation | None:
    """The innermost interpreted frame that is the user's (thunder's own frames are skipped), with
    the qualified path of the innermost ``nn.Module`` whose method is running (``"encoder.layers.0"``)
    and, for a frame of torch's, the call site: the innermost frame outside torch and thunder."""
    stack = get_interpreter_stack()
    module_path = None
    if module_paths:
        for frame in reversed(stack):
            path = module_paths.get(id(frame.receiver)) if frame.receiver is not None else None
            if path is not None:
                module_path = path
                break
    for i in range(len(stack) - 1, -1, -1):
        frame = stack[i]
        if frame.filename.startswith(_THUNDER_DIR):
            continue
        call_site = None
        if frame.filename.startswith(_TORCH_DIR):
            for outer in reversed(stack[:i]):
                if not outer.filename.startswith((_TORCH_DIR, _THUNDER_DIR)):
                    call_site = SourceLocation(outer.filename, outer.lineno or 0, outer.qualname)
                    break
        return SourceLocation(frame.filename, frame.lineno or 0, frame.qualname, module_path, call_site)
    return None


_LIBRARY_PREFIXES = ("torch.", "typing", "collections", "functools", "enum", "dataclasses", "abc")


# torch's Python functions start with ``if has_torch_function(...)``: while tracing the answer is
# no, so their bodies run under the interpreter and reach the ops they are made of.
_NO_TORCH_FUNCTION = frozenset(
    {torch._C._has_torch_function, torch._C._has_torch_function_unary, torch._C._has_torch_function_variadic}
)


def _no_torch_function(*args) -> bool:
    return False


def _is_library_module(name: str) -> bool:
    return name == "torch" or name.startswith(_LIBRARY_PREFIXES)


def _is_thunder_module(globals_dict: dict) -> bool:
    name = globals_dict.get("__name__", "")
    return name == "thunder" or name.startswith("thunder.")


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


def _lift_objects(x: Any, depth: int = 0) -> Any:
    """``x`` with every plain object that holds proxies in its attributes replaced by an
    ``ObjectWithProxies`` (rebuilt by the generated code), so no proxy escapes to the caller."""
    if isinstance(x, (Proxy, torch.Tensor, str, bytes, int, float, complex, bool, type(None))) or depth > 6:
        return x
    if type(x) in (list, tuple):
        items = [_lift_objects(v, depth + 1) for v in x]
        return x if all(a is b for a, b in zip(items, x)) else type(x)(items)
    if isinstance(x, dict):
        changed = {k: _lift_objects(v, depth + 1) for k, v in x.items()}
        if all(changed[k] is v for k, v in x.items()):
            return x
        return changed if type(x) is dict else rebuild_mapping(type(x), changed)
    attrs = getattr(x, "__dict__", None)
    if attrs is None or isinstance(x, (types.ModuleType, type, types.FunctionType, torch.nn.Module)):
        return x
    lifted = {k: _lift_objects(v, depth + 1) for k, v in attrs.items()}
    changed = {k: v for k, v in lifted.items() if v is not attrs[k] or _holds_proxy(v)}
    return ObjectWithProxies(x, changed) if changed else x


def _holds_proxy(x: Any) -> bool:
    """Whether ``x`` is a proxy or a list, tuple or dict holding one (as ``(t, 1)`` does)."""
    return any(isinstance(leaf, Proxy) for leaf in tree_leaves(x))


def _check_result(result: Any) -> None:
    from thunder.core.pytree import tree_leaves

    for leaf in tree_leaves(result):
        if isinstance(leaf, (types.GeneratorType, types.CoroutineType, types.AsyncGeneratorType)):
            raise ThunderRuntimeError(
                f"the function returned a {type(leaf).__name__}, whose code would run after the trace, on traced "
                "values; thunder cannot compile that. Return a list or tuple instead, e.g. `return list(...)` or "
                "`return tuple(t * i for i in ...)`."
            )
        if isinstance(leaf, torch.Tensor):
            raise ThunderRuntimeError(
                "the function returned a torch.Tensor that was not computed from its inputs by traced torch "
                "operations (it was made by code thunder ran natively); return values must come from traced ops"
            )
