"""torch.nn.functional resampling: interpolate in every mode, pixel_shuffle and pixel_unshuffle
(collected into the database by ``tests/opinfos/nn.py``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.opinfos.core import FLOATS, FLOATS_AND_INT, ErrorInput, OpInfo, SampleInput, make

# Note [Upsampling kernels] in thunder/torch/nn_resample.py: the modes run eager's aten kernels.
KERNEL = (
    ("test_decomposition_vs_torch", None, "eager's aten kernel, no prim decomposition (Note [Upsampling kernels])"),
)


def _interpolate_samples(dtype, device):
    m = lambda *s: make(s, dtype, device)  # noqa: E731
    yield SampleInput((m(2, 3, 5),), {"scale_factor": 2.5})
    yield SampleInput((m(2, 3, 4, 5),), {"size": (7, 3)})
    yield SampleInput((m(1, 2, 3, 2, 3),), {"scale_factor": (2, 1, 1.5), "mode": "nearest-exact"})
    yield SampleInput((m(2, 3, 5),), {"size": 8, "mode": "linear", "align_corners": True})
    yield SampleInput((m(2, 3, 4, 5),), {"scale_factor": 1.7, "mode": "bilinear", "recompute_scale_factor": True})
    yield SampleInput((m(2, 3, 7, 9),), {"scale_factor": 0.6, "mode": "bilinear", "antialias": True})
    yield SampleInput((m(2, 3, 4, 5),), {"size": (5, 9), "mode": "bicubic"})
    yield SampleInput((m(1, 2, 3, 3, 2),), {"scale_factor": 2, "mode": "trilinear", "align_corners": False})
    yield SampleInput((m(2, 3, 6, 8),), {"scale_factor": 0.5, "mode": "area"})


def _interpolate_errors(device):
    x = make((2, 3, 4), torch.float32, device)
    yield ErrorInput(SampleInput((x,), {"size": 3, "mode": "bilinear"}), NotImplementedError,
                     r"Got 3D input, but bilinear mode needs 4D input")  # fmt: skip


def _shuffle_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    yield SampleInput((m(2, 8, 3, 4), 2))
    yield SampleInput((m(9, 2, 2), 3))
    yield SampleInput((m(2, 1, 4, 3, 2, noncontiguous=True), 1))
    yield SampleInput((m(3, 2, 4, 2, 2), 2))


def _unshuffle_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    yield SampleInput((m(2, 2, 4, 6), 2))
    yield SampleInput((m(2, 6, 6), 3))
    yield SampleInput((m(2, 2, 1, 4, 2, noncontiguous=True), 2))


def _shuffle_errors(device):
    yield ErrorInput(SampleInput((make((2, 7, 3, 3), torch.float32, device), 2)), ValueError,
                     r"pixel_shuffle expects its input's 'channel' dimension to be divisible by the square")  # fmt: skip
    yield ErrorInput(SampleInput((make((3, 3), torch.float32, device), 1)), ValueError, r"at least 3 dimensions")
    yield ErrorInput(SampleInput((make((4, 3, 3), torch.float32, device), 0)), ValueError, r"must be greater than 0")


def _unshuffle_errors(device):
    yield ErrorInput(SampleInput((make((2, 2, 5, 4), torch.float32, device), 2)), ValueError,
                     r"pixel_unshuffle expects height and width to be divisible by downscale_factor")  # fmt: skip


def _channel_shuffle_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    yield SampleInput((m(2, 6, 3), 2))
    yield SampleInput((m(1, 6, 2, 2, noncontiguous=True), 3))
    yield SampleInput((m(2, 4, 1, 2, 2), 1))


def _channel_shuffle_errors(device):
    yield ErrorInput(SampleInput((make((2, 5, 3), torch.float32, device), 2)), RuntimeError,
                     r"Number of channels must be divisible by groups. Got 5 channels and 2 groups.")  # fmt: skip
    yield ErrorInput(SampleInput((make((5,), torch.float32, device), 1)), RuntimeError, r"expects input with > 2 dims")


opinfos: list[OpInfo] = [
    OpInfo("F.interpolate", F.interpolate, _interpolate_samples, dtypes=FLOATS[:2], skips=KERNEL,
           error_inputs=_interpolate_errors),
    OpInfo("F.pixel_shuffle", F.pixel_shuffle, _shuffle_samples, dtypes=FLOATS_AND_INT, error_inputs=_shuffle_errors),
    OpInfo("F.channel_shuffle", F.channel_shuffle, _channel_shuffle_samples, dtypes=FLOATS_AND_INT,
           error_inputs=_channel_shuffle_errors),
    OpInfo("F.pixel_unshuffle", F.pixel_unshuffle, _unshuffle_samples, dtypes=FLOATS_AND_INT,
           error_inputs=_unshuffle_errors),
]  # fmt: skip
