"""Checks that work making tracing faster must keep: attribute reads whose path (a property's getter, a plain
attribute) changes while read or between calls. Every result is compared with eager's."""

from __future__ import annotations

import torch

import thunder


class _Swapping:
    """A property whose getter replaces itself on the class by a plain class attribute."""

    @property
    def scale(self):
        type(self).scale = 3.0
        return 2.0


def test_a_getter_that_changes_its_class_while_read():
    # The read's check must describe the class as the read left it: handing the tracer's callback the getter found
    # before the read (a property) kept the property's value, 2.0, for every later call, where eager gives 3.0.
    def f(obj, x):
        return x * obj.scale

    x = torch.ones(2)
    cls_e = type("E", (_Swapping,), {"scale": _Swapping.scale})
    cls_t = type("T", (_Swapping,), {"scale": _Swapping.scale})
    jf = thunder.jit(f)
    for _ in range(4):  # first the property's value, then the class attribute it left
        torch.testing.assert_close(jf(cls_t(), x), f(cls_e(), x))


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
        return x * obj.total + getattr(obj, "a")  # noqa: B009 (the builtin's lookaside, not LOAD_ATTR)

    x = torch.ones(2)
    obj = _Nested()
    jf = thunder.jit(f)
    torch.testing.assert_close(jf(obj, x), f(obj, x))
    obj.b = 10.0  # the getter's own read changed: checked where it was made
    torch.testing.assert_close(jf(obj, x), f(obj, x))
    obj.a = -1.0
    torch.testing.assert_close(jf(obj, x), f(obj, x))
