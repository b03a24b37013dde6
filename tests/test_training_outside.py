"""PyTorch's training utilities and function transforms used around a ``thunder.jit`` module, against eager."""

import io
import pickle

import torch
from torch.func import functional_call

import thunder
from thunder.extend import get_executor

_HOOK_CALLS: list[tuple[int, ...]] = []


def _record_output_shape(module, args, output):  # a module-level hook: hooks pickle by name, as in eager
    _HOOK_CALLS.append(tuple(output.shape))


def test_functional_call_on_a_jitted_module_uses_the_given_parameters():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    jm = thunder.jit(model)
    x = torch.randn(2, 4)
    params = {name: p.detach() * 2 for name, p in model.named_parameters()}
    weight = model.weight
    for _ in range(3):
        torch.testing.assert_close(functional_call(jm, params, (x,)), functional_call(model, params, (x,)))
    assert model.weight is weight  # the Parameter is put back after the call
    torch.testing.assert_close(jm(x), model(x))


def test_functional_call_on_a_jitted_module_with_a_tensor_given_for_a_buffer():
    torch.manual_seed(0)
    model = torch.nn.BatchNorm1d(3).eval()
    jm = thunder.jit(model)
    x = torch.randn(5, 3)
    given = {"running_mean": torch.randn(3), "weight": torch.rand(3)}
    torch.testing.assert_close(functional_call(jm, given, (x,)), functional_call(model, given, (x,)))
    torch.testing.assert_close(jm(x), model(x))


def test_torch_save_of_a_jitted_module_loads_a_compiled_module_in_the_same_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    jm = thunder.jit(model)
    jm.register_forward_hook(_record_output_shape)
    x = torch.randn(5, 4)
    jm(x).sum().backward()  # after a call: the executors' tables hold the functions they ran
    jm.eval()
    buffer = io.BytesIO()
    torch.save(jm, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert isinstance(loaded, type(jm)) and not loaded.training and not loaded._model.training
    torch.testing.assert_close(loaded.state_dict(), jm.state_dict())
    _HOOK_CALLS.clear()
    for _ in range(3):
        torch.testing.assert_close(loaded(x), model(x))
    assert _HOOK_CALLS == [(5, 3)] * 3
    assert thunder.cache_hits(loaded) == 2


def test_a_registered_executor_pickles_as_itself():
    torch_ex = get_executor("torch")
    assert pickle.loads(pickle.dumps(torch_ex)) is torch_ex
