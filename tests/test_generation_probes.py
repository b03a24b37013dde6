"""Generation through thunder as users write it, against eager ``generate``: the findings of the generation probe
(``/tmp``-kept script; see the report of branch s16-genprobe) that were wrong or failed, each as a small model."""

from __future__ import annotations

import pytest
import torch

import thunder

transformers = pytest.importorskip("transformers")


def _llama():
    config = transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=96, max_position_embeddings=64, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    )  # fmt: skip
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


def test_generate_that_compiles_the_forward_with_torch_compile_runs_thunder():
    """Note [A compiled module's calls under torch.compile]: with a static cache on a GPU, ``generate`` wraps the
    module's call in ``torch.compile`` (forced here on CPU, with dynamo's eager backend). Dynamo traced thunder's
    compiled call: every decoding step compiled anew in thunder (and took minutes). Now dynamo leaves it to thunder:
    the prefill and one decoding entry, as without ``torch.compile``."""
    model = _llama()
    compile_config = transformers.CompileConfig(backend="eager", mode=None)
    compile_config._compile_all_devices = True  # (transformers' switch for compiling on CPU)
    ids = torch.randint(3, 96, (1, 5), generator=torch.Generator().manual_seed(1))
    kwargs = dict(max_new_tokens=4, min_new_tokens=4, do_sample=False, pad_token_id=0, cache_implementation="static",
                  compile_config=compile_config)  # fmt: skip
    expected = model.generate(ids, **kwargs)
    del model._compiled_call  # (the eager run's torch.compile of the module's call)
    jm = thunder.jit(model)
    assert torch.equal(jm.generate(ids, **kwargs), expected)
    assert (thunder.cache_misses(jm), thunder.cache_hits(jm)) == (2, 2)
