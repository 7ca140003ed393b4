"""Which data files Spark's own Parquet reader returns exactly as aioiceberg would.

Spark matches Parquet columns to the requested schema by field id when
``spark.sql.parquet.fieldId.read.enabled`` is on: renames, reordering, dropped and
added columns then read as Iceberg says. What it cannot do is what aioiceberg's reader
adds on top: delete files, a name mapping for files written without ids, identity
partition values or initial defaults for columns a file lacks, and types it does not
hold exactly (uuid, fixed, time, nanoseconds, int96). ``native_file`` decides per file
from the file's own Parquet schema (its footer), so such files go to aioiceberg's reader
and the rest to Spark's. The footers are read here too, and the paths Spark can be handed
found: by the driver, or by the executors when they plan (``distributed_read``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import pyarrow as pa
import pyarrow.parquet as pq

from aioiceberg.io.base import FileIO
from aioiceberg.io.local import existing_path
from aioiceberg.io.resolve import scheme_of
from aioiceberg.spark.columns import spark_type_name
from aioiceberg.spark.s3a import s3a_location
from aioiceberg.spec.arrow import field_id_of
from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.schema import Schema
from aioiceberg.spec.transforms import IdentityTransform
from aioiceberg.spec.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    MapType,
    NestedField,
    PrimitiveType,
    StringType,
    StructType,
    TimestampType,
    TimestamptzType,
)
from aioiceberg.write.add_files import read_parquet_footer

__all__ = [
    "FIELD_ID_METADATA",
    "FIELD_ID_READ_CONF",
    "known_files_frame",
    "local_footers",
    "native_file",
    "spark_holds_exactly",
    "spark_local_path",
    "spark_read_schema",
    "spark_s3a_url",
    "store_footers",
]

FIELD_ID_READ_CONF = "spark.sql.parquet.fieldId.read.enabled"
FIELD_ID_METADATA = "parquet.field.id"  # the StructField metadata key Spark matches ids by
_BLOCK_SIZE = 32 * 1024 * 1024  # S3A's default fs.s3a.block.size: what its own listing reports
_AWKWARD_CHARS = frozenset("*?[]{}\\:")  # Spark globs its paths; Hadoop refuses ':' in them
_FOOTER_THREADS = 8
_STORE_FOOTERS = 32  # footer reads in flight against an object store


def spark_local_path(file_path: str) -> str | None:
    """The local file system path of a data file Spark can be handed, or None."""
    if scheme_of(file_path) != "file":
        return None
    try:
        path = existing_path(file_path)  # Java's escaped folders (p=a%2Fb) as written
    except ValueError:
        return None
    return None if _AWKWARD_CHARS.intersection(path) else path


def spark_s3a_url(file_path: str) -> str | None:
    """The ``s3a://`` URL of a data file on S3 Spark can be handed, or None."""
    url = s3a_location(file_path)
    if url is None or _AWKWARD_CHARS.intersection(url.removeprefix("s3a://")):
        return None
    return url


def _footer_schema(path: str) -> pa.Schema | None:
    try:
        return pq.read_schema(path)
    except Exception:  # unreadable here: aioiceberg's reader reports it properly
        return None


def local_footers(paths: list[str]) -> list[pa.Schema | None]:
    """The Arrow schemas of local Parquet files' footers (None: unreadable)."""
    if len(paths) <= _FOOTER_THREADS:  # a few local footers: threads cost more than they save
        return [_footer_schema(p) for p in paths]
    with ThreadPoolExecutor(_FOOTER_THREADS) as pool:
        return list(pool.map(_footer_schema, paths))


async def store_footers(io: FileIO, locations: list[str]) -> list[tuple[pa.Schema, int] | None]:
    """The Arrow schemas of Parquet footers in an object store and the files' sizes as the
    store reports them, read concurrently (None: unreadable)."""
    found: list[tuple[pa.Schema, int] | None] = [None] * len(locations)
    limit = anyio.CapacityLimiter(_STORE_FOOTERS)

    async def one(i: int) -> None:
        async with limit:
            try:
                metadata, size = await read_parquet_footer(io, locations[i])
                found[i] = (metadata.schema.to_arrow_schema(), size)
            except Exception:  # unreadable here: aioiceberg's reader reports it properly
                found[i] = None

    async with anyio.create_task_group() as tg:
        for i in range(len(locations)):
            tg.start_soon(one, i)
    return found


def spark_holds_exactly(t: IcebergType) -> bool:
    """Whether Spark's Parquet reader returns this type as aioiceberg's source declares it."""
    if isinstance(t, StructType):
        return all(spark_holds_exactly(f.field_type) for f in t.fields)
    if isinstance(t, ListType):
        return spark_holds_exactly(t.element_field.field_type)
    if isinstance(t, MapType):
        return spark_holds_exactly(t.key_field.field_type) and spark_holds_exactly(t.value_field.field_type)
    return isinstance(t, PrimitiveType) and spark_type_name(t) is not None


def _file_type_matches(t: PrimitiveType, actual: pa.DataType) -> bool:
    """Whether a file column of Arrow type ``actual`` reads into Iceberg type ``t`` unchanged in Spark."""
    if isinstance(t, BooleanType):
        return bool(pa.types.is_boolean(actual))
    if isinstance(t, IntegerType):
        return bool(pa.types.is_int32(actual))
    if isinstance(t, LongType):  # int -> long promotion: Spark widens INT32 itself
        return bool(pa.types.is_int64(actual) or pa.types.is_int32(actual))
    if isinstance(t, FloatType):
        return bool(pa.types.is_float32(actual))
    if isinstance(t, DoubleType):  # float -> double promotion
        return bool(pa.types.is_float64(actual) or pa.types.is_float32(actual))
    if isinstance(t, DecimalType):
        return bool(
            pa.types.is_decimal(actual) and (actual.precision, actual.scale) == (t.precision, t.scale)
        )
    if isinstance(t, DateType):
        return bool(pa.types.is_date32(actual))
    if isinstance(t, TimestampType | TimestamptzType):
        tz_wanted = isinstance(t, TimestamptzType)
        return bool(
            pa.types.is_timestamp(actual) and actual.unit == "us" and (actual.tz is not None) == tz_wanted
        )
    if isinstance(t, StringType):
        return bool(pa.types.is_string(actual) or pa.types.is_large_string(actual))
    if isinstance(t, BinaryType):
        return bool(pa.types.is_binary(actual) or pa.types.is_large_binary(actual))
    return False


def _by_id(fields: Iterable[pa.Field]) -> dict[int, pa.Field] | None:
    found: dict[int, pa.Field] = {}
    for f in fields:
        fid = field_id_of(f)
        if fid is None or fid in found:
            return None  # no ids (a name mapping's job) or ambiguous ones
        found[fid] = f
    return found


def _type_matches(
    t: IcebergType, actual: pa.DataType, identity_sources: frozenset[int] = frozenset()
) -> bool:
    if isinstance(t, StructType):
        if not pa.types.is_struct(actual):
            return False
        return _struct_matches(
            t.fields, [actual.field(i) for i in range(actual.num_fields)], identity_sources
        )
    if isinstance(t, ListType):
        if not (pa.types.is_list(actual) or pa.types.is_large_list(actual)):
            return False
        return _child_matches(t.element_field, actual.value_field)
    if isinstance(t, MapType):
        if not pa.types.is_map(actual):
            return False
        return _child_matches(t.key_field, actual.key_field) and _child_matches(
            t.value_field, actual.item_field
        )
    return isinstance(t, PrimitiveType) and _file_type_matches(t, actual)


def _child_matches(expected: NestedField, actual: pa.Field) -> bool:
    fid = field_id_of(actual)
    return (fid is None or fid == expected.field_id) and _type_matches(expected.field_type, actual.type)


def _struct_matches(
    expected: Iterable[NestedField], actual: list[pa.Field], identity_sources: frozenset[int]
) -> bool:
    present = _by_id(actual)
    if present is None:
        return False
    for field in expected:
        column = present.get(field.field_id)
        if column is None:
            # Spark reads a missing column as null: right only for an optional column with no
            # initial default that is not an identity partition's source (whose value is the
            # partition's)
            if field.required or field.initial_default is not None:
                return False
            if field.field_id in identity_sources:
                return False
            continue
        if not _type_matches(field.field_type, column.type, identity_sources):
            return False
    return True


def native_file(schema: Schema, spec: PartitionSpec, file_schema: pa.Schema) -> bool:
    """Whether Spark, matching by field id, reads this file's rows as aioiceberg would.

    ``file_schema`` is the Arrow schema of the file's Parquet footer (with field ids).
    """
    identity = frozenset(f.source_id for f in spec.fields if isinstance(f.transform, IdentityTransform))
    return _struct_matches(schema.fields, list(file_schema), identity)


def spark_read_schema(schema: Schema, spark_schema: Any) -> Any:
    """``spark_schema`` (the source's schema for ``schema``) with every struct field's id attached."""
    # pyspark: optional (the spark extra)
    from pyspark.sql.types import ArrayType, StructField
    from pyspark.sql.types import MapType as SparkMap
    from pyspark.sql.types import StructType as SparkStruct

    def attach(t: IcebergType, st: Any) -> Any:
        if isinstance(t, StructType):
            return SparkStruct(
                [
                    StructField(
                        sf.name,
                        attach(f.field_type, sf.dataType),
                        sf.nullable,
                        {FIELD_ID_METADATA: f.field_id},
                    )
                    for f, sf in zip(t.fields, st.fields, strict=True)
                ]
            )
        if isinstance(t, ListType):
            return ArrayType(attach(t.element_field.field_type, st.elementType), st.containsNull)
        if isinstance(t, MapType):
            return SparkMap(
                attach(t.key_field.field_type, st.keyType),
                attach(t.value_field.field_type, st.valueType),
                st.valueContainsNull,
            )
        return st

    return attach(schema.as_struct, spark_schema)


def known_files_frame(
    spark: Any, sizes: Mapping[str, int], schema: Any, options: Mapping[str, str]
) -> Any | None:
    """``spark.read.schema(schema).options(**options).parquet(*sizes)`` without Spark's listing.

    ``spark.read.parquet`` checks that each path exists and lists it for its file index:
    on S3A two HEADs and a LIST per file before any action (the sizes are known here from
    the footer reads). Spark's reader takes no sizes, so this builds the same relation (an
    in-memory file index, no partition columns, as Spark infers for file paths) from file
    statuses given to it. It uses Spark's internal classes over Py4J: None (the caller uses
    the public reader) where they differ or are out of reach (Spark Connect).
    """
    try:
        jvm = spark.sparkContext._jvm
        gateway = spark.sparkContext._gateway
        jspark = spark._jsparkSession
        sources = jvm.org.apache.spark.sql.execution.datasources
        utils = jvm.org.apache.spark.api.python.PythonUtils
        option = jvm.scala.Option
        hadoop_fs = jvm.org.apache.hadoop.fs
        # a client of its own of the session's status cache, emptied once the index holds them
        cache = sources.FileStatusCache.getOrCreate(jspark)
        paths = []
        for url, size in sizes.items():
            path = hadoop_fs.Path(url)
            leaf = gateway.new_array(hadoop_fs.FileStatus, 1)
            leaf[0] = hadoop_fs.FileStatus(size, False, 1, _BLOCK_SIZE, 0, path)
            cache.putLeafFiles(path, leaf)
            paths.append(path)
        jschema = jspark.parseDataType(schema.json())
        no_partitions = jvm.org.apache.spark.sql.types.StructType()
        jopts = utils.toScalaMap(dict(options))
        try:
            index = sources.InMemoryFileIndex(
                jspark,
                utils.toSeq(paths),
                jopts,
                option.apply(jschema),
                cache,
                option.apply(sources.PartitionSpec(no_partitions, utils.toSeq([]))),
                option.empty(),
            )
        finally:
            cache.invalidateAll()
        relation = sources.HadoopFsRelation(
            index,
            no_partitions,
            jschema,
            option.empty(),
            sources.parquet.ParquetFileFormat(),
            jopts,
            jspark,
        )
        frame = jspark.baseRelationToDataFrame(relation)
    except Exception as e:  # pyspark/py4j: Spark's internals moved, or a Connect session
        logging.getLogger("aioiceberg.spark").debug(
            "read_table: Spark's file index could not be given the files (%s); spark.read.parquet lists them",
            e,
        )
        return None
    from pyspark.sql import DataFrame  # pyspark: optional (the spark extra)

    return DataFrame(frame, spark)
