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
