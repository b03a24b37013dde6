"""ThunderModule: what ``thunder.jit(module)`` returns.

The module is an input of the trace: its parameters, buffers and the attributes ``forward``
reads are unpacked and checked by the prologue (see Note [Provenance] in ``jit_ext``), so an
optimizer step on the original parameters is seen by the next call.

Layer: entry points. Imports: torch, thunder.common.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch


def _call_module(module, *args, **kwargs):
    return module(*args, **kwargs)


_call_module._thunder_calls_module = True  # the tracer names inputs after ``module.forward``


class ThunderModule(torch.nn.Module):
    """A compiled ``nn.Module``; attribute access is forwarded to the original module."""

    def __init__(self, model: torch.nn.Module, options):
        super().__init__()
        from thunder import _make_jitted
        from thunder.common import CompileData

        self._model = model
        cd = CompileData(_call_module, options, is_module=True)
        self._forward_fn = _make_jitted(_call_module, cd)
        for transform in options.transforms:
            hook = getattr(transform, "transform_module", None)
            if hook is not None:
                hook(self)

    @property
    def _thunder(self):
        return self._forward_fn._thunder

    def forward(self, *args, **kwargs):
        return self._forward_fn(self._model, *args, **kwargs)

    def get_parameter(self, target: str) -> torch.nn.Parameter:
        return self._model.get_parameter(target)

    def get_buffer(self, target: str) -> torch.Tensor:
        return self._model.get_buffer(target)

    def get_submodule(self, target: str) -> torch.nn.Module:
        return self._model.get_submodule(target)

    def named_parameters(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True):
        return self._model.named_parameters(prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate)

    def named_buffers(self, prefix: str = "", recurse: bool = True, remove_duplicate: bool = True, *, persistent=None):
        buffers = self._model.named_buffers(prefix=prefix, recurse=recurse, remove_duplicate=remove_duplicate)
        if persistent is None:
            return buffers
        return ((n, b) for n, b in buffers if self._is_persistent(n) == persistent)

    def _is_persistent(self, name: str) -> bool:
        owner, _, leaf = name.rpartition(".")
        module = self._model.get_submodule(owner) if owner else self._model
        return leaf not in module._non_persistent_buffers_set

    def state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        return self._model.state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)

    def original_state_dict(self, *, destination=None, prefix: str = "", keep_vars: bool = False):
        """The state dict with transforms reversed (no transform changes it yet)."""
        return self._model.state_dict(destination=destination, prefix=prefix, keep_vars=keep_vars)

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        return self._model.load_state_dict(state_dict, strict=strict, assign=assign)

    @contextlib.contextmanager
    def no_sync(self) -> Iterator[None]:
        """Skips gradient synchronisation in data-parallel training (nothing to skip without it)."""
        yield

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self._model, name)
