"""How traced values answer Python's questions about what they are.

Inside a jitted function a tensor is a ``TensorProxy`` and a symbolic number a ``SymInt``/``SymFloat``,
but the program must see what eager sees: ``isinstance(t, torch.Tensor)``, ``type(n) is int``. The
tracer consults ``lookaside`` before every call and ``proxy_attribute`` after every attribute load
on a proxy.

Note [Eager types]
Every traced value has an *eager type*: the type the value has when the program runs eagerly.
A ``TensorProxy`` is a ``torch.Tensor``, or, for an input, the type of the tensor it stands for
(``torch.nn.Parameter``, a subclass; the tracer reports inputs through ``note_input``); a
``SymInt`` is an ``int``, a ``SymFloat`` a ``float``. Traced code asks through ``type``,
``isinstance``, ``__class__``, ``hasattr``/``getattr`` and gets answers about the eager type.
The answers are given only to traced code (through the lookaside): thunder's own code, which
runs natively, still tells proxies from tensors with ``isinstance(x, TensorProxy)``.
Attributes a proxy has but eager's value lacks (``TensorProxy.name``, ``SymInt.expr``) are not
visible to traced code.

Note [Native consumers of symbolic numbers]
A ``SymInt`` is an ``int`` subclass, and C code that reads an int (``range``, ``chr``, ``math.gcd``,
``struct.pack``, a ``str`` method, ``tuple.__getitem__`` called explicitly ...) reads its value
without calling any method, so a trace would silently specialise on it. Calls of such functions
from traced code are looked aside: their symbolic arguments are concretised first, which records
``expr == value`` as a constraint (see Note [Symbolic values] in ``symbolic``). Functions that
reach the number through its methods (``math.floor``, ``math.prod``, ``max``, dict lookups
through ``__hash__``) keep it symbolic and need nothing here; ``sum`` is run as CPython runs it, in
Python (Note [sum of symbolic numbers]). Libraries whose native code
reads ints (``numpy``: ``np.arange(n)``, ``np.ones((n, 2))``; ``array``, ``decimal``, ``json``'s C
encoder) have each native callable looked aside by its module (``_NATIVE_NUMBER_MODULES``), and the
numbers are pinned inside lists, tuples and dicts too (``bytes([n])``, ``json.dumps({"n": n})``), as is
the position given to a method of the program's own list or deque (``l.insert(n, v)``, ``d.rotate(n)``).

Layer: tracing. Imports: core, core.interpreter; which symbol a torch callable stands for comes from
``thunder.core.symbol_lookup``, filled by the torch language.
"""

from __future__ import annotations

import builtins
import collections
import itertools
import math
import operator
import pickle
import struct
import sys
import types
import weakref
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.errors import ThunderTypeError, UnsupportedOpError
from thunder.core.interpreter.conversions import stood_for
from thunder.core.interpreter.execution import call as _interpreter_call
from thunder.core.interpreter.execution import default_lookaside as _interpreter_default_lookaside
from thunder.core.interpreter.execution import lookup_type_attr
from thunder.core.interpreter.protocols import BINARY_OPS, COMPARE_OPS, INPLACE_OPS
from thunder.core.interpreter.protocols import binary_op as _interpreter_binary_op
from thunder.core.interpreter.protocols import compare_op as _interpreter_compare_op
from thunder.core.interpreter.protocols import load_attr as _interpreter_load_attr
from thunder.core.interpreter.protocols import truth as _interpreter_truth
from thunder.core.interpreter.protocols import type_call as _interpreter_type_call
from thunder.core.interpreter.runtime import current_runtime, innermost_frame_objects
from thunder.core.proxies import NumberProxy, Proxy, SymbolicSize, TensorProxy
from thunder.core.symbol_lookup import bound_self, plain_attribute, symbol_for
from thunder.core.symbolic import (
    MATH_DOMAINS,
    SymFloat,
    SymInt,
    SymStr,
    pin,
    pin_index,
    read_natively_by_operator,
    sym_math,
    sym_max,
    sym_min,
)

# --- eager types -------------------------------------------------------------------------------

# id(input proxy) -> (weak reference to it, the type of the tensor it stands for), for inputs
# whose type is not exactly torch.Tensor. Keyed by id: a proxy's ``==`` is a traced op.
_input_types: dict[int, tuple[weakref.ref, type]] = {}
_DISABLED_TORCH_FUNCTION = torch._C._disabled_torch_function_impl


def note_input(proxy: TensorProxy, value: Any, where: Callable[[], str] | None = None) -> None:
    """Called by the tracer for each input tensor: ``proxy`` stands for ``value`` (see Note [Eager types]);
    ``where()`` names the input and the user's line that reads it, for an error.

    Raises ThunderTypeError for a Tensor subclass whose ``__torch_function__`` makes eager's results
    instances of the subclass: thunder traces plain tensor ops, so every answer about them would differ.
    """
    typ = type(value)
    if typ is torch.Tensor:
        return
    if getattr(typ, "__torch_function__", None) is not _DISABLED_TORCH_FUNCTION:
        which = f"input {where()}" if where is not None else "an input"
        raise ThunderTypeError(
            f"thunder.jit: {which} is a {typ.__module__}.{typ.__qualname__}, a torch.Tensor subclass with "
            "__torch_function__ enabled: eagerly, operations on it return the subclass and run its overrides, "
            "but thunder traces them as plain torch.Tensor operations. Pass x.as_subclass(torch.Tensor), or set "
            "__torch_function__ = torch._C._disabled_torch_function_impl on the subclass (as torch.nn.Parameter "
            "does) if its results are meant to be plain tensors."
        )
    note_type(proxy, typ)


def note_type(proxy: TensorProxy, typ: type) -> None:
    """``proxy`` stands for a tensor of type ``typ`` (a subclass of torch.Tensor: Note [Eager types])."""
    key = id(proxy)

    def forget(ref, key=key):
        entry = _input_types.get(key)
        if entry is not None and entry[0] is ref:
            del _input_types[key]

    _input_types[key] = (weakref.ref(proxy, forget), typ)


def eager_type(x: Any) -> type:
    """The type ``x`` has when the program runs eagerly (see Note [Eager types])."""
    typ = type(x)
    if typ is SymInt:
        return int
    if typ is SymFloat:
        return float
    if typ is SymStr:
        return str
    if isinstance(x, TensorProxy):
        entry = _input_types.get(id(x))
        if entry is not None and entry[0]() is x:
            return entry[1]
        return torch.Tensor
    if isinstance(x, NumberProxy):
        return x.python_type
    if typ.__module__.startswith("thunder."):
        # A stand-in that names the eager class through ``__class__`` (a shape with symbolic dims
        # is a ``SymbolicSize`` whose ``__class__`` is ``torch.Size``).
        cls = x.__class__
        if cls is not typ and isinstance(cls, type):
            return cls
    return typ


def _is_traced(x: Any) -> bool:
    return isinstance(x, (Proxy, SymInt, SymFloat, SymStr))


def _type(*args, **kwargs):
    if len(args) == 1 and not kwargs:
        return eager_type(args[0])
    ctx = current_runtime()
    if len(args) == 3 and ctx is not None:  # type(name, bases, namespace), a ``class`` statement's too
        return _interpreter_type_call(ctx, type, args, kwargs)  # Note [Classes made by the program]
    return type(*args, **kwargs)


# ``torch.FloatTensor``, ``torch.cuda.LongTensor``, ...: their ``isinstance`` asks a real tensor for its
# dtype and backend, and says False for anything else.
_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)


def _isinstance(obj, classinfo, /) -> bool:
    if not _is_traced(obj):
        return _instance_check(obj, classinfo)
    if isinstance(classinfo, (tuple, types.UnionType)):
        return any(_isinstance(obj, c) for c in (classinfo if isinstance(classinfo, tuple) else classinfo.__args__))
    if type(classinfo) is _LEGACY_TENSOR_TYPE:
        # eager: the tensor's dtype and dense backend are the type's (a meta tensor is no FloatTensor)
        return (
            isinstance(obj, TensorProxy)
            and obj.dtype == classinfo.dtype
            and obj.device.type == ("cuda" if classinfo.is_cuda else "cpu")
            and not (classinfo.is_sparse or classinfo.is_sparse_csr or classinfo.is_xpu)
        )
    try:
        if issubclass(eager_type(obj), classinfo):
            return True
    except TypeError:  # classinfo that only checks instances (a data protocol): ask the value itself
        pass
    # Thunder's own classes (``TensorProxy``, ``SymInt``) still answer for themselves.
    return isinstance(obj, classinfo)


def _instance_check(obj, classinfo) -> bool:
    """``isinstance`` with a metaclass's Python ``__instancecheck__`` (a runtime-checkable Protocol's, a user's)
    called as the program would: run natively, what it read went unchecked and a cached trace kept its answer."""
    if type(classinfo) is tuple:
        return any(_instance_check(obj, c) for c in classinfo)
    check = lookup_type_attr(type(classinfo), "__instancecheck__")
    ctx = current_runtime()
    if type(check) is not types.FunctionType or type(obj) is classinfo or ctx is None:
        return isinstance(obj, classinfo)
    return _interpreter_truth(ctx, _interpreter_call(ctx, check.__get__(classinfo), (obj,)))


# --- attributes --------------------------------------------------------------------------------


def _check_visible(obj: Any, name: str) -> None:
    """Raises eager's AttributeError for an attribute the proxy has but eager's value lacks."""
    if not isinstance(name, str) or name.startswith("__"):
        return
    et = eager_type(obj)
    if et is type(obj) or hasattr(et, name):
        return
    if not hasattr(type(obj), name) and name not in getattr(obj, "__dict__", ()):
        return  # not the proxy's own: the input tensor's (``proxies.attribute_reader``)
    raise AttributeError(f"'{et.__name__}' object has no attribute '{name}'")


# Attributes of torch.Tensor that a TensorProxy has too, with another meaning: what eager reads.
_TENSOR_ATTRIBUTE_VALUES = {"name": None}


def proxy_attribute(obj: Any, name: str, value: Any) -> Any:
    """What traced code sees for ``obj.name`` when ``obj`` is a traced value (``value`` is what was loaded)."""
    if not _is_traced(obj):
        return value
    if name == "__class__":
        return eager_type(obj)
    if isinstance(obj, TensorProxy) and name in _TENSOR_ATTRIBUTE_VALUES:
        return _TENSOR_ATTRIBUTE_VALUES[name]
    _check_visible(obj, name)
    return value


def _load_attr(obj: Any, name: str) -> Any:
    """``obj.name`` as the interpreted program's LOAD_ATTR does it (properties interpreted, the tracer told)."""
    ctx = current_runtime()
    if ctx is None or not isinstance(name, str):
        return getattr(obj, name)
    value = _interpreter_load_attr(ctx, obj, name)
    cb = ctx.cb_load_attr
    return cb(obj, name, value) if cb is not None else value


def _getattr(obj, name, *default):
    if len(default) > 1:
        raise TypeError(f"getattr expected at most 3 arguments, got {2 + len(default)}")
    if not isinstance(name, str):
        raise TypeError(f"attribute name must be string, not '{type(name).__name__}'")
    if not default:
        return _load_attr(obj, name)
    try:
        return _load_attr(obj, name)
    except AttributeError:
        return default[0]


def _hasattr(obj, name, /) -> bool:
    if not isinstance(name, str):
        raise TypeError(f"attribute name must be string, not '{type(name).__name__}'")
    try:
        _load_attr(obj, name)
    except AttributeError:
        return False
    except UnsupportedOpError:
        # A Tensor attribute thunder does not implement yet: eager has it. Using it fails clearly.
        if isinstance(obj, TensorProxy) and hasattr(eager_type(obj), name):
            return True
        raise
    return True


def _len(obj, /):
    if isinstance(obj, TensorProxy):
        return obj.__len__()  # a symbolic dim stays symbolic (native len() would read its value)
    return len(obj)


def _tensor_query(fn: Callable, method: str) -> Callable:
    """``torch.is_floating_point(t)`` and friends: answered from the proxy's metadata, like the method."""

    def call(*args, **kwargs):
        t = args[0] if args else kwargs.get("input")  # torch.is_floating_point(input=t) too
        if isinstance(t, TensorProxy):
            rest = {k: v for k, v in kwargs.items() if k != "input"} if not args else kwargs
            return getattr(t, method)(*args[1:], **rest)
        return fn(*args, **kwargs)

    call.__name__ = fn.__name__
    call.__wrapped__ = fn
    return call


def _result_type(*args, **kwargs):
    """``torch.result_type(t, 2.5)``: eager's answer for stand-ins with the proxies' dtype and the same zero or
    non-zero dims (all the promotion reads), and for numbers of the same Python type."""

    def stand_in(x):
        if isinstance(x, TensorProxy):
            return torch.empty((1,) * min(x.ndim, 1), dtype=x.dtype, device="meta")
        if isinstance(x, NumberProxy):
            return x.python_type(x.value)
        return x

    return torch.result_type(*map(stand_in, args), **{k: stand_in(v) for k, v in kwargs.items()})


_TENSOR_QUERIES = {
    torch.is_floating_point: "is_floating_point",
    torch.is_complex: "is_complex",
    torch.is_signed: "is_signed",
    torch.numel: "numel",
}


# --- symbolic numbers read natively ------------------------------------------------------------


def _pin(x: Any) -> Any:
    """The plain value of a symbolic number, or a slice with plain bounds (recording the constraints), a list,
    tuple, shape or dict holding them with them pinned, anything else unchanged."""
    typ = type(x)
    if typ is SymInt or typ is slice:
        return pin_index(x)
    if typ is SymFloat:
        return x.__float__()
    if (typ is list or typ is tuple or typ is torch.Size or typ is SymbolicSize) and _is_symbolic_argument(x):
        return (torch.Size if typ is SymbolicSize else typ)(map(_pin, x))
    if typ is dict and _is_symbolic_argument(x):
        return {k: _pin(v) for k, v in x.items()}
    return x


def _is_symbolic_argument(x: Any) -> bool:
    typ = type(x)
    if typ is list or typ is tuple or typ is torch.Size or typ is SymbolicSize:
        return any(map(_is_symbolic_argument, x))
    if typ is dict:
        return any(map(_is_symbolic_argument, x.values()))
    return typ in (SymInt, SymFloat) or (typ is slice and any(type(v) is SymInt for v in (x.start, x.stop, x.step)))


def _has_symbolic(args: tuple, kwargs: dict | None) -> bool:
    return any(map(_is_symbolic_argument, args)) or bool(kwargs and any(map(_is_symbolic_argument, kwargs.values())))


def _pinning(fn: Callable, first: int = 0) -> Callable:
    """``fn`` called with its symbolic arguments from position ``first`` on concretised."""

    def call(*args, **kwargs):
        if _has_symbolic(args, kwargs):
            args = args[:first] + tuple(_pin(a) for a in args[first:])
            kwargs = {k: _pin(v) for k, v in kwargs.items()}
        return fn(*args, **kwargs)

    call.__name__ = plain_attribute(fn, "__name__", "call")
    call.__wrapped__ = fn
    return call


# Types whose C methods read int arguments natively (indices, widths, counts).
_SEQUENCE_TYPES = (str, bytes, bytearray, list, tuple, range, memoryview)
# Methods of these that only read: concretising their int arguments is safe. (Mutating methods of
# lists are left to the tracer, which reports mutations of outside containers.)
_READING_METHODS = frozenset({"__getitem__", "index", "count", "__mul__", "__rmul__"})
# Libraries whose native callables (functions, types, methods of their objects) read ints natively.
_NATIVE_NUMBER_MODULES = frozenset({"numpy", "array", "decimal", "_decimal", "json", "_json", "datetime"})
# Methods of the program's own lists and deques whose first argument is a position (the index methods that only
# read are looked aside earlier, with ``_READING_METHODS``; an outside container's changes are the tracer's).
_POSITION_METHODS = frozenset({"insert", "pop", "__setitem__", "__delitem__", "rotate"})


def _reads_numbers_natively(fn: Callable, owner: Any = None) -> bool:
    module = plain_attribute(fn, "__module__") if owner is None else type(owner).__module__
    return isinstance(module, str) and module.partition(".")[0] in _NATIVE_NUMBER_MODULES


# math functions that reach the number through its methods and keep it symbolic.
_MATH_SYMBOLIC = frozenset({"floor", "ceil", "trunc", "prod"})


def _math_call(fn: Callable) -> Callable:
    """``fn(x)`` of a symbolic number as ``sym_math`` makes it (Note [math functions of symbolic numbers] in
    ``symbolic``); any other call with its symbolic arguments pinned."""
    pinning = _pinning(fn)

    def call(*args, **kwargs):
        if len(args) == 1 and not kwargs and type(args[0]) in (SymInt, SymFloat):
            return sym_math(fn, args[0])
        return pinning(*args, **kwargs)

    call.__name__ = fn.__name__
    call.__wrapped__ = fn
    return call


def _native_consumers() -> dict[Callable, Callable]:
    table: dict[Callable, Callable] = {}
    # (Not ``slice``: a slice keeps the number, and slicing a tensor with it stays symbolic.)
    for fn in (builtins.range, builtins.chr, builtins.hex, builtins.oct, builtins.bin, builtins.bytes,
               builtins.bytearray, builtins.enumerate, operator.index, struct.pack, struct.pack_into,
               struct.Struct.pack, pickle.dumps, pickle.dump,
               operator.itemgetter, operator.methodcaller):  # (their objects index natively when called)  # fmt: skip
        table[fn] = _pinning(fn)
    pinning_pow = _pinning(builtins.pow)
    # ``pow(a, n, m)`` computes natively; ``pow(a, n)`` goes through the numbers' ``__pow__``, symbolic
    table[builtins.pow] = lambda *args, **kwargs: (pinning_pow if len(args) == 3 or kwargs.get("mod") is not None else builtins.pow)(*args, **kwargs)
    for name, fn in vars(math).items():
        if callable(fn) and not name.startswith("_") and name not in _MATH_SYMBOLIC:
            table[fn] = _math_call(fn) if fn in MATH_DOMAINS else _pinning(fn)
    # ``fsum`` reads each item's double natively (a SymFloat is a float): pinned one by one, an iterator's too
    table[math.fsum] = lambda iterable, /: math.fsum(map(_pin, iterable))
    for name, fn in vars(itertools).items():
        if callable(fn) and not name.startswith("_"):
            table[fn] = _pinning(fn)
    for fn in (operator.getitem, operator.indexOf, operator.countOf):
        table[fn] = _sequence_pinning(fn)
    return table


# Note [sum of symbolic numbers]
# ``sum`` adds exact ints in C longs and exact floats in C doubles, compensated (Neumaier) from 3.12; an int added to
# a float sum is read natively. A SymInt or SymFloat is neither exact type: native ``sum`` added it with ``+``, so a
# float sum was not compensated (one ulp from eager's on 3.12+) and an int added to a float sum was read natively
# (``sum([0.5, n])``: specialised on ``n``, unguarded). ``_sum`` runs CPython's algorithm (``builtin_sum_impl``) in
# Python, a symbolic number taking its plain type's path, its additions made as the interpreted program's (a number
# that operator reads natively pinned, as in the program) and its comparisons recorded; an int added to a float
# sum is added as ``n + total`` (the same double), which keeps it symbolic. Whether the compensation
# is finite is asked as ``c - c == 0`` (``math.isfinite`` would pin it). Sums past a C long fall back to ``+`` as
# CPython's do (bounds of a 64-bit long).
_COMPENSATED_SUM = sys.version_info >= (3, 12)
_PLAIN_NUMBERS = (int, float, bool, complex)
_LONG_MIN, _LONG_MAX = -(1 << 63), (1 << 63) - 1


def _is_float(v: Any) -> bool:
    return type(v) is float or type(v) is SymFloat


def _in_long(v: Any) -> bool:
    return type(v) is SymInt or _LONG_MIN <= v <= _LONG_MAX


def _sum(iterable, /, start=0):
    """``sum`` as CPython computes it, symbolic numbers taking the paths of the plain numbers they stand for (Note
    [sum of symbolic numbers])."""
    if type(iterable) in (list, tuple) and all(type(v) in _PLAIN_NUMBERS for v in (start, *iterable)):
        return builtins.sum(iterable, start)  # (objects of the user's: their dunders run interpreted, below)
    ctx = current_runtime()
    if ctx is None or isinstance(start, (str, bytes, bytearray)):
        return builtins.sum(iterable, start)  # (strings: eager's TypeError)

    def add(a, b):
        if read_natively_by_operator(a, b):
            pin(b)  # as the program's ``a + b`` (``0j + n``)
        return _interpreter_binary_op(ctx, "+", a, b)

    it = iter(iterable)
    result = start
    if (type(result) is int or type(result) is SymInt) and _in_long(result):
        for item in it:
            exact = type(item) in (int, bool, SymInt) and _in_long(item)
            result = add(result, item)
            if not (exact and _in_long(result)):
                break
        else:
            return result
    if _is_float(result):
        total, c = result, 0.0
        for item in it:
            if _is_float(item):
                t = add(total, item)
                if _COMPENSATED_SUM:
                    if abs(total) >= abs(item):
                        c = add(c, add(_interpreter_binary_op(ctx, "-", total, t), item))
                    else:
                        c = add(c, add(_interpreter_binary_op(ctx, "-", item, t), total))
                total = t
            elif isinstance(item, int) and _in_long(item):
                total = add(item, total)  # the same double; ``n + 0.5`` stays symbolic
            else:
                result = add(_compensated(ctx, total, c), item)
                break
        else:
            return _compensated(ctx, total, c)
    for item in it:
        result = add(result, item)
    return result


def _compensated(ctx, total, c):
    if c and _interpreter_binary_op(ctx, "-", c, c) == 0:
        return _interpreter_binary_op(ctx, "+", total, c)
    return total


def _sequence_pinning(fn: Callable) -> Callable:
    """``operator.getitem`` and friends: concretise the index only when the container is a builtin sequence."""

    def call(container, *args):
        if isinstance(container, _SEQUENCE_TYPES) and _has_symbolic(args, None):
            args = tuple(_pin(a) for a in args)
        return fn(container, *args)

    call.__name__ = fn.__name__
    call.__wrapped__ = fn
    return call


def _builtin_method_lookaside(fn: Callable) -> Callable | None:
    """A bound C method of a builtin sequence (``"ab".ljust(n)``, ``(1, 2)[n]`` spelled as a call)."""
    owner = fn.__self__
    if isinstance(owner, (str, bytes)) or (isinstance(owner, _SEQUENCE_TYPES) and fn.__name__ in _READING_METHODS):
        return _pinning(fn)
    return None


# --- unbound methods -----------------------------------------------------------------------------


def _numeric_method(fn: Callable) -> Callable:
    """``int.bit_length(n)``, ``float.is_integer(x)``, ``int.__add__(n, 1)``: a symbolic receiver uses its
    own method; a plain receiver gets its other symbolic arguments concretised (the method reads them
    natively)."""
    name = fn.__name__

    def call(*args, **kwargs):
        if args and type(args[0]) in (SymInt, SymFloat):
            return getattr(type(args[0]), name)(*args, **kwargs)
        if _has_symbolic(args, kwargs):
            return fn(*(_pin(a) for a in args), **{k: _pin(v) for k, v in kwargs.items()})
        return fn(*args, **kwargs)

    call.__name__ = name
    call.__wrapped__ = fn
    return call


def _tensor_method(fn: Callable, name: str) -> Callable:
    """``torch.Tensor.<name>(x, ...)`` with a traced ``x``: the bound method of the proxy, as in eager."""

    def call(*args, **kwargs):
        if args and isinstance(args[0], TensorProxy):
            return getattr(args[0], name)(*args[1:], **kwargs)
        return fn(*args, **kwargs)

    call.__name__ = name
    call.__wrapped__ = fn
    return call


_tensor_method_names: dict[int, tuple[Any, str]] | None = None


def _tensor_method_name(fn: Callable) -> str | None:
    """The name under which ``torch.Tensor`` exposes ``fn`` (one TensorProxy implements, for aliases
    such as ``__rtruediv__``/``__rdiv__``), or None."""
    global _tensor_method_names
    if _tensor_method_names is None:
        names: dict[int, tuple[Any, str]] = {}
        for name in dir(torch.Tensor):
            try:
                attr = getattr(torch.Tensor, name)
            except Exception:  # a Tensor attribute whose lookup fails
                continue
            if not callable(attr) or isinstance(attr, type):
                continue
            known = names.get(id(attr))
            if known is None or (not hasattr(TensorProxy, known[1]) and hasattr(TensorProxy, name)):
                names[id(attr)] = (attr, name)
        _tensor_method_names = names
    entry = _tensor_method_names.get(id(fn))
    return entry[1] if entry is not None and entry[0] is fn else None


def _unbound_method_lookaside(fn: Callable) -> Callable | None:
    objclass = plain_attribute(fn, "__objclass__")
    if objclass is int or objclass is float:
        return _numeric_method(fn)
    if objclass in _SEQUENCE_TYPES:
        if objclass in (str, bytes) or fn.__name__ in _READING_METHODS:
            return _pinning(fn, first=1)
        return None
    if objclass is not None and not issubclass(torch.Tensor, objclass):
        return None
    name = _tensor_method_name(fn)
    if name is None:
        return None
    if symbol_for(fn) is not None:  # the tracer maps it to its symbol
        return None
    return _tensor_method(fn, name)


# Note [torch.optim's numbers under thunder]
# Told it is being compiled, torch.optim takes the path written for torch.compile, which keeps its step counts and
# other per-parameter numbers (NAdam's ``mu_product``, ASGD's ``eta``) as tensors: ``_get_value(step)`` returns the
# float32 tensor and ``_stack_if_compiling`` stacks the step sizes, so Adam's bias corrections ``1 - beta1 ** step``
# were float32 tensor ops, where eager (not capturable, the step on the CPU) takes ``step.item()`` and computes them
# in Python's doubles (after 8 Adam steps the parameters were ~2e-6 from eager's, and 20 AdamW steps 12x further from
# a float64 run than eager's); a foreach SGD with a tensor learning rate multiplied then added (two roundings) where
# eager adds with ``alpha`` (one); a capturable optimizer on the CPU skipped the device check that refuses it.
# thunder traces eager's path as it is: each ``t.item()`` is a data-dependent number that turns symbolic once it
# changed (Note [Symbolic data-dependent sizes] in thunder.core.data_dependent: a step count compiles twice, not once
# per step), and the bias corrections are expressions that the computation evaluates in Python's doubles (Note
# [Symbolic float powers] in thunder.core.symbolic). So code of torch.optim's modules is told that it is not being
# compiled, and gets eager's numbers and errors.
_EAGER_PATH_MODULES = ("torch.optim.",)


def _compiling() -> bool:
    caller = next(innermost_frame_objects(), None)
    module = caller.globals.get("__name__") if caller is not None else None
    return not (type(module) is str and module.startswith(_EAGER_PATH_MODULES))


def _compiling_queries() -> dict:
    """``torch.compiler.is_compiling()`` and its aliases answer True to traced code, as under
    torch.compile: code that asks (transformers before its data-dependent shortcuts, torch.nn's fast
    paths) takes the path written for compilers; but torch.optim, which then computes other numbers than eager's
    (Note [torch.optim's numbers under thunder]). The answer is the same on every call from one place, so nothing is
    guarded."""
    import torch._utils

    queries = [torch.compiler.is_compiling, torch.compiler.is_dynamo_compiling, torch._utils.is_compiling]
    dynamo = sys.modules.get("torch._dynamo")  # importing it costs seconds; if loaded, its alias too
    if dynamo is not None:
        queries.append(dynamo.is_compiling)
    return dict.fromkeys(queries, _compiling)


def _min_max(fn: Callable, symbolic: Callable) -> Callable:
    """``max(a, b, ...)``/``min`` of ints, one of them symbolic: ``sym_max``/``sym_min``'s (Note [Guard-free min
    and max] in ``symbolic``); any other call as the interpreter makes it."""

    def lookaside(*args, **kwargs):
        if not kwargs and len(args) > 1 and any(type(a) is SymInt for a in args):
            if all(type(a) in (int, SymInt) for a in args):
                return symbolic(*args)
        return _interpreter_default_lookaside(fn)(current_runtime(), args, kwargs)

    return lookaside


def _operator_lookasides() -> dict[Callable, Callable]:
    """``operator.add(a, b)``, ``operator.lt(a, b)``, ``operator.iadd(a, b)``, ...: run as the program's ``a + b``
    (its dispatch interpreted), with a symbolic ``b`` that the left operand's builtin slot reads natively pinned as
    there (``operator.add(True, n)``, ``operator.pow(2.5, n)``: ``read_natively_by_operator``). Called natively,
    the slot read ``n``'s value unrecorded and the cached trace kept its first result."""

    def make(run, sym: str, fn: Callable) -> Callable:
        def lookaside(*args, **kwargs):
            if kwargs or len(args) != 2:
                return fn(*args, **kwargs)  # eager's TypeError
            # (the interpreter gave a C function stand-ins of objects with Python dunders: binary_op interprets them)
            a, b = map(stood_for, args)
            if read_natively_by_operator(a, b):
                pin(b)  # records ``n == value``, checked by the prologue
            return run(current_runtime(), sym, a, b)

        return lookaside

    return {
        **{fn: make(_interpreter_binary_op, sym, fn) for sym, (fn, *_) in (*BINARY_OPS.items(), *INPLACE_OPS.items())},
        **{fn: make(_interpreter_compare_op, sym, fn) for sym, (fn, *_) in COMPARE_OPS.items()},
    }


# --- the table -----------------------------------------------------------------------------------

_LOOKASIDES: dict[Callable, Callable] = {
    builtins.type: _type,
    builtins.isinstance: _isinstance,
    builtins.getattr: _getattr,
    builtins.hasattr: _hasattr,
    builtins.len: _len,
    builtins.sum: _sum,
    builtins.max: _min_max(builtins.max, sym_max),
    builtins.min: _min_max(builtins.min, sym_min),
    **{fn: _tensor_query(fn, method) for fn, method in _TENSOR_QUERIES.items()},
    torch.result_type: _result_type,
    **_native_consumers(),
    **_operator_lookasides(),
    **_compiling_queries(),
}
# Unbound methods (descriptors, and torch.Tensor's Python-defined methods) -> replacement or None.
_unbound_cache: dict[Callable, Callable | None] = {}
_DESCRIPTOR_TYPES = (types.MethodDescriptorType, types.WrapperDescriptorType)


def lookaside(fn: Callable) -> Callable | None:
    """The replacement for ``fn`` when traced code calls it, or None."""
    try:
        found = _LOOKASIDES.get(fn)
    except TypeError:  # unhashable callable
        return None
    if found is not None:
        return found
    typ = type(fn)
    if typ is types.BuiltinMethodType or typ is types.MethodWrapperType:
        owner = type(bound_self(fn))  # Note [Type checks of the program's objects while tracing] in special_calls
        if issubclass(owner, _SEQUENCE_TYPES):
            return _builtin_method_lookaside(fn)
        if owner is slice:  # ``s.indices(n)`` reads the bounds natively
            return lambda *args: getattr(pin_index(fn.__self__), fn.__name__)(*map(pin_index, args))
        return None
    if typ in _DESCRIPTOR_TYPES or (typ is types.FunctionType and _tensor_method_name(fn) is not None):
        replacement = _unbound_cache.get(fn, _unbound_cache)
        if replacement is _unbound_cache:
            replacement = _unbound_cache[fn] = _unbound_method_lookaside(fn)
        return replacement
    return None


def native_number_reader(fn: Callable) -> Callable | None:
    """``fn`` with its symbolic numbers pinned when it is a native callable of a library whose native code reads
    ints (``_NATIVE_NUMBER_MODULES``), else None (asked last: after the tracer's own handling of randomness)."""
    if type(fn) is types.FunctionType:
        return None
    owner = bound_self(fn)
    if _reads_numbers_natively(fn) or (owner is not None and _reads_numbers_natively(fn, owner)):
        return _pinning(fn)
    if fn is collections.deque:
        return _pinning(fn)  # deque(it, maxlen=n)
    if isinstance(owner, (list, bytearray, collections.deque)) and plain_attribute(fn, "__name__") in _POSITION_METHODS:

        def call(*args, **kwargs):
            return fn(*(_pin(args[0]), *args[1:]) if args else args, **kwargs)

        return call
    return None
