import contextlib

from helpers import assert_same

from thunder.core.interpreter import interpret, is_jitting_with_raise


class CM:
    def __init__(self, log, suppress=False):
        self.log = log
        self.suppress = suppress

    def __enter__(self):
        self.log.append(("enter", is_jitting_with_raise()))
        return self

    def __exit__(self, et, ev, tb):
        self.log.append(("exit", et.__name__ if et else None))
        return self.suppress


def test_with_statement():
    def f(jit):
        log = []
        with CM(log) as c:
            log.append(c is not None)
        return log

    assert interpret(f)(True) == [("enter", True), True, ("exit", None)]


def test_with_suppresses_exception():
    def f():
        log = []
        with CM(log, suppress=True):
            raise ValueError("x")
        log.append("after")
        return log

    assert interpret(f)() == [("enter", True), ("exit", "ValueError"), "after"]


def test_with_propagates_exception():
    def f():
        log = []
        try:
            with CM(log):
                raise KeyError("k")
        except KeyError:
            log.append("caught")
        return log

    assert interpret(f)() == [("enter", True), ("exit", "KeyError"), "caught"]


def test_with_non_context_manager():
    def f():
        with 3:
            pass

    assert_same(f)


def test_contextlib_contextmanager():
    def f():
        log = []

        @contextlib.contextmanager
        def cm(v):
            log.append("before")
            try:
                yield v * 2
            except ValueError:
                log.append("handled")
            log.append("after")

        with cm(2) as x:
            log.append(x)
        with cm(1):
            raise ValueError
        return log

    assert_same(f)


def test_match_literal_capture_guard():
    def f(v):
        match v:
            case 1:
                return "one"
            case "s":
                return "string"
            case None:
                return "none"
            case int(n) if n > 10:
                return ("big", n)
            case x:
                return ("other", x)

    for v in (1, "s", None, 20, 5, 2.5):
        assert_same(f, v)


def test_match_sequence_and_mapping():
    def f(v):
        match v:
            case []:
                return "empty"
            case [x]:
                return ("one", x)
            case [x, *rest]:
                return ("many", x, rest)
            case {"k": value, **others}:
                return ("map", value, others)
            case {}:
                return "empty-map"
            case _:
                return "no"

    for v in ([], [1], [1, 2, 3], (4, 5), {"k": 1, "z": 2}, {}, "str", 3):
        assert_same(f, v)


def test_match_class_patterns():
    class Point:
        __match_args__ = ("x", "y")

        def __init__(self, x, y):
            self.x = x
            self.y = y

    def f(v):
        match v:
            case Point(0, 0):
                return "origin"
            case Point(x, y=0):
                return ("x-axis", x)
            case Point(x=x, y=y):
                return ("pt", x, y)
            case str() | bytes():
                return "text"
            case _:
                return "other"

    for v in (Point(0, 0), Point(3, 0), Point(1, 2), "a", b"b", 1):
        assert_same(f, v)


def test_match_class_too_many_positional():
    class P:
        __match_args__ = ("x",)
        x = 1

    def f(v):
        match v:
            case P(a, b):
                return a, b

    assert_same(f, P())


def test_match_or_and_as_patterns():
    def f(v):
        match v:
            case (1 | 2) as small:
                return ("small", small)
            case [int() as a, str() as b]:
                return (a, b)
        return None

    for v in (1, 2, [1, "x"], [1, 2]):
        assert_same(f, v)


def test_global_statement_in_nested_function():
    def f():
        def setter():
            global _TEST_STMT_GLOBAL
            _TEST_STMT_GLOBAL = 7

        setter()
        return _TEST_STMT_GLOBAL  # noqa: F821

    assert interpret(f)() == 7
    del globals()["_TEST_STMT_GLOBAL"]


def test_exec_and_eval_see_frame():
    def f(a):
        return eval("a + 1"), eval("len([a])")

    assert_same(f, 2)


def test_locals_dict_semantics_pre_313():
    def foo():
        assert locals() == {}
        locals_dict = locals()
        assert locals()["locals_dict"] is not None
        locals_dict["a"] = 5
        assert locals_dict is locals()
        del locals_dict
        assert "locals_dict" not in locals()
        b = object()
        assert b is locals()["b"]
        assert locals()["a"] == 5
        try:
            return a  # noqa: F821
        except NameError as e:
            return str(e)

    assert_same(foo)


def test_namedtuple_module_is_callers():
    import collections

    def f():
        return collections.namedtuple("P", "x y")

    assert interpret(f)().__module__ == __name__
