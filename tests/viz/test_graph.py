"""The graph model on real traces: lines, identity, values, groups, fusions, the document."""

from __future__ import annotations

import dataclasses
import json
import math
import re

import pytest
import torch

import thunder
from tests.viz.trace_programs import (
    EVIL,
    dce_cse_steps,
    evil_steps,
    module_steps,
    node_by_op,
    of_kind,
)
from thunder.core.trace import TraceProvenance, from_trace
from thunder.executors.torchex import _INLINE_PRINTERS
from thunder_viz.graph import (
    DocumentError,
    _printed,
    document,
    steps_from_jitted,
    steps_from_traces,
    torch_name,
    validate_document,
)


def _printed_at(step: dict, node: dict) -> str:
    return step["source"].split("\n")[node["line"] - 1]


_PRINTED_INLINE = {f"torch_{sym.name}" for sym in _INLINE_PRINTERS}


def _assert_lines_print_nodes(steps: list[dict]) -> None:
    for step in steps:
        for node in step["nodes"]:
            line = _printed_at(step, node)
            if node["fused_into"] is not None:
                fusion = next(n for n in step["nodes"] if n["id"] == node["fused_into"])
                assert node["line"] == fusion["line"]
            elif node["op"] == "prims.python_return":
                assert line.strip().startswith("return"), (step["pass"], line)
            elif node["op"] == "prims.python_del":
                assert line.strip().startswith("del "), (step["pass"], line)
            elif node["op"].startswith("prims.") and step["kind"] == "prologue":
                assert not line.lstrip().startswith("#") and line.strip(), (step["pass"], line)
            else:
                assert not line.lstrip().startswith("#"), (step["pass"], node["op"], line)
                if node["op"] not in _PRINTED_INLINE:  # Note [Shape prims printed inline] in thunder.executors.torchex
                    assert node["op"] + "(" in line, (step["pass"], node["op"], line)
                for out in node["outputs"]:
                    assert out["name"] in line


def test_every_node_line_is_the_line_that_prints_it():
    _assert_lines_print_nodes(dce_cse_steps())
    _assert_lines_print_nodes(module_steps())


def test_lines_survive_odd_file_names_and_strings():
    steps = evil_steps()
    _assert_lines_print_nodes(steps)
    check = node_by_op(steps[0], "prims.check_value")
    assert "alert(1)" in _printed_at(steps[0], check)


def test_lines_come_from_the_printer_s_map_of_the_source_shown():
    jf = thunder.jit(lambda x: torch.sin(x) * 2)
    jf(torch.randn(3))
    trace = thunder.last_traces(jf)[0]
    source, lines = _printed(trace)
    assert source == trace.python(print_depth=1)
    printed = [source.split("\n")[n - 1] for n in lines]
    assert printed[0].strip() == '# x: "cpu f32[3]"'  # the parameter
    assert "ltorch.sin(" in printed[1] and "ltorch.mul(" in printed[2] and printed[3].strip().startswith("return")


def test_lines_count_newlines_inside_a_printed_statement():
    jf = thunder.jit(lambda x: torch.sin(x) * 2)
    jf(torch.randn(3))
    trace = from_trace(thunder.last_traces(jf)[0])
    old = thunder.last_traces(jf)[0]
    _, sin, mul, ret = old.bound_symbols
    two_lines = dataclasses.replace(sin.sym, printer=lambda bsym, printer: ["# one\n  # two", "pass"])
    trace.bound_symbols = [sin.from_bsym(sym=two_lines), mul, ret]
    source, lines = _printed(trace)
    printed = source.split("\n")
    assert printed[lines[0] - 1].strip() == "# one" and printed[lines[0]].strip() == "# two"
    assert "ltorch.mul(" in printed[lines[1] - 1] and printed[lines[2] - 1].strip().startswith("return")


def test_steps_follow_the_compilation_in_order():
    steps = dce_cse_steps()
    assert [s["index"] for s in steps] == list(range(len(steps)))
    assert [s["id"] for s in steps] == [f"s{i}" for i in range(len(steps))]
    assert [s["kind"] for s in steps] == ["prologue"] * 2 + ["computation"] * 5
    assert [s["pass"] for s in of_kind(steps, "computation")] == [
        "Interpretation",
        "Dead Code Elimination",
        "Common Subexpression Elimination",
        "Transform for execution",
        "Delete Last Used",
    ]
    assert all(isinstance(s["ms"], float) and s["ms"] >= 0 for s in steps)
    assert steps[0]["diff"] is None and steps[2]["diff"] is None and steps[3]["diff"]["previous"] == "s2"


def test_node_ids_are_stable_for_ops_that_survive():
    comp = of_kind(dce_cse_steps(), "computation")
    first = comp[0]
    add = node_by_op(first, "ltorch.add")
    relu = node_by_op(first, "ltorch.relu")
    for step in comp[1:3]:
        assert node_by_op(step, "ltorch.add")["id"] == add["id"]
        assert node_by_op(step, "ltorch.relu")["id"] == relu["id"]
    # Claimed by the torch executor: a new bound symbol, same identity, lineage and origin.
    for step in comp[3:]:
        claimed = node_by_op(step, "torch.relu")
        assert claimed["id"] == relu["id"] and claimed["uid"] != relu["uid"]
        assert claimed["executor"] == "torch"
        assert claimed["lineage"] == [relu["id"]] and claimed["origin"] == [relu["id"]]
    assert node_by_op(first, "ltorch.relu")["executor"] is None


def test_ids_come_from_lineage_not_text():
    """Two ops that print alike (x * y twice) are different nodes; renaming keeps identity."""
    comp = of_kind(dce_cse_steps(), "computation")
    first, dce = comp[0], comp[1]
    muls = [n for n in first["nodes"] if n["op"] == "ltorch.mul" and n["inputs"][0]["name"] == "x"]
    assert len(muls) == 2 and muls[0]["id"] != muls[1]["id"]
    cse = comp[2]
    scale = next(n for n in dce["nodes"] if n["op"] == "ltorch.mul" and n["inputs"][1]["name"] == "2.0")
    renamed = next(n for n in cse["nodes"] if n["id"] == scale["id"])
    assert renamed["inputs"][0]["name"] != scale["inputs"][0]["name"]  # CSE renamed its input


def test_python_symbols_are_python_once_executable():
    steps = dce_cse_steps()
    comp = of_kind(steps, "computation")
    assert node_by_op(comp[0], "prims.python_return")["executor"] is None
    assert node_by_op(comp[-1], "prims.python_return")["executor"] == "python"
    assert {n["executor"] for n in steps[1]["nodes"]} == {"python"}


def test_values_carry_shapes_dtypes_and_constants():
    comp = of_kind(dce_cse_steps(), "computation")
    step = comp[0]
    assert [v["name"] for v in step["inputs"]] == ["x", "y"]
    assert step["inputs"][0] == {"name": "x", "shape": [3, 4], "dtype": "f32", "device": "cpu", "kind": "tensor"}
    scale = next(n for n in step["nodes"] if n["op"] == "ltorch.mul" and n["inputs"][1]["kind"] == "number")
    assert scale["inputs"][1]["repr"] == "2.0"
    relu = node_by_op(step, "ltorch.relu")
    assert relu["outputs"][0]["shape"] == [3, 4] and relu["outputs"][0]["dtype"] == "f32"
    assert relu["decomposition"] and all(" = prims." in line for line in relu["decomposition"])
    assert relu["source"]["function"] == "dce_cse" and relu["source"]["code"] == "return torch.relu(c)"
    ret = node_by_op(step, "prims.python_return")
    assert step["outputs"] == [ret["inputs"][0]["name"]]


def test_edges_follow_values_from_producers_to_consumers():
    step = of_kind(dce_cse_steps(), "computation")[2]  # after CSE
    nodes = {n["id"]: n for n in step["nodes"]}
    made = {o["name"]: n["id"] for n in step["nodes"] for o in n["outputs"]}
    for e in step["edges"]:
        if e["target"] == "output":
            assert nodes[e["source"]]["op"] == "prims.python_return"
            continue
        assert e["value"] in {v["name"] for v in nodes[e["target"]]["inputs"]}
        expected = made.get(e["value"], f"input:{e['value']}")
        assert e["source"] == expected
        assert e["shape"] == [3, 4] and e["dtype"] == "f32"
    reads = {(e["source"], e["target"]) for e in step["edges"]}
    mul = node_by_op(step, "ltorch.mul")
    assert ("input:x", mul["id"]) in reads and ("input:y", mul["id"]) in reads
    assert any(e["target"] == "output" for e in step["edges"])


def test_del_nodes_have_no_edges():
    last = of_kind(dce_cse_steps(), "computation")[-1]
    dels = {n["id"] for n in last["nodes"] if n["op"] == "prims.python_del"}
    assert dels
    assert not any(e["target"] in dels or e["source"] in dels for e in last["edges"])


def test_prologue_steps_are_graphs_too():
    steps = dce_cse_steps()
    prologue = steps[0]
    assert [v["name"] for v in prologue["inputs"]] == ["args", "kwargs"]
    unpack = node_by_op(prologue, "prims.unpack_sequence")
    assert ("input:args", unpack["id"]) in {(e["source"], e["target"]) for e in prologue["edges"]}
    assert [n["id"] for n in steps[1]["nodes"]] == [n["id"] for n in prologue["nodes"]]


def test_module_scopes_are_nested_groups():
    step = of_kind(module_steps(), "computation")[0]
    groups = {g["id"]: g for g in step["groups"]}
    by_label = {g["label"]: g for g in groups.values()}
    assert {"0", "1", "2", "2.0", "2.1"} <= set(by_label)
    assert all(g["kind"] == "module" for g in groups.values())
    assert by_label["2.0"]["parent"] == by_label["2"]["id"] and by_label["2"]["parent"] is None
    linear0 = node_by_op(step, "ltorch.linear", 0)
    linear1 = node_by_op(step, "ltorch.linear", 1)
    assert linear0["group"] == by_label["0"]["id"] and linear0["source"]["module_path"] == "0"
    assert linear1["group"] == by_label["2.0"]["id"]
    assert by_label["2.0"]["nodes"] == [linear1["id"]]
    assert node_by_op(step, "ltorch.sum")["group"] is None


def test_group_ids_are_stable_across_steps():
    comp = of_kind(module_steps(), "computation")
    ids = [{g["label"]: g["id"] for g in s["groups"]} for s in comp]
    assert all(i == ids[0] for i in ids)


@pytest.mark.slow
def test_fusion_members_are_nodes_of_the_fusion_group():
    steps = dce_cse_steps(("torchcompile",))
    comp = of_kind(steps, "computation")
    cse, executed = comp[2], comp[3]
    fusion = next(n for n in executed["nodes"] if n["fusion"])
    assert fusion["executor"] == "torchcompile" and fusion["op"].startswith("TorchCompile")
    members = [n for n in executed["nodes"] if n["fused_into"] == fusion["id"]]
    previous_ops = [n["id"] for n in cse["nodes"] if n["op"].startswith("ltorch.")]
    assert [m["id"] for m in members] == previous_ops  # members keep the ids of the ops they were
    assert fusion["lineage"] == previous_ops and fusion["origin"] == previous_ops
    group = next(g for g in executed["groups"] if g["kind"] == "fusion")
    assert group["node"] == fusion["id"] and group["nodes"] == [fusion["id"], *previous_ops]
    assert group["collapsed"] is True and fusion["group"] == group["id"]
    member_ids = {m["id"] for m in members}
    assert not any(e["source"] in member_ids or e["target"] in member_ids for e in executed["edges"])
    inner = {(e["source"], e["target"]) for e in executed["inner_edges"]}
    assert ("input:x", members[0]["id"]) in inner
    ret = node_by_op(executed, "prims.python_return")
    assert (members[-1]["id"], ret["id"]) in inner and (fusion["id"], ret["id"]) in {
        (e["source"], e["target"]) for e in executed["edges"]
    }
    # Delete Last Used keeps the fusion: same ids for it and its members.
    last = comp[-1]
    assert [n["id"] for n in last["nodes"] if n["fusion"] or n["fused_into"]] == [fusion["id"], *previous_ops]
    validate_document(document(steps, title="f"))


def test_decomposed_op_parts_take_the_parent_id_with_a_suffix():
    jf = thunder.jit(lambda x: torch.relu(x) + 1)
    jf(torch.randn(3))
    before = thunder.last_traces(jf)[0]
    after = from_trace(before)
    relu = next(b for b in before.bound_symbols if b.sym.name == "relu")
    for b in before.bound_symbols:
        if b is relu:
            after.bound_symbols.extend(s.from_bsym(source=relu.source, lineage=(relu.uid,)) for s in relu.subsymbols)
        else:
            after.bound_symbols.append(b)
    after.set_provenance(TraceProvenance("Decompose relu", 0.1))
    first, second = steps_from_traces([before, after])
    rid = node_by_op(first, "ltorch.relu")["id"]
    parts = [n for n in second["nodes"] if n["lineage"] == [rid]]
    assert [p["id"] for p in parts] == [f"{rid}.0", f"{rid}.1"]
    group = next(g for g in second["groups"] if g["kind"] == "decomposition")
    assert group["label"] == "ltorch.relu" and group["nodes"] == [p["id"] for p in parts]
    assert all(p["origin"] == [rid] and p["group"] == group["id"] for p in parts)
    assert set(second["diff"]["rewritten"]) == {p["id"] for p in parts} and rid not in second["diff"]["removed"]


def test_steps_from_jitted_needs_a_call_first():
    with pytest.raises(TypeError, match="call the jitted function first"):
        steps_from_jitted(thunder.jit(lambda x: x + 1))


def test_document_validates_and_is_strict_json():
    steps = dce_cse_steps()
    doc = document(steps, title="dce_cse", executors=None)
    validate_document(doc)
    assert doc["schema"] == "thunder-trace" and doc["version"] == 1 and doc["runs"] == [] and doc["error"] is None
    assert "executors" not in doc
    assert json.loads(json.dumps(doc, allow_nan=False))["title"] == "dce_cse"
    evil = document(evil_steps(), title=EVIL)
    validate_document(evil)
    assert json.loads(json.dumps(evil))["title"] == EVIL


def _broken(mutate) -> dict:
    doc = json.loads(json.dumps(document(dce_cse_steps(), title="f")))
    mutate(doc)
    return doc


@pytest.mark.parametrize(
    "mutate, where",
    [
        (lambda d: d.update(version=2), "document.version"),
        (lambda d: d.pop("steps"), "missing field 'steps'"),
        (lambda d: d["steps"][3]["nodes"][0].update(line=999), "steps[3].nodes[0].line"),
        (lambda d: d["steps"][3]["nodes"][1].update(id=d["steps"][3]["nodes"][0]["id"]), "duplicate node id"),
        (lambda d: d["steps"][3]["edges"][0].update(source="n999999"), "steps[3].edges[0].source"),
        (lambda d: d["steps"][3].update(index=7), "steps[3].index"),
        (lambda d: d["steps"][3]["nodes"][0]["inputs"][0].update(kind="tensorish"), "inputs[0].kind"),
        (lambda d: d["steps"][3]["nodes"][0].update(fusion="no"), "steps[3].nodes[0].fusion"),
        (lambda d: d["steps"][4]["diff"].update(previous="s0"), "steps[4].diff.previous"),
        (
            lambda d: d["runs"].append(
                {
                    "id": "r0",
                    "executors": [],
                    "median_ms": math.nan,
                    "repeats": 1,
                    "compile_ms": 3.0,
                    "max_abs_diff": None,
                    "matches_eager": None,
                    "differs_at": None,
                    "cache_hits": 0,
                    "cache_misses": 1,
                    "fusions": [],
                    "error": None,
                }
            ),
            "not strict JSON",
        ),  # fmt: skip
        (lambda d: d.update(error={"type": "E", "message": "m", "stage": "later", "user_frame": None}), "error.stage"),
    ],
)
def test_validate_document_names_what_is_wrong(mutate, where):
    with pytest.raises(DocumentError, match=re.escape(where)):
        validate_document(_broken(mutate))


def normed_view(x, w, b):
    return torch.nn.functional.layer_norm(x.view(2, 8), (8,), w, b)


def test_nodes_keep_the_torch_name_the_user_wrote_at_every_step():
    """Search for "layer_norm" found 5 ops at step 2 and none at steps 5-7 (``layer_norm_with_stats``,
    ``torch_layer_norm_with_stats``); one graph mixed ``Tensor.view``, ``torch_iota`` and ``add``."""
    jf = thunder.jit(normed_view, executors=["torch"])
    x, w, b = (
        torch.randn(16, requires_grad=True),
        torch.randn(8, requires_grad=True),
        torch.randn(8, requires_grad=True),
    )
    jf(x, w, b).sum().backward()
    steps = [s for s in steps_from_jitted(jf) if s["kind"] == "computation"]
    renamed = set()
    for step in steps:
        labels = {n["label"] for n in step["nodes"] if not n["fused_into"]}
        assert {"layer_norm", "view"} <= labels, (step["pass"], labels)
        for n in step["nodes"]:
            assert not n["label"].startswith(("torch_", "Tensor.", "ltorch.", "nn.functional.")), n["label"]
            if n["label"] == "layer_norm":
                renamed.add(n["op"])
    assert len(renamed) > 1, "the symbol a pass renamed it to is the node's op (shown in its details)"
    assert torch_name("torch_iota") == "iota" and torch_name("Tensor.view") == "view" and torch_name("add") == "add"


def test_the_document_says_when_torchs_autograd_records_the_backward_and_why():
    from thunder_viz.graph import validate_document
    from thunder_viz.session import Session

    def updated_in_place(x):
        y = x * 1
        view = y[:2]
        y.add_(1)  # what thunder's split cannot differentiate: torch's autograd records it
        return (view * x[:2]).sum()

    def plain(x):
        return (x * 2).sum()

    docs = {}
    for fn in (updated_in_place, plain):
        session = Session(thunder.jit(fn))
        session(torch.randn(3, requires_grad=True)).backward()
        docs[fn.__name__] = session.to_document()
        validate_document(docs[fn.__name__])
    assert "in place" in docs["updated_in_place"]["autograd"]
    assert "autograd" not in docs["plain"]
    with pytest.raises(Exception, match="document.autograd"):
        validate_document({**docs["plain"], "autograd": 3})
