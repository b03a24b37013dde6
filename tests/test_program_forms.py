"""Forms of Python programs that either work as in eager or fail with a message saying what to do."""

from __future__ import annotations

import collections
import dataclasses
import functools
import types

import pytest
import torch

import thunder
from thunder.core.errors import ThunderRuntimeError

X = torch.ones(3)


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_returned_shape_is_a_torch_size(cache):
    jf = thunder.jit(lambda t: (t.shape, t.size(), t.shape[1:]), cache=cache)
    for t in (torch.ones(2, 3), torch.ones(4, 5)):
        got = jf(t)
        assert [type(v) for v in got] == [torch.Size] * 3
        assert got == (t.shape, t.size(), t.shape[1:])


def test_returning_a_started_generator_is_a_clear_error():
    """A generator not started yet is made again by each call (tests/test_eager_gaps.py); one the function already
    advanced cannot be."""

    def gen(t):
        yield t + 1
        yield t + 2

    def started(t):
        g = gen(t)
        next(g)
        return g

    with pytest.raises(ThunderRuntimeError, match=r"returned a generator.*already run.*Return a list or tuple"):
        thunder.jit(started)(X)


def scaled(t, k=1, m=2):
    return t * k + m


@pytest.mark.parametrize(
    "p, args",
    [(functools.partial(scaled, k=3), (X,)), (functools.partial(scaled, m=5), (X, 2)), (functools.partial(scaled, X), ())],
    ids=["kw", "kw-and-positional", "positional"],
)
def test_partial_with_keyword_arguments(p, args):
    torch.testing.assert_close(thunder.jit(p)(*args), p(*args))


def test_partial_keywords_are_checked():
    p = functools.partial(scaled, k=3)
    jp = thunder.jit(p)
    jp(X)
    p.keywords["k"] = 10  # a partial's keywords dict can be changed in place
    torch.testing.assert_close(jp(X), p(X))


def test_partial_of_a_torch_function():
    p = functools.partial(torch.add, alpha=2)
    torch.testing.assert_close(thunder.jit(p)(X, X), p(X, X))


def _capture(*args, **kwargs):
    return args, kwargs


class _WithPartialMethods:
    nothing = functools.partialmethod(_capture)
    positional = functools.partialmethod(_capture, 1)
    keywords = functools.partialmethod(_capture, a=2)
    nested = functools.partialmethod(positional, 5)
    static = functools.partialmethod(staticmethod(_capture), 8)
    cls = functools.partialmethod(classmethod(_capture), d=9)


_PM = _WithPartialMethods()


@pytest.mark.parametrize(
    "call",
    [lambda: _PM.nothing(5), lambda: _PM.positional(5, c=6), lambda: _PM.keywords(), lambda: _PM.nested(6, d=7),
     lambda: _PM.static(), lambda: _PM.cls()],  # fmt: skip
    ids=["nothing", "positional", "keywords", "nested", "static", "classmethod"],
)
def test_functools_partialmethod(call):
    # Each read of a partialmethod makes a new partial: it is checked by what it holds, not by identity.
    jf = thunder.jit(call)
    assert jf() == call()
    assert jf() == call()
    assert thunder.cache_misses(jf) == 1


def test_a_dataclass_mapping_whose_fields_are_not_items():
    import dataclasses

    @dataclasses.dataclass
    class Output(dict):  # diffusers' outputs: fields set as attributes
        count: int
        t: torch.Tensor = None

    def f(x):
        out = Output(count=1, t=x * 2)
        out["extra"] = x + 1
        return out

    x = torch.ones(2)
    got, want = thunder.jit(f)(x), f(x)
    assert type(got) is Output and got.count == 1 and type(got.t) is torch.Tensor
    torch.testing.assert_close(got.t, want.t)
    torch.testing.assert_close(got["extra"], want["extra"])


def test_a_model_output_passed_in_gives_traced_values():
    # T5/BART/Whisper called with encoder_outputs=...: ModelOutput.__getitem__ reads self.items() natively.
    pytest.importorskip("transformers")
    from transformers.modeling_outputs import BaseModelOutput

    def f(enc, x):
        return enc[0] * x + enc.last_hidden_state.sum()

    enc = BaseModelOutput(last_hidden_state=torch.randn(2, 3))
    jf = thunder.jit(f)
    for value in (enc, BaseModelOutput(last_hidden_state=torch.randn(2, 3))):
        torch.testing.assert_close(jf(value, torch.ones(3)), f(value, torch.ones(3)))
    assert thunder.cache_misses(jf) == 1


def test_a_named_tuple_input_is_unpacked_like_a_tuple():
    """Indexing or unpacking a named tuple given as an input (a user's record, ``PackedSequence``) gave
    the real tensors, which ops then refused; its attributes were traced. Its items are inputs now."""
    import collections

    Pair = collections.namedtuple("Pair", "a b")

    def f(p):
        a, b = p
        return Pair(a + b * p[1] + p.a, p[0].sum())

    jf = thunder.jit(f)
    x = torch.randn(3, requires_grad=True)
    xe = x.detach().clone().requires_grad_()
    for a, ae in ((x, xe), (torch.randn(3), None)):
        b = torch.randn(3)
        actual, expected = jf(Pair(a, b)), f(Pair(a if ae is None else ae, b))
        assert type(actual) is Pair
        torch.testing.assert_close(tuple(actual), tuple(expected))
        if ae is not None:
            actual.a.sum().backward()
            expected.a.sum().backward()
            torch.testing.assert_close(x.grad, xe.grad)


@functools.lru_cache
def _causal_mask(n: int) -> torch.Tensor:
    return torch.tril(torch.ones(n, n))


@functools.cache
def _scale(d: int) -> float:
    return d**-0.5


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_a_cached_helper_is_looked_up_on_every_call(cache):
    # ``functools.lru_cache``/``cache`` helpers (a causal mask made once per length): the tensor they return reached
    # the trace untraced, a clear error where eager works. Now the prologue looks it up on every call, as eager's.
    def f(x):
        return x * _causal_mask(x.shape[-1]) * _scale(x.shape[-1])

    jf = thunder.jit(f, cache=cache)
    for n in (3, 3, 5, 4, 3):
        x = torch.randn(2, n, n)
        before = _causal_mask.cache_info()
        torch.testing.assert_close(jf(x), f(x))
        assert _causal_mask.cache_info().hits + _causal_mask.cache_info().misses > before.hits + before.misses + 1
    assert thunder.cache_misses(jf) <= 3


class _Made:
    pass


def _makes_objects(x):
    c = _Made()
    c.v, c.items = 3, [1]
    shared = [1]
    return x * 2, c, {1, 2}, frozenset({3}), shared, shared, [c, c]


@pytest.mark.parametrize("requires_grad", [False, True])
def test_each_call_returns_new_objects_the_program_made(requires_grad):
    """An object, list or set the program makes is a new one on each call, as in eager: changing what one call
    returned does not change what the next returns (a made object holding no traced value, and a set, were
    constants of the trace, so the second call returned the first's, changed)."""
    jf = thunder.jit(_makes_objects)
    x = torch.randn(2, requires_grad=requires_grad)
    first = jf(x)
    first[1].v = 99
    first[1].items.append(5)
    first[2].add(3)
    expected = _makes_objects(x)
    second = jf(x)
    assert second[1] is not first[1] and second[2] is not first[2]
    assert (second[1].v, second[1].items) == (expected[1].v, expected[1].items) == (3, [1])
    assert second[2:4] == expected[2:4] and type(second[3]) is frozenset


def test_an_object_returned_twice_is_one_object():
    """``return l, l`` and ``[c, c]`` give one object twice, as in eager (they were two copies)."""
    out = thunder.jit(_makes_objects)(torch.randn(2))
    assert out[4] is out[5]
    assert out[6][0] is out[6][1]

    def holder_and_item(x):
        items = []
        return {"items": items}, items

    d, items = thunder.jit(holder_and_item)(torch.randn(2))
    items.append(1)
    assert d["items"] is items


_GLOBAL_LIST = [1, 2]


def test_an_outside_list_stored_stays_itself():
    """``self.l = GLOBAL`` stores the global list itself (it stored a copy)."""

    class M(torch.nn.Module):
        def forward(self, x):
            self.l = _GLOBAL_LIST
            return x * 2

    m = M()
    thunder.jit(m)(torch.randn(2))
    assert m.l is _GLOBAL_LIST


def test_an_object_changed_after_it_is_stored_is_stored_as_it_ends():
    """``self.st = SimpleNamespace(t=...)`` then ``self.st.u = x * 3``: the module holds the object as the program
    left it (it held the values at the store, and ``u`` was a proxy of the trace)."""

    class M(torch.nn.Module):
        def forward(self, x):
            self.st = types.SimpleNamespace(t=x * 2)
            self.st.u = x * 3
            self.st.t = x * 4
            return self.st

    m, x = M(), torch.ones(2)
    returned = thunder.jit(m)(x)
    assert returned is m.st
    assert vars(m.st).keys() == {"t", "u"}
    assert all(type(v) is torch.Tensor for v in vars(m.st).values())
    torch.testing.assert_close((m.st.t, m.st.u), (x * 4, x * 3))


_LOG: list = []
_TABLE: dict = {}


def test_a_list_stored_in_outside_containers_is_one_list_as_the_program_leaves_it():
    """``LOG.append(l); TABLE["k"] = l; l.append(2); return l``: the outside list and dict hold the returned list
    itself, with the later append (they held copies made at the store)."""

    def f(x):
        items = [1]
        _LOG.append(items)
        _TABLE["k"] = items
        items.append(2)
        return x * 2, items

    jf = thunder.jit(f)
    for _ in range(2):
        _, items = jf(torch.ones(1))
        assert _LOG[-1] is items and _TABLE["k"] is items and items == [1, 2]
    assert len(_LOG) == 2 and _LOG[0] is not _LOG[1]


@dataclasses.dataclass(slots=True)
class _SlottedOutput:
    y: torch.Tensor
    n: int


class _Slotted:
    __slots__ = ("a", "b")

    def __init__(self, a, b):
        self.a, self.b = a, b


def test_objects_with_slots_hold_the_calls_values():
    """A ``dataclass(slots=True)`` or a class with ``__slots__`` returned holding a tensor: the caller got the trace's
    proxy (``y=t0``) and every call the first call's object; now each call makes its own, with its values."""

    def f(x):
        return _SlottedOutput(x * 2, 3), _Slotted(x + 1, [1])

    jf = thunder.jit(f)
    first = jf(torch.ones(2))
    first[0].n = 99
    first[1].b.append(5)
    second = jf(torch.full((2,), 5.0))
    assert type(second[0].y) is torch.Tensor and type(second[1].a) is torch.Tensor
    torch.testing.assert_close((second[0].y, second[1].a), (torch.full((2,), 10.0), torch.full((2,), 6.0)))
    assert (second[0].n, second[1].b) == (3, [1])


def test_a_module_made_inside_holding_traced_values_is_a_clear_error():
    """A module the function makes and returns, holding a traced value, cannot be made again by each call: a clear
    error (the caller got a module holding the trace's proxy)."""

    def f(x):
        m = torch.nn.Identity()
        m.tmp = x * 2
        return m

    with pytest.raises(ThunderRuntimeError, match="returned a Identity that holds traced values"):
        thunder.jit(f)(torch.ones(2))


def test_a_partial_of_a_traced_value_leaving_the_function_is_a_clear_error():
    """A ``partial`` over ``y = x * 2`` returned: the caller got a function over the trace's proxy, whose call
    recursed until a RecursionError; now a clear error. (A closure the program made is made again by each call:
    tests/test_eager_gaps.py.) A function holding no traced value is returned as it is."""

    def returns_partial(x):
        return functools.partial(torch.add, x * 2)

    with pytest.raises(ThunderRuntimeError, match="holds a value the function computes"):
        thunder.jit(returns_partial)(torch.ones(2))

    def returns_plain_function(x):
        return x * 2, lambda a: a + 1

    assert thunder.jit(returns_plain_function)(torch.ones(2))[1](1) == 2


def test_a_deque_and_a_bytearray_the_program_makes_are_new_on_each_call():
    """A ``collections.deque`` holding a tensor was returned as the trace's object: the caller got the proxy
    (``deque([t0, 1])``), and a change to one call's deque or ``bytearray`` showed in the next call's."""

    def f(x):
        return collections.deque([x * 2, 1], maxlen=3), bytearray(b"ab")

    jf = thunder.jit(f)
    first = jf(torch.ones(2))
    first[0].append(5)
    first[1].append(65)
    second = jf(torch.full((2,), 3.0))
    assert type(second[0][0]) is torch.Tensor and second[0].maxlen == 3 and len(second[0]) == 2
    torch.testing.assert_close(second[0][0], torch.full((2,), 6.0))
    assert second[1] == bytearray(b"ab")


def test_a_returned_object_holding_a_python_module_is_not_searched_through_the_module():
    """The search for traced values in what leaves the function stops at a Python module (it walked
    ``torch.distributed``'s namespace, touching its deprecated names: FutureWarnings on every compile)."""
    import warnings

    def f(x):
        return x * 2, types.SimpleNamespace(lib=torch.distributed, fn=lambda: torch.distributed)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = thunder.jit(f)(torch.ones(2))
    assert out[1].lib is torch.distributed


@dataclasses.dataclass
class _Scaled:
    scale: float
    shift: float = 0.0


def test_dataclasses_fields_inside_the_program_matches_eager_and_sees_changes():
    # dataclasses.fields runs natively (SpecialCallsMixin._fields): the same fields, the same checks of what it reads.
    def f(x, cfg):
        names = [fl.name for fl in dataclasses.fields(cfg)] + [fl.name for fl in dataclasses.fields(_Scaled)]
        for name in names[:2]:
            x = x * getattr(cfg, name) + 1
        try:
            dataclasses.fields(x)  # not a dataclass: eager's TypeError, caught
        except TypeError:
            x = x - 1
        return x, names

    jf, x = thunder.jit(f), torch.randn(3)
    for cfg in (_Scaled(2.0, 1.0), _Scaled(2.0, 1.0), _Scaled(3.0, 0.5)):
        out, expected = jf(x, cfg), f(x, cfg)
        torch.testing.assert_close(out[0], expected[0])
        assert out[1] == expected[1]
    assert thunder.cache_misses(jf) == 2  # the third config has other values


def test_a_returned_closure_over_an_outside_list_appends_to_the_caller_s_list():
    # The program sees a copy of an outside list; a closure over it that leaves the function held that copy, made once
    # at tracing: calling it later appended to a list nobody saw (0 items where eager's list had 2).
    def f(x, seen):
        return x + 1, (lambda: seen.append(1))

    for fn in (f, thunder.jit(f)):
        seen = []
        for _ in range(2):
            _, append = fn(torch.ones(2), seen)
            append()
        assert len(seen) == 2


def _sine_twice(x):
    return x.sin() * 2


@pytest.mark.parametrize("form", ["made inside", "decorated", "compiled module"])
def test_torch_compiled_callables_inside_are_traced_as_their_original(form):
    """``torch.compile(g)`` made inside failed (its code sets Inductor's environment variable); a decorated helper
    or compiled module called inside ran Dynamo's wrapper, which installed Dynamo's frame hook while thunder traced
    (Dynamo then compiled thunder's own frames). Now each is traced as its original callable; Dynamo compiles
    nothing."""
    from torch._dynamo.utils import counters

    linear = torch.nn.Linear(3, 3)
    decorated = torch.compile(_sine_twice)
    compiled_linear = torch.compile(linear)

    def f(x):
        if form == "made inside":
            return torch.compile(_sine_twice)(x) + 1
        if form == "decorated":
            return decorated(x) + 1
        return compiled_linear(x).relu()

    def reference(x):
        return _sine_twice(x) + 1 if form != "compiled module" else linear(x).relu()

    x = torch.randn(2, 3, requires_grad=True)
    expected = reference(x)
    (expected_grad,) = torch.autograd.grad(expected.sum(), x)
    frames_before = counters["frames"]["total"]
    jf = thunder.jit(f)
    for _ in range(2):
        got = jf(x)
        (grad,) = torch.autograd.grad(got.sum(), x)
        torch.testing.assert_close(got, expected)
        torch.testing.assert_close(grad, expected_grad)
    assert counters["frames"]["total"] == frames_before
    assert thunder.cache_misses(jf) == 1
