"""bench/locomo_qa.py end to end (its command line) on a two-conversation LoCoMo-layout
sample, against the loopback fake model (answers and judging), including a resume after a
crash; and the answer scores it reports (jevmem.evaluation)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support.bench import run_bench

from jevmem.evaluation import judge_verdict, token_f1
from jevmem.testing import FakeChatServer


def turn(speaker: str, dia: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia, "text": text}


SAMPLE: list[dict[str, Any]] = [
    {
        "sample_id": "conv-a",
        "conversation": {
            "speaker_a": "Caroline",
            "speaker_b": "Melanie",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                turn("Caroline", "D1:1", "I went to the LGBTQ support group yesterday."),
                turn("Melanie", "D1:2", "Wow! I painted a lake sunrise last year."),
                turn("Caroline", "D1:3", "I want to study counselling next year."),
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [
                turn("Melanie", "D2:1", "We went camping at the beach with the kids."),
                turn("Caroline", "D2:2", "My grandmother gave me a necklace from Sweden."),
            ],
        },
        "qa": [
            {
                "question": "When did Caroline go to the LGBTQ support group?",
                "answer": "7 May 2023",
                "evidence": ["D1:1"],
                "category": 2,
            },
            {
                "question": "What did Melanie paint?",
                "answer": "a lake sunrise",
                "evidence": ["D1:2"],
                "category": 4,
            },
            {
                "question": "Where is Caroline's necklace from?",
                "answer": "Sweden",
                "evidence": ["D2:2"],
                "category": 1,
            },
            {
                "question": "What did Caroline paint?",
                "adversarial_answer": "a lake sunrise",
                "evidence": ["D1:2"],
                "category": 5,
            },
        ],
    },
    {
        "sample_id": "conv-b",
        "conversation": {
            "speaker_a": "Jon",
            "speaker_b": "Gina",
            "session_1_date_time": "4:04 pm on 20 January, 2023",
            "session_1": [
                turn("Jon", "D1:1", "I lost my job as a banker last week."),
                turn("Gina", "D1:2", "I'm opening an online clothing store."),
                turn("Jon", "D1:3", "I'll start a dance studio, dancing is my passion."),
            ],
        },
        "qa": [
            {
                "question": "What business is Jon starting?",
                "answer": "a dance studio",
                "evidence": ["D1:3"],
                "category": 4,
            },
            {
                "question": "What does Gina sell online?",
                "answer": "clothing",
                "evidence": ["D1:2"],
                "category": 3,
            },
        ],
    },
]
N_QUESTIONS = 6


@pytest.fixture
def fake() -> Iterator[FakeChatServer]:
    with FakeChatServer() as s:
        yield s


def argv(fake: FakeChatServer, tmp: Path, *extra: str) -> list[str]:
    data = tmp / "sample.json"
    data.write_text(json.dumps(SAMPLE))
    return [
        "--data",
        str(data),
        "--out",
        str(tmp / "qa.jsonl"),
        "--json",
        str(tmp / "summary.json"),
        "--embedder",
        "hash",
        "--base-url",
        fake.base_url,
        "--model",
        "fake-answerer",
        "--judge-model",
        "fake-judge",
        "--backoff-s",
        "0.001",
        *extra,
    ]


def qa_lines(path: Path) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if rec.get("type") == "qa":
            out.append(rec)
    return out


def qa_main(*args: str) -> str:
    """``python bench/locomo_qa.py ARGS``, which must succeed; its standard output."""
    run = run_bench("locomo_qa.py", *args)
    assert run.returncode == 0, run.stderr
    return run.stdout


def test_the_harness_end_to_end_then_resumes(fake: FakeChatServer, tmp_path: Path) -> None:
    printed = qa_main(*argv(fake, tmp_path, "--concurrency", "3"))
    rows = qa_lines(tmp_path / "qa.jsonl")
    assert len(rows) == N_QUESTIONS * 3
    assert {(r["sample_id"], r["qi"], r["system"]) for r in rows} == {
        (c["sample_id"], i, s)
        for c in SAMPLE
        for i in range(len(c["qa"]))
        for s in ("jevmem", "topk", "full_context")
    }
    # answers went to the answer model, verdicts to the judge, through the same endpoint
    models = Counter(r["model"] for r in fake.requests)
    assert models == {"fake-answerer": len(rows) - sum(r["abstained_by"] in ("sufficiency", "no_evidence") for r in rows), "fake-judge": len(rows)}  # fmt: skip
    by = {(r["sample_id"], r["qi"], r["system"]): r for r in rows}
    paint = by[("conv-a", 1, "jevmem")]
    assert paint["answer"] == "Wow! I painted a lake sunrise last year."
    assert paint["correct"] and paint["cited_dia_ids"] == ["D1:2"] and paint["cited_gold"] == 1
    assert paint["f1"] == pytest.approx(token_f1(paint["answer"], "a lake sunrise"))
    assert paint["prompt_tokens"] > 0 and paint["judge_prompt_tokens"] > 0
    assert paint["latency_s"] >= paint["generate_s"] > 0
    assert by[("conv-a", 3, "jevmem")]["f1"] is None  # adversarial: no F1
    # the full-context rows saw every turn of their conversation
    full_prompts = [
        r["messages"][1]["content"]
        for r in fake.requests
        if r["model"] == "fake-answerer" and "[E5]" in r["messages"][1]["content"]
    ]
    assert full_prompts and all("necklace from Sweden" in p for p in full_prompts)
    summary = json.loads((tmp_path / "summary.json").read_text())
    for s in ("jevmem", "topk", "full_context"):
        d = summary["systems"][s]
        assert d["n"] == N_QUESTIONS
        assert d["overall"]["n"] == N_QUESTIONS and d["overall_1_4"]["n"] == 5
        assert 0.0 <= d["overall"]["accuracy"] <= 1.0
        assert d["4"]["n"] == 2 and d["latency_p50_s"] > 0
    assert summary["built"] == 2 and summary["build_s"] > 0
    assert "| jevmem | 6 |" in printed and "build" in printed

    # a crash: the last line half-written, the two before it lost
    path = tmp_path / "qa.jsonl"
    lines = path.read_text().splitlines()
    qa_idx = [i for i, ln in enumerate(lines) if json.loads(ln).get("type") == "qa"]
    lost = {json.loads(lines[i])["key"] for i in qa_idx[-3:]}
    kept = lines[: qa_idx[-3]] + [ln for i, ln in enumerate(lines) if i > qa_idx[-1]]
    path.write_text("\n".join(kept) + "\n" + lines[qa_idx[-1]][:25])
    fake.requests.clear()
    qa_main(*argv(fake, tmp_path, "--concurrency", "1"))
    redone = [r for r in qa_lines(path) if r["key"] in lost]
    assert {r["key"] for r in redone} == lost and len(redone) == 3
    judged = [r for r in fake.requests if r["model"] == "fake-judge"]
    assert len(judged) == 3  # only what was lost
    assert len({r["key"] for r in qa_lines(path)}) == N_QUESTIONS * 3
    # a third run finds everything judged and calls nothing
    fake.requests.clear()
    qa_main(*argv(fake, tmp_path))
    assert fake.requests == []
    # other settings are another run: nothing of the first counts for them
    qa_main(*argv(fake, tmp_path, "--k", "3", "--systems", "jevmem"))
    assert len([r for r in fake.requests if r["model"] == "fake-judge"]) == N_QUESTIONS


def test_failing_answers_are_not_recorded_and_the_run_stops(
    fake: FakeChatServer, tmp_path: Path
) -> None:
    fake.script(*["400"] * 50)
    run = run_bench(
        "locomo_qa.py", *argv(fake, tmp_path, "--max-errors", "2", "--concurrency", "1")
    )
    assert run.returncode != 0 and "rerun the same command" in run.stderr
    assert qa_lines(tmp_path / "qa.jsonl") == []


@pytest.mark.parametrize(
    ("prediction", "gold", "f1"),
    [
        ("7 May 2023", "7 May 2023", 1.0),
        ("The lake sunrise.", "a lake sunrise", 1.0),
        ("a dance studio in town", "dance studio", 2 * 0.5 * 1.0 / (0.5 + 1.0)),  # P 2/4, R 2/2
        ("I don't know.", "Sweden", 0.0),
        ("", "", 1.0),
    ],
)
def test_token_f1(prediction: str, gold: str, f1: float) -> None:
    assert token_f1(prediction, gold) == pytest.approx(f1)


def test_verdicts() -> None:
    assert judge_verdict("CORRECT") is True
    assert judge_verdict("wrong.") is False
    assert judge_verdict("Verdict: **Correct**") is True
    assert judge_verdict("maybe") is None
