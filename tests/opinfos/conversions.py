"""Conversions: ``Tensor.to`` in each calling convention, the dtype methods, ``type_as``,
``Tensor.type``, ``cpu``, ``contiguous``, ``clone`` and ``detach``."""

from __future__ import annotations

import torch

from tests.opinfos.core import ALL, ErrorInput, OpInfo, SampleInput, make

_SHAPES = (((), False), ((3, 4), False), ((0, 3), False), ((4, 6), True))


def _inputs(dtype, device):
    for shape, noncontig in _SHAPES:
        yield make(shape, dtype, device, noncontiguous=noncontig, low=-3, high=3)


def _to_samples(dtype, device):
    for a in _inputs(dtype, device):
        for target in (torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.int32, torch.bool):
            yield SampleInput((a, target))
        yield SampleInput((a,), {"dtype": torch.float16})
        yield SampleInput((a, device))
        yield SampleInput((a, torch.device(device), torch.float64))
        yield SampleInput((a,), {"device": device, "dtype": torch.int64, "non_blocking": False})
        yield SampleInput((a, make((1,), torch.float64, device)))  # another tensor's dtype and device
        yield SampleInput((a, dtype), {"copy": True})
        yield SampleInput((a, dtype, False, True))  # non_blocking, copy positionally


def _unary_samples(dtype, device):
    for a in _inputs(dtype, device):
        yield SampleInput((a,))


def _type_as_samples(dtype, device):
    for a in _inputs(dtype, device):
        for other in (torch.float64, torch.int64, dtype):
            yield SampleInput((a, make((2,), other, device)))


def _type_samples(dtype, device):
    for a in _inputs(dtype, device):
        yield SampleInput((a, torch.float64))
        yield SampleInput((a, "torch.IntTensor"))
        yield SampleInput((a,), {"dtype": torch.bool})


def _method(name):
    return lambda a, *args, **kw: getattr(a, name)(*args, **kw)


def _to_errors(device):
    a = make((2, 3), torch.float32, device)
    yield ErrorInput(SampleInput((a, "float64")), TypeError, r"ltorch.to: cannot interpret device='float64'")
    yield ErrorInput(SampleInput((a,), {"dtype": "float64"}), TypeError, r"dtype must be a torch.dtype")
    yield ErrorInput(SampleInput((a, torch.float64, False, False, 1)), TypeError, r"too many positional arguments")
    if not torch.cuda.is_available():
        yield ErrorInput(SampleInput((a, "cuda")), RuntimeError, r"CUDA is not available on this machine")


def _cuda_errors(device):
    if not torch.cuda.is_available():
        yield ErrorInput(
            SampleInput((make((2, 3), torch.float32, device),)),
            RuntimeError,
            r"ltorch.cuda: device cuda.*CUDA is not available on this machine",
        )


def _type_errors(device):
    a = make((2, 3), torch.float32, device)
    yield ErrorInput(SampleInput((a, "torch.NotATensor")), ValueError, r"invalid type 'torch.NotATensor'")
    yield ErrorInput(SampleInput((a, 3)), TypeError, r"dtype must be a torch.dtype or a type name")


def _type_as_errors(device):
    yield ErrorInput(
        SampleInput((make((2,), torch.float32, device), torch.float64)), TypeError, r"other must be a tensor"
    )


opinfos: list[OpInfo] = [
    OpInfo("to", _method("to"), _to_samples, dtypes=ALL, error_inputs=_to_errors),
    OpInfo("type_as", _method("type_as"), _type_as_samples, dtypes=ALL, error_inputs=_type_as_errors),
    OpInfo("type", _method("type"), _type_samples, dtypes=ALL, error_inputs=_type_errors),
    OpInfo("type_query", lambda a: (a.type(), a + 0), _unary_samples, dtypes=ALL[:-1]),
    OpInfo("cpu", _method("cpu"), _unary_samples, dtypes=ALL),
    OpInfo(
        "cuda",
        _method("cuda"),
        _unary_samples,
        dtypes=(torch.float32,),
        error_inputs=_cuda_errors,
        skips=(
            ("test_core_vs_torch_consistency", None, "needs a CUDA device"),
            ("test_vjp_vs_torch", None, "needs a CUDA device"),
        )
        if not torch.cuda.is_available()
        else (),
    ),
    OpInfo("contiguous", _method("contiguous"), _unary_samples, dtypes=ALL),
    OpInfo(
        "contiguous_is_contiguous", lambda a: a.contiguous().is_contiguous(), _unary_samples, dtypes=(torch.float32,)
    ),
    OpInfo("clone", torch.clone, _unary_samples, dtypes=ALL),
    OpInfo("clone_method", _method("clone"), _unary_samples, dtypes=(torch.float32,)),
    OpInfo("detach", _method("detach"), _unary_samples, dtypes=ALL),
]
for _name in ("float", "double", "half", "bfloat16", "int", "long", "short", "char", "byte", "bool"):
    opinfos.append(OpInfo(_name, _method(_name), _unary_samples, dtypes=ALL))
