"""Helpers shared by the ``torch.nn.functional`` families (activations, norms, losses,
attention, pooling, resampling): dtype checks, keep-dim reductions over prims, the output
metadata of symbols that run one aten kernel (``kernel_outputs``), and the dispatchers that
route a call with ``inplace=True`` to the in-place twin of a symbol.

Layer: language. Imports: core, torch.base.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence

import torch

from thunder.core import dtypes, prims
from thunder.core.errors import ThunderTypeError, ThunderValueError
from thunder.core.prims.base import check_tensor  # noqa: F401  (re-exported for the nn modules)
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.symbol import Symbol
from thunder.torch.base import canonicalize_dim, maybe_convert_to_dtype, symbol_to_torch, torch_to_thunder_map


def check_float(op: str, name: str, x: TensorProxy) -> None:
    check_tensor(op, name, x)
    if not dtypes.is_float_dtype(x.dtype):
        raise ThunderTypeError(
            f'{op}: "{op.removeprefix("ltorch.")}" is not implemented for {name} of dtype {x.dtype}; '
            f"a floating-point tensor is required: convert it, e.g. {name}.to(torch.float32)"
        )


def computation_dtype(d: torch.dtype) -> torch.dtype:
    """float32 for low-precision floats (decompositions round once, as PyTorch's kernels do)."""
    return torch.float32 if d in dtypes.low_precision_dtypes else d


def upcast(a):
    return maybe_convert_to_dtype(a, computation_dtype(a.dtype)) if isinstance(a, TensorProxy) else a


def keep(r: TensorProxy, shape: Sequence[int], dims: Sequence[int]) -> TensorProxy:
    """Broadcasts a reduction result back to ``shape`` (the reduced ``dims`` become size-n again)."""
    kept = tuple(d for d in range(len(shape)) if d not in dims)
    return prims.broadcast_in_dim(r, tuple(shape), kept)


def keepdim(r: TensorProxy, shape: Sequence[int], dims: Sequence[int]) -> TensorProxy:
    """A reduction result with the reduced ``dims`` kept as size-1 dims."""
    out_shape = tuple(1 if d in dims else n for d, n in enumerate(shape))
    return prims.reshape(r, out_shape) if r.shape != out_shape else r


def sum_keep(a: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    return keep(prims.sum(a, tuple(dims)), a.shape, dims)


def amax_keep(a: TensorProxy, dims: Sequence[int]) -> TensorProxy:
    return keep(prims.amax(a, tuple(dims)), a.shape, dims)


def dim_arg(op: str, a: TensorProxy, dim) -> int:
    if isinstance(dim, bool) or not isinstance(dim, int):
        raise ThunderTypeError(f"{op}: dim must be an int, but got {type(dim).__name__} {dim!r}")
    return canonicalize_dim(op, a.ndim, dim)


def check_choice(op: str, name: str, value, choices: Sequence) -> None:
    if value not in choices:
        raise ThunderValueError(f"{op}: {name} must be one of {list(choices)}, but got {value!r}")


def expand_param(op: str, name: str, value, n: int) -> tuple[int, ...]:
    """An int or a sequence of one or ``n`` ints (a conv or pool's kernel_size, stride, ...) as ``n`` ints."""
    value = pyval(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,) * n
    if isinstance(value, (tuple, list, torch.Size)) and all(isinstance(pyval(v), int) for v in value):
        if len(value) == 1:
            return (pyval(value[0]),) * n
        if len(value) == n:
            return tuple(pyval(v) for v in value)
    raise ThunderValueError(f"{op}: {name} must be an int or a tuple of {n} ints, but got {value!r}")


def kernel_outputs(op: str, kernel: Callable, *args) -> TensorProxy | tuple[TensorProxy, ...]:
    """The outputs of ``kernel(*args)`` (an aten kernel) as proxies: the kernel runs on ``device="meta"``
    tensors shaped like the tensor arguments, so shapes, dtypes and the rejected calls are eager's own.

    A call the kernel rejects raises ThunderValueError naming ``op`` with torch's message. The
    outputs are on the first tensor argument's device and do not require grad (a VJP rule, or
    the autograd split, decides that); an output the kernel leaves out (None) stays None.
    """
    tensors = [a for a in args if isinstance(a, TensorProxy)]
    device = tensors[0].device

    def meta(x):
        if isinstance(x, TensorProxy):
            return torch.empty(x.shape, dtype=x.dtype, device="meta")
        if isinstance(x, (tuple, list)):
            return type(x)(meta(v) for v in x)
        return pyval(x)

    try:
        out = kernel(*(meta(a) for a in args))
    except RuntimeError as e:
        raise ThunderValueError(f"{op}: {e}") from None

    def proxy(t: torch.Tensor | None) -> TensorProxy | None:
        if t is None:
            return None
        return TensorProxy(None, shape=tuple(t.shape), dtype=t.dtype, device=device, requires_grad=False)

    return tuple(proxy(t) for t in out) if isinstance(out, (tuple, list)) else proxy(out)


def register_inplace_dispatch(torch_fn: Callable, out_of_place: Symbol, in_place: Symbol) -> Callable:
    """Maps ``torch_fn`` (a ``torch.nn.functional`` function with an ``inplace`` flag) to a dispatcher.

    ``F.relu(x, inplace=True)`` must mutate ``x`` even when its result is unused, so it is
    recorded as the in-place twin (tagged IN_PLACE, DONT_DCE), not as the pure symbol.
    """
    sig = inspect.signature(torch_fn)

    def dispatch(*args, **kwargs):
        bound = sig.bind(*args, **kwargs)
        params = dict(bound.arguments)
        inplace = params.pop("inplace", False)
        first = params.pop(next(iter(sig.parameters)))
        return (in_place if inplace else out_of_place)(first, **params)

    dispatch.__name__ = getattr(torch_fn, "__name__", out_of_place.name)
    dispatch.__qualname__ = dispatch.__name__
    dispatch.__doc__ = (
        f"Routes ``{dispatch.__name__}`` to ``ltorch.{out_of_place.name}`` or ``ltorch.{in_place.name}``."
    )
    torch_to_thunder_map[torch_fn] = dispatch
    if symbol_to_torch.get(in_place) is None:
        # What the torch executor runs for the twin: eager's own in-place kernel, so that where torch's
        # autograd runs the computation (the fallback of the autograd split) the update is one op that
        # autograd knows, not an out-of-place op whose saved input a copy_ then overwrites.
        def run_in_place(a, *args, **kwargs):
            return torch_fn(a, *args, inplace=True, **kwargs)

        run_in_place.__name__ = f"{dispatch.__name__}_inplace"
        symbol_to_torch[in_place] = run_in_place
    return dispatch
