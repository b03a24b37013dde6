"""What tracing runs to answer a program's questions about tensor values (Note [Evaluating once per trace] in
thunder.core.data_dependent): each op at most once per trace, and eager's values, in-place updates and draws
included."""

from __future__ import annotations

import collections

import torch

import thunder
from thunder.core import data_dependent


def _count_evaluated_ops(monkeypatch) -> collections.Counter:
    runs: collections.Counter = collections.Counter()
    run = data_dependent._run

    def counted(bsym, env, eager_impl):
        runs[bsym.sym.name] += 1
        return run(bsym, env, eager_impl)

    monkeypatch.setattr(data_dependent, "_run", counted)
    return runs


def _chain_then_questions(x, n=20):
    for _ in range(n):
        x = x.sin()
    return sum(int((x + i).sum() > 0) for i in range(n)), x


def test_each_op_is_evaluated_once_however_many_values_the_program_asks(monkeypatch):
    # Faster R-CNN asks for a box count at every nms: each question ran its backbone again from the inputs
    # (its first call ran the convolutions 1,100 times, RetinaNet's first call took minutes)
    runs = _count_evaluated_ops(monkeypatch)
    x = torch.randn(4)
    jf = thunder.jit(_chain_then_questions)
    torch.testing.assert_close(jf(x), _chain_then_questions(x))
    assert runs["sin"] == 20  # was 20 * 20: every question ran the chain again
    assert runs["add"] == 20
    assert thunder.cache_misses(jf) == 1


def _writes_before_reading_a_value_made_before_the_write(x):
    z = x * 2  # not needed by the first question
    x.add_(1)
    a = bool(x.sum() > 0)  # runs the update
    b = bool(z.sum() < 7)  # z is made from x before the update: eager's 6, not 12
    return x, z, a, b


def _reads_a_view_that_a_later_write_changes(x):
    v = x[:2]
    a = bool(v.sum() > 0)  # v is computed on the caller's x
    x.mul_(3)
    b = bool(v.sum() > 5)  # the update shows through the view: eager's 6
    return x, a, b


def test_evaluated_values_follow_in_place_updates_as_eager():
    for fn in (_writes_before_reading_a_value_made_before_the_write, _reads_a_view_that_a_later_write_changes):
        jf = thunder.jit(fn)
        x, y = torch.ones(3), torch.ones(3)
        torch.testing.assert_close(jf(x), fn(y))
        torch.testing.assert_close(x, y)
        # the first entry holds the values the first call computes
        assert thunder.cache_misses(jf) == 1, fn.__name__


def _draws_twice_then_asks(seed):
    torch.manual_seed(seed)
    a = torch.rand(3)
    b = torch.rand(3)
    return a, b, bool(a.sum() > 1.5), bool(b.sum() > 1.5)


def test_evaluated_draws_follow_eager_generator():
    # the second draw was evaluated from the generator's state before the first (the first draw's numbers)
    seed = next(s for s in range(100) if (lambda a, b, p, q: p != q)(*_draws_twice_then_asks(s)))

    def f(x):
        a = torch.rand(3)
        b = torch.rand(3)
        return x + a, x + b, bool(a.sum() > 1.5), bool(b.sum() > 1.5)

    jf = thunder.jit(f)
    x = torch.zeros(3)
    torch.manual_seed(seed)
    expected = f(x)
    torch.manual_seed(seed)
    torch.testing.assert_close(jf(x), expected)
    assert thunder.cache_misses(jf) == 1


def _long_then_questions(x, y, n_ops, n_questions):
    for _ in range(n_ops):
        y = y * 1.5  # nothing the questions need
    return y, sum(int(x[i % 3] > 0) for i in range(n_questions))


def test_a_question_looks_at_the_ops_its_value_needs_not_at_the_whole_trace(monkeypatch):
    # Mask R-CNN asks 2,700 values while pasting its masks: each question scanned every op of the trace so far
    from thunder.core.symbol import BoundSymbol

    looked = [0]
    outs = BoundSymbol.flat_proxy_outs

    def counted(self):
        looked[0] += 1
        return outs.fget(self)

    monkeypatch.setattr(BoundSymbol, "flat_proxy_outs", property(counted))
    x, y = torch.randn(3), torch.randn(3)

    def looks(n_questions):
        looked[0] = 0
        jf = thunder.jit(_long_then_questions)
        torch.testing.assert_close(jf(x, y, 200, n_questions), _long_then_questions(x, y, 200, n_questions))
        return looked[0]

    per_question = (looks(40) - looks(20)) / 20
    assert per_question < 50  # was more than the 200 ops before them, each
