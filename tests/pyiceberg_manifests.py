"""Tables written by PyIceberg (v1 and v2, four partition specs, with appends, a delete and
an overwrite): their manifests and manifest lists are what our decoders are compared on."""

from __future__ import annotations

import datetime as dt
import random
import shutil
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField as PyPartitionField
from pyiceberg.partitioning import PartitionSpec as PyPartitionSpec
from pyiceberg.schema import Schema as PySchema
from pyiceberg.transforms import (
    BucketTransform,
    DayTransform,
    HourTransform,
    IdentityTransform,
    TruncateTransform,
)
from pyiceberg.types import DateType as PyDateType
from pyiceberg.types import DecimalType as PyDecimalType
from pyiceberg.types import DoubleType as PyDoubleType
from pyiceberg.types import LongType as PyLongType
from pyiceberg.types import NestedField as PyNestedField
from pyiceberg.types import StringType as PyStringType
from pyiceberg.types import TimestampType as PyTimestampType


def _batch(seed: int) -> pa.Table:
    rng = random.Random(seed)
    n = 12
    base = dt.datetime(2024, 5, 1)
    return pa.table(
        {
            "id": pa.array([rng.randrange(1, 40) if i % 5 else None for i in range(n)], pa.int64()),
            "name": pa.array([rng.choice(["alpha", "beta", "gamma", None]) for _ in range(n)], pa.string()),
            "region": pa.array([rng.choice(["eu", "us", None]) for _ in range(n)], pa.string()),
            "ts": pa.array(
                [base + dt.timedelta(hours=rng.randrange(0, 72)) if i % 4 else None for i in range(n)],
                pa.timestamp("us"),
            ),
            "d": pa.array([rng.choice([1.5, -2.0, float("nan"), None]) for _ in range(n)], pa.float64()),
            "day": pa.array([dt.date(2024, 5, 1 + rng.randrange(0, 3)) for _ in range(n)], pa.date32()),
            "amount": pa.array(
                [Decimal(rng.randrange(0, 500)) / 100 for _ in range(n)], pa.decimal128(10, 2)
            ),
        }
    )


PY_SCHEMA = PySchema(
    PyNestedField(1, "id", PyLongType(), required=False),
    PyNestedField(2, "name", PyStringType(), required=False),
    PyNestedField(3, "region", PyStringType(), required=False),
    PyNestedField(4, "ts", PyTimestampType(), required=False),
    PyNestedField(5, "d", PyDoubleType(), required=False),
    PyNestedField(6, "day", PyDateType(), required=False),
    PyNestedField(7, "amount", PyDecimalType(10, 2), required=False),
)

PY_SPECS = {
    "ibtd": PyPartitionSpec(
        PyPartitionField(3, 1000, IdentityTransform(), "region"),
        PyPartitionField(1, 1001, BucketTransform(8), "id_bucket"),
        PyPartitionField(2, 1002, TruncateTransform(2), "name_trunc"),
        PyPartitionField(4, 1003, DayTransform(), "ts_day"),
    ),
    "hour": PyPartitionSpec(
        PyPartitionField(4, 1000, HourTransform(), "ts_hour"),
        PyPartitionField(6, 1001, IdentityTransform(), "day"),
        PyPartitionField(7, 1002, IdentityTransform(), "amount"),
    ),
    "none": PyPartitionSpec(),
}


def load_or_write_tables(tmp_path_factory: pytest.TempPathFactory) -> list[Any]:
    """Tables v1/v2 x specs, each with three appends, a delete and an overwrite, for a module's
    fixture. Three modules use them: written once per session (worker) under the session's
    base temp folder, then loaded by the next module (the folder counts only once ``written``
    is there)."""
    pytest.importorskip(
        "pyiceberg_core", reason="PyIceberg needs pyiceberg-core for bucket/truncate/day/hour"
    )

    wh = tmp_path_factory.getbasetemp() / "pyiceberg_manifests_wh"
    done = wh / "written"
    if done.exists():
        catalog = SqlCatalog("test", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
        return [catalog.load_table(f"db.{n}_v{v}") for v in (1, 2) for n in PY_SPECS]
    if wh.exists():  # an earlier build stopped half way
        shutil.rmtree(wh)
    wh.mkdir()
    catalog = SqlCatalog("test", uri=f"sqlite:///{wh}/catalog.db", warehouse=f"file://{wh}")
    catalog.create_namespace("db")
    tables = []
    for version in (1, 2):
        for name, spec in PY_SPECS.items():
            table = catalog.create_table(
                f"db.{name}_v{version}",
                PY_SCHEMA,
                partition_spec=spec,
                properties={"format-version": str(version)},
            )
            for seed in range(3):
                table.append(_batch(seed))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                table.delete("id < 10")
                table.overwrite(_batch(7), overwrite_filter="region = 'eu'")
            tables.append(catalog.load_table(f"db.{name}_v{version}"))
    done.touch()
    return tables


def local_path(path: str) -> Path:
    """The file a ``file://`` location names."""
    return Path(path.removeprefix("file://"))
