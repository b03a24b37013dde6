"""Renderers of trace documents: DOT and SVG (Graphviz), the static HTML snapshot, the mime bundle.

Layer: visualiser. Imports: thunder_viz.graph (and the ``graphviz`` package, lazily, for SVG).
"""

from thunder_viz.render.dot import executor_colour, to_dot, to_svg
from thunder_viz.render.html import BundleMissingError, html_fragment, json_for_script, to_html
from thunder_viz.render.mime import MIME_TYPE, mime_bundle

__all__ = [
    "MIME_TYPE",
    "BundleMissingError",
    "executor_colour",
    "html_fragment",
    "json_for_script",
    "mime_bundle",
    "to_dot",
    "to_html",
    "to_svg",
]
