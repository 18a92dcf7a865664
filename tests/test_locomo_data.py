"""LoCoMo loader, evidence-id repair and retrieval scoring (jevmem.evaluation), and the
retrieval harness (bench/locomo_retrieval.py) run from its command line.

Everything here runs on hand-made data: the real LoCoMo files are not needed.
"""

from __future__ import annotations

import itertools
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support.bench import run_bench

import jevmem
from jevmem import evaluation as ev
from jevmem.errors import InvalidInputError
from jevmem.temporal import parse_timestamp

KNOWN = {"D1:1", "D1:2", "D1:3", "D2:1", "D8:6", "D9:17", "D11:26", "D30:5"}


def repair(raw: list[object]) -> tuple[tuple[str, ...], ev.DropReport]:
    rep = ev.DropReport()
    return ev.repair_evidence(raw, KNOWN, report=rep), rep


# --- evidence-id repair ----------------------------------------------------------------------


def test_canonical_ids_pass_untouched() -> None:
    out, rep = repair(["D1:1", "D2:1"])
    assert out == ("D1:1", "D2:1")
    assert rep.issues == []
    assert (rep.ids_read, rep.ids_kept) == (2, 2)


@pytest.mark.parametrize(
    ("raw", "fixed"),
    [("D:11:26", "D11:26"), ("D30:05", "D30:5"), ("D 1:3", "D1:3"), ("d1:2", "D1:2")],
)
def test_malformed_ids_are_repaired(raw: str, fixed: str) -> None:
    out, rep = repair([raw])
    assert out == (fixed,)
    assert rep.repaired == 1
    assert rep.issues[0].reason == "repaired"
    assert rep.issues[0].result == fixed
    assert rep.dangling == rep.unparsable == 0


def test_surrounding_whitespace_is_not_a_repair() -> None:
    out, rep = repair([" D1:3 "])
    assert out == ("D1:3",)
    assert rep.issues == []


@pytest.mark.parametrize("raw", ["D8:6; D9:17", "D8:6,D9:17", "D8:6 D9:17"])
def test_two_ids_in_one_string_are_split(raw: str) -> None:
    out, rep = repair([raw])
    assert out == ("D8:6", "D9:17")
    assert rep.split == 1
    assert rep.repaired == 0
    assert rep.ids_read == 2


def test_split_pieces_are_repaired_each() -> None:
    out, rep = repair(["D8:6; D:11:26"])
    assert out == ("D8:6", "D11:26")
    assert (rep.split, rep.repaired) == (1, 1)


@pytest.mark.parametrize("raw", ["D", "", "session 3", 17])
def test_unparsable_ids_are_dropped(raw: object) -> None:
    out, rep = repair([raw, "D1:1"])
    assert out == ("D1:1",)
    assert rep.unparsable == 1
    assert rep.ids_read == 1  # an unparsable string holds no id


def test_ids_pointing_at_no_turn_are_dropped() -> None:
    out, rep = repair(["D10:19", "D1:1", "D30:50"])
    assert out == ("D1:1",)
    assert rep.dangling == 2
    assert {i.result for i in rep.issues} == {"D10:19", "D30:50"}


def test_repaired_but_dangling_counts_twice() -> None:
    out, rep = repair(["D:40:01"])
    assert out == ()
    assert (rep.repaired, rep.dangling) == (1, 1)


def test_duplicates_are_dropped_in_order() -> None:
    out, rep = repair(["D2:1", "D1:1", "D2:1", "D02:01"])
    assert out == ("D2:1", "D1:1")
    assert rep.duplicate == 2
    assert rep.repaired == 1


def test_report_merge_and_dict() -> None:
    _, a = repair(["D", "D10:19"])
    _, b = repair(["D:11:26"])
    a.merge(b)
    d = a.as_dict()
    assert (d["unparsable"], d["dangling"], d["repaired"]) == (1, 1, 1)
    assert len(d["issues"]) == 3
    json.dumps(d)  # serialisable
    assert "1 unparsable" in a.summary()


# --- conversations ----------------------------------------------------------------------------


def sample(**over: Any) -> dict[str, Any]:
    s: dict[str, Any] = {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a dog."},
                {
                    "speaker": "Bob",
                    "dia_id": "D1:2",
                    "text": "Look at this!",
                    "blip_caption": "a photo of a red kite",
                    "img_url": ["http://x"],
                },
                {"speaker": "Ann", "dia_id": "D1:3", "text": "Nice kite."},
            ],
            # keys out of numeric order, and a session with a time but no turns
            "session_10_date_time": "9:00 am on 1 July, 2023",
            "session_10": [{"speaker": "Bob", "dia_id": "D10:1", "text": "Back from Rome."}],
            "session_2_date_time": "7:31 pm on 21 May, 2023",
            "session_2": [
                {"speaker": "Bob", "dia_id": "D2:1", "text": "The dog is named Rex."},
                {"speaker": "Ann", "dia_id": "D2:2", "text": "Rex is cute."},
            ],
            "session_3_date_time": "10:00 am on 2 June, 2023",
        },
        "qa": [
            {"question": "What pet?", "answer": "a dog", "evidence": ["D1:1"], "category": 4},
            {"question": "Which year?", "answer": 2023, "evidence": ["D1:1; D2:1"], "category": 2},
            {"question": "Why?", "answer": "because", "evidence": [], "category": 3},
            {"question": "Who?", "answer": "Ann", "evidence": ["D", "D9:9"], "category": 1},
            {
                "question": "What color is Bob's cat?",
                "adversarial_answer": "black",
                "evidence": ["D:1:2"],
                "category": 5,
            },
        ],
    }
    s.update(over)
    return s


def test_parse_conversation_turns_in_session_order() -> None:
    rep = ev.DropReport()
    conv = ev.parse_conversation(sample(), rep)
    assert conv.sample_id == "conv-x"
    assert (conv.speaker_a, conv.speaker_b) == ("Ann", "Bob")
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D10:1"]
    assert [t.session for t in conv.turns] == [1, 1, 1, 2, 2, 10]
    assert [t.index for t in conv.turns] == [0, 1, 2, 0, 1, 0]
    assert [t.position for t in conv.turns] == list(range(6))
    t = conv.turn("D1:2")
    assert t.blip_caption == "a photo of a red kite"
    assert t.memory_text == "Look at this! [image: a photo of a red kite]"
    assert conv.turn("D1:1").memory_text == "I adopted a dog."
    assert t.session_datetime == "1:56 pm on 8 May, 2023"
    assert t.session_timestamp == parse_timestamp("1:56 pm on 8 May, 2023")
    with pytest.raises(KeyError):
        conv.turn("D7:7")


def test_parse_conversation_qas_and_report() -> None:
    rep = ev.DropReport()
    conv = ev.parse_conversation(sample(), rep)
    qa = {q.question: q for q in conv.qas}
    assert len(conv.qas) == 5  # no question is dropped
    assert qa["What pet?"].evidence == ("D1:1",)
    assert qa["Which year?"].answer == "2023"
    assert qa["Which year?"].evidence == ("D1:1", "D2:1")
    assert qa["Why?"].evidence == ()
    assert qa["Who?"].evidence == ()
    adv = qa["What color is Bob's cat?"]
    assert adv.adversarial and adv.category == 5
    assert adv.answer == "black"
    assert adv.evidence == ("D1:2",)
    assert adv.raw_evidence == ("D:1:2",)
    c = rep.counts()
    assert c["questions"] == 5
    assert c["split"] == 1
    assert c["unparsable"] == 1
    assert c["dangling"] == 1
    assert c["repaired"] == 1
    assert c["qa_no_evidence"] == 1
    assert c["qa_all_dropped"] == 1
    assert c["session_time_unparsable"] == 0


def test_unparsable_session_time_gives_no_timestamp() -> None:
    s = sample()
    s["conversation"]["session_2_date_time"] = "sometime in spring"
    rep = ev.DropReport()
    conv = ev.parse_conversation(s, rep)
    assert conv.turn("D2:1").timestamp is None
    assert conv.turn("D1:1").timestamp is not None
    assert rep.session_time_unparsable == 1


def test_load_file(tmp_path: Path) -> None:
    p = tmp_path / "l.json"
    p.write_text(json.dumps([sample(), sample(sample_id="conv-y")]))
    convs, rep = ev.load(p)
    assert [c.sample_id for c in convs] == ["conv-x", "conv-y"]
    assert rep.questions == 10 and rep.dangling == 2


def _malformed(change: Any) -> dict[str, Any]:
    s = sample()
    change(s)
    return s


MALFORMED = [
    (lambda s: s.pop("conversation"), "'conv-x' #0: conversation is missing"),
    (lambda s: s.__setitem__("conversation", []), "conversation must be an object, got list"),
    (
        lambda s: s["conversation"]["session_1"][0].pop("dia_id"),
        r"conversation\.session_1\[0\]\.dia_id is missing",
    ),
    (
        lambda s: s["conversation"]["session_2"].__setitem__(1, "hello"),
        r"conversation\.session_2\[1\] must be an object, got str",
    ),
    (
        lambda s: s["conversation"].__setitem__("session_1", "hello"),
        "conversation.session_1 must be a list, got str",
    ),
    (
        lambda s: s["conversation"].__setitem__("session_1", None),
        "conversation.session_1 must be a list, got null",
    ),
    (
        # str(None) was kept: a model was trained on the word "None"
        lambda s: s["conversation"]["session_1"][0].__setitem__("text", None),
        r"conversation\.session_1\[0\]\.text must be a str, got null",
    ),
    (
        lambda s: s["conversation"]["session_1"][0].__setitem__("text", 42),
        r"conversation\.session_1\[0\]\.text must be a str, got int",
    ),
    (lambda s: s["qa"][1].pop("question"), r"qa\[1\]\.question is missing"),
    (lambda s: s["qa"][0].pop("category"), r"qa\[0\]\.category is missing"),
    (lambda s: s["qa"][0].__setitem__("category", "x"), r"qa\[0\]\.category must be an integer"),
    (lambda s: s["qa"][0].__setitem__("category", 2.7), r"qa\[0\]\.category must be an integer"),
    (lambda s: s["qa"][0].__setitem__("evidence", 5), r"qa\[0\]\.evidence must be a list"),
    (lambda s: s.__setitem__("qa", {"question": "q"}), "qa must be a list, got dict"),
    (lambda s: s.__setitem__("qa", None), "qa must be a list, got null"),
    (lambda s: s.__setitem__("qa", ["q?"]), r"qa\[0\] must be an object, got str"),
]


@pytest.mark.parametrize(("change", "message"), MALFORMED)
def test_a_malformed_sample_is_refused_naming_the_sample_and_field(
    change: Any, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        ev.load_samples([_malformed(change)])


def test_a_malformed_file_is_refused_and_a_missing_one_is_not_found(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    unnamed = sample(sample_id="")
    unnamed["qa"][0]["category"] = "four"
    for text, message in (
        (b"{oops", "not JSON"),
        (b"\xff\xfe\xfd", "not JSON"),
        (b"[" * 100_000, "not JSON"),
        (b'{"a": 1}', "samples must be a list of objects, got dict"),
        (b"[[1, 2]]", "sample #0: the sample must be an object, got list"),
        (json.dumps([sample(), unnamed]).encode(), r"sample #1: qa\[0\]\.category"),
    ):
        bad.write_bytes(text)
        with pytest.raises(InvalidInputError, match=message) as info:
            ev.load(bad)
        assert str(bad) in str(info.value)
    with pytest.raises(FileNotFoundError):
        ev.load(tmp_path / "missing.json")


def test_a_str_evidence_is_one_id_and_integral_categories_are_read() -> None:
    s = sample()
    s["qa"][0]["evidence"] = "D1:1"
    s["qa"][1]["category"] = "2"
    s["qa"][2]["category"] = 3.0
    s["qa"][2]["evidence"] = None
    convs, rep = ev.load_samples([s])
    qa = convs[0].qas
    assert qa[0].evidence == ("D1:1",) and qa[0].raw_evidence == ("D1:1",)
    assert (qa[1].category, qa[2].category, qa[2].evidence) == (2, 3, ())
    assert rep.unparsable == 1  # only the "D" of "Who?", not the letters of "D1:1"


def test_duplicate_dia_ids_are_counted_and_evidence_names_the_first() -> None:
    s = sample()
    s["conversation"]["session_2"][1]["dia_id"] = "D1:01"  # D1:1 again, once canonical
    convs, rep = ev.load_samples([s])
    conv = convs[0]
    assert len(conv.turns) == 6  # both turns are kept
    assert rep.duplicate_dia_id == 1 and rep.counts()["duplicate_dia_id"] == 1
    (issue,) = [i for i in rep.issues if i.reason == "duplicate_dia_id"]
    assert (issue.sample_id, issue.raw, issue.result) == ("conv-x", "D1:01", "D1:1")
    assert conv.turn("D1:1").text == "I adopted a dog."
    assert "1 turns repeat an earlier turn's dia_id" in rep.summary()
    assert ev.load_samples([sample()])[1].duplicate_dia_id == 0


# --- timestamps -------------------------------------------------------------------------------


def test_timestamps_follow_turn_order() -> None:
    conv = ev.parse_conversation(sample())
    ts = [t.timestamp for t in conv.turns if t.timestamp is not None]
    assert len(ts) == len(conv.turns)
    assert ts == sorted(ts) and len(set(ts)) == len(ts)
    base = parse_timestamp("7:31 pm on 21 May, 2023")
    assert conv.turn("D2:1").timestamp == base
    assert conv.turn("D2:2").timestamp == base + ev.TURN_STEP_S


@given(
    sizes=st.lists(st.integers(1, 60), min_size=1, max_size=8),
    gaps_h=st.lists(st.integers(1, 24 * 60), min_size=8, max_size=8),
)
def test_timestamps_strictly_increase_with_position(sizes: list[int], gaps_h: list[int]) -> None:
    t0 = parse_timestamp("2023-01-01T09:00:00Z")
    conv: dict[str, Any] = {"speaker_a": "A", "speaker_b": "B"}
    at = t0
    for n, size in enumerate(sizes, 1):
        at += gaps_h[n - 1] * 3600
        conv[f"session_{n}_date_time"] = f"{ld_iso(at)}"
        conv[f"session_{n}"] = [
            {"speaker": "AB"[i % 2], "dia_id": f"D{n}:{i + 1}", "text": f"t{i}"}
            for i in range(size)
        ]
    c = ev.parse_conversation({"sample_id": "s", "conversation": conv, "qa": []})
    ts = [t.timestamp for t in c.turns]
    assert len(ts) == sum(sizes)
    assert all(a is not None and b is not None and a < b for a, b in itertools.pairwise(ts))
    for t in c.turns:  # every turn stays inside its session's hour
        assert t.session_timestamp is not None and t.timestamp is not None
        assert 0 <= t.timestamp - t.session_timestamp < 3600


def ld_iso(ts: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- recall / all / any -----------------------------------------------------------------------


def test_hits_at_k() -> None:
    retrieved: list[str | None] = ["D1:1", None, "D2:1", "D1:1", "D3:3", "D4:4"]
    h = ev.hits_at_k(retrieved, ["D2:1", "D4:4"], 3)
    assert (h.found, h.gold) == (1, 2)
    assert h.recall == 0.5 and h.any and not h.all
    h = ev.hits_at_k(retrieved, ["D2:1", "D4:4"], 10)
    assert h.recall == 1.0 and h.all
    h = ev.hits_at_k(retrieved, ["D9:9"], 10)
    assert h.recall == 0.0 and not h.any and not h.all
    h = ev.hits_at_k(retrieved, [], 10)
    assert math.isnan(h.recall) and not h.all and not h.any
    # a gold id listed twice counts once
    assert ev.hits_at_k(retrieved, ["D1:1", "D1:1"], 1).recall == 1.0
    # a node that holds several turns (as_blocks) counts for each of them
    h = ev.hits_at_k(["D1:1,D1:2", "D2:1"], ["D1:2", "D2:1", "D1:1"], 1)
    assert (h.found, h.gold) == (2, 3)


def test_aggregate_by_hand() -> None:
    top: list[str | None] = [f"D1:{i}" for i in range(1, 21)]  # D1:1 .. D1:20 in rank order
    rows: list[tuple[list[str | None], tuple[str, ...]]] = [
        (top, ("D1:1",)),  # rank 1: recall 1 at 5, 10, 20
        (top, ("D1:3", "D1:8")),  # 0.5 at 5, 1 at 10
        (top, ("D1:15", "D1:99")),  # 0 at 5 and 10, 0.5 at 20
        (top, ("D2:1",)),  # never
        (top, ()),  # no gold: not scored
    ]
    a = ev.aggregate(rows)
    assert a["n"] == 4 and a["no_gold"] == 1
    assert a["recall@5"] == pytest.approx((1 + 0.5 + 0 + 0) / 4)
    assert a["recall@10"] == pytest.approx((1 + 1 + 0 + 0) / 4)
    assert a["recall@20"] == pytest.approx((1 + 1 + 0.5 + 0) / 4)
    assert a["all_evidence@10"] == pytest.approx(2 / 4)
    assert a["any_evidence@10"] == pytest.approx(2 / 4)


def test_aggregate_empty() -> None:
    a = ev.aggregate([([], ())])
    assert a["n"] == 0 and a["recall@10"] is None and a["all_evidence@10"] is None


# --- AUROC ------------------------------------------------------------------------------------


def brute_auroc(pos: list[float], neg: list[float]) -> float:
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


@given(
    pos=st.lists(st.integers(0, 6).map(lambda x: x / 6), min_size=1, max_size=30),
    neg=st.lists(st.integers(0, 6).map(lambda x: x / 6), min_size=1, max_size=30),
)
def test_auroc_matches_pairwise_count_with_ties(pos: list[float], neg: list[float]) -> None:
    got = ev.auroc(pos, neg)
    assert got == pytest.approx(brute_auroc(pos, neg), abs=1e-12)
    # AUROC of (1 - s) with the classes swapped is the same number (what abstain_auroc uses)
    assert ev.auroc([1 - x for x in neg], [1 - x for x in pos]) == pytest.approx(got, abs=1e-12)


@given(
    pos=st.lists(st.floats(0, 1), min_size=1, max_size=40),
    neg=st.lists(st.floats(0, 1), min_size=1, max_size=40),
)
def test_auroc_matches_pairwise_count(pos: list[float], neg: list[float]) -> None:
    got = ev.auroc(pos, neg)
    assert got is not None
    assert got == pytest.approx(brute_auroc(pos, neg), abs=1e-12)
    # swapping the classes mirrors the score: AUROC(1 - s) for the other class
    assert ev.auroc(neg, pos) == pytest.approx(1 - got, abs=1e-12)


def test_auroc_edges() -> None:
    assert ev.auroc([], [0.5]) is None and ev.auroc([0.5], []) is None
    assert ev.auroc([0.9, 0.8], [0.1, 0.2]) == 1.0
    assert ev.auroc([0.1], [0.9]) == 0.0
    assert ev.auroc([0.5, 0.5], [0.5]) == 0.5


def test_percentile() -> None:
    assert ev.percentile([], 0.5) is None
    assert ev.percentile([3.0], 0.99) == 3.0
    assert ev.percentile([4.0, 1.0, 3.0, 2.0], 0.5) == 2.5
    assert ev.percentile([float(i) for i in range(101)], 0.99) == pytest.approx(99.0)


# --- the harness on the baseline backend, on hand-made data ----------------------------------


def test_conversation_inputs() -> None:
    conv = ev.parse_conversation(sample())
    texts, ts, spk, provs = ev.conversation_inputs(conv)
    assert texts[1] == "Look at this! [image: a photo of a red kite]"
    assert ts == [t.timestamp for t in conv.turns]
    assert spk[:3] == ["Ann", "Bob", "Ann"]
    assert provs[3] == {"dia_id": "D2:1", "session": "2", "speaker": "Bob", "sample_id": "conv-x"}
    texts, *_ = ev.conversation_inputs(conv, speaker_in_text=True)
    assert texts[0] == "Ann: I adopted a dog."


#: where `as_messages` may cut a turn: after a sentence's end, or at a line break
CUT = re.compile(r"[.!?]\s|\n")


def one_session(turns: list[dict[str, Any]]) -> ev.Conversation:
    """`sample`'s conversation with ``turns`` as its one session."""
    return ev.parse_conversation(
        sample(
            conversation={
                "speaker_a": "Ann",
                "speaker_b": "Bob",
                "session_1_date_time": "1:56 pm on 8 May, 2023",
                "session_1": turns,
            }
        )
    )


def test_as_messages_sends_each_turn_as_a_burst() -> None:
    conv = one_session(
        [
            {
                "speaker": "Ann",
                "dia_id": "D1:1",
                "text": "I adopted a dog. His name is Rex!\nHe is three.",
            },
            {
                "speaker": "Bob",
                "dia_id": "D1:2",
                "text": "Look at this! A kite.",
                "blip_caption": "a photo of a red kite",
            },
        ]
    )
    short = ev.as_messages(conv, max_chars=21)
    assert [(t.dia_id, t.text) for t in short.turns] == [
        ("D1:1", "I adopted a dog."),
        ("D1:1", "His name is Rex!"),
        ("D1:1", "He is three."),
        ("D1:2", "Look at this! A kite."),
    ]
    # the photo goes with the burst's last message; a burst shares its turn's time
    assert [t.blip_caption for t in short.turns] == [None, None, None, "a photo of a red kite"]
    assert {t.timestamp for t in short.turns[:3]} == {conv.turns[0].timestamp}
    assert [t.position for t in short.turns] == [0, 1, 2, 3]
    assert short.qas == conv.qas
    # a long limit packs a turn's sentences back into one message
    assert [t.text for t in ev.as_messages(conv).turns] == [
        "I adopted a dog. His name is Rex! He is three.",
        "Look at this! A kite.",
    ]
    with pytest.raises(ValueError, match="max_chars"):
        ev.as_messages(conv, max_chars=0)


@given(
    texts=st.lists(st.text(st.sampled_from("ab .!?\n"), max_size=60), min_size=1, max_size=5),
    limit=st.integers(1, 30),
)
def test_as_messages_keeps_every_word_in_order(texts: list[str], limit: int) -> None:
    turns = [{"speaker": "Ann", "dia_id": f"D1:{i + 1}", "text": t} for i, t in enumerate(texts)]
    conv = one_session(turns)
    out = ev.as_messages(conv, max_chars=limit)
    for turn in conv.turns:
        burst = [m for m in out.turns if m.dia_id == turn.dia_id]
        assert burst, "every turn is sent"
        assert " ".join(m.text for m in burst).split() == turn.text.split()
        # a message over the limit is one sentence or line, which is never cut
        if turn.text.split():
            for m in burst:
                assert len(m.text) <= limit or CUT.search(m.text) is None
    # bursts follow the turns' order
    order = [m.dia_id for m in out.turns]
    assert order == sorted(order, key=lambda d: int(d.split(":")[1]))


def test_as_blocks_packs_a_sessions_turns_into_long_observations() -> None:
    conv = ev.parse_conversation(sample())
    blocks = ev.as_blocks(conv, max_chars=80)
    assert [(t.dia_id, t.text) for t in blocks.turns] == [
        (
            "D1:1,D1:2",
            "Ann: I adopted a dog.\nBob: Look at this! [image: a photo of a red kite]",
        ),
        ("D1:3", "Ann: Nice kite."),
        ("D2:1,D2:2", "Bob: The dog is named Rex.\nAnn: Rex is cute."),
        ("D10:1", "Bob: Back from Rome."),
    ]
    # no speaker of its own, its first turn's time, the same questions
    assert {t.speaker for t in blocks.turns} == {""}
    assert [t.timestamp for t in blocks.turns] == [
        conv.turn(d).timestamp for d in ("D1:1", "D1:3", "D2:1", "D10:1")
    ]
    assert blocks.qas == conv.qas
    # a turn longer than the limit is a block of its own; every turn is in one block
    one_each = ev.as_blocks(conv, max_chars=1)
    assert [t.dia_id for t in one_each.turns] == [t.dia_id for t in conv.turns]
    with pytest.raises(ValueError, match="max_chars"):
        ev.as_blocks(conv, max_chars=0)


def test_as_notes_and_as_pages_are_blocks_of_one_turn_and_of_pages() -> None:
    conv = ev.parse_conversation(sample())
    notes = ev.as_notes(conv)
    # one speakerless note per turn, its speaker in its text
    assert [t.dia_id for t in notes.turns] == [t.dia_id for t in conv.turns]
    assert {t.speaker for t in notes.turns} == {""}
    assert notes.turns[0].text == "Ann: I adopted a dog."
    pages = ev.as_pages(conv)
    # a session per page here (every session is short); a page never spans two
    assert [t.dia_id for t in pages.turns] == ["D1:1,D1:2,D1:3", "D2:1,D2:2", "D10:1"]
    assert pages == ev.as_blocks(conv, max_chars=4000)
    assert set(ev.RESTYLES) == {
        *("turns", "messages", "blocks", "notes", "pages", "untimed", "texting", "stream"),
        "stream_late",
    }
    untimed = ev.RESTYLES["untimed"](conv)
    assert [(t.dia_id, t.speaker, t.text) for t in untimed.turns] == [
        (t.dia_id, t.speaker, t.text) for t in conv.turns
    ]
    assert {t.timestamp for t in untimed.turns} == {None} and untimed.qas == conv.qas
    assert ev.RESTYLES["notes"](conv) == notes


def test_as_texting_restyles_the_turns_and_keeps_the_questions() -> None:
    assert (
        ev.texted("Are you coming tomorrow? I'm sure, because it's great - really!")
        == "r u coming tmrw im sure cuz its great - rly"
    )
    # only whole words are shortened; digits and inner punctuation stay
    assert ev.texted("Youth and yours: 3.5 km at 10:30.") == "youth n yours 3.5 km at 10:30"
    conv = ev.parse_conversation(sample())
    texting = ev.RESTYLES["texting"](conv)
    messages = ev.as_messages(conv)
    assert [(t.dia_id, t.speaker, t.timestamp) for t in texting.turns] == [
        (t.dia_id, t.speaker, t.timestamp) for t in messages.turns
    ]
    assert [t.text for t in texting.turns] == [ev.texted(t.text) for t in messages.turns]
    assert texting.qas == conv.qas


def test_as_stream_gives_each_turn_its_own_time_and_no_session() -> None:
    conv = ev.parse_conversation(sample())
    stream = ev.RESTYLES["stream"](conv)
    # the same turns and questions
    assert [(t.dia_id, t.speaker, t.memory_text) for t in stream.turns] == [
        (t.dia_id, t.speaker, t.memory_text) for t in conv.turns
    ]
    assert stream.qas == conv.qas
    # a session's first turn at the session's time, each later one 5 s
    # plus a quarter second a character (its caption included) after the
    # one before it, rounded down
    start: dict[int, int] = {}
    for t in conv.turns:
        assert t.session_timestamp is not None
        start[t.session] = t.session_timestamp
    assert [t.timestamp for t in stream.turns] == [
        start[1],
        start[1] + 16,  # "Look at this! [image: a photo of a red kite]": 44 characters
        start[1] + 16 + 7,  # "Nice kite.": 10
        start[2],
        start[2] + 8,  # "Rex is cute.": 12
        start[10],
    ]
    # at most ten minutes between two turns, however long the second
    long = ev.parse_conversation(
        sample(
            conversation={
                "speaker_a": "Ann",
                "speaker_b": "Bob",
                "session_1_date_time": "11:58 pm on 8 May, 2023",
                "session_1": [
                    {"speaker": "Ann", "dia_id": "D1:1", "text": "Hi."},
                    {"speaker": "Bob", "dia_id": "D1:2", "text": "x" * 10_000},
                ],
            }
        )
    )
    first, second = ev.as_stream(long).turns
    assert second.timestamp - first.timestamp == 600  # type: ignore[operator]
    # past midnight: another calendar day, as a late session's end is
    assert (first.timestamp // 86_400) + 1 == second.timestamp // 86_400  # type: ignore[operator]
    # a memory is told no session; the released turns keep theirs
    _, ts, _, provs = ev.conversation_inputs(stream)
    assert ts == [t.timestamp for t in stream.turns]
    assert all("session" not in p and p["dia_id"] for p in provs)
    assert [p["session"] for p in ev.conversation_inputs(conv)[3]] == [
        *("1", "1", "1", "2", "2", "10")
    ]
    # untimed turns stay untimed
    untimed = ev.as_stream(ev.as_untimed(conv))
    assert {t.timestamp for t in untimed.turns} == {None}
    # late: each session starts at 23:55 UTC of its day, so it runs past midnight
    late = ev.RESTYLES["stream_late"](conv)
    assert [t.timestamp - s.timestamp for t, s in zip(late.turns, stream.turns, strict=True)] == [  # type: ignore[operator]
        start[t.session] % 86_400 * -1 + 86_100 for t in conv.turns
    ]
    first, second = ev.RESTYLES["stream_late"](long).turns
    assert first.timestamp % 86_400 == 86_100  # type: ignore[operator]
    assert second.timestamp // 86_400 == first.timestamp // 86_400 + 1  # type: ignore[operator]


def test_merged_joins_conversations_into_one_longer_log() -> None:
    x = ev.parse_conversation(sample())
    y = ev.parse_conversation(sample(sample_id="conv-y"))
    z = ev.parse_conversation(sample(sample_id="conv-z"))
    two, one = ev.merged([x, y, z], 2)
    assert (two.sample_id, one.sample_id) == ("conv-x+conv-y", "conv-z")
    assert one == z  # a group of one is the conversation as it was
    # y's sessions follow x's (x's last is session 10): ids stay unique
    assert [t.dia_id for t in two.turns] == [
        *("D1:1", "D1:2", "D1:3", "D2:1", "D2:2", "D10:1"),
        *("D11:1", "D11:2", "D11:3", "D12:1", "D12:2", "D20:1"),
    ]
    assert [t.session for t in two.turns[6:]] == [11, 11, 11, 12, 12, 20]
    assert [t.position for t in two.turns] == list(range(12))
    # texts, speakers and times unchanged; questions renumbered with their turns
    assert [(t.text, t.speaker, t.timestamp) for t in two.turns] == [
        (t.text, t.speaker, t.timestamp) for t in (*x.turns, *y.turns)
    ]
    assert len(two.qas) == len(x.qas) + len(y.qas)
    for qa, was, conv in zip(two.qas, (*x.qas, *y.qas), [x] * 5 + [y] * 5, strict=True):
        assert qa.question == was.question and qa.category == was.category
        assert [two.turn(e).text for e in qa.evidence] == [conv.turn(e).text for e in was.evidence]
    assert ev.merged([x, y], 1) == [x, y]
    with pytest.raises(ValueError, match="per_memory"):
        ev.merged([x], 0)


def test_interleaved_holds_conversations_as_one_group_chat() -> None:
    x = ev.parse_conversation(sample())
    y = ev.merged([ev.parse_conversation(sample(sample_id="conv-y"))] * 2, 2)[0]
    (group,) = ev.interleaved([x, y], 2)
    assert group.sample_id == "conv-x|conv-y+conv-y"
    # session by session, the two take turns; x's 3 turns of session 1 with y's 3
    assert [t.dia_id for t in group.turns[:6]] == [
        *("D1:1", "D11:1", "D1:2", "D11:2", "D1:3", "D11:3")
    ]
    assert [t.position for t in group.turns] == list(range(len(x.turns) + len(y.turns)))
    assert len({t.dia_id for t in group.turns}) == len(group.turns)
    # one session each k, on x's date; y's sessions past x's last follow a day apart
    x_dates = {t.session: t.session_timestamp for t in x.turns}
    for t in group.turns:
        if t.session in x_dates:
            assert t.session_timestamp == x_dates[t.session]
    late = sorted({(t.session, t.session_timestamp) for t in group.turns if t.session > 10})
    assert [ts - x_dates[10] for _, ts in late] == [86_400 * (i + 1) for i in range(len(late))]  # type: ignore[operator]
    # the turns of a session keep their order in time, and ids their texts and speakers
    times = [t.timestamp or 0 for t in group.turns if t.session == 1]
    assert times == sorted(times) and len(set(times)) == len(times) and times[0] > 0
    by_id = {t.dia_id: (t.text, t.speaker) for t in x.turns}
    assert all(by_id[t.dia_id] == (t.text, t.speaker) for t in group.turns if t.dia_id in by_id)
    # every question keeps its gold turns' texts
    assert len(group.qas) == len(x.qas) + len(y.qas)
    for qa, was, conv in zip(
        group.qas, (*x.qas, *y.qas), [x] * len(x.qas) + [y] * len(y.qas), strict=True
    ):
        assert [group.turn(e).text for e in qa.evidence] == [
            conv.turn(e).text for e in was.evidence
        ]
    assert ev.interleaved([x, y], 1) == [x, y]
    with pytest.raises(ValueError, match="per_memory"):
        ev.interleaved([x], 0)


def test_interleaved_threads_apart_keep_their_own_sessions() -> None:
    x = ev.parse_conversation(sample())
    y = ev.parse_conversation(sample(sample_id="conv-y"))
    (shared,) = ev.interleaved([x, y], 2)
    (apart,) = ev.interleaved([x, y], 2, threads_apart=True)
    # the same turns in the same order at the same times, the same questions
    assert [(t.dia_id, t.text, t.speaker, t.timestamp) for t in apart.turns] == [
        (t.dia_id, t.text, t.speaker, t.timestamp) for t in shared.turns
    ]
    assert apart.qas == shared.qas
    # but each conversation's turns in a session of its own: their dia_id's
    for t in apart.turns:
        assert t.session == int(t.dia_id[1:].split(":")[0])
    assert {t.session for t in apart.turns if t.dia_id.startswith("D1:")} == {1}
    assert {t.session for t in apart.turns[:6]} == {1, 11}
    _, _, _, provs = ev.conversation_inputs(apart)
    assert [p["session"] for p in provs[:4]] == ["1", "11", "1", "11"]
    _, _, _, provs = ev.conversation_inputs(shared)
    assert [p["session"] for p in provs[:4]] == ["1", "1", "1", "1"]


def test_harness_merges_before_it_restyles(tmp_path: Path) -> None:
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample(), sample(sample_id="conv-y")]))
    out = tmp_path / "out.json"
    argv = ["--data", str(data), "--backend", "baseline", "--embedder", "hash", "--merge", "2"]
    run = run_bench("locomo_retrieval.py", *argv, "--style", "pages", "--json", str(out))
    assert run.returncode == 0, run.stderr
    res = json.loads(out.read_text())
    assert (res["conversations"], res["merge"], res["turns"], res["questions"]) == (1, 2, 6, 10)
    # both conversations' gold turns are found in the one memory of six pages
    assert res["modes"]["anchors"]["overall_1_4"]["recall@20"] == 1.0
    assert list(res["modes"]["lexical"]["per_conversation"]) == ["conv-x+conv-y"]
    bad = run_bench("locomo_retrieval.py", *argv[:-1], "0")
    assert bad.returncode != 0 and "--merge must be >= 1" in bad.stderr


def test_harness_holds_conversations_as_one_group_chat(tmp_path: Path) -> None:
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample(), sample(sample_id="conv-y")]))
    out = tmp_path / "out.json"
    argv = ["--data", str(data), "--backend", "baseline", "--embedder", "hash"]
    run = run_bench("locomo_retrieval.py", *argv, "--interleave", "2", "--json", str(out))
    assert run.returncode == 0, run.stderr
    res = json.loads(out.read_text())
    assert (res["conversations"], res["interleave"], res["turns"], res["questions"]) == (
        1,
        2,
        12,
        10,
    )
    assert list(res["modes"]["lexical"]["per_conversation"]) == ["conv-x|conv-y"]
    for flags, said in (
        (["--interleave", "0"], "--interleave must be >= 1"),
        (["--interleave", "2", "--merge", "2"], "do not go together"),
    ):
        bad = run_bench("locomo_retrieval.py", *argv, *flags)
        assert bad.returncode != 0 and said in bad.stderr


def generated_conversation(
    n_turns: int, spans: list[tuple[int, int]], adversarial: int
) -> ev.Conversation:
    """A conversation of ``n_turns`` turns whose questions have evidence at
    the turn indices ``spans`` name (first, last), plus ``adversarial``
    questions about nothing said and one answerable question without
    evidence."""
    turns = tuple(
        ev.Turn(f"D1:{i + 1}", "Ann" if i % 2 else "Bo", f"turn {i}", None, 1, i, i, "", None)
        for i in range(n_turns)
    )
    qas = [
        ev.QA(f"q{j}", "a", 4, tuple(turns[k].dia_id for k in sorted({a, b})), False)
        for j, (a, b) in enumerate(spans)
    ]
    qas += [ev.QA(f"adv{j}", None, ev.ADVERSARIAL, (), True) for j in range(adversarial)]
    qas.append(ev.QA("no evidence", "a", 1, (), False))
    return ev.Conversation("conv-g", "Ann", "Bo", turns, tuple(qas))


@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(
            st.just(n),
            st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=8),
            st.integers(0, 3),
            st.integers(1, 45),
        )
    )
)
def test_windows_hold_each_questions_evidence(
    case: tuple[int, list[tuple[int, int]], int, int],
) -> None:
    n, spans, adversarial, size = case
    conv = generated_conversation(n, spans, adversarial)
    got = ev.windows(conv, size)
    assert got == ev.windows(conv, size)  # the same windows every time
    kept = [w.qas[0] for w in got]
    # in question order: the answerable ones whose evidence fits, every adversarial one
    want = [
        qa
        for qa in conv.qas
        if qa.category == ev.ADVERSARIAL
        or (
            qa.evidence
            and max(int(e.split(":")[1]) for e in qa.evidence)
            - min(int(e.split(":")[1]) for e in qa.evidence)
            < size
        )
    ]
    assert kept == want
    for w in got:
        assert len(w.qas) == 1 and w.sample_id == conv.sample_id
        assert (w.speaker_a, w.speaker_b) == (conv.speaker_a, conv.speaker_b)
        # consecutive turns of the conversation, as they were
        first = conv.turns.index(w.turns[0])
        assert w.turns == conv.turns[first : first + min(size, n)]
        assert set(w.qas[0].evidence) <= {t.dia_id for t in w.turns}
    with pytest.raises(ValueError, match="size"):
        ev.windows(conv, 0)


def test_harness_runs_a_memory_per_question_in_windows(tmp_path: Path) -> None:
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample()]))
    out = tmp_path / "out.json"
    argv = ["--data", str(data), "--backend", "baseline", "--embedder", "hash", "--window"]
    run = run_bench("locomo_retrieval.py", *argv, "2", "--json", str(out))
    assert run.returncode == 0, run.stderr
    res = json.loads(out.read_text())
    conv = ev.parse_conversation(sample())
    want = ev.windows(conv, 2)
    # a memory of two turns per question kept; the gold turn is always among them
    assert (res["window"], res["conversations"], res["questions"]) == (2, len(want), len(want))
    assert res["turns"] == sum(len(w.turns) for w in want)
    assert res["modes"]["anchors"]["overall_1_4"]["recall@20"] == 1.0
    bad = run_bench("locomo_retrieval.py", *argv, "0")
    assert bad.returncode != 0 and "--window must be >= 1" in bad.stderr


def qa_of(ability: str | None, *evidence: str) -> ev.QA:
    return ev.QA("q", None, 1, evidence, False, evidence, ability)


def test_update_pairs_linked_by_hand() -> None:
    ku, cr = ev.UPDATE_ABILITIES
    qas = [
        qa_of(ku, "D1:1", "D3:2"),  # linked old -> new: found
        qa_of(ku, "D2:5", "D4:1", "D4:2"),  # two of three linked, through a block: found
        qa_of(ku, "D1:2", "D1:3"),  # no link joins them
        qa_of(ku, "D1:4"),  # one gold turn: not a change to find
        qa_of(cr, "D5:1", "D5:2"),  # each gold turn linked, but not to the other
        qa_of("temporal_reasoning", "D1:1", "D3:2"),  # not an update ability
        qa_of(None, "D1:1", "D3:2"),
    ]
    links = [("D3:2", "D1:1"), ("D4:1,D4:2", "D2:5"), ("D6:1", "D5:1"), ("D5:2", "D2:9")]
    assert ev.update_pairs_linked(links, qas) == {ku: (3, 2), cr: (1, 0)}
    # a link either way round counts the same; no links find nothing
    flipped = [(old, new) for new, old in links]
    assert ev.update_pairs_linked(flipped, qas) == {ku: (3, 2), cr: (1, 0)}
    assert ev.update_pairs_linked([], qas) == {ku: (3, 0), cr: (1, 0)}
    assert ev.update_pairs_linked(links, qas, abilities=("temporal_reasoning",)) == {
        "temporal_reasoning": (1, 1)
    }


def test_update_order_by_hand() -> None:
    rows = [
        (["D2:5", "D1:3"], ("D1:3", "D2:5")),  # the newest first, at 1
        (["D1:3", "D9:9", "D2:5"], ("D2:5", "D1:3")),  # the oldest first
        (["D1:3,D2:5"], ("D1:3", "D2:5")),  # one block: a tie, the newest at 1
        (["D1:10", "D1:2"], ("D1:2", "D1:10", "D1:1")),  # D1:1 oldest, not retrieved
        ([], ("D1:1", "D1:2")),  # neither retrieved: a tie
        (["D9:9"], ("D1:1",)),  # one gold turn: not counted
    ]
    assert ev.update_order(rows) == {
        "questions": 5,
        "newest_first": 2,
        "oldest_first": 1,
        "newest_at_1": 3,
    }


@given(
    st.lists(st.sampled_from([f"D{s}:{t}" for s in (1, 2) for t in (1, 2, 10)]), unique=True),
    st.lists(st.sampled_from([f"D{s}:{t}" for s in (1, 2) for t in (1, 2, 10)]), unique=True),
)
def test_update_order_counts_each_question_once_and_reverses(
    retrieved: list[str], evidence: list[str]
) -> None:
    got = ev.update_order([(retrieved, evidence)])
    counted = len(evidence) >= 2
    assert got["questions"] == int(counted)
    assert got["newest_first"] + got["oldest_first"] <= got["questions"]
    # the retrieved list reversed: what ranked the newest first ranks it last
    both = set(evidence) <= set(retrieved)
    back = ev.update_order([(retrieved[::-1], evidence)])
    if counted and both:
        assert (back["newest_first"], back["oldest_first"]) == (
            got["oldest_first"],
            got["newest_first"],
        )


def test_harness_end_to_end_on_baseline(tmp_path: Path) -> None:
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample(), sample(sample_id="conv-y")]))
    out = tmp_path / "out.json"
    argv = ["--data", str(data), "--backend", "baseline", "--embedder", "hash"]
    run = run_bench("locomo_retrieval.py", *argv, "--json", str(out))
    assert run.returncode == 0, run.stderr
    res = json.loads(out.read_text())
    assert set(res["modes"]) == {"lexical", "anchors"}
    lex = res["modes"]["lexical"]
    # per conversation, 2 of the 4 answerable questions have gold evidence left
    assert lex["overall_1_4"]["n"] == 4
    assert lex["5"]["n"] == 2
    assert lex["abstain_auroc"] is None  # no controller, no sufficiency
    assert lex["controller_calls_per_query"] == 0
    assert res["controller_calls_per_write"] == 0
    assert res["turns"] == 12 and res["questions"] == 10
    assert res["build_s_no_embed"] is not None and res["embed_s"] is not None
    assert res["dropped"]["dangling"] == 2
    anchors = res["modes"]["anchors"]
    # six turns per memory: top 20 holds them all, so every gold id is found
    assert anchors["overall_1_4"]["recall@20"] == 1.0
    assert "| lexical |" in run.stdout and "| anchors |" in run.stdout


def test_harness_rejects_modes_the_baseline_lacks(tmp_path: Path) -> None:
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample()]))
    argv = ["--data", str(data), "--backend", "baseline", "--embedder", "hash"]
    run = run_bench("locomo_retrieval.py", *argv, "--modes", "traversal")
    assert run.returncode != 0 and "no mode" in run.stderr


def test_memory_backend_missing_is_a_clear_error(tmp_path: Path) -> None:
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample()]))
    argv = ["--data", str(data), "--embedder", "hash"]
    # a build of jevmem without the high-level Memory
    run = run_bench("locomo_retrieval.py", *argv, before="import jevmem; del jevmem.Memory")
    assert run.returncode != 0 and "--backend baseline" in run.stderr


def test_batch_bench_compares_a_batch_with_one_by_one(tmp_path: Path) -> None:
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample()]))
    out = tmp_path / "batch.json"
    run = run_bench(
        "bench_batch.py", "--data", str(data), "--embedding-cache", str(tmp_path / "cache"),
        "--embedder", "hash", "--batch", "2", "--passes", "2", "--json", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = json.loads(out.read_text())
    assert res["batch"] == 2 and res["groups"] >= 1
    assert res["queries_with_different_evidence"] == 0
    assert res["one_by_one_ms"] > 0 and res["batch_ms"] > 0 and res["speedup"] > 0
    # a batch larger than any conversation's questions is refused
    run = run_bench(
        "bench_batch.py", "--data", str(data), "--embedding-cache", str(tmp_path / "cache"),
        "--embedder", "hash", "--batch", "500",
    )  # fmt: skip
    assert run.returncode != 0 and "no group of 500" in run.stderr


def test_ab_bench_finds_a_build_equal_to_itself(tmp_path: Path) -> None:
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample(), sample(sample_id="conv-y")]))
    out = tmp_path / "ab.json"
    build = str(Path(jevmem.__file__).resolve().parents[1])
    run = run_bench(
        "bench_ab.py", "--a", build, "--b", build, "--data", str(data),
        "--embedding-cache", str(tmp_path / "cache"), "--embedder", "hash",
        "--passes", "2", "--json", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = json.loads(out.read_text())
    assert res["questions"] == 10 and res["searches_per_build"] == 10
    assert res["questions_with_different_evidence"] == 0
    assert res["a_p50_ms"] > 0 and res["b_p50_ms"] > 0
    # a directory without the package is refused, naming where jevmem came from
    run = run_bench(
        "bench_ab.py",
        "--a",
        str(tmp_path),
        "--b",
        build,
        "--data",
        str(data),
        "--embedding-cache",
        str(tmp_path / "cache"),
        "--embedder",
        "hash",
    )
    assert run.returncode != 0


def test_a_cached_build_cuts_passages_as_its_embedder_does(tmp_path: Path) -> None:
    """The benches' embedding cache plans a long text's passages with the
    inner embedder's window and tokens, as a user's memory does: here the
    hashing embedder given a window of 8 tokens and word tokens, which
    record that the build asked for them."""
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample()]))
    asked = tmp_path / "asked"
    before = (
        "import re, jevmem\n"
        "def token_starts(self, text):\n"
        f"    open({str(asked)!r}, 'a').write('x')\n"
        "    return [m.start() for m in re.finditer(r'\\S+', text)]\n"
        "jevmem.HashEmbedder.max_length = 8\n"
        "jevmem.HashEmbedder.token_starts = token_starts\n"
    )
    run = run_bench(
        "bench_batch.py", "--data", str(data), "--embedding-cache", str(tmp_path / "cache"),
        "--embedder", "hash", "--batch", "2", "--passes", "2", before=before,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert asked.exists() and asked.read_text()


def test_serve_bench_measures_one_build_or_two_in_turn(tmp_path: Path) -> None:
    pytest.importorskip("grpc")
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample()]))
    build = str(Path(jevmem.__file__).resolve().parents[1])
    common = ["--data", str(data), "--embedding-cache", str(tmp_path / "cache")]
    common += ["--embedder", "hash", "--seconds", "0.2", "--threads", "2"]
    out = tmp_path / "serve.json"
    run = run_bench("bench_serve.py", *common, "--rounds", "1", "--json", str(out))
    assert run.returncode == 0, run.stderr
    res = json.loads(out.read_text())
    assert len(res["one"]) == len(res["many"]) == 1 and min(res["one"] + res["many"]) > 0
    assert res["ratio_of_medians"] > 0
    cpu = res["cpu"]
    assert cpu["one_client_ms_per_search"] > 0 and cpu["many_client_cores"] > 0
    if sys.platform.startswith("linux"):  # the server's CPU is read from /proc
        assert cpu["one_server_ms_per_search"] > 0 and cpu["many_server_cores"] > 0
    out = tmp_path / "serve_ab.json"
    ab = ["--a", build, "--b", build, "--rounds", "2", "--json", str(out)]
    run = run_bench("bench_serve.py", *common, *ab)
    assert run.returncode == 0, run.stderr
    res = json.loads(out.read_text())
    for build_name in ("a", "b"):
        assert len(res[f"{build_name}_one"]) == len(res[f"{build_name}_many"]) == 2
        assert res[f"{build_name}_cpu"]["many_client_ms_per_search"] > 0
    assert len(res["b_over_a_many"]) == len(res["b_over_a_one"]) == 2
    assert min(res["b_over_a_many"] + res["b_over_a_one"]) > 0
    run = run_bench("bench_serve.py", *common, "--a", build)
    assert run.returncode != 0 and "go together" in run.stderr


def test_query_and_load_benches_report_their_figures(tmp_path: Path) -> None:
    data = tmp_path / "mini.json"
    data.write_text(json.dumps([sample(), sample(sample_id="conv-y")]))
    out = tmp_path / "query.json"
    run = run_bench(
        "bench_query.py", "--data", str(data), "--embedding-cache", str(tmp_path / "cache"),
        "--embedder", "hash", "--passes", "2", "--json", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    res = json.loads(out.read_text())
    assert res["questions"] == 10  # five a conversation
    for mode in ("lexical", "full"):
        for how in ("precomputed", "embedded"):
            assert res[f"{mode}_{how}_p50_ms"] > 0
    out = tmp_path / "load.json"
    run = run_bench("bench_load.py", "--data", str(data), "--repeat", "3", "--json", str(out))
    assert run.returncode == 0, run.stderr
    res = json.loads(out.read_text())
    assert res["nodes"] == 12  # six turns a conversation
    assert res["memory_load_us_per_node"] > 0 and res["store_load_us_per_node"] > 0
