import dis
import functools
import io
import itertools
import math
import operator
import sys
import types

import pytest

from thunder.core.interpreter import (
    DELETED,
    HANDLERS,
    UNSUPPORTED,
    InterpreterCallbacks,
    InterpreterError,
    current_source_location,
    get_interpreter_stack,
    interpret,
    is_jitting,
    is_jitting_with_raise,
    last_interpreted_instructions,
    last_interpreter_log,
    make_opaque,
    print_interpreter_log,
)
from thunder.core.interpreter.opcodes import handler_for

MODULE_GLOBAL = 3


def test_every_opcode_is_handled_or_explicitly_unsupported():
    missing = [name for name in dis.opmap if name not in HANDLERS and name not in UNSUPPORTED]
    assert missing == []
    for reason in UNSUPPORTED.values():
        assert reason


# -- lookaside -----------------------------------------------------------------------------------------------


def test_lookaside_replacement_is_called_and_result_used():
    def f(x):
        return math.sqrt(x) + 1

    def lookaside(fn):
        if fn is math.sqrt:
            return lambda x: 100

    assert interpret(f, fn_lookaside=lookaside)(4) == 101


def test_lookaside_sees_every_call_including_entry():
    seen = []

    def g(x):
        return abs(x)

    def f(x):
        return g(x) + len([x])

    def lookaside(fn):
        seen.append(fn)
        return None

    assert interpret(f, fn_lookaside=lookaside)(-2) == 3
    assert seen[0] is f and g in seen and abs in seen and len in seen


def test_lookaside_for_python_function_is_not_entered():
    def helper(x):
        raise AssertionError("should not run")

    def f(x):
        return helper(x)

    jf = interpret(f, fn_lookaside=lambda fn: (lambda x: x * 3) if fn is helper else None)
    assert jf(2) == 6
    assert all(i.opname != "RAISE_VARARGS" for i in last_interpreted_instructions(jf))


def test_lookaside_exception_is_catchable_by_user_code():
    def f():
        try:
            return math.floor(1.5)
        except ZeroDivisionError as e:
            return "caught " + str(e)

    def lookaside(fn):
        if fn is math.floor:

            def boom(x):
                raise ZeroDivisionError("from lookaside")

            return boom

    assert interpret(f, fn_lookaside=lookaside)() == "caught from lookaside"


def test_lookaside_applies_to_interpreted_dunders():
    class C:
        def __enter__(self):
            return "real"

        def __exit__(self, *a):
            return False

    def f():
        with C() as v:
            return v

    def lookaside(fn):
        if getattr(fn, "__name__", None) == "__enter__":
            return lambda *args: "replaced"

    assert interpret(f, fn_lookaside=lookaside)() == "replaced"


def test_lookaside_sees_call_function_ex():
    seen = []

    def g(*a, **k):
        return a, k

    def f(args, kwargs):
        return g(*args, **kwargs)

    interpret(f, fn_lookaside=lambda fn: seen.append(fn))((1,), {"a": 2})
    assert g in seen


# -- callbacks --------------------------------------------------------------------------------------------------


def test_load_global_callback_replaces_value():
    calls = []

    def load_global(globals_dict, name, value, is_builtin):
        calls.append((name, is_builtin))
        return 40 if name == "MODULE_GLOBAL" else value

    def f():
        return MODULE_GLOBAL + len([1])

    assert interpret(f, callbacks=InterpreterCallbacks(load_global=load_global))() == 41
    assert ("MODULE_GLOBAL", False) in calls and ("len", True) in calls


def test_store_global_callback_including_delete():
    seen = []

    def f():
        global _API_TMP
        _API_TMP = 1
        del _API_TMP

    cb = InterpreterCallbacks(store_global=lambda g, n, v: seen.append((n, v)))
    interpret(f, callbacks=cb)()
    assert seen == [("_API_TMP", 1), ("_API_TMP", DELETED)]


def test_attr_callbacks():
    class C:
        pass

    loads, stores = [], []

    def load_attr(obj, name, value):
        loads.append(name)
        return value * 2 if name == "x" else value

    def f(c):
        c.x = 5
        y = c.x
        del c.x
        return y

    cb = InterpreterCallbacks(load_attr=load_attr, store_attr=lambda o, n, v: stores.append((n, v)))
    assert interpret(f, callbacks=cb)(C()) == 10
    assert loads == ["x"] and stores == [("x", 5), ("x", DELETED)]


def test_store_subscr_callback():
    seen = []

    def f(d):
        d["a"] = 1
        del d["a"]
        return d

    cb = InterpreterCallbacks(store_subscr=lambda c, k, v: seen.append((k, v)))
    interpret(f, callbacks=cb)({})
    assert seen == [("a", 1), ("a", DELETED)]


def test_deref_callbacks():
    loads, stores = [], []

    def f():
        x = 1

        def inner():
            nonlocal x
            x = x + 1
            return x

        return inner()

    def load_deref(code, name, value, cell):
        loads.append((code.co_name, name, value))
        return value

    cb = InterpreterCallbacks(load_deref=load_deref, store_deref=lambda c, n, v, cell: stores.append((c.co_name, n, v)))
    assert interpret(f, callbacks=cb)() == 2
    assert loads == [("inner", "x", 1), ("inner", "x", 2)]
    assert stores == [("f", "x", 1), ("inner", "x", 2)]


# -- instruction log -----------------------------------------------------------------------------------------------


def test_last_interpreted_instructions():
    def g(x):
        return x + 1

    def f(x):
        return g(x) * 2

    jf = interpret(f)
    jf(1)
    insts = last_interpreted_instructions(jf)
    assert all(isinstance(i, dis.Instruction) for i in insts)
    names = [i.opname for i in insts]
    assert names.count("RETURN_VALUE") == 2
    assert names.index("BINARY_OP") < len(names)


def test_last_interpreter_log_with_history():
    def g(x):
        return math.floor(x)

    def f(x):
        return g(x) + 1

    jf = interpret(f, record_history=True, fn_lookaside=lambda fn: (lambda x: 7) if fn is math.floor else None)
    assert jf(1.5) == 8
    log = last_interpreter_log(jf)
    kinds = [item["kind"] if isinstance(item, dict) else "inst" for item in log]
    assert "InterpreterCall" in kinds and "InterpreterReturn" in kinds and "Lookaside" in kinds
    assert "Line" in kinds and "inst" in kinds
    out = []
    print_interpreter_log(log, print_fn=out.append, use_colors=False)
    text = "\n".join(out)
    assert "Interpreting call to" in text and "Lookaside for" in text and "LOAD_FAST" in text
    # indentation by call depth
    assert any(line.startswith("  ") for line in out)


def test_print_interpreter_log_max_depth_and_colors():
    def g():
        return len([])

    def f():
        return g()

    jf = interpret(f, record_history=True)
    jf()
    out = []
    print_interpreter_log(last_interpreter_log(jf), print_fn=out.append, max_depth=0)
    assert out and all(not line.startswith("  ") for line in out)
    assert any("\x1b[" in line for line in out)


def test_opaque_log_entries():
    def f():
        return abs(-1)

    jf = interpret(f, record_history=True)
    jf()
    assert any(isinstance(i, dict) and i["kind"] == "Opaque" and i["fn"] is abs for i in last_interpreter_log(jf))


def test_log_without_history_is_instructions():
    jf = interpret(lambda: 1)
    jf()
    assert last_interpreter_log(jf) == last_interpreted_instructions(jf)


# -- opaque, is_jitting -------------------------------------------------------------------------------------------


def test_make_opaque_runs_natively():
    @make_opaque
    def native(x):
        return is_jitting(), x

    def helper():
        return is_jitting_with_raise()

    def f():
        return native(1), helper()

    jf = interpret(f, record_history=True)
    assert jf() == ((True, 1), True)
    assert any(isinstance(i, dict) and i["kind"] == "Opaque" and i["fn"] is native for i in last_interpreter_log(jf))


def test_is_jitting_with_raise_natively():
    assert is_jitting_with_raise() is False
    assert is_jitting() is False


def test_is_jitting_with_raise_raises_when_called_natively_under_interpreter():
    @make_opaque
    def native():
        return is_jitting_with_raise()

    with pytest.raises(InterpreterError):
        interpret(native)()


def test_is_jitting_inside_lookaside_replacement():
    seen = []

    def f():
        return math.floor(1.5)

    def lookaside(fn):
        if fn is math.floor:
            return lambda x: seen.append(is_jitting()) or 0

    interpret(f, fn_lookaside=lookaside)()
    assert seen == [True]


# -- errors -----------------------------------------------------------------------------------------------------------


def test_interpreter_error_for_unsupported_opcode(monkeypatch):
    from thunder.core.interpreter import instructions

    def f():
        return 1

    code = f.__code__
    info = instructions.decode(code)
    original = list(info.handlers)
    idx = len(info.instructions) - 1  # the return: RETURN_VALUE on 3.11, RETURN_CONST on 3.12 and 3.13
    monkeypatch.setitem(UNSUPPORTED, info.instructions[idx].opname, "test")
    info.handlers[idx] = handler_for("NOT_AN_OPCODE")
    try:
        with pytest.raises(InterpreterError, match="unsupported opcode"):
            interpret(f)()
    finally:
        info.handlers[:] = original


def test_interpreter_error_is_not_caught_by_user_code():
    @make_opaque
    def native():
        return is_jitting_with_raise()

    def f():
        try:
            native()
        except Exception:
            return "swallowed"

    with pytest.raises(InterpreterError):
        interpret(f)()


def test_user_exceptions_are_not_interpreter_errors():
    def f():
        raise RuntimeError("user")

    with pytest.raises(RuntimeError, match="user") as info:
        interpret(f)()
    assert type(info.value) is RuntimeError


# -- stack inspection ------------------------------------------------------------------------------------------------------


def test_interpreter_stack_from_lookaside():
    seen = {}

    def inner():
        return math.floor(2.5)

    def outer():
        return inner()

    def lookaside(fn):
        if fn is math.floor:

            def repl(x):
                seen["stack"] = [fr.name for fr in get_interpreter_stack()]
                seen["loc"] = current_source_location()
                return 0

            return repl

    interpret(outer, fn_lookaside=lookaside)()
    assert seen["stack"] == ["outer", "inner"]
    filename, lineno, qualname = seen["loc"]
    assert filename == __file__ and qualname.endswith("inner")
    assert "math.floor" in open(filename).read().splitlines()[lineno - 1]
    assert current_source_location() is None and get_interpreter_stack() == []


def test_callbacks_as_dict():
    def f():
        return MODULE_GLOBAL

    assert interpret(f, callbacks={"load_global": lambda g, n, v, b: 9})() == 9


def test_interactive_expression_statement_prints_through_displayhook():
    # Interactive code prints an expression statement's value: PRINT_EXPR on 3.11, CALL_INTRINSIC_1 with
    # INTRINSIC_PRINT from 3.12.
    code = compile("1 + 1", "<interactive>", "single")
    printing = "PRINT_EXPR" if sys.version_info < (3, 12) else "CALL_INTRINSIC_1"
    assert any(i.opname == printing for i in dis.get_instructions(code))
    buf = io.StringIO()
    old = sys.stdout
    sys.stdout = buf
    try:
        jfn = interpret(types.FunctionType(code, {}), record_history=True)
        jfn()
    finally:
        sys.stdout = old
    assert buf.getvalue().strip() == "2"
    assert printing in [i.opname for i in last_interpreted_instructions(jfn)]


# -- native functions calling back (Note [Native callbacks]) -----------------------------------------------------


def _recording(seen):
    def note(x):
        seen.append(is_jitting_with_raise())  # raises if this runs natively under the interpreter
        return x

    return note


@pytest.mark.parametrize(
    "program",
    [
        lambda note, xs: functools.reduce(lambda a, b: note(a) + b, xs, 0),
        lambda note, xs: list(map(lambda x: note(x) * 2, xs)),
        lambda note, xs: list(filter(lambda x: note(x) % 2, xs)),
        lambda note, xs: sorted(xs, key=lambda x: -note(x)),
        lambda note, xs: (min(xs, key=note), max(*xs, key=note)),
        lambda note, xs: list(iter(lambda: note(xs.pop()), xs[0])),
        lambda note, xs: list(itertools.accumulate(xs, lambda a, b: note(a) * b)),
        lambda note, xs: list(itertools.starmap(lambda a, b: note(a) - b, zip(xs, xs[1:]))),
        lambda note, xs: [(k, list(g)) for k, g in itertools.groupby(xs, key=lambda x: note(x) > 2)],
    ],
    ids=["reduce", "map", "filter", "sorted-key", "min-max-key", "iter-sentinel", "accumulate", "starmap", "groupby"],
)
def test_callbacks_of_native_functions_are_interpreted(program):
    native_seen, seen = [], []
    expected = program(_recording(native_seen), [1, 2, 3, 4])
    assert interpret(program)(_recording(seen), [1, 2, 3, 4]) == expected
    assert native_seen and not any(native_seen)
    assert seen == [True] * len(native_seen)


class _Countdown:
    """An iterable whose __iter__ and __next__ are Python code that asks whether it is interpreted."""

    def __init__(self, n, seen):
        self.n, self.seen = n, seen

    def __iter__(self):
        self.seen.append(is_jitting_with_raise())
        return self

    def __next__(self):
        self.seen.append(is_jitting_with_raise())
        if self.n == 0:
            raise StopIteration
        self.n -= 1
        return self.n


@pytest.mark.parametrize(
    "consumer",
    [enumerate, any, all, sum, list, tuple, sorted, max, lambda it: list(zip(it, "abcd")), lambda it: list(map(str, it)),
     lambda it: functools.reduce(operator.add, it)],  # fmt: skip
    ids=["enumerate", "any", "all", "sum", "list", "tuple", "sorted", "max", "zip", "map", "reduce"],
)
def test_python_iterables_given_to_native_functions_are_iterated_by_the_interpreter(consumer):
    def program(seen):
        out = consumer(_Countdown(3, seen))
        return list(out) if type(out) is enumerate else out

    native_seen, seen = [], []
    assert interpret(program)(seen) == program(native_seen)
    assert not any(native_seen)
    assert seen == [True] * len(native_seen)


def test_the_lookaside_is_asked_for_a_callback():
    def program(xs):
        return functools.reduce(operator.add, xs)

    def lookaside(fn):
        if fn is operator.add:
            return operator.mul

    assert interpret(program, fn_lookaside=lookaside)([2, 3, 4]) == 24


def test_a_lazy_native_result_consumed_after_the_interpretation_runs_natively():
    def program(note, xs):
        return map(lambda x: note(x) + 1, xs)

    seen = []
    lazy = interpret(program)(_recording(seen), [1, 2])
    assert list(lazy) == [2, 3]
    assert seen == [False, False]


def test_an_exception_in_a_callback_reaches_the_program():
    def program(xs):
        try:
            return sorted(xs, key=lambda x: 1 / x)
        except ZeroDivisionError as e:
            return ("caught", str(e))

    assert interpret(program)([1, 0]) == program([1, 0])


def test_an_interpreted_function_given_to_an_interpreted_program():
    def add(a, b):
        return a + b + is_jitting_with_raise()

    def program(a, fn):
        return fn(1, 2), functools.reduce(fn, a)

    assert interpret(program)((1, 2, 3), interpret(add)) == (4, 8)


def test_a_function_of_module_level_code_has_its_globals_as_locals():
    def run(runner):
        g = {"__builtins__": __builtins__}
        runner(types.FunctionType(compile("x = 5\ny = x + 1\ndel x", "<module code>", "exec"), g))()
        return {k: v for k, v in g.items() if k != "__builtins__"}

    assert run(interpret) == run(lambda f: f) == {"y": 6}


class _OldStyleSequence:
    """Iterable through ``__getitem__`` alone (no ``__iter__``), as CPython allows."""

    def __init__(self, seen):
        self.seen = seen

    def __getitem__(self, i):
        self.seen.append(is_jitting_with_raise())
        if i == 3:
            raise IndexError(i)
        return i * 10


@pytest.mark.parametrize(
    "consumer",
    [lambda s: [x for x in s], lambda s: list(iter(s)), list, sorted, lambda s: list(enumerate(s)), sum],
    ids=["for", "iter", "list", "sorted", "enumerate", "sum"],
)
def test_a_sequence_without_iter_is_iterated_by_the_interpreter(consumer):
    def program(seen):
        return consumer(_OldStyleSequence(seen))

    native_seen, seen = [], []
    assert interpret(program)(seen) == program(native_seen)
    assert seen == [True] * len(native_seen) and not any(native_seen)


# -- internal failures never reach the program (every supported version) -------------------------------------------


def _break_first(monkeypatch, fn, opname_prefix: str, broken):
    """Replaces the handler of ``fn``'s first instruction whose name starts with ``opname_prefix``."""
    from thunder.core.interpreter import instructions

    info = instructions.decode(fn.__code__)
    idx = next(i for i, inst in enumerate(info.instructions) if inst.opname.startswith(opname_prefix))
    handlers = list(info.handlers)
    handlers[idx] = broken
    monkeypatch.setattr(info, "handlers", handlers)


def test_a_bad_stack_is_an_interpreter_error_the_program_cannot_catch(monkeypatch):
    def f(x):
        try:
            return abs(x)
        except Exception:
            return "the other branch"

    def pops_too_much(inst, frame):
        frame.stack.clear()
        frame.stack.pop()

    _break_first(monkeypatch, f, "CALL", pops_too_much)
    with pytest.raises(InterpreterError, match="stack too short"):
        interpret(f)(-1)


def test_null_used_as_a_value_is_an_interpreter_error_the_program_cannot_catch(monkeypatch):
    from thunder.core.interpreter import NULL

    printed = io.StringIO()

    def f(x):
        try:
            print("hi", file=printed)
            return abs(x)
        except Exception:
            return "the other branch"

    def null_as_argument(inst, frame):  # as if the stack layout of a call were misread
        frame.stack.insert(len(frame.stack) - inst.arg, NULL)
        HANDLERS[inst.opname](inst._replace(arg=inst.arg + 1), frame)

    _break_first(monkeypatch, f, "CALL", null_as_argument)
    with pytest.raises(InterpreterError, match="NULL"):
        interpret(f)(-1)
    assert printed.getvalue() == ""

    from thunder.core.interpreter import errors

    def g():
        try:
            return f"{errors.NULL}"
        except Exception:
            return "the other branch"

    with pytest.raises(InterpreterError, match="NULL"):
        interpret(g)()


def test_an_unsupported_python_is_refused_at_once(monkeypatch):
    import thunder
    from thunder.core.interpreter import versions

    monkeypatch.setattr(versions, "running_python", lambda: (3, 99))
    with pytest.raises(InterpreterError, match=r"Python 3\.99.*3\.11, 3\.12, 3\.13"):
        thunder.jit(lambda x: x + 1)
    with pytest.raises(InterpreterError, match=r"Python 3\.99"):
        interpret(lambda x: x + 1)
