"""``thunder.Transform``: the hooks a user transform overrides (each returns its input by default).

``thunder.jit(..., transforms=[...])`` takes instances of it and calls each hook through this
declared API, so a misspelt hook name is not silently skipped: the base class's hook runs and
nothing changes.

Layer: core. Imports: nothing of thunder.
"""

from __future__ import annotations

__all__ = ["Transform"]


class Transform:
    """Base class of user transforms; override the hooks you need."""

    def transform_traces_pre_prologue(self, prologue_trace, computation_trace, epilogue_trace, **kwargs):
        """Before the passes: may rewrite the prologue and the computation as traced."""
        return prologue_trace, computation_trace, epilogue_trace

    def transform_module(self, model) -> None:
        """When ``thunder.jit`` wraps a module: may change the ``ThunderModule`` in place."""
        return None

    def transform_state_dict_for_submodule(self, model, submodule_name: str, state_dict: dict) -> dict:
        return state_dict

    def reverse_transform_state_dict_for_submodule(self, model, submodule_name: str, state_dict: dict) -> dict:
        return state_dict

    def transform_trace_post_optimization(self, computation_trace, **kwargs):
        """After executors claimed the ops, on the forward and on the backward trace."""
        return computation_trace
