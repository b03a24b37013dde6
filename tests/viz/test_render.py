"""DOT/SVG, the static HTML snapshot and the mime bundle, with hostile strings shown only as text."""

from __future__ import annotations

import base64
import concurrent.futures
import gzip
import hashlib
import json
import re
import shutil
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
import torch

import thunder
from tests.viz.trace_programs import EVIL, EVIL_FILE, dce_cse_steps, evil_steps, module_steps
from thunder_viz.graph import document
from thunder_viz.render import (
    MIME_TYPE,
    BundleMissingError,
    executor_colour,
    html_fragment,
    json_for_script,
    mime_bundle,
    to_dot,
    to_html,
    to_svg,
)
from thunder_viz.render.html import STATIC_DIR
from thunder_viz.render.mime import document_of
from thunder_viz.render.pack import is_packed, pack_document, packed_payload, unpack_document
from thunder_viz.session import Session

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot program is not installed")
SVG = "{http://www.w3.org/2000/svg}"
XLINK_TITLE = "{http://www.w3.org/1999/xlink}title"
STUB_BUNDLE = "window.ThunderExplorer = {mount: function (el, doc, opts) { el.textContent = doc.title; }};\n"


@pytest.fixture
def stub_static(tmp_path: Path) -> Path:
    """A static folder with a stand-in bundle whose text tries to end its script element."""
    (tmp_path / "standalone.js").write_text(STUB_BUNDLE + "var s = '</script><!-- x';\n", encoding="utf-8")
    (tmp_path / "explorer.css").write_text(".thunder-explorer { color: black } /* </style> */\n", encoding="utf-8")
    return tmp_path


@pytest.fixture(scope="module")
def evil_doc() -> dict:
    doc = document(evil_steps(), title=EVIL, executors=None)
    doc["error"] = {
        "type": "ValueError",
        "message": EVIL,
        "stage": "running",
        "user_frame": {"file": EVIL_FILE, "line": 3, "function": "evil", "code": "y = x * 2 # " + EVIL},
    }
    return doc


# --- DOT and SVG -------------------------------------------------------------------------
def _svg_texts(svg: str) -> tuple[list[str], list[str]]:
    root = ET.fromstring(svg)
    texts = ["".join(t.itertext()) for t in root.iter(f"{SVG}text")]
    titles = [a.get(XLINK_TITLE) for a in root.iter(f"{SVG}a") if a.get(XLINK_TITLE) is not None]
    return texts, titles


def test_dot_colours_nodes_by_executor_and_labels_edges_with_shapes():
    steps = dce_cse_steps()
    executed = next(s for s in steps if s["pass"] == "Transform for execution" and s["kind"] == "computation")
    dot = to_dot(executed)
    assert dot.startswith('digraph "s') and dot.rstrip().endswith("}")
    assert f'fillcolor="{executor_colour("torch")}"' in dot and f'fillcolor="{executor_colour("python")}"' in dot
    assert 'label="f32[3, 4]"' in dot
    assert '"input:x" -> ' in dot and '-> "output"' in dot
    first = to_dot(steps[2])
    assert f'fillcolor="{executor_colour(None)}"' in first and executor_colour("torch") not in first


def test_executor_colours_are_distinct_and_stable():
    known = {executor_colour(name) for name in ("torch", "torchcompile", "python", None)}
    assert len(known) == 4
    assert executor_colour("someone_elses") == executor_colour("someone_elses")


def test_dot_marks_the_diff():
    steps = dce_cse_steps()
    last = steps[-1]
    dot = to_dot(last)
    added = last["diff"]["added"][0]
    assert re.search(rf'"{added}" \[[^\n]*penwidth=2', dot)


def test_dot_draws_module_scopes_as_nested_clusters():
    step = [s for s in module_steps() if s["kind"] == "computation"][0]
    dot = to_dot(step)
    groups = {g["label"]: g["id"] for g in step["groups"]}
    outer = dot.index(f'subgraph "cluster_{groups["2"]}"')
    inner = dot.index(f'subgraph "cluster_{groups["2.0"]}"')
    assert outer < inner and 'label="2.0"' in dot


@pytest.mark.slow
@needs_dot
def test_fusions_are_clusters_of_their_members():
    steps = dce_cse_steps(("torchcompile",))
    executed = next(s for s in steps if s["pass"] == "Transform for execution" and s["kind"] == "computation")
    fusion = next(n for n in executed["nodes"] if n["fusion"])
    group = next(g for g in executed["groups"] if g["kind"] == "fusion")
    dot = to_dot(executed)
    cluster = dot[dot.index(f'subgraph "cluster_{group["id"]}"') :]
    cluster = cluster[: cluster.index("\n  }")]
    members = [n for n in executed["nodes"] if n["fused_into"] == fusion["id"]]
    assert all(f'"{m["id"]}" [' in cluster for m in members)
    assert f'label="{group["label"]} (torchcompile)"' in cluster
    assert f'"{fusion["id"]}"' not in dot  # expanded: the members stand for it
    assert f'"{members[0]["id"]}" -> "{members[1]["id"]}"' in dot  # inner edges join them
    collapsed = to_dot(executed, expand_fusions=False)
    assert f'"{fusion["id"]}" [' in collapsed and "cluster_" + group["id"] not in collapsed
    assert all(f'"{m["id"]}" [' not in collapsed for m in members)
    svg = to_svg(executed)
    root = ET.fromstring(svg)
    assert any(g.get("class") == "cluster" for g in root.iter(f"{SVG}g"))
    assert executor_colour("torchcompile") in svg


@needs_dot
def test_svg_shows_every_hostile_string_literally():
    hostile = [
        "a\\Nb",
        "end\\",
        'q"uote',
        "x&lt;y & z",
        "<script>alert(1)</script>",
        "two\nlines",
        "<img src=x onerror=alert(1)>",
    ]
    nodes = [
        {
            "id": f"n{k}", "uid": k, "op": text, "label": text, "executor": text, "fusion": False, "inputs": [],
            "outputs": [], "line": 1, "lineage": [], "origin": [], "decomposition": [], "group": None,
            "fused_into": None, "source": {"file": text, "line": 1, "function": "f", "module_path": None, "code": text},
        }
        for k, text in enumerate(hostile)
    ]  # fmt: skip
    step = {"id": "s0", "nodes": nodes, "edges": [], "inner_edges": [], "groups": [], "inputs": [], "diff": None}
    texts, titles = _svg_texts(to_svg(step))
    for text in hostile:
        lines = text.split("\n")
        assert all(line in texts for line in lines), (text, texts)
        assert any(title.startswith(f"{text} ({text})") for title in titles), (text, titles)
    svg = to_svg(step)
    assert "<script" not in svg and "<img" not in svg


@needs_dot
def test_svg_of_a_hostile_program_has_no_markup_from_it():
    steps = evil_steps()
    for step in steps:
        svg = to_svg(step)
        root = ET.fromstring(svg)
        tags = {el.tag for el in root.iter()}
        assert tags <= {
            f"{SVG}{t}" for t in ("svg", "g", "title", "text", "a", "polygon", "path", "ellipse", "polyline")
        }
        _, titles = _svg_texts(svg)
        if step["kind"] == "computation":
            assert any(EVIL_FILE in t for t in titles)


# --- HTML ------------------------------------------------------------------------------
class _Tags(HTMLParser):
    """Every element and attribute of a page, and the text of its scripts."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._in_script: dict | None = None
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.append((tag, attrs))
        if tag == "script":
            self._in_script = attrs
            self.scripts.append((attrs, ""))

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = None

    def handle_data(self, data):
        if self._in_script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)
        else:
            self.text.append(data)


def _parse(page: str) -> _Tags:
    parser = _Tags()
    parser.feed(page)
    parser.close()
    return parser


def test_snapshot_embeds_the_document_and_shows_hostile_strings_only_as_text(evil_doc, stub_static):
    page = to_html(evil_doc, static_dir=stub_static)
    parsed = _parse(page)
    tag_names = {t for t, _ in parsed.tags}
    assert tag_names <= {
        "html",
        "head",
        "meta",
        "title",
        "style",
        "body",
        "div",
        "script",
        "h2",
        "h3",
        "ol",
        "li",
        "pre",
        "p",
        "strong",
    }
    assert "img" not in tag_names
    assert not any(k.startswith("on") for _, attrs in parsed.tags for k in attrs)
    # Three scripts: the JSON, the bundle, the mount. The JSON one is the document, packed, intact.
    assert [a.get("type") for a, _ in parsed.scripts] == ["application/json", None, None]
    json_text = parsed.scripts[0][1]
    assert "<" not in json_text and ">" not in json_text and "&" not in json_text
    embedded = unpack_document(json.loads(json_text))
    assert embedded["title"] == EVIL and embedded["error"]["message"] == EVIL
    assert embedded["steps"] == json.loads(json.dumps(evil_doc["steps"]))
    # The bundle's own "</script" cannot end its element early.
    assert "var s = '<\\/script><\\!-- x';" in parsed.scripts[1][1]
    # The fallback lists every step and shows the last computation and backward sources as text.
    text = "".join(parsed.text)
    for step in evil_doc["steps"]:
        assert step["pass"] in text
    last = {s["kind"]: s for s in evil_doc["steps"] if s["kind"] != "prologue"}
    for step in last.values():
        assert step["source"] in text
    assert EVIL in text and EVIL_FILE in text
    # Raw, the hostile strings appear nowhere outside our own two scripts.
    outside = page.replace(parsed.scripts[1][1], "").replace(parsed.scripts[2][1], "")
    for raw in ("<script>alert", "<img src=x", "</script><script>", EVIL, EVIL_FILE):
        assert raw not in outside


def test_snapshot_allows_only_its_own_scripts_and_no_network(evil_doc, stub_static):
    page = to_html(evil_doc, static_dir=stub_static)
    parsed = _parse(page)
    csp = next(a["content"] for t, a in parsed.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    assert "default-src 'none'" in csp and "unsafe-eval" not in csp
    for _, code in parsed.scripts[1:]:
        digest = base64.b64encode(hashlib.sha256(code.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in csp
    assert not any(k in ("src", "href") for _, attrs in parsed.tags for k in attrs)
    assert "http://" not in page and "https://" not in page


def test_snapshot_is_static(stub_static):
    doc = document(dce_cse_steps(), title="f", executors={
        "available": ["torch"], "selected": ["torch"], "always": ["torch"], "unavailable": {}, "interactive": True,
        "reason": None})  # fmt: skip
    embedded = unpack_document(json.loads(_parse(to_html(doc, static_dir=stub_static)).scripts[0][1]))
    assert embedded["executors"]["interactive"] is False and "snapshot" in embedded["executors"]["reason"]
    assert doc["executors"]["interactive"] is True  # the caller's document is not changed


def test_json_for_script_escapes_what_could_end_a_script():
    doc = {"a": "</script><!--\u2028\u2029&>", "b": [1.5, None, True]}
    text = json_for_script(doc)
    assert not set("<>&\u2028\u2029") & set(text)
    assert json.loads(text) == doc
    with pytest.raises(ValueError):
        json_for_script({"x": float("nan")})


def test_missing_bundle_is_a_clear_error(tmp_path):
    with pytest.raises(BundleMissingError, match="standalone bundle .* is missing: build the front end"):
        to_html(document([], title="f"), static_dir=tmp_path)


def test_real_bundle_snapshot_refers_to_nothing_outside(evil_doc):
    if not (STATIC_DIR / "standalone.js").is_file():
        pytest.skip("the front end's standalone bundle is not built")
    page = to_html(evil_doc)
    parsed = _parse(page)
    assert not any(t in ("link", "iframe", "img") for t, _ in parsed.tags)
    assert not any(k in ("src", "href") for _, attrs in parsed.tags for k in attrs)
    assert "ThunderExplorer" in parsed.scripts[1][1]


def test_fragment_has_no_page_chrome(stub_static, evil_doc):
    fragment = html_fragment(evil_doc, static_dir=stub_static)
    assert not fragment.lstrip().startswith("<!DOCTYPE") and "<html" not in fragment
    assert fragment.startswith("<style>") and 'class="thunder-fallback"' in fragment
    a, b = html_fragment(evil_doc, static_dir=stub_static), fragment
    assert re.search(r'id="(thunder-[0-9a-f]+)"', a).group(1) != re.search(r'id="(thunder-[0-9a-f]+)"', b).group(1)


# --- mime bundle -----------------------------------------------------------------------
def test_mime_bundle_has_the_document_html_and_text(evil_doc, monkeypatch, stub_static):
    import thunder_viz.render.html as render_html

    monkeypatch.setattr(render_html, "STATIC_DIR", stub_static)
    bundle = mime_bundle(evil_doc)
    assert MIME_TYPE == "application/vnd.thunder.trace+json"
    # the document is stored once: packed in the snapshot, which the JSON entry points at
    assert bundle[MIME_TYPE] == {"schema": "thunder-trace", "version": 1, "encoding": "gzip-base64", "data_in": "text/html"}
    assert document_of(bundle) == json.loads(json.dumps(evil_doc))
    assert bundle["text/plain"].endswith(evil_doc["steps"][-1]["source"])
    assert bundle["text/plain"].startswith("ValueError: ")
    assert 'type="application/json"' in bundle["text/html"]
    monkeypatch.setattr(render_html, "STATIC_DIR", stub_static / "nowhere")
    without_html = mime_bundle(evil_doc)
    assert set(without_html) == {MIME_TYPE, "text/plain"}
    assert is_packed(without_html[MIME_TYPE]) and document_of(without_html) == json.loads(json.dumps(evil_doc))
    monkeypatch.setattr(render_html, "STATIC_DIR", stub_static)
    assert set(mime_bundle(evil_doc, include_html=False)) == {MIME_TYPE, "text/plain"}


def test_mime_bundle_of_a_document_without_steps():
    bundle = mime_bundle(document([], title="f"))
    assert bundle["text/plain"] == "thunder trace of f: no steps"


# --- in a browser ------------------------------------------------------------------------
@pytest.mark.browser
def test_snapshot_runs_in_chromium_without_running_hostile_strings(evil_doc, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    chromium = Path("/usr/lib/chromium/chromium")
    if not chromium.exists() or not (STATIC_DIR / "standalone.js").is_file():
        pytest.skip("needs Debian's chromium and the built standalone bundle")
    path = tmp_path / "snapshot.html"
    path.write_text(to_html(evil_doc), encoding="utf-8")
    dialogs, errors, requests = [], [], []

    def drive() -> str:
        with playwright.sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=str(chromium), args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]
            )
            try:
                page = browser.new_page()
                page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.on("request", lambda r: requests.append(r.url))
                page.goto(path.as_uri())
                page.wait_for_selector('.thunder-explorer[data-ready="true"]', timeout=10_000)
                assert page.evaluate("document.querySelector('.thunder-fallback').hidden") is True
                assert page.locator("img").count() == 0
                page.locator('[data-testid="step"][data-step-index="0"]').click()
                # The source pane fills in asynchronously, in chunks. (Not wait_for_function: its
                # polling evaluates a string, which the snapshot's CSP forbids, so it failed whenever
                # the first check came too early.)
                playwright.expect(page.locator('[data-testid="source"]')).to_contain_text("alert(1)", timeout=10_000)
                return page.locator('[data-testid="source"]').inner_text()
            finally:
                browser.close()

    # Its own thread: another test on this worker may hold a session-wide Playwright (an asyncio
    # loop) on the main thread, and the sync API refuses to nest inside one.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        source_text = pool.submit(drive).result(timeout=120)
    assert "</script><script>alert(1)</script>" in source_text
    assert dialogs == [] and errors == []
    assert all(url.startswith(("file:", "blob:", "data:")) for url in requests), requests


# --- the packed document -----------------------------------------------------------------
FIXTURES = Path(__file__).resolve().parents[2] / "js" / "test" / "fixtures"


def test_packing_round_trips_a_real_session_document():
    doc = json.loads((FIXTURES / "real-mlp.json").read_text())
    packed = pack_document(doc)
    assert is_packed(packed) and unpack_document(packed) == doc
    assert len(json.dumps(packed)) < len(json.dumps(doc)) / 10
    payload = packed_payload(doc)
    later = [s for s in payload["steps"][1:] if any(isinstance(n, list) or n.get("=") for n in s["nodes"])]
    assert later, "steps after the first of their kind share their unchanged nodes"


def test_items_unchanged_from_the_previous_step_are_packed_as_runs():
    """A stretch of items equal to consecutive items of the previous step of the kind is one
    ``[first, count]``; an item that changed between two such stretches splits them."""
    step = next(s for s in dce_cse_steps() if s["kind"] == "computation")
    first = {**step, "id": "s0", "index": 0, "diff": None}
    nodes = first["nodes"]
    assert len(nodes) >= 3
    changed = {**nodes[1], "label": "renamed"}
    second = {**first, "id": "s1", "index": 1, "nodes": [nodes[0], changed, *nodes[2:]]}
    doc = document([first, second], title="f")
    packed = packed_payload(doc)["steps"][1]["nodes"]
    assert packed[0] == [0, 1] and packed[1] == {"id": nodes[1]["id"], "label": "renamed", "=": 1}
    assert packed[2:] == [[2, len(nodes) - 2]]
    assert unpack_document(pack_document(doc)) == json.loads(json.dumps(doc))


def test_packing_a_live_session_document_whose_steps_share_their_value_objects():
    """Values are found by identity first while packing: the answer must not depend on it."""
    torch.manual_seed(0)
    jm = thunder.jit(torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2)))
    jm(torch.randn(3, 4, requires_grad=True)).sum().backward()
    doc = Session(jm).to_document()
    refs = [id(v) for step in doc["steps"] for n in step["nodes"] for v in n["inputs"]]
    assert len(set(refs)) < len(refs), "the steps share ValueRef objects"
    assert unpack_document(pack_document(doc)) == json.loads(json.dumps(doc))


def test_packing_keeps_values_that_python_thinks_equal_apart():
    steps = dce_cse_steps()
    node = steps[0]["nodes"][0]
    node["inputs"] = [{**node["inputs"][0], "repr": "1", "shape": [1]}, {**node["inputs"][0], "repr": "1", "shape": [True]}]
    doc = document(steps, title="f")
    assert unpack_document(pack_document(doc)) == json.loads(json.dumps(doc))


def test_each_step_body_is_a_line_of_its_own_and_one_line_texts_still_read():
    doc = json.loads((FIXTURES / "real-mlp.json").read_text())
    text = gzip.decompress(base64.b64decode(pack_document(doc)["data"])).decode()
    assert len(text.split("\n")) == len(doc["steps"]) + 1
    # a notebook saved before steps had lines of their own: the payload on one line
    one_line = json.dumps(packed_payload(doc)).encode()
    older = {**pack_document(doc), "data": base64.b64encode(gzip.compress(one_line)).decode()}
    assert unpack_document(older) == doc


def test_the_front_end_fixture_unpacks_to_its_document():
    # js/test/packed.test.ts unpacks the same file: both sides read one format.
    packed = json.loads((FIXTURES / "real-mlp.packed.json").read_text())
    assert unpack_document(packed) == json.loads((FIXTURES / "real-mlp.json").read_text())


def test_a_saved_gpt2_explorer_is_small():
    transformers = pytest.importorskip("transformers")
    import torch

    import thunder
    from thunder_viz.session import Session

    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=128, n_positions=64)
    torch.manual_seed(0)
    session = Session(thunder.jit(transformers.GPT2LMHeadModel(config)))
    session(torch.randint(0, 128, (1, 16)))
    doc = session.to_document(interactive=False, reason="saved")
    bundle = mime_bundle(doc)
    saved = sum(len(json.dumps(v)) for v in bundle.values())
    assert len(json.dumps(doc)) > 2_000_000 and saved < 500_000, (len(json.dumps(doc)), saved)
    assert document_of(bundle) == json.loads(json.dumps(doc))
