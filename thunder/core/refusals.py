"""Calls the tracer refuses with a clear error: what cannot be traced, where the user called it, and what to do
instead (the lookaside tables of ``thunder.core.special_calls`` name them).

Layer: tracing. Imports: core.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.errors import MakesParameters, ThunderRuntimeError, UnsupportedOpError
from thunder.core.proxies import Proxy
from thunder.core.pytree import tree_leaves
from thunder.core.symbol_lookup import plain_attribute
from thunder.core.user_code import source_location


def refuse_parameter(cls: type, *args, **kwargs):
    """``torch.nn.Parameter(...)`` in the program (or in a module built inside it)."""
    refuse_parameter_made_at(cls, source_location())


def refuse_parameter_made_at(cls: type, loc) -> None:
    loc = loc and (loc.call_site or loc)  # the user's line that builds the module, for a parameter made by torch
    raise MakesParameters(
        f"{cls.__module__}.{cls.__qualname__}(...) makes a new parameter (a leaf tensor that requires grad) inside the "
        f"jitted function{f' at {loc}' if loc else ''}; a trace computes tensors from the function's inputs and cannot "
        "make leaves (the first call that made one ran eagerly, as a one-time setup, a lazy module's say; this call "
        "makes one again). Create the parameter (or the module that holds it) outside the function and pass it in, or "
        "return the tensor and call .requires_grad_() on it outside."
    )


def refuse_inside(name: str, why: str, *args, **kwargs):
    """A call the trace cannot hold: ``name`` inside the jitted function, refused with ``why`` (and what to do)."""
    loc = source_location()
    raise UnsupportedOpError(f"{name} inside the jitted function{f' (called at {loc})' if loc else ''} is not supported: {why}")


def refuse_traced(name: str, why: str, fn: Callable, *args, **kwargs):
    """``fn`` given a traced value: refused with ``why``; natively otherwise. (Its argument parser reads a proxy as a
    sequence of numbers, and its TypeError was taken for the program's own: an eager run with a warning.)"""
    if any(isinstance(a, Proxy) for a in tree_leaves((args, kwargs))):
        refuse_inside(name, why)
    return fn(*args, **kwargs)


# Constructors that take ``array_like`` data: a sparse tensor is another layout, and ``asarray`` aliases its input
ARRAY_LIKE = (
    "it makes a tensor of a layout thunder does not trace (sparse) or aliases its input (asarray). Make a sparse tensor "
    "outside the jitted function and pass its dense form (.to_dense()), and use torch.as_tensor instead of asarray."
)

# torch.nested's constructors: a nested tensor is a layout of its own (its jagged form keeps a real tensor in a
# global, whose storage the constructor reads)
NESTED = (
    "it makes a nested tensor, which thunder.jit does not trace (it traces strided, dense tensors). Pad the sequences "
    "(torch.nn.utils.rnn.pad_sequence) and pass their lengths or a mask, or make the nested tensor and compute with it "
    "outside the jitted function."
)

# torch.masked's MaskedTensor: a tensor subclass whose ops run torch's own autograd.Functions on real tensors
MASKED = (
    "it makes a MaskedTensor, a tensor subclass thunder.jit does not trace. Pass the mask to torch.masked's functions "
    "instead (torch.masked.sum(x, dim, mask=mask), torch.masked.softmax, ...), or use torch.where."
)

# torch's functorch and higher-order-op machinery runs its own dispatcher levels on real tensors
TRANSFORM = (
    "it runs torch's own transform machinery, which does not take traced values. Apply it outside the jitted "
    "function (to the jitted function's results), write the batched or differentiated computation directly, or use "
    "Python control flow instead of torch.cond."
)
# torch's autograd engine would be handed the trace's values
GRADIENT = (
    "thunder differentiates the whole function when the backward of its result is called, and a gradient taken "
    "inside it (a gradient penalty, an inner optimization step) is not traced. Take the gradient outside: jit the "
    "function whose gradient you need and call torch.autograd.grad or .backward() on its result (without "
    "create_graph=True)."
)


# torch.distributed's calls that take no traced tensor (a barrier, the object collectives) ran natively while tracing:
# a cached call skipped them (rank 0 no longer waited at the barrier), and an object the other ranks sent became a
# constant of the trace. (Tensor collectives stop tracing at the proxy: the call runs eagerly.)
DISTRIBUTED = (
    "a trace would run it once, while tracing: a cached call would neither synchronize with the other ranks nor "
    "receive what they send then. Call it outside the jitted function; to average gradients over the ranks, use "
    "thunder.distributed.ddp or fsdp, which put the collectives in the trace."
)

# torch's defaults for factories: changed while tracing only, later calls kept the old default, and the factories
# after the change ran with the caller's default (``torch.ones(2)`` float32 where eager's is float64)
DEFAULTS = (
    "a cached call would neither change the default nor make its factories with it. Set it before calling the jitted "
    "function (each call checks the default it was traced with), or pass dtype=/device= to the factories."
)


def refuse_script_module(module: torch.nn.Module | torch.ScriptMethod, *args, **kwargs):
    """A TorchScript module (``torch.jit.script``/``trace``): its methods run in C++, on real tensors only. A traced
    module's ``forward`` is a ``ScriptMethod`` itself, bound to the C++ module (its ``owner``)."""
    loc = source_location()
    what = f"{type(module).__name__} {getattr(module, 'original_name', '')}"
    if type(module) is torch.ScriptMethod:
        what = f"its method {module.name}"
    raise UnsupportedOpError(
        f"a TorchScript module ({what}) is called inside the jitted function{f' (at {loc})' if loc else ''}: its "
        "code runs in TorchScript's interpreter, which does not take traced values. Pass the original nn.Module "
        "(before torch.jit.script or torch.jit.trace) instead."
    )


CACHE_STATE = ("cache_info", "cache_clear")


def refuse_cache_state(cached: Callable, name: str, *args, **kwargs):
    """``cache_info()``/``cache_clear()`` of an ``lru_cache`` function: its calls are made by the prologue on every call
    (``_cached_call``), so its statistics and contents follow those, not the program's lines; a value
    read or a clear made while tracing would be kept by the trace."""
    loc = source_location()
    raise UnsupportedOpError(
        f"{plain_attribute(cached, '__name__', 'an lru_cache function')}.{name}() inside the jitted function"
        f"{f' (at {loc})' if loc else ''}: thunder makes the calls of an lru_cache function on each call before the "
        "program runs, so a trace cannot read the cache's statistics or clear it where the program does. Call it "
        "outside the jitted function."
    )




def refuse_environ_write(what: str, env: os._Environ, key: Any, *value: Any) -> None:
    loc = source_location()
    raise ThunderRuntimeError(
        f"the jitted function {what} the environment variable {key!r}{f' at {loc}' if loc else ''}: a trace does not "
        "replay that on later calls. Set it outside the jitted function (before calling it)."
    )


def hash_unless_nan(obj) -> int:
    """``hash(obj)``, but not of a NaN: from Python 3.10 that hash is the float object's identity, which a trace
    cannot follow (a call with another NaN object would get the first one's hash)."""
    if isinstance(obj, float) and float.__ne__(obj, obj):  # (not a symbolic float's !=, which records a constraint)
        loc = source_location()
        raise ThunderRuntimeError(
            f"hash() of a NaN{f' at {loc}' if loc else ''}: since Python 3.10 it depends on which float object holds the "
            "NaN, which a trace cannot follow. Compute it outside the jitted function and pass the result in."
        )
    return hash(obj)
