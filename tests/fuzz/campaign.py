"""Many programs under many cache options: counts per option and failures grouped by cause.

A failure's cause is guessed from its shrunk form: the outcome, the tags of the snippets
left after shrinking, and the mismatch with numbers blurred out. Two failures with the same
key are very likely the same defect.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

from tests.fuzz.checker import Outcome, ProgramResult, check_program, reproducer, shrink
from tests.fuzz.programs import Program, calls_for, generate_program


@dataclass
class Finding:
    key: tuple
    program: Program  # shrunk
    cache: str
    detail: str
    count: int = 1
    seeds: list[int] = field(default_factory=list)

    @property
    def reproducer(self) -> str:
        return reproducer(self.program, self.cache, self.detail)


@dataclass
class Tally:
    programs: int = 0
    outcomes: Counter = field(default_factory=Counter)

    @property
    def calls(self) -> int:
        return sum(self.outcomes.values())


def cause_key(prog: Program, result: ProgramResult) -> tuple:
    f = result.failure
    detail = re.sub(r"tensor\(.*", "tensor(...)", f.detail)
    detail = re.sub(r"\d+(\.\d+)?(e[-+]?\d+)?", "#", detail)
    detail = re.sub(r"'[^']*'", "'...'", detail)[:90]
    tags = tuple(sorted({sn.tag for sn in prog.snippets}))
    return (f.outcome.name, tags, detail)


def run_campaign(
    seeds, caches, *, families=None, shrink_failures=True, findings: dict | None = None, tallies: dict | None = None
):
    """Runs ``generate_program(seed, families)`` under each cache option; returns
    ``(tallies by cache, findings by cause key)``."""
    findings = {} if findings is None else findings
    tallies = {c: Tally() for c in caches} if tallies is None else tallies
    for seed in seeds:
        prog = generate_program(seed, families)
        for cache in caches:
            res = check_program(prog, cache)
            t = tallies[cache]
            t.programs += 1
            t.outcomes.update(c.outcome for c in res.calls)
            if res.failure is None:
                continue
            small = shrink(prog, cache) if shrink_failures else prog
            small_res = check_program(small, cache)
            if small_res.failure is None:  # flaky under shrinking; keep the original
                small, small_res = prog, res
            key = cause_key(small, small_res)
            if key in findings:
                findings[key].count += 1
                findings[key].seeds.append(seed)
                if len(small.source) + 40 * len(calls_for(small, cache)) < len(findings[key].program.source) + 40 * len(
                    calls_for(findings[key].program, cache)
                ):
                    findings[key].program, findings[key].cache = small, cache
                    findings[key].detail = small_res.failure.detail
            else:
                findings[key] = Finding(key, small, cache, small_res.failure.detail, seeds=[seed])
    return tallies, findings


OUTCOME_ORDER = (Outcome.OK, Outcome.CLEAR, Outcome.WRONG, Outcome.INTERNAL, Outcome.CRASH)
