"""torch.nn.functional: activations, softmax, convolution, embedding, dropout.

Normalisations, losses, attention, pooling and resampling live in ``nn_norms.py``,
``nn_losses.py``, ``nn_attention.py``, ``nn_pooling.py`` and ``nn_resample.py`` beside this
file; their entries are appended here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.opinfos.core import (
    FLOATS,
    FLOATS_AND_INT,
    GRAD_INPLACE_FALLBACK,
    ErrorInput,
    OpInfo,
    SampleInput,
    elementwise_unary_shapes,
    has_nan,
    has_nonfinite,
    make,
)


def _unary(specials=True, **kwargs_list):
    """Samples over the standard unary shapes, plus each kwargs dict given (and NaN/inf unless told)."""

    def samples(dtype, device):
        for shape, noncontig in elementwise_unary_shapes():
            yield SampleInput((make(shape, dtype, device, noncontiguous=noncontig),))
        for kw in kwargs_list.get("kwargs", ()):
            yield SampleInput((make((3, 4), dtype, device),), dict(kw))
        if dtype.is_floating_point and specials:
            yield SampleInput(
                (torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 25.0], dtype=dtype),)
            )

    return samples


def _float_errors(fn_name):
    def errors(device):
        yield ErrorInput(
            SampleInput((make((3,), torch.int64, device),)), TypeError, rf"ltorch.{fn_name}: .*floating-point"
        )

    return errors


def _inplace(fn, **kw):
    """Calls ``fn(x, inplace=True, **kw)`` and returns x (the result is the mutated input)."""

    def call(a):
        fn(a, inplace=True, **kw)
        return a

    return call


_HARDTANH_AT_NAN = (
    (
        "skip",
        has_nan,
        "at NaN eager's own hardtanh gradient depends on where the NaN sits (its vectorised loop gives 0, "
        "its scalar tail the cotangent); thunder gives 0",
    ),
)

opinfos: list[OpInfo] = [
    OpInfo("relu", torch.relu, _unary(), dtypes=FLOATS_AND_INT),
    OpInfo("F.relu", F.relu, _unary(), dtypes=FLOATS_AND_INT),
    OpInfo("relu_method", lambda a: a.relu(), _unary(), dtypes=FLOATS_AND_INT),
    OpInfo(
        "relu_", lambda a: torch.relu_(a), _unary(), dtypes=FLOATS_AND_INT, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)
    ),
    OpInfo(
        "F.relu_inplace", _inplace(F.relu), _unary(), dtypes=FLOATS_AND_INT, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)
    ),
    OpInfo(
        "F.relu_inplace_unused_result",
        lambda a: (F.relu(a, inplace=True), a * 2)[1],
        _unary(),
        dtypes=FLOATS,
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
    ),
    OpInfo(
        "F.hardtanh",
        F.hardtanh,
        _unary(kwargs=({"min_val": -0.5, "max_val": 2.0},)),
        dtypes=FLOATS,
        grad=_HARDTANH_AT_NAN,
    ),
    OpInfo("F.relu6", F.relu6, _unary(), dtypes=FLOATS, grad=_HARDTANH_AT_NAN),
    OpInfo(
        "F.leaky_relu",
        F.leaky_relu,
        _unary(kwargs=({"negative_slope": 0.2},)),
        dtypes=FLOATS,
        error_inputs=_float_errors("leaky_relu"),
    ),
    OpInfo(
        "F.leaky_relu_inplace",
        _inplace(F.leaky_relu, negative_slope=0.3),
        _unary(),
        dtypes=FLOATS,
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
    ),
    OpInfo(
        "F.elu",
        F.elu,
        _unary(kwargs=({"alpha": 0.5},)),
        dtypes=FLOATS,
        error_inputs=_float_errors("elu"),
        grad=(
            (
                "xfail",
                has_nonfinite,
                "gradient NaN at +inf (torch: the cotangent, elu is the identity there) and at NaN (torch: the cotangent)",
            ),
        ),
    ),
    OpInfo("F.elu_inplace", _inplace(F.elu), _unary(), dtypes=FLOATS, mutates=True, grad=(GRAD_INPLACE_FALLBACK,)),
    # PyTorch's CPU gelu gives NaN at +inf (its kernel multiplies inf by 0); no inf samples.
    OpInfo(
        "F.gelu",
        F.gelu,
        _unary(specials=False, kwargs=({"approximate": "tanh"}, {"approximate": "none"})),
        dtypes=FLOATS,
        error_inputs=lambda device: (
            ErrorInput(
                SampleInput((make((3,), torch.float32, device),), {"approximate": "fast"}),
                ValueError,
                r"ltorch.gelu: approximate must be one of \['none', 'tanh'\], but got 'fast'",
            ),
            ErrorInput(SampleInput((make((3,), torch.int64, device),)), TypeError, r"floating-point"),
        ),
    ),
    OpInfo("F.silu", F.silu, _unary(), dtypes=FLOATS, error_inputs=_float_errors("silu")),
    OpInfo(
        "F.silu_inplace",
        _inplace(F.silu),
        _unary(),
        dtypes=FLOATS,
        mutates=True,
        grad=(GRAD_INPLACE_FALLBACK,),
    ),
    OpInfo("F.mish", F.mish, _unary(), dtypes=FLOATS),
    OpInfo(
        "F.softplus",
        F.softplus,
        _unary(kwargs=({"beta": 2.0, "threshold": 5.0}, {"beta": 0.5})),
        dtypes=FLOATS,
        grad=(
            (
                "xfail",
                has_nonfinite,
                "gradient NaN at +inf (torch: the cotangent, above the threshold softplus is the identity)",
            ),
        ),
    ),
    OpInfo(
        "F.hardswish",
        F.hardswish,
        _unary(),
        dtypes=FLOATS,
        grad=(("xfail", has_nonfinite, "gradient NaN at a NaN input (torch: the cotangent, its x > 3 branch)"),),
    ),
    OpInfo(
        "F.hardsigmoid",
        F.hardsigmoid,
        _unary(),
        dtypes=FLOATS,
        grad=(("xfail", has_nonfinite, "gradient cotangent/6 at a NaN input (torch: 0, NaN is outside (-3, 3))"),),
    ),
    OpInfo("F.tanh", F.tanh, _unary(), dtypes=FLOATS),
    OpInfo("F.sigmoid", F.sigmoid, _unary(), dtypes=FLOATS),
]


def _softmax_samples(dtype, device):
    yield SampleInput((make((3, 4), dtype, device),), {"dim": 1})
    yield SampleInput((make((3, 4), dtype, device), 0))
    yield SampleInput((make((2, 3, 4), dtype, device),), {"dim": -1})
    yield SampleInput((make((2, 3, 4), dtype, device, noncontiguous=True),), {"dim": 1})
    yield SampleInput((make((), dtype, device),), {"dim": 0})
    yield SampleInput((make((0, 4), dtype, device),), {"dim": 1})
    yield SampleInput((make((3, 0), dtype, device),), {"dim": 1})
    yield SampleInput((make((3, 4), dtype, device),), {"dim": 1, "dtype": torch.float64})
    yield SampleInput((torch.tensor([[float("-inf"), 0.0, 1.0], [float("nan"), 1.0, 2.0]], dtype=dtype),), {"dim": 1})


def _softmax_int_samples(dtype, device):
    yield SampleInput((make((3, 4), torch.int64, device),), {"dim": 1, "dtype": dtype})


def _softmax_errors(name):
    def errors(device):
        yield ErrorInput(
            SampleInput((make((3, 4), torch.float32, device),), {"dim": 2}),
            IndexError,
            r"Dimension out of range \(expected to be in range of \[-2, 1\], but got 2\)",
        )
        yield ErrorInput(SampleInput((make((3, 4), torch.int64, device),), {"dim": 0}), TypeError,
                         rf'"{name}" is not implemented for input of dtype torch.int64')  # fmt: skip

    return errors


for _name in ("softmax", "log_softmax"):
    _f = getattr(F, _name)
    opinfos += [
        OpInfo(f"F.{_name}", _f, _softmax_samples, dtypes=FLOATS, error_inputs=_softmax_errors(_name)),
        OpInfo(
            f"F.{_name}_implicit_dim",
            lambda a, _f=_f: _f(a),
            lambda dtype, device: (
                SampleInput((make((3, 4), dtype, device),)),
                SampleInput((make((2, 3, 4), dtype, device),)),
            ),
            dtypes=(torch.float32,),
        ),
        OpInfo(f"torch.{_name}", getattr(torch, _name), _softmax_samples, dtypes=FLOATS),
        OpInfo(
            f"{_name}_method",
            lambda a, *args, _n=_name, **kw: getattr(a, _n)(*args, **kw),
            _softmax_samples,
            dtypes=FLOATS,
        ),
        OpInfo(f"{_name}_int_input", _f, _softmax_int_samples, dtypes=(torch.float32, torch.float64)),
    ]


# ----------------------------------------------------------------------------------------
# convolution
# ----------------------------------------------------------------------------------------


def _conv_samples(n):
    def samples(dtype, device):
        m = lambda *s, **k: make(s, dtype, device, low=-1, high=1, **k)  # noqa: E731
        sp = (7, 6, 5)[:n]
        k3 = (3,) * n
        yield SampleInput((m(2, 4, *sp), m(6, 4, *k3)))
        yield SampleInput((m(2, 4, *sp), m(6, 4, *k3), m(6)), {"stride": 2, "padding": 1})
        yield SampleInput((m(2, 4, *sp), m(6, 2, *k3)), {"groups": 2, "dilation": 2, "padding": 2})
        yield SampleInput((m(4, *sp), m(6, 4, *k3), m(6)))  # unbatched
        yield SampleInput((m(2, 4, *sp), m(6, 4, *(2,) * n)), {"padding": "same"})
        yield SampleInput((m(2, 4, *sp), m(6, 4, *k3)), {"padding": "same", "dilation": 2})
        yield SampleInput((m(2, 4, *sp), m(6, 4, *k3)), {"padding": "valid"})
        yield SampleInput((m(2, 4, *sp, noncontiguous=True), m(6, 4, *k3)), {"stride": (1,) * (n - 1) + (2,)})
        yield SampleInput((m(0, 4, *sp), m(6, 4, *k3)))
        yield SampleInput((), {"input": m(1, 2, *sp), "weight": m(3, 2, *k3), "bias": None, "padding": (1,) * n})

    return samples


def _conv_errors(n):
    def errors(device):
        f = torch.float32
        sp = (7, 6, 5)[:n]
        k3 = (3,) * n
        yield ErrorInput(
            SampleInput((make((2, 3, *sp), f, device), make((6, 4, *k3), f, device))),
            ValueError,
            r"expected input\[2, 3, .*\] to have 4 channels, but got 3 channels instead",
        )
        yield ErrorInput(
            SampleInput((make(sp, f, device), make((6, 4, *k3), f, device))),
            ValueError,
            rf"Expected {n + 1}D \(unbatched\) or {n + 2}D \(batched\) input to conv{n}d",
        )
        yield ErrorInput(
            SampleInput((make((2, 4, *sp), f, device), make((6, 4, *k3), f, device)), {"padding": "same", "stride": 2}),
            ValueError,
            r"padding='same' is not supported for strided convolutions",
        )
        yield ErrorInput(
            SampleInput((make((2, 4, *sp), f, device), make((6, 4, *k3), torch.float64, device))),
            TypeError,
            r"input type \(torch.float32\) and weight type \(torch.float64\) should be the same",
        )
        yield ErrorInput(SampleInput((make((2, 4, *(2,) * n), f, device), make((6, 4, *k3), f, device))), ValueError,
                         r"kernel size can't be greater than actual input size")  # fmt: skip

    return errors


_CONV_TOL = {torch.bfloat16: 3e-2, torch.float32: 1e-4}
opinfos += [
    OpInfo(
        "F.conv1d",
        F.conv1d,
        _conv_samples(1),
        dtypes=FLOATS,
        error_inputs=_conv_errors(1),
        atol=_CONV_TOL,
        rtol=_CONV_TOL,
    ),
    OpInfo(
        "F.conv2d",
        F.conv2d,
        _conv_samples(2),
        dtypes=FLOATS,
        error_inputs=_conv_errors(2),
        atol=_CONV_TOL,
        rtol=_CONV_TOL,
    ),
    OpInfo(
        "F.conv3d", F.conv3d, _conv_samples(3), dtypes=(torch.float32, torch.float64), atol=_CONV_TOL, rtol=_CONV_TOL
    ),
]


def _conv_transpose_samples(n):
    def samples(dtype, device):
        m = lambda *s, **k: make(s, dtype, device, low=-1, high=1, **k)  # noqa: E731
        sp = (4, 3, 5)[:n]
        k3 = (3,) * n
        yield SampleInput((m(2, 4, *sp), m(4, 3, *k3)))
        yield SampleInput((m(2, 4, *sp), m(4, 3, *k3), m(3)), {"stride": 2, "padding": 1, "output_padding": 1})
        yield SampleInput((m(2, 4, *sp), m(4, 2, *k3), m(4)), {"groups": 2, "dilation": 2, "output_padding": 1})
        yield SampleInput((m(4, *sp), m(4, 3, *k3)))  # unbatched
        yield SampleInput((m(2, 4, *sp, noncontiguous=True), m(4, 3, *(2,) * n)), {"stride": (1,) * (n - 1) + (2,)})

    return samples


def _conv_transpose_errors(n):
    def errors(device):
        f = torch.float32
        sp = (4, 3, 5)[:n]
        k3 = (3,) * n
        yield ErrorInput(
            SampleInput((make((2, 3, *sp), f, device), make((4, 3, *k3), f, device))),
            ValueError,
            r"Given transposed=1, weight of size \[4, 3, .*expected input\[2, 3, .*\] to have 4 channels",
        )
        yield ErrorInput(
            SampleInput((make((2, 4, *sp), f, device), make((4, 3, *k3), f, device)), {"output_padding": 1}),
            ValueError,
            r"output padding must be smaller than either stride or dilation",
        )
        yield ErrorInput(
            SampleInput((make(sp, f, device), make((4, 3, *k3), f, device))),
            ValueError,
            rf"Expected {n + 1}D \(unbatched\) or {n + 2}D \(batched\) input to conv_transpose{n}d",
        )

    return errors


opinfos += [
    OpInfo(f"F.conv_transpose{n}d", getattr(F, f"conv_transpose{n}d"), _conv_transpose_samples(n),
           dtypes=FLOATS if n < 3 else FLOATS[:2], error_inputs=_conv_transpose_errors(n), atol=_CONV_TOL,
           rtol=_CONV_TOL)
    for n in (1, 2, 3)
]  # fmt: skip


# ----------------------------------------------------------------------------------------
# embedding
# ----------------------------------------------------------------------------------------


def _embedding_samples(dtype, device):
    w = make((10, 3), dtype, device)
    yield SampleInput((torch.tensor([1, 2, 4, 5], device=device), w))
    yield SampleInput((torch.randint(0, 10, (2, 3), device=device), w), {"padding_idx": 0})
    yield SampleInput((torch.randint(0, 10, (2, 3), device=device, dtype=torch.int32), w), {"padding_idx": -1})
    yield SampleInput((torch.tensor(3, device=device), w))
    yield SampleInput((torch.zeros(0, 2, dtype=torch.int64, device=device), w))
    yield SampleInput(
        (torch.randint(0, 10, (4, 6), device=device)[:, ::2], make((10, 6), dtype, device, noncontiguous=True))
    )


def _embedding_errors(device):
    w = make((10, 3), torch.float32, device)
    yield ErrorInput(
        SampleInput((make((3,), torch.float32, device), w)),
        TypeError,
        r"Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int",
    )
    yield ErrorInput(
        SampleInput((torch.tensor([1]), w), {"padding_idx": 10}),
        ValueError,
        r"Padding_idx must be within num_embeddings",
    )
    yield ErrorInput(
        SampleInput((torch.tensor([1]), make((10,), torch.float32, device))), ValueError, r"'weight' must be 2-D"
    )


opinfos += [
    OpInfo("F.embedding", F.embedding, _embedding_samples, dtypes=FLOATS_AND_INT, error_inputs=_embedding_errors),
]


def _embedding_bag_samples(dtype, device):
    w = make((10, 3), dtype, device)
    idx = torch.tensor([1, 8, 3, 1, 3, 3, 0, 8], device=device)
    offsets = torch.tensor([0, 3, 5], device=device)
    yield SampleInput((idx.view(2, 4), w))
    yield SampleInput((idx, w, offsets), {"mode": "sum", "padding_idx": 8})
    yield SampleInput((idx, w, offsets), {"mode": "max"})
    yield SampleInput((idx, w, torch.tensor([0, 3, 3], device=device)), {"scale_grad_by_freq": True})
    yield SampleInput((idx, w, offsets), {"mode": "sum", "per_sample_weights": make((8,), dtype, device)})
    yield SampleInput((idx, w, torch.tensor([0, 2, 5, 8], device=device)), {"include_last_offset": True})


def _embedding_bag_errors(device):
    w = make((10, 3), torch.float32, device)
    idx = torch.tensor([1, 2, 3], device=device)
    yield ErrorInput(SampleInput((idx, w)), ValueError, r"offsets has to be a 1D Tensor but got None")
    yield ErrorInput(SampleInput((idx.view(1, 3), w, idx)), ValueError, r"if input is 2D, then offsets has to be None")
    yield ErrorInput(SampleInput((idx, w, idx[:1]), {"mode": "max", "per_sample_weights": make((3,), torch.float32,
                     device)}), NotImplementedError, r"per_sample_weights is only supported for mode='sum'")  # fmt: skip
    yield ErrorInput(SampleInput((idx, w, idx[:1]), {"mode": "median"}), ValueError, r"mode has to be one of sum, mean or max")  # fmt: skip


opinfos += [
    OpInfo("F.embedding_bag", F.embedding_bag, _embedding_bag_samples, dtypes=FLOATS[:2],
           error_inputs=_embedding_bag_errors,
           skips=(("test_decomposition_vs_torch", None, "eager's aten kernel (Note [Embedding bags])"),)),
]  # fmt: skip


# ----------------------------------------------------------------------------------------
# dropout
# ----------------------------------------------------------------------------------------


def _dropout_samples(dtype, device):
    yield SampleInput((make((3, 4), dtype, device),))
    yield SampleInput((make((3, 4), dtype, device),), {"p": 0.2})
    yield SampleInput((make((0, 4), dtype, device),), {"p": 0.2})
    yield SampleInput((make((4, 6), dtype, device, noncontiguous=True), 0.7, True))


def _dropout_exact_samples(dtype, device):
    yield SampleInput((make((3, 4), dtype, device),), {"p": 0.0})
    yield SampleInput((make((3, 4), dtype, device),), {"p": 0.5, "training": False})
    yield SampleInput((make((3, 4), dtype, device),), {"p": 1.0})


def _dropout_errors(device):
    yield ErrorInput(SampleInput((make((3,), torch.float32, device),), {"p": 1.5}), ValueError,
                     r"dropout probability has to be between 0 and 1, but got 1.5")  # fmt: skip


opinfos += [
    OpInfo("F.dropout", F.dropout, _dropout_samples, dtypes=FLOATS, random=True, error_inputs=_dropout_errors),
    OpInfo("F.dropout_exact", F.dropout, _dropout_exact_samples, dtypes=FLOATS),
    OpInfo(
        "F.dropout_inplace_eval",
        lambda a: (F.dropout(a, 0.5, False, True), a)[1],
        _unary(),
        dtypes=FLOATS,
        mutates=True,  # eval: no update, so thunder's own backward runs
    ),
]


# The families split into sibling modules.
from tests.opinfos.nn_norms import opinfos as _norms  # noqa: E402

opinfos += _norms
from tests.opinfos.nn_losses import opinfos as _losses  # noqa: E402

opinfos += _losses
from tests.opinfos.nn_attention import opinfos as _attention  # noqa: E402

opinfos += _attention
from tests.opinfos.nn_pooling import opinfos as _pooling  # noqa: E402

opinfos += _pooling
from tests.opinfos.nn_resample import opinfos as _resample  # noqa: E402

opinfos += _resample
