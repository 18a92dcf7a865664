"""Argument checks for the public write and read calls, run before any work.

Each check raises a jevmem error naming the field and the limit: a wrong
type is :class:`~jevmem.errors.InvalidTypeError` (a ``TypeError`` too), a
wrong value :class:`~jevmem.errors.InvalidInputError` (a ``ValueError``).
Nothing here touches a memory, so a refused call leaves it unchanged. Every
check is linear in its argument's size.

Accepted ranges:

- texts, speakers, provenance keys and values, entities and queries are
  ``str`` with no NUL character and no lone surrogate (they must encode as
  UTF-8); texts and queries are non-empty and at most the memory's
  ``max_text_bytes`` UTF-8 bytes, the other fields at most
  :data:`MAX_FIELD_BYTES`;
- timestamps (and ``now``) lie in :data:`MIN_TIMESTAMP` ..
  :data:`MAX_TIMESTAMP`, years 3 to 9997 UTC: time grounding resolves
  references up to a year or so around an observation, and the calendar
  ends at years 1 and 9999;
- ``k`` is an ``int`` (not a bool) in 1 .. :data:`MAX_K`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem.errors import InvalidInputError, InvalidTypeError
from jevmem.temporal import to_timestamp

__all__ = [
    "MAX_FIELD_BYTES",
    "MAX_K",
    "MAX_TIMESTAMP",
    "MIN_TIMESTAMP",
]

#: 0003-01-01T00:00:00Z and 9997-12-31T23:59:59Z in Unix seconds.
MIN_TIMESTAMP = -62_072_524_800
MAX_TIMESTAMP = 253_339_228_799
#: A speaker, a provenance key or value, or an entity: at most this many UTF-8 bytes.
MAX_FIELD_BYTES = 64 * 1024
#: Provenance entries and caller-given entities per observation.
MAX_FIELD_COUNT = 4096
#: The most results one search may ask for.
MAX_K = 10_000

_STRINGS = (str, bytes, bytearray, memoryview)


def sequence(value: Any, field: str) -> Sequence[Any]:
    """A list-like argument; a string (a sequence of letters) is refused."""
    if isinstance(value, _STRINGS) or not isinstance(value, Sequence):
        raise InvalidTypeError(
            f"{field} must be a list or tuple, got {type(value).__name__}"
            + (" (wrap a single string in a list)" if isinstance(value, str) else "")
        )
    return value


def _plain(value: Any, limit: int, allow_empty: bool = False) -> bool:
    """Whether ``value`` passes `text` for sure, read cheaply: an ASCII str
    (as many bytes as characters) within the limit, without NUL, non-blank
    unless ``allow_empty``. False means only that `text` must look."""
    return (
        type(value) is str
        and len(value) <= limit
        and value.isascii()
        and "\0" not in value
        and (allow_empty or not (value == "" or value.isspace()))
    )


def text(value: Any, field: str, limit: int, *, allow_empty: bool = False) -> str:
    """A string that encodes as UTF-8, has no NUL and is at most ``limit`` bytes."""
    if not isinstance(value, str):
        raise InvalidTypeError(f"{field} must be a str, got {type(value).__name__}")
    # each character is at least one byte: a text this long is refused unread
    if len(value) > limit:
        raise InvalidInputError(f"{field} is over the limit of {limit} UTF-8 bytes")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidInputError(
            f"{field} contains a lone surrogate at index {exc.start}: not valid Unicode text"
        ) from None
    if size > limit:
        raise InvalidInputError(f"{field} is {size} UTF-8 bytes, over the limit of {limit}")
    if "\0" in value:
        raise InvalidInputError(f"{field} contains a NUL character")
    if not allow_empty and not value.strip():
        raise InvalidInputError(f"{field} must be non-empty (not just whitespace)")
    return value


def timestamp(value: Any, field: str) -> int | None:
    """``None`` or Unix seconds in [MIN_TIMESTAMP, MAX_TIMESTAMP]."""
    if value is None:
        return None
    try:
        ts = to_timestamp(value)
    except InvalidInputError:
        raise
    except TypeError as exc:
        raise InvalidTypeError(f"{field}: {exc}") from None
    except (ValueError, OverflowError) as exc:
        raise InvalidInputError(f"{field}: bad timestamp {value!r:.80}: {exc}") from None
    if not MIN_TIMESTAMP <= ts <= MAX_TIMESTAMP:
        raise InvalidInputError(
            f"{field} is {ts}, outside the accepted range {MIN_TIMESTAMP} .. {MAX_TIMESTAMP} "
            "(years 3 to 9997 UTC)"
        )
    return ts


def _column(values: Any, field: str, n: int) -> list[Any]:
    if values is None:
        return [None] * n
    got = sequence(values, field)
    if len(got) != n:
        raise InvalidInputError(f"{field} has {len(got)} entries for {n} texts")
    return list(got)


def attribute_columns(
    scopes: Any, metadatas: Any, keys: Any, n: int
) -> tuple[list[Any], list[Any], list[Any]]:
    """The ``scopes``, ``metadatas`` and ``keys`` columns of ``add_batch``,
    each ``None`` or a list or tuple of ``n`` entries, as the text column must
    be (a set would pair keys with texts in hash order; an iterator would be
    spent). The core checks the entries."""
    return (
        _column(scopes, "scopes", n),
        _column(metadatas, "metadatas", n),
        _column(keys, "keys", n),
    )


def provenance_arg(value: Any, field: str) -> dict[str, str] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidTypeError(
            f"{field} must be a mapping of str to str, got {type(value).__name__}"
        )
    if len(value) > MAX_FIELD_COUNT:
        raise InvalidInputError(f"{field} has {len(value)} entries, the limit is {MAX_FIELD_COUNT}")
    out: dict[str, str] = {}
    for key, v in value.items():
        if _plain(key, MAX_FIELD_BYTES) and _plain(v, MAX_FIELD_BYTES, allow_empty=True):
            out[key] = v
            continue
        text(key, f"{field} key", MAX_FIELD_BYTES)
        if isinstance(v, bool) or not isinstance(v, str | int | float):
            raise InvalidTypeError(
                f"{field}[{key!r:.40}] must be a str (or a number), got {type(v).__name__}"
            )
        if isinstance(v, float) and not math.isfinite(v):
            raise InvalidInputError(f"{field}[{key!r:.40}] must be finite, got {v!r}")
        try:
            as_text = str(v)
        except ValueError:  # an int past Python's int-to-str digit limit
            raise InvalidInputError(
                f"{field}[{key!r:.40}] is an int too long to write out as text"
            ) from None
        out[key] = text(as_text, f"{field}[{key!r:.40}]", MAX_FIELD_BYTES, allow_empty=True)
    return out


def entities_arg(value: Any, field: str) -> list[str] | None:
    if value is None:
        return None
    got = sequence(value, field)
    if len(got) > MAX_FIELD_COUNT:
        raise InvalidInputError(f"{field} has {len(got)} entries, the limit is {MAX_FIELD_COUNT}")
    return [text(e, f"{field}[{j}]", MAX_FIELD_BYTES) for j, e in enumerate(got)]


def embeddings(value: Any, field: str, shape: tuple[int, ...]) -> npt.NDArray[np.float32]:
    """A finite float32 array of exactly ``shape``."""
    if isinstance(value, _STRINGS) or isinstance(value, Mapping):
        raise InvalidTypeError(f"{field} must be an array of numbers, got {type(value).__name__}")
    try:
        with np.errstate(over="ignore", invalid="ignore"):
            arr = np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError, OverflowError) as exc:
        raise InvalidTypeError(f"{field} must be an array of numbers: {exc}") from None
    if arr.shape != shape:
        raise InvalidInputError(f"{field} must have shape {shape}, got {arr.shape}")
    if not np.isfinite(arr).all():
        raise InvalidInputError(f"{field} must be finite (NaN, inf or beyond float32 found)")
    return arr


def add_batch_args(
    texts: Any,
    timestamps: Any,
    speakers: Any,
    provenances: Any,
    entities: Any,
    vectors: Any,
    *,
    dim: int,
    max_text_bytes: int,
) -> tuple[
    list[str],
    list[int | None],
    list[str | None],
    list[dict[str, str] | None],
    list[list[str] | None],
    npt.NDArray[np.float32] | None,
]:
    """Every argument of ``Memory.add_batch``, checked and normalised."""
    got = sequence(texts, "texts")
    n = len(got)
    # sizes first: an oversized text is refused before anything reads it
    out_texts = [
        t if _plain(t, max_text_bytes) else text(t, f"observation {i}: text", max_text_bytes)
        for i, t in enumerate(got)
    ]
    ts = [
        timestamp(t, f"observation {i}: timestamp")
        for i, t in enumerate(_column(timestamps, "timestamps", n))
    ]
    spk: list[str | None] = [
        None
        if s is None
        else text(s, f"observation {i}: speaker", MAX_FIELD_BYTES, allow_empty=True)
        for i, s in enumerate(_column(speakers, "speakers", n))
    ]
    prov = [
        provenance_arg(p, f"observation {i}: provenance")
        for i, p in enumerate(_column(provenances, "provenances", n))
    ]
    ents = [
        entities_arg(e, f"observation {i}: entities")
        for i, e in enumerate(_column(entities, "entities", n))
    ]
    vecs = None if vectors is None else embeddings(vectors, "embeddings", (n, dim))
    return out_texts, ts, spk, prov, ents, vecs


def k_arg(value: Any, field: str = "k") -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InvalidTypeError(f"{field} must be an int, got {type(value).__name__}")
    k = int(value)
    if not 1 <= k <= MAX_K:
        raise InvalidInputError(f"{field} must be in 1 .. {MAX_K}, got {k}")
    return k


def search_args(
    queries: Any, k: Any, now: Any, *, max_text_bytes: int
) -> tuple[list[str], int, int | None]:
    """``queries``, ``k`` and ``now`` of ``Memory.search_batch``, checked."""
    got = sequence(queries, "queries")
    out = [text(q, f"queries[{i}]", max_text_bytes) for i, q in enumerate(got)]
    return out, k_arg(k), timestamp(now, "now")
