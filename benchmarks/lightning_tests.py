"""Runs lightning-thunder's own CPU test files against this project's ``thunder``, on the running Python, and
prints the pass rate of each file.

The test files and the helpers they import (``opinfos.py``, ``make_tensor.py``, the small models, ...) are read
from a lightning-thunder checkout given on the command line into a temporary directory; nothing of them is kept
in this repository. There they form a ``thunder.tests`` package overlaid on this project's ``thunder`` (a
``conftest.py`` appends the directory to ``thunder.__path__``), so the files run unchanged: code written for
lightning-thunder, imports included, meets this ``thunder``. Their ``framework.py`` (the decorators that make one
test per executor and dtype) is built on lightning-thunder's internals; ``benchmarks/lightning_framework.py``, our
own, stands in for it.

A few modules they import are lightning-thunder internals this project does not have (``thunder.clang``,
``thunder.core.utils``, ``thunder.dynamo``, ...) or test-only packages that are not installed (``fdm``,
``looseversion``, ``lightning_utilities``). Each one absent here is replaced by a stand-in (``install_overlay``)
whose attributes fail when used, naming what is missing, so a test that needs one fails alone instead of its whole
file failing to import (the test-only packages' few functions the files call work). Each test runs under a time limit (``--per-test-limit``).

    python -m benchmarks.lightning_tests /path/to/lightning-thunder
    python -m benchmarks.lightning_tests /path/to/lightning-thunder --rev HEAD   # a bare mirror
    python -m benchmarks.lightning_tests MIRROR --rev HEAD --files test_core.py -v   # failures too
"""

from __future__ import annotations

import argparse
import functools
import importlib
import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time
import types

# The CPU test files run, each with an optional pytest ``-k`` expression that selects the subset run here.
TEST_FILES: dict[str, str | None] = {
    "test_interpreter.py": None,
    "test_jit_general.py": None,
    "test_core.py": None,
    "test_grad.py": "not float32 and not float16 and not bfloat16",  # the float64 checks
    "test_transforms.py": None,
    "test_inplace_copy.py": None,
    "test_update_aliases.py": None,
    "test_networks.py": None,
    "test_examine.py": None,
    "test_extend.py": None,
    "test_randomness.py": None,
    "test_autocast.py": None,
    "test_pythonex.py": None,
    "test_einops.py": None,
    "test_torch_library_custom_op.py": None,
    "test_dynamo.py": None,
    "test_elementwise.py": None,
    "test_shape_ops.py": None,
    "test_reductions.py": None,
    "test_torch_compile_executor.py": None,
}
# Lightning-thunder's test framework and the models its tests build, copied beside the test files.
SUPPORT_FILES = (
    "__init__.py", "opinfos.py", "make_tensor.py", "utils.py", "bf16.py", "litgpt_model.py",
    "nanogpt_model.py", "hf_bart_self_attn.py", "llama4_moe.py", "module_example.py",
)  # fmt: skip
# Modules the files import that may be absent here: lightning-thunder internals and test-only packages.
STAND_INS = (
    "thunder.clang", "thunder.core.utils", "thunder.core.profile", "thunder.core.compile_data",
    "thunder.core.vjp_utils", "thunder.executors.utils", "thunder.dynamo",
    "thunder.dynamo.report", "thunder.dynamo.utils", "thunder.dynamo.compiler_graph_benchmark", "thunder.dynamo.benchmark_utils", "thunder.benchmarks", "thunder.benchmarks.utils", "thunder.dev_utils",
    "thunder.dev_utils.nvtx_profile_transform", "thunder.torch.custom_op", "thunder.executors.custom_op_ex", "fdm", "looseversion",
    "lightning_utilities", "lightning_utilities.core", "lightning_utilities.core.imports",
)  # fmt: skip

# Lightning-thunder internals that the files read at import time from modules this project has: absent here,
# each is set to a stand-in that fails when used (a decorator's stand-in fails when the decorated function runs).
ABSENT_ATTRIBUTES = {
    "thunder": {"_with_cache_info_ctx": "decorator"},
    "thunder.core.transforms": {"check_bsym_for_vjp": "function", "trace_interpreter_skip_list": "list",
                                "populate_grads": "function", "clear_grads": "function", "extract_grads": "function"},
    "thunder.torch": {"_torch_to_thunder_function_map": "dict", "_inplace_to_out_of_place": "dict"},
    "thunder.executors.torch_compile": {"supported_ops": "value"},
}

_CONFTEST = """\
import pathlib, sys
sys.path.append({root!r})
from benchmarks.lightning_tests import install_overlay, time_limit_hook
install_overlay(pathlib.Path(__file__).parent)
pytest_runtest_call = time_limit_hook({limit!r})
"""


class _Absent(types.ModuleType):
    """A module absent from this project: importing names from it works, using them fails with its name."""

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        qualname = f"{self.__name__}.{name}"

        def absent(*args, **kwargs):
            raise NotImplementedError(f"{qualname} is lightning-thunder's, absent from this project")

        absent.__qualname__ = absent.__name__ = qualname
        return absent


class _AbsentValue:
    """A value absent from this project (a set, a table): any use of it fails with its name."""

    def __init__(self, absent):
        self._absent = absent

    def _fail(self, *args):
        self._absent()

    __sub__ = __rsub__ = __iter__ = __contains__ = __len__ = __getitem__ = _fail


class _LooseVersion:
    """``looseversion.LooseVersion`` for the comparisons the test files make (versions against versions or str)."""

    def __init__(self, text: str):
        self.parts = tuple(int(p) if p.isdigit() else p for p in re.findall(r"\d+|[a-z]+", str(text)))

    def _cmp(self, other) -> tuple:
        return self.parts, (other if isinstance(other, _LooseVersion) else _LooseVersion(other)).parts

    def __lt__(self, other):
        a, b = self._cmp(other)
        return a < b

    def __le__(self, other):
        a, b = self._cmp(other)
        return a <= b

    def __gt__(self, other):
        a, b = self._cmp(other)
        return a > b

    def __ge__(self, other):
        a, b = self._cmp(other)
        return a >= b

    def __eq__(self, other):
        a, b = self._cmp(other)
        return a == b

    def __hash__(self):
        return hash(self.parts)


def _compare_version(package: str, op, version: str, use_base_version: bool = False) -> bool:
    """``lightning_utilities.compare_version``: ``op(installed version of package, version)``."""
    from packaging.version import Version

    installed = Version(importlib.import_module(package).__version__)
    if use_base_version:
        installed = Version(installed.base_version)
    return op(installed, Version(version))


def _absent(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ImportError:  # a parent package is absent too
        return True


def install_overlay(directory: pathlib.Path) -> None:
    """Makes ``directory/thunder/tests`` importable as ``thunder.tests`` and stands in for absent modules."""
    import thunder

    thunder.__path__.append(str(directory / "thunder"))
    for name in STAND_INS:
        if _absent(name):
            module = sys.modules[name] = _Absent(name)
            parent, _, child = name.rpartition(".")
            if parent in sys.modules:
                setattr(sys.modules[parent], child, module)
            if name == "looseversion":
                module.LooseVersion = _LooseVersion
            if name == "lightning_utilities":
                module.compare_version = _compare_version
            if name == "lightning_utilities.core.imports":
                module.package_available = lambda package: not _absent(package)
    for module_name, names in ABSENT_ATTRIBUTES.items():
        module = importlib.import_module(module_name)
        for name, kind in names.items():
            if not hasattr(module, name):
                absent = getattr(_Absent(module_name), name)
                stand_in = {"function": absent, "decorator": _absent_decorator(absent), "list": [], "dict": {},
                            "value": _AbsentValue(absent)}[kind]  # fmt: skip
                setattr(module, name, stand_in)
    try:
        import thunder.tests.opinfos  # noqa: F401
    except Exception as e:  # lightning-thunder's op database needs its internals: its op tests are not run
        opinfos = sys.modules["thunder.tests.opinfos"] = _Absent("thunder.tests.opinfos")
        opinfos.opinfos, opinfos.tensor_creation_ops, opinfos.import_error = [], [], repr(e)
        opinfos.get_opinfo = lambda name: None  # lightning_framework.ops makes no test from it


def _absent_decorator(absent):
    def decorator(fn):
        return functools.wraps(fn)(lambda *args, **kwargs: absent())

    return decorator


def time_limit_hook(seconds: float):
    """A ``pytest_runtest_call`` hook that fails a test running over ``seconds``, so one hang cannot stop a file."""
    import signal

    import pytest

    def on_alarm(signum, frame):
        raise TimeoutError(f"test ran over the runner's {seconds:.0f} s limit")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(item):
        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, seconds)
        try:
            yield
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    return pytest_runtest_call


def _read(repo: pathlib.Path, rev: str | None, name: str) -> str:
    path = f"thunder/tests/{name}"
    if rev is None:
        return (repo / path).read_text()
    return subprocess.run(["git", "-C", str(repo), "show", f"{rev}:{path}"], check=True, capture_output=True, text=True).stdout


# A failure that comes from a lightning-thunder module or name this project does not have (its internals; for
# ``thunder.dynamo``, its splitter's records and reproducers).
_ABSENT = (r"absent from this project|No module named 'thunder\.|cannot import name .* from 'thunder|module 'thunder[.\w]*' has no attribute"
           r"|'(SubgraphInfo|ThunderCompiler)' object has no attribute")


def _run_file(tmp: pathlib.Path, name: str, select: str | None) -> tuple[dict[str, int], list[str], float]:
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfE", "--tb=line",
           "--import-mode=importlib", "-W", "ignore", str(tmp / "thunder" / "tests" / name)]  # fmt: skip
    if select:
        cmd += ["-k", select]
    start = time.process_time()
    result = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp, env={**os.environ, "COLUMNS": "1000"})
    cpu = time.process_time() - start + _children_cpu()
    lines = result.stdout.splitlines()
    summary = next((line for line in reversed(lines) if re.search(r"\d+ (passed|failed|error|skipped)|no tests ran", line)), "")
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|xfailed|xpassed|errors?)", summary)}
    counts["error"] = counts.pop("errors", 0) + counts.pop("error", 0)
    failures = [line for line in lines if line.startswith(("FAILED", "ERROR"))]
    if not summary:
        failures = [f"ERROR {name}: {(result.stdout + result.stderr).strip().splitlines()[-1:]}"]
    return counts, failures, cpu


def _children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo", type=pathlib.Path, help="a lightning-thunder checkout (or bare git mirror with --rev)")
    parser.add_argument("--rev", default=None, help="read the files from this git revision")
    parser.add_argument("--files", nargs="*", default=list(TEST_FILES), help="test files to run (default: all)")
    parser.add_argument("--per-test-limit", type=float, default=120.0, help="seconds one test may run")
    parser.add_argument("-v", "--verbose", action="store_true", help="list the failing tests")
    args = parser.parse_args()
    root = str(pathlib.Path(__file__).resolve().parent.parent)
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        tests = tmp / "thunder" / "tests"
        tests.mkdir(parents=True)
        for name in (*SUPPORT_FILES, *args.files):
            (tests / name).write_text(_read(args.repo, args.rev, name))
        (tests / "framework.py").write_text((pathlib.Path(__file__).parent / "lightning_framework.py").read_text())
        (tmp / "conftest.py").write_text(_CONFTEST.format(root=root, limit=args.per_test_limit))
        (tmp / "pytest.ini").write_text("[pytest]\n")  # this directory is the root: no project settings apply
        print(f"Python {sys.version.split()[0]}")
        print("| file | passed | failed | errors | of them, need absent internals | skipped | pass rate |\n"
              "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")  # fmt: skip
        total_passed = total_ran = 0
        all_failures = []
        for name in args.files:
            counts, failures, _cpu = _run_file(tmp, name, TEST_FILES.get(name))
            passed, ran = counts.get("passed", 0), counts.get("passed", 0) + counts.get("failed", 0) + counts["error"]
            total_passed, total_ran = total_passed + passed, total_ran + ran
            absent = sum(1 for line in failures if re.search(_ABSENT, line))
            print(f"| {name} | {passed} | {counts.get('failed', 0)} | {counts['error']} | {absent} | {counts.get('skipped', 0)} | "
                  f"{100 * passed / max(ran, 1):.0f}% |", flush=True)  # fmt: skip
            all_failures += failures
        print(f"| all | {total_passed} | | | | | {100 * total_passed / max(total_ran, 1):.0f}% |")
    if args.verbose:
        for line in all_failures:
            print(" ", line[:300])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
