//! `jevmem._core.MemoryStore`: the memory plane behind a frozen pyclass.
//!
//! The store sits in `Arc<RwLock<..>>`: searches take the read lock and run
//! with the GIL released, so concurrent Python threads scale across cores;
//! writers take the write lock and are serialised. Inputs are converted to
//! owned Rust values before the GIL is released.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use jevmem_core::candidates::CandidateMatch;
use jevmem_core::context::{self, ContextConfig};
use jevmem_core::coverage::{self, CoverageQuery};
use jevmem_core::derived::{precision_code, DerivedFacts, TimeQuery, TimeRef, PRECISIONS};
use jevmem_core::facts::Supersedes as CoreSupersedes;
use jevmem_core::filter::{check_idempotency_key, normalize_metadata, normalize_scope};
use jevmem_core::graph::EdgeUpsert;
use jevmem_core::hashing::ShortKeyMap;
use jevmem_core::ops::NewNode;
use jevmem_core::pair_signals::{NewNodePairs, PairSignals};
use jevmem_core::passages::NewPassage;
use jevmem_core::signals::{SignalQuery, SIGNAL_COLUMNS};
use jevmem_core::snapshot::LoadOptions;
use jevmem_core::store::{MemoryStore as CoreStore, StoreConfig, DEFAULT_MAX_CONTENT_BYTES};
use jevmem_core::vector::{Quantization, SearchExpansion, VectorIndex};
use jevmem_core::writing::LinkPlan;
use jevmem_core::{
    Edge as CoreEdge, EdgeOrigin, Error, MetaValue, Node as CoreNode, NodeId, TemporalLabel,
    TypeScores, View,
};
use numpy::{AllowTypeChange, IntoPyArray, PyArray1, PyArray2, PyArrayLike1, PyArrayLike2};
use parking_lot::RwLock;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::durable::{DurableHandle, OpenResult};
use crate::errors::{
    embedding_arg, embeddings_arg, extract_arg, node_id_arg, node_ids_arg, setting_arg,
    timestamp_arg, timestamps_arg, to_py, IntoPyResult,
};
use crate::scope::{
    key_arg, metadata_arg, metadata_dict, scope_arg, selection_arg, Allowed, MetaPy,
};
use crate::traversal::{start_traversal, Traversal, TraversalConfig};
use jevmem_core::durable::{Durable, DurableOptions, SyncMode, DEFAULT_SEGMENT_BYTES};
use pyo3::types::PyDict;

pub type Shared = Arc<RwLock<CoreStore>>;

/// Loads from Python defer the HNSW graph to the background builder.
fn deferred(max_absent_ids: Option<u64>) -> LoadOptions {
    LoadOptions {
        defer_graph: true,
        max_absent_ids,
    }
}

/// One step of graph building under the write lock: bounded in time so a
/// search or write waits at most about this long, and released fairly so a
/// waiting thread goes next.
fn build_graph_step(shared: &Shared) -> Result<usize, Error> {
    const STEP_ITEMS: usize = 256;
    const STEP_BUDGET: std::time::Duration = std::time::Duration::from_millis(4);
    let mut guard = shared.write();
    let moved = guard.build_pending_graph(STEP_ITEMS, STEP_BUDGET);
    parking_lot::RwLockWriteGuard::unlock_fair(guard);
    moved
}

/// Build a loaded memory's HNSW graph on a background thread. It holds only
/// a weak reference, so a dropped store ends it; a usearch error ends it too
/// (the vectors stay pending and searches stay exact; `finish_graph` would
/// report the error).
fn spawn_graph_builder(shared: &Shared) {
    let weak = Arc::downgrade(shared);
    let spawned = std::thread::Builder::new()
        .name("jevmem-graph".into())
        .spawn(move || loop {
            let Some(shared) = weak.upgrade() else {
                return;
            };
            match build_graph_step(&shared) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        });
    // Without a thread the memory still answers (exactly); nothing to undo.
    drop(spawned);
}
/// (episodic, semantic, procedural, preference)
type TypeTuple = (f32, f32, f32, f32);
/// A ranking as numpy arrays: (ids, scores).
type Ranked<'py, S> = (Bound<'py, PyArray1<u64>>, Bound<'py, PyArray1<S>>);
/// One node's passages as Python passes them: ((m, dim) embeddings, m spans).
type PassageRanked<'py> = (
    Bound<'py, PyArray1<u64>>,
    Bound<'py, PyArray1<u32>>,
    Bound<'py, PyArray1<f32>>,
);
/// Per node: (best passage similarity, its index).
type BestPassages<'py> = (Bound<'py, PyArray1<f32>>, Bound<'py, PyArray1<u32>>);
/// `read_signals`' signal columns and best passages.
/// `text_marks`: the names, and each sentence as (tokens, weight, first, second person).
type TextMarksTuple = (Vec<String>, Vec<(Vec<String>, f64, bool, bool)>);

type SignalRows<'py> = (Bound<'py, PyArray2<f64>>, Bound<'py, PyArray1<u32>>);
type PassagesArg<'py> = (PyArrayLike2<'py, f32, AllowTypeChange>, Vec<(u64, u64)>);

/// A stored node, copied out of the memory.
#[pyclass(frozen, module = "jevmem._core", get_all)]
pub struct Node {
    pub id: NodeId,
    pub text: String,
    pub timestamp: Option<i64>,
    pub provenance: HashMap<String, String>,
    pub entities: Vec<String>,
    /// (episodic, semantic, procedural, preference)
    pub types: (f32, f32, f32, f32),
    /// Scope pairs (empty: global).
    pub scope: HashMap<String, String>,
    /// Caller metadata: str, int, float or bool values.
    pub metadata: HashMap<String, MetaPy>,
    /// The idempotency key it was written with, if any.
    pub key: Option<String>,
}

#[pymethods]
impl Node {
    fn __repr__(&self) -> String {
        let mut text: String = self.text.chars().take(60).collect();
        if text.len() < self.text.len() {
            text.push('…');
        }
        format!(
            "Node(id={}, text={:?}, timestamp={:?})",
            self.id, text, self.timestamp
        )
    }
}

impl From<&CoreNode> for Node {
    fn from(n: &CoreNode) -> Self {
        Node {
            id: n.id,
            text: n.content.clone(),
            timestamp: n.timestamp,
            provenance: n.provenance.iter().cloned().collect(),
            entities: n.entities.clone(),
            types: (
                n.types.episodic,
                n.types.semantic,
                n.types.procedural,
                n.types.preference,
            ),
            scope: n.scope.iter().cloned().collect(),
            metadata: metadata_dict(&n.metadata),
            key: n.key.clone(),
        }
    }
}

/// A typed edge. Causal edges point cause -> effect.
#[pyclass(frozen, module = "jevmem._core", get_all)]
pub struct Edge {
    pub src: NodeId,
    pub dst: NodeId,
    pub view: &'static str,
    pub weight: f32,
    pub origin: &'static str,
    pub temporal_label: Option<&'static str>,
}

#[pymethods]
impl Edge {
    fn __repr__(&self) -> String {
        format!(
            "Edge({} -> {}, view={:?}, weight={:.3}, origin={:?})",
            self.src, self.dst, self.view, self.weight, self.origin
        )
    }
}

impl From<&CoreEdge> for Edge {
    fn from(e: &CoreEdge) -> Self {
        Edge {
            src: e.src,
            dst: e.dst,
            view: e.view.name(),
            weight: e.weight,
            origin: e.origin.name(),
            temporal_label: e.temporal.map(TemporalLabel::name),
        }
    }
}

/// A supersedes link: `new` updates, replaces or contradicts what `old` stated.
#[pyclass(frozen, module = "jevmem._core", get_all)]
pub struct Supersedes {
    pub new: NodeId,
    pub old: NodeId,
    pub weight: f32,
    pub origin: &'static str,
}

#[pymethods]
impl Supersedes {
    fn __repr__(&self) -> String {
        format!(
            "Supersedes({} -> {}, weight={:.3}, origin={:?})",
            self.new, self.old, self.weight, self.origin
        )
    }
}

impl From<&CoreSupersedes> for Supersedes {
    fn from(l: &CoreSupersedes) -> Self {
        Supersedes {
            new: l.new,
            old: l.old,
            weight: l.weight,
            origin: l.origin.name(),
        }
    }
}

/// (valid_from, valid_to, what it supersedes, what supersedes it), the
/// neighbours as (id, link weight)
pub(crate) type FactChain = (
    Option<i64>,
    Option<i64>,
    Vec<(NodeId, f32)>,
    Vec<(NodeId, f32)>,
);

/// An earlier node proposed for relation judgment with a new one.
#[pyclass(frozen, module = "jevmem._core", get_all)]
pub struct WriteCandidate {
    pub id: NodeId,
    pub score: f32,
    pub vector: f32,
    pub lexical: f32,
    pub entity: f32,
    pub temporal: f32,
    /// What relation judgment reads about the pair (`pair_signals`).
    pub same_session: f64,
    pub same_speaker: f64,
    pub older: f64,
    pub alias: f64,
}

#[pymethods]
impl WriteCandidate {
    fn __repr__(&self) -> String {
        format!("WriteCandidate(id={}, score={:.4})", self.id, self.score)
    }
}

impl WriteCandidate {
    fn new(c: CandidateMatch, pair: PairSignals) -> Self {
        WriteCandidate {
            id: c.id,
            score: c.score,
            vector: c.signals.vector,
            lexical: c.signals.lexical,
            entity: c.signals.entity,
            temporal: c.signals.temporal,
            same_session: pair.same_session,
            same_speaker: pair.same_speaker,
            older: pair.older,
            alias: pair.alias,
        }
    }
}

fn types_arg(types: Option<(f32, f32, f32, f32)>) -> TypeScores {
    types.map_or_else(
        TypeScores::default,
        |(episodic, semantic, procedural, preference)| TypeScores {
            episodic,
            semantic,
            procedural,
            preference,
        },
    )
}

fn provenance_arg(p: Option<HashMap<String, String>>) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = p.unwrap_or_default().into_iter().collect();
    v.sort(); // dict order is not part of the data; keep stored order deterministic
    v
}

/// A fixed ef, or None for the one that grows with the index.
fn search_expansion(ef: Option<usize>) -> SearchExpansion {
    ef.map_or(SearchExpansion::Grows, SearchExpansion::Fixed)
}

fn parse_quantization(s: &str) -> Result<Quantization, Error> {
    match s {
        "f32" => Ok(Quantization::F32),
        "f16" => Ok(Quantization::F16),
        "i8" => Ok(Quantization::I8),
        _ => Err(Error::InvalidConfig(format!(
            "quantization must be f32, f16 or i8, got {s:?}"
        ))),
    }
}

fn vector_arg(v: &PyArrayLike1<'_, f32, AllowTypeChange>) -> Vec<f32> {
    v.as_array().iter().copied().collect()
}

/// An InvalidInputError unless two parallel arguments have the same length.
fn same_length(a: &str, a_len: usize, b: &str, b_len: usize) -> PyResult<()> {
    if a_len == b_len {
        return Ok(());
    }
    Err(Error::InvalidInput(format!("{a_len} {a} but {b_len} {b}"))).py()
}

/// (id, weight) before a node and after it in time order.
type ContextSides = (Vec<(NodeId, f64)>, Vec<(NodeId, f64)>);

/// A time reference as Python passes it: (text, start, end, precision,
/// relative, span_start, span_end, anchor_precision or "").
pub(crate) type TimeRefTuple = (String, i64, i64, String, bool, u64, u64, String);

/// What a query asks about time, as `time_matches` takes it.
pub(crate) fn time_query(window: Option<(i64, i64)>, asks_when: bool) -> TimeQuery {
    match (window, asks_when) {
        (Some((lo, hi)), _) => TimeQuery::Window(lo, hi),
        (None, true) => TimeQuery::AsksWhen,
        (None, false) => TimeQuery::None,
    }
}

fn time_ref_arg(t: TimeRefTuple) -> PyResult<TimeRef> {
    let (text, start, end, precision, relative, a, b, anchor) = t;
    Ok(TimeRef {
        text,
        start,
        end,
        precision: precision_code(&precision).py()?,
        relative,
        span: (a, b),
        anchor_precision: if anchor.is_empty() {
            None
        } else {
            Some(precision_code(&anchor).py()?)
        },
    })
}

pub(crate) fn time_ref_tuple(r: &TimeRef) -> TimeRefTuple {
    let name = |p: u8| PRECISIONS[usize::from(p)].to_string();
    (
        r.text.clone(),
        r.start,
        r.end,
        name(r.precision),
        r.relative,
        r.span.0,
        r.span.1,
        r.anchor_precision.map(name).unwrap_or_default(),
    )
}

fn derived_arg(
    ids: Vec<NodeId>,
    shares: Vec<f64>,
    time_refs: Vec<Vec<TimeRefTuple>>,
) -> PyResult<Vec<DerivedFacts>> {
    same_length("ids", ids.len(), "question shares", shares.len())?;
    same_length("ids", ids.len(), "time references", time_refs.len())?;
    ids.into_iter()
        .zip(shares)
        .zip(time_refs)
        .map(|((id, question_share), refs)| {
            Ok(DerivedFacts {
                id,
                question_share,
                time_refs: refs
                    .into_iter()
                    .map(time_ref_arg)
                    .collect::<PyResult<_>>()?,
            })
        })
        .collect()
}

fn allowed_arg(a: Option<PyRef<'_, Allowed>>) -> Option<Arc<jevmem_core::Allowed>> {
    a.map(|a| a.inner.clone())
}

fn ranked_arrays<'py>(py: Python<'py>, ranked: Vec<(NodeId, f32)>) -> Ranked<'py, f32> {
    let (ids, scores): (Vec<u64>, Vec<f32>) = ranked.into_iter().unzip();
    (ids.into_pyarray(py), scores.into_pyarray(py))
}

/// The jevmem memory plane: canonical nodes in a four-view graph (semantic,
/// temporal, causal, entity) with BM25 and cosine vector indexes.
#[pyclass(frozen, module = "jevmem._core")]
pub struct MemoryStore {
    pub(crate) inner: Shared,
    /// Set while the memory is open from a directory (see `durable`).
    pub(crate) durable: RwLock<Option<Arc<DurableHandle>>>,
    /// A durable memory after `close`: reads work, writes raise.
    pub(crate) closed: std::sync::atomic::AtomicBool,
}

impl MemoryStore {
    pub(crate) fn in_memory(store: CoreStore) -> Self {
        let pending = store.pending_graph() > 0;
        let this = Self {
            inner: Arc::new(RwLock::new(store)),
            durable: RwLock::new(None),
            closed: std::sync::atomic::AtomicBool::new(false),
        };
        if pending {
            spawn_graph_builder(&this.inner);
        }
        this
    }

    /// Read the store with the GIL released, lock and work both: a writer
    /// (an fsync under group commit) or the graph builder may hold the write
    /// lock for milliseconds, and a thread waiting for it while attached
    /// would stall every Python thread, or deadlock against a reader that
    /// needs the GIL back. `f` returns owned values; Python objects are made
    /// from them after.
    pub(crate) fn read<R: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&CoreStore) -> R + Send,
    ) -> R {
        let inner = &self.inner;
        py.detach(|| f(&inner.read()))
    }

    fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Run one mutation under the write lock with the GIL released. On a
    /// durable memory outside an explicit write (`_begin_write`), the ops it
    /// applied become one log record, acknowledged per the sync mode.
    fn mutate<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut CoreStore) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        if self.is_closed() {
            return Err(Error::Durability("the memory is closed".into())).py();
        }
        let handle = self.durable.read().clone();
        let inner = &self.inner;
        py.detach(|| match handle {
            None => f(&mut inner.write()),
            Some(h) => h.mutate(inner, f),
        })
        .py()
    }
}

#[pymethods]
impl MemoryStore {
    #[new]
    #[pyo3(signature = (
        dim, *, quantization = "f32", exact_threshold = None, connectivity = None,
        expansion_add = None, expansion_search = None, bm25_k1 = None, bm25_b = None,
        stem = true, stopwords = true, candidate_k = None, candidate_pool = None,
        max_text_bytes = None, lexical_fields = None
    ))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        dim: &Bound<'_, PyAny>,
        quantization: &str,
        exact_threshold: Option<&Bound<'_, PyAny>>,
        connectivity: Option<&Bound<'_, PyAny>>,
        expansion_add: Option<&Bound<'_, PyAny>>,
        expansion_search: Option<&Bound<'_, PyAny>>,
        bm25_k1: Option<&Bound<'_, PyAny>>,
        bm25_b: Option<&Bound<'_, PyAny>>,
        stem: bool,
        stopwords: bool,
        candidate_k: Option<&Bound<'_, PyAny>>,
        candidate_pool: Option<&Bound<'_, PyAny>>,
        max_text_bytes: Option<&Bound<'_, PyAny>>,
        lexical_fields: Option<Vec<String>>,
    ) -> PyResult<Self> {
        // each number read as its setting (a bool, a float for a count, a
        // negative or too large int: InvalidConfigError naming it)
        let dim: usize = setting_arg(Some(dim), "dim")?
            .ok_or_else(|| to_py(Error::InvalidConfig("dim must be an int, not None".into())))?;
        let mut config = StoreConfig::new(dim);
        config.vector.quantization = parse_quantization(quantization).py()?;
        if let Some(t) = setting_arg(exact_threshold, "exact_threshold")? {
            config.vector.exact_threshold = t;
        }
        if let Some(v) = setting_arg(connectivity, "connectivity")? {
            config.vector.connectivity = v;
        }
        if let Some(v) = setting_arg(expansion_add, "expansion_add")? {
            config.vector.expansion_add = v;
        }
        config.vector.expansion_search =
            search_expansion(setting_arg(expansion_search, "expansion_search")?);
        if let Some(v) = setting_arg(bm25_k1, "bm25_k1")? {
            config.bm25.k1 = v;
        }
        if let Some(v) = setting_arg(bm25_b, "bm25_b")? {
            config.bm25.b = v;
        }
        config.tokenizer.stem = stem;
        config.tokenizer.stopwords = stopwords;
        if let Some(v) = setting_arg(candidate_k, "candidate_k")? {
            config.candidates.k = v;
        }
        if let Some(v) = setting_arg(candidate_pool, "candidate_pool")? {
            config.candidates.pool = v;
        }
        if let Some(v) = setting_arg(max_text_bytes, "max_text_bytes")? {
            config.max_content_bytes = v;
        }
        if let Some(fields) = lexical_fields {
            config.lexical_fields = fields;
        }
        Ok(Self::in_memory(CoreStore::new(config).py()?))
    }

    /// Embedding dimension.
    #[getter]
    fn dim(&self, py: Python<'_>) -> usize {
        self.read(py, |s| s.dim())
    }

    /// Texts longer than this many UTF-8 bytes are refused.
    #[getter]
    fn max_text_bytes(&self, py: Python<'_>) -> usize {
        self.read(py, |s| s.config().max_content_bytes)
    }

    /// The id the next added node will get (ids are the insertion sequence).
    #[getter]
    fn next_id(&self, py: Python<'_>) -> NodeId {
        self.read(py, |s| s.next_id())
    }

    /// How many nodes were ever removed (ids are never reused: `next_id`
    /// minus the live count), read under one lock: `next_id` and `len` read
    /// apart can straddle a concurrent add.
    #[getter]
    fn removed_count(&self, py: Python<'_>) -> u64 {
        self.read(py, |s| s.next_id() - s.len() as u64)
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.read(py, |s| s.len())
    }

    /// Whether `id` names a stored node (False for anything that is not an id).
    fn __contains__(&self, py: Python<'_>, id: &Bound<'_, PyAny>) -> bool {
        match node_id_arg(id) {
            Ok(id) => self.read(py, |s| s.get(id).is_some()),
            Err(_) => false,
        }
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        self.read(py, |s| {
            format!(
                "MemoryStore(dim={}, nodes={}, edges={})",
                s.dim(),
                s.len(),
                s.graph().total_edges()
            )
        })
    }

    /// Add one observation; returns its id. With an idempotency `key` that
    /// a stored node already carries, nothing is written and that node's id
    /// comes back.
    #[pyo3(signature = (text, embedding, *, timestamp = None, provenance = None, entities = None, types = None, passages = None, scope = None, metadata = None, key = None))]
    fn add(
        &self,
        py: Python<'_>,
        text: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = embedding_arg)] embedding: PyArrayLike1<'_, f32, AllowTypeChange>,
        timestamp: Option<&Bound<'_, PyAny>>,
        provenance: Option<&Bound<'_, PyAny>>,
        entities: Option<&Bound<'_, PyAny>>,
        types: Option<&Bound<'_, PyAny>>,
        passages: Option<&Bound<'_, PyAny>>,
        scope: Option<Bound<'_, PyAny>>,
        metadata: Option<Bound<'_, PyAny>>,
        key: Option<Bound<'_, PyAny>>,
    ) -> PyResult<NodeId> {
        let node = NewNode {
            content: extract_arg(text, "text")?,
            timestamp: timestamp
                .map(|t| timestamp_arg(t, "timestamp"))
                .transpose()?
                .flatten(),
            provenance: provenance_arg(
                provenance
                    .map(|p| extract_arg::<Option<HashMap<String, String>>>(p, "provenance"))
                    .transpose()?
                    .flatten(),
            ),
            entities: entities
                .map(|e| extract_arg::<Option<Vec<String>>>(e, "entities"))
                .transpose()?
                .flatten()
                .unwrap_or_default(),
            types: types_arg(
                types
                    .map(|t| extract_arg::<Option<TypeTuple>>(t, "types"))
                    .transpose()?
                    .flatten(),
            ),
            embedding: vector_arg(&embedding),
            passages: passages_arg(
                passages
                    .map(|p| extract_arg::<Option<PassagesArg<'_>>>(p, "passages"))
                    .transpose()?
                    .flatten(),
            )
            .py()?,
            scope: scope_arg("scope", scope.as_ref())?,
            metadata: metadata_arg("metadata", metadata.as_ref())?,
            key: key_arg("key", key.as_ref())?,
        };
        self.mutate(py, |s| s.add_node(node))
    }

    /// Add many observations, all or nothing; returns their ids in order.
    /// A repeated idempotency key (stored, or earlier in the batch) stores
    /// nothing and gives the id of the node holding it.
    #[pyo3(signature = (texts, embeddings, *, timestamps = None, provenances = None, entities = None, types = None, passages = None, scopes = None, metadatas = None, keys = None))]
    fn add_batch(
        &self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = embeddings_arg)] embeddings: PyArrayLike2<'_, f32, AllowTypeChange>,
        timestamps: Option<&Bound<'_, PyAny>>,
        provenances: Option<&Bound<'_, PyAny>>,
        entities: Option<&Bound<'_, PyAny>>,
        types: Option<&Bound<'_, PyAny>>,
        passages: Option<&Bound<'_, PyAny>>,
        scopes: Option<Vec<Bound<'_, PyAny>>>,
        metadatas: Option<Vec<Bound<'_, PyAny>>>,
        keys: Option<Vec<Bound<'_, PyAny>>>,
    ) -> PyResult<Vec<NodeId>> {
        let nodes = batch_nodes(
            texts,
            embeddings,
            timestamps,
            provenances,
            entities,
            types,
            passages,
            Attrs {
                scopes,
                metadatas,
                keys,
            },
        )?;
        self.mutate(py, |s| s.add_nodes(nodes))
    }

    /// Validate a batch exactly as `add_batch` would, without writing anything.
    #[pyo3(signature = (texts, embeddings, *, timestamps = None, provenances = None, entities = None, types = None, passages = None, scopes = None, metadatas = None, keys = None))]
    fn check_batch(
        &self,
        py: Python<'_>,
        texts: &Bound<'_, PyAny>,
        #[pyo3(from_py_with = embeddings_arg)] embeddings: PyArrayLike2<'_, f32, AllowTypeChange>,
        timestamps: Option<&Bound<'_, PyAny>>,
        provenances: Option<&Bound<'_, PyAny>>,
        entities: Option<&Bound<'_, PyAny>>,
        types: Option<&Bound<'_, PyAny>>,
        passages: Option<&Bound<'_, PyAny>>,
        scopes: Option<Vec<Bound<'_, PyAny>>>,
        metadatas: Option<Vec<Bound<'_, PyAny>>>,
        keys: Option<Vec<Bound<'_, PyAny>>>,
    ) -> PyResult<()> {
        let nodes = batch_nodes(
            texts,
            embeddings,
            timestamps,
            provenances,
            entities,
            types,
            passages,
            Attrs {
                scopes,
                metadatas,
                keys,
            },
        )?;
        self.read(py, |s| s.validate_new_nodes(&nodes)).py()
    }

    /// Add a batch as the write path links it (`MemoryStore::add_linked` in
    /// the core): each node in turn is added, given its derived facts
    /// (`question_shares`, `time_refs`, with `derived_version`), linked by
    /// rule in time and by shared entities, and its write candidates found;
    /// a `focus` node's `focus_k` candidates too. Returns the ids and the
    /// candidates and neighbourhoods as columns (`writing.pair_columns`).
    /// All rows and facts are checked before anything is written.
    #[pyo3(signature = (texts, embeddings, *, timestamps = None, provenances = None, entities = None, types = None, passages = None, scopes = None, metadatas = None, keys = None, derived_version, question_shares, time_refs, focus, focus_k))]
    fn add_linked<'py>(
        &self,
        py: Python<'py>,
        texts: &Bound<'py, PyAny>,
        embeddings: PyArrayLike2<'py, f32, AllowTypeChange>,
        timestamps: Option<&Bound<'py, PyAny>>,
        provenances: Option<&Bound<'py, PyAny>>,
        entities: Option<&Bound<'py, PyAny>>,
        types: Option<&Bound<'py, PyAny>>,
        passages: Option<&Bound<'py, PyAny>>,
        scopes: Option<Vec<Bound<'py, PyAny>>>,
        metadatas: Option<Vec<Bound<'py, PyAny>>>,
        keys: Option<Vec<Bound<'py, PyAny>>>,
        derived_version: u32,
        question_shares: Vec<f64>,
        time_refs: Vec<Vec<TimeRefTuple>>,
        focus: Vec<bool>,
        focus_k: usize,
    ) -> PyResult<crate::writing::LinkedTuple<'py>> {
        let nodes = batch_nodes(
            texts,
            embeddings,
            timestamps,
            provenances,
            entities,
            types,
            passages,
            Attrs {
                scopes,
                metadatas,
                keys,
            },
        )?;
        let placeholder = vec![0; question_shares.len()];
        let plan = LinkPlan {
            derived_version,
            derived: derived_arg(placeholder, question_shares, time_refs)?,
            focus,
            focus_k,
        };
        let linked = self.mutate(py, |s| s.add_linked(nodes, plan))?;
        crate::writing::linked_to_python(py, linked)
    }

    /// Validate `add_batch`'s scope, metadata and key columns for `n`
    /// observations without writing anything (errors name the observation).
    #[pyo3(signature = (n, *, scopes = None, metadatas = None, keys = None))]
    fn check_attributes(
        &self,
        n: usize,
        scopes: Option<Vec<Bound<'_, PyAny>>>,
        metadatas: Option<Vec<Bound<'_, PyAny>>>,
        keys: Option<Vec<Bound<'_, PyAny>>>,
    ) -> PyResult<()> {
        let attrs = parse_attrs(
            n,
            Attrs {
                scopes,
                metadatas,
                keys,
            },
        )?;
        for (i, (scope, metadata, key)) in attrs.into_iter().enumerate() {
            let at = |e: Error| match e {
                Error::InvalidInput(m) => Error::InvalidInput(format!("observation {i}: {m}")),
                other => other,
            };
            normalize_scope(scope).map_err(at).py()?;
            normalize_metadata(metadata).map_err(at).py()?;
            if let Some(k) = key {
                check_idempotency_key(&k).map_err(at).py()?;
            }
        }
        Ok(())
    }

    /// Insert an edge, or raise the weight of an existing (src, dst, view) edge.
    /// Returns "inserted", "strengthened" or "unchanged".
    #[pyo3(signature = (src, dst, view, weight, *, origin = "controller", temporal_label = None))]
    fn add_edge(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] src: NodeId,
        #[pyo3(from_py_with = node_id_arg)] dst: NodeId,
        view: &str,
        weight: f32,
        origin: &str,
        temporal_label: Option<&str>,
    ) -> PyResult<&'static str> {
        let edge = make_edge(src, dst, view, weight, origin, temporal_label).py()?;
        let outcome = self.mutate(py, |s| s.upsert_edge(edge))?;
        Ok(upsert_name(outcome))
    }

    /// Upsert many edges `(src, dst, view, weight[, origin[, temporal_label]])`, all or nothing.
    fn add_edges(
        &self,
        py: Python<'_>,
        edges: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Vec<&'static str>> {
        let mut parsed = Vec::with_capacity(edges.len());
        for (i, item) in edges.iter().enumerate() {
            let (src, dst, view, weight, origin, label): (
                NodeId,
                NodeId,
                String,
                f32,
                Option<String>,
                Option<String>,
            ) = if let Ok((s, d, v, w)) = item.extract::<(NodeId, NodeId, String, f32)>() {
                (s, d, v, w, None, None)
            } else if let Ok((s, d, v, w, o)) =
                item.extract::<(NodeId, NodeId, String, f32, String)>()
            {
                (s, d, v, w, Some(o), None)
            } else {
                item.extract::<(NodeId, NodeId, String, f32, Option<String>, Option<String>)>()
                        .map_err(|_| Error::InvalidInput(format!(
                            "edge {i}: expected (src, dst, view, weight[, origin[, temporal_label]])"
                        )))
                        .py()?
            };
            parsed.push(
                make_edge(
                    src,
                    dst,
                    &view,
                    weight,
                    origin.as_deref().unwrap_or("controller"),
                    label.as_deref(),
                )
                .map_err(|e| Error::InvalidInput(format!("edge {i}: {e}")))
                .py()?,
            );
        }
        let outcomes = self.mutate(py, |s| s.upsert_edges(parsed))?;
        Ok(outcomes.into_iter().map(upsert_name).collect())
    }

    /// Replace a node's type scores (episodic, semantic, procedural, preference).
    fn set_types(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
        types: (f32, f32, f32, f32),
    ) -> PyResult<()> {
        self.mutate(py, |s| s.set_types(id, types_arg(Some(types))))
    }

    /// Delete a node, its edges and its index entries.
    fn remove(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
    ) -> PyResult<()> {
        self.mutate(py, |s| s.remove_node(id))
    }

    /// Delete many nodes, all or nothing on an unknown or repeated id,
    /// bridging the supersedes chains that ran through them; returns the
    /// bridging links between survivors.
    fn forget(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_ids_arg)] ids: Vec<NodeId>,
    ) -> PyResult<Vec<Supersedes>> {
        // through `mutate`, so on a durable store the forget is one log record
        let bridges = self.mutate(py, |s| s.forget_nodes(&ids))?;
        Ok(bridges.iter().map(Supersedes::from).collect())
    }

    /// Record that `new` supersedes `old` (and the temporal edge `new -after-> old`).
    /// Returns "inserted", "strengthened" or "unchanged".
    #[pyo3(signature = (new, old, weight, *, origin = "controller"))]
    fn add_supersedes(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] new: NodeId,
        #[pyo3(from_py_with = node_id_arg)] old: NodeId,
        weight: f32,
        origin: &str,
    ) -> PyResult<&'static str> {
        let link = CoreSupersedes {
            new,
            old,
            weight,
            origin: EdgeOrigin::parse(origin).py()?,
        };
        Ok(upsert_name(self.mutate(py, |s| s.add_supersedes(link))?))
    }

    /// Add many links `(new, old, weight[, origin])`, all or nothing.
    fn add_supersedes_batch(
        &self,
        py: Python<'_>,
        links: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Vec<&'static str>> {
        let mut parsed = Vec::with_capacity(links.len());
        for (i, item) in links.iter().enumerate() {
            let (new, old, weight, origin): (NodeId, NodeId, f32, Option<String>) =
                if let Ok((n, o, w)) = item.extract::<(NodeId, NodeId, f32)>() {
                    (n, o, w, None)
                } else {
                    item.extract::<(NodeId, NodeId, f32, Option<String>)>()
                        .map_err(|_| {
                            Error::InvalidInput(format!(
                                "link {i}: expected (new, old, weight[, origin])"
                            ))
                        })
                        .py()?
                };
            let origin = EdgeOrigin::parse(origin.as_deref().unwrap_or("controller"))
                .map_err(|e| Error::InvalidInput(format!("link {i}: {e}")))
                .py()?;
            parsed.push(CoreSupersedes {
                new,
                old,
                weight,
                origin,
            });
        }
        let outcomes = self.mutate(py, |s| s.add_supersedes_many(parsed))?;
        Ok(outcomes.into_iter().map(upsert_name).collect())
    }

    /// Set the time a node's fact became true (its event time) when it is not
    /// the observation time; `None` goes back to the observation time.
    #[pyo3(signature = (id, valid_from))]
    fn set_valid_from(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
        valid_from: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let valid_from = timestamp_arg(valid_from, "valid_from")?;
        self.mutate(py, |s| s.set_valid_from(id, valid_from))
    }

    /// Every supersedes link, sorted by (new, old).
    fn supersedes_links(&self, py: Python<'_>) -> Vec<Supersedes> {
        self.read(py, |s| {
            s.facts().links().iter().map(Supersedes::from).collect()
        })
    }

    /// How many supersedes links the memory holds.
    #[getter]
    fn supersedes_count(&self, py: Python<'_>) -> usize {
        self.read(py, |s| s.facts().len())
    }

    /// The nodes `id` supersedes directly, ascending.
    fn supersedes(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
    ) -> PyResult<Vec<NodeId>> {
        self.read(py, |s| s.require(id).map(|_| s.facts().supersedes(id)))
            .py()
    }

    /// The nodes superseding `id` directly, ascending.
    fn superseded_by(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
    ) -> PyResult<Vec<NodeId>> {
        self.read(py, |s| s.require(id).map(|_| s.facts().superseded_by(id)))
            .py()
    }

    /// `(valid_from, valid_to)` on the world timeline; `valid_to` is None while current.
    fn validity(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
    ) -> PyResult<(Option<i64>, Option<i64>)> {
        self.read(py, |s| s.validity(id)).py()
    }

    /// `id`, then every fact it superseded, transitively, nearest first.
    fn history(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
    ) -> PyResult<Vec<NodeId>> {
        self.read(py, |s| s.history(id)).py()
    }

    /// For each id, `(valid_from, valid_to, supersedes, superseded_by)` (the
    /// linked nodes as (id, weight)) when the node takes part in a supersedes
    /// link, else None (also for unknown ids): what the read path needs about
    /// a pool, under one lock. With `allowed`, as a scoped search sees it:
    /// links to nodes outside are dropped, and the end of validity comes from
    /// the replacements it sees.
    #[pyo3(signature = (ids, *, allowed = None))]
    fn fact_chains(
        &self,
        py: Python<'_>,
        ids: Vec<NodeId>,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> Vec<Option<FactChain>> {
        let allowed = allowed_arg(allowed);
        self.read(py, |s| {
            s.fact_chains_scoped(&ids, allowed.as_deref())
                .into_iter()
                .map(|c| c.map(|c| (c.valid_from, c.valid_to, c.supersedes, c.superseded_by)))
                .collect()
        })
    }

    /// The node with this id (raises NodeNotFoundError).
    fn get(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
    ) -> PyResult<Node> {
        self.read(py, |s| s.require(id).map(Node::from)).py()
    }

    /// The node's unit-normalised embedding.
    fn embedding<'py>(
        &self,
        py: Python<'py>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let v = self.read(py, |s| {
            s.require(id).map(|_| {
                s.embedding(id)
                    .expect("live node has an embedding")
                    .to_vec()
            })
        });
        Ok(v.py()?.into_pyarray(py))
    }

    /// The mean of the nodes' unit embeddings (as numpy's `mean(axis=0)` of
    /// their `embedding` rows, in f32).
    fn mean_embedding<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let v = self.read(py, |s| s.mean_embedding(&ids)).py()?;
        Ok(v.into_pyarray(py))
    }

    /// The `[start, end)` character spans of a node's passage vectors, in
    /// order; empty when its text is one passage (the node vector).
    fn passages(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
    ) -> PyResult<Vec<(u64, u64)>> {
        self.read(py, |s| s.passage_spans(id).map(|p| p.to_vec()))
            .py()
    }

    /// The unit-normalised embedding of passage `index` of node `id`.
    fn passage_embedding<'py>(
        &self,
        py: Python<'py>,
        id: NodeId,
        index: u32,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let v = self.read(py, |s| {
            let spans = s.passage_spans(id)?.len();
            s.passage_index()
                .embedding(id, index)
                .map(|v| v.to_vec())
                .ok_or_else(|| {
                    Error::InvalidInput(format!(
                        "node {id} has {spans} passage vectors, no passage {index}"
                    ))
                })
        });
        Ok(v.py()?.into_pyarray(py))
    }

    /// The best `k` nodes by their best passage: (ids, passage indexes,
    /// similarities), best first. A node without passage vectors counts as
    /// one passage, its node vector (index 0); `long_only` leaves those out
    /// (only nodes with passage vectors are ranked).
    #[pyo3(signature = (query, k = 10, *, long_only = false, allowed = None))]
    fn search_passages<'py>(
        &self,
        py: Python<'py>,
        query: PyArrayLike1<'py, f32, AllowTypeChange>,
        k: usize,
        long_only: bool,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> PyResult<PassageRanked<'py>> {
        let q = vector_arg(&query);
        let allowed = allowed_arg(allowed);
        let hits = self
            .read(py, |s| {
                if long_only {
                    s.passage_index().search_scoped(&q, k, allowed.as_deref())
                } else {
                    s.search_passages_scoped(&q, k, allowed.as_deref())
                }
            })
            .py()?;
        let ids: Vec<u64> = hits.iter().map(|h| h.node).collect();
        let idx: Vec<u32> = hits.iter().map(|h| h.passage).collect();
        let sims: Vec<f32> = hits.iter().map(|h| h.similarity).collect();
        Ok((
            ids.into_pyarray(py),
            idx.into_pyarray(py),
            sims.into_pyarray(py),
        ))
    }

    /// Each node's best passage similarity and its index (a node without
    /// passage vectors: its node vector, index 0; NaN and 0 for unknown ids).
    fn passage_similarities<'py>(
        &self,
        py: Python<'py>,
        query: PyArrayLike1<'py, f32, AllowTypeChange>,
        ids: Vec<NodeId>,
    ) -> PyResult<BestPassages<'py>> {
        let q = vector_arg(&query);
        let best = self.read(py, |s| s.passage_similarities(&q, &ids)).py()?;
        let sims: Vec<f32> = best
            .iter()
            .map(|b| b.map_or(f32::NAN, |(s, _)| s))
            .collect();
        let idx: Vec<u32> = best.iter().map(|b| b.map_or(0, |(_, i)| i)).collect();
        Ok((sims.into_pyarray(py), idx.into_pyarray(py)))
    }

    /// Every edge touching `id`, optionally restricted to one view.
    #[pyo3(signature = (id, view = None))]
    fn neighbors(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
        view: Option<&str>,
    ) -> PyResult<Vec<Edge>> {
        let view = view.map(View::parse).transpose().py()?;
        self.read(py, |s| {
            s.neighbors(id, view)
                .map(|es| es.iter().map(Edge::from).collect())
        })
        .py()
    }

    /// The tokens the lexical index sees for `text`.
    fn tokenize(&self, py: Python<'_>, text: &str) -> Vec<String> {
        self.read(py, |s| s.tokenize(text))
    }

    /// How many indexed nodes contain each of the query's tokens, with the
    /// tokens (as `tokenize` gives them) and the number of indexed nodes
    /// (both counted among the `allowed` nodes when given).
    #[pyo3(signature = (query, *, allowed = None))]
    fn document_frequencies(
        &self,
        py: Python<'_>,
        query: String,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> (Vec<String>, Vec<u64>, u64) {
        let allowed = allowed_arg(allowed);
        self.read(py, |s| {
            let tokens = s.tokenize(&query);
            let mut n = s.bm25().len() as u64;
            let freqs = tokens
                .iter()
                .map(|t| {
                    let (df, docs) = s.bm25().doc_freq_scoped(t, allowed.as_deref());
                    n = docs as u64;
                    df as u64
                })
                .collect();
            if tokens.is_empty() {
                n = s.bm25().doc_freq_scoped("", allowed.as_deref()).1 as u64;
            }
            (tokens, freqs, n)
        })
    }

    /// BM25 ranking of the query's terms (`MemoryStore::query_tokens`: no
    /// "now", "nowadays", "anymore" unless nothing else is left): (ids,
    /// scores) arrays, best first. With `allowed`, among those nodes only,
    /// scored with their statistics alone.
    #[pyo3(signature = (query, k = 10, *, allowed = None))]
    fn search_lexical<'py>(
        &self,
        py: Python<'py>,
        query: String,
        k: usize,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> Ranked<'py, f32> {
        let allowed = allowed_arg(allowed);
        let ranked = self.read(py, |s| {
            s.search_lexical_scoped(&query, k, allowed.as_deref())
        });
        ranked_arrays(py, ranked)
    }

    /// The related terms a query's rare words add to the lexical match of a
    /// search (`jevmem_core::related`, the default settings), and each
    /// query word's other spelling the memory holds (`jevmem_core::spelling`,
    /// weight 1): (term, weight) pairs in term order; a query term weighs 1.
    #[pyo3(signature = (query, *, allowed = None))]
    fn related_terms(
        &self,
        py: Python<'_>,
        query: String,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> Vec<(String, f64)> {
        let allowed = allowed_arg(allowed);
        self.read(py, |s| {
            let terms = s.query_tokens(&query);
            s.related_terms(
                &query,
                &terms,
                allowed.as_deref(),
                &jevmem_core::related::ExpandConfig::default(),
            )
        })
    }

    /// Cosine ranking of a query embedding: (ids, similarities) arrays, best first.
    #[pyo3(signature = (query, k = 10, *, allowed = None))]
    fn search_vector<'py>(
        &self,
        py: Python<'py>,
        query: PyArrayLike1<'py, f32, AllowTypeChange>,
        k: usize,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> PyResult<Ranked<'py, f32>> {
        let q = vector_arg(&query);
        let allowed = allowed_arg(allowed);
        let ranked = self
            .read(py, |s| s.search_vector_scoped(&q, k, allowed.as_deref()))
            .py()?;
        Ok(ranked_arrays(py, ranked))
    }

    /// BM25 scores of the given nodes for a query (0 for unknown ids, and
    /// with `allowed`, for the others; scored with the allowed nodes' statistics).
    #[pyo3(signature = (query, ids, *, allowed = None))]
    fn lexical_scores<'py>(
        &self,
        py: Python<'py>,
        query: String,
        ids: Vec<NodeId>,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> Bound<'py, PyArray1<f32>> {
        let allowed = allowed_arg(allowed);
        let scores = self.read(py, |s| {
            s.lexical_scores_scoped(&query, &ids, allowed.as_deref())
        });
        scores.into_pyarray(py)
    }

    /// The nodes a scope and filter select, for the scoped reads: pass it as
    /// `allowed` to the searches and `traverse`. None when they select every
    /// node (no scope pair, no filter): the reads then need no check at all.
    /// Bad scope or filter input raises InvalidInputError.
    #[pyo3(signature = (scope = None, filter = None))]
    fn select(
        &self,
        py: Python<'_>,
        scope: Option<Bound<'_, PyAny>>,
        filter: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Option<Allowed>> {
        let selection = selection_arg(scope.as_ref(), filter.as_ref())?;
        let allowed = self.read(py, |s| s.select(&selection));
        Ok(allowed.map(Allowed::new))
    }

    /// Every node id a scope and filter select, ascending.
    #[pyo3(signature = (scope = None, filter = None))]
    fn matching_ids(
        &self,
        py: Python<'_>,
        scope: Option<Bound<'_, PyAny>>,
        filter: Option<Bound<'_, PyAny>>,
    ) -> PyResult<Vec<NodeId>> {
        let selection = selection_arg(scope.as_ref(), filter.as_ref())?;
        Ok(self.read(py, |s| s.matching_ids(&selection)))
    }

    /// Up to `limit` ids a scope and filter select, ascending, after `after`.
    #[pyo3(signature = (scope = None, filter = None, *, limit = 100, after = None))]
    fn list_ids(
        &self,
        py: Python<'_>,
        scope: Option<Bound<'_, PyAny>>,
        filter: Option<Bound<'_, PyAny>>,
        limit: usize,
        after: Option<NodeId>,
    ) -> PyResult<Vec<NodeId>> {
        let selection = selection_arg(scope.as_ref(), filter.as_ref())?;
        Ok(self.read(py, |s| s.list(&selection, after, limit)))
    }

    /// For each (scope, idempotency key), the id of the stored node written
    /// with that key in that scope (or None). Keys live in their scope.
    fn ids_for_keys(
        &self,
        py: Python<'_>,
        keys: Vec<(Option<Bound<'_, PyAny>>, String)>,
    ) -> PyResult<Vec<Option<NodeId>>> {
        let mut parsed = Vec::with_capacity(keys.len());
        for (i, (scope, key)) in keys.iter().enumerate() {
            parsed.push((scope_arg(&format!("key {i}: scope"), scope.as_ref())?, key));
        }
        Ok(self.read(py, |s| {
            parsed
                .iter()
                .map(|(scope, k)| s.id_for_key(scope, k))
                .collect()
        }))
    }

    /// For each entity, whether some node (of the `allowed` ones) carries it.
    #[pyo3(signature = (entities, *, allowed = None))]
    fn entities_known(
        &self,
        py: Python<'_>,
        entities: Vec<String>,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> Vec<bool> {
        let allowed = allowed_arg(allowed);
        self.read(py, |s| {
            entities
                .iter()
                .map(|e| {
                    let carriers = s.nodes_with_entity(e);
                    match &allowed {
                        None => !carriers.is_empty(),
                        Some(a) => carriers.iter().any(|&id| a.contains(id)),
                    }
                })
                .collect()
        })
    }

    /// The distinct values of a provenance field among the `allowed` nodes, sorted.
    #[pyo3(signature = (field, *, allowed))]
    fn provenance_values(
        &self,
        py: Python<'_>,
        field: String,
        allowed: PyRef<'_, Allowed>,
    ) -> Vec<String> {
        let allowed = allowed.inner.clone();
        self.read(py, |s| {
            // borrowed while collecting: a large scope repeats few speakers
            let distinct: std::collections::BTreeSet<&str> = allowed
                .ids()
                .iter()
                .filter_map(|&id| s.get(id))
                .flat_map(|n| {
                    n.provenance
                        .iter()
                        .filter(|(k, _)| *k == field)
                        .map(|(_, v)| v.as_str())
                })
                .collect();
            distinct.into_iter().map(str::to_owned).collect()
        })
    }

    /// Set what was derived from the nodes' texts, with derivation
    /// `version`: each node's question share (in [0, 1]; the style
    /// statistics and the reply link of the time-order context read them) and
    /// its grounded time references as `(text, start, end, precision,
    /// relative, span_start, span_end, anchor_precision)` ("" for no anchor).
    /// All or nothing. Logged on a durable memory; `logged=False` keeps
    /// facts a load derived again without a log record (the next snapshot or
    /// checkpoint keeps them; allowed on a closed memory).
    #[pyo3(signature = (version, ids, shares, time_refs, *, logged = true))]
    fn set_derived(
        &self,
        py: Python<'_>,
        version: u32,
        ids: Vec<NodeId>,
        shares: Vec<f64>,
        time_refs: Vec<Vec<TimeRefTuple>>,
        logged: bool,
    ) -> PyResult<()> {
        let facts = derived_arg(ids, shares, time_refs)?;
        if logged {
            return self.mutate(py, |s| s.set_derived(version, facts));
        }
        let inner = &self.inner;
        py.detach(|| inner.write().restore_derived(version, facts))
            .py()
    }

    /// The derivation version of the facts the store holds (0: none given yet).
    #[getter]
    fn derived_version(&self, py: Python<'_>) -> u32 {
        self.read(py, |s| s.derived_version())
    }

    /// Whether each node has derived facts.
    fn derived_covered(&self, py: Python<'_>, ids: Vec<NodeId>) -> Vec<bool> {
        self.read(py, |s| s.derived_covered(&ids))
    }

    /// Each node's question share (0 without one).
    fn question_shares<'py>(&self, py: Python<'py>, ids: Vec<NodeId>) -> Bound<'py, PyArray1<f64>> {
        self.read(py, |s| s.question_shares_of(&ids))
            .into_pyarray(py)
    }

    /// A node's grounded time references (see `set_derived`), in the order given.
    fn time_refs(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
    ) -> Vec<TimeRefTuple> {
        self.read(py, |s| s.time_refs(id).iter().map(time_ref_tuple).collect())
    }

    /// How well each node's time fits what a query asks: with `window`
    /// (lo, hi), 1 when the node was observed in it or refers to a time in
    /// it, decaying as exp(-gap / max(3 days, hi - lo)); without one, 0.3 for
    /// a node that states a time when `asks_when`, else 0.
    #[pyo3(signature = (ids, window = None, asks_when = false))]
    fn time_matches<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
        window: Option<(i64, i64)>,
        asks_when: bool,
    ) -> Bound<'py, PyArray1<f64>> {
        let query = time_query(window, asks_when);
        self.read(py, |s| s.time_matches(&ids, query))
            .into_pyarray(py)
    }

    /// The observations one and two steps before and after a node in time
    /// order, within its episode, as (id, weight) in the order -1, +1, -2,
    /// +2: weight 1, `second_step_decay` two steps away, and for the turn
    /// right before `1 + reply_link * its question share` when another
    /// speaker said it. With `allowed`, the time order of those nodes alone.
    /// A node without a timestamp: the nodes without one, in the order they
    /// were written.
    #[pyo3(signature = (id, *, allowed = None, second_step_decay = 0.7, reply_link = 1.0))]
    fn temporal_context(
        &self,
        py: Python<'_>,
        #[pyo3(from_py_with = node_id_arg)] id: NodeId,
        allowed: Option<PyRef<'_, Allowed>>,
        second_step_decay: f64,
        reply_link: f64,
    ) -> Vec<(NodeId, f64)> {
        let allowed = allowed_arg(allowed);
        let cfg = ContextConfig {
            second_step_decay,
            reply_link,
        };
        self.read(py, |s| {
            context::temporal_context(s, id, allowed.as_deref(), &cfg)
        })
    }

    /// The nodes observed in `[lo, hi)` (half-open), in time order (ties by
    /// id), as an array; the allowed ones only, when given.
    #[pyo3(signature = (lo, hi, *, allowed = None))]
    fn timeline_window<'py>(
        &self,
        py: Python<'py>,
        lo: i64,
        hi: i64,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> Bound<'py, PyArray1<u64>> {
        let allowed = allowed_arg(allowed);
        self.read(py, |s| s.timeline_window(lo, hi, allowed.as_deref()))
            .into_pyarray(py)
    }

    /// ((id, timestamp) right before, (id, timestamp) right after) a node in
    /// time order among the nodes it sees (whose scope holds its own); None
    /// for a node without a timestamp.
    #[allow(clippy::type_complexity)]
    fn time_neighbours_seen(
        &self,
        py: Python<'_>,
        id: NodeId,
    ) -> PyResult<Option<(Option<(NodeId, i64)>, Option<(NodeId, i64)>)>> {
        self.read(py, |s| s.require(id).map(|_| s.time_neighbours_seen(id)))
            .py()
    }

    /// The same context split by side: ((id, weight) before, (id, weight)
    /// after), plain weights (no reply link).
    #[pyo3(signature = (id, *, allowed = None, second_step_decay = 0.7))]
    fn context_sides(
        &self,
        py: Python<'_>,
        id: NodeId,
        allowed: Option<PyRef<'_, Allowed>>,
        second_step_decay: f64,
    ) -> ContextSides {
        let allowed = allowed_arg(allowed);
        let cfg = ContextConfig {
            second_step_decay,
            ..ContextConfig::default()
        };
        self.read(py, |s| {
            let near = context::neighbours(s, id, allowed.as_deref(), &cfg);
            let side = |before: bool| {
                near.iter()
                    .filter(|n| (n.offset < 0) == before)
                    .map(|n| (n.node, n.weight))
                    .collect()
            };
            (side(true), side(false))
        })
    }

    /// What each node's time-order context says about a query, as an (n, 3)
    /// array: support (the best weight x match over `temporal_context`, at
    /// most 1), the best match before it and the best after it (plain
    /// weights). `topical_ids` / `topical_values`: the query's matches so
    /// far (0 for a node without one). `own`: the nodes' own matches, entered
    /// one by one in order before each is measured; the matches are then
    /// returned too, as they stand after the last node.
    #[pyo3(signature = (
        ids, topical_ids, topical_values, own = None, *, allowed = None,
        second_step_decay = 0.7, reply_link = 1.0
    ))]
    #[allow(clippy::too_many_arguments)]
    fn context_matches<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
        topical_ids: Vec<NodeId>,
        topical_values: Vec<f64>,
        own: Option<Vec<f64>>,
        allowed: Option<PyRef<'_, Allowed>>,
        second_step_decay: f64,
        reply_link: f64,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        same_length(
            "topical ids",
            topical_ids.len(),
            "values",
            topical_values.len(),
        )?;
        if let Some(own) = &own {
            same_length("ids", ids.len(), "own matches", own.len())?;
        }
        let allowed = allowed_arg(allowed);
        let cfg = ContextConfig {
            second_step_decay,
            reply_link,
        };
        let rows = self.read(py, |s| {
            let mut topical: ShortKeyMap<NodeId, f64> =
                topical_ids.into_iter().zip(topical_values).collect();
            context::context_matches(
                s,
                &ids,
                &mut topical,
                own.as_deref(),
                allowed.as_deref(),
                &cfg,
            )
        });
        let flat: Vec<f64> = rows.iter().flatten().copied().collect();
        Ok(
            numpy::ndarray::Array2::from_shape_vec((rows.len(), 3), flat)
                .expect("three per row")
                .into_pyarray(py),
        )
    }

    /// Each node's form relative to the memory, as an (n, 3) array in [0, 1]:
    /// its length against the mean (logistic of the log-length difference:
    /// 0.5 is typical), its speaker's mean question share and its speaker's
    /// mean length against the memory's (0.5 without a speaker). Over the
    /// nodes with a question share (`set_question_shares`); with `allowed`,
    /// over those it lets through.
    #[pyo3(signature = (ids, *, allowed = None))]
    fn styles<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> Bound<'py, PyArray2<f64>> {
        let allowed: Option<&Allowed> = allowed.as_deref();
        let rows = self.read(py, |s| s.styles(&ids, allowed.map(|a| a.basis(s))));
        let flat: Vec<f64> = rows.iter().flatten().copied().collect();
        numpy::ndarray::Array2::from_shape_vec((rows.len(), 3), flat)
            .expect("three per row")
            .into_pyarray(py)
    }

    /// How long the memory's nodes are on a fixed scale: their mean log
    /// length over 10, capped at 1 (0 for an empty memory); with `allowed`,
    /// of the nodes it lets through (the `memory_length` signal).
    #[pyo3(signature = (*, allowed = None))]
    fn typical_length(&self, py: Python<'_>, allowed: Option<PyRef<'_, Allowed>>) -> f64 {
        let allowed: Option<&Allowed> = allowed.as_deref();
        self.read(py, |s| s.typical_length(allowed.map(|a| a.basis(s))))
    }

    /// The read path's signals of `ids` for one query, in one pass: an
    /// (n, len(SIGNAL_COLUMNS)) float64 array in `SIGNAL_COLUMNS` order, and
    /// each node's best passage index. `lexical_ranked` / `vector_ranked`:
    /// the query's two rankings (best first); `best_*`: its best lexical
    /// score, dense and passage similarity; `named`: the entities it names;
    /// `window` / `asks_when`: the time it asks about (see `time_matches`);
    /// `allowed`: the scope it reads. An unknown id raises NodeNotFoundError.
    #[pyo3(signature = (
        text, vector, ids, *, lexical_ranked, vector_ranked, best_lexical, best_dense,
        best_passage, named, window = None, asks_when = false, allowed = None
    ))]
    fn read_signals<'py>(
        &self,
        py: Python<'py>,
        text: String,
        vector: PyArrayLike1<'py, f32, AllowTypeChange>,
        ids: Vec<NodeId>,
        lexical_ranked: Vec<NodeId>,
        vector_ranked: Vec<NodeId>,
        best_lexical: f64,
        best_dense: f64,
        best_passage: f64,
        named: Vec<String>,
        window: Option<(i64, i64)>,
        asks_when: bool,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> PyResult<SignalRows<'py>> {
        let q = vector_arg(&vector);
        let allowed: Option<&Allowed> = allowed.as_deref();
        let query = SignalQuery {
            text: &text,
            related: &[],
            vector: &q,
            lexical_ranked: &lexical_ranked,
            vector_ranked: &vector_ranked,
            best_lexical,
            best_dense,
            best_passage,
            named: &named,
            time: time_query(window, asks_when),
            passages: true,
        };
        let got = self
            .read(py, |s| {
                let scope = allowed.map(|a| &*a.inner);
                s.read_signals(&query, &ids, scope, allowed.map(|a| a.basis(s)))
            })
            .py()?;
        let width = SIGNAL_COLUMNS.len();
        let flat: Vec<f64> = got.rows.iter().flatten().copied().collect();
        let rows = numpy::ndarray::Array2::from_shape_vec((got.rows.len(), width), flat)
            .expect("a full row per node")
            .into_pyarray(py);
        Ok((rows, got.best_passage.into_pyarray(py)))
    }

    /// Each node's content coverage for one query, as an (n, 2) float64
    /// array: the share of `content_tokens` the node asserts about the people
    /// the query asks about (`asked`, entity ids), and the share it asserts
    /// about other known people (`people`: lower-cased speakers in the
    /// search's scope). Read off the texts sentence by sentence (person marks,
    /// names not used as address, the speakers of the adjacent turns); see
    /// `jevmem_core::coverage`. An unknown id raises NodeNotFoundError.
    #[pyo3(signature = (ids, content_tokens, asked, people, *, allowed = None))]
    fn content_coverage<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
        content_tokens: Vec<String>,
        asked: Vec<String>,
        people: Vec<String>,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let allowed = allowed_arg(allowed);
        let query = CoverageQuery {
            content_tokens: content_tokens.into_iter().collect(),
            asked,
            people: people.into_iter().collect(),
        };
        let rows = self
            .read(py, |s| s.content_coverage(&ids, &query, allowed.as_deref()))
            .py()?;
        let flat: Vec<f64> = rows.iter().flat_map(|&(a, b)| [a, b]).collect();
        Ok(
            numpy::ndarray::Array2::from_shape_vec((rows.len(), 2), flat)
                .expect("two per row")
                .into_pyarray(py),
        )
    }

    /// For each of `ids`, which of `tokens` its text holds, as the lexical
    /// index tokenizes it: an (n, len(tokens)) bool array. An unknown id
    /// raises NodeNotFoundError.
    fn tokens_present<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
        tokens: Vec<String>,
    ) -> PyResult<Bound<'py, PyArray2<bool>>> {
        let width = tokens.len();
        let rows = self.read(py, |s| s.tokens_present(&ids, &tokens)).py()?;
        let flat: Vec<bool> = rows.into_iter().flatten().collect();
        Ok(
            numpy::ndarray::Array2::from_shape_vec((ids.len(), width), flat)
                .expect("a row per node")
                .into_pyarray(py),
        )
    }

    /// For each pair `(ids[k], others[k])`, 1.0 when both name the same
    /// session (the same `session`, `session_id` or `episode` provenance
    /// key and value, the first of those a node carries), else 0.0.
    fn same_session<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
        others: Vec<NodeId>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let same = self.read(py, |s| s.same_sessions(&ids, &others)).py()?;
        Ok(same
            .into_iter()
            .map(|b| f64::from(u8::from(b)))
            .collect::<Vec<_>>()
            .into_pyarray(py))
    }

    /// For each of `ids`, the best cosine similarity of its embedding with
    /// those of `against`, clamped to [0, 1] (0 when `against` is empty).
    fn max_similarities<'py>(
        &self,
        py: Python<'py>,
        ids: Vec<NodeId>,
        against: Vec<NodeId>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let got = self.read(py, |s| s.max_similarities(&ids, &against)).py()?;
        Ok(got.into_pyarray(py))
    }

    /// Each node's text, in the order of `ids` (one lock, no `Node` built).
    fn texts(&self, py: Python<'_>, ids: Vec<NodeId>) -> PyResult<Vec<String>> {
        self.read(py, |s| {
            s.texts(&ids)
                .map(|t| t.into_iter().map(str::to_owned).collect())
        })
        .py()
    }

    /// What coverage reads off a text with this store's tokenizer: the
    /// capitalised names it uses other than to address someone (lower-cased,
    /// in order), and its sentences as (tokens, weight, first person, second
    /// person), a question weighing 0.5.
    fn text_marks(&self, py: Python<'_>, text: String) -> TextMarksTuple {
        let marks = self.read(py, |s| coverage::text_marks(&text, s.tokenizer()));
        let sentences = marks
            .sentences
            .into_iter()
            .map(|x| (x.words, x.weight, x.first_person, x.second_person))
            .collect();
        (marks.named, sentences)
    }

    /// Each node's observation time (None when it has none or is not stored).
    fn timestamps(&self, py: Python<'_>, ids: Vec<NodeId>) -> Vec<Option<i64>> {
        self.read(py, |s| s.timestamps(&ids))
    }

    /// Each node's episode as a 64-bit key: equal within an episode (its
    /// session, else its UTC day), 0 for none or an id not stored.
    fn episode_keys<'py>(&self, py: Python<'py>, ids: Vec<NodeId>) -> Bound<'py, PyArray1<u64>> {
        self.read(py, |s| s.episode_keys(&ids)).into_pyarray(py)
    }

    /// The speakers of the nodes with a question share, lower-cased and sorted.
    fn speakers(&self, py: Python<'_>) -> Vec<String> {
        self.read(py, |s| s.speakers())
    }

    /// The people the memory knows, lower-cased and sorted: the speakers,
    /// and the labels that head its speakerless texts as a transcript
    /// names its speakers ("Caroline: I ran ..."), where a label heads two
    /// texts or more and at least half of them speak in the first or
    /// second person (`jevmem_core::style::StyleBasis::people`). With
    /// `allowed`, of the nodes it lets through.
    #[pyo3(signature = (*, allowed = None))]
    fn people(&self, py: Python<'_>, allowed: Option<PyRef<'_, Allowed>>) -> Vec<String> {
        let allowed: Option<&Allowed> = allowed.as_deref();
        self.read(py, |s| s.people(allowed.map(|a| a.basis(s))))
    }

    /// Cosine similarity of a query vector with each given node (NaN for unknown ids).
    fn similarities<'py>(
        &self,
        py: Python<'py>,
        query: PyArrayLike1<'py, f32, AllowTypeChange>,
        ids: Vec<NodeId>,
    ) -> PyResult<Bound<'py, PyArray1<f32>>> {
        let q = vector_arg(&query);
        let sims = self
            .read(py, |s| -> Result<Vec<f32>, Error> {
                s.vectors().validate(&q)?;
                let unit = VectorIndex::normalize(&q);
                Ok(ids
                    .iter()
                    .map(|&id| s.vectors().similarity(&unit, id).unwrap_or(f32::NAN))
                    .collect())
            })
            .py()?;
        Ok(sims.into_pyarray(py))
    }

    /// Reciprocal-rank fusion of the lexical and vector rankings (each cut at
    /// `depth`), top `k`: (ids, fused scores) arrays.
    #[pyo3(signature = (text = None, vector = None, k = 10, *, depth = 50, kappa = 60.0, allowed = None))]
    fn fused_anchors<'py>(
        &self,
        py: Python<'py>,
        text: Option<String>,
        vector: Option<PyArrayLike1<'py, f32, AllowTypeChange>>,
        k: usize,
        depth: usize,
        kappa: f64,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> PyResult<Ranked<'py, f64>> {
        let q = vector.as_ref().map(vector_arg);
        let allowed = allowed_arg(allowed);
        let fused = self
            .read(py, |s| {
                s.fused_anchors_scoped(
                    text.as_deref(),
                    q.as_deref(),
                    k,
                    depth,
                    kappa,
                    allowed.as_deref(),
                )
            })
            .py()?;
        let (ids, scores): (Vec<u64>, Vec<f64>) = fused.into_iter().unzip();
        Ok((ids.into_pyarray(py), scores.into_pyarray(py)))
    }

    /// Write-path candidates for node `id`: the best earlier nodes to judge relations with.
    #[pyo3(signature = (id, k = None))]
    fn write_candidates(
        &self,
        py: Python<'_>,
        id: NodeId,
        k: Option<usize>,
    ) -> PyResult<Vec<WriteCandidate>> {
        self.read(py, |s| {
            let found = s.candidates_for(id, k)?;
            let new = NewNodePairs::of(s.get(id).ok_or(Error::NodeNotFound(id))?);
            Ok(found
                .into_iter()
                .map(|c| {
                    let pair = s.get(c.id).map(|other| new.signals(other));
                    WriteCandidate::new(c, pair.unwrap_or_default())
                })
                .collect())
        })
        .py()
    }

    /// Node ids carrying an entity (normalised: trimmed, lowercased).
    /// Every entity some stored node carries (normalised), sorted.
    fn entity_names(&self, py: Python<'_>) -> Vec<String> {
        self.read(py, |s| s.entity_names())
    }

    fn nodes_with_entity(&self, py: Python<'_>, entity: &str) -> Vec<NodeId> {
        self.read(py, |s| s.nodes_with_entity(entity).to_vec())
    }

    /// Counts and approximate memory use.
    fn stats(&self, py: Python<'_>) -> HashMap<&'static str, u64> {
        let s = self.read(py, |s| s.stats());
        let mut out = HashMap::new();
        out.insert("nodes", s.nodes as u64);
        out.insert("next_id", s.next_id);
        for v in View::ALL {
            out.insert(
                match v {
                    View::Semantic => "edges_semantic",
                    View::Temporal => "edges_temporal",
                    View::Causal => "edges_causal",
                    View::Entity => "edges_entity",
                },
                s.edges[v.index()] as u64,
            );
        }
        out.insert("supersedes", s.supersedes as u64);
        out.insert("ops_applied", s.ops_applied);
        out.insert("graph_bytes", s.graph_bytes as u64);
        out.insert("bm25_bytes", s.bm25_bytes as u64);
        out.insert("vector_bytes", s.vector_bytes as u64);
        out.insert("passages", s.passages as u64);
        out.insert("passage_nodes", s.passage_nodes as u64);
        out.insert("passage_bytes", s.passage_bytes as u64);
        out
    }

    /// Start a bounded traversal. `routing` holds p_g for (semantic, temporal,
    /// causal, entity); `anchors` the seeds as (id, score in [0, 1]) pairs, best
    /// first. `calls_used` and `elapsed_s` charge what the query already spent
    /// (the routing call, embedding time) against the hard limits.
    /// With `allowed`, the traversal sees only those nodes: an anchor outside
    /// raises NodeNotFoundError, an edge to another node is neither expanded
    /// nor counted.
    #[pyo3(signature = (
        routing, anchors, *, multi_hop = 0.0, recency = 0.0, query_vector = None, now = None,
        config = None, calls_used = 1, elapsed_s = 0.0, allowed = None
    ))]
    fn traverse(
        &self,
        py: Python<'_>,
        routing: (f32, f32, f32, f32),
        anchors: Vec<(NodeId, f32)>,
        multi_hop: f32,
        recency: f32,
        query_vector: Option<PyArrayLike1<'_, f32, AllowTypeChange>>,
        now: Option<i64>,
        config: Option<Bound<'_, TraversalConfig>>,
        calls_used: u32,
        elapsed_s: f64,
        allowed: Option<PyRef<'_, Allowed>>,
    ) -> PyResult<Traversal> {
        start_traversal(
            py,
            &self.inner,
            routing,
            anchors,
            multi_hop,
            recency,
            query_vector,
            now,
            config,
            calls_used,
            elapsed_s,
            allowed_arg(allowed),
        )
    }

    /// Vectors stored but not yet in the HNSW graph. A memory loaded or
    /// recovered past the exact tier opens with its vectors pending and a
    /// background thread moves them into the graph; until then searches
    /// scan the pending ones exactly, so results are complete throughout.
    #[getter]
    fn pending_graph(&self, py: Python<'_>) -> usize {
        self.read(py, |s| s.pending_graph())
    }

    /// The HNSW search expansion (ef) node vector searches use now.
    #[getter]
    fn expansion_search(&self, py: Python<'_>) -> usize {
        self.read(py, |s| s.node_expansion_search())
    }

    /// The ef set with `set_expansion_search`, or None when it grows with
    /// the index (the default).
    #[getter]
    fn fixed_expansion_search(&self, py: Python<'_>) -> Option<usize> {
        self.read(py, |s| match s.config().vector.expansion_search {
            SearchExpansion::Fixed(ef) => Some(ef),
            SearchExpansion::Grows => None,
        })
    }

    /// Change the HNSW search expansion (ef) of a live store: higher finds
    /// more of the exact nearest neighbours and costs query time; the graph
    /// is not rebuilt. None: grow with the index. Kept in the next snapshot.
    #[pyo3(signature = (expansion_search))]
    fn set_expansion_search(
        &self,
        py: Python<'_>,
        expansion_search: Option<usize>,
    ) -> PyResult<()> {
        let inner = &self.inner;
        let expansion = search_expansion(expansion_search);
        py.detach(|| inner.write().set_expansion_search(expansion))
            .py()
    }

    /// Change the exact-scan / HNSW switch point of a live store (benchmarks
    /// use it to write a long log quickly in the exact tier).
    fn _set_exact_threshold(&self, py: Python<'_>, exact_threshold: usize) -> PyResult<()> {
        let inner = &self.inner;
        py.detach(|| inner.write().set_exact_threshold(exact_threshold))
            .py()
    }

    /// Build the rest of the HNSW graph now (GIL released), in short steps
    /// that let searches and writes in between.
    fn finish_graph(&self, py: Python<'_>) -> PyResult<()> {
        let inner = &self.inner;
        py.detach(|| -> Result<(), Error> {
            while build_graph_step(inner)? > 0 {}
            Ok(())
        })
        .py()
    }

    /// Write a snapshot (atomic: temporary file, fsync, rename).
    fn save(&self, py: Python<'_>, path: PathBuf) -> PyResult<()> {
        self.read(py, |s| s.save(&path)).py()
    }

    /// Load a snapshot written by `save`. `max_absent_ids`: removed ids the
    /// file may claim, for a memory of yours that forgot more than the
    /// default bound allows (see the error that names it).
    #[staticmethod]
    #[pyo3(signature = (path, *, max_absent_ids = None))]
    fn load(py: Python<'_>, path: PathBuf, max_absent_ids: Option<u64>) -> PyResult<Self> {
        let store = py
            .detach(|| {
                CoreStore::from_snapshot_bytes_with(
                    &std::fs::read(&path)?,
                    deferred(max_absent_ids),
                )
            })
            .py()?;
        Ok(Self::in_memory(store))
    }

    /// The snapshot as bytes.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.read(py, |s| s.to_snapshot_bytes()).py()?;
        Ok(PyBytes::new(py, &bytes))
    }

    #[staticmethod]
    #[pyo3(signature = (data, *, max_absent_ids = None))]
    fn from_bytes(py: Python<'_>, data: Vec<u8>, max_absent_ids: Option<u64>) -> PyResult<Self> {
        let store = py
            .detach(|| CoreStore::from_snapshot_bytes_with(&data, deferred(max_absent_ids)))
            .py()?;
        Ok(Self::in_memory(store))
    }

    /// Export to one file with the caller's `state` inside (the checkpoint
    /// format), atomically: unique temp file, fsync, rename, fsync the directory.
    fn save_with_state(&self, py: Python<'_>, path: PathBuf, state: Vec<u8>) -> PyResult<()> {
        let inner = &self.inner;
        py.detach(|| -> Result<(), Error> {
            jevmem_core::durable::check_export_path(&path)?;
            let snapshot = inner.read().to_snapshot_bytes()?;
            let bytes = jevmem_core::durable::encode_checkpoint(0, &state, &snapshot);
            jevmem_core::durable::fs::atomic_write(
                &path,
                &bytes,
                ["checkpoint.write", "checkpoint.fsync", "checkpoint.rename"],
            )?;
            Ok(())
        })
        .py()
    }

    /// Load a file written by `save_with_state` (state as bytes) or by
    /// `save` (state None).
    #[staticmethod]
    #[pyo3(signature = (path, *, max_absent_ids = None))]
    fn load_with_state<'py>(
        py: Python<'py>,
        path: PathBuf,
        max_absent_ids: Option<u64>,
    ) -> PyResult<(Self, Option<Bound<'py, PyBytes>>)> {
        let options = deferred(max_absent_ids);
        let (store, state) = py
            .detach(|| -> Result<(CoreStore, Option<Vec<u8>>), Error> {
                let bytes = std::fs::read(&path)?;
                if jevmem_core::durable::is_checkpoint(&bytes) {
                    let (_, state, snapshot) = jevmem_core::durable::decode_checkpoint(&bytes)?;
                    Ok((
                        CoreStore::from_snapshot_bytes_with(snapshot, options)?,
                        Some(state.to_vec()),
                    ))
                } else {
                    Ok((CoreStore::from_snapshot_bytes_with(&bytes, options)?, None))
                }
            })
            .py()?;
        Ok((Self::in_memory(store), state.map(|s| PyBytes::new(py, &s))))
    }

    // ---- durable memories (see `crate::durable`) ---------------------------

    /// Open (or create) the durable memory in directory `path`. Returns
    /// `(store, state, deltas, report)`: the caller's state saved at the last
    /// checkpoint, the state deltas of every log record replayed after it,
    /// and what recovery found (a dict).
    #[staticmethod]
    #[pyo3(signature = (
        path, dim, *, embedder = "", state = None, durability = "sync", salvage = false,
        segment_bytes = DEFAULT_SEGMENT_BYTES, max_text_bytes = DEFAULT_MAX_CONTENT_BYTES,
        lexical_fields = None, exact_threshold = None, max_absent_ids = None
    ))]
    fn open<'py>(
        py: Python<'py>,
        path: PathBuf,
        dim: usize,
        embedder: &str,
        state: Option<Vec<u8>>,
        durability: &str,
        salvage: bool,
        segment_bytes: u64,
        max_text_bytes: usize,
        lexical_fields: Option<Vec<String>>,
        exact_threshold: Option<usize>,
        max_absent_ids: Option<u64>,
    ) -> PyResult<OpenResult<'py>> {
        let mut config = StoreConfig::new(dim);
        config.max_content_bytes = max_text_bytes;
        if let Some(t) = exact_threshold {
            config.vector.exact_threshold = t;
        }
        if let Some(fields) = lexical_fields {
            config.lexical_fields = fields;
        }
        let options = DurableOptions {
            sync: SyncMode::parse(durability).py()?,
            segment_bytes,
            salvage,
            max_absent_ids,
        };
        let state = state.unwrap_or_default();
        let embedder = embedder.to_string();
        let opened = py
            .detach(|| Durable::open(&path, config, &embedder, &state, options))
            .py()?;
        crate::durable::opened_to_py(py, opened)
    }

    /// Whether this memory lives in a directory with a write-ahead log.
    #[getter]
    fn durable(&self) -> bool {
        self.durable.read().is_some()
    }

    /// The directory's sync mode ("sync", "interval:MS", "none"), or None.
    #[getter]
    fn durability(&self) -> Option<String> {
        self.durable.read().as_ref().map(|h| h.core.mode().name())
    }

    /// The directory of a durable memory, or None.
    #[getter]
    fn path(&self) -> Option<PathBuf> {
        self.durable
            .read()
            .as_ref()
            .map(|h| h.core.dir().to_path_buf())
    }

    /// Sequence number of the last log record (0 before any; None when not durable).
    #[getter]
    fn last_seq(&self) -> Option<u64> {
        self.durable.read().as_ref().map(|h| h.core.last_seq())
    }

    /// The reason this durable memory became read-only, or None.
    #[getter]
    fn failure(&self) -> Option<String> {
        self.durable.read().as_ref().and_then(|h| h.core.failure())
    }

    /// Checkpoint a durable memory with the caller's `state`: afterwards
    /// reopening replays only later records, and covered log segments are
    /// gone. Returns a dict (generation, seq, bytes, segments_removed).
    fn checkpoint<'py>(&self, py: Python<'py>, state: Vec<u8>) -> PyResult<Bound<'py, PyDict>> {
        let h = self.durable_handle()?;
        let inner = &self.inner;
        let report = py
            .detach(|| {
                let pending = h.core.prepare_checkpoint(&inner.read(), &state)?;
                h.core.finish_checkpoint(pending)
            })
            .py()?;
        let d = PyDict::new(py);
        d.set_item("generation", report.generation)?;
        d.set_item("seq", report.seq)?;
        d.set_item("bytes", report.bytes)?;
        d.set_item("segments_removed", report.segments_removed)?;
        Ok(d)
    }

    /// fsync every record written so far, whatever the sync mode.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let h = self.durable_handle()?;
        py.detach(|| h.core.flush()).py()
    }

    /// Close a durable memory: flush, release the directory's lock. Reads
    /// still work; writes raise. Idempotent; a no-op in memory.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let handle = self.durable.write().take();
        if let Some(h) = handle {
            self.closed
                .store(true, std::sync::atomic::Ordering::Release);
            // the last reference: dropping it stops the flusher and frees LOCK
            py.detach(|| h.close()).py()?;
        }
        Ok(())
    }

    /// Whether `close` was called on this durable memory.
    #[getter]
    fn closed(&self) -> bool {
        self.is_closed()
    }

    /// Open one write made of several calls: their ops become one log record
    /// at `_log_write`. For `Memory`, which serialises its writers.
    fn _begin_write(&self) -> PyResult<()> {
        let h = self.durable_handle()?;
        h.begin().py()
    }

    /// End the write opened by `_begin_write`: log its ops and `delta` as
    /// one record, without waiting; returns its sequence number (None when
    /// there was nothing to log).
    fn _log_write(&self, py: Python<'_>, delta: Vec<u8>) -> PyResult<Option<u64>> {
        let h = self.durable_handle()?;
        let inner = &self.inner;
        py.detach(|| h.log(inner, &delta)).py()
    }

    /// Wait until record `seq` is as durable as the sync mode promises.
    fn _wait_durable(&self, py: Python<'_>, seq: u64) -> PyResult<()> {
        let h = self.durable_handle()?;
        py.detach(|| h.core.wait(seq)).py()
    }
}

impl MemoryStore {
    fn durable_handle(&self) -> PyResult<Arc<DurableHandle>> {
        if self.is_closed() {
            return Err(Error::Durability("the memory is closed".into())).py();
        }
        self.durable
            .read()
            .clone()
            .ok_or_else(|| {
                Error::InvalidState("this memory is not durable (open it from a directory)".into())
            })
            .py()
    }
}

/// `add_batch`'s scope, metadata and key columns (None entries: none).
struct Attrs<'py> {
    scopes: Option<Vec<Bound<'py, PyAny>>>,
    metadatas: Option<Vec<Bound<'py, PyAny>>>,
    keys: Option<Vec<Bound<'py, PyAny>>>,
}

/// One observation's (scope, metadata, key) as parsed from the columns.
type AttrRow = (
    Vec<(String, String)>,
    Vec<(String, MetaValue)>,
    Option<String>,
);

/// Parse the scope, metadata and key columns of `n` observations.
fn parse_attrs(n: usize, attrs: Attrs<'_>) -> PyResult<Vec<AttrRow>> {
    for (what, len) in [
        ("scopes", attrs.scopes.as_ref().map(Vec::len)),
        ("metadatas", attrs.metadatas.as_ref().map(Vec::len)),
        ("keys", attrs.keys.as_ref().map(Vec::len)),
    ] {
        if let Some(l) = len.filter(|&l| l != n) {
            return Err(Error::InvalidInput(format!(
                "{what} has {l} entries for {n} texts"
            )))
            .py();
        }
    }
    (0..n)
        .map(|i| {
            let what = |col: &str| format!("observation {i}: {col}");
            Ok((
                scope_arg(&what("scope"), attrs.scopes.as_ref().map(|c| &c[i]))?,
                metadata_arg(&what("metadata"), attrs.metadatas.as_ref().map(|c| &c[i]))?,
                key_arg(&what("key"), attrs.keys.as_ref().map(|c| &c[i]))?,
            ))
        })
        .collect()
}

/// Zip `add_batch`'s columns into owned nodes, checking the column lengths.
/// The text-bearing columns arrive unconverted so a bad one is refused as a
/// jevmem error naming it (see `extract_arg`).
fn batch_nodes<'py>(
    texts: &Bound<'py, PyAny>,
    embeddings: PyArrayLike2<'py, f32, AllowTypeChange>,
    timestamps: Option<&Bound<'py, PyAny>>,
    provenances: Option<&Bound<'py, PyAny>>,
    entities: Option<&Bound<'py, PyAny>>,
    types: Option<&Bound<'py, PyAny>>,
    passages: Option<&Bound<'py, PyAny>>,
    attrs: Attrs<'py>,
) -> PyResult<Vec<NewNode>> {
    let texts: Vec<String> = extract_arg(texts, "texts")?;
    // a wrong-sized type tuple or a negative span is the caller's input,
    // refused typed as the other columns are
    let types: Option<Vec<Option<TypeTuple>>> = types
        .map(|t| extract_arg::<Option<_>>(t, "types"))
        .transpose()?
        .flatten();
    let passages: Option<Vec<Option<PassagesArg<'py>>>> = passages
        .map(|p| extract_arg::<Option<_>>(p, "passages"))
        .transpose()?
        .flatten();
    let timestamps: Option<Vec<Option<i64>>> = timestamps
        .map(|t| timestamps_arg(t, "timestamps"))
        .transpose()?
        .flatten();
    let provenances: Option<Vec<Option<HashMap<String, String>>>> = provenances
        .map(|p| extract_arg::<Option<_>>(p, "provenances"))
        .transpose()?
        .flatten();
    let entities: Option<Vec<Option<Vec<String>>>> = entities
        .map(|e| extract_arg::<Option<_>>(e, "entities"))
        .transpose()?
        .flatten();
    let n = texts.len();
    let matrix = embeddings.as_array();
    let check = |what: &str, len: Option<usize>| -> PyResult<()> {
        match len {
            Some(l) if l != n => Err(Error::InvalidInput(format!(
                "{what} has {l} entries for {n} texts"
            )))
            .py(),
            _ => Ok(()),
        }
    };
    check("embeddings", Some(matrix.nrows()))?;
    check("timestamps", timestamps.as_ref().map(Vec::len))?;
    check("provenances", provenances.as_ref().map(Vec::len))?;
    check("entities", entities.as_ref().map(Vec::len))?;
    check("types", types.as_ref().map(Vec::len))?;
    check("passages", passages.as_ref().map(Vec::len))?;
    let (scopes, (metadatas, keys)): (Vec<_>, (Vec<_>, Vec<_>)) = parse_attrs(n, attrs)?
        .into_iter()
        .map(|(s, m, k)| (s, (m, k)))
        .unzip();
    let mut scopes = scopes.into_iter();
    let mut metadatas = metadatas.into_iter();
    let mut keys = keys.into_iter();
    let mut parsed = Vec::with_capacity(n);
    for (i, p) in passages.into_iter().flatten().enumerate() {
        parsed.push(
            passages_arg(p)
                .map_err(|e| Error::InvalidInput(format!("observation {i}: {e}")))
                .py()?,
        );
    }
    let mut passages = parsed.into_iter();
    let mut timestamps = timestamps.map(Vec::into_iter);
    let mut provenances = provenances.map(Vec::into_iter);
    let mut entities = entities.map(Vec::into_iter);
    let mut types = types.map(Vec::into_iter);
    Ok(texts
        .into_iter()
        .zip(matrix.rows())
        .map(|(content, row)| NewNode {
            content,
            timestamp: timestamps.as_mut().and_then(|it| it.next().flatten()),
            provenance: provenance_arg(provenances.as_mut().and_then(|it| it.next().flatten())),
            entities: entities
                .as_mut()
                .and_then(|it| it.next().flatten())
                .unwrap_or_default(),
            types: types_arg(types.as_mut().and_then(|it| it.next().flatten())),
            embedding: row.iter().copied().collect(),
            passages: passages.next().unwrap_or_default(),
            scope: scopes.next().unwrap_or_default(),
            metadata: metadatas.next().unwrap_or_default(),
            key: keys.next().flatten(),
        })
        .collect())
}

/// One node's passages: as many embedding rows as spans.
fn passages_arg(p: Option<PassagesArg<'_>>) -> Result<Vec<NewPassage>, Error> {
    let Some((embeddings, spans)) = p else {
        return Ok(Vec::new());
    };
    let matrix = embeddings.as_array();
    if matrix.nrows() != spans.len() {
        return Err(Error::InvalidInput(format!(
            "passages have {} embeddings for {} spans",
            matrix.nrows(),
            spans.len()
        )));
    }
    Ok(spans
        .into_iter()
        .zip(matrix.rows())
        .map(|((start, end), row)| NewPassage::new(start, end, row.iter().copied().collect()))
        .collect())
}

fn make_edge(
    src: NodeId,
    dst: NodeId,
    view: &str,
    weight: f32,
    origin: &str,
    temporal_label: Option<&str>,
) -> Result<CoreEdge, Error> {
    Ok(CoreEdge {
        src,
        dst,
        view: View::parse(view)?,
        weight,
        origin: EdgeOrigin::parse(origin)?,
        temporal: temporal_label.map(TemporalLabel::parse).transpose()?,
    })
}

fn upsert_name(u: EdgeUpsert) -> &'static str {
    match u {
        EdgeUpsert::Inserted => "inserted",
        EdgeUpsert::Strengthened => "strengthened",
        EdgeUpsert::Unchanged => "unchanged",
    }
}
