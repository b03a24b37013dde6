"""Real programs jitted for the graph, diff and renderer tests, and helpers to read their steps.

Each ``*_steps`` function jits a program, runs it once and returns ``steps_from_jitted``.
"""

from __future__ import annotations

import linecache

import torch

import thunder
from thunder_viz.graph import steps_from_jitted

# Strings a hostile (or unlucky) program can put in front of the explorer.
EVIL = "</script><script>alert(1)</script><img src=x onerror=alert(2)> \"quoted\" 'single'\nnew line"
EVIL_FILE = "<img src=x onerror=alert(3)>\"'.py"
EVIL_GLOBAL = "<script>alert(4)</script> onerror="


def dce_cse(x, y):
    a = x * y
    unused = torch.cos(x)  # noqa: F841 (dead: DCE removes it)
    b = x * y  # repeats a: CSE merges it into a
    c = a + b * 2.0
    return torch.relu(c)


def dce_cse_steps(executors=("torch",)) -> list[dict]:
    jf = thunder.jit(dce_cse, executors=list(executors))
    jf(torch.randn(3, 4), torch.randn(3, 4))
    return steps_from_jitted(jf)


def module_steps(executors=("torch",)) -> list[dict]:
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Sequential(torch.nn.Linear(8, 2), torch.nn.Tanh())
    )

    def run(m, x):
        return m(x).sum()

    jf = thunder.jit(run, executors=list(executors))
    jf(model, torch.randn(3, 4))
    return steps_from_jitted(jf)


_EVIL_SOURCE = """
def evil(x, label):
    y = x * 2
    if label == EVIL_GLOBAL:
        y = y + 1
    return y - len(label)
"""


def evil_steps(executors=("torch",)) -> list[dict]:
    """A program whose file name, a global it guards on and a string argument are all hostile."""
    linecache.cache[EVIL_FILE] = (len(_EVIL_SOURCE), None, _EVIL_SOURCE.splitlines(keepends=True), EVIL_FILE)
    namespace = {"EVIL_GLOBAL": EVIL_GLOBAL}
    exec(compile(_EVIL_SOURCE, EVIL_FILE, "exec"), namespace)
    jf = thunder.jit(namespace["evil"], executors=list(executors))
    jf(torch.randn(2), EVIL)
    return steps_from_jitted(jf)


def of_kind(steps: list[dict], kind: str) -> list[dict]:
    return [s for s in steps if s["kind"] == kind]


def by_pass(steps: list[dict], name: str, kind: str = "computation") -> dict:
    return next(s for s in steps if s["kind"] == kind and s["pass"] == name)


def node_by_op(step: dict, op: str, k: int = 0) -> dict:
    """The k-th top-level node of ``step`` whose op is ``op``."""
    return [n for n in step["nodes"] if n["op"] == op and n["fused_into"] is None][k]
