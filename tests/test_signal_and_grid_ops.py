"""Ops found unsupported by probing programs from outside, run as eager ops (Note [Eager ops]): ``F.affine_grid``
(a spatial transformer's grid) and ``torch.istft`` (whose window check reads values), against eager PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder


def _check(fn, *args):
    clones = [a.detach().clone().requires_grad_(a.requires_grad) for a in args]
    expected, got = fn(*args), thunder.jit(fn)(*clones)
    torch.testing.assert_close(got, expected)
    sum(t.sum() for t in expected).backward()
    sum(t.sum() for t in got).backward()
    for a, c in zip(args, clones):
        torch.testing.assert_close(c.grad, a.grad)


@pytest.mark.parametrize("size", [(1, 2, 4, 4), (1, 2, 3, 3, 2)])
def test_a_spatial_transformer_s_grid(size):
    def f(x, theta):
        grid = F.affine_grid(theta, size, align_corners=False)
        sampled = F.grid_sample(x, grid, align_corners=False) if len(size) == 4 else grid
        return sampled, F.affine_grid(theta, size, align_corners=True)

    torch.manual_seed(0)
    x = torch.randn(size[:2] + (5,) * (len(size) - 2), requires_grad=True)
    theta = torch.randn(1, len(size) - 2, len(size) - 1, requires_grad=True)
    _check(f, x, theta)


def test_an_inverse_short_time_fourier_transform():
    def f(x):
        window = torch.hann_window(16)
        spec = torch.stft(x, 16, hop_length=4, window=window, return_complex=True)
        return (
            torch.istft(spec, 16, hop_length=4, window=window, length=60),
            torch.istft(spec[0], 16, hop_length=4, window=window),
        )

    torch.manual_seed(0)
    _check(f, torch.randn(2, 64, requires_grad=True))


def test_an_inverse_transform_whose_window_fails_the_check_raises_eager_s_error():
    def f(x):
        window = torch.hann_window(16)
        return torch.istft(torch.stft(x, 16, hop_length=4, window=window, return_complex=True), 16, hop_length=4,
                           window=window, center=False)  # fmt: skip

    with pytest.raises(RuntimeError, match="window overlap add min"):
        f(torch.randn(2, 64))
    with pytest.raises(RuntimeError, match="window overlap add min"):
        thunder.jit(f)(torch.randn(2, 64))
