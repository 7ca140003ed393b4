"""The commit seam has no back doors: every protocol fills in the small interface under the
template, none overrides the template or reaches into another object's private state, every
commit protocol lives under ``commit/protocols``, and the commit layer picks the append."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path
from types import ModuleType

import pytest

import aioiceberg
import aioiceberg.catalogs
import aioiceberg.commit
from aioiceberg.commit.appends import MergeAppend, append_for
from aioiceberg.commit.protocols.base import CommitProtocol
from aioiceberg.commit.snapshot_producer import FastAppend

PACKAGE = Path(aioiceberg.__file__).parent
PROTOCOLS = PACKAGE / "commit" / "protocols"

#: the template: shared by every protocol, overridden by none
TEMPLATE = (
    "commit_table",
    "_commit_remotely",
    "_landed_remotely",
    "accepts",
    "check_commit_point",
    "stamped",
)

_OPTIONAL = {"aiobotocore", "aiohttp", "botocore"}


def _import_all(package: ModuleType) -> None:
    """Every module of ``package``, so that every protocol class it defines exists."""
    for info in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
        try:
            importlib.import_module(info.name)
        except ImportError as exc:  # an optional dependency: its protocol cannot be checked here
            if exc.name not in _OPTIONAL:
                raise


def _protocols() -> list[type[CommitProtocol]]:
    _import_all(aioiceberg.commit)
    _import_all(aioiceberg.catalogs)
    found: list[type[CommitProtocol]] = []
    todo = list(CommitProtocol.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return sorted(found, key=lambda c: c.__qualname__)


PROTOCOL_CLASSES = _protocols()


def test_every_catalog_and_store_protocol_is_found() -> None:
    names = {c.__name__ for c in PROTOCOL_CLASSES}
    assert {"ConditionalWriteProtocol", "DynamoDbProtocol", "PointerProtocol", "RestProtocol"} <= names


@pytest.mark.parametrize("cls", PROTOCOL_CLASSES, ids=lambda c: c.__name__)
def test_no_protocol_overrides_the_template(cls: type[CommitProtocol]) -> None:
    overridden = [name for name in TEMPLATE if getattr(cls, name) is not getattr(CommitProtocol, name)]
    assert overridden == [], f"{cls.__qualname__} overrides the template: {overridden}"


@pytest.mark.parametrize("cls", PROTOCOL_CLASSES, ids=lambda c: c.__name__)
def test_each_protocol_implements_the_hook_its_commit_point_needs(cls: type[CommitProtocol]) -> None:
    """A server that applies commits gets the change as it is; any other protocol gets the
    metadata checked and applied here, to swap in. Never both, never neither."""
    swaps = cls.swap is not CommitProtocol.swap
    sends = cls.apply_remotely is not CommitProtocol.apply_remotely
    assert (swaps, sends) == ((False, True) if cls.server_applies else (True, False)), cls.__qualname__


@pytest.mark.parametrize("cls", PROTOCOL_CLASSES, ids=lambda c: c.__name__)
def test_protocols_live_under_commit_protocols(cls: type[CommitProtocol]) -> None:
    assert cls.__module__.startswith("aioiceberg.commit.protocols."), cls.__module__


@pytest.mark.parametrize("path", sorted(PROTOCOLS.glob("*.py")), ids=lambda p: p.name)
def test_protocol_modules_read_no_private_attribute_of_another_object(path: Path) -> None:
    """What a catalog gives its protocol is public: a protocol reads ``_name`` off itself only."""
    tree = ast.parse(path.read_text(), str(path))
    reached = [
        f"line {node.lineno}: {ast.unparse(node)}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
    ]
    assert reached == []


def test_protocol_modules_import_no_catalog() -> None:
    for path in sorted(PROTOCOLS.glob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        modules = [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)] + [
            alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names
        ]
        upward = [
            m
            for m in modules
            if m in ("aioiceberg.catalog", "aioiceberg.table") or m.startswith("aioiceberg.catalogs")
        ]
        assert upward == [], f"{path.name} imports {upward}"


def test_the_commit_layer_chooses_the_append() -> None:
    from aioiceberg.maintenance import manifests

    assert manifests.append_for is append_for  # maintenance names the commit layer's choice
    plain = append_for([], {})
    merging = append_for(
        [], {"commit.manifest-merge.enabled": "true", "commit.manifest.min-count-to-merge": "7"}
    )
    assert type(plain) is FastAppend
    assert isinstance(merging, MergeAppend) and merging.min_count == 7
