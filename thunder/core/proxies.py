"""Proxies: the symbolic values a trace is made of.

A ``TensorProxy`` carries the metadata of a tensor (shape, dtype, device, requires_grad, and for
an input the real strides and storage offset). Tensor methods and Python operators are installed
by the torch language (``thunder.torch``) through ``register_method``, so core knows no specific
op. What a traced tensor answers is eager's answer or a clear error: Note [Shapes are
torch.Size], Note [Strides of traced tensors]; formatting one in the program raises (its values
are not known).

Hooks set by other layers: ``torch_function_handler`` and ``layout_provider`` (the torch
language), ``grad_reader`` and ``attribute_reader`` (the tracer); ``torch_size_lookaside`` is for the tracer to call.

Layer: core. Imports: core.dtypes, core.devices, core.tracectx, core.errors, core.symbolic,
core.pytree, core.interpreter (``make_opaque``, ``is_jitting``).
"""

from __future__ import annotations

import itertools
import math
import os
import sys
from collections.abc import Callable, Sequence
from numbers import Number
from typing import Any

import optree
import torch

from thunder.core import dtypes
from thunder.core.devices import device_str
from thunder.core.errors import ThunderRuntimeError
from thunder.core.interpreter import is_jitting, make_opaque
from thunder.core.pytree import NAMESPACE, add_leaf_type
from thunder.core.symbol_lookup import bound_self, plain_attribute
from thunder.core.symbolic import is_symbolic, pin_index
from thunder.core.tracectx import current_source_location as _source_location
from thunder.core.tracectx import get_tracectx

_fallback_counter = itertools.count(1)  # next() on it is atomic: names stay unique across threads


def make_proxy_name(prefix: str = "t") -> str:
    trace = get_tracectx()
    if trace is not None:
        return trace.make_name(prefix)
    return f"_{prefix}{next(_fallback_counter)}"


class Proxy:
    """A named value in a trace."""

    __slots__ = ("name", "__weakref__")

    def __init__(self, name: str | None = None, prefix: str = "p"):
        trace = get_tracectx()
        if name is None:
            name = make_proxy_name(prefix)
        elif trace is not None:
            trace.add_name(name)
        self.name = name

    def type_string(self) -> str:
        return type(self).__name__

    def __repr__(self) -> str:
        return self.name

    def replace_name(self, name: str) -> Proxy:
        """A copy of this proxy under another name."""
        raise NotImplementedError


# Note [Python values that the result depends on]
# Under ``cache="constant values"`` numbers are constants of the trace. Under
# ``cache="symbolic values"`` ints and floats that are inputs become NumberProxies: they
# carry the value seen at trace time, and every time the program branches on one (``bool``,
# comparisons) the result is recorded as a constraint that the prologue checks.


class NumberProxy(Proxy):
    """A Python number that is an input of the trace (symbolic values)."""

    __slots__ = ("value", "python_type")

    def __init__(self, value: Number, name: str | None = None, python_type: type | None = None):
        super().__init__(name, prefix={int: "i", float: "f", bool: "b"}.get(type(value), "n"))
        self.value = value
        self.python_type = python_type or type(value)

    def type_string(self) -> str:
        return f"{self.python_type.__name__} {self.value}"

    def replace_name(self, name: str) -> NumberProxy:
        return NumberProxy(self.value, name, self.python_type)


def pyval(x):
    """The Python value of a number or NumberProxy (for metadata computations)."""
    return x.value if isinstance(x, NumberProxy) else x


_METHODS: dict[str, Callable] = {}


def register_method(name: str, fn: Callable, *, attribute: bool = True) -> None:
    """Installs ``fn`` as the tensor method (or operator dunder) ``name`` of ``TensorProxy`` (with ``attribute=False``
    only for the property of that name to call: ``data``).

    Methods are opaque to the interpreter: they only call symbols, so running them natively
    is faster and keeps thunder's own frames out of the user's source locations.
    """
    _METHODS[name] = make_opaque(fn)
    if attribute:
        setattr(TensorProxy, name, fn)


# Set by thunder.torch: maps a torch callable to the symbol that implements it, so that a
# torch function called natively on a proxy (``__torch_function__``) still lands in the trace.
torch_function_handler: Callable[[Callable, tuple, dict], Any] | None = None


# Note [Shapes are torch.Size]
# Eager's ``x.shape`` and ``x.size()`` are ``torch.Size``; so are a proxy's whenever its dims are
# plain ints. Under ``cache="symbolic values"`` dims are SymInts, and ``torch.Size`` cannot hold
# them faithfully: its constructor converts items with ``__index__`` (concretising the dim and
# specialising the trace), and although concatenation (``torch.Size() + dims``) keeps the SymInt
# objects, ``torch.Size.numel`` then reads their values in C and silently returns a plain int: a
# trace that multiplies by ``x.shape.numel()`` would be wrong for the next shape. ``torch.Size``
# cannot be subclassed either. So a shape with symbolic dims is a ``SymbolicSize``: a tuple
# subclass that keeps the SymInts, answers ``isinstance(s, torch.Size)`` with True (its
# ``__class__`` is ``torch.Size``), has torch.Size's methods (``numel`` as the symbolic product)
# and stays a SymbolicSize under slicing, ``+`` and ``*``. Only ``type(s)`` tells it apart
# (the introspection table can answer ``torch.Size`` for it). A real ``torch.Size`` holding
# SymInts can still arise (``torch.Size([1]) + x.shape``): ``torch_size_lookaside`` routes its
# ``numel`` to the symbolic product.


class SymbolicSize(tuple):
    """A ``torch.Size`` whose dims may be symbolic (see Note [Shapes are torch.Size])."""

    __slots__ = ()

    @property
    def __class__(self):
        return torch.Size

    def numel(self):
        return math.prod(self)

    def __getitem__(self, i):
        item = tuple.__getitem__(self, pin_index(i))  # opaque: tuple's C code reads a symbolic index natively
        return as_size(item) if isinstance(i, slice) else item

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return as_size(tuple(self) + tuple(other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return as_size(tuple(other) + tuple(self))

    def __mul__(self, n):
        return as_size(tuple(self) * n)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"torch.Size([{', '.join(repr(d) for d in self)}])"

    __str__ = __repr__

    def __reduce__(self):
        return (as_size, (tuple(self),))


def as_size(dims: Sequence[int]) -> torch.Size:
    """``dims`` as a ``torch.Size``, or a ``SymbolicSize`` when a dim is symbolic."""
    if type(dims) is torch.Size:
        return dims if not any(is_symbolic(d) for d in dims) else SymbolicSize(dims)
    dims = tuple(dims)
    if any(is_symbolic(d) for d in dims):
        return SymbolicSize(dims)
    return torch.Size(dims)


def size_numel(size: Sequence[int]):
    """``torch.Size.numel`` that keeps symbolic dims symbolic (the product's expression)."""
    return math.prod(size)


def torch_size_lookaside(fn: Callable) -> Callable | None:
    """What the tracer should call instead of ``fn`` when ``fn`` is ``numel`` of a real
    ``torch.Size`` holding symbolic dims (bound, or ``torch.Size.numel`` itself); None otherwise."""
    if fn is torch.Size.numel:
        return size_numel
    receiver = bound_self(fn)
    if type(receiver) is torch.Size and plain_attribute(fn, "__name__") == "numel":
        if any(is_symbolic(d) for d in receiver):
            return lambda: size_numel(receiver)
    return None


# Shapes are pytree nodes, so the symbolic dims inside them are found (a computation's parameters)
# and renamed like any other leaf.
optree.register_pytree_node(SymbolicSize, lambda s: (list(s), None), lambda _, dims: as_size(dims), namespace=NAMESPACE)
optree.register_pytree_node(torch.Size, lambda s: (list(s), None), lambda _, dims: as_size(dims), namespace=NAMESPACE)
make_opaque(SymbolicSize.numel)
make_opaque(SymbolicSize.__getitem__)


# Note [Strides of traced tensors]
# ``stride()``, ``is_contiguous()`` and ``storage_offset()`` answer what eager would answer at that
# point of the program. An input proxy made from a real tensor (``tensorproxy_from_tensor``)
# records that tensor's strides and storage offset; when the program reads them (directly, or
# through the layout of a value computed from that input) ``strides_read`` becomes True, and the
# prologue must check that later inputs have the same strides and storage offset. The layout of
# an intermediate result is found by ``layout_provider`` (set by the torch language): it replays
# the ops that produced the value on ``device="meta"`` tensors with the inputs' real strides, so
# the answer follows torch's own layout rules; where it cannot, it raises a ThunderError.

# Set by thunder.torch: ``layout_provider(proxy, need_offset)`` returns a meta tensor with the layout
# eager would give ``proxy`` (marking the inputs it depends on as ``strides_read``), or raises a
# ThunderError saying why it cannot be known (``need_offset``: the storage offset is asked for too).
layout_provider: Callable[[TensorProxy, bool], torch.Tensor] | None = None

# Set by the tracer: ``grad_reader(proxy)`` returns what ``proxy.grad`` reads in the program (the
# real ``.grad`` of an input, as a traced value); None keeps the answer ``None``.
grad_reader: Callable[[TensorProxy], Any] | None = None
# Set by the tracer: ``requires_grad_setter(proxy, flag)`` is ``proxy.requires_grad_(flag)`` in the program.
requires_grad_setter: Callable[[TensorProxy, bool], Any] | None = None
# Set by the tracer: ``hook_recorder(proxy, hook)`` is ``proxy.register_hook(hook)`` in the program, or, with ``hook``
# None, ``proxy.retain_grad()``.
hook_recorder: Callable[[TensorProxy, Callable], Any] | None = None
# Set by the tracer: ``attribute_reader(proxy, name)`` is what ``proxy.name`` reads where ``torch.Tensor`` has no such
# attribute: an input tensor's own (``t.scale = 2.0``, set before the call), or AttributeError; None: always the error.
attribute_reader: Callable[[TensorProxy, str], Any] | None = None
# Set by the tracer: ``value_reader(proxy, kind)`` is the Python value the program asks of a tensor
# (``kind``: "bool", "item", "int", "float", "index", "tolist"), or None where it cannot give one
# (Note [Data-dependent values] in thunder.core.data_dependent).
value_reader: Callable[[TensorProxy, str], Any] | None = None


def _read_value(p: TensorProxy, kind: str) -> Any:
    return None if value_reader is None else value_reader(p, kind)


def input_layout_tensor(p: TensorProxy) -> torch.Tensor:
    """A meta tensor with the size, strides and storage offset an input proxy was made from, and mark
    ``p`` as ``strides_read``.

    Its layout depends on the dims' values: symbolic dims are concretised (recording a constraint)."""
    shape = tuple(int(d) if is_symbolic(d) else d for d in p.shape)
    p.strides_read = True
    extent = p.offset + sum((n - 1) * s for n, s in zip(shape, p.strides)) + 1 if all(shape) else 0
    base = torch.empty(max(extent, p.offset), dtype=p.dtype, device="meta")
    return base.as_strided(shape, p.strides, p.offset)


def meta_layout(p: TensorProxy, need_offset: bool = False) -> torch.Tensor:
    """A meta tensor laid out as eager lays out ``p`` (see Note [Strides of traced tensors])."""
    if p.strides is not None:
        return input_layout_tensor(p)
    if layout_provider is None:
        raise ThunderRuntimeError(
            f"The strides of tensor {p.name} are not known while tracing: it is not an input of the traced "
            "function. Call .contiguous() to get a tensor with a known layout."
        )
    return layout_provider(p, need_offset)


# Code that runs builtins on behalf of the interpreted program: the interpreter's opcode handlers
# and call machinery, and the tracer's emulations of builtins (``thunder.core.introspection``
# wraps ``str.format`` & co.). Not the interpreter's log printer, which formats after the fact.
_CORE_DIR = os.path.dirname(os.path.abspath(__file__))
_PROGRAM_FACING_DIRS = (os.path.join(_CORE_DIR, "interpreter", "handlers") + os.sep,)
_PROGRAM_FACING_FILES = frozenset(
    os.path.join(_CORE_DIR, *parts)
    for parts in (
        ("interpreter", "execution.py"),
        ("interpreter", "protocols.py"),
        ("interpreter", "lookasides.py"),
        ("introspection.py",),
    )
)


def _requested_by_program() -> bool:
    """Whether the dunder calling this was invoked for the interpreted user program (the
    interpreter runs ``str(x)``, ``format(x)`` and f-strings natively from its own handlers, or
    through the tracer's builtin emulations), rather than by thunder's own code formatting a
    proxy (error messages, printers), which gets the proxy's name."""
    if not is_jitting():
        return False
    frame = sys._getframe(2)
    if frame is None:
        return False
    filename = frame.f_code.co_filename
    return filename in _PROGRAM_FACING_FILES or filename.startswith(_PROGRAM_FACING_DIRS)


def _no_values(p: TensorProxy, what: str):
    loc = _source_location()
    why = " (it requires grad: eager's text names its grad_fn)" if p.requires_grad and p.strides is None else ""
    return ThunderRuntimeError(
        f"{what} of tensor {p.name} ({p.type_string()}){f' at {loc}' if loc else ''} needs its values{why}, which are "
        "not known while tracing: inside a jitted function a tensor is a proxy with metadata only. Format it outside "
        "the jitted function (return it, then print it), or format its metadata (x.shape, x.dtype) instead."
    )


class TensorProxy(Proxy):
    """A tensor in a trace: metadata only, no data.

    ``strides``/``offset`` are the real layout of the tensor an input proxy was made from (None for
    intermediates); ``strides_read`` says the program depended on them (see Note [Strides of
    traced tensors])."""

    # ``never_requires_grad``: a result that torch says needs no grad whatever its inputs (``P`` of ``linalg.lu``);
    # ``made_in_inference_mode``: traced inside ``with torch.inference_mode()`` (``is_inference``)
    __slots__ = (
        "shape", "dtype", "device", "requires_grad", "ndim", "strides", "offset", "strides_read", "never_requires_grad",
        "made_in_inference_mode",
    )  # fmt: skip
    # As torch.Tensor's: numpy's operators give way to the tensor's (``np.float32(2) * x`` is a tensor)
    __array_priority__ = 1000

    def __init__(
        self,
        name: str | None = None,
        *,
        like: TensorProxy | None = None,
        shape: Sequence[int] | None = None,
        dtype: torch.dtype | None = None,
        device: torch.device | None = None,
        requires_grad: bool | None = None,
    ):
        # ``like=`` (lightning-thunder's spelling, used in meta functions) fills what is not given.
        if like is not None:
            shape = like.shape if shape is None else shape
            dtype = like.dtype if dtype is None else dtype
            device = like.device if device is None else device
            requires_grad = like.requires_grad if requires_grad is None else requires_grad
        elif shape is None or dtype is None or device is None:
            missing = [k for k, v in (("shape", shape), ("dtype", dtype), ("device", device)) if v is None]
            raise TypeError(f"TensorProxy needs {', '.join(missing)} (or like=<a TensorProxy> to copy them from)")
        requires_grad = bool(requires_grad)
        super().__init__(name, prefix="t")
        self.shape = as_size(shape)  # see Note [Shapes are torch.Size]
        self.ndim = len(self.shape)
        self.dtype = dtype
        self.device = device
        self.requires_grad = requires_grad
        self.strides: tuple[int, ...] | None = None
        self.offset: int | None = None
        self.strides_read = False
        self.never_requires_grad = False
        self.made_in_inference_mode = torch.is_inference_mode_enabled()

    @staticmethod
    def like(t, name: str | None = None, **changes) -> TensorProxy:
        """A new proxy with ``t``'s metadata, changed by ``changes``."""
        return TensorProxy(
            name,
            shape=changes.get("shape", t.shape),
            dtype=changes.get("dtype", t.dtype),
            device=changes.get("device", t.device),
            requires_grad=changes.get("requires_grad", t.requires_grad),
        )

    def replace_name(self, name: str) -> TensorProxy:
        p = TensorProxy.like(self, name)
        p.strides, p.offset, p.strides_read = self.strides, self.offset, self.strides_read
        return p

    def type_string(self) -> str:
        # A symbolic size prints as its expression (``f32[1, 2, (n + 1), 16]``): the entry runs every value of it,
        # and its ``str`` would print (and pin) the value it was traced with.
        dims = ", ".join(d.expr if is_symbolic(d) else str(d) for d in self.shape)
        return f"{device_str(self.device)} {dtypes.short_name(self.dtype)}[{dims}]"

    # Metadata queries answer from the proxy; they record nothing.
    def size(self, dim: int | None = None):
        if dim is None:
            return self.shape
        return self.shape[pin_index(dim)]  # a torch.Size reads a symbolic dim natively

    def dim(self) -> int:
        return self.ndim

    ndimension = dim

    def numel(self) -> int:
        return math.prod(self.shape)

    nelement = numel

    def element_size(self) -> int:
        return self.dtype.itemsize

    def is_floating_point(self) -> bool:
        return self.dtype.is_floating_point

    def is_complex(self) -> bool:
        return self.dtype.is_complex

    def is_signed(self) -> bool:
        return self.dtype.is_signed

    # Layout queries: eager's answer at this point of the program (Note [Strides of traced tensors]).
    def is_contiguous(self, memory_format=torch.contiguous_format) -> bool:
        return meta_layout(self).is_contiguous(memory_format=memory_format)

    def stride(self, dim: int | None = None):
        strides = meta_layout(self).stride()
        return strides if dim is None else strides[pin_index(dim)]

    def storage_offset(self) -> int:
        return meta_layout(self, need_offset=True).storage_offset()

    def get_device(self) -> int:
        return -1 if self.device.type == "cpu" else (self.device.index or 0)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def is_cpu(self) -> bool:
        return self.device.type == "cpu"

    @property
    def is_meta(self) -> bool:
        return self.device.type == "meta"

    @property
    def is_sparse(self) -> bool:
        return False

    # Layouts and backends a traced tensor never has (library code branches on these).
    is_nested = is_mps = is_xpu = is_mkldnn = is_sparse_csr = is_vulkan = is_ipu = is_xla = is_mtia = property(
        lambda self: False
    )

    @property
    def is_quantized(self) -> bool:
        return False

    @property
    def layout(self):
        return torch.strided

    @property
    def grad(self):
        return grad_reader(self) if grad_reader is not None else None

    def requires_grad_(self, requires_grad: bool = True):
        if requires_grad_setter is None:
            raise ThunderRuntimeError("Tensor.requires_grad_ is only meaningful while thunder.jit traces a function")
        return requires_grad_setter(self, requires_grad)

    @property
    def data(self):
        # eager's ``.data``: the same memory, cut from autograd (a gradient through ``(x.data * x).sum()`` is ``x.data``,
        # not ``2 * x``), and an in-place op on it writes into ``x`` (an EMA update of a parameter)
        return _METHODS["data"](self)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize  # eager's: the elements' bytes, a view's too (not its storage's)

    # Note [Formatting a traced tensor]
    # The program's ``str(x)``/``repr(x)``/``f"{x}"`` need the values: a data-dependent value (Note [Data-dependent
    # values] in thunder.core.data_dependent), the text eager makes, which every call checks. Only where that text
    # is eager's: an input (the caller's own tensor, whose text shows its ``requires_grad``/``grad_fn``), or a tensor
    # that does not require grad (eager's text of one that does names its ``grad_fn``, which no traced value has);
    # otherwise, or where the value cannot be had, a clear error. (``torch.distributions`` formats an invalid
    # parameter into its ValueError.) Thunder's own code (error messages, printers) gets the proxy's name.
    def _text(self, kind: str, what: str) -> str:
        text = _read_value(self, kind) if self.strides is not None or not self.requires_grad else None
        if text is None:
            raise _no_values(self, what)
        return text

    def __str__(self) -> str:
        if _requested_by_program():
            return self._text("str", "str()")
        return self.name

    def __repr__(self) -> str:
        if _requested_by_program():
            return self._text("repr", "repr()")
        return self.name

    def __format__(self, spec: str) -> str:
        if _requested_by_program():
            if self.ndim == 0:  # eager formats a 0-d tensor's item: a data-dependent value (``f"expert_{i[0]}"``)
                item = self.item()  # symbolic: text that keeps how (Note [Text formatted from symbolic numbers])
                return item.__interpreter_format__(spec) if is_symbolic(item) else format(item, spec)
            if spec:  # eager's object.__format__
                raise TypeError("unsupported format string passed to Tensor.__format__")
            return self._text("str", "Formatting (an f-string or format())")
        return format(self.name, spec)

    # Data-dependent uses: the tracer splits the program there (Note [Data-dependent values] in
    # thunder.core.data_dependent); where it cannot, say so where the user can act on it.
    def __bool__(self):
        return self._value(
            "bool",
            f"Data-dependent control flow: the truth value of tensor {self.name} ({self.type_string()}) "
            "depends on its data, which is not known while tracing. Use torch.where or masking instead of "
            "`if tensor:`, or move the check outside the jitted function.",
        )

    def item(self):
        return self._value(
            "item",
            f"Data-dependent value: {self.name}.item() needs the tensor's data, which is not known while "
            "tracing. Keep the value as a tensor, or call .item() outside the jitted function.",
        )

    def _value(self, kind: str, why_not: str):
        """The Python value the program asks of this tensor, or ``why_not`` as the error."""
        value = _read_value(self, kind)
        if value is None:
            raise ThunderRuntimeError(why_not)
        return value

    # Storage identity needs real memory: aliasing checks by address cannot be traced.
    UNTRACEABLE = {
        "data_ptr": "it is the address of the tensor's memory, which does not exist while tracing",
        "untyped_storage": "it needs the tensor's memory, which does not exist while tracing",
        "storage": "it needs the tensor's memory, which does not exist while tracing",
        "_typed_storage": "it needs the tensor's memory, which does not exist while tracing",
        "as_strided_": "it reads the tensor's memory through strides and an offset of its own, which values in a trace do not have",
        "backward": "thunder differentiates the whole function when the backward of its result is called; take the "
        "gradient outside, with .backward() or torch.autograd.grad on the jitted function's result",
    }  # Tensor methods with no meaning in a trace, and why (``thunder.examine`` lists them so)

    def register_hook(self, hook):
        if hook_recorder is None:
            raise AttributeError("Tensor.register_hook of a traced value is only meaningful while thunder.jit traces")
        return hook_recorder(self, hook)

    def data_ptr(self):
        raise ThunderRuntimeError(
            f"Storage-dependent value: {self.name}.data_ptr() is the address of the tensor's memory, which does "
            "not exist while tracing. Compare tensors by value, or check aliasing outside the jitted function."
        )

    def untyped_storage(self):
        raise ThunderRuntimeError(
            f"Storage-dependent value: {self.name}.untyped_storage() needs the tensor's memory, which does not "
            "exist while tracing. Use the tensor's layout (stride(), storage_offset()) or move this outside the "
            "jitted function."
        )

    storage = _typed_storage = untyped_storage

    def tolist(self):
        return self._value("tolist", f"Data-dependent value: {self.name}.tolist() is not supported while tracing.")

    def numpy(self, *, force: bool = False):
        """Eager's checks, then the values as a numpy array: a data-dependent value (its ``tolist()``, which
        every call checks; Note [Data-dependent values]). Eager's array shares the tensor's memory; this one
        is a copy, so it is read-only: writing to it would not reach the tensor (a clear error instead)."""
        import numpy as np

        if self.requires_grad and not force:
            raise ThunderRuntimeError(
                "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead."
            )
        if self.device.type != "cpu" and not force:
            raise TypeError(
                f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
                "host memory first."
            )
        dtype = torch.empty((), dtype=self.dtype).numpy().dtype  # eager's TypeError for bfloat16 and the like
        loc = _source_location()
        values = self._value(
            "tolist",
            f"Data-dependent value: {self.name}.numpy(){f' at {loc}' if loc else ''} needs the tensor's values, "
            "which are not known here (inside a region traced on its own). Call .numpy() outside the jitted function.",
        )
        array = np.array(values, dtype=dtype).reshape(tuple(int(n) for n in self.shape))
        array.flags.writeable = False
        return array

    def _callers_answer(self, kind: str, asked: str) -> Any:
        """An input's answer to ``asked`` is the caller's tensor's: read as a data-dependent value every call checks."""
        loc = _source_location()
        return self._value(
            kind,
            f"{self.name}.{asked}{f' at {loc}' if loc else ''} depends on the tensor the caller passes, which is not "
            "known here (inside a region traced on its own). Read it outside the jitted function.",
        )

    @property
    def is_leaf(self) -> bool:
        """Eager's answer: a tensor that does not require grad is a leaf. An input that does is a leaf as the
        caller's tensor is (a parameter, not the result of an op): read as a data-dependent value that every
        call checks (Note [Data-dependent values]). A tensor the program made that requires grad is a leaf only
        when a factory made it so (``torch.zeros(3, requires_grad=True)``) or ``requires_grad_()`` did (on a tensor
        that did not require grad: ``torch.zeros(3).requires_grad_()``, ``nn.Parameter(t)``); an op's result is not."""
        if not self.requires_grad:
            return True
        if self.strides is not None:  # an input (Note [Strides of traced tensors])
            return self._callers_answer("is_leaf", "is_leaf")
        trace = get_tracectx()
        maker = None if trace is None else next(
            (b for scope in trace.scopes for b in scope if any(o is self for o in b.flat_proxy_outs)), None
        )
        return maker is not None and (maker.kwargs.get("requires_grad") is True or maker.sym.id == "torch.Tensor.requires_grad_")

    def is_inference(self) -> bool:
        """Eager's answer. An input's is the caller's tensor's, read as a data-dependent value that every call checks.
        One the program computes outside inference mode is not (the prologue checks the mode); in inference mode eager's
        answer depends on whether it is a view of a normal tensor, which a trace does not know: a clear error."""
        if self.strides is not None:  # an input (Note [Strides of traced tensors])
            return self._callers_answer("is_inference", "is_inference()")
        trace = get_tracectx()
        if trace is not None:
            trace.inference_mode_read = True
        if not torch.is_inference_mode_enabled() and not self.made_in_inference_mode:
            return False  # (one made in a ``with torch.inference_mode()`` region of the program, asked after it: refused)
        from thunder.core.errors import UnsupportedOpError

        loc = _source_location()
        raise UnsupportedOpError(
            f"Tensor.is_inference() of {self.name}, computed in inference mode, is not supported by thunder"
            f"{f' (called at {loc})' if loc else ''}: eager's answer depends on whether it is a view of a tensor made "
            "outside inference mode, which a trace does not know. Read it outside the jitted function."
        )

    def retain_grad(self) -> None:
        """Eager's answer where it changes nothing (a leaf: its ``.grad`` is kept anyway) or fails (a tensor that does
        not require grad); otherwise made by every call on its tensor (Note [Tensor hooks in the program] in
        thunder.core.side_effects)."""
        if not self.requires_grad:
            raise RuntimeError("can't retain_grad on Tensor that has requires_grad=False")
        if self.is_leaf:
            return None
        if hook_recorder is None:
            raise AttributeError("Tensor.retain_grad of a traced value is only meaningful while thunder.jit traces")
        hook_recorder(self, None)

    @property
    def grad_fn(self) -> None:
        """Eager's answer where it is None: a leaf has no ``grad_fn`` (``opt.zero_grad(set_to_none=False)`` asks it
        of each ``.grad``, which does not require grad). A tensor that autograd made has a node, which a trace does
        not hold: a clear error."""
        if self.is_leaf:
            return None
        from thunder.core.errors import UnsupportedOpError

        loc = _source_location()
        raise UnsupportedOpError(
            f"Tensor.grad_fn of {self.name}, which is not a leaf, is not supported by thunder"
            f"{f' (called at {loc})' if loc else ''}: the autograd node exists only in eager. Read it outside the "
            "jitted function, or test `t.is_leaf` (or `t.requires_grad`) instead."
        )

    def __array__(self, dtype=None, copy=None):
        # ``np.asarray(t)``, ``np.array(t)``: the values, as ``numpy()`` gives them (numpy would otherwise make an
        # array of proxies out of the tensor's items)
        array = self.numpy()
        return array if dtype is None else array.astype(dtype)

    # CPython turns what ``__int__``/``__index__`` return into an exact int: a symbolic data-dependent size is
    # pinned to its value first (``pin_index``; Note [Symbolic data-dependent sizes] in thunder.core.data_dependent).
    def __index__(self):
        why = f"Data-dependent value: tensor {self.name} cannot be used as a Python int."
        return pin_index(self._value("index", why))

    def __int__(self):
        why = f"Data-dependent value: tensor {self.name} cannot be used as a Python int."
        return pin_index(self._value("int", why))

    def __float__(self):
        return self._value("float", f"Data-dependent value: tensor {self.name} cannot be used as a Python float.")

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(_METHODS["unbind"](self, 0))

    def __reversed__(self):
        return self if self.ndim == 0 else _METHODS["flip"](self, 0)  # a tensor, as ``torch.Tensor.__reversed__``

    __hash__ = Proxy.__hash__

    def __getattr__(self, name: str):
        # Only reached for names TensorProxy lacks: a Tensor method or property with no symbol yet, or an attribute
        # an input tensor has of its own.
        if name.startswith("__"):
            raise AttributeError(f"'TensorProxy' object has no attribute {name!r}")
        if not hasattr(torch.Tensor, name):
            if attribute_reader is not None:
                return attribute_reader(self, name)
            raise AttributeError(f"'TensorProxy' object has no attribute {name!r}")
        from thunder.core.errors import UnsupportedOpError
        from thunder.core.tracectx import current_source_location

        loc = current_source_location()
        where = f" (called at {loc})" if loc is not None else ""
        if name in TensorProxy.UNTRACEABLE:
            raise UnsupportedOpError(
                f"Tensor.{name} has no meaning in a trace: {TensorProxy.UNTRACEABLE[name]}{where}. Call it outside "
                "the jitted function."
            )
        raise UnsupportedOpError(
            f"Tensor.{name} is not supported by thunder yet{where}. Add a symbol for it with "
            f"@thunder.torch.torchsymbol(torch.Tensor.{name}, method_name={name!r}) (see thunder/torch/), "
            "or call it outside the jitted function."
        )

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if torch_function_handler is None:
            return NotImplemented
        return torch_function_handler(func, args, kwargs or {})


add_leaf_type(Proxy)
add_leaf_type(TensorProxy)
add_leaf_type(NumberProxy)
add_leaf_type(torch.dtype)
add_leaf_type(torch.device)

for _attr in list(vars(TensorProxy).values()):
    if callable(_attr) and not isinstance(_attr, (type, classmethod, staticmethod)):
        make_opaque(_attr)
    elif isinstance(_attr, property) and _attr.fget is not None:
        make_opaque(_attr.fget)


def is_proxyable(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


def tensorproxy_from_tensor(t: torch.Tensor, name: str | None = None, *, shape: Sequence[int] | None = None) -> TensorProxy:
    """A proxy with the metadata of a real tensor, including its strides and storage offset
    (``shape`` overrides the shape, e.g. with symbolic dims)."""
    p = TensorProxy(
        name, shape=t.shape if shape is None else shape, dtype=t.dtype, device=t.device, requires_grad=t.requires_grad
    )
    if t.layout is torch.strided:
        p.strides, p.offset = tuple(t.stride()), t.storage_offset()
    return p
