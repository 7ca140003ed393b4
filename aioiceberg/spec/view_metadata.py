"""Iceberg view metadata (the view spec, format version 1) both ways.

A view is a list of versions, each a query (one SQL text per dialect) with the schema it
produces; ``current-version-id`` picks one, and ``version-log`` records when each became
current. Reading checks what the spec requires (every id a version or schema names exists,
one SQL text per dialect), so a damaged document fails here, naming the field, instead of in
an engine later. Representations of a type other than ``sql`` are kept as read, unread.
A gzip-compressed file (``.gz.metadata.json``, what Java writes for views by default) reads too.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

from aioiceberg.errors import CorruptFileError, InvalidMetadataError, UnsupportedFormatVersionError
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import schema_from_json, schema_to_json

__all__ = [
    "VIEW_FORMAT_VERSION",
    "SqlRepresentation",
    "UnknownRepresentation",
    "ViewHistoryEntry",
    "ViewMetadata",
    "ViewRepresentation",
    "ViewVersion",
    "check_view_metadata",
    "check_view_version",
    "parse_view_metadata",
    "serialize_view_metadata",
    "view_metadata_from_dict",
    "view_metadata_to_dict",
    "view_version_from_json",
    "view_version_to_json",
]

VIEW_FORMAT_VERSION = 1
"""The one view format version the spec defines."""


@dataclass(frozen=True, slots=True)
class SqlRepresentation:
    """A view's query as SQL text in one dialect (``spark``, ``trino``, ...)."""

    sql: str
    dialect: str

    @property
    def type(self) -> str:
        return "sql"


@dataclass(frozen=True, slots=True)
class UnknownRepresentation:
    """A representation of a type this library does not read, kept whole for writing back."""

    type: str
    raw: Mapping[str, Any]


ViewRepresentation = SqlRepresentation | UnknownRepresentation


@dataclass(frozen=True, slots=True)
class ViewVersion:
    version_id: int
    timestamp_ms: int
    schema_id: int
    summary: Mapping[str, str]
    representations: tuple[ViewRepresentation, ...]
    default_namespace: tuple[str, ...]
    default_catalog: str | None = None

    def sql_for(self, dialect: str) -> str | None:
        """The SQL text for ``dialect`` (compared case-blind, as Java does), if any."""
        for r in self.representations:
            if isinstance(r, SqlRepresentation) and r.dialect.lower() == dialect.lower():
                return r.sql
        return None

    def same_query(self, other: ViewVersion) -> bool:
        """Equal but for id and time: a replace with it adds no new version (Java's rule)."""
        return (
            self.schema_id == other.schema_id
            and dict(self.summary) == dict(other.summary)
            and self.representations == other.representations
            and self.default_namespace == other.default_namespace
            and self.default_catalog == other.default_catalog
        )


@dataclass(frozen=True, slots=True)
class ViewHistoryEntry:
    timestamp_ms: int
    version_id: int


@dataclass(frozen=True, slots=True)
class ViewMetadata:
    view_uuid: str
    location: str
    current_version_id: int
    versions: tuple[ViewVersion, ...]
    version_log: tuple[ViewHistoryEntry, ...]
    schemas: tuple[Schema, ...]
    properties: Mapping[str, str] = field(default_factory=dict)
    format_version: int = VIEW_FORMAT_VERSION

    def version(self, version_id: int) -> ViewVersion | None:
        return next((v for v in self.versions if v.version_id == version_id), None)

    def schema(self, schema_id: int) -> Schema | None:
        return next((s for s in self.schemas if s.schema_id == schema_id), None)

    @property
    def current_version(self) -> ViewVersion:
        found = self.version(self.current_version_id)
        if found is None:  # check_view_metadata refuses such metadata
            raise InvalidMetadataError(f"view metadata: current version {self.current_version_id} is missing")
        return found

    @property
    def current_schema(self) -> Schema:
        found = self.schema(self.current_version.schema_id)
        if found is None:
            raise InvalidMetadataError(
                f"view metadata: schema {self.current_version.schema_id} of the current version is missing"
            )
        return found


# -- checks -----------------------------------------------------------------------------------
def _bad(message: str) -> NoReturn:
    raise InvalidMetadataError(message)


def check_view_version(version: ViewVersion, what: str = "view version") -> None:
    """One SQL text per dialect (dialects compared case-blind), at least one representation."""
    what = f"{what} {version.version_id}"
    if not version.representations:
        _bad(f"{what} has no representations")
    seen: set[str] = set()
    for r in version.representations:
        if isinstance(r, SqlRepresentation):
            dialect = r.dialect.lower()
            if dialect in seen:
                _bad(f"{what} has more than one SQL representation for dialect {r.dialect!r}")
            seen.add(dialect)


def check_view_metadata(md: ViewMetadata) -> None:
    """The rules that tie a document together; InvalidMetadataError names the broken one."""
    if md.format_version != VIEW_FORMAT_VERSION:
        raise UnsupportedFormatVersionError(
            f"view format version {md.format_version} is not supported (only {VIEW_FORMAT_VERSION})"
        )
    if not md.location:
        _bad("view metadata: 'location' is empty")
    if not md.versions:
        _bad("view metadata has no versions")
    schema_ids = [s.schema_id for s in md.schemas]
    if len(set(schema_ids)) != len(schema_ids):
        _bad(f"view metadata: schema ids repeat: {sorted(schema_ids)}")
    version_ids = [v.version_id for v in md.versions]
    if len(set(version_ids)) != len(version_ids):
        _bad(f"view metadata: version ids repeat: {sorted(version_ids)}")
    for v in md.versions:
        if v.schema_id not in schema_ids:
            _bad(f"view version {v.version_id} names schema {v.schema_id}, which the view does not have")
        check_view_version(v)
    if md.current_version_id not in version_ids:
        _bad(f"view metadata: current-version-id {md.current_version_id} is not among versions {version_ids}")


# -- reading ----------------------------------------------------------------------------------
def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    names = {dict: "object", list: "array", str: "string", int: "number", float: "number", bool: "boolean"}
    return names.get(type(value), type(value).__name__)


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        _bad(f"{what} must be a JSON object, got {_type_name(value)}")
    return value


def _get(obj: Mapping[str, Any], key: str, what: str) -> Any:
    if obj.get(key) is None:
        _bad(f"{what}: field {key!r} must not be null" if key in obj else f"{what} is missing field {key!r}")
    return obj[key]


def _int(obj: Mapping[str, Any], key: str, what: str) -> int:
    value = _get(obj, key, what)
    if not isinstance(value, int) or isinstance(value, bool):
        _bad(f"{what}: field {key!r} must be an integer, got {_type_name(value)}")
    return value


def _str(obj: Mapping[str, Any], key: str, what: str) -> str:
    value = _get(obj, key, what)
    if not isinstance(value, str):
        _bad(f"{what}: field {key!r} must be a string, got {_type_name(value)}")
    return value


def _list(obj: Mapping[str, Any], key: str, what: str) -> list[Any]:
    value = _get(obj, key, what)
    if not isinstance(value, list):
        _bad(f"{what}: field {key!r} must be a list, got {_type_name(value)}")
    return value


def _string_map(value: Any, what: str) -> dict[str, str]:
    obj = _object(value, what)
    for k, v in obj.items():
        if not isinstance(v, str):
            _bad(f"{what}: the value of {k!r} must be a string, got {_type_name(v)}")
    return dict(obj)


def _representation(obj: Any, what: str) -> ViewRepresentation:
    item = _object(obj, what)
    kind = _str(item, "type", what)
    if kind.lower() != "sql":
        return UnknownRepresentation(kind, dict(item))
    return SqlRepresentation(_str(item, "sql", what), _str(item, "dialect", what))


def view_version_from_json(obj: Any) -> ViewVersion:
    """One entry of ``versions`` (also the ``view-version`` of REST requests), checked alone."""
    item = _object(obj, "view version")
    vid = _int(item, "version-id", "view version")
    what = f"view version {vid}"
    namespace = _list(item, "default-namespace", what)
    if not all(isinstance(level, str) for level in namespace):
        _bad(f"{what}: 'default-namespace' must be a list of strings")
    catalog = item.get("default-catalog")
    if catalog is not None and not isinstance(catalog, str):
        _bad(f"{what}: field 'default-catalog' must be a string, got {_type_name(catalog)}")
    version = ViewVersion(
        version_id=vid,
        timestamp_ms=_int(item, "timestamp-ms", what),
        schema_id=_int(item, "schema-id", what),
        summary=_string_map(_get(item, "summary", what), f"{what}: summary"),
        representations=tuple(
            _representation(r, f"{what}: representation") for r in _list(item, "representations", what)
        ),
        default_namespace=tuple(namespace),
        default_catalog=catalog,
    )
    check_view_version(version)
    return version


def _schema(obj: Any) -> Schema:
    try:
        return schema_from_json(_object(obj, "view schema"))
    except (ValueError, TypeError, AttributeError) as exc:  # a ValidationError from the model
        raise InvalidMetadataError(f"view schema: {exc}") from exc


def view_metadata_from_dict(obj: Any) -> ViewMetadata:
    top = _object(obj, "view metadata")
    what = "view metadata"
    version = _int(top, "format-version", what)
    if version != VIEW_FORMAT_VERSION:
        raise UnsupportedFormatVersionError(
            f"view format version {version} is not supported (only {VIEW_FORMAT_VERSION})"
        )
    log = []
    for entry in _list(top, "version-log", what):
        item = _object(entry, "view version-log entry")
        log.append(
            ViewHistoryEntry(
                _int(item, "timestamp-ms", "view version-log entry"),
                _int(item, "version-id", "view version-log entry"),
            )
        )
    properties = top.get("properties")
    md = ViewMetadata(
        view_uuid=_str(top, "view-uuid", what),
        location=_str(top, "location", what),
        current_version_id=_int(top, "current-version-id", what),
        versions=tuple(view_version_from_json(v) for v in _list(top, "versions", what)),
        version_log=tuple(log),
        schemas=tuple(_schema(s) for s in _list(top, "schemas", what)),
        properties={} if properties is None else _string_map(properties, f"{what}: properties"),
        format_version=version,
    )
    check_view_metadata(md)
    return md


def parse_view_metadata(data: bytes | str, location: str | None = None) -> ViewMetadata:
    """A view metadata file's bytes (plain or gzip JSON); errors name ``location`` when given."""
    if isinstance(data, bytes) and data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise CorruptFileError(f"view metadata: damaged gzip stream: {exc}", location=location) from exc
    try:
        text = data.decode("utf-8-sig") if isinstance(data, bytes) else data
        obj = json.loads(text)
    except UnicodeDecodeError as exc:
        raise CorruptFileError(f"view metadata is not UTF-8: {exc}", location=location) from exc
    except (ValueError, RecursionError) as exc:
        raise CorruptFileError(f"view metadata is not valid JSON: {exc}", location=location) from exc
    try:
        return view_metadata_from_dict(obj)
    except RecursionError as exc:
        raise InvalidMetadataError("view metadata is nested too deeply", location=location) from exc
    except InvalidMetadataError as exc:
        if location is None:
            raise
        if isinstance(exc, UnsupportedFormatVersionError):
            raise UnsupportedFormatVersionError(str(exc), location=location) from exc
        raise InvalidMetadataError(str(exc), location=location) from exc


# -- writing ----------------------------------------------------------------------------------
def _representation_to_json(r: ViewRepresentation) -> dict[str, Any]:
    if isinstance(r, SqlRepresentation):
        return {"type": "sql", "sql": r.sql, "dialect": r.dialect}
    return dict(r.raw)


def view_version_to_json(v: ViewVersion) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version-id": v.version_id,
        "timestamp-ms": v.timestamp_ms,
        "schema-id": v.schema_id,
        "summary": dict(v.summary),
        "representations": [_representation_to_json(r) for r in v.representations],
        "default-namespace": list(v.default_namespace),
    }
    if v.default_catalog is not None:
        out["default-catalog"] = v.default_catalog
    return out


def view_metadata_to_dict(md: ViewMetadata) -> dict[str, Any]:
    return {
        "view-uuid": md.view_uuid,
        "format-version": md.format_version,
        "location": md.location,
        "current-version-id": md.current_version_id,
        "properties": dict(md.properties),
        "versions": [view_version_to_json(v) for v in md.versions],
        "version-log": [{"timestamp-ms": e.timestamp_ms, "version-id": e.version_id} for e in md.version_log],
        "schemas": [schema_to_json(s) for s in md.schemas],
    }


def serialize_view_metadata(md: ViewMetadata) -> bytes:
    return json.dumps(view_metadata_to_dict(md), ensure_ascii=False, indent=2).encode("utf-8")
