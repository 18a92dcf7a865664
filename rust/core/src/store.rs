//! `MemoryStore`: the canonical graph plus its lexical and vector indexes,
//! mutated only through validated `Op`s.
//!
//! Invariant: every public mutator validates its whole input against the
//! current state before touching anything, so an `Err` leaves the memory
//! exactly as it was, and batches are all-or-nothing.

use std::collections::{BTreeSet, HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::bm25::{Bm25Index, Bm25Params, LexicalSnapshot};
use crate::candidates::CandidateConfig;
use crate::derived::TimeRef;
use crate::episode::{episode_from, episode_key, Episode};
use crate::error::{Error, Result};
use crate::facts::{FactTable, Supersedes};
use crate::filter::{
    check_idempotency_key, normalize_metadata, normalize_scope, Allowed, Selection,
};
use crate::fusion;
use crate::graph::{EdgeUpsert, Graph};
use crate::hashing::{ShortKeyMap, ShortKeySet};
use crate::marks::{node_marks, MarksSnapshot, MarksTable, NodeMarks, SentenceTokens};
use crate::ops::{NewNode, Op};
use crate::passages::{hit_order, PassageHit, PassageIndex, Span};
use crate::style::StyleTable;
use crate::text::{Tokenizer, TokenizerConfig, QUERY_TIME_WORDS};
use crate::timeline::{SessionLines, Timeline};

/// The key every node without a timestamp has on `MemoryStore::untimed`
/// (one key: they stand in id order, the order they were written).
pub(crate) const UNTIMED: Timestamp = 0;
use crate::traversal::{EdgeRef, GraphAccess};
use crate::types::{Edge, EdgeOrigin, Node, NodeId, TemporalLabel, Timestamp, TypeScores, View};
use crate::vector::{SearchExpansion, VectorConfig, VectorIndex};

/// Default `StoreConfig::max_content_bytes`: 4 MiB, room for a long tool
/// output or a pasted document as one observation.
pub const DEFAULT_MAX_CONTENT_BYTES: usize = 4 * 1024 * 1024;

/// Everything that shapes a memory. Stored in snapshots.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoreConfig {
    pub vector: VectorConfig,
    pub bm25: Bm25Params,
    pub tokenizer: TokenizerConfig,
    pub candidates: CandidateConfig,
    /// Observations longer than this (UTF-8 bytes) are rejected.
    pub max_content_bytes: usize,
    /// Provenance keys whose values BM25 indexes along with the text, like
    /// extra fields ("speaker": questions name people, turns rarely do).
    #[serde(default)]
    pub lexical_fields: Vec<String>,
}

impl StoreConfig {
    pub fn new(dim: usize) -> Self {
        Self {
            vector: VectorConfig::new(dim),
            bm25: Bm25Params::default(),
            tokenizer: TokenizerConfig::default(),
            candidates: CandidateConfig::default(),
            max_content_bytes: DEFAULT_MAX_CONTENT_BYTES,
            lexical_fields: vec!["speaker".to_string()],
        }
    }

    pub fn validate(&self) -> Result<()> {
        self.vector.validate()?;
        self.bm25.validate()?;
        self.candidates.validate()?;
        if self.max_content_bytes == 0 {
            return Err(Error::config("max_text_bytes must be at least 1"));
        }
        Ok(())
    }
}

/// Result of applying one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpOutcome {
    NodeAdded(NodeId),
    Edge(EdgeUpsert),
    TypesSet,
    NodeRemoved,
    /// The supersedes link's outcome (its temporal edge follows the same rule).
    Superseded(EdgeUpsert),
    ValidFromSet,
    DerivedSet,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoreStats {
    pub nodes: usize,
    pub next_id: NodeId,
    pub edges: [usize; View::COUNT],
    pub supersedes: usize,
    pub ops_applied: u64,
    pub graph_bytes: usize,
    pub bm25_bytes: usize,
    pub vector_bytes: usize,
    /// Passage vectors stored, and the nodes they belong to.
    pub passages: usize,
    pub passage_nodes: usize,
    pub passage_bytes: usize,
}

pub struct MemoryStore {
    pub(crate) config: StoreConfig,
    pub(crate) graph: Graph,
    pub(crate) bm25: Bm25Index,
    pub(crate) vectors: VectorIndex,
    /// Passage vectors of long observations (see `passages`).
    pub(crate) passages: PassageIndex,
    pub(crate) tokenizer: Tokenizer,
    /// normalised entity -> ids carrying it, ascending (ids only grow, so pushes keep order).
    pub(crate) entity_index: HashMap<String, Vec<NodeId>>,
    pub(crate) by_time: Timeline,
    /// The nodes observed without a timestamp, in write order (all at one
    /// key, so by id): their time-order context (`context::neighbours`), as
    /// the timeline is the timestamped nodes'. A chat handed over without
    /// its times still has an order.
    pub(crate) untimed: Timeline,
    /// The nodes that name a session, on their session's own line: the
    /// time-order context of a turn in a session is its session's turns
    /// (`context::neighbours`), whatever other threads lie between.
    pub(crate) sessions: SessionLines,
    /// Each node's `context::episode_key`, worked out once at write (the
    /// time-order context of every candidate compares them).
    pub(crate) episode_keys: ShortKeyMap<NodeId, u64>,
    /// Each text's question share, as the caller measured it (see `context`).
    pub(crate) question_shares: ShortKeyMap<NodeId, f64>,
    /// Grounded time references of the nodes that have any (see `derived`).
    pub(crate) time_refs: ShortKeyMap<NodeId, Box<[TimeRef]>>,
    /// Each node's sentence marks (what coverage reads), made when it is written.
    pub(crate) marks: MarksTable,
    /// The derivation version of the facts above (0: none given).
    pub(crate) derived_version: u32,
    /// What the memory observes about its style, over the nodes with a
    /// question share (see `style`).
    pub(crate) style: StyleTable,
    /// Supersedes links and event times (see `facts`).
    pub(crate) facts: FactTable,
    /// (scope key, value) -> ids carrying it, ascending.
    pub(crate) scope_index: HashMap<(String, String), Vec<NodeId>>,
    /// (scope, idempotency key) -> the node written with it. Keys live in
    /// their scope: another tenant's write with the same key is its own
    /// write, and tells it nothing about this one.
    pub(crate) key_index: HashMap<ScopedKey, NodeId>,
    pub(crate) ops_applied: u64,
    /// While a durable memory is open: the ops applied since the last
    /// commit, postcard-encoded, waiting to become one log record.
    pub(crate) journal: Option<Journal>,
}

/// Applied ops not yet in the write-ahead log.
#[derive(Clone, Debug, Default)]
pub struct Journal {
    pub ops: u32,
    pub bytes: Vec<u8>,
}

/// `Op::AddNode` without owning the node, for the journal: postcard writes
/// an enum as its variant index and fields, so this encodes exactly as the
/// owned op (checked by a test).
#[derive(Serialize)]
enum OpRef<'a> {
    AddNode { id: NodeId, node: &'a NewNode },
}

/// An idempotency key with the (sorted) scope it was written in.
pub type ScopedKey = (Vec<(String, String)>, String);

/// The scoped key of a node that passed validation (its scope sorted).
fn scoped_key(node: &NewNode) -> Option<ScopedKey> {
    let key = node.key.clone()?;
    let mut scope = node.scope.clone();
    scope.sort();
    Some((scope, key))
}

/// Entity identifiers compare after trimming, lowercasing and collapsing inner whitespace.
pub fn normalize_entity(raw: &str) -> String {
    // One buffer, no string per word: snapshot loads normalise every entity.
    let mut out = String::with_capacity(raw.len());
    for word in raw.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        if word.is_ascii() {
            out.extend(word.bytes().map(|b| char::from(b.to_ascii_lowercase())));
        } else {
            // per word, as before: a final sigma lowercases by its position
            out.push_str(&word.to_lowercase());
        }
    }
    out
}

/// `normalize_entity` for an owned name, kept as it is when it is already
/// normal (ASCII without capitals, single inner spaces): every name a
/// snapshot holds was normalised when it was written.
fn normalize_entity_owned(raw: String) -> String {
    let bytes = raw.as_bytes();
    let normal = !bytes.is_empty()
        && bytes[0] != b' '
        && bytes[bytes.len() - 1] != b' '
        && bytes.windows(2).all(|w| !(w[0] == b' ' && w[1] == b' '))
        && bytes.iter().all(|&b| {
            b.is_ascii()
                && !b.is_ascii_uppercase()
                // char::is_whitespace's ASCII set: u8's leaves out \x0b
                && (b == b' ' || !(b.is_ascii_whitespace() || b == 0x0b))
        });
    if normal {
        raw
    } else {
        normalize_entity(&raw)
    }
}

/// The tokens a node is indexed by, in order: its text's, then those of
/// the provenance values under `fields` (see `StoreConfig::lexical_fields`).
fn each_lexical_token(
    tokenizer: &Tokenizer,
    fields: &[String],
    content: &str,
    provenance: &[(String, String)],
    f: &mut dyn FnMut(&str),
) {
    tokenizer.for_each_token(content, &mut *f);
    each_field_token(tokenizer, fields, provenance, f);
}

/// The tokens of the provenance fields the lexical index reads, after the text's.
fn each_field_token(
    tokenizer: &Tokenizer,
    fields: &[String],
    provenance: &[(String, String)],
    f: &mut dyn FnMut(&str),
) {
    for field in fields {
        for (key, value) in provenance {
            if key == field {
                tokenizer.for_each_token(value, &mut *f);
            }
        }
    }
}

impl MemoryStore {
    pub fn new(config: StoreConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self {
            graph: Graph::new(),
            bm25: Bm25Index::new(config.bm25)?,
            vectors: VectorIndex::new(config.vector)?,
            passages: PassageIndex::new(config.vector)?,
            tokenizer: Tokenizer::new(config.tokenizer),
            entity_index: HashMap::new(),
            by_time: Timeline::default(),
            untimed: Timeline::default(),
            sessions: SessionLines::default(),
            episode_keys: ShortKeyMap::default(),
            question_shares: ShortKeyMap::default(),
            time_refs: ShortKeyMap::default(),
            marks: MarksTable::default(),
            derived_version: 0,
            style: StyleTable::default(),
            facts: FactTable::new(),
            scope_index: HashMap::new(),
            key_index: HashMap::new(),
            ops_applied: 0,
            journal: None,
            config,
        })
    }

    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    pub fn dim(&self) -> usize {
        self.vectors.dim()
    }

    pub fn len(&self) -> usize {
        self.graph.len()
    }

    pub fn is_empty(&self) -> bool {
        self.graph.is_empty()
    }

    pub fn next_id(&self) -> NodeId {
        self.graph.next_id()
    }

    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    pub fn vectors(&self) -> &VectorIndex {
        &self.vectors
    }

    /// While `on`, vectors added (node and passage vectors alike) wait in
    /// the indexes' pending lists instead of entering the HNSW graphs
    /// (see `VectorIndex::set_defer_graph`).
    pub fn set_defer_graph(&mut self, on: bool) {
        self.vectors.set_defer_graph(on);
        self.passages.set_defer_graph(on);
    }

    /// Vectors (node and passage) stored but not yet in an HNSW graph.
    pub fn pending_graph(&self) -> usize {
        self.vectors.pending_graph() + self.passages.pending_graph()
    }

    /// Move up to `max_items` pending vectors into the HNSW graphs, for at
    /// most about `budget`; returns how many moved (0: none left).
    pub fn build_pending_graph(
        &mut self,
        max_items: usize,
        budget: std::time::Duration,
    ) -> Result<usize> {
        let moved = self.vectors.build_pending(max_items, budget)?;
        if moved < max_items && self.vectors.pending_graph() == 0 {
            return Ok(moved + self.passages.build_pending(max_items - moved, budget)?);
        }
        Ok(moved)
    }

    /// Move every pending vector into the HNSW graphs now.
    pub fn finish_graph(&mut self) -> Result<()> {
        while self.build_pending_graph(usize::MAX, std::time::Duration::MAX)? > 0 {}
        Ok(())
    }

    pub fn passage_index(&self) -> &PassageIndex {
        &self.passages
    }

    pub fn bm25(&self) -> &Bm25Index {
        &self.bm25
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn get(&self, id: NodeId) -> Option<&Node> {
        self.graph.get(id)
    }

    /// Each node's observation time (None when it has none or is not stored).
    pub fn timestamps(&self, ids: &[NodeId]) -> Vec<Option<Timestamp>> {
        ids.iter()
            .map(|&id| self.graph.get(id).and_then(|n| n.timestamp))
            .collect()
    }

    pub fn require(&self, id: NodeId) -> Result<&Node> {
        self.graph.require(id)
    }

    /// The node's unit-normalised embedding.
    pub fn embedding(&self, id: NodeId) -> Option<&[f32]> {
        self.vectors.get(id)
    }

    /// The mean of the nodes' stored (unit) embeddings, summed in the order
    /// given in f32 and divided by the count (what numpy's `mean(axis=0)`
    /// over the stacked rows gives). An unknown id or none at all is an error.
    pub fn mean_embedding(&self, ids: &[NodeId]) -> Result<Vec<f32>> {
        if ids.is_empty() {
            return Err(Error::invalid("the mean of no embeddings"));
        }
        let mut sum = vec![0.0f32; self.dim()];
        for &id in ids {
            self.require(id)?;
            let v = self.vectors.get(id).expect("a live node has an embedding");
            for (s, x) in sum.iter_mut().zip(v) {
                *s += x;
            }
        }
        let n = ids.len() as f32;
        sum.iter_mut().for_each(|s| *s /= n);
        Ok(sum)
    }

    pub fn ops_applied(&self) -> u64 {
        self.ops_applied
    }

    // ---- validation -------------------------------------------------------

    pub(crate) fn validate_new_node(&self, node: &NewNode) -> Result<()> {
        self.validate_new_node_shape(node)?;
        if let Some(key) = scoped_key(node) {
            if let Some(&id) = self.key_index.get(&key) {
                return Err(Error::invalid(format!(
                    "idempotency key {:?} is already used in this scope by node {id}",
                    key.1
                )));
            }
        }
        Ok(())
    }

    /// Everything of `validate_new_node` but whether its key is still free.
    fn validate_new_node_shape(&self, node: &NewNode) -> Result<()> {
        normalize_scope(node.scope.clone())?;
        normalize_metadata(node.metadata.clone())?;
        if let Some(key) = &node.key {
            check_idempotency_key(key)?;
        }
        if node.content.trim().is_empty() {
            return Err(Error::invalid("observation text is empty"));
        }
        if let Some(ts) = node.timestamp {
            crate::types::check_timestamp(ts, "timestamp")?;
        }
        if node.content.len() > self.config.max_content_bytes {
            return Err(Error::invalid(format!(
                "observation text is {} bytes, the limit is {}",
                node.content.len(),
                self.config.max_content_bytes
            )));
        }
        if node.content.contains('\0') {
            return Err(Error::invalid("observation text contains a NUL character"));
        }
        for (key, value) in &node.provenance {
            if key.trim().is_empty() {
                return Err(Error::invalid("provenance keys must be non-empty"));
            }
            if key.contains('\0') || value.contains('\0') {
                return Err(Error::invalid(format!(
                    "provenance {key:?} contains a NUL character"
                )));
            }
        }
        for entity in &node.entities {
            // what normalises to nothing: whitespace only (lowercasing keeps every letter)
            if entity.trim().is_empty() {
                return Err(Error::invalid("entity identifiers must be non-empty"));
            }
            if entity.contains('\0') {
                return Err(Error::invalid("an entity contains a NUL character"));
            }
        }
        node.types.validate()?;
        self.vectors.validate(&node.embedding)?;
        self.passages.validate(&node.content, &node.passages)
    }

    /// Check a batch of new nodes without writing anything (errors name the
    /// index), as `add_nodes` would: a node whose key is taken (by a stored
    /// node or earlier in the batch) must still be well formed.
    pub fn validate_new_nodes(&self, nodes: &[NewNode]) -> Result<()> {
        for (i, node) in nodes.iter().enumerate() {
            self.validate_new_node_shape(node)
                .map_err(|e| prefix_error(e, &format!("observation {i}")))?;
        }
        Ok(())
    }

    /// The node written with this idempotency key in this scope (pairs in
    /// any order), if it is still stored.
    pub fn id_for_key(&self, scope: &[(String, String)], key: &str) -> Option<NodeId> {
        let mut scope = scope.to_vec();
        scope.sort();
        self.key_index.get(&(scope, key.to_string())).copied()
    }

    /// Check an op against the current state without changing anything.
    pub fn validate_op(&self, op: &Op) -> Result<()> {
        match op {
            Op::AddNode { id, node } => {
                if *id != self.next_id() {
                    return Err(Error::invalid(format!(
                        "AddNode id {id} is not the next id {}",
                        self.next_id()
                    )));
                }
                self.validate_new_node(node)
            }
            Op::UpsertEdge(edge) => self.graph.validate_edge(edge),
            Op::SetTypes { id, types } => {
                self.require(*id)?;
                types.validate()
            }
            Op::RemoveNode { id } => self.require(*id).map(|_| ()),
            Op::Supersede(link) => self.validate_supersedes(link),
            Op::SetValidFrom { id, valid_from } => {
                self.require(*id)?;
                valid_from.map_or(Ok(()), |t| crate::types::check_timestamp(t, "valid_from"))
            }
            Op::SetDerived { facts, .. } => self.validate_derived(facts),
        }
    }

    fn validate_supersedes(&self, link: &Supersedes) -> Result<()> {
        self.require(link.new)?;
        self.require(link.old)?;
        self.facts.validate_link(link)?;
        self.graph.validate_edge(&supersedes_edge(link))
    }

    // ---- mutation ---------------------------------------------------------

    /// Validate, then apply one op. The single place where state changes.
    pub fn apply(&mut self, op: Op) -> Result<OpOutcome> {
        self.validate_op(&op)?;
        let mark = self.journal_op(&op)?;
        let outcome = self.apply_validated(op);
        if outcome.is_err() {
            self.journal_rewind(mark);
        }
        outcome
    }

    // ---- journal (durable memories) ---------------------------------------

    /// Change where vector search switches from the exact scan to HNSW
    /// (node and passage vectors). Not logged: it reaches disk with the next
    /// snapshot or checkpoint, like the rest of the config.
    pub fn set_exact_threshold(&mut self, exact_threshold: usize) -> Result<()> {
        self.vectors.set_exact_threshold(exact_threshold)?;
        self.passages.set_exact_threshold(exact_threshold)?;
        self.config.vector.exact_threshold = exact_threshold;
        Ok(())
    }

    /// Change the HNSW search expansion (ef) of node and passage vectors;
    /// a value out of range changes nothing. Not logged, as
    /// `set_exact_threshold`.
    pub fn set_expansion_search(&mut self, expansion_search: SearchExpansion) -> Result<()> {
        // both indexes check the value by the same rule: the first refuses
        // a bad one before anything changed
        self.vectors.set_expansion_search(expansion_search)?;
        self.passages.set_expansion_search(expansion_search)?;
        self.config.vector.expansion_search = expansion_search;
        Ok(())
    }

    /// The HNSW search expansion (ef) node vector searches use now.
    pub fn node_expansion_search(&self) -> usize {
        self.vectors.expansion_search()
    }

    /// Start (or stop) recording applied ops for the write-ahead log.
    pub fn set_journaling(&mut self, on: bool) {
        self.journal = on.then(Journal::default);
    }

    pub fn is_journaling(&self) -> bool {
        self.journal.is_some()
    }

    /// Whether ops were applied that no log record holds yet.
    pub fn journal_pending(&self) -> bool {
        self.journal.as_ref().is_some_and(|j| j.ops > 0)
    }

    /// The ops applied since the last call, for one log record.
    pub fn take_journal(&mut self) -> Journal {
        self.journal
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn journal_encode<T: Serialize>(&mut self, op: &T) -> Result<Option<(u32, usize)>> {
        let Some(j) = self.journal.as_mut() else {
            return Ok(None);
        };
        let mark = (j.ops, j.bytes.len());
        let bytes = std::mem::take(&mut j.bytes);
        j.bytes = postcard::to_extend(op, bytes)
            .map_err(|e| Error::Snapshot(format!("encoding a log record: {e}")))?;
        j.ops += 1;
        Ok(Some(mark))
    }

    fn journal_op(&mut self, op: &Op) -> Result<Option<(u32, usize)>> {
        self.journal_encode(op)
    }

    fn journal_rewind(&mut self, mark: Option<(u32, usize)>) {
        if let (Some(j), Some((ops, len))) = (self.journal.as_mut(), mark) {
            j.ops = ops;
            j.bytes.truncate(len);
        }
    }

    fn apply_validated(&mut self, op: Op) -> Result<OpOutcome> {
        let outcome = match op {
            Op::AddNode { id, node } => {
                self.insert_validated(id, node)?;
                OpOutcome::NodeAdded(id)
            }
            Op::UpsertEdge(edge) => OpOutcome::Edge(self.graph.upsert_edge(&edge)?),
            Op::SetTypes { id, types } => {
                self.graph.get_mut(id).expect("validated").types = types;
                OpOutcome::TypesSet
            }
            Op::RemoveNode { id } => {
                self.remove_validated(id)?;
                OpOutcome::NodeRemoved
            }
            Op::Supersede(link) => {
                self.graph.upsert_edge(&supersedes_edge(&link))?;
                OpOutcome::Superseded(self.facts.upsert(&link))
            }
            Op::SetValidFrom { id, valid_from } => {
                self.facts.set_valid_from(id, valid_from);
                OpOutcome::ValidFromSet
            }
            Op::SetDerived { version, facts } => {
                self.apply_derived(version, facts);
                OpOutcome::DerivedSet
            }
        };
        self.ops_applied += 1;
        Ok(outcome)
    }

    fn insert_validated(&mut self, id: NodeId, node: NewNode) -> Result<()> {
        // The vector index is the only step that can still fail (allocation
        // inside usearch); do it first so a failure leaves nothing behind.
        self.vectors.add(id, &node.embedding)?;
        if let Err(e) = self.passages.add_many(&[(id, &node.passages)], false) {
            self.vectors.remove(id)?;
            return Err(e);
        }
        self.index_node(id, node, true, None)
    }

    /// Everything of an insert but the vector: entities, BM25, time, graph.
    /// `tokenize`: index the text lexically (false: its lexical entry is in
    /// the index already, restored from a snapshot); `restored_marks`: its
    /// sentence marks as a snapshot kept them (None: made from the text).
    fn index_node(
        &mut self,
        id: NodeId,
        node: NewNode,
        tokenize: bool,
        restored_marks: Option<Option<NodeMarks>>,
    ) -> Result<()> {
        // A set beside the list: a long text can carry thousands of entities.
        let normalized: Vec<String> = node
            .entities
            .into_iter()
            .map(normalize_entity_owned)
            .collect();
        let first: Vec<bool> = {
            let mut seen: ShortKeySet<&str> = ShortKeySet::default();
            seen.reserve(normalized.len());
            normalized.iter().map(|e| seen.insert(e.as_str())).collect()
        };
        let entities: Vec<String> = normalized
            .into_iter()
            .zip(first)
            .filter_map(|(e, first)| first.then_some(e))
            .collect();
        // the text's sentence marks, made here as its tokens go into the index
        let mut made: Option<NodeMarks> = None;
        if tokenize {
            let (tokenizer, fields) = (&self.tokenizer, &self.config.lexical_fields);
            let content = node.content.as_str();
            let sentences = SentenceTokens::new(content, tokenizer);
            match sentences.runs(content) {
                None => {
                    // tokens straight into the index (`lexical_tokens` without
                    // the list), then the sentences' for the marks
                    let _ = self.bm25.try_add_each(id, |push| {
                        each_lexical_token(tokenizer, fields, content, &node.provenance, push)
                    });
                    made = self.marks_from_text(id, content);
                }
                Some(runs) => {
                    // the runs' tokens are the text's: tokenised once for the
                    // index and the marks, but around a stop that may sit
                    // inside a word ("3.5")
                    let mut counts = Vec::new();
                    let added = self.bm25.try_add_each_ids(id, |push| {
                        counts = sentences.push_text_tokens(content, &runs, tokenizer, push);
                        each_field_token(tokenizer, fields, &node.provenance, push);
                    });
                    if let (Ok(ids), Some(doc)) = (added, self.bm25.doc_terms(id)) {
                        let (token_ids, whole) =
                            sentences
                                .sentence_token_ids(&runs, &counts, &ids, |t| self.bm25.term_id(t));
                        made = Some(sentences.marks(&token_ids, doc, whole));
                    }
                }
            }
        }
        let marks = match restored_marks {
            Some(kept) => kept,
            None if tokenize => made,
            // the entry came from a snapshot without marks
            None => self.marks_from_text(id, &node.content),
        };
        self.marks.set(id, marks);
        for e in &entities {
            // the key is copied only for an entity not seen before
            match self.entity_index.get_mut(e.as_str()) {
                Some(ids) => ids.push(id),
                None => {
                    self.entity_index.insert(e.clone(), vec![id]);
                }
            }
        }
        match node.timestamp {
            Some(ts) => self.by_time.insert(ts, id),
            None => self.untimed.insert(UNTIMED, id),
        }
        let episode = episode_from(&node.provenance, &node.scope, node.timestamp);
        let key = episode_key(episode);
        if matches!(episode, Episode::Session { .. }) {
            let ts = node.timestamp;
            self.sessions
                .insert((key, ts.is_some()), ts.unwrap_or(UNTIMED), id);
        }
        self.episode_keys.insert(id, key);
        // validated, so these only sort
        let scope = normalize_scope(node.scope)?;
        let metadata = normalize_metadata(node.metadata)?;
        for pair in &scope {
            self.scope_index.entry(pair.clone()).or_default().push(id);
        }
        if let Some(key) = &node.key {
            self.key_index.insert((scope.clone(), key.clone()), id);
        }
        self.graph.push_node(Node {
            id,
            content: node.content,
            timestamp: node.timestamp,
            provenance: node.provenance,
            entities,
            types: node.types,
            scope,
            metadata,
            key: node.key,
        })
    }

    /// Insert pre-validated nodes under the given ids (ascending; gaps become
    /// removed slots), vectors in one batch so large loads fill the HNSW graph
    /// from several threads. `from_snapshot`: the embeddings are the stored
    /// unit vectors, kept exactly (see `VectorIndex::add_batch_stored`).
    /// `lexical`: what the nodes' texts tokenized to (a snapshot's, into a
    /// store without documents): their lexical index is restored from it,
    /// without tokenizing.
    pub(crate) fn insert_many(
        &mut self,
        nodes: Vec<(NodeId, NewNode)>,
        from_snapshot: bool,
        lexical: Option<LexicalSnapshot>,
        marks: Option<MarksSnapshot>,
    ) -> Result<()> {
        // marks are positions in lexical entries: only with the entries they read
        let mut marks = match (&lexical, marks) {
            (Some(_), Some(m)) => {
                if m.nodes.len() != nodes.len() {
                    return Err(Error::Snapshot(format!(
                        "sentence marks for {} nodes, {} stored",
                        m.nodes.len(),
                        nodes.len()
                    )));
                }
                Some(m.nodes.into_iter())
            }
            (None, Some(_)) => {
                return Err(Error::Snapshot(
                    "sentence marks without the lexical content they read".into(),
                ))
            }
            (_, None) => None,
        };
        let tokenize = lexical.is_none();
        if let Some(snap) = lexical {
            let ids: Vec<NodeId> = nodes.iter().map(|(id, _)| *id).collect();
            self.bm25.restore_lexical(&ids, snap)?;
        }
        let items: Vec<(NodeId, &[f32])> = nodes
            .iter()
            .map(|(id, n)| (*id, n.embedding.as_slice()))
            .collect();
        if from_snapshot {
            self.vectors.add_batch_stored(&items)?;
        } else {
            self.vectors.add_batch(&items)?;
        }
        let passages: Vec<(NodeId, &[_])> = nodes
            .iter()
            .map(|(id, n)| (*id, n.passages.as_slice()))
            .collect();
        if let Err(e) = self.passages.add_many(&passages, from_snapshot) {
            for (id, _) in &items {
                self.vectors.remove(*id)?;
            }
            return Err(e);
        }
        if !from_snapshot && self.journal.is_some() {
            for (id, node) in &nodes {
                self.journal_encode(&OpRef::AddNode { id: *id, node })?;
            }
        }
        for (id, node) in nodes {
            while self.graph.next_id() < id {
                self.graph.push_removed();
            }
            let restored = marks.as_mut().map(|m| m.next().expect("one per node"));
            self.index_node(id, node, tokenize, restored)?;
            self.ops_applied += 1;
        }
        Ok(())
    }

    /// The sentence marks of node `id`'s text (its lexical entry already in
    /// the index).
    pub(crate) fn marks_from_text(&self, id: NodeId, text: &str) -> Option<NodeMarks> {
        self.bm25
            .doc_terms(id)
            .map(|doc| node_marks(text, &self.tokenizer, doc, |t| self.bm25.term_id(t)))
    }

    /// Each stored node's sentence marks, in node order (a snapshot's).
    pub(crate) fn marks_snapshot(&self, ids: impl IntoIterator<Item = NodeId>) -> MarksSnapshot {
        MarksSnapshot {
            nodes: ids
                .into_iter()
                .map(|id| self.marks.get(id).cloned())
                .collect(),
        }
    }

    fn remove_validated(&mut self, id: NodeId) -> Result<()> {
        self.marks.remove(id);
        self.passages.remove(id)?;
        self.vectors.remove(id)?;
        let node = self.graph.remove_node(id)?;
        self.bm25.remove(id);
        for e in &node.entities {
            if let Some(ids) = self.entity_index.get_mut(e) {
                ids.retain(|&x| x != id);
                if ids.is_empty() {
                    self.entity_index.remove(e);
                }
            }
        }
        match node.timestamp {
            Some(ts) => self.by_time.remove(ts, id),
            None => self.untimed.remove(UNTIMED, id),
        }
        if let Some(key) = self.episode_keys.remove(&id) {
            // (a node on no session's line: nothing to take off)
            let ts = node.timestamp;
            self.sessions
                .remove((key, ts.is_some()), ts.unwrap_or(UNTIMED), id);
        }
        self.question_shares.remove(&id);
        self.time_refs.remove(&id);
        self.style.forget(id);
        for pair in &node.scope {
            if let Some(ids) = self.scope_index.get_mut(pair) {
                ids.retain(|&x| x != id);
                if ids.is_empty() {
                    self.scope_index.remove(pair);
                }
            }
        }
        if let Some(key) = node.key {
            // the key is free again: a later write with it stores anew
            self.key_index.remove(&(node.scope.clone(), key));
        }
        self.facts.remove_node(id);
        Ok(())
    }

    /// Apply a run of `AddNode` ops at once (replaying a log): every id
    /// must follow the one before, from `next_id`; vectors go in one batch,
    /// so the HNSW graph is built on all cores. All or nothing.
    pub fn apply_add_run(&mut self, run: Vec<(NodeId, NewNode)>) -> Result<()> {
        let first = self.next_id();
        for (k, (id, node)) in run.iter().enumerate() {
            if *id != first + k as NodeId {
                return Err(Error::invalid(format!(
                    "AddNode id {id} is not the next id {}",
                    first + k as NodeId
                )));
            }
            self.validate_new_node(node)?;
        }
        self.insert_many(run, false, None, None)
    }

    /// Add a node; returns its id. A node whose idempotency key is already
    /// used is a no-op (after validating it) that returns the existing id.
    pub fn add_node(&mut self, node: NewNode) -> Result<NodeId> {
        if let Some(existing) = scoped_key(&node).and_then(|k| self.key_index.get(&k).copied()) {
            self.validate_new_node_shape(&node)?;
            return Ok(existing);
        }
        let id = self.next_id();
        self.apply(Op::AddNode { id, node })?;
        Ok(id)
    }

    /// Add many nodes, all or nothing: every node is validated before any is
    /// written. Returns one id per input, in order; a node whose key is taken
    /// (by a stored node, or by an earlier node of the batch) is not stored
    /// and gets the id of the one holding the key.
    pub fn add_nodes(&mut self, nodes: Vec<NewNode>) -> Result<Vec<NodeId>> {
        self.validate_new_nodes(&nodes)?;
        let mut next = self.next_id();
        let mut ids = Vec::with_capacity(nodes.len());
        let mut fresh = Vec::with_capacity(nodes.len());
        let mut batch_keys: HashMap<ScopedKey, NodeId> = HashMap::new();
        for node in nodes {
            if let Some(key) = scoped_key(&node) {
                if let Some(&id) = self.key_index.get(&key).or_else(|| batch_keys.get(&key)) {
                    ids.push(id);
                    continue;
                }
                batch_keys.insert(key, next);
            }
            ids.push(next);
            fresh.push((next, node));
            next += 1;
        }
        self.insert_many(fresh, false, None, None)?;
        Ok(ids)
    }

    pub fn upsert_edge(&mut self, edge: Edge) -> Result<EdgeUpsert> {
        match self.apply(Op::UpsertEdge(edge))? {
            OpOutcome::Edge(outcome) => Ok(outcome),
            _ => unreachable!("UpsertEdge yields an edge outcome"),
        }
    }

    /// Upsert many edges, all or nothing.
    pub fn upsert_edges(&mut self, edges: Vec<Edge>) -> Result<Vec<EdgeUpsert>> {
        for (i, edge) in edges.iter().enumerate() {
            self.graph
                .validate_edge(edge)
                .map_err(|e| prefix_error(e, &format!("edge {i}")))?;
        }
        edges.into_iter().map(|e| self.upsert_edge(e)).collect()
    }

    pub fn set_types(&mut self, id: NodeId, types: TypeScores) -> Result<()> {
        self.apply(Op::SetTypes { id, types }).map(|_| ())
    }

    /// Delete one node as it is: its supersedes links go with it, so a fact
    /// it replaced is current again (see `forget_nodes` for the variant that
    /// keeps the survivors' chains).
    pub fn remove_node(&mut self, id: NodeId) -> Result<()> {
        let done = self.apply(Op::RemoveNode { id }).map(|_| ());
        self.settle();
        done
    }

    /// Settle what removals left stale (the style sums): once after a run
    /// of removals, not once per node.
    pub fn settle(&mut self) {
        self.style.settle(&self.question_shares);
    }

    /// Delete many nodes for real, all or nothing on bad input (an unknown or
    /// repeated id changes nothing), keeping what the supersedes links say
    /// about the survivors: a survivor that a removed node replaced stays
    /// replaced by the survivors that replaced that node, so forgetting the
    /// middle of a chain does not make its oldest fact current again.
    ///
    /// Each bridge `new -> old` stands for a path through removed nodes; its
    /// weight is the path's weakest link, the strongest such path when there
    /// are several (an existing direct link keeps the larger weight). Nodes
    /// are removed one at a time, each bridging its own neighbours first, so
    /// paths through several removed nodes are bridged too: eliminating
    /// vertices in the (max, min) semiring, whose result does not depend on
    /// the order. Bridges are plain `Op::Supersede`s (origin `Rule`), so a log
    /// of the ops applied replays to the same state. Returns the bridges
    /// between survivors.
    pub fn forget_nodes(&mut self, ids: &[NodeId]) -> Result<Vec<Supersedes>> {
        let mut gone: HashSet<NodeId> = HashSet::with_capacity(ids.len());
        for &id in ids {
            self.require(id)?;
            if !gone.insert(id) {
                return Err(Error::invalid(format!("node {id} is listed twice")));
            }
        }
        let mut written: BTreeSet<(NodeId, NodeId)> = BTreeSet::new();
        for &id in ids {
            let olds = self.facts.supersedes(id);
            let news = self.facts.superseded_by(id);
            for &new in &news {
                let w_new = self.facts.link(new, id).map_or(0.0, |l| l.weight);
                for &old in &olds {
                    let w_old = self.facts.link(id, old).map_or(0.0, |l| l.weight);
                    let bridge = Supersedes {
                        new,
                        old,
                        weight: w_new.min(w_old),
                        origin: EdgeOrigin::Rule,
                    };
                    if self
                        .facts
                        .link(new, old)
                        .is_some_and(|l| l.weight >= bridge.weight)
                    {
                        continue; // says nothing the table does not already hold
                    }
                    self.apply(Op::Supersede(bridge))?;
                    written.insert((new, old));
                }
            }
            self.apply(Op::RemoveNode { id })?;
        }
        self.settle();
        written.retain(|(new, old)| !gone.contains(new) && !gone.contains(old));
        Ok(written
            .into_iter()
            .filter_map(|(new, old)| self.facts.link(new, old))
            .collect())
    }

    /// Record that `link.new` supersedes `link.old` (see `facts`).
    pub fn add_supersedes(&mut self, link: Supersedes) -> Result<EdgeUpsert> {
        match self.apply(Op::Supersede(link))? {
            OpOutcome::Superseded(outcome) => Ok(outcome),
            _ => unreachable!("Supersede yields a supersedes outcome"),
        }
    }

    /// Add many supersedes links, all or nothing: each is checked against the
    /// table as the earlier ones of the batch leave it (so a batch cannot close
    /// a cycle either).
    pub fn add_supersedes_many(&mut self, links: Vec<Supersedes>) -> Result<Vec<EdgeUpsert>> {
        let mut trial = self.facts.clone();
        for (i, link) in links.iter().enumerate() {
            self.require(link.new)
                .and_then(|_| self.require(link.old))
                .and_then(|_| trial.validate_link(link))
                .and_then(|_| self.graph.validate_edge(&supersedes_edge(link)))
                .map_err(|e| prefix_error(e, &format!("link {i}")))?;
            trial.upsert(link);
        }
        links.into_iter().map(|l| self.add_supersedes(l)).collect()
    }

    /// Set (or, with `None`, clear) the time a node's fact became true when
    /// it differs from its observation time.
    pub fn set_valid_from(&mut self, id: NodeId, valid_from: Option<Timestamp>) -> Result<()> {
        self.apply(Op::SetValidFrom { id, valid_from }).map(|_| ())
    }

    pub fn facts(&self) -> &FactTable {
        &self.facts
    }

    /// When the node's fact became true: its explicit event time
    /// (`set_valid_from`), else [`event_start`] of the times its text
    /// grounds, else its timestamp. Read from the node's own facts,
    /// whatever its links: a link made and taken back (a failed write, a
    /// forgotten version) leaves nothing behind.
    pub fn valid_from(&self, id: NodeId) -> Result<Option<Timestamp>> {
        let node = self.require(id)?;
        Ok(self
            .facts
            .explicit_valid_from(id)
            .or_else(|| event_start(self.time_refs(id), node.timestamp))
            .or(node.timestamp))
    }

    /// `(valid_from, valid_to)`: `valid_to` is the earliest `valid_from` of
    /// the facts superseding it (never before its own `valid_from`, so the
    /// interval stays well formed); `None` while it is current, or when no
    /// successor has a known time.
    pub fn validity(&self, id: NodeId) -> Result<(Option<Timestamp>, Option<Timestamp>)> {
        let from = self.valid_from(id)?;
        let mut to: Option<Timestamp> = None;
        for s in self.facts.superseded_by(id) {
            if let Some(t) = self.valid_from(s)? {
                to = Some(to.map_or(t, |x| x.min(t)));
            }
        }
        let to = match (from, to) {
            (Some(f), Some(t)) => Some(t.max(f)),
            (_, t) => t,
        };
        Ok((from, to))
    }

    /// Every fact `id` superseded, transitively, nearest first, `id` first.
    pub fn history(&self, id: NodeId) -> Result<Vec<NodeId>> {
        self.require(id)?;
        Ok(self.facts.history(id))
    }

    // ---- reads ------------------------------------------------------------

    /// What BM25 indexes for a node: its text plus the configured provenance fields.
    pub fn lexical_tokens(&self, content: &str, provenance: &[(String, String)]) -> Vec<String> {
        let mut tokens = Vec::new();
        each_lexical_token(
            &self.tokenizer,
            &self.config.lexical_fields,
            content,
            provenance,
            &mut |t| tokens.push(t.to_owned()),
        );
        tokens
    }

    pub fn tokenize(&self, text: &str) -> Vec<String> {
        self.tokenizer.tokenize(text)
    }

    /// A query's BM25 terms: its tokens without the words of
    /// `QUERY_TIME_WORDS`, as written (all of them when nothing else is
    /// left). "What
    /// milk does she take now?" asks about milk at the present; the tense is
    /// the fact time's to read (`cues::query_fact_time`), and "now" as a
    /// term ranked any turn that happens to say "now".
    pub fn query_tokens(&self, query: &str) -> Vec<String> {
        let kept = self.tokenizer.tokenize_skipping(query, |word| {
            QUERY_TIME_WORDS
                .iter()
                .any(|w| word.eq_ignore_ascii_case(w))
        });
        if kept.is_empty() {
            self.tokenizer.tokenize(query)
        } else {
            kept
        }
    }

    /// BM25 ranking of the query text (its `query_tokens`).
    pub fn search_lexical(&self, query: &str, k: usize) -> Vec<(NodeId, f32)> {
        self.search_lexical_scoped(query, k, None)
    }

    /// BM25 ranking among the allowed nodes, scored with their statistics
    /// only (see `Bm25Index::search_scoped`).
    pub fn search_lexical_scoped(
        &self,
        query: &str,
        k: usize,
        allowed: Option<&Allowed>,
    ) -> Vec<(NodeId, f32)> {
        self.search_terms_scoped(&self.query_tokens(query), k, allowed)
    }

    /// `search_lexical_scoped` of terms already read (`query_tokens`).
    pub(crate) fn search_terms_scoped(
        &self,
        terms: &[String],
        k: usize,
        allowed: Option<&Allowed>,
    ) -> Vec<(NodeId, f32)> {
        self.bm25.search_scoped(terms, k, allowed, None)
    }

    /// BM25 scores of the given nodes for a query (its `query_tokens`),
    /// with the allowed nodes' statistics (0 for unknown or disallowed ids).
    pub fn lexical_scores_scoped(
        &self,
        query: &str,
        ids: &[NodeId],
        allowed: Option<&Allowed>,
    ) -> Vec<f32> {
        let tokens = self.query_tokens(query);
        self.bm25.score_scoped(&tokens, ids, allowed)
    }

    /// Cosine ranking of a query embedding.
    pub fn search_vector(&self, query: &[f32], k: usize) -> Result<Vec<(NodeId, f32)>> {
        self.vectors.search(query, k, None)
    }

    /// Cosine ranking among the allowed nodes.
    pub fn search_vector_scoped(
        &self,
        query: &[f32],
        k: usize,
        allowed: Option<&Allowed>,
    ) -> Result<Vec<(NodeId, f32)>> {
        self.vectors.search_scoped(query, k, allowed, None)
    }

    /// The best `k` nodes by their best passage, best first (similarity desc,
    /// then node id, then passage index). A node without passage vectors
    /// counts as one passage, its node vector (index 0), so on a memory of
    /// short texts this is `search_vector` with passage 0 everywhere.
    pub fn search_passages(&self, query: &[f32], k: usize) -> Result<Vec<PassageHit>> {
        self.search_passages_scoped(query, k, None)
    }

    /// `search_passages` among the allowed nodes.
    pub fn search_passages_scoped(
        &self,
        query: &[f32],
        k: usize,
        allowed: Option<&Allowed>,
    ) -> Result<Vec<PassageHit>> {
        self.vectors.validate(query)?;
        if k == 0 {
            return Ok(Vec::new());
        }
        let passages = &self.passages;
        let short = |id: NodeId| !passages.has(id);
        let filter: Option<&dyn Fn(NodeId) -> bool> = if passages.is_empty() {
            None
        } else {
            Some(&short)
        };
        let mut out: Vec<PassageHit> = self
            .vectors
            .search_scoped(query, k, allowed, filter)?
            .into_iter()
            .map(|(node, similarity)| PassageHit {
                node,
                passage: 0,
                similarity,
            })
            .collect();
        if !passages.is_empty() {
            out.extend(passages.search_scoped(query, k, allowed)?);
            out.sort_unstable_by(hit_order);
            out.truncate(k);
        }
        Ok(out)
    }

    /// Each node's best passage for a query: (similarity, passage index);
    /// a node without passage vectors gives its node vector's similarity and
    /// index 0; None for an unknown id.
    pub fn passage_similarities(
        &self,
        query: &[f32],
        ids: &[NodeId],
    ) -> Result<Vec<Option<(f32, u32)>>> {
        self.vectors.validate(query)?;
        let unit = VectorIndex::normalize(query);
        let whole = self.vectors.similarities(&unit, ids);
        Ok(self.best_passages(&unit, ids, &whole))
    }

    /// `passage_similarities` for a unit query, given each node's whole-text
    /// similarity (`whole[k]`, `VectorIndex::similarities`): a node without
    /// passages is its one passage.
    pub(crate) fn best_passages(
        &self,
        unit_query: &[f32],
        ids: &[NodeId],
        whole: &[Option<f32>],
    ) -> Vec<Option<(f32, u32)>> {
        ids.iter()
            .zip(whole)
            .map(|(&id, &whole)| self.best_passage(unit_query, id, whole))
            .collect()
    }

    /// `best_passages` of one node.
    pub(crate) fn best_passage(
        &self,
        unit_query: &[f32],
        id: NodeId,
        whole: Option<f32>,
    ) -> Option<(f32, u32)> {
        self.passages
            .best(unit_query, id)
            .or_else(|| whole.map(|s| (s, 0)))
    }

    /// The passage spans stored for a node (empty when its text is one passage).
    pub fn passage_spans(&self, id: NodeId) -> Result<&[Span]> {
        self.require(id)?;
        Ok(self.passages.spans(id).unwrap_or(&[]))
    }

    /// Reciprocal-rank fusion of the lexical and vector rankings (each cut at
    /// `depth` entries), top `k`. Either side may be absent.
    pub fn fused_anchors(
        &self,
        query_text: Option<&str>,
        query_vector: Option<&[f32]>,
        k: usize,
        depth: usize,
        kappa: f64,
    ) -> Result<Vec<(NodeId, f64)>> {
        self.fused_anchors_scoped(query_text, query_vector, k, depth, kappa, None)
    }

    /// `fused_anchors` among the allowed nodes.
    pub fn fused_anchors_scoped(
        &self,
        query_text: Option<&str>,
        query_vector: Option<&[f32]>,
        k: usize,
        depth: usize,
        kappa: f64,
        allowed: Option<&Allowed>,
    ) -> Result<Vec<(NodeId, f64)>> {
        let vector: Vec<NodeId> = match query_vector {
            Some(q) => self
                .vectors
                .search_scoped(q, depth, allowed, None)?
                .into_iter()
                .map(|(id, _)| id)
                .collect(),
            None => Vec::new(),
        };
        let lexical: Vec<NodeId> = match query_text {
            Some(t) => self
                .search_lexical_scoped(t, depth, allowed)
                .into_iter()
                .map(|(id, _)| id)
                .collect(),
            None => Vec::new(),
        };
        let mut fused = fusion::rrf(&[vector.as_slice(), lexical.as_slice()], kappa)?;
        fused.truncate(k);
        Ok(fused)
    }

    /// Every edge touching `id`, optionally in one view.
    pub fn neighbors(&self, id: NodeId, view: Option<View>) -> Result<Vec<Edge>> {
        self.require(id)?;
        let mut edges = self.graph.incident_edges(id);
        if let Some(v) = view {
            edges.retain(|e| e.view == v);
        }
        Ok(edges)
    }

    /// Every entity some stored node carries (normalised), sorted.
    pub fn entity_names(&self) -> Vec<String> {
        let mut out: Vec<String> = self.entity_index.keys().cloned().collect();
        out.sort_unstable();
        out
    }

    /// Ids carrying a (normalised) entity, ascending.
    pub fn nodes_with_entity(&self, entity: &str) -> &[NodeId] {
        self.entity_index
            .get(&normalize_entity(entity))
            .map_or(&[], Vec::as_slice)
    }

    // ---- scopes and filters -------------------------------------------------

    /// The nodes a selection allows, for the scoped reads; None when it
    /// allows every node, so unscoped reads run exactly as before, without a
    /// check per node.
    pub fn select(&self, selection: &Selection) -> Option<Allowed> {
        (!selection.is_everything())
            .then(|| Allowed::from_sorted(self.list(selection, None, usize::MAX)))
    }

    /// Every node a selection selects, ascending.
    pub fn matching_ids(&self, selection: &Selection) -> Vec<NodeId> {
        self.list(selection, None, usize::MAX)
    }

    /// Up to `limit` ids a selection selects, ascending, after `after`. With a
    /// scope, only the carriers of its rarest pair are looked at; work is
    /// proportional to the nodes passed over, not to the memory.
    pub fn list(&self, selection: &Selection, after: Option<NodeId>, limit: usize) -> Vec<NodeId> {
        let start = after.map_or(0, |a| a.saturating_add(1));
        let mut out = Vec::new();
        if limit == 0 {
            return out;
        }
        let mut keep = |node: &Node| {
            if selection.matches(node) {
                out.push(node.id);
            }
            out.len() < limit
        };
        let pairs = selection.scope_pairs();
        if pairs.is_empty() {
            for id in start..self.next_id() {
                if let Some(node) = self.graph.get(id) {
                    if !keep(node) {
                        break;
                    }
                }
            }
        } else {
            let mut rarest: &[NodeId] = &[];
            for (i, pair) in pairs.iter().enumerate() {
                let Some(ids) = self.scope_index.get(pair) else {
                    return out; // nobody carries this pair
                };
                if i == 0 || ids.len() < rarest.len() {
                    rarest = ids;
                }
            }
            let from = rarest.partition_point(|&x| x < start);
            if selection.filter().is_none() {
                // Scope alone: the carriers of the rarest pair that carry the
                // others too, read off the index (no node is looked at).
                let lists: Vec<&Vec<NodeId>> = pairs
                    .iter()
                    .filter_map(|p| self.scope_index.get(p))
                    .filter(|l| !std::ptr::eq(l.as_slice(), rarest))
                    .collect();
                return rarest[from..]
                    .iter()
                    .copied()
                    .filter(|id| lists.iter().all(|l| l.binary_search(id).is_ok()))
                    .take(limit)
                    .collect();
            }
            for &id in &rarest[from..] {
                let node = self.graph.get(id).expect("scope index holds live ids");
                if !keep(node) {
                    break;
                }
            }
        }
        out
    }

    pub fn stats(&self) -> StoreStats {
        StoreStats {
            nodes: self.graph.len(),
            next_id: self.graph.next_id(),
            edges: View::ALL.map(|v| self.graph.edge_count(v)),
            supersedes: self.facts.len(),
            ops_applied: self.ops_applied,
            graph_bytes: self.graph.memory_bytes()
                + self
                    .entity_index
                    .values()
                    .map(|v| v.capacity() * 8 + 48)
                    .sum::<usize>()
                + self.by_time.memory_bytes()
                + self.untimed.memory_bytes()
                + self.sessions.memory_bytes()
                + self.question_shares.len() * 24
                + self.episode_keys.len() * 24
                + self.derived_bytes()
                + self.style.memory_bytes()
                + self.facts.memory_bytes(),
            // the lexical index's side: positions in its entries
            bm25_bytes: self.bm25.memory_bytes() + self.marks.memory_bytes(),
            vector_bytes: self.vectors.memory_bytes(),
            passages: self.passages.len(),
            passage_nodes: self.passages.node_count(),
            passage_bytes: self.passages.memory_bytes(),
        }
    }
}

/// The temporal edge that goes with a supersedes link. The four views are
/// fixed; a replacement is an order in time between two statements of one
/// subject, so it enters the temporal view as `new -after-> old`, and a
/// traversal from the current fact reaches its history (and back) with no
/// fifth view. The table keeps what the edge cannot say: that one replaced
/// the other, and when each held.
fn supersedes_edge(link: &Supersedes) -> Edge {
    Edge {
        src: link.new,
        dst: link.old,
        view: View::Temporal,
        weight: link.weight,
        origin: link.origin,
        temporal: Some(TemporalLabel::After),
    }
}

fn prefix_error(err: Error, what: &str) -> Error {
    match err {
        Error::InvalidInput(m) => Error::InvalidInput(format!("{what}: {m}")),
        Error::InvalidScore { what: w, value } => Error::InvalidScore {
            what: format!("{what}: {w}"),
            value,
        },
        other => other,
    }
}

/// The store as a scoped traversal sees it: only the allowed nodes exist, and
/// an edge to any other node is not there (not expanded, not counted).
pub struct Restricted<'a> {
    pub store: &'a MemoryStore,
    pub allowed: &'a Allowed,
}

impl GraphAccess for Restricted<'_> {
    fn contains(&self, node: NodeId) -> bool {
        self.allowed.contains(node) && self.store.graph.contains(node)
    }

    fn edges(&self, node: NodeId, view: View, out: &mut Vec<EdgeRef>) {
        if !self.allowed.contains(node) {
            return;
        }
        let first = out.len();
        GraphAccess::edges(&self.store.graph, node, view, out);
        let mut kept = first;
        for i in first..out.len() {
            if self.allowed.contains(out[i].neighbor) {
                out.swap(kept, i);
                kept += 1;
            }
        }
        out.truncate(kept);
    }

    fn prefetch_edges(&self, nodes: &[NodeId], views: &[View]) {
        self.store.graph.prefetch_edges(nodes, views);
    }

    fn similarity(&self, unit_query: &[f32], node: NodeId) -> Option<f32> {
        if !self.allowed.contains(node) {
            return None;
        }
        self.store.vectors.similarity(unit_query, node)
    }

    fn similarities(&self, unit_query: &[f32], nodes: &[NodeId], out: &mut Vec<Option<f32>>) {
        let sims = self.store.vectors.similarities(unit_query, nodes);
        out.extend(
            nodes
                .iter()
                .zip(sims)
                .map(|(&n, s)| s.filter(|_| self.allowed.contains(n))),
        );
    }

    fn timestamp(&self, node: NodeId) -> Option<Timestamp> {
        if !self.allowed.contains(node) {
            return None;
        }
        self.store.graph.get(node).and_then(|n| n.timestamp)
    }
}

/// The traversal sees the store's graph, its embeddings and its timestamps.
impl GraphAccess for MemoryStore {
    fn contains(&self, node: NodeId) -> bool {
        self.graph.contains(node)
    }

    fn edges(&self, node: NodeId, view: View, out: &mut Vec<EdgeRef>) {
        GraphAccess::edges(&self.graph, node, view, out);
    }

    fn prefetch_edges(&self, nodes: &[NodeId], views: &[View]) {
        self.graph.prefetch_edges(nodes, views);
    }

    fn similarity(&self, unit_query: &[f32], node: NodeId) -> Option<f32> {
        self.vectors.similarity(unit_query, node)
    }

    fn similarities(&self, unit_query: &[f32], nodes: &[NodeId], out: &mut Vec<Option<f32>>) {
        out.extend(self.vectors.similarities(unit_query, nodes));
    }

    fn timestamp(&self, node: NodeId) -> Option<Timestamp> {
        self.graph.get(node).and_then(|n| n.timestamp)
    }
}

/// The start of the latest time a text grounds that begins at or before
/// its observation ("after years in Porto since 2016, I moved last month":
/// last month): the latest such time is the change the text reports. A
/// time ahead of the observation is an event the fact is about ("my
/// appointment is on June 3"), not when the fact began. An untimed
/// observation has no relative references: its first time, if any.
pub fn event_start(refs: &[TimeRef], observed_at: Option<Timestamp>) -> Option<Timestamp> {
    match observed_at {
        None => refs.first().map(|r| r.start),
        Some(at) => refs.iter().map(|r| r.start).filter(|&s| s <= at).max(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn time_ref(start: Timestamp) -> TimeRef {
        TimeRef {
            text: String::new(),
            start,
            end: start + 86_400,
            precision: 0,
            relative: false,
            span: (0, 0),
            anchor_precision: None,
        }
    }

    #[test]
    fn a_fact_begins_at_the_latest_time_named_by_its_observation() {
        let refs = [time_ref(100), time_ref(900), time_ref(500), time_ref(2_000)];
        // 2,000 lies ahead (an event), 900 is the latest at or before 1,000
        assert_eq!(event_start(&refs, Some(1_000)), Some(900));
        assert_eq!(event_start(&refs, Some(900)), Some(900));
        assert_eq!(event_start(&refs, Some(50)), None);
        assert_eq!(event_start(&[], Some(50)), None);
        // untimed: no time to compare with, the first named
        assert_eq!(event_start(&refs, None), Some(100));
    }

    /// The form `normalize_entity` had: a lowercased string per word, joined.
    fn normalize_entity_by_words(raw: &str) -> String {
        raw.split_whitespace()
            .map(str::to_lowercase)
            .collect::<Vec<_>>()
            .join(" ")
    }

    proptest! {
        /// The one-buffer form equals lowercasing each word and joining them,
        /// on ASCII, mixed scripts, final sigmas and Unicode whitespace.
        #[test]
        fn normalize_entity_matches_lowercasing_each_word(
            raw in prop_oneof![
                "[ \t\n\r\x0b\x0c\u{85}\u{a0}\u{3000}aZ9.\u{3a3}\u{130}\u{df}\u{c9}\u{1f600}-]{0,24}",
                // already normal, as a snapshot's names are
                "[a-z9.]{1,5}( [a-z-]{1,5}){0,3}",
            ]
        ) {
            prop_assert_eq!(normalize_entity(&raw), normalize_entity_by_words(&raw));
            prop_assert_eq!(normalize_entity_owned(raw.clone()), normalize_entity_by_words(&raw));
            // the shape check's shortcut: empty after normalising iff blank
            prop_assert_eq!(normalize_entity(&raw).is_empty(), raw.trim().is_empty());
        }
    }

    #[test]
    fn normalize_entity_cases() {
        assert_eq!(normalize_entity("  Ada \t LOVELACE\n"), "ada lovelace");
        assert_eq!(normalize_entity("ΟΔΥΣΣΕΥΣ"), "οδυσσευς");
        assert_eq!(normalize_entity(" \u{3000} "), "");
        for raw in [
            "ada lovelace",
            "a\x0bb",
            "a\x0cb",
            "a\rb",
            "x\u{85}y",
            "Ada",
            "ada  l",
            " ada",
            "",
        ] {
            assert_eq!(
                normalize_entity_owned(raw.to_string()),
                normalize_entity_by_words(raw)
            );
        }
    }
}
