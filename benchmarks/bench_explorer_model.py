"""The trace explorer on a real model: a 12-layer GPT-2's document, in headless Chromium.

Run: ``python benchmarks/bench_explorer_model.py [--layers 12] [--repeats 3] [--bundle PATH]
[--document PATH]``.
Needs torch, transformers, Debian's chromium (``/usr/lib/chromium/chromium``) and Python
playwright (never ``playwright install``). ``--bundle`` measures another build of the standalone
bundle (e.g. an older one, for comparison); the default is the committed
``thunder_viz/static/standalone.js``; ``--document`` measures a saved document instead.

It builds the document as a user would get it (``thunder_viz.session.Session`` around
``thunder.jit`` of a tiny ``GPT2LMHeadModel`` with random weights, offline, on the CPU: every
step, forward and backward), opens a static page with the bundle and the document packed as the
live widget, saved outputs and snapshots hand it over (``thunder_viz/render/pack.py``; ``--plain``
embeds the plain JSON instead), and measures, inside the page:

- first render: from ``ThunderExplorer.mount`` until the root says ``data-ready="true"`` and
  two animation frames later (painted), unpacking included;
- expanding a block: a click on a collapsed module box (``transformer.h.5``), half a second
  after the first render, until painted;
- switching steps: a click on the next step in the list until it is shown and painted;
- the first visit to the last backward step, right after the first render: nothing of it is read
  yet (Note [Lazy steps] in js/src/schema.ts), so it unpacks, checks and lays out the backward
  steps up to it;
- reading ahead: on another page, how long after the first render the steps not shown are read
  and laid out while the page is idle (the last backward step, and every step), so that visiting
  them later costs what a step switch costs.

The first render starts with the bundle loaded; loading it (evaluating the script, which compiles
it whole: Note [Compile on load] in js/build.mjs) is measured apart, on a page of its own, as the
main thread's CPU time.

``--warm-page`` first lays out a few lines in the explorer's fonts and styles, as the JupyterLab
page around a notebook's explorer has long done: the page's first layout in those fonts (about 10
ms on a loaded machine) then does not count in the first render, as it does not in JupyterLab.

Each is reported as wall time and as the CPU time of the page's main thread (Chromium's
``ThreadTime``), which waiting for a core on a loaded machine does not inflate; the load average
is printed beside them.

It also prints the graph's size in graph pixels (the bounding box of everything drawn) when the
first computation step opens and after "fit". Targets (issue "the explorer stays readable and
fluid on a 12-layer decoder"): first render under 1 s, expanding under 200 ms, switching under
150 ms; issue 31: each under 150 ms. A benchmark: prints, asserts nothing.

Layer: benchmarks; imports thunder and thunder_viz to build the document, and playwright.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from pathlib import Path

STATIC = Path(__file__).resolve().parent.parent / "thunder_viz" / "static"
CHROMIUM = "/usr/lib/chromium/chromium"
LAUNCH_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


def gpt2_document(n_layer: int = 12) -> dict:
    """The explorer document of a tiny ``n_layer`` GPT-2 (random weights, CPU, no download)."""
    import torch
    import transformers

    import thunder
    from thunder_viz.session import Session

    config = transformers.GPT2Config(n_layer=n_layer, n_embd=32, n_head=2, vocab_size=128, n_positions=64)
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config).eval()
    session = Session(thunder.jit(model))
    session(torch.randint(0, 128, (1, 16)))
    return session.to_document()


PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>{css}</style>
<style>body {{ margin: 0; }} #root {{ --thunder-explorer-height: 900px; }}</style></head>
<body><div id="root"></div><script>{js}</script>
<script type="application/json" id="doc">{doc}</script></body></html>"""


def explorer_page(doc: dict, bundle: Path | None = None) -> str:
    """A static page with the explorer's stylesheet and bundle; ``MOUNT`` shows ``doc`` in it."""
    return PAGE.format(
        css=(STATIC / "explorer.css").read_text(),
        js=(bundle or STATIC / "standalone.js").read_text(),
        doc=json.dumps(doc).replace("</", "<\\/"),
    )


# Text in the explorer's fonts and styles laid out once and removed (--warm-page).
WARM = """() => {
  const d = document.createElement('div');
  d.className = 'thunder-explorer';
  d.innerHTML = '<header class="tx-header">thunder <b>step</b> \u2212 + \u2922</header>' +
    '<div class="tx-source"><div class="tx-line">t0 = torch.add(x, y)</div></div>';
  document.body.appendChild(d);
  document.body.offsetHeight;
  d.remove();
}"""

# Each measurement ends two animation frames after its action: style, layout and paint done.
MOUNT = """async () => {
  const painted = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const text = document.getElementById('doc').textContent;
  const t0 = performance.now();
  const doc = JSON.parse(text);
  const t1 = performance.now();
  const root = document.getElementById('root');
  const ready = new Promise((resolve) => {
    const obs = new MutationObserver(() => {
      const el = root.querySelector('.thunder-explorer');
      if (el && el.dataset.ready === 'true') { obs.disconnect(); resolve(performance.now()); }
    });
    obs.observe(root, {subtree: true, childList: true, attributes: true, attributeFilter: ['data-ready']});
  });
  const t2 = performance.now();
  ThunderExplorer.mount(root, doc, {interactive: false});
  const tReady = await ready;
  await painted();
  return {parse_ms: t1 - t0, ready_ms: tReady - t2, painted_ms: performance.now() - t2};
}"""

# What is drawn: counts and the bounding box of the graph (graph pixels).
SHOWN = """() => {
  const g = document.querySelector('[data-testid="graph"] .viewport');
  const box = g.getBBox();
  const count = (sel) => g.querySelectorAll(sel).length;
  return {width: Math.round(box.width), height: Math.round(box.height),
          nodes: count('[data-testid="node"]'), boxes: count('[data-testid="group"].collapsed'),
          io: count('[data-testid="io"]')};
}"""

EXPAND = """async (label) => {
  const painted = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const box = Array.from(document.querySelectorAll('[data-testid="group"].collapsed'))
    .find((g) => g.querySelector('.node-label').textContent === label);
  if (!box) return null;
  const t0 = performance.now();
  box.querySelector('[data-testid="group-toggle"]').dispatchEvent(new MouseEvent('click', {bubbles: true}));
  const tSync = performance.now();
  await painted();
  return {sync_ms: tSync - t0, painted_ms: performance.now() - t0};
}"""

SWITCH = """async (index) => {
  const painted = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const root = document.querySelector('.thunder-explorer');
  const li = document.querySelector(`[data-testid="step"][data-step-index="${index}"]`);
  const t0 = performance.now();
  li.dispatchEvent(new MouseEvent('click', {bubbles: true}));
  while (root.dataset.stepIndex !== String(index)) await new Promise((r) => setTimeout(r, 0));
  await painted();
  return performance.now() - t0;
}"""

# Since the first render: when the last backward step, and every step, are read (data-read on their
# item in the list of steps), polled each 10 ms.
READ_AHEAD = """async (index) => {
  const t0 = performance.now();
  const read = (sel) => Array.from(document.querySelectorAll(sel)).every((li) => li.dataset.read === 'true');
  let last = null;
  for (;;) {
    if (last === null && read(`[data-testid="step"][data-step-index="${index}"]`)) last = performance.now() - t0;
    if (read('[data-testid="step"]')) return {last_ms: last ?? performance.now() - t0, all_ms: performance.now() - t0};
    if (performance.now() - t0 > 20000) return {last_ms: last, all_ms: null};
    await new Promise((r) => setTimeout(r, 10));
  }
}"""

# The bundle evaluated as an inline script (compiled on the main thread, as a snapshot's is).
LOAD = """(src) => {
  const s = document.createElement('script');
  s.textContent = src;
  document.head.appendChild(s);
  return typeof ThunderExplorer;
}"""

FIT = """async () => {
  document.querySelector('[data-testid="zoom-fit"]').click();
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return document.querySelector('[data-testid="graph"] .viewport').getAttribute('transform');
}"""


def _ms(values: list[float]) -> str:
    return f"median {statistics.median(values):7.1f} ms   (runs: {', '.join(f'{v:.0f}' for v in values)})"


class _Timed:
    """Evaluates a measurement in the page and adds the main thread's CPU time it took."""

    def __init__(self, page) -> None:
        self.page = page
        self.cdp = page.context.new_cdp_session(page)
        self.cdp.send("Performance.enable")

    def _thread_ms(self) -> float:
        metrics = self.cdp.send("Performance.getMetrics")["metrics"]
        return 1000 * next(m["value"] for m in metrics if m["name"] == "ThreadTime")

    def __call__(self, script: str, arg=None) -> tuple[object, float]:
        before = self._thread_ms()
        result = self.page.evaluate(script, arg)
        return result, self._thread_ms() - before


def _load() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} cores"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bundle", type=Path, default=None, help="a standalone.js to measure instead")
    parser.add_argument("--document", type=Path, default=None, help="a saved document (JSON) instead of building one")
    parser.add_argument("--plain", action="store_true", help="hand the explorer the plain document, not the packed one")
    parser.add_argument("--warm-page", action="store_true", help="lay out text in the explorer's fonts before mounting")
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    doc = json.loads(args.document.read_text()) if args.document else gpt2_document(args.layers)
    first = next(i for i, s in enumerate(doc["steps"]) if s["kind"] == "computation")
    nodes = [len(s["nodes"]) for s in doc["steps"]]
    print(f"document: GPT-2 with {args.layers} layers, {len(doc['steps'])} steps of {min(nodes)}-{max(nodes)} nodes")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "model.html"
        from thunder_viz.render.pack import pack_document

        path.write_text(explorer_page(doc if args.plain else pack_document(doc), args.bundle))
        print(f"page: {path.stat().st_size / 1e6:.1f} MB")
        print(f"before: {_load()}")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            mounts, expands, switches, colds, aheads, loads = [], [], [], [], [], []
            last_backward = max((i for i, s in enumerate(doc["steps"]) if s["kind"] == "backward"), default=None)
            for _ in range(args.repeats):
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                errors: list[str] = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.goto(path.as_uri())
                if args.warm_page:
                    page.evaluate(WARM)
                timed = _Timed(page)
                mount, cpu = timed(MOUNT)
                mounts.append({**mount, "cpu_ms": cpu})
                opened = page.evaluate(SHOWN)
                if last_backward is not None:
                    colds.append(timed(SWITCH, last_backward))
                    page.evaluate(SWITCH, first)
                page.wait_for_timeout(500)  # a person looks before clicking
                expand, cpu = timed(EXPAND, "transformer.h.5")
                if expand:
                    expands.append((expand["painted_ms"], cpu))
                expanded = page.evaluate(SHOWN)
                for index in range(first + 1, len(doc["steps"])):
                    switches.append(timed(SWITCH, index))
                page.evaluate(SWITCH, first)
                fit = page.evaluate(FIT)
                if errors:
                    raise SystemExit(f"page errors: {errors}")
                page.close()
                if last_backward is not None:
                    page = browser.new_page(viewport={"width": 1600, "height": 1000})
                    page.goto(path.as_uri())
                    if args.warm_page:
                        page.evaluate(WARM)
                    page.evaluate(MOUNT)
                    aheads.append(page.evaluate(READ_AHEAD, last_backward))
                    page.close()
                page = browser.new_page()
                loaded, cpu = _Timed(page)(LOAD, (args.bundle or STATIC / "standalone.js").read_text())
                assert loaded == "object", loaded
                loads.append(cpu)
                page.close()
            browser.close()
        print(f"after:  {_load()}")
    print(f"JSON.parse ({'plain' if args.plain else 'packed'}):   median {statistics.median(m['parse_ms'] for m in mounts):7.1f} ms")
    print(f"bundle load, main thread CPU: {_ms(loads)}")
    print(f"first render (ready):  {_ms([m['ready_ms'] for m in mounts])}")
    print(f"first render (paint):  {_ms([m['painted_ms'] for m in mounts])}   target < 150 ms")
    print(f"  main thread CPU:     {_ms([m['cpu_ms'] for m in mounts])}")
    print(
        f"opens with: {opened['boxes']} module boxes, {opened['nodes']} nodes, {opened['io']} inputs/outputs;"
        f" {opened['width']} x {opened['height']} graph px"
    )
    if colds:
        print(f"first visit to step {last_backward} (last backward, nothing read ahead): {_ms([w for w, _ in colds])}   target < 150 ms")
        print(f"  main thread CPU:     {_ms([c for _, c in colds])}")
    if aheads:
        print(
            f"read ahead after the first render: step {last_backward} ready {_ms([a['last_ms'] for a in aheads])};"
            f" every step {_ms([a['all_ms'] for a in aheads])}"
        )
    if expands:
        print(f"expand transformer.h.5: {_ms([w for w, _ in expands])}   target < 150 ms")
        print(f"  main thread CPU:     {_ms([c for _, c in expands])}")
        print(
            f"  then: {expanded['boxes']} boxes, {expanded['nodes']} nodes; {expanded['width']} x {expanded['height']} px"
        )
    else:
        print("expand: no collapsed box labelled transformer.h.5 (this bundle opens everything expanded)")
    walls = [w for w, _ in switches]
    print(f"switch step:           median {statistics.median(walls):7.1f} ms   max {max(walls):.0f} ms   target < 150 ms")
    print(f"  main thread CPU:     median {statistics.median(c for _, c in switches):7.1f} ms   max {max(c for _, c in switches):.0f} ms")
    print(f"after fit: viewport transform {fit}")


if __name__ == "__main__":
    main()
