"""``thunder_viz.explore`` and ``thunder_viz.write_html``: the explorer of a jitted callable, in a
notebook or as a file.

Layer: thunder_viz entry points. Imports: thunder, thunder_viz.session, thunder_viz.render.html
and thunder_viz.widget (lazily, so ``import thunder_viz`` does not load ipywidgets).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import thunder
from thunder_viz.session import Session, session_for

if TYPE_CHECKING:
    from thunder_viz.widget import ExplorerWidget

__all__ = ["explore", "write_html"]


def _was_called(jitted: Any) -> bool:
    try:
        thunder.last_traces(jitted)
    except TypeError:
        return False
    return True


def _not_called(jitted: Any) -> TypeError:
    name = getattr(jitted, "__name__", type(jitted).__name__)
    return TypeError(
        f"{name!r} has not been called yet, so there is no compilation to explore: "
        f"call it first, or pass its inputs with explore({name}, args=(...))"
    )


def write_html(jitted_fn: Any, path: str | os.PathLike = "explorer.html") -> Path:
    """Writes the explorer of ``jitted_fn`` as one self-contained HTML file (no kernel, no network).

    It shows the last compilation and, when the function was explored or called through a
    session, the runs made there (``explore(jm)``, its reruns, then ``write_html(jm)``).

    Returns:
        The path written.

    Raises:
        TypeError: ``jitted_fn`` is not a jitted callable, or it was never called.
    """
    from thunder_viz.render.html import SNAPSHOT_REASON, to_html

    thunder.compile_data(jitted_fn)
    if not _was_called(jitted_fn):
        raise _not_called(jitted_fn)
    session = session_for(jitted_fn) or Session(jitted_fn)
    target = Path(path)
    target.write_text(to_html(session.to_document(interactive=False, reason=SNAPSHOT_REASON)), encoding="utf-8")
    return target


def explore(jitted_fn: Any, *, args: tuple | None = None, kwargs: dict | None = None) -> ExplorerWidget:
    """Shows what thunder did to ``jitted_fn`` in an explorer widget.

    Args:
        jitted_fn: what ``thunder.jit`` returned (function or module).
        args, kwargs: inputs to run it with (it is called once with them). Without them, the
            inputs of the last call are used for reruns: the ones a :class:`~thunder_viz.session.Session`
            recorded, else those of the last ordinary call made since ``thunder_viz`` was imported
            (``loss = jm(x); loss.backward(); explore(jm)``); if there are none, the last
            compilation is shown but the executor toggles are off.

    Returns:
        The :class:`~thunder_viz.widget.ExplorerWidget` (display it, or let the cell show it).

    Raises:
        TypeError: ``jitted_fn`` is not a jitted callable, or it was never called and no
            ``args`` were given (there is nothing to show yet).
    """
    from thunder_viz.widget import ExplorerWidget

    thunder.compile_data(jitted_fn)  # a clear TypeError for something that is not jitted
    if args is not None or kwargs is not None:
        session = Session(jitted_fn)
        try:
            session(*(args or ()), **(kwargs or {}))
        except Exception:  # shown in the explorer's error panel
            pass
        return ExplorerWidget(session)
    session = session_for(jitted_fn)
    if session is not None:
        return ExplorerWidget(session)
    recorded = thunder._last_inputs(jitted_fn)  # recorded since thunder_viz was imported
    called = _was_called(jitted_fn)
    if recorded is None and not called:
        raise _not_called(jitted_fn)
    session = Session(jitted_fn) if recorded is None else Session(jitted_fn, args=recorded[0], kwargs=recorded[1])
    if called:
        session.record_earlier_call()  # the row %thunder_jit shows for its first call
    return ExplorerWidget(session)
