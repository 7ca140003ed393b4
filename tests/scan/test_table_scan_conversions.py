"""A scan as pandas, polars (eager and lazy), a DuckDB view and an Arrow batch reader, through
the async and the blocking API, over a partitioned table with merge-on-read deletes: every
conversion holds the rows ``to_arrow()`` reads, the streaming ones read nothing before they
are consumed, and a missing optional library is named with the extra that installs it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import anyio
import duckdb
import polars as pl
import pyarrow as pa
import pytest

from aioiceberg import sync
from aioiceberg.table_scan import TableScan

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("region", pa.string()),
        pa.field("n", pa.float64()),
    ]
)
REGIONS = ("eu", "us", "ap")
APPENDS = 10  # 3 partitions each, so a read that stops early is seen to
# every id ending in 3 (in every file) and a tail of one partition
DELETED = f"id IN ({', '.join(str(i) for i in range(3, APPENDS * 20, 10))}) OR (region = 'ap' AND id >= 150)"
FILES = APPENDS * 3 - 2  # the delete leaves two 'ap' files without rows: they are dropped
Row = tuple[Any, ...]


def _rows(start: int, count: int) -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table(
        {
            "id": ids,
            "region": [REGIONS[i % 3] for i in ids],
            "n": [None if i % 11 == 0 else i / 2 for i in ids],
        },
        schema=SCHEMA,
    )


def _expected() -> list[Row]:
    return sorted(
        (i, REGIONS[i % 3], None if i % 11 == 0 else i / 2)
        for i in range(APPENDS * 20)
        if not (i % 10 == 3 or (REGIONS[i % 3] == "ap" and i >= 150))
    )


def rows_of(data: Any) -> list[Row]:
    """Sorted row tuples of anything Arrow can take (a table, a pandas or polars frame)."""
    table = data if isinstance(data, pa.Table) else pa.table(data)
    table = table.select(SCHEMA.names)
    return sorted(zip(*(table.column(n).to_pylist() for n in SCHEMA.names), strict=True))


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("conversions")
    catalog = sync.connect(str(root))
    table = catalog.create_table(
        "db.t", schema=SCHEMA, partition_by=["region"], properties={"write.delete.mode": "merge-on-read"}
    )
    for k in range(APPENDS):
        table.append(_rows(k * 20, 20))
    table.delete(DELETED)
    return root


@pytest.fixture
def table(warehouse: Path) -> sync.Table:
    return sync.connect(str(warehouse)).load_table("db.t")


def _scan(table: sync.Table, **options: Any) -> sync.TableScan:
    return table.scan(files_in_flight=1, **options)


def test_the_table_is_partitioned_and_read_with_delete_files(table: sync.Table) -> None:
    tasks = list(table.scan().plan_files())
    assert len(tasks) == FILES
    assert {t.file.partition for t in tasks} == {(r,) for r in REGIONS}
    assert sum(1 for t in tasks if t.delete_files) >= APPENDS  # position deletes, not rewrites
    assert rows_of(table.scan().to_arrow()) == _expected()


# -- blocking ------------------------------------------------------------------------------


def test_blocking_to_pandas_and_to_polars_hold_the_rows_to_arrow_reads(table: sync.Table) -> None:
    scan = table.scan()
    arrow = rows_of(scan.to_arrow())
    df = scan.to_pandas()
    assert type(df).__module__.startswith("pandas") and len(df) == len(arrow)
    assert rows_of(pa.Table.from_pandas(df, preserve_index=False)) == arrow
    assert df["n"].isna().sum() == sum(1 for r in arrow if r[2] is None)
    frame = scan.to_polars()
    assert isinstance(frame, pl.DataFrame) and frame.columns == SCHEMA.names
    assert rows_of(frame) == arrow
    # to_pandas's keywords go to pyarrow's
    assert scan.to_pandas(types_mapper=pd_arrow_types)["id"].dtype.name.startswith("int64[pyarrow]")


def pd_arrow_types(t: pa.DataType) -> Any:
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    return pd.ArrowDtype(t)


def test_blocking_batch_reader_streams_and_reads_the_rows(table: sync.Table) -> None:
    scan = _scan(table)
    reader = scan.to_arrow_batch_reader()
    assert isinstance(reader, pa.RecordBatchReader)
    assert reader.schema.names == SCHEMA.names
    assert scan.read_stats.files == 0  # nothing read before the first batch is asked for
    first = reader.read_next_batch()
    assert 0 < scan.read_stats.files < FILES  # the rest is read as the reader pulls
    rest = reader.read_all()
    assert rows_of(pa.Table.from_batches([first, *rest.to_batches()], schema=reader.schema)) == _expected()
    assert scan.read_stats.files == FILES


def test_blocking_batch_reader_closed_early_stops_the_read(table: sync.Table) -> None:
    scan = _scan(table)
    with scan.to_arrow_batch_reader() as reader:
        reader.read_next_batch()
    files = scan.read_stats.files
    assert files < FILES
    assert rows_of(table.scan().to_arrow()) == _expected()  # the loop goes on serving


def test_blocking_lazy_polars_reads_on_collect_and_stops_at_the_limit(table: sync.Table) -> None:
    scan = _scan(table)
    lazy = scan.to_polars_lazy()
    assert isinstance(lazy, pl.LazyFrame)
    assert lazy.collect_schema().names() == SCHEMA.names
    assert scan.read_stats.files == 0
    head = lazy.head(3).collect()
    assert head.height == 3 and head.columns == SCHEMA.names
    assert 0 < scan.read_stats.files < FILES  # the limit reached the read
    read_before = scan.read_stats.files
    assert rows_of(lazy.collect()) == _expected()  # each collect reads again
    assert scan.read_stats.files == read_before + FILES


def test_blocking_lazy_polars_filters_projects_and_counts_like_the_rows(table: sync.Table) -> None:
    lazy = table.scan().to_polars_lazy()
    expected = _expected()
    us = lazy.filter(pl.col("region") == "us").select("id", "n").sort("id").collect()
    assert us.columns == ["id", "n"]
    assert us.rows() == [(r[0], r[2]) for r in expected if r[1] == "us"]
    assert lazy.select(pl.len()).collect().item() == len(expected)
    assert lazy.select("id").collect()["id"].sort().to_list() == [r[0] for r in expected]
    summed = lazy.group_by("region").agg(pl.col("n").sum()).sort("region").collect().rows()
    assert summed == [
        (reg, sum(r[2] for r in expected if r[1] == reg and r[2] is not None)) for reg in sorted(REGIONS)
    ]
    first_ap = lazy.filter(pl.col("region") == "ap").head(2).collect()
    assert first_ap.height == 2 and set(first_ap["region"]) == {"ap"}


def test_blocking_lazy_polars_keeps_the_scans_own_filter_columns_and_limit(table: sync.Table) -> None:
    scan = table.scan(row_filter="id < 40", selected_fields=("id", "region"), limit=7)
    frame = scan.to_polars_lazy().collect()
    assert frame.columns == ["id", "region"] and frame.height == 7
    assert set(frame["id"]) <= {r[0] for r in _expected() if r[0] < 40}
    assert scan.to_polars_lazy().head(100).collect().height == 7


def test_blocking_duckdb_view_streams_and_answers_every_query(table: sync.Table) -> None:
    scan = _scan(table)
    con = duckdb.connect()
    assert scan.to_duckdb("events", con) is con
    assert scan.read_stats.files == 0  # a view, not a copy
    expected = _expected()
    assert con.execute("SELECT count(*), sum(id) FROM events").fetchone() == (
        len(expected),
        sum(r[0] for r in expected),
    )
    assert scan.read_stats.files == FILES
    got = con.execute("SELECT id, region, n FROM events WHERE region = 'eu' ORDER BY id").fetchall()
    assert got == [r for r in expected if r[1] == "eu"]
    assert scan.read_stats.files == 2 * FILES  # the second query read the scan again
    assert con.execute("SELECT count(*) FROM events WHERE n IS NULL").fetchone() == (
        sum(1 for r in expected if r[2] is None),
    )


def test_blocking_duckdb_without_a_connection_makes_one(table: sync.Table) -> None:
    con = table.scan(row_filter="region = 'us'").to_duckdb("us_rows")
    assert isinstance(con, duckdb.DuckDBPyConnection)
    rows = con.execute("SELECT id, region, n FROM us_rows").fetchall()
    assert sorted(rows) == [r for r in _expected() if r[1] == "us"]


# -- async ---------------------------------------------------------------------------------


@pytest.fixture
def aio_scan(table: sync.Table) -> TableScan:
    return table.aio.scan(files_in_flight=1)


@pytest.mark.anyio
async def test_async_eager_conversions_hold_the_rows_to_arrow_reads(aio_scan: TableScan) -> None:
    arrow = rows_of(await aio_scan.to_arrow())
    assert arrow == _expected()
    assert rows_of(pa.Table.from_pandas(await aio_scan.to_pandas(), preserve_index=False)) == arrow
    frame = await aio_scan.to_polars()
    assert isinstance(frame, pl.DataFrame) and rows_of(frame) == arrow


@pytest.mark.anyio
async def test_async_streaming_conversions_are_read_from_a_worker_thread(aio_scan: TableScan) -> None:
    await aio_scan.to_arrow()  # planned and read on this loop first; the streams use the runtime's
    expected = _expected()
    reader = aio_scan.to_arrow_batch_reader()
    assert rows_of(await anyio.to_thread.run_sync(reader.read_all)) == expected
    lazy = aio_scan.to_polars_lazy()
    assert rows_of(await lazy.collect_async()) == expected
    con = aio_scan.to_duckdb("events")
    counted = await anyio.to_thread.run_sync(lambda: con.execute("SELECT count(*) FROM events").fetchone())
    assert counted == (len(expected),)


@pytest.mark.anyio
async def test_async_reader_read_on_the_loops_own_thread_still_works(aio_scan: TableScan) -> None:
    # blocking this loop is the caller's choice; the rows come from the runtime's own loop
    assert rows_of(aio_scan.to_arrow_batch_reader().read_all()) == _expected()
    assert aio_scan.to_polars_lazy().select(pl.len()).collect().item() == len(_expected())


# -- missing optional libraries ------------------------------------------------------------


def test_a_missing_optional_library_is_named_with_its_extra(warehouse: Path) -> None:
    script = textwrap.dedent(
        f"""
        import sys
        for name in ("pandas", "duckdb", "polars"):
            sys.modules[name] = None  # as if not installed: importing it raises ImportError
        from aioiceberg import sync
        from aioiceberg.errors import MissingExtraError
        scan = sync.connect({str(warehouse)!r}).load_table("db.t").scan()
        for call in (scan.to_pandas, scan.to_polars, scan.to_polars_lazy, lambda: scan.to_duckdb("t")):
            try:
                call()
            except MissingExtraError as exc:
                print(exc)
            else:
                print("no error")
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines == [
        "to_pandas() needs pandas, which is not installed: pip install 'aioiceberg[pandas]'",
        "to_polars() needs polars, which is not installed: pip install 'aioiceberg[polars]'",
        "to_polars_lazy() needs polars, which is not installed: pip install 'aioiceberg[polars]'",
        "to_duckdb() needs duckdb, which is not installed: pip install 'aioiceberg[duckdb]'",
    ]
