"""Data-parallel training with thunder.distributed: DDP or FSDP (ZeRO-2/3) of a small GPT-2-style model.

Run (2 processes on this machine, gloo on CPU, NCCL when CUDA is there):

    torchrun --nproc-per-node 2 examples/train_distributed.py [--fsdp zero2|zero3] [--bucketing auto] [--steps 20]

Each rank trains on its own slice of every batch; rank 0 prints the losses (averaged over the ranks), the
collectives of the compiled backward, and finally saves the full parameters (``original_state_dict``).
"""

from __future__ import annotations

import argparse
import datetime

import torch
import torch.distributed as dist

import thunder
from thunder.distributed import FSDPBucketingStrategy, FSDPType, ddp, fsdp


class Block(torch.nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.attn = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x, mask):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(torch.nn.Module):
    def __init__(self, vocab: int = 256, dim: int = 64, heads: int = 4, layers: int = 4, seq: int = 32):
        super().__init__()
        self.tok, self.pos = torch.nn.Embedding(vocab, dim), torch.nn.Embedding(seq, dim)
        self.blocks = torch.nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln, self.head = torch.nn.LayerNorm(dim), torch.nn.Linear(dim, vocab, bias=False)
        self.register_buffer("mask", torch.triu(torch.full((seq, seq), float("-inf")), diagonal=1))

    def forward(self, ids):
        x = self.tok(ids) + self.pos(torch.arange(ids.shape[1]))
        for block in self.blocks:
            x = block(x, self.mask)
        return self.head(self.ln(x))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--fsdp", choices=["zero2", "zero3"], default=None, help="shard instead of replicate")
    parser.add_argument("--bucketing", choices=["none", "layer", "block", "auto"], default="auto",
                        help="fsdp: which parameters share a collective (FSDPBucketingStrategy)")  # fmt: skip
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    backend = "nccl" if torch.cuda.is_available() else "gloo"
    # A timeout: a rank that fails makes the others raise after it instead of waiting forever.
    dist.init_process_group(backend, timeout=datetime.timedelta(minutes=2))
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)  # the same model everywhere (ddp also broadcasts rank 0's parameters)

    model = thunder.jit(TinyGPT())
    if args.fsdp:
        model = fsdp(model, sharding_strategy=FSDPType[args.fsdp.upper()],
                     bucketing_strategy=FSDPBucketingStrategy[args.bucketing.upper()])  # fmt: skip
    else:
        model = ddp(model, bucket_size_in_mb=1.0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)

    for step in range(args.steps):
        g = torch.Generator().manual_seed(step)
        ids = torch.randint(0, 256, (8 * world, 33), generator=g)[rank * 8 : (rank + 1) * 8]  # this rank's slice
        logits = model(ids[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), ids[:, 1:].flatten())
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        average = loss.detach().clone()
        dist.all_reduce(average)
        if rank == 0 and step % 5 == 0:
            print(f"step {step:3d}  loss {average.item() / world:.4f}")

    backward = thunder.last_backward_traces(model)[-1]
    collectives = [
        b.sym.name
        for b in backward.bound_symbols
        if b.sym.name in ("dist_all_reduce", "dist_reduce_scatter", "dist_all_gather")
    ]
    state = model.original_state_dict()  # a collective under fsdp: every rank calls it
    if rank == 0:
        print(f"the backward's collectives: {len(collectives)} ({', '.join(sorted(set(collectives)))})")
        torch.save(state, "train_distributed.pt")
        print("saved the full parameters to train_distributed.pt")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
