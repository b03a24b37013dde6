"""OpInfo: a small sample generator, a torch reference, error inputs with their messages,
and skips as data (PyTorch's OpInfo idea, kept small)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import torch
from torch.testing import make_tensor

FLOATS = (torch.float32, torch.float64, torch.bfloat16)
FLOATS_AND_INT = (torch.float32, torch.float64, torch.bfloat16, torch.int64)
ALL = (torch.float32, torch.float64, torch.bfloat16, torch.int64, torch.bool)


@dataclass
class SampleInput:
    args: tuple
    kwargs: dict = field(default_factory=dict)
    name: str = ""

    def __repr__(self) -> str:
        def short(x):
            if isinstance(x, torch.Tensor):
                return f"Tensor{tuple(x.shape)}:{str(x.dtype).removeprefix('torch.')}" + (
                    "" if x.is_contiguous() else ":noncontig"
                )
            return repr(x)

        parts = [short(a) for a in self.args] + [f"{k}={short(v)}" for k, v in self.kwargs.items()]
        return f"SampleInput({', '.join(parts)})"


@dataclass
class ErrorInput:
    sample: SampleInput
    exc_type: type[BaseException]
    match: str  # regex the message must match


@dataclass
class OpInfo:
    """One op: how to call it, what to feed it, and what to expect."""

    name: str
    op: Callable  # the torch callable (function, method via lambda, or operator)
    sample_inputs: Callable[[torch.dtype, str], Iterable[SampleInput]]
    dtypes: tuple = FLOATS_AND_INT
    error_inputs: Callable[[str], Iterable[ErrorInput]] | None = None
    # (test name or "*", dtype or None, reason): expected failures as data
    skips: tuple = ()
    random: bool = False  # results are random: only metadata is compared
    atol: dict = field(default_factory=dict)  # dtype -> atol override
    rtol: dict = field(default_factory=dict)
    mutates: bool = False  # in-place op: compare the mutated inputs too
    # argument positions or keyword names of floating tensors that are not differentiated
    # (buffers such as batch_norm's running statistics): they never require grad
    no_grad_args: tuple = ()
    # The gradient test's expectations, per sample: (kind, predicate over a SampleInput or
    # None for every sample, reason). Kinds: "xfail" (a bug: strict expected failure),
    # "fallback" (the split refuses it and torch's autograd runs: gradients are still compared),
    # "numeric" (torch's own autograd is no reference: central differences are), "skip" (no
    # gradient comparison: neither torch's autograd nor central differences are a reference).
    grad: tuple = ()

    def skip_reason(self, test: str, dtype: torch.dtype | None) -> str | None:
        for t, d, reason in self.skips:
            if (t == "*" or t == test) and (d is None or d == dtype):
                return reason
        return None

    def grad_expectation(self, sample: SampleInput, kind: str) -> str | None:
        for k, applies, reason in self.grad:
            if k == kind and (applies is None or applies(sample)):
                return reason
        return None


# Expectations of the gradient test (``OpInfo.grad``) shared by many ops.
GRAD_INPLACE_FALLBACK = (
    "fallback",
    None,
    "an in-place update of a tensor that requires grad: the split refuses it (Note [Forward and backward "
    "traces]) and torch's autograd runs, or, when nothing requiring grad is returned, there is no split",
)


def has_nan(sample: SampleInput) -> bool:
    return any(isinstance(a, torch.Tensor) and a.dtype.is_floating_point and a.isnan().any() for a in sample.args)


def has_nonfinite(sample: SampleInput) -> bool:
    return any(
        isinstance(a, torch.Tensor) and a.dtype.is_floating_point and not a.isfinite().all() for a in sample.args
    )


def make(
    shape, dtype, device="cpu", *, low=None, high=None, noncontiguous=False, requires_grad=False, exclude_zero=False
):
    """A random tensor for samples (bf16/float in [-3, 3] unless told otherwise)."""
    if dtype is torch.bool:
        return make_tensor(shape, dtype=dtype, device=device, noncontiguous=noncontiguous)
    return make_tensor(
        shape, dtype=dtype, device=device, low=low, high=high, noncontiguous=noncontiguous,
        requires_grad=requires_grad, exclude_zero=exclude_zero,
    )  # fmt: skip


def elementwise_unary_shapes():
    """Shapes for unary samples: scalar, vector, matrix, zero-size and a non-contiguous matrix."""
    return [((), False), ((5,), False), ((3, 4), False), ((0, 3), False), ((4, 6), True)]


def elementwise_binary_shapes():
    """Pairs of shapes, broadcasting included."""
    return [((), ()), ((5,), (5,)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((0, 3), (3,)), ((3, 4), ())]


def tolerance(dtype: torch.dtype) -> dict[str, float]:
    if dtype is torch.bfloat16:
        return {"atol": 1e-2, "rtol": 1.6e-2}
    if dtype is torch.float16:
        return {"atol": 1e-3, "rtol": 1e-3}
    return {}
