"""Regression tests of what the third round of the randomized tester (``tests/fuzz``, the families of
``tests.fuzz.snippets_outside``) found, from the nineteenth session on: ``torch.autograd.Function``s after common
subexpression elimination (the earlier findings are in test_fuzz_findings.py and test_fuzz_findings2.py)."""

from __future__ import annotations

import pytest
import torch

import thunder
from thunder.core.errors import UnsupportedOpError


def _grads(fn, x: torch.Tensor):
    """``fn(x)``'s result and the gradient of its sum at ``x``."""
    x = x.detach().clone().requires_grad_()
    out = fn(x)
    out.sum().backward()
    return out.detach(), x.grad


class _Squared(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.save_for_backward(t)
        return t * t

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * 3 * t  # not the derivative: the Function's own rule must be the one that runs


class _Sine(torch.autograd.Function):
    @staticmethod
    def forward(t):
        return t.sin()

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * t.cos() * 2


class _ScaledPlusOne(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, k):
        ctx.k = k
        return t * k

    @staticmethod
    def backward(ctx, g):
        return g * ctx.k + 1, None  # not linear in g


def test_a_functions_backward_reads_the_input_that_cse_merged_with_another():
    # Fuzz seed 6010049: ``x.float()`` computed for two Functions is one value after CSE, but the second one's
    # backward, traced on the name its copy had, read that name: NameError in the forward's saved values.
    def fn(x):
        return _Sine.apply(x.float()) + _Squared.apply(x.float())

    x = torch.randn(3, dtype=torch.float64)
    expected, actual = _grads(fn, x), _grads(thunder.jit(fn), x)
    torch.testing.assert_close(actual, expected)


def test_two_calls_of_a_function_on_the_same_input_each_run_its_backward():
    # CSE merged the two calls (same symbol, same arguments): the backward ran once, on the sum of both
    # cotangents, and a backward not linear in its cotangent gave 9 where eager gives 10 (Note [One symbol per
    # call site]).
    def fn(x):
        return _ScaledPlusOne.apply(x, 2.0) * _ScaledPlusOne.apply(x, 2.0)

    x = torch.ones(3)
    expected, actual = _grads(fn, x), _grads(thunder.jit(fn), x)
    torch.testing.assert_close(actual, expected)


class _NotMaterialized(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        ctx.set_materialize_grads(False)
        return t * 2, t * 3

    @staticmethod
    def backward(ctx, g1, g2):
        first = g1 * 2 if g1 is not None else 100
        return first + (g2 * 3 if g2 is not None else 10)


def test_a_function_that_does_not_materialize_grads_gets_none_for_an_output_no_gradient_reaches():
    # The backward was traced on placeholder cotangents and given zeros for the unused output: it took the branch
    # for a gradient where eager's gets None (Note [A Function that does not materialize gradients]).
    for fn in (lambda x: _NotMaterialized.apply(x)[0], lambda x: _NotMaterialized.apply(x)[1],
               lambda x: sum(_NotMaterialized.apply(x))):  # fmt: skip
        x = torch.randn(3)
        expected, actual = _grads(fn, x), _grads(thunder.jit(fn), x)
        torch.testing.assert_close(actual, expected)


def _local_classes():
    class Meta(type):
        def __call__(cls, *args):
            return super().__call__(*args)

    class Scaler(metaclass=Meta):
        def __init__(self, k):
            self.k = k

        def __call__(self, t):
            return t * self.k

    def fn(x):
        return Scaler(3)(x)

    return fn, Scaler, Meta


def test_a_constructor_or_call_slot_replaced_on_a_class_defined_inside_a_function_retraces():
    # ``Scaler(3)(x)`` runs ``__init__``, ``__call__`` and the metaclass's ``__call__`` through C: the prologue
    # checked a method on the class it found by name, which a class defined inside a function has not, so a slot
    # replaced after the first call went unseen (Note [Slots a call runs]).
    def new_init(self, k):
        self.k = -k

    def new_new(cls, k):
        made = object.__new__(cls)
        made.k = 10 * k
        return made

    def new_meta_call(cls, *args):
        made = type.__call__(cls, *args)
        made.k = 100
        return made

    changes = [
        ("__init__", lambda Scaler, Meta: setattr(Scaler, "__init__", new_init)),
        ("__new__", lambda Scaler, Meta: setattr(Scaler, "__new__", new_new)),
        ("__call__", lambda Scaler, Meta: setattr(Scaler, "__call__", lambda self, t: t + 1000)),
        ("metaclass __call__", lambda Scaler, Meta: setattr(Meta, "__call__", new_meta_call)),
    ]
    for what, change in changes:
        fn, Scaler, Meta = _local_classes()
        jfn = thunder.jit(fn)
        x = torch.randn(3)
        torch.testing.assert_close(jfn(x), fn(x))
        change(Scaler, Meta)
        torch.testing.assert_close(jfn(x), fn(x), msg=f"{what} replaced")


class _SquaredInATuple(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t, scale):
        ctx.save_for_backward(t)
        return (t * t * scale,)

    @staticmethod
    def backward(ctx, g):
        (t,) = ctx.saved_tensors
        return g * 3 * t, None


def _leaf_check(x):
    return _Squared.apply(x) + _SquaredInATuple.apply(x.exp(), 2.0)[0], x.is_leaf


def _view_copy(x):
    y = _Squared.apply(x).clone()
    y[:1].copy_(x[:1])  # copy_ onto a view of a tensor that requires grad
    return y


def test_a_functions_backward_runs_where_the_program_runs_under_torchs_autograd():
    # Seeds 7003576 and 8003403: where the split cannot differentiate the program (it asks x.is_leaf, or copies onto a
    # view), torch's autograd runs the computation, whose Function marker only renamed forward's outputs: torch
    # differentiated t * t (2t) and the user's backward (3t) never ran. Now the Function is applied as itself there.
    for fn in (lambda x: _leaf_check(x)[0], _view_copy):
        x = torch.randn(2, 3)
        expected, expected_grad = _grads(fn, x)
        jf = thunder.jit(fn)
        for _ in range(2):
            out, grad = _grads(jf, x)
            torch.testing.assert_close(out, expected)
            torch.testing.assert_close(grad, expected_grad)
        assert thunder.compile_stats(jf).last_autograd_fallback is not None  # the case this test is about
    x = torch.randn(3, requires_grad=True)
    assert thunder.jit(_leaf_check)(x)[1] is True


class _Printing(torch.autograd.Function):
    @staticmethod
    def forward(ctx, t):
        print("forward")
        return t * t

    @staticmethod
    def backward(ctx, g):
        return g * 3


def test_a_function_with_an_effect_where_the_program_runs_under_torchs_autograd_is_a_clear_error():
    def f(x):
        return _Printing.apply(x), x.is_leaf

    with pytest.raises(UnsupportedOpError, match=r"_Printing.apply .*torch's autograd.*forward calls"):
        thunder.jit(f)(torch.randn(2, requires_grad=True))
