"""Python side effects happen on every call, as in eager: printing, changing outside lists, dicts,
sets, attributes, globals and closure variables (see Note [What a trace relied on] in
``thunder.core.jit_ext``)."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import io
import logging
import sys
import types
import warnings

import pytest
import torch

import thunder
from thunder.core.errors import SharpEdgeError, ThunderRuntimeError

X = torch.arange(3.0)


def _stdout_of(fn, *args):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        out = fn(*args)
    return out, buf.getvalue()


def prints(t):
    y = t * 2
    print("y is", y, [1, 2], sep="|")
    z = y + 1
    print(z.shape, end="!\n")
    return z


def test_print_runs_on_every_call_with_that_calls_values():
    jf = thunder.jit(prints)
    for t in (X, X * 3, X - 1):
        (out, text), (expected, expected_text) = _stdout_of(jf, t), _stdout_of(prints, t)
        assert text == expected_text
        torch.testing.assert_close(out, expected)
    assert thunder.cache_misses(jf) == 1


def test_print_of_a_list_the_program_changes_later_prints_it_as_it_was():
    def f(t):
        items = [t]
        print(items)
        items.append(t + 1)
        return items[1]

    jf = thunder.jit(f)
    assert _stdout_of(jf, X)[1] == _stdout_of(f, X)[1]


def writes(t):
    sys.stdout.write(f"shape {tuple(t.shape)}\n")
    return t + 1


def test_stdout_write_runs_on_every_call():
    # Before: written once, at trace time.
    jf = thunder.jit(writes)
    for t in (X, X * 3, torch.ones(2)):
        assert _stdout_of(jf, t)[1] == _stdout_of(writes, t)[1]


_LOGGER = logging.getLogger("thunder.tests.side_effects")


def logs(t, n):
    _LOGGER.warning("call %d: %s", n, tuple(t.shape))
    _LOGGER.info("details of call %d", n)
    return t * n


def test_logging_runs_on_every_call_with_that_calls_values():
    # Before: the trace failed (LogRecord read time.time() as a branch value) after printing "--- Logging error ---".
    handler = logging.Handler()
    records = handler.records = []
    handler.emit = lambda record: records.append(record.getMessage())
    _LOGGER.addHandler(handler)
    _LOGGER.propagate = False
    try:
        jf = thunder.jit(logs, cache="symbolic values")
        for n, level in ((1, logging.WARNING), (2, logging.WARNING), (3, logging.ERROR), (4, logging.INFO)):
            _LOGGER.setLevel(level)
            del records[:]
            expected = logs(X, n)
            eager = list(records)
            del records[:]
            torch.testing.assert_close(jf(X, n), expected)
            assert records == eager
    finally:
        _LOGGER.removeHandler(handler)
        _LOGGER.propagate = True
        _LOGGER.setLevel(logging.NOTSET)


LOG: list = []


def appends_to_global(t):
    LOG.append(t.sum())
    return t * 2


def test_append_to_a_global_list():
    jf = thunder.jit(appends_to_global)
    LOG.clear()
    jf(X)
    jf(X * 2)
    got = [float(v) for v in LOG]
    LOG.clear()
    appends_to_global(X)
    appends_to_global(X * 2)
    assert got == [float(v) for v in LOG]
    assert all(isinstance(v, torch.Tensor) for v in LOG)


TABLE: dict = {}


def sets_item(t, k):
    TABLE[k] = t + 1
    return t


def test_set_item_of_a_global_dict():
    jf = thunder.jit(sets_item)
    TABLE.clear()
    jf(X, "a")
    jf(X * 2, "b")
    assert set(TABLE) == {"a", "b"}
    torch.testing.assert_close(TABLE["b"], X * 2 + 1)


SEEN: set = set()


def adds_to_set(t, k):
    SEEN.add(k)
    return t * len(SEEN)


def test_add_to_a_global_set():
    jf = thunder.jit(adds_to_set)
    SEEN.clear()
    got = [jf(X, k) for k in ("a", "b", "a")]
    SEEN.clear()
    expected = [adds_to_set(X, k) for k in ("a", "b", "a")]
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    assert SEEN == {"a", "b"}


def test_append_to_an_argument_list():
    def f(t, out):
        out.append(t + 1)
        out.append(t + 2)
        return t

    jf = thunder.jit(f)
    for t in (X, X * 5):
        a = []
        jf(t, a)
        assert len(a) == 2
        torch.testing.assert_close(a[1], t + 2)


def test_append_to_a_closure_list():
    acc = []

    def f(t):
        acc.append(t * 3)
        return t

    jf = thunder.jit(f)
    jf(X)
    jf(X + 1)
    assert len(acc) == 2
    torch.testing.assert_close(acc[1], (X + 1) * 3)


def test_setting_an_attribute_of_an_outside_object():
    class Box:
        pass

    box = Box()
    box.v = None

    def f(t):
        box.v = t * 3
        return t

    jf = thunder.jit(f)
    jf(X)
    torch.testing.assert_close(box.v, X * 3)
    jf(X * 2)
    torch.testing.assert_close(box.v, X * 6)


def test_module_counts_its_calls():
    class Counting(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.calls = 0

        def forward(self, t):
            self.calls += 1
            return t * self.calls

    m, eager = Counting(), Counting()
    jm = thunder.jit(m)
    for _ in range(3):
        torch.testing.assert_close(jm(X), eager(X))
    assert m.calls == 3


COUNT = 0


def counts_in_a_global(t):
    global COUNT
    COUNT += 1
    return t * COUNT


def test_global_counter():
    global COUNT
    jf = thunder.jit(counts_in_a_global)
    COUNT = 0
    got = [jf(X) for _ in range(3)]
    assert COUNT == 3
    COUNT = 0
    for g in got:
        torch.testing.assert_close(g, counts_in_a_global(X))


def test_nonlocal_counter():
    def make():
        n = 0

        def f(t):
            nonlocal n
            n += 1
            return t * n

        return f

    f, eager = make(), make()
    jf = thunder.jit(f)
    for _ in range(3):
        torch.testing.assert_close(jf(X), eager(X))


def test_tracing_leaves_no_proxy_behind():
    class Box:
        pass

    box = Box()

    def f(t):
        box.v = t + 1
        return t

    jf = thunder.jit(f)
    jf(X)
    assert type(box.v) is torch.Tensor


def test_changing_another_outside_container_is_a_clear_error():
    import array

    q = array.array("i", [1])  # (a deque is replayed as a list is: tests/test_eager_gaps.py)

    def f(t):
        q.append(2)
        return t

    with pytest.raises(ThunderRuntimeError, match=r"Changing a array from outside the jitted function"):
        thunder.jit(f)(X)


@pytest.mark.parametrize(
    "f",
    [
        lambda t, out: out.append(t),
        lambda t, out: out.__setitem__(0, t),
    ],
    ids=["append", "setitem"],
)
def test_sharp_edges_report_mutations_of_argument_containers(f):
    with pytest.raises(SharpEdgeError, match=r"from outside the function"):
        thunder.jit(f, sharp_edges="error")(X, [0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        thunder.jit(f, sharp_edges="warn")(X, [0])
    assert any("from outside the function" in str(w.message) for w in caught)


def test_sharp_edges_report_closure_container_mutation():
    acc = []

    def f(t):
        acc.append(t)
        return t

    with pytest.raises(SharpEdgeError):
        thunder.jit(f, sharp_edges="error")(X)


def test_returned_outside_containers_and_objects_are_the_objects_themselves():
    class Box:
        pass

    box = Box()

    def f(t, items, table, obj):
        items.append(t)
        table["k"] = t * 2
        obj.v = t + 1
        return items, table, obj

    jf = thunder.jit(f)
    for t in (X, X * 2):
        items, table = [], {}
        out = jf(t, items, table, box)
        assert out[0] is items and out[1] is table and out[2] is box
        assert len(items) == 1
        torch.testing.assert_close(table["k"], t * 2)
        torch.testing.assert_close(box.v, t + 1)


@pytest.mark.parametrize("how", ["setattr", "object.__setattr__"])
def test_setattr_builtin_on_an_outside_object(how):
    class Box:
        pass

    box = Box()
    set_ = setattr if how == "setattr" else object.__setattr__

    def f(t):
        set_(box, "v", t * 2)
        return t

    jf = thunder.jit(f)
    jf(X)
    assert type(box.v) is torch.Tensor
    jf(X + 1)
    torch.testing.assert_close(box.v, (X + 1) * 2)


# --- outside containers: checked only once their contents are read (Note [Outside containers]) -----------

EVENTS: list = []
SCORES: dict = {}
TAGS: set = set()


def logs_without_reading(t, k):
    EVENTS.append(t.sum())
    EVENTS.extend([k])
    SCORES[k] = t.max()
    TAGS.add(k)
    return t * 2


def test_writes_that_do_not_read_the_contents_do_not_recompile():
    jf = thunder.jit(logs_without_reading)
    EVENTS.clear(), SCORES.clear(), TAGS.clear()
    for i, k in enumerate("abcab"):
        jf(X + i, k)
    assert thunder.cache_misses(jf) == 3  # one per distinct string argument, none for the containers
    got = ([float(v) if isinstance(v, torch.Tensor) else v for v in EVENTS], {k: float(v) for k, v in SCORES.items()}, set(TAGS))
    EVENTS.clear(), SCORES.clear(), TAGS.clear()
    for i, k in enumerate("abcab"):
        logs_without_reading(X + i, k)
    assert got == ([float(v) if isinstance(v, torch.Tensor) else v for v in EVENTS], {k: float(v) for k, v in SCORES.items()}, TAGS)


@pytest.mark.parametrize(
    "read",
    [
        lambda items: len(items),
        lambda items: 1 if items else 0,
        lambda items: sum(1 for _ in items),
        lambda items: items[-1],
        lambda items: 3 in items,
        lambda items: items == [1, 2],
        lambda items: max(items + [0]),
        lambda items: str(items),
    ],
    ids=["len", "truth", "iterate", "index", "contains", "compare", "concatenate", "str"],
)
def test_reading_the_contents_after_a_write_is_checked(read):
    store = [1]

    def f(t):
        store.append(2)
        r = read(store)
        return t * (len(str(r)) if isinstance(r, str) else float(r))

    jf = thunder.jit(f)
    got = [jf(X) for _ in range(3)]
    store[:] = [1]
    expected = [f(X) for _ in range(3)]
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)


def test_a_container_passed_to_a_native_function_is_read():
    store = [1.0, 2.0]

    def f(t):
        return t * sum(store)

    jf = thunder.jit(f)
    torch.testing.assert_close(jf(X), f(X))
    store.append(5.0)
    torch.testing.assert_close(jf(X), f(X))


def test_assigning_a_parameter_attribute_is_undone_after_tracing():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))

        def forward(self, t):
            out = t * self.w
            self.last = out
            return out

    m = M()
    jm = thunder.jit(m)
    jm(X)
    assert isinstance(m.w, torch.nn.Parameter) and [n for n, _ in m.named_parameters()] == ["w"]
    torch.testing.assert_close(m.last, X)


def test_class_attribute_assignment_is_replayed():
    class Config:
        calls = 0

    def f(t):
        Config.calls = Config.calls + 1
        return t * Config.calls

    jf = thunder.jit(f)
    got = [jf(X) for _ in range(2)]
    assert Config.calls == 2 and "calls" in vars(Config)
    torch.testing.assert_close(got[1], X * 2)


def test_same_input_refuses_a_function_that_reads_state_it_changes():
    counter = {"n": 0}

    def f(t):
        counter["n"] = counter["n"] + 1
        return t * counter["n"]

    with pytest.raises(ThunderRuntimeError, match=r"cache='same input'.*reads and changes outside state"):
        thunder.jit(f, cache="same input")(X)


def test_same_input_replays_writes_that_read_nothing():
    log = []

    def f(t):
        log.append(t * 2)
        return t

    jf = thunder.jit(f, cache="same input")
    jf(X)
    jf(X)
    assert len(log) == 2


class _Collector:
    def __init__(self):
        self.outs = None


COLLECTOR = _Collector()


def test_an_assignment_of_a_container_the_program_fills_later_holds_its_final_contents():
    # transformers' output collector: ``collector.outs = {"hidden": []}``, then appends per layer.
    def f(x):
        COLLECTOR.outs = {"hidden": []}
        h = x * 2
        COLLECTOR.outs["hidden"].append(h)
        h = h + 1
        COLLECTOR.outs["hidden"].append(h)
        return h

    jf = thunder.jit(f)
    for x in (torch.ones(2), torch.zeros(2)):
        out = jf(x)
        got = COLLECTOR.outs["hidden"]
        f(x)
        want = COLLECTOR.outs["hidden"]
        torch.testing.assert_close(out, want[-1])
        assert len(got) == len(want) == 2
        for g, w in zip(got, want):
            torch.testing.assert_close(g, w)


class _Box:
    pass


@dataclasses.dataclass
class _Out:
    y: torch.Tensor
    box: _Box


class _Mapping(collections.OrderedDict):  # as a Hugging Face ModelOutput is
    pass


@pytest.mark.parametrize(
    "make",
    [
        lambda x, b: types.SimpleNamespace(y=x * 2, box=b),
        lambda x, b: _Out(x + 1, b),
        lambda x, b: _Mapping(y=x * 3, box=b),
        lambda x, b: {"nested": [b, (x, b)]},
    ],
    ids=["namespace", "dataclass", "dict subclass", "dict"],
)
def test_an_outside_object_returned_inside_a_new_one_is_the_object_itself(make):
    # A model's output holds the cache it was given; the caller (``generate``) goes on with that object. Before, an
    # object or dict subclass the program made returned a copy of the trace-time object instead.
    def f(x, b):
        b.calls = getattr(b, "calls", 0) + 1
        return make(x, b)

    jf = thunder.jit(f)
    for _ in range(3):
        b = _Box()
        out = jf(torch.ones(2), b)
        inner = out["box"] if isinstance(out, _Mapping) else out["nested"][0] if isinstance(out, dict) else out.box
        assert inner is b and b.calls == 1


class _Record:
    def __init__(self, n):
        self.n = n


_RECORDS: list = []


def test_an_object_made_from_an_int_argument_holds_each_calls_value():
    """``C(n + 1)``, returned or stored outside: once n was symbolic (automatic dynamic shapes) the object was a
    constant of the trace, holding the SymInt of the call that traced it (stale values on every later call)."""

    def f(x, n):
        _RECORDS.append(_Record(n + 1))
        return x, _Record(n + 1), types.SimpleNamespace(v=n * 2)

    jf = thunder.jit(f)
    for n in (1, 7, 9, 11):
        _, made, ns = jf(torch.ones(2), n)
        for value, expected in ((made.n, n + 1), (_RECORDS[-1].n, n + 1), (ns.v, 2 * n)):
            assert type(value) is int and value == expected


def test_a_symbolic_size_added_to_a_set_argument_is_an_input_of_the_computation():
    """``s.add(x.shape[0])``: the replay that writes the set back named the symbolic size, but the computation's
    parameters were worked out without looking into sets, so the second shape failed with a NameError."""

    def f(x, s):
        s.add(x.shape[0])
        return x * len(s)

    jf = thunder.jit(f)
    for n in (2, 3, 4):
        s, t = {1}, {1}
        torch.testing.assert_close(jf(torch.ones(n), s), f(torch.ones(n), t))
        assert s == t


def test_an_attribute_the_program_sets_on_a_tensor_it_made_is_read_back_and_returned():
    """``y.tag = 5`` on a value the program made (``nn.Buffer`` sets ``persistent``): tracing stopped at an
    AttributeError and the call ran eagerly."""

    def f(x):
        y = x * 2
        y.tag = 5
        return y * y.tag, y

    jf = thunder.jit(f)
    for _ in range(2):
        out, y = jf(torch.ones(2))
        torch.testing.assert_close(out, f(torch.ones(2))[0])
        assert y.tag == 5


def test_a_module_with_a_buffer_made_inside_the_function():
    class Loss(torch.nn.Module):  # Hugging Face's DETR builds its loss module so, when labels are given
        def __init__(self, n):
            super().__init__()
            self.empty_weight = torch.nn.Buffer(torch.ones(n))

    def f(x):
        return (x * Loss(4).empty_weight).sum()

    x = torch.randn(4)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


def test_zero_grad_and_grad_assignments_inside_the_function():
    """``opt.zero_grad()`` (``p.grad = None``), ``p.grad = g`` and ``del p.grad`` inside the function: ``.grad``
    had no setter on a traced tensor, and the call ran eagerly."""
    import copy

    model = torch.nn.Linear(3, 2)
    twin = copy.deepcopy(model)
    opt, opt_twin = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(twin.parameters(), lr=0.1)
    jzero = thunder.jit(lambda opt: opt.zero_grad())
    for _ in range(2):
        x = torch.randn(4, 3)
        model(x).sum().backward()
        twin(x).sum().backward()
        opt.zero_grad()
        jzero(opt_twin)
        assert twin.weight.grad is None and twin.bias.grad is None

    def set_and_read(p):
        p.grad = torch.ones_like(p) * 2
        return p * 1, p.grad

    p = torch.nn.Parameter(torch.ones(2))
    _, g = thunder.jit(set_and_read)(p)
    torch.testing.assert_close(p.grad, torch.full((2,), 2.0))
    torch.testing.assert_close(g, p.grad)

    def delete(p):
        del p.grad
        return p * 1

    thunder.jit(delete)(p)
    assert p.grad is None


_MEMO: dict = {}


@pytest.mark.parametrize(
    "fn",
    [lambda x: {x.shape[0]: x.sum()}, lambda x: [{(x.shape[0],): 2}],
     lambda x: (_MEMO.setdefault((x.shape[0],), 5), x * 1)[1]],
    ids=["returned dict", "nested tuple key", "memo keyed by shape"],
)  # fmt: skip
def test_a_symbolic_size_as_a_dict_key_is_an_input_of_the_computation(fn):
    """A size used as a dict key in a value that leaves the function (or a replay writing an outside dict back):
    the computation's parameters were worked out without looking at dict keys (a NameError in the generated code,
    and the outside dict emptied)."""
    for cache in (None, "symbolic values"):
        _MEMO.clear()
        _MEMO["old"] = 1
        jf = thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)
        for n in (2, 3, 4):
            before = dict(_MEMO)
            expected = fn(torch.ones(n))
            expected_memo = dict(_MEMO)
            _MEMO.clear()
            _MEMO.update(before)  # the jitted call starts from the same state
            actual = jf(torch.ones(n))
            assert repr(actual) == repr(expected)
            assert _MEMO == expected_memo


_STORE: dict = {}


def test_update_of_an_outside_dict_with_keywords():
    """``store.update(act=y)`` (a forward hook storing an activation): the keywords were not taken, and the call ran
    eagerly."""

    def f(x):
        y = x * 2
        _STORE.update({"b": 2}, act=y)
        return y + 1

    _STORE.clear()
    thunder.jit(f)(torch.ones(2))
    assert list(_STORE) == ["b", "act"]
    torch.testing.assert_close(_STORE["act"], torch.full((2,), 2.0))


class _Holder:
    pass


def test_an_object_with_one_traced_attribute_is_returned():
    """Looking for symbolic sizes in the computation's values compared a lone proxy with the object holding it by
    ``==`` (a tensor op): returning such an object failed to compile."""

    def f(x, n):
        o = _Holder()
        o.t = x * n
        return o

    jf = thunder.jit(f)
    for n in (2, 3, 4):
        torch.testing.assert_close(jf(torch.ones(2), n).t, torch.full((2,), float(n)))


def test_a_counter_changed_by_native_code_is_a_clear_error():
    """``Counter.update`` counts in C (``_count_elements``) into the program's copy of the outside Counter: the change
    was lost, silently (the Counter stayed empty); now a clear error, as for other native changes of outside state."""
    q = collections.Counter()

    def f(t):
        q.update(["a"])
        return t

    with pytest.raises(ThunderRuntimeError, match=r"the program changed q .* a Counter from outside the jitted function"):
        thunder.jit(f)(X)
