"""Programs from the libraries people train and run models with (accelerate, transformers, peft, diffusers,
litgpt, torchmetrics), compiled and compared with eager: values, dtypes, gradients, optimizer state."""

from __future__ import annotations

import pytest
import torch

import thunder


def _accelerate_mixed_precision_loop(jit: bool):
    accelerate = pytest.importorskip("accelerate")
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    GradientState._reset_state()
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
    if jit:
        model = thunder.jit(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(16, 8, generator=g), torch.randn(16, 1, generator=g))
    accelerator = accelerate.Accelerator(mixed_precision="bf16", gradient_accumulation_steps=2, cpu=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, torch.utils.data.DataLoader(data, batch_size=4))
    outputs = []
    try:
        for x, y in loader:
            with accelerator.accumulate(model):
                out = model(x)  # autocast from prepare, outputs in float32
                with accelerator.autocast():
                    out_in_autocast = model(x)
                loss = torch.nn.functional.mse_loss(out, y)
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model.parameters(), 0.5)
                optimizer.step()
                optimizer.zero_grad()
            outputs += [out.detach(), out_in_autocast.detach()]
    finally:
        AcceleratorState._reset_state(True)
        GradientState._reset_state()
    return outputs, [p.detach().clone() for p in model.parameters()]


def test_accelerate_mixed_precision_prepare():
    """accelerate's ``prepare`` wraps the model's forward in autocast (Note [A forward set on a compiled module])."""
    expected, expected_params = _accelerate_mixed_precision_loop(jit=False)
    actual, actual_params = _accelerate_mixed_precision_loop(jit=True)
    for e, a in zip(expected, actual, strict=True):
        assert a.dtype == e.dtype
        torch.testing.assert_close(a, e)
    torch.testing.assert_close(actual_params, expected_params)


def _accelerate_unwrapped(jit: bool) -> torch.Tensor:
    accelerate = pytest.importorskip("accelerate")
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state(True)
    torch.manual_seed(0)
    model = torch.nn.Linear(8, 8)
    try:
        accelerator = accelerate.Accelerator(mixed_precision="bf16", cpu=True)
        model = accelerator.unwrap_model(accelerator.prepare(thunder.jit(model) if jit else model), keep_fp32_wrapper=False)
    finally:
        AcceleratorState._reset_state(True)
        GradientState._reset_state()
    return model(torch.randn(2, 8, generator=torch.Generator().manual_seed(0)))


def test_accelerate_unwrap_model_restores_forward():
    """``unwrap_model(keep_fp32_wrapper=False)`` takes the autocast wrapper off again (Note [A forward set on a
    compiled module])."""
    torch.testing.assert_close(_accelerate_unwrapped(jit=True), _accelerate_unwrapped(jit=False))


def test_accelerate_hook_on_compiled_module():
    """``add_hook_to_module`` (big-model inference's device hooks) replaces the module's forward (Note [A forward set
    on a compiled module]); removing it restores the forward."""
    hooks = pytest.importorskip("accelerate.hooks")

    class Hook(hooks.ModelHook):
        def pre_forward(self, module, x):
            return (x * 2,), {}

        def post_forward(self, module, output):
            return output + 1

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    jm = thunder.jit(model)
    x = torch.randn(3, 4)
    results = []
    for m in (model, jm):
        hooks.add_hook_to_module(m, Hook())
        results.append(m(x))
        hooks.remove_hook_from_module(m)
        results.append(m(x))
    torch.testing.assert_close(results[2:], results[:2])


def _lora_model(seed: int):
    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(seed)
    config = transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=2)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj"], lora_dropout=0.1, fan_in_fan_out=True)
    return peft.get_peft_model(transformers.GPT2LMHeadModel(config), lora)


def test_peft_lora_trains_as_eager_with_dropout_from_the_same_seed():
    eager, compiled = _lora_model(0), _lora_model(0)
    jm = thunder.jit(compiled)
    optimizers = [torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-2) for m in (eager, compiled)]
    for step in range(3):
        ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(step))
        losses = []
        for model, optimizer in zip((eager, jm), optimizers):
            torch.manual_seed(100 + step)
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            losses.append(loss)
        torch.testing.assert_close(losses[1], losses[0])
        for p, q in zip(compiled.parameters(), eager.parameters()):
            torch.testing.assert_close(p, q)
    assert thunder.cache_misses(jm) == 1


def test_peft_adapters_switched_between_calls_give_eager_s_values():
    peft = pytest.importorskip("peft")
    model = _lora_model(0)
    model.add_adapter("other", peft.LoraConfig(r=2, lora_alpha=4, target_modules=["c_attn"], fan_in_fan_out=True))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_()
    model.eval()
    jm = thunder.jit(model)
    ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(0))

    def check():
        torch.testing.assert_close(jm(input_ids=ids).logits, model(input_ids=ids).logits)

    check()
    model.set_adapter("other")
    check()
    model.set_adapter("default")
    check()
    with model.disable_adapter():
        check()
    model.merge_adapter()
    check()
    model.unmerge_adapter()
    check()


def test_peft_generate_runs_the_model_compiled():
    """``PeftModel.generate`` calls ``get_base_model().generate(...)``, whose calls are of the inner model, not of the
    PeftModel: they ran eagerly (0 compiles). Each call of a submodule made while a method of the compiled module runs
    is compiled (Note [Submodules called by a method of a compiled module]): as the plain model's, prefill and one
    decoding entry, and eager's tokens."""
    model = _lora_model(0).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_()
    ids = torch.randint(0, 50, (2, 6), generator=torch.Generator().manual_seed(0))
    kwargs = dict(max_new_tokens=8, do_sample=False, pad_token_id=0)
    expected = model.generate(input_ids=ids, **kwargs)
    jm = thunder.jit(model)
    assert torch.equal(jm.generate(input_ids=ids, **kwargs), expected)
    assert thunder.cache_misses(jm) == 2 and thunder.cache_hits(jm) == 6
    assert torch.equal(jm.generate(input_ids=ids, **kwargs), expected)
    assert thunder.cache_misses(jm) == 2
    model(input_ids=ids)  # the original modules, called directly, stay eager
    model.get_base_model()(input_ids=ids)
    assert thunder.cache_hits(jm) + thunder.cache_misses(jm) == 16


def test_peft_dora_on_gpt2_trains_as_eager():
    """DoRA with ``fan_in_fan_out`` computes with ``nn.Parameter(weight.T)`` in its forward: the second call failed
    with MakesParameters (Note [A parameter the program makes and uses]). Losses, gradients and steps are eager's."""
    import copy

    peft = pytest.importorskip("peft")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(vocab_size=50, n_embd=16, n_layer=2, n_head=2)
    lora = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["c_attn", "c_proj"], fan_in_fan_out=True, use_dora=True)
    eager = peft.get_peft_model(transformers.GPT2LMHeadModel(config), lora)
    with torch.no_grad():
        for name, p in eager.named_parameters():
            if "lora_B" in name:
                p.normal_()
    compiled = copy.deepcopy(eager)
    jm = thunder.jit(compiled)
    optimizers = [torch.optim.AdamW([p for p in m.parameters() if p.requires_grad], lr=1e-2) for m in (eager, compiled)]
    for step in range(3):
        ids = torch.randint(0, 50, (2, 8), generator=torch.Generator().manual_seed(step))
        losses = []
        for model in (eager, jm):
            torch.manual_seed(100 + step)  # GPT-2's dropout
            losses.append(model(input_ids=ids, labels=ids).loss)
            losses[-1].backward()
        torch.testing.assert_close(losses[1], losses[0])
        for (name, p), q in zip(compiled.named_parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(p.grad, q.grad, msg=name)
        for optimizer in optimizers:
            optimizer.step()
            optimizer.zero_grad()
    assert thunder.cache_misses(jm) == 1
