"""What a sweep of Hugging Face heads found (``benchmarks/sweep_hf_models.py``: sequence, token and multiple-choice
classification, question answering, encoder-decoder generation, audio classification), and the two failures left by
the previous sweep (NeoMME's per-layer configs, BigBird's parameter made in the forward), each as a tiny program
checked against eager on several calls (the earlier rounds' are in tests/test_probe_findings.py to
tests/test_probe_findings5.py)."""

from __future__ import annotations

import copy

import pytest
import torch

import thunder


class _LayeredConfig:
    """transformers' heterogeneous config, reduced: names mapped by ``attribute_map``, and a per-layer attribute
    refused while the instance dict holds a spec, which a per-layer copy pops (Note [Reads through a Python
    __getattribute__])."""

    attribute_map = {"window_size": "window"}

    def __init__(self, window: int):
        self.window = window
        self._spec = {"window"}

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None and key in spec:
            raise ValueError(f"{key!r} is a per-layer attribute: read it from a layer's config")
        return super().__getattribute__(key)

    @property
    def layered(self) -> bool:
        return hasattr(self, "_spec")


def _layer_config(config: _LayeredConfig) -> _LayeredConfig:
    out = copy.copy(config)
    out.__dict__.pop("_spec", None)
    return out


def _uses_layer_config(x, config):
    layer = _layer_config(config)
    return x * layer.window + layer.window_size + (10 if layer.layered else 0), layer.layered, config.layered


def test_reads_through_a_python_getattribute_after_the_program_changed_the_object():
    x = torch.randn(3)
    config = _LayeredConfig(2)
    jf = thunder.jit(_uses_layer_config)
    for window in (2, 2, 3, 3):
        config.__dict__["window"] = window
        expected = _uses_layer_config(x, config)
        actual = jf(x, config)
        torch.testing.assert_close(actual[0], expected[0])
        assert actual[1:] == expected[1:]
        assert "_spec" in config.__dict__  # the copy lost it, not the input
    assert thunder.cache_hits(jf) == 2  # the second call of each window


class _SwapsAttention(torch.nn.Module):
    """BigBird, reduced: a forward that replaces its attention module by a newly built one (its weights initialised
    from the random generator, then replaced by the old module's), once, when the input is too short for the
    block-sparse kind (Note [Parameters made by the program])."""

    def __init__(self):
        super().__init__()
        self.kind = "sparse"
        self.attention = torch.nn.Linear(4, 4)
        self.dropout = torch.nn.Dropout(0.5)

    def forward(self, x):
        if self.kind == "sparse" and x.shape[0] < 8:
            self.kind = "full"
            new = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Tanh())
            new[0] = self.attention
            self.attention = new
        return self.dropout(self.attention(x)).sum()


def test_a_module_built_once_in_the_forward_runs_as_eager_then_compiles():
    torch.manual_seed(0)
    model = _SwapsAttention()
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    x = torch.randn(3, 4)
    for _ in range(3):
        torch.manual_seed(1)
        expected = reference(x)
        expected.backward()
        expected_draw = torch.rand(2)
        torch.manual_seed(1)
        actual = jm(x)
        actual.backward()
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(torch.rand(2), expected_draw)  # the built module's initialisation drew as eager's
        assert type(model.attention) is type(reference.attention) and model.kind == reference.kind
        for p, q in zip(model.parameters(), reference.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad)
    assert thunder.cache_hits(jm) == 1  # the setup ran eagerly, the second call compiled, the third hit


def test_a_parameter_made_on_every_call_is_refused_after_the_first():
    def fn(x):
        return torch.nn.Linear(3, 3)(x)

    jf = thunder.jit(fn)
    torch.manual_seed(0)
    expected = fn(torch.ones(3))
    torch.manual_seed(0)
    torch.testing.assert_close(jf(torch.ones(3)), expected)
    with pytest.raises(thunder.core.errors.MakesParameters, match=r"makes a new parameter.*makes one again"):
        jf(torch.ones(3))
