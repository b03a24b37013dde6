"""Compile options, compile data and compile statistics: the explicit state of a jitted callable.

Layer: entry points. Imports: core, extend.
"""

from __future__ import annotations

import enum
import itertools
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.options import CACHE_OPTIONS, SHARP_EDGES_OPTIONS  # re-exported: thunder.CACHE_OPTIONS, ...
from thunder.extend import Executor, resolve_executors

#: How many entries a jitted function keeps by default (the compile option ``cache_size_limit``).
DEFAULT_CACHE_SIZE_LIMIT = 256
#: After how many cache misses a ``RecompileWarning`` says why (the compile option ``recompile_warning_limit``).
DEFAULT_RECOMPILE_WARNING_LIMIT = 32


def _to_enum(enum_type: type[enum.Enum], value, what: str, default):
    if value is None:
        return default
    if isinstance(value, enum_type):
        return value
    for member in enum_type:
        if member.value == value or member.name == str(value).upper().replace(" ", "_"):
            return member
    choices = ", ".join(repr(m.value) for m in enum_type)
    raise ThunderValueError(f"unknown {what} {value!r}: choose one of {choices}")


def resolve_cache_option(value) -> CACHE_OPTIONS:
    return _to_enum(CACHE_OPTIONS, value, "cache option", CACHE_OPTIONS.CONSTANT_VALUES)


def resolve_sharp_edges(value) -> SHARP_EDGES_OPTIONS:
    return _to_enum(SHARP_EDGES_OPTIONS, value, "sharp_edges option", SHARP_EDGES_OPTIONS.ALLOW)


_DEBUG_OPTIONS_DOC = "Debugging switches. More can be added at run time with ``DebugOptions.register_option``."


class DebugOptions:
    # The docstring is made from the options (``_docstring``), below the class and on each registration.
    _options: dict[str, tuple[type, Any, str]] = {
        # lightning-thunder accepts a check level (``check_traces=2``): any level >= 1 verifies every pass.
        "check_traces": (int, False, "run the trace verifier after every pass (True, or a level >= 1)"),
        "record_interpreter_history": (bool, False, "keep the full interpreter log (instructions are always kept)"),
        "show_interpreter_progress": (bool, False, "print each instruction as the interpreter runs it"),
    }

    def __init__(self, **kwargs):
        for name, (typ, default, _doc) in self._options.items():
            value = kwargs.pop(name, default)
            if typ is not None and value is not None and not isinstance(value, typ):
                raise ThunderTypeError(f"DebugOptions: {name} must be a {typ.__name__}, got {value!r}")
            setattr(self, name, value)
        if kwargs:
            raise ThunderValueError(
                f"DebugOptions: unknown option(s) {sorted(kwargs)}; known: {sorted(self._options)}. "
                "Register new ones with DebugOptions.register_option(name, type, default, doc)."
            )

    @classmethod
    def register_option(cls, name: str, typ: type, default: Any, doc: str = "") -> None:
        """Adds a debug option that ``DebugOptions(...)`` accepts from now on."""
        if name in cls._options:
            raise ThunderValueError(f"DebugOptions already has an option {name!r}")
        cls._options[name] = (typ, default, doc)
        cls.__doc__ = cls._docstring()

    @classmethod
    def _docstring(cls) -> str:
        """The class docstring with one line per option, so ``help(DebugOptions)`` lists them all."""
        lines = [_DEBUG_OPTIONS_DOC, "", "Options:"]
        lines += [
            f"    {name} ({typ.__name__}, default {default!r}): {doc}"
            for name, (typ, default, doc) in cls._options.items()
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return "DebugOptions(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self._options) + ")"


DebugOptions.__doc__ = DebugOptions._docstring()


@dataclass(frozen=True)
class CompileOptions:
    """Everything ``thunder.jit`` was asked for, resolved and checked."""

    executors: tuple[Executor, ...]
    cache_option: CACHE_OPTIONS
    sharp_edges: SHARP_EDGES_OPTIONS
    disable_torch_autograd: bool
    transforms: tuple
    debug_options: DebugOptions
    langctx: Any
    extra: tuple  # (name, value) pairs of every named compile option passed (``**compile_options``)
    cache_size_limit: int = DEFAULT_CACHE_SIZE_LIMIT  # entries kept per function; the LRU one goes
    recompile_warning_limit: int | None = DEFAULT_RECOMPILE_WARNING_LIMIT  # misses before a RecompileWarning
    # the cache option was left to its default: a shape change compiles a symbolic entry (Note [Automatic dynamic
    # shapes] in thunder/core/shape_history.py: sizes, ints and floats)
    automatic_dynamic: bool = False


#: The named compile options thunder reads itself: the typed fields of ``CompileOptions``.
KNOWN_COMPILE_OPTIONS = ("cache_size_limit", "recompile_warning_limit")


class CompileData:
    """What a jitted callable was compiled with (``thunder.compile_data``)."""

    def __init__(self, fn: Callable, options: CompileOptions, *, is_module: bool = False):
        self.fn = fn
        self.options = options
        self.is_module = is_module
        self.compile_options = dict(options.extra)
        # thunder's own options are read (as typed fields); others only when a transform asks for them
        self._used_compile_options: set[str] = {k for k in self.compile_options if k in KNOWN_COMPILE_OPTIONS}

    executors_list = property(lambda self: list(self.options.executors))
    cache_option = property(lambda self: self.options.cache_option)
    sharp_edges = property(lambda self: self.options.sharp_edges)
    disable_torch_autograd = property(lambda self: self.options.disable_torch_autograd)
    transforms = property(lambda self: list(self.options.transforms))
    debug_options = property(lambda self: self.options.debug_options)
    langctx = property(lambda self: self.options.langctx)

    def get_compile_option(self, name: str, default: Any = None) -> Any:
        """Reads a named compile option and remembers that it was used."""
        self._used_compile_options.add(name)
        return self.compile_options.get(name, default)

    def __repr__(self) -> str:
        names = [e.name for e in self.options.executors]
        return f"CompileData(fn={getattr(self.fn, '__name__', self.fn)!r}, executors={names}, cache={self.cache_option.value!r})"


class _Miss:
    """Returned by an entry's ``run`` when its prologue rejects the inputs."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "MISS"


MISS = _Miss()


@dataclass
class CacheEntry:
    """One compiled specialisation: a prologue that accepts inputs, and what runs for them."""

    prologue: Callable  # returns the computation's inputs (a tuple), or why not (see thunder.cache_diagnostics)
    computation: Callable
    run: Callable  # run(args, kwargs): prologue and computation in one call; MISS when the prologue rejects
    prologue_traces: list
    computation_traces: list
    backward_traces: list = field(default_factory=list)
    key: Any = None
    outcomes: tuple = ()  # the data-dependent values its trace continued with (Note [Data-dependent values])
    # a run that raises before its effects runs the call eagerly (Note [A run that fails before its effects])
    rerun_on_failure: bool = False
    caught: bool = False  # its ops ran in a try body of the program (Note [A run-time failure the program handles])
    symbolic: bool = False  # traced with symbolic values (the option, or Note [Automatic dynamic shapes])
    # tried when the last entry used misses, if it is the one before it (Note [The entry used before is tried next])
    tried_next: bool = False
    misses: Any = None  # the fused prologue's last rejection per thread (thunder.cache_diagnostics.MissRecord)
    fuser: Any = None  # what makes ``run`` from the prologue and the computation (thunder.entry_run.FusedWhenReused)
    owner: Any = None  # a weak reference to the jitted function's state whose cache holds it (thunder._Jitted)
    compile_ms: float = 0.0  # its compilation (tracing, passes, codegen), as ``CompileStats.last_compile_ms`` said then
    settled_hits: int = 0  # its hits while it was not the last entry used (Note [Cache hits of each entry])

    @property
    def hits(self) -> int:
        """The calls this entry ran that found it in the cache (the call that compiled it is a miss), counted
        exactly when one thread calls the function (Note [Cache hits of each entry] in ``thunder``)."""
        owner = self.owner() if self.owner is not None else None
        if owner is None or owner.last_entry is not self:
            return self.settled_hits
        return self.settled_hits + owner.cs.hits.value - owner.hits_mark


class AtomicCounter:
    """A counter that threads bump without a lock.

    A bump is ``next(counter.count)`` on an ``itertools.repeat(element, N)``: one C call, atomic under the GIL, that
    allocates nothing (an ``itertools.count`` made an int on every bump: a twentieth of the hot path's own cost,
    Note [The fused prologue is the jitted function's code]), where ``x += 1`` on an attribute loses counts when two
    threads interleave. The count is the bumps taken from the ``N`` (``__length_hint__``), read without a lock. A
    bump returns ``element`` (a jitted function's hits: whether to record the call's inputs, Note [Recording the
    last inputs] in ``thunder``).
    """

    __slots__ = ("count",)

    _START = sys.maxsize

    def __init__(self, element: Any = None):
        self.count = itertools.repeat(element, self._START)

    @property
    def value(self) -> int:
        return self._START - self.count.__length_hint__()

    def bump(self) -> int:
        """Counts one; the count after it (exact where no other thread bumps meanwhile)."""
        next(self.count)
        return self.value

    def __repr__(self) -> str:
        return f"AtomicCounter({self.value})"


@dataclass
class CompileStats:
    """Counters, timings and trace histories (``thunder.compile_stats``).

    ``cache_hits`` and ``cache_misses`` are exact under concurrent calls (see ``AtomicCounter``);
    ``calls`` is their sum."""

    hits: AtomicCounter = field(default_factory=AtomicCounter, repr=False, compare=False)
    misses: AtomicCounter = field(default_factory=AtomicCounter, repr=False, compare=False)
    cache: Any = field(default=None, repr=False, compare=False)  # the jitted function's ``Cache``
    last_traces: list | None = None
    last_prologue_traces: list | None = None
    # Adds the executed prologue to ``last_prologue_traces`` where it is not made yet (``thunder.entry_run.ExecutedPrologue``).
    executed_prologue: Any = field(default=None, repr=False, compare=False)
    last_backward_traces: list | None = None
    last_interpreted_instructions: list | None = None
    last_interpreter_log: list | None = None
    last_autograd_fallback: str | None = None  # why the last compilation's backward is torch's own
    last_saved_for_backward_bytes: int | None = None  # what the last compiled forward keeps for its backward
    last_trace_tracing_ms: float = 0.0
    last_compile_ms: float = 0.0
    total_compile_ms: float = 0.0  # every compilation of the function (tracing, passes, codegen)
    pass_times_ms: dict = field(default_factory=dict)

    @property
    def cache_hits(self) -> int:
        return self.hits.value

    @property
    def cache_misses(self) -> int:
        return self.misses.value

    @property
    def calls(self) -> int:
        return self.cache_hits + self.cache_misses

    @property
    def entries(self) -> list[CacheEntry]:
        """The cached entries, least recently used first."""
        return self.cache.entries if self.cache is not None else []

    @property
    def interpreter_cache(self) -> list[CacheEntry]:
        return self.entries


def _check_transforms(transforms) -> tuple:
    from thunder.core.transform_common import Transform

    transforms = tuple(transforms or ())
    for t in transforms:
        if not isinstance(t, Transform):
            raise ThunderValueError(
                f"transforms must be thunder.Transform instances, got {type(t).__name__} {t!r}: subclass "
                "thunder.Transform and override the hooks you need"
            )
    return transforms


def make_compile_options(
    *,
    executors: Sequence[Executor | str] | None,
    cache,
    sharp_edges,
    disable_torch_autograd: bool,
    transforms,
    debug_options,
    langctx,
    extra: dict,
) -> CompileOptions:
    if langctx not in (None, "torch") and getattr(langctx, "__name__", None) != "thunder.torch":
        raise ThunderValueError(f"unknown langctx {langctx!r}: only 'torch' is supported")
    if debug_options is not None and not isinstance(debug_options, DebugOptions):
        raise ThunderValueError(f"debug_options must be a thunder.DebugOptions, got {type(debug_options).__name__}")
    return CompileOptions(
        executors=resolve_executors(executors),
        cache_option=resolve_cache_option(cache),
        sharp_edges=resolve_sharp_edges(sharp_edges),
        disable_torch_autograd=bool(disable_torch_autograd),
        transforms=_check_transforms(transforms),
        debug_options=debug_options or DebugOptions(),
        langctx="torch",
        extra=tuple(extra.items()),
        cache_size_limit=_cache_size_limit(extra.get("cache_size_limit", DEFAULT_CACHE_SIZE_LIMIT)),
        recompile_warning_limit=_recompile_warning_limit(
            extra.get("recompile_warning_limit", DEFAULT_RECOMPILE_WARNING_LIMIT)
        ),
        automatic_dynamic=cache is None,
    )


def _cache_size_limit(value: Any) -> int:
    if type(value) is not int or value < 1:
        raise ThunderValueError(f"cache_size_limit must be a positive int (entries kept per function), got {value!r}")
    return value


def _recompile_warning_limit(value: Any) -> int | None:
    if value is not None and (type(value) is not int or value < 1):
        raise ThunderValueError(
            f"recompile_warning_limit must be a positive int (cache misses before a warning) or None, got {value!r}"
        )
    return value
