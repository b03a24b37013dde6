"""What a sweep of Hugging Face heads found (``benchmarks/sweep_hf_models.py``: sequence, token and multiple-choice
classification, question answering, encoder-decoder generation, audio classification), and the two failures left by
the previous sweep (NeoMME's per-layer configs, BigBird's parameter made in the forward), each as a tiny program
checked against eager on several calls (the earlier rounds' are in tests/test_probe_findings.py to
tests/test_probe_findings5.py)."""

from __future__ import annotations

import copy

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
