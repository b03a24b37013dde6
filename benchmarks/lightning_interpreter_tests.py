"""Runs lightning-thunder's own interpreter tests (``thunder/tests/test_interpreter.py``) against this
project's ``thunder``, on the running Python, and prints the pass rate.

The test file is read from a lightning-thunder checkout given on the command line (nothing of it is kept in
this repository); its one import of lightning-thunder's test framework (``IS_WINDOWS``) is replaced by a
constant, in a temporary copy. Tests that need lightning-thunder's benchmark models or example modules fail
here: they measure those imports, not the interpreter, and are listed apart.

    python -m benchmarks.lightning_interpreter_tests /path/to/lightning-thunder
    python -m benchmarks.lightning_interpreter_tests /path/to/lightning-thunder --rev HEAD   # a bare mirror
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys
import tempfile

_TEST = "thunder/tests/test_interpreter.py"
# Failures that come from lightning-thunder modules this project does not have, not from the interpreter.
_MISSING_MODULES = ("thunder.tests", "thunder.benchmarks", "thunder.core.baseutils")


def _read_test(repo: pathlib.Path, rev: str | None) -> str:
    if rev is None:
        return (repo / _TEST).read_text()
    return subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{_TEST}"], check=True, capture_output=True, text=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=pathlib.Path, help="a lightning-thunder checkout (or bare git mirror with --rev)")
    parser.add_argument("--rev", default=None, help="read the test file from this git revision")
    args = parser.parse_args()
    source = _read_test(args.repo, args.rev).replace("from thunder.tests.framework import IS_WINDOWS", "IS_WINDOWS = False")
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "test_lightning_interpreter.py"
        path.write_text(source)
        result = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rf", "--tb=line", str(path)],
            capture_output=True, text=True, cwd=tmp, env={**os.environ, "COLUMNS": "1000"},
        )  # fmt: skip
    out = result.stdout
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|xfailed|xpassed|error)", out.splitlines()[-1])}
    failed = [line for line in out.splitlines() if line.startswith("FAILED")]
    missing = [line for line in failed if any(m in line for m in _MISSING_MODULES)]
    passed, nfailed = counts.get("passed", 0), counts.get("failed", 0)
    ran = passed + nfailed
    print(f"Python {sys.version.split()[0]}: {passed} of {ran} passed ({100 * passed / max(ran, 1):.0f}%), "
          f"{counts.get('skipped', 0)} skipped; {len(missing)} of the failures need lightning-thunder modules")  # fmt: skip
    for line in failed:
        print(" ", line[:200])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
