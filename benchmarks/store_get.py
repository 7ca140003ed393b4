"""Small-object GETs/s (and client CPU per GET) through aioiceberg.io (obstore, and its
aiobotocore backend) vs raw aiobotocore vs s3fs, same server, same run.

    python benchmarks/store_get.py            # ~3 s per cell, against moto
    python benchmarks/store_get.py --tiny     # seconds-long smoke run
    python benchmarks/store_get.py --latency-ms 20   # through the latency proxy (cloud-like)
    python benchmarks/store_get.py --store nginx --latency-ms 20   # static files, echo_sleep delay

One moto process serves ~450 small GETs/s on a 2-core machine; once every client reaches
that ceiling the ratio measures moto, not the client. Use --latency-ms to see client
overhead under realistic round trips, and ``--store nginx`` (nginx_store.py: next to no
server CPU per GET, connections kept open) to measure the clients rather than the server.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from servers.moto import FAKE_CREDENTIALS, MotoServer  # noqa: E402

from aioiceberg.io import S3FileIO, resolve_io  # noqa: E402
from aioiceberg.runtime import close_all_clients, default_runtime  # noqa: E402

os.environ.update({k: os.environ.get(k, v) for k, v in FAKE_CREDENTIALS.items()})

Getter = Callable[[str], Awaitable[bytes]]
BUCKET = "bench"


def start_proxy(target: str, latency_ms: float) -> tuple[subprocess.Popen[str], str]:
    """The fault proxy in its own process, so its CPU is not charged to the clients."""
    proc = subprocess.Popen(
        [
            *(sys.executable, str(ROOT / "tests" / "servers" / "proxy.py"), "--target", target),
            *("--delay-ms", str(latency_ms), "--jitter-ms", str(latency_ms / 4)),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("PROXY_URL="):
        proc.kill()
        raise RuntimeError(f"proxy did not start: {line!r}")
    return proc, line.split("=", 1)[1]


async def measure(get: Getter, keys: list[str], concurrency: int, seconds: float) -> tuple[float, float]:
    """(GETs/s, this process's CPU ms per GET: every thread, so a client's own runtime counts)."""
    done = 0
    deadline = time.perf_counter() + seconds

    async def worker() -> None:
        # At least one GET each: on a loaded machine a short cell's deadline can pass before a
        # worker first runs, and a cell of zero GETs says nothing about the client.
        nonlocal done
        rng = random.Random()
        while True:
            await get(rng.choice(keys))
            done += 1
            if time.perf_counter() >= deadline:
                return

    start, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return done / (time.perf_counter() - start), 1000 * (time.process_time() - cpu) / max(1, done)


async def run(endpoint: str, args: argparse.Namespace, upload: bool) -> list[tuple[int, dict[str, float]]]:
    """``upload``: PUT the objects first (moto); nginx serves files written beforehand."""
    from aiobotocore.config import AioConfig
    from aiobotocore.session import AioSession
    from s3fs import S3FileSystem

    max_c = max(args.concurrency)
    storage = {
        "s3.endpoint": endpoint,
        "s3.region": "us-east-1",
        "s3.path-style-access": "true",
        "s3.max-concurrency": str(max_c),
    }
    ours = resolve_io(f"s3://{BUCKET}/", storage, runtime=default_runtime())  # the default S3 path (obstore)
    ours_botocore = S3FileIO(storage).bind_runtime(default_runtime())
    raw_ctx = AioSession().create_client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        config=AioConfig(max_pool_connections=max_c, s3={"addressing_style": "path"}),
    )
    raw = await raw_ctx.__aenter__()
    fs = S3FileSystem(
        asynchronous=True,
        skip_instance_cache=True,
        client_kwargs={"endpoint_url": endpoint, "region_name": "us-east-1"},
        config_kwargs={"max_pool_connections": max_c},
    )
    await fs.set_session()

    keys = object_keys(args.objects)
    if upload:
        await raw.create_bucket(Bucket=BUCKET)
        body = os.urandom(args.size)
        await asyncio.gather(*(raw.put_object(Bucket=BUCKET, Key=k, Body=body) for k in keys))

    async def get_ours(key: str) -> bytes:
        return await ours.read(f"s3://{BUCKET}/{key}")

    async def get_ours_botocore(key: str) -> bytes:
        return await ours_botocore.read(f"s3://{BUCKET}/{key}")

    async def get_raw(key: str) -> bytes:
        response = await raw.get_object(Bucket=BUCKET, Key=key)
        async with response["Body"] as stream:
            data: bytes = await stream.read()
        return data

    async def get_s3fs(key: str) -> bytes:
        data: bytes = await fs._cat_file(f"{BUCKET}/{key}")
        return data

    getters: dict[str, Getter] = {
        "aioiceberg": get_ours,
        "aioiceberg-aiobotocore": get_ours_botocore,
        "aiobotocore": get_raw,
        "s3fs": get_s3fs,
    }
    for get in getters.values():  # warm connections and caches
        await measure(get, keys, 4, args.seconds / 5)
    rows: list[tuple[int, dict[str, tuple[float, float]]]] = []
    for concurrency in args.concurrency:
        rates: dict[str, list[tuple[float, float]]] = {name: [] for name in getters}
        for _ in range(args.rounds):  # interleave so drift hits every client alike
            for name, get in getters.items():
                rates[name].append(await measure(get, keys, concurrency, args.seconds))
        rows.append((concurrency, {name: sorted(v)[len(v) // 2] for name, v in rates.items()}))
    await ours.aclose()
    await ours_botocore.aclose()
    await close_all_clients()
    await raw_ctx.__aexit__(None, None, None)
    await fs._s3creator.__aexit__(None, None, None)
    return rows


def object_keys(count: int) -> list[str]:
    return [f"obj/{i:05d}" for i in range(count)]


def report(rows: list[tuple[int, dict[str, tuple[float, float]]]], latency_ms: float, store: str) -> str:
    lines = [
        f"small-object GETs/s (client CPU ms per GET) against {store} (median of rounds; latency "
        f"{latency_ms} ms); aioiceberg = the default S3 path (obstore), aioiceberg-aiobotocore = "
        "io.backend=aiobotocore",
        "| concurrency | aioiceberg | aioiceberg-aiobotocore | aiobotocore | s3fs | ours/aiobotocore "
        "| ours/s3fs |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for concurrency, r in rows:
        cells = " | ".join(
            f"{r[name][0]:.0f} ({r[name][1]:.2f})"
            for name in ("aioiceberg", "aioiceberg-aiobotocore", "aiobotocore", "s3fs")
        )
        lines.append(
            f"| {concurrency} | {cells} | {ratio(r['aioiceberg'][0], r['aiobotocore'][0])} "
            f"| {ratio(r['aioiceberg'][0], r['s3fs'][0])} |"
        )
    return "\n".join(lines)


def ratio(ours: float, theirs: float) -> str:
    return f"{ours / theirs:.2f}" if theirs > 0 else "n/a"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="seconds-long smoke run")
    parser.add_argument("--seconds", type=float, default=3.0, help="duration of one cell")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--objects", type=int, default=200)
    parser.add_argument("--size", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32, 128])
    parser.add_argument(
        "--latency-ms", type=float, default=0.0, help="moto: through the latency proxy; nginx: echo_sleep"
    )
    parser.add_argument("--store", choices=["moto", "nginx"], default="moto")
    args = parser.parse_args(argv)
    if args.tiny:
        args.seconds, args.rounds, args.objects = 0.15, 1, 20
    if args.store == "nginx":
        rows = run_nginx(args)
        if rows is None:  # nginx missing: the store printed what to install
            return
    else:
        with MotoServer() as moto:
            proxy = None
            endpoint = moto.url
            if args.latency_ms:
                proxy, endpoint = start_proxy(moto.url, args.latency_ms)
            try:
                rows = asyncio.run(run(endpoint, args, upload=True))
            finally:
                if proxy is not None:
                    proxy.terminate()
                    proxy.wait()
    print(report(rows, args.latency_ms, args.store))


def run_nginx(args: argparse.Namespace) -> list[tuple[int, dict[str, float]]] | None:
    """The same objects as files under a temporary folder, served by nginx (delay: echo_sleep)."""
    import tempfile

    from benchmarks.nginx_store import start_or_skip

    with tempfile.TemporaryDirectory(prefix="store-get-") as tmp:
        body = os.urandom(args.size)
        for key in object_keys(args.objects):
            path = Path(tmp, BUCKET, key)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(body)
        nginx = start_or_skip(tmp, args.latency_ms)
        if nginx is None:
            return None
        try:
            return asyncio.run(run(nginx.url, args, upload=False))
        finally:
            nginx.stop()


if __name__ == "__main__":
    main()
