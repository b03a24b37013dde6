"""Real models and training/generation loops written outside this project, compiled and compared with eager
(each found a failure: the distilled program and the model as they were found)."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.utils.checkpoint

import thunder


class _GlobalSlot:
    """A context variable kept in a global where a compiler runs the code (as transformers' kernel functions keep
    the active ones): ``set`` returns the previous value, ``reset`` restores it."""

    def __init__(self):
        self.value = None
        self.used = False

    def set(self, value):
        previous, self.value, self.used = self.value, value, True
        return previous

    def reset(self, token):
        self.value, self.used = token, token is not None


_SLOT = _GlobalSlot()


class _Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        token = _SLOT.set({"scale": 2.0})
        try:
            return torch.tanh(self.lin(x)) * _SLOT.value["scale"]
        finally:
            _SLOT.reset(token)


class _Checkpointed(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([_Layer(), _Layer()])

    def forward(self, x):
        for layer in self.layers:
            x = torch.utils.checkpoint.checkpoint(layer, x, use_reentrant=False)
        return x.sum()


def _grads_match(model, reference, x, calls=3):
    jm = thunder.jit(model)
    for _ in range(calls):
        for m in (model, reference):
            m.zero_grad()
        expected, got = reference(x), jm(x)
        expected.backward()
        got.backward()
        torch.testing.assert_close(got, expected)
        for (name, e), g in zip(reference.named_parameters(), model.parameters()):
            torch.testing.assert_close(g.grad, e.grad, msg=name)
    return jm


def test_a_checkpointed_region_that_sets_and_restores_a_global_trains_as_in_eager():
    """Each layer sets a global and restores it (transformers' kernel functions under a compiler): the checkpointed
    region's stores were refused (a store cannot be replayed as eager's second run makes it), though they change
    nothing; every Hugging Face model with ``gradient_checkpointing_enable()`` failed so."""
    torch.manual_seed(0)
    model = _Checkpointed()
    jm = _grads_match(model, copy.deepcopy(model), torch.randn(3, 4))
    assert _SLOT.value is None and not _SLOT.used
    assert thunder.cache_misses(jm) == 1 and thunder.cache_hits(jm) == 2


class _SetsForLater(torch.nn.Module):
    """A region that sets and restores a global, then the program sets it for good: eager's second run of the
    region, in the backward, restores the later value (refused, not silently different)."""

    def __init__(self):
        super().__init__()
        self.layer = _Layer()

    def forward(self, x):
        y = torch.utils.checkpoint.checkpoint(self.layer, x, use_reentrant=False)
        _SLOT.set({"scale": 3.0})
        return y.sum()


def test_a_region_that_restores_what_the_program_changes_later_is_refused():
    torch.manual_seed(0)
    jm = thunder.jit(_SetsForLater())
    try:
        with pytest.raises(thunder.core.errors.ThunderRuntimeError, match="sets and restores"):
            jm(torch.randn(3, 4, requires_grad=True))
    finally:
        _SLOT.reset(None)


def test_hugging_face_llama_with_gradient_checkpointing_trains_as_in_eager():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=100,
    )  # fmt: skip
    model = transformers.LlamaForCausalLM(config)
    model.gradient_checkpointing_enable()
    model.train()
    reference, jm = copy.deepcopy(model), thunder.jit(model)
    opt_e = torch.optim.AdamW(reference.parameters(), lr=1e-3)
    opt_j = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 100, (2, 6))
    for _ in range(3):
        expected = reference(input_ids=ids, labels=ids).loss
        got = jm(input_ids=ids, labels=ids).loss
        expected.backward()
        got.backward()
        torch.testing.assert_close(got, expected, atol=1e-5, rtol=1e-5)
        for (name, e), g in zip(reference.named_parameters(), model.parameters()):
            torch.testing.assert_close(g.grad, e.grad, atol=1e-5, rtol=1e-4, msg=name)
        for opt in (opt_e, opt_j):
            opt.step()
            opt.zero_grad()
    assert thunder.cache_misses(jm) == 1
