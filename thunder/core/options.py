"""The option enums of ``thunder.jit`` that core reads: what a cached entry assumes and what to
do with sharp edges. ``thunder.common`` re-exports them (``thunder.CACHE_OPTIONS``,
``thunder.SHARP_EDGES_OPTIONS``) and resolves user strings into them.

Layer: core. Imports: stdlib only.
"""

from __future__ import annotations

import enum

__all__ = ["CACHE_OPTIONS", "SHARP_EDGES_OPTIONS"]


class CACHE_OPTIONS(enum.Enum):
    """What a cached entry assumes about the inputs (see ``thunder.jit``)."""

    NO_CACHING = "no caching"
    CONSTANT_VALUES = "constant values"
    SAME_INPUT = "same input"
    SYMBOLIC_VALUES = "symbolic values"


class SHARP_EDGES_OPTIONS(enum.Enum):
    """What to do when the program does something its trace cannot capture."""

    ALLOW = "allow"
    WARN = "warn"
    ERROR = "error"
