"""Which commit point a table has: recorded in its metadata, so every load path finds it.

A table committed through DynamoDB also carries ``v{N}.metadata.json`` copies for readers.
A writer that found the table by location and committed ``v{N+1}`` with a conditional
write would go past DynamoDB, and the next DynamoDB commit would fork the history. So
each protocol writes its name into the table property ``aioiceberg.commit-point`` at
creation (and on any commit that finds it missing), refuses to commit to a table that
names another, and a load by location builds the protocol the table names.

Only what identifies the commit point is recorded (the DynamoDB table and mode), never
endpoints or credentials: those belong to the process that opens the table.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

from aioiceberg.errors import ValidationError
from aioiceberg.spec.metadata import TableMetadata

__all__ = [
    "COMMIT_POINT_PROPERTY",
    "CONDITIONAL",
    "CommitPoint",
    "commit_point_of",
]

COMMIT_POINT_PROPERTY = "aioiceberg.commit-point"
CONDITIONAL = "conditional-writes"

# The DynamoDB protocol names its metadata files {N:05d}-{uuid hex}.metadata.json; tables it
# committed before the property existed are recognised by them in the metadata log.
_DYNAMODB_FILE = re.compile(r"/\d{5,}-[0-9a-f]{32}\.metadata\.json$")


@dataclass(frozen=True, slots=True)
class CommitPoint:
    """``kind`` is "conditional-writes" or "dynamodb"; ``table`` is None when unknown."""

    kind: str
    table: str | None = None
    mode: str = "commit"

    @classmethod
    def parse(cls, text: str) -> CommitPoint:
        """The property's value, or a ``lock=`` URI (whose connection options are ignored)."""
        if text == CONDITIONAL:
            return cls(CONDITIONAL)
        if text.startswith("dynamodb://"):
            parts = urlsplit(text)
            table = parts.netloc or parts.path.strip("/")
            mode = parse_qs(parts.query).get("mode", ["commit"])[-1]
            if not table or mode not in ("commit", "lease"):
                raise ValidationError(f"commit point {text!r}: expected dynamodb://TABLE[?mode=lease]")
            return cls("dynamodb", table, mode)
        raise ValidationError(
            f"unknown commit point {text!r}: expected {CONDITIONAL!r} or 'dynamodb://TABLE[?mode=lease]'"
        )

    def __str__(self) -> str:
        if self.kind != "dynamodb":
            return self.kind
        lease = "?mode=lease" if self.mode == "lease" else ""
        return f"dynamodb://{self.table or 'TABLE'}{lease}"

    def same_as(self, other: CommitPoint) -> bool:
        if self.kind != other.kind or self.mode != other.mode:
            return False
        return self.table is None or other.table is None or self.table == other.table

    def how_to_write(self) -> str:
        """The option that makes a load commit through this point."""
        if self.kind == CONDITIONAL:
            return "load it by its location, or through a catalog without a lock"
        table = self.table or "<the DynamoDB table it was committed through>"
        lease = "?mode=lease" if self.mode == "lease" else ""
        return (
            f"pass lock='dynamodb://{table}{lease}' (to aioiceberg.connect or load_table, "
            "--lock on the command line, the 'lock' option in Spark), with the DynamoDB endpoint "
            "and region of that table in the standard AWS configuration or the dynamodb.* storage options"
        )


def commit_point_of(metadata: TableMetadata) -> CommitPoint | None:
    """The commit point ``metadata`` records; None for a table that names none (another
    engine's, or ours before the property existed, committed by conditional writes)."""
    text = metadata.properties.get(COMMIT_POINT_PROPERTY)
    if text is not None:
        return CommitPoint.parse(text)
    if any(_DYNAMODB_FILE.search(entry.metadata_file) for entry in metadata.metadata_log):
        return CommitPoint("dynamodb")
    return None
