"""A worker process that compiles torchcompile regions with Inductor, away from the caller.

Started by ``inductor_pool`` (``main``, at its niceness). Each job (one pickled
message on stdin) is a region's Python source, the objects its names refer to, and the
signature of the inputs to compile for (shapes, strides, dtypes, devices, non-tensor values,
grad mode). The worker traces the source to aten ops on fake tensors, so it never allocates the
inputs, compiles the graph with Inductor and saves the artifact to the path the job names; its
answer (on the original stdout; Inductor's own prints go to stderr) is why it failed (or None),
the constant tensors the artifact takes after the inputs, and what a call of the compiled graph and of the
region's ops on torch's kernels took here (``measure``), so that the caller loads only a graph that pays.

Compiling here keeps FX's process-wide patches (``Tracer.trace`` patches ``torch.nn.Module``)
and Inductor's seconds of work out of the calling process, which only loads the artifact.

Layer: executors. Imports: executors.torch_compile (for the one trace-and-compile path).
"""

from __future__ import annotations

import os
import pickle
import statistics
import sys
import time
from dataclasses import dataclass
from typing import Any, BinaryIO

import torch


@dataclass(frozen=True)
class TensorSpec:
    """What a compiled graph is specialized to of one tensor input; the worker builds a fake one."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]
    storage_offset: int
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool

    @staticmethod
    def of(t: torch.Tensor) -> TensorSpec:
        return TensorSpec(tuple(t.shape), t.stride(), t.storage_offset(), t.dtype, t.device, t.requires_grad)


@dataclass(frozen=True)
class Job:
    source: str  # the region's Python source, defining ``function_name``
    function_name: str
    ctx: dict[str, Any]  # the source's globals that pickle
    references: dict[str, str]  # and those that do not, as ``module:attribute.path``
    inputs: tuple[TensorSpec | Any, ...]
    grad_enabled: bool
    artifact_path: str


def send(stream: BinaryIO, obj: Any) -> None:
    """One length-prefixed pickle."""
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "little") + data)
    stream.flush()


def receive(stream: BinaryIO) -> Any:
    """The next message, or raises EOFError when the other side has closed the stream."""
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError("stream closed")
    data = stream.read(int.from_bytes(header, "little"))
    if len(data) < int.from_bytes(header, "little"):
        raise EOFError("stream closed mid-message")
    return pickle.loads(data)


def compile_job(job: Job) -> tuple[list[torch.Tensor], tuple[float, float] | None]:
    """Traces and compiles one region for its signature; saves the artifact and returns the
    constant tensors it takes after the inputs and ``measure``'s times."""
    import importlib

    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    from thunder.executors.torch_compile import compile_region

    namespace = dict(job.ctx)
    for name, reference in job.references.items():
        module, _, path = reference.partition(":")
        value = importlib.import_module(module)
        for attribute in path.split(".") if path else ():
            value = getattr(value, attribute)
        namespace[name] = value
    exec(compile(job.source, f"<thunder region {job.function_name}>", "exec"), namespace)
    fn = namespace[job.function_name]
    fake_mode = FakeTensorMode(shape_env=ShapeEnv())
    with fake_mode:
        args = [_tensor(a) if isinstance(a, TensorSpec) else a for a in job.inputs]
    with torch.set_grad_enabled(job.grad_enabled):
        compiled, constants = compile_region(fn, args, fake_mode=fake_mode)
    compiled.save(path=job.artifact_path, format="binary")
    return constants, measure(fn, compiled, constants, job)


#: Seconds the worker times a compiled CPU region against its ops on torch's kernels, at most (three calls each at least).
MEASURE_S = 0.2
#: A region whose inputs take more bytes than this is not timed here (its graph is loaded and tried in the caller).
MEASURE_MAX_BYTES = 256 * 2**20


def measure(fn, compiled, constants: list[torch.Tensor], job: Job) -> tuple[float, float] | None:
    """Median seconds a call of the compiled graph and of the region's ops on torch's kernels took, alternating, on
    inputs of the job's signature (random floats, zero integers); None for a GPU region, a region of large inputs,
    or one that fails on such values. Both run here, under the same load, so their ratio is what counts."""
    specs = [a for a in job.inputs if isinstance(a, TensorSpec)]
    if any(s.device.type != "cpu" for s in specs) or sum(_numel(s) * s.dtype.itemsize for s in specs) > MEASURE_MAX_BYTES:
        return None
    try:
        args = [_tensor(a, real=True) if isinstance(a, TensorSpec) else a for a in job.inputs]
        runs = (lambda: compiled(*args, *constants), lambda: fn(*args))
        times: tuple[list[float], list[float]] = ([], [])
        with torch.set_grad_enabled(job.grad_enabled):
            for run in runs:  # first calls are not timed
                run()
            deadline = time.perf_counter() + MEASURE_S
            while len(times[0]) < 3 or (len(times[0]) < 50 and time.perf_counter() < deadline):
                for run, spent in zip(runs, times):
                    start = time.perf_counter()
                    run()
                    spent.append(time.perf_counter() - start)
    except Exception:  # noqa: BLE001 - e.g. an integer division by the zeros: the caller tries the graph itself
        return None
    return statistics.median(times[0]), statistics.median(times[1])


def _numel(spec: TensorSpec) -> int:
    """Elements of the storage a tensor of ``spec`` views."""
    if 0 in spec.shape:
        return spec.storage_offset
    return spec.storage_offset + 1 + sum((n - 1) * s for n, s in zip(spec.shape, spec.stride) if n > 0)


def _tensor(spec: TensorSpec, *, real: bool = False) -> torch.Tensor:
    """A tensor of ``spec``: uninitialized (a fake one, under a fake mode), or with random floats or zero integers."""
    floating = spec.dtype.is_floating_point or spec.dtype.is_complex
    make = torch.randn if real and floating else torch.zeros if real else torch.empty
    t = make(_numel(spec), dtype=spec.dtype, device=spec.device).as_strided(spec.shape, spec.stride, spec.storage_offset)
    return t.requires_grad_(spec.requires_grad) if spec.requires_grad else t


def main() -> None:
    answers = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # Inductor's prints must not corrupt the answers
    jobs = sys.stdin.buffer
    while True:
        try:
            constants, times = compile_job(receive(jobs))  # unpickling can fail too: a function the worker cannot import
            send(answers, (None, constants, times))
        except EOFError:  # the caller has gone
            return
        except Exception as e:  # noqa: BLE001 - every failure is the caller's to report
            send(answers, (f"{type(e).__name__}: {e}", [], None))


if __name__ == "__main__":
    # Run from the imported module, so the classes the jobs pickle are the ones compile_job checks (``inductor_pool``
    # starts workers the same way, at its niceness).
    from thunder.executors import inductor_worker

    inductor_worker.main()
