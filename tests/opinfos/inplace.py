"""In-place ops: the mutated input and the returned value must both match eager."""

from __future__ import annotations

import operator

import torch

from tests.opinfos.core import FLOATS_AND_INT, GRAD_INPLACE_FALLBACK, OpInfo, SampleInput, make


def _one_tensor(dtype, device):
    yield SampleInput((make((3, 4), dtype, device),))
    yield SampleInput((make((3, 4), dtype, device, noncontiguous=True),))
    yield SampleInput((make((0, 2), dtype, device),))


def _two_tensors(dtype, device):
    yield SampleInput((make((3, 4), dtype, device), make((3, 4), dtype, device)))
    yield SampleInput((make((3, 4), dtype, device), make((4,), dtype, device)))  # broadcast source
    yield SampleInput((make((3, 4), dtype, device), make((3, 4), torch.float64, device)))  # converted source


def _tensor_and_number(dtype, device):
    yield SampleInput((make((3, 4), dtype, device), 2))
    yield SampleInput((make((3, 4), dtype, device), make((), dtype, device)))


def _setitem(a, b):
    a[1:, ::2] = b
    return a


def _setitem_samples(dtype, device):
    yield SampleInput((make((3, 4), dtype, device), make((2, 2), dtype, device)))
    yield SampleInput((make((3, 4), dtype, device), 5))


opinfos = [
    OpInfo("Tensor.copy_", torch.Tensor.copy_, _two_tensors, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)),
    OpInfo("Tensor.zero_", torch.Tensor.zero_, _one_tensor, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)),
    OpInfo("Tensor.fill_", torch.Tensor.fill_, _tensor_and_number, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)),
    OpInfo("torch.fill", torch.fill, _tensor_and_number),
    OpInfo(
        "Tensor.add_",
        torch.Tensor.add_,
        _two_tensors,
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
        dtypes=(torch.float32, torch.float64, torch.bfloat16),
    ),
    OpInfo("Tensor.mul_", torch.Tensor.mul_, _tensor_and_number, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)),
    OpInfo(
        "Tensor.clamp_",
        lambda a, b: a.clamp_(min=-1, max=1),
        _tensor_and_number,
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
    ),
    OpInfo("iadd_operator", operator.iadd, _tensor_and_number, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)),
    OpInfo("setitem", _setitem, _setitem_samples, mutates=True, grad=(GRAD_INPLACE_FALLBACK,), dtypes=FLOATS_AND_INT),
]
