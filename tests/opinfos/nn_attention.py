"""torch.nn.functional.scaled_dot_product_attention (collected by ``tests/opinfos/nn.py``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.opinfos.core import FLOATS, ErrorInput, OpInfo, SampleInput, make

_TOL = {torch.bfloat16: 3e-2, torch.float32: 1e-4}


def _sdpa_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, low=-1, high=1, **k)  # noqa: E731
    yield SampleInput((m(2, 3, 4, 8), m(2, 3, 5, 8), m(2, 3, 5, 6)))
    yield SampleInput((m(2, 3, 4, 8), m(2, 3, 4, 8), m(2, 3, 4, 8)), {"is_causal": True})
    yield SampleInput((m(2, 3, 4, 8), m(2, 3, 6, 8), m(2, 3, 6, 8)), {"is_causal": True})
    mask = torch.rand(4, 5, device=device) > 0.3
    mask[:, 0] = True  # no fully masked rows
    yield SampleInput((m(2, 3, 4, 8), m(2, 3, 5, 8), m(2, 3, 5, 8)), {"attn_mask": mask})
    yield SampleInput((m(2, 3, 4, 8), m(2, 3, 5, 8), m(2, 3, 5, 8)), {"attn_mask": m(2, 1, 4, 5)})
    yield SampleInput((m(2, 3, 4, 8), m(2, 3, 5, 8), m(2, 3, 5, 8)), {"scale": 0.5})
    yield SampleInput((m(3, 4, 8), m(3, 5, 8), m(3, 5, 8)))
    yield SampleInput((m(2, 4, 4, 8), m(2, 2, 5, 8), m(2, 2, 5, 8)), {"enable_gqa": True})
    yield SampleInput((m(2, 3, 8, 4, noncontiguous=True).transpose(-1, -2), m(2, 3, 5, 8), m(2, 3, 5, 8)))
    yield SampleInput((m(2, 3, 4, 8), m(2, 3, 5, 8), m(2, 3, 5, 8), None, 0.0, False))


def _sdpa_dropout_samples(dtype, device):
    m = lambda *s: make(s, dtype, device, low=-1, high=1)  # noqa: E731
    yield SampleInput((m(2, 3, 4, 8), m(2, 3, 5, 8), m(2, 3, 5, 8)), {"dropout_p": 0.3})


def _sdpa_errors(device):
    f = torch.float32
    m = lambda *s, dtype=f: make(s, dtype, device)  # noqa: E731
    yield ErrorInput(
        SampleInput((m(2, 4, 8), m(2, 5, 7), m(2, 5, 8))), ValueError, r"query and key must have the same embedding dim"
    )
    yield ErrorInput(
        SampleInput((m(2, 4, 8), m(2, 5, 8), m(2, 6, 8))),
        ValueError,
        r"key and value must have the same sequence length",
    )
    yield ErrorInput(
        SampleInput((m(2, 4, 8), m(2, 5, 8), m(2, 5, 8, dtype=torch.float64))),
        TypeError,
        r"Expected query, key, and value to have the same dtype",
    )
    yield ErrorInput(SampleInput((m(2, 4, 8), m(2, 4, 8), m(2, 4, 8)), {"attn_mask": m(4, 4), "is_causal": True}),
                     ValueError, r"Explicit attn_mask should not be set when is_causal=True")  # fmt: skip


opinfos: list[OpInfo] = [
    OpInfo(
        "F.scaled_dot_product_attention",
        F.scaled_dot_product_attention,
        _sdpa_samples,
        dtypes=FLOATS,
        error_inputs=_sdpa_errors,
        atol=_TOL,
        rtol=_TOL,
    ),
    OpInfo(
        "F.scaled_dot_product_attention_dropout",
        F.scaled_dot_product_attention,
        _sdpa_dropout_samples,
        dtypes=FLOATS,
        random=True,
    ),
]
