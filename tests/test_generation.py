"""LLM generation compiled: ``thunder.jit(model).generate(...)`` runs the model's forward through the compiled
function (prefill and decode), token for token equal to eager greedy generation, without a compile per token
(Note [Automatic dynamic shapes] in thunder/__init__.py)."""

from __future__ import annotations

import pytest
import torch

import thunder

transformers = pytest.importorskip("transformers")


def _gpt2():
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=128)
    return transformers.GPT2LMHeadModel(config).eval()


def _llama():
    config = transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=500,
    )  # fmt: skip
    return transformers.LlamaForCausalLM(config).eval()


@pytest.mark.parametrize("make", [_gpt2, _llama], ids=["gpt2", "llama"])
@pytest.mark.parametrize("cache_implementation", [None, "static"], ids=["dynamic_cache", "static_cache"])
def test_generate_runs_compiled_and_equals_eager(make, cache_implementation):
    torch.manual_seed(0)
    model = make()
    ids = torch.randint(0, 500, (2, 6))
    kwargs = dict(max_new_tokens=24, do_sample=False, pad_token_id=0)
    if cache_implementation is not None:
        kwargs["cache_implementation"] = cache_implementation
    expected = model.generate(ids, **kwargs)
    jm = thunder.jit(model)
    actual = jm.generate(ids, **kwargs)
    assert torch.equal(actual, expected)
    assert thunder.cache_hits(jm) + thunder.cache_misses(jm) == 24  # every step ran compiled
    assert thunder.cache_misses(jm) <= 3
    model(ids)  # the original module, called directly, stays eager
    assert thunder.cache_hits(jm) + thunder.cache_misses(jm) == 24


def test_a_jitted_forward_does_not_compile_per_token():
    """``model.forward = thunder.jit(model.forward)``, lightning-thunder's recipe, with the default cache."""
    torch.manual_seed(0)
    model = _gpt2()
    ids = torch.randint(0, 500, (1, 5))
    expected = model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)
    jitted = thunder.jit(model.forward)
    model.forward = jitted
    actual = model.generate(ids, max_new_tokens=16, do_sample=False, pad_token_id=0)
    assert torch.equal(actual, expected)
    assert thunder.cache_misses(jitted) <= 3


def test_a_growing_dimension_compiles_a_symbolic_entry():
    jf = thunder.jit(lambda x: (x * 2).cumsum(-1))
    for n in range(3, 20):
        x = torch.randn(2, n)
        torch.testing.assert_close(jf(x), (x * 2).cumsum(-1))
    assert thunder.cache_misses(jf) == 2
    reasons = thunder.cache_miss_reasons(jf)
    assert "automatic dynamic shapes" in str(reasons[1])


def test_constant_values_given_explicitly_keeps_shapes_constant():
    jf = thunder.jit(lambda x: x * 2, cache="constant values")
    for n in range(3, 7):
        jf(torch.randn(n))
    assert thunder.cache_misses(jf) == 4
    assert all("automatic dynamic" not in str(r) for r in thunder.cache_miss_reasons(jf))


def test_the_first_shape_keeps_its_constant_entry():
    """The constant entry of the first shape still serves that shape; the symbolic one the others."""
    jf = thunder.jit(lambda x: x + 1)
    a, b, c = torch.randn(3), torch.randn(4), torch.randn(5)
    for x in (a, b, c, a, b):
        torch.testing.assert_close(jf(x), x + 1)
    assert thunder.cache_misses(jf) == 2
