"""Remote System-One controllers and the memory service over gRPC (the ``grpc`` extra).

* :class:`GrpcController`: a controller that answers over the network, with
  deadlines, retries on UNAVAILABLE, a circuit breaker and a marked local
  fallback.
* :func:`serve_controller`: host any controller (``jevmem serve-controller``).
* :func:`serve_memory` and :class:`MemoryClient`: named memories over the
  network (``jevmem serve``).

Names are imported lazily, so ``import jevmem.remote`` (and the CLI) works
without grpcio installed until a remote feature is used.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jevmem.remote.client import (
        CallOutcome,
        CircuitBreaker,
        GrpcController,
        RemoteControllerError,
        RemoteControllerWarning,
    )
    from jevmem.remote.memory_service import (
        MemoryClient,
        MemoryServiceError,
        MemoryServicer,
        serve_memory,
    )
    from jevmem.remote.server import (
        ControllerServicer,
        RunningServer,
        ServerOptions,
        load_controller,
        serve_controller,
    )

_WHERE = {
    "CallOutcome": "client",
    "CircuitBreaker": "client",
    "GrpcController": "client",
    "RemoteControllerError": "client",
    "RemoteControllerWarning": "client",
    "ControllerServicer": "server",
    "RunningServer": "server",
    "ServerOptions": "server",
    "load_controller": "server",
    "serve_controller": "server",
    "MemoryClient": "memory_service",
    "MemoryServiceError": "memory_service",
    "MemoryServicer": "memory_service",
    "serve_memory": "memory_service",
}

__all__ = [
    "CallOutcome",
    "CircuitBreaker",
    "ControllerServicer",
    "GrpcController",
    "MemoryClient",
    "MemoryServiceError",
    "MemoryServicer",
    "RemoteControllerError",
    "RemoteControllerWarning",
    "RunningServer",
    "ServerOptions",
    "load_controller",
    "serve_controller",
    "serve_memory",
]


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(f"jevmem.remote.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'jevmem.remote' has no attribute {name!r}")
