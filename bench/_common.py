"""Shared helpers for the benchmarks: synthetic corpora, timers, reporting, data paths."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T")


def machine() -> str:
    cpu = "unknown cpu"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def default_data_path() -> Path:
    """``shared/data/locomo/locomo10-dev.json`` next to the repository, else ``/work/shared``."""
    local = Path(__file__).resolve().parents[1] / "shared/data/locomo/locomo10-dev.json"
    return local if local.exists() else Path("/work/shared/data/locomo/locomo10-dev.json")


def load() -> str:
    """The 1/5/15-minute load averages, as ``uptime`` prints them."""
    a, b, c = os.getloadavg()
    return f"{a:.2f} {b:.2f} {c:.2f}"


def peak_rss_bytes() -> int:
    """Peak resident set of this process so far (VmHWM)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def progress(items: Sequence[T], label: str, every: int | None = None) -> Iterator[T]:
    """A dependency-free progress bar on stderr."""
    n = len(items)
    # redraw in place on a terminal; in logs, a line every 10%
    step = every or max(1, n // 40 if sys.stderr.isatty() else n // 10)
    end = "\r" if sys.stderr.isatty() else "\n"
    start = time.perf_counter()
    for i, item in enumerate(items):
        if i % step == 0 or i == n - 1:
            done = (i + 1) / n
            bar = "#" * int(done * 30)
            elapsed = time.perf_counter() - start
            sys.stderr.write(f"  {label:<28} [{bar:<30}] {i + 1}/{n} {elapsed:6.1f}s{end}")
            sys.stderr.flush()
        yield item
    if sys.stderr.isatty():
        sys.stderr.write("\n")


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def latencies(fn: Callable[[T], object], args: Iterable[T], warmup: int = 3) -> list[float]:
    """Per-call latencies in seconds (after a few warm-up calls)."""
    args = list(args)
    for a in args[:warmup]:
        fn(a)
    out = []
    for a in args:
        t = time.perf_counter()
        fn(a)
        out.append(time.perf_counter() - t)
    return out


def pct(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def summary_us(xs: Sequence[float]) -> dict[str, float]:
    return {
        "p50_us": statistics.median(xs) * 1e6,
        "p99_us": pct(xs, 0.99) * 1e6,
        "mean_us": statistics.fmean(xs) * 1e6,
    }


class Corpus:
    """Synthetic documents over a Zipf vocabulary, plus clustered embeddings.

    Words are pseudo-words made from syllables so the tokenizer treats them as
    ordinary English-like tokens. Embeddings are drawn around random centroids
    (so a nearest-neighbour index has structure to find) and are unrelated to
    the text: lexical and vector benchmarks are measured separately.
    """

    SYLLABLES = (
        "ka", "lo", "mi", "ren", "tu", "sha", "vor", "el", "din", "qua",
        "pe", "zo", "bar", "nik", "ul", "te", "fra", "gon", "yi", "ost",
    )  # fmt: skip

    def __init__(self, n_docs: int, dim: int = 384, vocab: int = 50_000, seed: int = 7) -> None:
        self.rng = np.random.default_rng(seed)
        self.n_docs, self.dim = n_docs, dim
        syl = self.SYLLABLES
        words: list[str] = []
        seen: set[str] = set()
        i = 0
        while len(words) < vocab:
            w, x = "", i
            while True:
                w += syl[x % len(syl)]
                x //= len(syl)
                if x == 0:
                    break
            i += 1
            if len(w) >= 4 and w not in seen:
                seen.add(w)
                words.append(w)
        self.words = words
        ranks = np.arange(1, vocab + 1, dtype=np.float64)
        p = 1.0 / ranks**1.07
        self.p = p / p.sum()

    def texts(self) -> list[str]:
        lens = self.rng.integers(8, 31, self.n_docs)
        flat = self.rng.choice(len(self.words), size=int(lens.sum()), p=self.p)
        out, pos = [], 0
        w = self.words
        for n in lens:
            out.append(" ".join(w[j] for j in flat[pos : pos + n]))
            pos += n
        return out

    def queries(self, n: int, seed: int = 11) -> list[str]:
        rng = np.random.default_rng(seed)
        # queries skew to mid-frequency words, like real keyword queries
        p = self.p**0.6
        p /= p.sum()
        return [
            " ".join(self.words[j] for j in rng.choice(len(self.words), rng.integers(3, 6), p=p))
            for _ in range(n)
        ]

    def embeddings(
        self, n: int, clusters: int = 1024, seed: int = 13, noise_seed: int | None = None
    ) -> npt.NDArray[np.float32]:
        """``n`` unit vectors around ``clusters`` centroids drawn from ``seed``.

        Queries must share the corpus' centroids (same ``seed``) and differ only
        in ``noise_seed``; a different ``seed`` gives unrelated centroids, i.e.
        queries that lie near no document.
        """
        rng = np.random.default_rng(seed)
        centroids = rng.standard_normal((clusters, self.dim), dtype=np.float32)
        if noise_seed is not None:
            rng = np.random.default_rng(noise_seed)
        out = np.empty((n, self.dim), dtype=np.float32)
        for lo in range(0, n, 100_000):
            hi = min(n, lo + 100_000)
            idx = rng.integers(0, clusters, hi - lo)
            out[lo:hi] = centroids[idx] + 0.6 * rng.standard_normal(
                (hi - lo, self.dim), dtype=np.float32
            )
        out /= np.linalg.norm(out, axis=1, keepdims=True)
        return out


def finish_report(report: dict[str, object], path: Path | None) -> None:
    """Sign a bench report with the machine and the command line, print it,
    and write it to ``path`` when given."""
    report["machine"] = machine()
    report["command"] = " ".join([".venv/bin/python", *sys.argv])
    print(json.dumps(report, indent=2))
    if path is not None:
        path.write_text(json.dumps(report, indent=2) + "\n")


class CachedEmbedder:
    """An embedder wrapper that keeps every row it computed in a file, keyed by
    the text's hash and the inner embedder's ``repr``, so repeated development
    runs over the same corpus skip the embedding. For builds only: the harness
    times queries with the inner embedder."""

    def __init__(self, inner: object, directory: str | os.PathLike[str]) -> None:
        import hashlib

        self.inner = inner
        self.dim: int = inner.dim  # type: ignore[attr-defined]
        tag = hashlib.sha256(repr(inner).encode()).hexdigest()[:16]
        self.path = Path(directory) / f"embeddings-{tag}.npz"
        self._rows: dict[str, npt.NDArray[np.float32]] = {}
        self._dirty = False
        if self.path.exists():
            try:
                with np.load(self.path) as data:
                    keys, rows = data["keys"], data["rows"]
                self._rows = {str(k): r for k, r in zip(keys, rows, strict=True)}
            except (OSError, ValueError, zipfile.BadZipFile) as exc:
                print(
                    f"embedding cache {self.path} unreadable ({exc}); starting empty",
                    file=sys.stderr,
                )

    def __repr__(self) -> str:
        return repr(self.inner)

    def __getattr__(self, name: str) -> Any:
        # what a memory's passage planner asks of its embedder (its window,
        # where its tokens start): a memory built through the cache must cut
        # long texts into the passages the inner embedder gets, as a user's
        # memory does (without these it planned by characters)
        if name in ("max_length", "token_starts"):
            return getattr(self.inner, name)
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @staticmethod
    def _key(text: str) -> str:
        import hashlib

        return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        keys = [self._key(t) for t in texts]
        missing = sorted(
            {k: t for k, t in zip(keys, texts, strict=True) if k not in self._rows}.items()
        )
        if missing:
            rows = self.inner.embed([t for _, t in missing])  # type: ignore[attr-defined]
            for (k, _), row in zip(missing, rows, strict=True):
                self._rows[k] = np.asarray(row, dtype=np.float32)
            self._dirty = True
        if not keys:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._rows[k] for k in keys]).astype(np.float32, copy=False)

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        row: npt.NDArray[np.float32] = self.embed([text])[0]
        return row

    def flush(self) -> None:
        if not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            # another run may have flushed since this one read the file: keep its rows too
            try:
                with np.load(self.path) as data:
                    for k, r in zip(data["keys"], data["rows"], strict=True):
                        self._rows.setdefault(str(k), r)
            except (OSError, ValueError, zipfile.BadZipFile):
                pass  # unreadable: this flush replaces it
        keys = np.array(list(self._rows), dtype="U32")
        rows = np.stack(list(self._rows.values())) if self._rows else np.zeros((0, self.dim))
        # a temporary file of this flush's own: two runs flushing at once once
        # wrote the same temporary name and left a corrupt cache
        fd, tmp_name = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp.npz")
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, keys=keys, rows=rows)
            os.replace(tmp_name, self.path)
        except BaseException:
            Path(tmp_name).unlink(missing_ok=True)
            raise
        self._dirty = False
