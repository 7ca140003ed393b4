"""Commits through a DynamoDB table: the commit point is a conditional PutItem of version N+1.

Items are keyed by table identity (``table_id``, the table location) and ``version``; the
latest version is one consistent query (newest first, limit 1). After the commit point
the metadata is also copied to ``v{N+1}.metadata.json`` plus the version hint, so readers
that do not use DynamoDB see the same history.

``mode="lease"`` is for stores without conditional writes (fsspec, plain HTTP stores):
a lease lock item (owner, lease id, heartbeat) serialises writers, who then write
``v{N+1}`` plainly; the store's capability probe is not needed. A lock is taken over only
when its lease id stayed unchanged for a whole lease period, and a commit whose heartbeat
lapsed is aborted before its commit point. A plain store cannot fence a write the
network delays past the lease, so ``lease_ms`` must exceed the store's worst write time.

The commit table is created on first use unless ``create_table=false``.

Retries go through :mod:`aioiceberg.retrying`: reads and conditional PutItems retry what
DynamoDB refused (throttling) or never answered (reads only); a commit item whose PutItem
had no clear answer is read back and re-sent only while absent. Waiting for a lease and for
a new table to become active are waits, not retries: their own loops, with a
:class:`~aioiceberg.retrying.Backoff` for the delays. The lease heartbeat is a schedule.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import re
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from aioiceberg.commit.protocols.base import (
    CommitProtocol,
    TableState,
    metadata_dir,
    parse_metadata_file,
    version_path,
)
from aioiceberg.commit.protocols.commit_point import CommitPoint, DynamoDbUri, commit_point_of
from aioiceberg.commit.protocols.conditional import (
    find_latest_version,
    resolve_unknown_create,
    update_version_hint,
)
from aioiceberg.errors import (
    CommitFailedError,
    CommitStateUnknownError,
    ConditionalWritesUnsupportedError,
    ObjectNotFoundError,
    PreconditionFailedError,
    StoreError,
    TableAlreadyExistsError,
    TableNotFoundError,
    WriteOutcomeUnknownError,
)
from aioiceberg.io.aws_connection import AwsConnection, service_connection
from aioiceberg.io.aws_errors import error_code, http_status
from aioiceberg.io.base import FileIO
from aioiceberg.retrying import Backoff, Retries, retry
from aioiceberg.spec.metadata import TableMetadata
from aioiceberg.spec.metadata_json import serialize_table_metadata

if TYPE_CHECKING:
    from aioiceberg.runtime import Runtime

__all__ = ["DynamoDbOptions", "DynamoDbProtocol", "LeaseLock"]

_THROTTLES = {
    "ThrottlingException",
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "LimitExceededException",
    "TransactionConflictException",
}

_CALLS = Backoff("DynamoDB call", base_delay_s=0.05, max_delay_s=2.0, max_attempts=8)
_TABLE_ACTIVE = Backoff(
    "DynamoDB table creation", base_delay_s=0.05, max_delay_s=1.0, max_attempts=None, deadline_s=60
)
_RESENDS = Backoff("DynamoDB commit item re-send", base_delay_s=0.05, max_delay_s=1.0, max_attempts=3)


@dataclass(frozen=True, slots=True, kw_only=True)
class DynamoDbOptions(AwsConnection):
    """Where the commit table lives; unset fields come from the standard AWS configuration."""

    table_name: str
    create_table: bool = True
    mode: str = "commit"  # or "lease"
    lease_ms: int = 10_000

    @classmethod
    def from_uri(cls, uri: str, storage_options: Mapping[str, Any] | None = None) -> DynamoDbOptions:
        """``dynamodb://TABLE?mode=lease&lease_ms=5000&create_table=false&endpoint=...``."""
        parsed = DynamoDbUri.parse(uri)
        options = dict(storage_options or {})
        connection, s3 = service_connection(
            "dynamodb", options, endpoint=parsed.endpoint, region=parsed.region
        )
        connection["region"] = connection["region"] or s3.region
        create_table = parsed.create_table
        if create_table is None:
            create_table = str(options.get("dynamodb.create-table", "true")).lower() not in _NO
        return cls(
            **connection,
            table_name=parsed.table,
            create_table=create_table,
            mode=parsed.mode,
            lease_ms=parsed.lease_ms if parsed.lease_ms is not None else 10_000,
        )


_NO = frozenset({"false", "0", "no"})
_VERSIONED_FILE = re.compile(r"^(\d{5,})-[0-9a-f]{32}\.metadata\.json$")


def _transient(exc: BaseException) -> bool:
    """Throttled, a server error, or no answer at all: the same read may succeed later."""
    code = error_code(exc)
    return not code or code in _THROTTLES or http_status(exc) >= 500


def _definite_refusal(exc: BaseException) -> bool:
    """The request was answered with an error that means it was not applied."""
    status = http_status(exc)
    return 400 <= status < 500


class _Dynamo:
    """Typed calls on the commit table, retried only where a retry cannot double-apply."""

    def __init__(self, options: DynamoDbOptions, runtime: Runtime) -> None:
        self.options = options
        self.runtime = runtime

    async def client(self) -> Any:
        connection = self.options.client_options()
        client = await self.runtime.clients.get(connection, "dynamodb")
        key = (*connection.client_key(), self.options.table_name)
        ready = self.runtime.dynamodb_ready
        if key not in ready:
            async with self.runtime.dynamodb_lock():
                if key not in ready:
                    await self._ensure_table(client)
                    ready.add(key)
        return client

    async def _ensure_table(self, client: Any) -> None:
        name = self.options.table_name
        try:
            await client.describe_table(TableName=name)
            return
        except Exception as exc:
            if error_code(exc) != "ResourceNotFoundException" or not self.options.create_table:
                raise StoreError(f"DynamoDB table {name}: {exc}", retryable=False) from exc
        try:
            await client.create_table(
                TableName=name,
                KeySchema=[
                    {"AttributeName": "table_id", "KeyType": "HASH"},
                    {"AttributeName": "version", "KeyType": "RANGE"},
                ],
                AttributeDefinitions=[
                    {"AttributeName": "table_id", "AttributeType": "S"},
                    {"AttributeName": "version", "AttributeType": "N"},
                ],
                BillingMode="PAY_PER_REQUEST",
            )
        except Exception as exc:
            if error_code(exc) != "ResourceInUseException":  # created concurrently
                raise StoreError(f"cannot create DynamoDB table {name}: {exc}") from exc
        started = time.monotonic()
        for waited in itertools.count():
            described = await client.describe_table(TableName=name)
            if described["Table"]["TableStatus"] == "ACTIVE":
                return
            if _TABLE_ACTIVE.exhausted(waited, time.monotonic() - started):
                raise StoreError(f"DynamoDB table {name} is not active after {waited} checks", retryable=True)
            await anyio.sleep(_TABLE_ACTIVE.delay(waited))

    async def call(self, method: str, **kwargs: Any) -> Any:
        """An idempotent call (reads), retried on throttling and transport errors."""

        async def attempt() -> Any:
            client = await self.client()
            try:
                return await getattr(client, method)(TableName=self.options.table_name, **kwargs)
            except Exception as exc:
                throttled = error_code(exc) in _THROTTLES
                raise StoreError(
                    f"DynamoDB {method}: {exc}", retryable=_transient(exc), throttled=throttled
                ) from exc

        return await retry(attempt, _CALLS)

    async def put_if_absent(self, item: dict[str, Any], condition: str, **extra: Any) -> str:
        """Conditional PutItem: "written", "exists", or "unknown" (may have landed).

        Only a throttled PutItem is sent again: DynamoDB refused it, so it was not applied."""

        async def attempt() -> str:
            client = await self.client()
            try:
                await client.put_item(
                    TableName=self.options.table_name, Item=item, ConditionExpression=condition, **extra
                )
                return "written"
            except Exception as exc:
                code = error_code(exc)
                if code == "ConditionalCheckFailedException":
                    return "exists"
                if code in _THROTTLES:
                    raise StoreError(f"DynamoDB PutItem: {exc}", retryable=True, throttled=True) from exc
                if code and _definite_refusal(exc):
                    raise StoreError(f"DynamoDB PutItem refused: {exc}") from exc
                return "unknown"

        return await retry(attempt, _CALLS)

    async def latest(self, table_id: str) -> dict[str, Any] | None:
        response = await self.call(
            "query",
            KeyConditionExpression="table_id = :t",
            ExpressionAttributeValues={":t": {"S": table_id}},
            ScanIndexForward=False,
            Limit=1,
            ConsistentRead=True,
        )
        items: list[dict[str, Any]] = response.get("Items", [])
        return items[0] if items else None

    async def get(self, table_id: str, version: int) -> dict[str, Any] | None:
        response = await self.call(
            "get_item", Key={"table_id": {"S": table_id}, "version": {"N": str(version)}}, ConsistentRead=True
        )
        item: dict[str, Any] | None = response.get("Item")
        return item


class LeaseLock:
    """A lease on one table, held in the commit table under ``lock#{table}`` at version 0.

    The holder renews by replacing ``lease_id`` (conditional on still being the owner). A
    waiter takes over only with a PutItem conditional on a lease id it watched stay
    unchanged for a whole lease, so a holder that keeps renewing is never displaced. The
    holder's deadline (``valid_until``) counts from *before* each renewal was sent, while a
    waiter's clock starts *after* it read that renewal: the holder's lease always ends
    before anyone can take over (clocks only need to run at the same rate).
    """

    def __init__(self, dynamo: _Dynamo, table_id: str, lease_ms: int) -> None:
        self.dynamo = dynamo
        self.key = {"table_id": {"S": f"lock#{table_id}"}, "version": {"N": "0"}}
        self.lease_ms = lease_ms
        self.owner = uuid.uuid4().hex
        self.lease_id = ""
        self.valid_until = 0.0  # monotonic: past it our lease may have been taken over
        self.lost = False
        self.in_flight = False  # a commit-point write was sent and not acknowledged

    @property
    def lease_s(self) -> float:
        return self.lease_ms / 1000

    def _item(self) -> dict[str, Any]:
        return {**self.key, "owner": {"S": self.owner}, "lease_id": {"S": self.lease_id}}

    def _granted(self, started: float) -> None:
        self.valid_until = started + self.lease_s
        self.lost = False

    async def acquire(self, timeout_s: float = 60.0) -> None:
        """Wait for the lease: create the lock item, or take over a lease that stopped moving.

        While the lease id keeps changing (or has not been still for a whole lease) the
        waiter only reads; it writes only to create a missing item or to take over.
        """
        await self.dynamo.client()  # creating the table must not eat into the first lease
        waits = Backoff(
            "commit lease wait",
            base_delay_s=0.01,
            max_delay_s=min(0.2, self.lease_s / 4),
            max_attempts=None,
            deadline_s=timeout_s,
        )
        started = time.monotonic()
        seen: tuple[str, float] | None = None  # (lease id, when first seen)
        sent: float | None = None  # when our latest lease id was sent
        waited = 0
        while True:
            if seen is None or time.monotonic() - seen[1] >= self.lease_s:
                self.lease_id = uuid.uuid4().hex
                sent = time.monotonic()
                if seen is None:
                    condition, extra = "attribute_not_exists(version)", {}
                else:  # unchanged for a whole lease: take over, conditional on that lease id
                    condition = "lease_id = :seen"
                    extra = {"ExpressionAttributeValues": {":seen": {"S": seen[0]}}}
                if await self.dynamo.put_if_absent(self._item(), condition, **extra) == "written":
                    self._granted(sent)
                    return
            current = await self._current()
            lease_id = current.get("lease_id", {}).get("S", "") if current is not None else None
            if sent is not None and lease_id == self.lease_id:  # an unacknowledged put that landed
                self._granted(sent)
                return
            now = time.monotonic()
            if waits.exhausted(waited, now - started):
                raise CommitFailedError(f"could not acquire the commit lease for {self.key['table_id']['S']}")
            if lease_id is None:
                seen = None  # released: create it again at once
                continue
            if seen is None or seen[0] != lease_id:
                seen = (lease_id, now)  # the holder is alive (or new): restart the clock
            # poll the holder, but wake no later than the moment a still lease may be taken over
            await anyio.sleep(max(0.0, min(waits.delay(waited), seen[1] + self.lease_s - now)))
            waited += 1

    async def _current(self) -> dict[str, Any] | None:
        response = await self.dynamo.call("get_item", Key=self.key, ConsistentRead=True)
        item: dict[str, Any] | None = response.get("Item")
        return item

    async def heartbeat(self) -> bool | None:
        """Renew the lease: True renewed, False lost to another owner, None no clear answer."""
        new_id = uuid.uuid4().hex
        started = time.monotonic()
        try:
            client = await self.dynamo.client()
            await client.update_item(
                TableName=self.dynamo.options.table_name,
                Key=self.key,
                UpdateExpression="SET lease_id = :new",
                ConditionExpression="#o = :owner",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":new": {"S": new_id}, ":owner": {"S": self.owner}},
            )
        except Exception as exc:
            if error_code(exc) == "ConditionalCheckFailedException":
                self.lost = True
                return False
            return None  # may have landed: harmless, the deadline just is not extended
        self.lease_id = new_id
        self._granted(started)
        return True

    def lapsed(self, margin_s: float = 0.0) -> bool:
        return self.lost or time.monotonic() + margin_s >= self.valid_until

    async def release(self) -> None:
        """Delete the lock item if it is still ours (owner-conditional, so a taker's stays)."""
        with contextlib.suppress(Exception):
            client = await self.dynamo.client()
            await client.delete_item(
                TableName=self.dynamo.options.table_name,
                Key=self.key,
                ConditionExpression="#o = :owner",
                ExpressionAttributeNames={"#o": "owner"},
                ExpressionAttributeValues={":owner": {"S": self.owner}},
            )

    async def _beat(self) -> None:
        period = self.lease_s / 3
        while not self.lost:
            await anyio.sleep(period)
            period = self.lease_s / 3 if await self.heartbeat() else self.lease_s / 10

    @contextlib.asynccontextmanager
    async def held(self) -> AsyncIterator[LeaseLock]:
        """Hold the lease, renewed in the background, for the body.

        After an unacknowledged commit-point write the lock item is left to expire instead
        of being released: the write may still land, and nobody may write before it would.
        """
        await self.acquire()
        # A plain task, not a task group around the body: the body's errors (CommitFailedError
        # and friends) must reach the retry loop as themselves, not inside an ExceptionGroup.
        beat = asyncio.ensure_future(self._beat())
        try:
            yield self
        finally:
            beat.cancel()
            with anyio.CancelScope(shield=True):
                await asyncio.wait([beat])
                if not self.in_flight:
                    with anyio.move_on_after(10):
                        await self.release()


class DynamoDbProtocol(CommitProtocol):
    def __init__(self, io: FileIO, options: DynamoDbOptions) -> None:
        self.io = io
        self.options = options
        self.dynamo = _Dynamo(options, io.runtime)

    @property
    def commit_point(self) -> CommitPoint:
        return CommitPoint("dynamodb", self.options.table_name, self.options.mode)

    def reader_files(self, state: TableState) -> list[str]:
        """The ``v{N}.metadata.json`` copies of the versions the metadata still logs."""
        location = state.metadata.location
        versions = {state.version}
        for entry in state.metadata.metadata_log:
            m = _VERSIONED_FILE.match(entry.metadata_file.rsplit("/", 1)[-1])
            if m is not None:
                versions.add(int(m.group(1)))
        return [version_path(location, v) for v in sorted(versions) if v > 0]

    async def publish_for_readers(self, state: TableState) -> None:
        table_location = state.metadata.location
        copy = version_path(table_location, state.version)
        if self.options.mode == "lease" or state.metadata_location == copy:
            await update_version_hint(self.io, table_location, state.version)
            return
        with contextlib.suppress(StoreError):
            data = await self.io.read(state.metadata_location)
            await self._copy_for_readers(table_location, state.version, data)

    @staticmethod
    def table_id(table_location: str) -> str:
        return table_location.rstrip("/")

    # the items are keyed by the table's location: they cannot follow its files elsewhere
    moves_with_files = False

    async def forget_table(self, table_location: str) -> None:
        """The items naming the table's versions (and its lease) go too, else it lives on."""
        table_id = self.table_id(table_location)
        for key in (table_id, f"lock#{table_id}"):
            start: dict[str, Any] | None = None
            while True:
                kwargs: dict[str, Any] = {
                    "KeyConditionExpression": "table_id = :t",
                    "ExpressionAttributeValues": {":t": {"S": key}},
                    "ProjectionExpression": "table_id, version",
                    "ConsistentRead": True,
                }
                if start is not None:
                    kwargs["ExclusiveStartKey"] = start
                page = await self.dynamo.call("query", **kwargs)
                for item in page.get("Items", []):
                    await self.dynamo.call(
                        "delete_item", Key={"table_id": item["table_id"], "version": item["version"]}
                    )
                start = page.get("LastEvaluatedKey")
                if not start:
                    break

    async def load(self, table_location: str, *, since: TableState | None = None) -> TableState:
        if self.options.mode == "lease":
            return await self._load_files(table_location, since)
        item = await self.dynamo.latest(self.table_id(table_location))
        if item is None:
            state = await self._load_files(table_location, since)
            recorded = commit_point_of(state.metadata)
            if recorded is not None and recorded.same_as(self.commit_point):
                # The table commits here, yet the commit table knows nothing of it: another
                # DynamoDB (endpoint, region, account) or a lost item. Adopting the copies
                # for readers would fork the history.
                raise TableNotFoundError(
                    f"{table_location} commits through DynamoDB table {self.options.table_name}, "
                    "which has no item for it: check the DynamoDB endpoint, region and account"
                )
            return state
        location = item["metadata_location"]["S"]
        version = int(item["version"]["N"])
        if since is not None and since.version == version and since.metadata_location == location:
            return since
        data = await self.io.read(location)
        return TableState(parse_metadata_file(self.io, data, location), location, version)

    async def _load_files(self, table_location: str, since: TableState | None) -> TableState:
        version = await find_latest_version(self.io, table_location, since.version if since else None)
        if version is None:
            raise TableNotFoundError(f"no table at {table_location}")
        location = version_path(table_location, version)
        try:
            data = await self.io.read(location)
        except ObjectNotFoundError as exc:
            raise TableNotFoundError(f"{location} vanished while loading") from exc
        return TableState(parse_metadata_file(self.io, data, location), location, version)

    async def create(self, table_location: str, metadata: TableMetadata) -> TableState:
        metadata = self.stamped(metadata)
        if await find_latest_version(self.io, table_location) is not None:
            raise TableAlreadyExistsError(f"a table exists at {table_location}")
        if self.options.mode == "lease":
            lock = LeaseLock(self.dynamo, self.table_id(table_location), self.options.lease_ms)
            async with lock.held():
                if await find_latest_version(self.io, table_location) is not None:
                    raise TableAlreadyExistsError(f"a table exists at {table_location}")
                return await self._write_version_file(table_location, 1, metadata, lock)
        try:
            return await self._commit_item(table_location, 1, metadata)
        except CommitFailedError as exc:
            raise TableAlreadyExistsError(f"a table exists at {table_location}") from exc

    async def swap(self, base: TableState, metadata: TableMetadata) -> TableState:
        table_location = base.metadata.location
        if self.options.mode == "lease":
            lock = LeaseLock(self.dynamo, self.table_id(table_location), self.options.lease_ms)
            async with lock.held():
                latest = await self._load_files(table_location, base)
                if latest.version != base.version:
                    raise CommitFailedError(f"{table_location} moved on to version {latest.version}")
                return await self._write_version_file(table_location, base.version + 1, metadata, lock)
        return await self._commit_item(table_location, base.version + 1, metadata)

    async def _write_version_file(
        self, table_location: str, version: int, metadata: TableMetadata, lock: LeaseLock
    ) -> TableState:
        """The lease-mode commit point: a plain write of ``v{version}``, only within the lease.

        The write must finish before the lease could pass to another writer, so it gets the
        lease's remaining time (at least a third of it) and is reported unknown past that.
        """
        location = version_path(table_location, version)
        data = serialize_table_metadata(metadata)
        if await self.io.exists(location):
            raise CommitFailedError(f"version {version} of {table_location} already exists")
        remaining = lock.valid_until - time.monotonic()
        if lock.lost or remaining < lock.lease_s / 3:
            raise CommitFailedError(
                f"the commit lease for {table_location} lapsed before the commit point (not renewed "
                f"within {lock.lease_ms} ms); v{version} was not written"
            )
        lock.in_flight = True
        try:
            with anyio.fail_after(remaining):
                await self.io.write(location, data)
        except TimeoutError:
            raise CommitStateUnknownError(
                f"{location}: the version write outlasted the commit lease; it may still land"
            ) from None
        except StoreError as exc:
            raise CommitStateUnknownError(f"{location}: the version write failed midway: {exc}") from exc
        lock.in_flight = False
        with contextlib.suppress(StoreError):
            await self.io.write(f"{metadata_dir(table_location)}/version-hint.text", str(version).encode())
        return TableState(metadata, location, version)

    async def _commit_item(self, table_location: str, version: int, metadata: TableMetadata) -> TableState:
        await self.dynamo.client()  # a missing or unreachable commit table fails before any write
        commit_id = uuid.uuid4().hex
        location = f"{metadata_dir(table_location)}/{version:05d}-{commit_id}.metadata.json"
        data = serialize_table_metadata(metadata)
        await self.io.write(location, data)
        table_id = self.table_id(table_location)
        item = {
            "table_id": {"S": table_id},
            "version": {"N": str(version)},
            "metadata_location": {"S": location},
            "commit_id": {"S": commit_id},
            "committed_ms": {"N": str(int(time.time() * 1000))},
        }
        resends = Retries(_RESENDS)
        while True:
            result = await self.dynamo.put_if_absent(item, "attribute_not_exists(version)")
            if result == "written":
                break
            try:
                found = await self.dynamo.get(table_id, version)
            except StoreError as exc:
                raise CommitStateUnknownError(
                    f"{table_location} v{version}: cannot read back: {exc}"
                ) from exc
            if found is not None:
                if found.get("commit_id", {}).get("S") == commit_id:
                    break  # ours landed unacknowledged
                with contextlib.suppress(StoreError):
                    await self.io.delete(location)
                raise CommitFailedError(
                    f"version {version} of {table_location} was committed by another writer"
                )
            # absent after an unknown outcome: send the same item again (it can land only once)
            unanswered = StoreError(
                f"{table_location} v{version}: no clear answer to the PutItem", retryable=True
            )
            if not await resends.wait_to_retry(unanswered):
                raise CommitStateUnknownError(
                    f"{table_location} v{version}: DynamoDB never answered clearly"
                ) from unanswered
        await self._copy_for_readers(table_location, version, data)
        return TableState(metadata, location, version)

    async def _copy_for_readers(self, table_location: str, version: int, data: bytes) -> None:
        """Best effort: the commit already happened; a missing copy only hides it from file readers."""
        path = version_path(table_location, version)
        try:
            try:
                await self.io.write_if_absent(path, data)
            except ConditionalWritesUnsupportedError:
                await self.io.write(path, data)
            except WriteOutcomeUnknownError:
                await resolve_unknown_create(self.io, path, data)
            except PreconditionFailedError:
                pass  # copied already (by this commit before a crash, or a repair)
            await update_version_hint(self.io, table_location, version)
        except (StoreError, CommitStateUnknownError):
            return
