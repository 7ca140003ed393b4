"""The DV differential's rows, random deletes and peers, shared by the tests that run it here and
with Java: the same generated rows on a v3 table (deletion vectors) and a v2 table (position
delete files), the same random deletes on both, and every reader must agree with plain Python.

A filter from ``random_filter`` is valid in our row-filter syntax, Spark SQL and DuckDB alike.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pyarrow as pa
from read_helpers import duckdb_connection

import aioiceberg
from aioiceberg.table import Table

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("part", pa.string()),
        pa.field("v", pa.int64()),
    ]
)
PARTS = ("a", "b", "c")
Row = tuple[Any, ...]
MOR = {"write.delete.mode": "merge-on-read"}


def make_rows(n: int, seed: int = 7) -> list[Row]:
    rnd = random.Random(seed)
    return [(i, PARTS[i % 3], None if i % 11 == 5 else rnd.randrange(1000)) for i in range(n)]


def to_arrow(rows: list[Row]) -> pa.Table:
    cols = list(zip(*rows, strict=True))
    return pa.table({f.name: list(c) for f, c in zip(SCHEMA, cols, strict=True)}, schema=SCHEMA)


def rows_of(table: pa.Table) -> list[Row]:
    return sorted(zip(*(table.column(f.name).to_pylist() for f in SCHEMA), strict=True))


async def our_rows(table: Table) -> list[Row]:
    return rows_of(await table.scan().to_arrow())


def duckdb_rows(metadata_location: str, con: Any = None) -> list[Row]:
    """DuckDB's rows (``con``: a connection from ``duckdb_connection`` to reuse; loading the
    extensions costs more than a scan)."""
    con = con if con is not None else duckdb_connection()
    got = con.execute(f"SELECT id, part, v FROM iceberg_scan('{metadata_location}')")
    return rows_of(got.to_arrow_table())


async def new_table(
    path: Path,
    rows: list[Row],
    *,
    version: int,
    props: dict[str, str],
    batches: int = 3,
    partitioned: bool = True,
    name: str = "db.t",
) -> Table:
    """A table in the warehouse catalog at ``path / "wh"`` (Java's Hadoop catalog layout),
    ``rows`` appended in ``batches`` commits."""
    catalog = aioiceberg.connect(str(path / "wh"))
    table = await catalog.create_table(
        name,
        schema=SCHEMA,
        partition_by=["part"] if partitioned else None,
        format_version=version,
        properties=props,
    )
    step = max(1, len(rows) // batches)
    for start in range(0, len(rows), step):
        await table.append(to_arrow(rows[start : start + step]))
    return table


def random_filter(rnd: random.Random, n: int) -> str:
    kind = rnd.randrange(4)
    if kind == 0:
        return "id IN (" + ", ".join(str(rnd.randrange(n)) for _ in range(rnd.randint(1, 12))) + ")"
    if kind == 1:
        return f"v < {rnd.randrange(60)}"
    if kind == 2:
        lo = rnd.randrange(n)
        return f"part = '{rnd.choice(PARTS)}' AND id >= {lo} AND id < {lo + rnd.randint(1, 15)}"
    return f"v > {rnd.randrange(900, 1000)} OR id = {rnd.randrange(n)}"


def matches(r: Row, text: str) -> bool:
    """Plain-Python meaning of ``random_filter``'s output (SQL: NULL never matches)."""
    i, part, v = r
    expr = text.replace(" IN (", " in (").replace(" AND ", " and ").replace(" OR ", " or ")
    expr = expr.replace(" = ", " == ").replace("part", "p_").replace("id", "i_")
    if v is None:  # every comparison on v is null: only the other disjunct can hold
        expr = expr.replace("v < ", "False and 0 < ").replace("v > ", "False and 0 > ")
        return bool(eval(expr, {}, {"i_": i, "p_": part}))
    return bool(eval(expr, {}, {"i_": i, "p_": part, "v": v}))
