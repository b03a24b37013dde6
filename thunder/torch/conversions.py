"""Dtype and device conversions: ``Tensor.to`` (every calling convention), ``float``/``double``/
``half``/``bfloat16``/``int``/``long``/``short``/``char``/``byte``/``bool``, ``type_as``,
``Tensor.type``, ``cpu``/``cuda``, ``contiguous``, ``clone`` and ``detach``; ``view_as_complex`` and
``view_as_real``, which read the same memory as the other dtype (rotary embeddings written with complex numbers:
Llama 4).

As in PyTorch, a conversion to the dtype and device the tensor already has returns the
tensor itself (unless ``copy=True``). Device names are resolved as the factories do: a CUDA
device on a machine without CUDA is a clear error while tracing.

Layer: language. Imports: core, torch.base, torch.factories.
"""

from __future__ import annotations

import torch

from thunder.core import dtypes, prims
from thunder.core import outside_reads as _outside_reads
from thunder.core.copies import deepcopy_tensor as _eager_deepcopy
from thunder.core.errors import ThunderRuntimeError, ThunderTypeError, ThunderValueError, UnsupportedOpError
from thunder.core.prims.base import is_differentiable
from thunder.core.proxies import TensorProxy, register_method
from thunder.core.replays import becomes_in_place
from thunder.core.rules import grad_rules
from thunder.core.symbol import DONT_DCE, MAY_ALIAS, MAY_RAISE, UNFUSIBLE
from thunder.core.tracectx import current_source_location, get_tracectx
from thunder.core.transforms.autodiff import _aliased_args
from thunder.torch.base import torch_to_thunder_map, torchsymbol
from thunder.torch.factories import factory_device

__all__ = ["to", "type_as", "tensor_type", "cpu", "cuda", "contiguous", "clone", "deepcopy_tensor", "detach", "tensor_data", "view_as_complex",
           "view_as_real"]  # fmt: skip


def _check_self(op: str, a) -> None:
    if not isinstance(a, TensorProxy):
        raise ThunderTypeError(f"{op}: expected a tensor, but got {type(a).__name__} {a!r}")


def convert(a: TensorProxy, dtype: torch.dtype | None, device: torch.device | None, copy: bool = False) -> TensorProxy:
    """``a`` with ``dtype`` and on ``device`` (None keeps the current one): ``a`` itself when nothing changes."""
    out = a
    if device is not None and device != a.device:
        out = prims.device_put(out, device)
    if dtype is not None and dtype != a.dtype:
        out = prims.convert_element_type(out, dtype)
    if copy and out is a:
        out = prims.clone(a)
    return out


def _is_device_like(x) -> bool:
    return isinstance(x, (str, torch.device)) or (isinstance(x, int) and not isinstance(x, bool))


def _parse_to(op: str, a: TensorProxy, args: tuple, kwargs: dict):
    """Resolves ``to(dtype, ...)``, ``to(device, dtype, ...)`` and ``to(other, ...)`` to (dtype, device, copy)."""
    kwargs = dict(kwargs)
    dtype = kwargs.pop("dtype", None)
    device = kwargs.pop("device", None)
    other = kwargs.pop("other", None)
    args = list(args)
    if args and isinstance(args[0], TensorProxy):
        other = args.pop(0)
    elif args and isinstance(args[0], torch.dtype):
        dtype = args.pop(0)
    elif args and (_is_device_like(args[0]) or args[0] is None):
        device = args.pop(0)
        if args and (isinstance(args[0], torch.dtype) or args[0] is None):
            dtype = args.pop(0)
    flags = ["non_blocking", "copy"]
    if len(args) > len(flags):
        raise ThunderTypeError(
            f"{op}: too many positional arguments {tuple(args)!r}; expected to(dtype | device | other, non_blocking, copy)"
        )
    for name, value in zip(flags, args):
        if name in kwargs:
            raise ThunderTypeError(f"{op}: got {name} both positionally and as a keyword")
        kwargs[name] = value
    copy = kwargs.pop("copy", False)
    kwargs.pop("non_blocking", None)
    memory_format = kwargs.pop("memory_format", None)
    if kwargs:
        raise ThunderTypeError(f"{op}: unexpected keyword arguments {sorted(kwargs)}")
    rank = _CHANNELS_LAST_RANKS.get(memory_format)
    if rank is not None and a.ndim != rank:
        raise ThunderRuntimeError(f"required rank {rank} tensor to use {str(memory_format).split('.')[-1]} format")
    if rank is None and memory_format not in (None, torch.preserve_format, torch.contiguous_format):
        raise UnsupportedOpError(f"{op}: memory_format={memory_format} is not supported; use torch.preserve_format")
    copy = copy or rank is not None  # a new layout, as ``contiguous`` makes it (the strides are eager's)
    if other is not None:
        if not isinstance(other, TensorProxy):
            raise ThunderTypeError(f"{op}: other must be a tensor, but got {type(other).__name__}")
        dtype, device = other.dtype, other.device
    if dtype in dtypes.DTYPE_ARGUMENT_OF_PYTHON_TYPE:  # ``x.to(dtype=int)``
        dtype = dtypes.DTYPE_ARGUMENT_OF_PYTHON_TYPE[dtype]
    if dtype is not None and not isinstance(dtype, torch.dtype):
        raise ThunderTypeError(f"{op}: dtype must be a torch.dtype, but got {type(dtype).__name__} {dtype!r}")
    if device is not None:
        device = factory_device(op, device)
    return dtype, device, bool(copy)


@torchsymbol(method_name="to", torch_impl=torch.Tensor.to, tags=(MAY_ALIAS,))
def to(self, *args, **kwargs):
    """``Tensor.to``: a dtype, a device (and dtype), or another tensor's dtype and device; ``self`` when unchanged.
    A channels-last ``memory_format`` lays the result out as ``contiguous`` does."""
    op = "ltorch.to"
    _check_self(op, self)
    dtype, device, copy = _parse_to(op, self, args, kwargs)
    return convert(self, dtype, device, copy)


def _dtype_method(name: str, dtype: torch.dtype):
    op = f"ltorch.{name}"

    def meta(self, memory_format=None):
        _check_self(op, self)
        return convert(self, dtype, None)

    meta.__name__ = name
    meta.__doc__ = f"``Tensor.{name}()``: ``self.to({dtype})``."
    sym = torchsymbol(method_name=name, torch_impl=getattr(torch.Tensor, name), tags=(MAY_ALIAS,))(meta)
    _DTYPE_METHODS[name] = sym
    __all__.append(name)
    return sym


# Their names (float, int, bool, ...) would shadow builtins that this module uses, so they are
# kept out of its globals and served by the module ``__getattr__`` (star imports included).
_DTYPE_METHODS: dict = {}


def __getattr__(name: str):
    try:
        return _DTYPE_METHODS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


for _name, _dtype in (
    ("float", torch.float32), ("double", torch.float64), ("half", torch.float16), ("bfloat16", torch.bfloat16),
    ("int", torch.int32), ("long", torch.int64), ("short", torch.int16), ("char", torch.int8),
    ("byte", torch.uint8), ("bool", torch.bool), ("cfloat", torch.complex64), ("cdouble", torch.complex128),
    ("chalf", torch.complex32),
):  # fmt: skip
    _dtype_method(_name, _dtype)


@torchsymbol(method_name="type_as", torch_impl=torch.Tensor.type_as, tags=(MAY_ALIAS,))
def type_as(self, other):
    """``Tensor.type_as``: ``self`` converted to ``other``'s dtype."""
    op = "ltorch.type_as"
    _check_self(op, self)
    if not isinstance(other, TensorProxy):
        raise ThunderTypeError(f"{op}: other must be a tensor, but got {type(other).__name__} {other!r}")
    return convert(self, other.dtype, None)


# 'torch.FloatTensor' <-> torch.float32, and the same for every dtype the legacy names cover
_LEGACY_TYPE_NAMES: dict[str, torch.dtype] = {}
for _d in (torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int16,
           torch.int8, torch.uint8, torch.bool, torch.complex64, torch.complex128):  # fmt: skip
    _LEGACY_TYPE_NAMES[torch.empty(0, dtype=_d).type()] = _d


def _legacy_name(a: TensorProxy) -> str:
    name = next((n for n, d in _LEGACY_TYPE_NAMES.items() if d == a.dtype), f"torch.{dtypes.short_name(a.dtype)}")
    return name.replace("torch.", "torch.cuda.", 1) if a.device.type == "cuda" else name


_LEGACY_TENSOR_TYPE = type(torch.FloatTensor)  # torch.tensortype: torch.FloatTensor, torch.cuda.LongTensor, ...


def _tensor_type(self, dtype=None, non_blocking=False, **kwargs):
    """``Tensor.type(dtype)``: a conversion to a torch.dtype or a legacy tensor type, given as the type
    (``torch.DoubleTensor``, ``torch.cuda.FloatTensor``) or its name ('torch.DoubleTensor')."""
    op = "ltorch.tensor_type"
    _check_self(op, self)
    device = None
    if type(dtype) is _LEGACY_TENSOR_TYPE:
        dtype = f"{dtype.__module__}.{dtype.__name__}"
    if isinstance(dtype, str):
        name = dtype
        if name.startswith("torch.cuda."):
            device = factory_device(op, "cuda")
            name = name.replace("torch.cuda.", "torch.", 1)
        if name not in _LEGACY_TYPE_NAMES:
            raise ThunderValueError(
                f"{op}: invalid type {dtype!r}; expected a torch.dtype or a name like 'torch.FloatTensor'"
            )
        dtype = _LEGACY_TYPE_NAMES[name]
    if not isinstance(dtype, torch.dtype):
        raise ThunderTypeError(
            f"{op}: dtype must be a torch.dtype or a type name, but got {type(dtype).__name__} {dtype!r}"
        )
    return convert(self, dtype, device)


_tensor_type.__name__ = "tensor_type"
tensor_type = torchsymbol(method_name="type", torch_impl=torch.Tensor.type, tags=(MAY_ALIAS,))(_tensor_type)


def _type_method(self, dtype=None, non_blocking=False, **kwargs):
    # ``t.type()`` with no dtype is a query (a string), not an op: it records nothing.
    if dtype is None:
        return _legacy_name(self)
    return tensor_type(self, dtype, non_blocking, **kwargs)


register_method("type", _type_method)


@torchsymbol(method_name="cpu", torch_impl=torch.Tensor.cpu, tags=(MAY_ALIAS,))
def cpu(self, memory_format=None):
    """``Tensor.cpu``: ``self`` when already on the CPU."""
    _check_self("ltorch.cpu", self)
    return convert(self, None, torch.device("cpu"))


@torchsymbol(method_name="cuda", torch_impl=torch.Tensor.cuda, tags=(MAY_ALIAS,))
def cuda(self, device=None, non_blocking=False, memory_format=None):
    """``Tensor.cuda``: to the current (or given) CUDA device; a clear error on a machine without CUDA."""
    op = "ltorch.cuda"
    _check_self(op, self)
    if device is None:
        device = "cuda"
    elif isinstance(device, int) and not isinstance(device, bool):
        device = torch.device("cuda", device)
    target = factory_device(op, device)
    if target.type != "cuda":
        raise ThunderValueError(f"{op}: Invalid device, must be cuda device, but got {target}")
    return convert(self, None, target)


@torchsymbol(method_name="contiguous", torch_impl=torch.Tensor.contiguous, tags=(MAY_ALIAS,))
def contiguous(self, memory_format=torch.contiguous_format):
    """``Tensor.contiguous``: a new proxy (the result may be a copy when ``self`` is strided). Under a
    ``channels_last`` format the values are the same; the layout (``stride()``) is eager's, which
    ``thunder.torch.layout`` replays with torch's own call."""
    op = "ltorch.contiguous"
    _check_self(op, self)
    rank = _CHANNELS_LAST_RANKS.get(memory_format)
    if rank is not None and self.ndim != rank:
        raise ThunderRuntimeError(f"required rank {rank} tensor to use {str(memory_format).split('.')[-1]} format")
    if rank is None and memory_format not in (torch.contiguous_format, torch.preserve_format):
        raise ThunderValueError(f"{op}: memory_format={memory_format} is not supported; use torch.contiguous_format")
    return prims.clone(self)


_CHANNELS_LAST_RANKS = {torch.channels_last: 4, torch.channels_last_3d: 5}


@torchsymbol(torch.clone, method_name="clone")
def clone(input, *, memory_format=torch.preserve_format):
    """``torch.clone``: a copy that never aliases ``input``."""
    _check_self("ltorch.clone", input)
    return prims.clone(input)


@torchsymbol(_eager_deepcopy, id="torch.deepcopy_tensor", tags=(UNFUSIBLE,))
def deepcopy_tensor(input):
    """``copy.deepcopy`` of a tensor the program computed: the same values in eager's layout for a deep copy (the
    view of a copied storage: an expanded tensor stays expanded, so an in-place op on it fails as in eager), which
    is not ``clone``'s. It has no prim decomposition: the torch executor runs eager's ``deepcopy``."""
    _check_self("ltorch.deepcopy_tensor", input)
    return TensorProxy.like(input, requires_grad=False)


@torchsymbol(torch.detach, method_name="detach", torch_impl=torch.Tensor.detach, tags=(MAY_ALIAS,))
def detach(input):
    """``Tensor.detach``: the same values, cut from autograd (the torch executor returns a view, as eager does).

    It has no prim decomposition: every executor runs it as itself."""
    _check_self("ltorch.detach", input)
    return TensorProxy.like(input, requires_grad=False)


def detach_(a):
    """``Tensor.detach_()``: the tensor object becomes its detached self, in place (``becomes_in_place``), as eager's
    does (later ops on it record no gradient). An input's cannot change for the caller, and eager refuses a view's: a
    tensor the program made by an op that may return a view is refused clearly."""
    op = "Tensor.detach_"
    trace = get_tracectx()
    loc = current_source_location()
    where = f" (called at {loc})" if loc else ""
    if a.strides is not None or trace is None or len(trace.scopes) != 1:  # an input (Note [Strides of traced tensors])
        raise UnsupportedOpError(
            f"{op} of {a.name}, a tensor the jitted function was given{where}, would change the caller's tensor once, "
            "while tracing: detach it before the call, or use x = x.detach() in the function"
        )
    maker = next((b for b in reversed(trace.bound_symbols) if any(o is a for o in b.flat_proxy_outs)), None)
    if maker is None or _aliased_args(maker):
        raise UnsupportedOpError(
            f"{op} of {a.name}{where}: it may be a view of another tensor (made by {maker.sym.name if maker else 'no op'}"
            "), whose in-place detach eager refuses (\"Can't detach views in-place\"). Use x = x.detach() instead"
        )
    if not a.requires_grad:
        return a
    return becomes_in_place(trace, a, detach)


register_method("detach_", detach_)
torch_to_thunder_map[torch.Tensor.detach_] = detach_
torch_to_thunder_map[torch.detach_] = detach_


@torchsymbol(id="torch.Tensor.requires_grad_", torch_impl=torch.Tensor.requires_grad_, tags=(MAY_ALIAS, DONT_DCE))
def requires_grad_(a):
    """``a.requires_grad_()`` on a tensor the program computed from nothing that requires grad: eager makes it a
    leaf that requires grad (``delta = torch.zeros_like(x).requires_grad_()``), and so does the torch executor, on
    the same tensor. The tracer records it where the program calls it (``set_requires_grad``); the computation
    then runs under torch's autograd, which gives the leaf its ``.grad``."""
    _check_self("ltorch.requires_grad_", a)
    return TensorProxy.like(a, requires_grad=True)


_outside_reads.leaf_requiring_grad = requires_grad_


def _tensor_data(a: torch.Tensor) -> torch.Tensor:
    """Eager's ``a.data``: ``a``'s memory, cut from autograd, with a version counter of its own."""
    return a.data


@torchsymbol(_tensor_data, id="torch.Tensor.data", tags=(MAY_ALIAS,))
def tensor_data(input):
    """``Tensor.data``: as ``detach``, but an in-place update of it is not seen by autograd's checks of what it saved
    (eager's ``.data`` has a version counter of its own): the torch executor runs ``.data``."""
    _check_self("ltorch.tensor_data", input)
    return TensorProxy.like(input, requires_grad=False)


register_method("data", tensor_data, attribute=False)  # what the property ``TensorProxy.data`` records


# Views that reinterpret memory as another dtype: no prim computes them, so torch runs them, as real views (an
# in-place op on one changes its base, as in eager); never inside a fusion (Inductor does not take complex
# tensors); torch checks the layout at run time (the last dim's stride 1, the others even).
_COMPLEX_OF = {torch.float32: torch.complex64, torch.float64: torch.complex128, torch.float16: torch.complex32}
_REAL_OF = {c: r for r, c in _COMPLEX_OF.items()}


@torchsymbol(torch.view_as_complex, torch_impl=torch.view_as_complex, tags=(MAY_ALIAS, MAY_RAISE, UNFUSIBLE))
def view_as_complex(input):
    """``torch.view_as_complex``: a float tensor whose last dim holds (real, imaginary) pairs, as complex numbers."""
    op = "ltorch.view_as_complex"
    _check_self(op, input)
    if input.dtype not in _COMPLEX_OF:
        raise ThunderTypeError(
            f"{op}: view_as_complex is only supported for half, float and double tensors, but got a tensor of "
            f"scalar type: {input.dtype}"
        )
    if input.ndim == 0 or input.shape[-1] != 2:
        raise ThunderValueError(f"{op}: Tensor must have a last dimension of size 2")
    return TensorProxy.like(input, shape=tuple(input.shape[:-1]), dtype=_COMPLEX_OF[input.dtype])


@torchsymbol(torch.view_as_real, torch_impl=torch.view_as_real, tags=(MAY_ALIAS, UNFUSIBLE))
def view_as_real(input):
    """``torch.view_as_real``: a complex tensor as float (real, imaginary) pairs in a new last dim."""
    op = "ltorch.view_as_real"
    _check_self(op, input)
    if input.dtype not in _REAL_OF:
        raise ThunderTypeError(f"{op}: view_as_real is only supported for complex tensors, got {input.dtype}")
    return TensorProxy.like(input, shape=(*input.shape, 2), dtype=_REAL_OF[input.dtype])


@grad_rules.register(view_as_complex)
def _view_as_complex_vjp(g, out, input):
    return (view_as_real(g) if is_differentiable(input) else None,)


@grad_rules.register(view_as_real)
def _view_as_real_vjp(g, out, input):
    return (view_as_complex(contiguous(g)) if is_differentiable(input) else None,)
