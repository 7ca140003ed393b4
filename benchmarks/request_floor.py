"""The request floor of a cold selective plan: its three dependent requests alone, timed.

A cold plan cannot start its manifest list's request before the metadata JSON is parsed, nor
its manifests' before the list is: three round trips no planner can overlap. This times those
requests alone, for the objects a plan of that filter reads, in a fresh process per run (as
``plan.py`` measures its cells), through two clients:

- ``obstore``: one ``S3Store`` per bucket, built inside the clock with our store settings
  (``aioiceberg.io.obstore_s3.store_settings``), as ``ObstoreS3FileIO`` builds it in a plan;
- ``raw``: HTTP/1.1 over asyncio streams, unsigned (nginx does not check signatures), the first
  connection kept for the next stage and one new connection per extra concurrent request.
  Only for a plain ``http://`` path-style endpoint such as ``nginx_store.py``'s.

So a target below the ``raw`` time is below what the rig's network allows any client.

    .venv/bin/python benchmarks/request_floor.py META --options JSON --filter "day >= ..." [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import aioiceberg  # noqa: E402
from aioiceberg.io.obstore_s3 import store_settings  # noqa: E402
from aioiceberg.io.s3 import split_s3  # noqa: E402
from aioiceberg.io.s3_client import S3Options  # noqa: E402
from aioiceberg.runtime import Runtime  # noqa: E402
from aioiceberg.scan.plan_metrics import PlanMetrics  # noqa: E402

CLIENTS = ("obstore", "raw")
# what reqwest (under obstore) would route through a proxy: the raw client would not follow
_PROXY_VARIABLES = ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


@dataclass(frozen=True)
class PlanRequests:
    """The objects a plan reads, in the order it must: metadata, manifest list, manifests."""

    metadata: str
    manifest_list: str
    manifests: tuple[str, ...]


@dataclass(frozen=True)
class Floor:
    """One client's floor: medians over fresh processes of the whole and of each stage."""

    seconds: float
    stages: tuple[float, float, float]  # metadata, manifest list, manifests (each its median)
    runs: tuple[float, ...]


async def plan_requests(meta: str, options: Mapping[str, str], row_filter: str) -> PlanRequests:
    """What a plan of ``row_filter`` reads, found by the planner itself (untimed): the manifests
    its summaries keep, then checked against a real plan's count of manifests read."""
    async with Runtime() as runtime:  # its own caches: nothing another plan left decides
        table = await aioiceberg.load_table(meta, options, runtime=runtime)
        try:
            planner = table.scan(row_filter=row_filter or None).planner
            if planner.snapshot is None or planner.snapshot.manifest_list is None:
                raise ValueError(f"{meta}: no snapshot with a manifest list to plan")
            metrics = PlanMetrics()
            data, deletes = planner.select(await planner.manifests(metrics), metrics)
            chosen = tuple(mf.manifest_path for mf in (*deletes, *data))
            scan = table.scan(row_filter=row_filter or None)
            async for _ in scan.plan_files():
                pass
            read = scan.metrics.manifests_read + scan.metrics.manifests_from_cache
            if read != len(chosen):
                raise RuntimeError(f"{meta}: the plan read {read} manifests, the planner chose {len(chosen)}")
            return PlanRequests(table.metadata_location, planner.snapshot.manifest_list, chosen)
        finally:
            await table.io.aclose()


def raw_endpoint(options: Mapping[str, str]) -> tuple[str | None, str]:
    """(the endpoint the raw client can reach, or None, and why not)."""
    s3 = S3Options.from_storage_options(options)
    endpoint = s3.endpoint_url
    if endpoint is None or not endpoint.startswith("http://"):
        return None, f"raw sockets: only for a plain http:// endpoint, not {endpoint or 'AWS'}"
    if s3.path_style is False:
        return None, "raw sockets: only for path-style addressing"
    if any(os.environ.get(name) for name in _PROXY_VARIABLES):
        return None, "raw sockets: a proxy is configured, which obstore would go through"
    return endpoint, ""


def request_floor(requests: PlanRequests, options: Mapping[str, str], runs: int, client: str) -> Floor | None:
    """``client``'s floor over ``runs`` fresh processes (None: ``raw`` cannot reach this store)."""
    if client == "raw" and raw_endpoint(options)[0] is None:
        return None
    samples: list[dict[str, Any]] = []
    for _ in range(runs):
        cmd = [sys.executable, __file__, "--child", client, "--requests", json.dumps(asdict(requests))]
        cmd += ["--options", json.dumps(dict(options))]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(
                f"{client} request floor failed (exit {done.returncode}):\n{done.stderr[-3000:]}"
            )
        samples.append(json.loads(done.stdout.strip().splitlines()[-1]))
    stages = tuple(statistics.median(s["stages"][i] for s in samples) for i in range(3))
    return Floor(
        statistics.median(s["seconds"] for s in samples),
        (stages[0], stages[1], stages[2]),
        tuple(s["seconds"] for s in samples),
    )


# ---------------------------------------------------------------------------------------------
# The timed child: imports done, then the clock holds the client's start and three stages


async def _stages(
    requests: PlanRequests, start_client: Callable[[], Awaitable[Callable[[str, int], Awaitable[bytes]]]]
) -> dict[str, Any]:
    """``start_client()`` makes the client (inside the clock) and gives ``get(location, slot)``;
    slot 0 is the request that may reuse the connection the previous stage left."""
    start = time.perf_counter()
    get = await start_client()
    await get(requests.metadata, 0)
    first = time.perf_counter()
    await get(requests.manifest_list, 0)
    second = time.perf_counter()
    await asyncio.gather(*(get(path, i) for i, path in enumerate(requests.manifests)))
    end = time.perf_counter()
    return {"seconds": end - start, "stages": [first - start, second - first, end - second]}


async def _obstore(requests: PlanRequests, options: Mapping[str, str]) -> dict[str, Any]:
    import obstore  # obstore: optional (the s3 extra)
    from obstore.store import S3Store  # obstore: optional (the s3 extra)

    stores: dict[str, S3Store] = {}

    async def start_client() -> Callable[[str, int], Awaitable[bytes]]:
        config, client, provider = store_settings(S3Options.from_storage_options(options))

        async def get(location: str, _slot: int) -> bytes:
            bucket, key = split_s3(location)
            if bucket not in stores:  # as ObstoreS3FileIO: one store per bucket, made on first use
                stores[bucket] = S3Store(
                    bucket,
                    config=config,  # type: ignore[arg-type]
                    client_options=client,  # type: ignore[arg-type]
                    retry_config={"max_retries": 0},
                    credential_provider=provider,  # type: ignore[arg-type]
                )
            result = await obstore.get_async(stores[bucket], key)
            return bytes(await result.bytes_async())

        return get

    try:
        return await _stages(requests, start_client)
    finally:
        stores.clear()  # outside the clock; a pool left to the interpreter's exit can abort it


class _RawHttp:
    """Unsigned path-style GETs over HTTP/1.1: one kept connection, one more per extra request."""

    def __init__(self, endpoint: str) -> None:
        parts = urlsplit(endpoint)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self.host_header = parts.netloc
        self.kept: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.opened: list[asyncio.StreamWriter] = []

    async def _connection(self, slot: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        if slot == 0 and self.kept is not None:
            return self.kept
        conn = await asyncio.open_connection(self.host, self.port)
        self.opened.append(conn[1])
        if slot == 0:
            self.kept = conn
        return conn

    async def get(self, location: str, slot: int) -> bytes:
        bucket, key = split_s3(location)
        reader, writer = await self._connection(slot)
        writer.write(f"GET /{bucket}/{quote(key)} HTTP/1.1\r\nHost: {self.host_header}\r\n\r\n".encode())
        await writer.drain()
        status = await reader.readline()
        headers: dict[str, str] = {}
        while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if status.split()[1:2] != [b"200"]:
            raise RuntimeError(f"GET {location}: {status.decode('latin-1').strip()}")
        if "content-length" in headers:
            return await reader.readexactly(int(headers["content-length"]))
        if headers.get("transfer-encoding", "").lower() != "chunked":
            raise RuntimeError(f"GET {location}: neither Content-Length nor chunked")
        body = bytearray()
        while size := int((await reader.readline()).split(b";")[0], 16):
            body += await reader.readexactly(size)
            await reader.readline()
        await reader.readline()  # the empty trailer
        return bytes(body)

    async def close(self) -> None:
        for writer in self.opened:
            writer.close()
        await asyncio.gather(*(w.wait_closed() for w in self.opened), return_exceptions=True)


async def _raw(requests: PlanRequests, options: Mapping[str, str]) -> dict[str, Any]:
    endpoint, why = raw_endpoint(options)
    if endpoint is None:
        raise ValueError(why)
    http = _RawHttp(endpoint)

    async def start_client() -> Callable[[str, int], Awaitable[bytes]]:
        return http.get

    try:
        return await _stages(requests, start_client)
    finally:
        await http.close()  # outside the clock


def _child(client: str, requests: PlanRequests, options: Mapping[str, str]) -> None:
    run = _obstore if client == "obstore" else _raw
    print(json.dumps(asyncio.run(run(requests, options))), flush=True)
    # obstore's threads still tending the pool while the interpreter finalises abort it (SIGABRT,
    # ~1 run in 15 here, after the result was printed): nothing is left to clean up
    os._exit(0)


def describe(floor: Floor | None) -> str:
    """``0.071 s (23.5 + 21.4 + 26.4 ms)``, or ``-``."""
    if floor is None:
        return "-"
    return f"{floor.seconds:.3f} s ({' + '.join(f'{1000 * s:.1f}' for s in floor.stages)} ms)"


def main(argv: Sequence[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("meta", nargs="?", help="the table's metadata location")
    p.add_argument("--options", default="{}", help="storage options, JSON")
    p.add_argument("--filter", default="", help="the plan's row filter")
    p.add_argument("--runs", type=int, default=3, help="fresh processes per client (median)")
    p.add_argument("--child", choices=CLIENTS, help=argparse.SUPPRESS)
    p.add_argument("--requests", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    options: dict[str, str] = json.loads(args.options)
    if args.child:
        found = json.loads(args.requests)
        requests = PlanRequests(found["metadata"], found["manifest_list"], tuple(found["manifests"]))
        _child(args.child, requests, options)
        return
    if not args.meta:
        p.error("the metadata location is required")
    requests = asyncio.run(plan_requests(args.meta, options, args.filter))
    print(f"{len(requests.manifests)} manifests after {requests.manifest_list}")
    for client in CLIENTS:
        floor = request_floor(requests, options, args.runs, client)
        print(f"{client}: {describe(floor) if floor else raw_endpoint(options)[1]}")


if __name__ == "__main__":
    main()
