"""Everything a trace relied on is checked before the trace is reused.

Each test compiles a function, changes one piece of outside state the program read (or calls
with an input whose identity the check must tell apart), and compares the second call with
eager PyTorch (see Note [What a trace relied on] in ``thunder.core.jit_ext``).
"""

from __future__ import annotations

import contextlib
import math

import pytest
import torch

import thunder
from thunder.core.errors import ThunderRuntimeError

X = torch.arange(3.0)


def _same_as_eager(jf, f, *args):
    torch.testing.assert_close(jf(*args), f(*args), equal_nan=True, rtol=0, atol=0)


# --- functions and modules held by globals and closures ----------------------------------------------------


def helper(t):
    return t + 1


def calls_global_helper(t):
    return helper(t)


def test_global_function_rebound():
    global helper
    jf = thunder.jit(calls_global_helper)
    _same_as_eager(jf, calls_global_helper, X)
    old = helper
    try:
        helper = lambda t: t * 10  # noqa: E731
        _same_as_eager(jf, calls_global_helper, X)
    finally:
        helper = old
    _same_as_eager(jf, calls_global_helper, X)


def _with_setter():
    h = torch.sin

    def f(t):
        return h(t)

    def set_h(v):
        nonlocal h
        h = v

    return f, set_h


def test_closure_function_rebound_through_nonlocal():
    f, set_h = _with_setter()
    jf = thunder.jit(f)
    _same_as_eager(jf, f, X)
    set_h(torch.cos)
    _same_as_eager(jf, f, X)


def _helper_with_cell():
    k = 2

    def scaled(t):
        return t * k

    def set_k(v):
        nonlocal k
        k = v

    return scaled, set_k


scaled_helper, set_helper_k = _helper_with_cell()


def calls_helper_with_cell(t):
    return scaled_helper(t)


def test_closure_cell_of_a_helper():
    jf = thunder.jit(calls_helper_with_cell)
    _same_as_eager(jf, calls_helper_with_cell, X)
    set_helper_k(7)
    _same_as_eager(jf, calls_helper_with_cell, X)


def with_defaults(t, k=2, *, m=3):
    return t * k + m


def calls_with_defaults(t):
    return with_defaults(t)


def test_helper_defaults_and_kwdefaults():
    jf = thunder.jit(calls_with_defaults)
    _same_as_eager(jf, calls_with_defaults, X)
    old, old_kw = with_defaults.__defaults__, with_defaults.__kwdefaults__
    try:
        with_defaults.__defaults__ = (5,)
        _same_as_eager(jf, calls_with_defaults, X)
        with_defaults.__kwdefaults__ = {"m": -1}
        _same_as_eager(jf, calls_with_defaults, X)
    finally:
        with_defaults.__defaults__, with_defaults.__kwdefaults__ = old, old_kw


def test_defaults_of_the_jitted_function_itself():
    def f(t, k=2):
        return t * k

    jf = thunder.jit(f)
    _same_as_eager(jf, f, X)
    f.__defaults__ = (4,)
    _same_as_eager(jf, f, X)


# --- attributes of objects the program reads -----------------------------------------------------------------


class Scaler:
    def __init__(self):
        self.k = 2.0

    def apply(self, t):
        return t * self.k


def test_bound_method_receiver():
    s = Scaler()
    jf = thunder.jit(s.apply)
    _same_as_eager(jf, s.apply, X)
    s.k = 5.0
    _same_as_eager(jf, s.apply, X)


def test_callable_object():
    class Adder:
        def __init__(self):
            self.k = 1.0

        def __call__(self, t):
            return t + self.k

    a = Adder()
    jf = thunder.jit(a)
    _same_as_eager(jf, a, X)
    a.k = -3.0
    _same_as_eager(jf, a, X)


class ScaledLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = 2.0
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, t):
        return self.lin(t * self.scale)


global_module = ScaledLinear()


def calls_global_module(t):
    return global_module(t)


def test_global_module_attribute_read_before_its_tensors():
    jf = thunder.jit(calls_global_module)
    _same_as_eager(jf, calls_global_module, X)
    global_module.scale = 3.0
    _same_as_eager(jf, calls_global_module, X)


dropout = torch.nn.Dropout(0.0)


def calls_dropout(t):
    return dropout(t)


def test_dropout_p_changed():
    jf = thunder.jit(calls_dropout)
    _same_as_eager(jf, calls_dropout, X)
    dropout.p = 1.0
    try:
        _same_as_eager(jf, calls_dropout, X)
    finally:
        dropout.p = 0.0


def test_training_flag_of_a_global_module():
    d = torch.nn.Dropout(1.0)
    f = lambda t: d(t)  # noqa: E731
    jf = thunder.jit(f)
    d.eval()
    _same_as_eager(jf, f, X)
    d.train()
    _same_as_eager(jf, f, X)


def test_submodule_attribute_reached_through_a_module_list():
    class Scale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.k = 2.0

        def forward(self, t):
            return t * self.k

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([Scale(), Scale(), Scale()])

        def forward(self, t):
            for layer in self.layers[:2]:  # slicing builds a new ModuleList inside the program
                t = layer(t)
            return t

    net = Net()
    jm = thunder.jit(net)
    _same_as_eager(jm, net, X)
    net.layers[1].k = 10.0
    _same_as_eager(jm, net, X)


def test_class_attribute_of_a_user_class():
    class Config:
        SCALE = 2.0

    f = lambda t: t * Config.SCALE  # noqa: E731
    jf = thunder.jit(f)
    _same_as_eager(jf, f, X)
    Config.SCALE = 9.0
    _same_as_eager(jf, f, X)


def test_getattr_and_hasattr_builtins():
    class C:
        pass

    c = C()
    f = lambda t, c: t * getattr(c, "k", 1.0) if hasattr(c, "k") or True else t  # noqa: E731
    jf = thunder.jit(f)
    _same_as_eager(jf, f, X, c)
    c.k = 4.0
    _same_as_eager(jf, f, X, c)
    g = lambda t, c: t * 2 if hasattr(c, "m") else t  # noqa: E731
    jg = thunder.jit(g)
    _same_as_eager(jg, g, X, c)
    c.m = 1
    _same_as_eager(jg, g, X, c)


# --- a read of the prologue that raises is a miss (Note [A prologue that raises misses]) --------------------

CACHES = ["constant values", "symbolic values", "same input"]


class _Settings:
    pass


@pytest.mark.parametrize("cache", CACHES[:2])
def test_attribute_deleted_after_the_program_caught_its_absence(cache):
    settings = _Settings()
    settings.scale = 2.0

    def f(t):
        try:
            scale = settings.scale
        except AttributeError:
            scale = 1.0
        return t * scale

    jf = thunder.jit(f, cache=cache)
    _same_as_eager(jf, f, X)
    _same_as_eager(jf, f, X)
    del settings.scale  # the prologue's read of it raised AttributeError, where eager takes the except branch
    _same_as_eager(jf, f, X)
    _same_as_eager(jf, f, X)
    assert thunder.cache_misses(jf) == 2
    assert "reading settings_scale raised AttributeError" in str(thunder.cache_miss_reasons(jf)[-1])


def _reads_extra_with_attribute(obj):
    return obj.extra


def _reads_extra_with_getattr(obj):
    return getattr(obj, "extra")  # noqa: B009 - the builtin is what is tested


@pytest.mark.parametrize("read", [_reads_extra_with_attribute, _reads_extra_with_getattr], ids=["attribute", "getattr"])
@pytest.mark.parametrize("owner", ["object", "module"])
@pytest.mark.parametrize("cache", CACHES[:2])
def test_absent_attribute_the_program_caught_is_checked(read, owner, cache):
    # Found by the randomized tester (seed 685252): traced while the attribute was absent, the entry kept
    # taking the except branch after the attribute was set.
    holder = _Settings() if owner == "object" else torch.nn.Module()

    def f(t):
        try:
            scale = read(holder)
        except AttributeError:
            scale = -1.0
        return t + scale

    jf = thunder.jit(f, cache=cache)
    for change in (None, lambda: setattr(holder, "extra", 0.5), lambda: delattr(holder, "extra"),
                   lambda: setattr(holder, "extra", 3.0), None):  # fmt: skip
        if change is not None:
            change()
        _same_as_eager(jf, f, X)


def _reads_undefined_global(t):
    try:
        scale = UNDEFINED_AT_FIRST  # noqa: F821 - defined and deleted by the test
    except NameError:
        scale = -1.0
    return t + scale


@pytest.mark.parametrize("cache", CACHES[:2])
def test_undefined_global_the_program_caught_is_checked(cache):
    jf = thunder.jit(_reads_undefined_global, cache=cache)
    try:
        for value in (None, 0.5, None, 3.0):
            if value is None:
                globals().pop("UNDEFINED_AT_FIRST", None)
            else:
                globals()["UNDEFINED_AT_FIRST"] = value
            _same_as_eager(jf, _reads_undefined_global, X)
        assert "the global 'UNDEFINED_AT_FIRST' of module" in str(thunder.cache_miss_reasons(jf)[-1])
    finally:
        globals().pop("UNDEFINED_AT_FIRST", None)


@pytest.mark.parametrize("cache", CACHES)
def test_data_dependent_error_comes_before_a_deleted_attribute(cache):
    # Found by the randomized tester (3.12, seed 610914): eager fails at the take before it reads the attribute.
    settings = _Settings()
    settings.flag = True

    def f(t):
        _ = t.take(torch.tensor([100]))
        return t * 2 if settings.flag else t

    jf = thunder.jit(f, cache=cache)
    _same_as_eager(jf, f, torch.ones(200))
    del settings.flag
    small = torch.ones(5)
    with pytest.raises(IndexError, match="out of range") as eager:
        f(small)
    with pytest.raises(IndexError, match="out of range") as jitted:
        jf(small)
    assert str(jitted.value) == str(eager.value)
    with pytest.raises(AttributeError, match="no attribute 'flag'"):
        jf(torch.ones(200))


# --- global containers changed in place ----------------------------------------------------------------------

GLOBAL_SET = {1, 2}
GLOBAL_INT_DICT = {1: 2.0}
GLOBAL_LIST = [1.0]


def reads_set(t):
    return t * (3 in GLOBAL_SET)


def reads_int_dict(t):
    return t * GLOBAL_INT_DICT[1]


def reads_list(t):
    return t * GLOBAL_LIST[0]


@pytest.mark.parametrize(
    "f, change",
    [
        (reads_set, lambda: GLOBAL_SET.add(3)),
        (reads_int_dict, lambda: GLOBAL_INT_DICT.__setitem__(1, 5.0)),
        (reads_list, lambda: GLOBAL_LIST.__setitem__(0, 4.0)),
    ],
    ids=["set", "dict-int-keys", "list"],
)
def test_global_container_mutated_in_place(f, change):
    jf = thunder.jit(f)
    _same_as_eager(jf, f, X)
    change()
    _same_as_eager(jf, f, X)


# --- Python numbers whose identity an equality check misses --------------------------------------------------


def sign_of(t, a):
    return t * math.copysign(1.0, a)


def test_negative_zero_after_zero():
    jf = thunder.jit(sign_of)
    _same_as_eager(jf, sign_of, X, 0.0)
    _same_as_eager(jf, sign_of, X, -0.0)


def test_nan_argument():
    f = lambda t, a: t * a  # noqa: E731
    jf = thunder.jit(f)
    _same_as_eager(jf, f, X, float("nan"))
    _same_as_eager(jf, f, X, float("nan"))
    assert thunder.cache_misses(jf) == 1
    _same_as_eager(jf, f, X, 1.5)


def test_true_after_one():
    f = lambda t, a: t * 2 if type(a) is bool else t - 1  # noqa: E731
    jf = thunder.jit(f)
    _same_as_eager(jf, f, X, True)
    _same_as_eager(jf, f, X, 1)


def test_aliased_tensor_arguments():
    f = lambda a, b: a + b  # noqa: E731
    jf = thunder.jit(f)
    a, b = torch.ones(3), torch.full((3,), 5.0)
    _same_as_eager(jf, f, a, a)
    _same_as_eager(jf, f, a, b)


# --- iterators -----------------------------------------------------------------------------------------------


def sums_iterator(t, it):
    return t + sum(it)


@pytest.mark.parametrize("make", [lambda v: iter(v), lambda v: (i for i in v)], ids=["iterator", "generator"])
def test_iterator_argument_is_consumed_by_every_call(make):
    jf = thunder.jit(sums_iterator)
    for items in ([1, 2], [5, 6], [7], [7], []):
        torch.testing.assert_close(jf(X, make(items)), sums_iterator(X, make(items)))
    it = make([3])
    jf(X, it)
    assert list(it) == []  # consumed, as eager consumes it


def _partly_consumed(t, it):
    return t + next(it) * next(it)


def _consumed_until_large(t, it):
    for v in it:
        if v > 2:
            break
        t = t + v
    return t


@pytest.mark.parametrize("f", [_partly_consumed, _consumed_until_large])
@pytest.mark.parametrize("make", [lambda v: iter(v), lambda v: (i for i in v)], ids=["iterator", "generator"])
@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_iterator_argument_is_left_where_eager_leaves_it(f, make, cache):
    jf = thunder.jit(f, cache=cache)
    for items in ([1, 2, 5, 7], [1, 2, 5, 7], [3, 1, 4], [1, 5, 9, 2], [1, 1, 1, 9, 8]):
        it, expected_it = make(items), make(items)
        torch.testing.assert_close(jf(X, it), f(X, expected_it))
        assert list(it) == list(expected_it)  # the rest is still there, as in eager


def test_endless_iterator_argument():
    import itertools

    f = lambda t, it: t + next(it)  # noqa: E731
    jf = thunder.jit(f)
    for start in (0, 0, 5):
        it, expected_it = itertools.count(start), itertools.count(start)
        torch.testing.assert_close(jf(X, it), f(X, expected_it))
        assert next(it) == next(expected_it)


def test_kind_of_iterator_argument_is_checked():
    import types

    f = lambda t, it: t * 2 if isinstance(it, types.GeneratorType) else t * 3  # noqa: E731
    jf = thunder.jit(f)
    for make in (lambda: (i for i in [1]), lambda: iter([1]), lambda: (i for i in [1])):
        torch.testing.assert_close(jf(X, make()), f(X, make()))


def _takes_two_if_contiguous(t, it):
    a = next(it)
    if t.is_contiguous():
        return t + a + next(it)
    return t + a


def test_iterator_argument_taken_further_than_eager_is_a_clear_error():
    # The first trace pulls two items before the check that tells the second call apart (tensor strides are
    # checked at the end): the second call's trace takes one, and a generator's taken item cannot be put back.
    jf = thunder.jit(_takes_two_if_contiguous)
    make = lambda v: (i for i in v)  # noqa: E731
    torch.testing.assert_close(jf(X, make([1, 2])), _takes_two_if_contiguous(X, make([1, 2])))
    y = torch.arange(6.0)[::2]
    with pytest.raises(ThunderRuntimeError, match="iterator passed as positional argument 1 was advanced further"):
        jf(y, make([1, 2, 3]))


@pytest.mark.parametrize("make", [lambda v: iter(v), lambda v: iter(tuple(v)), lambda v: reversed(v)])
def test_iterator_over_a_sequence_rejected_after_pulls_is_left_where_eager_leaves_it(make):
    # As above, but a list's (tuple's, ...) iterator is only copied by the prologues (Note [Iterator arguments])
    jf = thunder.jit(_takes_two_if_contiguous)
    y = torch.arange(6.0)[::2]
    for t in (X, y, X, y):
        it, expected_it = make([1, 2, 3]), make([1, 2, 3])
        torch.testing.assert_close(jf(t, it), _takes_two_if_contiguous(t, expected_it))
        assert list(it) == list(expected_it)


def test_iterator_argument_used_other_than_by_iterating_is_a_clear_error():
    with pytest.raises(ThunderRuntimeError, match="it.send: it is an iterator argument"):
        thunder.jit(lambda t, it: t + it.send(None))(X, (i for i in [1]))
    with pytest.raises(ThunderRuntimeError, match="it, an iterator argument, leaves the jitted function"):
        thunder.jit(lambda t, it: (t, it))(X, iter([1]))
    with pytest.raises(ThunderRuntimeError, match="not one passed to it as an argument"):
        thunder.jit(lambda t, its: t + next(its[0]))(X, (iter([1]),))


# --- values read natively: slices, ranges, bytes, shapes -----------------------------------------------------


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
@pytest.mark.parametrize(
    "f, values",
    [
        (lambda t, s: t[s], [slice(0, 2), slice(3, 8, 2), slice(1, None), slice(0, 2)]),
        (lambda t, r: t.sum() + sum(r), [range(3), range(5), range(1, 4), range(3)]),
        (lambda t, b: t + len(b), [b"ab", b"abc", b"ab"]),
        (lambda t, s: t.reshape(s), [torch.Size([2, 5]), torch.Size([5, 2]), torch.Size([10])]),
    ],
    ids=["slice", "range", "bytes", "torch.Size"],
)
def test_values_read_natively_are_checked(f, values, cache):
    jf = thunder.jit(f, cache=cache)
    t = torch.arange(10.0)
    for v in values:
        _same_as_eager(jf, f, t, v)


# --- copies of outside objects -----------------------------------------------------------------------------


@pytest.mark.parametrize("copier", ["deepcopy", "copy"])
def test_copy_of_a_module_argument_copies_this_calls_module(copier):
    import copy

    f = lambda m, x: getattr(copy, copier)(m)(x)  # noqa: E731
    jf = thunder.jit(f)
    x = torch.randn(2, 3)
    m1, m2 = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)
    for m in (m1, m2, m1):
        _same_as_eager(jf, f, m, x)


def test_deepcopy_of_an_argument_is_a_new_object_with_its_own_gradients():
    import copy

    def f(m, t):
        c = copy.deepcopy(m)
        u = copy.deepcopy(t)
        return c(u), u

    m, t = torch.nn.Linear(3, 2), torch.randn(2, 3, requires_grad=True)
    out, u = thunder.jit(f)(m, t)
    torch.testing.assert_close(out, m(t))
    assert u is not t and out.requires_grad
    out.sum().backward()
    assert m.weight.grad is None and t.grad is None and u.grad is not None  # the copies get them, as in eager


def test_deepcopy_after_changing_outside_state_is_a_clear_error():
    import copy

    class Box:
        pass

    def f(b, t):
        b.scale = 2.0
        return copy.deepcopy(b).scale * t

    b = Box()
    b.scale = 1.0
    with pytest.raises(ThunderRuntimeError, match=r"copy.deepcopy\(b\) copies an object from outside"):
        thunder.jit(f)(b, X)


def test_deepcopy_after_changing_a_container_it_does_not_hold():
    """Hugging Face's encoder-decoders with ``output_hidden_states=True``: the program appends to an outside list,
    then deep-copies a config that does not hold that list: the copy is the prologue's, as before the change."""
    import copy

    class Config:
        def __init__(self):
            self.scale, self.sizes, self.sub = 2.0, {"a": [1, 2]}, None

    config, other = Config(), Config()
    config.sub = other
    collected: list = []

    def f(t):
        collected.append(t)
        return copy.deepcopy(config).sub.scale * t + len(config.sizes["a"])

    jf = thunder.jit(f)
    for _ in range(2):
        torch.testing.assert_close(jf(X), f(X))
    assert len(collected) == 4  # the program's appends replayed on each call, eager's too


def test_deepcopy_after_changing_a_container_it_holds_is_a_clear_error():
    import copy

    class Config:
        def __init__(self):
            self.sizes = [1, 2]

    config = Config()

    def f(t):
        config.sizes.append(3)
        return copy.deepcopy(config).sizes[-1] * t

    with pytest.raises(ThunderRuntimeError, match=r"copies an object from outside"):
        thunder.jit(f)(X)

    class Slotted:  # what deepcopy copies of it is not followed: refused
        __slots__ = ("sizes",)

    s, held = Slotted(), []
    s.sizes = held

    def g(t):
        held.append(1)
        return t * len(copy.deepcopy(s).sizes)

    with pytest.raises(ThunderRuntimeError, match=r"copies an object from outside"):
        thunder.jit(g)(X)


# --- global torch state ------------------------------------------------------------------------------------


@contextlib.contextmanager
def _default_dtype(dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


@contextlib.contextmanager
def _deterministic():
    old = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        yield
    finally:
        torch.use_deterministic_algorithms(old)


_TORCH_STATE = {
    "grad mode": (torch.is_grad_enabled, torch.no_grad),
    "inference mode": (torch.is_inference_mode_enabled, torch.inference_mode),
    "default dtype": (lambda: torch.get_default_dtype() is torch.float32, lambda: _default_dtype(torch.float64)),
    "deterministic": (torch.are_deterministic_algorithms_enabled, _deterministic),
    "cudnn deterministic": (lambda: torch.backends.cudnn.deterministic, lambda: torch.backends.cudnn.flags(deterministic=True)),
    "autocast": (lambda: torch.is_autocast_enabled("cpu"), lambda: torch.autocast("cpu")),
}


@pytest.mark.parametrize("state", list(_TORCH_STATE))
def test_torch_state_read_by_the_program_is_checked(state):
    read, changed = _TORCH_STATE[state]

    def f(t):
        return t * 2 if read() else t * 3

    jf = thunder.jit(f)
    _same_as_eager(jf, f, X)
    with changed():
        _same_as_eager(jf, f, X)
    _same_as_eager(jf, f, X)
    assert thunder.cache_misses(jf) == 2


def test_torch_state_the_program_does_not_read_is_not_checked():
    jf = thunder.jit(lambda t: t + 1)
    jf(X)
    prologue = str(thunder.last_prologue_traces(jf)[-1])
    for what in ("is_grad_enabled", "inference_mode", "default_dtype", "deterministic", "autocast"):
        assert what not in prologue


# --- tensor state the program looked at ----------------------------------------------------------------------


def test_grad_of_an_input_reads_the_real_grad():
    def f(t):
        g = t.grad
        return t * 2 if g is None else t * g

    x = torch.ones(3, requires_grad=True)
    jf = thunder.jit(f)
    _same_as_eager(jf, f, x)
    x.grad = torch.full((3,), 5.0)
    _same_as_eager(jf, f, x)
    x.grad = torch.full((3,), -1.0)
    _same_as_eager(jf, f, x)


def test_contiguity_of_an_input_is_checked():
    f = lambda t: t * 2 if t.is_contiguous() else t * 3  # noqa: E731
    jf = thunder.jit(f)
    a = torch.ones(3, 3)
    _same_as_eager(jf, f, a)
    _same_as_eager(jf, f, a.t())
    _same_as_eager(jf, f, a)
    assert thunder.cache_misses(jf) == 2


def test_jitted_function_called_by_a_jitted_function():
    inner = thunder.jit(lambda t: t + 1)

    def outer(t):
        return inner(t) * 2

    jf = thunder.jit(outer)
    out = jf(X)
    assert thunder.cache_misses(inner) == 0  # traced through, not compiled on proxies
    torch.testing.assert_close(out, (X + 1) * 2)



def test_symbolic_nan_against_a_branch():
    f = lambda t, n: t * 2 if n > 2 else t + 1  # noqa: E731
    jf = thunder.jit(f, cache="symbolic values")
    for v in (float("nan"), 1.0, 5.0, float("nan")):
        _same_as_eager(jf, f, X, v)


def test_replacing_a_block_of_a_module_list_iterated_by_enumerate():
    import copy

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(3, 3) for _ in range(2)])

        def forward(self, t):
            for _, block in enumerate(self.blocks):  # enumerate iterates natively: ModuleList.__iter__ must be traced
                t = block(t)
            return t * len(self.blocks)

    net = Net()
    jm = thunder.jit(net)
    torch.testing.assert_close(jm(X), net(X))
    net.blocks[1] = copy.deepcopy(net.blocks[0])
    torch.testing.assert_close(jm(X), net(X))
    net.blocks.append(torch.nn.Linear(3, 3))
    torch.testing.assert_close(jm(X), net(X))


ADD_TWICE = __import__("functools").partial(torch.add, alpha=2)


def calls_global_partial(t):
    return ADD_TWICE(t, 1)


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_global_partial_rebound(cache):
    import functools

    global ADD_TWICE
    jf = thunder.jit(calls_global_partial, cache=cache)
    _same_as_eager(jf, calls_global_partial, X)
    old = ADD_TWICE
    try:
        ADD_TWICE = functools.partial(torch.add, alpha=3)
        _same_as_eager(jf, calls_global_partial, X)
    finally:
        ADD_TWICE = old


def test_requires_grad_of_intermediates_as_in_eager():
    def f(x):
        y = x * 2 + 3
        return y, y.requires_grad, y.detach().requires_grad, torch.zeros_like(y).requires_grad, (y > 0).requires_grad

    x = torch.randn(6)[::2].requires_grad_()
    jf = thunder.jit(f)
    assert jf(x)[1:] == f(x)[1:] == (True, False, False, False)
    with torch.no_grad():  # the answer depends on the grad mode: checked, so this recompiles
        assert jf(x)[1:] == f(x)[1:] == (False, False, False, False)
    assert thunder.cache_misses(jf) == 2


class _Key:
    """A hashable key that is not a literal: the prologue holds it by identity."""

    def __init__(self, n):
        self.n = n

    def __hash__(self):
        return hash(self.n)

    def __eq__(self, other):
        return isinstance(other, _Key) and other.n == self.n


CUSTOM_KEYED = {_Key(1): 2.0}
CUSTOM_SET = {_Key(1)}


def test_outside_dicts_and_sets_with_object_keys_are_checked():
    def f(x):
        return x * CUSTOM_KEYED[_Key(1)] + (1 if _Key(1) in CUSTOM_SET else 0)

    jf = thunder.jit(f)
    x = torch.ones(2)
    torch.testing.assert_close(jf(x), f(x))
    CUSTOM_KEYED[_Key(1)] = 5.0
    torch.testing.assert_close(jf(x), f(x))
    CUSTOM_SET.clear()
    torch.testing.assert_close(jf(x), f(x))
    CUSTOM_KEYED[_Key(2)] = 1.0  # another key: the keys are checked too
    torch.testing.assert_close(jf(x), f(x))
    assert thunder.cache_misses(jf) == 4


_BYTES_KEYED = {bytes([i, i]): i for i in range(80)}  # bytes keys are globals of the prologue, one each


def test_many_prologue_constants_do_not_shadow_a_dtype_check():
    # The 65th constant of a prologue was named ``_c64``, the name its complex64 tensor check uses for the dtype:
    # the check then compared the dtype with a bytes key and the new entry rejected its own inputs (InternalError).
    def f(x):
        return x * sum(_BYTES_KEYED.values())

    x = torch.randn(3, dtype=torch.complex64)
    jf = thunder.jit(f)
    torch.testing.assert_close(jf(x), f(x))
    torch.testing.assert_close(jf(x), f(x))
    assert thunder.cache_misses(jf) == 1


def test_printer_constants_never_take_a_name_in_use():
    from thunder.core.codegen import Printer

    p = Printer()
    p.add_ctx("_const3", torch.complex64)
    names = [p.constant(object()) for _ in range(10)]
    assert p.ctx["_const3"] is torch.complex64 and "_const3" not in names and len(set(names)) == 10


def test_a_global_read_flattens_to_its_three_arguments():
    # Flattening an unpack_global's arguments walked the module's whole globals dict (45 reads of transformers'
    # modules in a GPT-2 prologue flattened 26,000 values, a fifth of the time to compile it).
    jf = thunder.jit(_reads_a_global)
    jf(torch.randn(2))
    reads = [b for b in thunder.last_prologue_traces(jf)[0].bound_symbols if b.sym.name == "unpack_global"]
    assert reads and all(len(b.flat_args) == 3 for b in reads)


_SCALE = 2.0


def _reads_a_global(x):
    return x * _SCALE


def test_a_dict_with_its_keys_in_another_order_is_another_input():
    """The keys were compared as a set: a batch dict with the same keys in another order reused the entry, and
    the program iterated it in the first call's order."""

    def f(d):
        return list(d), [v * i for i, v in enumerate(d.values())]

    jf = thunder.jit(f)
    for d in ({"a": torch.ones(1), "b": torch.ones(1)}, {"b": torch.full((1,), 2.0), "a": torch.ones(1)}):
        expected, actual = f(d), jf(d)
        assert actual[0] == expected[0]
        for a, e in zip(actual[1], expected[1]):
            torch.testing.assert_close(a, e)


def test_keys_and_set_elements_that_are_equal_but_of_other_types_are_other_inputs():
    """1, 1.0 and True are equal (one dict key, one set element) but the program sees their types."""
    jf = thunder.jit(lambda x, s: [torch.full((1,), v).dtype for v in s])
    jg = thunder.jit(lambda x, d: [type(k) for k in d])
    for s in ({1}, {1.0}, {True}):
        assert jf(torch.ones(1), s) == [torch.full((1,), v).dtype for v in s]
    jh = thunder.jit(lambda x, s: sorted(type(v).__name__ for v in s))
    for s in (frozenset({2, "a"}), frozenset({2.0, "a"})):
        assert jh(torch.ones(1), s) == sorted(type(v).__name__ for v in s)
    for d in ({1: 0}, {1.0: 0}, {True: 0}):
        assert jg(torch.ones(1), d) == [type(k) for k in d]


def test_a_key_whose_eq_checks_its_type_is_found_in_an_outside_list_set_and_dict():
    """The stand-ins that run a user's dunders for C functions (Note [Dunders called by C functions]) were given to
    ``in`` on a set and to ``dict.get``/``list.index``: the held key's ``__eq__`` saw a stand-in, failed its
    ``isinstance`` check, and ``_Key(1) in {_Key(1)}`` was False (a silent wrong result)."""
    keys = [_Key(1), _Key(2)]

    def f(x):
        k = _Key(2)
        found = (k in set(keys), k in dict.fromkeys(keys), keys.index(k), keys.count(k), {q: 3.0 for q in keys}.get(k))
        return x * found[-1] + found[2], found

    jf = thunder.jit(f)
    for _ in range(2):
        expected, actual = f(torch.ones(2)), jf(torch.ones(2))
        torch.testing.assert_close(actual[0], expected[0])
        assert actual[1] == expected[1]
