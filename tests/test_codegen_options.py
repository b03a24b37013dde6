"""The printer's options for tools: profiling ranges (Note [Profiling ranges]) and a lines cache
shared by the traces of one compilation; both must leave what the traces print and compute unchanged."""

from __future__ import annotations

import torch

import thunder
from thunder.core.codegen import profiling_ranges, trace_source


def program(x, w):
    y = torch.nn.functional.gelu(x @ w) * 0.5 + 3
    return y.sum(dim=1, keepdim=True), torch.full((2,), 7.0)


def test_a_shared_lines_cache_prints_every_trace_as_without_it():
    jf = thunder.jit(program)
    x, w = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4)
    jf(x, w)[0].sum().backward()
    traces = [*thunder.last_prologue_traces(jf), *thunder.last_traces(jf), *thunder.last_backward_traces(jf)]
    cache: dict = {}
    for trace in traces:
        assert trace_source(trace, print_depth=1, lines_cache=cache) == trace_source(trace, print_depth=1)
    assert cache, "shared bound symbols were cached"


def test_profiling_ranges_name_each_statement_and_leave_the_function_as_it_was():
    jf = thunder.jit(program, executors=["torch"])
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    expected = jf(x, w)
    trace = thunder.last_traces(jf)[-1]
    fn = trace.python_callable()
    code = fn.__code__
    names = {i: f"s{i}" for i, b in enumerate(trace.bound_symbols) if b.sym.name not in ("python_return", "python_del")}
    with profiling_ranges(trace, lambda i, b: names.get(i)), torch.autograd.profiler.profile() as prof:
        during = jf(x, w)
    seen = {e.name for e in prof.function_events}
    assert set(names.values()) <= seen
    assert fn.__code__ is code
    for a, b in zip((*during, *jf(x, w)), (*expected, *expected)):
        torch.testing.assert_close(a, b)


def test_profiling_ranges_reach_inside_a_decorated_trace():
    jf = thunder.jit(program, executors=["torch"], disable_torch_autograd=True)  # @torch.no_grad() on it
    x, w = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4)
    jf(x, w)
    trace = thunder.last_traces(jf)[-1]
    assert trace.decorators
    with profiling_ranges(trace, lambda i, b: f"s{i}"), torch.autograd.profiler.profile() as prof:
        out = jf(x, w)
    assert "s0" in {e.name for e in prof.function_events}
    assert not out[0].requires_grad
