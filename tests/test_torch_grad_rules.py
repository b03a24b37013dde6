"""Torch-level VJP rules that compute gradients with eager's backward kernels: gelu, relu, silu,
tanh, sigmoid, softmax/log_softmax (F. and torch. forms), layer_norm, batch_norm, nll_loss, cross_entropy
(through log_softmax and nll_loss), and the pieces of split/chunk/unbind (one concatenation).

Each case runs forward + backward through ``thunder.jit`` and eager with the same cotangent and
compares outputs and gradients (float64 tightly, float32/bfloat16 at eager's tolerance, and
bit for bit where the kernels are eager's own), checks that the backward trace calls the rule's
backward symbol, and that thunder's own backward ran (no fallback to torch's autograd).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

import thunder

DTYPES = (torch.float64, torch.float32, torch.bfloat16)


def _tol(dtype, exact=True):
    if dtype == torch.float64:
        return {"rtol": 1e-12, "atol": 1e-12}
    if dtype == torch.bfloat16 and not exact:
        # Where thunder computes in float32 and eager in bfloat16: an ulp or so apart, more after cancellation.
        return {"rtol": 2e-2, "atol": 1e-2}
    return {}  # assert_close's defaults for the dtype: eager's own tolerance


def _grads(fn, inputs, cotangent_seed=0):
    leaves = [t for t in inputs if isinstance(t, torch.Tensor) and t.requires_grad]
    out = fn(*inputs)
    outs = out if isinstance(out, tuple) else (out,)
    gen = torch.Generator().manual_seed(cotangent_seed)
    cots = [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.dtype) for o in outs]
    grads = torch.autograd.grad(outs, leaves, cots, allow_unused=True)
    return outs, grads


def _clone(inputs):
    return [t.detach().clone().requires_grad_(t.requires_grad) if isinstance(t, torch.Tensor) else t for t in inputs]


def check(fn, inputs, dtype, uses, *, exact=True, not_saved=()):
    """``fn(*inputs)`` and its gradients through thunder.jit match eager; the backward calls each
    name in ``uses``; ``not_saved`` names inputs the forward must not keep for the backward."""
    jf = thunder.jit(fn)
    e_out, e_grads = _grads(fn, _clone(inputs))
    t_out, t_grads = _grads(jf, _clone(inputs))
    assert thunder.compile_stats(jf).last_autograd_fallback is None
    bw = str(thunder.last_backward_traces(jf)[-1])
    for name in uses if any(t.numel() for t in inputs if isinstance(t, torch.Tensor)) else ():
        assert name in bw, f"{name} not in the backward trace:\n{bw}"
    for o, e in zip(t_out, e_out):
        torch.testing.assert_close(o, e, equal_nan=True, **_tol(dtype))
    for g, e in zip(t_grads, e_grads):
        if e is None:
            assert g is None or not g.any()
            continue
        if exact:
            torch.testing.assert_close(g, e, rtol=0, atol=0, equal_nan=True)
        else:
            torch.testing.assert_close(g, e, equal_nan=True, **_tol(dtype, exact=False))
    if not_saved:
        saved = {a.name for a in thunder.last_backward_traces(jf)[-1].args}
        for name in not_saved:
            assert name not in saved, f"{name} is kept for the backward: {sorted(saved)}"
    return jf


def _x(*shape, dtype=torch.float32, seed=0, requires_grad=True, scale=1.0):
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=gen, dtype=torch.float64) * scale).to(dtype).requires_grad_(requires_grad)


# ----------------------------------------------------------------------------------------
# activations
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5), (2, 3, 4), ()])
@pytest.mark.parametrize("approximate", ["none", "tanh", "positional-tanh", None])
def test_gelu(dtype, shape, approximate):
    if approximate is None:
        fn = F.gelu
    elif approximate == "positional-tanh":
        mod = torch.nn.GELU("tanh")
        fn = mod  # nn.GELU calls F.gelu(input, approximate=...)
    else:

        def fn(x):
            return F.gelu(x, approximate=approximate)

    check(fn, [_x(*shape, dtype=dtype, scale=3)], dtype, ["gelu_backward"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["torch", "F", "method", "module"])
def test_relu_keeps_its_output(dtype, form):
    fn = {
        "torch": torch.relu,
        "F": F.relu,
        "method": lambda x: x.relu(),
        "module": torch.nn.ReLU(),
    }[form]

    def f(x):
        return fn(x * 2)

    x = _x(4, 6, dtype=dtype)
    with torch.no_grad():
        x[0, :3] = 0  # the subgradient at 0 is eager's (0)
    jf = check(f, [x], dtype, ["threshold_backward"])
    # Only relu's output is kept (threshold_backward reads the output, as eager's does).
    bw = thunder.last_backward_traces(jf)[-1]
    assert len([a for a in bw.args if not a.name.startswith("g_")]) == 1


def test_relu_nan_and_integer():
    x = torch.tensor([float("nan"), -1.0, 2.0, 0.0], requires_grad=True)
    check(F.relu, [x], torch.float32, ["threshold_backward"])
    ji = thunder.jit(torch.relu)
    assert torch.equal(ji(torch.tensor([-1, 3])), torch.tensor([0, 3]))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("form", ["F", "module"])
def test_silu(dtype, form):
    fn = F.silu if form == "F" else torch.nn.SiLU()
    check(fn, [_x(3, 7, dtype=dtype, scale=3)], dtype, ["silu_backward"])


@pytest.mark.parametrize("dtype", [*DTYPES, torch.complex64])
@pytest.mark.parametrize("op,kernel", [(torch.tanh, "tanh_backward"), (torch.sigmoid, "sigmoid_backward")])
def test_tanh_and_sigmoid_run_eagers_one_kernel_backward(dtype, op, kernel):
    # The prims' rules took three kernels, and sigmoid's multiplied in another order than eager
    # (g * (s * (1 - s)) against (g * (1 - s)) * s): float32 gradients were an ulp off.
    check(lambda x: op(x * 2), [_x(4, 9, dtype=dtype, scale=3)], dtype, [kernel])
    jf = thunder.jit(lambda x: op(x).tanh())  # the forward keeps outputs, not inputs
    jf(_x(3, dtype=dtype)).sum().abs().backward()
    bw = thunder.last_backward_traces(jf)[-1]
    assert str(bw).count(kernel) + str(bw).count("tanh_backward") >= 2


def test_tanh_and_sigmoid_backward_decompose_into_prims():
    """So that a fusion executor claiming prims (triton) fuses them; the torch executor runs them whole."""
    from thunder.torch.nn_activations import sigmoid_backward, tanh_backward

    g, y = _x(3, 4, requires_grad=False), _x(3, 4, seed=1, requires_grad=False).tanh()
    for sym in (tanh_backward, sigmoid_backward):
        jf = thunder.jit(lambda a, b, _s=sym: _s(a, b))
        jf(g, y)
        (bsym,) = [b for b in thunder.last_traces(jf)[0].bound_symbols if b.sym is sym]
        assert {"mul", "sub"} <= {b.sym.name for b in bsym.subsymbols}


def test_silu_complex():
    # Eager's autograd refuses complex silu; thunder's gradient is that of x * sigmoid(x).
    x = torch.randn(3, 4, dtype=torch.complex128, requires_grad=True)
    x2 = x.detach().clone().requires_grad_()
    g = torch.randn(3, 4, dtype=torch.complex128)
    jf = thunder.jit(F.silu)
    jf(x).backward(g)
    (x2 * torch.sigmoid(x2)).backward(g)
    assert thunder.compile_stats(jf).last_autograd_fallback is None
    torch.testing.assert_close(x.grad, x2.grad)


# ----------------------------------------------------------------------------------------
# softmax
# ----------------------------------------------------------------------------------------

SOFTMAX_CALLS = {
    "F.softmax dim=-1": lambda x: F.softmax(x, dim=-1),
    "F.softmax 0": lambda x: F.softmax(x, 0),
    "F.log_softmax dim=1": lambda x: F.log_softmax(x, dim=1),
    "F.log_softmax -1": lambda x: F.log_softmax(x, -1),
    "torch.softmax": lambda x: torch.softmax(x, 1),
    "torch.log_softmax": lambda x: torch.log_softmax(x, -1),
    "Tensor.softmax": lambda x: x.softmax(-1),
    "Tensor.log_softmax": lambda x: x.log_softmax(dim=0),
    "nn.Softmax": torch.nn.Softmax(dim=1),
    "nn.LogSoftmax": torch.nn.LogSoftmax(dim=-1),
}


@pytest.mark.parametrize("dtype", (*DTYPES, torch.float16))
@pytest.mark.parametrize("shape", [(4, 9), (2, 3, 5)])
@pytest.mark.parametrize("call", list(SOFTMAX_CALLS))
def test_softmax(dtype, shape, call):
    name = "log_softmax_backward_data" if "og" in call else "softmax_backward_data"
    check(SOFTMAX_CALLS[call], [_x(*shape, dtype=dtype, scale=2)], dtype, [name])


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: F.softmax(x, -1, dtype=torch.float64),
        lambda x: F.log_softmax(x, 1, 3, torch.float64),
        lambda x: torch.softmax(x, 1, torch.float64),
        lambda x: torch.log_softmax(x, 0, dtype=torch.float64),
        lambda x: x.softmax(-1, dtype=torch.float64),
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_softmax_dtype_argument(fn, dtype):
    # softmax of input.to(dtype): the gradient converts back to the input's dtype, as eager's does.
    check(fn, [_x(3, 6, dtype=dtype)], dtype, ["softmax_backward_data"])


def test_softmax_under_autocast():
    # Under CPU autocast (the matmul in bfloat16, then softmax of the bfloat16 scores) the gradient is eager's.
    def fn(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return torch.softmax(x @ x.mT, -1)

    check(fn, [_x(3, 4, dtype=torch.bfloat16)], torch.bfloat16, ["softmax_backward_data"])


def test_softmax_implicit_dim_and_0d():
    with pytest.warns(UserWarning):
        check(lambda x: F.softmax(x), [_x(3, 4)], torch.float32, ["softmax_backward_data"])
    check(lambda x: F.log_softmax(x, 0), [_x()], torch.float32, ["log_softmax_backward_data"])
    check(lambda x: torch.softmax(x, -1), [_x()], torch.float32, ["softmax_backward_data"])


# ----------------------------------------------------------------------------------------
# layer_norm
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,ns", [((4, 8), (8,)), ((2, 3, 5), (5,)), ((2, 3, 5), (3, 5)), ((0, 4), (4,))])
@pytest.mark.parametrize("affine", ["both", "weight", "none", "frozen"])
def test_layer_norm(dtype, shape, ns, affine):
    x = _x(*shape, dtype=dtype, scale=3, seed=1)
    w = _x(*ns, dtype=dtype, seed=2, requires_grad=affine != "frozen")
    b = _x(*ns, dtype=dtype, seed=3, requires_grad=affine != "frozen")
    if affine == "none":
        fn, inputs = (lambda x: F.layer_norm(x, ns)), [x]
    elif affine == "weight":
        fn, inputs = (lambda x, w: F.layer_norm(x, ns, w)), [x, w]
    else:
        fn, inputs = (lambda x, w, b: F.layer_norm(x, ns, w, b, 1e-3)), [x, w, b]
    check(fn, inputs, dtype, ["layer_norm_backward"])


@pytest.mark.parametrize("dtype", (*DTYPES, torch.float16))
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm_module(dtype, affine):
    mod = torch.nn.LayerNorm(6, elementwise_affine=affine).to(dtype)
    if affine:
        with torch.no_grad():
            mod.weight.normal_()
            mod.bias.normal_()
    jm = thunder.jit(mod)
    ref = copy.deepcopy(mod)
    x = _x(3, 4, 6, dtype=dtype)
    x2 = x.detach().clone().requires_grad_()
    g = torch.randn(3, 4, 6, dtype=torch.float64).to(dtype)
    jm(x).backward(g)
    ref(x2).backward(g)
    assert thunder.compile_stats(jm).last_autograd_fallback is None
    assert "layer_norm_backward" in str(thunder.last_backward_traces(jm)[-1])
    assert torch.equal(x.grad, x2.grad)
    for p, q in zip(mod.parameters(), ref.parameters()):
        assert torch.equal(p.grad, q.grad)


@pytest.mark.parametrize("dtype", DTYPES)
def test_norms_with_tensors_by_keyword(dtype):
    # Tensors that require grad passed by keyword are bound to their positions for the rules.
    x, w, b = _x(3, 5, dtype=dtype), _x(5, seed=1, dtype=dtype), _x(5, seed=2, dtype=dtype)
    check(lambda x, w, b: F.layer_norm(x, (5,), weight=w, bias=b), [x, w, b], dtype, ["layer_norm_backward"])
    check(lambda x, b: F.layer_norm(x, (5,), bias=b, eps=1e-3), [x, b], dtype, ["layer_norm_backward"])
    check(lambda x, w, b: F.batch_norm(x, None, None, weight=w, bias=b, training=True), [x, w, b], dtype,
          ["batch_norm_backward"])  # fmt: skip
    check(lambda x: F.gelu(input=x, approximate="tanh"), [x], dtype, ["gelu_backward"])
    check(lambda x: F.softmax(input=x, dim=0), [x], dtype, ["softmax_backward_data"])


# ----------------------------------------------------------------------------------------
# batch_norm
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "module,shape",
    [
        (lambda: torch.nn.BatchNorm2d(3), (4, 3, 5, 5)),
        (lambda: torch.nn.BatchNorm1d(3), (6, 3)),
        (lambda: torch.nn.BatchNorm1d(3, affine=False), (4, 3, 7)),
        (lambda: torch.nn.BatchNorm2d(3, track_running_stats=False), (2, 3, 4, 4)),
        (lambda: torch.nn.BatchNorm3d(2, momentum=0.3, eps=1e-3), (2, 2, 3, 3, 3)),
    ],
)
@pytest.mark.parametrize("train", [True, False])
def test_batch_norm_module(dtype, module, shape, train):
    mod = module().to(dtype).train(train)
    if mod.affine:
        with torch.no_grad():
            mod.weight.normal_()
            mod.bias.normal_()
    if mod.track_running_stats:
        with torch.no_grad():
            mod.running_mean.normal_()
            mod.running_var.uniform_(0.5, 2)
    ref = copy.deepcopy(mod)
    jm = thunder.jit(mod)
    x = _x(*shape, dtype=dtype, scale=2, seed=4)
    x2 = x.detach().clone().requires_grad_()
    g = torch.randn(shape, dtype=torch.float64).to(dtype)
    jm(x).backward(g)
    ref(x2).backward(g)
    assert thunder.compile_stats(jm).last_autograd_fallback is None
    assert "batch_norm_backward" in str(thunder.last_backward_traces(jm)[-1])
    assert torch.equal(x.grad, x2.grad)
    for p, q in zip(mod.parameters(), ref.parameters()):
        assert torch.equal(p.grad, q.grad)
    # The running statistics are updated once, by the forward, exactly as eager's.
    for p, q in zip(mod.buffers(), ref.buffers()):
        assert torch.equal(p, q)


@pytest.mark.parametrize("dtype", DTYPES)
def test_batch_norm_functional(dtype):
    x = _x(4, 3, 5, dtype=dtype)
    w, b = _x(3, dtype=dtype, seed=1), _x(3, dtype=dtype, seed=2)

    def train_with_stats(x, w, b, rm, rv):
        return F.batch_norm(x, rm, rv, w, b, True, 0.2, 1e-4)

    def train_no_stats(x, w, b):
        return F.batch_norm(x, None, None, w, b, True)

    def evaluation(x, w, b, rm, rv):
        return F.batch_norm(x, rm, rv, w, b)

    rm = torch.zeros(3, dtype=dtype)
    rv = torch.ones(3, dtype=dtype)
    check(train_no_stats, [x, w, b], dtype, ["batch_norm_backward"])
    check(evaluation, [x, w, b, rm, rv], dtype, ["batch_norm_backward"])
    rm_e, rv_e = rm.clone(), rv.clone()
    jf = thunder.jit(train_with_stats)
    xa, wa, ba = _clone([x, w, b])
    xb, wb, bb = _clone([x, w, b])
    train_with_stats(xa, wa, ba, rm_e, rv_e).sum().backward()
    jf(xb, wb, bb, rm, rv).sum().backward()
    assert "batch_norm_backward" in str(thunder.last_backward_traces(jf)[-1])
    assert torch.equal(rm, rm_e) and torch.equal(rv, rv_e)
    for g, e in ((xb.grad, xa.grad), (wb.grad, wa.grad), (bb.grad, ba.grad)):
        assert torch.equal(g, e)


# ----------------------------------------------------------------------------------------
# nll_loss and cross_entropy
# ----------------------------------------------------------------------------------------

CLASS_SHAPES = [
    ((5, 7), (5,)),
    ((7,), ()),
    ((2, 4, 3), (2, 3)),
    ((2, 4, 3, 2), (2, 3, 2)),
    ((2, 3, 2, 2, 2), (2, 2, 2, 2)),
]


def _targets(tshape, c, seed=5, ignore=None):
    gen = torch.Generator().manual_seed(seed)
    t = torch.randint(0, c, tshape, generator=gen)
    if ignore is not None and t.numel() > 1:
        t.view(-1)[::3] = ignore
    return t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,tshape", CLASS_SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss(dtype, shape, tshape, reduction, weighted):
    c = shape[0] if len(shape) == 1 else shape[1]
    x = _x(*shape, dtype=dtype)
    t = _targets(tshape, c, ignore=1)
    w = torch.rand(c, generator=torch.Generator().manual_seed(6), dtype=torch.float64).to(dtype) + 0.5

    def fn(x):
        return F.nll_loss(F.log_softmax(x, 0 if x.ndim == 1 else 1), t, w if weighted else None, ignore_index=1,
                          reduction=reduction)  # fmt: skip

    check(fn, [x], dtype, ["nll_loss_backward", "log_softmax_backward_data"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,tshape", CLASS_SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_class_indices(dtype, shape, tshape, reduction, weighted):
    c = shape[0] if len(shape) == 1 else shape[1]
    x = _x(*shape, dtype=dtype, scale=2)
    t = _targets(tshape, c, ignore=-100)
    w = torch.rand(c, generator=torch.Generator().manual_seed(6), dtype=torch.float64).to(dtype) + 0.5

    def fn(x):
        return F.cross_entropy(x, t, w if weighted else None, reduction=reduction)

    check(fn, [x], dtype, ["nll_loss_backward", "log_softmax_backward_data"])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("shape,tshape", [((6, 5), (6,)), ((2, 4, 3), (2, 3))])
def test_cross_entropy_label_smoothing(dtype, reduction, weighted, shape, tshape):
    c = shape[1]
    x = _x(*shape, dtype=dtype, scale=2)
    t = _targets(tshape, c, ignore=2)
    w = torch.rand(c, generator=torch.Generator().manual_seed(6), dtype=torch.float64).to(dtype) + 0.5

    def fn(x):
        return F.cross_entropy(x, t, weight=w if weighted else None, ignore_index=2, reduction=reduction,
                               label_smoothing=0.2)  # fmt: skip

    # The smoothing term is differentiated through prims: close to eager, not bit for bit.
    check(fn, [x], dtype, ["nll_loss_backward", "log_softmax_backward_data"], exact=False)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("label_smoothing", [0.0, 0.1])
def test_cross_entropy_probabilities(dtype, reduction, label_smoothing):
    x = _x(4, 5, 3, dtype=dtype)
    target = F.softmax(_x(4, 5, 3, dtype=torch.float64, seed=9, requires_grad=False), 1).to(dtype).requires_grad_()

    def fn(x, target):
        return F.cross_entropy(x, target, reduction=reduction, label_smoothing=label_smoothing)

    check(fn, [x, target], dtype, ["log_softmax_backward_data"], exact=False)


def test_cross_entropy_in_a_model_and_legacy_flags():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4))
    ref = copy.deepcopy(model)
    jm = thunder.jit(lambda x, t: F.cross_entropy(model(x), t, size_average=False))
    x, t = torch.randn(6, 8), torch.randint(0, 4, (6,))
    jm(x, t).backward()
    F.cross_entropy(ref(x), t, size_average=False).backward()
    assert thunder.compile_stats(jm).last_autograd_fallback is None
    bw = str(thunder.last_backward_traces(jm)[-1])
    assert "nll_loss_backward" in bw and "gelu_backward" in bw
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad, q.grad)


def test_nll_loss_weight_that_requires_grad_falls_back_like_eager():
    x = _x(4, 3)
    w = torch.rand(3, requires_grad=True)
    t = torch.tensor([0, 2, 1, 2])
    jf = thunder.jit(lambda x, w: F.nll_loss(x, t, w))
    with pytest.raises(RuntimeError, match="weight"):
        jf(x, w)  # under torch's autograd, as eager: nll_loss is not differentiable in its weight
    assert thunder.compile_stats(jf).last_autograd_fallback is not None


# ----------------------------------------------------------------------------------------
# pieces: split, chunk, unbind
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "cut",
    [
        lambda x: x.split(2, dim=1),
        lambda x: torch.split(x, [1, 4, 0, 1], -1),
        lambda x: x.split(4, 1),  # a smaller last piece
        lambda x: x.chunk(3, dim=1),
        lambda x: torch.unbind(x, 0),
        lambda x: x.unbind(dim=-1),
    ],
)
def test_pieces_gradients_are_one_concatenation(dtype, cut):
    def f(x):
        pieces = cut(x * 2)
        return tuple(p.sin() for p in pieces[::2])  # the others get zeros

    jf = check(f, [_x(3, 6, dtype=dtype)], dtype, ["cat"], exact=False)
    bw = thunder.last_backward_traces(jf)[-1]
    assert not [b for b in bw.bound_symbols if "pad" in b.sym.name]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("batched", [False, True])
def test_grouped_mm_vs_eager(dtype, batched):
    """``torch._grouped_mm`` (mixture-of-experts layers in bfloat16 call it): rows grouped by ``offs``
    against a weight per group, or 3-d by 3-d; its gradients are grouped matmuls with the same groups.
    (Eager's own backward refuses a broadcast cotangent, as from ``.sum()``; thunder's takes it.)"""
    torch.manual_seed(0)
    x = torch.randn(*((2, 3, 8) if batched else (6, 8)), dtype=dtype, requires_grad=True)
    w = torch.randn(2, 8, 16, dtype=dtype, requires_grad=True)
    offs = None if batched else torch.tensor([2, 6], dtype=torch.int32)

    def f(x, w):
        return torch._grouped_mm(x, w, offs) * 2

    jf = thunder.jit(f)
    actual, expected = jf(x, w), f(x, w)
    torch.testing.assert_close(actual, expected)
    g = torch.randn_like(expected)
    torch.testing.assert_close(torch.autograd.grad(actual, (x, w), g), torch.autograd.grad(expected, (x, w), g))
    assert thunder.compile_stats(jf).last_autograd_fallback is None
    jf(x, w).sum().backward()
    assert x.grad is not None and w.grad is not None


def test_grouped_mm_rejects_what_eager_rejects():
    offs = torch.tensor([2, 6], dtype=torch.int32)
    for args in ((torch.randn(6, 8), torch.randn(2, 8, 16)), (torch.randn(6, 4), torch.randn(2, 8, 16), offs),
                 (torch.randn(6, 8, dtype=torch.float64), torch.randn(2, 8, 16, dtype=torch.float64), offs)):  # fmt: skip
        with pytest.raises(Exception) as eager:
            torch._grouped_mm(*args)
        with pytest.raises(type(eager.value)):
            thunder.jit(torch._grouped_mm)(*args)


def test_matmul_of_a_batch_by_a_matrix_is_folded_as_torch_folds_it():
    """``x @ w`` with a 3-d ``x`` and a 2-d ``w`` (Falcon's linear layers): torch runs one product of all
    rows, so the weight's gradient is one product too, not a batch of them summed (values as eager's)."""
    x = torch.randn(2, 3, 4, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 5, dtype=torch.float64, requires_grad=True)
    jf = thunder.jit(lambda x, w: x @ w)
    out = jf(x, w)
    g = torch.randn_like(out)
    torch.testing.assert_close(torch.autograd.grad(out, (x, w), g), torch.autograd.grad(x @ w, (x, w), g))
    backward = str(thunder.last_backward_traces(jf)[-1])
    assert "f64[2, 4, 5]" not in backward  # no per-batch weight gradients


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.complex64])
def test_log_gradient_is_one_division_as_in_eager(dtype):
    # It was a reciprocal and a product: two roundings, float32/float64 gradients an ulp off eager's.
    x = (torch.rand(50, dtype=torch.float64, generator=torch.Generator().manual_seed(0)) * 5 + 0.1).to(dtype)
    check(lambda x: torch.log(x * 3), [x.requires_grad_()], dtype, ["div"])
