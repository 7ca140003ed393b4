"""A decoded manifest: its key-value metadata and its entries."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aioiceberg.errors import InvalidMetadataError
from aioiceberg.spec.manifest.entry import ManifestEntry
from aioiceberg.spec.manifest.manifest_file import ManifestContent
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema_json import partition_fields_from_json, schema_from_json

if TYPE_CHECKING:
    from aioiceberg.spec.schema import Schema

__all__ = ["Manifest", "ManifestMetadata"]


@dataclass(frozen=True)
class ManifestMetadata:
    """The manifest's Avro key-value metadata.

    The schema and partition spec stay JSON text until asked for: planning reads many
    manifests and rarely needs the table schema a manifest was written with.
    """

    format_version: int
    content: ManifestContent
    schema_id: int | None = None
    partition_spec_id: int | None = None
    schema_json: str | None = None
    partition_spec_json: str | None = None
    properties: dict[str, str] = field(default_factory=dict)
    location: str | None = None

    def schema(self) -> Schema:
        """The table schema stored with the manifest (``schema`` key)."""
        if self.schema_json is None:
            raise InvalidMetadataError("manifest has no 'schema' metadata", location=self.location)
        return schema_from_json(self._load(self.schema_json, "schema"))

    def partition_spec(self) -> PartitionSpec:
        """The partition spec the manifest was written for (``partition-spec`` fields + id)."""

        if self.partition_spec_json is None:
            raise InvalidMetadataError("manifest has no 'partition-spec' metadata", location=self.location)
        obj = self._load(self.partition_spec_json, "partition-spec")
        # Some writers store the whole spec object rather than only its fields.
        if isinstance(obj, dict):
            spec_id = obj.get("spec-id", self.partition_spec_id or 0)
            obj = obj.get("fields", [])
        else:
            spec_id = self.partition_spec_id or 0
        return PartitionSpec(spec_id, partition_fields_from_json(obj, "manifest partition spec"))

    def _load(self, text: str, key: str) -> Any:
        try:
            return json.loads(text)
        except ValueError as e:
            raise InvalidMetadataError(
                f"manifest metadata {key!r} is not JSON: {e}", location=self.location
            ) from e


@dataclass(frozen=True)
class Manifest:
    metadata: ManifestMetadata
    entries: list[ManifestEntry]

    def live_entries(self) -> list[ManifestEntry]:
        return [e for e in self.entries if e.is_live]
