//! A query's per-node signals, the columns the controller reads of each
//! candidate, in one pass over a batch of nodes: lexical and dense matches
//! as shares of the query's best, the best passage, list ranks, agreement
//! with the names the query carries, the time match, the question share,
//! the node's style in the memory, its type scores, whether it has a
//! speaker, and how long the memory's nodes are (the same for every node).
//!
//! What is decided per query (the best scores, the names the query carries,
//! the time it asks about) comes in as a `SignalQuery`; the rules here are
//! the read path's, and `tests/test_read_signals.py` holds them to the
//! Python they replaced.

use crate::derived::TimeQuery;
use crate::error::Result;
use crate::filter::Allowed;
use crate::hashing::ShortKeyMap;
use crate::store::MemoryStore;
use crate::style::{speaker_key, StyleBasis};
use crate::types::NodeId;
use crate::vector::{DotKernel, VectorIndex};

/// The signal columns `read_signals` returns, in order.
pub const SIGNAL_COLUMNS: [&str; 18] = [
    "lexical",
    "dense",
    "dense_passage",
    "entity_match",
    "time_match",
    "asks",
    "dense_raw",
    "lexical_rank",
    "dense_rank",
    "length",
    "speaker_asks",
    "speaker_length",
    "type_episodic",
    "type_semantic",
    "type_procedural",
    "type_preference",
    "has_speaker",
    "memory_length",
];

/// What a query fixes for the signals of every node it measures.
#[derive(Clone, Debug)]
pub struct SignalQuery<'a> {
    pub text: &'a str,
    /// Related terms widening the lexical match (`SessionQuery::related`).
    pub related: &'a [(String, f64)],
    pub vector: &'a [f32],
    /// The lexical and vector rankings the query's anchors came from, best first.
    pub lexical_ranked: &'a [NodeId],
    pub vector_ranked: &'a [NodeId],
    /// The query's best lexical score, dense similarity and passage
    /// similarity: the scales of the share signals.
    pub best_lexical: f64,
    pub best_dense: f64,
    pub best_passage: f64,
    /// The entities the query names (normalised, as the store keeps them).
    pub named: &'a [String],
    pub time: TimeQuery,
    /// Measure each node's best passage (false: the passage column is NaN
    /// and every best passage 0, for a caller that measures them with
    /// another vector anyway).
    pub passages: bool,
}

/// `read_signals`' result: `SIGNAL_COLUMNS` per node (row-major), and the
/// index of each node's best-matching passage (0 for a text of one).
#[derive(Clone, Debug, PartialEq)]
pub struct NodeSignals {
    pub rows: Vec<[f64; SIGNAL_COLUMNS.len()]>,
    pub best_passage: Vec<u32>,
}

/// A score as a share of the query's best, in [0, 1] (NaN reads as 0).
pub(crate) fn share_of_best(x: f64, best: f64) -> f64 {
    if best > 0.0 {
        (x.max(0.0) / best).min(1.0)
    } else {
        0.0
    }
}

/// A list rank as a share: 1 at the top, 1 / (1 + rank / 9) below, 0 off the list.
fn rank_share(rank: Option<usize>) -> f64 {
    rank.map_or(0.0, |r| 1.0 / (1.0 + r as f64 / 9.0))
}

/// A cosine similarity as a share: itself inside (0, 1), 1 at or above, else 0 (NaN too).
pub(crate) fn raw_similarity(s: f64) -> f64 {
    if s > 0.0 && s < 1.0 {
        s
    } else if s >= 1.0 {
        1.0
    } else {
        0.0
    }
}

fn ranks(list: &[NodeId]) -> ShortKeyMap<NodeId, usize> {
    let mut out = ShortKeyMap::with_capacity_and_hasher(list.len(), Default::default());
    for (r, &id) in list.iter().enumerate() {
        out.insert(id, r);
    }
    out
}

impl MemoryStore {
    /// For each of `ids`, the best cosine similarity of its embedding with
    /// those of `against` (the evidence so far), in [0, 1]: how much a
    /// candidate repeats what was already found (0 when `against` is empty).
    /// An unknown id is an error.
    pub fn max_similarities(&self, ids: &[NodeId], against: &[NodeId]) -> Result<Vec<f64>> {
        let rows = against
            .iter()
            .map(|&id| self.require(id).map(|_| self.vectors.get(id)))
            .collect::<Result<Vec<_>>>()?;
        let rows: Vec<&[f32]> = rows.into_iter().flatten().collect();
        let kernel = DotKernel::detect();
        let mut sims = Vec::with_capacity(rows.len());
        ids.iter()
            .map(|&id| {
                self.require(id)?;
                let Some(v) = self.vectors.get(id) else {
                    return Ok(0.0);
                };
                if rows.is_empty() {
                    return Ok(0.0);
                }
                sims.clear();
                // (a dot product is symmetric to the bit: fma(a, b, c) = fma(b, a, c))
                kernel.dots_into(v, &rows, &mut sims);
                let best = sims.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                Ok(f64::from(best).clamp(0.0, 1.0))
            })
            .collect()
    }

    /// The signals of `ids` for one query (see the module). `allowed`: the
    /// scope the query reads (BM25 statistics), with its style basis. An
    /// unknown id is an error and nothing is measured.
    pub fn read_signals(
        &self,
        q: &SignalQuery<'_>,
        ids: &[NodeId],
        allowed: Option<&Allowed>,
        style_basis: Option<&StyleBasis>,
    ) -> Result<NodeSignals> {
        self.vectors.validate(q.vector)?;
        let nodes = ids
            .iter()
            .map(|&id| self.require(id))
            .collect::<Result<Vec<_>>>()?;
        let unit = VectorIndex::normalize(q.vector);
        let lexical = self.lexical_scores_related(q.text, q.related, ids, allowed);
        let times = self.time_matches(ids, q.time);
        let basis = self.basis_or_whole(style_basis);
        let styles = self.styles(ids, Some(&basis));
        let memory_length = basis.typical_length();
        let (lex_rank, vec_rank) = (ranks(q.lexical_ranked), ranks(q.vector_ranked));
        let mut rows = Vec::with_capacity(ids.len());
        let mut best_passage = Vec::with_capacity(ids.len());
        let similarities = self.vectors.similarities(&unit, ids);
        for (k, (&id, node)) in ids.iter().zip(&nodes).enumerate() {
            let dense = similarities[k].map_or(f64::NAN, f64::from);
            let (passage, at) = if q.passages {
                self.best_passage(&unit, id, similarities[k])
                    .map_or((f64::NAN, 0), |(s, i)| (f64::from(s), i))
            } else {
                (f64::NAN, 0)
            };
            best_passage.push(at);
            let speaker = speaker_key(node);
            let entity = if q.named.is_empty() {
                0.0
            } else if speaker.as_ref().is_some_and(|s| q.named.contains(s)) {
                1.0
            } else if node.entities.iter().any(|e| q.named.contains(e)) {
                0.6
            } else {
                0.0
            };
            let t = &node.types;
            let [length, speaker_asks, speaker_length] = styles[k];
            rows.push([
                share_of_best(f64::from(lexical[k]), q.best_lexical),
                share_of_best(dense, q.best_dense),
                share_of_best(passage, q.best_passage),
                entity,
                times[k],
                self.question_shares.get(&id).copied().unwrap_or(0.0),
                raw_similarity(dense),
                rank_share(lex_rank.get(&id).copied()),
                rank_share(vec_rank.get(&id).copied()),
                length,
                speaker_asks,
                speaker_length,
                f64::from(t.episodic),
                f64::from(t.semantic),
                f64::from(t.procedural),
                f64::from(t.preference),
                if speaker.is_some() { 1.0 } else { 0.0 },
                memory_length,
            ]);
        }
        Ok(NodeSignals { rows, best_passage })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::NewNode;
    use crate::store::StoreConfig;

    fn column(s: &NodeSignals, name: &str) -> Vec<f64> {
        let j = SIGNAL_COLUMNS.iter().position(|c| *c == name).unwrap();
        s.rows.iter().map(|r| r[j]).collect()
    }

    #[test]
    fn shares_ranks_names_and_times() {
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let mut a = NewNode::new("ana plays the cello", vec![1.0, 0.0]);
        a.provenance = vec![("speaker".into(), "Ana".into())];
        a.timestamp = Some(1_000_000);
        let mut b = NewNode::new("the garden in lisbon", vec![0.0, 1.0]);
        b.entities = vec!["lisbon".into()];
        let (a, b) = (s.add_node(a).unwrap(), s.add_node(b).unwrap());
        let named = vec!["ana".to_string(), "lisbon".to_string()];
        let q = SignalQuery {
            text: "cello",
            vector: &[1.0, 1.0],
            related: &[],
            lexical_ranked: &[a],
            vector_ranked: &[b, a],
            best_lexical: 0.0,
            best_dense: 0.5,
            best_passage: 0.5,
            named: &named,
            time: TimeQuery::Window(1_000_000, 1_000_000 + 86_400),
            passages: true,
        };
        let got = s.read_signals(&q, &[a, b, a], None, None).unwrap();
        assert_eq!(got.rows.len(), 3);
        assert_eq!(column(&got, "lexical"), vec![0.0; 3]); // no scale: 0
        assert_eq!(column(&got, "dense"), vec![1.0; 3]); // capped at the best
        assert_eq!(column(&got, "entity_match"), vec![1.0, 0.6, 1.0]);
        assert_eq!(column(&got, "lexical_rank"), vec![1.0, 0.0, 1.0]);
        let second = 1.0 / (1.0 + 1.0 / 9.0);
        assert_eq!(column(&got, "dense_rank"), vec![second, 1.0, second]);
        assert_eq!(column(&got, "time_match"), vec![1.0, 0.0, 1.0]);
        assert_eq!(column(&got, "has_speaker"), vec![1.0, 0.0, 1.0]);
        assert_eq!(got.best_passage, vec![0, 0, 0]);
        assert!(s.read_signals(&q, &[a, 9], None, None).is_err());
        // no node counted yet (no question shares): the memory has no length
        assert_eq!(column(&got, "memory_length"), vec![0.0; 3]);
        s.set_question_shares(&[(a, 0.0), (b, 1.0)]).unwrap();
        let got = s.read_signals(&q, &[a, b], None, None).unwrap();
        let mean = ((19f64).ln_1p() + (20f64).ln_1p()) / 2.0;
        assert_eq!(column(&got, "memory_length"), vec![mean / 10.0; 2]);
        assert_eq!(s.typical_length(None), mean / 10.0);
    }
}
