"""thunder: a just-in-time compiler for PyTorch programs.

``thunder.jit(fn)`` returns a callable that traces ``fn`` under thunder's bytecode
interpreter on its first call (and whenever a cached entry does not fit its inputs),
optimises the trace, hands each operation to an executor, and runs the result. The
functions below it look at what happened.

Layer: entry points. Imports: everything below.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import thunder.executors.pythonex as _pythonex
import thunder.executors.torchex as _torchex
import thunder.torch  # noqa: F401  (binds thunder.torch, the torch language)
from thunder import extend
from thunder.common import (
    CACHE_OPTIONS,
    MISS,
    SHARP_EDGES_OPTIONS,
    CacheEntry,
    CompileData,
    CompileStats,
    DebugOptions,
    make_compile_options,
)
from thunder.compiler import Cache, check_prologue_accepts, compile_entry
from thunder.core import devices, dtypes
from thunder.core.proxies import Proxy, TensorProxy
from thunder.core.symbol import Symbol
from thunder.core.trace import TraceCtx
from thunder.executors import torch_compile as _torch_compile
from thunder.extend import Executor, FusionExecutor, OperatorExecutor

__version__ = "0.1.0"

__all__ = [
    "jit",
    "compile_data",
    "compile_stats",
    "last_traces",
    "last_backward_traces",
    "last_prologue_traces",
    "cache_option",
    "cache_hits",
    "cache_misses",
    "list_transforms",
    "last_interpreted_instructions",
    "last_interpreter_log",
    "last_compile_options",
    "DebugOptions",
    "CACHE_OPTIONS",
    "SHARP_EDGES_OPTIONS",
    "Transform",
    "TraceCtx",
    "Symbol",
    "Proxy",
    "TensorProxy",
    "Executor",
    "OperatorExecutor",
    "FusionExecutor",
    "dtypes",
    "devices",
    "extend",
    "get_default_executors",
    "get_always_executors",
    "get_all_executors",
    "pytorch_executor",
    "torch_compile_executor",
]

# dtype shortcuts, as lightning-thunder exposes them
float32, float64, float16, bfloat16 = dtypes.float32, dtypes.float64, dtypes.float16, dtypes.bfloat16
int8, int16, int32, int64, uint8, bool8 = dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64, dtypes.uint8, dtypes.bool8

pytorch_executor = _torchex.ex
python_executor = _pythonex.ex
torch_compile_executor = _torch_compile.ex
get_default_executors = extend.get_default_executors
get_always_executors = extend.get_always_executors
get_all_executors = extend.get_all_executors

extend.set_always_executors([_torchex.ex, _pythonex.ex])
extend.set_default_executors([])


class Transform:
    """Base class of user transforms; override the hooks you need (each returns its input by default)."""

    def transform_traces_pre_prologue(self, prologue_trace, computation_trace, epilogue_trace, **kwargs):
        return prologue_trace, computation_trace, epilogue_trace

    def transform_module(self, model) -> None:
        return None

    def transform_state_dict_for_submodule(self, model, submodule_name: str, state_dict: dict) -> dict:
        return state_dict

    def reverse_transform_state_dict_for_submodule(self, model, submodule_name: str, state_dict: dict) -> dict:
        return state_dict

    def transform_trace_post_optimization(self, computation_trace, **kwargs):
        return computation_trace


class _Jitted:
    """The state behind a jitted function (reached through ``fn._thunder``)."""

    __slots__ = ("cd", "cs", "cache", "last_entry")

    def __init__(self, cd: CompileData):
        self.cd = cd
        self.cs = CompileStats()
        self.cache = Cache()
        self.last_entry: CacheEntry | None = None

    def slow_call(self, args: tuple, kwargs: dict) -> Any:
        """Everything but the hot path: other cache entries, then compiling a new one."""
        cd, cs = self.cd, self.cs
        option = cd.cache_option
        if option is CACHE_OPTIONS.SAME_INPUT and self.last_entry is not None:
            cs.cache_hits += 1
            return self.last_entry.computation(*self.last_entry.prologue(*args, **kwargs))
        if option is not CACHE_OPTIONS.NO_CACHING:
            found = self.cache.lookup(option, args, kwargs)
            if found is not None:
                entry, inputs = found
                cs.cache_hits += 1
                self.last_entry = entry
                return entry.computation(*inputs)
        cs.cache_misses += 1
        entry = compile_entry(cd, cs, args, kwargs)
        inputs = check_prologue_accepts(entry, args, kwargs)
        if option is not CACHE_OPTIONS.NO_CACHING:
            self.cache.add(entry)
            self.last_entry = entry
        cs.entries = self.cache.entries
        return entry.computation(*inputs)


def jit(
    fn: Callable,
    /,
    *,
    langctx=None,
    executors: Sequence[Executor | str] | None = None,
    sharp_edges=None,
    cache=None,
    disable_torch_autograd: bool = False,
    transforms: Sequence[Transform] | None = None,
    debug_options: DebugOptions | None = None,
    **compile_options,
) -> Callable:
    """Compiles ``fn`` (a function or ``torch.nn.Module``) just in time.

    Args:
        fn: what to compile.
        langctx: the language to emulate (only ``"torch"``).
        executors: executors or names, highest priority first (default:
            ``thunder.extend.get_default_executors()``), always extended by torch and python.
        sharp_edges: ``"allow"``, ``"warn"`` or ``"error"`` for things a trace cannot capture.
        cache: ``"no caching"``, ``"constant values"`` (default), ``"same input"`` or ``"symbolic values"``.
        disable_torch_autograd: do not connect results to torch autograd.
        transforms: ``thunder.Transform`` instances.
        debug_options: a ``thunder.DebugOptions``.
        compile_options: named options (see ``last_compile_options``).

    Returns:
        A callable with ``fn``'s signature. See ``thunder.last_traces`` and friends.
    """
    import torch as _torch

    if isinstance(fn, _torch.nn.Module):
        from thunder.core.module import ThunderModule

        options = make_compile_options(
            executors=executors, cache=cache, sharp_edges=sharp_edges, disable_torch_autograd=disable_torch_autograd,
            transforms=transforms, debug_options=debug_options, langctx=langctx, extra=compile_options,
        )  # fmt: skip
        return ThunderModule(fn, options)
    if not callable(fn):
        raise TypeError(f"thunder.jit expects a function or torch.nn.Module, got {type(fn).__name__}")
    options = make_compile_options(
        executors=executors, cache=cache, sharp_edges=sharp_edges, disable_torch_autograd=disable_torch_autograd,
        transforms=transforms, debug_options=debug_options, langctx=langctx, extra=compile_options,
    )  # fmt: skip
    return _make_jitted(fn, CompileData(fn, options))


def _make_jitted(fn: Callable, cd: CompileData) -> Callable:
    state = _Jitted(cd)
    cs = state.cs
    slow_call = state.slow_call

    # The hot path: the last entry's prologue decides, with no exceptions and no lookups.
    if cd.cache_option is CACHE_OPTIONS.CONSTANT_VALUES or cd.cache_option is CACHE_OPTIONS.SYMBOLIC_VALUES:

        def fn_(*args, **kwargs):
            entry = state.last_entry
            if entry is not None:
                result = entry.run(*args, **kwargs)
                if result is not MISS:
                    cs.cache_hits += 1
                    return result
            return slow_call(args, kwargs)

    else:

        def fn_(*args, **kwargs):
            return slow_call(args, kwargs)

    functools.update_wrapper(fn_, fn)
    fn_._thunder = state
    fn_._lc_cd = cd
    fn_._lc_cs = cs
    return fn_


def _state(fn) -> _Jitted:
    state = getattr(fn, "_thunder", None)
    if state is None:
        raise TypeError(
            f"{getattr(fn, '__name__', fn)!r} is not a function returned by thunder.jit; call thunder.jit on it first"
        )
    return state


def compile_data(fn) -> CompileData:
    """The options ``fn`` was compiled with."""
    return _state(fn).cd


def compile_stats(fn) -> CompileStats:
    """Counters, timings and trace histories of ``fn``'s last compilation."""
    return _state(fn).cs


def last_traces(fn) -> list[TraceCtx]:
    """The computation traces of the last compilation: the traced program, then one per pass."""
    traces = _state(fn).cs.last_traces
    if traces is None:
        raise TypeError("no traces yet: call the jitted function first")
    return traces


def last_prologue_traces(fn) -> list[TraceCtx]:
    traces = _state(fn).cs.last_prologue_traces
    if traces is None:
        raise TypeError("no traces yet: call the jitted function first")
    return traces


def last_backward_traces(fn) -> list[TraceCtx]:
    traces = _state(fn).cs.last_backward_traces
    if traces is None:
        raise TypeError("no traces yet: call the jitted function first")
    return traces


def cache_option(fn) -> CACHE_OPTIONS:
    return _state(fn).cd.cache_option


def cache_hits(fn) -> int:
    return _state(fn).cs.cache_hits


def cache_misses(fn) -> int:
    return _state(fn).cs.cache_misses


def list_transforms(fn) -> list:
    return _state(fn).cd.transforms


def last_interpreted_instructions(fn) -> list:
    """The bytecode instructions the interpreter ran on the last cache miss."""
    instructions = _state(fn).cs.last_interpreted_instructions
    if instructions is None:
        raise TypeError("no interpretation yet: call the jitted function first")
    return instructions


def last_interpreter_log(fn) -> list:
    """Instructions, calls, returns and lookasides of the last cache miss.

    Recorded only with ``debug_options=thunder.DebugOptions(record_interpreter_history=True)``.
    """
    log = _state(fn).cs.last_interpreter_log
    if log is None:
        raise TypeError(
            "no interpreter log: jit with debug_options=thunder.DebugOptions(record_interpreter_history=True) "
            "and call the function first"
        )
    return log


def last_compile_options(fn, /) -> None:
    """Prints which named compile options were used by the last compilation and which were not."""
    cd = _state(fn).cd
    used = sorted(k for k in cd.compile_options if k in cd._used_compile_options)
    unused = sorted(k for k in cd.compile_options if k not in cd._used_compile_options)
    print("Used compile options:")
    for k in used:
        print(f"  {k}={cd.compile_options[k]!r}")
    print("Unused compile options:")
    for k in unused:
        print(f"  {k}={cd.compile_options[k]!r}")
