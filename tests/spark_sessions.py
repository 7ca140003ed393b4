"""A local SparkSession for a test module: one per module (each start costs a JVM)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from servers.jvm import QUICK_JVM
from servers.spark_cluster import session_builder

import aioiceberg.spark


def local_session(
    app: str, cores: int = 2, *, log_level: str = "ERROR", conf: Mapping[str, str] | None = None
) -> Iterator[Any]:
    """Yield a ``local[cores]`` session on 127.0.0.1 with the aioiceberg source registered,
    logs at ``log_level``, ``conf`` set and the quick JVM settings of the suite's other JVMs
    (C1 only, if this session starts the JVM); stopped after the module."""
    session = session_builder(
        f"local[{cores}]",
        app,
        {"spark.ui.showConsoleProgress": "false", "spark.driver.extraJavaOptions": QUICK_JVM, **(conf or {})},
    ).getOrCreate()
    session.sparkContext.setLogLevel(log_level)
    aioiceberg.spark.register(session)
    try:
        yield session
    finally:
        session.stop()
