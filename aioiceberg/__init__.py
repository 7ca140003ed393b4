"""aioiceberg: an asyncio, object-store-first storage engine for Apache Iceberg tables.

The public names load on first use (PEP 562), so ``import aioiceberg.cli`` or
``aioiceberg.errors`` does not pay for pyarrow and the planner; the first of them loads the
planner too, so a first plan imports nothing.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from aioiceberg.catalog import Catalog, connect, load_table
    from aioiceberg.table import Table, Transaction

from aioiceberg._version import __version__

__all__ = ["Catalog", "Table", "Transaction", "__version__", "connect", "load_table"]

_HOMES = {
    "Catalog": "aioiceberg.catalog",
    "connect": "aioiceberg.catalog",
    "load_table": "aioiceberg.catalog",
    "Table": "aioiceberg.table",
    "Transaction": "aioiceberg.table",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'aioiceberg' has no attribute {name!r}")
    importlib.import_module("aioiceberg.table_scan")  # the planner, before any plan
    importlib.import_module("pyarrow.compute")  # which the planner imports where used
    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
