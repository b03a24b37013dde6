"""Training loops: torch.nn and Hugging Face models take 5 optimizer steps under thunder.jit and
in eager, from identical copies and with the same inputs per step; afterwards every parameter
(and buffer) agrees with eager, thunder's own backward did the work, and steps 2..5 hit the cache.

Tolerances (float32, ``torch.testing.assert_close``; largest differences observed with 1, 2
and 8 threads in brackets):
- SGD (lr 0.1, momentum 0.9): ``SGD_TOL``, atol 1e-6 and rtol 1.3e-6, ten times tighter in atol
  than the float32 default [1.2e-7].
- AdamW (lr 1e-3, eps 1e-6, weight decay 0.01): ``ADAMW_TOL``, atol = rtol = 1e-4 [4.3e-5 in
  the conv net's first bias, 5.4e-6 in the encoder layer's ``in_proj_bias``, below 1e-6
  elsewhere]. Adam divides each gradient by its running RMS, so an element whose true gradient
  is zero, where eager and thunder both compute rounding noise with different signs, moves by up
  to ``lr`` per step in a direction the noise decides. Such elements: the key part of an
  attention's input-projection bias (softmax ignores a shift of all scores; noise ~1e-10) and the
  bias of a convolution followed by a train-mode BatchNorm (which subtracts the batch mean; noise
  ~1e-8). ``eps=1e-6`` (instead of 1e-8) keeps that noise from being normalized into full steps,
  while real gradients, orders of magnitude above it, are still divided by their RMS; with the
  default eps the encoder layer's runs differ by 4e-4.
- The losses of each step: atol = rtol = 1e-5.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import thunder
from tests.test_models import MODELS as HF_MODELS
from thunder.core.errors import ThunderRuntimeError

STEPS = 5
SGD_TOL = {"atol": 1e-6, "rtol": 1.3e-6}
ADAMW_TOL = {"atol": 1e-4, "rtol": 1e-4}
LOSS_TOL = {"atol": 1e-5, "rtol": 1e-5}


def _mlp():
    return torch.nn.Sequential(
        torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)
    )


def _conv_net():
    # The conv net of tests/test_models.py, BatchNorm in train mode, with an eager Linear instead of
    # LazyLinear (both copies have their parameters before the optimizers are made).
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 4, 3, stride=2), torch.nn.Flatten(), torch.nn.Linear(36, 10),
    )  # fmt: skip


def _conv_net_without_bias():
    # Convolutions without bias (as usual before a BatchNorm), no BatchNorm: convolution_backward
    # computes no bias gradient (before 970e066 its generated line bound no outputs).
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.ReLU(),
        torch.nn.Conv2d(8, 4, 3, stride=2, bias=False), torch.nn.Flatten(), torch.nn.Linear(36, 10),
    )  # fmt: skip


def _encoder_layer():
    return torch.nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, batch_first=True, dropout=0.0)


class _SequenceModel(torch.nn.Module):
    """A small sequence classifier without recurrence: embedding, layer norm, a 1-d convolution
    over time, mean pooling, a linear head."""

    def __init__(self, vocab: int = 50, dim: int = 16):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, dim)
        self.norm = torch.nn.LayerNorm(dim)
        self.conv = torch.nn.Conv1d(dim, dim, 3, padding=1)
        self.head = torch.nn.Linear(dim, vocab)

    def forward(self, ids):
        x = self.norm(self.embedding(ids))
        x = torch.relu(self.conv(x.transpose(1, 2))).transpose(1, 2)
        return self.head(x.mean(1))


BUILDERS = {
    **HF_MODELS,
    "mlp": _mlp,
    "conv_net": _conv_net,
    "conv_net_without_bias": _conv_net_without_bias,
    "encoder_layer": _encoder_layer,
    "sequence": _SequenceModel,
}


def _inputs(name: str, step: int):
    """(args, target) of one step: the same for thunder and eager."""
    g = torch.Generator().manual_seed(1000 + step)
    if name in HF_MODELS:
        return torch.randint(0, 100, (2, 8), generator=g), None
    if name == "mlp":
        return torch.randn(4, 16, generator=g), torch.randn(4, 4, generator=g)
    if name in ("conv_net", "conv_net_without_bias"):
        return torch.randn(2, 3, 8, 8, generator=g), torch.randn(2, 10, generator=g)
    if name == "encoder_layer":
        return torch.randn(2, 5, 16, generator=g), torch.randn(2, 5, 16, generator=g)
    if name == "sequence":
        return torch.randint(0, 50, (3, 7), generator=g), torch.randint(0, 50, (3,), generator=g)
    raise AssertionError(name)


def _loss(name: str, model, x, target):
    if name in HF_MODELS:
        return model(x, labels=x).loss
    out = model(x)
    if name == "sequence":
        return F.cross_entropy(out, target)
    return F.mse_loss(out, target)


def _build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = BUILDERS[name]()
    config = getattr(model, "config", None)
    if config is not None:
        for key in ("attn_pdrop", "resid_pdrop", "embd_pdrop", "summary_first_dropout", "hidden_dropout_prob",
                    "attention_probs_dropout_prob", "attention_dropout"):  # fmt: skip
            if hasattr(config, key):
                setattr(config, key, 0.0)
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
    return model.train()


def _optimizer(kind: str, params):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.1, momentum=0.9)
    return torch.optim.AdamW(params, lr=1e-3, eps=1e-6, weight_decay=0.01)


def _train(name: str, kind: str):
    """Runs STEPS steps in both; returns (thunder model, jitted model, eager model, losses)."""
    model = _build(name)
    eager = copy.deepcopy(model)  # before any call
    jm = thunder.jit(model)
    opt_t, opt_e = _optimizer(kind, model.parameters()), _optimizer(kind, eager.parameters())
    losses = []
    for step in range(STEPS):
        x, target = _inputs(name, step)
        for m, opt in ((jm, opt_t), (eager, opt_e)):
            opt.zero_grad()
            loss = _loss(name, m, x, target)
            loss.backward()
            opt.step()
            losses.append(loss.detach())
    return model, jm, eager, losses


_cache = {}


def _trained(name: str, kind: str):
    if (name, kind) not in _cache:
        _cache[(name, kind)] = _train(name, kind)
    return _cache[(name, kind)]


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_training_matches_eager(name, kind):
    model, jm, eager, losses = _trained(name, kind)
    tol = SGD_TOL if kind == "sgd" else ADAMW_TOL
    for step in range(STEPS):
        torch.testing.assert_close(losses[2 * step], losses[2 * step + 1], **LOSS_TOL, msg=f"loss of step {step + 1}")
    params, eager_params = dict(model.named_parameters()), dict(eager.named_parameters())
    assert params.keys() == eager_params.keys() and params
    for n, p in params.items():
        assert p.grad is not None, n
        torch.testing.assert_close(p, eager_params[n], **tol, msg=n)
    for (n, b), (_, eb) in zip(model.named_buffers(), eager.named_buffers(), strict=True):
        torch.testing.assert_close(b, eb, **tol, msg=n)  # BatchNorm's running statistics and step count


@pytest.mark.parametrize("kind", ["sgd", "adamw"])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_training_hits_the_cache(name, kind):
    _, jm, _, _ = _trained(name, kind)
    assert thunder.cache_misses(jm) == 1
    assert thunder.cache_hits(jm) == STEPS - 1


@pytest.mark.parametrize("name", list(BUILDERS))
@pytest.mark.parametrize("kind", ["sgd", "adamw"])
def test_training_uses_thunders_backward(name, kind):
    _, jm, _, _ = _trained(name, kind)
    assert thunder.compile_stats(jm).last_autograd_fallback is None
    assert len(thunder.last_backward_traces(jm)) > 0
    assert thunder.compile_stats(jm).last_saved_for_backward_bytes > 0


@pytest.mark.parametrize("frozen_embeddings", [False, True], ids=["trainable", "frozen embeddings"])
def test_hugging_face_gradient_checkpointing(frozen_embeddings):
    # ``gradient_checkpointing_enable()`` hooks the embeddings' output with ``output.requires_grad_(True)``
    # (transformers' enable_input_require_grads): ``Tensor.requires_grad_`` was unsupported in a trace.
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=100))
    model.gradient_checkpointing_enable()
    model.train()
    for name, p in model.named_parameters():
        if frozen_embeddings and name.startswith("transformer.w"):
            p.requires_grad_(False)
    reference, jm = copy.deepcopy(model), thunder.jit(model)
    ids = torch.randint(0, 100, (2, 6))
    for step in range(2):
        torch.manual_seed(step)  # dropout: the same draws
        expected = reference(input_ids=ids, labels=ids).loss
        torch.manual_seed(step)
        got = jm(input_ids=ids, labels=ids).loss
        reference.zero_grad()
        model.zero_grad()
        expected.backward()
        got.backward()
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        for (name, e), g in zip(reference.named_parameters(), model.parameters()):
            assert (e.grad is None) == (g.grad is None), name
            if e.grad is not None:
                torch.testing.assert_close(g.grad, e.grad, atol=1e-5, rtol=1e-4)
    assert thunder.cache_misses(jm) == 1


def test_requires_grad_on_values_the_program_computes():
    def restart(x, w):  # a new leaf, as truncated backpropagation makes one
        h = (x * w).detach().requires_grad_()
        return (h * w).sum()

    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    expected = restart(x, w)
    (expected_grad,) = torch.autograd.grad(expected, w)
    got = thunder.jit(restart)(x, w)
    (got_grad,) = torch.autograd.grad(got, w)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(got_grad, expected_grad)

    def unset(x, w):
        return (x * w).requires_grad_(False)

    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        unset(x, w)
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        thunder.jit(unset)(x, w)

    def on_the_input(x):
        x.requires_grad_()
        return x * 2

    torch.testing.assert_close(thunder.jit(on_the_input)(torch.ones(2, requires_grad=True)), torch.full((2,), 2.0))
    with pytest.raises(ThunderRuntimeError, match=r"requires_grad_\(True\) changes a tensor the jitted function was given"):
        thunder.jit(on_the_input)(torch.ones(2))
