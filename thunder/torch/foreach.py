"""``torch._foreach_*``: the multi-tensor ops of torch.optim's ``foreach`` implementations.

Note [Foreach ops]
``torch._foreach_add_(tensors, 1)`` is ``[t.add_(1) for t in tensors]``: a foreach op applies its
per-tensor op position by position to the items of its list arguments (a list of tensors or of
numbers gives each call its own item; a number or a 0-d tensor is given to every call), as eager's
reference implementation does. So one function declares them all from the per-tensor ops of the
torch language, and the trace records those per-tensor symbols, which executors fuse like any
other. An out-of-place op returns its results as eager does (a tuple), an in-place one the list of
tensors it was given, updated. Where the tensors require grad, the per-tensor op is a symbol that torch runs as the
foreach op on a one-item list (``_saving_as_eager``, ``_updating_as_eager``): eager's ATen overload, its autograd
node and what that saves; its decomposition is the per-tensor op's. A foreach op whose per-tensor op thunder lacks stays unsupported.

Layer: language. Imports: core, torch.base (called once every family is declared).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from thunder.core.errors import ThunderRuntimeError, ThunderValueError
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import DONT_DCE, IN_PLACE, Symbol
from thunder.core.torch_state import grad_mode_on
from thunder.torch.base import check_castable, copy_, torch_to_thunder_map, torchsymbol

__all__ = ["declare_foreach_ops"]

_RESULTS = type(torch._foreach_neg([torch.zeros(1)]))  # the sequence type eager returns (a tuple)


def _clamp(bound: str, in_place: bool) -> Callable:
    # eager runs ``_foreach_maximum`` as ``clamp_min`` (and ``minimum`` as ``clamp_max``)
    if in_place:
        return lambda t, x: t.clamp_(**{bound: x})
    return lambda t, x: torch_to_thunder_map[torch.clamp](t, **{bound: x})


def _scalars_last(name: str, in_place: bool) -> Callable:
    # ``_foreach_addcmul(self, tensor1, tensor2, scalars)``: the per-tensor op takes it as ``value=``
    def call(t, t1, t2, value=1):
        if in_place:
            return getattr(t, f"{name}_")(t1, t2, value=value)
        return torch_to_thunder_map[getattr(torch, name)](t, t1, t2, value=value)

    return call


def _norm(t, ord=2, dtype=None):
    return torch_to_thunder_map[torch.linalg.vector_norm](t, ord, dtype=dtype)


_SPECIAL: dict[str, Callable[[bool], Callable | None]] = {
    "maximum": lambda in_place: _clamp("min", in_place),
    "clamp_min": lambda in_place: _clamp("min", in_place),
    "minimum": lambda in_place: _clamp("max", in_place),
    "clamp_max": lambda in_place: _clamp("max", in_place),
    "addcmul": lambda in_place: _scalars_last("addcmul", in_place),
    "addcdiv": lambda in_place: _scalars_last("addcdiv", in_place),
    "norm": lambda in_place: None if in_place else _norm,
}


def _per_tensor(name: str, in_place: bool) -> Callable | None:
    """The per-tensor op of ``torch._foreach_<name>`` (``name`` without the trailing ``_``), or None."""
    if name in _SPECIAL:
        return _SPECIAL[name](in_place)
    if in_place:
        method = f"{name}_"
        if not hasattr(TensorProxy, method):
            return None
        return lambda t, *args, **kwargs: getattr(t, method)(*args, **kwargs)
    return torch_to_thunder_map.get(getattr(torch, name, None))


def _unpack_scalars(op: str, scalars: TensorProxy, n: int) -> list:
    """``_foreach_addcdiv(..., scalars)`` given as a 1-D tensor (Adam under compilation): its elements, as 0-d
    tensors the per-tensor op takes as ``value=`` (eager reads each one as a number)."""
    if scalars.ndim != 1:
        raise ThunderRuntimeError(f"{op}: Expected packed scalar Tensor to be of dimension 1. Got {scalars.ndim} instead.")
    if scalars.shape[0] != n:
        raise ThunderRuntimeError(
            f"{op}: Expected length of scalars to match input of length {n} but got {scalars.shape[0]} instead."
        )
    return [scalars[i] for i in range(n)]


_SAVING_AS_EAGER: dict[tuple, Symbol] = {}


def _saving_as_eager(fn: Callable, per_tensor: Callable, listed: tuple[bool, ...]) -> Symbol:
    """The per-tensor op of the out-of-place foreach op ``fn``, as a symbol that torch runs as ``fn`` on one-item
    lists (``listed``: which arguments were lists). Eager's foreach autograd saves inputs that the per-tensor op
    would not (``_foreach_add(xs, 1)`` keeps ``xs``) and so refuses a backward once they change in place; torch's
    autograd running this symbol does the same, and asked what it saves (Note [What eager's autograd saves] in
    thunder.core.rules), it answers as eager. Executors may still run its decomposition, the per-tensor op."""
    key = (fn, listed)
    sym = _SAVING_AS_EAGER.get(key)
    if sym is None:

        def impl(*args, **kwargs):
            return fn(*([a] if is_list else a for a, is_list in zip(args, listed)), **kwargs)[0]

        def meta(*args, **kwargs):
            return per_tensor(*args, **kwargs)

        shape = "".join("l" if is_list else "s" for is_list in listed)  # which arguments were lists
        meta.__name__ = f"{fn.__name__.lstrip('_')}_one_{shape}"
        sym = _SAVING_AS_EAGER[key] = torchsymbol(id=f"torch.{fn.__name__}_one_{shape}", torch_impl=impl)(meta)
    return sym


def _updating_as_eager(fn: Callable, out_of_place: Callable, listed: tuple[bool, ...]) -> Symbol:
    """The per-tensor op of the in-place foreach op ``fn`` on tensors that require grad, as a symbol that torch runs as
    ``fn`` on one-item lists: eager's per-tensor op is ATen's overload for the argument's kind (``mul_.Scalar`` for a
    number: ``grad_fn=<MulBackward1>``), which ``t.mul_(0.5)`` from Python is not (``mul_.Tensor``, a wrapped number:
    ``MulBackward0``); a program that prints the tensor, or asks its ``grad_fn``, sees eager's node. It decomposes as
    the per-tensor in-place op does (``out_of_place``, then ``copy_``), so thunder's autograd and executors take it
    as they take that op."""
    key = (fn, listed)
    sym = _UPDATING_AS_EAGER.get(key)
    if sym is None:
        shape = "".join("l" if is_list else "s" for is_list in listed)
        name = f"{fn.__name__.lstrip('_')}_one_{shape}"  # (``foreach_add__one_l``: not ``_saving_as_eager``'s name)

        def impl(*args, **kwargs):
            fn(*([a] if is_list else a for a, is_list in zip(args, listed)), **kwargs)
            return args[0]

        def meta(a, *args, **kwargs):
            out = out_of_place(a, *args, **kwargs)
            check_castable(f"ltorch.{name}", out.dtype, a.dtype)
            if out.shape != a.shape:
                raise ThunderValueError(
                    f"ltorch.{name}: output with shape {list(a.shape)} doesn't match the broadcast shape {list(out.shape)}"
                )
            return copy_(out, a)

        meta.__name__ = name
        sym = _UPDATING_AS_EAGER[key] = torchsymbol(
            id=f"torch.{fn.__name__}_one_{shape}", torch_impl=impl, tags=(IN_PLACE, DONT_DCE)
        )(meta)
    return sym


_UPDATING_AS_EAGER: dict[tuple, Symbol] = {}


def _foreach(fn: Callable, per_tensor: Callable, in_place: bool) -> Callable:
    op = fn.__name__
    packed_scalars = op.startswith(("_foreach_addcmul", "_foreach_addcdiv"))

    def call(*args, **kwargs):
        lists = [a for a in args if isinstance(a, (list, tuple))]
        if not lists:
            raise TypeError(f"{op}() expects a list of tensors, but got {[type(a).__name__ for a in args]}")
        n = len(lists[0])
        if n == 0:
            raise ThunderRuntimeError(f"{op}: Tensor list must have at least one tensor.")
        if packed_scalars and len(args) > 3 and isinstance(args[3], TensorProxy):
            args = (*args[:3], _unpack_scalars(op, args[3], n), *args[4:])
        for a in args:
            if isinstance(a, (list, tuple)):
                if len(a) != n:
                    tensors = any(isinstance(x, TensorProxy) for x in a)
                    raise ThunderRuntimeError(
                        f"{op}: Tensor lists must have the same number of tensors, got {n} and {len(a)}"
                        if tensors
                        else f"{op}: Tensor list must have same number of elements as scalar list."
                    )
            elif isinstance(a, TensorProxy) and a is not args[0]:
                if a.ndim != 0:
                    raise ThunderRuntimeError(
                        f"{op}: scalar tensor expected to be 0 dim but it has {a.ndim} dimensions and {a.numel()} "
                        "elements."
                    )
        op_of_one = per_tensor
        listed = tuple(isinstance(a, (list, tuple)) for a in args)
        if any(getattr(t, "requires_grad", False) for a in args for t in (a if isinstance(a, (list, tuple)) else (a,))):
            if not in_place:
                op_of_one = _saving_as_eager(fn, per_tensor, listed)
            elif grad_mode_on() and (out_of_place := _per_tensor(op.removeprefix("_foreach_").removesuffix("_"), False)):
                op_of_one = _updating_as_eager(fn, out_of_place, listed)
        results = [
            op_of_one(*(a[i] if isinstance(a, (list, tuple)) else a for a in args), **kwargs) for i in range(n)
        ]
        return args[0] if in_place else _RESULTS(results)

    call.__name__ = call.__qualname__ = op
    call.__doc__ = f"``torch.{op}``: its per-tensor op on each position of its lists (Note [Foreach ops])."
    return call


def declare_foreach_ops() -> None:
    """Maps each ``torch._foreach_*`` whose per-tensor op the torch language has (called once they are all
    declared)."""
    for attr in dir(torch):
        if not attr.startswith("_foreach_"):
            continue
        fn = getattr(torch, attr)
        name = attr.removeprefix("_foreach_")
        in_place = name.endswith("_")
        per_tensor = _per_tensor(name.removesuffix("_"), in_place)
        if per_tensor is not None and fn not in torch_to_thunder_map:
            torch_to_thunder_map[fn] = _foreach(fn, per_tensor, in_place)
