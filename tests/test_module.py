"""thunder.jit of nn.Modules (a first version: the module is an input of the trace)."""

from __future__ import annotations

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
