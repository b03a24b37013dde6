"""Patterns that models from outside (timm, torchvision, transformers) use, each checked against eager PyTorch:
values, gradients, and a cache hit on the second call."""

from __future__ import annotations

from collections import OrderedDict

import pytest
import torch
import torch.nn as nn

import thunder


def _check(fn, *args, grads=False):
    """``fn`` jitted gives eager's values (and gradients of the float arguments); its second call hits."""
    leaves = [a.detach().clone().requires_grad_(grads and a.is_floating_point()) for a in args]
    expected = fn(*leaves)
    jf = thunder.jit(fn)
    copies = [a.detach().clone().requires_grad_(grads and a.is_floating_point()) for a in args]
    actual = jf(*copies)
    torch.testing.assert_close(actual, expected)
    if grads:
        expected.pow(2).sum().backward()
        actual.pow(2).sum().backward()
        for a, e in zip(copies, leaves):
            torch.testing.assert_close(a.grad, e.grad)
    jf(*copies)
    assert thunder.cache_misses(jf) == 1


def test_a_list_changed_after_an_op_read_it():
    def f(x):
        xs = [x]
        y = torch.cat(xs)
        xs.append(x)
        return y

    _check(f, torch.randn(2, 3))


def test_densenet_feature_list():
    def f(x):
        feats = [x]
        for _ in range(3):
            feats.append(torch.cat(feats, 1).relu())
        return torch.cat(feats, 1)

    _check(f, torch.randn(2, 3), grads=True)


class _Instantiating(OrderedDict):
    """transformers' ``ClassInstantier`` (``ACT2FN``): each read makes a new module."""

    def __getitem__(self, key):
        content = super().__getitem__(key)
        cls, kwargs = content if isinstance(content, tuple) else (content, {})
        return cls(**kwargs)


_ACTIVATIONS = _Instantiating(relu=nn.ReLU, gelu=(nn.GELU, {"approximate": "tanh"}))


def test_a_module_made_by_a_dict_subclass_at_each_read():
    lin = nn.Linear(3, 3)
    _check(lambda x: _ACTIVATIONS["gelu"](lin(x)) + _ACTIVATIONS["relu"](x), torch.randn(2, 3), grads=True)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_weight_norm_parametrization(dim):
    torch.manual_seed(0)
    conv = nn.utils.parametrizations.weight_norm(nn.Conv1d(3, 4, 3), dim=dim)
    x = torch.randn(2, 3, 5)
    jm = thunder.jit(conv)
    y = jm(x)
    y.pow(2).sum().backward()
    grads = [p.grad.clone() for p in conv.parameters()]
    conv.zero_grad()
    expected = conv(x)
    expected.pow(2).sum().backward()
    torch.testing.assert_close(y, expected)
    for g, p in zip(grads, conv.parameters()):
        torch.testing.assert_close(g, p.grad)
    jm(x)
    assert thunder.cache_misses(jm) == 1


@pytest.mark.parametrize(
    "fn",
    [lambda x: x * torch.div(7, 2, rounding_mode="trunc"), lambda x: x + torch.div(-7.5, 2, rounding_mode="floor"),
     lambda x: x + torch.add(1, 2, alpha=3), lambda x: x + torch.mul(2.5, 2), lambda x: x + torch.mul(True, 3),
     lambda x: x + torch.div(7, 2), lambda x: x + torch.floor_divide(7, -2)],  # fmt: skip
)
def test_two_numbers_given_to_the_ops_that_take_them(fn):
    _check(fn, torch.randn(3))


def test_item_after_an_update_in_place():
    """Longformer: the value of a tensor updated in place is read by Python."""

    def f(x):
        m = torch.zeros(x.shape)
        m[0] = 3.0
        if (m > 0).any().item():
            return x + m
        return x

    _check(f, torch.randn(2, 3))


def test_where_with_one_argument():
    """litgpt's Mixtral router: ``torch.where(mask)``, data-dependent, splits as ``nonzero`` does."""

    def f(x):
        rows, cols = torch.where(x > 0)
        return x[rows, cols].sum() + rows.sum()

    _check(f, torch.randn(3, 4), grads=True)


def test_the_where_symbol_with_one_argument_points_to_torch_where():
    with pytest.raises(thunder.core.errors.ThunderTypeError, match=r"call torch.where\(condition\)"):
        thunder.jit(lambda x: thunder.torch.where(x > 0))(torch.randn(3))


def test_an_update_of_a_slice_of_a_concatenation_in_training():
    """timm's GhostNet: the update in place of a view sends the backward to torch's autograd; batch norm's running
    statistics must not come to require grad there (the second step failed)."""

    class Ghost(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(4, 4, 1), nn.BatchNorm2d(4)

        def forward(self, x):
            y = self.bn(self.conv(x))
            z = torch.cat([y, y], 1)[:, :4]
            z += y
            return z

    torch.manual_seed(0)
    model, reference = Ghost(), Ghost()
    reference.load_state_dict(model.state_dict())
    jm = thunder.jit(model)
    for _ in range(3):
        x = torch.randn(2, 4, 3, 3)
        model.zero_grad()
        reference.zero_grad()
        out, expected = jm(x), reference(x)
        out.pow(2).sum().backward()
        expected.pow(2).sum().backward()
        torch.testing.assert_close(out, expected)
        # The conv's bias gets a gradient of 0 (the batch norm after it cancels it), which eager and thunder both
        # miss by about 5e-5 in float32, each in its own way: compared at 5e-4.
        for p, e in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, e.grad, atol=5e-4, rtol=1e-4)
        torch.testing.assert_close(model.bn.running_mean, reference.bn.running_mean)
        assert not model.bn.running_mean.requires_grad


_CALLS = 0
_LOG: list = []


def test_the_outside_objects_replays_change_are_not_copied():
    """Calls record copies of their lists and dicts, but not the replays of changes to outside state: a global
    rebound, an outside list appended to."""

    def f(x):
        global _CALLS
        _CALLS = _CALLS + 1
        _LOG.append(_CALLS)
        return torch.cat([x, x])

    jf = thunder.jit(f)
    jf(torch.ones(1))
    jf(torch.ones(1))
    assert _CALLS == 2 and _LOG == [1, 2]


def test_python_types_as_dtypes():
    """Mamba's cache: ``torch.tensor(0, dtype=int)``; ``float`` is float64 whatever the default dtype."""
    _check(lambda x: x.to(dtype=float) + torch.tensor(1, dtype=int) + torch.zeros(2, dtype=float), torch.randn(2))


def test_a_size_given_as_a_0_d_tensor():
    """Longformer's chunking: ``view(n, torch.div(m, 2, rounding_mode="trunc"), ...)``, read with ``__index__``."""

    def f(x):
        return x.view(x.size(0), torch.div(x.size(1), 2, rounding_mode="trunc"), 2).reshape(torch.tensor(-1))

    _check(f, torch.randn(2, 4))


def test_aten_slice():
    fn = lambda x: torch.ops.aten.slice(x, 1, 1, 2**62, 2) + torch.ops.aten.slice.Tensor(x, -1, None, -1)[:, :2]  # noqa: E731
    _check(fn, torch.randn(3, 5), grads=True)


def test_associative_scan_runs_as_the_eager_loop():
    """transformers' Mamba takes ``associative_scan`` under compilers: thunder runs it as a sequential scan whose
    values are the eager loop's, bit for bit."""
    from torch._higher_order_ops.associative_scan import associative_scan

    def combine(left, right):
        return left[0] * right[0], right[0] * left[1] + right[1]

    def scanned(a, b):
        return associative_scan(combine, (a, b), dim=1)[1]

    def loop(a, b):
        state, states = torch.zeros_like(b[:, 0]), []
        for i in range(a.shape[1]):
            state = a[:, i] * state + b[:, i]
            states.append(state)
        return torch.stack(states, 1)

    a, b = torch.rand(2, 6, 3), torch.randn(2, 6, 3)
    assert torch.equal(thunder.jit(scanned)(a, b), loop(a, b))


def test_dropout_after_a_small_convolution_of_a_channels_last_input():
    """SegFormer's decode head: a 1x1 conv of a channels-last tensor (a transposed reshape), then dropout. Eager's
    conv output is channels-last and dropout draws its mask in memory order: the direct kernel's output must be
    laid out as eager's, or the mask lands on other elements."""
    conv = nn.Conv2d(16, 8, 1, bias=False)

    def f(x):
        h = x.transpose(1, 2).reshape(2, -1, 4, 4)  # a channels-last view, as SegFormer's
        return torch.nn.functional.dropout(conv(h).relu(), 0.5)

    x = torch.randn(2, 16, 16, requires_grad=True)
    jf = thunder.jit(f, executors=["torch"])
    torch.manual_seed(0)
    actual = jf(x)
    torch.manual_seed(0)
    expected = f(x)
    torch.testing.assert_close(actual, expected)
    g = torch.randn_like(expected)
    torch.testing.assert_close(torch.autograd.grad(actual, x, g), torch.autograd.grad(expected, x, g))


def test_a_0_d_tensor_formatted_into_a_name():
    """SwitchTransformers picks experts by name: ``self[f"expert_{idx[0]}"]``, an index from ``nonzero()``; eager
    formats a 0-d tensor's item."""
    experts = nn.ModuleDict({f"expert_{i}": nn.Linear(4, 4) for i in range(3)})

    def f(x, scores):
        out = torch.zeros_like(x)
        for idx in (scores > 0).nonzero():
            out = out + experts[f"expert_{idx[0]}"](x) * scores[idx[0]]
        return out, f"{scores.argmax():d}"

    jf = thunder.jit(f)
    x = torch.randn(2, 4)
    for scores in (torch.tensor([1.0, -1.0, 2.0]), torch.tensor([-1.0, 3.0, -2.0]), torch.tensor([1.0, -1.0, 2.0])):
        (actual, name), (expected, expected_name) = jf(x, scores), f(x, scores)
        torch.testing.assert_close(actual, expected)
        assert name == expected_name
    t = torch.randn(2)
    assert thunder.jit(lambda t: f"{t}")(t) == f"{t}"  # eager's text of every value
    with pytest.raises(thunder.core.errors.ThunderRuntimeError, match="Formatting"):
        thunder.jit(lambda t: f"{t * 2}")(t.requires_grad_())  # eager's text names its grad_fn: refused


def test_a_module_converted_to_what_it_is_inside_forward():
    """SwitchTransformers' router calls ``self.classifier.to(self.dtype)`` in its forward: a conversion that changes
    nothing runs; one that would change a parameter is refused with the parameter named."""

    class Router(nn.Module):
        def __init__(self, dtype):
            super().__init__()
            self.classifier, self.dtype = nn.Linear(4, 2), dtype

        def forward(self, x):
            self.classifier = self.classifier.to(self.dtype)
            return self.classifier(x.to(self.dtype))

    x = torch.randn(3, 4)
    m = Router(torch.float32)
    torch.testing.assert_close(thunder.jit(m)(x), m(x))
    with pytest.raises(thunder.core.errors.UnsupportedOpError, match="'weight'.*before calling the jitted function"):
        thunder.jit(Router(torch.float64))(x)


def test_comparisons_by_their_long_names():
    a, b = torch.randn(5), torch.randn(5)

    def f(a, b):
        return torch.greater(a, b), a.less_equal(b), torch.not_equal(a, b), a.greater_equal(b), torch.less(a, b)

    for x, y in zip(thunder.jit(f)(a, b), f(a, b)):
        assert torch.equal(x, y)


def _chunks(h):
    """Longformer's ``_chunk``: overlapping chunks by ``as_strided``, strides computed from ``h.stride()``."""
    size, stride = list(h.size()), list(h.stride())
    size[1], stride[1] = size[1] * 2 - 1, stride[1] // 2
    return h.as_strided(size=size, stride=stride)


def test_as_strided_chunks_as_longformer_makes_them():
    def f(x):
        q = x.transpose(0, 1)  # (4, 16, 8), not contiguous: the chunks follow eager's layout
        h = q.view(4, torch.div(q.size(1), 4, rounding_mode="trunc"), 4, 8)  # a size given as a 0-d tensor
        return _chunks(h) * 2

    x = torch.randn(16, 4, 8, requires_grad=True)
    jf = thunder.jit(f)
    torch.testing.assert_close(jf(x), f(x), rtol=0, atol=0)
    g = torch.randn_like(f(x))
    torch.testing.assert_close(torch.autograd.grad(jf(x), x, g), torch.autograd.grad(f(x), x, g))


def test_strides_of_data_dependent_results_are_eagers():
    """Note [Layouts of data-dependent results]: ``nonzero``'s indices are stored column by column; reading the
    strides of them, or of what they index (Longformer's global attention, then its ``as_strided`` chunks), was a
    clear error ("cannot run on meta tensors")."""

    def f(x, mask):
        rows, cols = mask.nonzero(as_tuple=True)
        picked = x[rows, cols].reshape(-1, 1, 1, 1) * x[:1, :4].reshape(1, 4, 1, 1)  # (n, 4, 1, 1)
        strides = (mask.nonzero().stride(), rows.stride(), torch.masked_select(x, mask).stride(), picked.stride())
        return strides, torch.unique(x.int(), return_inverse=True)[1].stride(), _chunks(picked) + 1

    x = torch.randn(4, 6)
    jf = thunder.jit(f)
    for seed in range(3):
        mask = torch.rand(4, 6, generator=torch.Generator().manual_seed(seed)) > 0.5
        got, want = jf(x, mask), f(x, mask)
        assert got[:2] == want[:2]
        torch.testing.assert_close(got[2], want[2], rtol=0, atol=0)


def test_longformer_with_global_attention_as_eager():
    """Its second layer chunks hidden states made with ``nonzero``'s indices by ``as_strided`` with their strides."""
    transformers = pytest.importorskip("transformers")
    cfg = transformers.LongformerConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                        vocab_size=100, max_position_embeddings=80, attention_window=8, num_labels=3,
                                        pad_token_id=0)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LongformerForSequenceClassification(cfg).eval()
    ids = torch.randint(3, 100, (2, 12), generator=torch.Generator().manual_seed(0))
    global_mask = torch.zeros(2, 12, dtype=torch.long)
    global_mask[:, 0], global_mask[1, 5] = 1, 1
    labels = torch.tensor([0, 2])
    jm = thunder.jit(model)
    got = jm(input_ids=ids, global_attention_mask=global_mask, labels=labels)
    want = model(input_ids=ids, global_attention_mask=global_mask, labels=labels)
    torch.testing.assert_close(got.logits, want.logits)
    params = [p for p in model.parameters() if p.requires_grad]
    for g, w in zip(torch.autograd.grad(got.loss, params), torch.autograd.grad(want.loss, params)):
        torch.testing.assert_close(g, w, rtol=1e-4, atol=1e-5)


def test_as_strided_outside_the_tensor_or_over_gaps_is_refused():
    with pytest.raises(thunder.core.errors.UnsupportedOpError, match="outside those of tensor"):
        thunder.jit(lambda x: (x * 1).as_strided((4,), (2,)))(torch.randn(4))
    with pytest.raises(thunder.core.errors.UnsupportedOpError, match="leaves gaps"):
        thunder.jit(lambda x: x[:, ::2].as_strided((2,), (1,)))(torch.randn(4, 4))


def test_the_first_call_draws_what_eager_draws_when_tracing_replays_ops():
    """Finding eager's layout of a value replays the ops making it on small CPU tensors (size-1 dims make torch's
    layout rules device-dependent), dropout included: the draws were taken from the program's generator, so the
    first call's mask differed from eager's (Longformer in training)."""

    def f(x):
        h = torch.nn.functional.dropout(x, 0.5).reshape(2, 4, 4, 1)
        return _chunks(h)

    x = torch.randn(32, 1).t()  # a size-1 dim whose stride is not the contiguous one: replayed on the CPU
    torch.manual_seed(0)
    expected = f(x)
    after_eager = torch.random.get_rng_state()
    torch.manual_seed(0)
    actual = thunder.jit(f)(x)
    torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert torch.equal(torch.random.get_rng_state(), after_eager)


def test_tensor_where_takes_the_tensor_as_input():
    """``a.where(c, b)`` is ``torch.where(c, a, b)``: the method bound ``a`` as the condition (bool ``a``: silently)."""
    a, b = torch.tensor([True, False, True, False]), torch.tensor([False, False, True, True])
    c = torch.tensor([True, True, False, False])

    def f(a, c, b):
        return a.where(c, b), a.where(c, other=b), a.float().where(c, 2.0)

    for actual, expected in zip(thunder.jit(f)(a, c, b), f(a, c, b)):
        assert torch.equal(actual, expected)


def test_layouts_of_large_tensors_read_with_a_mask_of_size_1_dims():
    """Longformer with its default attention window pads the sequence to 512 and multiplies the hidden states by a
    mask of shape (batch, 1, 512, 1): eager's layout of the product was found by replaying every op before it on the
    CPU, refused as too large ("The strides of tensor ... are not known while tracing") on every real Longformer.
    Now only the op that reads the mask runs on the CPU (Note [Ambiguous layouts])."""

    def f(h, mask):
        m = mask[:, None, :, None]  # shape (2, 1, 512, 1), strides not the contiguous ones in its size-1 dims
        y = (h * 2) * m
        return y.stride(), y.is_contiguous(), y.transpose(1, 2).reshape(2, -1)[:, :5]

    h = torch.randn(2, 128, 512, 1)  # more elements than the whole-program replay took
    mask = torch.randn(512, 2).t()
    expected = f(h, mask)
    actual = thunder.jit(f)(h, mask)
    assert actual[:2] == expected[:2]
    torch.testing.assert_close(actual[2], expected[2], rtol=0, atol=0)
