"""A catalogue of bad inputs to ``thunder.jit`` and the messages thunder gives for them.

Each entry is one mistake a user can make: a bad option, a program that needs tensor values
in Python, an unsupported op, wrong types or shapes to ops. Each test asserts the exception
type, a fragment of the message that names the problem, and where it came from: the
option's value, or the user's source line (``# bad:`` marks the line each test expects
the traceback or the message to show).

Cases where thunder should behave differently than it does today are strict xfails with
the reason, so they flip when fixed.
"""

from __future__ import annotations

import functools
import random
import traceback

import pytest
import torch

import thunder
from thunder.core.errors import (
    SharpEdgeError,
    ThunderError,
    ThunderIndexError,
    ThunderRuntimeError,
    ThunderTypeError,
    ThunderValueError,
    UnsupportedOpError,
)


def _raises(exc_type, fragment, fn, *args, where=None, **kwargs):
    """Calls ``fn`` and checks the exception: its type, a regex fragment of its message, and
    (``where``) a text the formatted exception (traceback, message and notes) must show."""
    with pytest.raises(exc_type, match=fragment) as info:
        fn(*args, **kwargs)
    if where is not None:
        shown = "".join(traceback.format_exception(info.value))
        assert where in shown, f"{where!r} not shown in:\n{shown}"
    return info.value


def _x():
    return torch.randn(3)


# ---------------------------------------------------------------- options


def test_unknown_executor_name():
    e = _raises(ThunderValueError, r"unknown executor 'nope'", thunder.jit, lambda a: a, executors=["nope"])
    assert "torch" in str(e) and "register_executor" in str(e)  # says what is available and how to add one


def test_unknown_executor_object():
    _raises(ThunderValueError, r"unknown executor 3", thunder.jit, lambda a: a, executors=[3])


def test_unknown_cache_option():
    e = _raises(ThunderValueError, r"unknown cache option 'sometimes'", thunder.jit, lambda a: a, cache="sometimes")
    assert all(name in str(e) for name in ("'no caching'", "'constant values'", "'same input'", "'symbolic values'"))


def test_unknown_sharp_edges_option():
    _raises(
        ThunderValueError, r"unknown sharp_edges option 'maybe': choose one of 'allow', 'warn', 'error'",
        thunder.jit, lambda a: a, sharp_edges="maybe",
    )  # fmt: skip


def test_jit_of_a_non_callable():
    _raises(TypeError, r"thunder.jit expects a function or torch.nn.Module, got int", thunder.jit, 3)


# ---------------------------------------------------------------- calling with the wrong arguments


def _one_arg(a):
    return a * 2


def test_too_many_arguments_is_pythons_type_error():
    _raises(TypeError, r"_one_arg\(\) takes 1 positional argument but 2 were given", thunder.jit(_one_arg), _x(), _x())


def test_missing_argument_is_pythons_type_error():
    _raises(TypeError, r"_one_arg\(\) missing 1 required positional argument: 'a'", thunder.jit(_one_arg))


def test_unexpected_keyword_is_pythons_type_error():
    _raises(TypeError, r"got an unexpected keyword argument 'b'", thunder.jit(_one_arg), _x(), b=1)


def test_number_where_a_tensor_was_traced_recompiles():
    jf = thunder.jit(_one_arg)
    x = _x()
    torch.testing.assert_close(jf(x), x * 2)
    out = jf(3.0)
    assert type(out) is float and out == 6.0
    assert thunder.cache_misses(jf) == 2
    torch.testing.assert_close(jf(x), x * 2)
    assert thunder.cache_misses(jf) == 2


def test_tensor_where_a_number_was_traced_recompiles():
    jf = thunder.jit(_one_arg)
    assert jf(2) == 4
    x = _x()
    torch.testing.assert_close(jf(x), x * 2)
    assert thunder.cache_misses(jf) == 2


# ---------------------------------------------------------------- Python needs a tensor's value


def _str_of_tensor(a):
    return str(a * 2)  # bad: str


def _fstring_of_tensor(a):
    return f"{a * 2}"  # bad: fstring


def _print_tensor(a):
    print(a)  # bad: print
    return a


def test_str_of_a_tensor_that_requires_grad():
    """Eager's text names its grad_fn, which no traced tensor has (Note [Formatting a traced tensor]); the text of
    one that does not require grad is eager's (tests/test_probe_findings8.py)."""
    x = _x().requires_grad_()
    _raises(ThunderRuntimeError, r"str\(\) of tensor t0 \(cpu f32\[3\]\) .*needs its values \(it requires grad",
            thunder.jit(_str_of_tensor), x, where="# bad: str")  # fmt: skip


def test_fstring_of_a_tensor_that_requires_grad():
    x = _x().requires_grad_()
    _raises(ThunderRuntimeError, r"of tensor t0 \(cpu f32\[3\]\) .*needs its values", thunder.jit(_fstring_of_tensor), x,
            where="# bad: fstring")  # fmt: skip


def test_print_of_a_tensor_prints_its_values(capsys):
    """Not an error: ``print`` is replayed after the computation, with the real tensor."""
    x = _x()
    thunder.jit(_print_tensor)(x)
    thunder.jit(_print_tensor)(x)
    assert capsys.readouterr().out == f"{x}\n{x}\n"


# ---------------------------------------------------------------- unsupported ops and constructs


def _unsupported(a):
    return torch.special.gammaincc(a, a)  # bad: unsupported


def _share_memory(a):
    return a.share_memory_()  # bad: shared memory


def _gammainc(a):
    return torch.special.gammainc(a, a)  # bad: gammainc


def _out_argument(a, o):
    return torch.add(a, 1, out=o)  # bad: out


def _gradient_penalty(a):
    (g,) = torch.autograd.grad((a * a).sum(), a, create_graph=True)  # bad: grad inside
    return g.pow(2).sum()


def _backward_inside(a):
    (a * a).sum().backward()  # bad: backward inside
    return a.grad


def _returns_started_generator(a):
    g = (a + i for i in range(2))
    next(g)
    return g  # (one not started yet is made again by each call: tests/test_eager_gaps.py)


def test_unsupported_torch_function():
    e = _raises(UnsupportedOpError, r"torch function torch.special.gammaincc is not supported by thunder yet",
                thunder.jit(_unsupported), _x(), where="# bad: unsupported")  # fmt: skip
    assert "test_bad_inputs.py" in str(e) and "torchsymbol" in str(e)


def test_unsupported_tensor_method():
    _raises(UnsupportedOpError, r"Tensor.share_memory_ is not supported by thunder yet \(called at .*test_bad_inputs.py:\d+",
            thunder.jit(_share_memory), _x())  # fmt: skip


def test_unsupported_function_in_a_submodule_of_torch():
    _raises(UnsupportedOpError, r"torch function torch.special.gammainc is not supported", thunder.jit(_gammainc), _x(),
            where="# bad: gammainc")  # fmt: skip


def test_out_argument_of_another_shape():
    # eager resizes it in place (warning where it had elements); a trace cannot change an input's shape
    e = _raises(UnsupportedOpError, r"ltorch.add\(\): the out tensor has shape \[2\] but the result has shape \[3\]",
                thunder.jit(_out_argument), _x(), torch.empty(2))  # fmt: skip
    assert "the returned tensor" in str(e)  # says what to do instead


def test_a_gradient_taken_inside_the_function():
    # torch's engine was handed the trace's proxies: "element 0 of tensors tuple is neither a Tensor nor a GradientEdge"
    x = torch.randn(3, requires_grad=True)
    _raises(UnsupportedOpError, r"torch.autograd.grad inside the jitted function .* is not supported.*Take the gradient "
            r"outside", thunder.jit(_gradient_penalty), x, where="# bad: grad inside")  # fmt: skip
    _raises(UnsupportedOpError, r"Tensor.backward has no meaning in a trace.*take the gradient outside",
            thunder.jit(_backward_inside), x, where="# bad: backward inside")  # fmt: skip


def test_returning_a_started_generator():
    _raises(ThunderRuntimeError, r"the function returned a generator .* that has already run", thunder.jit(_returns_started_generator), _x())


P_ADD = functools.partial(torch.add, alpha=2)


def _partial_with_keywords(a):
    return P_ADD(a, 1)  # bad: partial


def test_partial_with_keywords_works_or_says_partial():
    x = _x()
    try:
        out = thunder.jit(_partial_with_keywords)(x)
    except ThunderError as e:
        assert "partial" in str(e).splitlines()[0], str(e)  # the first line: the source line below names P_ADD
    else:
        torch.testing.assert_close(out, torch.add(x, 1, alpha=2))


# ---------------------------------------------------------------- wrong types to ops


def _add_str(a):
    return torch.add(a, "s")  # bad: add str


def _and_float(a):
    return a & 1  # bad: and float


def _neg_bool(a):
    return -a  # bad: neg bool


def _neg_bool_unused(a):
    _ = -(a > 0)  # bad: unused neg bool
    return a


def _mean_long(a):
    return a.mean()  # bad: mean long


def _linear_dtypes(a, w):
    return torch.nn.functional.linear(a, w)  # bad: linear dtypes


def test_non_tensor_argument_to_an_op():
    _raises(ThunderTypeError, r"ltorch.add: expected b to be a tensor or a number, got str", thunder.jit(_add_str), _x(),
            where="# bad: add str")  # fmt: skip


def test_bitwise_op_on_floats():
    _raises(ThunderTypeError, r"ltorch.bitwise_and: \"bitwise_and\" is not implemented for a of dtype torch.float32",
            thunder.jit(_and_float), _x(), where="# bad: and float")  # fmt: skip


def test_negation_of_a_bool_tensor():
    _raises(ThunderTypeError, r"ltorch.neg: negation, the `-` operator, on a bool tensor is not supported",
            thunder.jit(_neg_bool), _x() > 0, where="# bad: neg bool")  # fmt: skip


def test_negation_of_a_bool_tensor_whose_result_is_unused():
    _raises(TypeError, r"negation, the `-` operator, on a bool tensor", thunder.jit(_neg_bool_unused), _x(),
            where="# bad: unused neg bool")  # fmt: skip


def test_mean_of_integers():
    e = _raises(ThunderTypeError, r"ltorch.mean: could not infer output dtype.*Got: torch.int64", thunder.jit(_mean_long),
                torch.arange(3), where="# bad: mean long")  # fmt: skip
    assert ".float()" in str(e)


def test_matrix_product_of_mixed_dtypes():
    _raises(ThunderTypeError, r"ltorch.linear: input has dtype torch.float32 and weight has dtype torch.float64",
            thunder.jit(_linear_dtypes), torch.randn(2, 3), torch.randn(4, 3, dtype=torch.float64),
            where="# bad: linear dtypes")  # fmt: skip


# ---------------------------------------------------------------- wrong shapes, dims, devices


def _matmul(a, b):
    return a @ b  # bad: matmul


def _add(a, b):
    return a + b  # bad: add


def _reshape(a):
    return a.reshape(7, -1)  # bad: reshape


def _cat(a):
    return torch.cat([a, torch.ones(2, 2)])  # bad: cat


def _sum_dim(a):
    return a.sum(3)  # bad: sum dim


def _index(a):
    return a[5]  # bad: index


def test_matmul_inner_dimensions():
    _raises(ThunderValueError, r"ltorch.matmul: a has shape \(2, 3\) and b has shape \(4, 2\): inner dimensions 3 and 4 differ",
            thunder.jit(_matmul), torch.randn(2, 3), torch.randn(4, 2), where="# bad: matmul")  # fmt: skip


def test_broadcast_mismatch():
    _raises(RuntimeError, r"ltorch.add: the size of tensor a \(3\) must match the size of tensor b \(4\)",
            thunder.jit(_add), torch.randn(3), torch.randn(4), where="# bad: add")  # fmt: skip


def test_device_mismatch():
    e = _raises(ThunderValueError, r"expected all tensors on the same device, but a is on cpu and b is on meta",
                thunder.jit(_add), torch.randn(2), torch.randn(2, device="meta"), where="# bad: add")  # fmt: skip
    assert ".to(device)" in str(e)


def test_invalid_reshape():
    _raises(ThunderValueError, r"ltorch.reshape: shape '\[7, -1\]' is invalid for input of size 3", thunder.jit(_reshape),
            _x(), where="# bad: reshape")  # fmt: skip


def test_cat_of_different_ranks():
    _raises(ThunderValueError, r"ltorch.cat: Tensors must have same number of dimensions: got 1 and 2", thunder.jit(_cat),
            _x(), where="# bad: cat")  # fmt: skip


def test_dim_out_of_range():
    _raises(ThunderIndexError, r"ltorch.sum: Dimension out of range \(expected to be in range of \[-1, 0\], but got 3\)",
            thunder.jit(_sum_dim), _x(), where="# bad: sum dim")  # fmt: skip


def test_index_out_of_range():
    _raises(ThunderIndexError, r"ltorch.getitem: index 5 is out of bounds for dimension 0 with size 3", thunder.jit(_index),
            _x(), where="# bad: index")  # fmt: skip


# ---------------------------------------------------------------- failures while the computation runs


def _view(a):
    return a.view(-1)  # bad: view


def _leaf_inplace(a):
    return a.add_(1)  # bad: leaf inplace


def _int_div_zero(a):
    return a // 0  # bad: int div zero


def test_view_of_a_non_contiguous_tensor_names_op_and_line():
    e = _raises(RuntimeError, r"view size is not compatible with input tensor's size and stride", thunder.jit(_view),
                torch.randn(3, 2).t(), where="# bad: view")  # fmt: skip
    assert any("torch.Tensor.view" in n and "test_bad_inputs.py" in n for n in getattr(e, "__notes__", [])), e


def test_inplace_on_a_leaf_that_requires_grad_names_op_and_line():
    e = _raises(RuntimeError, r"a leaf Variable that requires grad is being used in an in-place operation",
                thunder.jit(_leaf_inplace), torch.randn(3, requires_grad=True), where="# bad: leaf inplace")  # fmt: skip
    shown = " ".join(getattr(e, "__notes__", [])) + str(e)
    assert "add_" in shown and "test_bad_inputs.py" in shown, shown


def _int_div_zero_unused(a):
    _ = a // 0  # bad: unused int div zero
    return a


def test_integer_division_by_zero_whose_result_is_unused():
    _raises(RuntimeError, r"ZeroDivisionError", thunder.jit(_int_div_zero_unused), torch.arange(3))


def _view_of_expanded_unused(a):
    _ = a.view(-1)  # bad: unused view of an expanded tensor
    return a


def test_view_that_eager_rejects_at_run_time_whose_result_is_unused():
    _raises(RuntimeError, r"view size is not compatible", thunder.jit(_view_of_expanded_unused), torch.ones(3, 1).expand(3, 4))


def test_integer_division_by_zero():
    _raises(
        RuntimeError, r"ZeroDivisionError", thunder.jit(_int_div_zero), torch.arange(3), where="# bad: int div zero"
    )


# ---------------------------------------------------------------- the user's own errors and sharp edges


def _raises_value_error(a):
    raise ValueError("the user's own message")  # bad: user raise


def _undefined_global(a):
    return a * NOT_DEFINED_ANYWHERE  # noqa: F821  # bad: undefined


MUTABLE_SCALE = 2.0


def _reads_global(a):
    return a * MUTABLE_SCALE  # bad: global


def _calls_random(a):
    return a * random.random()  # bad: random


def test_users_exception_propagates_as_itself():
    _raises(ValueError, r"^the user's own message$", thunder.jit(_raises_value_error), _x(), where="# bad: user raise")


def test_undefined_global_is_pythons_name_error():
    _raises(NameError, r"name 'NOT_DEFINED_ANYWHERE' is not defined", thunder.jit(_undefined_global), _x(),
            where="# bad: undefined")  # fmt: skip


def test_sharp_edge_error_on_reading_a_global():
    e = _raises(SharpEdgeError, r"Reading the global 'MUTABLE_SCALE' of module 'tests.test_bad_inputs'",
                thunder.jit(_reads_global, sharp_edges="error"), _x())  # fmt: skip
    assert "test_bad_inputs.py" in str(e) and "sharp_edges='allow'" in str(e)


def test_sharp_edge_error_on_calling_random():
    e = _raises(SharpEdgeError, r"Calling random.random\(\)", thunder.jit(_calls_random, sharp_edges="error"), _x())
    assert "test_bad_inputs.py" in str(e)


# ---------------------------------------------------------------- inputs that must simply work


def _times(a, n):
    return a * n, n * 2


def test_nan_number_argument_works():
    x = _x()
    out, n2 = thunder.jit(_times)(x, float("nan"))
    assert torch.isnan(out).all() and n2 != n2


_inner = thunder.jit(lambda t: t * 2 + 1)


def _calls_jitted(a):
    return _inner(a)


def test_jitted_function_calling_a_jitted_function():
    x = _x()
    torch.testing.assert_close(thunder.jit(_calls_jitted)(x), x * 2 + 1)


class _CheckpointedHookedLinear(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.lin.register_full_backward_hook(lambda module, grad_input, grad_output: None)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(self.lin, x, use_reentrant=False)  # bad: hooked and checkpointed


def test_a_module_backward_hook_in_a_checkpointed_region_names_the_module():
    # the traced call of a module with a backward hook failed on ``Tensor.grad_fn``, saying to add a symbol for it;
    # module backward hooks run as eager's now (tests/test_training_probes2.py), but in a recomputed region
    _raises(UnsupportedOpError, r"module Linear 'lin' has a backward hook .*checkpointed region .*hook tensors",
            thunder.jit(_CheckpointedHookedLinear()), _x(), where="# bad: hooked and checkpointed")  # fmt: skip


def _vmapped(a):
    return torch.vmap(torch.cumsum, in_dims=(0, None))(a, 0)  # bad: vmap inside


def test_function_transforms_inside_the_function():
    # torch's functorch machinery failed on traced values with a TypeError from its C code; vmap is traced now
    # (tests/test_vmap_masks.py), and what it cannot batch is refused
    _raises(UnsupportedOpError, r"torch.vmap of .* inside the jitted function .* is not supported: cumsum .*cannot be batched",
            thunder.jit(_vmapped), _x(), where="# bad: vmap inside")  # fmt: skip
    for f in (lambda a: torch.func.grad(lambda y: (y**3).sum())(a), lambda a: torch.cond(a.sum() > 0, torch.sin, torch.cos, (a,))):
        with pytest.raises(UnsupportedOpError, match="inside the jitted function"):
            thunder.jit(f)(_x())


def test_a_torchscript_module_inside_the_function():
    scripted = torch.jit.script(torch.nn.Linear(3, 2))
    _raises(UnsupportedOpError, r"a TorchScript module \(RecursiveScriptModule Linear\) is called inside the jitted "
            r"function.*Pass the original nn.Module", thunder.jit(lambda a: scripted(a)), _x())  # fmt: skip
