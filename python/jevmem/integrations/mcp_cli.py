"""``jevmem mcp``: the subcommand's arguments. The SDK (the ``mcp`` extra) is
imported only when the command runs, so ``jevmem --help`` works without it."""

from __future__ import annotations

import argparse
import os

from jevmem.errors import MissingDependencyError

__all__ = ["add_command"]


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from jevmem.integrations import mcp as jevmem_mcp
    except ImportError as exc:
        raise MissingDependencyError(
            f"jevmem mcp needs the mcp extra ({exc.name or exc} is not installed): "
            "pip install 'jevmem[mcp]', or from a source checkout pip install '.[mcp]'"
        ) from None
    specs = [jevmem_mcp.parse_memory_spec(raw) for raw in args.memory]
    http = jevmem_mcp.parse_http(args.http) if args.http else None
    token = None
    if args.token_env:
        if http is None:
            raise SystemExit("--token-env applies to --http only (stdio has no network to guard)")
        token = os.environ.get(args.token_env)
        if not token:
            raise SystemExit(f"--token-env {args.token_env}: the variable is unset or empty")
    system_two = None
    if args.base_url or args.model or args.api_key_env:
        from jevmem.system_two import ChatCompletionsClient

        key = None
        if args.api_key_env:
            key = os.environ.get(args.api_key_env)
            if not key:
                raise SystemExit(
                    f"--api-key-env {args.api_key_env}: the variable is unset or empty"
                )
        # made before any memory is opened: a bad model setting changes nothing
        system_two = ChatCompletionsClient(args.base_url, args.model, key)
    memories = jevmem_mcp.open_memories(specs, args.embedder, args.durability)
    if system_two is not None:
        for m in memories.values():
            m.system_two = system_two
    try:
        jevmem_mcp.serve(memories, http, path=args.path, token=token)
    except KeyboardInterrupt:
        pass
    finally:
        for m in memories.values():
            m.close()  # a checkpoint: reopening replays nothing
    return 0


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from jevmem.cli import memory_spec  # refuses an empty path (the working directory)

    p = sub.add_parser(
        "mcp",
        help="serve memories to MCP clients (stdio, or streamable HTTP with --http)",
        description="Serve durable directory memories over the Model Context Protocol: tools "
        "remember, recall, forget, list (and answer when a System-Two model is set) and a "
        "stats resource per memory. stdio by default; --http HOST:PORT for streamable HTTP.",
    )
    p.add_argument(
        "--memory",
        action="append",
        type=memory_spec,
        required=True,
        metavar="[NAME=]DIR",
        help="a directory memory (created when missing); repeatable; named after the "
        "directory unless NAME= is given",
    )
    p.add_argument(
        "--http",
        default=None,
        metavar="HOST:PORT",
        help="serve streamable HTTP here instead of stdio (port 0 picks a free one)",
    )
    p.add_argument(
        "--token-env",
        default=None,
        metavar="VAR",
        help="with --http: require 'Authorization: Bearer <token>', the token read from this "
        "environment variable",
    )
    p.add_argument("--path", default="/mcp", help="the HTTP endpoint's path (default /mcp)")
    p.add_argument("--embedder", default=None, help="default, hash[-DIM] or onnx[:MODEL]")
    p.add_argument(
        "--durability",
        default="sync",
        help="sync (default), interval:MS or none (see Memory.open)",
    )
    p.add_argument(
        "--base-url",
        default=None,
        help="the System-Two model's OpenAI-compatible endpoint for the answer tool "
        "(else JEVMEM_S2_BASE_URL); the tool is offered when a model is set",
    )
    p.add_argument("--model", default=None, help="the System-Two model (else JEVMEM_S2_MODEL)")
    p.add_argument(
        "--api-key-env",
        default=None,
        metavar="VAR",
        help="read the model's API key from this variable (else JEVMEM_S2_API_KEY)",
    )
    p.set_defaults(func=cmd_mcp)
