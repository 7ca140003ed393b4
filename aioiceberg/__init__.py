"""aioiceberg: an asyncio, object-store-first storage engine for Apache Iceberg tables."""

from aioiceberg.catalog import Catalog, connect, load_table
from aioiceberg.table import Table, Transaction
from aioiceberg.table_scan import Scan as _Scan  # noqa: F401  (the planner: a first plan imports nothing)

__version__ = "0.1.0"

__all__ = ["Catalog", "Table", "Transaction", "__version__", "connect", "load_table"]
