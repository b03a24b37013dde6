"""A method or function the trace ran, replaced or edited after tracing, retraces (Note [Methods read from
objects] in ``thunder.core.outside_reads``): replaced on the class, set on the instance, found through a dunder,
``super()`` or a classmethod, or edited in place as IPython's autoreload does. Each compares with eager PyTorch.
"""

from __future__ import annotations

import pytest
import torch

import thunder

X = torch.arange(3.0)


def _same_as_eager(jf, f, *args):
    torch.testing.assert_close(jf(*args), f(*args), equal_nan=True, rtol=0, atol=0)


# --- methods replaced after tracing (Note [Methods read from objects] in thunder.core.outside_reads) -----------


class _Inner(torch.nn.Module):
    def helper(self, t):
        return t + 1

    def forward(self, t):
        return self.helper(t) * 2


class _Outer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _Inner()

    def forward(self, t):
        return self.inner(t)


@pytest.mark.parametrize(
    "patch",
    [
        lambda m: setattr(type(m.inner), "helper", lambda self, t: t + 10),
        lambda m: setattr(type(m.inner), "forward", lambda self, t: t * 100),
        lambda m: setattr(m.inner, "forward", lambda t: t - 1),
        lambda m: setattr(m.inner, "helper", lambda t: t - 7),
        lambda m: setattr(m, "forward", lambda t: t * 3),
        lambda m: setattr(type(m), "forward", lambda self, t: t - 3),
    ],
    ids=["class-helper", "class-forward", "instance-forward", "instance-helper", "top-instance-forward", "top-class-forward"],
)
def test_method_replaced_after_tracing(patch, monkeypatch):
    # A silent wrong result before: the entry kept running the method it traced.
    monkeypatch.setattr(_Inner, "helper", _Inner.helper)
    monkeypatch.setattr(_Inner, "forward", _Inner.forward)
    monkeypatch.setattr(_Outer, "forward", _Outer.forward)
    m = _Outer()
    jm = thunder.jit(m)
    _same_as_eager(jm, m, X)
    patch(m)
    _same_as_eager(jm, m, X)
    _same_as_eager(jm, m, X)


def test_method_of_a_plain_object_replaced_after_tracing():
    class Scaler:
        def scale(self, t):
            return t * 2

    s = Scaler()
    f = lambda t: s.scale(t)  # noqa: E731
    jf = thunder.jit(f)
    _same_as_eager(jf, f, X)
    Scaler.scale = lambda self, t: t * 5
    _same_as_eager(jf, f, X)
    s.scale = lambda t: t * 7
    _same_as_eager(jf, f, X)
    assert thunder.cache_misses(jf) == 3


def _edited_later(t):
    return t + 1


def _the_edit(t):
    return t + 100


class _EditedModule(torch.nn.Module):
    def forward(self, t):
        return t * 2


def test_function_edited_in_place_retraces(monkeypatch):
    # IPython's autoreload updates a function in place (``old.__code__ = new.__code__``): a silent wrong result before.
    monkeypatch.setattr(_edited_later, "__code__", _edited_later.__code__)
    monkeypatch.setattr(_EditedModule.forward, "__code__", _EditedModule.forward.__code__)
    f = lambda t: _edited_later(t)  # noqa: E731
    jf = thunder.jit(f)
    m = _EditedModule()
    jm = thunder.jit(m)
    _same_as_eager(jf, f, X)
    _same_as_eager(jm, m, X)
    _edited_later.__code__ = _the_edit.__code__
    _EditedModule.forward.__code__ = (lambda self, t: t * 7).__code__
    _same_as_eager(jf, f, X)
    _same_as_eager(jm, m, X)


class _CallableScaler:
    def __call__(self, t):
        return t + 1

    def __getitem__(self, k):
        return 2.0

    @classmethod
    def shift(cls, t):
        return t + 1


class _Base:
    def step(self, t):
        return t + 1


class _Derived(_Base):
    def step(self, t):
        return super().step(t) * 2


@pytest.mark.parametrize(
    "f, patch",
    [
        (lambda t: _CALLABLE(t), lambda: setattr(_CallableScaler, "__call__", lambda self, t: t + 9)),
        (lambda t: t * _CALLABLE[0], lambda: setattr(_CallableScaler, "__getitem__", lambda self, k: 5.0)),
        (lambda t: _CALLABLE.shift(t), lambda: setattr(_CallableScaler, "shift", classmethod(lambda cls, t: t + 11))),
        (lambda t: _DERIVED.step(t), lambda: setattr(_Base, "step", lambda self, t: t + 20)),
    ],
    ids=["__call__", "__getitem__", "classmethod-through-instance", "super-target"],
)
def test_method_found_other_than_by_attribute_replaced_after_tracing(f, patch, monkeypatch):
    for cls, name in ((_CallableScaler, "__call__"), (_CallableScaler, "__getitem__"), (_Base, "step")):
        monkeypatch.setattr(cls, name, cls.__dict__[name])
    monkeypatch.setattr(_CallableScaler, "shift", _CallableScaler.__dict__["shift"])
    jf = thunder.jit(f)
    _same_as_eager(jf, f, X)
    patch()
    _same_as_eager(jf, f, X)


_CALLABLE = _CallableScaler()
_DERIVED = _Derived()


# --- a class's own __getattribute__ (Note [Reads a class's __getattribute__ sees] in thunder.core.outside_reads) ----


class _CountsReads:
    def __init__(self):
        object.__setattr__(self, "reads", [])
        self.scale = 2.0

    def __getattribute__(self, name):
        object.__getattribute__(self, "reads").append(name)
        return object.__getattribute__(self, name)

    def apply(self, x):
        return x * self.scale


def _applies(x, obj):
    return obj.apply(x) + obj.scale


def _reads(obj) -> list:
    return object.__getattribute__(obj, "reads")


def test_a_class_s_getattribute_sees_the_reads_eager_makes():
    """The prologue's method check read ``obj.__dict__`` through it on every cached call, and tracing read
    ``__class__`` about 30 times."""
    jf = thunder.jit(_applies)
    mine, theirs, x = _CountsReads(), _CountsReads(), torch.randn(3)
    for _ in range(3):
        _reads(mine).clear(), _reads(theirs).clear()
        torch.testing.assert_close(jf(x, mine), _applies(x, theirs), rtol=0, atol=0)
        assert _reads(mine) == _reads(theirs) == ["apply", "scale", "scale"]
    object.__getattribute__(mine, "__dict__")["apply"] = lambda t: t - 1  # an attribute of its own now
    object.__getattribute__(theirs, "__dict__")["apply"] = lambda t: t - 1
    torch.testing.assert_close(jf(x, mine), _applies(x, theirs), rtol=0, atol=0)
    assert thunder.cache_misses(jf) == 2
