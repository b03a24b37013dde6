"""Real programs: torch.nn models and Hugging Face transformers models built from small
configs with random weights (nothing is downloaded). Forward and backward match eager."""

from __future__ import annotations

import pytest
import torch

import thunder
from tests import zoo

transformers = pytest.importorskip("transformers")


# The zoo's builders (tests/zoo.py): GPT-2, Llama and BERT from the same tiny configs.
MODELS = {name: zoo.ZOO[name].build for name in ("gpt2", "llama", "bert")}


@pytest.mark.parametrize("name", list(MODELS))
def test_forward_matches_eager(name):
    torch.manual_seed(0)
    model = MODELS[name]().eval()
    ids = torch.randint(0, 100, (2, 8))
    tm = thunder.jit(model)
    out = tm(ids)
    expected = model(ids)
    assert type(out) is type(expected)
    torch.testing.assert_close(out.logits, expected.logits)
    tm(ids)
    assert thunder.cache_hits(tm) == 1


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_backward_matches_eager(name):
    torch.manual_seed(0)
    model = MODELS[name]().train()
    model.config.attn_pdrop = 0.0
    ids = torch.randint(0, 100, (2, 8))
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    tm = thunder.jit(model)
    loss = tm(ids, labels=ids).loss
    loss.backward()
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad()
    model(ids, labels=ids).loss.backward()
    assert grads
    for n, p in model.named_parameters():
        if p.grad is not None:
            torch.testing.assert_close(grads[n], p.grad, msg=n)


def test_nn_transformer_encoder_layer():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(thunder.jit(layer)(x), layer(x))


def test_conv_net():
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 4, 3, stride=2), torch.nn.Flatten(), torch.nn.LazyLinear(10),
    ).eval()  # fmt: skip
    x = torch.randn(2, 3, 8, 8)
    expected = net(x)
    torch.testing.assert_close(thunder.jit(net)(x), expected)


def test_returned_cache_objects_hold_real_tensors():
    torch.manual_seed(0)
    model = MODELS["gpt2"]().eval()
    ids = torch.randint(0, 100, (2, 8))
    tm = thunder.jit(model)
    out, expected = tm(ids), model(ids)
    keys = out.past_key_values.layers[0].keys
    assert type(keys) is torch.Tensor
    torch.testing.assert_close(keys, expected.past_key_values.layers[0].keys)
    assert tm(ids).past_key_values is not out.past_key_values  # a new object per call

