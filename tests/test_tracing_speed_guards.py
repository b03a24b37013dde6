"""What the tracer reuses to trace faster, and the checks it must still make: an attribute read's interpreted getter
handed from LOAD_ATTR to the tracer's callback (Note [The getter an attribute read interpreted] in
``thunder.core.interpreter.protocols``). Every result is compared with eager's, also after the class or object changed
between calls."""

from __future__ import annotations

import torch

import thunder
import thunder.core.outside_reads as outside_reads


def _counting_getter(monkeypatch) -> list:
    """Replaces the tracer callback's ``interpreted_getter`` by one that counts its calls."""
    calls = []
    original = outside_reads.interpreted_getter

    def counted(obj, name, raw=False):
        calls.append(name)
        return original(obj, name, raw)

    monkeypatch.setattr(outside_reads, "interpreted_getter", counted)
    return calls


def test_attribute_reads_do_not_ask_for_the_getter_again(monkeypatch):
    calls = _counting_getter(monkeypatch)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    x = torch.randn(3, 4)
    torch.testing.assert_close(thunder.jit(model)(x), model(x))
    # the LOAD_ATTRs of Sequential, Linear and ReLU forwards (``self.weight``, ``self.inplace``, ...) tell the callback
    assert "weight" not in calls and "inplace" not in calls


class _Holder:
    def __init__(self, v):
        self.v = v


def test_a_plain_attribute_that_becomes_a_property_between_calls():
    def f(obj, x):
        return x + obj.v

    x = torch.zeros(2)
    jf = thunder.jit(f)
    h = _Holder(1.0)
    torch.testing.assert_close(jf(h, x), f(h, x))
    torch.testing.assert_close(jf(h, x), f(h, x))  # reused
    cls = type("P", (_Holder,), {"v": property(lambda self: 5.0)})
    p = cls.__new__(cls)
    torch.testing.assert_close(jf(p, x), f(p, x))
    torch.testing.assert_close(jf(h, x), f(h, x))


class _Nested:
    """A property that reads other attributes of its object (LOAD_ATTRs inside the interpreted getter)."""

    def __init__(self):
        self.a, self.b = 1.0, 2.0

    @property
    def total(self):
        return self.a + self.b


def test_a_property_that_reads_attributes_and_a_getattr_of_another_name():
    def f(obj, x):
        return x * obj.total + getattr(obj, "a")

    x = torch.ones(2)
    obj = _Nested()
    jf = thunder.jit(f)
    torch.testing.assert_close(jf(obj, x), f(obj, x))
    obj.b = 10.0  # the getter's own read changed: checked where it was made
    torch.testing.assert_close(jf(obj, x), f(obj, x))
    obj.a = -1.0
    torch.testing.assert_close(jf(obj, x), f(obj, x))
