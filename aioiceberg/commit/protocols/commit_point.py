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
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlsplit

from aioiceberg.errors import InvalidPropertyError, ValidationError
from aioiceberg.spec.metadata import TableMetadata

__all__ = [
    "CATALOG",
    "COMMIT_POINT_PROPERTY",
    "CONDITIONAL",
    "DYNAMODB_URI_OPTIONS",
    "CommitPoint",
    "DynamoDbUri",
    "commit_point_of",
    "parse_boolean",
    "uri_options",
]

COMMIT_POINT_PROPERTY = "aioiceberg.commit-point"
CONDITIONAL = "conditional-writes"
CATALOG = "catalog"
"""A catalog's pointer (Glue, S3 Tables, SQL, REST): recorded as ``catalog:<kind>``."""

# The DynamoDB protocol names its metadata files {N:05d}-{uuid hex}.metadata.json; tables it
# committed before the property existed are recognised by them in the metadata log.
_DYNAMODB_FILE = re.compile(r"/\d{5,}-[0-9a-f]{32}\.metadata\.json$")


DYNAMODB_URI_OPTIONS = {
    "mode": "'commit' or 'lease'",
    "lease_ms": "a positive integer (milliseconds)",
    "create_table": "true or false",
    "endpoint": "the DynamoDB endpoint URL",
    "region": "an AWS region name",
}
"""The options a ``dynamodb://TABLE?...`` URI may carry, with what each allows."""


def uri_options(
    query: str, allowed: Mapping[str, str], shown: str, *, secret: frozenset[str] = frozenset()
) -> dict[str, str]:
    """The ``?key=value`` options of a catalog or lock URI, each known, given once and not
    empty; ``allowed`` maps each to what it takes. A typo must be an error naming it, never
    quietly the default. Values of ``secret`` options are not repeated in errors."""
    options: dict[str, str] = {}
    for key, value in parse_qsl(query, keep_blank_values=True):
        named = "***" if key in secret else value
        if key not in allowed:
            raise InvalidPropertyError(
                key, named, "one of the options " + ", ".join(allowed), subject=f"{shown!r}: unknown option"
            )
        if key in options:
            raise InvalidPropertyError(key, named, "the option once", subject=f"{shown!r}: repeated option")
        if not value:
            raise InvalidPropertyError(key, named, allowed[key], subject=f"{shown!r}: option")
        options[key] = value
    return options


_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def parse_boolean(text: str) -> bool | None:
    """``true``/``false`` (also ``1``/``0``, ``yes``/``no``, any case) as a URI option says it;
    None for anything else, which the caller reports as the option's error."""
    return _BOOLEANS.get(text.strip().lower())


@dataclass(frozen=True, slots=True)
class DynamoDbUri:
    """``dynamodb://TABLE?mode=lease&lease_ms=5000&create_table=false&endpoint=...&region=...``,
    parsed. An unknown option or a bad value is an error naming it: a typo such as
    ``mode=lese`` must not quietly mean the default commit mode. None: not in the URI."""

    table: str
    mode: str = "commit"
    lease_ms: int | None = None
    create_table: bool | None = None
    endpoint: str | None = None
    region: str | None = None

    @classmethod
    def parse(cls, uri: str) -> DynamoDbUri:
        parts = urlsplit(uri)
        table = parts.netloc or parts.path.strip("/")
        if parts.scheme != "dynamodb" or not table:
            raise ValidationError(
                f"no DynamoDB table name in {uri!r}: expected 'dynamodb://TABLE[?mode=lease]'"
            )
        options = uri_options(parts.query, DYNAMODB_URI_OPTIONS, uri)

        def bad(key: str) -> InvalidPropertyError:
            return InvalidPropertyError(
                key, options[key], DYNAMODB_URI_OPTIONS[key], subject=f"{uri!r}: option"
            )

        mode = options.get("mode", "commit")
        if mode not in ("commit", "lease"):
            raise bad("mode")
        lease_ms = None
        if "lease_ms" in options:
            text = options["lease_ms"]
            if not text.isdigit() or int(text) <= 0:
                raise bad("lease_ms")
            lease_ms = int(text)
        create_table = None
        if "create_table" in options:
            create_table = parse_boolean(options["create_table"])
            if create_table is None:
                raise bad("create_table")
        for key in ("endpoint", "region"):
            if key in options and not options[key]:
                raise bad(key)
        return cls(table, mode, lease_ms, create_table, options.get("endpoint"), options.get("region"))


@dataclass(frozen=True, slots=True)
class CommitPoint:
    """``kind`` is "conditional-writes", "dynamodb" or "catalog"; ``table`` is None when unknown
    (for a catalog: which kind of catalog, "glue", "s3tables", "sql", "rest")."""

    kind: str
    table: str | None = None
    mode: str = "commit"

    @classmethod
    def parse(cls, text: str) -> CommitPoint:
        """The property's value, or a ``lock=`` URI (whose connection options are ignored)."""
        if text == CONDITIONAL:
            return cls(CONDITIONAL)
        if text.startswith(CATALOG + ":"):
            return cls(CATALOG, text[len(CATALOG) + 1 :] or None)
        if text.startswith("dynamodb://"):
            uri = DynamoDbUri.parse(text)
            return cls("dynamodb", uri.table, uri.mode)
        raise ValidationError(
            f"unknown commit point {text!r}: expected {CONDITIONAL!r}, 'dynamodb://TABLE[?mode=lease]' "
            "or 'catalog:KIND'"
        )

    def __str__(self) -> str:
        if self.kind == CATALOG:
            return f"{CATALOG}:{self.table or ''}"
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
        if self.kind == CATALOG:
            return (
                f"load it through its {self.table or ''} catalog (aioiceberg.connect with that "
                "catalog's URI; see docs/catalog.md): the catalog holds its current version"
            )
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
