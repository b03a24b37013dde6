"""Programs written as ML engineers write them, where the jitted call differed from eager: a policy's
``torch.distributions`` with argument validation switched off and on between calls
(``Distribution.set_default_validate_args``). Each runs the program eagerly and jitted on several calls and compares
the values or the error."""

from __future__ import annotations

import pytest
import torch
import torch.distributions as D

import thunder


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
