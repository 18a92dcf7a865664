"""``jevmem serve`` and ``jevmem serve-controller`` (grpcio is imported only when they run)."""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jevmem.errors import InvalidConfigError, MissingDependencyError

if TYPE_CHECKING:
    from jevmem.memory import Memory

__all__ = ["add_commands"]


def _server_args(p: argparse.ArgumentParser, default_port: int) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument(
        "--port",
        type=int,
        default=default_port,
        help=f"0 picks a free one (default {default_port})",
    )
    p.add_argument("--max-workers", type=int, default=16, help="handler threads")
    p.add_argument(
        "--max-concurrent",
        type=int,
        default=64,
        help="calls in flight beyond this are refused with RESOURCE_EXHAUSTED",
    )
    p.add_argument("--max-message-mb", type=float, default=64.0, help="max request/response size")
    p.add_argument(
        "--token-env",
        default=None,
        metavar="VAR",
        help="require 'authorization: Bearer <token>', the token read from this env variable",
    )
    p.add_argument("--tls-cert", type=Path, default=None, help="PEM certificate (with --tls-key)")
    p.add_argument("--tls-key", type=Path, default=None, help="PEM private key")
    p.add_argument("--grace", type=float, default=5.0, help="seconds in-flight calls get on stop")


def _options(args: argparse.Namespace) -> Any:
    """The server options the flags ask for; a bad one raises InvalidConfigError
    (one line on stderr, exit status 2) before anything is opened or bound."""
    from jevmem.remote.server import ServerOptions, check_port

    check_port(args.port)
    if args.max_workers < 1:
        raise InvalidConfigError(f"--max-workers must be at least 1, got {args.max_workers}")
    if args.max_concurrent < 1:
        raise InvalidConfigError(f"--max-concurrent must be at least 1, got {args.max_concurrent}")
    if not args.max_message_mb * 1024 * 1024 >= 1024:  # NaN included
        raise InvalidConfigError(
            f"--max-message-mb must be at least 1 KiB (0.001), got {args.max_message_mb}"
        )
    token = None
    if args.token_env:
        token = os.environ.get(args.token_env)
        if not token:
            raise SystemExit(f"--token-env {args.token_env}: the variable is unset or empty")
    return ServerOptions(
        host=args.host,
        port=args.port,
        max_workers=args.max_workers,
        max_concurrent_rpcs=args.max_concurrent,
        max_message_bytes=int(args.max_message_mb * 1024 * 1024),
        token=token,
        tls_cert=args.tls_cert.read_bytes() if args.tls_cert else None,
        tls_key=args.tls_key.read_bytes() if args.tls_key else None,
        grace_s=args.grace,
    )


def _announce(what: str, host: str, port: int) -> None:
    from jevmem.remote.server import host_port

    print(f"jevmem {what} listening on {host_port(host, port)}", flush=True)


def _need_grpc(command: str) -> None:
    """Name the extra to install instead of failing on ``import grpc``."""
    try:
        import google.protobuf  # noqa: F401
        import grpc  # noqa: F401
        import grpc_health  # noqa: F401
    except ImportError as exc:
        raise MissingDependencyError(
            f"jevmem {command} needs the grpc extra ({exc.name} is not installed): "
            "pip install 'jevmem[grpc]', or from a source checkout pip install '.[grpc]'"
        ) from None


def cmd_serve_controller(args: argparse.Namespace) -> int:
    _need_grpc("serve-controller")
    from jevmem.remote.server import check_bindable, load_controller, serve_controller

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    if args.controller_path:
        sys.path.insert(0, str(args.controller_path))
    opts = _options(args)
    check_bindable(args.host, args.port)
    server = serve_controller(load_controller(args.controller), opts)
    _announce("serve-controller", args.host, server.port)
    server.serve_forever(opts.grace_s)
    return 0


def _remote_controller(args: argparse.Namespace) -> Any:
    """A ``GrpcController`` for ``--controller``, or None for the in-process local one.

    Each memory gets its own (its own circuit breaker and fallback mark, so
    one memory's fallback never marks another's traces); channels to the same
    address share their connection.
    """
    if not args.controller:
        return None
    from jevmem.remote.client import GrpcController

    token = None
    if args.controller_token_env:
        token = os.environ.get(args.controller_token_env)
        if not token:
            raise SystemExit(
                f"--controller-token-env {args.controller_token_env}: the variable is unset or empty"
            )
    return GrpcController(
        args.controller,
        token=token,
        root_certificates=args.controller_ca.read_bytes() if args.controller_ca else None,
        server_name=args.controller_server_name,
    )


class MemoryFactory:
    """``jevmem serve``'s memories made on first write: called with a name,
    a new memory (``make``); `discard` undoes that when the first write
    fails, removing the memory's directory if this factory created it."""

    def __init__(self, make: Callable[[str], Memory], data_dir: Path | None) -> None:
        self._make = make
        self._data_dir = data_dir
        self._new_dirs: set[str] = set()

    def __call__(self, name: str) -> Memory:
        # (names are checked by the service: safe as directory names)
        new = self._data_dir is not None and not (self._data_dir / name).exists()
        try:
            memory = self._make(name)
        except BaseException:
            if new and self._data_dir is not None:
                # what a failed open left (a lock, a first checkpoint): the
                # name stays free, as for a first write that fails after it
                shutil.rmtree(self._data_dir / name, ignore_errors=True)
            raise
        if new:
            self._new_dirs.add(name)
        else:
            self._new_dirs.discard(name)
        return memory

    def discard(self, name: str, memory: Memory) -> None:
        memory.close()
        if self._data_dir is not None and name in self._new_dirs:
            self._new_dirs.discard(name)
            shutil.rmtree(self._data_dir / name, ignore_errors=True)


def hosted_memories(
    args: argparse.Namespace,
) -> tuple[dict[str, Memory], dict[str, Path], MemoryFactory | None]:
    """What ``jevmem serve ARGS`` hosts: its named memories, the snapshots they
    are saved to, and the factory of memories created on first write (None
    with ``--fixed``).

    Every memory of the server shares one embedder per kind: an ONNX session
    holds its own copy of the model and its own threads (40 memories each
    with its own session took 3.2 GB and 53 threads, against 176 MB and 15
    threads shared), and memories only call it, which onnxruntime and the
    hashing embedder allow from several threads at once.

    Checked first, before any memory is opened: ``--durability`` (as the
    durable store reads it), each ``--memory`` name (the service's name rule:
    a name no call could reach is refused) and ``--embedder`` (made now, so
    a bad spec is refused at start); each raises InvalidConfigError. A
    ``--data-dir`` subdirectory whose name fails the rule is skipped with a
    warning (left as it is on disk), not hosted.
    """
    from jevmem._cli_support import SharedEmbedders, open_memory
    from jevmem.memory import Memory
    from jevmem.remote.memory_service import NAME_RULE, valid_memory_name

    if args.controller_ca and not args.controller:
        raise SystemExit("--controller-ca needs --controller")
    if args.max_search_batch < 1:
        raise SystemExit(f"--max-search-batch must be at least 1, got {args.max_search_batch}")
    # checked before anything is opened: a bad one would fail every first write
    _check_durability(args.durability)
    specs = [_memory_spec(spec, NAME_RULE, valid_memory_name) for spec in args.memory or []]
    # ONNX threads that spin between runs hold a core the controller rounds of
    # other searches need (BENCHMARKS.md section 33)
    shared = SharedEmbedders(spin=args.embedder_spin)
    if args.embedder:
        _check_embedder(shared, args.embedder)
    snapshots: dict[str, Path] = {}
    memories: dict[str, Memory] = {}
    data_dir: Path | None = args.data_dir
    durability: str = args.durability

    def durable(path: Path) -> Memory:
        chosen = shared.get(args.embedder) if args.embedder else None
        if chosen is None and not (path / "MANIFEST").exists():
            chosen = shared.get("default")
        m = Memory.open(path, chosen, durability=durability)
        remote = _remote_controller(args)
        if remote is not None:
            m.controller = remote
        return m

    if data_dir is not None:
        data_dir.mkdir(parents=True, exist_ok=True)
        # every memory the directory already holds is hosted again
        for sub in sorted(data_dir.iterdir()):
            if not (sub / "MANIFEST").exists():
                continue
            if not valid_memory_name(sub.name):
                # no call could ever reach it: say so, and leave it alone
                logging.getLogger("jevmem.remote").warning(
                    "skipping %s: %r is not a valid memory name (%s)", sub, sub.name, NAME_RULE
                )
                continue
            memories[sub.name] = durable(sub)
    for name, path in specs:
        if path is not None:
            snapshots[name] = path
            memories[name] = open_memory(path, args.embedder, shared, durability)
            remote = _remote_controller(args)
            if remote is not None:
                memories[name].controller = remote
        elif data_dir is not None:
            if name not in memories:
                memories[name] = durable(data_dir / name)
        else:
            memories[name] = Memory(
                shared.get(args.embedder or "default"), controller=_remote_controller(args)
            )
    if args.fixed:
        return memories, snapshots, None

    def make(name: str) -> Memory:
        if data_dir is not None:
            return durable(data_dir / name)
        return Memory(shared.get(args.embedder or "default"), controller=_remote_controller(args))

    return memories, snapshots, MemoryFactory(make, data_dir)


def _check_embedder(shared: Any, spec: str) -> None:
    """Make the ``--embedder`` at start: a bad spec is refused now, not at
    every first write (where the factory would fail each call)."""
    try:
        shared.get(spec)
    except SystemExit as exc:  # `embedder_named`'s way of refusing
        raise InvalidConfigError(f"--embedder {spec}: {exc.code}") from None
    except Exception as exc:  # a model file that is missing or unreadable, say
        raise InvalidConfigError(f"--embedder {spec}: {type(exc).__name__}: {exc}") from None


def _check_durability(mode: str) -> None:
    """Refuse a ``--durability`` the durable store would refuse, by asking it:
    a throwaway store opened with that mode in a temporary directory."""
    import tempfile

    from jevmem._core import MemoryStore

    with tempfile.TemporaryDirectory(prefix="jevmem-durability-") as tmp:
        try:
            store = MemoryStore.open(Path(tmp) / "probe", 1, embedder="hash-1", durability=mode)[0]
        except InvalidConfigError as exc:
            raise InvalidConfigError(f"--durability {mode}: {exc}") from None
        store.close()


def _memory_spec(spec: str, rule: str, valid: Callable[[str], bool]) -> tuple[str, Path | None]:
    """``NAME[=PATH]``: its name, checked by the service's own rule, and path."""
    name, sep, path = spec.partition("=")
    if not valid(name):
        raise InvalidConfigError(
            f"--memory {spec}: {name!r} is not a valid memory name: use {rule}"
        )
    return name, Path(path) if sep and path else None


def _probe_controller(args: argparse.Namespace, log: logging.Logger, wait_s: float = 2.0) -> None:
    """Say at start, not only in traces, when ``--controller`` does not answer."""
    import grpc

    probe = _remote_controller(args)
    try:
        probe.wait_ready(wait_s)
    except grpc.FutureTimeoutError:
        log.warning(
            "controller %s does not answer (no connection within %.0f s): the local controller "
            "answers until it does, and traces say 'local-fallback'",
            args.controller,
            wait_s,
        )
    finally:
        probe.close()


def cmd_serve(args: argparse.Namespace) -> int:
    _need_grpc("serve")
    from jevmem._cli_support import save_memory
    from jevmem.remote.memory_service import serve_memory

    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    from jevmem.remote.server import check_bindable

    # every flag is checked, and the address tried, before a memory is opened
    opts = _options(args)
    check_bindable(args.host, args.port)
    memories, snapshots, factory = hosted_memories(args)
    if args.tokens_file is not None:
        from jevmem.remote.server import TokenAccess

        try:
            opts.tokens = TokenAccess.load(args.tokens_file)
        except ValueError as exc:
            raise SystemExit(str(exc)) from None
    server, servicer = serve_memory(
        memories,
        opts,
        factory=factory,
        discard=None if factory is None else factory.discard,
        max_search_batch=args.max_search_batch,
        max_calls_per_memory=args.max_calls_per_memory,
    )
    where = f", controller at {args.controller}" if args.controller else ""
    log = logging.getLogger("jevmem.remote")
    if args.controller:
        _probe_controller(args, log)
    log.info("hosting %d memories%s", len(memories), where)
    _announce("serve", args.host, server.port)
    server.serve_forever(opts.grace_s)
    hosted = servicer.memories
    for name, path in snapshots.items():
        if not hosted[name].durable:
            save_memory(hosted[name], path)
            print(f"saved {name} to {path}", file=sys.stderr)
    for name, m in hosted.items():
        if m.durable:  # a clean shutdown checkpoints
            m.close()
            print(f"checkpointed and closed {name}", file=sys.stderr)
    for m in hosted.values():
        close = getattr(m.controller, "close", None)
        if callable(close):
            close()
    return 0


def add_commands(sub: Any) -> None:
    """Add the two server subcommands to the ``jevmem`` parser."""
    from jevmem.cli import memory_path, memory_spec  # refuse an empty path (the working dir)

    p = sub.add_parser(
        "serve-controller", help="host a System-One controller over gRPC (jevmem.v1.SystemOne)"
    )
    p.add_argument(
        "--controller",
        default="local",
        help="'local' (default: the in-process default controller, learned when the shipped "
        "model has heads), 'hand' (the hand-written LocalController) or module:Class, "
        "built with no arguments",
    )
    p.add_argument(
        "--controller-path", type=Path, default=None, help="directory to import --controller from"
    )
    _server_args(p, 50061)
    p.set_defaults(func=cmd_serve_controller)
    p = sub.add_parser("serve", help="host named memories over gRPC (jevmem.v1.MemoryService)")
    p.add_argument(
        "--memory",
        action="append",
        type=memory_spec,
        metavar="NAME[=PATH]",
        help="a memory to host (repeatable); PATH a directory: durable (write-ahead log); "
        "PATH a .jvm file: loaded, and saved on shutdown",
    )
    p.add_argument(
        "--fixed", action="store_true", help="host only the --memory names; never create one"
    )
    p.add_argument(
        "--data-dir",
        type=memory_path,
        default=None,
        metavar="DIR",
        help="host durable memories, one directory each under DIR: every memory found there, "
        "every --memory NAME, and every memory a first write creates; an acknowledged write "
        "is in that memory's write-ahead log",
    )
    p.add_argument(
        "--durability",
        default="sync",
        metavar="MODE",
        help="sync mode of durable memories: sync (ack after fsync, the default), "
        "interval:MS or none (see README, Durability)",
    )
    p.add_argument("--embedder", default=None, help="default, hash[-DIM] or onnx[:MODEL]")
    p.add_argument(
        "--embedder-spin",
        action="store_true",
        help="let the ONNX embedder's threads spin between runs: one caller at a time gets "
        "8-15%% more searches a second, four concurrent callers 10-12%% fewer (default off)",
    )
    p.add_argument(
        "--max-search-batch",
        type=int,
        default=256,
        metavar="N",
        help="Search calls that wait for the same memory run together as one search_batch of "
        "at most N queries (default 256; 1 runs each alone)",
    )
    p.add_argument(
        "--max-calls-per-memory",
        type=int,
        default=None,
        metavar="N",
        help="calls one memory admits at once, running or waiting; one more is refused with "
        "RESOURCE_EXHAUSTED, so a busy memory cannot hold the threads others need "
        "(default: --max-workers)",
    )
    p.add_argument(
        "--tokens-file",
        type=Path,
        default=None,
        metavar="PATH",
        help='per-memory bearer tokens: a JSON object {"TOKEN": ["memory", ...]}, "*" for every '
        "memory; a token opens only its memories (PERMISSION_DENIED elsewhere). --token-env's "
        "token stays an admin token that opens all",
    )
    p.add_argument(
        "--controller",
        default=None,
        metavar="HOST:PORT",
        help="a remote System-One controller (jevmem serve-controller or your own) for every "
        "memory; a failed call falls back to the local controller and marks the query's trace",
    )
    p.add_argument(
        "--controller-token-env",
        default=None,
        metavar="VAR",
        help="send 'authorization: Bearer <token>' to --controller, the token read from VAR",
    )
    p.add_argument(
        "--controller-ca",
        type=Path,
        default=None,
        help="PEM root certificate(s): reach --controller over TLS",
    )
    p.add_argument(
        "--controller-server-name",
        default=None,
        help="TLS name to expect from --controller when it differs from its host",
    )
    _server_args(p, 50062)
    p.set_defaults(func=cmd_serve)
