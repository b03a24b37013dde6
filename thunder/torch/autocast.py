"""Autocast policies of the torch language: which ops ``torch.autocast`` runs in the autocast
dtype and which in float32, per device type, as PyTorch's autocast lists them
(``aten/src/ATen/autocast_mode.cpp``). Registered into ``thunder.core.rules.autocast_rules``;
see Note [Autocast] in ``thunder.core.trace``.

Layer: language. Imports: core.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from thunder.core.rules import autocast_rules

_mm = (torch.matmul, torch.mm, torch.bmm, torch.baddbmm, torch.addmm, torch.addbmm, F.linear, torch.Tensor.matmul,
       torch.Tensor.mm, torch.Tensor.bmm, torch.Tensor.__matmul__)  # fmt: skip
_conv = (F.conv1d, F.conv2d, F.conv3d, F.conv_transpose1d, F.conv_transpose2d, F.conv_transpose3d)

LOWER_PRECISION = {
    "cpu": (*_mm, *_conv, F.prelu, F.scaled_dot_product_attention),
    "cuda": (*_mm, *_conv, F.prelu, F.scaled_dot_product_attention, torch.addmv, torch.addr, torch.mv, torch.einsum,
             torch.Tensor.mv, torch.linalg.vecdot, torch.chain_matmul, torch.linalg.multi_dot),  # fmt: skip
}

_losses = (F.mse_loss, F.l1_loss, F.smooth_l1_loss, F.huber_loss, F.nll_loss, F.cross_entropy, F.kl_div,
           F.binary_cross_entropy, F.binary_cross_entropy_with_logits, F.poisson_nll_loss, F.cosine_embedding_loss,
           F.hinge_embedding_loss, F.margin_ranking_loss, F.soft_margin_loss, F.triplet_margin_loss,
           F.multi_margin_loss, F.multilabel_margin_loss)  # fmt: skip
FLOAT32 = {
    "cpu": (*_losses, torch.prod, torch.Tensor.prod, torch.cdist, torch.trace, F.avg_pool3d, F.max_pool3d,
            F.adaptive_avg_pool3d, F.grid_sample),  # fmt: skip
    "cuda": (*_losses, torch.acos, torch.asin, torch.cosh, torch.erfinv, torch.exp, torch.expm1, torch.log, torch.log10,
             torch.log2, torch.log1p, torch.reciprocal, torch.rsqrt, torch.sinh, torch.tan, torch.pow, F.softplus,
             F.layer_norm, F.group_norm, F.cosine_similarity, torch.cdist, torch.dist, F.pdist, torch.renorm,
             torch.logsumexp, torch.prod, torch.cumprod, torch.cumsum, torch.sum, F.softmax, F.log_softmax,
             torch.softmax, torch.log_softmax, torch.Tensor.exp, torch.Tensor.log, torch.Tensor.pow,
             torch.Tensor.rsqrt, torch.Tensor.sum, torch.Tensor.softmax, torch.Tensor.log_softmax,
             torch.Tensor.__pow__, torch.Tensor.reciprocal, torch.Tensor.tan),  # fmt: skip
}


def register(torch_to_thunder_map: dict) -> None:
    """Registers a policy for every symbol that stands for one of the listed torch callables, and
    for the prims those decompose into, which a program may call directly (``thunder.prims.linear``
    on a bfloat16 input and a float32 weight runs in bfloat16 under CPU autocast, as ``F.linear``)."""
    from thunder.core import prims

    policies: dict = {}
    for prim in (prims.linear, prims.matmul, prims.convolution):
        policies[prim] = {device_type: "lower" for device_type in LOWER_PRECISION}
    for device_type, fns in LOWER_PRECISION.items():
        for fn in fns:
            sym = torch_to_thunder_map.get(fn)
            if sym is not None:
                policies.setdefault(sym, {})[device_type] = "lower"
    for device_type, fns in FLOAT32.items():
        for fn in fns:
            sym = torch_to_thunder_map.get(fn)
            if sym is not None:
                policies.setdefault(sym, {}).setdefault(device_type, "float32")
    for sym, by_device in policies.items():
        autocast_rules.register(sym)(_policy(by_device))


def _policy(by_device: dict):
    def rule(device_type: str, autocast_dtype: torch.dtype) -> torch.dtype | None:
        kind = by_device.get(device_type)
        if kind == "lower":
            return autocast_dtype
        if kind == "float32":
            return torch.float32
        return None

    return rule
