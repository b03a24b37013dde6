"""The op database's method and in-place method variants (``x.polygamma(n)``, ``x.square_()``), which the function
variants' checks (``tests/test_opdb.py``) do not call: one float32 sample each, through ``thunder.jit`` against
eager from the same random seed. Each must give eager's values (or raise where eager raises) without running
eagerly; the variants thunder refuses are listed, with the reason, so a new refusal fails too."""

from __future__ import annotations

import warnings

import pytest
import torch

import thunder

# op.variant -> why thunder refuses it (a clear error, tested to stay one)
REFUSED = {
    "as_strided.inplace_variant": "as_strided_ reads memory through strides of its own",
    "nn.functional.rrelu.inplace_variant": "random and in place",
    "nn.functional.threshold.inplace_variant": "returns its input",
    "squeeze.inplace_variant": "changes an input's shape",
    "unsqueeze.inplace_variant": "changes an input's shape",
    "transpose.inplace_variant": "changes an input's shape",
    "t.inplace_variant": "changes an input's shape",
    "resize_.inplace_variant": "changes an input's shape",
    "resize_as_.inplace_variant": "changes an input's shape",
    "to_sparse.method_variant": "sparse tensors",
    "nn.functional.dropout2d.inplace_variant": "random and in place",
    "nn.functional.dropout3d.inplace_variant": "changes an input's shape",
    "nn.functional.alpha_dropout.inplace_variant": "random and in place",
    "nn.functional.feature_alpha_dropout.inplace_variant": "random and in place",
}
UNINITIALISED = {"empty_like", "new_empty", "new_empty_strided", "empty", "empty_strided"}


def _variants():
    from torch.testing._internal.common_methods_invocations import op_db

    out = []
    for op in op_db:
        if not op.supports_dtype(torch.float32, "cpu"):
            continue
        for kind in ("method_variant", "inplace_variant"):
            if getattr(op, kind, None) is not None:
                name = f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name
                out.append(pytest.param(op, kind, id=f"{name}.{kind}"))
    return out


def _same(got, want) -> bool:
    if isinstance(want, torch.Tensor):
        return (
            isinstance(got, torch.Tensor)
            and got.shape == want.shape
            and got.dtype == want.dtype
            and torch.allclose(got, want, rtol=1e-4, atol=1e-5, equal_nan=True)
        )
    if isinstance(want, (tuple, list)):
        return type(got) is type(want) and len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want))
    return got == want or (want != want and got != got)


def _run(fn, sample):
    torch.manual_seed(0)
    try:
        return fn(sample.input.clone(), *sample.args, **sample.kwargs), None
    except Exception as e:
        return None, e


@pytest.mark.parametrize("op, kind", _variants())
def test_method_variant_matches_eager(op, kind):
    variant = getattr(op, kind)
    sample = next(iter(op.sample_inputs("cpu", torch.float32, requires_grad=False)), None)
    if sample is None:
        pytest.skip("no sample")

    def fn(x, *args, **kwargs):
        return variant(x, *args, **kwargs)

    want, eager_error = _run(fn, sample)
    with warnings.catch_warnings():
        warnings.simplefilter("error", thunder.EagerRunWarning)
        got, error = _run(thunder.jit(fn), sample)
    key = f"{op.name}.{kind}"  # (every variant of an op the same)
    if key in REFUSED and eager_error is None:
        assert isinstance(error, thunder.core.errors.ThunderError), (key, error)
        return
    assert not isinstance(error, thunder.EagerRunWarning), f"{key} ran eagerly: {error}"
    if eager_error is not None:
        assert error is not None, f"{key}: thunder gives a value where eager raises {eager_error!r}"
        return
    assert error is None, f"{key}: {error!r}"
    if op.name not in UNINITIALISED:
        assert _same(got, want), key
