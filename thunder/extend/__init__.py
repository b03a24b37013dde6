"""The public executor API: executors, their registration, and the default/always lists.

An ``OperatorExecutor`` claims single bound symbols; a ``FusionExecutor`` claims bound
symbols one by one too, and the shared region finder (``thunder.extend.regions``) groups them
into regions that its ``fuse`` replaces by fusion symbols. Executors are looked up by name or
passed as objects; the lists are ordered by priority, highest first. Implementation tables
(``Executor.implmap``) are keyed by ``Symbol`` (identity); the registration methods also
accept a symbol id, resolved once by ``resolve_symbol``.

Layer: extend. Imports: core.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from thunder.core import symbol_lookup
from thunder.core.errors import ThunderRuntimeError, ThunderValueError
from thunder.core.prims.base import all_prims
from thunder.core.symbol import BoundSymbol, Symbol
from thunder.core.trace import TraceCtx
from thunder.extend.regions import Region, find_regions, fusion_bound_symbol

__all__ = [
    "Executor",
    "OperatorExecutor",
    "FusionExecutor",
    "TemporaryExecutor",
    "single_op_executor",
    "ImplInfo",
    "Region",
    "find_regions",
    "fusion_bound_symbol",
    "register_symbol_table",
    "resolve_symbol",
    "register_executor",
    "deregister_executor",
    "get_executor",
    "get_all_executors",
    "get_default_executors",
    "get_always_executors",
    "set_default_executors",
    "set_always_executors",
    "add_default_executor",
    "add_always_executor",
    "remove_default_executor",
    "remove_always_executor",
    "resolve_executors",
]


@dataclass
class ImplInfo:
    """How an executor runs one symbol."""

    symbol: Symbol | None = None  # the executor's own symbol that runs it
    checker: Callable[..., bool] | None = None  # accepts the call's arguments?
    execution_transform: Callable | None = None  # or: run these other ops instead
    grad_transform: Callable | None = None  # its own gradient rule


def _torch_path(fn: Callable) -> str | None:
    """``"nn.functional.gelu"`` if ``fn`` is reachable as ``torch.<path>``, else None."""
    name = getattr(fn, "__name__", None)
    if not name:
        return None
    for prefix, namespace in (
        ("", torch),
        ("Tensor.", torch.Tensor),
        ("nn.functional.", torch.nn.functional),
        ("special.", torch.special),
        ("linalg.", torch.linalg),
        ("fft.", torch.fft),
    ):
        if getattr(namespace, name, None) is fn:
            return prefix + name
    return None


# Tables of symbols by id that ``resolve_symbol`` consults: the prims, and the languages'
# tables (the torch language registers its own when the torch executor is imported).
_symbol_tables: list[Mapping[Any, Symbol]] = [all_prims]


def register_symbol_table(table: Mapping[Any, Symbol]) -> None:
    """Makes the symbols of ``table`` (id -> Symbol) resolvable by id in registrations."""
    if not any(t is table for t in _symbol_tables):
        _symbol_tables.append(table)


def resolve_symbol(id_or_symbol: Any, *, what: str = "resolve_symbol") -> Symbol:
    """The ``Symbol`` that ``id_or_symbol`` names: itself, a prim ID (``prims.PrimIDs.ADD``), a
    language symbol id (``"torch.sin"``) or the id of an operator some executor registered."""
    if isinstance(id_or_symbol, Symbol):
        return id_or_symbol
    try:
        for table in _symbol_tables:
            found = table.get(id_or_symbol)
            if found is not None:
                return found
    except TypeError:  # an unhashable id
        pass
    else:
        for ex in _executor_map.values():
            for sym in ex.opmap.values():
                if sym.id == id_or_symbol:
                    return sym
    raise ThunderValueError(
        f"{what}: unknown symbol id {id_or_symbol!r}: no prim, torch-language symbol or registered operator has it. "
        "Pass the Symbol itself (e.g. thunder.torch.sin or thunder.core.prims.sin), a prim ID "
        "(thunder.core.prims.PrimIDs.SIN) or a language id such as 'torch.sin'."
    )


def _meta_of(like: Symbol | Callable | None, meta: Callable | None) -> Callable | None:
    """The meta function an operator borrows: a symbol's meta, or ``like`` itself when it is a plain
    function (lightning-thunder accepts both: ``like=thunder.torch.add`` or ``like=lambda a, b: a * b``)."""
    if like is None:
        return meta
    return like.meta if isinstance(like, Symbol) else like


class Executor:
    """Base of all executors.

    ``implmap`` maps a ``Symbol`` (by identity) to how this executor runs it.
    """

    def __init__(self, name: str, version: Any = None):
        self.name = name
        self.version = version
        self.implmap: dict[Symbol, ImplInfo] = {}
        self.opmap: dict[str, Symbol] = {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    def __reduce_ex__(self, protocol: int):
        """A registered executor pickles as its name (``torch.save`` of a jitted module: its options name it): its
        implementation table holds the thunder functions it runs, which are the registry's, not data."""
        if _executor_map.get(self.name) is not self:
            return super().__reduce_ex__(protocol)
        return _registered_executor, (self.name,)

    @property
    def unavailable_reason(self) -> str | None:
        """Why this executor cannot run here (a missing package or device), or None when it can."""
        return None

    def available(self) -> bool:
        return self.unavailable_reason is None

    def lookup_implementation(self, sym: Symbol) -> ImplInfo | None:
        return self.implmap.get(sym)

    def can_execute(self, bsym: BoundSymbol) -> bool:
        info = self.lookup_implementation(bsym.sym)
        if info is None:
            return False
        if info.checker is None:
            return True
        try:
            return bool(info.checker(*bsym.args, **bsym.kwargs))
        except Exception as e:
            # Declining would run the op elsewhere: the user's executor silently unused.
            raise _checker_error(self, info.checker, bsym, e) from e

    def make_symbol(
        self, name: str, fn: Callable, *, like: Symbol | Callable | None = None, meta=None, tags=()
    ) -> Symbol:
        """A symbol of this executor that runs ``fn``; it prints as ``torch.<path>`` when it is one."""
        path = _torch_path(fn)
        if path is not None:
            return Symbol(
                name=path, meta=_meta_of(like, meta), id=f"{self.name}.{name}", module=torch,
                module_alias="torch", python_impl=fn, executor=self, tags=frozenset(tags),
            )  # fmt: skip
        return Symbol(
            name=name, meta=_meta_of(like, meta), id=f"{self.name}.{name}", python_impl=fn, executor=self,
            tags=frozenset(tags) | (like.tags if isinstance(like, Symbol) else frozenset()),
        )  # fmt: skip


def _checker_error(ex: Executor, checker: Callable, bsym: BoundSymbol, e: Exception) -> ThunderRuntimeError:
    """The error for a checker that raised instead of answering, naming the checker, op and call site."""
    name = getattr(checker, "__qualname__", repr(checker))
    where = f" (called at {bsym.source})" if bsym.source else ""
    hint = "A checker answers True or False; fix it, or let it return False for arguments it does not handle."
    if isinstance(e, AttributeError) and isinstance(e.obj, (torch.device, torch.dtype)):
        hint = (
            f"thunder's devices and dtypes are torch.device and torch.dtype objects (no .{e.name}): use "
            "device.type, which equals thunder.core.devices.DeviceType.CPU on a CPU, and torch's dtype attributes."
        )
    return ThunderRuntimeError(
        f"executor {ex.name!r}: checker {name} raised {type(e).__name__}: {e}, deciding whether it runs "
        f"{bsym.sym.print_name}{where}. {hint}"
    )


class OperatorExecutor(Executor):
    """Claims single bound symbols and runs each with a Python callable."""

    def register_operator(
        self,
        name: str,
        *,
        like: Symbol | Callable | None = None,
        meta: Callable | None = None,
        fn: Callable,
        tags: Sequence[str] = (),
        module=None,
        replaces: Callable | Sequence[Callable] | None = None,
    ) -> Symbol:
        """A new symbol ``name`` that runs ``fn``; its meta is ``meta`` or borrowed from ``like``.

        Called inside a jitted function it records itself in the trace, like a built-in op; so do
        calls of ``replaces`` (a callable, or several) in jitted programs.
        """
        if (like is None) == (meta is None):
            raise ThunderValueError(f"register_operator({name!r}): pass exactly one of like= or meta=")
        sym = Symbol(
            name=name, meta=_meta_of(like, meta), id=name, python_impl=fn, executor=self, tags=frozenset(tags),
        )  # its id is its name, as in lightning-thunder (``bsym.sym.id == "multimul"``)
        self.opmap[name] = sym
        self.implmap[sym] = ImplInfo(symbol=sym)
        for replaced in (replaces,) if callable(replaces) else replaces or ():
            replacements[replaced] = sym
        return sym

    def register_implementation(
        self,
        id_or_symbol,
        op: Symbol | None = None,
        *,
        checker: Callable | None = None,
        execution_transform: Callable | None = None,
        grad_transform: Callable | None = None,
    ) -> None:
        """Lets this executor run an existing symbol: with ``op``, or by ``execution_transform``.

        ``id_or_symbol`` is the Symbol or its id (resolved once, here, by ``resolve_symbol``).
        """
        if op is None and execution_transform is None:
            raise ThunderValueError("register_implementation: pass op= or execution_transform=")
        sym = resolve_symbol(id_or_symbol, what="register_implementation")
        self.implmap[sym] = ImplInfo(op, checker, execution_transform, grad_transform)


class TemporaryExecutor(OperatorExecutor):
    """An operator executor for operators made at run time (a tool wrapping one function for one
    jit), so that they never clash with another executor's or with each other.

    Its name is unique (``__ad_hoc_executor_<n>``) and each operator it registers gets a unique name
    and id, the given name followed by ``_<n>``. Pass the executor itself to ``thunder.jit``; it is
    not registered (``get_executor`` does not know it).
    """

    _instances = itertools.count()

    def __init__(self, version: Any = None):
        super().__init__(f"__ad_hoc_executor_{next(self._instances)}", version)
        self._operators = itertools.count()

    def register_operator(self, name: str, **kwargs) -> Symbol:
        """``OperatorExecutor.register_operator`` under the unique name ``<name>_<n>``."""
        return super().register_operator(f"{name}_{next(self._operators)}", **kwargs)


class FusionExecutor(Executor):
    """Runs regions of ops as single fusion symbols.

    How the pass uses it (``thunder.transforms.execution``): claiming gives this executor
    every bound symbol it accepts (``can_execute``: by default, the symbols registered with
    ``register_supported`` whose checker accepts the call), at the deepest level of a
    decomposition it accepts (Note [Claiming at the deepest level] there); the shared region
    finder (``find_regions``) groups them, dataflow permitting, into ``Region``s; then the pass
    calls ``fuse(region, trace)`` once per region, in trace order.

    Subclasses implement ``fuse``; ``fusion_bound_symbol`` builds the fusion symbol.
    """

    #: Whether the Rematerialization pass may move recomputations into this executor's backward
    #: fusions (Note [Rematerialisation] in thunder.transforms.rematerialization): for executors
    #: whose regions run compiled from their first call.
    rematerializes: bool = True

    def declines_parts_of(self, bsym: BoundSymbol) -> bool:
        """Whether this executor, which does not take ``bsym`` whole, would rather it ran whole elsewhere than
        take some of its parts (Note [Claiming at the deepest level]); by default it takes the parts."""
        return False

    def register_supported(self, id_or_symbol, checker: Callable | None = None) -> None:
        """Claims ``id_or_symbol`` (a Symbol or its id) where ``checker`` (if any) accepts the call."""
        sym = resolve_symbol(id_or_symbol, what="register_supported")
        self.implmap[sym] = ImplInfo(checker=checker)

    def fuse(self, region: Region, trace: TraceCtx) -> list[BoundSymbol] | None:
        """The executable bound symbols that replace ``region``, usually one fusion symbol.

        Args:
            region: ops this executor claimed, in a valid order, with their ``inputs`` (values
                produced outside the region) and ``outputs`` (values used after it or returned).
                The ops carry their own (language or prim) symbols.
            trace: the trace being built (for fresh names, e.g. the fusion's).

        Returns:
            The bound symbols to put in place of the region (they must read only the region's
            inputs and define at least its outputs), or None to decline it: its ops then go to
            the operator executors.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement fuse(region, trace)")


# torch callables that user-registered operators replace (``register_operator(..., replaces=fn)``):
# the tracer records the operator wherever the program calls ``fn``.
replacements: dict[Callable, Symbol] = {}
symbol_lookup.register_symbol_table(replacements, first=True)  # user operators win over the torch language

_executor_map: dict[str, Executor] = {}
_default_executors: list[Executor] = []
_always_executors: list[Executor] = []


def register_executor(ex: Executor) -> Executor:
    _executor_map[ex.name] = ex
    return ex


def deregister_executor(ex: Executor | str) -> None:
    name = ex if isinstance(ex, str) else ex.name
    ex = _executor_map.pop(name, None)
    if ex is not None:
        remove_default_executor(ex)
        remove_always_executor(ex)


def get_executor(name: str) -> Executor | None:
    return _executor_map.get(name)


def _registered_executor(name: str) -> Executor:
    """The executor an unpickled object names (``Executor.__reduce__``)."""
    ex = _executor_map.get(name)
    if ex is None:
        raise ThunderValueError(
            f"unpickling: the executor {name!r} is not registered in this process; register it (import the module "
            "that defines it) before loading"
        )
    return ex


def get_all_executors() -> tuple[Executor, ...]:
    return tuple(_executor_map.values())


def get_default_executors() -> tuple[Executor, ...]:
    return tuple(_default_executors)


def get_always_executors() -> tuple[Executor, ...]:
    return tuple(_always_executors)


def _resolve(ex: Executor | str) -> Executor:
    if isinstance(ex, Executor):
        return ex
    found = _executor_map.get(ex) if isinstance(ex, str) else None
    if found is None:
        known = ", ".join(sorted(_executor_map))
        raise ThunderValueError(
            f"unknown executor {ex!r}. Expected an Executor or the name of a registered Executor; the executors "
            f"available here are {known}. "
            "Pass one of these names, or an Executor object registered with thunder.extend.register_executor."
        )
    return found


def set_default_executors(executors: Sequence[Executor | str]) -> None:
    _default_executors[:] = [_resolve(e) for e in executors]


def set_always_executors(executors: Sequence[Executor | str]) -> None:
    _always_executors[:] = [_resolve(e) for e in executors]


def add_default_executor(ex: Executor | str) -> list[Executor]:
    """Puts ``ex`` first (highest priority) among the default executors; returns them."""
    ex = _resolve(ex)
    remove_default_executor(ex)
    _default_executors.insert(0, ex)
    return list(_default_executors)


def add_always_executor(ex: Executor | str) -> list[Executor]:
    """Adds ``ex`` to the executors every jit uses (after the others); returns them."""
    ex = _resolve(ex)
    if ex not in _always_executors:
        _always_executors.append(ex)
    return list(_always_executors)


def remove_default_executor(ex: Executor | str) -> list[Executor]:
    """Removes ``ex`` (or the executor of that name) from the default executors; returns them."""
    ex = _executor_map.get(ex) if isinstance(ex, str) else ex
    if ex in _default_executors:
        _default_executors.remove(ex)
    return list(_default_executors)


def remove_always_executor(ex: Executor | str) -> list[Executor]:
    """Removes ``ex`` (or the executor of that name) from the always executors; returns them."""
    ex = _executor_map.get(ex) if isinstance(ex, str) else ex
    if ex in _always_executors:
        _always_executors.remove(ex)
    return list(_always_executors)


def single_op_executor(
    executor_name: str,
    op_name: str,
    fn: Callable,
    meta: Callable,
    *,
    version: Any = None,
    replaces: Callable | None = None,
    tags: Sequence[str] = (),
    checker: Callable | None = None,
    execution_transform: Callable | None = None,
    grad_transform: Callable | None = None,
) -> OperatorExecutor:
    """A new, registered ``OperatorExecutor`` with one operator, ``op_name``, that runs ``fn``.

    The operator stands for ``replaces`` (default: ``fn`` itself): a jitted program that calls it
    records the operator instead of tracing into it, so with this executor in ``executors`` the
    trace keeps one op where the function would have decomposed (a custom kernel replacing a
    torch function, an MLP block kept whole). The executor is registered under ``executor_name``.

    Args:
        executor_name: the executor's name (``thunder.jit(..., executors=[executor_name])``).
        op_name: the operator's name in traces.
        fn: what runs the operator.
        meta: its meta function: proxies in, proxies with the outputs' metadata out.
        version: the executor's version.
        replaces: the callable the operator replaces in programs (default ``fn``).
        tags: the operator's symbol tags.
        checker, execution_transform, grad_transform: as in ``OperatorExecutor.register_implementation``.

    Returns:
        The executor.
    """
    ex = register_executor(OperatorExecutor(executor_name, version=version))
    sym = ex.register_operator(op_name, meta=meta, fn=fn, tags=tags, replaces=fn if replaces is None else replaces)
    if checker is not None or execution_transform is not None or grad_transform is not None:
        ex.register_implementation(
            sym, sym, checker=checker, execution_transform=execution_transform, grad_transform=grad_transform
        )
    return ex


def resolve_executors(executors: Sequence[Executor | str] | None) -> tuple[Executor, ...]:
    """The executors a jit uses: the given (or default) ones, then the always ones, no duplicates."""
    chosen = list(get_default_executors() if executors is None else (_resolve(e) for e in executors))
    for ex in get_always_executors():
        if ex not in chosen:
            chosen.append(ex)
    return tuple(chosen)
