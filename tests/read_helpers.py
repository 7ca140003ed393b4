"""Shared helpers for the read tests: peer readers (PyIceberg, DuckDB) and our read path."""

from __future__ import annotations

import datetime as dt
import math
import os
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

import pyarrow as pa

from aioiceberg.io import FileIO
from aioiceberg.read import read_to_table
from aioiceberg.spec.metadata_json import parse_table_metadata
from aioiceberg.spec.name_mapping import DEFAULT_NAME_MAPPING_PROPERTY, name_mapping_from_json
from aioiceberg.table_scan import TableScan


def duckdb_connection(endpoint: str | None = None) -> Any:
    """DuckDB with the iceberg extension loaded from the installed wheels (no network)."""
    import duckdb
    import duckdb_extension_avro
    import duckdb_extension_httpfs
    import duckdb_extension_iceberg

    con = duckdb.connect()
    con.execute("SET autoinstall_known_extensions=false")
    con.execute("SET TimeZone='UTC'")
    for module in (duckdb_extension_avro, duckdb_extension_httpfs, duckdb_extension_iceberg):
        folder = os.path.join(os.path.dirname(module.__file__), "extensions")
        paths = [
            os.path.join(r, f) for r, _, fs in os.walk(folder) for f in fs if f.endswith(".duckdb_extension")
        ]
        con.execute(f"LOAD '{paths[0]}'")
    if endpoint is not None:
        host = endpoint.split("://", 1)[1]
        con.execute(
            "CREATE SECRET (TYPE s3, KEY_ID 'testing', SECRET 'testing', REGION 'us-east-1', "
            f"ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)"
        )
    return con


def duckdb_filter(text: str) -> str:
    """Our filter syntax as DuckDB SQL.

    DuckDB orders NaN above every number, Iceberg compares NaN false: comparisons on
    the float column ``v`` get an explicit NaN guard.
    """
    import re

    text = re.sub(r"\bv ([<>]=?) ([\d.]+)", r"(v \1 \2 AND NOT isnan(v))", text)
    text = re.sub(r"(\w+) IS NOT NAN", r"NOT isnan(\1)", text)
    return re.sub(r"(\w+) IS NAN", r"isnan(\1)", text)


def duckdb_rows(
    con: Any, metadata_location: str, row_filter: str, columns: Sequence[str]
) -> list[tuple[Any, ...]]:
    cols = ", ".join(f'"{c}"' for c in columns)
    where = f" WHERE {duckdb_filter(row_filter)}" if row_filter else ""
    table = con.execute(f"SELECT {cols} FROM iceberg_scan('{metadata_location}'){where}").to_arrow_table()
    return rows_of(table)


def _norm(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    if isinstance(v, dt.datetime) and v.tzinfo is not None:
        return v.astimezone(dt.UTC)
    if isinstance(v, Decimal):
        return str(v)
    if isinstance(v, bytes | bytearray):
        return bytes(v)
    return v


def rows_of(
    table: pa.Table | list[tuple[Any, ...]], columns: Sequence[str] | None = None
) -> list[tuple[Any, ...]]:
    """Rows as sorted tuples of comparable values (NaN equal to NaN, instants in UTC)."""
    if isinstance(table, pa.Table):
        cols = list(columns) if columns is not None else table.column_names
        data = [table.column(c).to_pylist() for c in cols]
        rows = list(zip(*data, strict=True)) if data else []
    else:
        rows = table
    return sorted((tuple(_norm(v) for v in r) for r in rows), key=repr)


async def our_rows(
    io: FileIO,
    metadata_location: str,
    row_filter: str = "",
    selected_fields: Sequence[str] = ("*",),
    plan_first: bool = False,
    **kwargs: Any,
) -> pa.Table:
    """Plan with TableScan and read with read_to_table, as TableScan.to_arrow() will."""
    md = parse_table_metadata(await io.read(metadata_location), metadata_location)
    scan = TableScan(io, md, row_filter=row_filter, selected_fields=selected_fields, decode_workers=0)
    schema = md.schema()
    projected = schema if tuple(selected_fields) == ("*",) else schema.select(*selected_fields)
    mapping_text = md.properties.get(DEFAULT_NAME_MAPPING_PROPERTY)
    mapping = name_mapping_from_json(mapping_text) if mapping_text else None
    tasks: Any = scan.plan_files()
    if plan_first:  # TableScan.plan_files cannot be closed early yet: plan everything first
        tasks = [t async for t in tasks]
    return await read_to_table(io, tasks, projected, table_schema=schema, name_mapping=mapping, **kwargs)
