"""The two ops of ``torch.amp.GradScaler``'s ``step``/``update`` as the tensor ops their CPU kernels compute, which
the tracer records op by op (``thunder.jit(lambda: (scaler.step(opt), scaler.update()))``).

``_amp_foreach_non_finite_check_and_unscale_(grads, found_inf, inv_scale)`` multiplies each gradient by ``inv_scale``
in place and sets ``found_inf`` to 1 where a gradient held an inf or a NaN; ``_amp_update_scale_`` backs the scale off
after such a step and grows it after ``growth_interval`` steps without one (its products are taken in float64 and
rounded to the scale's dtype, as the kernel's ``float * double``). ``GradScaler.step`` then asks ``found_inf.item()``
whether to step the optimizer: a data-dependent value, so a step that skips and one that does not run one entry each.

Layer: language. Imports: core.
"""

from __future__ import annotations

import torch

from thunder.core.symbol_lookup import register_interpreted_replacement

__all__: list[str] = []


def _non_finite_check_and_unscale_(grads: list, found_inf: torch.Tensor, inv_scale: torch.Tensor) -> None:
    """``torch._amp_foreach_non_finite_check_and_unscale_``."""
    for g in grads:
        found = torch.logical_not(torch.isfinite(g)).any().to(found_inf.dtype)
        found_inf.copy_(torch.maximum(found_inf, found))
        g.mul_(inv_scale)


def _update_scale_(
    scale: torch.Tensor, growth_tracker: torch.Tensor, found_inf: torch.Tensor, growth_factor: float,
    backoff_factor: float, growth_interval: int,
) -> torch.Tensor:  # fmt: skip
    """``torch._amp_update_scale_``: returns ``scale``, updated in place with ``growth_tracker``."""
    skipped = found_inf > 0
    successful = growth_tracker + 1
    grown = (scale.double() * growth_factor).to(scale.dtype)
    grows = torch.logical_and(torch.logical_not(skipped), successful == growth_interval)
    new_scale = torch.where(
        skipped,
        (scale.double() * backoff_factor).to(scale.dtype),
        torch.where(torch.logical_and(grows, torch.isfinite(grown)), grown, scale),
    )
    growth_tracker.copy_(torch.where(torch.logical_or(skipped, grows), torch.zeros_like(successful), successful))
    scale.copy_(new_scale)
    return scale


register_interpreted_replacement(torch._amp_foreach_non_finite_check_and_unscale_, _non_finite_check_and_unscale_)
register_interpreted_replacement(torch._amp_update_scale_, _update_scale_)
