"""We write, Java reads: every table change aioiceberg makes, read back by Apache Iceberg's Java
implementation (Spark 4.1, Iceberg 1.12) through one shared catalog, then Java's maintenance
procedures run on our tables and we read what they leave.

The catalog is one SQLite file: our SQL catalog and Java's ``JdbcCatalog`` under the same
catalog name. Our DDL is Java's V1 schema (``iceberg_type`` included), so Java finds its own
schema version without ``jdbc.schema-version``; Java's catalog cache is off, since the other
writer (us) commits behind its back.

Each format version gets one table that goes through the whole history of changes; after each
change a few filters run on both sides (one Spark statement: a UNION ALL of the filtered
queries, each planned with its own pushdown) and the answers are recorded, so each change is
its own test case.
"""

from __future__ import annotations

import datetime as dt
import decimal
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from servers.java_spark import JavaPeerError, JavaSpark

from aioiceberg import sync
from aioiceberg._sync.default_loop import run as run_blocking
from aioiceberg.spec.manifest.snapshot import snapshot_manifests

pytestmark = [pytest.mark.xdist_group("java"), pytest.mark.timeout(900)]

NS = "ns"
TABLE = "t"
KEYED = "keyed"
DAY0 = dt.datetime(2024, 5, 1)
UTC0 = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
NAMES = ("alpha", "albert", "bravo", "beta", "charlie", None)

SCHEMA = pa.schema(
    [
        pa.field("id", pa.int64(), nullable=False),
        pa.field("n", pa.int32()),
        pa.field("region", pa.string()),
        pa.field("name", pa.string()),
        pa.field("d", pa.date32()),
        pa.field("ts", pa.timestamp("us")),
        pa.field("tstz", pa.timestamp("us", tz="UTC")),
        pa.field("amount", pa.decimal128(10, 2)),
        pa.field("score", pa.float64()),
        pa.field("flag", pa.bool_()),
        pa.field("payload", pa.binary()),
    ]
)
"""The mix of types; the table is partitioned by identity(region), day(ts), bucket(2, id)."""


def rows(ids: Sequence[int], *, region: str | None = None, salt: int = 0) -> pa.Table:
    """Deterministic rows for ``ids`` (nulls in most columns; ``salt`` changes the values)."""
    cols: dict[str, list[Any]] = {f.name: [] for f in SCHEMA}
    for i in ids:
        k = i + salt
        cols["id"].append(i)
        cols["n"].append(None if k % 11 == 0 else (k * 7) % 23 - 5)
        cols["region"].append(region or (None if i % 17 == 3 else ("eu", "us")[i % 2]))
        cols["name"].append(NAMES[k % len(NAMES)])
        cols["d"].append(None if k % 13 == 4 else DAY0.date() + dt.timedelta(days=k % 4))
        cols["ts"].append(DAY0 + dt.timedelta(hours=(i * 5) % 48, minutes=k % 60))
        cols["tstz"].append(None if k % 9 == 2 else UTC0 + dt.timedelta(minutes=k * 97, microseconds=k))
        cols["amount"].append(None if k % 10 == 7 else decimal.Decimal((k * 137) % 100000) / 100)
        cols["score"].append(None if k % 7 == 0 else k * 1.5 - 10.25)
        cols["flag"].append(None if k % 10 == 9 else k % 3 == 0)
        cols["payload"].append(None if k % 8 == 5 else bytes([k % 256, (k * 3) % 256, 0]))
    return pa.table(cols, schema=SCHEMA)


def evolved(ids: Sequence[int], *, salt: int = 0) -> pa.Table:
    """``rows`` in the schema after the evolution step (score -> points, n and amount widened,
    flag dropped, note added)."""
    t = rows(ids, salt=salt)
    return pa.table(
        {
            "id": t["id"],
            "n": t["n"].cast(pa.int64()),
            "region": t["region"],
            "name": t["name"],
            "d": t["d"],
            "ts": t["ts"],
            "tstz": t["tstz"],
            "amount": t["amount"].cast(pa.decimal128(12, 2)),
            "points": t["score"],
            "payload": t["payload"],
            "note": pa.array([None if i % 3 else f"note-{i}" for i in ids], pa.string()),
        }
    )


# (our filter, Spark's WHERE clause); the first of each list is the whole table
FILTERS = [
    ("", "true"),
    ("region = 'eu' AND n > 3", "region = 'eu' AND n > 3"),
    (
        "ts >= '2024-05-02T00:00:00' AND name LIKE 'al%'",
        "ts >= TIMESTAMP_NTZ '2024-05-02 00:00:00' AND name LIKE 'al%'",
    ),
    (
        "tstz < '2024-05-02T12:00:00+00:00' OR amount > 500.00",
        "tstz < TIMESTAMP '2024-05-02 12:00:00+00:00' OR amount > 500.00",
    ),
    (
        "d IN ('2024-05-01', '2024-05-03') AND region IS NULL",
        "d IN (DATE '2024-05-01', DATE '2024-05-03') AND region IS NULL",
    ),
    ("d = '2024-05-02' OR id < 10", "d = DATE '2024-05-02' OR id < 10"),
    ("score > 20.0 AND flag = true", "score > 20.0 AND flag = true"),
    ("region != 'us' AND name NOT IN ('bravo', 'beta')", "region != 'us' AND name NOT IN ('bravo', 'beta')"),
]
EVOLVED_FILTERS = [
    *FILTERS[:6],
    ("points > 20.0 AND note IS NOT NULL", "points > 20.0 AND note IS NOT NULL"),
    ("n >= 0 AND amount <= 300.00", "n >= 0 AND amount <= 300.00"),
]


@dataclass
class Reading:
    """What both sides answered after one change."""

    ours: dict[str, pa.Table] = field(default_factory=dict)
    where: dict[str, str] = field(default_factory=dict)
    theirs: dict[str, pa.Table] = field(default_factory=dict)
    java_error: str | None = None
    facts: dict[str, Any] = field(default_factory=dict)


class Shared:
    """One table, written by us through our SQL catalog, read by Java through its JdbcCatalog."""

    def __init__(self, java: JavaSpark, root: Path, version: int) -> None:
        self.java = java
        self.root = root
        self.version = version
        self.name = f"ours_v{version}_{uuid.uuid4().hex[:8]}"
        db = root / "catalog.db"
        warehouse = root / "warehouse"
        warehouse.mkdir()
        self.catalog = sync.connect(f"sqlite:///{db}?catalog={self.name}", warehouse=str(warehouse))
        java.catalog(
            self.name,
            type="jdbc",
            uri="jdbc:sqlite:" + str(db),
            warehouse="file://" + str(warehouse),
            cache_enabled="false",
        )
        self.spark_table = f"{self.name}.{NS}.{TABLE}"
        self.readings: dict[str, Reading] = {}
        self.table: sync.Table

    def create(self) -> None:
        self.catalog.create_namespace(NS)
        self.table = self.catalog.create_table(
            f"{NS}.{TABLE}",
            schema=SCHEMA,
            partition_by=["region", "day(ts)", "bucket(2, id)"],
            properties={"write.parquet.compression-codec": "zstd"},
            format_version=self.version,
        )

    def ours(self, row_filter: str = "") -> pa.Table:
        self.table.refresh()
        return self.table.scan(row_filter=row_filter).to_arrow()

    def read(self, step: str, filters: Sequence[tuple[str, str]] = FILTERS, table: str = TABLE) -> Reading:
        """Both sides' answers to ``filters`` on ``table`` now, recorded under ``step``."""
        reading = Reading()
        ours_table = self.catalog.load_table(f"{NS}.{table}")
        for i, (ours, _) in enumerate(filters):
            reading.ours[f"q{i}"] = ours_table.scan(row_filter=ours).to_arrow()
            reading.where[f"q{i}"] = filters[i][1]
        union = " UNION ALL ".join(
            f"SELECT 'q{i}' AS _q, * FROM {self.name}.{NS}.{table} WHERE {spark}"
            for i, (_, spark) in enumerate(filters)
        )
        try:
            answer = self.java.arrow(union)
        except JavaPeerError as exc:
            reading.java_error = str(exc)
        else:
            for label in reading.ours:
                part = answer.filter(pc.equal(answer["_q"], label))
                reading.theirs[label] = part.drop_columns(["_q"])
        self.readings[step] = reading
        return reading

    def java_sql(self, step: str, statement: str) -> list[list[Any]] | None:
        """A Java statement whose refusal is recorded under ``step`` (its check then fails)."""
        try:
            return self.java.sql(statement)
        except JavaPeerError as exc:
            self.readings[step] = Reading(java_error=str(exc))
            return None

    def live_files(self) -> set[str]:
        """Every file the current version needs: metadata, manifest list, manifests, data, deletes."""
        self.table.refresh()
        files = {self.table.metadata_location}
        snapshot = self.table.current_snapshot()
        if snapshot is not None:
            assert snapshot.manifest_list is not None
            files.add(snapshot.manifest_list)
            manifests = run_blocking(snapshot_manifests(self.table.io, snapshot))
            files.update(m.manifest_path for m in manifests)
        for task in self.table.scan().plan_files():
            files.add(task.file.file_path)
            files.update(d.file_path for d in task.delete_files)
        return {local_path(f) for f in files}

    def delete_file_count(self, table: str = TABLE) -> int:
        tasks = self.catalog.load_table(f"{NS}.{table}").scan().plan_files()
        return len({d.file_path for task in tasks for d in task.delete_files})

    def java_properties(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in self.java.sql(f"SHOW TBLPROPERTIES {self.spark_table}")}

    def java_snapshot_ids(self) -> list[int]:
        found = self.java.sql(f"SELECT snapshot_id FROM {self.spark_table}.snapshots ORDER BY committed_at")
        return [int(r[0]) for r in found]


def local_path(location: str) -> str:
    """A file location as a local path (ours carry no scheme, Java's say ``file:``)."""
    for prefix in ("file://", "file:"):
        if location.startswith(prefix):
            return location[len(prefix) :]
    return location


def utc_sql(moment: dt.datetime) -> str:
    return "TIMESTAMP '" + moment.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S.%f") + "+00:00'"


def backdate(root: str, days: int) -> None:
    """Every file under ``root`` looks ``days`` old (remove_orphan_files goes by modification time)."""
    past = (dt.datetime.now(dt.UTC) - dt.timedelta(days=days)).timestamp()
    for folder, _, names in os.walk(root):
        for name in names:
            os.utime(os.path.join(folder, name), (past, past))


def history_of(shared: Shared) -> None:
    """Every change we support, each followed by a reading on both sides."""
    t = shared
    t.create()
    t.read("create")
    t.table.append(rows(range(0, 30)))
    t.read("append")
    t.table.append(rows(range(30, 60), salt=1))
    t.read("append_again")
    t.table.overwrite(rows(range(100, 110), region="eu"), overwrite_filter="region = 'eu'")
    t.read("overwrite_partitions")
    t.table.overwrite(rows(range(200, 206), salt=2), overwrite_filter="n < 0")
    t.read("overwrite_rows")
    t.table.dynamic_partition_overwrite(rows(range(300, 304), region="us", salt=3))
    t.read("dynamic_partition_overwrite")
    t.table.delete("score > 40.0")
    t.read("delete_copy_on_write")
    t.table.set_properties({"write.delete.mode": "merge-on-read"})
    t.table.delete("flag = true")
    t.table.delete("name = 'bravo' AND region = 'us'")
    t.read("delete_merge_on_read").facts["delete files"] = t.delete_file_count()
    # the partitions do not derive from the key: an upsert here copies on write
    upsert = rows([1, 5, 31, 33, 104, 400, 401, 402], salt=5)
    t.table.upsert(upsert, join_cols=["id"], mode="copy-on-write")
    t.read("upsert_copy_on_write").facts["delete files"] = t.delete_file_count()
    # a table partitioned by its key takes upserts as equality deletes
    keyed = t.catalog.create_table(
        f"{NS}.{KEYED}", schema=SCHEMA, partition_by=["bucket(4, id)"], format_version=t.version
    )
    keyed.append(rows(range(0, 40)))
    keyed.upsert(rows([2, 3, 17, 18, 39, 40, 41], salt=9), join_cols=["id"])
    keyed.upsert(rows([3, 41, 42], salt=10), join_cols=["id"])
    t.read("upsert_merge_on_read", table=KEYED).facts["delete files"] = t.delete_file_count(KEYED)

    with t.table.update_schema() as u:
        u.add_column("note", pa.string())
        u.rename_column("score", "points")
        u.update_column("n", pa.int64())
        u.update_column("amount", pa.decimal128(12, 2))
        u.delete_column("flag")
    t.read("schema_evolution", EVOLVED_FILTERS)
    t.table.append(evolved(range(500, 512), salt=6))
    t.read("append_after_schema_evolution", EVOLVED_FILTERS)

    bucket = next(f.name for f in t.table.spec().fields if str(f.transform).startswith("bucket"))
    with t.table.update_spec() as s:
        s.add_field("name", "truncate[2]")
        s.remove_field(bucket)
    t.table.append(evolved(range(600, 616), salt=7))
    t.read("partition_evolution", EVOLVED_FILTERS)

    with t.table.replace_sort_order() as o:
        o.asc("id")
        o.desc("ts")
    t.table.append(evolved(range(700, 708), salt=8))
    reading = t.read("sort_order", EVOLVED_FILTERS)
    reading.facts["java sort-order"] = t.java_properties().get("sort-order")

    t.table.set_properties({"owner.team": "storage", "commit.retry.num-retries": "7"})
    t.table.remove_properties("write.parquet.compression-codec")
    reading = t.read("properties", EVOLVED_FILTERS)
    reading.facts["java properties"] = t.java_properties()
    reading.facts["our properties"] = dict(t.table.properties)

    t.table.rewrite_data_files(min_input_files=1)
    t.read("our_rewrite_data_files", EVOLVED_FILTERS)
    t.table.rewrite_manifests()
    t.read("our_rewrite_manifests", EVOLVED_FILTERS)
    t.table.expire_snapshots(older_than=dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1), retain_last=2)
    reading = t.read("our_expire_snapshots", EVOLVED_FILTERS)
    reading.facts["snapshots"] = ([s.snapshot_id for s in t.table.snapshots()], t.java_snapshot_ids())

    # Java's procedures on our table; we read what they leave
    before = t.ours()
    name = f"{NS}.{TABLE}"
    done = t.java_sql(
        "java_rewrite_data_files",
        f"CALL {t.name}.system.rewrite_data_files(table => '{name}', options => map('rewrite-all', 'true'))",
    )
    if done is not None:
        reading = t.read("java_rewrite_data_files", EVOLVED_FILTERS)
        reading.facts["rows kept"] = (before, t.ours())
        reading.facts["delete files"] = t.delete_file_count()

    before = t.ours()
    done = t.java_sql(
        "java_expire_snapshots",
        f"CALL {t.name}.system.expire_snapshots(table => '{name}', "
        f"older_than => {utc_sql(dt.datetime.now(dt.UTC) + dt.timedelta(seconds=1))}, retain_last => 1)",
    )
    if done is not None:
        reading = t.read("java_expire_snapshots", EVOLVED_FILTERS)
        reading.facts["rows kept"] = (before, t.ours())
        reading.facts["snapshots"] = ([s.snapshot_id for s in t.table.snapshots()], t.java_snapshot_ids())

    before = t.ours()
    live = t.live_files()
    orphan = Path(local_path(t.table.location)) / "data" / f"orphan-{uuid.uuid4().hex}.parquet"
    orphan.write_bytes(b"PAR1 not referenced by any snapshot PAR1")
    backdate(local_path(t.table.location), days=3)
    removed = t.java_sql(
        "java_remove_orphan_files",
        f"CALL {t.name}.system.remove_orphan_files(table => '{name}', "
        f"older_than => {utc_sql(dt.datetime.now(dt.UTC) - dt.timedelta(days=1))})",
    )
    if removed is not None:
        reading = t.read("java_remove_orphan_files", EVOLVED_FILTERS)
        reading.facts["rows kept"] = (before, t.ours())
        reading.facts["removed"] = sorted(local_path(str(r[0])) for r in removed)
        reading.facts["orphan"] = str(orphan)
        reading.facts["orphan exists"] = orphan.exists()
        reading.facts["live files missing"] = sorted(f for f in live if not os.path.exists(f))


STEPS = [
    "create",
    "append",
    "append_again",
    "overwrite_partitions",
    "overwrite_rows",
    "dynamic_partition_overwrite",
    "delete_copy_on_write",
    "delete_merge_on_read",
    "upsert_copy_on_write",
    "upsert_merge_on_read",
    "schema_evolution",
    "append_after_schema_evolution",
    "partition_evolution",
    "sort_order",
    "properties",
    "our_rewrite_data_files",
    "our_rewrite_manifests",
    "our_expire_snapshots",
    "java_rewrite_data_files",
    "java_expire_snapshots",
    "java_remove_orphan_files",
]
XFAIL: dict[tuple[int, str], str] = {}
"""(format version, step) -> exactly what differs, for changes Java reads otherwise than we do."""


@pytest.fixture(scope="module")
def history(
    request: pytest.FixtureRequest, java_spark: JavaSpark, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shared]:
    version = int(request.param)
    shared = Shared(java_spark, tmp_path_factory.mktemp(f"java-reads-v{version}"), version)
    try:
        history_of(shared)
        yield shared
    finally:
        shared.catalog.close()


def _type_name(t: pa.DataType) -> str:
    """An Arrow type as its Iceberg type: string/binary widths are the reader's choice."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_timestamp(t) and t.tz is not None:
        return f"timestamp[{t.unit}, tz=UTC]" if t.tz in ("UTC", "+00:00", "Etc/UTC") else str(t)
    return str(t)


def _sort_key(row: tuple[Any, ...]) -> tuple[tuple[bool, Any], ...]:
    return tuple((v is not None, v if v is not None else 0) for v in row)


def typed_rows(table: pa.Table) -> tuple[list[tuple[str, str]], list[tuple[Any, ...]]]:
    """Column names and types, and the rows sorted: two answers are equal when these are."""
    columns = [(f.name, _type_name(f.type)) for f in table.schema]
    values = sorted((tuple(r.values()) for r in table.to_pylist()), key=_sort_key)
    return columns, values


def assert_same(theirs: pa.Table, ours: pa.Table, what: str) -> None:
    their_columns, their_rows = typed_rows(theirs)
    our_columns, our_rows = typed_rows(ours)
    assert their_columns == our_columns, f"{what}: Java's columns differ from ours"
    missing = [r for r in our_rows if r not in their_rows]
    extra = [r for r in their_rows if r not in our_rows]
    assert their_rows == our_rows, f"{what}: Java lacks {missing[:5]}, has extra {extra[:5]}"


VERSIONS = pytest.mark.parametrize("history", [2, 3], indirect=True, ids=["v2", "v3"])


@VERSIONS
@pytest.mark.parametrize("step", STEPS)
def test_java_reads_our_change(history: Shared, step: str, request: pytest.FixtureRequest) -> None:
    if (history.version, step) in XFAIL:
        request.applymarker(pytest.mark.xfail(strict=True, reason=XFAIL[history.version, step]))
    reading = history.readings[step]
    assert reading.java_error is None, f"Java refused our table after {step}: {reading.java_error}"
    for label, ours in reading.ours.items():
        assert_same(reading.theirs[label], ours, f"v{history.version} {step} WHERE {reading.where[label]}")
    if step != "create":  # each check reads rows, not an empty table
        assert reading.ours["q0"].num_rows > 0


@VERSIONS
def test_row_level_changes_wrote_deletes(history: Shared) -> None:
    """Merge-on-read is what Java read: position deletes on v2, deletion vectors on v3,
    equality deletes from the upsert on both. A copy-on-write upsert keeps the delete files of
    the files it leaves alone; on v3 the deletion vectors of the files it rewrote go with them."""
    mor = history.readings["delete_merge_on_read"].facts["delete files"]
    assert mor > 0
    after_cow = history.readings["upsert_copy_on_write"].facts["delete files"]
    assert after_cow == mor if history.version == 2 else after_cow <= mor
    assert history.readings["upsert_merge_on_read"].facts["delete files"] > 0


@VERSIONS
def test_java_sees_our_metadata(history: Shared) -> None:
    """Sort order, properties and snapshot history as Java reports them."""
    assert history.readings["sort_order"].facts["java sort-order"] == "id ASC NULLS FIRST, ts DESC NULLS LAST"
    props = history.readings["properties"].facts
    theirs, ours = props["java properties"], props["our properties"]
    assert {k: theirs.get(k) for k in ours} == ours
    assert "write.parquet.compression-codec" not in ours
    our_ids, java_ids = history.readings["our_expire_snapshots"].facts["snapshots"]
    assert sorted(our_ids) == sorted(java_ids)
    assert len(our_ids) == 2


@VERSIONS
def test_java_procedures_keep_our_rows(history: Shared) -> None:
    for step in ("java_rewrite_data_files", "java_expire_snapshots", "java_remove_orphan_files"):
        reading = history.readings[step]
        assert reading.java_error is None, f"{step}: {reading.java_error}"
        before, after = reading.facts["rows kept"]
        assert_same(after, before, f"v{history.version} our rows after {step}")
    assert history.readings["java_rewrite_data_files"].facts["delete files"] == 0
    our_ids, java_ids = history.readings["java_expire_snapshots"].facts["snapshots"]
    assert our_ids == java_ids
    assert len(our_ids) == 1


@VERSIONS
def test_java_remove_orphan_files_keeps_ours(history: Shared) -> None:
    facts = history.readings["java_remove_orphan_files"].facts
    assert facts["removed"] == [facts["orphan"]]
    assert not facts["orphan exists"]
    assert facts["live files missing"] == []
