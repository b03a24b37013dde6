"""Rematerialisation (Note [Rematerialisation]): fusions of the backward recompute cheap forward
values instead of having them saved; values and gradients stay eager's."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder.executors import torch_compile

# torchcompile's regions, run as torch's kernels (tests never compile in the background): the
# pass's choices without Inductor's compile time. It takes no part by default (Note
# [Rematerialisation]); here it does.
FUSING = ["torchcompile_background", "torch"]


@pytest.fixture(autouse=True)
def background_rematerializes(monkeypatch):
    monkeypatch.setattr(torch_compile.background_ex, "rematerializes", True)


def saved_names(jfn) -> list[str]:
    return [a.name for a in thunder.last_backward_traces(jfn)[-1].args if not a.name.startswith("g_")]


def check_against_eager(fn, *shapes, executors=FUSING, seed=None):
    inputs = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in shapes]
    twins = [t.detach().clone().requires_grad_() for t in inputs]
    jfn = thunder.jit(fn, executors=executors)
    if seed is not None:
        torch.manual_seed(seed)
    expected = fn(*inputs)
    expected.sum().backward()
    if seed is not None:
        torch.manual_seed(seed)
    got = jfn(*twins)
    got.sum().backward()
    torch.testing.assert_close(got, expected)
    for t, e in zip(twins, inputs):
        torch.testing.assert_close(t.grad, e.grad)
    return jfn


def block(x, w):
    z = torch.relu(x @ w) * 2 + 1
    return F.layer_norm(z, (z.shape[-1],))


def gelu_block(x, w):
    return F.layer_norm(F.gelu(x @ w) * 2 + 1, (16,))


def test_a_fusion_recomputes_arithmetic_from_the_matmul_it_saves_anyway():
    jfn = check_against_eager(block, (8, 16), (16, 16))
    plain = check_against_eager(block, (8, 16), (16, 16), executors=["torch"])
    assert len(saved_names(jfn)) == len(saved_names(plain)) - 1  # ``* 2 + 1`` is recomputed from relu's output
    assert (
        thunder.compile_stats(jfn).last_saved_for_backward_bytes
        < thunder.compile_stats(plain).last_saved_for_backward_bytes
    )
    # Both traces record the step; the recomputed ops run inside the backward's fusion.
    assert thunder.last_traces(jfn)[-3].provenance.pass_name == "Rematerialization"
    backward = thunder.last_backward_traces(jfn)
    assert any(t.provenance.pass_name == "Rematerialization" for t in backward)
    (fusion,) = [b for b in backward[-1].bound_symbols if b.sym.name.startswith("TorchCompile")]
    assert {"mul", "add"} <= {s.sym.name for s in fusion.subsymbols}


def test_values_of_program_inputs_are_recomputed_from_the_inputs():
    jfn = check_against_eager(lambda x, w: torch.relu(x * 2 - w) * (x + 1), (8, 16), (8, 16))
    assert saved_names(jfn) == ["x", "w"]


def test_on_a_cpu_math_library_functions_are_saved_not_recomputed():
    """Recomputing erf costs a CPU more than reading gelu's output back (Note [Rematerialisation])."""
    jfn = check_against_eager(gelu_block, (8, 16), (16, 16))
    (fusion,) = [
        b for b in thunder.last_backward_traces(jfn)[-1].bound_symbols if b.sym.name.startswith("TorchCompile")
    ]
    assert "nn.functional.gelu" not in {s.sym.name for s in fusion.subsymbols}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_cuda_the_backward_recomputes_gelu():
    x = torch.randn(8, 16, device="cuda", requires_grad=True)
    w = torch.randn(16, 16, device="cuda", requires_grad=True)
    jfn = thunder.jit(gelu_block, executors=FUSING)
    jfn(x, w).sum().backward()
    (fusion,) = [
        b for b in thunder.last_backward_traces(jfn)[-1].bound_symbols if b.sym.name.startswith("TorchCompile")
    ]
    assert "nn.functional.gelu" in {s.sym.name for s in fusion.subsymbols}


def test_random_values_are_saved_not_drawn_again():
    def fn(x):
        return F.dropout(torch.sin(x), p=0.5, training=True) * x

    jfn = check_against_eager(fn, (64, 64), seed=1234)
    assert thunder.last_backward_traces(jfn)[-1].args  # the mask (or what it made) is saved


def test_nothing_changes_without_a_fusion_executor():
    jfn = check_against_eager(block, (8, 16), (16, 16), executors=["torch"])
    names = [t.provenance.pass_name for t in thunder.last_traces(jfn) + thunder.last_backward_traces(jfn)]
    assert "Rematerialization" not in names


@pytest.mark.parametrize("write", ["input", "view of an input"])
def test_what_depends_on_a_tensor_written_in_place_is_never_recomputed(write):
    """A recomputation in the backward would read the written contents: exp(buf) must be saved
    as the forward computed it, before buf changed."""

    def fn(x, buf):
        y = torch.exp(buf * 0.5) * x
        (buf if write == "input" else buf[:4]).add_(1)
        return y * torch.sin(x)

    x = torch.randn(8, dtype=torch.float64, requires_grad=True)
    buf, twin = torch.randn(8, dtype=torch.float64), None
    twin = buf.clone()
    jfn = thunder.jit(fn, executors=FUSING)
    jfn(x, buf).sum().backward()
    grad, x.grad = x.grad, None
    fn(x, twin).sum().backward()
    torch.testing.assert_close(grad, x.grad)
    torch.testing.assert_close(buf, twin)


@pytest.mark.parametrize("reduction", ["rms_norm", "cross_entropy"])
def test_reductions_and_losses_match_eager_with_fewer_saved_values(reduction):
    fns = {
        "rms_norm": lambda x, w: F.rms_norm(F.relu(x @ w) + x, (16,)),
        "cross_entropy": lambda x, w: F.cross_entropy(torch.relu(x @ w) * 0.5, torch.arange(8) % 16).unsqueeze(0),
    }
    jfn = check_against_eager(fns[reduction], (8, 16), (16, 16))
    plain = check_against_eager(fns[reduction], (8, 16), (16, 16), executors=["torch"])
    assert (
        thunder.compile_stats(jfn).last_saved_for_backward_bytes
        < thunder.compile_stats(plain).last_saved_for_backward_bytes
    )


def test_regions_that_run_torchs_kernels_until_compiled_take_no_part(monkeypatch):
    """Until torchcompile_background has compiled a region, a recomputation would be a kernel more."""
    monkeypatch.setattr(torch_compile.background_ex, "rematerializes", False)
    jfn = check_against_eager(block, (8, 16), (16, 16))
    assert "Rematerialization" not in [t.provenance.pass_name for t in thunder.last_backward_traces(jfn)]


def test_compiled_regions_recompute_and_match_eager():
    jfn = check_against_eager(block, (8, 16), (16, 16), executors=["torchcompile"])
    assert "Rematerialization" in [t.provenance.pass_name for t in thunder.last_backward_traces(jfn)]
    assert len(saved_names(jfn)) == 5
