"""The machinery of the torch language: the torch-callable -> symbol table, tensor methods,
in-place twins, and the broadcasting/conversion helpers every family uses.

Note [The torch language]
Each supported torch function, Tensor method and ``torch.nn.functional`` function has one
symbol here, declared with ``@torchsymbol(torch.fn, ..., method_name=...)``. The decorated
Python function is the symbol's meta: it validates the call with PyTorch's semantics
(broadcasting, type promotion, defaults) and decomposes it into prims and other symbols;
those calls become the bound symbol's subsymbols. Executors may run the symbol directly
(the torch executor calls the same torch function, so results match eager exactly) or run
its decomposition. ``torch_to_thunder_map`` is what the tracer's lookaside consults.

Layer: language. Imports: core.
"""

from __future__ import annotations

import importlib
import inspect
import operator
import sys
import types
from collections.abc import Callable, Sequence
from numbers import Number
from typing import Any

import torch
from torch.overrides import resolve_name

from thunder.core import dtypes, prims
from thunder.core import proxies as _proxies
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.interpreter.protocols import index as interpreted_index
from thunder.core.interpreter.runtime import current_runtime
from thunder.core.introspection import eager_type
from thunder.core.prims.shape import broadcast_shapes
from thunder.core.proxies import NumberProxy, Proxy, TensorProxy, register_method
from thunder.core.symbol import DONT_DCE, IN_PLACE, Symbol
from thunder.core.symbolic import is_symbolic

# torch callable -> thunder symbol. Keys are the objects the user's code calls.
torch_to_thunder_map: dict[Callable, Symbol] = {}
# symbol (by identity) -> the torch callable with the same signature (for the torch executor).
symbol_to_torch: dict[Symbol, Callable] = {}
# symbol id -> symbol, for registrations that name a symbol by id (``"torch.sin"``); the torch
# path of each torch callable a symbol stands for (``"torch.nn.functional.gelu"``) is an alias.
symbols_by_id: dict[str, Symbol] = {}
# name of an out-of-place symbol -> its in-place twin (``add`` -> ``add_``)
inplace_twins: dict[str, Symbol] = {}

# numpy's names that torch's argument parser accepts for its own (``torch.sum(x, axis=0)``)
_NUMPY_NAMES = {"x": "input", "a": "input", "x1": "input", "x2": "other", "axis": "dim", "keepdims": "keepdim"}


class _TorchBinding:
    """A call's arguments as torch binds them. Translates the keyword names a torch function accepts (its schema's
    ``input``, ``other``, ...; numpy's ``axis``, ``keepdims``) into those of the meta standing for it, which may
    differ (``a``, ``b``), so that ``torch.sub(x, other=y)`` binds as in eager (built on the first call that needs
    it); for an op taking ``sizes``, a 0-d integer tensor among them is read as an int, as eager's ``__index__``
    reads it (``x.view(n, torch.div(m, 2, rounding_mode="trunc"))``: a data-dependent value, checked per call)."""

    def __init__(self, meta: Callable, torch_fns: Sequence[Callable], sizes: bool = False, numbers: bool = False):
        self._meta, self._torch_fns, self._sizes, self._numbers = meta, torch_fns, sizes, numbers
        self._params: frozenset[str] | None = None
        self._positional: list[str] = []
        self._to_meta: dict[str, str] = {}
        self._int_params: tuple[set, set, int] | None = None

    def __call__(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        if _holds_index_object(args) or (kwargs and _holds_index_object(kwargs.values())):
            args, kwargs = self._read_indices(args, kwargs)
        if self._numbers:  # ``torch.arange(mask.sum())``: eager reads a 0-d tensor's value
            args = tuple(_number_of(a) for a in args)
            kwargs = {k: _number_of(v) if k in ("start", "end", "step") else v for k, v in kwargs.items()}
        if self._sizes:  # the first argument (``input``) is the tensor the sizes are for
            args = (*args[:1], *_sizes_as_ints(args[1:]))
            kwargs = {k: v if k in ("input", "self", "a") else _sizes_as_ints(v) for k, v in kwargs.items()}
        if not kwargs:
            return args, kwargs
        if self._params is None:
            self._build()
        if all(k in self._params for k in kwargs):
            return args, kwargs
        named: dict = {}
        for key, value in kwargs.items():
            name = key
            if key not in self._params:
                torch_name = _NUMPY_NAMES.get(key, key)
                name = torch_name if torch_name in self._params else self._to_meta.get(torch_name, key)
            if name in named:
                raise ThunderTypeError(f"{self._meta.__name__}() got multiple values for argument {name!r}")
            named[name] = value
        # the meta's positional parameters given by name are passed by position: the torch function the
        # torch executor calls knows them by torch's names, not the meta's
        while len(args) < len(self._positional) and self._positional[len(args)] in named:
            args = (*args, named.pop(self._positional[len(args)]))
        return args, named

    def _read_indices(self, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
        """The objects with a Python ``__index__`` among the arguments read as ints where eager's argument parser
        reads them so: an ``int`` or ``int[]`` of some overload's schema (a list's items, varargs sizes), an index
        key's items and slice bounds. Elsewhere (a tensor, a number) eager refuses them, and so does the symbol."""
        if self._meta.__name__ in ("getitem", "setitem"):
            return (args[0], _read_key(args[1]), *args[2:]), kwargs
        if self._int_params is None:
            self._int_params = _int_parameters(self._torch_fns, self._meta.__name__)
        ints, lists, varargs_from = self._int_params
        args = tuple(
            _read_list(a) if i in lists or i >= varargs_from else _read_index(a) if i in ints else a
            for i, a in enumerate(args)
        )
        kwargs = {k: _read_index(v) if k in ints else _read_list(v) if k in lists else v for k, v in kwargs.items()}
        return args, kwargs

    def _build(self) -> None:
        params = inspect.signature(self._meta).parameters
        positional = [n for n, p in params.items() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        # A torch name found at one position in every overload that has it stands for the meta's argument there:
        # overloads may name a position differently (tensor_split's ``sections``, ``indices``, ...).
        at: dict[str, set[int]] = {}
        for names in self._torch_positional_names():
            for index, torch_name in enumerate(names):
                at.setdefault(torch_name, set()).add(index)
        for torch_name, indices in at.items():
            if len(indices) == 1 and min(indices) < len(positional) and torch_name not in params:
                self._to_meta[torch_name] = positional[min(indices)]
        self._params, self._positional = frozenset(params), positional

    def _torch_positional_names(self) -> list[list[str]]:
        """The positional argument names of each of the torch functions' overloads: from their ATen schemas (``self``
        read as ``input``), or a Python function's signature."""
        lists = []
        for fn in self._torch_fns:
            packet = getattr(torch.ops.aten, getattr(fn, "__name__", ""), None)
            if isinstance(packet, torch._ops.OpOverloadPacket):
                for overload in packet.overloads():
                    arguments = getattr(packet, overload)._schema.arguments
                    takes_tensors = any("Tensor" in str(a.type) for a in arguments)  # not TorchScript's scalar forms
                    if takes_tensors and not any(a.name == "out" for a in arguments):
                        lists.append(["input" if a.name == "self" else a.name for a in arguments if not a.kwarg_only])
            elif inspect.isfunction(fn):
                sig = inspect.signature(fn).parameters.values()
                lists.append([p.name for p in sig if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])
        return lists or [["input"]]  # a torch builtin without a schema: its first argument is ``input``


_NO_INDEX = (int, float, str, type(None), Proxy, torch.dtype, torch.device)  # (the common arguments: a fast no)


def _has_python_index(x: Any) -> bool:
    return not isinstance(x, _NO_INDEX) and type(getattr(type(x), "__index__", None)) is types.FunctionType


def _holds_index_object(values) -> bool:
    for v in values:
        if isinstance(v, _NO_INDEX):
            continue
        if type(v) in (list, tuple):
            for x in v:
                if _has_python_index(x) or (type(x) is slice and _holds_index_object((x.start, x.stop, x.step))):
                    return True
        elif _has_python_index(v) or (type(v) is slice and _holds_index_object((v.start, v.stop, v.step))):
            return True
    return False


def _read_index(x: Any) -> Any:
    """``operator.index(x)`` for an object whose ``__index__`` is Python code, run by the interpreter when one is
    tracing (what it reads is then checked on later calls, as any read of the program's)."""
    if not _has_python_index(x):
        return x
    ctx = current_runtime()
    return interpreted_index(ctx, x) if ctx is not None else operator.index(x)


def _read_list(x: Any) -> Any:
    return type(x)(map(_read_index, x)) if type(x) in (list, tuple) else _read_index(x)


def _read_key(key: Any) -> Any:
    if type(key) is tuple:
        return tuple(map(_read_key, key))
    if type(key) is slice:
        return slice(_read_index(key.start), _read_index(key.stop), _read_index(key.step))
    return _read_index(key)


def _int_parameters(torch_fns: Sequence[Callable], meta_name: str) -> tuple[set, set, int]:
    """Which parameters (positions and names) of the ATen schemas of ``torch_fns`` (or of the op named as the meta)
    are ints, which int lists, and the position from which varargs sizes are ints (``x.reshape(n, -1)``)."""
    ints: set = set()
    lists: set = set()
    varargs_from = 1 << 30
    names = [getattr(fn, "__name__", "") for fn in torch_fns] or [meta_name]
    for name in names:
        packet = getattr(torch.ops.aten, name, None)
        if not isinstance(packet, torch._ops.OpOverloadPacket):
            continue
        for overload in packet.overloads():
            arguments = getattr(packet, overload)._schema.arguments
            if not any("Tensor" in str(a.type) or "List[int]" in str(a.type) for a in arguments):
                continue  # TorchScript's forms over Python numbers (``add.int``), which Python's torch.add has not
            positional = 0
            for a in arguments:
                kind = str(a.type)
                kind = kind[len("Optional[") : -1] if kind.startswith("Optional[") else kind
                keys = (a.name,) if a.kwarg_only else (a.name, positional)
                if kind == "int":
                    ints.update(keys)
                elif kind == "List[int]":
                    lists.update(keys)
                    if not a.kwarg_only:
                        varargs_from = min(varargs_from, positional)
                positional += 0 if a.kwarg_only else 1
    return ints, lists, varargs_from


def _sizes_as_ints(x):
    """``x`` (an argument, or a sequence of them) with each 0-d integer tensor read as an int."""
    if isinstance(x, TensorProxy) and x.ndim == 0 and dtypes.is_nonboolean_integer_dtype(x.dtype):
        return int(x)
    if type(x) in (tuple, list) and any(isinstance(v, TensorProxy) for v in x):
        return type(x)(_sizes_as_ints(v) for v in x)
    return x


def _number_of(x):
    """A 0-d integer or floating tensor read as the Python number it holds (a data-dependent value, checked per
    call), as eager's argument parser reads it for a ``Scalar``; anything else as it is."""
    if isinstance(x, TensorProxy) and x.ndim == 0 and x.dtype is not torch.bool:
        if dtypes.is_nonboolean_integer_dtype(x.dtype):
            return int(x)
        if dtypes.is_float_dtype(x.dtype):
            return float(x)
    return x


def torchsymbol(
    *torch_fns: Callable,
    method_name: str | Sequence[str] | None = None,
    id: str | None = None,
    tags: Sequence[str] = (),
    torch_impl: Callable | None = None,
    sizes: bool = False,
    numbers: bool = False,
    one_sequence: str | None = None,
):
    """Declares a torch-language symbol whose decomposition is the decorated function.

    ``torch_fns`` are the torch callables it stands for; ``method_name`` the ``Tensor``
    method(s) and operator dunders it installs on proxies; ``torch_impl`` what the torch
    executor runs (default: the first of ``torch_fns``, called with the same arguments); ``sizes``: its
    arguments are sizes, which eager also takes as 0-d integer tensors (``_TorchBinding``); ``numbers``: its number
    arguments may be 0-d tensors, whose values eager reads; ``one_sequence``: the name of the sequence that the
    method takes as varargs too but the torch functions only as one sequence (Note [Varargs of a method only]).
    """

    def deco(fn: Callable) -> Symbol:
        sym = Symbol(
            name=fn.__name__,
            meta=fn,
            id=id or f"torch.{fn.__name__}",
            module=importlib.import_module("thunder.torch"),
            module_alias="ltorch",
            tags=frozenset(tags),
        )
        sym.__doc__ = fn.__doc__
        sym.binding = _TorchBinding(fn, torch_fns, sizes, numbers)
        symbols_by_id[sym.id] = sym
        for tfn in torch_fns:
            torch_to_thunder_map[tfn] = sym if one_sequence is None else _one_sequence_form(sym, tfn, one_sequence)
            path = resolve_name(tfn)
            if path is not None:
                symbols_by_id.setdefault(path, sym)
        impl = torch_impl or (torch_fns[0] if torch_fns else None)
        if impl is not None:
            symbol_to_torch[sym] = impl
        names = [method_name] if isinstance(method_name, str) else list(method_name or ())
        for name in names:
            register_method(name, _as_method(sym, name))
            tensor_attr = getattr(torch.Tensor, name, None)
            if tensor_attr is not None:
                torch_to_thunder_map[tensor_attr] = sym
        return sym

    return deco


# Note [Varargs of a method only]
# ``x.reshape(2, 3)``, ``x.permute(1, 0)``, ``x.flip(0)``, ``x.tile(2)``, ``x.broadcast_to(2, 3)``: the methods take
# their sizes or dims as varargs or as one sequence, the torch functions of the same names only as one sequence
# (``torch.reshape(x, 6)`` is eager's TypeError). One symbol stands for both and its meta takes both forms; the
# function is mapped to a thin checker in front of it, which refuses what eager's argument parser refuses for the
# function (more positional arguments than its schema's, or one that is no tuple or list) and then calls the
# symbol, so traces name the same symbol whichever form the program used.


def _one_sequence_form(sym: Symbol, torch_fn: Callable, name: str) -> Callable:
    """``torch_fn(input, <name>)`` as eager's parser checks it, then ``sym``: Note [Varargs of a method only]."""
    fn_name = getattr(torch_fn, "__name__", sym.name)

    def function(*args, **kwargs):
        if len(args) > 2:
            problem = f"torch.{fn_name}() takes 2 positional arguments but {len(args)} were given"
        elif len(args) == 2 and not isinstance(args[1], (tuple, list)):
            problem = (
                f"torch.{fn_name}(): argument '{name}' (position 2) must be tuple of ints, not "
                f"{_type_name(eager_type(args[1]))}"
            )
        else:
            return sym(*args, **kwargs)
        raise ThunderTypeError(
            f"{problem}: the function takes {name} as one tuple or list, as in eager PyTorch (only the method "
            f"x.{fn_name}(...) takes varargs)"
        )

    function.__name__ = function.__qualname__ = sym.name
    function.__doc__ = sym.__doc__
    return function


def _type_name(typ: type) -> str:
    """A type named as eager's argument parser names it: ``Tensor``, ``int``, ``numpy.int64``."""
    module = typ.__module__
    return typ.__name__ if module in ("builtins", "torch") else f"{module}.{typ.__name__}"


# Note [Operators with an operand torch does not take]
# A tensor's operator dunders (``__eq__``, ``__add__``, ``__rmul__``, ...) turn torch's TypeError for an operand
# that is not a tensor or a number into ``NotImplemented``, so Python goes on as for any object: ``x == None``
# and ``x != "a"`` compare identities (False, True), and ``x * scale`` calls ``type(scale).__rmul__``. The
# proxies' dunders do the same for such operands instead of handing them to the symbol (whose error is clear
# but is not what eager does).
_OPERATOR_DUNDERS = frozenset(
    f"__{p}{op}__"
    for op in "add sub mul truediv floordiv mod pow matmul and or xor lshift rshift".split()
    for p in ("", "r")
) | {"__eq__", "__ne__", "__lt__", "__le__", "__gt__", "__ge__"}


def _is_operand(x: Any) -> bool:
    if isinstance(x, (TensorProxy, torch.Tensor, Number, NumberProxy, torch.SymInt, torch.SymFloat, torch.SymBool)):
        return True
    numpy = sys.modules.get("numpy")  # torch takes NumPy's scalars too (``np.bool_`` is no ``Number``)
    return numpy is not None and isinstance(x, numpy.generic)


# Note [Operators with a NumPy array]
# ``x * array``: torch's ``Tensor.__mul__`` gives way (NotImplemented) to numpy's ``ndarray.__rmul__``, whose ufunc
# computes on ``x.numpy()`` and hands the result back as a tensor (``Tensor.__array_wrap__``): numpy's type promotion
# (an int64 array times a float32 tensor is float64), ``numpy()``'s errors (a tensor that requires grad). ``x +=
# array`` gives way too: ``x = x + array``. Only ``x == array`` is torch's own (the array converted as
# ``torch.as_tensor`` does); ``!=`` and ``<`` get Python's default answers. The proxies' operators do the same with
# torch ops on the array's contents (a constant of the trace: the prologue checks an argument's contents), both
# operands converted to numpy's result dtype; before, numpy's ufunc took the proxy's values (a split of the program
# on them) and its result stayed an ndarray. A bool tensor's results there are numpy's quirks (uint8 sums): refused.
_NUMPY_UFUNC_DUNDERS = frozenset(
    f"__{op}__" for op in "add sub mul truediv floordiv mod pow matmul and or xor lshift rshift".split()
)

_INPLACE_OPERATOR_DUNDERS = frozenset(f"__i{op}__" for op in "add sub mul truediv floordiv mod pow and or xor lshift rshift".split())


def _with_array(sym: Symbol, name: str, a: TensorProxy, array: Any) -> Any:
    """``a <op> array`` as eager computes it (Note [Operators with a NumPy array])."""
    import numpy

    make = torch_to_thunder_map[torch.tensor]
    if name == "__eq__":
        return sym(a, make(array.tolist(), dtype=torch.from_numpy(numpy.empty(0, array.dtype)).dtype))
    if a.requires_grad:
        raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
    if a.device.type != "cpu":
        raise TypeError(
            f"can't convert {a.device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to host memory first."
        )
    if a.dtype is torch.bool:
        raise ThunderTypeError(
            f"{name} of a bool tensor and a NumPy array is not supported by thunder (eager's result comes from numpy): "
            "convert the array with torch.from_numpy (or the tensor with .numpy()) first"
        )
    result = numpy.result_type(torch.empty(0, dtype=a.dtype).numpy().dtype, array.dtype)  # (bfloat16: eager's error)
    if name == "__truediv__" and result.kind in "biu":
        result = numpy.dtype(numpy.float64)
    dtype = torch.from_numpy(numpy.empty(0, result)).dtype
    return sym(a.to(dtype), make(array.tolist(), dtype=dtype))


def _as_method(sym: Symbol, name: str | None = None):
    if name in _OPERATOR_DUNDERS:

        def operator_method(self, other):
            if _is_operand(other):
                return sym(self, other)
            numpy = sys.modules.get("numpy")
            if numpy is not None and type(other) is numpy.ndarray and (name in _NUMPY_UFUNC_DUNDERS or name == "__eq__"):
                return _with_array(sym, name, self, other)
            return NotImplemented

        operator_method.__name__ = sym.name
        return operator_method

    if name in _INPLACE_OPERATOR_DUNDERS:

        def inplace_operator_method(self, other):
            numpy = sys.modules.get("numpy")
            if numpy is not None and type(other) is numpy.ndarray:
                return NotImplemented  # eager's: ``x += array`` is ``x = x + array`` (Note [Operators with a NumPy array])
            return sym(self, other)

        inplace_operator_method.__name__ = sym.name
        return inplace_operator_method

    def method(self, *args, **kwargs):
        return sym(self, *args, **kwargs)

    method.__name__ = sym.name
    return method


def register_reflected(name: str, sym: Symbol) -> None:
    """Installs a reflected operator (``__radd__``): ``b + a`` calls ``sym(b, a)``, and so does the
    unbound ``torch.Tensor.__radd__(a, b)`` (mapped in ``torch_to_thunder_map``)."""

    def method(self, other):
        return sym(other, self) if _is_operand(other) else NotImplemented

    method.__name__ = name
    register_method(name, method)
    tensor_attr = getattr(torch.Tensor, name, None)
    if tensor_attr is not None:
        torch_to_thunder_map.setdefault(tensor_attr, method)


def check_castable(op: str, result: torch.dtype, into: torch.dtype) -> None:
    """Eager's refusal to write a result into a tensor of a dtype it cannot be cast to (an in-place op, ``out=``)."""
    if result != into and not dtypes.can_cast(result, into):
        raise ThunderTypeError(f"{op}: result type {result} can't be cast to the desired output type {into}")


def make_inplace(sym: Symbol, *, torch_fn: Callable | None = None, method_name: str | None = None) -> Symbol:
    """The in-place twin of ``sym`` (``add`` -> ``add_``): computes out of place, then copies into ``a``.

    Its observable effect is eager's: the input tensor is mutated and returned.
    """
    name = method_name or f"{sym.name}_"

    def meta(a, *args, **kwargs):
        out = sym(a, *args, **kwargs)
        if isinstance(out, TensorProxy):
            check_castable(f"ltorch.{name}", out.dtype, a.dtype)
        if isinstance(out, TensorProxy) and out.shape != a.shape:
            raise ThunderValueError(
                f"ltorch.{name}: output with shape {list(a.shape)} doesn't match the broadcast shape {list(out.shape)}"
            )
        return copy_(out, a)

    meta.__name__ = name
    fns = [torch_fn] if torch_fn is not None else []
    tensor_attr = getattr(torch.Tensor, name, None)
    impl = tensor_attr
    twin = torchsymbol(*fns, method_name=name, tags=(IN_PLACE, DONT_DCE), torch_impl=impl)(meta)
    inplace_twins[sym.name] = twin
    return twin


def copy_(src, dst):
    """Copies ``src`` into ``dst`` in place (converting and broadcasting), returns ``dst``."""
    if isinstance(src, TensorProxy) and src.shape != dst.shape:
        src = expand_to(src, dst.shape)
    src = maybe_convert_to_dtype(src, dst.dtype)
    return prims.copy_(src, dst)


# ----------------------------------------------------------------------------------------
# Helpers for decompositions
# ----------------------------------------------------------------------------------------


def is_tensor(x) -> bool:
    return isinstance(x, TensorProxy)


def is_number(x) -> bool:
    return isinstance(x, (Number, NumberProxy)) and not isinstance(x, torch.Tensor)


def expand_to(a: TensorProxy, shape: Sequence[int]) -> TensorProxy:
    """Broadcasts ``a`` to ``shape`` (trailing dims aligned)."""
    shape = tuple(shape)
    if a.shape == shape:
        return a
    offset = len(shape) - a.ndim
    return prims.broadcast_in_dim(a, shape, tuple(range(offset, len(shape))))


def maybe_broadcast(*args, op: str = "broadcast"):
    """Broadcasts the tensors among ``args`` to their common shape; numbers pass through."""
    shapes = [a.shape for a in args if isinstance(a, TensorProxy)]
    if not shapes:
        return args
    common = broadcast_shapes(op, *shapes)
    return tuple(expand_to(a, common) if isinstance(a, TensorProxy) else a for a in args)


def maybe_convert_to_dtype(a, dtype: torch.dtype):
    if isinstance(a, TensorProxy):
        return a if a.dtype == dtype else prims.convert_element_type(a, dtype)
    if is_number(a):
        if is_symbolic(a):
            return a
        typ = dtypes.dtype_to_python_type(dtype)
        value = _proxies.pyval(a)
        # Python scalars keep their own type unless the tensor category is lower (ints into float ops stay exact).
        if typ is bool or isinstance(value, bool):
            return value
        if typ is int and isinstance(value, float):
            return value
        return typ(value) if not isinstance(a, NumberProxy) else a
    return a


def canonicalize_dim(op: str, ndim: int, dim: int) -> int:
    return prims.canonicalize_dim(op, ndim, dim)


def to_dtype(x) -> torch.dtype:
    return dtypes.to_dtype(x)
