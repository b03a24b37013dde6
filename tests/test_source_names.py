"""Names and places a person recognises: parameters and buffers named by their module path, a
notebook cell's lines named as IPython names them, and for ops inside torch the user's call site."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import torch

import thunder
from tests import zoo
from thunder.core.symbol import location_text, notebook_cell
from thunder.runtime_errors import NOTE_PREFIX


def line_of(fn, text: str) -> int:
    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, line in enumerate(lines) if text in line)


def input_names(trace) -> list[str]:
    return [a.name for a in trace.args]


def returned_names(prologue) -> list[str]:
    return [p.name for p in prologue.bound_symbols[-1].flat_proxy_args]


# --- parameter and buffer names ------------------------------------------------------------------
def test_sequential_parameters_and_buffers_are_named_by_module_path_in_every_trace():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4))
    jm = thunder.jit(m)
    x = torch.randn(3, 4, requires_grad=True)
    jm(x).sum().backward()
    names = ["t_0_weight", "t_0_bias", "t_1_num_batches_tracked", "t_1_running_mean", "t_1_running_var"]
    names += ["t_1_weight", "t_1_bias"]
    paths = dict(zip(names, ["0.weight", "0.bias", "1.num_batches_tracked", "1.running_mean", "1.running_var"]))
    paths.update({"t_1_weight": "1.weight", "t_1_bias": "1.bias"})
    for trace in thunder.last_traces(jm):
        assert input_names(trace) == ["input", *names] and trace.input_paths == paths
    for prologue in thunder.last_prologue_traces(jm):
        assert returned_names(prologue) == ["input", *names] and paths.items() <= prologue.input_paths.items()
        # the submodules and their other attributes are named by path too (cache-miss reasons say these)
        assert {"module_0": "0", "module_1": "1", "module_1_momentum": "1.momentum"}.items() <= prologue.input_paths.items()
    backward = thunder.last_backward_traces(jm)[-1]
    assert {"t_0_weight", "t_1_weight"} <= set(input_names(backward)) and backward.input_paths == paths
    assert "t_0_weight = module_0._parameters.get('weight'" in str(thunder.last_prologue_traces(jm)[-1])
    assert m[0].weight.grad is not None and m[1].num_batches_tracked.item() == 1


def test_gpt2_parameters_are_named_by_module_path_and_the_cache_still_hits():
    m = zoo.build("gpt2").eval()
    jm = thunder.jit(m)
    ids = zoo.input_ids()
    torch.testing.assert_close(jm(ids).logits, m(ids).logits)
    torch.testing.assert_close(jm(ids).logits, m(ids).logits)
    assert (thunder.cache_misses(jm), thunder.cache_hits(jm)) == (1, 1)
    trace = thunder.last_traces(jm)[-1]
    names = input_names(trace)
    assert "t_transformer_h_0_ln_1_weight" in names and "t_transformer_h_1_mlp_c_proj_bias" in names
    assert not any("_modules" in n for n in names)
    assert trace.input_paths["t_transformer_h_0_ln_1_weight"] == "transformer.h.0.ln_1.weight"
    # lm_head.weight is transformer.wte.weight: one input, named by the path it was first read through
    assert "t_transformer_wte_weight" in names and not any("lm_head" in n for n in names)
    parameters = {id(p): name for name, p in m.named_parameters()}
    for holder, proxy in zip(returned_names(thunder.last_prologue_traces(jm)[-1]), trace.args):
        assert holder == proxy.name
    assert set(trace.input_paths.values()) == set(parameters.values())


def test_submodules_are_named_by_path_in_the_prologue_and_cache_miss_reasons_use_qualified_names():
    """Regression: items of a ModuleList read as ``module__modules_0``, and a miss said ``t_body_0_weight``."""

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.ModuleList([torch.nn.Linear(4, 4), torch.nn.Linear(4, 4)])
            self.scale = 2.0

        def forward(self, x):
            for layer in self.body:
                x = layer(x)
            return x * self.scale

    net = Net()
    jm = thunder.jit(net)
    x = torch.randn(2, 4)
    jm(x)
    prologue = str(thunder.last_prologue_traces(jm)[-1])
    assert "module_body_0 = " in prologue and "module_body_1 = " in prologue and "__modules_0" not in prologue
    net.body[1].bias.requires_grad_(False)
    torch.testing.assert_close(jm(x), net(x))
    net.scale = 3.0
    torch.testing.assert_close(jm(x), net(x))
    bias, scale = thunder.cache_miss_reasons(jm)[-2:]
    assert (bias.input, bias.check, str(bias)) == ("body.1.bias", "requires_grad", "body.1.bias requires_grad changed True -> False")
    assert (scale.input, str(scale)) == (
        "scale",
        "scale value changed 2.0 -> 3.0; the sizes and numbers that changed are symbolic in this entry (automatic "
        "dynamic shapes: pass cache='constant values' to keep them constant)",
    )  # (a float that changed becomes symbolic, as an int does)


class _Colliding(torch.nn.Module):
    """``a_b.c`` and ``a.b_c`` both read ``t_a_b_c``; the argument ``t_w`` is the name of the parameter ``w``."""

    def __init__(self):
        super().__init__()
        self.a_b = torch.nn.Module()
        self.a_b.c = torch.nn.Parameter(torch.ones(2))
        self.a = torch.nn.Module()
        self.a.b_c = torch.nn.Parameter(torch.full((2,), 2.0))
        self.w = torch.nn.Parameter(torch.full((2,), 3.0))
        self.layers = torch.nn.ModuleDict({"my-layer": torch.nn.Linear(2, 2)})

    def forward(self, t_w):
        return self.layers["my-layer"](t_w * self.w + self.a_b.c - self.a.b_c)


def test_colliding_and_non_identifier_paths_still_give_unique_valid_names():
    torch.manual_seed(0)
    m = _Colliding()
    jm = thunder.jit(m)
    x = torch.randn(3, 2)
    torch.testing.assert_close(jm(x), m(x))
    trace = thunder.last_traces(jm)[-1]
    names = input_names(trace)
    assert len(set(names)) == len(names) and all(n.isidentifier() for n in names)
    assert names[0] == "t_w"
    assert sorted(trace.input_paths.values()) == [
        "a.b_c",
        "a_b.c",
        "layers.my-layer.bias",
        "layers.my-layer.weight",
        "w",
    ]
    assert trace.input_paths["t_layers_my_layer_weight"] == "layers.my-layer.weight"
    assert {n for n, p in trace.input_paths.items() if p in ("a_b.c", "a.b_c")} == {"t_a_b_c", "t_a_b_c_0"}
    assert trace.input_paths[next(n for n in names[1:] if n.startswith("t_w"))] == "w"
    torch.testing.assert_close(jm(x), m(x))
    assert thunder.cache_hits(jm) == 1


def test_a_function_taking_a_module_names_its_parameters_by_path():
    def f(model, x):
        return model(x) * 2

    m = torch.nn.Sequential(torch.nn.Linear(2, 2))
    jf = thunder.jit(f)
    x = torch.randn(1, 2)
    torch.testing.assert_close(jf(m, x), f(m, x))
    assert input_names(thunder.last_traces(jf)[-1]) == ["x", "t_0_weight", "t_0_bias"]


# --- notebook cells ------------------------------------------------------------------------------
@pytest.fixture
def shell():
    from IPython.core.interactiveshell import InteractiveShell

    ip = InteractiveShell.instance()
    yield ip
    for name in ("scaled", "flat"):
        ip.user_ns.pop(name, None)


def run_cell(ip, source: str) -> int:
    """Runs ``source`` as the next notebook cell; returns its execution count (``In[n]``)."""
    n = ip.execution_count
    ip.run_cell(source, store_history=True).raise_error()
    return n


def test_trace_comments_name_a_notebook_cell_as_ipython_does(shell):
    n = run_cell(shell, "def scaled(a):\n    b = a * 2\n    return b + 1\n")
    jf = thunder.jit(shell.user_ns["scaled"])
    jf(torch.ones(2))
    text = str(thunder.last_traces(jf)[0])
    assert f"# Cell In[{n}], line 2: \tb = a * 2" in text and f"# Cell In[{n}], line 3: \treturn b + 1" in text
    assert "ipython-input" not in text


def test_a_runtime_error_in_a_cell_names_the_cell_and_line(shell):
    n = run_cell(shell, "def flat(x):\n    y = x * 2\n    return y.view(-1)\n")
    with pytest.raises(RuntimeError) as info:
        thunder.jit(shell.user_ns["flat"])(torch.randn(3, 4).t())
    (note,) = info.value.__notes__
    assert note.startswith(f"{NOTE_PREFIX}torch.Tensor.view at Cell In[{n}], line 3, in flat")


def test_in_a_kernel_a_cell_run_again_is_named_by_its_latest_run(shell, monkeypatch):
    # ipykernel is a test dependency (pyproject's "test" extra) that a bare environment may lack
    XCachingCompiler = pytest.importorskip("ipykernel.compiler").XCachingCompiler

    monkeypatch.setattr(shell, "compile", XCachingCompiler())  # the kernel's: /tmp/ipykernel_<pid>/<hash>.py
    code = "def scaled(a):\n    return a * 3\n"
    first = run_cell(shell, code)
    filename = shell.user_ns["scaled"].__code__.co_filename
    assert "ipykernel_" in filename and location_text(filename, 2) == f"Cell In[{first}], line 2"
    again = run_cell(shell, code)
    assert shell.user_ns["scaled"].__code__.co_filename == filename  # named by its code
    assert location_text(filename, 2) == f"Cell In[{again}], line 2" and again > first


def test_file_names_outside_cells_are_shown_as_before():
    assert location_text(__file__, 7, relative=False) == f"{__file__}:7"
    assert notebook_cell(__file__) is None


def test_naming_cells_does_not_import_ipython():
    code = (
        "import sys, torch, thunder\n"
        "from thunder.core.symbol import notebook_cell\n"
        "jf = thunder.jit(lambda a: a + 1); jf(torch.ones(1)); str(thunder.last_traces(jf)[0])\n"
        "assert notebook_cell('/tmp/ipykernel_1/2.py') is None and 'IPython' not in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --- call sites of ops inside torch --------------------------------------------------------------
class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)
        self.drop = torch.nn.Dropout(0.0)

    def forward(self, x):
        y = self.fc(x)
        y = self.drop(y)
        return y * 2


def _source_of(trace, name: str):
    return next(b.source for b in trace.bound_symbols if b.sym.name == name)


def test_ops_inside_torch_modules_record_the_users_call_site():
    jm = thunder.jit(_Net())
    jm(torch.randn(2, 3))
    trace = thunder.last_traces(jm)[0]
    linear = _source_of(trace, "linear")
    assert linear.filename == inspect.getsourcefile(torch.nn.Linear) and linear.module_path == "fc"
    site = linear.call_site
    assert (site.filename, site.lineno, site.function) == (
        __file__,
        line_of(_Net.forward, "self.fc(x)"),
        "_Net.forward",
    )
    assert site.source_line == "y = self.fc(x)" and site.call_site is None and site.module_path is None
    dropout = _source_of(trace, "dropout")
    assert dropout.module_path == "drop" and dropout.call_site.lineno == line_of(_Net.forward, "self.drop(y)")
    mul = _source_of(trace, "mul")  # the user's own line: it is its own call site
    assert mul.filename == __file__ and mul.call_site is None


def test_a_torch_module_jitted_by_itself_has_no_call_site():
    jm = thunder.jit(torch.nn.Linear(3, 3))
    jm(torch.randn(2, 3))
    linear = _source_of(thunder.last_traces(jm)[0], "linear")
    assert linear.filename == inspect.getsourcefile(torch.nn.Linear) and linear.call_site is None


def test_a_library_models_call_site_is_the_librarys_line():
    jm = thunder.jit(zoo.build("gpt2").eval())
    jm(zoo.input_ids())
    trace = thunder.last_traces(jm)[0]
    drop = next(b.source for b in trace.bound_symbols if b.sym.name == "dropout")
    assert drop.module_path == "transformer.drop" and drop.filename.endswith("torch/nn/modules/dropout.py")
    assert drop.call_site.filename.endswith("modeling_gpt2.py") and drop.call_site.function == "GPT2Model.forward"
    assert drop.call_site.source_line == "hidden_states = self.drop(hidden_states)"


def test_a_call_reads_no_source_file_and_a_shown_trace_still_quotes_the_line(tmp_path, monkeypatch):
    # Note [Compiled code names the user's lines without their text]: compiling and running reads none of the user's
    # files; the trace shown still quotes the line, and a runtime error still names it.
    import importlib
    import linecache

    (tmp_path / "user_module_for_source_text.py").write_text(
        "import torch\n\ndef f(x, i):\n    y = torch.sin(x) * 2\n    return y[i]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module("user_module_for_source_text")
    filename = module.__file__
    linecache.checkcache()
    linecache.cache.pop(filename, None)
    jf = thunder.jit(module.f)
    x = torch.randn(3)
    for i in (0, 1, 2, 1):  # the first call, the entry's prologue compiled and the cached calls
        torch.testing.assert_close(jf(x, torch.tensor(i)), module.f(x, torch.tensor(i)))
    assert filename not in linecache.cache
    assert "y = torch.sin(x) * 2" in str(thunder.last_traces(jf)[-1])
    with pytest.raises(IndexError) as raised:
        jf(x, torch.tensor(5))
    assert any("return y[i]" in note for note in getattr(raised.value, "__notes__", ()))
