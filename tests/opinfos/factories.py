"""Factories: filled, uninitialised, ranges, random, from Python data, ``*_like`` and ``new_*``.

Random factories are compared value for value: the test seeds torch's global generator
before the eager and the jitted call, and the torch executor draws exactly as eager does.
``empty`` results are compared by metadata only (``random=True``).
"""

from __future__ import annotations

import torch

from tests.opinfos.core import ALL, FLOATS, ErrorInput, OpInfo, SampleInput, make

_SIZES = [(), (0,), (5,), (2, 3), (2, 0, 4)]


def _size_samples(*, floats_only=False):
    """Sizes as varargs, one tuple, a list and ``size=``, with dtype, device and requires_grad keywords."""

    def samples(dtype, device):
        for size in _SIZES:
            if size:  # torch.zeros() with no size at all is an error
                yield SampleInput(tuple(size), {"dtype": dtype, "device": device})
            yield SampleInput((size,), {"dtype": dtype})
        yield SampleInput(([2, 3],), {"dtype": dtype, "device": torch.device(device)})
        yield SampleInput((), {"size": (3, 2), "dtype": dtype})
        if dtype is torch.float32:
            yield SampleInput((2, 3))  # the default dtype
            yield SampleInput((2, 3), {"requires_grad": True})

    return samples


def _full_samples(dtype, device):
    value = {torch.bool: True, torch.int64: 7}.get(dtype, 2.5)
    for size in _SIZES:
        yield SampleInput((size, value), {"dtype": dtype})
    yield SampleInput(((2, 3), value))  # dtype inferred from the fill value
    yield SampleInput(([4], 3), {"device": device, "dtype": dtype})


def _arange_samples(dtype, device):
    yield SampleInput((5,), {"dtype": dtype})
    yield SampleInput((2, 11, 3), {"dtype": dtype, "device": device})
    yield SampleInput((10, 0, -2), {"dtype": dtype})
    yield SampleInput((3, 3), {"dtype": dtype})  # empty
    if dtype is not torch.int64:
        yield SampleInput((0.0, 1.0, 0.125), {"dtype": dtype})
    if dtype is torch.float32:
        yield SampleInput((7,))  # int64
        yield SampleInput((0, 1, 0.1))  # default float dtype
        yield SampleInput((-1.5, 2.5))
        yield SampleInput((), {"start": 1, "end": 4})


def _linspace_samples(dtype, device):
    yield SampleInput((0, 1, 5), {"dtype": dtype})
    yield SampleInput((-3, 7, 11), {"dtype": dtype, "device": device})
    yield SampleInput((2.5, -1.0, 7), {"dtype": dtype})
    yield SampleInput((0, 1, 1), {"dtype": dtype})
    yield SampleInput((0, 1, 0), {"dtype": dtype})
    if dtype is torch.float32:
        yield SampleInput((0, 10), {"steps": 4})


def _eye_samples(dtype, device):
    yield SampleInput((3,), {"dtype": dtype})
    yield SampleInput((2, 4), {"dtype": dtype, "device": device})
    yield SampleInput((4, 2), {"dtype": dtype})
    yield SampleInput((0,), {"dtype": dtype})
    if dtype is torch.float32:
        yield SampleInput((3,), {"m": 5})


def _randint_samples(dtype, device):
    yield SampleInput((10, (3, 4)), {"dtype": dtype})
    yield SampleInput((-5, 5, (20,)), {"dtype": dtype, "device": device})
    yield SampleInput((3, 9), {"size": (2, 2), "dtype": dtype})
    if dtype is torch.int64:
        yield SampleInput((), {"high": 4, "size": (6,)})


def _tensor_samples(dtype, device):
    yield SampleInput(([[1, 2], [3, 4]],), {"dtype": dtype})
    yield SampleInput(((1.5, -2.0, 0.0),), {"dtype": dtype, "device": device})
    yield SampleInput((3,), {"dtype": dtype})
    yield SampleInput(([],), {"dtype": dtype})
    if dtype is torch.float32:
        for data in ([1, 2, 3], [1.0, 2], [True, False], [[1, 2.5], [3, 4]], 7, 2.5, True, []):
            yield SampleInput((data,))  # inferred dtype


def _as_tensor_samples(dtype, device):
    yield SampleInput(([[1, 2], [3, 4]],), {"dtype": dtype})
    yield SampleInput((make((2, 3), dtype, device),))  # a tensor passes through
    yield SampleInput((make((2, 3), dtype, device),), {"dtype": torch.float64})
    yield SampleInput((make((2, 3), dtype, device),), {"device": device})
    yield SampleInput(([1.5, 2.5],))


def _like_samples(extra=()):
    def samples(dtype, device):
        for shape, noncontig in (((), False), ((3, 4), False), ((0, 2), False), ((4, 6), True)):
            yield SampleInput((make(shape, dtype, device, noncontiguous=noncontig), *extra))
        yield SampleInput((make((2, 3), dtype, device), *extra), {"dtype": torch.float64})
        yield SampleInput((make((2, 3), dtype, device), *extra), {"device": device})

    return samples


def _new_samples(*, fill=False):
    def samples(dtype, device):
        a = make((3,), dtype, device)
        value = (2,) if fill else ()
        yield SampleInput((a, (2, 3), *value))
        yield SampleInput((a, [4], *value), {"dtype": torch.float64})
        yield SampleInput((a, (), *value), {"device": device})
        if not fill:
            yield SampleInput((a, 2, 3))  # varargs sizes
            yield SampleInput((a,), {"size": (2, 2)})

    return samples


def _new_tensor_samples(dtype, device):
    a = make((3,), dtype, device)
    yield SampleInput((a, [1, 2, 3]))
    yield SampleInput((a, [[1.5], [2.5]]), {"dtype": torch.float64})


# --- error inputs ------------------------------------------------------------------------


def _zeros_errors(device):
    yield ErrorInput(SampleInput((2, -1)), ValueError, r"Trying to create tensor with negative dimension -1: \[2, -1\]")
    yield ErrorInput(SampleInput((2, 3.0)), TypeError, r"size must be ints.*float 3.0")
    yield ErrorInput(SampleInput((2,), {"dtype": "float32"}), TypeError, r"dtype must be a torch.dtype")
    yield ErrorInput(
        SampleInput((2,), {"dtype": torch.int64, "requires_grad": True}),
        RuntimeError,
        r"Only Tensors of floating point and complex dtype can require gradients",
    )
    if not torch.cuda.is_available():
        yield ErrorInput(SampleInput((2,), {"device": "cuda"}), RuntimeError, r"CUDA is not available on this machine")


def _arange_errors(device):
    yield ErrorInput(SampleInput((0, 5, 0)), ValueError, r"step must be nonzero")
    yield ErrorInput(SampleInput((5, 0, 1)), ValueError, r"upper bound and larger bound inconsistent with step sign")
    yield ErrorInput(SampleInput(("a",)), TypeError, r"end must be a real number")


def _linspace_errors(device):
    yield ErrorInput(SampleInput((0, 1, -1)), ValueError, r"number of steps must be non-negative")
    yield ErrorInput(SampleInput((0, 1, 2.0)), TypeError, r"steps must be an int")


def _rand_errors(device):
    yield ErrorInput(SampleInput((2, 3), {"dtype": torch.int64}), TypeError, r"floating point dtype is required")
    yield ErrorInput(
        SampleInput((2, 3), {"generator": torch.Generator()}), RuntimeError, r"generator= with a torch.Generator other than torch.s default one cannot be traced"
    )


def _randint_errors(device):
    yield ErrorInput(SampleInput((5, 2, (3,))), ValueError, r"expects 'from' to be less than 'to'")
    yield ErrorInput(SampleInput((5.5, (3,))), TypeError, r"high must be an int")


def _tensor_errors(device):
    yield ErrorInput(SampleInput(([[1, 2], [3]],)), ValueError, r"equal-length rows")
    yield ErrorInput(SampleInput((["a"],)), TypeError, r"data must be numbers or nested lists of numbers")


def _full_errors(device):
    yield ErrorInput(SampleInput(((2,), "x")), TypeError, r"fill_value must be a number")
    yield ErrorInput(SampleInput(((-2,), 1)), ValueError, r"negative dimension")


def _like_errors(device):
    yield ErrorInput(SampleInput(((2, 3),)), TypeError, r"expected input to be a tensor")
    yield ErrorInput(
        SampleInput((make((2,), torch.float32, device),), {"dtype": 3}), TypeError, r"dtype must be a torch.dtype"
    )


opinfos: list[OpInfo] = [
    OpInfo("zeros", torch.zeros, _size_samples(), dtypes=ALL, error_inputs=_zeros_errors),
    OpInfo("ones", torch.ones, _size_samples(), dtypes=ALL),
    OpInfo("empty", torch.empty, _size_samples(), dtypes=ALL, random=True),
    OpInfo("full", torch.full, _full_samples, dtypes=ALL, error_inputs=_full_errors),
    OpInfo(
        "arange",
        torch.arange,
        _arange_samples,
        dtypes=(torch.float32, torch.float64, torch.int64),
        error_inputs=_arange_errors,
    ),
    OpInfo(
        "arange_bf16",
        torch.arange,
        lambda dtype, device: (SampleInput((5,), {"dtype": dtype}), SampleInput((0, 4, 0.5), {"dtype": dtype})),
        dtypes=(torch.bfloat16,),
    ),
    OpInfo(
        "linspace",
        torch.linspace,
        _linspace_samples,
        dtypes=(torch.float32, torch.float64, torch.bfloat16, torch.int64),
        error_inputs=_linspace_errors,
    ),
    OpInfo("eye", torch.eye, _eye_samples, dtypes=ALL),
    OpInfo("rand", torch.rand, _size_samples(), dtypes=FLOATS, error_inputs=_rand_errors),
    OpInfo("randn", torch.randn, _size_samples(), dtypes=FLOATS),
    OpInfo(
        "randint",
        torch.randint,
        _randint_samples,
        dtypes=(torch.int64, torch.int32, torch.float32),
        error_inputs=_randint_errors,
    ),
    OpInfo(
        "rand_twice",
        lambda *size: torch.rand(*size) + torch.rand(*size),
        lambda dtype, device: (SampleInput((3, 4)),),
        dtypes=(torch.float32,),
    ),
    OpInfo(
        "rand_unused_draw",
        lambda *size: (torch.rand(*size), torch.randn(*size))[1],
        lambda dtype, device: (SampleInput((3, 4)),),
        dtypes=(torch.float32,),
    ),
    OpInfo("tensor", torch.tensor, _tensor_samples, dtypes=ALL, error_inputs=_tensor_errors),
    OpInfo("as_tensor", torch.as_tensor, _as_tensor_samples, dtypes=(torch.float32, torch.int64, torch.bool)),
    OpInfo(
        "scalar_tensor",
        torch.scalar_tensor,
        lambda dtype, device: (
            SampleInput((3,), {"dtype": dtype}),
            SampleInput((1.5,)),
        ),
        dtypes=ALL,
    ),
    OpInfo("zeros_like", torch.zeros_like, _like_samples(), dtypes=ALL, error_inputs=_like_errors),
    OpInfo("ones_like", torch.ones_like, _like_samples(), dtypes=ALL),
    OpInfo("empty_like", torch.empty_like, _like_samples(), dtypes=ALL, random=True),
    OpInfo("full_like", torch.full_like, _like_samples(extra=(3,)), dtypes=ALL),
    OpInfo("rand_like", torch.rand_like, _like_samples(), dtypes=FLOATS),
    OpInfo("randn_like", torch.randn_like, _like_samples(), dtypes=FLOATS),
    OpInfo("randint_like", torch.randint_like, _like_samples(extra=(10,)), dtypes=(torch.float32, torch.int64)),
    OpInfo("new_zeros", lambda a, *args, **kw: a.new_zeros(*args, **kw), _new_samples(), dtypes=ALL),
    OpInfo("new_ones", lambda a, *args, **kw: a.new_ones(*args, **kw), _new_samples(), dtypes=ALL),
    OpInfo("new_empty", lambda a, *args, **kw: a.new_empty(*args, **kw), _new_samples(), dtypes=ALL, random=True),
    OpInfo("new_full", lambda a, *args, **kw: a.new_full(*args, **kw), _new_samples(fill=True), dtypes=ALL),
    OpInfo(
        "new_tensor",
        lambda a, *args, **kw: a.new_tensor(*args, **kw),
        _new_tensor_samples,
        dtypes=(torch.float32, torch.int64),
    ),
]
