"""Primitives: the small closed set of operations every executor can run.

Families live in their own modules, each with its own ID enum; this package re-exports
every prim by name (traces print them as ``prims.<name>``).

Layer: core. Imports: core only.
"""

from thunder.core.prims.base import all_prims, canonicalize_dim, canonicalize_dims, make_prim
from thunder.core.prims.effects import *  # noqa: F403
from thunder.core.prims.effects import EffectPrimIDs
from thunder.core.prims.elementwise import *  # noqa: F403
from thunder.core.prims.elementwise import ElementwisePrimIDs
from thunder.core.prims.factory import *  # noqa: F403
from thunder.core.prims.indexing import *  # noqa: F403
from thunder.core.prims.inplace import InplacePrimIDs, check_no_partial_overlap, copy_
from thunder.core.prims.linalg import *  # noqa: F403
from thunder.core.prims.nn import *  # noqa: F403
from thunder.core.prims.python import *  # noqa: F403
from thunder.core.prims.python import PythonPrimIDs
from thunder.core.prims.reduction import *  # noqa: F403
from thunder.core.prims.shape import *  # noqa: F403
from thunder.core.prims.shape import ShapePrimIDs


class PrimIDs:
    """Every prim ID by name, across families (``prims.PrimIDs.ADD``), as lightning-thunder spells it."""


for _family in (ElementwisePrimIDs, PythonPrimIDs, EffectPrimIDs, ShapePrimIDs, InplacePrimIDs):
    for _member in _family:
        setattr(PrimIDs, _member.name, _member)
for _sym in list(all_prims.values()):
    if not hasattr(PrimIDs, _sym.id.name):
        setattr(PrimIDs, _sym.id.name, _sym.id)
