"""Snippets of the randomized tester for loops over a tensor's length (split from ``tests.fuzz.snippets``, whose
docstring says what a snippet is): ``for i in range(t.shape[d])`` with carried tensors, appended lists that are
stacked or concatenated, setitem at the loop index, nested loops, loops in helpers, index arithmetic, the loop
variable after the loop, and bodies that change outside state, read tensor values, switch grad modes or leave early.

With a symbolic length (cache="symbolic values", or the default cache after a length changed) such a loop may be
traced once as a ``loop`` symbol (Note [Loops over a symbolic range] in thunder.core.loops); a body that is no one
trace for every index must unroll as before. Inputs of these programs have at least one dim, and their lengths
change call by call.
"""

from __future__ import annotations

from tests.fuzz.snippet_base import _pick, _s

# Loops the Note accepts (a carried tensor, one appended tensor, setitem at the index, a local first bound in the body).
TRACED_ONCE = [
    "h{u} = torch.zeros_like(acc[0])\nfor i{u} in range(acc.shape[0]):\n    h{u} = h{u} * 2 + acc[i{u}]\nacc = h{u}",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}] * 2)\nacc = torch.stack(o{u}, {dim})",
    "h{u} = acc[0] * 0\no{u} = []\nfor t{u} in range(acc.shape[0]):\n    h{u} = h{u} + acc[t{u}]\n    o{u}.append(h{u})\nret.append(h{u})\nacc = torch.stack(o{u})",
    "y{u} = torch.zeros_like(acc)\nfor i{u} in range(acc.shape[0]):\n    y{u}[i{u}] = acc[i{u}] * (i{u} + 1)\nacc = y{u}",
    "y{u} = acc.clone()\nfor i{u} in range(acc.shape[0]):\n    y{u}[i{u}] = acc[acc.shape[0] - 1 - i{u}]\nacc = y{u}",
    "y{u} = acc.clone()\nfor i{u} in range(1, acc.shape[0]):\n    y{u}[i{u}] = y{u}[i{u} - 1] + acc[i{u}]\nacc = y{u}",
    "y{u} = acc * 0\nfor i{u} in range(acc.shape[0]):\n    y{u}[i{u}] = acc[max(i{u} - 1, 0)] + acc[min(i{u} + 1, acc.shape[0] - 1)]\nacc = y{u}",
    "for i{u} in range(acc.shape[0]):\n    last{u} = acc[i{u}] * 3\nret.append(last{u})\nret.append(i{u})",
    "h{u} = acc[0].clone()\nfor i{u} in range(1, acc.shape[0]):\n    h{u}.mul_(2).add_(acc[i{u}])\nacc = h{u}",
    "h{u} = acc[-1] * 1\nfor i{u} in range(acc.shape[0] - 1):\n    h{u} = h{u} - acc[i{u}]\nacc = h{u}\nret.append(i{u} if acc.ndim >= 0 else 0)",
    "s{u} = torch.zeros_like(acc[0])\nfor i{u} in range(acc.shape[0]):\n    s{u} = s{u} + acc[i{u}] * i{u}\nacc = acc + s{u}",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    h{u} = torch.maximum(h{u}, acc[i{u}]) if i{u} >= 0 else h{u}\nacc = h{u}",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    h{u} = _step{u}(h{u}, acc[i{u}])\nacc = h{u}",
    "acc = _scan{u}(acc)",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}].sum())\nacc = torch.stack(o{u}) + acc.sum()",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    h{u} = h{u} + acc[: i{u} + 1].sum(0)\nacc = h{u}",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    h{u} = h{u} + torch.arange(i{u} + 1).sum()\nacc = h{u}",
    "h{u} = acc * 0\nfor i{u} in range(acc.shape[-1]):\n    h{u} = h{u} + acc[..., i{u} : i{u} + 1]\nacc = h{u}",
    "y{u} = acc * 1\nfor i{u} in range(acc.shape[0]):\n    y{u}[i{u}] += 1\nacc = y{u}",
    "y{u} = acc * 1\nfor i{u} in range(acc.shape[0]):\n    y{u}[i{u}].mul_(2)\nacc = y{u}",
    "y{u} = acc * 1\nfor i{u} in range(acc.shape[0]):\n    y{u}.select(0, i{u}).add_(i{u})\nacc = y{u}",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}])\nacc = torch.stack(o{u}, dim=0) - acc",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    h{u} = h{u} + acc[i{u}] * (i{u} / 2)\nacc = h{u}",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    k{u} = i{u} > 2\n    h{u} = h{u} + acc[i{u}]\nret.append(k{u})\nacc = h{u}",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    prev{u} = h{u}\n    h{u} = h{u} + acc[i{u}]\nret.append(prev{u})\nacc = h{u}",
    "a{u} = acc[0] * 0\nb{u} = acc[0] + 1\nfor i{u} in range(acc.shape[0]):\n    a{u}, b{u} = b{u}, a{u} + b{u} * acc[i{u}]\nret.append(a{u})\nacc = b{u}",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    cur{u} = acc[i{u}]\n    h{u} = h{u} + cur{u}\nret.append(cur{u})\nacc = h{u}",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}].clone())\nacc = torch.stack(o{u})",
    "o{u} = []\nh{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    h{u} = h{u} + acc[i{u}]\n    o{u}.append(h{u}.detach())\nacc = torch.stack(o{u}, {dim}) + h{u}.sum()",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    h{u} = h{u} + W{u} * acc[i{u}]\nacc = h{u}",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    h{u} = h{u} + _scan{u}(acc)\nacc = h{u}",
    "with torch.no_grad():\n    h{u} = acc[0] * 0\n    for i{u} in range(acc.shape[0]):\n        h{u} = h{u} + acc[i{u}]\nacc = acc + h{u}",
]
# Loops the Note refuses (unrolled): all must still give eager's results.
UNROLLED = [
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u} : i{u} + 1] + i{u})\nacc = torch.cat(o{u})",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}])\ns{u} = torch.stack(o{u})\nret.append(len(o{u}))\nacc = s{u}",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}] + 1)\nret.append(o{u})",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}] + 1)\nacc = sum(o{u})",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}])\n    o{u}.append(acc[i{u}] * 2)\nacc = torch.stack(o{u})",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(i{u})\nret.append(o{u})",
    "h{u} = acc[0:1]\nfor i{u} in range(acc.shape[0]):\n    h{u} = torch.cat([h{u}, acc[i{u} : i{u} + 1]])\nacc = h{u}",
    "for i{u} in range(acc.shape[0]):\n    acc = acc * (-1 if i{u} % 2 else 1)",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + 1\n    if i{u} >= 2:\n        break",
    "for i{u} in range(acc.shape[0]):\n    if i{u} == 1:\n        continue\n    acc = acc + i{u}",
    "for i{u} in range(acc.shape[0] + 1):\n    try:\n        acc = acc + acc[i{u}]\n    except IndexError:\n        ret.append(i{u})",
    "for i{u} in range(acc.shape[0]):\n    if acc[i{u}].sum() > 0:\n        acc = acc + 1",
    "tot{u} = 0.0\nfor i{u} in range(acc.shape[0]):\n    tot{u} += float(acc[i{u}].sum())\nret.append(tot{u})",
    "n{u} = 0\nfor i{u} in range(acc.shape[0]):\n    n{u} += 1\nret.append(n{u})",
    "for i{u} in range(acc.shape[0]):\n    ret.append(acc[i{u}] * 2)",
    "for i{u} in range(acc.shape[0]):\n    print(i{u}, acc[i{u}].shape)",
    "for i{u} in range(acc.shape[0]):\n    LOG{u}.append(acc[i{u}].shape)",
    "for i{u} in range(acc.shape[0]):\n    CNT{u}[0] += 1\n    acc = acc + 1",
    "d{u} = {}\nfor i{u} in range(acc.shape[0]):\n    d{u}[i{u}] = acc[i{u}]\nret.append(len(d{u}))\nacc = d{u}[0]",
    "tot{u} = acc * 0\n\ndef _add{u}(v):\n    nonlocal tot{u}\n    tot{u} = tot{u} + v\n\nfor k{u} in range(acc.shape[0]):\n    _add{u}(acc[k{u}])\nacc = tot{u}",
    "fs{u} = []\nfor i{u} in range(acc.shape[0]):\n    fs{u}.append(lambda t, i=i{u}: t + i)\nacc = fs{u}[-1](acc)",
    "for i{u} in range(acc.shape[0]):\n    with torch.no_grad():\n        acc = acc + 1",
    "for i{u} in range(acc.shape[0]):\n    with torch.enable_grad():\n        acc = acc * 2",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + torch.rand(())",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + random.random()",
    "for i{u} in range(acc.shape[0]):\n    acc = acc * 2 if acc.sum() < 100 else acc",
    "name{u} = ''\nfor i{u} in range(acc.shape[0]):\n    name{u} = f'step{i{u}}'\nret.append(name{u})",
    "for i{u} in range(acc.shape[0]):\n    tag{u} = f'step{i{u}}'\nret.append(tag{u})",
    "for i{u} in range(acc.shape[0]):\n    k{u} = int(i{u})\nret.append(k{u})",
    "for i{u} in range(acc.shape[0]):\n    k{u} = i{u} * 2\nret.append(k{u})",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + math.sqrt(i{u})",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + [1.0, 2.0, 3.0, 4.0, 5.0][i{u}]",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + (i{u},)[0]",
    "for i{u} in range(acc.shape[0]):\n    {M}.calls += 1",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + acc.shape[0] - i{u}",
    "for i{u} in range(acc.shape[0]):\n    acc = acc.clone()\nret.append(acc.is_contiguous())",
    "for i{u} in range(acc.shape[0]):\n    acc = acc.t() if acc.ndim == 2 else acc\nret.append(acc.stride())",
    "for i{u} in range(acc.shape[0]):\n    acc = acc.float() / 2",
    "for i{u} in range(acc.shape[0]):\n    acc = acc.sum(0, keepdim=True)",
    "for i{u} in range(acc.shape[0]):\n    acc = acc[1:] if acc.shape[0] > 1 else acc",
    "for i{u} in range(0, acc.shape[0], 2):\n    acc = acc + i{u}",
    "for i{u} in reversed(range(acc.shape[0])):\n    acc = acc + acc[i{u}]",
    "for i{u}, r{u} in enumerate(acc):\n    acc = acc + r{u} * i{u}",
    "for r{u} in acc:\n    ret.append(r{u}.shape)",
    "for i{u}, (a{u}, b{u}) in enumerate(zip(acc, acc.flip(0))):\n    acc = acc + a{u} - b{u}",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    for j{u} in range(acc.shape[-1]):\n        h{u} = h{u} + acc[i{u}][..., j{u}]\nacc = h{u}",
    "rows{u} = []\nfor i{u} in range(acc.shape[0]):\n    r{u} = acc[i{u}] * 0\n    for j{u} in range(acc.shape[0]):\n        r{u} = r{u} + acc[j{u}] * (i{u} - j{u})\n    rows{u}.append(r{u})\nacc = torch.stack(rows{u})",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + 1\nelse:\n    ret.append('done')",
    "y{u} = acc.clone()\no{u} = []\nfor i{u} in range(y{u}.shape[0]):\n    o{u}.append(y{u}[i{u}])\ny{u}.mul_(2)\nacc = torch.stack(o{u}, {dim})",
    "h{u} = acc[0] * 0\no{u} = []\nfor i{u} in range(acc.shape[0]):\n    h{u} = h{u} + acc[i{u}]\n    o{u}.append(h{u})\nh{u}.add_(1)\nacc = torch.stack(o{u})",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}])\nacc.mul_(2)\nacc = torch.stack(o{u})",
    "y{u} = acc.clone()\nfor i{u} in range(y{u}.shape[0]):\n    last{u} = y{u}[i{u}]\ny{u}.add_(1)\nret.append(last{u} * 1)",
    "h{u} = acc[0].clone()\nhs{u} = h{u}\nfor i{u} in range(acc.shape[0]):\n    h{u}.add_(acc[i{u}])\nret.append(hs{u})\nacc = h{u}",
    "y{u} = acc.clone()\nz{u} = y{u}[0]\nfor i{u} in range(y{u}.shape[0]):\n    y{u}[i{u}] = z{u} * 2 + i{u}\nacc = y{u}",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + {M}.lin.weight.sum()",
    "for i{u} in range(acc.shape[0]):\n    acc = acc * {M}.scale",
    "it{u} = iter([1.0, 2.0, 3.0, 4.0, 5.0])\nfor i{u} in range(acc.shape[0]):\n    acc = acc + next(it{u}, 0.0)",
    "g{u} = (k * 2 for k in range(9))\nfor i{u} in range(acc.shape[0]):\n    acc = acc + next(g{u})\nret.append(next(g{u}))",
    "m{u} = map(float, range(9))\nh{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    h{u} = h{u} + next(m{u})\nacc = h{u}",
    "b{u} = bytearray()\nfor i{u} in range(acc.shape[0]):\n    b{u}.append(1)\n    acc = acc + 1\nret.append(len(b{u}))",
    "h{u} = acc[0] * 0\nfor i{u} in range(acc.shape[0]):\n    v{u} = next(it, 0)\n    h{u} = h{u} + (v{u}[0] if isinstance(v{u}, tuple) else v{u})\nacc = h{u}\nret.append(list(it))",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}] * 2)\nret.append(type(o{u}).__name__)\nacc = torch.stack(o{u})",
    "o{u} = []\nfor i{u} in range(acc.shape[0]):\n    o{u}.append(acc[i{u}] * 2)\nacc = torch.stack(o{u}) if isinstance(o{u}, list) else acc",
    "i{u} = 0\nwhile i{u} < acc.shape[0]:\n    acc = acc + acc[i{u}]\n    i{u} += 1",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + LOG{u}[-1] if LOG{u} else acc\nLOG{u}.append(1)",
    "i{u} = -1\nfor i{u} in range(acc.shape[0]):\n    pass\nret.append(i{u})",
    "for i{u} in range(acc.shape[0]):\n    v{u} = acc[i{u}].item() if acc[i{u}].numel() == 1 else 0\nret.append(v{u})",
    "vals{u} = acc.reshape(-1)[:4].tolist()\nfor v{u} in vals{u}:\n    acc = acc + v{u} if v{u} > 0 else acc - 1",
    "for i{u} in range(acc.shape[0]):\n    acc = acc + i{u}\n    i{u} = 7\nret.append(i{u})",
    "it{u} = iter(range(acc.shape[0]))\nfor i{u} in it{u}:\n    acc = acc + i{u}\n    next(it{u}, None)",
    "g{u} = (acc[i] * i for i in range(acc.shape[0]))\nacc = sum(g{u})",
    "ret.append([acc[i].sum() for i in range(acc.shape[0])])",
    "acc = torch.stack([acc[i] * i for i in range(acc.shape[0])])",
]
_HELPERS = """def _step{u}(h, v):
    return h * 0.5 + v


def _scan{u}(t):
    h = t[0] * 0
    for i in range(t.shape[0]):
        h = h * 0.5 + t[i]
    return h
"""
DIMS = ("0", "-1", "dim=0", "dim=-1", "1 if acc.ndim >= 2 else 0")


def loops(rng, ctx):
    """A loop over acc's first length (acc has a dim: its rank is checked first)."""
    if ctx.kind == "bool":
        ctx.kind = "int"
    if rng.random() < 0.15:  # a loop over a Python int argument (symbolic under cache="symbolic values")
        body = _pick(rng, (
            "h{u} = acc * 0\nfor i{u} in range(n):\n    h{u} = h{u} + acc * i{u}\nacc = h{u}",
            "o{u} = []\nfor i{u} in range(n):\n    o{u}.append(acc + i{u})\nacc = torch.stack(o{u}) if o{u} else acc",
            "for i{u} in range(1, n):\n    acc = acc * 2\nret.append(n)",
        ))  # fmt: skip
        return _s("loops", "loop over a number argument", body, needs={"n"}, n_pool="int")
    traced = rng.random() < 0.55
    body = _pick(rng, TRACED_ONCE if traced else UNROLLED).replace("{dim}", _pick(rng, DIMS))
    body = "if acc.ndim:\n" + "\n".join("    " + ln if ln else ln for ln in body.split("\n"))
    if rng.random() < 0.2:  # over the input's length rather than the running value's
        body = body.replace("acc.shape[0]", "x.shape[0]").replace("if acc.ndim:", "if acc.ndim and x.ndim and acc.shape[0] == x.shape[0]:")
    setup, state, needs, mutations = "", (), {"rank1"}, []
    if "_step{u}" in body or "_scan{u}" in body:
        setup = _HELPERS
    if "W{u}" in body:
        setup, mutations = "W{u} = torch.ones(())", ["W{u}.add_(1)", "W{u} = torch.full((), 0.5)", "W{u} = torch.ones((), dtype=torch.float64)"]
    if "LOG{u}" in body:
        setup, state, mutations = "LOG{u} = []", ("LOG{u}",), ["LOG{u}.clear()"]
    if "CNT{u}" in body:
        setup, state, mutations = "CNT{u} = [0]", ("CNT{u}",), ["CNT{u}[0] = 5"]
    if "next(it," in body:
        needs = needs | {"it"}
    if "{M}" in body:
        needs = needs | {"owner"}
    if "/ 2" in body or "* 0.5" in body or "math.sqrt" in body or "[1.0," in body:
        ctx.kind = "float"
    tag = "loop traced once over a length" if traced else "loop over a length that unrolls"
    return _s("loops", tag, body, setup=setup, state=state, needs=needs, mutations=mutations)
