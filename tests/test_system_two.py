"""The OpenAI-compatible System-Two client over real HTTP, against jevmem.testing's fake server.

No network and no model: the fake server runs on loopback in this process and
misbehaves on demand (429, 5xx, malformed JSON, closed connections, slowness).
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections.abc import Iterator

import pytest

import jevmem
from jevmem.errors import (
    InvalidConfigError,
    InvalidInputError,
    InvalidTypeError,
    JevmemError,
    SystemTwoConnectionError,
    SystemTwoError,
    SystemTwoHTTPError,
    SystemTwoResponseError,
    SystemTwoTimeoutError,
)
from jevmem.system_two import ChatCompletionsClient, Completion, SystemTwo
from jevmem.testing import FakeChatServer, count_tokens

HELLO = [{"role": "user", "content": "Question: what does Maya play?\nMaya plays the cello."}]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeChatServer]:
    with FakeChatServer() as s:
        yield s


@pytest.fixture
def fake(server: FakeChatServer) -> FakeChatServer:
    server.script()  # nothing queued from an earlier test
    server._script.clear()
    server.requests.clear()
    server.headers.clear()
    return server


def client(s: FakeChatServer, **kw: object) -> ChatCompletionsClient:
    kw.setdefault("backoff_s", 0.001)
    return ChatCompletionsClient(s.base_url, "fake", **kw)  # type: ignore[arg-type]


def test_a_call_returns_text_tokens_and_latency(fake: FakeChatServer) -> None:
    c = client(fake, api_key="sk-test", max_tokens=64, temperature=0.0)
    assert isinstance(c, SystemTwo)
    got = c.complete(HELLO)
    assert got.text == "Maya plays the cello."
    assert got.model == "fake-model"
    assert got.prompt_tokens == count_tokens(HELLO[0]["content"])
    assert got.completion_tokens == count_tokens(got.text)
    assert got.total_tokens == got.prompt_tokens + got.completion_tokens
    assert got.latency_s > 0 and got.attempts == 1 and not got.streamed
    assert got.finish_reason == "stop"
    body = fake.requests[-1]
    assert body == {"model": "fake", "messages": HELLO, "temperature": 0.0, "max_tokens": 64}
    assert fake.headers[-1]["authorization"] == "Bearer sk-test"
    assert c.stats() == {
        "calls": 1,
        "failures": 0,
        "attempts": 1,
        "prompt_tokens": got.prompt_tokens,
        "completion_tokens": got.completion_tokens,
    }
    # the key never shows
    assert "sk-test" not in repr(c)


def test_per_call_cap_extra_body_headers_and_query_string(fake: FakeChatServer) -> None:
    c = ChatCompletionsClient(
        fake.base_url + "?api-version=2024-06-01",
        "fake",
        temperature=None,
        extra_body={"seed": 7},
        headers={"api-key": "azure-key"},
    )
    c.complete(HELLO, max_tokens=5)
    assert fake.requests[-1] == {"model": "fake", "messages": HELLO, "max_tokens": 5, "seed": 7}
    assert fake.headers[-1]["api-key"] == "azure-key"
    assert "authorization" not in fake.headers[-1]


def test_configuration_from_the_environment(
    fake: FakeChatServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for k in (
        "JEVMEM_S2_BASE_URL",
        "JEVMEM_S2_MODEL",
        "JEVMEM_S2_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_MODEL",
        "OPENAI_API_KEY",
    ):
        monkeypatch.delenv(k, raising=False)
    with pytest.raises(InvalidConfigError, match="JEVMEM_S2_MODEL"):
        ChatCompletionsClient()
    assert ChatCompletionsClient(model="m").base_url == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_MODEL", "openai-model")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    c = ChatCompletionsClient()
    assert (c.base_url, c.model) == ("http://127.0.0.1:9/v1", "openai-model")
    # ours win over OpenAI's; arguments win over both
    monkeypatch.setenv("JEVMEM_S2_BASE_URL", fake.base_url)
    monkeypatch.setenv("JEVMEM_S2_MODEL", "ours")
    monkeypatch.setenv("JEVMEM_S2_API_KEY", "sk-ours")
    c = ChatCompletionsClient()
    assert (c.base_url, c.model) == (fake.base_url, "ours")
    c.complete(HELLO)
    assert fake.headers[-1]["authorization"] == "Bearer sk-ours"
    assert fake.requests[-1]["model"] == "ours"
    assert ChatCompletionsClient(model="arg").model == "arg"


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        ({"base_url": "ftp://x/v1"}, InvalidConfigError),
        ({"base_url": "not a url"}, InvalidConfigError),
        ({"base_url": 3}, InvalidTypeError),
        ({"model": "  "}, InvalidConfigError),
        ({"timeout_s": 0}, InvalidConfigError),
        ({"timeout_s": float("inf")}, InvalidConfigError),
        ({"max_retries": -1}, InvalidConfigError),
        ({"max_retries": 1.5}, InvalidConfigError),
        ({"backoff_s": -1}, InvalidConfigError),
        ({"max_backoff_s": 0}, InvalidConfigError),
        ({"max_tokens": 0}, InvalidConfigError),
        ({"temperature": -0.1}, InvalidConfigError),
        ({"temperature": float("nan")}, InvalidConfigError),
    ],
)
def test_bad_configuration_is_refused(kw: dict[str, object], error: type[Exception]) -> None:
    args: dict[str, object] = {"base_url": "http://127.0.0.1:9/v1", "model": "m", **kw}
    with pytest.raises(error):
        ChatCompletionsClient(**args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ("hello", InvalidTypeError),
        ([], InvalidInputError),
        (["hello"], InvalidTypeError),
        ([{"role": "robot", "content": "x"}], InvalidInputError),
        ([{"role": "user", "content": 3}], InvalidTypeError),
        ([{"role": "user", "content": "\ud800"}], InvalidInputError),
    ],
)
def test_bad_messages_are_refused_before_sending(
    fake: FakeChatServer, messages: object, error: type[Exception]
) -> None:
    with pytest.raises(error):
        client(fake).complete(messages)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        client(fake).complete(HELLO, max_tokens=0)
    assert fake.requests == []


def test_429_and_5xx_are_retried(fake: FakeChatServer) -> None:
    fake.script("429", "500", "503")
    got = client(fake, max_retries=3).complete(HELLO)
    assert got.attempts == 4 and got.text == "Maya plays the cello."
    assert len(fake.requests) == 4


def test_retries_end_with_a_typed_error(fake: FakeChatServer) -> None:
    fake.script(*["500"] * 3)
    c = client(fake, max_retries=2)
    with pytest.raises(SystemTwoHTTPError) as info:
        c.complete(HELLO)
    assert info.value.status == 500 and info.value.attempts == 3
    assert isinstance(info.value, SystemTwoError) and isinstance(info.value, JevmemError)
    assert "fake 500" in str(info.value)
    assert len(fake.requests) == 3
    assert c.stats()["failures"] == 1


@pytest.mark.parametrize("status", ["400", "401"])
def test_other_4xx_are_never_retried(fake: FakeChatServer, status: str) -> None:
    fake.script(status, "ok")
    with pytest.raises(SystemTwoHTTPError) as info:
        client(fake, max_retries=5).complete(HELLO)
    assert info.value.status == int(status) and info.value.attempts == 1
    assert len(fake.requests) == 1


def test_retry_after_is_honoured(fake: FakeChatServer) -> None:
    fake.script("429:1")
    t0 = time.perf_counter()
    got = client(fake, backoff_s=0.001).complete(HELLO)
    assert time.perf_counter() - t0 >= 1.0
    assert got.attempts == 2


def test_a_retry_after_beyond_the_cap_ends_the_retries(fake: FakeChatServer) -> None:
    fake.script("429:120")
    t0 = time.perf_counter()
    with pytest.raises(SystemTwoHTTPError) as info:
        client(fake, max_backoff_s=5).complete(HELLO)
    assert time.perf_counter() - t0 < 2
    assert info.value.status == 429 and info.value.retry_after_s == pytest.approx(120)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("behaviour", ["malformed", "no_choices"])
def test_a_malformed_reply_is_a_response_error_not_retried(
    fake: FakeChatServer, behaviour: str
) -> None:
    fake.script(behaviour, "ok")
    with pytest.raises(SystemTwoResponseError):
        client(fake, max_retries=3).complete(HELLO)
    assert len(fake.requests) == 1


@pytest.mark.parametrize("behaviour", ["close", "truncate"])
def test_a_broken_connection_is_retried(fake: FakeChatServer, behaviour: str) -> None:
    fake.script(behaviour)
    got = client(fake).complete(HELLO)
    assert got.attempts == 2 and got.text == "Maya plays the cello."
    fake.script(*[behaviour] * 3)
    with pytest.raises(SystemTwoConnectionError) as info:
        client(fake, max_retries=2).complete(HELLO)
    assert isinstance(info.value, ConnectionError)
    assert info.value.attempts == 3


def test_an_unreachable_endpoint_raises_after_the_retries() -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = ChatCompletionsClient(f"http://127.0.0.1:{port}/v1", "m", max_retries=2, backoff_s=0.001)
    with pytest.raises(SystemTwoConnectionError) as info:
        c.complete(HELLO)
    assert info.value.attempts == 3


def test_the_timeout_bounds_each_attempt(fake: FakeChatServer) -> None:
    fake.script("slow:1.5")
    t0 = time.perf_counter()
    with pytest.raises(SystemTwoTimeoutError) as info:
        client(fake, timeout_s=0.3, max_retries=0).complete(HELLO)
    assert time.perf_counter() - t0 < 1.2
    assert isinstance(info.value, TimeoutError) and info.value.attempts == 1
    # a slow attempt is retried like a lost connection
    fake.script("slow:1.5")
    got = client(fake, timeout_s=0.3, max_retries=1).complete(HELLO)
    assert got.attempts == 2


def test_backoff_grows_and_is_capped() -> None:
    c = ChatCompletionsClient("http://127.0.0.1:9/v1", "m", backoff_s=0.5, max_backoff_s=3, seed=1)
    for attempt, full in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (9, 3.0)]:
        waits = [c._backoff(attempt) for _ in range(50)]
        assert all(full / 2 <= w <= full for w in waits)
        assert len(set(waits)) > 1  # jittered


def test_streaming_gives_the_same_text_and_the_usage(fake: FakeChatServer) -> None:
    plain = client(fake).complete(HELLO)
    streamed = client(fake, stream=True).complete(HELLO)
    assert streamed.text == plain.text and streamed.streamed
    assert (streamed.prompt_tokens, streamed.completion_tokens) == (
        plain.prompt_tokens,
        plain.completion_tokens,
    )
    assert streamed.first_token_s is not None and streamed.first_token_s <= streamed.latency_s
    assert fake.requests[-1]["stream"] is True
    assert fake.requests[-1]["stream_options"] == {"include_usage": True}
    no_usage = client(fake, stream=True, stream_usage=False).complete(HELLO)
    assert no_usage.text == plain.text and no_usage.prompt_tokens is None
    # a stream that stops before its end is a broken connection: retried
    fake.script("stall_stream")
    again = client(fake, stream=True).complete(HELLO)
    assert again.text == plain.text and again.attempts == 2


def test_concurrent_calls_from_threads(fake: FakeChatServer) -> None:
    c = client(fake)
    out: list[Completion] = []
    lock = threading.Lock()

    def work() -> None:
        for _ in range(5):
            got = c.complete(HELLO)
            with lock:
                out.append(got)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(out) == 30 and {g.text for g in out} == {"Maya plays the cello."}
    assert c.stats()["calls"] == 30
    c.close()
    assert c.complete(HELLO).text == "Maya plays the cello."  # reconnects after close


def test_keep_alive_survives_a_server_side_close(fake: FakeChatServer) -> None:
    """A kept-alive connection the server dropped is reopened, not counted as a retry."""
    c = client(fake, max_retries=0)
    c.complete(HELLO)
    conn = c._local.conn
    assert conn.sock is not None
    conn.sock.shutdown(socket.SHUT_RDWR)  # as if the server closed it while idle
    assert c.complete(HELLO).attempts == 1


def test_the_http_stack_is_not_imported_by_import_jevmem() -> None:
    import subprocess

    code = (
        "import sys, jevmem, jevmem.system_two, jevmem.answering; "
        "print(json.dumps([m for m in ('http.client', 'ssl') if m in sys.modules]))"
    )
    out = subprocess.run(
        [sys.executable, "-c", "import json; " + code],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert json.loads(out) == []
    assert "ChatCompletionsClient" in jevmem.__all__


def _post_and_hang_up(server: FakeChatServer) -> None:
    """A request whose client resets the connection before the reply is written."""
    host, port = server._httpd.server_address[:2]
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    s = socket.create_connection((str(host), int(port)))
    s.sendall(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    s.close()  # linger 0: a reset, so the server's write fails


def test_a_client_that_hangs_up_prints_nothing_but_a_broken_reply_does(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with FakeChatServer() as s:
        s.script("slow:0.3")
        _post_and_hang_up(s)
        time.sleep(0.8)
        assert "Traceback" not in capfd.readouterr().err

    def broken(messages: object) -> str:
        raise RuntimeError("a bug in the reply function")

    with FakeChatServer(reply=broken) as s:
        with pytest.raises(jevmem.JevmemError):
            client(s, max_retries=0).complete(HELLO)
        time.sleep(0.2)
        assert "RuntimeError: a bug in the reply function" in capfd.readouterr().err


# ---- servers that close, trickle or nest too deep ----------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_a_server_that_closes_after_each_reply(stream: bool) -> None:
    """Connection: close after every reply: each reply is read once, not resent."""
    with FakeChatServer(keep_alive=False) as s:
        c = client(s, stream=stream, max_retries=3)
        for _ in range(3):
            got = c.complete(HELLO)
            assert got.text == "Maya plays the cello." and got.attempts == 1
        assert len(s.requests) == 3
        assert c.stats() == {
            "calls": 3,
            "failures": 0,
            "attempts": 3,
            "prompt_tokens": 3 * got.prompt_tokens,  # type: ignore[operator]
            "completion_tokens": 3 * got.completion_tokens,  # type: ignore[operator]
        }


def test_an_http_1_0_server_is_read() -> None:
    """Python's own http.server answers in HTTP/1.0 and closes after the reply."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    posts: list[bytes] = []

    class Handler(BaseHTTPRequestHandler):  # protocol_version stays "HTTP/1.0"
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            posts.append(self.rfile.read(int(self.headers["Content-Length"])))
            body = json.dumps({"choices": [{"message": {"content": "Ines."}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/v1"
        c = ChatCompletionsClient(url, "m", backoff_s=0.001)
        assert [c.complete(HELLO).attempts for _ in range(2)] == [1, 1]
        assert len(posts) == 2
    finally:
        srv.shutdown()
        srv.server_close()


def test_streamed_replies_on_one_kept_alive_client_are_sent_once(fake: FakeChatServer) -> None:
    c = client(fake, stream=True, max_retries=0)
    assert [c.complete(HELLO).text for _ in range(3)] == ["Maya plays the cello."] * 3
    assert len(fake.requests) == 3


@pytest.mark.parametrize(
    ("behaviour", "stream"),
    [
        ("trickle:0.02", False),  # slow status line and headers
        ("trickle_body:0.05", False),  # blank lines, then the body, a byte at a time
        ("trickle_body:0.05", True),  # a streamed line that never ends in time
    ],
)
def test_the_timeout_bounds_an_attempt_while_bytes_trickle_in(
    fake: FakeChatServer, behaviour: str, stream: bool
) -> None:
    fake.script(behaviour)
    t0 = time.perf_counter()
    with pytest.raises(SystemTwoTimeoutError) as info:
        client(fake, timeout_s=0.5, max_retries=0, stream=stream).complete(HELLO)
    assert time.perf_counter() - t0 < 0.5 + 0.4
    assert info.value.attempts == 1
    # a trickle that ends in time is a reply
    fake.script(behaviour.split(":")[0] + ":0.0005")
    got = client(fake, timeout_s=10, max_retries=0, stream=stream).complete(HELLO)
    assert got.text == "Maya plays the cello." and got.attempts == 1


@pytest.mark.parametrize(
    ("behaviour", "stream", "error"),
    [
        ("nested", False, SystemTwoResponseError),
        ("nested", True, SystemTwoResponseError),
        ("nested:500", False, SystemTwoHTTPError),
        ("nested:400", False, SystemTwoHTTPError),
    ],
)
def test_a_deeply_nested_reply_is_a_typed_error(
    fake: FakeChatServer, behaviour: str, stream: bool, error: type[Exception]
) -> None:
    fake.script(behaviour)
    with pytest.raises(error):
        client(fake, max_retries=0, stream=stream).complete(HELLO)


def _scripted_server(replies: list[tuple[int, str, bytes]]) -> tuple[object, str]:
    """A loopback HTTP/1.0 server answering each POST with the next (status,
    content type, body) of ``replies``; returns it and its base URL."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    queue = list(replies)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            status, ctype, body = queue.pop(0)
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"


@pytest.mark.parametrize("page_bytes", [1_000, 70_000, 2_000_000])
def test_a_5xx_with_a_large_error_page_is_retried_as_any_5xx(page_bytes: int) -> None:
    """A proxy's error page can be large: the status decides, the page is
    read in part for the message."""
    ok = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
    page = b"<html>" + b"x" * page_bytes + b"</html>"
    srv, url = _scripted_server([(503, "text/html", page), (200, "application/json", ok)])
    try:
        got = ChatCompletionsClient(url, "m", backoff_s=0.001).complete(HELLO)
        assert (got.text, got.attempts) == ("hi", 2)
    finally:
        srv.shutdown()  # type: ignore[attr-defined]
        srv.server_close()  # type: ignore[attr-defined]
    srv, url = _scripted_server([(503, "text/html", page)] * 2)
    try:
        with pytest.raises(SystemTwoHTTPError) as err:
            ChatCompletionsClient(url, "m", backoff_s=0.001, max_retries=1).complete(HELLO)
        assert err.value.status == 503
    finally:
        srv.shutdown()  # type: ignore[attr-defined]
        srv.server_close()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "event",
    [{"choices": 5}, {"choices": "abc"}, {"choices": [{"index": [0], "delta": {"content": "x"}}]}],
)
def test_a_streamed_event_of_the_wrong_shape_is_a_counted_response_error(event: object) -> None:
    body = f"data: {json.dumps(event)}\n\ndata: [DONE]\n\n".encode()
    srv, url = _scripted_server([(200, "text/event-stream", body)])
    try:
        c = ChatCompletionsClient(url, "m", backoff_s=0.001, stream=True)
        with pytest.raises(SystemTwoResponseError):
            c.complete(HELLO)
        assert c.stats()["calls"] == 1 and c.stats()["failures"] == 1
    finally:
        srv.shutdown()  # type: ignore[attr-defined]
        srv.server_close()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "kw",
    [
        {"base_url": "http://127.0.0.1:99999/v1"},
        {"base_url": "http://[::1/v1"},
        {"base_url": "http://127.0.0.1:9/v\u00fc1"},
        {"base_url": "http://127.0.0.1:9/v 1"},
        {"api_key": "abc\ndef"},
        {"api_key": "cl\u00e9"},
        {"headers": {"X-Note": "a\r\nInjected: 1"}},
        {"headers": {"Bad:Name": "v"}},
    ],
)
def test_settings_no_request_can_carry_are_refused_when_the_client_is_made(
    kw: dict[str, object],
) -> None:
    args: dict[str, object] = {"base_url": "http://127.0.0.1:9/v1", "model": "m", **kw}
    with pytest.raises(InvalidConfigError):
        ChatCompletionsClient(**args)  # type: ignore[arg-type]
