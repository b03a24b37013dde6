"""thunder.jit of nn.Modules (a first version: the module is an input of the trace)."""

from __future__ import annotations

import copy

import pytest
import torch

import thunder
from thunder.core.module import ThunderModule


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))


def test_module_matches_eager_and_is_a_thunder_module():
    m = _mlp()
    tm = thunder.jit(m)
    assert isinstance(tm, ThunderModule) and isinstance(tm, torch.nn.Module)
    x = torch.randn(5, 3)
    torch.testing.assert_close(tm(x), m(x))
    assert "linear" in str(thunder.last_traces(tm)[-1])


def test_parameter_updates_are_seen_without_recompiling():
    m = _mlp()
    tm = thunder.jit(m)
    x = torch.randn(5, 3)
    tm(x)
    with torch.no_grad():
        m[0].weight.mul_(2.0)
    torch.testing.assert_close(tm(x), m(x))
    assert (thunder.cache_misses(tm), thunder.cache_hits(tm)) == (1, 1)


def test_adding_a_hook_recompiles():
    m = _mlp()
    tm = thunder.jit(m)
    x = torch.randn(5, 3)
    tm(x)
    m[2].register_forward_hook(lambda mod, inputs, out: out * 10)
    torch.testing.assert_close(tm(x), m(x))
    assert thunder.cache_misses(tm) == 2


def test_training_flag_is_guarded():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5))
    tm = thunder.jit(m)
    x = torch.randn(8, 4)
    m.eval()
    torch.testing.assert_close(tm(x), m(x))
    m.train()
    out = tm(x)
    assert thunder.cache_misses(tm) == 2
    assert (out == 0).any()


def test_module_api_forwards_to_the_original():
    m = _mlp()
    tm = thunder.jit(m)
    assert tm.get_parameter("0.weight") is m[0].weight
    assert tm.get_submodule("2") is m[2]
    assert [n for n, _ in tm.named_parameters()] == [n for n, _ in m.named_parameters()]
    assert tm.state_dict().keys() == m.state_dict().keys()
    tm.load_state_dict({k: torch.zeros_like(v) for k, v in m.state_dict().items()})
    assert m[0].weight.abs().sum() == 0
    with tm.no_sync():
        pass


def test_source_locations_carry_the_module_path():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.relu(self.fc(x)) + x

    tm = thunder.jit(torch.nn.Sequential(Block(), Block()))
    tm(torch.randn(2, 4))
    paths = [b.source.module_path for b in thunder.last_traces(tm)[0].bound_symbols if b.source]
    assert paths == ["0.fc", "0", "0", "1.fc", "1", "1"]


def test_module_hooks_added_after_compiling_and_global_hooks_match_eager():
    """A module call is traced without reading its hook dicts one by one (Note [Module calls]): one
    check per module. Hooks registered later (on a submodule, globally, pre-hooks) still recompile and
    run as in eager, and global hooks run once on the original module, not again on the wrapper."""
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    jm = thunder.jit(m)
    x = torch.randn(4, 3)
    torch.testing.assert_close(jm(x), m(x))
    hooks = [
        lambda: m[1].register_forward_hook(lambda mod, i, o: o * 10),
        lambda: torch.nn.modules.module.register_module_forward_hook(
            lambda mod, i, o: o + 1 if isinstance(o, torch.Tensor) else o
        ),
        lambda: m[0].register_forward_pre_hook(lambda mod, i: (i[0] * 2,)),
    ]
    for register in hooks:
        handle = register()
        try:
            torch.testing.assert_close(jm(x), m(x))
        finally:
            handle.remove()
        torch.testing.assert_close(jm(x), m(x))
    prologue = str(thunder.last_prologue_traces(jm)[-1])
    assert "module__modules_1__forward_hooks" not in prologue  # one line per module, not a guard per dict


def test_a_module_class_that_changes_its_call_is_traced_through_it():
    """A class overriding ``_call_impl`` is called through it, not through the shortcut that calls
    ``forward`` directly (Note [Module calls])."""

    class Tripled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(2, 2)

        def _call_impl(self, *args, **kwargs):
            return super()._call_impl(*args, **kwargs) * 3

        def forward(self, x):
            return self.l(x)

    m = torch.nn.Sequential(Tripled())
    x = torch.randn(1, 2)
    torch.testing.assert_close(thunder.jit(m)(x), m(x))


def _prologue_source(tm) -> str:
    return str(thunder.last_prologue_traces(tm)[-1])


def test_parameters_and_submodules_are_read_from_their_tables():
    """The prologue reads ``module._parameters`` and ``_modules`` directly, not through
    ``nn.Module.__getattr__`` (Note [Module members])."""
    m = _mlp()
    tm = thunder.jit(m)
    tm(torch.randn(5, 3))
    source = _prologue_source(tm)
    assert "._parameters.get('weight', _NOT_A_MEMBER)" in source
    assert ".weight\n" not in source and ".bias\n" not in source


def test_a_member_that_moves_between_tables_recompiles():
    """A parameter replaced by a buffer, a plain attribute or None; a submodule replaced by a
    function: each call matches eager (the table read finds nothing there and rejects)."""
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    tm = thunder.jit(m)
    x = torch.randn(4, 3)
    torch.testing.assert_close(tm(x), m(x))
    bias = m.bias.detach().clone()
    del m.bias
    m.register_buffer("bias", bias * 2)
    torch.testing.assert_close(tm(x), m(x))
    assert "bias is no longer a parameter" in str(thunder.cache_miss_reasons(tm)[-1])
    del m.bias
    m.bias = bias * 3  # a plain attribute now, in the instance dict
    torch.testing.assert_close(tm(x), m(x))
    del m.bias
    m.bias = None
    torch.testing.assert_close(tm(x), m(x))
    assert thunder.cache_misses(tm) == 4

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.act = torch.nn.ReLU()

        def forward(self, x):
            return self.act(x) + 1

    b = Block()
    tb = thunder.jit(b)
    torch.testing.assert_close(tb(x), b(x))
    del b.act
    b.act = torch.tanh
    torch.testing.assert_close(tb(x), b(x))
    assert thunder.cache_misses(tb) == 2


def test_a_module_class_with_its_own_getattr_is_read_through_it():
    """A module class that answers attributes itself (a property, ``__getattr__``) keeps plain reads."""

    class Scaled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = torch.nn.Linear(3, 3)
            self.factor = 2.0

        def __getattr__(self, name):
            if name == "weight":
                return super().__getattr__("inner").weight * self.factor
            return super().__getattr__(name)

        def forward(self, x):
            return x @ self.weight

    m = Scaled()
    tm = thunder.jit(m)
    x = torch.randn(2, 3)
    torch.testing.assert_close(tm(x), m(x))
    assert "_NOT_A_MEMBER" not in _prologue_source(tm)
    m.factor = 3.0
    torch.testing.assert_close(tm(x), m(x))


def test_a_hook_the_program_registers_runs_in_the_same_call():
    """A forward hook registered by the program itself (transformers installs its output-capturing hooks
    lazily, on the first call that asks for hidden states) runs for the submodule calls that follow it, in
    that very call as in eager (the shortcut that skips hooks looked at the module's own, still empty,
    hook dict)."""

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)])
            self.installed = False
            self.captured = None

        def forward(self, x):
            captured = []
            if not self.installed:
                for layer in self.layers:
                    layer.register_forward_hook(lambda mod, args, out: self.captured.append(out))
                self.installed = True
            self.captured = captured
            for layer in self.layers:
                x = layer(x)
            return x, tuple(captured)

    torch.manual_seed(0)
    m = Model()
    eager = Model()
    eager.load_state_dict(m.state_dict())
    tm = thunder.jit(m)
    x = torch.randn(2, 3)
    for _ in range(3):
        (got, got_captured), (want, want_captured) = tm(x), eager(x)
        torch.testing.assert_close(got, want)
        assert len(got_captured) == len(want_captured) == 2
        for a, b in zip(got_captured, want_captured):
            torch.testing.assert_close(a, b)
    assert len(m.layers[0]._forward_hooks) == len(eager.layers[0]._forward_hooks) == 1


class _Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.body, self.head, self.scale = torch.nn.Linear(3, 3), torch.nn.Linear(3, 2), 2.0

    def forward(self, x):
        return self.head(self.body(x)) * self.scale


def test_attributes_set_on_the_compiled_module_are_the_originals():
    # Note [Attributes set on a compiled module]: a new head for fine-tuning was kept on the wrapper while the calls
    # ran the old one (the result had the old head's 2 columns)
    torch.manual_seed(0)
    model, x = _Classifier(), torch.randn(4, 3)
    names = set(vars(model))
    jm = thunder.jit(model)
    jm(x)
    assert set(vars(model)) == names  # the wrapper's own state stays the wrapper's
    jm.head, jm.scale = torch.nn.Linear(3, 5), 3.0
    assert model.head is jm.head and model.scale == 3.0
    torch.testing.assert_close(jm(x), model(x))
    assert [n for n, _ in jm.named_parameters()] == [n for n, _ in model.named_parameters()]
    jm.training = False
    assert not model.training
    del jm.scale
    assert not hasattr(model, "scale")
    with pytest.raises(AttributeError, match="scale"):
        jm(x)


def test_a_deep_copy_of_a_compiled_module_is_a_compiled_copy():
    torch.manual_seed(0)
    model, x = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)), torch.randn(4, 3)
    jm = thunder.jit(model)
    jm(x)
    copied = copy.deepcopy(jm)  # was "cannot pickle 'module' object"
    assert isinstance(copied, ThunderModule) and copied._model is not model
    assert all(p is not q for p, q in zip(copied.parameters(), model.parameters()))
    reference = copy.deepcopy(model)
    torch.testing.assert_close(copied(x), reference(x))
    bn = copied.get_submodule("1")
    torch.testing.assert_close(bn.running_mean, reference[1].running_mean)
    assert not torch.equal(bn.running_mean, model[1].running_mean)  # the copy's buffers are its own


def test_a_compiled_container_module_is_indexed_iterated_and_sized_as_the_original():
    # Note [A compiled container module]: jm[0], len(jm) and iter(jm) raised TypeError
    nn = torch.nn
    seq = nn.Sequential(nn.Linear(3, 3), nn.ReLU())
    jm = thunder.jit(seq)
    assert len(jm) == 2 and jm[0] is seq[0] and list(jm) == list(seq) and jm[-1] is seq[1]
    assert isinstance(jm, ThunderModule) and repr(jm).startswith("ThunderModule(")
    torch.testing.assert_close(jm(torch.ones(2, 3)), seq(torch.ones(2, 3)))
    blocks = nn.ModuleDict({"a": nn.Linear(2, 2)})
    jd = thunder.jit(blocks)
    assert "a" in jd and list(jd) == ["a"] and jd["a"] is blocks["a"]
    plain = thunder.jit(nn.Linear(2, 2))  # not a container: no len, and always true
    assert bool(plain) and not hasattr(type(plain), "__len__")


def test_modules_the_program_makes_match_eager_and_hit_the_cache():
    # nn.Module.__init__ of a module made inside the program runs natively (SpecialCallsMixin._module_init): the
    # module is the program's own (no guards on it), its state is eager's, and a second call hits.
    class Gate(torch.nn.Module):
        def __init__(self, k):
            super().__init__()
            self.k = k
            self.register_buffer("offset", torch.ones(3))

        def forward(self, t):
            return t * self.k + self.offset

    class Mixed(torch.nn.Module):
        call_super_init = True  # passes its arguments on to the next class's __init__: interpreted

        def __init__(self):
            super().__init__()

        def forward(self, t):
            return t - 1

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(3)])

        def forward(self, t):
            for layer in self.layers[:2]:  # a slice makes a new ModuleList
                t = layer(t)
            gate = Gate(2.0)
            return Mixed()(gate(t)), gate.training, len(gate._modules), sorted(gate._buffers)

    net, x = Net(), torch.randn(4, 3)
    jm = thunder.jit(net)
    for _ in range(2):
        out, expected = jm(x), net(x)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1:] == expected[1:]
    assert thunder.cache_misses(jm) == 1 and thunder.cache_hits(jm) == 1


def test_module_calls_interpret_no_code_of_thunders():
    # Note [Module calls]: the tracer runs _module_call itself; interpreted, it was a frame and a dozen instructions
    # per module call.
    m = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
    jm = thunder.jit(m, debug_options=thunder.DebugOptions(record_interpreter_history=True))
    torch.testing.assert_close(jm(torch.ones(2, 3)), m(torch.ones(2, 3)))
    files = {e["filename"] for e in thunder.last_interpreter_log(jm) if isinstance(e, dict) and e["kind"] == "Line"}
    assert files and not any("special_calls" in f for f in files), files


def test_a_parameter_the_program_makes_and_computes_with_is_eager_s():
    """``nn.Parameter(t)`` in the program (peft's DoRA): a leaf cut from ``t``'s graph, a Parameter to ``isinstance``;
    returned or kept on a module it is refused after a first eager call, as before (Note [A parameter the program
    makes and uses])."""

    def f(x, w):
        p = torch.nn.Parameter(w.t())
        frozen = torch.nn.Parameter(w.t(), requires_grad=False)
        return x @ p + x @ frozen, isinstance(p, torch.nn.Parameter), p.is_leaf, p.requires_grad, frozen.requires_grad

    x, w = torch.randn(2, 3, requires_grad=True), torch.randn(4, 3, requires_grad=True)
    jf = thunder.jit(f)
    for _ in range(2):
        out, expected = jf(x, w), f(x, w)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1:] == expected[1:]
        (gx,) = torch.autograd.grad(out[0].sum(), x)
        (expected_gx,) = torch.autograd.grad(expected[0].sum(), x)
        torch.testing.assert_close(gx, expected_gx)
    assert thunder.cache_misses(jf) == 1

    def returned(x):
        return torch.nn.Parameter(x * 2)

    class Built(torch.nn.Module):
        def forward(self, x):
            return torch.nn.Linear(3, 3)(x)

    class Holder(torch.nn.Module):  # registers no parameter it made: traced, as before
        def __init__(self):
            super().__init__()
            self.register_parameter("bias", None)

    class Checks(torch.nn.Module):
        def forward(self, x):
            return x * 2 if Holder().bias is None else x

    jm = thunder.jit(Checks())
    for _ in range(2):
        torch.testing.assert_close(jm(x), x * 2)
    assert thunder.cache_misses(jm) == 1

    for fn in (returned, Built()):
        jfn = thunder.jit(fn)
        torch.manual_seed(0)
        expected = fn(x.detach())
        torch.manual_seed(0)
        assert type(jfn(x.detach())) is type(expected)  # the first call ran eagerly
        with pytest.raises(thunder.core.errors.MakesParameters, match="makes a new parameter"):
            jfn(x.detach())
