"""Optional dependencies and the package extra that installs each.

A feature whose library is missing fails with one typed line naming the extra
(``MissingExtraError``: "... needs aiobotocore, which is not installed: pip install
'aioiceberg[s3]'"), checked where the feature is chosen (a store URI, a catalog URI, a
conversion), not a ``ModuleNotFoundError`` from deep inside the first call.
"""

from __future__ import annotations

from importlib.util import find_spec

from aioiceberg.errors import MissingExtraError

__all__ = ["install_hint", "installed", "require"]


def install_hint(extra: str | None, module: str = "") -> str:
    """The command that installs ``extra`` (None: a library no extra brings, ``module``)."""
    return f"pip install 'aioiceberg[{extra}]'" if extra else f"pip install {module}"


def installed(module: str) -> bool:
    """Whether ``module`` (a top-level name) can be imported, without importing it."""
    try:
        return find_spec(module) is not None
    except (ImportError, ValueError):  # a parent that fails to import, a module set to None
        return False


def require(module: str, extra: str | None, feature: str) -> None:
    """Raise ``MissingExtraError`` naming ``extra`` unless ``module`` can be imported."""
    if not installed(module):
        raise MissingExtraError(
            f"{feature} needs {module}, which is not installed: {install_hint(extra, module)}",
            name=module,
            extra=extra,
        )
