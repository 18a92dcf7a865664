"""The jevmem exception tree.

Every error raised by jevmem derives from :class:`JevmemError`. Errors about a
bad argument also derive from :class:`ValueError`, and "no such node" from
:class:`KeyError`, so generic handlers keep working. The native module raises
these exact classes; an error always means the memory was left unchanged.
"""

from __future__ import annotations

__all__ = [
    "DimensionMismatchError",
    "DurabilityError",
    "InvalidConfigError",
    "InvalidInputError",
    "InvalidScoreError",
    "InvalidTypeError",
    "JevmemError",
    "MissingDependencyError",
    "NodeNotFoundError",
    "SnapshotError",
    "SystemTwoConnectionError",
    "SystemTwoError",
    "SystemTwoHTTPError",
    "SystemTwoResponseError",
    "SystemTwoTimeoutError",
    "TraversalStateError",
    "UnknownQuestionKindError",
    "VectorIndexError",
]


class JevmemError(Exception):
    """Base class of every jevmem error."""


class InvalidInputError(JevmemError, ValueError):
    """An argument was malformed: empty text, NaN in a vector, unknown label..."""


class InvalidTypeError(InvalidInputError, TypeError):
    """An argument had the wrong type: a string where a list is expected, None for text..."""


class DimensionMismatchError(InvalidInputError):
    """An embedding's length differs from the memory's dimension."""


class InvalidScoreError(InvalidInputError):
    """A score or weight was NaN, infinite or outside [0, 1]."""


class InvalidConfigError(JevmemError, ValueError):
    """A configuration value or limit makes no sense."""


class NodeNotFoundError(JevmemError, KeyError):
    """No node has this id (it never existed or was removed)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class UnknownQuestionKindError(JevmemError, KeyError):
    """The local controller has no answer for a question's kind (a request
    asked something it does not know, not a fault of the controller)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class TraversalStateError(JevmemError, RuntimeError):
    """A traversal step was called out of order (e.g. score before expand)."""


class SnapshotError(JevmemError):
    """A snapshot is truncated, corrupted or of an unsupported format version."""


class VectorIndexError(JevmemError):
    """The vector index library failed."""


class DurabilityError(JevmemError, OSError):
    """A durable memory could not make a write durable (a failed write or
    fsync: the memory is read-only from then on, reopen it to recover), or
    its directory is open elsewhere, or it was closed."""


class SystemTwoError(JevmemError):
    """A call to the System-Two model (answers, approved summaries) failed.

    ``attempts`` is how many requests were sent, retries included; ``status``
    the last HTTP status when there was one. A failed call changed no memory.
    """

    def __init__(
        self,
        message: str,
        *,
        attempts: int = 0,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.status = status
        self.retry_after_s = retry_after_s


class SystemTwoConnectionError(SystemTwoError, ConnectionError):
    """The endpoint could not be reached, or closed the connection before a
    whole response arrived, on every attempt."""


class SystemTwoTimeoutError(SystemTwoError, TimeoutError):
    """An attempt took longer than the per-call timeout, on every attempt."""


class SystemTwoHTTPError(SystemTwoError):
    """The endpoint answered with an error status: a 4xx at once (never
    retried: the request itself is wrong), a 429 or 5xx once the retries
    were spent or the server asked to wait longer than the client will."""


class SystemTwoResponseError(SystemTwoError):
    """The endpoint answered 2xx with a body that is not a chat completion
    (not JSON, no choices, no message text)."""


class MissingDependencyError(JevmemError, ImportError):
    """A feature needs an optional extra that is not installed; the message
    names the extra (``pip install 'jevmem[grpc]'``)."""
