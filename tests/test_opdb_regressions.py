"""Calls where PyTorch's op database once found thunder differing from eager (or refusing what
eager accepts): each runs eagerly and through ``thunder.jit`` and must agree in values, dtype,
aliasing and gradients. The database run itself is ``tests/test_opdb.py``."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder


def _x(*shape, dtype=torch.float32, grad=False):
    g = torch.Generator().manual_seed(sum(shape) + len(shape))
    if dtype.is_floating_point or dtype.is_complex:
        t = torch.randn(shape, generator=g, dtype=dtype)
    else:
        t = torch.randint(-4, 5, shape, generator=g, dtype=dtype)
    return t.requires_grad_(grad)


CASES = {
    "diff n=0 ignores prepend and append": (lambda x, p: torch.diff(x, 0, 0, p), lambda: (_x(5, 5, grad=True), _x(1, 5, grad=True))),
    "replicate pad cropping past the edge": (lambda x: F.pad(x, (-4, 5, 2, -3), mode="replicate"), lambda: (_x(2, 3, 4, 4, grad=True),)),
    "gather with an empty uint8 index": (lambda x, i: torch.gather(x, 0, i), lambda: (_x(5, grad=True), torch.zeros(2, 0, dtype=torch.uint8))),
    "addmm of integers with float beta and alpha": (
        lambda a: torch.addmm(a, a, a, beta=-1.7, alpha=2.5),
        lambda: (_x(3, 3, dtype=torch.int64),),
    ),
    "integer conv1d": (lambda x, w: F.conv1d(x, w, padding=1), lambda: (_x(1, 2, 5, dtype=torch.int64), _x(3, 2, 2, dtype=torch.int64))),
    "complex conv_transpose1d": (
        lambda x, w: F.conv_transpose1d(x, w, stride=2),
        lambda: (_x(1, 2, 5, dtype=torch.complex64), _x(2, 3, 2, dtype=torch.complex64)),
    ),
    "integer l1_loss": (lambda x, y: F.l1_loss(x, y, reduction="sum"), lambda: (_x(5, dtype=torch.int64), _x(5, 1, dtype=torch.int64))),
    "complex l1_loss": (lambda x, y: F.l1_loss(x, y), lambda: (_x(5, dtype=torch.complex64, grad=True), _x(5, dtype=torch.complex64))),
    "complex normalize": (lambda x: F.normalize(x), lambda: (_x(3, 4, dtype=torch.complex64, grad=True),)),
    "complex rms_norm": (lambda x: F.rms_norm(x, (4,)), lambda: (_x(3, 4, dtype=torch.complex64, grad=True),)),
    "nuclear norm over two dims": (lambda x: torch.norm(x, "nuc", dim=(0, 2)), lambda: (_x(2, 3, 4, dtype=torch.float64, grad=True),)),
    "is_signed (uint8)": (lambda x: x * 2 if torch.is_signed(x) else x + 1, lambda: (torch.ones(3, dtype=torch.uint8),)),
    "is_signed (int8)": (lambda x: x * 2 if torch.is_signed(x) else x + 1, lambda: (torch.ones(3, dtype=torch.int8),)),
    "linalg.diagonal": (lambda x: torch.linalg.diagonal(x, offset=1), lambda: (_x(2, 3, 4, grad=True),)),
    "huber_loss": (lambda x, y: F.huber_loss(x, y, delta=0.5), lambda: (_x(4, 3, grad=True), _x(4, 3))),
    "smooth_l1_loss": (lambda x, y: F.smooth_l1_loss(x, y, beta=0.5), lambda: (_x(4, 3, grad=True), _x(4, 3))),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_eager(name: str):
    fn, make = CASES[name]
    args = make()
    expected = fn(*args)
    actual = thunder.jit(fn)(*args)
    torch.testing.assert_close(actual, expected, atol=1e-5, rtol=1e-5)
    assert actual.dtype == expected.dtype
    aliased = actual.numel() and any(actual.data_ptr() == a.data_ptr() for a in args)
    assert not aliased, "the result aliases an input; eager's does not"
    leaves = [a for a in args if a.requires_grad]
    if leaves:
        g = torch.randn_like(expected)
        want = torch.autograd.grad(expected, leaves, g, allow_unused=True)
        got = torch.autograd.grad(actual, leaves, g, allow_unused=True)
        for w, a in zip(want, got):
            if w is None:  # eager's input was not used: thunder's gradient is None or zeros
                assert a is None or not a.any()
            else:
                torch.testing.assert_close(a, w, atol=1e-5, rtol=1e-5)


def test_a_value_dependent_argument_is_an_unsupported_use():
    """Arguments whose values set an output's shape are a clear UnsupportedOpError naming the op."""
    with pytest.raises(thunder.core.errors.UnsupportedOpError, match=r"ltorch\.linspace: start is a tensor"):
        thunder.jit(lambda x: torch.linspace(x[0], 1.0, 5))(_x(5))  # (narrow's tensor start: tests/test_eager_gaps.py)
