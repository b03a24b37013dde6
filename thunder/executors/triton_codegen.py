"""Python source of one Triton kernel for a region of prims (the ``triton`` executor's code generator).

A kernel computes every region output by *pulling*: a value is emitted at a tuple of symbolic
coordinates, one per dim of the value, each a coordinate variable of the kernel or ``"0"``;
``broadcast_in_dim`` only maps coordinates, so broadcasting costs no memory, and a region input
is loaded with its own strides (non-contiguous and expanded inputs need no copy). Two layouts:

- flat (no reduction): one program per ``BLOCK`` elements of the output shape, coordinates from
  the flat index; every output has that shape.
- rows (reductions over the last dim of one shape ``S``): one program per row of ``S``; row
  coordinates are scalars, the column is a block in a loop over the row (one iteration when
  ``BLOCK`` covers it). Each reduction is its own loop; values that do not depend on the column
  are computed once per row. Outputs have shape ``S`` or ``S[:-1]``. ``take_along_axis`` over
  the last dim with one index per row (cross-entropy's pick of the target's log-probability) is a
  reduction too: the row's element at the index. An index out of the row's bounds is flagged per
  row in an extra output (``Kernel.checks``), which the launcher turns into eager's error.

``reshape`` is generated where it only inserts or removes dims of size 1 (it maps coordinates,
as ``broadcast_in_dim`` does); an integer ``iota`` is its coordinate (nll_loss's backward compares
it with each row's target).

Low-precision (bfloat16, float16) ops compute in float32 and round after every prim, as eager
does; bfloat16 is rounded to nearest even by bit arithmetic (Triton's interpreter truncates).
``generate`` returns None for a region that does not fit these layouts: the executor declines it.

Layer: executors. Imports: core.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from thunder.core import prims
from thunder.core.proxies import TensorProxy
from thunder.core.symbol import BoundSymbol

__all__ = ["Kernel", "generate", "is_unit_reshape", "TL_DTYPES", "LOW_PRECISION"]

TL_DTYPES = {
    torch.bool: "tl.int1", torch.int8: "tl.int8", torch.uint8: "tl.uint8", torch.int16: "tl.int16",
    torch.int32: "tl.int32", torch.int64: "tl.int64", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16",
    torch.float32: "tl.float32", torch.float64: "tl.float64",
}  # fmt: skip
LOW_PRECISION = (torch.float16, torch.bfloat16)

# Elementwise prims by the expression they become; ``{0}``, ``{1}`` are the operands in the compute dtype.
UNARY_FLOAT = {
    prims.exp: "tl.exp({0})", prims.exp2: "tl.exp2({0})", prims.log: "tl.log({0})", prims.log2: "tl.log2({0})",
    prims.sin: "tl.sin({0})", prims.cos: "tl.cos({0})", prims.sqrt: "_sqrt({0})", prims.rsqrt: "tl.rsqrt({0})",
    prims.erf: "tl.erf({0})", prims.floor: "tl.floor({0})", prims.ceil: "tl.ceil({0})",
    prims.reciprocal: "({one} / {0})", prims.sigmoid: "({one} / ({one} + tl.exp(-{0})))",
    prims.isnan: "({0} != {0})", prims.isinf: "(tl.abs({0}) == float('inf'))",
    prims.isfinite: "(tl.abs({0}) < float('inf'))",
}  # fmt: skip
UNARY_NUMERIC = {prims.abs: "tl.abs({0})", prims.neg: "(-{0})"}
BINARY_NUMERIC = {
    prims.add: "({0} + {1})", prims.sub: "({0} - {1})", prims.mul: "({0} * {1})",
    prims.maximum: "_maximum({0}, {1})", prims.minimum: "_minimum({0}, {1})",
    prims.eq: "({0} == {1})", prims.ne: "({0} != {1})", prims.lt: "({0} < {1})", prims.le: "({0} <= {1})",
    prims.gt: "({0} > {1})", prims.ge: "({0} >= {1})",
}  # fmt: skip
BINARY_FLOAT = {prims.div: "({0} / {1})"}  # integer division truncates: not generated
BINARY_INTEGRAL = {prims.bitwise_and: "({0} & {1})", prims.bitwise_or: "({0} | {1})", prims.bitwise_xor: "({0} ^ {1})"}
REDUCTIONS = {prims.sum: "sum", prims.amax: "max", prims.amin: "min", prims.var: "var", prims.var_mean: "var_mean"}
_COMBINE = {"sum": "_add", "max": "_maximum", "min": "_minimum"}
_COMPARISONS = {prims.eq, prims.ne, prims.lt, prims.le, prims.gt, prims.ge, prims.isnan, prims.isinf, prims.isfinite}

# Helpers every kernel module defines: NaN-propagating extrema (torch.maximum/amax propagate NaN,
# Triton's do not promise to), a correctly rounded sqrt, float32 -> bfloat16 rounding to nearest
# even (as c10 does), and the sum's combine function. Kernels call no @triton.jit function of
# triton.language (tl.sum is one): those are made for one mode when triton is imported, and
# triton may have been imported before TRITON_INTERPRET was set.
_PRELUDE = """import triton
import triton.language as tl


@triton.jit
def _add(a, b):
    return a + b


@triton.jit
def _maximum(a, b):
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _minimum(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def _sqrt(x):
    if x.dtype == tl.float64:
        return tl.sqrt(x)
    return tl.sqrt_rn(x)  # tl.sqrt of float32 is approximate on GPUs


@triton.jit
def _to_bf16(x):
    bits = x.to(tl.uint32, bitcast=True)
    bits = bits + (((bits >> 16) & 1) + 0x7FFF)
    rounded = (bits >> 16).to(tl.uint16).to(tl.bfloat16, bitcast=True)
    return tl.where(x != x, x.to(tl.bfloat16), rounded)
"""


@dataclass(frozen=True)
class Kernel:
    """A generated kernel: its source and how to call it.

    Arguments, in order: for each tensor input its pointer and strides, for each of its outputs its
    pointer and strides, with ``checks`` the pointer to one int8 per row (1: an index out of
    bounds), then the domain's sizes, then the ``BLOCK`` constexpr. ``rows``: one
    program per row of the domain (else one per ``BLOCK`` elements of it).
    """

    source: str
    name: str
    tensor_inputs: tuple[int, ...]  # indices into the region's inputs
    outputs: tuple[int, ...]  # indices into the region's outputs
    domain: tuple[int, ...]
    rows: bool
    checks: int = 0  # rows kernels that pick by index: the last argument before the sizes is a per-row flag


class _Decline(Exception):
    """The region does not fit a kernel layout."""


def generate(bound_symbols: list[BoundSymbol], inputs: list, outputs: list) -> list[Kernel] | None:
    """Kernels computing ``outputs`` from ``inputs`` by ``bound_symbols`` (prims), or None if none fits.

    One kernel per output shape (each recomputes what it needs); with reductions, one rows kernel
    writes the outputs of the reduced shape ``S`` and of ``S[:-1]``.
    """
    reduced = {tuple(b.args[0].shape) for b in bound_symbols if b.sym in REDUCTIONS or b.sym is prims.take_along_axis}
    if len(reduced) > 1 or not all(isinstance(o, TensorProxy) for o in outputs):
        return None
    groups: dict[tuple, list[int]] = {}
    for j, o in enumerate(outputs):
        shape = tuple(o.shape)
        rows = next((s for s in reduced if shape in (s, s[:-1])), None)
        groups.setdefault((shape, False) if rows is None else (rows, True), []).append(j)
    try:
        kernels = [
            _Generator(bound_symbols, inputs, [outputs[j] for j in js], domain, rows).kernel(tuple(js))
            for (domain, rows), js in groups.items()
        ]
    except _Decline:
        return None
    return kernels if all(k.tensor_inputs for k in kernels) else None  # (the device comes from an input)


class _Generator:
    def __init__(self, bound_symbols, inputs, outputs, domain: tuple[int, ...], rows: bool):
        self.producer = {o.name: b for b in bound_symbols for o in b.flat_proxy_outs}
        self.inputs = inputs
        self.input_index = {p.name: i for i, p in enumerate(inputs)}
        self.outputs = outputs
        self.loaded: dict[int, None] = {}  # tensor inputs read, in order
        self.constants: dict[str, str] = {}  # literal -> name
        self.top: list[str] = []  # the kernel body outside loops
        self.bodies: list[tuple[list[str], dict]] = []  # the loops being written: (lines, memo)
        self.memo: dict = {}  # (value, coords) -> variable, outside loops
        self.count = 0
        self.out_of_bounds: list[str] = []  # per-row conditions of the picks by index
        self.domain, self.rows = domain, rows
        n = len(domain)
        self.row_coords = tuple(f"c{k}" for k in range(n - 1)) if self.rows else ()
        self.full_coords = (*self.row_coords, "col") if self.rows else tuple(f"c{k}" for k in range(n))

    # --- naming ---
    def var(self, prefix="v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def lines(self) -> list[str]:
        return self.bodies[-1][0] if self.bodies else self.top

    def constant(self, value, dtype: torch.dtype) -> str:
        """A kernel-module constant ``value`` as a scalar of ``dtype`` (exact for float64)."""
        if type(value) not in (bool, int, float) or (type(value) is float and not dtype.is_floating_point):
            raise _Decline  # complex numbers; a float operand of an integer op is not a prim's
        low = dtype in LOW_PRECISION
        if low:  # rounded here as eager rounds it; then exact in float32 (the interpreter truncates to bfloat16)
            value = torch.tensor(value, dtype=torch.float64).to(dtype).item()
        literal = f"float({str(value)!r})" if type(value) is float else repr(value)
        k = self.constants.setdefault(literal, f"K{len(self.constants)}")
        return (
            f"tl.full([], {k}, tl.float32).to({TL_DTYPES[dtype]})" if low else f"tl.full([], {k}, {TL_DTYPES[dtype]})"
        )

    # --- emission ---
    def emit(self, value, coords: tuple[str, ...]) -> str:
        """A variable holding ``value`` at ``coords`` (in its own dtype), emitting what it needs."""
        in_loop = "col" in coords
        if in_loop and not self.bodies:
            raise _Decline
        memo = self.bodies[-1][1] if in_loop else self.memo
        key = (value.name, coords)
        found = memo.get(key)
        if found is not None:
            return found
        producer = self.producer.get(value.name)
        if producer is not None and producer.sym is prims.broadcast_in_dim:
            a, shape, bdims = producer.args[:3]
            memo[key] = v = self.emit(
                a, tuple(coords[d] if a.shape[i] == shape[d] else "0" for i, d in enumerate(bdims))
            )
            return v
        if producer is not None and producer.sym is prims.reshape:
            a = producer.args[0]
            memo[key] = v = self.emit(a, _unit_reshape_coords(tuple(a.shape), tuple(value.shape), coords))
            return v
        saved = self.bodies
        if not in_loop:
            self.bodies = []  # what does not depend on the column is computed once per row
        try:
            expr = self.expression(value, coords)
            v = self.var()
            self.lines().append(f"{v} = {expr}")
        finally:
            self.bodies = saved
        memo[key] = v
        return v

    def expression(self, value, coords) -> str:
        if value.name in self.input_index:
            return self.load(value, coords)
        bsym = self.producer[value.name]
        sym, args = bsym.sym, bsym.args
        if sym in REDUCTIONS:
            return self.reduction(bsym, value, coords)
        if sym is prims.take_along_axis:
            return self.pick(bsym, coords)
        if sym is prims.iota:  # start + step * the coordinate (integers only: see _accepts)
            dtype = bsym.kwargs["dtype"]
            start, step = (self.constant(bsym.kwargs[k], torch.int64) for k in ("start", "step"))
            return self.convert(f"({start} + {step} * {coords[0]}.to(tl.int64))", torch.int64, dtype)
        if sym is prims.convert_element_type:
            return self.convert(self.emit(args[0], coords), args[0].dtype, args[1])
        if sym is prims.where:
            pred = self.operand(args[0], coords, torch.bool)
            a, b = (self.operand(x, coords, value.dtype) for x in args[1:])
            return f"tl.where({pred}, {a}, {b})"
        return self.elementwise(bsym, coords)

    def operand(self, x, coords, dtype: torch.dtype) -> str:
        """A tensor operand at ``coords`` or a number as a scalar of ``dtype``."""
        if isinstance(x, TensorProxy):
            return self.emit(x, coords)
        return self.constant(x, dtype)

    def elementwise(self, bsym: BoundSymbol, coords) -> str:
        tensors = [a for a in bsym.args if isinstance(a, TensorProxy)]
        dtype = tensors[0].dtype
        compute = torch.float32 if dtype in LOW_PRECISION else dtype
        ops = []
        for a in bsym.args:
            x = self.operand(a, coords, compute)
            ops.append(f"{x}.to(tl.float32)" if isinstance(a, TensorProxy) and compute is not dtype else x)
        template = {**UNARY_FLOAT, **UNARY_NUMERIC, **BINARY_NUMERIC, **BINARY_FLOAT, **BINARY_INTEGRAL}[bsym.sym]
        expr = template.format(*ops, one=self.constant(1, compute) if "{one}" in template else "")
        out = bsym.output.dtype
        return expr if bsym.sym in _COMPARISONS else self.convert(expr, compute, out)

    def convert(self, x: str, src: torch.dtype, dst: torch.dtype) -> str:
        if src is dst:
            return x
        if dst is torch.bool:
            return f"({x} != 0)"
        if src is torch.bfloat16:
            x, src = f"{x}.to(tl.float32)", torch.float32
        if dst is torch.bfloat16:
            return f"_to_bf16({x}.to(tl.float32))"
        return x if src is dst else f"{x}.to({TL_DTYPES[dst]})"

    def load(self, value, coords) -> str:
        i = self.input_index[value.name]
        if not isinstance(value, TensorProxy):
            raise _Decline  # a number computed at run time
        self.loaded.setdefault(i, None)
        terms = [f"{c} * in{i}_s{k}" for k, c in enumerate(coords) if c != "0"]
        ptr = " + ".join([f"in{i}", *terms])
        block = any(c == "col" or (not self.rows and c != "0") for c in coords)
        return f"tl.load({ptr}, mask=mask)" if block else f"tl.load({ptr})"

    def reduction(self, bsym: BoundSymbol, value, coords) -> str:
        if not self.rows or tuple(coords) != self.row_coords:
            raise _Decline  # reduced values used at other rows than their own
        a, kind, n = bsym.args[0], REDUCTIONS[bsym.sym], f"D{len(self.domain) - 1}"
        compute = torch.float32 if a.dtype in LOW_PRECISION else a.dtype
        if kind not in ("var", "var_mean"):
            return self.convert(self.accumulate(a, kind, compute, "{0}"), compute, a.dtype)
        # Two passes: the mean, then the sum of squared deviations from it.
        mean = self.memo.get((a.name, "mean"))
        if mean is None:
            mean = self.memo[a.name, "mean"] = self.var("mean")
            self.top.append(f"{mean} = {self.accumulate(a, 'sum', compute, '{0}')} / {n}")
        if kind == "var_mean" and value.name == bsym.output[1].name:
            return self.convert(mean, compute, a.dtype)
        squares = self.accumulate(a, "sum", compute, f"({{0}} - {mean}) * ({{0}} - {mean})")
        divisor = f"tl.maximum({n} - {self.constant(bsym.kwargs['correction'], compute)}, 0)"  # as torch
        return self.convert(f"{squares} / {divisor}", compute, a.dtype)

    def pick(self, bsym: BoundSymbol, coords) -> str:
        """``take_along_axis(a, index, last dim)`` with one index per row: the row's element at the
        index, as a max over the row of that element and -inf elsewhere (exact, NaN and -0.0 kept)."""
        if not self.rows or tuple(coords) != (*self.row_coords, "0"):
            raise _Decline
        a, index = bsym.args[:2]
        i = self.emit(index, coords)
        self.out_of_bounds.append(f"({i} < 0) | ({i} >= D{len(self.domain) - 1})")
        compute = torch.float32 if a.dtype in LOW_PRECISION else a.dtype
        picked = self.accumulate(a, "max", compute, "{0}", where=f"mask & (col == {i})")
        return self.convert(picked, compute, a.dtype)

    def accumulate(self, a, kind: str, compute: torch.dtype, element: str, where: str = "mask") -> str:
        """A variable with the ``kind`` reduction of ``element`` (a template of ``a``'s element in
        ``compute``) over the row, in ``compute``."""
        identity = {"sum": "0", "max": "float('-inf')", "min": "float('inf')"}[kind]
        combine = _COMBINE[kind] + "({0}, {1})"
        acc = self.var("acc")
        self.top.append(f"{acc} = tl.full([BLOCK], {identity}, {TL_DTYPES[compute]})")
        body: list[str] = []
        self.bodies.append((body, {}))
        try:
            x = self.emit(a, self.full_coords)
        finally:
            self.bodies.pop()
        x = element.format(x if compute is a.dtype else f"{x}.to(tl.float32)")
        self.loop(body + [f"{acc} = " + combine.format(acc, f"tl.where({where}, {x}, {identity})")])
        total = self.var("total")
        self.top.append(f"{total} = tl.reduce({acc}, 0, {_COMBINE[kind]})")
        return total

    def loop(self, body: list[str]) -> None:
        self.top.append(f"for start in range(0, D{len(self.domain) - 1}, BLOCK):")
        self.top.append("    col = start + tl.arange(0, BLOCK)")
        self.top.append(f"    mask = col < D{len(self.domain) - 1}")
        self.top.extend("    " + line for line in body)

    # --- the kernel ---
    def kernel(self, outputs: tuple[int, ...]) -> Kernel:
        n, name = len(self.domain), "kernel"
        full = [j for j, o in enumerate(self.outputs) if tuple(o.shape) == self.domain]
        per_row = [j for j, o in enumerate(self.outputs) if tuple(o.shape) != self.domain]
        stores = []
        if self.rows:
            for j in per_row:
                v = self.emit(self.outputs[j], self.row_coords)
                self.top.append(self._store(j, self.row_coords, v))
            body: list[str] = []
            self.bodies.append((body, {}))
            for j in full:
                v = self.emit(self.outputs[j], self.full_coords)
                stores.append(self._store(j, self.full_coords, v))
            self.bodies.pop()
            if full:
                self.loop(body + stores)
        else:
            for j in full:
                v = self.emit(self.outputs[j], self.full_coords)
                self.top.append(self._store(j, self.full_coords, v))

        tensor_inputs = tuple(sorted(self.loaded))
        params = []
        for i in tensor_inputs:
            params += [f"in{i}", *(f"in{i}_s{k}" for k in range(self.inputs[i].ndim))]
        for j, o in enumerate(self.outputs):
            params += [f"out{j}", *(f"out{j}_s{k}" for k in range(o.ndim))]
        if self.out_of_bounds:
            params.append("checks")
            self.top.append(f"tl.store(checks + pid, ({' | '.join(self.out_of_bounds)}).to(tl.int8))")
        params += [f"D{k}" for k in range(n)]
        head = ["pid = tl.program_id(0).to(tl.int64)"]
        coords = self.row_coords if self.rows else self.full_coords
        if self.rows:
            index = "pid"
        else:
            head += [
                "index = pid * BLOCK + tl.arange(0, BLOCK)",
                "mask = index < " + " * ".join(["1", *(f"D{k}" for k in range(n))]),
            ]
            index = "index"
        for k in reversed(range(len(coords))):
            head.append(f"{coords[k]} = {index} % D{k}")
            if k:
                head.append(f"{index} = {index} // D{k}")
        lines = [
            *(f"{k} = tl.constexpr({literal})" for literal, k in self.constants.items()),
            "",
            "",
            "@triton.jit",
            f"def {name}({', '.join([*params, 'BLOCK: tl.constexpr'])}):",
        ]
        lines += ["    " + line for line in head + self.top]
        source = _PRELUDE + "\n" + "\n".join(lines) + "\n"
        return Kernel(source, name, tensor_inputs, outputs, self.domain, self.rows, len(self.out_of_bounds))

    def _store(self, j: int, coords, v: str) -> str:
        """Stores ``v`` into output ``j`` at ``coords``: a block (``v`` may be a scalar) or one element."""
        ptr = " + ".join([f"out{j}", *(f"{c} * out{j}_s{k}" for k, c in enumerate(coords))])
        block = "col" in coords or (not self.rows and coords)
        return f"tl.store({ptr}, tl.broadcast_to({v}, [BLOCK]), mask=mask)" if block else f"tl.store({ptr}, {v})"


def is_unit_reshape(src: tuple[int, ...], dst: tuple[int, ...]) -> bool:
    """Whether a reshape from ``src`` to ``dst`` only inserts or removes dims of size 1."""
    return [d for d in src if d != 1] == [d for d in dst if d != 1]


def _unit_reshape_coords(src: tuple[int, ...], dst: tuple[int, ...], coords: tuple[str, ...]) -> tuple[str, ...]:
    """The coordinates in ``src`` of ``coords`` in ``dst``, for a unit reshape (others decline)."""
    if not is_unit_reshape(src, dst):
        raise _Decline
    it = iter(c for c, d in zip(coords, dst) if d != 1)
    return tuple("0" if d == 1 else next(it) for d in src)
