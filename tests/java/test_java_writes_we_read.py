"""Java writes, we read: tables made by Apache Iceberg's Java implementation (Spark SQL on the Java
peer) read with aioiceberg, each filter's rows compared with Spark's own answer, typed through
Arrow, and our plan checked to keep every data file Spark reads rows from.

The tables live in Java's Hadoop catalog on a tmp directory; we open each by the metadata file
its ``version-hint.text`` names (a read-only load), so the version we read is exactly the one
Spark answers from, with no catalog of ours in between (catalog interop is tested elsewhere).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from java_tables import BUILDERS, SCENARIOS, JavaTable, filters_for
from servers.java_spark import JavaSpark

from aioiceberg import sync

pytestmark = pytest.mark.xdist_group("java")

# (scenario, filter key) -> why our answer differs from Java's
KNOWN_DIFFERENCES: dict[tuple[str, str], str] = {}
# filters whose answer is empty on purpose (pruning everything must still agree)
EMPTY_ANSWERS = {"id_miss"}


@dataclass
class Written:
    """One scenario: the table Java wrote, ours open on it, the snapshot read, Spark's answers."""

    java: JavaTable
    ours: sync.Table
    snapshot_id: int | None
    source: str  # the table as a Spark query names it, at that snapshot
    answers: pa.Table | None = None


class Tables:
    """Each table built by Java on first use and kept for the module."""

    def __init__(self, spark: JavaSpark, catalog: str, warehouse: Path) -> None:
        self.spark, self.catalog, self.warehouse = spark, catalog, warehouse
        self._built: dict[str, tuple[JavaTable, sync.Table]] = {}
        self._scenarios: dict[str, Written] = {}

    def table(self, name: str) -> tuple[JavaTable, sync.Table]:
        if name not in self._built:
            java = BUILDERS[name](self.spark, self.catalog, self.warehouse)
            self._built[name] = (java, sync.load_table(str(java.metadata_file)))
        return self._built[name]

    def get(self, scenario: str) -> Written:
        if scenario not in self._scenarios:
            name, before = SCENARIOS[scenario]
            java, ours = self.table(name)
            snapshot_id = java.before_maintenance if before else None
            source = java.name if snapshot_id is None else f"{java.name} VERSION AS OF {snapshot_id}"
            self._scenarios[scenario] = Written(java, ours, snapshot_id, source)
        return self._scenarios[scenario]

    def spark_answer(self, scenario: str, key: str) -> tuple[pa.Table, set[str]]:
        """Spark's rows where the filter is TRUE, and the data files they come from.

        One query per scenario evaluates every filter of the battery as a column (a WHERE keeps
        exactly the rows whose predicate is TRUE; so does selecting on that column).
        """
        written = self.get(scenario)
        filters = filters_for(scenario)
        keys = [k for k, (_, spark) in filters.items() if spark is not None]
        if written.answers is None:
            marks = "".join(f", ({filters[k][1]}) AS __m_{k}" for k in keys)
            written.answers = self.spark.arrow(f"SELECT *, _file AS __file{marks} FROM {written.source}")
        answers = written.answers
        if key in keys:
            answers = answers.filter(pc.equal(answers.column(f"__m_{key}"), True))
        files = {_local(str(p)) for p in answers.column("__file").to_pylist()}
        return answers.drop_columns(["__file", *(f"__m_{k}" for k in keys)]), files


@pytest.fixture(scope="module")
def tables(java_spark: JavaSpark, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tables]:
    warehouse = tmp_path_factory.mktemp("java-writes")
    catalog = java_spark.catalog(f"jw_{uuid.uuid4().hex[:8]}", type="hadoop", warehouse=f"file://{warehouse}")
    yield Tables(java_spark, catalog, warehouse)


def _local(path: str) -> str:
    """One spelling of a local file for both sides (``file:/x``, ``file:///x`` and ``/x``)."""
    if path.startswith("file:"):
        path = path[len("file:") :]
        if path.startswith("//"):
            path = path[2:]
    return path


def _type(t: pa.DataType) -> str:
    """A column's type up to representation: string vs large_string, the spelling of UTC."""
    if pa.types.is_large_string(t):
        t = pa.string()
    elif pa.types.is_large_binary(t):
        t = pa.binary()
    elif pa.types.is_timestamp(t) and t.tz in ("UTC", "+00:00", "Etc/UTC"):
        t = pa.timestamp(t.unit, "UTC")
    return str(t)


def _rows(table: pa.Table) -> list[tuple[Any, ...]]:
    """Rows in id order, NaN spelled so that it equals itself."""
    ordered = table.sort_by("id").to_pylist()
    return [
        tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in row.values()) for row in ordered
    ]


def _cases() -> list[Any]:
    cases = []
    for scenario in SCENARIOS:
        for key in filters_for(scenario):
            reason = KNOWN_DIFFERENCES.get((scenario, key))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            cases.append(pytest.param(scenario, key, id=f"{scenario}-{key}", marks=marks))
    return cases


@pytest.mark.parametrize(("scenario", "key"), _cases())
def test_rows_and_planned_files_match_spark(tables: Tables, scenario: str, key: str) -> None:
    written = tables.get(scenario)
    ours_filter = filters_for(scenario)[key][0]
    theirs, spark_files = tables.spark_answer(scenario, key)

    scan = written.ours.scan(row_filter=ours_filter, snapshot_id=written.snapshot_id)
    ours = scan.to_arrow()
    assert [(f.name, _type(f.type)) for f in ours.schema] == [(f.name, _type(f.type)) for f in theirs.schema]
    ours_rows, their_rows = _rows(ours.cast(theirs.schema)), _rows(theirs)
    if ours_rows != their_rows:
        ours_ids, their_ids = {r[0] for r in ours_rows}, {r[0] for r in their_rows}
        extra = sorted(ours_ids - their_ids)[:10]
        missing = sorted(their_ids - ours_ids)[:10]
        differ = [(o, t) for o, t in zip(ours_rows, their_rows, strict=False) if o != t][:3]
        pytest.fail(
            f"{len(ours_rows)} rows ours vs {len(their_rows)} Spark's for {ours_filter!r}: "
            f"only ours {extra}, only Spark's {missing}, first differing {differ}"
        )
    assert their_rows or key in EMPTY_ANSWERS, (
        f"Spark's answer to {ours_filter!r} is empty: the case tests nothing"
    )

    planned = {_local(task.file.file_path) for task in scan.plan_files()}
    assert spark_files <= planned, (
        f"our plan for {ours_filter!r} drops files Spark reads: {spark_files - planned}"
    )


@pytest.mark.parametrize("scenario", list(BUILDERS))
def test_table_shape_matches_spark(tables: Tables, scenario: str) -> None:
    """Snapshots, history, live data files and the kind of delete files, as Java sees them."""
    written = tables.get(scenario)
    name, ours = written.java.name, written.ours
    [[snapshots]] = tables.spark.sql(f"SELECT count(*) FROM {name}.snapshots")
    [[history]] = tables.spark.sql(f"SELECT count(*) FROM {name}.history")
    [[current]] = tables.spark.sql(
        f"SELECT snapshot_id FROM {name}.history WHERE is_current_ancestor "
        "ORDER BY made_current_at DESC LIMIT 1"
    )
    assert len(ours.snapshots()) == snapshots
    assert len(ours.history()) == history
    snapshot = ours.current_snapshot()
    assert snapshot is not None and snapshot.snapshot_id == current

    data_files = {_local(r[0]) for r in tables.spark.sql(f"SELECT file_path FROM {name}.data_files")}
    delete_files = tables.spark.sql(f"SELECT file_path, file_format FROM {name}.delete_files")
    tasks = list(ours.scan().plan_files())
    assert {_local(t.file.file_path) for t in tasks} == data_files
    our_deletes = {(_local(d.file_path), d.file_format.value) for t in tasks for d in t.delete_files}
    # a delete file whose data files are all gone may stay live in Java's metadata; a plan drops it
    assert our_deletes <= {(_local(p), f) for p, f in delete_files}
    expected = {written.java.deletes} if written.java.deletes else set()
    assert {f for _, f in our_deletes} == expected
    if written.java.before_maintenance is not None:
        before = ours.scan(snapshot_id=written.java.before_maintenance).plan_files()
        assert {d.file_format.value for t in before for d in t.delete_files} == expected
