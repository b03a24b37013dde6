"""What running lightning-thunder's own test files against this project found (``python -m
benchmarks.lightning_tests``): each test here is our own, against eager PyTorch or lightning-thunder's documented
behaviour, for a difference those files showed."""

from __future__ import annotations

import dataclasses
import warnings

import torch

import thunder
import thunder.executors


class _Dict(dict):
    pass


@dataclasses.dataclass
class _DataclassDict(dict):  # as in lightning-thunder's test_replace_device
    pass


class _DictWithInit(dict):
    """Its constructor cannot remake it from its items: the program sees the object itself."""

    def __init__(self, tag):
        super().__init__()
        self.tag = tag


def _calls(fn, jitted, make_state, steps: int = 3):
    """Runs ``fn`` eagerly and ``jitted`` on two copies of the same state, ``steps`` times each; returns both runs'
    (output, state) pairs."""
    runs = []
    for f in (fn, jitted):
        state = make_state()
        runs.append([(f(torch.ones(2), state, i).tolist(), dict(state), dict(vars(state))) for i in range(steps)])
    return runs


def test_attribute_set_on_a_dict_subclass_by_a_module_is_kept():
    # lightning-thunder's test_replace_device: the store was made on the copy the program saw, then lost
    class Model(torch.nn.Module):
        def __init__(self, cls):
            super().__init__()
            self.foo = cls()

        def forward(self, x):
            self.foo.device = x.device
            self.foo.n = getattr(self.foo, "n", 0) + 1
            return x * self.foo.n

    for cls in (_Dict, _DataclassDict):
        eager, jitted = Model(cls), Model(cls)
        jm = thunder.jit(jitted)
        for _ in range(3):
            x = torch.randn(2)
            torch.testing.assert_close(jm(x), eager(x))
            assert vars(jitted.foo) == vars(eager.foo), cls


def test_attribute_set_on_a_dict_subclass_argument_or_global_is_kept():
    def fn(x, d, i):
        d.seen = i
        d.total = getattr(d, "total", 0) + i
        return x * d.total

    eager, jitted = _calls(fn, thunder.jit(fn), _Dict)
    assert jitted == eager

    glob = _Dict(a=1)

    def from_global(x):
        glob.count = getattr(glob, "count", 0) + glob["a"]
        return x * glob.count

    jf = thunder.jit(from_global)
    for expected in (1, 2, 3):
        torch.testing.assert_close(jf(torch.ones(2)), torch.full((2,), float(expected)))
        assert glob.count == expected


def test_attribute_added_to_a_dict_subclass_between_calls_is_read():
    # the copy the program saw had no attributes, and nothing checked that the object still had none
    d = _Dict(a=1)

    def fn(x):
        return x * getattr(d, "n", 0)

    jf = thunder.jit(fn)
    for i in range(3):
        if i:
            d.n = i
        torch.testing.assert_close(jf(torch.ones(2)), fn(torch.ones(2)))


def test_items_of_a_dict_subclass_seen_as_itself_are_checked():
    # the program read its numbers natively, as constants, and nothing checked them on later calls
    d = _DictWithInit("t")
    d["a"], d["b"] = 1, float("nan")

    def fn(x):
        return x * d.get("a", 7) * d["c"] if "c" in d else x * d.get("a", 7)

    jf = thunder.jit(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for change in (None, lambda: d.pop("a"), lambda: d.update(a=3), lambda: d.update(a=3.5), lambda: d.update(c=2)):
            if change is not None:
                change()
            torch.testing.assert_close(jf(torch.ones(2)), fn(torch.ones(2)))


def test_executor_accessors_of_lightning_thunder():
    # thunder.executors.get_torch_executor / get_nvfuser_executor / nvfuser_available, which scripts and
    # lightning-thunder's test framework call
    assert thunder.executors.get_torch_executor() is thunder.pytorch_executor
    assert thunder.executors.nvfuser_available() is False
    assert thunder.executors.get_nvfuser_executor() is None is thunder.nvfuser_executor


def test_outputs_whose_view_the_backward_saves_are_freed():
    # lightning-thunder's test_saved_view_of_output_of_autograd_function_does_not_leak: a view of an output saved
    # for backward kept each call's outputs alive until a backward (a reference cycle through torch's C++ graph that
    # gc cannot see); eager frees them
    import gc
    import weakref

    def fn(idx, weight):
        tok_emb = torch.nn.functional.embedding(idx, weight)
        emb = torch.reshape(tok_emb, (2, -1))
        return tok_emb, emb @ emb.T

    idx = torch.randint(0, 10, (1, 2))
    grads = []
    for f in (fn, thunder.jit(fn)):
        weight = torch.randn(16, 8, generator=torch.Generator().manual_seed(0)).requires_grad_()
        refs = []
        for _ in range(3):
            out, product = f(idx, weight)  # no backward (an evaluation that did not turn grad off)
            refs.append(weakref.ref(out))
        del out, product
        gc.collect()
        assert all(r() is None for r in refs), f
        f(idx, weight)[1].sum().backward()  # and the gradient is eager's
        grads.append(weight.grad)
    torch.testing.assert_close(grads[1], grads[0])
