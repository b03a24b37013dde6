"""Snippets of the randomized tester that use the Python features real PyTorch programs are written with:
generators and ``yield from``, closures that rebind (``nonlocal``), class hierarchies with ``super()`` and
properties, dataclasses, ``lru_cache``d helpers, ``try``/``except``/``else``/``finally`` around ops that fail on
some inputs, ``match``, the walrus, comprehensions over tensor values, star-unpacking, nested grad modes and
in-place ops on views (split from ``tests.fuzz.snippets``, whose docstring says what a snippet is).
"""

from __future__ import annotations

import re

from tests.fuzz.snippet_base import _pick, _s


def _arithmetic(ctx) -> None:
    """``acc * 2`` of a bool tensor is an int one."""
    if ctx.kind == "bool":
        ctx.kind = "int"


# ---------------------------------------------------------------- generators and closures made by the program

_GEN_YIELD_FROM = """def _gen{u}(t):
    yield t + 1
    yield from (t * k for k in range(2))
    return 5


def _delegate{u}(t):
    got = yield t * 2
    return got


def _outer{u}(t):
    r = yield from _delegate{u}(t)
    yield r
"""
_GEN_FINALLY = """LOG{u} = []


def _closing{u}(t):
    try:
        yield t * 2
        yield t * 3
    finally:
        LOG{u}.append('closed')
"""
GENERATORS = [
    "for v{u} in _gen{u}(acc):\n    acc = acc + v{u}",
    "ret.append(len(list(_gen{u}(acc))))\nacc = sum(_gen{u}(acc), acc)",
    "g{u} = _outer{u}(acc)\nfirst{u} = next(g{u})\nacc = first{u} + g{u}.send(first{u} + 1)",
    "g{u} = (acc * i for i in range(5))\nacc = next(g{u}) + next(g{u})\ng{u}.close()\nret.append(next(g{u}, 'done'))",
    "def _inner{u}():\n    yield from range(3)\n    return 'r'\nret.append([*_inner{u}()])",
    "ret.append(list(zip(_gen{u}(n), 'ab')))",
]
CLOSURES_MADE = [
    "count{u} = 0\n\ndef bump{u}(t):\n    nonlocal count{u}\n    count{u} += 1\n    return t + count{u}\n\nacc = bump{u}(bump{u}(acc))\nret.append(count{u})",
    "fs{u} = [lambda t: t + i for i in range(3)]\nacc = fs{u}[0](acc)",  # late binding: every lambda sees i = 2
    "fs{u} = [lambda t, i=i: t * i for i in range(1, 3)]\nacc = fs{u}[1](acc) + fs{u}[0](acc)",
    "k{u} = 1\n\ndef add{u}(t):\n    return t + k{u}\n\nk{u} = 3\nacc = add{u}(acc)",
    "def make{u}(scale):\n    def inner(t):\n        nonlocal scale\n        scale = scale + 1\n        return t * scale\n    return inner\n\nh{u} = make{u}(n)\nacc = h{u}(acc) + h{u}(acc)",
]


def generators(rng, ctx):
    _arithmetic(ctx)
    if rng.random() < 0.45:
        body = _pick(rng, CLOSURES_MADE)
        return _s("generators", "closures the program makes (nonlocal, late binding)", body,
                  needs={"n"} if "(n)" in body else (), n_pool="int" if "(n)" in body else None)  # fmt: skip
    if rng.random() < 0.25:  # the generator's finally runs when the loop drops it, in eager at once
        return _s(
            "generators", "a generator's finally, run when it is dropped",
            "for v{u} in _closing{u}(acc):\n    acc = v{u}\n    break\nret.append(len(LOG{u}))",
            setup=_GEN_FINALLY, state=("LOG{u}",), mutations=["LOG{u}.clear()"],
        )  # fmt: skip
    body = _pick(rng, GENERATORS)
    return _s("generators", "generators, yield from, send", body, setup=_GEN_YIELD_FROM,
              needs={"n"} if "(n)" in body else (), n_pool="int" if "(n)" in body else None)  # fmt: skip


# ---------------------------------------------------------------- classes: super(), properties, dataclasses, lru_cache

_HIERARCHY = """class _Base{u}:
    def __init__(self, k):
        self.k = k

    def apply(self, t):
        return t * self.k

    @property
    def double(self):
        return self.k * 2


class _Child{u}(_Base{u}):
    def __init__(self, k):
        super().__init__(k + 1)

    def apply(self, t):
        return super().apply(t) + self.double


obj{u} = _Child{u}(2)
"""
_CALLABLE = """class _Scaler{u}:
    factor = 2

    @classmethod
    def make(cls):
        return cls()

    @staticmethod
    def shift(t):
        return t + 1

    def __call__(self, t):
        return self.shift(t) * self.factor
"""
_LINEAR = """class _Lin{u}(torch.nn.Linear):
    def forward(self, t):
        return super().forward(t) * 2


L{u} = _Lin{u}(4, 3)
"""
# make_dataclass: the decorator would look this module up in sys.modules, where it is not
_DATACLASS = """_Cfg{u} = dataclasses.make_dataclass(
    "_Cfg{u}", [("scale", float, dataclasses.field(default=2.0)), ("hist", list, dataclasses.field(default_factory=list))]
)
CFG{u} = _Cfg{u}()
"""
_CACHED = """@functools.lru_cache(maxsize=None)
def _table{u}(k):
    return tuple(i * k for i in range(3))
"""
CLASSES = [
    ("acc = obj{u}.apply(acc)", _HIERARCHY, ["obj{u}.k = 5", "_Base{u}.double = property(lambda self: -1)", "obj{u} = _Child{u}(0)"]),
    ("acc = _Child{u}(n).apply(acc)\nret.append(_Child{u}(n).double)", _HIERARCHY, ["_Base{u}.apply = lambda self, t: t - self.k"]),
    ("acc = _Scaler{u}.make()(acc)", _CALLABLE, ["_Scaler{u}.factor = 3", "_Scaler{u}.shift = staticmethod(lambda t: t - 1)"]),
    ("ret.append(L{u}(x.to(torch.float32)))", _LINEAR, ["L{u}.weight.data.mul_(2)", "L{u}.bias = None"]),
    ("c{u} = _Cfg{u}()\nc{u}.hist.append(acc.shape)\nacc = acc * c{u}.scale\nret.append(c{u})", _DATACLASS, []),
    ("CFG{u}.hist.append(n)\nacc = acc * CFG{u}.scale\nret.append(dataclasses.asdict(CFG{u}))", _DATACLASS,
     ["CFG{u}.scale = 3.0", "CFG{u}.hist.clear()", "CFG{u} = _Cfg{u}(scale=0.5)"]),
    ("ret.append(dataclasses.replace(CFG{u}, scale=n).scale)\nacc = acc + len(CFG{u}.hist)", _DATACLASS, ["CFG{u}.hist.append(1)"]),
    ("acc = acc + sum(_table{u}(2))\nret.append(_table{u}(n))", _CACHED, ["_table{u}.cache_clear()"]),
    ("acc = acc + _table{u}(3)[1]\nret.append(_table{u}.cache_info().currsize)", _CACHED, ["_table{u}.cache_clear()"]),
]  # fmt: skip


def classes(rng, ctx):
    body, setup, mutations = _pick(rng, CLASSES)
    needs = {"n"} if "n)" in body else set()
    if "L{u}(" in body:
        needs.add("lastdim4")
    _arithmetic(ctx)
    if "c{u}.scale" in body or "CFG{u}.scale" in body:
        ctx.kind = "float"
    state = ("CFG{u}",) if "CFG{u}.hist.append(n)" in body else ()
    return _s("classes", "classes: super(), properties, dataclasses, lru_cache", body, setup=setup,
              mutations=list(mutations), needs=needs, state=state, n_pool="int" if needs & {"n"} else None)  # fmt: skip


# ---------------------------------------------------------------- control flow: try, match, walrus, comprehensions

TRY = [
    "try:\n    t{u} = acc.reshape(2, -1)\nexcept RuntimeError:\n    acc = acc + 1\nelse:\n    acc = t{u}.sum(0)\nfinally:\n    ret.append('done')",
    "try:\n    acc = acc @ acc\nexcept RuntimeError as e:\n    ret.append(type(e).__name__)",
    "try:\n    k{u} = 10 // int(n)\nexcept ZeroDivisionError:\n    k{u} = -1\nacc = acc + k{u}",
    "try:\n    acc = acc + acc[2]\nexcept IndexError:\n    acc = acc * 2\nfinally:\n    acc = acc + 1",
    "def chk{u}(t):\n    if t.ndim > 1:\n        raise ValueError('rank')\n    return t\n\ntry:\n    acc = chk{u}(acc) + 1\nexcept ValueError as e:\n    ret.append(str(e))\n    acc = acc.reshape(-1)",
    "try:\n    try:\n        acc = acc.view(3, -1)\n    except RuntimeError as e:\n        raise KeyError('inner') from e\nexcept KeyError as e:\n    ret.append(type(e.__cause__).__name__)",
    "for i{u} in range(3):\n    try:\n        acc = acc + acc[i{u}]\n    except IndexError:\n        break\n    finally:\n        ret.append(i{u})",
]
MATCH = [
    "match acc.ndim:\n    case 0:\n        acc = acc + 1\n    case 1 | 2:\n        acc = acc * 2\n    case _:\n        acc = acc.sum(0)",
    "match tuple(acc.shape):\n    case (a{u}, b{u}):\n        acc = acc.reshape(b{u}, a{u})\n    case (a{u},) if a{u} > 2:\n        acc = acc[:2]\n    case _:\n        pass",
    "match s:\n    case 'm' | 'mean':\n        acc = acc * 2\n    case str(t{u}) if t{u}.startswith('a'):\n        acc = acc + len(t{u})\n    case _:\n        ret.append(s)",
    "match n:\n    case bool():\n        acc = acc + 7\n    case int(k{u}) if k{u} > 0:\n        acc = acc * k{u}\n    case float():\n        acc = acc - n\n    case _:\n        ret.append(type(n).__name__)",
    "match {'k': acc, 'n': 2}:\n    case {'k': t{u}, 'n': int(j{u})}:\n        acc = t{u} * j{u}",
    "match [acc, acc.shape]:\n    case [t{u}, torch.Size([])]:\n        acc = t{u} + 1\n    case [t{u}, (d{u}, *_)]:\n        acc = t{u} * d{u}",
]
WALRUS = [
    "if (k{u} := acc.ndim) > 1:\n    acc = acc + k{u}\nret.append(k{u})",
    "ret.append([y for v in range(3) if (y := v * 2) > 0])",
    "_ = [(last{u} := v) for v in range(3)]\nret.append(last{u})",  # the walrus binds in the function, not the comprehension
    "while (d{u} := acc.ndim) > 1:\n    acc = acc.sum(0)\nret.append(d{u})",
]
COMPREHENSIONS = [
    "ret.append([i for i in range(min(acc.numel(), 4)) if acc.reshape(-1)[i].item() > 0])",
    "ret.append({i: bool(v > 0) for i, v in enumerate(acc.reshape(-1)[:3].tolist())})",
    "pos{u} = [v for v in acc.reshape(-1)[:4] if v.item() > 0]\nacc = acc + len(pos{u})",
    "acc = acc + sum(1 for v in acc.reshape(-1)[:3] if v > 0)",
]
STAR = [
    "first{u}, *rest{u} = (*acc.shape, 1)\nret.append(rest{u})\nacc = acc * first{u}",
    "a{u}, *b{u} = acc.reshape(-1)[:3] if acc.numel() >= 3 else (acc, acc)\nacc = acc + a{u}\nret.append(len(b{u}))",
    "acc = torch.cat([*[acc.reshape(-1)] * 2, *(acc.reshape(-1),)])",
    "ret.append(max(*acc.shape, 0))",
    "def kw{u}(t, *a, k=1, **kw):\n    return t * k + len(a) + len(kw)\n\nacc = kw{u}(acc, *[1, 2], **{'k': 2, 'z': 0})",
    "ret.append({**{'a': 1}, 'b': n, **dict(c=acc.ndim)})",
]


def control_flow(rng, ctx):
    table, tag = _pick(rng, ((TRY, "try/except/else/finally around ops that fail on some inputs"), (MATCH, "match"),
                             (WALRUS, "walrus"), (COMPREHENSIONS, "comprehensions over tensor values"),
                             (STAR, "star-unpacking")))  # fmt: skip
    body = _pick(rng, table)
    _arithmetic(ctx)
    needs = {p for p in ("n", "s") if re.search(rf"\b{p}\b", body)}
    return _s("control_flow", tag, body, needs=needs)


# ---------------------------------------------------------------- grad modes and in-place ops on views

_NO_GRAD_HELPER = """@torch.no_grad()
def _ng{u}(t):
    return t * 2
"""
GRAD_MODES = [
    "with torch.no_grad():\n    a{u} = acc * 2\n    with torch.enable_grad():\n        b{u} = acc * 3\nacc = acc + a{u} + b{u}\nret.append(b{u}.requires_grad)",
    "with torch.enable_grad():\n    with torch.no_grad():\n        a{u} = acc + 1\n    b{u} = a{u} * acc\nacc = b{u}\nret.append(a{u}.requires_grad)",
    "prev{u} = torch.is_grad_enabled()\ntorch.set_grad_enabled(False)\nc{u} = acc * 2\ntorch.set_grad_enabled(prev{u})\nacc = acc + c{u}",
    "with torch.set_grad_enabled(n > 0):\n    c{u} = acc * 2\nret.append(c{u}.requires_grad)\nacc = acc + c{u}",
    "with torch.inference_mode():\n    c{u} = acc * 2\nret.append(c{u})",
    "with torch.no_grad():\n    acc.detach().mul_(1)\n    c{u} = acc.sum()\nacc = acc + c{u}",
]
VIEWS_IN_PLACE = [
    "t{u} = acc * 1\nv{u} = t{u}.view(-1) if t{u}.is_contiguous() else t{u}.reshape(-1)\nv{u}.add_(1)\nacc = t{u} + v{u}.sum()",
    "t{u} = acc * 1\nif t{u}.ndim == 2:\n    t{u}.t().mul_(3)\nacc = t{u}",
    "t{u} = acc * 1\nif t{u}.ndim == 2:\n    t{u}.diagonal().zero_()\nacc = t{u}",
    "t{u} = acc * 1\nif t{u}.ndim >= 1:\n    r{u} = t{u}.unbind(0)[0]\n    r{u}.add_(1)\nacc = t{u}",
    "t{u} = acc * 2\nv{u} = t{u}[..., :1]\nv{u}.mul_(5)\nacc = t{u}.sum() + v{u}.sum()",
    "t{u} = acc * 1\nif t{u}.ndim >= 1:\n    t{u}[:1].mul_(2)\n    t{u}[-1:] += 1\nacc = t{u}",
    "if x.ndim >= 1:\n    x[0].add_(1)",
    "t{u} = acc * 1\nt{u}.unsqueeze(0).squeeze(0).sub_(1)\nacc = t{u}",
    "t{u} = acc * 1\nif t{u}.ndim >= 1:\n    t{u}.narrow(-1, 0, 1).copy_(torch.ones(()))\nacc = t{u}",
]


def grad_modes(rng, ctx):
    _arithmetic(ctx)
    if rng.random() < 0.5:
        if rng.random() < 0.2:
            return _s("grad_modes", "a helper decorated with torch.no_grad()", "acc = acc + _ng{u}(acc)",
                      setup=_NO_GRAD_HELPER)  # fmt: skip
        body = _pick(rng, GRAD_MODES)
        return _s("grad_modes", "nested grad modes", body, needs={"n"} if "n >" in body else ())
    return _s("grad_modes", "in-place ops on views", _pick(rng, VIEWS_IN_PLACE))
