"""Real models and training/generation loops written outside this project, compiled and compared with eager
(each found a failure: the distilled program and the model as they were found)."""

from __future__ import annotations

import copy

import numpy as np
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


def _matched_rows(cost):
    """DETR's Hungarian matcher, distilled: an assignment computed with numpy from the cost's values, made a tensor
    with ``torch.as_tensor`` (its memory shared with the array in eager)."""
    rows = np.argsort(cost.detach().numpy().sum(1))
    return torch.as_tensor(rows, dtype=torch.int64), torch.from_numpy(rows.copy())


def test_as_tensor_and_from_numpy_of_an_array_the_program_made_match_eager():
    """``torch.as_tensor`` of an array the program made was a trace-time error, so the call ran eagerly."""

    def program(cost):
        a, b = _matched_rows(cost)
        return cost[a].sum(1) * b

    cost = torch.randn(4, 3, requires_grad=True)
    jf = thunder.jit(program)
    torch.testing.assert_close(jf(cost), program(cost))
    jf(cost).sum().backward()
    expected = cost.grad.clone()
    cost.grad = None
    program(cost).sum().backward()
    torch.testing.assert_close(expected, cost.grad)


def test_as_tensor_of_an_array_changed_afterwards_is_refused():
    def program(x):
        rows = np.zeros(3)
        t = torch.as_tensor(rows)
        rows[0] = 5.0  # eager's t shows it
        return x + t

    with pytest.raises(thunder.core.errors.ThunderRuntimeError, match="changed afterwards"):
        thunder.jit(program)(torch.ones(3))


def test_hugging_face_yolos_trains_with_labels_as_in_eager():
    """The object-detection loss (a Hungarian matcher with scipy) ran eagerly: ``torch.as_tensor`` of its assignment.
    The matcher reads the cost's values, so each new cost compiles again (as the values checked differ)."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("scipy")
    torch.manual_seed(0)
    config = transformers.YolosConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, image_size=[32, 32],
        patch_size=8, num_detection_tokens=5, num_labels=3,
    )  # fmt: skip
    model = transformers.YolosForObjectDetection(config)
    reference, jm = copy.deepcopy(model), thunder.jit(model)
    labels = [dict(class_labels=torch.tensor([1, 2]), boxes=torch.tensor([[0.5, 0.5, 0.2, 0.2], [0.3, 0.3, 0.1, 0.2]]))]
    x = torch.randn(1, 3, 32, 32)
    expected, got = reference(pixel_values=x, labels=labels), jm(pixel_values=x, labels=labels)
    expected.loss.backward()
    got.loss.backward()
    torch.testing.assert_close(got.loss, expected.loss)
    torch.testing.assert_close(got.logits, expected.logits)
    for (name, e), g in zip(reference.named_parameters(), model.parameters()):
        assert (e.grad is None) == (g.grad is None), name
        if e.grad is not None:
            torch.testing.assert_close(g.grad, e.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_integer_tensors_as_slice_bounds_are_read_as_eager_reads_them():
    """``x[m - span : m + span]`` with ``span`` a 0-d tensor (DeBERTa's relative positions) was a clear error where
    eager reads the bound with ``__index__``: now a data-dependent value, checked per call (``x[a:b] = v`` too)."""

    def program(x, n):
        span = torch.tensor(min(x.size(0), 3))
        y = x[4 - span : 4 + span]
        z = x.clone()
        z[n - 1 : n] = 0
        return y * 2, z

    x = torch.randn(8, 2)
    jf = thunder.jit(program)
    for n in (torch.tensor(3), torch.tensor(5), torch.tensor(3)):
        for got, expected in zip(jf(x, n), program(x, n)):
            torch.testing.assert_close(got, expected)
    assert thunder.cache_misses(jf) == 2 and thunder.cache_hits(jf) == 1


def test_hugging_face_deberta_token_classification_trains_as_in_eager():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.DebertaConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64, vocab_size=100,
        relative_attention=True, max_relative_positions=16, pos_att_type=["c2p", "p2c"], hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )  # fmt: skip
    model = transformers.DebertaForTokenClassification(config)
    reference, jm = copy.deepcopy(model), thunder.jit(model)
    ids, labels = torch.randint(3, 100, (2, 8)), torch.randint(0, 2, (2, 8))
    mask = torch.ones_like(ids)
    mask[0, 6:] = 0
    expected = reference(input_ids=ids, attention_mask=mask, labels=labels)
    got = jm(input_ids=ids, attention_mask=mask, labels=labels)
    expected.loss.backward()
    got.loss.backward()
    torch.testing.assert_close(got.logits, expected.logits)
    for (name, e), g in zip(reference.named_parameters(), model.parameters()):
        assert (e.grad is None) == (g.grad is None), name
        if e.grad is not None:
            torch.testing.assert_close(g.grad, e.grad, atol=1e-5, rtol=1e-4, msg=name)
