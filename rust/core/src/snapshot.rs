//! Whole-memory snapshots: one file holding the config, every node with its
//! embedding, and every edge. Indexes are rebuilt on load, so the format does
//! not depend on usearch's or our BM25's internal layout; since version 5 it
//! keeps what each text tokenized to (the lexical index's content, not its
//! layout), so a load does not tokenize every text again.
//!
//! Layout (little endian): magic `JEVMEMSS` (8 bytes), format version (u32),
//! CRC-32 of the payload (u32), payload length (u64), payload (postcard).
//!
//! Decoding trusts nothing but the checksum's arithmetic: a CRC is no
//! signature, so every count and size read from a file is bounded by the
//! file's own length before anything is allocated (postcard refuses a
//! sequence longer than the bytes left, serde caps preallocation), config
//! values are validated before any index is built, and the id space is
//! bounded as `check_id_space` explains. Every failure is `Error::Snapshot`.
//!
//! postcard is not self-describing, so every format version keeps its own
//! body struct: version 1 is `BodyV1`; version 2 appends trailing fields
//! after everything version 1 had, one per addition: the passage vectors of
//! long observations (`passages`), then supersedes links and explicit event
//! times (`facts`). Version 3 changes the node record itself (scope,
//! metadata and idempotency key after the version 2 fields): versions 1 and
//! 2 read their nodes as `NodeV1`, which gets an empty scope, no metadata and
//! no key. Version 4 appends the facts derived from the texts (`derived`:
//! question shares and time references); older versions load without any.
//! Version 5 appends the lexical index's content (`lexical`, optional: a
//! body without it, and every older version, tokenizes the texts on load).
//! Version 6 appends each node's sentence marks (`marks`, optional, only
//! with `lexical`: they are positions in its entries); a body without them,
//! and every older version, makes them from the texts on load. Version 7
//! writes every block of floats (the node and passage embeddings) as its
//! little-endian bytes (`FloatBytes`), where older versions wrote a postcard
//! sequence that decodes float by float; the fields are version 6's.
//! Version 8 writes version 7's fields; its lexical content comes from the
//! tokenizer that reads a word NFKC-composed ("cafe\u{301}" and "caf\u{e9}"
//! one term), so an older file's lexical content and marks, made by the
//! tokenizer before it, are dropped on load and its texts tokenized again.

use std::collections::HashSet;
use std::path::Path;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use crate::bm25::LexicalSnapshot;
use crate::derived::DerivedSnapshot;
use crate::error::{Error, Result};
use crate::facts::FactsSnapshot;
use crate::marks::MarksSnapshot;
use crate::ops::NewNode;
use crate::passages::{NewPassage, Span};
use crate::store::{MemoryStore, ScopedKey, StoreConfig};
use crate::types::{Edge, Node, NodeId, Timestamp, TypeScores};

const MAGIC: &[u8; 8] = b"JEVMEMSS";
pub const FORMAT_VERSION: u32 = 8;
/// The first version whose lexical content the current tokenizer made.
const CURRENT_TOKENS_VERSION: u32 = 8;
/// The oldest version this build still reads.
pub const OLDEST_READABLE_VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 4 + 8;

/// Resident bytes an absent id (a node removed before the snapshot) costs
/// once loaded: its graph slot and, below the last stored node, a BM25
/// document slot (an `Option<Doc>`, its length, a search score).
const ABSENT_ID_BYTES: usize = crate::graph::Graph::EMPTY_SLOT_BYTES + 40;

/// Absent ids any snapshot may carry, in bytes of what they cost loaded
/// (about 100k ids): enough for a small memory that forgot a lot.
const ABSENT_IDS_FLOOR_BYTES: usize = 32 << 20;

/// Beyond the floor, absent ids may cost this many resident bytes per byte
/// of the file.
const ABSENT_IDS_BYTES_PER_FILE_BYTE: usize = 64;

/// The id space a snapshot claims (`next_id`, and so the largest node id,
/// which must lie below it) is paid for slot by slot when loaded: graph and
/// BM25 arrays are indexed by id. The ids between the stored nodes are
/// the ones removed before the save, and a file does not pay for them in
/// bytes, so a 5 KB file could otherwise claim 2^40 of them. The rule: the
/// absent ids may cost at most `max(32 MiB, 64 x file size)` resident bytes.
/// A genuine memory that removed more than that many ids relative to what
/// it still holds is refused with a message saying so.
/// A caller that trusts the file (a memory it wrote itself that forgot
/// that many nodes) raises the bound with `LoadOptions::max_absent_ids`.
fn check_id_space(
    next_id: NodeId,
    stored: usize,
    file_len: usize,
    max_absent_ids: Option<u64>,
) -> Result<()> {
    let absent = next_id.saturating_sub(stored as NodeId);
    let allowed = max_absent_ids.unwrap_or_else(|| default_absent_ids(file_len));
    if absent > allowed {
        return Err(Error::Snapshot(format!(
            "next_id {next_id} with {stored} stored nodes claims {absent} removed ids \
             (~{} MiB once loaded); a {file_len}-byte snapshot may claim at most {allowed}. \
             If this memory is yours and did forget that many nodes, load it with \
             max_absent_ids={absent}",
            absent.saturating_mul(ABSENT_ID_BYTES as u64) >> 20
        )));
    }
    Ok(())
}

/// The absent ids a `file_len`-byte snapshot may claim by default.
pub fn default_absent_ids(file_len: usize) -> u64 {
    let allowed_bytes =
        ABSENT_IDS_FLOOR_BYTES.max(file_len.saturating_mul(ABSENT_IDS_BYTES_PER_FILE_BYTE));
    (allowed_bytes / ABSENT_ID_BYTES) as u64
}

/// How a snapshot is loaded.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// Leave every vector of a memory past the exact tier pending (searched
    /// exactly) instead of rebuilding its HNSW graph before returning; the
    /// caller moves them into the graph with `build_pending_graph`.
    pub defer_graph: bool,
    /// Removed ids the file may claim (None: `default_absent_ids` of its size).
    pub max_absent_ids: Option<u64>,
}

#[derive(Serialize)]
struct BodyRef<'a> {
    config: &'a StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<&'a Node>,
    /// Unit-normalised embeddings of `nodes`, concatenated.
    embeddings: FloatBytes,
    edges: Vec<Edge>,
    // ---- v2 trailing fields: each addition is its own field, appended here ----
    /// Passages of long observations.
    passages: Vec<PassagesRef<'a>>,
    /// Supersedes links and explicit event times.
    facts: FactsSnapshot,
    // ---- v4 trailing field ----
    /// What the caller derived from the texts.
    derived: DerivedSnapshot,
    // ---- v5 trailing field ----
    /// What each node's text tokenized to, in node order.
    lexical: Option<LexicalSnapshot>,
    // ---- v6 trailing field ----
    /// Each node's sentence marks, in node order.
    marks: Option<MarksSnapshot>,
}

/// The passages of one node: spans and their unit embeddings, concatenated.
#[derive(Serialize)]
struct PassagesRef<'a> {
    node: NodeId,
    spans: &'a [Span],
    embeddings: FloatBytes,
}

/// Floats written as their little-endian bytes behind one length: postcard
/// writes a `Vec<f32>` float by float and serde reads it back one visit per
/// float, which was most of the decoding of a memory of long texts.
struct FloatBytes(Vec<f32>);

impl Serialize for FloatBytes {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let bytes: Vec<u8> = self.0.iter().flat_map(|x| x.to_le_bytes()).collect();
        serializer.serialize_bytes(&bytes)
    }
}

/// `FloatBytes` read back.
#[derive(Debug, Default, PartialEq)]
struct Floats(Vec<f32>);

impl<'de> Deserialize<'de> for Floats {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> std::result::Result<Self, D::Error> {
        struct Le;
        impl Visitor<'_> for Le {
            type Value = Floats;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("little-endian f32 bytes")
            }
            fn visit_bytes<E: de::Error>(self, bytes: &[u8]) -> std::result::Result<Floats, E> {
                if !bytes.len().is_multiple_of(4) {
                    return Err(E::invalid_length(bytes.len(), &self));
                }
                Ok(Floats(
                    bytes
                        .chunks_exact(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                ))
            }
        }
        deserializer.deserialize_bytes(Le)
    }
}

#[derive(Deserialize)]
struct NodePassages {
    node: NodeId,
    spans: Vec<Span>,
    embeddings: Floats,
}

/// Passages as versions 2 to 6 wrote them: the floats as a sequence.
#[derive(Deserialize)]
struct NodePassagesV2 {
    node: NodeId,
    spans: Vec<Span>,
    embeddings: Vec<f32>,
}

impl From<NodePassagesV2> for NodePassages {
    fn from(p: NodePassagesV2) -> Self {
        NodePassages {
            node: p.node,
            spans: p.spans,
            embeddings: Floats(p.embeddings),
        }
    }
}

fn passages_v2(passages: Vec<NodePassagesV2>) -> Vec<NodePassages> {
    passages.into_iter().map(NodePassages::from).collect()
}

/// The current (v7) body: v6's fields, the floats as bytes.
#[derive(Deserialize)]
struct Body {
    config: StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<Node>,
    embeddings: Floats,
    edges: Vec<Edge>,
    // ---- v2 trailing fields (see BodyRef) ----
    passages: Vec<NodePassages>,
    facts: FactsSnapshot,
    // ---- v4 ----
    derived: DerivedSnapshot,
    // ---- v5 ----
    lexical: Option<LexicalSnapshot>,
    // ---- v6 ----
    marks: Option<MarksSnapshot>,
}

/// A version 6 body: v5's fields and the sentence marks.
#[derive(Deserialize)]
struct BodyV6 {
    config: StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<Node>,
    embeddings: Vec<f32>,
    edges: Vec<Edge>,
    passages: Vec<NodePassagesV2>,
    facts: FactsSnapshot,
    derived: DerivedSnapshot,
    lexical: Option<LexicalSnapshot>,
    marks: Option<MarksSnapshot>,
}

impl From<BodyV6> for Body {
    fn from(v6: BodyV6) -> Self {
        Body {
            config: v6.config,
            next_id: v6.next_id,
            ops_applied: v6.ops_applied,
            nodes: v6.nodes,
            embeddings: Floats(v6.embeddings),
            edges: v6.edges,
            passages: passages_v2(v6.passages),
            facts: v6.facts,
            derived: v6.derived,
            lexical: v6.lexical,
            marks: v6.marks,
        }
    }
}

/// A version 5 body: v4's fields and the lexical index's content.
#[derive(Deserialize)]
struct BodyV5 {
    config: StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<Node>,
    embeddings: Vec<f32>,
    edges: Vec<Edge>,
    passages: Vec<NodePassagesV2>,
    facts: FactsSnapshot,
    derived: DerivedSnapshot,
    lexical: Option<LexicalSnapshot>,
}

impl From<BodyV5> for Body {
    fn from(v5: BodyV5) -> Self {
        Body {
            config: v5.config,
            next_id: v5.next_id,
            ops_applied: v5.ops_applied,
            nodes: v5.nodes,
            embeddings: Floats(v5.embeddings),
            edges: v5.edges,
            passages: passages_v2(v5.passages),
            facts: v5.facts,
            derived: v5.derived,
            lexical: v5.lexical,
            marks: None,
        }
    }
}

/// A version 4 body: v3's fields and the derived facts.
#[derive(Deserialize)]
struct BodyV4 {
    config: StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<Node>,
    embeddings: Vec<f32>,
    edges: Vec<Edge>,
    passages: Vec<NodePassagesV2>,
    facts: FactsSnapshot,
    derived: DerivedSnapshot,
}

impl From<BodyV4> for Body {
    fn from(v4: BodyV4) -> Self {
        Body {
            config: v4.config,
            next_id: v4.next_id,
            ops_applied: v4.ops_applied,
            nodes: v4.nodes,
            embeddings: Floats(v4.embeddings),
            edges: v4.edges,
            passages: passages_v2(v4.passages),
            facts: v4.facts,
            derived: v4.derived,
            lexical: None,
            marks: None,
        }
    }
}

/// A version 3 body: v2's fields, with v3 nodes.
#[derive(Deserialize)]
struct BodyV3 {
    config: StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<Node>,
    embeddings: Vec<f32>,
    edges: Vec<Edge>,
    passages: Vec<NodePassagesV2>,
    facts: FactsSnapshot,
}

impl From<BodyV3> for Body {
    fn from(v3: BodyV3) -> Self {
        Body {
            config: v3.config,
            next_id: v3.next_id,
            ops_applied: v3.ops_applied,
            nodes: v3.nodes,
            embeddings: Floats(v3.embeddings),
            edges: v3.edges,
            passages: passages_v2(v3.passages),
            facts: v3.facts,
            derived: DerivedSnapshot::default(),
            lexical: None,
            marks: None,
        }
    }
}

/// A node as versions 1 and 2 stored it: no scope, metadata or key.
#[derive(Deserialize)]
struct NodeV1 {
    id: NodeId,
    content: String,
    timestamp: Option<Timestamp>,
    provenance: Vec<(String, String)>,
    entities: Vec<String>,
    types: TypeScores,
}

impl From<NodeV1> for Node {
    fn from(n: NodeV1) -> Self {
        Node {
            id: n.id,
            content: n.content,
            timestamp: n.timestamp,
            provenance: n.provenance,
            entities: n.entities,
            types: n.types,
            scope: Vec::new(),
            metadata: Vec::new(),
            key: None,
        }
    }
}

/// A version 2 body: v3's fields with v1 nodes.
#[derive(Deserialize)]
struct BodyV2 {
    config: StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<NodeV1>,
    embeddings: Vec<f32>,
    edges: Vec<Edge>,
    passages: Vec<NodePassagesV2>,
    facts: FactsSnapshot,
}

impl From<BodyV2> for Body {
    fn from(v2: BodyV2) -> Self {
        Body {
            config: v2.config,
            next_id: v2.next_id,
            ops_applied: v2.ops_applied,
            nodes: v2.nodes.into_iter().map(Node::from).collect(),
            embeddings: Floats(v2.embeddings),
            edges: v2.edges,
            passages: passages_v2(v2.passages),
            facts: v2.facts,
            derived: DerivedSnapshot::default(),
            lexical: None,
            marks: None,
        }
    }
}

/// A version 1 body: what `Body` was before the trailing fields.
#[derive(Deserialize)]
struct BodyV1 {
    config: StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<NodeV1>,
    embeddings: Vec<f32>,
    edges: Vec<Edge>,
}

impl From<BodyV1> for Body {
    fn from(v1: BodyV1) -> Self {
        Body {
            config: v1.config,
            next_id: v1.next_id,
            ops_applied: v1.ops_applied,
            nodes: v1.nodes.into_iter().map(Node::from).collect(),
            embeddings: Floats(v1.embeddings),
            edges: v1.edges,
            passages: Vec::new(),
            facts: FactsSnapshot::default(),
            derived: DerivedSnapshot::default(),
            lexical: None,
            marks: None,
        }
    }
}

/// A body that is the whole payload: bytes left over mean the version in
/// the header is not the one that wrote it (a newer body read as an older
/// one decodes its prefix).
fn whole<'a, T: Deserialize<'a>>(payload: &'a [u8]) -> Result<T> {
    let (body, rest) =
        postcard::take_from_bytes(payload).map_err(|e| Error::Snapshot(format!("decode: {e}")))?;
    if !rest.is_empty() {
        return Err(Error::Snapshot(format!(
            "{} bytes after the body: not the format version the header names",
            rest.len()
        )));
    }
    Ok(body)
}

impl MemoryStore {
    /// Serialise the whole memory.
    pub fn to_snapshot_bytes(&self) -> Result<Vec<u8>> {
        let nodes: Vec<&Node> = self.graph.nodes().collect();
        let ids: Vec<NodeId> = nodes.iter().map(|n| n.id).collect();
        let mut embeddings = Vec::with_capacity(nodes.len() * self.dim());
        for n in &nodes {
            embeddings
                .extend_from_slice(self.vectors.get(n.id).expect("every node has an embedding"));
        }
        let body = BodyRef {
            config: &self.config,
            next_id: self.next_id(),
            ops_applied: self.ops_applied,
            nodes,
            embeddings: FloatBytes(embeddings),
            edges: self.graph.all_edges(),
            passages: self
                .passages
                .iter()
                .map(|(node, spans, embeddings)| PassagesRef {
                    node,
                    spans,
                    embeddings: FloatBytes(embeddings),
                })
                .collect(),
            facts: self.facts.to_snapshot(),
            derived: self.derived_snapshot(),
            lexical: Some(self.bm25.lexical_snapshot(ids.iter().copied())),
            marks: Some(self.marks_snapshot(ids)),
        };
        let payload =
            postcard::to_stdvec(&body).map_err(|e| Error::Snapshot(format!("encode: {e}")))?;
        let mut out = Vec::with_capacity(HEADER_LEN + payload.len());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&payload);
        Ok(out)
    }

    /// Rebuild a memory from `to_snapshot_bytes` output. Checks magic,
    /// version, length and checksum before decoding anything.
    pub fn from_snapshot_bytes(bytes: &[u8]) -> Result<MemoryStore> {
        Self::from_snapshot_bytes_with(bytes, LoadOptions::default())
    }

    /// [`MemoryStore::from_snapshot_bytes`] with options: `defer_graph`
    /// returns a memory past the exact tier with every vector pending, so
    /// it answers (exactly) at once while the caller builds the graph, e.g.
    /// on a background thread.
    pub fn from_snapshot_bytes_with(bytes: &[u8], options: LoadOptions) -> Result<MemoryStore> {
        if bytes.len() < HEADER_LEN || &bytes[..8] != MAGIC {
            return Err(Error::Snapshot("not a jevmem snapshot (bad magic)".into()));
        }
        let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        if !(OLDEST_READABLE_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(Error::Snapshot(format!(
                "format version {version} is not supported (this build reads \
                 {OLDEST_READABLE_VERSION} to {FORMAT_VERSION})"
            )));
        }
        let crc = u32::from_le_bytes(bytes[12..16].try_into().expect("4 bytes"));
        let len = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
        let payload = &bytes[HEADER_LEN..];
        if payload.len() as u64 != len {
            return Err(Error::Snapshot(format!(
                "truncated or padded: header says {len} payload bytes, found {}",
                payload.len()
            )));
        }
        if crc32fast::hash(payload) != crc {
            return Err(Error::Snapshot(
                "checksum mismatch: the file is corrupted".into(),
            ));
        }
        let mut body: Body = match version {
            1 => whole::<BodyV1>(payload)?.into(),
            2 => whole::<BodyV2>(payload)?.into(),
            3 => whole::<BodyV3>(payload)?.into(),
            4 => whole::<BodyV4>(payload)?.into(),
            5 => whole::<BodyV5>(payload)?.into(),
            6 => whole::<BodyV6>(payload)?.into(),
            _ => whole::<Body>(payload)?,
        };
        if version < CURRENT_TOKENS_VERSION {
            // another tokenizer's terms: the texts are tokenized again
            body.lexical = None;
            body.marks = None;
        }
        // Config first: it sizes every index built below.
        body.config
            .validate()
            .map_err(|e| Error::Snapshot(format!("stored config: {e}")))?;
        check_id_space(
            body.next_id,
            body.nodes.len(),
            bytes.len(),
            options.max_absent_ids,
        )?;
        let dim = body.config.vector.dim;
        if Some(body.embeddings.0.len()) != body.nodes.len().checked_mul(dim) {
            return Err(Error::Snapshot(
                "embedding block does not match the node count".into(),
            ));
        }
        let mut store = MemoryStore::new(body.config)
            .map_err(|e| Error::Snapshot(format!("stored config: {e}")))?;
        store.set_defer_graph(options.defer_graph);
        let mut passages = body.passages.into_iter().peekable();
        let mut previous: Option<NodeId> = None;
        let mut nodes = Vec::with_capacity(body.nodes.len());
        let mut keys: HashSet<ScopedKey> = HashSet::new();
        for (node, embedding) in body
            .nodes
            .into_iter()
            .zip(body.embeddings.0.chunks_exact(dim.max(1)))
        {
            if previous.is_some_and(|p| node.id <= p) || node.id >= body.next_id {
                return Err(Error::Snapshot(format!("node id {} out of order", node.id)));
            }
            previous = Some(node.id);
            // Passage records are in node order; each must belong to a stored node.
            let mut own = Vec::new();
            if let Some(p) = passages.next_if(|p| p.node <= node.id) {
                if p.node != node.id {
                    return Err(Error::Snapshot(format!(
                        "passages of node {} belong to no stored node",
                        p.node
                    )));
                }
                if Some(p.embeddings.0.len()) != p.spans.len().checked_mul(dim) {
                    return Err(Error::Snapshot(format!(
                        "node {}: passage embeddings do not match its spans",
                        node.id
                    )));
                }
                own = p
                    .spans
                    .iter()
                    .zip(p.embeddings.0.chunks_exact(dim.max(1)))
                    .map(|(&(start, end), e)| NewPassage::new(start, end, e.to_vec()))
                    .collect();
            }
            let new = NewNode {
                content: node.content,
                timestamp: node.timestamp,
                provenance: node.provenance,
                entities: node.entities,
                types: node.types,
                embedding: embedding.to_vec(),
                passages: own,
                scope: node.scope,
                metadata: node.metadata,
                key: node.key,
            };
            if let Some(key) = &new.key {
                let mut scope = new.scope.clone();
                scope.sort();
                if !keys.insert((scope, key.clone())) {
                    return Err(Error::Snapshot(format!(
                        "node {}: idempotency key {key:?} is used twice in one scope",
                        node.id
                    )));
                }
            }
            store
                .validate_new_node(&new)
                .map_err(|e| Error::Snapshot(format!("node {}: {e}", node.id)))?;
            nodes.push((node.id, new));
        }
        if let Some(p) = passages.next() {
            return Err(Error::Snapshot(format!(
                "passages of node {} belong to no stored node",
                p.node
            )));
        }
        if let (Some(marks), Some(lexical)) = (&body.marks, &body.lexical) {
            marks.check(|k| lexical.docs.get(k).map_or(0, |d| d.terms.len()))?;
        }
        store
            .insert_many(nodes, true, body.lexical, body.marks)
            .map_err(|e| Error::Snapshot(format!("nodes: {e}")))?;
        while store.graph.next_id() < body.next_id {
            store.graph.push_removed();
        }
        for edge in body.edges {
            let (src, dst) = (edge.src, edge.dst);
            store
                .upsert_edge(edge)
                .map_err(|e| Error::Snapshot(format!("edge {src} -> {dst}: {e}")))?;
        }
        for (id, t) in body.facts.valid_from {
            store
                .set_valid_from(id, Some(t))
                .map_err(|e| Error::Snapshot(format!("event time of node {id}: {e}")))?;
        }
        for link in body.facts.links {
            let (new, old) = (link.new, link.old);
            store
                .add_supersedes(link)
                .map_err(|e| Error::Snapshot(format!("supersedes link {new} -> {old}: {e}")))?;
        }
        // in id order, as they were written: the style sums come out the same
        let version = body.derived.version;
        store
            .restore_derived(version, body.derived.nodes)
            .map_err(|e| Error::Snapshot(format!("derived facts: {e}")))?;
        store.ops_applied = body.ops_applied;
        store.set_defer_graph(false);
        Ok(store)
    }

    /// Write a snapshot atomically: a temporary file unique to this call
    /// (never a shared name, never through a planted symlink), fsync,
    /// rename over `path`, fsync the directory.
    pub fn save(&self, path: &Path) -> Result<()> {
        crate::durable::check_export_path(path)?;
        let bytes = self.to_snapshot_bytes()?;
        crate::durable::fs::atomic_write(
            path,
            &bytes,
            ["checkpoint.write", "checkpoint.fsync", "checkpoint.rename"],
        )?;
        Ok(())
    }

    pub fn load(path: &Path) -> Result<MemoryStore> {
        let bytes = std::fs::read(path)?;
        MemoryStore::from_snapshot_bytes(&bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{EdgeOrigin, View};

    /// A node as versions 1 and 2 wrote it.
    #[derive(Serialize)]
    struct NodeV1Ref<'a> {
        id: NodeId,
        content: &'a str,
        timestamp: Option<Timestamp>,
        provenance: &'a [(String, String)],
        entities: &'a [String],
        types: TypeScores,
    }

    fn old_nodes(store: &MemoryStore) -> (Vec<NodeV1Ref<'_>>, Vec<f32>) {
        let nodes: Vec<NodeV1Ref<'_>> = store
            .graph
            .nodes()
            .map(|n| NodeV1Ref {
                id: n.id,
                content: &n.content,
                timestamp: n.timestamp,
                provenance: &n.provenance,
                entities: &n.entities,
                types: n.types,
            })
            .collect();
        let embeddings = nodes
            .iter()
            .flat_map(|n| store.vectors.get(n.id).unwrap().to_vec())
            .collect();
        (nodes, embeddings)
    }

    /// Passages as versions 2 to 6 wrote them: the floats as a sequence.
    #[derive(Serialize)]
    struct PassagesV2Ref<'a> {
        node: NodeId,
        spans: &'a [Span],
        embeddings: Vec<f32>,
    }

    fn framed(version: u32, payload: Vec<u8>) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
        out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        out.extend_from_slice(&payload);
        out
    }

    /// A version 1 file, as builds before passages wrote it.
    fn v1_bytes(store: &MemoryStore) -> Vec<u8> {
        #[derive(Serialize)]
        struct BodyV1Ref<'a> {
            config: &'a StoreConfig,
            next_id: NodeId,
            ops_applied: u64,
            nodes: Vec<NodeV1Ref<'a>>,
            embeddings: Vec<f32>,
            edges: Vec<Edge>,
        }
        let (nodes, embeddings) = old_nodes(store);
        let body = BodyV1Ref {
            config: &store.config,
            next_id: store.next_id(),
            ops_applied: store.ops_applied,
            nodes,
            embeddings,
            edges: store.graph.all_edges(),
        };
        framed(1, postcard::to_stdvec(&body).unwrap())
    }

    /// A version 2 file, as builds before scopes wrote it.
    fn v2_bytes(store: &MemoryStore) -> Vec<u8> {
        #[derive(Serialize)]
        struct BodyV2Ref<'a> {
            config: &'a StoreConfig,
            next_id: NodeId,
            ops_applied: u64,
            nodes: Vec<NodeV1Ref<'a>>,
            embeddings: Vec<f32>,
            edges: Vec<Edge>,
            passages: Vec<PassagesV2Ref<'a>>,
            facts: FactsSnapshot,
        }
        let (nodes, embeddings) = old_nodes(store);
        let body = BodyV2Ref {
            config: &store.config,
            next_id: store.next_id(),
            ops_applied: store.ops_applied,
            nodes,
            embeddings,
            edges: store.graph.all_edges(),
            passages: store
                .passages
                .iter()
                .map(|(node, spans, embeddings)| PassagesV2Ref {
                    node,
                    spans,
                    embeddings,
                })
                .collect(),
            facts: store.facts.to_snapshot(),
        };
        framed(2, postcard::to_stdvec(&body).unwrap())
    }

    #[test]
    fn reads_version_2() {
        let mut s = sample();
        let mut n = NewNode::new("a long one, in two halves", vec![0.0, 1.0, 0.0, 0.0]);
        n.passages = vec![
            NewPassage::new(0, 10, vec![1.0, 0.0, 0.0, 0.0]),
            NewPassage::new(11, 25, vec![0.0, 0.0, 1.0, 0.0]),
        ];
        s.add_node(n).unwrap();
        let loaded = MemoryStore::from_snapshot_bytes(&v2_bytes(&s)).unwrap();
        // `s` gave the new text's terms the slot its removed node freed, a
        // load numbers them afresh: the same memory, its terms in another order
        assert_eq!(lexical_bags(&loaded), lexical_bags(&s));
        assert_eq!(retokenized(&loaded), retokenized(&s));
        assert!(loaded
            .graph
            .nodes()
            .all(|n| n.scope.is_empty() && n.key.is_none()));
    }

    /// A version 3 file, as builds before the derived facts wrote it.
    fn v3_bytes(store: &MemoryStore) -> Vec<u8> {
        #[derive(Serialize)]
        struct BodyV3Ref<'a> {
            config: &'a StoreConfig,
            next_id: NodeId,
            ops_applied: u64,
            nodes: Vec<&'a Node>,
            embeddings: Vec<f32>,
            edges: Vec<Edge>,
            passages: Vec<PassagesV2Ref<'a>>,
            facts: FactsSnapshot,
        }
        let nodes: Vec<&Node> = store.graph.nodes().collect();
        let embeddings = nodes
            .iter()
            .flat_map(|n| store.vectors.get(n.id).unwrap().to_vec())
            .collect();
        let body = BodyV3Ref {
            config: &store.config,
            next_id: store.next_id(),
            ops_applied: store.ops_applied,
            nodes,
            embeddings,
            edges: store.graph.all_edges(),
            passages: Vec::new(),
            facts: store.facts.to_snapshot(),
        };
        framed(3, postcard::to_stdvec(&body).unwrap())
    }

    /// Each node's terms and counts, by term text.
    fn lexical_bags(s: &MemoryStore) -> Vec<std::collections::BTreeMap<String, u32>> {
        let ids: Vec<NodeId> = s.graph.nodes().map(|n| n.id).collect();
        let snap = s.bm25.lexical_snapshot(ids);
        snap.docs
            .iter()
            .map(|d| {
                d.terms
                    .iter()
                    .map(|&(p, tf)| (snap.vocabulary[p as usize].clone(), tf))
                    .collect()
            })
            .collect()
    }

    /// A version 4 file, as builds before the lexical content wrote it.
    fn v4_bytes(store: &MemoryStore) -> Vec<u8> {
        let bytes = store.to_snapshot_bytes().unwrap();
        let mut body: Body = postcard::from_bytes(&bytes[HEADER_LEN..]).unwrap();
        body.lexical = None;
        #[derive(Serialize)]
        struct BodyV4Ref<'a> {
            config: &'a StoreConfig,
            next_id: NodeId,
            ops_applied: u64,
            nodes: Vec<&'a Node>,
            embeddings: Vec<f32>,
            edges: Vec<Edge>,
            passages: Vec<PassagesV2Ref<'a>>,
            facts: FactsSnapshot,
            derived: crate::derived::DerivedSnapshot,
        }
        let v4 = BodyV4Ref {
            config: &body.config,
            next_id: body.next_id,
            ops_applied: body.ops_applied,
            nodes: body.nodes.iter().collect(),
            embeddings: body.embeddings.0.clone(),
            edges: body.edges.clone(),
            passages: body
                .passages
                .iter()
                .map(|p| PassagesV2Ref {
                    node: p.node,
                    spans: &p.spans,
                    embeddings: p.embeddings.0.clone(),
                })
                .collect(),
            facts: body.facts.clone(),
            derived: body.derived.clone(),
        };
        framed(4, postcard::to_stdvec(&v4).unwrap())
    }

    /// The memory as a load that tokenizes every text gives it back.
    fn retokenized(s: &MemoryStore) -> Vec<u8> {
        let t = MemoryStore::from_snapshot_bytes(&v4_bytes(s)).unwrap();
        t.to_snapshot_bytes().unwrap()
    }

    /// Version 4 files load by tokenizing the texts; a memory whose terms
    /// kept their first numbering comes back byte for byte, and the next
    /// save writes the lexical content.
    #[test]
    fn reads_version_4() {
        let mut s = derived_sample();
        s.add_node(NewNode::new(
            "a new one after the removal",
            vec![0.0, 1.0, 0.0, 0.0],
        ))
        .unwrap();
        let loaded = MemoryStore::from_snapshot_bytes(&v4_bytes(&s)).unwrap();
        assert_eq!(lexical_bags(&loaded), lexical_bags(&s));
        assert_eq!(
            loaded.to_snapshot_bytes().unwrap(),
            retokenized(&s),
            "a v4 load is a re-tokenization"
        );
        let plain = derived_sample();
        let back = MemoryStore::from_snapshot_bytes(&v4_bytes(&plain)).unwrap();
        assert_eq!(
            back.to_snapshot_bytes().unwrap(),
            plain.to_snapshot_bytes().unwrap()
        );
    }

    /// A version 7 file's terms came from the tokenizer before words were
    /// read NFKC-composed: its load tokenizes the texts again.
    #[test]
    fn reads_version_7_by_tokenizing_again() {
        let mut s = sample();
        let cafe = s
            .add_node(NewNode::new(
                "we met at the cafe\u{301}",
                vec![0.0, 1.0, 0.0, 0.0],
            ))
            .unwrap();
        let bytes = s.to_snapshot_bytes().unwrap();
        let v7 = framed(7, bytes[HEADER_LEN..].to_vec());
        let loaded = MemoryStore::from_snapshot_bytes(&v7).unwrap();
        assert_eq!(lexical_bags(&loaded), lexical_bags(&s));
        assert_eq!(loaded.to_snapshot_bytes().unwrap(), retokenized(&s));
        let hit = loaded.search_lexical("caf\u{e9}", 1);
        assert_eq!(hit.first().map(|h| h.0), Some(cafe));
    }

    /// A version 5 load keeps the term numbering, so lexical scores come
    /// back bit for bit, also after a removal freed term slots and later
    /// texts reused them.
    #[test]
    fn version_5_keeps_the_term_order() {
        let mut s = sample();
        s.add_node(NewNode::new(
            "number two again, a long one",
            vec![0.0, 1.0, 0.0, 0.0],
        ))
        .unwrap();
        let bytes = s.to_snapshot_bytes().unwrap();
        let loaded = MemoryStore::from_snapshot_bytes(&bytes).unwrap();
        assert_eq!(loaded.to_snapshot_bytes().unwrap(), bytes);
        for q in [
            "observation number",
            "long one number two",
            "again observation 4",
        ] {
            assert_eq!(loaded.search_lexical(q, 10), s.search_lexical(q, 10), "{q}");
        }
    }

    fn derived_sample() -> MemoryStore {
        use crate::derived::{DerivedFacts, TimeRef};
        let mut s = sample();
        let refs = vec![TimeRef {
            text: "yesterday".into(),
            start: 1_699_913_600,
            end: 1_700_000_000,
            precision: 1,
            relative: true,
            span: (3, 12),
            anchor_precision: None,
        }];
        let facts = [(3, 0.0, Vec::new()), (0, 0.5, refs), (1, 1.0, Vec::new())]
            .into_iter()
            .map(|(id, question_share, time_refs)| DerivedFacts {
                id,
                question_share,
                time_refs,
            })
            .collect();
        s.set_derived(7, facts).unwrap();
        s
    }

    #[test]
    fn reads_version_3_without_derived_facts() {
        let s = derived_sample();
        let loaded = MemoryStore::from_snapshot_bytes(&v3_bytes(&s)).unwrap();
        assert_eq!(loaded.derived_version(), 0);
        assert_eq!(loaded.derived_covered(&[0, 1, 3, 4]), vec![false; 4]);
        assert!(loaded.time_refs(0).is_empty());
        assert_eq!(loaded.len(), s.len());
    }

    #[test]
    fn keeps_derived_facts() {
        let s = derived_sample();
        let bytes = s.to_snapshot_bytes().unwrap();
        let loaded = MemoryStore::from_snapshot_bytes(&bytes).unwrap();
        assert_eq!(loaded.derived_version(), 7);
        assert_eq!(
            loaded.derived_covered(&[0, 1, 3, 4]),
            vec![true, true, true, false]
        );
        assert_eq!(loaded.question_shares_of(&[0, 1, 4]), vec![0.5, 1.0, 0.0]);
        assert_eq!(loaded.time_refs(0), s.time_refs(0));
        assert_eq!(loaded.time_refs(0).len(), 1);
        // facts given out of id order sum as in id order: a load agrees bit for bit
        assert_eq!(
            loaded.styles(&[0, 1, 3, 4], None),
            s.styles(&[0, 1, 3, 4], None)
        );
        assert_eq!(loaded.to_snapshot_bytes().unwrap(), bytes);
    }

    #[test]
    fn keeps_scope_metadata_and_keys() {
        use crate::filter::Selection;
        use crate::types::MetaValue;
        let mut s = sample();
        let mut n = NewNode::new("scoped", vec![0.0, 1.0, 0.0, 0.0]);
        n.scope = vec![
            ("user".into(), "u1".into()),
            ("session".into(), "s1".into()),
        ];
        n.metadata = vec![
            ("topic".into(), MetaValue::Str("work".into())),
            ("priority".into(), MetaValue::Int(2)),
            ("score".into(), MetaValue::Float(0.5)),
            ("done".into(), MetaValue::Bool(false)),
        ];
        n.key = Some("k-1".into());
        let id = s.add_node(n.clone()).unwrap();
        let bytes = s.to_snapshot_bytes().unwrap();
        let mut loaded = MemoryStore::from_snapshot_bytes(&bytes).unwrap();
        assert_eq!(loaded.get(id), s.get(id));
        assert_eq!(loaded.to_snapshot_bytes().unwrap(), bytes);
        // the indexes come back too: the scope selects it, the key is taken
        let sel = Selection::scope(vec![("user".into(), "u1".into())]).unwrap();
        assert_eq!(loaded.matching_ids(&sel), vec![id]);
        assert_eq!(loaded.add_node(n).unwrap(), id);
        assert_eq!(loaded.len(), s.len());
    }

    fn sample() -> MemoryStore {
        let mut s = MemoryStore::new(StoreConfig::new(4)).unwrap();
        for i in 0..5u64 {
            let mut n = NewNode::new(
                format!("observation number {i}"),
                vec![1.0, i as f32, 0.5, -1.0],
            );
            n.timestamp = Some(1_700_000_000 + i as i64);
            n.entities = vec![format!("e{}", i % 2)];
            s.add_node(n).unwrap();
        }
        s.remove_node(2).unwrap();
        s.upsert_edge(Edge {
            src: 0,
            dst: 1,
            view: View::Semantic,
            weight: 0.7,
            origin: EdgeOrigin::Rule,
            temporal: None,
        })
        .unwrap();
        s
    }

    #[test]
    fn reads_version_1() {
        let s = sample();
        let loaded = MemoryStore::from_snapshot_bytes(&v1_bytes(&s)).unwrap();
        // the same memory: written again (as the current version), the bytes agree
        assert_eq!(
            loaded.to_snapshot_bytes().unwrap(),
            s.to_snapshot_bytes().unwrap()
        );
        assert_eq!(loaded.passages.len(), 0);
        assert_eq!(loaded.len(), 4);
    }

    #[test]
    fn keeps_passages_and_rejects_stray_ones() {
        let mut s = sample();
        let mut n = NewNode::new("a long one, in two halves", vec![0.0, 1.0, 0.0, 0.0]);
        n.passages = vec![
            NewPassage::new(0, 10, vec![1.0, 0.0, 0.0, 0.0]),
            NewPassage::new(11, 25, vec![0.0, 0.0, 1.0, 0.0]),
        ];
        let id = s.add_node(n).unwrap();
        let bytes = s.to_snapshot_bytes().unwrap();
        let loaded = MemoryStore::from_snapshot_bytes(&bytes).unwrap();
        assert_eq!(loaded.passage_spans(id).unwrap(), &[(0, 10), (11, 25)]);
        assert_eq!(loaded.to_snapshot_bytes().unwrap(), bytes);
        let hit = loaded.search_passages(&[0.0, 0.0, 1.0, 0.0], 1).unwrap()[0];
        assert_eq!((hit.node, hit.passage), (id, 1));
        assert_eq!(
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()),
            FORMAT_VERSION
        );
        // unknown future versions are refused
        let mut future = bytes.clone();
        future[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
        assert!(matches!(
            MemoryStore::from_snapshot_bytes(&future),
            Err(Error::Snapshot(_))
        ));
    }

    /// A version 6 file: version 7's fields, every float block a sequence.
    fn v6_bytes(store: &MemoryStore) -> Vec<u8> {
        let bytes = store.to_snapshot_bytes().unwrap();
        let body: Body = postcard::from_bytes(&bytes[HEADER_LEN..]).unwrap();
        #[derive(Serialize)]
        struct BodyV6Ref<'a> {
            config: &'a StoreConfig,
            next_id: NodeId,
            ops_applied: u64,
            nodes: Vec<&'a Node>,
            embeddings: &'a [f32],
            edges: &'a [Edge],
            passages: Vec<PassagesV2Ref<'a>>,
            facts: &'a FactsSnapshot,
            derived: &'a DerivedSnapshot,
            lexical: &'a Option<LexicalSnapshot>,
            marks: &'a Option<MarksSnapshot>,
        }
        let v6 = BodyV6Ref {
            config: &body.config,
            next_id: body.next_id,
            ops_applied: body.ops_applied,
            nodes: body.nodes.iter().collect(),
            embeddings: &body.embeddings.0,
            edges: &body.edges,
            passages: body
                .passages
                .iter()
                .map(|p| PassagesV2Ref {
                    node: p.node,
                    spans: &p.spans,
                    embeddings: p.embeddings.0.clone(),
                })
                .collect(),
            facts: &body.facts,
            derived: &body.derived,
            lexical: &body.lexical,
            marks: &body.marks,
        };
        framed(6, postcard::to_stdvec(&v6).unwrap())
    }

    fn with_passages() -> (MemoryStore, NodeId) {
        let mut s = derived_sample();
        let mut n = NewNode::new("a long one, in two halves", vec![0.0, 1.0, 0.5, 0.0]);
        n.passages = vec![
            NewPassage::new(0, 10, vec![1.0, 0.0, 0.0, -0.25]),
            NewPassage::new(11, 25, vec![0.0, 0.0, 1.0, 0.0]),
        ];
        let id = s.add_node(n).unwrap();
        (s, id)
    }

    /// A version 6 file loads to the same memory, float for float (its
    /// texts tokenized again, as every file before version 8), and the next
    /// save writes the current version; the floats are the same bits either way.
    #[test]
    fn reads_version_6() {
        let (s, id) = with_passages();
        let bytes = s.to_snapshot_bytes().unwrap();
        let old = v6_bytes(&s);
        let loaded = MemoryStore::from_snapshot_bytes(&old).unwrap();
        assert_eq!(loaded.to_snapshot_bytes().unwrap(), retokenized(&s));
        assert_eq!(loaded.passage_spans(id).unwrap(), &[(0, 10), (11, 25)]);
        let v7: Body = postcard::from_bytes(&bytes[HEADER_LEN..]).unwrap();
        let v6: BodyV6 = postcard::from_bytes(&old[HEADER_LEN..]).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&v7.embeddings.0), bits(&v6.embeddings));
        assert_eq!(v7.embeddings.0.len(), s.len() * 4);
        assert_eq!(
            bits(&v7.passages[0].embeddings.0),
            bits(&v6.passages[0].embeddings)
        );
        // 4 bytes a float either way; only a block's length prefix may differ
        // (a byte count, not a float count), and here both fit one byte
        assert_eq!(old.len(), bytes.len());
    }

    /// A float block whose byte count is no multiple of 4, or that runs past
    /// the payload, is a snapshot error.
    #[test]
    fn a_ragged_float_block_is_a_snapshot_error() {
        assert!(postcard::from_bytes::<Floats>(&[3, 0, 0, 128]).is_err());
        assert!(postcard::from_bytes::<Floats>(&[8, 0, 0, 128, 63]).is_err());
        assert_eq!(
            postcard::from_bytes::<Floats>(&[4, 0, 0, 128, 63]).unwrap(),
            Floats(vec![1.0])
        );
        let (s, _) = with_passages();
        let bytes = s.to_snapshot_bytes().unwrap();
        // the first node's embedding block: its length byte follows the nodes;
        // find it as the varint 4 * dim * nodes right before the floats
        let block = (s.len() * 4 * 4) as u8;
        let payload = &bytes[HEADER_LEN..];
        let first: Vec<u8> = s.vectors.get(0).unwrap()[0].to_le_bytes().to_vec();
        let at = (0..payload.len() - 5)
            .find(|&i| payload[i] == block && payload[i + 1..i + 5] == first[..])
            .expect("the embedding block");
        let mut damaged = payload.to_vec();
        damaged[at] = block - 1;
        assert!(matches!(
            MemoryStore::from_snapshot_bytes(&framed(FORMAT_VERSION, damaged)),
            Err(Error::Snapshot(_))
        ));
    }
}
