"""Programs written as ML engineers write them, where the jitted call differed from eager: a policy's
``torch.distributions`` with argument validation switched off and on between calls
(``Distribution.set_default_validate_args``); ``Tensor.to(memory_format=torch.channels_last)``; a module made by
``torch.jit.trace``; ``torch.vmap`` over a dict of stacked parameters (``torch.func.stack_module_state``); nested and
masked tensors made in the program; a query of the installed packages (``importlib.metadata``, which a torchmetrics
metric's first ``update`` makes). Each runs the program eagerly and jitted on several calls and compares the values,
or checks the error names the op and the user's line."""

from __future__ import annotations

import importlib.metadata
import warnings

import pytest
import torch
import torch.distributions as D

import thunder
from thunder.core.errors import UnsupportedOpError

try:
    from lightning_utilities.core.imports import RequirementCache  # torchmetrics' dependency
except ImportError:
    RequirementCache = None


def _outcome(f, *args):
    try:
        return f(*args)
    except Exception as e:  # eager's error, compared by type
        return type(e)


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.allclose(a, b, equal_nan=True)
    return a == b


def _log_prob(mu, log_std, action):
    return D.Normal(mu, log_std.exp()).log_prob(action).sum(-1)


@pytest.fixture
def _restores_validation():
    saved = D.Distribution._validate_args
    yield
    D.Distribution.set_default_validate_args(saved)


@pytest.mark.usefixtures("_restores_validation")
@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_distribution_validation_switched_between_calls_is_seen(cache):
    # ``set_default_validate_args`` sets a class attribute of torch's, which a library's class was taken to hold
    # fixed: a trace made with validation off was reused after it was switched back on, and an invalid scale gave
    # NaNs where eager raises ValueError.
    jitted = thunder.jit(_log_prob, cache=cache)
    for validate in (True, False, True, False, True):
        D.Distribution.set_default_validate_args(validate)
        for scale in (1.0, -1.0):
            args = (torch.zeros(2, 3), torch.full((2, 3), scale).log(), torch.randn(2, 3))
            expected, actual = _outcome(_log_prob, *args), _outcome(jitted, *args)
            assert _same(expected, actual), (validate, scale, expected, actual)


def _to_channels_last(x, w):
    y = x.to(memory_format=torch.channels_last)  # as vision training loops write it, for the faster kernels
    z = x.to(torch.float64, memory_format=torch.channels_last)
    return torch.nn.functional.conv2d(y, w), y.stride(), z.stride(), y.is_contiguous(memory_format=torch.channels_last)


def _updates_channels_last(x):
    x.to(memory_format=torch.channels_last).add_(1)  # updates ``x`` itself where it is channels-last already
    return x * 1


@pytest.mark.parametrize("channels_last_input", [False, True])
def test_to_channels_last_is_eagers(channels_last_input):
    # ``Tensor.to(memory_format=torch.channels_last)`` was refused (``.contiguous(memory_format=...)`` was not).
    layout = torch.channels_last if channels_last_input else torch.contiguous_format
    jitted, updates = thunder.jit(_to_channels_last), thunder.jit(_updates_channels_last)
    for _ in range(2):
        x = torch.randn(2, 3, 6, 6).to(memory_format=layout).requires_grad_()
        w = torch.randn(4, 3, 3, 3, requires_grad=True)
        expected, actual = _to_channels_last(x, w), jitted(x, w)
        assert actual[1:] == expected[1:]
        torch.testing.assert_close(actual[0], expected[0])
        expected_grads = torch.autograd.grad(expected[0].sum(), (x, w))
        torch.testing.assert_close(torch.autograd.grad(actual[0].sum(), (x, w)), expected_grads)
        x = torch.randn(2, 3, 4, 4).to(memory_format=layout)
        x_copy = x.clone(memory_format=torch.preserve_format)
        torch.testing.assert_close(updates(x_copy), _updates_channels_last(x))
        torch.testing.assert_close(x_copy, x)
    with pytest.raises(RuntimeError, match="required rank 5 tensor to use channels_last_3d format"):
        thunder.jit(lambda x: x.to(memory_format=torch.channels_last_3d))(torch.randn(2, 3, 4, 4))


class _Head(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, x):
        return self.linear(x).relu()


class _WithTracedHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.head = torch.jit.trace(_Head(), torch.randn(1, 3))  # a model exported by torch.jit.trace, reused

    def forward(self, x):
        return self.head(x * 2)


@pytest.mark.filterwarnings("ignore:`torch.jit.trace")
def test_a_module_made_by_torch_jit_trace_is_refused_as_a_scripted_one():
    # A traced module's ``forward`` is a ``ScriptMethod``, which was taken for an unknown torch function ("Add a
    # symbol for it with @thunder.torch.torchsymbol"), where a scripted module says what to do.
    refused = r"TorchScript module .*test_probe_findings10.py:\d+ in _WithTracedHead.forward.*Pass the original nn.Module"
    with pytest.raises(UnsupportedOpError, match=refused):
        thunder.jit(_WithTracedHead())(torch.randn(2, 3))


class _Affine(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3))
        self.bias = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        return torch.sin(x * self.weight + self.bias)


_ENSEMBLE = [_Affine() for _ in range(4)]
_BASE = _Affine().to("meta")


def _ensemble(params, buffers, x):
    # torch.func's model ensembling recipe: the members' parameters stacked into one dict, mapped by one in_dim
    def member(p, b, x):
        return torch.func.functional_call(_BASE, (p, b), (x,))

    return torch.vmap(member, in_dims=(0, 0, None))(params, buffers, x)


def _by_leaf(d, x):
    return torch.vmap(lambda d, x: d["scale"][0] * x + d["shift"], in_dims=({"scale": [1], "shift": 0}, None))(d, x)


def test_vmap_over_a_dict_of_stacked_parameters_is_eagers():
    # A pytree argument (a dict) mapped by one in_dim, or by a pytree of in_dims, was refused with the ValueError
    # vmap gives a non-tensor, and the call ran eagerly ("please report it").
    jitted, by_leaf = thunder.jit(_ensemble), thunder.jit(_by_leaf)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # an eager run instead of the trace (EagerRunWarning) fails the test
        for _ in range(2):
            params, buffers = torch.func.stack_module_state(_ENSEMBLE)
            x = torch.randn(5, 3)
            expected = _ensemble(params, buffers, x)
            actual = jitted({k: v.detach().requires_grad_() for k, v in params.items()}, buffers, x)
            torch.testing.assert_close(actual, expected)
            d = {"scale": [torch.randn(3, 4)], "shift": torch.randn(4, 3)}
            torch.testing.assert_close(by_leaf(d, x[0]), _by_leaf(d, x[0]))


def _nested(a, b, layout):
    nt = torch.nested.nested_tensor([a, b], layout=layout)  # variable-length sequences, as torch documents
    return nt.sin().to_padded_tensor(0.0)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")
@pytest.mark.parametrize("layout", [torch.strided, torch.jagged])
def test_a_nested_tensor_made_in_the_program_is_refused_at_the_user_s_line(layout):
    # A strided nested tensor made in the program stopped tracing at a TypeError and ran eagerly ("please report
    # it"); a jagged one failed on a storage read inside torch, naming neither the op nor the user's line.
    refused = r"torch.nested.nested_tensor inside the jitted function \(called at .*test_probe_findings10.py:\d+ in _nested"
    with pytest.raises(UnsupportedOpError, match=refused):
        thunder.jit(_nested)(torch.randn(2, 3), torch.randn(4, 3), layout)


def _masked_mean(x, mask):
    return torch.masked.masked_tensor(x, mask).sum()


@pytest.mark.filterwarnings("ignore:The PyTorch API of MaskedTensors")
def test_a_masked_tensor_made_in_the_program_is_refused_at_the_user_s_line():
    # It stopped tracing at a RuntimeError of torch's autograd and ran eagerly ("please report it").
    refused = r"torch.masked.masked_tensor inside the jitted function \(called at .*test_probe_findings10.py:\d+ in _masked"
    with pytest.raises(UnsupportedOpError, match=refused):
        thunder.jit(_masked_mean)(torch.randn(2, 3), torch.rand(2, 3) > 0.5)


def _scaled_by_torch_version(x):
    major = int(importlib.metadata.version("torch").split(".")[0])  # a library's feature check, as transformers does
    return x * major


def _scaled_if_available(x):
    return x * 2 if RequirementCache("torch>=2.0") else x  # what a torchmetrics metric's update asks on first use


@pytest.mark.parametrize("fn", [_scaled_by_torch_version, _scaled_if_available])
def test_a_query_of_the_installed_packages_runs_as_eagers(fn, monkeypatch):
    # ``importlib.metadata.version`` clears a cache of its own for a sys.path entry that does not exist: interpreted,
    # that was refused as the program's ``cache_clear()``, so a torchmetrics metric's first ``update`` in a jitted
    # module failed.
    if fn is _scaled_if_available and RequirementCache is None:
        pytest.skip("lightning_utilities is not installed")
    monkeypatch.syspath_prepend("/nonexistent-path-of-test-probe-findings10")
    jitted = thunder.jit(fn)
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(jitted(x), fn(x))
