"""The README's "which models pass" table, from a real run of the model zoo's tests.

Run: ``python -m benchmarks.zoo_table [--out benchmarks/zoo_results.md] [--readme] [-n 2]``. It runs
``tests/test_model_zoo.py`` (the full matrix, ``zoo_full`` included) under pytest, collects each
test's outcome, and writes a Markdown table: one row per model, one column per call mode, each
cell ``eval / train`` (the forward in ``eval()``, forward + backward in ``train()``), then the
``generate()`` columns. ``✓`` passed, ``✗n`` failed as the known failure ``n`` (a strict xfail;
reasons below the table), ``FAIL`` failed unexpectedly, ``XPASS`` passed although listed as a
known failure (the list needs updating), ``·`` does not apply. With ``--readme`` the table also
replaces the one in README.md (between its ``<!-- zoo table -->`` markers).
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys

import pytest

from tests import zoo

_ZOO_TEST = re.compile(r"test_zoo_call_matches_eager\[(?P<name>\w+)-(?P<mode>\w+)-(?P<phase>eval|train)\]")
_GENERATE_TEST = re.compile(r"(?P<test>test_generate_matches_eager|test_generate_symbolic_values_matches_eager)"
                            r"\[(?P<name>\w+)\]")  # fmt: skip
GENERATE_COLUMNS = {"test_generate_matches_eager": "generate", "test_generate_symbolic_values_matches_eager":
                    "generate (symbolic values)"}  # fmt: skip


class _Outcomes:
    """A pytest plugin that keeps each test's outcome: passed, xfail (with its reason), xpass, failed."""

    def __init__(self):
        self.outcomes: dict[str, tuple[str, str]] = {}

    def pytest_runtest_logreport(self, report):
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            reason = getattr(report, "wasxfail", "")
            if report.outcome == "skipped" and reason:
                outcome = "xfail"
            elif report.outcome == "passed" and hasattr(report, "wasxfail"):
                outcome = "xpass"
            elif report.outcome == "failed" and "XPASS(strict)" in str(report.longrepr):
                outcome, reason = "xpass", str(report.longrepr)
            else:
                outcome = report.outcome
            self.outcomes[report.nodeid.split("::")[-1]] = (outcome, reason.removeprefix("reason: "))


def run_zoo(extra_args: list[str]) -> dict[str, tuple[str, str]]:
    """Outcomes of every test in tests/test_model_zoo.py, by test id."""
    plugin = _Outcomes()
    args = ["-q", "-p", "no:cacheprovider", "-m", "zoo_full or not zoo_full", "tests/test_model_zoo.py", *extra_args]
    pytest.main(args, plugins=[plugin])
    return plugin.outcomes


def table(outcomes: dict[str, tuple[str, str]]) -> str:
    """The Markdown table and its footnotes."""
    reasons: dict[str, int] = {}
    cells: dict[tuple[str, str], dict[str, str]] = {}

    def mark(outcome: str, reason: str) -> str:
        if outcome == "passed":
            return "✓"
        if outcome == "xfail":
            return f"✗{reasons.setdefault(reason, len(reasons) + 1)}"
        return {"xpass": "XPASS", "failed": "FAIL"}.get(outcome, outcome)

    for test_id, (outcome, reason) in outcomes.items():
        if m := _ZOO_TEST.fullmatch(test_id):
            cells.setdefault((m["name"], m["mode"]), {})[m["phase"]] = mark(outcome, reason)
        elif m := _GENERATE_TEST.fullmatch(test_id):
            cells.setdefault((m["name"], GENERATE_COLUMNS[m["test"]]), {})["call"] = mark(outcome, reason)
    columns = [*zoo.CALL_MODES, *GENERATE_COLUMNS.values()]
    lines = ["| model | " + " | ".join(columns) + " |", "|" + "---|" * (len(columns) + 1)]
    for name in zoo.ZOO:
        row = []
        for column in columns:
            got = cells.get((name, column))
            if got is None:
                row.append("·")
            elif "call" in got:
                row.append(got["call"])
            else:
                row.append(f"{got.get('eval', '·')} / {got.get('train', '·')}")
        lines.append(f"| {name} | " + " | ".join(row) + " |")
    passed = sum(o == "passed" for o, _ in outcomes.values())
    summary = f"{passed} of the {len(outcomes)} tests of tests/test_model_zoo.py pass ({datetime.date.today()})"
    if passed == len(outcomes):
        lines += ["", summary + "."]
    else:
        lines += ["", summary + "; the other ones are the known failures:", ""]
        lines += [f"{n}. {reason}" for reason, n in reasons.items()]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="benchmarks/zoo_results.md")
    parser.add_argument("-n", default="0", help="pytest-xdist workers (0: none)")
    parser.add_argument("--readme", action="store_true", help="also write the table into README.md")
    opts = parser.parse_args()
    outcomes = run_zoo(["-n", opts.n] if opts.n != "0" else [])
    if not outcomes:
        sys.exit("no zoo test ran")
    text = table(outcomes)
    with open(opts.out, "w") as f:
        f.write(text)
    if opts.readme:
        write_into_readme(text)
    print(text)


def write_into_readme(text: str, path: str = "README.md") -> None:
    """Replaces what README.md holds between ``<!-- zoo table -->`` and ``<!-- /zoo table -->``."""
    start, end = "<!-- zoo table -->", "<!-- /zoo table -->"
    with open(path) as f:
        readme = f.read()
    if start not in readme or end not in readme:
        sys.exit(f"{path} has no {start} ... {end} section")
    before, rest = readme.split(start, 1)
    after = rest.split(end, 1)[1]
    with open(path, "w") as f:
        f.write(f"{before}{start}\n{text}{end}{after}")


if __name__ == "__main__":
    main()
