"""The jevmem command line: ingest JSONL and LoCoMo-format files, then search."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jevmem.cli import main


def test_ingest_jsonl_and_search(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "obs.jsonl"
    lines = [
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
        "a plain string is an observation too",
    ]
    src.write_text("\n".join(json.dumps(x) for x in lines) + "\n\n")
    mem = tmp_path / "m.jvm"
    assert main(["ingest", str(src), "--memory", str(mem), "--embedder", "hash-64"]) == 0
    assert "ingested 3 observations" in capsys.readouterr().out
    assert (
        main(["search", "who teaches Maya the cello?", "--memory", str(mem), "-k", "2", "--trace"])
        == 0
    )
    out = capsys.readouterr().out
    assert "Maya: Maya started cello lessons" in out.splitlines()[0]
    assert "yesterday' -> 2 March 2026" in out
    assert '"stop_reason"' in out
    # a second ingest of the same file, with the embedder the memory was
    # built with, adds nothing: each line's identity is its idempotency key
    assert main(["ingest", str(src), "--memory", str(mem)]) == 0
    out = capsys.readouterr().out
    assert "(0 new, 3 already held)" in out and "holds 3 nodes" in out
    # a line added anywhere is the only new one
    src.write_text(json.dumps("a new first line") + "\n" + src.read_text())
    assert main(["ingest", str(src), "--memory", str(mem)]) == 0
    assert "holds 4 nodes" in capsys.readouterr().out


def test_ingest_locomo_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = [
        {
            "sample_id": "conv-x",
            "conversation": {
                "speaker_a": "Ann",
                "speaker_b": "Bo",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Pixel"},
                    {
                        "speaker": "Bo",
                        "dia_id": "D1:2",
                        "text": "Cute!",
                        "blip_caption": "a photo of a cat",
                    },
                ],
            },
            "qa": [],
        }
    ]
    src = tmp_path / "locomo.json"
    src.write_text(json.dumps(data))
    mem = tmp_path / "l.jvm"
    assert main(["ingest", str(src), "--memory", str(mem), "--embedder", "hash-64"]) == 0
    capsys.readouterr()
    assert main(["search", "what is the cat called?", "--memory", str(mem), "-k", "2"]) == 0
    out = capsys.readouterr().out
    assert "'dia_id': 'D1:1'" in out and "[image: a photo of a cat]" in out


def test_errors_are_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit, match="no memory"):
        main(["search", "x", "--memory", str(tmp_path / "none.jvm")])
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": ""}\n')
    assert (
        main(["ingest", str(bad), "--memory", str(tmp_path / "b.jvm"), "--embedder", "hash-64"])
        == 2
    )
    assert "InvalidInputError" in capsys.readouterr().err
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{nope\n")
    assert main(["ingest", str(broken), "--memory", str(tmp_path / "c.jvm")]) == 2
    assert "broken.jsonl:1: not JSON" in capsys.readouterr().err
