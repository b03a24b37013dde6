"""Regression tests of what the fourth round of the randomized tester (``tests/fuzz``, the families of
``tests.fuzz.snippets_training``: optimizer steps, gradients accumulated over calls, control flow on tensor values,
storage-level ops, results holding aliases) found, from the twentieth session on (the earlier findings are in
test_fuzz_findings.py, test_fuzz_findings2.py and test_fuzz_findings3.py). Each test runs the program eagerly and
under ``thunder.jit`` in two worlds made from the same source and compares them."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder


def _worlds(source: str, cache: str = "constant values"):
    """The program's namespace twice: run eagerly, and with ``f`` jitted."""
    eager, jitted = {"torch": torch}, {"torch": torch}
    exec(source, eager)
    exec(source, jitted)
    jitted["f"] = thunder.jit(jitted["f"], cache=cache)
    return eager, jitted


def _backward_of_first(ns: dict, x: torch.Tensor):
    """The call's first result's backward: the parameter ``W``'s ``.grad`` and the argument's."""
    x = x.detach().clone().requires_grad_()
    out = ns["f"](x)
    first = out[0] if isinstance(out, tuple) else out
    first.sum().backward()
    return ns["W"].grad, x.grad


# A parameter whose only path to the first result goes through ``detach`` or an op run under ``no_grad`` gets no
# gradient in eager (None); thunder's one autograd node told which inputs each output reaches from the forward's data
# flow, which went on through ``detach`` (and the other ops whose results never require grad) and through ops run
# with grad off: the parameter was "reached" and got the zeros of the absent cotangents. ``W.grad = None`` in the program makes ``W`` an output (the store runs on it), so a program
# that clears a gradient it then reads through ``detach`` (a manual SGD step, a gradient-accumulation counter) got a
# ``.grad`` of zeros where eager's stays None: optimizers treat None and zeros differently (weight decay, momentum).
@pytest.mark.parametrize("cache", ["constant values", "symbolic values", "no caching"])
@pytest.mark.parametrize(
    "body",
    [
        "W.grad = None\n    return x * W.detach()",
        "W.grad = W.grad * 0 if W.grad is not None else None\n    return x * W.detach()",
        "W.tag = 1\n    return x * W.detach()",
        "return x * W.detach(), W * 2",
        "with torch.no_grad():\n        y = W * 2\n    return x * y, W * 3",
        "W.grad = None\n    with torch.no_grad():\n        y = W * 2\n    return x * y",
        "torch.set_grad_enabled(False)\n    y = W * 2\n    torch.set_grad_enabled(True)\n    return x * y, W * 3",
    ],
    ids=["grad-set-to-None", "grad-scaled-or-None", "tensor-attribute", "second-output", "no_grad", "no_grad-grad-None",
         "set_grad_enabled"],
)
def test_a_parameter_read_only_through_detach_or_no_grad_gets_no_gradient(body, cache):
    source = f"W = torch.nn.Parameter(torch.tensor(0.5))\n\n\ndef f(x):\n    {body}\n"
    eager, jitted = _worlds(source, cache)
    for k in range(2):
        x = torch.randn(3, generator=torch.Generator().manual_seed(k))
        expected, got = _backward_of_first(eager, x), _backward_of_first(jitted, x)
        assert (got[0] is None) == (expected[0] is None), (k, expected, got)
        torch.testing.assert_close(got, expected, rtol=0, atol=0)


def _caught(x, n):
    x.zero_()  # an effect first: a failure at run time could not run the call again eagerly
    try:
        return (x.long() ** n,)
    except RuntimeError as e:
        return x * 1, str(e)


# Eager refuses ``int_tensor ** -1`` (a Python int exponent) before computing anything; the meta of ``pow`` did not,
# so the trace took the path without the exception, the compiled op raised at run time after the program's in-place
# update, and the program's ``try`` never saw it (an error where eager returns).
@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_an_integer_tensor_to_a_negative_int_power_raises_while_tracing_so_the_programs_try_catches_it(cache):
    jitted = thunder.jit(_caught, cache=cache)
    for n in (-1, 2, -3):
        x = torch.tensor([2.0, 3.0])
        expected, got = _caught(x.clone(), n), jitted(x.clone(), n)
        assert type(got) is type(expected) and len(got) == len(expected)
        torch.testing.assert_close(got[0], expected[0], rtol=0, atol=0)
        assert got[1:] == expected[1:]


# ``r = x.clone(); r.zero_()``: eager's in-place node keeps ``r``'s history, so a loss of ``r`` alone sends zeros on
# to ``x`` (``x.grad`` is zeros, not None). Thunder computes the update as a new value (``fill``, made of a
# ``full_like`` that reads only ``r``'s shape), and its one autograd node told from the forward's data flow that no
# input reaches that value: ``x.grad`` stayed None where a second output's cotangent was absent.
@pytest.mark.parametrize(
    "body",
    [
        "r = x.clone()\n    r.zero_()\n    return r, x.detach() * 2",
        "r = x.clone()\n    r.zero_()\n    y = r * 2\n    r.add_(1)\n    return y, r.detach()",
        "r = x * 1\n    r.fill_(3)\n    return r, W * 2",
    ],
    ids=["zero_", "zero_-read-before-another-update", "fill_"],
)
def test_a_tensor_overwritten_in_place_still_sends_its_zero_gradient_back(body):
    eager, jitted = _worlds(f"W = torch.nn.Parameter(torch.tensor(0.5))\n\n\ndef f(x):\n    {body}\n")
    x = torch.tensor([1.0, 2.0, 3.0])
    expected, got = _backward_of_first(eager, x), _backward_of_first(jitted, x)
    assert (got[1] is None) == (expected[1] is None), (expected, got)
    torch.testing.assert_close(got, expected, rtol=0, atol=0)


def _item_or_sum(x):
    try:
        acc = (x * 2).item()  # raises for a tensor of two elements: the program catches it
    except RuntimeError:
        acc = x.sum()
    try:
        k = int(acc.sum()) // 0  # a value read from the data: another value on the next call
    except ZeroDivisionError:
        k = -1
    return acc, k


# A call whose data-dependent value changed (``int(acc.sum())``) traces again with the values it read, by index; the
# ``(x * 2).item()`` that raised (and was caught) before reading anything was handed the value read at that index instead,
# so the new trace took the other path, failed at ``acc.sum()`` of an int, and the call ran eagerly with a warning.
def test_a_value_asked_of_a_tensor_of_two_elements_raises_again_when_a_changed_outcome_retraces():
    jitted = thunder.jit(_item_or_sum)
    with warnings.catch_warnings():
        warnings.simplefilter("error", thunder.EagerRunWarning)
        for v in ([[0.25, 0.5]], [[-1.0, -0.5]], [[2.0, 1.0]]):
            x = torch.tensor(v)
            expected, got = _item_or_sum(x), jitted(x)
            torch.testing.assert_close(got[0], expected[0], rtol=0, atol=0)
            assert got[1] == expected[1]
