"""Programs that eager PyTorch runs and thunder used to refuse with an error: each now runs as in eager (values,
dtypes, result types, gradients, what the caller's objects hold afterwards), and a second call with the same inputs
is a cache hit."""

from __future__ import annotations

import array
import collections

import pytest
import torch

import thunder


def _same(got, want) -> None:
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and got.shape == want.shape and got.requires_grad == want.requires_grad
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)  # (reinterpreted bits may be NaNs)
    elif isinstance(want, (tuple, list)):
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)
    else:
        assert got == want


def _check(fn, *args, hits: bool = True):
    """``fn(*args)`` through thunder.jit against eager, twice (the second call a cache hit)."""
    jfn = thunder.jit(fn)
    for _ in range(2):
        _same(jfn(*args), fn(*args))
    if hits:
        assert thunder.cache_hits(jfn) == 1 and thunder.cache_misses(jfn) == 1
    return jfn


# --- 1. Tensor.view(dtype) -------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.int32, torch.float32, torch.uint8, torch.float16, torch.float64, torch.complex64])
def test_view_dtype_reinterprets_bits(dtype):
    x = torch.randn(4, 6, requires_grad=True)
    _check(lambda t: (t * 2).view(dtype), x)
    _check(lambda t: t.view(dtype), torch.randn(4, 6))


def test_view_dtype_is_a_view_whose_writes_reach_the_tensor():
    def f(x):
        v = x.view(torch.int32)
        v[0, 0] = 0
        x.view(torch.int16).add_(1)
        return x * 1

    a, b = torch.randn(3, 4), None
    b = a.clone()
    torch.testing.assert_close(thunder.jit(f)(a), f(b), rtol=0, atol=0)
    assert torch.equal(a, b)


def test_view_dtype_refuses_what_eager_refuses():
    for bad in (torch.randn(3, 5), torch.randn(()), torch.randn(4, 4).t()):
        with pytest.raises(RuntimeError) as eager:
            bad.view(torch.float64 if bad.ndim != 2 or bad.is_contiguous() else torch.float16)
        with pytest.raises(RuntimeError, match=str(eager.value)[:30].replace("(", r"\(").replace(")", r"\)")):
            thunder.jit(lambda t: t.view(torch.float64 if t.ndim != 2 or t.is_contiguous() else torch.float16))(bad)


# --- 2. torch.unique with dim= -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.unique(x, dim=0),
        lambda x: torch.unique(x, dim=0, return_inverse=True, return_counts=True),
        lambda x: x.unique(dim=1, return_inverse=True),
        lambda x: torch.unique_consecutive(x, dim=0, return_counts=True),
    ],
    ids=["dim0", "inverse-counts", "method-dim1", "consecutive"],
)
def test_unique_with_dim(fn):
    for x in (torch.tensor([[1, 2], [1, 2], [3, 4]]), torch.tensor([[3.0, 4], [1, 2], [3, 4], [3, 4]])):
        _check(fn, x)


def test_unique_with_dim_follows_the_values_on_every_call():
    f = lambda x: torch.unique(x, dim=0, return_counts=True)  # noqa: E731
    jf = thunder.jit(f)
    for x in (torch.tensor([[1, 2], [1, 2]]), torch.tensor([[1, 2], [3, 4]]), torch.tensor([[1, 2], [1, 2]])):
        _same(jf(x), f(x))


# --- 3. tensor_split with a tensor -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "points", [torch.tensor([1, 3]), torch.tensor(3), torch.tensor([-1]), torch.tensor([], dtype=torch.long)],
    ids=["indices", "sections", "negative", "empty"],
)  # fmt: skip
def test_tensor_split_with_a_tensor(points):
    x = torch.randn(6, 4, requires_grad=True)
    f = lambda x, i: torch.tensor_split(x, i, dim=0)  # noqa: E731
    _check(f, x, points)
    _check(lambda x, i: x.tensor_split(i, dim=1), x, points)
    _check(lambda x, i: torch.tensor_split(x, tensor_indices_or_sections=i), x, points)
    got, want = thunder.jit(f)(x, points), f(x, points)
    (gx,) = torch.autograd.grad(sum(t.sum() * k for k, t in enumerate(got, 1)), x)
    (wx,) = torch.autograd.grad(sum(t.sum() * k for k, t in enumerate(want, 1)), x)
    assert torch.equal(gx, wx)


def test_tensor_split_with_a_tensor_follows_its_values():
    f = lambda x, i: torch.tensor_split(x, i)  # noqa: E731
    jf = thunder.jit(f)
    x = torch.arange(6.0)
    for i in (torch.tensor([1, 3]), torch.tensor([2, 4]), torch.tensor(2)):
        _same(jf(x, i), f(x, i))


def test_tensor_split_with_a_float_tensor_is_eagers_error():
    with pytest.raises(RuntimeError, match="tensor_split expected tensor_indices_or_sections to have dtype of long"):
        thunder.jit(lambda x, i: torch.tensor_split(x, i))(torch.ones(4), torch.tensor([1.0]))


def test_narrow_with_a_tensor_start():
    x = torch.randn(5, 3, requires_grad=True)
    f = lambda x, s: torch.narrow(x, 0, s, 2) * 2  # noqa: E731
    jf = _check(f, x, torch.tensor(1))
    for s in (torch.tensor(2), torch.tensor(1)):
        got, want = jf(x, s), f(x, s)
        _same(got, want)
        assert torch.equal(torch.autograd.grad(got.sum(), x)[0], torch.autograd.grad(want.sum(), x)[0])
    _check(lambda x, s: x.narrow(1, start=s, length=1), x, torch.tensor(2))
    with pytest.raises(RuntimeError, match="start must be an 0-dim integral Tensor"):
        thunder.jit(f)(x, torch.tensor(1.0))


# --- 4. einsum's sublist form ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, b: torch.einsum(a, [0, 1], b, [1, 2], [0, 2]),
        lambda a, b: torch.einsum(a, [0, 1], b, [1, 27]),
        lambda a, b: torch.einsum(a, [..., 1], b, [1, 2], [..., 2]),
        lambda a, b: torch.einsum(a, [0, 30], [30]),
    ],
    ids=["explicit", "implicit-lowercase", "ellipsis", "one-operand"],
)
def test_einsum_sublist_form(fn):
    a, b = torch.randn(4, 6, requires_grad=True), torch.randn(6, 3, requires_grad=True)
    got, want = thunder.jit(fn)(a, b), fn(a, b)
    torch.testing.assert_close(got, want)
    torch.testing.assert_close(torch.autograd.grad(got.sum(), a), torch.autograd.grad(want.sum(), a))
    _check(fn, a.detach(), b.detach())


# --- 5. torch.result_type ----------------------------------------------------------------------------------------


def test_result_type_is_a_dtype():
    def f(t, u):
        return torch.result_type(t, 2.5), torch.result_type(t, u), torch.result_type(u[0], 2), torch.result_type(tensor=u, other=t)

    i32, f16 = torch.ones(2, dtype=torch.int32), torch.ones(3, dtype=torch.float16)
    _check(f, i32, f16)
    _check(f, f16, i32)


# --- 6. Tensor.fix -----------------------------------------------------------------------------------------------


def test_fix_is_trunc():
    x = torch.randn(5, requires_grad=True) * 3
    _check(lambda t: t.fix(), x)
    _check(lambda t: torch.fix(t), x)
    _check(lambda t: t.clone().fix_(), x)


# --- 8. outside deques and bytearrays changed by the program -----------------------------------------------------


def _run_on_copies(fn, make, calls: int = 3):
    mine, theirs = make(), make()
    jfn = thunder.jit(fn)
    for i in range(calls):
        x = torch.full((2,), float(i))
        got, want = jfn(x, mine), fn(x, theirs)
        assert (got is mine) == (want is theirs)
        if isinstance(want, torch.Tensor):
            assert torch.equal(got, want)
        assert mine == theirs and type(mine) is type(theirs)
    return jfn


def test_deque_appends_are_replayed_without_recompiling():
    def log(x, d):
        d.append(1)
        d.extendleft([2])
        return x + 1

    jf = _run_on_copies(log, lambda: collections.deque([1, 2], maxlen=3))
    assert thunder.cache_misses(jf) == 1


@pytest.mark.parametrize("maxlen", [None, 4])
def test_deque_changes_that_read_it(maxlen):
    def f(x, d):
        d.append(len(d))
        v = d.popleft()
        d.rotate(1)
        d[0] = 9
        return x * v

    _run_on_copies(f, lambda: collections.deque([1, 2, 3], maxlen=maxlen))


def test_deque_returned_is_the_callers():
    _run_on_copies(lambda x, d: (d.appendleft(5), d)[1], collections.deque)


GLOBAL_DEQUE = collections.deque(maxlen=2)


def test_global_deque_log():
    def f(x):
        GLOBAL_DEQUE.append(1)
        return x + 1

    jf = thunder.jit(f)
    for _ in range(3):
        jf(torch.ones(1))
    assert GLOBAL_DEQUE == collections.deque([1, 1], maxlen=2) and thunder.cache_hits(jf) == 2


def test_bytearray_item_assignment_and_append():
    def f(x, b):
        b[0] = 65
        b.append(66)
        b += b"z"
        return x + b[1]

    _run_on_copies(f, lambda: bytearray(b"abc"))
    _run_on_copies(lambda x, b: (b.extend(b"q"), b)[1], lambda: bytearray(b"abc"))


def test_bytearray_with_the_same_contents_hits_the_cache():
    jf = thunder.jit(lambda x, b: (b.__setitem__(0, 1), x + 1)[1])
    for _ in range(3):
        b = bytearray(b"xyz")
        jf(torch.ones(1), b)
        assert b == bytearray(b"\x01yz")
    assert thunder.cache_hits(jf) == 2


def test_array_changes_stay_a_clear_error():
    a = array.array("i", [1])
    with pytest.raises(thunder.core.errors.ThunderRuntimeError, match="Changing a array from outside"):
        thunder.jit(lambda x: (a.append(2), x)[1])(torch.ones(1))


# --- 9. objects with __index__ -----------------------------------------------------------------------------------


class Index:
    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


@pytest.mark.parametrize(
    "fn",
    [
        lambda x, o: x[o],
        lambda x, o: x[o:],
        lambda x, o: x[o, :o],
        lambda x, o: x.narrow(0, o, 2),
        lambda x, o: x.reshape(o, -1),
        lambda x, o: x.reshape((o, -1)),
        lambda x, o: x.view(o, -1),
        lambda x, o: torch.zeros(o) + 1,
        lambda x, o: torch.zeros((o, 2)) + 1,
        lambda x, o: x.select(0, o),
        lambda x, o: x.topk(o).values,
        lambda x, o: x[:1].expand(o, 6),
        lambda x, o: (lambda y: (y.__setitem__((o, slice(o, None)), 5.0), y)[1])(x.clone()),
        lambda x, o: x + [10, 20, 30, 40][o] + sum([1, 2, 3, 4][o:]),
    ],
    ids=["getitem", "slice", "tuple", "narrow", "reshape", "reshape-tuple", "view", "zeros", "zeros-tuple", "select",
         "topk", "expand", "setitem", "list-index"],
)  # fmt: skip
def test_index_objects_as_eager_reads_them(fn):
    x = torch.arange(24.0).reshape(4, 6)
    o = Index(1)
    jf = _check(fn, x, o)
    o.v = 2  # what __index__ reads is checked on every call
    _same(jf(x, o), fn(x, o))


def test_index_object_where_eager_refuses_it():
    with pytest.raises(TypeError, match="Index"):
        thunder.jit(lambda x, o: torch.add(x, o))(torch.ones(2), Index(1))


# --- 10. returned closures and generators ------------------------------------------------------------------------


def test_returned_closure_over_a_computed_tensor():
    def f(x):
        y = x * 2
        return lambda z: z + y

    jf = thunder.jit(f)
    for i in range(2):
        x = torch.full((2,), float(i), requires_grad=True)
        got, want = jf(x)(torch.ones(2)), f(x)(torch.ones(2))
        assert torch.equal(got, want)
        assert torch.equal(torch.autograd.grad(got.sum(), x)[0], torch.autograd.grad(want.sum(), x)[0])
    assert thunder.cache_hits(jf) == 1


def test_returned_closures_share_their_cells_and_each_call_makes_new_ones():
    def f(x):
        n = 0
        t = x + 1

        def inc():
            nonlocal n
            n += 1
            return t * n

        return inc, lambda: n

    jf = thunder.jit(f)
    x = torch.ones(2)
    (inc, get), (einc, eget) = jf(x), f(x)
    for _ in range(2):
        assert torch.equal(inc(), einc())
    assert get() == eget() == 2
    inc2, get2 = jf(x)
    assert inc2 is not inc and get2() == 0 and thunder.cache_hits(jf) == 1


def test_returned_lambdas_with_defaults_and_globals():
    _check_calls = [
        (lambda x: (lambda z, w=x.sum(): z * w), lambda r: r(torch.ones(2))),
        (lambda x: [lambda k=k: x * k for k in range(3)], lambda r: [g() for g in r]),
    ]
    for f, use in _check_calls:
        jf = thunder.jit(f)
        for i in range(2):
            x = torch.full((2,), float(i + 1))
            _same(use(jf(x)), use(f(x)))


def _gen(a, *rest, k=3, **kw):
    for t in (a, *rest):
        yield t * k


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: (t * 2 for t in (x, x + 1)),
        lambda x: _gen(x, x.sum(), k=2),
        lambda x: iter((x, x + 1)),
    ],
    ids=["genexpr", "generator-function", "tuple-iterator"],
)
def test_returned_generator_not_started(fn):
    jf = thunder.jit(fn)
    for i in range(3):
        x = torch.full((2,), float(i))
        _same(list(jf(x)), list(fn(x)))
    assert thunder.cache_hits(jf) == 2


def test_returned_generator_defined_inside():
    def f(x):
        def g():
            yield x + 1
            yield x + 2

        return g()

    jf = thunder.jit(f)
    for i in range(2):
        x = torch.full((2,), float(i))
        _same(list(jf(x)), list(f(x)))


# --- 11. torch.func.functional_call on a ThunderModule ------------------------------------------------------------


def test_functional_call_with_top_level_names():
    torch.manual_seed(0)
    m = torch.nn.Linear(3, 2)
    jm = thunder.jit(m)
    x, w = torch.randn(4, 3), torch.randn(2, 3, requires_grad=True)
    for params in ({"weight": w}, {"weight": w, "bias": torch.zeros(2)}):
        got, want = torch.func.functional_call(jm, params, (x,)), torch.func.functional_call(m, params, (x,))
        torch.testing.assert_close(got, want)
        torch.testing.assert_close(torch.autograd.grad(got.sum(), w), torch.autograd.grad(want.sum(), w))
    assert type(m.weight) is torch.nn.Parameter and torch.equal(jm(x), m(x))
    with pytest.raises(TypeError, match="cannot assign 'torch.FloatTensor' as parameter 'weight'"):
        jm.weight = torch.randn(2, 3)  # as on the eager module


def test_functional_call_with_a_buffer_and_conversions_on_the_original():
    bn = torch.nn.BatchNorm1d(3)
    jbn = thunder.jit(bn)
    x = torch.randn(4, 3)
    mean = torch.ones(3)
    got = torch.func.functional_call(jbn, {"running_mean": mean.clone()}, (x,))
    torch.testing.assert_close(got, torch.func.functional_call(bn, {"running_mean": mean.clone()}, (x,)))
    jbn.double()
    assert bn.weight.dtype is torch.float64 and [n for n, _ in jbn.named_parameters()] == ["weight", "bias"]


# --- 7. Tensor.resize_ and Tensor.set_ of tensors the program made ------------------------------------------------


def _resize_shrink(x):
    y = x * 2
    y.resize_(2, 2)
    return y, y.shape


def _resize_same_then_write(x):
    y = x * 1
    y.resize_(2)
    y.add_(1)
    return y


def _resize_transposed(x):
    y = x.reshape(2, 3).t() * 1  # eager lays it out transposed: its memory holds x's order
    y.resize_(4)
    return y


def _resize_grow_then_fill(x):
    y = torch.empty(0)
    y.resize_(2, 3)
    y.fill_(1)
    return y + x.reshape(2, 3)


def _resize_grow_and_overwrite(x):
    y = x * 1
    y.resize_(8)
    y[6:] = 0
    return y


def _resize_as(x):
    y = x * 1
    y.resize_as_(torch.ones(2, 2))
    torch.resize_as_(y, torch.ones(1, 3))
    return y


def _set_to_a_computed_tensor(x):
    a = torch.zeros(2)
    a.set_(x * 2)
    return a + 1, a.shape


def _set_makes_a_view(x):
    b = x * 1
    a = torch.zeros(3)
    a.set_(b)
    a[0] = 5
    return b, a


@pytest.mark.parametrize(
    "fn", [_resize_shrink, _resize_same_then_write, _resize_transposed, _resize_grow_then_fill,
           _resize_grow_and_overwrite, _resize_as, _set_to_a_computed_tensor, _set_makes_a_view],
)  # fmt: skip
def test_resize_and_set_of_a_tensor_the_program_made(fn):
    _check(fn, torch.arange(6.0))


def test_resize_of_a_tensor_that_requires_grad_is_eagers_error():
    with pytest.raises(RuntimeError, match="cannot resize variables that require grad"):
        thunder.jit(lambda x: (x * 2).resize_(3))(torch.arange(6.0, requires_grad=True))


def test_set_to_another_dtype_is_eagers_error():
    with pytest.raises(RuntimeError, match="Could not set tensor of type float to a tensor of type double"):
        thunder.jit(lambda x: torch.zeros(1, dtype=torch.float64).set_(x))(torch.ones(2))


def _resize_an_input(x):
    return x.resize_(2)


def _grow_a_view(x):
    return x[:2].resize_(4)


def _set_an_input(x):
    return x.set_(x[:3] * 2)  # (to one of its own shape, the input takes the values: test_probe_findings12)


def _set_to_a_storage(x):
    return (x * 1).set_(torch.ones(6).untyped_storage())


# (the messages quote the source line: the patterns must not be on it)
@pytest.mark.parametrize(
    "fn, says",
    [
        (_resize_an_input, r"Tensor.resize_ changes the shape of x, an input .* x.new_empty"),
        (_grow_a_view, r"Tensor.resize_: tensor .* is a view of other memory"),
        (_set_an_input, r"Tensor.set_ changes the shape of x, an input .* Use the source tensor itself"),
        (_set_to_a_storage, r"untyped_storage.* needs the tensor's memory"),
    ],
    ids=["resize-input", "resize-view-grown", "set-input", "set-storage"],
)
def test_resize_and_set_thunder_cannot_follow_name_the_op_and_the_fix(fn, says):
    fn(torch.arange(6.0))  # eager runs it
    with pytest.raises(thunder.core.errors.ThunderError, match=says):
        thunder.jit(fn)(torch.arange(6.0))


def test_set_to_an_input_writes_through_to_it():
    def f(x):
        a = torch.zeros(2)
        a.set_(x)
        a.add_(1)
        return a * 2

    mine, theirs = torch.arange(6.0), torch.arange(6.0)
    jf = thunder.jit(f)
    for _ in range(2):
        _same(jf(mine), f(theirs))
        assert torch.equal(mine, theirs)
    assert thunder.cache_hits(jf) == 1


# --- Tensor.tile(*dims), x.reshape(2, 3): the methods take varargs, the torch functions one sequence -------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: t.tile(2),  # DINOv3's rotary embedding: ``angles.tile(2)``
        lambda t: t.tile(2, 1, 3),
        lambda t: t.tile(()),
        lambda t: t.tile(dims=(2,)),
        lambda t: torch.tile(t, (3, 1)),
        lambda t: torch.tile(t, dims=[2, 1, 1]),
        lambda t: t.tile(torch.tensor(2)),
    ],
    ids=["one-int", "ints", "empty", "dims-keyword", "function", "function-keyword", "0-d-tensor"],
)
def test_tile_as_eager_with_gradients(fn):
    x = torch.randn(2, 3, requires_grad=True)
    jfn = _check(fn, x)
    (g,) = torch.autograd.grad(jfn(x).sum(), x)
    (want,) = torch.autograd.grad(fn(x).sum(), x)
    torch.testing.assert_close(g, want, rtol=0, atol=0)


_VARARGS_OF_THE_FUNCTION = {
    "reshape-int": lambda t: torch.reshape(t, 6),
    "reshape-ints": lambda t: torch.reshape(t, 3, 2),
    "permute-ints": lambda t: torch.permute(t, 1, 0),
    "broadcast_to-ints": lambda t: torch.broadcast_to(t, 2, 3),
    "tile-int": lambda t: torch.tile(t, 2),
    "tile-ints": lambda t: torch.tile(t, 2, 1),
    "flip-int": lambda t: torch.flip(t, 0),
    "flip-ints": lambda t: torch.flip(t, 0, 1),
    "reshape-0-d-tensor": lambda t: torch.reshape(t, torch.tensor(6)),
}


@pytest.mark.parametrize("fn", _VARARGS_OF_THE_FUNCTION.values(), ids=_VARARGS_OF_THE_FUNCTION.keys())
def test_the_function_form_of_a_varargs_method_refuses_varargs_as_eager(fn):
    """Note [Varargs of a method only]: ``torch.reshape(x, 6)`` is eager's TypeError (thunder returned a value)."""
    x = torch.randn(2, 3)
    with pytest.raises(TypeError) as eager:
        fn(x)
    with pytest.raises(TypeError) as jitted:
        thunder.jit(fn)(x)
    wanted = str(eager.value).split(":")[0]  # ``reshape(): argument 'shape' (position 2) must be tuple of ints, not int``
    assert f"torch.{wanted}" in str(jitted.value) and "only the method" in str(jitted.value)


@pytest.mark.parametrize(
    "fn",
    [
        lambda t: t.reshape(6),
        lambda t: t.reshape(3, 2),
        lambda t: torch.Tensor.reshape(t, 3, 2),
        lambda t: t.permute(1, 0),
        lambda t: t.broadcast_to(2, 3),
        lambda t: t.flip(0),
        lambda t: t.flip(0, 1),
        lambda t: torch.reshape(t, [6]),
        lambda t: torch.permute(input=t, dims=(1, 0)),
        lambda t: torch.broadcast_to(t, t.shape),
        lambda t: torch.flip(t, (1,)),
    ],
)
def test_the_method_form_of_a_varargs_op_takes_varargs_as_eager(fn):
    _check(fn, torch.randn(2, 3))


@pytest.mark.filterwarnings("error::thunder.EagerRunWarning")
@pytest.mark.parametrize(
    "fn",
    [
        lambda t: t.polygamma(1),
        lambda t: torch.Tensor.polygamma(t, 2),
        lambda t: torch.polygamma(1, t),
        lambda t: (t * 1.5).polygamma_(1),
    ],
    ids=["method", "unbound-method", "function", "in-place"],
)
def test_polygamma_s_method_takes_n_first_as_eager(fn):
    """``x.polygamma(n)`` is ``torch.polygamma(n, x)`` (the method ran eagerly: its n went to the function's input)."""
    x = torch.rand(3, 4, requires_grad=True) + 0.5
    jfn = _check(fn, x)
    (g,) = torch.autograd.grad(jfn(x).sum(), x)
    (want,) = torch.autograd.grad(fn(x).sum(), x)
    torch.testing.assert_close(g, want, rtol=0, atol=0)


# --- in-place methods of ops thunder has out of place: computed out of place and copied in -------------------------

_IN_PLACE = {
    "square": (), "sgn": (), "frac": (), "deg2rad": (), "rad2deg": (), "true_divide": (2.0,), "sinc": (),
    "heaviside": ("x",), "i0": (), "igamma": ("x",), "igammac": ("x",), "mvlgamma": (1,), "conj_physical": (),
}  # fmt: skip


def _in_place_program(name, args, form):
    def f(x):
        y = x * 1.5
        real = tuple(x if a == "x" else a for a in args)
        out = getattr(torch, f"{name}_")(y, *real) if form == "function" else getattr(y, f"{name}_")(*real)
        return out is y, y * 2

    return f


@pytest.mark.parametrize("form", ["method", "function"])
@pytest.mark.parametrize("name", sorted(_IN_PLACE))
def test_in_place_methods_of_out_of_place_ops_as_eager(name, form):
    if form == "function" and not hasattr(torch, f"{name}_"):
        pytest.skip(f"torch has no torch.{name}_")
    f = _in_place_program(name, _IN_PLACE[name], form)
    x = torch.rand(3, 4) + 0.5
    _check(f, x)
    xg = x.clone().requires_grad_()
    try:
        (want,) = torch.autograd.grad(f(xg)[1].sum(), xg)
    except (RuntimeError, NotImplementedError):
        return  # (eager has no gradient for it: heaviside, igamma)
    (g,) = torch.autograd.grad(thunder.jit(f)(xg)[1].sum(), xg)
    torch.testing.assert_close(g, want)


@pytest.mark.parametrize(
    "make", [lambda: torch.nn.SELU(inplace=True), lambda: torch.nn.CELU(0.5, inplace=True),
             lambda: (lambda t: torch.nn.functional.celu(t, inplace=True))],
    ids=["SELU", "CELU", "F.celu"],
)  # fmt: skip
def test_celu_and_selu_in_place_as_eager(make):
    layer = make()

    def f(x):
        y = x * 1.5
        return layer(y) is y, y * 2

    x = torch.randn(3, 4)
    _check(f, x)
    xg = x.clone().requires_grad_()
    (g,) = torch.autograd.grad(thunder.jit(f)(xg)[1].sum(), xg)
    (want,) = torch.autograd.grad(f(xg)[1].sum(), xg)
    torch.testing.assert_close(g, want)


# --- torch's other names of methods (``x.arccos()`` is ``x.acos()``) and methods that are a function of the tensor ---

_ALIAS_CALLS = [
    "y.absolute()", "y.absolute_()", "torch.absolute(y)", "y.arccos()", "y.arccos_()", "torch.arccos_(y)",
    "y.arcsin()", "y.arcsinh_()", "y.arctan()", "y.arctanh_()", "torch.arctan2(y, x)", "y.arctan2_(x)",
    "y.clip_(0.3, 0.5)", "torch.clip_(y, 0.3)", "y.divide_(x)", "y.greater_(0.4)", "y.greater_equal_(x)", "y.less_(x)",
    "y.less_equal_(0.4)", "y.multiply_(x)", "y.negative()", "y.negative_()", "torch.negative(y)", "y.not_equal_(x)",
    "y.subtract_(x)", "(y + 1.2).arccosh_()", "y.matrix_power(3)", "torch.matrix_power(y, 2)", "y.hardshrink(0.3)",
    "y.prelu(torch.tensor([0.25]))",
]  # fmt: skip


@pytest.mark.parametrize("call", _ALIAS_CALLS)
def test_method_aliases_as_eager(call):
    f = eval(f"lambda x: (lambda y: ({call}, y * 1))(x * 0.9)")  # y: a tensor of the program's own
    _check(f, torch.rand(3, 3) * 0.6 + 0.2)


@pytest.mark.parametrize(
    "fn",
    [lambda x: torch.arange(x.sum()), lambda x: torch.arange(1, (x > 0).sum() + 2),
     lambda x: torch.arange(0, x.float().mean(), 0.5), lambda x: torch.arange(start=x.min(), end=x.sum() + 1) * 2],
    ids=["end", "start-end", "float-end", "keywords"],
)  # fmt: skip
def test_arange_reads_the_value_of_a_0_d_tensor_bound_as_eager(fn):
    """Longformer: ``torch.arange(<0-d tensor>)`` (refused: a meta cannot read the value; read before the symbol)."""
    jfn = thunder.jit(fn)
    for values in ([1, 2], [1, 2], [2, 3], [0, 1]):
        x = torch.tensor(values)
        _same(jfn(x), fn(x))


def test_narrow_reads_a_0_d_tensor_length_as_eager():
    """Longformer: ``attn_probs.narrow(-1, 0, max_num_global_attn_indices)``, a 0-d tensor length (its meta compared
    the tensor with 0: data-dependent control flow)."""

    def f(x, n):
        return x.narrow(1, 0, n.max()) * 2, torch.narrow(x, 0, n.min(), 1)

    jfn = thunder.jit(f)
    for values in ([1, 2], [1, 2], [2, 3], [0, 1]):
        x, n = torch.randn(3, 4), torch.tensor(values)
        _same(jfn(x, n), f(x, n))


# --- torch.as_strided_scatter (Note [as_strided in a trace] in thunder.torch.strided) ----------------------------


@pytest.mark.parametrize(
    "fn",
    [
        lambda a, s: torch.as_strided_scatter(a, s, (2, 2), (1, 4), 1),
        lambda a, s: (a * 2)[1:].as_strided_scatter(s, (2, 2), (4, 1)),
        lambda a, s: torch.as_strided_scatter(a.t().detach() * 1, s.detach(), (2, 2), (1, 2), 1) + s.sum(),
        lambda a, s: torch.as_strided_scatter(a, s.double(), (2, 2), (3, 1)),
    ],
    ids=["offset", "method-of-a-slice", "transposed", "src-of-another-dtype"],
)
def test_as_strided_scatter_as_eager_with_gradients_for_src(fn):
    a, s = torch.randn(3, 4), torch.randn(2, 2, requires_grad=True)
    got, want = _check(fn, a, s), fn(a, s)
    got = got(a, s)
    assert got.stride() == want.stride() and got.storage_offset() == want.storage_offset()
    g = torch.randn_like(want)
    torch.testing.assert_close(torch.autograd.grad(got, s, g), torch.autograd.grad(want, s, g), rtol=0, atol=0)


def test_as_strided_scatter_into_an_input_requiring_grad_is_refused():
    """Eager's gradient for the input is the incoming one at the scattered positions, zero elsewhere: not the
    derivative, which thunder would give (a silent difference): a clear error instead."""
    with pytest.raises(thunder.core.errors.UnsupportedOpError, match="not the derivative"):
        thunder.jit(lambda a, s: torch.as_strided_scatter(a, s, (2,), (1,)))(torch.randn(4, requires_grad=True), torch.randn(2))
