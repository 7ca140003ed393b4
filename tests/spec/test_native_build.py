"""An install on a machine with a Rust toolchain carries the compiled manifest decoder.

The extension is optional at install (without cargo, polars decodes manifests), so a failed
build would otherwise pass unnoticed: every native test would skip and plans would quietly
run on the slower path.
"""

from __future__ import annotations

import shutil

import pytest

from aioiceberg.spec.manifest.native_decode import native_available


def test_the_decoder_is_built_where_cargo_exists() -> None:
    if shutil.which("cargo") is None:
        pytest.skip("no Rust toolchain here: the install leaves the decoder out by design")
    assert native_available(), (
        "cargo is on PATH but aioiceberg._manifest_native is not importable: rerun `make setup`"
    )
