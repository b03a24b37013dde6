import dis

import pytest
from helpers import assert_same

from thunder.core.interpreter import interpret

GLOBAL_VALUE = 10


def test_constant_return():
    assert_same(lambda: 5)


def test_no_return():
    def f():
        pass

    assert_same(f)


def test_arithmetic():
    def f(a, b):
        return (a + b) * 2 - a / b + a // b + a % b + a**2 + (a << 1) + (a >> 1) + (a & b) + (a | b) + (a ^ b)

    assert_same(f, 7, 3)


def test_unary_ops():
    def f(a):
        return -a, +a, ~a, not a

    assert_same(f, 5)


def test_augmented_assignment_local():
    def f(a):
        a += 1
        a *= 3
        a -= 2
        a //= 2
        return a

    assert_same(f, 5)


def test_defaults_and_keywords():
    def g(a, b=2, *, c=3, d):
        return a, b, c, d

    def f():
        return g(1, d=4), g(1, 5, c=6, d=7)

    assert_same(f)


def test_varargs_kwargs():
    def g(*args, **kwargs):
        return args, kwargs

    def f():
        return g(1, 2, x=3), g(*[1, 2], **{"y": 4}), g(*(1,), 2, *[3], z=1, **{"w": 2})

    assert_same(f)


def test_positional_only():
    def g(a, b, /, c):
        return a, b, c

    def f():
        return g(1, 2, c=3)

    assert_same(f)


def test_positional_only_error():
    def g(a, /):
        return a

    def f():
        return g(a=1)

    assert_same(f)


def test_missing_argument_error_message():
    def g(a, b):
        return a

    def f():
        return g(1)

    assert_same(f)


def test_top_level_binding_error():
    def f(a):
        return a

    with pytest.raises(TypeError, match="missing 1 required positional argument"):
        interpret(f)()


def test_closures_and_nonlocal():
    def f():
        x = 1

        def inc():
            nonlocal x
            x += 1
            return x

        inc()
        inc()
        return x, inc()

    assert_same(f)


def test_closure_over_argument():
    def f(a):
        def g():
            return a * 2

        return g()

    assert_same(f, 21)


def test_delete_deref_unbound():
    def foo(a):
        value = 5

        def bar():
            nonlocal value
            del value
            return a + value  # noqa: F821

        return bar()

    assert_same(foo, 1)


def test_unbound_local():
    def f(flag):
        if flag:
            x = 1
        return x

    assert_same(f, False)


def test_globals_read_write():
    def f():
        global GLOBAL_VALUE
        old = GLOBAL_VALUE
        GLOBAL_VALUE = old + 1
        return old

    old = GLOBAL_VALUE
    interpret(f)()
    assert GLOBAL_VALUE == old + 1


def test_global_name_error():
    def f():
        return undefined_name_xyz  # noqa: F821

    assert_same(f)


def test_builtins():
    def f(xs):
        return len(xs), max(xs), sorted(xs), list(map(abs, xs)), isinstance(xs, list)

    assert_same(f, [3, -1, 2])


def test_builtin_methods():
    def f():
        xs = []
        xs.append(1)
        xs.extend([2, 3])
        d = {}
        d.setdefault("a", []).append(1)
        return xs, d, "a,b".split(","), " x ".strip()

    assert_same(f)


def test_loops_for_while_break_continue_else():
    def f(n):
        out = []
        for i in range(n):
            if i == 2:
                continue
            if i == 5:
                break
            out.append(i)
        else:
            out.append("no-break")
        j = 0
        while j < 3:
            j += 1
        else:
            out.append("while-else")
        return out, j

    assert_same(f, 4)
    assert_same(f, 10)


def test_comprehensions():
    def f(n):
        return (
            [i * i for i in range(n) if i % 2],
            {i % 3 for i in range(n)},
            {i: i * 2 for i in range(n)},
            sum(i for i in range(n)),
            [(i, j) for i in range(3) for j in range(i)],
        )

    assert_same(f, 6)


def test_chained_comparison():
    def f(a, b, c):
        return a < b < c, a == b != c, a <= b >= c

    assert_same(f, 1, 2, 3)
    assert_same(f, 2, 2, 1)


def test_and_or_conditional_expression():
    def f(a, b):
        return (a and b), (a or b), (1 if a else 2)

    for args in [(0, 1), (1, 0), ([], "x"), (object, None)]:
        assert_same(f, *args)


def test_walrus():
    def f(xs):
        if (n := len(xs)) > 2:
            return n
        return [y for x in xs if (y := x * 2)]

    assert_same(f, [1, 2, 3])
    assert_same(f, [0, 1])


def test_lambda_and_decorator():
    def deco(fn):
        def wrapper(*a):
            return fn(*a) + 1

        return wrapper

    def f(x):
        @deco
        def g(y):
            return y * 2

        h = lambda z: z - 1  # noqa: E731
        return g(h(x))

    assert_same(f, 5)


def test_star_unpacking_assignment_and_literals():
    def f(xs):
        a, *b, c = xs
        d, e = b[:2]
        return a, b, c, d, e, [*xs, *b], (*xs,), {**{"a": 1}, "b": 2}, {*xs}

    assert_same(f, [1, 2, 3, 4, 5])


def test_unpack_errors():
    def too_many(xs):
        a, b = xs
        return a

    def not_iterable():
        a, b = 1
        return a

    def not_enough(xs):
        a, *b, c = xs
        return a

    assert_same(too_many, [1, 2, 3])
    assert_same(too_many, [1])
    assert_same(lambda: too_many(iter([1, 2, 3])))
    assert_same(not_iterable)
    assert_same(not_enough, [1])


def test_del_statements():
    def f():
        a = 1
        xs = [1, 2, 3]
        d = {"k": 1}
        del a
        del xs[0]
        del d["k"]
        try:
            return a  # noqa: F821
        except UnboundLocalError:
            return xs, d

    assert_same(f)


def test_augmented_assignment_attribute_and_subscript():
    class C:
        pass

    def f():
        c = C()
        c.x = 1
        c.x += 2
        xs = [1, 2]
        xs[0] += 10
        d = {"a": [1]}
        d["a"] += [2]
        return c.x, xs, d

    assert_same(f)


def test_slices():
    def f(xs):
        ys = list(xs)
        ys[1:3] = [9]
        return xs[1:], xs[:-1], xs[::2], ys, xs[slice(1, None)]

    assert_same(f, [1, 2, 3, 4])


def test_fstrings():
    def f(x, y):
        return f"{x}|{x!r}|{y:>8.3f}|{x!s:>5}|{y!a}|{x=}|{'nested' + str(y):^{x + 10}}"

    assert_same(f, 3, 2.5)


def test_import_inside_function():
    def f():
        import math
        from collections import OrderedDict
        from os import path as p

        return math.sqrt(16), OrderedDict(a=1), p.join("a", "b")

    assert_same(f)


def test_import_from_missing_name():
    def f():
        from math import does_not_exist  # noqa: F401

    assert_same(f)


def test_recursion():
    def fact(n):
        return 1 if n <= 1 else n * fact(n - 1)

    assert_same(fact, 10)


def test_mutual_recursion():
    def is_even(n):
        return True if n == 0 else is_odd(n - 1)

    def is_odd(n):
        return False if n == 0 else is_even(n - 1)

    assert_same(is_even, 10)
    assert_same(is_odd, 7)


def test_isinstance_and_type_checks():
    def f(x):
        return isinstance(x, int), issubclass(type(x), object), type(x).__name__, callable(x)

    assert_same(f, 3)


def test_locals_and_globals_builtins():
    def f():
        funny_name_nowhere_else = True  # noqa: F841
        return locals(), "test_locals_and_globals_builtins" in globals()

    res = interpret(f)()
    assert res[0] == {"funny_name_nowhere_else": True}
    assert res[1] is True


def test_many_locals_extended_arg():
    src = "def f():\n" + "".join(f"    v{i} = {i}\n" for i in range(300)) + "    return v0 + v299\n"
    ns = {}
    exec(src, ns)
    f = ns["f"]
    assert any(i.opname == "EXTENDED_ARG" for i in dis.get_instructions(f))
    assert_same(f)


def test_builtin_called_directly():
    assert interpret(len)([1, 2]) == 2
    assert interpret(sorted)([3, 1], reverse=True) == [3, 1]


def test_callable_object_and_bound_method():
    class C:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x * self.k

        def method(self, x):
            return x + self.k

    c = C(3)
    assert interpret(c)(2) == 6
    assert interpret(c.method)(2) == 5
    assert interpret(C)(4).k == 4


def test_functools_partial():
    import functools

    def g(a, b, c=0):
        return a + b + c

    def f():
        return functools.partial(g, 1, c=5)(2)

    assert_same(f)
    assert interpret(functools.partial(g, 1))(2) == 3


def test_wraps_signature():
    import inspect

    def f(a, b=1, *, c):
        """doc"""
        return a

    jf = interpret(f)
    assert jf.__name__ == "f" and jf.__doc__ == "doc"
    assert inspect.signature(jf) == inspect.signature(f)


def test_deep_recursion_like_native():
    def depth(n):
        return 0 if n == 0 else 1 + depth(n - 1)

    assert_same(depth, 800)


def test_infinite_recursion_raises_recursion_error():
    def forever(n):
        return forever(n + 1)

    assert_same(forever, 0)


def test_interpret_class_does_not_copy_class_dict():
    class C:
        attr = 1

    assert not hasattr(interpret(C), "attr")
