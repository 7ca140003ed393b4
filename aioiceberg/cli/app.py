"""Subcommands of ``aioiceberg``: thin wrappers that parse text, call the blocking API, print.

A TABLE argument is a catalog identifier (``db.events``) or, for reading commands, a
table location or metadata file (anything with a ``/``).
"""

from __future__ import annotations

import csv
import datetime as dt
import logging
import os
import re
import sys
import time
import zoneinfo
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table as RichTable

from aioiceberg.cli.arguments import (
    expand_files,
    is_secret_key,
    parse_key_values,
    parse_schema_text,
    parse_storage_options,
    parse_table_config,
    parse_time,
    split_top_level,
)
from aioiceberg.cli.messages import one_line
from aioiceberg.errors import (
    ExpressionError,
    IcebergError,
    TableAlreadyExistsError,
    TableNotFoundError,
)

__all__ = ["CliError", "cli"]

# Piped output (tests, scripts) gets wide lines instead of rich's 80-column wrapping.
console = Console(highlight=False, soft_wrap=True, width=None if sys.stdout.isatty() else 200)


class CliError(Exception):
    """A user mistake, reported as one ``error: ...`` line with exit code 1."""


class State:
    """What the group options set up; the catalog is opened on first use and closed at exit."""

    def __init__(
        self, warehouse: str, storage_options: dict[str, str], lock: str | None, tables_in: str | None = None
    ) -> None:
        self.warehouse = warehouse
        self.storage_options = storage_options
        self.lock = lock
        self.tables_in = tables_in
        self.may_create = False
        """Set by the commands that make a warehouse when there is none (create, namespace)."""
        self._catalog: Any = None

    def _require_local_warehouse(self) -> None:
        """A local warehouse directory that is not there is a typo far more often than an empty
        warehouse: said so, instead of "no tables". Object stores have no directories to check."""
        root = self.warehouse
        scheme, colon, _ = root.partition(":")
        if root.startswith("file:"):
            root = unquote(urlsplit(root).path)
        elif colon and "/" not in scheme:  # s3://, sqlite:///, s3tables:arn:..., glue://
            return
        if not os.path.exists(root):
            raise CliError(
                f"warehouse {self.warehouse} does not exist (no directory {os.path.abspath(root)}): check "
                "-w / AIOICEBERG_WAREHOUSE, or start one with `aioiceberg create` or `aioiceberg namespace`"
            )
        if not os.path.isdir(root):
            raise CliError(f"warehouse {self.warehouse} is not a directory")

    @property
    def catalog(self) -> Any:
        if self._catalog is None:
            from aioiceberg import sync  # loads on use: --help starts without the engine

            if not self.may_create:
                self._require_local_warehouse()

            self._catalog = sync.connect(
                self.warehouse, self.lock, self.storage_options or None, warehouse=self.tables_in
            )
        return self._catalog

    def close(self) -> None:
        if self._catalog is not None:
            self._catalog.aclose()

    def table(self, name: str) -> Any:
        """A catalog table by identifier, or any table by location / metadata file."""
        from aioiceberg import sync  # loads on use: --help starts without the engine

        try:
            if "/" in name:
                return sync.load_table(name, self.storage_options or None, self.lock)
            return self.catalog.load_table(name)
        except TableNotFoundError:
            where = "" if "/" in name else f" in warehouse {self.warehouse}"
            raise CliError(f"table {name} not found{where}") from None


pass_state = click.make_pass_decorator(State)


@contextmanager
def filter_errors(text: str | None) -> Iterator[None]:
    try:
        yield
    except ExpressionError as exc:
        raise CliError(f"bad filter {text!r}: {one_line(exc)}") from None


def _columns(text: str | None) -> tuple[str, ...]:
    return tuple(c.strip() for c in text.split(",") if c.strip()) if text else ("*",)


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _when(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _partition_text(task: Any) -> str:
    parts = []
    for pf, value in zip(task.spec.fields, task.file.partition, strict=False):
        try:
            source = task.schema.find_field(pf.source_id).field_type
            shown = "null" if value is None else pf.transform.to_human_string(value, source)
        except Exception:
            shown = str(value)
        parts.append(f"{pf.name}={shown}")
    return ", ".join(parts)


def _partition_field(pf: Any, schema: Any) -> str:
    try:
        source = schema.find_field(pf.source_id).name
    except IcebergError:
        source = f"field {pf.source_id}"
    return f"{pf.transform}({source}) as {pf.name}"


def _relative(path: str, base: str) -> str:
    return path[len(base) + 1 :] if path.startswith(base + "/") else path


def _scan(table: Any, row_filter: str | None, columns: str | None, snapshot_id: int | None, **kw: Any) -> Any:
    with filter_errors(row_filter):
        scan = table.scan(
            row_filter=row_filter if row_filter else None,
            selected_fields=_columns(columns),
            snapshot_id=snapshot_id,
            **kw,
        )
    scan.projection()  # an unknown --columns name fails before planning, `plan` included
    return scan


# The grammar of aioiceberg.expressions.parser, for --help; \b keeps click from rewrapping it.
FILTER_HELP = """\b
Filter (--filter) grammar, keywords in any case:
  column = 'text' | column > 5 | 5 < column     (= == != <> < <= > >=)
  column [NOT] IN (1, 2, 3)     column [NOT] BETWEEN 1 AND 9
  column IS [NOT] NULL          column IS [NOT] NAN
  column [NOT] LIKE 'prefix%'   NOT ... | ... AND ... | ... OR ... | ( ... )
Literals: 12, 1.5, 1e3, 'text' ('' for a quote), true, false, X'0a0b'.
Dates and times are quoted text: date '2024-05-01'; timestamp '2024-05-01'
(midnight) or '2024-05-01T12:30:00'; timestamptz '2024-05-01' (midnight UTC),
'2024-05-01T12:30:00Z' or '2024-05-01 14:30+02:00' (the offset is required).
Columns are dotted names (address.city); quote odd ones with "..." or `...`."""
SNAPSHOT_ID_HELP = "Read this snapshot instead of the current one (ids: `aioiceberg history TABLE`)."


def _require(table: Any, name: str, what: str) -> Any:
    method = getattr(table, name, None)
    if method is None:
        raise CliError(f"{what} is not available in this version of aioiceberg (Table.{name} is missing)")
    return method


def _examples(*commands: str) -> str:
    """An epilog for --help; ``\\b`` keeps click from rewrapping the lines."""
    return "\b\nExamples:\n" + "\n".join(f"  {c}" for c in commands)


# -- group -----------------------------------------------------------------------------------------
def _refuse_uri_secrets(uri: str) -> None:
    """A catalog URI typed on the command line must not carry a secret (``token=``, ...)."""
    secret = [key for key, _ in parse_qsl(urlsplit(uri).query, keep_blank_values=True) if is_secret_key(key)]
    if secret:
        raise CliError(
            f"--warehouse holds a secret ({', '.join(secret)}=...): a command line is visible to every "
            "user of this machine. Put the URI in the AIOICEBERG_WAREHOUSE environment variable instead"
        )


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option(
    "--warehouse",
    "-w",
    envvar="AIOICEBERG_WAREHOUSE",
    default="./warehouse",
    show_default=True,
    help="Warehouse root (a directory, s3://bucket/prefix, an fsspec URL) or a catalog's URI "
    "(sqlite:///PATH, glue://, s3tables://ARN, rest+http://HOST): env AIOICEBERG_WAREHOUSE.",
)
@click.option(
    "--tables-in",
    envvar="AIOICEBERG_TABLES_IN",
    default=None,
    metavar="DIR_OR_URL",
    help="Where a catalog service (sqlite://, glue://) puts new tables (env AIOICEBERG_TABLES_IN).",
)
@click.option(
    "--storage-option",
    "-o",
    "storage_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Store option, e.g. s3.endpoint=http://localhost:4566 (repeatable); unknown keys are "
    "refused. VALUE env:NAME reads an environment variable, @PATH a file: the only ways to give "
    "a secret (s3.secret-access-key, s3.session-token, ...), as the command line is visible to "
    "every user. Standard AWS variables (AWS_ENDPOINT_URL, AWS_PROFILE, ...) work without it.",
)
@click.option(
    "--lock", envvar="AIOICEBERG_LOCK", default=None, help="Commit through DynamoDB: dynamodb://TABLE."
)
@click.version_option(package_name="aioiceberg")
@click.pass_context
def cli(
    ctx: click.Context,
    warehouse: str,
    tables_in: str | None,
    storage_options: tuple[str, ...],
    lock: str | None,
) -> None:
    """aioiceberg: Apache Iceberg tables on any object store, from the command line.

    `aioiceberg COMMAND --help` shows each command's examples; `aioiceberg scan --help`
    the filter grammar (--filter "region = 'eu' AND ts >= '2024-05-01T00:00:00Z'").
    """
    if ctx.get_parameter_source("warehouse") == click.core.ParameterSource.COMMANDLINE:
        _refuse_uri_secrets(warehouse)
    state = State(warehouse, parse_storage_options(storage_options, os.environ), lock, tables_in)
    ctx.obj = state
    ctx.call_on_close(state.close)


# -- create / list / describe ----------------------------------------------------------------------
@cli.command(
    epilog=_examples(
        'aioiceberg create db.events --schema "id long not null, ts timestamptz, region string" -p "day(ts)"',
        "aioiceberg create db.copy --schema events.parquet --property write.format.default=parquet",
    )
)
@click.argument("table")
@click.option(
    "--schema",
    "schema_text",
    required=True,
    help="Inline ('id long, ts timestamptz, region string') or a Parquet file whose schema to use.",
)
@click.option("--partition-by", "-p", default=None, help="Comma-separated, e.g. 'day(ts), bucket(16, id)'.")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE", help="Table property.")
@click.option("--format-version", type=click.IntRange(1, 3), default=2, show_default=True)
@pass_state
def create(
    state: State,
    table: str,
    schema_text: str,
    partition_by: str | None,
    properties: tuple[str, ...],
    format_version: int,
) -> None:
    """Create a table (and the warehouse directory, when it is new)."""
    state.may_create = True
    schema: Any
    if schema_text.lower().endswith(".parquet") or os.path.isfile(schema_text):
        import pyarrow.parquet as pq  # loads on use: --help starts without the engine

        try:
            schema = pq.read_schema(schema_text)
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read the schema of {schema_text}: {exc}") from None
    else:
        schema = parse_schema_text(schema_text)
    try:
        created = state.catalog.create_table(
            table,
            schema=schema,
            partition_by=split_top_level(partition_by) if partition_by else None,
            properties=parse_key_values(properties, "property"),
            format_version=format_version,
        )
    except TableAlreadyExistsError:
        raise CliError(f"table {table} already exists in warehouse {state.warehouse}") from None
    console.print(f"created {table} at {created.location}")
    console.print(str(created.schema()))
    if created.spec().fields:
        shown = ", ".join(_partition_field(f, created.schema()) for f in created.spec().fields)
        console.print(f"partitioned by {shown}")


@cli.command("list", epilog=_examples("aioiceberg list", "aioiceberg -w s3://bucket/wh list db"))
@click.argument("namespace", required=False)
@pass_state
def list_(state: State, namespace: str | None) -> None:
    """List namespaces and their tables (all, or below NAMESPACE)."""
    catalog = state.catalog
    if namespace is not None and not catalog.namespace_exists(namespace):
        raise CliError(f"namespace {namespace} not found in warehouse {state.warehouse}")
    pending = [namespace] if namespace else list(catalog.list_namespaces())
    if not pending:
        console.print(f"no tables in {state.warehouse}")
        return
    while pending:
        ns = pending.pop(0)
        tables = catalog.list_tables(ns)
        props = catalog.load_namespace_properties(ns)
        extra = f"  ({', '.join(f'{k}={v}' for k, v in sorted(props.items()))})" if props else ""
        console.print(f"{ns}{extra}")
        for name in tables:
            console.print(f"  {name}")
        pending[0:0] = list(catalog.list_namespaces(ns))


@cli.command(epilog=_examples("aioiceberg describe db.events", "aioiceberg describe ./warehouse/db/events"))
@click.argument("table")
@pass_state
def describe(state: State, table: str) -> None:
    """Show schema, partition spec, sort order, properties and the current snapshot."""
    t = state.table(table)
    md = t.metadata
    console.print(f"table       {t.identifier or t.location}")
    console.print(f"location    {t.location}")
    console.print(f"metadata    {t.metadata_location}")
    console.print(f"format      v{md.format_version}   uuid {md.table_uuid}")
    schema = t.schema()
    grid = RichTable(title=f"schema (id {schema.schema_id})", title_justify="left")
    for col in ("id", "name", "type", "required"):
        grid.add_column(col)
    for f in schema.fields:
        grid.add_row(str(f.field_id), f.name, str(f.field_type), "yes" if f.required else "no")
    console.print(grid)
    spec = t.spec()
    fields = ", ".join(_partition_field(f, schema) for f in spec.fields) or "unpartitioned"
    console.print(f"partition spec (id {spec.spec_id}): {fields}")
    order = md.sort_order()
    console.print(
        f"sort order (id {order.order_id}): {', '.join(str(f) for f in order.fields) or 'unsorted'}"
    )
    if t.properties:
        console.print("properties:")
        for key, value in sorted(t.properties.items()):
            console.print(f"  {key} = {value}")
    else:
        console.print("properties: none")
    snap = t.current_snapshot()
    if snap is None:
        console.print("current snapshot: none (empty table)")
        return
    console.print(
        f"current snapshot: {snap.snapshot_id} at {_when(snap.timestamp_ms)} ({snap.operation or '?'})"
    )
    if snap.summary is not None:
        summary = snap.summary.to_dict()
        for key in ("total-records", "total-data-files", "total-files-size", "total-delete-files"):
            if key in summary:
                console.print(f"  {key} = {summary[key]}")
    console.print(f"snapshots: {len(t.snapshots())}")


# -- append ----------------------------------------------------------------------------------------
_OFFSET_AT_END = r"([Zz]|[+-]\d{2}(:?\d{2})?)$"


def _zoned_columns(arrow_schema: Any) -> list[str]:
    import pyarrow as pa  # loads on use: --help starts without the engine

    return [f.name for f in arrow_schema if pa.types.is_timestamp(f.type) and f.type.tz is not None]


def _check_zone(zone: str) -> str:
    """An IANA zone name (Europe/Paris, UTC) or a fixed offset (+02:00), as Arrow takes them."""
    if re.fullmatch(r"[+-]\d{2}:\d{2}", zone):
        return zone

    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise CliError(
            f"unknown time zone {zone!r}: give an IANA name (UTC, Europe/Paris) or an offset (+02:00)"
        ) from None
    return zone


def _assume_zone(data: Any, arrow_schema: Any, zone: str) -> Any:
    """Timestamps without a zone bound for timestamptz columns, read as wall-clock times in
    ``zone``; values that carry an offset keep it. CSV columns arrive as text here."""
    # loads on use: --help starts without the engine
    import pyarrow as pa
    import pyarrow.compute as pc

    target = {f.name: f.type for f in arrow_schema}
    for name in _zoned_columns(arrow_schema):
        if name not in data.column_names:
            continue
        col, unit = data[name], target[name].unit
        if pa.types.is_string(col.type):
            col = pc.if_else(pc.equal(col, ""), pa.scalar(None, pa.string()), col)  # CSV's null
            has_offset = pc.match_substring_regex(col, _OFFSET_AT_END)
            no_text = pa.scalar(None, pa.string())
            aware = pc.cast(pc.if_else(has_offset, col, no_text), target[name])
            naive = pc.cast(pc.if_else(has_offset, no_text, col), pa.timestamp(unit))
            local = pc.assume_timezone(naive, zone).cast(target[name])
            col = pc.if_else(has_offset, aware, local)
        elif pa.types.is_timestamp(col.type) and col.type.tz is None:
            col = pc.assume_timezone(col, zone).cast(target[name])
        else:
            continue
        data = data.set_column(data.column_names.index(name), name, col)
    return data


def _naive_timestamp_error(path: str, message: str) -> CliError | None:
    """pyarrow's advice for a CSV timestamp without an offset (``assume_timezone``) is no use on
    a command line: name the column and value, and the option that reads them."""
    m = re.search(r"column #(\d+).*expected a zone offset in '([^']*)'", message)
    if m is None:
        return None
    column = f"#{int(m.group(1)) + 1}"
    if not path.lower().endswith(".gz"):
        try:
            with open(path, newline="", encoding="utf-8") as f:
                header = next(csv.reader(f), [])
            column = repr(header[int(m.group(1))])
        except (OSError, UnicodeDecodeError, IndexError):
            pass
    return CliError(
        f"cannot read {path}: column {column} is a timestamptz but {m.group(2)!r} has no zone offset; "
        "say which zone such times are in with --timezone (e.g. --timezone UTC, Europe/Paris, +02:00), "
        "or write them with an offset (2024-05-01T12:30:00Z, 2024-05-01 14:30:00+02:00)"
    )


def _read_file(path: str, arrow_schema: Any, zone: str | None = None) -> Any:
    # loads on use: --help starts without the engine
    import pyarrow as pa
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    lower = path.lower()
    try:
        if lower.endswith(".parquet"):
            data = pq.read_table(path)
            return _assume_zone(data, arrow_schema, zone) if zone else data
        if lower.endswith((".csv", ".csv.gz")):
            types = {f.name: f.type for f in arrow_schema}
            if zone:  # read as text, then each value by whether it carries an offset
                types.update({name: pa.string() for name in _zoned_columns(arrow_schema)})
            data = pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types=types))
            return _assume_zone(data, arrow_schema, zone) if zone else data
    except (OSError, pa.ArrowException) as exc:
        raise _naive_timestamp_error(path, str(exc)) or CliError(
            f"cannot read {path}: {one_line(exc)}"
        ) from None
    raise CliError(f"cannot read {path}: only .parquet and .csv files can be appended")


@cli.command(
    epilog="""\b
Examples:
  aioiceberg append db.events day1.parquet day2.parquet
  aioiceberg append db.events 'incoming/*.csv' --timezone Europe/Paris

CSV columns are converted to the table's types; a timestamptz value needs a zone
offset (2024-05-01T12:30:00Z, 2024-05-01 14:30:00+02:00) unless --timezone says
which zone the times without one are in.""",
)
@click.argument("table")
@click.argument("files", nargs=-1, required=True)
@click.option(
    "--timezone",
    "-z",
    "zone",
    default=None,
    metavar="ZONE",
    help="Zone of timestamps written without an offset, for timestamptz columns: an IANA name "
    "(UTC, Europe/Paris) or +HH:MM. Values with an offset keep theirs.",
)
@pass_state
def append(state: State, table: str, files: tuple[str, ...], zone: str | None) -> None:
    """Append Parquet or CSV FILES (or globs) to TABLE in one commit."""
    from aioiceberg.spec.arrow import schema_to_arrow  # loads on use: --help starts without the engine

    if zone is not None:
        zone = _check_zone(zone)
    paths = expand_files(files)
    t = state.table(table)
    arrow_schema = schema_to_arrow(t.schema(), include_field_ids=False)
    started = time.perf_counter()
    rows = 0
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task("appending", total=len(paths))

        def batches() -> Iterator[Any]:  # one stream, so one snapshot for all files
            nonlocal rows
            for path in paths:
                data = _read_file(path, arrow_schema, zone)
                rows += data.num_rows
                yield from data.to_batches()
                progress.advance(task)

        t.append(batches())
    snap = t.current_snapshot()
    console.print(
        f"appended {rows:,} rows from {len(paths)} file(s) to {table} in "
        f"{time.perf_counter() - started:.2f} s; snapshot {snap.snapshot_id if snap else '-'}"
    )


# -- plan / scan -----------------------------------------------------------------------------------
@cli.command(
    epilog=FILTER_HELP
    + """

\b
Examples:
  aioiceberg plan db.events --filter "region = 'eu' AND ts >= '2024-05-01T00:00:00Z'"
  aioiceberg plan db.events -f "id BETWEEN 100 AND 200" --max-files 0"""
)
@click.argument("table")
@click.option("--filter", "-f", "row_filter", default=None, help="Rows to keep; grammar below.")
@click.option("--columns", "-c", default=None, help="Comma-separated columns (default: all).")
@click.option("--snapshot-id", type=int, default=None, help=SNAPSHOT_ID_HELP)
@click.option("--max-files", type=int, default=50, show_default=True, help="Files to list (0: none).")
@pass_state
def plan(
    state: State,
    table: str,
    row_filter: str | None,
    columns: str | None,
    snapshot_id: int | None,
    max_files: int,
) -> None:
    """Plan a scan: the files it would read and what the filter pruned."""
    t = state.table(table)
    scan = _scan(t, row_filter, columns, snapshot_id)
    grid = RichTable()
    for col, justify in (("file", "left"), ("partition", "left"), ("rows", "right"), ("size", "right")):
        grid.add_column(col, justify=justify)  # type: ignore[arg-type]
    grid.add_column("deletes", justify="right")
    files = rows = size = 0
    with filter_errors(row_filter):
        for task in scan.plan_files():
            files += 1
            rows += task.file.record_count
            size += task.file.file_size_in_bytes
            if files <= max_files:
                grid.add_row(
                    _relative(task.file.file_path, t.location),
                    _partition_text(task),
                    f"{task.file.record_count:,}",
                    _size(task.file.file_size_in_bytes),
                    str(len(task.delete_files)),
                )
    if files and max_files:
        console.print(grid)
        if files > max_files:
            console.print(f"... and {files - max_files} more files")
    m = scan.metrics
    console.print(f"files: {files:,} to read ({_size(size)}, {rows:,} rows before the residual filter)")
    console.print(
        f"manifests: {m.manifests_total} total, {m.manifests_skipped_by_summaries} skipped by partition "
        f"summaries, {m.manifests_read} read, {m.manifests_from_cache} from cache"
    )
    console.print(
        f"files skipped: {m.entries_skipped_by_partition} by partition, "
        f"{m.entries_skipped_by_metrics} by column metrics (of {m.entries_read} entries read)"
    )
    if m.planning_time_s is not None:
        console.print(f"planned in {m.planning_time_s * 1000:.1f} ms")


@cli.command(
    epilog=FILTER_HELP
    + """

\b
Examples:
  aioiceberg scan db.events -f "region IN ('eu', 'us') AND id > 5" -c id,ts -n 100
  aioiceberg scan db.events -f "ts >= '2024-05-01 00:00+02:00'" -O may.parquet
  aioiceberg scan ./warehouse/db/events --snapshot-id 1234567890"""
)
@click.argument("table")
@click.option("--filter", "-f", "row_filter", default=None, help="Rows to keep; grammar below.")
@click.option("--columns", "-c", default=None, help="Comma-separated columns (default: all).")
@click.option("--limit", "-n", type=click.IntRange(min=0), default=None, help="At most this many rows.")
@click.option("--snapshot-id", type=int, default=None, help=SNAPSHOT_ID_HELP)
@click.option(
    "--output",
    "-O",
    type=click.Path(dir_okay=False, writable=True),
    default=None,
    help="Write the rows to a .parquet or .csv file instead of showing them.",
)
@pass_state
def scan(
    state: State,
    table: str,
    row_filter: str | None,
    columns: str | None,
    limit: int | None,
    snapshot_id: int | None,
    output: str | None,
) -> None:
    """Read rows: to the screen (20 unless --limit) or to a Parquet/CSV file."""
    if output is not None and not output.lower().endswith((".parquet", ".csv")):
        raise CliError(f"cannot write {output}: the output must end in .parquet or .csv")
    t = state.table(table)
    shown_limit = limit if limit is not None or output is not None else 20
    started = time.perf_counter()
    with filter_errors(row_filter):
        data = _scan(t, row_filter, columns, snapshot_id, limit=shown_limit).to_arrow()
    elapsed = time.perf_counter() - started
    if output is not None:
        # loads on use: --help starts without the engine
        import pyarrow.csv as pcsv
        import pyarrow.parquet as pq

        try:
            if output.lower().endswith(".parquet"):
                pq.write_table(data, output)
            else:
                pcsv.write_csv(data, output)
        except OSError as exc:
            raise CliError(f"cannot write {output}: {exc}") from None
        console.print(f"wrote {data.num_rows:,} rows to {output} in {elapsed:.2f} s")
        return
    grid = RichTable()
    for name in data.column_names:
        grid.add_column(name)
    for row in data.to_pylist():
        grid.add_row(*("null" if v is None else str(v) for v in row.values()))
    console.print(grid)
    more = " (the first ones; --limit for more)" if limit is None and data.num_rows == shown_limit else ""
    console.print(f"{data.num_rows:,} rows{more} in {elapsed:.2f} s")


# -- history and snapshot maintenance --------------------------------------------------------------
def _count(summary: dict[str, str], key: str) -> int:
    try:
        return int(summary.get(key, 0))
    except ValueError:
        return 0


def _plus_minus(added: int, removed: int) -> str:
    return (
        " ".join(p for p in (f"+{added:,}" if added else "", f"-{removed:,}" if removed else "") if p) or "-"
    )


def _change(summary: dict[str, str]) -> tuple[str, str, str, str, str]:
    """Rows added, rows deleted, the net change of live rows, data and delete files (+/-), from
    the summary keys Java, PyIceberg and aioiceberg write. A merge-on-read delete removes rows
    by delete files (``added-position-deletes``), a copy-on-write one by rewriting data files
    (an ``overwrite`` whose ``deleted-records`` exceed its ``added-records``)."""
    added, deleted = _count(summary, "added-records"), _count(summary, "deleted-records")
    by_position = _count(summary, "added-position-deletes") - _count(summary, "removed-position-deletes")
    equality = _count(summary, "added-equality-deletes") + _count(summary, "removed-equality-deletes")
    parts = [f"{deleted:,}"] if deleted else []
    if by_position > 0:
        parts.append(f"{by_position:,} by position deletes")
    if _count(summary, "added-equality-deletes"):
        parts.append(f"some by {_count(summary, 'added-equality-deletes'):,} equality deletes")
    counted = any(k in summary for k in ("added-records", "deleted-records", "added-position-deletes"))
    net = added - deleted - by_position
    return (
        f"{added:,}" if added else "-",
        " + ".join(parts) or "-",
        "?" if equality or not counted else f"{net:+,}" if net else "0",
        _plus_minus(_count(summary, "added-data-files"), _count(summary, "deleted-data-files")),
        _plus_minus(_count(summary, "added-delete-files"), _count(summary, "removed-delete-files")),
    )


@cli.command(epilog=_examples("aioiceberg history db.events", "aioiceberg snapshots ./warehouse/db/events"))
@click.argument("table")
@pass_state
def history(state: State, table: str) -> None:
    """List snapshots, oldest first; * marks the current one.

    Each shows the rows it added and deleted, the net change of live rows and the data and
    delete files it added (+) and removed (-). A copy-on-write delete is an `overwrite`:
    it rewrites data files without the deleted rows (more rows deleted than added).
    """
    t = state.table(table)
    current = t.current_snapshot()
    grid = RichTable()
    columns = ("", "snapshot id", "parent", "committed at", "operation", "added rows", "deleted rows")
    for col in (*columns, "net rows", "data files", "delete files", "total rows"):
        grid.add_column(col, justify="right" if col.endswith(("rows", "files")) else "left")
    for snap in sorted(t.snapshots(), key=lambda s: (s.sequence_number, s.timestamp_ms)):
        summary = snap.summary.to_dict() if snap.summary is not None else {}
        grid.add_row(
            "*" if current is not None and snap.snapshot_id == current.snapshot_id else "",
            str(snap.snapshot_id),
            str(snap.parent_snapshot_id or "-"),
            _when(snap.timestamp_ms),
            str(snap.operation or "?"),
            *_change(summary),
            summary.get("total-records", "-"),
        )
    console.print(grid)
    console.print(f"{len(t.snapshots())} snapshot(s)")


cli.add_command(history, "snapshots")


@cli.command(
    epilog=_examples(
        "aioiceberg expire db.events --older-than 7d --retain-last 5 --dry-run",
        "aioiceberg expire db.events --older-than 2024-05-01T00:00:00Z",
    )
)
@click.argument("table")
@click.option(
    "--older-than",
    default=None,
    help="Expire snapshots committed before this: an ISO time (2024-05-01T00:00:00Z; UTC without "
    "an offset) or an age (7d, 12h, 30m); default: the table's retention (history.expire.*).",
)
@click.option("--retain-last", type=click.IntRange(min=1), default=None, help="Always keep this many.")
@click.option(
    "--dry-run", is_flag=True, help="List the snapshots and files that would go; change and delete nothing."
)
@pass_state
def expire(state: State, table: str, older_than: str | None, retain_last: int | None, dry_run: bool) -> None:
    """Expire old snapshots and delete the files only they reached."""
    t = state.table(table)
    method = _require(t, "expire_snapshots", "expire")
    snapshots = {s.snapshot_id: s for s in t.snapshots()}
    cutoff = parse_time(older_than) if older_than else None
    result = method(older_than=cutoff, retain_last=retain_last, **({"dry_run": True} if dry_run else {}))
    expired = sorted(
        result.expired_snapshot_ids,
        key=lambda i: (i not in snapshots, snapshots[i].timestamp_ms if i in snapshots else 0),
    )
    groups = (
        ("data and delete files", result.deleted_content_files),
        ("manifests", result.deleted_manifests),
        ("manifest lists", result.deleted_manifest_lists),
        ("statistics files", result.deleted_statistics_files),
    )
    counts = ", ".join(f"{len(paths)} {what}" for what, paths in groups if paths)
    files = f"{len(result.deleted_files)} file(s)" + (f" ({counts})" if counts else "")
    if dry_run:
        console.print(f"dry run: would expire {len(expired)} snapshot(s) and delete {files}; nothing changed")
    else:
        console.print(f"expired {len(expired)} snapshot(s), deleted {files}")
    for snapshot_id in expired:
        snap = snapshots.get(snapshot_id)
        when = f"  {_when(snap.timestamp_ms)}  {snap.operation or '?'}" if snap is not None else ""
        console.print(f"  snapshot {snapshot_id}{when}")
    for ref in result.removed_refs:
        console.print(f"  {'would remove' if dry_run else 'removed'} ref {ref}")
    if dry_run:
        for _, paths in groups:
            for path in paths:
                console.print(f"  would delete {_relative(path, t.location)}")
    for path in result.failed_deletes:
        console.print(f"  could not delete {_relative(path, t.location)} (left for remove-orphan-files)")
    if result.cleanup_error:
        console.print(f"  {result.cleanup_error}")


@cli.command(epilog=_examples("aioiceberg rollback db.events 1234567890123456789"))
@click.argument("table")
@click.argument("snapshot_id", type=int)
@pass_state
def rollback(state: State, table: str, snapshot_id: int) -> None:
    """Make SNAPSHOT_ID (an ancestor of the current one) current again."""
    t = state.table(table)
    if t.snapshot_by_id(snapshot_id) is None:
        raise CliError(f"table {table} has no snapshot {snapshot_id}")
    manage = getattr(t, "manage_snapshots", None)
    if manage is not None:
        with manage() as ms:
            ms.rollback_to_snapshot(snapshot_id)
    else:
        _require(t, "rollback", "rollback")(snapshot_id)
    t.refresh()
    snap = t.current_snapshot()
    console.print(f"{table} is at snapshot {snap.snapshot_id if snap else '-'}")


@cli.command(epilog=_examples("aioiceberg stats db.events -c id,region"))
@click.argument("table")
@click.option("--columns", "-c", default=None, help="Comma-separated columns (default: all primitive).")
@pass_state
def stats(state: State, table: str, columns: str | None) -> None:
    """Compute column NDV sketches into a Puffin statistics file."""
    t = state.table(table)
    method = _require(t, "compute_statistics", "stats")
    selected: Sequence[str] | None = _columns(columns) if columns else None
    result = method(columns=selected) if selected else method()
    path = getattr(result, "statistics_path", None) or getattr(result, "path", None)
    console.print(f"statistics for {table} written{f' to {path}' if path else ''}")
    md = t.refresh().metadata
    for stat in getattr(md, "statistics", ()) or ():
        for blob in stat.blob_metadata:
            names = [t.schema().find_field(i).name for i in blob.fields]
            ndv = blob.properties.get("ndv", "?") if blob.properties else "?"
            console.print(f"  {', '.join(names)}: ndv {ndv} ({blob.type}) snapshot {stat.snapshot_id}")


# -- catalog maintenance ---------------------------------------------------------------------------
@cli.command(epilog=_examples("aioiceberg drop db.events", "aioiceberg drop db.scratch --purge"))
@click.argument("table")
@click.option("--purge", is_flag=True, help="Also delete every file under the table's location.")
@pass_state
def drop(state: State, table: str, purge: bool) -> None:
    """Unregister TABLE (data and latest metadata kept), or delete it with --purge."""
    try:
        kept = state.catalog.drop_table(table, purge=purge)
    except TableNotFoundError:
        raise CliError(f"table {table} not found in warehouse {state.warehouse}") from None
    if purge:
        console.print(f"dropped {table} and deleted its files")
    else:
        console.print(f"dropped {table}; its data stays, metadata kept at {kept}")


@cli.command(epilog=_examples("aioiceberg rename db.events db.events_old"))
@click.argument("table")
@click.argument("new_name")
@pass_state
def rename(state: State, table: str, new_name: str) -> None:
    """Rename a table (local warehouses only)."""
    try:
        moved = state.catalog.rename_table(table, new_name)
    except TableNotFoundError:
        raise CliError(f"table {table} not found in warehouse {state.warehouse}") from None
    except TableAlreadyExistsError:
        raise CliError(f"table {new_name} already exists in warehouse {state.warehouse}") from None
    console.print(f"renamed {table} to {new_name} ({moved.location})")


@cli.command(epilog=_examples("aioiceberg namespace db --property owner=data"))
@click.argument("namespace")
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE")
@pass_state
def namespace(state: State, namespace: str, properties: tuple[str, ...]) -> None:
    """Create NAMESPACE (and the warehouse directory, when it is new), or set its properties."""
    state.may_create = True
    props = parse_key_values(properties, "property")
    if state.catalog.namespace_exists(namespace):
        state.catalog.update_namespace_properties(namespace, updates=props)
        console.print(f"updated namespace {namespace}")
    else:
        state.catalog.create_namespace(namespace, props)
        console.print(f"created namespace {namespace}")


@cli.command(epilog=_examples("aioiceberg -w /tmp/demo-wh demo --rows 100000"))
@click.option("--rows", type=click.IntRange(min=1000), default=3_000_000, show_default=True)
@click.option("--table", "table_name", default="demo.events", show_default=True)
@click.option("--appends", type=click.IntRange(1, 50), default=4, show_default=True)
@pass_state
def demo(state: State, rows: int, table_name: str, appends: int) -> None:
    """Create, fill, evolve and query a partitioned table, showing timings and pruning."""
    from aioiceberg.cli.demo import run_demo  # loads on use: --help starts without the engine

    run_demo(state.warehouse, state.storage_options or None, state.lock, table_name, rows, appends, console)


# -- server ----------------------------------------------------------------------------------------
@cli.command(
    epilog=_examples(
        "aioiceberg -w ./warehouse serve --port 8181",
        "aioiceberg -w s3://bucket/wh serve --table-config s3.endpoint=http://localhost:9000",
    )
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8181, show_default=True, help="0 picks a free port."
)
@click.option(
    "--table-config",
    "table_config",
    multiple=True,
    metavar="KEY=VALUE",
    help="Handed to clients with every table they load, e.g. s3.endpoint=http://... (repeatable); "
    "a secret's value as env:NAME or @FILE.",
)
@click.option(
    "--auth-file",
    type=click.Path(dir_okay=False),
    help="JSON file of principals, secrets, tokens and grants (or AIOICEBERG_SERVE_AUTH_FILE); "
    "AIOICEBERG_SERVE_TOKEN / AIOICEBERG_SERVE_CREDENTIAL add one principal with write on all.",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    help="Also accept this Host header, e.g. the name of a proxy in front (repeatable).",
)
@click.option("--verbose", "-v", is_flag=True, help="Log every request (debug level) to stderr.")
@pass_state
def serve(
    state: State,
    host: str,
    port: int,
    table_config: tuple[str, ...],
    auth_file: str | None,
    allowed_hosts: tuple[str, ...],
    verbose: bool,
) -> None:
    """Serve the warehouse as an Iceberg REST catalog until SIGINT / SIGTERM.

    Commits go through each table's own commit point, so direct writers of the same
    tables stay safe. Prints the URL it listens on. Without principals configured it
    listens on loopback only and anyone on this machine may use it.
    """
    try:
        # aiohttp: optional (the rest and server extras)
        from aioiceberg.server import run_server
        from aioiceberg.server.auth import load_auth
        from aioiceberg.server.run import check_bind, is_loopback
    except ImportError as exc:
        if isinstance(exc, IcebergError):  # MissingExtraError: already names the extra
            raise
        raise CliError(f"serve needs aiohttp: pip install 'aioiceberg[server]' ({exc})") from None
    auth = load_auth(auth_file, os.environ)
    check_bind(host, auth)
    for warning in auth.warnings if auth is not None else ():
        click.echo(f"warning: {warning}", err=True)
    if auth is None:
        click.echo(
            "no authentication configured: listening on loopback only, and every user of this "
            "machine may read and change every table (see --auth-file)",
            err=True,
        )
    elif not is_loopback(host):
        click.echo(
            f"serving plain HTTP on {host}: tokens and secrets cross the network unencrypted; "
            "put a TLS-terminating proxy in front",
            err=True,
        )

    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    logging.getLogger("aioiceberg.server").setLevel(logging.DEBUG if verbose else logging.WARNING)

    def ready(url: str) -> None:
        click.echo(f"serving {state.warehouse} as an Iceberg REST catalog on {url}")
        sys.stdout.flush()

    run_server(
        state.warehouse,
        lock=state.lock,
        storage_options=state.storage_options,
        host=host,
        port=port,
        table_config=parse_table_config(table_config, os.environ),
        ready=ready,
        warehouse=state.tables_in,
        auth=auth,
        allowed_hosts=allowed_hosts,
    )
    click.echo("stopped")
