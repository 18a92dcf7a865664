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
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from jevmem._cli_support import (
    DEFAULT_MEMORY,
    is_memory,
    open_memory,
    save_memory,
    scope_flags,
    terminal_safe,
)
from jevmem.errors import JevmemError

__all__ = ["main"]


def _progress(done: int, total: int, t0: float) -> None:
    width = 30
    filled = int(width * done / max(total, 1))
    rate = done / max(time.perf_counter() - t0, 1e-9)
    sys.stderr.write(
        f"\r  [{'#' * filled}{' ' * (width - filled)}] {done}/{total}  {rate:,.0f} obs/s"
    )
    sys.stderr.flush()


def cmd_ingest(args: argparse.Namespace) -> int:
    from jevmem._ingest import read_rows

    # "-" and pipes ("<(...)", /dev/stdin) read as files do
    path = Path("/dev/stdin") if args.file == "-" else Path(args.file)
    # before opening the memory (loading an embedder takes seconds)
    if path.is_dir():
        raise IsADirectoryError(21, "is a directory, not a file of observations", str(path))
    if not path.exists():
        raise FileNotFoundError(2, "no such file", str(path))
    if args.batch < 1:
        raise SystemExit(f"--batch must be at least 1, got {args.batch}")
    created = not os.path.lexists(args.memory)
    m = open_memory(args.memory, args.embedder)
    try:
        # every row is checked before the first write: a bad one writes nothing
        got = read_rows(
            path,
            default_scope=scope_flags(args.scope),
            max_text_bytes=m.store.max_text_bytes,
            check_attributes=m.store.check_attributes,
        )
    except BaseException:
        m.close()
        if created and args.memory.is_dir():
            # a durable memory this run made (and wrote nothing to) goes
            # again: the path is as it was
            shutil.rmtree(args.memory)
        raise
    rows = got.rows
    before = len(m)
    t0 = time.perf_counter()
    written = 0
    try:
        for lo in range(0, len(rows), args.batch):
            chunk = rows[lo : lo + args.batch]
            m.add_batch(
                [r.text for r in chunk],
                timestamps=[r.timestamp for r in chunk],
                speakers=[r.speaker for r in chunk],
                provenances=[r.provenance for r in chunk],
                entities=[r.entities for r in chunk],
                scopes=[r.scope for r in chunk],
                metadatas=[r.metadata for r in chunk],
                keys=[r.key for r in chunk],
            )
            written += len(chunk)
            _progress(written, len(rows), t0)
    except JevmemError as exc:
        # rows were checked, so this is the memory failing (a full disk...)
        kept = (
            f"the {written} rows before it are in the memory; running the same command "
            "again adds only the rest"
            if m.durable
            else "nothing was saved"
        )
        raise type(exc)(f"writing {rows[written].where} failed: {exc}; {kept}") from None
    finally:
        sys.stderr.write("\n")
    save_memory(m, args.memory)
    m.close()
    s = m.stats()
    edges = sum(v for k, v in s.items() if k.startswith("edges_"))
    added = len(m) - before
    skipped = f", {got.skipped} chat messages without text skipped" if got.skipped else ""
    print(
        f"ingested {len(rows)} observations ({added} new, {len(rows) - added} already held"
        f"{skipped}) in {time.perf_counter() - t0:.1f}s: memory {args.memory} "
        f"now holds {s['nodes']} nodes and {edges} edges ({s['controller_calls_write']} controller calls)"
    )
    return 0


def cmd_search(args: argparse.Namespace) -> int:
    if not is_memory(args.memory):  # a read: never make a memory of another directory
        raise SystemExit(f"no memory at {args.memory}; run `jevmem ingest` first")
    m = open_memory(args.memory, args.embedder)
    r = m.search(args.query, args.k, now=args.now, scope=scope_flags(args.scope))
    for rank, e in enumerate(r.evidence, 1):
        when = (
            "" if e.timestamp is None else time.strftime("%Y-%m-%d %H:%M", time.gmtime(e.timestamp))
        )
        how = "anchor" if e.via is None else f"{e.via.view} edge from {e.via.from_node}"
        who = e.provenance.get("speaker", "")
        said = terminal_safe(f"{who + ': ' if who else ''}{e.text}")
        print(f"{rank:2d}. [{e.score:.3f}] {when} {said}")
        print(f"      id {e.id} via {how}; provenance {terminal_safe(str(e.provenance))}")
        if e.passage != (0, len(e.text)):
            print(f"      best passage: characters {e.passage[0]}-{e.passage[1]} of {len(e.text)}")
        for ref in e.time_refs:
            print(f"      time: {ref['text']!r} -> {ref['resolved']} ({ref['precision']})")
    from jevmem._explain import sufficiency_line

    print(f"{sufficiency_line(r)}; stop: {r.trace.get('stop_reason')}")
    if args.trace:
        print(json.dumps(r.trace, indent=2, default=str))
    return 0


def memory_path(raw: str) -> Path:
    """A path flag naming a memory (or a directory of them), as argparse's
    ``type``: an empty or blank value, an unset shell variable most likely,
    is refused (``Path("")`` is the working directory, which would become a
    memory)."""
    if not raw.strip():
        raise argparse.ArgumentTypeError(
            f"{raw!r} is empty (an unset variable?); it would name the working directory"
        )
    return Path(raw)


def memory_spec(raw: str) -> str:
    """A ``[NAME=]PATH`` flag, as argparse's ``type``: refused when it, or its
    PATH after ``NAME=``, is empty or blank (see `memory_path`)."""
    if not raw.strip():
        raise argparse.ArgumentTypeError(f"{raw!r} is empty (an unset variable?)")
    _, sep, path = raw.partition("=")
    if sep and not path.strip():
        raise argparse.ArgumentTypeError(f"{raw!r} has no path after '=' (an unset variable?)")
    return raw


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="jevmem", description="A memory engine for LLM agents.")
    ap.add_argument("--version", action="version", version=f"jevmem {_version()}")
    sub = ap.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--memory",
        type=memory_path,
        default=DEFAULT_MEMORY,
        help="a directory (durable: every write in a write-ahead log) or a .jvm file "
        "(loaded and saved whole); default ./jevmem.jvm",
    )
    common.add_argument("--embedder", default=None, help="default, hash[-DIM] or onnx[:MODEL]")
    from jevmem._ingest import FORMAT_HELP

    p = sub.add_parser(
        "ingest",
        parents=[common],
        help="add observations from JSONL, chat JSONL or a LoCoMo file",
        description="Add the observations of FILE to a memory.",
        epilog=FORMAT_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", help="JSONL, chat JSONL or a LoCoMo file; - reads standard input")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument(
        "--scope",
        action="append",
        metavar="KEY=VALUE",
        help='scope of every observation without its own "scope" (repeatable)',
    )
    p.set_defaults(func=cmd_ingest)
    from jevmem._explain import STOP_RULE_NOTE

    p = sub.add_parser(
        "search", parents=[common], help="retrieve evidence for a query", epilog=STOP_RULE_NOTE
    )
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
    from jevmem._inspect_cli import add_command as add_inspect
    from jevmem.remote.cli import add_commands  # serve, serve-controller (the grpc extra)

    add_inspect(sub)

    add_commands(sub)
    from jevmem.integrations.mcp_cli import add_command as add_mcp  # the mcp extra, on use

    add_mcp(sub)
    args = ap.parse_args(argv)
    try:
        return int(args.func(args))
    except JevmemError as exc:
        print(f"jevmem: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # a missing or unreadable file the user named: no traceback
        where = f": {exc.filename}" if exc.filename else ""
        print(f"jevmem: {exc.strerror or exc}{where}", file=sys.stderr)
        return 2
    except SystemExit as exc:
        # a subcommand's user error (a bad flag value, no memory at a path):
        # one line and status 2. Still raised, message kept, for callers of
        # main() that catch it; an int code (argparse's) passes unchanged.
        if isinstance(exc.code, str):
            print(f"jevmem: {' '.join(exc.code.splitlines())}", file=sys.stderr)
            exc.code = 2
        raise


def _version() -> str:
    """The installed distribution's version, else the extension's (a source checkout)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("jevmem")
    except PackageNotFoundError:
        from jevmem import __version__

        return f"{__version__} (source checkout)"


def _demo() -> int:
    from jevmem.demo import demo

    demo()
    return 0
