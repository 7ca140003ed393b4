"""Changes to view metadata, as the REST protocol spells them (``add-schema``,
``add-view-version``, ``set-current-view-version``, ...), applied to a base or a new view.

Ids follow Java's view builder, so both sides agree on what a replace did: a schema or
version equal to one the view has reuses its id, a new one gets the highest id plus one,
and ``-1`` in ``add-view-version`` / ``set-current-view-version`` means "the one added in
these changes". Old versions beyond ``version.history.num-entries`` (default 10) are dropped
with their log entries; the current one always stays. A new current version must keep every
SQL dialect the previous one had unless ``replace.drop-dialect.allowed`` is true (Java's rule:
an engine that reads only that dialect would otherwise lose the view).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from aioiceberg.errors import InvalidMetadataError, ValidationError, ViewDialectDroppedError
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import schema_from_json
from aioiceberg.spec.view_metadata import (
    VIEW_FORMAT_VERSION,
    SqlRepresentation,
    ViewHistoryEntry,
    ViewMetadata,
    ViewVersion,
    check_view_metadata,
    view_version_from_json,
)

__all__ = [
    "DROP_DIALECT_ALLOWED",
    "LAST_ADDED",
    "VIEW_UPDATE_ACTIONS",
    "ViewChanges",
    "check_dialects_kept",
    "new_view_metadata",
]

LAST_ADDED = -1
"""A schema or version id meaning "the one added earlier in the same changes"."""

VIEW_UPDATE_ACTIONS = (
    "assign-uuid",
    "upgrade-format-version",
    "add-schema",
    "set-location",
    "set-properties",
    "remove-properties",
    "add-view-version",
    "set-current-view-version",
)

_HISTORY_PROPERTY = "version.history.num-entries"
_HISTORY_DEFAULT = 10

DROP_DIALECT_ALLOWED = "replace.drop-dialect.allowed"
"""The view property that lets a replace drop a SQL dialect (Java's name; false when unset)."""


def _sql_dialects(version: ViewVersion) -> set[str]:
    return {r.dialect.lower() for r in version.representations if isinstance(r, SqlRepresentation)}


def check_dialects_kept(
    view: str, previous: ViewVersion, current: ViewVersion, properties: Mapping[str, str]
) -> None:
    """Refuse (``ViewDialectDroppedError``) a current version lacking a SQL dialect (compared
    case-blind) the previous current version had, unless ``properties`` (the view's, after
    the change) set ``replace.drop-dialect.allowed`` to true (case-blind, as Java reads it)."""
    if properties.get(DROP_DIALECT_ALLOWED, "").strip().lower() == "true":
        return
    before, after = _sql_dialects(previous), _sql_dialects(current)
    dropped = before - after
    if dropped:
        raise ViewDialectDroppedError(view, sorted(dropped), sorted(before), sorted(after))


def _refuse(message: str) -> ValidationError:
    return ValidationError(f"view update: {message}")


def _field(update: Mapping[str, Any], key: str, kind: type, action: str) -> Any:
    value = update.get(key)
    if value is None or not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _refuse(f"{action} needs {key!r} ({kind.__name__})")
    return value


class ViewChanges:
    """A view being changed: apply updates one by one, then :meth:`build` the new metadata."""

    def __init__(self, base: ViewMetadata | None = None, view: str = "") -> None:
        self.base = base
        self.view = view  # the name errors give
        self.uuid = base.view_uuid if base else None
        self.location = base.location if base else None
        self.properties: dict[str, str] = dict(base.properties) if base else {}
        self.schemas: list[Schema] = list(base.schemas) if base else []
        self.versions: list[ViewVersion] = list(base.versions) if base else []
        self.log: list[ViewHistoryEntry] = list(base.version_log) if base else []
        self.current: int | None = base.current_version_id if base else None
        self.last_schema: int | None = None
        self.last_version: int | None = None

    # -- single changes ----------------------------------------------------------------------
    def assign_uuid(self, value: str) -> None:
        if not value:
            raise _refuse("assign-uuid needs a non-empty uuid")
        if self.uuid is not None and self.uuid != value:
            raise _refuse(f"the view's uuid is {self.uuid}; it cannot become {value}")
        self.uuid = value

    def add_schema(self, schema: Schema) -> int:
        for known in self.schemas:
            if known.same_structure(schema):
                self.last_schema = known.schema_id
                return known.schema_id
        new_id = max((s.schema_id for s in self.schemas), default=-1) + 1
        self.schemas.append(
            Schema(*schema.fields, schema_id=new_id, identifier_field_ids=schema.identifier_field_ids)
        )
        self.last_schema = new_id
        return new_id

    def add_version(self, version: ViewVersion) -> int:
        if version.schema_id == LAST_ADDED:
            if self.last_schema is None:
                raise _refuse(
                    f"view version {version.version_id} names the last added schema, but none was added"
                )
            version = replace(version, schema_id=self.last_schema)
        if not any(s.schema_id == version.schema_id for s in self.schemas):
            raise _refuse(
                f"view version {version.version_id} names schema {version.schema_id}, which is unknown"
            )
        for known in self.versions:
            if known.same_query(version):
                self.last_version = known.version_id
                return known.version_id
        # the given id unless an existing one is as high (Java's rule): never an expired id again
        new_id = max(version.version_id, max((v.version_id for v in self.versions), default=0) + 1)
        self.versions.append(replace(version, version_id=new_id))
        self.last_version = new_id
        return new_id

    def set_current(self, version_id: int) -> None:
        if version_id == LAST_ADDED:
            if self.last_version is None:
                raise _refuse("set-current-view-version -1 names the last added version, but none was added")
            version_id = self.last_version
        found = next((v for v in self.versions if v.version_id == version_id), None)
        if found is None:
            raise _refuse(f"set-current-view-version: the view has no version {version_id}")
        if self.current != version_id:
            self.current = version_id
            self.log.append(ViewHistoryEntry(found.timestamp_ms, version_id))

    def set_location(self, location: str) -> None:
        if not location:
            raise _refuse("set-location needs a non-empty location")
        self.location = location.rstrip("/")

    # -- REST's JSON -------------------------------------------------------------------------
    def apply(self, update: Any) -> None:
        """One update object of a ``CommitViewRequest`` / create request (ValidationError when bad)."""
        if not isinstance(update, dict):
            raise _refuse("each update must be a JSON object")
        action = update.get("action")
        if action not in VIEW_UPDATE_ACTIONS:
            raise _refuse(f"unknown action {action!r}; views take {', '.join(VIEW_UPDATE_ACTIONS)}")
        try:
            self._apply(action, update)
        except (InvalidMetadataError, TypeError, AttributeError, KeyError) as exc:
            raise _refuse(f"{action}: {exc}") from None

    def _apply(self, action: str, update: dict[str, Any]) -> None:
        if action == "assign-uuid":
            self.assign_uuid(_field(update, "uuid", str, action))
        elif action == "upgrade-format-version":
            version = _field(update, "format-version", int, action)
            if version != VIEW_FORMAT_VERSION:
                raise _refuse(f"view format version {version} is not supported (only {VIEW_FORMAT_VERSION})")
        elif action == "add-schema":
            self.add_schema(schema_from_json(_field(update, "schema", dict, action)))
        elif action == "set-location":
            self.set_location(_field(update, "location", str, action))
        elif action == "set-properties":
            values = _field(update, "updates", dict, action)
            if not all(isinstance(v, str) for v in values.values()):
                raise _refuse("set-properties: every value must be a string")
            self.properties.update(values)
        elif action == "remove-properties":
            keys = _field(update, "removals", list, action)
            if not all(isinstance(k, str) for k in keys):
                raise _refuse("remove-properties: removals must be strings")
            for key in keys:
                self.properties.pop(key, None)
        elif action == "add-view-version":
            self.add_version(view_version_from_json(_field(update, "view-version", dict, action)))
        else:  # set-current-view-version
            self.set_current(_field(update, "view-version-id", int, action))

    def apply_all(self, updates: Iterable[Any]) -> None:
        for update in updates:
            self.apply(update)

    # -- result ------------------------------------------------------------------------------
    def _retained(self) -> tuple[list[ViewVersion], list[ViewHistoryEntry]]:
        raw = self.properties.get(_HISTORY_PROPERTY)
        try:
            keep = int(raw) if raw is not None else _HISTORY_DEFAULT
        except ValueError:
            raise _refuse(f"{_HISTORY_PROPERTY}={raw!r} must be a whole number") from None
        keep = max(keep, 1)
        if len(self.versions) <= keep:
            return self.versions, self.log
        newest = sorted(self.versions, key=lambda v: v.version_id)[-keep:]
        ids = {v.version_id for v in newest} | {self.current}
        versions = [v for v in self.versions if v.version_id in ids]
        return versions, [e for e in self.log if e.version_id in ids]

    def build(self) -> ViewMetadata:
        if self.uuid is None:
            raise _refuse("a new view needs assign-uuid")
        if self.location is None:
            raise _refuse("a new view needs set-location")
        if self.current is None:
            raise _refuse("the view has no current version (set-current-view-version)")
        versions, log = self._retained()
        md = ViewMetadata(
            view_uuid=self.uuid,
            location=self.location,
            current_version_id=self.current,
            versions=tuple(versions),
            version_log=tuple(log),
            schemas=tuple(self.schemas),
            properties=dict(self.properties),
        )
        try:
            check_view_metadata(md)
        except InvalidMetadataError as exc:
            raise _refuse(str(exc)) from None
        if self.base is not None:
            check_dialects_kept(
                self.view or self.base.location, self.base.current_version, md.current_version, md.properties
            )
        return md


def new_view_metadata(
    view_uuid: str,
    location: str,
    schema: Schema,
    version: ViewVersion,
    properties: Mapping[str, str] | None = None,
) -> ViewMetadata:
    """A new view's first metadata: the schema, then the version (its schema id set to the
    schema's), current from the start."""
    changes = ViewChanges()
    changes.assign_uuid(view_uuid)
    changes.set_location(location)
    changes.properties.update(properties or {})
    schema_id = changes.add_schema(schema)
    changes.set_current(changes.add_version(replace(version, schema_id=schema_id)))
    return changes.build()
