"""File scan tasks and the JSON forms of content files and tasks (Appendix C).

A planned task is how work moves from a driver to executors (e.g. PySpark): it carries
the table schema and partition spec it was planned with, so an executor can decode the
partition tuple, bind the residual filter and read the file without loading metadata.

Writers produce the spec's form (``"content": "DATA"``, partition as an object keyed by
partition field id, bounds and key metadata as hex). Readers also accept what newer Java
writes (``"data"`` / ``"position-deletes"`` contents, lower-case formats, partition as an
array in field order), since the same keys carry the same data.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from aioiceberg.errors import InvalidMetadataError, ValidationError
from aioiceberg.expressions.serde import expression_from_json, expression_to_json
from aioiceberg.expressions.tree import AlwaysTrue, Expression
from aioiceberg.spec.manifest.data_file import DataFile, DataFileContent, FileFormat
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.schema_json import (
    partition_spec_from_json,
    partition_spec_to_json,
    schema_from_json,
    schema_to_json,
)
from aioiceberg.spec.types import StructType
from aioiceberg.spec.values import from_json, to_json

__all__ = [
    "FileScanTask",
    "content_file_from_json",
    "content_file_to_json",
    "file_scan_task_from_json",
    "file_scan_task_to_json",
    "partition_to_json",
]

_T = TypeVar("_T")
_HEX = re.compile(r"(?:[0-9a-fA-F]{2})*")


@dataclass(frozen=True, slots=True)
class FileScanTask:
    """One data file (or a byte range of it) to read, with the deletes and filter that apply.

    ``schema`` and ``spec`` are the table schema and the file's partition spec: together
    they type the partition tuple. ``residual`` is what the partition does not already
    decide (bound or unbound). ``length`` None means to the end of the file.
    ``residual_null_safe``: the residual is bound and already drops the rows for which it is
    NULL (SQL's rule, as a planner binds it), so a reader applies it as it is; False (a
    task built by hand, or read from JSON): the reader binds it and applies the rule itself.
    Not compared: either way the task reads the same rows.
    ``data_sequence_number``: the file's (planned tasks carry it), for v3 row lineage's
    ``_last_updated_sequence_number`` of rows that store none.
    """

    file: DataFile
    delete_files: tuple[DataFile, ...]
    residual: Expression
    spec: PartitionSpec
    schema: Schema
    start: int = 0
    length: int | None = None
    residual_null_safe: bool = dataclasses.field(default=False, compare=False)
    data_sequence_number: int | None = dataclasses.field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not isinstance(self.delete_files, tuple):
            object.__setattr__(self, "delete_files", tuple(self.delete_files))
        if self.start < 0:
            raise ValidationError(f"scan task start must be >= 0, got {self.start}")
        if self.length is not None and self.length < 0:
            raise ValidationError(f"scan task length must be >= 0, got {self.length}")


# ---------------------------------------------------------------------------------------------
# Content files


def _value_json(value: Any, type_: Any) -> Any:
    encoded = to_json(value, type_)
    if isinstance(encoded, float) and not math.isfinite(encoded):
        # Strict JSON has no NaN/Infinity tokens; Jackson's strings, which from_json reads.
        return "NaN" if math.isnan(encoded) else ("Infinity" if encoded > 0 else "-Infinity")
    return encoded


def _partition_to_json(f: DataFile, partition_type: StructType) -> dict[str, Any]:
    return partition_to_json(f.partition, partition_type, f.file_path, f.spec_id)


def partition_to_json(
    partition: tuple[Any, ...], partition_type: StructType, file_path: str, spec_id: int
) -> dict[str, Any]:
    """A partition tuple as the JSON object keyed by partition field id (Appendix C)."""
    fields = partition_type.fields
    if len(partition) != len(fields):
        raise ValidationError(
            f"{file_path}: partition tuple has {len(partition)} values, "
            f"spec {spec_id} has {len(fields)} fields"
        )
    out: dict[str, Any] = {}
    for field, value in zip(fields, partition, strict=True):
        if value is None:
            continue  # absent means null, as in the single-value struct form
        try:
            out[str(field.field_id)] = _value_json(value, field.field_type)
        except ValidationError as e:
            raise ValidationError(f"{file_path}: partition field {field.name!r}: {e}") from e
    return out


def _map_json(m: Mapping[int, _T], encode: Callable[[_T], Any]) -> dict[str, list[Any]]:
    keys = sorted(m)
    return {"keys": keys, "values": [encode(m[k]) for k in keys]}


def _hex(data: bytes) -> str:
    return data.hex().upper()  # Java's base16 form, as in the spec's examples


def content_file_to_json(f: DataFile, spec: PartitionSpec, schema: Schema) -> dict[str, Any]:
    """The spec's JSON object for a data or delete file.

    ``spec`` must be the file's spec (ids must agree) and ``schema`` a schema holding its
    source columns (the table schema): together they type the partition values.
    """
    if f.spec_id != spec.spec_id:
        raise ValidationError(f"{f.file_path}: file has spec id {f.spec_id}, got spec {spec.spec_id}")
    out: dict[str, Any] = {
        "spec-id": spec.spec_id,
        "content": f.content.name,
        "file-path": f.file_path,
        "file-format": f.file_format.value,
        "partition": _partition_to_json(f, spec.partition_type(schema)),
        "record-count": f.record_count,
        "file-size-in-bytes": f.file_size_in_bytes,
    }
    for key, counts in (
        ("column-sizes", f.column_sizes),
        ("value-counts", f.value_counts),
        ("null-value-counts", f.null_value_counts),
        ("nan-value-counts", f.nan_value_counts),
    ):
        if counts is not None:
            out[key] = _map_json(counts, int)
    for key, bounds in (("lower-bounds", f.lower_bounds), ("upper-bounds", f.upper_bounds)):
        if bounds is not None:
            out[key] = _map_json(bounds, _hex)
    optional: dict[str, Any] = {
        "key-metadata": _hex(f.key_metadata) if f.key_metadata is not None else None,
        "split-offsets": list(f.split_offsets) if f.split_offsets is not None else None,
        "equality-ids": list(f.equality_ids) if f.equality_ids is not None else None,
        "sort-order-id": f.sort_order_id,
        "first-row-id": f.first_row_id,
        "referenced-data-file": f.referenced_data_file,
        "content-offset": f.content_offset,
        "content-size-in-bytes": f.content_size_in_bytes,
    }
    out.update((k, v) for k, v in optional.items() if v is not None)
    return out


class _Reader:
    """Typed access to one JSON object; every error names the object and the key."""

    def __init__(self, obj: Any, what: str) -> None:
        if not isinstance(obj, dict):
            raise InvalidMetadataError(f"{what} must be a JSON object, got {_kind(obj)}")
        self.obj: dict[str, Any] = obj
        self.what = what

    def error(self, key: str, message: str) -> InvalidMetadataError:
        return InvalidMetadataError(f"{self.what}: field '{key}' {message}")

    def get(self, key: str, required: bool = False) -> Any:
        value = self.obj.get(key)
        if value is None and required:
            raise self.error(key, "is required")
        return value

    def opt_int(self, key: str) -> int | None:
        value = self.get(key)
        if value is None:
            return None
        if not _is_int(value):
            raise self.error(key, f"must be an integer, got {_kind(value)}")
        return int(value)

    def req_int(self, key: str) -> int:
        value = self.opt_int(key)
        if value is None:
            raise self.error(key, "is required")
        return value

    def opt_str(self, key: str) -> str | None:
        value = self.get(key)
        if value is not None and not isinstance(value, str):
            raise self.error(key, f"must be a string, got {_kind(value)}")
        return value

    def req_str(self, key: str) -> str:
        value = self.opt_str(key)
        if value is None:
            raise self.error(key, "is required")
        return value

    def int_list(self, key: str) -> tuple[int, ...] | None:
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(_is_int(v) for v in value):
            raise self.error(key, "must be a list of integers")
        return tuple(value)

    def opt_hex(self, key: str) -> bytes | None:
        value = self.get(key)
        return None if value is None else _unhex(value, lambda m: self.error(key, m))

    def id_map(
        self, key: str, decode: Callable[[Any, Callable[[str], Exception]], _T]
    ) -> dict[int, _T] | None:
        """A ``{"keys": [...], "values": [...]}`` map keyed by column id."""
        value = self.get(key)
        if value is None:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("keys"), list):
            raise self.error(key, 'must be {"keys": [...], "values": [...]}')
        keys, vals = value["keys"], value.get("values")
        if not isinstance(vals, list) or len(vals) != len(keys):
            raise self.error(key, "must have 'keys' and 'values' arrays of the same length")
        out: dict[int, _T] = {}
        for k, v in zip(keys, vals, strict=True):
            if not _is_int(k):
                raise self.error(key, f"has a non-integer column id {k!r}")
            out[k] = decode(v, self._column_error(key, k))
        return out

    def _column_error(self, key: str, column: int) -> Callable[[str], Exception]:
        return lambda message: self.error(key, f"value for column {column} {message}")


def _count(value: Any, error: Callable[[str], Exception]) -> int:
    if not _is_int(value):
        raise error(f"must be an integer, got {value!r}")
    return int(value)


def _unhex(value: Any, error: Callable[[str], Exception]) -> bytes:
    if not isinstance(value, str) or not _HEX.fullmatch(value):
        raise error(f"must be a hexadecimal string, got {value!r}")
    return bytes.fromhex(value)


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _kind(obj: Any) -> str:
    return "null" if obj is None else type(obj).__name__


def _content(text: str, r: _Reader) -> DataFileContent:
    # The spec writes DATA / POSITION_DELETES; Java 1.11+ writes data / position-deletes.
    content = DataFileContent.__members__.get(text.upper().replace("-", "_"))
    if content is None:
        raise r.error("content", f"has unknown value {text!r}")
    return content


def _partition_from_json(value: Any, spec: PartitionSpec, schema: Schema, r: _Reader) -> tuple[Any, ...]:
    fields = spec.partition_type(schema).fields
    if value is None:
        return (None,) * len(fields)
    if isinstance(value, list):  # newer Java writes the tuple in field order
        if len(value) != len(fields):
            raise r.error("partition", f"has {len(value)} values, spec {spec.spec_id} has {len(fields)}")
        raw = list(value)
    elif isinstance(value, dict):
        known = {str(f.field_id) for f in fields}
        unknown = sorted(set(value) - known)
        if unknown:
            raise r.error("partition", f"has ids {unknown} that spec {spec.spec_id} does not define")
        raw = [value.get(str(f.field_id)) for f in fields]
    else:
        raise r.error("partition", f"must be an object keyed by partition field id, got {_kind(value)}")
    out = []
    for field, item in zip(fields, raw, strict=True):
        try:
            out.append(from_json(item, field.field_type))
        except InvalidMetadataError as e:
            raise r.error("partition", f"field {field.field_id} ({field.name!r}): {e}") from e
    return tuple(out)


def content_file_from_json(obj: Any, specs_by_id: Mapping[int, PartitionSpec], schema: Schema) -> DataFile:
    """Decode a content file; its ``spec-id`` picks the spec that types the partition."""
    r = _Reader(obj, "content file")
    path = r.req_str("file-path")
    r.what = f"content file {path!r}"
    spec_id = r.req_int("spec-id")
    spec = specs_by_id.get(spec_id)
    if spec is None:
        raise r.error("spec-id", f"refers to unknown partition spec {spec_id}")
    try:
        file_format = FileFormat.parse(r.req_str("file-format"))
    except ValueError as e:
        raise r.error("file-format", f"has unknown value {r.obj['file-format']!r}") from e
    return DataFile(
        content=_content(r.req_str("content"), r),
        file_path=path,
        file_format=file_format,
        partition=_partition_from_json(r.get("partition"), spec, schema, r),
        record_count=r.req_int("record-count"),
        file_size_in_bytes=r.req_int("file-size-in-bytes"),
        column_sizes=r.id_map("column-sizes", _count),
        value_counts=r.id_map("value-counts", _count),
        null_value_counts=r.id_map("null-value-counts", _count),
        nan_value_counts=r.id_map("nan-value-counts", _count),
        lower_bounds=r.id_map("lower-bounds", _unhex),
        upper_bounds=r.id_map("upper-bounds", _unhex),
        key_metadata=r.opt_hex("key-metadata"),
        split_offsets=r.int_list("split-offsets"),
        equality_ids=r.int_list("equality-ids"),
        sort_order_id=r.opt_int("sort-order-id"),
        first_row_id=r.opt_int("first-row-id"),
        referenced_data_file=r.opt_str("referenced-data-file"),
        content_offset=r.opt_int("content-offset"),
        content_size_in_bytes=r.opt_int("content-size-in-bytes"),
        spec_id=spec_id,
    )


# ---------------------------------------------------------------------------------------------
# File scan tasks


def _delete_spec(d: DataFile, task: FileScanTask) -> PartitionSpec:
    """The spec to write a delete file with: the task's, or an empty one for global deletes.

    Global equality deletes come from an unpartitioned spec with another id; their empty
    partition needs no types, so the task's single spec is enough to carry them.
    """
    if d.spec_id == task.spec.spec_id:
        return task.spec
    if not d.partition:
        return PartitionSpec(d.spec_id, ())
    raise ValidationError(
        f"delete file {d.file_path} has partition spec {d.spec_id}, the task has spec "
        f"{task.spec.spec_id}; only unpartitioned deletes may use another spec"
    )


def file_scan_task_to_json(task: FileScanTask) -> dict[str, Any]:
    """The spec's file scan task object; ``start``/``length`` are added only for a split."""
    out: dict[str, Any] = {
        "schema": schema_to_json(task.schema),
        "spec": partition_spec_to_json(task.spec),
        "data-file": content_file_to_json(task.file, task.spec, task.schema),
        "delete-files": [
            content_file_to_json(d, _delete_spec(d, task), task.schema) for d in task.delete_files
        ],
        "residual-filter": expression_to_json(task.residual),
    }
    if task.start:
        out["start"] = task.start
    if task.length is not None:
        out["length"] = task.length
    return out


def _global_delete_specs(items: list[Any], spec: PartitionSpec) -> dict[int, PartitionSpec]:
    """Specs for delete files written with another spec id: only empty partitions are allowed."""
    specs = {spec.spec_id: spec}
    for item in items:
        if isinstance(item, dict) and _is_int(item.get("spec-id")) and item["spec-id"] not in specs:
            if item.get("partition") in (None, {}, []):
                specs[item["spec-id"]] = PartitionSpec(item["spec-id"], ())
    return specs


def file_scan_task_from_json(obj: Any) -> FileScanTask:
    """Decode a task; the residual comes back unbound, its literals typed by the task's schema."""
    r = _Reader(obj, "file scan task")
    try:
        schema = schema_from_json(r.get("schema", required=True))
    except InvalidMetadataError as e:
        raise r.error("schema", f"is invalid: {e}") from e
    try:
        spec = partition_spec_from_json(r.get("spec", required=True))
    except InvalidMetadataError as e:
        raise r.error("spec", f"is invalid: {e}") from e

    data_file = content_file_from_json(r.get("data-file", required=True), {spec.spec_id: spec}, schema)
    if data_file.content != DataFileContent.DATA:
        raise r.error("data-file", f"must hold a data file, got {data_file.content.name}")

    items = r.get("delete-files")
    if items is None:
        items = []
    if not isinstance(items, list):
        raise r.error("delete-files", f"must be a list, got {_kind(items)}")
    specs = _global_delete_specs(items, spec)
    deletes = []
    for i, item in enumerate(items):
        d = content_file_from_json(item, specs, schema)
        if d.content == DataFileContent.DATA:
            raise r.error("delete-files", f"item {i} ({d.file_path}) is a data file, not a delete file")
        deletes.append(d)

    residual_json = r.get("residual-filter")
    residual: Expression = (
        AlwaysTrue()
        if residual_json is None
        else expression_from_json(residual_json, schema, what="file scan task 'residual-filter'")
    )
    start = r.opt_int("start")
    length = r.opt_int("length")
    if start is not None and start < 0:
        raise r.error("start", f"must be >= 0, got {start}")
    if length is not None and length < 0:
        raise r.error("length", f"must be >= 0, got {length}")
    return FileScanTask(data_file, tuple(deletes), residual, spec, schema, start or 0, length)
