"""Browser test: the explorer on a 12-layer GPT-2 opens readable, fits whole, expands a block.

The document is a real one: ``benchmarks.bench_explorer_model.gpt2_document`` jits a tiny
``GPT2LMHeadModel`` (random weights, CPU, offline) in a ``thunder_viz`` session. It is shown in a
static page with the committed standalone bundle (``explorer_page``), the cheapest way into
Chromium: no JupyterLab, no kernel.

Layer: tests. Imports pytest, the ``browser`` fixture and ``save_screenshot`` of
``tests/browser/conftest.py``, and the benchmark's document builder (which imports thunder).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import opened_explorer, save_screenshot

pytestmark = pytest.mark.browser

BOX = '[data-testid="graph"] [data-testid="group"].collapsed'
NODE = '[data-testid="graph"] [data-testid="node"]'

# Labels of the collapsed boxes, top to bottom.
BOXES = """(sel) => Array.from(document.querySelectorAll(sel))
  .map((g) => [g.getBoundingClientRect().top, g.querySelector('.node-label').textContent])
  .sort((a, b) => a[0] - b[0]).map((x) => x[1])"""

# The graph's content and its viewport, in client pixels.
RECTS = """() => {
  const r = (el) => { const b = el.getBoundingClientRect();
                      return {left: b.left, top: b.top, right: b.right, bottom: b.bottom}; };
  const svg = document.querySelector('[data-testid="graph"]');
  return {content: r(svg.querySelector('.viewport')), view: r(svg)};
}"""


def _translate_y(transform: str) -> float:
    return float(transform.split(",")[1].split(")")[0])


@pytest.fixture(scope="module")
def gpt2_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("transformers")
    from benchmarks.bench_explorer_model import explorer_page, gpt2_document

    path = tmp_path_factory.mktemp("big") / "gpt2-12.html"
    path.write_text(explorer_page(gpt2_document(12)))
    return path


def test_a_12_layer_gpt2_opens_with_block_boxes_fits_whole_and_expands_a_block(
    browser: object, gpt2_page: Path
) -> None:
    with opened_explorer(browser, gpt2_page) as page:

        # it opens on the forward computation with its twelve blocks as boxes, readable
        labels = page.evaluate(BOXES, BOX)
        assert labels == [f"transformer.h.{i}" for i in range(12)]
        assert page.locator(NODE).count() < 40
        assert "ops" in page.locator(BOX).first.locator(".node-sub").text_content()
        transform = page.locator('[data-testid="graph"] .viewport').get_attribute("transform")
        assert float(transform.split("scale(")[1].rstrip(")")) >= 0.6

        # a click low on the overview moves the view down the graph
        overview = page.locator('[data-testid="minimap"]').bounding_box()
        page.mouse.click(overview["x"] + overview["width"] / 2, overview["y"] + overview["height"] - 5)
        moved = page.locator('[data-testid="graph"] .viewport').get_attribute("transform")
        assert _translate_y(moved) < _translate_y(transform) - 500

        # fit shows all of it
        page.click('[data-testid="zoom-fit"]')
        rects = page.evaluate(RECTS)
        content, view = rects["content"], rects["view"]
        assert content["left"] >= view["left"] - 1 and content["right"] <= view["right"] + 1
        assert content["top"] >= view["top"] - 1 and content["bottom"] <= view["bottom"] + 1
        save_screenshot(page.locator(".tx-graph-wrap"), "explorer-gpt2-12-fit")

        # one block expands in place: its ops appear, the other boxes keep their order
        nodes_before = page.locator(NODE).count()
        toggle = page.locator(f'{BOX}:has-text("transformer.h.5") [data-testid="group-toggle"]')
        toggle.dispatch_event("click")  # at the fit zoom it is a pixel wide
        page.wait_for_function(f"() => document.querySelectorAll('{BOX}').length === 11")
        assert page.evaluate(BOXES, BOX) == [f"transformer.h.{i}" for i in range(12) if i != 5]
        assert page.locator(NODE).count() >= nodes_before + 40
