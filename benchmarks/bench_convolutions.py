"""2-d convolutions on CPU: oneDNN (what eager PyTorch runs for float32) against the direct
im2col-and-GEMM kernels (what it runs with oneDNN off), forward and backward, per shape.

The measurement behind ``thunder.executors.torchex.DIRECT_CONV_MACS`` (Note [Small convolutions]):
the direct kernels win up to about half a million multiply-adds per call and lose beyond a few
million. Run: ``python -m benchmarks.bench_convolutions [--threads T]``. One process; each figure is
the best of three timed batches, in microseconds per call.
"""

from __future__ import annotations

import argparse
import timeit

import torch

from thunder.executors.torchex import DIRECT_CONV_MACS, conv2d_direct, conv2d_direct_backward

# (input shape, weight shape, stride, padding): tiny-model sizes up to small-image CNN sizes.
SHAPES = [
    ((2, 3, 16, 16), (8, 3, 4, 4), 4, 0),
    ((2, 8, 4, 4), (16, 8, 2, 2), 2, 0),
    ((2, 8, 8, 8), (8, 8, 3, 3), 1, 1),
    ((2, 32, 8, 8), (64, 32, 1, 1), 2, 0),
    ((2, 16, 8, 8), (16, 16, 3, 3), 1, 1),
    ((4, 8, 16, 16), (8, 8, 3, 3), 1, 1),
    ((2, 16, 16, 16), (16, 16, 3, 3), 1, 1),
    ((2, 3, 32, 32), (16, 3, 7, 7), 2, 3),
    ((8, 3, 32, 32), (16, 3, 3, 3), 1, 1),
    ((8, 16, 16, 16), (16, 16, 3, 3), 1, 1),
    ((32, 64, 8, 8), (64, 64, 3, 3), 1, 1),
]


def _us(fn) -> float:
    fn()
    number = 1
    while timeit.timeit(fn, number=number) < 0.05:
        number *= 2
    return min(timeit.repeat(fn, number=number, repeat=3)) / number * 1e6


def row(shape, wshape, stride: int, padding: int) -> str:
    """One table row: both kernels' forward and backward for one convolution."""
    x, w, b = torch.randn(shape), torch.randn(wshape), torch.randn(wshape[0])
    y = torch.conv2d(x, w, b, stride, padding)
    g = torch.randn_like(y)
    st, pad, k = [stride] * 2, [padding] * 2, list(wshape[2:])
    backward = torch.ops.aten.convolution_backward.default
    onednn_fwd = _us(lambda: torch.conv2d(x, w, b, stride, padding))
    onednn_bwd = _us(lambda: backward(g, x, w, [wshape[0]], st, pad, [1, 1], False, [0, 0], 1, [True] * 3))
    direct_fwd = _us(lambda: conv2d_direct(x, w, b, k, st, pad))
    direct_bwd = _us(lambda: conv2d_direct_backward(g, x, w, k, st, pad, [True] * 3))
    macs = y.numel() * w[0].numel()
    runs = "direct" if macs <= DIRECT_CONV_MACS else "oneDNN"
    return (f"| {list(shape)} | {list(wshape)} | {stride} | {macs:,} | {onednn_fwd:.0f} | {direct_fwd:.0f} | "
            f"{onednn_bwd:.0f} | {direct_bwd:.0f} | {runs} |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=1, help="torch.set_num_threads (default 1)")
    torch.set_num_threads(parser.parse_args().threads)
    print(f"torch {torch.__version__}, {torch.get_num_threads()} thread(s); DIRECT_CONV_MACS = {DIRECT_CONV_MACS:,}\n")
    print("| input | weight | stride | MACs | oneDNN fwd us | direct fwd us | oneDNN bwd us | direct bwd us | thunder runs |")
    print("|---|---|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        print(row(*shape))


if __name__ == "__main__":
    main()
