"""thunder's own autograd: forward and backward traces, connected to torch.autograd, against eager."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import thunder
from thunder.core.transforms import NotDifferentiable, split_forward_backward


def _leaves(*shapes, dtype=torch.float64):
    torch.manual_seed(0)
    return [torch.randn(*s, dtype=dtype, requires_grad=True) for s in shapes]


def _twin(xs):
    return [x.detach().clone().requires_grad_(x.requires_grad) for x in xs]


def _check_grads(fn, *shapes, dtype=torch.float64, executors=None, **tol):
    """``fn``'s gradients through thunder equal eager's, and thunder's backward computed them."""
    xs = _leaves(*shapes, dtype=dtype)
    ys = _twin(xs)
    jfn = thunder.jit(fn, executors=executors)
    out = jfn(*xs)
    expected = fn(*ys)
    torch.testing.assert_close(out, expected, **tol)
    out.sum().backward()
    expected.sum().backward()
    for x, y in zip(xs, ys):
        torch.testing.assert_close(x.grad, y.grad, **tol)
    assert thunder.compile_stats(jfn).last_autograd_fallback is None
    assert thunder.last_backward_traces(jfn)
    return jfn


def _backward_matches_eager(fn, *xs):
    """``fn(*xs).backward()`` through thunder and eagerly give the same gradients; returns the jitted ``fn``."""
    ys = _twin(xs)
    jfn = thunder.jit(fn)
    jfn(*xs).backward()
    fn(*ys).backward()
    for x, y in zip(xs, ys):
        torch.testing.assert_close(x.grad, y.grad)
    return jfn


PROGRAMS = {
    "elementwise": (lambda a, b: torch.sin(a) * b + torch.exp(a / 3) - b.tanh(), (3, 4), (3, 4)),
    "broadcast": (lambda a, b: a * b + a, (3, 4), (4,)),
    "reductions": (lambda a: a.sum(0) + a.mean(1).sum() + a.amax(1).sum() + a.var(), (4, 5)),
    "matmul": (lambda a, b: a @ b, (3, 4), (4, 5)),
    "linear": (lambda x, w, b: F.linear(x, w, b), (2, 4), (3, 4), (3,)),
    "gelu": (lambda x: F.gelu(x), (3, 4)),
    "softmax": (lambda x: F.softmax(x, -1), (3, 4)),
    "log_softmax": (lambda x: F.log_softmax(x, 0), (3, 4)),
    "layer_norm": (lambda x, w, b: F.layer_norm(x, (4,), w, b), (3, 4), (4,), (4,)),
    "cross_entropy": (lambda x: F.cross_entropy(x, torch.tensor([1, 0, 3])), (3, 4)),
    "views": (lambda x: x.reshape(4, 3).t().unsqueeze(0).expand(2, 3, 4)[1, :, 1:], (3, 4)),
    "cat_and_where": (lambda a, b: torch.where(a > 0, torch.cat([a, b], 0)[:3], b), (3, 4), (3, 4)),
    "indexing": (lambda a: a[torch.tensor([0, 2, 2])] * 2, (3, 4)),
    "dtype_change": (lambda a: (a.float() * 2).double(), (3,)),
}


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_gradients_match_eager(name):
    fn, *shapes = PROGRAMS[name]
    _check_grads(fn, *shapes)


def test_float32_module_gradients_match_eager():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.LayerNorm(8), torch.nn.Linear(8, 2))
    twin = torch.nn.Sequential(*[m for m in __import__("copy").deepcopy(model)])
    x = torch.randn(5, 4)
    jm = thunder.jit(model)
    jm(x).pow(2).sum().backward()
    twin(x).pow(2).sum().backward()
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    assert thunder.compile_stats(jm).last_autograd_fallback is None


def test_forward_and_backward_traces():
    jfn = _check_grads(lambda a, b: (torch.sin(a) * b).sum(), (3,), (3,))
    names = [t.provenance.pass_name for t in thunder.last_traces(jfn)]
    assert names[:4] == ["Interpretation", "Dead Code Elimination", "Common Subexpression Elimination",
                         "Forward and backward split"]  # fmt: skip
    assert names[-1] == "Delete Last Used"
    backward = thunder.last_backward_traces(jfn)
    assert [t.provenance.pass_name for t in backward][0] == "Forward and backward split"
    assert backward[-1].provenance.pass_name == "Delete Last Used"
    source = str(backward[-1])
    assert "def backward(" in source and "cos" in source


def test_each_backward_op_names_the_forward_op_it_differentiates():
    jfn = _check_grads(lambda a, b: F.gelu(a * b).sum(), (3,), (3,))
    split_index = [t.provenance.pass_name for t in thunder.last_traces(jfn)].index("Forward and backward split")
    forward_uids = {b.uid: b for b in thunder.last_traces(jfn)[split_index].bound_symbols}
    backward = thunder.last_backward_traces(jfn)[0]
    for bsym in backward.bound_symbols[:-1]:  # all but the return
        assert len(bsym.lineage) == 1 and bsym.lineage[0] in forward_uids, bsym
        assert bsym.source == forward_uids[bsym.lineage[0]].source
    differentiated = {forward_uids[b.lineage[0]].sym.name for b in backward.bound_symbols[:-1]}
    assert {"gelu", "mul", "sum"} <= differentiated


def test_only_what_the_backward_reads_is_saved():
    jfn = _check_grads(lambda a: torch.exp(a).sum(), (3,))
    forward = thunder.last_traces(jfn)[-1]
    saved = forward.bound_symbols[-1].args[0][1]
    assert len(saved) == 1  # exp's input or its output, not both, and not the sum
    assert thunder.compile_stats(jfn).last_saved_for_backward_bytes == 3 * 8


def test_decompositions_are_recomputed_in_the_backward_not_saved():
    jfn = _check_grads(lambda a: F.gelu(a).sum(), (3,))
    forward = thunder.last_traces(jfn)[-1]
    saved = forward.bound_symbols[-1].args[0][1]
    assert [p.name for p in saved] == [forward.args[0].name]  # only the input


def test_an_output_the_rule_reads_is_saved_not_recomputed():
    # torch.exp has no rule of its own; prims.exp's rule reads the output, which the forward has.
    jfn = _check_grads(lambda a: torch.exp(a * 2).sum(), (3,), executors=["torch"])
    forward, backward = thunder.last_traces(jfn)[-1], thunder.last_backward_traces(jfn)[-1]
    saved = forward.bound_symbols[-1].args[0][1]
    assert not [b for b in backward.bound_symbols if "exp" in b.sym.name]
    assert [p.name for p in saved] == [forward.bound_symbols[2].output.name]  # after x's unpack_trivial


def test_a_number_exponent_is_differentiated_with_numbers():
    jfn = _check_grads(lambda a: torch.pow(a, 3.0).sum() + (a**0).sum(), (4,), executors=["torch"])
    backward = thunder.last_backward_traces(jfn)[-1]
    names = [b.sym.name for b in backward.bound_symbols]
    assert "where" not in names and "eq" not in names
    assert [b.args[1] for b in backward.bound_symbols if b.sym.name == "pow"] == [2.0]


def test_a_whole_slice_passes_its_gradient_through():
    jfn = _check_grads(lambda a: a[:, -0:].sum() + a[:, 1:].sum(), (2, 3), executors=["torch"])
    backward = thunder.last_backward_traces(jfn)[-1]
    assert sum("pad" in b.sym.name for b in backward.bound_symbols) == 1  # only the partial slice


def test_retain_graph_and_a_second_backward_behave_as_in_eager():
    (a,) = _leaves((3,))
    jfn = thunder.jit(lambda x: (x * x).sum())
    out = jfn(a)
    out.backward(retain_graph=True)
    out.backward()
    torch.testing.assert_close(a.grad, 4 * a.detach())
    out = jfn(a)
    out.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        out.backward()


def test_gradients_accumulate():
    (a,) = _leaves((3,))
    jfn = thunder.jit(lambda x: (x * 3).sum())
    jfn(a).backward()
    jfn(a).backward()
    torch.testing.assert_close(a.grad, torch.full((3,), 6.0, dtype=torch.float64))
    assert thunder.cache_misses(jfn) == 1


def test_in_place_change_of_a_saved_tensor_fails_as_in_eager():
    a, b = _leaves((3,), (3,))
    out = thunder.jit(lambda x, y: (x * y).sum())(a, b)
    with torch.no_grad():
        b.mul_(2)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


def test_double_backward_fails_clearly():
    (a,) = _leaves((3,))
    out = thunder.jit(lambda x: (x * x * x).sum())(a)
    with pytest.raises(RuntimeError, match="double backward .* not supported"):
        torch.autograd.grad(out, a, create_graph=True)


def test_a_change_of_requires_grad_recompiles():
    a, b = _leaves((3,), (3,))
    jfn = thunder.jit(lambda x, y: (x * y).sum())
    jfn(a, b).backward()
    out = jfn(a, b.detach())
    assert thunder.cache_misses(jfn) == 2
    out.backward()
    torch.testing.assert_close(a.grad, 2 * b.detach())


def test_outputs_that_do_not_require_grad():
    (a,) = _leaves((3,))
    jfn = thunder.jit(lambda x: (x * 2, x.argmax(), x.detach() + 1, 7))
    doubled, index, detached, seven = jfn(a)
    assert doubled.requires_grad and not index.requires_grad and not detached.requires_grad and seven == 7
    doubled.sum().backward()
    torch.testing.assert_close(a.grad, torch.full((3,), 2.0, dtype=torch.float64))


def test_an_input_returned_as_is_is_the_callers_object():
    (a,) = _leaves((3,))
    out, same = thunder.jit(lambda x: ((x * 2).sum(), x))(a)
    assert same is a
    out.backward()
    torch.testing.assert_close(a.grad, torch.full((3,), 2.0, dtype=torch.float64))


def test_structured_outputs_keep_their_structure():
    a, b = _leaves((3,), (3,))
    out = thunder.jit(lambda x, y: {"sum": (x + y).sum(), "pair": [x * y, 2]})(a, b)
    assert set(out) == {"sum", "pair"} and out["pair"][1] == 2
    (out["sum"] + out["pair"][0].sum()).backward()
    torch.testing.assert_close(a.grad, 1 + b.detach())


def test_no_grad_block_inside_is_not_differentiated():
    def g(x):
        with torch.no_grad():
            y = x * 2
        return (y * x).sum()

    jg = _backward_matches_eager(g, *_leaves((3,)))
    assert thunder.last_backward_traces(jg)


def test_disable_torch_autograd_has_no_backward():
    (a,) = _leaves((3,))
    jfn = thunder.jit(lambda x: (x * 2).sum(), disable_torch_autograd=True)
    assert not jfn(a).requires_grad
    assert thunder.last_backward_traces(jfn) == []


def test_symbolic_values_in_the_backward():
    (a,) = _leaves((3, 4))
    jfn = thunder.jit(lambda x, n: (x * n).sum(), cache="symbolic values")
    for n in (2.0, 3.0):
        a.grad = None
        jfn(a, n).backward()
        torch.testing.assert_close(a.grad, torch.full((3, 4), n, dtype=torch.float64))
    assert thunder.cache_misses(jfn) == 1


def test_what_cannot_be_differentiated_runs_under_torch_autograd():
    def g(x):
        y = x * 1
        view = y[:2]
        y.add_(1)  # an in-place update of a value that requires grad, seen through a view
        return (view * x[:2]).sum()

    jg = _backward_matches_eager(g, *_leaves((3,)))
    assert "in place" in thunder.compile_stats(jg).last_autograd_fallback
    assert thunder.last_backward_traces(jg) == []


@pytest.mark.parametrize("kind", ["add_", "relu_ chain", "module"])
def test_in_place_updates_nothing_else_sees_are_differentiated_by_thunder(kind):
    # ResNet's ``out += identity`` and ``nn.ReLU(inplace=True)``: the intermediate has no views.
    relu = torch.nn.ReLU(inplace=True)

    def g(x):
        y = x * 2
        if kind == "add_":
            y += x
        elif kind == "relu_ chain":
            y.add_(x).relu_()
        else:
            y = relu(y)
        return (y * x).sum()

    jg = _backward_matches_eager(g, *_leaves((3,)))
    assert thunder.compile_stats(jg).last_autograd_fallback is None
    assert thunder.last_backward_traces(jg)


def test_split_refuses_a_value_that_requires_grad_from_no_input():
    jfn = thunder.jit(lambda x: x + torch.ones(3, requires_grad=True))
    jfn(torch.ones(3))
    with pytest.raises(NotDifferentiable, match="depends on no input"):
        split_forward_backward(thunder.last_traces(jfn)[0])


def _autocast_program(x, w, b):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = F.linear(x, w, b)  # bfloat16
        loss = F.cross_entropy(y, torch.tensor([0, 1, 2]))  # float32 (autocast's float32 list)
    return loss + (x @ w.T).float().sum()  # outside the region: float32


def test_autocast_inside_matches_eager_forward_and_backward():
    torch.manual_seed(0)
    xs = [torch.randn(3, 4, requires_grad=True), torch.randn(5, 4, requires_grad=True), torch.randn(5, requires_grad=True)]
    ys = _twin(xs)
    jfn = thunder.jit(_autocast_program)
    out, expected = jfn(*xs), _autocast_program(*ys)
    assert out.dtype == expected.dtype
    torch.testing.assert_close(out, expected)
    out.backward()
    expected.backward()
    for x, y in zip(xs, ys):
        assert x.grad.dtype == y.grad.dtype
        torch.testing.assert_close(x.grad, y.grad)
    assert thunder.compile_stats(jfn).last_autograd_fallback is None
    assert "bfloat16" in str(thunder.last_traces(jfn)[-1])


def test_autocast_around_the_call_is_checked_by_the_prologue():
    f = lambda x, w: F.softmax(x @ w, -1)  # noqa: E731
    jf = thunder.jit(f)
    x, w = torch.randn(3, 4), torch.randn(4, 4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out, expected = jf(x, w), f(x, w)
    assert out.dtype is expected.dtype is torch.bfloat16
    torch.testing.assert_close(out, expected)
    assert jf(x, w).dtype is torch.float32  # outside autocast: another entry
    with torch.autocast("cpu", dtype=torch.float16):
        assert jf(x, w).dtype is torch.float16 is f(x, w).dtype
    assert thunder.cache_misses(jf) == 3


def test_autocast_does_not_touch_programs_without_autocast_ops():
    jf = thunder.jit(lambda x: x * 2)
    jf(torch.randn(3))
    assert "autocast" not in str(thunder.last_prologue_traces(jf)[-1])


def test_batch_norm_in_training_updates_running_statistics_once():
    """Its in-place writes (running statistics) happen in the forward only, not again in the backward."""
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4)).train().double()
    twin = copy.deepcopy(model)
    jm = thunder.jit(model)
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
    for _ in range(2):
        jm(x).pow(2).sum().backward()
        twin(x).pow(2).sum().backward()
    assert thunder.compile_stats(jm).last_autograd_fallback is None
    for p, q in zip(model.parameters(), twin.parameters()):
        torch.testing.assert_close(p.grad, q.grad)
    for b, c in zip(model.buffers(), twin.buffers()):
        torch.testing.assert_close(b, c)


def test_a_gradient_not_asked_for_binds_nothing():
    """convolution's backward returns no bias gradient for a convolution without bias: the
    generated line still binds the two it returns."""
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, padding=1, bias=False), torch.nn.ReLU())
    twin = copy.deepcopy(model)
    x = torch.randn(2, 3, 6, 6)
    thunder.jit(model)(x).sum().backward()
    twin(x).sum().backward()
    torch.testing.assert_close(model[0].weight.grad, twin[0].weight.grad)


def test_vjp_under_jit_is_one_trace_and_matches_eager():
    from thunder.core.transforms import vjp

    def f(a, b):
        return F.gelu(a * b), a.sum()

    torch.manual_seed(0)
    x, y, v1, v2 = (torch.randn(3, dtype=torch.float64) for _ in range(4))
    v2 = v2[0]
    jv = thunder.jit(vjp(f), disable_torch_autograd=True, executors=["torch"])
    (out, grads), (eout, egrads) = jv((x, y), (v1, v2)), vjp(f)((x, y), (v1, v2))
    for a, b in zip((*out, *grads), (*eout, *egrads)):
        torch.testing.assert_close(a, b)
    assert "erf" in str(thunder.last_traces(jv)[-1])  # gelu's backward is in the same trace
    with pytest.raises(thunder.core.errors.ThunderValueError, match="cotangent"):
        jv((x, y), (v1,))


def test_grad_and_value_and_grad():
    from thunder.core.transforms import grad, value_and_grad

    def f(a, n):
        return (torch.sin(a) * a * n).sum()

    (x,) = _leaves((3,))
    x = x.detach()
    expected = (torch.cos(x) * x + torch.sin(x)) * 2
    (g, none) = thunder.jit(grad(f))(x, 2)
    torch.testing.assert_close(g, expected)
    assert none is None
    value, (g, _) = thunder.jit(value_and_grad(f))(x, 2)
    torch.testing.assert_close(value, f(x, 2))
    torch.testing.assert_close(g, expected)
    torch.testing.assert_close(grad(f)(x, 2)[0], expected)  # eagerly: torch's autograd


def test_dropout_in_training_draws_as_eager_and_keeps_its_mask_for_the_backward():
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Dropout(0.5)).train()
    twin = copy.deepcopy(model)
    jm = thunder.jit(model)
    x = torch.randn(8, 4)
    for seed in (1, 2):
        torch.manual_seed(seed)
        out = jm(x)
        torch.manual_seed(seed)
        expected = twin(x)
        assert torch.equal(out, expected)  # the same random draws as eager's F.dropout
        out.pow(2).sum().backward()
        expected.pow(2).sum().backward()
    torch.testing.assert_close(model[0].weight.grad, twin[0].weight.grad)
    assert thunder.compile_stats(jm).last_autograd_fallback is None
    assert "uniform" not in str(thunder.last_backward_traces(jm)[-1])  # the mask is kept, not drawn again


class _Cube(torch.autograd.Function):
    """Its backward is deliberately not the derivative of its forward: thunder must run it as is."""

    @staticmethod
    def forward(ctx, x, k):
        y = x * x
        ctx.save_for_backward(x, y)
        ctx.k = k
        return y * x * k, y.argmax()

    @staticmethod
    def backward(ctx, g, _):
        x, y = ctx.saved_tensors
        return 2 * g * y * ctx.k + x * 0, None


class _Scale(torch.autograd.Function):
    """The setup_context style."""

    @staticmethod
    def forward(x, s):
        return x * s

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.s = inputs[1]

    @staticmethod
    def backward(ctx, g):
        return g * ctx.s, None


def test_custom_autograd_functions_use_their_own_backward():
    def f(x):
        cubed, index = _Cube.apply(torch.sin(x), 2.0)
        return (_Scale.apply(cubed, 3.0) + index).sum()

    (a,) = _leaves((4,))
    b = a.detach().clone().requires_grad_()
    jf = thunder.jit(f)
    out, expected = jf(a), f(b)
    torch.testing.assert_close(out, expected)
    out.backward()
    expected.backward()
    torch.testing.assert_close(a.grad, b.grad)
    assert thunder.compile_stats(jf).last_autograd_fallback is None
    assert "_Cube.apply" in str(thunder.last_traces(jf)[0])
    with torch.no_grad():
        torch.testing.assert_close(jf(a), f(b))


def test_activation_checkpointing_recomputes_the_region_in_the_backward():
    import torch.utils.checkpoint as cp

    def block(y, w):
        return torch.tanh(y @ w) * 2

    def f(x, w):
        return cp.checkpoint(block, x, w, use_reentrant=False).sum()

    x, w = _leaves((3, 4), (4, 4))
    jf = _check_grads(f, (3, 4), (4, 4))
    saved = thunder.last_traces(jf)[-1].bound_symbols[-1].args[0][1]
    assert {p.name for p in saved} == {p.name for p in thunder.last_traces(jf)[-1].args}  # only x and w
    assert "tanh" in str(thunder.last_backward_traces(jf)[-1])  # the region runs again


def test_gradients_under_symbolic_values_follow_the_size():
    """var's gradient divides by the element count: it must not be this trace's count (fuzz seed 1184)."""
    f = lambda x: x.var() + x.std(0, correction=0)  # noqa: E731
    jf = thunder.jit(f, cache="symbolic values")
    for n in (3, 2, 5):
        (a,) = _leaves((n,))
        b = a.detach().clone().requires_grad_()
        jf(a).backward()
        f(b).backward()
        torch.testing.assert_close(a.grad, b.grad)
    assert thunder.cache_misses(jf) == 1


def test_a_zero_gradient_is_zeros_not_none():
    """floor's gradient is zero: eager's x.grad is a tensor of zeros (fuzz seed 940)."""
    for f in (lambda x: x.floor(), lambda x: x.floor().ceil() * 2 + x.sign()):
        (a,) = _leaves((3,))
        thunder.jit(f)(a).sum().backward()
        assert a.grad is not None and not a.grad.any()


def test_a_tensor_that_requires_grad_leaving_the_computation_keeps_its_history():
    """Printed or stored, it shows its grad_fn as in eager (fuzz seed 808): torch's autograd runs it."""
    stored = {}

    def f(x):
        y = x + 2
        print(y)
        stored["y"] = y
        return y * 3

    import contextlib
    import io

    (a,) = _leaves((2,))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        jf = thunder.jit(f)
        jf(a).sum().backward()
    assert "grad_fn" in printed.getvalue() and stored["y"].grad_fn is not None
    assert "leave the computation" in thunder.compile_stats(jf).last_autograd_fallback
    torch.testing.assert_close(a.grad, torch.full((2,), 3.0, dtype=torch.float64))


def test_a_stored_tensor_that_requires_grad_is_an_output_of_thunders_backward():
    """``self.last = y``, ``log["y"] = y * 2``, ``calls.append(y)`` (transformers' hidden-states
    collector): the stored tensors carry the autograd function's history, and a loss made from them
    after the call backpropagates through thunder's backward (Note [Stored values that require grad])."""

    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(3, 3)
            self.log, self.calls = {}, []

        def forward(self, x):
            y = self.l(x)
            self.last = y
            self.log["y"] = y * 2
            self.calls.append(y.relu())
            print("stored")
            return y.sum()

    import contextlib
    import copy
    import io

    torch.manual_seed(0)
    eager = M()
    jm = thunder.jit(copy.deepcopy(eager))
    x = torch.randn(2, 3)
    for _ in range(2):
        printed = [io.StringIO(), io.StringIO()]
        for m, run, out in ((eager, eager, printed[0]), (jm._model, jm, printed[1])):
            with contextlib.redirect_stdout(out):
                loss = run(x)
            (loss + (m.last**2).sum() + m.log["y"].mean() + m.calls[-1].sum()).backward()
        assert printed[0].getvalue() == printed[1].getvalue()
        assert jm._model.last.grad_fn is not None and jm._model.last is not jm._model.calls[-1]
        torch.testing.assert_close(jm._model.l.weight.grad, eager.l.weight.grad)
        torch.testing.assert_close(jm._model.l.bias.grad, eager.l.bias.grad)
    assert thunder.compile_stats(jm).last_autograd_fallback is None
    assert (thunder.cache_misses(jm), thunder.cache_hits(jm)) == (1, 1)
    # The forward trace shows the stores, as comments where they would have run.
    assert "#   module.last = t0" in str(thunder.last_traces(jm)[-1])


def test_a_stored_list_read_again_does_not_backpropagate_into_old_calls():
    """The second call reads the list it appends to, so its old item (the first call's tensor, whose
    graph the first backward freed) is an input that no op reads: the backward must not reach it."""
    calls = []

    def f(x, w):
        y = x * w
        calls.append(y)
        return y.sum() * len(calls)

    x, w = torch.randn(3), torch.randn(3, requires_grad=True)
    jf = thunder.jit(f)
    for n in (1, 2, 3):
        (jf(x, w) + calls[-1].sum()).backward()
        torch.testing.assert_close(w.grad, x * (n + 1))
        w.grad = None
    assert len(calls) == 3 and thunder.compile_stats(jf).last_autograd_fallback is None


def test_an_update_in_place_after_a_reduction_that_kept_dims_is_differentiated():
    """Mixtral's router: ``v /= v.sum(-1, keepdim=True)`` on a topk result. The sum's decomposition
    ends in a broadcast of a new tensor, not a view of ``v``, so nothing else sees ``v`` and the
    update is differentiated by thunder (it fell back to torch's autograd)."""

    def f(x):
        v, i = torch.topk(x.softmax(-1), 2, dim=-1)
        v /= v.sum(dim=-1, keepdim=True)
        return v * 3, i

    x = torch.randn(4, 5, requires_grad=True)
    xe = x.detach().clone().requires_grad_()
    jf = thunder.jit(f)
    (v, i), (ve, ie) = jf(x), f(xe)
    torch.testing.assert_close((v, i), (ve, ie))
    v.pow(2).sum().backward()
    ve.pow(2).sum().backward()
    torch.testing.assert_close(x.grad, xe.grad)
    assert thunder.compile_stats(jf).last_autograd_fallback is None


def test_tensors_passed_by_keyword_to_a_symbol_with_a_rule():
    def f(x, w, b):
        return F.layer_norm(x, (4,), bias=b, weight=w).sum() + F.layer_norm(x, (4,), bias=b).sum()

    jf = _check_grads(f, (3, 4), (4,), (4,))
    assert jf is not None


def test_max_and_min_gradients_follow_eager_with_ties_and_nans():
    """With dim the gradient goes to the index (not shared among ties); without, it is shared
    among the equal elements, or the NaNs (found by test_ops.py::test_vjp_vs_torch)."""
    nan = float("nan")
    fns = (
        lambda t: torch.max(t, 1).values.sum(),
        lambda t: torch.min(t, 0, keepdim=True)[0].sum(),
        lambda t: torch.max(t) + torch.min(t),
    )
    for f in fns:
        for value in ([[2.0, 2.0, 1.0], [0.0, 0.0, 0.0]], [[1.0, nan, 3.0], [4.0, 5.0, 6.0]]):
            a = torch.tensor(value, dtype=torch.float64, requires_grad=True)
            b = a.detach().clone().requires_grad_()
            thunder.jit(f)(a).backward()
            f(b).backward()
            torch.testing.assert_close(a.grad, b.grad, equal_nan=True)


def test_gelu_gradient_times_inf_is_eagers():
    """Decomposed, gelu's backward summed inf * (terms of both signs) into NaN (fuzz seed 1853)."""
    f = lambda x: (F.gelu(x) * float("inf")).sum()  # noqa: E731
    (a,) = _leaves((3, 4))
    b = a.detach().clone().requires_grad_()
    thunder.jit(f)(a).backward()
    f(b).backward()
    torch.testing.assert_close(a.grad, b.grad, equal_nan=True)


def test_hardtanh_and_relu6_gradients_at_their_bounds_are_eagers():
    for f in (F.relu6, lambda x: F.hardtanh(x, -0.5, 2.0), lambda x: F.hardtanh_(x.clone())):
        a = torch.tensor([-1.0, -0.5, 0.0, 2.0, 3.0, 6.0, 7.0], dtype=torch.float64, requires_grad=True)
        b = a.detach().clone().requires_grad_()
        thunder.jit(f)(a).sum().backward()
        f(b).sum().backward()
        torch.testing.assert_close(a.grad, b.grad)


def test_in_place_functional_activations_under_the_fallback_match_eager():
    """F.silu(x, inplace=True) runs as eager's in-place kernel, so torch's autograd (the fallback for an
    in-place update of a value that requires grad) handles it (it used to run silu then copy_ and fail)."""
    for fn in (F.silu, F.elu, F.hardtanh, F.relu, F.leaky_relu):
        (a,) = _leaves((4,))
        b = a.detach().clone().requires_grad_()
        f = lambda x, fn=fn: fn(x * 1, inplace=True).sum()  # noqa: E731
        thunder.jit(f)(a).backward()
        f(b).backward()
        torch.testing.assert_close(a.grad, b.grad)


def test_training_batch_norm_keeps_its_batch_statistics_for_the_backward():
    """Its augmented forward (forward_rules) returns mean and 1/std; the backward reads them."""
    torch.manual_seed(0)
    jm = thunder.jit(torch.nn.BatchNorm1d(3).train())
    jm(torch.randn(5, 3, requires_grad=True)).sum().backward()
    assert "batch_norm_with_stats" in str(thunder.last_traces(jm)[-1])
    backward = str(thunder.last_backward_traces(jm)[-1])
    assert "batch_norm_backward_from_stats" in backward and "native_batch_norm(" not in backward


@pytest.mark.parametrize("called_with_grad", [False, True])
@pytest.mark.parametrize("flips", range(4))
@pytest.mark.parametrize("first", [False, True])
@pytest.mark.parametrize("op_first", [False, True])
@pytest.mark.parametrize("op_last", [False, True])
def test_set_grad_enabled_called_as_a_function_is_eagers(called_with_grad, flips, first, op_first, op_last):
    """Results, their autograd history, gradients and the grad mode the call leaves, as in eager."""

    def fn(x):
        mode = first
        for i in range(flips):
            if op_first or i > 0:
                x = x.sin()
            torch.set_grad_enabled(mode)
            mode = not mode
        return x.sin() if op_last else x

    x = torch.randn(5, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    jfn = thunder.jit(fn)
    try:
        torch.set_grad_enabled(called_with_grad)
        y = jfn(x)
        mode = torch.is_grad_enabled()
        torch.set_grad_enabled(called_with_grad)
        y_ref = fn(x_ref)
        mode_ref = torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)
    torch.testing.assert_close(y, y_ref)
    assert (y.grad_fn is None) == (y_ref.grad_fn is None) and mode == mode_ref
    if y.grad_fn is not None:
        y.sum().backward()
        y_ref.sum().backward()
        torch.testing.assert_close(x.grad, x_ref.grad)


@pytest.mark.parametrize("kind", ["batch_norm", "in_place"])
def test_a_recomputed_region_differentiates_ops_that_also_write_state(kind):
    # A checkpointed region is differentiated through its decomposition; an op in it that writes
    # state (batch_norm's running statistics, add_) still computes values that need gradients.
    torch.manual_seed(0)
    bn = torch.nn.BatchNorm1d(4).double()

    def region(t):
        if kind == "batch_norm":
            return bn(t * 2).sin()
        u = t * 2
        u.add_(1)
        return u.sin()

    def f(t):
        return torch.utils.checkpoint.checkpoint(region, t, use_reentrant=False).sum()

    x = torch.randn(8, 4, dtype=torch.float64, requires_grad=True)
    y = x.detach().clone().requires_grad_()
    jf = thunder.jit(f)
    jf(x).backward()
    f(y).backward()
    assert x.grad is not None
    torch.testing.assert_close(x.grad, y.grad)


@pytest.mark.parametrize(
    "alias",
    [lambda t: t.contiguous(), lambda t: t.detach(), lambda t: t.float(), lambda t: t.to("cpu"), lambda t: t.view_as(t),
     lambda t: t.reshape(2, 2), lambda t: t.type_as(t), lambda t: t[...], lambda t: t.clone()],  # fmt: skip
    ids=["contiguous", "detach", "float", "to", "view_as", "reshape", "type_as", "ellipsis", "clone"],
)
def test_an_in_place_update_through_what_may_be_the_same_tensor_is_eagers(alias):
    # contiguous() of a contiguous tensor is the tensor itself: updating it updates h, which is read after.
    def f(x, w):
        h = x * w
        alias(h).add_(1)
        return (h * 3).sum()

    _backward_matches_eager(f, *_leaves((2, 2), (2, 2)))
    jf = thunder.jit(f)
    x, w = _leaves((2, 2), (2, 2))
    torch.testing.assert_close(jf(x, w), f(x, w))


def test_an_in_place_update_of_the_real_part_of_a_complex_tensor_is_eagers():
    def g(z):
        h = z * 2
        h.real.add_(1)  # a view of h
        return h * 3

    z = torch.randn(3, dtype=torch.complex64, requires_grad=True)
    torch.testing.assert_close(thunder.jit(g)(z), g(z))


def test_an_overwrite_in_place_keeps_eagers_zero_gradient_and_replays_still_happen():
    # acc.copy_(w) does not read acc's old value, yet eager gives x a zero gradient (not None); and a
    # program that also assigns a global still does so once its in-place update is differentiated.
    def overwrite(x, w):
        acc = x + 0
        acc.copy_(w)
        return acc.sum()

    x, w = _leaves((3,), (3,))
    _backward_matches_eager(overwrite, x, w)
    assert x.grad is not None and not x.grad.any()

    namespace = {}
    exec("CALLS = 0\ndef counted(x, w):\n    acc = x * 2\n    acc.add_(1)\n    global CALLS\n    CALLS = CALLS + 1\n"
         "    return (acc * w).sum()\n", namespace)  # fmt: skip
    jf = thunder.jit(namespace["counted"])
    jf(*_leaves((3,), (3,)))
    assert namespace["CALLS"] == 1 and thunder.compile_stats(jf).last_autograd_fallback is None


def test_cross_entropy_and_max_pool_keep_what_their_backward_reads():
    """The backward reads the forward's log-probabilities and max-pool indices instead of computing them
    again (a vocabulary-wide log_softmax per token for a language model), with eager's gradients."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3)
    twin = torch.nn.Conv2d(3, 4, 3)
    twin.load_state_dict(conv.state_dict())
    x, target = torch.randn(2, 3, 8, 8), torch.tensor([1, 3])

    def f(m, x, target):
        pooled = F.max_pool2d(m(x), 2)
        return F.cross_entropy(pooled.flatten(1)[:, :4], target)

    jf = thunder.jit(f)
    torch.testing.assert_close(jf(conv, x, target), f(twin, x, target))
    jf(conv, x, target).backward()
    f(twin, x, target).backward()
    for a, b in zip(conv.parameters(), twin.parameters()):
        torch.testing.assert_close(a.grad, b.grad)
    backward = str(thunder.last_backward_traces(jf)[-1])
    assert "log_softmax(" not in backward.replace("log_softmax_backward", "")
    assert "max_pool2d_kernel" not in backward and "max_pool2d_backward" in backward


def test_backward_traces_drop_ops_that_return_their_input():
    """Gradient rules written for the general case give whole-dim slices, zero-width pads and
    reshapes to the same shape for these shapes; the backward runs none of them, and a**2's
    gradient is 2 * a, not 2 * a**1.0 (thunder.transforms.identities)."""
    x = torch.randn(2, 4, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()

    def f(x):
        y = x[:, :].reshape(2, 4) ** 2
        return torch.cat([y[:, :2], y[:, 2:]], dim=1).sum()

    jf = thunder.jit(f)
    jf(x).backward()
    f(x_ref).backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    identities = [b for b in thunder.last_backward_traces(jf)[-1].bound_symbols if b.sym.name in ("pow", "reshape")]
    assert not identities, identities
    names = [t.provenance.pass_name for t in thunder.last_backward_traces(jf)]
    assert "Remove identities" in names


def test_backward_elementwise_ops_broadcast_their_operands_themselves():
    """The backward of ``w * x`` multiplies by ``w`` itself and the mean's gradient is reshaped, not
    expanded, before the add that broadcasts it (thunder.transforms.implicit_broadcasts); a broadcast
    that a matmul reads stays. The gradients are eager's, bitwise."""
    torch.manual_seed(0)
    w, x = torch.randn(32, requires_grad=True), torch.randn(2, 8, 32, requires_grad=True)

    def f(w, x):
        y = w * x
        return (y * y).sum() + y.mean(-1, keepdim=True).exp().sum() + (x.sum(-1, keepdim=True) @ w[None]).sum()

    jf = thunder.jit(f, executors=["torch"])
    grads = torch.autograd.grad(jf(w, x), (w, x))
    expected = torch.autograd.grad(f(w, x), (w, x))
    for a, b in zip(grads, expected):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    backward = thunder.last_backward_traces(jf)[-1]
    source = str(backward)
    assert any(b.sym.name == "mul" and "w" in [getattr(a, "name", None) for a in b.args] for b in backward.bound_symbols)
    expands = [line for line in source.splitlines() if ".expand((2, 8, 32))" in line and not line.lstrip().startswith("#")]
    assert len(expands) == 1, expands  # the matmul's operand
    names = [t.provenance.pass_name for t in thunder.last_backward_traces(jf)]
    assert "Fold broadcasts" in names


@pytest.mark.parametrize(
    "fn,v_shape,c_shape",
    [(lambda v, c: torch.sum(c * v.unsqueeze(0)), (4,), (4,)), (lambda v, c: torch.sum(v.unsqueeze(0) * c), (4,), (4,)),
     (lambda v, c: (c * v.unsqueeze(0)).mean(), (4,), (4,)), (lambda v, c: (c * v).sum(), (1, 4), (4,)),
     (lambda v, c: (c * v).sum(), (1, 1, 4), (4,)), (lambda v, c: (c * v).sum(), (1, 2, 4), (2, 4)),
     (lambda v, c: (c * v).sum(-1).sum(), (1, 4), (4,)), (lambda v, c: (c * v.unsqueeze(0)).sum(), (4,), (3, 4))],
)  # fmt: skip
def test_a_folded_broadcast_keeps_the_gradients_rank(fn, v_shape, c_shape):
    """``c[4] * v.unsqueeze(0)``: the gradient's ``broadcast_in_dim`` of a 0-d cotangent and of ``c`` to (1, 4) was
    folded into ``torch.mul(g, c)``, which broadcasts to (4,): the sum over dim 0 then gave a 0-d gradient (an
    invalid gradient alone, a wrong one added to another: Mixtral's load-balancing loss)."""
    torch.manual_seed(0)
    v, c, d = torch.randn(v_shape, requires_grad=True), torch.randn(c_shape), torch.randn(v_shape)

    def g(v, c, d):
        return fn(v, c) + (v * d).sum()

    jg = thunder.jit(g)
    for f in (g, jg):
        f(v, c, d).backward()
    expected = torch.autograd.grad(g(v, c, d), v)[0]
    torch.testing.assert_close(v.grad, 2 * expected)


def test_shape_prims_print_as_the_torch_expressions_they_compute():
    """In executed traces broadcast_in_dim, pad and slice print as tensor expressions for static shapes,
    not calls of reference impls that work the torch call out per call (Note [Shape prims printed inline]
    in thunder.executors.torchex); the gradient is eager's."""
    x = torch.randn(3, 4, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()

    def f(x):
        return (F.pad(x[:, 1:3], (1, 2)) + x.sum(1, keepdim=True)).sum()

    jf = thunder.jit(f)
    jf(x).backward()
    f(x_ref).backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    source = str(thunder.last_backward_traces(jf)[-1])
    assert "torch.constant_pad_nd(" in source and ".expand((" in source
    assert "torch_pad(" not in source and "torch_broadcast_in_dim(" not in source


def test_requires_grad_on_a_tensor_the_program_made_gives_a_leaf_as_eager():
    """``delta = torch.zeros_like(x).uniform_(-eps, eps).requires_grad_()`` (an adversarial perturbation): the
    flag was set on the trace's proxy only, so the returned tensors did not require grad and ``backward`` failed."""

    def pgd_step(model, x, y, eps):
        delta = torch.zeros_like(x).uniform_(-eps, eps).requires_grad_()
        return F.cross_entropy(model(x + delta), y), delta

    torch.manual_seed(0)
    model, x, y = torch.nn.Linear(4, 3), torch.randn(5, 4), torch.randint(0, 3, (5,))
    torch.manual_seed(1)
    loss, delta = pgd_step(model, x, y, 0.1)
    loss.backward()
    model.zero_grad()
    torch.manual_seed(1)
    jloss, jdelta = thunder.jit(pgd_step)(model, x, y, 0.1)
    jloss.backward()
    assert jdelta.is_leaf and jdelta.requires_grad and jloss.requires_grad
    torch.testing.assert_close(jloss, loss)
    torch.testing.assert_close(jdelta.grad, delta.grad)


@pytest.mark.parametrize("dropout_p", [0.0, 0.1])
def test_backward_of_a_call_made_under_the_callers_autocast_is_eagers(dropout_p):
    """``with torch.autocast("cpu", dtype=torch.bfloat16): out = jitted(q, k, v)``: the gradient rules' ops were
    recorded under the caller's autocast too, so a float32 matmul's gradient came out bfloat16 (an internal error
    for every Hugging Face model trained under autocast with attention dropout)."""

    def f(q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)

    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 12, 8, dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    mask = torch.randn(12, 12, dtype=torch.bfloat16, requires_grad=True)  # a mask that requires grad: decomposed
    grads = []
    for fn in (f, thunder.jit(f)):
        torch.manual_seed(1)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = fn(q, k, v, mask)
        grads.append(torch.autograd.grad(out.float().sum(), (q, k, v, mask)))
    for a, e in zip(*reversed(grads)):
        torch.testing.assert_close(a, e, atol=2e-2, rtol=2e-2)


class _TrainingOnlyBackward(torch.autograd.Function):
    """Reformer's reversible layers assert ``ctx.training`` in their backward."""

    @staticmethod
    def forward(ctx, x, training):
        ctx.training = training
        return x * 2

    @staticmethod
    def backward(ctx, g):
        assert ctx.training, "backward only in training mode"
        return g * 3, None  # not the forward's derivative: the Function's own gradient must be the one used


def test_a_function_whose_backward_cannot_be_traced_is_applied_as_itself():
    """Tracing its backward raised (in eval mode), and the whole call ran eagerly; now the computation applies the
    Function as torch does: the forward is eager's, a backward raises where eager's raises, and in training mode the
    backward is traced as before (the Function's own gradient)."""
    lin = torch.nn.Linear(4, 4)

    def f(x, training):
        return _TrainingOnlyBackward.apply(lin(x), training)

    x = torch.randn(2, 4)
    jf = thunder.jit(f)
    out = jf(x, False)
    torch.testing.assert_close(out, f(x, False))
    with pytest.raises(AssertionError, match="backward only in training mode"):
        out.sum().backward()
    lin.zero_grad()
    f(x, True).sum().backward()
    expected = lin.weight.grad.clone()
    lin.zero_grad()
    jf(x, True).sum().backward()
    torch.testing.assert_close(lin.weight.grad, expected)
