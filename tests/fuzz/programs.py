"""The seeded program generator: snippets put together into a module's source, plus the
sequence of calls (arguments and outside-state changes) to run it with.

A program is ``f`` (or ``m``, a module whose ``forward`` is the body, or ``m.method``, a bound
method of a plain object), its module-level setup, and the calls. Same seed, same program.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace

from tests.fuzz.inputs import InputDrawer
from tests.fuzz.snippets import FAMILY_GENERATORS, Ctx, Snippet

FAMILIES = tuple(FAMILY_GENERATORS)
CACHE_OPTIONS = ("constant values", "symbolic values", "no caching", "same input", "default")
# "default": thunder.jit's own default (no ``cache=``): constant values, with automatic dynamic shapes.
PARAM_ORDER = ("x", "y", "w", "n", "s", "it", "lst", "sl", "mod", "buf", "rec", "dc")

HEADER = "import array\nimport collections\nimport copy\nimport dataclasses\nimport functools\nimport math\nimport operator\nimport os\nimport random\nimport types\nimport warnings\n\nimport numpy\nimport torch\n\nimport thunder\n"

OWNER_MODULE = """
class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.0)
        self.register_buffer("buf", torch.ones(()))
        self.scale = 2.0
        self.mode = "sum"
        self.calls = 0

    def twice(self, a):
        return a * 2
"""
OWNER_PLAIN = """
class Holder:
    def __init__(self):
        self.lin = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.0)
        self.buf = torch.ones(())
        self.scale = 2.0
        self.mode = "sum"
        self.calls = 0
        self.training = True

    def train(self, mode=True):
        self.training = mode
        self.drop.train(mode)

    def twice(self, a):
        return a * 2
"""


@dataclass(frozen=True)
class Call:
    """One call: state changes first (``(snippet index, statement)``, run at module level),
    then ``fn(*eval(args))`` after ``torch.manual_seed(seed)``."""

    args: str
    before: tuple[tuple[int, str], ...] = ()
    seed: int = 0


@dataclass
class Program:
    family: str
    seed: int
    entry: str  # "function", "module" (thunder.jit(m)), "method" (thunder.jit(m.method))
    params: tuple[str, ...]
    snippets: list[Snippet]
    calls: list[Call] = field(default_factory=list)

    @property
    def entry_expr(self) -> str:
        return {"function": "f", "module": "m", "method": "m.method"}[self.entry]

    @property
    def state(self) -> tuple[str, ...]:
        names = []
        for sn in self.snippets:
            names += [n for n in sn.state if n not in names]
        if self.owner and "m" not in names:
            names.append("m")
        return tuple(names)

    @property
    def owner(self) -> bool:
        return self.entry != "function" or any("owner" in sn.needs for sn in self.snippets)

    @property
    def source(self) -> str:
        return build_source(self)

    def without_snippet(self, i: int) -> Program:
        snippets = self.snippets[:i] + self.snippets[i + 1 :]
        calls = [
            replace(c, before=tuple((j if j < i else j - 1, s) for j, s in c.before if j != i)) for c in self.calls
        ]
        return replace(self, snippets=snippets, calls=calls)


def _indent(text: str, n: int) -> str:
    pad = " " * n
    return "\n".join(pad + line if line else line for line in text.split("\n"))


def build_source(prog: Program) -> str:
    owner_name = "self" if prog.entry in ("module", "method") else "m"
    body_lines = ["ret = []", "acc = x"]
    for sn in prog.snippets:
        body_lines.append(sn.body.replace("{M}", owner_name))
    uses_ret = any("ret." in sn.body for sn in prog.snippets)
    body_lines.append("return (acc, *ret)" if uses_ret else "return acc")
    body = "\n".join(body_lines)
    parts = [HEADER]
    for sn in prog.snippets:
        if sn.setup:
            parts.append(sn.setup + "\n")
    params = ", ".join(prog.params)
    if prog.entry == "module":
        parts.append(OWNER_MODULE + f"\n    def forward(self, {params}):\n" + _indent(body, 8) + "\n\n\nm = Net()\n")
    elif prog.entry == "method":
        parts.append(OWNER_PLAIN + f"\n    def method(self, {params}):\n" + _indent(body, 8) + "\n\n\nm = Holder()\n")
    else:
        if prog.owner:
            parts.append(OWNER_MODULE + "\n\nm = Net()\n")
        cells = {k: v for sn in prog.snippets for k, v in sn.cells.items()}
        fdef = f"def f({params}):\n" + _indent(body, 4)
        if cells:
            inner = [f"{k} = {v}" for k, v in cells.items()] + ["", fdef, ""]
            for k in cells:
                inner += [f"def set_{k}(v):", f"    nonlocal {k}", f"    {k} = v", ""]
            inner.append("return f, " + ", ".join(f"set_{k}" for k in cells))
            names = ", ".join(["f"] + [f"set_{k}" for k in cells])
            parts.append("def _make():\n" + _indent("\n".join(inner), 4) + f"\n\n\n{names} = _make()\n")
        else:
            parts.append(fdef + "\n")
    return "\n".join(parts)


def _subst(sn: Snippet, u: str) -> Snippet:
    def r(t: str) -> str:
        return t.replace("{u}", u)

    return replace(
        sn, body=r(sn.body), setup=r(sn.setup), cells={r(k): r(v) for k, v in sn.cells.items()},
        mutations=[r(m) for m in sn.mutations], state=tuple(r(s) for s in sn.state),
    )  # fmt: skip


def generate_program(
    seed: int, families: tuple[str, ...] | None = None, *, max_snippets: int = 4, max_calls: int = 7
) -> Program:
    """The program for ``seed``, built from snippets of ``families`` (default: all)."""
    rng = random.Random(seed)
    families = families or FAMILIES
    kind = rng.choices(("float", "int", "bool"), weights=(6, 3, 1))[0]
    ctx = Ctx(kind=kind, entry="function")
    snippets = []
    for i in range(rng.randint(1, max_snippets)):
        family = families[rng.randrange(len(families))]
        snippets.append(_subst(FAMILY_GENERATORS[family](rng, ctx), str(i)))
    if any(sn.cells for sn in snippets):
        entry = "function"
    elif any("owner" in sn.needs for sn in snippets):
        entry = rng.choice(("function", "module", "method"))
    else:
        entry = rng.choices(("function", "module", "method"), weights=(17, 2, 1))[0]
    needs = set().union(*(sn.needs for sn in snippets))
    params = tuple(p for p in PARAM_ORDER if p == "x" or p in needs)
    n_pool = next((sn.n_pool for sn in snippets if sn.n_pool), "any")
    drawer = InputDrawer(
        rng, kind=kind, rank=rng.choice((0, 1, 1, 2, 2, 2, 3)), n_pool=n_pool,
        last_dim=4 if "lastdim4" in needs else None, min_rank=1 if "rank1" in needs else 0,
    )  # fmt: skip
    mutations = [(i, m) for i, sn in enumerate(snippets) for m in sn.mutations]
    calls = []
    for c in range(rng.randint(3, max_calls)):
        before = ()
        if c and mutations and rng.random() < 0.6:
            before = tuple(rng.sample(mutations, k=min(len(mutations), rng.choice((1, 1, 2)))))
        x = drawer.x()
        values = {"x": x.expr()}
        if "y" in params:  # an argument that shares x's memory: x's expression names it for y's (``_x``)
            values["x"], values["y"] = f"(_x := {values['x']})", drawer.y()
        if "w" in params:
            values["w"] = drawer.w(x).expr()
        draws = (("n", drawer.n), ("s", drawer.s), ("it", drawer.it), ("lst", drawer.lst), ("sl", drawer.sl), ("mod", drawer.mod),
                 ("buf", drawer.buf), ("rec", lambda x=x: drawer.rec(x)),
                 ("dc", lambda x=x: drawer.dc(x)))
        for p, draw in draws:
            if p in params:
                values[p] = draw()
        args = "(" + ", ".join(values[p] for p in params) + ",)"
        calls.append(Call(args=args, before=before, seed=seed * 100 + c))
    name = families[0] if len(families) == 1 else "mixed"
    return Program(family=name, seed=seed, entry=entry, params=params, snippets=snippets, calls=calls)


def calls_for(prog: Program, cache: str) -> list[Call]:
    """The calls to run under ``cache``: under "same input" the inputs must fit the cached
    entry, so that option repeats the first call (fresh values, same metadata, no state
    changes); a program whose global parameters the checker's backward gives a ``.grad`` (outside state that
    option does not check, changed between calls) runs only the first."""
    if cache != "same input":
        return list(prog.calls)
    first = prog.calls[0]
    n = 1 if any("grads_outside" in sn.needs for sn in prog.snippets) else len(prog.calls)
    return [Call(args=first.args, before=(), seed=first.seed + i) for i in range(n)]
