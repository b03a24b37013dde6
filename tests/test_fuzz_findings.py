"""What the widened randomized tester (``tests/fuzz``) found, each kept as a regression test against eager."""

from __future__ import annotations

import copy

import pytest
import torch

import thunder


def test_deepcopy_of_a_computed_tensor_is_a_new_tensor_and_copy_shares_it():
    def f(x):
        y = x * 2
        d = copy.deepcopy(y)
        d.add_(1)
        c = copy.copy(y)  # eager: shares y's storage
        c.mul_(10)
        items = copy.deepcopy([y, 1, "a", y])
        items[0].add_(5)
        return y, d, c, items, items[0] is items[3]

    x = torch.randn(3)
    expected, actual = f(x), thunder.jit(f)(x)
    for e, a in zip(expected[:3], actual[:3]):
        torch.testing.assert_close(a, e)
    torch.testing.assert_close(actual[3][0], expected[3][0])
    assert actual[3][1:3] == expected[3][1:3] and actual[4] is expected[4] is True


def test_deepcopy_of_a_computed_tensor_that_requires_grad_raises_as_eager():
    def f(x):
        return copy.deepcopy([x * 2, 1])

    x = torch.randn(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="graph leaves"):
        f(x)
    with pytest.raises(RuntimeError, match="graph leaves"):
        thunder.jit(f)(x)


def test_tensor_queries_take_torchs_keyword_names():
    def f(x):
        return torch.is_floating_point(input=x), torch.is_complex(input=x), torch.numel(input=x)

    x = torch.randn(3)
    assert thunder.jit(f)(x) == f(x)
