"""jevmem inspect: graph data, its JSON and GraphML exports, and the HTML page
as headless Chromium renders it (DOM and screenshot)."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import jevmem
from jevmem import inspect
from jevmem.cli import main
from jevmem.controller.local import LocalController
from jevmem.embed import HashEmbedder
from jevmem.errors import InvalidInputError, InvalidTypeError

NOTES = [
    ("Maya", "I started learning the cello, my teacher is called Ines.", {"user": "maya"}),
    ("Agent", "Noted: Maya takes cello lessons with Ines on Tuesdays.", {"user": "maya"}),
    ("Maya", "Because the deploy failed on Friday, we postponed the release.", {"user": "maya"}),
    ("Maya", "The release went out on Monday without problems.", {"user": "maya"}),
    ("Lena", "I found an apartment near the river in Lisbon.", {"user": "lena"}),
    # text that must not break the page: markup, a script end tag, a comment opener
    ("Lena", "My cello </script><script>document.body.remove()</script> <!-- & <b>", {}),
]


def _memory() -> jevmem.Memory:
    m = jevmem.Memory(HashEmbedder(64), controller=LocalController())
    m.add_batch(
        [t for _, t, _ in NOTES],
        timestamps=[1_772_442_000 + 86_400 * i for i in range(len(NOTES))],
        speakers=[s for s, _, _ in NOTES],
        scopes=[sc or None for _, _, sc in NOTES],
    )
    return m


def test_graph_data_holds_every_node_edge_and_the_query() -> None:
    m = _memory()
    d = inspect.graph_data(m, query="Who teaches Maya the cello?", k=4)
    assert d["format"] == inspect.GRAPH_FORMAT and d["truncated"] is None
    assert [n["id"] for n in d["nodes"]] == m.matching_ids()
    assert d["nodes"][4]["speaker"] == "Lena" and d["nodes"][4]["scope"] == {"user": "lena"}
    stored = {(e.src, e.dst, e.view) for i in m.matching_ids() for e in m.store.neighbors(i)}
    assert {(e["src"], e["dst"], e["view"]) for e in d["edges"]} == stored and stored
    q = d["query"]
    r = m.search("Who teaches Maya the cello?", 4)
    assert [x["id"] for x in q["evidence"]] == [e.id for e in r.evidence]
    assert q["stop_reason"] == r.trace["stop_reason"] and q["rounds"] == r.trace["rounds"]
    assert q["sufficient"] == r.sufficient
    held = {(e["src"], e["dst"], e["view"]) for e in d["edges"]}
    assert all((p["src"], p["dst"], p["view"]) in held for p in q["path"])
    # a scope draws only what it sees
    lena = inspect.graph_data(m, scope={"user": "lena"})
    assert [n["id"] for n in lena["nodes"]] == [4]


def test_a_large_memory_is_cut_with_a_note_query_nodes_first() -> None:
    m = _memory()
    d = inspect.graph_data(m, query="apartment in Lisbon", k=2, max_nodes=3)
    assert len(d["nodes"]) == 3 and d["truncated"]["nodes_total"] == len(NOTES)
    assert "showing 3 of 6 nodes" in d["truncated"]["note"]
    drawn = {n["id"] for n in d["nodes"]}
    assert {x["id"] for x in d["query"]["evidence"]} <= drawn
    assert all(e["src"] in drawn and e["dst"] in drawn for e in d["edges"])
    with pytest.raises(InvalidInputError):
        inspect.graph_data(m, max_nodes=0)


def test_json_round_trips_and_graphml_parses() -> None:
    d = inspect.graph_data(_memory(), query="Why was the release postponed?")
    assert inspect.from_json(inspect.to_json(d)) == d
    with pytest.raises(InvalidInputError):
        inspect.from_json('{"nodes": []}')
    root = ET.fromstring(inspect.to_graphml(d))
    ns = {"g": "http://graphml.graphdrawing.org/xmlns"}
    graph = root.find("g:graph", ns)
    assert graph is not None
    nodes, edges = graph.findall("g:node", ns), graph.findall("g:edge", ns)
    assert len(nodes) == len(d["nodes"]) and len(edges) == len(d["edges"])
    keys = {k.get("id"): k.get("attr.name") for k in root.findall("g:key", ns)}
    texts = [x.text for n in nodes for x in n.findall("g:data", ns) if keys[x.get("key")] == "text"]
    assert texts == [n["text"] for n in d["nodes"]]  # markup in a text comes back intact
    ids = {n.get("id") for n in nodes}
    assert all(e.get("source") in ids and e.get("target") in ids for e in edges)


def test_graphml_drops_what_xml_cannot_carry() -> None:
    m = jevmem.Memory(HashEmbedder(64), controller=LocalController())
    m.add("price list \ufffe and \uffff end\x01 \U0001f600", speaker="Ma\uffffya")
    d = inspect.graph_data(m)
    # a dict built by hand may hold a lone surrogate: it must not reach the XML either
    d["nodes"][0]["text"] = d["nodes"][0]["text"].replace("end", "e\ud800nd")
    root = ET.fromstring(inspect.to_graphml(d))
    data = [x.text for x in root.iter("{http://graphml.graphdrawing.org/xmlns}data")]
    assert "price list  and  end \U0001f600" in data and "Maya" in data


def test_from_json_refuses_what_the_exports_could_not_write() -> None:
    d = inspect.graph_data(_memory(), query="Why was the release postponed?")
    good = inspect.to_json(d)
    assert inspect.from_json(good.encode()) == d
    # a lone surrogate (escaped in JSON) in a text: the HTML or JSON export could not be UTF-8
    with pytest.raises(InvalidInputError, match=r"nodes\[0\]\.text has a lone surrogate"):
        inspect.from_json(good.replace('"text": "', '"text": "\\ud800', 1))
    bad_cases: dict[str | bytes, str] = {
        '{"format": "jevmem-graph/1"}': "scope is missing",
        "[" * 100_000: "nested too deeply",
        "{oops": "not JSON",
        "NaN": "not a jevmem-graph/1 export",
        b"\xff": "not JSON",
    }
    for text, message in bad_cases.items():
        with pytest.raises(InvalidInputError, match=message):
            inspect.from_json(text)
    for wrong in (None, 5, ["x"]):
        with pytest.raises(InvalidTypeError):
            inspect.from_json(wrong)  # type: ignore[arg-type]

    def broken(change: Callable[[dict[str, Any]], object], message: str) -> None:
        data = json.loads(good)
        change(data)
        with pytest.raises(InvalidInputError, match=message):
            inspect.from_json(json.dumps(data))

    broken(lambda x: x.pop("nodes"), "nodes is missing")
    broken(lambda x: x.__setitem__("edges", {}), "edges must be a list, got an object")
    broken(lambda x: x["nodes"][1].pop("text"), r"nodes\[1\]\.text is missing")
    broken(lambda x: x["nodes"][0].__setitem__("id", "7"), r"nodes\[0\]\.id must be an int")
    broken(lambda x: x["nodes"][0].__setitem__("id", True), r"nodes\[0\]\.id must be an int")
    broken(lambda x: x["nodes"].append(x["nodes"][0]), "is repeated")
    broken(lambda x: x["nodes"].__setitem__(0, "node"), r"nodes\[0\] must be an object")
    broken(lambda x: x["edges"][0].__setitem__("dst", 999), r"edges\[0\]\.dst 999 is not one")
    broken(lambda x: x["query"].pop("evidence"), "query.evidence is missing")
    broken(lambda x: x["query"]["evidence"][0].pop("rank"), r"query.evidence\[0\]\.rank")
    broken(lambda x: x["query"].__setitem__("anchors", ["a"]), "query.anchors")
    broken(lambda x: x["query"].__setitem__("path", [{"src": 1}]), r"query.path\[0\]\.dst")


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.text(
            st.characters(exclude_categories=["Cs"], exclude_characters="\0"), min_size=1
        ).filter(lambda s: s.strip()),
        min_size=1,
        max_size=6,
    )
)
def test_exports_hold_any_text(texts: list[str]) -> None:
    m = jevmem.Memory(HashEmbedder(16), controller=LocalController())
    m.add_batch(texts)
    d = inspect.graph_data(m)
    assert inspect.from_json(inspect.to_json(d)) == d
    root = ET.fromstring(inspect.to_graphml(d))
    assert len(root.findall(".//{http://graphml.graphdrawing.org/xmlns}node")) == len(texts)
    page = inspect.to_html(d)
    # the data element ends where it should: no "<" inside it
    body = page.split('id="jevmem-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in body


def test_the_cli_writes_each_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.jvm"
    _memory().save(path)
    for name in ("g.html", "g.json", "g.graphml"):
        assert main(["inspect", str(path), "-q", "cello", "-o", str(tmp_path / name)]) == 0
    d = inspect.from_json((tmp_path / "g.json").read_text())
    assert len(d["nodes"]) == len(NOTES) and d["query"]["text"] == "cello"
    ET.parse(tmp_path / "g.graphml")
    page = (tmp_path / "g.html").read_text()
    assert not re.search(r"<script[^>]+src=|<link|@import|https?://(?!www\.w3\.org/2000/svg)", page)
    assert main(["inspect", str(path), "--max-nodes", "2", "-o", str(tmp_path / "x.html")]) == 0
    assert "showing 2 of 6 nodes" in capsys.readouterr().err
    assert main(["inspect", str(tmp_path / "none.jvm")]) == 2
    assert "no memory here" in capsys.readouterr().err


# ---- the page in a browser ----------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# CI installs Chromium (.ci/run) and sets this: there the browser tests must run
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None and not os.environ.get("JEVMEM_REQUIRE_CHROMIUM"),
    reason="needs Debian's chromium (apt-get install chromium)",
)


def _chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None, "JEVMEM_REQUIRE_CHROMIUM is set but chromium is not installed"
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def _png_pixels(path: Path) -> npt.NDArray[np.uint8]:
    """An 8-bit RGB or RGBA PNG as an (h, w, channels) array (zlib and numpy only)."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat = 8, b""
    width = height = channels = 0
    while pos < len(data):
        (n,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and colour in (2, 6) and interlace == 0
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = np.frombuffer(zlib.decompress(idat), dtype=np.uint8)
    stride = width * channels
    rows = raw.reshape(height, stride + 1)
    out = np.zeros((height, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        f, line = int(rows[y, 0]), rows[y, 1:].astype(np.int32)
        if f == 0:
            cur = line
        elif f == 2:
            cur = (line + prev) & 0xFF
        else:  # Sub, Average and Paeth depend on the bytes to the left: byte by byte
            cur = np.zeros(stride, dtype=np.int32)
            c, p, ln = cur, prev.tolist(), line.tolist()
            acc = [0] * stride
            for x in range(stride):
                a = acc[x - channels] if x >= channels else 0
                b = p[x]
                if f == 1:
                    v = ln[x] + a
                elif f == 3:
                    v = ln[x] + ((a + b) >> 1)
                else:
                    cc = p[x - channels] if x >= channels else 0
                    pa, pb, pc = abs(b - cc), abs(a - cc), abs(a + b - 2 * cc)
                    v = ln[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else cc)
                acc[x] = v & 0xFF
            c[:] = acc
        out[y] = cur
        prev = cur
    return out.astype(np.uint8).reshape(height, width, channels)


def _page(tmp_path: Path) -> tuple[Path, dict[str, object]]:
    d = inspect.graph_data(_memory(), query="Who teaches Maya the cello?", k=4)
    page = tmp_path / "graph.html"
    page.write_text(inspect.to_html(d), encoding="utf-8")
    return page, d


@needs_chromium
def test_chromium_renders_every_node_and_edge(tmp_path: Path) -> None:
    page, d = _page(tmp_path)
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert 'data-ready="1"' in dom  # the script ran to its end
    assert len(re.findall(r'<circle class="node', dom)) == len(d["nodes"])  # type: ignore[arg-type]
    assert len(re.findall(r'<line class="edge', dom)) == len(d["edges"])  # type: ignore[arg-type]
    assert len(re.findall(r'<li data-id="', dom)) == 4  # the query's evidence
    assert "frontier_exhausted" in dom or "stop: " in dom
    # filters from the address: one speaker, one view, a word
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri() + "#views=temporal&speaker=Lena").stdout
    shown = re.findall(r'<circle class="node[^"]*" [^>]*data-id="(\d+)"', dom)
    hidden = re.findall(r'<circle class="node[^"]*hidden[^"]*" [^>]*data-id="(\d+)"', dom)
    assert sorted(set(shown) - set(hidden), key=int) == ["4", "5"]
    lines = re.findall(r'<line class="([^"]*)"[^>]*data-view="(\w+)"', dom)
    assert lines and all("hidden" in cls for cls, view in lines if view != "temporal")
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri() + "#search=lisbon").stdout
    assert "showing 1 of 6 nodes" in dom


@needs_chromium
def test_chromium_screenshot_is_not_blank(tmp_path: Path) -> None:
    page, _ = _page(tmp_path)
    shot = tmp_path / "shot.png"
    _chromium(tmp_path, "--window-size=900,600", f"--screenshot={shot}", page.as_uri())
    px = _png_pixels(shot)[:, :, :3].astype(np.int32)
    assert px.shape[:2] == (600, 900)
    # the graph area (between the side panels) holds drawn nodes: pixels in the
    # node colours, and far from a uniform background
    graph = px[40:, 270:620]
    episodic = np.array([0x42, 0x63, 0xEB])
    near = (np.abs(graph - episodic).sum(axis=2) < 40).sum()
    assert near > 100, near
    background = np.array([0xFB, 0xFB, 0xFD])
    assert (np.abs(graph - background).sum(axis=2) > 30).mean() > 0.01
    assert len(np.unique(px.reshape(-1, 3), axis=0)) > 20


@needs_chromium
def test_chromium_shows_the_cut_and_the_stop_rule(tmp_path: Path) -> None:
    d = inspect.graph_data(_memory(), query="Who teaches Maya the cello?", k=2, max_nodes=3)
    page = tmp_path / "cut.html"
    page.write_text(inspect.to_html(d), encoding="utf-8")
    dom = _chromium(tmp_path, "--dump-dom", page.as_uri()).stdout
    assert len(re.findall(r'<circle class="node', dom)) == 3
    assert 'id="truncated">showing 3 of 6 nodes' in dom
    assert "(cut: see the note)" in dom
    stop = re.search(r'id="qstop">([^<]*)<', dom)
    assert stop is not None
    want = "sufficient (early-stop rule met)" if d["query"]["sufficient"] else "rule not met: "
    assert f"stop: {d['query']['stop_reason']}" in stop.group(1) and want in stop.group(1)


def test_graphml_keeps_carriage_returns() -> None:
    m = jevmem.Memory(HashEmbedder(16), controller=LocalController())
    m.add("line one\r\nline two\rline three")
    root = ET.fromstring(inspect.to_graphml(inspect.graph_data(m)))
    data = [x.text for x in root.iter("{http://graphml.graphdrawing.org/xmlns}data")]
    assert "line one\r\nline two\rline three" in data


def test_the_page_names_a_memory_whose_file_name_is_not_utf8(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / os.fsdecode(b"notes-\xff.jvm")
    _memory().save(path)
    out = tmp_path / "page.html"
    assert main(["inspect", str(path), "-o", str(out)]) == 0
    assert "jevmem: notes-\ufffd.jvm" in out.read_text(encoding="utf-8")


def _dom(tmp_path: Path, d: dict[str, Any], address: str = "") -> str:
    page = tmp_path / "page.html"
    page.write_text(inspect.to_html(d), encoding="utf-8")
    return _chromium(tmp_path, "--dump-dom", page.as_uri() + address).stdout


@needs_chromium
def test_chromium_prints_scores_as_the_cli_does(tmp_path: Path) -> None:
    d = inspect.graph_data(_memory(), query="Who teaches Maya the cello?", k=2)
    # a float32 score as the core hands it over; 0.29 * 100 is 28.999999999999996
    f32_02 = float(np.float32(0.2))
    d["query"].update(sufficient=False, sufficiency=0.29, missing=f32_02, contradiction=0.1501)
    stop = re.search(r'id="qstop">([^<]*)<', _dom(tmp_path, d))
    assert stop is not None
    said = html.unescape(stop.group(1))
    assert "sufficiency 0.29; early-stop rule not met: " in said
    # above a threshold is rounded up, never down to it: the CLI's words
    assert "missing 0.20 (needs < 0.15), contradiction 0.16 (needs < 0.15)" in said


@needs_chromium
def test_chromium_page_survives_odd_addresses_scopes_and_speakers(tmp_path: Path) -> None:
    m = jevmem.Memory(HashEmbedder(64), controller=LocalController())
    # two scopes whose "k=v, k=v" labels are the same, and a speaker named as
    # a property every plain JavaScript object has
    m.add("Maya plays the cello", speaker="Maya", scope={"a": "b, c=d"})
    m.add("Tom plays the piano", speaker="__proto__", scope={"a": "b", "c": "d"})
    m.add("Lena plays the flute", speaker="constructor")
    d = inspect.graph_data(m)
    dom = _dom(tmp_path, d)
    values = re.findall(r'<option value="([^"]*)">a=b, c=d</option>', dom)
    assert len(values) == 2 and len(set(values)) == 2
    speakers = re.search(r'<select id="speaker">(.*?)</select>', dom)
    assert speakers is not None
    assert re.findall(r'<option value="([^"]*)"', speakers.group(1)) == [
        "",
        "Maya",
        "__proto__",
        "constructor",
    ]
    dom = _dom(tmp_path, d, "#search=100%")  # not valid percent-encoding
    assert 'data-ready="1"' in dom and "showing 0 of 3 nodes" in dom
    one_scope = json.dumps([["a", "b"], ["c", "d"]], separators=(",", ":"))
    for address, shown in [
        ("#scope=" + one_scope.replace('"', "%22"), "Tom"),
        ("#speaker=__proto__", "Tom"),
        ("#scope=a%3Db%2C%20c%3Dd", None),  # a label two scopes share filters nothing
    ]:
        dom = _dom(tmp_path, d, address)
        visible = re.findall(r'<circle class="node(?![^"]*hidden)[^"]*"[^>]*data-id="(\d+)"', dom)
        if shown is None:
            assert len(visible) == 3
        else:
            assert visible == [str(next(n["id"] for n in d["nodes"] if shown in n["text"]))]
