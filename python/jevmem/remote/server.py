"""gRPC servers: shared plumbing and the System-One controller service.

Every server built here binds an explicit address (``127.0.0.1`` unless told
otherwise), serves the standard ``grpc.health.v1.Health`` service, caps its
message sizes, sheds load past ``max_concurrent_rpcs`` with
RESOURCE_EXHAUSTED, optionally speaks TLS, optionally requires a bearer
token (UNAUTHENTICATED without a known one; the health service stays open to
probes; ``tokens`` maps each token to the memories it opens, see
:class:`TokenAccess`),
and shuts down gracefully: health turns NOT_SERVING, in-flight calls get
``grace_s`` to finish.
"""

from __future__ import annotations

import errno
import hmac
import importlib
import json
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from jevmem._collector import collector_paused
from jevmem._proto.jevmem.v1 import controller_pb2 as pb
from jevmem._proto.jevmem.v1 import controller_pb2_grpc as pb_grpc
from jevmem.controller import default_controller
from jevmem.controller.local import LocalController
from jevmem.controller.types import ControllerError, SystemOne, validate_answers
from jevmem.errors import InvalidConfigError, InvalidTypeError, UnknownQuestionKindError
from jevmem.remote.convert import BadRequest, answers_to_proto, requests_from_proto

__all__ = [
    "ControllerServicer",
    "RunningServer",
    "ServerOptions",
    "TokenAccess",
    "check_bindable",
    "check_port",
    "host_port",
    "load_controller",
    "serve_controller",
    "start_server",
]

log = logging.getLogger("jevmem.remote")

HEALTH_PREFIX = "/grpc.health.v1.Health/"
CONTROLLER_SERVICE = "jevmem.v1.SystemOne"


@dataclass
class ServerOptions:
    host: str = "127.0.0.1"
    #: 0 picks a free port; :attr:`RunningServer.port` tells which.
    port: int = 0
    max_workers: int = 16
    #: Calls beyond this many in flight are refused with RESOURCE_EXHAUSTED.
    max_concurrent_rpcs: int = 64
    max_message_bytes: int = 64 * 1024 * 1024
    #: When set, every call but health checks needs ``authorization: Bearer <token>``.
    #: This token opens every memory (the admin token).
    token: str | None = None
    #: token -> the memory names it opens (``"*"``: all of them); see :class:`TokenAccess`.
    tokens: Mapping[str, Sequence[str]] | None = None
    #: Largest request a server accepts (``None``: ``max_message_bytes``); the
    #: memory service sizes it from its text limits.
    max_receive_message_bytes: int | None = None
    #: PEM bytes; both set switches the port to TLS.
    tls_cert: bytes | None = None
    tls_key: bytes | None = None
    grace_s: float = 5.0


ANY_MEMORY = "*"


class TokenAccess:
    """Which memories each bearer token opens.

    ``tokens`` maps a token to the memory names it may read and write;
    ``"*"`` among them opens every memory (an admin token). A call with an
    unknown token is refused (UNAUTHENTICATED) before any handler runs; a
    known token naming another memory gets PERMISSION_DENIED from the
    service, so one leaked token opens only its own tenants.
    """

    def __init__(self, tokens: Mapping[str, Sequence[str]]) -> None:
        self._names: dict[bytes, frozenset[str]] = {}
        for token, names in tokens.items():
            if not isinstance(token, str) or not token or any(c.isspace() for c in token):
                raise ValueError("tokens must be non-empty strings without whitespace")
            if isinstance(names, str) or not all(isinstance(n, str) for n in names):
                raise ValueError(f"the memories of a token must be a list of names, got {names!r}")
            self._names[token.encode()] = frozenset(names)

    @classmethod
    def from_options(cls, opts: ServerOptions) -> TokenAccess | None:
        """The access table ``opts`` asks for: ``token`` opens everything; None without tokens."""
        table: dict[str, Sequence[str]] = dict(opts.tokens or {})
        if opts.token:
            table[opts.token] = [ANY_MEMORY]
        return cls(table) if table else None

    @classmethod
    def load(cls, path: str | Path) -> dict[str, list[str]]:
        """Read a tokens file: a JSON object ``{"token": ["memory", ...], ...}``."""
        try:
            raw = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise ValueError(f"tokens file {path}: {exc}") from None
        if not isinstance(raw, dict) or not all(isinstance(v, list) for v in raw.values()):
            raise ValueError(f'tokens file {path}: expected {{"token": ["memory", ...]}}')
        cls(raw)  # check it
        return raw

    def known(self, header: bytes) -> bool:
        """Whether an ``authorization`` value carries one of the tokens."""
        token = _bearer(header)
        found = False
        for expected in self._names:
            # compare against every token: the time taken does not say which matched
            found |= token is not None and hmac.compare_digest(token, expected)
        return found

    def allows(self, header: bytes | None, memory: str) -> bool:
        token = _bearer(header) if header is not None else None
        if token is None:
            return False
        names = next(
            (n for expected, n in self._names.items() if hmac.compare_digest(token, expected)),
            None,
        )
        return names is not None and (ANY_MEMORY in names or memory in names)

    @staticmethod
    def header(context: grpc.ServicerContext) -> bytes | None:
        """The call's ``authorization`` metadata value."""
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                return value.encode() if isinstance(value, str) else bytes(value)
        return None


def _bearer(header: bytes) -> bytes | None:
    prefix = b"Bearer "
    return header[len(prefix) :] if header.startswith(prefix) else None


class _BearerAuth(grpc.ServerInterceptor):
    def __init__(self, access: TokenAccess) -> None:
        self._access = access

        def deny(request: Any, context: grpc.ServicerContext) -> NoReturn:
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong bearer token")

        # one refusal per call shape: the server reads a call as its handler's shape says
        self._deny: dict[tuple[bool, bool], grpc.RpcMethodHandler[Any, Any]] = {
            (False, False): grpc.unary_unary_rpc_method_handler(deny),
            (False, True): grpc.unary_stream_rpc_method_handler(deny),
            (True, False): grpc.stream_unary_rpc_method_handler(deny),
            (True, True): grpc.stream_stream_rpc_method_handler(deny),
        }

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler[Any, Any] | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any] | None:
        if handler_call_details.method.startswith(HEALTH_PREFIX):
            return continuation(handler_call_details)
        for key, value in handler_call_details.invocation_metadata:
            if key == "authorization":
                got = value.encode() if isinstance(value, str) else bytes(value)
                if self._access.known(got):
                    return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        if handler is None:
            return self._deny[(False, False)]
        return self._deny[(handler.request_streaming, handler.response_streaming)]


class RunningServer:
    """A started server: its port, its health servicer, and a graceful stop."""

    def __init__(
        self,
        server: grpc.Server,
        port: int,
        health_servicer: Any,
        services: Sequence[str],
        host: str = "127.0.0.1",
    ) -> None:
        self.server, self.port, self.health, self.services = (
            server,
            port,
            health_servicer,
            tuple(services),
        )
        #: the host the server was bound to (as given: a name, an IPv4 or IPv6 address)
        self.host = host
        self._stopped = threading.Event()

    @property
    def address(self) -> str:
        """Where a client on this machine reaches the server: the bound host
        and port (IPv6 in brackets; a wildcard host as its loopback)."""
        host = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1", "[::]": "::1"}.get(
            self.host, self.host
        )
        return host_port(host, self.port)

    def stop(self, grace_s: float | None = 0.0) -> None:
        """Stop: health NOT_SERVING, refuse new calls, give in-flight ones ``grace_s``."""
        if self._stopped.is_set():
            return
        self._stopped.set()
        self.health.enter_graceful_shutdown()
        # bounded: a server told to stop must return even when grpc's own
        # shutdown does not report back (calls are cancelled after the grace)
        wait_s = (grace_s or 0.0) + STOP_REPORT_S
        if not self.server.stop(grace_s).wait(timeout=wait_s):
            log.warning("the server had not reported stopped %.1f s after stop; going on", wait_s)

    def wait(self) -> None:
        self.server.wait_for_termination()

    def serve_forever(self, grace_s: float = 5.0) -> None:
        """Block until SIGINT/SIGTERM, then stop gracefully."""
        received: list[int] = []

        def on_signal(signum: int, frame: object) -> None:
            # No lock in a signal handler: it runs on the main thread between
            # two bytecodes, possibly inside the very wait it would wake
            # (Event.set there takes the lock Event.wait holds: a deadlock,
            # seen as serve not exiting on SIGTERM). A list append is atomic.
            received.append(signum)

        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, on_signal)
        while not received:
            time.sleep(SIGNAL_POLL_S)  # the handler runs during the sleep: seen within one poll
        log.info("signal %s: shutting down (grace %.1fs)", received[0], grace_s)
        self.stop(grace_s)

    def __enter__(self) -> RunningServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(0.0)


#: How often `serve_forever` looks whether a stop signal came.
SIGNAL_POLL_S = 0.1
#: How long `RunningServer.stop` waits past the grace for grpc to report the server stopped.
STOP_REPORT_S = 10.0


def start_server(
    register: Callable[[grpc.Server], Sequence[str]], opts: ServerOptions
) -> RunningServer:
    """Build, bind and start a server; ``register`` adds the services and names them.

    Bad options raise :class:`~jevmem.errors.InvalidConfigError` (a
    ``ValueError``) and an address that cannot be bound (a host that does not
    resolve, a port in use) :class:`OSError`, both before anything is started.
    """
    receive = opts.max_receive_message_bytes or opts.max_message_bytes
    if (
        opts.max_concurrent_rpcs < 1
        or opts.max_workers < 1
        or min(opts.max_message_bytes, receive) < 1024
    ):
        raise InvalidConfigError(
            "max_concurrent_rpcs and max_workers must be >= 1, messages >= 1 KiB"
        )
    check_port(opts.port)
    check_bindable(opts.host, opts.port)
    access = TokenAccess.from_options(opts)
    interceptors: list[grpc.ServerInterceptor] = [_BearerAuth(access)] if access else []
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=opts.max_workers, thread_name_prefix="jevmem-grpc"),
        interceptors=interceptors,
        options=[
            ("grpc.max_send_message_length", opts.max_message_bytes),
            ("grpc.max_receive_message_length", receive),
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=opts.max_concurrent_rpcs,
    )
    services = list(register(server))
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    address = host_port(opts.host, opts.port)
    try:
        if opts.tls_cert is not None and opts.tls_key is not None:
            creds = grpc.ssl_server_credentials([(opts.tls_key, opts.tls_cert)])
            port = server.add_secure_port(address, creds)
        elif opts.tls_cert is not None or opts.tls_key is not None:
            raise InvalidConfigError("TLS needs both a certificate and a key")
        else:
            port = server.add_insecure_port(address)
    except RuntimeError as exc:  # grpcio's "Failed to bind to address ..."
        raise OSError(f"could not bind {address}: {exc}") from None
    if port == 0:
        raise OSError(f"could not bind {address}")
    server.start()
    for name in [*services, ""]:
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, port, health_servicer, services, host=opts.host)


def host_port(host: str, port: int) -> str:
    """``host:port`` as gRPC reads an address: an IPv6 host in brackets."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def check_port(port: object) -> int:
    """A TCP port, 0 (pick a free one) to 65535; anything else is refused
    (gRPC would wrap 70000 to 4464 and -1 to 65535)."""
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise InvalidConfigError(f"port must be an integer from 0 to 65535, got {port!r}")
    return port


def check_bindable(host: str, port: int) -> None:
    """Refuse, with one clear :class:`OSError`, a host that does not resolve
    or a port another socket already listens on, before gRPC tries (its own
    failure is a bare RuntimeError and a log line)."""
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        infos = socket.getaddrinfo(
            bare or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise OSError(f"cannot resolve host {host!r}: {exc}") from None
    if port == 0:
        return
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as probe:
            # as gRPC binds: address reuse on (a port in TIME_WAIT is free), port reuse off
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise OSError(
                        exc.errno, f"cannot bind {host_port(host, port)}: the port is in use"
                    ) from None
                # anything else (an address family the machine lacks): gRPC decides


# ---- the controller service ----------------------------------------------------


class ControllerServicer(pb_grpc.SystemOneServicer):
    """Serves any :class:`SystemOne`; checks requests in and answers out."""

    def __init__(self, controller: SystemOne, *, validate: bool = True) -> None:
        self.controller = controller
        self.validate = validate
        self.controller_name = str(getattr(controller, "name", type(controller).__name__))

    def Decide(self, request: pb.DecideRequest, context: grpc.ServicerContext) -> pb.DecideResponse:
        return self._answer(request, context)

    def DecideStream(
        self, request_iterator: Iterator[pb.DecideRequest], context: grpc.ServicerContext
    ) -> Iterator[pb.DecideResponse]:
        """Answer each chunk as it arrives, with the same checks as ``Decide``."""
        for request in request_iterator:
            yield self._answer(request, context)

    def _answer(
        self, request: pb.DecideRequest, context: grpc.ServicerContext
    ) -> pb.DecideResponse:
        # a large call decodes into tens of thousands of objects: see collector_paused
        with collector_paused():
            return self._answer_now(request, context)

    def _answer_now(
        self, request: pb.DecideRequest, context: grpc.ServicerContext
    ) -> pb.DecideResponse:
        try:
            requests = requests_from_proto(request)
        except BadRequest as exc:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if not requests:
            return pb.DecideResponse(controller=self.controller_name)
        try:
            answers = self.controller.decide(requests)
        except UnknownQuestionKindError as exc:
            # the request asked what the controller has no answer for: the
            # caller's fault; any other failure (a KeyError too) is the server's
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        except BaseException as exc:  # SystemExit too: never leave a call hanging
            log.exception("controller %s failed", self.controller_name)
            context.abort(
                grpc.StatusCode.INTERNAL,
                f"controller {self.controller_name} failed: {type(exc).__name__}: {exc}",
            )
        try:
            if self.validate:
                answers = validate_answers(requests, answers)
            # the compact wire form cannot carry a missing, extra or mistyped
            # answer, so encoding checks those even without validation
            return answers_to_proto(requests, answers, self.controller_name)
        except (ControllerError, TypeError, ValueError, OverflowError) as exc:
            # unvalidated answers of the wrong type fail inside the encoding
            context.abort(
                grpc.StatusCode.INTERNAL,
                f"controller {self.controller_name} gave invalid answers: {exc}",
            )


def load_controller(spec: str | None) -> SystemOne:
    """``None`` or ``"local"``: the in-process default (`default_controller`:
    the learned controller when the shipped model has heads); ``"hand"``: the
    hand-written `LocalController`; else ``module:Class`` built with no arguments."""
    if spec in (None, "", "local"):
        return default_controller()
    if spec == "hand":
        return LocalController()
    assert spec is not None
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidConfigError(
            f"controller must be 'local', 'hand' or 'module:Class', got {spec!r}"
        )
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise InvalidConfigError(
            f"controller {spec}: cannot import {module_name} ({exc}); "
            "--controller-path DIR adds a directory to import from"
        ) from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise InvalidConfigError(
                f"controller {spec}: {module_name} has no attribute {attr}"
            ) from None
    controller = obj() if isinstance(obj, type) or callable(obj) else obj
    if not isinstance(controller, SystemOne):
        raise InvalidTypeError(f"{spec} is not a SystemOne controller (it needs name and decide())")
    return controller


def serve_controller(
    controller: SystemOne | None = None,
    opts: ServerOptions | None = None,
    *,
    validate: bool = True,
) -> RunningServer:
    """Start a ``jevmem.v1.SystemOne`` server for ``controller`` (local by default)."""
    servicer = ControllerServicer(controller or default_controller(), validate=validate)

    def register(server: grpc.Server) -> list[str]:
        pb_grpc.add_SystemOneServicer_to_server(servicer, server)
        return [CONTROLLER_SERVICE]

    return start_server(register, opts or ServerOptions())
