//! Whole-memory snapshots: one file holding the config, every node with its
//! embedding, and every edge. Indexes are rebuilt on load, so the format does
//! not depend on usearch's or our BM25's internal layout.
//!
//! Layout (little endian): magic `JEVMEMSS` (8 bytes), format version (u32),
//! CRC-32 of the payload (u32), payload length (u64), payload (postcard).
//!
//! Versions: 1 = config, nodes, embeddings, edges; 2 = the same, then
//! trailing fields, one per addition (postcard is not self-describing, so
//! each version keeps its own body struct and old files still load).

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::facts::FactsSnapshot;
use crate::ops::NewNode;
use crate::store::{MemoryStore, StoreConfig};
use crate::types::{Edge, Node, NodeId};

const MAGIC: &[u8; 8] = b"JEVMEMSS";
pub const FORMAT_VERSION: u32 = 2;
/// The oldest version this build still reads.
pub const OLDEST_READABLE_VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 4 + 8;

#[derive(Serialize)]
struct BodyRef<'a> {
    config: &'a StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<&'a Node>,
    /// Unit-normalised embeddings of `nodes`, concatenated.
    embeddings: Vec<f32>,
    edges: Vec<Edge>,
    // ---- v2 trailing fields: each addition is its own field, appended here ----
    /// Supersedes links and explicit event times.
    facts: FactsSnapshot,
}

/// The current (v2) body.
#[derive(Deserialize)]
struct Body {
    config: StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<Node>,
    embeddings: Vec<f32>,
    edges: Vec<Edge>,
    // ---- v2 trailing fields (see BodyRef) ----
    facts: FactsSnapshot,
}

/// A version 1 body: what `Body` was before the trailing fields.
#[derive(Deserialize)]
struct BodyV1 {
    config: StoreConfig,
    next_id: NodeId,
    ops_applied: u64,
    nodes: Vec<Node>,
    embeddings: Vec<f32>,
    edges: Vec<Edge>,
}

impl From<BodyV1> for Body {
    fn from(v1: BodyV1) -> Self {
        Body {
            config: v1.config,
            next_id: v1.next_id,
            ops_applied: v1.ops_applied,
            nodes: v1.nodes,
            embeddings: v1.embeddings,
            edges: v1.edges,
            facts: FactsSnapshot::default(),
        }
    }
}

impl MemoryStore {
    /// Serialise the whole memory.
    pub fn to_snapshot_bytes(&self) -> Result<Vec<u8>> {
        let nodes: Vec<&Node> = self.graph.nodes().collect();
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
            embeddings,
            edges: self.graph.all_edges(),
            facts: self.facts.to_snapshot(),
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
        let decode = |e: postcard::Error| Error::Snapshot(format!("decode: {e}"));
        let body: Body = if version == 1 {
            postcard::from_bytes::<BodyV1>(payload)
                .map_err(decode)?
                .into()
        } else {
            postcard::from_bytes(payload).map_err(decode)?
        };
        let dim = body.config.vector.dim;
        if body.embeddings.len() != body.nodes.len() * dim {
            return Err(Error::Snapshot(
                "embedding block does not match the node count".into(),
            ));
        }
        let mut store = MemoryStore::new(body.config)?;
        let mut previous: Option<NodeId> = None;
        let mut nodes = Vec::with_capacity(body.nodes.len());
        for (node, embedding) in body
            .nodes
            .into_iter()
            .zip(body.embeddings.chunks_exact(dim.max(1)))
        {
            if previous.is_some_and(|p| node.id <= p) || node.id >= body.next_id {
                return Err(Error::Snapshot(format!("node id {} out of order", node.id)));
            }
            previous = Some(node.id);
            let new = NewNode {
                content: node.content,
                timestamp: node.timestamp,
                provenance: node.provenance,
                entities: node.entities,
                types: node.types,
                embedding: embedding.to_vec(),
            };
            store
                .validate_new_node(&new)
                .map_err(|e| Error::Snapshot(format!("node {}: {e}", node.id)))?;
            nodes.push((node.id, new));
        }
        store.insert_many(nodes, true)?;
        while store.graph.next_id() < body.next_id {
            store.graph.push_removed();
        }
        for edge in body.edges {
            store.upsert_edge(edge)?;
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
        store.ops_applied = body.ops_applied;
        Ok(store)
    }

    /// Write a snapshot atomically: to a temporary file beside `path`, fsync, rename.
    pub fn save(&self, path: &Path) -> Result<()> {
        let bytes = self.to_snapshot_bytes()?;
        let tmp = path.with_extension("tmp-snapshot");
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        Ok(())
    }

    pub fn load(path: &Path) -> Result<MemoryStore> {
        let bytes = std::fs::read(path)?;
        MemoryStore::from_snapshot_bytes(&bytes)
    }
}
