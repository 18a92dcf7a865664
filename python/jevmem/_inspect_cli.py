"""``jevmem inspect``: write a memory's graph as HTML, JSON or GraphML (see `jevmem.inspect`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

__all__ = ["add_command"]

_SUFFIX_FORMAT = {".html": "html", ".htm": "html", ".json": "json", ".graphml": "graphml"}


def cmd_inspect(args: argparse.Namespace) -> int:
    from jevmem import inspect
    from jevmem._cli_support import open_memory, scope_flags

    if not args.memory.exists():
        raise FileNotFoundError(2, "no memory here", str(args.memory))
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
        out = inspect.to_html(data, title=f"jevmem: {args.memory.name}")
    if args.output == "-":
        sys.stdout.write(out)
    else:
        Path(args.output).write_text(out, encoding="utf-8")
    drawn = f"{len(data['nodes'])} nodes, {len(data['edges'])} edges"
    print(f"wrote {args.output} ({fmt}): {drawn}", file=sys.stderr)
    if data["truncated"]:
        print(f"note: {data['truncated']['note']}", file=sys.stderr)
    return 0


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
