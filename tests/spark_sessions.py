"""A local SparkSession for a test module: one per module (each start costs a JVM)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from servers.jvm import QUICK_JVM
from servers.spark_cluster import session_builder

import aioiceberg.spark


def local_session(app: str, cores: int = 2) -> Iterator[Any]:
    """Yield a ``local[cores]`` session with the aioiceberg source registered, quiet logs and
    the quick JVM settings of the suite's other JVMs; stopped after the module."""
    session = session_builder(
        f"local[{cores}]",
        app,
        {"spark.ui.showConsoleProgress": "false", "spark.driver.extraJavaOptions": QUICK_JVM},
    ).getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    aioiceberg.spark.register(session)
    try:
        yield session
    finally:
        session.stop()
