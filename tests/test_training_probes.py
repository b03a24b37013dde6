"""Findings of probing training loops of timm, torchvision and transformers models under ``thunder.jit``,
each reduced to the pattern that failed and checked against eager PyTorch."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("lengths_as", [torch.tensor, list])
def test_ctc_loss_with_lengths_given_as_tensors(reduction, lengths_as):
    """transformers' ``Wav2Vec2ForCTC`` passes the lengths as tensors: torch reads their values, which the
    fake run that gives the output's shape cannot (it refused the op); the shape does not depend on them."""

    def loss(x, targets, input_lengths, target_lengths):
        return F.ctc_loss(x.log_softmax(-1), targets, input_lengths, target_lengths, reduction=reduction)

    torch.manual_seed(0)
    x = torch.randn(10, 2, 5, requires_grad=True)
    targets = torch.randint(1, 5, (2, 3))
    lengths = lengths_as([10, 8]), lengths_as([3, 2])
    expected = loss(x, targets, *lengths)
    x2 = x.detach().clone().requires_grad_(True)
    actual = thunder.jit(loss)(x2, targets, *lengths)
    torch.testing.assert_close(actual, expected)
    expected.sum().backward()
    actual.sum().backward()
    torch.testing.assert_close(x2.grad, x.grad)
