"""Packaging of the JupyterLab extension: the wheel installs the prebuilt bundle, no Node needed.

Layer: tests. Builds the wheel with pip (hatchling; the committed bundle makes
hatch-jupyter-builder skip the Node build) and reads it; asks ``jupyter labextension list`` about
the environment the tests run in (CI installs the project with pip first).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LABEXT = REPO / "thunder_viz" / "labextension"
NAME = "thunder-explorer"
SHARE = f"share/jupyter/labextensions/{NAME}"
MAX_BUNDLE_BYTES = 150 * 1024  # all of static/: the explorer core, the plugin, its CSS


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)],
        check=True,
        capture_output=True,
        text=True,
    )
    (path,) = out.glob("*.whl")
    with zipfile.ZipFile(path) as zf:
        yield zf


def shared(wheel: zipfile.ZipFile) -> dict[str, str]:
    """Files the wheel installs under share/jupyter/labextensions/<name>/, by their path there."""
    found = {}
    for name in wheel.namelist():
        _, sep, rest = name.partition(f".data/data/{SHARE}/")
        if sep:
            found[rest] = name
    return found


def test_the_wheel_installs_the_prebuilt_extension_and_install_json(wheel):
    files = shared(wheel)
    assert {"package.json", "install.json", "static/style.js"} <= set(files)
    assert any(re.fullmatch(r"static/remoteEntry\.[0-9a-f]+\.js", f) for f in files)
    meta = json.loads(wheel.read(files["package.json"]))
    assert meta["name"] == NAME
    build = meta["jupyterlab"]["_build"]
    for key in ("load", "extension", "mimeExtension", "style"):
        assert key in build
    assert f"static/{build['load'].removeprefix('static/')}" in files
    install = json.loads(wheel.read(files["install.json"]))
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["name"]
    assert install == {**install, "packageManager": "python", "packageName": project}


def test_the_wheel_holds_both_packages_and_the_front_end_bundles(wheel):
    names = set(wheel.namelist())
    assert {"thunder/__init__.py", "thunder_viz/__init__.py", "thunder_viz/display.py"} <= names
    assert {
        "thunder_viz/static/widget.js",
        "thunder_viz/static/standalone.js",
        "thunder_viz/static/explorer.css",
    } <= names
    assert not any(n.startswith("thunder_viz/labextension/") for n in names)  # shared data only, once
    assert not any(n.startswith(("tests/", "js/")) for n in names)


def test_the_committed_bundle_is_small_and_loads_nothing_from_the_network():
    static = sorted((LABEXT / "static").glob("*.js"))
    assert static, "thunder_viz/labextension is not built (cd js && npm run build:labextension)"
    total = sum(p.stat().st_size for p in static)
    assert total < MAX_BUNDLE_BYTES, f"labextension bundle is {total / 1024:.1f} KiB"
    for p in static:
        text = p.read_text(encoding="utf-8")
        urls = set(re.findall(r"""https?://[^\s"'`)]+""", text)) - {"http://www.w3.org/2000/svg"}
        assert not urls, f"{p.name} refers to {urls}"
        assert "importScripts(" not in text and "fetch(" not in text


def test_the_committed_bundles_are_compiled_whole_when_they_load():
    # Note [Compile on load] in js/build.mjs: else the first render compiles the code it runs
    scripts = [*(REPO / "thunder_viz" / "static").glob("*.js"), *(LABEXT / "static").glob("*.js")]
    code = [p for p in scripts if p.name != "style.js"]  # webpack's list of CSS imports
    assert len(code) >= 3
    for p in code:
        assert p.read_text(encoding="utf-8").startswith("//# allFunctionsCalledOnLoad\n"), p.name


def test_the_committed_package_json_points_at_committed_files():
    meta = json.loads((LABEXT / "package.json").read_text())
    build = meta["jupyterlab"]["_build"]
    assert (LABEXT / build["load"]).is_file()
    assert meta["jupyterlab"]["mimeExtension"] and meta["jupyterlab"]["extension"]


def test_jupyter_lists_the_extension_enabled_and_ok():
    pytest.importorskip("jupyterlab", reason="JupyterLab (the test extra) is not installed in this environment")
    out = subprocess.run(
        [sys.executable, "-m", "jupyterlab.labextensions", "list"],
        capture_output=True,
        text=True,
        check=True,
    )
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
    line = next((ln for ln in text.splitlines() if NAME in ln and "v0." in ln), None)
    assert line is not None, f"{NAME} is not installed in this environment (pip install -e .):\n{text}"
    assert "enabled" in line and "OK" in line, line
