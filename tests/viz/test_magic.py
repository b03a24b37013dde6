"""``%thunder_jit`` and ``%%thunder_jit`` through a real IPython shell."""

from __future__ import annotations

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output

import thunder
from tests.viz import session_stubs
from thunder_viz.magic import parse_options, split_line
from thunder_viz.render.mime import document_of
from thunder_viz.render.pack import unpack_document
from thunder_viz.widget import ExplorerWidget

TRACE_MIME = "application/vnd.thunder.trace+json"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"


@pytest.fixture
def shell(monkeypatch):
    session_stubs.install(monkeypatch)
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "thunder_viz")
    ip.user_ns.update(torch=torch, x=torch.randn(3, 4), y=torch.randn(3, 4))
    ip.run_cell(
        "def f(a, b):\n"
        "    return torch.sin(a) * b + 1\n"
        "\n"
        "def broken(a, b):\n"
        "    c = a * 2\n"
        "    return c @ b  # shapes do not fit\n"
    )
    yield ip
    for name in ("f", "broken", "jf", "model", "result"):
        ip.user_ns.pop(name, None)


def run(shell, source: str):
    """Runs a cell; returns (its value, what it displayed, what it printed)."""
    with capture_output() as captured:
        result = shell.run_cell(source)
    result.raise_error()
    return result.result, captured.outputs, captured.stdout


def explorers(outputs) -> list[dict]:
    return [{**o.data, TRACE_MIME: document_of(o.data)} for o in outputs if WIDGET_MIME in o.data]


def test_line_magic_returns_the_result_and_displays_the_explorer(shell):
    value, outputs, stdout = run(shell, "%thunder_jit f(x, y)")
    ns = shell.user_ns
    torch.testing.assert_close(value, torch.sin(ns["x"]) * ns["y"] + 1)
    [shown] = explorers(outputs)
    doc = shown[TRACE_MIME]
    assert doc["title"] == "f" and doc["steps"] and doc["error"] is None
    assert doc["executors"]["selected"] == [e.name for e in (*thunder.get_default_executors(), *thunder.get_always_executors())]
    assert "thunder_jit:" not in stdout  # nothing failed


def test_line_magic_arguments_are_evaluated_in_the_user_namespace(shell):
    value, _, _ = run(shell, "%thunder_jit --executors python --name jf f(*[x], b=y[0] * 2)")
    ns = shell.user_ns
    torch.testing.assert_close(value, torch.sin(ns["x"]) * (ns["y"][0] * 2) + 1)
    assert thunder.compile_data(ns["jf"]).executors_list[0].name == "python"


def test_line_magic_jits_a_module(shell):
    shell.user_ns["model"] = torch.nn.Linear(4, 2)
    value, outputs, _ = run(shell, "%thunder_jit model(x)")
    torch.testing.assert_close(value, shell.user_ns["model"](shell.user_ns["x"]))
    [shown] = explorers(outputs)
    assert shown[TRACE_MIME]["title"] == "Linear"


def test_cell_magic_runs_the_block_then_explores_the_last_call(shell):
    value, outputs, _ = run(
        shell,
        "%%thunder_jit --executors torch,python --cache 'no caching'\nz = x + 1\nf(z, b=y)\n",
    )
    ns = shell.user_ns
    torch.testing.assert_close(ns["z"], ns["x"] + 1)
    torch.testing.assert_close(value, torch.sin(ns["z"]) * ns["y"] + 1)
    [shown] = explorers(outputs)
    assert shown[TRACE_MIME]["executors"]["selected"] == ["torch", "python"]


def test_failure_shows_the_error_with_the_users_line_and_says_so_in_one_line(shell):
    value, outputs, stdout = run(shell, "%thunder_jit broken(x, y)")
    assert value is None
    [shown] = explorers(outputs)
    error = shown[TRACE_MIME]["error"]
    assert error["type"] == "ThunderValueError" and error["stage"] == "tracing"
    assert error["user_frame"]["function"] == "broken"
    assert error["user_frame"]["code"] == "return c @ b  # shapes do not fit"
    [line] = stdout.splitlines()
    assert line.startswith("thunder_jit: ThunderValueError while tracing at ")
    assert "return c @ b" in line and "inner dimensions" in line
    assert "Traceback" not in stdout


def test_failure_in_a_function_defined_in_the_cell_points_into_the_cell(shell):
    value, outputs, stdout = run(
        shell,
        "%%thunder_jit\ndef g(a):\n    return a.share_memory_() + 1\ng(x)\n",
    )
    assert value is None
    [shown] = explorers(outputs)
    frame = shown[TRACE_MIME]["error"]["user_frame"]
    assert frame["function"] == "g" and frame["line"] == 2 and frame["code"] == "return a.share_memory_() + 1"
    assert "UnsupportedOpError while tracing" in stdout


def test_widget_displayed_by_the_magic_can_rerun(shell, monkeypatch):
    shown = []
    monkeypatch.setattr("thunder_viz.magic.display", shown.append)
    run(shell, "%thunder_jit f(x, y)")
    [widget] = shown
    assert isinstance(widget, ExplorerWidget)
    widget.session.max_repeats = 2
    run_ = widget.rerun(["python"])
    assert run_.error is None and run_.matches_eager


def test_result_is_returned_even_if_the_explorer_cannot_be_built(shell, monkeypatch):
    def broken_document(self, **_):
        raise RuntimeError("serializer bug")

    monkeypatch.setattr("thunder_viz.session.Session.to_document", broken_document)
    value, outputs, stdout = run(shell, "%thunder_jit f(x, y)")
    assert value is not None and explorers(outputs) == []
    assert "thunder_jit: could not show the explorer: RuntimeError: serializer bug" in stdout


@pytest.mark.parametrize("line", ["x + 1", "f", "--bogus 1 f(x)", "--name 1x f(x, y)", "f(x"])
def test_usage_errors(shell, line):
    result = shell.run_cell(f"%thunder_jit {line}")
    assert result.error_in_exec is not None
    assert type(result.error_in_exec).__name__ == "UsageError"


def test_split_line_and_options():
    assert split_line("--executors torch,python --cache='no caching' f(a, b)") == (
        "--executors torch,python --cache='no caching'",
        " f(a, b)",
    )
    assert split_line("f(--x)") == ("", "f(--x)")
    options = parse_options("--executors torchcompile --name jf")
    assert (options.executors, options.cache, options.name) == ("torchcompile", None, "jf")


def _real_serializer() -> bool:
    try:
        from thunder_viz.graph import steps_from_jitted  # noqa: F401
    except ImportError:
        return False
    return True


@pytest.mark.skipif(not _real_serializer(), reason="thunder_viz.graph not written yet")
def test_magic_in_a_real_kernel_stores_the_widget_and_the_saved_document(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.v4.new_notebook()
    nb.cells = [
        nbformat.v4.new_code_cell("import torch\n%load_ext thunder_viz\nx = torch.ones(2, 3)"),
        nbformat.v4.new_code_cell("def f(a):\n    return torch.cos(a) + 1\n%thunder_jit f(x)"),
    ]
    nbclient.NotebookClient(
        nb, timeout=120, store_widget_state=True, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()
    outputs = nb.cells[1].outputs
    [display] = [o for o in outputs if o.output_type == "display_data"]
    assert WIDGET_MIME in display.data and TRACE_MIME in display.data
    assert document_of(display.data)["executors"]["interactive"] is False
    [result] = [o for o in outputs if o.output_type == "execute_result"]
    assert "tensor" in result.data["text/plain"]
    model_id = display.data[WIDGET_MIME]["model_id"]
    state = nb.metadata.widgets["application/vnd.jupyter.widget-state+json"]["state"][model_id]["state"]
    assert unpack_document(state["doc"])["title"] == "f" and state["status"] == "ready"
