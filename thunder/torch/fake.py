"""torch's own functions run on fake tensors with the metadata of proxies: the meta of the ops
whose shapes, dtypes and argument checks are torch's (custom ops, eager ops).

Layer: language. Imports: core.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import torch

from thunder.core.proxies import TensorProxy
from thunder.core.pytree import tree_map
from thunder.core.symbolic import is_symbolic, pin

__all__ = ["fake_tree", "run_on_fake"]

_quiet = threading.local()


class _WhileAsked(logging.Filter):
    """Drops the fake-tensor module's log of a kernel that raised while thunder asks it: the
    error reaches the caller as an exception, which says all the log would."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(_quiet, "on", False)


logging.getLogger("torch._subclasses.fake_tensor").addFilter(_WhileAsked())


def _plain(x: Any) -> Any:
    """A symbolic number as the plain value the fake kernel sees (pinned: the trace relies on it)."""
    return pin(x) if is_symbolic(x) else x


def _hint(x: Any) -> Any:
    """A symbolic number's value, recording nothing: for a caller that relies on no value the kernel sees."""
    return x.value if is_symbolic(x) else x


def fake_tree(mode: Any, tree: Any, *, grad: bool = False, pinned: bool = True) -> Any:
    """``tree`` with its proxies (and tensors) replaced by fake tensors of ``mode`` with their metadata
    (with ``grad``, also whether they require grad; without ``pinned``, symbolic numbers as their values, with no
    constraint recorded)."""
    plain = _plain if pinned else _hint

    def fake(x):
        if isinstance(x, TensorProxy):
            t = torch.empty(tuple(plain(d) for d in x.shape), dtype=x.dtype, device=x.device)
            return t.requires_grad_(True) if grad and x.requires_grad and t.is_floating_point() | t.is_complex() else t
        if isinstance(x, torch.Tensor):
            return mode.from_tensor(x)
        return plain(x)

    with mode:
        return tree_map(fake, tree)


def run_on_fake(
    fn: Callable, args: tuple, kwargs: dict, *, grad: bool = False, sizes_from_data: bool = False, pinned: bool = True
) -> tuple[Any, tuple, dict]:
    """``fn``'s results on fake tensors with the proxies' metadata, and the fake arguments it saw
    (with ``grad``, inputs require grad as their proxies do, so results say whether they would; with
    ``sizes_from_data``, a size a kernel makes from the data is a symbol instead of an error; without ``pinned``,
    symbolic numbers are given as their values and the trace relies on none of them: the caller's business)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    mode = FakeTensorMode(shape_env=ShapeEnv()) if sizes_from_data else FakeTensorMode()
    fake_args, fake_kwargs = fake_tree(mode, (args, kwargs), grad=grad, pinned=pinned)
    _quiet.on = True
    try:
        with mode:
            return fn(*fake_args, **fake_kwargs), fake_args, fake_kwargs
    finally:
        _quiet.on = False
