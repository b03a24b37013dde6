"""What a third round of probing found (the earlier rounds' are in tests/test_probe_findings.py and
tests/test_probe_findings2.py), each kept as a regression test against eager."""

from __future__ import annotations

import collections
import copy
import dataclasses
import warnings

import pytest
import torch

import thunder
from thunder.core.errors import ThunderRuntimeError


def _scaled(x, *, k=2, mode="mul"):
    return x * k if mode == "mul" else x - k


def _calls_scaled(x):
    return _scaled(x) + 1


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
@pytest.mark.parametrize("fn", [_scaled, _calls_scaled])
def test_keyword_defaults_changed_in_place_are_seen(fn, cache):
    # ``f.__kwdefaults__`` is a dict: changing a value in it keeps its identity, and the cached trace (which had the
    # old default baked in) was reused: a silently wrong result.
    saved = dict(_scaled.__kwdefaults__)
    try:
        jitted = thunder.jit(fn, cache=cache)
        x = torch.randn(3)
        for change in ({}, {"k": 5}, {"mode": "sub"}, {"k": 2.5}):
            _scaled.__kwdefaults__.update(change)
            torch.testing.assert_close(jitted(x), fn(x))
        del _scaled.__kwdefaults__["k"]
        with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'k'"):
            jitted(x)
    finally:
        _scaled.__kwdefaults__ = saved


class _Logged:
    """A class whose ``__setattr__``/``__delattr__`` log each change besides making it."""

    def __init__(self):
        self.__dict__["log"] = []

    def __setattr__(self, name, value):
        self.log.append(name)
        super().__setattr__(name, value * 2 if isinstance(value, torch.Tensor) else value)

    def __delattr__(self, name):
        self.log.append("del " + name)
        object.__delattr__(self, name)


def _stores(obj, x):
    obj.w = x + 1
    y = obj.w * 3
    obj.n = 5
    del obj.n
    return y


def test_a_users_setattr_runs_once_per_call():
    # The class's ``__setattr__`` ran natively while tracing and again in the replay of ``obj.w = ...``: its log had
    # every entry twice after the first call (and the undo of tracing's store ran it a third time).
    jitted = thunder.jit(_stores)
    for _ in range(3):
        x = torch.randn(3)
        expected_obj, actual_obj = _Logged(), _Logged()
        torch.testing.assert_close(jitted(actual_obj, x), _stores(expected_obj, x))
        assert actual_obj.log == expected_obj.log == ["w", "n", "del n"]
        torch.testing.assert_close(actual_obj.w, expected_obj.w)
        assert "n" not in vars(actual_obj)


@dataclasses.dataclass(frozen=True)
class _Frozen:
    a: torch.Tensor
    n: int = 0


def _bump(z):
    try:
        z.a = z.a + 1
    except dataclasses.FrozenInstanceError:
        pass
    object.__setattr__(z, "a", z.a - 1)
    object.__setattr__(z, "n", z.n + 1)
    return z.a * 2


def test_object_setattr_on_a_frozen_dataclass():
    # ``object.__setattr__(z, ...)`` was replayed as ``z.a = ...``, which the frozen dataclass refused
    # (FrozenInstanceError where eager ran), and the undo of tracing's store failed the same way.
    jitted = thunder.jit(_bump)
    for n in (0, 0, 3):
        x = torch.randn(3)
        expected_z, actual_z = _Frozen(x, n), _Frozen(x, n)
        torch.testing.assert_close(jitted(actual_z), _bump(expected_z))
        torch.testing.assert_close(actual_z.a, expected_z.a)
        assert actual_z.n == expected_z.n == n + 1


class _Counted:
    sets = 0

    def __setattr__(self, name, value):
        type(self).sets += 1
        object.__setattr__(self, name, value)


_counted = _Counted()


def _store_counted(x):
    _counted.t = x * 2
    return _counted.t + _Counted.sets


def test_a_users_setattr_counting_on_its_class():
    jitted = thunder.jit(_store_counted)
    for _ in range(3):
        x = torch.randn(3)
        _Counted.sets = 0
        expected = _store_counted(x)
        _Counted.sets = 0
        torch.testing.assert_close(jitted(x), expected)
        assert _Counted.sets == 1
        torch.testing.assert_close(_counted.t, x * 2)


class _Store:
    """A container of the user's, with ``__setitem__``/``__delitem__`` in Python."""

    def __init__(self):
        self.items, self.count, self.t = {}, 0, torch.zeros(3)

    def __setitem__(self, key, value):
        if isinstance(key, int):
            self.t[key] = value
        else:
            self.items[key] = value * 2
        self.count += 1

    def __delitem__(self, key):
        del self.items[key]
        self.count -= 10

    def __getitem__(self, key):
        return self.items[key]


def _fill(store, x):
    store["a"] = x + 1
    store["b"] = 3
    del store["b"]
    store[0] = x[1]
    return store["a"] * 2 + store.t


def test_assigning_into_a_users_container_with_setitem_in_python():
    # Refused ("Assigning into a _Store from outside the jitted function is not supported") where eager runs: the
    # ``__setitem__`` is Python, which the interpreter runs, so what it changes is traced as the program's own.
    jitted = thunder.jit(_fill)
    for _ in range(2):
        x = torch.randn(3)
        expected_store, actual_store = _Store(), _Store()
        torch.testing.assert_close(jitted(actual_store, x), _fill(expected_store, x))
        assert actual_store.count == expected_store.count == -7
        assert list(actual_store.items) == ["a"]
        torch.testing.assert_close(actual_store.items["a"], expected_store.items["a"])
        torch.testing.assert_close(actual_store.t, expected_store.t)


class _PlainDict(dict):
    pass


class _AddingDict(dict):
    def __setitem__(self, key, value):
        super().__setitem__(key, value + 1)


def _assign(d, x):
    d["k"] = x
    return d["k"] * 2


def _update(d, x):
    d.update(k=x)
    return x * 2


@pytest.mark.parametrize("fn", [_assign, _update])
@pytest.mark.parametrize("cls", [_PlainDict, _AddingDict, collections.Counter])
def test_changing_a_dict_subclass_from_outside_is_a_clear_error(cls, fn):
    # The program sees a rebuilt copy of a dict subclass it is given; its changes went into the copy and were lost:
    # the caller's dict stayed empty where eager's held the new key (a silently wrong result).
    d = cls()
    with pytest.raises(ThunderRuntimeError, match="from outside the jitted function"):
        thunder.jit(fn)(d, torch.randn(3))
    assert dict(d) == {}


def _broadcasts(x):
    return x.broadcast_to(2, 3), x.broadcast_to((2, 3)), torch.broadcast_to(x, size=[2, 3]) * 2


def test_tensor_broadcast_to_takes_sizes_as_varargs():
    # ``x.broadcast_to(2, 3)`` (which eager's method takes, as ``expand``) was a TypeError in tracing: the call fell
    # back to running eagerly with an EagerRunWarning.
    jitted = thunder.jit(_broadcasts)
    x = torch.randn(3, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        actual = jitted(x)
    expected = _broadcasts(x)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)
    (grad,) = torch.autograd.grad(sum(a.sum() for a in actual), x)
    (expected_grad,) = torch.autograd.grad(sum(e.sum() for e in expected), x)
    torch.testing.assert_close(grad, expected_grad)


class _LoggedModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.log = []
        self.calls = 0

    def __setattr__(self, name, value):
        if name == "calls":
            self.log.append(value)
        super().__setattr__(name, value)

    def forward(self, x):
        self.calls += 1
        return self.lin(x) * self.calls


def test_a_modules_own_setattr_runs_once_per_call():
    # Each call appended twice to ``log``: the ``__setattr__`` ran while tracing and again in the replay (and the undo
    # of tracing's store through ``setattr`` ran it once more).
    torch.manual_seed(0)
    expected_module = _LoggedModule()
    torch.manual_seed(0)
    module = _LoggedModule()
    jitted = thunder.jit(module)
    for _ in range(3):
        x = torch.randn(3)
        torch.testing.assert_close(jitted(x), expected_module(x))
        assert module.log == expected_module.log
        assert module.calls == expected_module.calls


class _Audited:
    """A data descriptor of the user's that logs each read and write of the attribute it manages."""

    log: list = []

    def __set_name__(self, owner, name):
        self.name = "_" + name

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        _Audited.log.append(("get", owner.__name__))
        return getattr(obj, self.name)

    def __set__(self, obj, value):
        _Audited.log.append(("set", type(obj).__name__))
        setattr(obj, self.name, value)


class _Holder:
    p = _Audited()

    def __init__(self):
        self._p = torch.zeros(3)


_holder = _Holder()


def _through_descriptor(x):
    _holder.p = x * 2
    return _holder.p + 1


def test_a_users_data_descriptor_runs_on_every_call():
    # ``__set__`` and ``__get__`` ran natively while tracing: the first call logged the set twice (tracing and the
    # replay of ``_holder.p = ...``), and later calls logged no read.
    jitted = thunder.jit(_through_descriptor)
    for _ in range(3):
        x = torch.randn(3)
        _Audited.log.clear()
        expected = _through_descriptor(x)
        expected_log = list(_Audited.log)
        _Audited.log.clear()
        torch.testing.assert_close(jitted(x), expected)
        assert _Audited.log == expected_log == [("set", "_Holder"), ("get", "_Holder")]
        torch.testing.assert_close(_holder._p, x * 2)


class _Registry:
    items: dict = {}

    def __class_getitem__(cls, key):
        return cls.items.get(key, 0)


def _register_then_look_up(x):
    _Registry.items["a"] = 3
    return x * _Registry["a"]


def test_class_getitem_reads_what_the_program_wrote():
    # ``_Registry["a"]`` ran ``__class_getitem__`` natively, on the outside dict as it was before the program's write
    # (which thunder replays after the computation): the result was ``x * 0`` where eager's is ``x * 3``.
    jitted = thunder.jit(_register_then_look_up)
    for _ in range(2):
        x = torch.randn(3)
        _Registry.items.clear()
        expected = _register_then_look_up(x)
        _Registry.items.clear()
        torch.testing.assert_close(jitted(x), expected)
        assert _Registry.items == {"a": 3}


def test_jit_of_a_tensors_bound_method():
    # ``thunder.jit(x.add)`` failed ("Changing a Tensor from outside the jitted function with .add()", and for other
    # methods "a torch.Tensor made inside the function by code thunder runs natively"): the tensor bound to the method
    # was not an input of the trace.
    x, y = torch.randn(3), torch.randn(3)
    for name, args in (("add", (y,)), ("mul", (y,)), ("sum", ()), ("view", (3, 1))):
        jitted = thunder.jit(getattr(x, name))
        torch.testing.assert_close(jitted(*args), getattr(x, name)(*args))
        x.mul_(2)  # the method's tensor, changed in place, is this call's
        torch.testing.assert_close(jitted(*args), getattr(x, name)(*args))


def _change_user_dict(d, x):
    d["k"] = x * 2
    d.update(j=x)
    del d["a"]
    return d["k"] + d.get("zz", 0), sorted(d)


def test_changing_a_user_dict_from_outside():
    # A ``collections.UserDict`` (as transformers' BatchEncoding) was refused ("Assigning into a UserDict from outside
    # the jitted function is not supported"); its ``__setitem__`` is Python, whose store into ``self.data`` is replayed.
    jitted = thunder.jit(_change_user_dict)
    for start in ({"a": 1}, {"a": 2, "b": 3}):
        x = torch.randn(3)
        expected_d, actual_d = collections.UserDict(start), collections.UserDict(start)
        (expected, expected_keys), (actual, actual_keys) = _change_user_dict(expected_d, x), jitted(actual_d, x)
        torch.testing.assert_close(actual, expected)
        assert actual_keys == expected_keys == sorted(actual_d)
        assert list(actual_d) == list(expected_d)
        torch.testing.assert_close(actual_d["k"], expected_d["k"])


class _HashCounted:
    hashes = 0

    def __init__(self, k):
        self.k = k

    def __hash__(self):
        type(self).hashes += 1
        return hash(self.k)

    def __call__(self, t):
        return t * self.k


_hash_counted = _HashCounted(3)


def _call_hash_counted(x):
    return _hash_counted(x) + 1


def test_a_users_hash_is_not_run_by_the_tracer():
    jitted = thunder.jit(_call_hash_counted)
    x = torch.randn(3)
    _HashCounted.hashes = 0
    torch.testing.assert_close(jitted(x), _call_hash_counted(x))
    assert _HashCounted.hashes == 0


class _CopyCounted:
    copies = 0

    def __init__(self, t):
        self.t = t

    def __copy__(self):
        type(self).copies += 1
        return _CopyCounted(self.t)


def _copy_and_scale(obj, x):
    return copy.copy(obj).t * x


def test_a_users_copy_runs_once_on_the_first_call():
    jitted = thunder.jit(_copy_and_scale)
    x = torch.randn(3)
    _CopyCounted.copies = 0
    torch.testing.assert_close(jitted(_CopyCounted(x), x), x * x)
    assert _CopyCounted.copies == 1
    y = 2 * x  # (held by the object as x is: the same entry)
    torch.testing.assert_close(jitted(_CopyCounted(y), y), y * y)
    assert _CopyCounted.copies == 2
