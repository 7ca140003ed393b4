"""``aioiceberg serve`` as an Iceberg REST catalog: real PyIceberg 0.12 RestCatalog and DuckDB
1.5.5 clients over HTTP against the real server process, on a local warehouse.

One server per module (tests use their own namespaces) keeps the start-up cost to one process.
"""

from __future__ import annotations

import itertools
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog as PyCatalog
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, NestedField, StringType
from servers.rest import RestServer, request_json

import aioiceberg

SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=True),
    NestedField(2, "region", StringType(), required=False),
)
ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("region", pa.string())])
BY_REGION = PartitionSpec(
    PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="region")
)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    with RestServer(str(tmp_path_factory.mktemp("rest") / "warehouse")) as rest:
        yield rest


def client(server: RestServer) -> PyCatalog:
    return load_catalog("rest", type="rest", uri=server.url)


@pytest.fixture
def catalog(server: RestServer) -> PyCatalog:
    return client(server)


@pytest.fixture
def ns(catalog: PyCatalog) -> str:
    name = f"ns_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(name)
    return name


def rows(table: Any) -> list[dict[str, Any]]:
    return sorted(table.scan().to_arrow().to_pylist(), key=lambda r: r["id"])


def batch(ids: list[int], regions: list[str]) -> pa.Table:
    return pa.table({"id": ids, "region": regions}, schema=ARROW)


# -- PyIceberg ---------------------------------------------------------------------------------
def test_pyiceberg_writes_evolves_and_reads_back_through_the_server(catalog: PyCatalog) -> None:
    name = f"db_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(name, {"owner": "data-eng", "team": "core"})
    assert catalog.load_namespace_properties(name) == {"owner": "data-eng", "team": "core"}
    table = catalog.create_table(f"{name}.events", schema=SCHEMA, partition_spec=BY_REGION)
    assert table.spec().fields[0].name == "region"

    table.append(batch([1, 2, 3], ["eu", "us", "eu"]))
    table.append(batch([4], ["ap"]))
    table.overwrite(batch([10, 11], ["eu", "eu"]), overwrite_filter="region == 'eu'")
    with table.update_schema() as update:
        update.add_column("score", LongType())
    evolved = pa.schema([*ARROW, pa.field("score", pa.int64())])
    table.append(pa.table({"id": [20], "region": ["us"], "score": [7]}, schema=evolved))

    reloaded = catalog.load_table(f"{name}.events")
    assert [f.name for f in reloaded.schema().fields] == ["id", "region", "score"]
    assert rows(reloaded) == [
        {"id": 2, "region": "us", "score": None},
        {"id": 4, "region": "ap", "score": None},
        {"id": 10, "region": "eu", "score": None},
        {"id": 11, "region": "eu", "score": None},
        {"id": 20, "region": "us", "score": 7},
    ]
    assert len(reloaded.history()) == 4 + 1  # appends, overwrite's delete + append, append


def test_namespaces_list_properties_and_drop(catalog: PyCatalog) -> None:
    top = f"top_{uuid.uuid4().hex[:8]}"
    catalog.create_namespace(top)
    catalog.create_namespace((top, "child"), {"a": "1", "b": "2"})
    assert (top,) in catalog.list_namespaces()
    assert catalog.list_namespaces(top) == [(top, "child")]
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace(top)

    summary = catalog.update_namespace_properties((top, "child"), removals={"a", "zz"}, updates={"c": "3"})
    assert (summary.removed, summary.updated, summary.missing) == (["a"], ["c"], ["zz"])
    assert catalog.load_namespace_properties((top, "child")) == {"b": "2", "c": "3"}

    catalog.create_table((top, "child", "t"), schema=SCHEMA)
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace((top, "child"))
    catalog.drop_table((top, "child", "t"))
    catalog.drop_namespace((top, "child"))
    assert not catalog.namespace_exists((top, "child"))
    with pytest.raises(NoSuchNamespaceError):
        catalog.load_namespace_properties((top, "child"))
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_namespaces(f"missing_{uuid.uuid4().hex[:8]}")


def test_tables_list_rename_drop_and_errors(catalog: PyCatalog, ns: str, server: RestServer) -> None:
    table = catalog.create_table(f"{ns}.a", schema=SCHEMA)
    table.append(batch([1], ["eu"]))
    catalog.create_table(f"{ns}.b", schema=SCHEMA)
    assert sorted(catalog.list_tables(ns)) == [(ns, "a"), (ns, "b")]
    paged = load_catalog("paged", type="rest", uri=server.url, **{"rest-page-size": "1"})
    assert sorted(paged.list_tables(ns)) == [(ns, "a"), (ns, "b")]
    assert catalog.table_exists(f"{ns}.a") and not catalog.table_exists(f"{ns}.nope")

    with pytest.raises(TableAlreadyExistsError):
        catalog.create_table(f"{ns}.a", schema=SCHEMA)
    with pytest.raises(NoSuchTableError):
        catalog.load_table(f"{ns}.nope")
    with pytest.raises(NoSuchNamespaceError):
        catalog.create_table(f"missing_{uuid.uuid4().hex[:8]}.t", schema=SCHEMA)

    renamed = catalog.rename_table(f"{ns}.a", f"{ns}.c")
    assert rows(renamed) == [{"id": 1, "region": "eu"}]
    assert not catalog.table_exists(f"{ns}.a")
    with pytest.raises(TableAlreadyExistsError):
        catalog.rename_table(f"{ns}.c", f"{ns}.b")
    with pytest.raises(NoSuchTableError):
        catalog.rename_table(f"{ns}.a", f"{ns}.d")

    location = Path(catalog.load_table(f"{ns}.c").location())
    catalog.drop_table(f"{ns}.b")
    catalog.purge_table(f"{ns}.c")
    assert catalog.list_tables(ns) == []
    left = [p.name for p in location.rglob("*") if p.is_file() and p.name != ".aioiceberg.lock"]
    assert left == []  # data files, manifests and metadata are gone
    with pytest.raises(NoSuchTableError):
        catalog.drop_table(f"{ns}.b")


def test_register_brings_back_a_dropped_table(catalog: PyCatalog, ns: str) -> None:
    table = catalog.create_table(f"{ns}.t", schema=SCHEMA)
    table.append(batch([1, 2], ["eu", "us"]))
    catalog.drop_table(f"{ns}.t")
    kept = sorted((Path(table.location()) / "metadata").glob("*-dropped-*.metadata.json"))
    assert len(kept) == 1
    registered = catalog.register_table(f"{ns}.t", str(kept[0]))
    assert rows(registered) == [{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}]
    with pytest.raises(TableAlreadyExistsError):
        catalog.register_table(f"{ns}.t", str(kept[0]))


def test_staged_create_lands_with_its_first_snapshot(catalog: PyCatalog, ns: str) -> None:
    transaction = catalog.create_table_transaction(f"{ns}.staged", schema=SCHEMA, partition_spec=BY_REGION)
    assert not catalog.table_exists(f"{ns}.staged")
    transaction.append(batch([1, 2], ["eu", "us"]))
    transaction.commit_transaction()
    table = catalog.load_table(f"{ns}.staged")
    assert rows(table) == [{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}]
    assert len(table.history()) == 1
    assert [p.name for p in (Path(table.location()) / "metadata").glob("00000-*.metadata.json")] == []

    again = catalog.create_table_transaction(f"{ns}.staged2", schema=SCHEMA)
    catalog.create_table(f"{ns}.staged2", schema=SCHEMA)  # someone else creates the name first
    with pytest.raises(CommitFailedException):
        again.commit_transaction()


# -- concurrency -------------------------------------------------------------------------------
def test_concurrent_clients_and_a_direct_writer_each_land_exactly_once(
    server: RestServer, catalog: PyCatalog, ns: str
) -> None:
    """4 PyIceberg clients x 3 appends through the server, while a direct aioiceberg writer
    takes versions behind the server's back: every acknowledged append is there once, and
    the history is one line."""
    from aioiceberg import sync

    properties = {
        "commit.retry.num-retries": "50",
        "commit.retry.min-wait-ms": "5",
        "commit.retry.max-wait-ms": "200",
    }
    location = catalog.create_table(f"{ns}.hot", schema=SCHEMA, properties=properties).location()
    acknowledged: list[int] = []
    errors: list[BaseException] = []
    lock = threading.Lock()
    start = threading.Barrier(5)

    def through_server(worker: int) -> None:
        try:
            table = client(server).load_table(f"{ns}.hot")
            start.wait()
            for i in range(3):
                row_id = worker * 100 + i
                table.append(batch([row_id], [f"w{worker}"]))
                with lock:
                    acknowledged.append(row_id)
        except BaseException as exc:
            errors.append(exc)

    def direct() -> None:
        try:
            table = sync.load_table(location)
            start.wait()
            for i in range(3):
                table.append(batch([900 + i], ["direct"]))
                with lock:
                    acknowledged.append(900 + i)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=through_server, args=(w,)) for w in range(4)]
    threads.append(threading.Thread(target=direct))
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert errors == []
    assert len(acknowledged) == 15

    table = catalog.load_table(f"{ns}.hot")
    assert sorted(r["id"] for r in rows(table)) == sorted(acknowledged)
    snapshots = sorted(table.metadata.snapshots, key=lambda s: s.sequence_number)
    assert len(snapshots) == 15
    assert snapshots[0].parent_snapshot_id is None
    for parent, child in itertools.pairwise(snapshots):
        assert child.parent_snapshot_id == parent.snapshot_id
    assert table.metadata.current_snapshot_id == snapshots[-1].snapshot_id


# -- other readers and writers -----------------------------------------------------------------
@pytest.mark.anyio
async def test_server_written_table_reads_the_same_everywhere(
    server: RestServer, catalog: PyCatalog, ns: str
) -> None:
    table = catalog.create_table(f"{ns}.shared", schema=SCHEMA, partition_spec=BY_REGION)
    table.append(batch([1, 2, 3], ["eu", "us", "eu"]))
    table.delete("id == 2")
    table.append(batch([4], ["ap"]))
    expected = [{"id": 1, "region": "eu"}, {"id": 3, "region": "eu"}, {"id": 4, "region": "ap"}]
    assert rows(catalog.load_table(f"{ns}.shared")) == expected

    direct = await aioiceberg.load_table(table.location())
    assert direct.metadata_location == catalog.load_table(f"{ns}.shared").metadata_location
    arrow = await direct.scan().to_arrow()
    assert sorted(arrow.to_pylist(), key=lambda r: r["id"]) == expected

    from read_helpers import duckdb_connection

    con = duckdb_connection()
    con.execute(f"ATTACH '' AS cat (TYPE ICEBERG, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')")
    found = con.execute(f"SELECT id, region FROM cat.{ns}.shared ORDER BY id").fetchall()
    assert found == [(r["id"], r["region"]) for r in expected]


def test_duckdb_creates_and_inserts_through_the_server(
    server: RestServer, catalog: PyCatalog, ns: str
) -> None:
    from read_helpers import duckdb_connection

    con = duckdb_connection()
    con.execute(f"ATTACH '' AS cat (TYPE ICEBERG, ENDPOINT '{server.url}', AUTHORIZATION_TYPE 'none')")
    con.execute(f"CREATE TABLE cat.{ns}.made (id BIGINT, region VARCHAR)")
    con.execute(f"INSERT INTO cat.{ns}.made VALUES (1, 'eu'), (2, 'us')")
    con.execute(f"INSERT INTO cat.{ns}.made VALUES (3, 'ap')")
    expected = [{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}, {"id": 3, "region": "ap"}]
    table = catalog.load_table(f"{ns}.made")
    assert rows(table) == sorted(expected, key=lambda r: r["id"])
    assert len(table.history()) == 2


# -- the protocol's errors ---------------------------------------------------------------------
def test_errors_are_rest_error_objects(server: RestServer, catalog: PyCatalog, ns: str) -> None:
    table = catalog.create_table(f"{ns}.t", schema=SCHEMA)
    table.append(batch([1], ["eu"]))
    path = f"/v1/namespaces/{ns}/tables/t"

    def error(method: str, path: str, body: Any = None) -> tuple[int, str, str]:
        status, answer = request_json(server.url, method, path, body)
        assert answer["error"]["code"] == status
        return status, answer["error"]["type"], answer["error"]["message"]

    status, kind, message = error("POST", "/v1/namespaces", b"{not json")
    assert (status, kind) == (400, "BadRequestException") and "not valid JSON" in message
    unknown = {"requirements": [], "updates": [{"action": "frobnicate"}]}
    status, kind, message = error("POST", path, unknown)
    assert (status, kind) == (400, "BadRequestException") and "frobnicate" in message
    stale = {
        "requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": 12345}],
        "updates": [{"action": "set-properties", "updates": {"k": "v"}}],
    }
    status, kind, message = error("POST", path, stale)
    assert (status, kind) == (409, "CommitFailedException") and "12345" in message
    assert "k" not in catalog.load_table(f"{ns}.t").properties

    assert error("GET", f"/v1/namespaces/{ns}/tables/nope")[:2] == (404, "NoSuchTableException")
    assert error("GET", "/v1/namespaces/no_such_ns")[:2] == (404, "NoSuchNamespaceException")
    assert error("DELETE", f"/v1/namespaces/{ns}")[:2] == (409, "NamespaceNotEmptyException")
    assert error("POST", "/v1/transactions/commit", b"{}")[:2] == (501, "UnsupportedOperationException")
    assert error("GET", "/v1/nowhere")[:2] == (404, "NotFoundException")
    assert error("PUT", "/v1/namespaces", b"{}")[:2] == (405, "MethodNotAllowedException")
    assert request_json(server.url, "HEAD", f"/v1/namespaces/{ns}/tables/nope")[0] == 404


def test_commit_to_a_table_committing_elsewhere_is_forbidden_and_says_why(rest_server: RestServer) -> None:
    """A table whose metadata names another commit point opens read-only: the server refuses
    commits with 403 and the reason, instead of forking its history."""
    from pyiceberg.exceptions import ForbiddenError

    catalog = client(rest_server)
    catalog.create_namespace("db")
    table = catalog.create_table("db.t", schema=SCHEMA)
    first = Path(table.location()) / "metadata" / "v1.metadata.json"
    document = json.loads(first.read_text())
    document["properties"]["aioiceberg.commit-point"] = "catalog:glue"
    first.write_text(json.dumps(document))

    with pytest.raises(ForbiddenError, match=r"read-only.*glue"):
        catalog.load_table("db.t").append(batch([1], ["eu"]))
    assert catalog.load_table("db.t").current_snapshot() is None


def test_serve_hands_out_table_config_and_stops_on_sigint(tmp_path: Path) -> None:
    import signal

    with RestServer(
        str(tmp_path / "wh"), table_config={"py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO"}
    ) as rest:
        catalog = client(rest)
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", schema=SCHEMA)
        assert table.config == {"py-io-impl": "pyiceberg.io.pyarrow.PyArrowFileIO"}
        assert catalog.load_table("db.t").config == table.config
        assert rest.process is not None
        process = rest.process
        process.send_signal(signal.SIGINT)
        assert process.wait(10) == 0
        assert process.stdout is not None and process.stdout.read().strip() == "stopped"


@pytest.mark.anyio
async def test_server_commit_rebases_on_versions_taken_outside_it(tmp_path: Path) -> None:
    """The server's own retry, on a table object gone stale (a direct writer took the next
    version): the request lands on the latest version while its requirements hold there,
    and is a conflict once they do not."""
    from aioiceberg.commit.requirements import AssertRefSnapshotId, AssertTableUUID
    from aioiceberg.commit.updates import SetProperties
    from aioiceberg.errors import CommitConflictError
    from aioiceberg.server.commits import commit_with_retries

    async with aioiceberg.connect(str(tmp_path / "wh")) as catalog:
        await catalog.create_table("db.t", ARROW)
        stale = await catalog.load_table("db.t")
        other = await catalog.load_table("db.t")
        await other.append(batch([1], ["eu"]))
        assert stale.version == 1 and other.version == 2
        moved = other.metadata.current_snapshot_id

        # holds on both versions: the lost version costs a reload
        same = [AssertTableUUID(stale.metadata.table_uuid)]
        state = await commit_with_retries(stale, same, [SetProperties({"k": "v"})])
        assert (state.version, state.metadata.properties["k"]) == (3, "v")
        assert state.metadata.current_snapshot_id == moved

        # fails on the version the request loaded, holds on the latest: judged again there
        latest_only = [AssertRefSnapshotId("main", moved)]
        state = await commit_with_retries(stale, latest_only, [SetProperties({"k1": "v"})])
        assert (state.version, state.metadata.properties["k1"]) == (4, "v")

        # broken by the other writer: a conflict, nothing committed
        broken = [AssertRefSnapshotId("main", None)]
        with pytest.raises(CommitConflictError):
            await commit_with_retries(stale, broken, [SetProperties({"k2": "v"})])
        latest = await catalog.load_table("db.t")
        assert latest.version == 4 and "k2" not in latest.metadata.properties


def test_serves_an_s3_warehouse_with_client_config(moto_endpoint: str) -> None:
    """Any connect URI: an S3 warehouse (moto) committing by conditional writes; clients get
    the FileIO settings they need from ``--table-config``."""
    import asyncio

    from servers.backends import create_bucket
    from servers.plugin import s3_storage_options

    from aioiceberg import sync

    bucket = asyncio.run(create_bucket(moto_endpoint))
    options = s3_storage_options(moto_endpoint)
    client_config = {
        "s3.endpoint": moto_endpoint,
        "s3.access-key-id": "testing",
        "s3.secret-access-key": "testing",
        "s3.region": "us-east-1",
    }
    with RestServer(f"s3://{bucket}/wh", storage_options=options, table_config=client_config) as rest:
        catalog = client(rest)
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", schema=SCHEMA, partition_spec=BY_REGION)
        assert table.location() == f"s3://{bucket}/wh/db/t"
        table.append(batch([1, 2], ["eu", "us"]))
        table.append(batch([3], ["eu"]))
        expected = [{"id": 1, "region": "eu"}, {"id": 2, "region": "us"}, {"id": 3, "region": "eu"}]
        assert rows(catalog.load_table("db.t")) == expected

    direct = sync.load_table(f"s3://{bucket}/wh/db/t", options)
    assert sorted(direct.scan().to_arrow().to_pylist(), key=lambda r: r["id"]) == expected
    assert len(direct.snapshots()) == 2


def test_serves_a_sql_catalog(tmp_path: Path) -> None:
    """A catalog service behind the server (SQLite): tables commit through its pointer and
    open the same directly; stage-create, which needs a location before the table exists,
    is refused plainly because that catalog only decides it when creating."""
    from aioiceberg import sync

    uri = f"sqlite:///{tmp_path / 'catalog.db'}"
    tables_in = str(tmp_path / "tables")
    with RestServer(uri, tables_in=tables_in) as rest:
        catalog = client(rest)
        catalog.create_namespace("db")
        table = catalog.create_table("db.t", schema=SCHEMA)
        table.append(batch([1, 2], ["eu", "us"]))
        table.append(batch([3], ["ap"]))
        assert table.location() == f"{tables_in}/db/t"
        with pytest.raises(NotImplementedError, match="stage-create"):
            catalog.create_table_transaction("db.staged", schema=SCHEMA)

    direct = sync.connect(uri, warehouse=tables_in)
    try:
        found = direct.load_table("db.t").scan().to_arrow().to_pylist()
    finally:
        direct.aclose()
    assert sorted(r["id"] for r in found) == [1, 2, 3]
