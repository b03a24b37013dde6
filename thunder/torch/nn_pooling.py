"""Pooling from ``torch.nn.functional``: max_pool1d/2d/3d (with indices), avg_pool1d/2d/3d,
adaptive_avg_pool1d/2d/3d, adaptive_max_pool1d/2d/3d, and max_unpool1d/2d/3d.

Note [Pooling kernels]
Pooling does not decompose into the prims without window gathers that no backend wants, and
its gradients depend on which element of a window the kernel picked (ties in max pooling), so
each 2-D and 3-D pool is a symbol that runs eager's aten kernel (``aten.max_pool2d_with_indices``,
``aten.avg_pool3d``, ...), with a meta that runs the same kernel on ``device="meta"`` tensors
(``kernel_outputs``: eager's shapes, dtypes and rejections), and a VJP rule that calls eager's
backward kernel (``aten.max_pool2d_with_indices_backward``, ...) as a symbol. The 1-D pools are
the 2-D ones over a height of 1, as in ATen (``max_pool1d_with_indices``, ``avg_pool1d`` and the
adaptive 1-D pools are written that way there), so their values and gradients are eager's too.

The functions users call (``F.max_pool2d``, ``nn.MaxPool2d``'s forward, ...) are symbols whose
torch implementation is that same function; their decomposition is the kernel symbol.

Layer: language. Imports: core, torch.base, torch.nn_utils.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from thunder.core import prims
from thunder.core.errors import ThunderValueError
from thunder.core.proxies import TensorProxy, pyval
from thunder.core.rules import forward_rules, grad_rules
from thunder.core.symbol import Symbol
from thunder.torch.base import torchsymbol
from thunder.torch.nn_utils import check_tensor, expand_param, kernel_outputs

__all__ = [
    "max_pool1d",
    "max_pool2d",
    "max_pool3d",
    "max_pool1d_with_indices",
    "max_pool2d_with_indices",
    "max_pool3d_with_indices",
    "avg_pool1d",
    "avg_pool2d",
    "avg_pool3d",
    "adaptive_avg_pool1d",
    "adaptive_avg_pool2d",
    "adaptive_avg_pool3d",
    "adaptive_max_pool1d",
    "adaptive_max_pool2d",
    "adaptive_max_pool3d",
    "adaptive_max_pool1d_with_indices",
    "adaptive_max_pool2d_with_indices",
    "adaptive_max_pool3d_with_indices",
    "max_unpool2d",
    "max_unpool3d",
    # the kernels and their gradients (Note [Pooling kernels])
    "adaptive_avg_pool2d_backward",
    "adaptive_avg_pool2d_kernel",
    "adaptive_avg_pool3d_backward",
    "adaptive_avg_pool3d_kernel",
    "adaptive_max_pool2d_backward",
    "adaptive_max_pool2d_kernel",
    "adaptive_max_pool3d_backward",
    "adaptive_max_pool3d_kernel",
    "avg_pool2d_backward",
    "avg_pool2d_kernel",
    "avg_pool3d_backward",
    "avg_pool3d_kernel",
    "max_pool2d_backward",
    "max_pool2d_kernel",
    "max_pool3d_backward",
    "max_pool3d_kernel",
]

aten = torch.ops.aten


def _kernel_symbol(name: str, kernel: Callable, doc: str) -> Symbol:
    """A symbol that runs the aten ``kernel`` (Note [Pooling kernels])."""

    def meta(*args):
        return kernel_outputs(f"ltorch.{name}", kernel, *args)

    meta.__name__ = name
    meta.__doc__ = doc
    return torchsymbol(id=f"torch.{name}", torch_impl=kernel)(meta)


# ----------------------------------------------------------------------------------------
# The kernels and their gradients
# ----------------------------------------------------------------------------------------

max_pool2d_kernel = _kernel_symbol(
    "max_pool2d_kernel", aten.max_pool2d_with_indices, "``aten.max_pool2d_with_indices``: (values, indices)."
)
max_pool3d_kernel = _kernel_symbol(
    "max_pool3d_kernel", aten.max_pool3d_with_indices, "``aten.max_pool3d_with_indices``: (values, indices)."
)
max_pool2d_backward = _kernel_symbol(
    "max_pool2d_backward", aten.max_pool2d_with_indices_backward, "``aten.max_pool2d_with_indices_backward``."
)
max_pool3d_backward = _kernel_symbol(
    "max_pool3d_backward", aten.max_pool3d_with_indices_backward, "``aten.max_pool3d_with_indices_backward``."
)
avg_pool2d_kernel = _kernel_symbol("avg_pool2d_kernel", aten.avg_pool2d, "``aten.avg_pool2d``.")
avg_pool3d_kernel = _kernel_symbol("avg_pool3d_kernel", aten.avg_pool3d, "``aten.avg_pool3d``.")
avg_pool2d_backward = _kernel_symbol("avg_pool2d_backward", aten.avg_pool2d_backward, "``aten.avg_pool2d_backward``.")
avg_pool3d_backward = _kernel_symbol("avg_pool3d_backward", aten.avg_pool3d_backward, "``aten.avg_pool3d_backward``.")
# F.adaptive_avg_pool2d is eager's composite (a mean for a 1x1 output, else the kernel): the same values.
adaptive_avg_pool2d_kernel = _kernel_symbol(
    "adaptive_avg_pool2d_kernel", torch._C._nn.adaptive_avg_pool2d, "``adaptive_avg_pool2d`` (eager's composite)."
)
adaptive_avg_pool3d_kernel = _kernel_symbol(
    "adaptive_avg_pool3d_kernel", torch._C._nn.adaptive_avg_pool3d, "``adaptive_avg_pool3d`` (eager's composite)."
)
adaptive_avg_pool2d_backward = _kernel_symbol(
    "adaptive_avg_pool2d_backward", aten._adaptive_avg_pool2d_backward, "``aten._adaptive_avg_pool2d_backward``."
)
adaptive_avg_pool3d_backward = _kernel_symbol(
    "adaptive_avg_pool3d_backward", aten._adaptive_avg_pool3d_backward, "``aten._adaptive_avg_pool3d_backward``."
)
adaptive_max_pool2d_kernel = _kernel_symbol(
    "adaptive_max_pool2d_kernel", aten.adaptive_max_pool2d, "``aten.adaptive_max_pool2d``: (values, indices)."
)
adaptive_max_pool3d_kernel = _kernel_symbol(
    "adaptive_max_pool3d_kernel", aten.adaptive_max_pool3d, "``aten.adaptive_max_pool3d``: (values, indices)."
)
adaptive_max_pool2d_backward = _kernel_symbol(
    "adaptive_max_pool2d_backward", aten.adaptive_max_pool2d_backward, "``aten.adaptive_max_pool2d_backward``."
)
adaptive_max_pool3d_backward = _kernel_symbol(
    "adaptive_max_pool3d_backward", aten.adaptive_max_pool3d_backward, "``aten.adaptive_max_pool3d_backward``."
)


def _max_pool_vjp(sym: Symbol, backward: Symbol) -> None:
    @grad_rules.register(sym)
    def vjp(g, out, a, kernel_size, stride, padding, dilation, ceil_mode):
        if g[0] is None:
            return (None,) * 6
        gi = backward(g[0], a, kernel_size, stride, padding, dilation, ceil_mode, out[1])
        return (gi, None, None, None, None, None)


def _avg_pool_vjp(sym: Symbol, backward: Symbol) -> None:
    @grad_rules.register(sym)
    def vjp(g, out, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
        gi = backward(g, a, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)
        return (gi, None, None, None, None, None, None)


def _adaptive_avg_pool_vjp(sym: Symbol, backward: Symbol) -> None:
    @grad_rules.register(sym)
    def vjp(g, out, a, output_size):
        return (backward(g, a), None)


def _adaptive_max_pool_vjp(sym: Symbol, backward: Symbol) -> None:
    @grad_rules.register(sym)
    def vjp(g, out, a, output_size):
        if g[0] is None:
            return (None, None)
        return (backward(g[0], a, out[1]), None)


_max_pool_vjp(max_pool2d_kernel, max_pool2d_backward)
_max_pool_vjp(max_pool3d_kernel, max_pool3d_backward)
_avg_pool_vjp(avg_pool2d_kernel, avg_pool2d_backward)
_avg_pool_vjp(avg_pool3d_kernel, avg_pool3d_backward)
_adaptive_avg_pool_vjp(adaptive_avg_pool2d_kernel, adaptive_avg_pool2d_backward)
_adaptive_avg_pool_vjp(adaptive_avg_pool3d_kernel, adaptive_avg_pool3d_backward)
_adaptive_max_pool_vjp(adaptive_max_pool2d_kernel, adaptive_max_pool2d_backward)
_adaptive_max_pool_vjp(adaptive_max_pool3d_kernel, adaptive_max_pool3d_backward)


# ----------------------------------------------------------------------------------------
# The functions users call
# ----------------------------------------------------------------------------------------


def _check_input(op: str, input, n: int) -> None:
    check_tensor(op, "input", input)
    if input.ndim not in (n + 1, n + 2):
        raise ThunderValueError(
            f"{op}: Expected {n + 1}D (unbatched) or {n + 2}D (batched) input, but got input of size: "
            f"{list(input.shape)}"
        )


def _as_2d(a: TensorProxy) -> TensorProxy:
    """A 1-D pool's input with a height of 1 (ATen's ``unsqueeze(-2)``)."""
    return prims.reshape(a, (*a.shape[:-1], 1, a.shape[-1]))


def _as_1d(a: TensorProxy) -> TensorProxy:
    return prims.reshape(a, (*a.shape[:-2], a.shape[-1]))


def _window(op: str, n: int, kernel_size, stride, padding, dilation=1) -> tuple[tuple[int, ...], ...]:
    kernel = expand_param(op, "kernel_size", kernel_size, n)
    stride = pyval(stride)
    stride = kernel if stride is None or stride == [] or stride == () else expand_param(op, "stride", stride, n)
    return kernel, stride, expand_param(op, "padding", padding, n), expand_param(op, "dilation", dilation, n)


def _max_pool(n: int, input, kernel_size, stride, padding, dilation, ceil_mode) -> tuple[TensorProxy, TensorProxy]:
    op = f"ltorch.max_pool{n}d"
    _check_input(op, input, n)
    k, s, p, d = _window(op, n, kernel_size, stride, padding, dilation)
    ceil_mode = bool(pyval(ceil_mode))
    if n == 1:
        out, idx = max_pool2d_kernel(_as_2d(input), (1, *k), (1, *s), (0, *p), (1, *d), ceil_mode)
        return _as_1d(out), _as_1d(idx)
    kernel = max_pool2d_kernel if n == 2 else max_pool3d_kernel
    return kernel(input, k, s, p, d, ceil_mode)


def _make_max_pool(n: int) -> tuple[Symbol, Symbol]:
    f_pool = getattr(F, f"max_pool{n}d")
    f_with = getattr(F, f"max_pool{n}d_with_indices")
    c_with = torch.max_pool1d_with_indices if n == 1 else getattr(torch._C._nn, f"max_pool{n}d_with_indices")

    def pool(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        out, idx = _max_pool(n, input, kernel_size, stride, padding, dilation, ceil_mode)
        return (out, idx) if pyval(return_indices) else out

    def with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        return _max_pool(n, input, kernel_size, stride, padding, dilation, ceil_mode)

    pool.__name__, with_indices.__name__ = f"max_pool{n}d", f"max_pool{n}d_with_indices"
    pool.__doc__ = (
        f"``F.max_pool{n}d`` (and ``nn.MaxPool{n}d``): eager's kernel, with the indices its gradient scatters to "
        "(Note [Pooling kernels])."
    )
    with_indices.__doc__ = f"``F.max_pool{n}d_with_indices``: ``max_pool{n}d`` returning (values, indices)."
    return (
        torchsymbol(f_pool, getattr(torch, f"max_pool{n}d"))(pool),
        torchsymbol(f_with, c_with, torch_impl=f_with)(with_indices),
    )


max_pool1d, max_pool1d_with_indices = _make_max_pool(1)
max_pool2d, max_pool2d_with_indices = _make_max_pool(2)
max_pool3d, max_pool3d_with_indices = _make_max_pool(3)


def _max_pool_forward(n: int) -> Callable:
    """The augmented forward of ``max_pool{n}d`` where it needs a gradient: its kernel with the indices,
    kept for the backward instead of run again there. Eager runs that kernel too when its input requires
    grad (``max_pool2d`` is ``max_pool2d_with_indices`` then)."""

    def forward(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
        out, idx = _max_pool(n, input, kernel_size, stride, padding, dilation, ceil_mode)
        return (out, idx) if pyval(return_indices) else out

    return forward


for _n, _sym in ((1, max_pool1d), (2, max_pool2d), (3, max_pool3d)):
    forward_rules.register(_sym)(_max_pool_forward(_n))


def _avg_pool(n: int, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override):
    op = f"ltorch.avg_pool{n}d"
    _check_input(op, input, n)
    k, s, p, _ = _window(op, n, kernel_size, stride, padding)
    ceil_mode, count_include_pad = bool(pyval(ceil_mode)), bool(pyval(count_include_pad))
    divisor_override = pyval(divisor_override)
    if n == 1:
        out = avg_pool2d_kernel(_as_2d(input), (1, *k), (1, *s), (0, *p), ceil_mode, count_include_pad, None)
        return _as_1d(out)
    kernel = avg_pool2d_kernel if n == 2 else avg_pool3d_kernel
    return kernel(input, k, s, p, ceil_mode, count_include_pad, divisor_override)


@torchsymbol(F.avg_pool1d, torch.avg_pool1d)
def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """``F.avg_pool1d``: ``avg_pool2d`` over a height of 1, as in ATen (Note [Pooling kernels])."""
    return _avg_pool(1, input, kernel_size, stride, padding, ceil_mode, count_include_pad, None)


@torchsymbol(F.avg_pool2d)
def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):  # fmt: skip
    """``F.avg_pool2d``: eager's kernel (Note [Pooling kernels])."""
    return _avg_pool(2, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


@torchsymbol(F.avg_pool3d)
def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):  # fmt: skip
    """``F.avg_pool3d``: eager's kernel (Note [Pooling kernels])."""
    return _avg_pool(3, input, kernel_size, stride, padding, ceil_mode, count_include_pad, divisor_override)


def _output_size(op: str, input: TensorProxy, output_size, n: int) -> tuple[int, ...]:
    """``output_size`` as ``n`` ints; ``None`` entries keep the input's size (``nn.AdaptiveAvgPool2d((None, 7))``)."""
    size = pyval(output_size)
    if isinstance(size, (tuple, list, torch.Size)) and len(size) == n:
        size = tuple(input.shape[input.ndim - n + i] if pyval(v) is None else pyval(v) for i, v in enumerate(size))
    return expand_param(op, "output_size", size, n)


def _adaptive(n: int, kind: str, input, output_size):
    op = f"ltorch.adaptive_{kind}_pool{n}d"
    _check_input(op, input, n)
    size = _output_size(op, input, output_size, n)
    kernels = {
        "avg": (adaptive_avg_pool2d_kernel, adaptive_avg_pool3d_kernel),
        "max": (adaptive_max_pool2d_kernel, adaptive_max_pool3d_kernel),
    }[kind]
    if n == 1:
        out = kernels[0](_as_2d(input), (1, *size))
        return tuple(_as_1d(t) for t in out) if kind == "max" else _as_1d(out)
    return kernels[n - 2](input, size)


@torchsymbol(F.adaptive_avg_pool1d, torch.adaptive_avg_pool1d)
def adaptive_avg_pool1d(input, output_size):
    """``F.adaptive_avg_pool1d``: ``adaptive_avg_pool2d`` over a height of 1, as in ATen."""
    return _adaptive(1, "avg", input, output_size)


@torchsymbol(F.adaptive_avg_pool2d, torch._C._nn.adaptive_avg_pool2d)
def adaptive_avg_pool2d(input, output_size):
    """``F.adaptive_avg_pool2d``: eager's kernel (Note [Pooling kernels])."""
    return _adaptive(2, "avg", input, output_size)


@torchsymbol(F.adaptive_avg_pool3d, torch._C._nn.adaptive_avg_pool3d)
def adaptive_avg_pool3d(input, output_size):
    """``F.adaptive_avg_pool3d``: eager's kernel (Note [Pooling kernels])."""
    return _adaptive(3, "avg", input, output_size)


def _make_adaptive_max_pool(n: int) -> tuple[Symbol, Symbol]:
    f_pool = getattr(F, f"adaptive_max_pool{n}d")
    f_with = getattr(F, f"adaptive_max_pool{n}d_with_indices")
    c_with = torch.adaptive_max_pool1d if n == 1 else getattr(torch._C._nn, f"adaptive_max_pool{n}d")

    def pool(input, output_size, return_indices=False):
        out, idx = _adaptive(n, "max", input, output_size)
        return (out, idx) if pyval(return_indices) else out

    def with_indices(input, output_size, return_indices=False):
        return _adaptive(n, "max", input, output_size)

    pool.__name__, with_indices.__name__ = f"adaptive_max_pool{n}d", f"adaptive_max_pool{n}d_with_indices"
    pool.__doc__ = f"``F.adaptive_max_pool{n}d``: eager's kernel (Note [Pooling kernels])."
    with_indices.__doc__ = f"``F.adaptive_max_pool{n}d_with_indices``: (values, indices)."
    return torchsymbol(f_pool)(pool), torchsymbol(f_with, c_with, torch_impl=f_with)(with_indices)


adaptive_max_pool1d, adaptive_max_pool1d_with_indices = _make_adaptive_max_pool(1)
adaptive_max_pool2d, adaptive_max_pool2d_with_indices = _make_adaptive_max_pool(2)
adaptive_max_pool3d, adaptive_max_pool3d_with_indices = _make_adaptive_max_pool(3)


# ----------------------------------------------------------------------------------------
# max_unpool: F.max_unpool1d/2d/3d (Python) compute the output size and call these
# ----------------------------------------------------------------------------------------


def _max_unpool(op: str, n: int, input, indices, output_size):
    check_tensor(op, "input", input)
    check_tensor(op, "indices", indices)
    if indices.dtype != torch.int64:
        raise ThunderValueError(f"{op}: elements in indices should be type int64 but got: {indices.dtype}")
    if input.ndim not in (n + 1, n + 2):
        raise ThunderValueError(
            f"{op}: Input to max_unpooling{n}d should be a {n + 1}d or {n + 2}d Tensor, but got a tensor with "
            f"{input.ndim} dimensions"
        )
    if tuple(input.shape) != tuple(indices.shape):
        raise ThunderValueError(
            f"{op}: Expected shape of indices to be same as that of the input tensor ({list(input.shape)}) but got "
            f"indices tensor with shape: {list(indices.shape)}"
        )
    size = expand_param(op, "output_size", output_size, n)
    lead = input.shape[:-n]
    flat = (*lead, math.prod(input.shape[-n:]))
    zeros = prims.full((*lead, math.prod(size)), 0, device=input.device, dtype=input.dtype)
    out = prims.scatter(zeros, prims.reshape(indices, flat), prims.reshape(input, flat), len(lead))
    return prims.reshape(out, (*lead, *size))


@torchsymbol(torch._C._nn.max_unpool2d)
def max_unpool2d(input, indices, output_size):
    """``torch._C._nn.max_unpool2d`` (what ``F.max_unpool1d/2d`` and ``nn.MaxUnpool2d`` call): each value
    written at its index of the flattened output plane, zeros elsewhere; a scatter, so its gradient
    gathers the cotangent at the indices, as eager's."""
    return _max_unpool("ltorch.max_unpool2d", 2, input, indices, output_size)


@torchsymbol(torch._C._nn.max_unpool3d)
def max_unpool3d(input, indices, output_size, stride, padding):
    """``torch._C._nn.max_unpool3d`` (``F.max_unpool3d``): see ``max_unpool2d``; stride and padding only
    checked by eager's kernel."""
    return _max_unpool("ltorch.max_unpool3d", 3, input, indices, output_size)
