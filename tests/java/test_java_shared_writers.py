"""Writers of both implementations on one table: Apache Iceberg's Java runtime (Spark SQL on
the Java peer) and ours commit to the same table at once, through one catalog.

(a) Java's ``RESTCatalog`` through ``aioiceberg serve``, our writers through our REST client
    and straight to the warehouse behind the server;
(b) Java's ``JdbcCatalog`` and our SQL catalog on one SQLite file (one catalog name);
(c) Java's ``HadoopCatalog`` beside our warehouse catalog on a local disk: the layouts agree
    (``<warehouse>/<ns>/<table>/metadata/v<N>.metadata.json`` and ``version-hint.text`` on both
    sides), so each side reads and commits the other's tables; but only *taking turns* is
    tested, not racing. Hadoop commits by ``fs.exists(v<N>)`` then ``fs.rename(tmp, v<N>)``,
    with a lock that lives in Java's process only, and on a local disk Hadoop's rename is
    rename(2), which replaces a file that appeared in between. Our writer creates ``v<N>``
    with link(2), exclusively; a Java commit landing in that window overwrites it and an
    acknowledged commit of ours is gone. Iceberg documents its Hadoop catalog as safe only on
    a file system whose rename refuses an existing target (HDFS): no test can make that race
    safe, so none pretends to.

Each commit's rows carry its writer and commit number; an overwrite replaces its writer's own
partition. Afterwards: every acknowledged commit is there exactly once (the last overwrite of
each overwriting writer, every append), the snapshots are one line (each parent the one
before, one snapshot per commit), and Spark and we read the same rows.
"""

from __future__ import annotations

import itertools
import re
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import pyarrow as pa
import pytest
from servers.java_spark import JavaSpark
from servers.rest import RestServer

import aioiceberg

pytestmark = pytest.mark.xdist_group("java")

ARROW = pa.schema([("writer", pa.string()), ("commit", pa.int64()), ("n", pa.int64())])
RETRIES = "'commit.retry.num-retries'='60', 'commit.retry.min-wait-ms'='20', 'commit.retry.max-wait-ms'='500'"
ROWS_PER_COMMIT = 2
#: our writers commit at most this often while Java's statements run (a cap keeps a stuck
#: peer from growing the table without end)
PACE_S = 0.5
MIN_OURS, MAX_OURS = 3, 150
Row = tuple[str, int, int]


def fresh(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def commit_rows(writer: str, commit: int) -> list[Row]:
    return [(writer, commit, n) for n in range(ROWS_PER_COMMIT)]


def arrow_of(rows: list[Row]) -> pa.Table:
    return pa.table(
        {"writer": [r[0] for r in rows], "commit": [r[1] for r in rows], "n": [r[2] for r in rows]},
        schema=ARROW,
    )


def values(rows: list[Row]) -> str:
    return ", ".join(f"('{w}', {c}, {n})" for w, c, n in rows)


class Ledger:
    """What was acknowledged: appended rows, and each overwriting writer's latest rows."""

    def __init__(self) -> None:
        self.appended: list[Row] = []
        self.overwritten: dict[str, list[Row]] = {}
        #: which writer made each acknowledged commit, in order
        self.order: list[str] = []

    def append(self, rows: list[Row]) -> None:
        self.appended += rows
        self.order.append(rows[0][0])

    def overwrite(self, writer: str, rows: list[Row]) -> None:
        self.overwritten[writer] = rows
        self.order.append(writer)

    @property
    def commits(self) -> int:
        return len(self.order)

    def ours_since_java(self) -> bool:
        """Whether one of ours was acknowledged after Java's first commit of the race (not
        the warm-up insert before it: counting that let Java's last statement go at once)."""
        java = [i for i, writer in enumerate(self.order) if writer in ("java", "java-ov")]
        return bool(java) and any(not w.startswith("java") for w in self.order[java[0] :])

    def interleaved(self) -> bool:
        """Whether one of ours was acknowledged between Java's first and last commits."""
        java = [i for i, writer in enumerate(self.order) if writer in ("java", "java-ov")]
        return any(not w.startswith("java") for w in self.order[java[0] : java[-1]])

    def expected(self) -> list[Row]:
        return sorted(self.appended + [r for rows in self.overwritten.values() for r in rows])


async def java_sql(java: JavaSpark, statement: str) -> list[list[Any]]:
    return await anyio.to_thread.run_sync(java.sql, statement)


async def java_writer(java: JavaSpark, table: str, ledger: Ledger, commits: int, done: anyio.Event) -> None:
    """Java's statements, one at a time (the peer runs one), while our writers race them."""
    try:
        for i in range(commits):
            if i == commits - 1:
                # the last statement waits for one of ours after Java's first, so the two sides
                # interleave however fast this machine runs Java (our writers keep going meanwhile)
                with anyio.move_on_after(60):
                    while not ledger.ours_since_java():
                        await anyio.sleep(0.05)
            if i % 3 == 2:
                rows = [("java-ov", i, n) for n in range(ROWS_PER_COMMIT)]
                partition_rows = ", ".join(f"({c}, {n})" for _, c, n in rows)
                await java_sql(
                    java, f"INSERT OVERWRITE {table} PARTITION (writer = 'java-ov') VALUES {partition_rows}"
                )
                ledger.overwrite("java-ov", rows)
            else:
                rows = commit_rows("java", i)
                await java_sql(java, f"INSERT INTO {table} VALUES {values(rows)}")
                ledger.append(rows)
    finally:
        done.set()


async def our_writer(
    load: Callable[[], Awaitable[aioiceberg.Table]], name: str, ledger: Ledger, java_done: anyio.Event
) -> None:
    """Commits until Java's writer is done (at least ``MIN_OURS``), so ours land between Java's."""
    table = await load()
    i = 0
    while (i < MIN_OURS or not java_done.is_set()) and i < MAX_OURS:
        if i % 3 == 2:
            writer = f"{name}-ov"
            rows = [(writer, i, n) for n in range(ROWS_PER_COMMIT)]
            await table.overwrite(arrow_of(rows), overwrite_filter=f"writer = '{writer}'")
            ledger.overwrite(writer, rows)
        else:
            rows = commit_rows(name, i)
            await table.append(arrow_of(rows))
            ledger.append(rows)
        i += 1
        await anyio.sleep(PACE_S)


async def race(
    java: JavaSpark,
    java_table: str,
    writers: dict[str, Callable[[], Awaitable[aioiceberg.Table]]],
    *,
    java_commits: int = 3,
) -> Ledger:
    """Our writers (tasks) and Java's statements (a worker thread) commit at once. Java's
    first write in a session is slow (code loads): one INSERT before the race takes it."""
    ledger = Ledger()
    rows = commit_rows("java-first", 0)
    await java_sql(java, f"INSERT INTO {java_table} VALUES {values(rows)}")
    ledger.append(rows)
    java_done = anyio.Event()
    async with anyio.create_task_group() as tg:
        tg.start_soon(java_writer, java, java_table, ledger, java_commits, java_done)
        for name, load in writers.items():
            tg.start_soon(our_writer, load, name, ledger, java_done)
    assert ledger.interleaved(), "the writers did not race: no commit of ours landed between Java's"
    return ledger


def rows_of(arrow: pa.Table) -> list[Row]:
    return sorted((r["writer"], r["commit"], r["n"]) for r in arrow.to_pylist())


async def check_shared_table(
    java: JavaSpark, java_table: str, table: aioiceberg.Table, ledger: Ledger
) -> None:
    """Every acknowledged commit exactly once, one line of snapshots, and equal reads."""
    ours = rows_of(await table.scan(selected_fields=("writer", "commit", "n")).to_arrow())
    duplicated = [row for row, count in Counter(ours).items() if count > 1]
    assert duplicated == []
    assert ours == ledger.expected()

    snapshots = sorted(table.snapshots(), key=lambda s: s.sequence_number)
    assert len(snapshots) == ledger.commits
    assert snapshots[0].parent_snapshot_id is None
    for parent, child in itertools.pairwise(snapshots):
        assert child.parent_snapshot_id == parent.snapshot_id
    current = table.current_snapshot()
    assert current is not None and current.snapshot_id == snapshots[-1].snapshot_id

    await java_sql(java, f"REFRESH TABLE {java_table}")
    theirs = rows_of(
        await anyio.to_thread.run_sync(java.arrow, f"SELECT writer, commit, n FROM {java_table}")
    )
    assert theirs == ours
    history = await java_sql(java, f"SELECT snapshot_id, parent_id FROM {java_table}.snapshots")
    assert {s: p for s, p in history} == {s.snapshot_id: s.parent_snapshot_id for s in snapshots}


def create_statement(table: str) -> str:
    return (
        f"CREATE TABLE {table} (writer string, commit bigint, n bigint) USING iceberg "
        f"PARTITIONED BY (writer) TBLPROPERTIES ('format-version'='2', {RETRIES})"
    )


@pytest.mark.anyio
async def test_java_and_our_writers_race_through_our_rest_server(
    java_spark: JavaSpark, tmp_path: Path
) -> None:
    warehouse = tmp_path / "warehouse"
    with RestServer(str(warehouse), extra_args=["-v"]) as server:  # -v: every request's status
        cat = java_spark.catalog(fresh("rest"), type="rest", uri=server.url)
        ns = fresh("db")
        await java_sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
        await java_sql(java_spark, create_statement(f"{cat}.{ns}.shared"))
        async with (
            aioiceberg.connect(f"rest+{server.url}") as through_server,
            aioiceberg.connect(str(warehouse)) as direct,
        ):
            ledger = await race(
                java_spark,
                f"{cat}.{ns}.shared",
                {
                    "py-rest": lambda: through_server.load_table(f"{ns}.shared"),
                    "py-direct": lambda: direct.load_table(f"{ns}.shared"),
                },
            )
            table = await through_server.load_table(f"{ns}.shared")
            await check_shared_table(java_spark, f"{cat}.{ns}.shared", table, ledger)
        # commits that lost a race (if one did) were refused 409 (clients rebase on it), none failed 500
        # (Java reads that as CommitStateUnknownException and its INSERT would have failed)
        statuses = re.findall(r"^.*POST /v1/namespaces/[^ ]+/tables/shared -> (\d+)", server.stderr(), re.M)
        assert statuses and set(statuses) <= {"200", "409"}, statuses


@pytest.mark.anyio
async def test_java_jdbc_catalog_and_our_sql_catalog_share_one_sqlite_file(
    java_spark: JavaSpark, tmp_path: Path
) -> None:
    database, tables = tmp_path / "catalog.db", tmp_path / "tables"
    name = fresh("jdbc")  # the catalog_name column: the same on both sides
    cat = java_spark.catalog(
        name,
        type="jdbc",
        uri=f"jdbc:sqlite:{database}",
        warehouse=str(tables),
        **{"jdbc.schema-version": "V1"},
    )
    ns = fresh("db")
    await java_sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
    await java_sql(java_spark, create_statement(f"{cat}.{ns}.shared"))
    async with (
        aioiceberg.connect(f"sqlite:///{database}?catalog={name}", warehouse=str(tables)) as first,
        aioiceberg.connect(f"sqlite:///{database}?catalog={name}", warehouse=str(tables)) as second,
    ):
        assert await first.list_tables(ns) == [f"{ns}.shared"]
        ledger = await race(
            java_spark,
            f"{cat}.{ns}.shared",
            {
                "py-a": lambda: first.load_table(f"{ns}.shared"),
                "py-b": lambda: second.load_table(f"{ns}.shared"),
            },
        )
        table = await first.load_table(f"{ns}.shared")
        assert table.location == f"{tables}/{ns}/shared"
        await check_shared_table(java_spark, f"{cat}.{ns}.shared", table, ledger)


@pytest.mark.anyio
async def test_java_hadoop_catalog_and_our_warehouse_take_turns(
    java_spark: JavaSpark, tmp_path: Path
) -> None:
    """Same layout, so each side commits on the other's versions; in turns only (see the
    module's docstring: Hadoop's commit on a local disk can replace a version we created)."""
    warehouse = tmp_path / "warehouse"
    cat = java_spark.catalog(fresh("hadoop"), type="hadoop", warehouse=str(warehouse))
    ns = fresh("db")
    await java_sql(java_spark, f"CREATE NAMESPACE {cat}.{ns}")
    await java_sql(java_spark, create_statement(f"{cat}.{ns}.shared"))
    java_table = f"{cat}.{ns}.shared"
    ledger = Ledger()
    async with aioiceberg.connect(str(warehouse)) as ours:
        assert await ours.list_tables(ns) == [f"{ns}.shared"]
        table = await ours.load_table(f"{ns}.shared")
        assert table.location.removeprefix("file:") == f"{warehouse}/{ns}/shared"
        rows = commit_rows("java", 0)
        await java_sql(java_spark, f"INSERT INTO {java_table} VALUES {values(rows)}")
        ledger.append(rows)
        await table.refresh()
        rows = commit_rows("py", 0)
        await table.append(arrow_of(rows))
        ledger.append(rows)
        # Java's cached table is behind our commit: its v<N> exists, so it reloads and retries
        rows = commit_rows("java", 1)
        await java_sql(java_spark, f"INSERT INTO {java_table} VALUES {values(rows)}")
        ledger.append(rows)
        await table.refresh()
        rows = [("py-ov", 9, n) for n in range(ROWS_PER_COMMIT)]
        await table.overwrite(arrow_of(rows), overwrite_filter="writer = 'py-ov'")
        ledger.overwrite("py-ov", rows)
        version_hint = (warehouse / ns / "shared" / "metadata" / "version-hint.text").read_text().strip()
        assert int(version_hint) == table.version
        await check_shared_table(java_spark, java_table, await ours.load_table(f"{ns}.shared"), ledger)
