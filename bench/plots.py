"""Benchmark plots for BENCHMARKS.md, drawn from the benchmarks' own JSON
output (nothing is measured here):

  * latency against memory size   (bench/bench_core.py --json)
  * recall@10 per category and mode (bench/locomo_retrieval.py --json, one or more)
  * acknowledged writes per second per durability mode (bench/bench_durability.py writes --json)

    python bench/plots.py --core bench/out/core_sizes.json \\
        --retrieval bench/out/locomo_dev_s7.json bench/out/beam_s7.json \\
        --writes bench/out/durability_writes.json --out bench/plots

matplotlib is a bench-only dependency (the ``plots`` extra); the PNGs are
checked in so the page renders without it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

CATEGORY_NAMES = {
    "1": "multi-hop",
    "2": "temporal",
    "3": "open-domain",
    "4": "single-hop",
    "overall_1_4": "overall (1-4)",
}


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise SystemExit(
            "bench/plots.py needs matplotlib: pip install '.[plots]' (bench-only)"
        ) from None
    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    return plt


def latency_vs_size(core: dict[str, Any], out: Path) -> Path:
    plt = _pyplot()
    rows = sorted(core["sizes"], key=lambda r: r["nodes"])
    sizes = [r["nodes"] for r in rows]
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for key, label in (
        ("bm25_jevmem", "BM25"),
        ("vector_jevmem", "vector (exact scan, then HNSW)"),
        ("fused_anchors", "fused anchors (BM25 + vector + RRF)"),
    ):
        if all(key in r for r in rows):
            ax.plot(sizes, [r[key]["p50_us"] for r in rows], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes in the memory")
    ax.set_ylabel("query p50 (µs)")
    ax.set_title(f"MemoryStore query latency against size ({core.get('machine', '')})", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    path = out / "latency_vs_size.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def recall_per_category(runs: list[dict[str, Any]], out: Path) -> Path:
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(runs), figsize=(6.4 * len(runs), 4.2), squeeze=False)
    for ax, run in zip(axes[0], runs, strict=True):
        modes = list(run["modes"])
        cats = [c for c in CATEGORY_NAMES if c in run["modes"][modes[0]]]
        width = 0.8 / len(modes)
        for i, mode in enumerate(modes):
            vals = [run["modes"][mode][c].get("recall@10") or 0.0 for c in cats]
            xs = [j + i * width for j in range(len(cats))]
            ax.bar(xs, vals, width=width, label=mode)
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(cats))])
        ax.set_xticklabels([CATEGORY_NAMES[c] for c in cats], fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("recall@10")
        name = Path(str(run.get("data", "?"))).name
        ax.set_title(f"{name}: {run.get('questions', '?')} questions", fontsize=9)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncol=2)
    path = out / "recall_per_category.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def writes_per_mode(writes: dict[str, Any], out: Path) -> Path:
    plt = _pyplot()
    results = writes["results"]
    targets = list(dict.fromkeys(k.rsplit(" x", 1)[0] for k in results))  # first-seen order
    fig, ax = plt.subplots(figsize=(7.2, 4.0))
    width = 0.4
    for i, writers in enumerate(("1", "8")):
        vals = [results.get(f"{t} x{writers}", {}).get("writes_per_s", 0.0) for t in targets]
        xs = [j + i * width for j in range(len(targets))]
        ax.bar(xs, vals, width=width, label=f"{writers} writer{'s' if writers != '1' else ''}")
    ax.set_xticks([j + width / 2 for j in range(len(targets))])
    ax.set_xticklabels(
        [t.replace("synchronous=", "") for t in targets], rotation=25, ha="right", fontsize=8
    )
    ax.set_yscale("log")
    ax.set_ylabel("acknowledged writes / s")
    ax.set_title("Durability modes vs SQLite WAL (precomputed vectors)", fontsize=9)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    ax.legend(fontsize=8)
    path = out / "writes_per_mode.png"
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--core", type=Path, help="bench_core.py --json output")
    ap.add_argument(
        "--retrieval", type=Path, nargs="*", default=[], help="locomo_retrieval.py --json"
    )
    ap.add_argument("--writes", type=Path, help="bench_durability.py writes --json output")
    ap.add_argument("--out", type=Path, default=Path("bench/plots"))
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    made = []
    if args.core:
        made.append(latency_vs_size(_load(args.core), args.out))
    if args.retrieval:
        made.append(recall_per_category([_load(p) for p in args.retrieval], args.out))
    if args.writes:
        made.append(writes_per_mode(_load(args.writes), args.out))
    if not made:
        ap.error("nothing to plot: pass --core, --retrieval and/or --writes")
    for p in made:
        print(p, file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
