"""The ``jevmem`` command line: ingest observations, search a memory, run the demo.

jevmem ingest notes.jsonl --memory agent.jvm     # JSONL or a LoCoMo file; again: only new lines
jevmem ingest u1.jsonl --scope user=u1           # every line without its own "scope" in u1's
jevmem search "when did Maya start cello?" --memory agent.jvm --trace
jevmem search "cello?" --scope user=u1           # u1's observations only
jevmem answer "when did Maya start cello?" --memory agent.jvm   # JEVMEM_S2_MODEL, ...
jevmem serve-controller --port 50061             # host a System-One controller over gRPC
jevmem serve --memory agent=agent.jvm            # host named memories over gRPC
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from jevmem.embed import Embedder, embedder_from_spec
from jevmem.errors import InvalidConfigError, JevmemError
from jevmem.memory import Memory

__all__ = ["main"]

DEFAULT_MEMORY = Path("jevmem.jvm")


def _embedder(name: str) -> Embedder:
    try:
        return embedder_from_spec(name)
    except InvalidConfigError as exc:
        raise SystemExit(str(exc)) from None


def _is_directory_memory(memory: Path) -> bool:
    """A directory (existing, or a new path without the .jvm suffix) is a
    durable memory with a write-ahead log; a .jvm file is an export."""
    return memory.is_dir() or (not memory.exists() and memory.suffix != ".jvm")


class _SharedEmbedders:
    """One embedder per name, made on first use and shared from then on."""

    def __init__(self) -> None:
        self._made: dict[str, Embedder] = {}
        self._lock = threading.Lock()

    def get(self, name: str) -> Embedder:
        with self._lock:
            e = self._made.get(name)
            if e is None:
                e = self._made[name] = _embedder(name)
            return e


def _open(
    memory: Path,
    embedder: str | None,
    shared: _SharedEmbedders | None = None,
    durability: str = "sync",
) -> Memory:
    make = _embedder if shared is None else shared.get
    chosen = make(embedder) if embedder else None
    if _is_directory_memory(memory):
        return Memory.open(memory, chosen, durability=durability)
    if memory.exists():
        return Memory.load(memory, chosen)  # without --embedder: the one the file names
    return Memory(chosen if chosen is not None else make("default"))


def _save(m: Memory, memory: Path) -> None:
    """Make the memory's state last: a checkpoint for a directory, an
    atomic one-file export otherwise."""
    if m.durable:
        m.checkpoint()
    else:
        m.save(memory)


def _observations(path: Path) -> Iterator[dict[str, Any]]:
    """JSONL observations, or every turn of a LoCoMo-format file."""
    text = path.read_text()
    stripped = text.lstrip()
    if stripped.startswith("["):
        data = json.loads(text)
        for sample in data:
            conv = sample.get("conversation", {})
            sid = str(sample.get("sample_id", ""))
            n = 1
            while f"session_{n}" in conv:
                when = conv.get(f"session_{n}_date_time")
                for i, turn in enumerate(conv[f"session_{n}"]):
                    body = str(turn["text"])
                    if turn.get("blip_caption"):
                        body += f" [image: {turn['blip_caption']}]"
                    yield {
                        "text": body,
                        "speaker": turn.get("speaker"),
                        "timestamp": when,
                        "offset_s": i,
                        "provenance": {
                            "dia_id": str(turn.get("dia_id", "")),
                            "session": str(n),
                            "sample_id": sid,
                        },
                    }
                n += 1
        return
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise SystemExit(f"{path}:{lineno}: not JSON: {exc}") from None
        if isinstance(obj, str):
            obj = {"text": obj}
        if not isinstance(obj, dict) or "text" not in obj:
            raise SystemExit(f'{path}:{lineno}: expected an object with a "text" field')
        yield obj


def _line_keys(obs: list[dict[str, Any]]) -> list[str]:
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
    for o in obs:
        if o.get("key") is not None:
            keys.append(str(o["key"]))
            continue
        body = json.dumps(o, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
        digest = hashlib.sha256(body.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        n = seen[digest] = seen.get(digest, -1) + 1
        keys.append(f"ingest:{digest}:{n}")
    return keys


def _scope_flags(pairs: Sequence[str] | None) -> dict[str, str] | None:
    """``--scope user=u1 --scope session=s3`` as a scope dict."""
    if not pairs:
        return None
    out: dict[str, str] = {}
    for p in pairs:
        k, sep, v = p.partition("=")
        if not sep:
            raise SystemExit(f"--scope expects KEY=VALUE, got {p!r}")
        out[k] = v
    return out


def _progress(done: int, total: int, t0: float) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    rate = done / max(time.perf_counter() - t0, 1e-9)
    sys.stderr.write(
        f"\r  [{'#' * filled}{' ' * (width - filled)}] {done}/{total}  {rate:,.0f} obs/s"
    )
    sys.stderr.flush()


def cmd_ingest(args: argparse.Namespace) -> int:
    from jevmem.temporal import to_timestamp

    obs = list(_observations(Path(args.file)))
    keys = _line_keys(obs)
    default_scope = _scope_flags(args.scope)
    m = _open(args.memory, args.embedder)
    before = len(m)
    t0 = time.perf_counter()
    for lo in range(0, len(obs), args.batch):
        chunk = obs[lo : lo + args.batch]
        stamps = []
        for o in chunk:
            ts = o.get("timestamp")
            stamps.append(None if ts is None else to_timestamp(ts) + int(o.get("offset_s", 0)))
        m.add_batch(
            [str(o["text"]) for o in chunk],
            timestamps=stamps,
            speakers=[o.get("speaker") for o in chunk],
            provenances=[
                {str(k): str(v) for k, v in (o.get("provenance") or {}).items()} for o in chunk
            ],
            entities=[o.get("entities") for o in chunk],
            scopes=[o.get("scope", default_scope) for o in chunk],
            metadatas=[o.get("metadata") for o in chunk],
            keys=keys[lo : lo + args.batch],
        )
        _progress(min(lo + args.batch, len(obs)), len(obs), t0)
    sys.stderr.write("\n")
    _save(m, args.memory)
    m.close()
    s = m.stats()
    edges = sum(v for k, v in s.items() if k.startswith("edges_"))
    added = len(m) - before
    print(
        f"ingested {len(obs)} observations ({added} new, {len(obs) - added} already held) in "
        f"{time.perf_counter() - t0:.1f}s: memory {args.memory} "
        f"now holds {s['nodes']} nodes and {edges} edges ({s['controller_calls_write']} controller calls)"
    )
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    if not args.memory.exists():
        raise SystemExit(f"no memory at {args.memory}; run `jevmem ingest` first")
    m = _open(args.memory, args.embedder)
    r = m.search(args.query, args.k, now=args.now, scope=_scope_flags(args.scope))
    for rank, e in enumerate(r.evidence, 1):
        when = (
            "" if e.timestamp is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(e.timestamp))
        )
        how = "anchor" if e.via is None else f"{e.via.view} edge from {e.via.from_node}"
        who = e.provenance.get("speaker", "")
        print(f"{rank:2d}. [{e.score:.3f}] {when} {who + ': ' if who else ''}{e.text}")
        print(f"      id {e.id} via {how}; provenance {e.provenance}")
        if e.passage != (0, len(e.text)):
            print(f"      best passage: characters {e.passage[0]}-{e.passage[1]} of {len(e.text)}")
        for ref in e.time_refs:
            print(f"      time: {ref['text']!r} -> {ref['resolved']} ({ref['precision']})")
    suff = "n/a" if r.sufficiency is None else f"{r.sufficiency:.2f}"
    print(
        f"sufficiency {suff} ({'sufficient' if r.sufficient else 'not sufficient'}), stop: {r.trace.get('stop_reason')}"
    )
    if args.trace:
        print(json.dumps(r.trace, indent=2, default=str))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="jevmem", description="A memory engine for LLM agents.")
    sub = ap.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--memory",
        type=Path,
        default=DEFAULT_MEMORY,
        help="a directory (durable: every write in a write-ahead log) or a .jvm file "
        "(loaded and saved whole); default ./jevmem.jvm",
    )
    common.add_argument("--embedder", default=None, help="default, hash[-DIM] or onnx[:MODEL]")
    p = sub.add_parser(
        "ingest", parents=[common], help="add observations from JSONL or a LoCoMo file"
    )
    p.add_argument("file")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument(
        "--scope",
        action="append",
        metavar="KEY=VALUE",
        help='scope of every observation without its own "scope" (repeatable)',
    )
    p.set_defaults(func=cmd_ingest)
    p = sub.add_parser("search", parents=[common], help="retrieve evidence for a query")
    p.add_argument("query")
    p.add_argument("-k", type=int, default=10)
    p.add_argument("--now", default=None, help="query time (ISO 8601), for recency")
    p.add_argument(
        "--scope", action="append", metavar="KEY=VALUE", help="search only this scope (repeatable)"
    )
    p.add_argument(
        "--trace", action="store_true", help="print routing, budgets, rounds and the stop reason"
    )
    p.set_defaults(func=cmd_search)
    from jevmem.answer_cli import add_answer_command  # answer (System Two)

    add_answer_command(sub, common)
    p = sub.add_parser("demo", help="build a small memory and query it")
    p.set_defaults(func=lambda _: _demo())
    from jevmem.remote.cli import add_commands  # serve, serve-controller (the grpc extra)

    add_commands(sub)
    args = ap.parse_args(argv)
    try:
        return int(args.func(args))
    except JevmemError as exc:
        print(f"jevmem: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2


def _demo() -> int:
    from jevmem.__main__ import demo

    demo()
    return 0
