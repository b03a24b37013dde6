"""Programs written as ML engineers write them (a U-Net, a VAE, a seq2seq with attention, a Perceiver, a training
loop with EMA, clipping and bfloat16 autocast, hand-written sampling and beam search, data processing with
``bucketize``/``unique``/``scatter_reduce``), where the jitted call differed from eager: the ABC registry changed
while a call was traced (the first aten meta kernel imports sympy and ``torch._dynamo``, which register classes).
Each runs the program eagerly and jitted on several calls and compares the values, or the cache it left."""

import collections.abc
import subprocess
import sys

import torch

import thunder


def _sized_then_registers(x, items, lazy: dict):
    n = len(items) if isinstance(items, collections.abc.Sized) else -1
    if "cls" not in lazy:  # as a module imported on first use registers its classes
        lazy["cls"] = type("Fresh", (), {})
        collections.abc.Sequence.register(lazy["cls"])
    return x * n


def test_an_abc_registration_while_traced_keeps_the_entry():
    # The trace checked the ABC token as it was when the call began, and the registration made during the call changed
    # it: the entry's prologue rejected the very inputs it was traced with (an InternalError).
    jitted = thunder.jit(_sized_then_registers)
    lazy_eager, lazy_jitted = {}, {}
    for items in ([1, 2], [1, 2, 3], (4,)):
        x = torch.randn(2)
        torch.testing.assert_close(jitted(x, items, lazy_jitted), _sized_then_registers(x, items, lazy_eager))
    assert list(lazy_jitted) == ["cls"]


_FIRST_PROGRAM_OF_A_PROCESS = """
import collections.abc, torch, thunder
import torch.nn.functional as F

def up(x, size):
    k = tuple(size) if isinstance(size, collections.abc.Sequence) else (size, size)
    return F.interpolate(F.avg_pool2d(x, k), scale_factor=2.0, mode="bilinear")

jitted = thunder.jit(up)
x = torch.randn(1, 2, 4, 4)
for _ in range(3):
    torch.testing.assert_close(jitted(x, [2, 2]), up(x, [2, 2]))
print(thunder.cache_misses(jitted))
"""


def test_the_first_meta_kernel_of_a_process_changes_no_entry():
    # A U-Net's first call in a fresh process: the program asked an ABC, then tracing ran aten's meta kernels for the
    # pooling and the resampling, whose first run imports sympy and torch._dynamo (registering their number types and
    # NumPy's seed sequences): an InternalError on the first call (or, without NumPy's generator imported on the way,
    # a second compilation on the second call).
    done = subprocess.run([sys.executable, "-c", _FIRST_PROGRAM_OF_A_PROCESS], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["1"]
