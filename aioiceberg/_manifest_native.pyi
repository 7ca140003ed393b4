"""The compiled manifest decoder (native/): see aioiceberg.spec.manifest.native_decode."""

from collections.abc import Sequence

def decode_arrow(data: bytes, skip: Sequence[str] = ...) -> tuple[object, object] | str:
    """(schema, array) PyCapsules ("arrow_schema", "arrow_array") of one record batch, or a
    str naming a writer-schema type it does not decode; ValueError for damaged bytes. The
    ``data_file`` array fields named in ``skip`` are read past: each value null or empty."""

def decode_arrow_joined(
    datas: Sequence[bytes], skip: Sequence[str] = ...
) -> tuple[object, object, list[int]] | str:
    """One record batch of several containers' records in order, as (schema, array, records
    per container), or a str when a type is not decoded or the headers' metadata differ;
    ValueError for damaged bytes, starting "container <index>: ", its ``container`` attribute
    set to that index. ``skip``: as for :func:`decode_arrow`."""

def read_header(data: bytes) -> tuple[dict[str, str], int]: ...
