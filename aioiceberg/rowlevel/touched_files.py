"""Which live data files a delete filter or a set of partitions touches, and how.

Per file, proof comes from the cheapest source first: the strict partition projection or
the strict metrics evaluator proves every row matches (drop the file whole); the
inclusive ones prove no row does (leave it alone); otherwise the file matches partly and
its rows must be read. Filters follow SQL: a row is deleted only when the filter is true,
never when it is null (``sql_filter``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aioiceberg.commit.overwrite import RemovedFile
from aioiceberg.expressions.binding import bind_row_filter
from aioiceberg.expressions.evaluators import (
    InclusiveMetricsEvaluator,
    ManifestEvaluator,
    PartitionEvaluator,
    StrictMetricsEvaluator,
)
from aioiceberg.expressions.lineage import LineageEvaluator, filter_schema
from aioiceberg.expressions.partition_projection import strict_projection
from aioiceberg.expressions.rows import compile_row_filter
from aioiceberg.expressions.tree import (
    AlwaysFalse,
    AlwaysTrue,
    Expression,
)
from aioiceberg.io.base import FileIO
from aioiceberg.scan.delete_index import DeleteIndex
from aioiceberg.spec.manifest import (
    DataFile,
    DataFileContent,
    ManifestContent,
    ManifestEntry,
    read_manifest,
    snapshot_manifests,
)
from aioiceberg.spec.metadata import Snapshot, TableMetadata
from aioiceberg.spec.name_mapping import schema_as_read, unmapped_field_ids
from aioiceberg.spec.row_lineage import LINEAGE_IDS
from aioiceberg.spec.schema import Schema

__all__ = [
    "PartialFile",
    "Selection",
    "delete_schema",
    "select_by_filter",
    "select_by_partitions",
    "sql_filter",
]

PartitionKey = tuple[int, tuple[Any, ...]]


def sql_filter(schema: Schema, expr: Expression | str, case_sensitive: bool = True) -> Expression:
    """Bind ``expr`` and make it true exactly where SQL says the filter is true
    (``bind_row_filter``): ``id != 3`` does not delete a null ``id``."""
    return bind_row_filter(schema, expr, case_sensitive)


def delete_schema(metadata: TableMetadata, expr: Expression | str, case_sensitive: bool = True) -> Schema:
    """The schema a delete's filter binds to, as a scan's does (``Planner``): the table's
    schema as read (a column that no field id and no name mapping resolves reads as NULL:
    ``schema_as_read``), with the v3 row lineage columns the filter names appended."""
    schema = schema_as_read(metadata.schema(), metadata.properties)
    return filter_schema(schema, expr, case_sensitive, metadata.format_version, metadata.location)


@dataclass(frozen=True, slots=True)
class PartialFile:
    """A data file some (not all) of whose rows match, with the delete files that apply."""

    removed: RemovedFile
    deletes: tuple[DataFile, ...]

    @property
    def file(self) -> DataFile:
        return self.removed.file


@dataclass
class Selection:
    """The starting snapshot, its manifests, and the files to drop whole or to read."""

    snapshot_id: int | None
    manifests: tuple[str, ...] = ()
    drop: list[RemovedFile] = field(default_factory=list)
    partial: list[PartialFile] = field(default_factory=list)
    delete_entries: dict[tuple[str, int | None], RemovedFile] = field(default_factory=dict)
    """Live position delete files (and DVs) seen for ``partial``, by (path, content offset):
    where their entries are, so a change can replace them."""

    @property
    def is_empty(self) -> bool:
        return not (self.drop or self.partial)


# file -> True (every row matches), False (no row does), None (some may)
_Classify = Callable[[ManifestEntry], bool | None]


async def _walk(
    io: FileIO,
    snapshot: Snapshot | None,
    manifest_may_match: Callable[[Any], bool],
    classify: _Classify,
) -> Selection:
    if snapshot is None:
        return Selection(None)
    manifests = await snapshot_manifests(io, snapshot)
    selection = Selection(snapshot.snapshot_id, tuple(m.manifest_path for m in manifests))
    partial: list[RemovedFile] = []
    delete_manifests = []
    for mf in manifests:
        if mf.content == ManifestContent.DELETES:
            delete_manifests.append(mf)
            continue
        if not (mf.has_added_files() or mf.has_existing_files()) or not manifest_may_match(mf):
            continue
        manifest = read_manifest(await io.read(mf.manifest_path), mf, discard_deleted=True)
        for entry in manifest.entries:
            verdict = classify(entry)
            if verdict is True:
                selection.drop.append(RemovedFile(entry, mf.manifest_path))
            elif verdict is None:
                partial.append(RemovedFile(entry, mf.manifest_path))
    if partial:
        index = DeleteIndex()
        for mf in delete_manifests:
            if not (mf.has_added_files() or mf.has_existing_files()):
                continue
            for entry in read_manifest(await io.read(mf.manifest_path), mf, discard_deleted=True).entries:
                index.add(entry)  # an empty partition tuple marks global deletes
                f = entry.data_file
                if f.content == DataFileContent.POSITION_DELETES:
                    selection.delete_entries[(f.file_path, f.content_offset)] = RemovedFile(
                        entry, mf.manifest_path
                    )
        for r in partial:
            selection.partial.append(PartialFile(r, index.for_data_file(r.entry.sequence_number, r.file)))
    return selection


async def select_by_filter(
    io: FileIO,
    metadata: TableMetadata,
    snapshot: Snapshot | None,
    expr: Expression,
    case_sensitive: bool = True,
) -> Selection:
    """Classify the snapshot's live data files against ``expr`` (from ``sql_filter``)."""
    if isinstance(expr, AlwaysFalse):
        return await _walk(io, None, lambda mf: False, lambda e: False)
    schema = schema_as_read(metadata.schema(), metadata.properties)
    specs = metadata.specs_by_id()
    manifest_evals: dict[int, ManifestEvaluator] = {}
    partition_evals: dict[int, tuple[PartitionEvaluator, Callable[[Any], bool]]] = {}
    untrusted = unmapped_field_ids(schema, metadata.properties)
    # the row lineage columns' stats leave out the rows whose values are derived
    lineage = LineageEvaluator(expr) if LineageEvaluator.wanted(expr) else None
    if lineage is not None:
        untrusted |= LINEAGE_IDS
    inclusive = InclusiveMetricsEvaluator(
        schema, expr, case_sensitive, include_empty_files=True, untrusted=untrusted
    )
    strict = StrictMetricsEvaluator(schema, expr, case_sensitive, untrusted=untrusted)

    def manifest_may_match(mf: Any) -> bool:
        if isinstance(expr, AlwaysTrue):
            return True
        spec = specs.get(mf.partition_spec_id)
        if spec is None:
            return True
        ev = manifest_evals.get(spec.spec_id)
        if ev is None:
            ev = manifest_evals[spec.spec_id] = ManifestEvaluator(schema, spec, expr, case_sensitive)
        return ev.eval(mf.partitions)

    def classify(entry: ManifestEntry) -> bool | None:
        if isinstance(expr, AlwaysTrue):
            return True
        f = entry.data_file
        spec = specs.get(f.spec_id)
        if spec is not None:
            evs = partition_evals.get(f.spec_id)
            if evs is None:
                evs = partition_evals[f.spec_id] = (
                    PartitionEvaluator(schema, spec, expr, case_sensitive),
                    compile_row_filter(strict_projection(schema, spec, expr, case_sensitive)),
                )
            if not evs[0].eval(f.partition):
                return False
            if evs[1](f.partition):
                return True
        if lineage is not None and not lineage.eval(f, entry.sequence_number):
            return False
        if not inclusive.eval(f):
            return False
        if strict.eval(f):
            return True
        return None

    return await _walk(io, snapshot, manifest_may_match, classify)


async def select_by_partitions(
    io: FileIO, snapshot: Snapshot | None, partitions: frozenset[PartitionKey]
) -> Selection:
    """Every live data file in one of ``partitions`` (spec id, partition tuple) is dropped."""
    spec_ids = {spec_id for spec_id, _ in partitions}

    def classify(entry: ManifestEntry) -> bool | None:
        f = entry.data_file
        return True if (f.spec_id, f.partition) in partitions else False

    return await _walk(io, snapshot, lambda mf: mf.partition_spec_id in spec_ids, classify)
