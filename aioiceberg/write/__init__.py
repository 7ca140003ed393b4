"""Arrow -> data files: validation, partition split, Parquet writing and column metrics."""

from aioiceberg.write.add_files import data_files_from_parquet, read_parquet_footer
from aioiceberg.write.column_stats import (
    DataFileMetrics,
    MetricsMode,
    count_nans,
    metrics_from_parquet,
    metrics_modes,
    parse_metrics_mode,
)
from aioiceberg.write.conform import can_promote, conform_to_schema
from aioiceberg.write.location_provider import LocationProvider, partition_path
from aioiceberg.write.parquet_writer import (
    POSITION_DELETE_SCHEMA,
    ParquetOptions,
    write_data_files,
    write_equality_delete_file,
    write_position_delete_file,
)
from aioiceberg.write.partition_split import split_by_partition

__all__ = [
    "POSITION_DELETE_SCHEMA",
    "DataFileMetrics",
    "LocationProvider",
    "MetricsMode",
    "ParquetOptions",
    "can_promote",
    "conform_to_schema",
    "count_nans",
    "data_files_from_parquet",
    "metrics_from_parquet",
    "metrics_modes",
    "parse_metrics_mode",
    "partition_path",
    "read_parquet_footer",
    "split_by_partition",
    "write_data_files",
    "write_equality_delete_file",
    "write_position_delete_file",
]
