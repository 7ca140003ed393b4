"""Load on ``aioiceberg serve``: N PyIceberg clients appending, on one table and on N tables,
with a ``kill -9`` of the server in the middle and a restart on the same warehouse.

Each client is its own process holding a PyIceberg 0.12 ``RestCatalog`` (as users would) and
appends small batches in a loop; every batch's rows carry ids that name the batch. An append
that raised ``CommitFailedException`` (a 409 PyIceberg no longer retries itself) is refused:
nothing landed, and the same batch is appended again. One whose commit got no answer (the
connection dropped, a 5xx, ``CommitStateUnknownException``) is unknown: the client waits for
the server and goes on with a new batch. A request the server never received (connection
refused while it is down) is sent again. After each phase the table is read straight from
the warehouse: every acknowledged batch must be there exactly once, every unknown one at
most once (whole or not at all), nothing else, and one snapshot per batch that landed; the
script exits non-zero otherwise.

    .venv/bin/python benchmarks/serve_load.py                        # 16 clients, 25 s per phase
    .venv/bin/python benchmarks/serve_load.py --clients 8 --seconds 10 --phases one,one-kill
    .venv/bin/python benchmarks/serve_load.py --token SECRET-OF-16-CHARS+   # serve with auth
    .venv/bin/python benchmarks/serve_load.py --tiny                 # seconds; what the test runs
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import select
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

NAMESPACE = "load"
ROWS_MAX = 1000  # ids of batch k are k * ROWS_MAX + 0..rows-1
PHASES = {
    # name: (one table for every client, kill -9 in the middle)
    "one": (True, False),
    "many": (False, False),
    "one-kill": (True, True),
    "many-kill": (False, True),
}
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("client", pa.int32())])
_URL = re.compile(r"http://\S+")
_SERVE = "from aioiceberg.cli import main; main()"
_RETRY_WARNING = "Commit failed due to a concurrent update"


# -- the server ----------------------------------------------------------------------------------
class Server:
    """``aioiceberg serve`` over ``warehouse`` as a child process; ``kill()`` is ``kill -9``,
    ``start()`` again listens on the same port."""

    def __init__(self, warehouse: str, log: Path, token: str | None, auth_file: str | None) -> None:
        self.warehouse = warehouse
        self.port = 0
        self.token = token
        self.auth_file = auth_file
        self.process: subprocess.Popen[str] | None = None
        self._log = log.open("a")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60) -> float:
        """Start and wait until it answers; the seconds that took."""
        begun = time.monotonic()
        args = [sys.executable, "-c", _SERVE, "--warehouse", self.warehouse, "serve"]
        args += ["--host", "127.0.0.1", "--port", str(self.port)]
        if self.auth_file:
            args += ["--auth-file", self.auth_file]
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        if self.token:
            env["AIOICEBERG_SERVE_TOKEN"] = self.token  # never on a command line
        self.process = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=self._log, text=True)
        assert self.process.stdout is not None
        deadline = begun + timeout
        while self.port == 0 or not self._answers():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit(f"aioiceberg serve did not start (see {self._log.name})")
            if self.port == 0:
                ready, _, _ = select.select([self.process.stdout], [], [], 0.1)
                found = _URL.search(self.process.stdout.readline()) if ready else None
                if found is not None:
                    self.port = int(found.group(0).rsplit(":", 1)[1].strip("/"))
            else:
                time.sleep(0.02)
        return time.monotonic() - begun

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/v1/config", timeout=1):
                return True
        except urllib.error.HTTPError:
            return True  # 401 without a token: up
        except OSError:
            return False

    def kill(self) -> None:
        """SIGKILL: no clean-up, requests in flight get no answer."""
        if self.process is not None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.process = None

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            if self.process.stdout is not None:
                self.process.stdout.close()
            self.process = None
        self._log.close()


# -- one client (a child process) ----------------------------------------------------------------
class _RetryCounter(logging.Handler):
    """Counts PyIceberg's own retries after a 409 (it logs a warning for each)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        if _RETRY_WARNING in record.getMessage():
            self.count += 1


def _never_sent(exc: BaseException) -> bool:
    """A connection the server refused (it is down): the request never reached it."""
    import urllib3.exceptions

    seen: BaseException | None = exc
    while seen is not None:
        for arg in getattr(seen, "args", ()):
            if isinstance(arg, urllib3.exceptions.MaxRetryError) and isinstance(
                arg.reason, urllib3.exceptions.NewConnectionError
            ):
                return True
        if isinstance(seen, urllib3.exceptions.NewConnectionError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _catalog(url: str, token: str | None) -> Any:
    from pyiceberg.catalog.rest import RestCatalog

    properties = {"uri": url, **({"token": token} if token else {})}
    return RestCatalog("load", **properties)


def _reload(catalog: Any, name: str, until: float) -> Any:
    """The table, once the server answers again; None if it stays silent well past ``until``."""
    while time.time() < until + 60:  # the table is needed even past the end
        try:
            return catalog.load_table(name)
        except Exception:
            time.sleep(0.05)
    return None


def _client_phase(catalog: Any, client: int, phase: dict[str, Any], retries: _RetryCounter) -> dict[str, Any]:
    import pyarrow as pa
    import requests
    from pyiceberg.exceptions import (
        CommitFailedException,
        CommitStateUnknownException,
        ServerError,
        ServiceUnavailableError,
    )

    rows, until = int(phase["rows"]), float(phase["until"])
    table = _reload(catalog, phase["table"], until)
    if table is None:
        raise SystemExit(f"client {client}: the server never answered")
    retries.count = 0
    batches: list[dict[str, Any]] = []
    refused = not_sent = 0
    errors: Counter[str] = Counter()
    time.sleep(max(0.0, float(phase["start"]) - time.time()))
    seq = 0
    while time.time() < until:
        key = (int(phase["number"]) * 1000 + client) * 1_000_000 + seq
        seq += 1
        ids = pa.array([key * ROWS_MAX + k for k in range(rows)], pa.int64())
        data = pa.table({"id": ids, "client": pa.array([client] * rows, pa.int32())}, schema=SCHEMA)
        began = time.monotonic()
        outcome = ""
        while not outcome:
            try:
                table.append(data)
                outcome = "acked"
            except CommitFailedException:  # a 409 PyIceberg gave up on: nothing landed
                refused += 1
            except (CommitStateUnknownException, ServerError, ServiceUnavailableError) as exc:
                errors[type(exc).__name__] += 1  # a 5xx: it may have landed
                outcome = "unknown"
            except requests.exceptions.ConnectionError as exc:
                if _never_sent(exc):
                    not_sent += 1
                else:
                    outcome = "unknown"  # sent, and the connection dropped
            except requests.exceptions.RequestException as exc:
                errors[type(exc).__name__] += 1
                outcome = "unknown"
            if not outcome:
                if time.time() >= until:
                    outcome = "abandoned"  # last told: not landed
                    break
                table = _reload(catalog, phase["table"], until)
                if table is None:
                    outcome = "abandoned"
                    break
        batches.append({"key": key, "outcome": outcome, "s": time.monotonic() - began})
        if outcome == "unknown":
            table = _reload(catalog, phase["table"], until)
            if table is None:
                break
    return {
        "client": client,
        "batches": batches,
        "retries_409": retries.count,
        "refused": refused,
        "not_sent": not_sent,
        "errors": dict(errors),
        "end": time.time(),
    }


def client_main() -> None:
    """Read a hello, then one phase per line from stdin; answer each with a JSON line."""
    retries = _RetryCounter()
    logging.getLogger("pyiceberg").addHandler(retries)
    logging.getLogger("pyiceberg").propagate = False  # its warnings would flood stderr
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # what PyIceberg prints goes to stderr, not into the answers
    hello = json.loads(sys.stdin.readline())
    catalog = _catalog(hello["url"], hello.get("token"))
    print(json.dumps({"ready": True}), file=answers, flush=True)
    for line in sys.stdin:
        phase = json.loads(line)
        if phase.get("stop"):
            return
        answer = _client_phase(catalog, int(hello["client"]), phase, retries)
        print(json.dumps(answer), file=answers, flush=True)


# -- the run -------------------------------------------------------------------------------------
@dataclass
class PhaseResult:
    name: str
    clients: int
    tables: int
    seconds: float
    acked: int = 0
    unknown: int = 0
    unknown_landed: int = 0
    abandoned: int = 0
    retries_409: int = 0
    refused: int = 0
    not_sent: int = 0
    down_s: float = 0.0
    latencies: list[float] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.acked / self.seconds if self.seconds else 0.0

    def percentile(self, q: int) -> float:
        if len(self.latencies) < 2:
            return self.latencies[0] if self.latencies else 0.0
        return statistics.quantiles(self.latencies, n=100, method="inclusive")[q - 1]


class Clients:
    """The client processes, kept for every phase (Python and PyIceberg start once)."""

    def __init__(self, n: int, url: str, token: str | None) -> None:
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self.procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--client"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=env,
                text=True,
            )
            for _ in range(n)
        ]
        for i, proc in enumerate(self.procs):
            self._send(proc, {"url": url, "token": token, "client": i})
        for proc in self.procs:
            self._receive(proc)

    @staticmethod
    def _send(proc: subprocess.Popen[str], message: dict[str, Any]) -> None:
        stdin: IO[str] | None = proc.stdin
        assert stdin is not None
        stdin.write(json.dumps(message) + "\n")
        stdin.flush()

    @staticmethod
    def _receive(proc: subprocess.Popen[str]) -> dict[str, Any]:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"a client exited with {proc.wait()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(self, phases: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for proc, phase in zip(self.procs, phases, strict=True):
            self._send(proc, phase)
        return [self._receive(proc) for proc in self.procs]

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                self._send(proc, {"stop": True})
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _create_tables(url: str, token: str | None, names: list[str]) -> None:
    catalog = _catalog(url, token)
    if (NAMESPACE,) not in catalog.list_namespaces():
        catalog.create_namespace(NAMESPACE)
    for name in names:
        catalog.create_table(name, schema=SCHEMA)


def _read_back(warehouse: str, name: str) -> tuple[list[int], int]:
    """The table's ids and snapshot count, read from the warehouse without the server."""
    import asyncio

    import aioiceberg

    async def read() -> tuple[list[int], int]:
        async with aioiceberg.connect(warehouse) as catalog:
            table = await catalog.load_table(name)
            ids = (await table.scan().to_arrow()).column("id").to_pylist()
            return ids, len(table.snapshots())

    return asyncio.run(read())


def _check(
    result: PhaseResult, outs: list[dict[str, Any]], found: dict[str, tuple[list[int], int]], rows: int
) -> None:
    """Every acknowledged batch once, every unknown one whole or absent, nothing else."""
    outcome = {b["key"]: b["outcome"] for o in outs for b in o["batches"]}
    counts: Counter[int] = Counter(i for ids, _ in found.values() for i in ids)
    per_batch: dict[int, list[int]] = {}
    for i, n in counts.items():
        per_batch.setdefault(i // ROWS_MAX, []).append(n)
    for key, state in outcome.items():
        present = per_batch.get(key, [])
        if any(n > 1 for n in present):
            result.problems.append(f"batch {key} ({state}) duplicated")
        if state == "acked" and not present:
            result.problems.append(f"acknowledged batch {key} lost")
        if state in ("acked", "unknown") and present and len(present) != rows:
            result.problems.append(f"batch {key} ({state}) partly present")
        if state == "abandoned" and present:
            result.problems.append(f"batch {key} refused but present")
        if state == "unknown" and present:
            result.unknown_landed += 1
    strangers = set(per_batch) - set(outcome)
    if strangers:
        result.problems.append(f"{len(strangers)} batches in the table that no client appended")
    snapshots = sum(n for _, n in found.values())
    landed = sum(1 for key in outcome if key in per_batch)
    if snapshots != landed:
        result.problems.append(f"{snapshots} snapshots for {landed} batches that landed")


def run_phase(
    number: int,
    name: str,
    server: Server,
    clients: Clients,
    n: int,
    seconds: float,
    rows: int,
    token: str | None,
) -> PhaseResult:
    one_table, kill = PHASES[name]
    tables = [f"{NAMESPACE}.{name.replace('-', '_')}_{'all' if one_table else i}" for i in range(n)]
    names = sorted(set(tables))
    _create_tables(server.url, token, names)
    start = time.time() + 1.0
    until = start + seconds
    phase = {"number": number, "rows": rows, "start": start, "until": until}
    result = PhaseResult(name, n, len(names), seconds)
    if kill:
        import threading

        def kill_and_restart() -> None:
            time.sleep(max(0.0, start + seconds / 2 - time.time()))
            server.kill()
            result.down_s = server.start()

        killer = threading.Thread(target=kill_and_restart)
        killer.start()
    outs = clients.run([{**phase, "table": table} for table in tables])
    if kill:
        killer.join()
    result.seconds = max(o["end"] for o in outs) - start
    for o in outs:
        result.retries_409 += o["retries_409"]
        result.refused += o["refused"]
        result.not_sent += o["not_sent"]
        for b in o["batches"]:
            setattr(result, b["outcome"], getattr(result, b["outcome"]) + 1)
            if b["outcome"] == "acked":
                result.latencies.append(b["s"])
        for kind, count in o["errors"].items():
            print(f"  client {o['client']}: {count} x {kind}", file=sys.stderr)
    _check(result, outs, {t: _read_back(server.warehouse, t) for t in names}, rows)
    return result


def _print_table(results: list[PhaseResult]) -> None:
    print(
        "\n| phase | clients | tables | seconds | appends acked | commits/s | p50 s | p95 s "
        "| 409s (PyIceberg retried) | re-appends after 409 | unknown (landed) | server down s "
        "| resent after refused connection | lost or duplicated |"
    )
    print("| --- " * 14 + "|")
    for r in results:
        down = f"{r.down_s:.1f}" if PHASES[r.name][1] else "-"
        print(
            f"| {r.name} | {r.clients} | {r.tables} | {r.seconds:.1f} | {r.acked} | {r.rate:.1f} "
            f"| {r.percentile(50):.3f} | {r.percentile(95):.3f} | {r.retries_409 + r.refused} "
            f"({r.retries_409}) | {r.refused} | {r.unknown} ({r.unknown_landed}) | {down} "
            f"| {r.not_sent} | {len(r.problems)} |"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--tiny", action="store_true", help="3 clients, 2 s per phase")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=25.0, help="per phase")
    parser.add_argument("--rows", type=int, default=10, help="rows per append")
    parser.add_argument("--phases", default=",".join(PHASES), help=f"some of {','.join(PHASES)}")
    parser.add_argument("--scratch", help="the warehouse goes here (default: a temporary folder)")
    parser.add_argument(
        "--token", help="serve with this bearer token (AIOICEBERG_SERVE_TOKEN, >= 16 chars); clients send it"
    )
    parser.add_argument("--auth-file", help="passed to serve --auth-file (give --token of a principal in it)")
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        client_main()
        return
    n, seconds = (3, 2.0) if args.tiny else (args.clients, args.seconds)
    names = [p.strip() for p in args.phases.split(",") if p.strip()]
    unknown = [p for p in names if p not in PHASES]
    if unknown or not 0 < args.rows < ROWS_MAX or n < 1:
        raise SystemExit(f"bad arguments: phases {unknown}, rows {args.rows}, clients {n}")
    results: list[PhaseResult] = []
    with tempfile.TemporaryDirectory(dir=args.scratch) as scratch:
        warehouse = os.path.join(scratch, "warehouse")
        server = Server(warehouse, Path(scratch, "serve.log"), args.token, args.auth_file)
        clients: Clients | None = None
        try:
            server.start()
            print(f"aioiceberg serve on {server.url}, warehouse {warehouse}; {n} clients", flush=True)
            clients = Clients(n, server.url, args.token)
            for number, name in enumerate(names):
                result = run_phase(number, name, server, clients, n, seconds, args.rows, args.token)
                results.append(result)
                print(
                    f"{name:<10} {result.acked:>5} appends acked in {result.seconds:6.1f} s = "
                    f"{result.rate:6.1f}/s, p50 {result.percentile(50):.3f} s, p95 "
                    f"{result.percentile(95):.3f} s, 409s {result.retries_409 + result.refused}, "
                    f"unknown {result.unknown} ({result.unknown_landed} landed), "
                    f"problems {len(result.problems)}",
                    flush=True,
                )
                for problem in result.problems[:10]:
                    print(f"  {problem}", file=sys.stderr)
        finally:
            if clients is not None:
                clients.close()
            server.stop()
    _print_table(results)
    if any(r.problems for r in results):
        raise SystemExit("acknowledged appends lost, or batches duplicated or invented")


if __name__ == "__main__":
    main()
