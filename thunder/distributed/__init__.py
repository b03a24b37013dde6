"""Training on many processes with ``torch.distributed``: ``ddp`` (replicated parameters, bucketed gradient
all-reduces) and ``fsdp`` (parameters sharded on dim 0, gathered for use, gradients reduce-scattered).

Both are transforms of the compiled program: the collectives are ops of its forward and backward traces
(``dist.all_reduce``, ``dist.all_gather``, ``dist.reduce_scatter``, each with its ``dist.wait``), shown by
``thunder.last_traces`` and ``thunder.last_backward_traces``. Importable without an initialized process
group; ``ddp`` and ``fsdp`` need one (``torch.distributed.init_process_group``).

Layer: distributed (above passes and executors; nothing below imports it).
"""

from thunder.distributed.prims import GatheredMemory, measure_gathered_memory
from thunder.distributed.transforms.ddp import ddp
from thunder.distributed.transforms.fsdp import FSDPBucketingStrategy, FSDPType, fsdp

__all__ = ["ddp", "fsdp", "FSDPType", "FSDPBucketingStrategy", "measure_gathered_memory", "GatheredMemory"]
