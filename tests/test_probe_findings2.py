"""What a second round of probing with programs people write found (the first round's are in
tests/test_probe_findings.py), each kept as a regression test against eager."""

from __future__ import annotations

import contextlib

import pytest
import torch

import thunder
from thunder.core.errors import ThunderRuntimeError


def _leaf_by_assignment(x):
    y = torch.zeros(3)
    y.requires_grad = True  # as y.requires_grad_(), the way people write it too
    return x * y, y


def test_assigning_requires_grad_is_as_requires_grad_():
    # ``y.requires_grad = True`` was set on the traced value only: the results did not require grad, so a backward
    # through them failed or (mixed with other leaves) silently gave no gradient for ``y``.
    jitted = thunder.jit(_leaf_by_assignment)
    for _ in range(2):
        x = torch.randn(3)
        (expected, expected_y), (actual, actual_y) = _leaf_by_assignment(x), jitted(x)
        assert actual.requires_grad and actual_y.requires_grad and actual_y.is_leaf
        torch.testing.assert_close(actual, expected)
        actual.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(actual_y.grad, expected_y.grad)


def test_assigning_requires_grad_gives_eager_s_errors():
    def not_a_bool(x):
        y = x * 1
        y.requires_grad = 1
        return y

    def not_a_leaf(x):
        y = x * 1
        y.requires_grad = False
        return y

    def an_input(x):
        x.requires_grad = True
        return x * 2

    with pytest.raises(RuntimeError, match="requires_grad must be a bool"):
        thunder.jit(not_a_bool)(torch.randn(3))
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        thunder.jit(not_a_leaf)(torch.randn(3, requires_grad=True))
    with pytest.raises(ThunderRuntimeError, match="changes a tensor the jitted function was given"):
        thunder.jit(an_input)(torch.randn(3))


def _densified_or_doubled(x):
    return x.to_dense() * 3 if x.is_sparse else x * 2


def test_a_sparse_or_nested_input_is_a_clear_error():
    # A sparse input was traced as a dense tensor: ``x.is_sparse`` was False (the other branch ran and returned a sparse
    # tensor with other values), and a cached entry traced with a dense tensor took a sparse one of the same shape.
    dense = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    jitted = thunder.jit(_densified_or_doubled)
    torch.testing.assert_close(jitted(dense), _densified_or_doubled(dense))
    for x in (dense.to_sparse(), dense.to_sparse_csr()):
        with pytest.raises(thunder.core.errors.ThunderValueError, match=r"x is a tensor of layout torch.sparse_\w+, "):
            jitted(x)  # the cached entry does not take it
        with pytest.raises(thunder.core.errors.ThunderValueError, match="which thunder.jit does not trace"):
            thunder.jit(_densified_or_doubled)(x)
    nested = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])
    with pytest.raises(thunder.core.errors.ThunderValueError, match="x is a nested tensor"):
        thunder.jit(_densified_or_doubled)(nested)
    quantized = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
    with pytest.raises(thunder.core.errors.ThunderValueError, match=r"x is a quantized tensor \(torch.qint8\)"):
        thunder.jit(lambda x: x.is_quantized)(quantized)  # it was False


def _sin_poly(x, w):
    return (x.sin() * 2 + x * x).sum(0) * w


def test_forward_mode_ad_through_a_torchcompile_region_carries_tangents():
    # A region compiled by Inductor dropped the dual tensors' tangents: the result's tangent was None.
    import torch.autograd.forward_ad as fwAD

    jitted = thunder.jit(_sin_poly, executors=["torchcompile"])
    for _ in range(2):  # the first call compiles the region, the second runs the compiled graph
        with fwAD.dual_level():
            x = fwAD.make_dual(torch.ones(2, 3), torch.full((2, 3), 2.0))
            expected, actual = fwAD.unpack_dual(_sin_poly(x, torch.ones(3))), fwAD.unpack_dual(jitted(x, torch.ones(3)))
            torch.testing.assert_close(actual.primal, expected.primal)
            torch.testing.assert_close(actual.tangent, expected.tangent)
        torch.testing.assert_close(jitted(torch.ones(2, 3), torch.ones(3)), _sin_poly(torch.ones(2, 3), torch.ones(3)))


def _weighted_sum(x, y):
    return ((x.sin() * y + 1) * x).sum()


@pytest.mark.parametrize("executors", [None, ["torchcompile"]], ids=["default", "torchcompile"])
def test_vmap_of_a_jitted_function_is_eager_s_on_every_call(executors):
    # The second call under vmap compiled the fused prologue, whose tensor check called requires_grad_() on an example
    # tensor: torch refuses it under a functorch transform. A region compiled by Inductor could not read functorch's
    # wrappers ("Cannot access data pointer of Tensor that doesn't have storage").
    jitted = thunder.jit(_weighted_sum, executors=executors)
    jitted(torch.randn(3), torch.randn(3))  # an entry made outside vmap serves the calls under it too
    for _ in range(3):
        x, y = torch.randn(4, 3), torch.randn(3)
        expected = torch.vmap(_weighted_sum, in_dims=(0, None))(x, y)
        torch.testing.assert_close(torch.vmap(jitted, in_dims=(0, None))(x, y), expected)


_W = torch.randn(3, requires_grad=True)


def _grad_on_inside(x):
    with torch.enable_grad():
        return x * _W


@contextlib.contextmanager
def _grad_on_in_inference_mode():
    with torch.inference_mode(), torch.enable_grad():
        yield


@pytest.mark.parametrize("fn", [_grad_on_inside, lambda x: x * _W], ids=["enable_grad inside", "plain"])
def test_enable_grad_inside_inference_mode_records_no_autograd_as_in_eager(fn):
    # ``enable_grad()`` turns grad mode on even in inference mode, where eager's results still require no grad; the
    # trace made them require grad (a backward through them reached _W). A trace made outside inference mode (no_grad
    # at the call) was reused inside it, and the other way round. (Not covered: a trace made outside inference mode,
    # with grad on, reused inside ``inference_mode(): enable_grad():`` around the call; the prologue does not read
    # inference mode for every trace that depends on grad mode.)
    jitted = thunder.jit(fn)
    modes = [torch.inference_mode, torch.no_grad, torch.inference_mode, contextlib.nullcontext]
    if fn is not _grad_on_inside:
        modes = [_grad_on_in_inference_mode, contextlib.nullcontext, torch.no_grad]
    for mode in modes:
        x = torch.randn(3)
        with mode():
            expected, actual = fn(x), jitted(x)
        assert actual.requires_grad is expected.requires_grad, mode
        torch.testing.assert_close(actual.detach(), expected.detach())


class _CheckpointedBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear, self.norm = torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(lambda t: self.norm(self.linear(t)).relu(), x, use_reentrant=False)


def test_buffers_updated_inside_a_checkpoint_region_are_updated_as_in_eager():
    # eager's checkpoint reruns the region's forward in the backward, so a BatchNorm inside updates its running
    # statistics twice a step; the backward recomputed only the region's pure ops (more in tests/test_checkpoint.py).
    import copy

    torch.manual_seed(0)
    model = _CheckpointedBatchNorm()
    reference, jitted = copy.deepcopy(model), thunder.jit(model)
    x = torch.randn(4, 3, requires_grad=True)
    reference(x).sum().backward()
    jitted(x).sum().backward()
    torch.testing.assert_close(dict(model.named_buffers()), dict(reference.named_buffers()))
