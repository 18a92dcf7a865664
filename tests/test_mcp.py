"""`jevmem mcp` end to end, through the MCP SDK's own client, over both
transports: stdio (the server as a subprocess) and streamable HTTP on loopback.

Each transport runs one scenario against a fresh directory memory: remember,
recall (and a scoped recall that must not see another scope), list pages with
a cursor, bad input (tool errors that change nothing), forget, the stats
resource; then the server stops and the directory is reopened to check what
it holds.
"""

from __future__ import annotations

import calendar
import json
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent, TextResourceContents

from jevmem import ChatCompletionsClient, HashEmbedder, LocalController, Memory
from jevmem.errors import InvalidInputError
from jevmem.integrations.mcp import build_server, can_answer, parse_http, parse_memory_spec
from jevmem.testing import FakeChatServer

SERVER = [sys.executable, "-m", "jevmem", "mcp", "--embedder", "hash-64"]
#: what names a System-Two model in the environment (see jevmem.system_two)
_S2_VARS = ("JEVMEM_S2_MODEL", "OPENAI_MODEL", "JEVMEM_S2_BASE_URL", "OPENAI_BASE_URL")


def _text(r: CallToolResult) -> str:
    return " ".join(c.text for c in r.content if isinstance(c, TextContent))


async def _ok(c: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    r = await c.call_tool(tool, args)
    assert not r.is_error, _text(r)
    assert isinstance(r.structured_content, dict)
    return dict(r.structured_content)


async def _stats(c: Client, name: str) -> dict[str, Any]:
    got = await c.read_resource(f"jevmem://memory/{name}/stats")
    (content,) = got.contents
    assert isinstance(content, TextResourceContents)
    stats: dict[str, Any] = json.loads(content.text)
    return stats


async def _all_ids(c: Client, limit: int, **selection: Any) -> list[int]:
    """Every id `list` returns, page by page (each page at most `limit` long)."""
    ids: list[int] = []
    cursor = None
    for _ in range(100):
        page = await _ok(c, "list", {"limit": limit, "cursor": cursor, **selection})
        assert len(page["items"]) <= limit
        ids += [it["id"] for it in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return ids
    raise AssertionError("list never ended")


async def scenario(c: Client, name: str) -> dict[str, int]:
    """The checks both transports must pass; returns the ids it kept."""
    tools = {t.name: t for t in (await c.list_tools()).tools}
    assert set(tools) == {"remember", "recall", "forget", "list"}  # no System Two here
    props = tools["remember"].input_schema["properties"]
    assert props["text"]["type"] == "string" and props["text"]["description"]
    assert tools["recall"].input_schema["properties"]["k"]["maximum"] == 100
    assert tools["recall"].output_schema is not None

    cello = await _ok(
        c,
        "remember",
        {
            "text": "Maya started cello lessons with Ines on Tuesday",
            "speaker": "Maya",
            "timestamp": "2024-03-01T10:00:00Z",
            "scope": {"user": "u1"},
            "metadata": {"topic": "music", "priority": 2},
            "key": "note-1",
        },
    )
    assert cello == {"memory": name, "id": cello["id"], "stored": True}
    again = await _ok(
        c,
        "remember",
        {
            "text": "Maya started cello lessons with Ines on Tuesday",
            "scope": {"user": "u1"},
            "key": "note-1",
        },
    )
    assert again["id"] == cello["id"] and again["stored"] is False
    garden = await _ok(
        c,
        "remember",
        {"text": "Maya planted tomatoes in the garden", "speaker": "Maya", "scope": {"user": "u1"}},
    )
    pizza = await _ok(
        c,
        "remember",
        {
            "text": "Tom ordered a cello-shaped pizza for the party",
            "speaker": "Tom",
            "timestamp": 1709300000,
            "scope": {"user": "u2"},
        },
    )
    ids = {"cello": cello["id"], "garden": garden["id"], "pizza": pizza["id"]}
    assert len(set(ids.values())) == 3

    # recall finds it, with provenance, times, scores and a trace
    got = await _ok(c, "recall", {"query": "who teaches Maya the cello?", "k": 5})
    top = got["evidence"][0]
    assert top["id"] == ids["cello"]
    assert top["speaker"] == "Maya" and top["provenance"]["speaker"] == "Maya"
    assert top["time"] == "2024-03-01T10:00:00Z" and top["timestamp"] == 1709287200
    assert top["scope"] == {"user": "u1"} and top["metadata"] == {"topic": "music", "priority": 2}
    assert 0.0 < top["score"] <= 1.0
    trace = got["trace"]
    assert trace["mode"] == "full" and trace["stop_reason"] and trace["elapsed_ms"] > 0
    assert got["full_trace"] is None

    # a scoped recall never sees another scope's observations
    u2 = await _ok(c, "recall", {"query": "Maya cello lessons with Ines", "scope": {"user": "u2"}})
    assert [e["id"] for e in u2["evidence"]] == [ids["pizza"]]
    u1 = await _ok(c, "recall", {"query": "cello pizza party", "scope": {"user": "u1"}})
    assert ids["pizza"] not in {e["id"] for e in u1["evidence"]}
    assert all(e["scope"] == {"user": "u1"} for e in u1["evidence"])
    music = await _ok(c, "recall", {"query": "Maya", "filter": {"topic": "music"}})
    assert [e["id"] for e in music["evidence"]] == [ids["cello"]]

    # list pages with a cursor: every id exactly once
    assert sorted(await _all_ids(c, 1)) == sorted(ids.values())
    assert sorted(await _all_ids(c, 2, scope={"user": "u1"})) == sorted(
        [ids["cello"], ids["garden"]]
    )

    # bad input: a tool error with the reason, and nothing changes
    before = await _stats(c, name)
    bad: list[tuple[str, dict[str, Any], str]] = [
        ("remember", {"text": "   "}, "InvalidInputError"),
        ("remember", {"text": "x", "metadata": {"nested": {"a": 1}}}, "metadata"),
        ("remember", {"text": "x", "timestamp": "not a time"}, "timestamp"),
        ("remember", {"text": "x", "scope": {"user": 7}}, "scope"),
        ("recall", {"query": "cello", "k": "3"}, "k"),
        ("recall", {"query": "cello", "k": 0}, "k"),
        ("recall", {"query": "cello", "filter": {"$bogus": 1}}, "InvalidInputError"),
        ("list", {"cursor": "not-a-cursor"}, "cursor"),
        ("forget", {"ids": [10_000]}, "NodeNotFoundError"),
        ("forget", {"ids": [ids["cello"], 10_000]}, "NodeNotFoundError"),
        ("forget", {"ids": [ids["cello"]], "scope": {"user": "u1"}}, "InvalidInputError"),
        ("forget", {}, "InvalidInputError"),
        ("recall", {"query": "cello", "memory": "nope"}, "no memory named"),
        ("no_such_tool", {}, "no_such_tool"),
    ]
    for tool, args, why in bad:
        r = await c.call_tool(tool, args)
        assert r.is_error, (tool, args)
        assert why in _text(r), (tool, args, _text(r))
    assert await _stats(c, name) == before
    assert sorted(await _all_ids(c, 10)) == sorted(ids.values())

    # forget removes it from every read
    gone = await _ok(c, "forget", {"ids": [ids["pizza"]]})
    assert gone == {"memory": name, "removed": 1}
    after = await _ok(c, "recall", {"query": "cello-shaped pizza party", "k": 10})
    assert ids["pizza"] not in {e["id"] for e in after["evidence"]}
    assert (await _ok(c, "recall", {"query": "pizza", "scope": {"user": "u2"}}))["evidence"] == []
    stats = await _stats(c, name)
    assert stats["observations"] == stats["nodes"] == 2 and stats["durable"] is True
    del ids["pizza"]
    return ids


def _check_directory(path: Path, kept: dict[str, int]) -> None:
    """What the server wrote is in the directory after it stopped."""
    m = Memory.open(path, HashEmbedder(64), LocalController())
    try:
        assert sorted(n.id for n in m.list()[0]) == sorted(kept.values())
        assert m.get(kept["cello"]).metadata == {"topic": "music", "priority": 2}
    finally:
        m.close()


def _run(fn: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(120):
            await fn()

    anyio.run(bounded)


def test_stdio_end_to_end(tmp_path: Path) -> None:
    mem = tmp_path / "agent"
    params = StdioServerParameters(
        command=SERVER[0], args=[*SERVER[1:], "--memory", f"agent={mem}"], cwd=str(tmp_path)
    )
    kept: dict[str, int] = {}

    async def main() -> None:
        async with Client(params, read_timeout_seconds=60) as c:
            kept.update(await scenario(c, "agent"))

    _run(main)
    _check_directory(mem, kept)


@asynccontextmanager
async def _http_server(
    args: list[str], env: dict[str, str] | None = None, host: str = "127.0.0.1"
) -> AsyncIterator[tuple[str, subprocess.Popen[str]]]:
    proc = subprocess.Popen(
        [*SERVER, *args, "--http", f"{host}:0"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        # no System-Two model from the caller's environment: the tool list is fixed
        env={k: v for k, v in {**os.environ, **(env or {})}.items() if k not in _S2_VARS},
    )
    try:
        assert proc.stderr is not None
        line = await anyio.to_thread.run_sync(proc.stderr.readline)
        assert "listening on " in line, line
        yield line.rsplit(" ", 1)[1].strip(), proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def test_streamable_http_end_to_end(tmp_path: Path) -> None:
    mem = tmp_path / "notes"
    kept: dict[str, int] = {}
    codes: list[int] = []

    async def main() -> None:
        async with _http_server(["--memory", str(mem)]) as (url, proc):
            assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp")
            async with Client(url, read_timeout_seconds=60) as c:
                kept.update(await scenario(c, "notes"))
            # a second client sees what the first wrote
            async with Client(url, read_timeout_seconds=60) as c:
                assert (await _stats(c, "notes"))["observations"] == 2
            proc.send_signal(signal.SIGINT)
            codes.append(await anyio.to_thread.run_sync(lambda: proc.wait(timeout=30)))

    _run(main)
    assert codes == [0]  # stopped cleanly: the memory was closed (checkpointed)
    _check_directory(mem, kept)


def test_http_bearer_token(tmp_path: Path) -> None:
    seen: list[str] = []

    async def main() -> None:
        args = ["--memory", str(tmp_path / "m"), "--token-env", "JEVMEM_TEST_TOKEN"]
        async with _http_server(args, {"JEVMEM_TEST_TOKEN": "s3cret"}) as (url, _):
            for headers in ({}, {"Authorization": "Bearer wrong"}):
                async with httpx2.AsyncClient(headers=headers) as http:
                    refused = await http.post(
                        url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}
                    )
                    assert refused.status_code == 401
            good = httpx2.AsyncClient(headers={"Authorization": "Bearer s3cret"})
            async with Client(streamable_http_client(url, http_client=good)) as c:
                seen.append((await _ok(c, "remember", {"text": "the token let me in"}))["memory"])

    _run(main)
    assert seen == ["m"]


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2"])
def test_a_loopback_bind_refuses_other_hosts_and_origins(tmp_path: Path, host: str) -> None:
    """DNS rebinding: the SDK guarded three spellings of loopback only; a bind
    to 127.0.0.2 took any Host and Origin, and warned of nothing."""
    codes: dict[str, int] = {}
    ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    accept = {"Accept": "application/json, text/event-stream"}

    async def main() -> None:
        async with _http_server(["--memory", str(tmp_path / "m")], host=host) as (url, _):
            port = url.rsplit(":", 1)[1].split("/")[0]
            async with httpx2.AsyncClient() as http:
                for name, headers in (
                    ("host", {"Host": "evil.example"}),
                    ("origin", {"Host": f"{host}:{port}", "Origin": "http://evil.example"}),
                    ("own", {"Host": f"{host}:{port}", "Origin": f"http://{host}:{port}"}),
                ):
                    r = await http.post(url, json=ping, headers={**accept, **headers})
                    codes[name] = r.status_code

    _run(main)
    assert codes["host"] == 421 and codes["origin"] == 403, codes
    assert codes["own"] not in (421, 403), codes


def test_several_memories_need_a_name(tmp_path: Path) -> None:
    a = Memory(HashEmbedder(64), LocalController())
    b = Memory(HashEmbedder(64), LocalController())
    server = build_server({"a": a, "b": b})

    async def main() -> None:
        async with Client(server) as c:
            r = await c.call_tool("remember", {"text": "Maya plays the cello"})
            assert r.is_error and "several memories" in _text(r)
            await _ok(c, "remember", {"text": "Maya plays the cello", "memory": "b"})
            uris = sorted(str(r.uri) for r in (await c.list_resources()).resources)
            assert uris == ["jevmem://memory/a/stats", "jevmem://memory/b/stats"]
            assert (await _stats(c, "a"))["observations"] == 0
            assert (await _stats(c, "b"))["observations"] == 1

    _run(main)
    assert (len(a), len(b)) == (0, 1)


def test_answer_tool_only_when_a_model_is_set(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in _S2_VARS:
        monkeypatch.delenv(var, raising=False)
    plain = Memory(HashEmbedder(64), LocalController())
    assert not can_answer(plain)
    monkeypatch.setenv("JEVMEM_S2_MODEL", "from-the-environment")
    assert can_answer(plain)  # the environment names one
    monkeypatch.delenv("JEVMEM_S2_MODEL")
    with FakeChatServer() as fake:
        plain.system_two = ChatCompletionsClient(fake.base_url, "fake")
        assert can_answer(plain)
    plain.system_two = None

    async def main() -> None:
        async with Client(build_server({"m": plain})) as c:
            assert "answer" not in {t.name for t in (await c.list_tools()).tools}

    _run(main)


def test_answer_end_to_end_over_stdio(tmp_path: Path) -> None:
    """The answer tool through a real model call: `jevmem mcp --base-url
    --model` against the loopback OpenAI-compatible fake."""
    got: dict[str, Any] = {}
    with FakeChatServer() as fake:
        params = StdioServerParameters(
            command=SERVER[0],
            args=[
                *SERVER[1:],
                *("--memory", str(tmp_path / "m")),
                *("--base-url", fake.base_url, "--model", "fake"),
            ],
        )

        async def main() -> None:
            async with Client(params, read_timeout_seconds=60) as c:
                assert "answer" in {t.name for t in (await c.list_tools()).tools}
                for text, user in (
                    ("Ines teaches Maya the cello on Tuesdays", "u1"),
                    ("Tom walks his dog Biscuit every morning", "u1"),
                    ("Bob teaches drums", "u2"),
                ):
                    await _ok(c, "remember", {"text": text, "scope": {"user": user}})
                # abstain false: the model is asked whatever the sufficiency (the hashing
                # embedder's scores are low)
                got["answer"] = await _ok(
                    c,
                    "answer",
                    {
                        "query": "Who teaches Maya the cello?",
                        "scope": {"user": "u1"},
                        "abstain": False,
                    },
                )
                asked = len(fake.requests)
                got["abstained"] = await _ok(
                    c, "answer", {"query": "Who teaches Maya?", "scope": {"user": "nobody"}}
                )
                got["model_calls_for_abstention"] = len(fake.requests) - asked
                bad = await c.call_tool("answer", {"query": "x", "filter": {"$bogus": 1}})
                got["bad"] = (bad.is_error, _text(bad))

        _run(main)
    a = got["answer"]
    assert a["answer"] == "Ines teaches Maya the cello on Tuesdays" and not a["abstained"]
    assert a["cited"] == [0] and [e["id"] for e in a["cited_evidence"]] == [0]
    assert a["cited_evidence"][0]["scope"] == {"user": "u1"}
    assert a["trace"]["prompt_tokens"] > 0 and a["search"]["mode"] == "full"
    assert got["abstained"]["abstained"] and got["abstained"]["cited"] == []
    assert got["model_calls_for_abstention"] == 0
    assert got["bad"][0] and "InvalidInputError" in got["bad"][1]


def test_arguments() -> None:
    assert parse_http("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_http("[::1]:8080") == ("::1", 8080)
    for bad in ("localhost", "host:port", "h:70000"):
        with pytest.raises(InvalidInputError):
            parse_http(bad)
    spec = parse_memory_spec("work=/tmp/x=y")
    assert (spec.name, spec.path) == ("work", Path("/tmp/x=y"))
    assert parse_memory_spec("/data/agent mem").name == "agent_mem"


def test_cli_errors_are_messages_not_tracebacks(tmp_path: Path) -> None:
    afile = tmp_path / "m.jvm"
    afile.write_bytes(b"")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    for args in (["--memory", str(afile)], ["--memory", str(tmp_path / "d"), "--http", "nohost"]):
        p = subprocess.run(
            [*SERVER, *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            stdin=subprocess.DEVNULL,
        )
        assert p.returncode == 2, p.stderr
        assert "Traceback" not in p.stderr and "jevmem: InvalidInputError" in p.stderr


def test_without_the_extra_the_command_says_what_to_install(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None  # as if the extra were not installed\n"
        "from jevmem.cli import main\n"
        f"sys.exit(main(['mcp', '--memory', {str(tmp_path / 'm')!r}]))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2
    assert "pip install 'jevmem[mcp]'" in p.stderr and "Traceback" not in p.stderr
    assert not (tmp_path / "m").exists()  # nothing was created


def _objects(schema: Any) -> list[dict[str, Any]]:
    """Every object schema with fixed keys (``properties``) in a JSON schema."""
    found: list[dict[str, Any]] = []
    if isinstance(schema, dict):
        if "properties" in schema:
            found.append(schema)
        for v in schema.values():
            found += _objects(v)
    elif isinstance(schema, list):
        for v in schema:
            found += _objects(v)
    return found


def test_unknown_arguments_are_refused_not_ignored() -> None:
    """A misspelled argument (``Scope``, ``scopes``, ``scop``) must not turn a
    scoped read or forget into one over every scope: the schemas are closed
    and a call with an argument the tool does not take is a tool error naming
    it, which changes nothing."""
    m = Memory(HashEmbedder(64), LocalController())
    m.add("u1 secret: my bank PIN is 4321", scope={"user": "u1"})
    m.add("u2 secret: my passport number is X99", scope={"user": "u2"})
    m.add("u2 note about cats", scope={"user": "u2"}, metadata={"topic": "pets"})
    server = build_server({"m": m}, answer=True)  # answer offered: its schema is closed too

    async def main() -> None:
        async with Client(server) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert set(tools) == {"remember", "recall", "forget", "list", "answer"}
            for t in tools.values():
                assert t.input_schema["additionalProperties"] is False, t.name
                for obj in _objects(t.input_schema):
                    assert obj.get("additionalProperties") is False, (t.name, obj)
            for tool, args, bad in (
                ("recall", {"query": "secret number", "Scope": {"user": "u1"}}, "Scope"),
                ("forget", {"filter": {"topic": "pets"}, "scopes": {"user": "u1"}}, "scopes"),
                ("list", {"scop": {"user": "u1"}}, "scop"),
                (
                    "remember",
                    {"text": "x", "scope": {"user": "u1"}, "metdata": {"a": 1}},
                    "metdata",
                ),
                ("answer", {"query": "PIN?", "Scope": {"user": "u1"}}, "Scope"),
                ("forget", {"ids": [0], "memory": "m", "dry_run": True}, "dry_run"),
            ):
                r = await c.call_tool(tool, args)
                assert r.is_error, (tool, r.structured_content)
                assert f"unknown argument '{bad}'" in _text(r), _text(r)
            # the same calls spelled right do what they say, in scope
            hit = await _ok(c, "recall", {"query": "secret number", "scope": {"user": "u1"}})
            assert [e["text"] for e in hit["evidence"]] == ["u1 secret: my bank PIN is 4321"]

    _run(main)
    assert [(n.id, n.text) for n in m.list()[0]] == [
        (0, "u1 secret: my bank PIN is 4321"),
        (1, "u2 secret: my passport number is X99"),
        (2, "u2 note about cats"),
    ]


def test_memory_spec_name_must_follow_the_rule() -> None:
    for bad in ("my notes=/tmp/x", "a" * 65 + "=/tmp/x", "=/tmp/x", "-x=/tmp/x", "w/x=/tmp/y"):
        with pytest.raises(InvalidInputError, match="1-64 letters, digits"):
            parse_memory_spec(bad)
    with pytest.raises(InvalidInputError, match="needs a directory"):
        parse_memory_spec("work=")
    spec = parse_memory_spec("a" * 64 + "=/tmp/x")
    assert (spec.name, spec.path) == ("a" * 64, Path("/tmp/x"))
    with pytest.raises(InvalidInputError, match="1-64 letters, digits"):
        build_server({"my notes": Memory(HashEmbedder(64), LocalController())})


def test_cli_refuses_a_bad_memory_name_and_creates_nothing(tmp_path: Path) -> None:
    work = tmp_path / "cwd"
    work.mkdir()
    p = subprocess.run(
        [*SERVER, "--memory", f"my notes={tmp_path / 'x'}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=work,
        stdin=subprocess.DEVNULL,
    )
    assert p.returncode == 2, p.stderr
    assert "jevmem: InvalidInputError" in p.stderr and "1-64 letters" in p.stderr
    assert "Traceback" not in p.stderr
    assert list(work.iterdir()) == [] and not (tmp_path / "x").exists()


def test_time_is_iso_8601_with_a_four_digit_year() -> None:
    m = Memory(HashEmbedder(64), LocalController())
    want = {}
    for year in (3, 999, 1000, 9997):
        ts = int(calendar.timegm((year, 1, 2, 3, 4, 5)))
        want[m.add(f"cello lesson in year {year}", timestamp=ts)] = f"{year:04d}-01-02T03:04:05Z"

    async def main() -> None:
        async with Client(build_server({"m": m})) as c:
            items = (await _ok(c, "list", {}))["items"]
            assert {it["id"]: it["time"] for it in items} == want
            got = await _ok(c, "recall", {"query": "cello lesson", "k": 4, "mode": "lexical"})
            assert {e["id"]: e["time"] for e in got["evidence"]} == want

    _run(main)
    assert want[0] == "0003-01-02T03:04:05Z"
