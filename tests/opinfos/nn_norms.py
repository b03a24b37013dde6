"""torch.nn.functional normalisations: layer_norm, rms_norm, group_norm, batch_norm,
instance_norm, normalize (collected into the database by ``tests/opinfos/nn.py``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.opinfos.core import FLOATS, ErrorInput, OpInfo, SampleInput, make

_TOL = {torch.bfloat16: 3e-2, torch.float32: 1e-4}


def _layer_norm_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    yield SampleInput((m(3, 4), (4,)))
    yield SampleInput((m(3, 4), [4], m(4), m(4)))
    yield SampleInput((m(2, 3, 4), (3, 4)), {"weight": m(3, 4), "bias": m(3, 4), "eps": 1e-3})
    yield SampleInput((m(2, 3, 4), torch.Size([4])), {"bias": m(4)})
    yield SampleInput((m(4, 6, noncontiguous=True), (6,), m(6)))
    yield SampleInput((m(0, 4), (4,), m(4), m(4)))
    yield SampleInput((m(5), (5,)))


def _layer_norm_errors(device):
    f = torch.float32
    yield ErrorInput(
        SampleInput((make((3, 5), f, device), (4,))),
        ValueError,
        r"ltorch.layer_norm: Given normalized_shape=\[4\], expected input with shape \[\*, 4\], but got input of size\[3, 5\]",
    )
    yield ErrorInput(
        SampleInput((make((3, 4), f, device), (4,), make((5,), f, device))),
        ValueError,
        r"Expected weight to be of same shape as normalized_shape, but got weight of shape \[5\]",
    )
    yield ErrorInput(SampleInput((make((3, 4), torch.int64, device), (4,))), TypeError, r"floating-point")
    yield ErrorInput(SampleInput((make((3, 4), f, device), 4)), TypeError, r"argument 'normalized_shape' must be tuple of ints, not int")  # fmt: skip


def _rms_norm_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    yield SampleInput((m(3, 4), (4,)))
    yield SampleInput((m(3, 4), [4], m(4)))
    yield SampleInput((m(2, 3, 4), (3, 4)), {"weight": m(3, 4), "eps": 1e-3})
    yield SampleInput((m(4, 6, noncontiguous=True), (6,), m(6), 1e-6))
    yield SampleInput((m(0, 4), (4,), m(4)))


def _rms_norm_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make((3, 5), f, device), (4,))), ValueError, r"ltorch.rms_norm: Given normalized_shape=\[4\]")  # fmt: skip


def _group_norm_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    yield SampleInput((m(2, 6, 5), 3))
    yield SampleInput((m(2, 6, 4, 3), 2, m(6), m(6)))
    yield SampleInput((m(2, 6), 6), {"weight": m(6), "eps": 1e-3})
    yield SampleInput((m(3, 4, 6, noncontiguous=True), 1, None, m(4)))
    yield SampleInput((m(0, 4, 3), 2))


def _group_norm_errors(device):
    f = torch.float32
    yield ErrorInput(
        SampleInput((make((2, 6, 4), f, device), 4)),
        ValueError,
        r"Expected number of channels in input to be divisible by num_groups, but got input of shape \[2, 6, 4\] and num_groups=4",
    )
    yield ErrorInput(SampleInput((make((6,), f, device), 2)), ValueError, r"Expected at least 2 dimensions")  # fmt: skip


def _batch_norm_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    pos = lambda *s: make(s, dtype, device, low=0.5, high=2.0)  # noqa: E731
    # eval: running stats required
    yield SampleInput((m(4, 3), m(3), pos(3)))
    yield SampleInput((m(4, 3, 5), m(3), pos(3), m(3), m(3)), {"eps": 1e-3})
    # training without running stats
    yield SampleInput((m(4, 3, 5), None, None), {"training": True})
    yield SampleInput((m(4, 3, 2, 2), None, None, m(3), m(3), True))
    # training with running stats: updated in place
    yield SampleInput((m(4, 3, 5), m(3), pos(3)), {"training": True, "momentum": 0.3})
    yield SampleInput((m(4, 3, 5, noncontiguous=True), m(3), pos(3), m(3), m(3)), {"training": True})


def _batch_norm_errors(device):
    f = torch.float32
    yield ErrorInput(
        SampleInput((make((1, 3), f, device), None, None), {"training": True}),
        ValueError,
        r"Expected more than 1 value per channel when training, got input size \[1, 3\]",
    )
    yield ErrorInput(
        SampleInput((make((4, 3), f, device), None, None)),
        ValueError,
        r"running_mean and running_var must be defined in evaluation mode",
    )
    yield ErrorInput(SampleInput((make((4, 3), f, device), make((4,), f, device), make((3,), f, device))), ValueError,
                     r"Expected running_mean to be of same shape as the channel dim of input")  # fmt: skip


def _instance_norm_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    pos = lambda *s: make(s, dtype, device, low=0.5, high=2.0)  # noqa: E731
    yield SampleInput((m(2, 3, 5),))
    yield SampleInput((m(2, 3, 4, 2),), {"weight": m(3), "bias": m(3), "eps": 1e-3})
    # running statistics: updated in place with the batch's, or used (use_input_stats=False)
    yield SampleInput((m(2, 3, 5), m(3), pos(3)), {"momentum": 0.3})
    yield SampleInput((m(2, 3, 2, 2, 2, noncontiguous=True), m(3), pos(3), m(3), m(3)), {"use_input_stats": False})


def _instance_norm_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make((2, 3, 1), f, device),)), ValueError, r"Expected more than 1 spatial element")
    yield ErrorInput(SampleInput((make((2, 3, 4), f, device),), {"use_input_stats": False}), ValueError,
                     r"Expected running_mean and running_var to be defined when use_input_stats is false")  # fmt: skip


def _normalize_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    yield SampleInput((m(3, 4),))
    yield SampleInput((m(2, 3, 4),), {"p": 1.0, "dim": -1, "eps": 1e-3})
    yield SampleInput((m(3, 4, noncontiguous=True),), {"p": 3, "dim": 0})
    yield SampleInput((m(3, 4),), {"p": float("inf")})


opinfos: list[OpInfo] = [
    OpInfo(
        "F.layer_norm",
        F.layer_norm,
        _layer_norm_samples,
        dtypes=FLOATS,
        error_inputs=_layer_norm_errors,
        atol=_TOL,
        rtol=_TOL,
    ),
    OpInfo(
        "F.rms_norm", F.rms_norm, _rms_norm_samples, dtypes=FLOATS, error_inputs=_rms_norm_errors, atol=_TOL, rtol=_TOL
    ),
    OpInfo(
        "F.group_norm",
        F.group_norm,
        _group_norm_samples,
        dtypes=FLOATS,
        error_inputs=_group_norm_errors,
        grad=(
            (
                "numeric",
                lambda s: s.args[2:3] == (None,) and len(s.args) > 3,
                "a bias without a weight: torch's group_norm backward raises 'tensor does not have a device'",
            ),
        ),
        atol=_TOL,
        rtol=_TOL,
    ),
    OpInfo(
        "F.batch_norm",
        F.batch_norm,
        _batch_norm_samples,
        dtypes=FLOATS,
        error_inputs=_batch_norm_errors,
        mutates=True,
        no_grad_args=(1, 2, "running_mean", "running_var"),  # buffers: torch does not differentiate them
        atol=_TOL,
        rtol=_TOL,
    ),
    OpInfo(
        "F.instance_norm",
        F.instance_norm,
        _instance_norm_samples,
        dtypes=FLOATS,
        error_inputs=_instance_norm_errors,
        mutates=True,
        no_grad_args=(1, 2, "running_mean", "running_var"),  # buffers: torch does not differentiate them
        atol=_TOL,
        rtol=_TOL,
    ),
    OpInfo("F.normalize", F.normalize, _normalize_samples, dtypes=FLOATS, atol=_TOL, rtol=_TOL),
]
