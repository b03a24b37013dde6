"""Findings of probing training loops of timm, torchvision and transformers models under ``thunder.jit``,
each reduced to the pattern that failed and checked against eager PyTorch."""

from __future__ import annotations

import copy

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


def test_wav2vec2_for_ctc_trains_as_in_eager():
    """The model the ``ctc_loss`` finding came from: its loss and gradients, with random weights."""
    transformers = pytest.importorskip("transformers")
    config = transformers.Wav2Vec2Config(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, conv_dim=(16, 16),
        conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=2,
        vocab_size=20, mask_time_prob=0.0, hidden_dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        feat_proj_dropout=0.0, final_dropout=0.0, layerdrop=0.0, pad_token_id=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.Wav2Vec2ForCTC(config).train()
    jitted = thunder.jit(copy.deepcopy(model))
    inputs = {"input_values": torch.randn(2, 400), "labels": torch.randint(1, 20, (2, 5))}
    expected, actual = model(**inputs).loss, jitted(**inputs).loss
    torch.testing.assert_close(actual, expected)
    expected.backward()
    actual.backward()
    for (name, p), q in zip(model.named_parameters(), jitted.parameters()):
        torch.testing.assert_close(q.grad, p.grad, atol=1e-4, rtol=1e-4, msg=lambda m, name=name: f"{name}: {m}")
