"""Tables written by Apache Iceberg's Java implementation (through Spark SQL on the Java peer),
and a battery of filters phrased for both sides, for the tests that read them with aioiceberg.

Every table shares one column set (renamed where a scenario renames a column) and the same
generated rows, so one battery of filters applies to all of them. The rows hold NULLs in every
column at different strides, NaNs in the double column, and span several partitions and files.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from servers.java_spark import JavaSpark

COLUMNS = "id bigint, name string, cat string, d date, ts timestamp, amt decimal(10,2), score double"


def rows_sql(lo: int, hi: int, name: str = "name") -> str:
    """A SELECT of generated rows ``lo <= id < hi`` in the column order of ``COLUMNS``."""
    return f"""SELECT id,
      CASE WHEN id % 7 = 0 THEN NULL ELSE concat('n', CAST(id % 13 AS string)) END AS {name},
      CASE WHEN id % 11 = 0 THEN NULL
           ELSE element_at(array('a', 'b', 'c', 'd'), CAST(id % 4 AS int) + 1) END AS cat,
      CASE WHEN id % 17 = 0 THEN NULL ELSE date_add(DATE'2024-01-01', CAST(id % 20 AS int)) END AS d,
      CASE WHEN id % 19 = 0 THEN NULL
           ELSE TIMESTAMP'2024-01-01 00:00:00'
                + make_dt_interval(0, CAST(id % 60 AS int), CAST(id % 7 AS int), 0)
      END AS ts,
      CASE WHEN id % 23 = 0 THEN NULL
           ELSE CAST(CAST(id % 100 AS decimal(10,2)) / 4 AS decimal(10,2)) END AS amt,
      CASE WHEN id % 29 = 0 THEN CAST('NaN' AS double) WHEN id % 31 = 0 THEN NULL
           ELSE CAST(id % 10 AS double) / 4 END AS score
    FROM range({lo}, {hi})"""


@dataclass(frozen=True)
class Filter:
    """One predicate: ours (the row-filter syntax) and Spark's, with ``{name}`` for the string column."""

    ours: str | None
    spark: str | None

    def for_table(self, name: str) -> tuple[str | None, str | None]:
        return (
            None if self.ours is None else self.ours.format(name=name),
            None if self.spark is None else self.spark.format(name=name),
        )


def same(text: str) -> Filter:
    return Filter(text, text)


BATTERY: dict[str, Filter] = {
    "all": Filter(None, None),
    "id_eq": same("id = 17"),
    "id_lt": same("id < 40"),
    "id_range": same("id > 150 AND id <= 180"),
    "id_between": same("id BETWEEN 90 AND 110"),
    "id_in": same("id IN (1, 5, 99, 150, 233, 290)"),
    "id_not_in": same("id NOT IN (1, 2, 3, 250)"),
    "id_miss": same("id > 100000"),
    "not_id": same("NOT (id >= 20)"),
    "str_eq": same("{name} = 'n3'"),
    "str_ne": same("{name} != 'n3'"),
    "str_null": same("{name} IS NULL"),
    "str_not_null_and": same("{name} IS NOT NULL AND id < 30"),
    "str_like": same("{name} LIKE 'n1%'"),
    "str_not_like": same("{name} NOT LIKE 'n1%'"),
    "str_in": same("{name} IN ('n0', 'n12', 'zz')"),
    "str_lt": same("{name} < 'n2'"),
    "cat_or": same("cat = 'a' OR id > 280"),
    "cat_null": same("cat IS NULL"),
    "cat_not_in": same("cat NOT IN ('a', 'b')"),
    "date_eq": Filter("d = '2024-01-05'", "d = DATE'2024-01-05'"),
    "date_lt_or_null": Filter("d < '2024-01-03' OR d IS NULL", "d < DATE'2024-01-03' OR d IS NULL"),
    "date_and_cat": Filter(
        "cat IN ('b', 'c') AND d >= '2024-01-10'", "cat IN ('b', 'c') AND d >= DATE'2024-01-10'"
    ),
    "ts_ge": Filter("ts >= '2024-01-02T12:00:00+00:00'", "ts >= TIMESTAMP'2024-01-02 12:00:00'"),
    "ts_eq": Filter("ts = '2024-01-01T05:05:00+00:00'", "ts = TIMESTAMP'2024-01-01 05:05:00'"),
    "ts_lt_and": Filter(
        "ts < '2024-01-01T05:00:00+00:00' AND cat != 'a'",
        "ts < TIMESTAMP'2024-01-01 05:00:00' AND cat != 'a'",
    ),
    "ts_null": same("ts IS NULL"),
    "dec_gt": same("amt > 20.5"),
    "dec_eq": same("amt = 12.25"),
    "dec_le_or_null": same("amt <= 1.00 OR amt IS NULL"),
    "dbl_nan": Filter("score IS NAN", "isnan(score)"),
    "dbl_eq": same("score = 1.5"),
    "dbl_null": same("score IS NULL"),
    "not_or": same("NOT (cat = 'a' OR amt < 10)"),
    "nested": Filter(
        "(id < 50 OR id > 250) AND ({name} IS NULL OR cat = 'c') AND NOT (d = '2024-01-02')",
        "(id < 50 OR id > 250) AND ({name} IS NULL OR cat = 'c') AND NOT (d = DATE'2024-01-02')",
    ),
}


EVOLVED_FILTERS: dict[str, Filter] = {
    "qty_eq": same("qty = 3"),
    "qty_gt_int": same("qty > 3"),
    "qty_gt_long": same("qty > 20000000000"),
    "extra_null": same("extra IS NULL"),
    "extra_eq": same("extra = 'e1'"),
    "extra_or_qty": same("extra = 'e9' OR qty < 2"),
}


def filters_for(scenario: str) -> dict[str, tuple[str | None, str | None]]:
    """The battery for one scenario's table: (ours, Spark's) by key."""
    if scenario == "evolved":
        return {key: f.for_table("label") for key, f in {**BATTERY, **EVOLVED_FILTERS}.items()}
    return {key: f.for_table("name") for key, f in BATTERY.items()}


@dataclass(frozen=True)
class JavaTable:
    """A table Java wrote: its Spark name, its current metadata file and the delete files expected."""

    name: str  # catalog.db.table, as Spark names it
    metadata_file: Path
    deletes: str = ""  # "" (none), "PARQUET" (position delete files) or "PUFFIN" (deletion vectors)
    before_maintenance: int | None = None  # the snapshot Java's procedures started from


def current_metadata_file(warehouse: Path, table: str) -> Path:
    """The Hadoop catalog's current version of ``db.table``: the one ``version-hint.text`` names."""
    folder = warehouse.joinpath(*table.split("."), "metadata")
    version = int((folder / "version-hint.text").read_text().strip())
    found = [p for p in folder.iterdir() if re.fullmatch(rf"v{version}(\.gz)?\.metadata\.json", p.name)]
    assert len(found) == 1, f"no single metadata file for version {version} in {folder}"
    return found[0]


def _create(spark: JavaSpark, table: str, version: int, partitioned: str, props: dict[str, str]) -> None:
    properties = {"format-version": str(version), **props}
    tblprops = ", ".join(f"'{k}'='{v}'" for k, v in properties.items())
    spark.sql(f"CREATE TABLE {table} ({COLUMNS}) USING iceberg {partitioned} TBLPROPERTIES ({tblprops})")


def _insert(spark: JavaSpark, table: str, lo: int, hi: int) -> None:
    spark.sql(f"INSERT INTO {table} {rows_sql(lo, hi)}")


def _mutate(spark: JavaSpark, table: str) -> None:
    """DELETE, UPDATE and MERGE INTO, as the table's write modes say."""
    spark.sql(f"DELETE FROM {table} WHERE id % 10 = 3")
    spark.sql(f"UPDATE {table} SET name = 'upd', amt = amt + 1 WHERE id % 10 = 5")
    spark.sql(
        f"""MERGE INTO {table} t USING ({rows_sql(280, 320)}) s ON t.id = s.id
        WHEN MATCHED AND s.id % 2 = 0 THEN UPDATE SET t.name = 'merged', t.score = 9.5
        WHEN MATCHED THEN DELETE
        WHEN NOT MATCHED THEN INSERT *"""
    )


def build_partitioned(spark: JavaSpark, catalog: str, warehouse: Path, version: int) -> JavaTable:
    """identity and days partitions on v2; on v3 bucket and truncate partitions, a sort order,
    object-storage file locations and gzip metadata files. Two appends each."""
    table = f"db.parts_v{version}"
    full = f"{catalog}.{table}"
    if version == 2:
        _create(spark, full, 2, "PARTITIONED BY (cat, days(ts))", {})
    else:
        props = {"write.object-storage.enabled": "true", "write.metadata.compression-codec": "gzip"}
        _create(spark, full, 3, "PARTITIONED BY (bucket(8, id), truncate(2, name))", props)
        spark.sql(f"ALTER TABLE {full} WRITE ORDERED BY id DESC, name")
    for lo in (0, 150):
        _insert(spark, full, lo, lo + 150)
    found = current_metadata_file(warehouse, table)
    assert (version == 3) == found.name.endswith(".gz.metadata.json"), found
    return JavaTable(full, found)


def build_copy_on_write(spark: JavaSpark, catalog: str, warehouse: Path) -> JavaTable:
    """UPDATE / DELETE / MERGE INTO in copy-on-write, on v2."""
    table = "db.cow_v2"
    full = f"{catalog}.{table}"
    props = {f"write.{op}.mode": "copy-on-write" for op in ("delete", "update", "merge")}
    _create(spark, full, 2, "PARTITIONED BY (cat)", props)
    _insert(spark, full, 0, 150)
    _insert(spark, full, 150, 300)
    _mutate(spark, full)
    return JavaTable(full, current_metadata_file(warehouse, table))


def build_evolved(spark: JavaSpark, catalog: str, warehouse: Path) -> JavaTable:
    """Columns added, dropped, renamed and widened (int to long); partition fields added and dropped."""
    table = "db.evolved"
    full = f"{catalog}.{table}"
    spark.sql(
        f"CREATE TABLE {full} ({COLUMNS}, qty int, old string) USING iceberg PARTITIONED BY (cat) "
        "TBLPROPERTIES ('format-version'='2')"
    )
    spark.sql(
        f"INSERT INTO {full} SELECT *, CAST(id % 9 AS int) AS qty, 'x' AS old FROM ({rows_sql(0, 150)})"
    )
    spark.sql(f"ALTER TABLE {full} ADD COLUMN extra string")
    spark.sql(f"ALTER TABLE {full} DROP COLUMN old")
    spark.sql(f"ALTER TABLE {full} RENAME COLUMN name TO label")
    spark.sql(f"ALTER TABLE {full} ALTER COLUMN qty TYPE bigint")
    spark.sql(f"ALTER TABLE {full} ADD PARTITION FIELD days(ts)")
    spark.sql(f"ALTER TABLE {full} DROP PARTITION FIELD cat")
    spark.sql(
        f"INSERT INTO {full} SELECT *, id * 100000000 AS qty, "
        f"CASE WHEN id % 3 = 0 THEN NULL ELSE concat('e', CAST(id % 3 AS string)) END AS extra "
        f"FROM ({rows_sql(150, 300, name='label')})"
    )
    spark.sql(f"ALTER TABLE {full} ADD PARTITION FIELD bucket(4, id)")
    spark.sql(
        f"INSERT INTO {full} SELECT *, id AS qty, 'e9' AS extra FROM ({rows_sql(300, 330, name='label')})"
    )
    return JavaTable(full, current_metadata_file(warehouse, table))


def _current_snapshot(metadata_file: Path) -> int:
    raw = metadata_file.read_bytes()
    snapshot_id: int = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)[
        "current-snapshot-id"
    ]
    return snapshot_id


def build_maintained(spark: JavaSpark, catalog: str, warehouse: Path, version: int) -> JavaTable:
    """Merge-on-read DELETE, UPDATE and MERGE INTO (position deletes on v2, deletion vectors on
    v3), then Java's rewrite_data_files, rewrite_manifests and expire_snapshots; the snapshot
    before the procedures stays (``retain_last``), so both states can be read."""
    table = f"db.maintained_v{version}"
    full = f"{catalog}.{table}"
    props = {f"write.{op}.mode": "merge-on-read" for op in ("delete", "update", "merge")}
    _create(spark, full, version, "PARTITIONED BY (cat)", props)
    for lo in (0, 150):
        _insert(spark, full, lo, lo + 150)
    _mutate(spark, full)
    before = _current_snapshot(current_metadata_file(warehouse, table))
    spark.sql(
        f"CALL {catalog}.system.rewrite_data_files(table => '{table}', where => 'id >= 150', "
        "options => map('min-input-files', '2'))"
    )
    spark.sql(f"CALL {catalog}.system.rewrite_manifests(table => '{table}')")
    spark.sql(
        f"CALL {catalog}.system.expire_snapshots(table => '{table}', "
        "older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 3)"
    )
    deletes = "PARQUET" if version == 2 else "PUFFIN"
    found = current_metadata_file(warehouse, table)
    return JavaTable(full, found, deletes=deletes, before_maintenance=before)


BUILDERS: dict[str, Callable[[JavaSpark, str, Path], JavaTable]] = {
    "parts_v2": lambda s, c, w: build_partitioned(s, c, w, 2),
    "parts_v3": lambda s, c, w: build_partitioned(s, c, w, 3),
    "cow_v2": build_copy_on_write,
    "evolved": build_evolved,
    "maintained_v2": lambda s, c, w: build_maintained(s, c, w, 2),
    "maintained_v3": lambda s, c, w: build_maintained(s, c, w, 3),
}

# scenario -> (the table it reads, whether at the snapshot before Java's procedures)
SCENARIOS: dict[str, tuple[str, bool]] = {
    **{name: (name, False) for name in BUILDERS},
    "mor_v2": ("maintained_v2", True),
    "mor_v3": ("maintained_v3", True),
}
