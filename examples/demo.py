"""Demo: jit a small model, run it, print what the compiler did, and write the trace explorer
as a self-contained HTML page (open it in any browser: no kernel, no network).

Run: ``python examples/demo.py [--out explorer.html]``
"""

import argparse

import torch

import thunder
import thunder_viz
from thunder_viz import Session


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        h = torch.nn.functional.gelu(self.fc1(x))
        unused = h * 3  # noqa: F841  (dead code: the DCE pass removes it)
        return torch.softmax(self.fc2(h) + self.fc2(h), dim=-1)  # a repeated subexpression: CSE merges it


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="explorer.html", help="where to write the HTML explorer")
    opts = parser.parse_args()

    torch.manual_seed(0)
    model, x = MLP(), torch.randn(8, 16)
    session = Session(thunder.jit(model))
    out = session(x)
    torch.testing.assert_close(out, model(x))
    print("Result matches eager PyTorch.\n")
    for trace in thunder.last_traces(session.jitted):
        print(f"=== {trace.provenance} ===")
        print(trace.python(print_depth=1), end="\n\n")
    session.rerun(["torch"])  # timing and agreement with eager, shown in the explorer's runs table
    thunder_viz.write_html(session.jitted, opts.out)  # its steps and the session's runs, in one file
    print(f"Wrote the trace explorer to {opts.out}")


if __name__ == "__main__":
    main()
