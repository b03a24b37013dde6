"""The sizes a jitted function's tensor inputs had so far: which dims a new entry makes symbolic.

Note [Automatic dynamic shapes]
With the default cache option, every entry starts with constant shapes. When a call misses because a tensor's
shape changed (the next token of a generation, a growing sequence), the entry compiled for it makes symbolic only
the sizes that changed: each input's sizes are compared, by the input's prologue name, with the sizes it had in
the entries compiled before, and a size that ever differed stays symbolic in later entries, as in
``torch.compile``'s automatic dynamic shapes. An int the program reads (a cache's ``cumulative_length``) is
treated as a size: a miss because its value changed makes it symbolic. Sizes (and ints) 0 and 1 stay constant.
So does a float the program reads (an optimizer's learning rate, which a scheduler changes every step, and
OneCycleLR's momentum or betas): the entry compiled after it changed takes it as a symbolic number, whatever its
value (no float is specialised: nothing broadcasts on one), so a schedule compiles twice, not once per step.
Everything else (the parameters, the other dims, the other numbers) stays constant, so the new entry's prologue
checks few expressions and its regions keep static shapes. An input first seen in such an entry (a KV cache, empty
or absent in the prefill) is symbolic in the sizes that another input has just left: the cache the prefill filled
to the prompt's length grows from there, as the prompt's length changed. So a generation with a growing KV cache
compiles two entries: the prefill, and the first decoding step (one token, a constant; the cache length symbolic),
which serves every later step (torch.compile compiles three: its cache length turns symbolic a step later). The
cache keeps the constant entries too and looks up both kinds. What changed once stays symbolic whatever the later
miss: a constraint of a symbolic entry that fails (a KV cache reaching its sliding window) compiles an entry in which
the cache length is still symbolic, not a constant one that the next step leaves again. A size the program takes the
value of (``range`` of it: a Python loop over the sequence) holds each entry to that size, symbolic or not, and the
miss reason names the line.
``cache="constant values"`` given explicitly keeps every entry constant; ``cache="symbolic values"`` makes every
size and number symbolic from the first call.

Layer: core. Imports: nothing.
"""

from __future__ import annotations

from collections.abc import Sequence


class ShapeHistory:
    """The sizes each tensor input (by prologue name) had in the entries compiled so far, and the values of the int
    inputs; None where one changed.

    Read and updated by the tracer while it compiles, under the jitted function's compile lock."""

    __slots__ = ("sizes", "numbers", "outcomes", "dynamic_sites", "departed")

    def __init__(self):
        self.sizes: dict[str, tuple[int | None, ...]] = {}
        self.numbers: dict[str, int | float | None] = {}  # the int (as sizes) and float inputs
        self.outcomes: dict[int, int | float | None] = {}  # data-dependent numbers (element counts), by index
        self.dynamic_sites: set = set()  # where in the program a data-dependent int changed (file, line)
        self.departed: set[int] = set()  # in the entry being traced: sizes (above 1) that inputs changed from

    def has_symbolic(self) -> bool:
        """Whether a size or int input changed before: later entries keep it symbolic, whatever their miss."""
        return any(None in sizes for sizes in self.sizes.values()) or None in self.numbers.values()

    def begin_entry(self) -> None:
        """A new entry's trace starts: no size has been left yet."""
        self.departed.clear()

    def changed_dims(self, name: str, shape: Sequence[int]) -> frozenset[int]:
        """The dims of input ``name`` whose size differs from what it was (or was symbolic) before."""
        seen = self.sizes.get(name)
        if seen is None or len(seen) != len(shape):
            return frozenset()
        return frozenset(i for i, (before, now) in enumerate(zip(seen, shape)) if before != now)

    def symbolic_dims(self, name: str, shape: Sequence[int]) -> frozenset[int]:
        """The dims of input ``name`` that a new entry makes symbolic: those whose size changed, except sizes 0
        and 1, which broadcasting and indexing treat apart (``torch.compile`` specializes them too): a decoding
        step's single token stays a constant 1."""
        seen = self.sizes.get(name)
        if seen is None:  # first seen: symbolic where it has a size another input just left
            return frozenset(i for i, n in enumerate(shape) if n > 1 and n in self.departed)
        changed = self.changed_dims(name, shape)
        self.departed.update(seen[i] for i in changed if seen[i] is not None and seen[i] > 1)
        return frozenset(i for i in changed if shape[i] > 1)

    def symbolic_number(self, name: str, value: int | float) -> bool:
        """Whether the int input ``name`` is symbolic in a new entry: its value changed (to one above 1), or it is
        first seen with a size another input just left. A float input is symbolic once its value changed."""
        if type(value) is float:
            return name in self.numbers and not _same(self.numbers[name], value)
        if name not in self.numbers:
            return value > 1 and value in self.departed
        seen = self.numbers[name]
        if seen is not None and seen != value and seen > 1:
            self.departed.add(seen)
        return seen != value and value > 1

    def record_number(self, name: str, value: int | float, symbolic: bool) -> None:
        """The number input ``name`` was ``value`` in a new entry (symbolic if ``symbolic``, and then it stays so)."""
        self.numbers[name] = None if symbolic or not _same(self.numbers.get(name, value), value) else value

    def symbolic_outcome(self, index: int, site, value: int | float) -> bool:
        """Whether data-dependent outcome ``index`` (an int: an element count; or a float), asked at ``site`` (the
        program's line), is symbolic in a new entry: its site is dynamic, or it changed (an int: to one above 1); the
        site then becomes dynamic, so the other counts of that line (one per expert of a mixture, the step count of
        each parameter) turn symbolic together. Note [Symbolic data-dependent sizes] in
        ``thunder.core.data_dependent``."""
        if type(value) is int and value <= 1:
            return False
        if site is not None and site in self.dynamic_sites:
            return True
        if not _same(self.outcomes.get(index, value), value):
            if site is not None:
                self.dynamic_sites.add(site)
            return True
        return False

    def record_outcome(self, index: int, value: int | float, symbolic: bool) -> None:
        """Outcome ``index`` was ``value`` in a new entry (symbolic if ``symbolic``, and then it stays so)."""
        self.outcomes[index] = None if symbolic or not _same(self.outcomes.get(index, value), value) else value

    def record(self, name: str, shape: Sequence[int], symbolic: frozenset[int]) -> None:
        """Input ``name`` had ``shape`` in a new entry, symbolic in dims ``symbolic`` (which stay so)."""
        symbolic = symbolic | self.changed_dims(name, shape)
        self.sizes[name] = tuple(None if i in symbolic else n for i, n in enumerate(shape))


def _same(before: int | float | None, now: int | float) -> bool:
    """Whether a number input kept its value: of the same type, and for a float the same bits as the prologue
    checks them (``-0.0`` is not ``0.0``; NaN is NaN)."""
    return type(before) is type(now) and repr(before) == repr(now)
