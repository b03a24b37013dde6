"""Passes over traces: each takes a trace and returns a new one stamped with its name and time.

Layer: transforms. Imports: core, extend (never thunder.torch).
"""

from thunder.transforms.absent_cotangents import accept_absent_cotangents, without_absent_cotangents
from thunder.transforms.cse import cse
from thunder.transforms.dce import dce
from thunder.transforms.delete_last_used import delete_last_used
from thunder.transforms.execution import transform_for_execution
from thunder.transforms.identities import remove_identities
from thunder.transforms.implicit_broadcasts import fold_broadcasts
from thunder.transforms.rematerialization import rematerialize

__all__ = [
    "accept_absent_cotangents",
    "cse",
    "dce",
    "delete_last_used",
    "fold_broadcasts",
    "rematerialize",
    "without_absent_cotangents",
    "remove_identities",
    "transform_for_execution",
]
