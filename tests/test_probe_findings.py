"""What probing with programs people write found, each kept as a regression test against eager (the other findings of
the same probes have their own files: tests/test_guards_tensor_attributes.py, tests/test_warnings.py, and tests in
test_training.py, test_program_forms.py, test_side_effects.py and test_generation.py)."""

from __future__ import annotations

import copy
import operator
import sys

import numpy
import pytest
import torch

import thunder
from thunder.core.errors import ThunderRuntimeError


def test_data_is_cut_from_autograd():
    # ``x.data`` was ``x`` itself in a trace: it required grad, and the gradient of ``(x.data * x).sum()`` was 2x.
    def f(x):
        return (x.data * x).sum(), x.data * 2

    x = torch.randn(3, requires_grad=True)
    expected, actual = f(x), thunder.jit(f)(x)
    assert actual[1].requires_grad is expected[1].requires_grad is False
    torch.testing.assert_close(actual[1], expected[1])
    (expected_grad,) = torch.autograd.grad(expected[0], x)
    (actual_grad,) = torch.autograd.grad(actual[0], x)
    torch.testing.assert_close(actual_grad, expected_grad)


def ema(average, param):
    average.data.mul_(0.5).add_(param.data * 0.5)  # an exponential moving average of a parameter, as people write it
    return average


def chained(x):
    x.detach().mul_(0.5).add_(1)
    return x


def test_chained_updates_in_place_through_an_alias_of_a_tensor_that_requires_grad():
    # The second update of ``x.detach().mul_(0.5).add_(1)`` was turned into an op whose result nothing read, when ``x``
    # required grad: ``x`` ended at 0.5 instead of 1.5 (the autograd split took the first update's result for a
    # tensor of its own). ``x.data.mul_(...)`` on a parameter raised where eager updates it.
    for requires_grad in (False, True):
        a, p = torch.ones(3, requires_grad=requires_grad), torch.full((3,), 3.0, requires_grad=requires_grad)
        b, q = torch.ones(3, requires_grad=requires_grad), torch.full((3,), 3.0, requires_grad=requires_grad)
        ema(a, p)
        assert thunder.jit(ema)(b, q) is b
        torch.testing.assert_close(b.detach(), a.detach())
        chained(a)
        thunder.jit(chained)(b)
        torch.testing.assert_close(b.detach(), a.detach())


def test_an_update_through_data_is_not_seen_by_autograd_as_in_eager():
    # ``x.data`` has a version counter of its own: eager's backward of ``x * x`` reads the updated values without
    # complaint. As ``detach()`` (which shares the counter), the backward raised "modified by an inplace operation".
    def f(x):
        y = x * x
        x.data.mul_(0.5).add_(1)
        return y

    a, b = torch.randn(3, 3, requires_grad=True), None
    b = a.detach().clone().requires_grad_()
    expected, actual = f(a), thunder.jit(f)(b)
    torch.testing.assert_close(actual, expected)
    (expected_grad,) = torch.autograd.grad(expected.sum(), a)
    (actual_grad,) = torch.autograd.grad(actual.sum(), b)
    torch.testing.assert_close(actual_grad, expected_grad)
    torch.testing.assert_close(b.detach(), a.detach())


def test_a_dtype_eager_rejects_is_a_runtime_error_the_program_can_catch():
    # eager raises RuntimeError for linear of a float64 input and float32 weights; thunder raised a TypeError only,
    # so the program's ``except RuntimeError`` did not take its other path
    def f(x, w):
        try:
            return torch.nn.functional.linear(x, w)
        except RuntimeError:
            return torch.nn.functional.linear(x.to(w.dtype), w)

    x, w = torch.randn(2, 3, dtype=torch.float64), torch.randn(4, 3)
    torch.testing.assert_close(thunder.jit(f)(x, w), f(x, w))


def test_clip_grad_norm_inside_a_jitted_function(recwarn):
    # its foreach path groups the gradients with torch._C._group_tensors_by_device_and_dtype, whose C code rejected
    # the trace's values (a TypeError; the call then ran eagerly, with a warning)
    def clip(parameters, foreach):
        return torch.nn.utils.clip_grad_norm_(parameters, 1.0, foreach=foreach)

    for foreach in (None, True, False):
        model = torch.nn.Sequential(torch.nn.Linear(6, 3), torch.nn.Linear(3, 2).double())
        expected_model = copy.deepcopy(model)  # (a deep copy of a parameter leaves its .grad behind)
        for p, q in zip(model.parameters(), expected_model.parameters()):
            p.grad = torch.randn_like(p) * 3
            q.grad = p.grad.clone()
        actual = thunder.jit(clip)(list(model.parameters()), foreach)
        expected = clip(list(expected_model.parameters()), foreach)
        torch.testing.assert_close(actual, expected)
        for p, q in zip(model.parameters(), expected_model.parameters()):
            torch.testing.assert_close(p.grad, q.grad)
    assert not [w for w in recwarn if "ran eagerly" in str(w.message)]


def test_keywords_that_name_a_position_differently_in_each_overload():
    # torch.tensor_split's second argument is ``sections``, ``indices`` or ``tensor_indices_or_sections`` by overload;
    # thunder took none of them by keyword (torchvision's RandomRotation passes ``indices=``: TypeError)
    x = torch.arange(6.0)
    for f in (lambda x: torch.tensor_split(x, indices=[1, 3], dim=0), lambda x: torch.tensor_split(x, sections=3)):
        torch.testing.assert_close(thunder.jit(f)(x), f(x))


class _LooksUpExtras(torch.nn.Module):
    """A module whose ``__getattr__`` looks missing names up in a dict (KeyError, not AttributeError)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 3)
        self.extras = {"scale": 3.0}

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return self.extras[name]

    def forward(self, x):
        return self.linear(x) * self.scale


def test_a_module_whose_getattr_raises_key_error(recwarn):
    # thunder asked the module for __self__ and __func__ while tracing its call; its __getattr__ raised KeyError
    model = _LooksUpExtras()
    jitted = thunder.jit(model)
    x = torch.randn(2, 3)
    torch.testing.assert_close(jitted(x), model(x))
    model.extras["scale"] = 7.0
    torch.testing.assert_close(jitted(x), model(x))
    assert not [w for w in recwarn if "ran eagerly" in str(w.message)]


MEAN = numpy.array([1.0, 2.0, 3.0], dtype=numpy.float32)


def test_tensors_of_a_numpy_array_from_outside():
    # torch.from_numpy(MEAN) made a tensor thunder did not trace (a confusing error); torch.tensor / as_tensor of the
    # array were refused ("data must be numbers or nested lists of numbers")
    programs = [
        lambda x: x * torch.from_numpy(MEAN),
        lambda x: x * torch.tensor(MEAN),
        lambda x: x * torch.as_tensor(MEAN, dtype=torch.float64),
        lambda x: torch.from_numpy(MEAN).add_(x),  # writes into the array, as in eager
    ]
    for f in programs:
        x = torch.ones(3)
        jitted = thunder.jit(f)
        for _ in range(2):
            before = MEAN.copy()
            actual = jitted(x)
            written, MEAN[:] = MEAN.copy(), before
            expected = f(x)
            torch.testing.assert_close(actual, expected)
            numpy.testing.assert_array_equal(written, MEAN)
            MEAN[0] += 10  # the next call sees the new values


class _SwapsItsWeight(torch.nn.Module):
    """Writes a module's member tables directly, as torch.func.functional_call does."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)
        self.register_buffer("offset", torch.zeros(2))

    def forward(self, x):
        weight = self.linear._parameters["weight"]
        self.linear._parameters["weight"] = weight * 0.5  # read back by the call below
        y = self.linear(x)
        self.linear._parameters["weight"] = weight
        self._buffers["offset"] = x * 3  # stays, as in eager
        self.register_buffer("scratch", x * 2, persistent=False)  # a new member, read at once
        return y + self.offset + self.scratch


def test_what_the_program_writes_into_a_module_s_tables_is_what_it_reads():
    # nn.Module.__getattr__ read the module's own tables, not the program's writes to them: the swapped weight was
    # the old one (a silent wrong result, and functional_call's parameters were ignored), a new buffer was missing
    torch.manual_seed(0)
    model, reference = _SwapsItsWeight(), _SwapsItsWeight()
    reference.load_state_dict(model.state_dict())
    jitted = thunder.jit(model)
    for _ in range(2):
        x = torch.randn(2)
        torch.testing.assert_close(jitted(x), reference(x))
        torch.testing.assert_close(dict(model.named_buffers()), dict(reference.named_buffers()))
        assert model.linear.weight is model.linear._parameters["weight"]


def test_functional_call_uses_the_given_parameters():
    from torch.func import functional_call

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))

    def loss(params, x):
        return functional_call(model, params, (x,)).pow(2).sum()

    jitted = thunder.jit(loss)
    for _ in range(2):
        params = {k: torch.randn_like(v).requires_grad_() for k, v in model.named_parameters()}
        x = torch.randn(5, 3)
        expected, actual = loss(params, x), jitted(params, x)
        torch.testing.assert_close(actual, expected)
        grads = torch.autograd.grad(actual, list(params.values()))
        torch.testing.assert_close(grads, torch.autograd.grad(expected, list(params.values())))
    assert thunder.cache_misses(jitted) == 1


@torch.jit.script
def _scripted_gelu_like(x: torch.Tensor) -> torch.Tensor:
    return x * torch.sigmoid(1.702 * x)


def test_a_torchscript_function_is_traced_through_its_python_source():
    # it ran in TorchScript's C++ interpreter, which failed on traced values ("repr() of tensor x needs its values")
    def f(x):
        return _scripted_gelu_like(x).sum()

    jitted = thunder.jit(f)
    for _ in range(2):
        x = torch.randn(4, requires_grad=True)
        actual, expected = jitted(x), f(x)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(torch.autograd.grad(actual, x), torch.autograd.grad(expected, x))
    assert thunder.cache_misses(jitted) == 1


def test_inference_mode_inside_the_program_turns_grad_off_for_its_region():
    # ``with torch.inference_mode():`` ran natively switched tracing only: the computation's ``y`` required grad
    # where eager's does not (and a backward through it would have reached ``x``).
    def f(x):
        with torch.inference_mode():
            y = x * 2
        return y, x * 3, torch.is_inference_mode_enabled()

    @torch.inference_mode()
    def g(x):
        return x * 2, torch.is_inference_mode_enabled(), torch.is_grad_enabled()

    for fn in (f, g):
        jfn = thunder.jit(fn)
        for x in (torch.randn(3, requires_grad=True), torch.randn(4, requires_grad=True), torch.randn(3)):
            expected, actual = fn(x), jfn(x)
            tensors = [(a, e) for a, e in zip(actual, expected) if isinstance(e, torch.Tensor)]
            assert [a for a in actual if not isinstance(a, torch.Tensor)] == [
                e for e in expected if not isinstance(e, torch.Tensor)
            ]
            for a, e in tensors:
                assert a.requires_grad is e.requires_grad
                torch.testing.assert_close(a, e)
        assert not torch.is_inference_mode_enabled() and torch.is_grad_enabled()


def test_max_and_min_along_a_dim_of_a_bool_tensor():
    # ``mask.min(-1)`` (``torch.distributions``' lower-Cholesky constraint check) raised "argmin does not support
    # bool input" where eager gives the values and the index of the first False (True for max).
    def f(m):
        return m.min(-1), m.max(0, keepdim=True), torch.max(m, dim=1), m[0, 0].max(0)

    jf = thunder.jit(f)
    for m in (torch.tensor([[True, False, True], [False, False, False], [True, True, True]]), torch.rand(4, 2) > 0.5):
        for actual, expected in zip(jf(m), f(m)):
            assert type(actual) is type(expected)
            for a, e in zip(actual, expected):
                assert a.dtype is e.dtype
                torch.testing.assert_close(a, e)


class _Rows:
    """A sequence whose length is its tensor's (a dataset-like object)."""

    def __init__(self, t):
        self.t = t

    def __len__(self):
        return self.t.shape[0]

    def __getitem__(self, i):
        if i >= len(self):
            raise IndexError(i)
        return self.t[i] * 2


def test_reversed_of_a_tensor_and_of_a_sequence_of_its_rows_across_lengths():
    # ``reversed(x)`` ran natively, reading ``len(x)`` without a check: after calls with 3 and 2 rows, a call with 3
    # rows got 2 (the length a symbolic dim had when traced). Eager's ``reversed(x)`` of a tensor is ``x.flip(0)``, a
    # tensor, where thunder gave an iterator.
    fns = (lambda x: list(reversed(x)), lambda x: reversed(x), lambda x: list(reversed(_Rows(x))))
    for fn in fns:
        jfn = thunder.jit(fn)
        for n in (3, 2, 3, 4, 2):
            x = torch.randn(n, 2)
            expected, actual = fn(x), jfn(x)
            assert type(actual) is type(expected)
            if isinstance(expected, torch.Tensor):
                torch.testing.assert_close(actual, expected)
            else:
                assert len(actual) == len(expected)
                for a, e in zip(actual, expected):
                    torch.testing.assert_close(a, e)


def test_a_tensor_of_an_array_the_program_made():
    # ``torch.tensor(np.sin(positions))`` (a positional table computed with numpy in forward) raised "data must be
    # numbers or nested lists of numbers" where eager copies the array, with its dtype.
    def f(x):
        table = numpy.sin(numpy.arange(x.shape[0])[:, None] / 10.0 ** numpy.arange(x.shape[1]))
        return x + torch.tensor(table), torch.tensor(numpy.arange(x.shape[0])), torch.tensor(numpy.ones(2, numpy.float32))

    jf = thunder.jit(f)
    for shape in ((3, 2), (4, 2), (3, 2), (5, 2)):
        x = torch.randn(shape, dtype=torch.float64)
        for a, e in zip(jf(x), f(x)):
            assert a.dtype is e.dtype
            torch.testing.assert_close(a, e)


class Counted:
    calls = 0


def count_through_type(obj, x):
    type(obj).calls += 1  # a class attribute reached through ``type(obj)``, not through a global
    return x + type(obj).calls


def count_through_dunder_class(obj, x):
    obj.__class__.calls += 1
    return x * obj.__class__.calls


def test_class_attributes_reached_through_an_instance_are_read_and_replayed_on_every_call():
    # ``type(obj).calls += 1`` was made once, while tracing, and the read was not checked: every later call
    # returned the first call's value and the counter stopped at 1.
    for fn in (count_through_type, count_through_dunder_class):
        results = {}
        for jitted in (False, True):
            Counted.calls = 0
            run = thunder.jit(fn) if jitted else fn
            results[jitted] = [run(Counted(), torch.ones(2)) for _ in range(3)], Counted.calls
        for expected, actual in zip(results[False][0], results[True][0]):
            torch.testing.assert_close(actual, expected)
        assert results[True][1] == results[False][1] == 3


class CountingModule(torch.nn.Module):
    forwards = 0

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(2, 2)

    def forward(self, x):
        type(self).forwards += 1
        return self.linear(x)


def test_a_module_counting_its_calls_in_a_class_attribute_counts_every_call():
    CountingModule.forwards = 0
    jitted = thunder.jit(CountingModule())
    for _ in range(3):
        jitted(torch.ones(1, 2))
    assert CountingModule.forwards == 3


def test_a_class_the_program_defines_is_its_own_and_does_not_recompile():
    # Capturing classes reached without a path must leave the program's own classes alone: their attributes are
    # not outside state to check (a check of ``Acc.total == 0`` after the replayed ``+= 2`` recompiled every call).
    def f(x):
        class Acc:
            total = 0

        Acc.total += 2
        made = type("Made", (), {"k": 1})
        made.k += 1
        return x + Acc.total + made.k, Acc.total

    jitted = thunder.jit(f)
    for _ in range(3):
        expected, actual = f(torch.ones(2)), jitted(torch.ones(2))
        torch.testing.assert_close(actual[0], expected[0])
        assert actual[1] == expected[1]
    assert thunder.cache_misses(jitted) == 1


STEPS = Counted()


def count_through_sys_modules(x):
    import sys

    counter = sys.modules[__name__].STEPS  # a module reached without a path: its attributes are checked
    counter.calls += 1
    return x * counter.calls


def test_an_object_read_through_a_module_from_sys_modules_is_checked_and_its_stores_replayed():
    STEPS.calls = 0
    expected = [count_through_sys_modules(torch.ones(1)) for _ in range(3)]
    STEPS.calls = 0
    jitted = thunder.jit(count_through_sys_modules)
    actual = [jitted(torch.ones(1)) for _ in range(3)]
    torch.testing.assert_close(actual, expected)
    assert STEPS.calls == 3


class Holder:
    pass


def list_holding_itself(x):
    items = [x * 2]
    items.append(items)
    return items


def object_holding_itself(x):
    c = Holder()
    c.me = c
    c.x = x * 2
    return c


def parent_pointers(x):
    root = Holder()
    root.kids = [Holder()]
    root.kids[0].parent = root
    root.x = x
    return root


@pytest.mark.parametrize("fn", [list_holding_itself, object_holding_itself, parent_pointers])
def test_a_result_that_holds_itself_is_a_clear_error(fn):
    # A list holding itself hung tracing (an endless walk); an object holding itself came back as a chain of six
    # copies, not a cycle (``r.me is not r``). Thunder makes results again on each call and cannot make a cycle.
    with pytest.raises(ThunderRuntimeError, match="holds itself"):
        thunder.jit(fn)(torch.ones(2))


TREE = Holder()
TREE.kid = Holder()
TREE.kid.parent = TREE


def test_an_outside_object_holding_a_cycle_is_returned_as_it_is():
    def f(x):
        return x + 1, copy.copy(TREE)  # not the program's own object, holding no traced value: returned as it is

    out = thunder.jit(f)(torch.ones(1))
    assert out[1].kid.parent is TREE


class Batch(list):
    pass


def make_batch(x, n):
    batch = Batch([x * n, n])
    batch.meta = {"n": n, "total": x.sum()}
    return batch


def test_a_list_subclass_the_program_makes_comes_back_as_its_type():
    # It came back as a plain list (no ``meta``) where it held no traced value, and was refused where it did.
    jitted = thunder.jit(make_batch)
    previous = None
    for n in (1, 2, 2):
        expected, actual = make_batch(torch.ones(2), n), jitted(torch.ones(2), n)
        assert type(actual) is Batch
        torch.testing.assert_close(list(actual), list(expected))
        assert actual.meta["n"] == expected.meta["n"]
        torch.testing.assert_close(actual.meta["total"], expected.meta["total"])
        assert actual is not previous  # made again by each call
        previous = actual


STORED: list = []


def store_and_return_a_list_of_made_objects(x):
    items = [Holder()]
    items[0].t = x * 2
    STORED.append(items)
    STORED.append(items)
    return items


def test_a_container_of_made_objects_stored_and_returned_is_one_object():
    # Each store made its own copy of a list holding an object the program made: ``STORED[0] is result`` and
    # ``STORED[0] is STORED[1]`` were False, where eager's are True.
    STORED.clear()
    result = thunder.jit(store_and_return_a_list_of_made_objects)(torch.ones(1))
    assert STORED[0] is result and STORED[1] is result
    torch.testing.assert_close(result[0].t, torch.full((1,), 2.0))


def test_an_attribute_store_and_the_result_holding_a_made_object_are_one_object():
    owner = Holder()

    def f(x):
        cache = [Holder()]
        cache[0].t = x + 1
        owner.cache = cache
        return cache

    result = thunder.jit(f)(torch.ones(1))
    assert owner.cache is result


class _Counter:
    pass


_COUNTER = _Counter()


@pytest.mark.parametrize("write", ["vars", "dunder_dict", "update", "pop", "setdefault", "del"])
def test_a_write_through_an_outside_objects_dict_is_made_on_every_call(write):
    # Note [Writes into an object's __dict__]: the write was made once while tracing (the counter stopped at 1), then
    # refused; it is the attribute store it is, replayed on every call, past the type's __setattr__ as in eager
    class Logged:
        def __setattr__(self, name, value):
            self.__dict__.setdefault("log", []).append(name)
            object.__setattr__(self, name, value)

    def f(o, x):
        if write == "vars":
            vars(o)["n"] += 1
        elif write == "dunder_dict":
            o.__dict__["n"] = o.n + 1
        elif write == "update":
            o.__dict__.update(n=o.n + 1)
        elif write == "pop":
            o.__dict__["n"] = o.__dict__.pop("n") + 1
        elif write == "setdefault":
            o.__dict__.setdefault("first", o.n)
            vars(o)["n"] = o.n + o.first
        else:
            del o.__dict__["n"]
            o.__dict__["n"] = 7
        return x * o.n

    eager, jitted = Logged(), Logged()
    object.__setattr__(eager, "n", 1), object.__setattr__(jitted, "n", 1)
    jf = thunder.jit(f)
    for _ in range(3):
        expected = f(eager, torch.ones(1))
        torch.testing.assert_close(jf(jitted, torch.ones(1)), expected)
        assert vars(jitted) == vars(eager)
    assert "log" not in vars(jitted)


def test_a_write_through_an_objects_dict_under_a_data_descriptor_is_a_clear_error():
    class WithProperty:
        n = property(lambda self: 0, lambda self, v: None)

    o = WithProperty()

    def f(x):
        vars(o)["n"] = 1  # invisible to o.n in eager (the property wins); object.__setattr__ would call the setter
        return x

    with pytest.raises(ThunderRuntimeError, match=r"through its __dict__, vars\(\) or globals\(\) is not supported"):
        thunder.jit(f)(torch.ones(1))
    assert "n" not in vars(o)


@pytest.mark.parametrize(
    "read",
    [
        lambda: vars(_COUNTER)["n"],
        lambda: _COUNTER.__dict__["n"],
        lambda: _COUNTER.__dict__.get("n", 0.0),
        lambda: 2.0 if "m" in vars(_COUNTER) else 1.0,
        lambda: sum(v for k, v in vars(_COUNTER).items() if k != "m"),
    ],
    ids=["vars", "dunder_dict", "get", "in", "items"],
)
def test_a_read_through_an_outside_objects_dict_is_checked_on_every_call(read):
    # Note [Reads and writes through an object's __dict__]: the cached trace kept the value read while tracing
    def f(x):
        return x * read()

    jf = thunder.jit(f)
    _COUNTER.__dict__.pop("m", None)
    _COUNTER.n = 1.0
    for change in (lambda: None, lambda: setattr(_COUNTER, "n", 5.0), lambda: setattr(_COUNTER, "m", 0.0)):
        change()
        torch.testing.assert_close(jf(torch.ones(1)), f(torch.ones(1)))
    assert thunder.cache_misses(jf) <= 3


@pytest.mark.parametrize(
    "read",
    [
        lambda: _Counter.__dict__["n"],
        lambda: type(_COUNTER).__dict__["n"],
        lambda: _Counter.__dict__.get("n"),
        lambda: vars(_Counter)["n"],
        lambda: 2.0 if "m" in vars(_Counter) else 1.0,
    ],
    ids=["dunder_dict", "type_of_instance", "get", "vars", "in"],
)
def test_a_read_through_a_classs_own_dict_is_checked_on_every_call(read):
    # a class's __dict__ is a mappingproxy, read unchecked: the cached trace kept the value of ``_Counter.n``
    def f(x):
        return x * read()

    jf = thunder.jit(f)
    _Counter.n = 1.0
    try:
        for change in (lambda: None, lambda: setattr(_Counter, "n", 5.0), lambda: setattr(_Counter, "m", 0.0)):
            change()
            torch.testing.assert_close(jf(torch.ones(1)), f(torch.ones(1)))
        assert thunder.cache_misses(jf) <= 3
    finally:
        for name in ("n", "m"):
            if name in _Counter.__dict__:
                delattr(_Counter, name)


@pytest.mark.parametrize("owner", ["instance", "class"])
def test_an_objects_dict_read_by_the_program_shows_its_later_attribute_stores(owner):
    # ``obj.__dict__`` is a view of the attributes in eager; the program's copy kept the value read first
    obj = _COUNTER if owner == "instance" else _Counter

    def f(x):
        table = vars(obj)
        before = table["n"]
        obj.n = before + 2.0
        return x * table["n"] + before, type(table)

    try:
        for _ in range(2):
            obj.n = 1.0
            expected = f(torch.ones(1))
            obj.n = 1.0
            actual = thunder.jit(f)(torch.ones(1))
            torch.testing.assert_close(actual[0], expected[0])
            assert actual[1] is expected[1] and obj.n == 3.0
    finally:
        del obj.n


def test_an_object_reached_through_operator_attrgetter_has_its_stores_replayed():
    # Note [Operator getters]: attrgetter read natively, so the counter it reached stopped at 1
    def count(x):
        state = operator.attrgetter("_COUNTER")(sys.modules[__name__])
        state.n += 1
        return x * state.n, operator.methodcaller("__getattribute__", "n")(state)

    _COUNTER.n = 0.0
    expected = [count(torch.ones(1)) for _ in range(3)]
    _COUNTER.n = 0.0
    jf = thunder.jit(count)
    torch.testing.assert_close([jf(torch.ones(1)) for _ in range(3)], expected)
    assert _COUNTER.n == 3.0


_SCALES = [2.0]


def test_values_read_through_operator_getters_are_checked_on_every_call():
    def scaled(x):
        return x * operator.itemgetter(0)(_SCALES) * operator.attrgetter("n")(_COUNTER)

    jf = thunder.jit(scaled)
    for n, scale in ((1.0, 2.0), (3.0, 2.0), (3.0, 5.0)):
        _COUNTER.n, _SCALES[0] = n, scale
        torch.testing.assert_close(jf(torch.ones(1)), scaled(torch.ones(1)))


@pytest.mark.parametrize(
    "read",
    [lambda: object.__getattribute__(_COUNTER, "n"), lambda: _COUNTER.__getattribute__("n")],
    ids=["object.__getattribute__", "bound"],
)
def test_a_read_through_the_getattribute_slot_is_checked_on_every_call(read):
    # Note [Attribute slots called by name]: the slot ran natively and the cached trace kept the traced value
    def f(x):
        return x * read()

    jf = thunder.jit(f)
    for n in (1.0, 7.0):
        _COUNTER.n = n
        torch.testing.assert_close(jf(torch.ones(1)), f(torch.ones(1)))


def test_a_write_through_the_setattr_slot_is_made_by_every_call():
    def f(x):
        _COUNTER.__setattr__("n", _COUNTER.n + 1)
        return x * _COUNTER.n

    _COUNTER.n = 0.0
    expected = [f(torch.ones(1)) for _ in range(3)]
    _COUNTER.n = 0.0
    jf = thunder.jit(f)
    torch.testing.assert_close([jf(torch.ones(1)) for _ in range(3)], expected)
    assert _COUNTER.n == 3.0


class _Config:
    def __init__(self):
        self.a, self.m = 1.0, {"k": 2.0}

    def to_dict(self):  # as transformers' PretrainedConfig.to_dict
        return copy.deepcopy(self.__dict__)


_CONFIG = _Config()


@pytest.mark.parametrize("copied", [True, False], ids=["of-a-copy", "of-the-object"])
def test_a_deep_copy_of_an_objects_dict_has_its_values_of_each_call(copied):
    # Note [Reads and writes through an object's __dict__]: the values were those of tracing (1.0 where eager gave
    # 3.0); then, of a copy made on every call, the identity the deep copy asked of its dict was checked (T5's
    # config: "the prologue of a newly compiled entry rejected the inputs it was traced with")
    def f(x):
        config = copy.deepcopy(_CONFIG) if copied else _CONFIG
        d = config.to_dict()
        return x * d["a"] * d["m"]["k"]

    jf = thunder.jit(f)
    for a, k in ((1.0, 2.0), (3.0, 2.0), (3.0, 5.0)):
        _CONFIG.a, _CONFIG.m["k"] = a, k
        torch.testing.assert_close(jf(torch.ones(1)), f(torch.ones(1)))
