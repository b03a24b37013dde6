"""Loops over a symbolic range traced once (Note [Loops over a symbolic range] in thunder.core.loops): against eager
on every length, with few compiles; bodies the loop cannot be one trace for unroll as before and stay correct."""

import inspect

import pytest
import torch
from torch.utils._pytree import tree_leaves, tree_structure

import thunder


def recurrence(x):
    h = torch.zeros(x.shape[0], x.shape[2])
    for i in range(x.shape[1]):
        h = x[:, i] * 0.5 + h * 0.9
    return h


def append_stack(x):
    h = torch.zeros(x.shape[0], x.shape[2])
    outs = []
    for i in range(x.shape[1]):
        h = x[:, i] * 0.5 + h
        outs.append(h * 2)
    return torch.stack(outs, dim=-1), h


def setitem_at_index(x):
    y = torch.zeros_like(x)
    h = torch.zeros(x.shape[0], x.shape[2])
    for t in range(x.shape[1]):
        h = h * 0.9 + x[:, t]
        y[:, t] = h
    return y, h


def from_one(x):
    acc = x.select(1, 0)
    outs = []
    for i in range(1, x.shape[1]):
        acc = acc * x.select(1, i) + 1
        outs.append(acc)
    return torch.cat([x.select(1, 0).unsqueeze(1), torch.stack(outs, 1)], 1)


def shape_grows(x):  # the carried tensor changes shape: unrolled
    h = x[:, 0]
    for i in range(x.shape[1]):
        h = torch.cat([h, x[:, i]], dim=-1)
    return h


def first_iteration_differs(x):  # a branch on the index: unrolled
    h = torch.zeros(x.shape[0], x.shape[2])
    for i in range(x.shape[1]):
        h = h + x[:, i] if i == 0 else h * x[:, i]
    return h


def list_used_otherwise(x):  # the appended list is read by len and indexing: unrolled
    outs = []
    for i in range(x.shape[1]):
        outs.append(x[:, i] * 2)
    return outs[-1] + len(outs)


def early_break(x):  # leaves the body: unrolled
    h = torch.zeros(x.shape[0], x.shape[2])
    for i in range(x.shape[1]):
        h = h + x[:, i]
        if i == 3:
            break
    return h


counter = []


def outside_effect(x):  # changes a global list: unrolled
    h = torch.zeros(x.shape[0], x.shape[2])
    for i in range(x.shape[1]):
        h = h + x[:, i]
        counter.append(1)
    return h


def body_defined_last(x):  # a local first bound in the body: its last value after the loop
    for i in range(x.shape[1]):
        y = x[:, i].sin()
    return y, i


def list_returned(x):  # the appended list outlives the function: unrolled
    outs = []
    for i in range(x.shape[1]):
        outs.append(x[:, i] * 2)
    return outs


def list_stored_then_stacked(x):  # kept in a dict of the program's, then stacked
    outs = []
    holder = {}
    for i in range(x.shape[1]):
        outs.append(x[:, i] * 2)
    holder["o"] = outs
    return torch.stack(holder["o"], 0)


def carried_value_kept(x):  # a local bound in the body to the carried value before its update
    h = torch.zeros(x.shape[0], x.shape[2])
    w = x[:, 0] * 3
    for i in range(x.shape[1]):
        y, z = h, w
        h = h + x[:, i]
    return y, z, h


def carried_is_passed_on(x):  # the carried value is a tensor from before the loop
    h = x[:, 0]
    y = x[:, 1] * 3
    for _ in range(x.shape[1]):
        h = y
    return h


_g = torch.Generator().manual_seed(0)
_W, _U = torch.randn(3, 3, generator=_g), torch.randn(3, 3, generator=_g)  # the hand-written cells' weights
_W4, _U4 = torch.randn(3, 12, generator=_g), torch.randn(3, 12, generator=_g)
_A, _WD, _WB, _WC = (torch.randn(3, 4, generator=_g), torch.randn(3, 3, generator=_g), torch.randn(3, 4, generator=_g),
                     torch.randn(3, 4, generator=_g))  # fmt: skip


def rnn_scan(x):
    h = torch.zeros(x.shape[0], x.shape[2])
    outs = []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ _W + h @ _U)
        outs.append(h)
    return torch.stack(outs, 1)


def gru_scan(x):
    h = torch.zeros(x.shape[0], x.shape[2])
    for t in range(x.shape[1]):
        xt = x[:, t]
        z, r = torch.sigmoid(xt @ _W + h @ _U), torch.sigmoid(xt @ _U + h @ _W)
        h = (1 - z) * torch.tanh(xt @ _W + (r * h) @ _U) + z * h
    return h


def _lstm_cell(xt, h, c):
    i, f, g, o = (xt @ _W4 + h @ _U4).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    return o.sigmoid() * c.tanh(), c


def lstm_scan(x):  # two carried tensors, the cell's outputs concatenated
    h = c = torch.zeros(x.shape[0], x.shape[2])
    outs = []
    for t in range(x.shape[1]):
        h, c = _lstm_cell(x[:, t], h, c)
        outs.append(h)
    return torch.cat(outs, 0), torch.cat(outs, dim=-1), (h, c)


def lstm_state_tuple(x):  # the state is one tuple of tensors
    state = (torch.zeros(x.shape[0], x.shape[2]), torch.zeros(x.shape[0], x.shape[2]), 7)
    for t in range(x.shape[1]):
        h, c, k = state
        state = (*_lstm_cell(x[:, t], h, c), k)
    return state


def bidirectional(x):  # a forward and a reverse scan
    h = g = torch.zeros(x.shape[0], x.shape[2])
    fwd, bwd = [], []
    for t in range(x.shape[1]):
        h = torch.tanh(x[:, t] @ _W + h @ _U)
        fwd.append(h)
    for t in range(x.shape[1] - 1, -1, -1):
        g = torch.tanh(x[:, t] @ _U + g @ _W)
        bwd.append(g)
    return torch.cat([torch.stack(fwd, 1), torch.stack(bwd, 1).flip(1)], -1), t


def reverse_scan(x):
    h = torch.zeros(x.shape[0], x.shape[2])
    for t in range(x.shape[1] - 1, -1, -1):
        h = h * 0.5 + x[:, t]
    return h, t


def cat_appended(x):
    outs = []
    for t in range(x.shape[1]):
        outs.append(x[:, t] * 2)
    return torch.cat(outs), torch.concat(outs, dim=-1), torch.stack(outs, -2)


def cumsum_scan(x):
    acc = torch.zeros(x.shape[0], x.shape[2])
    outs = []
    for i in range(x.shape[1]):
        acc = acc + x[:, i]
        outs.append(acc)
    return torch.stack(outs, 1)


def selective_scan(x):  # Mamba's slow path, by hand
    delta = torch.nn.functional.softplus(x @ _WD)
    delta_a = torch.exp(delta[..., None] * -torch.exp(_A))
    delta_b_u = delta[..., None] * (x @ _WB)[:, :, None, :] * x[..., None]
    c = x @ _WC
    h = torch.zeros(x.shape[0], x.shape[2], 4)
    ys = []
    for i in range(x.shape[1]):
        h = delta_a[:, i] * h + delta_b_u[:, i]
        ys.append(torch.matmul(h, c[:, i, :, None])[..., 0])
    return torch.stack(ys, dim=1)


def counters(x):  # ints the body counts in, one of them an index
    h = torch.zeros(x.shape[0], x.shape[2])
    pos, k = x.shape[1] - 1, 0
    for _ in range(x.shape[1]):
        h = h * 0.5 + x[:, pos] * k
        pos -= 1
        k += 2
    return h, pos, k


def strided(x):
    h = torch.zeros(x.shape[0], x.shape[2])
    for i in range(0, x.shape[1], 2):
        h = h * 0.5 + x[:, i]
    return h, i


def from_constant(x):
    h = torch.zeros(x.shape[0], x.shape[2])
    for i in range(2, x.shape[1] + 1):
        h = h * 0.5 + x[:, i - 2]
    return h


def updated_in_place(x):
    h = torch.zeros(x.shape[0], x.shape[2])
    for i in range(x.shape[1]):
        h.mul_(0.9).add_(x[:, i])
    return h


def nested(x):  # an inner loop of a constant and one of a symbolic length, a list appended to in the inner one
    outs = []
    for i in range(x.shape[1]):
        row = []
        for j in range(x.shape[1] - 1, -1, -1):
            row.append(x[:, j] * x[:, i])
        y = torch.stack(row, 1).sum(1)
        for k in range(2):
            y = y * 0.5 + x[:, i] * k
        outs.append(y)
    return torch.stack(outs, 1), i, j


def after_a_loop(x):  # a second loop while the first one's list is alive
    outs = []
    for i in range(x.shape[1]):
        outs.append(x[:, i] * 2)
    h = torch.zeros(x.shape[0], x.shape[2])
    for i in range(x.shape[1]):
        h = h * 0.5 + x[:, i]
    return torch.stack(outs, 1), h


def carried_held_elsewhere(x):  # the tensor the loop starts from is another local's too, which keeps it
    h = x[:, 0] * 1
    y = h
    for i in range(x.shape[1]):
        h = h + y * x[:, i]
    return h, y


class _Holder:
    t = torch.randn(2, 3, generator=_g)


def carried_from_a_global_and_an_attribute(x):  # the body reads the first values again where they came from
    h, g = _W[:2], _Holder.t
    for i in range(x.shape[1]):
        h = h + _W[:2] * x[:, i]
        g = g * _Holder.t + x[:, i]
    return h, g


def tuple_held_elsewhere(x):  # the carried tuple is another local's too: unrolled
    state = first = (x[:, 0] * 1, x[:, 1] * 1)
    for i in range(x.shape[1]):
        state = (state[0] + first[0] * x[:, i], state[1])
    return state


def counter_doubles(x):  # not affine in the index: unrolled
    h = torch.zeros(x.shape[0], x.shape[2])
    pos = 1
    for i in range(x.shape[1]):
        h = h * 0.5 + x[:, i] * pos
        pos = pos * 2
    return h, pos


def counter_branches(x):  # a branch on a counter that differs between iterations: unrolled
    h = torch.zeros(x.shape[0], x.shape[2])
    pos = 0
    for i in range(x.shape[1]):
        h = h * 0.5 + (x[:, i] if pos < 3 else -x[:, i])
        pos += 1
    return h, pos


def float_step(x):  # eager rounds each sum: not a function of the index, unrolled
    h = torch.zeros(x.shape[0], x.shape[2])
    t = 0.0
    for i in range(x.shape[1]):
        h = h + x[:, i] * t
        t = t + 0.1
    return h, t


def tuples_appended(x):  # a list of tuples read by zip: unrolled
    outs = []
    for i in range(x.shape[1]):
        outs.append((x[:, i] * 2, x[:, i] + 1))
    a, b = zip(*outs)
    return torch.stack(a, 1), torch.stack(b, 1)


def triangular(x):  # an inner range of the outer index is empty first: unrolled
    h = torch.zeros(x.shape[0], x.shape[2])
    for i in range(x.shape[1]):
        for j in range(i):
            h = h * 0.5 + x[:, j] * x[:, i]
    return h


def inner_list_after_the_loop(x):  # the inner loop's list is used after the outer loop: unrolled
    h = torch.zeros(x.shape[0], x.shape[2])
    for i in range(x.shape[1]):
        row = []
        for j in range(x.shape[1]):
            row.append(x[:, j] * x[:, i])
        h = h + torch.stack(row).sum(0)
    return h, torch.stack(row)


TRACED_ONCE = [recurrence, append_stack, setitem_at_index, from_one, body_defined_last, list_stored_then_stacked,
               carried_is_passed_on, carried_value_kept, rnn_scan, gru_scan, lstm_scan, lstm_state_tuple, bidirectional,
               reverse_scan, cat_appended, cumsum_scan, selective_scan, counters, strided, from_constant,
               updated_in_place, nested, after_a_loop, carried_held_elsewhere,
               carried_from_a_global_and_an_attribute]  # fmt: skip
UNROLLED = [shape_grows, first_iteration_differs, list_used_otherwise, early_break, outside_effect, list_returned,
            counter_doubles, counter_branches, float_step, tuples_appended, triangular,
            tuple_held_elsewhere]  # fmt: skip


def _run(fn, lengths, grad=False):
    jfn = thunder.jit(fn)
    for n in lengths:
        x = torch.randn(2, n, 3, generator=torch.Generator().manual_seed(n))
        counter.clear()
        with torch.no_grad():
            expected = fn(x)
            counted = list(counter)
            counter.clear()
            actual = jfn(x)
        assert counter == counted
        assert tree_structure(actual) == tree_structure(expected)
        for e, a in zip(tree_leaves(expected), tree_leaves(actual), strict=True):
            assert type(a) is type(e), (fn.__name__, n)
            if isinstance(e, torch.Tensor):
                assert a.dtype == e.dtype and a.shape == e.shape and torch.equal(a, e), (fn.__name__, n)
            else:
                assert a == e, (fn.__name__, n)
    return jfn


@pytest.mark.parametrize("fn", TRACED_ONCE, ids=lambda f: f.__name__)
def test_loop_traced_once_equals_eager_with_two_compiles(fn):
    jfn = _run(fn, range(2, 21))
    # the first length (constant), then one symbolic entry for 3..20
    assert thunder.cache_misses(jfn) <= 2, thunder.cache_miss_reasons(jfn)[:3]
    assert any("loop" in b.sym.name for b in thunder.last_traces(jfn)[-1].bound_symbols)


def test_loop_in_a_module_holding_much_state_is_traced_once():
    # a module's other state (a notebook's shell and history, pytest's session behind a test module's ``__loader__``)
    # is not walked: before, more than the walk's budget refused the loop, one compile per length
    namespace = {"torch": torch, "history": [[i] for i in range(120_000)]}
    exec(compile(inspect.getsource(recurrence), __file__, "exec"), namespace)
    jfn = _run(namespace["recurrence"], range(2, 9))
    assert thunder.cache_misses(jfn) <= 2, thunder.cache_miss_reasons(jfn)[:3]


@pytest.mark.parametrize("fn", UNROLLED, ids=lambda f: f.__name__)
def test_loop_that_is_no_single_trace_unrolls_and_equals_eager(fn):
    jfn = _run(fn, range(2, 9))
    assert not any("loop" in b.sym.name for b in thunder.last_traces(jfn)[-1].bound_symbols)


def test_inner_loop_whose_list_outlives_the_outer_one_unrolls_the_outer_one():
    jfn = _run(inner_list_after_the_loop, range(2, 9))
    # (the inner loop, one per outer iteration, is still traced once)
    assert sum("loop" in b.sym.name for b in thunder.last_traces(jfn)[-1].bound_symbols) == 8


def test_loop_updating_an_input_in_place_equals_eager_with_two_compiles():
    def fn(x, h):
        for i in range(x.shape[1]):
            h.mul_(0.9).add_(x[:, i])
        return h * 2

    jfn = thunder.jit(fn)
    for n in range(2, 9):
        x, h = torch.randn(2, n, 3), torch.randn(2, 3)
        eager_h, jit_h = h.clone(), h.clone()
        with torch.no_grad():
            assert torch.equal(jfn(x, jit_h), fn(x, eager_h))
        assert torch.equal(jit_h, eager_h)
    assert thunder.cache_misses(jfn) <= 2


def test_cat_of_a_loops_list_of_scalars_raises_as_eager():
    def fn(x):
        outs = []
        for i in range(x.shape[1]):
            outs.append(x[0, i, 0])
        return torch.cat(outs)

    with pytest.raises(RuntimeError, match="zero-dimensional"):
        fn(torch.randn(2, 4, 3))
    with pytest.raises(RuntimeError, match="zero-dimensional"):
        thunder.jit(fn)(torch.randn(2, 4, 3))


def test_loop_with_gradients_unrolls_and_gradients_equal_eager():
    jfn = thunder.jit(append_stack)
    for n in (3, 4, 5):
        x = torch.randn(2, n, 3, requires_grad=True)
        out, h = append_stack(x)
        (gx,) = torch.autograd.grad(out.sum() + h.sum(), x)
        x2 = x.detach().requires_grad_(True)
        jout, jh = jfn(x2)
        (jgx,) = torch.autograd.grad(jout.sum() + jh.sum(), x2)
        torch.testing.assert_close(jout, out, rtol=0, atol=0)
        torch.testing.assert_close(jgx, gx)
        assert not any("loop" in b.sym.name for b in thunder.last_traces(jfn)[-1].bound_symbols)


def test_loop_index_after_the_loop_and_constraints_follow_lengths():
    # the prologue's constraints on the index are those of both ends: a longer input than the buffer misses
    def fn(x, buf):
        for t in range(x.shape[1]):
            buf[:, t] = x[:, t] * 2
        return buf, t

    jfn = thunder.jit(fn)
    for n, m in ((4, 6), (5, 6), (6, 6), (7, 9)):
        x = torch.randn(2, n, 3)
        with torch.no_grad():
            e = fn(x, torch.zeros(2, m, 3))
            a = jfn(x, torch.zeros(2, m, 3))
        assert torch.equal(e[0], a[0]) and e[1] == a[1]
    with torch.no_grad(), pytest.raises(IndexError):
        fn(torch.randn(2, 7, 3), torch.zeros(2, 6, 3))
    with torch.no_grad(), pytest.raises(Exception):
        jfn(torch.randn(2, 7, 3), torch.zeros(2, 6, 3))


def _hf_model(name):
    transformers = pytest.importorskip("transformers")
    common = dict(vocab_size=96, bos_token_id=1, eos_token_id=2, pad_token_id=0)
    if name == "mamba":
        return transformers.MambaForCausalLM(transformers.MambaConfig(num_hidden_layers=2, hidden_size=32, state_size=8, **common))
    if name == "jamba":
        config = transformers.JambaConfig(
            num_hidden_layers=2, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
            mamba_d_state=8, mamba_expand=2, mamba_dt_rank=4, attn_layer_period=2, attn_layer_offset=1,
            expert_layer_period=2, expert_layer_offset=1, num_experts=2, use_mamba_kernels=False, **common,
        )
        return transformers.JambaForCausalLM(config)
    config = transformers.RecurrentGemmaConfig(
        num_hidden_layers=3, hidden_size=32, lru_width=32, intermediate_size=64, num_attention_heads=4,
        num_key_value_heads=1, head_dim=8, attention_window_size=16, block_types=["recurrent", "recurrent", "attention"],
        **common,
    )
    return transformers.RecurrentGemmaForCausalLM(config)


@pytest.mark.parametrize("name", ["mamba", "jamba", "recurrent_gemma"])
def test_generation_without_cache_compiles_twice(name):
    torch.manual_seed(0)
    model = _hf_model(name).eval()
    ids = torch.randint(3, 96, (1, 5), generator=torch.Generator().manual_seed(1))
    kw = dict(max_new_tokens=10, do_sample=False, use_cache=False, output_scores=True, return_dict_in_generate=True)
    jmodel = thunder.jit(model)
    with torch.no_grad():
        expected = model.generate(ids, **kw)
        actual = jmodel.generate(ids, **kw)
    assert torch.equal(actual.sequences, expected.sequences)
    # (Mamba's scores differ from eager's in the last bits on the base too: its trace takes the associative scan)
    for e, a in zip(expected.scores, actual.scores, strict=True):
        torch.testing.assert_close(a, e, rtol=0, atol=0 if name != "mamba" else 1e-6)
    assert thunder.cache_misses(jmodel) <= 3
