"""Inside a jitted function a tensor is a tensor: every way Python asks what a value is gives eager's answer.

Each introspection form is one parametrized case, swept over tensors, parameters, numbers and
containers, under the default cache and under ``cache="symbolic values"`` (where numbers are traced
as ``SymInt``/``SymFloat``). Each case runs ``f`` eagerly and under ``thunder.jit`` and compares.
"""

import functools
import numbers

import pytest
import torch

import thunder
from thunder.core import introspection
from thunder.core.errors import ThunderTypeError, UnsupportedOpError
from thunder.core.proxies import TensorProxy


class _MyTensor(torch.Tensor):
    pass


class _PlainResultTensor(torch.Tensor):
    __torch_function__ = torch._C._disabled_torch_function_impl


def _values():
    return {
        "tensor": lambda: torch.ones(3),
        "parameter": lambda: torch.nn.Parameter(torch.ones(3)),
        "int": lambda: 3,
        "float": lambda: 2.5,
        "bool": lambda: True,
        "str": lambda: "abc",
        "none": lambda: None,
        "list_of_tensors": lambda: [torch.ones(2), torch.zeros(2)],
        "tuple_mixed": lambda: (torch.ones(2), 2, 1.5),
        "dict_of_tensors": lambda: {"a": torch.ones(2), "b": 3},
    }


def _elements(v):
    if isinstance(v, dict):
        return list(v.values())
    if isinstance(v, (list, tuple)):
        return list(v)
    return [v]


FORMS = {
    "isinstance_Tensor": lambda v: isinstance(v, torch.Tensor),
    "isinstance_Parameter": lambda v: isinstance(v, torch.nn.Parameter),
    "isinstance_tuple_of_types": lambda v: isinstance(v, (torch.Tensor, int)),
    "isinstance_union": lambda v: isinstance(v, torch.Tensor | float),
    "isinstance_int": lambda v: isinstance(v, int),
    "isinstance_float": lambda v: isinstance(v, float),
    "isinstance_bool": lambda v: isinstance(v, bool),
    "isinstance_Number": lambda v: isinstance(v, numbers.Number),
    "isinstance_Integral": lambda v: isinstance(v, numbers.Integral),
    "isinstance_list_tuple": lambda v: isinstance(v, (list, tuple)),
    "isinstance_dict": lambda v: isinstance(v, dict),
    "issubclass_type_Tensor": lambda v: issubclass(type(v), torch.Tensor),
    "issubclass_type_Parameter": lambda v: issubclass(type(v), torch.nn.Parameter),
    "issubclass_type_int": lambda v: issubclass(type(v), int),
    "type_is_Tensor": lambda v: type(v) is torch.Tensor,
    "type_is_Parameter": lambda v: type(v) is torch.nn.Parameter,
    "type_is_int": lambda v: type(v) is int,
    "type_is_float": lambda v: type(v) is float,
    "type_name": lambda v: type(v).__name__,
    "type_qualname_module": lambda v: (type(v).__module__, type(v).__qualname__),
    "type_in_tuple": lambda v: type(v) in (int, float, torch.Tensor),
    "type_mro_length": lambda v: len(type(v).__mro__),
    "dunder_class": lambda v: v.__class__,
    "dunder_class_is_Tensor": lambda v: v.__class__ is torch.Tensor,
    "getattr_dunder_class": lambda v: getattr(v, "__class__"),  # noqa: B009 (the builtin is what is tested)
    "torch_is_tensor": lambda v: torch.is_tensor(v),
    "is_tensor_like": lambda v: torch.overrides.is_tensor_like(v),
    "hasattr_shape": lambda v: hasattr(v, "shape"),
    "hasattr_dtype": lambda v: hasattr(v, "dtype"),
    "hasattr_grad": lambda v: hasattr(v, "grad"),
    "hasattr_torch_function": lambda v: hasattr(v, "__torch_function__"),
    "hasattr_real": lambda v: hasattr(v, "real"),
    "hasattr_numerator": lambda v: hasattr(v, "numerator"),
    "hasattr_name": lambda v: hasattr(v, "name"),  # TensorProxy has .name; a tensor does not
    "hasattr_value": lambda v: hasattr(v, "value"),  # SymInt has .value; an int does not
    "hasattr_expr": lambda v: hasattr(v, "expr"),
    "hasattr_missing": lambda v: hasattr(v, "no_such_attribute"),
    "getattr_default_name": lambda v: getattr(v, "name", "no name"),
    "getattr_default_ndim": lambda v: getattr(v, "ndim", -1),
    "getattr_dtype": lambda v: getattr(v, "dtype", None),
    "callable": lambda v: callable(v),
    "elements_isinstance_Tensor": lambda v: [isinstance(e, torch.Tensor) for e in _elements(v)],
    "elements_type": lambda v: [type(e) for e in _elements(v)],
    "elements_is_tensor": lambda v: [torch.is_tensor(e) for e in _elements(v)],
    "elements_class": lambda v: [e.__class__ for e in _elements(v)],
}


def _cases():
    for form in FORMS:
        for value in _values():
            yield pytest.param(form, value, id=f"{form}-{value}")


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
@pytest.mark.parametrize("form,value", list(_cases()))
def test_introspection_matches_eager(form, value, cache):
    pred = FORMS[form]

    def f(x, v):
        return x + 1, pred(v)

    v = _values()[value]()
    x = torch.ones(2)
    expected = f(x, v)
    actual = thunder.jit(f, cache=cache)(x, v)
    torch.testing.assert_close(actual[0], expected[0])
    assert actual[1] == expected[1]


def test_isinstance_branch_from_the_issue():
    f = lambda m: m * 2 if isinstance(m, torch.Tensor) else m - 1  # noqa: E731
    x = torch.ones(3)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


@pytest.mark.parametrize(
    "form",
    ["torch_is_tensor", "type_is", "dunder_class", "is_tensor_like", "isinstance"],
)
def test_branch_on_introspection_of_computed_tensor(form):
    # A tensor computed inside the function (no input provenance) answers like an input does.
    preds = {
        "torch_is_tensor": torch.is_tensor,
        "type_is": lambda t: type(t) is torch.Tensor,
        "dunder_class": lambda t: t.__class__ is torch.Tensor,
        "is_tensor_like": torch.overrides.is_tensor_like,
        "isinstance": lambda t: isinstance(t, torch.Tensor),
    }
    pred = preds[form]

    def f(x):
        y = x.sin()
        return y * 2 if pred(y) else y - 1

    x = torch.randn(3)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))


def test_parameter_of_a_module_is_a_parameter():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(3))
            self.register_buffer("b", torch.ones(3))

        def forward(self, x):
            out = x
            out = out + (1 if isinstance(self.w, torch.nn.Parameter) else 10)
            out = out + (100 if isinstance(self.b, torch.nn.Parameter) else 1000)
            out = out + (10000 if type(self.w) is torch.nn.Parameter else 0)
            out = out + (0 if type(self.b) is torch.nn.Parameter else 100000)
            return out * self.w + self.b

    m = M()
    x = torch.randn(3)
    torch.testing.assert_close(thunder.jit(m)(x), m(x))


def test_tensor_subclass_without_torch_function_keeps_its_type():
    def f(x):
        y = x + 1
        return y, type(x), isinstance(x, _PlainResultTensor), x.__class__, type(y), isinstance(y, _PlainResultTensor)

    x = torch.ones(2).as_subclass(_PlainResultTensor)
    out, ref = thunder.jit(f)(x), f(x)
    assert out[1:] == ref[1:] == (_PlainResultTensor, True, _PlainResultTensor, torch.Tensor, False)


def test_tensor_subclass_with_torch_function_fails_clearly():
    def f(x):
        return x + 1, type(x + 1)

    x = torch.ones(2).as_subclass(_MyTensor)
    assert f(x)[1] is _MyTensor
    with pytest.raises(ThunderTypeError, match="_MyTensor, a torch.Tensor subclass with __torch_function__ enabled"):
        thunder.jit(f)(x)


def test_result_of_an_op_on_a_parameter_is_a_tensor():
    def f(p):
        y = p * 2
        return y, type(y) is torch.Tensor, isinstance(y, torch.nn.Parameter)

    p = torch.nn.Parameter(torch.ones(3))
    out, ref = thunder.jit(f)(p), f(p)
    assert out[1:] == ref[1:]


def test_type_three_argument_form_and_metaclasses():
    class Meta(type):
        def __new__(mcls, name, bases, ns):
            ns["tag"] = name.lower()
            return super().__new__(mcls, name, bases, ns)

    class Base(metaclass=Meta):
        pass

    def f(x):
        C = type("Made", (Base,), {"k": 2})
        return x * C.k, C.tag, type(C) is Meta, type(Base) is Meta, type(type) is type, type(f) is type(g)

    def g():
        pass

    x = torch.ones(2)
    out, ref = thunder.jit(f)(x), f(x)
    torch.testing.assert_close(out[0], ref[0])
    assert out[1:] == ref[1:]


def test_type_of_ordinary_values_is_unchanged():
    class A:
        pass

    def f(x):
        return x + 1, [type(v) for v in (1, 1.5, True, "s", None, [1], (1,), {1: 2}, A(), A, torch.float32)]

    x = torch.ones(2)
    assert thunder.jit(f)(x)[1] == f(x)[1]


def test_isinstance_proxy_classes_still_answer_for_thunder():
    # thunder's own checks (isinstance(x, TensorProxy)) are not changed by the lookaside.
    assert introspection.lookaside(isinstance)(
        TensorProxy(shape=(2,), dtype=torch.float32, device=torch.device("cpu")), TensorProxy
    )
    assert not isinstance(TensorProxy(shape=(2,), dtype=torch.float32, device=torch.device("cpu")), torch.Tensor)


def test_hasattr_of_unimplemented_tensor_attribute_is_true_and_using_it_fails_clearly():
    missing = next(n for n in ("share_memory_", "apply_", "pin_memory") if not hasattr(TensorProxy, n))

    def f(x):
        return x + 1, hasattr(x, missing)

    x = torch.ones(2)
    assert thunder.jit(f)(x)[1] is True

    def g(x):
        return getattr(x, missing)

    with pytest.raises(UnsupportedOpError, match=missing):
        thunder.jit(g)(x)


# --- unbound Tensor methods ---------------------------------------------------------------------

UNBOUND = {
    "radd": lambda x, y: torch.Tensor.__radd__(x, 1.0),
    "rmul": lambda x, y: torch.Tensor.__rmul__(x, 2.0),
    "rsub": lambda x, y: torch.Tensor.__rsub__(x, 2.0),
    "rtruediv": lambda x, y: torch.Tensor.__rtruediv__(x, 2.0),
    "rand": lambda x, y: torch.Tensor.__rand__(x.to(torch.int64), 6),
    "ror": lambda x, y: torch.Tensor.__ror__(x.to(torch.int64), 6),
    "rxor": lambda x, y: torch.Tensor.__rxor__(x.to(torch.int64), 6),
    "add": lambda x, y: torch.Tensor.add(x, y),
    "add_alpha": lambda x, y: torch.Tensor.add(x, y, alpha=2),
    "mul": lambda x, y: torch.Tensor.mul(x, y),
    "dunder_add": lambda x, y: torch.Tensor.__add__(x, y),
    "sum": lambda x, y: torch.Tensor.sum(x),
    "size": lambda x, y: x * torch.Tensor.size(x, 0),
    "dim": lambda x, y: x * torch.Tensor.dim(x),
    "numel": lambda x, y: x * torch.Tensor.numel(x),
    "is_floating_point": lambda x, y: x * (2 if torch.Tensor.is_floating_point(x) else 3),
    "view": lambda x, y: torch.Tensor.view(x, -1),
    "getitem": lambda x, y: torch.Tensor.__getitem__(x, 0),
}


@pytest.mark.parametrize("name", list(UNBOUND))
def test_unbound_tensor_method_is_traced_like_the_bound_one(name):
    fn = UNBOUND[name]
    x = torch.tensor([1.0, 2.0, 3.0])
    y = torch.tensor([4.0, 5.0, 6.0])
    torch.testing.assert_close(thunder.jit(fn)(x, y), fn(x, y))


def test_multihead_attention_runs():
    torch.manual_seed(0)
    m = torch.nn.MultiheadAttention(8, 2)
    x = torch.randn(4, 1, 8)
    out, ref = thunder.jit(m)(x, x, x), m(x, x, x)
    torch.testing.assert_close(out[0], ref[0])
    torch.testing.assert_close(out[1], ref[1])


@pytest.mark.parametrize(
    "name", ["__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rand__", "__ror__", "__rxor__"]
)
def test_reflected_unbound_methods_are_in_the_symbol_table(name):
    # thunder.examine (and natively run code reaching __torch_function__) use the table.
    from thunder.examine import examine

    fn = getattr(torch.Tensor, name)
    assert fn in thunder.torch.torch_to_thunder_map
    x = torch.tensor([1, 2]) if name in ("__rand__", "__ror__", "__rxor__") else torch.tensor([1.0, 2.0])
    report = examine(lambda x: fn(x, 3), x, show=False)
    assert report["unsupported"] == {} and report["jit_error"] is None, report


@functools.singledispatch
def _kind(v):
    return "other"


@_kind.register
def _(v: torch.Tensor):
    return "tensor"


@_kind.register
def _(v: int):
    return "int"


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_singledispatch_dispatches_on_the_eager_class(cache):
    def f(x, n):
        return x + 1, _kind(x), _kind(n), _kind(x.sin()), _kind("s")

    x = torch.ones(2)
    expected = f(x, 3)  # also warms singledispatch's cache (writing it while tracing is a sharp edge)
    assert thunder.jit(f, cache=cache)(x, 3)[1:] == expected[1:]


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_a_parameter_after_a_tensor_gets_its_own_answers(cache):
    def f(x):
        return x * 2 if isinstance(x, torch.nn.Parameter) else x - 1

    jf = thunder.jit(f, cache=cache)
    for x in (torch.ones(3), torch.nn.Parameter(torch.ones(3)), torch.ones(3)):
        torch.testing.assert_close(jf(x), f(x))


def test_match_class_pattern_sees_a_tensor():
    def f(t):
        match t:
            case torch.Tensor(shape=(n,)):
                return t * n
            case _:
                return t - 1

    x = torch.ones(3)
    torch.testing.assert_close(thunder.jit(f)(x), f(x))
