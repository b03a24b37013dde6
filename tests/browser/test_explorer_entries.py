"""Browser test: the explorer of a real generation (``thunder.jit(model).generate(...)`` on a small GPT-2) shows
its prefill entry and its decoding entry, one at a time, picked above the steps: readable, and switching entries
is quick and blocks the page no longer than a moment (Note [Steps of each cache entry] in thunder_viz/session.py).

The document is shown in a static page with the committed standalone bundle (``explorer_page``), as
test_explorer_big.py does: no JupyterLab, no kernel.

Layer: tests. Imports pytest, the ``browser`` fixture and ``save_screenshot`` of ``tests/browser/conftest.py``,
and thunder to make the document.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.browser.conftest import opened_explorer, save_screenshot

pytestmark = pytest.mark.browser

# Clicks entry `i` and waits until its step is drawn (two frames after the explorer says it is ready): the time
# that took, and the longest task meanwhile (how long the page did not answer).
SWITCH = """async (i) => {
  const painted = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const root = document.querySelector('.thunder-explorer');
  let longest = 0;
  const obs = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) longest = Math.max(longest, e.duration);
  });
  obs.observe({type: 'longtask', buffered: false});
  const t0 = performance.now();
  document.querySelector(`[data-testid="entry"][data-entry="${i}"]`).click();
  while (!(root.dataset.entry === String(i) && root.dataset.ready === 'true'
           && root.querySelector('[data-testid="graph"] [data-testid="node"], [data-testid="graph"] [data-testid="group"]'))) {
    await new Promise((r) => setTimeout(r, 5));
  }
  await painted();
  const ms = performance.now() - t0;
  await new Promise((r) => setTimeout(r, 50));  // (the observer reports a task after it ended)
  obs.disconnect();
  return {ms, longest};
}"""

SOURCE = """() => Array.from(document.querySelectorAll('[data-testid="source-line"]')).map((l) => l.textContent).join('\\n')"""


@pytest.fixture(scope="module")
def generation_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    transformers = pytest.importorskip("transformers")
    import torch

    import thunder
    from benchmarks.bench_explorer_model import explorer_page
    from thunder_viz.session import Session

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=4, n_embd=64, n_head=4, vocab_size=256, n_positions=64, bos_token_id=0, eos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config).eval()
    input_ids = torch.randint(0, config.vocab_size, (1, 8))
    jm = thunder.jit(model)
    out = jm.generate(input_ids, max_new_tokens=8, do_sample=False)
    torch.testing.assert_close(out, model.generate(input_ids, max_new_tokens=8, do_sample=False))
    path = tmp_path_factory.mktemp("entries") / "generate.html"
    path.write_text(explorer_page(Session(jm).to_document()))
    return path


def test_a_generation_shows_its_prefill_and_decoding_entries_and_switches_quickly(
    browser: object, generation_page: Path
) -> None:
    with opened_explorer(browser, generation_page) as page:

        # it opens on the decoding entry (the last compiled), both entries labelled, readable in the step column
        entries = page.locator('[data-testid="entry"]')
        assert entries.count() == 2
        prefill, decode = entries.nth(0), entries.nth(1)
        prefill_text, decode_text = (e.text_content().replace("\xa0", " ") for e in (prefill, decode))  # (a shape never wraps)
        assert "prefill: input_ids i64[1, 8], position_ids i64[1, 8]" in prefill_text
        assert "decode: input_ids i64[1, 1]" in decode_text and "cache length symbolic" in decode_text
        assert "6 cache hits" in decode_text and "last compiled" in decode_text
        assert "0 cache hits" in prefill_text and "compiled in" in prefill_text
        assert decode.get_attribute("aria-pressed") == "true"
        column = page.locator(".tx-steps").bounding_box()
        for box in (prefill.bounding_box(), decode.bounding_box()):
            assert box["x"] >= column["x"] and box["x"] + box["width"] <= column["x"] + column["width"] + 1
        font = page.evaluate("() => parseFloat(getComputedStyle(document.querySelector('.tx-entry-label')).fontSize)")
        assert font >= 11
        assert "cache_layers_0_keys" in page.evaluate(SOURCE)

        # the prefill: its own trace, on the same step, quickly and without freezing the page
        timings = [page.evaluate(SWITCH, 0)]
        assert prefill.get_attribute("aria-pressed") == "true"
        source = page.evaluate(SOURCE)
        assert 'input_ids: "cpu i64[1, 8]"' in source and "cache_layers_0_keys" not in source
        save_screenshot(page.locator(".thunder-explorer"), "explorer-generate-prefill")
        timings += [page.evaluate(SWITCH, 1), page.evaluate(SWITCH, 0)]
        print("entry switch (ms, longest task ms):", [(round(t["ms"]), round(t["longest"])) for t in timings])
        assert all(t["ms"] < 2000 and t["longest"] < 1000 for t in timings), timings
