"""Worker processes that compile torchcompile regions while the caller's program runs on.

``submit`` hands a region's job (``inductor_worker.Job``) to a worker process, started on first
use, ``WORKERS`` of them; a daemon thread per worker waits for its answer, loads the compiled
artifact where it pays (Note [A compiled graph is loaded where it pays]) and calls the job's
``done`` with the compiled callable and the constant tensors it takes after the inputs, or with
None and why not. Workers are killed at exit (a
pending compilation never delays it) and after a fork the child starts its own.

Inductor is not thread-safe, so whatever compiles or loads in this process holds
``INDUCTOR_LOCK``.

Layer: executors. Imports: executors.inductor_worker.
"""

from __future__ import annotations

import atexit
import dataclasses
import itertools
import os
import pickle
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from typing import Any

from thunder.executors import artifact_cache
from thunder.executors.inductor_worker import Job, receive, send

#: Worker processes: half the cores (the other half runs the program), at least one, at most four.
WORKERS = max(1, min(4, (os.cpu_count() or 2) // 2))

#: The workers' niceness (Note [Compile workers do not starve the caller]); tests that wait for compiles on a busy
#: machine set 0.
NICENESS = 15

# Note [Compile workers do not starve the caller]
# A worker compiles while the caller's program runs; on a machine with cores to spare it takes one, but beside
# other work (a second job, a data loader) it would take the caller's time: Inductor compiles its C++ kernels in
# as many parallel jobs as there are cores. So a worker runs at niceness ``NICENESS`` (Linux gives a nice-15
# process about 3% of a core that a nice-0 process wants) with one compile thread and one OpenMP thread: the
# caller's calls cost what they cost without it (a training loop beside a CPU-bound process ran 2.4x slower with
# the defaults than with the torch executor), and the compilation waits for idle time. The niceness is taken before
# the worker's first import (``_WORKER_MAIN``): importing torch, thunder and Inductor is seconds of CPU.
_WORKER_MAIN = "import os, sys; os.nice(int(sys.argv[1])); from thunder.executors import inductor_worker; inductor_worker.main()"

# Note [A compiled graph is loaded where it pays]
# The first Inductor artifact a process loads costs seconds: importing Inductor, dynamo and AOTAutograd (about 2.3 s
# of Python here, holding the interpreter's lock against the caller's calls) and probing the CPU's vector
# instructions (1.8 s of compiler subprocesses); later ones take about 10 ms. Meanwhile the caller's calls ran 20-50
# times slower (an MLP's training step, 2 ms, took 40-56 ms for a second, both in the process that compiled it and
# in a second process that found the artifacts on disk). Yet on many CPU regions the compiled graph is no faster
# than torch's kernels (that MLP's: 673 against 757 us, 956 against 1006 us). So the worker, which has Inductor
# loaded already, times the compiled graph against the region's ops on torch's kernels (``inductor_worker.measure``),
# and the graph is loaded only if it was faster; for the first one a process loads, only if it took at most
# ``LOAD_IF_FASTER`` of their time (a smaller gain would take tens of thousands of calls to repay the load, and is
# within what the measurement can tell), and only once it has paid for the load (Note [The first load waits until it
# has paid]). Otherwise the region keeps torch's kernels, with the times as the reason.
# The times are kept with the artifact on disk, so a second process decides without loading anything. A graph that
# is loaded is still tried against torch's kernels in the caller (``torch_compile._Trial``).

#: Until one is loaded, a compiled graph is loaded when the worker measured it at this fraction of torch's
#: kernels' time or less; None loads every graph at once (tests that wait for a compiled region set it).
LOAD_IF_FASTER: float | None = 0.9

#: Seconds of the caller's time the first load in a process costs (Inductor's imports and the CPU probe, measured on
#: a 2-core machine); the first graphs load once they would have saved this much (Note [The first load waits until
#: it has paid]).
FIRST_LOAD_S = 2.0

# Note [The first load waits until it has paid]
# Where the worker measured a graph faster, loading it still costs the caller the first load's seconds: no gain
# repays them within a few thousand calls of a small model (a GPT-2 forward of 0.45 ms that a compiled region makes
# 0.1 ms faster repays 2 s after 20,000 calls), and the defaults' first thousands of calls were then slower in total
# than the torch executor's. So, as a renter buys once the rent paid equals the price, until a process has loaded a
# graph the graphs that pay wait on disk (``Deferred``): their regions run torch's kernels and count, per call, what
# the worker measured the graph would save (``owe``); once the graphs waiting would have saved ``FIRST_LOAD_S``, one
# thread loads them all, and later graphs load at once (about 10 ms each). A program that stops sooner never pays
# for Inductor; one that runs on pays at most about twice what loading at once would have cost it.

# Note [A job is made on the pool's thread]
# A region submitted to a worker sends its code's source and context (``torch_compile._Compiled._job``): scanning the
# context for what does not pickle, and pickling the job to find out that it can be sent, cost the call that submitted
# it about a millisecond for GPT-2's regions, on the caller's thread, in the first calls of a program (a training
# step's regions are submitted in its first ten). The caller passes a function that makes the job instead, with what
# only the call knows (its inputs' signature, its grad mode), and a pool thread makes, checks and sends it; a job that
# cannot be sent is reported to ``done`` as any other failure is (``cannot be sent to a compile worker (...)``).

#: Held by whatever compiles or loads an Inductor graph in this process.
INDUCTOR_LOCK = threading.RLock()

Done = Callable[[Any, "str | None"], None]  # ((compiled callable, constants) or None, why not)


class _Pool:
    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Job, Done]] = queue.SimpleQueue()
        self._state = threading.Condition()
        self._threads: list[threading.Thread] = []
        self._processes: set[subprocess.Popen] = set()
        self._directory: str | None = None
        self._ids = itertools.count()
        self.submitted = 0
        self.finished = 0

    def submit(self, job: Job | Callable[[], Job], done: Done) -> None:
        """Queues ``job``, or a function that makes it on a pool thread (Note [A job is made on the pool's thread]);
        ``done`` is called on a pool thread once it is compiled or has failed (a job that cannot be sent: with the
        reason "cannot be sent to a compile worker (...)")."""
        with self._state:
            self.submitted += 1
            while len(self._threads) < WORKERS:
                thread = threading.Thread(
                    target=self._serve, name=f"thunder-inductor-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
        self._jobs.put((job, done))

    def wait(self, timeout: float | None = None) -> bool:
        """Waits until every submitted job has finished; False if ``timeout`` seconds passed first."""
        with self._state:
            return self._state.wait_for(lambda: self.finished == self.submitted, timeout)

    def _serve(self) -> None:
        process: subprocess.Popen | None = None
        while True:
            job, done = self._jobs.get()
            compiled, reason = None, None
            try:
                job = self._ready(job)
            except Exception as e:  # noqa: BLE001 - e.g. an object of the region's source that does not pickle
                job, reason = None, f"cannot be sent to a compile worker ({type(e).__name__}: {e})"
            if job is not None:
                compiled, reason, process = self._compile(job, process)
            try:
                done(compiled, reason)
                if isinstance(compiled, Deferred):
                    compiled.wait(done)
            finally:
                with self._state:
                    self.finished += 1
                    self._state.notify_all()

    def _ready(self, job: Job | Callable[[], Job]) -> Job:
        """The job to send, made where the caller passed a function, with its artifact's path; raises what pickling
        raises when it cannot be sent."""
        job = job if isinstance(job, Job) else job()
        with self._state:
            if self._directory is None:
                self._directory = tempfile.mkdtemp(prefix="thunder-inductor-")
            path = os.path.join(self._directory, f"{next(self._ids)}.bin")
        job = dataclasses.replace(job, artifact_path=path)
        pickle.dumps(job)  # what cannot be sent fails here, not in a worker
        return job

    def _compile(self, job: Job, process: subprocess.Popen | None) -> tuple[Any, str | None, subprocess.Popen | None]:
        """(what ``done`` gets: the compiled graph and its constants or a ``Deferred``, or None and why) and the
        worker process to use next."""
        compiled, reason = None, None
        try:
            key, compiled, reason = _from_disk(job)  # Note [The artifact cache]
            if compiled is None and reason is None:
                if process is None or process.poll() is not None:
                    process = self._start()
                send(process.stdin, job)
                reason, constants, times = receive(process.stdout)
                if reason is None:
                    if key is not None:
                        artifact_cache.store(key, job.artifact_path, constants, times)
                    compiled, reason = _where_it_pays(job.artifact_path, constants, times)
        except (EOFError, OSError) as e:
            reason = _exit_reason(process, e)
            process = None
        except Exception as e:  # noqa: BLE001 - a load that fails leaves the region uncompiled, with why
            reason = f"{type(e).__name__}: {e}"
        finally:
            if not (isinstance(compiled, Deferred) and compiled.path == job.artifact_path):
                _remove(job.artifact_path)
        return compiled, reason, process

    def _start(self) -> subprocess.Popen:
        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
        env.update(TORCHINDUCTOR_COMPILE_THREADS="1", OMP_NUM_THREADS="1")
        log = open(os.path.join(self._directory, f"worker-{os.getpid()}-{next(self._ids)}.log"), "wb")  # noqa: SIM115
        process = subprocess.Popen(
            [sys.executable, "-c", _WORKER_MAIN, str(NICENESS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
        )
        log.close()
        process.log_path = log.name
        with self._state:
            self._processes.add(process)
        return process

    def close(self) -> None:
        """Kills the workers and removes their files (at exit)."""
        with self._state:
            processes, self._processes = self._processes, set()
            directory, self._directory = self._directory, None
        for process in processes:
            process.kill()
        for process in processes:
            process.wait()
        if directory is not None:
            shutil.rmtree(directory, ignore_errors=True)


def _load(path: str) -> Callable:
    from torch._inductor import CompiledArtifact

    with INDUCTOR_LOCK:
        loaded = CompiledArtifact.load(path=path, format="binary")
    _loaded.append(True)
    return loaded


def _where_it_pays(path: str, constants: list, times: tuple[float, float] | None) -> tuple[Any, str | None]:
    """(the loaded graph, its constants), a ``Deferred`` load, or None and why it is not loaded (Note [A compiled graph
    is loaded where it pays], Note [The first load waits until it has paid])."""
    if times is not None and LOAD_IF_FASTER is not None:
        compiled_s, uncompiled_s = times
        measured = f"in the compile worker ({uncompiled_s * 1e6:.0f} µs a call against {compiled_s * 1e6:.0f} µs compiled)"
        if compiled_s >= uncompiled_s:
            return None, f"torch's kernels were faster than the compiled graph {measured}"
        if not _loaded_one():
            if compiled_s > LOAD_IF_FASTER * uncompiled_s:
                return None, f"the compiled graph saved less than {1 - LOAD_IF_FASTER:.0%}, not worth loading Inductor, {measured}"
            with _first_load:
                if not _first_load_started:
                    return Deferred(path, constants, uncompiled_s - compiled_s), None
    return (_load(path), constants), None


class Deferred:
    """A compiled graph that pays, left on disk until the first load has paid (Note [The first load waits until it has
    paid]); ``gain_s``: what a call of it saves, as the worker measured."""

    def __init__(self, path: str, constants: list, gain_s: float):
        self.path, self.constants, self.gain_s = path, constants, gain_s
        self._done: Done | None = None

    def wait(self, done: Done) -> None:
        """Waits with the others for the first load (``done`` gets the loaded graph then), or loads now if it began."""
        with _first_load:
            if not _first_load_started:
                self._done = done
                _waiting.append(self)
                return
        self._done = done
        self.load()

    def load(self) -> None:
        try:
            compiled, reason = (_load(self.path), self.constants), None
        except Exception as e:  # noqa: BLE001 - a load that fails leaves the region uncompiled, with why
            compiled, reason = None, f"{type(e).__name__}: {e}"
        self._done(compiled, reason)


def owe(gain_s: float) -> None:
    """A call ran torch's kernels where a waiting graph would have saved ``gain_s``; the first load starts once the
    calls owe ``FIRST_LOAD_S``."""
    global _owed_s, _first_load_started
    _owed_s += gain_s  # a lost update between threads only delays the load a little
    if _owed_s < FIRST_LOAD_S or _first_load_started:
        return
    with _first_load:
        if _first_load_started:
            return
        _first_load_started = True
        waiting = list(_waiting)
        _waiting.clear()
    threading.Thread(target=lambda: [d.load() for d in waiting], name="thunder-inductor-load", daemon=True).start()


_first_load = threading.Lock()  # guards the three below
_first_load_started = False
_waiting: list[Deferred] = []
_owed_s = 0.0


_loaded: list[bool] = []  # not empty once an artifact was loaded in this process


def _loaded_one() -> bool:
    return bool(_loaded)


def _from_disk(job: Job) -> tuple[str | None, tuple | None, str | None]:
    """The job's key in the artifact cache, and what a process compiled for it before where it pays to load, or why
    not (both None: nothing kept)."""
    try:
        key = artifact_cache.key_of(job)
        cached = artifact_cache.load(key) if key is not None else None
        if cached is None:
            return key, None, None
        return key, *_where_it_pays(*cached)
    except Exception:  # noqa: BLE001 - an unreadable entry or a library that moved: compile it again
        return None, None, None


def _exit_reason(process: subprocess.Popen | None, error: Exception) -> str:
    if process is None:
        return f"the compile worker could not start ({type(error).__name__}: {error})"
    code = process.wait()
    try:
        with open(process.log_path, "rb") as f:
            tail = f.read()[-2000:].decode(errors="replace").strip()
    except OSError:
        tail = ""
    return f"the compile worker exited with code {code}" + (f": {tail.splitlines()[-1]}" if tail else "")


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


_pool = _Pool()


def submit(job: Job | Callable[[], Job], done: Done) -> None:
    _pool.submit(job, done)


def wait(timeout: float | None = None) -> bool:
    """Waits for every region submitted so far to be compiled (or to have failed); False on timeout."""
    return _pool.wait(timeout)


def counts() -> tuple[int, int]:
    """(submitted, finished) jobs of this process."""
    return _pool.submitted, _pool.finished


def _reset_after_fork() -> None:
    global _pool, _first_load
    _pool = _Pool()  # the parent's threads and workers are not the child's
    _first_load = threading.Lock()


atexit.register(lambda: _pool.close())
os.register_at_fork(after_in_child=_reset_after_fork)
