"""``cache="symbolic values"`` never specialises silently.

Under symbolic values, input ints/floats and input tensor dims are ``SymInt``/``SymFloat``. Every
place Python consumes one must either record a constraint (checked by the prologue) or keep the
result symbolic. Each case jits ``f`` with symbolic values, calls it with the inputs in order, and
compares every result with eager; ``misses`` is the number of compilations the calls may take
(the later calls that give the same answer must not recompile needlessly).
"""

import array
import collections
import copy
import datetime
import decimal
import itertools
import json
import math
import operator
import pickle
import struct

import numpy
import pytest
import torch

import thunder
from thunder.core.interpreter.runtime import is_opaque
from thunder.core.symbolic import SymFloat, SymInt, _SymbolicMixin, recording_constraints


def _assert_same(actual, expected):
    assert type(actual) is type(expected), (actual, expected)
    if isinstance(expected, torch.Tensor):
        torch.testing.assert_close(actual, expected, equal_nan=True)
    elif isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_same(a, e)
    else:
        assert actual == expected


def _x(n=2):
    return torch.ones(n)


# name -> (function, list of argument tuples, compilations the calls may take)
CASES = {
    # range() reads the int natively
    "range_len": (lambda x, n: x * len(list(range(n))), [(_x(), 3), (_x(), 4)], 2),
    "range_loop": (lambda x, n: sum((x * i for i in range(n)), x), [(_x(), 2), (_x(), 3)], 2),
    # hashing: a dict or set lookup that misses compares nothing
    "dict_get_miss": (lambda x, n: x + {5: 1}.get(n, 0), [(_x(), 3), (_x(), 5)], 2),
    "set_membership_miss": (lambda x, n: x + (1 if n in {5, 6} else 0), [(_x(), 3), (_x(), 5)], 2),
    "hash": (lambda x, n: x + hash(n) % 7, [(_x(), 3), (_x(), 4)], 2),
    "float_dict_key": (lambda x, f: x + {2.5: 1}.get(f, 0), [(_x(), 1.5), (_x(), 2.5)], 2),
    # type and isinstance see int/float, never the symbol type
    "type_is_int": (lambda x, n: x + (1 if type(n) is int else 2), [(_x(), 3), (_x(), 4)], 1),
    "type_is_float": (lambda x, f: x + (1 if type(f) is float else 2), [(_x(), 1.5), (_x(), 2.5)], 1),
    "class_is_int": (lambda x, n: x + (1 if n.__class__ is int else 2), [(_x(), 3), (_x(), 4)], 1),
    "type_of_dim": (lambda x: x + (1 if type(x.shape[0]) is int else 2), [(_x(3),), (_x(4),)], 1),
    "isinstance_int": (
        lambda x, n: x + (1 if isinstance(n, int) and not isinstance(n, float) else 2),
        [(_x(), 3), (_x(), 4)],
        1,
    ),  # fmt: skip
    "type_of_shape": (lambda x: x + (1 if type(x.shape) is torch.Size else 2), [(_x(3),), (_x(4),)], 1),
    "type_of_size": (lambda x: x + len(type(x.size()).__name__), [(_x(3),), (_x(4),)], 1),
    "type_name": (lambda x, n: x + len(type(n).__name__), [(_x(), 3), (_x(), 4)], 1),
    # indexing a sequence with it, spelled as a call
    "operator_getitem": (lambda x, n: x + operator.getitem((1, 2, 3, 4), n), [(_x(), 1), (_x(), 2)], 2),
    "tuple_getitem_method": (lambda x, n: x + (1, 2, 3, 4).__getitem__(n), [(_x(), 1), (_x(), 2)], 2),
    "tuple_getitem_unbound": (lambda x, n: x + tuple.__getitem__((1, 2, 3, 4), n), [(_x(), 1), (_x(), 2)], 2),
    "str_getitem_method": (lambda x, n: x + ord("abcd".__getitem__(n)), [(_x(), 1), (_x(), 2)], 2),
    "operator_index": (lambda x, n: x + operator.index(n), [(_x(), 1), (_x(), 2)], 2),
    "tuple_getitem_slice": (lambda x, n: x * len(tuple.__getitem__((1, 2, 3), slice(n))), [(_x(), 1), (_x(), 2)], 2),
    "operator_getitem_slice": (lambda x, n: x * len(operator.getitem((1, 2, 3), slice(n))), [(_x(), 1), (_x(), 2)], 2),
    # a dim of a shape (a SymbolicSize, or a torch.Size of plain dims) picked by a symbolic index
    "shape_subscript": (lambda x, n: x * x.shape[n], [(torch.ones(2, 3), 0), (torch.ones(2, 3), 1)], 2),
    "shape_negative_subscript": (lambda x, n: x * x.shape[-n], [(torch.ones(2, 3), 1), (torch.ones(2, 3), 2)], 2),
    "shape_slice": (lambda x, n: x * len(x.shape[:n]), [(torch.ones(2, 3), 1), (torch.ones(2, 3), 2)], 2),
    "size_of_dim": (lambda x, n: x * x.size(n), [(torch.ones(2, 3), 0), (torch.ones(2, 3), 1)], 2),
    "stride_of_dim": (lambda x, n: x * x.stride(n), [(torch.ones(2, 3), 0), (torch.ones(2, 3), 1)], 2),
    "plain_shape_subscript": (lambda x, n: x * x.reshape(2, 3).shape[n], [(torch.ones(2, 3), 0), (torch.ones(2, 3), 1)], 2),
    "torch_size_subscript": (lambda x, n: x * torch.Size([2, 3])[n], [(_x(), 0), (_x(), 1)], 2),
    "sequence_times_number": (lambda x, n: x * len(n * [0]), [(_x(), 3), (_x(), 4)], 2),
    # math
    "math_floor": (lambda x, f: x + math.floor(f), [(_x(), 2.5), (_x(), 2.7), (_x(), 3.5)], 1),
    "math_ceil": (lambda x, f: x + math.ceil(f), [(_x(), 2.5), (_x(), 2.7), (_x(), 3.5)], 1),
    "math_trunc": (lambda x, f: x + math.trunc(f), [(_x(), -2.5), (_x(), -2.7), (_x(), 3.5)], 1),
    "round": (lambda x, f: x + round(f), [(_x(), 2.4), (_x(), 2.6), (_x(), 2.5)], 1),
    "round_ndigits": (lambda x, f: x + round(f, 1), [(_x(), 2.54), (_x(), 2.56)], 1),
    "floor_branch": (lambda x, f: x + 1 if math.floor(f) > 2 else x - 1, [(_x(), 2.5), (_x(), 2.9), (_x(), 3.5)], 2),
    "math_floor_int": (lambda x, n: x * math.floor(n), [(_x(), 3), (_x(), 4)], 1),
    "math_prod": (lambda x, n: x * math.prod([n, 2]), [(_x(), 3), (_x(), 4)], 1),
    "math_sqrt": (lambda x, f: x + math.sqrt(f), [(_x(), 4.0), (_x(), 9.0)], 1),  # (Note [math functions of symbolic numbers])
    "math_gcd": (lambda x, n: x + math.gcd(n, 6), [(_x(), 3), (_x(), 4)], 2),
    "math_isclose": (lambda x, f: x + (1 if math.isclose(f, 2.5) else 0), [(_x(), 2.5), (_x(), 3.5)], 2),
    # text
    "str": (lambda x, n: x + len(str(n)), [(_x(), 3), (_x(), 10)], 2),
    "repr": (lambda x, n: x + len(repr(n)), [(_x(), 3), (_x(), 10)], 2),
    "fstring": (lambda x, n: x + len(f"{n}"), [(_x(), 3), (_x(), 10)], 2),
    "fstring_conversion": (lambda x, n: x + len(f"{n!r}{n!s}"), [(_x(), 3), (_x(), 10)], 2),
    "format_spec": (lambda x, f: x + len(format(f, ".3g")), [(_x(), 2.5), (_x(), 2.25)], 2),
    "str_format": (
        lambda x, n: x + len("{}".format(n)),  # noqa: UP032 (str.format is what is tested)
        [(_x(), 3), (_x(), 10)],
        2,
    ),
    "str_of_negative_zero": (lambda x, f: x + len(str(f)), [(_x(), 0.0), (_x(), -0.0)], 2),
    "hex": (lambda x, n: x + len(hex(n)), [(_x(), 3), (_x(), 16)], 2),
    "chr": (lambda x, n: x + ord(chr(n)), [(_x(), 65), (_x(), 66)], 2),
    "str_method_argument": (lambda x, n: x + len("a".ljust(n)), [(_x(), 3), (_x(), 4)], 2),
    # len() of a tensor is its symbolic dim
    "len_of_tensor": (lambda x: x * len(x), [(_x(3),), (_x(4),)], 1),
    "len_of_tensor_branch": (lambda x: x + 1 if len(x) > 3 else x - 1, [(_x(3),), (_x(4),), (_x(5),)], 2),
    # int/float methods
    "bit_length": (lambda x, n: x + n.bit_length(), [(_x(), 3), (_x(), 2), (_x(), 4)], 1),
    "bit_length_unbound": (lambda x, n: x + int.bit_length(n), [(_x(), 3), (_x(), 4)], 1),
    "is_integer": (lambda x, f: x + (1 if f.is_integer() else 0), [(_x(), 2.5), (_x(), 2.7), (_x(), 3.0)], 2),
    "is_integer_unbound": (lambda x, f: x + (1 if float.is_integer(f) else 0), [(_x(), 2.5), (_x(), 3.0)], 2),
    "int_dunder_unbound": (lambda x, n: x * int.__add__(n, 1), [(_x(), 3), (_x(), 4)], 1),
    "float_as_integer_ratio": (lambda x, f: x + f.as_integer_ratio()[1], [(_x(), 2.5), (_x(), 2.25)], 2),
    "int_as_integer_ratio": (lambda x, n: x * n.as_integer_ratio()[0], [(_x(), 3), (_x(), 4)], 1),
    "conjugate_real_imag": (lambda x, n: x * (n.conjugate() + n.real + n.imag), [(_x(), 3), (_x(), 4)], 1),
    "numerator_denominator": (lambda x, n: x * n.numerator / n.denominator, [(_x(), 3), (_x(), 4)], 1),
    "float_real": (lambda x, f: x * f.real, [(_x(), 2.5), (_x(), 3.5)], 1),
    "to_bytes": (lambda x, n: x + n.to_bytes(2, "little")[0], [(_x(), 3), (_x(), 4)], 2),
    "float_hex": (lambda x, f: x + len(f.hex()), [(_x(), 2.5), (_x(), 0.1)], 2),
    "dunder_floor": (lambda x, f: x + f.__floor__(), [(_x(), 2.5), (_x(), 3.5)], 1),
    "dunder_ceil": (lambda x, f: x + f.__ceil__(), [(_x(), 2.5), (_x(), 3.5)], 1),
    # arithmetic that used to drop the expression or read the value natively
    "rdivmod": (lambda x, n: x + divmod(7, n)[0], [(_x(), 3), (_x(), 4)], 1),
    "divmod": (lambda x, n: x + divmod(n, 3)[1], [(_x(), 4), (_x(), 5)], 1),
    "reflected_and": (lambda x, n: x + (6 & n), [(_x(), 3), (_x(), 4)], 2),
    "reflected_or": (lambda x, n: x + (8 | n), [(_x(), 3), (_x(), 4)], 2),
    "reflected_lshift": (lambda x, n: x + (1 << n), [(_x(), 3), (_x(), 4)], 2),
    "plus_bool": (lambda x, n: x * (n + True), [(_x(), 3), (_x(), 4)], 1),
    "times_complex": (lambda x, n: x * (n * 1j).imag, [(_x(), 3), (_x(), 4)], 2),
    "eq_complex": (lambda x, n: x + (1 if n == 3 + 0j else 0), [(_x(), 3), (_x(), 4)], 2),
    "pow_mod": (lambda x, n: x + pow(n, 2, 5), [(_x(), 3), (_x(), 4)], 2),
    # a number to a tensor's power is the tensor's op: it stays symbolic (Adam's ``beta1 ** step``)
    "float_pow_tensor": (lambda x, f: f**x, [(_x(), 0.5), (_x(), 0.7)], 1),
    "int_pow_tensor": (lambda x, n: n**x, [(_x(), 3), (_x(), 4)], 1),
    "copy_keeps_symbol": (lambda x, n: x * copy.copy(n), [(_x(), 3), (_x(), 4)], 1),
    "deepcopy_keeps_symbol": (lambda x, n: x * copy.deepcopy([n])[0], [(_x(), 3), (_x(), 4)], 1),
    "pickle": (lambda x, n: x + len(pickle.dumps(n)), [(_x(), 3), (_x(), 300)], 2),
    "struct_pack": (lambda x, n: x + struct.pack("<i", n)[0], [(_x(), 3), (_x(), 4)], 2),
    "itertools_repeat": (lambda x, n: x * len(list(itertools.repeat(0, n))), [(_x(), 3), (_x(), 4)], 2),
    "from_bytes_on_instance": (lambda x, n: x + n.from_bytes(b"\x02", "little"), [(_x(), 3), (_x(), 4)], 1),
    "fromhex_on_instance": (lambda x, f: x + f.fromhex("0x1p1"), [(_x(), 2.5), (_x(), 3.5)], 1),
    "compare_with_inf": (lambda x, f: x + (1 if f < math.inf else 0), [(_x(), 2.0), (_x(), math.inf)], 2),
    "arithmetic_with_inf": (lambda x, f: x * (f + math.inf), [(_x(), 2.0), (_x(), 3.0)], 1),
    "arithmetic_with_nan": (lambda x, f: x * (f * math.nan), [(_x(), 2.0), (_x(), 3.0)], 1),
    "comparison_branch": (lambda x, n: x + 1 if n > 2 else x - 1, [(_x(), 3), (_x(), 4), (_x(), 1)], 2),
    "max_branch": (lambda x, n: x * max(n, 2), [(_x(), 3), (_x(), 4), (_x(), 1)], 2),
}


@pytest.mark.parametrize("name", list(CASES))
def test_symbolic_value_consumer_matches_eager(name):
    f, calls, misses = CASES[name]
    jf = thunder.jit(f, cache="symbolic values")
    for args in calls:
        _assert_same(jf(*args), f(*args))
    assert thunder.cache_misses(jf) == misses


# Native paths the interpreter runs without a call (so the lookaside never sees them): the index
# of a subscript or slice (the interpreter asks ``__index__`` of an int subclass, as CPython does not),
# sequence repetition with the sequence on the left (the number protocol is tried first, as in
# CPython), and printf-style formatting (the tracer pins the numbers it formats).
NATIVE_HOLES = {
    "tuple_subscript": (lambda x, n: x + (1, 2, 3, 4)[n], [(_x(), 1), (_x(), 2)]),
    "str_subscript": (lambda x, n: x + ord("abcd"[n]), [(_x(), 1), (_x(), 2)]),
    "list_slice": (lambda x, n: x * len([1, 2, 3, 4][:n]), [(_x(), 1), (_x(), 2)]),
    "list_times_number": (lambda x, n: x * len([0] * n), [(_x(), 3), (_x(), 4)]),
    "printf_format": (
        lambda x, n: x + len("%d" % n),  # noqa: UP031 (printf-style is what is tested)
        [(_x(), 3), (_x(), 10)],
    ),
}


@pytest.mark.parametrize(
    "name",
    [
        n
        for n in NATIVE_HOLES
    ],
)
def test_symbolic_value_read_natively_by_the_interpreter(name):
    f, calls = NATIVE_HOLES[name]
    jf = thunder.jit(f, cache="symbolic values")
    for args in calls:
        _assert_same(jf(*args), f(*args))


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
@pytest.mark.parametrize("fn", [math.floor, math.ceil, math.trunc, round])
def test_rounding_a_non_finite_float_raises_like_eager(fn, bad):
    def f(x, v):
        return x + fn(v)

    jf = thunder.jit(f, cache="symbolic values")
    _assert_same(jf(_x(), 2.5), f(_x(), 2.5))
    with pytest.raises(Exception) as expected:
        f(_x(), bad)
    with pytest.raises(type(expected.value)):
        jf(_x(), bad)


def test_symbolic_numbers_record_what_they_pin():
    n, f = SymInt(3, "n"), SymFloat(2.5, "f")
    with recording_constraints() as cs:
        hash(n)
        format(f, ".2f")
        str(SymFloat(-0.0, "z"))
        repr(SymFloat(math.nan, "q"))
    assert list(cs) == ["n == 3", "f == 2.5", "repr(z) == '-0.0'", "repr(q) == 'nan'"]
    for expr in cs:  # every constraint is Python the prologue can evaluate
        assert eval(expr, {"n": 3, "f": 2.5, "z": -0.0, "q": math.nan})


def test_symbolic_results_keep_expressions():
    n, f = SymInt(5, "n"), SymFloat(2.5, "f")
    with recording_constraints() as cs:
        results = {
            "floor": math.floor(f), "ceil": math.ceil(f), "trunc": math.trunc(f), "round": round(f),
            "bit_length": n.bit_length(), "divmod": divmod(n, 3)[1], "plus_bool": n + True,
        }  # fmt: skip
    for name, r in results.items():
        assert type(r) is SymInt, name
        assert eval(r.expr, {"n": 5, "f": 2.5}) == r.value, name
    assert list(cs) == ["f - f == 0"]  # rounding a float records that it is finite, nothing else


def test_symbolic_methods_are_opaque_to_the_interpreter():
    for cls in (_SymbolicMixin, SymInt, SymFloat):
        for name, attr in vars(cls).items():
            fn = attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
            if callable(fn) and not isinstance(fn, type):
                assert is_opaque(fn), f"{cls.__name__}.{name}"


def test_shape_polymorphic_code_does_not_recompile():
    # The common consumers of symbolic dims (arithmetic, len, reshape, a loop over a fixed range)
    # record nothing that depends on the dims' values.
    def f(x):
        n = len(x)
        y = x.reshape(n // 2, 2) * (n + 1)
        for i in range(2):
            y = y + i
        return y.sum(0) / n

    jf = thunder.jit(f, cache="symbolic values")
    for n in (4, 6, 8):
        x = torch.arange(float(n))
        _assert_same(jf(x), f(x))
    assert thunder.cache_misses(jf) == 1


def test_setting_an_attribute_of_a_number_fails_as_in_eager():
    def f(x, n):
        n.tag = 1
        return x

    with pytest.raises(AttributeError, match="'int' object has no attribute 'tag'"):
        f(_x(), 3)
    with pytest.raises(AttributeError, match="'int' object has no attribute 'tag'"):
        thunder.jit(f, cache="symbolic values")(_x(), 3)


@pytest.mark.parametrize("query", ["is_floating_point", "is_complex", "numel"])
def test_torch_metadata_queries_answer_from_the_proxy(query):
    fn = getattr(torch, query)

    def f(x):
        return x + 1, fn(x)

    for x in (torch.ones(2, 3), torch.ones(4, dtype=torch.int64)):
        _assert_same(thunder.jit(f)(x), f(x))


@pytest.mark.parametrize(
    "f, values",
    [
        (lambda x, n: x * (2.5 + n), (1, 2)),
        (lambda x, n: x * 2 if 2.5 < n else x, (1, 3)),
        (lambda x, n: x * (True + n), (1, 2)),
        (lambda x, n: x * 2 if 0.5 * n > 1 else x, (1, 3)),
        (lambda x, n: x * abs(1j * n), (1, 2)),
    ],
    ids=["float-plus", "float-less", "bool-plus", "float-times-branch", "complex-times"],
)
def test_builtin_left_operand_reading_a_symbolic_int_natively_is_guarded(f, values):
    """CPython's float/bool/complex slots read an int operand's value without calling its methods."""
    jf = thunder.jit(f, cache="symbolic values")
    for n in values:
        _assert_same(jf(_x(), n), f(_x(), n))


@pytest.mark.parametrize(
    "fn",
    [lambda a, n: a[n:] + 1, lambda a, n: a[1:n] * 2, lambda a, n: a[::n] - 1, lambda a, n: a[n:] + a[n:]],
    ids=["start", "stop", "step", "twice"],
)
def test_a_slice_with_symbolic_bounds_does_not_pin_them(fn):
    # Slices are hashable from Python 3.12: hashing one (common-subexpression elimination did) pinned the symbolic
    # bounds inside it, and every new value recompiled.
    jf = thunder.jit(fn, cache="symbolic values")
    a = torch.randn(12)
    for n in (2, 3, 4):
        torch.testing.assert_close(jf(a, n), fn(a, n))
    assert thunder.cache_misses(jf) == 1, thunder.cache_miss_reasons(jf)


# Libraries whose native code reads a dim's value (``np.arange(n)``) or a number inside a list or dict
# (``bytes([n])``, ``json.dumps``), and a position given to a method of the program's own list or deque
# (``l.insert(n, v)``, ``d.rotate(n)``): after calls with 3 and 2 rows (a symbolic dim), a call with 3 rows got the
# results for 2, unchecked.
LIBRARY_CONSUMERS = {
    "np_arange": lambda x: numpy.arange(x.shape[0]).tolist(),
    "np_ones": lambda x: numpy.ones((x.shape[0], 2)).shape,
    "np_reshape": lambda x: numpy.zeros(6).reshape(x.shape[0], -1).shape,
    "np_of_a_shape": lambda x: numpy.zeros(x.shape).shape,
    "np_of_a_size": lambda x: numpy.empty(torch.Size([x.shape[0], 2])).shape,
    "array": lambda x: list(array.array("i", [x.shape[0]])),
    "bytes_of_list": lambda x: bytes([x.shape[0]]),
    "json": lambda x: json.dumps({"n": x.shape[0]}),
    "decimal": lambda x: str(decimal.Decimal(x.shape[0])),
    "timedelta": lambda x: datetime.timedelta(seconds=x.shape[0]).total_seconds(),
    "deque_maxlen": lambda x: list(collections.deque(range(6), maxlen=x.shape[0])),
    "deque_rotate": lambda x: (lambda d: (d.rotate(x.shape[0]), list(d))[1])(collections.deque(range(5))),
    "list_insert": lambda x: (lambda l: (l.insert(x.shape[0], 9), l)[1])([0, 1, 2, 3, 4]),
    "list_pop": lambda x: [0, 1, 2, 3, 4, 5, 6].pop(x.shape[0]),
    "list_setitem_call": lambda x: (lambda l: (l.__setitem__(x.shape[0], 9), l)[1])([0, 1, 2, 3, 4, 5, 6]),
    "three_argument_pow": lambda x: pow(2, x.shape[0], 7),
    "itemgetter": lambda x: operator.itemgetter(x.shape[0])([1, 2, 3, 4, 5, 6, 7]),
    "itemgetter_slice": lambda x: operator.itemgetter(slice(x.shape[0]))("abcdefg"),
    "methodcaller": lambda x: operator.methodcaller("pop", x.shape[0])([1, 2, 3, 4, 5, 6, 7]),
}


@pytest.mark.parametrize("name", list(LIBRARY_CONSUMERS))
def test_a_dim_read_natively_by_a_library_is_checked(name):
    f = LIBRARY_CONSUMERS[name]
    jf = thunder.jit(f)
    for n in (3, 2, 3, 6, 2):
        x = torch.randn(n, 3)
        assert jf(x) == f(x)


def test_a_float_power_of_a_symbolic_number_keeps_its_expression():
    # Note [Symbolic float powers]: Adam's ``1 - beta1 ** step`` and ``bias_correction2 ** 0.5``; a power outside the
    # boxes pins as before (0.9 ** -3.0 is above 1).
    def f(t, x):
        return t * (1 - 0.9 ** x), t * (x / 1000) ** 0.5, t * 2.0 ** -x

    jf = thunder.jit(f, cache="symbolic values")
    t = torch.ones(2, dtype=torch.float64)
    for x in (1.0, 2.0, 3.5, 7.25):
        for actual, expected in zip(jf(t, x), f(t, x)):
            torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert thunder.cache_misses(jf) == 1
    for actual, expected in zip(jf(t, -3.0), f(t, -3.0)):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    assert thunder.cache_misses(jf) == 2


_INV_FREQ = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
_EAGER_OPS_OF_A_LENGTH = {
    "outer (rotary embedding)": lambda x: x * torch.outer(torch.arange(x.shape[1]).float(), _INV_FREQ).cos().repeat(1, 2),
    "ger": lambda x: torch.ger(x[0, :, 0], _INV_FREQ).sum(-1) + x[0, :, 1],
    "elementwise, broadcast": lambda x: torch.hypot(x, x[:, :1]) + torch.logaddexp(x, torch.ones(8)),
    "cumulative, keeps its shape": lambda x: torch.cumprod(x, dim=1) + torch.logcumsumexp(x, 1),
    "special": lambda x: torch.special.i1e(x) * torch.special.log_softmax(x, -1),
}


@pytest.mark.parametrize("name", list(_EAGER_OPS_OF_A_LENGTH))
@pytest.mark.parametrize("cache", ["symbolic values", None])
def test_an_eager_op_keeps_a_symbolic_size(name, cache):
    # Note [Eager ops of symbolic sizes]: an op torch runs itself (torch.outer, cumprod, hypot, ...) pinned every size
    # it was given, so a program over a growing length recompiled on every call (a rotary embedding built with
    # torch.outer(torch.arange(T), inv_freq): one compile per token), under the default option too.
    fn = _EAGER_OPS_OF_A_LENGTH[name]
    jf = thunder.jit(fn) if cache is None else thunder.jit(fn, cache=cache)
    for length in range(3, 9):
        x = torch.randn(2, length, 8, requires_grad=True)
        expected = fn(x)
        (expected_grad,) = torch.autograd.grad(expected.sum(), x)
        out = jf(x)
        (grad,) = torch.autograd.grad(out.sum(), x)
        torch.testing.assert_close(out, expected)
        torch.testing.assert_close(grad, expected_grad)
    assert thunder.cache_misses(jf) == (1 if cache == "symbolic values" else 2), thunder.cache_miss_reasons(jf)


def test_an_eager_op_of_symbolic_sizes_that_do_not_broadcast_raises_as_eager():
    jf = thunder.jit(lambda a, b: torch.hypot(a, b), cache="symbolic values")
    jf(torch.randn(3), torch.randn(3))
    with pytest.raises(Exception, match="size|shape|broadcast"):
        jf(torch.randn(4), torch.randn(5))
    torch.testing.assert_close(jf(torch.randn(4), torch.randn(1)).shape, torch.Size([4]))



def test_a_traces_symbolic_sizes_print_as_their_names_not_the_traced_values():
    # The trace's comments said ``f32[2, 5]`` of an entry that runs every size: read as a constant entry.
    def f(x, y):
        return torch.cat([x, y], 1) * 2

    jf = thunder.jit(f)
    jf(torch.randn(2, 7), torch.randn(2, 1))
    x, y = torch.randn(2, 5), torch.randn(2, 1)
    torch.testing.assert_close(jf(x, y), f(x, y))
    trace = thunder.last_traces(jf)[-1]
    size = trace.args[0].shape[1].expr
    source = str(trace)
    assert f'"cpu f32[2, {size}]"' in source and f'"cpu f32[2, ({size} + 1)]"' in source, source
    assert "f32[2, 5]" not in source and "f32[2, 6]" not in source, source
