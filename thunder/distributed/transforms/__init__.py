"""The transforms behind ``thunder.distributed.ddp`` and ``fsdp`` (modules of their own, so that the package's
``ddp`` and ``fsdp`` functions do not hide them)."""

from thunder.distributed.transforms.ddp import DDPTransform
from thunder.distributed.transforms.fsdp import FSDPTransform

__all__ = ["DDPTransform", "FSDPTransform"]
