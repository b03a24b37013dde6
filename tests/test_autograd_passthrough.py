"""Results are connected to torch autograd (through thunder's backward, or torch's own where the
split falls back); ``disable_torch_autograd`` disconnects them; gradients reach what eager's reach (None where no
cotangent arrives, hooks on returned tensors, functorch wrappers). See also ``test_autograd.py``."""

from __future__ import annotations

import pytest
import torch

import thunder


def f(a, b):
    return (torch.sin(a) * b + a).sum()


def test_backward_matches_eager():
    a = torch.randn(3, 4, requires_grad=True)
    b = torch.randn(3, 4, requires_grad=True)
    ae, be = a.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    thunder.jit(f)(a, b).backward()
    f(ae, be).backward()
    torch.testing.assert_close(a.grad, ae.grad)
    torch.testing.assert_close(b.grad, be.grad)


def test_disable_torch_autograd():
    a = torch.randn(3, requires_grad=True)
    jf = thunder.jit(f, disable_torch_autograd=True)
    out = jf(a, torch.randn(3))
    assert not out.requires_grad
    assert "@torch.no_grad()" in str(thunder.last_traces(jf)[-1])


def test_no_grad_block_inside_the_function_matches_eager():
    def g(x):
        with torch.no_grad():
            y = x * 2  # not connected to autograd
        return (y + x).sum()

    x = torch.randn(3, requires_grad=True)
    xe = x.detach().clone().requires_grad_()
    jg = thunder.jit(g)
    jg(x).backward()
    g(xe).backward()
    torch.testing.assert_close(x.grad, xe.grad)  # ones, not threes
    assert torch.is_grad_enabled()
    with torch.no_grad():  # the recorded switches assumed grad was on: a different mode recompiles
        assert not jg(x).requires_grad
    assert thunder.cache_misses(jg) == 2


def test_failure_inside_no_grad_restores_grad_mode():
    def g(x):
        with torch.no_grad():
            return x @ torch.ones(5)  # shapes do not match

    with pytest.raises(ValueError):
        thunder.jit(g)(torch.randn(3, 4))
    assert torch.is_grad_enabled()


def _hidden_and_logits(x, w):
    h = x * 2
    return h, (h.sin() @ w), (x * 3)  # the logits are computed from h; x * 3 from nothing returned


def _hooked_backward(fn, x, w, position, loss_of):
    outs = fn(x, w)
    seen = []
    outs[position].register_hook(lambda g: seen.append(g.clone()))
    outs[position].retain_grad()
    loss_of(outs).backward()
    return seen, outs[position].grad, x.grad


@pytest.mark.parametrize(
    "position, loss_of",
    [(1, lambda o: o[1].sum()), (2, lambda o: sum(t.sum() for t in o)), (0, lambda o: o[0].sum())],
    ids=["logits", "unconnected", "only-its-own-gradient"],
)
def test_hooks_on_returned_tensors_see_eagers_gradient(position, loss_of):
    torch.manual_seed(0)
    x, w = torch.randn(3, 4), torch.randn(4, 2)
    got = _hooked_backward(thunder.jit(_hidden_and_logits), x.requires_grad_(), w, position, loss_of)
    expected = _hooked_backward(_hidden_and_logits, x.detach().requires_grad_(), w, position, loss_of)
    torch.testing.assert_close(got, expected)


@pytest.mark.parametrize("hook", ["register_hook", "retain_grad"])
def test_a_hook_on_a_returned_tensor_that_other_returned_tensors_are_computed_from_is_refused(hook):
    # Note [Outputs that feed other outputs]: the hook would see only the gradient from outside (eager: the sum)
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2)
    h, logits, _ = thunder.jit(_hidden_and_logits)(x, w)
    if hook == "register_hook":
        h.register_hook(lambda g: g)
    else:
        h.retain_grad()
    with pytest.raises(
        RuntimeError,
        match=r"returned tensor #0 .* has a hook or retain_grad\(\), and its returned tensor\(s\) #1 are computed from it",
    ):
        (h.sum() + logits.sum()).backward()


def test_a_tensor_leaked_from_a_functorch_transform_behaves_as_in_eager():
    # The autograd function is entered through torch's C entry, which does not unwrap dead
    # functorch wrappers itself; without unwrapping them the backward silently gives no gradient.
    leaked = []

    def f(x):
        leaked.append(x * 1)
        return x.sum()

    torch.func.grad(f)(torch.randn(3))
    w = leaked[0].requires_grad_()
    jfn = thunder.jit(lambda a: (a * a).sum())
    for fn in (lambda a: (a * a).sum(), jfn):
        with pytest.raises(RuntimeError, match="does not require grad and does not have a grad_fn"):
            fn(w).backward()


def test_under_a_differentiating_functorch_transform_the_error_says_what_works():
    # torch's error spoke of a ``setup_context`` the user never wrote (tests/test_training_probes2.py)
    jfn = thunder.jit(lambda a: (a * a).sum())
    with pytest.raises(RuntimeError, match="not supported over a function compiled by thunder.jit.*torch.autograd.grad"):
        torch.func.grad(jfn)(torch.randn(3, requires_grad=True))


def test_outputs_without_a_gradient_add_nothing_as_in_eager():
    """A returned value the loss does not use (a model's logits beside its loss) gets no cotangent:
    the backward adds nothing for it (Note [Absent cotangents]). Eager adds only the gradients that
    exist, so a -0.0 in the other gradient stays -0.0 (adding a zero cotangent made it 0.0)."""
    c = torch.tensor([-0.0, 1.0, -2.0])

    def f(x):
        logits = x * c
        return logits.sum() * 1.0, logits

    x = torch.randn(3, requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    jf = thunder.jit(f, executors=["torch"])
    for _ in range(2):
        jf(x)[0].backward()
        f(x_ref)[0].backward()
    assert torch.equal(x.grad, x_ref.grad) and torch.equal(torch.signbit(x.grad), torch.signbit(x_ref.grad))
    assert " is None else torch.add(" in str(thunder.last_backward_traces(jf)[-1])
    x.grad = x_ref.grad = None
    jf(x)[1].sum().backward()  # the other output's gradient, with the first one absent
    f(x_ref)[1].sum().backward()
    assert torch.equal(x.grad, x_ref.grad)


def test_parameters_that_only_feed_unused_outputs_get_no_gradient_as_in_eager():
    # Optimizers tell None from zeros (AdamW's weight decay skips parameters without a gradient).
    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.Linear(3, 3), torch.nn.Linear(3, 3)

        def forward(self, x):
            return self.a(x), self.b(x), x * 2

    torch.manual_seed(0)
    model = TwoHeads()
    twin = TwoHeads()
    twin.load_state_dict(model.state_dict())
    jm = thunder.jit(model)
    opt, opt_twin = (torch.optim.AdamW(m.parameters(), lr=0.1, weight_decay=0.5) for m in (model, twin))
    x = torch.randn(2, 3, requires_grad=True)
    for head in (0, 1, 0):
        for o in (opt, opt_twin):
            o.zero_grad(set_to_none=True)
        jm(x)[head].sum().backward()
        twin(x)[head].sum().backward()
        assert [p.grad is None for p in model.parameters()] == [p.grad is None for p in twin.parameters()]
        opt.step()
        opt_twin.step()
        for p, q in zip(model.parameters(), twin.parameters()):
            torch.testing.assert_close(p, q)


def test_a_value_read_only_for_its_metadata_carries_no_gradient_back():
    # DeepSeek-V4's compressor: ``kv`` goes to a cache the loss does not use, and ``kv.new_zeros(...)`` (which reads
    # kv but has no gradient) to the loss. Eager leaves the weight's .grad None; it was zeros (AdamW then decays it).
    class Store:
        pass

    def f(x, w, store):
        kv = x @ w
        store.kv = kv
        return (x * 3).sum() + kv.new_zeros((2, 3)).sum() + (kv > 0).float().sum()

    x, w = torch.randn(2, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    f(x, w, Store()).backward()
    expected_x, expected_w = x.grad, w.grad
    x.grad = None
    thunder.jit(f)(x, w, Store()).backward()
    assert expected_w is None and w.grad is None
    assert torch.equal(x.grad, expected_x)


@pytest.mark.parametrize("allow_unused", [True, False])
def test_a_gradient_asked_of_a_returned_tensor_that_feeds_others_is_refused(allow_unused):
    # Note [Gradients asked of an output that feeds others]: torch's engine takes h's gradient at the compiled
    # function's node without running it, so the part through the logits was missing (None with allow_unused)
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2)
    h, logits, _ = thunder.jit(_hidden_and_logits)(x, w)
    with pytest.raises(RuntimeError, match=r"gradient was asked of .* returned tensor\(s\) #0 .* returned tensor #1, computed from them"):
        torch.autograd.grad(logits.sum(), h, allow_unused=allow_unused)


@pytest.mark.parametrize(
    "ask",
    [
        lambda h, logits, w: torch.autograd.grad(logits.sum(), [h, w], allow_unused=True),
        lambda h, logits, w: torch.autograd.grad(logits.sum(), [h, w], materialize_grads=True),
        lambda h, logits, w: torch.autograd.grad(logits.sum() + h.sum(), [h, w]),
        lambda h, logits, w: torch.autograd.grad(
            logits.sum() + h.sum(), [torch.autograd.graph.get_gradient_edge(h), w]
        ),
    ],
    ids=["allow_unused", "materialize_grads", "h used outside", "gradient edge"],
)
def test_a_gradient_asked_of_a_returned_tensor_that_feeds_others_beside_an_input_is_refused(ask):
    # Note [Gradients asked of an output that feeds others]: the node's backward runs (w's gradient), so the watch
    # let it pass, and h's gradient was only the part from outside: None, zeros, or ones instead of eager's
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    h, logits, _ = thunder.jit(_hidden_and_logits)(x, w)
    with pytest.raises(RuntimeError, match=r"gradient was asked of .* returned tensor\(s\) #0 .* returned tensor #1"):
        ask(h, logits, w)


def test_a_gradient_asked_of_a_loss_input_returned_beside_the_loss_is_refused():
    def loss_and_logits(x, w):
        logits = x @ w
        return torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 1])), logits

    x, w = torch.randn(3, 4), torch.randn(4, 2, requires_grad=True)
    loss, logits = thunder.jit(loss_and_logits)(x, w)
    with pytest.raises(RuntimeError, match=r"returned tensor\(s\) #1 .* returned tensor #0, computed from them"):
        torch.autograd.grad(loss, logits)


def test_gradients_asked_where_nothing_is_missing_are_eagers():
    # the watch stays quiet where the node's backward runs, or where no output computed from h carries gradient
    x, w = torch.randn(3, 4, requires_grad=True), torch.randn(4, 2, requires_grad=True)
    jf = thunder.jit(_hidden_and_logits)
    for fn in (_hidden_and_logits, jf):
        h, logits, _ = fn(x, w)
        (gh,) = torch.autograd.grad(h.sum(), h, retain_graph=True)
        torch.testing.assert_close(gh, torch.ones_like(h))
        (gw,) = torch.autograd.grad(logits.sum() + h.sum(), w)
        torch.testing.assert_close(gw, torch.autograd.grad(_hidden_and_logits(x, w)[1].sum(), w)[0])


def test_the_gradients_a_backward_collects_are_seen_from_an_engine_thread_too():
    # On CUDA the engine runs the compiled function's node on a device thread of its own, where no frame of the
    # backward's caller is: the watch looks at the backwards in flight on every thread (checked here from a thread
    # started inside a backward hook).
    import threading

    from thunder.executors.torch_autograd import _collects_gradient_of

    x = torch.randn(3, requires_grad=True)
    h = x * 2
    out = h.sin()
    seen = {}

    def probe():
        seen["asked"], seen["other output"] = (_collects_gradient_of(h.grad_fn, p) for p in ((0,), (1,)))

    def hook(grad):
        thread = threading.Thread(target=probe)
        thread.start()
        thread.join()

    out.register_hook(hook)
    torch.autograd.grad(out.sum(), [h, x])
    assert seen == {"asked": True, "other output": False}
