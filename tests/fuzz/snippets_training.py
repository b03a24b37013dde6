"""Snippets of the randomized tester from training loops and the programs around them (split from
``tests.fuzz.snippets``, whose docstring says what a snippet is): optimizer steps and LR schedules inside the program
(param groups, state dicts, a cosine of the step count), gradients accumulated over calls with ``.grad`` read, zeroed,
scaled or set to None between and inside calls, Python control flow on tensor values that change between calls
(``.item()``, ``bool()``, ``.tolist()``, comprehensions over a tensor), storage-level ops (``set_``, ``resize_``,
``as_strided``, ``out=`` that resizes, in-place ops on views of views, ``.to(x)``, ``.type_as``, in-place promotion
with Python scalars) and results that hold one tensor twice, an input, or aliases written after they were returned.

The parameters live in globals (not in a module), so the checker's backward accumulates into their ``.grad`` across
calls as a training loop does; their values and gradients are compared through ``state`` expressions.
"""

from __future__ import annotations

from tests.fuzz.snippet_base import _pick, _s

# ---------------------------------------------------------------- optimizer steps and LR schedules

_OPTIMIZERS = (
    "torch.optim.SGD({groups}, lr=0.1)",
    "torch.optim.SGD({groups}, lr=0.1, momentum=0.9, nesterov=True, weight_decay=0.01)",
    "torch.optim.Adam({groups}, lr=0.01)",
    "torch.optim.AdamW({groups}, lr=0.01, amsgrad=True)",
    "torch.optim.RMSprop({groups}, lr=0.01, momentum=0.5)",
    "torch.optim.Adagrad({groups}, lr=0.1)",
    "torch.optim.SGD({groups}, lr=0.1, foreach=False, maximize=True)",
    "torch.optim.Adam({groups}, lr=0.01, foreach=True, weight_decay=0.1)",
)
_GROUPS = ("[P{u}, Q{u}]", "[{'params': [P{u}]}, {'params': [Q{u}], 'lr': 0.05}]")
_SCHEDULERS = (
    "torch.optim.lr_scheduler.StepLR(OPT{u}, step_size=2, gamma=0.5)",
    "torch.optim.lr_scheduler.CosineAnnealingLR(OPT{u}, T_max=4)",
    "torch.optim.lr_scheduler.LambdaLR(OPT{u}, lambda e: 1.0 / (e + 1))",
    "torch.optim.lr_scheduler.ExponentialLR(OPT{u}, gamma=0.9)",
)
OPTIM_USES = [
    "OPT{u}.step()\nacc = acc * P{u}.detach()",
    "OPT{u}.step()\nOPT{u}.zero_grad()\nret.append(P{u} * 1)",
    "OPT{u}.zero_grad(set_to_none=False)\nacc = acc + P{u}",
    "SCHED{u}.step()\nret.append(OPT{u}.param_groups[0]['lr'])\nOPT{u}.step()",
    "OPT{u}.step()\nSCHED{u}.step()\nret.append(SCHED{u}.get_last_lr())",
    "lr{u} = 0.05 * (1 + math.cos(math.pi * STEP{u}[0] / 6))\nfor g{u} in OPT{u}.param_groups:\n    g{u}['lr'] = lr{u}\n"
    "STEP{u}[0] += 1\nOPT{u}.step()\nret.append(lr{u})",
    "OPT{u}.param_groups[-1]['lr'] *= 0.5\nOPT{u}.step()\nacc = acc + Q{u}.detach().sum()",
    "sd{u} = OPT{u}.state_dict()\nret.append(sd{u}['param_groups'][0]['lr'])\nret.append(len(sd{u}['state']))",
    "ret.append(len(OPT{u}.state))\nif P{u} in OPT{u}.state:\n    acc = acc + 1",
    "acc = acc * P{u} + Q{u}.sum()\nif P{u}.grad is not None:\n    OPT{u}.step()",
    "with torch.no_grad():\n    for p{u} in (P{u}, Q{u}):\n        if p{u}.grad is not None:\n            p{u}.add_(p{u}.grad, alpha=-0.1)\n"
    "acc = acc * P{u}",
    "torch.nn.utils.clip_grad_norm_([P{u}, Q{u}], 0.5)\nOPT{u}.step()\nacc = acc + P{u}.detach()",
]
OPTIM_CHANGES = [
    "P{u}.grad = torch.tensor(0.3)", "Q{u}.grad = torch.ones(2)", "OPT{u}.zero_grad()", "P{u}.grad = None",
    "OPT{u}.param_groups[0]['lr'] = 0.2", "OPT{u}.step()", "P{u}.data.fill_(-1.5)", "STEP{u}[0] = 3",
]  # fmt: skip


def optimizers(rng, ctx):
    """torch.optim's steps and schedules inside the program, on globals the checker's backward feeds."""
    opt = _pick(rng, _OPTIMIZERS).format(groups=_pick(rng, _GROUPS))
    setup = (
        "P{u} = torch.nn.Parameter(torch.tensor(0.5))\nQ{u} = torch.nn.Parameter(torch.tensor([1.0, -2.0]))\n"
        f"OPT{{u}} = {opt}\nSCHED{{u}} = {_pick(rng, _SCHEDULERS)}\nSTEP{{u}} = [0]"
    )
    ctx.kind = "float"
    return _s(
        "optimizers", "optimizer steps and LR schedules inside the program", _pick(rng, OPTIM_USES), setup=setup,
        mutations=list(OPTIM_CHANGES), needs={"grads_outside"},
        state=("P{u}", "Q{u}", "P{u}.grad", "Q{u}.grad", "OPT{u}.param_groups", "list(OPT{u}.state.values())", "STEP{u}"),
    )  # fmt: skip


# ---------------------------------------------------------------- gradients accumulated over calls

GRAD_USES = [
    "acc = acc * W{u}",
    "acc = acc + W{u}\nret.append(W{u}.grad is None)",
    "if W{u}.grad is not None:\n    ret.append(W{u}.grad * 1)\nacc = acc * W{u}",
    "if W{u}.grad is not None:\n    W{u}.grad.zero_()\nacc = acc * W{u}",
    "W{u}.grad = None\nacc = acc - W{u}",
    "if W{u}.grad is not None:\n    W{u}.grad.mul_(0.5)\nacc = acc * W{u}",
    "with torch.no_grad():\n    if W{u}.grad is not None:\n        W{u} -= 0.1 * W{u}.grad\nacc = acc * W{u}",
    "W{u}.grad = torch.full_like(W{u}, 2.0)\nacc = acc * W{u}",
    "g{u} = W{u}.grad\nacc = acc * W{u}\nret.append(g{u} if g{u} is not None else 0.0)",
    "if W{u}.grad is not None:\n    acc = acc + W{u}.grad\nacc = acc * W{u}",
    "if W{u}.requires_grad:\n    acc = acc * W{u}\nelse:\n    acc = acc + W{u}",
    "acc = acc * W{u}.detach()\nW{u}.grad = W{u}.grad * 0 if W{u}.grad is not None else None",
    "ret.append(W{u}.is_leaf)\nret.append(W{u}.grad_fn is None)\nacc = acc * W{u}.expand_as(acc)",
]
GRAD_CHANGES = [
    "W{u}.grad = None", "W{u}.grad = torch.ones_like(W{u})", "W{u}.requires_grad_(False)", "W{u}.requires_grad_(True)",
    "W{u}.data.mul_(2)", "W{u}.grad.zero_() if W{u}.grad is not None else None",
    "W{u} = torch.nn.Parameter(torch.tensor(3.0))", "W{u}.grad = torch.tensor(5.0, dtype=torch.float64)",
]  # fmt: skip


def grad_accumulation(rng, ctx):
    """A global parameter whose ``.grad`` the checker's backward accumulates over calls, read, zeroed, scaled or
    dropped by the program and between calls."""
    ctx.kind = "float"
    init = _pick(rng, ("torch.tensor(0.5)", "torch.tensor([1.5])", "torch.tensor(-2.0, dtype=torch.float64)"))
    return _s(
        "grad_accumulation", "gradients accumulated over calls, .grad read/zeroed/set to None", _pick(rng, GRAD_USES),
        setup=f"W{{u}} = torch.nn.Parameter({init})", mutations=list(GRAD_CHANGES), state=("W{u}", "W{u}.grad"),
        needs={"grads_outside"},
    )  # fmt: skip


# ---------------------------------------------------------------- control flow on tensor values

VALUE_FLOW = [
    "if T{u}.sum().item() > 0:\n    acc = acc + 1\nelse:\n    acc = acc - 1",
    "k{u} = int(T{u}[0])\nacc = acc * k{u}",
    "for v{u} in T{u}.tolist():\n    if v{u} > 0:\n        acc = acc + v{u}",
    "if bool(T{u}[1] > 0):\n    acc = acc * 2",
    "n{u} = int(T{u}.abs().sum().item()) % 4\nret.append(list(range(n{u})))\nacc = acc + n{u}",
    "i{u} = 0\nwhile i{u} < 3 and T{u}[i{u}] > 0:\n    acc = acc + T{u}[i{u}]\n    i{u} += 1\nret.append(i{u})",
    "ret.append(T{u}.tolist())\nret.append(max(T{u}.tolist()))",
    "pos{u} = [t for t in T{u} if t > 0]\nret.append(len(pos{u}))\nacc = acc + sum(pos{u}, torch.tensor(0.0))",
    "acc = acc + sum(v for v in T{u}.tolist() if v < 1)",
    "T{u}.add_(1)\nif T{u}.max().item() > 3:\n    T{u}.fill_(-1)\nret.append(T{u} * 1)",
    "if x.numel() and x.reshape(-1)[0].item() > 0:\n    acc = acc * 3",
    "c{u} = {True: 'pos', False: 'neg'}[bool((x > 0).any())] if x.numel() else 'empty'\nret.append(c{u})",
    "m{u} = x.float().mean().item() if x.numel() else 0.0\nif m{u} == m{u} and m{u} > 0:\n    acc = acc + 1\nret.append(m{u} == m{u})",
    "d{u} = dict(zip('abc', T{u}.tolist()))\nret.append(sorted(d{u}, key=d{u}.get))",
    "idx{u} = int(T{u}.argmax())\nacc = acc + T{u}[idx{u}]\nret.append(idx{u})",
    "ret.append([round(v, 2) for v in T{u}.tolist()])\nret.append(T{u}.eq(0).any().item())",
]
VALUE_CHANGES = [
    "T{u}.fill_(-1)", "T{u}.fill_(2)", "T{u}[0] = 0", "T{u} = torch.tensor([3.0, -1.0, 0.5])", "T{u}.mul_(-1)",
    "T{u}[1] = float('nan')", "T{u} = torch.tensor([0.25, 0.5, 4.0])",
]  # fmt: skip


def value_flow(rng, ctx):
    """Python control flow on values of tensors (a global one changed between calls, the argument's)."""
    if ctx.kind == "bool" and rng.random() < 0.5:
        ctx.kind = "float"
    return _s(
        "value_flow", "control flow on tensor values changed between calls (.item, bool, .tolist, comprehensions)",
        _pick(rng, VALUE_FLOW), setup="T{u} = torch.tensor([1.0, -2.0, 0.5])", mutations=list(VALUE_CHANGES),
        state=("T{u}",),
    )  # fmt: skip


# ---------------------------------------------------------------- storage-level ops, conversions, in-place promotion

# (body, the kind of acc afterwards: None where it keeps its kind or takes x's)
STORAGE = [
    ("b{u} = acc.clone()\nv{u} = b{u}.view(-1)[1:]\nw{u} = v{u}[::2]\nw{u}.add_(1)\nret.append(b{u} * 1)\nret.append(w{u} + 0)", "nobool"),
    ("b{u} = acc.clone()\nv{u} = b{u}.reshape(-1)\nv{u}.unsqueeze(0)[0, :1].mul_(3)\nret.append(b{u})", "nobool"),
    ("b{u} = torch.empty(0)\nb{u}.resize_(3)\nb{u}.fill_(2)\nret.append(b{u} * 1)", None),
    ("b{u} = torch.zeros(2, 3)\nb{u}.resize_(6)\nb{u}.add_(1)\nret.append(b{u})", None),
    ("b{u} = torch.zeros(4)\nc{u} = torch.arange(4.0)\nb{u}.set_(c{u})\nc{u}.mul_(2)\nret.append(b{u} + 0)", None),
    ("b{u} = torch.zeros(2)\nb{u}.set_(acc.float().flatten().clone())\nacc = acc + b{u}.sum()", "float"),
    ("b{u} = acc.float().flatten().clone()\nret.append(b{u}.as_strided((2,), (1,), 0) * 1 if b{u}.numel() >= 2 else b{u})", None),
    ("b{u} = acc.float().flatten().clone()\nif b{u}.numel() >= 3:\n    b{u}.as_strided((2,), (1,), 1).mul_(10)\nret.append(b{u})", None),
    ("o{u} = torch.empty(0, dtype=acc.dtype)\ntorch.add(acc, 1, out=o{u})\nret.append(o{u})", None),
    ("o{u} = torch.empty(5, dtype=torch.float64)\ntorch.mul(acc, 2, out=o{u})\nret.append(o{u})", None),
    ("o{u} = torch.zeros(1)\nr{u} = torch.abs(acc.float(), out=o{u})\nret.append(r{u} is o{u})\nret.append(o{u})", None),
    ("acc = (acc * 2.5).to(x)", None),
    ("acc = torch.ones(1, dtype=torch.float64).type_as(x) + acc", None),
    ("acc = acc.type_as(torch.tensor(1, dtype=torch.int8))", "int"),
    ("acc = acc.to(x, copy=True)\nret.append(acc.dtype)", None),
    ("acc = acc.to(torch.tensor(1.0, dtype=torch.float16)).float()", "float"),
    ("acc = acc.new_ones(()).to(x) + acc", None),
    ("b{u} = acc.long().clone()\nb{u} += 2\nb{u} //= -2\nb{u} %= 3\nacc = b{u}", "int"),
    ("b{u} = (acc > 0).clone()\nb{u} |= True\nb{u} &= acc.bool()\nacc = b{u}", "bool"),
    ("b{u} = acc.long().clone()\nb{u} += 2.5\nacc = b{u}", "int"),
    ("b{u} = acc.float().clone()\nb{u} += torch.tensor(2, dtype=torch.int64)\nb{u} *= True\nacc = b{u}", "float"),
    ("acc = (acc > 0) + (acc > 0) * 3.5 - True", "float"),
    ("acc = acc.to(torch.uint8) - 1 + (acc.to(torch.uint8) // 255)", "int"),
    ("acc = acc.long() * (2**62) // -(2**61)", "int"),
    ("acc = torch.tensor(-7) // acc.long().clamp(min=1) + torch.tensor(-7) % acc.long().clamp(min=1)", "int"),
    ("acc = acc.int() / torch.tensor(2)", "float"),
]  # fmt: skip


def storage(rng, ctx):
    """set_/resize_/as_strided, ``out=`` that resizes, in-place ops on views of views, ``.to(x)``/``.type_as``,
    in-place arithmetic that promotes (or refuses) with Python scalars."""
    body, kind = _pick(rng, STORAGE)
    if kind == "nobool":
        if ctx.kind == "bool":
            ctx.kind = "int"
    elif kind is not None:
        ctx.kind = kind
    return _s("storage", "set_/resize_/as_strided/out=, views of views written, .to(x)/type_as, in-place promotion", body)


# ---------------------------------------------------------------- results holding one tensor twice, inputs, aliases

RETURNS = [
    "ret.append(acc)\nret.append(acc)",
    "ret.append(x)\nret.append(x)",
    "r{u} = acc * 2\nret.append(r{u})\nret.append(r{u})\nr{u}.add_(1)",
    "r{u} = acc * 2\nret.append(r{u})\nret.append(r{u}.view_as(r{u}))\nr{u}.mul_(3)",
    "r{u} = acc + 0\nret.append(r{u}[...])\nret.append(r{u}.reshape(-1))\nr{u}.sub_(1)",
    "ret.append(x.detach())\nret.append((x, acc, x))",
    "r{u} = acc.clone()\nret.append({'a': r{u}, 'b': [r{u}]})\nr{u}.zero_()",
    "r{u} = acc * 1\nret.append(r{u})\nacc = r{u}",
    "r{u} = x.detach().clone()\nret.append(r{u})\nret.append(r{u}.T if r{u}.ndim == 2 else r{u}.flatten())\nr{u}.add_(2)",
    "ret.append(x if x.ndim else x.unsqueeze(0))\nret.append(acc)",
    "r{u} = (acc, acc)\nret.append(r{u})\nret.append(r{u})",
]


def returns(rng, ctx):
    """Results that hold one tensor twice, an input, or aliases written after they were put in the result."""
    return _s("returns", "results holding one tensor twice, an input, or aliases written afterwards", _pick(rng, RETURNS))
