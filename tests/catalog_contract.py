"""The behaviour every catalog owes its callers, written once: ``test_catalog_contract.py``
runs it against each catalog we ship (as ``test_io_contract.py`` does for every FileIO).

A catalog is handed in as a :class:`Subject`: the catalog, a prefix that keeps this test's
namespaces apart from others on a shared service (moto's Glue, one REST server per module),
and what the service itself decides (one-level namespaces, no namespace properties, no
register, files deleted on drop). Those differences are checked as typed refusals, not
skipped. Where a catalog falls short of the contract, ``gaps`` names the test and the gap;
the test runs as a strict xfail, so closing the gap shows up.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import anyio
import pyarrow as pa
import pytest

from aioiceberg.catalogs.base import Catalog
from aioiceberg.errors import (
    LocationNotAllowedError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NamespaceNotFoundError,
    NotAuthorizedError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedError,
    ValidationError,
)
from aioiceberg.io.locations import is_within, normalized_location
from aioiceberg.table import Table

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string())])
#: commits retried quickly, racing through the catalog rather than taking turns in-process
RACING = {
    "commit.retry.num-retries": "50",
    "commit.retry.min-wait-ms": "5",
    "commit.retry.max-wait-ms": "100",
    "commit.in-process-lock": "false",
}


def rows(ids: list[int]) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{i}" for i in ids]}, schema=SCHEMA)


async def ids_of(table: Table) -> list[int]:
    return sorted((await table.scan().to_arrow()).column("id").to_pylist())


def assert_linear(table: Table, count: int) -> None:
    """``count`` snapshots on one chain of parents: no commit forked the history."""
    history = table.history()
    assert len(table.snapshots()) == len(history) == count
    assert [s.parent_snapshot_id for s in history[1:]] == [s.snapshot_id for s in history[:-1]]


def unique_prefix() -> str:
    """Lowercase letters and digits, starting with a letter: legal in every catalog's names."""
    return "c" + uuid.uuid4().hex[:10]


@dataclass
class Subject:
    """One catalog under the contract, and what its service decides for it."""

    name: str
    catalog: Catalog
    prefix: str = field(default_factory=unique_prefix)
    #: namespaces below namespaces (Glue databases and S3 Tables namespaces are one level)
    nested_namespaces: bool = True
    #: namespaces carry properties (S3 Tables' do not)
    namespace_properties: bool = True
    #: ``register_table`` adopts an existing metadata file (S3 Tables cannot)
    registers: bool = True
    #: the catalog knows where its tables may live (a REST client does not: its server decides,
    #: and refuses a place outside its roots as 403 ForbiddenException, ``NotAuthorizedError``)
    names_roots: bool = True
    #: a table's name makes its namespace (the warehouse, as Java's HadoopCatalog): a create
    #: or rename into a namespace never created makes it, while listing one refuses
    implicit_namespaces: bool = False
    #: an odd but legal table name here (a namespace name gets ``odd_namespace``)
    odd_table: str = "odd t-é+%~$=€ 1"
    odd_namespace: str = "odd ns-é+%~"
    #: the metadata file a drop without purge leaves, when the drop does not return it
    kept_after_drop: Callable[[Table], Awaitable[str | None]] | None = None
    #: test name -> why this catalog does not meet it (run as a strict xfail)
    gaps: dict[str, str] = field(default_factory=dict)

    def ns(self, name: str) -> str:
        return f"{self.prefix}_{name}"


class CatalogContract:
    """The contract's tests; a subclass named ``Test...`` supplies the ``subject`` fixture."""

    # -- namespaces ----------------------------------------------------------------------------
    @pytest.mark.anyio
    async def test_namespaces_create_exist_list_nest_keep_properties_and_drop(self, subject: Subject) -> None:
        catalog, ns = subject.catalog, subject.ns("a")
        props = {"owner": "ana", "tier": "gold"} if subject.namespace_properties else {}
        assert not await catalog.namespace_exists(ns)
        await catalog.create_namespace(ns, props)
        assert await catalog.namespace_exists(ns)
        assert ns in await catalog.list_namespaces()
        assert await catalog.list_namespaces(ns) == []
        assert await catalog.load_namespace_properties(ns) == props
        if subject.namespace_properties:
            updated = await catalog.update_namespace_properties(ns, removals=["tier"], updates={"pii": "no"})
            assert updated == {"owner": "ana", "pii": "no"}
            assert await catalog.load_namespace_properties(ns) == updated
        with pytest.raises(NamespaceAlreadyExistsError, match=ns):
            await catalog.create_namespace(ns)

        await catalog.drop_namespace(ns)
        assert not await catalog.namespace_exists(ns)
        assert ns not in await catalog.list_namespaces()
        for call in (catalog.drop_namespace, catalog.load_namespace_properties):
            with pytest.raises(NamespaceNotFoundError, match=ns):
                await call(ns)

        # below a namespace: more levels, or a typed refusal where the service has one level
        top = subject.ns("top")
        await catalog.create_namespace(top)
        inner = f"{top}.inner"
        if not subject.nested_namespaces:
            with pytest.raises(ValidationError, match="one level deep"):
                await catalog.create_namespace(inner)
            assert await catalog.list_namespaces(top) == []
            return
        await catalog.create_namespace(inner)
        await catalog.create_namespace((top, "inner", "deep"))
        assert await catalog.list_namespaces(top) == [inner]
        assert await catalog.list_namespaces(inner) == [f"{inner}.deep"]
        assert top in await catalog.list_namespaces() and inner not in await catalog.list_namespaces()
        with pytest.raises(NamespaceNotEmptyError, match="inner"):
            await catalog.drop_namespace(top)
        await catalog.drop_namespace(f"{inner}.deep")
        await catalog.drop_namespace(inner)
        await catalog.drop_namespace(top)
        assert not await catalog.namespace_exists(top)

    # -- tables --------------------------------------------------------------------------------
    @pytest.mark.anyio
    async def test_tables_create_load_list_exist_and_drop(self, subject: Subject) -> None:
        catalog, ns = subject.catalog, subject.ns("db")
        await catalog.create_namespace(ns)
        name, other = f"{ns}.t", f"{ns}.u"
        assert not await catalog.table_exists(name)
        table = await catalog.create_table(name, SCHEMA, partition_by=["bucket(4, id)"])
        await catalog.create_table(other, SCHEMA)
        assert await catalog.table_exists(name)
        assert await catalog.list_tables(ns) == [name, other]
        assert table.identifier == name and table.current_snapshot() is None
        loaded = await catalog.load_table(name)
        assert loaded.metadata_location == table.metadata_location
        assert loaded.location == table.location
        assert [f.name for f in loaded.spec().fields] == ["id_bucket"]
        with pytest.raises(TableAlreadyExistsError, match=name):
            await catalog.create_table(name, SCHEMA)
        with pytest.raises(NamespaceNotEmptyError, match=ns):
            await catalog.drop_namespace(ns)

        await catalog.drop_table(name)
        assert not await catalog.table_exists(name)
        assert await catalog.list_tables(ns) == [other]
        for call in (catalog.load_table, catalog.drop_table):
            with pytest.raises(TableNotFoundError, match=name):
                await call(name)
        await catalog.drop_table(other)
        await catalog.drop_namespace(ns)

    @pytest.mark.anyio
    async def test_commits_go_through_the_catalog(self, subject: Subject) -> None:
        catalog, ns = subject.catalog, subject.ns("db")
        await catalog.create_namespace(ns)
        table = await catalog.create_table(f"{ns}.t", SCHEMA)
        await table.append(rows([1, 2, 3]))
        await table.delete("id = 2")
        async with table.update_schema() as update:
            update.add_column("score", "double")
        await table.append(pa.table({"id": pa.array([4], pa.int64()), "name": ["n4"], "score": [0.5]}))
        again = await catalog.load_table(f"{ns}.t")
        assert again.metadata_location == table.metadata_location
        assert [f.name for f in again.schema().fields] == ["id", "name", "score"]
        assert await ids_of(again) == [1, 3, 4]
        assert_linear(again, 3)

    @pytest.mark.anyio
    async def test_racing_writers_rebase_and_lose_nothing(self, subject: Subject) -> None:
        catalog, ns = subject.catalog, subject.ns("db")
        await catalog.create_namespace(ns)
        await catalog.create_table(f"{ns}.t", SCHEMA, properties=RACING)
        first, stale = await catalog.load_table(f"{ns}.t"), await catalog.load_table(f"{ns}.t")
        await first.append(rows([1]))
        await stale.append(rows([2]))  # from the version before: refused once, then rebased
        assert stale.last_commit.attempts == 2
        final = await catalog.load_table(f"{ns}.t")
        assert final.metadata_location == stale.metadata_location
        assert await ids_of(final) == [1, 2]
        assert_linear(final, 2)

        # writers of one process at once, taking turns in-process: each append lands once
        await catalog.create_table(f"{ns}.u", SCHEMA)
        acknowledged: list[int] = []

        async def writer(w: int) -> None:
            table = await catalog.load_table(f"{ns}.u")
            for k in range(2):
                ids = [100 * w + 10 * k, 100 * w + 10 * k + 1]
                await table.append(rows(ids))
                acknowledged.extend(ids)

        async with anyio.create_task_group() as tg:
            for w in range(3):
                tg.start_soon(writer, w)
        final = await catalog.load_table(f"{ns}.u")
        assert len(acknowledged) == 12 and await ids_of(final) == sorted(acknowledged)
        assert_linear(final, 6)

    @pytest.mark.anyio
    async def test_rename_within_and_across_namespaces(self, subject: Subject) -> None:
        catalog, a, b = subject.catalog, subject.ns("a"), subject.ns("b")
        await catalog.create_namespace(a)
        await catalog.create_namespace(b)
        table = await catalog.create_table(f"{a}.t", SCHEMA)
        await table.append(rows([1, 2]))
        await catalog.create_table(f"{b}.taken", SCHEMA)

        renamed = await catalog.rename_table(f"{a}.t", f"{a}.r")
        assert renamed.identifier == f"{a}.r" and not await catalog.table_exists(f"{a}.t")
        assert await catalog.list_tables(a) == [f"{a}.r"]
        moved = await catalog.rename_table(f"{a}.r", f"{b}.m")
        assert moved.metadata.table_uuid == table.metadata.table_uuid
        assert await catalog.list_tables(a) == []
        assert await catalog.list_tables(b) == [f"{b}.m", f"{b}.taken"]
        await moved.append(rows([3]))  # commits through its new name
        assert await ids_of(await catalog.load_table(f"{b}.m")) == [1, 2, 3]
        with pytest.raises(TableAlreadyExistsError, match="taken"):
            await catalog.rename_table(f"{b}.m", f"{b}.taken")
        with pytest.raises(TableNotFoundError, match="gone"):
            await catalog.rename_table(f"{a}.gone", f"{a}.other")
        assert await catalog.table_exists(f"{b}.m") and await catalog.table_exists(f"{b}.taken")

    @pytest.mark.anyio
    async def test_tables_live_only_in_existing_namespaces(self, subject: Subject) -> None:
        catalog, ns, missing = subject.catalog, subject.ns("db"), subject.ns("nope")
        await catalog.create_namespace(ns)
        await catalog.create_table(f"{ns}.t", SCHEMA)
        with pytest.raises(NamespaceNotFoundError, match=missing):
            await catalog.list_tables(missing)
        if subject.implicit_namespaces:  # the name makes the namespace, which then is listed
            await catalog.create_table(f"{missing}.t", SCHEMA)
            assert await catalog.namespace_exists(missing) and missing in await catalog.list_namespaces()
            assert await catalog.list_tables(missing) == [f"{missing}.t"]
            moved = subject.ns("moved")
            await catalog.rename_table(f"{ns}.t", f"{moved}.t")
            assert await catalog.list_tables(moved) == [f"{moved}.t"] and await catalog.list_tables(ns) == []
            return
        with pytest.raises(NamespaceNotFoundError, match=missing):
            await catalog.create_table(f"{missing}.t", SCHEMA)
        with pytest.raises(NamespaceNotFoundError, match=missing):
            await catalog.rename_table(f"{ns}.t", f"{missing}.t")
        assert await catalog.table_exists(f"{ns}.t") and not await catalog.namespace_exists(missing)

    @pytest.mark.anyio
    async def test_purge_deletes_the_tables_files_and_frees_the_name(self, subject: Subject) -> None:
        catalog, ns = subject.catalog, subject.ns("db")
        await catalog.create_namespace(ns)
        table = await catalog.create_table(f"{ns}.t", SCHEMA)
        await table.append(rows([1, 2]))
        keep = await catalog.create_table(f"{ns}.keep", SCHEMA)
        snapshot = table.current_snapshot()
        assert snapshot is not None and snapshot.manifest_list is not None
        written = [table.metadata_location, snapshot.manifest_list]
        io = catalog.io_for(table.location)
        assert all([await io.exists(f) for f in written])

        await catalog.purge_table(f"{ns}.t")
        assert not await catalog.table_exists(f"{ns}.t")
        assert [await io.exists(f) for f in written] == [False, False]
        assert (await catalog.load_table(f"{ns}.keep")).metadata_location == keep.metadata_location
        assert await io.exists(keep.metadata_location)  # the other table's files stay
        again = await catalog.create_table(f"{ns}.t", SCHEMA)
        assert again.current_snapshot() is None
        await again.append(rows([3]))
        assert await ids_of(again) == [3]

    @pytest.mark.anyio
    async def test_a_dropped_table_comes_back_by_register(self, subject: Subject) -> None:
        catalog, ns = subject.catalog, subject.ns("db")
        await catalog.create_namespace(ns)
        table = await catalog.create_table(f"{ns}.t", SCHEMA)
        await table.append(rows([1, 2]))
        kept = await catalog.drop_table(f"{ns}.t")
        if kept is None and subject.kept_after_drop is not None:
            kept = await subject.kept_after_drop(table)
        if not subject.registers:
            with pytest.raises(UnsupportedError):
                await catalog.register_table(f"{ns}.t", table.metadata_location)
            assert not await catalog.table_exists(f"{ns}.t")
            return
        assert kept is not None
        back = await catalog.register_table(f"{ns}.t", kept)
        assert back.metadata.table_uuid == table.metadata.table_uuid
        assert await ids_of(back) == [1, 2]
        await back.append(rows([3]))  # a registered table commits through the catalog
        assert await ids_of(await catalog.load_table(f"{ns}.t")) == [1, 2, 3]
        with pytest.raises(TableAlreadyExistsError):
            await catalog.register_table(f"{ns}.t", kept)

    # -- names ---------------------------------------------------------------------------------
    @pytest.mark.anyio
    async def test_odd_but_legal_names_round_trip_and_escaping_ones_are_refused(
        self, subject: Subject
    ) -> None:
        catalog = subject.catalog
        ns = subject.odd_namespace if subject.nested_namespaces else subject.ns("odd")
        if subject.nested_namespaces:  # a fresh parent keeps it apart on a shared service
            await catalog.create_namespace(subject.ns("p"))
            ns = f"{subject.ns('p')}.{ns}"
        name = f"{ns}.{subject.odd_table}"
        await catalog.create_namespace(ns)
        assert await catalog.namespace_exists(ns)
        table = await catalog.create_table(name, SCHEMA)
        await table.append(rows([1]))
        assert await catalog.list_tables(ns) == [name]
        loaded = await catalog.load_table(name)
        assert loaded.identifier == name and await ids_of(loaded) == [1]
        # and names that would leave their place are refused, before anything is written
        for bad in ("..", ".hidden", "a/b", "tab\tbed", "x" * 256):
            with pytest.raises(ValidationError):
                await catalog.create_table((*ns.split("."), bad), SCHEMA)
            with pytest.raises(ValidationError):
                await catalog.create_namespace((bad,))
        assert await catalog.list_tables(ns) == [name]
        await catalog.drop_table(name)
        await catalog.drop_namespace(ns)
        assert not await catalog.namespace_exists(ns)

    # -- where tables may live -----------------------------------------------------------------
    @pytest.mark.anyio
    async def test_tables_lie_inside_the_catalogs_roots(self, subject: Subject) -> None:
        catalog, ns = subject.catalog, subject.ns("db")
        await catalog.create_namespace(ns)
        table = await catalog.create_table(f"{ns}.t", SCHEMA)
        outside = "s3://elsewhere-bucket/t" if "://" in table.location else "/elsewhere/t"
        if subject.names_roots:
            assert catalog.roots.contains(table.location)
            refused: type[Exception] = LocationNotAllowedError
        else:  # vouches for no place, its own tables' included; the server judges
            assert not catalog.roots and not catalog.roots.contains(table.location)
            refused = NotAuthorizedError
        for location in (outside, f"{table.location}/../../../escaped", table.location):
            with pytest.raises(LocationNotAllowedError):
                await catalog.check_new_table(f"{ns}.u", location)
        assert not await catalog.table_exists(f"{ns}.u")
        # a commit that would put the table's files outside is refused, typed, and lands nothing
        with pytest.raises(refused, match="elsewhere"):
            await table.set_properties({"write.data.path": f"{outside}/data"})
        again = await catalog.load_table(f"{ns}.t")
        assert again.metadata_location == table.metadata_location
        assert "write.data.path" not in again.metadata.properties

    @pytest.mark.anyio
    async def test_check_new_table_refuses_a_place_inside_or_around_a_table(self, subject: Subject) -> None:
        catalog, ns = subject.catalog, subject.ns("db")
        await catalog.create_namespace(ns)
        table = await catalog.create_table(f"{ns}.t", SCHEMA)
        inside = f"{table.location}/inner"
        around = table.location.rsplit("/", 1)[0]
        assert is_within(normalized_location(inside), normalized_location(table.location))
        for location in (inside, around):
            with pytest.raises(LocationNotAllowedError):
                await catalog.check_new_table(f"{ns}.other", location)

    @pytest.mark.anyio
    async def test_no_table_is_placed_inside_another_by_its_name(self, subject: Subject) -> None:
        catalog, ns = subject.catalog, subject.ns("db")
        await catalog.create_namespace(ns)
        table = await catalog.create_table(f"{ns}.t", SCHEMA)
        await table.append(rows([1]))
        # the table's name as a namespace, then a table in it: refused where its folder would
        # be the table's, else placed elsewhere
        try:
            await catalog.create_namespace(f"{ns}.t")
            inner = await catalog.create_table(f"{ns}.t.inner", SCHEMA)
        except ValidationError:
            if subject.nested_namespaces:
                assert not await catalog.table_exists(f"{ns}.t.inner")
        else:
            inner_place = normalized_location(inner.location)
            assert not is_within(inner_place, normalized_location(table.location))
        assert await ids_of(await catalog.load_table(f"{ns}.t")) == [1]
