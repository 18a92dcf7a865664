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
    "TraversalStateError",
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


class MissingDependencyError(JevmemError, ImportError):
    """A feature needs an optional extra that is not installed; the message
    names the extra (``pip install 'jevmem[grpc]'``)."""
