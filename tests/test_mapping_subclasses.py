"""Dict subclasses with a constructor of their own, entering and leaving the jitted function, against eager.

Note [Mappings with a constructor of their own] in ``thunder.core.pytree``: a rebuild that called the type with
the items ran the user's ``__init__`` (or ``__setitem__``) again, doubling values it transforms.
"""

import collections

import pytest
import torch

import thunder


class Doubling(dict):
    def __init__(self, d):
        super().__init__({k: 2 * v for k, v in d.items()})


class Counting(dict):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.n = len(self)


class AttrDict(dict):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.__dict__ = self


class Slotted(dict):
    __slots__ = ("n",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.n = len(self)


class WithExtra(collections.OrderedDict):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self["extra"] = 1


class LoggedSetitem(collections.OrderedDict):
    log: list = []

    def __setitem__(self, key, value):
        LoggedSetitem.log.append(key)
        super().__setitem__(key, value)


class LoggedInit(dict):
    def __init__(self, *args, **kwargs):
        LoggedSetitem.log.append("init")
        super().__init__(*args, **kwargs)


PROGRAMS = {
    "returns a doubling dict": (lambda x: Doubling({"a": x}), lambda x: (x,)),
    "reads a doubling dict": (lambda d: d["a"] + 1, lambda x: (Doubling({"a": x}),)),
    "returns its doubling dict": (lambda d: d, lambda x: (Doubling({"a": x}),)),
    "returns a counting dict": (lambda x: Counting(a=x, b=x + 1), lambda x: (x,)),
    "reads a counting dict": (lambda d: d["a"] * d.n, lambda x: (Counting(a=x),)),
    "returns a dict with a slot": (lambda x: Slotted(a=x, b=x), lambda x: (x,)),
    "reads a dict with a slot": (lambda d: d["a"] * d.n, lambda x: (Slotted(a=x),)),
    "returns an attribute dict": (lambda x: AttrDict(a=x + 1), lambda x: (x,)),
    "reads an attribute dict": (lambda d: d.a + d["a"], lambda x: (AttrDict(a=x),)),
    "returns an ordered dict adding an item": (lambda x: WithExtra(a=x), lambda x: (x,)),
    "reads an ordered dict adding an item": (lambda d: d["a"] + len(d), lambda x: (WithExtra(a=x),)),
    "returns an ordered dict logging its items": (lambda x: LoggedSetitem(a=x, b=2 * x), lambda x: (x,)),
    "returns a dict logging its construction": (lambda x: LoggedInit(a=x), lambda x: (x,)),
}


def _state(r):
    """What a caller can see of a result: its type, items and attributes."""
    if not isinstance(r, dict):
        return r.tolist() if isinstance(r, torch.Tensor) else r
    own = getattr(r, "__dict__", None)
    attrs = "itself" if own is r else {k: _state(v) for k, v in (own or {}).items()}
    attrs = (attrs, {n: _state(getattr(r, n)) for n in getattr(type(r), "__slots__", ()) if hasattr(r, n)})
    return type(r), {k: _state(v) for k, v in dict.items(r)}, attrs


@pytest.mark.parametrize("name", PROGRAMS)
def test_a_dict_subclass_with_its_own_constructor_is_rebuilt_as_eager_made_it(name):
    fn, make_args = PROGRAMS[name]
    jfn = thunder.jit(fn)
    for call in range(3):
        x = torch.randn(3)
        LoggedSetitem.log.clear()
        expected = _state(fn(*make_args(x)))
        eager_log = list(LoggedSetitem.log)
        args = make_args(x)
        LoggedSetitem.log.clear()
        assert _state(jfn(*args)) == expected, f"call {call}"
        if call or "items" not in name:  # (OrderedDict's C __init__ calls __setitem__ natively while tracing too)
            assert LoggedSetitem.log == eager_log
    assert thunder.cache_misses(jfn) == 1
