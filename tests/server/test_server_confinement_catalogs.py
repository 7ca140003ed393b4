"""Confinement of the catalogs that keep a pointer per table (SQL, Glue), as a hostile client
would try to break it: a real ``aioiceberg serve`` process reached through PyIceberg's
RestCatalog and raw HTTP, and the same rules through the Python API.

Canary files lie outside the catalog's roots, including in a sibling folder whose name
starts with the warehouse's (``wh`` / ``wh2``) and at the warehouse's top level; every test
checks that they survive whatever the client sent: set-location then purge, register of a
file elsewhere then purge, a namespace ``location`` outside, nested tables. Tables other
engines put outside the roots stay usable, but a purge only unregisters them.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyiceberg.catalog import Catalog as PyCatalog
from pyiceberg.catalog import load_catalog
from pyiceberg.catalog.sql import SqlCatalog as PySqlCatalog
from pyiceberg.exceptions import BadRequestError, ForbiddenError, RESTError
from servers.plugin import s3_storage_options
from servers.rest import RestServer, purge, register, request_json, set_location

import aioiceberg
from aioiceberg.catalogs.sql import SqlCatalog
from aioiceberg.commit.protocols.base import TableState
from aioiceberg.commit.updates import SetLocation
from aioiceberg.errors import LocationNotAllowedError, TableNotFoundError, ValidationError
from aioiceberg.table import Table

ARROW = pa.schema([pa.field("id", pa.int64(), nullable=False)])
CANARY = b"must survive"


def ids(n: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(n, pa.int64())}, schema=ARROW)


def files_under(path: Path) -> list[Path]:
    """Table files (the local store's hidden lock files left out)."""
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))


def message(answer: Any) -> str:
    return str(answer["error"]["message"])


def assert_register_answers_alike(url: str, ns: str, *metadata_locations: str) -> None:
    """Registering each is a 404 in the same words but for the location: nothing tells a file
    outside the roots from a missing one."""
    answers = {}
    for location in metadata_locations:
        status, answer = register(url, ns, "r", location)
        assert status == 404, answer
        answers[location] = message(answer).replace(location, "PATH")
    assert len(set(answers.values())) == 1, answers


def moved_copy(metadata_file: Path, to: Path, location: str) -> Path:
    """A copy of a table's metadata file at ``to`` describing a table at ``location``."""
    document = json.loads(metadata_file.read_text())
    document["location"] = location
    to.parent.mkdir(parents=True, exist_ok=True)
    to.write_text(json.dumps(document))
    return to


# -- a SQL catalog served over REST ------------------------------------------------------------
@dataclass
class Site:
    """The served catalog's files: the warehouse (its one root), the database, the canaries."""

    base: Path
    warehouse: Path
    database: Path
    canaries: list[Path]
    url: str = ""

    @property
    def uri(self) -> str:
        return f"sqlite:///{self.database}"

    @property
    def outside(self) -> Path:
        return self.base / "outside"

    @property
    def sibling(self) -> Path:
        """A folder whose name shares the warehouse's prefix (``wh`` and ``wh2``)."""
        return self.base / "wh2"

    def assert_canaries(self) -> None:
        for canary in self.canaries:
            assert canary.read_bytes() == CANARY, canary

    def direct(self) -> PySqlCatalog:
        """PyIceberg's SqlCatalog on the same database: another engine, which checks nothing."""
        return PySqlCatalog("default", uri=f"sqlite:///{self.database}", warehouse=f"file://{self.warehouse}")

    def client(self) -> PyCatalog:
        return load_catalog("rest", type="rest", uri=self.url)


def make_site(base: Path) -> Site:
    warehouse = base / "wh"
    canaries = [
        base / "outside" / "canary.txt",
        base / "outside" / "deep" / "canary.txt",
        base / "wh2" / "canary.txt",
        base / "wh2" / "ns" / "t" / "canary.txt",
        warehouse / "canary.txt",
    ]
    for canary in canaries:
        canary.parent.mkdir(parents=True, exist_ok=True)
        canary.write_bytes(CANARY)
    return Site(base, warehouse, base / "catalog.db", canaries)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    found = make_site(tmp_path_factory.mktemp("confined"))
    with RestServer(found.uri, tables_in=str(found.warehouse)) as rest:
        found.url = rest.url
        yield found
    found.assert_canaries()


@pytest.fixture
def ns(site: Site) -> Iterator[str]:
    name = f"ns_{uuid.uuid4().hex[:8]}"
    site.client().create_namespace(name)
    yield name
    site.assert_canaries()


def test_set_location_outside_the_roots_or_nesting_is_refused_and_purge_deletes_only_the_table(
    site: Site, ns: str
) -> None:
    catalog = site.client()
    table = catalog.create_table(f"{ns}.t", schema=ARROW)
    table.append(ids([1, 2]))
    other = catalog.create_table(f"{ns}.other", schema=ARROW)
    other.append(ids([9]))
    location = table.location()
    for target in [
        str(site.outside),
        site.outside.as_uri(),
        str(site.sibling / ns / "t"),
        str(site.warehouse),  # the root itself: a table there would own the whole catalog
        f"{site.warehouse}/{ns}/../../outside",
        other.location(),  # another table's place
        f"{other.location()}/inside",  # inside another table
        f"{site.warehouse}/{ns}",  # around both tables
        "http://127.0.0.1:1/t",
    ]:
        status, answer = set_location(site.url, ns, "t", target)
        assert status == 403, (target, answer)
        assert answer["error"]["type"] == "ForbiddenException"
    assert catalog.load_table(f"{ns}.t").location() == location
    # the same for the properties that place a table's files elsewhere
    outside_before = files_under(site.outside)
    for key in ("write.metadata.path", "write.data.path"):
        for target in (str(site.outside), str(site.sibling / "m"), f"{other.location()}/m"):
            body = {"requirements": [], "updates": [{"action": "set-properties", "updates": {key: target}}]}
            status, answer = request_json(site.url, "POST", f"/v1/namespaces/{ns}/tables/t", body)
            assert status == 403, (key, target, answer)
    assert files_under(site.outside) == outside_before

    assert purge(site.url, ns, "t") == 204
    assert files_under(Path(location)) == []
    assert sorted(r["id"] for r in catalog.load_table(f"{ns}.other").scan().to_arrow().to_pylist()) == [9]
    site.assert_canaries()


def test_set_location_inside_the_roots_moves_the_table_and_purge_deletes_only_there(
    site: Site, ns: str
) -> None:
    catalog = site.client()
    catalog.create_table(f"{ns}.t", schema=ARROW).append(ids([1]))
    moved = f"{site.warehouse}/{ns}/moved"
    status, answer = set_location(site.url, ns, "t", moved)
    assert status == 200, answer
    assert answer["metadata"]["location"] == moved
    table = catalog.load_table(f"{ns}.t")
    table.append(ids([2]))
    assert files_under(Path(moved))
    assert purge(site.url, ns, "t") == 204
    assert files_under(Path(moved)) == []
    site.assert_canaries()


def test_register_reads_only_inside_the_roots_and_answers_missing_and_outside_alike(
    site: Site, ns: str
) -> None:
    catalog = site.client()
    table = catalog.create_table(f"{ns}.t", schema=ARROW)
    table.append(ids([1]))
    current = Path(table.metadata_location)

    # a valid metadata file outside the roots (describing a table there), and a missing one inside
    outside_file = moved_copy(
        current, site.outside / "t" / "metadata" / "00001-x.metadata.json", str(site.outside)
    )
    sibling_file = moved_copy(
        current, site.sibling / "t" / "metadata" / "00001-x.metadata.json", str(site.sibling)
    )
    missing = site.warehouse / ns / "none" / "metadata" / "00001-x.metadata.json"
    assert_register_answers_alike(site.url, ns, str(outside_file), str(sibling_file), str(missing))
    with pytest.raises(RESTError, match="no readable metadata file"):
        catalog.register_table(f"{ns}.r", str(outside_file))

    # a URL is never fetched
    hits: list[str] = []

    class Recorder(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            hits.append(self.path)
            self.send_response(200)
            self.end_headers()
            self.wfile.write(current.read_bytes())

        def log_message(self, *args: Any) -> None:
            return None

    listener = HTTPServer(("127.0.0.1", 0), Recorder)
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    try:
        port = listener.server_address[1]
        status, answer = register(site.url, ns, "r", f"http://127.0.0.1:{port}/00001-x.metadata.json")
        assert status == 404, answer
    finally:
        listener.shutdown()
        listener.server_close()
        thread.join()
    assert hits == []

    # inside the roots but describing a table outside them: refused, so never purged there
    pointing_out = moved_copy(
        current, site.warehouse / ns / "x" / "metadata" / "00001-x.metadata.json", str(site.outside)
    )
    status, answer = register(site.url, ns, "r", str(pointing_out))
    assert status == 403, answer
    assert not catalog.table_exists(f"{ns}.r")

    # a file that is not table metadata: refused without echoing what it holds
    secret = site.warehouse / ns / "secret.metadata.json"
    secret.write_text(json.dumps({"location": "sk-7f3a-very-secret", "password": "hunter2-secret"}))
    status, answer = register(site.url, ns, "r", str(secret))
    assert status == 400, answer
    assert "secret" not in json.dumps(answer).replace(str(secret), "")
    assert purge(site.url, ns, "t") == 204
    site.assert_canaries()


def test_namespace_location_outside_the_roots_is_refused_and_existing_ones_place_no_table(
    site: Site, ns: str
) -> None:
    catalog = site.client()
    for location in (
        str(site.outside),
        str(site.sibling),
        site.outside.as_uri(),
        str(site.warehouse / ".." / "outside"),
    ):
        with pytest.raises(ForbiddenError):
            catalog.create_namespace(f"{ns}_x", {"location": location})
        assert not catalog.namespace_exists(f"{ns}_x")
        with pytest.raises(ForbiddenError):
            catalog.update_namespace_properties(ns, updates={"location": location})
    assert "location" not in catalog.load_namespace_properties(ns)

    # written by another engine (PyIceberg checks nothing): no table is created there
    placed = site.outside / f"{ns}_placed"
    site.direct().create_namespace(f"{ns}_placed", {"location": str(placed)})
    with pytest.raises(ForbiddenError, match="location"):
        catalog.create_table(f"{ns}_placed.t", schema=ARROW)
    assert not placed.exists()
    assert not catalog.table_exists(f"{ns}_placed.t")

    # inside the roots, a namespace location places its tables as in PyIceberg
    custom = site.warehouse / f"{ns}_custom"
    catalog.create_namespace(f"{ns}_in", {"location": str(custom)})
    table = catalog.create_table(f"{ns}_in.t", schema=ARROW)
    assert table.location() == f"{custom}/t"
    table.append(ids([1]))
    assert purge(site.url, f"{ns}_in", "t") == 204
    assert files_under(custom) == []
    site.assert_canaries()


def test_tables_never_nest_and_a_nested_foreign_table_survives_the_outer_purge(site: Site, ns: str) -> None:
    catalog = site.client()
    outer = catalog.create_table(f"{ns}.outer", schema=ARROW)
    outer.append(ids([1]))

    # a namespace placing its tables inside the outer table: creating one there is refused
    catalog.create_namespace(f"{ns}_in_outer", {"location": outer.location()})
    with pytest.raises(ForbiddenError, match="nests with"):
        catalog.create_table(f"{ns}_in_outer.t", schema=ARROW)
    # an explicit location other than the catalog's is refused by the create route itself
    with pytest.raises((BadRequestError, NotImplementedError)):
        catalog.create_table(f"{ns}.inner", schema=ARROW, location=f"{outer.location()}/inner")
    assert not catalog.table_exists(f"{ns}.inner")
    # register of a table inside it, and around it
    current = Path(outer.metadata_location)
    for where in (f"{outer.location()}/inner", f"{site.warehouse}/{ns}"):
        copy = moved_copy(
            current,
            site.warehouse / f"{ns}_files" / uuid.uuid4().hex / "metadata" / "00001-x.metadata.json",
            where,
        )
        status, answer = register(site.url, ns, "r", str(copy))
        assert status == 403 and "nests with" in message(answer), answer

    # another engine nests tables anyway: the outer purge keeps them whole, also one whose
    # metadata lies elsewhere (write.metadata.path), so that no metadata folder marks it
    direct = site.direct()
    inner = direct.create_table(f"{ns}.inner", schema=ARROW, location=f"{outer.location()}/nested")
    inner.append(ids([7, 8]))
    hidden = direct.create_table(
        f"{ns}.hidden",
        schema=ARROW,
        location=f"{outer.location()}/hidden",
        properties={"write.metadata.path": f"{site.warehouse}/{ns}_meta/hidden"},
    )
    hidden.append(ids([5]))
    kept = {t.location(): files_under(Path(t.location())) for t in (inner, hidden)}
    assert all(kept.values())
    assert not (Path(hidden.location()) / "metadata").exists()
    assert purge(site.url, ns, "outer") == 204
    for nested, before in kept.items():
        assert files_under(Path(nested)) == before
    nested_dirs = {Path(inner.location()), Path(hidden.location())}
    assert [p for p in files_under(Path(outer.location())) if nested_dirs.isdisjoint(p.parents)] == []
    for name, expected in (("inner", [7, 8]), ("hidden", [5])):
        found = catalog.load_table(f"{ns}.{name}").scan().to_arrow().to_pylist()
        assert sorted(r["id"] for r in found) == expected
    site.assert_canaries()


def test_a_foreign_table_outside_the_roots_loads_commits_but_a_purge_only_unregisters_it(
    site: Site, ns: str
) -> None:
    foreign_dir = site.outside / f"{ns}_foreign"
    site.direct().create_table(f"{ns}.f", schema=ARROW, location=str(foreign_dir)).append(ids([1]))
    catalog = site.client()
    table = catalog.load_table(f"{ns}.f")
    table.append(ids([2]))
    assert sorted(r["id"] for r in catalog.load_table(f"{ns}.f").scan().to_arrow().to_pylist()) == [1, 2]
    before = files_under(foreign_dir)
    assert purge(site.url, ns, "f") == 204
    assert not catalog.table_exists(f"{ns}.f")
    assert files_under(foreign_dir) == before
    site.assert_canaries()


# -- the same rules through the Python API -----------------------------------------------------
async def _move(table: Table, location: str) -> TableState:
    assert table.protocol is not None
    state = TableState(table.metadata, table.metadata_location, table.version)
    return await table.protocol.commit_table(state, [], [SetLocation(location)])


@pytest.mark.anyio
async def test_python_api_sql_catalog_is_confined_the_same_way(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    async with SqlCatalog(str(site.database), warehouse=str(site.warehouse)) as catalog:
        await catalog.create_namespace("db")
        table = await catalog.create_table("db.t", ARROW)
        await table.append(ids([1]))
        other = await catalog.create_table("db.o", ARROW)
        for target in (
            str(site.outside),
            str(site.sibling),
            other.location,
            f"{other.location}/x",
            str(site.warehouse),
        ):
            with pytest.raises(LocationNotAllowedError):
                await _move(table, target)
        moved = await _move(table, f"{site.warehouse}/db/moved")
        assert moved.metadata.location == f"{site.warehouse}/db/moved"

        # namespace locations
        for location in (str(site.outside), str(site.sibling)):
            with pytest.raises(LocationNotAllowedError, match="'location' property"):
                await catalog.create_namespace("bad", {"location": location})
            with pytest.raises(LocationNotAllowedError):
                await catalog.update_namespace_properties("db", updates={"location": location})
        await catalog.create_namespace("nested", {"location": other.location})
        with pytest.raises(LocationNotAllowedError, match=r"nests with table db\.o"):
            await catalog.create_table("nested.t", ARROW)

        # register: outside and missing alike, never read; inside but describing elsewhere refused
        current = Path(other.metadata_location)
        outside_file = moved_copy(
            current, site.outside / "m" / "metadata" / "00001-a.metadata.json", str(site.outside)
        )
        errors = []
        for path in (outside_file, site.warehouse / "db" / "gone" / "metadata" / "00001-a.metadata.json"):
            with pytest.raises(TableNotFoundError) as caught:
                await catalog.register_table("db.r", str(path))
            errors.append(str(caught.value).replace(str(path), "PATH"))
        assert errors[0] == errors[1]
        inside = moved_copy(
            current, site.warehouse / "db" / "in" / "metadata" / "00001-a.metadata.json", str(site.outside)
        )
        with pytest.raises(LocationNotAllowedError):
            await catalog.register_table("db.r", str(inside))
        garbage = site.warehouse / "db" / "junk.metadata.json"
        garbage.write_text('{"format-version": "hunter2"}')
        with pytest.raises(ValidationError) as caught_junk:
            await catalog.register_table("db.r", str(garbage))
        assert "hunter2" not in str(caught_junk.value)

        # a foreign table: its purge unregisters it and returns its metadata file
        direct = site.direct()
        direct.create_table("db.f", schema=ARROW, location=str(site.outside / "f")).append(ids([1]))
        foreign = await catalog.load_table("db.f")
        await foreign.append(ids([2]))
        before = files_under(site.outside / "f")
        current_file = (await catalog.load_table("db.f")).metadata_location
        assert await catalog.drop_table("db.f", purge=True) == current_file
        assert not await catalog.table_exists("db.f")
        assert files_under(site.outside / "f") == before

        # a table of ours: the purge deletes under its location only, keeping a nested foreign one
        inner = direct.create_table("db.inner", schema=ARROW, location=f"{other.location}/nested")
        inner.append(ids([5]))
        inner_files = files_under(Path(inner.location()))
        await other.append(ids([3]))
        assert await catalog.drop_table("db.o", purge=True) is None
        assert files_under(Path(inner.location())) == inner_files
        assert [
            r["id"] for r in (await (await catalog.load_table("db.inner")).scan().to_arrow()).to_pylist()
        ] == [5]
    site.assert_canaries()


@pytest.mark.anyio
async def test_python_api_sql_catalog_without_warehouse_creates_and_purges_nothing(tmp_path: Path) -> None:
    site = make_site(tmp_path)
    site.direct().create_namespace("db")
    site.direct().create_table("db.t", schema=ARROW).append(ids([1]))
    table_dir = site.warehouse / "db" / "t"
    before = files_under(table_dir)
    async with aioiceberg.connect(site.uri) as bare:
        assert not bare.roots
        with pytest.raises(LocationNotAllowedError, match="warehouse="):
            await bare.create_table("db.u", ARROW)
        with pytest.raises(LocationNotAllowedError, match="warehouse="):
            await bare.create_namespace("placed", {"location": str(site.outside)})
        table = await bare.load_table("db.t")
        await table.append(ids([2]))
        with pytest.raises(LocationNotAllowedError, match="warehouse="):
            await _move(table, str(site.warehouse / "db" / "moved"))
        assert await bare.drop_table("db.t", purge=True) is not None
    assert set(before) <= set(files_under(table_dir))
    site.assert_canaries()


# -- a Glue catalog (moto) served over REST ----------------------------------------------------
@dataclass
class GlueSite:
    """The served Glue catalog: its warehouse ``s3://bucket/wh``, canary objects beside it."""

    endpoint: str
    bucket: str
    url: str = ""

    CANARIES = (
        "outside/canary.txt",
        "outside/deep/canary.txt",
        "wh2/canary.txt",
        "wh2/db/t/canary.txt",
        "wh/canary.txt",
    )

    @property
    def warehouse(self) -> str:
        return f"s3://{self.bucket}/wh"

    def s3(self) -> Any:
        import botocore.session

        return botocore.session.get_session().create_client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1"
        )

    def keys(self, prefix: str) -> list[str]:
        found = self.s3().list_objects_v2(Bucket=self.bucket, Prefix=prefix).get("Contents", [])
        return sorted(str(o["Key"]) for o in found)

    def assert_canaries(self) -> None:
        s3 = self.s3()
        for key in self.CANARIES:
            assert s3.get_object(Bucket=self.bucket, Key=key)["Body"].read() == CANARY, key

    def client(self) -> PyCatalog:
        return load_catalog(
            "rest",
            type="rest",
            uri=self.url,
            **{
                "s3.endpoint": self.endpoint,
                "s3.access-key-id": "testing",
                "s3.secret-access-key": "testing",
            },
            **{"s3.region": "us-east-1"},
        )

    def direct(self) -> Any:
        """PyIceberg's GlueCatalog on the same Glue: another engine, which checks nothing."""
        from pyiceberg.catalog.glue import GlueCatalog as PyGlueCatalog

        credentials = {"access-key-id": "testing", "secret-access-key": "testing", "region": "us-east-1"}
        return PyGlueCatalog(
            "py",
            **{"glue.endpoint": self.endpoint, "s3.endpoint": self.endpoint, "warehouse": self.warehouse},
            **{f"glue.{k}": v for k, v in credentials.items()},
            **{f"s3.{k}": v for k, v in credentials.items()},
        )

    def copy_metadata(self, metadata_location: str, key: str, location: str) -> str:
        """A copy of a table's metadata file at ``key`` describing a table at ``location``."""
        s3 = self.s3()
        source = metadata_location.removeprefix(f"s3://{self.bucket}/")
        document = json.loads(s3.get_object(Bucket=self.bucket, Key=source)["Body"].read())
        document["location"] = location
        s3.put_object(Bucket=self.bucket, Key=key, Body=json.dumps(document).encode())
        return f"s3://{self.bucket}/{key}"


@pytest.fixture(scope="module")
def glue(moto_endpoint: str) -> Iterator[GlueSite]:
    found = GlueSite(moto_endpoint, f"confined-{uuid.uuid4().hex[:16]}")
    s3 = found.s3()
    s3.create_bucket(Bucket=found.bucket)
    for key in GlueSite.CANARIES:
        s3.put_object(Bucket=found.bucket, Key=key, Body=CANARY)
    options = {**s3_storage_options(moto_endpoint), "glue.endpoint": moto_endpoint}
    with RestServer("glue://", storage_options=options, tables_in=found.warehouse) as rest:
        found.url = rest.url
        yield found
    found.assert_canaries()


@pytest.fixture
def db(glue: GlueSite) -> Iterator[str]:
    name = f"db_{uuid.uuid4().hex[:8]}"
    glue.client().create_namespace(name)
    yield name
    glue.assert_canaries()


def test_glue_set_location_and_register_stay_inside_the_warehouse(glue: GlueSite, db: str) -> None:
    catalog = glue.client()
    table = catalog.create_table(f"{db}.t", schema=ARROW)
    table.append(ids([1, 2]))
    other = catalog.create_table(f"{db}.o", schema=ARROW)
    for target in [
        f"s3://{glue.bucket}/outside",
        f"s3://{glue.bucket}/wh2/db/t",
        f"s3://{glue.bucket}",
        glue.warehouse,
        f"s3://{glue.bucket}/wh/../outside",
        f"s3://another-{glue.bucket}/t",
        other.location(),
        f"{other.location()}/inside",
        "file:///tmp/t",
    ]:
        status, answer = set_location(glue.url, db, "t", target)
        assert status == 403, (target, answer)

    outside_file = glue.copy_metadata(
        table.metadata_location, "outside/t/metadata/00001-x.metadata.json", f"s3://{glue.bucket}/outside/t"
    )
    missing = f"{glue.warehouse}/{db}.db/none/metadata/00001-x.metadata.json"
    assert_register_answers_alike(glue.url, db, outside_file, missing)
    pointing_out = glue.copy_metadata(
        table.metadata_location, f"wh/{db}.db/x/metadata/00001-x.metadata.json", f"s3://{glue.bucket}/outside"
    )
    status, answer = register(glue.url, db, "r", pointing_out)
    assert status == 403, answer
    nested = glue.copy_metadata(
        table.metadata_location, f"wh/{db}.db/y/metadata/00001-x.metadata.json", f"{table.location()}/inner"
    )
    status, answer = register(glue.url, db, "r", nested)
    assert status == 403 and "nests with" in message(answer), answer
    assert not catalog.table_exists(f"{db}.r")

    prefix = table.location().removeprefix(f"s3://{glue.bucket}/") + "/"
    assert glue.keys(prefix)
    assert purge(glue.url, db, "t") == 204
    assert glue.keys(prefix) == []
    assert catalog.table_exists(f"{db}.o")
    glue.assert_canaries()


def test_glue_database_locations_outside_the_warehouse_are_refused(glue: GlueSite, db: str) -> None:
    catalog = glue.client()
    for location in (f"s3://{glue.bucket}/outside", f"s3://{glue.bucket}/wh2", f"s3://other-{glue.bucket}/x"):
        with pytest.raises(ForbiddenError):
            catalog.create_namespace(f"{db}_x", {"location": location})
        assert not catalog.namespace_exists(f"{db}_x")
        with pytest.raises(ForbiddenError):
            catalog.update_namespace_properties(db, updates={"location": location})
    assert "location" not in catalog.load_namespace_properties(db)

    # set by another engine: no table is created there
    glue.direct().create_namespace(f"{db}_placed", {"location": f"s3://{glue.bucket}/outside/{db}"})
    with pytest.raises(ForbiddenError, match="location"):
        catalog.create_table(f"{db}_placed.t", schema=ARROW)
    assert glue.keys(f"outside/{db}") == []
    glue.direct().drop_namespace(f"{db}_placed")
    glue.assert_canaries()


def test_glue_foreign_tables_are_never_purged_and_nested_ones_survive(glue: GlueSite, db: str) -> None:
    catalog = glue.client()
    direct = glue.direct()
    direct.create_table(f"{db}.f", schema=ARROW, location=f"s3://{glue.bucket}/outside/{db}_f").append(
        ids([1])
    )
    catalog.load_table(f"{db}.f").append(ids([2]))
    assert sorted(r["id"] for r in catalog.load_table(f"{db}.f").scan().to_arrow().to_pylist()) == [1, 2]
    before = glue.keys(f"outside/{db}_f/")
    assert before
    assert purge(glue.url, db, "f") == 204
    assert not catalog.table_exists(f"{db}.f")
    assert glue.keys(f"outside/{db}_f/") == before

    outer = catalog.create_table(f"{db}.outer", schema=ARROW)
    outer.append(ids([1]))
    with pytest.raises(ForbiddenError, match="nests with"):
        catalog.create_namespace(f"{db}_in", {"location": outer.location()})
        catalog.create_table(f"{db}_in.t", schema=ARROW)
    assert not catalog.table_exists(f"{db}_in.t")
    inner = direct.create_table(
        f"{db}.inner",
        schema=ARROW,
        location=f"{outer.location()}/hidden",
        properties={"write.metadata.path": f"{glue.warehouse}/{db}_meta/hidden"},
    )
    inner.append(ids([7]))
    inner_prefix = inner.location().removeprefix(f"s3://{glue.bucket}/") + "/"
    kept = glue.keys(inner_prefix)
    assert kept
    assert purge(glue.url, db, "outer") == 204
    assert glue.keys(inner_prefix) == kept
    outer_prefix = outer.location().removeprefix(f"s3://{glue.bucket}/") + "/"
    assert [k for k in glue.keys(outer_prefix) if not k.startswith(inner_prefix)] == []
    assert [r["id"] for r in catalog.load_table(f"{db}.inner").scan().to_arrow().to_pylist()] == [7]
    glue.assert_canaries()


# -- S3 Tables: the service places every table ---------------------------------------------------
@pytest.mark.anyio
@pytest.mark.usefixtures("aws_clients_closed")
async def test_s3tables_tables_stay_in_the_storage_the_service_assigned(moto_endpoint: str) -> None:
    from aioiceberg.catalogs.s3tables import S3TablesCatalog
    from aioiceberg.io.s3_client import S3Options
    from aioiceberg.runtime import Runtime

    runtime = Runtime()
    try:
        client = await runtime.clients.get(
            S3Options(endpoint_url=moto_endpoint, region="us-east-1"), "s3tables"
        )
        arn = str((await client.create_table_bucket(name=f"tb-{uuid.uuid4().hex[:16]}"))["arn"])
    finally:
        await runtime.aclose()
    uri = f"s3tables://{arn}?endpoint={moto_endpoint}"
    async with aioiceberg.connect(uri, storage_options=s3_storage_options(moto_endpoint)) as catalog:
        assert isinstance(catalog, S3TablesCatalog)
        await catalog.create_namespace("db")
        table = await catalog.create_table("db.t", ARROW)
        assert catalog.roots.contains(f"{table.location}/metadata")
        for target in (f"{table.location}/elsewhere", "s3://another-bucket/t", f"{table.location}-x"):
            with pytest.raises(LocationNotAllowedError, match="S3 Tables"):
                await _move(table, target)
        with pytest.raises(LocationNotAllowedError, match="S3 Tables"):
            await catalog.check_new_table("db.u", "s3://another-bucket/u")
        reloaded = await catalog.load_table("db.t")
        assert reloaded.location == table.location and reloaded.metadata_location == table.metadata_location
