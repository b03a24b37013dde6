"""Snippets of the randomized tester for where programs from outside live and the first families did not reach
(split from ``tests.fuzz.snippets``, whose docstring says what a snippet is): ``nn.Module``s held by the program
whose parameters, buffers, submodules, hooks and train/eval mode change between calls; ``torch.autograd.Function``
subclasses and ``torch.func``; low-precision and complex dtypes mixed with Python scalars, integer tensors,
``.to()`` chains and CPU autocast; decorators and descriptors (``functools.wraps`` stacks, ``contextmanager``
decorators, ``classmethod``/``staticmethod``/``property``/``cached_property``, ``singledispatch``); and results
that hold views of the arguments inside dataclasses, NamedTuples and nested dicts.
"""

from __future__ import annotations

from tests.fuzz.snippet_base import _pick, _s


def _floats(ctx) -> None:
    """The snippets below work on float ``acc`` (they convert it first)."""
    ctx.kind = "float"


# ---------------------------------------------------------------- modules held by the program

_NET = """class _Net{u}(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(1.5))
        self.register_buffer("b", torch.tensor(0.5))
        self.act = torch.nn.Tanh()
        self.seq = torch.nn.Sequential(torch.nn.Identity(), torch.nn.Softsign())
        self.k = 2
        self.calls = 0

    def forward(self, t):
        y = self.act(t * self.w + self.b) * self.k
        if self.training:
            y = y + 1
        return self.seq(y)


net{u} = _Net{u}()
"""
MODULE_USES = [
    "acc = net{u}(acc.float())",
    "ret.append(net{u}(acc.float()).sum())\nacc = acc.float() * net{u}.w",
    "for p{u} in net{u}.parameters():\n    acc = acc.float() + p{u}",
    "ret.append(sorted(name for name, _ in net{u}.named_buffers()))\nacc = acc.float() + sum(b.sum() for b in net{u}.buffers())",
    "net{u}.calls += 1\nret.append(net{u}.calls)\nacc = net{u}(acc.float())",
    "net{u}.register_buffer('seen', acc.detach().float().sum())\nacc = acc.float() + net{u}.seen",
    "acc = acc.float() * len(list(net{u}.children()))\nret.append(net{u}.training)",
    "acc = torch.func.functional_call(net{u}, {'w': torch.tensor(3.0)}, (acc.float(),))",
    "acc = net{u}.seq(acc.float()) + net{u}.act(acc.float())",
    "ret.append(net{u}.state_dict()['b'] * 1)\nacc = acc.float() + net{u}.get_buffer('b')",
    "acc = net{u}(net{u}(acc.float()))",
    "ret.append([type(c).__name__ for c in net{u}.seq])\nacc = net{u}.seq[-1](acc.float())",
    "with torch.no_grad():\n    net{u}.w.add_(0.5)\nacc = net{u}(acc.float())",
    "acc = acc.float() * net{u}.w.detach()\nret.append(net{u}.w.requires_grad)",
]
MODULE_CHANGES = [
    "net{u}.eval()", "net{u}.train()", "net{u}.act = torch.nn.ReLU()", "net{u}.act = torch.nn.Tanh()",
    "net{u}.w = torch.nn.Parameter(torch.tensor(-2.0))", "net{u}.w.data.mul_(2)", "net{u}.w.requires_grad_(False)",
    "net{u}.register_buffer('b', torch.tensor(3.0))", "net{u}.b = torch.tensor(1.0, dtype=torch.float64)",
    "net{u}.k = 3", "net{u}.k = 2.5",
    "_h{u} = net{u}.register_forward_hook(lambda mod, args, out: out * 2)", "_h{u}.remove()",
    "_p{u} = net{u}.act.register_forward_pre_hook(lambda mod, args: (args[0] + 1,))", "_p{u}.remove()",
    "net{u}.seq[0] = torch.nn.Hardtanh()", "net{u}.seq.append(torch.nn.Sigmoid())", "net{u} = _Net{u}()",
    "net{u}.w = torch.nn.Parameter(torch.tensor([1.0, 2.0])[1])", "net{u}.requires_grad_(True)",
]  # fmt: skip


def modules(rng, ctx):
    body = _pick(rng, MODULE_USES)
    _floats(ctx)
    return _s("modules", "an nn.Module held by the program: parameters, buffers, submodules, hooks, mode changed",
              body, setup=_NET, mutations=list(MODULE_CHANGES), state=("net{u}",))  # fmt: skip


# ---------------------------------------------------------------- autograd.Function and torch.func

_FUNCTIONS = """class _Sq{u}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return t * t

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * 3 * t  # not the derivative: the program's own rule must be the one used


class _Scale{u}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, k):
        ctx.k = k
        return t * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k + 1, None


class _Split{u}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        idx = (t > 0).to(torch.int64)
        ctx.mark_non_differentiable(idx)
        return t.clone(), idx

    @staticmethod
    def backward(ctx, g, gi):
        return g * 2


class _Lazy{u}(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.set_materialize_grads(False)
        return t * 2, t.exp()

    @staticmethod
    def backward(ctx, g1, g2):
        first = g1.clamp(-1, 1) if g1 is not None else 0.5
        return first + (g2 * 3 if g2 is not None else 0)


class _Once{u}(torch.autograd.Function):
    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def forward(t):
        return t.sin()

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * t.cos() * 2
"""
FUNCTION_USES = [
    "acc = _Sq{u}.apply(acc.float())",
    "acc = _Scale{u}.apply(acc.float(), 2.5)",
    "acc = _Scale{u}.apply(acc.float(), n) if isinstance(n, (int, float)) else acc.float()",
    "v{u}, i{u} = _Split{u}.apply(acc.float())\nacc = v{u} + i{u}\nret.append(i{u})\nret.append(i{u}.requires_grad)",
    "acc = _Once{u}.apply(acc.float()) + _Sq{u}.apply(acc.float())",
    "acc = torch.func.grad(lambda t: (t ** 2).sum())(acc.float().detach())",
    "acc = torch.func.vmap(lambda r: r * r.sum())(acc.float()) if acc.ndim else acc.float()",
    "acc = torch.func.vmap(torch.dot)(acc.float(), acc.float()) if acc.ndim == 2 else acc.float()",
    "g{u}, v{u} = torch.func.grad_and_value(lambda t: t.sin().sum())(acc.float().detach())\nacc = g{u} + v{u}",
    "acc = torch.func.functional_call(torch.nn.Tanh(), {}, (acc.float(),))",
    "t{u} = acc.float()\n_, d{u} = torch.func.jvp(torch.sin, (t{u},), (torch.ones_like(t{u}),))\nacc = t{u} + d{u}",
    "with torch.no_grad():\n    acc = _Sq{u}.apply(acc.float())",
    "acc = _Sq{u}.apply(_Scale{u}.apply(acc.float(), 0.5))\nret.append(acc.requires_grad)",
    "acc = _Lazy{u}.apply(acc.float())[0]",
    "a{u}, b{u} = _Lazy{u}.apply(acc.float())\nacc = a{u} * b{u}",
    "acc = _Scale{u}.apply(acc.float(), 2.0) * _Scale{u}.apply(acc.float(), 2.0)",
]


def autograd_functions(rng, ctx):
    body = _pick(rng, FUNCTION_USES)
    _floats(ctx)
    return _s("autograd_functions", "torch.autograd.Function subclasses and torch.func in programs", body,
              setup=_FUNCTIONS, needs={"n"} if " n" in body else ())  # fmt: skip


# ---------------------------------------------------------------- low-precision and complex dtypes

LOW_PRECISION = [
    "acc = acc.to(torch.bfloat16) * 2.5 + 1",
    "acc = acc.half() + torch.tensor(3)",
    "acc = (acc.to(torch.bfloat16) + torch.arange(acc.shape[-1] if acc.ndim else 1, dtype=torch.int32)).float()",
    "acc = acc.to(torch.float16).to(torch.bfloat16).to(torch.float32)",
    "acc = acc.to(torch.float16).sum(dtype=torch.float32)",
    "acc = acc.to(torch.bfloat16).mean() if acc.numel() else acc.float()",
    "acc = acc.half().softmax(-1)",
    "acc = acc.to(torch.bfloat16) / torch.tensor(3, dtype=torch.int64)",
    "acc = acc.to(torch.complex64) * 1j\nret.append(acc.real)\nacc = acc.abs()",
    "c{u} = torch.complex(acc.float(), -acc.float())\nacc = (c{u} * c{u}.conj()).real",
    "acc = torch.view_as_real(acc.to(torch.complex64) + 2j).sum(-1)",
    "acc = acc.to(torch.complex64).angle() + acc.float()",
    "with torch.autocast('cpu', dtype=torch.bfloat16):\n    acc = acc.float() @ torch.ones(acc.shape[-1] if acc.ndim else 1, 2)\nret.append(acc.dtype)",
    "with torch.autocast('cpu'):\n    c{u} = torch.nn.functional.linear(acc.float().reshape(-1, 1), torch.ones(3, 1))\nacc = c{u}.float()\nret.append(c{u}.dtype)",
    "with torch.autocast('cpu', dtype=torch.bfloat16):\n    c{u} = acc.float() + 1\n    d{u} = torch.mm(acc.float().reshape(1, -1), acc.float().reshape(-1, 1))\nacc = c{u} + d{u}.sum()",
    "acc = acc.to(torch.float16) * n",
    "acc = acc.to(torch.bfloat16) + acc.to(torch.float16)",
    "acc = acc.to(torch.int32).to(torch.bfloat16) * 0.1",
    "acc = acc.float().to(torch.float16).exp().float()",
    "acc = torch.where(acc.half() > 0, acc.half(), 0.25)",
    "ret.append(acc.to(torch.bfloat16).dtype.is_floating_point)\nacc = acc.to(dtype=torch.float16, copy=True)",
    "acc = acc.type(torch.bfloat16).cumsum(-1) if acc.ndim else acc.float()",
    "acc = acc.to(torch.float16).var() if acc.numel() > 1 else acc.float()",
    "ret.append(acc.to(torch.bfloat16).tolist())\nacc = acc.half()",
    "acc = acc.to(torch.bfloat16).to(x.dtype)",
]


def low_precision(rng, ctx):
    body = _pick(rng, LOW_PRECISION)
    _floats(ctx)
    return _s("low_precision", "bfloat16, float16 and complex64 with scalars, integer tensors, .to() chains, autocast",
              body, needs={"n"} if " n" in body else ())  # fmt: skip


# ---------------------------------------------------------------- decorators and descriptors

_WRAPPERS = """LOG{u} = []


def _logged{u}(tag):
    def deco(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            LOG{u}.append(tag)
            return fn(*args, **kwargs)

        return wrapper

    return deco


@contextlib.contextmanager
def _phase{u}(name):
    LOG{u}.append(('in', name))
    yield name
    LOG{u}.append(('out', name))


@_logged{u}('outer')
@_logged{u}('inner')
def _twice{u}(t, k=2):
    return t * k


@_phase{u}('deco')
def _in_phase{u}(t):
    return t + 1


class _Tool{u}:
    base = 1.5

    def __init__(self, k):
        self._k = k

    @property
    def k(self):
        LOG{u}.append('k')
        return self._k

    @k.setter
    def k(self, v):
        self._k = v

    @functools.cached_property
    def heavy(self):
        LOG{u}.append('heavy')
        return self._k * 10

    @classmethod
    def make(cls, k):
        return cls(k + cls.base)

    @staticmethod
    def shift(t):
        return t - 1

    def apply(self, t):
        return self.shift(t) * self.k

    __call__ = apply


@functools.singledispatch
def _conv{u}(v):
    return v


@_conv{u}.register
def _(v: int):
    return v * 2


@_conv{u}.register
def _(v: float):
    return -v


tool{u} = _Tool{u}(2)
_half{u} = functools.partial(_twice{u}, k=0.5)
"""
WRAPPER_USES = [
    "acc = _twice{u}(acc)\nret.append(_twice{u}.__name__)",
    "acc = _half{u}(acc.float())\nret.append(_half{u}.keywords)",
    "acc = _in_phase{u}(acc)",
    "with _phase{u}('with') as p{u}:\n    acc = acc * 2\nret.append(p{u})",
    "acc = tool{u}.apply(acc)\ntool{u}.k = tool{u}.k + 1",
    "acc = acc + tool{u}.heavy\nret.append(tool{u}.heavy)",
    "acc = _Tool{u}.make(n)(acc.float()) if isinstance(n, int) else acc.float()",
    "acc = tool{u}(acc.float()) + _Tool{u}.shift(acc.float())",
    "acc = acc + _conv{u}(n)\nret.append(_conv{u}(n))",
    "acc = _twice{u}.__wrapped__(acc, 3)",
    "acc = functools.partial(_Tool{u}.shift)(acc) + type(tool{u}).base",
    "acc = _logged{u}('made')(torch.neg)(acc.float())",
    "ret.append(tool{u}.__dict__.get('heavy'))\nacc = acc.float() * tool{u}.base",
]
WRAPPER_CHANGES = [
    "tool{u}.k = 3", "_Tool{u}.base = -1.0", "del tool{u}.heavy", "tool{u}.heavy = 0.5", "tool{u} = _Tool{u}(1)",
    "_half{u} = functools.partial(_twice{u}, k=4)", "LOG{u}.clear()", "_Tool{u}.shift = staticmethod(lambda t: t + 1)",
    "_twice{u}.__wrapped__.__defaults__ = (5,)", "_Tool{u}.__init__ = lambda self, k: setattr(self, '_k', -k)",
    "_Tool{u}.__call__ = lambda self, t: t * 3",
]  # fmt: skip


def wrappers(rng, ctx):
    body = _pick(rng, WRAPPER_USES)
    if "float()" in body or "heavy" in body or "tool{u}" in body or "_conv" in body or "_phase" in body:
        _floats(ctx)
    elif ctx.kind == "bool":
        ctx.kind = "int"
    setup = "import contextlib\n\n" + _WRAPPERS
    return _s("wrappers", "decorators, contextmanager, property, cached_property, classmethod, singledispatch", body,
              setup=setup, mutations=list(WRAPPER_CHANGES), state=("LOG{u}", "tool{u}"),
              needs={"n"} if "(n)" in body else ())  # fmt: skip


# ---------------------------------------------------------------- results holding views of the arguments

_OUTPUTS = """class _Pair{u}(typing.NamedTuple):
    view: object
    total: object


_Box{u} = dataclasses.make_dataclass("_Box{u}", [("a", object), ("b", object, dataclasses.field(default=None))])
"""
OUTPUT_USES = [
    "ret.append(_Pair{u}(x[..., :1] if x.ndim else x, acc.sum()))",
    "ret.append({'a': {'v': x.reshape(-1), 'n': [acc, x.mT if x.ndim >= 2 else x]}})",
    "ret.append(_Box{u}(x.detach(), {'t': x.unsqueeze(0)}))",
    "ret.append(x)\nret.append(x.view_as(x))",
    "v{u} = x.detach()[..., :1] if x.ndim else x.detach()\nret.append({'view': v{u}})\nv{u}.mul_(2) if v{u}.dtype != torch.bool else None",
    "out{u} = _Pair{u}(x.flatten(), acc)\nret.append(out{u}._replace(total=acc * 2))\nret.append(out{u}._asdict())",
    "ret.append([x.unbind(0) if x.ndim else (x,)])",
    "ret.append(dataclasses.asdict(_Box{u}(acc, [x.expand(2, *x.shape)])))",
    "ret.append(collections.OrderedDict(first=x.narrow(-1, 0, 1) if x.ndim and x.shape[-1] else x, acc=acc))",
    "t{u} = x.detach()\nret.append((t{u}, t{u}.view(-1) if t{u}.is_contiguous() else t{u}.reshape(-1)))\nret.append(t{u}.is_contiguous())",
    "ret.append(types.MappingProxyType({'x': x.T if x.ndim == 2 else x}).copy())",
    "ret.append(_Pair{u}(*x.chunk(2, -1)) if x.ndim and x.shape[-1] == 2 else x)",
]


def outputs(rng, ctx):
    body = _pick(rng, OUTPUT_USES)
    return _s("outputs", "results holding views of the arguments in NamedTuples, dataclasses, nested dicts", body,
              setup="import typing\n\n" + _OUTPUTS)  # fmt: skip
