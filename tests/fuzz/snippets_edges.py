"""Snippets of the randomized tester for the edges later findings were at (split from ``tests.fuzz.snippets``, whose
docstring says what a snippet is): views of every kind written through another alias and read afterwards, integer
overflow and division, 0-dim and empty tensors, layouts (non-contiguous, channels_last, strides asked for), exceptions
caught inside the program after ops ran, containers changed after an op read them, cached and global state, Python
scalars of every kind mixed with tensors of every dtype, and mixes of tensors that do and do not require grad.
"""

from __future__ import annotations

from tests.fuzz.snippet_base import _pick, _s

# ---------------------------------------------------------------- views written through another alias

# A view of ``b{u}`` (a tensor the program made from acc) for any rank.
VIEW_KINDS = [
    "b{u}[...]",
    "b{u}.view(-1)",
    "b{u}.reshape(-1)",
    "b{u}.unsqueeze(0)",
    "b{u}.expand(2, *b{u}.shape)",
    "b{u}.t() if b{u}.ndim <= 2 else b{u}.mT",
    "b{u}.as_strided((b{u}.numel(),), (1,))",
    "b{u}.view(-1)[::2]",
    "b{u}[1:] if b{u}.ndim else b{u}",
    "b{u}.narrow(-1, 0, 1) if b{u}.ndim and b{u}.shape[-1] else b{u}",
    "b{u}.select(0, 0) if b{u}.ndim and b{u}.shape[0] else b{u}",
    "b{u}.unfold(-1, 1, 1) if b{u}.ndim else b{u}",
    "b{u}.diagonal() if b{u}.ndim >= 2 else b{u}",
    "b{u}.mH if b{u}.ndim >= 2 else b{u}",
    "b{u}.movedim(0, -1) if b{u}.ndim else b{u}",
    "b{u}.view(b{u}.dtype)",
    "b{u}.flatten()[:1]",
    "b{u}.detach()",
    "b{u}.unflatten(0, (1, -1)) if b{u}.ndim else b{u}",
]
# A write into the memory of ``b{u}``, through ``b{u}`` itself or another alias of it (``v{u}`` is the view).
VIEW_WRITES = [
    "b{u}.mul_(2)",
    "b{u}.add_(1)",
    "v{u}.add_(1)",
    "v{u}.zero_()",
    "b{u}.detach().sub_(1)",
    "v{u}.detach().mul_(3)",
    "torch.mul(b{u}, 2, out=b{u})",
    "b{u}[...] = 3",
    "v{u}.copy_(v{u} * 2)",
    "b{u}.data.add_(1)",
    "with torch.no_grad():\n    b{u}.mul_(2)",
    "b{u}.clamp_(min=0)",
]
# What the program reads afterwards.
VIEW_READS = [
    "acc = b{u} + 0\nret.append(v{u} * 1)",
    "ret.append(v{u} + 0)",
    "acc = acc + b{u}\nret.append(v{u}.sum())",
    "ret.append(v{u}.clone())\nret.append(b{u}.clone())",
    "acc = b{u} * 1\nret.append(v{u}.shape)",
]
BASES = ["b{u} = acc * 1", "b{u} = acc.clone()", "b{u} = acc + 0 if acc.ndim else acc * 1", "b{u} = x.detach().clone()"]


def views(rng, ctx):
    if rng.random() < 0.3:
        return arg_views(rng, ctx)
    body = "\n".join(
        (_pick(rng, BASES), f"v{{u}} = {_pick(rng, VIEW_KINDS)}", _pick(rng, VIEW_WRITES), _pick(rng, VIEW_READS))
    )
    if ctx.kind == "bool":
        ctx.kind = "int"
    return _s("views", "views of every kind written through another alias, read afterwards", body)


# Writes through aliases of the arguments themselves (``y`` shares x's memory, see ``inputs.ALIASES``).
ARG_WRITES = [
    "v{u} = x[...]\nx.detach().mul_(2)\nacc = acc + v{u}",
    "v{u} = y.view_as(y)\nx.detach().add_(1)\nret.append(v{u} * 1)",
    "x.detach().mul_(3)\nacc = acc + y",
    "y.detach().add_(1)\nacc = acc * x",
    "s{u} = y * 1\nx.detach().sub_(1)\nacc = acc + s{u} + y",
    "v{u} = y.reshape(-1)\ny.detach().mul_(2)\nret.append(v{u} + 0)",
    "v{u} = x.unsqueeze(0)\ny.detach().zero_()\nacc = acc + v{u}.squeeze(0)",
]


def arg_views(rng, ctx):
    if ctx.kind == "bool":
        ctx.kind = "int"
    return _s("views", "views of the arguments, written through another alias", _pick(rng, ARG_WRITES), needs={"y"})


# ---------------------------------------------------------------- integers: overflow, division, shifts

INTEGERS = [
    ("acc = acc.to(torch.int32) * 2**30", "int"),
    ("acc = acc.to(torch.int8) + 127", "int"),
    ("acc = acc.to(torch.uint8) - 3", "int"),
    ("acc = acc.long() // -3", "int"),
    ("acc = acc.long() % -3", "int"),
    ("acc = torch.remainder(acc.long(), -2)", "int"),
    ("acc = torch.fmod(acc.long(), 3)", "int"),
    ("acc = torch.fmod(acc.long(), -3)", "int"),
    ("acc = torch.div(acc.long(), -3, rounding_mode='floor')", "int"),
    ("acc = torch.div(acc.long(), -3, rounding_mode='trunc')", "int"),
    ("acc = torch.div(acc.long(), 2)", "float"),
    ("acc = acc.long() << 62", "int"),
    ("acc = acc.long() >> 1", "int"),
    ("acc = acc.to(torch.int64) * 2**62 + 2**62", "int"),
    ("acc = acc.abs().to(torch.int16) ** 3", "int"),
    ("acc = acc.long() // 0", "int"),
    ("acc = acc.long() % 0", "int"),
    ("acc = acc.float() // 0", "float"),
    ("acc = acc.to(torch.int32) / 2", "float"),
    ("acc = acc.int().bitwise_xor(5)", "int"),
    ("acc = acc.long().float_power(2)", "float"),
    ("acc = acc.int() + torch.iinfo(torch.int32).max", "int"),
    ("acc = acc.int() + 2**31", "int"),
    ("acc = acc.to(torch.int16) + 40000", "int"),
    ("acc = acc.to(torch.uint8) * -1", "int"),
    ("acc = acc.int() ** -1", "int"),
    ("acc = acc.long() ** 2.5", "float"),
    ("acc = 1 // acc.long().clamp(min=1)", "int"),
    ("acc = -7 // acc.long().clamp(min=1)", "int"),
    ("acc = (-7) % acc.long().clamp(min=1)", "int"),
    ("acc = acc.long().abs() ** 40", "int"),
    ("acc = acc.to(torch.uint8).bitwise_not()", "int"),
    ("acc = acc.long().sum(dtype=torch.int8) + acc.long()", "int"),
    ("acc = acc.to(torch.int8).cumsum(-1) if acc.ndim else acc.long()", "int"),
    ("acc = acc.to(torch.int32).prod() + acc.long()", "int"),
    ("ret.append(int(acc.long().sum()) // -7)\nret.append(int(acc.long().sum()) % -7)", None),
    ("acc = acc.to(torch.int8).mean(dtype=torch.float32) + acc", "float"),
    ("acc = acc.float().to(torch.int32) + acc.double().floor().int()", "int"),
    ("acc = (acc.float() * 1e10).to(torch.int32)", "int"),
    ("acc = acc.long().clamp(-2, 2).float().round().long() // 2", "int"),
]


def integers(rng, ctx):
    body, kind = _pick(rng, INTEGERS)
    if kind is not None:
        ctx.kind = kind
    return _s("integers", "integer overflow, division and shifts (eager's wrapping and rounding)", body)


# ---------------------------------------------------------------- 0-dim and empty tensors

EMPTIES = [
    "acc = acc.reshape(-1)[:0]",
    "acc = acc.sum(0) if acc.ndim else acc",
    "acc = acc[None][:0].sum() + acc",
    "acc = torch.cat([acc.reshape(-1), acc.new_zeros(0)])",
    "ret.append(acc.reshape(-1)[:0].mean())",
    "ret.append(acc.reshape(-1)[:0].float().std())",
    "ret.append(acc.reshape(-1)[:0].prod())",
    "ret.append(acc.reshape(-1)[:0].amax())",
    "ret.append(acc.reshape(-1)[:0].argmax())",
    "acc = acc.expand(0, *acc.shape).sum(0) + acc",
    "acc = acc.squeeze()",
    "acc = acc.unsqueeze(-1).squeeze(-1)",
    "ret.append(acc.item() if acc.numel() == 1 else acc.numel())",
    "ret.append(torch.zeros((0, 3), dtype=acc.dtype).sum(0))",
    "ret.append(acc.reshape(0, -1) if acc.numel() == 0 else acc.reshape(-1, 1))",
    "acc = acc.reshape(-1)[:0].reshape(0, 5)",
    "acc = acc + acc.new_empty(()).fill_(2)",
    "acc = acc + torch.tensor(2.5).to(acc.dtype)",
    "ret.append(acc.reshape(-1)[:0].max(0) if acc.numel() else acc)",
    "ret.append(torch.stack([acc, acc])[:, :0].shape if acc.ndim else acc.shape)",
    "ret.append(acc.reshape(-1)[:0].cumsum(0))",
    "ret.append(acc.reshape(-1)[:0].sort())",
    "ret.append(acc[acc != acc])",
    "ret.append(acc.flatten()[:0].tolist())",
    "acc = acc.sum(()) if acc.ndim else acc",
    "ret.append(acc.reshape(-1)[:0].softmax(0) if acc.is_floating_point() else acc)",
    "acc = torch.einsum('i,i->', acc.reshape(-1)[:0].float(), acc.reshape(-1)[:0].float()) + acc",
    "ret.append(acc.reshape(-1)[:0] @ acc.reshape(-1)[:0] if acc.is_floating_point() else acc)",
    "ret.append(acc.new_zeros((2, 0)).mean(1))",
    "ret.append(torch.empty(0, dtype=acc.dtype).min())",
]


def empties(rng, ctx):
    body = _pick(rng, EMPTIES)
    if "einsum" in body or "mean()" in body or "std()" in body:
        ctx.kind = "float"
    return _s("empties", "0-dim and empty tensors (reductions, shapes, errors)", body)


# ---------------------------------------------------------------- layouts

LAYOUTS = [
    "c{u} = acc.reshape(1, 1, *acc.shape[-2:]) if acc.ndim >= 2 else acc.reshape(1, 1, 1, -1)\n"
    "c{u} = c{u}.contiguous(memory_format=torch.channels_last)\nret.append(c{u}.stride())\nacc = acc + c{u}.reshape(acc.shape)",
    "ret.append((acc.mT if acc.ndim >= 2 else acc).is_contiguous())",
    "ret.append(acc.stride())",
    "ret.append(x.stride())\nret.append(x.is_contiguous())",
    "acc = torch.empty_like(acc).copy_(acc)\nret.append(acc.stride())",
    "ret.append(torch.empty_like(acc.mT if acc.ndim >= 2 else acc).stride())",
    "ret.append((acc * 2).stride())",
    "ret.append((x + 1).stride())",
    "ret.append(acc.clone().stride())",
    "acc = acc.contiguous()\nret.append(acc.stride())",
    "ret.append(acc.mT.contiguous().stride() if acc.ndim >= 2 else acc.stride())",
    "acc = acc.view(-1)",
    "acc = x.view(-1) * 1",
    "ret.append(acc.is_contiguous(memory_format=torch.channels_last) if acc.ndim == 4 else acc.ndim)",
    "c{u} = acc.reshape(1, *acc.shape[-2:], 1) if acc.ndim >= 2 else acc.reshape(1, 1, -1, 1)\n"
    "c{u} = c{u}.float().to(memory_format=torch.channels_last)\n"
    "acc = torch.nn.functional.conv2d(c{u}, torch.ones(2, c{u}.shape[1], 1, 1)).sum(1).reshape(acc.shape) + acc",
    "ret.append(torch.zeros_like(x).stride())",
    "ret.append(x.transpose(0, -1).contiguous().stride() if x.ndim else x.stride())",
    "ret.append(acc.flip(-1).stride() if acc.ndim else acc.stride())",
    "ret.append(acc.expand(2, *acc.shape).contiguous().stride())",
    "ret.append(acc.storage_offset())",
    "ret.append(acc.new_empty_strided((2, 2), (1, 2)).stride())",
    "ret.append(torch.empty_strided((2, 3), (1, 2)).fill_(1).t().contiguous())",
]


def layouts(rng, ctx):
    body = _pick(rng, LAYOUTS)
    if "conv2d" in body:
        ctx.kind = "float"
    return _s("layouts", "non-contiguous and channels_last tensors, strides asked for", body)


# ---------------------------------------------------------------- exceptions caught inside the program

TRY = [
    "try:\n    acc = acc.view(-1, 7)\nexcept RuntimeError as e:\n    ret.append('view' in str(e))",
    "try:\n    v{u} = acc[5]\nexcept IndexError:\n    v{u} = acc.sum()\nacc = acc + v{u}",
    "try:\n    acc = acc + torch.ones(5)\nexcept RuntimeError:\n    acc = acc * 2\nelse:\n    ret.append(1)\nfinally:\n    ret.append(2)",
    "try:\n    k{u} = int(acc.sum()) // 0\nexcept ZeroDivisionError:\n    k{u} = -1\nret.append(k{u})",
    "t{u} = acc.clone()\ntry:\n    t{u}.add_(1.5)\nexcept RuntimeError:\n    t{u} = t{u}.float() + 1.5\nacc = t{u}",
    "try:\n    x.mul_(2)\nexcept RuntimeError as e:\n    ret.append(type(e).__name__)",
    "try:\n    raise ValueError(tuple(acc.shape))\nexcept ValueError as e:\n    ret.append(e.args[0])",
    "try:\n    acc = torch.stack([acc, acc.reshape(-1)])\nexcept RuntimeError:\n    acc = acc + 1",
    "try:\n    acc = acc * 2\n    acc = acc @ acc\nexcept RuntimeError:\n    ret.append(tuple(acc.shape))",
    "for i{u} in range(3):\n    try:\n        acc = acc + acc[i{u}]\n    except IndexError:\n        break\nret.append(tuple(acc.shape))",
    "t{u} = acc * 1\ntry:\n    t{u}.mul_(2)\n    t{u}.view(-1, 7)\nexcept RuntimeError:\n    pass\nacc = t{u}",
    "try:\n    acc = acc.float().log().nan_to_num().item()\nexcept RuntimeError:\n    acc = acc.float().sum()",
    "try:\n    assert acc.ndim < 2, acc.shape\nexcept AssertionError as e:\n    ret.append(str(e))",
    "try:\n    acc = acc.to(torch.int64) ** -1\nexcept RuntimeError:\n    acc = acc * 1",
    "try:\n    with torch.no_grad():\n        acc.add_(1)\nexcept RuntimeError:\n    acc = acc + 1",
    "try:\n    acc = torch.cat([acc, acc.float()], 0)\nexcept RuntimeError as e:\n    ret.append(type(e).__name__)",
    "def _h{u}(t):\n    if t.ndim == 1:\n        raise KeyError('one')\n    return t * 2\n\ntry:\n    acc = _h{u}(acc)\nexcept KeyError as e:\n    ret.append(repr(e))",
    "try:\n    acc = acc + acc.max(-5).values\nexcept (IndexError, RuntimeError) as e:\n    ret.append(type(e).__name__)",
    "try:\n    raise RuntimeError('fuzz')\nexcept RuntimeError:\n    try:\n        acc = acc.reshape(3, -1)\n    except RuntimeError as e:\n        ret.append(e.__context__ is not None)",
]


def try_except(rng, ctx):
    body = _pick(rng, TRY)
    if "float()" in body or "1.5" in body:
        ctx.kind = "float"
    return _s("try_except", "exceptions raised by ops and caught inside the program", body)


# ---------------------------------------------------------------- containers changed after an op read them

CONTAINERS_AFTER = [
    "L{u} = [acc, acc * 2]\ns{u} = torch.stack(L{u})\nL{u}.append(acc)\nL{u}[0] = acc * 0\nacc = s{u}.sum(0) + len(L{u})",
    "d{u} = {'a': acc}\nt{u} = d{u}['a'] * 2\nd{u}['a'] = t{u}\nacc = d{u}['a'] + t{u}",
    "G{u}.append(acc.sum())\nv{u} = torch.stack(G{u}).sum()\nG{u}.clear()\nacc = acc + v{u}",
    "sizes{u} = list(acc.shape)\nr{u} = acc.reshape(sizes{u})\nsizes{u}.append(1)\nret.append(r{u}.shape)\nret.append(sizes{u})",
    "idx{u} = [0]\nv{u} = acc.reshape(-1)[idx{u}] if acc.numel() else acc\nidx{u}[0] = 1\nret.append(v{u})",
    "shape{u} = list(acc.shape)\nz{u} = torch.zeros(shape{u})\nshape{u}[0:0] = [2]\nret.append(z{u}.shape)",
    "D{u}['k'] = acc.sum()\nacc = acc + D{u}['k']\nD{u}['k'] = None",
    "lst.append(acc.ndim)\nacc = acc * len(lst)",
    "t{u} = (acc, acc + 1)\nl{u} = list(t{u})\nl{u}.reverse()\nacc = l{u}[0] - t{u}[0]",
    "S{u}.add(acc.ndim)\nacc = acc + len(S{u})",
    "ks{u} = [1, 2]\nacc = acc.sum(tuple(range(acc.ndim))) * sum(ks{u})\nks{u}.append(3)\nret.append(ks{u})",
    "opts{u} = {'dim': -1}\nr{u} = acc.softmax(**opts{u}) if acc.is_floating_point() and acc.ndim else acc\nopts{u}['dim'] = 0\nacc = r{u}",
    # an outside list given whole to a tensor method (its items are read by the op, not by the program's code)
    "acc = acc.reshape(SH{u})\nret.append(acc.new_zeros(SH{u}).shape)",
    "ret.append(torch.zeros(SH{u}).shape)\nacc = acc.flatten().view(SH{u})",
]
# Between calls: the shapes the list names (any tensor's numel fits one of them).
SHAPE_CHANGES = ["SH{u}[:] = [1, -1]", "SH{u}[:] = [-1]", "SH{u}[:] = [-1, 1]", "SH{u}.append(1)"]


def containers_after(rng, ctx):
    body = _pick(rng, CONTAINERS_AFTER)
    state = tuple(n for n in ("G{u}", "D{u}", "S{u}") if n in body)
    setup = "\n".join(f"{n} = {v}" for n, v in (("G{u}", "[]"), ("D{u}", "{}"), ("S{u}", "set()"), ("SH{u}", "[-1]")) if n in body)
    if "softmax" in body or "torch.zeros(" in body:
        ctx.kind = "float" if ctx.kind != "int" else "int"
    if ctx.kind == "bool" and ("len" in body or "sum" in body):
        ctx.kind = "int"
    mutations = [f"{n}.clear()" for n in state] + (SHAPE_CHANGES if "SH{u}" in body else [])
    return _s("containers_after", "containers changed after an op read them", body, setup=setup, state=state,
              mutations=mutations, needs={"lst"} if "lst" in body else ())  # fmt: skip


# ---------------------------------------------------------------- cached and global state

_CACHED = """@functools.lru_cache(maxsize=2)
def _scale{u}(k):
    COUNT{u}[0] += 1
    return torch.full((), float(k))


@functools.cache
def _table{u}(n):
    return list(range(n))


COUNT{u} = [0]
STATE{u} = {'k': 2}
"""
CACHED = [
    "acc = acc * _scale{u}(acc.ndim)\nret.append(COUNT{u}[0])",
    "acc = acc * _scale{u}(STATE{u}['k'])\nSTATE{u}['k'] += 1",
    "acc = acc + len(_table{u}(acc.ndim + 1))\n_table{u}(3).append(9)\nret.append(_table{u}(3))",
    "t{u} = _table{u}(2)\nt{u}.append(acc.ndim)\nacc = acc + len(t{u})",
    "STATE{u}['last'] = tuple(acc.shape)\nacc = acc * STATE{u}['k']",
    "acc = acc * _scale{u}(2) + _scale{u}(2)\nret.append(COUNT{u}[0])",
    "ret.append(_scale{u}(1) is _scale{u}(1))",
]
CACHED_CHANGES = ["_scale{u}.cache_clear()", "STATE{u}['k'] = 5", "_table{u}.cache_clear()", "COUNT{u}[0] = 10"]


def cached(rng, ctx):
    if ctx.kind == "bool":
        ctx.kind = "int"
    body = _pick(rng, CACHED)
    if "_scale" in body:
        ctx.kind = "float"
    return _s("cached", "lru_cache and module state read and changed inside", body, setup=_CACHED,
              state=("COUNT{u}", "STATE{u}"), mutations=list(CACHED_CHANGES))  # fmt: skip


# ---------------------------------------------------------------- Python scalars with tensors of every dtype

SCALARS = [
    ("acc = acc.to(torch.float16) + 1e5", "float"),
    ("acc = acc.to(torch.int32) * 1.5", "float"),
    ("acc = acc.to(torch.bool) + True", "int"),
    ("acc = acc.to(torch.bool) * 2.5", "float"),
    ("acc = acc.to(torch.uint8) + (-1)", "int"),
    ("acc = acc.to(torch.bfloat16) / 3", "float"),
    ("acc = acc.half() * torch.tensor(2.0, dtype=torch.float64)", "float"),
    ("acc = torch.tensor(2**63 - 1) + acc.long()", "int"),
    ("acc = complex(1, 2) * acc.float()", "complex"),
    ("acc = acc.float() + 2j", "complex"),
    ("acc = acc.int() ** 0.5", "float"),
    ("acc = 1 / acc.int()", "float"),
    ("acc = True * acc.int()", "int"),
    ("acc = acc.bool() & True", "bool"),
    ("acc = acc.bool() | 1", "int"),
    ("acc = acc.float() * float('inf')", "float"),
    ("acc = acc.double() + 0.1", "float"),
    ("acc = acc.to(torch.float16) * 65504 * 2", "float"),
    ("acc = acc.int() - 2.0", "float"),
    ("acc = 3 - acc.to(torch.int16)", "int"),
    ("acc = acc.to(torch.int8) * 200", "int"),
    ("acc = torch.tensor(1, dtype=torch.uint8) - acc.to(torch.uint8)", "int"),
    ("acc = acc.float().pow(2) if n > 1 else acc.float() * n", "float"),
    ("acc = acc.long() * n", None),
    ("acc = acc.to(torch.float16) + n", "float"),
    ("acc = torch.full_like(acc, n, dtype=torch.int32) + acc", None),
    ("acc = acc.bool() + n", None),
    ("acc = torch.where(acc > 0, n, acc.to(torch.int32))", None),
    ("acc = acc.to(torch.int8).clamp(-1.5, 2.5)", "float"),
    ("ret.append(torch.tensor([n]).dtype)", None),
    ("ret.append(torch.tensor(n, dtype=torch.float16))", None),
    ("ret.append(1 / (acc.float() * 0.0))\nret.append(1 / (acc.float() * -0.0))", None),
    ("acc = acc.float() // -0.0 if acc.numel() else acc.float()", "float"),
]


def scalars(rng, ctx):
    body, kind = _pick(rng, SCALARS)
    if kind == "complex":  # what later snippets know of: complex tensors fail many ops (eager decides)
        ctx.kind = "float"
    elif kind is not None:
        ctx.kind = kind
    needs = {"n"} if " n" in body or "n)" in body or "n," in body else ()
    return _s("scalars", "Python scalars with tensors of every dtype (eager's result dtypes, overflow)", body,
              needs=needs)  # fmt: skip


# ---------------------------------------------------------------- tensors that do and do not require grad

GRAD_MIXES = [
    "p{u} = torch.ones((), requires_grad=True)\nacc = acc * p{u}\nret.append(acc.requires_grad)",
    "acc = acc.detach().requires_grad_() * 2 if acc.is_floating_point() else acc",
    "acc = acc + x.detach()\nret.append(acc.requires_grad)",
    "w{u} = torch.nn.Parameter(torch.ones(1))\nacc = acc * w{u} if acc.is_floating_point() else acc\nret.append(w{u}.grad)",
    "acc = torch.where(acc > 0, acc, acc.detach())",
    "acc = acc * 1\nacc.requires_grad_(False) if not acc.requires_grad or not acc.is_leaf else None\nret.append(acc.is_leaf)",
    "with torch.no_grad():\n    m{u} = acc.mean() if acc.is_floating_point() else acc.sum()\nacc = acc - m{u}\nret.append(m{u}.requires_grad)",
    "acc = acc + w\nret.append(w.requires_grad)",
    "acc = torch.stack([acc, acc.detach()]).sum(0)",
    "acc = acc.float() * x.float().detach().requires_grad_()",
    "ret.append(acc.grad_fn is None)\nret.append(acc.is_leaf)",
    "ret.append(x.grad)\nacc = acc * 2",
    "acc = acc.clone().detach() + acc",
    "acc = (acc * 2).detach()\nret.append(acc.requires_grad)",
]


def grad_mixes(rng, ctx):
    body = _pick(rng, GRAD_MIXES)
    if "float()" in body or "ones(" in body:
        ctx.kind = "float"
    return _s("grad_mixes", "tensors that do and do not require grad, mixed", body,
              needs={"w"} if "w\n" in body or "w.requires" in body else ())  # fmt: skip
