"""bench/plots.py, run as BENCHMARKS.md runs it, draws each plot from benchmark JSON of
the shapes the benchmarks write, and the PNGs are real pictures (not blank)."""

from __future__ import annotations

import json
import zlib
from pathlib import Path

import numpy as np
from support.bench import run_bench


def _png_pixels(path: Path) -> np.ndarray:
    """Decode an 8-bit RGB(A) PNG (no interlace), filters undone."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, channels = 8, b"", 0, 0, 0
    while pos < len(data):
        n = int.from_bytes(data[pos : pos + 4], "big")
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + n]
        if kind == b"IHDR":
            width, height = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
            assert body[8] == 8 and body[12] == 0
            channels = {2: 3, 6: 4}[body[9]]
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = width * channels
    out = np.zeros((height, stride), dtype=np.int32)
    prev = np.zeros(stride, dtype=np.int32)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = np.frombuffer(raw, np.uint8, stride, y * (stride + 1) + 1).astype(np.int32)
        cur = np.zeros(stride, dtype=np.int32)
        for x in range(stride):
            a = cur[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if f == 0:
                pred = 0
            elif f == 1:
                pred = a
            elif f == 2:
                pred = b
            elif f == 3:
                pred = (a + b) // 2
            else:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
            cur[x] = (line[x] + pred) & 0xFF
        out[y] = cur
        prev = cur
    return out.reshape(height, width, channels)


def _write(path: Path, obj: object) -> Path:
    path.write_text(json.dumps(obj))
    return path


def test_every_plot_is_drawn_from_benchmark_json(tmp_path: Path) -> None:
    core = {
        "machine": "test",
        "sizes": [
            {
                "nodes": n,
                "bm25_jevmem": {"p50_us": 5.0 * n**0.3},
                "vector_jevmem": {"p50_us": 50.0 * n**0.4},
                "fused_anchors": {"p50_us": 60.0 * n**0.4},
            }
            for n in (1000, 10000, 100000)
        ],
    }
    cats = {c: {"recall@10": 0.1 * i} for i, c in enumerate(["1", "2", "3", "4", "overall_1_4"], 1)}
    retrieval = {"data": "x.json", "questions": 10, "modes": {"lexical": cats, "full": cats}}
    writes = {
        "results": {
            f"{t} x{w}": {"writes_per_s": 1000.0 * (i + 1) * int(w)}
            for i, t in enumerate(["jevmem sync", "sqlite WAL synchronous=FULL"])
            for w in ("1", "8")
        }
    }
    out = tmp_path / "plots"
    run = run_bench(
        "plots.py",
        "--core",
        str(_write(tmp_path / "core.json", core)),
        "--retrieval",
        str(_write(tmp_path / "r.json", retrieval)),
        "--writes",
        str(_write(tmp_path / "w.json", writes)),
        "--out",
        str(out),
    )
    assert run.returncode == 0, run.stderr
    for name in ("latency_vs_size.png", "recall_per_category.png", "writes_per_mode.png"):
        px = _png_pixels(out / name)
        assert px.shape[0] > 200 and px.shape[1] > 300
        # axes, bars and text: many distinct colours, and far from all white
        colours = {tuple(p) for p in px[::7, ::7, :3].reshape(-1, 3)}
        assert len(colours) > 10, name
        assert (px[..., :3] < 200).mean() > 0.01, name
