"""Shape ops: reshape/view, permute/transpose, squeeze/unsqueeze, flatten, expand, cat/stack,
split/chunk/unbind, narrow/select, movedim, pad, tril/triu, repeat, roll, flip, diagonal."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.opinfos.core import ALL, FLOATS_AND_INT, GRAD_INPLACE_FALLBACK, ErrorInput, OpInfo, SampleInput, make


def _s(*args, **kwargs):
    return SampleInput(args, kwargs)


def _samples(fn):
    """Sample generator from ``fn(t)`` where ``t(shape, noncontiguous=False)`` makes an input."""

    def samples(dtype, device):
        def t(shape, noncontiguous=False):
            return make(shape, dtype, device, noncontiguous=noncontiguous)

        return list(fn(t))

    return samples


class _T:
    """In an error case: a float32 tensor of this shape."""

    def __init__(self, *shape):
        self.shape = shape


def _errors(*cases):
    """Error inputs from ``(args, kwargs, exc_type, match)``; ``_T(shape)`` becomes a tensor."""

    def errors(device):
        def build(x):
            if isinstance(x, _T):
                return make(x.shape, torch.float32, device)
            if isinstance(x, list):
                return [build(y) for y in x]
            return x

        for args, kwargs, exc, match in cases:
            yield ErrorInput(SampleInput(tuple(build(a) for a in args), kwargs), exc, match)

    return errors


opinfos: list[OpInfo] = [
    OpInfo(
        "reshape",
        torch.reshape,
        _samples(
            lambda t: [
                _s(t((2, 3, 4)), (4, 6)),
                _s(t((2, 3, 4)), (-1,)),
                _s(t((2, 3, 4)), (3, -1, 2)),
                _s(t((4, 6), True), (2, 12)),
                _s(t(()), (1, 1)),
                _s(t((0, 3)), (3, 0)),
                _s(t((0, 3)), (-1, 3)),
                _s(t((6,)), shape=(2, 3)),
            ]
        ),
        error_inputs=_errors(
            ((_T(2, 3, 4), (5, 5)), {}, ValueError, r"shape '\[5, 5\]' is invalid for input of size 24"),
            ((_T(2, 3, 4), (-1, -1)), {}, ValueError, r"only one dimension can be inferred"),
            ((_T(0, 3), (0, -1)), {}, ValueError, r"unspecified dimension size -1 can be any value"),
            ((_T(4), (-2, -2)), {}, ValueError, r"invalid shape dimension -2"),
        ),
    ),
    OpInfo(
        "reshape_method_varargs",
        lambda a, *s: a.reshape(*s),
        _samples(lambda t: [_s(t((2, 3, 4)), 6, 4), _s(t((2, 3, 4)), 2, -1), _s(t((4, 6), True), 24)]),
    ),
    OpInfo(
        "view",
        lambda a, *s, **k: a.view(*s, **k),
        _samples(
            lambda t: [
                _s(t((2, 3, 4)), 6, 4),
                _s(t((2, 3, 4)), (-1, 4)),
                _s(t((2, 3, 4)), size=(24,)),
                _s(t(()), 1),
                _s(t((0, 2)), 2, 0),
            ]
        ),
        error_inputs=_errors(((_T(2, 3, 4), 5, 5), {}, ValueError, r"ltorch.view.*invalid for input of size 24")),
    ),
    OpInfo(
        "view_mutation_reaches_base",
        lambda a: (a.view(-1).add_(1), a),
        _samples(lambda t: [_s(t((2, 3)))]),
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
    ),
    OpInfo(
        "view_as", lambda a, b: a.view_as(b), _samples(lambda t: [_s(t((2, 6)), t((3, 4))), _s(t((0,)), t((0, 2)))])
    ),
    OpInfo("reshape_as", lambda a, b: a.reshape_as(b), _samples(lambda t: [_s(t((4, 6), True), t((3, 8)))])),
    OpInfo(
        "flatten",
        torch.flatten,
        _samples(
            lambda t: [
                _s(t((2, 3, 4))),
                _s(t((2, 3, 4)), 1),
                _s(t((2, 3, 4, 5)), start_dim=1, end_dim=-2),
                _s(t(())),
                _s(t((0, 3, 2)), 1),
                _s(t((4, 6), True), -2, -1),
            ]
        ),
        error_inputs=_errors(
            ((_T(2, 3, 4), 2, 0), {}, ValueError, r"start_dim cannot come after end_dim"),
            (
                (_T(2, 3, 4), 3),
                {},
                IndexError,
                r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 3\)",
            ),
        ),
    ),
    OpInfo(
        "unflatten",
        torch.unflatten,
        _samples(
            lambda t: [
                _s(t((2, 12)), 1, (3, 4)),
                _s(t((2, 12)), -1, (2, -1, 3)),
                _s(t((6, 5), True), 0, (2, 3)),
                _s(t((0, 4)), 1, (2, 2)),
            ]
        ),
        error_inputs=_errors(
            ((_T(2, 3, 4), 1, (2, 2)), {}, ValueError, r"sizes \[2, 2\] don't multiply up to the size of dim 1 \(3\)"),
        ),
    ),
    OpInfo("ravel", torch.ravel, _samples(lambda t: [_s(t((2, 3))), _s(t((4, 6), True)), _s(t(())), _s(t((0, 2)))])),
    OpInfo(
        "tril_",
        lambda a, *x, **k: a.tril_(*x, **k),
        _samples(lambda t: [_s(t((3, 4))), _s(t((2, 3, 4)), diagonal=1)]),
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
    ),
    OpInfo(
        "triu_",
        lambda a, *x, **k: a.triu_(*x, **k),
        _samples(lambda t: [_s(t((3, 4)), -1)]),
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
    ),
    OpInfo(
        "squeeze",
        torch.squeeze,
        _samples(
            lambda t: [
                _s(t((2, 1, 3, 1))),
                _s(t((2, 1, 3, 1)), 1),
                _s(t((2, 1, 3, 1)), -1),
                _s(t((2, 1, 3, 1)), 0),
                _s(t((2, 1, 3, 1)), (1, 3)),
                _s(t((1, 2, 1)), dim=(0, -1)),
                _s(t(())),
                _s(t(()), 0),
                _s(t((0, 1))),
            ]
        ),
        error_inputs=_errors(
            (
                (_T(2, 3, 4), 5),
                {},
                IndexError,
                r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 5\)",
            ),
        ),
    ),
    OpInfo(
        "unsqueeze",
        torch.unsqueeze,
        _samples(
            lambda t: [
                _s(t((2, 3)), 0),
                _s(t((2, 3)), 2),
                _s(t((2, 3)), -1),
                _s(t((2, 3)), dim=-3),
                _s(t(()), 0),
                _s(t((0,)), 1),
                _s(t((4, 6), True), 1),
            ]
        ),
        error_inputs=_errors(
            (
                (_T(2, 3, 4), 4),
                {},
                IndexError,
                r"Dimension out of range \(expected to be in range of \[-4, 3\], but got 4\)",
            ),
        ),
    ),
    OpInfo(
        "permute",
        torch.permute,
        _samples(
            lambda t: [
                _s(t((2, 3, 4)), (2, 0, 1)),
                _s(t((2, 3, 4)), (-1, 0, -2)),
                _s(t((4, 6), True), dims=(1, 0)),
                _s(t(()), ()),
                _s(t((0, 2)), (1, 0)),
            ]
        ),
        error_inputs=_errors(
            ((_T(2, 3, 4), (0, 1)), {}, ValueError, r"input.dim\(\) = 3 is not equal to len\(dims\) = 2"),
            ((_T(2, 3, 4), (0, 1, 1)), {}, ValueError, r"duplicate dims are not allowed"),
            ((_T(2, 3, 4), (0, 1, 3)), {}, IndexError, r"Dimension out of range"),
        ),
    ),
    OpInfo(
        "permute_method_varargs",
        lambda a, *d: a.permute(*d),
        _samples(lambda t: [_s(t((2, 3, 4)), 1, 2, 0), _s(t((2, 3)), (1, 0))]),
    ),
    OpInfo(
        "transpose",
        torch.transpose,
        _samples(
            lambda t: [
                _s(t((2, 3, 4)), 0, 2),
                _s(t((2, 3, 4)), -1, 1),
                _s(t((4, 6), True), 0, 1),
                _s(t(()), 0, -1),
                _s(t((0, 3)), 1, 0),
            ]
        ),
        error_inputs=_errors(
            (
                (_T(2, 3, 4), 0, 5),
                {},
                IndexError,
                r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 5\)",
            ),
        ),
    ),
    OpInfo("swapaxes", torch.swapaxes, _samples(lambda t: [_s(t((2, 3, 4)), 0, -1), _s(t((2, 3)), axis0=1, axis1=0)])),
    OpInfo("swapdims", lambda a, *x, **k: a.swapdims(*x, **k), _samples(lambda t: [_s(t((2, 3, 4)), 2, 1)])),
    OpInfo(
        "t",
        torch.t,
        _samples(lambda t: [_s(t((2, 3))), _s(t((3,))), _s(t(())), _s(t((4, 6), True))]),
        error_inputs=_errors(
            ((_T(2, 3, 4),), {}, ValueError, r"t\(\) expects a tensor with <= 2 dimensions, but self is 3D")
        ),
    ),
    OpInfo("T_property", lambda a: a.T, _samples(lambda t: [_s(t((2, 3))), _s(t((4, 6), True)), _s(t(()))])),
    OpInfo(
        "mT_property",
        lambda a: a.mT,
        _samples(lambda t: [_s(t((2, 3))), _s(t((2, 3, 4))), _s(t((0, 2, 3)))]),
        error_inputs=_errors(((_T(3),), {}, ValueError, r"only supported on matrices or batches of matrices. Got 1-D")),
    ),
    OpInfo(
        "movedim",
        torch.movedim,
        _samples(
            lambda t: [
                _s(t((2, 3, 4)), 0, 2),
                _s(t((2, 3, 4)), -1, 0),
                _s(t((2, 3, 4, 5)), (0, 1), (2, 3)),
                _s(t((2, 3, 4)), source=(2, 0), destination=(0, 1)),
            ]
        ),
        error_inputs=_errors(
            ((_T(2, 3, 4), 0, 5), {}, IndexError, r"Dimension out of range"),
            ((_T(2, 3, 4), (0, 1), (1,)), {}, ValueError, r"should contain the same number of dims as destination"),
            ((_T(2, 3, 4), (0, 0), (1, 2)), {}, ValueError, r"repeated dim in `source`"),
        ),
    ),
    OpInfo("moveaxis", torch.moveaxis, _samples(lambda t: [_s(t((2, 3, 4)), 1, -1)])),
    OpInfo(
        "expand",
        lambda a, *s, **k: a.expand(*s, **k),
        _samples(
            lambda t: [
                _s(t((3, 1)), 3, 4),
                _s(t((3, 1)), (2, 3, 4)),
                _s(t((3, 1)), -1, 5),
                _s(t(()), 2, 2),
                _s(t((1, 4)), size=(0, 4)),
                _s(t((4, 1), True), 4, 3),
            ]
        ),
        error_inputs=_errors(
            (
                (_T(2, 3, 4), 3, 3, 4),
                {},
                ValueError,
                r"The expanded size of the tensor \(3\) must match the existing size \(2\) at non-singleton dimension 0",
            ),
            ((_T(2, 3, 4), 4), {}, ValueError, r"number of sizes provided \(1\) must be greater or equal"),
            ((_T(3), -1, 3), {}, ValueError, r"isn't allowed in a leading, non-existing dimension 0"),
        ),
    ),
    OpInfo("expand_as", lambda a, b: a.expand_as(b), _samples(lambda t: [_s(t((3, 1)), t((2, 3, 4)))])),
    OpInfo("broadcast_to", torch.broadcast_to, _samples(lambda t: [_s(t((3, 1)), (2, 3, 4)), _s(t(()), size=(2,))])),
    OpInfo(
        "repeat",
        lambda a, *r: a.repeat(*r),
        _samples(
            lambda t: [
                _s(t((2, 3)), 2, 2),
                _s(t((2, 3)), (1, 2, 1)),
                _s(t(()), 3),
                _s(t((2, 3)), 0, 1),
                _s(t((4, 6), True), 1, 2),
            ]
        ),
        error_inputs=_errors(
            ((_T(2, 3, 4), 2), {}, ValueError, r"Number of dimensions of repeat dims can not be smaller"),
        ),
    ),
    OpInfo(
        "cat",
        torch.cat,
        _samples(
            lambda t: [
                _s([t((2, 3)), t((4, 3))]),
                _s([t((2, 3)), t((2, 1)), t((2, 0))], 1),
                _s((t((2, 3)), t((2, 3), True)), dim=-1),
                _s([t((0, 3)), t((2, 3))]),
                _s([t((3,)), t((0,))]),
                _s([t((2, 2, 2))]),
            ]
        ),
        error_inputs=_errors(
            (([],), {}, ValueError, r"expected a non-empty list of Tensors"),
            (([_T(2, 3), _T(2, 4)],), {}, ValueError, r"Sizes of tensors must match except in dimension 0"),
            (([_T(2, 3), _T(2, 3)], 2), {}, IndexError, r"Dimension out of range"),
            (([_T(), _T()],), {}, ValueError, r"zero-dimensional tensor \(at position 0\) cannot be concatenated"),
        ),
    ),
    OpInfo(
        "cat_mixed_dtypes",
        lambda a, b: torch.cat([a, b]),
        lambda dtype, device: [_s(make((2, 3), dtype, device), make((1, 3), torch.float64, device))],
    ),
    OpInfo("concat", torch.concat, _samples(lambda t: [_s([t((2, 3)), t((2, 3))], dim=1)])),
    OpInfo("concatenate", torch.concatenate, _samples(lambda t: [_s([t((2, 3)), t((2, 1))], axis=1)])),
    OpInfo(
        "stack",
        torch.stack,
        _samples(
            lambda t: [
                _s([t((2, 3)), t((2, 3))]),
                _s([t((2, 3)), t((2, 3), True), t((2, 3))], 2),
                _s([t((2, 3))], dim=-1),
                _s([t(()), t(())]),
                _s([t((0, 3)), t((0, 3))], 1),
            ]
        ),
        error_inputs=_errors(
            (
                ([_T(2, 3), _T(1, 3)],),
                {},
                ValueError,
                r"stack expects each tensor to be equal size, but got \[2, 3\] at entry 0 and \[1, 3\] at entry 1",
            ),
            (
                ([_T(2, 3)], 4),
                {},
                IndexError,
                r"Dimension out of range \(expected to be in range of \[-3, 2\], but got 4\)",
            ),
        ),
    ),
    OpInfo("hstack", torch.hstack, _samples(lambda t: [_s([t((2, 3)), t((2, 1))]), _s([t((3,)), t((2,))])])),
    OpInfo("vstack", torch.vstack, _samples(lambda t: [_s([t((2, 3)), t((1, 3))]), _s([t((3,)), t((3,))])])),
    OpInfo(
        "split",
        torch.split,
        _samples(
            lambda t: [
                _s(t((5, 3)), 2),
                _s(t((5, 3)), [1, 4]),
                _s(t((5, 3)), 1, dim=1),
                _s(t((5, 3)), (3, 0), -1),
                _s(t((0, 3)), 2),
                _s(t((4, 6), True), 4, 1),
            ]
        ),
        error_inputs=_errors(
            ((_T(2, 3), [1, 2]), {}, ValueError, r"split_sizes to sum exactly to 2"),
            ((_T(2, 3), 0), {}, ValueError, r"split_size can only be 0 if dimension size is 0"),
        ),
    ),
    OpInfo(
        "split_method", lambda a, *x, **k: a.split(*x, **k), _samples(lambda t: [_s(t((6, 2)), 4), _s(t((6, 2)), 1, 1)])
    ),
    OpInfo(
        "chunk",
        torch.chunk,
        _samples(
            lambda t: [
                _s(t((5, 3)), 2),
                _s(t((6, 3)), 3),
                _s(t((6, 3)), 4),
                _s(t((2, 3)), 3, dim=1),
                _s(t((0, 3)), 2),
            ]
        ),
        error_inputs=_errors(((_T(2, 3), 0), {}, ValueError, r"chunk expects `chunks` to be greater than 0, got: 0")),
    ),
    OpInfo(
        "tensor_split",
        torch.tensor_split,
        _samples(
            lambda t: [_s(t((7, 3)), 3), _s(t((7, 3)), [1, 5]), _s(t((7, 3)), (2, -1, 9), dim=0), _s(t((2, 5)), 2, 1)]
        ),
    ),
    OpInfo(
        "unbind",
        torch.unbind,
        _samples(lambda t: [_s(t((3, 2))), _s(t((3, 2)), 1), _s(t((3, 2)), dim=-1), _s(t((2, 0)))]),
        error_inputs=_errors(((_T(2, 3), 2), {}, IndexError, r"Dimension out of range")),
    ),
    OpInfo("iterate_tensor", lambda a: list(a), _samples(lambda t: [_s(t((3, 2))), _s(t((1,)))])),
    OpInfo(
        "narrow",
        torch.narrow,
        _samples(
            lambda t: [
                _s(t((5, 3)), 0, 1, 3),
                _s(t((5, 3)), -1, -2, 2),
                _s(t((5, 3)), dim=1, start=0, length=0),
                _s(t((4, 6), True), 1, 2, 4),
            ]
        ),
        error_inputs=_errors(
            ((_T(2, 3), 0, 1, 5), {}, ValueError, r"start \(1\) \+ length \(5\) exceeds dimension size \(2\)"),
            ((_T(2, 3), 0, 3, 0), {}, IndexError, r"start out of range"),
        ),
    ),
    OpInfo(
        "select",
        torch.select,
        _samples(
            lambda t: [
                _s(t((5, 3)), 0, 1),
                _s(t((5, 3)), -1, -1),
                _s(t((5, 3)), dim=1, index=2),
                _s(t((4, 6), True), 1, 0),
            ]
        ),
        error_inputs=_errors(
            (
                (_T(2, 3, 4), 0, 2),
                {},
                IndexError,
                r"select\(\): index 2 out of range for tensor of size \[2, 3, 4\] at dimension 0",
            ),
        ),
    ),
    OpInfo(
        "diagonal",
        torch.diagonal,
        _samples(
            lambda t: [
                _s(t((3, 4))),
                _s(t((3, 4)), 1),
                _s(t((3, 4)), -2),
                _s(t((3, 4)), 5),
                _s(t((2, 3, 4)), offset=0, dim1=-1, dim2=0),
                _s(t((4, 6), True), -1, 1, 0),
            ]
        ),
        error_inputs=_errors(((_T(2, 3), 0, 0, 0), {}, ValueError, r"diagonal dimensions cannot be identical")),
    ),
    OpInfo(
        "flip",
        torch.flip,
        _samples(
            lambda t: [_s(t((2, 3, 4)), (0, 2)), _s(t((2, 3)), [-1]), _s(t((4, 6), True), dims=(0,)), _s(t(()), ())]
        ),
        dtypes=ALL,
        error_inputs=_errors(
            ((_T(2, 3), (0, 0)), {}, ValueError, r"dim 0 appears multiple times in the list of dims"),
            ((_T(2, 3), (2,)), {}, IndexError, r"Dimension out of range"),
        ),
    ),
    OpInfo("flip_method_varargs", lambda a, *d: a.flip(*d), _samples(lambda t: [_s(t((2, 3)), 0, 1)])),
    OpInfo(
        "fliplr",
        torch.fliplr,
        _samples(lambda t: [_s(t((2, 3))), _s(t((2, 3, 4)))]),
        error_inputs=_errors(((_T(3),), {}, ValueError, r"Input must be >= 2-d")),
    ),
    OpInfo("flipud", torch.flipud, _samples(lambda t: [_s(t((2, 3))), _s(t((3,)))])),
    OpInfo(
        "roll",
        torch.roll,
        _samples(
            lambda t: [
                _s(t((4, 3)), 1),
                _s(t((4, 3)), -5, 0),
                _s(t((4, 3)), (1, 2), (0, 1)),
                _s(t((4, 3)), shifts=7, dims=-1),
                _s(t((0, 3)), 1, 0),
                _s(t((4, 6), True), 2, 1),
            ]
        ),
        error_inputs=_errors(
            ((_T(2, 3), (1, 2), 0), {}, ValueError, r"shifts and dimensions must align. shifts: 2, dims:1"),
            ((_T(2, 3), 1, 2), {}, IndexError, r"Dimension out of range"),
        ),
    ),
    OpInfo(
        "repeat_interleave",
        torch.repeat_interleave,
        _samples(
            lambda t: [
                _s(t((2, 3)), 2),
                _s(t((2, 3)), 3, 1),
                _s(t((2, 3, 4), True), 2, dim=-2),
                _s(t((2, 3)), 0, 0),
                _s(t(()), 2),
                _s(t((0, 3)), 2, 1),
                _s(t((2, 3)), 2, 0, output_size=4),
            ]
        ),
        dtypes=ALL,
        error_inputs=_errors(
            ((_T(2, 3), -1), {}, ValueError, r"Repeats must be non-negative"),
            ((_T(2, 3), 2, 2), {}, IndexError, r"Dimension out of range"),
            ((_T(2, 3), 2, 0), {"output_size": 5}, ValueError, r"output_size 5 does not match"),
            ((_T(2, 3), _T(2), 0), {}, TypeError, r"repeats has to be Long or Int tensor"),
        ),
    ),
    OpInfo(
        "repeat_interleave_method",
        lambda a, *args, **kwargs: a.repeat_interleave(*args, **kwargs),
        _samples(lambda t: [_s(t((3, 2)), 2, 0), _s(t((4,)), 3)]),
    ),
    OpInfo(
        "diff",
        torch.diff,
        _samples(
            lambda t: [
                _s(t((5,))),
                _s(t((3, 6)), 2),
                _s(t((4, 3)), 1, 0),
                _s(t((2, 5)), n=3, dim=-1, prepend=t((2, 1)), append=t((2, 2))),
                _s(t((2, 5)), prepend=t((2, 0))),
                _s(t((3, 4)), dim=0, append=t((1, 4))),
                _s(t((2, 3)), 4),  # n past the length: an empty dim
                _s(t((2, 3)), 0),
                _s(t((0, 3)), 1, 0),
                _s(t((4, 6), True), 1, 1),
            ]
        ),
        dtypes=ALL,
        error_inputs=_errors(
            ((_T(4), -1), {}, ValueError, r"order must be non-negative but got -1"),
            ((_T(),), {}, ValueError, r"diff expects input to be at least one-dimensional"),
            ((_T(2, 3), 1, -1, _T(3)), {}, ValueError, r"same dimension as input"),
            ((_T(2, 3), 1, 2), {}, IndexError, r"Dimension out of range"),
            ((_T(2, 3), 1, -1, None, _T(3, 1)), {}, ValueError, r"Sizes of tensors must match except in dimension 1"),
        ),
    ),
    OpInfo(
        "diff_method",
        lambda a, *args, **kwargs: a.diff(*args, **kwargs),
        _samples(lambda t: [_s(t((3, 4)), 1, 0), _s(t((6,)), prepend=t((1,)))]),
    ),
    OpInfo(
        "pad",
        F.pad,
        _samples(
            lambda t: [
                _s(t((2, 3)), (1, 2)),
                _s(t((2, 3)), (1, 0, 0, 2), value=3),
                _s(t((2, 3, 4)), [-1, 1, 2, -1]),
                _s(t((4, 6), True), (0, 0, 1, 1)),
                _s(t((0, 3)), (1, 1)),
            ]
        ),
        error_inputs=_errors(
            ((_T(2, 3), (1,)), {}, ValueError, r"Padding length must be divisible by 2"),
            (
                (_T(2, 3), (1, 1, 1, 1, 1, 1)),
                {},
                ValueError,
                r"Padding length should be less than or equal to two times",
            ),
        ),
    ),
    OpInfo(
        "pad_modes",
        F.pad,
        lambda dtype, device: [
            _s(make((1, 2, 5), dtype, device), (2, 1), mode="reflect"),
            _s(make((1, 2, 3, 4), dtype, device), (1, 2, 2, 0), mode="replicate"),
            _s(make((1, 2, 5), dtype, device), (3, 2), mode="circular"),
            _s(make((1, 2, 3, 4), dtype, device), (1, 1, 1, 1), mode="reflect"),
        ],
        dtypes=(torch.float32, torch.float64, torch.bfloat16),
    ),
    OpInfo(
        "tril",
        torch.tril,
        _samples(
            lambda t: [
                _s(t((3, 4))),
                _s(t((3, 4)), 1),
                _s(t((2, 3, 4)), diagonal=-1),
                _s(t((4, 6), True), 10),
                _s(t((0, 3))),
            ]
        ),
        dtypes=ALL,
        error_inputs=_errors(((_T(3),), {}, ValueError, r"input tensor must have at least 2 dimensions")),
    ),
    OpInfo(
        "triu",
        torch.triu,
        _samples(lambda t: [_s(t((3, 4))), _s(t((3, 4)), -1), _s(t((2, 4, 3)), diagonal=2)]),
        dtypes=ALL,
    ),
]

for _info in opinfos:
    if _info.dtypes is FLOATS_AND_INT and _info.name in ("cat", "stack", "reshape", "permute", "transpose"):
        _info.dtypes = ALL
