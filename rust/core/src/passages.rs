//! Passage vectors of long observations.
//!
//! A long observation stays one node with its whole text; an embedder only
//! reads a window of it, so the node vector covers the head alone. Each
//! passage (a character span of the node's text, in Unicode scalar values as
//! Python counts them) gets a vector of its own here, so vector search sees
//! all of the text. Nodes without passages are simply absent: for them the
//! node vector is the only passage (index 0, the whole text).
//!
//! Passages live in a second `VectorIndex` keyed by a passage key; a node's
//! passages get consecutive keys, so key - first key is the passage index.
//! Keys are internal (never stored: a snapshot reassigns them).

use std::collections::{BTreeMap, HashMap};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::filter::Allowed;
use crate::hashing::ShortKeyMap;
use crate::types::NodeId;
use crate::vector::{DotKernel, SearchExpansion, VectorConfig, VectorIndex};

/// A passage's character span `[start, end)` in its node's text.
pub type Span = (u64, u64);

/// One passage of a new node: its span and its (not yet normalised) embedding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NewPassage {
    pub start: u64,
    pub end: u64,
    pub embedding: Vec<f32>,
}

impl NewPassage {
    pub fn new(start: u64, end: u64, embedding: Vec<f32>) -> Self {
        Self {
            start,
            end,
            embedding,
        }
    }
}

/// A hit: the node, which of its passages, and the cosine similarity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PassageHit {
    pub node: NodeId,
    pub passage: u32,
    pub similarity: f32,
}

/// Similarity desc, node asc, passage asc: the order every ranking here uses.
pub fn hit_order(a: &PassageHit, b: &PassageHit) -> std::cmp::Ordering {
    b.similarity
        .total_cmp(&a.similarity)
        .then(a.node.cmp(&b.node))
        .then(a.passage.cmp(&b.passage))
}

struct NodePassages {
    first_key: u64,
    spans: Vec<Span>,
}

pub struct PassageIndex {
    vectors: VectorIndex,
    /// Passage key -> owning node.
    owner: ShortKeyMap<u64, NodeId>,
    /// Ordered by node id, so snapshots list passages in node order.
    by_node: BTreeMap<NodeId, NodePassages>,
    next_key: u64,
}

impl PassageIndex {
    pub fn new(config: VectorConfig) -> Result<Self> {
        Ok(Self {
            vectors: VectorIndex::new(config)?,
            owner: ShortKeyMap::default(),
            by_node: BTreeMap::new(),
            next_key: 0,
        })
    }

    /// Total passages stored (over all nodes).
    pub fn len(&self) -> usize {
        self.vectors.len()
    }

    pub fn is_empty(&self) -> bool {
        self.vectors.is_empty()
    }

    /// How many nodes have passages.
    pub fn node_count(&self) -> usize {
        self.by_node.len()
    }

    pub fn has(&self, node: NodeId) -> bool {
        self.by_node.contains_key(&node)
    }

    pub fn spans(&self, node: NodeId) -> Option<&[Span]> {
        self.by_node.get(&node).map(|p| p.spans.as_slice())
    }

    pub(crate) fn set_exact_threshold(&mut self, exact_threshold: usize) -> Result<()> {
        self.vectors.set_exact_threshold(exact_threshold)
    }

    pub(crate) fn set_expansion_search(&mut self, expansion_search: SearchExpansion) -> Result<()> {
        self.vectors.set_expansion_search(expansion_search)
    }

    pub(crate) fn set_defer_graph(&mut self, on: bool) {
        self.vectors.set_defer_graph(on);
    }

    pub(crate) fn pending_graph(&self) -> usize {
        self.vectors.pending_graph()
    }

    pub(crate) fn build_pending(
        &mut self,
        max_items: usize,
        budget: std::time::Duration,
    ) -> Result<usize> {
        self.vectors.build_pending(max_items, budget)
    }

    pub fn vectors(&self) -> &VectorIndex {
        &self.vectors
    }

    /// The stored unit vector of passage `index` of `node`.
    pub fn embedding(&self, node: NodeId, index: u32) -> Option<&[f32]> {
        let p = self.by_node.get(&node)?;
        if index as usize >= p.spans.len() {
            return None;
        }
        self.vectors.get(p.first_key + u64::from(index))
    }

    /// Check a node's passages against its text without storing anything:
    /// every embedding valid for this index, every span non-empty and inside
    /// the text, spans in order (each starts and ends after the previous one).
    pub fn validate(&self, content: &str, passages: &[NewPassage]) -> Result<()> {
        if passages.is_empty() {
            return Ok(());
        }
        if passages.len() > u32::MAX as usize {
            return Err(Error::invalid("too many passages"));
        }
        let chars = content.chars().count() as u64;
        let mut previous: Option<Span> = None;
        for (i, p) in passages.iter().enumerate() {
            if p.start >= p.end || p.end > chars {
                return Err(Error::invalid(format!(
                    "passage {i}: span [{}, {}) is empty or outside the text's {chars} characters",
                    p.start, p.end
                )));
            }
            if let Some((s, e)) = previous {
                if p.start <= s || p.end <= e {
                    return Err(Error::invalid(format!(
                        "passage {i}: span [{}, {}) does not follow [{s}, {e})",
                        p.start, p.end
                    )));
                }
            }
            previous = Some((p.start, p.end));
            self.vectors.validate(&p.embedding).map_err(|e| match e {
                Error::InvalidInput(m) => Error::invalid(format!("passage {i}: {m}")),
                other => other,
            })?;
        }
        Ok(())
    }

    /// Store the passages of several nodes (each validated, none stored yet),
    /// all or nothing. `stored`: the embeddings are unit vectors read back from
    /// a snapshot, kept bit for bit.
    pub(crate) fn add_many(
        &mut self,
        nodes: &[(NodeId, &[NewPassage])],
        stored: bool,
    ) -> Result<()> {
        let mut key = self.next_key;
        let mut items: Vec<(u64, &[f32])> = Vec::new();
        for (node, passages) in nodes {
            if passages.is_empty() {
                continue;
            }
            if self.by_node.contains_key(node) {
                return Err(Error::invalid(format!("node {node} already has passages")));
            }
            for p in passages.iter() {
                items.push((key, p.embedding.as_slice()));
                key += 1;
            }
        }
        if items.is_empty() {
            return Ok(());
        }
        if stored {
            self.vectors.add_batch_stored(&items)?;
        } else {
            self.vectors.add_batch(&items)?;
        }
        let mut key = self.next_key;
        for (node, passages) in nodes {
            if passages.is_empty() {
                continue;
            }
            let first_key = key;
            for _ in passages.iter() {
                self.owner.insert(key, *node);
                key += 1;
            }
            self.by_node.insert(
                *node,
                NodePassages {
                    first_key,
                    spans: passages.iter().map(|p| (p.start, p.end)).collect(),
                },
            );
        }
        self.next_key = key;
        Ok(())
    }

    /// Drop every passage of `node`; Ok(false) when it had none.
    pub fn remove(&mut self, node: NodeId) -> Result<bool> {
        let Some(p) = self.by_node.get(&node) else {
            return Ok(false);
        };
        let keys = p.first_key..p.first_key + p.spans.len() as u64;
        for key in keys.clone() {
            self.vectors.remove(key)?;
        }
        for key in keys {
            self.owner.remove(&key);
        }
        self.by_node.remove(&node);
        Ok(true)
    }

    /// The best `k` nodes by their best passage, best first (see `hit_order`).
    /// Asks the vector index for more passages until `k` distinct nodes are
    /// found or every passage was seen, so a node with many close passages
    /// cannot crowd the others out.
    pub fn search(&self, query: &[f32], k: usize) -> Result<Vec<PassageHit>> {
        self.vectors.validate(query)?;
        if k == 0 || self.is_empty() {
            return Ok(Vec::new());
        }
        let total = self.len();
        let mut fetch = k.saturating_mul(4).min(total);
        loop {
            let hits = self.vectors.search(query, fetch, None)?;
            let mut best: HashMap<NodeId, PassageHit> = HashMap::new();
            for (key, similarity) in &hits {
                let node = self.owner[key];
                let passage = (key - self.by_node[&node].first_key) as u32;
                let hit = PassageHit {
                    node,
                    passage,
                    similarity: *similarity,
                };
                best.entry(node)
                    .and_modify(|b| {
                        if hit_order(&hit, b).is_lt() {
                            *b = hit;
                        }
                    })
                    .or_insert(hit);
            }
            if best.len() >= k || fetch >= total || hits.len() < fetch {
                let mut out: Vec<PassageHit> = best.into_values().collect();
                out.sort_unstable_by(hit_order);
                out.truncate(k);
                return Ok(out);
            }
            fetch = fetch.saturating_mul(2).min(total);
        }
    }

    /// [`PassageIndex::search`] over the passages of the `allowed` nodes.
    /// When few of the nodes with passages are allowed, each allowed node's
    /// best passage is computed directly (exact); otherwise the vector index
    /// is asked with a filter on the passage's owner.
    pub fn search_scoped(
        &self,
        query: &[f32],
        k: usize,
        allowed: Option<&Allowed>,
    ) -> Result<Vec<PassageHit>> {
        let Some(allowed) = allowed else {
            return self.search(query, k);
        };
        self.vectors.validate(query)?;
        if k == 0 || self.is_empty() || allowed.is_empty() {
            return Ok(Vec::new());
        }
        let small = allowed.len() * 8 <= self.node_count() || !self.vectors.uses_hnsw();
        let mut out: Vec<PassageHit> = if small {
            let unit = VectorIndex::normalize(query);
            allowed
                .ids()
                .iter()
                .filter_map(|&node| {
                    let (similarity, passage) = self.best(&unit, node)?;
                    Some(PassageHit {
                        node,
                        passage,
                        similarity,
                    })
                })
                .collect()
        } else {
            let total = self.len();
            let owned = |key: u64| self.owner.get(&key).is_some_and(|n| allowed.contains(*n));
            let mut fetch = k.saturating_mul(4).min(total);
            loop {
                let hits = self.vectors.search(query, fetch, Some(&owned))?;
                let mut best: HashMap<NodeId, PassageHit> = HashMap::new();
                for (key, similarity) in &hits {
                    let node = self.owner[key];
                    let passage = (key - self.by_node[&node].first_key) as u32;
                    let hit = PassageHit {
                        node,
                        passage,
                        similarity: *similarity,
                    };
                    best.entry(node)
                        .and_modify(|b| {
                            if hit_order(&hit, b).is_lt() {
                                *b = hit;
                            }
                        })
                        .or_insert(hit);
                }
                if best.len() >= k || fetch >= total || hits.len() < fetch {
                    break best.into_values().collect();
                }
                fetch = fetch.saturating_mul(2).min(total);
            }
        };
        out.sort_unstable_by(hit_order);
        out.truncate(k);
        Ok(out)
    }

    /// The best passage of `node` for a unit query: (similarity, index); None
    /// when the node has no passages or the query has the wrong dimension.
    pub fn best(&self, unit_query: &[f32], node: NodeId) -> Option<(f32, u32)> {
        if unit_query.len() != self.vectors.dim() {
            return None;
        }
        let p = self.by_node.get(&node)?;
        let rows = (0..p.spans.len() as u64)
            .map(|i| self.vectors.get(p.first_key + i))
            .collect::<Option<Vec<&[f32]>>>()?;
        let mut best: Option<(f32, u32)> = None;
        for (i, s) in DotKernel::detect()
            .dots(unit_query, &rows)
            .into_iter()
            .enumerate()
        {
            if best.is_none_or(|(b, _)| s > b) {
                best = Some((s, i as u32));
            }
        }
        best
    }

    /// Every node with passages, ascending: (node, spans, unit embeddings concatenated).
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &[Span], Vec<f32>)> + '_ {
        self.by_node.iter().map(|(&node, p)| {
            let mut flat = Vec::with_capacity(p.spans.len() * self.vectors.dim());
            for i in 0..p.spans.len() as u64 {
                flat.extend_from_slice(self.vectors.get(p.first_key + i).expect("stored"));
            }
            (node, p.spans.as_slice(), flat)
        })
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.vectors.memory_bytes()
            + self.owner.capacity() * (std::mem::size_of::<(u64, NodeId)>() + 1)
            + self
                .by_node
                .values()
                .map(|p| 48 + p.spans.capacity() * std::mem::size_of::<Span>())
                .sum::<usize>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Each node's best passage by brute force, best `k` nodes by `hit_order`.
    fn search_by_every_passage(ix: &PassageIndex, query: &[f32], k: usize) -> Vec<PassageHit> {
        let unit = VectorIndex::normalize(query);
        let mut out: Vec<PassageHit> = ix
            .by_node
            .keys()
            .map(|&node| {
                let (similarity, passage) = ix.best(&unit, node).unwrap();
                PassageHit {
                    node,
                    passage,
                    similarity,
                }
            })
            .collect();
        out.sort_unstable_by(hit_order);
        out.truncate(k);
        out
    }

    proptest! {
        /// Below the graph's threshold, the nodes whose best passages match
        /// best, as reading every passage finds them: a node with many close
        /// passages does not crowd out the others, ties (repeated passage
        /// vectors) included.
        #[test]
        fn search_finds_the_nodes_with_the_best_passages(
            nodes in prop::collection::vec(prop::collection::vec(0usize..6, 1..7), 1..12),
            query in prop::collection::vec(-1.0f32..1.0, 3),
            k in 0usize..8,
        ) {
            // few distinct vectors, so many passages tie exactly
            let table = [
                [1.0, 0.0, 0.0],
                [0.0, 1.0, 0.0],
                [0.6, 0.8, 0.0],
                [0.0, 0.6, 0.8],
                [-1.0, 0.2, 0.1],
                [0.3, 0.3, 0.9],
            ];
            prop_assume!(query.iter().any(|x| *x != 0.0));
            let mut ix = PassageIndex::new(VectorConfig::new(3)).unwrap();
            let passages: Vec<Vec<NewPassage>> = nodes
                .iter()
                .map(|vs| {
                    vs.iter()
                        .enumerate()
                        .map(|(i, &v)| NewPassage::new(2 * i as u64, 2 * i as u64 + 1, table[v].to_vec()))
                        .collect()
                })
                .collect();
            let items: Vec<(NodeId, &[NewPassage])> = passages
                .iter()
                .enumerate()
                .map(|(n, p)| (n as NodeId, p.as_slice()))
                .collect();
            ix.add_many(&items, false).unwrap();
            let got = ix.search(&query, k).unwrap();
            let want = search_by_every_passage(&ix, &query, k);
            prop_assert_eq!(got.len(), want.len());
            for (a, b) in got.iter().zip(&want) {
                prop_assert_eq!((a.node, a.passage, a.similarity.to_bits()), (b.node, b.passage, b.similarity.to_bits()));
            }
        }
    }
}
