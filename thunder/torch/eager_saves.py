"""What eager's autograd saves for a call (Note [What eager's autograd saves] in thunder.core.rules): asked of
torch itself, by running the call's torch function on meta tensors under a saved-tensors hook.

Eager refuses a backward once a tensor its autograd saved changed in place ("one of the variables needed for
gradient computation has been modified by an inplace operation"); whether a call saves an argument depends on
the op (``x * w`` saves ``w``, ``x + w`` nothing, ``exp`` its result), which torch knows best. Asked only for
the calls that read a tensor the program later updates in place.

Note [Asking eager's saves without importing torch._dynamo]
Many of torch's meta kernels are Python references wrapped in ``torch._disable_dynamo``, whose first call imports
``torch._dynamo`` (1.5 s of CPU time unloaded, 10-17 s at load 10-14: the first backward of a fresh process paid it).
A small call runs on real CPU tensors instead (zeros, of the call's shapes; a few milliseconds at most), whose
kernels are C++; a large one, or one that fails on those values (``cholesky`` of zeros) or on the CPU (a dtype it
has no kernel for), on meta tensors as before. A large call's meta kernel is often such a reference (``gelu``'s:
every elementwise reference is wrapped in ``elementwise_type_promotion_wrapper``, which disables dynamo), so a large
call first runs on small CPU tensors that keep the call's structure: each distinct size above 1 becomes a distinct
size from 2 up, in order (512 and 256 become 3 and 2), ones stay ones. What autograd saves follows from the op's
formula, not from the sizes; the run counts only where every result has the shape its proxy's sizes map to (a call
whose arguments name sizes, ``view(512, -1)``, ``split(x, 128)``, fails or differs there, and goes to meta).

Layer: language. Imports: core, torch.base.
"""

from __future__ import annotations

import math

import torch

from thunder.core.proxies import NumberProxy, TensorProxy, pyval
from thunder.core.pytree import tree_leaves, tree_map
from thunder.core.rules import set_eager_saves
from thunder.core.symbol import BoundSymbol
from thunder.core.symbolic import is_symbolic
from thunder.core.trace import draws
from thunder.torch.base import symbol_to_torch

__all__ = ["eager_saves"]


_SMALL = 1 << 16  # elements among a call's tensor arguments and results that it runs on real CPU tensors


def eager_saves(bsym: BoundSymbol) -> frozenset[str] | None:
    """The names of ``bsym``'s tensor arguments and results that eager's autograd saves (a view of one counts as
    it), or None where torch cannot tell (no torch function, or one that does not run on meta tensors)."""
    fn = symbol_to_torch.get(bsym.sym)
    if fn is None:
        return None
    tensors = [t for t in tree_leaves((bsym.args, bsym.kwargs, bsym.output)) if isinstance(t, TensorProxy)]
    # (sizes' values: comparing a symbolic size would record a constraint that the trace then relies on)
    numel = sum(math.prod(d.value if is_symbolic(d) else pyval(d) for d in t.shape) for t in tensors)
    if not draws(bsym):  # (a draw on the CPU would move the program's generator)  # Note [Asking eager's saves without importing torch._dynamo]
        found = _saves_on(bsym, fn, "cpu", None if numel <= _SMALL else _small_sizes(tensors))
        if found is not None:
            return found
    return _saves_on(bsym, fn, "meta")


def _small_sizes(tensors: list[TensorProxy]) -> dict[int, int]:
    """Each distinct size above 1 of ``tensors`` mapped to a distinct small one, in order (the Note above)."""
    sizes = sorted({_size(d) for t in tensors for d in t.shape} - {0, 1})
    return {d: k for k, d in enumerate(sizes, start=2)}


def _size(d) -> int:
    return d.value if is_symbolic(d) else pyval(d)


def _saves_on(bsym: BoundSymbol, fn, device: str, small: dict[int, int] | None = None) -> frozenset[str] | None:
    """What ``fn`` run on zeros of ``bsym``'s shapes on ``device`` saves; with ``small``, of those shapes' sizes
    mapped by it, where the results keep the mapped shapes (None where they do not)."""

    def shape(x: TensorProxy) -> tuple[int, ...]:
        return tuple(small.get(_size(d), _size(d)) if small else _size(d) for d in x.shape)

    names: dict[int, str] = {}
    made: list[torch.Tensor] = []  # alive until the end, so that ids stay unique

    def tensor(x):
        if isinstance(x, TensorProxy):
            differentiable = x.dtype.is_floating_point or x.dtype.is_complex
            t = torch.zeros(shape(x), dtype=x.dtype, device=device)
            t.requires_grad_(bool(x.requires_grad and differentiable))
            made.append(t)
            names[id(t)] = x.name
            return t
        return pyval(x) if isinstance(x, NumberProxy) else x

    saved: list[torch.Tensor] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        saved.append(t)
        return t

    try:
        args, kwargs = tree_map(tensor, (bsym.args, bsym.kwargs))
        with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            out = fn(*args, **kwargs)
    except Exception:
        return None
    results, proxies = tree_leaves(out), tree_leaves(bsym.output)
    if small and (len(results) != len(proxies) or any(
        isinstance(r, torch.Tensor) != isinstance(p, TensorProxy) or isinstance(r, torch.Tensor) and r.shape != shape(p)
        for r, p in zip(results, proxies)
    )):  # fmt: skip
        return None
    for real, proxy in zip(results, proxies):
        if isinstance(real, torch.Tensor) and isinstance(proxy, TensorProxy):
            names[id(real)] = proxy.name
    found = set()
    for t in saved:
        while t is not None:
            if id(t) in names:
                found.add(names[id(t)])
            t = t._base
    return frozenset(found)


set_eager_saves(eager_saves)
