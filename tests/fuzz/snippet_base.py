"""What a snippet of the randomized tester is (``tests.fuzz.snippets`` says how programs are made of them), and the
helpers that the snippet modules share."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Snippet:
    family: str
    tag: str
    body: str
    setup: str = ""
    cells: dict[str, str] = field(default_factory=dict)
    mutations: list[str] = field(default_factory=list)
    needs: frozenset[str] = frozenset()
    state: tuple[str, ...] = ()
    n_pool: str | None = None


@dataclass
class Ctx:
    kind: str
    entry: str  # "function", "module", "method"
    closure: bool = False


def _s(family, tag, body, **kw) -> Snippet:
    if "needs" in kw:
        kw["needs"] = frozenset(kw["needs"])
    return Snippet(family, tag, body.strip("\n"), **kw)


def _pick(rng: random.Random, seq):
    return seq[rng.randrange(len(seq))]
