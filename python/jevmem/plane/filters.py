"""Scopes and metadata filters as the core takes them."""

from __future__ import annotations

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
        if isinstance(x, (bool, int, float)):
            return x
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
                out[k] = {
                    op: [unix(x) for x in x_list]
                    if op in ("$in", "$nin") and isinstance(x_list, (list, tuple))
                    else x_list
                    if op == "$exists"
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
