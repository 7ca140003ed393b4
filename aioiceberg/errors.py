"""Every exception aioiceberg raises.

Each class says whether repeating the operation can help (``retryable``), so retry
loops ask the error instead of keeping lists of exception types.
"""

from __future__ import annotations


class IcebergError(Exception):
    """Base of every aioiceberg error."""

    retryable: bool = False
    # another writer won the race for a version: a commit retry has its own budget for these
    lost_race: bool = False
    # set when a retry loop spent its budget on this error: loops around that one do not
    # retry it again (budgets would multiply); ``retryable`` still tells the caller
    retries_spent: bool = False


class ValidationError(IcebergError, ValueError):
    """An argument or a model object breaks a rule of the format."""


class InvalidMetadataError(IcebergError):
    """A metadata object (JSON or Avro) is malformed; names the object and what is wrong."""

    def __init__(self, message: str, *, location: str | None = None) -> None:
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class CorruptFileError(InvalidMetadataError):
    """A file's bytes are damaged: truncated, bit-flipped, wrong magic, bad footer."""


class UnsupportedError(IcebergError):
    """A feature, type, transform or format version this build cannot handle."""


class MissingExtraError(UnsupportedError, ImportError):
    """An optional dependency is not installed; the message names the extra that brings it
    (``pip install 'aioiceberg[s3]'``). Also an ``ImportError``, for code that guards imports."""

    def __init__(self, message: str, *, name: str, extra: str | None) -> None:
        ImportError.__init__(self, message, name=name)
        self.extra = extra


class UnsupportedFormatVersionError(UnsupportedError, InvalidMetadataError):
    """A metadata or manifest file declares a format version we do not know."""

    def __init__(self, message: str, *, location: str | None = None) -> None:
        InvalidMetadataError.__init__(self, message, location=location)


class NotFoundError(IcebergError):
    """Something looked up does not exist."""


class TableNotFoundError(NotFoundError):
    pass


class NamespaceNotFoundError(NotFoundError):
    pass


class ViewNotFoundError(NotFoundError):
    pass


class AlreadyExistsError(IcebergError):
    pass


class TableAlreadyExistsError(AlreadyExistsError):
    pass


class NamespaceAlreadyExistsError(AlreadyExistsError):
    pass


class ViewAlreadyExistsError(AlreadyExistsError):
    """A view of that name exists, or a table does (tables and views share one name space)."""


class ViewDialectDroppedError(ValidationError):
    """A replace would give a view a current version without a SQL dialect its current one
    has (an engine reading that dialect would lose the view); refused unless the view's
    ``replace.drop-dialect.allowed`` property is true, as Java's view builder does."""

    def __init__(self, view: str, dropped: list[str], previous: list[str], new: list[str]) -> None:
        self.view = view
        self.dropped = dropped
        super().__init__(
            f"cannot replace view {view}: the new version drops SQL dialect(s) {', '.join(dropped)} "
            f"(previous dialects: {', '.join(previous) or 'none'}; new: {', '.join(new) or 'none'}); "
            "set the view property replace.drop-dialect.allowed=true to allow it"
        )


class InvalidPropertyError(ValidationError):
    """A setting holds a value this library cannot use: a table property, or an option of a
    ``lock=`` URI. Names the key, the value and what is allowed. A table property is checked
    when it is set through this library and when a write or commit needs it, so a table
    another engine left with an odd value still reads."""

    def __init__(self, key: str, value: str, allowed: str, *, subject: str = "table property") -> None:
        self.key = key
        self.value = value
        self.allowed = allowed
        super().__init__(f"{subject} {key}={value!r} is not allowed: expected {allowed}")


class LocationNotAllowedError(ValidationError):
    """A location lies outside the roots a catalog may write and delete under (or escapes them
    with ``..``, or nests inside another table): refused before anything is read or written."""

    def __init__(self, message: str, *, location: str | None = None) -> None:
        self.location = location
        super().__init__(message)


class NamespaceNotEmptyError(ValidationError):
    """A namespace still holds tables or child namespaces, so dropping it would orphan them."""


class ExpressionError(IcebergError, ValueError):
    """A row filter cannot be parsed or bound."""


class StoreError(IcebergError):
    """Storage failed; ``retryable`` says whether the same call may succeed later, and
    ``throttled`` that the store refused it to make us slow down (503 SlowDown)."""

    def __init__(
        self, message: str, *, location: str | None = None, retryable: bool = False, throttled: bool = False
    ) -> None:
        self.location = location
        self.retryable = retryable
        self.throttled = throttled
        super().__init__(f"{location}: {message}" if location else message)


class ObjectNotFoundError(StoreError, NotFoundError):
    def __init__(self, message: str = "object not found", *, location: str | None = None) -> None:
        super().__init__(message, location=location, retryable=False)


class PreconditionFailedError(StoreError):
    """A conditional write lost: the object exists (create-only) or changed (write-if-match)."""

    def __init__(self, message: str = "precondition failed", *, location: str | None = None) -> None:
        super().__init__(message, location=location, retryable=False)


class WriteOutcomeUnknownError(StoreError):
    """A conditional write was sent but its outcome was never seen: it may have landed."""

    def __init__(self, message: str = "write outcome unknown", *, location: str | None = None) -> None:
        super().__init__(message, location=location, retryable=False)


class NotAuthorizedError(StoreError):
    """A service refused our credentials (401, a refused token request) or the operation (403):
    repeating the same call cannot help. Never carries the secret that was refused."""

    def __init__(self, message: str, *, location: str | None = None) -> None:
        super().__init__(message, location=location, retryable=False)


class ConditionalWritesUnsupportedError(StoreError, UnsupportedError):
    """The store does not honour If-None-Match / If-Match, so commits through it are unsafe."""

    def __init__(self, message: str, *, location: str | None = None) -> None:
        super().__init__(message, location=location, retryable=False)


class ListingStalledError(StoreError):
    """A paged listing stopped moving: the store handed back a continuation token it had
    already given (or the same page again), so asking for the next page would never end."""

    def __init__(self, message: str, *, location: str | None = None) -> None:
        super().__init__(message, location=location, retryable=False)


class CommitError(IcebergError):
    """A commit did not go through as asked. Each subclass fixes ``retryable`` once (none
    flips its parent's), so ``except CommitError`` catches every outcome and the flag tells
    them apart."""


class CommitFailedError(CommitError):
    """Another writer won the race: the requirements no longer hold, and a refresh and retry
    may succeed (the commit loop does that itself; callers see it only from protocols)."""

    retryable = True
    lost_race = True


class CommitConflictError(CommitError):
    """Concurrent changes conflict with this one, or retries are exhausted; the table is unchanged."""

    retryable = False


class CommitStateUnknownError(CommitError):
    """The commit may or may not have landed; nothing was deleted. Check the table before retrying."""

    retryable = False


class ReadOnlyTableError(UnsupportedError):
    """The table was opened without a way to commit (one metadata file, or a commit point
    this process cannot reach); the message says which option makes it writable."""


class CommitPointMismatchError(IcebergError):
    """The table commits through another commit point than this writer's: committing here
    would fork its history."""


class PlanInterruptedError(IcebergError):
    """Planning was cancelled from outside (the loop shutting down, say) before its last task:
    the tasks seen so far are not the whole plan."""

    retryable = True


class RewriteFailedError(IcebergError):
    """A data file rewrite (compaction) lost a group without partial progress: nothing was
    committed and the files written for it were deleted."""


class SparkSetupError(IcebergError):
    """Spark's Python workers cannot run aioiceberg (another Python, or a missing package):
    said once, when the data source is registered, instead of in every query."""
