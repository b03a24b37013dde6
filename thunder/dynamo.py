"""``thunder.dynamo``: thunder as a backend of ``torch.compile`` (lightning-thunder's ThunderFX API).

TorchDynamo captures the program's graphs, splitting them where Python needs a value, and ``thunder.jit``
compiles each graph (Note [ThunderFX]).

Layer: entry points. Imports: ``thunder`` and torch.
"""

from __future__ import annotations

import dataclasses
import inspect
import warnings
from collections.abc import Callable
from typing import Any

import torch

__all__ = ["SubgraphInfo", "ThunderCompiler", "ThunderFXCompiledObject", "thunderfx"]

# Note [ThunderFX]
# Lightning-thunder's ``thunderfx(fn)`` is ``torch.compile(fn, backend=ThunderCompiler())``: Dynamo runs the Python
# (graph breaks, guards, recompilation on new shapes) and hands each captured ``torch.fx.GraphModule`` to the
# backend, which returns ``thunder.jit(gm)``. Lightning-thunder also splits a graph around the ops it cannot trace
# and gives those to TorchInductor; here every op of a graph is traced by thunder, which traces what eager runs
# (an op it refuses fails with its own error, naming the op). Options ``torch.compile`` takes (``dynamic``,
# ``fullgraph``, ``mode``, ``options``, ``disable``) go to it; the others to ``thunder.jit``.


@dataclasses.dataclass
class SubgraphInfo:
    """One graph Dynamo captured: the graph as given (``original_graph_module``) and what thunder compiled of it
    (``thunder_compiled_fns``, each a ``thunder.jit`` callable that ``thunder.last_traces`` reads)."""

    original_graph_module: torch.fx.GraphModule
    thunder_compiled_fns: list[Callable]
    split_reasons: list = dataclasses.field(default_factory=list)


class ThunderCompiler:
    """A ``torch.compile`` backend that compiles each captured graph with ``thunder.jit``.

    Args:
        **thunder_options: options passed to ``thunder.jit`` for every graph.

    Example:
        >>> backend = ThunderCompiler()
        >>> compiled = torch.compile(fn, backend=backend)

    ``subgraph_infos`` lists the graphs compiled, in order (``SubgraphInfo``).
    """

    def __init__(self, **thunder_options: Any):
        self.thunder_options = thunder_options
        self.subgraph_infos: list[SubgraphInfo] = []

    def __call__(self, gm: torch.fx.GraphModule, sample_args: list, **compile_options: Any) -> Callable:
        import thunder

        jitted = thunder.jit(gm, **self.thunder_options)
        self.subgraph_infos.append(SubgraphInfo(gm, [jitted]))
        return jitted


class ThunderFXCompiledObject:
    """What ``thunderfx`` returns: calls run the ``torch.compile``d function; ``last_traces`` and
    ``last_backward_traces`` are the last traces of each graph thunder compiled."""

    def __init__(self, backend: ThunderCompiler, func: Callable):
        self._backend = backend
        self._func = func

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._func(*args, **kwargs)

    @property
    def last_traces(self) -> list:
        return self._last(backward=False)

    @property
    def last_backward_traces(self) -> list:
        return self._last(backward=True)

    def _last(self, *, backward: bool) -> list:
        import thunder

        if not self._backend.subgraph_infos:  # lightning-thunder's messages
            message = "last_backward_traces used before function invoked" if backward else "Must invoke the function before using last_traces"
            warnings.warn(message, stacklevel=3)
        get = thunder.last_backward_traces if backward else thunder.last_traces
        return [traces[-1] for info in self._backend.subgraph_infos for fn in info.thunder_compiled_fns if (traces := get(fn))]


def thunderfx(fn: Callable, /, **kwargs: Any) -> ThunderFXCompiledObject:
    """Compiles ``fn`` (a function or ``torch.nn.Module``) with ``torch.compile``, thunder as its backend.

    Args:
        fn: the function or module.
        **kwargs: options of ``torch.compile`` (``dynamic``, ``fullgraph``, ``mode``, ``options``, ``disable``) go to
            it; the others to ``thunder.jit`` for each graph.

    Returns:
        A ``ThunderFXCompiledObject``: call it as ``fn``.

    See also: ``thunder.jit`` (traces the Python itself, with no graph breaks), Note [ThunderFX].
    """
    compile_names = set(inspect.getfullargspec(inspect.unwrap(torch.compile)).kwonlyargs) - {"backend"}
    backend = ThunderCompiler(**{k: v for k, v in kwargs.items() if k not in compile_names})
    compiled = torch.compile(fn, backend=backend, **{k: v for k, v in kwargs.items() if k in compile_names})
    return ThunderFXCompiledObject(backend, compiled)
