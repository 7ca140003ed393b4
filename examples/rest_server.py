"""``aioiceberg serve`` behind PyIceberg and DuckDB: one warehouse, three engines, one catalog.

Starts the Iceberg REST catalog server over a local warehouse (port 0: it picks a free port
and prints its URL), then PyIceberg's ``RestCatalog`` creates and fills a table, DuckDB
``ATTACH``es the same catalog to query and insert, and aioiceberg reads the result through
``rest+http://``. Needs ``pip install 'aioiceberg[server,rest]' 'pyiceberg[pyarrow]' duckdb``;
DuckDB's iceberg extension is loaded from the ``duckdb-extension-*`` wheels when they are
installed (offline), else DuckDB installs it itself. Run: ``python examples/rest_server.py``.
"""

import asyncio
import importlib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import pyarrow as pa
from pyiceberg.catalog import load_catalog

import aioiceberg

AIOICEBERG = [sys.executable, "-c", "from aioiceberg.cli import main; main()"]  # the `aioiceberg` command


def duckdb_with_iceberg() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    try:  # offline: the extensions shipped as wheels, avro and httpfs before iceberg
        wheels = [
            importlib.import_module(f"duckdb_extension_{name}") for name in ("avro", "httpfs", "iceberg")
        ]
    except ImportError:
        con.execute("INSTALL iceberg; LOAD iceberg")
        return con
    for wheel in wheels:
        con.execute(f"LOAD '{next(Path(str(wheel.__file__)).parent.rglob('*.duckdb_extension'))}'")
    return con


def main(warehouse: str) -> None:
    command = [*AIOICEBERG, "--warehouse", warehouse, "serve", "--host", "127.0.0.1", "--port", "0"]
    with subprocess.Popen(command, stdout=subprocess.PIPE, text=True) as server:
        try:
            assert server.stdout is not None
            url = re.search(r"http://\S+", server.stdout.readline()).group(0)  # type: ignore[union-attr]
            print("serving on", url)

            catalog = load_catalog("rest", type="rest", uri=url)  # PyIceberg
            catalog.create_namespace("db")
            schema = pa.schema([("id", pa.int64()), ("region", pa.string())])
            events = catalog.create_table("db.events", schema=schema)
            events.append(pa.table({"id": [1, 2, 3], "region": ["eu", "us", "eu"]}))

            con = duckdb_with_iceberg()  # DuckDB: the same catalog, attached
            con.execute(f"ATTACH '' AS lake (TYPE ICEBERG, ENDPOINT '{url}', AUTHORIZATION_TYPE 'none')")
            con.execute("INSERT INTO lake.db.events VALUES (4, 'ap')")
            by_region = "SELECT region, count(*) FROM lake.db.events GROUP BY region ORDER BY region"
            print("DuckDB:", con.execute(by_region).fetchall())

            async def read() -> pa.Table:  # aioiceberg, as a REST client
                async with aioiceberg.connect(f"rest+{url}") as rest:
                    table = await rest.load_table("db.events")
                    return await table.scan(row_filter="region = 'eu' OR id > 3").to_arrow()

            rows = sorted(asyncio.run(read()).column("id").to_pylist())
            print("eu or id > 3:", rows)
            assert rows == [1, 3, 4]
            assert len(catalog.load_table("db.events").history()) == 2  # PyIceberg sees DuckDB's commit
        finally:
            server.terminate()


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        main(folder)
