"""Differences from eager that earlier sessions found and left alone, each compared with eager PyTorch."""

from __future__ import annotations

import copy
import functools
import gc
import logging
import math
import subprocess
import sys

import numpy
import pytest
import torch

import thunder

CALLS = []


@functools.lru_cache
def _scale(n):
    CALLS.append(n)
    return n * 2.0


def _updates_a_leaf_then_calls_a_cached_function(x, acc):
    x.add_(1)  # eager raises here on a leaf that requires grad
    return acc * _scale(acc.ndim)


def _indexes_then_calls_a_cached_function(x, i):
    y = x[i]  # eager raises here for an index out of range
    return y * _scale(y.ndim + 5)


@pytest.mark.parametrize(
    "fn, make_args",
    [
        (_updates_a_leaf_then_calls_a_cached_function, lambda: (torch.randn(3, requires_grad=True), torch.randn(3))),
        (_indexes_then_calls_a_cached_function, lambda: (torch.randn(3), torch.tensor([0, 7]))),
    ],
    ids=["leaf-update", "index-out-of-range"],
)
def test_a_cached_function_eager_never_reaches_is_not_called_while_tracing(fn, make_args):
    # Eager fails before the call, so the lru_cache body (with its effects) never runs (Note [A run that fails
    # before its effects] in thunder.compiler).
    results = []
    for run in (fn, thunder.jit(fn)):
        CALLS.clear()
        _scale.cache_clear()
        with pytest.raises((RuntimeError, IndexError)) as raised:
            run(*make_args())
        results.append((type(raised.value), list(CALLS), _scale.cache_info().currsize))
    assert results[1] == results[0]


_FIRST_BACKWARD = """
import sys, torch, thunder

def f(x, w):
    h = torch.nn.functional.gelu(x * w)
    s = h.sum()
    h.add_(1)  # the split asks torch whether gelu saved h (it did not: the backward runs)
    return s + h.sum()

grads = []
for fn in (f, thunder.jit(f)):
    torch.manual_seed(0)
    rows, cols = map(int, sys.argv[1:])
    x, w = torch.randn(rows, cols, requires_grad=True), torch.randn(cols, requires_grad=True)
    fn(x, w).backward()
    grads.append((x.grad, w.grad))
    assert fn is not f or "torch._dynamo" not in sys.modules  # (eager's own step does not import it)
torch.testing.assert_close(grads[1], grads[0])
print("torch._dynamo" in sys.modules)
"""


@pytest.mark.parametrize("shape", [(4, 3), (512, 256)], ids=["small", "over-65536-elements"])
def test_the_first_backward_of_a_fresh_process_does_not_import_dynamo(shape):
    # Note [Asking eager's saves without importing torch._dynamo] in thunder.torch.eager_saves: the import costs
    # seconds on the first training step. A large call ran gelu's meta kernel, a Python reference that imports it.
    command = [sys.executable, "-c", _FIRST_BACKWARD, *map(str, shape)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


NAN_KEYED = {float("nan"): 1}
NAN = next(iter(NAN_KEYED))


def _looks_up_a_nan_global(x):
    return x * NAN_KEYED[NAN], NAN in NAN_KEYED, x * NAN_KEYED.get(float("nan"), 7)


def _looks_up_a_nan_argument(x, k):
    return x * NAN_KEYED.get(k, 7), k in NAN_KEYED


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
@pytest.mark.parametrize(
    "fn, args",
    [(_looks_up_a_nan_global, ()), (_looks_up_a_nan_argument, (NAN,)), (_looks_up_a_nan_argument, (float("nan"),))],
    ids=["global", "argument-the-key", "argument-another-nan"],
)
def test_a_nan_dict_key_keeps_its_identity(fn, args, cache):
    # A dict finds a NaN key by identity only: a symbolic float (a new object) holding the NaN was not found.
    x = torch.ones(2)
    jf = thunder.jit(fn, cache=cache)
    for _ in range(2):
        torch.testing.assert_close(jf(x, *args), fn(x, *args))


class _Config:
    problem_type = None


class _SetsItsProblemType(torch.nn.Module):
    """As Hugging Face's sequence classifiers do (Longformer's recompile after its first training call)."""

    def __init__(self):
        super().__init__()
        self.config = _Config()
        self.lin = torch.nn.Linear(2, 2)

    def forward(self, x):
        if self.config.problem_type is None:
            self.config.problem_type = "single_label_classification"
        return self.lin(x)


def test_a_recompile_after_the_model_changed_its_own_state_names_that_state():
    torch.manual_seed(0)
    model, reference = _SetsItsProblemType(), _SetsItsProblemType()
    reference.load_state_dict(model.state_dict())
    jm = thunder.jit(model)
    x = torch.ones(2)
    for _ in range(3):
        torch.testing.assert_close(jm(x), reference(x))
    assert model.config.problem_type == reference.config.problem_type
    assert thunder.cache_misses(jm) == 2  # the second call reads the state the first one set
    assert "config.problem_type type changed NoneType -> str" in str(thunder.cache_miss_reasons(jm)[-1])


_LOG = logging.getLogger(__name__)


def _logs_from_a_helper(x):
    _LOG.warning("from the helper, on %s", x.shape, stacklevel=2)
    return x


def _logs(x):
    _LOG.warning("size %d", x.numel())
    y = _logs_from_a_helper(x * 2)
    _LOG.error("with its stack", stack_info=True)
    return y + 1


def test_a_log_record_names_the_programs_line(caplog):
    # The record was made by the replay in generated code: ``thunder.computation_N``, ``computation``.
    x = torch.ones(3)
    fields = ("pathname", "lineno", "funcName", "module", "filename", "levelname", "stack_info")
    records = []
    for fn in (_logs, thunder.jit(_logs), thunder.jit(_logs)):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=__name__):
            fn(x)
        records.append([(r.getMessage(), *(getattr(r, f) for f in fields)) for r in caplog.records])
    assert records[1] == records[0]
    assert records[2] == records[0]


def _forks_the_random_state_and_never_exits(x):
    cm = torch.random.fork_rng()
    cm.__enter__()  # eager's cm dies at the return, which closes it: fork_rng puts back the random state then
    return x + torch.rand(2)


def test_a_fork_rng_entered_and_never_exited_restores_the_random_state_at_the_return(monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    jf = thunder.jit(_forks_the_random_state_and_never_exits)
    for _ in range(2):
        results = []
        for fn in (_forks_the_random_state_and_never_exits, jf):
            torch.manual_seed(0)
            out = fn(torch.ones(2))
            gc.collect()
            results.append((out, torch.rand(3)))  # the state after the call
        torch.testing.assert_close(results[1], results[0], rtol=0, atol=0)
    assert not unraisable  # was: "Exception ignored ... '_provenance'" when collected


def test_a_returned_context_manager_left_entered_is_refused(monkeypatch):
    unraisable = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)

    def f(x):
        cm = torch.random.fork_rng()
        cm.__enter__()
        return x + 1, cm

    with pytest.raises(thunder.core.errors.ThunderRuntimeError, match="returns a context manager it entered"):
        thunder.jit(f)(torch.ones(2))
    gc.collect()
    assert not unraisable


def _tanh_plus_the_same_product(x, w):
    return torch.tanh(x * w).sum() + (x * w).sum()


def test_a_repeated_differentiable_call_keeps_one_gradient_term_per_use():
    # Note [CSE before the autograd split]: merged, the backward computed (g1 + g2) * x (inf at x = inf) where eager
    # adds g1 * x + g2 * x (nan: tanh's gradient there is 0).
    grads = []
    for fn in (_tanh_plus_the_same_product, thunder.jit(_tanh_plus_the_same_product)):
        x, w = torch.tensor([float("inf"), 1.0, -2.0]), torch.tensor([1.0, 2.0, 0.5], requires_grad=True)
        fn(x, w).backward()
        grads.append(w.grad)
    torch.testing.assert_close(grads[1], grads[0], equal_nan=True)


class _Ident(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x

    @staticmethod
    def backward(ctx, g):
        return g


class _ViewOf(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.view(-1)[1:]

    @staticmethod
    def backward(ctx, g):
        return torch.nn.functional.pad(g, (1, 0)).view(2, 2)


def _updates_what_a_function_returned(x, function):
    y = function.apply(x * 1)
    y.add_(1)
    return y


@pytest.mark.parametrize("function", [_Ident, _ViewOf], ids=["input-as-is", "view"])
def test_an_in_place_update_of_a_functions_view_output_raises_eagers_error(function):
    # Note [A Function that returns a view] in thunder.core.traced_autograd: thunder's split ran the update.
    messages = []
    for fn in (_updates_what_a_function_returned, thunder.jit(_updates_what_a_function_returned)):
        with pytest.raises(RuntimeError) as raised:
            fn(torch.ones(2, 2, requires_grad=True), function)
        messages.append(str(raised.value))
    assert messages[1] == messages[0]
    assert "is a view and is being modified inplace" in messages[0]


def _steps_and_schedules(opt, sched):
    opt.step()
    sched.step()


@pytest.mark.parametrize("cache, most", [("symbolic values", 2), (None, 3)], ids=["symbolic-values", "default"])
def test_a_cosine_schedule_stepped_in_a_jitted_step_keeps_its_epoch_symbolic(cache, most):
    # Note [math functions of symbolic numbers] in thunder.core.symbolic: math.cos(math.pi * last_epoch / T_max) pinned
    # the epoch, and every step compiled again. (Symbolic values: the first step's own branch, then one entry; the
    # default: the learning rate, then the epoch, turn symbolic as they change, the epoch once past 1.)
    results = []
    for jit in (False, True):
        torch.manual_seed(0)
        p = torch.nn.Parameter(torch.randn(4))
        opt = torch.optim.SGD([p], lr=0.1)
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=30)
        step = thunder.jit(_steps_and_schedules, **({"cache": cache} if cache else {})) if jit else _steps_and_schedules
        lrs = []
        for _ in range(20):
            (p * p).sum().backward()
            step(opt, sched)
            opt.zero_grad()
            lrs.append(opt.param_groups[0]["lr"])
        results.append((lrs, p.detach().clone()))
    assert results[1][0] == results[0][0]
    torch.testing.assert_close(results[1][1], results[0][1])
    assert thunder.cache_misses(step) <= most


@pytest.mark.parametrize("fn, args", [
    (lambda x, n: x * math.cos(math.pi * n / 7), (3,)),
    (lambda x, n: x * math.sqrt(n) + math.log(n), (2.5,)),
    (lambda x, n: x * math.exp(-n) * math.atan(n), (1.5,)),
])  # fmt: skip
def test_math_functions_of_symbolic_numbers_follow_each_calls_value(fn, args):
    jf = thunder.jit(fn, cache="symbolic values")
    for k in range(4):
        n = args[0] + k
        torch.testing.assert_close(jf(torch.ones(2), n), fn(torch.ones(2), n))
    assert thunder.cache_misses(jf) == 1


def _square_root_of(x, n):
    return x * math.sqrt(n)


def test_a_math_function_outside_its_domain_raises_as_eager():
    jf = thunder.jit(_square_root_of, cache="symbolic values")
    torch.testing.assert_close(jf(torch.ones(2), 4.0), _square_root_of(torch.ones(2), 4.0))
    for fn in (_square_root_of, jf):
        with pytest.raises(ValueError, match="math domain error"):
            fn(torch.ones(2), -1.0)


def _cosine_plus(x, n, math):  # a parameter named ``math``: the generated code's ``math.cos`` must not read it
    return x * _math_module.cos(n) + math


_math_module = math


def test_a_parameter_named_math_does_not_shadow_the_math_module_of_generated_code():
    jf = thunder.jit(_cosine_plus, cache="symbolic values")
    for n, k in [(0.5, 2.0), (0.7, 3.0)]:
        torch.testing.assert_close(jf(torch.ones(2), n, k), _cosine_plus(torch.ones(2), n, k))


def _numpy_float_times(x, n):
    a = numpy.float64(2.0) * n  # numpy's float slot reads ``n``: a numpy float, eager's type and value
    return x * float(a), type(a)


def test_a_numpy_float_times_a_symbolic_number_keeps_eagers_value_and_type():
    # The symbolic number's reflected method went first for any float subclass on the left: a wrong value from the
    # second call on.
    jf = thunder.jit(_numpy_float_times, cache="symbolic values")
    for n in (1, 2, 3):
        got, expected = jf(torch.ones(2), n), _numpy_float_times(torch.ones(2), n)
        torch.testing.assert_close(got[0], expected[0])
        assert got[1] is expected[1]


class _ComparingMeta(type):
    """A metaclass defining ``__eq__``: its classes cannot be hashed (``hash(cls)`` raises)."""

    def __eq__(cls, other):
        return cls is other


class _Unhashable(metaclass=_ComparingMeta):
    def __init__(self, v):
        self.v = v
        self.items = [1.0, 2.0]

    def __add__(self, other):
        return _Unhashable(self.v + other)

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)

    @property
    def double(self):
        return self.v * 2


def _uses_an_unhashable_class(x, k):
    k.v = k.v + 1
    made = _Unhashable(2.0) + 1.0
    total = sum(v for v in made) + len(made) + made.double + (_Unhashable == _Unhashable) + isinstance(k, _Unhashable)
    return x * total * k.v, made


@pytest.mark.parametrize("cache", ["constant values", "symbolic values"])
def test_a_class_that_cannot_be_hashed_runs_as_in_eager(cache):
    # Its metaclass defines __eq__: the interpreter's ``type(obj) in FAST_TYPES`` raised TypeError: unhashable type.
    jf = thunder.jit(_uses_an_unhashable_class, cache=cache)
    k, k_eager = _Unhashable(1.0), _Unhashable(1.0)
    for _ in range(2):
        out, made = jf(torch.ones(2), k)
        expected, made_eager = _uses_an_unhashable_class(torch.ones(2), k_eager)
        torch.testing.assert_close(out, expected)
        assert (type(made), made.v, k.v) == (type(made_eager), made_eager.v, k_eager.v)


_MODELS = [torch.nn.Linear(3, 2)]


def _converts_a_copy(x):
    m = copy.deepcopy(_MODELS[0]).to(torch.float64)
    return m(x.double())


def test_converting_a_copy_of_an_outside_module_is_a_clear_error():
    # Was: "a trace cannot change the parameters and buffers it reads. Convert the module (module.to(...)) before
    # calling the jitted function": the copy is made inside, so that cannot be done.
    _converts_a_copy(torch.ones(3))  # eager runs it
    with pytest.raises(thunder.core.errors.UnsupportedOpError) as raised:
        thunder.jit(_converts_a_copy)(torch.ones(3))
    message = str(raised.value)
    assert "a copy of _MODELS_0 that the jitted function makes" in message and "not supported" in message
    assert "Make the converted copy outside the jitted function and pass it in" in message
    assert "copy.deepcopy(_MODELS[0]).to(torch.float64)" in message  # the user's line
