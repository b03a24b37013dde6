"""Programs written as ML engineers write them, where the jitted call differed from eager: state kept on the user's
own functions (a call counter, a setting, a memo made on first use). Each runs the program eagerly and jitted on
several calls and compares the values and what the program left behind."""

from __future__ import annotations

import torch

import thunder


def _counted(x):
    _counted.calls = getattr(_counted, "calls", 0) + 1
    return x * _counted.calls


def _preset(x):
    _preset.calls += 1
    return x * _preset.calls


def _memo(x):
    if not hasattr(_memo, "table"):
        _memo.table = torch.arange(3.0)
    return x + _memo.table


def _scaled(x):
    return x * getattr(_scaled, "scale", 1)


def _results(f, calls: int = 3) -> list:
    return [f(torch.ones(3)) for _ in range(calls)]


def _reset():
    for f, names in ((_counted, ("calls",)), (_memo, ("table",)), (_scaled, ("scale",))):
        for n in names:
            f.__dict__.pop(n, None)
    _preset.calls = 0


def test_a_counter_kept_on_the_function_counts_every_call():
    for f in (_counted, _preset):
        _reset()
        expected, eager_calls = _results(f), f.calls
        _reset()
        got = _results(thunder.jit(f))
        assert f.calls == eager_calls == 3
        for e, g in zip(expected, got):
            torch.testing.assert_close(g, e)


def test_a_memo_made_on_the_function_on_first_use_is_made_once_and_read_after():
    _reset()
    expected = _results(_memo)
    _reset()
    jf = thunder.jit(_memo)
    got = _results(jf)
    for e, g in zip(expected, got):
        torch.testing.assert_close(g, e)
    _memo.table = torch.ones(3)  # replaced from outside: the next call reads the new table
    torch.testing.assert_close(jf(torch.ones(3)), _memo(torch.ones(3)))


def test_a_setting_put_on_the_function_after_a_call_is_seen_by_the_next():
    _reset()
    jf = thunder.jit(_scaled)
    torch.testing.assert_close(jf(torch.ones(3)), _scaled(torch.ones(3)))
    _scaled.scale = 5
    torch.testing.assert_close(jf(torch.ones(3)), _scaled(torch.ones(3)))
    _scaled.scale = 2
    torch.testing.assert_close(jf(torch.ones(3)), _scaled(torch.ones(3)))
    _reset()
