"""The ``out=`` argument of torch functions, against eager: the result is written into the given tensor, which is
returned, and eager's refusals are kept. Found by probing library code: spectral norm's power iteration writes with
``F.normalize(..., out=self._u)``, and every ``out=`` was refused."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import thunder


def _both(fn, *args):
    """``fn`` eagerly and jitted, each on its own copies of ``args``: (eager's result and args, thunder's)."""
    eager_args = [a.clone() for a in args]
    thunder_args = [a.clone() for a in args]
    return (fn(*eager_args), eager_args), (thunder.jit(fn)(*thunder_args), thunder_args)


@pytest.mark.parametrize(
    "fn, shapes",
    [
        (lambda a, b, out: torch.add(a, b, out=out), [(3,), (3,), (3,)]),
        (lambda a, out: F.normalize(a, dim=0, out=out), [(4,), (4,)]),
        (lambda a, b, out: torch.matmul(a, b, out=out), [(2, 3), (3, 4), (2, 4)]),
        (lambda a, out: torch.sum(a, 0, out=out), [(2, 3), (3,)]),
        (lambda a, b, out: torch.cat([a, b], out=out), [(2, 3), (1, 3), (3, 3)]),
        (lambda a, buf: torch.mul(a, 2, out=buf[1]), [(3,), (2, 3)]),  # a view of an input: its base changes
        (lambda a, out: torch.linalg.inv(a + 3 * torch.eye(3), out=out), [(3, 3), (3, 3)]),  # an eager op
    ],
)
def test_the_result_is_written_into_out_and_out_is_returned(fn, shapes):
    args = [torch.randn(s) for s in shapes]
    (expected, eager_args), (actual, thunder_args) = _both(fn, *args)
    torch.testing.assert_close(actual, expected)
    for a, e in zip(thunder_args, eager_args):
        torch.testing.assert_close(a, e)


def test_out_is_the_given_tensor_and_a_tuple_of_outs_comes_back_as_eager_gives_it():
    def f(x, out, values, indices):
        return torch.mul(x, 2, out=out) is out, torch.max(x, 0, out=(values, indices))

    args = (torch.randn(3, 4), torch.empty(3, 4), torch.empty(4), torch.zeros(4, dtype=torch.long))
    (expected, eager_args), (actual, thunder_args) = _both(f, *args)
    assert actual[0] is expected[0] is True
    assert type(actual[1]) is type(expected[1]) is torch.return_types.max_out
    torch.testing.assert_close(tuple(actual[1]), tuple(expected[1]))
    torch.testing.assert_close(thunder_args, eager_args)


def test_out_none_is_no_out():
    f = lambda a: torch.add(a, 1, out=None)  # noqa: E731
    a = torch.randn(3)
    torch.testing.assert_close(thunder.jit(f)(a), f(a))


def test_an_int_result_is_cast_into_a_float_out_and_the_refusals_are_eager_s():
    a = torch.arange(3)
    (expected, _), (actual, _) = _both(lambda a, out: torch.add(a, a, out=out), a, torch.empty(3))
    assert actual.dtype == expected.dtype == torch.float32
    torch.testing.assert_close(actual, expected)
    # a float result into an int tensor, and an argument that requires grad: eager raises RuntimeError, so do we
    refused = [
        (lambda a, out: torch.add(a, a, out=out), (torch.randn(3), torch.zeros(3, dtype=torch.long)), "can't be cast"),
        (lambda a, out: torch.add(a, a, out=out), (torch.randn(3, requires_grad=True), torch.empty(3)), "requires grad"),
        (lambda a, out: torch.add(a, a, out=out), (torch.randn(3), torch.empty(0)), "resize"),
    ]
    for fn, args, message in refused[:2]:
        with pytest.raises(RuntimeError):
            fn(*args)
        with pytest.raises(RuntimeError, match=message):
            thunder.jit(fn)(*args)
    fn, args, message = refused[2]  # eager resizes an empty out; thunder cannot change an input's shape: a clear error
    with pytest.raises(RuntimeError, match=message):
        thunder.jit(fn)(*args)


def test_under_no_grad_an_argument_that_requires_grad_is_allowed():
    def f(a, out):
        with torch.no_grad():
            return torch.add(a, a, out=out)

    a = torch.randn(3, requires_grad=True)
    (expected, _), (actual, _) = _both(f, a.detach().requires_grad_(), torch.empty(3))
    torch.testing.assert_close(actual, expected)
    assert actual.requires_grad is expected.requires_grad is False


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.nn.utils.parametrizations.spectral_norm(torch.nn.Linear(4, 3)),
        lambda: torch.nn.utils.spectral_norm(torch.nn.Linear(4, 3)),
    ],
    ids=["parametrizations", "hook"],
)
def test_spectral_norm_trains_as_in_eager(make):
    # Its power iteration updates the buffers u and v with F.normalize(..., out=...) in training mode.
    torch.manual_seed(0)
    model = make()
    reference = copy.deepcopy(model)
    jitted = thunder.jit(model)
    for _ in range(3):
        x = torch.randn(2, 4)
        expected, actual = reference(x), jitted(x)
        torch.testing.assert_close(actual, expected)
        expected.pow(2).sum().backward()
        actual.pow(2).sum().backward()
        with torch.no_grad():
            for p, q in zip(model.parameters(), reference.parameters()):
                torch.testing.assert_close(p.grad, q.grad)
                p -= 0.1 * p.grad
                q -= 0.1 * q.grad
                p.grad = q.grad = None
        torch.testing.assert_close(dict(model.named_buffers()), dict(reference.named_buffers()))
    assert thunder.cache_misses(jitted) == 1
