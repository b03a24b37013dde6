"""PyTorch's own op database (``common_methods_invocations.op_db``) through ``thunder.jit``: every
sample input of an op, against eager, forward and (for differentiable ops) gradients, with the
checks of ``benchmarks/opdb_coverage.py``.

What each op is expected to do is data: ``tests/opdb_expected.json``, written by
``python -m benchmarks.opdb_coverage --write-expected tests/opdb_expected.json`` (and again with
``--grad``) from a real run: per op and dtype, ``"pass"`` or the outcome and the first failure.
The test fails when an op gives a silently wrong result (never allowed), when an op expected to
pass does not, and when an op expected to fail now passes (update the data: the table in the
README is written from the same run).

By default a fixed sample of about a tenth of the database runs; the whole database carries
``pytest.mark.opdb_full`` and runs with ``-m opdb_full`` or ``THUNDER_OPDB_FULL=1``.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import zlib

import pytest
import torch

pytest.importorskip("expecttest")  # torch's test database imports it

EXPECTED = json.loads((pathlib.Path(__file__).parent / "opdb_expected.json").read_text())
TIMEOUT_S = 180


def _sampled(name: str) -> bool:
    return zlib.crc32(name.encode()) % 10 == 0


CASES = [
    pytest.param(name, key, id=f"{name}-{key}", marks=() if _sampled(name) else pytest.mark.opdb_full)
    for name, by_key in sorted(EXPECTED.items())
    for key in sorted(by_key)
]


@pytest.fixture(autouse=True)
def _full_database_on_request(request):
    """Skips ``opdb_full`` cases unless asked for (see the module docstring)."""
    if request.node.get_closest_marker("opdb_full") is None or os.environ.get("THUNDER_OPDB_FULL") == "1":
        return
    if "opdb_full" not in (request.config.option.markexpr or ""):
        pytest.skip("the whole op database: run with -m opdb_full or THUNDER_OPDB_FULL=1")


@pytest.fixture(scope="module")
def ops():
    from benchmarks.opdb_coverage import _database, _op_name

    return {_op_name(op): op for op in _database()}


def _alarm(*_):
    raise TimeoutError(f"over {TIMEOUT_S} s")


@pytest.mark.parametrize("name, key", CASES)
def test_op_matches_eager(ops, name: str, key: str):
    from benchmarks.opdb_coverage import check

    dtype_name, _, grad = key.partition("/")
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIMEOUT_S)
    try:
        outcome, _, detail = check(ops[name], getattr(torch, dtype_name), grad == "grad")
    except TimeoutError as e:
        outcome, detail = "timeout", str(e)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    expected = EXPECTED[name][key]
    assert outcome != "wrong", f"{name} ({key}) gives a silently wrong result: {detail}"
    if expected == "pass":
        assert outcome == "pass", f"{name} ({key}) passed every sample before, now {outcome}: {detail}"
    else:
        assert outcome != "pass", (
            f"{name} ({key}) now passes (it was expected to fail: {expected[1]}); rerun "
            "python -m benchmarks.opdb_coverage --write-expected tests/opdb_expected.json and the README table"
        )
