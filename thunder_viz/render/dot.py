"""A step of a trace document as Graphviz DOT text, and as SVG through the ``dot`` program.

Nodes are filled with their executor's colour, fusions are clusters of their members (with
the fusion's name and executor as the cluster label), module scopes are nested clusters, and
edges carry the value's dtype and shape. Every string from the user's program reaches DOT
only through ``_quote`` (a DOT string whose text Graphviz shows literally in every output).

Layer: visualiser. Imports: the ``graphviz`` Python package (lazily, for SVG only).
"""

from __future__ import annotations

import zlib

__all__ = ["EXECUTOR_COLOURS", "executor_colour", "to_dot", "to_svg"]

# Fill colours by executor; others get one from _PALETTE by a stable hash of their name.
EXECUTOR_COLOURS = {
    "torch": "#cfe2f3",
    "torchcompile": "#fce5cd",
    "python": "#eeeeee",
    "nvfuser": "#d9ead3",
    "cudnn": "#ead1dc",
}
_UNCLAIMED = "#ffffff"  # before the execution transform
_PALETTE = ("#d0e0e3", "#fff2cc", "#d9d2e9", "#f4cccc", "#c9daf8", "#e6b8af")
_DIFF_PEN = {"added": "#2e7d32", "rewritten": "#ef6c00", "fused": "#6a1b9a"}


def executor_colour(name: str | None) -> str:
    """The fill colour of nodes run by executor ``name`` (white when not claimed yet)."""
    if name is None:
        return _UNCLAIMED
    colour = EXECUTOR_COLOURS.get(name)
    if colour is None:
        colour = _PALETTE[zlib.crc32(name.encode()) % len(_PALETTE)]
    return colour


def _quote(text: str, *, tooltip: bool = False) -> str:
    """``text`` as a DOT string that Graphviz shows literally.

    Graphviz decodes HTML entities in labels, and expands backslash escapes (``\\N`` is the
    node's name, ``\\n`` a line break) once in labels but twice in tooltips: so ``&`` becomes
    ``&amp;``, a backslash is doubled (quadrupled in tooltips), ``"`` is escaped, and line
    breaks become ``\\n`` in labels and ``&#10;`` in tooltips (checked against Graphviz 2.43
    by tests/viz/test_render.py).
    """
    text = str(text).replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")
    text = text.replace("\\", "\\\\\\\\" if tooltip else "\\\\").replace('"', '\\"').replace("&", "&amp;")
    text = text.replace("\n", "&#10;" if tooltip else "\\n")
    return f'"{text}"'


def _shape_text(ref: dict) -> str:
    dtype, shape = ref.get("dtype"), ref.get("shape")
    if shape is None:
        return dtype or ""
    return f"{dtype or ''}[{', '.join(str(d) for d in shape)}]"


def _attrs(**attrs: str) -> str:
    return "[" + ", ".join(f"{k}={v}" for k, v in attrs.items()) + "]"


def _diff_marks(step: dict) -> dict[str, str]:
    d = step.get("diff")
    if not d:
        return {}
    marks = {nid: "added" for nid in d["added"]}
    marks.update((nid, "rewritten") for nid in d["rewritten"])
    marks.update((nid, "fused") for nid in d["fused"])
    return marks


def to_dot(step: dict, *, expand_fusions: bool = True, max_label: int = 60) -> str:
    """DOT text of one step (a Step of docs/trace-schema.md).

    With ``expand_fusions`` each fusion is a cluster of its members joined by the step's
    ``inner_edges``; without, a fusion is one node and its members are not drawn.
    """
    nodes = step["nodes"]
    expanded = {n["fused_into"] for n in nodes if n.get("fused_into")} if expand_fusions else set()
    shown = [n for n in nodes if n["id"] not in expanded and (expand_fusions or not n.get("fused_into"))]
    groups = {g["id"]: g for g in step["groups"]}
    children: dict[str | None, list[str]] = {}
    for g in step["groups"]:
        if g["kind"] == "fusion" and g.get("node") not in expanded:
            continue
        children.setdefault(g["parent"] if g["parent"] in groups else None, []).append(g["id"])
    in_group: dict[str | None, list[dict]] = {}
    for n in shown:
        gid = n["group"]
        while gid is not None and groups[gid]["kind"] == "fusion" and groups[gid].get("node") not in expanded:
            gid = groups[gid]["parent"]
        in_group.setdefault(gid, []).append(n)
    marks = _diff_marks(step)
    by_id = {n["id"]: n for n in nodes}

    out = [
        f"digraph {_quote(step['id'])} {{",
        "  graph [rankdir=TB, fontname=Helvetica, fontsize=10, newrank=true];",
        '  node [shape=box, style="rounded,filled", fontname=Helvetica, fontsize=10];',
        '  edge [fontname=Helvetica, fontsize=8, color="#555555"];',
    ]

    def node_line(n: dict, pad: str) -> str:
        outs = ", ".join(o["name"] for o in n["outputs"])
        label = _clip(n["label"], max_label) + (f"\n{_clip(outs, max_label)}" if outs else "")
        attrs = {
            "id": _quote(n["id"]),
            "label": _quote(label),
            "fillcolor": _quote(executor_colour(n["executor"])),
            "tooltip": _quote(_tooltip(n), tooltip=True),
        }
        mark = marks.get(n["id"])
        if mark is not None:
            attrs.update(color=_quote(_DIFF_PEN[mark]), penwidth="2")
        return f"{pad}{_quote(n['id'])} {_attrs(**attrs)};"

    def emit(gid: str | None, pad: str) -> None:
        for n in in_group.get(gid, []):
            out.append(node_line(n, pad))
        for child in children.get(gid, []):
            g = groups[child]
            out.append(f"{pad}subgraph {_quote('cluster_' + child)} {{")
            if g["kind"] == "fusion":
                fusion = by_id.get(g.get("node"), {})
                label = f"{g['label']} ({fusion.get('executor') or 'fusion'})"
                colour = executor_colour(fusion.get("executor"))
                out.append(f"{pad}  graph [label={_quote(label)}, style=filled, fillcolor={_quote(colour + '80')}];")
            elif g["kind"] == "module":
                out.append(f'{pad}  graph [label={_quote(g["label"])}, style=dashed, color="#999999"];')
            else:
                out.append(f"{pad}  graph [label={_quote(g['label'])}, style=dotted];")
            emit(child, pad + "  ")
            out.append(f"{pad}}}")

    emit(None, "  ")
    ends = {end for key in ("edges", "inner_edges") for e in step.get(key, ()) for end in (e["source"], e["target"])}
    pseudo = [(f"input:{ref['name']}", ref["name"]) for ref in step["inputs"]] + [("output", "output")]
    for name, label in pseudo:
        if name in ends:
            attrs = _attrs(label=_quote(label), shape="ellipse", style="filled", fillcolor=_quote("#ffffff"))
            out.append(f"  {_quote(name)} {attrs};")
    visible = {n["id"] for n in shown}
    edges = [e for e in step["edges"] if e["source"] not in expanded and e["target"] not in expanded]
    if expanded:
        edges += step.get("inner_edges", [])
    for e in edges:
        src, dst = e["source"], e["target"]
        if (src in by_id and src not in visible) or (dst in by_id and dst not in visible):
            continue
        label = _shape_text(e)
        out.append(
            f"  {_quote(src)} -> {_quote(dst)} {_attrs(label=_quote(label), tooltip=_quote(e['value'], tooltip=True))};"
        )
    out.append("}")
    return "\n".join(out) + "\n"


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _tooltip(n: dict) -> str:
    src = n.get("source")
    where = f"\n{src['file']}:{src['line']}: {src['code']}" if src else ""
    return f"{n['op']} ({n['executor'] or 'no executor'}){where}"


def to_svg(step: dict, **dot_options) -> str:
    """SVG text of one step, laid out by Graphviz's ``dot`` program."""
    try:
        import graphviz
    except ImportError as e:  # pragma: no cover - graphviz is a dependency of thunder_viz
        raise RuntimeError("to_svg needs the graphviz Python package: pip install graphviz") from e
    source = graphviz.Source(to_dot(step, **dot_options))
    try:
        return source.pipe(format="svg", encoding="utf-8")
    except graphviz.ExecutableNotFound as e:
        raise RuntimeError(
            "to_svg needs Graphviz's dot program on PATH: install Graphviz (apt-get install graphviz, "
            "brew install graphviz or conda install graphviz), or use to_dot for the text"
        ) from e
