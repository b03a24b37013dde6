import sys
import traceback

import pytest
from helpers import assert_same

from thunder.core.interpreter import interpret


def test_try_except_else_finally():
    def f(x):
        log = []
        try:
            log.append("try")
            if x:
                raise ValueError("boom")
        except ValueError as e:
            log.append(("except", str(e)))
        else:
            log.append("else")
        finally:
            log.append("finally")
        return log

    assert_same(f, True)
    assert_same(f, False)


def test_bare_raise_reraises():
    def f():
        try:
            raise KeyError("k")
        except KeyError:
            raise

    assert_same(f)


def test_bare_raise_without_active_exception():
    def f():
        raise

    assert_same(f)


def test_raise_from_sets_cause():
    def f():
        try:
            raise ValueError("outer") from IndexError("inner")
        except ValueError as e:
            return str(e), type(e.__cause__), str(e.__cause__), e.__suppress_context__

    assert_same(f)


def test_raise_from_none():
    def f():
        try:
            try:
                raise KeyError(1)
            except KeyError:
                raise ValueError("v") from None
        except ValueError as e:
            return e.__cause__, e.__suppress_context__, type(e.__context__)

    assert_same(f)


def test_implicit_context_chaining():
    def f():
        try:
            try:
                raise KeyError("first")
            except KeyError:
                raise ValueError("second")  # noqa: B904
        except ValueError as e:
            return type(e.__context__), str(e.__context__)

    assert_same(f)


def test_context_of_native_exception_in_handler():
    def f():
        try:
            try:
                raise KeyError("first")
            except KeyError:
                return {}["missing"]
        except KeyError as e:
            return type(e.__context__), str(e.__context__)

    assert_same(f)


def test_escaping_exception_keeps_type_message_and_cause():
    def f():
        raise ValueError("msg") from IndexError("cause")

    with pytest.raises(ValueError, match="msg") as info:
        interpret(f)()
    assert type(info.value.__cause__) is IndexError
    assert info.value.__context__ is None


def test_escaping_exception_has_no_interpreter_context():
    def f(d):
        return d["x"]

    with pytest.raises(KeyError) as info:
        interpret(f)({})
    assert info.value.__context__ is None and info.value.__cause__ is None


def test_exception_traceback_points_at_user_lines():
    def bar(a):
        raise ValueError(f"I don't like {a}")

    def foo(b):
        return bar(b + 1)

    with pytest.raises(ValueError) as info:
        interpret(foo)(4)
    tb = "".join(traceback.format_exception(info.value))
    assert "in foo" in tb and "in bar" in tb
    assert 'raise ValueError(f"I don\'t like {a}")' in tb
    assert "return bar(b + 1)" in tb
    assert "handlers" not in tb and "execution.py" not in tb
    entries = "".join(str(e) for e in info.traceback)
    assert "in foo\n" in entries and "in bar\n" in entries


def _user_entries(runner, fn):
    """The traceback entries in this file below ``runner``: (function, source line) from the innermost call."""
    try:
        runner(fn)()
    except Exception as e:  # noqa: BLE001
        entries = [(t.name, t.line) for t in traceback.extract_tb(e.__traceback__) if t.filename == __file__]
        return type(e), entries[[n for n, _ in entries].index(fn.__name__) :]
    raise AssertionError("did not raise")


def _divides(n):
    return 1 / n


def _reraises_in_finally():
    try:
        _divides(0)
    finally:
        pass


def _reraises_bare():
    try:
        _divides(0)
    except ZeroDivisionError:
        raise


class _Exits:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _reraises_from_with():
    with _Exits():
        _divides(0)


def _raises_a_caught_exception_again():
    try:
        _divides(0)
    except ZeroDivisionError as e:
        saved = e
    raise saved


def _throws_into_a_generator():
    def gen():
        try:
            yield 1
        finally:
            pass

    g = gen()
    next(g)
    g.throw(KeyError("thrown"))


@pytest.mark.parametrize(
    "fn",
    [_reraises_in_finally, _reraises_bare, _reraises_from_with, _raises_a_caught_exception_again,
     _throws_into_a_generator],  # fmt: skip
)
def test_traceback_entries_of_a_reraised_exception_are_cpythons(fn):
    assert _user_entries(interpret, fn) == _user_entries(lambda f: f, fn)


def test_nested_handlers():
    def f():
        out = []
        try:
            try:
                raise ValueError
            except ValueError:
                out.append(1)
                raise IndexError  # noqa: B904
        except IndexError:
            out.append(2)
        return out

    assert_same(f)


def test_exception_in_finally():
    def f():
        try:
            raise ValueError("a")
        finally:
            raise KeyError("b")

    assert_same(f)

    def g():
        try:
            f()
        except KeyError as e:
            return type(e.__context__)

    assert_same(g)


def test_return_in_finally_swallows_exception():
    def f():
        try:
            raise ValueError
        finally:
            return "swallowed"  # noqa: B012

    assert_same(f)


def test_return_in_try_runs_finally():
    log = []

    def f():
        try:
            return 1
        finally:
            log.append("finally")

    assert interpret(f)() == 1 and log == ["finally"]


def test_break_continue_in_try_finally():
    def f():
        out = []
        for i in range(5):
            try:
                if i == 1:
                    continue
                if i == 3:
                    break
                out.append(i)
            finally:
                out.append(("f", i))
        return out

    assert_same(f)


def test_except_tuple_and_bad_type():
    def f(e):
        try:
            raise e
        except (KeyError, ValueError) as x:
            return type(x)

    def g():
        try:
            raise ValueError
        except 3:  # noqa: B030
            pass

    assert_same(f, ValueError)
    assert_same(g)


def test_raise_class_instantiates_with_interpreted_init():
    class MyError(ValueError):
        def __init__(self):
            super().__init__("custom message")

    def f():
        raise MyError

    assert_same(f)


def test_raise_non_exception():
    def f():
        raise 5  # noqa: B016

    assert_same(f)


def test_cross_function_exception():
    def inner():
        raise KeyError("inner")

    def outer():
        try:
            inner()
        except KeyError as e:
            return "caught " + str(e)

    assert_same(outer)


def test_sys_exc_info_inside_handler():
    def f():
        try:
            raise ValueError("x")
        except ValueError:
            t, v, _ = sys.exc_info()
            return t, str(v), sys.exc_info()[0]

    def g():
        f()
        return sys.exc_info()

    assert_same(f)
    assert interpret(g)() == (None, None, None)


def test_assert_statement():
    def f(x):
        assert x > 0, "must be positive"
        return x

    assert_same(f, 1)
    assert_same(f, -1)


def test_exception_groups_except_star():
    def f():
        out = []
        try:
            raise ExceptionGroup("eg", [ValueError(1), TypeError(2), KeyError(3)])
        except* ValueError as eg:
            out.append(("v", len(eg.exceptions)))
        except* TypeError as eg:
            out.append(("t", len(eg.exceptions)))
        except* KeyError:
            out.append("k")
        return out

    assert_same(f)


def test_except_star_reraises_unhandled():
    def f():
        try:
            raise ExceptionGroup("eg", [ValueError(1), TypeError(2)])
        except* ValueError:
            pass

    with pytest.raises(ExceptionGroup) as info:
        interpret(f)()
    assert [type(e) for e in info.value.exceptions] == [TypeError]


def test_exception_while_unpacking_propagates():
    def f():
        try:
            int("x")
        except ValueError as e:
            return str(e)

    assert_same(f)


def test_escaping_exception_context_when_called_inside_except():
    def f():
        raise ValueError("inner")

    try:
        raise KeyError("outer")
    except KeyError as outer:
        with pytest.raises(ValueError) as info:
            interpret(f)()
        assert info.value.__context__ is outer


def test_reraised_saved_exception_gets_new_context():
    def f():
        saved = None
        try:
            raise ValueError("saved")
        except ValueError as e:
            saved = e
        try:
            try:
                raise KeyError("handled")
            except KeyError:
                raise saved  # noqa: B904
        except ValueError as e:
            return type(e.__context__)

    assert_same(f)


class _Payload:
    pass


def test_no_leak_after_caught_exception():
    import weakref

    def raises():
        raise RuntimeError("Exc")

    def forward(x):
        try:
            raises()
        except RuntimeError:
            pass
        return 1

    def run():
        x = _Payload()
        interpret(forward)(x)
        return weakref.ref(x)

    assert run()() is None


def test_no_leak_after_uncaught_exception():
    import weakref

    def forward(x):
        raise RuntimeError("FOOBAR")

    def run():
        x = _Payload()
        try:
            interpret(forward)(x)
        except RuntimeError:
            pass
        return weakref.ref(x)

    assert run()() is None
