"""Planning never imports pandas: pyarrow imports it on its first conversion between Arrow
and numpy or Python values (~0.3 CPU-s with the GIL held), which a cold plan paid on its
critical path. Checked in a fresh interpreter, where nothing else imported it first."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, dataclasses, json, sys

    import aioiceberg
    from aioiceberg import sync
    from aioiceberg.io import resolve_io
    from aioiceberg.runtime import default_runtime
    from aioiceberg.spec.manifest import (
        ManifestEntry, ManifestEntryStatus, write_manifest, write_manifest_list,
    )
    from aioiceberg.spec.metadata import Operation, Snapshot, SnapshotRef, Summary
    from aioiceberg.spec.metadata_json import serialize_table_metadata
    from aioiceberg.testing.synthetic import (
        SNAPSHOT_ID, build_table, data_file, empty_metadata, filters, manifest_list_path,
    )

    M, E = 260, 8  # over 256 manifests: the list is decoded into columns
    M3 = 20  # the v3 table's manifests (E entries of 1000 rows each)

    async def build_v3(io, loc):
        # a v3 table with row lineage: manifests without first row ids, which the
        # manifest list assigns and the decoder spreads over the entries
        md = dataclasses.replace(empty_metadata(loc), format_version=3)
        schema = md.schema()
        written = []
        for m in range(M3):
            entries = [
                ManifestEntry(
                    ManifestEntryStatus.ADDED, None, None, None, data_file(schema, loc, m, i, E)
                )
                for i in range(E)
            ]
            path = f"{loc}/metadata/m{m:05d}.avro"
            data, mf = write_manifest(entries, md.spec(), schema, 3, SNAPSHOT_ID, manifest_path=path)
            await io.write(path, data)
            written.append(mf)
        list_path = manifest_list_path(loc)
        await io.write(list_path, write_manifest_list(written, 3, SNAPSHOT_ID, None, 1, first_row_id=0))
        rows = M3 * E * 1000
        snap = Snapshot(
            SNAPSHOT_ID, None, 1, md.last_updated_ms, list_path, Summary(Operation.APPEND),
            schema.schema_id, first_row_id=0, added_rows=rows,
        )
        md = dataclasses.replace(
            md, snapshots=(snap,), current_snapshot_id=SNAPSHOT_ID, last_sequence_number=1,
            refs={"main": SnapshotRef(SNAPSHOT_ID)}, next_row_id=rows,
        )
        meta = f"{loc}/metadata/00001-v3.metadata.json"
        await io.write(meta, serialize_table_metadata(md))
        return meta

    def of_batches(batches):
        ids = [i for b in batches for i in b.column("first_row_id").to_pylist()]
        return sum(len(b) for b in batches), sorted(ids) if None not in ids else None

    async def plans() -> tuple[str, str, list[object]]:
        io = resolve_io("memory://w/t", {}, runtime=default_runtime())
        meta = await build_table(io, "memory://w/t", M, E)
        meta3 = await build_v3(io, "memory://w/v3")
        out: list[object] = [["built", "", "", 0, None, "pandas" in sys.modules]]
        table = await aioiceberg.load_table(meta)
        for name, text in filters(M, E).items():
            for native in (True, False):  # the compiled decoder, and polars
                scan = table.scan(row_filter=text or None, native_decoder=native)
                n = len([t async for t in scan.plan_files()])
                out.append(["async", str(native), name, n, None, "pandas" in sys.modules])
                scan = table.scan(row_filter=text or None, native_decoder=native)
                n, _ = of_batches([b async for b in scan.plan_batches()])
                out.append(["async batches", str(native), name, n, None, "pandas" in sys.modules])
        table3 = await aioiceberg.load_table(meta3)
        for native in (True, False):
            tasks = [t async for t in table3.scan(native_decoder=native).plan_files()]
            ids = sorted(t.file.first_row_id for t in tasks)
            out.append(["async", str(native), "v3", len(tasks), ids, "pandas" in sys.modules])
            scan = table3.scan(native_decoder=native)
            n, ids = of_batches([b async for b in scan.plan_batches()])
            out.append(["async batches", str(native), "v3", n, ids, "pandas" in sys.modules])
        return meta, meta3, out

    meta, meta3, out = asyncio.run(plans())
    blocking = sync.load_table(meta)
    for name, text in filters(M, E).items():
        n = sum(1 for _ in blocking.scan(row_filter=text or None).plan_files())
        out.append(["blocking", "True", name, n, None, "pandas" in sys.modules])
        n, _ = of_batches(list(blocking.scan(row_filter=text or None).plan_batches()))
        out.append(["blocking batches", "True", name, n, None, "pandas" in sys.modules])
    blocking3 = sync.load_table(meta3)
    ids = sorted(t.file.first_row_id for t in blocking3.scan().plan_files())
    out.append(["blocking", "True", "v3", len(ids), ids, "pandas" in sys.modules])
    n, ids = of_batches(list(blocking3.scan().plan_batches()))
    out.append(["blocking batches", "True", "v3", n, ids, "pandas" in sys.modules])
    print(json.dumps(out))
    """
)


def test_plans_of_every_shape_leave_pandas_unimported() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = json.loads(done.stdout.strip().splitlines()[-1])
    tasks = {"": 0, "none": 260 * 8, "day_1pct": 2 * 8, "id_eq": 1, "metrics_only": 1, "v3": 20 * 8}
    # v3 row lineage: manifest m's entry i starts at row (m * 8 + i) * 1000
    row_ids = [k * 1000 for k in range(20 * 8)]
    assert len(rows) == 1 + 2 * 8 + 2 * 4 + 2 * 2 + 2
    for api, native, name, n, ids, imported in rows:  # the first: building the table
        assert n == tasks[name], (api, native, name)
        assert ids == (row_ids if name == "v3" else None), (api, native, name)
        assert imported is False, f"pandas imported by then: {api} {name} (native decoder: {native})"
