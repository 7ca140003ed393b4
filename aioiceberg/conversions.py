"""A scan's rows in the shapes other libraries take: an Arrow stream, a polars LazyFrame.

Their consumers are blocking (a ``RecordBatchReader``'s caller, polars' engine, DuckDB's
threads), so the batches come from the scan runtime's background event loop: they can be
read from any thread, one that runs an event loop included, and never wait on the caller's
loop to turn. Libraries that are optional are imported on use and, when missing, named
with the extra that installs them.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from aioiceberg import extras
from aioiceberg.errors import MissingExtraError

if TYPE_CHECKING:
    import polars as pl

__all__ = ["ArrowStream", "polars_lazy_frame", "require"]

# what the caller projects, pushes down as a limit: read only these columns, stop after n rows
BatchSource = Callable[[list[str] | None, int | None], Iterator[pa.RecordBatch]]


def require(module: str, extra: str, what: str) -> Any:
    """``module`` imported, or ``MissingExtraError`` naming the extra that installs it."""
    extras.require(module, extra, what)
    try:
        return importlib.import_module(module)
    except ImportError as exc:  # installed but broken: say which, with the same advice
        raise MissingExtraError(
            f"{what} needs {module}, which failed to import ({exc}): {extras.install_hint(extra)}",
            name=module,
            extra=extra,
        ) from exc


class ArrowStream:
    """A scan as an Arrow C stream that can be read more than once: every reader (each
    DuckDB query over a registered view, each ``pa.table(stream)``) plans and reads afresh,
    streaming, where a ``RecordBatchReader`` is spent after one pass."""

    def __init__(self, schema: pa.Schema, batches: BatchSource) -> None:
        self._schema = schema
        self._batches = batches

    @property
    def schema(self) -> pa.Schema:
        return self._schema

    def reader(self) -> pa.RecordBatchReader:
        """One pass over the rows; nothing is read before the first batch is asked for."""
        return pa.RecordBatchReader.from_batches(self._schema, self._batches(None, None))

    def __arrow_c_schema__(self) -> object:
        return self._schema.__arrow_c_schema__()

    def __arrow_c_stream__(self, requested_schema: object | None = None) -> object:
        return self.reader().__arrow_c_stream__(requested_schema)


def polars_lazy_frame(schema: pa.Schema, batches: BatchSource) -> pl.LazyFrame:
    """A LazyFrame whose every ``collect()`` streams the scan: the columns the query uses are
    the only ones read, a ``head``/``limit`` stops the read, and polars' filters apply to each
    batch as it arrives (the scan's ``row_filter`` is what prunes files)."""
    # polars: loaded only when used (~0.15 s to import, and not fork-safe)
    import polars as pl
    from polars.io.plugins import register_io_source

    names = schema.names

    def source(
        with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None, _batch_size: int | None
    ) -> Iterator[pl.DataFrame]:
        columns = None
        if with_columns is not None:
            needed = set(with_columns) | set(predicate.meta.root_names() if predicate is not None else ())
            columns = [n for n in names if n in needed] or names[:1]  # a count still needs rows
        remaining = n_rows
        if remaining is not None and remaining <= 0:
            return
        rows = batches(columns, n_rows if predicate is None else None)
        try:
            for batch in rows:
                df = _frame(pl.from_arrow(batch))
                if predicate is not None:
                    df = df.filter(predicate)
                if with_columns is not None:
                    df = df.select(with_columns)
                if remaining is not None:
                    df = df.head(remaining)
                    remaining -= df.height
                yield df
                if remaining is not None and remaining <= 0:
                    return
        finally:
            close = getattr(rows, "close", None)
            if close is not None:
                close()  # stops the read on the loop when polars stops early

    return register_io_source(source, schema=_frame(pl.from_arrow(schema.empty_table())).schema)


def _frame(converted: pl.DataFrame | pl.Series) -> pl.DataFrame:
    import polars as pl  # polars: loaded only when used (~0.15 s to import, and not fork-safe)

    return converted.to_frame() if isinstance(converted, pl.Series) else converted
