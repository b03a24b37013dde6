"""Call arguments as Python source.

Every argument is written as an expression (``torch.randn(4, 3).transpose(-1, -2)``,
``float('nan')``, ``iter([1, 2])``), evaluated after ``torch.manual_seed(call.seed)`` in each
world, so eager and thunder get equal but distinct objects, and a failing call prints as a
reproducer with nothing hidden.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

DTYPES_BY_KIND = {
    "float": ("float32", "float64"),
    "int": ("int64",),
    "bool": ("bool",),
}
LAYOUTS = ("contiguous", "transposed", "sliced", "expanded", "offset", "channels_last")


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str  # "float32", "float64", "int64", "bool"
    layout: str = "contiguous"
    requires_grad: bool = False
    with_grad: bool = False  # a leaf that requires grad and already has a .grad
    values: str = "random"  # or an edge case of VALUES (equal values, infinities, nans)

    def expr(self) -> str:
        shape, layout = self.shape, self.layout
        if layout == "transposed" and len(shape) >= 2:
            base = _base(shape[:-2] + (shape[-1], shape[-2]), self.dtype) + ".transpose(-1, -2)"
        elif layout == "sliced" and len(shape) >= 1:
            base = _base(shape[:-1] + (shape[-1] * 2,), self.dtype) + "[..., ::2]"
        elif layout == "expanded" and len(shape) >= 1 and shape[0] > 1:
            base = _base((1,) + shape[1:], self.dtype) + ".expand" + _tuple(shape)
        elif layout == "channels_last" and len(shape) == 3:  # one image of a channels_last batch
            base = _base((1,) + shape, self.dtype) + ".contiguous(memory_format=torch.channels_last)[0]"
        elif layout == "offset" and len(shape) >= 1:
            base = _base((shape[0] + 1,) + shape[1:], self.dtype) + "[1:]"
        else:
            base = _base(shape, self.dtype)
        base = _with_values(base, self.values, self.dtype)
        if self.requires_grad and self.dtype.startswith("float"):
            base += ".requires_grad_()"
            if self.with_grad:
                base = f"(lambda t: setattr(t, 'grad', torch.ones_like(t)) or t)({base})"
        return base


#: Edge values, as a function of the random tensor's expression (floats only; ints get equal values).
VALUES = {
    "equal": "torch.full_like({t}, 1.5)",
    "inf": "{t}.masked_fill({t} > 0.5, float('inf'))",
    "-inf": "{t}.masked_fill({t} < -0.5, -float('inf'))",
    "nan": "{t}.masked_fill({t} > 0.8, float('nan'))",
    "zeros": "torch.zeros_like({t})",
}


def _with_values(base: str, values: str, dtype: str) -> str:
    if values == "random" or dtype == "bool":
        return base
    if not dtype.startswith("float"):
        return f"torch.full_like({base}, 2)" if values == "equal" else base
    return f"(lambda t: {VALUES[values].format(t='t')})({base})"


def _tuple(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


def _base(shape: tuple[int, ...], dtype: str) -> str:
    dims = _tuple(shape)
    if dtype == "float32":
        return f"torch.randn({dims})"
    if dtype == "float64":
        return f"torch.randn({dims}, dtype=torch.float64)"
    if dtype == "int64":
        return f"torch.randint(-3, 4, {dims})"
    if dtype == "bool":
        return f"torch.randint(0, 2, {dims}).bool()"
    raise ValueError(dtype)


NUMBERS = {
    "int": ("0", "1", "2", "3", "-1", "5", "7"),
    "float": ("0.5", "2.0", "-1.5", "0.0", "-0.0", "3.0", "float('nan')", "float('inf')", "1e-3", "-float('inf')"),
    "bool": ("True", "False"),
    "tensor": ("torch.tensor(2.0)", "torch.tensor(3)", "torch.tensor([1.5, -1.0])[0]"),
}
NUMBERS["any"] = NUMBERS["int"] + NUMBERS["float"] + NUMBERS["bool"]
NUMBERS["any+tensor"] = NUMBERS["any"] + NUMBERS["tensor"]
STRINGS = ("'add'", "'mul'", "'sub'", "''", "'relu'", "'sin'", "'m'")
ITERABLES = (
    "iter([1, 2])",
    "iter([3, 4, 5])",
    "(v for v in [1.5, 2.5])",
    "(i * 2 for i in range(3))",
    "[1, 2.5]",
    "range(3)",
    "map(float, [1, 2])",
    "iter(())",
    "zip([1, 2], [3, 4])",
)
LISTS = ("[]", "[1]", "[1, 2.0]", "['a']")
SLICES = ("slice(0, 2)", "slice(1, None)", "slice(None, None, 2)", "slice(3, 8, 2)", "slice(-2, None)", "slice(None)")
# Made afresh for each call after ``torch.manual_seed(call.seed)``: each call's module has other weights.
MODULES = (
    "torch.nn.Linear(4, 4)", "torch.nn.Linear(4, 4, bias=False)",
    "torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())", "torch.nn.Linear(4, 4).eval()",
)  # fmt: skip


# Buffers the program reads natively (``buf[0]``): made afresh for each call.
BUFFERS = (
    "bytearray([1, 2])", "bytearray([3, 2])", "array.array('i', [1, 2])", "array.array('d', [1.5, 2.0])",
    "numpy.array([1.0, 2.0])", "numpy.array([4, 2])", "memoryview(bytearray([5, 6]))",
)  # fmt: skip

# A second argument made from the first (``(_x := ...)`` in the call's arguments): the same tensor, views, a copy.
ALIASES = (
    "_x", "_x", "_x.detach()", "_x.view_as(_x)", "_x.reshape(-1)", "_x[..., :1] if _x.ndim else _x", "_x.clone()",
    "_x.mT if _x.ndim >= 2 else _x", "_x.expand(2, *_x.shape)", "_x.unsqueeze(0)", "_x.detach().flip(-1) if _x.ndim else _x",
)  # fmt: skip


class InputDrawer:
    """Draws the arguments of successive calls of one program.

    ``rank`` is the program's usual number of dims, ``kind`` its usual dtype kind; each call
    repeats the previous one's metadata often (to exercise cache hits) and otherwise varies
    shape, rank, dtype, layout and requires_grad."""

    def __init__(self, rng: random.Random, *, kind: str, rank: int, n_pool: str, last_dim: int | None, min_rank: int = 0):
        self.rng = rng
        self.kind = kind
        self.rank = max(rank, min_rank)
        self.min_rank = min_rank
        self.n_pool = n_pool
        self.last_dim = last_dim
        self.prev: dict[str, str] = {}
        self.prev_x: TensorSpec | None = None

    def x(self) -> TensorSpec:
        r = self.rng
        if self.prev_x is not None and r.random() < 0.45:
            return self.prev_x
        rank = self.rank
        if r.random() < 0.15:
            rank = max(self.min_rank, rank + r.choice((-1, 1)))
        if self.last_dim is not None:
            rank = max(rank, 1)
        shape = [r.choice((1, 2, 3, 4)) for _ in range(rank)]
        if shape and r.random() < 0.04:
            shape[r.randrange(len(shape))] = 0  # empty
        if self.last_dim is not None:
            shape[-1] = self.last_dim
        kind = self.kind
        if r.random() < 0.1:
            kind = r.choice(tuple(DTYPES_BY_KIND))
        dtype = r.choice(DTYPES_BY_KIND[kind])
        layout = "contiguous" if r.random() < 0.5 else r.choice(LAYOUTS)
        if self.last_dim is not None and layout == "transposed":
            layout = "contiguous"
        rg = dtype.startswith("float") and r.random() < 0.3
        values = "random" if r.random() < 0.85 else r.choice(tuple(VALUES))
        spec = TensorSpec(tuple(shape), dtype, layout, rg, with_grad=rg and r.random() < 0.3, values=values)
        self.prev_x = spec
        return spec

    def w(self, x: TensorSpec) -> TensorSpec:
        """A second tensor that broadcasts against x."""
        r = self.rng
        shape = list(x.shape)
        if shape and r.random() < 0.3:
            shape = shape[r.randrange(len(shape)) :]
        shape = [1 if r.random() < 0.25 else d for d in shape]
        layout = "contiguous" if r.random() < 0.7 else r.choice(LAYOUTS)
        rg = x.dtype.startswith("float") and r.random() < 0.2
        return TensorSpec(tuple(shape), x.dtype, layout, rg)

    def _repeat_or(self, name: str, choices: tuple[str, ...]) -> str:
        if name in self.prev and self.rng.random() < 0.45:
            return self.prev[name]
        value = self.rng.choice(choices)
        self.prev[name] = value
        return value

    def n(self) -> str:
        pool = self.n_pool
        if self.rng.random() < 0.1:
            pool = "any"
        return self._repeat_or("n", NUMBERS[pool])

    def s(self) -> str:
        return self._repeat_or("s", STRINGS)

    def it(self) -> str:
        return self._repeat_or("it", ITERABLES)

    def lst(self) -> str:
        return self._repeat_or("lst", LISTS)

    def sl(self) -> str:
        return self._repeat_or("sl", SLICES)

    def mod(self) -> str:
        return self._repeat_or("mod", MODULES)

    def buf(self) -> str:
        return self._repeat_or("buf", BUFFERS)

    def y(self) -> str:
        """A tensor that shares memory with x (``_x``, named by x's expression): x itself, a view, or a copy."""
        return self._repeat_or("y", ALIASES)

    def rec(self, x: TensorSpec) -> str:
        """A NamedTuple (``_Rec``, which the snippet that reads it defines) holding a tensor and an int."""
        return f"_Rec({self.w(x).expr()}, {self.rng.choice((0, 1, 2, 3))})"

    def dc(self, x: TensorSpec) -> str:
        """A dataclass (``_DC``) holding a tensor, a float and a list."""
        return f"_DC({self.w(x).expr()}, {self.rng.choice(('2.0', '0.5', '-1.0'))})"
