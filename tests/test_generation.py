"""LLM generation compiled: ``thunder.jit(model).generate(...)`` runs the model's forward through the compiled
function (prefill and decode), token for token equal to eager greedy generation, without a compile per token
(Note [Automatic dynamic shapes] in thunder/core/shape_history.py)."""

from __future__ import annotations

import os
import sys

import pytest
import torch

import thunder

transformers = pytest.importorskip("transformers")
deprecate_kwarg = pytest.importorskip("transformers.utils.deprecation").deprecate_kwarg


def _gpt2():
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=4, vocab_size=500, n_positions=128)
    return transformers.GPT2LMHeadModel(config).eval()


def _small_decoder(config_class, model_class):
    config = config_class(
        num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4, num_key_value_heads=2,
        vocab_size=500,
    )  # fmt: skip
    return model_class(config).eval()


def _llama():
    return _small_decoder(transformers.LlamaConfig, transformers.LlamaForCausalLM)


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
    # A second generation: the forward returns the cache it was given, not a copy of the first generation's (whose
    # static cache, full, the second generation's decoding then wrote into: index out of bounds)
    assert torch.equal(jm.generate(ids, **kwargs), model.generate(ids, **kwargs))
    assert thunder.cache_misses(jm) <= 3


@pytest.mark.filterwarnings("error::thunder.EagerRunWarning")
def test_generate_of_a_model_with_forward_hooks_runs_compiled_and_runs_the_hooks():
    """Note [A hooked module's call while a method is routed]: the routed call was called again from its own trace
    (RecursionError; every step ran eagerly with an EagerRunWarning)."""
    torch.manual_seed(0)
    model = _gpt2()
    seen = []
    model.register_forward_hook(lambda m, args, out: seen.append(out.logits.shape[1]))
    ids = torch.randint(0, 500, (2, 6))
    kwargs = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    expected = model.generate(ids, **kwargs)
    want, seen[:] = list(seen), []
    jm = thunder.jit(model)
    assert torch.equal(jm.generate(ids, **kwargs), expected)
    assert seen == want
    assert thunder.cache_hits(jm) + thunder.cache_misses(jm) == 6 and thunder.cache_misses(jm) == 2
    seen.clear()
    torch.testing.assert_close(jm(ids).logits, model(ids).logits)  # a plain call after the generation
    assert seen == [6, 6]


@pytest.mark.parametrize("make", [_gpt2, _llama], ids=["gpt2", "llama"])
def test_a_dynamic_cache_generation_compiles_twice(make):
    """The KV cache, first seen in the first decoding step, is symbolic there in the length the prompt left: the
    prefill and one decoding entry serve the whole generation, and a second generation hits both."""
    torch.manual_seed(0)
    model = make()
    ids = torch.randint(0, 500, (1, 6))
    kwargs = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    expected = model.generate(ids, **kwargs)
    jm = thunder.jit(model)
    assert torch.equal(jm.generate(ids, **kwargs), expected)
    assert thunder.cache_misses(jm) == 2
    assert torch.equal(jm.generate(ids, **kwargs), expected)
    assert thunder.cache_misses(jm) == 2


def test_an_input_first_seen_is_symbolic_in_a_size_another_input_left():
    """Note [Automatic dynamic shapes]: a cache the first call filled to the prompt's length (6) grows from there."""

    def step(ids, cache):
        total = ids.float().sum()
        for t in cache:
            total = total + t.sum()
        return total

    calls = [(torch.ones(1, 6), [])] + [(torch.ones(1, 1), [torch.randn(1, n)]) for n in range(6, 10)]
    jf = thunder.jit(step)
    for ids, cache in calls:
        torch.testing.assert_close(jf(ids, cache), step(ids, cache))
    assert thunder.cache_misses(jf) == 2, thunder.cache_miss_reasons(jf)


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


def test_a_size_a_loop_runs_over_holds_the_trace_to_it_and_the_miss_reason_names_the_loop():
    """A Python loop over ``range`` of a size (RecurrentGemma's and Jamba's scans) unrolls into the trace, which then
    holds for that size only: each size compiles its own entry (as torch.compile's do), and the miss reason says which
    line of the program took the size's value. (A loop whose body is one trace for every index is traced once
    instead: Note [Loops over a symbolic range]; this one branches on the index's parity.)"""

    def f(x):
        out = x[:, 0]
        for t in range(1, x.shape[1]):
            out = out * 0.5 + x[:, t] if t % 2 else out + x[:, t]
        return out

    jf = thunder.jit(f)
    for n in range(4, 8):
        x = torch.randn(2, n)
        torch.testing.assert_close(jf(x), f(x))
    reasons = [str(r) for r in thunder.cache_miss_reasons(jf)]
    assert len(reasons) == 4
    assert "which the program took at" in reasons[2] and "for t in range(1, x.shape[1]):" in reasons[2]


def test_recurrent_gemma_generation_without_a_cache_traces_its_scan_loop_once():
    """RecurrentGemma with ``use_cache=False`` runs its scan over the whole sequence each step, a Python loop over
    the length: traced once for every length (Note [Loops over a symbolic range] in thunder.core.loops), it compiles
    the prompt's entry and one symbolic entry, and the tokens are eager's."""
    config = transformers.RecurrentGemmaConfig(
        num_hidden_layers=3, vocab_size=64, hidden_size=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, lru_width=32, attention_window_size=16,
        block_types=["recurrent", "recurrent", "attention"],
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.RecurrentGemmaForCausalLM(config).eval()
    ids = torch.randint(3, 64, (1, 6))
    kwargs = dict(max_new_tokens=3, min_new_tokens=3, do_sample=False, use_cache=False)
    expected = model.generate(ids, **kwargs)
    jm = thunder.jit(model)
    assert torch.equal(jm.generate(ids, **kwargs), expected)
    assert thunder.cache_misses(jm) == 2
    assert any(b.sym.name.startswith("loop") for b in thunder.last_traces(jm)[-1].bound_symbols)


def test_what_changed_once_stays_symbolic_after_a_constraint_fails():
    """A KV cache passing its sliding window (a branch on its length: RecurrentGemma's) recompiles once there, with
    the length still symbolic, not a constant entry and then a symbolic one again."""

    def step(x, cache):
        if cache.shape[1] < 8:
            return x + cache.sum()
        return x - cache[:, -8:].sum()

    jf = thunder.jit(step)
    x = torch.randn(1)
    for n in range(4, 16):
        cache = torch.randn(1, n)
        torch.testing.assert_close(jf(x, cache), step(x, cache))
    assert thunder.cache_misses(jf) == 3  # 4 (constant), 5 (symbolic: below 8), 8 (symbolic: 8 and above)


def test_a_clamp_a_growing_size_passes_does_not_recompile():
    """Note [Guard-free min and max]: the start of ``cache[:, -8:]`` and ``max(n - 8, 0)`` are expressions while the
    cache is shorter than the window, not branches that fail as it fills; ``x[:, :3]`` stays 3 long."""

    def step(x, cache):
        window = cache[:, -8:]
        offset = max(cache.shape[1] - 8, 0)
        return x + window.sum(-1) * offset + window.shape[1], cache[:, :3] * 2

    jf = thunder.jit(step)
    x = torch.randn(1)
    for n in range(4, 16):
        cache = torch.randn(1, n)
        for a, e in zip(jf(x, cache), step(x, cache)):
            torch.testing.assert_close(a, e)
    assert thunder.cache_misses(jf) == 2, thunder.cache_miss_reasons(jf)
    computation = str(thunder.last_traces(jf)[-1])
    assert "max(" in computation and "min(" not in computation  # (the window's start; ``[:, :3]`` a constant)


def test_a_clamp_that_a_size_reaches_on_its_first_symbolic_entry_holds_as_it_grows():
    """Note [Guard-free min and max]: the first symbolic entry compiled where the size equals the constant (a KV cache
    of 8 in ``min(n, 8)``) records ``n >= 8`` whatever the order of the arguments, not the builtin's ``n <= 8``, which
    the next size failed."""

    def step(x, cache):
        n = cache.shape[1]
        return x * min(n, 8) + max(8, n) - min(8, n, 9)

    jf = thunder.jit(step)
    x = torch.randn(2)
    for n in range(7, 14):
        cache = torch.randn(1, n)
        torch.testing.assert_close(jf(x, cache), step(x, cache))
    assert thunder.cache_misses(jf) == 2, thunder.cache_miss_reasons(jf)  # 7 (constant), 8 and above (symbolic)


def _sliding_window_decoder(family: str):
    kw = dict(num_hidden_layers=2, hidden_size=64, intermediate_size=128, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=500, sliding_window=16)  # fmt: skip
    if family == "gemma2":
        return transformers.Gemma2ForCausalLM(transformers.Gemma2Config(head_dim=16, **kw)).eval()
    if family == "gemma3":
        return transformers.Gemma3ForCausalLM(transformers.Gemma3TextConfig(head_dim=16, **kw)).eval()
    if family == "qwen2":
        config = transformers.Qwen2Config(use_sliding_window=True, max_window_layers=0, **kw)
        return transformers.Qwen2ForCausalLM(config).eval()
    return transformers.MistralForCausalLM(transformers.MistralConfig(**kw)).eval()


@pytest.mark.parametrize("family, compiles", [("mistral", 3), ("qwen2", 3), ("gemma3", 3), ("gemma2", 2)])
@pytest.mark.parametrize("cache_implementation", [None, "static"], ids=["dynamic_cache", "static_cache"])
def test_a_sliding_window_cache_compiles_only_where_the_program_branches(family, compiles, cache_implementation):
    """64 tokens past a window of 16: the prefill, the decoding steps below the window, and the full window, where
    the mask's length reaches the window (Note [A sliding window's mask sizes]: the dynamic cache's length is one
    expression, ``min(cumulative_length, 15) + 1``, not a branch on the cache being full a step later, which compiled
    a fourth entry). Gemma2 builds its mask whatever the length: the decoding steps share one entry. Before, each
    clamp of the window's slice and offset recompiled too. A second generation, longer than the window from its
    prompt on, and a third, shorter, reuse the entries with eager's tokens."""
    torch.manual_seed(0)
    model = _sliding_window_decoder(family)
    kwargs = dict(do_sample=False, pad_token_id=0, cache_implementation=cache_implementation)
    jm = thunder.jit(model)
    for prompt, tokens in ((6, 64), (20, 8), (3, 20)):
        ids = torch.randint(0, 500, (1, prompt))
        run = dict(kwargs, max_new_tokens=tokens, min_new_tokens=tokens)
        assert torch.equal(jm.generate(ids, **run), model.generate(ids, **run))
        if prompt == 6:
            reasons = [str(r) for r in thunder.cache_miss_reasons(jm)]
            assert len(reasons) == (3 if cache_implementation else compiles), reasons
    if cache_implementation is None and compiles == 3:
        assert "min(cache_layers_0_cumulative_length, 15) + 1 < 16 no longer holds" in reasons[-1]


def test_a_sliding_window_layer_with_a_property_is_interpreted():
    """Note [A sliding window's mask sizes]: the branch-free sizes only where the attributes are plain ints; a layer
    whose ``cumulative_length`` is a property runs its ``get_mask_sizes`` as eager does (the property's calls too)."""
    from transformers.cache_utils import DynamicSlidingWindowLayer

    from thunder.core.library_wrappers import _MASK_SIZES_DIGEST, native_wrapper

    known = sys.version_info[:2] in _MASK_SIZES_DIGEST
    assert (native_wrapper(DynamicSlidingWindowLayer.get_mask_sizes) is not None) == known

    class Counted(DynamicSlidingWindowLayer):
        reads = 0

        @property
        def cumulative_length(self):
            type(self).reads += 1
            return self.__dict__.get("_length", 0)

        @cumulative_length.setter
        def cumulative_length(self, value):
            self.__dict__["_length"] = value

    def sizes(layer, q):
        return layer.get_mask_sizes(q)

    def run(fn, length):
        layer = Counted(sliding_window=16)
        layer.cumulative_length = length
        before = Counted.reads
        return fn(layer, 1), Counted.reads - before

    jf = thunder.jit(sizes)
    for length in (3, 20, 21, 5):
        assert run(jf, length) == run(sizes, length)  # (3 reads below the window, 2 once full)


def test_constant_values_given_explicitly_keeps_shapes_constant():
    jf = thunder.jit(lambda x: x * 2, cache="constant values")
    for n in range(3, 7):
        jf(torch.randn(n))
    assert thunder.cache_misses(jf) == 4
    assert all("automatic dynamic" not in str(r) for r in thunder.cache_miss_reasons(jf))


def test_only_the_sizes_that_changed_are_symbolic():
    """The weight keeps its constant shape in the entry for a new batch size: a new weight shape recompiles."""
    jf = thunder.jit(lambda x, w: x @ w)
    w = torch.randn(8, 3)
    for n in (2, 5, 7):
        x = torch.randn(n, 8)
        torch.testing.assert_close(jf(x, w), x @ w)
    assert thunder.cache_misses(jf) == 2
    prologue = str(thunder.last_prologue_traces(jf)[-1])
    assert "x_1 == 8" in prologue and "w.shape == (8, 3)" in prologue  # constants checked as constants
    jf(torch.randn(9, 8), w)  # the batch size is symbolic: a hit
    assert thunder.cache_misses(jf) == 2
    w4 = torch.randn(8, 4)
    torch.testing.assert_close(jf(torch.randn(9, 8), w4).shape, (9, 4))
    assert thunder.cache_misses(jf) == 3
    assert str(thunder.cache_miss_reasons(jf)[-1]).startswith("w shape changed (8, 3) -> (8, 4)")


def test_sizes_0_and_1_stay_constant():
    """A decoding step's single token is a constant 1 (broadcasting treats 1 apart), as in torch.compile."""
    jf = thunder.jit(lambda x: x.sum(-1, keepdim=True) * x)
    for n in (16, 1, 2, 3, 4):
        x = torch.randn(2, n)
        torch.testing.assert_close(jf(x), x.sum(-1, keepdim=True) * x)
    # 16, then 1 (constant), then 2 (symbolic: serves 3 and 4)
    assert thunder.cache_misses(jf) == 3
    assert "x_1 ==" not in str(thunder.last_prologue_traces(jf)[-1])


def test_an_int_that_changes_becomes_symbolic():
    """An int the program reads from an object (a cache's ``cumulative_length``) is treated as a size."""

    class Counter:
        def __init__(self):
            self.n = 2

    c = Counter()
    jf = thunder.jit(lambda x: x * c.n + c.n)
    x = torch.randn(3)
    for n in range(2, 9):
        c.n = n
        torch.testing.assert_close(jf(x), x * n + n)
    assert thunder.cache_misses(jf) == 2


def test_the_background_compiler_leaves_symbolic_shapes_to_torch():
    """A compiled graph holds for one shape, so a region of symbolic shapes would warm up anew for every size and
    never compile, its timing paid on every call (a GPT-2 decode step took 1.23x eager's time): torch runs it."""
    def f(x):
        return (x * 2 + 1).sin().cos()

    jf = thunder.jit(f, executors=["torchcompile_background"])
    jf(torch.randn(2, 3))
    assert "TorchCompile" in str(thunder.last_traces(jf)[-1])  # constant shapes: one region
    for n in (4, 5):
        x = torch.randn(2, n)
        torch.testing.assert_close(jf(x), f(x))
    assert thunder.cache_misses(jf) == 2
    assert "TorchCompile" not in str(thunder.last_traces(jf)[-1])


def test_the_first_shape_keeps_its_constant_entry():
    """The constant entry of the first shape still serves that shape; the symbolic one the others."""
    jf = thunder.jit(lambda x: x + 1)
    a, b, c = torch.randn(3), torch.randn(4), torch.randn(5)
    for x in (a, b, c, a, b):
        torch.testing.assert_close(jf(x), x + 1)
    assert thunder.cache_misses(jf) == 2


class _Deprecating(torch.nn.Module):
    @deprecate_kwarg("scale_old", "99.0", new_name="scale")
    def forward(self, x, scale=1.0):
        return x * scale


def _ran_wrapper(jm) -> bool:
    log = thunder.last_interpreter_log(jm)
    return any(isinstance(e, dict) and e["kind"] == "Line" and e["fn"].endswith(".wrapped_func") for e in log)


def test_deprecate_kwarg_wrapper_is_run_by_the_tracer_and_its_cells_are_checked():
    # Note [deprecate_kwarg's wrapper]: without the deprecated keyword nothing of the wrapper is interpreted; the
    # installed transformers' wrapper is the one the digest names (else the note's reasoning must be re-checked).
    # On a Python whose digest is not recorded the wrapper is interpreted as before, and must still give eager's.
    from thunder.core.library_wrappers import _DEPRECATE_KWARG_DIGEST, native_wrapper

    known = sys.version_info[:2] in _DEPRECATE_KWARG_DIGEST
    assert (native_wrapper(_Deprecating.forward) is not None) == known
    m, x = _Deprecating(), torch.randn(3)
    jm = thunder.jit(m, debug_options=thunder.DebugOptions(record_interpreter_history=True))
    torch.testing.assert_close(jm(x, scale=2.0), m(x, scale=2.0))
    assert _ran_wrapper(jm) != known
    torch.testing.assert_close(jm(x, scale_old=3.0), x * 3.0)  # the deprecated keyword: interpreted, renamed
    assert _ran_wrapper(jm)
    cells = dict(zip(_Deprecating.forward.__code__.co_freevars, _Deprecating.forward.__closure__))
    old_name, func = cells["old_name"].cell_contents, cells["func"].cell_contents
    try:
        cells["func"].cell_contents = lambda self, x, scale=1.0: x - scale
        torch.testing.assert_close(jm(x, scale=2.0), x - 2.0)
        cells["old_name"].cell_contents = "scale"  # both names passed: eager drops ``scale``
        torch.testing.assert_close(jm(x, scale=2.0), x - 1.0)
    finally:
        cells["old_name"].cell_contents, cells["func"].cell_contents = old_name, func
    torch.testing.assert_close(jm(x, scale=2.0), x * 2.0)


def test_deprecate_kwarg_wrapper_without_positional_arguments_fails_as_in_eager():
    def f(m, x):
        return _Deprecating.forward(self=m, x=x)  # the wrapper reads args[0] for its message

    m, x = _Deprecating(), torch.randn(3)
    with pytest.raises(IndexError):
        f(m, x)
    with pytest.raises(IndexError):
        thunder.jit(f)(m, x)


ModelOutput = pytest.importorskip("transformers.utils.generic").ModelOutput


@__import__("dataclasses").dataclass
class _Out(ModelOutput):
    a: torch.Tensor | None = None
    b: torch.Tensor | None = None
    n: int | None = None


def _interpreted(jf, name: str) -> bool:
    log = thunder.last_interpreter_log(jf)
    return any(isinstance(e, dict) and e["kind"] == "Line" and e["fn"].endswith(name) for e in log)


def _same_output(actual, expected) -> None:
    assert type(actual) is type(expected)
    assert list(actual.keys()) == list(expected.keys())
    for k in expected.keys():
        torch.testing.assert_close(actual[k], expected[k])
        torch.testing.assert_close(getattr(actual, k), getattr(expected, k))
    for f in __import__("dataclasses").fields(expected):
        torch.testing.assert_close(getattr(actual, f.name), getattr(expected, f.name))


def test_a_model_output_is_constructed_natively_and_equals_eager():
    # Note [ModelOutput construction]: with a value after the first field, the dataclass's __init__, __setattr__,
    # __post_init__ and __setitem__ run natively; the installed transformers' methods are the ones the digest names.
    from transformers.modeling_outputs import BaseModelOutput, CausalLMOutputWithPast

    from thunder.core.library_wrappers import _MODEL_OUTPUT_DIGEST, native_wrapper

    known = sys.version_info[:2] in _MODEL_OUTPUT_DIGEST
    assert (native_wrapper(_Out.__init__) is not None) == known

    def f(x, cache):
        out = CausalLMOutputWithPast(logits=x * 2, past_key_values=cache)  # the old keyword, renamed (and warned)
        return out, _Out(b=x + 1, n=3), out.logits.sum(), out["cache"]

    x, cache = torch.randn(3), [torch.randn(2)]
    expected = f(x, cache)
    jf = thunder.jit(f, debug_options=thunder.DebugOptions(record_interpreter_history=True))
    actual = jf(x, cache)
    for a, e in zip(actual[:2], expected[:2]):
        _same_output(a, e)
    torch.testing.assert_close(actual[2], expected[2])
    assert actual[3] is cache
    assert _interpreted(jf, "_rename_kwargs_for_bc")  # the wrapper's renaming stays interpreted
    assert _interpreted(jf, "ModelOutput.__post_init__") != known
    # Only the first field set: __post_init__ asks whether it is a tensor, which is interpreted as before.
    g = thunder.jit(lambda x: BaseModelOutput(last_hidden_state=x + 1), debug_options=thunder.DebugOptions(
        record_interpreter_history=True))  # fmt: skip
    _same_output(g(x), BaseModelOutput(last_hidden_state=x + 1))
    assert _interpreted(g, "ModelOutput.__post_init__")


@pytest.mark.parametrize(
    "make",
    [lambda x: _Out(x, b=x), lambda x: _Out(a=x), lambda x: _Out(a=x, b=None, n=None), lambda x: _Out(b=x, c=x)],
    ids=["positional", "first-field-only", "all-but-first-none", "unknown-keyword"],
)
def test_a_model_output_constructed_otherwise_is_interpreted_as_eager(make):
    x = torch.randn(3)
    try:
        expected = make(x)
    except TypeError as e:
        with pytest.raises(TypeError, match=str(e).split("(")[0][:20]):
            thunder.jit(make)(x)
        return
    _same_output(thunder.jit(make)(x), expected)


def test_a_model_output_init_read_natively_is_checked():
    # The wrapper's ``init`` cell is read as the interpreter reads it: a new function there is retraced.
    def f(x):
        return _Out(a=x, b=x * 2)

    x = torch.randn(3)
    jf = thunder.jit(f)
    _same_output(jf(x), f(x))
    wrapper = _Out.__init__
    cell = wrapper.__closure__[wrapper.__code__.co_freevars.index("init")]
    init = cell.cell_contents
    try:
        # (a change that holds when applied twice: the call's output is rebuilt by calling the class, rebuild_mapping)
        cell.cell_contents = lambda self, a=None, b=None, n=None: init(self, a=a, b=b, n=7)
        changed = jf(x)
        _same_output(changed, f(x))
        assert changed.n == 7
    finally:
        cell.cell_contents = init
    _same_output(jf(x), f(x))
    assert thunder.cache_misses(jf) == 2


def _qwen2():
    return _small_decoder(transformers.Qwen2Config, transformers.Qwen2ForCausalLM)


def test_the_kernels_hub_routing_is_skipped_where_it_changes_nothing():
    """Note [The kernels hub's forward wrapper]: Qwen2's attention forward, wrapped by ``use_kernelized_func``, is
    called without the routing (no frame of the wrapper interpreted, no write to the routing's context variable
    replayed on each call); once a private copy has another forward (as ``kernelize`` gives), the call retraces
    and routes as eager does."""
    layer = pytest.importorskip("kernels._internals.layer.layer")
    from thunder.core.library_wrappers import _KERNELIZED_DIGEST

    known = sys.version_info[:2] in _KERNELIZED_DIGEST
    torch.manual_seed(0)
    model = _qwen2()
    ids = torch.randint(0, 500, (1, 6))
    kwargs = dict(max_new_tokens=4, do_sample=False, pad_token_id=0)
    expected = model.generate(ids, **kwargs)
    jm = thunder.jit(model, debug_options=thunder.DebugOptions(record_interpreter_history=True))
    assert torch.equal(jm.generate(ids, **kwargs), expected)
    assert thunder.cache_misses(jm) == 2
    assert _interpreted(jm, "new_forward") != known
    assert ("_ACTIVE_KERNEL_FUNCS.global_var =" in str(thunder.last_traces(jm)[-1])) != known
    assert not layer._ACTIVE_KERNEL_FUNCS.uses_global_var and layer._ACTIVE_KERNEL_FUNCS.global_var is None

    # A private copy kernelized: eager calls it, the traced (compiled) path calls its forward.
    copy = model.model.layers[0].self_attn._kernel_funcs["rotary_pos_emb"]

    class Kernelized(type(copy)):
        def forward(self, q, k, cos, sin, unsqueeze_dim=1):
            return q * 2, k - 1

    x = torch.randint(0, 500, (1, 5))
    plain = jm(x).logits
    copy.__class__ = Kernelized
    expected = model(x).logits
    assert not torch.allclose(plain, expected)
    torch.testing.assert_close(jm(x).logits, expected)
    reason = thunder.cache_miss_reasons(jm)[-1]
    assert (reason.check, reason.actual) == ("type", Kernelized)
    assert _interpreted(jm, "new_forward")


def test_a_library_wrapper_s_digest_covers_constants_and_names_and_is_the_same_in_every_process():
    """The digests that recognise transformers' wrappers hashed only the bytecode: a version that changed only a
    constant (another window, another default) would have been run by thunder's own code for the old one."""
    import subprocess

    from thunder.core.library_wrappers import _code_digest

    def f(x):
        return x in {"a", "b", "c"} and (lambda y: y + 1)(2) == 3

    def g(x):
        return x in {"a", "b", "d"} and (lambda y: y + 1)(2) == 3

    def h(x):
        return x in {"a", "b", "c"} and (lambda y: y + 2)(2) == 3

    assert f.__code__.co_code == g.__code__.co_code
    assert len({_code_digest(f.__code__), _code_digest(g.__code__), _code_digest(h.__code__)}) == 3
    script = (
        "from thunder.core.library_wrappers import _code_digest\n"
        "def f(x):\n    return x in {'a', 'b', 'c'} and (lambda y: y + 1)(2) == 3\n"
        "print(_code_digest(f.__code__))"
    )
    digests = {
        subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True,
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3")
    }  # fmt: skip
    assert len(digests) == 1


@pytest.mark.parametrize("name", ["t5", "bart", "whisper"])
def test_an_encoder_decoder_generate_runs_its_encoder_compiled(name):
    """``generate`` calls ``self.get_encoder()(...)`` itself, before decoding: the encoder ran eagerly. It runs compiled
    (Note [Submodules called by a method of a compiled module] in thunder.core.module), once per generation, with
    eager's outputs; a prompt of another length compiles it once more (symbolic), not once per length."""
    from tests import zoo

    model = zoo.build(name).eval()
    jm = thunder.jit(model)

    def generate(m, seq: int):
        if name == "whisper":
            g = torch.Generator().manual_seed(seq)
            inputs = {"input_features": torch.randn(2, zoo.MEL_BINS, zoo.MEL_FRAMES, generator=g)}
        else:
            inputs = {"input_ids": zoo.input_ids(seq=seq), "attention_mask": zoo.padded_mask(seq=seq)}
        out = m.generate(**inputs, do_sample=False, max_new_tokens=4, min_new_tokens=4, return_dict_in_generate=True,
                         output_scores=True)  # fmt: skip
        return out.sequences, out.scores

    for seq in (6, 7, 9):
        calls = thunder.cache_hits(jm) + thunder.cache_misses(jm)
        tokens, scores = generate(jm, seq)
        expected_tokens, expected_scores = generate(model, seq)
        assert torch.equal(tokens, expected_tokens)
        torch.testing.assert_close(scores, expected_scores)
        assert thunder.cache_hits(jm) + thunder.cache_misses(jm) - calls == 5  # the encoder, then 4 decoder steps
    assert thunder.cache_misses(jm) <= 8


def test_config_attributes_the_program_does_not_read_are_not_checked():
    """Note [A config's attribute reads]: a config read runs no interpreted ``HeterogeneousConfigMixin.__getattribute__``
    and checks only what it reads; a change of an attribute the forward never reads does not recompile, one it reads
    does, and the prologue checks that the config still has no heterogeneity spec (its reads would then differ)."""
    from transformers.integrations.heterogeneity.configuration_utils import HeterogeneousConfigMixin

    from thunder.core.library_wrappers import _CONFIG_GETATTRIBUTE_DIGEST, native_wrapper

    known = sys.version_info[:2] in _CONFIG_GETATTRIBUTE_DIGEST
    assert (native_wrapper(HeterogeneousConfigMixin.__getattribute__) is not None) == known
    torch.manual_seed(0)
    model = _gpt2()
    ids = torch.randint(0, 500, (1, 5))
    jm = thunder.jit(model)
    assert torch.equal(jm(ids).logits, model(ids).logits)
    model.config.summary_type = "mean"  # read by GPT2DoubleHeadsModel's head only
    assert torch.equal(jm(ids).logits, model(ids).logits)
    assert ("'_heterogeneity_spec' not in" in str(thunder.last_prologue_traces(jm)[-1])) == known
    assert thunder.cache_misses(jm) == 1
    model.config.output_hidden_states = True  # read by the forward: its outputs change
    expected, actual = model(ids), jm(ids)
    assert len(actual.hidden_states) == len(expected.hidden_states) == 3
    assert all(torch.equal(a, e) for a, e in zip(actual.hidden_states, expected.hidden_states))
    assert thunder.cache_misses(jm) == 2
