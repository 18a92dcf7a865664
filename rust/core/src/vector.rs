//! Cosine vector index on usearch, with an exact scan for small memories
//! (STUB: interface fixed, implementation pending).

use crate::error::Result;
use crate::types::NodeId;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Quantization {
    F32,
    F16,
    I8,
}

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct VectorConfig {
    pub dim: usize,
    pub quantization: Quantization,
    /// Below this many vectors, search scans exactly instead of asking the HNSW graph.
    pub exact_threshold: usize,
    pub connectivity: usize,
    pub expansion_add: usize,
    pub expansion_search: usize,
}

impl VectorConfig {
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            quantization: Quantization::F32,
            exact_threshold: 2048,
            connectivity: 16,
            expansion_add: 128,
            expansion_search: 64,
        }
    }

    pub fn validate(&self) -> Result<()> {
        todo!()
    }
}

pub struct VectorIndex {
    config: VectorConfig,
}

impl VectorIndex {
    pub fn new(config: VectorConfig) -> Result<Self> {
        config.validate()?;
        Ok(Self { config })
    }

    pub fn config(&self) -> VectorConfig {
        self.config
    }

    pub fn dim(&self) -> usize {
        self.config.dim
    }

    pub fn len(&self) -> usize {
        todo!()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Check a vector without storing it: right dimension, all finite, non-zero norm.
    pub fn validate(&self, vector: &[f32]) -> Result<()> {
        let _ = vector;
        todo!()
    }

    /// Unit-normalised copy of a vector (after `validate`).
    pub fn normalize(vector: &[f32]) -> Vec<f32> {
        let _ = vector;
        todo!()
    }

    /// Store a vector under `id` (must not exist yet).
    pub fn add(&mut self, id: NodeId, vector: &[f32]) -> Result<()> {
        let _ = (id, vector);
        todo!()
    }

    /// Remove a vector; Ok(false) if `id` was not stored.
    pub fn remove(&mut self, id: NodeId) -> Result<bool> {
        let _ = id;
        todo!()
    }

    /// The stored unit-normalised vector of `id`.
    pub fn get(&self, id: NodeId) -> Option<&[f32]> {
        let _ = id;
        todo!()
    }

    /// Cosine similarity between a unit-normalised query and a stored vector.
    pub fn similarity(&self, unit_query: &[f32], id: NodeId) -> Option<f32> {
        let _ = (unit_query, id);
        todo!()
    }

    /// Top-k by cosine similarity, best first, ties by smaller id.
    /// `accept` restricts the result (e.g. "inserted before node n").
    pub fn search(
        &self,
        query: &[f32],
        k: usize,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Result<Vec<(NodeId, f32)>> {
        let _ = (query, k, accept);
        todo!()
    }

    /// Approximate heap bytes (our copy plus usearch's).
    pub fn memory_bytes(&self) -> usize {
        todo!()
    }
}
