"""Dump the Python entity extraction's answers for the Rust port to match.

Runs the frozen Python implementation (``tests/support/entities_reference``) and writes a JSON fixture that
``rust/core/tests/entities_oracle.rs`` reads (through the environment variable
``JEVMEM_ENTITY_ORACLE``):

* ``extract``: every turn of the development conversations (text, speaker and
  provenance), every question, and seeded random strings, with the ids
  ``extract_entities`` gives;
* ``mentions``: every question against the ids of its conversation's turns
  (first-seen order), and random queries against random ids;
* ``normalise``: the random strings through ``normalise``;
* ``chars``: Python's case facts per code point (``isupper``, ``islower``,
  ``casefold``) and its unassigned code points, to check the Rust tables;
* ``timing``: seconds ``extract_entities`` takes over all BEAM turns.

Usage: python tests/support/dump_entity_oracle.py [OUT] (default
/tmp/nlp/entity_oracle.json); with ``--timing`` it only times the BEAM turns.
"""

from __future__ import annotations

import json
import random
import sys
import time
import unicodedata
from pathlib import Path
from typing import Any

# the repository's tests/ on the path (for `support`), the data beside the repository
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
DATA = Path(__file__).resolve().parents[3] / "shared" / "data"

from jevmem import evaluation  # noqa: E402
from support.entities_reference import extract_entities, mentions, normalise  # noqa: E402

LOCOMO = DATA / "locomo" / "locomo10-dev.json"
BEAM = DATA / "beam" / "beam-100k.json"
SEED = 20_240_611

_WORDS = [
    "Caroline",
    "caroline",
    "Mel",
    "mel",
    "NEW",
    "New",
    "York",
    "york",
    "of",
    "the",
    "The",
    "de",
    "Van",
    "von",
    "la",
    "Le",
    "for",
    "&",
    "Dr.",
    "Mr",
    "St",
    "Lord",
    "Rings",
    "LGBTQ+",
    "AI++",
    "iPhone",
    "eBay",
    "OMG",
    "lol",
    "BTW",
    "I'm",
    "You'll",
    "don't",
    "Don\u2019t",
    "it's",
    "Monday",
    "May",
    "Yesterday",
    "Thanks",
    "Wow",
    "Seeing",
    "painting",
    "Painting",
    "Bank",
    "America",
    "Barnes",
    "Noble",
    "Paris",
    "France",
    "\u00e9t\u00e9",
    "\u00c9cole",
    "Stra\u00dfe",
    "STRASSE",
    "\u1e9e",
    "\u00dcber",
    "\u00fcber",
    "M\u00fcller",
    "Jos\u00e9",
    "\u03a3\u039f\u03a6\u0399\u0391",
    "\u03c3\u03bf\u03c6\u03b9\u03b1\u03c2",
    "\ufb01sh",
    "\u017fun",
    "\u01c5ungla",
    "\u2160V",
    "\u00bd",
    "x\u0301y",
    "Na\u00efve",
    "caf\u00e9",
    "Caroline's",
    "Caroline\u2019s",
    "James'",
    "NASA's",
    "Bob\u02bcs",
    "\u2018quote",
    "rock'n'roll",
    "co-op",
    "Jean-Luc",
    "A",
    "J.",
    "R.",
    "x",
    "42",
    "3D",
    "7th",
    "_id",
    "x_y",
    "@mel_r",
    "@ann.b-c",
    "#Pride",
    "#2024",
    "@",
    "#",
    "@.x",
    "a@b",
    "email@host.com",
    "\u4e2d\u6587",
    "\u0928\u092e\u0938\u094d\u0924\u0947",
    "\u0645\u064e\u0631\u062d\u0628\u0627",
]
_SEPS = [
    " ",
    " ",
    " ",
    " ",
    ", ",
    ". ",
    "! ",
    "? ",
    ": ",
    "; ",
    "\n",
    " - ",
    "-",
    " \u2014 ",
    " \u2013 ",
    " (",
    ") ",
    ' "',
    '" ',
    " \u201c",
    "\u201d ",
    " \u2018",
    "'",
    "\t",
    "  ",
    "\u00a0",
    "\x1f",
    "\u2028",
    "...",
    " & ",
    "+",
    "/",
]


def random_text(rng: random.Random) -> str:
    n = rng.randint(0, 14)
    parts: list[str] = []
    if rng.random() < 0.2:
        parts.append(rng.choice([" ", "  ", "- ", "\n", '"']))
    for _ in range(n):
        w = rng.choice(_WORDS)
        r = rng.random()
        if r < 0.1:
            w = w.upper()
        elif r < 0.2:
            w = w.lower()
        elif r < 0.25:
            w = w + rng.choice(["'s", "\u2019s", "'", "+", "-", "'t"])
        parts.append(w)
        parts.append(rng.choice(_SEPS))
    if rng.random() < 0.1:
        parts.append("".join(chr(rng.randint(0x20, 0x2FF)) for _ in range(rng.randint(1, 20))))
    return "".join(parts)


def case(
    text: str, speaker: str | None, prov: list[list[str]], extra: list[str], source: str
) -> dict[str, Any]:
    expected = extract_entities(text, speaker=speaker, provenance=dict(prov), extra=extra)
    return {
        "source": source,
        "text": text,
        "speaker": speaker,
        "provenance": prov,
        "extra": extra,
        "expected": expected,
    }


def conversation_cases(path: Path, source: str, extract: list[Any], ment: list[Any]) -> float:
    """Adds the cases of one data set; returns the seconds spent extracting its turns."""
    convs, _ = evaluation.load(path)
    spent = 0.0
    for conv in convs:
        texts, _ts, speakers, provs = evaluation.conversation_inputs(conv)
        known: dict[str, None] = {}
        for text, speaker, prov in zip(texts, speakers, provs, strict=True):
            t0 = time.perf_counter()
            got = extract_entities(text, speaker=speaker, provenance=prov)
            spent += time.perf_counter() - t0
            extract.append(
                {
                    "source": source,
                    "text": text,
                    "speaker": speaker,
                    "provenance": [[k, v] for k, v in prov.items()],
                    "extra": [],
                    "expected": got,
                }
            )
            known.update(dict.fromkeys(got))
        ids = list(known)
        for qa in conv.qas:
            extract.append(case(qa.question, None, [], [], source + "-question"))
            ment.append(
                {
                    "source": source,
                    "query": qa.question,
                    "known": ids,
                    "expected": mentions(qa.question, ids),
                }
            )
    return spent


def beam_timing() -> dict[str, Any]:
    """Seconds for extract_entities over every BEAM turn: the first pass and the best of 3."""
    convs, _ = evaluation.load(BEAM)
    inputs = [evaluation.conversation_inputs(c) for c in convs]
    turns = [
        (t, s, p)
        for texts, _ts, spk, provs in inputs
        for t, s, p in zip(texts, spk, provs, strict=True)
    ]
    wall, cpu = [], []
    for _ in range(3):
        t0, c0 = time.perf_counter(), time.process_time()
        for text, speaker, prov in turns:
            extract_entities(text, speaker=speaker, provenance=prov)
        wall.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)
    chars = sum(len(t) for t, _, _ in turns)
    return {
        "turns": len(turns),
        "chars": chars,
        "wall_s": wall,
        "cpu_s": cpu,
        "best_wall_s": min(wall),
    }


def char_facts() -> dict[str, Any]:
    upper, lower, unassigned = [], [], []
    fold: list[list[Any]] = []
    for cp in range(0x110000):
        c = chr(cp)
        if unicodedata.category(c) == "Cn":
            unassigned.append(cp)
            continue
        if c.isupper():
            upper.append(cp)
        if c.islower():
            lower.append(cp)
        if c.casefold() != c:
            fold.append([cp, c.casefold()])
    return {"upper": upper, "lower": lower, "casefold": fold, "unassigned": unassigned}


def main() -> None:
    if sys.argv[1:] == ["--timing"]:
        print(json.dumps(beam_timing()))
        return
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("/tmp/nlp/entity_oracle.json")
    extract: list[dict[str, Any]] = []
    ment: list[dict[str, Any]] = []
    conversation_cases(LOCOMO, "locomo", extract, ment)
    conversation_cases(BEAM, "beam", extract, ment)

    rng = random.Random(SEED)
    norm = []
    keys = ["speaker", "Author", " participants ", "entities", "mentions", "session", "PLACE"]
    for _ in range(600):
        text = random_text(rng)
        speaker = rng.choice([None, "", random_text(rng)[:20]])
        # a mapping: a repeated key keeps its first place and its last value
        prov_map = {rng.choice(keys): random_text(rng)[:40] for _ in range(rng.randint(0, 3))}
        prov = [[k, v] for k, v in prov_map.items()]
        extra = [random_text(rng)[:15] for _ in range(rng.randint(0, 2))]
        extract.append(case(text, speaker, prov, extra, "random"))
        norm.append({"input": text, "expected": normalise(text)})
        known = extract_entities(random_text(rng)) + [random_text(rng)[:12] for _ in range(3)]
        known += rng.sample(extract_entities(text), k=min(2, len(extract_entities(text))))
        ment.append(
            {"source": "random", "query": text, "known": known, "expected": mentions(text, known)}
        )

    fixture = {
        "python": sys.version.split()[0],
        "unicode": unicodedata.unidata_version,
        "extract": extract,
        "mentions": ment,
        "normalise": norm,
        "chars": char_facts(),
        "timing": beam_timing(),
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(fixture, ensure_ascii=False))
    counts = {k: len(fixture[k]) for k in ("extract", "mentions", "normalise")}
    print(f"wrote {out}: {counts}, timing {fixture['timing']}")


if __name__ == "__main__":
    main()
