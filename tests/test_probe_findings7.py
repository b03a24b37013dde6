"""Holes of the interpreter and the tracer where a cached trace kept its first call's answer, a Python side effect
was lost or doubled, or an error misled: list and tuple subclass arguments, iteration and length hints made by C
(``list(obj)``, ``[*obj]``, ``a, b = obj``, ``dict.fromkeys``), ``getattr``/``attrgetter`` of a property,
``operator.ne`` of a class with only ``__eq__``, ``seq.index(obj)``. Each runs a program eagerly and jitted on several
calls whose state changes, and compares values and logs."""

from __future__ import annotations

import collections
import operator

import pytest
import torch

import thunder
from thunder.core.errors import ThunderValueError


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return type(a) is type(b) and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict):
        return type(a) is type(b) and list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _outcome(f, args):
    try:
        return f(*args)
    except Exception as e:  # eager's error, compared by type
        return type(e)


def _agrees(f, make, calls: int = 4) -> None:
    """``make(i)`` gives ``(log, args)`` for call ``i``, made twice: eager and jitted must give the same results and
    leave the same logs on every call."""
    jf = thunder.jit(f)
    for i in range(calls):
        log_e, args_e = make(i)
        log_j, args_j = make(i)
        expected, got = _outcome(f, args_e), _outcome(jf, args_j)
        assert _same(expected, got), (i, expected, got)
        assert log_e == log_j, (i, log_e, log_j)


# -- list and tuple subclass arguments ------------------------------------------------------------------------------


class _Batch(list):
    scale = 1


class _Pair(tuple):
    pass


class _Record(collections.namedtuple("_Record", "a b")):
    """A named tuple with an attribute of its own."""

    def __new__(cls, a, b, k=1):
        self = super().__new__(cls, a, b)
        self.k = k
        return self


def _tensors(i):
    return torch.full((2,), float(i + 1)), torch.arange(2.0)


@pytest.mark.parametrize("kind", [_Batch, _Pair])
def test_items_of_a_list_or_tuple_subclass_argument_are_traced(kind):
    def add(xs):
        return xs[0] + xs[1]

    _agrees(add, lambda i: ([], (kind(_tensors(i)),)))


def test_attributes_of_a_named_tuple_subclass_argument_are_read_on_every_call():
    def scaled(r):
        return r.a * r.k + r.b

    _agrees(scaled, lambda i: ([], (_Record(*_tensors(i), k=i + 2),)))


class _Slotted(list):
    __slots__ = ("scale",)


def _slotted(i):
    xs = _Slotted(_tensors(i))
    xs.scale = i + 2
    return [], (xs,)


def test_a_list_subclass_with_slots_and_a_struct_sequence_argument_are_traced():
    _agrees(lambda xs: xs[0] * xs.scale + xs[1], _slotted)
    _agrees(lambda r: r.values * 2 + r[1], lambda i: ([], (torch.max(torch.arange(6.0).reshape(2, -1) * (i + 1), 1),)))


def test_a_list_subclass_the_program_appends_to_is_changed_as_in_eager():
    def append(xs):
        xs.append(xs[0] * 2)
        xs.scale = len(xs)
        return xs[-1]

    jf = thunder.jit(append)
    for i in range(3):
        expected, got = _Batch([_tensors(i)[0]]), _Batch([_tensors(i)[0]])
        assert _same(append(expected), jf(got))
        assert type(got) is _Batch and len(got) == len(expected) == 2 and _same(list(got), list(expected))
        assert got.scale == expected.scale == 2


def test_a_list_subclass_that_replaces_iteration_is_refused_clearly():
    class Lazy(list):
        def __iter__(self):
            return iter([])

    with pytest.raises(ThunderValueError, match="Lazy, a list subclass whose __iter__ is Python code"):
        thunder.jit(lambda xs: xs[0] + 1)(Lazy([torch.ones(2)]))


# -- iteration and length hints made by C ---------------------------------------------------------------------------


class _Counted:
    """An iterable whose ``__iter__`` and ``__len__`` log and read its state."""

    def __init__(self, log, n):
        self.log, self.n = log, n

    def __iter__(self):
        self.log.append("iter")
        return iter(range(self.n))

    def __len__(self):
        self.log.append("len")
        return self.n

    def keys(self):
        self.log.append("keys")
        return list(range(self.n))

    def __getitem__(self, k):
        self.log.append(("getitem", k))
        return k * 10


def _counted(i):
    log = []
    return log, (_Counted(log, 2 + i % 2),)


def _unpack_two(s):
    try:
        a, b = s
    except ValueError:
        return "not two"
    return a, b


def _iadd(s):
    out = [9]
    out += s
    return out


@pytest.mark.parametrize(
    "program",
    [
        pytest.param(lambda s: list(s), id="list"),
        pytest.param(lambda s: tuple(s), id="tuple"),
        pytest.param(lambda s: sorted(s), id="sorted"),
        pytest.param(lambda s: [*s], id="list display"),
        pytest.param(lambda s: max(*s), id="call with *"),
        pytest.param(_unpack_two, id="unpacking"),
        pytest.param(lambda s: {*s}, id="set display"),
        pytest.param(lambda s: {**s}, id="dict display"),
        pytest.param(lambda s: dict.fromkeys(s, 0), id="dict.fromkeys"),
        pytest.param(lambda s: list(collections.deque(s)), id="deque"),
        pytest.param(lambda s: dict(collections.Counter(s)), id="Counter"),
        pytest.param(lambda s: (out := [], out.extend(s), out)[-1], id="list.extend"),
        pytest.param(_iadd, id="list +="),
    ],
)
def test_iteration_by_c_runs_the_python_iter_and_len_as_eager(program):
    _agrees(program, _counted)


# -- attributes, comparisons and searches made by C -----------------------------------------------------------------


class _Prop:
    def __init__(self, log, k):
        self.log, self.k = log, k

    @property
    def value(self):
        self.log.append("value")
        return self.k


@pytest.mark.parametrize(
    "program",
    [
        pytest.param(lambda o: getattr(o, "value"), id="getattr"),  # noqa: B009 (the builtin is what is tested)
        pytest.param(operator.attrgetter("value"), id="attrgetter"),
    ],
)
def test_a_property_read_by_getattr_runs_once_per_call(program):
    _agrees(lambda o: program(o), lambda i: ((log := []), (_Prop(log, i),)))


class _OnlyEq:
    def __init__(self, log, v):
        self.log, self.v = log, v

    def __eq__(self, other):
        self.log.append("eq")
        return self.v == other

    __hash__ = object.__hash__


def test_operator_ne_inverts_a_python_eq_on_every_call():
    _agrees(lambda a: operator.ne(a, 1), lambda i: ((log := []), (_OnlyEq(log, i % 2),)))


class _Key:
    def __init__(self, log, state):
        self.log, self.state = log, state

    def __eq__(self, other):
        self.log.append("eq")
        return isinstance(other, _Key) and self.state[0] == other.state[0]

    def __hash__(self):
        return 7


def test_list_index_compares_with_the_python_eq_on_every_call():
    def where(a, b, c):
        return [c, b].index(a)

    def make(i):
        log = []
        return log, (_Key(log, [i % 2]), _Key(log, [1]), _Key(log, [2]))

    _agrees(where, make)


class _Token:
    """A key hashed by a Python ``__hash__`` and compared by identity."""

    def __init__(self, log, name):
        self.log, self.name = log, name

    def __hash__(self):
        self.log.append("token hash")
        return 7


class _SilentToken(_Token):
    def __hash__(self):  # (the prologue's check of a set argument hashes its items)
        return 7


class _Query:
    """An item whose ``__eq__`` reads its changing state."""

    def __init__(self, log, name):
        self.log, self.name = log, name

    def __eq__(self, other):
        self.log.append("query eq")
        return isinstance(other, _Token) and other.name == self.name

    def __hash__(self):
        self.log.append("query hash")
        return 7


@pytest.mark.parametrize(
    "program",
    [
        pytest.param(lambda q, t: {t: 1}.get(q, -1), id="dict.get"),
        pytest.param(lambda q, t: {t: 1}[q], id="dict subscript"),
    ],
)
def test_dict_lookups_hash_and_compare_as_eager(program):
    def make(i):
        log = []
        return log, (_Query(log, "a" if i % 2 else "b"), _SilentToken(log, "a"))

    _agrees(program, make)


@pytest.mark.parametrize("container", [set, frozenset, dict.fromkeys])
def test_a_lookup_uses_the_keys_stored_hashes(container):
    """CPython compares the item with the keys stored with its hash and does not hash the keys again."""
    from thunder.core.interpreter import interpret

    def lookup(q, s):
        return q in s

    for name in ("a", "b"):
        log_e, log_i = [], []
        expected = lookup(_Query(log_e, name), container([_Token(log_e, "a")]))
        got = interpret(lookup)(_Query(log_i, name), container([_Token(log_i, "a")]))
        assert got == expected and log_i == log_e


# -- Tensor.detach_, retain_grad, is_inference ----------------------------------------------------------------------


def test_detach_in_place_of_a_computed_tensor_cuts_its_gradient_as_eager():
    def cut(x):
        y = x * 2
        y.detach_()
        return (y * x).sum(), y.requires_grad, y.is_leaf

    jf = thunder.jit(cut)
    for i in range(2):
        x_e, x_j = (torch.arange(3.0 + i, requires_grad=True) for _ in range(2))
        (out_e, *flags_e), (out_j, *flags_j) = cut(x_e), jf(x_j)
        out_e.backward()
        out_j.backward()
        assert flags_e == flags_j and torch.equal(out_e, out_j) and torch.equal(x_e.grad, x_j.grad)


def test_detach_in_place_of_a_view_or_an_input_fails_clearly():
    def of_view(x):
        y = (x * 2)[0]
        y.detach_()
        return y

    with pytest.raises(RuntimeError, match="Can't detach views in-place"):
        of_view(torch.ones(2, 2, requires_grad=True))
    with pytest.raises(thunder.core.errors.UnsupportedOpError, match="detach_.*view.*x = x.detach()"):
        thunder.jit(of_view)(torch.ones(2, 2, requires_grad=True))

    def of_input(x):
        x.detach_()
        return x * 2

    with pytest.raises(thunder.core.errors.UnsupportedOpError, match="detach_ of x, a tensor the jitted function was given"):
        thunder.jit(of_input)(torch.ones(2, requires_grad=True))


def test_is_inference_of_inputs_and_computed_tensors_as_eager():
    def ask(x):
        return x.is_inference(), (x * 2).is_inference()

    with torch.inference_mode():
        made_there = torch.ones(2)
    jf = thunder.jit(ask)
    for x in (torch.ones(2), made_there, torch.ones(2), made_there):
        assert jf(x) == ask(x)
    with torch.inference_mode(), pytest.raises(thunder.core.errors.UnsupportedOpError, match="computed in inference mode"):
        jf(torch.ones(2))


def test_retain_grad_as_eager_where_it_changes_nothing_or_fails():
    def keep(x):
        x.retain_grad()
        return (x * x).sum()

    x = torch.ones(2, requires_grad=True)
    assert torch.equal(thunder.jit(keep)(x), keep(x))
    with pytest.raises(RuntimeError, match="requires_grad=False"):
        thunder.jit(keep)(torch.ones(2))
    # (of a tensor that is not a leaf: tests/test_tensor_hooks.py)
