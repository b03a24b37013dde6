"""Imports point down the layers only (STYLE.md, Layout).

- ``thunder.core`` imports nothing of ``thunder`` outside ``thunder.core``: not the package
  ``thunder`` itself, ``thunder.common``, ``thunder.compiler``, ``thunder.extend``,
  ``thunder.executors``, ``thunder.torch``, ``thunder.transforms``, ...;
- ``thunder.transforms`` (the passes) does not import the torch language, the executors or the
  entry points (``thunder`` itself, ``thunder.common``, ``thunder.compiler``); ``thunder.extend``,
  the executor API, is allowed;
- nothing in ``thunder`` imports ``thunder_viz``.

The AST check below reads every import statement of every file, function-local ones and relative
ones included; the import-linter contracts in ``pyproject.toml`` (``[tool.importlinter]``) say
the same for module-level imports and also catch indirect ones. State the upper layers own
reaches core through hooks and tables core owns (``thunder/__init__.py`` installs ThunderModule's jit entry; ``thunder.extend`` and ``thunder.torch`` register their symbol tables).
"""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys
import textwrap
import tomllib
from dataclasses import dataclass

import pytest

REPO = pathlib.Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Rule:
    """Modules under ``source`` may not import ``forbidden`` (a module and its submodules); a
    forbidden name of ``"*"`` means any module of the ``thunder`` packages outside ``allowed``."""

    source: str
    forbidden: tuple[str, ...]
    allowed: tuple[str, ...] = ()


RULES = (
    Rule("thunder.core", ("*", "thunder_viz"), allowed=("thunder.core",)),
    Rule("thunder.transforms", ("thunder", "thunder.torch", "thunder.executors", "thunder.common", "thunder.compiler")),
    Rule("thunder", ("thunder_viz",)),
)


def _module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported_modules(path: pathlib.Path, root: pathlib.Path) -> list[tuple[int, str]]:
    """(line, module) for every module a file imports, at any depth of its AST.

    ``from a import b`` counts as importing ``a`` and ``a.b`` (``b`` may be a submodule); a
    relative import is resolved against the file's package."""
    module = _module_name(path, root)
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            found.append((node.lineno, target))
            found += [(node.lineno, f"{target}.{alias.name}") for alias in node.names if alias.name != "*"]
    return found


def _within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def _breaks(rule: Rule, target: str) -> bool:
    if any(_within(target, a) for a in rule.allowed):
        return False
    for forbidden in rule.forbidden:
        if forbidden == "*":
            if _within(target, "thunder") or _within(target, "thunder_viz"):
                return True
        elif forbidden == "thunder":  # the package itself, not its submodules
            if target == "thunder":
                return True
        elif _within(target, forbidden):
            return True
    return False


def layer_violations(root: pathlib.Path, rules=RULES) -> list[str]:
    """``file:line imports module`` for each import that breaks a rule, over the packages in ``root``."""
    problems = []
    for rule in rules:
        top = root.joinpath(*rule.source.split("."))
        files = sorted(top.rglob("*.py")) if top.is_dir() else [top.with_suffix(".py")]
        for path in files:
            if not path.exists():
                continue
            for line, target in imported_modules(path, root):
                if _breaks(rule, target):
                    where = path.relative_to(root)
                    problems.append(f"{where}:{line} imports {target} ({rule.source} may not import it)")
    return sorted(set(problems))


def test_imports_point_down_the_layers():
    problems = layer_violations(REPO)
    assert not problems, "imports that point up the layers (hand the state in instead):\n" + "\n".join(problems)


def _write(root: pathlib.Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


_CLEAN_TREE = {
    "thunder/__init__.py": "from thunder import common\n",
    "thunder/common.py": "from thunder.core import trace\n",
    "thunder/core/__init__.py": "",
    "thunder/core/trace.py": "from thunder.core.symbol import Symbol\nfrom . import symbol\n",
    "thunder/core/symbol.py": "class Symbol: ...\n",
    "thunder/extend/__init__.py": "from thunder.core.symbol import Symbol\n",
    "thunder/transforms/__init__.py": "from thunder.extend import Symbol\nfrom thunder.core import trace\n",
    "thunder_viz/__init__.py": "import thunder\n",
}


def test_a_clean_tree_passes_the_check(tmp_path):
    _write(tmp_path, _CLEAN_TREE)
    assert layer_violations(tmp_path) == []


@pytest.mark.parametrize(
    "name, text, expected",
    [
        ("thunder/core/module.py", "def f():\n    from thunder import _make_jitted\n", "imports thunder "),
        ("thunder/core/module.py", "import thunder\n", "imports thunder "),
        ("thunder/core/jit_ext.py", "def f():\n    from thunder.torch import torch_to_thunder_map\n", "thunder.torch"),
        ("thunder/core/jit_ext.py", "from thunder.common import CACHE_OPTIONS\n", "thunder.common"),
        ("thunder/core/jit_ext.py", "from thunder import extend\n", "thunder.extend"),
        ("thunder/core/x.py", "from .. import compiler\n", "thunder.compiler"),
        ("thunder/core/x.py", "import thunder.executors.torchex as ex\n", "thunder.executors"),
        ("thunder/core/x.py", "from thunder.transforms import dce\n", "thunder.transforms"),
        ("thunder/core/x.py", "class A:\n    def f(self):\n        import thunder_viz\n", "thunder_viz"),
        ("thunder/transforms/dce.py", "def f():\n    import thunder.torch as ltorch\n", "thunder.torch"),
        ("thunder/transforms/dce.py", "from thunder import jit\n", "imports thunder "),
        ("thunder/transforms/dce.py", "from ..executors import torchex\n", "thunder.executors"),
        ("thunder/compiler.py", "from thunder_viz.graph import graph\n", "thunder_viz"),
    ],
)
def test_the_check_catches_an_upward_import(tmp_path, name, text, expected):
    _write(tmp_path, _CLEAN_TREE)
    _write(tmp_path, {name: text})
    problems = layer_violations(tmp_path)
    assert len(problems) >= 1 and all(name in p for p in problems), problems
    assert any(expected in p for p in problems), problems


def _import_linter(config: pathlib.Path, cwd: pathlib.Path) -> int:
    """Runs import-linter's ``lint_imports`` on ``config`` in a fresh interpreter in ``cwd`` (so the
    packages found are those under ``cwd``); returns its exit status."""
    pytest.importorskip("importlinter.cli", reason="import-linter is in the test extra")
    code = f"from importlinter.cli import lint_imports; raise SystemExit(lint_imports({str(config)!r}, no_cache=True))"
    done = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    return done.returncode, done.stdout + done.stderr


def test_import_linter_contracts_are_kept():
    status, output = _import_linter(REPO / "pyproject.toml", REPO)
    assert status == 0, output


@pytest.mark.parametrize(
    "name, text",
    [
        ("thunder/core/symbol.py", "from thunder.common import x\n"),
        ("thunder/core/symbol.py", "def f():\n    from thunder.torch import x\n"),
        ("thunder/extend/__init__.py", "import thunder.torch\n"),  # core -> extend -> torch, indirectly
    ],
)
def test_import_linter_contracts_catch_an_upward_import(tmp_path, name, text):
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]
    named = {m for c in config["contracts"] for m in c["source_modules"] + c["forbidden_modules"]}
    paths = {m.replace(".", "/") for m in named}
    missing = {
        f"{p}/__init__.py": "" for p in paths if f"{p}.py" not in _CLEAN_TREE and f"{p}/__init__.py" not in _CLEAN_TREE
    }
    _write(tmp_path, {**_CLEAN_TREE, **missing})  # the contracts name modules that exist
    _write(tmp_path, {name: text})
    (tmp_path / "pyproject.toml").write_text((REPO / "pyproject.toml").read_text())
    status, output = _import_linter(tmp_path / "pyproject.toml", tmp_path)
    assert status != 0 and "BROKEN" in output, output


# --- the state core is handed instead of importing it -------------------------------------


def test_the_tracer_records_calls_as_the_symbols_its_lookup_names():
    import torch

    import thunder.torch as ltorch
    from thunder.core.jit_ext import Tracer
    from thunder.core.options import CACHE_OPTIONS, SHARP_EDGES_OPTIONS
    from thunder.core.symbol_lookup import symbol_for

    def fn(x):
        return torch.sin(x)

    def lookup(f):
        return ltorch.cos if f is torch.sin else symbol_for(f)

    tracer = Tracer(
        fn, cache_option=CACHE_OPTIONS.CONSTANT_VALUES, sharp_edges=SHARP_EDGES_OPTIONS.ALLOW, symbol_lookup=lookup
    )
    tracer.trace((torch.randn(3),), {})
    names = [b.sym.name for b in tracer.computation.bound_symbols]
    assert "cos" in names and "sin" not in names


def test_core_s_tables_are_filled_by_the_layers_above():
    import torch

    import thunder
    from thunder.core import module, symbol_lookup
    from thunder.extend import replacements
    from thunder.torch import torch_to_thunder_map

    assert symbol_lookup.symbol_for(torch.sin) is torch_to_thunder_map[torch.sin]
    assert symbol_lookup.symbol_for([]) is None  # unhashable: no symbol, no error
    tables = symbol_lookup._tables
    assert tables.index(replacements) < tables.index(torch_to_thunder_map)  # user replacements win
    assert module._jit_entry is not None
    assert thunder.CACHE_OPTIONS is thunder.common.CACHE_OPTIONS is thunder.core.options.CACHE_OPTIONS
    assert thunder.SHARP_EDGES_OPTIONS is thunder.core.options.SHARP_EDGES_OPTIONS
