"""Manifests of up to a thousand entries are decoded together with those waiting (the batch
lane; for polars only those in blocks of many); the plan keeps the same files as one decoded
by fastavro alone."""

from __future__ import annotations

import io
from contextlib import aclosing
from pathlib import Path
from typing import Any

import fastavro
import pytest

from aioiceberg.io import LocalFileIO
from aioiceberg.runtime import default_runtime
from aioiceberg.scan import ManifestCache, ManifestListCache
from aioiceberg.scan.manifest_loader import BATCH_LANE_MAX_ENTRIES, BATCH_LANE_MIN_BLOCK_ROWS
from aioiceberg.scan.pipeline import LazyTasks
from aioiceberg.spec.manifest.avro_blocks import first_block_rows
from aioiceberg.spec.manifest.columnar import ColumnarRows
from aioiceberg.spec.metadata_json import parse_table_metadata
from aioiceberg.table_scan import TableScan
from aioiceberg.testing.synthetic import build_table, filters

MANIFESTS = 40
SCHEMA = {"type": "record", "name": "r", "fields": [{"name": "x", "type": "long"}]}


def _avro(rows: int, sync_interval: int) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, SCHEMA, ({"x": i} for i in range(rows)), sync_interval=sync_interval)
    return out.getvalue()


def test_first_block_rows_reads_the_layout() -> None:
    assert first_block_rows(_avro(50, 16000)) == 50  # one block
    assert first_block_rows(_avro(50, 1)) == 1  # a block per record, as PyIceberg writes
    empty = _avro(0, 16000)
    assert first_block_rows(empty) is None  # no block
    whole = _avro(50, 16000)
    assert first_block_rows(whole[:20]) is None  # cut in the header
    assert first_block_rows(b"not avro at all") is None
    assert first_block_rows(b"") is None


def _caches(**kw: Any) -> dict[str, Any]:
    return {"cache": ManifestCache(), "manifest_list_cache": ManifestListCache(), **kw}


@pytest.mark.anyio
async def test_mid_sized_manifests_decoded_together_keep_the_same_files(tmp_path: Path) -> None:
    """Manifests of 200 entries (~38 a block), eight fetched at a time (no gathered burst) and
    one decode thread: after the first decode, those that land while it is busy are decoded
    together, and every filter keeps what fastavro keeps, file for file."""
    assert 200 <= BATCH_LANE_MAX_ENTRIES
    io_ = LocalFileIO(fsync=False).bind_runtime(default_runtime())
    meta = await build_table(io_, f"file://{tmp_path}/t", MANIFESTS, 200)
    md = parse_table_metadata(await io_.read(meta), meta)
    manifest = md.current_snapshot()
    assert manifest is not None
    data = await io_.read(sorted(p.as_uri() for p in (tmp_path / "t" / "metadata").glob("m*.avro"))[0])
    assert (first_block_rows(data) or 0) >= BATCH_LANE_MIN_BLOCK_ROWS
    default_runtime().warm_columnar()
    joined_views = 0
    for text in [*filters(MANIFESTS, 200).values(), "id > 500 AND c0 < 30"]:
        scan = TableScan(io_, md, text, **_caches(io_concurrency=8, decode_workers=1))
        got: list[str] = []
        async with aclosing(scan.plan_files().batches()) as batches:
            async for seq in batches:
                entries = seq.entries if isinstance(seq, LazyTasks) else None
                if isinstance(entries, ColumnarRows) and entries.shared is not None:
                    joined_views += 1  # a view of a call that decoded several manifests
                got.extend(t.file.file_path for t in seq)
        reference = TableScan(io_, md, text, **_caches(columnar=False))
        expected = [t.file.file_path async for t in reference.plan_files()]
        assert sorted(got) == sorted(expected), text
    assert joined_views > 0
