"""Programs written as ML engineers write them (a U-Net, a VAE, a seq2seq with attention, a Perceiver, a training
loop with EMA, clipping and bfloat16 autocast, hand-written sampling and beam search, data processing with
``bucketize``/``unique``/``scatter_reduce``), where the jitted call differed from eager: the ABC registry changed
while a call was traced (the first aten meta kernel imports sympy and ``torch._dynamo``, which register classes); a
method under ``functools.lru_cache`` (rotary tables made once per length); torch settings a training step sets
(``torch.backends.cudnn.benchmark = True``, ``torch.set_num_threads(1)``) and leaves set; ``Tensor.nbytes``.
Each runs the program eagerly and jitted on several calls and compares the values, or the cache it left."""

import collections.abc
import functools
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


class _Rotary(torch.nn.Module):
    """Rotary position tables made once per length by a method under ``functools.lru_cache``, as model code does."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim, self.made = dim, 0

    @functools.lru_cache(maxsize=2)  # noqa: B019 (what the program does)
    def tables(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.made += 1
        inv = 1.0 / (10000 ** (torch.arange(0, self.dim, 2).float() / self.dim))
        angles = torch.outer(torch.arange(n).float(), inv)
        return angles.cos(), angles.sin()

    def forward(self, x):
        cos, sin = self.tables(x.shape[0])
        even, odd = x[:, ::2], x[:, 1::2]
        return torch.cat([even * cos - odd * sin, even * sin + odd * cos], -1)


def test_a_method_under_lru_cache_is_called_by_the_prologue():
    # ``self.tables(n)`` of an ``lru_cache`` method ran natively while traced: its tensors were not the trace's, and
    # tracing failed ("a torch.Tensor made inside the function by code thunder runs natively").
    eager, module = _Rotary(6), _Rotary(6)
    jitted = thunder.jit(module)
    for n in (4, 4, 5, 6, 4):
        x = torch.randn(n, 6)
        torch.testing.assert_close(jitted(x), eager(x))
        assert module.made == eager.made  # the table is made when eager makes it: on a miss of the instance's cache


def _training_step_settings(x):
    torch.backends.cudnn.benchmark = True  # what a training script sets in its step
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.set_float32_matmul_precision("high")
    torch.set_num_threads(1)
    return x * torch.get_num_threads()


def _settings() -> tuple:
    return (
        torch.backends.cudnn.benchmark, torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(), torch.get_float32_matmul_precision(),
        torch.get_num_threads(),
    )  # fmt: skip


def _put_settings(settings: tuple) -> None:
    benchmark, deterministic, warn_only, precision, threads = settings
    torch.backends.cudnn.benchmark = benchmark
    torch.use_deterministic_algorithms(deterministic, warn_only=warn_only)
    torch.set_float32_matmul_precision(precision)
    torch.set_num_threads(threads)


def test_torch_state_the_program_leaves_changed_is_set_by_every_call():
    # The setters ran natively while traced, once: the new entry's prologue rejected the inputs it was traced with (the
    # state had changed under it: an InternalError), and a cached call left the state as it found it.
    # (importing torch's own test utilities, as other test files do, freezes the cudnn flags: unfrozen here)
    with getattr(torch.backends, "__allow_nonbracketed_mutation")():
        _run_the_training_step_settings()


def _run_the_training_step_settings():
    before = _settings()
    start = (False, False, False, "highest", 2)
    jitted = thunder.jit(_training_step_settings)
    try:
        for _ in range(3):
            x = torch.randn(3)
            _put_settings(start)
            expected, after_eager = _training_step_settings(x), _settings()
            _put_settings(start)
            actual, after_jitted = jitted(x), _settings()
            torch.testing.assert_close(actual, expected)
            assert after_jitted == after_eager
        assert thunder.cache_misses(jitted) == 1
    finally:
        _put_settings(before)


def _with_anomaly_mode(x):
    with torch.autograd.detect_anomaly(check_nan=False):  # set and put back: nothing for the calls to set
        y = x * 2 if torch.is_anomaly_enabled() else x
    return y


def test_torch_state_set_and_put_back_by_the_program():
    jitted = thunder.jit(_with_anomaly_mode)
    for _ in range(2):
        x = torch.randn(3)
        torch.testing.assert_close(jitted(x), _with_anomaly_mode(x))
        assert not torch.is_anomaly_enabled()
    assert thunder.cache_misses(jitted) == 1


def _activation_bytes(x, log: list):
    h = x.relu()
    log.append(sum(t.nbytes for t in (x, h[::2], h.half())))  # activation memory, as a profiler-minded model logs it
    return h


def test_nbytes_of_a_traced_tensor():
    # ``Tensor.nbytes`` was not supported ("Tensor.nbytes is not supported by thunder yet").
    jitted = thunder.jit(_activation_bytes, cache="symbolic values")
    for n in (3, 4, 5):
        x = torch.randn(n, 2)
        log_eager, log_jitted = [], []
        torch.testing.assert_close(jitted(x, log_jitted), _activation_bytes(x, log_eager))
        assert log_jitted == log_eager


def _legacy_tf32_flag(x):
    torch.backends.cuda.matmul.allow_tf32 = False  # the legacy API, after the new one set "medium": torch refuses to read
    return x * 2  # the precision until the new API sets it again


def test_a_program_mixing_the_matmul_precision_apis():
    before = torch.get_float32_matmul_precision()
    jitted = thunder.jit(_legacy_tf32_flag)
    try:
        for _ in range(2):
            x = torch.randn(3)
            torch.set_float32_matmul_precision("medium")
            expected = _legacy_tf32_flag(x)
            torch.set_float32_matmul_precision("medium")
            torch.testing.assert_close(jitted(x), expected)
            assert not torch.backends.cuda.matmul.allow_tf32
    finally:
        torch.set_float32_matmul_precision(before)
    assert torch.get_float32_matmul_precision() == before
