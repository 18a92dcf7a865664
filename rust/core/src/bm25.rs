//! Incremental BM25 over token lists (STUB: interface fixed, implementation pending).

use crate::error::Result;
use crate::types::NodeId;

#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Bm25Params {
    pub k1: f32,
    pub b: f32,
}

impl Default for Bm25Params {
    fn default() -> Self {
        Self { k1: 1.2, b: 0.75 }
    }
}

impl Bm25Params {
    /// k1 finite and >= 0, b in [0, 1].
    pub fn validate(&self) -> Result<()> {
        todo!()
    }
}

pub struct Bm25Index {
    params: Bm25Params,
}

impl Bm25Index {
    pub fn new(params: Bm25Params) -> Result<Self> {
        params.validate()?;
        Ok(Self { params })
    }

    pub fn params(&self) -> Bm25Params {
        self.params
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        todo!()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, doc: NodeId) -> bool {
        let _ = doc;
        todo!()
    }

    /// Index a document. Panics-free: re-adding an existing id replaces it.
    pub fn add(&mut self, doc: NodeId, tokens: &[String]) {
        let _ = (doc, tokens);
        todo!()
    }

    /// Remove a document; false if it was not indexed.
    pub fn remove(&mut self, doc: NodeId) -> bool {
        let _ = doc;
        todo!()
    }

    /// Top-k documents by BM25 score (> 0 only), best first, ties by smaller id.
    /// `accept` filters documents before ranking (e.g. "inserted before node n").
    pub fn search(
        &self,
        query: &[String],
        k: usize,
        accept: Option<&dyn Fn(NodeId) -> bool>,
    ) -> Vec<(NodeId, f32)> {
        let _ = (query, k, accept);
        todo!()
    }

    /// BM25 score of each given document for the query (0 for unknown ids).
    pub fn score(&self, query: &[String], docs: &[NodeId]) -> Vec<f32> {
        let _ = (query, docs);
        todo!()
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        todo!()
    }
}
