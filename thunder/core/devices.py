"""Devices: thunder uses ``torch.device`` objects directly.

Layer: core. Imports: torch only.
"""

from __future__ import annotations

import enum

import torch

Device = torch.device
cpu = torch.device("cpu")


class DeviceType(enum.StrEnum):
    """lightning-thunder's device types. Its members are the strings of ``torch.device.type``, so
    ``x.device.type == DeviceType.CPU`` holds for a CPU tensor and ``DeviceType(x.device.type)`` is its type."""

    CPU = "cpu"
    CUDA = "cuda"
    META = "meta"


all_devicetypes = (DeviceType.CPU, DeviceType.CUDA)


def devicetype_string(devicetype: DeviceType) -> str:
    """``"cpu"`` for ``DeviceType.CPU``: the ``torch.device.type`` string."""
    return DeviceType(devicetype).value


def to_torch_device(x: str | torch.device | None) -> torch.device | None:
    """lightning-thunder's ``to_torch_device``: thunder's devices are torch's, so this is ``torch.device(x)``."""
    return x if x is None or isinstance(x, torch.device) else torch.device(x)


def to_device(x) -> torch.device:
    """A ``torch.device`` from a device, string, index or tensor-like."""
    if isinstance(x, torch.device):
        return x
    if isinstance(x, str):
        return torch.device(x)
    if isinstance(x, int):
        return torch.device("cuda", x)
    if hasattr(x, "device"):
        return x.device
    raise TypeError(f"cannot interpret {x!r} as a device")


def device_str(d: torch.device) -> str:
    """Short text for printed traces: ``cpu`` or ``cuda:0``."""
    return d.type if d.index is None else f"{d.type}:{d.index}"
