"""Rich displays of traces, trace histories and sessions (thunder_viz/display.py).

Layer: tests. Imports thunder, thunder_viz and IPython's formatters. The formatters are
registered on a stand-in shell holding a real ``DisplayFormatter``, so the tests do not touch the
process-wide ``InteractiveShell`` singleton other tests use.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from IPython.core.formatters import DisplayFormatter

import thunder
from thunder_viz import display, graph
from thunder_viz.render.mime import document_of
from thunder_viz.session import Session

MIME = "application/vnd.thunder.trace+json"
REPO = Path(__file__).resolve().parents[2]


def f(a, b):
    c = a + b
    unused = c * 3  # noqa: F841 (dead code)
    return torch.tanh(c * 2)


@pytest.fixture
def shell():
    ip = SimpleNamespace(display_formatter=DisplayFormatter())
    assert display.register_formatters(ip)
    return ip


@pytest.fixture(scope="module")
def jitted():
    jf = thunder.jit(f)
    jf(torch.randn(2, 3), torch.randn(2, 3))
    return jf


def fmt(ip, obj) -> dict:
    data, _ = ip.display_formatter.format(obj)
    return data


def test_a_trace_displays_as_document_snapshot_and_source(shell, jitted):
    trace = thunder.last_traces(jitted)[-1]
    data = fmt(shell, trace)
    assert set(data) == {MIME, "text/html", "text/plain"}
    doc = document_of(data)
    graph.validate_document(doc)
    assert doc["title"] == "f"
    assert [s["kind"] for s in doc["steps"]] == ["computation"]
    assert doc["steps"][0]["pass"] == trace.provenance.pass_name
    assert trace.python(print_depth=1) in data["text/plain"]
    assert "<script" in data["text/html"] and "thunder-explorer" in data["text/html"]
    # nothing to recompile: the toggles are off, and the document says why
    assert doc["executors"]["interactive"] is False and doc["executors"]["reason"]
    assert "torch" in doc["executors"]["selected"]


def test_a_trace_history_displays_every_step_with_its_diff(shell, jitted):
    traces = thunder.last_traces(jitted)
    doc = document_of(fmt(shell, traces))
    graph.validate_document(doc)
    assert [s["pass"] for s in doc["steps"]] == [t.provenance.pass_name for t in traces]
    assert doc["steps"][0]["diff"] is None
    dce = doc["steps"][1]
    assert dce["pass"] == "Dead Code Elimination" and len(dce["diff"]["removed"]) == 1
    # a tuple of traces, and the prologue's traces (their own kind)
    assert document_of(fmt(shell, tuple(traces)))["steps"] == doc["steps"]
    prologue = document_of(fmt(shell, thunder.last_prologue_traces(jitted)))
    assert {s["kind"] for s in prologue["steps"]} == {"prologue"}


def test_other_lists_keep_their_usual_display(shell, jitted):
    assert fmt(shell, [1, 2]) == {"text/plain": "[1, 2]"}
    assert fmt(shell, []) == {"text/plain": "[]"}
    mixed = [thunder.last_traces(jitted)[-1], 3]
    assert MIME not in fmt(shell, mixed)


def test_a_session_displays_its_steps_and_runs_read_only(shell):
    session = Session(thunder.jit(f))
    session(torch.randn(2, 3), torch.randn(2, 3))
    doc = document_of(fmt(shell, session))
    graph.validate_document(doc)
    kinds = [s["kind"] for s in doc["steps"]]
    assert kinds[0] == "prologue" and "computation" in kinds
    assert doc["executors"]["interactive"] is False
    assert doc["executors"]["reason"] == display.SESSION_REASON


def test_a_trace_the_graph_cannot_describe_falls_back_to_its_repr(shell, jitted, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(graph, "steps_from_traces", broken)
    data = fmt(shell, thunder.last_traces(jitted)[-1])
    assert MIME not in data and "computation" in data["text/plain"]


def test_registering_is_idempotent_keeps_others_and_can_be_undone(jitted):
    ip = SimpleNamespace(display_formatter=DisplayFormatter())
    mb = ip.display_formatter.mimebundle_formatter

    def theirs(obj):
        return None

    mb.for_type(tuple, theirs)  # someone else's formatter for tuples stays
    assert display.register_formatters(ip) and display.register_formatters(ip)
    assert mb.type_printers[list] is display.traces_bundle
    assert mb.type_printers[tuple] is theirs
    display.unregister_formatters(ip)
    assert list not in mb.type_printers and mb.type_printers[tuple] is theirs
    assert MIME not in fmt(ip, thunder.last_traces(jitted))


def run_python(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def test_outside_ipython_nothing_is_registered_and_thunder_does_not_import_thunder_viz():
    assert run_python("import thunder, sys; print('thunder_viz' in sys.modules)") == "False"
    code = "import thunder_viz, sys; from thunder_viz import display; print('IPython' in sys.modules, display.register_formatters())"
    assert run_python(code) == "False False"


def test_importing_thunder_viz_in_ipython_registers_the_formatters():
    code = (
        "from IPython.core.interactiveshell import InteractiveShell\n"
        "ip = InteractiveShell.instance()\n"
        "import torch, thunder, thunder_viz\n"
        "jf = thunder.jit(lambda a: a * 2)\n"
        "jf(torch.ones(2))\n"
        "data, _ = ip.display_formatter.format(thunder.last_traces(jf)[-1])\n"
        "print(sorted(data))\n"
    )
    assert run_python(code) == str(sorted([MIME, "text/html", "text/plain"]))
