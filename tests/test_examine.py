"""thunder.examine: which torch operations a program calls and which are supported."""

from __future__ import annotations

import torch

from thunder.examine import examine


def test_examine_lists_unsupported_ops_and_the_jit_failure():
    def f(x):
        return torch.fft.fft(x).real + x.sin()

    report = examine(f, torch.randn(4))
    assert "torch.fft.fft" in report["unsupported"]
    assert "torch.Tensor.sin" in report["supported"]
    assert "torch.fft.fft" in report["jit_error"]


def test_examine_a_supported_program(capsys):
    def g(x):
        return torch.nn.functional.gelu(x @ x.T).sum()

    report = examine(g, torch.randn(3, 3))
    assert not report["unsupported"] and report["jit_error"] is None
    assert "thunder.jit ran the function" in capsys.readouterr().out
