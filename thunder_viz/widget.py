"""The explorer widget: an anywidget whose front end is the built ``thunder_viz/static/widget.js``.

Python owns the synced state: ``doc`` (the trace document of ``docs/trace-schema.md``, packed as
saved outputs store it: ``thunder_viz/render/pack.py``; 12-layer GPT-2 is 19.5 MB plain and 0.51 MB
packed), ``status`` (``"ready"``, ``"running…"``, or ``"error: …"``) and ``explorer_id`` (also its display id). The front
end asks for a rerun with the custom message ``{"type": "rerun", "executors": [...]}``; the widget
recompiles and reruns through its :class:`~thunder_viz.session.Session` and replaces ``doc``; and for a
profile with ``{"type": "profile"}`` (the document then carries it).

Its display also carries the document itself (``application/vnd.thunder.trace+json``), a
static HTML snapshot and the trace source as text, so a saved notebook still shows something
without a kernel. Each rerun updates that display (one display id per widget), so the saved
notebook holds the latest runs; the front end keeps the explorer the user was looking at.

Layer: thunder_viz front-end glue. Imports: anywidget, traitlets, IPython.display (lazily),
thunder_viz.session, thunder_viz.render.pack, thunder_viz.render.mime (lazily).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anywidget
import traitlets

from thunder_viz.render.pack import pack_document
from thunder_viz.session import Run, Session

__all__ = ["ExplorerWidget"]

STATIC = Path(__file__).parent / "static"
ESM_PATH = STATIC / "widget.js"
CSS_PATH = STATIC / "explorer.css"

TRACE_MIME = "application/vnd.thunder.trace+json"
STATUS_READY = "ready"
STATUS_RUNNING = "running…"
STATUS_PROFILING = "running… (profiling)"

# Shown until the front-end bundle is built: the document as text, and the status.
_PLACEHOLDER_ESM = """
function render({ model, el }) {
  const root = document.createElement("div");
  root.className = "thunder-explorer";
  const status = document.createElement("div");
  status.dataset.testid = "status";
  const pre = document.createElement("pre");
  const update = () => {
    status.textContent = model.get("status");
    pre.textContent = JSON.stringify(model.get("doc"), null, 1);
  };
  model.on("change:doc", update);
  model.on("change:status", update);
  update();
  root.append(status, pre);
  el.append(root);
  return () => {
    model.off("change:doc", update);
    model.off("change:status", update);
  };
}
export default { render };
"""

SAVED_REASON = "saved output: no kernel to recompile with"


def _read(path: Path, fallback: str) -> str:
    """The file's text, read when a widget is made (so a freshly built bundle is picked up)."""
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return fallback


class ExplorerWidget(anywidget.AnyWidget):
    """The trace explorer of one :class:`Session`.

    Args:
        session: the session to show and rerun.
        interactive, reason: override whether the executor toggles work (by default they do
            when the session knows the inputs of the last call).
    """

    doc = traitlets.Dict().tag(sync=True)  # packed (see the module docstring); ``document`` is the plain one
    status = traitlets.Unicode(STATUS_READY).tag(sync=True)
    explorer_id = traitlets.Unicode().tag(sync=True)  # the views of one widget share one explorer

    # Properties, not class constants: anywidget reads them once per instance, so a widget made
    # after the front end is built uses the bundle instead of the placeholder.
    @property
    def _esm(self) -> str:
        return _read(ESM_PATH, _PLACEHOLDER_ESM)

    @property
    def _css(self) -> str:
        return _read(CSS_PATH, "")

    def __init__(self, session: Session, *, interactive: bool | None = None, reason: str | None = None, **kwargs):
        self.session = session
        self._interactive = interactive
        self._reason = reason
        self._displayed = False
        self._saved: tuple[dict, dict] | None = None
        self.document = self._document()
        super().__init__(doc=self._packed(), status=STATUS_READY, explorer_id=uuid.uuid4().hex, **kwargs)
        self.on_msg(self._on_custom_message)

    def _document(self) -> dict:
        self._saved = None
        return self.session.to_document(interactive=self._interactive, reason=self._reason)

    def _packed(self) -> dict:
        """The live document packed: its saved form's data (packed once for this and the display's
        snapshot, render/pack.py) with the live executors beside it."""
        packed = pack_document(self.saved_document())
        if isinstance(self.document.get("executors"), dict):
            packed["executors"] = self.document["executors"]
        return packed

    def rerun(self, executors: Sequence[Any]) -> Run:
        """Recompiles with ``executors``, reruns with the last inputs and shows the new steps and run."""
        return self._busy(STATUS_RUNNING, lambda: self.session.rerun(executors))

    def profile(self, calls: int = 3) -> Any:
        """Profiles the function with the last inputs (:func:`thunder_viz.profile`) and shows where
        its time and memory went."""
        return self._busy(STATUS_PROFILING, lambda: self.session.profile(calls=calls))

    def _busy(self, status: str, work: Callable[[], Any]) -> Any:
        """Runs ``work`` with ``status`` shown, then shows the document it changed (or the error, and raises it)."""
        self.status = status
        try:
            result = work()
            self.document = self._document()
            self.doc = self._packed()
        except Exception as exc:
            self.status = f"error: {exc}" if str(exc) else f"error: {type(exc).__name__}"
            raise
        self.status = STATUS_READY
        self._update_display()
        return result

    def _on_custom_message(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "profile":
            with contextlib.suppress(Exception):  # the status says what failed; the kernel carries on
                self.profile()
            return
        if not isinstance(content, dict) or content.get("type") != "rerun":
            return
        executors = content.get("executors")
        if not isinstance(executors, list) or not all(isinstance(e, str) for e in executors):
            self.status = f"error: a rerun needs a list of executor names, got {executors!r}"
            return
        try:
            self.rerun(executors)
        except Exception:  # the status says what failed; the kernel carries on
            pass

    def saved_document(self) -> dict:
        """The document as a saved output shows it: the same, but with nothing to recompile with."""
        if self._saved is not None and self._saved[0] is self.document:
            return self._saved[1]
        doc = dict(self.document)  # the steps are shared, never changed
        if isinstance(doc.get("executors"), dict):
            doc["executors"] = {**doc["executors"], "interactive": False, "reason": SAVED_REASON}
        self._saved = (self.document, doc)  # one object: packed once (render/pack.py)
        return doc

    def _repr_mimebundle_(self, **kwargs: Any) -> tuple[dict, dict] | None:
        widget = super()._repr_mimebundle_(**kwargs)
        if widget is None:
            return None
        widget_data, widget_metadata = widget
        saved = self.saved_document()
        try:
            from thunder_viz.render.mime import mime_bundle
        except ImportError:  # the renderers are optional for the live widget
            data, metadata = {TRACE_MIME: saved}, {}
        else:
            bundle = mime_bundle(saved)
            data, metadata = bundle if isinstance(bundle, tuple) else (bundle, {})
        return {**widget_data, **data}, {**widget_metadata, **metadata}

    def _ipython_display_(self) -> None:
        """Displays the widget under its display id, which each rerun updates (see the module docstring)."""
        from IPython.display import display

        bundle = self._repr_mimebundle_()
        if bundle is None:
            return
        data, metadata = bundle
        display(data, metadata=metadata, raw=True, display_id=self.explorer_id)
        self._displayed = True

    def _update_display(self) -> None:
        if not self._displayed:
            return
        from IPython.display import update_display

        bundle = self._repr_mimebundle_()
        if bundle is not None:
            data, metadata = bundle
            update_display(data, metadata=metadata, raw=True, display_id=self.explorer_id)
