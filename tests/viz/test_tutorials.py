"""The tutorials as saved: opening one in JupyterLab must not modify it, and the explorers saved in
its outputs (the static snapshot GitHub shows, the widget state JupyterLab shows without a kernel)
must be today's front end, not the bundle of the day they were last run.

When a test here fails after the front end changed, run the tutorial again in place:
``jupyter nbconvert --to notebook --execute --inplace notebooks/NN_name.ipynb``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jupyter_client.kernelspec import KernelSpecManager

from thunder_viz.render.html import _inline_script, _inline_style, _read_static
from thunder_viz.widget import CSS_PATH, ESM_PATH

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))
REFRESH = "run it again in place: jupyter nbconvert --to notebook --execute --inplace {}"


def _text(value: str | list[str]) -> str:
    return value if isinstance(value, str) else "".join(value)


def _snapshots(nb: dict) -> list[str]:
    """The saved static snapshots of the explorer (HTML outputs that embed a trace document)."""
    pages = []
    for cell in nb["cells"]:
        for output in cell.get("outputs", []):
            page = output.get("data", {}).get("text/html")
            if page is not None and "data-thunder-doc" in _text(page):
                pages.append(_text(page))
    return pages


def _explorer_widget_states(nb: dict) -> list[dict]:
    states = nb["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    return [m["state"] for m in states.get("state", {}).values() if "_esm" in m["state"]]


def test_the_tutorials_are_found() -> None:
    assert len(NOTEBOOKS) >= 5, NOTEBOOKS


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_tutorial_names_the_installed_kernel_as_jupyterlab_writes_it(path: Path) -> None:
    """JupyterLab rewrites a notebook's kernelspec to the started kernel's; a different display name
    marks the tutorial modified as soon as it is opened."""
    spec = KernelSpecManager().get_kernel_spec("python3")
    saved = json.loads(path.read_text(encoding="utf-8"))["metadata"].get("kernelspec")
    assert saved == {"display_name": spec.display_name, "language": spec.language, "name": "python3"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_explorers_saved_in_a_tutorial_are_todays_front_end(path: Path) -> None:
    nb = json.loads(path.read_text(encoding="utf-8"))
    bundle, css = _read_static(None)
    for page in _snapshots(nb):
        assert _inline_script(bundle) in page, (
            f"{path.name}: a static snapshot embeds an old bundle; " + REFRESH.format(path)
        )
        assert _inline_style(css) in page, (
            f"{path.name}: a static snapshot embeds an old stylesheet; " + REFRESH.format(path)
        )
    for state in _explorer_widget_states(nb):
        assert state["_esm"] == ESM_PATH.read_text(encoding="utf-8"), (
            f"{path.name}: the saved widget is an old bundle; " + REFRESH.format(path)
        )
        assert state["_css"] == CSS_PATH.read_text(encoding="utf-8"), (
            f"{path.name}: the saved widget has an old stylesheet; " + REFRESH.format(path)
        )


def test_the_tutorials_that_show_an_explorer_save_it() -> None:
    """Tutorials 01, 03 and 04 are saved with their outputs, so the explorer renders with no kernel."""
    saved = {p.stem[:2] for p in NOTEBOOKS if _snapshots(json.loads(p.read_text(encoding="utf-8")))}
    assert {"01", "03", "04"} <= saved
