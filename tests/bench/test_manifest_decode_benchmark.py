"""The manifest decode benchmark's tiny mode runs, and the decoder the columnar path uses reads
Java-shaped and PyIceberg-written v2 manifests as fastavro does, re-blocked or not."""

from __future__ import annotations

from benchmark_runs import run_tiny, table_lines


def test_manifest_decode_benchmark_tiny_mode_runs() -> None:
    stdout = run_tiny("manifest_decode.py", timeout=180)
    matrix = [r for r in table_lines(stdout) if len(r.split("|")) == 12]
    header, rows = matrix[0], {r.split("|")[1].strip(): r for r in matrix[1:]}
    labels = [cell.strip() for cell in header.split("|")[3:8]]
    assert [label.split()[:2] for label in labels] == [["v2", "Java"]] * 3 + [
        ["v1", "Java"],
        ["v2", "PyIceberg"],
    ]
    assert {"polars.read_avro", "fastavro.reader", "zlib inflate only (floor)"} <= set(rows), rows
    assert rows["fastavro.reader"].split("|")[-2].strip() == f"intact ({labels[1]}, {labels[3]}, {labels[4]})"
    intact = [
        v for v in rows["polars.read_avro"].split("|")[-2].split(";") if v.strip().startswith("intact (")
    ]
    assert intact and labels[1] in intact[0] and labels[4] in intact[0], rows["polars.read_avro"]
    reblocked = rows["re-block, then polars.read_avro -> to_arrow"].split("|")[-2]
    assert reblocked == rows["polars.read_avro"].split("|")[-2], reblocked  # intact where polars is
    assert "Many manifests in one call" in stdout
    assert "open_columnar (polars + ColumnarManifest)" in stdout
    reblock = [r.split("|") for r in table_lines(stdout) if len(r.split("|")) == 11]
    assert reblock[0][1].strip() == "manifest" and reblock[0][-2].strip() == "same table"
    shapes = {r[1].strip(): r for r in reblock[1:]}
    assert {labels[0], labels[1], labels[2], labels[4]} <= set(shapes), shapes
    assert all(r[-2].strip() == "yes" for r in shapes.values()), shapes  # polars reads both alike
    assert [r[3].strip() for label, r in shapes.items() if "PyIceberg" in label] == ["50"]
