"""Browser tests: the explorer tells the truth about a model in training mode and fits a notebook.

A 2-layer GPT-2 built from a config (so in training mode: dropout draws random numbers) is explored
by ``%thunder_jit`` and by ``thunder_viz.explore(jm)`` after an ordinary call, in JupyterLab in
Chromium at 1280x800 and 1440x900. What is measured: that everything of the footer (the rerun
button, the executor choices, the whole runs row) lies inside the explorer and the window with no
scrolling inside the explorer; that the overview never covers the graph; that the wheel scrolls the
notebook until the graph is clicked; that a rerun compares "yes"; that a reloaded page reconnects
both explorers; that every control is readable in the light and the dark theme; and that opening
the tutorials does not modify them.

Layer: tests. Imports pytest and the fixtures and helpers of ``tests/browser/conftest.py`` and
``test_explorer_in_lab.py``.
"""

from __future__ import annotations

import shutil
import time

import pytest

from tests.browser.conftest import _NOTEBOOK_READY, REPO, LabServer
from tests.browser.test_explorer_in_lab import EXPLORER, RERUN_MS, open_and_run, ready_explorer, settle

pytestmark = pytest.mark.browser

SIZES = [(1280, 800), (1440, 900)]

# Client boxes of what the footer must show, and whether anything inside the explorer scrolls.
FOOTER = """(ex) => {
  const box = (el) => { const b = el.getBoundingClientRect();
                        return {left: b.left, top: b.top, right: b.right, bottom: b.bottom}; };
  const footer = ex.querySelector('.tx-footer');
  const row = [...ex.querySelectorAll('[data-testid=run]')].pop();
  return {
    explorer: box(ex),
    rerun: box(ex.querySelector('[data-testid=rerun]')),
    toggles: [...ex.querySelectorAll('.tx-toggle')].map(box),
    cells: [...row.querySelectorAll('td')].map(box),
    footerOverflow: [footer.scrollHeight - footer.clientHeight, footer.scrollWidth - footer.clientWidth],
    window: {width: innerWidth, height: innerHeight},
  };
}"""

# Every scope label's box and every node's box, in client pixels.
LABELS_AND_NODES = """(ex) => {
  const box = (el) => { const b = el.getBoundingClientRect();
    return {left: b.left, top: b.top, right: b.right, bottom: b.bottom}; };
  const graph = ex.querySelector('[data-testid=graph]');
  return {
    labels: [...graph.querySelectorAll('.group-label')].map((t) => [t.textContent, box(t)]),
    nodes: [...graph.querySelectorAll('[data-testid=node], [data-testid=io], [data-testid=group].collapsed')]
      .map((n) => [n.textContent.slice(0, 30), box(n.querySelector('rect'))]),
    pills: [...graph.querySelectorAll('[data-testid=io]')]
      .map((n) => [n.querySelector('.io-label').textContent, box(n.querySelector('.io-label')), box(n.querySelector('.io-box'))]),
  };
}"""

TRANSFORM = "(ex) => ex.querySelector('[data-testid=graph] .viewport').getAttribute('transform')"
SCROLLER = "() => document.querySelector('.jp-NotebookPanel .jp-WindowedPanel-outer').scrollTop"


def _inside(inner: dict, outer: dict, slack: float = 1.0) -> bool:
    return (
        inner["left"] >= outer["left"] - slack
        and inner["right"] <= outer["right"] + slack
        and inner["top"] >= outer["top"] - slack
        and inner["bottom"] <= outer["bottom"] + slack
    )


def _overlap(a: dict, b: dict) -> bool:
    return a["left"] < b["right"] and b["left"] < a["right"] and a["top"] < b["bottom"] and b["top"] < a["bottom"]


def _align_top(ex) -> None:
    ex.evaluate("e => e.scrollIntoView({block: 'start'})")
    time.sleep(0.3)


def _labels(ex) -> list[str]:
    return ex.locator('[data-testid="graph"] [data-testid="node"] .node-label').evaluate_all(
        "els => els.map(e => e.textContent)"
    )


def _runs(ex) -> list[str]:
    return ex.locator('[data-testid="run"]').all_inner_texts()


def test_gpt2_in_training_mode_fits_compares_yes_and_reconnects(notebook_opener):
    nb = open_and_run(notebook_opener, "gpt2_training.ipynb")
    magic, explored = ready_explorer(nb, 0), ready_explorer(nb, 1)

    # both start with the row of the call that compiled
    for ex in (magic, explored):
        [first] = _runs(ex)
        assert first.startswith("r1 (first call)"), first

    # the footer fits: no scrolling inside the explorer, all of it in the window once the explorer is
    for width, height in SIZES:
        nb.page.set_viewport_size({"width": width, "height": height})
        for ex in (magic, explored):
            _align_top(ex)
            m = ex.evaluate(FOOTER)
            window = {"left": 0, "top": 0, "right": m["window"]["width"], "bottom": m["window"]["height"]}
            assert m["footerOverflow"] == [0, 0], f"the footer scrolls at {width}x{height}: {m['footerOverflow']}"
            assert _inside(m["explorer"], window), f"the explorer does not fit {width}x{height}: {m['explorer']}"
            for what in [m["rerun"], *m["toggles"], *m["cells"]]:
                assert _inside(what, m["explorer"]), f"cut off at {width}x{height}: {what}"
            # the overview sits beside the graph, never over it
            graph = ex.locator('[data-testid="graph"]').bounding_box()
            overview = ex.locator('[data-testid="minimap"]')
            if overview.is_visible():
                o = overview.bounding_box()
                assert not _overlap(
                    {"left": o["x"], "top": o["y"], "right": o["x"] + o["width"], "bottom": o["y"] + o["height"]},
                    {"left": graph["x"], "top": graph["y"], "right": graph["x"] + graph["width"],
                     "bottom": graph["y"] + graph["height"]},
                )  # fmt: skip
        nb.screenshot(f"fit-gpt2-training-{width}x{height}")

    # on a small pane the overview is hidden (it would take room the graph needs)
    overview = magic.locator('[data-testid="minimap"]')
    assert overview.is_visible()  # at 1440x900 the graph does not fit its pane
    magic.evaluate("e => e.style.setProperty('--thunder-explorer-height', '440px')")
    overview.wait_for(state="hidden")
    magic.evaluate("e => e.style.removeProperty('--thunder-explorer-height')")

    # the legend is a miniature node, not a checkbox
    legend = magic.locator('[data-testid="legend"]')
    assert legend.locator("input").count() == 0
    swatch = legend.locator(".tx-swatch").bounding_box()
    assert swatch["width"] >= 1.5 * swatch["height"]

    # transformers' output-collector plumbing is folded away, with a toggle that shows it
    collector = explored.locator('[data-testid="io"][data-io-id="input:_active_collector"]')
    assert _labels(explored).count("store_attr") == 0 and collector.count() == 0
    toggle = explored.locator('[data-testid="show-plumbing"]')
    toggle.check()
    settle(explored)
    assert _labels(explored).count("store_attr") >= 2 and collector.count() == 1
    toggle.uncheck()
    settle(explored)
    assert _labels(explored).count("store_attr") == 0

    # search finds an op by its torch name at every step, in any case and by any part of it
    search = explored.locator('[data-testid="search"]')
    for index in explored.locator('[data-testid="step"]').evaluate_all(
        "els => els.filter(e => e.textContent.includes('computation')).map(e => e.dataset.stepIndex)"
    ):
        explored.locator(f'[data-testid="step"][data-step-index="{index}"]').click()
        settle(explored)
        for query in ("layer_norm", "NORM", "layer"):
            search.fill(query)
            count = explored.locator('[data-testid="search-count"]').inner_text()
            assert count.split()[0] not in ("0", ""), f"{query!r} at step {index}: {count}"
    # a chosen result comes into view at a zoom that reads, however far out the view was
    explored.locator('[data-testid="zoom-fit"]').click()
    for _ in range(8):
        explored.locator('[data-testid="zoom-out"]').click()
    search.fill("dropout")
    explored.locator('[data-testid="search-result"]').last.click()
    settle(explored)
    scale = float(explored.evaluate(TRANSFORM).split("scale(")[1].rstrip(")"))
    assert scale >= 0.6, scale
    chosen = explored.locator('[data-testid="node"][aria-selected="true"]').bounding_box()
    graph = explored.locator('[data-testid="graph"]').bounding_box()
    assert graph["x"] <= chosen["x"] and chosen["x"] + chosen["width"] <= graph["x"] + graph["width"]
    assert graph["y"] <= chosen["y"] and chosen["y"] + chosen["height"] <= graph["y"] + graph["height"]
    search.fill("")

    # nested scope labels never overlap each other or a node, every box open
    for index in ("2", "7"):  # the first computation step (31 nested scopes), and the last (fusions)
        explored.locator(f'[data-testid="step"][data-step-index="{index}"]').click()
        settle(explored)
        for _ in range(40):
            closed = explored.locator('[data-testid="group"].collapsed [data-testid="group-toggle"]')
            if not closed.count():
                break
            closed.first.dispatch_event("click")
        settle(explored)
        boxes = explored.evaluate(LABELS_AND_NODES)
        assert len(boxes["labels"]) >= (20 if index == "2" else 1), boxes["labels"]
        for i, (text, a) in enumerate(boxes["labels"]):
            for other, b in boxes["labels"][i + 1 :]:
                assert not _overlap(a, b), f"step {index}: {text!r} overlaps {other!r}"
            for node, b in boxes["nodes"]:
                assert not _overlap(a, b), f"step {index}: {text!r} overlaps node {node!r}"
        # an input's name stays inside its pill (the last characters of a parameter's name crossed its edge)
        assert boxes["pills"], "the step's inputs are drawn"
        for text, label, pill in boxes["pills"]:
            assert _inside(label, pill), f"step {index}: the input label {text!r} crosses its pill's edge"
    nb.screenshot("fit-gpt2-scopes-open", explored)

    # the wheel scrolls the notebook over the graph until the graph is clicked
    _align_top(explored)
    graph = explored.locator('[data-testid="graph"]').bounding_box()
    nb.page.mouse.move(graph["x"] + graph["width"] / 2, graph["y"] + graph["height"] / 2)
    before, scrolled = explored.evaluate(TRANSFORM), nb.page.evaluate(SCROLLER)
    nb.page.mouse.wheel(0, -150)
    nb.page.wait_for_function(f"(s) => ({SCROLLER})() !== s", arg=scrolled)  # the notebook scrolled
    time.sleep(0.3)
    assert explored.evaluate(TRANSFORM) == before, "the wheel zoomed a graph nobody clicked"
    _align_top(explored)
    graph = explored.locator('[data-testid="graph"]').bounding_box()
    nb.page.mouse.click(graph["x"] + 8, graph["y"] + graph["height"] - 8)  # an empty corner
    scrolled = nb.page.evaluate(SCROLLER)
    nb.page.mouse.wheel(0, -150)
    explored.locator('[data-testid="graph"] .viewport').and_(
        explored.locator(f'[data-testid="graph"] .viewport:not([transform="{before}"])')
    ).wait_for()  # a clicked graph zooms with the wheel
    time.sleep(0.3)
    assert nb.page.evaluate(SCROLLER) == scrolled

    # a rerun compares with eager run from the same random state: "yes", though dropout is on
    magic.locator('[data-testid="rerun"]').click()
    nb.page.wait_for_function(
        "(sel) => document.querySelector(sel).querySelectorAll('[data-testid=run]').length === 2",
        arg=EXPLORER,
        timeout=RERUN_MS,
    )
    last = magic.locator('[data-testid="run"]').last
    assert last.locator('[data-field="matches_eager"]').inner_text() == "yes", last.inner_text()
    assert last.locator('[data-field="error"]').inner_text() == ""
    nb.screenshot("fit-gpt2-training-rerun")

    # a reloaded page brings both explorers back live, with their runs
    nb.page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    nb.page.wait_for_function("() => !window.jupyterapp.shell.currentWidget.context.model.dirty")  # no "leave?"
    runs = [len(_runs(magic)), len(_runs(explored))]
    nb.page.reload()
    nb.page.wait_for_function(_NOTEBOOK_READY, arg=nb.path, timeout=120_000, polling=250)
    # the saved outputs show first (read-only) until the widgets reconnect to the kernel
    nb.page.wait_for_function(
        "(sel) => { const all = [...document.querySelectorAll(sel)]; return all.length === 2 &&"
        " all.every(e => e.querySelector('[data-testid=status]').textContent === 'ready'); }",
        arg=EXPLORER,
        timeout=60_000,
    )
    for i, ex in enumerate((ready_explorer(nb, 0), ready_explorer(nb, 1))):
        assert ex.locator('[data-testid="rerun"]').is_enabled(), f"explorer {i} came back read-only"
        assert len(_runs(ex)) == runs[i]
    assert not nb.page_errors


# Text colour against the nearest opaque background, as WCAG's contrast ratio.
CONTRAST = """(el, pseudo = null) => {
  const rgb = (c) => (c.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
                               return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b); };
  let bg = null;
  for (let e = el; e && !bg; e = e.parentElement) {
    const c = rgb(getComputedStyle(e).backgroundColor);
    if (c.length === 3 || c[3] > 0.5) bg = c.slice(0, 3);
  }
  const fg = rgb(getComputedStyle(el, pseudo).color).slice(0, 3);
  const [a, b] = [lum(fg), lum(bg || [255, 255, 255])].sort((x, y) => y - x);
  return (a + 0.05) / (b + 0.05);
}"""


@pytest.mark.parametrize("theme", ["JupyterLab Light", "JupyterLab Dark"])
def test_every_control_is_readable_in_the_theme(notebook_opener, request, theme):
    """In the dark theme the zoom buttons were blank: light text on the explorer's white."""
    nb = notebook_opener("explorer.ipynb")
    # the theme is a user setting of the shared server: later tests get the light one back
    request.addfinalizer(
        lambda: nb.page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})"
        )
    )
    nb.page.evaluate(f"() => window.jupyterapp.commands.execute('apputils:change-theme', {{theme: '{theme}'}})")
    nb.page.wait_for_function(
        "(light) => document.body.dataset.jpThemeLight === light", arg=str(theme.endswith("Light")).lower()
    )
    nb.run_all()
    ex = ready_explorer(nb)
    controls = ex.locator("button, input[type=search], input:not([type]), .tx-toggle, .tx-step, .tx-legend")
    assert controls.count() >= 10
    for i in range(controls.count()):
        control = controls.nth(i)
        if not control.is_visible():
            continue
        ratio = control.evaluate(CONTRAST)
        label = control.get_attribute("data-testid") or control.inner_text()[:30]
        assert ratio >= 3.0, f"{label!r} has contrast {ratio:.2f} in {theme}"
    search = ex.locator('[data-testid="search"]')
    placeholder = search.evaluate(f"e => ({CONTRAST})(e, '::placeholder')")
    assert placeholder >= 3.0, f"the search box's placeholder has contrast {placeholder:.2f} in {theme}"
    checkbox = ex.locator('[data-testid="executor-toggle"]').first
    assert checkbox.evaluate("e => getComputedStyle(e).colorScheme") == ("light" if theme.endswith("Light") else "dark")
    nb.screenshot(f"controls-{theme.split()[-1].lower()}", ex)

    # the side pane resizes: its left edge dragged 150 px left gives the trace source 150 px more
    side = ex.locator(".tx-side")
    before = side.bounding_box()["width"]
    handle = ex.locator('[data-testid="side-splitter"]').bounding_box()
    x, y = handle["x"] + handle["width"] / 2, handle["y"] + handle["height"] / 2
    nb.page.mouse.move(x, y)
    nb.page.mouse.down()
    nb.page.mouse.move(x - 150, y, steps=5)
    nb.page.mouse.up()
    assert abs(side.bounding_box()["width"] - before - 150) < 3

    # the maximize button gives the explorer the whole notebook tab; Esc puts it back
    cell = ex.bounding_box()
    ex.locator('[data-testid="maximize"]').click()
    whole = ex.evaluate(
        "e => { const b = e.getBoundingClientRect(), p = e.closest('.jp-NotebookPanel').getBoundingClientRect();"
        " return [b.width / p.width, b.height / p.height]; }"
    )
    assert whole[0] > 0.97 and whole[1] > 0.9, whole
    nb.page.keyboard.press("Escape")
    restored = ex.bounding_box()
    assert abs(restored["height"] - cell["height"]) < 2 and abs(restored["width"] - cell["width"]) < 2


@pytest.mark.parametrize("name", ["02_training.ipynb", "03_gpt2_explorer.ipynb"])
def test_opening_a_tutorial_does_not_modify_it(browser: object, lab_server: LabServer, name: str):
    """Their saved kernel name differed from the installed one: opening marked them modified."""
    shutil.copy(REPO / "notebooks" / name, lab_server.root / name)  # open_notebook's are in tests/browser
    context = browser.new_context(viewport={"width": 1440, "height": 900}, device_scale_factor=1)
    try:
        page = context.new_page()
        page.goto(f"{lab_server.url}/lab/tree/{name}?reset")
        page.wait_for_function(_NOTEBOOK_READY, arg=name, timeout=120_000, polling=250)
        time.sleep(3)  # the kernel's info arrives, the outputs render
        dirty = page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty")
        assert dirty is False, f"opening {name} marked it modified"
        page.evaluate(
            "async () => { const p = window.jupyterapp.shell.currentWidget; await p.sessionContext.shutdown(); }"
        )
    finally:
        context.close()


def test_profile_from_the_runs_table_colours_the_graph_and_compares_modules_with_eager(notebook_opener, request):
    nb = open_and_run(notebook_opener, "gpt2_training.ipynb")
    nb.page.set_viewport_size({"width": 1440, "height": 900})
    ex = ready_explorer(nb, 1)  # thunder_viz.explore(jm)
    _align_top(ex)
    ex.locator('[data-testid="profile-run"]').click()
    ex.locator('[data-testid="profile-table"]').wait_for(timeout=RERUN_MS)
    settle(ex)
    shown = int(ex.get_attribute("data-step-index"))
    kinds = ex.locator('[data-testid="step"]').all_inner_texts()
    last_forward = max(i for i, text in enumerate(kinds) if "computation ·" in text)
    assert shown == last_forward, "the explorer opens on the step it measured"
    # how it was measured: thunder's calls in turn with eager's, both sides' medians
    measured = ex.locator('[data-testid="profile-measured"]').inner_text()
    assert "rounds of one thunder call and one eager call" in measured and "eager" in measured.split("Medians")[1]
    assert ex.locator('[data-testid="graph"] [class*="heat-"]').count() > 0
    rows = ex.locator('[data-testid="profile-row"]')
    assert rows.count() > 0
    modules = dict(
        zip(
            ex.locator('[data-testid="profile-module"]').evaluate_all("rs => rs.map(r => r.dataset.module)"),
            ex.locator('[data-testid="profile-module"]').all_inner_texts(),
        )
    )
    # the default executors fuse the whole model: its module scope holds the time, beside eager's
    assert "transformer" in modules and modules["transformer"].split("\t")[-1].endswith("ms"), modules
    # a row selects its node
    first = rows.first.get_attribute("data-node-id")
    ex.locator('[data-testid="profile-node"]').first.click()
    ex.locator('[data-testid="node-cost"]').wait_for()
    assert ex.locator('[data-testid="node"][aria-selected="true"]').count() <= 1
    nb.screenshot("profile-gpt2-light", ex)
    request.addfinalizer(
        lambda: nb.page.evaluate(
            "() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Light'})"
        )
    )
    nb.page.evaluate("() => window.jupyterapp.commands.execute('apputils:change-theme', {theme: 'JupyterLab Dark'})")
    nb.page.wait_for_function("() => document.body.dataset.jpThemeLight === 'false'")
    time.sleep(0.5)
    assert ex.evaluate("e => getComputedStyle(e).colorScheme") == "dark"
    nb.screenshot("profile-gpt2-dark", ex)
    assert first and not nb.page_errors
