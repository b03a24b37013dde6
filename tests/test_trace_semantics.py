"""The trace computes what eager computes: shapes, layouts, CSE under mutation, dtype rules,
``Tensor.real``/``.imag``, formatting of tensors and ``.grad`` inside a jitted function,
each compared with eager PyTorch."""

from __future__ import annotations

import inspect
import itertools

import pytest
import torch

import thunder
from thunder.core import proxies
from thunder.core.errors import ThunderError
from thunder.core.interpreter import make_opaque
from thunder.core.proxies import SymbolicSize, TensorProxy, tensorproxy_from_tensor
from thunder.core.trace import TraceCtx, tracectx
from thunder.torch import elementwise, nn_activations
from thunder.torch.base import symbol_to_torch

CACHES = ["constant values", "symbolic values"]


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, (tuple, list)):
        return type(a) is type(b) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


# --- shapes ---------------------------------------------------------------------------------


@pytest.mark.parametrize("cache", CACHES)
def test_shape_and_size_are_torch_size(cache):
    def f(x):
        return isinstance(x.shape, torch.Size), isinstance(x.size(), torch.Size), isinstance(x.shape[1:], torch.Size)

    jf = thunder.jit(f, cache=cache)
    x = torch.randn(2, 3)
    assert jf(x) == f(x) == (True, True, True)


def test_shape_is_exactly_torch_size_for_constant_values():
    def f(x):
        return type(x.shape) is torch.Size, type(x.size()) is torch.Size, x.size(1), x.size(-1)

    x = torch.randn(2, 3)
    assert thunder.jit(f)(x) == f(x) == (True, True, 3, 3)


def test_symbolic_shape_keeps_its_dims_symbolic():
    """``x.shape.numel()`` and slices follow the input's shape: no silent specialisation."""

    def f(x):
        s = x.shape
        return x.reshape(s[1], s[0]) * s.numel() + s[1:][0]

    jf = thunder.jit(f, cache="symbolic values")
    for shape in ((2, 3), (4, 5), (3, 7)):
        x = torch.randn(shape)
        torch.testing.assert_close(jf(x), f(x))
    assert thunder.cache_misses(jf) == 1


def test_symbolic_size_type():
    from thunder.core.symbolic import SymInt, recording_constraints

    with recording_constraints() as cs:
        s = proxies.as_size((SymInt(3, "a_0"), 4))
        assert isinstance(s, SymbolicSize) and isinstance(s, torch.Size)
        assert s.numel().expr == "(a_0 * 4)"  # 1 * a_0 is a_0
        assert isinstance(s[:1], SymbolicSize) and isinstance(s + (5,), SymbolicSize)
        assert isinstance((5,) + s, SymbolicSize) and isinstance(s * 2, SymbolicSize)
    assert list(cs) == []  # nothing above concretised a dim
    assert repr(s) == "torch.Size([3, 4])"
    assert type(proxies.as_size((3, 4))) is torch.Size


def test_torch_size_lookaside_for_real_sizes_holding_symbols():
    from thunder.core.symbolic import SymInt

    s = torch.Size() + (SymInt(3, "a_0"), 4)
    replacement = proxies.torch_size_lookaside(s.numel)
    assert replacement is not None and replacement().expr == "(a_0 * 4)"
    assert proxies.torch_size_lookaside(torch.Size([3]).numel) is None


# --- strides, contiguity, storage offset ----------------------------------------------------

_LAYOUT_PROGRAMS = {
    "stride": lambda x: x.stride(),
    "stride_dim": lambda x: (x.stride(0), x.stride(-1)),
    "is_contiguous": lambda x: x.is_contiguous(),
    "storage_offset": lambda x: x.storage_offset(),
    "elementwise": lambda x: (x + 1).stride(),
    "elementwise_contiguous": lambda x: (x * 2).is_contiguous(),
    "t": lambda x: x.t().stride(),
    "t_elementwise": lambda x: (x.t() + 1).stride(),
    "slice_offset": lambda x: x[:, 1:].storage_offset(),
    "step_slice": lambda x: x[::2].stride(),
    "contiguous": lambda x: x.contiguous().stride(),
    "contiguous_offset": lambda x: x[1:].contiguous().storage_offset(),
    "sum": lambda x: x.sum(0).stride(),
    "matmul": lambda x: (x @ x.t()).stride(),
    "reshape": lambda x: x.reshape(-1).is_contiguous(),
    "permute": lambda x: x.unsqueeze(0).permute(2, 0, 1).stride(),
    "expand": lambda x: x[:1].expand(5, -1).stride(),
    "zeros": lambda x: torch.zeros(3, 4).stride(),
    "zeros_like": lambda x: torch.zeros_like(x).stride(),
    "empty_like": lambda x: torch.empty_like(x).stride(),
    "to_dtype": lambda x: x.to(torch.float64).stride(),
    "clone": lambda x: x.clone().stride(),
    "inplace": lambda x: x.clone().add_(1).stride(),
    "cat": lambda x: torch.cat([x, x]).stride(),
    "where": lambda x: torch.where(x > 0, x, 0.0).stride(),
    "softmax": lambda x: torch.softmax(x, -1).stride(),
    "advanced_index": lambda x: x[torch.tensor([0, 1])].stride(),
    "branch_on_layout": lambda x: x.contiguous() * 2 if not x.is_contiguous() else x + 1,
}


def _layout_inputs():
    return {
        "contiguous": torch.randn(4, 6),
        "transposed": torch.randn(6, 4).t(),
        "sliced": torch.randn(8, 12)[::2, 1:7],
        "offset": torch.randn(5, 6)[1:],
    }


@pytest.mark.parametrize("program", list(_LAYOUT_PROGRAMS))
def test_layout_queries_match_eager(program):
    f = _LAYOUT_PROGRAMS[program]
    for name, x in _layout_inputs().items():
        expected = f(x)
        got = thunder.jit(f)(x)
        assert _same(got, expected), (name, got, expected)


def _layout_sequence():
    """Inputs one jitted function sees in turn: layouts and shapes change between calls, including
    degenerate strides of size-1 dims (where meta tensors and eager disagree)."""
    return [
        torch.randn(4, 6),
        torch.randn(6, 4).t(),
        torch.randn(8, 12)[::2, 1:7],
        torch.randn(5, 6)[1:],
        torch.randn(2, 6),
        torch.randn(6, 2).t(),
        torch.randn(6, 1).t(),
        torch.randn(1, 6),
        torch.randn(3, 5),
        torch.randn(5, 3).t(),
        torch.randn(4, 6),
    ]


@pytest.mark.parametrize("cache", CACHES)
@pytest.mark.parametrize("program", list(_LAYOUT_PROGRAMS))
def test_layout_answers_follow_each_call(program, cache):
    """The prologue checks the strides the trace depended on: a cached trace is never reused for
    another layout with a different answer."""
    f = _LAYOUT_PROGRAMS[program]
    jf = thunder.jit(f, cache=cache)
    for x in _layout_sequence():
        if program == "advanced_index" and x.shape[0] < 2:
            continue  # the index is out of bounds: a data-dependent error, not a layout
        assert _same(jf(x), f(x)), (tuple(x.shape), x.stride())


def test_degenerate_strides_match_eager():
    x = torch.randn(6, 1).t()  # shape (1, 6), strides (1, 1)

    def f(x):
        return (x + 1).stride(), (x.t() + 1).stride(), torch.empty_like(x).stride(), x.t().contiguous().stride()

    assert thunder.jit(f)(x) == f(x)
    y = torch.randn(1, 6)
    assert thunder.jit(f)(y) == f(y)


def test_degenerate_strides_of_a_large_tensor_match_eager():
    """Only the op that reads the degenerate strides is replayed on the CPU (Note [Ambiguous layouts])."""
    x = torch.randn(100_000, 1).t()

    def f(x):
        return (x + 1).stride()

    assert thunder.jit(f)(x) == f(x)
    assert thunder.jit(lambda x: x.stride())(x) == x.stride()  # an input's own strides are known


def test_degenerate_strides_of_an_op_too_large_to_replay_raise_instead_of_guessing(monkeypatch):
    monkeypatch.setattr(thunder.torch.layout, "_CPU_REPLAY_LIMIT", 1000)
    x = torch.randn(1000, 1).t()

    def f(x):
        return (x + 1).stride()

    with pytest.raises(ThunderError, match="not known while tracing.*device-dependent.*too large"):
        thunder.jit(f)(x)


def test_input_proxy_records_its_strides_and_whether_they_were_read():
    x = torch.randn(6, 4).t()[1:]
    with tracectx(TraceCtx()):
        p = tensorproxy_from_tensor(x)
        assert (p.strides, p.offset, p.strides_read) == ((1, 4), 1, False)
        assert p.is_contiguous() is False
        assert p.strides_read


def test_layout_of_intermediate_marks_the_inputs_it_depends_on():
    def f(x, y):
        return (x + 1).is_contiguous(), y * 2

    jf = thunder.jit(f)
    jf(torch.randn(3, 4).t(), torch.randn(3))
    # the tracer's proxies for the inputs are the computation's parameters
    x_p, y_p = thunder.last_traces(jf)[0].args[:2]
    assert x_p.strides_read and not y_p.strides_read


def test_cached_trace_is_not_reused_for_other_strides():
    def f(x):
        return x + 1 if x.is_contiguous() else x - 1

    jf = thunder.jit(f)
    for x in (torch.randn(3, 4), torch.randn(4, 3).t(), torch.randn(3, 4)):
        torch.testing.assert_close(jf(x), f(x))


def test_layout_under_symbolic_values():
    f = _LAYOUT_PROGRAMS["t_elementwise"]
    x = torch.randn(6, 4).t()
    assert thunder.jit(f, cache="symbolic values")(x) == f(x)


def test_unknown_layout_raises_clearly():
    with tracectx(TraceCtx()):
        p = TensorProxy(shape=(2, 3), dtype=torch.float32, device=torch.device("cpu"))
        with pytest.raises(ThunderError, match=r"strides of tensor .* are not known while tracing.*contiguous\(\)"):
            p.stride()


def test_contiguous_still_works_on_any_input():
    def f(x):
        return x.contiguous().view(-1)

    for x in _layout_inputs().values():
        torch.testing.assert_close(thunder.jit(f)(x), f(x))


# --- CSE never merges values that are mutated later -----------------------------------------


def _cse_programs():
    def mutate_first(x):
        a = x + 1
        b = x + 1
        a.add_(1)
        return a, b

    def mutate_second(x):
        a = x + 1
        b = x + 1
        b.mul_(3)
        return a, b

    def mutate_through_view(x):
        a = x * 2
        b = x * 2
        a.view(-1)[0] = 100.0
        return a, b

    def mutate_view_chain(x):
        a = x.exp()
        b = x.exp()
        a.t().unsqueeze(0).sub_(1)
        return a, b

    def mutate_input_between(x):
        a = x + 1
        x.add_(1)
        b = x + 1
        return a, b

    return [mutate_first, mutate_second, mutate_through_view, mutate_view_chain, mutate_input_between]


@pytest.mark.parametrize("fn", _cse_programs(), ids=lambda f: f.__name__)
def test_cse_does_not_merge_mutated_values(fn):
    x = torch.randn(3, 3)
    expected = fn(x.clone())
    got = thunder.jit(fn)(x.clone())
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)


def test_cse_still_merges_without_mutation():
    def f(x):
        return (x + 1) * (x + 1)

    jf = thunder.jit(f, executors=["torch"])
    jf(torch.randn(3))
    adds = [b for b in thunder.last_traces(jf)[-1].bound_symbols if b.sym.name == "add"]
    assert len(adds) == 1


def test_cse_asks_once_per_op_whether_it_writes(monkeypatch):
    # ``mutates`` walks an op's decomposition: asked up to three times per op, it was 6% of a Qwen2 generation's
    # passes. The program writes in place, so the answer decides what merges (checked against eager too).
    import importlib

    cse_module = importlib.import_module("thunder.transforms.cse")  # (the package's ``cse`` is the pass)
    asked = []
    real = cse_module.mutates
    monkeypatch.setattr(cse_module, "mutates", lambda b: asked.append(b) or real(b))

    def f(x):
        a = x * 2
        b = x * 2
        a.add_(1)
        return a, b, (x + 1) * (x + 1)

    jf = thunder.jit(f, executors=["torch"])
    x = torch.randn(3)
    for g, e in zip(jf(x.clone()), f(x.clone())):
        torch.testing.assert_close(g, e)
    computation = thunder.last_traces(jf)[0]
    asked.clear()
    cse_module.cse(computation)
    assert len(asked) == len(computation.bound_symbols)


# --- metas validate dtypes like eager -------------------------------------------------------

_DTYPES = (torch.bool, torch.uint8, torch.int64, torch.float32, torch.complex64)


def _sample(dtype):
    # Nonzero values, so integer division and remainder never fail on data.
    if dtype is torch.bool:
        return torch.ones(3, dtype=torch.bool)
    return (torch.arange(3) + 1).to(dtype)


def _arity(sym, module) -> int:
    base = getattr(module, sym.name[:-1], None) if sym.name.endswith("_") else None
    if base is not None:  # an in-place twin takes its out-of-place op's arguments
        sym = base
    params = inspect.signature(sym.meta).parameters.values()
    return len([p for p in params if p.default is inspect.Parameter.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)])


def _dtype_cases():
    """(op name, symbol, args) for every elementwise op of the torch language over the dtypes."""
    cases = []
    for module in (elementwise, nn_activations):
        for name in sorted(set(module.__all__)):
            sym = getattr(module, name)
            if symbol_to_torch.get(sym) is None or name in ("where", "where_method") or "softmax" in name:
                continue
            n = 2 if name in ("clamp", "clamp_") else _arity(sym, module)
            if n == 1:
                combos = [(d,) for d in _DTYPES]
            elif n == 2:
                combos = list(itertools.product(_DTYPES, repeat=2))
            elif n == 3:
                combos = [(a, b, a) for a, b in itertools.product(_DTYPES, repeat=2)]
            else:
                continue
            cases.extend(pytest.param(name, sym, combo, id=f"{name}-{'-'.join(str(d)[6:] for d in combo)}") for combo in combos)
    return cases


def _eager_error(sym, args):
    try:
        symbol_to_torch[sym](*[a.clone() for a in args])
    except Exception as e:  # noqa: BLE001 - any eager failure is a rejection
        return e
    return None


def _thunder_error(sym, args):
    try:
        with tracectx(TraceCtx()):
            sym(*[tensorproxy_from_tensor(a) for a in args])
    except Exception as e:  # noqa: BLE001
        return e
    return None


@pytest.mark.parametrize("name, sym, dtypes", _dtype_cases())
def test_meta_rejects_exactly_what_eager_rejects(name, sym, dtypes):
    args = [_sample(d) for d in dtypes]
    eager, ours = _eager_error(sym, args), _thunder_error(sym, args)
    assert (eager is None) == (ours is None), f"eager: {eager!r}; thunder: {ours!r}"
    if ours is not None:
        assert isinstance(ours, ThunderError), repr(ours)
        msg = str(ours)
        assert name.rstrip("_") in msg or name in msg, msg
        assert any(str(d) in msg for d in dtypes), msg


def _reduction_cases():
    from thunder.torch import reductions

    cases = []
    for name in sorted(set(reductions.__all__)):
        sym = getattr(reductions, name)
        if symbol_to_torch.get(sym) is None or _arity(sym, reductions) != 1:
            continue
        cases.extend(pytest.param(name, sym, d, id=f"{name}-{str(d)[6:]}") for d in _DTYPES)
    return cases


@pytest.mark.parametrize("name, sym, dtype", _reduction_cases())
def test_reduction_meta_rejects_exactly_what_eager_rejects(name, sym, dtype):
    args = [_sample(dtype).reshape(1, 3).expand(2, 3).contiguous()]
    eager, ours = _eager_error(sym, args), _thunder_error(sym, args)
    assert (eager is None) == (ours is None), f"eager: {eager!r}; thunder: {ours!r}"
    if ours is not None:
        assert isinstance(ours, ThunderError) and str(dtype) in str(ours), repr(ours)


_DEAD_CODE_REJECTS = {
    "neg_bool": (lambda x: (-x, x)[1], torch.bool),
    "invert_float": (lambda x: (~x, x)[1], torch.float32),
    "and_float": (lambda x: (x & x, x)[1], torch.float32),
    "lshift_float": (lambda x: (x << x, x)[1], torch.float32),
    "rshift_float": (lambda x: (x >> 1, x)[1], torch.float32),
    "sqrt_inplace_int": (lambda x: (x.clone().sqrt_(), x)[1], torch.int64),
    "floor_complex": (lambda x: (torch.floor(x), x)[1], torch.complex64),
    "sub_bool": (lambda x: (x - x, x)[1], torch.bool),
    "lt_complex": (lambda x: (x < x, x)[1], torch.complex64),
    "imag_float": (lambda x: (x.imag, x)[1], torch.float32),
    "abs_inplace_complex": (lambda x: (x.clone().abs_(), x)[1], torch.complex64),
    "positive_bool": (lambda x: (+x, x)[1], torch.bool),
}


@pytest.mark.parametrize("case", list(_DEAD_CODE_REJECTS))
def test_rejected_op_raises_at_compile_time_even_when_dead(case):
    fn, dtype = _DEAD_CODE_REJECTS[case]
    x = _sample(dtype)
    with pytest.raises(Exception):
        fn(x)
    with pytest.raises(ThunderError, match=str(dtype)):
        thunder.jit(fn)(x)


def test_pow_of_bool_follows_eager():
    b = torch.ones(3, dtype=torch.bool)
    assert _same(thunder.jit(lambda x: x**True)(b), b**True)
    assert _same(thunder.jit(lambda x: x**2)(b), b**2)
    with pytest.raises(ThunderError, match="pow"):
        thunder.jit(lambda x: x**x)(b)


# --- Tensor.real and Tensor.imag are properties ---------------------------------------------


@pytest.mark.parametrize("dtype", [torch.complex64, torch.float32])
def test_real_is_a_property(dtype):
    def f(x):
        return x.real * 2

    x = torch.randn(3, dtype=dtype)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


def test_imag_is_a_property():
    def f(x):
        return x.imag + 1, torch.imag(x), torch.real(x)

    x = torch.randn(3, dtype=torch.complex64)
    for got, expected in zip(thunder.jit(f)(x), f(x)):
        torch.testing.assert_close(got, expected)


# --- formatting a tensor inside the function: eager's text, or a clear error -----------------------------------------

_FORMATTING = {
    "fstring": lambda x: f"{x}",
    "fstring_repr": lambda x: f"{x!r}",
    "str": lambda x: str(x),
    "format": lambda x: format(x),
    "str_format": lambda x: "value: {}".format(x),  # noqa: UP032 - str.format is what is tested
    "percent": lambda x: "value: %s" % (x,),  # noqa: UP031 - %-formatting is what is tested
}


@pytest.mark.parametrize("case", list(_FORMATTING))
def test_formatting_a_tensor_in_the_program_gives_eager_s_text_or_fails_clearly(case):
    """(``repr`` too: ``f"{x!r}"`` in the program must not print the proxy's name.) An input's text is eager's, each
    call's own; a computed tensor that requires grad is refused (eager's text names its grad_fn)."""
    fn = _FORMATTING[case]
    jfn = thunder.jit(fn)
    for x in (torch.ones(2), torch.arange(3.0)):
        assert jfn(x) == fn(x) and "tensor(" in fn(x)
    with pytest.raises(ThunderError, match="needs its values .it requires grad"):
        thunder.jit(lambda x: fn(x * 2))(torch.ones(2, requires_grad=True))


def test_thunder_code_still_formats_proxies():
    @make_opaque
    def describe(t):  # thunder-side code run natively while the program is traced
        return f"{t} {t:>4} " + str(t) + " {}".format(t)  # noqa: UP032

    seen = []

    def f(x):
        seen.append(describe(x))
        return x + 1

    jf = thunder.jit(f, sharp_edges="allow")
    jf(torch.ones(2))
    assert seen == ["x    x x x"]
    trace = thunder.last_traces(jf)[-1]
    assert "def computation(x" in str(trace) and f"{trace.args[0]}" == "x"
    with tracectx(TraceCtx()):
        p = TensorProxy("p", shape=(2,), dtype=torch.float32, device=torch.device("cpu"))
    assert str(p) == f"{p}" == repr(p) == "p"


def test_shape_formatting_still_works():
    def f(x):
        return f"{x.shape} {x.dtype}"

    assert thunder.jit(f)(torch.ones(2, 3)) == f(torch.ones(2, 3))


# --- x.grad reads through the tracer's hook -------------------------------------------------


def test_grad_property_calls_the_grad_reader(monkeypatch):
    calls = []

    def reader(p):
        calls.append(p)
        return p * 0

    monkeypatch.setattr(proxies, "grad_reader", reader)
    with tracectx(TraceCtx()):
        p = TensorProxy("p", shape=(2,), dtype=torch.float32, device=torch.device("cpu"))
        g = p.grad
    assert calls == [p] and isinstance(g, TensorProxy)


def test_grad_without_reader_is_none():
    assert proxies.grad_reader is None or callable(proxies.grad_reader)
    with tracectx(TraceCtx()):
        p = TensorProxy("p", shape=(2,), dtype=torch.float32, device=torch.device("cpu"))
        if proxies.grad_reader is None:
            assert p.grad is None


def test_grad_reads_the_real_grad():
    def f(x):
        return x.grad * 2

    x = torch.randn(3, requires_grad=True)
    x.grad = torch.ones(3)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


def _prim_cases():
    from thunder.core.prims.base import all_prims
    from thunder.core.prims.elementwise import ElementwisePrimIDs as E

    cases = []
    for pid in E:
        if pid in (E.WHERE, E.CONVERT_ELEMENT_TYPE):
            continue
        n = 1 if pid.value < E.ADD.value else 2
        cases.extend(pytest.param(all_prims[pid], n, d, id=f"{pid.name.lower()}-{str(d)[6:]}") for d in _DTYPES)
    return cases


@pytest.mark.parametrize("prim, n, dtype", _prim_cases())
def test_prim_meta_rejects_exactly_what_its_kernel_rejects(prim, n, dtype):
    args = [_sample(dtype)] * n
    try:
        prim.python_impl(*args)
        eager = None
    except Exception as e:  # noqa: BLE001
        eager = e
    try:
        with tracectx(TraceCtx()):
            prim(*[tensorproxy_from_tensor(a) for a in args])
        ours = None
    except ThunderError as e:
        ours = e
    assert (eager is None) == (ours is None), f"kernel: {eager!r}; meta: {ours!r}"
    if ours is not None:
        assert prim.name in str(ours) and str(dtype) in str(ours)


# --- seeded random programs -----------------------------------------------------------------
# Chains of views, elementwise ops, reductions, copies and in-place ops over inputs with random
# layouts; every layout query of every intermediate and every result is compared with eager.

_CHAIN_OPS = [
    lambda t: t.t() if t.ndim == 2 else t.transpose(0, -1),
    lambda t: t[1:] if t.ndim and t.shape[0] > 1 else t,
    lambda t: t[..., ::2] if t.ndim else t,
    lambda t: t.unsqueeze(1) if t.ndim else t.unsqueeze(0),
    lambda t: t.squeeze(),
    lambda t: t + 1,
    lambda t: t * t,
    lambda t: torch.exp(t),
    lambda t: t.sum(0, keepdim=True) if t.ndim else t,
    lambda t: t.contiguous(),
    lambda t: t.clone(),
    lambda t: t.permute(*reversed(range(t.ndim))),
    lambda t: t.reshape(-1),
    lambda t: torch.relu(t),
    lambda t: t.to(torch.float64),
    lambda t: torch.where(t > 0, t, t * 2),
    lambda t: t.expand(2, *t.shape) if t.ndim < 4 else t,
    lambda t: torch.zeros_like(t),
    lambda t: torch.softmax(t, -1) if t.ndim else t,
    lambda t: t.narrow(0, 0, 1) if t.ndim else t,
    lambda t: t.mT if t.ndim >= 2 else t,
]


def _random_layout_input(rng):
    shape = [rng.choice([1, 2, 3, 5]) for _ in range(rng.randint(1, 3))]
    x = torch.randn(*[s * rng.choice([1, 2]) for s in shape])
    x = x[tuple(slice(0, None, 1 + (x.shape[i] > s)) for i, s in enumerate(shape))]
    if x.ndim >= 2 and rng.random() < 0.5:
        x = x.transpose(0, 1)
    if rng.random() < 0.3 and x.shape[0] > 1:
        x = x[1:]
    return x


@pytest.mark.parametrize("seed", range(4))
def test_random_layout_programs_match_eager(seed):
    import random

    rng = random.Random(seed)
    for _ in range(12):
        chain = [rng.randrange(len(_CHAIN_OPS)) for _ in range(rng.randint(1, 5))]

        def f(x, chain=chain):
            t, outs = x, []
            for i in chain:
                t = _CHAIN_OPS[i](t)
                outs.append((t.stride(), t.is_contiguous(), t.storage_offset(), tuple(t.shape)))
            return outs

        jf = thunder.jit(f, cache=rng.choice(CACHES))
        for _ in range(3):
            x = _random_layout_input(rng)
            try:
                expected = f(x)
            except Exception:  # noqa: BLE001 - then thunder must fail too
                with pytest.raises(Exception):
                    jf(x)
                continue
            assert jf(x) == expected, (chain, tuple(x.shape), x.stride())


_PURE = [
    lambda x: x + 1,
    lambda x: x * 2,
    lambda x: torch.exp(x),
    lambda x: x.t(),
    lambda x: x[1:],
    lambda x: x.view(-1) if x.is_contiguous() else x.reshape(-1),
    lambda x: x.clone(),
    lambda x: x.unsqueeze(0),
    lambda x: x.detach(),
    lambda x: x.contiguous(),
]
_MUTATIONS = [
    lambda t: t.add_(1),
    lambda t: t.mul_(3),
    lambda t: t.zero_(),
    lambda t: t.fill_(5.0),
    lambda t: t.copy_(t * 2),
    lambda t: t.__setitem__(0, 7.0),
]


@pytest.mark.parametrize("seed", range(4))
def test_random_programs_with_duplicates_and_mutation_match_eager(seed):
    """Every pure op is computed twice (CSE merges the pair unless one is mutated later)."""
    import random

    rng = random.Random(seed)
    for _ in range(25):
        steps = [
            ("pure", rng.randrange(len(_PURE)), rng.randrange(10))
            if rng.random() < 0.6
            else ("mut", rng.randrange(len(_MUTATIONS)), rng.randrange(10))
            for _ in range(rng.randint(2, 7))
        ]

        def f(x, steps=steps):
            vals = [x.clone()]
            for kind, i, j in steps:
                src = vals[j % len(vals)]
                if kind == "pure":
                    vals.extend((_PURE[i](src), _PURE[i](src)))
                else:
                    _MUTATIONS[i](src)
            return [v * 1 for v in vals]

        x = torch.randn(3, 3)
        expected = f(x.clone())
        got = thunder.jit(f)(x.clone())
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e, msg=lambda m, steps=steps: f"{steps}: {m}")


@pytest.mark.parametrize("method", ["data_ptr", "untyped_storage", "storage"])
def test_storage_identity_fails_clearly(method):
    def f(x):
        return getattr(x, method)()

    f(torch.ones(2))  # eager answers
    with pytest.raises(ThunderError, match="does not exist while tracing"):
        thunder.jit(f)(torch.ones(2))


def test_numel_of_a_real_torch_size_holding_symbolic_dims():
    def f(x):
        return (torch.Size([1]) + x.shape).numel()

    jf = thunder.jit(f, cache="symbolic values")
    for shape in ((2, 3), (4, 5)):
        x = torch.randn(shape)
        assert jf(x) == f(x)


def test_copy_into_a_tensor_from_one_that_requires_grad():
    def f(w):
        acc = torch.zeros(2)
        acc.copy_(w)
        return acc * 2, acc.requires_grad

    w = torch.ones(2, requires_grad=True)
    got, expected = thunder.jit(f)(w), f(w)
    assert got[1] is expected[1] is True
    torch.testing.assert_close(got[0], expected[0])
    with torch.no_grad():
        assert thunder.jit(f)(w)[1] is f(w)[1] is False


def test_add_with_alpha_and_a_number():
    x = torch.ones(2)
    torch.testing.assert_close(thunder.jit(lambda t: torch.add(t, 2, alpha=3))(x), torch.add(x, 2, alpha=3))
