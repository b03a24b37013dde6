"""Snippets of the randomized tester for the program forms that programs from outside found bugs in and the first
families could not make (split from ``tests.fuzz.snippets``, whose docstring says what a snippet is): ``with``
blocks (the program's own context managers, grad modes nested, exceptions crossing them), Python scalars and 0-dim
tensors mixed (the result dtypes are eager's), two arguments that share memory, ``out=`` arguments, NamedTuples and
dataclasses as arguments and results, f-strings and ``str()`` of shapes and dtypes, ``global``/``nonlocal``
rebinding, ``functools.partial``/``lru_cache`` helpers, attributes of the owner deleted and set between calls, and
the iterator protocol over tensors.
"""

from __future__ import annotations

from tests.fuzz.snippet_base import _pick, _s

# ---------------------------------------------------------------- with blocks

_CONTEXTS = """import contextlib

LOG{u} = []


class _Track{u}:
    def __init__(self, tag, swallow=False):
        self.tag, self.swallow = tag, swallow

    def __enter__(self):
        LOG{u}.append(('enter', self.tag))
        return self

    def __exit__(self, typ, val, tb):
        LOG{u}.append(('exit', self.tag, None if typ is None else typ.__name__))
        return self.swallow


@contextlib.contextmanager
def _scaled{u}(k):
    LOG{u}.append(('gen enter', k))
    try:
        yield k * 2
    finally:
        LOG{u}.append(('gen exit', k))
"""
CONTEXTS = [
    "with _Track{u}('a') as c{u}:\n    acc = acc * 2\n    ret.append(c{u}.tag)",
    "with _Track{u}('s', swallow=True):\n    acc = acc + 1\n    if acc.ndim == 1:\n        raise ValueError('fuzz')\n    acc = acc * 3",
    "with _scaled{u}(2) as k{u}:\n    acc = acc * k{u}",
    "try:\n    with _scaled{u}(3) as k{u}:\n        acc = acc + k{u}\n        acc = acc.view(5, -1)\nexcept RuntimeError:\n    acc = acc - 1",
    "try:\n    with torch.no_grad():\n        a{u} = acc * 2\n        with torch.enable_grad():\n            b{u} = acc * 3\n            raise KeyError('fuzz')\nexcept KeyError:\n    pass\nacc = acc + a{u} + b{u}\nret.append(torch.is_grad_enabled())\nret.append(b{u}.requires_grad)",
    "try:\n    with torch.inference_mode():\n        c{u} = acc * 2\n        _ = acc.reshape(7, -1)\nexcept RuntimeError as e:\n    ret.append(type(e).__name__)\nret.append(torch.is_inference_mode_enabled())\nacc = acc + 1",
    "with torch.no_grad(), _Track{u}('b'):\n    c{u} = acc.sum()\nacc = acc * c{u}\nret.append(c{u}.requires_grad)",
    "with _Track{u}('o'):\n    with torch.enable_grad():\n        with torch.no_grad():\n            c{u} = acc + 1\n        d{u} = c{u} * acc\nacc = d{u}\nret.append(d{u}.requires_grad)",
    "with contextlib.suppress(IndexError):\n    acc = acc + acc[3]\nret.append(tuple(acc.shape))",
    "with contextlib.ExitStack() as st{u}:\n    k{u} = st{u}.enter_context(_scaled{u}(1))\n    st{u}.callback(LOG{u}.append, 'cb')\n    acc = acc * k{u}",
    "def _inner{u}(t):\n    with _Track{u}('r'):\n        return t * 2\n\nacc = _inner{u}(acc)",
    "def _g{u}(t):\n    with torch.no_grad():\n        yield t * 2\n    yield t * 3\n\ng{u} = _g{u}(acc)\na{u} = next(g{u})\nret.append(torch.is_grad_enabled())\nb{u} = next(g{u})\nacc = a{u} + b{u}\nret.append(b{u}.requires_grad)",
    "with torch.no_grad():\n    with torch.set_grad_enabled(True):\n        c{u} = acc * 2\n    with torch.inference_mode(False):\n        d{u} = acc + 1\nacc = c{u} + d{u}\nret.append(d{u}.requires_grad)",
    "try:\n    with _Track{u}('e'), torch.no_grad():\n        acc = acc * 2\n        assert acc.ndim != 2, 'fuzz: 2-d'\nexcept AssertionError as e:\n    ret.append(str(e))\nacc = acc + 1",
]


def contexts(rng, ctx):
    return _s("contexts", "with blocks: context managers, grad modes, exceptions crossing them", _pick(rng, CONTEXTS),
              setup=_CONTEXTS, state=("LOG{u}",), mutations=["LOG{u}.clear()"])  # fmt: skip


# ---------------------------------------------------------------- Python scalars and 0-dim tensors

# (statement, the kind of acc after it, or None: unchanged)
PROMOTION = [
    ("acc = acc * torch.tensor(2.5)", "float"),
    ("acc = acc + torch.tensor(2, dtype=torch.int32)", None),
    ("acc = acc.sum() * 1.5 + acc", "float"),
    ("acc = acc * torch.tensor(1.5, dtype=torch.float64)", "float"),
    ("acc = torch.tensor(3) * acc", None),
    ("acc = acc + n * torch.tensor(0.5)", "float"),
    ("acc = acc.sum() + n", None),
    ("acc = acc / torch.tensor(True)", "float"),
    ("acc = acc.float() * torch.tensor(2, dtype=torch.float16)", "float"),
    ("acc = acc.to(torch.float16) + torch.tensor(1.5, dtype=torch.float64)", "float"),
    ("acc = acc.to(torch.bfloat16) * 3.5", "float"),
    ("acc = acc.int() + torch.tensor(2**40)", "int"),
    ("acc = acc.abs().to(torch.uint8) - 1", "int"),
    ("acc = torch.where(acc > 0, acc, torch.tensor(1.5))", "float"),
    ("acc = torch.maximum(acc, torch.tensor(0.5, dtype=torch.float64))", "float"),
    ("acc = acc.clamp(min=torch.tensor(0))", None),
    ("ret.append(acc.sum().item() * 1.5)", None),
    ("ret.append(type(acc.sum().item() + n).__name__)", None),
    ("acc = acc * float(acc.sum() > 0)", "float"),
    ("ret.append(torch.result_type(acc, 2.5))\nret.append(torch.result_type(acc, torch.tensor(2)))", None),
    ("ret.append(torch.promote_types(acc.dtype, torch.int32))\nret.append(torch.can_cast(acc.dtype, torch.int64))", None),
    ("acc = torch.add(acc, 1.5, alpha=2)", "float"),
    ("acc = acc.div(2, rounding_mode='trunc')", None),
    ("acc = acc // torch.tensor(2.5)", "float"),
    ("acc = torch.tensor(n) * acc", None),
    ("acc = acc.sum(dtype=torch.float64) * acc", "float"),
    ("acc = acc.new_full((), n) + acc", None),
    ("acc = acc * numpy.float64(1.5)", "float"),
    ("acc = acc + numpy.int64(2)", None),
    ("acc = acc.sum() ** 2.0 + acc", "float"),
    ("acc = 2.0 ** acc", "float"),
    ("acc = acc * (acc.sum() > 0)", None),
    ("ret.append(acc.sum() * 0 + n)", None),
    ("acc = acc + math.pi * torch.ones((), dtype=torch.float64)", "float"),
    ("acc = (acc > 0) * 1.5 + (acc < 0) * 2", "float"),
    ("acc = acc.to(torch.int8) * 100 + 100", "int"),
]


def promotion(rng, ctx):
    body, kind = _pick(rng, PROMOTION)
    if kind is not None:
        ctx.kind = kind
    elif ctx.kind == "bool" and "acc" in body.split("\n")[0].split("=", 1)[0]:
        ctx.kind = "int"
    needs = {"n"} if "n)" in body or " n" in body else ()
    return _s("promotion", "Python scalars and 0-dim tensors mixed (eager's result dtypes)", body, needs=needs)


# ---------------------------------------------------------------- arguments that share memory, out= arguments

ALIASING = [
    "y.add_(1)\nacc = acc + x",
    "x.mul_(2)\nret.append(y * 1)",
    "acc = acc + y\nx.add_(1)\nret.append(y + 0)",
    "y.copy_(x * 2)\nacc = acc + y.sum()",
    "y.copy_(x)\nacc = acc + y.sum()",
    "torch.add(x, 1, out=y)\nacc = acc + y.sum()",
    "s{u} = x * y\ny.detach().add_(1)\nacc = s{u} + x",
    "ret.append(x is y)\nret.append(y._is_view())",
    "y.zero_()\nacc = acc.sum() + x.sum()",
    "y[...] = 1\nacc = x * 2",
    "x.detach().mul_(3)\nacc = acc + y",
    "t{u} = y.sum()\nx.detach().sub_(1)\nacc = acc * t{u}",
    "if y.ndim:\n    y[0].fill_(7)\nret.append(x.clone())",
]
OUT_ARGUMENTS = [
    "o{u} = torch.empty_like(acc)\ntorch.mul(acc, 2, out=o{u})\nacc = o{u}",
    "o{u} = torch.empty_like(acc.mT).mT if acc.ndim >= 2 else torch.empty_like(acc)\ntorch.add(acc, 1, out=o{u})\nacc = o{u} * 1",
    "o{u} = torch.zeros(5, dtype=acc.dtype)\ntorch.neg(acc, out=o{u})\nret.append(o{u})",
    "torch.mul(acc, 2, out=acc)",
    "o{u} = torch.empty(acc.shape, dtype=torch.float64)\ntorch.sin(acc, out=o{u})\nacc = o{u}",
    "o{u} = torch.empty(acc.shape, dtype=torch.int64)\ntorch.sin(acc.float(), out=o{u})\nacc = acc + o{u}",
    "r{u} = torch.add(acc, 1, out=torch.empty_like(acc))\nacc = r{u}",
    "o{u} = torch.zeros(*acc.shape, 2, dtype=acc.dtype)\ntorch.mul(acc, 3, out=o{u}[..., 0])\nacc = o{u}.sum(-1)",
    "o{u} = torch.empty(2 * acc.numel(), dtype=acc.dtype)\ntorch.cat([acc.reshape(-1), acc.reshape(-1)], out=o{u})\nret.append(o{u})",
    "torch.add(x, 1, out=x)",
    "if acc.ndim:\n    v{u}, i{u} = torch.empty(acc.shape[:-1], dtype=acc.dtype), torch.empty(acc.shape[:-1], dtype=torch.int64)\n    torch.max(acc, -1, out=(v{u}, i{u}))\n    ret.append(i{u})\n    acc = v{u}",
    "o{u} = torch.empty((), dtype=acc.dtype)\ntorch.sum(acc, out=o{u})\nacc = acc + o{u}",
]


def aliasing(rng, ctx):
    if rng.random() < 0.5:
        return _s("aliasing", "two arguments that share memory (the same tensor, views of one base)",
                  _pick(rng, ALIASING), needs={"y"})  # fmt: skip
    return _s("aliasing", "out= arguments", _pick(rng, OUT_ARGUMENTS))


# ---------------------------------------------------------------- NamedTuples and dataclasses in and out

RECORDS_SETUP = """_Rec = collections.namedtuple('_Rec', ['t', 'k'])
_DC = dataclasses.make_dataclass(
    '_DC', [('t', object), ('scale', float, dataclasses.field(default=2.0)), ('hist', list, dataclasses.field(default_factory=list))]
)
_FDC = dataclasses.make_dataclass('_FDC', [('t', object), ('k', int)], frozen=True)
"""
RECORD_ARGS = [
    "acc = acc + rec.t * rec.k",
    "t{u}, k{u} = rec\nacc = acc * k{u} + t{u}.sum()",
    "ret.append(rec._replace(k=rec.k + 1))",
    "ret.append(rec)",
    "ret.append(rec._asdict())",
    "acc = acc + rec[0].sum() + len(rec)",
    "rec.t.add_(1)\nacc = acc + rec.t",
    "if rec.k > 1:\n    acc = acc * 2\nret.append(rec.k)",
]
DATACLASS_ARGS = [
    "acc = acc * dc.scale + dc.t.sum()",
    "dc.hist.append(acc.ndim)\nret.append(len(dc.hist))",
    "dc.scale = dc.scale * 2\nacc = acc * dc.scale",
    "ret.append(dataclasses.replace(dc, scale=1.0))",
    "ret.append(dc)",
    "dc.t = dc.t + acc.sum()\nret.append(dc.t)",
    "ret.append(dataclasses.astuple(dc)[1:])",
]
RECORD_RESULTS = [
    "ret.append(_Rec(acc * 2, acc.ndim))",
    "ret.append(_FDC(acc + 1, 3))",
    "ret.append(acc.max(-1) if acc.ndim else acc.max())",
    "ret.append(torch.sort(acc) if acc.ndim else acc)",
    "v{u}, i{u} = acc.min(-1) if acc.ndim else (acc, acc)\nacc = v{u}",
    "r{u} = _Rec(acc, 2)\nacc = r{u}.t * r{u}.k\nret.append(r{u}._replace(t=acc.sum()))",
    "ret.append(_DC(acc * 3, 0.5, [acc.ndim]))",
    "ret.append(torch.topk(acc.reshape(-1), 1) if acc.numel() else acc)",
]


def records(rng, ctx):
    choice = rng.random()
    if choice < 0.3:
        body = _pick(rng, RECORD_ARGS)
        return _s("records", "a NamedTuple argument", body, setup=RECORDS_SETUP, needs={"rec"})
    if choice < 0.6:
        body = _pick(rng, DATACLASS_ARGS)
        if "dc.scale" in body:
            ctx.kind = "float"
        return _s("records", "a dataclass argument", body, setup=RECORDS_SETUP, needs={"dc"})
    body = _pick(rng, RECORD_RESULTS)
    if "acc.min" in body and ctx.kind == "bool":
        ctx.kind = "int"
    return _s("records", "NamedTuples, dataclasses and torch.return_types as results", body, setup=RECORDS_SETUP)


# ---------------------------------------------------------------- str(), repr() and f-strings of shapes and dtypes

FORMATTING = [
    "if str(acc.dtype) == 'torch.float32':\n    acc = acc + 1\nelse:\n    ret.append(str(acc.dtype))",
    "ret.append(f'{acc.shape}')",
    "ret.append(repr(acc.shape))",
    "if f'{acc.dtype}'.endswith('64'):\n    acc = acc * 2",
    "ret.append(str(acc.device))",
    "ret.append('{}|{!r}'.format(acc.shape, acc.dtype))",
    "ret.append(f'{acc.ndim:03d}-{acc.numel():>4}')",
    "ret.append(f'{tuple(acc.shape)!r}')",
    "K{u}[f'{acc.dtype}-{tuple(acc.shape)}'] = K{u}.get(f'{acc.dtype}-{tuple(acc.shape)}', 0) + 1\nret.append(len(K{u}))",
    "ret.append(str(acc.size()))",
    "ret.append('%s %s' % (acc.shape, acc.dtype))",
    "ret.append(str(acc.shape).count(','))",
    "ret.append(hash(acc.shape) == hash(tuple(acc.shape)))",
    "ret.append(acc.dtype.itemsize)",
    "name{u} = str(acc.dtype).replace('torch.', '')\nacc = acc.to(getattr(torch, name{u}))\nret.append(name{u})",
    "if 'float' in repr(acc.dtype):\n    acc = acc.double()",
    "ret.append(format(acc.shape))",
    "ret.append(f'{acc.requires_grad}')",
    "ret.append(f'{acc.shape[-1] if acc.ndim else 0:x}')",
    "if len(str(acc.shape)) > 12:\n    acc = acc.flatten()",
    "ret.append(str(torch.Size([acc.ndim, 2])))",
    "print(f'shape {tuple(acc.shape)} dtype {acc.dtype}')",
    "ret.append(repr(acc.dtype) + repr(acc.layout))",
    "ret.append({str(acc.dtype): acc.ndim})",
    "ret.append(f'{acc.sum().item():.3f}' if acc.is_floating_point() else str(acc.sum().item()))",
    "ret.append(str(acc.shape[0]) if acc.ndim else '')",
]


def formatting(rng, ctx):
    body = _pick(rng, FORMATTING)
    if "double()" in body:
        ctx.kind = "float"
    state = ("K{u}",) if "K{u}" in body else ()
    return _s("formatting", "str()/repr()/f-strings of shapes and dtypes, also in branches", body,
              setup="K{u} = {}" if state else "", state=state)  # fmt: skip


# ---------------------------------------------------------------- global and nonlocal rebinding

REBINDING = [
    ("global T{u}\nif T{u} is not None and T{u}.shape == acc.shape and T{u}.dtype == acc.dtype:\n    acc = acc + T{u}\nT{u} = acc.detach() * 2", "T{u} = None", ["T{u} = None"]),
    ("global N{u}\nN{u} = N{u} + acc.ndim\nacc = acc * N{u}", "N{u} = 0", ["N{u} = 0", "N{u} = 1.5"]),
    ("global G{u}\nG{u}.append(acc.sum())\nret.append(len(G{u}))\nif len(G{u}) > 2:\n    G{u} = []", "G{u} = []", ["G{u} = [torch.ones(())]"]),
    ("global C{u}\ntry:\n    C{u} += 1\nexcept NameError:\n    C{u} = 0\nret.append(C{u})\nif C{u} > 2:\n    del C{u}", "", ["C{u} = 10"]),
    ("tot{u} = acc * 0\n\ndef _add{u}(v):\n    nonlocal tot{u}\n    tot{u} = tot{u} + v\n\nfor k{u} in range(2):\n    _add{u}(acc * k{u})\nacc = tot{u}", "", []),
    ("global S{u}\nS{u} = {'shape': tuple(acc.shape), 'sum': acc.sum()}\nret.append(S{u}['shape'])", "S{u} = {}", []),
    ("global F{u}\nF{u} = lambda t, k=acc.ndim: t * k\nacc = F{u}(acc)", "F{u} = None", []),
]


def rebinding(rng, ctx):
    body, setup, mutations = _pick(rng, REBINDING)
    if "bool" == ctx.kind:
        ctx.kind = "int"
    if "1.5" in " ".join(mutations):
        ctx.kind = "float" if ctx.kind != "int" else ctx.kind
    names = [n for n in ("T{u}", "N{u}", "G{u}", "C{u}", "S{u}", "F{u}") if f"global {n}" in body]
    return _s("rebinding", "global and nonlocal rebinding (values the previous call wrote)", body, setup=setup,
              mutations=list(mutations), state=tuple(n for n in names if n != "F{u}"))  # fmt: skip


# ---------------------------------------------------------------- functools helpers

_HELPERS = """@functools.lru_cache(maxsize=None)
def _ones{u}(n):
    return torch.ones(n)


@functools.lru_cache(maxsize=4)
def _steps{u}(n):
    return tuple(range(n))


CALLS{u} = [0]


def _counted{u}(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        CALLS{u}[0] += 1
        return fn(*args, **kwargs)

    return wrapper


@_counted{u}
def _h{u}(t, k, scale=1.0):
    return t * k + scale


P{u} = functools.partial(_h{u}, k=2)
"""
HELPERS = [
    "acc = acc + _ones{u}(acc.shape[-1] if acc.ndim else 1)",
    "acc = acc * len(_steps{u}(acc.ndim + 1))\nret.append(_steps{u}(2))",
    "acc = P{u}(acc)\nret.append(CALLS{u}[0])",
    "acc = P{u}(acc, scale=0.5)\nret.append(P{u}.keywords)",
    "acc = functools.reduce(operator.add, [acc, acc, 1])",
    "acc = functools.partial(torch.clamp, min=-1)(acc, max=1)",
    "ret.append(_h{u}.__name__)\nacc = _h{u}(acc, 3)",
    "acc = P{u}.func(acc, 1) + P{u}(acc)",
]
HELPER_CHANGES = [
    "_ones{u}.cache_clear()", "P{u} = functools.partial(_h{u}, k=3)", "P{u}.keywords['k'] = 5",
    "_h{u}.__wrapped__.__defaults__ = (2.0,)", "CALLS{u}[0] = 0", "_steps{u}.cache_clear()",
]  # fmt: skip


def helpers(rng, ctx):
    body = _pick(rng, HELPERS)
    if "scale" in body or "P{u}" in body or "_h{u}" in body:
        ctx.kind = "float" if ctx.kind != "int" else "int"
    if ctx.kind == "bool":
        ctx.kind = "int"
    return _s("helpers", "functools.partial, lru_cache and wraps helpers", body, setup=_HELPERS,
              mutations=list(HELPER_CHANGES), state=("CALLS{u}",))  # fmt: skip


# ---------------------------------------------------------------- the owner's attributes deleted and set between calls

OWNER_READS = [
    "if hasattr({M}, 'extra'):\n    acc = acc + {M}.extra\nret.append(hasattr({M}, 'extra'))",
    "acc = acc * getattr({M}, 'gain', 1.0)",
    "for name{u}, b{u} in ({M}.named_buffers() if isinstance({M}, torch.nn.Module) else ()):\n    acc = acc + b{u}.sum()\n    ret.append(name{u})",
    "ret.append(sorted(vars({M})))",
    "if getattr({M}, 'drop', None) is not None:\n    acc = {M}.drop(acc.float())",
    "acc = acc + sum(p.sum() for p in {M}.lin.parameters()) if hasattr({M}, 'lin') else acc",
    "ret.append('gain' in {M}.__dict__)",
]
OWNER_CHANGES = [
    "m.extra = torch.ones(())", "del m.extra", "m.extra = 2.0", "m.gain = 0.5", "del m.gain", "m.gain = 3",
    "m.drop = None", "m.drop = torch.nn.Dropout(0.0)", "del m.lin", "m.lin = torch.nn.Linear(4, 4)",
    "m.register_buffer('extra', torch.full((), 3.0)) if isinstance(m, torch.nn.Module) else None",
    "m.buf = torch.zeros(())", "m.__dict__.pop('gain', None)",
]  # fmt: skip


def owner_attrs(rng, ctx):
    body = _pick(rng, OWNER_READS)
    if "drop(acc.float())" in body or "p.sum()" in body or "extra" in body or "gain" in body:
        ctx.kind = "float"
    return _s("owner_attrs", "the owner's attributes deleted and set between calls", body,
              mutations=list(OWNER_CHANGES), needs={"owner"})  # fmt: skip


# ---------------------------------------------------------------- the iterator protocol over tensors

_PROTOCOLS = """import itertools


class _Rows{u}:
    def __init__(self, t):
        self.t, self.i = t, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= (self.t.shape[0] if self.t.ndim else 0):
            raise StopIteration
        self.i += 1
        return self.t[self.i - 1] * self.i


def _count{u}(t):
    k = 0
    while True:
        k += 1
        yield t * k


def _running{u}():
    total = yield
    while True:
        total = total + (yield total)


def _catching{u}(t):
    try:
        yield t
    except ValueError:
        yield t * 10
    return t


def _yf{u}(t):
    yield from t
    return t.sum()
"""
PROTOCOLS = [
    "for r{u} in _Rows{u}(acc):\n    acc = acc + r{u}.sum()",
    "for i{u}, row{u} in enumerate(acc if acc.ndim else [acc]):\n    acc = acc + row{u} * i{u}",
    "ret.append([r.sum() for r in acc] if acc.ndim else [])",
    "it{u} = iter(acc.reshape(-1))\nfirst{u} = next(it{u}, None)\nacc = acc + (first{u} if first{u} is not None else 0)\nret.append(len(list(it{u})))",
    "acc = torch.stack([*itertools.islice(_count{u}(acc), 3)])",
    "g{u} = _running{u}()\nnext(g{u})\ng{u}.send(acc)\nfor k{u} in range(2):\n    total{u} = g{u}.send(acc * k{u})\nacc = total{u}",
    "g{u} = _catching{u}(acc)\nv{u} = next(g{u})\nv{u} = g{u}.throw(ValueError('fuzz'))\nacc = acc + v{u}\ng{u}.close()",
    "g{u} = _yf{u}(acc.reshape(-1)[:3])\nvals{u} = []\nwhile True:\n    try:\n        vals{u}.append(next(g{u}))\n    except StopIteration as e:\n        acc = acc + e.value\n        break\nret.append(len(vals{u}))",
    "acc = sum(itertools.chain(acc.reshape(-1)[:2], [acc.sum()]), torch.zeros((), dtype=acc.dtype)) + acc",
    "ret.append(list(itertools.accumulate(acc.reshape(-1)[:3].tolist())))",
    "ret.append(dict(zip('abc', acc.reshape(-1).tolist())))",
    "ret.append(list(map(lambda r: r.shape, acc)) if acc.ndim else [])",
    "acc = torch.stack(list(reversed(acc.unbind(0)))) if acc.ndim else acc",
    "pairs{u} = list(zip(acc.reshape(-1), acc.reshape(-1)[1:]))\nacc = acc + sum((a - b for a, b in pairs{u}), torch.zeros((), dtype=acc.dtype))",
]


def protocols(rng, ctx):
    body = _pick(rng, PROTOCOLS)
    if ctx.kind == "bool":
        ctx.kind = "int"
    return _s("protocols", "the iterator protocol over tensors: classes, generators, send, throw, itertools", body,
              setup=_PROTOCOLS)  # fmt: skip
