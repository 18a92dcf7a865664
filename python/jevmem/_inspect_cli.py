"""``jevmem inspect``: write a memory's graph as HTML, JSON or GraphML (see `jevmem.inspect`)."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["add_command"]

_SUFFIX_FORMAT = {".html": "html", ".htm": "html", ".json": "json", ".graphml": "graphml"}


def cmd_inspect(args: argparse.Namespace) -> int:
    from jevmem import inspect
    from jevmem._cli_support import is_memory, open_memory, scope_flags

    if not is_memory(args.memory):  # a read: never make a memory of another directory
        raise FileNotFoundError(2, "no memory here", str(args.memory))
    if args.output != "-":
        _refuse_the_memory_as_output(Path(args.output), args.memory)
    fmt = args.format or _SUFFIX_FORMAT.get(Path(args.output).suffix.lower(), "html")
    m = open_memory(args.memory, args.embedder)
    try:
        data = inspect.graph_data(
            m,
            query=args.query,
            k=args.k,
            scope=scope_flags(args.scope),
            now=args.now,
            max_nodes=args.max_nodes,
        )
    finally:
        m.close()
    if fmt == "json":
        out = inspect.to_json(data)
    elif fmt == "graphml":
        out = inspect.to_graphml(data)
    else:
        # (a file name need not be UTF-8: its undecodable bytes shown as U+FFFD)
        name = os.fsencode(args.memory.name).decode("utf-8", "replace")
        out = inspect.to_html(data, title=f"jevmem: {name}")
    if args.output == "-":
        sys.stdout.write(out)
    else:
        _write_atomically(Path(args.output), out)
    drawn = f"{len(data['nodes'])} nodes, {len(data['edges'])} edges"
    print(f"wrote {args.output} ({fmt}): {drawn}", file=sys.stderr)
    if data["truncated"]:
        print(f"note: {data['truncated']['note']}", file=sys.stderr)
    return 0


def _refuse_the_memory_as_output(output: Path, memory: Path) -> None:
    """``-o`` naming the memory file itself, or a file inside a durable
    memory's directory, would overwrite what it reads: refused up front."""
    out, mem = output.resolve(), memory.resolve()
    same = out == mem or (output.exists() and os.path.samefile(output, memory))
    if same or (memory.is_dir() and mem in out.parents):
        where = "is the memory" if same else "is inside the memory directory"
        raise SystemExit(f"--output {output} {where} {memory}; name another file")


def _write_atomically(path: Path, text: str) -> None:
    """``text`` at ``path`` whole or not at all: a temporary file beside it,
    then a rename over it (an interrupted run leaves the old file)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # named by the path the user gave, not the temporary one
        raise type(exc)(exc.errno, exc.strerror, str(path)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain write would make it (mkstemp: 0600)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.errno is not None:  # e.g. -o names a directory
            raise type(exc)(exc.errno, exc.strerror, str(path)) from None
        raise


def add_command(sub: Any) -> None:
    p = sub.add_parser(
        "inspect",
        help="write a memory's graph (and what a query did) as one offline HTML page, JSON or GraphML",
        description="Write the nodes and edges of MEMORY by view; with --query also the "
        "search's evidence, the edges it came by, its rounds and stop reason. The HTML "
        "page is self-contained (no network): open it in a browser.",
    )
    p.add_argument("memory", type=Path, metavar="MEMORY", help="a memory directory or .jvm file")
    p.add_argument("-o", "--output", default="graph.html", help="file to write, - for stdout")
    p.add_argument(
        "--format",
        choices=("html", "json", "graphml"),
        default=None,
        help="default: from the --output suffix, else html",
    )
    p.add_argument("--query", "-q", default=None, help="show what this search finds and how")
    p.add_argument("-k", type=int, default=10, help="evidence items of --query (default 10)")
    p.add_argument("--now", default=None, help="query time (ISO 8601), for recency")
    p.add_argument(
        "--scope", action="append", metavar="KEY=VALUE", help="only this scope (repeatable)"
    )
    p.add_argument(
        "--max-nodes",
        type=int,
        default=500,
        metavar="N",
        help="draw at most N nodes (default 500): the query's first, then their neighbours, "
        "then the newest; the output says when it cut",
    )
    p.add_argument("--embedder", default=None, help="default, hash[-DIM] or onnx[:MODEL]")
    p.set_defaults(func=cmd_inspect)
