"""A randomized tester of ``thunder.jit`` against eager PyTorch.

- ``inputs``: Python source for call arguments (tensors of many shapes, dtypes and strides,
  Python numbers, strings, iterators), so a call can be printed as a reproducer.
- ``snippets``: small pieces of programs, one pool per feature family (elementwise ops,
  globals, closures, module attributes, side effects, ...), each with the outside-state
  changes that may happen between two calls; ``snippets_state`` holds the families that work
  on Python state (objects, side effects), ``snippets_python`` those that use Python's language
  features (generators, classes, control flow, grad modes), ``snippets_more`` the forms programs from outside
  found bugs in (with blocks, scalars mixed with 0-dim tensors, arguments that share memory, ``out=``, records
  in and out, formatting of shapes, ``global`` rebinding, functools helpers, the iterator protocol),
  ``snippets_edges`` the edges later findings were at (views written through another alias, integer overflow and
  division, 0-dim and empty tensors, layouts, caught exceptions, containers changed after an op read them, cached
  state, Python scalars of every kind, requires_grad mixes), ``snippets_loops`` loops over a tensor's length (traced
  once as a ``loop`` symbol where the length is symbolic, or unrolled), ``snippets_outside`` where programs from outside
  live (nn.Modules held by the program whose parameters, buffers, submodules, hooks and mode change; autograd.Function
  and torch.func; bfloat16/float16/complex64 and autocast; decorators and descriptors; results holding views of the
  arguments), ``snippets_training`` training loops and the programs around them (optimizer steps and LR schedules,
  gradients accumulated over calls, control flow on tensor values, storage-level ops, results holding aliases),
  ``snippets_models`` module-level code as users write it in models (buffers updated in forward, ModuleList and
  ModuleDict, hooks, no_grad/inference_mode regions, ModelOutput-like results, attribute caches, casts, masks),
  ``snippet_base`` what a snippet is.
- ``programs``: a seeded generator that puts snippets together into a program's source and
  draws a sequence of calls for it.
- ``checker``: runs each call eagerly and through ``thunder.jit`` in two identical worlds and
  classifies it: OK, CLEAR (a clear error), WRONG (a silent mismatch), INTERNAL, CRASH; it
  shrinks a failing case and prints it as a reproducer.

Used by ``tests/test_randomized.py`` (a small seeded run) and ``benchmarks/fuzz_jit.py``
(the long run). Everything is deterministic per seed.
"""

from tests.fuzz.checker import CallResult, Outcome, ProgramResult, check_program, reproducer, shrink
from tests.fuzz.programs import CACHE_OPTIONS, FAMILIES, Call, Program, calls_for, generate_program

__all__ = [
    "CACHE_OPTIONS",
    "FAMILIES",
    "Call",
    "CallResult",
    "Outcome",
    "Program",
    "ProgramResult",
    "calls_for",
    "check_program",
    "generate_program",
    "reproducer",
    "shrink",
]
