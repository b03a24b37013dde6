"""Devices: thunder uses ``torch.device`` objects directly.

Layer: core. Imports: torch only.
"""

from __future__ import annotations

import torch

Device = torch.device
cpu = torch.device("cpu")


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
