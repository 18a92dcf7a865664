//! Cosine vector index: our own contiguous copy of every unit-normalised
//! vector (exact scans, per-node similarity during traversal) plus a usearch
//! HNSW graph that answers searches once the memory is large.
//!
//! # Threading
//!
//! Searches run concurrently from many threads through `&self`; writes go
//! through `&mut self`, so they never overlap a search or each other.
//!
//! usearch's dense index keeps a fixed pool of per-thread *contexts* (visited
//! set, candidate heaps, a cast buffer) sized by `reserve_capacity_and_threads`.
//! Every `search` called through the Rust binding passes `any_thread()`, which
//! pops a free context from that pool under a short mutex and pushes it back
//! when the result is dropped. Searches holding different contexts run fully in
//! parallel. If the pool is empty the search does **not** wait: it fails with
//! "Reserve capacity ahead of searches!". So we (1) reserve one context per
//! hardware thread (`available_parallelism`), enough to keep every core busy,
//! and (2) put a counting gate with exactly that many permits in front of the
//! HNSW search, so a caller beyond that count (e.g. more Python threads than
//! cores) waits for a context instead of getting a spurious error. `reserve`
//! rebuilds the pool and must not overlap searches; it only runs inside `add`,
//! which holds `&mut self`.

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Condvar, Mutex, PoisonError};

use usearch::{Index, IndexOptions, MetricKind, ScalarKind};

use crate::error::{Error, Result};
use crate::filter::Allowed;
use crate::prefetch;
use crate::types::NodeId;

/// Default `VectorConfig::exact_threshold`.
///
/// Measured with `cargo bench --bench vector` (384-d, k = 10, F32, M = 16,
/// ef_search = 128; shared 2-core AMD EPYC, p50 per query; see BENCHMARKS.md).
/// The exact AVX2+FMA scan over our copy costs ~58 ns/vector (60 us at 1k,
/// 118 us at 2k, 235 us at 4k); HNSW overtakes it between 2k and 4k vectors
/// on embedding-like data, and on uniform random data the scan still wins at
/// 16k. Just below 4096 the scan can be ~25% (~50 us) slower than the graph
/// would be, in exchange for exact results and no graph to maintain: the
/// graph is only built when the memory reaches this size.
pub const DEFAULT_EXACT_THRESHOLD: usize = 4096;

/// Smallest HNSW reservation; growth doubles from here so inserts never reserve one at a time.
const MIN_RESERVE: usize = 1024;

/// The smallest reservation is also capped in bytes of vector data, so a
/// wide dimension (a config read from a file) does not reserve hundreds of
/// megabytes for an empty graph.
const MIN_RESERVE_BYTES: usize = 4 << 20;

/// Largest supported dimension (a sanity bound against garbage configs).
pub const MAX_DIM: usize = 1 << 16;

/// Largest HNSW connectivity (M): usearch sizes every node's neighbour lists
/// by it, so an unbounded value from a config file is an allocation bomb.
pub const MAX_CONNECTIVITY: usize = 256;

/// Largest HNSW expansion (ef): each search context keeps heaps this long.
pub const MAX_EXPANSION: usize = 1 << 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Quantization {
    F32,
    F16,
    I8,
}

impl Quantization {
    fn scalar_kind(self) -> ScalarKind {
        match self {
            Quantization::F32 => ScalarKind::F32,
            Quantization::F16 => ScalarKind::F16,
            Quantization::I8 => ScalarKind::I8,
        }
    }
}

/// The growing search expansion's ef up to [`GROWING_EF_FROM`] vectors.
pub const GROWING_EF_BASE: usize = 128;

/// Size past which the growing search expansion rises. A Memory of the
/// development sets' turns (distinct vectors) finds 0.99 of the exact top 10
/// at ef 128 up to 250k nodes, 0.98 at 500k and 0.93 at 1M, where ef 256
/// finds 0.96-0.97 (BENCHMARKS.md sections 17, 28 and 29): HNSW's recall
/// at a fixed ef falls as the graph grows, and the growth keeps it.
pub const GROWING_EF_FROM: usize = 250_000;

/// The HNSW search expansion (ef): how many candidates a graph search keeps.
/// Higher finds more of the exact nearest neighbours and costs query time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "usize", into = "usize")]
pub enum SearchExpansion {
    /// [`GROWING_EF_BASE`] up to [`GROWING_EF_FROM`] vectors, then with the
    /// square root of the size, rounded up to a multiple of 16: 192 at
    /// 500k, 256 at 1M, 512 at 4M. Stored as 0, a value no fixed ef takes, so
    /// the snapshot format is unchanged.
    Grows,
    /// This ef at every size.
    Fixed(usize),
}

impl SearchExpansion {
    /// The ef a graph of `len` vectors searches with.
    pub fn at(self, len: usize) -> usize {
        match self {
            Self::Fixed(ef) => ef,
            Self::Grows if len <= GROWING_EF_FROM => GROWING_EF_BASE,
            Self::Grows => {
                let ef = GROWING_EF_BASE as f64 * (len as f64 / GROWING_EF_FROM as f64).sqrt();
                ((ef.ceil() as usize).div_ceil(16) * 16).min(MAX_EXPANSION)
            }
        }
    }
}

impl From<usize> for SearchExpansion {
    fn from(stored: usize) -> Self {
        match stored {
            0 => Self::Grows,
            ef => Self::Fixed(ef),
        }
    }
}

impl From<SearchExpansion> for usize {
    fn from(expansion: SearchExpansion) -> Self {
        match expansion {
            SearchExpansion::Grows => 0,
            SearchExpansion::Fixed(ef) => ef,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VectorConfig {
    pub dim: usize,
    pub quantization: Quantization,
    /// Below this many vectors, search scans exactly instead of asking the HNSW graph.
    pub exact_threshold: usize,
    pub connectivity: usize,
    pub expansion_add: usize,
    pub expansion_search: SearchExpansion,
}

impl VectorConfig {
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            quantization: Quantization::F32,
            exact_threshold: DEFAULT_EXACT_THRESHOLD,
            connectivity: 16,
            expansion_add: 128,
            // 64 gave recall@10 = 0.91 on 5k uniform random 64-d vectors; 128 gives 0.98.
            expansion_search: SearchExpansion::Grows,
        }
    }

    pub fn validate(&self) -> Result<()> {
        if self.dim == 0 || self.dim > MAX_DIM {
            return Err(Error::config(format!(
                "vector dimension must be in 1..={MAX_DIM}, got {}",
                self.dim
            )));
        }
        if !(2..=MAX_CONNECTIVITY).contains(&self.connectivity) {
            return Err(Error::config(format!(
                "HNSW connectivity must be in 2..={MAX_CONNECTIVITY}, got {}",
                self.connectivity
            )));
        }
        let fixed_search = match self.expansion_search {
            SearchExpansion::Fixed(ef) => ef,
            SearchExpansion::Grows => GROWING_EF_BASE,
        };
        for (name, value) in [
            ("expansion_add", self.expansion_add),
            ("expansion_search", fixed_search),
        ] {
            if !(1..=MAX_EXPANSION).contains(&value) {
                return Err(Error::config(format!(
                    "HNSW {name} must be in 1..={MAX_EXPANSION}, got {value}"
                )));
            }
        }
        Ok(())
    }
}

/// Multiplicative (Fibonacci) hash for node ids: ids are dense integers, so a
/// single multiply spreads them well and keeps `similarity` lookups cheap.
#[derive(Default)]
struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type SlotMap = HashMap<NodeId, u32, BuildHasherDefault<IdHasher>>;

/// Counting gate: at most `permits` HNSW searches hold a usearch context at once.
struct SearchGate {
    free: Mutex<usize>,
    freed: Condvar,
}

struct GatePass<'a>(&'a SearchGate);

impl SearchGate {
    fn new(permits: usize) -> Self {
        Self {
            free: Mutex::new(permits),
            freed: Condvar::new(),
        }
    }

    fn enter(&self) -> GatePass<'_> {
        // The guarded value is a plain counter, always consistent, so poisoning is harmless.
        let mut free = self.free.lock().unwrap_or_else(PoisonError::into_inner);
        while *free == 0 {
            free = self
                .freed
                .wait(free)
                .unwrap_or_else(PoisonError::into_inner);
        }
        *free -= 1;
        GatePass(self)
    }
}

impl Drop for GatePass<'_> {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(PoisonError::into_inner) += 1;
        self.0.freed.notify_one();
    }
}

/// usearch reports failures as `cxx::Exception`; keep its message.
fn index_err(e: impl std::fmt::Display) -> Error {
    Error::Index(e.to_string())
}

pub struct VectorIndex {
    config: VectorConfig,
    /// Unit vectors, slot-major and contiguous (`len * dim` floats).
    data: Vec<f32>,
    /// Slot -> node id.
    slot_ids: Vec<NodeId>,
    /// Node id -> slot.
    slots: SlotMap,
    /// Built lazily once the index reaches `exact_threshold` vectors: below it
    /// the exact scan answers every search, so small memories skip the graph's
    /// insertion cost (and stay exactly deterministic).
    hnsw: Option<Index>,
    /// Ids whose vectors are in our copy but not yet in `hnsw` (only while a
    /// graph exists). Searches scan them exactly and merge, so a deferred
    /// vector is found from the moment it is stored; `build_pending` moves
    /// them into the graph a step at a time.
    pending: Vec<NodeId>,
    /// Id -> position in `pending`.
    pending_at: SlotMap,
    /// While set, vectors added (and a graph built at the threshold) go to
    /// `pending` instead of the graph: replay and snapshot loads store a
    /// whole memory at once, and inserting it into HNSW on the spot took
    /// minutes (~1k inserts/s per core at 100k vectors).
    defer_graph: bool,
    /// usearch thread contexts reserved, and permits of `gate`.
    search_threads: usize,
    gate: SearchGate,
}

// Searches share `&VectorIndex` across threads; see the module docs for why that is sound.
const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<VectorIndex>();
};

impl VectorIndex {
    pub fn new(config: VectorConfig) -> Result<Self> {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::with_search_threads(config, threads)
    }

    /// Like `new`, with an explicit number of concurrent HNSW searches
    /// (usearch thread contexts). More concurrent callers than this wait.
    pub fn with_search_threads(config: VectorConfig, search_threads: usize) -> Result<Self> {
        config.validate()?;
        if search_threads == 0 {
            return Err(Error::config("search_threads must be positive"));
        }
        let mut index = Self {
            config,
            data: Vec::new(),
            slot_ids: Vec::new(),
            slots: SlotMap::default(),
            hnsw: None,
            pending: Vec::new(),
            pending_at: SlotMap::default(),
            defer_graph: false,
            search_threads,
            gate: SearchGate::new(search_threads),
        };
        index.build_hnsw_if_due()?;
        Ok(index)
    }

    fn new_hnsw(&self) -> Result<Index> {
        let options = IndexOptions {
            dimensions: self.config.dim,
            metric: MetricKind::Cos,
            quantization: self.config.quantization.scalar_kind(),
            connectivity: self.config.connectivity,
            expansion_add: self.config.expansion_add,
            expansion_search: self.config.expansion_search.at(self.len()),
            multi: false,
        };
        let mut index = Index::new(&options).map_err(index_err)?;
        crate::distance::install(&mut index, self.config.quantization, self.config.dim);
        Ok(index)
    }

    /// Whether searches are answered by the HNSW graph (else by the exact scan).
    pub fn uses_hnsw(&self) -> bool {
        self.hnsw.is_some() && self.len() >= self.config.exact_threshold
    }

    /// Build the HNSW graph from our copy once the size reaches the threshold.
    fn build_hnsw_if_due(&mut self) -> Result<()> {
        if self.hnsw.is_some() || self.len() < self.config.exact_threshold {
            return Ok(());
        }
        let index = self.new_hnsw()?;
        if self.defer_graph {
            // An empty graph: every stored vector waits in `pending`.
            index
                .reserve_capacity_and_threads(self.min_reserve(), self.search_threads)
                .map_err(index_err)?;
            self.pending = self.slot_ids.clone();
            self.pending_at = self
                .pending
                .iter()
                .enumerate()
                .map(|(at, &id)| (id, at as u32))
                .collect();
            self.hnsw = Some(index);
            return Ok(());
        }
        let target = self.len().saturating_mul(2).max(self.min_reserve());
        index
            .reserve_capacity_and_threads(target, self.search_threads)
            .map_err(index_err)?;
        let items: Vec<(NodeId, &[f32])> = self
            .slot_ids
            .iter()
            .enumerate()
            .map(|(slot, &id)| (id, self.row(slot)))
            .collect();
        insert_parallel(&index, self.insert_threads(), &items)?;
        self.hnsw = Some(index);
        Ok(())
    }

    /// The smallest HNSW reservation for this dimension (see `MIN_RESERVE_BYTES`).
    fn min_reserve(&self) -> usize {
        let row_bytes = self.config.dim * std::mem::size_of::<f32>();
        (MIN_RESERVE_BYTES / row_bytes.max(1)).clamp(16, MIN_RESERVE)
    }

    /// Threads used to insert a batch into the graph (usearch supports
    /// concurrent inserts, each holding one of the reserved contexts).
    fn insert_threads(&self) -> usize {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        cores.min(self.search_threads).max(1)
    }

    pub fn config(&self) -> VectorConfig {
        self.config
    }

    pub fn dim(&self) -> usize {
        self.config.dim
    }

    pub fn len(&self) -> usize {
        self.slot_ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Change where search switches from the exact scan to HNSW (the graph is
    /// always maintained, so this takes effect immediately).
    pub fn set_exact_threshold(&mut self, exact_threshold: usize) -> Result<()> {
        self.config.exact_threshold = exact_threshold;
        self.build_hnsw_if_due()
    }

    /// Change the HNSW search expansion (ef) of a live index: the graph is
    /// unchanged, so recall against query time can be traded without a rebuild.
    pub fn set_expansion_search(&mut self, expansion_search: SearchExpansion) -> Result<()> {
        let config = VectorConfig {
            expansion_search,
            ..self.config
        };
        config.validate()?;
        self.config = config;
        self.sync_expansion_search();
        Ok(())
    }

    /// The ef searches use now (the growing one follows the size).
    pub fn expansion_search(&self) -> usize {
        self.config.expansion_search.at(self.len())
    }

    /// Give the graph the ef for the current size: called whenever the size
    /// or the setting changes, under `&mut self`, so no search reads the
    /// setting while it changes.
    fn sync_expansion_search(&self) {
        if let Some(index) = &self.hnsw {
            let ef = self.expansion_search();
            if index.expansion_search() != ef {
                index.change_expansion_search(ef);
            }
        }
    }

    /// While `on`, added vectors wait in a pending list (searched exactly)
    /// instead of entering the HNSW graph; see `build_pending`.
    pub fn set_defer_graph(&mut self, on: bool) {
        self.defer_graph = on;
    }

    /// Vectors stored but not yet in the HNSW graph.
    pub fn pending_graph(&self) -> usize {
        self.pending.len()
    }

    /// Move pending vectors into the HNSW graph until `max_items` are in or
    /// `budget` has passed, in chunks inserted from several threads (usearch
    /// supports concurrent inserts): each chunk is sized from the time the
    /// last one took per vector, so the budget is checked often enough for a
    /// caller holding a lock to bound how long it holds it. Returns how many
    /// moved. On an error the vectors the graph did not take stay pending.
    pub fn build_pending(
        &mut self,
        max_items: usize,
        budget: std::time::Duration,
    ) -> Result<usize> {
        self.build_pending_with(max_items, budget, self.insert_threads())
    }

    /// `build_pending` with `threads` inserting at once (at most
    /// `search_threads`; 1: one at a time, last pending first, the budget
    /// checked after each).
    pub(crate) fn build_pending_with(
        &mut self,
        max_items: usize,
        budget: std::time::Duration,
        threads: usize,
    ) -> Result<usize> {
        // A chunk's vectors per thread: few enough at first (a step of a
        // few milliseconds must not overrun by much), at most this many.
        const FIRST_PER_THREAD: usize = 4;
        const MAX_CHUNK: usize = 8192;
        if self.hnsw.is_none() {
            return Ok(0);
        }
        // each inserting thread holds one of the graph's reserved contexts
        let threads = threads.clamp(1, self.search_threads);
        let start = std::time::Instant::now();
        let mut moved = 0;
        let mut chunk = if threads == 1 {
            1
        } else {
            FIRST_PER_THREAD * threads
        };
        while moved < max_items && !self.pending.is_empty() {
            let take = chunk.min(max_items - moved).min(self.pending.len());
            self.reserve_graph_for(take)?;
            // the last `take` pending, last first (one at a time this is the
            // order a stack of pending vectors is emptied in)
            let ids: Vec<NodeId> = self.pending[self.pending.len() - take..]
                .iter()
                .rev()
                .copied()
                .collect();
            let t0 = std::time::Instant::now();
            let inserted = {
                let hnsw = self.hnsw.as_ref().expect("checked above");
                let items: Vec<(NodeId, &[f32])> = ids
                    .iter()
                    .map(|&id| (id, self.row(self.slots[&id] as usize)))
                    .collect();
                insert_chunk(hnsw, threads, &items)
            };
            self.settle_chunk(&ids, inserted.is_ok());
            inserted?;
            moved += take;
            let elapsed = start.elapsed();
            if elapsed >= budget {
                break;
            }
            if threads > 1 {
                // as many as the time left fits, at the rate this chunk went
                let per_item = t0.elapsed().as_secs_f64() / take as f64;
                let left = (budget - elapsed).as_secs_f64();
                let fits = if per_item > 0.0 {
                    left / per_item
                } else {
                    f64::MAX
                };
                chunk = (fits.min(MAX_CHUNK as f64) as usize).max(threads);
            }
        }
        Ok(moved)
    }

    /// Room in the graph for `more` vectors, grown geometrically (toward
    /// the whole copy at most).
    fn reserve_graph_for(&self, more: usize) -> Result<()> {
        let hnsw = self.hnsw.as_ref().expect("a graph");
        if hnsw.size() + more > hnsw.capacity() {
            let target = (hnsw.capacity().saturating_mul(2))
                .min(self.slot_ids.len())
                .max(hnsw.size() + more)
                .max(self.min_reserve());
            hnsw.reserve_capacity_and_threads(target, self.search_threads)
                .map_err(index_err)?;
        }
        Ok(())
    }

    /// After a chunk of the pending tail (`ids`, last first) went to the
    /// graph: drop it from `pending`, then, where the insert failed, put
    /// back the vectors the graph does not hold, in their old order.
    fn settle_chunk(&mut self, ids: &[NodeId], all_in: bool) {
        let keep = self.pending.len() - ids.len();
        self.pending.truncate(keep);
        for id in ids {
            self.pending_at.remove(id);
        }
        if all_in {
            return;
        }
        let hnsw = self.hnsw.as_ref().expect("a graph");
        let back: Vec<NodeId> = ids
            .iter()
            .rev()
            .copied()
            .filter(|&id| !hnsw.contains(id))
            .collect();
        for id in back {
            self.pending_at.insert(id, self.pending.len() as u32);
            self.pending.push(id);
        }
    }

    /// How many HNSW searches may run at once (usearch thread contexts).
    pub fn search_threads(&self) -> usize {
        self.search_threads
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.slots.contains_key(&id)
    }

    /// Check a vector without storing it: right dimension, all finite, non-zero norm.
    pub fn validate(&self, vector: &[f32]) -> Result<()> {
        if vector.len() != self.config.dim {
            return Err(Error::DimensionMismatch {
                expected: self.config.dim,
                got: vector.len(),
            });
        }
        // One pass without early exit, so it vectorises (a load checks every
        // stored vector); the bad component is looked up only on failure.
        // Finite components' squares neither overflow nor underflow in f64,
        // so the norm is zero exactly when every component is.
        let (finite, nonzero) = vector.iter().fold((true, false), |(finite, nonzero), &x| {
            (finite & x.is_finite(), nonzero | (x != 0.0))
        });
        if !finite {
            let i = vector.iter().position(|x| !x.is_finite()).unwrap_or(0);
            return Err(Error::invalid(format!(
                "embedding component {i} is not finite ({})",
                vector[i]
            )));
        }
        if !nonzero {
            return Err(Error::invalid("embedding has zero norm"));
        }
        Ok(())
    }

    /// Unit-normalised copy of a vector (after `validate`).
    pub fn normalize(vector: &[f32]) -> Vec<f32> {
        let n = norm(vector);
        if n == 0.0 || !n.is_finite() {
            return vector.to_vec();
        }
        // Divide in f64 so huge or tiny (but finite) inputs still come out unit length.
        vector.iter().map(|&x| (f64::from(x) / n) as f32).collect()
    }

    fn check_new_id(&self, id: NodeId) -> Result<()> {
        if id == NodeId::MAX {
            // usearch marks removed entries with the maximal key.
            return Err(Error::invalid("node id u64::MAX is reserved"));
        }
        if self.slots.contains_key(&id) {
            return Err(Error::invalid(format!("node {id} already has a vector")));
        }
        Ok(())
    }

    /// Store a vector under `id` (must not exist yet).
    pub fn add(&mut self, id: NodeId, vector: &[f32]) -> Result<()> {
        self.add_batch(&[(id, vector)])
    }

    /// Store many vectors, all or nothing. Large batches are inserted into the
    /// HNSW graph from several threads, so the graph's shape (not the exact
    /// scan) can differ from one-by-one insertion.
    pub fn add_batch(&mut self, items: &[(NodeId, &[f32])]) -> Result<()> {
        self.add_batch_with(items, |v| Cow::Owned(Self::normalize(v)))
    }

    /// `add_batch` for vectors read back from a snapshot: a stored vector that
    /// is already unit length is kept bit for bit (normalising it again can
    /// move its last bit, and save -> load -> save would not give the same
    /// file); any other is normalised as usual.
    pub(crate) fn add_batch_stored(&mut self, items: &[(NodeId, &[f32])]) -> Result<()> {
        self.add_batch_with(items, |v| {
            if is_unit_length(v) {
                Cow::Borrowed(v)
            } else {
                Cow::Owned(Self::normalize(v))
            }
        })
    }

    fn add_batch_with<'v>(
        &mut self,
        items: &[(NodeId, &'v [f32])],
        unit: impl Fn(&'v [f32]) -> Cow<'v, [f32]>,
    ) -> Result<()> {
        let mut batch_ids = std::collections::HashSet::with_capacity(items.len());
        for &(id, vector) in items {
            self.validate(vector)?;
            self.check_new_id(id)?;
            if items.len() > 1 && !batch_ids.insert(id) {
                return Err(Error::invalid(format!(
                    "node {id} appears twice in the batch"
                )));
            }
        }
        if self.slot_ids.len() + items.len() > u32::MAX as usize {
            return Err(Error::invalid("vector index is full"));
        }
        let units: Vec<(NodeId, Cow<'v, [f32]>)> =
            items.iter().map(|&(id, v)| (id, unit(v))).collect();
        let deferred = self.defer_graph && self.hnsw.is_some();
        if let Some(hnsw) = self.hnsw.as_ref().filter(|_| !deferred) {
            let needed = hnsw.size() + units.len();
            if needed > hnsw.capacity() {
                let target = needed
                    .max(hnsw.capacity().saturating_mul(2))
                    .max(self.min_reserve());
                hnsw.reserve_capacity_and_threads(target, self.search_threads)
                    .map_err(index_err)?;
            }
            let refs: Vec<(NodeId, &[f32])> =
                units.iter().map(|(id, u)| (*id, u.as_ref())).collect();
            if let Err(e) = insert_parallel(hnsw, self.insert_threads(), &refs) {
                // Roll back whatever made it in, so an Err changes nothing.
                for (id, _) in &refs {
                    if hnsw.contains(*id) {
                        let _ = hnsw.remove(*id);
                    }
                }
                return Err(e);
            }
        }
        // Our copy is updated only after usearch succeeded, so an Err leaves both unchanged.
        self.data.reserve(units.len() * self.config.dim);
        for (id, unit) in units {
            let slot = self.slot_ids.len() as u32;
            self.data.extend_from_slice(&unit);
            self.slot_ids.push(id);
            self.slots.insert(id, slot);
            if deferred {
                self.pending_at.insert(id, self.pending.len() as u32);
                self.pending.push(id);
            }
        }
        if let Err(e) = self.build_hnsw_if_due() {
            for &(id, _) in items {
                self.remove_from_copy(id);
            }
            return Err(e);
        }
        self.sync_expansion_search();
        Ok(())
    }

    /// Remove a vector; Ok(false) if `id` was not stored.
    pub fn remove(&mut self, id: NodeId) -> Result<bool> {
        let Some(&slot) = self.slots.get(&id) else {
            return Ok(false);
        };
        let _ = slot;
        // a pending vector never reached the graph (`remove_from_copy` drops it)
        if let Some(hnsw) = self
            .hnsw
            .as_ref()
            .filter(|_| !self.pending_at.contains_key(&id))
        {
            let removed = hnsw.remove(id).map_err(index_err)?;
            if removed != 1 {
                return Err(Error::Index(format!(
                    "usearch removed {removed} entries for node {id}, expected 1"
                )));
            }
        }
        self.remove_from_copy(id);
        self.sync_expansion_search();
        Ok(true)
    }

    /// Drop `id` from our copy (swap-remove keeps it contiguous).
    fn remove_from_copy(&mut self, id: NodeId) {
        let Some(slot) = self.slots.remove(&id) else {
            return;
        };
        if let Some(at) = self.pending_at.remove(&id) {
            let at = at as usize;
            self.pending.swap_remove(at);
            if let Some(&moved) = self.pending.get(at) {
                self.pending_at.insert(moved, at as u32);
            }
        }
        // Swap-remove: move the last row into the hole so the copy stays contiguous.
        let dim = self.config.dim;
        let slot = slot as usize;
        let last = self.slot_ids.len() - 1;
        if slot != last {
            self.data
                .copy_within(last * dim..(last + 1) * dim, slot * dim);
            let moved = self.slot_ids[last];
            self.slot_ids[slot] = moved;
            self.slots.insert(moved, slot as u32);
        }
        self.slot_ids.pop();
        self.data.truncate(last * dim);
    }

    fn row(&self, slot: usize) -> &[f32] {
        let dim = self.config.dim;
        &self.data[slot * dim..(slot + 1) * dim]
    }

    /// The stored unit-normalised vector of `id`.
    pub fn get(&self, id: NodeId) -> Option<&[f32]> {
        self.slots.get(&id).map(|&s| self.row(s as usize))
    }

    /// Cosine similarity between a unit-normalised query and a stored vector.
    /// None if `id` is not stored or the query has the wrong dimension.
    pub fn similarity(&self, unit_query: &[f32], id: NodeId) -> Option<f32> {
        if unit_query.len() != self.config.dim {
            return None;
        }
        self.get(id).map(|v| dot(unit_query, v))
    }

    /// [`VectorIndex::similarity`] of each of `ids`, in order (the same
    /// values, several rows at a time).
    pub fn similarities(&self, unit_query: &[f32], ids: &[NodeId]) -> Vec<Option<f32>> {
        if unit_query.len() != self.config.dim {
            return vec![None; ids.len()];
        }
        let found: Vec<Option<&[f32]>> = ids.iter().map(|&id| self.get(id)).collect();
        let rows: Vec<&[f32]> = found.iter().flatten().copied().collect();
        // rows scattered over a large index each miss the cache: ask for
        // all of them before the first is read, so the misses overlap
        for row in &rows {
            prefetch::slice(row);
        }
        let mut dots = DotKernel::detect().dots(unit_query, &rows).into_iter();
        found.iter().map(|r| r.and_then(|_| dots.next())).collect()
    }

    /// All stored vectors in ascending id (= insertion) order, for snapshots.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &[f32])> + '_ {
        // Swap-removals shuffle slots; sorting by id restores insertion order
        // (and is linear when nothing was removed, as slots are then already sorted).
        let mut order: Vec<u32> = (0..self.slot_ids.len() as u32).collect();
        order.sort_unstable_by_key(|&s| self.slot_ids[s as usize]);
        order.into_iter().map(move |s| {
            let s = s as usize;
            (self.slot_ids[s], self.row(s))
        })
    }

    /// Top-k by cosine similarity, best first, ties by smaller id.
    /// `accept` restricts the result (e.g. "inserted before node n").
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Result<Vec<(NodeId, f32)>> {
        self.validate(query)?;
        if k == 0 || self.is_empty() {
            return Ok(Vec::new());
        }
        // usearch allocates result buffers of k entries: never more than it holds
        let k = k.min(self.len());
        let unit = Self::normalize(query);
        match &self.hnsw {
            Some(hnsw) if self.len() >= self.config.exact_threshold => {
                if self.pending.is_empty() {
                    return self.hnsw_search(hnsw, &unit, k, accept);
                }
                if self.pending.len() * 2 >= self.len() {
                    // mostly pending: one contiguous scan of everything is
                    // about as cheap as visiting the pending rows by id, and exact
                    return Ok(self.exact_search(&unit, k, accept));
                }
                // the graph's best plus an exact scan of what it lacks yet
                let graphed = k.min(hnsw.size());
                let mut out = if graphed > 0 {
                    self.hnsw_search(hnsw, &unit, graphed, accept)?
                } else {
                    Vec::new()
                };
                DotKernel::detect().score_rows(
                    &unit,
                    self.pending
                        .iter()
                        .filter(|&&id| accept.is_none_or(|f| f(id)))
                        .map(|&id| (id, self.row(self.slots[&id] as usize))),
                    &mut out,
                );
                top_k(&mut out, k);
                Ok(out)
            }
            _ => Ok(self.exact_search(&unit, k, accept)),
        }
    }

    /// [`VectorIndex::search`] over the `allowed` ids only. A small allowed
    /// set (at most `exact_threshold` ids, or an eighth of the index) is
    /// scanned exactly, id by id: HNSW's filtered search walks the graph past
    /// every rejected node and loses recall when few pass. A large one goes
    /// through the filtered HNSW search like any other filter.
    pub fn search_scoped(
        &self,
        query: &[f32],
        k: usize,
        allowed: Option<&Allowed>,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Result<Vec<(NodeId, f32)>> {
        let Some(allowed) = allowed else {
            return self.search(query, k, accept);
        };
        self.validate(query)?;
        if k == 0 || self.is_empty() || allowed.is_empty() {
            return Ok(Vec::new());
        }
        let small = allowed.len() <= self.config.exact_threshold || allowed.len() * 8 <= self.len();
        if small || !self.uses_hnsw() {
            let unit = Self::normalize(query);
            let mut scored = Vec::new();
            DotKernel::detect().score_rows(
                &unit,
                allowed
                    .ids()
                    .iter()
                    .filter(|&&id| accept.is_none_or(|f| f(id)))
                    .filter_map(|&id| Some((id, self.get(id)?))),
                &mut scored,
            );
            top_k(&mut scored, k);
            return Ok(scored);
        }
        let both = |id: NodeId| allowed.contains(id) && accept.is_none_or(|f| f(id));
        self.search(query, k, Some(&both))
    }

    /// Exact top-k over our copy; always exact, whatever the size (exposed for
    /// benchmarks and callers that need ground truth).
    pub fn exact_search(
        &self,
        unit_query: &[f32],
        k: usize,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Vec<(NodeId, f32)> {
        if k == 0 || unit_query.len() != self.config.dim {
            return Vec::new();
        }
        let rows = self
            .slot_ids
            .iter()
            .zip(self.data.chunks_exact(self.config.dim));
        let mut scored = Vec::with_capacity(self.slot_ids.len());
        DotKernel::detect().score_rows(
            unit_query,
            rows.filter(|&(&id, _)| accept.is_none_or(|f| f(id)))
                .map(|(&id, row)| (id, row)),
            &mut scored,
        );
        top_k(&mut scored, k);
        scored
    }

    fn hnsw_search(
        &self,
        hnsw: &Index,
        unit: &[f32],
        k: usize,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Result<Vec<(NodeId, f32)>> {
        let matches = {
            let _pass = self.gate.enter();
            match accept {
                None => hnsw.search(unit, k),
                Some(accept) => {
                    // The filter runs inside C++ behind an `extern "C"` trampoline,
                    // where an unwinding panic would abort; catch it and re-raise here.
                    let panic = RefCell::new(None);
                    let filter = |id: u64| {
                        if panic.borrow().is_some() {
                            return false;
                        }
                        match catch_unwind(AssertUnwindSafe(|| accept(id))) {
                            Ok(ok) => ok,
                            Err(payload) => {
                                *panic.borrow_mut() = Some(payload);
                                false
                            }
                        }
                    };
                    let result = hnsw.filtered_search(unit, k, filter);
                    if let Some(payload) = panic.into_inner() {
                        resume_unwind(payload);
                    }
                    result
                }
            }
            .map_err(index_err)?
        };
        let rescore = self.config.quantization != Quantization::F32;
        let mut out: Vec<(NodeId, f32)> = matches
            .keys
            .iter()
            .zip(&matches.distances)
            .map(|(&id, &distance)| {
                let sim = if rescore {
                    // Quantized distances are lossy; our f32 copy gives the same
                    // score `similarity` and the exact path would.
                    self.similarity(unit, id).unwrap_or(1.0 - distance)
                } else {
                    1.0 - distance
                };
                (id, sim)
            })
            .collect();
        out.sort_unstable_by(rank_order);
        out.truncate(k);
        Ok(out)
    }

    /// Approximate heap bytes (our copy plus usearch's).
    pub fn memory_bytes(&self) -> usize {
        let map_entry = std::mem::size_of::<(NodeId, u32)>() + 1; // hashbrown: entry + control byte
        self.data.capacity() * std::mem::size_of::<f32>()
            + self.slot_ids.capacity() * std::mem::size_of::<NodeId>()
            + self.slots.capacity() * map_entry
            + self.pending.capacity() * std::mem::size_of::<NodeId>()
            + self.pending_at.capacity() * map_entry
            + self.hnsw.as_ref().map_or(0, Index::memory_usage)
    }
}

/// Insert into the graph from `threads` threads (contiguous chunks); usearch
/// synchronises concurrent inserts internally, each holding its own context.
/// A chunk of `build_pending`: `items` split among `threads` (one at a
/// time, in order, with one thread or fewer than two items per thread).
fn insert_chunk(index: &Index, threads: usize, items: &[(NodeId, &[f32])]) -> Result<()> {
    if threads <= 1 || items.len() < 2 * threads {
        for &(id, v) in items {
            index.add(id, v).map_err(index_err)?;
        }
        return Ok(());
    }
    insert_split(index, threads, items)
}

fn insert_parallel(index: &Index, threads: usize, items: &[(NodeId, &[f32])]) -> Result<()> {
    // Below this, thread start-up costs more than it saves.
    const MIN_PARALLEL: usize = 512;
    if threads <= 1 || items.len() < MIN_PARALLEL {
        for &(id, v) in items {
            index.add(id, v).map_err(index_err)?;
        }
        return Ok(());
    }
    insert_split(index, threads, items)
}

/// `items` inserted from `threads` scoped threads, a contiguous part each.
fn insert_split(index: &Index, threads: usize, items: &[(NodeId, &[f32])]) -> Result<()> {
    let chunk = items.len().div_ceil(threads);
    std::thread::scope(|scope| {
        let workers: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                scope.spawn(move || -> Result<()> {
                    for &(id, v) in part {
                        index.add(id, v).map_err(index_err)?;
                    }
                    Ok(())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| Err(Error::Index("an insert thread panicked".into())))
            })
            .collect::<Result<Vec<()>>>()
            .map(|_| ())
    })
}

/// Similarity desc, then id asc: a total order, so results are deterministic.
fn rank_order(a: &(NodeId, f32), b: &(NodeId, f32)) -> std::cmp::Ordering {
    b.1.total_cmp(&a.1).then(a.0.cmp(&b.0))
}

/// Keep the best `k` of `scored`, sorted: O(n) selection, then O(k log k).
fn top_k(scored: &mut Vec<(NodeId, f32)>, k: usize) {
    if scored.len() > k {
        scored.select_nth_unstable_by(k - 1, rank_order);
        scored.truncate(k);
    }
    scored.sort_unstable_by(rank_order);
}

/// Euclidean norm in f64, so squares of large or tiny finite floats neither overflow nor vanish.
/// Whether a vector is unit length within 1e-6. The squares are summed in
/// eight lanes, which vectorises (`norm`'s one running sum waits on each
/// add); the lanes' sum differs from the serial one by about 1e-14, far
/// inside the tolerance.
fn is_unit_length(v: &[f32]) -> bool {
    let mut lanes = [0f64; 8];
    let chunks = v.chunks_exact(8);
    let rest = chunks.remainder();
    for chunk in chunks {
        for (lane, &x) in lanes.iter_mut().zip(chunk) {
            *lane += f64::from(x) * f64::from(x);
        }
    }
    let sum = lanes.iter().sum::<f64>()
        + rest
            .iter()
            .map(|&x| f64::from(x) * f64::from(x))
            .sum::<f64>();
    (sum.sqrt() - 1.0).abs() <= 1e-6
}

fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt()
}

/// Dot product of two equally long slices, using AVX2+FMA when the CPU has it.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    DotKernel::detect().dot(a, b)
}

/// Which dot-product body to run; detected once per scan, not per row.
#[derive(Clone, Copy)]
pub(crate) enum DotKernel {
    Portable,
    #[cfg(target_arch = "x86_64")]
    Avx2Fma,
}

impl DotKernel {
    #[inline]
    pub(crate) fn detect() -> Self {
        #[cfg(target_arch = "x86_64")]
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return DotKernel::Avx2Fma;
        }
        DotKernel::Portable
    }

    #[inline]
    pub(crate) fn dot(self, a: &[f32], b: &[f32]) -> f32 {
        match self {
            DotKernel::Portable => dot_lanes::<false>(a, b),
            // SAFETY: `detect` only picks this variant when the CPU supports AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            DotKernel::Avx2Fma => unsafe { dot_avx2_fma(a, b) },
        }
    }

    /// `dot(a, row)` of each row, in order, into `out`: the values `dot`
    /// gives one at a time, bit for bit. Rows as long as `a` go through the
    /// kernel four at a time, sharing each load of `a`: a lone dot product
    /// is bound by the latency of its two accumulator chains, four give the
    /// core eight independent chains.
    pub(crate) fn dots_into(self, a: &[f32], rows: &[&[f32]], out: &mut Vec<f32>) {
        out.reserve(rows.len());
        let mut blocks = rows.chunks_exact(4);
        for block in &mut blocks {
            let block = [block[0], block[1], block[2], block[3]];
            if block.iter().all(|r| r.len() == a.len()) {
                out.extend(self.dot4(a, block));
            } else {
                out.extend(block.iter().map(|r| self.dot(a, r)));
            }
        }
        out.extend(blocks.remainder().iter().map(|r| self.dot(a, r)));
    }

    /// `(id, dot(a, row))` of each `(id, row)`, in order, appended to `out`:
    /// `dots_into` a block of rows at a time, so a scan of a large index holds
    /// no more than a block of row references beside its scores.
    pub(crate) fn score_rows<'r>(
        self,
        a: &[f32],
        rows: impl Iterator<Item = (NodeId, &'r [f32])>,
        out: &mut Vec<(NodeId, f32)>,
    ) {
        const BLOCK: usize = 256;
        let mut ids: Vec<NodeId> = Vec::with_capacity(BLOCK);
        let mut block: Vec<&[f32]> = Vec::with_capacity(BLOCK);
        let mut dots: Vec<f32> = Vec::with_capacity(BLOCK);
        let mut flush = |ids: &mut Vec<NodeId>, block: &mut Vec<&[f32]>| {
            dots.clear();
            self.dots_into(a, block, &mut dots);
            out.extend(ids.drain(..).zip(dots.iter().copied()));
            block.clear();
        };
        for (id, row) in rows {
            ids.push(id);
            block.push(row);
            if block.len() == BLOCK {
                flush(&mut ids, &mut block);
            }
        }
        if !block.is_empty() {
            flush(&mut ids, &mut block);
        }
    }

    /// `dots_into` as a new vector.
    pub(crate) fn dots(self, a: &[f32], rows: &[&[f32]]) -> Vec<f32> {
        let mut out = Vec::new();
        self.dots_into(a, rows, &mut out);
        out
    }

    /// Four rows, each as long as `a`.
    #[inline]
    fn dot4(self, a: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
        match self {
            DotKernel::Portable => rows.map(|r| dot_lanes::<false>(a, r)),
            // SAFETY: `detect` only picks this variant when the CPU supports AVX2 and FMA.
            #[cfg(target_arch = "x86_64")]
            DotKernel::Avx2Fma => unsafe { dot4_avx2_fma(a, rows) },
        }
    }
}

/// [`dot_lanes`] of four rows as long as `a` at once, with AVX2 and FMA:
/// each row's sixteen lanes are two 8-wide registers, updated in the order
/// `dot_lanes` updates its lanes, and summed as it sums them, so each value
/// is the one `dot_avx2_fma` gives. Written with intrinsics: left to
/// itself the compiler vectorises across the four rows (a shuffle per
/// step) instead of along them.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot4_avx2_fma(a: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
    use std::arch::x86_64::{__m256, _mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps};
    const LANES: usize = 16;
    let n = a.len();
    assert!(rows.iter().all(|r| r.len() == n));
    let whole = n - n % LANES;
    let mut lo: [__m256; 4] = [_mm256_setzero_ps(); 4];
    let mut hi: [__m256; 4] = [_mm256_setzero_ps(); 4];
    let mut at = 0;
    while at < whole {
        // SAFETY: at + LANES <= whole <= n, the length of `a` and of every row.
        unsafe {
            let xl = _mm256_loadu_ps(a.as_ptr().add(at));
            let xh = _mm256_loadu_ps(a.as_ptr().add(at + 8));
            for r in 0..4 {
                let p = rows[r].as_ptr().add(at);
                lo[r] = _mm256_fmadd_ps(xl, _mm256_loadu_ps(p), lo[r]);
                hi[r] = _mm256_fmadd_ps(xh, _mm256_loadu_ps(p.add(8)), hi[r]);
            }
        }
        at += LANES;
    }
    let mut out = [0.0f32; 4];
    for r in 0..4 {
        out[r] = finish_registers(lo[r], hi[r], &a[whole..], &rows[r][whole..]);
    }
    out
}

/// `finish_lanes` of the sixteen lanes held in two 8-wide registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
fn finish_registers(
    lo: std::arch::x86_64::__m256,
    hi: std::arch::x86_64::__m256,
    a_tail: &[f32],
    b_tail: &[f32],
) -> f32 {
    use std::arch::x86_64::_mm256_storeu_ps;
    let mut acc = [0.0f32; 16];
    // SAFETY: `acc` holds sixteen floats, two registers' worth.
    unsafe {
        _mm256_storeu_ps(acc.as_mut_ptr(), lo);
        _mm256_storeu_ps(acc.as_mut_ptr().add(8), hi);
    }
    finish_lanes(acc, a_tail, b_tail)
}

/// [`dot_lanes`] with AVX2 and FMA: its sixteen lanes are two 8-wide
/// registers, updated and summed in `dot_lanes`' order (so `dot4_avx2_fma`
/// gives the same bits). Written with intrinsics: the compiler vectorised
/// `dot_lanes` two lanes at a time (eight 2-wide multiply-adds and sixteen
/// 8-byte loads per sixteen floats) and ran about half as fast (54 against
/// 25 ns for 384 floats in cache), and a usearch graph calls this once per
/// distance.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_avx2_fma(a: &[f32], b: &[f32]) -> f32 {
    use std::arch::x86_64::{_mm256_fmadd_ps, _mm256_loadu_ps, _mm256_setzero_ps};
    const LANES: usize = 16;
    let n = a.len().min(b.len());
    let whole = n - n % LANES;
    let mut lo = _mm256_setzero_ps();
    let mut hi = _mm256_setzero_ps();
    let mut at = 0;
    while at < whole {
        // SAFETY: at + LANES <= whole <= n, the length of both slices at least.
        unsafe {
            let (x, y) = (a.as_ptr().add(at), b.as_ptr().add(at));
            lo = _mm256_fmadd_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(y), lo);
            hi = _mm256_fmadd_ps(_mm256_loadu_ps(x.add(8)), _mm256_loadu_ps(y.add(8)), hi);
        }
        at += LANES;
    }
    finish_registers(lo, hi, &a[whole..n], &b[whole..n])
}

/// 16 independent accumulators: float addition is not associative, so the
/// compiler only vectorizes a reduction that is already written lane-wise.
/// `FMA` selects `mul_add`, which is a single instruction only where FMA is
/// enabled. The portable kernel; with `FMA`, the reference whose bits
/// `dot_avx2_fma` and `dot4_avx2_fma` give.
#[inline(always)]
fn dot_lanes<const FMA: bool>(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    let mut ca = a.chunks_exact(LANES);
    let mut cb = b.chunks_exact(LANES);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for i in 0..LANES {
            acc[i] = if FMA {
                x[i].mul_add(y[i], acc[i])
            } else {
                acc[i] + x[i] * y[i]
            };
        }
    }
    finish_lanes(acc, ca.remainder(), cb.remainder())
}

/// A dot product's end, shared by both kernels: the elements past the last
/// whole chunk summed in order, the sixteen lanes summed pairwise, then both.
#[inline(always)]
fn finish_lanes(mut acc: [f32; 16], a_tail: &[f32], b_tail: &[f32]) -> f32 {
    let mut tail = 0.0f32;
    for (x, y) in a_tail.iter().zip(b_tail) {
        tail += x * y;
    }
    let mut width = acc.len() / 2;
    while width > 0 {
        for i in 0..width {
            acc[i] += acc[i + width];
        }
        width /= 2;
    }
    acc[0] + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, HashSet};

    /// splitmix64: deterministic test data without extra dependencies.
    struct Rng(u64);
    impl Rng {
        fn next_u64(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn unit_f32(&mut self) -> f32 {
            (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        }
        fn vector(&mut self, dim: usize) -> Vec<f32> {
            (0..dim).map(|_| self.unit_f32()).collect()
        }
    }

    fn config(dim: usize, exact_threshold: usize) -> VectorConfig {
        VectorConfig {
            exact_threshold,
            ..VectorConfig::new(dim)
        }
    }

    fn filled(cfg: VectorConfig, n: usize, seed: u64) -> VectorIndex {
        let mut rng = Rng(seed);
        let mut index = VectorIndex::new(cfg).unwrap();
        for id in 0..n as u64 {
            index.add(id, &rng.vector(cfg.dim)).unwrap();
        }
        index
    }

    fn recall(
        index: &VectorIndex,
        queries: &[Vec<f32>],
        k: usize,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> f64 {
        let mut hits = 0;
        let mut total = 0;
        for q in queries {
            let unit = VectorIndex::normalize(q);
            let truth: HashSet<NodeId> = index
                .exact_search(&unit, k, accept)
                .into_iter()
                .map(|(id, _)| id)
                .collect();
            let got = index.search(q, k, accept).unwrap();
            assert!(got.len() <= k);
            assert!(
                got.windows(2).all(|w| rank_order(&w[0], &w[1]).is_lt()),
                "unsorted: {got:?}"
            );
            if let Some(accept) = accept {
                assert!(got.iter().all(|&(id, _)| accept(id)), "filter violated");
            }
            hits += got.iter().filter(|(id, _)| truth.contains(id)).count();
            total += truth.len();
        }
        hits as f64 / total as f64
    }

    #[test]
    fn config_validation() {
        assert!(VectorConfig::new(384).validate().is_ok());
        for bad in [
            VectorConfig::new(0),
            VectorConfig {
                connectivity: 1,
                ..VectorConfig::new(8)
            },
            VectorConfig {
                expansion_add: 0,
                ..VectorConfig::new(8)
            },
            VectorConfig {
                expansion_search: SearchExpansion::Fixed(0),
                ..VectorConfig::new(8)
            },
            VectorConfig {
                expansion_search: SearchExpansion::Fixed(MAX_EXPANSION + 1),
                ..VectorConfig::new(8)
            },
        ] {
            assert!(
                matches!(VectorIndex::new(bad), Err(Error::InvalidConfig(_))),
                "{bad:?}"
            );
        }
        assert!(VectorIndex::with_search_threads(VectorConfig::new(8), 0).is_err());
    }

    #[test]
    fn expansion_search_changes_on_a_live_graph() {
        let mut rng = Rng(5);
        let mut index = filled(config(16, 0), 400, 3);
        assert!(index.uses_hnsw());
        let query = rng.vector(16);
        let exact = index.exact_search(&VectorIndex::normalize(&query), 10, None);
        // at the largest ef the graph search visits every node: the exact answer
        index
            .set_expansion_search(SearchExpansion::Fixed(4096))
            .unwrap();
        assert_eq!(index.expansion_search(), 4096);
        assert_eq!(index.hnsw.as_ref().unwrap().expansion_search(), 4096);
        let wide = index.search(&query, 10, None).unwrap();
        assert_eq!(
            wide.iter().map(|h| h.0).collect::<Vec<_>>(),
            exact.iter().map(|h| h.0).collect::<Vec<_>>()
        );
        for bad in [0, MAX_EXPANSION + 1] {
            assert!(matches!(
                index.set_expansion_search(SearchExpansion::Fixed(bad)),
                Err(Error::InvalidConfig(_))
            ));
            assert_eq!(
                index.expansion_search(),
                4096,
                "a refused value changes nothing"
            );
        }
        // an index still in the exact tier keeps the value for its graph
        let mut small = VectorIndex::new(config(16, 1_000)).unwrap();
        small
            .set_expansion_search(SearchExpansion::Fixed(32))
            .unwrap();
        for id in 0..1_000 {
            small.add(id, &rng.vector(16)).unwrap();
        }
        assert!(small.uses_hnsw());
        assert_eq!(small.hnsw.as_ref().unwrap().expansion_search(), 32);
    }

    #[test]
    fn the_growing_expansion_follows_the_size() {
        let grows = SearchExpansion::Grows;
        assert_eq!(grows.at(0), GROWING_EF_BASE);
        assert_eq!(grows.at(GROWING_EF_FROM), GROWING_EF_BASE);
        assert_eq!(grows.at(GROWING_EF_FROM + 1), GROWING_EF_BASE + 16);
        assert_eq!(grows.at(500_000), 192); // 181.02 rounded up to 16s
        assert_eq!(grows.at(1_000_000), 256);
        assert_eq!(grows.at(4_000_000), 512);
        assert_eq!(grows.at(usize::MAX), MAX_EXPANSION);
        let mut last = 0;
        for len in (0..20_000_000).step_by(99_991) {
            let ef = grows.at(len);
            assert!(ef >= last && ef.is_multiple_of(16) && ef <= MAX_EXPANSION);
            last = ef;
        }
        assert_eq!(SearchExpansion::Fixed(64).at(10_000_000), 64);
        // stored as one integer: 0 is the growing one, the format unchanged
        for e in [
            grows,
            SearchExpansion::Fixed(1),
            SearchExpansion::Fixed(128),
        ] {
            let bytes = postcard::to_stdvec(&e).unwrap();
            assert_eq!(bytes, postcard::to_stdvec(&usize::from(e)).unwrap());
            assert_eq!(postcard::from_bytes::<SearchExpansion>(&bytes).unwrap(), e);
        }
        assert_eq!(
            postcard::from_bytes::<SearchExpansion>(&postcard::to_stdvec(&128usize).unwrap())
                .unwrap(),
            SearchExpansion::Fixed(128)
        );
    }

    #[test]
    fn a_live_graph_takes_the_growing_ef_as_it_grows_and_shrinks() {
        // Past GROWING_EF_FROM for real, cheaply: a deferred graph keeps the
        // vectors in our copy (not inserted), but its ef follows the size.
        let mut index = VectorIndex::new(config(2, 0)).unwrap();
        index.set_defer_graph(true);
        let hnsw_ef = |ix: &VectorIndex| ix.hnsw.as_ref().unwrap().expansion_search();
        let rows: Vec<[f32; 2]> = (0..1_000_000u64).map(|i| [1.0, i as f32]).collect();
        for (c, chunk) in rows.chunks(100_000).enumerate() {
            let items: Vec<(NodeId, &[f32])> = chunk
                .iter()
                .enumerate()
                .map(|(j, r)| ((c * 100_000 + j) as NodeId, r.as_slice()))
                .collect();
            index.add_batch(&items).unwrap();
            assert_eq!(hnsw_ef(&index), SearchExpansion::Grows.at(index.len()));
        }
        assert_eq!(hnsw_ef(&index), 256);
        for id in 250_000..1_000_000 {
            index.remove(id).unwrap();
        }
        assert_eq!(hnsw_ef(&index), GROWING_EF_BASE);

        let mut index = filled(config(8, 0), 50, 1);
        let hnsw_ef = |ix: &VectorIndex| ix.hnsw.as_ref().unwrap().expansion_search();
        assert_eq!(index.config().expansion_search, SearchExpansion::Grows);
        assert_eq!(hnsw_ef(&index), GROWING_EF_BASE);
        index
            .set_expansion_search(SearchExpansion::Fixed(40))
            .unwrap();
        assert_eq!(hnsw_ef(&index), 40);
        index.add(1_000, &[1.0; 8]).unwrap();
        assert_eq!(hnsw_ef(&index), 40);
        index.remove(1_000).unwrap();
        index.set_expansion_search(SearchExpansion::Grows).unwrap();
        assert_eq!(hnsw_ef(&index), GROWING_EF_BASE);
    }

    #[test]
    fn invalid_vectors_leave_index_unchanged() {
        let mut index = VectorIndex::new(VectorConfig::new(4)).unwrap();
        index.add(0, &[1.0, 2.0, 3.0, 4.0]).unwrap();
        let before: Vec<(NodeId, Vec<f32>)> = index.iter().map(|(i, v)| (i, v.to_vec())).collect();

        let check_unchanged = |index: &VectorIndex| {
            let now: Vec<(NodeId, Vec<f32>)> = index.iter().map(|(i, v)| (i, v.to_vec())).collect();
            assert_eq!(now, before);
            assert_eq!(index.len(), 1);
            assert!(index.hnsw.as_ref().is_none_or(|h| h.size() == 1));
        };

        assert!(matches!(
            index.add(1, &[1.0, 2.0, 3.0]),
            Err(Error::DimensionMismatch {
                expected: 4,
                got: 3
            })
        ));
        check_unchanged(&index);
        for bad in [
            [f32::NAN, 0.0, 0.0, 1.0],
            [f32::INFINITY, 0.0, 0.0, 1.0],
            [0.0, f32::NEG_INFINITY, 0.0, 1.0],
            [0.0; 4],
        ] {
            assert!(
                matches!(index.add(1, &bad), Err(Error::InvalidInput(_))),
                "{bad:?}"
            );
            assert!(matches!(
                index.search(&bad, 3, None),
                Err(Error::InvalidInput(_))
            ));
            check_unchanged(&index);
        }
        assert!(matches!(
            index.search(&[1.0; 5], 3, None),
            Err(Error::DimensionMismatch { .. })
        ));
        // Duplicate id: error, and the stored vector stays the old one.
        assert!(matches!(
            index.add(0, &[0.0, 0.0, 0.0, 1.0]),
            Err(Error::InvalidInput(_))
        ));
        check_unchanged(&index);
        assert!(matches!(
            index.add(u64::MAX, &[1.0; 4]),
            Err(Error::InvalidInput(_))
        ));
        check_unchanged(&index);
        assert!(!index.contains(1));
        assert!(index.get(1).is_none());
    }

    #[test]
    fn stores_unit_vectors() {
        let mut index = VectorIndex::new(VectorConfig::new(3)).unwrap();
        index.add(7, &[3.0, 0.0, 4.0]).unwrap();
        index.add(8, &[1e30, 1e30, 0.0]).unwrap(); // squares overflow f32
        index.add(9, &[1e-30, 0.0, 0.0]).unwrap(); // squares underflow f32
        assert_eq!(index.get(7).unwrap(), &[0.6, 0.0, 0.8]);
        for id in [7, 8, 9] {
            let n: f32 = index.get(id).unwrap().iter().map(|x| x * x).sum();
            assert!((n - 1.0).abs() < 1e-6, "{id}: {n}");
        }
        let q = VectorIndex::normalize(&[0.0, 0.0, 2.0]);
        assert!((index.similarity(&q, 7).unwrap() - 0.8).abs() < 1e-6);
        assert!(index.similarity(&q, 1).is_none());
        assert!(index.similarity(&[1.0], 7).is_none());
        assert_eq!(index.search(&[0.0, 0.0, 1.0], 0, None).unwrap(), vec![]);
        let ids: Vec<NodeId> = index.iter().map(|(id, _)| id).collect();
        assert_eq!(ids, vec![7, 8, 9]);
        assert!(index.memory_bytes() >= 3 * 3 * 4);
    }

    #[test]
    fn dot_kernels_agree() {
        let mut rng = Rng(5);
        for len in [0, 1, 15, 16, 17, 64, 383, 384] {
            let a = rng.vector(len);
            let b = rng.vector(len);
            let naive: f64 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| f64::from(*x) * f64::from(*y))
                .sum();
            assert!((f64::from(dot(&a, &b)) - naive).abs() < 1e-4, "{len}");
            assert!(
                (f64::from(dot_lanes::<false>(&a, &b)) - naive).abs() < 1e-4,
                "{len}"
            );
        }
    }

    proptest! {
        /// Rows four at a time give each row the bits `dot` gives it alone,
        /// with either kernel, whatever the lengths (rows of another length
        /// than the query's fall back to `dot`) and the number of rows.
        #[test]
        fn dots_are_dot_row_by_row_bit_for_bit(
            len in prop_oneof![0usize..40, Just(384usize), 370usize..400],
            rows in 0usize..11,
            odd in prop::option::of(0usize..11),
            seed in any::<u64>(),
        ) {
            let mut rng = Rng(seed);
            let a = rng.vector(len);
            let data: Vec<Vec<f32>> = (0..rows)
                .map(|i| rng.vector(if Some(i) == odd { len + 1 } else { len }))
                .collect();
            let refs: Vec<&[f32]> = data.iter().map(Vec::as_slice).collect();
            let kernels = [Some(DotKernel::Portable), Some(DotKernel::detect())];
            for kernel in kernels.into_iter().flatten() {
                let got = kernel.dots(&a, &refs);
                let want: Vec<f32> = refs.iter().map(|r| kernel.dot(&a, r)).collect();
                prop_assert_eq!(
                    got.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                    want.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
                );
            }
        }
    }

    proptest! {
        /// The AVX2 kernel gives the bits of its reference, `dot_lanes` with
        /// FMA (lane by lane in order, summed pairwise), for any lengths,
        /// unequal ones too (both read the shorter length).
        #[test]
        #[cfg(target_arch = "x86_64")]
        fn avx2_dot_is_its_reference_bit_for_bit(
            len in prop_oneof![0usize..70, Just(384usize), 370usize..400],
            extra in 0usize..3,
            seed in any::<u64>(),
        ) {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                let mut rng = Rng(seed);
                let a = rng.vector(len);
                let b = rng.vector(len + extra);
                // SAFETY: the CPU has AVX2 and FMA (checked above).
                let got = unsafe { dot_avx2_fma(&a, &b) };
                prop_assert_eq!(got.to_bits(), dot_lanes::<true>(&a, &b).to_bits());
                let swapped = unsafe { dot_avx2_fma(&b, &a) };
                prop_assert_eq!(swapped.to_bits(), dot_lanes::<true>(&b, &a).to_bits());
            }
        }
    }

    proptest! {
        /// Scoring rows a block at a time gives each `(id, dot)` in order,
        /// to the bit, across block boundaries.
        #[test]
        fn score_rows_are_dot_row_by_row(rows in 0usize..700, seed in any::<u64>()) {
            let mut rng = Rng(seed);
            let a = rng.vector(24);
            let data: Vec<Vec<f32>> = (0..rows).map(|_| rng.vector(24)).collect();
            let kernel = DotKernel::detect();
            let mut got = vec![(u64::MAX, 0.0)];
            kernel.score_rows(&a, data.iter().enumerate().map(|(i, r)| (i as NodeId, r.as_slice())), &mut got);
            prop_assert_eq!(got.len(), rows + 1);
            for (i, (id, d)) in got[1..].iter().enumerate() {
                prop_assert_eq!(*id, i as NodeId);
                prop_assert_eq!(d.to_bits(), kernel.dot(&a, &data[i]).to_bits());
            }
        }
    }

    proptest! {
        /// `similarities` gives each id, in order, the bits `similarity`
        /// gives it alone: stored, removed and never-seen ids, repeats, any
        /// number of them, and a query of the wrong length (all None).
        #[test]
        fn similarities_are_similarity_id_by_id(
            dim in prop_oneof![Just(5usize), Just(384usize)],
            stored in 0usize..40,
            removed in prop::collection::vec(0u64..50, 0..10),
            asked in prop::collection::vec(0u64..50, 0..30),
            wrong_length in any::<bool>(),
            seed in any::<u64>(),
        ) {
            let mut rng = Rng(seed);
            let mut index = VectorIndex::new(config(dim, usize::MAX)).unwrap();
            for id in 0..stored as NodeId {
                index.add(id, &rng.vector(dim)).unwrap();
            }
            for id in removed {
                index.remove(id).unwrap();
            }
            let query = VectorIndex::normalize(&rng.vector(if wrong_length { dim + 1 } else { dim }));
            let got = index.similarities(&query, &asked);
            let want: Vec<Option<f32>> = asked.iter().map(|&id| index.similarity(&query, id)).collect();
            prop_assert_eq!(
                got.iter().map(|x| x.map(f32::to_bits)).collect::<Vec<_>>(),
                want.iter().map(|x| x.map(f32::to_bits)).collect::<Vec<_>>()
            );
        }
    }

    /// Operations for the exact-mode model check: small integer components make exact ties likely.
    #[derive(Clone, Debug)]
    enum Op {
        Add(Vec<i8>),
        Remove(usize),
    }

    fn op(dim: usize) -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => prop::collection::vec(-2i8..=2, dim).prop_map(Op::Add),
            1 => (0usize..64).prop_map(Op::Remove),
        ]
    }

    /// The check `validate` made before its one-pass form: the first
    /// non-finite component, then the f64 norm against zero.
    fn validate_by_norm(vector: &[f32]) -> std::result::Result<(), String> {
        if let Some(i) = vector.iter().position(|x| !x.is_finite()) {
            return Err(format!(
                "embedding component {i} is not finite ({})",
                vector[i]
            ));
        }
        if norm(vector) == 0.0 {
            return Err("embedding has zero norm".into());
        }
        Ok(())
    }

    fn component() -> impl Strategy<Value = f32> {
        prop_oneof![
            Just(0.0f32),
            Just(-0.0f32),
            Just(f32::NAN),
            Just(f32::INFINITY),
            Just(f32::NEG_INFINITY),
            Just(f32::MAX),
            Just(f32::MIN_POSITIVE / 4.0),
            Just(f32::from_bits(1)),
            -2.0f32..2.0,
        ]
    }

    proptest! {
        /// The lane-summed unit check agrees with the serial norm except
        /// within 1e-12 of the tolerance, and every normalised vector passes.
        #[test]
        fn unit_length_check_matches_the_serial_norm(
            vector in prop::collection::vec(-2.0f32..2.0, 1..40),
            scale in prop_oneof![Just(1.0f64), 1.0f64 - 3e-6..1.0 + 3e-6, 0.5f64..2.0],
        ) {
            let n = norm(&vector);
            prop_assume!(n > 0.0);
            let scaled: Vec<f32> = vector.iter().map(|&x| (f64::from(x) / n * scale) as f32).collect();
            let off = (norm(&scaled) - 1.0).abs();
            if off <= 1e-6 - 1e-12 {
                prop_assert!(is_unit_length(&scaled));
            } else if off > 1e-6 + 1e-12 {
                prop_assert!(!is_unit_length(&scaled));
            }
            prop_assert!(is_unit_length(&VectorIndex::normalize(&vector)));
        }
    }

    proptest! {
        /// The one-pass check accepts and refuses exactly what the norm-based
        /// check did, with the same message (extremes and subnormals included).
        #[test]
        fn validate_matches_the_norm_check(
            vector in prop::collection::vec(prop_oneof![4 => Just(0.0f32), 1 => component()], 5),
        ) {
            let index = VectorIndex::new(config(5, usize::MAX)).unwrap();
            let got = index.validate(&vector).map_err(|e| match e {
                Error::InvalidInput(m) => m,
                other => other.to_string(),
            });
            prop_assert_eq!(got, validate_by_norm(&vector));
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        #[test]
        fn exact_search_matches_brute_force(
            ops in prop::collection::vec(op(6), 0..80),
            queries in prop::collection::vec(prop::collection::vec(-2i8..=2, 6), 1..4),
            k in 0usize..20,
            modulus in 1u64..4,
            filtered in any::<bool>(),
        ) {
            let mut index = VectorIndex::new(config(6, usize::MAX)).unwrap();
            let mut model: BTreeMap<NodeId, Vec<f32>> = BTreeMap::new();
            let mut next_id = 0;
            for op in ops {
                match op {
                    Op::Add(v) => {
                        let v: Vec<f32> = v.into_iter().map(f32::from).collect();
                        let ok = index.add(next_id, &v).is_ok();
                        prop_assert_eq!(ok, v.iter().any(|&x| x != 0.0));
                        if ok {
                            model.insert(next_id, VectorIndex::normalize(&v));
                        }
                        next_id += 1;
                    }
                    Op::Remove(i) => {
                        let id = i as u64 % (next_id + 1);
                        prop_assert_eq!(index.remove(id).unwrap(), model.remove(&id).is_some());
                    }
                }
            }
            prop_assert_eq!(index.len(), model.len());
            let stored: Vec<(NodeId, Vec<f32>)> = index.iter().map(|(i, v)| (i, v.to_vec())).collect();
            let expected: Vec<(NodeId, Vec<f32>)> = model.clone().into_iter().collect();
            prop_assert_eq!(stored, expected);

            let accept = move |id: NodeId| id.is_multiple_of(modulus);
            let filter: Option<&dyn Fn(NodeId) -> bool> = if filtered { Some(&accept) } else { None };
            for q in queries {
                let q: Vec<f32> = q.into_iter().map(f32::from).collect();
                if q.iter().all(|&x| x == 0.0) {
                    prop_assert!(index.search(&q, k, filter).is_err());
                    continue;
                }
                let unit = VectorIndex::normalize(&q);
                // Reference: score everything with the same dot product, full sort.
                let mut reference: Vec<(NodeId, f32)> = model
                    .iter()
                    .filter(|(&id, _)| filter.is_none_or(|f| f(id)))
                    .map(|(&id, v)| (id, dot(&unit, v)))
                    .collect();
                reference.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
                reference.truncate(k);
                prop_assert_eq!(index.search(&q, k, filter).unwrap(), reference);
                // Scoped to an allowed set (the filter's ids, some of them
                // removed or never added): rank all, keep the allowed ones.
                let allowed = Allowed::from_sorted((0..next_id + 2).filter(|&id| accept(id)).collect());
                let mut kept: Vec<(NodeId, f32)> = model
                    .iter()
                    .filter(|(&id, _)| allowed.contains(id))
                    .map(|(&id, v)| (id, dot(&unit, v)))
                    .collect();
                kept.sort_by(|a, b| b.1.partial_cmp(&a.1).unwrap().then(a.0.cmp(&b.0)));
                kept.truncate(k);
                prop_assert_eq!(index.search_scoped(&q, k, Some(&allowed), None).unwrap(), kept);
            }
        }
    }

    #[test]
    fn scoped_search_on_hnsw_stays_inside() {
        // A large allowed set goes through filtered HNSW, a small one is
        // scanned exactly: both return allowed ids only, the small one exactly.
        let index = filled(config(32, 0), 3000, 7);
        let mut rng = Rng(5);
        let large = Allowed::from_sorted((0..3000).filter(|id| id % 2 == 0).collect());
        let small = Allowed::from_sorted((0..3000).filter(|id| id % 97 == 3).collect());
        for _ in 0..20 {
            let q = rng.vector(32);
            let got = index.search_scoped(&q, 10, Some(&large), None).unwrap();
            assert_eq!(got.len(), 10);
            assert!(got.iter().all(|&(id, _)| large.contains(id)));
            let unit = VectorIndex::normalize(&q);
            let accept = |id: NodeId| small.contains(id);
            assert_eq!(
                index.search_scoped(&q, 10, Some(&small), None).unwrap(),
                index.exact_search(&unit, 10, Some(&accept))
            );
        }
    }

    #[test]
    fn hnsw_recall_and_filters() {
        let index = filled(config(64, 0), 5000, 1);
        let mut rng = Rng(99);
        let queries: Vec<Vec<f32>> = (0..200).map(|_| rng.vector(64)).collect();
        let r = recall(&index, &queries, 10, None);
        assert!(r >= 0.95, "recall@10 = {r}");

        let even = |id: NodeId| id.is_multiple_of(2);
        let r = recall(&index, &queries, 10, Some(&even));
        assert!(r >= 0.9, "filtered recall@10 = {r}");
        let rare = |id: NodeId| id % 97 == 3;
        let got = index.search(&queries[0], 10, Some(&rare)).unwrap();
        assert!(got.iter().all(|&(id, _)| rare(id)));
        let none = |_: NodeId| false;
        assert!(index
            .search(&queries[0], 10, Some(&none))
            .unwrap()
            .is_empty());

        // Scores are cosine similarities of the stored copies.
        let unit = VectorIndex::normalize(&queries[1]);
        for (id, sim) in index.search(&queries[1], 10, None).unwrap() {
            assert!((sim - index.similarity(&unit, id).unwrap()).abs() < 1e-4);
        }
    }

    #[test]
    fn quantized_indexes_work() {
        for quantization in [Quantization::F16, Quantization::I8] {
            let cfg = VectorConfig {
                quantization,
                ..config(32, 0)
            };
            let index = filled(cfg, 2000, 2);
            let mut rng = Rng(2);
            let stored: Vec<Vec<f32>> = (0..50).map(|_| rng.vector(32)).collect();
            for (id, v) in stored.iter().enumerate() {
                let got = index.search(v, 5, None).unwrap();
                assert_eq!(got[0].0, id as u64, "{quantization:?}");
                assert!((got[0].1 - 1.0).abs() < 1e-5);
            }
            let queries: Vec<Vec<f32>> = (0..100).map(|_| rng.vector(32)).collect();
            let r = recall(&index, &queries, 10, None);
            assert!(r >= 0.8, "{quantization:?}: recall@10 = {r}");
        }
    }

    #[test]
    fn removed_ids_never_come_back() {
        for threshold in [0, usize::MAX] {
            let mut index = filled(config(16, threshold), 3000, 3);
            let mut rng = Rng(4);
            let mut removed = HashSet::new();
            for id in 0..3000u64 {
                if rng.next_u64().is_multiple_of(2) {
                    assert!(index.remove(id).unwrap());
                    removed.insert(id);
                }
            }
            assert!(!index.remove(*removed.iter().next().unwrap()).unwrap());
            assert_eq!(index.len(), 3000 - removed.len());
            assert!(index.hnsw.as_ref().is_none_or(|h| h.size() == index.len()));
            // Query with the removed vectors themselves: their nearest neighbours are gone.
            let mut data = Rng(3);
            for id in 0..3000u64 {
                let v = data.vector(16);
                if !removed.contains(&id) {
                    continue;
                }
                assert!(index.get(id).is_none());
                for (got, _) in index.search(&v, 10, None).unwrap() {
                    assert!(!removed.contains(&got), "removed {got} returned");
                }
            }
            // Slots freed by removal are reused by new ids.
            for id in 3000..3100u64 {
                index.add(id, &rng.vector(16)).unwrap();
                let v = index.get(id).unwrap().to_vec();
                assert_eq!(index.search(&v, 1, None).unwrap()[0].0, id);
            }
            let ids: Vec<NodeId> = index.iter().map(|(id, _)| id).collect();
            assert!(ids.windows(2).all(|w| w[0] < w[1]));
            assert_eq!(ids.len(), index.len());
        }
    }

    #[test]
    fn concurrent_searches() {
        // 2 usearch contexts, 8 searching threads: extra callers must wait, never fail.
        let cfg = config(32, 0);
        let mut rng = Rng(6);
        let mut index = VectorIndex::with_search_threads(cfg, 2).unwrap();
        for id in 0..3000u64 {
            index.add(id, &rng.vector(32)).unwrap();
        }
        let queries: Vec<Vec<f32>> = (0..64).map(|_| rng.vector(32)).collect();
        let odd = |id: NodeId| id % 2 == 1;
        let expected: Vec<_> = queries
            .iter()
            .map(|q| {
                (
                    index.search(q, 10, None).unwrap(),
                    index.search(q, 10, Some(&odd)).unwrap(),
                )
            })
            .collect();
        let index = &index;
        std::thread::scope(|s| {
            for t in 0..8 {
                let (queries, expected) = (&queries, &expected);
                s.spawn(move || {
                    for round in 0..10 {
                        for (i, q) in queries.iter().enumerate().skip((t + round) % 3) {
                            let odd = |id: NodeId| id % 2 == 1;
                            assert_eq!(index.search(q, 10, None).unwrap(), expected[i].0);
                            assert_eq!(index.search(q, 10, Some(&odd)).unwrap(), expected[i].1);
                        }
                    }
                });
            }
        });
    }

    #[test]
    fn panicking_filter_propagates_and_index_survives() {
        let mut index = VectorIndex::with_search_threads(config(8, 0), 1).unwrap();
        let mut rng = Rng(8);
        for id in 0..200u64 {
            index.add(id, &rng.vector(8)).unwrap();
        }
        let q = rng.vector(8);
        let boom = |_: NodeId| -> bool { panic!("filter failed") };
        let caught =
            std::panic::catch_unwind(AssertUnwindSafe(|| index.search(&q, 5, Some(&boom))));
        assert!(caught.is_err());
        // The single context and gate permit were released.
        assert_eq!(index.search(&q, 5, None).unwrap().len(), 5);
    }

    #[test]
    fn graph_is_built_lazily_in_parallel_and_batches_are_atomic() {
        let mut cfg = VectorConfig::new(32);
        cfg.exact_threshold = 1000;
        let mut index = VectorIndex::new(cfg).unwrap();
        let mut rng = Rng(11);
        let vectors: Vec<Vec<f32>> = (0..3000).map(|_| rng.vector(32)).collect();
        let first: Vec<(NodeId, &[f32])> = (0..999u64)
            .map(|i| (i, vectors[i as usize].as_slice()))
            .collect();
        index.add_batch(&first).unwrap();
        assert!(index.hnsw.is_none() && !index.uses_hnsw());

        // A bad batch (duplicate id) changes nothing and builds nothing.
        let dup: Vec<(NodeId, &[f32])> = vec![(999, &vectors[999]), (999, &vectors[1000])];
        assert!(index.add_batch(&dup).is_err());
        assert_eq!(index.len(), 999);
        assert!(index.hnsw.is_none());

        let rest: Vec<(NodeId, &[f32])> = (999..3000u64)
            .map(|i| (i, vectors[i as usize].as_slice()))
            .collect();
        index.add_batch(&rest).unwrap();
        assert!(index.uses_hnsw());
        assert_eq!(index.hnsw.as_ref().unwrap().size(), 3000);
        let mut hits = 0;
        let mut q = Rng(12);
        for _ in 0..50 {
            let v = q.vector(32);
            let unit = VectorIndex::normalize(&v);
            let exact: HashSet<NodeId> = index
                .exact_search(&unit, 10, None)
                .into_iter()
                .map(|x| x.0)
                .collect();
            hits += index
                .search(&v, 10, None)
                .unwrap()
                .iter()
                .filter(|x| exact.contains(&x.0))
                .count();
        }
        assert!(
            hits as f64 / 500.0 >= 0.95,
            "recall {}",
            hits as f64 / 500.0
        );
    }

    /// The graph holds exactly the stored ids that are not pending.
    fn assert_graph_split(index: &VectorIndex) {
        let Some(hnsw) = &index.hnsw else {
            assert!(index.pending.is_empty());
            return;
        };
        assert_eq!(hnsw.size() + index.pending.len(), index.len());
        assert_eq!(index.pending.len(), index.pending_at.len());
        for (at, id) in index.pending.iter().enumerate() {
            assert_eq!(index.pending_at[id] as usize, at);
            assert!(index.contains(*id) && !hnsw.contains(*id), "{id}");
        }
        for &id in &index.slot_ids {
            assert!(
                index.pending_at.contains_key(&id) || hnsw.contains(id),
                "{id}"
            );
        }
    }

    #[test]
    fn deferred_load_answers_exactly_then_builds_the_graph() {
        let (n, dim) = (5000usize, 32);
        let mut rng = Rng(41);
        let vectors: Vec<Vec<f32>> = (0..n).map(|_| rng.vector(dim)).collect();
        let mut index = VectorIndex::new(config(dim, 4096)).unwrap();
        index.set_defer_graph(true);
        for chunk in vectors.chunks(700).enumerate() {
            let items: Vec<(NodeId, &[f32])> = chunk
                .1
                .iter()
                .enumerate()
                .map(|(i, v)| ((chunk.0 * 700 + i) as NodeId, v.as_slice()))
                .collect();
            index.add_batch(&items).unwrap();
        }
        index.set_defer_graph(false);
        // past the threshold: a graph exists, empty, with everything pending
        assert!(index.uses_hnsw());
        assert_eq!(index.pending_graph(), n);
        assert_graph_split(&index);
        let mut q = Rng(7);
        let queries: Vec<Vec<f32>> = (0..20).map(|_| q.vector(dim)).collect();
        for v in &queries {
            let unit = VectorIndex::normalize(v);
            assert_eq!(
                index.search(v, 10, None).unwrap(),
                index.exact_search(&unit, 10, None)
            );
        }
        // a write while vectors are pending goes into the graph directly
        index.add(n as NodeId, &rng.vector(dim)).unwrap();
        assert_eq!(index.pending_graph(), n);
        assert!(index.remove(3).unwrap() && index.remove(n as NodeId).unwrap());
        assert_graph_split(&index);
        // part built (under half pending): graph + pending scan, still
        // sorted, still near exact
        let moved = index.build_pending(3000, std::time::Duration::MAX).unwrap();
        assert_eq!(moved, 3000);
        assert!(index.pending_graph() * 2 < index.len());
        assert_graph_split(&index);
        let mid = recall(&index, &queries, 10, None);
        assert!(mid >= 0.95, "recall {mid}");
        let odd = |id: NodeId| id % 2 == 1;
        assert!(recall(&index, &queries, 10, Some(&odd)) >= 0.95);
        while index
            .build_pending(500, std::time::Duration::from_millis(1))
            .unwrap()
            > 0
        {}
        assert_eq!(index.pending_graph(), 0);
        assert_graph_split(&index);
        assert!(recall(&index, &queries, 10, None) >= 0.95);
    }

    /// A deferred index of `n` random vectors past the exact tier, everything pending.
    fn pending_index(n: usize, dim: usize, seed: u64) -> (VectorIndex, Vec<Vec<f32>>) {
        let mut rng = Rng(seed);
        let vectors: Vec<Vec<f32>> = (0..n).map(|_| rng.vector(dim)).collect();
        let mut index = VectorIndex::new(config(dim, 1024)).unwrap();
        index.set_defer_graph(true);
        let items: Vec<(NodeId, &[f32])> = vectors
            .iter()
            .enumerate()
            .map(|(i, v)| (i as NodeId, v.as_slice()))
            .collect();
        index.add_batch(&items).unwrap();
        index.set_defer_graph(false);
        assert_eq!(index.pending_graph(), n);
        let mut q = Rng(seed + 1);
        let queries = (0..20).map(|_| q.vector(dim)).collect();
        (index, queries)
    }

    #[test]
    fn pending_vectors_move_in_parallel_chunks_within_the_budget() {
        let (n, dim) = (3000usize, 32);
        for threads in [1, 2, 3] {
            let (mut index, queries) = pending_index(n, dim, 5);
            // a small step: a bounded share moves, the rest stays pending
            let moved = index
                .build_pending_with(n, std::time::Duration::from_micros(300), threads)
                .unwrap();
            assert!(moved >= 1 && moved < n, "{threads} threads moved {moved}");
            assert_graph_split(&index);
            // capped by max_items whatever the budget
            assert_eq!(
                index
                    .build_pending_with(700, std::time::Duration::MAX, threads)
                    .unwrap(),
                700
            );
            assert_graph_split(&index);
            let rest = n - moved - 700;
            assert_eq!(
                index
                    .build_pending_with(usize::MAX, std::time::Duration::MAX, threads)
                    .unwrap(),
                rest
            );
            assert_eq!(index.pending_graph(), 0);
            assert_graph_split(&index);
            let got = recall(&index, &queries, 10, None);
            assert!(got >= 0.95, "{threads} threads: recall {got}");
        }
    }

    #[test]
    fn a_chunk_the_graph_took_only_part_of_leaves_the_rest_pending_in_order() {
        let (mut index, _) = pending_index(1500, 16, 9);
        let before = index.pending.clone();
        // the graph takes every other vector of the pending tail, as a
        // failed parallel insert can leave it
        let chunk: Vec<NodeId> = before[before.len() - 10..].iter().rev().copied().collect();
        index.reserve_graph_for(10).unwrap();
        for &id in chunk.iter().step_by(2) {
            let slot = index.slots[&id] as usize;
            let row = index.row(slot).to_vec();
            index.hnsw.as_ref().unwrap().add(id, &row).unwrap();
        }
        index.settle_chunk(&chunk, false);
        assert_graph_split(&index);
        let mut want = before[..before.len() - 10].to_vec();
        want.extend(
            before[before.len() - 10..]
                .iter()
                .copied()
                .filter(|id| !chunk.iter().step_by(2).any(|x| x == id)),
        );
        assert_eq!(index.pending, want);
    }

    #[derive(Clone, Debug)]
    enum GraphOp {
        Add(Vec<i8>, bool),
        Remove(usize),
        Build(usize),
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// Any mix of deferred and direct adds, removals and build steps
        /// keeps every stored id in exactly one of graph and pending, and
        /// search returns true scores of stored ids, best first, as many as
        /// asked (the graph is tiny, so HNSW misses nothing here).
        #[test]
        fn deferred_graph_keeps_every_vector_searchable(
            ops in prop::collection::vec(prop_oneof![
                4 => (prop::collection::vec(-3i8..=3, 6), any::<bool>()).prop_map(|(v, d)| GraphOp::Add(v, d)),
                1 => (0usize..64).prop_map(GraphOp::Remove),
                1 => (0usize..8).prop_map(GraphOp::Build),
            ], 0..80),
            query in prop::collection::vec(-3i8..=3, 6),
            k in 1usize..12,
        ) {
            let mut index = VectorIndex::new(config(6, 8)).unwrap();
            let mut model: BTreeMap<NodeId, Vec<f32>> = BTreeMap::new();
            let mut next_id = 0;
            for op in ops {
                match op {
                    GraphOp::Add(v, defer) => {
                        let v: Vec<f32> = v.into_iter().map(f32::from).collect();
                        index.set_defer_graph(defer);
                        if index.add(next_id, &v).is_ok() {
                            model.insert(next_id, VectorIndex::normalize(&v));
                        }
                        next_id += 1;
                    }
                    GraphOp::Remove(i) => {
                        let id = i as u64 % (next_id + 1);
                        prop_assert_eq!(index.remove(id).unwrap(), model.remove(&id).is_some());
                    }
                    GraphOp::Build(n) => {
                        let before = index.pending_graph();
                        let moved = index.build_pending(n, std::time::Duration::MAX).unwrap();
                        prop_assert_eq!(moved, n.min(before));
                    }
                }
                assert_graph_split(&index);
            }
            let q: Vec<f32> = query.into_iter().map(f32::from).collect();
            prop_assume!(q.iter().any(|&x| x != 0.0));
            let unit = VectorIndex::normalize(&q);
            let got = index.search(&q, k, None).unwrap();
            prop_assert!(got.windows(2).all(|w| rank_order(&w[0], &w[1]).is_lt()));
            let ids: HashSet<NodeId> = got.iter().map(|x| x.0).collect();
            prop_assert_eq!(ids.len(), got.len());
            for &(id, sim) in &got {
                let v = model.get(&id);
                prop_assert!(v.is_some(), "{} is not stored", id);
                prop_assert!((sim - dot(&unit, v.unwrap())).abs() < 1e-5);
            }
            if index.uses_hnsw() {
                prop_assert_eq!(got.len(), k.min(model.len()));
            }
        }
    }
}
