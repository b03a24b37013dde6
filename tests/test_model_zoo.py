"""The model zoo (``tests/zoo.py``): Hugging Face models from tiny configs, called through
``thunder.jit`` the ways people call them, against eager, in ``eval()`` (forward) and ``train()``
(forward, then backward from the compared outputs: every parameter's gradient), and greedy
``generate()`` on a compiled forward, with the default cache and with symbolic values.

Which (model, call mode, phase) run by default: ``DEFAULT_CASES``, a representative subset per
model (the plain call, the loss and its gradients, a padded batch, the KV-cache modes), about two
minutes with ``-n 2`` on two cores. The rest of the matrix (about six minutes more) carries
``pytest.mark.zoo_full`` and is skipped unless the marker expression names it (``-m zoo_full``:
only those; ``-m "zoo_full or not zoo_full"``: everything, as ``benchmarks/zoo_table.py`` runs it)
or ``THUNDER_ZOO_FULL=1`` is set.

Known failures are data (``XFAILS``): each a strict xfail with the real error, so a fix
elsewhere turns it into an XPASS failure that forces this table to be updated.
"""

from __future__ import annotations

import pytest
import torch

import thunder
from tests import zoo
from thunder.examine import examine

pytest.importorskip("transformers")

# The call modes (and phases) that run by default for every model they apply to.
DEFAULT_CASES = {
    ("plain", "eval"),
    ("labels", "train"),
    ("mask", "eval"),
    ("labels_mask", "train"),
    ("no_cache", "eval"),
    ("use_cache", "eval"),
    ("token_type_ids", "eval"),
    ("encoder_outputs", "eval"),
}

# (model, call mode, phase) -> reason; "*" matches every mode or phase.
XFAILS: dict[tuple[str, str, str], str] = {}


def _xfail_reason(name: str, mode: str, phase: str) -> str | None:
    for key in ((name, mode, phase), (name, mode, "*"), (name, "*", phase), (name, "*", "*")):
        if key in XFAILS:
            return XFAILS[key]
    return None


def _cases():
    for name, entry in zoo.ZOO.items():
        for mode, make in zoo.CALL_MODES.items():
            if make(entry) is None:
                continue
            for phase in ("eval", "train"):
                marks = [] if (mode, phase) in DEFAULT_CASES else [pytest.mark.zoo_full]
                reason = _xfail_reason(name, mode, phase)
                if reason:
                    marks.append(pytest.mark.xfail(strict=True, reason=reason))
                yield pytest.param(name, mode, phase, marks=marks, id=f"{name}-{mode}-{phase}")


@pytest.mark.parametrize("name,mode,phase", list(_cases()))
def test_zoo_call_matches_eager(name, mode, phase):
    jm = zoo.check_call(name, mode, phase == "train")
    assert thunder.cache_misses(jm) == 1
    if phase == "train":
        assert thunder.compile_stats(jm).last_autograd_fallback is None  # thunder's own backward ran


@pytest.mark.parametrize("name", list(zoo.ZOO))
def test_zoo_second_call_hits_the_cache(name):
    call = zoo.mode_plain(zoo.ZOO[name])
    model = zoo.build(name).eval()
    jm = thunder.jit(model)
    first = call.pick(jm(**call.kwargs))
    torch.testing.assert_close(call.pick(jm(**call.kwargs)), first)
    assert (thunder.cache_misses(jm), thunder.cache_hits(jm)) == (1, 1)


_EXAMINED_BY_DEFAULT = ("gpt2", "llama", "mixtral", "bert", "t5", "whisper", "vit", "convnext", "clip")


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=[] if n in _EXAMINED_BY_DEFAULT else [pytest.mark.zoo_full]) for n in zoo.ZOO]
)
def test_examine_finds_nothing_unsupported(name):
    """``thunder.examine`` on each zoo model, called plainly and with its loss: every torch operation
    it calls is supported (and the jitted model ran). A few models by default, all with ``-m zoo_full``."""
    model = zoo.build(name).eval()
    for make in (zoo.mode_plain, zoo.mode_labels):
        call = make(zoo.ZOO[name])
        if call is not None:
            report = examine(model, show=False, **call.kwargs)
            assert (report["unsupported"], report["untraceable"], report["jit_error"]) == ({}, {}, None)


def test_image_classifier_recompiles_once_after_its_loss_sets_problem_type():
    """The first call with labels sets ``config.problem_type`` (replayed after the computation); the
    next call reads the new value, so it compiles once more, and after that every call hits."""
    call = zoo.mode_labels(zoo.ZOO["vit"])
    model = zoo.build("vit").train()
    jm = thunder.jit(model)
    jm(**call.kwargs)
    assert model.config.problem_type == "single_label_classification"
    assert thunder.cache_misses(jm) == 1
    jm(**call.kwargs)
    jm(**call.kwargs)
    assert (thunder.cache_misses(jm), thunder.cache_hits(jm)) == (2, 1)


GENERATE = [n for n, e in zoo.ZOO.items() if e.generate]
_GENERATE_XFAILS: dict[str, str] = {}


def _generate_params():
    for name in GENERATE:
        reason = _GENERATE_XFAILS.get(name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        yield pytest.param(name, marks=marks, id=name)


def _generate(name: str, cache: str | None):
    """The eager model's greedy tokens, the model with a jitted forward, and that forward."""
    model = zoo.build(name).eval()
    expected = model.generate(**zoo.generate_kwargs(name))
    jitted = zoo.jit_forward(model, **({} if cache is None else {"cache": cache}))
    return expected, model, jitted


@pytest.mark.parametrize("name", list(_generate_params()))
def test_generate_matches_eager(name):
    expected, model, jitted = _generate(name, None)
    assert torch.equal(model.generate(**zoo.generate_kwargs(name)), expected)
    # The default: the prefill compiles, then the first decoding step (one token), then the second, whose KV cache
    # is longer, with that length symbolic (automatic dynamic shapes): an entry that serves every later step.
    assert 1 <= thunder.cache_misses(jitted) <= 3


@pytest.mark.parametrize("name", list(_generate_params()))
def test_generate_symbolic_values_matches_eager(name):
    expected, model, jitted = _generate(name, "symbolic values")
    assert torch.equal(model.generate(**zoo.generate_kwargs(name)), expected)
    misses = thunder.cache_misses(jitted)
    # The prefill, and one entry for every decoding step (MPT's one entry serves both).
    assert misses in (1, 2)
    # The same generation again: every step finds its entry.
    assert torch.equal(model.generate(**zoo.generate_kwargs(name)), expected)
    assert thunder.cache_misses(jitted) == misses


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_generate_symbolic_values_compiles_prefill_and_one_decoding_step(name):
    """Under symbolic values the KV cache's length is a symbol: after the prefill, one decoding
    entry serves every later step (each step used to recompile while ``a[:]`` read its length)."""
    _, model, jitted = _generate(name, "symbolic values")
    model.generate(**zoo.generate_kwargs(name))
    assert thunder.cache_misses(jitted) == 2


def test_whole_slice_keeps_a_symbolic_dim():
    """The regression under the test above: ``c[:, None, :]`` of a concatenation (a KV cache
    update) kept the slice's end as a constant (``slice.indices`` read the symbolic length), so the
    expand that followed pinned the length and every new length recompiled."""

    def f(past, new):
        c = torch.cat([past, new], dim=1)
        return c[:, None, :].expand(c.shape[0], 3, c.shape[1]) + c[:, -2:][:, None, :1]

    jf = thunder.jit(f, cache="symbolic values")
    for n in (5, 6, 7):
        past, new = torch.randn(2, n), torch.randn(2, 1)
        torch.testing.assert_close(jf(past, new), f(past, new))
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("name", ["t5", "bart"])
def test_encoder_decoder_generate_matches_eager(name):
    model = zoo.build(name).eval()
    kwargs = {"input_ids": zoo.input_ids(), "attention_mask": zoo.padded_mask(), "do_sample": False,
              "max_new_tokens": 4, "min_new_tokens": 4}  # fmt: skip
    expected = model.generate(**kwargs)
    zoo.jit_forward(model)
    assert torch.equal(model.generate(**kwargs), expected)
