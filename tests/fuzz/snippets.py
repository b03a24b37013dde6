"""Pieces of programs, one pool per feature family.

A program's body is a sequence of snippets that work on ``acc`` (the running tensor, first
``x``) and may append extra results to ``ret``; the function returns ``(acc, *ret)``. A
snippet can also bring module-level setup (globals, helpers), closure cells (the program is
then built inside a factory with a ``set_<cell>`` setter per cell), the outside-state changes
that may happen between calls (statements run at module level), the parameters it needs and
the globals whose value is compared after every call.

In the text ``{u}`` becomes a name suffix unique in the program and ``{M}`` the owner object
(``m`` when the program is a function reading the global ``m``, ``self`` when the program is
``m.forward`` or a bound method).

A generator receives the random stream and a ``Ctx`` whose ``kind`` is the dtype kind of
``acc`` ("float", "int", "bool") as far as the generator can tell; it updates it.

The families that work on Python state (objects, side effects) are in ``tests.fuzz.snippets_state``, those that
use Python's language features (generators, classes, control flow, grad modes) in ``tests.fuzz.snippets_python``,
the forms that programs from outside found bugs in (with blocks, scalar promotion, aliasing arguments, records, ...)
in ``tests.fuzz.snippets_more``, loops over a tensor's length in ``tests.fuzz.snippets_loops``, the edges later findings were at (views written through aliases, integer overflow,
empty tensors, layouts, caught exceptions, ...) in ``tests.fuzz.snippets_edges``, where programs from outside live
(modules held by the program, autograd.Function and torch.func, low precision, decorators, results holding views)
in ``tests.fuzz.snippets_outside``, training loops and the programs around them (optimizer steps, gradients
accumulated over calls, control flow on tensor values, storage-level ops, results holding aliases) in
``tests.fuzz.snippets_training``; module-level code as users write it in models (buffers updated in forward,
ModuleList/ModuleDict, hooks, grad regions, ModelOutput-like results, attribute caches) in ``tests.fuzz.snippets_models``;
``Snippet``, ``Ctx`` and the helpers they share in ``tests.fuzz.snippet_base``.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tests.fuzz.snippet_base import Ctx, Snippet, _pick, _s
from tests.fuzz.snippets_edges import (
    cached,
    containers_after,
    empties,
    grad_mixes,
    integers,
    layouts,
    scalars,
    try_except,
    views,
)
from tests.fuzz.snippets_loops import loops
from tests.fuzz.snippets_models import models
from tests.fuzz.snippets_more import (
    aliasing,
    contexts,
    formatting,
    helpers,
    owner_attrs,
    promotion,
    protocols,
    rebinding,
    records,
)
from tests.fuzz.snippets_outside import autograd_functions, low_precision, modules, outputs, wrappers
from tests.fuzz.snippets_python import classes, control_flow, generators, grad_modes
from tests.fuzz.snippets_state import objects, side_effects
from tests.fuzz.snippets_training import grad_accumulation, optimizers, returns, storage, value_flow

# ---------------------------------------------------------------- elementwise

# (expression, kinds it is valid on, result kind or None for "same")
UNARY = [
    ("torch.sin(acc)", "fib", "float"),
    ("acc.exp()", "fi", "float"),
    ("torch.tanh(acc)", "fi", "float"),
    ("torch.sigmoid(acc)", "f", None),
    ("acc.abs()", "fi", None),
    ("-acc", "fi", None),
    ("torch.relu(acc)", "fi", None),
    ("acc.sqrt()", "fi", "float"),
    ("torch.log1p(acc.abs())", "fi", "float"),
    ("acc.floor()", "fi", None),
    ("acc.round()", "f", None),
    ("acc.reciprocal()", "f", None),
    ("acc * acc", "fi", None),
    ("acc.clamp(-1, 1)", "fi", None),
    ("acc.clamp(0.5, 0.5)", "f", None),
    ("acc.clamp(1, -1)", "f", None),
    ("acc.clamp(min=float('nan'))", "f", None),
    ("acc ** 2", "fi", None),
    ("torch.where(acc > 0, acc, 0.5)", "f", None),
    ("acc.float()", "fib", "float"),
    ("acc.double()", "fib", "float"),
    ("acc.to(torch.float32)", "fib", "float"),
    ("torch.nn.functional.gelu(acc)", "f", None),
    ("torch.softmax(acc, -1)", "f", None),
    ("acc // 2", "i", None),
    ("acc % 3", "fi", None),
    ("~acc", "ib", None),
    ("acc & 1", "i", None),
    ("acc.logical_not()", "fib", "bool"),
    ("acc.int().long()", "fib", "int"),
    ("(acc > 0)", "fi", "bool"),
    ("acc.sign()", "fi", None),
    ("torch.nan_to_num(acc)", "f", None),
    ("acc.type_as(x)", "fib", None),
]
BINARY_W = [
    ("acc + w", "fi", None),
    ("acc * w", "fib", None),
    ("acc - w", "fi", None),
    ("acc / w", "fi", "float"),
    ("torch.maximum(acc, w)", "fi", None),
    ("torch.where(w > 0, acc, -acc)", "fi", None),
    ("acc.where(w > 0, w)", "fib", None),  # the method: the tensor is the input, not the condition
    ("(acc > 0).where(w > 0, acc < 0)", "fib", "bool"),
    ("torch.greater(acc, w)", "fi", "bool"),
    ("acc | w", "ib", None),
    ("torch.atan2(acc, w)", "f", "float"),
    ("acc.add(w, alpha=2)", "fi", None),
    ("torch.clamp(acc, min=w)", "f", None),
    ("torch.clamp(acc, w, w)", "f", None),
    ("acc.clamp(max=w, min=-w)", "f", None),
    ("(acc == w)", "fib", "bool"),
]
BINARY_N = [
    ("acc * n", "fi", None),
    ("acc + n", "fi", None),
    ("acc - n", "fi", None),
    ("acc / n", "fi", "float"),
    ("torch.clamp(acc, max=n)", "fi", None),
    ("acc.masked_fill(acc > 0, n)", "fi", None),
    ("torch.full_like(acc, n)", "fi", None),
    ("acc + acc.new_zeros(acc.shape)", "fi", None),  # reads acc for its metadata only: no gradient back through it
    ("torch.zeros_like(acc) + n", "fi", None),
    ("n * acc + 1", "fi", None),
    ("acc ** n", "f", None),
    ("torch.add(acc, n, alpha=2)", "fi", None),
]


def _op(rng, ctx, table):
    ok = [t for t in table if ctx.kind[0] in t[1]] or table  # none fits: eager decides what is valid
    expr, _, out = _pick(rng, ok)
    if out is not None:
        ctx.kind = out
    elif ctx.kind == "int" and "/" in expr:
        ctx.kind = "float"
    return expr


def elementwise(rng, ctx):
    choice = rng.random()
    if choice < 0.45:
        return _s("elementwise", "unary op", f"acc = {_op(rng, ctx, UNARY)}")
    if choice < 0.7:
        return _s("elementwise", "binary op with a tensor", f"acc = {_op(rng, ctx, BINARY_W)}", needs={"w"})
    if choice < 0.75 and ctx.kind == "float":  # operands of other ranks, the lower one first (Mixtral's loss)
        body = _pick(rng, ("acc = torch.linspace(0.5, 1.5, acc.shape[-1] if acc.ndim else 1) * acc.unsqueeze(0)",
                           "acc = acc.unsqueeze(0).unsqueeze(0) * acc + acc.sum()",
                           "acc = (acc.reshape(1, -1) * acc.reshape(-1)).sum() + acc"))  # fmt: skip
        return _s("elementwise", "broadcast between operands of other ranks", body)
    pool = "float" if ctx.kind == "float" and rng.random() < 0.5 else "any"
    return _s(
        "elementwise", "binary op with a Python number", f"acc = {_op(rng, ctx, BINARY_N)}", needs={"n"}, n_pool=pool
    )


# ---------------------------------------------------------------- reductions, shapes, indexing, matmul

REDUCTIONS = [
    ("acc = acc.sum()", "fib", "keep_int"),
    ("acc = acc.sum(0)", "fib", "keep_int"),
    ("acc = acc.sum(-1, keepdim=True)", "fib", "keep_int"),
    ("acc = acc.mean()", "f", None),
    ("acc = acc.amax(-1)", "fi", None),
    ("acc = acc.prod()", "fi", None),
    ("acc = torch.cumsum(acc, -1)", "fi", None),
    ("acc = acc.var()", "f", None),
    ("acc = acc.argmax()", "fi", "int"),
    ("acc = acc.max(-1).values", "fi", None),
    ("acc = acc.std(-1) if acc.ndim else acc.std()", "f", None),
    ("acc = acc.var(-1, correction=0) if acc.ndim else acc.var(correction=0)", "f", None),
    ("acc = torch.cumprod(acc, 0) if acc.ndim else torch.cumprod(acc, 0)", "f", None),
    ("acc = acc.norm()", "f", None),
    ("acc = torch.linalg.vector_norm(acc, ord=3)", "f", None),
    ("acc = acc.norm(p=0.5, dim=-1) if acc.ndim else acc.norm(p=0.5)", "f", None),
    ("acc = torch.linalg.vector_norm(acc, ord=float('inf'), dim=-1) if acc.ndim else acc.abs()", "f", None),
    ("acc = torch.linalg.vector_norm(acc, ord=-1)", "f", None),
]
SHAPES = [
    "acc = acc.reshape(-1)",
    "acc = acc.flatten()",
    "acc = acc.unsqueeze(0)",
    "acc = acc.view(-1)",
    "acc = acc.contiguous().view(-1)",
    "acc = acc.squeeze()",
    "acc = acc.expand(2, *acc.shape)",
    "acc = torch.stack([acc, acc])",
    "if acc.ndim >= 2:\n    acc = acc.transpose(0, -1)",
    "if acc.ndim >= 2:\n    acc = acc.mT",
    "acc = acc.permute(*reversed(range(acc.ndim)))",
    "if acc.ndim >= 1:\n    acc = torch.cat([acc, acc], -1)",
    "if acc.ndim >= 1:\n    acc = acc[0]",
    "if acc.ndim >= 1:\n    acc = acc[..., :2]",
    "if acc.ndim >= 1:\n    acc = acc[::2]",
    "if acc.ndim >= 1:\n    acc = acc[-1]",
    "acc = acc[None]",
    "if acc.ndim >= 2:\n    acc = acc[:, 1:]",
    "if acc.ndim == 2 and acc.shape[0] > 1:\n    acc = acc[1:, ::2]",
]
MATMUL = [
    "if acc.ndim == 2:\n    acc = acc @ acc.mT",
    "if acc.ndim >= 1:\n    acc = acc @ torch.ones(acc.shape[-1], 3, dtype=acc.dtype)",
    "if acc.ndim >= 1 and w.ndim >= 1 and acc.shape[-1] == w.shape[-1]:\n    acc = torch.matmul(acc, w.mT if w.ndim >= 2 else w)",
    "if acc.ndim == 2:\n    acc = torch.nn.functional.linear(acc, torch.ones(2, acc.shape[-1], dtype=acc.dtype))",
]
QUERIES = [
    "ret.append(acc.shape)",
    "ret.append(acc.size())",
    "ret.append(acc.shape[-1] if acc.ndim else 0)",
    "ret.append(acc.numel())",
    "ret.append(acc.dim())",
    "ret.append(len(acc) if acc.ndim else -1)",
    "ret.append(acc.stride())",
    "ret.append(x.stride())",
    "ret.append(acc.is_contiguous())",
    "ret.append(x.is_contiguous())",
    "ret.append(tuple(acc.shape))",
    "ret.append(acc.size(0) * 2 if acc.ndim else 1)",
    "ret.append(acc.shape == (2, 3))",
    "ret.append(x.storage_offset())",
]


def reductions(rng, ctx):
    choice = rng.random()
    if choice < 0.3:
        ok = [r for r in REDUCTIONS if ctx.kind[0] in r[1]]
        body, _, out = _pick(rng, ok)
        if out == "keep_int" and ctx.kind == "bool":
            ctx.kind = "int"
        elif out == "int":
            ctx.kind = "int"
        return _s("reductions", "reduction", body)
    if choice < 0.65:
        return _s("reductions", "reshape / view / indexing", _pick(rng, SHAPES))
    if choice < 0.8:
        body = _pick(rng, MATMUL)
        if ctx.kind == "bool":
            body = body.replace("acc @", "acc.float() @").replace("dtype=acc.dtype", "dtype=torch.float32")
            ctx.kind = "float"
        needs = {"w"} if "w" in body.replace("while", "") and "w." in body else set()
        return _s("reductions", "matmul", body, needs=needs)
    return _s("reductions", "shape / stride query", _pick(rng, QUERIES))


# ---------------------------------------------------------------- branches on tensor metadata

META = [
    "if x.ndim == 2:\n    acc = acc + 1\nelse:\n    acc = acc - 1",
    "if x.ndim > 0 and x.shape[0] > 2:\n    acc = acc * 2",
    "if x.dtype == torch.float32:\n    acc = acc + 1\nelif x.dtype is torch.float64:\n    acc = acc - 1",
    "if x.is_floating_point():\n    acc = acc * 3",
    "if x.requires_grad:\n    acc = acc + 2",
    "if x.is_contiguous():\n    acc = acc + 1\nelse:\n    acc = acc * 2",
    "if isinstance(x, torch.Tensor):\n    acc = acc + 1",
    "if type(x) is torch.Tensor:\n    acc = acc + 1",
    "if x.numel() > 6:\n    acc = acc - 1",
    "if x.shape == (2, 3):\n    acc = acc * 5",
    "if x.ndim > 0 and x.stride()[-1] == 1:\n    acc = acc + 3",
    "if x.ndim >= 2 and x.mT.is_contiguous():\n    acc = acc - 3",
    "ret.append(x.dtype)",
    "ret.append(x.device)",
    "ret.append(x.requires_grad)",
    "ret.append(acc.requires_grad)",
    "ret.append(x.is_leaf)",
    "ret.append(x.grad is None)",
    "ret.append(x.grad)",
    "if x.grad is not None:\n    acc = acc + x.grad.sum()",
    "ret.append(acc.dtype == torch.bool)",
    "if x.dtype in (torch.int64, torch.bool):\n    acc = acc.float()",
]
META_N = [
    "if isinstance(n, torch.Tensor):\n    acc = acc + n\nelif type(n) is int:\n    acc = acc * n\nelif type(n) is bool:\n    acc = acc + 7\nelse:\n    acc = acc - n",
    "if isinstance(n, float):\n    ret.append('float')\nelif isinstance(n, bool):\n    ret.append('bool')\nelif isinstance(n, int):\n    ret.append('int')",
    "ret.append(type(n).__name__)",
]


def tensor_meta(rng, ctx):
    if rng.random() < 0.2:
        return _s("tensor_meta", "branch on the type of a number", _pick(rng, META_N), needs={"n"}, n_pool="any+tensor")
    body = _pick(rng, META)
    if "acc.float()" in body:
        ctx.kind = "float"
    return _s("tensor_meta", "branch on tensor metadata", body)


# ---------------------------------------------------------------- Python numbers

NUMBER_OPS = [
    "k = n * 2 + 1\nacc = acc * k\nret.append(k)",
    "ret.append(n / 2)",
    "ret.append(n // 2)",
    "ret.append(-n)",
    "ret.append(abs(n))",
    "ret.append(n ** 2)",
    "ret.append(n == 0)",
    "ret.append(max(n, 1))",
    "ret.append(float(n))",
    "ret.append(int(n))",
    "ret.append(round(n, 1))",
    "ret.append(math.floor(n))",
    "ret.append(math.ceil(n))",
    "ret.append(math.trunc(n))",
    "ret.append(math.copysign(1.0, n))",
    "ret.append(n != n)",
    "ret.append(math.isnan(n))",
    "ret.append(str(n))",
    "ret.append(f'{n:.2f}')",
    "ret.append(f'n={n}')",
    "ret.append(format(n, '.1e'))",
    "ret.append(isinstance(n, int))",
    "ret.append(type(n) is int)",
    "ret.append(hash(n) if not isinstance(n, torch.Tensor) else 0)",
    "ret.append(float(n).is_integer())",
    "ret.append((10, 20, 30)[int(n) % 3])",
    "ret.append('abc'[int(n) % 3])",
    "ret.append({0: 'a', 1: 'b', 2: 'c'}.get(n, 'z'))",
    "ret.append(n in {1, 2})",
    "for i in range(int(n) % 4):\n    acc = acc + i",
    "if n > 2:\n    acc = acc * 2\nelse:\n    acc = acc + 1",
    "if n:\n    acc = acc + 1",
    "if n is True:\n    ret.append('is True')",
    "ret.append(divmod(n, 3))",
    "ret.append(int(n).bit_length())",
    "ret.append(n * 1.5 - 1)",
    "ret.append(n + True)",
    "ret.append(min(n, 2) * acc.ndim)",
    "ret.append(n < 1 < 3)",
    "acc = acc * (n if n == n else 0)",
    "ret.append(math.sqrt(abs(n)))",
    "ret.append(n)",
]


def python_numbers(rng, ctx):
    pool = _pick(rng, ("int", "int", "float", "any"))
    return _s(
        "python_numbers", "Python arithmetic and branches on a number", _pick(rng, NUMBER_OPS), needs={"n"}, n_pool=pool
    )


# ---------------------------------------------------------------- strings

STRING_OPS = [
    "if s == 'add':\n    acc = acc + 1\nelif s == 'mul':\n    acc = acc * 2\nelse:\n    acc = acc - 1",
    "ret.append(s + '!')",
    "ret.append(s.upper())",
    "ret.append(len(s))",
    "acc = acc * len(s)",
    "if s.startswith('m'):\n    acc = acc * 3",
    "ret.append(s[0] if s else '')",
    "ret.append(s * 2)",
    "if s in ('add', 'sub'):\n    acc = acc + 5",
    "ret.append(s.split('d'))",
    "ret.append(f'{s}:{acc.ndim}')",
    "acc = {'sin': torch.sin, 'relu': torch.relu}.get(s, torch.abs)(acc.float())",
    "ret.append(hash(s) == hash('add'))",
    "ret.append(s == '')",
]


def strings(rng, ctx):
    body = _pick(rng, STRING_OPS)
    if "acc.float()" in body:
        ctx.kind = "float"
    return _s("strings", "Python code on a string argument", body, needs={"s"})


# ---------------------------------------------------------------- globals (values)

GLOBAL_NUMBERS = ("2.0", "3", "-0.0", "0.0", "float('nan')", "True", "1", "0.5", "float('inf')")


def globals_values(rng, ctx):
    choice = rng.random()
    if choice < 0.35:
        init = _pick(rng, GLOBAL_NUMBERS)
        muts = [f"G{{u}} = {v}" for v in GLOBAL_NUMBERS if v != init]
        return _s(
            "globals",
            "global number rebound",
            "acc = acc * G{u}\nret.append(G{u})",
            setup=f"G{{u}} = {init}",
            mutations=muts,
        )
    if choice < 0.55:
        return _s(
            "globals", "global string rebound",
            "if NAME{u} == 'a':\n    acc = acc + 1\nelse:\n    ret.append(NAME{u} * 2)",
            setup="NAME{u} = 'a'", mutations=["NAME{u} = 'b'", "NAME{u} = 'a'", "NAME{u} = ''"],
        )  # fmt: skip
    if choice < 0.7:
        return _s(
            "globals", "global flag rebound", "if FLAG{u}:\n    acc = acc + 1",
            setup="FLAG{u} = True", mutations=["FLAG{u} = False", "FLAG{u} = True", "FLAG{u} = 0", "FLAG{u} = None"],
        )  # fmt: skip
    if choice < 0.85:
        return _s(
            "globals", "global tensor rebound or mutated", "acc = acc + W{u}",
            setup="W{u} = torch.randn(())",
            mutations=["W{u} = torch.randn(()) * 3", "W{u}.add_(1)", "W{u} = torch.randn((), dtype=torch.float64)", "W{u} = torch.tensor(2)"],
        )  # fmt: skip
    if rng.random() < 0.25:  # attributes a tensor has of its own (a parameter's flags, a marked tensor)
        return _s(
            "globals", "global tensor's own attribute set and deleted",
            "acc = acc * getattr(W{u}, 'gain', 1.0)\nif hasattr(W{u}, 'tag'):\n    ret.append(W{u}.tag)",
            setup="W{u} = torch.ones(())",
            mutations=["W{u}.gain = 2.0", "W{u}.gain = 0.5", "W{u}.__dict__.pop('gain', None)", "W{u}.tag = 'x'",
                       "W{u}.__dict__.pop('tag', None)"],
        )  # fmt: skip
    if rng.random() < 0.3:  # an environment variable: process-wide, so each run starts with it unset
        return _s(
            "globals", "environment variable read",
            "if os.environ.get('THUNDER_FUZZ_{u}') == '1':\n    acc = acc + 1\nret.append(os.environ.get('THUNDER_FUZZ_{u}', 'unset'))",
            setup="os.environ.pop('THUNDER_FUZZ_{u}', None)",
            mutations=["os.environ['THUNDER_FUZZ_{u}'] = '1'", "os.environ['THUNDER_FUZZ_{u}'] = '2'",
                       "os.environ.pop('THUNDER_FUZZ_{u}', None)"],
        )  # fmt: skip
    if rng.random() < 0.4:  # a NameError the program catches: the entry holds while the global stays undefined
        return _s(
            "globals", "global whose absence the program catches",
            "try:\n    acc = acc * MAYBE{u}\nexcept NameError:\n    acc = acc + 1",
            mutations=["MAYBE{u} = 3", "del MAYBE{u}", "MAYBE{u} = 0.5", "del MAYBE{u}"],
        )  # fmt: skip
    return _s(
        "globals", "global tuple rebound", "acc = acc * T{u}[0]\nret.append(len(T{u}))",
        setup="T{u} = (2, 3)", mutations=["T{u} = (5,)", "T{u} = (2.5, 1, 1)", "T{u} = (2, 3)"],
    )  # fmt: skip


# ---------------------------------------------------------------- global functions, defaults, helper closures


def global_functions(rng, ctx):
    choice = rng.random()
    if choice < 0.2:
        return _s(
            "global_functions", "global function rebound", "acc = ACT{u}(acc.float())", setup="ACT{u} = torch.relu",
            mutations=["ACT{u} = torch.tanh", "ACT{u} = torch.sigmoid", "ACT{u} = torch.relu", "ACT{u} = lambda t: t * 2"],
        ) if _float(ctx) else _s("global_functions", "global function rebound", "acc = ACT{u}(acc)", setup="ACT{u} = torch.abs",
                                 mutations=["ACT{u} = torch.neg", "ACT{u} = torch.abs", "ACT{u} = lambda t: t * 2"])  # fmt: skip
    if choice < 0.4:
        return _s(
            "global_functions", "helper's __defaults__ changed", "acc = h{u}(acc)",
            setup="def h{u}(t, k=2):\n    return t * k",
            mutations=["h{u}.__defaults__ = (3,)", "h{u}.__defaults__ = (-1,)", "h{u}.__defaults__ = (2,)"],
        )  # fmt: skip
    if choice < 0.55:
        return _s(
            "global_functions", "helper's __kwdefaults__ changed", "acc = h{u}(acc)",
            setup="def h{u}(t, *, k=2):\n    return t + k",
            mutations=["h{u}.__kwdefaults__ = {'k': 5}", "h{u}.__kwdefaults__ = {'k': -1}"],
        )  # fmt: skip
    if choice < 0.7:
        return _s(
            "global_functions", "helper redefined", "acc = h{u}(acc)",
            setup="def h{u}(t):\n    return t * 2",
            mutations=["def h{u}(t):\n    return t - 1", "h{u} = lambda t: t + 3", "def h{u}(t):\n    return t * 2"],
        )  # fmt: skip
    if choice < 0.85:
        return _s(
            "global_functions", "closure cell of a helper changed", "acc = hc{u}(acc)",
            setup=(
                "def _mk{u}():\n    c = 2\n    def inner(t):\n        return t * c\n"
                "    def setc(v):\n        nonlocal c\n        c = v\n    return inner, setc\nhc{u}, set_hc{u} = _mk{u}()"
            ),
            mutations=["set_hc{u}(5)", "set_hc{u}(-1)", "set_hc{u}(2)"],
        )  # fmt: skip
    return _s(
        "global_functions", "helper reads a global that changes", "acc = h{u}(acc)",
        setup="K{u} = 2\ndef h{u}(t):\n    return t * K{u}", mutations=["K{u} = 3", "K{u} = 2", "K{u} = -0.5"],
    )  # fmt: skip


def _float(ctx):
    ctx.kind = "float"
    return True


# ---------------------------------------------------------------- containers


# Containers the program changes after an op read them (DenseNet's feature list): the op keeps what it read.
CHANGED_AFTER_A_READ = [
    "l{u} = [acc]\nc{u} = torch.cat(l{u})\nl{u}.append(acc)\nacc = c{u} + len(l{u})",
    "l{u} = [acc, acc * 2]\nc{u} = torch.stack(l{u})\nl{u}[0] = acc * 0\nacc = c{u}.sum(0)",
    "d{u} = {'a': acc}\nc{u} = torch.stack(list(d{u}.values()))\nd{u}['b'] = acc\nacc = c{u}[0]",
    "t{u} = ([acc], 1)\nc{u} = torch.cat(t{u}[0])\nt{u}[0].append(acc)\nacc = c{u}",
    "f{u} = [acc]\nfor _ in range(2):\n    f{u}.append(torch.cat(f{u}, -1) if acc.ndim else acc + 1)\nret.append(f{u}[-1])",
    "s{u} = {1}\nc{u} = acc * len(s{u})\ns{u}.add(2)\nacc = c{u}",
]


def containers(rng, ctx):
    choice = rng.random()
    if choice < 0.2:
        return _s("containers", "a container changed after an op read it", _pick(rng, CHANGED_AFTER_A_READ))
    if choice < 0.3:
        reads = _pick(rng, (
            "acc = acc * len(L{u}) + L{u}[-1]", "for v in L{u}:\n    acc = acc + v", "ret.append(sum(L{u}))",
            "acc = acc + L{u}[0]\nret.append(list(L{u}))",
        ))  # fmt: skip
        return _s(
            "containers", "global list mutated in place", reads, setup="L{u} = [1, 2]",
            mutations=["L{u}.append(3)", "L{u}[0] = 7", "L{u}.pop()", "L{u}.insert(0, 0.5)", "L{u}.extend([1, 1])", "L{u}[:] = [2]"],
        )  # fmt: skip
    if choice < 0.5:
        reads = _pick(rng, (
            "acc = acc * D{u}.get(1, 0.0)", "ret.append(len(D{u}))", "if 3 in D{u}:\n    acc = acc + 1",
            "for k, v in D{u}.items():\n    acc = acc + k * v", "ret.append(D{u}[2])",
        ))  # fmt: skip
        return _s(
            "containers", "global dict with int keys mutated in place", reads, setup="D{u} = {1: 2.0, 2: 3.0}",
            mutations=["D{u}[1] = 5.0", "D{u}[3] = 1.0", "D{u}.pop(3, None)", "D{u}[2] = -0.0", "D{u}.clear()", "D{u}.update({1: 2.0, 2: 3.0})"],
        )  # fmt: skip
    if choice < 0.55:  # the same keys in another order, or keys equal but of another type (1, 1.0, True)
        reads = _pick(rng, ("ret.append(list(K{u}))", "for k, v in K{u}.items():\n    acc = acc + v",
                            "ret.append([type(k).__name__ for k in K{u}])", "ret.append(list(K{u}.values()))"))  # fmt: skip
        return _s(
            "containers", "global dict replaced by one with its keys reordered or retyped", reads,
            setup="K{u} = {'a': 1.0, 'b': 2.0}",
            mutations=["K{u} = {'b': 2.0, 'a': 1.0}", "K{u} = {1: 1.0, 2: 2.0}", "K{u} = {1.0: 1.0, 2: 2.0}",
                       "K{u} = {True: 1.0, 2: 2.0}", "K{u} = {'a': 1.0, 'b': 2.0}"],
        )  # fmt: skip
    if choice < 0.65:
        return _s(
            "containers", "global config dict mutated in place",
            "if CFG{u}['act'] == 'relu':\n    acc = torch.relu(acc)\nacc = acc * CFG{u}['scale']",
            setup="CFG{u} = {'act': 'relu', 'scale': 2.0}",
            mutations=["CFG{u}['act'] = 'none'", "CFG{u}['scale'] = 3", "CFG{u}['act'] = 'relu'", "CFG{u}['scale'] = float('nan')"],
        )  # fmt: skip
    if choice < 0.85:
        reads = _pick(rng, (
            "if 2 in S{u}:\n    acc = acc + 1", "ret.append(len(S{u}))", "ret.append(sorted(S{u}))",
            "if n in S{u}:\n    acc = acc * 2",
        ))  # fmt: skip
        return _s(
            "containers", "global set mutated in place", reads, setup="S{u} = {1, 2}",
            mutations=["S{u}.add(3)", "S{u}.discard(2)", "S{u}.add(2)", "S{u}.clear()"],
            needs={"n"} if "n in" in reads else (), n_pool="int",
        )  # fmt: skip
    return _s(
        "containers", "nested global list mutated in place", "acc = acc + NL{u}[0][1]",
        setup="NL{u} = [[1, 2], [3]]", mutations=["NL{u}[0][1] = 9", "NL{u}[0] = [4, 5]", "NL{u}[0][1] = 2"],
    )  # fmt: skip


# ---------------------------------------------------------------- closures (program built in a factory)


def closures(rng, ctx):
    choice = rng.random()
    if choice < 0.35:
        return _s(
            "closures", "closure number rebound (nonlocal setter)", "acc = acc * k{u}\nret.append(k{u})",
            cells={"k{u}": "2.0"}, mutations=["set_k{u}(3.0)", "set_k{u}(-0.0)", "set_k{u}(2)", "set_k{u}(float('nan'))", "set_k{u}(True)"],
        )  # fmt: skip
    if choice < 0.55:
        return _s(
            "closures", "closure string rebound", "if mode{u} == 'a':\n    acc = acc + 1\nelse:\n    acc = acc - 1",
            cells={"mode{u}": "'a'"}, mutations=["set_mode{u}('b')", "set_mode{u}('a')"],
        )  # fmt: skip
    if choice < 0.65:
        return _s(
            "closures", "closure tensor rebound or changed in place", "acc = acc * t{u}\nret.append(t{u} + 1)",
            cells={"t{u}": "torch.tensor(2.0)"},
            mutations=["set_t{u}(torch.tensor(3.0))", "set_t{u}(torch.ones(2))", "set_t{u}(torch.tensor(2, dtype=torch.int64))"],
        )  # fmt: skip
    if choice < 0.8:
        return _s(
            "closures", "closure function rebound", "acc = fn{u}(acc)",
            cells={"fn{u}": "torch.abs"}, mutations=["set_fn{u}(torch.neg)", "set_fn{u}(lambda t: t * 3)", "set_fn{u}(torch.abs)"],
        )  # fmt: skip
    return _s(
        "closures", "closure list mutated in place", "acc = acc + len(cl{u})\nret.append(list(cl{u}))",
        setup="_shared{u} = [1, 2]", cells={"cl{u}": "_shared{u}"},
        mutations=["_shared{u}.append(3)", "_shared{u}.clear()", "set_cl{u}([5])"],
    )  # fmt: skip


# ---------------------------------------------------------------- attributes of modules and objects


# ---------------------------------------------------------------- in-place tensor ops

INPLACE = [
    "acc = acc * 2\nacc.add_(1)",
    "a{u} = acc + 1\nb{u} = acc + 1\na{u}.mul_(2)\nret.append(b{u})",
    "t{u} = acc * 1\nif t{u}.ndim >= 1:\n    t{u}[0].fill_(5)\nret.append(t{u})",
    "t{u} = acc * 1\nv{u} = t{u}.view(-1) if t{u}.is_contiguous() else t{u}\nv{u}.mul_(0)\nret.append(t{u})",
    "x.add_(1)",
    "x.mul_(2)",
    "acc = acc.clamp(-5, 5)\nacc.clamp_(min=0)",
    "acc = acc + 0\nacc.relu_()",
    "t{u} = acc.clone()\nif t{u}.ndim >= 1:\n    t{u}[0] = 3\nret.append(t{u})",
    "t{u} = acc.clone()\nt{u}[t{u} > 0] = 0\nret.append(t{u})",
    "x.detach().mul_(2)",
    "acc = acc + 0\nacc.copy_(w)",
    "t{u} = acc.clone()\nt{u}.zero_()\nacc = acc + t{u}",
    "t{u} = acc * 1\nu{u} = t{u} * 1\nt{u}.add_(1)\nret.append(u{u})\nret.append(t{u})",
    "v{u} = acc * 1\nv{u}.fill_(1.5)\nacc = acc + v{u}",
    "v{u} = acc * 2\nv{u}.mul_(3)\nacc = v{u}",
    "v{u} = acc + 0\nv{u}.clamp_(min=0)\nacc = acc * v{u}",
    "v{u} = acc * 1\nif v{u}.ndim:\n    v{u}[..., 0] = 2\nacc = acc + v{u}",
    "t{u} = acc * 1\ns{u} = t{u}.sin()\nt{u}.mul_(2)\nacc = acc + s{u}",
    "e{u} = acc.exp()\ne{u}.detach().add_(1)\nacc = acc + e{u}",
    "t{u} = acc * 1\ns{u} = t{u} + 1\nt{u}.detach().mul_(2)\nacc = s{u}",
    "s{u} = acc * acc\nacc.detach().mul_(2)\nacc = s{u}",
    "s{u} = acc * x\nx.detach().add_(1)\nacc = s{u}",
    "t{u} = (acc * 1).reshape(-1)\ntorch.nn.functional.dropout(t{u}, 0.5, training=True, inplace=True)\nacc = t{u}",
    "t{u} = acc * 1\nv{u} = t{u}.view(-1)\ntorch.nn.functional.dropout(v{u}, 0.3, training=True, inplace=True)\nacc = t{u}",
    # chained updates through an alias, and ``.data`` (an EMA of a parameter; a gradient that must not flow)
    "t{u} = acc * 1\nt{u}.detach().mul_(0.5).add_(1)\nacc = t{u}",
    "x.data.mul_(0.5).add_(1)",
    "acc = acc + acc.data * 0.5",
    "s{u} = acc * acc.data\nacc = s{u}",
]


def inplace(rng, ctx):
    body = _pick(rng, INPLACE)
    return _s("inplace", "in-place op", body, needs={"w"} if "w)" in body else ())


# ---------------------------------------------------------------- Python needs a tensor value (a split, or a clear error)

VALUE_DEPENDENT = [
    "if acc.sum() > 0:\n    acc = acc + 1",
    "if x.any():\n    acc = acc * 2",
    "ret.append(bool(x.all()))",
    "ret.append(float(acc.sum()))",
    "ret.append(acc.sum().item())",
    "ret.append(int(acc.sum()))",
    "ret.append(acc.tolist())",
    "print(acc)",
    "ret.append(str(acc))",
    "ret.append(f'{acc}')",
    "acc = acc[acc > 0]",
    "acc = torch.nonzero(acc)",
    "for _ in range(30):  # bounded: with an inf eager would loop forever\n    if not acc.sum() > 100:\n        break\n    acc = acc / 2",
    "ret.append(acc.max() > 1)",
    # data-dependent sizes used as sizes (Note [Symbolic data-dependent sizes])
    "n{u} = (acc > 0).sum().item()\nacc = acc.reshape(-1)[:n{u}] * 2",
    "n{u} = int((acc > 0).sum())\nacc = acc.reshape(-1)[:n{u}] + n{u}",
    "k{u} = acc[acc > 0]\nacc = acc.sum() + k{u}.sum() * k{u}.shape[0]",
    "r{u}, = torch.where(acc.reshape(-1) > 0)\nacc = acc.reshape(-1)[r{u}] * 2",
    "n{u} = (acc > 0).sum().item()\nif n{u} > 2:\n    acc = acc * 2",
]


def value_dependent(rng, ctx):
    body = _pick(rng, VALUE_DEPENDENT)
    if "nonzero" in body:
        ctx.kind = "int"
    return _s("value_dependent", "Python needs a tensor value", body)


# ---------------------------------------------------------------- ops eager rejects (thunder must reject them too)

EAGER_ERRORS = [
    "_ = -(x > 0)\nacc = acc + 0",
    "_ = x.view(-1)\nacc = acc + 0",
    "_ = x @ torch.ones(x.shape[-1] + 1) if x.ndim else x\nacc = acc + 0",
    "_ = torch.ones(3) + torch.ones(4)",
    "_ = x.sum(5)",
    "_ = x[100] if x.ndim else x\nacc = acc + 0",
    "_ = x.reshape(7, -1)",
    "_ = x.long() // 0",
    "_ = (x > 0) - (x > 0)",
    "_ = x.float() & 1",
    "_ = torch.cat([x, torch.ones(2, 2, 2, 2, 2)])",
    "_ = x.expand(5, 5, 5, 5, 5)",
    "_ = torch.sigmoid(x.long())",
    "_ = x.to(torch.float32).mean(dtype=torch.int64)",
    "_ = x.permute()\nacc = acc + 0",
    "_ = x.take(torch.tensor([100]))\nacc = acc + 0",
    "_ = x + math.ceil(1e30)\nacc = acc + 0",
    "_ = x[..., torch.tensor([9])] if x.ndim else x.view(2)",
]


def eager_errors(rng, ctx):
    return _s("eager_errors", "an op eager rejects", _pick(rng, EAGER_ERRORS))


# ---------------------------------------------------------------- values taken from the world on every call


def randomness(rng, ctx):
    if rng.random() < 0.3:  # a generator of the program's own in a global, which may be replaced between calls
        make = _pick(rng, ("random.Random", "numpy.random.default_rng", "numpy.random.RandomState"))
        return _s("randomness", "a global generator", "ret.append(G{u}.random())",
                  setup=f"G{{u}} = {make}(3)", mutations=[f"G{{u}} = {make}(5)", f"G{{u}} = {make}(3)"])  # fmt: skip
    if rng.random() < 0.25:  # a draw whose result nothing uses still moves the generator (eager draws it)
        ctx.kind = "float"
        body = _pick(rng, ("torch.nn.functional.dropout(acc.float(), 0.5, training=True)\nacc = acc * torch.rand(())",
                           "_ = torch.rand_like(acc.float())\nacc = torch.nn.functional.dropout(acc.float(), 0.3)",
                           "torch.randn(3)\nret.append(torch.rand(2))"))  # fmt: skip
        return _s("randomness", "an unused draw before a used one", body)
    body = _pick(rng, (
        "acc = acc * random.random()", "acc = acc + random.randint(0, 3)", "ret.append(random.choice(['a', 'b', 'c']))",
        "ret.append(random.random())", "acc = acc * numpy.random.rand()", "ret.append(numpy.random.beta(0.4, 0.4))",
    ))  # fmt: skip
    if "rand" in body and "acc" in body:
        ctx.kind = "float"
    return _s("randomness", "Python and NumPy random on every call", body)


# ---------------------------------------------------------------- iterators and iterables as arguments


def iterators(rng, ctx):
    body = _pick(rng, (
        "for v in it:\n    acc = acc + (v[0] if isinstance(v, tuple) else v)",
        "ret.append(list(it))",
        "ret.append(sum(1 for _ in it))",
        "ret.append(next(iter(it), None))",
        "for v in it:\n    acc = acc + 1\n    break",
    ))  # fmt: skip
    return _s("iterators", "iterator or iterable argument", body, needs={"it"})


# ---------------------------------------------------------------- calls: helpers, partial, nested jit, no_grad


def calls(rng, ctx):
    choice = rng.random()
    if choice < 0.2:
        return _s("calls", "helper with *args/**kwargs", "acc = hv{u}(acc, 2, k=3)",
                  setup="def hv{u}(t, *args, **kwargs):\n    return t * args[0] + kwargs['k']")  # fmt: skip
    if choice < 0.27:
        return _s("calls", "functools.partial with keywords", "acc = P{u}(acc, 1)",
                  setup="P{u} = functools.partial(torch.add, alpha=2)",
                  mutations=["P{u} = functools.partial(torch.add, alpha=3)"])  # fmt: skip
    if choice < 0.35:
        return _s("calls", "functools.partial holding a tensor", "acc = P{u}(acc)",
                  setup="P{u} = functools.partial(torch.mul, other=torch.tensor(2.0))",
                  mutations=["P{u} = functools.partial(torch.mul, other=torch.tensor(3.0))",
                             "P{u}.keywords['other'].add_(1)"])  # fmt: skip
    if choice < 0.5:
        return _s("calls", "calls another jitted function", "acc = J{u}(acc)",
                  setup="J{u} = thunder.jit(lambda t: t * 2 + 1)")  # fmt: skip
    if choice < 0.65:
        return _s("calls", "torch.no_grad block", "with torch.no_grad():\n    c{u} = acc * 2\nacc = acc + c{u}")
    if choice < 0.8:
        return _s("calls", "try/except in the program",
                  "try:\n    acc = acc + acc[5]\nexcept IndexError:\n    acc = acc - 1")  # fmt: skip
    if choice < 0.9:
        return _s(
            "calls",
            "generator expression and builtins",
            "acc = acc + sum(i * i for i in range(3))\nret.append(sorted([3, 1, 2]))",
        )
    return _s("calls", "lambda and map", "ret.append(list(map(lambda v: v * 2, [1, 2])))\nacc = (lambda t: t + 1)(acc)")


# ---------------------------------------------------------------- global torch state read by the program

TORCH_STATE = [
    "if torch.is_grad_enabled():\n    acc = acc * 2\nelse:\n    acc = acc * 3",
    "ret.append(torch.is_grad_enabled())",
    "ret.append(torch.get_default_dtype())",
    "acc = acc + torch.ones(())",
    "if torch.get_default_dtype() == torch.float64:\n    acc = acc * 2",
    "ret.append(torch.are_deterministic_algorithms_enabled())",
    "if torch.is_inference_mode_enabled():\n    acc = acc + 1",
    "ret.append(torch.tensor([1.5, 2.5]).dtype)",
]
# Run at module level between calls, in both worlds; the checker puts the state back after each program.
TORCH_STATE_CHANGES = [
    "torch.set_grad_enabled(False)", "torch.set_grad_enabled(True)", "torch.set_default_dtype(torch.float64)",
    "torch.set_default_dtype(torch.float32)", "torch.use_deterministic_algorithms(True)",
    "torch.use_deterministic_algorithms(False)",
]  # fmt: skip


def torch_state(rng, ctx):
    return _s("torch_state", "global torch state read by the program", _pick(rng, TORCH_STATE),
              mutations=list(TORCH_STATE_CHANGES))  # fmt: skip


# ---------------------------------------------------------------- slices and modules as arguments


def argument_kinds(rng, ctx):
    if rng.random() < 0.5:
        body = _pick(rng, (
            "if acc.ndim:\n    acc = acc[sl]", "ret.append(sl.indices(5))", "ret.append(list(range(10))[sl])",
            "ret.append(sl.stop)",
        ))  # fmt: skip
        return _s("argument_kinds", "a slice argument", body, needs={"sl"})
    body = _pick(rng, (
        "ret.append(mod(torch.ones(4)))", "ret.append(copy.deepcopy(mod)(torch.ones(4)))",
        "acc = acc + sum(p.sum() for p in mod.parameters())", "ret.append(type(mod).__name__)",
        "ret.append(mod.training)", "ret.append(len(list(mod.children())))",
    ))  # fmt: skip
    if rng.random() < 0.4:
        body = _pick(rng, (
            "acc = acc + buf[0]", "ret.append(buf[-1])", "ret.append(len(buf))", "ret.append(list(buf))",
            "acc = acc * float(sum(buf))",
        ))  # fmt: skip
        return _s("argument_kinds", "a buffer argument (bytearray, array, numpy)", body, needs={"buf"})
    if "acc + sum" in body:
        ctx.kind = "float"
    return _s("argument_kinds", "a module argument", body, needs={"mod"})


# ---------------------------------------------------------------- torch's keyword names (and numpy's aliases)

KEYWORDS = [
    "acc = torch.sub(acc, other=acc * 2)",
    "acc = torch.add(acc, other=1, alpha=2)",
    "acc = acc.sub(other=1)",
    "acc = torch.mul(input=acc, other=2)",
    "acc = torch.sum(acc, axis=-1, keepdims=True) if acc.ndim else acc",
    "acc = torch.cat(tensors=[acc, acc], axis=0) if acc.ndim else acc",
    "acc = torch.clamp(input=acc, min=0)",
    "acc = torch.add(x1=acc, x2=acc)",
    "acc = torch.div(acc, other=2, rounding_mode='floor')",
    "acc = torch.maximum(acc, other=acc.flip(-1) if acc.ndim else acc)",
]


def keywords(rng, ctx):
    return _s("keywords", "torch's keyword names", _pick(rng, KEYWORDS))


# ---------------------------------------------------------------- copy and deepcopy inside the program

COPIES = [
    "ret.append(copy.deepcopy(acc))",
    "t{u} = copy.copy(x)\nacc = acc + t{u}",
    "ret.append(copy.deepcopy([acc, 1, 'a']))",
    "d{u} = copy.deepcopy({'k': acc})\nd{u}['k'].add_(1)\nret.append(d{u}['k'])",
    "ret.append(copy.deepcopy(m.lin)(torch.ones(4)))",
    "c{u} = copy.deepcopy(x)\nc{u}.mul_(2)\nret.append(c{u})",
]


def copies(rng, ctx):
    body = _pick(rng, COPIES)
    return _s("copies", "copy / deepcopy", body, needs={"owner"} if "m.lin" in body else ())


# ---------------------------------------------------------------- type checks, legacy tensor types

TYPE_CHECKS = [
    "ret.append(isinstance(x, torch.FloatTensor))",
    "ret.append(isinstance(acc, (torch.LongTensor, torch.DoubleTensor)))",
    "ret.append(x.type())",
    "ret.append(isinstance(x, torch.BoolTensor))",
    "ret.append(type(acc) is torch.Tensor)",
    "ret.append(torch.is_tensor(acc) and acc.is_floating_point())",
    "ret.append(x.dtype.is_floating_point)",
    "ret.append(torch.is_floating_point(input=x))",
    "ret.append(acc.is_complex())",
    "ret.append(x.is_leaf)",
    "if isinstance(x, torch.cuda.FloatTensor):\n    acc = acc + 1",
]


def type_checks(rng, ctx):
    if rng.random() < 0.2:
        ctx.kind = "float"
        return _s("type_checks", "legacy type conversion", "acc = acc.type(torch.DoubleTensor)")
    return _s("type_checks", "type check", _pick(rng, TYPE_CHECKS))


# ---------------------------------------------------------------- the foreach ops (optimizers use them)

FOREACH = [
    "ret.extend(torch._foreach_add([acc, acc * 2], 1.0))",
    "ret.extend(torch._foreach_mul([acc, acc], [2.0, 3.0]))",
    "t{u} = [acc * 1, acc + 1]\ntorch._foreach_add_(t{u}, 1.0)\nret.extend(t{u})",
    "ret.extend(torch._foreach_abs([acc, -acc]))",
    "t{u} = [acc * 1]\ntorch._foreach_mul_(t{u}, 0.5)\nacc = t{u}[0]",
    "ret.extend(torch._foreach_add([acc], [acc], alpha=2))",
]


def foreach(rng, ctx):
    body = _pick(rng, FOREACH)
    if "mul_(t" in body and ctx.kind != "float":
        ctx.kind = "float"
    return _s("foreach", "torch._foreach_* ops", body)


FAMILY_GENERATORS: dict[str, Callable[[random.Random, Ctx], Snippet]] = {
    "elementwise": elementwise,
    "reductions": reductions,
    "tensor_meta": tensor_meta,
    "python_numbers": python_numbers,
    "strings": strings,
    "globals": globals_values,
    "global_functions": global_functions,
    "containers": containers,
    "closures": closures,
    "objects": objects,
    "side_effects": side_effects,
    "inplace": inplace,
    "value_dependent": value_dependent,
    "eager_errors": eager_errors,
    "randomness": randomness,
    "iterators": iterators,
    "calls": calls,
    "torch_state": torch_state,
    "argument_kinds": argument_kinds,
    "copies": copies,
    "type_checks": type_checks,
    "foreach": foreach,
    "keywords": keywords,
    "generators": generators,
    "classes": classes,
    "control_flow": control_flow,
    "grad_modes": grad_modes,
    "contexts": contexts,
    "promotion": promotion,
    "aliasing": aliasing,
    "records": records,
    "formatting": formatting,
    "rebinding": rebinding,
    "helpers": helpers,
    "owner_attrs": owner_attrs,
    "protocols": protocols,
    "views": views,
    "integers": integers,
    "empties": empties,
    "layouts": layouts,
    "try_except": try_except,
    "containers_after": containers_after,
    "cached": cached,
    "scalars": scalars,
    "grad_mixes": grad_mixes,
    "loops": loops,
    "modules": modules,
    "autograd_functions": autograd_functions,
    "low_precision": low_precision,
    "wrappers": wrappers,
    "outputs": outputs,
    "optimizers": optimizers,
    "grad_accumulation": grad_accumulation,
    "value_flow": value_flow,
    "storage": storage,
    "returns": returns,
    "models": models,
}
