"""Writes the saved notebooks of test_saved_notebook.py (run from the repository root):

    python tests/browser/make_saved_notebooks.py

- ``saved_explorer.ipynb``: a notebook run through nbclient (a real kernel) and saved with its
  outputs: a trace history, one trace, and an explorer widget (widget state stored). The browser
  test opens it with no kernel.
- ``saved_hostile.ipynb``: crafted outputs: a real document whose names, sources and title hold
  markup and script, next to a hostile ``text/html``; a wrong schema version; missing fields; too
  many steps; a huge string; a document that is not an object. Nothing in it may run.

Layer: test tooling. Imports: nbformat, nbclient, thunder, thunder_viz.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent / "notebooks"
MIME = "application/vnd.thunder.trace+json"

SAVED_CELLS = [
    "import torch\n\nimport thunder\nimport thunder_viz\n\n\n"
    "def f(a, b):\n    c = a + b\n    d = c * 2\n    unused = d - 1  # noqa: F841 (dead code a pass removes)\n"
    "    return torch.tanh(d)\n\n\n"
    "jf = thunder.jit(f, executors=[\"torch\"])  # unfused: each op is a node\na, b = torch.randn(4, 3), torch.randn(4, 3)\n_ = jf(a, b)",
    "# the trace history: every computation trace, each after one pass\nthunder.last_traces(jf)",
    "# one trace\ndisplay(thunder.last_traces(jf)[-1])",
    "# the explorer widget (its saved output carries the same document)\nthunder_viz.explore(jf, args=(a, b))",
]

# Markup that must show as text: any of these running sets window.__pwned or opens a dialog.
SCRIPT = "<script>window.__pwned = 1; alert(1)</script>"
IMG = '<img src=x onerror="window.__pwned = 2; alert(2)">'
SVG = '<svg onload="window.__pwned = 3"></svg>'


def saved_explorer() -> nbformat.NotebookNode:
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(src) for src in SAVED_CELLS]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(nb, timeout=600, kernel_name="python3", store_widget_state=True).execute()
    return nb


def _real_document() -> dict:
    import torch

    import thunder
    from thunder_viz.display import trace_document

    def h(x):
        y = x * 2
        return y + 1

    jh = thunder.jit(h)
    jh(torch.randn(3))
    return trace_document(thunder.last_traces(jh))


def _poison(doc: dict) -> dict:
    """The same document with markup in every string the explorer shows."""
    doc = copy.deepcopy(doc)
    doc["title"] = f"h {IMG}"
    for step in doc["steps"]:
        step["pass"] = f"{SCRIPT} pass"
        step["source"] = step["source"].replace("def computation", f"# {SCRIPT} {IMG}\ndef computation")
        for node in step["nodes"]:
            node["label"] = f"{node['label']} {IMG}"
            node["op"] = f"{node['op']}{SCRIPT}"
            node["decomposition"] = [SVG]
            node["source"] = {"file": f"/tmp/{IMG}.py", "line": 1, "function": SCRIPT, "module_path": SVG, "code": IMG}
            for v in node["inputs"] + node["outputs"]:
                v["repr"] = IMG
    return doc


def _output(data: dict, *, html: str | None = None) -> nbformat.NotebookNode:
    bundle = {MIME: data, "text/plain": "a crafted thunder trace output"}
    if html is not None:
        bundle["text/html"] = html
    return nbformat.v4.new_output("display_data", data=bundle)


def saved_hostile() -> nbformat.NotebookNode:
    doc = _real_document()
    cases = [
        ("markup in every name, source and title", _output(_poison(doc), html=f"{SCRIPT}{IMG}")),
        ("a schema version this explorer does not read", _output({**doc, "version": 999})),
        ("missing fields", _output({"schema": "thunder-trace", "version": 1, "title": IMG})),
        ("too many steps", _output({**doc, "steps": [{}] * 201})),
        ("a huge string", _output({**doc, "title": "<" * 200_000})),
        ("not an object", _output(SCRIPT)),  # type: ignore[arg-type]
    ]
    nb = nbformat.v4.new_notebook()
    for i, (what, output) in enumerate(cases):
        cell = nbformat.v4.new_code_cell(f"# crafted output {i}: {what}", execution_count=i + 1)
        cell.outputs = [output]
        nb.cells.append(cell)
    return nb


def main() -> None:
    for name, make in (("saved_hostile.ipynb", saved_hostile), ("saved_explorer.ipynb", saved_explorer)):
        nb = make()
        for i, cell in enumerate(nb.cells):
            cell["id"] = f"{Path(name).stem}-{i}"
        nbformat.validate(nb)
        (HERE / name).write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        print(f"{name}: {(HERE / name).stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
