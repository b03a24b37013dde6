"""Python-level primitives: returning, unpacking inputs, and the checks prologues make.

Their printers emit plain Python (``a, b = args``; ``if not (...): return None``) so the
prologue of a cached call is straight-line code with the cheapest checks first and no
exceptions on the common path.

Layer: core. Imports: core only.
"""

from __future__ import annotations

import array
import builtins
import enum
import keyword
import math
import types
from typing import Any

import torch

from thunder.core import dtypes, iterators
from thunder.core.prims.base import make_prim
from thunder.core.proxies import Proxy
from thunder.core.symbol import DONT_DCE, ESCAPES, PARAMETER, Symbol, eager_implementations
from thunder.core.torch_state import TORCH_STATE


class PythonPrimIDs(enum.Enum):
    RETURN = enum.auto()
    UNPACK_SEQUENCE = enum.auto()
    UNPACK_KEY = enum.auto()
    UNPACK_ATTR = enum.auto()
    UNPACK_RAW_ATTR = enum.auto()
    UNPACK_MODULE_MEMBER = enum.auto()
    UNPACK_GLOBAL = enum.auto()
    UNPACK_CELL = enum.auto()
    UNPACK_SHAPE = enum.auto()
    UNPACK_CONSTANT = enum.auto()
    CHECK_ARGS_STRUCTURE = enum.auto()
    CHECK_TENSOR = enum.auto()
    CHECK_TENSORS = enum.auto()
    CHECK_TENSOR_RANK = enum.auto()
    CHECK_VALUE = enum.auto()
    CHECK_IDENTITY = enum.auto()
    CHECK_TYPE = enum.auto()
    CHECK_EXPR = enum.auto()
    CHECK_TORCH_STATE = enum.auto()
    CHECK_AUTOCAST = enum.auto()
    CHECK_IS = enum.auto()
    CHECK_HASATTR = enum.auto()
    CHECK_GLOBAL_ABSENT = enum.auto()
    CHECK_CLASS_ATTR = enum.auto()
    SET_GRAD_ENABLED = enum.auto()
    UNPACK_CALL = enum.auto()
    UNPACK_ENVIRON = enum.auto()
    UNPACK_ITERATOR = enum.auto()
    UNPACK_NEXT = enum.auto()
    CHECK_ITERATOR_END = enum.auto()
    ADVANCE_ITERATOR = enum.auto()
    CHECK_OUTCOME = enum.auto()
    CHECK_KEYS = enum.auto()
    UNPACK_TRIVIAL = enum.auto()
    COMMENT = enum.auto()
    CHECK_NO_HOOKS = enum.auto()
    CHECK_CONTENTS = enum.auto()


P = PythonPrimIDs


def _print_return(bsym, printer):
    (value,) = bsym.args
    if printer.return_call is not None:  # a prologue fused with its computation: call it
        return [f"return {printer.return_call}({', '.join(printer.value(v) for v in value)})"]
    return [f"return {printer.value(value)}"]


python_return = make_prim(P.RETURN, "python_return", lambda value: None, tags=(DONT_DCE, ESCAPES), printer=_print_return)


def _print_unpack_sequence(bsym, printer):
    seq = bsym.args[0]
    names = [o.name for o in bsym.output]
    lhs = f"{names[0]}," if len(names) == 1 else ", ".join(names)
    rhs = printer.value(seq)
    own = printer._own_checks
    if own is not None and own.positional and rhs == own.varargs:  # the parameters took them (positional_arity)
        return [f"# {lhs}: the parameters"]
    return [f"{lhs} = {rhs}" if names else "pass"]


def _unpack_sequence_meta(seq, outputs):
    return list(outputs)


# ``unpack_sequence(seq, outputs)``: binds the proxies ``outputs`` to the items of ``seq``.
unpack_sequence = make_prim(P.UNPACK_SEQUENCE, "unpack_sequence", _unpack_sequence_meta, printer=_print_unpack_sequence)


def _print_unpack_key(bsym, printer):
    d, key, _ = bsym.args
    return [f"{bsym.output.name} = {printer.value(d)}[{_key(printer, key)}]"]


unpack_key = make_prim(P.UNPACK_KEY, "unpack_key", lambda d, key, output: output, printer=_print_unpack_key)


def _print_unpack_attr(bsym, printer):
    obj, name, _ = bsym.args
    if name.isidentifier() and not keyword.iskeyword(name):
        return [f"{bsym.output.name} = {printer.value(obj)}.{name}"]
    return [f"{bsym.output.name} = getattr({printer.value(obj)}, {name!r})"]


unpack_attr = make_prim(P.UNPACK_ATTR, "unpack_attr", lambda obj, name, output: output, printer=_print_unpack_attr)


def _print_unpack_raw_attr(bsym, printer):
    obj, name, _ = bsym.args
    return [f"{bsym.output.name} = object.__getattribute__({printer.value(obj)}, {name!r})"]


# ``unpack_raw_attr(obj, name, output)``: ``object.__getattribute__(obj, name)``, past the class's own Python
# ``__getattribute__`` (Note [Reads through a Python __getattribute__] in thunder.core.interpreter.protocols).
unpack_raw_attr = make_prim(
    P.UNPACK_RAW_ATTR, "unpack_raw_attr", lambda obj, name, output: output, printer=_print_unpack_raw_attr
)


class _NotAMember:
    """What ``unpack_module_member`` reads when the name has left the module's table: every check
    that follows such a read (a tensor's, a module's type, ``is None``) rejects it."""

    def __repr__(self) -> str:
        return "<not in the module's _parameters, _buffers or _modules any more>"


NOT_A_MEMBER = _NotAMember()


def _print_unpack_module_member(bsym, printer):
    module, table, name, _ = bsym.args
    absent = printer.add_ctx("_NOT_A_MEMBER", NOT_A_MEMBER)
    return [f"{bsym.output.name} = {printer.value(module)}.{table}.get({name!r}, {absent})"]


# ``unpack_module_member(module, table, name, output)``: ``module.name`` where nn.Module.__getattr__
# finds it, read from that table directly (Note [Module members] in thunder.core.outside_reads).
unpack_module_member = make_prim(
    P.UNPACK_MODULE_MEMBER, "unpack_module_member", lambda module, table, name, output: output,
    printer=_print_unpack_module_member,
)  # fmt: skip


class ModuleGlobals:
    """A module's globals dict as one value of a trace: a bound symbol's arguments are flattened as a
    pytree, which would walk every name of the module (45 reads of transformers' modules in a GPT-2
    prologue flattened 26,000 entries, a fifth of the time to compile it)."""

    __slots__ = ("namespace",)

    def __init__(self, namespace: dict):
        self.namespace = namespace

    def __repr__(self) -> str:
        return f"<globals of {self.namespace.get('__name__', '?')}>"


def _print_unpack_global(bsym, printer):
    globals_, name, _ = bsym.args
    return [f"{bsym.output.name} = {printer.constant(globals_.namespace, '_globals')}[{name!r}]"]


unpack_global = make_prim(
    P.UNPACK_GLOBAL, "unpack_global", lambda globals_dict, name, output: output, printer=_print_unpack_global
)


def _print_unpack_cell(bsym, printer):
    cell, _ = bsym.args
    return [f"{bsym.output.name} = {printer.constant(cell, '_cell')}.cell_contents"]


unpack_cell = make_prim(P.UNPACK_CELL, "unpack_cell", lambda cell, output: output, printer=_print_unpack_cell)


def _print_unpack_constant(bsym, printer):
    value, _ = bsym.args
    return [f"{bsym.output.name} = {printer.constant(value, '_captured')}"]


# ``unpack_constant(value, output)``: an object captured by identity (a tensor in a nested closure).
unpack_constant = make_prim(
    P.UNPACK_CONSTANT, "unpack_constant", lambda value, output: output, printer=_print_unpack_constant
)


def _print_unpack_shape(bsym, printer):
    t, dims = bsym.args
    names = [d.name for d in dims]
    lhs = f"{names[0]}," if len(names) == 1 else ", ".join(names)
    return [f"{lhs} = {printer.value(t)}.shape"]


# ``unpack_shape(t, dims)``: binds the proxies ``dims`` to the sizes of t (symbolic values).
unpack_shape = make_prim(P.UNPACK_SHAPE, "unpack_shape", lambda t, dims: list(dims), printer=_print_unpack_shape)


def _print_check_args_structure(bsym, printer):
    args, kwargs, nargs, kwnames = bsym.args
    a, k = printer.value(args), printer.value(kwargs)
    own = printer._own_checks
    if own is not None and own.positional is not None and a == own.varargs:  # positional_arity
        absent = f"{own.positional[-1]} is _thunder_absent or " if own.positional else ""
        return [f"if {absent}{a} or {k}: {printer.on_miss}"]
    if kwnames:
        keys = printer.constant(frozenset(kwnames), "_kwnames")
        return [f"if len({a}) != {nargs} or {k}.keys() != {keys}: {printer.on_miss}"]
    return [f"if len({a}) != {nargs} or {k}: {printer.on_miss}"]


check_args_structure = make_prim(
    P.CHECK_ARGS_STRUCTURE, "check_args_structure", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_args_structure
)


def positional_arity(bsyms: list, varargs: str, max_arity: int) -> tuple[str, ...] | None:
    """The names a prologue's bound symbols ``bsyms`` unpack their positional arguments to, where they read their
    ``varargs`` only in one arity check with no keyword names, of at most ``max_arity`` arguments, and in one unpacking
    of them all right after it; else None. Such a prologue printed as the jitted function's own code takes them as
    parameters of these names (Note [Positional arguments of the jitted function's own code] in
    ``thunder.core.codegen``)."""
    readers = [i for i, b in enumerate(bsyms) if any(p.name == varargs for p in (*b.flat_proxy_args, *b.flat_proxy_outs))]
    if not readers or bsyms[readers[0]].sym.id is not P.CHECK_ARGS_STRUCTURE:
        return None
    check = bsyms[readers[0]]
    args, _, nargs, kwnames = check.args
    if kwnames or nargs > max_arity or not isinstance(args, Proxy) or args.name != varargs:
        return None
    if nargs == 0:
        return () if len(readers) == 1 else None
    unpack = bsyms[readers[0] + 1] if readers[0] + 1 < len(bsyms) else None
    if readers[1:] != [readers[0] + 1] or unpack.sym.id is not P.UNPACK_SEQUENCE or unpack.args[0] is not args:
        return None
    return tuple(o.name for o in unpack.output) if len(unpack.output) == nargs else None


def _device_check(x: str, device: torch.device) -> str:
    if device.type == "cpu":
        return f"{x}.is_cpu"
    if device.type == "cuda":
        return f"{x}.get_device() == {device.index or 0}"
    return f"{x}.device.type == {device.type!r}"


def _tensor_conditions(
    printer, t, size_check: str, device, dtype, requires_grad, sizes: list | None, *, fast: bool = True,
    static_shape: tuple | None = None,
) -> str:  # fmt: skip
    x = printer.value(t)
    if printer.tensor_types is not None and static_shape is not None:  # Note [Tensor conditions as one call]
        conditions = _TensorConditions(static_shape, dtype, device, requires_grad)
        plain = f"{printer.constant(conditions, '_tensor_conditions')}({x})"
    else:
        printer.add_ctx("_Tensor", torch.Tensor)
        printer.add_ctx("_strided", torch.strided)
        conds = [
            f"isinstance({x}, _Tensor)",
            f"{x}.layout is _strided",  # sparse and MKL-DNN tensors are refused at tracing (provenance.layout_error)
            size_check.format(x=x),
            f"{x}.dtype is {printer.add_ctx('_' + dtypes.short_name(dtype), dtype)}",  # a global: no torch.<attr> lookup
            _device_check(x, device),
            f"{'' if requires_grad else 'not '}{x}.requires_grad",
        ]
        plain = f"({' and '.join(conds)})"
    guard = _tensor_guard(printer, x, sizes, device, dtype, requires_grad) if fast else None
    if guard is not None:
        return f"if not ({printer.constant(guard, '_tensor_guard')}.check({x}) or {plain}): {printer.on_miss}"
    return f"if not {plain}: {printer.on_miss}"


# Note [Tensor conditions as one call]
# In a prologue compiled for the hot path, a tensor check with static sizes calls one object that tests its Python
# conditions (``_TensorConditions``: the same tests in the same order), and a module's check of its hooks calls
# ``_hooked``, instead of printing them inline: the tensor conditions run only where the C check declines (Note
# [Tensor checks in C]), and inline the two were a fifth of the source CPython compiles before the decode steps of a
# generation reuse their entry (Qwen2's fused prologue: 80 -> 61 KB, 9.5 -> 7.7 ms). Printed traces keep them inline.
class _TensorConditions:
    """``isinstance(x, torch.Tensor) and x.layout is torch.strided and x.shape == shape and x.dtype is dtype and <device>
    and <requires_grad>``."""

    __slots__ = ("shape", "dtype", "device_type", "device_index", "requires_grad")

    def __init__(self, shape: tuple, dtype, device, requires_grad: bool):
        self.shape, self.dtype, self.requires_grad = shape, dtype, requires_grad
        self.device_type, self.device_index = device.type, device.index or 0

    def __call__(self, x) -> bool:
        if not (
            isinstance(x, torch.Tensor) and x.layout is torch.strided and x.shape == self.shape and x.dtype is self.dtype
        ):
            return False
        kind = self.device_type  # as ``_device_check``
        on_device = x.is_cpu if kind == "cpu" else x.get_device() == self.device_index if kind == "cuda" else x.device.type == kind
        if not on_device:
            return False
        return bool(x.requires_grad) if self.requires_grad else not x.requires_grad


# Note [Tensor checks in C]
# A tensor check in Python reads four attributes and builds a ``torch.Size``: about 240 ns a tensor, a third of
# a small cached call (``a + b`` on 2x2 tensors costs 860 ns eagerly). In a prologue compiled for the hot path
# each check first asks torch's C tensor check (``torch._C._dynamo.guards.TensorGuards``, dynamo's, 110 ns), made
# for an empty tensor of the expected type and metadata. It compares the exact Python type, the dispatch keys
# (which name the device type and layout), dtype, device index, requires_grad and the sizes (None: a symbolic
# size, any value): a tensor it accepts passes every Python condition, and what it rejects (a subclass, a view
# of a conjugate, a call under inference mode, another layout) still passes where the Python conditions say so,
# more slowly. So the check accepts exactly what it accepted before. Only for the CPU and CUDA and for the types
# ``torch.Tensor`` and ``nn.Parameter`` (a tensor of another type would need constructing).
_FAST_CHECKED_TYPES = (torch.Tensor, torch.nn.Parameter)


def _tensor_guard(printer, x: str, sizes: list | None, device, dtype, requires_grad: bool):
    """A C check that accepts only tensors the conditions of ``_tensor_conditions`` accept (Note [Tensor checks
    in C]), or None where the printer prints no fast checks or it cannot be made; one per kind of tensor (Note [One
    C check per kind of tensor])."""
    if printer.tensor_types is None or sizes is None:
        return None
    key = (printer.tensor_types.get(x, torch.Tensor), tuple(sizes), device, dtype, requires_grad)
    guard = _GUARDS.get(key)
    if guard is not None:
        return guard
    example = _tensor_example(printer, x, sizes, device, dtype, requires_grad)
    if example is None:
        return None
    from torch._C._dynamo.guards import TensorGuards

    guard = TensorGuards(example, dynamic_dims_sizes=[list(sizes)], dynamic_dims_strides=[[None] * len(sizes)])
    if len(_GUARDS) >= _GUARDS_KEPT:
        _GUARDS.clear()
    _GUARDS[key] = guard
    return guard


# Note [One C check per kind of tensor]
# A C tensor check (dynamo's ``TensorGuards``) of one tensor holds only what it compares: the type, dispatch keys,
# dtype, device, requires_grad and sizes of the empty tensor it was made for, none of which a check changes. So the
# checks of tensors alike (a model's layers' weights, one prologue after another) share one: making them, an empty
# tensor each, was a tenth of building a Qwen2 decoding entry's fused prologue. Kept for ``_GUARDS_KEPT`` kinds.
_GUARDS: dict[tuple, Any] = {}
_GUARDS_KEPT = 1024


def _tensor_example(printer, x: str, sizes: list | None, device, dtype, requires_grad: bool) -> torch.Tensor | None:
    """The empty tensor a C check of ``x`` is made for (``_tensor_guard``), or None where there is none."""
    if printer.tensor_types is None or sizes is None or device.type not in ("cpu", "cuda"):
        return None
    typ = printer.tensor_types.get(x, torch.Tensor)
    if typ not in _FAST_CHECKED_TYPES:
        return None
    ndim = len(sizes)
    if device.type == "cuda":
        device = torch.device("cuda", device.index or 0)  # as ``_device_check``'s
    # (requires_grad as the factory's argument: ``requires_grad_()`` raises under torch.func.vmap, where a cached
    # entry's prologue may be compiled)
    plain = typ is not torch.nn.Parameter and requires_grad
    example = torch.empty_strided(
        [1 if s is None else s for s in sizes], [0] * ndim, dtype=dtype, device=device, requires_grad=plain
    )
    if typ is torch.nn.Parameter:
        example = torch.nn.Parameter(example, requires_grad=requires_grad)
    return example


def _print_check_tensor(bsym, printer, *, fast: bool = True):
    t, shape, device, dtype, requires_grad = bsym.args
    size_check = "{x}.shape == " + printer.value(tuple(shape))
    sizes = _static_sizes(shape)
    static = tuple(shape) if sizes is not None else None
    return [_tensor_conditions(printer, t, size_check, device, dtype, requires_grad, sizes, fast=fast, static_shape=static)]


def _static_sizes(shape) -> list | None:
    return list(shape) if all(type(s) is int for s in shape) else None  # a symbolic size: no fast check


# ``check_tensor(t, shape, device, dtype, requires_grad)``: t must be a tensor with this metadata.
check_tensor = make_prim(P.CHECK_TENSOR, "check_tensor", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_tensor)


def _print_check_tensor_rank(bsym, printer):
    t, ndim, device, dtype, requires_grad = bsym.args
    return [_tensor_conditions(printer, t, "{x}.ndim == " + str(ndim), device, dtype, requires_grad, [None] * ndim)]


def _print_check_tensors(bsym, printer):
    """Consecutive tensor checks as one C check of them all, then, where it declines, each check's Python
    conditions: one call instead of one a tensor (a C check of two tensors costs 160 ns, of one 110 ns)."""
    checks = [b for b in bsym.args]
    examples = [
        _tensor_example(printer, printer.value(b.args[0]), _static_sizes(b.args[1]), *b.args[2:]) for b in checks
    ]
    if any(e is None for e in examples):
        return [line for b in checks for line in _print_check_tensor(b, printer)]
    from torch._C._dynamo.guards import TensorGuards

    sizes = [_static_sizes(b.args[1]) for b in checks]
    guard = TensorGuards(*examples, dynamic_dims_sizes=sizes, dynamic_dims_strides=[[None] * len(s) for s in sizes])
    names = ", ".join(printer.value(b.args[0]) for b in checks)
    plain = []
    for b in checks:
        printer.bsym = b  # a failed check returns the miss of its own check (a diagnostic names it)
        plain.extend("  " + line for line in _print_check_tensor(b, printer, fast=False))
    printer.bsym = bsym
    return [f"if not {printer.constant(guard, '_tensor_guard')}.check({names}):", *plain]


# ``check_tensors(*check_tensor_bsyms)``: consecutive tensor checks of a prologue compiled for the hot path, as one
# (``group_tensor_checks``). It accepts what its checks accept: the C check of them all accepts distinct tensors
# each of which its own C check accepts (Note [Tensor checks in C]); the rest go through the Python conditions.
check_tensors = make_prim(
    P.CHECK_TENSORS, "check_tensors", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_tensors
)


def group_tensor_checks(bsyms: list) -> list:
    """``bsyms`` with each run of two or more consecutive ``check_tensor``s made one ``check_tensors``."""
    grouped: list = []
    run: list = []
    for bsym in [*bsyms, None]:
        if bsym is not None and bsym.sym is check_tensor:
            run.append(bsym)
            continue
        if len(run) > 1:
            grouped.append(check_tensors.bind(*run, output=None))
        else:
            grouped.extend(run)
        run = []
        if bsym is not None:
            grouped.append(bsym)
    return grouped


# Like check_tensor, but the shape is symbolic: only the rank is fixed.
check_tensor_rank = make_prim(
    P.CHECK_TENSOR_RANK, "check_tensor_rank", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_tensor_rank
)


def _print_check_value(bsym, printer):
    x, value = bsym.args
    name = printer.value(x)
    if value is None or isinstance(value, bool):
        return [f"if {name} is not {value!r}: {printer.on_miss}"]
    typ = type(value)
    if typ is float and value != value:  # NaN equals nothing, itself included
        return [f"if type({name}) is not float or {name} == {name}: {printer.on_miss}"]
    if typ is float and value == 0.0:  # -0.0 == 0.0, but they differ (copysign, 1 / x, atan2)
        sign = printer.add_ctx("_copysign", math.copysign)
        return [
            f"if type({name}) is not float or {name} != 0.0 or {sign}(1.0, {name}) != {math.copysign(1.0, value)}: "
            f"{printer.on_miss}"
        ]
    if typ is complex and (value != value or value.real == 0.0 or value.imag == 0.0):
        # Compared by the representation, which tells NaN and the signs of zeros apart.
        return [f"if type({name}) is not complex or repr({name}) != {repr(value)!r}: {printer.on_miss}"]
    if typ in (int, float, str, complex, bytes):
        return [f"if type({name}) is not {typ.__name__} or {name} != {printer.value(value)}: {printer.on_miss}"]
    if typ in (set, frozenset) and not all(type(v) is str for v in value):  # {1} == {1.0} == {True}
        typed = "{" + ", ".join(f"({printer.value(v)}, {printer.constant(type(v), '_type')})" for v in value) + "}"
        condition = f"{name} != {printer.value(value)} or {{(v, type(v)) for v in {name}}} != {typed}"
        return [f"if {condition}: {printer.on_miss}"]
    return [f"if {name} != {printer.value(value)}: {printer.on_miss}"]


# ``check_value(x, value)``: x must equal value and have its exact type (1 is not 1.0 or True).
check_value = make_prim(P.CHECK_VALUE, "check_value", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_value)


def _print_check_identity(bsym, printer):
    x, obj = bsym.args
    return [f"if {printer.value(x)} is not {printer.constant(obj, '_obj')}: {printer.on_miss}"]


check_identity = make_prim(
    P.CHECK_IDENTITY, "check_identity", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_identity
)


def _print_check_type(bsym, printer):
    x, typ = bsym.args
    if printer.tensor_types is not None:  # the type its tensor check's fast check expects (Note [Tensor checks in C])
        printer.tensor_types[printer.value(x)] = typ
    return [f"if type({printer.value(x)}) is not {printer.constant(typ, '_type')}: {printer.on_miss}"]


check_type = make_prim(P.CHECK_TYPE, "check_type", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_type)


def _print_check_torch_state(bsym, printer):
    expr, expected = bsym.args
    # the reader bound to a global name of its own: a cached call skips looking ``torch.<name>`` up (Note [Torch
    # state] in thunder.core.torch_state)
    reader = printer.add_ctx(expr.removesuffix("()").replace(".", "_"), TORCH_STATE[expr])
    # (an ABC's cache token, a thread count, the matmul precision: values, not cached objects)
    differs = "!=" if type(expected) in (int, str) else "is not"
    return [f"if {reader}() {differs} {printer.value(expected)}: {printer.on_miss}"]


# ``check_torch_state(expr, expected)``: a piece of global torch state (a key of ``torch_state.TORCH_STATE``: grad
# mode, the default dtype, ...) that what the trace computes depends on (Note [Torch state]).
check_torch_state = make_prim(
    P.CHECK_TORCH_STATE, "check_torch_state", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_torch_state
)


def _print_check_autocast(bsym, printer):
    device_type, enabled, dtype = bsym.args
    printer.add_ctx("torch", torch)
    if not enabled:
        return [f"if torch.is_autocast_enabled({device_type!r}): {printer.on_miss}"]
    return [
        f"if not torch.is_autocast_enabled({device_type!r}) or torch.get_autocast_dtype({device_type!r}) is not "
        f"{printer.value(dtype)}: {printer.on_miss}"
    ]


# ``check_autocast(device_type, enabled, dtype)``: the autocast state the trace's casts were made for.
check_autocast = make_prim(
    P.CHECK_AUTOCAST, "check_autocast", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_autocast
)


def _set_grad_enabled_impl(enabled: bool) -> None:
    torch._C._set_grad_enabled(enabled)


# ``set_grad_enabled(enabled)``: the program switched autograd on or off here (``with torch.no_grad():``);
# the switch runs in order at run time, so results inside it are not connected to autograd, as in eager.
set_grad_enabled = make_prim(
    P.SET_GRAD_ENABLED, "set_grad_enabled", lambda enabled: None, impl=_set_grad_enabled_impl, tags=(DONT_DCE,)
)


def _print_check_is(bsym, printer):
    x, other = bsym.args
    return [f"if {printer.value(x)} is not {printer.value(other)}: {printer.on_miss}"]


# ``check_is(x, other)``: two inputs the trace saw as one object (an alias) must still be one.
check_is = make_prim(P.CHECK_IS, "check_is", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_is)


def _print_check_hasattr(bsym, printer):
    obj, name, present = bsym.args
    return [f"if hasattr({printer.value(obj)}, {name!r}) is not {present!r}: {printer.on_miss}"]


# ``check_hasattr(obj, name, present)``: whether ``obj`` has the attribute, which the program asked.
check_hasattr = make_prim(P.CHECK_HASATTR, "check_hasattr", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_hasattr)

def _print_check_global_absent(bsym, printer):
    globals_, name = bsym.args
    return [f"if {name!r} in {printer.constant(globals_.namespace, '_globals')}: {printer.on_miss}"]


# ``check_global_absent(globals, name)``: a global the program found undefined (and caught the NameError) still is.
check_global_absent = make_prim(
    P.CHECK_GLOBAL_ABSENT, "check_global_absent", lambda *args: None, tags=(DONT_DCE,),
    printer=_print_check_global_absent,
)  # fmt: skip


def _class_lookup(cls: type, name: str, after: type | None = None):
    """``name`` on the MRO of ``cls`` (the part after ``after``: ``super(after, obj).name``), descriptors not
    invoked (``_PyType_Lookup``); None where absent."""
    mro = cls.__mro__
    for klass in mro[mro.index(after) + 1 :] if after is not None else mro:
        d = klass.__dict__
        if name in d:
            return d[name]
    return None


def _print_check_class_attr(bsym, printer):
    cls, name, value, *after = bsym.args
    c = printer.constant(cls, "_cls")
    if not after and (type(value) in (types.FunctionType, property) or not hasattr(type(value), "__get__")):
        read = f"{c}.{name}" if name.isidentifier() and not keyword.iskeyword(name) else f"getattr({c}, {name!r})"
    else:  # ``cls.name`` of a staticmethod or a classmethod is what it binds, not itself
        args = ", ".join([c, repr(name), *(printer.constant(a, "_cls") for a in after)])
        read = f"{printer.constant(_class_lookup, '_class_lookup')}({args})"
    return [f"if {read} is not {printer.constant(value, '_obj')}: {printer.on_miss}"]


# ``check_class_attr(cls, name, value[, after])``: the lookup of ``name`` on ``cls`` (its MRO) still finds ``value``
# (a method the trace ran, Note [Methods read from objects] in ``thunder.core.outside_reads``; a class attribute,
# Note [Class attributes read through an instance] there).
check_class_attr = make_prim(
    P.CHECK_CLASS_ATTR, "check_class_attr", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_class_attr
)

MODULE_HOOK_DICTS = ("_backward_hooks", "_backward_pre_hooks", "_forward_hooks", "_forward_pre_hooks")
GLOBAL_HOOK_DICTS = ("_global_backward_pre_hooks", "_global_backward_hooks", "_global_forward_hooks", "_global_forward_pre_hooks")


def _print_check_no_hooks(bsym, printer):
    (module,) = bsym.args
    if module is None:  # the hooks registered for every module
        torch_module = printer.constant(torch.nn.modules.module, "_nn_module")
        return [f"if {' or '.join(f'{torch_module}.{h}' for h in GLOBAL_HOOK_DICTS)}: {printer.on_miss}"]
    m = printer.value(module)
    if printer.tensor_types is not None:  # a prologue compiled for the hot path (Note [Tensor conditions as one call])
        return [f"if {printer.add_ctx('_hooked', _hooked)}({m}): {printer.on_miss}"]
    # a ThunderModule's own compiled call (Note [Methods of a compiled module] in thunder.core.module) counts as none
    compiled = f"({m}._compiled_call_impl is not None and not getattr({m}._compiled_call_impl, 'thunder_entry', False))"
    tests = [compiled, *(f"{m}.{h}" for h in MODULE_HOOK_DICTS), f"'forward' in {m}.__dict__"]
    return [f"if {' or '.join(tests)}: {printer.on_miss}"]


def _hooked(m: torch.nn.Module) -> bool:
    """The conditions ``check_no_hooks(m)`` prints, the same tests in the same order, as one call."""
    compiled = m._compiled_call_impl
    return (
        (compiled is not None and not getattr(compiled, "thunder_entry", False))
        or m._backward_hooks or m._backward_pre_hooks or m._forward_hooks or m._forward_pre_hooks
        or "forward" in m.__dict__
    )  # fmt: skip


# ``check_no_hooks(module)``: the module is called without hooks, uncompiled and with its class's forward (none of
# its own), as the trace was
# (Note [Module calls] in thunder.core.special_calls); ``check_no_hooks(None)``: no global module hooks.
check_no_hooks = make_prim(P.CHECK_NO_HOOKS, "check_no_hooks", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_no_hooks)


def _print_unpack_call(bsym, printer):
    fn, args, kwargs, output = bsym.args
    parts = [printer.value(a) for a in args] + [f"{k}={printer.value(v)}" for k, v in kwargs.items()]
    call = f"{printer.constant(fn, '_fn')}({', '.join(parts)})"
    return [f"{output.name} = {call}" if output is not None else call]


# ``unpack_call(fn, args, kwargs, output)``: a value the prologue makes on every call and passes in: one the program
# takes from the world (``random.random()``, ``time.time()``), or a copy of an input (``copy.deepcopy(m)``);
# ``output`` None runs it for its effect.
unpack_call = make_prim(
    P.UNPACK_CALL, "unpack_call", lambda fn, args, kwargs, output: output, tags=(DONT_DCE,), printer=_print_unpack_call
)


def _print_unpack_environ(bsym, printer):
    environ, key, output = bsym.args
    env = printer.constant(environ, "_environ")
    return [f"{output.name} = {env}.get({key!r})" if key is not None else f"{output.name} = tuple({env})"]


# ``unpack_environ(environ, key, output)``: an environment variable the program read (None where unset), or with
# key None the names of all (Note [Environment variables] in ``thunder.core.special_calls``).
unpack_environ = make_prim(
    P.UNPACK_ENVIRON, "unpack_environ", lambda environ, key, output: output, printer=_print_unpack_environ
)


def _print_unpack_iterator(bsym, printer):
    it, typ, output = bsym.args
    view = printer.add_ctx("_iterator_view", iterators.iterator_view)
    return [
        f"{output.name} = {view}({printer.value(it)}, {printer.constant(typ, '_type')})",
        f"if {output.name} is None: {printer.on_miss}",
    ]


# Note [Iterator arguments] in thunder.core.iterators. ``unpack_iterator(it, typ, output)``: the view through
# which the prologue pulls from an iterator argument of type ``typ``; ``unpack_next(view, output)``: an item the program took;
# ``check_iterator_end(view)``: the program found the end there.
unpack_iterator = make_prim(
    P.UNPACK_ITERATOR, "unpack_iterator", lambda it, typ, output: output, tags=(DONT_DCE,), printer=_print_unpack_iterator
)


def _print_unpack_next(bsym, printer):
    view, output = bsym.args
    end = printer.add_ctx("_END", iterators.END)
    return [f"{output.name} = next({view.name}, {end})", f"if {output.name} is {end}: {printer.on_miss}"]


unpack_next = make_prim(P.UNPACK_NEXT, "unpack_next", lambda view, output: output, tags=(DONT_DCE,), printer=_print_unpack_next)


def _print_check_iterator_end(bsym, printer):
    (view,) = bsym.args
    end = printer.add_ctx("_END", iterators.END)
    return [f"if next({view.name}, {end}) is not {end}: {printer.on_miss}"]


check_iterator_end = make_prim(
    P.CHECK_ITERATOR_END, "check_iterator_end", lambda view: None, tags=(DONT_DCE,), printer=_print_check_iterator_end
)


def _print_advance_iterator(bsym, printer):
    (it,) = bsym.args
    return [f"next({printer.value(it)}, None)"]


# ``advance_iterator(it)``: a replay of the computation, where the program took an item from (or found the end of)
# an iterator argument that the prologue only looked at through a copy (``iterators.RESTORABLE``).
advance_iterator = make_prim(
    P.ADVANCE_ITERATOR, "advance_iterator", lambda it: None, tags=(DONT_DCE,), printer=_print_advance_iterator
)


def _print_comment(bsym, printer):
    (text,) = bsym.args
    return [f"# {line}" for line in str(text).splitlines() or [""]]


# ``comment(text)``: a comment line (one per line of ``text``) in the printed trace, where a pass or
# a user put it; it runs nothing, and dead-code elimination keeps it.
comment = make_prim(P.COMMENT, "comment", lambda text: None, tags=(DONT_DCE,), printer=_print_comment)
eager_implementations[P.COMMENT] = comment.meta  # called outside a trace (a function run eagerly): nothing to do


def _print_check_expr(bsym, printer):
    expr, proxies = bsym.args
    return [f"if not ({printer.expression(expr)}): {printer.on_miss}"]


# ``check_expr(expr, proxies)``: a Python boolean expression over the named proxies (symbolic constraints).
check_expr = make_prim(P.CHECK_EXPR, "check_expr", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_expr)


class OutcomeChanged(Exception):
    """A data-dependent value of this call differs from the one its trace was made for (or breaks a constraint of
    a symbolic one): another entry (or a new trace) continues from the first ``index`` outcomes and ``value``
    (Note [Data-dependent values] in thunder.core.data_dependent); ``earlier``: this call's values of the symbolic
    outcomes before ``index`` (then, for a symbolic one, of the prologue's symbols it was given). Internal: the
    jitted function catches it."""

    def __init__(self, index: int, value, earlier: tuple = ()):
        super().__init__(index, value)
        self.index, self.value, self.earlier = index, value, earlier


_TENSOR_VALUE = {
    "bool": bool,
    "item": torch.Tensor.item,
    "int": int,
    "float": float,
    "index": lambda t: t.__index__(),
    "tolist": torch.Tensor.tolist,
    "str": str,  # a tensor formatted (Note [Formatting a traced tensor] in thunder.core.proxies)
    "repr": repr,
    "is_leaf": lambda t: t.is_leaf,  # an input's: a parameter or not (TensorProxy.is_leaf)
    "is_inference": torch.Tensor.is_inference,  # an input's (TensorProxy.is_inference)
}


def tensor_value(t: torch.Tensor, kind: str):
    """The Python value a program asks of a real tensor (``bool(t)``, ``t.item()``, ...)."""
    return _TENSOR_VALUE[kind](t)


class SymbolicOutcome:
    """A data-dependent int (or float: ``t.item()`` of a float tensor) the trace keeps symbolic (Note [Symbolic
    data-dependent sizes] in thunder.core.data_dependent): the trace holds for every number of type ``kind`` that
    meets ``constraints``, Python expressions over ``name`` and the names of earlier symbolic outcomes. Constraints
    are added while the entry compiles."""

    __slots__ = ("name", "kind", "constraints", "given", "_code")

    def __init__(self, name: str, kind: type = int):
        self.name = name
        self.kind = kind
        self.constraints: list[str] = []
        self.given: tuple[str, ...] = ()  # the prologue's symbols (input sizes) that constraints also refer to
        self._code = None

    def accepts(self, value, earlier: dict) -> bool:
        """Whether the trace holds for ``value``, given the values of the earlier symbolic outcomes and of the
        prologue's symbols in ``given``, by name."""
        if type(value) is not self.kind:
            return False
        if self._code is None:
            self._code = compile(" and ".join(f"({c})" for c in self.constraints) or "True", "<constraints>", "eval")
        return bool(eval(self._code, {"__builtins__": builtins}, {**earlier, self.name: value}))

    def __repr__(self) -> str:
        return f"<{self.name}: any {self.kind.__name__}{' with ' + ' and '.join(self.constraints) if self.constraints else ''}>"


def same_outcome(a, b) -> bool:
    """Equal Python values, told apart as a program could: by type, -0.0 from 0.0, NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b) or (a != a and b != b)
    if type(a) is complex:
        return same_outcome(a.real, b.real) and same_outcome(a.imag, b.imag)
    if type(a) is list:
        return len(a) == len(b) and all(same_outcome(x, y) for x, y in zip(a, b))
    return a == b


def _check_outcome(t, kind: str, expected, index: int, earlier: tuple = ()) -> None:
    value = tensor_value(t, kind)
    if not same_outcome(value, expected):
        raise OutcomeChanged(index, value, earlier)


def _symbolic_outcome(t, kind: str, outcome: SymbolicOutcome, index: int, earlier: tuple, names: tuple):
    value = tensor_value(t, kind)
    if not outcome.accepts(value, dict(zip(names, earlier))):
        raise OutcomeChanged(index, value, earlier)
    return value


def _print_check_outcome(bsym, printer):
    t, kind, expected, index, earlier = bsym.args
    values = "(" + "".join(f"{printer.value(e)}, " for e in earlier) + ")"
    if type(expected) is SymbolicOutcome:
        check = printer.add_ctx("_symbolic_outcome", _symbolic_outcome)
        outcome = printer.constant(expected, "_outcome")
        names = tuple(e.name for e in earlier)
        return [f"{bsym.output.name} = {check}({printer.value(t)}, {kind!r}, {outcome}, {index}, {values}, {names!r})"]
    check = printer.add_ctx("_check_outcome", _check_outcome)
    reported = f", {values}" if earlier else ""
    return [f"{check}({printer.value(t)}, {kind!r}, {printer.value(expected)}, {index}{reported})"]


def _check_outcome_meta(t, kind, expected, index, earlier):
    return Proxy(prefix="u") if type(expected) is SymbolicOutcome else None


# ``check_outcome(t, kind, expected, index, earlier)``: where the program needed the Python value of tensor ``t``
# (``kind``: how it asked), the computation checks that this call's value is the one the trace continued with,
# and raises ``OutcomeChanged`` when it is not (Note [Data-dependent values]). With a ``SymbolicOutcome`` for
# ``expected`` it checks the outcome's constraints and binds the value to a proxy (Note [Symbolic data-dependent
# sizes]); ``earlier``: the proxies of the symbolic outcomes before it, whose values a changed outcome reports.
check_outcome = make_prim(
    P.CHECK_OUTCOME, "check_outcome", _check_outcome_meta, tags=(DONT_DCE,), printer=_print_check_outcome
)


def _key(printer, key: object) -> str:
    """A dict key as the prologue names it: a NaN is found by identity only (it equals nothing), so it is the traced
    object itself, not a literal ``float('nan')`` (a new object)."""
    if type(key) in (float, complex) and key != key:
        return printer.constant(key, "_nan")
    return printer.value(key)


def _print_check_keys(bsym, printer):
    d, keys = bsym.args
    name = printer.value(d)
    if not keys:
        return [f"if {name}: {printer.on_miss}"]
    condition = f"tuple({name}) != ({', '.join(_key(printer, k) for k in keys)},)"
    if not all(type(k) is str for k in keys):  # 1, 1.0 and True are one key to a dict, but not to the program
        condition += f" or tuple(map(type, {name})) != ({', '.join(printer.constant(type(k), '_type') for k in keys)},)"
    return [f"if {condition}: {printer.on_miss}"]


# ``check_keys(d, keys)``: the dict has exactly these keys, in this order (the program may iterate it), of these
# types (literals, or objects captured by identity and compared as the dict compares them: by hash and equality).
check_keys = make_prim(P.CHECK_KEYS, "check_keys", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_keys)


def _print_unpack_trivial(bsym, printer):
    (x,) = bsym.args
    return [f'# {x.name}: "{x.type_string()}"']


# ``unpack_trivial(x)``: the computation's parameter ``x``, printed as its type comment. One per
# parameter opens every computation trace, as in lightning-thunder (whose users index
# ``trace.bound_symbols`` past them).
unpack_trivial = make_prim(
    P.UNPACK_TRIVIAL, "unpack_trivial", lambda x: None, tags=(DONT_DCE, PARAMETER), printer=_print_unpack_trivial
)


def is_proxy(x) -> bool:
    return isinstance(x, Proxy)


def buffer_contents(x) -> tuple | None:
    """What a mutable buffer (``bytearray``, ``array.array``, ``memoryview``, a numpy array) holds, as a value:
    its element type, shape and bytes; None for anything else. The program reads such a buffer natively
    (``b[0]``), past every attribute check, so the prologue compares it whole."""
    typ = type(x)
    if typ is bytearray:
        return (bytes(x),)
    if typ is array.array:
        return (x.typecode, x.tobytes())
    if typ is memoryview:
        return (x.format, x.shape, x.tobytes())
    if typ.__name__ == "ndarray" and typ.__module__ == "numpy":
        return (x.dtype.str, x.shape, x.tobytes())
    return None


def _print_check_contents(bsym, printer):
    x, contents = bsym.args
    reader = printer.add_ctx("_buffer_contents", buffer_contents)
    return [f"if {reader}({printer.value(x)}) != {printer.constant(contents, '_contents')}: {printer.on_miss}"]


# ``check_contents(x, contents)``: the buffer ``x`` holds ``contents`` (``buffer_contents``).
check_contents = make_prim(P.CHECK_CONTENTS, "check_contents", lambda *args: None, tags=(DONT_DCE,), printer=_print_check_contents)

__all__ = [_n for _n, _v in list(globals().items()) if isinstance(_v, Symbol) and not _n.startswith("_")]
__all__.append("buffer_contents")
__all__.append("ModuleGlobals")
