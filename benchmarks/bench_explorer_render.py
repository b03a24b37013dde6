"""First render and pan of the trace explorer on a 5,000-node graph, in headless Chromium.

Run: ``python benchmarks/bench_explorer_render.py [--nodes 5000] [--repeats 5]``. Needs Debian's
chromium (``/usr/lib/chromium/chromium``) and Python playwright (never ``playwright install``).

It writes a synthetic trace document (docs/trace-schema.md: two steps of N nodes, module groups,
fusions, a diff), opens a static page with the committed standalone bundle
(thunder_viz/static/standalone.js) and measures, inside the page:

- ``mount -> data-ready``: from calling ``ThunderExplorer.mount`` until the root says
  ``data-ready="true"`` (document validation, layout in the Web Worker, SVG built);
- ``mount -> painted``: the same plus the next two animation frames (style, layout, paint);
- a pan: a pointer drag of 60 frames across 3,000 px (leaving the built region, so the culled
  graph is rebuilt), each frame's time, and the same drag with Playwright's real mouse;
- zooming out until the whole graph is in view (everything built).

Target (issue 3): first render (mount -> painted) under 1 s. A benchmark: prints, asserts nothing.

Layer: benchmarks; imports only the standard library and playwright (not thunder).
"""

from __future__ import annotations

import argparse
import json
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


class _Lcg:
    """A tiny deterministic generator, so every run measures the same document."""

    def __init__(self, seed: int = 12345) -> None:
        self.state = seed

    def below(self, n: int) -> int:
        self.state = (self.state * 1103515245 + 12345) % (1 << 31)
        return self.state % n


def _tensor(name: str, shape: list[int]) -> dict:
    return {"name": name, "shape": shape, "dtype": "f32", "device": "cpu", "kind": "tensor"}


OPS = [
    "ltorch.add",
    "ltorch.mul",
    "ltorch.linear",
    "ltorch.gelu",
    "ltorch.softmax",
    "ltorch.layer_norm",
    "ltorch.matmul",
]


def _step(index: int, n: int, n_inputs: int, *, execute: bool, previous: dict | None) -> dict:
    rng = _Lcg()
    inputs = [_tensor(f"x{i}", [64, 256]) for i in range(n_inputs)]
    lines = [f"# Constructed by {'Transform for execution' if execute else 'Interpretation'}", "import torch", ""]
    lines.append(f"def computation({', '.join(v['name'] for v in inputs)}):")
    nodes: list[dict] = []
    edges: list[dict] = []
    inner: list[dict] = []
    groups: list[dict] = []
    producer = {v["name"]: f"input:{v['name']}" for v in inputs}
    made: list[str] = [v["name"] for v in inputs]
    fusion_every = 250  # in the executed step, every 250th op starts a 5-op fusion
    group_size = 100
    for i in range(n):
        if i % group_size == 0:
            groups.append(
                {
                    "id": f"g{i // group_size}",
                    "kind": "module",
                    "label": f"layers.{i // group_size}",
                    "nodes": [],
                    "parent": None,
                    "collapsed": False,
                }
            )
        module = groups[-1]
        op = OPS[rng.below(len(OPS))]
        a = made[-1]
        b = made[max(0, len(made) - 1 - rng.below(40))]
        out = f"t{i}"
        executor = ("torch" if rng.below(4) else "python") if execute else None
        if execute:
            op = op.replace("ltorch.", "torch.")
        line = len(lines) + 1
        lines.append(f'  {out} = {op}({a}, {b})  # {out}: "cpu f32[64, 256]"')
        node = {
            "id": f"n{i}",
            "uid": i,
            "op": op,
            "label": op.split(".")[-1],
            "executor": executor,
            "fusion": False,
            "inputs": [_tensor(a, [64, 256]), _tensor(b, [64, 256])],
            "outputs": [_tensor(out, [64, 256])],
            "line": line,
            "source": {
                "file": "/home/user/model.py",
                "line": 10 + i % 50,
                "function": "forward",
                "module_path": module["label"],
                "code": f"y = layer{i % 50}(x)",
            },
            "lineage": [f"n{i}"] if previous else [],
            "origin": [f"n{i}"],
            "decomposition": [f"{out} = prims.add({a}, {b})"],
            "group": module["id"],
            "fused_into": None,
        }
        nodes.append(node)
        module["nodes"].append(node["id"])
        for v in (a, b):
            edges.append(
                {
                    "id": f"e{len(edges)}",
                    "source": producer[v],
                    "target": node["id"],
                    "value": v,
                    "shape": [64, 256],
                    "dtype": "f32",
                }
            )
        producer[out] = node["id"]
        made.append(out)
    if execute:  # wrap some runs of 5 ops into fusions: fusion node first, members after it
        fused: dict[str, list[str]] = {}
        for start in range(0, n - 5, fusion_every):
            fid = f"f{start}"
            members = nodes[start : start + 5]
            gid = f"gf{start}"
            groups.append(
                {
                    "id": gid,
                    "kind": "fusion",
                    "label": f"TorchCompile{start // fusion_every}",
                    "nodes": [fid] + [m["id"] for m in members],
                    "parent": members[0]["group"],
                    "collapsed": True,
                    "node": fid,
                }
            )
            for m in members:
                m["fused_into"] = fid
                m["group"] = gid
            fused[fid] = [m["id"] for m in members]
            fnode = dict(
                members[0],
                id=fid,
                uid=100000 + start,
                op=f"TorchCompile{start // fusion_every}",
                label=f"TorchCompile{start // fusion_every}",
                executor="torchcompile",
                fusion=True,
                lineage=fused[fid],
                group=gid,
                fused_into=None,
                outputs=members[-1]["outputs"],
            )
            nodes.insert(nodes.index(members[0]), fnode)
        member_ids = {m for ms in fused.values() for m in ms}
        inner = [e for e in edges if e["source"] in member_ids or e["target"] in member_ids]
        fusion_of = {m: f for f, ms in fused.items() for m in ms}
        top = []
        for e in edges:
            s, t = fusion_of.get(e["source"], e["source"]), fusion_of.get(e["target"], e["target"])
            if s != t:
                top.append(dict(e, source=s, target=t))
        edges = top
    last = made[-1]
    lines.append(f"  return {last}")
    nodes.append(
        {
            "id": "ret",
            "uid": n,
            "op": "python_return",
            "label": "return",
            "executor": "python" if execute else None,
            "fusion": False,
            "inputs": [_tensor(last, [64, 256])],
            "outputs": [],
            "line": len(lines),
            "source": None,
            "lineage": ["ret"] if previous else [],
            "origin": ["ret"],
            "decomposition": [],
            "group": None,
            "fused_into": None,
        }
    )
    edges.append(
        {
            "id": f"e{len(edges)}",
            "source": producer[last],
            "target": "ret",
            "value": last,
            "shape": [64, 256],
            "dtype": "f32",
        }
    )
    edges.append(
        {"id": f"e{len(edges)}", "source": "ret", "target": "output", "value": last, "shape": [64, 256], "dtype": "f32"}
    )
    diff = None
    if previous:
        fused_map = {n_["id"]: n_["lineage"] for n_ in nodes if n_["fusion"]}
        diff = {
            "previous": previous["id"],
            "added": [],
            "removed": [],
            "fused": fused_map,
            "merged": {},
            "rewritten": [n_["id"] for n_ in nodes if not n_["fusion"] and n_["fused_into"] is None],
            "unchanged": 0,
        }
    return {
        "id": f"s{index}",
        "index": index,
        "kind": "computation",
        "pass": "Transform for execution" if execute else "Interpretation",
        "ms": 12.0,
        "source": "\n".join(lines),
        "nodes": nodes,
        "edges": edges,
        "inner_edges": inner,
        "groups": groups,
        "inputs": inputs,
        "outputs": [last],
        "diff": diff,
    }


def synthetic_document(n: int) -> dict:
    """A version-1 trace document whose steps have ``n`` ops each (the second with fusions)."""
    first = _step(0, n, 8, execute=False, previous=None)
    second = _step(1, n, 8, execute=True, previous=first)
    return {
        "schema": "thunder-trace",
        "version": 1,
        "title": f"synthetic_{n}",
        "steps": [first, second],
        "runs": [],
        "executors": {
            "available": ["torchcompile", "torch", "python"],
            "selected": ["torch", "python"],
            "always": ["torch", "python"],
            "interactive": False,
            "reason": "benchmark page",
        },
        "error": None,
    }


PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>{css}</style>
<style>body {{ margin: 0; }} #root {{ --thunder-explorer-height: 900px; }}</style></head>
<body><div id="root"></div><script>{js}</script>
<script type="application/json" id="doc">{doc}</script></body></html>"""

MEASURE_MOUNT = """async () => {
  const text = document.getElementById('doc').textContent;
  const t0 = performance.now();
  const doc = JSON.parse(text);
  const t1 = performance.now();
  const root = document.getElementById('root');
  const ready = new Promise((resolve) => {
    const check = () => {
      const el = root.querySelector('.thunder-explorer');
      if (el && el.getAttribute('data-ready') === 'true') { resolve(performance.now()); return true; }
      return false;
    };
    const obs = new MutationObserver(() => { if (check()) obs.disconnect(); });
    obs.observe(root, {subtree: true, childList: true, attributes: true, attributeFilter: ['data-ready']});
  });
  const t2 = performance.now();
  window.cleanup = ThunderExplorer.mount(root, doc, {interactive: false});
  const tReady = await ready;
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  const tPaint = performance.now();
  return {parse_ms: t1 - t0, ready_ms: tReady - t2, painted_ms: tPaint - t2,
          elements: root.querySelectorAll('*').length,
          nodes_built: root.querySelectorAll('[data-testid="node"]').length};
}"""

MEASURE_PAN = """async () => {
  const svg = document.querySelector('[data-testid="graph"]');
  const r = svg.getBoundingClientRect();
  const x = r.left + r.width / 2, y = r.top + r.height / 2;
  const opts = (cx, cy) => ({bubbles: true, clientX: cx, clientY: cy, pointerId: 1, button: 0, buttons: 1, isPrimary: true});
  const frame = () => new Promise((res) => requestAnimationFrame(() => res(performance.now())));
  await frame();
  const t0 = performance.now();
  svg.dispatchEvent(new PointerEvent('pointerdown', opts(x, y)));
  const times = [];
  let last = performance.now();
  for (let i = 1; i <= 60; i++) {
    svg.dispatchEvent(new PointerEvent('pointermove', opts(x - i * 25, y - i * 40)));
    const now = await frame();
    times.push(now - last);
    last = now;
  }
  svg.dispatchEvent(new PointerEvent('pointerup', opts(x - 1500, y - 2400)));
  await frame();
  return {total_ms: performance.now() - t0, frames: times,
          transform: document.querySelector('.viewport').getAttribute('transform')};
}"""

MEASURE_ZOOM_OUT = """async () => {
  const svg = document.querySelector('[data-testid="graph"]');
  const r = svg.getBoundingClientRect();
  const t0 = performance.now();
  for (let i = 0; i < 12; i++) {
    svg.dispatchEvent(new WheelEvent('wheel', {bubbles: true, cancelable: true, deltaY: 400,
                                               clientX: r.left + r.width / 2, clientY: r.top + 10}));
  }
  await new Promise((res) => requestAnimationFrame(() => requestAnimationFrame(res)));
  return {ms: performance.now() - t0,
          nodes_built: document.querySelectorAll('[data-testid="node"]').length,
          transform: document.querySelector('.viewport').getAttribute('transform')};
}"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    from playwright.sync_api import sync_playwright

    doc = synthetic_document(args.nodes)
    text = json.dumps(doc)
    page_html = PAGE.format(
        css=(STATIC / "explorer.css").read_text(),
        js=(STATIC / "standalone.js").read_text(),
        doc=text.replace("</", "<\\/"),
    )
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.html"
        path.write_text(page_html)
        print(f"document: {args.nodes} nodes x {len(doc['steps'])} steps, {len(text) / 1e6:.1f} MB of JSON")
        print(f"bundle: standalone.js {(STATIC / 'standalone.js').stat().st_size / 1024:.1f} KiB")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=LAUNCH_ARGS)
            results = []
            for _ in range(args.repeats):
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                errors: list[str] = []
                page.on("pageerror", lambda e, errors=errors: errors.append(str(e)))
                page.goto(path.as_uri())
                results.append(page.evaluate(MEASURE_MOUNT))
                if errors:
                    raise SystemExit(f"page errors: {errors}")
                last_page = page
                if len(results) < args.repeats:
                    page.close()
            ready = [r["ready_ms"] for r in results]
            painted = [r["painted_ms"] for r in results]
            print(f"JSON.parse:               median {statistics.median(r['parse_ms'] for r in results):7.1f} ms")
            print(
                f"mount -> data-ready:      median {statistics.median(ready):7.1f} ms   (runs: "
                f"{', '.join(f'{x:.0f}' for x in ready)})"
            )
            print(
                f"mount -> painted:         median {statistics.median(painted):7.1f} ms   (runs: "
                f"{', '.join(f'{x:.0f}' for x in painted)})   target < 1000 ms"
            )
            print(
                f"elements after render:    {results[-1]['elements']} "
                f"({results[-1]['nodes_built']} of {args.nodes} nodes built: culled to the viewport)"
            )

            pan = last_page.evaluate(MEASURE_PAN)
            frames = sorted(pan["frames"])
            print(
                f"pan (60 frames, 3000 px): total {pan['total_ms']:.0f} ms, frame median {statistics.median(frames):.1f} ms, "
                f"p95 {frames[int(len(frames) * 0.95) - 1]:.1f} ms, max {frames[-1]:.1f} ms"
            )

            box = last_page.locator("[data-testid='graph']").bounding_box()
            cx, cy = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            before = last_page.get_attribute(".viewport", "transform")
            t0 = last_page.evaluate("performance.now()")
            last_page.mouse.move(cx, cy)
            last_page.mouse.down()
            for i in range(1, 21):
                last_page.mouse.move(cx + i * 30, cy + i * 30)
            last_page.mouse.up()
            t1 = last_page.evaluate("new Promise(r => requestAnimationFrame(() => r(performance.now())))")
            after = last_page.get_attribute(".viewport", "transform")
            print(f"pan with the real mouse:  {t1 - t0:.0f} ms for 20 moves (moved: {before != after})")

            zoom = last_page.evaluate(MEASURE_ZOOM_OUT)
            print(f"zoom out to everything:   {zoom['ms']:.0f} ms ({zoom['nodes_built']} nodes built)")
            browser.close()


if __name__ == "__main__":
    main()
