"""Proxies: the symbolic values a trace is made of.

A ``TensorProxy`` carries the metadata of a tensor (shape, dtype, device, requires_grad).
Tensor methods and Python operators are installed by the torch language
(``thunder.torch``) through ``register_method``, so core knows no specific op.

Layer: core. Imports: core.dtypes, core.devices, core.tracectx, core.errors.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from numbers import Number
from typing import Any

import torch

from thunder.core import dtypes
from thunder.core.devices import device_str
from thunder.core.errors import ThunderRuntimeError
from thunder.core.interpreter import make_opaque
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


def register_method(name: str, fn: Callable) -> None:
    """Installs ``fn`` as the tensor method (or operator dunder) ``name`` of ``TensorProxy``.

    Methods are opaque to the interpreter: they only call symbols, so running them natively
    is faster and keeps thunder's own frames out of the user's source locations.
    """
    _METHODS[name] = make_opaque(fn)
    setattr(TensorProxy, name, fn)


# Set by thunder.torch: maps a torch callable to the symbol that implements it, so that a
# torch function called natively on a proxy (``__torch_function__``) still lands in the trace.
torch_function_handler: Callable[[Callable, tuple, dict], Any] | None = None


class TensorProxy(Proxy):
    """A tensor in a trace: metadata only, no data."""

    __slots__ = ("shape", "dtype", "device", "requires_grad", "ndim")

    def __init__(
        self,
        name: str | None = None,
        *,
        shape: Sequence[int],
        dtype: torch.dtype,
        device: torch.device,
        requires_grad: bool = False,
    ):
        super().__init__(name, prefix="t")
        self.shape = tuple(shape)
        self.ndim = len(self.shape)
        self.dtype = dtype
        self.device = device
        self.requires_grad = requires_grad

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
        return TensorProxy.like(self, name)

    def type_string(self) -> str:
        dims = ", ".join(str(d) for d in self.shape)
        return f"{device_str(self.device)} {dtypes.short_name(self.dtype)}[{dims}]"

    # Metadata queries answer from the proxy; they record nothing.
    def size(self, dim: int | None = None):
        if dim is None:
            return torch.Size(self.shape) if all(type(d) is int for d in self.shape) else self.shape
        return self.shape[dim]

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

    def is_contiguous(self, memory_format=None) -> bool:
        return True

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
        return None

    @property
    def data(self):
        return self

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    # Data-dependent uses cannot be traced: say so where the user can act on it.
    def __bool__(self):
        raise ThunderRuntimeError(
            f"Data-dependent control flow: the truth value of tensor {self.name} ({self.type_string()}) "
            "depends on its data, which is not known while tracing. Use torch.where or masking instead of "
            "`if tensor:`, or move the check outside the jitted function."
        )

    def item(self):
        raise ThunderRuntimeError(
            f"Data-dependent value: {self.name}.item() needs the tensor's data, which is not known while "
            "tracing. Keep the value as a tensor, or call .item() outside the jitted function."
        )

    def tolist(self):
        raise ThunderRuntimeError(f"Data-dependent value: {self.name}.tolist() is not supported while tracing.")

    def __index__(self):
        raise ThunderRuntimeError(f"Data-dependent value: tensor {self.name} cannot be used as a Python int.")

    def __int__(self):
        return self.__index__()

    def __float__(self):
        raise ThunderRuntimeError(f"Data-dependent value: tensor {self.name} cannot be used as a Python float.")

    def __len__(self) -> int:
        if self.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(_METHODS["unbind"](self, 0))

    __hash__ = Proxy.__hash__

    def __getattr__(self, name: str):
        # Only reached for names TensorProxy lacks: a Tensor method or property with no symbol yet.
        if name.startswith("__") or not hasattr(torch.Tensor, name):
            raise AttributeError(f"'TensorProxy' object has no attribute {name!r}")
        from thunder.core.errors import UnsupportedOpError
        from thunder.core.tracectx import current_source_location

        loc = current_source_location()
        where = f" (called at {loc})" if loc is not None else ""
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


for _attr in list(vars(TensorProxy).values()):
    if callable(_attr) and not isinstance(_attr, (type, classmethod, staticmethod)):
        make_opaque(_attr)


def is_proxyable(x: Any) -> bool:
    return isinstance(x, torch.Tensor)


def tensorproxy_from_tensor(t: torch.Tensor, name: str | None = None) -> TensorProxy:
    """A proxy with the metadata of a real tensor."""
    return TensorProxy(name, shape=tuple(t.shape), dtype=t.dtype, device=t.device, requires_grad=t.requires_grad)
