"""System Two: the model that writes final answers and approved summaries (SPEC §0, §2, §6).

:class:`SystemTwo` is the protocol the memory codes against: one method,
``complete(messages, *, max_tokens=None) -> Completion``, a chat turn in, the
model's text out with its token counts and latency. Any object with that
method plugs in (a local model, a test double, a wrapper adding a cache).

:class:`ChatCompletionsClient` implements it for any endpoint that speaks the
OpenAI chat-completions protocol (OpenAI, Azure OpenAI, vLLM, llama.cpp,
Ollama, LiteLLM, OpenRouter...): one ``POST {base_url}/chat/completions``
with a JSON body, answered with JSON or, with ``stream=True``, server-sent
events.

It is written on the standard library (``http.client``), not on the
``openai`` package or ``httpx``: the retrieval path must never need an HTTP
stack, and one JSON POST with optional SSE is small enough that owning it
costs less than a dependency whose retry and timeout behaviour we would have
to pin, mirror in tests and keep in step with. So there is no extra to
install; nothing here is imported by ``import jevmem`` until it is used.

Configuration, argument first, then the environment:

============  ======================  ===================  =============================
setting       argument                environment          fallback
============  ======================  ===================  =============================
base URL      ``base_url``            JEVMEM_S2_BASE_URL   OPENAI_BASE_URL, else
                                                           https://api.openai.com/v1
model         ``model``               JEVMEM_S2_MODEL      OPENAI_MODEL, else an error
API key       ``api_key``             JEVMEM_S2_API_KEY    OPENAI_API_KEY, else none sent
============  ======================  ===================  =============================

Failures: an attempt that gets a 429 or a 5xx, cannot connect, loses the
connection before the whole response, or runs past ``timeout_s`` is retried
up to ``max_retries`` times, waiting an exponentially growing, jittered delay
(or exactly what a ``Retry-After`` header asks, when it asks for no more than
``max_backoff_s``); any other 4xx is raised at once, since sending the same
request again cannot fix it. What is left raises a
:class:`~jevmem.errors.SystemTwoError` subclass.
"""

from __future__ import annotations

import io
import json
import math
import os
import random
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from jevmem._http_settings import header_safe, url_parts
from jevmem.errors import (
    InvalidConfigError,
    InvalidInputError,
    InvalidTypeError,
    SystemTwoConnectionError,
    SystemTwoError,
    SystemTwoHTTPError,
    SystemTwoResponseError,
    SystemTwoTimeoutError,
)

__all__ = [
    "DEFAULT_BASE_URL",
    "ENV_API_KEY",
    "ENV_BASE_URL",
    "ENV_MODEL",
    "ChatCompletionsClient",
    "Completion",
    "Message",
    "SystemTwo",
]

if TYPE_CHECKING:
    # the HTTP stack (http.client, ssl, email) is imported by the first call,
    # not by `import jevmem`: the retrieval path never loads it
    import http.client

ENV_BASE_URL = "JEVMEM_S2_BASE_URL"
ENV_MODEL = "JEVMEM_S2_MODEL"
ENV_API_KEY = "JEVMEM_S2_API_KEY"
#: The OpenAI SDK's own variables, read when ours are unset.
_OPENAI_FALLBACKS = {
    ENV_BASE_URL: "OPENAI_BASE_URL",
    ENV_MODEL: "OPENAI_MODEL",
    ENV_API_KEY: "OPENAI_API_KEY",
}
DEFAULT_BASE_URL = "https://api.openai.com/v1"
#: A response body larger than this is refused (a chat completion is a few KB).
MAX_RESPONSE_BYTES = 16 * 1024 * 1024
#: How much of an error body is kept in the error message.
_ERROR_EXCERPT = 300
_ROLES = frozenset({"system", "user", "assistant", "developer"})

#: One chat message: ``{"role": "system" | "user" | "assistant", "content": str}``.
Message = Mapping[str, str]


@dataclass(frozen=True)
class Completion:
    """One generation and what it cost."""

    text: str
    #: the model the endpoint says answered (else the one asked for)
    model: str
    #: from the response's ``usage``; None when the endpoint reported none
    prompt_tokens: int | None
    completion_tokens: int | None
    #: the whole call: every attempt and every wait between them
    latency_s: float
    #: requests sent, the successful one included
    attempts: int = 1
    finish_reason: str | None = None
    streamed: bool = False
    #: streaming only: from sending the successful attempt to its first text
    first_token_s: float | None = None

    @property
    def total_tokens(self) -> int | None:
        if self.prompt_tokens is None or self.completion_tokens is None:
            return None
        return self.prompt_tokens + self.completion_tokens

    def trace(self) -> dict[str, Any]:
        """The accounting as a plain dict (JSON-friendly)."""
        return {
            "model": self.model,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.total_tokens,
            "latency_s": self.latency_s,
            "attempts": self.attempts,
            "finish_reason": self.finish_reason,
            "streamed": self.streamed,
            "first_token_s": self.first_token_s,
        }


@runtime_checkable
class SystemTwo(Protocol):
    """A generative model: chat messages in, one completion out.

    Raise a :class:`~jevmem.errors.SystemTwoError` on failure; the memory
    treats it as "no answer" (an answer call raises it, a consolidation skips
    the summary)."""

    def complete(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> Completion:
        """Generate one reply to ``messages``; ``max_tokens`` caps its length."""
        ...


def _env(name: str) -> str | None:
    for key in (name, _OPENAI_FALLBACKS[name]):
        v = os.environ.get(key)
        if v:
            return v
    return None


class _Retry(Exception):
    """An attempt failed in a way worth another try."""

    def __init__(
        self,
        kind: str,
        detail: str,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(detail)
        self.kind = kind  # "timeout" | "connection" | "http"
        self.detail = detail
        self.status = status
        self.retry_after_s = retry_after_s

    def final(self, attempts: int, why: str = "") -> SystemTwoError:
        msg = f"{self.detail} ({attempts} attempt{'s' if attempts != 1 else ''}{why})"
        kw: dict[str, Any] = {
            "attempts": attempts,
            "status": self.status,
            "retry_after_s": self.retry_after_s,
        }
        if self.kind == "timeout":
            return SystemTwoTimeoutError(msg, **kw)
        if self.kind == "connection":
            return SystemTwoConnectionError(msg, **kw)
        return SystemTwoHTTPError(msg, **kw)


def _retry_after(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks for (delta-seconds or an HTTP date)."""
    import email.utils

    if value is None:
        return None
    value = value.strip()
    try:
        s = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        s = when.timestamp() - time.time()
    if not math.isfinite(s):
        return None
    return max(0.0, s)


def _error_excerpt(raw: bytes) -> str:
    """The endpoint's own error message when the body is OpenAI-style JSON, else its start."""
    text = raw.decode("utf-8", "replace")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        obj = None
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            text = err["message"]
        elif isinstance(err, str):
            text = err
    text = " ".join(text.split())
    return text[:_ERROR_EXCERPT] + ("..." if len(text) > _ERROR_EXCERPT else "")


class _DeadlineIO(io.RawIOBase):
    """A socket's reads, each bounded by what is left of the attempt's deadline.

    http.client reads the status line, the headers and the body through a
    buffered file over the socket, and that file may call the socket many
    times for one read (a line, or the rest of a body, arriving a byte at a
    time): each of those calls gets only the time left before ``deadline``,
    so bytes that keep trickling in cannot stretch an attempt past it. It
    reads through the socket's own ``makefile``, so the socket stays open
    until this file is closed even after http.client has let go of the
    connection (``Connection: close``), and is never touched after."""

    def __init__(self, sock: socket.socket, deadline: float, timeout_s: float) -> None:
        super().__init__()
        self._sock = sock
        self._io = sock.makefile("rb", buffering=0)
        self._deadline = deadline
        self._timeout_s = timeout_s

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int | None:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"the reply took longer than {self._timeout_s:g} s")
        self._sock.settimeout(left)
        return self._io.readinto(b)

    def close(self) -> None:
        if not self.closed:
            self._io.close()
        super().close()


class _Makefile:
    """What http.client.HTTPResponse takes as its socket: only ``makefile`` is called."""

    def __init__(self, fp: io.BufferedIOBase) -> None:
        self._fp = fp

    def makefile(self, mode: str) -> io.BufferedIOBase:
        return self._fp


def _deadline_response(deadline: float, timeout_s: float) -> Callable[..., Any]:
    """A ``response_class`` for http.client whose reads end at ``deadline``."""
    import http.client

    def make(
        sock: socket.socket,
        debuglevel: int = 0,
        method: str | None = None,
        url: str | None = None,
    ) -> http.client.HTTPResponse:
        fp = io.BufferedReader(_DeadlineIO(sock, deadline, timeout_s))
        return http.client.HTTPResponse(cast(Any, _Makefile(fp)), debuglevel, method, url)

    return make


def _count(usage: Any, key: str) -> int | None:
    if not isinstance(usage, dict):
        return None
    v = usage.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


class ChatCompletionsClient:
    """:class:`SystemTwo` over an OpenAI-compatible ``/chat/completions`` endpoint.

    >>> s2 = ChatCompletionsClient("http://localhost:8000/v1", "qwen2.5-7b-instruct")
    >>> s2.complete([{"role": "user", "content": "Say hi"}]).text   # doctest: +SKIP
    'Hi!'

    ``timeout_s`` bounds each attempt (connecting, sending and reading the
    whole reply, however slowly its bytes arrive: every socket read gets only
    the time left); ``max_retries`` attempts more follow a retryable failure
    (see the module docstring), the n-th after ``backoff_s * 2**(n-1)``
    seconds, capped at ``max_backoff_s``, of which a random half is jitter
    (``seed`` fixes it). ``temperature`` and ``max_tokens`` go into every
    request (None leaves them out: some models refuse them);
    ``extra_body`` is merged into the request JSON last (``{"seed": 1}``,
    ``{"max_completion_tokens": 256}``...) and ``headers`` into its headers
    (Azure's ``api-key``). ``stream=True`` reads the reply as server-sent
    events (``stream_usage`` asks for the token counts in the last event).

    Thread-safe: each thread keeps its own keep-alive connection.
    """

    def __init__(
        self,
        base_url: str | None = None,
        model: str | None = None,
        api_key: str | None = None,
        *,
        timeout_s: float = 60.0,
        max_retries: int = 4,
        backoff_s: float = 0.5,
        max_backoff_s: float = 20.0,
        stream: bool = False,
        stream_usage: bool = True,
        temperature: float | None = 0.0,
        max_tokens: int | None = 512,
        extra_body: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        seed: int | None = None,
    ) -> None:
        base = base_url if base_url is not None else _env(ENV_BASE_URL) or DEFAULT_BASE_URL
        chosen = model if model is not None else _env(ENV_MODEL)
        key = api_key if api_key is not None else _env(ENV_API_KEY)
        if not isinstance(base, str):
            raise InvalidTypeError(f"base_url must be a string, got {type(base).__name__}")
        parts, host, port = url_parts(base.strip())
        if key is not None and isinstance(key, str) and not header_safe(key):
            raise InvalidConfigError(
                "api_key holds characters an HTTP header cannot carry (non-ASCII or control)"
            )
        if not isinstance(chosen, str) or not chosen.strip():
            raise InvalidConfigError(
                f"no System-Two model: pass model= or set {ENV_MODEL} (or OPENAI_MODEL)"
            )
        if key is not None and not isinstance(key, str):
            raise InvalidTypeError("api_key must be a string")
        for name, v in (("timeout_s", timeout_s), ("max_backoff_s", max_backoff_s)):
            if not (isinstance(v, int | float) and not isinstance(v, bool) and v > 0):
                raise InvalidConfigError(f"{name} must be a positive number, got {v!r}")
            if not math.isfinite(v):
                raise InvalidConfigError(f"{name} must be finite, got {v!r}")
        if not (
            isinstance(backoff_s, int | float)
            and not isinstance(backoff_s, bool)
            and math.isfinite(backoff_s)
            and backoff_s >= 0
        ):
            raise InvalidConfigError(f"backoff_s must be a non-negative number, got {backoff_s!r}")
        if not (isinstance(max_retries, int) and not isinstance(max_retries, bool)):
            raise InvalidConfigError(f"max_retries must be an integer, got {max_retries!r}")
        if max_retries < 0:
            raise InvalidConfigError(f"max_retries must be >= 0, got {max_retries}")
        if max_tokens is not None and not (
            isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1
        ):
            raise InvalidConfigError(f"max_tokens must be None or >= 1, got {max_tokens!r}")
        if temperature is not None and not (
            isinstance(temperature, int | float)
            and not isinstance(temperature, bool)
            and math.isfinite(temperature)
            and temperature >= 0
        ):
            raise InvalidConfigError(
                f"temperature must be None or a non-negative number, got {temperature!r}"
            )
        self.base_url = base.strip()
        self.model = chosen.strip()
        self._api_key = key or None
        self.timeout_s = float(timeout_s)
        self.max_retries = max_retries
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.stream = bool(stream)
        self.stream_usage = bool(stream_usage)
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.extra_body = dict(extra_body or {})
        self._headers = {str(k): str(v) for k, v in (headers or {}).items()}
        for name, value in self._headers.items():
            if not (name and header_safe(name) and header_safe(value)) or ":" in name:
                raise InvalidConfigError(f"headers: {name!r:.40} cannot be sent as an HTTP header")
        self._https = parts.scheme == "https"
        self._host = host
        self._port = port
        self._path = parts.path.rstrip("/") + "/chat/completions"
        if parts.query:  # Azure's ?api-version=...
            self._path += "?" + parts.query
        self._rng = random.Random(seed)
        self._local = threading.local()
        self._lock = threading.Lock()
        self._connections: list[http.client.HTTPConnection] = []
        self._stats = {
            "calls": 0,
            "failures": 0,
            "attempts": 0,
            "prompt_tokens": 0,
            "completion_tokens": 0,
        }

    def __repr__(self) -> str:  # never the key
        return f"ChatCompletionsClient({self.base_url!r}, {self.model!r})"

    @property
    def name(self) -> str:
        return f"openai-compatible:{self.model}"

    def stats(self) -> dict[str, int]:
        """Totals since creation: calls, failed calls, attempts, tokens."""
        with self._lock:
            return dict(self._stats)

    # ---- one call ---------------------------------------------------------

    def complete(self, messages: Sequence[Message], *, max_tokens: int | None = None) -> Completion:
        payload = self._payload(messages, max_tokens)
        t0 = time.perf_counter()
        attempts = 0
        try:
            while True:
                attempts += 1
                try:
                    text, usage, model, finish, first = self._attempt(payload)
                except _Retry as r:
                    if attempts > self.max_retries:
                        raise r.final(attempts) from None
                    wait = self._backoff(attempts)
                    if r.retry_after_s is not None:
                        if r.retry_after_s > self.max_backoff_s:
                            raise r.final(
                                attempts,
                                f"; the server asks to wait {r.retry_after_s:.0f} s, "
                                f"more than max_backoff_s={self.max_backoff_s:g}",
                            ) from None
                        wait = r.retry_after_s
                    time.sleep(wait)
                    continue
                break
        except SystemTwoError as exc:
            exc.attempts = attempts
            with self._lock:
                self._stats["calls"] += 1
                self._stats["failures"] += 1
                self._stats["attempts"] += attempts
            raise
        done = Completion(
            text=text,
            model=model or self.model,
            prompt_tokens=_count(usage, "prompt_tokens"),
            completion_tokens=_count(usage, "completion_tokens"),
            latency_s=time.perf_counter() - t0,
            attempts=attempts,
            finish_reason=finish,
            streamed=self.stream,
            first_token_s=first,
        )
        with self._lock:
            self._stats["calls"] += 1
            self._stats["attempts"] += attempts
            self._stats["prompt_tokens"] += done.prompt_tokens or 0
            self._stats["completion_tokens"] += done.completion_tokens or 0
        return done

    def _payload(self, messages: Sequence[Message], max_tokens: int | None) -> bytes:
        if isinstance(messages, str | bytes) or not isinstance(messages, Sequence):
            raise InvalidTypeError("messages must be a list of {'role', 'content'} mappings")
        if not messages:
            raise InvalidInputError("messages must not be empty")
        clean = []
        for i, m in enumerate(messages):
            if not isinstance(m, Mapping):
                raise InvalidTypeError(f"messages[{i}] must be a mapping")
            role, content = m.get("role"), m.get("content")
            if role not in _ROLES:
                raise InvalidInputError(f"messages[{i}]: unknown role {role!r:.40}")
            if not isinstance(content, str):
                raise InvalidTypeError(f"messages[{i}]: content must be a string")
            clean.append({"role": role, "content": content})
        if max_tokens is not None and not (
            isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens >= 1
        ):
            raise InvalidInputError(f"max_tokens must be None or >= 1, got {max_tokens!r}")
        body: dict[str, Any] = {"model": self.model, "messages": clean}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        cap = max_tokens if max_tokens is not None else self.max_tokens
        if cap is not None:
            body["max_tokens"] = cap
        if self.stream:
            body["stream"] = True
            if self.stream_usage:
                body["stream_options"] = {"include_usage": True}
        body.update(self.extra_body)
        try:
            return json.dumps(body, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError as exc:  # a lone surrogate in some content
            raise InvalidInputError(f"messages do not encode as UTF-8: {exc}") from None

    def _backoff(self, attempt: int) -> float:
        """Equal jitter: half the exponential delay fixed, half random."""
        d = min(self.max_backoff_s, self.backoff_s * 2.0 ** (attempt - 1))
        return d / 2 + self._rng.uniform(0, d / 2)

    # ---- HTTP ---------------------------------------------------------------

    def _connection(self) -> tuple[http.client.HTTPConnection, bool]:
        """This thread's connection, and whether it was used before (may be stale)."""
        import http.client
        import ssl

        conn: http.client.HTTPConnection | None = getattr(self._local, "conn", None)
        if conn is not None:
            return conn, True
        if self._https:
            conn = http.client.HTTPSConnection(
                self._host, self._port, timeout=self.timeout_s, context=ssl.create_default_context()
            )
        else:
            conn = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
        self._local.conn = conn
        with self._lock:
            self._connections.append(conn)
        return conn, False

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
            with self._lock:
                if conn in self._connections:
                    self._connections.remove(conn)

    def close(self) -> None:
        """Close every kept-alive connection (the client stays usable)."""
        with self._lock:
            conns, self._connections = self._connections, []
        for c in conns:
            c.close()
        self._local = threading.local()

    def __enter__(self) -> ChatCompletionsClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request_headers(self) -> dict[str, str]:
        h = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if self.stream else "application/json",
            "User-Agent": "jevmem-system-two",
        }
        if self._api_key:
            h["Authorization"] = f"Bearer {self._api_key}"
        h.update(self._headers)
        return h

    def _attempt(self, payload: bytes) -> tuple[str, Any, str | None, str | None, float | None]:
        import http.client

        deadline = time.monotonic() + self.timeout_s
        headers = self._request_headers()
        for fresh_try in (False, True):
            conn, reused = self._connection()
            # connecting and sending get the time left; every read of the
            # reply (status line and headers included) ends at the deadline
            left = max(deadline - time.monotonic(), 1e-3)
            conn.timeout = left
            if conn.sock is not None:
                conn.sock.settimeout(left)
            conn.response_class = _deadline_response(deadline, self.timeout_s)  # type: ignore[assignment]
            sent = time.perf_counter()
            try:
                conn.request("POST", self._path, body=payload, headers=headers)
                resp = conn.getresponse()
            except TimeoutError as exc:
                self._drop()
                raise _Retry("timeout", f"no response within {self.timeout_s:g} s: {exc}") from None
            except (OSError, http.client.HTTPException) as exc:
                self._drop()
                # a kept-alive connection the server has closed in the
                # meantime: reconnect once at once, not counted as a retry
                if reused and not fresh_try:
                    continue
                raise _Retry("connection", f"cannot reach {self.base_url}: {exc!r}") from None
            break
        try:
            return self._read(resp, sent)
        except _Retry:
            self._drop()
            raise
        except SystemTwoError:
            self._drop()
            raise
        finally:
            # closed, or unread bytes (a stream's tail) would start the next reply
            if resp.will_close or not resp.isclosed():
                self._drop()

    def _read(
        self, resp: http.client.HTTPResponse, sent: float
    ) -> tuple[str, Any, str | None, str | None, float | None]:
        import http.client

        status = resp.status
        try:
            if not 200 <= status < 300:
                # an error page read in part: its start is all the message
                # quotes (a proxy's page may be large; the status decides)
                raw = self._body(resp, limit=64 * 1024, cut=True)
                detail = f"HTTP {status} from {self.base_url}: {_error_excerpt(raw)}"
                if status == 429 or status >= 500:
                    raise _Retry(
                        "http", detail, status, _retry_after(resp.getheader("Retry-After"))
                    )
                raise SystemTwoHTTPError(detail, attempts=1, status=status)
            ctype = (resp.getheader("Content-Type") or "").lower()
            if self.stream and "text/event-stream" in ctype:
                return self._read_stream(resp, sent)
            raw = self._body(resp, limit=MAX_RESPONSE_BYTES)
        except TimeoutError:
            raise _Retry("timeout", f"the reply took longer than {self.timeout_s:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            raise _Retry("connection", f"the connection broke mid-reply: {exc!r}") from None
        if self.stream and raw.lstrip().startswith(b"data:"):
            # an SSE body sent without its content type
            return self._parse_events(iter(raw.splitlines(keepends=True)), sent)
        return self._parse_json(raw)

    def _body(self, resp: http.client.HTTPResponse, limit: int, cut: bool = False) -> bytes:
        """The reply's body, at most ``limit`` bytes: a longer one is refused,
        or with ``cut`` its first ``limit`` bytes (the rest left unread: the
        connection is dropped after it)."""
        chunks: list[bytes] = []
        size = 0
        while True:
            # read1: at most one socket read at a time, each ending at the
            # deadline; b"" once the whole body is in (or the peer closed):
            # a reply fully read is a reply, whether or not the server keeps
            # the connection, and no socket is touched after it
            chunk = resp.read1(65536)
            if not chunk:
                if resp.length:  # read returns short at EOF instead of raising
                    raise _Retry("connection", "the connection closed mid-reply")
                resp.close()  # read1 leaves a keep-alive reply open at its end
                break
            size += len(chunk)
            if size > limit and cut:
                chunks.append(chunk[: len(chunk) - (size - limit)])
                break
            if size > limit:
                raise SystemTwoResponseError(
                    f"the reply from {self.base_url} is larger than {limit} bytes"
                )
            chunks.append(chunk)
        return b"".join(chunks)

    def _parse_json(self, raw: bytes) -> tuple[str, Any, str | None, str | None, float | None]:
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: nested too deep
            raise SystemTwoResponseError(
                f"the reply from {self.base_url} is not JSON: {_error_excerpt(raw)!r}"
            ) from None
        if not isinstance(obj, dict):
            raise SystemTwoResponseError("the reply is not a JSON object")
        choices = obj.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise SystemTwoResponseError("the reply has no choices")
        msg = choices[0].get("message")
        content = msg.get("content") if isinstance(msg, dict) else None
        if not isinstance(content, str):
            raise SystemTwoResponseError("the reply's first choice has no message text")
        finish = choices[0].get("finish_reason")
        model = obj.get("model")
        return (
            content,
            obj.get("usage"),
            model if isinstance(model, str) else None,
            finish if isinstance(finish, str) else None,
            None,
        )

    def _read_stream(
        self, resp: http.client.HTTPResponse, sent: float
    ) -> tuple[str, Any, str | None, str | None, float | None]:
        def lines() -> Iterator[bytes]:
            size = 0
            while True:
                line = resp.readline(MAX_RESPONSE_BYTES)
                if not line:
                    return
                size += len(line)
                if size > MAX_RESPONSE_BYTES:
                    raise SystemTwoResponseError(
                        f"the stream from {self.base_url} is larger than {MAX_RESPONSE_BYTES} bytes"
                    )
                yield line

        return self._parse_events(lines(), sent)

    def _parse_events(
        self, lines: Iterator[bytes], sent: float
    ) -> tuple[str, Any, str | None, str | None, float | None]:
        parts: list[str] = []
        usage: Any = None
        model: str | None = None
        finish: str | None = None
        first: float | None = None
        done = False
        data: list[bytes] = []

        def dispatch(event: bytes) -> None:
            nonlocal usage, model, finish, first, done
            if event.strip() == b"[DONE]":
                done = True
                return
            try:
                obj = json.loads(event.decode("utf-8"))
            except (UnicodeDecodeError, ValueError, RecursionError):
                raise SystemTwoResponseError(
                    f"a streamed event is not JSON: {_error_excerpt(event)!r}"
                ) from None
            if not isinstance(obj, dict):
                raise SystemTwoResponseError("a streamed event is not a JSON object")
            if "error" in obj:
                raise SystemTwoResponseError(f"the stream reported an error: {obj['error']!r:.300}")
            if isinstance(obj.get("model"), str):
                model = obj["model"]
            if isinstance(obj.get("usage"), dict):
                usage = obj["usage"]
            choices = obj.get("choices")
            if choices is not None and not isinstance(choices, list):
                raise SystemTwoResponseError("a streamed event's choices are not a list")
            for ch in choices or ():
                index = ch.get("index", 0) if isinstance(ch, dict) else None
                if not isinstance(index, int) or isinstance(index, bool):
                    raise SystemTwoResponseError("a streamed choice has no integer index")
                if index != 0:  # another of n choices: only the first is read
                    continue
                delta = ch.get("delta")
                piece = delta.get("content") if isinstance(delta, dict) else None
                if isinstance(piece, str) and piece:
                    if first is None:
                        first = time.perf_counter() - sent
                    parts.append(piece)
                if isinstance(ch.get("finish_reason"), str):
                    finish = ch["finish_reason"]

        for line in lines:
            line = line.rstrip(b"\r\n")
            if not line:  # an event ends at a blank line
                if data:
                    dispatch(b"\n".join(data))
                    data = []
                if done:
                    break
                continue
            if line.startswith(b":"):  # an SSE comment (keep-alive)
                continue
            if line.startswith(b"data:"):
                data.append(line[5:].lstrip(b" "))
        if data and not done:
            dispatch(b"\n".join(data))
        if not done and finish is None:
            raise _Retry("connection", "the stream ended before its last event")
        return "".join(parts), usage, model, finish, first
