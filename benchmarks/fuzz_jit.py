"""The long run of the randomized tester: generated programs and call sequences, each call
of ``thunder.jit`` checked against eager PyTorch, until every cache option has had at least
``--calls`` calls.

    python benchmarks/fuzz_jit.py                  # 10,000 calls per cache option
    python benchmarks/fuzz_jit.py --calls 2000 --findings /tmp/fuzz.md

Prints, per cache option: programs, calls, OK, clear errors, wrong results, internal errors,
crashes; then each distinct failure (grouped by cause) with a shrunk reproducer. "same input"
runs only call sequences that fit it (the first call repeated, see ``tests/fuzz``).

``kill PID`` (or Ctrl-C) stops the run early and prints the figures of the calls that ran.
Programs run in worker processes, a chunk of seeds each, so a crash of the interpreter (a
segfault, an abort) is counted against the program that was running, and the run goes on.
A call that takes more than 10 s counts as a crash (hang).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

CACHE_OPTIONS = ("constant values", "symbolic values", "no caching", "same input", "default")
OUTCOMES = ("ok", "clear error", "wrong result", "internal error", "crash")


def worker(first: int, last: int, options: list[str], shrink_failures: bool, families: tuple[str, ...] | None) -> None:
    """Checks programs ``first..last-1`` under ``options``; one JSON line per program and option."""
    from tests.fuzz import check_program, generate_program, reproducer, shrink
    from tests.fuzz.campaign import cause_key

    for seed in range(first, last):
        print(json.dumps({"start": seed}), flush=True)
        prog = generate_program(seed, families)
        for option in options:
            res = check_program(prog, option)
            row = {"seed": seed, "option": option, "outcomes": [c.outcome.value for c in res.calls]}
            if res.failure is not None:
                small = shrink(prog, option) if shrink_failures else prog
                small_res = check_program(small, option)
                if small_res.failure is None:
                    small, small_res = prog, res
                outcome, tags, detail = cause_key(small, small_res)
                row["key"] = [outcome, list(tags), detail]
                row["repro"] = reproducer(small, option, small_res.failure.detail)
            print(json.dumps(row), flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=10_000, help="calls per cache option (default 10,000)")
    ap.add_argument("--start-seed", type=int, default=0)
    ap.add_argument("--options", default=",".join(CACHE_OPTIONS), help="comma-separated cache options")
    ap.add_argument("--chunk", type=int, default=200, help="programs per worker process")
    ap.add_argument("--families", default="", help="comma-separated snippet families, a repeated one drawn more often (default: all)")
    ap.add_argument("--no-shrink", action="store_true", help="report failures unshrunk (faster)")
    ap.add_argument("--findings", help="write every distinct failure with its reproducer to this file")
    ap.add_argument("--worker", nargs=2, type=int, metavar=("FIRST", "LAST"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    options = [o.strip() for o in args.options.split(",") if o.strip()]
    if args.worker:
        worker(*args.worker, options, not args.no_shrink, tuple(f for f in args.families.split(",") if f) or None)
        return 0
    run = Run(options)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill PID` stops the run and still reports
    try:
        run.until(args)
    except KeyboardInterrupt:  # Ctrl-C: report what ran so far
        print("interrupted: the figures are for the calls that ran", file=sys.stderr)
    run.report(args)
    return 1 if any(run.counts[o]["wrong result"] for o in options) else 0


def _interrupt(signum, frame):
    raise KeyboardInterrupt


class Run:
    """Figures of the run so far."""

    def __init__(self, options: list[str]):
        self.options = options
        self.t0 = time.perf_counter()
        self.programs = Counter()
        self.counts = {o: Counter() for o in options}
        self.causes: dict[tuple, dict] = {}
        self.seed = 0

    def calls(self, option: str) -> int:
        return sum(self.counts[option].values())

    def until(self, args) -> None:
        self.seed = args.start_seed
        while any(self.calls(o) < args.calls for o in self.options):
            todo = [o for o in self.options if self.calls(o) < args.calls]
            first, last = self.seed, self.seed + args.chunk
            cmd = [
                sys.executable,
                os.path.abspath(__file__),
                "--worker",
                str(first),
                str(last),
                "--options",
                ",".join(todo),
            ]
            if args.no_shrink:
                cmd.append("--no-shrink")
            if args.families:
                cmd += ["--families", args.families]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
            running = None
            try:
                for line in proc.stdout:
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError:
                        continue  # the program under test printed past the checker's capture
                    if "start" in row:
                        running = self.seed = row["start"]
                    else:
                        self.add(row)
            except KeyboardInterrupt:
                proc.kill()
                raise
            proc.wait()
            if proc.returncode != 0:  # the worker died inside program `running`
                died = running if running is not None else first
                self.add_crash(died, todo, proc.returncode)
                self.seed = died + 1
            else:
                self.seed = last
            done = ", ".join(f"{o}: {self.calls(o)}" for o in self.options)
            print(f"[{time.perf_counter() - self.t0:6.0f} s] up to seed {self.seed - 1}; calls {done}", file=sys.stderr)

    def add(self, row: dict) -> None:
        o = row["option"]
        self.programs[o] += 1
        self.counts[o].update(row["outcomes"])
        if "key" in row:
            key = (row["key"][0], tuple(row["key"][1]), row["key"][2])
            entry = self.causes.setdefault(key, {"count": 0, "options": set(), "seeds": [], "repro": row["repro"]})
            entry["count"] += 1
            entry["options"].add(o)
            entry["seeds"].append(row["seed"])
            if len(row["repro"]) < len(entry["repro"]):
                entry["repro"] = row["repro"]

    def add_crash(self, seed: int, options: list[str], returncode: int) -> None:
        for o in options:
            self.counts[o]["crash"] += 1
            self.programs[o] += 1
        key = ("CRASH", (), f"worker process exited with {returncode}")
        entry = self.causes.setdefault(key, {"count": 0, "options": set(options), "seeds": [], "repro": ""})
        entry["count"] += 1
        entry["seeds"].append(seed)
        entry["repro"] += f"# generate_program({seed}) killed the process (exit {returncode})\n"

    def report(self, args) -> None:
        header = f"{'cache option':16s} {'programs':>8s} {'calls':>7s} " + " ".join(f"{h:>14s}" for h in OUTCOMES)
        print(header)
        print("-" * len(header))
        for o in self.options:
            c = self.counts[o]
            print(f"{o:16s} {self.programs[o]:8d} {sum(c.values()):7d} " + " ".join(f"{c[h]:14d}" for h in OUTCOMES))
        print(f"\n{len(self.causes)} distinct failure causes; seeds {args.start_seed}..{self.seed - 1}; "
              f"{time.perf_counter() - self.t0:.0f} s")  # fmt: skip
        ordered = sorted(self.causes.items(), key=lambda kv: -kv[1]["count"])
        for key, entry in ordered:
            print(f"  {entry['count']:5d}  {key[0]:8s} {', '.join(key[1])[:50]:50s} {key[2][:80]}")
        if args.findings:
            with open(args.findings, "w") as f:
                for key, entry in ordered:
                    f.write(f"## {key[0]}: {', '.join(key[1])}\n{key[2]}\n\n")
                    f.write(f"{entry['count']} programs; options: {', '.join(sorted(entry['options']))}; ")
                    f.write(f"seeds {entry['seeds'][:8]}\n\n```python\n{entry['repro']}```\n\n")


if __name__ == "__main__":
    sys.exit(main())
