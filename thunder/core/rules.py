"""Rule tables keyed by symbol identity: one table per kind of rule.

A rule belongs to a symbol object, never to its name: two symbols that print alike (a prim
and the torch-language symbol of the same name, or an executor's copy) cannot pick up each
other's rules, and renaming a symbol cannot lose them. Each family declares its rules next
to its symbols (``thunder/core/prims/elementwise.py`` holds the gradients of the elementwise
prims), as JAX's ``ad.primitive_jvps`` and tinygrad's gradient table do.

Note [VJP rules]
``grad_rules[sym]`` is ``rule(g, out, *args, **kwargs) -> tuple``: given the cotangent ``g``
of the symbol's output (the same structure as ``out``, with zeros where an output has no
cotangent), the forward output ``out`` and the call's own arguments, it returns one entry
per positional argument: that argument's gradient (same shape and dtype as the argument), or
``None`` where the argument is not a tensor, not differentiable, or gets a zero gradient. An
argument that is a list or tuple of tensors gets a list or tuple of entries. Rules are written
with the operations of their own layer (prim rules with prims only), so they run on proxies
inside a trace and, outside one, eagerly on real tensors, which is how they are tested.

Layer: core. Imports: core.symbol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from thunder.core.symbol import Symbol

__all__ = [
    "RuleTable", "autocast_rules", "batching_rules", "eager_saves", "forward_rules", "grad_rules", "set_eager_saves",
]


class RuleTable:
    """Rules of one kind, keyed by the symbol object they belong to."""

    __slots__ = ("kind", "_rules")

    def __init__(self, kind: str):
        self.kind = kind
        self._rules: dict[Symbol, Callable] = {}

    def register(self, *symbols: Symbol) -> Callable[[Callable], Callable]:
        """Decorator: ``@grad_rules.register(prims.exp)`` makes the function the rule of each symbol."""
        for sym in symbols:
            if not isinstance(sym, Symbol):
                raise TypeError(f"{self.kind} rules are keyed by Symbol objects, got {type(sym).__name__} {sym!r}")

        def deco(rule: Callable) -> Callable:
            for sym in symbols:
                self._rules[sym] = rule
            return rule

        return deco

    def get(self, sym: Symbol) -> Callable | None:
        return self._rules.get(sym)

    def __contains__(self, sym: object) -> bool:
        return sym in self._rules

    def __iter__(self) -> Iterator[Symbol]:
        return iter(tuple(self._rules))

    def __len__(self) -> int:
        return len(self._rules)

    def __repr__(self) -> str:
        return f"RuleTable({self.kind!r}, {len(self._rules)} rules)"


#: VJP rules (Note [VJP rules]).
grad_rules = RuleTable("grad")

#: Batching rules: ``rule(replay, bsym, *args, **kwargs)`` records the prim on batched values, the batch dimension
#: first (Note [torch.vmap in a trace] in ``thunder.core.traced_vmap``, where they are registered).
batching_rules = RuleTable("batching")

#: Autocast policies: ``rule(device_type, autocast_dtype) -> dtype | None``, the dtype the symbol's
#: floating inputs are cast to under ``torch.autocast`` on that device type (Note [Autocast] in
#: ``thunder.core.trace``).
autocast_rules = RuleTable("autocast")

#: Augmented forwards (JAX's ``custom_vjp`` fwd): ``rule(*args, **kwargs) -> output | None`` records
#: ops that compute the symbol's output and keep, as outputs of their own, what those ops' VJP rules
#: need (``batch_norm``'s batch statistics), so the backward reads them instead of recomputing them.
#: None leaves the call as it was. Used by the autograd split for calls that need a gradient.
forward_rules = RuleTable("augmented forward")


# Note [What eager's autograd saves]
# ``eager_saves(bsym)``: the names of the tensors among a call's arguments and results that eager's autograd
# keeps for its backward (so that eager refuses the backward once one of them changes in place), or None where
# that is not known. The torch language installs the function (it asks torch itself); until then nothing is known.
_eager_saves: Callable | None = None


def set_eager_saves(fn: Callable) -> None:
    global _eager_saves
    _eager_saves = fn


def eager_saves(bsym) -> frozenset[str] | None:
    return _eager_saves(bsym) if _eager_saves is not None else None
