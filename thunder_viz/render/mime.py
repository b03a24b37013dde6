"""The mime bundle of a trace document, for Jupyter displays and saved notebooks.

``application/vnd.thunder.trace+json`` is the document itself (rendered by the JupyterLab
extension with no kernel); ``text/html`` is the static snapshot, for viewers without the
extension (left out when the front end's bundle is not built); ``text/plain`` is the last
step's source.

Layer: visualiser. Imports: thunder_viz.render.html.
"""

from __future__ import annotations

from thunder_viz.render.html import BundleMissingError, html_fragment

__all__ = ["MIME_TYPE", "mime_bundle", "plain_text"]

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

    The ``text/html`` snapshot repeats the document and inlines the front end (about 50 kB):
    pass ``include_html=False`` to keep big notebooks small.
    """
    bundle = {MIME_TYPE: doc, "text/plain": plain_text(doc)}
    if include_html:
        try:
            bundle["text/html"] = html_fragment(doc)
        except BundleMissingError:
            pass  # the JupyterLab extension and text/plain still show it
    return bundle
