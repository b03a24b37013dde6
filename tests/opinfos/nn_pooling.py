"""torch.nn.functional pooling: max, average and adaptive pools in 1, 2 and 3 dims
(collected into the database by ``tests/opinfos/nn.py``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.opinfos.core import FLOATS, ErrorInput, OpInfo, SampleInput, make

# Note [Pooling kernels] in thunder/torch/nn_pooling.py: the pools run eager's aten kernels.
KERNEL = (("test_decomposition_vs_torch", None, "eager's aten kernel, no prim decomposition (Note [Pooling kernels])"),)


def _max_pool_samples(n):
    def samples(dtype, device):
        m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
        spatial = (7, 6, 5)[:n]
        yield SampleInput((m(2, 3, *spatial), 2))
        yield SampleInput((m(3, *spatial), 3, 2, 1))
        yield SampleInput((m(2, 2, *spatial), 2), {"stride": 1, "dilation": 2, "ceil_mode": True})
        yield SampleInput((m(2, 2, *spatial, noncontiguous=True), 3), {"stride": 2, "padding": 1, "ceil_mode": True})
        yield SampleInput((torch.ones(1, 2, *spatial, dtype=dtype, device=device), 2, 1))  # ties

    return samples


def _with_indices(fn):
    return lambda *a, **k: fn(*a, return_indices=True, **k)


def _avg_pool_samples(n):
    def samples(dtype, device):
        m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
        spatial = (7, 6, 5)[:n]
        yield SampleInput((m(2, 3, *spatial), 2))
        yield SampleInput((m(3, *spatial), 3, 2, 1))
        yield SampleInput((m(2, 2, *spatial), 3), {"stride": 2, "padding": 1, "count_include_pad": False})
        yield SampleInput((m(2, 2, *spatial, noncontiguous=True), 2), {"ceil_mode": True})
        if n > 1:
            yield SampleInput((m(2, 2, *spatial), 3), {"padding": 1, "ceil_mode": True, "divisor_override": 5})

    return samples


def _adaptive_samples(n):
    def samples(dtype, device):
        m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
        spatial = (7, 6, 5)[:n]
        yield SampleInput((m(2, 3, *spatial), 3))
        yield SampleInput((m(3, *spatial), 1))
        yield SampleInput((m(2, 2, *spatial, noncontiguous=True), (4, 2, 3)[:n]))
        if n > 1:
            yield SampleInput((m(2, 2, *spatial), (None, *(2, 2)[: n - 1])))

    return samples


def _errors(fn, n):
    def errors(device):
        x = make((1, 2, *(4,) * n), torch.float32, device)
        yield ErrorInput(SampleInput((x, 6)), ValueError, r"Output size is too small|smaller than kernel size")
        yield ErrorInput(SampleInput((make((4,) * (n + 3), torch.float32, device), 2)), ValueError,
                         rf"Expected {n + 1}D \(unbatched\) or {n + 2}D \(batched\) input")  # fmt: skip
        yield ErrorInput(SampleInput((x, 2), {"padding": 2}), ValueError, r"pad should be at most half")

    return errors


def _adaptive_errors(n):
    def errors(device):
        yield ErrorInput(SampleInput((make((4,) * (n + 3), torch.float32, device), 2)), ValueError,
                         rf"Expected {n + 1}D \(unbatched\) or {n + 2}D \(batched\) input")  # fmt: skip
        yield ErrorInput(SampleInput((make((1, 2, *(4,) * n), torch.float32, device), (2,) * (n + 1))), ValueError,
                         r"output_size must be an int or a tuple")  # fmt: skip

    return errors


opinfos: list[OpInfo] = []
for _n in (1, 2, 3):
    _max = getattr(F, f"max_pool{_n}d")
    _avg = getattr(F, f"avg_pool{_n}d")
    _amax = getattr(F, f"adaptive_max_pool{_n}d")
    _aavg = getattr(F, f"adaptive_avg_pool{_n}d")
    opinfos += [
        OpInfo(f"F.max_pool{_n}d", _max, _max_pool_samples(_n), dtypes=FLOATS, skips=KERNEL,
               error_inputs=_errors(_max, _n)),
        OpInfo(f"F.max_pool{_n}d_indices", _with_indices(_max), _max_pool_samples(_n), dtypes=FLOATS, skips=KERNEL),
        # eager has no bfloat16 avg_pool3d on CPU
        OpInfo(f"F.avg_pool{_n}d", _avg, _avg_pool_samples(_n), dtypes=FLOATS if _n < 3 else FLOATS[:2], skips=KERNEL,
               error_inputs=_errors(_avg, _n)),
        OpInfo(f"F.adaptive_avg_pool{_n}d", _aavg, _adaptive_samples(_n), dtypes=FLOATS, skips=KERNEL,
               error_inputs=_adaptive_errors(_n)),
        OpInfo(f"F.adaptive_max_pool{_n}d", _with_indices(_amax), _adaptive_samples(_n), dtypes=FLOATS, skips=KERNEL),
    ]  # fmt: skip
