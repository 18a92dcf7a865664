"""A fake OpenAI-compatible chat server, for testing System-Two integrations offline.

Internal, not part of the stable API: what it answers and how it misbehaves may
change in any release. It exists so that code calling a model through
`jevmem.system_two.ChatCompletionsClient` (``Memory.answer``, summaries, the
MCP ``answer`` tool, ``jevmem serve`` with ``JEVMEM_S2_*``) can be tested, and
benchmarked apart from the model, with no network and no key: jevmem's own
tests and ``bench/`` use it, and so may yours.

The server listens on loopback (an ephemeral port, a background thread).

It answers ``POST /v1/chat/completions`` deterministically (JSON, or
server-sent events when the request streams), counts tokens in ``usage`` as
``len(re.findall(r"\\w+|[^\\w\\s]", text))``, records every request, and,
when told, misbehaves: a script of behaviours is consumed one per request
(then the default, ``"ok"``)::

    from jevmem.system_two import ChatCompletionsClient
    from jevmem.testing import FakeChatServer

    with FakeChatServer() as s:
        s.script("429", "500", "ok")       # two failures, then an answer
        client = ChatCompletionsClient(s.base_url, "fake")

Behaviours: ``"ok"``; ``"slow:<s>"`` (answer after ``s`` seconds);
``"429"`` / ``"429:<retry-after>"``; ``"500"``, ``"503"``; ``"400"``,
``"401"``; ``"malformed"`` (200 with a body that is not JSON);
``"no_choices"`` (200, JSON without choices); ``"close"`` (close the
connection without answering); ``"truncate"`` (announce a longer body than
is sent, then close); ``"stall_stream"`` (a streamed reply that stops after
its first event and closes); ``"nested"`` / ``"nested:<status>"`` (a JSON
body, or one streamed event, nested 30,000 levels deep, with status 200 or
``<status>``); ``"trickle:<s>"`` (the whole reply, status line and headers
included, one byte every ``s`` seconds, then close) and
``"trickle_body:<s>"`` (the headers at once, then the body, or the stream,
one byte every ``s`` seconds; a JSON body starts with blank lines, as
keep-alive proxies send).

``FakeChatServer(keep_alive=False)`` answers every request with
``Connection: close`` and closes the connection after the reply, as
HTTP/1.0 servers (Python's own ``http.server``) do.

The default reply (`default_reply`) stands in for a model: for a question
over numbered notes (``[E1] ...``), it answers with the note sharing the most
words with the question and cites it; for a judging request (lines
``Gold answer:`` and ``Candidate answer:``), ``CORRECT`` when the two share
at least half of the gold answer's words (a gold answer "(none..." wants a
"don't know"), else ``WRONG``; otherwise, the line of the prompt sharing the
most words with its last line. Words match on their first five letters.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeChatServer", "Reply", "count_tokens", "default_reply"]

_TOKEN = re.compile(r"\w+|[^\w\s]")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    "a an the of to in on at for and or is are was were be did do does what when who "
    "which how why where with from about by as it its this that has have had".split()
)

Reply = Callable[[list[dict[str, Any]]], str]


def count_tokens(text: str) -> int:
    """The token count the server reports in ``usage``: words and punctuation marks."""
    return len(_TOKEN.findall(text))


def _words(text: str) -> set[str]:
    # the first five letters stand for the word: "painted" matches "paint"
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in _STOP}


def default_reply(messages: list[dict[str, Any]]) -> str:
    user = str(messages[-1].get("content", "")) if messages else ""
    gold = re.search(r"^Gold answer:\s*(.*)$", user, re.M)
    cand = re.search(r"^Candidate answer:\s*(.*)$", user, re.M)
    if gold and cand:
        if gold.group(1).startswith("(none"):  # nothing to find: declining is right
            return "CORRECT" if "know" in cand.group(1).lower() else "WRONG"
        g, c = _words(gold.group(1)), _words(cand.group(1))
        return "CORRECT" if g and len(g & c) * 2 >= len(g) else "WRONG"
    q = re.search(r"^Question:\s*(.*)$", user, re.M)
    question = q.group(1) if q else user.strip().splitlines()[-1] if user.strip() else ""
    qw = _words(question)
    notes = re.findall(r"^\[(E\d+)\][^\n]*\n([^\n]*)", user, re.M)
    if notes:
        best = max(notes, key=lambda n: (len(qw & _words(n[1])), -int(n[0][1:])))
        if not qw & _words(best[1]):
            return "I don't know.\nSOURCES: none"
        return f"{best[1]}\nSOURCES: {best[0]}"
    lines = [
        ln
        for ln in user.splitlines()
        if ln.strip() and not ln.startswith("Question:") and ln.strip() != question.strip()
    ]
    if not lines:
        return "I don't know."
    return max(lines, key=lambda ln: len(qw & _words(ln)))


class _QuietServer(ThreadingHTTPServer):
    """socketserver prints a traceback when a handler raises; a client that
    hangs up first (the timeout tests do it on purpose) is not an error."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (BrokenPipeError, ConnectionResetError)):
            return
        super().handle_error(request, client_address)


class FakeChatServer:
    """The server; ``base_url`` ends in ``/v1``. A context manager."""

    def __init__(
        self, reply: Reply = default_reply, model: str = "fake-model", *, keep_alive: bool = True
    ) -> None:
        self.reply = reply
        self.model = model
        self.keep_alive = keep_alive
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._script: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real endpoints

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                server._handle(self)

            def end_headers(self) -> None:
                if not server.keep_alive:  # and send_header closes after the reply
                    self.send_header("Connection", "close")
                super().end_headers()

        self._httpd = _QuietServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)
        self._thread.start()

    @property
    def base_url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def script(self, *behaviours: str) -> None:
        """Queue behaviours for the next requests, in order."""
        with self._lock:
            self._script.extend(behaviours)

    def _next(self) -> str:
        with self._lock:
            return self._script.pop(0) if self._script else "ok"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> FakeChatServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- one request --------------------------------------------------------

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        n = int(h.headers.get("Content-Length") or 0)
        raw = h.rfile.read(n)
        behaviour = self._next()
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with self._lock:
            self.requests.append(body if isinstance(body, dict) else {"_raw": raw})
            self.headers.append({k.lower(): v for k, v in h.headers.items()})
        if h.path.split("?")[0] != "/v1/chat/completions":
            return self._send(h, 404, {"error": {"message": f"no route {h.path}"}})
        if behaviour.startswith("slow:"):
            time.sleep(float(behaviour.split(":", 1)[1]))
            behaviour = "ok"
        if behaviour.startswith("nested"):
            status = int(behaviour.split(":", 1)[1]) if ":" in behaviour else 200
            deep = b'{"choices": ' + b"[" * 30_000 + b"]" * 30_000 + b"}"
            if status == 200 and isinstance(body, dict) and body.get("stream"):
                return self._send_raw(h, 200, b"data: " + deep + b"\n\n", "text/event-stream")
            return self._send_raw(h, status, deep, "application/json")
        if behaviour == "close":
            h.close_connection = True
            h.connection.close()
            return None
        if behaviour.startswith("429"):
            extra = {}
            if ":" in behaviour:
                extra["Retry-After"] = behaviour.split(":", 1)[1]
            return self._send(h, 429, {"error": {"message": "rate limited"}}, extra)
        if behaviour in ("400", "401", "500", "503"):
            return self._send(h, int(behaviour), {"error": {"message": f"fake {behaviour}"}})
        if behaviour == "malformed":
            return self._send_raw(h, 200, b'{"choices": [ this is not json', "application/json")
        if behaviour == "no_choices":
            return self._send(h, 200, {"id": "x", "object": "chat.completion"})
        if behaviour == "truncate":
            h.send_response(200)
            h.send_header("Content-Type", "application/json")
            h.send_header("Content-Length", "5000")
            h.end_headers()
            h.wfile.write(b'{"choices": [')
            h.wfile.flush()
            h.close_connection = True
            h.connection.close()
            return None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return self._send(h, 400, {"error": {"message": "messages missing"}})
        messages = body["messages"]
        text = self.reply(messages)
        prompt_tokens = sum(count_tokens(str(m.get("content", ""))) for m in messages)
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": count_tokens(text),
            "total_tokens": prompt_tokens + count_tokens(text),
        }
        if behaviour.startswith("trickle"):
            return self._trickle(h, behaviour, text, usage, body)
        if body.get("stream"):
            return self._stream(h, text, usage, body, stall=behaviour == "stall_stream")
        return self._send(h, 200, self._completion(text, usage))

    def _completion(self, text: str, usage: dict[str, int]) -> dict[str, Any]:
        return {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": usage,
        }

    def _trickle(
        self,
        h: BaseHTTPRequestHandler,
        behaviour: str,
        text: str,
        usage: dict[str, int],
        body: dict[str, Any],
    ) -> None:
        """The reply written a byte at a time (``trickle:<s>``, ``trickle_body:<s>``)."""
        kind, _, every = behaviour.partition(":")
        pause = float(every or 0.05)
        if body.get("stream"):
            data = b"".join(
                f"data: {json.dumps(e)}\n\n".encode()
                for e in (
                    {"choices": [{"index": 0, "delta": {"content": text}}]},
                    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                )
            )
            head = "Content-Type: text/event-stream\r\n"
        else:
            data = b"\n" * 20 + json.dumps(self._completion(text, usage)).encode()
            head = f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
        head = f"HTTP/1.1 200 OK\r\n{head}X-Fake: trickle\r\nConnection: close\r\n\r\n"
        h.close_connection = True
        at_once, dripped = (
            (b"", head.encode() + data) if kind == "trickle" else (head.encode(), data)
        )
        try:
            h.wfile.write(at_once)
            h.wfile.flush()
            for i in range(len(dripped)):
                h.wfile.write(dripped[i : i + 1])
                h.wfile.flush()
                time.sleep(pause)
        except OSError:  # the client gave up
            pass

    def _send(
        self,
        h: BaseHTTPRequestHandler,
        status: int,
        obj: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> None:
        self._send_raw(h, status, json.dumps(obj).encode(), "application/json", headers)

    @staticmethod
    def _send_raw(
        h: BaseHTTPRequestHandler,
        status: int,
        data: bytes,
        ctype: str,
        headers: dict[str, str] | None = None,
    ) -> None:
        h.send_response(status)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(data)
        h.wfile.flush()

    def _stream(
        self,
        h: BaseHTTPRequestHandler,
        text: str,
        usage: dict[str, int],
        body: dict[str, Any],
        stall: bool,
    ) -> None:
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()

        def event(obj: dict[str, Any] | str) -> None:
            data = obj if isinstance(obj, str) else json.dumps(obj)
            payload = f"data: {data}\n\n".encode()
            h.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            h.wfile.flush()

        pieces: Sequence[str] = re.findall(r"\S+\s*|\s+", text) or [""]
        for i, piece in enumerate(pieces):
            event(
                {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion.chunk",
                    "model": self.model,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"content": piece} if piece else {"role": "assistant"},
                            "finish_reason": None,
                        }
                    ],
                }
            )
            if i == 0:
                comment = b": keep-alive\n\n"
                h.wfile.write(f"{len(comment):x}\r\n".encode() + comment + b"\r\n")
            if stall:
                h.close_connection = True
                h.connection.close()
                return
        event(
            {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "model": self.model,
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            }
        )
        if (body.get("stream_options") or {}).get("include_usage"):
            event({"id": "chatcmpl-fake", "choices": [], "usage": usage, "model": self.model})
        event("[DONE]")
        h.wfile.write(b"0\r\n\r\n")
        h.wfile.flush()
