"""v3 row lineage: the ``_row_id`` and ``_last_updated_sequence_number`` metadata columns.

Their field ids are reserved (Java's ``MetadataColumns``: ``Integer.MAX_VALUE - 107`` and
``- 108``); a data file may store them, and where it stores none (or a null) a reader
derives them from the file's ``first_row_id`` and data sequence number. Writers that move
rows to new files (compaction, copy-on-write) store them, so a row keeps its id.
"""

from __future__ import annotations

from collections.abc import Iterable

from aioiceberg.spec.schema import Schema
from aioiceberg.spec.types import LongType, NestedField

__all__ = [
    "LAST_UPDATED_SEQUENCE_NUMBER",
    "LAST_UPDATED_SEQUENCE_NUMBER_ID",
    "LINEAGE_FIELDS",
    "LINEAGE_IDS",
    "ROW_ID",
    "ROW_ID_ID",
    "lineage_field",
    "with_lineage",
]

ROW_ID_ID = 2147483540
LAST_UPDATED_SEQUENCE_NUMBER_ID = 2147483539

ROW_ID = NestedField(ROW_ID_ID, "_row_id", LongType(), required=False)
LAST_UPDATED_SEQUENCE_NUMBER = NestedField(
    LAST_UPDATED_SEQUENCE_NUMBER_ID, "_last_updated_sequence_number", LongType(), required=False
)
LINEAGE_FIELDS = (ROW_ID, LAST_UPDATED_SEQUENCE_NUMBER)
LINEAGE_IDS = frozenset(f.field_id for f in LINEAGE_FIELDS)


def lineage_field(name: str, case_sensitive: bool = True) -> NestedField | None:
    """The lineage column named ``name``, or None (a table column shadows it: checked by the caller)."""
    for f in LINEAGE_FIELDS:
        if f.name == name or (not case_sensitive and f.name.lower() == name.lower()):
            return f
    return None


def with_lineage(schema: Schema, fields: Iterable[NestedField]) -> Schema:
    """``schema`` with the lineage ``fields`` it lacks appended (after the table's columns)."""
    have = {f.field_id for f in schema.fields}
    extra = [f for f in fields if f.field_id not in have]
    if not extra:
        return schema
    return Schema(
        *schema.fields, *extra, schema_id=schema.schema_id, identifier_field_ids=schema.identifier_field_ids
    )
