"""ThunderModule: what ``thunder.jit(module)`` returns.

The module is an input of the trace: its parameters, buffers and the attributes ``forward``
reads are unpacked and checked by the prologue (see Note [Provenance] in ``provenance``), so an
optimizer step on the original parameters is seen by the next call.

Note [ThunderModule's jit entry]
``ThunderModule`` lives in core so that ``thunder.core.module.ThunderModule`` (the import path
lightning-thunder users rely on, in ``isinstance`` checks) stays; but compiling its forward is
the entry layer's business (compile data, the cache, the hot path). Core does not import
upward: the entry layer installs the function that makes the jitted forward with
``install_jit_entry`` when ``thunder`` is imported (in ``thunder/__init__.py``), and the
constructor calls it.

Layer: core (the class; its forward is made by the entry layer's hook). Imports: torch, core.
"""

from __future__ import annotations

import collections
import contextlib
import copy
import dataclasses
import functools
import inspect
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from thunder.core.errors import InternalError, ThunderValueError, UnsupportedOpError
from thunder.core.provenance import dtensor_error, is_dtensor
from thunder.core.symbol_lookup import bound_self, plain_attribute

# ``make_forward(fn, options)`` -> the jitted ``fn``, compiled as a module's forward (see
# Note [ThunderModule's jit entry]).
_jit_entry: Callable[[Callable, Any], Callable] | None = None


def install_jit_entry(make_forward: Callable[[Callable, Any], Callable]) -> None:
    """Sets how ``ThunderModule`` compiles its forward: ``make_forward(fn, options)`` returns the
    jitted ``fn`` (``options``: the ``thunder.common.CompileOptions`` that ``thunder.jit`` resolved)."""
    global _jit_entry
    _jit_entry = make_forward


def _call_module(module, *args, **kwargs):
    return module(*args, **kwargs)


_call_module._thunder_calls_module = True  # the tracer names inputs after ``module.forward``

#: Where a tool that transforms a module before ``thunder.jit`` (``thunder.distributed.ddp(m)``) leaves its
#: transforms: a list of ``(transform, hook handle)``; the ThunderModule takes them and removes the hooks
#: (which make an eager call of the module fail clearly).
PENDING_TRANSFORMS = "_thunder_pending_transforms"


#: What a ThunderModule holds itself; other attributes set on it are the original module's (Note [Attributes set on a
#: compiled module]).
_WRAPPER_STATE = frozenset({"_model", "_options", "_variants", "_forward_fn"})


# Note [thunder.jit of torch's DistributedDataParallel]
# torch's DDP and FSDP (version 1) do their work in their ``forward``, outside the tensors: DDP's prepares the C++
# gradient reducer for the backward (``reducer.prepare_for_backward``) and FSDP's unshards its flat parameters. A trace
# runs those native calls once, while tracing; a cached call does not, so from the second step on DDP's gradients were
# each rank's own, not averaged: silently wrong. So ``thunder.jit`` refuses them, as lightning-thunder does (its error
# says the same), naming what works: torch's wrapper around the compiled module, or thunder's own transforms.
def _refuse_torch_data_parallel(model: torch.nn.Module) -> None:
    """Raises UnsupportedOpError where ``model`` is (or holds) torch's DistributedDataParallel or FSDP (version 1)."""
    for name, m in model.named_modules():
        cls = type(m)
        if isinstance(m, torch.nn.parallel.DistributedDataParallel):
            instead = "DistributedDataParallel(thunder.jit(model)), or thunder.distributed.ddp(thunder.jit(model))"
        elif cls.__name__ == "FullyShardedDataParallel" and cls.__module__.startswith("torch.distributed.fsdp"):
            instead = "thunder.distributed.fsdp(thunder.jit(model))"
        else:
            continue
        where = f"the submodule {name!r}" if name else "the module"
        raise UnsupportedOpError(
            f"thunder.jit of torch's {cls.__name__} ({where}) is not supported: its forward prepares the gradient "
            "synchronization natively, which a cached trace would not run again. Compile the module first and then "
            f"wrap it: {instead}"
        )


class ThunderModule(torch.nn.Module):
    """A compiled ``nn.Module``; attribute access is forwarded to the original module."""

    def __new__(cls, model: torch.nn.Module, options):
        if cls is ThunderModule:
            if all(hasattr(type(model), m) for m in ("__len__", "__getitem__", "__iter__")):
                cls = _ThunderContainerModule  # Note [A compiled container module]
            cls = _compiled_class(cls, type(model))
        return super().__new__(cls)

    def _get_name(self) -> str:  # (its repr is a ThunderModule's, whatever class _compiled_class made)
        return "ThunderModule"

    @property
    def __class__(self) -> type:
        """The original module's class (Note [A compiled module is an instance of the original's class])."""
        model = self.__dict__.get("_modules", {}).get("_model")
        return type(self) if model is None else model.__class__

    def __init__(self, model: torch.nn.Module, options):
        super().__init__()
        if _jit_entry is None:
            raise InternalError("ThunderModule: no jit entry installed; build it with thunder.jit(module)")
        for name, p in model.named_parameters():
            if is_dtensor(p):
                raise dtensor_error(f"thunder.jit: the parameter {name!r}")
        _refuse_torch_data_parallel(model)
        self._model = model
        # The original module's own parameter and buffer dicts, shared (Note [Attributes set on a compiled module]).
        self.__dict__["_parameters"], self.__dict__["_buffers"] = model._parameters, model._buffers
        pending = model.__dict__.pop(PENDING_TRANSFORMS, None) or ()
        for _, handle in pending:
            handle.remove()
        if pending:
            options = dataclasses.replace(options, transforms=(*options.transforms, *(t for t, _ in pending)))
        self._options = options
        self._variants: dict[str, Callable] = {}
        self._forward_fn = _jit_entry(_call_module, options)
        for transform in options.transforms:
            hook = getattr(transform, "transform_module", None)
            if hook is not None:
                hook(self)

    def _add_transform(self, transform) -> None:
        """Compiles from now on with ``transform`` too (``thunder.distributed.ddp(thunder.jit(m))``)."""
        self._options = dataclasses.replace(self._options, transforms=(*self._options.transforms, transform))
        self._variants.clear()
        self._forward_fn = _jit_entry(_call_module, self._options)
        transform.transform_module(self)

    @contextlib.contextmanager
    def _using_variant(self, key: str, transforms: Callable[[], tuple]) -> Iterator[None]:
        """Calls inside compile with other transforms (``transforms()``, asked once): ``no_sync`` compiles
        the program without collectives, as a function of its own with its own cache."""
        variant = self._variants.get(key)
        if variant is None:
            options = dataclasses.replace(self._options, transforms=transforms())
            variant = self._variants[key] = _jit_entry(_call_module, options)
        main, self._forward_fn = self._forward_fn, variant
        try:
            yield
        finally:
            self._forward_fn = main

    @property
    def _thunder(self):
        return self._forward_fn._thunder

    def forward(self, *args, **kwargs):
        return self._forward_fn(self._model, *args, **kwargs)

    def __call__(self, *args, **kwargs):
        """The compiled call. Module hooks registered globally run in the compiled module (on the original
        module, as in eager), not once more on this wrapper; hooks put on the wrapper itself run as usual, and so
        does a ``forward`` set on the wrapper (Note [A forward set on a compiled module])."""
        if (
            self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or self._backward_pre_hooks
            or "forward" in self.__dict__
        ):  # fmt: skip
            return super().__call__(*args, **kwargs)
        # ``self._model`` goes through ``nn.Module.__getattr__`` (a submodule): 0.7 us, a tenth of a small call.
        return self._forward_fn(self._modules["_model"], *args, **kwargs)

    def _apply(self, fn: Callable, recurse: bool = True) -> ThunderModule:
        """``to()``, ``half()``, ...: on the original module (once: its dicts are this module's too)."""
        self._model._apply(fn, recurse)
        return self

    def get_parameter(self, target: str) -> torch.nn.Parameter:
        return self._model.get_parameter(target)

    def get_buffer(self, target: str) -> torch.Tensor:
        return self._model.get_buffer(target)

    def get_submodule(self, target: str) -> torch.nn.Module:
        return self._model.get_submodule(target)

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._model.named_parameters(prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate)

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True, *, persistent=None):
        buffers = self._model.named_buffers(prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate)
        if persistent is None:
            return buffers
        return ((n, b) for n, b in buffers if self._is_persistent(n) == persistent)

    def _is_persistent(self, name: str) -> bool:
        owner, _, leaf = name.rpartition(".")
        module = self._model.get_submodule(owner) if owner else self._model
        return leaf not in module._non_persistent_buffers_set

    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        return self._model.state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)

    def original_state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        """The state dict with transforms reversed: under ``thunder.distributed.fsdp``, the full tensors
        (every rank must call it: it gathers the shards)."""
        original = state = self._model.state_dict(prefix=prefix, keep_vars=keep_vars)
        for transform in reversed(self._options.transforms):
            state = transform.reverse_transform_state_dict_for_submodule(self, prefix, state)
        if state is not original:  # keeps the modules' versions, as state_dict() does
            state = collections.OrderedDict(state)
            state._metadata = original._metadata
        if destination is None:
            return state
        destination.update(state)
        return destination

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self._model.load_state_dict(state_dict, strict=strict, assign=assign)

    def load_original_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Loads a state dict of the original module (as ``original_state_dict`` gives it), in place.
        As in lightning-thunder it may hold only some entries (the others keep their values); an entry
        naming nothing in the module is an error, raised before anything is loaded."""
        unknown = sorted(state_dict.keys() - self._model.state_dict(keep_vars=True).keys())
        if unknown:
            raise ThunderValueError(
                f"load_original_state_dict: {', '.join(unknown)} name no parameter or persistent buffer of the "
                f"{type(self._model).__name__}; its entries are those of its state_dict()"
            )
        state = state_dict
        for transform in self._options.transforms:
            state = transform.transform_state_dict_for_submodule(self, "", state)
        if state is not state_dict and hasattr(state_dict, "_metadata"):  # modules' versions (batch norm's)
            state = collections.OrderedDict(state)
            state._metadata = state_dict._metadata
        self._model.load_state_dict(state, strict=False)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Skips gradient synchronisation in data-parallel training (Note [no_sync]); without a data-parallel
        transform there is nothing to skip."""
        with contextlib.ExitStack() as stack:
            for transform in self._options.transforms:
                if hasattr(transform, "no_sync"):
                    stack.enter_context(transform.no_sync(self))
            yield

    def __setattr__(self, name: str, value: Any) -> None:
        """Note [Attributes set on a compiled module]."""
        if (
            name in _WRAPPER_STATE or name in self.__dict__ or hasattr(type(self), name) or "_model" not in self._modules
            or bound_self(value) is self  # (Note [A forward set on a compiled module])
        ):  # fmt: skip
            super().__setattr__(name, value)
            if name == "training":  # as train()/eval() do, the flag the compiled module reads follows
                self._model.training = value
        elif name in self._parameters or name in self._buffers or name in self._modules:
            super().__setattr__(name, value)
        else:
            setattr(self._model, name, value)

    def __reduce_ex__(self, protocol: int):
        """``torch.save(jm)``/pickle: the original module, compiled again on load with the same options (the
        compiled functions hold generated code and locks, which do not pickle), its mode and the hooks put on it."""
        self._refuse_with_transforms(
            "pickling (torch.save)", "loading would transform the transformed module again. Save the original "
            "module's state_dict() (original_state_dict()) and load it into a module you jit and transform again."
        )  # fmt: skip
        state = {k: v for k, v in self.__dict__.items() if "_hooks" in k or k in ("training", "_is_full_backward_hook")}
        return ThunderModule, (self._model, self._options), state

    def _refuse_with_transforms(self, what: str, why: str) -> None:
        if self._options.transforms:
            names = ", ".join(type(t).__name__ for t in self._options.transforms)
            raise ThunderValueError(f"{what} of a thunder.jit module with transforms ({names}) is not supported: {why}")

    def __deepcopy__(self, memo: dict) -> ThunderModule:
        """A deep copy of the original module, compiled with the same options and a cache of its own (an EMA model,
        a snapshot): the compiled functions hold generated code, locks and weak references, which do not copy."""
        self._refuse_with_transforms(
            "copy.deepcopy", "the copy would be transformed again (sharded, hooked). Deep-copy the original module "
            "before transforming it, and jit and transform the copy."
        )  # fmt: skip
        new = ThunderModule(copy.deepcopy(self._model, memo), self._options)
        memo[id(self)] = new
        return new

    def __delattr__(self, name: str) -> None:
        if name in self.__dict__ or name in self._parameters or name in self._buffers or name in self._modules:
            super().__delattr__(name)
        else:
            delattr(self._model, name)

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            value = getattr(self._model, name)
        if _is_own_method(value, self._model):
            return self._compiling_calls_in(value)
        return value

    def _compiling_calls_in(self, method: Callable) -> Callable:
        """``method`` of the original module (``generate``), run with its calls of the module compiled (Note
        [Methods of a compiled module])."""

        @functools.wraps(method)
        def call(*args, **kwargs):
            model = self._model
            if model._compiled_call_impl is not None:  # already routed (a nested call), or compiled by someone else
                return method(*args, **kwargs)
            routed = [model]
            # Note [A compiled module's calls under torch.compile]
            model._compiled_call_impl = entry = functools.partial(self._forward_fn, model)
            entry.thunder_entry = True
            for module in model.modules():  # Note [Submodules called by a method of a compiled module]
                if module is not model and module._compiled_call_impl is None and not _takes_routing(module):
                    module.__dict__["_compiled_call_impl"] = _submodule_entry(self._forward_fn, module)
                    routed.append(module)
            try:
                return method(*args, **kwargs)
            finally:
                for module in routed:
                    module.__dict__["_compiled_call_impl"] = None

        return call


# Note [A compiled module is an instance of the original's class]
# ``isinstance(jm, type(model))`` holds, as ``isinstance(jm, ThunderModule)`` does: ``jm.__class__`` is the original's
# class (``type(jm)`` is still the compiled class: Note [A compiled module's forward has the original's signature]),
# which ``isinstance`` consults after the type, as for ``unittest.mock``'s and wrapt's proxies. Libraries decide by
# ``isinstance`` what a model is and how to handle it: Hugging Face's ``Trainer`` saves a ``PreTrainedModel`` (or a
# ``PeftModel``) with ``save_pretrained`` and anything else as a plain state dict, which safetensors refuses where
# weights are tied (GPT-2's embedding and head): with a jitted model, no checkpoint, no ``save_model``. torch.compile's
# ``OptimizedModule`` is unwrapped by accelerate (``is_compiled_module``: an ``isinstance`` check of torch's class, so
# an ``_orig_mod`` attribute would not do); ours needs no unwrapping: its methods (``save_pretrained``,
# ``load_adapter``) are the original's, and so are its state dict's keys (no ``_orig_mod.`` prefix).


# Note [Attributes set on a compiled module]
# ``jm.head = nn.Linear(768, 10)`` (a new classifier for fine-tuning), ``jm.scale = 3.0``: reads are forwarded to the
# original module, so a write kept on the wrapper showed the new value while every call ran the original's old one.
# Writes are forwarded too, as torch.compile's ``OptimizedModule`` does (the next call sees them, through the
# prologue's checks); the wrapper keeps its own state (what ``__init__`` set, its class's attributes) and what was
# registered on the wrapper itself. ``training`` is both's: setting it on the wrapper sets the original's flag.
# The wrapper's ``_parameters`` and ``_buffers`` are the original's own dicts: what torch does to a module's dicts
# directly reaches the original as on the eager module (``torch.func.functional_call(jm, {"weight": t}, ...)`` swaps
# ``t`` into them, past ``setattr``'s check that a parameter is given a Parameter); ``_apply`` (``to``, ``half``) runs
# on the original alone, so a shared tensor is converted once.


# Note [A forward set on a compiled module]
# ``model.forward = wrapper(model.forward)`` on the compiled module: accelerate's ``prepare`` with mixed precision
# wraps the forward in ``autocast`` and a conversion of its outputs to float32. The call ran the compiled forward
# past the wrapper: in float32 where eager computed in bfloat16, and with bfloat16 outputs inside
# ``accelerator.autocast()`` where eager gave float32. As on any module, the call now runs ``self.forward``, the
# wrapper, which calls the compiled forward it wrapped (the prologue checks the autocast state). A method bound to the
# wrapper stays on the wrapper when set on it: ``prepare`` keeps ``model._original_forward = model.forward``, and
# ``unwrap_model(model, keep_fp32_wrapper=False)`` pops it from ``model.__dict__`` to restore the forward; forwarded
# to the original module, it was not found there and the unwrapped model kept computing in bfloat16.


# Note [no_sync]
# ``with model.no_sync(): loss(model(x)).backward()`` runs a compilation of the program without collectives
# (its own function and cache, ``_using_variant``): the gradients of the micro-batches inside accumulate
# locally in ``.grad``. Leaving the context averages the accumulated gradients over the ranks (bucketed
# all-reduces); the next micro-batch, outside, all-reduces its own gradient in its backward, and autograd
# adds it. So ``.grad`` ends as AllReduce(g_1 + ... + g_{k-1}) + AllReduce(g_k), which equals torch DDP's
# AllReduce(g_1 + ... + g_k) up to float rounding. Enter the context for each accumulation round.


# Note [Methods of a compiled module]
# ``thunder.jit(model).generate(ids)``: ``generate`` is the original module's method, and it calls ``self(...)``,
# the original module. While a method of the module's own class (not one of nn.Module's) runs through the
# ThunderModule, the module's ``_compiled_call_impl`` (the hook ``nn.Module.__call__`` gives ``torch.compile``)
# is the compiled call, so each of its calls of the module runs compiled (prefill and decode); the traced call
# takes such a module as uncompiled (``is_thunder_entry``). Calling the original module yourself stays eager.
#
# Note [A compiled module's calls under torch.compile]
# ``generate`` itself compiles the module's call with ``torch.compile`` where its cache is static on a GPU
# (transformers' automatic compilation: ``torch.compile(self.__call__)`` for the decoding steps). Dynamo traced into
# the compiled call, thunder's cache and compiled code included: minutes per step, thunder's cache counters off (4
# compiles and no hit for 6 calls, a 2-layer Llama on CPU), and a crash for a plain ``torch.compile`` of a jitted
# function. Dynamo now stops at the compiled call and runs it as is (Note [A jitted function under torch.compile] in
# ``thunder``).
def _is_own_method(value: Any, model: torch.nn.Module) -> bool:
    func = plain_attribute(value, "__func__")
    return (
        func is not None
        and bound_self(value) is model
        and getattr(torch.nn.Module, getattr(func, "__name__", ""), None) is not func
    )


# Note [Submodules called by a method of a compiled module]
# A method of the model may call a submodule itself, outside the model's forward: ``generate`` of an encoder-decoder
# model calls ``self.get_encoder()(...)`` once before decoding, and peft's ``PeftModel.generate`` calls
# ``get_base_model().generate(...)``, whose calls of the inner model are the whole generation (the PeftModel itself is
# never called). Routed like the model's own calls, each submodule call made while such a method runs compiles, in the
# model's compiled function (its own cache entries: the prologue tells the modules apart), so its compile counts and
# cache hits are the ThunderModule's. Calls of submodules traced inside a compiled forward never run these entries
# (the tracer takes a thunder entry as no compiled call, Note [Module calls] in thunder.core.special_calls), but a
# module with hooks or a ``forward`` of its own is traced through torch's call, which would run the entry inside the
# trace: such a module is left unrouted (called eagerly, it runs eagerly). A submodule call made while a compiled call
# runs eagerly (tracing stopped where eager did not, the first call of a module that makes parameters) is eager too.
_eager_runs = threading.local()


@contextlib.contextmanager
def running_eagerly() -> Iterator[None]:
    """A compiled module call runs eagerly inside: its submodules' calls stay eager (Note [Submodules called by a
    method of a compiled module])."""
    was, _eager_runs.active = getattr(_eager_runs, "active", False), True
    try:
        yield
    finally:
        _eager_runs.active = was


def _takes_routing(module: torch.nn.Module) -> bool:
    """Whether tracing a call of ``module`` runs torch's own call, which would call its ``_compiled_call_impl``."""
    return bool(
        type(module)._call_impl is not torch.nn.Module._call_impl or "forward" in module.__dict__
        or module._forward_hooks or module._forward_pre_hooks or module._backward_hooks or module._backward_pre_hooks
    )  # fmt: skip


def _submodule_entry(forward_fn: Callable, module: torch.nn.Module) -> Callable:
    """The compiled call of a submodule (Note [Submodules called by a method of a compiled module])."""

    def entry(*args, **kwargs):
        if getattr(_eager_runs, "active", False):
            return module._call_impl(*args, **kwargs)
        return forward_fn(module, *args, **kwargs)

    entry.thunder_entry = True
    return entry


def is_thunder_entry(compiled_call_impl: Any) -> bool:
    """Whether a module's ``_compiled_call_impl`` is a ThunderModule's compiled call (Note [Methods of a compiled
    module]): tracing that module's call takes it as uncompiled."""
    return getattr(compiled_call_impl, "thunder_entry", False)


# Note [A compiled container module]
# ``jm = thunder.jit(nn.Sequential(...))``: ``jm[0]``, ``len(jm)``, ``for layer in jm`` and ``"key" in jm`` are the
# original container's (its submodules, as ``jm.name`` gives them), where a plain ThunderModule would raise TypeError
# (Python looks dunder methods up on the type, past ``__getattr__``). Only a module whose class is a container gets
# them, so the truth of any other compiled module stays ``True``.
class _ThunderContainerModule(ThunderModule):
    def __len__(self) -> int:
        return len(self._model)

    def __getitem__(self, key: Any) -> Any:
        return self._model[key]

    def __iter__(self) -> Iterator:
        return iter(self._model)

    def __contains__(self, key: Any) -> bool:
        return key in self._model


# Note [A compiled module's forward has the original's signature]
# Libraries read a model's inputs from its forward's signature: Hugging Face's ``Trainer`` keeps only the dataset
# columns ``inspect.signature(model.forward)`` names (with ``ThunderModule.forward(*args, **kwargs)`` it dropped every
# column and refused the empty batch), passes ``num_items_in_batch`` only to a forward that takes ``**kwargs``, and
# finds the label arguments, which decide whether evaluation computes a loss, in the signature of the model's
# *class*'s forward (``transformers.utils.find_labels``: without them ``trainer.evaluate()`` had no ``eval_loss``).
# So a compiled module's class is a subclass made once for each original class, whose ``forward`` carries the
# original class's forward's signature and whose name names it (``ThunderModule[BertForQuestionAnswering]``: the
# name is read too); its repr and ``isinstance(jm, ThunderModule)`` are as before.
_COMPILED_CLASSES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_COMPILED_CLASSES_LOCK = threading.Lock()


def _compiled_class(base: type[ThunderModule], model_class: type) -> type[ThunderModule]:
    """The class of a compiled ``model_class`` module (Note [A compiled module's forward has the original's
    signature])."""
    made = _COMPILED_CLASSES.get(model_class, {}).get(base)
    if made is not None:
        return made

    def forward(self, *args, **kwargs):
        return self._forward_fn(self._model, *args, **kwargs)

    try:
        forward.__signature__ = inspect.signature(model_class.forward)
    except (TypeError, ValueError):  # (a forward without a signature: a builtin)
        pass
    name = f"{base.__name__}[{model_class.__name__}]"
    forward.__qualname__ = f"{name}.forward"
    made = type(name, (base,), {"forward": forward, "__module__": __name__, "__doc__": base.__doc__})
    with _COMPILED_CLASSES_LOCK:
        return _COMPILED_CLASSES.setdefault(model_class, {}).setdefault(base, made)
