"""Rich displays of traces, trace histories and explorer sessions in IPython and Jupyter.

``thunder/`` must not import ``thunder_viz``, so traces cannot carry a ``_repr_mimebundle_`` of
their own. Instead, importing ``thunder_viz`` (``import thunder_viz`` or ``%load_ext thunder_viz``)
registers IPython *mimebundle formatters* on the running shell's display formatter for:

- a ``TraceCtx`` (``display(thunder.last_traces(jf)[-1])``): one step;
- a non-empty list or tuple whose items are all ``TraceCtx`` (``thunder.last_traces(jf)``): the
  steps in order, each with its diff from the one before;
- a :class:`~thunder_viz.session.Session`: every step of its last compilation and its runs.

Each display's bundle is ``application/vnd.thunder.trace+json`` (the document, rendered as the
read-only explorer by the JupyterLab extension, with or without a kernel), ``text/html`` (the
static snapshot, for nbviewer, GitHub, VS Code) and ``text/plain`` (the trace source). Other lists
are left alone (the formatter returns None and IPython falls back to its usual displays). Outside
IPython nothing is registered and IPython is not imported.

Layer: thunder_viz front-end glue. Imports: thunder (the trace type), thunder_viz.graph,
thunder_viz.session, thunder_viz.render.mime.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import thunder
from thunder.core.trace import TraceCtx
from thunder_viz import graph
from thunder_viz.render.mime import mime_bundle
from thunder_viz.session import Session, available_executors, unavailable_executors

__all__ = ["register_formatters", "session_bundle", "trace_document", "traces_bundle", "unregister_formatters"]

DISPLAY_REASON = "a displayed trace: there is no function to recompile (use thunder_viz.explore to change executors)"
SESSION_REASON = "a displayed session: use thunder_viz.explore to change executors"


def _kind(trace: TraceCtx) -> str:
    name = getattr(trace, "name", "") or ""
    if name.startswith("prologue"):
        return "prologue"
    if "backward" in name:
        return "backward"
    return "computation"


def _title(trace: TraceCtx) -> str:
    fn = getattr(trace, "fn", None)
    return getattr(fn, "__name__", None) or getattr(trace, "name", None) or "trace"


def _executors(steps: Sequence[dict]) -> dict:
    """What a trace display can say about executors: which ones its ops run on; never interactive."""
    available = available_executors()
    used = {node["executor"] for step in steps for node in step["nodes"] if node.get("executor")}
    always = [e.name for e in thunder.get_always_executors()]
    return {
        "available": available,
        "selected": [e for e in available if e in used or e in always],
        "always": always,
        "unavailable": unavailable_executors(),
        "interactive": False,
        "reason": DISPLAY_REASON,
    }


def trace_document(traces: TraceCtx | Sequence[TraceCtx]) -> dict:
    """The trace document of one trace, or of consecutive traces of one kind (each made from the one before)."""
    seq = [traces] if isinstance(traces, TraceCtx) else list(traces)
    if not seq or not all(isinstance(t, TraceCtx) for t in seq):
        raise TypeError("trace_document: expected a TraceCtx or a non-empty sequence of them")
    steps = graph.steps_from_traces(seq, _kind(seq[-1]))
    return graph.document(steps, title=_title(seq[-1]), executors=_executors(steps))


def _is_trace_sequence(obj: Any) -> bool:
    return isinstance(obj, list | tuple) and len(obj) > 0 and all(isinstance(t, TraceCtx) for t in obj)


def traces_bundle(obj: Any) -> dict | None:
    """The mime bundle of a trace or a list of traces; None for anything else (IPython then falls back)."""
    if not (isinstance(obj, TraceCtx) or _is_trace_sequence(obj)):
        return None
    try:
        return mime_bundle(trace_document(obj))
    except Exception:  # a display must never fail the cell: IPython shows the usual repr instead
        return None


def session_bundle(session: Any) -> dict | None:
    """The mime bundle of a session: its steps and runs, read-only."""
    if not isinstance(session, Session):
        return None
    try:
        return mime_bundle(session.to_document(interactive=False, reason=SESSION_REASON))
    except Exception:
        return None


_REGISTERED = ((TraceCtx, traces_bundle), (list, traces_bundle), (tuple, traces_bundle), (Session, session_bundle))


def _shell(ip: Any = None) -> Any:
    if ip is not None:
        return ip
    ipython = sys.modules.get("IPython")  # not imported: no shell is running, nothing to do
    if ipython is None:
        return None
    return ipython.get_ipython()


def register_formatters(ip: Any = None) -> bool:
    """Registers the formatters on ``ip`` (default: the running shell). Idempotent; False outside IPython."""
    shell = _shell(ip)
    if shell is None or getattr(shell, "display_formatter", None) is None:
        return False
    formatter = shell.display_formatter.mimebundle_formatter
    for type_, fn in _REGISTERED:
        if formatter.type_printers.get(type_) in (None, fn):
            formatter.for_type(type_, fn)
    return True


def unregister_formatters(ip: Any = None) -> None:
    """Removes what :func:`register_formatters` added (formatters of others are kept)."""
    shell = _shell(ip)
    if shell is None or getattr(shell, "display_formatter", None) is None:
        return
    formatter = shell.display_formatter.mimebundle_formatter
    for type_, fn in _REGISTERED:
        if formatter.type_printers.get(type_) is fn:
            formatter.pop(type_)
