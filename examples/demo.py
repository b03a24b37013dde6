"""Demo: jit a small function, run it, and print what the compiler did.

Run: ``python examples/demo.py``
"""

import torch

import thunder


def gelu_mlp(x, w1, w2):
    h = torch.nn.functional.linear(x, w1)
    h = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
    return torch.nn.functional.linear(h, w2)


def simple(x, y):
    z = x * y + torch.sin(x)
    return z - y


def main() -> None:
    x, y = torch.randn(4, 8), torch.randn(4, 8)
    jfn = thunder.jit(simple)
    out = jfn(x, y)
    torch.testing.assert_close(out, simple(x, y))
    print("Result matches eager PyTorch.\n")
    print("=== Prologue (checks the inputs on every call) ===")
    print(thunder.last_prologue_traces(jfn)[-1])
    for trace in thunder.last_traces(jfn):
        print(f"\n=== {trace.provenance} ===")
        print(trace)
    jfn(x, y)
    print(f"\ncache hits: {thunder.cache_hits(jfn)}, cache misses: {thunder.cache_misses(jfn)}")


if __name__ == "__main__":
    main()
