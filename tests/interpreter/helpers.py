"""Helpers for the interpreter tests: run a function natively and interpreted and compare."""

from __future__ import annotations

from thunder.core.interpreter import interpret


def outcome(fn, *args, **kwargs):
    try:
        return ("ok", fn(*args, **kwargs))
    except Exception as e:  # noqa: BLE001
        return ("raise", type(e), str(e))


def assert_same(fn, *args, **kwargs):
    """``interpret(fn)(*args, **kwargs)`` gives what ``fn(*args, **kwargs)`` gives (value or exception)."""
    expected = outcome(fn, *args, **kwargs)
    actual = outcome(interpret(fn), *args, **kwargs)
    assert actual == expected, f"interpreted {actual} != native {expected}"
    return actual
