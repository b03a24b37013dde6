"""What the entry layer hands down to core, installed when ``thunder`` is imported.

Core imports nothing above it (``tests/test_layers.py`` checks it), so state that lives up here
reaches it through hooks and tables that core owns:

- ``ThunderModule`` (``thunder.core.module``) compiles its forward with the jit entry installed
  here (Note [ThunderModule's jit entry] in ``thunder.core.module``);
- the tracer's symbol lookup (``thunder.core.symbol_lookup``) consults the callables that user
  operators replace (``thunder.extend.replacements``) before the torch language's table.

Layer: entry points. Imports: core, extend (and, lazily, ``thunder`` for ``_make_jitted``).
"""

from __future__ import annotations

from collections.abc import Callable

from thunder.core.module import install_jit_entry
from thunder.core.symbol_lookup import register_symbol_table
from thunder.extend import replacements


def jit_module_forward(fn: Callable, options) -> Callable:
    """``fn`` (ThunderModule's ``_call_module``) jitted with ``options``, as a module's forward."""
    from thunder import _make_jitted  # thunder/__init__ is complete by the time a module is jitted
    from thunder.common import CompileData

    return _make_jitted(fn, CompileData(fn, options, is_module=True))


install_jit_entry(jit_module_forward)
register_symbol_table(replacements, first=True)
