"""Programs whose Python needs tensor values, and code that asks whether it is being compiled."""

from __future__ import annotations

import math

import pytest
import torch

import thunder


@pytest.mark.filterwarnings("ignore:`torch._utils.is_compiling` is deprecated")
@pytest.mark.parametrize(
    "query",
    [torch.compiler.is_compiling, torch.compiler.is_dynamo_compiling, torch._utils.is_compiling],
    ids=["torch.compiler.is_compiling", "is_dynamo_compiling", "torch._utils.is_compiling"],
)
def test_code_that_asks_whether_it_is_compiled_takes_its_compile_path(query):
    def f(x):
        if query():
            return x * 2  # the path written for compilers
        return x + 1

    x = torch.randn(3)
    jf = thunder.jit(f)
    torch.testing.assert_close(jf(x), x * 2)
    torch.testing.assert_close(jf(x), x * 2)
    assert thunder.cache_misses(jf) == 1
    assert not query()  # outside the trace, the truth


def test_transformers_padding_mask_takes_the_compile_friendly_path():
    transformers = pytest.importorskip("transformers")
    cfg = transformers.BertConfig(num_hidden_layers=1, num_attention_heads=2, hidden_size=32, intermediate_size=64,
                                  vocab_size=100, max_position_embeddings=16)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.BertModel(cfg).eval()
    ids = torch.randint(0, 100, (2, 8))
    mask = torch.ones(2, 8, dtype=torch.long)
    mask[1, :3] = 0
    jm = thunder.jit(model)
    for m in (mask, torch.ones_like(mask)):  # padded, then all ones: one program covers both
        torch.testing.assert_close(jm(ids, attention_mask=m).last_hidden_state, model(ids, attention_mask=m).last_hidden_state)
    assert thunder.cache_misses(jm) == 1


# ----------------------------------------------------------------------------------------
# Splits where the program needs a tensor's value (Note [Data-dependent values])
# ----------------------------------------------------------------------------------------


def _positive_doubles(x):
    if x.sum() > 0:
        return x * 2
    return x - 1


def _calls_match_eager(fn, inputs, **jit_options):
    """Each call gives eager's value, or eager's kind of error."""
    jf = thunder.jit(fn, **jit_options)
    for x in inputs:
        try:
            want = fn(x)
        except Exception as e:
            with pytest.raises(type(e)):
                jf(x)
            continue
        torch.testing.assert_close(jf(x), want, equal_nan=True)
    return jf


def test_a_branch_on_a_tensor_value_takes_each_calls_own_path():
    pos, neg = torch.ones(3), -torch.ones(3)
    jf = _calls_match_eager(_positive_doubles, [pos, neg, pos, neg, neg, pos])
    assert thunder.cache_misses(jf) == 2  # one trace per outcome
    assert thunder.cache_hits(jf) == 4
    reason = str(thunder.cache_miss_reasons(jf)[-1])
    assert "truth value of tensor" in reason and "test_data_dependent.py" in reason and "is False" in reason


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: x * 2 if (x > 0).any() else x * 3,
        lambda x: x + 1 if x.isfinite().all() else torch.zeros_like(x),
        lambda x: x * int(x.sum()),
        lambda x: x * float(x.max()),
        lambda x: x + x.sum().item(),
        lambda x: x[: int((x > 0).sum())],  # a shape from a value
        lambda x: torch.tensor(x.tolist()) * 2,
        lambda x: [x * i for i in range(int(x.abs().sum()) % 4)][-1] if int(x.abs().sum()) % 4 else x,
    ],
    ids=["any", "all", "int", "float", "item", "shape", "tolist", "range"],
)
def test_the_ways_a_program_asks_for_values(fn):
    inputs = [torch.tensor([1.0, -2.0, 3.0]), torch.tensor([-1.0, -2.0, 0.5]), torch.tensor([float("inf"), 1.0, 2.0]),
              torch.tensor([1.0, -2.0, 3.0])]  # fmt: skip
    _calls_match_eager(fn, inputs)


def test_a_loop_whose_trip_count_is_a_tensor_value():
    def grow(x):
        while x.sum() < 100:
            x = x * 2
        return x

    jf = _calls_match_eager(grow, [torch.ones(2), torch.full((2,), 30.0), torch.ones(2), torch.full((2,), 60.0)])
    assert thunder.cache_misses(jf) == 3  # 6 doublings, 1, and none: three paths


def test_values_told_apart_as_the_program_could():
    def sign_of(x):
        v = x.item()
        return x + (math.copysign(2.0, v) if v == v else 3.0)  # -0.0 has its sign; NaN != NaN

    jf = _calls_match_eager(sign_of, [torch.tensor(0.0), torch.tensor(-0.0), torch.tensor(float("nan")),
                                      torch.tensor(float("nan")), torch.tensor(0.0)])  # fmt: skip
    assert thunder.cache_misses(jf) == 3


def test_gradients_through_a_data_dependent_branch():
    def f(x, w):
        h = x @ w
        if h.mean() > 0:
            return (h.relu() * 3).sum()
        return (h * h).sum()

    w = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    jf = thunder.jit(f)
    for sign in (1, -1, 1):
        x = sign * torch.ones(2, 4, dtype=torch.float64)
        w_eager = w.detach().clone().requires_grad_()
        got, want = jf(x, w), f(x, w_eager)
        torch.testing.assert_close(got, want)
        (g,) = torch.autograd.grad(got, [w])
        (g_eager,) = torch.autograd.grad(want, [w_eager])
        torch.testing.assert_close(g, g_eager)
        assert thunder.compile_stats(jf).last_autograd_fallback is None
    assert thunder.cache_misses(jf) == 2


LOG = []


def test_side_effects_before_the_split_happen_once_per_call(capsys):
    def f(x):
        print("called")
        LOG.append(1)
        if x.sum() > 0:
            return x * 2
        return x - 1

    LOG.clear()
    jf = thunder.jit(f)
    for x in (torch.ones(2), -torch.ones(2), torch.ones(2), -torch.ones(2)):
        torch.testing.assert_close(jf(x), x * 2 if x.sum() > 0 else x - 1)
    assert capsys.readouterr().out == "called\n" * 4
    assert LOG == [1] * 4


def test_random_draws_before_the_split_are_eagers():
    def f(x):
        noise = torch.rand_like(x)
        if x.sum() > 0:
            return x + noise
        return x - noise

    jf = thunder.jit(f)
    for x in (torch.ones(3), -torch.ones(3), torch.ones(3), -torch.ones(3)):
        torch.manual_seed(1)
        got = jf(x)
        torch.manual_seed(1)
        torch.testing.assert_close(got, f(x))
        assert not torch.equal(torch.rand(1), torch.rand(1))  # the generator goes on as after eager


def test_sharp_edges_report_the_split():
    x = torch.ones(2)
    with pytest.raises(thunder.core.errors.SharpEdgeError, match=r"truth value of tensor .* splits the program"):
        thunder.jit(_positive_doubles, sharp_edges="error")(x)
    with pytest.warns(UserWarning, match="Data-dependent value"):
        torch.testing.assert_close(thunder.jit(_positive_doubles, sharp_edges="warn")(x), x * 2)


def test_symbolic_values_and_data_dependent_values():
    jf = _calls_match_eager(_positive_doubles, [torch.ones(3), -torch.ones(5), torch.ones(7), -torch.ones(2)],
                            cache="symbolic values")  # fmt: skip
    assert thunder.cache_misses(jf) == 2


def test_threads_calling_with_different_outcomes():
    import concurrent.futures

    jf = thunder.jit(_positive_doubles)
    inputs = [torch.full((3,), float(i % 3 - 1)) for i in range(60)]
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(jf, inputs))
    for x, got in zip(inputs, results):
        torch.testing.assert_close(got, _positive_doubles(x))
    assert thunder.cache_misses(jf) == 2


def test_the_trace_shows_where_it_needed_a_value():
    jf = thunder.jit(_positive_doubles)
    jf(torch.ones(2))
    source = str(thunder.last_traces(jf)[-1])
    assert "_check_outcome(t1, 'bool', True, 0)" in source


def test_the_explorer_labels_the_split_with_what_was_asked_and_got():
    from thunder_viz.graph import steps_from_jitted

    jf = thunder.jit(_positive_doubles)
    jf(-torch.ones(2))
    (split,) = [n for n in steps_from_jitted(jf)[-1]["nodes"] if n["label"].startswith("split:")]
    assert split["label"] == "split: bool(t1) = False"
    assert split["source"] is not None and "x.sum() > 0" in str(split["source"])


@pytest.mark.parametrize("cache", ["constant values", "symbolic values", "same input"])
def test_per_call_python_draws_happen_once_when_the_outcome_changes(cache):
    import random

    def f(x):
        flag = bool(x.all())
        return x * 2, flag, random.random()

    jf = thunder.jit(f, cache=cache)
    for i in range(6):
        x = torch.tensor([1, i % 2])
        random.seed(i)
        got = jf(x)
        after = random.random()
        random.seed(i)
        want = f(x)
        assert got[1:] == want[1:] and after == random.random()


# ----------------------------------------------------------------------------------------
# Shapes that depend on values: the size is the split value
# ----------------------------------------------------------------------------------------

_MASKED = [torch.tensor([[1.0, -2.0, 0.0], [0.0, 3.0, 4.0]]), torch.tensor([[-1.0, 0.0, 1.0], [2.0, 0.0, 0.0]]),
           torch.zeros(2, 3), torch.tensor([[5.0, 6.0, 7.0], [8.0, 9.0, 1.0]])]  # fmt: skip


@pytest.mark.parametrize(
    "fn",
    [
        lambda a: torch.nonzero(a),
        lambda a: a.nonzero(as_tuple=True),
        lambda a: torch.nonzero(a.sum(), as_tuple=True),  # 0-d: as 1-d
        lambda a: torch.argwhere(a > 0),
        lambda a: torch.masked_select(a, a > 0) * 2,
        lambda a: a.masked_select(torch.tensor([True, False, True])),  # broadcast
        lambda a: a[a > 0],
        lambda a: a[a.sum(1) > 0],
        lambda a: a[a[:, 0] > 0, 1:],
        lambda a: a[None, a > 0],
        lambda a: a[..., a[0] > 0],
        lambda a: a[torch.tensor([True, False, True])],  # eager's IndexError
    ],
    ids=["nonzero", "as_tuple", "0-d", "argwhere", "masked_select", "broadcast", "mask", "rows", "mask+slice", "None",
         "ellipsis", "wrong mask"],  # fmt: skip
)
def test_results_whose_shape_depends_on_values(fn):
    jf = thunder.jit(fn)
    for a in _MASKED:
        try:
            want = fn(a)
        except IndexError:
            with pytest.raises(IndexError, match="does not match the shape of the indexed tensor"):
                jf(a)
            continue
        got = jf(a)
        for g, w in zip(got, want) if isinstance(want, tuple) else [(got, want)]:
            assert g.dtype == w.dtype and torch.equal(g, w)


@pytest.mark.parametrize("fn", [lambda a: a[a > 0], lambda a: torch.masked_select(a, a.abs() > 1)], ids=["mask", "select"])
def test_gradients_of_masked_results(fn):
    for a in _MASKED:
        x, y = a.clone().double().requires_grad_(), a.clone().double().requires_grad_()
        jf = thunder.jit(lambda t: (fn(t) ** 2).sum())
        jf(x).backward()
        (fn(y) ** 2).sum().backward()
        torch.testing.assert_close(x.grad, y.grad)
        assert thunder.compile_stats(jf).last_autograd_fallback is None


def test_element_in_a_tensor_of_several_dims_is_one_split():
    """``2.0 in x`` is ``(2.0 == x).any()`` in torch; Python's fallback (iterating rows and asking each
    row's truth value) failed for a 2-d tensor. Its outcome is checked on later calls."""

    def f(x):
        return x * 2 if 2.0 in x else x - float(1 not in x)

    jf = thunder.jit(f)
    for x in (torch.ones(2, 3), torch.full((2, 3), 2.0), torch.zeros(2, 3), torch.ones(2, 3)):
        torch.testing.assert_close(jf(x), f(x))
    assert thunder.cache_misses(jf) == 3
    with pytest.raises(RuntimeError, match="only supports Tensor or scalar"):
        thunder.jit(lambda x: "a" in x)(torch.ones(2))


# ---------------------------------------------------------------- Note [Symbolic data-dependent sizes]


class _MixtureOfExperts(torch.nn.Module):
    """litgpt's LLaMAMoE: each expert takes the tokens routed to it, ``torch.where(mask)``, a count that changes
    with the data."""

    def __init__(self, width=8, experts=4, per_token=2):
        super().__init__()
        self.gate = torch.nn.Linear(width, experts, bias=False)
        self.experts = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(width, 16), torch.nn.SiLU(), torch.nn.Linear(16, width))
            for _ in range(experts)
        )
        self.per_token = per_token

    def forward(self, x):
        B, T, C = x.size()
        x = x.view(-1, C)
        probs, indices = torch.topk(self.gate(x), self.per_token)
        probs = probs.softmax(dim=1, dtype=torch.float).to(dtype=x.dtype)
        masks = (indices.unsqueeze(-1) == torch.arange(len(self.experts))).permute(2, 0, 1)
        y = torch.zeros_like(x)
        for mask, expert in zip(masks, self.experts):
            token_idx, expert_idx = torch.where(mask)
            y[token_idx] += probs[token_idx, expert_idx, None] * expert(x[token_idx])
        return y.view(B, T, C)


def test_a_routing_that_changes_every_call_compiles_twice_and_matches_eager():
    """litgpt's Mixtral recompiled on every call (each expert's token count is a data-dependent size); after the
    first change every count of that line is symbolic, checked by the computation, and every later routing hits."""
    import copy

    torch.manual_seed(0)
    model = torch.nn.Sequential(_MixtureOfExperts(), _MixtureOfExperts())  # the second's routing reads sizes of the first
    reference = copy.deepcopy(model)
    jm = thunder.jit(model)
    for _ in range(8):
        x = torch.randn(2, 12, 8)
        out, expected = jm(x), reference(x)
        torch.testing.assert_close(out, expected)
        out.pow(2).sum().backward()
        expected.pow(2).sum().backward()
        for (name, p), q in zip(model.named_parameters(), reference.parameters()):
            torch.testing.assert_close(p.grad, q.grad, msg=lambda m, name=name: f"{name}: {m}")
    assert thunder.cache_misses(jm) == 2
    assert "data-dependent sizes of this line are symbolic" in str(thunder.cache_miss_reasons(jm)[-1])
    assert "_symbolic_outcome" in str(thunder.last_traces(jm)[-1])


def test_under_symbolic_values_a_routing_compiles_once():
    """``cache="symbolic values"`` makes every size symbolic from the first trace, data-dependent ones too."""
    import copy

    torch.manual_seed(0)
    model = _MixtureOfExperts()
    reference = copy.deepcopy(model)
    jm = thunder.jit(model, cache="symbolic values")
    for _ in range(4):
        x = torch.randn(2, 12, 8)
        torch.testing.assert_close(jm(x), reference(x))
    assert thunder.cache_misses(jm) == 1


def test_a_boolean_mask_with_a_changing_count_stops_recompiling():
    def f(x):
        kept = x[x > 0]
        return kept * 2 + kept.sum(), kept.shape[0]

    jf = thunder.jit(f)
    torch.manual_seed(0)
    for _ in range(10):
        x = torch.randn(40)
        out, n = jf(x)
        expected, m = f(x)
        torch.testing.assert_close(out, expected)
        assert n == m and type(n) is int
    assert thunder.cache_misses(jf) == 2


def test_a_branch_on_a_symbolic_count_is_checked_every_call():
    """The trace made with a count above 5 holds only there: a call with fewer takes (and compiles) the other
    branch, and later calls pick the entry their count belongs to."""

    def f(x):
        n = (x > 0).sum().item()
        if n > 5:
            return x[:n] * 2
        return x[:n] * 3

    jf = thunder.jit(f)
    counts = [8, 9, 10, 11, 2, 3, 12, 4, 7, 2]
    for i, n in enumerate(counts):
        x = torch.cat([torch.ones(n), -torch.ones(20 - n)]) * (i + 1)
        torch.testing.assert_close(jf(x), f(x))
    assert thunder.cache_misses(jf) == 3, thunder.cache_miss_reasons(jf)  # 8; 9 (symbolic, above 5); 2 (symbolic, at most 5)


def test_int_of_a_symbolic_count_pins_it():
    """``int(t)`` gives a plain int (CPython converts what ``__int__`` returns): the trace holds that value as a
    constant, so a call with another count must not reuse it."""

    def f(x):
        n = int((x > 0).sum())
        return x.reshape(-1)[:n] + n

    jf = thunder.jit(f)
    for n in [3, 4, 5, 6, 7, 3, 6]:
        x = torch.cat([torch.ones(n), -torch.ones(10 - n)])
        torch.testing.assert_close(jf(x), f(x))


def test_a_symbolic_count_beside_a_symbolic_input_size():
    """``x[:n]`` ends at ``min(u0, x_0)``, the count clamped by the input's symbolic size without a branch (Note
    [Guard-free min and max]): neither a new length nor a new count recompiles, a count past the end included."""

    def f(x, mask):
        n = mask.sum().item()
        return x[:n] * 2, x.shape[0] - n

    jf = thunder.jit(f)
    torch.manual_seed(0)
    for length in [10, 12, 14, 16, 18, 20, 13, 3, 2, 15]:
        x = torch.randn(length)
        mask = torch.rand(8) > 0.3
        out, rest = jf(x, mask)
        expected, expected_rest = f(x, mask)
        torch.testing.assert_close(out, expected)
        assert rest == expected_rest
    assert thunder.cache_misses(jf) == 2, thunder.cache_miss_reasons(jf)  # first; symbolic


def test_a_backward_reads_a_symbolic_count_it_saved():
    """Found by the randomized tester: the backward of ``x[x > 0]`` under symbolic values reshapes to the count,
    which the forward did not save (``UnboundLocalError: u0``)."""

    def f(x):
        return x[x > 0]

    jf = thunder.jit(f, cache="symbolic values")
    for n in (6, 7):
        x = torch.randn(n, requires_grad=True)
        (actual,) = torch.autograd.grad(jf(x).pow(2).sum(), x)
        (expected,) = torch.autograd.grad(f(x).pow(2).sum(), x)
        torch.testing.assert_close(actual, expected)


def test_an_input_updated_in_place_before_a_branch_on_its_values_is_updated_once():
    """A call whose branch differs runs again in another entry from the start; the input it had updated before
    the branch gets its values back first (it was refused before)."""

    def f(x):
        x.add_(1)
        if x.sum() > 0:
            return x * 2
        return x - 1

    jf = thunder.jit(f)
    for sign in (1, -1, 1, -1):
        x = torch.full((3,), 2.0 * sign)
        y = x.clone()
        torch.testing.assert_close(jf(y), f(x))
        torch.testing.assert_close(y, x)
    assert thunder.cache_misses(jf) == 2


def _scale_positive_in_place(y):
    y = y.clone()
    y[y > 1] *= 2
    return y


def _rewrite_selected(y):
    y = y.clone()
    m = y > 0
    y[m] = y[m] * 3 + 1
    return y


def _copy_selected_rows(y, w):
    y = y.clone()
    m = y[:, 0] > 0
    y[m] = w[m]
    return y


def _mask_after_a_slice(y):
    y = y.clone()
    m = y[0] > 0
    y[:, m] = 0.5 * y[:, m]
    return y


@pytest.mark.parametrize(
    "fn,shapes",
    [
        (_scale_positive_in_place, [(5, 4)]),
        (_rewrite_selected, [(6,)]),
        (_copy_selected_rows, [(5, 3), (5, 3)]),
        (_mask_after_a_slice, [(3, 6)]),
    ],
)
def test_assigning_one_value_per_masked_element_matches_eager(fn, shapes):
    """``y[m] *= 2`` and ``y[m] = f(y[m])``: the value has one element per True element of the mask, a
    data-dependent count (it was refused); each call checked, the count changing between calls."""
    jf = thunder.jit(fn)
    for seed in range(5):
        torch.manual_seed(seed)
        args = [torch.randn(s) * 2 for s in shapes]
        torch.testing.assert_close(jf(*args), fn(*args), rtol=0, atol=0)
    assert thunder.cache_misses(jf) <= 2


def test_gradient_through_a_masked_in_place_update_matches_eager():
    def f(x):
        z = x * 1
        z[z > 0] *= 3
        return (z * z).sum()

    jf = thunder.jit(f)
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(5, 4, requires_grad=True)
        (g,) = torch.autograd.grad(jf(x), x)
        (expected,) = torch.autograd.grad(f(x), x)
        torch.testing.assert_close(g, expected)


def test_a_masked_assignment_of_the_wrong_count_raises_eagers_error():
    def f(y, v):
        y = y.clone()
        y[y > 0] = v
        return y

    with pytest.raises(ValueError, match=r"value tensor of shape \[2\] cannot be broadcast to indexing result of shape \[3\]"):
        thunder.jit(f)(torch.tensor([1.0, -1, 2, 3]), torch.tensor([1.0, 2.0]))


@pytest.mark.parametrize(
    "fn",
    [lambda x, r: x.repeat_interleave(r, dim=0), lambda x, r: x.repeat_interleave(r[:3], dim=1),
     lambda x, r: torch.repeat_interleave(x[:, 0], r), lambda x, r: torch.repeat_interleave(r),
     lambda x, r: torch.repeat_interleave(x, r[2:3], dim=0), lambda x, r: torch.bincount(r),
     lambda x, r: torch.bincount(r, weights=x[:, 0], minlength=6), lambda x, r: r.bincount(minlength=2),
     lambda x, r: torch.bincount(r[:0], minlength=3)],
    ids=["rows", "columns", "flat", "one argument", "one count", "bincount", "weights", "method", "empty"],
)  # fmt: skip
def test_counts_given_as_tensors_match_eager(fn):
    """``repeat_interleave`` with per-element counts and ``bincount`` were refused: their sizes depend on values
    (a sum, a maximum), so the program splits on them; a changing size stops recompiling."""
    jf = thunder.jit(fn)
    x = torch.randn(4, 3, dtype=torch.float64)
    for seed in range(5):
        torch.manual_seed(seed)
        r = torch.randint(0, 4, (4,))
        actual, expected = jf(x, r), fn(x, r)
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert thunder.cache_misses(jf) <= 3  # a size that changes to 0 or 1 stays constant (one more entry)


def test_gradient_of_repeat_interleave_with_tensor_counts_matches_eager():
    def f(x, r):
        return (x.repeat_interleave(r, dim=0) ** 2).sum()

    x = torch.randn(4, 3, dtype=torch.float64, requires_grad=True)
    r = torch.tensor([1, 0, 2, 3])
    (actual,) = torch.autograd.grad(thunder.jit(f)(x, r), x)
    (expected,) = torch.autograd.grad(f(x, r), x)
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize(
    "fn,r,match",
    [(lambda x, r: x.repeat_interleave(r, dim=0), torch.tensor([1, -2, 3, 1]), "repeats can not be negative"),
     (lambda x, r: x.repeat_interleave(r, dim=0), torch.tensor([1, 2, 3]), "repeats must have the same size as input"),
     (lambda x, r: torch.bincount(r), torch.tensor([-1, 2]), "bincount only supports 1-d non-negative integral")],
)  # fmt: skip
def test_bad_counts_raise_eagers_errors(fn, r, match):
    x = torch.randn(4, 3)
    with pytest.raises(RuntimeError, match=match):
        fn(x, r)
    with pytest.raises(RuntimeError, match=match):
        thunder.jit(fn)(x, r)


def test_one_hot_infers_the_number_of_classes_as_eager():
    """``F.one_hot(y)`` without ``num_classes``: the count is ``y.max() + 1``, a data-dependent value (refused)."""
    f = lambda y: torch.nn.functional.one_hot(y)  # noqa: E731
    jf = thunder.jit(f)
    for y in (torch.tensor([0, 2]), torch.tensor([[1], [3]]), torch.tensor([4, 0, 1])):
        actual, expected = jf(y), f(y)
        assert actual.dtype == expected.dtype
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    with pytest.raises(RuntimeError, match="Can not infer total number of classes from empty tensor"):
        jf(torch.tensor([], dtype=torch.long))


@pytest.mark.parametrize(
    "fn",
    [lambda x: torch.unique(x), lambda x: torch.unique(x, return_inverse=True, return_counts=True),
     lambda x: x.unique(sorted=True), lambda x: torch.unique_consecutive(x, return_counts=True, return_inverse=True),
     lambda x: len(torch.unique(x))],
    ids=["unique", "inverse and counts", "method", "consecutive", "number of labels"],
)  # fmt: skip
def test_unique_counts_distinct_values_as_eager(fn):
    """``torch.unique`` and ``unique_consecutive`` (refused): their size is a data-dependent count; NaNs are distinct
    and -0.0 equals 0.0, as in torch's."""
    jf = thunder.jit(fn)
    for x in (torch.tensor([3.0, float("nan"), 1.0, float("nan"), -0.0, 0.0, 3.0]), torch.tensor([[2, 1], [2, 5]]),
              torch.tensor([True, False, True]), torch.tensor([], dtype=torch.long), torch.tensor([1, 1, 2, 2, 1])):  # fmt: skip
        assert repr(jf(x)) == repr(fn(x))


@pytest.mark.parametrize("value", [2.0, -1.0])
def test_a_zero_dim_mask_adds_a_leading_dim_of_its_count(value):
    """``x[m]`` with a 0-d mask (``acc[acc > 0]`` of a 0-d sum): eager adds a leading dim of size 1 or 0; thunder
    raised "too many indices" (found by the randomized tester, seed 1005828)."""

    def f(x, w):
        s = (x * w).sum()
        return s[s > 0] * 3, w[s > 0]

    x = torch.tensor(value)
    for w_requires_grad in (False, True):
        w = torch.ones(2, 3, requires_grad=w_requires_grad)
        expected, actual = f(x, w), thunder.jit(f)(x, w)
        for e, a in zip(expected, actual):
            torch.testing.assert_close(a, e)
        if w_requires_grad:
            (ge,) = torch.autograd.grad(sum(e.sum() for e in expected), w)
            (ga,) = torch.autograd.grad(sum(a.sum() for a in actual), w)
            torch.testing.assert_close(ga, ge)


def _updates_through_a_view_then_draws(x):
    x.detach().mul_(2)
    n = int(x.sum())
    return x * __import__("random").random(), n


def _three_calls(fn):
    import random

    random.seed(0)
    x = torch.ones(3)
    results = [fn(x) for _ in range(3)]
    return results, random.random()


def test_a_value_read_after_an_update_through_a_view_is_evaluated_with_it():
    # seed 2001240 of the randomized tester: the value was evaluated without the in-place update made through
    # x.detach(), so the first entry expected 3, the call gave 6 and compiled again, and the first call's draw was
    # made twice (eager drew 0.844 on the first call, thunder 0.758)
    jf = thunder.jit(_updates_through_a_view_then_draws)
    jf(torch.ones(3))
    assert thunder.cache_misses(jf) == 1  # the first entry holds the value the first call computes
    jf = thunder.jit(_updates_through_a_view_then_draws)
    got, expected = _three_calls(jf), _three_calls(_updates_through_a_view_then_draws)
    torch.testing.assert_close(got, expected)


def test_a_first_call_that_stops_at_a_changed_value_draws_once(monkeypatch):
    # The first entry's own value can still differ from its first call's (an evaluation that a program defeats):
    # the draws its prologue made for the call are put back before the entry the call continues in draws them.
    from thunder.core import data_dependent

    evaluate = data_dependent.evaluate
    wrong = [True]

    def wrong_once(*args):
        real = evaluate(*args)
        if wrong and real is not None:
            wrong.clear()
            return real + 100
        return real

    monkeypatch.setattr(data_dependent, "evaluate", wrong_once)

    def f(x):
        n = int(x.sum())
        return x * __import__("random").random(), n

    jf = thunder.jit(f)
    got, expected = _three_calls(jf), _three_calls(f)
    torch.testing.assert_close(got, expected)
    assert thunder.cache_misses(jf) == 2 and not wrong


def test_a_float_item_that_changed_is_symbolic_in_the_next_entry():
    # An optimizer's step count (``step_t.item()``) changes every call: one entry per value compiled every step.
    def f(x, n):
        return x * (1 - 0.9 ** n.item())

    jf = thunder.jit(f)
    x = torch.randn(3)
    for v in (1.0, 2.0, 3.0, 4.5, 1000.0):
        torch.testing.assert_close(jf(x, torch.tensor(v)), f(x, torch.tensor(v)), rtol=0, atol=0)
    assert thunder.cache_misses(jf) == 2


def test_a_call_that_leaves_an_entry_at_a_changed_value_runs_again_in_its_own_grad_mode():
    # The program switched grad mode off before the check; the entry the call continued in was traced, and ended,
    # with grad mode off (``torch.optim``'s steps run so).
    def f(x, n):
        prev = torch.is_grad_enabled()
        torch.set_grad_enabled(False)
        try:
            x.add_(1)
            x.mul_(n.item())
        finally:
            torch.set_grad_enabled(prev)

    jf = thunder.jit(f)
    x, eager_x = torch.zeros(3), torch.zeros(3)
    for v in (2.0, 3.0, 4.0):
        jf(x, torch.tensor(v))
        f(eager_x, torch.tensor(v))
        assert torch.is_grad_enabled()
        torch.testing.assert_close(x, eager_x, rtol=0, atol=0)


# --- Note [Text formatted from symbolic numbers] ----------------------------------------------------------------


def _loss_printed_formatted(x):
    loss = (x * 2).sum()
    print(f"loss={loss.item():.4f}")
    return loss


def test_printing_a_formatted_item_prints_each_calls_text_without_recompiling(capsys):
    """Each new loss recompiled (30 calls, 30 misses): formatting pinned the value, though the text only went to
    ``print``."""
    jf = thunder.jit(_loss_printed_formatted)
    for i in range(30):
        x = torch.full((3,), i * 0.37)
        want, eager_text = _loss_printed_formatted(x), capsys.readouterr().out
        got, text = jf(x), capsys.readouterr().out
        assert text == eager_text
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert thunder.cache_misses(jf) <= 2  # the first value a constant, then symbolic (automatic dynamic)


def _text_joined(x):
    v = (x * 2).sum().item()
    s = f"{v:.1f}"
    print("[" + s + "]", f"{(x * 2).sum():.3f}", format(v, ".2e"), type(s).__name__, s.__class__ is str, sep="|")
    return f"{v:.2f}"


def _text_compared(x):
    s = f"{(x * 2).sum().item():.1f}"
    return x + 1 if s == "1.5" else x


def _text_as_key(x):
    v = (x * 2).sum().item()
    return {f"{v:.0f}": len(f"{v}")}


def _text_read_by_methods(x):
    s = f"{(x * 2).sum().item():.1f}"
    print(s.upper(), "-".join([s, s]), "%s|%r" % (s, s), "a{}b{!r}".format(s, s), f"{s:>8}|{s!r}")  # noqa: UP031, UP032
    return s * 2, x * float(s)


@pytest.mark.parametrize("fn", [_text_joined, _text_compared, _text_as_key, _text_read_by_methods])
def test_text_formatted_from_an_item_is_eagers_on_every_call(fn, capsys):
    """Text kept symbolic (joined, printed, returned) or read (compared, a key, its methods: pinned, one entry per
    text) gives eager's result and output on every call."""
    jf = thunder.jit(fn)
    for i in range(5):
        x = torch.full((3,), 0.25 + i)
        want, eager_text = fn(x), capsys.readouterr().out
        got, text = jf(x), capsys.readouterr().out
        assert text == eager_text and type(got) is type(want)
        if isinstance(want, tuple):
            assert got[0] == want[0]
            torch.testing.assert_close(got[1], want[1], rtol=0, atol=0)
        elif isinstance(want, torch.Tensor):
            torch.testing.assert_close(got, want, rtol=0, atol=0)
        else:
            assert got == want
