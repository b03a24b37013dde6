"""Custom operators (``torch.library.custom_op``, or ``torch.library.define`` + ``impl``) in traced code.

Note [Custom ops]
A call of a custom operator (``torch.ops.<namespace>.<op>``, one of its overloads, or the
``CustomOpDef`` that ``torch.library.custom_op`` returns) is recorded, as torch.compile treats it,
as one opaque bound symbol: the torch executor runs the op itself, and its meta is the op's fake
kernel (``torch.library.register_fake``) run on fake tensors, which gives the shapes and dtypes of
the results (dims of symbolic shapes are pinned: the fake kernel sees plain numbers). One symbol
is made per op overload, on first use, and kept.

An op that writes some of its tensor arguments in place (``mutates_args``; tensor lists too) is recorded in its
functional form, as torch.compile functionalizes it: the symbol runs the op on copies of those
arguments and returns the copies too, and ``copy_`` writes them back, so the trace shows the
writes and the caller sees eager's.

torch.optim's fused kernels on the CPU (``torch._fused_adam_``, ``_fused_adamw_``, ``_fused_sgd_``,
``_fused_adagrad_``: ``fused=True``), which write the parameters, gradients and states in place, are recorded the
same way, as their aten operators (``_FUSED_KERNELS``): the values are the kernels' own, which no decomposition
would round alike.

Gradients: when the op has an autograd formula (``register_autograd`` on a ``custom_op``), a call
that needs a gradient is traced as ``torch.autograd.Function.apply`` is (Note [Custom autograd
functions] in ``thunder.core.traced_autograd``): the op runs, then its ``setup_context`` and its
``backward`` are traced on the call's proxies, and thunder's backward runs that formula (other
custom ops it calls are recorded as above). Otherwise (no formula known here, as for one
registered by ``torch.library.register_autograd`` on an op made with ``define``; tensor lists
that need gradients) the symbol has no gradient rule, so a computation that needs its gradient
runs under torch's own autograd, which does what eager does (eager's error at backward too, for
an op without a formula).

Refused, with a message saying what to do: ops that return views of their arguments or anything
but tensors, ops whose fake kernel is missing or fails.

``thunder.torch`` registers the table ``custom_ops`` with ``thunder.core.symbol_lookup`` after the
torch language's own table, which wins where both have an op.

Layer: language. Imports: core.
"""

from __future__ import annotations

import functools
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from torch._library.custom_ops import CustomOpDef, _maybe_get_opdef
from torch._library.simple_registry import singleton as _simple_registry

from thunder.core.errors import UnsupportedOpError
from thunder.core.interpreter.execution import call as interpreter_call
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.symbol import Symbol
from thunder.core.trace import get_tracectx
from thunder.core.tracectx import current_source_location
from thunder.core.traced_autograd import trace_autograd_function
from thunder.torch.base import symbol_to_torch
from thunder.torch.fake import fake_tree, run_on_fake
from thunder.torch.inplace import copy_

__all__ = ["custom_ops", "is_supported_custom_op"]

# Namespaces of torch's own operators: those are the torch language's business, not opaque ops.
_BUILTIN_NAMESPACES = frozenset({"aten", "prims", "prim"})


# torch.optim's fused CPU kernels -> the aten operators recorded for them (Note [Custom ops])
_FUSED_KERNELS: dict[Callable, torch._ops.OpOverloadPacket] = {
    torch._fused_adam_: torch.ops.aten._fused_adam_,
    torch._fused_adamw_: torch.ops.aten._fused_adamw_,
    torch._fused_sgd_: torch.ops.aten._fused_sgd_,
    torch._fused_adagrad_: torch.ops.aten._fused_adagrad_,
}
_FUSED_NAMES = frozenset(packet._qualified_op_name for packet in _FUSED_KERNELS.values())


def _recorded(fn: Any) -> bool:
    """Whether ``fn`` is a custom op, or an operator of torch.optim's fused kernels."""
    if isinstance(fn, torch._ops.OpOverloadPacket) and fn._qualified_op_name in _FUSED_NAMES:
        return True
    if isinstance(fn, torch._ops.OpOverload) and fn._schema.name in _FUSED_NAMES:
        return True
    return _namespace(fn) is not None


def _namespace(fn: Any) -> str | None:
    """The namespace of a custom op callable (``OpOverload``, ``OpOverloadPacket``, ``CustomOpDef``), else None."""
    if isinstance(fn, CustomOpDef):
        return fn._namespace
    if isinstance(fn, (torch._ops.OpOverload, torch._ops.OpOverloadPacket)):
        namespace = fn._qualified_op_name.split("::")[0] if isinstance(fn, torch._ops.OpOverloadPacket) else fn.namespace
        return None if namespace in _BUILTIN_NAMESPACES else namespace
    return None


def _has_fake_kernel(op: torch._ops.OpOverload) -> bool:
    """Whether ``op`` has a fake kernel: one registered from Python, or a C++ Meta kernel."""
    opdef = _maybe_get_opdef(op)
    if opdef is not None:  # its Meta kernel is a stub that asks for a fake kernel
        return opdef._abstract_fn is not None
    if _simple_registry.find(op.name()).fake_impl.kernel is not None:
        return True
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "Meta")


def is_supported_custom_op(fn: Any) -> bool:
    """Whether ``fn`` is a custom op thunder can record: one with a fake kernel, not refused."""
    if _namespace(fn) is None:
        return False
    if isinstance(fn, CustomOpDef):
        fn = fn._opoverload
    overloads = [getattr(fn, name) for name in fn.overloads()] if isinstance(fn, torch._ops.OpOverloadPacket) else [fn]
    return any(_has_fake_kernel(op) and _refusal(op) is None for op in overloads)


def _where() -> str:
    loc = current_source_location()
    return f" (called at {loc})" if loc is not None else ""


def _display(op: torch._ops.OpOverload) -> str:
    return f"torch.ops.{op.namespace}.{op._opname}.{op._overloadname}"


# --- the fake kernel as meta ----------------------------------------------------------------------


def _fake_meta(op: torch._ops.OpOverload) -> Callable:
    def meta(*args, **kwargs):
        try:
            out = run_on_fake(op, args, kwargs)[0]
        except torch._subclasses.fake_tensor.DynamicOutputShapeException as e:
            raise _SizesFromData from e  # (Note [Custom ops whose sizes come from the data])
        except Exception as e:
            if _has_fake_kernel(op):
                raise  # the op's own fake kernel refused these arguments, as its real kernel would
            raise UnsupportedOpError(
                f"custom op {_display(op)} has no fake kernel, which thunder runs to know the shapes and dtypes of "
                f"its results. Register one with @torch.library.register_fake({op._name!r}), or call the op outside "
                "the jitted function."
            ) from e
        return tree_map(
            lambda t: TensorProxy(shape=t.shape, dtype=t.dtype, device=t.device) if isinstance(t, torch.Tensor) else t,
            out,
        )

    meta.__name__ = f"{op.namespace}_{op._opname}"
    return meta


class _SizesFromData(Exception):
    """The op's fake kernel made a size from the data (``ctx.new_dynamic_size()``): no plain fake run gives it."""


# Note [Custom ops whose sizes come from the data]
# A custom op whose fake kernel makes a result's size from the data (torchvision's ``nms``: how many boxes it keeps)
# has no shape a fake run can give. Its fake kernel is run again with a shape environment, which tells which sizes
# come from the data; the call is then recorded as two symbols: ``<op>_sizes``, which runs the op and returns those
# sizes as a tensor, and ``<op>_of_sizes``, which runs it again and returns its results with them. Each size is read
# from the first as a data-dependent value (``.item()``: checked on every call, and symbolic once it has changed, so
# a detector keeping another number of boxes on each image does not compile again; Note [Symbolic data-dependent
# sizes] in thunder.core.data_dependent). The op runs twice a call.
def _sizes_from_data(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> list:
    """Per tensor result of ``op`` (in ``tree_leaves`` order): its dtype, device and shape, None for each size the
    fake kernel made from the data."""
    out = run_on_fake(op, args, kwargs, sizes_from_data=True)[0]
    results = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
    return [(t.dtype, t.device, tuple(d if type(d) is int else None for d in t.shape)) for t in results]


@functools.cache
def _data_sizes_symbols(op: torch._ops.OpOverload) -> tuple[Symbol, Symbol]:
    """``<op>_sizes`` and ``<op>_of_sizes`` (Note [Custom ops whose sizes come from the data]), made once per op."""
    name = f"{op.namespace}_{op._opname}"

    def sizes_impl(spec, *args, **kwargs):
        results = [t for t in tree_leaves(op(*args, **kwargs)) if isinstance(t, torch.Tensor)]
        return torch.tensor([n for t, (_, _, shape) in zip(results, spec) for n, d in zip(t.shape, shape) if d is None])

    def sizes_meta(spec, *args, **kwargs):
        return TensorProxy(shape=(sum(d is None for _, _, shape in spec for d in shape),), dtype=torch.int64, device=torch.device("cpu"))

    def of_sizes_impl(spec, sizes, *args, **kwargs):
        return op(*args, **kwargs)

    def of_sizes_meta(spec, sizes, *args, **kwargs):
        given = iter(sizes)
        results = [
            TensorProxy(shape=tuple(next(given) if d is None else d for d in shape), dtype=dtype, device=device)
            for dtype, device, shape in spec
        ]
        return results[0] if len(results) == 1 else tuple(results)

    syms = []
    for suffix, meta, impl in (("sizes", sizes_meta, sizes_impl), ("of_sizes", of_sizes_meta, of_sizes_impl)):
        sym = Symbol(name=f"{name}_{suffix}", meta=meta, id=f"{name}_{suffix}", python_impl=impl)
        symbol_to_torch[sym] = impl
        syms.append(sym)
    return syms[0], syms[1]


def _call_with_sizes_from_data(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> Any:
    """A call of ``op`` whose result sizes come from the data (Note [Custom ops whose sizes come from the data])."""
    spec = _sizes_from_data(op, args, kwargs)
    sizes_sym, of_sizes_sym = _data_sizes_symbols(op)
    sizes_t = sizes_sym(tuple(spec), *args, **kwargs)
    sizes = tuple(sizes_t[i].item() for i in range(sizes_t.shape[0]))
    return of_sizes_sym(tuple(spec), sizes, *args, **kwargs)


# --- calls -----------------------------------------------------------------------------------------


def _written(op: torch._ops.OpOverload) -> tuple[int | str, ...]:
    """Where the arguments ``op`` writes in place are in a bound call (``_bind``): a position, or the
    name of a keyword-only argument."""
    where, position = [], 0
    for a in op._schema.arguments:
        if a.alias_info is not None and a.alias_info.is_write:
            where.append(a.name if a.kwarg_only else position)
        position += not a.kwarg_only
    return tuple(where)


def _refusal(op: torch._ops.OpOverload) -> tuple[str, str] | None:
    """Why calls of ``op`` cannot be recorded, and what to do instead; or None."""
    schema = op._schema
    for a in schema.arguments:
        if a.alias_info is not None and a.alias_info.is_write and not _is_tensor_type(a.type, lists=True):
            return (
                f"changes its argument {a.name} of type {a.type} in place (schema {schema}), which thunder "
                "does not record yet",
                "Pass tensors, or call the op outside the jitted function.",
            )
    for r in schema.returns:
        if r.alias_info is not None:
            return (
                f"returns a view of its argument (schema {schema}), which thunder does not record yet",
                "Return a new tensor, or call the op outside the jitted function.",
            )
        if not _is_tensor_type(r.type, lists=True):
            return (
                f"returns a {r.type} (schema {schema}); thunder records custom ops that return tensors only",
                "Return the value as a tensor, or call the op outside the jitted function.",
            )
    return None


def _is_tensor_type(typ: Any, *, lists: bool) -> bool:
    """Whether a schema type is ``Tensor`` or ``Tensor?`` (with ``lists``, also ``Tensor[]``)."""
    if isinstance(typ, torch.OptionalType):
        typ = typ.getElementType()
    if lists and isinstance(typ, torch.ListType):
        typ = typ.getElementType()
    return isinstance(typ, torch.TensorType)


def _bind(op: torch._ops.OpOverload, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The call's arguments as the dispatcher passes them: every argument that is not keyword-only by
    position, defaults filled in, keyword-only ones by name (what ``setup_context`` receives)."""
    positional, keyword_only, given = [], {}, dict(kwargs)
    schema_args = op._schema.arguments
    n_positional = sum(not a.kwarg_only for a in schema_args)
    if len(args) > n_positional:
        raise TypeError(f"{_display(op)}() takes {n_positional} positional arguments but {len(args)} were given")
    for i, a in enumerate(schema_args):
        if not a.kwarg_only and i < len(args):
            value = args[i]
        elif a.name in given:
            value = given.pop(a.name)
        elif a.has_default_value():
            value = a.default_value
        else:
            raise TypeError(f"{_display(op)}() missing required argument {a.name!r} (schema {op._schema})")
        if a.kwarg_only:
            keyword_only[a.name] = value
        else:
            positional.append(value)
    if given:
        raise TypeError(f"{_display(op)}() got an unexpected keyword argument {next(iter(given))!r}")
    return tuple(positional), keyword_only


def _autograd_class(op: torch._ops.OpOverload, sym: Symbol, opdef: CustomOpDef, keyword_only: dict) -> type:
    """The call as a ``torch.autograd.Function`` would be written: ``forward`` runs the op,
    ``setup_context`` and ``backward`` are the registered formula."""
    setup_context = opdef._setup_context_fn

    def forward(*inputs):
        return sym(*inputs, **keyword_only)

    def setup(ctx, inputs, output):
        if setup_context is None:
            return None
        if keyword_only:
            return setup_context(ctx=ctx, inputs=inputs, keyword_only_inputs=keyword_only, output=output)
        return setup_context(ctx=ctx, inputs=inputs, output=output)

    name = f"{op.namespace}_{op._opname}"
    return type(
        name,
        (),
        {"__qualname__": op.name(), "forward": staticmethod(forward), "setup_context": staticmethod(setup),
         "backward": staticmethod(opdef._backward_fn)},
    )  # fmt: skip


def _traced_formula(op: torch._ops.OpOverload, args: tuple) -> CustomOpDef | None:
    """The ``custom_op`` whose formula thunder traces for this call, or None when the call needs no
    gradient or the formula cannot be traced as an autograd.Function's (tensor lists)."""
    opdef = _maybe_get_opdef(op)
    if opdef is None or opdef._backward_fn is None or not torch.is_grad_enabled():
        return None
    if not any(isinstance(a, TensorProxy) and a.requires_grad for a in args):
        return None
    if any(isinstance(r.type, torch.ListType) for r in op._schema.returns) or any(
        isinstance(a, (list, tuple)) and any(isinstance(t, TensorProxy) and t.requires_grad for t in tree_leaves(a))
        for a in args
    ):
        return None  # torch's own autograd runs it (Note [Custom ops])
    return opdef


def _interpreted(fn: Callable, args: tuple) -> Any:
    """``fn(*args)`` under the interpreter when tracing a program (outside one, natively)."""
    runtime = current_runtime()
    return interpreter_call(runtime, fn, tuple(args)) if runtime is not None else fn(*args)


def _none_if_empty(x: Any) -> Any:
    """An empty list written in place (Adam's ``max_exp_avg_sqs`` without amsgrad) as None: a trace's outputs hold
    no empty list."""
    return None if type(x) is list and not x else x


def _functional(op: torch._ops.OpOverload, written: tuple[int | str, ...]) -> Callable:
    """``op`` without its in-place writes: it runs on copies of the tensors it writes and returns
    ``(results, *copies)`` (``torch.compile`` functionalizes such ops the same way)."""

    def functional(*args, **kwargs):
        args, kwargs = list(args), dict(kwargs)
        copies = []
        for where in written:
            holder = args if type(where) is int else kwargs
            holder[where] = tree_map(lambda t: t if t is None else t.clone(), holder[where])  # a tensor, None, a list
            copies.append(_none_if_empty(holder[where]))
        return op(*args, **kwargs), *copies

    return functional


def _symbol(op: torch._ops.OpOverload) -> Symbol:
    """The opaque symbol of ``op`` (of its functional form if it writes in place), run by the torch executor."""
    name = f"{op.namespace}_{op._opname}" + ("" if op._overloadname == "default" else f"_{op._overloadname}")
    results_meta, written = _fake_meta(op), _written(op)
    if op._schema.name in _FUSED_NAMES:  # they return nothing: no fake run, which would pin a scheduled lr
        results_meta = lambda *args, **kwargs: None  # noqa: E731
    if not written:
        meta, impl = results_meta, op
    else:

        def meta(*args, **kwargs):
            news = [(args, kwargs)[type(w) is str][w] for w in written]
            results = results_meta(*args, **kwargs)
            copies = (tree_map(lambda t: t if t is None else TensorProxy.like(t, requires_grad=False), t) for t in news)
            return results, *map(_none_if_empty, copies)

        name, impl = f"{name}_functional", _functional(op, written)
    sym = Symbol(name=name, meta=meta, id=_display(op), python_impl=impl)
    symbol_to_torch[sym] = impl
    return sym


# Note [Custom ops that stand for eager ops]
# A library may register a custom op as what it calls where torch.compile cannot compile an aten op,
# and call the aten op itself otherwise. transformers calls ``transformers::grouped_mm_fallback`` (a
# Python loop of ``mm`` over the expert groups) in place of ``torch._grouped_mm`` when it is being
# compiled and the weights are not bf16, since Inductor compiles ``_grouped_mm`` only in bf16.
# thunder answers that it is being compiled (``torch.compiler.is_compiling()``, see
# ``thunder.core.introspection._compiling_queries``) but runs ``_grouped_mm``, with its gradient, in every dtype eager does:
# such a call is recorded as the aten op, which eager calls on the same tensors: the values, the
# kernels (forward and backward) and a layout error are eager's own, instead of a slower loop. An
# equivalent returns NotImplemented where the aten op does not apply (a dtype it lacks); the custom op
# is recorded then.
def _grouped_mm_for_fallback(input, weight, offs):
    from thunder.torch.linalg import grouped_mm

    if not (input.dtype == weight.dtype and input.dtype in (torch.float32, torch.bfloat16, torch.float16)):
        return NotImplemented
    if input.ndim != 2 or weight.ndim != 3 or offs.dtype is not torch.int32:
        return NotImplemented
    return grouped_mm(input, weight, offs)


#: Qualified custom op name -> the torch-language call it stands for (Note [Custom ops that stand for eager ops]).
_EAGER_EQUIVALENTS: dict[str, Callable] = {"transformers::grouped_mm_fallback": _grouped_mm_for_fallback}


def _overload_call(op: torch._ops.OpOverload) -> Callable:
    """What a call of ``op`` is recorded as (Note [Custom ops])."""
    refusal = _refusal(op)
    sym = _symbol(op) if refusal is None else None
    written = _written(op)

    equivalent = _EAGER_EQUIVALENTS.get(op._schema.name)

    def call(*args, **kwargs):
        if refusal is not None:
            problem, fix = refusal
            raise UnsupportedOpError(f"custom op {_display(op)} {problem}{_where()}. {fix}")
        args, keyword_only = _bind(op, args, kwargs)
        if equivalent is not None:
            result = equivalent(*args, **keyword_only)
            if result is not NotImplemented:
                return result
        if written:  # the new values are written back as eager's op writes them
            results, *news = sym(*args, **keyword_only)
            for where, new in zip(written, news):
                for target, value in zip(tree_leaves((args, keyword_only)[type(where) is str][where]), tree_leaves(new)):
                    if value is not None:
                        copy_(target, value)
            return results
        opdef = _traced_formula(op, args)
        if opdef is None:
            try:
                return sym(*args, **keyword_only)
            except _SizesFromData:
                return _call_with_sizes_from_data(op, args, keyword_only)
        cls = _autograd_class(op, sym, opdef, keyword_only)
        return trace_autograd_function(cls, args, get_tracectx(), _interpreted)

    call.__name__ = f"{op.namespace}_{op._opname}"
    return call


def _packet_call(packet: torch._ops.OpOverloadPacket) -> Callable:
    """A call of ``torch.ops.<namespace>.<op>``: the overload the dispatcher would pick, chosen on fake
    tensors with the arguments' metadata."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    def call(*args, **kwargs):
        names = packet.overloads()
        if len(names) == 1:
            name = names[0]
        elif packet._qualified_op_name in _FUSED_NAMES:  # by the learning rate's type: the fake run would pin it
            name = "tensor_lr" if isinstance(kwargs.get("lr"), (TensorProxy, torch.Tensor)) else "default"
        else:
            fake_args, fake_kwargs = fake_tree(FakeTensorMode(), (args, kwargs))
            name = torch._C._jit_resolve_packet(packet._qualified_op_name, *fake_args, **fake_kwargs)
        return custom_ops[getattr(packet, name)](*args, **kwargs)

    call.__name__ = packet._qualified_op_name.replace("::", "_")
    return call


class _CustomOps(Mapping):
    """Custom op callable -> what a call of it is recorded as, made on first lookup and kept
    (thread-safe). A ``CustomOpDef`` is its default overload."""

    def __init__(self):
        self._made: dict[Any, Callable] = {}
        self._lock = threading.Lock()

    def __getitem__(self, fn: Any) -> Callable:
        if type(fn) is types.BuiltinFunctionType and fn in _FUSED_KERNELS:
            fn = _FUSED_KERNELS[fn]
        elif not _recorded(fn):
            raise KeyError(fn)
        if isinstance(fn, CustomOpDef):
            fn = fn._opoverload
        found = self._made.get(fn)
        if found is None:
            with self._lock:
                found = self._made.get(fn)
                if found is None:
                    make = _packet_call if isinstance(fn, torch._ops.OpOverloadPacket) else _overload_call
                    found = self._made[fn] = make(fn)
        return found

    def get(self, fn: Any, default: Any = None) -> Any:
        """As ``Mapping.get``, without raising for the usual callable (no custom op): the tracer asks for each call."""
        cls = type(fn)
        if cls is types.FunctionType or cls is types.MethodType:  # most calls: never an op (2% of a first call)
            return default
        fused = cls is types.BuiltinFunctionType and fn in _FUSED_KERNELS
        return self[fn] if fused or _recorded(fn) else default

    def __iter__(self) -> Iterator:
        return iter(dict(self._made))

    def __len__(self) -> int:
        return len(self._made)


#: The table the tracer consults (after the torch language's): custom op callable -> its recording.
custom_ops = _CustomOps()
