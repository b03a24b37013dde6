"""The explorer on a function with several cache entries (``generate``: a prefill entry, then a decoding entry
whose cache length is symbolic): the document holds each entry's steps, built from that entry's own traces, with
its label, cache hits and compile time (Note [Steps of each cache entry] in thunder_viz/session.py), and the
per-entry counts of the cache itself (Note [Cache hits of each entry] in thunder)."""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder_viz.graph import DocumentError, validate_document
from thunder_viz.session import ENTRIES_WITH_STEPS, Session


def scale(x):
    return x * 2 + 1


def train_step(x, w):
    return (x @ w).tanh().sum()


def _steps_of(doc: dict, j: int) -> list[dict]:
    return [s for s in doc["steps"] if s.get("entry") == j]


def _assert_steps_are_the_entries(doc: dict, jitted) -> None:
    """Every step shown for entry ``j`` prints a trace of ``compile_stats(jitted).entries[j]``, in order."""
    entries = thunder.compile_stats(jitted).entries
    for j, item in enumerate(doc["entries"]["items"]):
        steps = _steps_of(doc, j)
        assert bool(steps) == item["steps"]
        if not steps:
            continue
        entry = entries[j]
        for kind, traces in (
            ("prologue", entry.prologue_traces),
            ("computation", entry.computation_traces),
            ("backward", entry.backward_traces),
        ):
            shown = [s["source"] for s in steps if s["kind"] == kind]
            assert shown == [t.python(print_depth=1) for t in traces], (j, kind)
        assert [s["index"] for s in steps] == list(range(len(steps)))
        assert all(s["id"] == f"e{j}s{s['index']}" for s in steps)


def test_each_cache_entry_counts_its_own_hits_and_compile_time():
    """The function's hits are split among its entries as the calls went, whichever path found the entry (the
    hot path, the entry tried next when calls alternate, the lookup)."""
    jf = thunder.jit(scale)
    inputs = {dt: torch.randn(2, 3, dtype=dt) for dt in (torch.float32, torch.float64, torch.float16)}
    order = [torch.float32] * 3 + [torch.float64, torch.float32] * 3 + [torch.float16, torch.float64, torch.float16]
    for dt in order:
        torch.testing.assert_close(jf(inputs[dt]), scale(inputs[dt]))
    stats = thunder.compile_stats(jf)
    calls = {dt: order.count(dt) for dt in inputs}
    hits = {e.computation_traces[0].args[0].dtype: e.hits for e in stats.entries}
    assert hits == {torch.float32: calls[torch.float32] - 1, torch.float64: calls[torch.float64] - 1, torch.float16: 1}
    assert sum(hits.values()) == thunder.cache_hits(jf)
    assert all(e.compile_ms > 0 for e in stats.entries)
    assert sum(e.compile_ms for e in stats.entries) == pytest.approx(stats.total_compile_ms)


def test_the_document_holds_the_steps_of_each_entry_from_its_own_traces():
    """Before, the steps were always the last compilation's: the other entry's traces could not be seen."""
    jf = thunder.jit(train_step)
    session = Session(jf)
    w = torch.randn(3, 4, requires_grad=True)
    session(torch.randn(2, 3), w)
    session(torch.randn(2, 3), w)
    session(torch.randn(2, 3, dtype=torch.float64), w.detach().double().requires_grad_())
    doc = session.to_document()
    validate_document(doc)
    items = doc["entries"]["items"]
    assert [i["hits"] for i in items] == [1, 0] and doc["entries"]["shown"] == 1
    assert items[0]["label"] == "entry 1: x f32[2, 3], w f32[3, 4]"
    assert items[1]["label"] == "entry 2: x f64[2, 3], w f64[3, 4]"
    _assert_steps_are_the_entries(doc, jf)
    assert any(s["kind"] == "backward" for s in _steps_of(doc, 0))  # each entry's backward, too
    first = [s for s in _steps_of(doc, 0) if s["kind"] == "computation"][-1]
    assert "f32[2, 3]" in first["source"] and "f64" not in first["source"]


def test_only_the_most_recently_used_entries_carry_their_steps():
    jf = thunder.jit(scale)
    session = Session(jf)
    dtypes = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.int64]
    for dt in dtypes:
        session(torch.ones(2, 3, dtype=dt))
    session(torch.ones(2, 3, dtype=torch.float64))  # now the most recently used: it keeps its steps
    doc = session.to_document()
    validate_document(doc)
    items = doc["entries"]["items"]
    assert len(items) == len(dtypes) and sum(i["steps"] for i in items) == ENTRIES_WITH_STEPS
    entries = thunder.compile_stats(jf).entries
    kept = {entries[j].computation_traces[0].args[0].dtype for j, i in enumerate(items) if i["steps"]}
    assert kept == {torch.float64, torch.int64, torch.int32, torch.bfloat16}  # the last compiled among them
    _assert_steps_are_the_entries(doc, jf)


def test_the_validator_refuses_the_steps_of_an_entry_split_or_unknown():
    jf = thunder.jit(scale)
    session = Session(jf)
    session(torch.ones(2, 3))
    session(torch.ones(2, 3, dtype=torch.float64))
    doc = session.to_document()
    steps = doc["steps"]
    first, second = _steps_of(doc, 0), _steps_of(doc, 1)
    with pytest.raises(DocumentError, match="follow each other"):
        validate_document({**doc, "steps": [*first[:-1], *second, first[-1]]})
    with pytest.raises(DocumentError, match="entries"):
        validate_document({**doc, "steps": [{**s, "entry": 5} for s in steps]})


@pytest.fixture(scope="module")
def generation():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64, bos_token_id=0, eos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    input_ids = torch.randint(0, config.vocab_size, (1, 8))
    jm = thunder.jit(model)
    out = jm.generate(input_ids, max_new_tokens=6, do_sample=False)
    torch.testing.assert_close(out, model.generate(input_ids, max_new_tokens=6, do_sample=False))
    return jm


def test_generate_shows_its_prefill_and_its_decoding_entry(generation):
    jm = generation
    doc = Session(jm).to_document()
    validate_document(doc)
    entries, items = doc["entries"], doc["entries"]["items"]
    labels = [i["label"] for i in items]
    assert labels[0] == "prefill: input_ids i64[1, 8], position_ids i64[1, 8]"
    assert labels[1] == "decode: input_ids i64[1, 1], position_ids i64[1, 1], cache length symbolic"
    assert entries["shown"] == 1  # the last compiled, as before
    # six tokens: the prefill's call compiled, the first decoding step compiled, the four others hit
    assert [i["hits"] for i in items] == [0, 4] and thunder.cache_misses(jm) == 2
    assert all(i["compile_ms"] > 0 and i["steps"] for i in items)
    _assert_steps_are_the_entries(doc, jm)
    prefill = [s for s in _steps_of(doc, 0) if s["kind"] == "computation"]
    decode = [s for s in _steps_of(doc, 1) if s["kind"] == "computation"]
    assert 'input_ids: "cpu i64[1, 8]"' in prefill[-1]["source"] and "cache_layers_0_keys" not in prefill[-1]["source"]
    assert "cache_layers_0_keys" in decode[-1]["source"]
    assert decode[-1]["source"] == thunder.last_traces(jm)[-1].python(print_depth=1)


def test_a_profile_goes_with_the_entry_it_measured(generation):
    """A profile measures the traces of the last compiled entry: it names that entry's steps, not another's (runs
    last: the recorded inputs, the last decoding step's with the cache that step grew, compile a third entry)."""
    jm = generation
    args, kwargs = thunder._last_inputs(jm)  # recorded since thunder_viz was imported
    session = Session(jm, args=args, kwargs=kwargs)
    profile = session.profile(calls=1)
    doc = session.to_document()
    validate_document(doc)
    shown = doc["entries"]["shown"]
    profiled = thunder.compile_stats(jm).entries[shown]
    assert profiled.computation_traces[-1] is profile.traces["computation"]
    assert doc["profile"]["steps"] and all(sid.startswith(f"e{shown}s") for sid in doc["profile"]["steps"])
