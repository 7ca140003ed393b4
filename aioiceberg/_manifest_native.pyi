"""The compiled manifest decoder (native/): see aioiceberg.spec.manifest.native_decode."""

from typing import Any

def decode_columns(data: bytes) -> tuple[int, list[tuple[str, tuple[Any, ...]]]] | str: ...
