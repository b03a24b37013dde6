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

Layer: tracing. Imports: core, extend, the torch language (its callable -> symbol table).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import random
import types
import warnings
from collections.abc import Callable
from numbers import Number
from typing import Any

import torch

from thunder.core import dtypes, introspection, prims
from thunder.core.errors import SharpEdgeError, ThunderRuntimeError
from thunder.core.interpreter import InterpreterCallbacks, get_interpreter_stack, interpret
from thunder.core.proxies import Proxy, TensorProxy, tensorproxy_from_tensor
from thunder.core.pytree import ObjectWithProxies, rebuild_mapping, register_containers
from thunder.core.symbol import SourceLocation, Symbol
from thunder.core.symbolic import SymFloat, SymInt, recording_constraints
from thunder.core.trace import TraceCtx, tracectx
from thunder.core.tracectx import source_location_provider

_SIMPLE_VALUE_TYPES = (bool, int, float, complex, str, type(None), torch.dtype, torch.device, slice, type(Ellipsis))
# Functions whose results differ from call to call: a trace would freeze one result.
_NONDETERMINISTIC_MODULES = frozenset({"random", "time", "secrets", "uuid"})
# Methods that mutate the builtin container they are bound to.
_MUTATING_METHODS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem", "add", "discard",
     "sort", "reverse", "__setitem__", "__delitem__"}
)  # fmt: skip


class Tracer:
    """The state of one trace acquisition: the two traces being built and the provenance map."""

    def __init__(self, fn: Callable, *, cache_option, sharp_edges, record_history: bool = False):
        from thunder.common import CACHE_OPTIONS, SHARP_EDGES_OPTIONS

        self.fn = fn
        self.symbolic = cache_option is CACHE_OPTIONS.SYMBOLIC_VALUES
        self.checks = cache_option is not CACHE_OPTIONS.SAME_INPUT
        self.sharp_edges = sharp_edges
        self._SHARP = SHARP_EDGES_OPTIONS
        self.record_history = record_history
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
        self._globals_proxies: dict[int, Proxy] = {}
        self._module_paths: dict[int, str] = {}  # id(nn.Module) -> qualified name under the input module
        self.interpreted: Callable | None = None

    # --- the prologue ---------------------------------------------------------------------
    def _prologue_proxy(self, name: str) -> Proxy:
        with tracectx(self.prologue):
            return Proxy(self.prologue.safe_name(name))

    def _emit(self, sym: Symbol, *args, output=None) -> None:
        self.prologue.bound_symbols.append(sym.bind(*args, output=output))

    def _check(self, sym: Symbol, *args) -> None:
        if self.checks:
            self._emit(sym, *args)

    def unpack_value(self, value: Any, holder: Proxy, name: str) -> Any:
        """Registers an outside ``value`` held by prologue proxy ``holder``; returns what the program sees."""
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
        if type(value) in (tuple, list):
            self._check(prims.check_type, holder, type(value))
            self._check(prims.check_expr, f"len({holder.name}) == {len(value)}", (holder,))
            items = [self._prologue_proxy(f"{name}_{i}") for i in range(len(value))]
            self._emit(prims.unpack_sequence, holder, items, output=items)
            return type(value)(self.unpack_value(v, p, p.name) for v, p in zip(value, items))
        if type(value) is dict and all(isinstance(k, str) for k in value):
            self._check(prims.check_type, holder, dict)
            keys = tuple(value)
            self._check(prims.check_expr, f"{holder.name}.keys() == {set(keys)!r}" if keys else f"not {holder.name}", (holder,))
            out = {}
            for k in keys:
                p = self._prologue_proxy(f"{name}_{k}")
                self._emit(prims.unpack_key, holder, k, p, output=p)
                out[k] = self.unpack_value(value[k], p, p.name)
            return out
        if isinstance(value, dict):
            # Dict-like state of outside objects (a module's hook dicts): its keys are part of
            # what the trace assumed; values are unpacked when read through attributes.
            self._check(prims.check_type, holder, type(value))
            keys = tuple(value)
            if all(isinstance(k, (str, int)) for k in keys):
                self._check(prims.check_expr, f"{holder.name}.keys() == {set(keys)!r}" if keys else f"not {holder.name}", (holder,))
            self._register(value, holder, value)
            return value
        if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type)):
            self._check(prims.check_identity, holder, value)
            return value
        if isinstance(value, torch.nn.Module) and not self._module_paths:
            for path, sub in value.named_modules():
                self._module_paths.setdefault(id(sub), path)
        # Any other object: its type is checked, and each attribute the program reads is unpacked
        # and checked when it is read (see Note [Provenance]).
        self._check(prims.check_type, holder, type(value))
        self._register(value, holder, value)
        return value

    def _register(self, obj: Any, holder: Proxy, seen_as: Any) -> None:
        self._provenance[id(obj)] = holder
        self._proxy_for[id(obj)] = seen_as
        self._keepalive.append(obj)

    def _tensor_input(self, t: torch.Tensor, holder: Proxy) -> TensorProxy:
        known = self._proxy_for.get(id(t))
        if known is not None:
            return known
        with tracectx(self.computation):
            name = holder.name if holder.name not in self.computation.names else None
            if self.symbolic:
                dims = [self._prologue_proxy(f"{holder.name}_{i}") for i in range(t.ndim)]
                self.computation.names.update(d.name for d in dims)
                shape = tuple(SymInt(n, d.name) for n, d in zip(t.shape, dims))
                p = TensorProxy(name, shape=shape, dtype=t.dtype, device=t.device, requires_grad=t.requires_grad)
            else:
                p = tensorproxy_from_tensor(t, name)
        if self.symbolic:
            self._check(prims.check_tensor_rank, holder, t.ndim, t.device, t.dtype, t.requires_grad)
            if dims:
                self._emit(prims.unpack_shape, holder, dims, output=dims)
                self.dims.extend((d, s) for d, s in zip(dims, p.shape))
        else:
            self._check(prims.check_tensor, holder, tuple(t.shape), t.device, t.dtype, t.requires_grad)
        self._register(t, holder, p)
        self.inputs.append((holder, p))
        return p

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
        return seen_args, seen_kwargs

    # --- interpreter callbacks --------------------------------------------------------------
    def sharp_edge(self, what: str) -> None:
        if self.sharp_edges is self._SHARP.ALLOW:
            return
        loc = _source_location()
        where = f" at {loc}" if loc else ""
        msg = (
            f"{what}{where}. The trace captures it when the function is compiled: a value read from outside is "
            "guarded (a change recompiles), but a random number or clock time is frozen and outside mutations are "
            "not replayed on cached calls. Pass the value as an argument instead, or use sharp_edges='allow' to "
            "accept this."
        )
        if self.sharp_edges is self._SHARP.ERROR:
            raise SharpEdgeError(msg)
        warnings.warn(msg, stacklevel=2)

    def load_global(self, globals_dict: dict, name: str, value: Any, is_builtin: bool) -> Any:
        if _is_thunder_module(globals_dict):
            return value
        if is_builtin or isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType)):
            return value
        if isinstance(value, Symbol) or callable(value) and not isinstance(value, torch.Tensor):
            return value
        known = self._proxy_for.get(id(value))
        if known is not None:
            return known
        module = globals_dict.get("__name__", "?")
        if not _is_library_module(module):  # torch's own globals (hook registries) are guarded, not reported
            self.sharp_edge(f"Reading the global {name!r} of module {module!r}")
        holder = self._prologue_proxy(name)
        self._emit(prims.unpack_global, globals_dict, name, holder, output=holder)
        return self.unpack_value(value, holder, holder.name)

    def load_deref(self, code, name: str, value: Any) -> Any:
        if isinstance(value, (types.ModuleType, types.FunctionType, type, types.BuiltinFunctionType, Symbol)):
            return value
        if isinstance(value, Proxy):
            return value
        known = self._proxy_for.get(id(value))
        if known is not None:
            return known
        cell = _find_cell(self.fn, code, name) or _cell_holding(self.fn, value)
        if cell is not None:
            holder = self._prologue_proxy(name)
            self._emit(prims.unpack_cell, cell, holder, output=holder)
            return self.unpack_value(value, holder, holder.name)
        if isinstance(value, torch.Tensor):
            # A tensor captured by a nested function: an input of the trace, by identity.
            holder = self._prologue_proxy(name)
            self._emit(prims.unpack_constant, value, holder, output=holder)
            return self.unpack_value(value, holder, holder.name)
        return value

    def load_attr(self, obj: Any, name: str, value: Any) -> Any:
        holder = self._provenance.get(id(obj))
        if holder is None:
            if isinstance(obj, (Proxy, int, float)):
                return introspection.proxy_attribute(obj, name, value)
            if not isinstance(value, torch.Tensor) or isinstance(obj, (Proxy, torch.Tensor, types.ModuleType)):
                return value
            # A tensor attribute of an object reached without provenance (a submodule yielded by
            # iterating a ModuleList, say): the object is captured by identity and the attribute
            # is read from it by the prologue on every call.
            holder = self._prologue_proxy(f"{type(obj).__name__.lower()}")
            self._emit(prims.unpack_constant, obj, holder, output=holder)
            self._register(obj, holder, obj)
        elif isinstance(obj, Proxy):
            return introspection.proxy_attribute(obj, name, value)
        if isinstance(value, (types.MethodType, types.BuiltinMethodType)) or name.startswith("__"):
            return value
        known = self._proxy_for.get(id(value))
        if known is not None:
            return known
        attr = self._prologue_proxy(f"{holder.name}_{name}")
        self._emit(prims.unpack_attr, holder, name, attr, output=attr)
        return self.unpack_value(value, attr, attr.name)

    def store_global(self, globals_dict: dict, name: str, value: Any) -> None:
        if _is_thunder_module(globals_dict):
            return
        self.sharp_edge(f"Assigning the global {name!r}")

    def store_attr(self, obj: Any, name: str, value: Any) -> None:
        if id(obj) in self._provenance:
            self.sharp_edge(f"Setting attribute {name!r} of an object from outside the function")

    def store_subscr(self, container: Any, key: Any, value: Any) -> None:
        if id(container) in self._provenance or id(container) in self._globals_proxies:
            self.sharp_edge("Assigning into a container from outside the function")

    def store_deref(self, code, name: str, value: Any) -> None:
        if _find_cell(self.fn, code, name) is not None:
            self.sharp_edge(f"Assigning the closure variable {name!r} of an enclosing function")

    # --- lookaside ------------------------------------------------------------------------
    def lookaside(self, fn: Callable) -> Callable | None:
        replacement = introspection.lookaside(fn)
        if replacement is not None:
            return replacement
        try:
            sym = _lookaside_table().get(fn)
        except TypeError:  # unhashable callable
            sym = None
        if sym is not None:
            return sym
        if fn in _NO_TORCH_FUNCTION:
            return _no_torch_function
        if fn is torch._C._set_grad_enabled:
            return self._set_grad_enabled
        if isinstance(fn, Symbol):
            return fn
        self_obj = getattr(fn, "__self__", None)
        if isinstance(self_obj, Proxy):
            return fn
        module = getattr(fn, "__module__", None)
        if module in _NONDETERMINISTIC_MODULES or isinstance(self_obj, random.Random):
            where = module or type(self_obj).__module__
            return self._sharp_call(fn, f"Calling {where}.{getattr(fn, '__name__', fn)}()")
        if (
            isinstance(fn, types.BuiltinMethodType)
            and type(self_obj) in (list, dict, set)
            and fn.__name__ in _MUTATING_METHODS
            and (id(self_obj) in self._provenance or self._is_global_container(self_obj))
        ):
            return self._sharp_call(fn, f"Mutating a {type(self_obj).__name__} from outside the function with .{fn.__name__}()")
        return None

    def _set_grad_enabled(self, enabled: bool) -> None:
        """``with torch.no_grad():`` and friends: switch now (tracing continues in that mode) and
        record the switch, so the computation switches at the same point."""
        enabled = bool(enabled)
        torch._C._set_grad_enabled(enabled)
        self.grad_mode_switched = True
        prims.set_grad_enabled(enabled)

    def _is_global_container(self, obj) -> bool:
        fn_globals = getattr(self.fn, "__globals__", None) or {}
        return any(v is obj for v in fn_globals.values())

    def _sharp_call(self, fn: Callable, what: str) -> Callable:
        def call(*args, **kwargs):
            self.sharp_edge(what)
            return fn(*args, **kwargs)

        return call

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
        )
        self.interpreted = interpret(
            self.fn, fn_lookaside=self.lookaside, callbacks=callbacks, record_history=self.record_history
        )
        dtypes.default_dtype_was_read.set(False)
        grad_enabled = torch.is_grad_enabled()
        provider = functools.partial(_source_location, self._module_paths)
        with (
            tracectx(self.computation),
            source_location_provider(provider),
            recording_constraints() as cs,
            _restoring_grad_mode(grad_enabled),
        ):
            seen_args, seen_kwargs = self.bind_arguments(args, kwargs)
            result = _lift_objects(self.interpreted(*seen_args, **seen_kwargs))
            register_containers(result)
            _check_result(result)
            prims.python_return(result)
        self.constraints = list(cs)
        if dtypes.default_dtype_was_read.get():
            self._check(prims.check_default_dtype, torch.get_default_dtype())
        if self.grad_mode_switched:  # the recorded switches restore the mode the trace began in
            self._check(prims.check_grad_enabled, grad_enabled)
        if self.checks:
            for expr in self.constraints:
                self._emit(prims.check_expr, expr, ())
        self.computation.args = [p for _, p in self.inputs] + [s for _, s in self.dims]
        return result

    def finish_prologue(self, used_names: set[str]) -> list:
        """Ends the prologue with the computation's inputs; returns the computation's parameters.

        Symbolic dims are passed only when the final computation uses them.
        """
        pairs = list(self.inputs) + [(d, s) for d, s in self.dims if s.name in used_names]
        self.prologue.bound_symbols.append(prims.python_return.bind(tuple(h for h, _ in pairs), output=None))
        return [p for _, p in pairs]


_THUNDER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@contextlib.contextmanager
def _restoring_grad_mode(enabled: bool):
    """A program that fails inside ``with torch.no_grad():`` must not leave autograd off."""
    try:
        yield
    finally:
        torch._C._set_grad_enabled(enabled)


def _source_location(module_paths: dict[int, str] | None = None) -> SourceLocation | None:
    """The innermost interpreted frame that is the user's (thunder's own frames are skipped), with
    the qualified path of the innermost ``nn.Module`` whose method is running (``"encoder.layers.0"``)."""
    stack = get_interpreter_stack()
    module_path = None
    if module_paths:
        for frame in reversed(stack):
            path = module_paths.get(id(frame.receiver)) if frame.receiver is not None else None
            if path is not None:
                module_path = path
                break
    for frame in reversed(stack):
        if not frame.filename.startswith(_THUNDER_DIR):
            return SourceLocation(frame.filename, frame.lineno or 0, frame.qualname, module_path)
    return None


def _cell_holding(fn: Callable, value: Any):
    """The closure cell of ``fn`` that holds ``value``, if any."""
    fn = getattr(fn, "__func__", fn)
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            if cell.cell_contents is value:
                return cell
        except ValueError:  # empty cell
            continue
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


def _find_cell(fn: Callable, code, name: str):
    fn = getattr(fn, "__func__", fn)
    if getattr(fn, "__code__", None) is not code or not fn.__closure__:
        return None
    try:
        return fn.__closure__[code.co_freevars.index(name)]
    except ValueError:
        return None


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
    changed = {k: v for k, v in lifted.items() if v is not attrs[k] or isinstance(v, Proxy)}
    return ObjectWithProxies(x, changed) if changed else x


def _check_result(result: Any) -> None:
    from thunder.core.pytree import tree_leaves

    for leaf in tree_leaves(result):
        if isinstance(leaf, torch.Tensor):
            raise ThunderRuntimeError(
                "the function returned a torch.Tensor that was not computed from its inputs by traced torch "
                "operations (it was made by code thunder ran natively); return values must come from traced ops"
            )


_table: dict | None = None


def _lookaside_table() -> dict:
    """torch callables and user-registered replacements -> symbols."""
    global _table
    if _table is None:
        from thunder.extend import replacements
        from thunder.torch import torch_to_thunder_map

        _table = _MergedTable(torch_to_thunder_map, replacements)
    return _table


class _MergedTable:
    __slots__ = ("first", "second")

    def __init__(self, first: dict, second: dict):
        self.first, self.second = first, second

    def get(self, key):
        found = self.second.get(key) if self.second else None
        return found if found is not None else self.first.get(key)
