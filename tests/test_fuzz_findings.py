"""What the widened randomized tester (``tests/fuzz``) found, each kept as a regression test against eager."""

from __future__ import annotations

import copy
import functools
import re

import pytest
import torch

import thunder
from thunder.core.errors import ThunderRuntimeError, UnsupportedOpError


def test_deepcopy_of_a_computed_tensor_is_a_new_tensor_and_copy_shares_it():
    def f(x):
        y = x * 2
        d = copy.deepcopy(y)
        d.add_(1)
        c = copy.copy(y)  # eager: shares y's storage
        c.mul_(10)
        items = copy.deepcopy([y, 1, "a", y])
        items[0].add_(5)
        return y, d, c, items, items[0] is items[3]

    x = torch.randn(3)
    expected, actual = f(x), thunder.jit(f)(x)
    for e, a in zip(expected[:3], actual[:3]):
        torch.testing.assert_close(a, e)
    torch.testing.assert_close(actual[3][0], expected[3][0])
    assert actual[3][1:3] == expected[3][1:3] and actual[4] is expected[4] is True


def test_deepcopy_of_a_computed_tensor_that_requires_grad_raises_as_eager():
    def f(x):
        return copy.deepcopy([x * 2, 1])

    x = torch.randn(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="graph leaves"):
        f(x)
    with pytest.raises(RuntimeError, match="graph leaves"):
        thunder.jit(f)(x)


def test_tensor_queries_take_torchs_keyword_names():
    def f(x):
        return torch.is_floating_point(input=x), torch.is_complex(input=x), torch.numel(input=x)

    x = torch.randn(3)
    assert thunder.jit(f)(x) == f(x)


def test_an_op_that_fails_on_the_values_fails_before_a_later_line_fails_while_tracing():
    # Eager fails at the unused out-of-range index; tracing got past it (the value is not known) and failed later
    # at ``math.floor(-inf)`` (OverflowError) or a deepcopy eager never reached: the earlier failure is eager's.
    import math

    def f(x, n):
        _ = x[..., torch.tensor([9])]
        return x + math.floor(n)

    def g(x):
        _ = x.take(torch.tensor([100]))
        return copy.deepcopy([x * 2, 1])

    x = torch.randn(3, 4, requires_grad=True)
    for fn, args in ((f, (x, -float("inf"))), (g, (x,))):
        with pytest.raises(IndexError):
            fn(*args)
        with pytest.raises(IndexError):
            thunder.jit(fn)(*args)


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_an_out_of_range_index_raises_eagers_index_error_from_the_decomposition(cache):
    # With symbolic shapes the torch executor runs indexing decomposed, as index_select, whose out-of-range error is
    # a RuntimeError; eager's indexing raises IndexError (the fuzzer's seed 26 under symbolic values).
    def f(x):
        _ = x[..., torch.tensor([9])]
        return x

    x = torch.randint(-3, 4, (4, 2))
    with pytest.raises(IndexError):
        f(x)
    with pytest.raises(IndexError, match="index 9 is out of bounds"):
        thunder.jit(f, cache=cache)(x)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_masked_fill_of_an_integer_tensor_with_a_non_finite_float_raises_eagers_error(value):
    """Found by the randomized tester: thunder raised Python's ValueError converting NaN to an int while tracing."""

    def f(x, v):
        return x.masked_fill(x > 0, v)

    x = torch.tensor([1, -2, 3])
    with pytest.raises(RuntimeError, match="cannot be converted to type int64_t without overflow"):
        f(x, value)
    with pytest.raises(RuntimeError, match="cannot be converted to type int64_t without overflow"):
        thunder.jit(f)(x, value)


def test_a_rounded_division_has_eagers_zero_gradient_at_nan():
    """Found by the randomized tester on 3.13: the gradient of ``div(..., rounding_mode='floor')`` went through its
    decomposition and was NaN at a NaN input, where eager's is 0."""

    def f(x, n):
        return torch.div(x - n, other=2, rounding_mode="floor")

    x = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    (expected,) = torch.autograd.grad(f(x, float("nan")).sum(), x)
    (actual,) = torch.autograd.grad(thunder.jit(f)(x, float("nan")).sum(), x)
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize(
    "f",
    [lambda x: torch.floor_divide(x, 2), lambda x: x // 2, lambda x: (x // 2) * 0 + x],
    ids=["floor_divide", "floordiv-operator", "beside-a-differentiable-path"],
)
def test_floor_divide_has_no_derivative_as_in_eager(f):
    """Found by the randomized tester on 3.12: eager's backward through ``floor_divide`` raises (``div`` with
    ``rounding_mode="floor"`` has a zero gradient); thunder gave zeros. The values agree either way."""
    x = torch.randn(4, requires_grad=True)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
        f(x).sum().backward()
    with pytest.raises(RuntimeError, match="derivative for aten::floor_divide is not implemented"):
        thunder.jit(f)(x).sum().backward()


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_the_hash_of_a_nan_argument_is_a_clear_error(cache):
    """Found by the randomized tester on 3.13: ``hash(nan)`` is the float object's identity (Python 3.10+), and a
    trace baked the first NaN's hash, which a call with another NaN object got too."""

    def f(x, n):
        return x + 1, hash(n)

    jf = thunder.jit(f, cache=cache)
    x = torch.randn(2)
    with pytest.raises(ThunderRuntimeError, match="hash\\(\\) of a NaN"):
        jf(x, float("nan"))
    assert jf(x, 2.5)[1] == hash(2.5)


def test_an_op_repeated_under_no_grad_is_not_merged_with_its_differentiable_twin():
    """Found by the randomized tester on 3.13: common-subexpression elimination merged ``x * 2`` inside
    ``torch.no_grad()`` into the same ``x * 2`` computed with grad on, so the gradient flowed through it."""

    def f(x):
        r = x * 2 + 1
        with torch.no_grad():
            c2 = x * 2
        return x + c2, r

    x = torch.randn(3, dtype=torch.float64, requires_grad=True)
    (expected,) = torch.autograd.grad(sum(o.sum() for o in f(x)), x)
    (actual,) = torch.autograd.grad(sum(o.sum() for o in thunder.jit(f)(x)), x)
    torch.testing.assert_close(actual, expected)


def test_an_input_written_before_a_data_dependent_value_that_changed_is_written_once():
    """Found by the randomized tester on 3.13: a call that stops at a changed count runs again in another entry,
    and the input it had doubled before the count was doubled again."""

    def f(x):
        x.detach().mul_(2)
        n = int((x > 0).sum())
        return x.reshape(-1)[:n] + n

    jf = thunder.jit(f)
    for seed in range(4):
        x = torch.randint(-3, 4, (2, 3), generator=torch.Generator().manual_seed(seed))
        y = x.clone()
        torch.testing.assert_close(jf(y), f(x))
        torch.testing.assert_close(y, x)
    assert thunder.cache_misses(jf) >= 2  # the count changed: some call stopped at its check


def test_an_expanded_input_whose_copy_is_written_before_a_data_dependent_size():
    """Found by the randomized tester (same input): the input written before a check was restored with ``copy_``,
    which refuses an expanded tensor; a clone's writes no longer count as writes of what it copied."""

    def f(x):
        t = x.clone()
        t.zero_()
        (r,) = torch.where((x + t).reshape(-1) > 0)
        return x.reshape(-1)[r] * 2

    for cache in ("same input", "constant values"):
        jf = thunder.jit(f, cache=cache)
        for value in (2, -1, 3):
            x = torch.tensor([value]).expand(3)
            torch.testing.assert_close(jf(x), f(x))



@pytest.mark.parametrize("view", ["expanded", "strided slice", "offset slice", "transposed"])
def test_a_deep_copy_of_a_computed_view_keeps_eagers_layout(view):
    """Found by the randomized tester on 3.13: ``copy.deepcopy`` of a tensor the program computed was a clone, whose
    layout is not eager's deep copy's (the storage copied, the same view of it): an expanded copy reported
    contiguous strides and took an in-place add that eager refuses."""
    views = {
        "expanded": lambda x: x[0].expand(2, 4),
        "strided slice": lambda x: x[:, ::2],
        "offset slice": lambda x: x[1:],
        "transposed": lambda x: x.t(),
    }

    def f(x):
        y = copy.deepcopy({"k": views[view](x * 1)})["k"]
        return y.stride(), y.storage_offset(), y.is_contiguous(), y + 1, y

    x = torch.randn(3, 4)
    expected, actual = f(x), thunder.jit(f)(x)
    assert actual[:3] == expected[:3]
    torch.testing.assert_close(actual[3], expected[3])
    assert (actual[4].stride(), actual[4].storage_offset()) == (expected[4].stride(), expected[4].storage_offset())


def test_an_in_place_op_on_a_deep_copy_of_an_expanded_tensor_fails_as_in_eager():
    def f(x):
        y = copy.deepcopy(x.expand(2, 2))
        y.add_(1)
        return y

    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        f(torch.randn(2))
    with pytest.raises(RuntimeError, match="more than one element of the written-to tensor"):
        thunder.jit(f)(torch.randn(2))


@pytest.mark.parametrize("op", ["sign", "floor", "ceil", "round", "trunc"])
@pytest.mark.parametrize("scale", [float("nan"), float("inf"), 2.0], ids=["nan", "inf", "finite"])
def test_a_step_function_passes_zeros_back_as_eager_does(op, scale):
    """Found by the randomized tester (3.13, seed 710613): ``(x * nan).sign()`` gave x a gradient of 0 where eager's
    is NaN. Eager's gradient of a step function is a tensor of zeros that goes on through the ops before it
    (0 * NaN, 0 * inf); thunder's rule gave none, and x got zeros filled in."""

    def f(x):
        return getattr(x * scale, op)()

    x = torch.randn(3, 4, requires_grad=True)
    f(x).sum().backward()
    expected, x.grad = x.grad, None
    thunder.jit(f)(x).sum().backward()
    torch.testing.assert_close(x.grad, expected, equal_nan=True, rtol=0, atol=0)


@pytest.mark.parametrize(
    "update", [lambda ts, x: torch._foreach_mul_(ts, 0.5), lambda ts, x: torch._foreach_add_(ts, [x]),
               lambda ts, x: torch._foreach_addcmul_(ts, [x], [x], value=2)],
    ids=["scalar", "list", "addcmul"],
)  # fmt: skip
def test_a_printed_tensor_updated_by_a_foreach_op_shows_eagers_grad_fn(update, capsys):
    """3.11 seed 2011097: ``print`` of a tensor that requires grad after ``torch._foreach_mul_(ts, 0.5)`` showed
    ``grad_fn=<MulBackward0>`` (thunder ran ``t.mul_(0.5)``, ATen's ``mul_.Tensor``) where eager shows
    ``MulBackward1`` (``mul_.Scalar``); the node, its gradients and the values are eager's."""

    def f(x):
        ts = [x * 1]
        update(ts, x)
        print(ts[0])
        return ts[0]

    x = torch.full((4,), 1.5, requires_grad=True)
    want = f(x)
    printed = capsys.readouterr().out
    got = thunder.jit(f)(x)
    assert capsys.readouterr().out == printed and type(got.grad_fn).__name__ == type(want.grad_fn).__name__
    torch.testing.assert_close(torch.autograd.grad(got.sum(), x), torch.autograd.grad(want.sum(), x))


def test_the_in_place_and_the_out_of_place_foreach_add_are_two_symbols_in_one_trace():
    """Seed 3007547 (Python 3.13, symbolic values): ``torch._foreach_add_`` of tensors that require grad and
    ``torch._foreach_add`` in one program named their per-tensor symbols alike (``foreach_add_one_ls``): "two
    different values want the global name" at the call that printed both."""
    from tests.fuzz.checker import Outcome, check_program
    from tests.fuzz.programs import generate_program

    result = check_program(generate_program(3007547), "symbolic values", stop_at_failure=False)
    assert {c.outcome for c in result.calls} <= {Outcome.OK, Outcome.CLEAR}, [c.detail for c in result.calls]


def _printed(fn, *args, capsys) -> str:
    capsys.readouterr()
    fn(*args)
    return capsys.readouterr().out


def _print_under_no_grad(a):
    with torch.no_grad():
        print(a)


@pytest.mark.parametrize(
    "show", [print, lambda a: print([a, 1]), _print_under_no_grad], ids=["print", "in a list", "under no_grad"]
)
def test_a_printed_result_of_a_nested_jitted_function_shows_its_grad_fn_as_eagers_call_does(show, capsys):
    # Note [Printing a jitted function's result]: eager's call of the inner jitted function returns what its autograd
    # node made (grad_fn=<ThunderFunctionBackward>); traced inline, the print showed the inner last op's AddBackward0.
    inner = thunder.jit(lambda t: t * 2 + 1)

    def f(x):
        a = inner(x)
        show(a)
        b = a * 3
        print(b)
        a.mul_(1)  # now eager's grad_fn is MulBackward0: the print shows the changed value's own
        print(a)
        return b

    x = torch.randn(2, 2, dtype=torch.float64, requires_grad=True)
    expected = _printed(f, x, capsys=capsys)
    assert "ThunderFunctionBackward" in expected
    assert _printed(thunder.jit(f), x, capsys=capsys) == expected


def test_a_nested_jitted_function_that_prints_a_value_requiring_grad_shows_torchs_grad_fn(capsys):
    # Called on its own it runs under torch's autograd too (it prints a value that requires grad): no ThunderFunction.
    def h(t):
        u = t + 1
        print(u)
        return u * 2

    inner = thunder.jit(h)

    def f(x):
        print(inner(x))
        with torch.no_grad():
            print(inner(x))
        return x

    x = torch.randn(3, requires_grad=True)
    expected = _printed(f, x, capsys=capsys)
    assert "ThunderFunctionBackward" not in expected
    assert _printed(thunder.jit(f), x, capsys=capsys) == expected


def _scaler_classes():
    """A base class and a subclass, new for each test (the tests change them)."""

    class Scaler:
        factor = 2

        @staticmethod
        def shift(t):
            return t + 1

        @property
        def offset(self):
            return 1

        def scale(self, t):
            return t * self.factor

        def __call__(self, t):
            return self.scale(self.shift(t)) + self.offset

    class SubScaler(Scaler):
        def scale(self, t):
            return super().scale(t)

    return Scaler, SubScaler


@pytest.mark.parametrize("made_by_the_program", [True, False], ids=["made by the program", "from outside"])
@pytest.mark.parametrize(
    "change",
    [
        lambda base, sub: setattr(base, "factor", 3),
        lambda base, sub: setattr(sub, "factor", 5),  # a subclass attribute now hides the base's
        lambda base, sub: setattr(base, "shift", staticmethod(lambda t: t - 1)),
        lambda base, sub: setattr(base, "offset", property(lambda self: 10)),
        lambda base, sub: setattr(base, "scale", lambda self, t: t * 100),  # called through super()
    ],
    ids=["class attribute", "in a subclass", "staticmethod", "property", "method through super()"],
)
def test_a_class_attribute_read_through_an_instance_is_checked(made_by_the_program, change):
    # Note [Class attributes read through an instance]: the cached trace kept the class's old attribute.
    base, sub = _scaler_classes()
    outside = sub()

    def f(x):
        return (sub() if made_by_the_program else outside)(x)

    jf = thunder.jit(f)
    x = torch.ones(2)
    torch.testing.assert_close(jf(x), f(x))
    change(base, sub)
    torch.testing.assert_close(jf(x), f(x))


@pytest.mark.parametrize(
    "op, handler",
    [
        (lambda x: x.view(3, -1), ValueError),  # eager raises a RuntimeError, which this handler does not catch
        (lambda x: x.view(3, -1), RuntimeError),
        (lambda x: x.reshape(2, -1), Exception),
        (lambda x: x[5], IndexError),
        (lambda x: x @ torch.ones(3), RuntimeError),
    ],
    ids=["view, except ValueError", "view, except RuntimeError", "reshape", "index", "matmul"],
)
def test_an_ops_failure_the_program_catches_is_eagers_exception(op, handler):
    # Note [An op's failure the program catches]: the program caught thunder's ThunderValueError (a ValueError too)
    def f(x):
        try:
            return op(x)
        except handler as e:
            return type(e).__name__, str(e), x + 1

    x = torch.randn(5)
    try:
        expected = f(x)
    except Exception as e:  # noqa: BLE001
        with pytest.raises(type(e), match=re.escape(str(e))):
            thunder.jit(f)(x)
        return
    actual = thunder.jit(f)(x)
    assert actual[:2] == expected[:2]
    torch.testing.assert_close(actual[2], expected[2])


def test_a_device_kernels_refusal_the_program_catches_is_eagers_exception():
    # The meta kernel takes ``@`` of bool tensors, the CPU's has none (NotImplementedError, a RuntimeError): the
    # handler saw thunder's ThunderTypeError instead.
    def f(x):
        try:
            return x @ x, ""
        except RuntimeError as e:
            return x, type(e).__name__

    x = torch.randint(0, 2, (1, 4)).bool().expand(4, 4)
    assert thunder.jit(f)(x)[1] == f(x)[1] == "NotImplementedError"


def _iterator_left_after(fn, x, items):
    it = (v for v in items)
    with pytest.raises(RuntimeError) as info:
        fn(x, it)
    return list(it), info.value


def test_an_in_place_op_on_overlapping_memory_fails_before_an_iterator_argument_is_read():
    # seed 3008277: eager fails at ``add_`` (an expanded tensor's elements share memory) with ``it`` unread; the
    # trace took the items before the computation failed.
    def f(x, it):
        s2 = x * x
        x.detach().add_(1)
        return s2, sum(1 for _ in it)

    def g(x, it):
        s2 = x * x
        x.expand(2, *x.shape).add_(1)
        return s2, sum(1 for _ in it)

    for fn, x in ((f, torch.randint(-3, 4, (1,)).expand(2)), (g, torch.randn(3))):
        left, eager_error = _iterator_left_after(fn, x.clone() if fn is g else x, [1.5, 2.5])
        thunder_left, error = _iterator_left_after(thunder.jit(fn), x.clone() if fn is g else x, [1.5, 2.5])
        assert thunder_left == left == [1.5, 2.5] and type(error) is type(eager_error) and str(error) == str(eager_error)


def test_an_in_place_op_on_overlapping_memory_in_a_cached_trace_names_the_iterator_it_read():
    # The cached trace's prologue took the items before the computation failed: they cannot be put back, so the
    # error says so (before: eager's error, the iterator silently further on than eager leaves it).
    def f(x, it):
        s2 = x * x
        x.detach().add_(1)
        return s2, sum(1 for _ in it)

    jf = thunder.jit(f)
    jf(torch.randn(2), (v for v in [1.5]))
    with pytest.raises(ThunderRuntimeError, match="positional argument 1.*cannot be put back"):
        jf(torch.randn(1).expand(2), (v for v in [1.5]))


def test_out_in_an_overload_that_takes_none_is_eagers_type_error():
    # ``torch.sum`` takes out= only with a dim: thunder wrote the sum into the 0-dim tensor
    def f(x):
        o = torch.empty((), dtype=x.dtype)
        torch.sum(x, out=o)
        return x + o

    with pytest.raises(TypeError, match="invalid combination of arguments") as eager:
        f(torch.ones(3))
    with pytest.raises(TypeError, match=re.escape(str(eager.value).splitlines()[0])):
        thunder.jit(f)(torch.ones(3))


def test_dropout_of_an_empty_tensor_of_any_dtype_is_the_identity():
    def f(x):
        t = x * 1
        r = torch.nn.functional.dropout(t.view(-1), 0.3, training=True, inplace=True)
        return t, r, torch.nn.functional.dropout(x, 0.5)

    for dtype in (torch.int64, torch.float32):
        x = torch.zeros(0, 3, dtype=dtype)
        for e, a in zip(f(x), thunder.jit(f)(x)):
            torch.testing.assert_close(a, e)


def test_lru_cache_statistics_and_clear_inside_the_jitted_function_are_refused():
    # The prologue makes the cached calls, on every call: the trace kept the statistics read while tracing
    @functools.cache
    def steps(n):
        return tuple(range(n))

    def f(x):
        return x * len(steps(x.ndim + 1)), steps.cache_info().hits

    jf = thunder.jit(f)
    with pytest.raises(UnsupportedOpError, match=r"steps.cache_info\(\) inside the jitted function"):
        jf(torch.ones(2))
        jf(torch.ones(2))


def test_same_input_refuses_a_global_the_program_found_absent_and_wrote():
    # The second call reused the trace in which the global was absent (eager: 1, thunder: 0)
    def f(x):
        global _FUZZ_COUNTER
        try:
            _FUZZ_COUNTER += 1
        except NameError:
            _FUZZ_COUNTER = 0
        return x + _FUZZ_COUNTER

    globals().pop("_FUZZ_COUNTER", None)
    try:
        with pytest.raises(ThunderRuntimeError, match="the global '_FUZZ_COUNTER'"):
            thunder.jit(f, cache="same input")(torch.ones(2))
    finally:
        globals().pop("_FUZZ_COUNTER", None)


def test_an_out_argument_of_another_shape_after_an_effect_is_refused_not_run_eagerly():
    # Eager resizes ``out``; thunder's refusal is no mirror of an eager check, so it must not run the call eagerly
    # (with an EagerRunWarning, which reports a bug) when the program made effects before it.
    log = []

    def f(x):
        log.append(1)
        o = torch.empty(0)
        torch.add(x, 1, out=o)
        return o

    with pytest.raises(UnsupportedOpError, match="the out tensor has shape"):
        thunder.jit(f)(torch.ones(2))


def test_an_in_place_op_torch_refuses_at_run_time_leaves_eagers_effects_before_it():
    # The store into ``log`` is replayed after the data-dependent check; the computation failed at ``add_`` (a view
    # of unbind's, which autograd refuses to change) before it, and a refused op writes nothing: the call runs
    # eagerly and makes the store, as eager does.
    log = [0]

    def f(x):
        log[0] += 1
        t = x * 1
        t.unbind(0)[0].add_(1)
        if (t > 0).sum().item() > 2:
            t = t * 2
        return t

    for fn in (f, thunder.jit(f)):
        log[0] = 0
        with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
            fn(torch.randn(3, 4, requires_grad=True))
        assert log == [1]


@pytest.mark.parametrize("second", [lambda b: b.mT, lambda b: b, lambda b: b[1:]], ids=["transposed", "same", "rows"])
def test_an_out_argument_that_shares_memory_with_an_input_is_eagers(second):
    # ``y`` a transposed view of ``x``: eager refuses to write the elements it reads (partial overlap); thunder
    # computed ``x + 1`` and copied it into ``y``.
    def f(x, y):
        torch.add(x, 1, out=y)
        return x + y.sum()

    def args():
        b = torch.arange(9.0).reshape(3, 3).mT
        return (b, second(b)) if second(b).shape == b.shape else (b[:2], second(b))

    try:
        expected = f(*args())
    except RuntimeError as e:
        with pytest.raises(RuntimeError, match=re.escape(str(e))):
            thunder.jit(f)(*args())
        return
    torch.testing.assert_close(thunder.jit(f)(*args()), expected)


def test_a_copy_of_a_tensor_onto_itself_is_an_in_place_op():
    # ``y.copy_(x)`` with the same leaf passed twice: eager refuses the in-place op on a leaf that requires grad;
    # thunder took the copy onto itself for none and returned. On a computed tensor the gradient is eager's.
    def f(x, y):
        y.copy_(x)
        return x + y.sum()

    x = torch.randn(2, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        f(x, x)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        thunder.jit(f)(x, x)

    def g(x):
        t = x * 2
        t.copy_(t)
        return t * 3

    grads = []
    for fn in (g, thunder.jit(g)):
        x = torch.ones(2, requires_grad=True)
        fn(x).sum().backward()
        grads.append(x.grad)
    torch.testing.assert_close(grads[1], grads[0])
    torch.testing.assert_close(thunder.jit(g)(torch.ones(2)), g(torch.ones(2)))


def test_lru_cache_calls_with_equal_arguments_of_other_types_are_two_calls():
    # ``table(2)`` and ``table(2.0)`` are two entries of the cache (its key of a lone int is the int): the trace
    # took the second for the first and returned its ints.
    @functools.cache
    def table(k):
        return tuple(i * k for i in range(3))

    def f(x, n):
        return x + sum(table(2)), table(n)

    expected = f(torch.ones(2), 2.0)[1]
    table.cache_clear()
    actual = thunder.jit(f)(torch.ones(2), 2.0)[1]
    assert actual == expected and [type(v) for v in actual] == [type(v) for v in expected] == [float] * 3


# Note [Views whose history eager rebuilds]: ``b[1:].requires_grad_()`` is a leaf whose views have ``b`` (no grad)
# for base; after a write into that memory eager drops the gradient through a view made before the write.
_VIEWS = {
    "slice": lambda t: t[1:],
    "expand": lambda t: t.expand(2, *t.shape),
    "as_strided": lambda t: t.as_strided((2,), (1,)),
    "transpose": lambda t: t.t(),
    "view_of_view": lambda t: t[:, :1][1:],
}
_WRITES = {
    "detach": lambda base, x: x.detach().mul_(3),
    "base": lambda base, x: base.mul_(3),
}


def _leaf_view():
    base = torch.randn(4, 3)
    return base, base[1:].requires_grad_()


@pytest.mark.parametrize("write", _WRITES)
@pytest.mark.parametrize("view", _VIEWS)
def test_a_view_made_outside_read_after_a_write_into_a_leaf_views_memory_is_refused(view, write):
    def f(base, x, y):
        _WRITES[write](base, x)
        return x.sum() + y.sum()

    base, x = _leaf_view()
    y = _VIEWS[view](x)
    f(base, x, y).backward()  # eager: y's gradient dropped
    assert x.grad.sum().item() == x.numel()
    base, x = _leaf_view()
    with pytest.raises(ThunderRuntimeError, match="argument 'y' is a view of a tensor that does not require grad"):
        thunder.jit(f)(base, x, _VIEWS[view](x))


@pytest.mark.parametrize("write", _WRITES)
@pytest.mark.parametrize("view", _VIEWS)
def test_a_view_made_inside_read_after_a_write_into_a_leaf_views_memory_is_refused(view, write):
    def f(base, x):
        y = _VIEWS[view](x)
        _WRITES[write](base, x)
        return x.sum() + y.sum()

    base, x = _leaf_view()
    f(base, x).backward()
    assert x.grad.sum().item() == x.numel()
    with pytest.raises(ThunderRuntimeError, match="argument 'x' is a view of a tensor that does not require grad"):
        thunder.jit(f)(*_leaf_view())


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: torch.randn(3, 2).requires_grad_(), id="leaf"),
        pytest.param(lambda: torch.randn(4, 2)[1:].detach().requires_grad_(), id="detached_slice"),
        pytest.param(lambda: torch.randn(4, 2, requires_grad=True)[1:], id="view_of_a_leaf_requiring_grad"),
    ],
)
@pytest.mark.parametrize("view", _VIEWS)
def test_views_read_after_a_write_through_detach_keep_their_gradient_where_eager_does(view, make):
    def f(x, y):
        x.detach().mul_(3)
        return x.sum() + y.sum()

    def run(fn):
        torch.manual_seed(0)
        x = make()
        leaf = x if x.is_leaf else x._base
        out = fn(x, _VIEWS[view](x))
        out.backward()
        return out, leaf.grad

    expected, actual = run(f), run(thunder.jit(f))
    torch.testing.assert_close(actual, expected)


def test_a_leaf_view_written_through_data_or_read_only_itself_after_a_write_runs_as_eager():
    # ``x.data`` has its own version counter (eager rebuilds nothing); ``x`` itself is a leaf (no history to rebuild)
    def f(x):
        x.data.mul_(2)
        y = x.t()
        x.detach().add_(1)
        return x * 2, y.sum()

    def run(fn):
        torch.manual_seed(0)
        x = torch.randn(4, 3)[1:].requires_grad_()
        a, b = fn(x)
        (a.sum() + b).backward()
        return a, b, x.grad

    with pytest.raises(ThunderRuntimeError, match="argument 'x'"):  # y, made before the write, is read after it
        run(thunder.jit(f))

    def g(x):
        x.data.mul_(2)
        y = x.t()
        return x * 2, y.sum()

    torch.testing.assert_close(run(thunder.jit(g)), run(g))


_VIEWS_BY_TAKING = {  # views whose decomposition takes elements (or ends in an identity)
    "as_strided": lambda t: t.as_strided((2,), (1,)),
    "unfold": lambda t: t.unfold(1, 2, 1),
    "mH": lambda t: t.mH,
    "H": lambda t: t.H,
}


@pytest.mark.parametrize("view", _VIEWS_BY_TAKING)
def test_a_view_of_a_computed_tensor_sees_a_later_in_place_update_with_grad(view):
    # The update was made functional (a new value) as if nothing viewed the tensor: the view kept the old values.
    def f(x):
        a = x * 1
        v = _VIEWS_BY_TAKING[view](a)
        a.mul_(2)
        return v * 1

    def run(fn):
        x = torch.arange(9.0).reshape(3, 3).requires_grad_()
        out = fn(x)
        out.sum().backward()
        return out, x.grad

    torch.testing.assert_close(run(thunder.jit(f)), run(f))


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("D['k'] = x.sum()\n    acc = x + D['k']\n    D['k'] = None", id="dict_item_back_to_its_value"),
        pytest.param("L.append(x.sum())\n    acc = x + L[-1]\n    L.pop()", id="list_back_to_its_contents"),
    ],
)
def test_an_outside_container_changed_then_read_then_changed_back_ends_as_the_program_left_it(body):
    # The change made before the read is replayed where it was made; the copy ended as it began (on the second
    # call, whose trace starts from what the first left), so it was not written back: the replayed change stayed.
    def make():
        ns = {"torch": torch, "D": {}, "L": []}
        exec(f"def f(x):\n    {body}\n    return acc", ns)
        return ns

    eager, jitted = make(), make()
    jf = thunder.jit(jitted["f"])
    for k in range(3):
        x = torch.full((2,), float(k))
        torch.testing.assert_close(jf(x), eager["f"](x))
        assert repr(jitted["D"]) == repr(eager["D"]) and repr(jitted["L"]) == repr(eager["L"])


def test_a_rejecting_prologue_makes_no_lru_cache_call_with_its_own_arguments():
    # Under "symbolic values" the pinned argument was checked after the call: each entry's prologue called
    # ``_scale(its k)`` first, so the cache of 2 evicted what eager kept and ran the body again (COUNT 6, eager 4).
    def make():
        ns = {"functools": functools, "torch": torch}
        exec(
            "COUNT = [0]\nSTATE = {'k': 2}\n"
            "@functools.lru_cache(maxsize=2)\ndef _scale(k):\n    COUNT[0] += 1\n    return torch.full((), float(k))\n"
            "def f(x):\n    acc = x * _scale(STATE['k'])\n    STATE['k'] += 1\n    return acc\n",
            ns,
        )
        return ns

    eager, jitted = make(), make()
    jf = thunder.jit(jitted["f"], cache="symbolic values")
    for shape in [(2, 3), (2, 3), (3, 2), (2, 3)]:
        x = torch.randn(shape)
        torch.testing.assert_close(jf(x), eager["f"](x))
        assert jitted["COUNT"] == eager["COUNT"] and jitted["STATE"] == eager["STATE"]


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_contiguous_in_channels_last_has_eagers_values_and_strides(cache):
    def f(x):
        c = x.reshape(1, 3, 2, 2).contiguous(memory_format=torch.channels_last)
        d = c * 2
        return c.stride(), d.stride(), c.is_contiguous(), c.is_contiguous(memory_format=torch.channels_last), d

    x = torch.randn(4, 3)
    expected, actual = f(x), thunder.jit(f, cache=cache)(x)
    assert actual[:4] == expected[:4] and actual[4].stride() == expected[4].stride()
    torch.testing.assert_close(actual[4], expected[4])
    with pytest.raises(RuntimeError, match="required rank 4 tensor to use channels_last format"):
        thunder.jit(lambda t: t.contiguous(memory_format=torch.channels_last))(x)


def test_ops_with_zero_and_negative_zero_scalars_are_not_merged():
    # CSE keyed 0.0 and -0.0 alike (they are ==): ``x // -0.0`` took ``x // 0.0``'s result, of the other sign.
    def f(x):
        return x // 0.0, x // -0.0, 1 / (x * 0.0), 1 / (x * -0.0)

    x = torch.tensor([-3.2, 3.2])
    for e, a in zip(f(x), thunder.jit(f)(x)):
        torch.testing.assert_close(a, e)


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_a_list_argument_given_whole_to_a_tensor_method_is_checked(cache):
    # ``x.reshape(shape)`` runs the traced value's method natively, but the tracer took it for interpreted code that
    # reports its own reads: the list's items were never checked, and ``[2, 3]`` reused the trace made for ``[3, 2]``.
    def f(x, shape):
        return x.reshape(shape), x.new_zeros(shape), x.view(shape)

    jf = thunder.jit(f, cache=cache)
    for shape in ([3, 2], [2, 3], [6], [3, 2]):
        for e, a in zip(f(torch.arange(6.0), shape), jf(torch.arange(6.0), shape)):
            torch.testing.assert_close(a, e)


def test_an_op_failing_in_a_try_after_an_lru_cache_call_runs_the_handler_as_eager():
    # The prologue's lru_cache lookup counted as an effect that running the call eagerly would repeat, so the cached
    # call's failure in the try body propagated instead of running the handler (eager: the handler's value).
    def make():
        ns = {"functools": functools, "torch": torch}
        exec(
            "COUNT = [0]\n@functools.lru_cache(maxsize=2)\ndef _scale(k):\n    COUNT[0] += 1\n    return torch.full((), float(k))\n"
            "def f(x):\n    s = _scale(1)\n    try:\n        acc = x.to(torch.int64) ** -1\n    except RuntimeError:\n"
            "        acc = x * s\n    return acc\n",
            ns,
        )
        return ns

    eager, jitted = make(), make()
    jf = thunder.jit(jitted["f"])
    for _ in range(3):
        x = torch.zeros(0, dtype=torch.float64, requires_grad=True)
        torch.testing.assert_close(jf(x), eager["f"](x))
        assert jitted["COUNT"] == eager["COUNT"]


def test_an_in_place_write_into_a_leaf_that_requires_grad_fails_where_the_program_wrote():
    # Eager's refusal came at run time (after the trace had taken the try body): with an effect before it, the
    # program's handler did not run; with none, the call ran eagerly each time. Now the write fails while tracing,
    # as eager's RuntimeError, and the trace takes the handler; whether the argument is a leaf is checked per call.
    log = []

    def f(x):
        log.append(1)
        try:
            x.mul_(2)
        except RuntimeError as e:
            return x * 3, type(e).__name__
        return x * 3, None

    jf = thunder.jit(f)
    for make in (lambda: torch.ones(2, requires_grad=True), lambda: torch.ones(2, requires_grad=True) * 1) * 2:
        expected, actual = f(make()), jf(make())
        torch.testing.assert_close(actual[0], expected[0])
        assert actual[1] == expected[1]
    assert log == [1] * 8
