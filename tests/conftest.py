"""Shared test configuration. Server fixtures (moto, proxy, LocalStack) live in tests/servers/."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


pytest_plugins = ["servers.plugin"]
