"""The trace document names parameters by module path, notebook cells as IPython does, and gives an
op inside torch the user's call site."""

from __future__ import annotations

import copy
import inspect

import pytest
import torch

import thunder
from tests import zoo
from thunder_viz.graph import DocumentError, steps_from_jitted, validate_document
from thunder_viz.session import ErrorInfo, Session


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)
        self.norm = torch.nn.BatchNorm1d(3)

    def forward(self, x):
        y = self.fc(x)
        return self.norm(y) * 2


def _document(model, *args) -> dict:
    s = Session(thunder.jit(model))
    s(*args)
    doc = s.to_document()
    validate_document(doc)
    return doc


def _refs(step: dict) -> list[dict]:
    return [*step["inputs"], *(v for n in step["nodes"] for v in (*n["inputs"], *n["outputs"]))]


def test_parameters_and_buffers_carry_their_module_path_in_every_step():
    torch.manual_seed(0)
    x = torch.randn(4, 3, requires_grad=True)
    doc = _document(_Net(), x)
    expected = {
        "t_fc_weight": "fc.weight", "t_fc_bias": "fc.bias", "t_norm_weight": "norm.weight", "t_norm_bias": "norm.bias",
        "t_norm_running_mean": "norm.running_mean", "t_norm_running_var": "norm.running_var",
        "t_norm_num_batches_tracked": "norm.num_batches_tracked",
    }  # fmt: skip
    kinds = set()
    for step in doc["steps"]:
        for ref in _refs(step):
            if step["kind"] == "prologue" and ref["name"] not in expected and ref.get("path"):
                # the prologue reads submodules and their attributes too: named by path as well
                assert ref["name"] == "module_" + ref["path"].replace(".", "_"), ref
                continue
            assert ref.get("path") == expected.get(ref["name"]), (step["kind"], step["pass"], ref)
        kinds.add(step["kind"])
        if step["kind"] == "computation":
            assert {r["name"] for r in step["inputs"]} == {"x", *expected}
    assert kinds == {"prologue", "computation", "backward"}
    backward = [s for s in doc["steps"] if s["kind"] == "backward"][-1]
    assert any(r.get("path") == "fc.weight" for r in backward["inputs"])


def test_gpt2_document_names_parameters_by_dotted_path():
    doc = _document(zoo.build("gpt2").eval(), zoo.input_ids())
    step = next(s for s in doc["steps"] if s["kind"] == "computation")
    paths = {r["name"]: r.get("path") for r in step["inputs"]}
    assert paths["t_transformer_h_0_ln_1_weight"] == "transformer.h.0.ln_1.weight"
    assert paths["input_ids"] is None


def test_an_op_inside_a_torch_module_has_the_users_call_site_and_module_path():
    doc = _document(_Net(), torch.randn(4, 3))
    step = next(s for s in doc["steps"] if s["kind"] == "computation")
    linear = next(n for n in step["nodes"] if n["op"] == "ltorch.linear")
    src = linear["source"]
    assert src["file"] == inspect.getsourcefile(torch.nn.Linear) and src["module_path"] == "fc"
    assert src["call_site"] == {
        "file": __file__, "line": line_of(_Net.forward, "self.fc(x)"), "function": "_Net.forward", "code": "y = self.fc(x)",
    }  # fmt: skip
    mul = next(n for n in step["nodes"] if n["op"] == "ltorch.mul")
    assert mul["source"]["file"] == __file__ and "call_site" not in mul["source"]


def test_validation_checks_the_new_fields():
    doc = _document(_Net(), torch.randn(4, 3))
    step = next(i for i, s in enumerate(doc["steps"]) if s["kind"] == "computation")
    k = next(i for i, n in enumerate(doc["steps"][step]["nodes"]) if n["op"] == "ltorch.linear")
    bad = copy.deepcopy(doc)
    del bad["steps"][step]["nodes"][k]["source"]["call_site"]["line"]
    with pytest.raises(DocumentError, match=r"source\.call_site"):
        validate_document(bad)
    bad = copy.deepcopy(doc)
    bad["steps"][step]["inputs"][1]["path"] = 3
    with pytest.raises(DocumentError, match=r"inputs\[1\]\.path"):
        validate_document(bad)


@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    yield ip
    for name in ("CellNet", "cell_broken"):
        ip.user_ns.pop(name, None)


def run_cell(ip, source: str) -> int:
    n = ip.execution_count
    ip.run_cell(source, store_history=True).raise_error()
    return n


def test_a_notebook_cell_is_named_as_ipython_names_it(shell):
    n = run_cell(
        shell,
        "import torch\n"
        "class CellNet(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.fc = torch.nn.Linear(3, 3)\n"
        "    def forward(self, a):\n"
        "        return self.fc(a) + 1\n",
    )
    jm = thunder.jit(shell.user_ns["CellNet"]())
    jm(torch.randn(2, 3))
    step = next(s for s in steps_from_jitted(jm) if s["kind"] == "computation")
    add = next(n for n in step["nodes"] if n["op"] == "ltorch.add")
    assert (add["source"]["file"], add["source"]["line"]) == (f"Cell In[{n}]", 7)
    assert add["source"]["code"] == "return self.fc(a) + 1"
    linear = next(n for n in step["nodes"] if n["op"] == "ltorch.linear")  # torch's line, called from the cell
    assert (linear["source"]["call_site"]["file"], linear["source"]["call_site"]["line"]) == (f"Cell In[{n}]", 7)


def test_an_error_in_a_cell_names_the_cell_in_its_user_frame(shell):
    n = run_cell(shell, "def cell_broken(a, b):\n    c = a * 2\n    return c @ b\n")
    jf = thunder.jit(shell.user_ns["cell_broken"])
    with pytest.raises(Exception) as info:
        jf(torch.randn(2, 3), torch.randn(2, 3))
    error = ErrorInfo.from_exception(info.value, jitted=jf)
    frame = error.user_frame
    assert (frame.file, frame.line, frame.function, frame.code) == (f"Cell In[{n}]", 3, "cell_broken", "return c @ b")
    assert f" at Cell In[{n}], line 3 (return c @ b): " in error.one_line()
