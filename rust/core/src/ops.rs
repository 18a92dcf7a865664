//! Every mutation of a memory is one of these plain, serialisable operations.
//! The store applies nothing else, so a write-ahead log of `Op`s replays to the
//! same state (see `MemoryStore::apply`).

use serde::{Deserialize, Serialize};

use crate::derived::DerivedFacts;
use crate::facts::Supersedes;
use crate::passages::NewPassage;
use crate::types::{Edge, MetaValue, NodeId, Timestamp, TypeScores};

/// Everything needed to create a node; the store assigns the id.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewNode {
    pub content: String,
    pub timestamp: Option<Timestamp>,
    pub provenance: Vec<(String, String)>,
    /// Raw entity identifiers; the store normalises them (trim, lowercase, collapse spaces).
    pub entities: Vec<String>,
    pub types: TypeScores,
    pub embedding: Vec<f32>,
    /// Passage vectors of a long text (empty: the node vector is its only passage).
    #[serde(default)]
    pub passages: Vec<NewPassage>,
    /// Scope pairs (any order; the store sorts them, a key given twice is refused).
    pub scope: Vec<(String, String)>,
    /// Metadata entries (any order; sorted by the store, a key given twice is refused).
    pub metadata: Vec<(String, MetaValue)>,
    /// Idempotency key, unique within the node's scope. `add_node` /
    /// `add_nodes` turn a write whose (scope, key) is taken into a no-op
    /// before an op exists, so a logged `AddNode` always carries a fresh key
    /// and replays the same (`apply` refuses a taken one).
    pub key: Option<String>,
}

impl NewNode {
    pub fn new(content: impl Into<String>, embedding: Vec<f32>) -> Self {
        Self {
            content: content.into(),
            timestamp: None,
            provenance: Vec::new(),
            entities: Vec::new(),
            types: TypeScores::default(),
            embedding,
            passages: Vec::new(),
            scope: Vec::new(),
            metadata: Vec::new(),
            key: None,
        }
    }
}

// One op per write, moved straight into `apply`: boxing the node would only
// add an allocation per write (and change the variant the log records).
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// Insert a node under `id`, which must be the store's next id.
    AddNode { id: NodeId, node: NewNode },
    /// Insert an edge, or raise the weight of an existing (src, dst, view) edge.
    UpsertEdge(Edge),
    /// Replace a node's type scores.
    SetTypes { id: NodeId, types: TypeScores },
    /// Delete a node, its edges and its index entries for real.
    RemoveNode { id: NodeId },
    /// Record that one node supersedes another (with its temporal edge).
    Supersede(Supersedes),
    /// Set or clear the time a node's fact became true.
    SetValidFrom {
        id: NodeId,
        valid_from: Option<Timestamp>,
    },
    /// Set what the caller derived from nodes' texts (question shares, time
    /// references) with derivation `version` (see `derived`). Appended last:
    /// postcard records a variant by its index, so older logs still decode.
    SetDerived {
        version: u32,
        facts: Vec<DerivedFacts>,
    },
}
