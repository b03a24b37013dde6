"""``torch.compile`` (Dynamo) meeting a jitted function: it runs thunder's function as is, with eager's values and
thunder's cache as without Dynamo (Note [A jitted function under torch.compile])."""

from __future__ import annotations

import pytest
import torch

import thunder


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    """Each test meets Dynamo afresh (what it decided of a code in an earlier test stays otherwise)."""
    torch._dynamo.reset()


def _f(x):
    return x.sin() * 2 + 1


def test_torch_compile_of_a_jitted_function():
    """Dynamo traced the fused prologue's own code and crashed on its constants (``Cannot construct
    ConstantVariable``)."""
    jf = thunder.jit(_f)
    x = torch.randn(3, 4)
    compiled = torch.compile(jf, backend="eager")
    for _ in range(3):
        torch.testing.assert_close(compiled(x), _f(x))
    assert (thunder.cache_misses(jf), thunder.cache_hits(jf)) == (1, 2)


def test_torch_compile_of_a_function_that_calls_a_jitted_one():
    """Dynamo graph-breaks at the jitted function, compiles what is around it, and calls it as is."""
    jf = thunder.jit(_f)
    x = torch.randn(3, 4)
    jf(x)  # (its fused prologue's own code installed before Dynamo meets it)

    def g(x):
        return jf(x + 1).cos() * 3

    def eager(x):
        return _f(x + 1).cos() * 3

    compiled = torch.compile(g, backend="eager")
    for _ in range(3):
        torch.testing.assert_close(compiled(x), eager(x))
    assert (thunder.cache_misses(jf), thunder.cache_hits(jf)) == (1, 3)


@pytest.mark.parametrize("how", ["thunder.jit(model)", "model.forward = thunder.jit(model.forward)"])
def test_generate_that_compiles_the_model_s_call_with_torch_compile_runs_thunder(how):
    """``generate`` with a static cache compiles the model's call with ``torch.compile`` (on a GPU; forced here on
    CPU with Dynamo's eager backend). Dynamo traced into thunder's compiled call: every decoding step compiled anew in
    thunder (4 misses, no hit) and took minutes. Now Dynamo runs it as is: the prefill and one decoding entry, as
    without ``torch.compile`` (Note [A compiled module's calls under torch.compile])."""
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=96, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(config).eval()
    compile_config = transformers.CompileConfig(backend="eager", mode=None)
    compile_config._compile_all_devices = True  # (transformers' switch for compiling on CPU)
    ids = torch.randint(3, 96, (1, 5), generator=torch.Generator().manual_seed(1))
    kwargs = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0, cache_implementation="static",
                  compile_config=compile_config)  # fmt: skip
    expected = model.generate(ids, **kwargs)
    del model._compiled_call  # (the eager run's torch.compile of the module's call)
    if how == "thunder.jit(model)":
        jitted = generating = thunder.jit(model)
    else:
        model.forward = jitted = thunder.jit(model.forward)
        generating = model
    assert torch.equal(generating.generate(ids, **kwargs), expected)
    assert (thunder.cache_misses(jitted), thunder.cache_hits(jitted)) == (2, 2)
