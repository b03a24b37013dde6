"""Browser tests: the trace explorer inside a real JupyterLab, driven through Chromium.

Layer: tests. Imports pytest and the fixtures of ``tests/browser/conftest.py``; the notebooks in
``tests/browser/notebooks/`` import thunder and thunder_viz in their kernels. Every selector used
here is part of the DOM contract in the visualiser brief (``data-testid`` and ``data-*``
attributes, ``aria-selected``/``aria-current``, the ``diff-*`` and ``search-match`` classes).

Each test opens its own fresh copy of a notebook, so the tests are independent and can run in
any order and under ``pytest -n 2``. Screenshots of each stage go to ``artifacts/screenshots/``.
"""

from __future__ import annotations

import re
import time

import pytest

pytestmark = pytest.mark.browser

READY_MS = 120_000  # kernel start, `import torch`, the first jit and the widget's first render
RERUN_MS = 240_000  # TorchInductor compiles a fusion region in ~10-20 s on two CPU cores

EXPLORER = ".thunder-explorer"
STEP = '[data-testid="step"]'
NODE = '[data-testid="graph"] [data-testid="node"]'
LINE = '[data-testid="source-line"]'
PASSES = [
    "Interpretation",
    "Dead Code Elimination",
    "Common Subexpression Elimination",
    "Transform for execution",
    "Delete Last Used",
]


# ---------------------------------------------------------------------------------------------
# Helpers over the DOM contract


def ready_explorer(nb, index: int = 0):
    """The index-th explorer of the notebook, once it says it has rendered its first graph."""
    ex = nb.page.locator(EXPLORER).nth(index)
    ex.wait_for(state="attached", timeout=READY_MS)
    nb.page.wait_for_function(
        "([sel, i]) => { const e = document.querySelectorAll(sel)[i]; return !!e && e.dataset.ready === 'true'; }",
        arg=[EXPLORER, index],
        timeout=READY_MS,
    )
    ex.scroll_into_view_if_needed()
    settle(ex)
    return ex


def open_and_run(notebook_opener, name: str, allow_errors: bool = False):
    nb = notebook_opener(name)
    if allow_errors:
        try:
            nb.run_all()
        except AssertionError:
            pass
    else:
        nb.run_all()
    return nb


def current_step(ex) -> int:
    selected = ex.locator(f'{STEP}[aria-selected="true"]')
    assert selected.count() == 1, "exactly one step is aria-selected"
    return int(selected.get_attribute("data-step-index"))


def step_by_pass(ex, pass_name: str, kind: str = "computation"):
    """The step item of the ``kind`` trace made by ``pass_name`` (the last one if several)."""
    steps = ex.locator(STEP).filter(has_text=pass_name).filter(has_text=kind)
    assert steps.count() >= 1, f"no {kind} step {pass_name!r}; steps: {ex.locator(STEP).all_inner_texts()}"
    return steps.last


def settle(ex, timeout_s: float = 10.0) -> None:
    """Wait until the explorer stops changing: a step's graph lays out in a worker and its source
    pane fills in chunks, so both finish after the click that asked for them."""
    snapshot = """e => [
      ...[...e.querySelectorAll('[data-testid=node]')].map(
          n => n.dataset.nodeId + n.getAttribute('class') + n.getAttribute('transform') + n.getAttribute('aria-selected')),
      e.querySelectorAll('[data-testid=source-line]').length,
      (e.querySelector('[data-testid=source-line][aria-current=true]') || {dataset: {}}).dataset.line,
    ].join('|')"""
    previous, deadline = None, time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        current = ex.evaluate(snapshot)
        if current == previous:
            return
        previous = current
        time.sleep(0.2)


def go_to(ex, pass_name: str, kind: str = "computation") -> None:
    step = step_by_pass(ex, pass_name, kind)
    step.click()
    index = step.get_attribute("data-step-index")
    ex.locator(f'{STEP}[data-step-index="{index}"][aria-selected="true"]').wait_for()
    settle(ex)


def node_labels(ex) -> list[str]:
    """Each node's label: its first text (the rest of its text is the output's name and shape)."""
    return ex.locator(NODE).evaluate_all(
        "els => els.map(e => ((e.querySelector('text') || e).textContent || '').trim())"
    )


def is_op(label: str, op: str) -> bool:
    return label == op or label.endswith("." + op)


def count_labelled(ex, op: str) -> int:
    return sum(1 for label in node_labels(ex) if is_op(label, op))


def node_for(ex, op: str):
    """The first node of the graph whose label is ``op``."""
    ids = ex.locator(NODE).evaluate_all("els => els.map(e => e.dataset.nodeId)")
    for nid, label in zip(ids, node_labels(ex)):
        if is_op(label, op):
            return ex.locator(f'{NODE}[data-node-id="{nid}"]')
    raise AssertionError(f"no {op!r} node among {node_labels(ex)}")


def node_boxes(ex) -> dict[str, dict]:
    """Boxes of the graph's nodes, keyed by their stable ``data-node-id``, relative to the graph's SVG.

    Relative, because the panel header above the graph may change height from step to step; what
    must not move is a node within the graph view (layout, pan and zoom included).
    """
    return ex.locator(NODE).evaluate_all(
        "els => { if (!els.length) return {}; const g = els[0].closest('svg').getBoundingClientRect();"
        " return Object.fromEntries(els.map(e => { const r = e.getBoundingClientRect();"
        " return [e.dataset.nodeId, {x: r.x - g.x, y: r.y - g.y, w: r.width, h: r.height}]; })); }"
    )


def active_cell(nb) -> int:
    return nb.page.evaluate("() => window.jupyterapp.shell.currentWidget.content.activeCellIndex")


def absent_or_hidden(locator) -> bool:
    return locator.count() == 0 or not locator.first.is_visible()


def no_page_errors(nb) -> None:
    assert not nb.page_errors, f"uncaught errors in the page: {nb.page_errors}"


# ---------------------------------------------------------------------------------------------
# The fixtures themselves (no thunder_viz needed): a failure here is the test rig, not the explorer


def test_jupyterlab_runs_a_notebook_in_chromium(notebook_opener):
    nb = open_and_run(notebook_opener, "smoke.ipynb")
    outputs = nb.outputs()
    assert outputs[1][0]["data"]["text/plain"] == "42"
    nb.page.locator(".jp-OutputArea-output", has_text="42").wait_for()
    nb.screenshot("smoke_01_notebook")
    no_page_errors(nb)


# ---------------------------------------------------------------------------------------------
# The explorer of `%thunder_jit f(x, y)`


def test_explorer_renders_the_steps_of_the_last_compilation(notebook_opener):
    nb = open_and_run(notebook_opener, "explorer.ipynb")
    ex = ready_explorer(nb)
    # One %thunder_jit, one explorer: the live widget, not also the saved document's mime renderer.
    assert nb.page.locator(EXPLORER).count() == 1
    nb.screenshot("explorer_01_notebook")
    nb.screenshot("explorer_02_rendered", ex)

    texts = ex.locator(STEP).all_inner_texts()
    indices = [int(i) for i in ex.locator(STEP).evaluate_all("els => els.map(e => e.dataset.stepIndex)")]
    assert indices == sorted(indices) and len(set(indices)) == len(indices), indices
    assert any("prologue" in t.lower() for t in texts), f"no prologue step in {texts}"
    computation = [t for t in texts if "computation" in t]
    positions = [next((i for i, t in enumerate(computation) if p in t), None) for p in PASSES]
    assert None not in positions, f"missing computation passes in {texts}"
    assert positions == sorted(positions), f"passes out of order: {texts}"
    assert current_step(ex) in indices

    graph = ex.locator('[data-testid="graph"]')
    assert graph.evaluate("e => e.tagName.toLowerCase()") == "svg"
    assert ex.locator(NODE).count() > 0
    assert ex.locator(f'[data-testid="source"] {LINE}').count() > 0
    assert "ready" in ex.locator('[data-testid="status"]').inner_text().lower()
    assert ex.locator('[data-testid="runs"]').count() == 1
    no_page_errors(nb)


def test_each_pass_changes_the_graph_and_surviving_nodes_stay_put(notebook_opener):
    nb = open_and_run(notebook_opener, "explorer.ipynb")
    ex = ready_explorer(nb)

    go_to(ex, "Interpretation")
    nb.screenshot("explorer_03_interpretation", ex)
    assert count_labelled(ex, "cos") == 1, node_labels(ex)
    assert count_labelled(ex, "sin") == 2, node_labels(ex)
    before = node_boxes(ex)

    go_to(ex, "Dead Code Elimination")
    nb.screenshot("explorer_04_dce", ex)
    assert count_labelled(ex, "cos") == 0, "DCE removes the unused cos"
    after = node_boxes(ex)
    assert set(after) < set(before), "DCE only removes nodes; the others keep their ids"
    moved = {
        nid: (before[nid], after[nid])
        for nid in after
        if abs(before[nid]["x"] - after[nid]["x"]) > 1 or abs(before[nid]["y"] - after[nid]["y"]) > 1
    }
    assert not moved, f"nodes that survive a pass must not move: {moved}"
    removed = ex.locator('[data-testid="diff-removed"]')
    assert re.search(r"cos → t\d+", removed.inner_text()), removed.inner_text()

    go_to(ex, "Common Subexpression Elimination")
    nb.screenshot("explorer_05_cse", ex)
    assert count_labelled(ex, "sin") == 1, "CSE merges the repeated sin(x) * y"
    assert count_labelled(ex, "mul") == 1, node_labels(ex)
    # the merged ops name the values that replaced them; a click shows one where it stood
    assert re.search(r"mul → t\d+ merged into t\d+", removed.inner_text()), removed.inner_text()
    ex.locator('[data-testid="diff-toggle"]').click()  # the lists open over the graph's top
    removed.locator('[data-testid="diff-link"]').first.click()
    ex.locator(f'{STEP}[aria-selected="true"]').filter(has_text="Dead Code Elimination").wait_for()
    settle(ex)
    assert ex.locator(f'{NODE}[aria-selected="true"]').count() == 1

    go_to(ex, "Transform for execution")
    nb.screenshot("explorer_06_transform_for_execution", ex)
    # ltorch ops are claimed by the torch executor: same identity, different executor.
    assert ex.locator(f"{NODE}.diff-rewritten").count() >= 1
    assert ex.locator(f'[data-testid="source"] {LINE}.diff-rewritten').count() >= 1

    go_to(ex, "Delete Last Used")
    nb.screenshot("explorer_07_delete_last_used", ex)
    # the del statements are notes on the last statement reading each value, not nodes; new ones mark it
    assert ex.locator(f"{NODE}.diff-added").count() >= 1, "the del statements are new"
    assert ex.locator(f"{NODE} .node-note").filter(has_text=re.compile(r"^del t\d+")).count() >= 1
    assert count_labelled(ex, "del") == 0, node_labels(ex)
    assert ex.locator(f'[data-testid="source"] {LINE}.diff-added').count() >= 1
    no_page_errors(nb)


def test_steps_walk_with_the_mouse_and_the_keyboard(notebook_opener):
    nb = open_and_run(notebook_opener, "explorer.ipynb")
    ex = ready_explorer(nb)
    steps = ex.locator(STEP)
    indices = [int(i) for i in steps.evaluate_all("els => els.map(e => e.dataset.stepIndex)")]
    assert len(indices) >= 4

    for i in (indices[2], indices[0], indices[-1]):
        ex.locator(f'{STEP}[data-step-index="{i}"]').click()
        assert current_step(ex) == i

    ex.locator(f'{STEP}[data-step-index="{indices[0]}"]').click()
    cell = active_cell(nb)
    for key, expected in (("ArrowDown", 1), ("ArrowDown", 2), ("ArrowUp", 1), ("j", 2), ("j", 3), ("k", 2)):
        nb.page.keyboard.press(key)
        nb.page.wait_for_timeout(50)
        assert current_step(ex) == indices[expected], f"after {key}"
    nb.screenshot("explorer_08_keyboard", ex)
    # The keys went to the explorer, not to JupyterLab's command mode (where j/k/arrows change cell).
    assert active_cell(nb) == cell, "the notebook's active cell moved: the explorer leaked its keys to JupyterLab"
    no_page_errors(nb)


def test_selecting_a_node_highlights_its_line_and_a_line_selects_its_node(notebook_opener):
    nb = open_and_run(notebook_opener, "explorer.ipynb")
    ex = ready_explorer(nb)
    go_to(ex, "Dead Code Elimination")

    sin = node_for(ex, "sin")
    sin.click()
    settle(ex)
    assert sin.get_attribute("aria-selected") == "true"
    assert ex.locator(f'{NODE}[aria-selected="true"]').count() == 1
    current = ex.locator(f'{LINE}[aria-current="true"]')
    assert current.count() == 1, "exactly one highlighted source line"
    assert re.search(r"= ltorch\.sin\(x\)", current.inner_text()), current.inner_text()
    assert int(current.get_attribute("data-line")) >= 1

    details = ex.locator('[data-testid="node-details"]').inner_text()
    for expected in ("sin", "f32", "4", "8", "torch.sin(x) * y"):
        assert expected in details, f"{expected!r} not in node details:\n{details}"
    nb.screenshot("explorer_09_node_selected", ex)

    add_line = ex.locator(LINE).filter(has_text=re.compile(r"= ltorch\.add\(")).first
    add_line.click()
    settle(ex)
    assert add_line.get_attribute("aria-current") == "true"
    assert ex.locator(f'{LINE}[aria-current="true"]').count() == 1
    selected = ex.locator(f'{NODE}[aria-selected="true"]')
    assert selected.count() == 1
    assert selected.get_attribute("data-node-id") == node_for(ex, "add").get_attribute("data-node-id")
    assert "add" in ex.locator('[data-testid="node-details"]').inner_text()
    nb.screenshot("explorer_10_line_selected", ex)
    no_page_errors(nb)


def test_search_marks_matching_nodes(notebook_opener):
    nb = open_and_run(notebook_opener, "explorer.ipynb")
    ex = ready_explorer(nb)
    go_to(ex, "Dead Code Elimination")
    search = ex.locator('input[data-testid="search"]')

    search.fill("sin")
    ex.locator(".search-match").first.wait_for()
    matched = ex.locator(f"{NODE}.search-match")
    assert matched.count() == 2, node_labels(ex)
    assert all(t.startswith("sin") for t in matched.all_text_contents()), matched.all_text_contents()
    nb.screenshot("explorer_11_search", ex)

    search.fill("t2")  # a value name: its producer (and edges) match
    ex.locator(".search-match").first.wait_for()
    assert ex.locator(f"{NODE}.search-match").count() >= 1
    # the matches are listed under the box, the first one selected as you type; a click selects
    results = ex.locator('[data-testid="search-result"]')
    results.first.wait_for()
    assert any("→ t2" in t for t in results.all_inner_texts()), results.all_inner_texts()
    assert ex.locator(f'{NODE}[aria-selected="true"]').count() == 1
    results.last.click()
    settle(ex)
    assert results.last.get_attribute("aria-selected") == "true"
    assert ex.locator('[data-testid="search-results"]').is_visible()
    search.fill("T")  # any part of a name, any case: every node makes or reads some t<n>
    nb.page.wait_for_timeout(300)
    assert ex.locator(f"{NODE}.search-match").count() == ex.locator(NODE).count()
    ex.locator('[data-testid="search-whole-word"]').click()  # whole words: t is no part of t2
    nb.page.wait_for_timeout(300)
    assert ex.locator(f"{NODE}.search-match").count() == 0
    ex.locator('[data-testid="search-whole-word"]').click()

    search.fill("zzz_no_such_op")
    nb.page.wait_for_timeout(300)
    assert ex.locator(".search-match").count() == 0

    search.fill("")
    nb.page.wait_for_timeout(300)
    assert ex.locator(".search-match").count() == 0
    no_page_errors(nb)


def test_graph_pans_and_zooms(notebook_opener):
    nb = open_and_run(notebook_opener, "explorer.ipynb")
    ex = ready_explorer(nb)
    graph = ex.locator('[data-testid="graph"]')
    node = ex.locator(NODE).first
    node_id = node.get_attribute("data-node-id")
    box = graph.bounding_box()

    before = node_boxes(ex)[node_id]
    nb.page.mouse.click(box["x"] + 5, box["y"] + box["height"] - 5)  # the wheel zooms a clicked graph
    nb.page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    nb.page.mouse.wheel(0, -400)
    nb.page.wait_for_timeout(300)
    zoomed = node_boxes(ex)[node_id]
    assert abs(zoomed["w"] - before["w"]) > 1, f"wheel over the graph zooms: {before} -> {zoomed}"

    # Drag from an empty corner of the graph.
    x0, y0 = box["x"] + 5, box["y"] + 5
    nb.page.mouse.move(x0, y0)
    nb.page.mouse.down()
    nb.page.mouse.move(x0 + 60, y0 + 40, steps=6)
    nb.page.mouse.up()
    nb.page.wait_for_timeout(200)
    panned = node_boxes(ex)[node_id]
    assert abs(panned["x"] - zoomed["x"] - 60) < 3 and abs(panned["y"] - zoomed["y"] - 40) < 3, (zoomed, panned)
    nb.screenshot("explorer_12_pan_zoom", ex)
    no_page_errors(nb)


@pytest.mark.slow
def test_torchcompile_toggle_reruns_in_place_and_keeps_previous_runs(notebook_opener):
    nb = open_and_run(notebook_opener, "explorer.ipynb")
    ex = ready_explorer(nb)

    toggles = ex.locator('input[data-testid="executor-toggle"]')
    executors = toggles.evaluate_all("els => els.map(e => e.dataset.executor)")
    assert {"torch", "python", "torchcompile"} <= set(executors), executors
    for always in ("torch", "python"):
        toggle = ex.locator(f'input[data-testid="executor-toggle"][data-executor="{always}"]')
        assert toggle.is_checked() and toggle.is_disabled(), f"{always} is always on"
    tc = ex.locator('input[data-testid="executor-toggle"][data-executor="torchcompile"]')
    assert tc.is_enabled() and not tc.is_checked()
    assert absent_or_hidden(ex.locator('[data-testid="executors-unavailable"]'))

    runs = ex.locator('[data-testid="runs"] [data-testid="run"]')
    n_runs = runs.count()
    old_rows = runs.all_inner_texts()
    tc.check()
    ex.locator('[data-testid="rerun"]').click()
    nb.page.wait_for_function(
        "([sel, n]) => document.querySelectorAll(sel).length > n",
        arg=[f'{EXPLORER} [data-testid="runs"] [data-testid="run"]', n_runs],
        timeout=RERUN_MS,
        polling=500,
    )
    nb.page.wait_for_function(
        "(sel) => /ready/i.test(document.querySelector(sel).textContent)",
        arg=f'{EXPLORER} [data-testid="status"]',
        timeout=RERUN_MS,
        polling=500,
    )
    nb.screenshot("explorer_13_after_torchcompile_rerun", ex)

    assert runs.count() == n_runs + 1
    assert runs.all_inner_texts()[:n_runs] == old_rows, "previous runs' figures stay as they were"
    new = runs.nth(n_runs)

    def field(name: str) -> str:
        return new.locator(f'[data-field="{name}"]').inner_text().strip()

    assert "torchcompile" in field("executors")
    assert float(re.search(r"[\d.]+(?:e-?\d+)?", field("median_ms")).group()) > 0
    assert float(re.search(r"[\d.]+(?:e-?\d+)?", field("max_abs_diff")).group()) < 1e-4
    assert int(field("cache_misses")) >= 1
    assert int(field("cache_hits")) >= 0
    assert absent_or_hidden(ex.locator('[data-testid="error"]'))

    # The steps are the new compilation's: the execution transform fused the region.
    go_to(ex, "Transform for execution")
    nb.screenshot("explorer_14_fusion", ex)
    graph_text = ex.locator('[data-testid="graph"]').text_content()
    assert re.search("torchcompile", graph_text, re.I), graph_text
    ex.locator(f"{NODE}.diff-fused").first.wait_for(timeout=10_000)

    groups = ex.locator('[data-testid="graph"] [data-testid="group"]')
    assert groups.count() >= 1, "the fusion is a group"
    group = groups.first
    toggle = group.locator('[data-testid="group-toggle"]')
    if toggle.count() == 0:  # the toggle may sit beside the group rather than inside it
        gid = group.get_attribute("data-group-id")
        toggle = ex.locator(f'[data-testid="group-toggle"][data-group-id="{gid}"]')
    visible = lambda: ex.locator(NODE).evaluate_all(
        "els => els.filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; })"
        ".map(e => e.dataset.nodeId).sort()"
    )
    expanded = (visible(), group.bounding_box())  # collapsed or expanded: whichever is the default
    toggle.first.click()
    nb.page.wait_for_timeout(300)
    collapsed = (visible(), group.bounding_box())
    nb.screenshot("explorer_15_group_toggled", ex)
    assert collapsed != expanded, "toggling a group changes what the graph shows"
    toggle.first.click()
    nb.page.wait_for_timeout(300)
    assert visible() == expanded[0], "toggling back restores the group's nodes"
    no_page_errors(nb)


def test_an_explorer_without_inputs_says_why_it_cannot_rerun(notebook_opener):
    nb = open_and_run(notebook_opener, "not_interactive.ipynb")
    ex = ready_explorer(nb)
    toggles = ex.locator('input[data-testid="executor-toggle"]')
    assert toggles.count() >= 1
    assert all(toggles.nth(i).is_disabled() for i in range(toggles.count())), "no kernel-side inputs: toggles off"
    why = ex.locator('[data-testid="executors-unavailable"]')
    assert why.is_visible() and why.inner_text().strip(), "the explorer says why it cannot rerun"
    nb.screenshot("not_interactive_01", ex)
    no_page_errors(nb)


# ---------------------------------------------------------------------------------------------
# Failures and hostile input


def test_a_tracing_error_shows_the_users_line_not_a_traceback(notebook_opener):
    nb = open_and_run(notebook_opener, "failing.ipynb", allow_errors=True)
    ex = nb.page.locator(EXPLORER).first
    ex.wait_for(timeout=READY_MS)
    error = ex.locator('[data-testid="error"]')
    error.wait_for(timeout=READY_MS)
    error.scroll_into_view_if_needed()
    nb.screenshot("failing_01_error", ex)
    text = error.inner_text()
    for expected in ("UnsupportedOpError", "to_sparse", "return y.to_sparse()"):
        assert expected in text, f"{expected!r} not in the error panel:\n{text}"
    assert "Traceback (most recent call last)" not in text and "site-packages" not in text
    no_page_errors(nb)


def test_markup_in_user_strings_is_shown_as_text_and_runs_nothing(notebook_opener):
    nb = notebook_opener("hostile.ipynb")
    nb.page.evaluate("() => { window.__pwned = undefined; }")
    try:
        nb.run_all()
    except AssertionError:
        pass  # `boom` raises; its explorer must still show the error
    ex = ready_explorer(nb, 0)
    go_to(ex, "Dead Code Elimination")
    source = ex.locator('[data-testid="source"]').inner_text()
    assert '<script>window.__pwned = 1</script> <img src=x onerror="window.__pwned = 2; alert(2)">' in source

    node_for(ex, "mul").click()
    settle(ex)
    details = ex.locator('[data-testid="node-details"]').inner_text()
    assert "<script>window.__pwned = 1</script>" in details, details
    nb.screenshot("hostile_01_source_and_details", ex)

    search = ex.locator('input[data-testid="search"]')
    search.fill("<img src=x onerror=alert(6)>")
    nb.page.wait_for_timeout(300)

    failed = nb.page.locator(EXPLORER).nth(1)
    error = failed.locator('[data-testid="error"]')
    error.wait_for(timeout=READY_MS)
    assert '<img src=x onerror="window.__pwned = 5; alert(5)"> broke' in error.inner_text()
    nb.screenshot("hostile_02_error", failed)

    nb.page.wait_for_timeout(1000)  # give an injected <img> time to fail loading and fire onerror
    assert nb.page.evaluate("() => window.__pwned") is None, "a script from the user's strings ran"
    assert nb.dialogs == [], f"a script from the user's strings opened dialogs: {nb.dialogs}"
    injected = nb.page.evaluate(
        """(sel) => [...document.querySelectorAll(sel + ' *')]
             .filter(e => e.tagName.toLowerCase() === 'script' || (e.tagName.toLowerCase() === 'img' && e.getAttribute('src') === 'x')
                          || [...e.attributes].some(a => /^on/i.test(a.name)))
             .map(e => e.outerHTML.slice(0, 120))""",
        EXPLORER,
    )
    assert injected == [], f"markup from the user's program became elements: {injected}"
    no_page_errors(nb)


def test_the_live_explorer_opens_in_its_own_tab_and_reruns_there(notebook_opener):
    nb = open_and_run(notebook_opener, "explorer.ipynb")
    ex = ready_explorer(nb)
    runs = ex.locator('[data-testid="runs"] [data-testid="run"]')
    assert "first call" in runs.first.inner_text(), "the call that compiled is the first run"
    n_runs = runs.count()

    # the command on the live output (its context menu), as on a saved one
    ex.locator(STEP).first.click(button="right")
    item = nb.page.locator(".lm-Menu-item", has_text="Open Trace Explorer in New Tab")
    item.wait_for()
    item.click()
    tab = nb.page.locator(f".thunder-explorer-tab {EXPLORER}")
    tab.wait_for(timeout=30_000)
    rerun = tab.locator('[data-testid="rerun"]')
    assert rerun.is_enabled(), "the tab is the live explorer: it can rerun"
    rerun.click()
    nb.page.wait_for_function(
        "([sel, n]) => document.querySelectorAll(sel).length > n",
        arg=[f'.thunder-explorer-tab {EXPLORER} [data-testid="runs"] [data-testid="run"]', n_runs],
        timeout=RERUN_MS,
        polling=500,
    )
    # the output in the notebook shows the same new run: one widget, two views
    nb.page.wait_for_function(
        "([sel, n]) => document.querySelectorAll(sel).length > n",
        arg=[f'.jp-NotebookPanel {EXPLORER} [data-testid="runs"] [data-testid="run"]', n_runs],
        timeout=30_000,
        polling=500,
    )
    nb.screenshot("explorer_16_live_tab", tab)
    no_page_errors(nb)


def test_a_rerun_keeps_the_users_view_and_the_saved_notebook_holds_it(notebook_opener, lab_server):
    """Regression: the saved output held only the first display's document, not the reruns."""
    import nbformat

    from thunder_viz.render.mime import document_of

    nb = open_and_run(notebook_opener, "explorer.ipynb")
    ex = ready_explorer(nb)
    go_to(ex, "Dead Code Elimination")
    chosen = current_step(ex)
    runs = f'.jp-NotebookPanel {EXPLORER} [data-testid="runs"] [data-testid="run"]'
    n_runs = ex.locator('[data-testid="runs"] [data-testid="run"]').count()
    ex.locator('[data-testid="rerun"]').click()
    nb.page.wait_for_function(
        "([sel, n]) => document.querySelectorAll(sel).length > n", arg=[runs, n_runs], timeout=RERUN_MS, polling=250
    )
    nb.wait_kernel_idle()
    settle(ex)
    # the display was updated (so JupyterLab rendered the output again): still one explorer, as the user left it
    explorers = nb.page.locator(f".jp-NotebookPanel .jp-OutputArea {EXPLORER}")
    assert explorers.count() == 1, "one explorer in the output after the rerun"
    ex = explorers.first
    assert current_step(ex) == chosen, "the step the user was looking at stays selected"
    assert ex.locator('[data-testid="runs"] [data-testid="run"]').count() == n_runs + 1

    def saved_runs(outputs: list[dict]) -> list[str]:
        [output] = [o for o in outputs if "application/vnd.thunder.trace+json" in o.get("data", {})]
        return [r["id"] for r in document_of(output["data"])["runs"]]

    explorer_cell = next(i for i, outs in enumerate(nb.outputs()) if any("data" in o for o in outs))
    assert saved_runs(nb.outputs()[explorer_cell]) == ["r1", "r2"], "the notebook model holds the rerun"
    nb.page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
    nb.page.wait_for_function(
        "() => !window.jupyterapp.shell.currentWidget.context.model.dirty", timeout=30_000, polling=250
    )
    on_disk = nbformat.read(lab_server.root / nb.path, as_version=4)  # joins the multi-line strings
    code_cells = [c for c in on_disk["cells"] if c["cell_type"] == "code"]
    assert saved_runs(code_cells[explorer_cell]["outputs"]) == ["r1", "r2"], "the saved file holds the rerun"
    no_page_errors(nb)


def test_a_rerun_after_the_kernel_is_gone_says_so(notebook_opener):
    nb = open_and_run(notebook_opener, "explorer.ipynb")
    ex = ready_explorer(nb)
    nb.page.evaluate(
        "async () => { const nb = window.jupyterapp.shell.currentWidget;"
        " await nb.sessionContext.session.kernel.shutdown(); }"
    )
    ex.locator('[data-testid="rerun"]').click()
    started = time.monotonic()
    nb.page.wait_for_function(
        "(sel) => /no answer from the kernel/i.test(document.querySelector(sel).textContent)",
        arg=f'{EXPLORER} [data-testid="status"]',
        timeout=20_000,
        polling=200,
    )
    assert time.monotonic() - started < 15, "said so promptly, not after a long hang"
    assert ex.locator('[data-testid="rerun"]').is_enabled(), "the user can try again"
    nb.screenshot("explorer_17_kernel_gone", ex)
