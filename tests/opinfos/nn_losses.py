"""torch.nn.functional losses: mse_loss, l1_loss, binary_cross_entropy_with_logits, nll_loss,
cross_entropy (collected into the database by ``tests/opinfos/nn.py``)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.opinfos.core import FLOATS, ErrorInput, OpInfo, SampleInput, make

_TOL = {torch.bfloat16: 3e-2, torch.float32: 1e-4}
_REDUCTIONS = ({}, {"reduction": "none"}, {"reduction": "sum"}, {"reduction": "mean"})


def _pointwise_samples(weighted: bool):
    def samples(dtype, device):
        m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
        for kw in _REDUCTIONS:
            yield SampleInput((m(3, 4), m(3, 4)), dict(kw))
        yield SampleInput((m(2, 3, 4, noncontiguous=True), m(2, 3, 4)), {"reduction": "sum"})
        yield SampleInput((m(0, 4), m(0, 4)))
        yield SampleInput((m(5), m(5)), {"size_average": False})
        yield SampleInput((m(5), m(5)), {"reduce": False})
        if dtype is not torch.float64:
            yield SampleInput((m(3, 4), make((3, 4), torch.float64, device)))
        if weighted:
            for kw in _REDUCTIONS:
                yield SampleInput((m(3, 4), m(3, 4)), {"weight": make((3, 4), dtype, device, low=0.1, high=1), **kw})

    return samples


def _pointwise_errors(name):
    def errors(device):
        f = torch.float32
        yield ErrorInput(
            SampleInput((make((3,), f, device), make((3,), f, device)), {"reduction": "avg"}),
            ValueError,
            rf"ltorch.{name}: avg is not a valid value for reduction",
        )
        yield ErrorInput(
            SampleInput((make((3,), f, device), make((4,), f, device))),
            ValueError,
            r"size of tensor a \(3\) must match the size of tensor b \(4\)",
        )
        yield ErrorInput(SampleInput((make((3,), f, device), make((3,), f, device)), {"weight": make((4,), f, device)}),
                         ValueError, r"Weights and input must have the same size")  # fmt: skip

    return errors


def _bce_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    t = lambda *s: make(s, dtype, device, low=0, high=1)  # noqa: E731
    for kw in _REDUCTIONS:
        yield SampleInput((m(3, 4), t(3, 4)), dict(kw))
    yield SampleInput((m(3, 4), t(3, 4)), {"weight": t(4), "pos_weight": m(4, low=0.5, high=3)})
    yield SampleInput((m(3, 4), t(3, 4), t(3, 4)), {"reduction": "none"})
    yield SampleInput((m(3, 4), t(3, 4)), {"pos_weight": m(4, low=0.5, high=3), "reduction": "sum"})
    yield SampleInput((m(4, 6, noncontiguous=True) * 10, t(4, 6)))
    yield SampleInput((m(0, 3), t(0, 3)))


def _bce_errors(device):
    f = torch.float32
    yield ErrorInput(SampleInput((make((3, 4), f, device), make((4,), f, device))), ValueError,
                     r"Target size \(torch.Size\(\[4\]\)\) must be the same as input size \(torch.Size\(\[3, 4\]\)\)")  # fmt: skip


def _targets(shape, c, device, ignore=None):
    t = torch.randint(0, c, shape, device=device)
    if ignore is not None and t.numel():
        t.view(-1)[0] = ignore
    return t


def _class_samples(dtype, device, *, smoothing=False):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    w = lambda c: make((c,), dtype, device, low=0.1, high=2)  # noqa: E731
    extra = [{}] + ([{"label_smoothing": 0.2}] if smoothing else [])
    for ex in extra:
        for kw in _REDUCTIONS:
            yield SampleInput((m(4, 5), _targets((4,), 5, device)), {**kw, **ex})
        yield SampleInput((m(4, 5), _targets((4,), 5, device, ignore=-100)), {"weight": w(5), **ex})
        yield SampleInput((m(4, 5), _targets((4,), 5, device, ignore=2)), {"ignore_index": 2, **ex})
        yield SampleInput(
            (m(4, 5), _targets((4,), 5, device, ignore=1)),
            {"ignore_index": 1, "weight": w(5), "reduction": "sum", **ex},
        )
        yield SampleInput((m(2, 5, 3, 2), _targets((2, 3, 2), 5, device)), {"weight": w(5), **ex})
        yield SampleInput((m(2, 5, 3), _targets((2, 3), 5, device)), {"reduction": "none", **ex})
        yield SampleInput((m(5), _targets((), 5, device)), dict(ex))
        yield SampleInput((m(4, 10, noncontiguous=True), _targets((4,), 10, device)), dict(ex))
        yield SampleInput((m(0, 5), _targets((0,), 5, device)), {"reduction": "sum", **ex})


def _nll_samples(dtype, device):
    for s in _class_samples(dtype, device):
        yield SampleInput(
            (torch.log_softmax(s.args[0].float(), 1 if s.args[0].ndim > 1 else 0).to(dtype), *s.args[1:]), s.kwargs
        )


def _prob_samples(dtype, device):
    m = lambda *s, **k: make(s, dtype, device, **k)  # noqa: E731
    p = lambda *s: torch.softmax(make(s, torch.float32, device), 1).to(dtype)  # noqa: E731
    for kw in _REDUCTIONS:
        yield SampleInput((m(4, 5), p(4, 5)), dict(kw))
    yield SampleInput(
        (m(4, 5), p(4, 5)), {"weight": make((5,), dtype, device, low=0.1, high=2), "label_smoothing": 0.3}
    )
    yield SampleInput((m(2, 5, 3), p(2, 5, 3)), {"reduction": "sum", "label_smoothing": 0.1})


def _class_errors(name):
    def errors(device):
        f = torch.float32
        yield ErrorInput(
            SampleInput((make((3, 4), f, device), torch.tensor([1, 2], device=device))),
            ValueError,
            r"Expected input batch_size \(3\) to match target batch_size \(2\)",
        )
        yield ErrorInput(
            SampleInput((make((3, 4), f, device), torch.tensor([1, 2, 3], dtype=torch.int32, device=device))),
            TypeError,
            r"expected target dtype to be Long or Byte, but got torch.int32",
        )
        yield ErrorInput(
            SampleInput(
                (make((3, 4), f, device), torch.tensor([1, 2, 3], device=device)), {"weight": make((3,), f, device)}
            ),
            ValueError,
            r"weight tensor should be defined either for all 4 classes or no classes",
        )
        yield ErrorInput(SampleInput((make((3, 4), f, device), torch.tensor([1, 2, 3], device=device)), {"reduction": "foo"}),
                         ValueError, rf"ltorch.{name}: foo is not a valid value for reduction")  # fmt: skip
        if name == "cross_entropy":
            yield ErrorInput(SampleInput((make((3, 4), f, device), torch.tensor([1, 2, 3], device=device)), {"label_smoothing": 1.5}),
                             ValueError, r"label_smoothing must be between 0.0 and 1.0. Got: 1.5")  # fmt: skip

    return errors


opinfos: list[OpInfo] = [
    OpInfo(
        "F.mse_loss",
        F.mse_loss,
        _pointwise_samples(True),
        dtypes=FLOATS,
        error_inputs=_pointwise_errors("mse_loss"),
        atol=_TOL,
        rtol=_TOL,
    ),
    OpInfo(
        "F.l1_loss",
        F.l1_loss,
        _pointwise_samples(True),
        dtypes=FLOATS,
        error_inputs=_pointwise_errors("l1_loss"),
        atol=_TOL,
        rtol=_TOL,
    ),
    OpInfo(
        "F.binary_cross_entropy_with_logits",
        F.binary_cross_entropy_with_logits,
        _bce_samples,
        dtypes=FLOATS,
        error_inputs=_bce_errors,
        no_grad_args=(2, "weight", "pos_weight"),  # torch does not differentiate the weights
        atol=_TOL,
        rtol=_TOL,
    ),
    OpInfo(
        "F.nll_loss",
        F.nll_loss,
        _nll_samples,
        dtypes=FLOATS,
        error_inputs=_class_errors("nll_loss"),
        no_grad_args=(2, "weight"),  # torch does not differentiate the class weights
        atol=_TOL,
        rtol=_TOL,
    ),
    OpInfo(
        "F.cross_entropy",
        F.cross_entropy,
        lambda d, dev: _class_samples(d, dev, smoothing=True),
        dtypes=FLOATS,
        error_inputs=_class_errors("cross_entropy"),
        no_grad_args=(2, "weight"),  # torch does not differentiate the class weights
        atol=_TOL,
        rtol=_TOL,
    ),
    OpInfo("F.cross_entropy_probabilities", F.cross_entropy, _prob_samples, dtypes=FLOATS, atol=_TOL, rtol=_TOL),
]
