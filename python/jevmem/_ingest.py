"""Reading and checking the files ``jevmem ingest`` takes, before anything is written.

Three layouts, told apart by content:

* **JSONL observations**: one JSON object per line with ``"text"`` and
  optionally ``"timestamp"``, ``"speaker"``, ``"provenance"``, ``"entities"``,
  ``"scope"``, ``"metadata"``, ``"key"``, ``"offset_s"``; a bare JSON string
  is a text alone.
* **Chat JSONL**, as OpenAI chat messages: ``{"role": ..., "content": ...}``
  per line (the speaker is ``"name"`` when given, else the role; content a
  string or a list of ``{"type": "text", "text": ...}`` parts), or a line
  ``{"messages": [...]}`` holding a whole conversation. A message with no
  text (a tool call alone) is skipped and counted.
* **LoCoMo**: a JSON array of samples, every session turn one observation.

Every row is checked in full (the memory's own rules, `jevmem._validate` and
the store's scope/metadata/key check) before the first write, and a bad row
is named by its file line: one bad row anywhere writes nothing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jevmem import _validate
from jevmem.errors import InvalidInputError, JevmemError

__all__ = ["FORMAT_HELP", "IngestFile", "Row", "read_rows"]

#: The formats, as ``jevmem ingest --help`` prints them.
FORMAT_HELP = """\
file formats (told apart by content):
  JSONL, one observation per line:
    {"text": "I moved our ETL to Dagster", "timestamp": "2026-03-02T09:00:00Z",
     "speaker": "Maya", "provenance": {"source": "slack"}, "entities": ["Dagster"],
     "scope": {"user": "u1"}, "metadata": {"topic": "data"}, "key": "msg-1"}
    only "text" is required; "timestamp" is Unix seconds or a date (ISO 8601,
    "1:56 pm on 8 May, 2023"...); a line holding a bare JSON string is a text.
  chat JSONL, as OpenAI messages: {"role": "user", "content": "..."} per line
    (speaker: "name" if given, else the role), or {"messages": [...]} per line;
    messages without text (tool calls alone) are skipped.
  LoCoMo: a JSON array of samples; every session turn is one observation.

all or nothing: every row is checked before the first write, and a bad row
(named by file line and field) writes nothing. Rows are keyed by content, so
running the same command again, e.g. after an interruption, adds only the
rows the memory does not hold yet.
"""


@dataclass
class Row:
    """One observation to write, its fields checked."""

    where: str
    obj: dict[str, Any]
    text: str = ""
    timestamp: int | None = None
    speaker: str | None = None
    provenance: dict[str, str] = field(default_factory=dict)
    entities: list[str] | None = None
    scope: dict[str, str] | None = None
    metadata: dict[str, Any] | None = None
    key: str = ""


@dataclass
class IngestFile:
    """A file's rows, checked, and how many chat messages had no text."""

    rows: list[Row]
    skipped: int = 0


def _bad(where: str, message: str) -> InvalidInputError:
    return InvalidInputError(f"{where}: {message}")


def _chat_text(content: Any, where: str) -> str | None:
    """An OpenAI message's text: a string, or its text parts joined."""
    if content is None:
        return None
    if isinstance(content, str):
        return content if content.strip() else None
    if isinstance(content, list):
        parts = []
        for i, part in enumerate(content):
            if isinstance(part, str):
                parts.append(part)
            elif not isinstance(part, Mapping):
                raise _bad(
                    where, f"content[{i}] must be a str or a part object, got {type(part).__name__}"
                )
            elif part.get("type") == "text":
                if "text" not in part:
                    raise _bad(where, f'content[{i}] is a text part without "text"')
                body = part["text"]
                if not isinstance(body, str):  # as a plain line's "text": never str(None)
                    raise _bad(where, f"content[{i}].text must be a str, got {type(body).__name__}")
                parts.append(body)
        joined = "\n".join(p for p in parts if p.strip())
        return joined or None
    raise _bad(
        where, f'"content" must be a string or a list of parts, got {type(content).__name__}'
    )


def _from_chat(message: Mapping[str, Any], where: str) -> dict[str, Any] | None:
    """A chat message as an observation object; None when it has no text."""
    body = _chat_text(message.get("content"), where)
    if body is None:
        return None
    obj = {k: v for k, v in message.items() if k not in ("role", "content", "name")}
    obj["text"] = body
    speaker = message.get("name") or message.get("role")
    if speaker is not None:
        obj["speaker"] = speaker
    return obj


def _lines(text: str) -> Iterator[tuple[int, str]]:
    """The lines of a JSONL file, numbered from 1: split at "\n" only (a
    "\r" before it dropped). Not `str.splitlines`, which also splits at
    U+2028, U+2029, U+0085 and other characters a JSON string may hold raw."""
    for lineno, line in enumerate(text.split("\n"), 1):
        yield lineno, line.removesuffix("\r")


def _parse(text: str, where: str, *, whole_file: bool = False) -> Any:
    """``json.loads``, every way it fails as one error naming where (a
    whole file's syntax error also names its line)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        at = f"{where}:{exc.lineno}" if whole_file else where
        raise _bad(at, f"not JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise _bad(where, "not JSON this program reads (nested too deep)") from None
    except ValueError as exc:  # a number past Python's int digit limit, say
        raise _bad(where, f"not JSON this program reads ({exc})") from None


def _jsonl(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any] | None]]:
    for lineno, line in _lines(text):
        if not line.strip():
            continue
        where = f"{path}:{lineno}"
        obj = _parse(line, where)
        if isinstance(obj, str):
            obj = {"text": obj}
        if not isinstance(obj, dict):
            raise _bad(where, f"expected a JSON object or string, got {type(obj).__name__}")
        if "text" in obj:
            yield where, obj
        elif "messages" in obj:
            messages = obj["messages"]
            if not isinstance(messages, list):
                raise _bad(where, '"messages" must be a list of chat messages')
            for j, message in enumerate(messages):
                if not isinstance(message, dict):
                    raise _bad(f"{where}: messages[{j}]", "a chat message must be an object")
                yield f"{where}: messages[{j}]", _from_chat(message, f"{where}: messages[{j}]")
        elif "role" in obj and "content" in obj:
            yield where, _from_chat(obj, where)
        else:
            raise _bad(
                where,
                'expected an object with "text", a chat message ("role" and "content") '
                'or "messages"',
            )


def _locomo(path: Path, text: str) -> Iterator[tuple[str, dict[str, Any] | None]]:
    data = _parse(text, str(path), whole_file=True)
    if not isinstance(data, list):
        raise _bad(str(path), "a LoCoMo file is a JSON array of samples")
    for s, sample in enumerate(data):
        if not isinstance(sample, dict):
            raise _bad(f"{path}: sample {s}", "a sample must be an object")
        conv = sample.get("conversation", {})
        sid = str(sample.get("sample_id", ""))
        if not isinstance(conv, dict):
            raise _bad(f"{path}: sample {sid or s}", '"conversation" must be an object')
        n = 1
        while f"session_{n}" in conv:
            when = conv.get(f"session_{n}_date_time")
            turns = conv[f"session_{n}"]
            if not isinstance(turns, list):
                raise _bad(f"{path}: sample {sid or s} session {n}", "a session is a list of turns")
            for i, turn in enumerate(turns):
                where = f"{path}: sample {sid or s} session {n} turn {i}"
                if not isinstance(turn, dict) or "text" not in turn:
                    raise _bad(where, 'a turn must be an object with "text"')
                body = turn["text"]  # not a str: refused by `_check`, as on a JSONL line
                caption = turn.get("blip_caption")
                if caption is not None and not isinstance(caption, str):
                    raise _bad(where, f"blip_caption must be a str, got {type(caption).__name__}")
                if caption and isinstance(body, str):
                    body += f" [image: {caption}]"
                yield (
                    where,
                    {
                        "text": body,
                        "speaker": turn.get("speaker"),
                        "timestamp": when,
                        "offset_s": i,
                        "provenance": {
                            "dia_id": str(turn.get("dia_id", "")),
                            "session": str(n),
                            "sample_id": sid,
                        },
                    },
                )
            n += 1


def _line_keys(objs: Sequence[dict[str, Any]]) -> list[str]:
    """An idempotency key per observation: its explicit ``"key"``, else a
    hash of the observation itself (canonical JSON of everything the line
    says) and how many identical ones came before it in the file.

    Content rather than path and line number: re-ingesting the same file, a
    copy of it, a renamed one or one with lines added anywhere adds only
    what is new, and a line said twice is still stored twice (the second
    copy has occurrence 1). What it cannot tell apart is a line edited in
    place: that is a new observation (the old one stays until forgotten)."""
    seen: dict[str, int] = {}
    keys = []
    for o in objs:
        if o.get("key") is not None:
            keys.append(str(o["key"]))
            continue
        body = json.dumps(o, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        digest = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        n = seen[digest] = seen.get(digest, -1) + 1
        keys.append(f"ingest:{digest}:{n}")
    return keys


def _check(row: Row, default_scope: dict[str, str] | None, max_text_bytes: int) -> None:
    o, where = row.obj, row.where
    try:
        row.text = _validate.text(o["text"], "text", max_text_bytes)
        offset = o.get("offset_s", 0)
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise InvalidInputError(f"offset_s must be an integer, got {offset!r:.40}")
        ts = _validate.timestamp(o.get("timestamp"), "timestamp")
        row.timestamp = None if ts is None else _validate.timestamp(ts + offset, "timestamp")
        spk = o.get("speaker")
        row.speaker = (
            None
            if spk is None
            else _validate.text(spk, "speaker", _validate.MAX_FIELD_BYTES, allow_empty=True)
        )
        row.provenance = _validate.provenance_arg(o.get("provenance"), "provenance") or {}
        row.entities = _validate.entities_arg(o.get("entities"), "entities")
        scope = o.get("scope", default_scope)
        metadata = o.get("metadata")
        if scope is not None and not isinstance(scope, dict):
            raise InvalidInputError(
                f"scope must be an object of strings, got {type(scope).__name__}"
            )
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidInputError(f"metadata must be an object, got {type(metadata).__name__}")
        row.scope, row.metadata = scope, metadata
    except JevmemError as exc:
        raise _bad(where, str(exc)) from None


def read_rows(
    path: Path,
    *,
    default_scope: dict[str, str] | None,
    max_text_bytes: int,
    check_attributes: Any,
) -> IngestFile:
    """Every observation of ``path``, checked; raises `InvalidInputError`
    naming the file line (or LoCoMo turn) and field of the first bad row.

    ``check_attributes`` is the target store's ``check_attributes`` (scope,
    metadata and key rules live in the core)."""
    try:
        # bytes decoded, not read_text: no newline translation ("\r" stays for `_lines`)
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    source = _locomo if text.lstrip().startswith("[") else _jsonl
    rows: list[Row] = []
    skipped = 0
    for where, obj in source(path, text):
        if obj is None:
            skipped += 1
            continue
        row = Row(where, obj)
        _check(row, default_scope, max_text_bytes)
        rows.append(row)
    for row, key in zip(rows, _line_keys([r.obj for r in rows]), strict=True):
        row.key = key
        try:
            check_attributes(1, scopes=[row.scope], metadatas=[row.metadata], keys=[key])
        except JevmemError as exc:
            raise _bad(row.where, str(exc)) from None
    return IngestFile(rows, skipped)
