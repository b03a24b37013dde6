"""Regression tests of the silent wrong results that the fifth round of the randomized tester found (``tests/fuzz``,
the ``models`` family: module-level code as users write it in models). Each checks ``thunder.jit`` against eager."""

import pytest
import torch

import thunder


def _grad(fn, param, *args):
    param.grad = None
    fn(*args).sum().backward()
    return param.grad.clone()


@pytest.mark.parametrize(
    "op",
    [lambda x, w: x * w, lambda x, w: w * x, lambda x, w: x / w, lambda x, w: torch.where(x < 0, w, x) * x],
    ids=["mul", "rmul", "div", "where"],
)
def test_gradient_of_a_low_precision_parameter_broadcast_against_a_wider_activation_is_rounded_once(op):
    # A bfloat16 scalar parameter times a float64 vector: eager sums the gradient in float64 and rounds it once; the
    # decomposition broadcast the parameter before converting it, so its gradient was rounded elementwise to bfloat16
    # and summed there (a few last bits off)
    w = torch.nn.Parameter(torch.tensor(-1.0, dtype=torch.bfloat16))
    x = torch.randn(3, dtype=torch.float64, generator=torch.Generator().manual_seed(22)) * 5

    def f(x):
        return op(x, w)

    torch.testing.assert_close(_grad(thunder.jit(f), w, x), _grad(f, w, x), rtol=0, atol=0)
