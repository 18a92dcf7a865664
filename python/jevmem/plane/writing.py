"""The write path (SPEC §2): typing, candidate discovery, relation judgment and consolidation."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from jevmem import _validate
from jevmem._collector import collector_paused
from jevmem._core import MAX_LOG_RECORD_BYTES, question_share
from jevmem.controller import catalogue
from jevmem.controller.types import PAIR_NOULS, ChoiceAnswer, DecisionRequest, pair_values
from jevmem.entities import extract_entities_batch
from jevmem.errors import InvalidInputError, SystemTwoError
from jevmem.plane.derived import DERIVED_VERSION
from jevmem.plane.lifecycle import LifecycleMemory
from jevmem.plane.pairs import relation_round, split_pairs
from jevmem.plane.signals import answer_value
from jevmem.temporal import ground_tuples_batch


def _fits_one_log_record(
    texts: Sequence[str],
    vectors: npt.NDArray[np.float32],
    passage_vecs: Sequence[npt.NDArray[np.float32] | None],
) -> None:
    """Refuse, before anything is applied, a write request a durable
    memory's log could not hold as one record: its texts and vectors past
    half of `MAX_LOG_RECORD_BYTES` (the rest of a record, its links and
    facts, is far smaller than they are)."""
    size = sum(len(t.encode("utf-8")) for t in texts) + vectors.nbytes
    size += sum(pv.nbytes for pv in passage_vecs if pv is not None)
    if size > MAX_LOG_RECORD_BYTES // 2:
        raise InvalidInputError(
            f"{len(texts)} observations of {size} bytes (texts and vectors) in one request; a "
            f"durable memory logs at most {MAX_LOG_RECORD_BYTES // 2} a request: write them in "
            "smaller batches"
        )


class WritingMemory(LifecycleMemory):
    """The write path: every way an observation enters the memory."""

    # ---- write path -------------------------------------------------------

    def add(
        self,
        text: str,
        *,
        timestamp: int | float | str | Any | None = None,
        speaker: str | None = None,
        provenance: Mapping[str, str] | None = None,
        entities: Sequence[str] | None = None,
        embedding: npt.ArrayLike | None = None,
        scope: Mapping[str, str] | None = None,
        metadata: Mapping[str, str | int | float | bool] | None = None,
        key: str | None = None,
    ) -> int:
        """Add one observation; returns its id. Bad input raises and changes nothing.

        ``scope`` says whom the observation belongs to ({"user": "u1",
        "session": "s3"}; none: global); a search with a scope only sees
        observations whose scope holds every pair of it. ``metadata`` holds
        str, int, float or bool values that filters read (see `search`).
        ``key`` is an idempotency key: adding an observation whose key the
        memory already holds in the same scope stores nothing and returns
        that node's id (a retried write or a re-ingested line is a no-op).
        Keys live in their scope, so one tenant's key never finds another's
        node; a forgotten node frees its key.
        """
        if embedding is not None:
            embedding = _validate.embeddings(embedding, "embedding", (self.store.dim,))
        return self.add_batch(
            [text],
            timestamps=[timestamp],
            speakers=[speaker],
            provenances=[provenance],
            entities=[entities],
            embeddings=None
            if embedding is None
            else np.asarray(embedding, dtype=np.float32)[None, :],
            scopes=[scope],
            metadatas=[metadata],
            keys=[key],
        )[0]

    def add_batch(
        self,
        texts: Sequence[str],
        *,
        timestamps: Sequence[Any] | None = None,
        speakers: Sequence[str | None] | None = None,
        provenances: Sequence[Mapping[str, str] | None] | None = None,
        entities: Sequence[Sequence[str] | None] | None = None,
        embeddings: npt.ArrayLike | None = None,
        scopes: Sequence[Mapping[str, str] | None] | None = None,
        metadatas: Sequence[Mapping[str, str | int | float | bool] | None] | None = None,
        keys: Sequence[str | None] | None = None,
    ) -> list[int]:
        """Add many observations with batched controller calls.

        On a durable memory (:meth:`open`) the whole batch is one log record:
        after a crash it is there entirely or not at all, and the call
        returns once it is as durable as the memory's sync mode promises.

        The result equals adding them one by one: each new observation only
        ever sees candidates inserted before it (and, when it has a scope,
        only those a search in its scope sees).

        A text longer than the embedder's window is kept whole and also
        indexed passage by passage (``MemoryConfig.index_passages``); with
        caller-supplied ``embeddings`` only the node vectors are stored.

        A speaker given in ``speakers`` is the observation's, over a
        "speaker" in its provenance (it is the one embedded with the text).

        ``scopes``, ``metadatas`` and ``keys`` are columns like the others
        (see `add`). An observation whose key the memory holds, or that an
        earlier observation of the batch carries, is stored once: its id in
        the result is that node's.

        Every argument is checked before any work (`jevmem._validate` lists
        the accepted types and ranges); bad input raises a jevmem error.
        """
        texts, timestamps, speakers, provenances, entities, embeddings = _validate.add_batch_args(
            texts,
            timestamps,
            speakers,
            provenances,
            entities,
            embeddings,
            dim=self.store.dim,
            max_text_bytes=self.store.max_text_bytes,
        )
        self._sync_with_store()
        with self._durable_write():
            return self._add_batch(
                texts,
                timestamps,
                speakers,
                provenances,
                entities,
                embeddings,
                scopes,
                metadatas,
                keys,
            )

    def _add_batch(
        self,
        texts: list[str],
        timestamps: list[int | None],
        speakers: list[str | None],
        provenances: list[dict[str, str] | None],
        entities: list[list[str] | None],
        embeddings: npt.NDArray[np.float32] | None,
        scopes: Sequence[Mapping[str, str] | None] | None,
        metadatas: Sequence[Mapping[str, str | int | float | bool] | None] | None,
        keys: Sequence[str | None] | None,
    ) -> list[int]:
        # the first six columns come from `_validate.add_batch_args`: checked,
        # one entry per text; the attribute columns are checked here
        n = len(texts)
        # refused as the text column is (a set of keys would pair them with
        # the texts in hash order); any Mapping will do, the core reads dicts
        scope_col, meta_col, key_col = _validate.attribute_columns(scopes, metadatas, keys, n)
        scope_col = [
            dict(x) if isinstance(x, Mapping) and not isinstance(x, dict) else x for x in scope_col
        ]
        meta_col = [
            dict(x) if isinstance(x, Mapping) and not isinstance(x, dict) else x for x in meta_col
        ]
        # every row is checked, a repeat too: bad input changes nothing
        self.store.check_attributes(n, scopes=scope_col, metadatas=meta_col, keys=key_col)
        with self._writing(), collector_paused():
            if not any(k is not None for k in key_col):
                return self._add_fresh(
                    texts,
                    timestamps,
                    speakers,
                    provenances,
                    entities,
                    embeddings,
                    scope_col,
                    meta_col,
                    key_col,
                )
            # idempotency: a key the memory holds in the row's scope, or one
            # an earlier row of this batch carries in that scope, stores
            # nothing and answers with that id (keys live in their scope)
            ident: list[tuple[frozenset[tuple[str, str]], str] | None] = [
                None if k is None else (frozenset((sc or {}).items()), k)
                for k, sc in zip(key_col, scope_col, strict=True)
            ]
            asked = [(sc, k) for k, sc in zip(key_col, scope_col, strict=True) if k is not None]
            known = self.store.ids_for_keys(asked)
            held = dict(zip((x for x in ident if x is not None), known, strict=True))
            first_row: dict[tuple[frozenset[tuple[str, str]], str], int] = {}
            fresh: list[int] = []
            for i, x in enumerate(ident):
                if x is None or (held[x] is None and x not in first_row):
                    fresh.append(i)
                    if x is not None:
                        first_row[x] = i

            def pick(col: Sequence[Any]) -> list[Any]:
                return [col[i] for i in fresh]

            new_ids = (
                self._add_fresh(
                    pick(texts),
                    pick(timestamps),
                    pick(speakers),
                    pick(provenances),
                    pick(entities),
                    None if embeddings is None else embeddings[fresh],
                    pick(scope_col),
                    pick(meta_col),
                    pick(key_col),
                )
                if fresh
                else []
            )
            by_row = dict(zip(fresh, new_ids, strict=True))
            out: list[int] = []
            for i, x in enumerate(ident):
                if i in by_row:
                    out.append(by_row[i])
                else:
                    assert x is not None
                    got = held[x]
                    out.append(int(got) if got is not None else by_row[first_row[x]])
            return out

    def _add_fresh(
        self,
        texts: list[str],
        parsed: list[int | None],
        spk_col: list[str | None],
        prov_col: list[dict[str, str] | None],
        ent_col: list[list[str] | None],
        embeddings: npt.NDArray[np.float32] | None,
        scope_col: list[Any],
        meta_col: list[Any],
        key_col: list[Any],
    ) -> list[int]:
        """`_add_batch` for rows whose keys (if any) are new."""
        n = len(texts)
        spans: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        passage_vecs: list[npt.NDArray[np.float32] | None] = [None] * n
        if embeddings is None:
            # Speakers are embedded with their words: queries name people, turns rarely do.
            prefixes = [f"{spk}: " if spk else "" for spk in spk_col]
            if self.config.index_passages:
                spans = [self._planner.spans(t, p) for t, p in zip(texts, prefixes, strict=True)]
            # A long text's passages go into the same embed call as the texts.
            passage_texts = [
                p + t[a:b] for t, p, sp in zip(texts, prefixes, spans, strict=True) for a, b in sp
            ]
            everything = (
                self._embed([p + t for t, p in zip(texts, prefixes, strict=True)] + passage_texts)
                if n
                else np.zeros((0, self.store.dim), np.float32)
            )
            vectors = everything[:n]
            at = n
            for i, sp in enumerate(spans):
                if sp:
                    passage_vecs[i] = everything[at : at + len(sp)]
                    at += len(sp)
        else:
            vectors = embeddings
        provs: list[dict[str, str]] = []
        for spk, prov in zip(spk_col, prov_col, strict=True):
            p = {str(k): str(v) for k, v in (prov or {}).items()}
            if spk is not None:
                # the speaker named outright wins: it is the one embedded
                # with the text, typed and read for entities
                p["speaker"] = str(spk)
            provs.append(p)
        ents = extract_entities_batch(texts, spk_col, provs, ent_col)

        passages: list[tuple[npt.NDArray[np.float32], list[tuple[int, int]]] | None] = [
            None if pv is None else (pv, sp) for pv, sp in zip(passage_vecs, spans, strict=True)
        ]
        if self.store.durable:
            _fits_one_log_record(texts, vectors, passage_vecs)
        # Validate the whole batch before anything is asked or written.
        self.store.check_batch(
            list(texts),
            vectors,
            timestamps=parsed,
            provenances=provs,
            entities=ents,
            passages=passages,
            scopes=scope_col,
            metadatas=meta_col,
            keys=key_col,
        )

        grounded = ground_tuples_batch(texts, parsed)

        # 1. typing: one call for the whole batch; it needs no memory state
        typing_q = catalogue.typing_questions()
        typing = self._decide(
            [
                DecisionRequest(
                    "typing",
                    {
                        "observation": {
                            "text": t,
                            "speaker": s,
                            "timestamp": ts,
                            "time_refs": bool(refs),
                        }
                    },
                    typing_q,
                )
                for t, s, ts, refs in zip(texts, spk_col, parsed, grounded, strict=True)
            ],
            "write",
        )
        kinds = [[answer_value(a[q.id]) for q in typing_q] for a in typing]
        types = [(e, s, p, f) for e, s, p, f in kinds]  # episodic, semantic, procedural, preference

        # 2. insert and link one node at a time, so each sees exactly the
        #    memory that one-by-one adds would have shown it (in the core:
        #    rule edges in time and by shared entity, write candidates, and
        #    every `consolidation_period`-th write's neighbourhood)
        period, done = self.config.consolidation_period, self._writes
        ids, pairs, neighbours = self.store.add_linked(
            list(texts),
            vectors,
            timestamps=parsed,
            provenances=provs,
            entities=ents,
            types=types,
            passages=passages,
            scopes=scope_col,
            metadatas=meta_col,
            keys=key_col,
            derived_version=DERIVED_VERSION,
            question_shares=[question_share(t) for t in texts],
            time_refs=grounded,
            focus=[(done + i) % period == 0 for i in range(1, n + 1)],
            focus_k=self.config.consolidation_neighbours,
        )
        self._writes += n
        try:
            self._note_people()
            relation_requests, pair_index = relation_round(ids, texts, provs, parsed, pairs)

            # 3. relation judgment: one call for every pair of the batch
            answers = self._decide(relation_requests, "write")
            said_later = [
                np.asarray(r.state["candidates"].columns["older"]) < 0.5 for r in relation_requests
            ]
            controller_edges, supersedes = judged_links(
                pair_index, answers, self.config.theta_rel, said_later
            )
            if self._update_target is not None:
                # no judged link may run from the replaced fact (or a fact it
                # replaced) to the new text: with the update's own link new ->
                # target it would close a cycle
                replaced = set(self.store.history(self._update_target))
                fresh = set(ids)
                supersedes = [
                    link for link in supersedes if not (link[0] in replaced and link[1] in fresh)
                ]
            if controller_edges:
                self.store.add_edges(controller_edges)
            if supersedes:
                self._record_supersedes(supersedes)

            # 4. consolidation every `consolidation_period` successful writes
            focus = [r for r in range(n) if (done + r + 1) % period == 0]
            if focus:
                self._consolidate([ids[r] for r in focus], split_pairs(neighbours, focus))
        except BaseException:
            # the controller failed (or returned what validation refuses)
            # after the nodes went in: take them out, with what came of them,
            # so a failed write leaves what the memory held (its ids are
            # not given again)
            self._writes = done
            with self._removal_gate.removal():
                self._forget_ids(ids)
            raise
        return ids

    def _record_supersedes(
        self, links: list[tuple[int, int, float]], origin: str = "controller"
    ) -> None:
        """Store supersedes links (new, old, weight). Validity is measured on
        the world timeline: the core reads when each fact began from its own
        grounded times (`MemoryStore.valid_from`), so nothing here outlives
        the link."""
        try:
            self.store.add_supersedes_batch([(new, old, w, origin) for new, old, w in links])
        except InvalidInputError:
            if origin != "controller":
                raise  # a link the caller asked for fails as its write does
            # a link that would close a cycle (a log written out of order can
            # make one: an earlier text found to replace one that already
            # replaces it, through links made by `update`): the others stand
            for new, old, w in links:
                if new not in self.store.history(old):
                    self.store.add_supersedes_batch([(new, old, w, origin)])

    # ---- update: a new version of a fact --------------------------------------

    def update(
        self,
        node_id: int,
        text: str,
        *,
        timestamp: int | float | str | Any | None = None,
        speaker: str | None = None,
        provenance: Mapping[str, str] | None = None,
        entities: Sequence[str] | None = None,
        embedding: npt.ArrayLike | None = None,
    ) -> int:
        """Record a new observation that replaces what ``node_id`` stated;
        returns the new id. The old one is not deleted: it stays in the new
        one's `history`, linked as superseded (weight 1, origin "rule": the
        caller said so, no controller judged it), with validity following the
        usual rules, so a search about the present ranks the new text above
        the old and marks the old ``superseded_by`` it.

        The new node keeps the old one's speaker and provenance unless
        ``speaker`` or ``provenance`` is given (a given provenance without a
        "speaker" keeps the old speaker), and always its scope and metadata (a
        scoped fact's new version is the same tenant's, found by the same
        scoped searches, lists, filters and forgets); the old node keeps its
        idempotency key. Its timestamp is not inherited: pass
        the time of the change, so validity can say when the old fact stopped
        holding (without one the old fact is superseded with no end time).
        Updating an older version supersedes exactly that node (the chain
        branches). The write path runs as for `add` (its controller may link
        the new text to other nodes too).

        An unknown or forgotten id raises NodeNotFoundError, a non-int
        InvalidInputError; bad text and arguments raise as `add`; an error
        changes nothing.
        """
        self._sync_with_store()
        # the write lock over the check, the add and the link: a forget on
        # another thread cannot take the old node between them
        with self._writing(), self._durable_write():  # one log record
            old_id = self._live_id(node_id)
            return self._update(old_id, text, timestamp, speaker, provenance, entities, embedding)

    def _update(
        self,
        old_id: int,
        text: str,
        timestamp: Any,
        speaker: str | None,
        provenance: Mapping[str, str] | None,
        entities: Sequence[str] | None,
        embedding: npt.ArrayLike | None,
    ) -> int:
        old = self.store.get(old_id)
        if speaker is None:
            given = provenance.get("speaker") if isinstance(provenance, Mapping) else None
            speaker = given if given is not None else old.provenance.get("speaker")
        if provenance is None:
            # the speaker goes in as `speaker`, so it is embedded with the text as in `add`
            provenance = {k: v for k, v in old.provenance.items() if k != "speaker"}
        self._update_target = old_id
        try:
            new_id = self.add(
                text,
                timestamp=timestamp,
                speaker=speaker,
                provenance=provenance,
                entities=entities,
                embedding=embedding,
                # a tenant's fact stays the tenant's: the scope searches, lists and
                # forgets select it by, and the metadata filters read
                scope=dict(old.scope),
                metadata=dict(old.metadata),
            )
        finally:
            self._update_target = None
        try:
            # the add's own controller rounds run on this thread and may
            # have forgotten the old node (the write lock is re-entrant)
            self._live_id(old_id)
            # (a judged link that would close a cycle with it was left out)
            self._record_supersedes([(new_id, old_id, 1.0)], origin="rule")
        except BaseException:
            # the update failed: take the new node back, so the error
            # changes nothing (as a failed add does)
            self._writes -= 1
            with self._removal_gate.removal():
                self._forget_ids([new_id])
            raise
        return new_id

    def _consolidate(self, focus_ids: list[int], neighbourhoods: list[dict[str, Any]]) -> None:
        questions = catalogue.consolidation_questions()
        requests: list[DecisionRequest] = []
        for fid, cands in zip(focus_ids, neighbourhoods, strict=True):
            edges = self.store.neighbors(fid)
            linked = {e.src for e in edges} | {e.dst for e in edges}
            nbrs = [
                {
                    "id": cid,
                    "text": text,
                    "signals": {
                        "vector": vec,
                        "lexical": lex,
                        "newer": 0.0,  # candidates are always earlier than the focus
                        "linked": 1.0 if cid in linked else 0.0,
                    },
                }
                for cid, text, vec, lex in zip(
                    cands["candidate"],
                    cands["text"],
                    cands["vector"],
                    cands["lexical"],
                    strict=True,
                )
            ]
            requests.append(
                DecisionRequest(
                    "consolidation",
                    {"focus": {"id": fid, "text": self.store.get(fid).text}, "neighbours": nbrs},
                    questions,
                )
            )
        neighbourhoods_ids = [list(c["candidate"]) for c in neighbourhoods]
        answers = self._decide(requests, "write")
        for fid, nbr_ids, got, req in zip(
            focus_ids, neighbourhoods_ids, answers, requests, strict=True
        ):
            rep = got["representation"]
            assert isinstance(rep, ChoiceAnswer)
            decision: dict[str, Any] = {
                "focus": fid,
                "neighbours": nbr_ids,
                **{
                    k: answer_value(got[k])
                    for k in ("redundant", "contradicting", "obsolete", "extra_link")
                },
                "representation": rep.label,
                "distribution": dict(rep.distribution),
            }
            self.decisions.append(decision)
            if decision["extra_link"] >= self.config.theta_rel and nbr_ids:
                unlinked = [n["id"] for n in req.state["neighbours"] if not n["signals"]["linked"]]
                if unlinked:
                    self.store.add_edge(unlinked[0], fid, "semantic", decision["extra_link"])
            escalate = rep.label in ("merge", "promote") and (
                rep.distribution[rep.label] >= self.config.summary_min_prob
                and decision["contradicting"] < self.config.summary_max_contradiction
            )
            decision["escalated"] = bool(escalate and self.summariser is not None)
            if escalate and self.summariser is not None:
                sources = [self.store.get(i) for i in [fid, *nbr_ids]]
                try:
                    summary = self.summariser(sources)
                except SystemTwoError as exc:
                    # the writes stand; the approval is recorded, the summary is not written
                    decision["summary_error"] = f"{type(exc).__name__}: {exc}"[:300]
                    continue
                vec = self.embedder.embed_one(summary)
                # the pairs every source has: the summary is seen exactly
                # where all of its sources are
                shared = set(sources[0].scope.items())
                for src in sources[1:]:
                    shared &= set(src.scope.items())
                sid = self.store.add(
                    summary,
                    vec,
                    provenance={
                        "kind": "summary",
                        "summary_of": ",".join(str(s.id) for s in sources),
                    },
                    scope=dict(shared),
                )
                self.store.add_edges([(sid, s.id, "semantic", 1.0) for s in sources])
                decision["summary_id"] = sid


#: The pair Nouls that become edges, in the order a pair's edges are added:
#: (column in `PAIR_NOULS`, view, label or None, whether the edge runs from
#: the new node to the candidate).
_EDGE_NOULS = (
    (PAIR_NOULS.index("semantic"), "semantic", None, False),
    (PAIR_NOULS.index("causal_candidate_to_new"), "causal", None, False),
    (PAIR_NOULS.index("causal_new_to_candidate"), "causal", None, True),
    (PAIR_NOULS.index("same_episode"), "temporal", "overlaps", False),
    (PAIR_NOULS.index("entity_alias"), "entity", None, False),
)
_SUPERSEDES = PAIR_NOULS.index("supersedes")


def judged_links(
    pair_index: Sequence[tuple[int, Sequence[int]]],
    answers: Sequence[Mapping[str, Any]],
    theta: float,
    said_later: Sequence[npt.NDArray[np.bool_]] | None = None,
) -> tuple[list[tuple[object, ...]], list[tuple[int, int, float]]]:
    """The edges a relation round's answers call for (each answer at least
    ``theta``), pair by pair in the round's order, and the supersedes links
    (new, old, weight): a statement of change replaces the earlier statement
    it is most about, not every earlier one on the topic (per new node, its
    best candidates; ties are all kept). Where ``said_later`` marks a
    candidate said after the new node (a log written out of order), the
    candidate is the statement of change: the link is candidate -> new."""
    nodes: list[int] = []
    cands: list[int] = []
    blocks = []
    choices: list[ChoiceAnswer | None] = []
    for (node_id, cand_ids), got in zip(pair_index, answers, strict=True):
        values, temporal = pair_values(got, len(cand_ids))
        nodes.extend([node_id] * len(cand_ids))
        cands.extend(cand_ids)
        blocks.append(values)
        choices.extend(temporal)
    if not blocks:
        return [], []
    values = np.concatenate(blocks)
    hit_pair, hit_slot = np.nonzero(values[:, [j for j, *_ in _EDGE_NOULS]] >= theta)
    # (pair, slot) keys keep the order: a pair's Noul edges, then its temporal one
    keyed: list[tuple[int, int, tuple[object, ...]]] = []
    for p, k in zip(hit_pair.tolist(), hit_slot.tolist(), strict=True):
        j, view, label, outward = _EDGE_NOULS[k]
        src, dst = (nodes[p], cands[p]) if outward else (cands[p], nodes[p])
        w = float(values[p, j])
        keyed.append(
            (
                p,
                k,
                (src, dst, view, w) if label is None else (src, dst, view, w, "controller", label),
            )
        )
    timed: list[tuple[int, int, tuple[object, ...]]] = [
        (p, len(_EDGE_NOULS), (cands[p], nodes[p], "temporal", prob, "controller", choice.label))
        for p, choice in enumerate(choices)
        if choice is not None
        and choice.label != "unknown"
        and (prob := choice.distribution[choice.label]) >= theta
    ]
    if timed:
        keyed = sorted(keyed + timed, key=lambda x: (x[0], x[1]))
    edges = [edge for _, _, edge in keyed]
    later = np.concatenate(said_later).tolist() if said_later else [False] * len(nodes)
    best: dict[int, list[tuple[int, int, float]]] = {}
    backward: list[tuple[int, int, float]] = []
    sup = values[:, _SUPERSEDES]
    for p in np.flatnonzero(sup >= theta).tolist():
        if later[p]:
            # one pair per round and candidate: kept as adds one by one keep it
            backward.append((cands[p], nodes[p], float(sup[p])))
        else:
            best.setdefault(nodes[p], []).append((nodes[p], cands[p], float(sup[p])))
    supersedes: list[tuple[int, int, float]] = []
    for replaced in best.values():
        top = max(w for _, _, w in replaced)
        supersedes.extend(link for link in replaced if link[2] == top)
    return edges, supersedes + backward
