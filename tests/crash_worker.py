"""One writer process for the crash test: appends, deletes and overwrites until it is killed.

``python crash_worker.py ROOT LOCK OPTIONS_JSON WRITER JOURNAL SEED``. Every operation is
journaled before it starts and again when it is acknowledged or refused, each line
flushed and fsynced, so the test knows which operations are certain, refused or ambiguous
(the process was killed between the two lines). Each operation touches ids of its own:
appends and overwrites add a fresh group of three ids; deletes and overwrites remove a
group this writer saw acknowledged and never touched since.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
from typing import Any

import pyarrow as pa

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("writer", pa.string())])


class Journal:
    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, **record: Any) -> None:
        os.write(self.fd, (json.dumps(record) + "\n").encode())
        os.fsync(self.fd)


def _group(writer: int, n: int) -> list[int]:
    start = writer * 1_000_000 + n * 10
    return [start, start + 1, start + 2]


async def run(
    root: str, lock: str | None, options: dict[str, Any], writer: int, journal: Journal, seed: int
) -> None:
    import aioiceberg
    from aioiceberg.errors import CommitConflictError, IcebergError

    rng = random.Random(seed)
    catalog = aioiceberg.connect(root, lock=lock, storage_options=options or None)
    table = await catalog.load_table("db.t")
    import pyarrow.parquet  # noqa: F401  (the write path's imports are not part of the test)

    import aioiceberg.rowlevel
    import aioiceberg.write

    journal.write(phase="ready")
    mine: list[list[int]] = []  # acknowledged groups this writer may remove
    for n in range(1_000_000):
        kind = rng.choice(["append", "append", "delete", "overwrite"]) if mine else "append"
        add = _group(writer, n) if kind != "delete" else []
        remove = mine.pop(rng.randrange(len(mine))) if kind != "append" else []
        journal.write(phase="begin", op=f"{writer}:{n}", kind=kind, add=add, remove=remove)
        data = pa.table({"id": add, "writer": [f"w{writer}"] * len(add)}, schema=SCHEMA)
        condition = f"id IN ({', '.join(map(str, remove))})" if remove else None
        try:
            if kind == "append":
                await table.append(data)
            elif kind == "delete":
                await table.delete(condition)
            else:
                await table.overwrite(data, condition)
        except CommitConflictError as exc:  # definitely not applied; the removed group stays
            journal.write(phase="refused", op=f"{writer}:{n}", error=str(exc)[:300])
            if remove:
                mine.append(remove)
            continue
        except IcebergError as exc:  # unknown outcome: neither acknowledged nor refused
            journal.write(phase="error", op=f"{writer}:{n}", error=f"{type(exc).__name__}: {exc}"[:300])
            return
        journal.write(phase="ack", op=f"{writer}:{n}")
        if add:
            mine.append(add)


def main() -> None:
    root, lock, options, writer, journal, seed = sys.argv[1:7]
    asyncio.run(run(root, lock or None, json.loads(options), int(writer), Journal(journal), int(seed)))


if __name__ == "__main__":
    main()
