"""The catalog contract (``catalog_contract.py``) run against every catalog we ship that runs
here: the warehouse on local files, the SQL catalog on SQLite and on PostgreSQL, Glue and S3 Tables on moto,
and the REST client against a real ``aioiceberg serve`` process. Each catalog's own cases stay
in its ``test_catalog_*`` module.

A DynamoDB lock is not a catalog: it is how a warehouse's tables commit (``lock=``), and
test_commit_protocols.py runs the commit behaviour over it.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import botocore.session
import pytest
from catalog_contract import CatalogContract, Subject
from servers.plugin import s3_storage_options, unique_bucket_name
from servers.postgres import PostgresServer
from servers.rest import RestServer

import aioiceberg
from aioiceberg.catalogs.base import Catalog
from aioiceberg.table import Table

CATALOGS = ("warehouse", "sql", "postgres", "glue", "s3tables", "rest")

#: odd characters every S3 Tables name refuses: its names are lowercase letters, digits and '_'
S3TABLES_ODD = "0_odd__name_9"

# -- the gaps: what a catalog does not meet, by test (none open) -------------------------------
GAPS: dict[str, dict[str, str]] = {name: {} for name in CATALOGS}


@pytest.fixture(scope="module")
def contract_rest_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestServer]:
    """One ``aioiceberg serve`` process for the module: each test keeps to its own namespaces."""
    with RestServer(str(tmp_path_factory.mktemp("contract-rest") / "warehouse")) as rest:
        yield rest


@dataclass(frozen=True)
class AwsPlaces:
    bucket: str
    table_bucket_arn: str


@pytest.fixture(scope="module")
def aws_places(moto_endpoint: str) -> AwsPlaces:
    """One S3 bucket (Glue's warehouses, a prefix per test) and one S3 Tables table bucket for
    the module: tests keep apart by their namespaces' prefix, and clients are made once."""
    session = botocore.session.get_session()
    s3, s3tables = (
        session.create_client(
            service,
            endpoint_url=moto_endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        for service in ("s3", "s3tables")
    )
    try:
        bucket = unique_bucket_name("contract")
        s3.create_bucket(Bucket=bucket)
        arn = s3tables.create_table_bucket(name=f"tb-{uuid.uuid4().hex[:16]}")["arn"]
    finally:
        s3.close()
        s3tables.close()
    return AwsPlaces(bucket, str(arn))


async def _drop_namespaces(catalog: Catalog, prefix: str) -> None:
    """Leave the session's moto Glue as it was: every Glue create judges nesting against
    every table of every database, so what tests leave behind slows the rest."""
    for namespace in await catalog.list_namespaces():
        if namespace.startswith(prefix):
            for table in await catalog.list_tables(namespace):
                await catalog.drop_table(table)
            await catalog.drop_namespace(namespace)


def _kept_by_the_server(server: RestServer) -> Callable[[Table], Awaitable[str | None]]:
    async def kept(table: Table) -> str | None:
        """The copy of its last metadata file the server's warehouse keeps on a drop."""
        relative = Path(table.location).relative_to(server.warehouse)
        found = list(Path(server.warehouse, relative, "metadata").glob("*-dropped-*.metadata.json"))
        return str(found[0]) if len(found) == 1 else None

    return kept


async def _subject(name: str, request: pytest.FixtureRequest, tmp_path: Path) -> Subject:
    if name == "warehouse":
        return Subject(name, aioiceberg.connect(str(tmp_path / "wh")), implicit_namespaces=True)
    if name == "sql":
        return Subject(
            name, aioiceberg.connect(f"sqlite:///{tmp_path / 'c.db'}", warehouse=str(tmp_path / "wh"))
        )
    if name == "postgres":  # the SQL catalog on PostgreSQL, a fresh database per test
        pg: PostgresServer = request.getfixturevalue("postgres_server")
        uri = pg.uri(pg.create_database())
        return Subject(name, aioiceberg.connect(uri, warehouse=str(tmp_path / "wh")))
    if name == "rest":
        server: RestServer = request.getfixturevalue("contract_rest_server")
        return Subject(
            name,
            aioiceberg.connect(f"rest+{server.url}"),
            kept_after_drop=_kept_by_the_server(server),
            names_roots=False,
        )
    endpoint: str = request.getfixturevalue("moto_endpoint")
    options = s3_storage_options(endpoint)
    places: AwsPlaces = request.getfixturevalue("aws_places")
    if name == "glue":
        warehouse = f"s3://{places.bucket}/{uuid.uuid4().hex[:12]}"
        catalog = aioiceberg.connect(
            "glue://", warehouse=warehouse, storage_options={**options, "glue.endpoint": endpoint}
        )
        return Subject(name, catalog, nested_namespaces=False)
    if name == "s3tables":
        uri = f"s3tables://{places.table_bucket_arn}?endpoint={endpoint}"
        return Subject(
            name,
            aioiceberg.connect(uri, storage_options=options),
            nested_namespaces=False,
            namespace_properties=False,
            registers=False,
            odd_table=S3TABLES_ODD,
        )
    raise ValueError(name)


class TestCatalogContract(CatalogContract):
    @pytest.fixture(params=CATALOGS)
    async def subject(
        self, request: pytest.FixtureRequest, tmp_path: Path, aws_clients_closed: None
    ) -> AsyncIterator[Subject]:
        name: str = request.param
        subject = await _subject(name, request, tmp_path)
        subject.gaps = GAPS[name]
        gap = subject.gaps.get(request.function.__name__)
        if gap is not None:
            request.applymarker(pytest.mark.xfail(strict=True, reason=gap))
        async with subject.catalog:
            yield subject
            if name == "glue":
                await _drop_namespaces(subject.catalog, subject.prefix)
