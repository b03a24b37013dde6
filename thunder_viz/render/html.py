"""A self-contained static HTML snapshot of a whole explorer session.

The page inlines the front end's standalone bundle (``thunder_viz/static/standalone.js``,
which defines ``window.ThunderExplorer.mount(element, document, options)``) and its
stylesheet, and embeds the trace document, packed (``thunder_viz/render/pack.py``), as JSON in a
``<script type="application/json" data-thunder-doc>``. It refers to nothing on the network and
needs no kernel. Without JavaScript (or where a viewer strips scripts, as GitHub does) a
fallback lists the steps and shows the last computation and backward sources as text.

Note [Embedding untrusted text in HTML]
Everything in a document comes from the user's program and is untrusted. It reaches the
page in two ways only: as JSON inside a script element, where ``<``, ``>``, ``&`` and U+2028/
U+2029 are written as ``\\u003c`` and so on (so no ``</script>`` or ``<!--`` can appear and the
text is still the same JSON), and as element text escaped by ``html.escape``. The page's
Content-Security-Policy allows only the page's own scripts (by hash), so even a mistake in
that escaping would not run injected script.

Layer: visualiser. Imports: thunder_viz.render.pack (nothing of thunder).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import re
import uuid
from pathlib import Path

from thunder_viz.render.pack import pack_document

__all__ = ["STATIC_DIR", "BundleMissingError", "SNAPSHOT_REASON", "html_fragment", "json_for_script", "packed_in_html", "to_html"]

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
BUNDLE_NAME = "standalone.js"
CSS_NAME = "explorer.css"
SNAPSHOT_REASON = "this is a static snapshot: there is no kernel to recompile with"

_JSON_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
_JSON_ESCAPE_RE = re.compile("[<>&\u2028\u2029]")


class BundleMissingError(FileNotFoundError):
    """The front end's standalone bundle is not built (``js/``: ``npm run build``)."""


def json_for_script(doc: dict) -> str:
    """``doc`` as JSON that can sit inside a ``<script>`` element (Note [Embedding untrusted text in HTML])."""
    text = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return _JSON_ESCAPE_RE.sub(lambda m: _JSON_ESCAPES[m.group()], text)


_DOC_SCRIPT_RE = re.compile(r'<script type="application/json" id="[^"]*" data-thunder-doc>(.*?)</script>', re.DOTALL)


def packed_in_html(page: str) -> dict:
    """The packed document a snapshot embeds (the inverse of the embedding in :func:`html_fragment`)."""
    found = _DOC_SCRIPT_RE.search(page)
    if found is None:
        raise ValueError("this HTML holds no thunder trace document")
    return json.loads(found.group(1))


def _inline_script(code: str) -> str:
    """Script text that cannot end its element early: ``</script`` and ``<!--`` are broken up
    (``<\\/script`` means the same inside a JavaScript string, regex or comment)."""
    code = re.sub(r"</(script)", r"<\\/\1", code, flags=re.IGNORECASE)
    return code.replace("<!--", "<\\!--")


def _inline_style(css: str) -> str:
    return re.sub(r"</(style)", r"<\\/\1", css, flags=re.IGNORECASE)


def _read_static(static_dir: Path | None) -> tuple[str, str]:
    directory = Path(static_dir) if static_dir is not None else STATIC_DIR
    bundle = directory / BUNDLE_NAME
    if not bundle.is_file():
        raise BundleMissingError(
            f"the explorer's standalone bundle {bundle} is missing: build the front end "
            "(cd js && npm ci && npm run build) or install a thunder_viz wheel, which ships it"
        )
    css_path = directory / CSS_NAME
    css = css_path.read_text(encoding="utf-8") if css_path.is_file() else ""
    return bundle.read_text(encoding="utf-8"), css


def _static_document(doc: dict) -> dict:
    """The document as a snapshot shows it: nothing can be recompiled (a reason already given is kept)."""
    executors = doc.get("executors")
    if not isinstance(executors, dict) or executors.get("interactive") is False:
        return doc
    return {**doc, "executors": {**executors, "interactive": False, "reason": SNAPSHOT_REASON}}


def _fallback(doc: dict) -> str:
    """The steps' sources (and the error) as escaped text, for viewers without JavaScript."""
    esc = html.escape
    parts = [f"<h2>{esc(str(doc.get('title', '')))}: what the thunder compiler did</h2>"]
    error = doc.get("error")
    if isinstance(error, dict):
        parts.append(f"<p><strong>{esc(str(error.get('type', '')))}</strong>: {esc(str(error.get('message', '')))}</p>")
        frame = error.get("user_frame")
        if isinstance(frame, dict):
            where = f"{frame.get('file', '')}:{frame.get('line', '')} in {frame.get('function', '')}"
            parts.append(f"<pre>{esc(where)}\n    {esc(str(frame.get('code', '')))}</pre>")
    steps = doc.get("steps", [])
    # the last computation and backward traces are what the program runs; the prologue's checks
    # are long (one per parameter) and only listed
    last_of_kind = {step.get("kind"): i for i, step in enumerate(steps) if step.get("kind") != "prologue"}
    items = []
    for i, step in enumerate(steps):
        heading = f"{step.get('index')}. {step.get('kind')}: {step.get('pass')} ({float(step.get('ms', 0.0)):.2f} ms)"
        source = f"\n<pre>{esc(str(step.get('source', '')))}</pre>" if last_of_kind.get(step.get("kind")) == i else ""
        items.append(f"<li>{esc(heading)}{source}</li>")
    if items:
        parts.append("<ol>\n" + "\n".join(items) + "\n</ol>")
    return "\n".join(parts)


def _mount_script(uid: str) -> str:
    # uid is ours ("thunder-" + hex): safe inside a JavaScript string.
    return (
        "(function () {\n"
        f'  var id = "{uid}";\n'
        '  var fallback = document.getElementById(id + "-fallback");\n'
        "  try {\n"
        '    var doc = JSON.parse(document.getElementById(id + "-doc").textContent);\n'
        '    window.ThunderExplorer.mount(document.getElementById(id + "-host"), doc, {interactive: false});\n'
        "    fallback.hidden = true;\n"
        "  } catch (e) {\n"
        '    var note = document.createElement("p");\n'
        '    note.textContent = "The explorer could not start (" + e + "); the steps are listed below.";\n'
        "    fallback.insertBefore(note, fallback.firstChild);\n"
        "  }\n"
        "})();"
    )


def _parts(doc: dict, static_dir: Path | None) -> tuple[str, str, str, list[str]]:
    """(style text, body html, title, inline scripts) of a snapshot."""
    bundle, css = _read_static(static_dir)
    uid = f"thunder-{uuid.uuid4().hex}"
    scripts = [_inline_script(bundle), _mount_script(uid)]
    body = (
        f'<div class="thunder-snapshot" id="{uid}">\n'
        f'<div class="thunder-snapshot-host" id="{uid}-host"></div>\n'
        f'<div class="thunder-fallback" id="{uid}-fallback">\n{_fallback(doc)}\n</div>\n'
        f'<script type="application/json" id="{uid}-doc" data-thunder-doc>'
        f"{json_for_script(pack_document(_static_document(doc)))}</script>\n"
        + "".join(f"<script>{s}</script>\n" for s in scripts)
        + "</div>"
    )
    return _inline_style(css), body, str(doc.get("title", "")), scripts


def html_fragment(doc: dict, *, static_dir: Path | None = None) -> str:
    """The snapshot as an HTML fragment, for a notebook's ``text/html`` output."""
    style, body, _, _ = _parts(doc, static_dir)
    return (f"<style>{style}</style>\n" if style else "") + body


def _csp(scripts: list[str]) -> str:
    hashes = " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(s.encode("utf-8")).digest()).decode("ascii") + "'" for s in scripts
    )
    return (
        f"default-src 'none'; script-src {hashes}; style-src 'unsafe-inline'; "
        "img-src data: blob:; font-src data:; worker-src blob:; base-uri 'none'; form-action 'none'"
    )


def to_html(doc: dict, *, static_dir: Path | None = None) -> str:
    """A complete, self-contained HTML page showing ``doc`` (a trace document) with no kernel.

    Raises ``BundleMissingError`` when the front end's standalone bundle is not built.
    """
    style, body, title, scripts = _parts(doc, static_dir)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(_csp(scripts))}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)} · thunder trace explorer</title>\n"
        f"<style>{style}</style>\n"
        f"</head>\n<body>\n{body}\n</body>\n</html>\n"
    )
