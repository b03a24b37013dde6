"""thunder.examine: which torch operations a program calls and which are supported."""

from __future__ import annotations

import torch

from thunder.examine import examine


def test_examine_lists_unsupported_ops_and_the_jit_failure():
    def f(x):
        return torch.special.gammainc(x, x) + x.sin()

    report = examine(f, torch.randn(4))
    assert "torch.special.gammainc" in report["unsupported"]
    assert "torch.Tensor.sin" in report["supported"]
    assert "torch.special.gammainc" in report["jit_error"]


def test_examine_a_supported_program(capsys):
    def g(x):
        return torch.nn.functional.gelu(x @ x.T).sum()

    report = examine(g, torch.randn(3, 3))
    assert not report["unsupported"] and report["jit_error"] is None
    assert "thunder.jit ran the function" in capsys.readouterr().out


def test_examine_counts_what_traced_tensors_answer_as_supported():
    """Metadata queries and data-dependent uses (a split) run under thunder.jit, so examine must
    not list them (it listed size, dim, numel and __bool__ of every zoo model as unsupported)."""

    def f(x):
        if x.sum() > 0 and x.dim() == 2 and 2.0 not in x:
            return x.reshape(x.size(0), x.numel() // x.size(0)) * len(x)
        return x

    report = examine(f, torch.ones(2, 3), show=False)
    assert not report["unsupported"] and report["jit_error"] is None
    assert {"torch.Tensor.size", "torch.Tensor.dim", "torch.Tensor.numel", "torch.Tensor.__bool__"} <= set(
        report["supported"]
    )


def test_examine_lists_what_has_no_meaning_in_a_trace_with_the_reason(capsys):
    def f(x):
        return x + (x.data_ptr() % 2)

    report = examine(f, torch.randn(3))
    assert "torch.Tensor.data_ptr" in report["untraceable"] and "memory" in report["untraceable"]["torch.Tensor.data_ptr"]
    assert "torch.Tensor.data_ptr" not in report["unsupported"]
    assert "no meaning in a trace: torch.Tensor.data_ptr" in capsys.readouterr().out


def test_ops_with_no_meaning_in_a_trace_are_listed_with_the_reason(capsys):
    def f(x):
        return torch.as_strided_(x, (2,), (2,)) + x.as_strided_((2,), (1,), 1)

    report = examine(f, torch.randn(4))
    assert report["untraceable"]["torch.as_strided_"].startswith("it reads the tensor's memory")
    assert "torch.Tensor.as_strided_" in report["untraceable"]
    assert not report["unsupported"]
    assert "has no meaning in a trace" in report["jit_error"]
    assert "no meaning in a trace: torch.as_strided_ (it reads" in capsys.readouterr().out


def test_formatting_tensors_is_listed_as_supported_where_jit_runs_it(capsys):
    """``Tensor.__format__``/``__str__`` were listed as having no meaning in a trace, though thunder.jit formats an
    input, a tensor not requiring grad and a 0-d tensor's item as eager does (Note [Formatting a traced tensor])."""

    def f(x):
        print(f"{x}", str(x), f"{x.sum():.2f}", x.sum().__str__())
        return x * 2

    report = examine(f, torch.randn(3))
    assert report["jit_error"] is None and not report["untraceable"] and not report["unsupported"]
    assert "torch.Tensor.__format__" in report["supported"]
