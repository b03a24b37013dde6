"""Snippets of the randomized tester from module-level code as users write it in models (split from
``tests.fuzz.snippets``, whose docstring says what a snippet is): ``nn.Module`` subclasses whose buffers forward
updates (in place under ``no_grad`` and by rebinding), ``register_buffer(persistent=False)``, submodules in
``ModuleList``/``ModuleDict`` iterated, sliced and indexed, ``*args/**kwargs`` forwarding through wrapper modules,
forward (pre-)hooks that change arguments and outputs, ``no_grad``/``enable_grad``/``inference_mode`` regions and
``@torch.no_grad()`` helper methods inside forward, ModelOutput-like dict subclasses, dataclasses and NamedTuples as
outputs, ``functools.partial`` of ops, attribute caches (``if self._cache is None: ...``), dtype casts and autocast,
tensors kept by the model across calls and written by the caller between calls, Python scalars from ``.item()``/
``.tolist()`` in control flow, integer tensors and boolean masks.

Between calls the caller changes what users change: the mode, module attributes, submodules (appended, replaced,
deleted), hooks, requires_grad, the dtype of the whole model (``.double()``) or of one buffer, buffers in place.
The model's buffers are compared through ``state`` expressions (``vars()`` of a module does not show them).
"""

from __future__ import annotations

from tests.fuzz.snippet_base import _pick, _s

_MODELS = """import typing


class _Out{u}(collections.OrderedDict):
    \"\"\"A ModelOutput-like dict subclass: keys are attributes too.\"\"\"

    def __getattr__(self, k):
        try:
            return self[k]
        except KeyError:
            raise AttributeError(k) from None


_Rec{u} = dataclasses.make_dataclass("_Rec{u}", [("logits", object), ("aux", object, dataclasses.field(default=None))])


class _Pair{u}(typing.NamedTuple):
    hidden: object
    score: object


class _Affine{u}(torch.nn.Module):
    def __init__(self, k):
        super().__init__()
        self.w = torch.nn.Parameter(torch.tensor(float(k)))
        self.register_buffer("b", torch.tensor(0.25 * k))

    def forward(self, t, *, shift=0.0):
        return t * self.w + self.b + shift


class _Norm{u}(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("mean", torch.zeros(()))
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))
        self.register_buffer("scratch", torch.ones(()), persistent=False)
        self.momentum = 0.5
        self._cache = None

    def forward(self, t):
        if self.training:
            with torch.no_grad():
                self.mean.mul_(1 - self.momentum).add_(t.detach().mean() * self.momentum)
                self.steps += 1
        return (t - self.mean) * self.scratch

    def ema(self, t):
        self.mean = self.mean * (1 - self.momentum) + t.detach().mean() * self.momentum
        return t - self.mean

    @torch.no_grad()
    def stats(self, t):
        return t.float().std() if t.numel() > 1 else t.float().sum()

    def table(self, t):
        if self._cache is None:
            self._cache = torch.arange(4.0) * self.momentum
        return t + self._cache[:2].sum()


class _Stack{u}(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([_Affine{u}(k) for k in (1, 2, 3)])
        self.heads = torch.nn.ModuleDict({"a": _Affine{u}(-1), "b": torch.nn.Tanh()})
        self.norm = _Norm{u}()
        self.use = "a"
        self.depth = 3
        self.out_dtype = None
        self._last = None

    def forward(self, t, *args, **kwargs):
        for i, layer in enumerate(self.layers):
            if i >= self.depth:
                break
            t = layer(t, **kwargs)
        t = self.norm(t)
        t = self.heads[self.use](t)
        if self.out_dtype is not None:
            t = t.to(self.out_dtype)
        return _Out{u}(logits=t, extra=args)


class _Wrap{u}(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args, **kwargs):
        return self.inner(*args, **kwargs)


HOOKLOG{u} = []
stk{u} = _Stack{u}()
wrap{u} = _Wrap{u}(stk{u})
stk{u}.norm.register_forward_hook(lambda mod, args, out: HOOKLOG{u}.append(tuple(out.shape)))
_sm{u} = functools.partial(torch.softmax, dim=-1)
_clamp{u} = functools.partial(torch.clamp, min=-0.5)
"""

MODEL_USES = [
    "acc = stk{u}(acc.float())['logits']",
    "o{u} = stk{u}(acc.float(), shift=0.5)\nacc = o{u}.logits\nret.append(sorted(o{u}.keys()))",
    "o{u} = wrap{u}(acc.float(), 1.0, shift=-1.0)\nacc = o{u}.logits\nret.append(o{u}.extra)",
    "for name{u}, layer{u} in stk{u}.layers.named_children():\n    acc = layer{u}(acc.float())\n    ret.append(name{u})",
    "acc = stk{u}.layers[-1](acc.float()) + stk{u}.heads['b'](acc.float())",
    "for k{u} in stk{u}.heads:\n    acc = stk{u}.heads[k{u}](acc.float())",
    "for layer{u} in stk{u}.layers[1:]:\n    acc = layer{u}(acc.float())\nret.append(len(stk{u}.layers))",
    "for a{u}, b{u} in zip(stk{u}.layers, reversed(stk{u}.layers)):\n    acc = a{u}(acc.float()) - b{u}(acc.float())",
    "acc = stk{u}.norm(acc.float())\nret.append(stk{u}.norm.steps.item())",
    "acc = stk{u}.norm.ema(acc.float())\nret.append(stk{u}.norm.mean)",
    "ret.append(stk{u}.norm.stats(acc))\nacc = acc.float() * 2",
    "s{u} = stk{u}.norm.stats(acc)\nret.append(s{u}.requires_grad)\nacc = acc.float() + s{u}",
    "acc = stk{u}.norm.table(acc.float())",
    "with torch.no_grad():\n    c{u} = stk{u}(acc.float()).logits\nwith torch.enable_grad():\n    acc = acc.float() * c{u}",
    "with torch.no_grad():\n    acc = acc.float() * 2\n    with torch.enable_grad():\n        acc = stk{u}.layers[0](acc)\n"
    "ret.append(acc.requires_grad)",
    "with torch.inference_mode():\n    c{u} = stk{u}.layers[0](acc.float())\nacc = acc.float() + c{u}.sum().item()",
    "if acc.float().sum().item() > 0:\n    acc = stk{u}.layers[1](acc.float())\nelse:\n    acc = acc.float() - 1",
    "for v{u} in acc.reshape(-1)[:3].tolist():\n    acc = acc.float() + v{u}",
    "n{u} = int(stk{u}.norm.steps.item())\nacc = acc.float() * (n{u} % 3)\nret.append(n{u})",
    "m{u} = acc.float() > 0\nacc = acc.float().masked_fill(~m{u}, -1.0)\nret.append(m{u}.sum())",
    "acc = acc.float()[acc.float() > 0.5]",
    "i{u} = acc.to(torch.int64).abs() % 3\nacc = torch.where(i{u} > 0, i{u} * 2, -i{u})\nret.append(i{u}.dtype)",
    "acc = _sm{u}(acc.float()) if acc.ndim else acc.float()",
    "acc = _clamp{u}(acc.float())\nret.append(_clamp{u}.keywords)",
    "ret.append(_Rec{u}(acc.float() * 2, aux={'n': acc.numel()}))\nacc = ret[-1].logits",
    "ret.append(_Pair{u}(acc, acc.float().sum()))\nacc = ret[-1].score + acc",
    "o{u} = stk{u}(acc.float())\nret.append(o{u})\nacc = o{u}['logits'] * 1",
    "with torch.autocast('cpu', dtype=torch.bfloat16):\n    acc = stk{u}(acc.float()).logits\nret.append(acc.dtype)",
    "acc = stk{u}(acc.double()).logits\nret.append(acc.dtype)",
    "if stk{u}._last is not None:\n    acc = acc.float() + stk{u}._last.sum()\n"
    "stk{u}._last = acc.detach().float().reshape(-1)[:2]",
    "ret.append(stk{u}.norm.scratch)\nacc = acc.float() * stk{u}.norm.scratch",
    "if getattr({M}, 'cache{u}', None) is None:\n    {M}.cache{u} = torch.arange(3.0)\nacc = acc.float() + {M}.cache{u}.sum()",
    "with torch.no_grad():\n    {M}.buf.add_(1)\nacc = acc.float() * {M}.buf",
    "{M}.buf = {M}.buf * 0.5 + 1\nacc = acc.float() + {M}.buf",
]
MODEL_CHANGES = [
    "stk{u}.eval()", "stk{u}.train()", "stk{u}.norm.eval()", "stk{u}.depth = 1", "stk{u}.use = 'b'",
    "stk{u}.norm.momentum = 0.1", "stk{u}.layers.append(_Affine{u}(4))", "del stk{u}.layers[0]",
    "stk{u}.heads['a'] = torch.nn.Identity()", "stk{u}.heads['c'] = torch.nn.Sigmoid()",
    "stk{u}.layers[1] = torch.nn.ReLU()", "stk{u}.norm._cache = None", "stk{u}.norm._cache = torch.ones(4)",
    "stk{u}.norm.register_buffer('scratch', torch.full((), 3.0), persistent=False)", "stk{u}.norm.scratch.fill_(2.0)",
    "stk{u}.norm.mean = stk{u}.norm.mean.double()", "stk{u}.layers[0].b.add_(1)", "stk{u}.double()",
    "stk{u}.to(torch.bfloat16)", "stk{u}.out_dtype = torch.float16", "stk{u}.layers[1].w.requires_grad_(False)",
    "stk{u}.requires_grad_(True)", "stk{u}.layers.requires_grad_(False)",
    "_h{u} = stk{u}.register_forward_hook(lambda mod, args, out: _Out{u}(logits=out['logits'] * 2, extra=()))",
    "_h{u}.remove()", "_p{u} = stk{u}.layers[0].register_forward_pre_hook(lambda mod, args: (args[0] + 1,))",
    "_p{u}.remove()", "_k{u} = stk{u}.layers[0].register_forward_pre_hook(lambda mod, args, kwargs: (args, "
    "{**kwargs, 'shift': 2.0}), with_kwargs=True)", "_k{u}.remove()",
    "if stk{u}._last is not None: stk{u}._last.add_(1)", "stk{u}._last = None",
    "_clamp{u} = functools.partial(torch.clamp, min=0.5, max=1.0)", "_sm{u} = functools.partial(torch.softmax, dim=0)",
    "stk{u} = _Stack{u}()", "wrap{u}.inner = _Stack{u}()", "m.cache{u} = None", "m.buf = torch.tensor(2.0)",
]  # fmt: skip
MODEL_STATE = (
    "HOOKLOG{u}",
    "dict(stk{u}.named_buffers())",
    "[p.dtype for p in stk{u}.parameters()]",
    "stk{u}._last",
    "stk{u}.norm._cache",
    "dict(m.named_buffers()) if isinstance(m, torch.nn.Module) else m.buf",
)


def models(rng, ctx):
    body = _pick(rng, MODEL_USES)
    ctx.kind = "int" if body.startswith("i{u}") else "float"
    owner = "{M}" in body
    changes = [c for c in MODEL_CHANGES if owner or not c.startswith("m.")]
    state = [s for s in MODEL_STATE if owner or "(m" not in s]
    return _s("models", "module-level code as users write it in models: buffers, ModuleList/Dict, hooks, grad "
              "regions, outputs, caches, casts, masks", body, setup=_MODELS, mutations=changes, state=tuple(state),
              needs={"owner"} if owner else ())  # fmt: skip
