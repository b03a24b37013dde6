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


def test_prims_copy_takes_lightning_thunders_grad_enabled_keyword():
    # lightning-thunder's test_inplace_copy.py calls thunder.core.prims.copy_(src, dst, grad_enabled=True) in a
    # jitted function (this project named the keyword ``recorded``: a TypeError)
    from thunder.core import prims

    def eager(src, dst):
        dst.copy_(src)
        return dst * 2

    def jitted(src, dst, grad_enabled):
        prims.copy_(src, dst, grad_enabled=grad_enabled)
        return dst * 2

    src = torch.randn(2, 3)
    for grad_enabled in (True, False):
        sources = [src.clone().requires_grad_(), src.clone().requires_grad_()]
        dsts = [torch.zeros(2, 3), torch.zeros(2, 3)]
        expected = eager(sources[0], dsts[0])
        actual = thunder.jit(jitted)(sources[1], dsts[1], grad_enabled)
        torch.testing.assert_close(actual, expected)
        torch.testing.assert_close(dsts[1], dsts[0])
        if grad_enabled:
            expected.sum().backward()
            actual.sum().backward()
            torch.testing.assert_close(sources[1].grad, sources[0].grad)


def test_thunderfx_compiles_with_thunder_as_torch_compile_backend():
    # lightning-thunder's "Hello, World! ThunderFX" tutorial and its test_networks/test_dynamo use
    # thunder.dynamo.thunderfx (absent here: an ImportError)
    from thunder.dynamo import ThunderCompiler, thunderfx

    def foo(x, y):
        return torch.sin(x) + torch.cos(y)

    inputs = [torch.randn(4, 4), torch.randn(4, 4)]
    compiled = thunderfx(foo)
    torch.testing.assert_close(compiled(*inputs), foo(*inputs))
    assert compiled.last_traces and isinstance(compiled._backend, ThunderCompiler)

    def branchy(x):  # a graph break: two graphs, each compiled by thunder
        x = torch.sin(x)
        return x + 1 if x.sum() > 0 else x - 1

    for dynamic in (True, False, None):
        torch._dynamo.reset()
        compiled = thunderfx(branchy, dynamic=dynamic, executors=[thunder.pytorch_executor])
        for sign, n in ((1, 2), (-1, 2), (1, 3), (1, 5)):
            x, x_ref = (torch.full((n,), sign * 1.5).requires_grad_() for _ in range(2))
            out, expected = compiled(x), branchy(x_ref)
            torch.testing.assert_close(out, expected)
            out.sum().backward()
            expected.sum().backward()
            torch.testing.assert_close(x.grad, x_ref.grad)
        infos = compiled._backend.subgraph_infos
        assert len(infos) >= 2 and all(thunder.last_traces(fn) for info in infos for fn in info.thunder_compiled_fns)

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 2))
    x = torch.randn(3, 4)
    compiled = thunderfx(model)
    out = compiled(x)
    torch.testing.assert_close(out, model(x))
    out.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for g, p in zip(grads, model.parameters()):
        torch.testing.assert_close(g, p.grad)


def test_dynamos_tag_activation_checkpoint_is_a_checkpoint():
    # what TorchDynamo makes of torch.utils.checkpoint (so what thunderfx hands thunder.jit for a checkpointed model):
    # the tracer ran it natively, and it failed inside torch
    import torch._higher_order_ops.wrap  # noqa: F401

    def body(x, y):
        return x.sin().cos().exp().mul(y)

    body_module = torch.fx.symbolic_trace(body)  # as Dynamo gives it

    def fn(x, y):
        return torch.ops.higher_order.tag_activation_checkpoint(body_module, x, y, use_reentrant=False)

    x, y = torch.randn(2, 2, requires_grad=True), torch.randn(2, 2, requires_grad=True)
    out = thunder.jit(fn)(x, y)
    assert {t.data_ptr() for t in out.grad_fn.saved_tensors} == {x.data_ptr(), y.data_ptr()}  # recomputed
    out.sum().backward()
    x_ref, y_ref = x.detach().requires_grad_(), y.detach().requires_grad_()
    expected = fn(x_ref, y_ref)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close((x.grad, y.grad), (x_ref.grad, y_ref.grad))

    class Checkpointed(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.utils.checkpoint.checkpoint(lambda t: self.linear(t).relu().sin(), x, use_reentrant=False)

    from thunder.dynamo import thunderfx

    model, x = Checkpointed(), torch.randn(3, 4)
    out = thunderfx(model)(x)
    out.sum().backward()
    grad = model.linear.weight.grad.clone()
    model.zero_grad()
    expected = model(x)
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(grad, model.linear.weight.grad)


def test_numbers_combined_by_operator_functions_and_powers_are_guarded():
    # lightning-thunder's test_elementwise_binary_operations_on_numbers (cache="symbolic values"): the exponent of
    # ``-0.7 ** n`` and the right operand of ``operator.add(True, n)`` were read natively, unrecorded, and later
    # calls returned the first call's result
    import itertools
    import operator

    programs = [lambda a, b: a**b, lambda a, b: operator.pow(a, b), lambda a, b: pow(a, b)]
    programs += [lambda a, b, op=op: op(a, b) for op in (operator.add, operator.mul, operator.lshift, operator.lt,
                                                         operator.truediv, operator.iadd)]  # fmt: skip
    for fn in programs:
        for order in (1, -1):
            jitted = thunder.jit(fn, cache="symbolic values")
            for a, b in list(itertools.product((-0.7, 0.3, 2, True), (0, 1, 2, 3)))[::order]:
                assert _outcome(jitted, a, b) == _outcome(fn, a, b), (a, b)


def _outcome(fn, *args) -> tuple:
    """The type and value of ``fn(*args)``, or the type of the exception it raises."""
    try:
        result = fn(*args)
    except Exception as e:
        return (type(e),)
    return type(result), result


# Round s21-ltests3: what the twenty-first session's run of lightning-thunder's test files found.


def test_vjp_differentiates_keyword_arguments():
    # lightning-thunder's test_transforms_vjp_2_2_kwarg: vjp(f)(primals, cotangents, z=z) failed (pullback took no
    # keyword arguments); the gradients of keyword arguments come after the positional ones, as a dict by name
    from thunder.core.transforms import vjp

    def f(x, y, *, z, scale):
        a = torch.asin(torch.add(0.2, torch.sin(x)))
        return a + y * scale, a * z

    x, y, z, g1, g2 = (torch.rand(2, 3, dtype=torch.float64) / 2 for _ in range(5))  # asin of at most 0.7
    leaves = [t.clone().requires_grad_() for t in (x, y, z)]
    expected_out = f(*leaves[:2], z=leaves[2], scale=3)
    expected_grads = torch.autograd.grad(expected_out, leaves, (g1, g2))
    for run in (vjp(f), thunder.jit(vjp(f))):
        out, grads = run((x, y), (g1, g2), z=z, scale=3)
        torch.testing.assert_close(out, expected_out)
        assert len(grads) == 3 and set(grads[2]) == {"z", "scale"} and grads[2]["scale"] is None
        torch.testing.assert_close((*grads[:2], grads[2]["z"]), expected_grads)
    _, grads = thunder.jit(vjp(lambda x: x * 2))((x,), (g1,))
    assert len(grads) == 1  # no keyword arguments: no dict


def test_torch_compile_executors_by_lightning_thunders_names():
    # lightning-thunder's test_torch_compile_executor.py imports torch_compile_ex, torch_compile_cat_ex and
    # torch_compile_xentropy_ex from thunder.executors.torch_compile; litgpt lists "torchcompile_cat" by name. The
    # last two take only CUDA tensors' ops (Note [Executors of a few ops]): on the CPU the torch executor runs all.
    from thunder.executors.torch_compile import torch_compile_cat_ex, torch_compile_ex, torch_compile_xentropy_ex

    assert thunder.extend.get_executor("torchcompile") is torch_compile_ex
    assert thunder.extend.get_executor("torchcompile_cat") is torch_compile_cat_ex
    assert thunder.extend.get_executor("torchcompile_xentropy") is torch_compile_xentropy_ex

    def rope_and_loss(x, cos, labels):
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        logits = (x * cos + rotated * cos).sum(1)
        return torch.nn.functional.cross_entropy(logits, labels)

    args = (torch.randn(3, 4, 6), torch.randn(3, 4, 6), torch.tensor([0, 5, 2]))
    for executors in (["torchcompile_cat", "torchcompile_xentropy"], [torch_compile_ex]):
        jitted = thunder.jit(rope_and_loss, executors=executors)
        torch.testing.assert_close(jitted(*args), rope_and_loss(*args))
        fused = "TorchCompile0" in str(thunder.last_traces(jitted)[-1])
        assert fused == (executors == [torch_compile_ex])
    # without a CUDA device they take nothing: the explorer lists them as unavailable, not as toggles that change nothing
    if not torch.cuda.is_available():
        assert "CUDA" in torch_compile_cat_ex.unavailable_reason and "CUDA" in torch_compile_xentropy_ex.unavailable_reason
        assert torch_compile_ex.unavailable_reason is None


def test_thunder_torch_checkpoint_recomputes_its_region():
    # lightning-thunder's test_torch_checkpoint calls thunder.torch.checkpoint(fn, x, y) (was: no such attribute):
    # torch.utils.checkpoint.checkpoint without reentrancy; only the region's inputs are saved for the backward
    def region(x, y):
        return x.sin().cos().exp().mul(y)

    def fn(x, y):
        return thunder.torch.checkpoint(region, x, y)

    x, y = torch.randn(2, 2, requires_grad=True), torch.randn(2, 2, requires_grad=True)
    out = thunder.jit(fn)(x, y)
    assert {t.data_ptr() for t in out.grad_fn.saved_tensors} == {x.data_ptr(), y.data_ptr()}
    out.sum().backward()
    x_ref, y_ref = x.detach().requires_grad_(), y.detach().requires_grad_()
    expected = fn(x_ref, y_ref)  # eagerly, outside thunder.jit, too
    expected.sum().backward()
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close((x.grad, y.grad), (x_ref.grad, y_ref.grad))
