"""Compiled regions on disk, so that a second process that jits the same model starts at compiled speed.

Note [The artifact cache]
A compile worker's answer (an Inductor artifact, the constant tensors it takes after the inputs, and what the worker
measured of it against torch's kernels) is kept in
``CACHE_DIR`` under a key of everything that made it: the job the worker was given (the region's source, the
objects it refers to, the input signature, the grad mode), and what compiled it: the versions of Python, torch
and thunder, the source of thunder's compile path, the machine's CPU capability, Inductor's environment
options, and for each library object the job names by reference, its module file's size and modification time.
A change to any of these changes the key, so no stale artifact is ever loaded; a job whose objects do not pickle
the same way twice just misses. Entries are written to a temporary file and renamed (two processes may store
the same key). ``THUNDER_CACHE_DIR`` names the directory (default ``~/.cache/thunder``); an empty value turns
the cache off.

Layer: executors. Imports: executors.inductor_worker.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pickle
import platform
import sys
import tempfile
from typing import Any

import torch

from thunder.executors import inductor_worker
from thunder.executors.inductor_worker import Job


def _default_dir() -> str | None:
    configured = os.environ.get("THUNDER_CACHE_DIR")
    if configured is not None:
        return os.path.join(configured, "inductor") if configured else None
    return os.path.join(os.path.expanduser("~"), ".cache", "thunder", "inductor")


#: Where compiled regions are kept; None: not kept.
CACHE_DIR: str | None = _default_dir()


def _compiler_fingerprint() -> bytes:
    """What compiles a job, besides the job: versions, thunder's compile path, the CPU, Inductor's options."""
    from thunder import __version__ as thunder_version
    from thunder.executors import torch_compile

    parts: list[Any] = [sys.version, torch.__version__, thunder_version, platform.machine()]
    parts.append(torch.backends.cpu.get_cpu_capability())
    for module in (inductor_worker, torch_compile, sys.modules[__name__]):
        with open(module.__file__, "rb") as f:
            parts.append(hashlib.sha256(f.read()).hexdigest())
    # Inductor's options from the environment; not where it keeps its caches (importing Inductor sets that one).
    options = (k for k in os.environ if k.startswith(("TORCHINDUCTOR_", "TORCH_COMPILE")) and k != "TORCHINDUCTOR_CACHE_DIR")
    parts.append(sorted((k, os.environ[k]) for k in options))
    return pickle.dumps(parts)


_fingerprint: bytes | None = None


def key_of(job: Job) -> str | None:
    """The job's key, or None where it cannot be keyed (an object that does not pickle)."""
    global _fingerprint
    if _fingerprint is None:
        _fingerprint = _compiler_fingerprint()
    libraries = []
    for reference in sorted(job.references.values()):
        module = importlib.import_module(reference.partition(":")[0])
        path = getattr(module, "__file__", None)
        stat = os.stat(path) if path else None
        libraries.append((reference, path, stat.st_size if stat else None, stat.st_mtime_ns if stat else None))
    what = (job.source, job.function_name, sorted(job.ctx.items()), libraries, job.inputs, job.grad_enabled)
    try:
        data = pickle.dumps(what, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # noqa: BLE001 - e.g. unorderable ctx values: not cached
        return None
    return hashlib.sha256(_fingerprint + data).hexdigest()


def load(key: str) -> tuple[str, list[torch.Tensor], tuple[float, float] | None] | None:
    """(the artifact's path, its constants, the worker's times) kept under ``key``, or None."""
    if CACHE_DIR is None:
        return None
    artifact = os.path.join(CACHE_DIR, f"{key}.bin")
    try:
        with open(os.path.join(CACHE_DIR, f"{key}.constants"), "rb") as f:
            constants, times = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError, TypeError, ValueError):
        return None
    return (artifact, constants, times) if os.path.exists(artifact) else None


def store(key: str, artifact_path: str, constants: list[torch.Tensor], times: tuple[float, float] | None) -> None:
    """Keeps a worker's answer under ``key`` (best effort: a full or read-only disk keeps nothing)."""
    if CACHE_DIR is None:
        return
    try:
        os.makedirs(CACHE_DIR, exist_ok=True)
        with open(artifact_path, "rb") as f:
            _write(os.path.join(CACHE_DIR, f"{key}.bin"), f.read())
        _write(os.path.join(CACHE_DIR, f"{key}.constants"), pickle.dumps((constants, times)))  # last: it marks the entry whole
    except OSError:
        pass


def _write(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
