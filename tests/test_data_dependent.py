"""Programs whose Python needs tensor values, and code that asks whether it is being compiled."""

from __future__ import annotations

import pytest
import torch

import thunder


@pytest.mark.parametrize(
    "query",
    [torch.compiler.is_compiling, torch.compiler.is_dynamo_compiling, torch._utils.is_compiling],
    ids=["torch.compiler.is_compiling", "is_dynamo_compiling", "torch._utils.is_compiling"],
)
def test_code_that_asks_whether_it_is_compiled_takes_its_compile_path(query):
    def f(x):
        if query():
            return x * 2  # the path written for compilers
        return x + 1

    x = torch.randn(3)
    jf = thunder.jit(f)
    torch.testing.assert_close(jf(x), x * 2)
    torch.testing.assert_close(jf(x), x * 2)
    assert thunder.cache_misses(jf) == 1
    assert not query()  # outside the trace, the truth


def test_transformers_padding_mask_takes_the_compile_friendly_path():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                  vocab_size=100, max_position_embeddings=16)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 100, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, :3] = 0
    jm = thunder.jit(model)
    for m in (mask, torch.ones_like(mask)):  # padded, then all ones: one program covers both
        torch.testing.assert_close(jm(ids, attention_mask=m).last_hidden_state, model(ids, attention_mask=m).last_hidden_state)
    assert thunder.cache_misses(jm) == 1
