"""Rows of three regions (``id``, ``region``, ``v``), for tables partitioned by region."""

from __future__ import annotations

import pyarrow as pa

SCHEMA = pa.schema([pa.field("id", pa.int64()), pa.field("region", pa.string()), pa.field("v", pa.float64())])


def rows(start: int, count: int) -> pa.Table:
    """Ids ``start`` on: the region cycles eu, us, ap and ``v`` is half the id."""
    ids = list(range(start, start + count))
    return pa.table(
        {"id": ids, "region": [("eu", "us", "ap")[i % 3] for i in ids], "v": [i / 2 for i in ids]},
        schema=SCHEMA,
    )
