"""JupyterLab's start time in Chromium with the thunder-explorer extension enabled vs disabled.

    python benchmarks/bench_labextension_start.py [--runs 7]

Two JupyterLab servers run side by side on the same environment; one has the extension disabled
(``jupyter labextension disable thunder-explorer`` in its own config directory). Page loads
alternate between them; each records, from navigation start, when ``window.jupyterapp`` has
started and when it has restored its layout. Prints the medians and the extension's bundle size.

Layer: benchmark. Imports playwright and the standard library; never thunder.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/lib/chromium/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"]  # fmt: skip
NAME = "thunder-explorer"

# Runs in the page before JupyterLab's scripts: times `started` and `restored` of the app.
TIMER = """
(() => {
  const poll = () => {
    const app = window.jupyterapp;
    if (!app) return setTimeout(poll, 5);
    app.started.then(() => { window.__started = performance.now(); });
    app.restored.then(() => { window.__restored = performance.now(); });
  };
  poll();
})();
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(base: Path, disabled: bool) -> tuple[subprocess.Popen, str]:
    for d in ("root", "settings/@jupyterlab/apputils-extension", "ws", "rt", "cfg"):
        (base / d).mkdir(parents=True, exist_ok=True)
    (base / "settings/@jupyterlab/apputils-extension/notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(base / "cfg"), JUPYTER_RUNTIME_DIR=str(base / "rt"))
    if disabled:
        subprocess.run([sys.executable, "-m", "jupyterlab.labextensions", "disable", "--level=user", NAME],
                       env=env, check=True, capture_output=True)  # fmt: skip
    port = free_port()
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", f"--port={port}", "--ip=127.0.0.1", "--allow-root",
           "--ServerApp.token=", "--ServerApp.password=", f"--ServerApp.root_dir={base / 'root'}",
           "--LabApp.expose_app_in_browser=True", f"--LabApp.workspaces_dir={base / 'ws'}",
           f"--LabApp.user_settings_dir={base / 'settings'}"]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(240):
        try:
            urllib.request.urlopen(url + "/api/status", timeout=2)
            return proc, url
        except OSError:
            time.sleep(0.25)
    raise RuntimeError("jupyter lab did not start")


def load(browser, url: str) -> tuple[float, float, bool, list[str]]:
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    context.add_init_script(TIMER)
    page = context.new_page()
    external: list[str] = []
    page.on("request", lambda r: external.append(r.url) if not r.url.startswith(url) else None)
    page.goto(f"{url}/lab?reset")
    page.wait_for_function("() => window.__restored !== undefined", timeout=120_000)
    started, restored = page.evaluate("() => [window.__started, window.__restored]")
    loaded = page.evaluate("() => window.jupyterapp.hasPlugin('thunder-explorer:commands')")
    context.close()
    return started, restored, loaded, external


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    runs = parser.parse_args().runs
    from playwright.sync_api import sync_playwright

    static = REPO / "thunder_viz" / "labextension" / "static"
    size = sum(p.stat().st_size for p in static.glob("*.js"))
    print(f"labextension bundle: {size / 1024:.1f} KiB in {len(list(static.glob('*.js')))} files")
    with tempfile.TemporaryDirectory() as tmp:
        servers = {
            "enabled": start_server(Path(tmp) / "on", disabled=False),
            "disabled": start_server(Path(tmp) / "off", disabled=True),
        }
        results: dict[str, list[tuple[float, float]]] = {k: [] for k in servers}
        try:
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                for _proc, url in servers.values():  # warm-up: the server's first page and caches
                    load(browser, url)
                for _ in range(runs):
                    for key, (_, url) in servers.items():
                        started, restored, loaded, external = load(browser, url)
                        assert loaded == (key == "enabled"), f"{key}: extension loaded={loaded}"
                        assert not external, f"requests outside the server: {external}"
                        results[key].append((started, restored))
                browser.close()
        finally:
            for proc, _ in servers.values():
                proc.terminate()
                proc.wait(timeout=15)
    for key, values in results.items():
        s = statistics.median(v[0] for v in values)
        r = statistics.median(v[1] for v in values)
        print(f"{key:9s} started {s:7.0f} ms   restored {r:7.0f} ms   (median of {len(values)})")


if __name__ == "__main__":
    main()
