"""This project's stand-in for lightning-thunder's test framework (``thunder/tests/framework.py``), used by
``benchmarks/lightning_tests.py``, which copies it into its temporary ``thunder.tests`` package as ``framework.py``.

Lightning-thunder's own framework is built on its internals (its dtype classes, a ``Device`` class with a
``devicetype``, its trace-to-callable pipeline), so it cannot import here without patching this project's
modules. This module gives the test files the names they import from it, with the same behaviour for what
runs on a CPU: the decorators that instantiate one test per executor, device type and dtype (named as
lightning-thunder names them, ``test_foo_torch_cpu_float32``), the test executors, and the skips for CUDA,
nvFuser, Triton and bitsandbytes. Not a module of this project's test suite.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import platform
from collections.abc import Callable, Sequence

import pytest
import torch
from torch.testing import assert_close

import thunder
from thunder.core import devices, dtypes

__all__ = ["TestExecutor", "TorchExecutor", "nvFuserExecutor", "instantiate", "ops"]

IS_WINDOWS = platform.system() == "Windows"
IN_CI = os.getenv("CI") == "true"
CUDA_AVAILABLE = torch.cuda.is_available()
NVFUSER_AVAILABLE = TRITON_AVAILABLE = BITSANDBYTES_AVAILABLE = False


class NOTHING:
    """Marks "no dtype" (``instantiate(dtypes=NOTHING)``), as distinct from "every dtype" (None)."""


class TestExecutor:
    name = "?"
    supported_devicetypes = (devices.DeviceType.CPU, devices.DeviceType.CUDA)

    def is_available(self) -> bool:
        return True

    def supports_dtype(self, dtype) -> bool:
        return True

    def supports_devicetype(self, devicetype) -> bool:
        return devicetype in self.supported_devicetypes

    def executors_list(self) -> list:
        return []

    def make_callable(self, fn: Callable, **kwargs) -> Callable:
        return thunder.jit(fn, executors=self.executors_list(), **kwargs)

    def version(self) -> str:
        return torch.__version__

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class TorchTestExecutor(TestExecutor):
    name = "torch"

    def executors_list(self) -> list:
        return [thunder.pytorch_executor]


class TorchCompileTestExecutor(TestExecutor):
    name = "torchcompile"

    def executors_list(self) -> list:
        return [thunder.torch_compile_executor]


class DynamoThunderTestExecutor(TestExecutor):
    name = "DynamoThunder"

    def make_callable(self, fn: Callable, **kwargs) -> Callable:
        from thunder.dynamo import thunderfx  # lightning-thunder's torch.compile backend

        return thunderfx(fn, **kwargs)


TorchExecutor = TorchTestExecutor()
TorchCompileExecutor = TorchCompileCatExecutor = TorchCompileXentropyExecutor = TorchCompileTestExecutor()
DynamoThunderExecutor = DynamoThunderTestExecutor()
nvFuserExecutor = nvFuserTestExecutor = None  # lightning-thunder's where nvFuser is not available


def _all_test_executors() -> list[TestExecutor]:
    return [TorchExecutor]


def _all_devicetypes() -> Sequence[devices.DeviceType]:
    return (devices.DeviceType.CPU, devices.DeviceType.CUDA)


def available_devicetypes() -> tuple[devices.DeviceType, ...]:
    return _all_devicetypes() if torch.cuda.is_available() else (devices.DeviceType.CPU,)


def _dtype_name(dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _resolve_dtypes(spec) -> list:
    if spec is None:
        return sorted(dtypes.all_dtypes, key=str)
    resolved = set()
    for entry in spec:
        if entry is dtypes.dtype:
            resolved |= set(dtypes.all_dtypes)
        else:
            resolved |= {entry} if isinstance(entry, torch.dtype) else set(entry)
    return sorted(resolved, key=str)


class instantiate:
    """Makes one test per executor, device type and dtype from a template ``test(executor, device, dtype)``,
    in the caller's module (one decorator making many functions, as lightning-thunder's)."""

    def __init__(self, *, executors=None, devicetypes=None, dtypes=None, num_devices: int = 1,
                 decorators: Sequence | None = None, scope=None, as_name: str | None = None):  # fmt: skip
        self.executors = list(executors) if executors is not None else _all_test_executors()
        self.devicetypes = [d for d in (devicetypes or available_devicetypes()) if d in available_devicetypes()]
        self.dtypes = [None] if dtypes is NOTHING else _resolve_dtypes(dtypes)
        self.num_devices, self.decorators, self.as_name = num_devices, decorators or (), as_name
        self.scope = scope if scope is not None else inspect.currentframe().f_back.f_globals

    def __call__(self, template: Callable) -> None:
        for executor in self.executors:
            if executor is None or not executor.is_available():
                continue
            for devicetype in self.devicetypes:
                if not executor.supports_devicetype(devicetype) or (devicetype != "cpu" and self.num_devices > 1):
                    continue
                device = devicetype.value if self.num_devices == 1 else [devicetype.value] * self.num_devices
                for dtype in self.dtypes:
                    name = "_".join((self.as_name or template.__name__, executor.name, devicetype.value, _dtype_name(dtype)))
                    test = functools.partial(template, executor, device, dtype)
                    test.__name__ = name
                    for decorator in self.decorators:
                        test = decorator(test)
                    self.scope[name] = test


class ops:
    """Makes one test per op info, executor and dtype from a template ``test(op, device, dtype, executor, comp)``."""

    def __init__(self, opinfos, *, supported_executors=None, supported_devicetypes=None, supported_dtypes=None,
                 scope=None):  # fmt: skip
        self.opinfos = opinfos
        self.executors = list(supported_executors) if supported_executors is not None else _all_test_executors()
        self.dtypes = None if supported_dtypes in (None, NOTHING) else set(_resolve_dtypes(supported_dtypes))
        self.scope = scope if scope is not None else inspect.currentframe().f_back.f_globals

    def __call__(self, template: Callable) -> None:
        for opinfo in self.opinfos:
            if opinfo is None:  # op infos that did not import (lightning_tests stands in for opinfos.py)
                continue
            for executor in self.executors:
                if executor is None or not executor.is_available():
                    continue
                op_dtypes = opinfo.dtypes() if self.dtypes is None else opinfo.dtypes() & self.dtypes
                for dtype in sorted(op_dtypes, key=str):
                    name = "_".join((template.__name__, opinfo.name, executor.name, "cpu", _dtype_name(dtype)))
                    test = functools.partial(template, opinfo, "cpu", dtype, executor, assert_close)
                    test.__name__ = name
                    self.scope[name] = test


def _skip_unless(condition: bool, reason: str) -> Callable:
    def decorator(fn: Callable) -> Callable:
        @functools.wraps(fn)
        def test(*args, **kwargs):
            if not condition:
                pytest.skip(reason)
            return fn(*args, **kwargs)

        return test

    return decorator


requiresCUDA = _skip_unless(CUDA_AVAILABLE, "Requires CUDA")
requiresNVFuser = _skip_unless(NVFUSER_AVAILABLE, "Requires nvFuser")
requiresTriton = _skip_unless(TRITON_AVAILABLE, "Requires Triton")
# torch 2.10 dropped ``autograd_function_apply``'s ``args_tensor_mask``, which lightning-thunder's tests of it read
xfail_if_args_tensor_mask_removed = pytest.mark.xfail(
    tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 10), reason="torch removed args_tensor_mask"
)


def requiresDeviceMemory(required_memory_bytes: int, cuda_device_id: int = 0) -> Callable:
    return _skip_unless(False, "Requires CUDA device memory")


class custom_comparator:
    def __init__(self, comparator: Callable):
        self.comparator = comparator

    def __call__(self, template: Callable) -> Callable:
        return template


@contextlib.contextmanager
def set_default_dtype_ctx(dtype: torch.dtype):
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def assert_closer(*, reference, candidate, competitor, comparator: Callable) -> None:
    """Asserts that ``candidate`` is at least as close to ``reference`` as ``competitor`` is, elementwise."""
    for ref, cand, comp in zip(*(torch.utils._pytree.tree_leaves(x) for x in (reference, candidate, competitor))):
        if isinstance(ref, torch.Tensor):
            nearest = torch.minimum((ref - cand).abs(), (ref - comp).abs())
            comparator(cand, ref + torch.where(ref > cand, -nearest, nearest), check_dtype=False)


def run_snippet(snippet: Callable, opinfo, devicetype, dtype, *args, **kwargs):
    snippet(*args, **kwargs)
