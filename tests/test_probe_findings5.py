"""What a fifth round of probing found, with programs written after lightning-thunder's tests and users' code (the
earlier rounds' are in tests/test_probe_findings.py to tests/test_probe_findings4.py), each kept as a regression
test against eager on several calls."""

from __future__ import annotations

import dataclasses
import types
import typing

import pytest
import torch

import thunder

transformers_generic = pytest.importorskip("transformers.utils.generic")
ModelOutput = transformers_generic.ModelOutput

_post_inits: list[str] = []


@dataclasses.dataclass
class _ScaledOutput(ModelOutput):
    """A user's ModelOutput whose ``__post_init__`` transforms a field and logs (Note [Mappings with a constructor
    of their own])."""

    logits: torch.Tensor | None = None
    loss: torch.Tensor | None = None

    def __post_init__(self):
        _post_inits.append(type(self).__name__)
        if self.logits is not None:
            self.logits = self.logits * 2
        super().__post_init__()


def _returns_output(x):
    return _ScaledOutput(logits=x + 1, loss=x.sum())


def _reads_output(o):
    return o.logits + 1, o["logits"] * 3, o.to_tuple()


def _returns_input(o):
    return o


def _assert_same_output(actual, expected):
    assert type(actual) is type(expected)
    assert list(actual.keys()) == list(expected.keys())
    for name in ("logits", "loss"):
        e, a = getattr(expected, name), getattr(actual, name)
        assert (a is None) == (e is None)
        if e is not None:
            torch.testing.assert_close(a, e)
            torch.testing.assert_close(actual[name], expected[name])


@pytest.mark.parametrize("cache", ["constant values", "symbolic values", "no caching"])
def test_a_model_outputs_post_init_runs_once_per_construction(cache):
    jf = thunder.jit(_returns_output, cache=cache)
    for _ in range(3):
        x = torch.randn(3)
        _post_inits.clear()
        expected = _returns_output(x)
        eager_calls = list(_post_inits)
        _post_inits.clear()
        actual = jf(x)
        _assert_same_output(actual, expected)
        assert _post_inits == eager_calls  # the program's construction, and no other


def test_a_model_output_argument_is_seen_as_it_is():
    jf = thunder.jit(_reads_output)
    for _ in range(3):
        o = _ScaledOutput(logits=torch.randn(3))
        _post_inits.clear()
        expected = _reads_output(o)
        actual = jf(o)
        assert _post_inits == []
        for a, e in zip(thunder.core.pytree.tree_leaves(actual), thunder.core.pytree.tree_leaves(expected)):
            torch.testing.assert_close(a, e)


def test_a_model_output_argument_returned_is_the_argument():
    jf = thunder.jit(_returns_input)
    for _ in range(3):
        o = _ScaledOutput(logits=torch.randn(3))
        before = o.logits.clone()
        assert jf(o) is o
        torch.testing.assert_close(o.logits, before)


def test_a_model_output_argument_whose_field_was_set_to_none_is_checked():
    jf = thunder.jit(_reads_output)
    o = _ScaledOutput(logits=torch.randn(3))
    jf(o)
    o.logits = None  # the item stays (ModelOutput.__setattr__ stores only values that are not None)
    with pytest.raises(TypeError):
        _reads_output(o)
    with pytest.raises(TypeError):
        jf(o)


def _updates_a_result_its_op_saved(op):
    def f(x):
        y = op(x)
        y.add_(1)
        return y, y * 2

    return f


@pytest.mark.parametrize("op", [torch.exp, torch.sigmoid, torch.tanh], ids=lambda op: op.__name__)
def test_an_in_place_update_of_a_result_its_op_saved_fails_in_backward_as_in_eager(op):
    """``tanh`` keeps its result for its backward: eager refuses the backward once the result changed in place."""
    f = _updates_a_result_its_op_saved(op)
    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(3, requires_grad=True)
        expected, actual = f(x), jf(x)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a, e)
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (expected[0].sum() + expected[1].sum()).backward()
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            (actual[0].sum() + actual[1].sum()).backward()


def test_an_in_place_update_of_a_result_its_op_did_not_save_is_differentiated():
    def f(x, w):
        y = x @ w  # saves x and w, not its result
        y.relu_()
        return y

    jf = thunder.jit(f)
    for _ in range(3):
        x, w = torch.randn(2, 3, requires_grad=True), torch.randn(3, 3, requires_grad=True)
        x2, w2 = (t.detach().clone().requires_grad_() for t in (x, w))
        f(x, w).sum().backward()
        jf(x2, w2).sum().backward()
        torch.testing.assert_close(x2.grad, x.grad)
        torch.testing.assert_close(w2.grad, w.grad)
        assert thunder.compile_stats(jf).last_autograd_fallback is None


class _Doubled(typing.NamedTuple("_Doubled", [("a", torch.Tensor), ("b", int)])):
    """A namedtuple whose ``__new__`` changes an item (``PackedSequence``'s computes its fields)."""

    def __new__(cls, a, b):
        return super().__new__(cls, a * 2, b)


def test_a_namedtuple_with_a_new_of_its_own_is_returned_as_the_program_made_it():
    def f(x):
        return _Doubled(x + 1, 3)

    jf = thunder.jit(f)
    for _ in range(3):
        x = torch.randn(2)
        expected, actual = f(x), jf(x)
        assert type(actual) is _Doubled and actual.b == expected.b
        torch.testing.assert_close(actual.a, expected.a)


def test_a_module_object_not_in_sys_modules_read_as_a_global():
    """A module made with ``types.ModuleType`` (a plugin, a config namespace) read by the program: the second call
    raised ModuleNotFoundError, as the fused prologue's code imported it by name."""
    namespace = types.ModuleType("not_importable_namespace")
    namespace.v = 2

    def f(x):
        return x * namespace.v

    jf = thunder.jit(f)
    for v in (2, 3, 3):
        namespace.v = v
        torch.testing.assert_close(jf(torch.ones(2)), f(torch.ones(2)))
