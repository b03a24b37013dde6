"""Diffs between consecutive steps of real compilations: what each pass did."""

from __future__ import annotations

import pytest

from tests.viz.trace_programs import by_pass, dce_cse_steps, node_by_op, of_kind
from thunder_viz.graph import diff


@pytest.fixture(scope="module")
def steps():
    return dce_cse_steps()


def _dead_cos(steps):
    return node_by_op(by_pass(steps, "Interpretation"), "ltorch.cos")["id"]


def _duplicate_and_kept_mul(steps):
    dce = by_pass(steps, "Dead Code Elimination")
    muls = [n for n in dce["nodes"] if n["op"] == "ltorch.mul" and n["inputs"][0]["name"] == "x"]
    kept, duplicate = muls
    return duplicate["id"], kept["id"]


def test_dce_removes_dead_code(steps):
    d = by_pass(steps, "Dead Code Elimination")["diff"]
    assert d["previous"] == by_pass(steps, "Interpretation")["id"]
    assert d["removed"] == [_dead_cos(steps)]
    assert d["merged"] == {} and d["added"] == [] and d["rewritten"] == [] and d["fused"] == {}
    assert d["unchanged"] == len(by_pass(steps, "Dead Code Elimination")["nodes"])


def test_cse_removes_and_merges_the_repeated_op(steps):
    d = by_pass(steps, "Common Subexpression Elimination")["diff"]
    duplicate, kept = _duplicate_and_kept_mul(steps)
    assert d["removed"] == [duplicate]
    assert d["merged"] == {duplicate: kept}
    assert d["added"] == [] and d["rewritten"] == []


def test_executor_claims_are_rewrites_with_the_same_identity(steps):
    cse = by_pass(steps, "Common Subexpression Elimination")
    executed = by_pass(steps, "Transform for execution")
    d = executed["diff"]
    assert set(d["rewritten"]) == {n["id"] for n in cse["nodes"]}  # every op changed op name or executor
    assert d["removed"] == [] and d["added"] == [] and d["unchanged"] == 0
    assert [n["id"] for n in executed["nodes"]] == [n["id"] for n in cse["nodes"]]


def test_delete_last_used_adds_dels(steps):
    last = by_pass(steps, "Delete Last Used")
    d = last["diff"]
    dels = [n["id"] for n in last["nodes"] if n["op"] == "prims.python_del"]
    assert dels and d["added"] == dels
    assert d["removed"] == [] and d["rewritten"] == []
    assert d["unchanged"] == len(last["nodes"]) - len(dels)


def test_diff_of_a_step_with_itself_is_empty(steps):
    step = by_pass(steps, "Transform for execution")
    d = diff(step, step)
    assert (d["added"], d["removed"], d["rewritten"], d["fused"], d["merged"]) == ([], [], [], {}, {})
    assert d["unchanged"] == len(step["nodes"])


def test_diffs_stay_within_a_kind(steps):
    comp = of_kind(steps, "computation")
    assert comp[0]["diff"] is None
    assert [s["diff"]["previous"] for s in comp[1:]] == [s["id"] for s in comp[:-1]]
    assert steps[1]["diff"]["previous"] == steps[0]["id"]


def test_removed_ids_can_be_traced_back_to_the_first_step(steps):
    first = {n["id"] for n in by_pass(steps, "Interpretation")["nodes"]}
    for step in of_kind(steps, "computation")[1:]:
        assert set(step["diff"]["removed"]) <= first
        for node in step["nodes"]:
            assert set(node["origin"]) <= first


@pytest.mark.slow
def test_fusion_reports_what_it_absorbed():
    steps = dce_cse_steps(("torchcompile",))
    cse = by_pass(steps, "Common Subexpression Elimination")
    executed = by_pass(steps, "Transform for execution")
    d = executed["diff"]
    fusion = next(n for n in executed["nodes"] if n["fusion"])
    ops = [n["id"] for n in cse["nodes"] if n["op"].startswith("ltorch.")]
    assert d["fused"] == {fusion["id"]: ops}
    assert d["removed"] == [] and d["added"] == []  # absorbed ops are not removed; the fusion is not "added"
    ret = node_by_op(cse, "prims.python_return")["id"]
    assert d["rewritten"] == [ret]  # claimed by the python executor
    # Once fused, the next pass keeps the fusion as it is.
    after = by_pass(steps, "Delete Last Used")["diff"]
    assert after["fused"] == {} and after["rewritten"] == [] and after["removed"] == []
