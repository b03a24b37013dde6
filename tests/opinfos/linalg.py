"""Linear algebra: matmul and @, mm, bmm, mv, linear, addmm, baddbmm, einsum."""

from __future__ import annotations

import operator

import torch

from tests.opinfos.core import FLOATS_AND_INT, ErrorInput, OpInfo, SampleInput, make

# bf16 products in thunder run the same torch kernels, but decompositions may round differently.
_BF16_TOL = {torch.bfloat16: 5e-2}


def _matmul_samples(dtype, device, *, kwargs=True):
    pairs = [
        ((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)), ((5, 2, 3), (3, 4)), ((2, 3), (5, 3, 4)),
        ((2, 1, 2, 3), (3, 3, 2)), ((4, 2, 3), (3,)), ((3,), (4, 3, 2)), ((0, 3), (3, 4)), ((2, 0), (0, 3)),
        ((2, 3, 0), (2, 0, 4)),
    ]  # fmt: skip
    for sa, sb in pairs:
        yield SampleInput((make(sa, dtype, device, low=-2, high=2), make(sb, dtype, device, low=-2, high=2)))
    yield SampleInput(
        (make((4, 6), dtype, device, noncontiguous=True), make((6, 3), dtype, device, noncontiguous=True))
    )
    if kwargs:
        yield SampleInput((make((3, 4), dtype, device),), {"other": make((4, 2), dtype, device)})


def _matmul_errors(device):
    f = torch.float32
    yield ErrorInput(
        SampleInput((make((2, 3), f, device), make((4, 5), f, device))),
        ValueError,
        r"ltorch.matmul: a has shape \(2, 3\) and b has shape \(4, 5\): inner dimensions 3 and 4 differ",
    )
    yield ErrorInput(
        SampleInput((make((), f, device), make((2, 2), f, device))),
        ValueError,
        r"both arguments to matmul need to be at least 1D, but they are 0D and 2D",
    )
    yield ErrorInput(
        SampleInput((make((2, 3), f, device), make((3, 2), torch.float64, device))),
        TypeError,
        r"a has dtype torch.float32 and b has dtype torch.float64.*same dtype",
    )
    yield ErrorInput(
        SampleInput((make((2, 2, 3), f, device), make((3, 3, 2), f, device))),
        ValueError,
        r"size of tensor a \(2\) must match the size of tensor b \(3\)",
    )
    yield ErrorInput(SampleInput((make((2, 3), torch.bool, device), make((3, 2), torch.bool, device))), TypeError,
                     r"not implemented for bool")  # fmt: skip


def _pair(sa, sb, **kw):
    def samples(dtype, device):
        for a, b in zip(sa, sb):
            yield SampleInput(
                (make(a, dtype, device, low=-2, high=2), make(b, dtype, device, low=-2, high=2)), dict(kw)
            )

    return samples


def _mm_errors(device):
    f = torch.float32
    yield ErrorInput(
        SampleInput((make((2, 3, 4), f, device), make((4, 2), f, device))),
        ValueError,
        r"ltorch.mm: input must be a matrix \(2-D\), but got shape \(2, 3, 4\)",
    )
    yield ErrorInput(SampleInput((make((2, 3), f, device), make((4, 2), f, device))), ValueError,
                     r"inner dimensions 3 and 4 differ")  # fmt: skip


def _bmm_errors(device):
    f = torch.float32
    yield ErrorInput(
        SampleInput((make((2, 3, 4), f, device), make((3, 4, 2), f, device))),
        ValueError,
        r"ltorch.bmm: input and mat2 must have the same number of batches, but got 2 and 3",
    )
    yield ErrorInput(SampleInput((make((3, 4), f, device), make((4, 2), f, device))), ValueError,
                     r"input must be a batch of matrices \(3-D\)")  # fmt: skip


def _mv_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make((2, 3), f, device), make((3, 1), f, device))), ValueError,
                     r"ltorch.mv: vec must be a vector \(1-D\)")  # fmt: skip


def _linear_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, low=-2, high=2, **k)  # noqa: E731
    yield SampleInput((m(4, 3), m(5, 3)))
    yield SampleInput((m(4, 3), m(5, 3), m(5)))
    yield SampleInput((m(2, 4, 3), m(5, 3), m(5)))
    yield SampleInput((m(3), m(5, 3), m(5)))
    yield SampleInput((m(4, 3), m(3)))
    yield SampleInput((m(4, 3), m(5, 3)), {"bias": m(1)})
    yield SampleInput((m(0, 3), m(5, 3), m(5)))
    yield SampleInput((m(4, 6, noncontiguous=True), m(5, 6, noncontiguous=True)), {"bias": m(5)})
    yield SampleInput((), {"input": m(4, 3), "weight": m(2, 3), "bias": None})


def _linear_errors(device):
    f = torch.float32
    yield ErrorInput(
        SampleInput((make((4, 3), f, device), make((5, 4), f, device))),
        ValueError,
        r"ltorch.linear: input has shape \(4, 3\) and weight has shape \(5, 4\): in_features 3 and 4 differ",
    )
    yield ErrorInput(
        SampleInput((make((4, 3), f, device), make((5, 3), f, device), make((4,), f, device))),
        ValueError,
        r"size of tensor a \(5\) must match the size of tensor b \(4\)",
    )
    yield ErrorInput(SampleInput((make((4, 3), f, device), make((5, 3), torch.float64, device))), TypeError,
                     r"input has dtype torch.float32 and weight has dtype torch.float64")  # fmt: skip


def _addmm_samples(dtype, device):
    m = lambda *s: make(s, dtype, device, low=-2, high=2)  # noqa: E731
    yield SampleInput((m(2, 4), m(2, 3), m(3, 4)))
    yield SampleInput((m(4), m(2, 3), m(3, 4)), {"beta": 2, "alpha": 3})
    yield SampleInput((m(1, 4), m(2, 3), m(3, 4)), {"beta": 0})
    if dtype.is_floating_point:
        yield SampleInput((m(2, 4), m(2, 3), m(3, 4)), {"beta": 0.5, "alpha": -1.5})


def _baddbmm_samples(dtype, device):
    m = lambda *s: make(s, dtype, device, low=-2, high=2)  # noqa: E731
    yield SampleInput((m(5, 2, 4), m(5, 2, 3), m(5, 3, 4)))
    yield SampleInput((m(2, 4), m(5, 2, 3), m(5, 3, 4)), {"beta": 2, "alpha": 3})
    yield SampleInput((m(1), m(5, 2, 3), m(5, 3, 4)), {"beta": 0})


def _addmm_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make((3, 4), f, device), make((2, 3), f, device), make((3, 4), f, device))), ValueError,
                     r"ltorch.addmm: input of shape \(3, 4\) does not broadcast|size of tensor a")  # fmt: skip


def _einsum_samples(dtype, device):
    m = lambda *s: make(s, dtype, device, low=-2, high=2)  # noqa: E731
    yield SampleInput(("ij,jk->ik", m(2, 3), m(3, 4)))
    yield SampleInput(("ij,jk", m(2, 3), m(3, 4)))
    yield SampleInput(("bij,bjk->bik", m(5, 2, 3), m(5, 3, 4)))
    yield SampleInput(("i,i->", m(3), m(3)))
    yield SampleInput(("i,j->ij", m(3), m(4)))
    yield SampleInput(("ij->ji", m(3, 4)))
    yield SampleInput(("ii->i", m(3, 3)))
    yield SampleInput(("...ij,...jk->...ik", m(2, 1, 2, 3), m(4, 3, 5)))
    yield SampleInput(("bhqd,bhkd->bhqk", m(2, 3, 4, 5), m(2, 3, 6, 5)))
    yield SampleInput(("ij,jk,kl->il", m(2, 3), m(3, 4), m(4, 5)))
    yield SampleInput(("ij,ij->ij", m(2, 3), m(1, 3)))
    yield SampleInput(("ij->j", m(3, 4)))
    yield SampleInput(("ij,kj->", m(3, 4), m(2, 4)))
    yield SampleInput(("i j , j k -> i k", [m(2, 3), m(3, 4)]))
    yield SampleInput(("Ab,bc->Ac", m(2, 3), m(3, 0)))


def _einsum_errors(device):
    f = torch.float32
    yield ErrorInput(
        SampleInput(("ij,jk->ik", make((2, 3), f, device), make((4, 5), f, device))),
        ValueError,
        r"operands do not broadcast: subscript 'j' has size 3 .* and 4 in operand 1",
    )
    yield ErrorInput(
        SampleInput(("ijk->i", make((2, 3), f, device))),
        ValueError,
        r"number of subscripts in the equation \(3\) does not match the number of dimensions \(2\)",
    )
    yield ErrorInput(
        SampleInput(("ij->k", make((2, 3), f, device))),
        ValueError,
        r"output subscript k does not appear in the equation for any input operand",
    )
    yield ErrorInput(SampleInput(("ij,jk->ik", make((2, 3), f, device))), ValueError,
                     r"fewer operands were provided than specified")  # fmt: skip


opinfos: list[OpInfo] = [
    OpInfo("matmul", torch.matmul, _matmul_samples, dtypes=FLOATS_AND_INT, error_inputs=_matmul_errors),
    OpInfo(
        "matmul_operator", operator.matmul, lambda d, dev: _matmul_samples(d, dev, kwargs=False), dtypes=FLOATS_AND_INT
    ),
    OpInfo("matmul_method", lambda a, *args, **kw: a.matmul(*args, **kw), _matmul_samples, dtypes=FLOATS_AND_INT),
    OpInfo("mm", torch.mm, _pair([(2, 3), (0, 3), (3, 0)], [(3, 4), (3, 4), (0, 2)]), error_inputs=_mm_errors),
    OpInfo("mm_method", lambda a, b: a.mm(b), _pair([(2, 3)], [(3, 4)])),
    OpInfo("rmatmul", lambda a, b: b.__rmatmul__(a), _pair([(2, 3), (3,)], [(3, 4), (3, 2)])),
    OpInfo("bmm", torch.bmm, _pair([(5, 2, 3), (0, 2, 3)], [(5, 3, 4), (0, 3, 4)]), error_inputs=_bmm_errors),
    OpInfo("mv", torch.mv, _pair([(2, 3), (0, 3)], [(3,), (3,)]), error_inputs=_mv_errors),
    OpInfo("linear", torch.nn.functional.linear, _linear_samples, error_inputs=_linear_errors),
    OpInfo("addmm", torch.addmm, _addmm_samples, error_inputs=_addmm_errors, atol=_BF16_TOL, rtol=_BF16_TOL),
    OpInfo("baddbmm", torch.baddbmm, _baddbmm_samples, atol=_BF16_TOL, rtol=_BF16_TOL),
    OpInfo("einsum", torch.einsum, _einsum_samples, error_inputs=_einsum_errors),
]
