"""Async object storage: the one layer that touches S3, local disks, fsspec and memory."""

from aioiceberg.io.base import Capabilities, FileIO, ObjectInfo, Outcome, RangeResult
from aioiceberg.io.local import LocalFileIO
from aioiceberg.io.memory import MemoryFileIO
from aioiceberg.io.probe import ProbeResult, probe, require_conditional_writes
from aioiceberg.io.readahead import InputFile
from aioiceberg.io.resolve import resolve_io
from aioiceberg.io.s3 import S3FileIO
from aioiceberg.io.s3_client import S3Options
from aioiceberg.retrying import Backoff

__all__ = [
    "Backoff",
    "Capabilities",
    "FileIO",
    "InputFile",
    "LocalFileIO",
    "MemoryFileIO",
    "ObjectInfo",
    "Outcome",
    "ProbeResult",
    "RangeResult",
    "S3FileIO",
    "S3Options",
    "probe",
    "require_conditional_writes",
    "resolve_io",
]
