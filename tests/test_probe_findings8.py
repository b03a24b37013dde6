"""Programs written as ML engineers write them, where the jitted call differed from eager: ``torch.autograd.Function``s
that return a non-tensor beside their tensors (an AMP ``custom_fwd`` forward returning a flag), a list of tensors, a
result marked non-differentiable, or a complex result. Each runs the program eagerly and jitted on several calls and
compares values, ``requires_grad``, ``grad_fn`` presence and gradients."""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

import thunder


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return (
            type(a) is type(b) and a.dtype == b.dtype and a.requires_grad == b.requires_grad
            and (a.grad_fn is None) == (b.grad_fn is None) and torch.allclose(a.detach(), b.detach())
        )
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))
    return type(a) is type(b) and a == b


def _agrees(f, make, loss=None, calls: int = 3) -> None:
    """``make(i)`` gives the arguments of call ``i`` (made twice): eager and jitted give the same results, and
    ``loss(result)`` the same gradients, on every call; the jitted one traces once and never runs eagerly."""
    jf = thunder.jit(f)
    for i in range(calls):
        torch.manual_seed(i)
        args_e = make()
        args_j = [a.detach().requires_grad_(a.requires_grad) for a in args_e]
        expected = f(*args_e)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an eager run instead of the trace (EagerRunWarning) fails the test
            got = jf(*args_j)
        assert _same(expected, got), (i, expected, got)
        if loss is not None:
            loss(expected).backward()
            loss(got).backward()
            for a, b in zip(args_e, args_j):
                assert (a.grad is None) == (b.grad is None)
                if a.grad is not None:
                    torch.testing.assert_close(a.grad, b.grad)
    assert thunder.cache_misses(jf) == 1


# -- what a torch.autograd.Function returns -------------------------------------------------------------------------


class _WithFlag(torch.autograd.Function):
    """A forward that returns a number and a string beside its tensors: backward takes None for them."""

    @staticmethod
    def forward(ctx, a, k):
        ctx.save_for_backward(a)
        return a * k, k, "scaled", a.sum()

    @staticmethod
    def backward(ctx, g, g_k, g_name, g_sum):
        assert g_k is None and g_name is None
        (a,) = ctx.saved_tensors
        return g * 2 + g_sum, None


def test_a_function_returning_non_tensors_beside_tensors_gets_none_for_their_gradients():
    def f(x):
        y, k, name, total = _WithFlag.apply(x, 2)
        return y, k, name, total

    _agrees(f, lambda: (torch.randn(3, requires_grad=True),), loss=lambda r: r[0].sum() + r[3])


class _AmpMatmul(torch.autograd.Function):
    """An AMP-aware Function (``torch.amp.custom_fwd``) that reports whether autocast was on in its forward."""

    @staticmethod
    @torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32)
    def forward(ctx, a, b):
        ctx.save_for_backward(a, b)
        return a @ b, torch.is_autocast_enabled("cpu")

    @staticmethod
    @torch.amp.custom_bwd(device_type="cpu")
    def backward(ctx, g, _):
        a, b = ctx.saved_tensors
        return g @ b.t(), a.t() @ g


def test_a_custom_fwd_function_under_autocast_returning_a_flag_trains_as_eager():
    def f(x, w):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y, enabled = _AmpMatmul.apply(x.bfloat16(), w)
            z = y @ w.t()
        return y, enabled, z

    _agrees(
        f, lambda: (torch.randn(4, 8, requires_grad=True), torch.randn(8, 6, requires_grad=True)),
        loss=lambda r: r[0].sum() + r[2].float().sum(),
    )


class _Pieces(torch.autograd.Function):
    """Returns a list of tensors: to autograd a list is no output, its tensors do not require grad."""

    @staticmethod
    def forward(ctx, a):
        return [a * 2, a * 3]

    @staticmethod
    def backward(ctx, g):
        return g * 2


class _MainAndPieces(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        return a * 2, [a * 3, a * 4]

    @staticmethod
    def backward(ctx, g, g_pieces):
        assert g_pieces is None
        return g * 2


def test_a_function_returning_a_list_gives_tensors_that_do_not_require_grad():
    _agrees(lambda x: _Pieces.apply(x), lambda: (torch.randn(3, requires_grad=True),))


def test_a_function_returning_a_tensor_and_a_list_differentiates_only_the_tensor():
    def f(x):
        y, pieces = _MainAndPieces.apply(x)
        return y, pieces[0], pieces[1].requires_grad

    _agrees(f, lambda: (torch.randn(3, requires_grad=True),), loss=lambda r: r[0].sum())


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, a):
        y = a * 2
        return y, y

    @staticmethod
    def backward(ctx, g1, g2):
        return g1 + 10 * g2


def test_a_tensor_a_function_returns_twice_is_one_tensor_its_later_output():
    """(Passes on the base too: it guards the per-item outputs above.)"""

    def f(x):
        a, b = _Twice.apply(x)
        return a.sum() + 2 * b.sum(), a is b

    _agrees(f, lambda: (torch.randn(3, requires_grad=True),), loss=lambda r: r[0])


class _Rounded(torch.autograd.Function):
    """A float result marked non-differentiable (``ctx.mark_non_differentiable``)."""

    @staticmethod
    def forward(ctx, a):
        r = torch.round(a * 4) / 4
        ctx.mark_non_differentiable(r)
        return r

    @staticmethod
    def backward(ctx, g):
        return g


@pytest.mark.parametrize("with_other", [False, True], ids=["alone", "beside_a_differentiable_result"])
def test_a_result_marked_non_differentiable_does_not_require_grad(with_other):
    def f(x):
        r = _Rounded.apply(x)
        return (r, r.requires_grad, x * 5) if with_other else (r, r.requires_grad)

    loss = (lambda r: r[2].sum()) if with_other else None
    _agrees(f, lambda: (torch.randn(3, requires_grad=True),), loss=loss)


class _Phase(torch.autograd.Function):
    """A complex result: differentiable in eager, as a float one is."""

    @staticmethod
    def forward(ctx, a):
        ctx.save_for_backward(a)
        return torch.polar(torch.ones_like(a), a)

    @staticmethod
    def backward(ctx, g):
        (a,) = ctx.saved_tensors
        return (g.conj() * 1j * torch.polar(torch.ones_like(a), a)).real


def test_a_complex_result_of_a_function_requires_grad():
    def f(x):
        c = _Phase.apply(x)
        return c.real.sum() + c.imag.sum(), c.requires_grad

    _agrees(f, lambda: (torch.randn(3, requires_grad=True),), loss=lambda r: r[0])


class _AddBias(torch.autograd.Function):
    """A backward that returns the bias's gradient unreduced: torch's engine sums it to the bias's shape."""

    @staticmethod
    def forward(ctx, x, b):
        return x + b

    @staticmethod
    def backward(ctx, g):
        return g, g


def test_a_gradient_of_the_broadcast_shape_is_summed_to_the_inputs_as_eager():
    _agrees(
        lambda x, b: _AddBias.apply(x, b),
        lambda: (torch.randn(2, 4, 3, requires_grad=True), torch.randn(4, 1, requires_grad=True)),
        loss=lambda r: (r * r).sum(),
    )


# -- torch.cov and torch.corrcoef (their degrees of freedom are checked on values) ----------------------------------


def test_a_covariance_regularised_loss_with_torch_cov_trains_as_eager():
    """VICReg's variance and covariance terms, written with ``torch.cov``, and ``corrcoef`` of integer data."""

    def loss(z, w):
        c = torch.cov(z.T, correction=0, aweights=w)
        off_diagonal = c - torch.diag(torch.diag(c))
        variance = torch.relu(1 - torch.sqrt(torch.diag(torch.cov(z.T)) + 1e-4)).mean()
        return off_diagonal.pow(2).sum() / z.shape[1] + variance, torch.corrcoef(z.round().long().T), torch.cov(z[:, 0])

    _agrees(loss, lambda: (torch.randn(8, 4, requires_grad=True), torch.rand(8, requires_grad=True)), loss=lambda r: r[0])


# -- quantization-aware training ------------------------------------------------------------------------------------


def test_fake_quantize_ops_with_a_straight_through_estimator_train_as_eager():
    def f(x, scale, lsq_scale, lsq_zero):
        per_tensor = torch.fake_quantize_per_tensor_affine(x, 0.1, 0, -128, 127)
        zero = torch.zeros(x.shape[1], dtype=torch.int32)
        per_channel = torch.fake_quantize_per_channel_affine(x, scale, zero, 1, -8, 7)
        learned = torch._fake_quantize_learnable_per_tensor_affine(x, lsq_scale, lsq_zero, 0, 255, 1.0)
        return per_tensor, per_channel, learned

    _agrees(
        f,
        lambda: (
            torch.randn(3, 4, requires_grad=True), torch.rand(4) * 0.2 + 0.05,
            torch.tensor([0.1], requires_grad=True), torch.tensor([3.0], requires_grad=True),
        ),
        loss=lambda r: r[0].sum() + (r[1] * r[1]).sum() + r[2].sum(),
    )


def test_a_fake_quantize_module_trains_as_eager_with_its_observer_statistics():
    from torch.ao.quantization import FakeQuantize, MovingAverageMinMaxObserver

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 4), FakeQuantize(observer=MovingAverageMinMaxObserver, quant_min=0, quant_max=255)
    )
    jitted_model = copy.deepcopy(model)
    jitted = thunder.jit(jitted_model)
    for _ in range(3):
        x = torch.randn(5, 4)
        expected, got = model(x), jitted(x)
        torch.testing.assert_close(expected, got)
        expected.sum().backward()
        got.sum().backward()
        for (name, a), b in zip(model.named_buffers(), jitted_model.buffers()):
            torch.testing.assert_close(a, b, msg=name)
        for a, b in zip(model.parameters(), jitted_model.parameters()):
            torch.testing.assert_close(a.grad, b.grad)


# -- tensors formatted by the program (Note [Formatting a traced tensor]) -------------------------------------------


def test_a_distribution_with_invalid_parameters_raises_eagers_value_error_on_a_later_call():
    """``torch.distributions`` validates its parameters and formats the invalid ones into its ValueError."""
    from torch import distributions

    def log_prob(mu, scale, action):
        # (validate_args given: another test may have turned the global default off in this process)
        return distributions.Normal(mu, scale, validate_args=True).log_prob(action).sum()

    jitted = thunder.jit(log_prob)
    mu, action = torch.zeros(2), torch.randn(2)
    torch.testing.assert_close(jitted(mu, torch.ones(2), action), log_prob(mu, torch.ones(2), action))
    for bad in (torch.tensor([1.0, float("nan")]), torch.tensor([-1.0, 1.0])):
        with pytest.raises(ValueError) as expected:
            log_prob(mu, bad, action)
        with pytest.raises(ValueError) as got:
            jitted(mu, bad, action)
        assert str(got.value) == str(expected.value)


def test_the_text_of_a_tensor_that_needs_no_grad_is_eagers_on_every_call(capsys):
    log = []

    def step(x, w):
        y = x @ w
        print(f"x={x}")
        log.append(str(y.detach()))
        log.append(repr(x.argmax(-1)))
        return y

    jitted = thunder.jit(step)
    for _ in range(3):
        x, w = torch.randn(2, 2), torch.randn(2, 2, requires_grad=True)
        step(x, w)
        expected, log[:] = list(log), []
        printed = capsys.readouterr().out
        torch.testing.assert_close(jitted(x, w), x @ w)
        assert log == expected and capsys.readouterr().out == printed
        log.clear()


def test_a_branch_on_random_random_names_the_line():
    """Scheduled sampling (``tgt[t] if random.random() < ratio else pred``) cannot be traced: the error says where."""
    import random

    from thunder.core.errors import ThunderRuntimeError

    def decode(target, predicted, ratio):
        return target if random.random() < ratio else predicted  # the scheduled-sampling branch

    with pytest.raises(ThunderRuntimeError, match=r"random\.random\(\) at .*the scheduled-sampling branch"):
        thunder.jit(decode)(torch.ones(2), torch.zeros(2), 0.5)


# -- Tensor.fill_diagonal_ (an NT-Xent loss's masked similarities) ---------------------------------------------------


def test_fill_diagonal_as_eager_writes_it():
    def f(x, cube, wide):
        sim = x @ x.T
        sim.fill_diagonal_(0)
        tall = torch.zeros(7, 3).fill_diagonal_(1.5, wrap=True)
        unwrapped = torch.zeros(7, 3).fill_diagonal_(2)
        transposed = wide.clone()
        transposed.t().fill_diagonal_(9, wrap=True)
        return sim, tall, unwrapped, cube.clone().fill_diagonal_(-1), transposed, torch.zeros(3, 5, dtype=torch.long).fill_diagonal_(3)

    _agrees(
        f,
        lambda: (torch.randn(4, 3, requires_grad=True), torch.randn(3, 3, 3, requires_grad=True), torch.randn(3, 8, requires_grad=True)),
        loss=lambda r: r[0].sum() + r[3].sum() + r[4].sum(),
    )


@pytest.mark.parametrize("shape", [(3,), (2, 3, 4)])
def test_fill_diagonal_refuses_what_eager_refuses(shape):
    def f(x):
        return x.clone().fill_diagonal_(1)

    with pytest.raises(RuntimeError) as expected:
        f(torch.zeros(shape))
    with pytest.raises(RuntimeError) as got:
        thunder.jit(f)(torch.zeros(shape))
    assert str(expected.value) in str(got.value)


def test_fill_diagonal_of_an_input_writes_into_it():
    x, y = torch.randn(3, 3), torch.randn(3, 3)
    y.copy_(x)
    thunder.jit(lambda t: t.fill_diagonal_(0))(x)
    torch.testing.assert_close(x, y.fill_diagonal_(0))
