import pytest
from helpers import assert_same

from thunder.core.interpreter import interpret, is_jitting_with_raise


def test_generator_iteration():
    def gen(n):
        for i in range(n):
            yield i * 2

    def f(n):
        return list(gen(n)), [x for x in gen(n)], sum(gen(n))

    assert_same(f, 4)


def test_generator_send():
    def acc():
        total = 0
        while True:
            x = yield total
            if x is None:
                return total
            total += x

    def f():
        g = acc()
        next(g)
        out = [g.send(1), g.send(2)]
        try:
            g.send(None)
        except StopIteration as e:
            out.append(("returned", e.value))
        return out

    assert_same(f)


def test_generator_throw():
    def gen():
        try:
            yield 1
        except ValueError as e:
            yield ("caught", str(e))
        yield 3

    def f():
        g = gen()
        return next(g), g.throw(ValueError("x")), next(g)

    assert_same(f)


def test_generator_close_runs_finally():
    def f():
        log = []

        def gen():
            try:
                yield 1
                yield 2
            finally:
                log.append("closed")

        g = gen()
        next(g)
        g.close()
        return log

    assert_same(f)


def test_generator_ignoring_generator_exit():
    def gen():
        try:
            yield 1
        except GeneratorExit:
            pass
        yield 2

    def f():
        g = gen()
        next(g)
        g.close()

    assert_same(f)


def test_yield_from_return_value():
    def inner():
        yield 1
        yield 2
        return "inner-done"

    def outer():
        r = yield from inner()
        yield r

    def f():
        return list(outer())

    assert_same(f)


def test_yield_from_delegates_send_and_throw():
    def inner():
        try:
            x = yield "first"
            yield ("got", x)
        except KeyError:
            yield "inner caught"
        return "r"

    def outer():
        r = yield from inner()
        yield ("outer", r)

    def f():
        g = outer()
        out = [next(g), g.send(5), g.throw(KeyError("k")), next(g)]
        return out

    def g2():
        g = outer()
        return [next(g), g.throw(KeyError("k")), next(g)]

    assert_same(f)
    assert_same(g2)


def test_yield_from_throw_finishing_subgenerator():
    def inner():
        try:
            yield 1
        except KeyError:
            return "stopped"

    def outer():
        r = yield from inner()
        yield r

    def f():
        g = outer()
        return next(g), g.throw(KeyError())

    assert_same(f)


def test_yield_from_plain_iterable():
    def gen():
        yield from [1, 2, 3]
        yield from range(2)

    assert_same(lambda: list(gen()))


def test_generator_expression():
    def f(xs):
        g = (x + 1 for x in xs)
        return next(g), list(g)

    assert_same(f, [1, 2, 3])


def test_generator_return_value_in_stopiteration():
    def gen():
        yield 1
        return 42

    def f():
        g = gen()
        next(g)
        try:
            next(g)
        except StopIteration as e:
            return e.value

    assert_same(f)


def test_stopiteration_inside_generator_becomes_runtimeerror():
    def gen():
        yield 1
        raise StopIteration

    assert_same(lambda: list(gen()))


def test_generator_created_under_interpreter_runs_interpreted():
    def gen():
        assert is_jitting_with_raise()
        yield 1

    def f():
        return list(gen())

    assert interpret(f)() == [1]


def test_generator_returned_from_interpret_works_natively():
    def gen(n):
        total = 0
        for i in range(n):
            x = yield i
            total += x or 0
        return total

    g = interpret(gen)(3)
    assert next(g) == 0
    assert g.send(10) == 1
    assert g.send(5) == 2
    with pytest.raises(StopIteration) as info:
        g.send(1)
    assert info.value.value == 16


def test_generator_name():
    def mygen():
        yield 1

    g = interpret(mygen)()
    assert g.__name__ == "mygen"


def test_generator_exception_propagates_to_caller():
    def gen():
        yield 1
        raise ValueError("from gen")

    def f():
        try:
            for _ in gen():
                pass
        except ValueError as e:
            return str(e)

    assert_same(f)


def test_exc_info_inside_generator_is_its_own():
    import sys

    def gen():
        try:
            raise KeyError("in gen")
        except KeyError:
            yield sys.exc_info()[0]
        yield sys.exc_info()[0]

    def f():
        g = gen()
        first = next(g)
        outside = sys.exc_info()[0]
        second = next(g)
        return first, outside, second

    assert_same(f)


def test_asyncio_run_inside_an_interpreted_program():
    import asyncio

    async def coro(x):
        await asyncio.sleep(0)
        return x * 2

    def f():
        return asyncio.run(coro(21))

    assert_same(f)


def test_generator_in_finally_and_with():
    def f():
        log = []

        def gen():
            try:
                for i in range(3):  # noqa: UP028
                    yield i
            finally:
                log.append("gen-finally")

        for v in gen():
            if v == 1:
                break
        return log

    assert_same(f)


# -- coroutines and async generators -----------------------------------------------------------------------------


def _run_async(runner, program, *args):
    """``program``'s coroutine (made natively or by ``runner(program)``) run by asyncio: (outcome, notes)."""
    import asyncio

    notes = []

    def note(x):
        notes.append(is_jitting_with_raise())  # raises if this runs natively under the interpreter
        return x

    try:
        result = ("ok", asyncio.run(runner(program)(note, *args)))
    except Exception as e:  # noqa: BLE001
        result = ("raise", type(e), str(e))
    return result, notes


def assert_same_async(program, *args):
    expected, native_notes = _run_async(lambda f: f, program, *args)
    actual, notes = _run_async(interpret, program, *args)
    assert actual == expected
    assert notes == [True] * len(native_notes) and not any(native_notes)


class _AsyncManager:
    def __init__(self, log, suppress=False):
        self.log, self.suppress = log, suppress

    async def __aenter__(self):
        self.log.append("enter")
        return self

    async def __aexit__(self, typ, value, tb):
        self.log.append(("exit", typ.__name__ if typ else None, str(value) if value else None))
        return self.suppress


class _Ticks:
    """A class-based async iterator."""

    def __init__(self, n, note):
        self.n, self.note = n, note

    def __aiter__(self):
        return self

    async def __anext__(self):
        import asyncio

        await asyncio.sleep(0)
        if self.n == 0:
            raise StopAsyncIteration
        self.n -= 1
        return self.note(self.n)


class _PythonAwaitable:
    def __init__(self, value):
        self.value = value

    def __await__(self):
        yield None  # a bare yield: asyncio's event loop resumes it on the next iteration
        return self.value * 2


async def _agen(note, n):
    import asyncio

    try:
        for i in range(n):
            await asyncio.sleep(0)
            yield note(i)
    finally:
        note("closed")


@pytest.mark.parametrize("should_raise", [False, True])
def test_coroutines_awaiting_coroutines(should_raise):
    async def inner(note, x):
        import asyncio

        await asyncio.sleep(0)
        if should_raise:
            raise ValueError(f"bad {x}")
        return note(x) + 1

    async def program(note, x):
        a = await inner(note, x)
        b = await _PythonAwaitable(a)
        return a, b

    assert_same_async(program, 3)


@pytest.mark.parametrize("raises, suppress", [(False, False), (True, False), (True, True)])
def test_async_with(raises, suppress):
    async def program(note, raises, suppress):
        log = []
        async with _AsyncManager(log, suppress) as m:
            note(m)
            log.append("body")
            if raises:
                raise KeyError("inside")
        log.append("after")
        return log

    assert_same_async(program, raises, suppress)


def test_async_for_and_async_comprehensions():
    async def program(note, n):
        out = [x async for x in _agen(note, n)]
        async for x in _Ticks(n, note):
            out.append(x * 10)
        out.append([x async for x in _Ticks(2, note) if x])
        return out

    assert_same_async(program, 3)


def test_async_generator_closed_early_runs_its_finally():
    async def program(note, n):
        g = _agen(note, n)
        first = await g.__anext__()
        await g.aclose()
        try:
            await g.__anext__()
        except StopAsyncIteration:
            return first, "exhausted"

    assert_same_async(program, 5)


def test_cancelling_an_interpreted_coroutine():
    async def sleeper(note):
        import asyncio

        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            note("cancelled")
            raise

    async def program(note):
        import asyncio

        task = asyncio.ensure_future(sleeper(note))
        await asyncio.sleep(0)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return "cancelled"

    assert_same_async(program)


@pytest.mark.parametrize(
    "body",
    ["await 5", "async with object(): pass", "async for x in 3: pass", "await _PythonAwaitable"],
)
def test_async_protocol_errors(body):
    namespace = {"_PythonAwaitable": _PythonAwaitable}
    exec(f"async def program(note):\n    {body}\n", namespace)
    assert_same_async(namespace["program"])
