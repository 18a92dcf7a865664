"""``jevmem mcp``: the subcommand's arguments. The SDK (the ``mcp`` extra) is
imported only when the command runs, so ``jevmem --help`` works without it."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_command"]


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from jevmem.integrations import mcp as jevmem_mcp
    except ImportError as exc:
        print(
            f"jevmem mcp needs the mcp extra ({exc.name or exc} is missing): "
            "pip install 'jevmem[mcp]'",
            file=sys.stderr,
        )
        return 2
    specs = [jevmem_mcp.parse_memory_spec(raw) for raw in args.memory]
    http = jevmem_mcp.parse_http(args.http) if args.http else None
    memories = jevmem_mcp.open_memories(specs, args.embedder, args.durability)
    try:
        jevmem_mcp.serve(memories, http, path=args.path)
    except KeyboardInterrupt:
        pass
    finally:
        for m in memories.values():
            m.close()  # a checkpoint: reopening replays nothing
    return 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "mcp",
        help="serve memories to MCP clients (stdio, or streamable HTTP with --http)",
        description="Serve durable directory memories over the Model Context Protocol: tools "
        "remember, recall, forget, list (and answer when System Two is configured) and a "
        "stats resource per memory. stdio by default; --http HOST:PORT for streamable HTTP.",
    )
    p.add_argument(
        "--memory",
        action="append",
        required=True,
        metavar="[NAME=]DIR",
        help="a directory memory (created when missing); repeatable; named after the "
        "directory unless NAME= is given",
    )
    p.add_argument(
        "--http",
        default=None,
        metavar="HOST:PORT",
        help="serve streamable HTTP here instead of stdio (port 0 picks a free one; no "
        "authentication: keep it on loopback)",
    )
    p.add_argument("--path", default="/mcp", help="the HTTP endpoint's path (default /mcp)")
    p.add_argument("--embedder", default=None, help="default, hash[-DIM] or onnx[:MODEL]")
    p.add_argument(
        "--durability",
        default="sync",
        help="sync (default), interval:MS or none (see Memory.open)",
    )
    p.set_defaults(func=cmd_mcp)
