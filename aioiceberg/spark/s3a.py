"""Spark's S3A connector for ``read_table``: which sessions have it, and its per-bucket settings.

With hadoop-aws (and the AWS SDK v2 modules it uses) on the session's classpath, Spark's
own Parquet reader reads files on S3 as ``s3a://`` URLs, so ``read_table`` hands it those
files as it does local ones. The endpoint, region, credentials and addressing style come
from the table's storage options, as ``fs.s3a.bucket.<bucket>.*`` keys in the options of
that one Parquet read: Spark copies a file source's options into the Hadoop configuration
of that read only, so nothing is set on the session or the process. A named profile
becomes S3A's profile credential provider (the SDK's profile files, as botocore reads
them); half a key keeps the files in aioiceberg's reader, which reports it. A storage
option ``s3a.<key>`` is passed on as S3A's ``<key>`` for the read, after the rest: how a
table tunes S3A (its input stream, read policy, vectored reads) without touching the session.
S3A's defaults are kept otherwise (Hadoop 3.5's analytics input stream prefetches each
file's page index: about twice the classic stream's bytes on a one-column query, measured in
benchmarks/README.md). The input stream is not chosen here: Hadoop's per-bucket file system
cache (below) would make it the whole JVM's setting for that bucket.

Hadoop caches one S3A file system per bucket per JVM, built with the settings of its first
use: two tables in one bucket with different credentials in one Spark application read
with the first one's (the data source, ``native=False``, has no such cache).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aioiceberg.io.resolve import S3_SCHEMES, scheme_of
from aioiceberg.io.s3_client import S3Options

__all__ = ["S3A_CLASS", "S3A_PREFIX", "s3a_available", "s3a_jars", "s3a_location", "s3a_read_options"]

S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
S3A_PREFIX = "s3a."  # a storage option ``s3a.<key>`` is S3A's ``fs.s3a.<key>`` for the read
_PROVIDERS = "org.apache.hadoop.fs.s3a"


def s3a_jars(directory: str | Path) -> str:
    """The ``spark.jars`` value for the S3A jars in ``directory`` (as fetched by
    ``tests/spark_s3a/setup.sh <directory>``); "" when it holds none."""
    return ",".join(str(p.resolve()) for p in sorted(Path(directory).glob("*.jar")))


def s3a_available(spark: Any) -> bool:
    """Whether this session's Hadoop configuration resolves ``s3a://`` to a file system class
    (hadoop-aws and the SDK it needs on the classpath). False when it cannot tell (Spark Connect)."""
    try:
        jvm = spark.sparkContext._jvm
        conf = spark.sparkContext._jsc.hadoopConfiguration()
        jvm.org.apache.hadoop.fs.FileSystem.getFileSystemClass("s3a", conf)
        # hadoop-aws without the SDK resolves the class but fails on first use
        jvm.org.apache.spark.util.Utils.classForName(
            "software.amazon.awssdk.services.s3.S3Client", True, False
        )
    except Exception:
        return False
    return True


def s3a_location(file_path: str) -> str | None:
    """``s3a://bucket/key`` for an ``s3``/``s3a``/``s3n`` location, else None."""
    if scheme_of(file_path) not in S3_SCHEMES:
        return None
    parts = urlsplit(file_path)
    if not parts.netloc or parts.query or parts.fragment:
        return None
    return f"s3a://{parts.netloc}{parts.path}"


def s3a_read_options(buckets: set[str], storage_options: Mapping[str, str]) -> dict[str, str] | None:
    """Hadoop keys for reading ``buckets`` through S3A with ``storage_options``; None when
    the options say something S3A cannot be told here (the files stay with aioiceberg)."""
    s3 = S3Options.from_storage_options(storage_options)
    settings: dict[str, str] = {}
    if s3.endpoint_url:
        settings["endpoint"] = s3.endpoint_url
        secure = scheme_of(s3.endpoint_url) != "http"
        settings["connection.ssl.enabled"] = "true" if secure else "false"
    if s3.region:
        settings["endpoint.region"] = s3.region
    path_style = s3.path_style if s3.path_style is not None else s3.endpoint_url is not None
    if path_style or s3.path_style is not None:  # as aioiceberg's own S3 reads
        settings["path.style.access"] = "true" if path_style else "false"
    if s3.access_key_id and s3.secret_access_key:
        settings["access.key"] = s3.access_key_id
        settings["secret.key"] = s3.secret_access_key
        if s3.session_token:
            settings["session.token"] = s3.session_token
            settings["aws.credentials.provider"] = f"{_PROVIDERS}.TemporaryAWSCredentialsProvider"
        else:
            settings["aws.credentials.provider"] = f"{_PROVIDERS}.SimpleAWSCredentialsProvider"
    elif s3.access_key_id or s3.secret_access_key or s3.session_token:
        return None  # half a key: aioiceberg's reader reports it properly
    elif s3.profile:
        settings["aws.credentials.provider"] = f"{_PROVIDERS}.auth.ProfileAWSCredentialsProvider"
        settings["auth.profile.name"] = s3.profile
    for key, value in storage_options.items():  # the table's own S3A settings come last
        if key.startswith(S3A_PREFIX) and len(key) > len(S3A_PREFIX) and value is not None:
            settings[key.removeprefix(S3A_PREFIX)] = str(value)
    return {f"fs.s3a.bucket.{b}.{k}": v for b in sorted(buckets) for k, v in settings.items()}
