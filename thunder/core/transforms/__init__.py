"""Transforms of traces that users who write transforms call: gradients.

``split_forward_backward`` is what ``thunder.jit`` uses to build a training step's forward and
backward traces (Note [Forward and backward traces] in ``autodiff``).

Layer: core. Imports: core.
"""

from thunder.core.transforms.autodiff import (
    ForwardBackward,
    NotDifferentiable,
    requires_grad_outputs,
    split_forward_backward,
)

__all__ = ["ForwardBackward", "NotDifferentiable", "requires_grad_outputs", "split_forward_backward"]
