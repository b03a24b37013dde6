"""Gradients through the kernels thunder keeps whole (attention's fused and math kernels, a linear layer, kernels
that compute several gradients), against eager, bitwise where eager runs the same kernel. See also
``test_autograd.py``."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import thunder


def _attention_matches_eager(qkv, weights, backward="sdpa_flash_cpu_backward", **kwargs):
    """Forward and gradients of attention through thunder are eager's bitwise, with eager's backward
    kernel (``backward``); a mask that requires grad gets its gradient too."""
    mask = kwargs.pop("attn_mask", None)  # an argument, not a constant of the traced function
    leaves = [t.requires_grad_() for t in qkv] + ([mask] if mask is not None and mask.requires_grad else [])
    twins = [t.detach().clone().requires_grad_() for t in leaves]

    def f(q, k, v, mask):
        return (F.scaled_dot_product_attention(q, k, v, attn_mask=mask, **kwargs) * weights).sum()

    jf = thunder.jit(f)
    out, expected = jf(*leaves[:3], mask), f(*twins[:3], twins[3] if len(twins) > 3 else mask)
    assert torch.equal(out, expected)
    out.backward()
    expected.backward()
    for a, b in zip(leaves, twins):
        assert torch.equal(a.grad, b.grad)
    assert backward in str(thunder.last_backward_traces(jf)[-1])


@pytest.mark.parametrize("layout", ["contiguous", "heads_transposed", "last_dim_strided"])
def test_attention_gradients_are_eagers_with_its_fused_kernels(layout):
    """Where eager's F.scaled_dot_product_attention runs the CPU flash kernel, thunder's forward keeps
    its logsumexp and the backward is eager's fused one; other layouts get eager's own backward."""
    make = {
        "contiguous": lambda: torch.randn(2, 2, 8, 16),
        "heads_transposed": lambda: torch.randn(2, 8, 2, 16).transpose(1, 2),
        "last_dim_strided": lambda: torch.randn(2, 2, 16, 8).transpose(-1, -2),
    }[layout]
    torch.manual_seed(0)
    weights = torch.arange(512.0).reshape(2, 2, 8, 16)
    _attention_matches_eager([make() for _ in range(3)], weights, is_causal=True)
    _attention_matches_eager([make() for _ in range(3)], weights, attn_mask=torch.randn(2, 1, 8, 8))


def test_grouped_query_attention_gradients_are_eagers():
    torch.manual_seed(0)
    qkv = [torch.randn(2, 4, 8, 8), torch.randn(2, 2, 8, 8), torch.randn(2, 2, 8, 8)]
    _attention_matches_eager(qkv, torch.arange(512.0).reshape(2, 4, 8, 8), is_causal=True, enable_gqa=True)


@pytest.mark.parametrize(
    "case",
    ["multi_query", "multi_query_bool_mask", "causal_negative_scale", "broadcast_query_batch", "mask_requires_grad",
     "grouped_mask_requires_grad", "float64"],
)  # fmt: skip
def test_attention_gradients_are_eagers_where_it_runs_the_math_kernel(case):
    """Where eager's CPU attention runs its math kernel (heads that broadcast, a mask that requires grad),
    thunder's forward keeps its attention weights and the backward is eager's autograd of that kernel,
    bitwise: a few kernels in one symbol instead of the decomposition's recomputed softmax."""
    torch.manual_seed(0)
    dtype = torch.float64 if case == "float64" else torch.float32
    qs, ks = {"broadcast_query_batch": ((1, 2, 8, 16), (2, 2, 8, 16)),
              "grouped_mask_requires_grad": ((2, 4, 8, 16), (2, 2, 8, 16))}.get(case, ((2, 2, 8, 16), (2, 1, 8, 16)))  # fmt: skip
    qkv = [torch.randn(qs, dtype=dtype), torch.randn(ks, dtype=dtype), torch.randn(ks, dtype=dtype)]
    kwargs = {
        "multi_query_bool_mask": {"attn_mask": torch.rand(2, 1, 8, 8) > 0.3},
        "causal_negative_scale": {"is_causal": True, "scale": -0.3},
        "broadcast_query_batch": {"attn_mask": torch.rand(2, 1, 8, 8) > 0.3},
        "mask_requires_grad": {"attn_mask": torch.randn(2, 1, 8, 8, requires_grad=True)},
        "grouped_mask_requires_grad": {"attn_mask": torch.randn(2, 1, 8, 8, requires_grad=True), "enable_gqa": True},
        "float64": {"attn_mask": torch.randn(2, 1, 8, 8, dtype=dtype)},
    }.get(case, {})
    if case == "mask_requires_grad":
        qkv[1], qkv[2] = torch.randn(2, 2, 8, 16), torch.randn(2, 2, 8, 16)
    weights = torch.linspace(-1, 1, math.prod(qs[:-1]) * 16, dtype=dtype).reshape(*qs[:-1], 16)
    if case == "broadcast_query_batch":
        weights = torch.linspace(-1, 1, 512).reshape(2, 2, 8, 16)
    _attention_matches_eager(qkv, weights, backward="sdpa_math_backward", **kwargs)


def test_a_kernel_that_computes_several_gradients_computes_only_those_asked_for():
    # The input of the first convolution does not require grad: eager skips its gradient, so must we.
    conv = torch.nn.Conv2d(3, 4, 3).double()
    x = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    jm = thunder.jit(conv)
    jm(x).sum().backward()
    expected = [p.grad.clone() for p in conv.parameters()]
    for p in conv.parameters():
        p.grad = None
    conv(x).sum().backward()
    for got, want in zip(expected, (p.grad for p in conv.parameters())):
        torch.testing.assert_close(got, want)
    (conv_backward,) = [b for b in thunder.last_backward_traces(jm)[-1].bound_symbols if "convolution_backward" in b.sym.name]
    assert conv_backward.args[-1] == (False, True, True)


def test_a_linear_layer_on_rows_is_differentiated_without_reshapes():
    jm = thunder.jit(torch.nn.Linear(4, 3).double())
    x = torch.randn(5, 4, dtype=torch.float64, requires_grad=True)
    jm(x).sum().backward()
    names = [b.sym.name for b in thunder.last_backward_traces(jm)[-1].bound_symbols]
    assert not [n for n in names if "reshape" in n]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_with_a_bool_mask_and_fully_masked_rows_is_eagers(dtype):
    # Left padding masks whole rows: eager's kernel gives 0 there, values and gradients (a softmax
    # decomposition would give NaN gradients).
    torch.manual_seed(0)
    qkv = [torch.randn(2, 2, 4, 8, dtype=dtype) for _ in range(3)]
    mask = torch.rand(2, 1, 4, 4) > 0.3
    mask[0, 0, 1, :] = False
    _attention_matches_eager(qkv, torch.arange(64.0).reshape(2, 1, 4, 8).to(dtype), attn_mask=mask)


def test_attention_decomposition_gives_fully_masked_rows_zero_values_and_gradients():
    # A mask that requires grad keeps the decomposition (no fused kernel): eager's safe softmax is 0 there.
    def f(q, k, v, m):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=m)

    torch.manual_seed(0)
    qkv = [torch.randn(1, 2, 4, 8, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    mask = torch.zeros(1, 1, 4, 4, dtype=torch.float64)
    mask[..., 1, :] = float("-inf")
    mask.requires_grad_()
    jf = thunder.jit(f)
    got, want = jf(*qkv, mask), f(*qkv, mask)
    torch.testing.assert_close(got, want)
    for g, w in zip(torch.autograd.grad(got.sum(), qkv), torch.autograd.grad(want.sum(), qkv)):
        torch.testing.assert_close(g, w)
        assert not g.isnan().any()
