"""Special callables: the calls the tracer handles itself instead of interpreting their code (its lookaside).

A call of a torch callable is recorded as the symbol it stands for; ``getattr``, ``setattr`` and friends
are reads and writes of outside state; a ``torch.autograd.Function``, ``torch.utils.checkpoint.checkpoint``
and ``vjp`` record regions of the trace; ``copy.copy``/``copy.deepcopy`` of an outside object is made by the
prologue (Note [Copies of outside objects]); ``print``, warnings and logging go to ``thunder.core.program_output``
(replayed on every call); switching grad mode is recorded; a module call skips torch's hook machinery where it can
(Note [Module calls]); a call whose result differs from call to call is made by the prologue
(``thunder.core.symbolic_numbers``). Everything else runs under the interpreter.

Note [Module calls]
``module(x)`` runs ``nn.Module._wrapped_call_impl``, which reads ``_compiled_call_impl``, the four hook
dicts of the module and the four global ones before it calls ``forward``. Traced as it is, each read
is an attribute guard of its own (a type check and a check that the dict is empty): about a dozen
lines of the prologue per module, most of a cached call's checking on a model with a hundred
modules. So traced calls run ``_module_call`` instead: for a module the program did not make, with
no hooks and not compiled (as nearly every module is), it calls ``forward`` directly and the prologue
checks all of that in one line; otherwise it runs torch's own code. The tracer runs ``_module_call`` itself
(``SpecialCallsMixin._module_call``: the same check and the same read of ``forward``), not under the interpreter: a
frame and a dozen instructions per module call, a tenth of what a decode step of a small Llama interprets.

Note [A hooked module's call while a method is routed]
While a method of a compiled module runs (``jm.generate``), the module's ``_compiled_call_impl`` is the ThunderModule's
compiled call (Note [Methods of a compiled module] in thunder.core.module), so torch's ``_wrapped_call_impl``, traced
for a module with hooks, would call thunder's entry from inside its own trace, again and again. A module from outside
whose ``_compiled_call_impl`` is None or such an entry is traced as torch's uncompiled call (``_call_impl``, hooks
and all), checked by one condition that takes both as the same: the trace made in a routed call serves a plain one.


``SpecialCallsMixin`` is the part of ``Tracer`` (``thunder.core.jit_ext``) that handles these calls; the
state it keeps is set up by ``Tracer.__init__``. The calls it refuses, and their messages, are in
``thunder.core.refusals``.

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import copy as copy_module
import dataclasses
import functools
import importlib.metadata
import logging
import os
import sys
import types
import warnings
import weakref
from collections.abc import Callable
from typing import Any

import numpy
import torch
import torch.utils.checkpoint

from thunder.core import introspection, prims, proxies, torch_state, transforms
from thunder.core.attribute_calls import ATTRIBUTE_SLOTS, plain_slot, python_getter
from thunder.core.errors import ThunderRuntimeError, UnsupportedOpError
from thunder.core.interpreter.execution import call as interpreter_call
from thunder.core.interpreter.execution import lookup_type_attr
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.library_wrappers import native_wrapper
from thunder.core.lifting import holds
from thunder.core.module import is_thunder_entry
from thunder.core.nested_jit import inner_jitted_lookaside
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.pytree import tree_leaves
from thunder.core.refusals import (
    ARRAY_LIKE,
    CACHE_STATE,
    DEFAULTS,
    DISTRIBUTED,
    GRADIENT,
    MASKED,
    NESTED,
    TRANSFORM,
    hash_unless_nan,
    refuse_cache_state,
    refuse_environ_write,
    refuse_inside,
    refuse_parameter,
    refuse_parameter_made_at,
    refuse_script_module,
    refuse_traced,
)
from thunder.core.symbol import Symbol
from thunder.core.symbol_lookup import (
    bound_self,
    interpreted_replacement,
    plain_attribute,
    register_interpreted_replacement,
    unreplaced,
)
from thunder.core.symbolic import SymFloat, SymInt, pin
from thunder.core.symbolic_numbers import _is_literal_argument
from thunder.core.traced_autograd import (
    checkpoint_region,
    higher_order_function,
    is_autograd_function_apply,
    trace_autograd_function,
)
from thunder.core.traced_vmap import vmap_impl
from thunder.core.user_code import is_nondeterministic, source_location


def _hookless(module: torch.nn.Module) -> bool:
    """Answered by the tracer (``Tracer._hookless``) in traced code."""
    raise ThunderRuntimeError("thunder.core.special_calls._hookless is only called by traced code")


def _copied_from(module: torch.nn.Module) -> str | None:
    """Answered by the tracer (``Tracer._copy_source_name``) in traced code."""
    raise ThunderRuntimeError("thunder.core.special_calls._copied_from is only called by traced code")


_WRAPPED_CALL_IMPL = torch.nn.Module._wrapped_call_impl
#: The tensor factories that copy a numpy array the program made into a constant (Note [Tensors of outside arrays]).
_COPIED_ARRAYS = (torch.tensor, torch.as_tensor, torch.from_numpy)
_torch_module_call = unreplaced(_WRAPPED_CALL_IMPL)
_torch_module_init = unreplaced(torch.nn.Module.__init__)
_torch_register_parameter = unreplaced(torch.nn.Module.register_parameter)
_dataclass_fields = unreplaced(dataclasses.fields)


def _globals_read_by(fn: types.FunctionType) -> tuple[str, ...]:
    """The names of ``fn``'s module globals that its code (nested code included) may read, in first-use order."""
    names, codes = [], [fn.__code__]
    for code in codes:
        codes.extend(c for c in code.co_consts if isinstance(c, types.CodeType))
        names.extend(n for n in code.co_names if n in fn.__globals__ and n not in names)
    return tuple(names)


_DATACLASS_FIELDS_GLOBALS = _globals_read_by(dataclasses.fields)


def _module_call(self, *args, **kwargs):
    """``nn.Module.__call__`` in traced code (Note [Module calls])."""
    if _hookless(self):
        return self.forward(*args, **kwargs)
    return _torch_module_call(self, *args, **kwargs)


register_interpreted_replacement(_WRAPPED_CALL_IMPL, _module_call)


def _module_apply(self, fn, recurse=True):
    """``nn.Module._apply`` (``module.to(...)``, ``.float()``, ``.cpu()``) in traced code. One that changes nothing
    returns the module (SwitchTransformers calls ``self.classifier.to(self.dtype)`` in its forward); one that would
    replace parameters or buffers is refused: a trace cannot change the module it reads."""
    for name, t in (*self.named_parameters(recurse=recurse), *self.named_buffers(recurse=recurse)):
        if fn(t) is not t:
            loc = source_location()
            original = _copied_from(self)
            if original is not None:  # Note [Copies of outside objects] in thunder.core.copies
                loc = loc and (loc.call_site or loc)
                raise UnsupportedOpError(
                    f"converting module {type(self).__name__}, a copy of {original} that the jitted function makes, "
                    f"inside it{f' at {loc}' if loc else ''} would change its tensor {name!r} ({t.dtype}, {t.device}), "
                    "which is not supported: thunder makes such a copy on every call before the program runs, and a "
                    "trace cannot replace the parameters and buffers of a module it reads. Make the converted copy "
                    f"outside the jitted function and pass it in (an argument: copy.deepcopy({original}).to(...)), or "
                    "convert the inputs instead of the module."
                )
            raise UnsupportedOpError(
                f"converting module {type(self).__name__} inside the jitted function"
                f"{f' at {loc}' if loc else ''} would change its tensor {name!r} ({t.dtype}, {t.device}); a trace "
                "cannot change the parameters and buffers it reads. Convert the module (module.to(...)) before "
                "calling the jitted function."
            )
    return self


register_interpreted_replacement(torch.nn.Module._apply, _module_apply)


# torch's Python functions start with ``if has_torch_function(...)``: while tracing the answer is
# no, so their bodies run under the interpreter and reach the ops they are made of.
_NO_TORCH_FUNCTION = frozenset(
    {torch._C._has_torch_function, torch._C._has_torch_function_unary, torch._C._has_torch_function_variadic}
)


def _no_torch_function(*args) -> bool:
    return False


# Note [A parameter the program makes and uses]
# peft's DoRA on GPT-2 (``fan_in_fan_out``) computes with ``torch.nn.Parameter(weight.T)`` in its forward: a new leaf
# on every call, cut from ``weight``'s graph, whose gradient goes nowhere. A trace cannot make a leaf that the caller
# gets, but one that the program only computes with is ``data.detach().requires_grad_(requires_grad)``, a Parameter
# to ``isinstance`` and ``type`` (Note [Eager types] in thunder.core.introspection): eager's values, gradients and
# ``requires_grad`` (the computation runs under torch's autograd, as for any leaf made inside:
# ``compile_stats(jm).last_autograd_fallback`` says so). A parameter that leaves the function (returned) or is kept
# (stored on an object, in a container, registered on a module: a module built in ``forward``, a lazy module's weights)
# is refused with ``MakesParameters``, as any subclass (``UninitializedParameter``) is: the first call runs eagerly, as
# a one-time setup (Note [Parameters made by the program] in thunder).
def _parameter_from(data: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """What ``torch.nn.Parameter(data, requires_grad)`` computes: ``data``'s values, cut from its graph."""
    made = data.detach()
    return made.requires_grad_() if requires_grad else made


_SCRIPT_FUNCTION, _SCRIPT_MODULE, _SCRIPT_METHOD = torch.jit.ScriptFunction, torch.jit.ScriptModule, torch.ScriptMethod
# Callables whose call runs no slot of a user's class (Note [Slots a call runs] in thunder.core.outside_reads)
_NO_SLOTS = frozenset({
    types.FunctionType, types.MethodType, types.BuiltinFunctionType, types.BuiltinMethodType, types.MethodWrapperType,
    types.WrapperDescriptorType, types.MethodDescriptorType, types.ClassMethodDescriptorType, functools.partial,
})  # fmt: skip


def _group_tensors_by_device_and_dtype(tensorlistlist: list, with_indices: bool = False) -> dict:
    """``torch._C._group_tensors_by_device_and_dtype`` (foreach optimizers, ``clip_grad_norm_``) on traced values, which
    its C code does not take: it groups empty stand-ins of the first list's tensors, so the groups and their order are
    eager's, and takes each group's items of every list by index (None items and empty lists as eager's)."""
    stand_ins = [torch.empty(0, dtype=t.dtype, device=t.device) for t in tensorlistlist[0]]
    groups = torch._C._group_tensors_by_device_and_dtype([stand_ins], True)
    return {
        key: ([[items[i] for i in indices] if items else [] for items in tensorlistlist], indices if with_indices else [])
        for key, (_, indices) in groups.items()
    }


_UNREAD = object()
# Note [torch.compile inside a jitted function]
# A function or module that ``torch.compile`` wrapped (a decorated helper, ``torch.compile(module)``, or
# ``torch.compile(fn)`` made inside the function) is traced as its original callable: thunder compiles the whole
# program, so Dynamo has nothing to add, and its wrapper's own code would install Dynamo's frame hook while thunder
# traces (Dynamo then compiled thunder's own frames). ``torch.compiler.disable`` wrappers carry the same attribute and
# are traced as their original too (the values are eager's either way). ``torch.compile(...)`` itself runs natively:
# its code reads and sets Inductor's environment variables, which a trace could not replay; the wrapper it makes is
# never run.


def _distributed_untraced() -> tuple[Callable, ...]:
    """torch.distributed's calls that take no tensor, which would run once while tracing (refusals.DISTRIBUTED)."""
    if not torch.distributed.is_available():
        return ()
    names = ("barrier", "monitored_barrier", "all_gather_object", "broadcast_object_list", "gather_object",
             "scatter_object_list", "send_object_list", "recv_object_list")  # fmt: skip
    return tuple(getattr(torch.distributed, n) for n in names if hasattr(torch.distributed, n))


class SpecialCallsMixin:
    """``Tracer``'s lookaside: the callables it handles itself."""

    @functools.cached_property
    def _specials(self) -> dict:
        """The builtins the tracer calls its own way (looked up first: one dict lookup a call)."""
        return {
            len: self._len,
            hash: hash_unless_nan,
            range: self._range,  # Note [Loops over a symbolic range] in thunder.core.loops
            torch.stack: self._stack,
            torch.cat: self._cat,
            torch.concat: self._cat,
            torch.concatenate: self._cat,
            getattr: self._getattr,
            hasattr: self._hasattr,
            setattr: self._setattr,
            object.__setattr__: functools.partial(self._setattr, setter=object.__setattr__),
            object.__getattribute__: self._object_getattribute,
            delattr: self._delattr,
            object.__delattr__: functools.partial(self._delattr, deleter=object.__delattr__),
            # Note [Tensors of outside arrays]
            torch.from_numpy: functools.partial(self._tensor_of_array, torch.from_numpy),
            torch.as_tensor: functools.partial(self._tensor_of_array, torch.as_tensor),
            torch.tensor: functools.partial(self._tensor_of_array, torch.tensor),
            torch.asarray: functools.partial(self._tensor_of_array, torch.asarray),
        }

    @functools.cached_property
    def _late_specials(self) -> dict:
        """The callables the tracer calls its own way where no symbol, lookaside or torch state reader claims them
        (looked up after those: one dict lookup a call)."""
        return {
            torch._C._set_grad_enabled: self._set_grad_enabled,
            torch.inference_mode.__enter__: self._inference_mode_enter,
            torch.inference_mode.__exit__: self._inference_mode_exit,
            transforms.vjp_call: self._vjp_call,
            torch.ops.higher_order.autograd_function_apply: self._higher_order_autograd_function,
            torch.utils.checkpoint.checkpoint: self._checkpoint,
            torch.ops.higher_order.tag_activation_checkpoint: self._tag_activation_checkpoint,
            torch._functorch.vmap.vmap_impl: vmap_impl,  # Note [torch.vmap in a trace]
            **{
                fn: functools.partial(refuse_inside, name, why)
                for fn, name, why in (
                    (torch.autograd.grad, "torch.autograd.grad", GRADIENT),
                    (torch.autograd.backward, "torch.autograd.backward", GRADIENT),
                    *((fn, f"torch.func.{fn.__name__}", TRANSFORM) for fn in (
                        torch.func.grad, torch.func.grad_and_value, torch.func.vjp, torch.func.jvp,
                        torch.func.jacrev, torch.func.jacfwd, torch.func.hessian,
                    )),
                    *((fn, f"torch.{name}", DEFAULTS) for fn, name in (
                        (torch.set_default_dtype, "set_default_dtype"), (torch._C._set_default_dtype, "set_default_dtype"),
                        (torch.set_default_tensor_type, "set_default_tensor_type"),
                        (torch.set_default_device, "set_default_device"),
                    )),
                    (torch.cond, "torch.cond", TRANSFORM),
                    *((fn, f"torch.distributed.{fn.__name__}", DISTRIBUTED) for fn in _distributed_untraced()),
                )
            },
            **{
                fn: functools.partial(refuse_traced, f"torch.{fn.__name__}", ARRAY_LIKE, fn)
                for fn in (
                    torch.sparse_coo_tensor, torch.sparse_csr_tensor, torch.sparse_csc_tensor,
                    torch.sparse_bsr_tensor, torch.sparse_bsc_tensor, torch.sparse_compressed_tensor,
                )
            },
            **{
                fn: functools.partial(refuse_traced, f"torch.nested.{fn.__name__}", NESTED, fn)
                for fn in (
                    torch.nested.nested_tensor, torch.nested.as_nested_tensor, torch.nested.nested_tensor_from_jagged,
                    torch.nested.narrow, torch.nested.masked_select,
                )
            },
            **{
                fn: functools.partial(refuse_traced, f"torch.masked.{fn.__name__}", MASKED, fn)
                for fn in (torch.masked.masked_tensor, torch.masked.as_masked_tensor)
            },
            torch.utils.hooks.BackwardHook: _ModuleBackwardHook,
            _ModuleBackwardHook.setup_input_hook: self._module_hook_inputs,
            _ModuleBackwardHook.setup_output_hook: self._module_hook_outputs,
            torch._C._group_tensors_by_device_and_dtype: _group_tensors_by_device_and_dtype,
            logging.Logger._log: self._log,
            warnings.warn: self._warn,
            # Note [Warnings] (thunder.core.program_output): the program's own filters act at tracing, as they do on every call.
            warnings.catch_warnings.__enter__: warnings.catch_warnings.__enter__,
            warnings.catch_warnings.__exit__: warnings.catch_warnings.__exit__,
            warnings.simplefilter: warnings.simplefilter,
            warnings.filterwarnings: warnings.filterwarnings,
            warnings.resetwarnings: warnings.resetwarnings,
            # Queries of the installed packages (lightning_utilities' ``RequirementCache``, which a torchmetrics
            # metric's ``update`` asks on first use) read the file system, not the program's state: run natively.
            # Interpreted, their own lru caches (``FastPath.lookup.cache_clear()``) were refused as the program's.
            **{fn: fn for fn in (
                importlib.metadata.version, importlib.metadata.distribution, importlib.metadata.metadata,
                importlib.metadata.requires, importlib.metadata.files, importlib.metadata.entry_points,
                importlib.metadata.distributions, importlib.metadata.packages_distributions,
            )},
            os._Environ.__getitem__: self._environ_getitem,
            os._Environ.__iter__: self._environ_iter,
            os._Environ.__len__: lambda env: len(self._environ_read(env, None)),
            os._Environ.__setitem__: functools.partial(refuse_environ_write, "sets"),
            os._Environ.__delitem__: functools.partial(refuse_environ_write, "deletes"),
            copy_module.deepcopy: functools.partial(self._copy, copy_module.deepcopy),
            copy_module.copy: functools.partial(self._copy, copy_module.copy),
            # A torch.autograd.Function class defined inside the function (torch.masked's ops do): the metaclass
            # numbers it from a global itertools.count, which tracing cannot snapshot.
            torch.autograd.function.FunctionMeta: torch.autograd.function.FunctionMeta,
            _hookless: self._hookless,
            _copied_from: self._copy_source_name,
            torch.nn.Module.__init__: self._module_init,
            torch.nn.Module.register_parameter: self._register_parameter,
            dataclasses.fields: self._fields,
            print: self._print,
            id: self._id,
            # A profiler range (``torch.profiler.record_function``, which every torch.optim step opens) changes no
            # value: in a trace its ``with`` does nothing (thunder's ranges: Note [Profiling ranges] in codegen).
            torch.autograd.profiler.record_function.__enter__: lambda cm: cm,
            torch.autograd.profiler.record_function.__exit__: lambda cm, *exc_info: None,
            torch.compile: torch.compile,  # Note [torch.compile inside a jitted function]
        }

    def _referent(self, ref: weakref.ReferenceType, holder: Proxy) -> Any:
        """``ref()`` of a weak reference from outside (an LR scheduler holds its optimizer so): the object it refers
        to on each call, read by the prologue, so what the program does to it is traced (it ran natively, on the
        real tensors, at tracing only)."""
        referent = ref()
        p = self._prologue_proxy("referent")
        self._emit(prims.unpack_call, weakref.ReferenceType.__call__, (holder,), {}, p, output=p)
        return self.unpack_value(referent, p, p.name)

    def _id(self, obj: Any) -> int:
        """``id(x)`` in the program: of a tensor from outside (``id(p) in no_decay_ids``, a state keyed by ``id(p)``)
        the real tensor's, or of an outside container the program sees a copy of, the original's; the prologue
        checks that the object read is that one (the trace depends on its identity)."""
        found = self._tensor_inputs.get(id(obj)) if isinstance(obj, TensorProxy) else None
        if found is not None:
            holder, real = found
            self._check(prims.check_identity, holder, real)
            return id(real)
        original = self._copy_originals.get(id(obj))
        lazy = self._lazy.get(id(obj))
        if original is None and lazy is not None and lazy.copy is obj:
            original = lazy.original
        if original is not None:
            holder = self._provenance.get(id(original)) or (lazy.holder if lazy is not None else None)
            if holder is not None and self._made_per_call(holder):  # (``copy.deepcopy(vars(c))`` of a copy ``c``)
                return id(original)
            if holder is not None:
                self._check(prims.check_identity, holder, original)
                return id(original)
        return id(obj)

    def _made_per_call(self, holder: Proxy) -> bool:
        """Whether the prologue reaches ``holder`` through a copy it makes on every call (Note [Copies of outside
        objects]): then its identity is new on every call, and nothing can be checked of it."""
        made_by = {o.name: b for b in self.prologue.bound_symbols for o in b.flat_proxy_outs}
        todo, seen = [holder.name], set()
        while todo:
            bsym = made_by.get(todo.pop())
            if bsym is None or id(bsym) in seen:
                continue
            seen.add(id(bsym))
            if bsym.sym is prims.unpack_call and bsym.args[0] in (copy_module.copy, copy_module.deepcopy):
                return True
            todo.extend(a.name for a in bsym.flat_proxy_args)
        return False

    def _module_hook_inputs(self, hook: _ModuleBackwardHook, args: tuple) -> tuple:
        """``BackwardHook.setup_input_hook(args)`` in ``nn.Module.__call__`` of a module with backward hooks (Note
        [Module backward hooks in the program] in thunder.core.prims.effects)."""
        if not torch.is_grad_enabled():  # eager's passes nothing through, and no hook of it runs
            return args
        if self._store_regions:
            path = self._module_paths.get(id(hook.module))
            name = f"{type(hook.module).__name__} {path!r}" if path else type(hook.module).__name__
            loc = source_location()
            raise UnsupportedOpError(
                f"module {name} has a backward hook (register_full_backward_hook or register_full_backward_pre_hook, "
                f"or a global module backward hook) and is called in a checkpointed region"
                f"{f' (at {loc.call_site or loc})' if loc else ''}: thunder runs its hooks through torch's autograd, "
                "which does not recompute the region. Hook a module outside the region, or hook tensors instead."
            )
        positions = tuple(i for i, a in enumerate(args) if isinstance(a, TensorProxy))
        module, hooks, pre_hooks = self.escaping((hook.module, hook.user_hooks, hook.user_pre_hooks))
        out = prims.module_hook_inputs(module, hooks, pre_hooks, len(args), positions, *(args[i] for i in positions))
        hook.made = self.computation.scopes[-1], self.computation.scopes[-1][-1]
        if isinstance(out, Proxy):
            hook.proxy = out
            return args
        hook.proxy, *tensors = out
        args = list(args)
        for i, t in zip(positions, tensors):
            args[i] = t
        return tuple(args)

    def _module_hook_outputs(self, hook: _ModuleBackwardHook, result: Any) -> Any:
        """``BackwardHook.setup_output_hook(result)`` (Note [Module backward hooks in the program] in
        thunder.core.prims.effects): the module's tensor results pass through where one requires grad."""
        results = result if isinstance(result, tuple) else (result,)
        positions = tuple(i for i, r in enumerate(results) if isinstance(r, TensorProxy))
        if hook.proxy is None or not torch.is_grad_enabled() or not any(results[i].requires_grad for i in positions):
            if hook.proxy is not None and hook.made[1].output is hook.proxy:  # nothing passed through: no hook runs
                hook.made[0].remove(hook.made[1])
            return result
        tensors = prims.module_hook_outputs(hook.proxy, len(results), positions, *(results[i] for i in positions))
        results = list(results)
        for i, t in zip(positions, tensors):
            results[i] = t
        return tuple(results) if isinstance(result, tuple) else results[0]

    @functools.cached_property
    def _plain_functions(self) -> set:
        """The Python functions that ``lookaside`` found to be interpreted as they are: what decided it depends on
        the function alone (tables that tracing does not change), so later calls skip to the answer."""
        return set()

    # Note [Type checks of the program's objects while tracing]
    # ``isinstance(obj, T)`` that fails asks ``obj.__class__`` too, through the object's own ``__getattribute__``:
    # for a class that defines one in Python (transformers' configs) that is two Python calls per type tested, about
    # 3 us each, natively (so no trace sees them). Asked for every call and attribute read of the program, they were
    # a tenth of the first call of a zoo model. The questions here are about the object's real type (which methods
    # it has, which table names it), so they test ``type(obj)``.
    def lookaside(self, fn: Callable) -> Callable | None:
        """What the interpreter calls instead of ``fn``, or None to let it handle ``fn`` as usual."""
        if fn is super:  # the interpreter's own (a transformers config read calls it twice): none of the tables below has it
            return None
        native_type = type(fn) in _NO_SLOTS  # (exact builtin types: their slots are C's, and cannot change)
        if not native_type:
            self.check_call_slots(fn)  # Note [Slots a call runs] in thunder.core.outside_reads
        if type(fn) is types.FunctionType:
            wrapper = native_wrapper(fn)  # Note [deprecate_kwarg's wrapper]
            if wrapper is not None:
                return functools.partial(wrapper, self, fn)
            if fn in self._plain_functions:
                self._guard_function(fn)
                return self._call_of(fn)
        if type(fn) is types.MethodType and issubclass(type(fn.__self__), Proxy):
            return fn  # a traced value's method (the torch language's): no table or special call names a method of it
        if not native_type and type(lookup_type_attr(type(fn), "__hash__")) is types.FunctionType:
            # An object whose class hashes it in Python (a user's callable) is no key of a table below, and looking it
            # up there ran that ``__hash__`` natively, about ten times, while eager runs it never.
            return self._call_of(fn)
        try:
            special = self._specials.get(fn)
            hashable = True
        except TypeError:  # an unhashable callable
            special, hashable = None, False
        if special is not None:
            return special
        size_numel = proxies.torch_size_lookaside(fn)
        if size_numel is not None:
            return size_numel
        replacement = introspection.lookaside(fn)
        if replacement is not None:
            return replacement
        sym = self.symbol_lookup(fn)
        if sym is not None:
            return sym
        if hashable and fn in _NO_TORCH_FUNCTION:
            return _no_torch_function
        reader = torch_state.reader(
            fn, self.torch_state_read.add, self.computation.autocast_read.add, self.abc_reads
        )
        if reader is not None:  # Note [Torch state]
            return reader
        special = self._late_specials.get(fn) if hashable else None
        if special is not None:
            return special
        if is_autograd_function_apply(fn):
            return functools.partial(self._autograd_function, fn.__self__)
        if fn is torch.nn.Parameter:
            return self._parameter
        if isinstance(fn, type) and issubclass(fn, torch.nn.Parameter):
            return functools.partial(refuse_parameter, fn)
        if isinstance(fn, Symbol):
            return fn
        inner = inner_jitted_lookaside(fn)
        if inner is not None:
            return functools.partial(self._jitted_call, inner)
        if type(fn) is types.FunctionType and "_torchdynamo_orig_callable" in fn.__dict__:
            # Note [torch.compile inside a jitted function]
            original = fn.__dict__["_torchdynamo_orig_callable"]
            return lambda *a, **k: interpreter_call(current_runtime(), original, a, k)
        if type(fn) is _SCRIPT_FUNCTION:  # TorchScript runs it in C++: its Python source is traced instead
            original = plain_attribute(fn, "_torchdynamo_inline")
            if original is not None:
                return lambda *a, **k: interpreter_call(current_runtime(), original, a, k)
        getter = python_getter(fn)
        if getter is not None:
            return lambda *a, **k: interpreter_call(current_runtime(), getter, a, k)
        if type(fn) is weakref.ReferenceType:
            holder = self._provenance.get(id(fn))
            if holder is not None:
                return functools.partial(self._referent, fn, holder)
        self_obj = bound_self(fn)
        self_type = type(self_obj)  # Note [Type checks of the program's objects while tracing]
        if issubclass(self_type, Proxy):
            return fn
        if type(fn) is types.MethodWrapperType and fn.__name__ in ATTRIBUTE_SLOTS:
            slot = self._attribute_slot(fn.__name__, self_obj, fn)
            if slot is not None:
                return slot
        if self_type in _REAL_TENSOR_TYPES and plain_attribute(fn, "__name__", "").endswith("_"):
            return functools.partial(_refuse_untraced_update, fn)
        if issubclass(self_type, _SCRIPT_MODULE):
            return functools.partial(refuse_script_module, self_obj)
        if type(fn) is _SCRIPT_METHOD:
            return functools.partial(refuse_script_module, fn)
        if self_type is functools._lru_cache_wrapper and plain_attribute(fn, "__name__") in CACHE_STATE:
            return functools.partial(refuse_cache_state, self_obj, fn.__name__)
        if self_obj is not None and plain_attribute(fn, "__name__") == "write":
            if self_obj is sys.stdout or self_obj is sys.stderr:
                return functools.partial(self._stream_write, self_obj)
        module = getattr(fn, "__module__", None)
        func = fn.__func__ if isinstance(fn, types.MethodType) else fn
        replacement = interpreted_replacement(func)
        if replacement is not None:
            bound = (self_obj,) if isinstance(fn, types.MethodType) else ()
            if replacement is _module_call:  # run by the tracer itself: no frame, no instructions (Note [Module calls])
                return functools.partial(self._module_call, *bound)
            return lambda *a, **k: interpreter_call(current_runtime(), replacement, (*bound, *a), k)
        nondeterministic = is_nondeterministic(fn, module, self_obj)
        if isinstance(func, types.FunctionType) and not nondeterministic:
            if type(fn) is types.FunctionType:
                self._plain_functions.add(fn)
            self._guard_function(func)
            return self._call_of(fn)
        if nondeterministic:
            owner = self_obj if isinstance(self_obj, type) else type(self_obj)
            where = module or (f"{owner.__module__}.{owner.__qualname__}" if isinstance(self_obj, type) else owner.__module__)
            return self._hoisted_call(fn, f"{where}.{getattr(fn, '__name__', fn)}")
        if type(fn) is functools._lru_cache_wrapper:
            return functools.partial(self._cached_call, fn)
        if type(func) is functools._lru_cache_wrapper and isinstance(fn, types.MethodType):
            return functools.partial(self._cached_method_call, fn)
        return self._call_of(fn) or self._container_method(fn, self_obj) or introspection.native_number_reader(fn)

    # Note [Attribute slots called by name]
    # ``object.__getattribute__(obj, "n")``, ``obj.__getattribute__("n")``, ``obj.__setattr__("n", v)`` run natively:
    # the read was not checked (a cached trace kept the value) and the write was made once, while tracing. Where the
    # class does not define that slot itself (nor ``__getattr__``, for reads), the call does what ``getattr``,
    # ``setattr`` and ``delattr`` do, and is traced as they are. Where it does (a class's own ``__getattribute__``
    # calling ``super().__getattribute__``), ``object.__getattribute__`` is the leaf where the read is checked (Note
    # [Reads through a Python __getattribute__] in thunder.core.interpreter.protocols).
    def _object_getattribute(self, obj: Any, name: Any) -> Any:
        if type(name) is str and plain_slot(type(obj), "__getattribute__"):
            return self._getattr(obj, name)
        return self._raw_getattr(obj, name)

    def _attribute_slot(self, slot: str, obj: Any, fn: Any) -> Callable | None:
        if slot == "__getattribute__" and fn.__objclass__ is object and not plain_slot(type(obj), slot):
            # ``super().__getattribute__`` in a ``__getattribute__``: Note [Reads through a Python __getattribute__]
            return functools.partial(self._raw_getattr, obj)
        if slot != "__getattribute__" and fn.__objclass__ is object:  # ``super().__setattr__`` in a ``__setattr__``
            traced = self._setattr if slot == "__setattr__" else self._delattr
            setter = {"setter": object.__setattr__} if slot == "__setattr__" else {"deleter": object.__delattr__}
            return functools.partial(traced, obj, **setter)
        if not plain_slot(type(obj), slot):
            return None
        traced = {"__getattribute__": self._getattr, "__setattr__": self._setattr, "__delattr__": self._delattr}[slot]
        return functools.partial(traced, obj)

    def _cached_call(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        """A call of a ``functools.lru_cache``/``cache`` function with constant arguments (``causal_mask(16)``): the
        prologue makes it on every call, a cache lookup as eager's, and what it returns is an input of the trace (a
        mask it made once is the same tensor on every call, as eager's, not a tensor the trace cannot see). A symbolic
        size among the arguments is pinned (the entry holds for its value); other arguments: called as it is."""
        return self._cached_lookup(fn, None, args, kwargs)

    def _cached_method_call(self, method: types.MethodType, *args: Any, **kwargs: Any) -> Any:
        """``self.rotary(16)`` of a method decorated with ``lru_cache``: as ``_cached_call``, with the instance read
        by the prologue from where the program got it (its cache is keyed by the instance, as eager's)."""
        holder = self._provenance.get(id(method.__self__))
        if holder is None:  # an object the program made: called as it is
            return method(*args, **kwargs)
        return self._cached_lookup(method.__func__, (method.__self__, holder), args, kwargs)

    def _cached_lookup(self, fn: Callable, owner: tuple[Any, Proxy] | None, args: tuple, kwargs: dict) -> Any:
        """``fn(*args, **kwargs)`` made by the prologue (``_cached_call``), or ``fn(obj, *args, **kwargs)`` for an
        ``owner`` (obj, its prologue proxy)."""
        bound = () if owner is None else (owner[0],)
        args, kwargs = _pinned(args), _pinned(kwargs)
        # The call runs now, for real, with the effects of its body; eager makes it only if it gets here: would eager
        # have failed at run time before it (an in-place update of a leaf requiring grad, an index out of range)?
        self._raise_an_earlier_failure()
        try:
            # (with the types: ``2`` and ``2.0`` are equal, and lru_cache keys them apart)
            key = ("cached call", id(fn), *map(id, bound), args, tuple(map(type, args)), tuple(sorted(kwargs.items())),
                   tuple(type(v) for _, v in sorted(kwargs.items())))  # fmt: skip
            hash(key)
        except TypeError:  # unhashable arguments: eager's error, or arguments the cache cannot key
            return fn(*bound, *args, **kwargs)
        if not all(_is_literal_argument(a) for a in (*args, *kwargs.values())):
            return fn(*bound, *args, **kwargs)
        found = self._reads.get(key, _UNREAD)
        if found is _UNREAD:
            value = fn(*bound, *args, **kwargs)
            holder = self._prologue_proxy(plain_attribute(fn, "__name__", "cached"))
            # A prologue that rejects the call must not make it: a lookup of other arguments moves the cache's order
            # (an ``lru_cache(maxsize=2)`` then evicts what eager keeps and runs the function's body again).
            self._check_constraints_so_far()
            passed = args if owner is None else (owner[1], *args)
            self._emit(prims.unpack_call, fn, passed, kwargs, holder, output=holder)
            self._keepalive.append(fn)
            found = self._reads[key] = self.unpack_value(value, holder, holder.name)
        return found

    # Note [Tensors of outside arrays]
    # ``torch.from_numpy(MEAN)``, ``torch.tensor(table)`` of a numpy array from outside the function (a global, an
    # attribute): the prologue makes the tensor on every call from the array it reads then, and the tensor is an
    # input of the trace, so its values are the array's at each call (and ``from_numpy``'s tensor shares the array's
    # memory, as in eager). ``torch.tensor`` of an array the program made (its values come from what the trace
    # checks: a positional table computed with numpy) copies it, as eager: a constant of the trace with the array's
    # dtype. ``torch.as_tensor`` and ``torch.from_numpy`` of such an array (DETR's Hungarian matcher, of scipy's
    # assignment) make the same constant; eager's tensor shares the array's memory, so a program that changes the
    # array afterwards is refused when tracing ends (``_check_arrays_shared``). Other calls (of lists) go to the
    # symbols as before.
    def _tensor_of_array(self, fn: Callable, data: Any, *args: Any, **kwargs: Any) -> Any:
        holder = self._provenance.get(id(data)) if isinstance(data, numpy.ndarray) else None
        constant = (_is_literal_argument(a) or isinstance(a, (torch.dtype, torch.device)) for a in (*args, *kwargs.values()))
        if holder is None and fn in _COPIED_ARRAYS and type(data) is numpy.ndarray and not args:
            dtype = kwargs.get("dtype") or torch.from_numpy(numpy.empty(0, dtype=data.dtype)).dtype  # eager's TypeError
            if fn is not torch.tensor:  # eager's tensor shares the array's memory: later changes would show
                self._arrays_shared.append((data, data.copy(), fn.__name__))
            symbol = self.symbol_lookup(torch.tensor if fn is torch.from_numpy else fn)
            return symbol(data.tolist(), **{**kwargs, "dtype": dtype})
        if holder is None or not all(constant):
            symbol = self.symbol_lookup(fn)
            if symbol is None:  # ``torch.asarray``
                return refuse_traced(f"torch.{fn.__name__}", ARRAY_LIKE, fn, data, *args, **kwargs)
            return symbol(data, *args, **kwargs)
        value = fn(data, *args, **kwargs)
        p = self._prologue_proxy(fn.__name__)
        self._emit(prims.unpack_call, fn, (holder, *args), kwargs, p, output=p)
        return self.unpack_value(value, p, p.name)

    def _check_arrays_shared(self) -> None:
        """Refuses a program that changed a numpy array after ``torch.as_tensor``/``torch.from_numpy`` made a tensor of
        it: eager's tensor, sharing the array's memory, shows the change; the trace's constant does not (Note
        [Tensors of outside arrays])."""
        for array, first, name in self._arrays_shared:
            if not numpy.array_equal(array, first, equal_nan=array.dtype.kind in "fc"):
                raise ThunderRuntimeError(
                    f"torch.{name} of a numpy array the program made, which it changed afterwards: eager's tensor "
                    "shares the array's memory and shows the change, thunder.jit's is a constant of the values "
                    "before. Use torch.tensor (a copy) or make the tensor after the change"
                )

    # Note [Environment variables]
    # ``os.environ`` belongs to a module taken as fixed, yet its contents are the world's: a program that reads
    # ``os.environ.get("FLAG")`` (transformers reads a few in a forward) must be retraced when the variable changes.
    # Each variable read is a prologue input (``prims.unpack_environ``) checked against what tracing saw, an unset
    # one included (``get``, ``in`` and ``os.getenv`` go through ``__getitem__``); iterating checks the names.
    # Setting or deleting one inside the function is refused: a trace does not replay it on later calls.
    def _environ_read(self, env: os._Environ, key: Any) -> Any:
        read = ("environ", id(env), key)
        found = self._reads.get(read, _UNREAD)
        if found is _UNREAD:
            found = tuple(env) if key is None else dict.get(env._data, env.encodekey(key))
            if found is not None and key is not None:
                found = env.decodevalue(found)
            self._reads[read] = found
            p = self._prologue_proxy("environ")
            self._emit(prims.unpack_environ, env, key, p, output=p)
            self._keepalive.append(env)
            self._check(prims.check_value, p, found)
        return found

    def _environ_getitem(self, env: os._Environ, key: Any) -> Any:
        if not isinstance(key, (str, bytes)):
            return os._Environ.__getitem__(env, key)  # a key of the wrong type: eager's TypeError
        value = self._environ_read(env, key)
        if value is None:
            raise KeyError(key) from None
        return value

    def _environ_iter(self, env: os._Environ) -> Any:
        return iter(self._environ_read(env, None))

    def _call_of(self, fn: Callable) -> Callable | None:
        """A call of an outside callable that holds tensors (a partial's arguments, a function's defaults, the
        tensor a method is bound to): the call the program sees, with their proxies (``_call_instead``)."""
        instead = self._calls_instead.get(id(fn))
        if instead is None:
            return None
        return lambda *a, **k: interpreter_call(current_runtime(), instead, a, k)

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

    # Note [Inference mode in the program]
    # ``with torch.inference_mode():`` turns grad mode off as well: its results do not require grad. Run natively,
    # the region switched the mode of tracing only, and the computation made results that required grad. So the
    # region is entered natively (tracing goes on in inference mode, ``torch.is_inference_mode_enabled()`` reads
    # True in it, as in eager) and the grad mode it leaves is recorded as a switch (``_set_grad_enabled``) at its
    # start and end. A region tracing leaves by an error is left by ``_undo``. The computation's results are
    # ordinary tensors, not inference tensors (``Tensor.is_inference`` of one made in the region is refused).
    def _inference_mode_enter(self, ctx: torch.inference_mode) -> None:
        ctx.__enter__()
        guard = ctx._inference_mode_context
        self._undo.append(lambda: guard.__exit__(None, None, None) if ctx._inference_mode_context is guard else None)
        self._set_grad_enabled(torch.is_grad_enabled())

    def _inference_mode_exit(self, ctx: torch.inference_mode, *exc_info: Any) -> None:
        guard = ctx._inference_mode_context
        ctx._inference_mode_context = None  # left: the undo of its entry has nothing to do
        guard.__exit__(*exc_info)
        self._set_grad_enabled(torch.is_grad_enabled())

    def _hookless(self, module: torch.nn.Module) -> bool:
        """Whether calling ``module`` skips its hooks (Note [Module calls]); if so, checked by one guard."""
        holder = self._provenance.get(id(module))
        if (
            holder is None
            or torch._C._get_tracing_state()
            or type(module)._call_impl is not torch.nn.Module._call_impl  # a class that changes the call
            or (module._compiled_call_impl is not None and not is_thunder_entry(module._compiled_call_impl))
            or "forward" in module.__dict__  # a forward of its own: read (and checked) as torch's call reads it
            or any(self._as_seen(getattr(module, h)) for h in prims.python.MODULE_HOOK_DICTS)
            or any(getattr(torch.nn.modules.module, h) for h in prims.python.GLOBAL_HOOK_DICTS)
        ):
            return False  # traced as torch's own code, which reads (and guards) each of these
        if not self._global_hooks_checked:
            self._global_hooks_checked = True
            self._check(prims.check_no_hooks, None)
        self._check(prims.check_no_hooks, holder)
        self._asked_hasattr.add(("own method", id(module), "forward"))  # check_no_hooks checks it has none
        return True

    def _parameter(self, data: Any = None, requires_grad: Any = True) -> Any:
        """``torch.nn.Parameter(t)`` of a traced tensor (Note [A parameter the program makes and uses])."""
        if not isinstance(data, TensorProxy) or not isinstance(requires_grad, bool):
            return refuse_parameter(torch.nn.Parameter)
        made = interpreter_call(current_runtime(), _parameter_from, (data, requires_grad), None)
        self._made_parameters[id(made)] = (made, source_location())  # (the line named when it is refused)
        introspection.note_type(made, torch.nn.Parameter)
        return made

    def _register_parameter(self, module: torch.nn.Module, name: Any, param: Any) -> None:
        """``module.register_parameter(name, p)``: a parameter the program made is refused there (Note [A parameter
        the program makes and uses])."""
        self.refuse_a_made_parameter(param)
        return interpreter_call(current_runtime(), _torch_register_parameter, (module, name, param), None)

    def refuse_a_made_parameter(self, value: Any) -> None:
        """Stored (an attribute, an item) or registered, a parameter the program made is refused (Note [A parameter
        the program makes and uses])."""
        if id(value) in self._made_parameters:
            refuse_parameter_made_at(torch.nn.Parameter, self._made_parameters[id(value)][1])

    def _refuse_parameters_leaving(self, returned: Any) -> None:
        """A parameter the program made that it returns or stores outside is refused (Note [A parameter the program
        makes and uses])."""
        made, found = self._made_parameters, []

        def made_here(x: Any) -> bool:
            if id(x) in made:
                found.append(id(x))
            return bool(found)

        if made and any(holds(v, made_here) for v in (returned, *(r for _, _, r in self._stored_values))):
            refuse_parameter_made_at(torch.nn.Parameter, made[found[0]][1])

    def _module_call(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> Any:
        """``_module_call`` as the tracer runs it: the same reads and checks, without interpreting its code."""
        runtime = current_runtime()
        if self._hookless(module):
            return interpreter_call(runtime, self._getattr(module, "forward"), args, kwargs)
        holder = self._provenance.get(id(module))
        compiled = module._compiled_call_impl
        if holder is not None and (compiled is None or is_thunder_entry(compiled)):
            # Note [A hooked module's call while a method is routed]
            self._check(prims.check_expr, f"{holder.name}._compiled_call_impl is None or getattr({holder.name}."
                        "_compiled_call_impl, 'thunder_entry', False)", (holder,))  # fmt: skip
            return interpreter_call(runtime, self._getattr(module, "_call_impl"), args, kwargs)
        return interpreter_call(runtime, _torch_module_call, (module, *args), kwargs)

    def _module_init(self, module: torch.nn.Module, *args: Any, **kwargs: Any) -> None:
        """``nn.Module.__init__`` of a module the program is making (``super().__init__()`` in its class's
        ``__init__``; ``nn.ModuleList`` slices make one): run natively, it sets the same empty state. Interpreted it
        reads nothing from outside (torch's globals are fixed) and records nothing: its stores go to an object the
        program made. Any other call (arguments passed on by ``call_super_init``, an outside module) is interpreted."""
        plain = (
            not args and not kwargs and id(module) not in self._provenance and not self._is_outside(module)
            and lookup_type_attr(type(module), "call_super_init") is False and "call_super_init" not in vars(module)
        )  # fmt: skip
        if not plain:
            return interpreter_call(current_runtime(), _torch_module_init, (module, *args), kwargs)
        torch.nn.Module.__init__(module)

    def _fields(self, class_or_instance: Any) -> tuple:
        """``dataclasses.fields`` (``ModelOutput`` calls it for each field it sets): run natively, with the module
        globals its code reads read as the interpreter reads them (so checked alike). Interpreted, its other reads
        (the class's ``__dataclass_fields__``, a dunder, and the ``Field`` objects in it) check nothing; an nn.Module,
        a traced value or an object without the attribute (its TypeError) is interpreted."""
        plain = not isinstance(class_or_instance, (torch.nn.Module, Proxy)) and hasattr(class_or_instance, "__dataclass_fields__")
        if not plain:
            return interpreter_call(current_runtime(), _dataclass_fields, (class_or_instance,))
        module_globals = dataclasses.fields.__globals__
        for name in _DATACLASS_FIELDS_GLOBALS:
            self.load_global(module_globals, name, module_globals[name], False)
        return dataclasses.fields(class_or_instance)

    def _as_seen(self, value: Any) -> Any:
        """``value`` as the program sees it: an outside container the program read or changed is its copy
        (a hook the program registered is in the copy of the hook dict, not yet in the module's own)."""
        return self._proxy_for.get(id(value), value)

    # Note [Reentrant checkpointing]
    # Eager's reentrant ``checkpoint`` (``use_reentrant=True``, and torch's default, with a warning, when it is not
    # given) is an autograd.Function that runs the region under ``torch.no_grad()``: its results require grad only
    # through a tensor argument that does, and then its backward runs the region again and differentiates it whole.
    # With no argument that requires grad (a frozen embedding before the first checkpointed layer), eager warns
    # "None of the inputs have requires_grad=True. Gradients will be None", the parameters the region uses get no
    # gradient and the region never runs again: so does the program here, by running the region without grad. Keyword
    # arguments for the region, ``context_fn`` and ``debug`` are eager's ValueError with a reentrant checkpoint.
    def _checkpoint(self, function, *args, use_reentrant=None, context_fn=None, determinism_check=None,
                    debug=None, preserve_rng_state=True, **kwargs):  # fmt: skip
        """``torch.utils.checkpoint.checkpoint`` (Note [Activation checkpointing]); the stores the region undoes are
        dropped (Note [Stores a checkpointed region undoes] in thunder.core.side_effects); reentrant checkpointing as
        eager's (Note [Reentrant checkpointing])."""
        if use_reentrant is None:
            self._warn(_REENTRANT_DEFAULT)
        if use_reentrant is not False:
            if kwargs:
                raise ValueError("Unexpected keyword arguments: " + ",".join(arg for arg in kwargs))
            if context_fn not in (None, torch.utils.checkpoint.noop_context_fn) or debug:
                raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
            if not any(isinstance(a, (TensorProxy, torch.Tensor)) and a.requires_grad for a in args):
                self._warn("None of the inputs have requires_grad=True. Gradients will be None")
                enabled = torch.is_grad_enabled()
                self._set_grad_enabled(False)
                try:
                    return interpreter_call(current_runtime(), function, args, {})
                finally:
                    self._set_grad_enabled(enabled)
        body = self.computation.bound_symbols
        start = len(body)
        contents = self.contents_of_read_containers()
        self._store_regions.append({})
        try:
            result = interpreter_call(current_runtime(), function, args, kwargs)
        finally:
            stores = self._store_regions.pop()
        if len(self.computation.scopes) == 1:
            self._refuse_container_changes_in_region(contents, result)
            undone = {id(b) for b in self.stores_undone(stores)}
            body[start:] = [b for b in body[start:] if id(b) not in undone]
            checkpoint_region(self.computation, start, result)
        return result

    def _tag_activation_checkpoint(self, function, *args, **kwargs):
        """``torch.ops.higher_order.tag_activation_checkpoint``, what TorchDynamo makes of a ``checkpoint`` call (its
        graphs reach ``thunder.jit`` through ``thunder.dynamo.thunderfx``): eager runs it as a non-reentrant
        ``checkpoint`` that recomputes the whole region, as ours does."""
        kwargs = {k: v for k, v in kwargs.items() if k not in ("use_reentrant", "preserve_rng_state", "context_fn")}
        return self._checkpoint(function, *args, use_reentrant=False, **kwargs)

    def _refuse_container_changes_in_region(self, contents: dict, result: Any) -> None:
        """An outside container that a checkpointed region read and changed (``LOG.append(len(LOG))``) ends the call
        as the program left it (``replace_contents``), once: eager's second run of the region, in the backward, changes
        it again with the values it computes then (Note [What a recomputed region does again])."""
        changed = self.read_containers_changed_since(contents)
        if changed and any(isinstance(p, TensorProxy) and p.requires_grad for p in tree_leaves(result)):
            loc = source_location()
            raise ThunderRuntimeError(
                f"a checkpointed region{f' (called at {loc})' if loc else ''} changes an outside container that the "
                f"program reads ({changed[0].name}): eager's torch.utils.checkpoint runs the region again in the "
                "backward, which changes it again, and thunder.jit cannot make that change again. Move the change out "
                "of the checkpointed function, change the container without reading it (an append alone is made "
                "again), or do not checkpoint it"
            )

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


_REAL_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)


class _ModuleBackwardHook:
    """What ``torch.utils.hooks.BackwardHook(module, hooks, pre_hooks)`` makes in a traced module call: its two
    methods record the prims that make eager's object on each call (Note [Module backward hooks in the program] in
    thunder.core.prims.effects)."""

    def __init__(self, module: torch.nn.Module, user_hooks: list, user_pre_hooks: list):
        self.module, self.user_hooks, self.user_pre_hooks = module, user_hooks, user_pre_hooks
        self.proxy: Proxy | None = None  # the trace's value for eager's object
        self.made: tuple[list, Any] | None = None  # (scope, bound symbol) of ``module_hook_inputs``

    def setup_input_hook(self, args: tuple) -> tuple:
        raise AssertionError("called by the tracer only")

    def setup_output_hook(self, result: Any) -> Any:
        raise AssertionError("called by the tracer only")

#: Eager's warning for ``checkpoint`` without ``use_reentrant`` (Note [Reentrant checkpointing]).
_REENTRANT_DEFAULT = (
    "torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly. Starting in PyTorch 2.9, "
    "calling checkpoint without use_reentrant will raise an exception. use_reentrant=False is recommended, but if "
    "you need to preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more "
    "details on the differences between the two variants."
)


def _refuse_untraced_update(fn: Callable, *args: Any, **kwargs: Any) -> None:
    """An in-place method of a real tensor: one the program reached a way thunder does not follow (through a
    ``weakref.proxy``, ``vars(obj)``, a C extension), so the update would happen once, at tracing, and never again."""
    loc = source_location()
    raise UnsupportedOpError(
        f"Tensor.{plain_attribute(fn, '__name__', '?')} on a tensor that thunder did not trace"
        f"{f' (at {loc})' if loc else ''}: the program reached it a way thunder does not follow (a weakref.proxy, "
        "vars() or __dict__ of an object, a C extension), so the update would be made once, while tracing. Pass the "
        "tensor (or the object holding it) to the function, or reach it through attributes and items."
    )



def _pinned(x: Any) -> Any:
    """``x`` with its symbolic numbers (in lists, tuples and dict values) pinned to their values."""
    if isinstance(x, (SymInt, SymFloat)):
        return pin(x)
    if type(x) in (list, tuple):
        return type(x)(_pinned(v) for v in x)
    if type(x) is dict:
        return {k: _pinned(v) for k, v in x.items()}
    return x
