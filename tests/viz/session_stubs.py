"""Stand-ins for thunder_viz.graph and thunder_viz.render.mime while those are being written.

Used by the session, widget and magic tests only when the real modules are missing, so that
those tests exercise the session and widget logic either way. They follow docs/trace-schema.md
loosely (enough fields for the assertions); the real serializer has its own tests.
"""

from __future__ import annotations

import importlib
import json
import sys
import types

import thunder


def _stub_steps(jitted) -> list[dict]:
    steps = []
    kinds = [("prologue", t) for t in thunder.last_prologue_traces(jitted)]
    kinds += [("computation", t) for t in thunder.last_traces(jitted)]
    for index, (kind, trace) in enumerate(kinds):
        nodes = []
        for bsym in trace.bound_symbols:
            ex = bsym.sym.executor
            nodes.append(
                {
                    "id": f"n{bsym.uid}",
                    "op": bsym.sym.name,
                    "executor": None if ex is None else ex.name,
                    "fusion": bool(getattr(bsym.sym, "_is_fusion", False)),
                }
            )
        steps.append(
            {
                "id": f"s{index}",
                "index": index,
                "kind": kind,
                "pass": trace.provenance.pass_name if trace.provenance else "",
                "source": trace.python(print_depth=1),
                "nodes": nodes,
                "edges": [],
                "groups": [],
            }
        )
    return steps


def _stub_document(*, title, steps, runs, executors=None, error=None) -> dict:
    return {"schema": "thunder-trace", "version": 1, "title": title, "steps": steps, "runs": runs,
            "executors": executors, "error": error}  # fmt: skip


def _stub_mime_bundle(doc) -> dict:
    return {
        "application/vnd.thunder.trace+json": doc,
        "text/html": "<div>snapshot</div>",
        "text/plain": "\n".join(step["source"] for step in doc["steps"][-1:]),
    }


def _has(module: str, name: str) -> bool:
    try:
        return hasattr(importlib.import_module(module), name)
    except ImportError:
        return False


def real(module: str) -> bool:
    """Whether ``module`` is the real one (not a stand-in of this file)."""
    found = sys.modules.get(module)
    return found is not None and getattr(found, "__file__", None) is not None


def install(monkeypatch) -> None:
    """Puts the stand-ins in place of the modules that are not there yet."""
    import thunder_viz

    if not _has("thunder_viz.graph", "steps_from_jitted"):
        graph = types.ModuleType("thunder_viz.graph")
        graph.steps_from_jitted = _stub_steps
        graph.document = _stub_document
        graph.validate_document = lambda doc: json.dumps(doc) and None
        monkeypatch.setitem(sys.modules, "thunder_viz.graph", graph)
        monkeypatch.setattr(thunder_viz, "graph", graph, raising=False)
    if not _has("thunder_viz.render.mime", "mime_bundle"):
        render = types.ModuleType("thunder_viz.render")
        mime = types.ModuleType("thunder_viz.render.mime")
        mime.mime_bundle = _stub_mime_bundle
        render.mime = mime
        if not _has("thunder_viz.render", "__name__"):
            monkeypatch.setitem(sys.modules, "thunder_viz.render", render)
        monkeypatch.setitem(sys.modules, "thunder_viz.render.mime", mime)


def validate(doc: dict) -> None:
    """The real validator when it exists (and the document must be JSON either way)."""
    json.dumps(doc)
    from thunder_viz import graph

    graph.validate_document(doc)
