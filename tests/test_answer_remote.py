"""Answers from the command line (``jevmem answer``) and over gRPC (``MemoryService.Answer``),
with the loopback fake model (jevmem.testing)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, MutableMapping, Sequence
from pathlib import Path

import grpc
import pytest

from jevmem import ChatCompletionsClient, HashEmbedder, LocalController, Memory
from jevmem.cli import main
from jevmem.controller.types import Answer as Decision
from jevmem.controller.types import DecisionRequest, NoulAnswer
from jevmem.remote.memory_service import MemoryClient, serve_memory
from jevmem.testing import FakeChatServer

ENV = ("JEVMEM_S2_BASE_URL", "JEVMEM_S2_MODEL", "JEVMEM_S2_API_KEY")
ENV_ALL = (*ENV, "OPENAI_BASE_URL", "OPENAI_MODEL", "OPENAI_API_KEY")
LINES = [
    {
        "text": "Maya started cello lessons with Ines yesterday",
        "speaker": "Maya",
        "timestamp": "2026-03-03T10:00:00Z",
    },
    {
        "text": "Lena moved to Lisbon for a job at a marine lab",
        "speaker": "Lena",
        "timestamp": "2026-03-04T10:00:00Z",
    },
]
QUESTION = "When did Maya start cello lessons?"


@pytest.fixture
def fake() -> Iterator[FakeChatServer]:
    with FakeChatServer() as s:
        yield s


@pytest.fixture
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for k in ENV_ALL:
        monkeypatch.delenv(k, raising=False)


# ---- the command line ----------------------------------------------------------------


def ingest(tmp: Path) -> Path:
    src = tmp / "obs.jsonl"
    src.write_text("\n".join(json.dumps(x) for x in LINES) + "\n")
    mem = tmp / "m.jvm"
    assert main(["ingest", str(src), "--memory", str(mem), "--embedder", "hash-64"]) == 0
    return mem


def test_cli_answer(
    fake: FakeChatServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    no_env: None,
) -> None:
    mem = ingest(tmp_path)
    capsys.readouterr()
    base = ["answer", QUESTION, "--memory", str(mem), "--base-url", fake.base_url]
    assert main([*base, "--model", "cli-model", "--no-abstain"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "Maya started cello lessons with Ines yesterday"
    assert out[1].startswith("  [0] 2026-03-03 10:00 Maya: Maya started cello lessons")
    assert out[2].startswith("fake-model: ") and "prompt" in out[2]
    assert fake.requests[-1]["model"] == "cli-model"
    assert '"yesterday" = 2 March 2026' in fake.requests[-1]["messages"][1]["content"]
    # JSON, the model from the environment, streamed
    monkeypatch.setenv("JEVMEM_S2_MODEL", "env-model")
    assert main([*base, "--json", "--stream", "--no-abstain"]) == 0
    monkeypatch.delenv("JEVMEM_S2_MODEL")
    got = json.loads(capsys.readouterr().out)
    assert got["answer"] == LINES[0]["text"] and [c["id"] for c in got["cited"]] == [0]
    assert got["trace"]["completion"]["streamed"] and fake.requests[-1]["model"] == "env-model"
    # nothing in the scope: abstains, the model is not called
    n = len(fake.requests)
    assert main([*base, "--model", "m", "--scope", "user=nobody"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == ["I don't know.", "abstained (no evidence): the model was not called"]
    assert len(fake.requests) == n


def test_cli_answer_without_a_model_says_what_to_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_env: None
) -> None:
    mem = ingest(tmp_path)
    capsys.readouterr()
    assert main(["answer", QUESTION, "--memory", str(mem)]) == 2
    assert "JEVMEM_S2_MODEL" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="no memory"):
        main(["answer", QUESTION, "--memory", str(tmp_path / "missing.jvm"), "--model", "m"])
    with pytest.raises(SystemExit, match="KEY_VAR is not set"):
        main(["answer", QUESTION, "--memory", str(mem), "--api-key-env", "KEY_VAR"])


# ---- gRPC --------------------------------------------------------------------------------


class FixedSufficiency(LocalController):
    name = "fixed-sufficiency"

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def decide(self, requests: Sequence[DecisionRequest]) -> list[MutableMapping[str, Decision]]:
        out = super().decide(requests)
        for req, ans in zip(requests, out, strict=True):
            if req.purpose == "assessment":
                ans["sufficiency"] = NoulAnswer(self.value)
        return out


def memory(sufficiency: float = 0.9) -> Memory:
    m = Memory(HashEmbedder(64), FixedSufficiency(sufficiency))
    m.add_batch(
        [str(x["text"]) for x in LINES],
        timestamps=[str(x["timestamp"]) for x in LINES],
        speakers=[str(x["speaker"]) for x in LINES],
    )
    return m


def test_grpc_answer_equals_the_in_process_answer(fake: FakeChatServer) -> None:
    s2 = ChatCompletionsClient(fake.base_url, "fake", backoff_s=0.001)
    local = memory().answer(QUESTION, 5, system_two=s2)
    server, _ = serve_memory({"m": memory(), "low": memory(0.05)}, system_two=s2)
    with server, MemoryClient(server.address, timeout_s=30) as c:
        got = c.answer("m", QUESTION, 5)
        assert (got.text, got.cited, got.abstained) == (local.text, local.cited, local.abstained)
        assert [e.id for e in got.search.evidence] == [e.id for e in local.search.evidence]
        assert set(got.cited) <= {e.id for e in got.search.evidence}
        assert got.trace["prompt_version"] == local.trace["prompt_version"]
        assert got.trace["prompt_tokens"] == local.trace["prompt_tokens"]
        # abstention: the model is not called
        n = len(fake.requests)
        low = c.answer("low", QUESTION)
        assert low.abstained and low.cited == () and low.trace["abstained_by"] == "sufficiency"
        assert len(fake.requests) == n
        assert not c.answer("low", QUESTION, abstain=False).abstained
        assert not c.answer("low", QUESTION, abstain_below=0.01).abstained
        assert len(fake.requests) == n + 2
        # bad requests
        bad: list[tuple[str, str, dict[str, object], grpc.StatusCode]] = [
            ("nope", QUESTION, {}, grpc.StatusCode.NOT_FOUND),
            ("m", " ", {}, grpc.StatusCode.INVALID_ARGUMENT),
            ("m", QUESTION, {"abstain_below": 2.0}, grpc.StatusCode.INVALID_ARGUMENT),
            ("m", QUESTION, {"abstain_below": float("nan")}, grpc.StatusCode.INVALID_ARGUMENT),
            ("m", QUESTION, {"mode": "psychic"}, grpc.StatusCode.INVALID_ARGUMENT),
        ]
        for name, query, kw, code in bad:
            with pytest.raises(grpc.RpcError) as info:
                c.answer(name, query, **kw)  # type: ignore[arg-type]
            assert info.value.code() == code, kw


def test_grpc_answer_maps_model_failures(fake: FakeChatServer, no_env: None) -> None:
    s2 = ChatCompletionsClient(fake.base_url, "fake", max_retries=0)
    server, servicer = serve_memory({"m": memory()}, system_two=s2)
    with server, MemoryClient(server.address, timeout_s=30) as c:
        fake.script("500")
        with pytest.raises(grpc.RpcError) as info:
            c.answer("m", QUESTION)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE
        fake.script("400")
        with pytest.raises(grpc.RpcError) as info:
            c.answer("m", QUESTION)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        servicer.system_two = None  # and no environment: no model at all
        with pytest.raises(grpc.RpcError) as info:
            c.answer("m", QUESTION)
        assert info.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "JEVMEM_S2_MODEL" in (info.value.details() or "")


def test_grpc_answer_takes_the_model_from_the_environment(
    fake: FakeChatServer, monkeypatch: pytest.MonkeyPatch, no_env: None
) -> None:
    monkeypatch.setenv("JEVMEM_S2_BASE_URL", fake.base_url)
    monkeypatch.setenv("JEVMEM_S2_MODEL", "served-from-env")
    server, _ = serve_memory({"m": memory()})
    with server, MemoryClient(server.address, timeout_s=30) as c:
        assert c.answer("m", QUESTION).cited == (0,)
    assert fake.requests[-1]["model"] == "served-from-env"


def test_a_slow_model_does_not_hold_the_memory(fake: FakeChatServer) -> None:
    s2 = ChatCompletionsClient(fake.base_url, "fake")
    server, _ = serve_memory({"m": memory()}, system_two=s2)
    with server, MemoryClient(server.address, timeout_s=30) as c:
        fake.script("slow:1.5")
        done = threading.Event()

        def slow_answer() -> None:
            c.answer("m", QUESTION)
            done.set()

        t = threading.Thread(target=slow_answer)
        t.start()
        time.sleep(0.3)  # the answer is now waiting on the model
        t0 = time.perf_counter()
        r = c.search("m", QUESTION, 3)
        assert time.perf_counter() - t0 < 1.0 and not done.is_set()
        assert r.evidence
        t.join()
        assert done.is_set()


def test_grpc_answer_errors_are_memory_service_errors(fake: FakeChatServer) -> None:
    from jevmem.errors import JevmemError
    from jevmem.remote import MemoryServiceError

    s2 = ChatCompletionsClient(fake.base_url, "fake", max_retries=0)
    server, _ = serve_memory({"m": memory()}, system_two=s2)
    with server, MemoryClient(server.address, timeout_s=30) as c:
        cases: list[tuple[str, dict[str, str], grpc.StatusCode]] = [
            ("nobody", {}, grpc.StatusCode.NOT_FOUND),
            ("m", {"mode": "psychic"}, grpc.StatusCode.INVALID_ARGUMENT),
        ]
        for name, kw, code in cases:
            with pytest.raises(MemoryServiceError) as info:
                c.answer(name, QUESTION, **kw)  # type: ignore[arg-type]
            assert isinstance(info.value, JevmemError) and isinstance(info.value, grpc.RpcError)
            assert info.value.code() == code


def test_grpc_answer_with_now_equals_the_in_process_answer(fake: FakeChatServer) -> None:
    import datetime as dt

    def milk() -> Memory:
        m = Memory(HashEmbedder(64), FixedSufficiency(0.9))
        m.add_batch(
            [
                "I prefer oat milk in my coffee.",
                "I switched from oat milk to soy milk.",
                "Maya's cello teacher is Ines.",
            ],
            timestamps=[1_700_000_000, 1_700_172_800, 1_700_200_000],
            speakers=["Maya"] * 3,
        )
        return m

    s2 = ChatCompletionsClient(fake.base_url, "fake", backoff_s=0.001)
    local = milk()
    query = "what milk does Maya drink now?"
    server, _ = serve_memory({"m": milk()}, system_two=s2)
    with server, MemoryClient(server.address, timeout_s=30) as c:
        firsts = set()
        for now in (None, 1_700_100_000, "2023-11-15", dt.datetime(2023, 11, 15), 1_800_000_000):
            want = local.answer(query, 3, system_two=s2, abstain=False, now=now)
            got = c.answer("m", query, 3, now=now, abstain=False)
            assert (got.text, got.cited) == (want.text, want.cited), now
            assert [e.id for e in got.search.evidence] == [e.id for e in want.search.evidence]
            firsts.add(got.search.evidence[0].id)
        assert firsts == {0, 1}  # the time asked for changes which fact is current
