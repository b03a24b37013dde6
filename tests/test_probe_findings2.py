"""What a second round of probing with programs people write found (the first round's are in
tests/test_probe_findings.py), each kept as a regression test against eager."""

from __future__ import annotations

import contextlib
import io
import sys
import warnings

import pytest
import torch

import thunder
from thunder.core.errors import ThunderRuntimeError


def _leaf_by_assignment(x):
    y = torch.zeros(3)
    y.requires_grad = True  # as y.requires_grad_(), the way people write it too
    return x * y, y


def test_assigning_requires_grad_is_as_requires_grad_():
    # ``y.requires_grad = True`` was set on the traced value only: the results did not require grad, so a backward
    # through them failed or (mixed with other leaves) silently gave no gradient for ``y``.
    jitted = thunder.jit(_leaf_by_assignment)
    for _ in range(2):
        x = torch.randn(3)
        (expected, expected_y), (actual, actual_y) = _leaf_by_assignment(x), jitted(x)
        assert actual.requires_grad and actual_y.requires_grad and actual_y.is_leaf
        torch.testing.assert_close(actual, expected)
        actual.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(actual_y.grad, expected_y.grad)


def test_assigning_requires_grad_gives_eager_s_errors():
    def not_a_bool(x):
        y = x * 1
        y.requires_grad = 1
        return y

    def not_a_leaf(x):
        y = x * 1
        y.requires_grad = False
        return y

    def an_input(x):
        x.requires_grad = True
        return x * 2

    with pytest.raises(RuntimeError, match="requires_grad must be a bool"):
        thunder.jit(not_a_bool)(torch.randn(3))
    with pytest.raises(RuntimeError, match="you can only change requires_grad flags of leaf variables"):
        thunder.jit(not_a_leaf)(torch.randn(3, requires_grad=True))
    with pytest.raises(ThunderRuntimeError, match="changes a tensor the jitted function was given"):
        thunder.jit(an_input)(torch.randn(3))


def _densified_or_doubled(x):
    return x.to_dense() * 3 if x.is_sparse else x * 2


def test_a_sparse_or_nested_input_is_a_clear_error():
    # A sparse input was traced as a dense tensor: ``x.is_sparse`` was False (the other branch ran and returned a sparse
    # tensor with other values), and a cached entry traced with a dense tensor took a sparse one of the same shape.
    dense = torch.tensor([[0.0, 1.0], [2.0, 0.0]])
    jitted = thunder.jit(_densified_or_doubled)
    torch.testing.assert_close(jitted(dense), _densified_or_doubled(dense))
    for x in (dense.to_sparse(), dense.to_sparse_csr()):
        with pytest.raises(thunder.core.errors.ThunderValueError, match=r"x is a tensor of layout torch.sparse_\w+, "):
            jitted(x)  # the cached entry does not take it
        with pytest.raises(thunder.core.errors.ThunderValueError, match="which thunder.jit does not trace"):
            thunder.jit(_densified_or_doubled)(x)
    nested = torch.nested.nested_tensor([torch.randn(2), torch.randn(3)])
    with pytest.raises(thunder.core.errors.ThunderValueError, match="x is a nested tensor"):
        thunder.jit(_densified_or_doubled)(nested)
    quantized = torch.quantize_per_tensor(torch.randn(4), 0.1, 0, torch.qint8)
    with pytest.raises(thunder.core.errors.ThunderValueError, match=r"x is a quantized tensor \(torch.qint8\)"):
        thunder.jit(lambda x: x.is_quantized)(quantized)  # it was False


def _sin_poly(x, w):
    return (x.sin() * 2 + x * x).sum(0) * w


def test_forward_mode_ad_through_a_torchcompile_region_carries_tangents():
    # A region compiled by Inductor dropped the dual tensors' tangents: the result's tangent was None.
    import torch.autograd.forward_ad as fwAD

    jitted = thunder.jit(_sin_poly, executors=["torchcompile"])
    for _ in range(2):  # the first call compiles the region, the second runs the compiled graph
        with fwAD.dual_level():
            x = fwAD.make_dual(torch.ones(2, 3), torch.full((2, 3), 2.0))
            expected, actual = fwAD.unpack_dual(_sin_poly(x, torch.ones(3))), fwAD.unpack_dual(jitted(x, torch.ones(3)))
            torch.testing.assert_close(actual.primal, expected.primal)
            torch.testing.assert_close(actual.tangent, expected.tangent)
        torch.testing.assert_close(jitted(torch.ones(2, 3), torch.ones(3)), _sin_poly(torch.ones(2, 3), torch.ones(3)))


def _weighted_sum(x, y):
    return ((x.sin() * y + 1) * x).sum()


@pytest.mark.parametrize("executors", [None, ["torchcompile"]], ids=["default", "torchcompile"])
def test_vmap_of_a_jitted_function_is_eager_s_on_every_call(executors):
    # The second call under vmap compiled the fused prologue, whose tensor check called requires_grad_() on an example
    # tensor: torch refuses it under a functorch transform. A region compiled by Inductor could not read functorch's
    # wrappers ("Cannot access data pointer of Tensor that doesn't have storage").
    jitted = thunder.jit(_weighted_sum, executors=executors)
    jitted(torch.randn(3), torch.randn(3))  # an entry made outside vmap serves the calls under it too
    for _ in range(3):
        x, y = torch.randn(4, 3), torch.randn(3)
        expected = torch.vmap(_weighted_sum, in_dims=(0, None))(x, y)
        torch.testing.assert_close(torch.vmap(jitted, in_dims=(0, None))(x, y), expected)


_W = torch.randn(3, requires_grad=True)


def _grad_on_inside(x):
    with torch.enable_grad():
        return x * _W


@contextlib.contextmanager
def _grad_on_in_inference_mode():
    with torch.inference_mode(), torch.enable_grad():
        yield


@pytest.mark.parametrize("fn", [_grad_on_inside, lambda x: x * _W], ids=["enable_grad inside", "plain"])
def test_enable_grad_inside_inference_mode_records_no_autograd_as_in_eager(fn):
    # ``enable_grad()`` turns grad mode on even in inference mode, where eager's results still require no grad; the
    # trace made them require grad (a backward through them reached _W). A trace made outside inference mode (no_grad
    # at the call) was reused inside it, and the other way round; and one made with grad on outside inference mode
    # was reused inside ``inference_mode(): enable_grad():`` around the call (a clear error, eager runs).
    jitted = thunder.jit(fn)
    modes = [torch.inference_mode, torch.no_grad, torch.inference_mode, contextlib.nullcontext]
    if fn is not _grad_on_inside:
        modes = [_grad_on_in_inference_mode, contextlib.nullcontext, torch.no_grad, _grad_on_in_inference_mode]
    for mode in modes:
        x = torch.randn(3)
        with mode():
            expected, actual = fn(x), jitted(x)
        assert actual.requires_grad is expected.requires_grad, mode
        torch.testing.assert_close(actual.detach(), expected.detach())


def _saves_for_backward_and_reads_requires_grad(x):
    y = torch.nn.functional.linear(x, _W.view(1, 3)).relu()
    return y, y.requires_grad


def test_trace_made_with_grad_on_is_not_reused_with_grad_on_inside_inference_mode():
    # a trace made with grad on outside inference mode was reused inside ``inference_mode(): enable_grad():``: it
    # answered ``requires_grad`` True and saved inference tensors for a backward (a RuntimeError); eager records no
    # autograd there. The prologue checks inference mode too when the trace was made with grad on.
    jitted = thunder.jit(_saves_for_backward_and_reads_requires_grad)
    jitted(torch.randn(3))
    with _grad_on_in_inference_mode():
        x = torch.randn(3)
        (expected, expected_flag), (actual, actual_flag) = _saves_for_backward_and_reads_requires_grad(x), jitted(x)
    assert actual_flag is expected_flag is False
    assert actual.requires_grad is expected.requires_grad and actual.is_inference() is expected.is_inference()
    torch.testing.assert_close(actual, expected)


class _CheckpointedBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear, self.norm = torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)

    def forward(self, x):
        return torch.utils.checkpoint.checkpoint(lambda t: self.norm(self.linear(t)).relu(), x, use_reentrant=False)


def test_buffers_updated_inside_a_checkpoint_region_are_updated_as_in_eager():
    # eager's checkpoint reruns the region's forward in the backward, so a BatchNorm inside updates its running
    # statistics twice a step; the backward recomputed only the region's pure ops (more in tests/test_checkpoint.py).
    import copy

    torch.manual_seed(0)
    model = _CheckpointedBatchNorm()
    reference, jitted = copy.deepcopy(model), thunder.jit(model)
    x = torch.randn(4, 3, requires_grad=True)
    reference(x).sum().backward()
    jitted(x).sum().backward()
    torch.testing.assert_close(dict(model.named_buffers()), dict(reference.named_buffers()))


# Globals reached through ``globals()`` and through ``eval``/``exec`` of a string: read and written as the
# function's own globals are (module-level names so that ``globals()`` is this module's namespace).
PROBE_SCALE = 1.0
PROBE_COUNT = 0


def _scaled_through_globals(x):
    return x * globals()["PROBE_SCALE"], globals().get("PROBE_MISSING", 0)


def _counted_through_globals(x):
    globals()["PROBE_COUNT"] = globals()["PROBE_COUNT"] + 1
    return x * PROBE_COUNT


def _scaled_through_eval(x):
    return eval("x * PROBE_SCALE")


def _counted_through_exec(x):
    exec("global PROBE_COUNT\nPROBE_COUNT += 1")
    return x * 1


def _reset_globals(scale=1.0, count=0):
    global PROBE_SCALE, PROBE_COUNT
    PROBE_SCALE, PROBE_COUNT = scale, count


@pytest.mark.parametrize("fn", [_scaled_through_globals, _scaled_through_eval])
def test_globals_read_through_globals_or_eval_are_checked(fn):
    # ``globals()["PROBE_SCALE"]`` and ``eval("x * PROBE_SCALE")`` were read once, while tracing: a cached call
    # kept multiplying by the old value after the global changed.
    jitted = thunder.jit(fn)
    try:
        for scale in (1.0, 1.0, 3.0, 5.0):
            _reset_globals(scale=scale)
            torch.testing.assert_close(jitted(torch.ones(2)), fn(torch.ones(2)))
    finally:
        _reset_globals()


@pytest.mark.parametrize("fn", [_counted_through_globals, _counted_through_exec])
def test_globals_written_through_globals_or_exec_are_replayed(fn):
    # ``globals()["PROBE_COUNT"] = ...`` was made once, while tracing, and never by the cached calls (the counter
    # stopped at 1 and the result with it); ``exec("global ...")`` ran natively, unseen, the same way.
    jitted = thunder.jit(fn)
    try:
        for start in (0, 0, 7):
            _reset_globals(count=start)
            expected = [fn(torch.ones(1)) for _ in range(3)]
            expected_count = PROBE_COUNT
            _reset_globals(count=start)
            actual = [jitted(torch.ones(1)) for _ in range(3)]
            assert PROBE_COUNT == expected_count
            for a, e in zip(actual, expected):
                torch.testing.assert_close(a, e)
    finally:
        _reset_globals()


def _updated_through_globals(x):
    globals().update(PROBE_COUNT=PROBE_COUNT + 1)
    return x


def test_globals_update_is_a_clear_error():
    # ``globals().update(...)`` was made once, while tracing: a clear error now, naming the way that is replayed
    with pytest.raises(ThunderRuntimeError, match=r"globals\(\)\[name\] = value"):
        thunder.jit(_updated_through_globals)(torch.ones(1))
    _reset_globals()


class _Scaled:
    """An object from outside with a property over a private attribute, as config and state objects have."""

    def __init__(self):
        self._v = 1.0

    @property
    def v(self):
        return self._v

    @v.setter
    def v(self, value):
        self._v = value * 2

    @v.deleter
    def v(self):
        self._v = 0.0


_SCALED = _Scaled()


def _read_property_after_changing_what_it_reads(x):
    before = _SCALED.v
    _SCALED._v = _SCALED._v + 1
    return x * before, x * _SCALED.v


def _property_setter(x):
    _SCALED.v = _SCALED.v + 1
    return x * _SCALED.v


def _property_deleter(x):
    y = x * _SCALED.v
    del _SCALED.v
    return y, x * _SCALED.v


def _property_set_by_setattr(x):
    setattr(_SCALED, "v", _SCALED.v + 1)  # noqa: B010 (the builtin is what is tested)
    object.__setattr__(_SCALED, "v", _SCALED.v + 1)
    return x * _SCALED.v


@pytest.mark.parametrize(
    "fn", [_read_property_after_changing_what_it_reads, _property_setter, _property_deleter, _property_set_by_setattr]
)
def test_properties_of_outside_objects_see_the_program_s_writes(fn):
    # A property read was kept as first read, so ``obj.v`` after ``obj._v = ...`` gave the old value; a property
    # setter ran natively, so its store to ``_v`` was unseen: the result used the old value on every call (the
    # replayed setter still left ``_v`` right, so only the results were wrong).
    jitted = thunder.jit(fn)
    for start in (1.0, 1.0, 3.0):
        _SCALED._v = start
        expected = [fn(torch.ones(1)) for _ in range(2)]
        expected_v = _SCALED._v
        _SCALED._v = start
        actual = [jitted(torch.ones(1)) for _ in range(2)]
        assert _SCALED._v == expected_v
        torch.testing.assert_close(actual, expected)


def _printed_into_own_buffer(x, n):
    buf = io.StringIO()
    print("n =", n, file=buf)
    with contextlib.redirect_stdout(buf):
        print("shape", x.shape[0], end="!")
        sys.stdout.write("w")
    with contextlib.redirect_stderr(buf):
        print("err", file=sys.stderr)
    return x * 2, buf.getvalue()


def test_printing_into_a_stream_the_program_made_fills_it(capsys):
    # The prints were recorded to be replayed after the call, to the caller's stdout (or the buffer of the traced
    # call), so ``buf.getvalue()`` was '' and the text went to the terminal, on every call.
    jitted = thunder.jit(_printed_into_own_buffer)
    for n in (1, 1, 2):
        (expected, expected_text), (actual, actual_text) = _printed_into_own_buffer(torch.ones(2), n), jitted(torch.ones(2), n)
        torch.testing.assert_close(actual, expected)
        assert actual_text == expected_text
    assert capsys.readouterr() == ("", "")


def test_printing_traced_values_into_a_stream_the_program_made_is_a_clear_error():
    def f(x):
        buf = io.StringIO()
        print(x.sum(), file=buf)
        return buf.getvalue()

    with pytest.raises(ThunderRuntimeError, match="into a stream the jitted function made itself"):
        thunder.jit(f)(torch.ones(2))


_SUBCLASSES: list[str] = []


def _class_made_inside(x):
    class Base:
        def __init_subclass__(cls, scale=1, **kwargs):
            super().__init_subclass__(**kwargs)
            cls.scale = scale
            _SUBCLASSES.append(cls.__name__)

    class Child(Base, scale=3):
        pass

    return x * Child.scale


def test_init_subclass_of_a_class_made_inside_runs_on_every_call():
    # type.__new__ called __init_subclass__ natively: the registry got "Child" once, while tracing (Note [Classes
    # made by the program] in thunder.core.interpreter.protocols)
    _SUBCLASSES.clear()
    jitted = thunder.jit(_class_made_inside)
    for _ in range(2):
        torch.testing.assert_close(jitted(torch.ones(1)), torch.full((1,), 3.0))
    assert _SUBCLASSES == ["Child", "Child"]


class _Registered:
    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _SUBCLASSES.append(cls.__name__)


class _PyMeta(type):
    def __new__(mcls, name, bases, ns, **kwargs):
        return super().__new__(mcls, name, bases, ns, **kwargs)


def _subclasses_of_an_outside_base(x):
    class A(_Registered):
        pass

    class B(_Registered, metaclass=_PyMeta):
        pass

    C = type("C", (_Registered,), {})
    return x * len(A.__mro__ + B.__mro__ + C.__mro__)


def test_init_subclass_of_an_outside_base_runs_on_every_call():
    _SUBCLASSES.clear()
    expected = _subclasses_of_an_outside_base(torch.ones(1))
    jitted = thunder.jit(_subclasses_of_an_outside_base)
    for _ in range(2):
        torch.testing.assert_close(jitted(torch.ones(1)), expected)
    assert _SUBCLASSES == ["A", "B", "C"] * 3
    assert isinstance(_Registered.__dict__["__init_subclass__"], classmethod)  # set back after each class


_EFFECTS: list[int] = []


def _effect_then_failure_then_branch(x, n):
    _EFFECTS.append(n)
    _ = x[torch.full((1,), 10**6 if n % 2 else 0)]  # out of range for odd n: fails at run time
    if x.sum() > 0:  # a data-dependent branch: the entry's replays move after its check
        x = x + 1
    return x


def test_effects_before_a_run_time_failure_in_a_split_program_are_made():
    # the replays move after the last check (Note [Data-dependent values]), so a call that failed at run time before
    # it left out the effects eager made before the failure (randomized tester, seed 4000653); now it runs eagerly
    # (Note [A run that fails before its effects] in thunder.compiler)
    _EFFECTS.clear()
    jitted = thunder.jit(_effect_then_failure_then_branch)
    for n in (0, 1):
        with contextlib.suppress(IndexError):
            jitted(torch.ones(4), n)
    assert _EFFECTS == [0, 1]



def _effect_then_index_then_branch(x, index):
    _EFFECTS.append(index.shape[0])
    _ = x[index]  # out of range for a large index: fails at run time, on a cached call
    if x.sum() > 0:
        x = x + 1
    return x


def test_effects_before_a_run_time_failure_of_a_cached_split_program_are_made():
    _EFFECTS.clear()
    jitted = thunder.jit(_effect_then_index_then_branch)
    jitted(torch.ones(4), torch.tensor([0]))
    with pytest.raises(IndexError):
        jitted(torch.ones(4), torch.tensor([10**6]))
    assert _EFFECTS == [1, 1] and thunder.cache_misses(jitted) == 1


def _warn_then_int_of_a_tensor(x):
    warnings.warn("deprecated path", FutureWarning, stacklevel=2)
    y = x + 1
    return y, int(y.sum())


def test_a_warning_before_a_run_time_failure_at_a_data_dependent_value_is_issued():
    """Randomized tester, Python 3.12 seed 4001272: ``int(inf)`` raised OverflowError in both, but eager had
    warned first and thunder had not (the warning's replay was moved after the split's last check)."""
    jitted = thunder.jit(_warn_then_int_of_a_tensor)
    jitted(torch.ones(1))
    for fn in (_warn_then_int_of_a_tensor, jitted):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(OverflowError):
                fn(torch.tensor([float("inf")]))
        assert [str(w.message) for w in caught] == ["deprecated path"], fn
