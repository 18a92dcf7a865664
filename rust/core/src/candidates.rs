//! Write-path candidate discovery: which earlier nodes a new node should be
//! compared with. Deterministic, and bounded by `pool` per signal, so the
//! controller's relation batch stays at most `k` pairs however large the
//! memory grows.
//!
//! The pool is the union of four short lists, each looking only at nodes
//! inserted before the new one:
//! - vector: the `pool` nearest embeddings (cosine, ties by smaller id);
//! - lexical: the `pool` best BM25 matches of the new text (ties by smaller id),
//!   queried with its `DISCOVERY_TERMS` rarest distinct terms, each over its
//!   `DISCOVERY_WINDOW` most recent carriers;
//! - entity: for each of the new node's entities, its `pool` most recent carriers;
//! - temporal: the `pool` nearest timestamps, with every node tied at the
//!   boundary timestamp included.
//!
//! Every pooled node then gets four signals in [0, 1] and is ranked by their
//! weighted mean (ties: the more recent node first):
//! - vector = max(0, cosine);
//! - lexical = BM25 / (largest BM25 in the pool), 0 when nothing matches;
//! - entity = |shared entities| / |entities of the new node|;
//! - temporal = 1 / (1 + |Δt| / temporal_scale_s), 0 without both timestamps.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::ops::Bound;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::filter::{Allowed, Selection};
use crate::store::MemoryStore;
use crate::types::{NodeId, Timestamp};

/// Largest `CandidateConfig::k` and `pool`.
pub const MAX_CANDIDATES: usize = 1 << 16;

/// How many distinct terms of a new text its lexical discovery query keeps:
/// the rarest (fewest documents; ties by the term). A long observation has
/// hundreds of distinct terms, and querying them all costs time in proportion
/// to the memory: the common terms' postings grow with it, while the rare
/// terms carry most of a match's BM25 weight. The lexical signal still
/// scores the pool with every term. Measured (BENCHMARKS.md
/// section 13): long turns' `write_candidates` at 50k nodes 7.0 -> 3.3 ms,
/// and every figure of both development sets' harness unchanged. A constant,
/// not a `CandidateConfig` field, until the next snapshot format version
/// (the config is stored in snapshots).
pub const DISCOVERY_TERMS: usize = 64;

/// How many of a discovery term's most recent earlier carriers its query
/// reads (`Bm25Index::search_terms_recent`). Even the rarest terms of a long
/// text include some whose postings grow with the memory; at 110k nodes the
/// discovery query was a quarter of a write and growing in proportion
/// (BENCHMARKS.md section 28). A term with more earlier carriers than this
/// is not a rare one; its older carriers are still reached through the
/// text's other terms, the vector search, entities and time. Memories whose
/// terms all have fewer carriers (every development conversation) discover
/// exactly as before.
pub const DISCOVERY_WINDOW: usize = 2048;

/// `terms` (distinct term ids with counts, sorted by id) with only its `cap`
/// rarest terms (`stats`: a term's document frequency and text; ties by the
/// text), in id order; all of them when there are at most `cap`.
pub(crate) fn rarest_terms<'t, 'a>(
    terms: &'t [(u32, u32)],
    cap: usize,
    stats: impl Fn(u32) -> (usize, &'a str),
) -> Cow<'t, [(u32, u32)]> {
    if terms.len() <= cap {
        return Cow::Borrowed(terms);
    }
    let mut by_df: Vec<(usize, &str, u32)> = terms
        .iter()
        .map(|&(t, _)| {
            let (df, text) = stats(t);
            (df, text, t)
        })
        .collect();
    by_df.sort_unstable();
    let mut keep: Vec<u32> = by_df.into_iter().take(cap).map(|(_, _, t)| t).collect();
    keep.sort_unstable();
    Cow::Owned(
        terms
            .iter()
            .filter(|(t, _)| keep.binary_search(t).is_ok())
            .copied()
            .collect(),
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateConfig {
    /// K_w: how many candidates the controller judges per write.
    pub k: usize,
    /// Length of each per-signal list that forms the pool.
    pub pool: usize,
    pub w_vector: f32,
    pub w_lexical: f32,
    pub w_entity: f32,
    pub w_temporal: f32,
    /// Time difference (seconds) at which the temporal signal halves.
    pub temporal_scale_s: f64,
}

impl Default for CandidateConfig {
    fn default() -> Self {
        Self {
            k: 10,
            pool: 32,
            w_vector: 0.45,
            w_lexical: 0.25,
            w_entity: 0.15,
            w_temporal: 0.15,
            temporal_scale_s: 86_400.0,
        }
    }
}

impl CandidateConfig {
    pub fn validate(&self) -> Result<()> {
        // Both size per-write result lists; the bound keeps a config read
        // from a file from asking for a huge one.
        if !(1..=MAX_CANDIDATES).contains(&self.k) || !(1..=MAX_CANDIDATES).contains(&self.pool) {
            return Err(Error::config(format!(
                "candidate k and pool must be in 1..={MAX_CANDIDATES}, got {} and {}",
                self.k, self.pool
            )));
        }
        let ws = [
            self.w_vector,
            self.w_lexical,
            self.w_entity,
            self.w_temporal,
        ];
        if ws.iter().any(|w| !w.is_finite() || *w < 0.0) || ws.iter().sum::<f32>() <= 0.0 {
            return Err(Error::config(
                "candidate weights must be finite, non-negative and not all zero",
            ));
        }
        if !(self.temporal_scale_s.is_finite() && self.temporal_scale_s > 0.0) {
            return Err(Error::config("temporal_scale_s must be a positive number"));
        }
        Ok(())
    }

    fn mix(&self, s: &Signals) -> f32 {
        let total = self.w_vector + self.w_lexical + self.w_entity + self.w_temporal;
        (self.w_vector * s.vector
            + self.w_lexical * s.lexical
            + self.w_entity * s.entity
            + self.w_temporal * s.temporal)
            / total
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Signals {
    pub vector: f32,
    pub lexical: f32,
    pub entity: f32,
    pub temporal: f32,
}

#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateMatch {
    pub id: NodeId,
    pub score: f32,
    pub signals: Signals,
}

pub(crate) fn temporal_signal(a: Option<Timestamp>, b: Option<Timestamp>, scale_s: f64) -> f32 {
    match (a, b) {
        (Some(a), Some(b)) => (1.0 / (1.0 + (a.abs_diff(b) as f64) / scale_s)) as f32,
        _ => 0.0,
    }
}

/// Add 1 to `counts[i]` for each `ids[i]` found in `members` (both sorted
/// ascending, without repeats): a walk down both lists, or binary searches
/// in `members` when it is much the longer (a common entity's carriers).
fn count_members(ids: &[NodeId], members: &[NodeId], counts: &mut [u32]) {
    if members.len() > ids.len() * 8 {
        let mut from = 0;
        for (i, id) in ids.iter().enumerate() {
            match members[from..].binary_search(id) {
                Ok(at) => {
                    counts[i] += 1;
                    from += at + 1;
                }
                Err(at) => from += at,
            }
        }
        return;
    }
    let (mut i, mut j) = (0, 0);
    while i < ids.len() && j < members.len() {
        match ids[i].cmp(&members[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                counts[i] += 1;
                i += 1;
                j += 1;
            }
        }
    }
}

/// The `pool` nodes with id < `before` nearest to `ts`, plus boundary ties.
pub(crate) fn nearest_in_time(
    by_time: &BTreeSet<(Timestamp, NodeId)>,
    ts: Timestamp,
    before: NodeId,
    allowed: Option<&Allowed>,
    pool: usize,
) -> Vec<NodeId> {
    // Walk each direction until `pool` eligible nodes are found, then finish
    // the timestamp we stopped on, so no tie at the boundary is left out.
    fn walk<'a>(
        it: impl Iterator<Item = &'a (Timestamp, NodeId)>,
        before: NodeId,
        allowed: Option<&Allowed>,
        pool: usize,
    ) -> Vec<(Timestamp, NodeId)> {
        let mut out: Vec<(Timestamp, NodeId)> = Vec::new();
        for &(t, id) in it {
            if id >= before || allowed.is_some_and(|a| !a.contains(id)) {
                continue;
            }
            if out.len() >= pool && out.last().is_some_and(|&(lt, _)| lt != t) {
                break;
            }
            out.push((t, id));
        }
        out
    }
    let left = walk(by_time.range(..(ts, 0)).rev(), before, allowed, pool);
    let right = walk(
        by_time.range((Bound::Included((ts, 0)), Bound::Unbounded)),
        before,
        allowed,
        pool,
    );
    let mut all: Vec<(u64, NodeId)> = left
        .into_iter()
        .chain(right)
        .map(|(t, id)| (t.abs_diff(ts), id))
        .collect();
    all.sort_unstable_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
    // Keep every node tied with the last one kept, in either direction.
    if all.len() > pool {
        let cut = all[pool - 1].0;
        all.retain(|&(d, _)| d <= cut);
    }
    all.into_iter().map(|(_, id)| id).collect()
}

impl MemoryStore {
    /// The best `k` (default `config.candidates.k`) earlier nodes to compare
    /// node `id` with, best first. A scoped node is compared only with the
    /// nodes a search in its scope sees (scope containing its own), with
    /// BM25 statistics of those nodes; a global node with every node.
    pub fn candidates_for(&self, id: NodeId, k: Option<usize>) -> Result<Vec<CandidateMatch>> {
        let node = self.require(id)?;
        let cfg = self.config.candidates;
        let k = k.unwrap_or(cfg.k);
        let allowed = self.select(&Selection::scope(node.scope.clone())?);
        let allowed = allowed.as_ref();
        let before = |other: NodeId| other < id;
        let embedding = self.vectors.get(id).expect("every node has an embedding");

        // gathered from every source, then sorted and deduplicated once: the
        // ascending ids a set would hold (a long text's entities bring
        // hundreds, and a tree insert each cost more than the sort)
        let mut pool: Vec<NodeId> = Vec::new();
        for (other, _) in self
            .vectors
            .search_scoped(embedding, cfg.pool, allowed, Some(&before))?
        {
            pool.push(other);
        }
        // The node's own BM25 entry is its text as a query, already counted.
        let terms: Cow<'_, [(u32, u32)]> = match self.bm25.doc_terms(id) {
            Some(terms) => Cow::Borrowed(terms),
            None => Cow::Owned(
                self.bm25
                    .query_terms(&self.lexical_tokens(&node.content, &node.provenance)),
            ),
        };
        let discovery = rarest_terms(&terms, DISCOVERY_TERMS, |t| {
            self.bm25.term_stats(t).unwrap_or((0, ""))
        });
        for (other, _) in
            self.bm25
                .search_terms_recent(&discovery, cfg.pool, allowed, id, DISCOVERY_WINDOW)
        {
            pool.push(other);
        }
        for e in &node.entities {
            let carriers = self.nodes_with_entity(e);
            let end = carriers.partition_point(|&x| x < id);
            match allowed {
                None => pool.extend(&carriers[end.saturating_sub(cfg.pool)..end]),
                Some(a) => pool.extend(
                    carriers[..end]
                        .iter()
                        .rev()
                        .filter(|&&x| a.contains(x))
                        .take(cfg.pool),
                ),
            }
        }
        if let Some(ts) = node.timestamp {
            pool.extend(nearest_in_time(
                self.by_time.set(),
                ts,
                id,
                allowed,
                cfg.pool,
            ));
        }
        if pool.is_empty() {
            return Ok(Vec::new());
        }
        pool.sort_unstable();
        pool.dedup();
        let ids = pool;
        // Shared entities counted from the entity index's id lists, not by
        // reading each pooled node's entity strings: a long text's pool holds
        // hundreds of nodes with dozens of entities each, scattered in memory.
        // Stored entities are normalised and distinct, and the index lists
        // exactly their carriers, so the count is the same.
        let mut shared = vec![0u32; ids.len()];
        for e in &node.entities {
            if let Some(carriers) = self.entity_index.get(e) {
                count_members(&ids, carriers, &mut shared);
            }
        }
        let lexical = self.bm25.score_terms_scoped(&terms, &ids, allowed);
        let max_lexical = lexical.iter().copied().fold(0.0f32, f32::max);
        let similarities = self.vectors.similarities(embedding, &ids);
        let mut out: Vec<CandidateMatch> = ids
            .iter()
            .zip(&lexical)
            .zip(&shared)
            .zip(similarities)
            .map(|(((&other, &lex), &shared), similarity)| {
                let o = self.graph.get(other).expect("pooled ids are live");
                let signals = Signals {
                    vector: similarity.unwrap_or(0.0).max(0.0),
                    lexical: if max_lexical > 0.0 {
                        lex / max_lexical
                    } else {
                        0.0
                    },
                    entity: if node.entities.is_empty() {
                        0.0
                    } else {
                        shared as f32 / node.entities.len() as f32
                    },
                    temporal: temporal_signal(node.timestamp, o.timestamp, cfg.temporal_scale_s),
                };
                CandidateMatch {
                    id: other,
                    score: cfg.mix(&signals),
                    signals,
                }
            })
            .collect();
        out.sort_unstable_by(|a, b| b.score.total_cmp(&a.score).then(b.id.cmp(&a.id)));
        out.truncate(k);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The rule said plainly: rank the terms by (df, text), keep the first
    /// `cap`, then walk the terms keeping those.
    fn reference(terms: &[(u32, u32)], cap: usize, df: &[usize]) -> Vec<(u32, u32)> {
        if terms.len() <= cap {
            return terms.to_vec();
        }
        let mut ranked: Vec<(usize, String)> = terms
            .iter()
            .map(|&(t, _)| (df[t as usize], format!("t{t}")))
            .collect();
        ranked.sort();
        let kept: Vec<String> = ranked.into_iter().take(cap).map(|(_, s)| s).collect();
        terms
            .iter()
            .filter(|(t, _)| kept.contains(&format!("t{t}")))
            .copied()
            .collect()
    }

    proptest! {
        #[test]
        fn member_counts_match_contains(
            ids in prop::collection::btree_set(0u64..400, 0..60),
            members in prop::collection::btree_set(0u64..400, 0..400),
        ) {
            let ids: Vec<NodeId> = ids.into_iter().collect();
            let members: Vec<NodeId> = members.into_iter().collect();
            let mut got = vec![1u32; ids.len()];
            count_members(&ids, &members, &mut got);
            let want: Vec<u32> = ids.iter().map(|i| 1 + u32::from(members.contains(i))).collect();
            prop_assert_eq!(got, want);
        }

        #[test]
        fn rarest_terms_match_the_reference(
            present in prop::collection::btree_map(0u32..24, 1u32..4, 0..24),
            dfs in prop::collection::vec(0usize..6, 24),
            cap in 1usize..30,
        ) {
            let terms: Vec<(u32, u32)> = present.into_iter().collect();
            let texts: Vec<String> = (0..24).map(|t| format!("t{t}")).collect();
            let got = rarest_terms(&terms, cap, |t| (dfs[t as usize], texts[t as usize].as_str()));
            prop_assert_eq!(&*got, &reference(&terms, cap, &dfs)[..]);
            prop_assert!(got.len() <= cap);
        }
    }

    #[test]
    fn a_long_text_is_queried_with_its_rarest_terms() {
        // ids 0 "common" (df 100), 1 "mid" (10), 2 "rare" (1), with counts
        let terms = [(0u32, 2u32), (1, 1), (2, 2)];
        let stats = |t: u32| match t {
            0 => (100, "common"),
            1 => (10, "mid"),
            _ => (1, "rare"),
        };
        assert_eq!(*rarest_terms(&terms, 2, stats), [(1, 1), (2, 2)]);
        assert_eq!(*rarest_terms(&terms, 3, stats), terms[..]);
    }
}
