"""Browser tests: saved notebooks show their trace explorers in JupyterLab with no kernel.

The JupyterLab extension (``thunder_viz/labextension``, installed by ``pip install``) renders
``application/vnd.thunder.trace+json`` outputs as the read-only explorer. The notebooks were made
by ``tests/browser/make_saved_notebooks.py``: ``saved_explorer.ipynb`` ran through nbclient and
was saved with its outputs; ``saved_hostile.ipynb`` holds crafted outputs. Each test opens a
fresh copy with "No Kernel" (its kernel metadata removed, then "No Kernel" chosen in JupyterLab's
kernel dialog), so no kernel ever starts.

Layer: tests. Imports pytest and the fixtures of ``tests/browser/conftest.py`` (``lab_server``,
``browser``, ``save_screenshot``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
import pytest
from nbformat.sign import NotebookNotary

from tests.browser.conftest import NOTEBOOKS, LabServer, save_screenshot

pytestmark = pytest.mark.browser

EXPLORER = ".thunder-explorer"
OUTPUT = ".thunder-explorer-output"
STEP = '[data-testid="step"]'
NODE = '[data-testid="graph"] [data-testid="node"]'
OPEN_IN_TAB = "thunder-explorer:open-in-tab"
OPEN_LABEL = "Open Trace Explorer in New Tab"

_PANEL = "window.jupyterapp.shell.currentWidget"
_OPENED = f"""(path) => {{
  const panel = window.jupyterapp && {_PANEL};
  return !!panel && !!panel.context && panel.context.path === path && panel.content.widgets.length > 0;
}}"""


@dataclass
class SavedPage:
    page: object
    path: str
    dialogs: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def explorers_ready(self, count: int, timeout_ms: float = 60_000) -> None:
        self.page.wait_for_function(
            "([sel, n]) => { const all = document.querySelectorAll(sel);"
            " return all.length === n && Array.from(all).every(e => e.dataset.ready === 'true'); }",
            arg=[f".jp-NotebookPanel {EXPLORER}", count],
            timeout=timeout_ms,
        )

    def kernel(self) -> object:
        """The notebook's kernel name, or None when it has none."""
        return self.page.evaluate(
            "() => { const nb = Array.from(window.jupyterapp.shell.widgets('main')).find(w => w.sessionContext);"
            " const s = nb.sessionContext.session; return s ? s.kernel && s.kernel.name : null; }"
        )


@pytest.fixture
def open_saved(browser: object, lab_server: LabServer):
    """``open(name) -> SavedPage``: a fresh copy of a saved notebook, opened with "No Kernel"."""
    contexts = []

    def _open(name: str | Path, trusted: bool = False) -> SavedPage:
        """``name``: a notebook of ``tests/browser/notebooks``, or a path."""
        nb = nbformat.reads((NOTEBOOKS / name).read_text(encoding="utf-8"), as_version=4)
        nb.metadata.pop("kernelspec", None)  # no kernel to match: JupyterLab asks which to start
        nb.metadata.pop("language_info", None)
        if trusted:  # as the user's own notebook, run and saved in their JupyterLab
            NotebookNotary().sign(nb)
        fresh = f"{Path(name).stem}-{time.monotonic_ns()}.ipynb"
        (lab_server.root / fresh).write_text(nbformat.writes(nb), encoding="utf-8")
        context = browser.new_context(viewport={"width": 1500, "height": 1100}, device_scale_factor=1)
        contexts.append(context)
        page = context.new_page()
        saved = SavedPage(page=page, path=fresh)
        page.on("dialog", lambda d: (saved.dialogs.append(f"{d.type}: {d.message}"), d.dismiss()))
        page.on("pageerror", lambda e: saved.page_errors.append(str(e)))
        page.set_default_timeout(30_000)
        page.goto(f"{lab_server.url}/lab/tree/{fresh}?reset")
        page.wait_for_function(_OPENED, arg=fresh, timeout=120_000, polling=250)
        page.locator(".jp-Dialog button", has_text="No Kernel").click()
        page.locator(".jp-Dialog").wait_for(state="detached")
        page.evaluate("() => window.jupyterapp.shell.collapseLeft()")
        return saved

    yield _open
    for context in contexts:
        context.close()


def selected_step(explorer) -> str:
    return explorer.locator(f'{STEP}[aria-selected="true"]').get_attribute("data-step-index")


def wait_step(page, explorer_index: int, step: int) -> None:
    page.wait_for_function(
        "([sel, i, s]) => { const e = document.querySelectorAll(sel)[i];"
        " const li = e && e.querySelector('[data-testid=step][aria-selected=true]');"
        " return !!li && li.dataset.stepIndex === String(s) && e.dataset.ready === 'true'; }",
        arg=[f".jp-NotebookPanel {EXPLORER}", explorer_index, step],
    )


def test_a_saved_notebook_shows_its_explorers_with_no_kernel(open_saved):
    nb = open_saved("saved_explorer.ipynb")
    page = nb.page
    # the trace history, one trace, and the explorer widget's saved document
    nb.explorers_ready(3)
    assert nb.kernel() is None
    assert page.locator(".jp-Dialog").count() == 0

    history = page.locator(f".jp-NotebookPanel {EXPLORER}").nth(0)
    history.scroll_into_view_if_needed()
    steps = history.locator(STEP)
    assert steps.count() == 5
    assert steps.nth(1).inner_text().find("Dead Code Elimination") >= 0
    assert selected_step(history) == "0"
    ops_before = history.locator(NODE).count()
    save_screenshot(history, "saved_notebook_history_step0")

    # keyboard: the explorer has focus, ArrowDown walks to the next pass
    history.focus()
    page.keyboard.press("ArrowDown")
    wait_step(page, 0, 1)
    assert history.locator(NODE).count() < ops_before  # the dead `sub` is gone
    # mouse: the last step
    steps.nth(4).click()
    wait_step(page, 0, 4)
    assert history.locator(f"{NODE}.diff-added").count() >= 1  # `del` statements added

    # a node: its details and its source line
    node = history.locator(NODE).filter(has_text="tanh").first
    node.click()
    assert "tanh" in history.locator('[data-testid="node-details"]').inner_text()
    current = history.locator('[data-testid="source-line"][aria-current="true"]')
    assert "tanh" in current.inner_text()

    # search
    history.locator('input[data-testid="search"]').fill("mul")
    page.wait_for_function(
        "(sel) => document.querySelector(sel).querySelectorAll('.search-match').length > 0",
        arg=f".jp-NotebookPanel {EXPLORER}",
    )

    # no kernel: the executors are shown, off, with the reason
    toggles = history.locator('input[data-testid="executor-toggle"]')
    assert toggles.count() >= 2
    assert all(toggles.nth(i).is_disabled() for i in range(toggles.count()))
    assert history.locator('[data-testid="executors-unavailable"]').inner_text().strip()
    assert history.locator('[data-testid="status"]').inner_text() == "saved output"
    save_screenshot(history, "saved_notebook_history_search")

    # the widget's output: its saved document, same steps, nothing to rerun with
    widget = page.locator(f".jp-NotebookPanel {EXPLORER}").nth(2)
    widget.scroll_into_view_if_needed()
    assert widget.locator(STEP).count() >= 6  # the prologue, then the computation passes
    assert "no kernel" in widget.locator('[data-testid="executors-unavailable"]').inner_text().lower()
    assert widget.locator('[data-testid="rerun"]').is_disabled()
    save_screenshot(page, "saved_notebook_no_kernel")
    assert nb.kernel() is None
    assert not nb.page_errors, nb.page_errors


def test_a_trusted_saved_notebook_shows_the_explorer_in_place_of_the_widget(open_saved):
    # Trusted, JupyterLab prefers the widget view, which cannot load with no kernel: the saved
    # document in the same output is shown instead, read-only.
    nb = open_saved("saved_explorer.ipynb", trusted=True)
    nb.explorers_ready(3)
    page = nb.page
    assert page.evaluate(
        "() => window.jupyterapp.shell.currentWidget.content.widgets[3].outputArea.model.get(0).trusted"
    )
    widget_output = page.locator(".jp-NotebookPanel .jp-OutputArea-child").nth(2)
    assert widget_output.locator(".jp-OutputArea-output.lm-mod-hidden", has_text="Loading widget").count() == 1
    explorer = widget_output.locator(EXPLORER)
    assert explorer.locator(STEP).count() >= 6
    assert explorer.locator('[data-testid="rerun"]').is_disabled()
    explorer.scroll_into_view_if_needed()
    save_screenshot(explorer, "saved_notebook_trusted_widget_output")
    assert nb.kernel() is None


TUTORIALS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.mark.parametrize("trusted", [False, True])
@pytest.mark.parametrize("name, explorers", [("01_trace_explorer.ipynb", 3), ("03_gpt2_explorer.ipynb", 2)])
def test_the_tutorials_are_saved_with_explorers_that_show_with_no_kernel(open_saved, name, explorers, trusted):
    # Saved as nbconvert executes them, without the widgets' state (their documents would be
    # stored twice): the saved document of each explorer output is what shows.
    nb = open_saved(TUTORIALS / name, trusted=trusted)
    nb.explorers_ready(explorers)
    for i in range(explorers):
        explorer = nb.page.locator(f".jp-NotebookPanel {EXPLORER}").nth(i)
        assert explorer.locator(STEP).count() >= 3
        assert explorer.locator(NODE).count() > 0
        assert explorer.locator('[data-testid="rerun"]').is_disabled()
    assert nb.kernel() is None
    assert not nb.page_errors, nb.page_errors


def test_the_command_opens_an_explorer_in_its_own_tab(open_saved):
    nb = open_saved("saved_explorer.ipynb")
    page = nb.page
    nb.explorers_ready(3)

    # in the command palette
    page.evaluate("() => window.jupyterapp.commands.execute('apputils:activate-command-palette')")
    page.keyboard.type("Trace Explorer")
    assert page.locator(".lm-CommandPalette-item", has_text=OPEN_LABEL).count() == 1
    page.keyboard.press("Escape")

    # in the output's context menu: right-click the one-trace output
    small = page.locator(f".jp-NotebookPanel {OUTPUT}").nth(1)
    small.scroll_into_view_if_needed()
    small_height = small.locator(EXPLORER).bounding_box()["height"]
    small.locator('[data-testid="step"]').first.click(button="right")
    item = page.locator(".lm-Menu-item", has_text=OPEN_LABEL)
    item.wait_for()
    item.click()

    tab = page.locator(f".thunder-explorer-tab {EXPLORER}")
    page.wait_for_function(
        f"() => {{ const e = document.querySelector('.thunder-explorer-tab {EXPLORER}'); return !!e && e.dataset.ready === 'true'; }}"
    )
    assert page.evaluate(f"() => {_PANEL}.hasClass('thunder-explorer-tab')")
    assert page.locator(".lm-DockPanel-tabBar .lm-TabBar-tab", has_text="Trace: f").count() == 1
    box = tab.bounding_box()
    assert box["height"] > small_height and box["width"] > 1000  # larger: the whole main area
    # the tab is a full explorer: walk steps, select a node
    assert tab.locator(STEP).count() == 1
    tab.locator(NODE).filter(has_text="tanh").first.click()
    assert "tanh" in tab.locator('[data-testid="node-details"]').inner_text()
    save_screenshot(page, "saved_notebook_explorer_tab")

    # from the palette's command too (no context menu): the active cell's output, here the history
    page.evaluate("() => window.jupyterapp.shell.activateById(document.querySelector('.jp-NotebookPanel').id)")
    page.evaluate(f"() => {{ const nb = {_PANEL}.content; nb.activeCellIndex = 1; }}")
    page.evaluate(f"() => window.jupyterapp.commands.execute('{OPEN_IN_TAB}')")
    page.wait_for_function(
        f"() => document.querySelectorAll('.thunder-explorer-tab {EXPLORER}[data-ready=true]').length === 2"
    )
    assert page.evaluate(f"() => {_PANEL}.node.querySelectorAll('{STEP}').length") == 5
    assert nb.kernel() is None
    assert not nb.page_errors, nb.page_errors


def test_a_crafted_hostile_notebook_runs_no_script(open_saved):
    nb = open_saved("saved_hostile.ipynb")
    page = nb.page
    page.wait_for_function(f"() => document.querySelectorAll('.jp-NotebookPanel {OUTPUT} {EXPLORER}').length === 6")
    explorers = page.locator(f".jp-NotebookPanel {EXPLORER}")
    # 0: markup everywhere, rendered as text
    nb.page.wait_for_function(f"() => document.querySelector('.jp-NotebookPanel {EXPLORER}').dataset.ready === 'true'")
    marked = explorers.nth(0)
    assert "<img src=x" in marked.locator(".tx-title").inner_text()
    assert "<script>" in marked.locator('[data-testid="source"]').inner_text()
    marked.locator(NODE).first.click()
    assert "<script>" in marked.locator('[data-testid="node-details"]').inner_text()
    save_screenshot(marked, "saved_hostile_markup_as_text")
    # 1-3, 5: a clear message instead of the explorer
    expected = {1: "version", 2: "steps", 3: "at most 200", 5: "not valid JSON"}
    for i, words in expected.items():
        ex = explorers.nth(i)
        assert ex.get_attribute("data-invalid") == "true"
        message = ex.locator('[data-testid="error"]').inner_text()
        assert "cannot be shown" in message and words in message, (i, message)
    # 4: a 200,000-character title is shown as text inside the explorer's box, the page stays usable
    huge = explorers.nth(4)
    assert huge.get_attribute("data-ready") == "true"
    assert huge.locator(".tx-title").inner_text().startswith("<<<")
    assert huge.bounding_box()["width"] <= 1500  # the viewport: the output did not grow with the title
    save_screenshot(huge, "saved_hostile_huge_title")
    save_screenshot(page, "saved_hostile_notebook")

    time.sleep(1)  # give any injected handler (img onerror, svg onload) the chance to run
    assert page.evaluate("() => window.__pwned") is None
    assert nb.dialogs == []
    assert (
        page.locator(".jp-NotebookPanel img[src='x'], .jp-NotebookPanel script, .jp-NotebookPanel [onerror]").count()
        == 0
    )
    assert not nb.page_errors, nb.page_errors
