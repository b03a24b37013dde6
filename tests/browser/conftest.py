"""Browser-test layer: a real JupyterLab server and Debian's headless Chromium, driven by Playwright.

May import: pytest, playwright's sync API and the standard library. It never imports thunder or
thunder_viz itself: the kernels the server starts do, exactly as a user's would.

The fixtures follow docs in /work/shared/JUPYTER-TESTING.md: one server per pytest process (so
``pytest -n 2`` gives each xdist worker its own server, port and root directory), the test
notebooks copied into a temporary root (autosave rewrites them), temporary settings and
workspaces, the news toast off, and the server terminated (kernels first) when the session ends.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = Path(__file__).resolve().parent / "notebooks"
SCREENSHOTS = REPO / "artifacts" / "screenshots"
CHROMIUM = "/usr/lib/chromium/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
# CI sets this so that a missing browser fails the run instead of skipping the browser tests.
REQUIRE_BROWSER = os.environ.get("THUNDER_VIZ_REQUIRE_BROWSER") == "1"

# JupyterLab settings written before the server starts: no news toast, no update check, and every
# cell attached to the DOM (the default "contentVisibility" windowing skips layout of offscreen
# outputs, which would make what the tests see depend on scrolling).
LAB_SETTINGS = {
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


# Skips start with this, so that the summary (tests/conftest.py) can count and name them.
SKIP_PREFIX = "browser test skipped: "


def _unavailable(reason: str) -> None:
    if REQUIRE_BROWSER:
        pytest.fail(f"browser tests required (THUNDER_VIZ_REQUIRE_BROWSER=1) but {reason}")
    pytest.skip(SKIP_PREFIX + reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LabServer:
    """A running ``jupyter lab`` owned by the test session."""

    url: str
    root: Path
    log: Path
    proc: subprocess.Popen = field(repr=False)

    def api(self, path: str, method: str = "GET") -> object:
        req = urllib.request.Request(self.url + path, method=method)
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-n:] if self.log.exists() else ""

    def shutdown_kernels(self) -> None:
        try:
            for kernel in self.api("/api/kernels"):
                self.api(f"/api/kernels/{kernel['id']}", method="DELETE")
        except (urllib.error.URLError, OSError, TypeError):
            pass


def _wait_until_up(server: LabServer, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {server.proc.returncode}:\n{server.log_tail()}")
        try:
            server.api("/api/status")
            return
        except (urllib.error.URLError, OSError):
            time.sleep(0.25)
    raise RuntimeError(f"jupyter lab did not answer /api/status in {timeout:.0f} s:\n{server.log_tail()}")


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LabServer]:
    """Start JupyterLab on a free port with the test notebooks in a temporary root directory."""
    if not _has_module("jupyterlab"):
        _unavailable("jupyterlab is not installed")
    base = tmp_path_factory.mktemp("lab")
    root, settings, workspaces, runtime = (base / d for d in ("root", "settings", "workspaces", "runtime"))
    for d in (root, settings, workspaces, runtime):
        d.mkdir()
    for nb in NOTEBOOKS.glob("*.ipynb"):
        shutil.copy(nb, root / nb.name)
    for rel, value in LAB_SETTINGS.items():
        path = settings / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))

    port = _free_port()
    env = dict(os.environ)
    env.update(
        JUPYTER_RUNTIME_DIR=str(runtime),
        JUPYTER_CONFIG_DIR=str(base / "config"),
        IPYTHONDIR=str(base / "ipython"),
        PYTHONPATH=os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p),
    )
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser",
        f"--port={port}", "--ip=127.0.0.1", "--allow-root",
        "--ServerApp.token=", "--ServerApp.password=",
        "--ServerApp.disable_check_xsrf=True",  # only for the fixture's own REST calls (kernel shutdown)
        f"--ServerApp.root_dir={root}",
        "--LabApp.expose_app_in_browser=True",
        f"--LabApp.workspaces_dir={workspaces}",
        f"--LabApp.user_settings_dir={settings}",
        "--LabApp.news_url=",
    ]  # fmt: skip
    log = base / "jupyter.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    server = LabServer(url=f"http://127.0.0.1:{port}", root=root, log=log, proc=proc)
    try:
        _wait_until_up(server)
        yield server
    finally:
        server.shutdown_kernels()
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    """Debian's Chromium under Playwright (never ``playwright install``)."""
    if not Path(CHROMIUM).exists():
        _unavailable(f"{CHROMIUM} is missing (apt-get install -y chromium)")
    if not _has_module("playwright"):
        _unavailable("playwright is not installed")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


# ---------------------------------------------------------------------------------------------
# Notebook helpers

# One JS expression for the notebook panel JupyterLab shows now.
_PANEL = "window.jupyterapp && window.jupyterapp.shell.currentWidget"

_NOTEBOOK_READY = f"""(path) => {{
  const panel = {_PANEL};
  if (!panel || !panel.context || panel.context.path !== path || !panel.sessionContext) return false;
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  return !!kernel && kernel.status === 'idle' && panel.content.widgets.length > 0;
}}"""

_RUN_FINISHED = f"""() => {{
  const panel = {_PANEL};
  const kernel = panel.sessionContext.session && panel.sessionContext.session.kernel;
  if (!kernel || kernel.status !== 'idle') return false;
  const cells = panel.content.model.toJSON().cells.filter(c => c.cell_type === 'code');
  const failed = cells.some(c => c.outputs.some(o => o.output_type === 'error'));
  return failed || cells.every(c => c.execution_count !== null);
}}"""

_OUTPUTS = f"""() => {{
  const panel = {_PANEL};
  return panel.content.model.toJSON().cells.filter(c => c.cell_type === 'code').map(c => c.outputs);
}}"""


@dataclass
class NotebookPage:
    """A Playwright page showing one notebook in JupyterLab, with what the page did on the side."""

    page: object
    path: str
    dialogs: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)

    def run_all(self, timeout_s: float = 180.0) -> None:
        """Run every cell and wait for the kernel to finish; fail with the traceback of a failed cell."""
        self.page.evaluate("() => window.jupyterapp.commands.execute('notebook:run-all-cells')")
        self.page.wait_for_function(_RUN_FINISHED, timeout=timeout_s * 1000, polling=250)
        errors = [o for outs in self.outputs() for o in outs if o.get("output_type") == "error"]
        if errors:
            e = errors[0]
            raise AssertionError(f"a notebook cell failed: {e['ename']}: {e['evalue']}\n" + "\n".join(e["traceback"]))

    def outputs(self) -> list[list[dict]]:
        """The nbformat outputs of each code cell, in order."""
        return self.page.evaluate(_OUTPUTS)

    def wait_kernel_idle(self, timeout_s: float = 60.0) -> None:
        self.page.wait_for_function(
            f"() => {{ const k = ({_PANEL}).sessionContext.session.kernel; return k && k.status === 'idle'; }}",
            timeout=timeout_s * 1000,
        )

    def screenshot(self, name: str, target: object | None = None) -> Path:
        """Save a screenshot of ``target`` (a locator) or the whole page to artifacts/screenshots/."""
        return save_screenshot(target if target is not None else self.page, name)


def save_screenshot(target: object, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    target.screenshot(path=str(path))
    return path


@contextlib.contextmanager
def opened_explorer(browser: object, path: Path) -> Iterator[object]:
    """A 1500x1000 page showing the standalone explorer page at ``path``, mounted; on leaving, no page error."""
    from benchmarks.bench_explorer_model import MOUNT

    context = browser.new_context(viewport={"width": 1500, "height": 1000}, device_scale_factor=1)
    try:
        page = context.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(path.as_uri())
        page.evaluate(MOUNT)
        yield page
        assert errors == []
    finally:
        context.close()


def open_notebook(browser: object, server: LabServer, name: str, timeout_s: float = 120.0) -> NotebookPage:
    """Open ``name`` (a fresh copy, so runs never see a previous test's autosave) and wait for an idle kernel."""
    fresh = f"{Path(name).stem}-{time.monotonic_ns()}.ipynb"
    shutil.copy(NOTEBOOKS / name, server.root / fresh)
    context = browser.new_context(viewport={"width": 1500, "height": 1100}, device_scale_factor=1)
    page = context.new_page()
    nb = NotebookPage(page=page, path=fresh)
    page.on("dialog", lambda d: (nb.dialogs.append(f"{d.type}: {d.message}"), d.dismiss()))
    page.on("console", lambda m: nb.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: nb.page_errors.append(str(e)))
    page.set_default_timeout(30_000)
    page.goto(f"{server.url}/lab/tree/{fresh}?reset")
    page.wait_for_function(_NOTEBOOK_READY, arg=fresh, timeout=timeout_s * 1000, polling=250)
    page.evaluate("() => window.jupyterapp.shell.collapseLeft()")  # the file browser: room for outputs
    return nb


def close_notebook(nb: NotebookPage) -> None:
    """Shut the notebook's kernel down (each test opens its own; idle ones would pile up) and close the page."""
    try:
        nb.page.evaluate(
            f"async () => {{ const p = {_PANEL}; if (p && p.sessionContext) await p.sessionContext.shutdown(); }}"
        )
    except Exception:  # the page may already be gone; the server's shutdown catches the kernel then
        pass
    nb.page.context.close()


@pytest.fixture
def notebook_opener(lab_server: LabServer, browser: object) -> Iterator[object]:
    """``open(name) -> NotebookPage``; every page opened is closed after the test."""
    opened: list[NotebookPage] = []

    def _open(name: str) -> NotebookPage:
        nb = open_notebook(browser, lab_server, name)
        opened.append(nb)
        return nb

    yield _open
    for nb in opened:
        close_notebook(nb)
