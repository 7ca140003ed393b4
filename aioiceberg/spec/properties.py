"""Table properties, typed: every key this library reads, its type, its default and what is
allowed, in one place.

The policy for a bad value is one for all keys: it is kept as it was written, and a
``InvalidPropertyError`` naming the key, the value and what is allowed is raised where the
property is used (a write or a commit needs it) and where it is set through this library
(``create_table``, ``set_properties``), so none of ours lands in metadata. Reading a table that
another engine left with an odd value works as long as the read does not need that key.
Keys this library does not know pass through untouched.

Per-process knobs (upload concurrency, encoding threads) are not table properties: they
belong to the process's ``Runtime``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar, overload

from aioiceberg.errors import IcebergError, InvalidPropertyError
from aioiceberg.spec.metrics_mode import MetricsMode, parse_metrics_mode
from aioiceberg.spec.name_mapping import NameMapping, name_mapping_from_json

__all__ = [
    "COLUMN_METRICS_PREFIX",
    "COPY_ON_WRITE",
    "MERGE_ON_READ",
    "PROPERTIES",
    "Prop",
    "TableProperties",
    "check_property_values",
]

T = TypeVar("T")

MiB = 1024 * 1024
COLUMN_METRICS_PREFIX = "write.metadata.metrics.column."
COPY_ON_WRITE = "copy-on-write"
MERGE_ON_READ = "merge-on-read"
_INTEGER = re.compile(r"[+-]?\d+")
_TRUE = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "off", "0"})


class Prop(Generic[T]):
    """One table property: key, default, parser (raises ValueError on a bad value) and the
    allowed values in words. Read on a ``TableProperties`` it is the parsed value."""

    __slots__ = ("allowed", "default", "key", "parse")

    def __init__(self, key: str, default: T, parse: Callable[[str], T], allowed: str) -> None:
        self.key = key
        self.default = default
        self.parse = parse
        self.allowed = allowed

    @overload
    def __get__(self, obj: None, owner: type[Any]) -> Prop[T]: ...
    @overload
    def __get__(self, obj: TableProperties, owner: type[Any]) -> T: ...
    def __get__(self, obj: TableProperties | None, owner: type[Any]) -> Prop[T] | T:
        return self if obj is None else obj.get(self)

    def check(self, text: str) -> T:
        """``text`` parsed, or the typed error naming this key."""
        try:
            return self.parse(text)
        except (ValueError, IcebergError):
            raise InvalidPropertyError(self.key, text, self.allowed) from None


def _int(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        if not _INTEGER.fullmatch(text.strip()):
            raise ValueError(text)
        value = int(text)
        if value < minimum:
            raise ValueError(text)
        return value

    return parse


def _optional_int(text: str) -> int | None:
    return None if not text.strip() else _int(-(2**63))(text)


def _bool(text: str) -> bool:
    word = text.strip().lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise ValueError(text)


def _choice(*allowed: str, aliases: Mapping[str, str] | None = None) -> Callable[[str], str]:
    def parse(text: str) -> str:
        word = text.strip().lower()
        word = (aliases or {}).get(word, word)
        if word not in allowed:
            raise ValueError(text)
        return word

    return parse


def _location(text: str) -> str:
    if not text.strip():
        raise ValueError(text)
    return text.rstrip("/")


def _name_mapping(text: str) -> NameMapping | None:
    return name_mapping_from_json(text) if text.strip() else None


_POSITIVE = "a positive integer"
_NON_NEGATIVE = "a non-negative integer"
_BOOL = "true or false"
_ROW_LEVEL = f"{COPY_ON_WRITE!r} or {MERGE_ON_READ!r}"
_ISOLATION = "'serializable' or 'snapshot'"
_METRICS_MODES = "none, counts, truncate(N) or full"
_FORMAT = "'parquet', 'avro' or 'orc'"
_CODECS = ("none", "snappy", "gzip", "brotli", "lz4", "zstd")


class TableProperties:
    """A table's properties, parsed on first use and kept (the object does not change).

    ``TableProperties(metadata.properties)``; ``raw`` is the mapping as written.
    """

    __slots__ = ("_parsed", "raw")

    # -- data files ---------------------------------------------------------------------
    write_format = Prop("write.format.default", "parquet", _choice("parquet", "avro", "orc"), _FORMAT)
    delete_format = Prop("write.delete.format.default", "parquet", _choice("parquet", "avro", "orc"), _FORMAT)
    target_file_size = Prop("write.target-file-size-bytes", 512 * MiB, _int(1), _POSITIVE)
    parquet_row_group_bytes = Prop("write.parquet.row-group-size-bytes", 128 * MiB, _int(1), _POSITIVE)
    parquet_row_group_rows = Prop("write.parquet.row-group-limit", 1_048_576, _int(1), _POSITIVE)
    parquet_page_bytes = Prop("write.parquet.page-size-bytes", 1 * MiB, _int(1), _POSITIVE)
    parquet_page_rows = Prop("write.parquet.page-row-limit", 20_000, _int(1), _POSITIVE)
    parquet_dict_bytes = Prop("write.parquet.dict-size-bytes", 2 * MiB, _int(1), _POSITIVE)
    parquet_compression = Prop(
        "write.parquet.compression-codec",
        "zstd",
        _choice(*_CODECS, aliases={"uncompressed": "none"}),
        "one of uncompressed, " + ", ".join(_CODECS),
    )
    parquet_compression_level: Prop[int | None] = Prop(
        "write.parquet.compression-level", None, _optional_int, "an integer, or empty for the codec's default"
    )
    data_path: Prop[str | None] = Prop("write.data.path", None, _location, "a non-empty location")
    metadata_path: Prop[str | None] = Prop("write.metadata.path", None, _location, "a non-empty location")
    # -- column metrics -----------------------------------------------------------------
    metrics_default: Prop[MetricsMode | None] = Prop(
        "write.metadata.metrics.default", None, parse_metrics_mode, _METRICS_MODES
    )
    metrics_max_inferred_columns = Prop(
        "write.metadata.metrics.max-inferred-column-defaults", 100, _int(0), _NON_NEGATIVE
    )
    # -- row-level changes --------------------------------------------------------------
    delete_mode = Prop("write.delete.mode", COPY_ON_WRITE, _choice(COPY_ON_WRITE, MERGE_ON_READ), _ROW_LEVEL)
    update_mode = Prop("write.update.mode", COPY_ON_WRITE, _choice(COPY_ON_WRITE, MERGE_ON_READ), _ROW_LEVEL)
    merge_mode: Prop[str | None] = Prop(
        "write.merge.mode", None, _choice(COPY_ON_WRITE, MERGE_ON_READ), _ROW_LEVEL
    )
    delete_isolation = Prop(
        "write.delete.isolation-level", "serializable", _choice("serializable", "snapshot"), _ISOLATION
    )
    update_isolation = Prop(
        "write.update.isolation-level", "serializable", _choice("serializable", "snapshot"), _ISOLATION
    )
    merge_isolation = Prop(
        "write.merge.isolation-level", "serializable", _choice("serializable", "snapshot"), _ISOLATION
    )
    # -- commits ------------------------------------------------------------------------
    commit_num_retries = Prop("commit.retry.num-retries", 4, _int(0), _NON_NEGATIVE)
    commit_min_wait_ms = Prop("commit.retry.min-wait-ms", 100, _int(0), _NON_NEGATIVE)
    commit_max_wait_ms = Prop("commit.retry.max-wait-ms", 60_000, _int(0), _NON_NEGATIVE)
    commit_total_timeout_ms = Prop("commit.retry.total-timeout-ms", 1_800_000, _int(0), _NON_NEGATIVE)
    commit_in_process_lock = Prop("commit.in-process-lock", True, _bool, _BOOL)
    manifest_target_size = Prop("commit.manifest.target-size-bytes", 8 * MiB, _int(1), _POSITIVE)
    manifest_min_count_to_merge = Prop("commit.manifest.min-count-to-merge", 100, _int(1), _POSITIVE)
    manifest_merge_enabled = Prop("commit.manifest-merge.enabled", False, _bool, _BOOL)
    previous_versions_max = Prop(
        "write.metadata.previous-versions-max", 100, _int(0), f"{_NON_NEGATIVE} (at least 1 is kept)"
    )
    # -- snapshot expiry ----------------------------------------------------------------
    max_snapshot_age_ms = Prop(
        "history.expire.max-snapshot-age-ms", 5 * 24 * 3600 * 1000, _int(0), _NON_NEGATIVE
    )
    min_snapshots_to_keep = Prop("history.expire.min-snapshots-to-keep", 1, _int(1), _POSITIVE)
    max_ref_age_ms = Prop("history.expire.max-ref-age-ms", 2**63 - 1, _int(0), _NON_NEGATIVE)
    # -- reads --------------------------------------------------------------------------
    split_target_size = Prop("read.split.target-size", 128 * MiB, _int(1), _POSITIVE)
    split_open_file_cost = Prop("read.split.open-file-cost", 4 * MiB, _int(0), _NON_NEGATIVE)
    name_mapping: Prop[NameMapping | None] = Prop(
        "schema.name-mapping.default",
        None,
        _name_mapping,
        "a name mapping in JSON (Iceberg spec, Appendix C)",
    )

    def __init__(self, raw: Mapping[str, str] | None = None) -> None:
        object.__setattr__(self, "raw", dict(raw or {}))
        object.__setattr__(self, "_parsed", {})

    raw: Mapping[str, str]
    _parsed: dict[str, Any]

    @classmethod
    def of(cls, properties: TableProperties | Mapping[str, str] | None) -> TableProperties:
        """``properties`` as typed properties (parsed once: a ``TableProperties`` is kept)."""
        return properties if isinstance(properties, TableProperties) else cls(properties)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"TableProperties is immutable (cannot set {name!r})")

    def __repr__(self) -> str:
        return f"TableProperties({self.raw!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TableProperties) and self.raw == other.raw

    __hash__ = None  # type: ignore[assignment]

    def get(self, prop: Prop[T]) -> T:
        """The value of ``prop``: its default when unset; InvalidPropertyError when bad."""
        if prop.key in self._parsed:
            value: T = self._parsed[prop.key]
            return value
        text = self.raw.get(prop.key)
        value = prop.default if text is None else prop.check(text)
        self._parsed[prop.key] = value
        return value

    def is_set(self, prop: Prop[Any]) -> bool:
        return prop.key in self.raw

    def metadata_file(self, table_location: str, file_name: str) -> str:
        """Where a new metadata object (manifest, manifest list, statistics, a catalog
        table's metadata JSON) goes: ``write.metadata.path``, else ``{location}/metadata``.
        A warehouse table's version files stay in ``{location}/metadata``: they are its
        commit point, found there by every reader (as Java's HadoopTableOperations does)."""
        root = self.get(TableProperties.metadata_path) or f"{table_location.rstrip('/')}/metadata"
        return f"{root}/{file_name}"

    @property
    def column_metrics(self) -> dict[str, MetricsMode]:
        """``write.metadata.metrics.column.<name>`` modes, by column name."""
        return {
            key[len(COLUMN_METRICS_PREFIX) :]: _column_metrics(key, text)
            for key, text in self.raw.items()
            if key.startswith(COLUMN_METRICS_PREFIX)
        }

    def replace(self, **values: str) -> TableProperties:
        """A copy with ``values`` set, by attribute name (``target_file_size="1024"``)."""
        raw = dict(self.raw)
        for name, text in values.items():
            prop = getattr(type(self), name, None)
            if not isinstance(prop, Prop):
                raise AttributeError(f"TableProperties has no property {name!r}")
            raw[prop.key] = text
        return TableProperties(raw)


PROPERTIES: Mapping[str, Prop[Any]] = {
    p.key: p for p in vars(TableProperties).values() if isinstance(p, Prop)
}
"""Every table property this library reads, by key."""


def _column_metrics(key: str, text: str) -> MetricsMode:
    try:
        return parse_metrics_mode(text)
    except ValueError:
        raise InvalidPropertyError(key, text, _METRICS_MODES) from None


def check_property_values(properties: Mapping[str, str]) -> None:
    """Refuse a bad value for any key this library reads (before it is set); others pass.
    Values are checked as the strings they are stored as."""
    for key, value in properties.items():
        prop = PROPERTIES.get(key)
        if prop is not None:
            prop.check(str(value))
        elif key.startswith(COLUMN_METRICS_PREFIX):
            _column_metrics(key, str(value))
