"""The op database: one OpInfo per supported torch op, split by domain.

Each domain module defines ``opinfos: list[OpInfo]``; ``all_opinfos`` collects them. The
generic tests in ``tests/test_ops.py`` consume the database.
"""

import importlib

from tests.opinfos.core import ErrorInput, OpInfo, SampleInput, make

DOMAINS = ("elementwise", "reductions", "shape", "indexing", "factories", "nn", "linalg", "conversions", "inplace")


def all_opinfos() -> list[OpInfo]:
    ops: list[OpInfo] = []
    for domain in DOMAINS:
        try:
            module = importlib.import_module(f"tests.opinfos.{domain}")
        except ModuleNotFoundError as e:
            if e.name == f"tests.opinfos.{domain}":
                continue
            raise
        ops.extend(module.opinfos)
    return ops


__all__ = ["OpInfo", "SampleInput", "ErrorInput", "make", "all_opinfos", "DOMAINS"]
