"""The CLI's user errors: one line naming the file, row and field, exit code 2,
no traceback, and the memory left exactly as it was."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jevmem
from jevmem.cli import main
from jevmem.controller.local import LocalController
from jevmem.embed import HashEmbedder
from jevmem.remote import (
    GrpcController,
    MemoryClient,
    MemoryServiceError,
    RemoteControllerWarning,
    serve_memory,
)


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "jevmem", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _one_line_error(p: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "Traceback" not in p.stderr, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("jevmem:")]
    assert len(lines) == 1, p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_user_errors_are_one_line_without_traceback(tmp_path: Path) -> None:
    _one_line_error(
        _run("ingest", "missing.jsonl", "--embedder", "hash-32", cwd=tmp_path),
        "no such file",
        "missing.jsonl",
    )
    (tmp_path / "when.jsonl").write_text('{"text": "a"}\n{"text": "b", "timestamp": "soonish"}\n')
    _one_line_error(
        _run("ingest", "when.jsonl", "--embedder", "hash-32", cwd=tmp_path),
        "when.jsonl:2",
        "timestamp",
        "soonish",
    )
    _one_line_error(
        _run(
            "serve-controller",
            "--controller",
            "nosuchpkg.models:Thing",
            "--port",
            "0",
            cwd=tmp_path,
        ),
        "InvalidConfigError",
        "nosuchpkg.models",
    )
    assert not (tmp_path / "jevmem.jvm").exists()


def test_serve_without_the_grpc_extra_names_the_extra(tmp_path: Path) -> None:
    # grpc made unimportable in the child: what a user without the extra sees
    code = (
        "import sys; sys.modules['grpc'] = None; from jevmem.cli import main; "
        "sys.exit(main(['serve', '--port', '0']))"
    )
    p = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    _one_line_error(p, "MissingDependencyError", "jevmem[grpc]", ".[grpc]")


@pytest.mark.parametrize("durable", [False, True])
def test_a_bad_row_names_its_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], durable: bool
) -> None:
    memory = tmp_path / ("mem" if durable else "mem.jvm")
    first = tmp_path / "first.jsonl"
    first.write_text('{"text": "the first note"}\n')
    assert main(["ingest", str(first), "--memory", str(memory), "--embedder", "hash-32"]) == 0
    capsys.readouterr()
    # 300 good rows, several batches' worth, then a bad one on line 303
    lines = [json.dumps({"text": f"note number {i}"}) for i in range(300)]
    lines += ["", json.dumps({"text": "fine"}), json.dumps({"text": "bad", "speaker": 7})]
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join(lines) + "\n")
    argv = ["ingest", str(rows), "--memory", str(memory), "--batch", "64"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert f"{rows}:303: speaker must be a str, got int" in err
    m = jevmem.Memory.open(memory) if durable else jevmem.Memory.load(memory)
    with m:
        assert [n.text for n in m.list()[0]] == ["the first note"]


def test_chat_format_lines_are_accepted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chat = tmp_path / "chat.jsonl"
    messages = [
        {"role": "user", "content": "I moved our ETL to Dagster", "timestamp": "2026-03-02"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]},
        {"role": "assistant", "name": "Helper", "content": [{"type": "text", "text": "Noted."}]},
    ]
    lines = [json.dumps(x) for x in messages]
    lines.append(json.dumps({"messages": [{"role": "user", "content": "Dagster runs nightly"}]}))
    chat.write_text("\n".join(lines) + "\n")
    memory = tmp_path / "chat.jvm"
    assert main(["ingest", str(chat), "--memory", str(memory), "--embedder", "hash-32"]) == 0
    assert "1 chat messages without text skipped" in capsys.readouterr().out
    m = jevmem.Memory.load(memory)
    got = [(n.text, n.provenance.get("speaker"), n.timestamp) for n in m.list()[0]]
    assert got == [
        ("I moved our ETL to Dagster", "user", 1772409600),
        ("Noted.", "Helper", None),
        ("Dagster runs nightly", "user", None),
    ]
    # a chat line with neither text nor role/content is refused by line
    (tmp_path / "odd.jsonl").write_text('{"role": "user"}\n')
    assert main(["ingest", str(tmp_path / "odd.jsonl"), "--memory", str(memory)]) == 2
    assert "odd.jsonl:1: expected an object" in capsys.readouterr().err


def test_version_and_formats_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("jevmem ") and jevmem.__version__ in out
    with pytest.raises(SystemExit):
        main(["ingest", "--help"])
    out = capsys.readouterr().out
    for needle in ('"role": "user"', "LoCoMo", "all or nothing", '"timestamp"'):
        assert needle in out


def test_memory_client_raises_jevmem_errors() -> None:
    served = jevmem.Memory(HashEmbedder(32), controller=LocalController())
    server, _ = serve_memory({"m": served})
    with server, MemoryClient(server.address, timeout_s=10) as c:
        with pytest.raises(MemoryServiceError) as info:
            c.search("m", "x", now="not a date")
    err = info.value
    assert isinstance(err, jevmem.JevmemError) and isinstance(err, grpc.RpcError)
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "INVALID_ARGUMENT" in str(err) and err.details() in str(err)
    assert "not a date" in err.details()


def test_an_unreachable_controller_warns() -> None:
    remote = GrpcController("127.0.0.1:1", timeout_s=0.2, call_budget_s=0.5)
    m = jevmem.Memory(HashEmbedder(32), controller=remote)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        m.add("the build server disk is full")
        r = m.search("disk full?")
    assert r.trace["controller"] == "local-fallback"
    mine = [w for w in seen if issubclass(w.category, RemoteControllerWarning)]
    # once for the outage, not once per call
    assert len(mine) == 1 and "127.0.0.1:1" in str(mine[0].message)
    remote.close()


def test_the_readme_example_controller_loads_and_answers() -> None:
    from jevmem.controller.examples import CountingController
    from jevmem.remote.server import load_controller

    c = load_controller("jevmem.controller.examples:CountingController")
    assert isinstance(c, CountingController)
    m = jevmem.Memory(HashEmbedder(32), controller=c)
    m.add("the build server disk is full")
    r = m.search("disk full?")
    assert r.trace["controller"] == c.name and c.name.startswith("counting(")
    assert c.asked["assess.sufficiency"] >= 1 and c.asked["score.relevance"] >= 1


_GOOD = st.fixed_dictionaries(
    {"text": st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=12)},
    optional={
        "speaker": st.sampled_from(["Maya", "Lena"]),
        "timestamp": st.integers(0, 2_000_000_000),
        "metadata": st.fixed_dictionaries({"n": st.integers(0, 9)}),
    },
)
_BAD = st.sampled_from(
    [
        {"text": ""},
        {"text": "x", "timestamp": "not a date"},
        {"text": "x", "speaker": 3},
        {"text": "x", "metadata": {"n": [1]}},
        {"text": "x", "scope": "u1"},
        {"no_text": 1},
    ]
)


@settings(max_examples=40, deadline=None)
@given(rows=st.lists(_GOOD, max_size=12), bad=st.one_of(st.none(), _BAD), at=st.integers(0, 12))
def test_ingest_is_all_or_nothing(
    tmp_path_factory: pytest.TempPathFactory,
    rows: list[dict[str, Any]],
    bad: dict[str, Any] | None,
    at: int,
) -> None:
    tmp = tmp_path_factory.mktemp("ingest")
    memory = tmp / "m.jvm"
    (tmp / "seed.jsonl").write_text('{"text": "already here"}\n')
    assert (
        main(["ingest", str(tmp / "seed.jsonl"), "--memory", str(memory), "--embedder", "hash-16"])
        == 0
    )
    before = memory.read_bytes()
    lines = [json.dumps(r) for r in rows]
    if bad is not None:
        lines.insert(min(at, len(lines)), json.dumps(bad))
    (tmp / "rows.jsonl").write_text("\n".join(lines) + "\n")
    code = main(["ingest", str(tmp / "rows.jsonl"), "--memory", str(memory), "--batch", "4"])
    if bad is not None:
        assert code == 2 and memory.read_bytes() == before  # nothing written, not even a save
    else:
        assert code == 0
        m = jevmem.Memory.load(memory)
        assert len(m) == 1 + len(rows)
        # and again: every row is held already
        assert main(["ingest", str(tmp / "rows.jsonl"), "--memory", str(memory)]) == 0
        assert len(jevmem.Memory.load(memory)) == 1 + len(rows)


def test_serve_warns_at_start_when_the_controller_does_not_answer(tmp_path: Path) -> None:
    p = subprocess.Popen(
        [
            *(sys.executable, "-X", "faulthandler", "-m", "jevmem", "serve", "--port", "0"),
            *("--embedder", "hash-16", "--controller", "127.0.0.1:1", "--grace", "0.1"),
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert p.stdout is not None
        assert "listening on" in p.stdout.readline()
    finally:
        p.terminate()
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            # a shutdown that hangs: every thread's stack, then fail with it
            p.send_signal(signal.SIGABRT)
            _, err = p.communicate(timeout=30)
            pytest.fail(f"serve did not exit after SIGTERM:\n{err[-8000:]}")
    assert "controller 127.0.0.1:1 does not answer" in err and "local controller" in err
    assert "Traceback" not in err


# ---- refusals: rows, paths and flags a command must not take --------------------------------


def test_ingest_splits_jsonl_at_newlines_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # U+2028, U+2029 and U+0085 may stand raw in a JSON string: not line ends
    texts = ["Maya\u2028started cello", "para\u2029graph", "next\x85line", "plain"]
    lines = [json.dumps({"text": t}, ensure_ascii=False) for t in texts]
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes("\r\n".join(lines).encode() + b"\r\n")
    memory = tmp_path / "m.jvm"
    assert main(["ingest", str(rows), "--memory", str(memory), "--embedder", "hash-32"]) == 0
    assert "ingested 4 observations" in capsys.readouterr().out
    assert sorted(n.text for n in jevmem.Memory.load(memory).list()[0]) == sorted(texts)
    # and a bad row after them is named by its real line
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([*lines, "", json.dumps({"text": None})]) + "\n", encoding="utf-8")
    assert main(["ingest", str(bad), "--memory", str(tmp_path / "b.jvm")]) == 2
    assert f"{bad}:6: text must be a str, got NoneType" in capsys.readouterr().err
    assert not (tmp_path / "b.jvm").exists()


_LOCOMO_TURNS = [{"speaker": "A", "text": "hello", "dia_id": "D1:1"}]


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        (
            "rows.jsonl",
            json.dumps({"text": None}),
            "rows.jsonl:1: text must be a str, got NoneType",
        ),
        ("rows.jsonl", json.dumps({"text": 42}), "rows.jsonl:1: text must be a str, got int"),
        (
            "chat.jsonl",
            json.dumps({"role": "user", "content": "fine"})
            + "\n"
            + json.dumps({"role": "user", "content": [{"type": "text", "text": None}]}),
            "chat.jsonl:2: content[0].text must be a str, got NoneType",
        ),
        (
            "chat.jsonl",
            json.dumps({"messages": [{"role": "user", "content": [{"type": "text", "text": 7}]}]}),
            "chat.jsonl:1: messages[0]: content[0].text must be a str, got int",
        ),
        (
            "chat.jsonl",
            json.dumps({"role": "bot", "content": [{"type": "text"}]}),
            'chat.jsonl:1: content[0] is a text part without "text"',
        ),
        *(
            (
                "loco.json",
                json.dumps(
                    [
                        {
                            "sample_id": "s1",
                            "conversation": {
                                "session_1_date_time": "1:56 pm on 8 May, 2023",
                                "session_1": [*_LOCOMO_TURNS, {"speaker": "B", "text": bad}],
                            },
                        }
                    ]
                ),
                f"loco.json: sample s1 session 1 turn 1: text must be a str, got {kind}",
            )
            for bad, kind in [(None, "NoneType"), (42, "int")]
        ),
    ],
)
def test_non_str_text_is_refused_in_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, needle: str
) -> None:
    memory = tmp_path / "m.jvm"
    (tmp_path / "seed.jsonl").write_text('{"text": "already here"}\n')
    argv = ["--memory", str(memory), "--embedder", "hash-16"]
    assert main(["ingest", str(tmp_path / "seed.jsonl"), *argv]) == 0
    before = memory.read_bytes()
    (tmp_path / name).write_text(content + "\n")
    assert main(["ingest", str(tmp_path / name), *argv]) == 2
    assert needle in capsys.readouterr().err
    assert memory.read_bytes() == before  # nothing written, "None" least of all


def test_read_commands_never_make_a_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "cat.jpg").write_bytes(b"\xff\xd8")
    notes = tmp_path / "notes.txt"
    notes.write_text("not a memory\n")
    (tmp_path / "empty").mkdir()
    for path in (folder, tmp_path / "empty", notes):
        before = sorted(p.name for p in tmp_path.rglob("*"))
        with pytest.raises(SystemExit) as done:
            main(["search", "x", "--memory", str(path), "--embedder", "hash-16"])
        assert done.value.code == 2 and f"no memory at {path}" in capsys.readouterr().err
        with pytest.raises(SystemExit) as done:
            main(["answer", "x", "--memory", str(path), "--model", "m"])
        assert done.value.code == 2 and f"no memory at {path}" in capsys.readouterr().err
        assert main(["inspect", str(path), "-o", str(tmp_path / "g.html")]) == 2
        assert f"no memory here: {path}" in capsys.readouterr().err
        assert sorted(p.name for p in tmp_path.rglob("*")) == before  # nothing written
    # a real one of each kind still reads
    (tmp_path / "r.jsonl").write_text('{"text": "Maya plays the cello"}\n')
    for memory in (tmp_path / "durable", tmp_path / "m.jvm"):
        assert main(["ingest", str(tmp_path / "r.jsonl"), "--memory", str(memory)]) == 0
        assert main(["search", "cello", "--memory", str(memory)]) == 0
        assert main(["inspect", str(memory), "-o", str(tmp_path / "g.html")]) == 0


def test_inspect_never_writes_over_the_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "r.jsonl").write_text('{"text": "Maya plays the cello"}\n')
    snap, durable = tmp_path / "agent.jvm", tmp_path / "agent"
    for memory in (snap, durable):
        assert main(["ingest", str(tmp_path / "r.jsonl"), "--memory", str(memory)]) == 0
    (tmp_path / "link.jvm").symlink_to(snap)
    manifest = (durable / "MANIFEST").read_bytes()
    before = snap.read_bytes()
    for memory, output in [
        (snap, snap),
        (snap, tmp_path / "link.jvm"),
        (tmp_path / "link.jvm", tmp_path / "sub" / ".." / "agent.jvm"),
        (durable, durable),
        (durable, durable / "MANIFEST"),
        (durable, durable / "graph.html"),
    ]:
        with pytest.raises(SystemExit) as done:
            main(["inspect", str(memory), "-o", str(output)])
        assert done.value.code == 2
        assert f"--output {output}" in capsys.readouterr().err
    assert snap.read_bytes() == before and (durable / "MANIFEST").read_bytes() == manifest
    assert not (durable / "graph.html").exists()
    # the page is written whole or not at all: a failed write keeps the old file
    page = tmp_path / "graph.html"
    page.write_text("the old page")

    def fail(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device", src)

    monkeypatch.setattr(os, "replace", fail)
    assert main(["inspect", str(snap), "-o", str(page)]) == 2
    assert f"No space left on device: {page}" in capsys.readouterr().err
    assert page.read_text() == "the old page"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []
    monkeypatch.undo()
    assert main(["inspect", str(snap), "-o", str(page)]) == 0
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_flag_errors_exit_2_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "r.jsonl").write_text('{"text": "Maya plays the cello"}\n')
    assert main(["ingest", str(tmp_path / "r.jsonl"), "--memory", str(tmp_path / "m.jvm")]) == 0
    _one_line_error(
        _run("search", "x", "--memory", "m.jvm", "--scope", "user", cwd=tmp_path),
        "--scope expects KEY=VALUE",
    )
    _one_line_error(
        _run("ingest", "r.jsonl", "--memory", "m.jvm", "--batch", "0", cwd=tmp_path), "--batch"
    )
    _one_line_error(
        _run("serve", "--port", "0", "--tokens-file", "nope.json", cwd=tmp_path), "nope.json"
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["ingest", "n.jsonl", "--memory", "", "--embedder", "hash-16"],
        ["ingest", "n.jsonl", "--memory", "  ", "--embedder", "hash-16"],
        ["search", "a note", "--memory", ""],
        ["answer", "a note", "--memory", "", "--model", "m"],
        # each with a later flag error, so that a missed path stops before serving
        ["serve", "--data-dir", "", "--port", "0", "--max-search-batch", "0"],
        ["serve", "--memory", "agent=", "--port", "0", "--max-search-batch", "0"],
        ["mcp", "--memory", "", "--token-env", "JEVMEM_UNSET"],
        ["mcp", "--memory", "agent= ", "--token-env", "JEVMEM_UNSET"],
    ],
)
def test_an_empty_memory_path_is_a_usage_error(
    argv: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    # `--memory "$UNSET"`: Path("") is ".", which would make the working
    # directory a durable memory (MANIFEST, LOCK, log) or host memories from it
    monkeypatch.chdir(tmp_path)
    (tmp_path / "n.jsonl").write_text('{"text": "a note"}\n')
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert "(an unset variable?)" in err and "Traceback" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.jsonl"]


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        (
            "s.json",
            '[{"conversation": {"session_1": 5}}]',
            "sample 0 session 1: a session is a list",
        ),
        ("n.json", '[{"conversation": {"session_1": null}}]', "a session is a list of turns"),
        ("c.json", '[{"conversation": "session_1"}]', '"conversation" must be an object'),
        ("l.json", '[{"conversation": ["session_1"]}]', '"conversation" must be an object'),
        (
            "deep.jsonl",
            '{"text": "x", "n": ' + "[" * 100_000 + "]" * 100_000 + "}",
            "deep.jsonl:1: not JSON this program reads",
        ),
        ("deep.json", "[" * 100_000 + "]" * 100_000, "deep.json: not JSON this program reads"),
        ("big.jsonl", '{"text": "x", "n": ' + "9" * 5000 + "}", "big.jsonl:1: not JSON"),
        ("part.jsonl", '{"role": "user", "content": ["hi", 5]}', "content[1] must be a str or"),
    ],
)
def test_files_of_the_wrong_shape_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, content: str, needle: str
) -> None:
    (tmp_path / name).write_text(content + "\n")
    memory = tmp_path / "m.jvm"
    assert (
        main(["ingest", str(tmp_path / name), "--memory", str(memory), "--embedder", "hash-16"])
        == 2
    )
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err
    assert not memory.exists()


def test_a_failed_ingest_into_a_new_directory_leaves_no_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "bad.jsonl").write_text('{"text": "ok"}\n{"text": \n')
    memory = tmp_path / "mem"
    argv = ["--memory", str(memory), "--embedder", "hash-16"]
    assert main(["ingest", str(tmp_path / "bad.jsonl"), *argv]) == 2
    assert not memory.exists()  # not made, so no embedder pinned by a failed run
    with pytest.raises(SystemExit) as done:
        main(["search", "x", *argv])
    assert done.value.code == 2 and f"no memory at {memory}" in capsys.readouterr().err
    # a directory that held a memory before keeps it
    (tmp_path / "good.jsonl").write_text('{"text": "Maya plays the cello"}\n')
    assert main(["ingest", str(tmp_path / "good.jsonl"), *argv]) == 0
    assert main(["ingest", str(tmp_path / "bad.jsonl"), *argv]) == 2
    with jevmem.Memory.open(memory) as m:
        assert [n.text for n in m.list()[0]] == ["Maya plays the cello"]


def test_search_prints_a_stored_escape_sequence_as_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stored text could clear the screen or retitle the terminal when
    printed raw; JSON and the memory keep it as written."""
    rows = tmp_path / "r.jsonl"
    rows.write_text(
        json.dumps({"text": "cello \x1b[2J\x1b]0;owned\x07 lessons", "speaker": "M\x9bx"})
    )
    memory = tmp_path / "m.jvm"
    assert main(["ingest", str(rows), "--memory", str(memory), "--embedder", "hash-16"]) == 0
    capsys.readouterr()
    assert main(["search", "cello lessons", "--memory", str(memory)]) == 0
    out = capsys.readouterr().out
    assert not any(c in out for c in "\x1b\x07\x9b"), out
    assert "cello \\x1b[2J\\x1b]0;owned\\x07 lessons" in out and "M\\x9bx" in out
    m = jevmem.Memory.load(memory)
    assert m.get(0).text == "cello \x1b[2J\x1b]0;owned\x07 lessons"


def test_a_jvm_suffix_in_any_case_names_an_export(tmp_path: Path) -> None:
    (tmp_path / "r.jsonl").write_text('{"text": "Maya plays the cello"}\n')
    memory = tmp_path / "notes.JVM"
    assert (
        main(
            ["ingest", str(tmp_path / "r.jsonl"), "--memory", str(memory), "--embedder", "hash-16"]
        )
        == 0
    )
    assert memory.is_file() and jevmem.Memory.load(memory).get(0).text == "Maya plays the cello"


def test_ingest_reads_standard_input_and_pipes(tmp_path: Path) -> None:
    rows = '{"text": "Maya plays the cello"}\n{"text": "Tom has a dog"}\n'
    memory = tmp_path / "m.jvm"
    for name in ("-", "/dev/stdin"):
        p = subprocess.run(
            [sys.executable, "-m", "jevmem", "ingest", name, "--memory", str(memory)],
            input=rows, capture_output=True, text=True, timeout=120, cwd=tmp_path,
        )  # fmt: skip
        assert p.returncode == 0, p.stderr
    # the second read of the same rows added nothing: content keys
    assert [n.text for n in jevmem.Memory.load(memory).list()[0]] == [
        "Maya plays the cello",
        "Tom has a dog",
    ]
    _one_line_error(
        _run("ingest", str(tmp_path), "--memory", str(memory), cwd=tmp_path), "is a directory"
    )
