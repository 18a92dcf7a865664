"""Bad input at the public API: every must-reject argument raises a typed
jevmem error naming the field, and the memory is left byte for byte as it
was (its stats and its snapshot bytes)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from jevmem import (
    HashEmbedder,
    InvalidConfigError,
    InvalidInputError,
    InvalidTypeError,
    JevmemError,
    LocalController,
    Memory,
    MemoryConfig,
    MemoryStore,
    NodeNotFoundError,
    SnapshotError,
    TraversalConfig,
)
from jevmem._core import TraversalConfig as CoreTraversalConfig
from jevmem._validate import MAX_K, MAX_TIMESTAMP, MIN_TIMESTAMP

DIM = 16


def _memory() -> Memory:
    m = Memory(HashEmbedder(DIM), controller=LocalController())
    m.add_batch(
        ["Alice moved to Paris in May.", "Bob likes green tea.", "The meeting is on Friday."],
        timestamps=[1_700_000_000, 1_700_000_100, 1_700_000_200],
        speakers=["alice", "bob", None],
    )
    return m


@pytest.fixture(scope="module")
def memory() -> Memory:
    return _memory()


def _state(m: Memory) -> tuple[bytes, dict[str, Any]]:
    return bytes(m.store.to_bytes()), m.stats()


LONE = "bad \ud800 surrogate"
BIG = 2**70
OK_VEC = np.ones(DIM, np.float32)

# (label, call, expected error class); every call must be refused
CASES: list[tuple[str, Callable[[Any], Any], type[Exception]]] = [
    # texts
    ("add_batch of a str", lambda m: m.add_batch("hello"), InvalidTypeError),
    ("add_batch of bytes", lambda m: m.add_batch(b"hello"), InvalidTypeError),
    ("add_batch of a generator", lambda m: m.add_batch(x for x in ["a"]), InvalidTypeError),
    ("add_batch of a dict", lambda m: m.add_batch({"a": 1}), InvalidTypeError),
    ("add_batch of None", lambda m: m.add_batch(None), InvalidTypeError),
    ("add None", lambda m: m.add(None), InvalidTypeError),
    ("add int", lambda m: m.add(5), InvalidTypeError),
    ("add bytes", lambda m: m.add(b"text"), InvalidTypeError),
    ("add list", lambda m: m.add(["text"]), InvalidTypeError),
    ("add empty", lambda m: m.add(""), InvalidInputError),
    ("add blank", lambda m: m.add(" \n\t "), InvalidInputError),
    ("add NUL", lambda m: m.add("a\0b"), InvalidInputError),
    ("add lone surrogate", lambda m: m.add(LONE), InvalidInputError),
    ("add too long", lambda m: m.add("x" * (m.store.max_text_bytes + 1)), InvalidInputError),
    (
        "add too long in UTF-8",
        lambda m: m.add("é" * (m.store.max_text_bytes // 2 + 1)),
        InvalidInputError,
    ),
    ("batch with one None", lambda m: m.add_batch(["ok", None]), InvalidTypeError),
    ("batch with one NUL", lambda m: m.add_batch(["ok", "b\0"]), InvalidInputError),
    # speakers
    ("speaker int", lambda m: m.add("t", speaker=3), InvalidTypeError),
    ("speaker NUL", lambda m: m.add("t", speaker="al\0ice"), InvalidInputError),
    ("speaker surrogate", lambda m: m.add("t", speaker=LONE), InvalidInputError),
    ("speaker too long", lambda m: m.add("t", speaker="s" * 70_000), InvalidInputError),
    ("speakers a str", lambda m: m.add_batch(["t"], speakers="a"), InvalidTypeError),
    ("speakers wrong length", lambda m: m.add_batch(["t"], speakers=["a", "b"]), InvalidInputError),
    # provenance
    ("provenance None value", lambda m: m.add("t", provenance={"k": None}), InvalidTypeError),
    ("provenance list", lambda m: m.add("t", provenance=[("k", "v")]), InvalidTypeError),
    ("provenance str", lambda m: m.add("t", provenance="k=v"), InvalidTypeError),
    ("provenance int key", lambda m: m.add("t", provenance={1: "v"}), InvalidTypeError),
    ("provenance empty key", lambda m: m.add("t", provenance={" ": "v"}), InvalidInputError),
    ("provenance NUL key", lambda m: m.add("t", provenance={"k\0": "v"}), InvalidInputError),
    ("provenance NUL value", lambda m: m.add("t", provenance={"k": "v\0"}), InvalidInputError),
    ("provenance surrogate", lambda m: m.add("t", provenance={"k": LONE}), InvalidInputError),
    ("provenance object", lambda m: m.add("t", provenance={"k": object()}), InvalidTypeError),
    ("provenance bool", lambda m: m.add("t", provenance={"k": True}), InvalidTypeError),
    ("provenance nan", lambda m: m.add("t", provenance={"k": math.nan}), InvalidInputError),
    # entities
    ("entities a str", lambda m: m.add("t", entities="Alice"), InvalidTypeError),
    ("entity None", lambda m: m.add("t", entities=[None]), InvalidTypeError),
    ("entity NUL", lambda m: m.add("t", entities=["a\0"]), InvalidInputError),
    ("entity surrogate", lambda m: m.add("t", entities=[LONE]), InvalidInputError),
    ("entity empty", lambda m: m.add("t", entities=["  "]), InvalidInputError),
    # timestamps
    ("timestamp huge", lambda m: m.add("t", timestamp=BIG), InvalidInputError),
    ("timestamp -huge", lambda m: m.add("t", timestamp=-BIG), InvalidInputError),
    ("timestamp past max", lambda m: m.add("t", timestamp=MAX_TIMESTAMP + 1), InvalidInputError),
    ("timestamp before min", lambda m: m.add("t", timestamp=MIN_TIMESTAMP - 1), InvalidInputError),
    ("timestamp nan", lambda m: m.add("t", timestamp=math.nan), InvalidInputError),
    ("timestamp inf", lambda m: m.add("t", timestamp=math.inf), InvalidInputError),
    ("timestamp 1e300", lambda m: m.add("t", timestamp=1e300), InvalidInputError),
    ("timestamp bool", lambda m: m.add("t", timestamp=True), InvalidTypeError),
    ("timestamp list", lambda m: m.add("t", timestamp=[1]), InvalidTypeError),
    ("timestamp garbage", lambda m: m.add("t", timestamp="not a date"), InvalidInputError),
    ("timestamps a str", lambda m: m.add_batch(["t"], timestamps="1"), InvalidTypeError),
    ("timestamp numpy bool", lambda m: m.add("t", timestamp=np.bool_(True)), InvalidTypeError),
    # scopes, metadatas and keys: refused as the text column is
    ("keys a set", lambda m: m.add_batch(["a", "b"], keys={"k1", "k2"}), InvalidTypeError),
    ("keys a generator", lambda m: m.add_batch(["a"], keys=(k for k in ["k"])), InvalidTypeError),
    ("keys a str", lambda m: m.add_batch(["a"], keys="k"), InvalidTypeError),
    ("keys an array", lambda m: m.add_batch(["a"], keys=np.array(["k"])), InvalidTypeError),
    ("keys wrong length", lambda m: m.add_batch(["a", "b"], keys=["k"]), InvalidInputError),
    ("scopes an iterator", lambda m: m.add_batch(["a"], scopes=iter([None])), InvalidTypeError),
    ("scopes a dict", lambda m: m.add_batch(["a"], scopes={"user": "u1"}), InvalidTypeError),
    ("metadatas an int", lambda m: m.add_batch(["a"], metadatas=5), InvalidTypeError),
    ("metadatas a set", lambda m: m.add_batch(["a"], metadatas={None}), InvalidTypeError),
    # embeddings
    ("embedding nan", lambda m: m.add("t", embedding=np.full(DIM, np.nan)), InvalidInputError),
    ("embedding inf", lambda m: m.add("t", embedding=np.full(DIM, np.inf)), InvalidInputError),
    (
        "embedding beyond float32",
        lambda m: m.add("t", embedding=np.full(DIM, 1e300)),
        InvalidInputError,
    ),
    ("embedding short", lambda m: m.add("t", embedding=np.ones(DIM - 1)), InvalidInputError),
    ("embedding 2-d", lambda m: m.add("t", embedding=np.ones((1, DIM))), InvalidInputError),
    ("embedding str", lambda m: m.add("t", embedding="1,2,3"), InvalidTypeError),
    ("embedding ragged", lambda m: m.add("t", embedding=[[1.0], [1.0, 2.0]]), InvalidTypeError),
    ("embedding objects", lambda m: m.add("t", embedding=[object()] * DIM), InvalidTypeError),
    (
        "embeddings wrong rows",
        lambda m: m.add_batch(["a", "b"], embeddings=np.ones((1, DIM))),
        InvalidInputError,
    ),
    (
        "embeddings 1-d for a batch",
        lambda m: m.add_batch(["a"], embeddings=OK_VEC),
        InvalidInputError,
    ),
    # search
    ("search None", lambda m: m.search(None), InvalidTypeError),
    ("search int", lambda m: m.search(3), InvalidTypeError),
    ("search bytes", lambda m: m.search(b"tea"), InvalidTypeError),
    ("search empty", lambda m: m.search(""), InvalidInputError),
    ("search NUL", lambda m: m.search("te\0a"), InvalidInputError),
    ("search surrogate", lambda m: m.search(LONE), InvalidInputError),
    ("search too long", lambda m: m.search("q" * (m.store.max_text_bytes + 1)), InvalidInputError),
    ("search k=0", lambda m: m.search("tea", 0), InvalidInputError),
    ("search k<0", lambda m: m.search("tea", -5), InvalidInputError),
    ("search k huge", lambda m: m.search("tea", 2**63), InvalidInputError),
    ("search k over max", lambda m: m.search("tea", MAX_K + 1), InvalidInputError),
    ("search k bool", lambda m: m.search("tea", True), InvalidTypeError),
    ("search k float", lambda m: m.search("tea", 2.0), InvalidTypeError),
    ("search k str", lambda m: m.search("tea", "3"), InvalidTypeError),
    ("search k None", lambda m: m.search("tea", None), InvalidTypeError),
    ("search mode", lambda m: m.search("tea", mode="fast"), InvalidInputError),
    ("search mode list", lambda m: m.search("tea", mode=["full"]), InvalidInputError),
    ("search now huge", lambda m: m.search("tea", now=BIG), InvalidInputError),
    ("search now nan", lambda m: m.search("tea", now=math.nan), InvalidInputError),
    ("search_batch of a str", lambda m: m.search_batch("tea"), InvalidTypeError),
    ("search_batch with None", lambda m: m.search_batch(["tea", None]), InvalidTypeError),
    ("search_batch of a set", lambda m: m.search_batch({"tea"}), InvalidTypeError),
]


@pytest.mark.parametrize(("label", "call", "error"), CASES, ids=[c[0] for c in CASES])
def test_rejected_and_unchanged(
    memory: Memory, label: str, call: Callable[[Memory], Any], error: type[Exception]
) -> None:
    before = _state(memory)
    with pytest.raises(error) as info:
        call(memory)
    assert isinstance(info.value, JevmemError)
    assert str(info.value), "the message names the field and the limit"
    assert _state(memory) == before, label


def test_batch_messages_name_the_field(memory: Memory) -> None:
    with pytest.raises(InvalidInputError, match=r"observation 1: provenance\['k'\]"):
        memory.add_batch(["a", "b"], provenances=[None, {"k": "v\0"}])
    with pytest.raises(InvalidInputError, match="speaker is over the limit of 65536"):
        memory.add("t", speaker="s" * 70_000)
    with pytest.raises(InvalidTypeError, match="wrap a single string"):
        memory.add_batch("hello")


def test_accepted_edge_values_are_stored_as_given() -> None:
    m = _memory()
    a = m.add("at the start of the calendar", timestamp=MIN_TIMESTAMP)
    numbers: Any = {"turn": 3, "score": 0.5}  # numbers are stored as their str
    b = m.add("at its end", timestamp=MAX_TIMESTAMP, provenance=numbers)
    assert m.get(a).timestamp == MIN_TIMESTAMP
    assert m.get(b).timestamp == MAX_TIMESTAMP
    assert m.get(b).provenance["turn"] == "3"
    assert len(m.search("calendar", k=MAX_K).evidence) >= 1


def test_attribute_columns_are_taken_as_lists_and_tuples() -> None:
    m = _memory()
    ids = m.add_batch(["a", "b"], keys=("ka", "kb"), scopes=[None, {"user": "u1"}])
    assert [m.get(i).key for i in ids] == ["ka", "kb"]
    assert m.add_batch(["b again"], keys=["kb"], scopes=({"user": "u1"},)) == [ids[1]]


# ids that are not a stored node's: what `history` raises for each
NOT_IDS: list[tuple[Any, type[Exception]]] = [
    (-1, NodeNotFoundError),
    (2**64, NodeNotFoundError),
    (10**9, NodeNotFoundError),  # never added
    ("0", InvalidInputError),
    (True, InvalidInputError),
    (1.5, InvalidInputError),
    (None, InvalidInputError),
    (np.array([0]), InvalidInputError),
]
ID_READS: list[tuple[str, Callable[[Memory, Any], Any]]] = [
    ("history", lambda m, i: m.history(i)),
    ("get", lambda m, i: m.get(i)),
    ("validity", lambda m, i: m.validity(i)),
    ("supersedes", lambda m, i: m.supersedes(i)),
    ("superseded_by", lambda m, i: m.superseded_by(i)),
    ("neighbors", lambda m, i: m.neighbors(i)),
    ("neighbors of a view", lambda m, i: m.neighbors(i, "temporal")),
]


@pytest.mark.parametrize(("name", "read"), ID_READS, ids=[r[0] for r in ID_READS])
def test_id_reads_refuse_what_history_refuses(
    memory: Memory, name: str, read: Callable[[Memory, Any], Any]
) -> None:
    for bad, error in NOT_IDS:
        with pytest.raises(error) as info:
            read(memory, bad)
        assert isinstance(info.value, JevmemError), (name, bad)
    # a numpy integer is an id (nodes and edges compare by their repr)
    assert repr(read(memory, np.int64(0))) == repr(read(memory, 0))


def test_membership_is_false_for_anything_not_a_stored_id(memory: Memory) -> None:
    for bad, _ in NOT_IDS:
        assert bad not in memory
    assert 0 in memory and np.int64(2) in memory
    with pytest.raises(InvalidTypeError):
        memory.neighbors(0, 5)  # type: ignore[arg-type]


def test_numpy_integer_timestamps_are_ints() -> None:
    m = _memory()
    a = m.add("numpy int", timestamp=np.int64(1_700_000_300))
    b, c = m.add_batch(["x", "y"], timestamps=[np.int32(1_700_000_400), np.uint64(1_700_000_500)])
    assert [m.get(i).timestamp for i in (a, b, c)] == [1_700_000_300, 1_700_000_400, 1_700_000_500]
    plain = m.search("numpy", now=1_700_000_600)
    assert m.search("numpy", now=np.int64(1_700_000_600)).evidence == plain.evidence
    with pytest.raises(InvalidInputError):
        m.add("t", timestamp=np.int64(MAX_TIMESTAMP) + 1)


# every one must raise InvalidConfigError as the config is built (called
# untyped: the wrong types are the point)
_MC: Any = MemoryConfig
_TC: Any = TraversalConfig
BAD_CONFIGS: list[tuple[str, Callable[[], Any]]] = [
    ("kappa str", lambda: _MC(kappa="60")),
    ("kappa None", lambda: _MC(kappa=None)),
    ("traversal None", lambda: _MC(traversal=None)),
    ("traversal dict", lambda: _MC(traversal={"max_visited": 3})),
    ("max_text_bytes 2**64", lambda: _MC(max_text_bytes=2**64)),
    ("max_text_bytes True", lambda: _MC(max_text_bytes=True)),
    ("theta_rel True", lambda: _MC(theta_rel=True)),
    ("anchors True", lambda: _MC(anchors=True)),
    ("anchor_depth 2**70", lambda: _MC(anchor_depth=2**70)),
    ("consolidation_period True", lambda: _MC(consolidation_period=True)),
    ("context_seeds False", lambda: _MC(context_seeds=False)),
    ("reply_link True", lambda: _MC(reply_link=True)),
    ("index_passages str", lambda: _MC(index_passages="no")),
    ("max_visited -1", lambda: _TC(max_visited=-1)),
    ("max_visited 2**70", lambda: _TC(max_visited=2**70)),
    ("max_visited True", lambda: _TC(max_visited=True)),
    ("depth_max 1.5", lambda: _TC(depth_max=1.5)),
    ("lambdas short", lambda: _TC(lambdas=[1.0])),
    ("lambdas str", lambda: _TC(lambdas="12345")),
    ("lambdas of str", lambda: _TC(lambdas=["1"] * 5)),
    ("gamma str", lambda: _TC(gamma="a")),
    ("gamma True", lambda: _TC(gamma=True)),
    ("max_wall_s str", lambda: _TC(max_wall_s="5")),
]


@pytest.mark.parametrize(("label", "make"), BAD_CONFIGS, ids=[c[0] for c in BAD_CONFIGS])
def test_bad_configs_raise_invalid_config_error(label: str, make: Callable[[], Any]) -> None:
    with pytest.raises(InvalidConfigError):
        make()


class _Dim:
    """An embedder that is right in all but its ``dim``."""

    def __init__(self, dim: Any) -> None:
        self.dim, self.inner = dim, HashEmbedder(16)

    def embed(self, texts: Any) -> Any:
        return self.inner.embed(texts)

    def embed_one(self, text: str) -> Any:
        return self.inner.embed_one(text)


BAD_PARTS: list[tuple[str, dict[str, Any], type[JevmemError]]] = [
    ("controller a name", {"controller": "local"}, InvalidTypeError),
    ("controller the class", {"controller": LocalController}, InvalidTypeError),
    ("controller without decide", {"controller": object()}, InvalidTypeError),
    ("embedder a name", {"embedder": "hash"}, InvalidTypeError),
    ("embedder the class", {"embedder": HashEmbedder}, InvalidTypeError),
    ("embedder without embed", {"embedder": object()}, InvalidTypeError),
    ("dim a str", {"embedder": _Dim("64")}, InvalidTypeError),
    ("dim a float", {"embedder": _Dim(64.0)}, InvalidTypeError),
    ("dim a bool", {"embedder": _Dim(True)}, InvalidTypeError),
    ("dim negative", {"embedder": _Dim(-5)}, InvalidConfigError),
    ("dim 0", {"embedder": _Dim(0)}, InvalidConfigError),
]


@pytest.mark.parametrize(
    ("label", "parts", "error"), BAD_PARTS, ids=[label for label, *_ in BAD_PARTS]
)
def test_a_memory_refuses_a_bad_embedder_or_controller_when_made(
    tmp_path: Path, label: str, parts: dict[str, Any], error: type[JevmemError]
) -> None:
    """They were taken, to fail at the first write with an AttributeError or
    TypeError (a dim of True was taken as 1)."""
    parts = {"embedder": HashEmbedder(16), "controller": LocalController(), **parts}
    with pytest.raises(error):
        Memory(parts["embedder"], parts["controller"])
    saved = Memory(HashEmbedder(16))
    saved.save(tmp_path / "m.jvm")
    with pytest.raises(error):
        Memory.load(tmp_path / "m.jvm", parts["embedder"], parts["controller"])
    with pytest.raises(error):
        Memory.open(tmp_path / "d", parts["embedder"], parts["controller"])
    assert not (tmp_path / "d").exists()  # refused before the directory is made


def test_a_learned_controller_refuses_a_model_that_is_not_one(tmp_path: Path) -> None:
    from jevmem.controller.learned import LearnedController, SystemOneModel

    path = tmp_path / "model.json"
    path.write_text(json.dumps(SystemOneModel.shipped().to_json()))
    not_models: list[Any] = [str(path), path, {}]
    for model in not_models:
        with pytest.raises(InvalidTypeError, match="SystemOneModel"):
            LearnedController(model)
    assert LearnedController(SystemOneModel.load(path)).model.heads


def test_good_configs_are_the_core_s_own(tmp_path: Path) -> None:
    t = _TC(max_visited=np.int64(30), gamma=np.float32(0.5), lambdas=np.ones(5))
    assert isinstance(t, TraversalConfig) and isinstance(t, CoreTraversalConfig)
    assert t.as_dict()["max_visited"] == 30 and t.as_dict()["lambdas"] == [1.0] * 5
    m = Memory(HashEmbedder(DIM), LocalController(), config=MemoryConfig(traversal=t))
    m.add("Maya plays the cello")
    assert m.search("who plays the cello?").evidence
    with pytest.raises(InvalidConfigError):  # a bool is not a count: nothing is created
        Memory.open(tmp_path / "m", HashEmbedder(DIM), checkpoint_every=True)
    assert not (tmp_path / "m").exists()


VEC = np.ones(DIM, np.float32)

# the bindings themselves: arguments Python cannot convert are jevmem errors too
STORE_CASES: list[tuple[str, Callable[[Any], Any], type[Exception]]] = [
    ("store add None", lambda s: s.add(None, VEC), InvalidTypeError),
    ("store add bytes", lambda s: s.add(b"t", VEC), InvalidTypeError),
    ("store add surrogate", lambda s: s.add(LONE, VEC), InvalidInputError),
    ("store add NUL", lambda s: s.add("a\0", VEC), InvalidInputError),
    ("store timestamp huge", lambda s: s.add("t", VEC, timestamp=BIG), InvalidInputError),
    ("store timestamp float", lambda s: s.add("t", VEC, timestamp=1.5), InvalidTypeError),
    ("store provenance None", lambda s: s.add("t", VEC, provenance={"k": None}), InvalidTypeError),
    ("store provenance NUL", lambda s: s.add("t", VEC, provenance={"k": "\0"}), InvalidInputError),
    ("store entity NUL", lambda s: s.add("t", VEC, entities=["a\0"]), InvalidInputError),
    ("store entities str", lambda s: s.add("t", VEC, entities="abc"), InvalidTypeError),
    ("store batch of a str", lambda s: s.add_batch("hello", np.ones((5, DIM))), InvalidTypeError),
    (
        "store batch surrogate",
        lambda s: s.add_batch(["ok", LONE], np.ones((2, DIM))),
        InvalidInputError,
    ),
    (
        "store batch timestamps huge",
        lambda s: s.add_batch(["ok"], np.ones((1, DIM)), timestamps=[BIG]),
        InvalidInputError,
    ),
    (
        "store check_batch provenance list",
        lambda s: s.check_batch(["ok"], np.ones((1, DIM)), provenances=[[("k", "v")]]),
        InvalidTypeError,
    ),
]


@pytest.mark.parametrize(("label", "call", "error"), STORE_CASES, ids=[c[0] for c in STORE_CASES])
def test_store_rejects_and_is_unchanged(
    label: str, call: Callable[[MemoryStore], Any], error: type[Exception]
) -> None:
    store = MemoryStore(DIM)
    store.add("an observation", VEC, timestamp=1_700_000_000)
    before = bytes(store.to_bytes())
    with pytest.raises(error):
        call(store)
    assert bytes(store.to_bytes()) == before, label


def test_store_searches_with_huge_k_return_what_exists() -> None:
    store = MemoryStore(DIM)
    store.add("an observation", VEC)
    ids, _ = store.search_vector(VEC, k=2**62)
    assert list(ids) == [0]
    ids, _ = store.search_lexical("observation", k=2**62)
    assert list(ids) == [0]


_junk = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),
    st.text(max_size=8),
    st.binary(max_size=8),
    st.lists(st.one_of(st.none(), st.integers(), st.text(max_size=4)), max_size=3),
    st.dictionaries(
        st.one_of(st.text(max_size=3), st.integers()),
        st.one_of(st.none(), st.text(max_size=3)),
        max_size=2,
    ),
)


@given(
    texts=_junk,
    timestamps=_junk,
    speakers=_junk,
    provenances=_junk,
    entities=_junk,
    embeddings=_junk,
)
def test_junk_writes_raise_only_jevmem_errors(
    texts: Any, timestamps: Any, speakers: Any, provenances: Any, entities: Any, embeddings: Any
) -> None:
    m = _JUNK_MEMORY
    before = _state(m)
    try:
        m.add_batch(
            texts,
            timestamps=timestamps,
            speakers=speakers,
            provenances=provenances,
            entities=entities,
            embeddings=embeddings,
        )
    except JevmemError:
        assert _state(m) == before
    # an accepted batch is fine too: junk that happens to be valid


@given(queries=_junk, k=_junk, now=_junk, mode=_junk)
def test_junk_searches_raise_only_jevmem_errors(queries: Any, k: Any, now: Any, mode: Any) -> None:
    m = _JUNK_MEMORY
    before = _state(m)
    try:
        m.search_batch(queries, k, now=now, mode=mode)
    except JevmemError:
        pass
    assert _state(m) == before


_JUNK_MEMORY = _memory()


# ---- crafted snapshots -----------------------------------------------------------


def _leb(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v == 0:
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def _reseal(payload: bytes) -> bytes:
    import zlib

    header = b"JEVMEMSS" + (6).to_bytes(4, "little")  # the format `to_bytes` writes
    return (
        header
        + zlib.crc32(payload).to_bytes(4, "little")
        + len(payload).to_bytes(8, "little")
        + payload
    )


def test_crafted_snapshots_raise_snapshot_error_quickly() -> None:
    store = MemoryStore(DIM)
    for i in range(3):
        store.add(f"observation {i}", np.ones(DIM, np.float32) + i, timestamp=1_700_000_000 + i)
    payload = bytes(store.to_bytes())[24:]
    # An empty store with the same config: config, next_id 0, ops_applied 0,
    # six empty lists (nodes, embeddings, edges, passages, two of facts), the
    # derived facts (version 0, no nodes), the lexical content (present, no
    # terms, no documents), then the sentence marks (present, no nodes).
    empty = bytes(MemoryStore(DIM).to_bytes())[24:]
    cfg = empty[:-15]
    assert payload.startswith(cfg)
    rest = payload[len(cfg) :]
    assert rest.startswith(_leb(3))  # next_id: three nodes, none removed
    for huge in (2**20, 2**26, 2**40, 2**64 - 1):
        crafted = _reseal(cfg + _leb(huge) + rest[1:])
        with pytest.raises(SnapshotError):
            MemoryStore.from_bytes(crafted)
    # a huge dimension: the config opens with the vector config's dim
    for dim in (2**17, 2**40):
        crafted = _reseal(_leb(dim) + payload[len(_leb(DIM)) :])
        with pytest.raises(SnapshotError):
            MemoryStore.from_bytes(crafted)
    # flipped bits anywhere in the payload, resealed: SnapshotError or a valid store
    rng = np.random.default_rng(7)
    for _ in range(300):
        mutated = bytearray(payload)
        for at in rng.integers(0, len(mutated), size=3):
            mutated[at] ^= 1 << int(rng.integers(0, 8))
        try:
            MemoryStore.from_bytes(_reseal(bytes(mutated)))
        except SnapshotError:
            pass


def test_an_int_too_long_to_write_out_is_a_typed_error_and_changes_nothing() -> None:
    m = _memory()
    before = m.store.to_bytes()
    with pytest.raises(InvalidInputError):
        m.add("note about tea", provenance={"n": 10**5000})  # type: ignore[dict-item]
    with pytest.raises(InvalidInputError):
        m.update(0, "note about tea", provenance={"n": -(10**5000)})  # type: ignore[dict-item]
    assert m.store.to_bytes() == before
    kept = m.add("note", provenance={"n": 10**20})  # type: ignore[dict-item]
    assert m.get(kept).provenance["n"] == str(10**20)


def test_numpy_floats_are_timestamps_as_a_float_is() -> None:
    m = Memory(HashEmbedder(DIM), controller=LocalController())
    i = m.add("Maya plays the cello", timestamp=np.float32(1.7e9))
    assert m.get(i).timestamp == 1_700_000_000
    assert m.get(m.add("tea", timestamp=np.float16(3.5))).timestamp == 3
    hits = m.search("cello", filter={"$timestamp": {"$gte": np.float32(1.7e9)}}).evidence
    assert [e.id for e in hits] == [i]
    before = m.store.to_bytes()
    for bad in (np.float32("nan"), np.bool_(True)):
        with pytest.raises(JevmemError):
            m.add("x", timestamp=bad)
    assert m.store.to_bytes() == before


@pytest.mark.parametrize("config", [MemoryConfig, {}, {"anchors": 5}, 0, "", []])
def test_a_memory_refuses_a_config_that_is_not_one(config: Any, tmp_path: Path) -> None:
    # a falsy one read as the defaults, the class failed at the first search
    with pytest.raises(InvalidConfigError, match="config must be a MemoryConfig"):
        Memory(HashEmbedder(DIM), LocalController(), config=config)
    with pytest.raises(InvalidConfigError, match="config must be a MemoryConfig"):
        Memory.open(tmp_path / "d", HashEmbedder(DIM), config=config)
    assert not (tmp_path / "d").exists()


def test_a_count_setting_takes_numpy_integers_as_ints() -> None:
    c = MemoryConfig(anchors=np.int64(5), context_seeds=np.uint8(0), passage_tokens=np.int32(64))
    assert (c.anchors, c.context_seeds, c.passage_tokens) == (5, 0, 64)
    assert all(type(v) is int for v in (c.anchors, c.context_seeds, c.passage_tokens))
    with pytest.raises(InvalidConfigError, match="anchors"):
        MemoryConfig(anchors=np.bool_(True))  # type: ignore[arg-type]


def test_the_text_limit_a_memory_was_made_with_holds_after_load_and_reopen(
    tmp_path: Path,
) -> None:
    made = MemoryConfig(max_text_bytes=100)
    m = Memory(HashEmbedder(DIM), LocalController(), config=made)
    m.add("short")
    m.save(tmp_path / "a.jvm")
    with Memory.open(tmp_path / "d", HashEmbedder(DIM), config=made) as d:
        d.add("short")
    loaded = [
        Memory.load(tmp_path / "a.jvm", HashEmbedder(DIM)),
        Memory.load(tmp_path / "a.jvm", HashEmbedder(DIM), config=MemoryConfig(max_text_bytes=50)),
    ]
    with Memory.open(tmp_path / "d", config=MemoryConfig(max_text_bytes=10_000)) as reopened:
        for got in [*loaded, reopened]:
            # the config says the limit the store holds the memory to
            assert got.config.max_text_bytes == got.store.max_text_bytes == 100
            got.add("y" * 80)
            with pytest.raises(InvalidInputError, match="limit of 100"):
                got.add("z" * 101)


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("dim", True),
        ("dim", -1),
        ("dim", 4.0),
        ("exact_threshold", -1),
        ("exact_threshold", 2**64),
        ("connectivity", True),
        ("expansion_add", 1.5),
        ("expansion_search", -1),
        ("bm25_k1", True),
        ("bm25_b", True),
        ("candidate_k", True),
        ("candidate_pool", 2**64),
        ("max_text_bytes", -1),
        ("max_text_bytes", 0),
        # numpy's bool is no subclass of bool, and converts as it does
        ("bm25_k1", np.True_),
        ("candidate_k", np.True_),
    ],
)
def test_a_store_setting_out_of_its_range_names_itself(name: str, value: Any) -> None:
    # a bool read as 1, a negative int a bare OverflowError naming nothing
    kw: dict[str, Any] = {"dim": DIM, name: value}
    with pytest.raises(InvalidConfigError, match=name):
        MemoryStore(**kw)
    assert MemoryStore(DIM, exact_threshold=None).dim == DIM
