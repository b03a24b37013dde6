"""diffusers' models from tiny configs with random weights, thunder against eager as ``sweep_timm_models.py`` checks
its models (forward in ``eval()``, a training step with every parameter's gradient, two more training calls that
must hit the cache): a UNet2DConditionModel with cross-attention, an AutoencoderKL, a DiT and a Transformer2DModel,
and DDIM sampling loops of a tiny UNet2DModel, the scheduler's steps inside the jitted function (``ddim_inside``) or
the jitted UNet called from eager's loop (``ddim_outside``, eval only: the samples compared).

Run: ``python -m benchmarks.sweep_diffusers_models [--models unet2d_condition,ddim_inside] [--timeout 300]``.
"""

from __future__ import annotations

import argparse
import json


def _g():
    import torch

    return torch.Generator().manual_seed(1)


def _unet2d_condition():
    import torch
    from diffusers import UNet2DConditionModel

    model = UNet2DConditionModel(block_out_channels=(32, 64), layers_per_block=1, sample_size=16, in_channels=4,
                                 out_channels=4, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                                 up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                                 attention_head_dim=8, norm_num_groups=16)  # fmt: skip
    args = (torch.randn(2, 4, 16, 16, generator=_g()), torch.tensor([10, 500]), torch.randn(2, 7, 32, generator=_g()))
    return model, args, args


def _autoencoder_kl():
    import torch
    from diffusers import AutoencoderKL

    model = AutoencoderKL(block_out_channels=(32, 64), in_channels=3, out_channels=3, latent_channels=4,
                          down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                          norm_num_groups=16)  # fmt: skip
    x = torch.randn(2, 3, 32, 32, generator=_g())
    return model, (x,), (x,)


def _dit():
    import torch
    from diffusers import DiTTransformer2DModel

    model = DiTTransformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=8,
                                  num_layers=2, sample_size=8, patch_size=2, num_embeds_ada_norm=1000)  # fmt: skip
    args = (torch.randn(2, 4, 8, 8, generator=_g()), torch.tensor([10, 500]), torch.tensor([1, 7]))
    return model, args, args


def _transformer2d():
    import torch
    from diffusers import Transformer2DModel

    model = Transformer2DModel(num_attention_heads=2, attention_head_dim=8, in_channels=16, num_layers=2,
                               cross_attention_dim=32, norm_num_groups=8)  # fmt: skip
    args = (torch.randn(2, 16, 8, 8, generator=_g()), torch.randn(2, 7, 32, generator=_g()))
    return model, args, args


def _tiny_unet():
    from diffusers import UNet2DModel

    return UNet2DModel(sample_size=16, in_channels=3, out_channels=3, block_out_channels=(16, 32), layers_per_block=1,
                       norm_num_groups=8, down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"))  # fmt: skip


def _ddim_inside():
    import torch
    from diffusers import DDIMScheduler

    class Sampler(torch.nn.Module):
        """A DDIM sampling loop of 3 steps over a UNet."""

        def __init__(self):
            super().__init__()
            self.unet = _tiny_unet()
            self.scheduler = DDIMScheduler(num_train_timesteps=1000)
            self.scheduler.set_timesteps(3)

        def forward(self, x):
            for t in self.scheduler.timesteps:
                eps = self.unet(x, t).sample
                x = self.scheduler.step(eps, t, x).prev_sample
            return x

    x = torch.randn(2, 3, 16, 16, generator=_g())
    return Sampler(), (x,), (x,)


def check_ddim_outside() -> dict:
    """Eager's DDIM loop calling the jitted UNet (and calling it on three timesteps: one compilation for all)."""
    import copy

    import torch
    from diffusers import DDIMScheduler

    import thunder

    torch.manual_seed(0)
    unet = _tiny_unet().eval()
    scheduler = DDIMScheduler(num_train_timesteps=1000)
    scheduler.set_timesteps(3)

    def sample(model, x):
        for t in scheduler.timesteps:
            x = scheduler.step(model(x, t).sample, t, x).prev_sample
        return x

    x = torch.randn(2, 3, 16, 16, generator=_g())
    with torch.no_grad():
        expected = sample(copy.deepcopy(unet), x)
        jm = thunder.jit(unet)
        got = sample(jm, x)
        misses = thunder.cache_misses(jm)
        sample(jm, x)
    result = {"eval_maxdiff": (got - expected).abs().max().item(), "misses_first_second": [misses,
              thunder.cache_misses(jm) - misses]}  # fmt: skip
    result["status"] = "WRONG" if result["eval_maxdiff"] > 1e-3 else (
        "recompiles" if result["misses_first_second"][1] else "ok")
    return result


CASES = {"unet2d_condition": _unet2d_condition, "autoencoder_kl": _autoencoder_kl, "dit": _dit,
         "transformer2d": _transformer2d, "ddim_inside": _ddim_inside, "ddim_outside": None}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", help="comma-separated keys of CASES (default: all)")
    ap.add_argument("--timeout", type=float, default=300.0, help="CPU seconds per model")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.child:
        import warnings

        import thunder
        from benchmarks.sweep_hf_models import error_text
        from benchmarks.sweep_timm_models import check

        warnings.simplefilter("error", thunder.EagerRunWarning)
        make = CASES[opts.child]
        try:
            row = check(opts.child, 0, make=make) if make else check_ddim_outside()
        except Exception as e:  # noqa: BLE001
            row = {"status": "error", "why": error_text(e)}
        print(json.dumps({"model": opts.child, **row}))
        return
    from benchmarks.sweep_hf_models import child_row, print_summary

    rows = []
    for name in opts.models.split(",") if opts.models else CASES:
        row = child_row("benchmarks.sweep_diffusers_models", [name], name, opts.timeout)
        print(json.dumps(row), flush=True)
        rows.append(row)
    print_summary(rows)


if __name__ == "__main__":
    main()
