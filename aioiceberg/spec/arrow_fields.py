"""What an Arrow field carries for Iceberg: the field-id and doc metadata keys, the child names.

Below both the schema conversion (``arrow.py``) and name mappings (``name_mapping.py``),
which each read field ids off Arrow fields.
"""

from __future__ import annotations

import pyarrow as pa

from aioiceberg.errors import ValidationError

__all__ = [
    "DOC_KEY",
    "FIELD_ID_KEY",
    "LIST_ELEMENT_NAME",
    "MAP_KEY_NAME",
    "MAP_VALUE_NAME",
    "ORC_FIELD_ID_KEY",
    "field_id_of",
]

FIELD_ID_KEY = b"PARQUET:field_id"
"""Arrow field-metadata key that pyarrow maps to and from Parquet field ids."""
ORC_FIELD_ID_KEY = b"iceberg.id"
"""Key pyarrow's ORC reader leaves Iceberg ids under; accepted on read, as PyIceberg does."""
DOC_KEY = b"doc"
"""Field-metadata key for column docs (PyIceberg's key)."""

LIST_ELEMENT_NAME = "element"
MAP_KEY_NAME = "key"
MAP_VALUE_NAME = "value"


def field_id_of(field: pa.Field) -> int | None:
    """The Iceberg field id in an Arrow field's metadata, or None if it has none."""
    metadata = field.metadata
    if not metadata:
        return None
    raw = metadata.get(FIELD_ID_KEY)
    if raw is None:
        raw = metadata.get(ORC_FIELD_ID_KEY)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValidationError(f"field {field.name!r} has a non-integer field id {raw!r}") from None
