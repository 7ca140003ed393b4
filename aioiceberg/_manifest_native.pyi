"""The compiled manifest decoder (native/): see aioiceberg.spec.manifest.native_decode."""

def decode_arrow(data: bytes) -> tuple[object, object] | str:
    """(schema, array) PyCapsules ("arrow_schema", "arrow_array") of one record batch, or a
    str naming a writer-schema type it does not decode; ValueError for damaged bytes."""

def read_header(data: bytes) -> tuple[dict[str, str], int]: ...
