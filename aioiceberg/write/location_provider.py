"""Where new data and delete files go.

The layout is Java's and PyIceberg's default: ``{write.data.path}/{partition path}/{name}``
with ``write.data.path`` defaulting to ``{table location}/data``. Names carry a random
per-writer id, so concurrent writers (other processes, other engines) never collide
without coordinating.
"""

from __future__ import annotations

import itertools
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from aioiceberg.spec.partitioning import PartitionSpec
from aioiceberg.spec.properties import TableProperties
from aioiceberg.spec.schema import Schema

__all__ = ["WRITE_DATA_PATH", "LocationProvider", "partition_path"]

WRITE_DATA_PATH = TableProperties.data_path.key


def partition_path(spec: PartitionSpec, values: Sequence[Any], schema: Schema) -> str:
    """The partition directory for a tuple (empty for an unpartitioned spec)."""
    return spec.partition_path(values, schema) if spec.fields else ""


class LocationProvider:
    """Hands out unique data-file locations for one write (one provider per write job)."""

    def __init__(
        self,
        table_location: str,
        properties: TableProperties | Mapping[str, str] | None = None,
        write_id: str | None = None,
    ) -> None:
        """``write_id`` names every file of one write job (e.g. all tasks of a Spark job), so a
        failed job's files can be found and removed even when their task never reported them."""
        data_path = TableProperties.of(properties).data_path
        self.data_path = data_path if data_path is not None else f"{table_location.rstrip('/')}/data"
        self.write_id = write_id or uuid.uuid4().hex
        self._counter = itertools.count(1)
        self._lock = threading.Lock()

    def new_file_name(self, *, task: int = 0, partition_index: int = 0, extension: str = "parquet") -> str:
        """``{partition:05d}-{task}-{write uuid}-{sequence:05d}.{ext}``, Java's naming scheme."""
        with self._lock:
            seq = next(self._counter)
        return f"{partition_index:05d}-{task}-{self.write_id}-{seq:05d}.{extension}"

    def new_data_location(self, file_name: str, partition: str = "") -> str:
        """The full location of ``file_name`` under the partition directory ``partition``."""
        return f"{self.data_path}/{partition}/{file_name}" if partition else f"{self.data_path}/{file_name}"
