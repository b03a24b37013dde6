"""The explorer widget without a browser: a recording comm, and front-end messages simulated.

See /work/shared/JUPYTER-TESTING.md ("Widgets without a browser").
"""

from __future__ import annotations

import re

import comm
import pytest
import torch
from comm.base_comm import BaseComm

import thunder
import thunder_viz
from tests.viz import session_stubs
from thunder_viz.render.mime import document_of
from thunder_viz.render.pack import unpack_document
from thunder_viz.session import Session
from thunder_viz.widget import _PLACEHOLDER_ESM, ESM_PATH, ExplorerWidget

TRACE_MIME = "application/vnd.thunder.trace+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


class RecordingComm(BaseComm):
    """A comm that keeps what the kernel would send to the front end."""

    def __init__(self, *args, **kwargs):
        self.sent: list[dict] = []
        super().__init__(*args, **kwargs)

    def publish_msg(self, msg_type, data=None, metadata=None, buffers=None, **keys):
        self.sent.append({"msg_type": msg_type, "data": data, "buffers": buffers})


@pytest.fixture(autouse=True)
def _recording_comm(monkeypatch):
    session_stubs.install(monkeypatch)
    monkeypatch.setattr(comm, "create_comm", RecordingComm)


def front_end_sends(widget, content: dict) -> None:
    widget._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def front_end_sets(widget, **state) -> None:
    widget._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})


def state_updates(widget) -> list[dict]:
    return [m["data"]["state"] for m in widget.comm.sent if m["data"] and m["data"].get("method") == "update"]


def scaled_tanh(x, w):
    return torch.tanh(x @ w) * 0.5 + x.sum()


def explorer(**session_options) -> ExplorerWidget:
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    session = Session(thunder.jit(scaled_tanh), **session_options)
    session(x, w)
    session.max_repeats = 3
    return ExplorerWidget(session)


def test_widget_opens_with_the_document_and_the_front_end():
    w = explorer()
    opened = w.comm.sent[0]
    assert opened["msg_type"] == "comm_open"
    state = opened["data"]["state"]
    assert state["doc"]["encoding"] == "gzip-base64", "the live document is sent packed, as saved outputs store it"
    sent = unpack_document(state["doc"])
    assert sent == w.document and sent["title"] == "scaled_tanh" and state["status"] == "ready"
    assert sent["executors"]["interactive"] is True and state["explorer_id"]
    expected_esm = ESM_PATH.read_text() if ESM_PATH.exists() else _PLACEHOLDER_ESM
    assert state["_esm"] == expected_esm
    assert re.search(r"export\s*(default|\{[^}]*\bas default\b)", state["_esm"]), "an ES module with a default export"
    session_stubs.validate(w.document)


def test_rerun_message_recompiles_reruns_and_updates_the_document():
    w = explorer()
    w.comm.sent.clear()
    front_end_sends(w, {"type": "rerun", "executors": ["python"]})
    [first, run] = w.session.runs
    assert first.first_call and not run.first_call
    assert run.executors == ["python", "torch"] and run.error is None
    assert run.median_ms > 0 and run.max_abs_diff is not None and run.matches_eager
    assert run.cache_misses == 1 and run.cache_hits >= 1
    assert w.document["runs"] == [first.to_json(), run.to_json()]
    assert w.document["executors"]["selected"] == ["python", "torch"]
    # What the front end saw, in order: running, the new document, ready.
    updates = state_updates(w)
    assert updates[0] == {"status": "running…"}
    assert updates[-1] == {"status": "ready"}
    [doc_update] = [u for u in updates if "doc" in u]
    assert unpack_document(doc_update["doc"])["runs"][-1]["id"] == "r2"
    assert updates.index(doc_update) == 1


def test_previous_runs_stay_in_the_document():
    w = explorer()
    w.rerun(["torch"])
    w.rerun(["python"])
    assert [(r["id"], r["executors"]) for r in w.document["runs"][1:]] == [
        ("r2", ["torch", "python"]),
        ("r3", ["python", "torch"]),
    ]


def test_bad_rerun_message_sets_an_error_status_and_keeps_the_kernel_going():
    w = explorer()
    front_end_sends(w, {"type": "rerun", "executors": ["fastest"]})
    assert w.status.startswith("error: unknown executors ['fastest']")
    front_end_sends(w, {"type": "rerun", "executors": "torch"})
    assert w.status.startswith("error: a rerun needs a list")
    assert [r.first_call for r in w.session.runs] == [True]  # only the first call
    front_end_sends(w, {"type": "something else"})  # ignored
    front_end_sends(w, {"type": "rerun", "executors": ["torch"]})
    assert w.status == "ready" and len(w.session.runs) == 2


def test_rerun_that_fails_shows_the_error_in_the_document():
    def index_out_of_range(x, i):
        return torch.index_select(x * 2, 0, i)  # out of range when it runs

    session = Session(thunder.jit(index_out_of_range))
    session(torch.randn(2, 3), torch.tensor([1]))
    w = ExplorerWidget(session)
    session.args = (torch.randn(2, 3), torch.tensor([7]))
    front_end_sends(w, {"type": "rerun", "executors": ["torch"]})
    assert w.status == "ready"
    assert w.document["error"]["type"] == "IndexError" and w.document["error"]["stage"] == "running"
    assert w.document["error"]["user_frame"]["code"].startswith("return torch.index_select(x * 2, 0, i)")
    assert w.document["runs"][-1]["error"] == w.document["error"]
    assert w.document["steps"], "the completed steps stay"


def test_trait_updates_from_the_front_end_are_applied():
    w = explorer()
    front_end_sets(w, status="busy in the browser")
    assert w.status == "busy in the browser"


def test_mimebundle_carries_the_widget_view_and_the_saved_document():
    w = explorer()
    data, _metadata = w._repr_mimebundle_()
    assert data[WIDGET_MIME]["model_id"] == w.model_id
    saved = document_of(data)
    assert saved["executors"]["interactive"] is False and "no kernel" in saved["executors"]["reason"]
    assert saved["steps"] == w.document["steps"]
    assert w.document["executors"]["interactive"] is True, "the live document stays interactive"
    assert "text/html" in data and "def computation" in data["text/plain"]


class RecordingDisplayPublisher:
    """What IPython would send to the front end as display_data and update_display_data."""

    def __init__(self):
        self.published: list[dict] = []

    def publish(self, data, metadata=None, source=None, *, transient=None, update=False):
        self.published.append({"data": data, "transient": transient or {}, "update": update})


@pytest.fixture
def display_pub(monkeypatch):
    from IPython.core.interactiveshell import InteractiveShell

    recording = RecordingDisplayPublisher()
    monkeypatch.setattr(InteractiveShell.instance(), "display_pub", recording)
    return recording.published


def test_each_rerun_updates_the_display_so_a_saved_notebook_holds_the_latest_runs(display_pub):
    """Regression: the saved output kept the first display's document, without the reruns."""
    from IPython.display import display

    w = explorer()
    display(w)
    [shown] = display_pub
    display_id = shown["transient"]["display_id"]
    assert not shown["update"] and display_id == w.explorer_id
    assert shown["data"][WIDGET_MIME]["model_id"] == w.model_id
    assert [r["id"] for r in document_of(shown["data"])["runs"]] == ["r1"]
    w.rerun(["python"])
    w.rerun(["torch"])
    updates = display_pub[1:]
    assert [(u["update"], u["transient"]["display_id"]) for u in updates] == [(True, display_id)] * 2
    saved = document_of(updates[-1]["data"])
    assert [r["id"] for r in saved["runs"]] == ["r1", "r2", "r3"] and saved["executors"]["interactive"] is False
    assert updates[-1]["data"][WIDGET_MIME]["model_id"] == w.model_id, "the live widget stays the same"


def test_a_widget_never_displayed_publishes_no_updates(display_pub):
    w = explorer()
    w.rerun(["python"])
    assert display_pub == []


def test_explore_uses_the_inputs_a_session_recorded_or_the_given_ones():
    jf = thunder.jit(scaled_tanh)
    with pytest.raises(TypeError, match="has not been called yet"):
        thunder_viz.explore(jf)
    w = thunder_viz.explore(jf, args=(torch.randn(4, 4), torch.randn(4, 4)))
    assert w.document["executors"]["interactive"] is True and w.document["steps"]
    again = thunder_viz.explore(jf)
    assert again.session is w.session


def test_explore_after_a_plain_call_reruns_with_its_inputs():
    jf = thunder.jit(scaled_tanh)
    jf(torch.randn(4, 4), torch.randn(4, 4))  # recorded: thunder_viz is imported
    w = thunder_viz.explore(jf)
    assert w.document["steps"] and w.document["executors"]["interactive"] is True
    run = w.rerun(["torch"])
    assert run.error is None and run.matches_eager


def test_explore_after_calls_starts_with_the_first_call_row_as_the_magic_does():
    """explore(jm) said "Runs: none yet" where %thunder_jit showed the call that compiled."""
    jf = thunder.jit(scaled_tanh)
    for _ in range(3):
        jf(torch.randn(4, 4), torch.randn(4, 4))
    w = thunder_viz.explore(jf)
    [first] = w.document["runs"]
    assert first["first_call"] is True and first["id"] == "r1"
    assert first["executors"] == w.session.executors
    assert (first["cache_misses"], first["cache_hits"], first["repeats"]) == (1, 2, 3)
    assert first["compile_ms"] > 0 and first["median_ms"] is None  # its time was not measured
    assert first["matches_eager"] is None and first["max_abs_diff"] is None


def test_explore_after_a_training_step_shows_the_backward_and_reruns():
    torch.manual_seed(0)
    jm = thunder.jit(torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Tanh()))
    jm(torch.randn(2, 4)).sum().backward()
    w = thunder_viz.explore(jm)
    kinds = [step["kind"] for step in w.document["steps"]]
    assert "backward" in kinds and "computation" in kinds
    run = w.rerun(["torch"])
    assert run.error is None and run.matches_eager


def test_explore_after_a_training_step_with_dropout_compares_yes():
    """The training explorer said "NO (loss)": eager ran its dropout from another random state."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
    jm = thunder.jit(model)
    x = torch.randn(16, 8)
    jm(x).sum().backward()
    w = thunder_viz.explore(jm)
    run = w.rerun(["torch"])
    assert run.error is None and run.not_comparable is None
    assert run.matches_eager is True and run.max_abs_diff < 1e-5


def test_explore_without_recorded_inputs_shows_the_compilation_without_reruns():
    jf = thunder.jit(scaled_tanh)
    thunder._record_last_inputs(False)
    try:
        jf(torch.randn(4, 4), torch.randn(4, 4))
    finally:
        thunder._record_last_inputs(True)
    w = thunder_viz.explore(jf)
    assert w.document["steps"] and w.document["executors"]["interactive"] is False
    with pytest.raises(ValueError, match="inputs of its last call are unknown"):
        w.rerun(["torch"])
    assert w.status.startswith("error:")


def test_explore_rejects_what_is_not_jitted():
    with pytest.raises(TypeError, match="not a function returned by thunder.jit"):
        thunder_viz.explore(scaled_tanh)


@pytest.mark.slow
def test_rerun_with_torchcompile_shows_a_torchcompile_fusion():
    w = explorer()
    front_end_sends(w, {"type": "rerun", "executors": ["torchcompile"]})
    [_first, run] = w.session.runs
    assert run.error is None and run.matches_eager, run
    assert run.executors[0] == "torchcompile"
    final = w.document["steps"][-1]
    fusions = [n for n in final["nodes"] if n["fusion"]]
    assert fusions and all(n["executor"] == "torchcompile" for n in fusions)
    assert any(n["executor"] == "torchcompile" for n in final["nodes"])
    if session_stubs.real("thunder_viz.graph"):
        fusion_groups = [g for g in final["groups"] if g["kind"] == "fusion"]
        assert fusion_groups and fusion_groups[0]["label"].startswith("TorchCompile")
        fused = [s["diff"]["fused"] for s in w.document["steps"] if s["diff"] and s["diff"]["fused"]]
        assert fused, "the step that fused says which nodes it absorbed"


def test_write_html_writes_the_explorer_with_the_session_runs(tmp_path):
    from thunder_viz.render.html import packed_in_html
    from thunder_viz.render.pack import unpack_document

    jf = thunder.jit(scaled_tanh)
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    widget = thunder_viz.explore(jf, args=(x, w))
    widget.session.max_repeats = 2
    widget.rerun(["torch"])
    path = thunder_viz.write_html(jf, tmp_path / "explorer.html")
    page = path.read_text(encoding="utf-8")
    assert path == tmp_path / "explorer.html" and page.startswith("<!DOCTYPE html>")
    doc = unpack_document(packed_in_html(page))
    assert [(r["id"], r["first_call"]) for r in doc["runs"]] == [("r1", True), ("r2", False)]
    assert doc["executors"]["interactive"] is False and doc["steps"]

    plain = thunder.jit(scaled_tanh)
    plain(x, w)
    doc = unpack_document(packed_in_html(thunder_viz.write_html(plain, tmp_path / "plain.html").read_text()))
    assert doc["runs"] == [] and doc["steps"]
    with pytest.raises(TypeError, match="has not been called yet"):
        thunder_viz.write_html(thunder.jit(scaled_tanh), tmp_path / "never.html")
    assert not (tmp_path / "never.html").exists()


def test_profile_message_profiles_and_updates_the_document():
    w = explorer()
    w.comm.sent.clear()
    front_end_sends(w, {"type": "profile"})
    profile = w.document["profile"]
    last = [s for s in w.document["steps"] if s["kind"] == "computation"][-1]
    assert list(profile["steps"]) == [last["id"]] and profile["steps"][last["id"]]["nodes"]
    updates = state_updates(w)
    assert updates[0] == {"status": "running… (profiling)"} and updates[-1] == {"status": "ready"}
    [doc_update] = [u for u in updates if "doc" in u]
    assert unpack_document(doc_update["doc"])["profile"] == profile
    session_stubs.validate(w.document)


def test_a_profile_is_kept_in_the_saved_output_and_the_html_snapshot(tmp_path, display_pub):
    from thunder_viz.render.html import packed_in_html

    jf = thunder.jit(scaled_tanh, executors=["torch"])
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    widget = thunder_viz.explore(jf, args=(x, w))
    widget._ipython_display_()
    widget.profile(calls=1)
    saved = document_of(widget._repr_mimebundle_()[0])
    assert saved["profile"] == widget.document["profile"] and saved["profile"]["steps"]
    assert saved["executors"]["interactive"] is False and widget.document["executors"]["interactive"] is True
    page = thunder_viz.write_html(jf, tmp_path / "p.html").read_text(encoding="utf-8")
    assert unpack_document(packed_in_html(page))["profile"] == widget.document["profile"]
