"""Manifests and manifest lists: domain objects and their Avro encodings (v1-v3)."""

from aioiceberg.spec.manifest.avro_schemas import (
    manifest_entry_schema,
    manifest_list_schema,
    partition_record_schema,
)
from aioiceberg.spec.manifest.data_file import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.manifest.decoded_manifest import Manifest, ManifestMetadata
from aioiceberg.spec.manifest.entry import ManifestEntry, ManifestEntryStatus
from aioiceberg.spec.manifest.fastavro_reader import (
    inline_manifest_file,
    iter_manifest_entries,
    read_manifest,
    read_manifest_list,
    read_manifest_metadata,
)
from aioiceberg.spec.manifest.manifest_file import ManifestContent, ManifestFile, PartitionFieldSummary
from aioiceberg.spec.manifest.snapshot import added_files, snapshot_manifests
from aioiceberg.spec.manifest.writer import (
    assign_first_row_ids,
    partition_summaries,
    write_manifest,
    write_manifest_list,
)

__all__ = [
    "DataFile",
    "DataFileContent",
    "FileFormat",
    "Manifest",
    "ManifestContent",
    "ManifestEntry",
    "ManifestEntryStatus",
    "ManifestFile",
    "ManifestMetadata",
    "PartitionFieldSummary",
    "added_files",
    "assign_first_row_ids",
    "inline_manifest_file",
    "iter_manifest_entries",
    "manifest_entry_schema",
    "manifest_list_schema",
    "partition_record_schema",
    "partition_summaries",
    "read_manifest",
    "read_manifest_list",
    "read_manifest_metadata",
    "snapshot_manifests",
    "write_manifest",
    "write_manifest_list",
]
