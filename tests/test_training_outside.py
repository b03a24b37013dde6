"""PyTorch's training utilities and function transforms used around a ``thunder.jit`` module, against eager."""

import copy
import io
import pickle

import pytest
import torch
from torch.func import functional_call
from torch.optim import lr_scheduler

import thunder
from thunder.extend import get_executor

_HOOK_CALLS: list[tuple[int, ...]] = []


def _record_output_shape(module, args, output):  # a module-level hook: hooks pickle by name, as in eager
    _HOOK_CALLS.append(tuple(output.shape))


def test_functional_call_on_a_jitted_module_uses_the_given_parameters():
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    jm = thunder.jit(model)
    x = torch.randn(2, 4)
    params = {name: p.detach() * 2 for name, p in model.named_parameters()}
    weight = model.weight
    for _ in range(3):
        torch.testing.assert_close(functional_call(jm, params, (x,)), functional_call(model, params, (x,)))
    assert model.weight is weight  # the Parameter is put back after the call
    torch.testing.assert_close(jm(x), model(x))


def test_functional_call_on_a_jitted_module_with_a_tensor_given_for_a_buffer():
    torch.manual_seed(0)
    model = torch.nn.BatchNorm1d(3).eval()
    jm = thunder.jit(model)
    x = torch.randn(5, 3)
    given = {"running_mean": torch.randn(3), "weight": torch.rand(3)}
    torch.testing.assert_close(functional_call(jm, given, (x,)), functional_call(model, given, (x,)))
    torch.testing.assert_close(jm(x), model(x))


def test_torch_save_of_a_jitted_module_loads_a_compiled_module_in_the_same_state():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    jm = thunder.jit(model)
    jm.register_forward_hook(_record_output_shape)
    x = torch.randn(5, 4)
    jm(x).sum().backward()  # after a call: the executors' tables hold the functions they ran
    jm.eval()
    buffer = io.BytesIO()
    torch.save(jm, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=False)
    assert isinstance(loaded, type(jm)) and not loaded.training and not loaded._model.training
    torch.testing.assert_close(loaded.state_dict(), jm.state_dict())
    _HOOK_CALLS.clear()
    for _ in range(3):
        torch.testing.assert_close(loaded(x), model(x))
    assert _HOOK_CALLS == [(5, 3)] * 3
    assert thunder.cache_hits(loaded) == 2


def test_a_registered_executor_pickles_as_itself():
    torch_ex = get_executor("torch")
    assert pickle.loads(pickle.dumps(torch_ex)) is torch_ex


_OPTIMIZERS = {
    "SGD": lambda params, lr, foreach: torch.optim.SGD(params, lr=lr, momentum=0.9, foreach=foreach),
    "Adam": lambda params, lr, foreach: torch.optim.Adam(params, lr=lr, foreach=foreach),
    "AdamW": lambda params, lr, foreach: torch.optim.AdamW(params, lr=lr, foreach=foreach),
}
_SCHEDULERS = {
    "StepLR": lambda opt: lr_scheduler.StepLR(opt, step_size=2, gamma=0.5),
    "CosineAnnealingLR": lambda opt: lr_scheduler.CosineAnnealingLR(opt, T_max=6),
    "LambdaLR": lambda opt: lr_scheduler.LambdaLR(opt, lambda epoch: 1 / (epoch + 1)),
    "OneCycleLR": lambda opt: lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=7),  # momentum and betas too
}


def _scheduled_steps(optimizer: str, scheduler: str, *, foreach: bool, lr, steps: int = 6) -> int:
    """Trains a model with ``thunder.jit(opt.step)`` and a copy eagerly, side by side; the parameters must be
    eager's bitwise after every step. Returns the jitted step's cache misses."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    eager_model = copy.deepcopy(model)
    opt = _OPTIMIZERS[optimizer](model.parameters(), lr() if callable(lr) else lr, foreach)
    eager_opt = _OPTIMIZERS[optimizer](eager_model.parameters(), lr() if callable(lr) else lr, foreach)
    sched, eager_sched = _SCHEDULERS[scheduler](opt), _SCHEDULERS[scheduler](eager_opt)
    jstep = thunder.jit(opt.step)
    x = torch.randn(5, 4)
    for _ in range(steps):
        for m in (model, eager_model):
            m.zero_grad()
            m(x).pow(2).sum().backward()
        jstep()
        eager_opt.step()
        sched.step()
        eager_sched.step()
        for p, e in zip(model.parameters(), eager_model.parameters()):
            torch.testing.assert_close(p, e, rtol=0, atol=0)
    return thunder.cache_misses(jstep)


@pytest.mark.parametrize("scheduler", list(_SCHEDULERS))
@pytest.mark.parametrize("foreach", [False, True], ids=["for-loop", "foreach"])
@pytest.mark.parametrize("optimizer", list(_OPTIMIZERS))
def test_a_learning_rate_schedule_does_not_recompile_the_optimizer_step_every_step(optimizer, foreach, scheduler):
    # The float learning rate (and OneCycleLR's momentum or betas) a scheduler changes every step turns symbolic
    # once it changed: the first call, the one where the momentum buffers appear, and the first call with a new
    # learning rate compile; every later step hits (8 compiles in 8 steps before).
    assert _scheduled_steps(optimizer, scheduler, foreach=foreach, lr=0.1) <= 3


@pytest.mark.parametrize("scheduler", ["CosineAnnealingLR", "OneCycleLR"])
@pytest.mark.parametrize(
    "optimizer, foreach", [("SGD", False), ("SGD", True), ("Adam", False), ("AdamW", False)]
)  # eager refuses a tensor learning rate for a foreach Adam
def test_a_tensor_learning_rate_schedule_stays_eagers(optimizer, foreach, scheduler):
    # The scheduler fills the 0-d tensor in place: an input, read on every call.
    assert _scheduled_steps(optimizer, scheduler, foreach=foreach, lr=lambda: torch.tensor(0.1)) <= 2


def test_a_number_divided_by_a_tensor_rounds_as_eager():
    # Eager's ``Tensor.__rtruediv__`` is ``t.reciprocal() * n``: two roundings, not ``torch.div(n, t)``'s one.
    def f(t):
        return 0.01 / t, 3 / t

    t = torch.linspace(0.05, 0.95, 1000)
    for actual, expected in zip(thunder.jit(f)(t), f(t)):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)
    ti = torch.arange(1, 100)
    torch.testing.assert_close(thunder.jit(f)(ti), f(ti), rtol=0, atol=0)


@pytest.mark.parametrize("foreach", [False, True], ids=["for-loop", "foreach"])
def test_zero_grad_keeping_the_grad_tensors_in_a_jitted_step(foreach):
    # ``zero_grad(set_to_none=False)`` asks each ``.grad`` for its ``grad_fn`` (None: a leaf), then zeroes it in place.
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    eager_model = copy.deepcopy(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=foreach)
    eager_opt = torch.optim.SGD(eager_model.parameters(), lr=0.1, momentum=0.9, foreach=foreach)

    def step(opt):
        opt.step()
        opt.zero_grad(set_to_none=False)

    jstep = thunder.jit(step)
    x = torch.randn(5, 4)
    for _ in range(3):
        model(x).pow(2).sum().backward()
        eager_model(x).pow(2).sum().backward()
        grads = [p.grad for p in model.parameters()]
        jstep(opt)
        step(eager_opt)
        assert all(p.grad is g for p, g in zip(model.parameters(), grads))  # the same tensors, zeroed
        for p, e in zip(model.parameters(), eager_model.parameters()):
            torch.testing.assert_close(p, e, rtol=0, atol=0)
            torch.testing.assert_close(p.grad, e.grad, rtol=0, atol=0)
    assert thunder.cache_misses(jstep) == 2  # the momentum buffers appear in the second


def test_grad_fn_of_a_tensor_autograd_made_is_a_clear_error():
    def f(x):
        y = x * 2
        return y.grad_fn is None

    with pytest.raises(thunder.core.errors.UnsupportedOpError, match="grad_fn"):
        thunder.jit(f)(torch.randn(2, requires_grad=True))
    assert thunder.jit(f)(torch.randn(2)) is f(torch.randn(2))


def test_a_jitted_grad_scaler_step_skips_on_inf_gradients_and_resumes_as_eager():
    # ``scaler.step(opt)`` unscales the gradients and checks them (``_amp_foreach_non_finite_check_and_unscale_``),
    # steps only when they are finite (``found_inf.item()``: a step that skips and one that does not are one entry
    # each), and ``scaler.update()`` backs the scale off or grows it (``_amp_update_scale_``).
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 3)
    eager_model = copy.deepcopy(model)

    def make(m):
        opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        scaler = torch.amp.GradScaler(
            "cpu", init_scale=2.0**10, growth_factor=3.0, backoff_factor=0.3, growth_interval=2
        )
        return opt, scaler

    def step(scaler, opt):
        scaler.step(opt)
        scaler.update()

    (opt, scaler), (eager_opt, eager_scaler) = make(model), make(eager_model)
    jstep = thunder.jit(step)
    for i in range(7):
        x = torch.randn(5, 4)
        if i in (2, 5):
            x[0, 0] = float("inf")
        for m, o, s, f in ((model, opt, scaler, jstep), (eager_model, eager_opt, eager_scaler, step)):
            o.zero_grad()
            s.scale(m(x).pow(2).sum()).backward()
            f(s, o)
        assert scaler.get_scale() == eager_scaler.get_scale()
        assert scaler._growth_tracker.item() == eager_scaler._growth_tracker.item()
        for p, e in zip(model.parameters(), eager_model.parameters()):
            torch.testing.assert_close(p, e, rtol=0, atol=0)
    assert thunder.cache_misses(jstep) <= 3


def test_a_jitted_module_s_forward_has_the_original_s_signature():
    """Libraries read a model's inputs from ``inspect.signature(model.forward)`` and from its class's forward
    (Note [A compiled module's forward has the original's signature]); both were ``(*args, **kwargs)``."""
    import inspect

    transformers = pytest.importorskip("transformers")
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=1, n_head=2))
    for m in (torch.nn.Linear(2, 3), model, torch.nn.Sequential(torch.nn.Linear(2, 3))):
        jm = thunder.jit(m)
        assert inspect.signature(jm.forward) == inspect.signature(m.forward)
        assert inspect.signature(type(jm).forward) == inspect.signature(type(m).forward)
        assert isinstance(jm, thunder.ThunderModule) and repr(jm).startswith("ThunderModule(")
    assert transformers.utils.find_labels(type(thunder.jit(model))) == ["labels"]
    x = torch.randn(1, 2)
    linear = torch.nn.Linear(2, 3)
    jm = thunder.jit(linear)
    torch.testing.assert_close(jm.forward(x), linear(x))
    torch.testing.assert_close(copy.deepcopy(jm).forward(x), linear(x))
    torch.testing.assert_close(pickle.loads(pickle.dumps(jm))(x), linear(x))


class _TokenDataset(torch.utils.data.Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        ids = torch.randint(0, 50, (8,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids}


def test_hugging_face_trainer_trains_a_jitted_model_as_eager(tmp_path):
    """``Trainer`` keeps the dataset columns the model's forward names: with a jitted model it dropped them all and
    refused the empty batch; its evaluation found no label argument and computed no loss. Losses (gradient
    accumulation, clipping, AdamW, schedule), the evaluation's loss and parameters equal eager's."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")

    def train(jit: bool):
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=2))
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / str(jit)), per_device_train_batch_size=4, max_steps=3, logging_steps=1,
            report_to=[], seed=0, use_cpu=True, save_strategy="no", gradient_accumulation_steps=2, max_grad_norm=0.5,
            dataloader_num_workers=0, disable_tqdm=True,
        )
        trainer = transformers.Trainer(model=thunder.jit(model) if jit else model, args=args, train_dataset=_TokenDataset())
        trainer.train()
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        return losses, trainer.evaluate(_TokenDataset())["eval_loss"], model

    eager_losses, eager_eval_loss, eager_model = train(False)
    losses, eval_loss, model = train(True)
    assert len(losses) == 3
    torch.testing.assert_close(losses, eager_losses)
    torch.testing.assert_close(eval_loss, eager_eval_loss)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q)


def test_hugging_face_trainer_saves_checkpoints_and_resumes_a_jitted_model_as_eager(tmp_path):
    """``Trainer`` saves a model through ``save_pretrained`` when it is a ``PreTrainedModel`` (or unwraps
    torch.compile's ``OptimizedModule`` to one); a jitted model was neither, and its state dict, with GPT-2's tied
    embedding, failed in safetensors: no checkpoint (``save_steps``), no ``save_model``. A compiled module is an
    instance of the original's class (Note [A compiled module is an instance of the original's class]): checkpoints,
    loading the best one at the end, ``save_model`` and resuming give eager's losses and weights."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")

    def train(jit: bool, resume: bool = False):
        torch.manual_seed(0)
        model = transformers.GPT2LMHeadModel(transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=2))
        args = transformers.TrainingArguments(
            output_dir=str(tmp_path / str(jit)), per_device_train_batch_size=4, max_steps=4, logging_steps=1,
            report_to=[], seed=0, use_cpu=True, save_strategy="steps", save_steps=2, eval_strategy="steps",
            eval_steps=2, load_best_model_at_end=True, learning_rate=1e-2, dataloader_num_workers=0, disable_tqdm=True,
        )
        jm = thunder.jit(model) if jit else model
        trainer = transformers.Trainer(model=jm, args=args, train_dataset=_TokenDataset(), eval_dataset=_TokenDataset())
        trainer.train(resume_from_checkpoint=str(tmp_path / str(jit) / "checkpoint-2") if resume else None)
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        return trainer, model, jm, losses

    eager_trainer, eager_model, _, eager_losses = train(False)
    trainer, model, jm, losses = train(True)
    assert isinstance(jm, thunder.ThunderModule) and isinstance(jm, transformers.PreTrainedModel)
    assert trainer.state.best_model_checkpoint.endswith("checkpoint-4")
    torch.testing.assert_close(losses, eager_losses)
    for p, q in zip(model.parameters(), eager_model.parameters()):
        torch.testing.assert_close(p, q)
    trainer.save_model(str(tmp_path / "saved"))
    loaded = transformers.GPT2LMHeadModel.from_pretrained(str(tmp_path / "saved"))
    for p, q in zip(loaded.parameters(), model.parameters(), strict=True):
        torch.testing.assert_close(p, q, rtol=0, atol=0)
    _, eager_resumed, _, eager_resumed_losses = train(False, resume=True)
    _, resumed, _, resumed_losses = train(True, resume=True)
    torch.testing.assert_close(resumed_losses, eager_resumed_losses)
    for p, q in zip(resumed.parameters(), eager_resumed.parameters()):
        torch.testing.assert_close(p, q)
