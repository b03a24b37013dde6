"""thunder_viz: see what the thunder compiler did (filled in by the visualiser issue)."""

# --- sessions, explorer widget and %thunder_jit (thunder_viz/session.py, widget.py, api.py, magic.py) ---
import thunder as _thunder
from thunder_viz.api import explore, write_html
from thunder_viz.profile import profile
from thunder_viz.session import Session

# explore(jitted) after an ordinary call can rerun it (Note [Recording the last inputs] in thunder).
_thunder._record_last_inputs(True)


def load_ipython_extension(ipython) -> None:
    """``%load_ext thunder_viz``: registers ``%thunder_jit`` and ``%%thunder_jit``."""
    from thunder_viz.display import register_formatters
    from thunder_viz.magic import ThunderJitMagics

    ipython.register_magics(ThunderJitMagics)
    register_formatters(ipython)  # traces and sessions display as explorers in this shell


# --- end of sessions, explorer widget and %thunder_jit ---

# --- graph model, diff and renderers (thunder_viz/graph.py, thunder_viz/render/) ---
from thunder_viz.graph import diff, document, steps_from_jitted, steps_from_traces, validate_document  # noqa: E402

# --- end of graph model, diff and renderers ---


# --- rich displays of traces and sessions in IPython (thunder_viz/display.py) ---
def _register_displays() -> None:
    from thunder_viz.display import register_formatters

    register_formatters()  # no-op outside IPython


_register_displays()

# --- end of rich displays ---
