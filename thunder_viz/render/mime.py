"""The mime bundle of a trace document, for Jupyter displays and saved notebooks.

``application/vnd.thunder.trace+json`` is what the JupyterLab extension renders with no kernel;
``text/html`` is the static snapshot, for viewers without the extension (left out when the front
end's bundle is not built); ``text/plain`` is the last step's source. The document is stored once,
packed (``thunder_viz/render/pack.py``): in the snapshot when there is one (the JSON entry then
says ``"data_in": "text/html"``), else in the JSON entry. A 2-layer GPT-2 session is 7 MB as
plain JSON and about 170 kB packed.

Layer: visualiser. Imports: thunder_viz.render.html, thunder_viz.render.pack.
"""

from __future__ import annotations

from thunder_viz.render.html import BundleMissingError, html_fragment, packed_in_html
from thunder_viz.render.pack import ENCODING, is_packed, pack_document, unpack_document

__all__ = ["MIME_TYPE", "document_of", "mime_bundle", "plain_text"]

MIME_TYPE = "application/vnd.thunder.trace+json"


def plain_text(doc: dict) -> str:
    """What a text-only viewer shows: the last step's source, or the error."""
    steps = doc.get("steps") or []
    lines = []
    error = doc.get("error")
    if isinstance(error, dict):
        lines.append(f"{error.get('type', 'Error')}: {error.get('message', '')}")
    if steps:
        last = steps[-1]
        lines.append(f"# thunder trace of {doc.get('title', '')}: step {last.get('index')} ({last.get('pass')})")
        lines.append(str(last.get("source", "")))
    elif not lines:
        lines.append(f"thunder trace of {doc.get('title', '')}: no steps")
    return "\n".join(lines)


def mime_bundle(doc: dict, *, include_html: bool = True) -> dict:
    """``{mime type: data}`` for IPython's ``_repr_mimebundle_`` and saved notebooks.

    The ``text/html`` snapshot inlines the front end (about 60 kB): pass ``include_html=False``
    to leave it out.
    """
    bundle: dict = {"text/plain": plain_text(doc)}
    if include_html:
        try:
            bundle["text/html"] = html_fragment(doc)
        except BundleMissingError:
            pass  # the JupyterLab extension and text/plain still show it
    if "text/html" in bundle:
        bundle[MIME_TYPE] = {"schema": doc.get("schema"), "version": doc.get("version"), "encoding": ENCODING, "data_in": "text/html"}
    else:
        bundle[MIME_TYPE] = pack_document(doc)
    return bundle


def document_of(bundle: dict) -> dict:
    """The plain document a mime bundle (or a saved output's data) holds, packed or not."""
    entry = bundle[MIME_TYPE]
    if not is_packed(entry):
        return entry
    if "data" not in entry:
        entry = packed_in_html(bundle[entry["data_in"]])
    return unpack_document(entry)
