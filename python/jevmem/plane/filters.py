"""Scopes and metadata filters as the core takes them."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from jevmem.errors import InvalidInputError
from jevmem.temporal import to_timestamp


def filter_times(f: Any, depth: int = 0) -> dict[str, Any]:
    """A filter dict with every ``$timestamp`` value as unix seconds (a
    datetime, a date or an ISO string is converted as `add` converts
    timestamps); everything else is left for the core to check."""
    if depth > 64:
        raise InvalidInputError("filter nests too deep")
    if not isinstance(f, Mapping):
        raise InvalidInputError(f"filter must be a dict, got {type(f).__name__}")

    def unix(x: Any) -> Any:
        if isinstance(x, float) and math.isfinite(x):
            # floored as `add` stores it: a float names the second it falls in
            return math.floor(x)
        if isinstance(x, (bool, int, float)):
            return x  # the core refuses a bool (no time) or a non-finite float
        try:
            return to_timestamp(x)
        except (TypeError, ValueError, OverflowError) as exc:
            raise InvalidInputError(f"filter: bad $timestamp value {x!r}: {exc}") from None

    out: dict[str, Any] = {}
    for k, v in f.items():
        if k in ("$and", "$or") and isinstance(v, (list, tuple)):
            out[k] = [filter_times(x, depth + 1) for x in v]
        elif k == "$not":
            out[k] = filter_times(v, depth + 1)
        elif k == "$timestamp":
            if isinstance(v, Mapping):
                # ($exists and a list operator's non-list stay as given: the
                # core's error names them)
                out[k] = {
                    op: [unix(x) for x in x_list]
                    if op in ("$in", "$nin") and isinstance(x_list, (list, tuple))
                    else x_list
                    if op in ("$exists", "$in", "$nin")
                    else unix(x_list)
                    for op, x_list in v.items()
                }
            else:
                out[k] = unix(v)
        else:
            out[k] = dict(v) if isinstance(v, Mapping) else v
    return out


def scope_and_filter(
    scope: Mapping[str, str] | None, filter: Mapping[str, Any] | None
) -> tuple[dict[str, str] | None, dict[str, Any] | None]:
    """Scope and filter as the core takes them (plain dicts, times as unix seconds)."""
    if scope is not None and not isinstance(scope, Mapping):
        raise InvalidInputError(f"scope must be a dict of str to str, got {type(scope).__name__}")
    return (
        None if scope is None else dict(scope),
        None if filter is None else filter_times(filter),
    )


def holds_no_condition(f: Any) -> bool:
    """Whether a filter matches every observation by its form alone: ``{}``,
    an empty exclusion (``{"tag": {"$nin": []}}``), or one that only
    combines such (``{"$and": []}``, ``{"$not": {"$or": []}}``). A malformed
    filter is not: the core refuses it."""
    return _constant(f, 0) is True


def _constant(f: Any, depth: int) -> bool | None:
    """True when a filter matches everything by its form, False when it
    matches nothing (``{"$or": []}``), None when that depends on the nodes."""
    if depth > 64 or not isinstance(f, Mapping):
        return None  # too deep or malformed: `filter_times` or the core says so
    parts: list[bool | None] = []
    for k, v in f.items():
        if k in ("$and", "$or") and isinstance(v, (list, tuple)):
            got = [_constant(x, depth + 1) for x in v]
            parts.append(_all(got) if k == "$and" else _any(got))
        elif k == "$not":
            inner = _constant(v, depth + 1)
            parts.append(None if inner is None else not inner)
        elif isinstance(v, Mapping) and v:
            # a field's operators: an empty exclusion list (`{"$nin": []}`,
            # an "all but these" whose list came out empty) holds for every
            # node, an empty `$in` for none; any other depends on the nodes
            parts.append(_all([_empty_list_op(op, x) for op, x in v.items()]))
        else:
            parts.append(None)  # a condition on a field
    return _all(parts)


def _empty_list_op(op: str, value: Any) -> bool | None:
    if isinstance(value, (list, tuple)) and not value and op in ("$in", "$nin"):
        return op == "$nin"
    return None


def _all(parts: list[bool | None]) -> bool | None:
    if False in parts:
        return False
    return True if all(p is True for p in parts) else None


def _any(parts: list[bool | None]) -> bool | None:
    if True in parts:
        return True
    return False if all(p is False for p in parts) else None
