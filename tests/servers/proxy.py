"""A latency and fault-injecting HTTP reverse proxy for S3-compatible servers.

Usable as a library (tests, benchmarks) and standalone:
``python tests/servers/proxy.py --target http://127.0.0.1:5000 --delay-ms 20 --slowdown-rate 0.3``.

Faults it reproduces:
* per-request delay with jitter (cloud latency);
* a fraction of requests answered ``503 SlowDown`` without forwarding them (or every
  request a filter picks: a heartbeat that never gets through);
* dropping the response of a forwarded request (the write landed, the client never hears);
* ``ignore_conditions``: strip ``If-None-Match`` / ``If-Match`` from PUTs before forwarding,
  simulating a store that ignores them. Those headers are covered by the SigV4 signature,
  so this works only against servers that do not verify signatures (moto does not by
  default); a verifying server would answer 403 instead.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "content-length",
}

SLOWDOWN_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message><RequestId>proxy</RequestId></Error>"
)

RequestFilter = Callable[[web.Request], bool]


NOT_IMPLEMENTED_BODY = (
    b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code>'
    b"<Message>A header you provided implies functionality that is not implemented</Message></Error>"
)


def conditional_put(request: web.Request) -> bool:
    """Matches PUTs carrying If-None-Match or If-Match."""
    return request.method == "PUT" and ("If-None-Match" in request.headers or "If-Match" in request.headers)


@dataclass
class FaultConfig:
    delay_ms: float = 0.0
    jitter_ms: float = 0.0
    slowdown_rate: float = 0.0
    drop_rate: float = 0.0
    drop_filter: RequestFilter | None = None
    drop_next: int = 0  # drop the responses of the next N requests matching drop_filter
    delay_filter: RequestFilter | None = None  # delay only matching requests (None: all)
    refuse_filter: RequestFilter | None = None  # answer matching requests 503 without forwarding
    unimplemented_filter: RequestFilter | None = None  # answer matching requests 501 without forwarding
    ignore_conditions: bool = False
    seed: int | None = None


@dataclass
class Stats:
    requests: int = 0
    slowdowns: int = 0
    dropped: int = 0
    stripped: int = 0
    by_method: dict[str, int] = field(default_factory=dict)


class FaultProxy:
    """Reverse proxy to ``target``; run it in a background thread with :meth:`start`."""

    def __init__(self, target: str, config: FaultConfig | None = None) -> None:
        self.target = target.rstrip("/")
        self.config = config or FaultConfig()
        self.stats = Stats()
        self.port = 0
        self._random = random.Random(self.config.seed)
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def reset(self) -> None:
        """Back to a transparent proxy (call between tests)."""
        with self._lock:
            self.config = FaultConfig()
            self.stats = Stats()

    def configure(self, **changes: object) -> None:
        with self._lock:
            for name, value in changes.items():
                if not hasattr(self.config, name):
                    raise AttributeError(name)
                setattr(self.config, name, value)

    # -- decisions (under the lock: the proxy thread and the test thread share them) --
    def _decide(self, request: web.Request) -> tuple[float, bool, bool, bool]:
        with self._lock:
            c = self.config
            self.stats.requests += 1
            self.stats.by_method[request.method] = self.stats.by_method.get(request.method, 0) + 1
            delay = max(0.0, c.delay_ms + self._random.uniform(-c.jitter_ms, c.jitter_ms)) / 1000
            if c.delay_filter is not None and not c.delay_filter(request):
                delay = 0.0
            slowdown = self._random.random() < c.slowdown_rate
            if c.refuse_filter is not None and c.refuse_filter(request):
                slowdown = True
            matches = c.drop_filter is None or c.drop_filter(request)
            drop = False
            if not slowdown and matches:
                if c.drop_next > 0:
                    c.drop_next -= 1
                    drop = True
                elif self._random.random() < c.drop_rate:
                    drop = True
            strip = c.ignore_conditions and conditional_put(request)
            if slowdown:
                self.stats.slowdowns += 1
            if drop:
                self.stats.dropped += 1
            if strip:
                self.stats.stripped += 1
            return delay, slowdown, drop, strip

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        delay, slowdown, drop, strip = self._decide(request)
        unimplemented = self.config.unimplemented_filter
        if unimplemented is not None and unimplemented(request):
            return web.Response(status=501, body=NOT_IMPLEMENTED_BODY, content_type="application/xml")
        if delay:
            await asyncio.sleep(delay)
        if slowdown:
            return web.Response(status=503, body=SLOWDOWN_BODY, content_type="application/xml")
        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        if strip:
            headers = {k: v for k, v in headers.items() if k.lower() not in {"if-none-match", "if-match"}}
        assert self._session is not None
        async with self._session.request(
            request.method,
            self.target + request.path_qs,
            headers=headers,
            data=body if body or request.method in {"PUT", "POST"} else None,
            allow_redirects=False,
        ) as upstream:
            payload = await upstream.read()
            if drop:
                if request.transport is not None:
                    request.transport.abort()
                return web.Response(status=500)
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in HOP_BY_HOP and key.lower() != "content-encoding":
                    response.headers.add(key, value)
            if request.method == "HEAD":
                response.content_length = int(upstream.headers.get("Content-Length", "0"))
            else:
                response.content_length = len(payload)
            await response.prepare(request)
            if request.method != "HEAD" and payload:
                await response.write(payload)
            await response.write_eof()
            return response

    async def serve(self, port: int = 0) -> None:
        """Start serving on the running loop (used by :meth:`start` and the CLI)."""
        # a dropped response makes aiohttp log a write to a closed transport: expected here
        logging.getLogger("aiohttp.server").setLevel(logging.CRITICAL)
        self._session = aiohttp.ClientSession(
            auto_decompress=False,
            skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=None),
        )
        app = web.Application(client_max_size=1 << 31)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def shutdown(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def start(self) -> FaultProxy:
        """Serve from a daemon thread with its own event loop; returns once listening."""
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.serve())
            except BaseException as exc:
                errors.append(exc)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.shutdown())
            loop.close()

        self._thread = threading.Thread(target=run, name="fault-proxy", daemon=True)
        self._thread.start()
        ready.wait(30)
        if errors:
            raise errors[0]
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--target", required=True, help="upstream base URL, e.g. http://127.0.0.1:5000")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--jitter-ms", type=float, default=0.0)
    parser.add_argument("--slowdown-rate", type=float, default=0.0)
    parser.add_argument("--drop-rate", type=float, default=0.0)
    parser.add_argument("--ignore-conditions", action="store_true")
    args = parser.parse_args(argv)
    config = FaultConfig(
        delay_ms=args.delay_ms,
        jitter_ms=args.jitter_ms,
        slowdown_rate=args.slowdown_rate,
        drop_rate=args.drop_rate,
        ignore_conditions=args.ignore_conditions,
    )
    proxy = FaultProxy(args.target, config)

    async def run() -> None:
        await proxy.serve(args.port)
        print(f"PROXY_URL={proxy.url}", flush=True)
        try:
            await asyncio.Event().wait()
        finally:
            await proxy.shutdown()

    try:
        asyncio.run(run())
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
