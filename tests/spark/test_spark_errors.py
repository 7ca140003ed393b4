"""The Spark data source over a broken table: the query fails with a message that names the
broken object and the IcebergError class (Spark wraps the Python error in its own)."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("pyspark")

from broken_tables import _break_data_file, _break_manifest, _table, _truncate
from spark_sessions import local_session

from aioiceberg.table import Table


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    yield from local_session("aioiceberg-error-tests", log_level="OFF", conf={"spark.task.maxFailures": "1"})


BREAKAGES: dict[str, tuple[Callable[[Table], Awaitable[str]], str]] = {  # -> the class named
    "data-file": (lambda t: _break_data_file(t, _truncate), "CorruptFileError"),
    "manifest": (_break_manifest, "CorruptFileError"),
}


@pytest.mark.parametrize("broken", list(BREAKAGES))
def test_reading_a_broken_table_fails_naming_the_object(spark: Any, broken: str, tmp_path: Path) -> None:
    breakage, error_class = BREAKAGES[broken]

    async def setup() -> tuple[str, str]:
        table = await _table(tmp_path / "wh")
        return table.location, await breakage(table)

    location, victim = anyio.run(setup)
    with pytest.raises(Exception) as info:
        spark.read.format("aioiceberg").load(location).collect()
    message = str(info.value)
    assert os.path.basename(victim) in message, message
    assert error_class in message, message
