"""Commits through the fault proxy: lost responses, 409 conflicts and 503 storms."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from aiohttp import web
from commit_helpers import ARROW_SCHEMA, FAST_RETRY, rows, run_writer, s3_options
from servers.backends import create_bucket
from servers.moto import MotoServer
from servers.proxy import FaultProxy, conditional_put

import aioiceberg
from aioiceberg.errors import CommitStateUnknownError

pytestmark = pytest.mark.usefixtures("aws_clients_closed")


class ConflictProxy(FaultProxy):
    """Answers the next ``conflicts`` conditional PUTs with 409 ConditionalRequestConflict."""

    conflicts = 0
    answered = 0

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if self.conflicts > 0 and conditional_put(request):
            self.conflicts -= 1
            self.answered += 1
            body = (
                b"<?xml version='1.0' encoding='UTF-8'?><Error><Code>ConditionalRequestConflict</Code>"
                b"<Message>conflict</Message></Error>"
            )
            return web.Response(status=409, body=body, content_type="application/xml")
        return await super()._handle(request)


@pytest.fixture
def conflict_proxy(moto_server: MotoServer) -> Iterator[ConflictProxy]:
    with ConflictProxy(moto_server.url) as proxy:
        yield proxy


def metadata_put(request: web.Request) -> bool:
    return conditional_put(request) and request.path.endswith(".metadata.json")


def dynamodb_put_item(request: web.Request) -> bool:
    return request.headers.get("X-Amz-Target", "").endswith(".PutItem")


async def committed_ids(root: str, options: dict[str, str], lock: str | None = None) -> list[int]:
    from pyiceberg.table import StaticTable

    table = await aioiceberg.connect(root, lock=lock, storage_options=options).load_table("db.events")
    props = {k: v for k, v in options.items() if k.startswith("s3.") and k != "s3.path-style-access"}
    static = StaticTable.from_metadata(table.metadata_location, properties=props)
    return sorted(static.scan().to_arrow().column("id").to_pylist())


@pytest.mark.anyio
@pytest.mark.parametrize("lock", [None, "dynamodb"])
async def test_lost_response_after_a_landed_commit_never_duplicates_the_append(
    fault_proxy: FaultProxy, moto_endpoint: str, lock: str | None
) -> None:
    bucket = await create_bucket(moto_endpoint)
    root = f"s3://{bucket}/warehouse"
    lock_uri = f"dynamodb://faults_{bucket[-8:]}" if lock else None
    options = s3_options(fault_proxy.url)
    catalog = aioiceberg.connect(root, lock=lock_uri, storage_options=options)
    table = await catalog.create_table("db.events", schema=ARROW_SCHEMA, properties=FAST_RETRY)
    await table.append(rows("w0", 0))
    fault_proxy.configure(drop_filter=dynamodb_put_item if lock else metadata_put, drop_next=1)
    outcome = "success"
    try:
        await table.append(rows("w0", 10))
    except CommitStateUnknownError:
        outcome = "unknown"
    assert fault_proxy.stats.dropped == 1
    ids = await committed_ids(root, s3_options(moto_endpoint), lock_uri)
    assert ids in ([0, 1, 2, 10, 11, 12], [0, 1, 2]) if outcome == "unknown" else ids == [0, 1, 2, 10, 11, 12]
    fresh = await catalog.load_table("db.events")
    assert len(fresh.snapshots()) == len(ids) // 3


@pytest.mark.anyio
async def test_injected_409_conflicts_are_retried(conflict_proxy: ConflictProxy, moto_endpoint: str) -> None:
    bucket = await create_bucket(moto_endpoint)
    root = f"s3://{bucket}/warehouse"
    options = s3_options(conflict_proxy.url)
    catalog = aioiceberg.connect(root, storage_options=options)
    table = await catalog.create_table("db.events", schema=ARROW_SCHEMA, properties=FAST_RETRY)
    conflict_proxy.conflicts = 3
    await table.append(rows("w0", 0))
    assert conflict_proxy.answered == 3
    assert await committed_ids(root, s3_options(moto_endpoint)) == [0, 1, 2]


@pytest.mark.anyio
async def test_slowdown_storm_delays_but_does_not_fail_commits(
    fault_proxy: FaultProxy, moto_endpoint: str
) -> None:
    bucket = await create_bucket(moto_endpoint)
    root = f"s3://{bucket}/warehouse"
    # a request fails ten times running with p = 0.3**10: over the ~500 requests of this
    # test that is a failure in a few hundred runs with the default budget, so widen it
    options = {**s3_options(fault_proxy.url), "s3.retry-max-attempts": "30"}
    catalog = aioiceberg.connect(root, storage_options=options)
    await catalog.create_table("db.events", schema=ARROW_SCHEMA, properties=FAST_RETRY)
    fault_proxy.configure(slowdown_rate=0.3, seed=7)
    results = await asyncio.gather(
        *(run_writer(root, None, options, "db.events", f"w{i}", 3) for i in range(4))
    )
    assert fault_proxy.stats.slowdowns > 0
    fault_proxy.reset()
    acknowledged = sorted(i for r in results for i in r)
    assert len(acknowledged) == 36
    assert await committed_ids(root, s3_options(moto_endpoint)) == acknowledged
