"""Generation as users run it, beyond greedy decoding (``tests/test_generation.py``): ``thunder.jit(model).generate``
with the options that return more than tokens, against eager ``model.generate``."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder

transformers = pytest.importorskip("transformers")


def _t5():
    config = transformers.T5Config(
        num_layers=1, num_decoder_layers=1, d_model=64, d_ff=128, num_heads=4, d_kv=16, vocab_size=500,
        decoder_start_token_id=0,
    )  # fmt: skip
    return transformers.T5ForConditionalGeneration(config).eval()


def _assert_same(actual, expected):
    """The generate output's tokens, scores and per-step tuples equal eager's (the KV cache aside)."""
    assert type(actual) is type(expected)
    assert list(actual.keys()) == list(expected.keys())
    for (key, want), got in zip(expected.items(), actual.values()):
        if isinstance(want, transformers.cache_utils.Cache):
            continue
        flat_want, flat_got = torch.utils._pytree.tree_leaves(want), torch.utils._pytree.tree_leaves(got)
        assert len(flat_want) == len(flat_got), key
        for w, g in zip(flat_want, flat_got):
            torch.testing.assert_close(g, w, msg=key)


def test_an_encoder_decoder_generation_with_hidden_states_and_attentions_runs_compiled():
    """Note [Mappings with a constructor of their own] in thunder/core/pytree.py: the encoder's output, made by the
    compiled encoder, held its ``hidden_states`` field as another tuple than its item; passed to the decoder as
    ``encoder_outputs`` it failed the check that its fields are its items, was read as itself, and the decoder's
    trace met an untraced tensor: every decoding step ran eagerly (EagerRunWarning)."""
    torch.manual_seed(0)
    model = _t5()
    ids = torch.randint(3, 500, (2, 5))
    kwargs = dict(
        max_new_tokens=3, num_beams=2, output_hidden_states=True, output_attentions=True, return_dict_in_generate=True
    )
    expected = model.generate(ids, **kwargs)
    jm = thunder.jit(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", thunder.EagerRunWarning)
        actual = jm.generate(ids, **kwargs)
    _assert_same(actual, expected)
    assert thunder.cache_hits(jm) + thunder.cache_misses(jm) == 4  # the encoder and three decoding steps
    assert thunder.cache_misses(jm) == 4  # (the encoder, then a decoder entry for an empty, a 1- and a 2-long cache)
    with warnings.catch_warnings():
        warnings.simplefilter("error", thunder.EagerRunWarning)
        _assert_same(jm.generate(ids, **kwargs), expected)
    assert thunder.cache_misses(jm) == 4


def test_a_model_output_s_field_is_its_item_as_in_eager():
    """A ``ModelOutput`` the compiled function returns: each field is the same object as the item of its name
    (``out.hidden_states is out["hidden_states"]``), a list field too (appending to one shows in the other)."""
    from transformers.modeling_outputs import BaseModelOutput

    def f(x):
        return BaseModelOutput(last_hidden_state=x * 2, hidden_states=(x, x + 1), attentions=[x - 1])

    x = torch.randn(2, 3)
    jf = thunder.jit(f)
    for _ in range(2):  # the first call and a cache hit
        out = jf(x)
        assert out.hidden_states is out["hidden_states"] and out.attentions is out["attentions"]
        assert out.last_hidden_state is out["last_hidden_state"]
        out.attentions.append(x)
        assert len(out["attentions"]) == 2
        torch.testing.assert_close(out.to_tuple()[1][1], x + 1)
    assert thunder.cache_misses(jf) == 1
    # passed back in, it is read as traced values (its fields are its items)
    jg = thunder.jit(lambda o: o[0] + o.hidden_states[1])
    torch.testing.assert_close(jg(jf(x)), x * 2 + x + 1)
