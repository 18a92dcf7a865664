//! One query's reads as a session: what the query fixes (its text, vector,
//! rankings, names and times), the record of the facts that change it has
//! measured, and the two reads the controller's first round needs: the
//! signals of a batch of nodes, and the pool the controller ranks before
//! seeding.
//!
//! The pool is the fused lexical + vector list, the nodes observed inside a
//! time window the query names, long observations whose best passage
//! matches, the time-order context of the strongest of them and the facts
//! their supersedes chains link. Between the first two reads and the
//! context, the query vector moves towards its best few matches (Rocchio
//! feedback, in embedding space) and every later read uses the moved one.
//! `tests/test_read_session.py` holds it to the Python rules it replaced.

use std::cmp::Ordering;
use std::collections::HashSet;

use crate::context::{self, ContextConfig};
use crate::coverage::{single_voice, CoverageQuery};
use crate::derived::TimeQuery;
use crate::derived::TimeRef;
use crate::error::Result;
use crate::filter::Allowed;
use crate::hashing::{ShortKeyMap, ShortKeySet};
use crate::signals::{raw_similarity, share_of_best, SignalQuery, SIGNAL_COLUMNS};
use crate::store::MemoryStore;
use crate::style::StyleBasis;
use crate::types::NodeId;
use crate::validity::{ChainMatchQuery, FactChain, FactState, FactTime};
use crate::vector::VectorIndex;

/// The validity columns a dated or tensed query adds (see `fact_signals`).
pub const FACT_COLUMNS: [&str; 4] = [
    "valid_at_query_time",
    "superseded",
    "not_yet_valid",
    "chain_match",
];

/// What a query fixes for every read of its session.
#[derive(Clone, Debug)]
pub struct SessionQuery {
    pub text: String,
    /// The related terms that widen the query's lexical match
    /// (`MemoryStore::related_terms`; empty: its own terms only).
    pub related: Vec<(String, f64)>,
    /// The query vector; the pool's feedback moves it (see the module).
    pub vector: Vec<f32>,
    /// The lexical and vector rankings the anchors came from, best first.
    pub lexical_ranked: Vec<NodeId>,
    pub vector_ranked: Vec<NodeId>,
    /// The scales of the share signals: the best lexical score, dense
    /// similarity and passage similarity (the latter two follow the vector).
    pub best_lexical: f64,
    pub best_dense: f64,
    pub best_passage: f64,
    /// The entities the query names, normalised.
    pub named: Vec<String>,
    /// The one speaker the query asks about, lower-cased, when its names
    /// point to exactly one person the memory knows as a speaker
    /// (`query_plan::one_speaker_named`); the answer's ranking reads it.
    pub speaker_asked: Option<String>,
    /// The people the memory knows (lower-cased, sorted; `MemoryStore::people`):
    /// a speakerless note headed by one of their labels is read as theirs.
    pub people: Vec<String>,
    pub time: TimeQuery,
    pub fact_time: FactTime,
}

/// How the answer's ranking (`ReadSession::rank`) reorders the scores the
/// evidence earned.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RankConfig {
    /// A fact ranked above the one that replaced it (at the query's time)
    /// gives it its place and follows right below, at this share of its score.
    pub replaced_below: f64,
    /// When the query asks about one speaker, what someone else said ranks
    /// at this share of its score (1: as scored): a question about what
    /// one person did or likes is answered in that person's own words far
    /// more often than in the other side of the conversation, which the
    /// support of adjacent turns lifts as much.
    pub other_speaker_share: f64,
}

/// A batch of nodes' signals: `SIGNAL_COLUMNS` per row, each node's best
/// passage, and the `FACT_COLUMNS` (NaN for a node in no chain) when the
/// query asks about a time and some node is in a chain.
#[derive(Clone, Debug, PartialEq)]
pub struct SignalBlock {
    pub rows: Vec<[f64; SIGNAL_COLUMNS.len()]>,
    pub best_passage: Vec<u32>,
    pub facts: Option<Vec<[f64; FACT_COLUMNS.len()]>>,
}

impl SignalBlock {
    fn empty() -> Self {
        SignalBlock {
            rows: Vec::new(),
            best_passage: Vec::new(),
            facts: None,
        }
    }

    /// This block's rows, then `other`'s; fact rows NaN where a block had none.
    fn extend(&mut self, other: SignalBlock) {
        let (n, m) = (self.rows.len(), other.rows.len());
        self.facts = match (self.facts.take(), other.facts) {
            (None, None) => None,
            (mine, theirs) => {
                let mut out = mine.unwrap_or_else(|| vec![[f64::NAN; 4]; n]);
                out.extend(theirs.unwrap_or_else(|| vec![[f64::NAN; 4]; m]));
                Some(out)
            }
        };
        self.rows.extend(other.rows);
        self.best_passage.extend(other.best_passage);
    }
}

/// How the pool is gathered (the plane's configuration).
#[derive(Clone, Debug)]
pub struct PoolPlan {
    /// At most this many nodes from a time window the query names (0: none).
    pub time_window_nodes: usize,
    /// Of a larger window, at most this many nodes are measured, evenly spread.
    pub window_scan: usize,
    /// Feedback: the weight of the mean of the `feedback_nodes` best matches
    /// added to the query vector (0: none).
    pub feedback_weight: f64,
    pub feedback_nodes: usize,
    /// The strongest this many nodes lend their time-order context and chains.
    pub context_seeds: usize,
    pub context: ContextConfig,
}

/// How many pool nodes came from where, in pool order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolSources {
    pub fused: usize,
    pub time_window: usize,
    pub passages: usize,
    pub context: usize,
    pub supersedes: usize,
}

/// The pool: its nodes in order with their signals, and where they came from.
#[derive(Clone, Debug, PartialEq)]
pub struct Pool {
    pub ids: Vec<NodeId>,
    pub signals: SignalBlock,
    pub sources: PoolSources,
}

/// One query's session: what it fixes, the facts it has measured and what
/// the support of a node reads: each measured node's topical match and
/// each episode's strength.
#[derive(Clone, Debug)]
pub struct ReadSession {
    pub query: SessionQuery,
    pub facts: FactState,
    /// node -> the topical match it lends its time-order neighbours
    pub topical: ShortKeyMap<NodeId, f64>,
    /// episode key -> how well the episode matches (the mean of its best
    /// three anchors' topical matches)
    pub episodes: ShortKeyMap<u64, f64>,
    /// the latest pool and its nodes' topical matches (see `anchor_context`)
    pool: (Vec<NodeId>, Vec<f64>),
    /// what an assessment reads of each node (see `Judged`)
    pub judged: Judged,
}

/// What the session knows of each node it measured or had judged: the
/// controller's relevance and the evidence score of an expansion's
/// candidate (`record`), agreement with the names the query carries and
/// the raw dense similarity (from its signals), its content coverage and
/// which of the query's tokens it holds (read when first assessed).
#[derive(Clone, Debug, Default)]
pub struct Judged {
    pub relevance: ShortKeyMap<NodeId, f64>,
    pub evidence: ShortKeyMap<NodeId, f64>,
    pub entity_ok: ShortKeyMap<NodeId, f64>,
    pub dense_raw: ShortKeyMap<NodeId, f64>,
    coverage: ShortKeyMap<NodeId, (f64, f64)>,
    tokens: ShortKeyMap<NodeId, Vec<bool>>,
    /// the query's content tokens with their IDF weight and presence in the
    /// memory, in query order (read on first use)
    terms: Option<Vec<(String, f64, bool)>>,
}

/// What an assessment reads: the query's tokens (sorted, each once) and
/// the content coverage's question (`coverage::CoverageQuery`).
#[derive(Clone, Debug, Default)]
pub struct AssessQuery {
    pub tokens: Vec<String>,
    pub coverage: CoverageQuery,
}

/// One assessed item: its node, score, and the signals the controller reads.
#[derive(Clone, Debug, PartialEq)]
pub struct AssessedItem {
    pub node: NodeId,
    pub score: f64,
    pub relevance: f64,
    pub entity_ok: f64,
    pub content_coverage: f64,
    pub other_coverage: f64,
    pub dense_raw: f64,
}

/// An assessment request's reading of the evidence: its items, the share
/// of the query's tokens the best five hold (`coverage`), the IDF-weighted
/// share of its content tokens the memory knows (`known_terms`) and the
/// best five hold (`covered_terms`), and the best relevance on the
/// traversal's frontier.
#[derive(Clone, Debug, PartialEq)]
pub struct Assessed {
    pub items: Vec<AssessedItem>,
    pub coverage: f64,
    pub known_terms: f64,
    pub covered_terms: f64,
    pub frontier_best: f64,
}

/// What a round's candidates add to their signals: how much each repeats
/// the evidence so far, its support and side matches, its episode's
/// strength and whether it shares a session with the node it came from.
pub const ROUND_COLUMNS: [&str; 6] = [
    "max_evidence_similarity",
    "support",
    "prev_match",
    "next_match",
    "episode_support",
    "same_session",
];

/// What a search result says of one evidence node: its text, observation
/// time and provenance, grounded time references, the span of its passage
/// that matches the query best (None for a text of one passage) and its
/// place in a supersedes chain (None outside one, or when asked not to).
#[derive(Clone, Debug, PartialEq)]
pub struct EvidenceFacts {
    pub text: String,
    pub timestamp: Option<crate::types::Timestamp>,
    pub provenance: Vec<(String, String)>,
    pub time_refs: Vec<TimeRef>,
    pub passage: Option<(u64, u64)>,
    pub chain: Option<FactChain>,
}

/// The cosine similarity of `vector` with each node's (NaN for a node
/// without a vector); a vector of the wrong size is an error.
fn similarities(store: &MemoryStore, vector: &[f32], ids: &[NodeId]) -> Result<Vec<f64>> {
    store.vectors().validate(vector)?;
    let unit = VectorIndex::normalize(vector);
    Ok(store
        .vectors()
        .similarities(&unit, ids)
        .into_iter()
        .map(|s| s.map_or(f64::NAN, f64::from))
        .collect())
}

/// Each id once, in first-seen order.
fn unique<'a>(ids: impl Iterator<Item = &'a NodeId>) -> Vec<NodeId> {
    let mut seen = HashSet::new();
    ids.copied().filter(|n| seen.insert(*n)).collect()
}

/// The query's content tokens in query order, each once, with its IDF
/// weight `ln(1 + n / (df + 0.5))` among the nodes the search reads and
/// whether any of them holds it.
fn term_weights(
    store: &MemoryStore,
    text: &str,
    content: &ShortKeySet<String>,
    allowed: Option<&Allowed>,
) -> Vec<(String, f64, bool)> {
    let mut out: Vec<(String, f64, bool)> = Vec::new();
    let tokens = store.tokenize(text);
    let mut n = store.bm25().len();
    let freqs: Vec<usize> = tokens
        .iter()
        .map(|t| {
            let (df, docs) = store.bm25().doc_freq_scoped(t, allowed);
            n = docs;
            df
        })
        .collect();
    for (t, f) in tokens.into_iter().zip(freqs) {
        if content.contains(&t) && !out.iter().any(|o| o.0 == t) {
            let w = (n as f64 / (f as f64 + 0.5)).ln_1p();
            out.push((t, w, f > 0));
        }
    }
    out
}

/// A node's plain topical match: the mean of its lexical and dense shares.
fn plain_match(row: &[f64; SIGNAL_COLUMNS.len()]) -> f64 {
    0.5 * row[0] + 0.5 * row[1]
}

/// The largest of `xs` (NaN when any is NaN, as an array's max is).
fn best_of(xs: &[f64]) -> f64 {
    xs.iter().copied().fold(f64::NEG_INFINITY, |a, b| {
        if a.is_nan() || b.is_nan() {
            f64::NAN
        } else {
            a.max(b)
        }
    })
}

/// Ids best first by `score`, ties by id (a NaN compares equal to anything).
fn best_first(ids: &[NodeId], score: &[f64]) -> Vec<NodeId> {
    let mut order: Vec<usize> = (0..ids.len()).collect();
    order.sort_by(|&a, &b| {
        score[b]
            .partial_cmp(&score[a])
            .unwrap_or(Ordering::Equal)
            .then(ids[a].cmp(&ids[b]))
    });
    order.into_iter().map(|i| ids[i]).collect()
}

impl ReadSession {
    pub fn new(query: SessionQuery) -> Self {
        ReadSession {
            query,
            facts: FactState::default(),
            topical: ShortKeyMap::default(),
            episodes: ShortKeyMap::default(),
            pool: (Vec::new(), Vec::new()),
            judged: Judged::default(),
        }
    }

    /// Note what a block's signals say of each node: its agreement with the
    /// names the query carries (1 when it names none) and its raw dense
    /// similarity (later reads replace earlier ones).
    fn note(&mut self, ids: &[NodeId], block: &SignalBlock) {
        let named = !self.query.named.is_empty();
        for (&id, row) in ids.iter().zip(&block.rows) {
            let ent = row[3];
            let ok = if named {
                (ent + if ent > 0.0 { 0.4 } else { 0.0 }).min(1.0)
            } else {
                1.0
            };
            self.judged.entity_ok.insert(id, ok);
            self.judged.dense_raw.insert(id, row[6]);
        }
    }

    /// Record the controller's relevance of `ids` and, for an expansion's
    /// candidates, their evidence scores (a seed keeps the traversal's).
    pub fn record(
        &mut self,
        ids: &[NodeId],
        relevance: &[f64],
        evidence: Option<&[f64]>,
    ) -> Result<()> {
        let same = relevance.len() == ids.len() && evidence.is_none_or(|e| e.len() == ids.len());
        if !same {
            return Err(crate::error::Error::InvalidInput(format!(
                "{} ids, {} relevance values and {} evidence scores",
                ids.len(),
                relevance.len(),
                evidence.map_or(ids.len(), <[f64]>::len)
            )));
        }
        self.judged
            .relevance
            .extend(ids.iter().copied().zip(relevance.iter().copied()));
        if let Some(e) = evidence {
            self.judged
                .evidence
                .extend(ids.iter().copied().zip(e.iter().copied()));
        }
        Ok(())
    }

    /// Everything gathered, best first on one scale (ties by id): an
    /// expansion candidate's evidence score, a seed's traversal score
    /// (`found`: the traversal's evidence with its scores). A query about a
    /// time or tense ranks the best gathered fact of a chain that held then
    /// where a fact of the chain that did not hold, and ranked above it,
    /// stood, and that fact right below it (times `replaced_below`): the
    /// answer comes first and the history stays beside it, in the place the
    /// better of them earned (pushing the replaced fact down to wherever its
    /// replacement ranked lost both from the top when the replacement
    /// matched the query's words worse). Before that, a query that asks
    /// about one speaker ranks what other speakers said at
    /// `other_speaker_share` of its score (`RankConfig`); a node without a
    /// speaker is said by the one person whose label heads its lines, if
    /// one does (`coverage::single_voice`), and otherwise keeps its score.
    pub fn rank(
        &self,
        store: &MemoryStore,
        found: &[(NodeId, f64)],
        cfg: &RankConfig,
    ) -> Vec<(NodeId, f64)> {
        let replaced_below = cfg.replaced_below;
        let mut ranked: Vec<(NodeId, f64)> = found
            .iter()
            .map(|&(n, s)| (n, self.judged.evidence.get(&n).copied().unwrap_or(s)))
            .collect();
        if let Some(asked) = &self.query.speaker_asked {
            if cfg.other_speaker_share != 1.0 {
                for (n, score) in &mut ranked {
                    let Some(node) = store.get(*n) else { continue };
                    let other = match context::speaker_of(node) {
                        Some(sp) => !context::same_speaker(sp, asked),
                        None => single_voice(&node.content, &self.query.people)
                            .is_some_and(|v| !context::same_speaker(&v, asked)),
                    };
                    if other {
                        *score *= cfg.other_speaker_share;
                    }
                }
            }
        }
        if self.query.fact_time != FactTime::Neutral && !store.facts().is_empty() {
            let at: ShortKeyMap<NodeId, usize> = ranked
                .iter()
                .enumerate()
                .map(|(i, &(n, _))| (n, i))
                .collect();
            // in order: a fact that held, raised for one replaced fact of
            // its chain, may be raised again for a later, better ranked one
            for (node, holders) in self.facts.replaced() {
                let Some(&i) = at.get(&node) else { continue };
                let mut best: Option<(usize, f64)> = None;
                for h in holders {
                    if let Some(&j) = at.get(&h) {
                        let v = ranked[j].1;
                        if best.is_none_or(|(_, b)| v > b) {
                            best = Some((j, v));
                        }
                    }
                }
                if let Some((j, b)) = best {
                    let old = ranked[i].1;
                    if old >= b {
                        // the fact that held takes the replaced one's place
                        ranked[j].1 = old;
                        ranked[i].1 = old * replaced_below;
                    }
                }
            }
        }
        ranked.sort_by(|a, b| {
            b.1.partial_cmp(&a.1)
                .unwrap_or(Ordering::Equal)
                .then(a.0.cmp(&b.0))
        });
        ranked
    }

    /// An assessment's reading of `top` (ranked items with their scores):
    /// see `Assessed`. Coverage and token rows are read once per node per
    /// query. An unknown id is an error and reads nothing new.
    pub fn assess(
        &mut self,
        store: &MemoryStore,
        q: &AssessQuery,
        top: &[(NodeId, f64)],
        frontier: &[NodeId],
        allowed: Option<&Allowed>,
    ) -> Result<Assessed> {
        let ids: Vec<NodeId> = top.iter().map(|&(n, _)| n).collect();
        let best = &ids[..ids.len().min(5)];
        let j = &mut self.judged;
        let todo: Vec<NodeId> = unique(best.iter().filter(|n| !j.tokens.contains_key(n)));
        let rows = store.tokens_present(&todo, &q.tokens)?;
        let todo_cov: Vec<NodeId> = unique(ids.iter().filter(|n| !j.coverage.contains_key(n)));
        let cov = store.content_coverage(&todo_cov, &q.coverage, allowed)?;
        j.tokens.extend(todo.into_iter().zip(rows));
        j.coverage.extend(todo_cov.into_iter().zip(cov));
        let mut held = vec![false; q.tokens.len()];
        for n in best {
            for (h, &t) in held.iter_mut().zip(&j.tokens[n]) {
                *h |= t;
            }
        }
        let coverage = if q.tokens.is_empty() {
            1.0
        } else {
            held.iter().filter(|&&h| h).count() as f64 / q.tokens.len() as f64
        };
        let terms = j.terms.get_or_insert_with(|| {
            term_weights(store, &self.query.text, &q.coverage.content_tokens, allowed)
        });
        let covered: HashSet<&str> = q
            .tokens
            .iter()
            .zip(&held)
            .filter(|(_, &h)| h)
            .map(|(t, _)| t.as_str())
            .collect();
        // sums from 0, in query order
        let total = terms.iter().fold(0.0, |a, (_, w, _)| a + w);
        let (known_terms, covered_terms) = if total > 0.0 {
            let known = terms.iter().filter(|t| t.2).fold(0.0, |a, t| a + t.1);
            let hit = terms
                .iter()
                .filter(|t| covered.contains(t.0.as_str()))
                .fold(0.0, |a, t| a + t.1);
            (known / total, hit / total)
        } else {
            (1.0, 1.0)
        };
        let relevance = |n: &NodeId| j.relevance.get(n).copied();
        let frontier_best = frontier
            .iter()
            .map(|n| relevance(n).unwrap_or(0.0))
            // as Python's max: the first, replaced by any greater
            .fold(None, |b: Option<f64>, v| match b {
                Some(b) if v <= b || v.is_nan() => Some(b),
                _ => Some(v),
            })
            .unwrap_or(0.0);
        let items = top
            .iter()
            .map(|&(node, score)| {
                let (content, other) = j.coverage[&node];
                AssessedItem {
                    node,
                    score,
                    relevance: relevance(&node).unwrap_or(0.0),
                    entity_ok: j.entity_ok.get(&node).copied().unwrap_or(1.0),
                    content_coverage: content,
                    other_coverage: other,
                    dense_raw: j.dense_raw.get(&node).copied().unwrap_or(0.0),
                }
            })
            .collect();
        Ok(Assessed {
            items,
            coverage,
            known_terms,
            covered_terms,
            frontier_best,
        })
    }

    /// The content coverage of `ids` (read once per node per query).
    pub fn coverages(
        &mut self,
        store: &MemoryStore,
        q: &AssessQuery,
        ids: &[NodeId],
        allowed: Option<&Allowed>,
    ) -> Result<Vec<(f64, f64)>> {
        let j = &mut self.judged;
        let todo: Vec<NodeId> = unique(ids.iter().filter(|n| !j.coverage.contains_key(n)));
        let cov = store.content_coverage(&todo, &q.coverage, allowed)?;
        j.coverage.extend(todo.into_iter().zip(cov));
        Ok(ids.iter().map(|n| j.coverage[n]).collect())
    }

    /// The topical match each row lends its neighbours as support: its plain
    /// match, or 0 for a fact of a supersedes chain that held at none of a
    /// named time (a present-tense cue is too weak to take the old value's
    /// context away; a fact that held for part of the time lends all of it).
    pub fn supporting_match(&self, block: &SignalBlock) -> Vec<f64> {
        let dated = matches!(self.query.fact_time, FactTime::Window(..));
        block
            .rows
            .iter()
            .enumerate()
            .map(|(k, row)| {
                let held = match (&block.facts, dated) {
                    (Some(f), true) => f[k][0],
                    _ => f64::NAN,
                };
                if held <= 0.0 {
                    0.0
                } else {
                    plain_match(row)
                }
            })
            .collect()
    }

    /// The support of the latest pool's nodes, as (support, previous match,
    /// next match, episode support) rows: the session's topical matches
    /// become the pool's, and each episode's strength the mean of its best
    /// three (0 for a node in no episode).
    pub fn anchor_context(
        &mut self,
        store: &MemoryStore,
        cfg: &ContextConfig,
        allowed: Option<&Allowed>,
    ) -> Vec<[f64; 4]> {
        let (ids, matched) = &self.pool;
        self.topical = ids.iter().copied().zip(matched.iter().copied()).collect();
        let keys = store.run_episode_keys(ids, allowed);
        let mut by_episode: ShortKeyMap<u64, Vec<f64>> = ShortKeyMap::default();
        for (&ep, &m) in keys.iter().zip(matched) {
            if ep != 0 {
                by_episode.entry(ep).or_default().push(m);
            }
        }
        self.episodes = by_episode
            .into_iter()
            .map(|(ep, mut v)| {
                v.sort_by(|a, b| b.partial_cmp(a).unwrap_or(Ordering::Equal));
                // summed best first, from 0, as the mean of the best three
                let top = v.iter().take(3).fold(0.0, |acc, x| acc + x);
                (ep, top / 3.0)
            })
            .collect();
        let near = context::context_matches(store, ids, &mut self.topical, None, allowed, cfg);
        near.iter()
            .zip(&keys)
            .map(|(n, ep)| [n[0], n[1], n[2], self.episode_strength(*ep)])
            .collect()
    }

    fn episode_strength(&self, ep: u64) -> f64 {
        self.episodes.get(&ep).copied().unwrap_or(0.0)
    }

    /// An expansion round's candidates: their signals and `ROUND_COLUMNS`
    /// (`from` the nodes they were reached from, `evidence` what was found
    /// so far). Each candidate's topical match enters the session before it
    /// is measured, so a candidate's context reads those before it. An
    /// unknown id is an error and changes nothing.
    #[allow(clippy::too_many_arguments)]
    pub fn round(
        &mut self,
        store: &MemoryStore,
        ids: &[NodeId],
        from: &[NodeId],
        evidence: &[NodeId],
        cfg: &ContextConfig,
        allowed: Option<&Allowed>,
        basis: Option<&StyleBasis>,
    ) -> Result<(SignalBlock, Vec<[f64; ROUND_COLUMNS.len()]>)> {
        let repeats = store.max_similarities(ids, evidence)?;
        let same = store.same_sessions(ids, from)?;
        let block = self.signals(store, ids, allowed, basis)?;
        let own = self.supporting_match(&block);
        let near =
            context::context_matches(store, ids, &mut self.topical, Some(&own), allowed, cfg);
        let keys = store.run_episode_keys(ids, allowed);
        let extra = (0..ids.len())
            .map(|k| {
                [
                    repeats[k],
                    near[k][0],
                    near[k][1],
                    near[k][2],
                    self.episode_strength(keys[k]),
                    f64::from(u8::from(same[k])),
                ]
            })
            .collect();
        Ok((block, extra))
    }

    /// What the result says of each of `ids` (see `EvidenceFacts`), the best
    /// passage by the session's (moved) vector, the chains only when
    /// `chains`. An unknown id is an error.
    pub fn evidence(
        &self,
        store: &MemoryStore,
        ids: &[NodeId],
        chains: bool,
        allowed: Option<&Allowed>,
    ) -> Result<Vec<EvidenceFacts>> {
        let best = store.passage_similarities(&self.query.vector, ids)?;
        let mut chain_of = if chains {
            store.fact_chains_scoped(ids, allowed)
        } else {
            vec![None; ids.len()]
        };
        ids.iter()
            .zip(best)
            .enumerate()
            .map(|(k, (&id, best))| {
                let node = store.require(id)?;
                let spans = store.passage_spans(id)?;
                let at = best.map_or(0, |(_, i)| i as usize);
                Ok(EvidenceFacts {
                    text: node.content.clone(),
                    timestamp: node.timestamp,
                    provenance: node.provenance.clone(),
                    time_refs: store.time_refs(id).to_vec(),
                    passage: spans.get(at).copied(),
                    chain: chain_of[k].take(),
                })
            })
            .collect()
    }

    /// The signals of `ids` (see `SignalBlock`), recording which facts held.
    /// An unknown id or a vector of the wrong size is an error and records
    /// nothing.
    pub fn signals(
        &mut self,
        store: &MemoryStore,
        ids: &[NodeId],
        allowed: Option<&Allowed>,
        basis: Option<&StyleBasis>,
    ) -> Result<SignalBlock> {
        let mut facts = self.facts.clone();
        let block = Self::measure(&self.query, &mut facts, store, ids, allowed, basis, true)?;
        self.facts = facts;
        self.note(ids, &block);
        Ok(block)
    }

    /// `passages`: see `SignalQuery::passages`.
    #[allow(clippy::too_many_arguments)]
    fn measure(
        q: &SessionQuery,
        facts: &mut FactState,
        store: &MemoryStore,
        ids: &[NodeId],
        allowed: Option<&Allowed>,
        basis: Option<&StyleBasis>,
        passages: bool,
    ) -> Result<SignalBlock> {
        let sq = SignalQuery {
            text: &q.text,
            related: &q.related,
            vector: &q.vector,
            lexical_ranked: &q.lexical_ranked,
            vector_ranked: &q.vector_ranked,
            best_lexical: q.best_lexical,
            best_dense: q.best_dense,
            best_passage: q.best_passage,
            named: &q.named,
            time: q.time,
            passages,
        };
        let got = store.read_signals(&sq, ids, allowed, basis)?;
        let chain = ChainMatchQuery {
            text: &q.text,
            vector: &q.vector,
            best_lexical: q.best_lexical,
            best_dense: q.best_dense,
        };
        let cols = store.fact_signals(facts, ids, q.fact_time, &chain, allowed)?;
        let facts = cols.map(|c| {
            (0..ids.len())
                .map(|i| {
                    [
                        c.valid_at_query_time[i],
                        c.superseded[i],
                        c.not_yet_valid[i],
                        c.chain_match[i],
                    ]
                })
                .collect()
        });
        Ok(SignalBlock {
            rows: got.rows,
            best_passage: got.best_passage,
            facts,
        })
    }

    /// The pool (see the module): `fused` first, then the nodes of the
    /// query's time window, `passage_hits`, the time-order context of the
    /// `context_seeds` strongest and their chains' facts, each node once.
    /// Moves the session's vector by the feedback. On an error the session
    /// is left as it was.
    pub fn pool(
        &mut self,
        store: &MemoryStore,
        fused: &[NodeId],
        passage_hits: &[NodeId],
        plan: &PoolPlan,
        allowed: Option<&Allowed>,
        basis: Option<&StyleBasis>,
    ) -> Result<Pool> {
        let mut next = self.clone();
        let pool = next.gather(store, fused, passage_hits, plan, allowed, basis)?;
        next.pool = (pool.ids.clone(), next.supporting_match(&pool.signals));
        next.note(&pool.ids, &pool.signals);
        *self = next;
        Ok(pool)
    }

    fn gather(
        &mut self,
        store: &MemoryStore,
        fused: &[NodeId],
        passage_hits: &[NodeId],
        plan: &PoolPlan,
        allowed: Option<&Allowed>,
        basis: Option<&StyleBasis>,
    ) -> Result<Pool> {
        let mut ids: Vec<NodeId> = fused.to_vec();
        let mut seen: ShortKeySet<NodeId> = ids.iter().copied().collect();
        let mut sources = PoolSources {
            fused: fused.len(),
            ..PoolSources::default()
        };
        if let (TimeQuery::Window(lo, hi), true) = (self.query.time, plan.time_window_nodes > 0) {
            let inside = self.window_nodes(store, lo, hi, &seen, plan, allowed)?;
            sources.time_window = inside.len();
            seen.extend(inside.iter().copied());
            ids.extend(inside);
        }
        for &id in passage_hits {
            if seen.insert(id) {
                ids.push(id);
                sources.passages += 1;
            }
        }
        let feedback = plan.feedback_weight > 0.0 && plan.feedback_nodes > 0 && !ids.is_empty();
        // With feedback the passages are measured once, with the moved
        // vector (the feedback's choice reads lexical and dense matches only).
        let mut block = self.signals_inner(store, &ids, allowed, basis, !feedback)?;
        let mut raw: Vec<f64> = block.rows.iter().map(plain_match).collect();
        if feedback {
            let top: Vec<NodeId> = best_first(&ids, &raw)
                .into_iter()
                .take(plan.feedback_nodes)
                .collect();
            if self.feedback(store, &top, plan.feedback_weight)? {
                self.remeasure_dense(store, &ids, &mut block)?;
                raw = block.rows.iter().map(plain_match).collect();
            } else {
                self.measure_passages(store, &ids, &mut block, false)?;
            }
        }
        let strongest: Vec<NodeId> = best_first(&ids, &raw)
            .into_iter()
            .take(plan.context_seeds)
            .collect();
        let near = strongest
            .iter()
            .flat_map(|&id| context::temporal_context(store, id, allowed, &plan.context))
            .map(|(other, _)| other);
        let fresh: Vec<NodeId> = near.filter(|n| seen.insert(*n)).collect();
        sources.context = self.append(store, &mut ids, &mut block, fresh, allowed, basis)?;
        let chained = store.chain_relatives(&strongest, self.query.fact_time, allowed);
        let fresh: Vec<NodeId> = chained.into_iter().filter(|n| seen.insert(*n)).collect();
        sources.supersedes = self.append(store, &mut ids, &mut block, fresh, allowed, basis)?;
        Ok(Pool {
            ids,
            signals: block,
            sources,
        })
    }

    /// `fresh` nodes and their signals after the pool's; how many.
    fn append(
        &mut self,
        store: &MemoryStore,
        ids: &mut Vec<NodeId>,
        block: &mut SignalBlock,
        fresh: Vec<NodeId>,
        allowed: Option<&Allowed>,
        basis: Option<&StyleBasis>,
    ) -> Result<usize> {
        if !fresh.is_empty() {
            block.extend(self.signals_inner(store, &fresh, allowed, basis, true)?);
        }
        let n = fresh.len();
        ids.extend(fresh);
        Ok(n)
    }

    fn signals_inner(
        &mut self,
        store: &MemoryStore,
        ids: &[NodeId],
        allowed: Option<&Allowed>,
        basis: Option<&StyleBasis>,
        passages: bool,
    ) -> Result<SignalBlock> {
        if ids.is_empty() {
            return Ok(SignalBlock::empty());
        }
        Self::measure(
            &self.query,
            &mut self.facts,
            store,
            ids,
            allowed,
            basis,
            passages,
        )
    }

    /// The nodes observed in `[lo, hi]` not in the pool yet, in time order;
    /// of more than the plan takes, the best topical matches among an even
    /// spread of at most `window_scan` of them.
    fn window_nodes(
        &self,
        store: &MemoryStore,
        lo: i64,
        hi: i64,
        seen: &ShortKeySet<NodeId>,
        plan: &PoolPlan,
        allowed: Option<&Allowed>,
    ) -> Result<Vec<NodeId>> {
        let inside: Vec<NodeId> = store
            .timeline_window(lo, hi, allowed)
            .into_iter()
            .filter(|n| !seen.contains(n))
            .collect();
        if inside.len() <= plan.time_window_nodes {
            return Ok(inside);
        }
        let step = (inside.len() / plan.window_scan.max(1)).max(1);
        let scanned: Vec<NodeId> = inside
            .into_iter()
            .step_by(step)
            .take(plan.window_scan)
            .collect();
        let lex: Vec<f64> = store
            .lexical_scores_related(&self.query.text, &self.query.related, &scanned, allowed)
            .into_iter()
            .map(f64::from)
            .collect();
        let sims = similarities(store, &self.query.vector, &scanned)?;
        let top = |xs: &[f64]| xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (top_lex, top_sim) = (top(&lex), top(&sims));
        let matched: Vec<f64> = lex
            .iter()
            .zip(&sims)
            .map(|(&a, &b)| share_of_best(a, top_lex) + share_of_best(b, top_sim))
            .collect();
        Ok(best_first(&scanned, &matched)
            .into_iter()
            .take(plan.time_window_nodes)
            .collect())
    }

    /// Move the vector towards the mean of `top`'s embeddings by `weight`,
    /// unit length; false (nothing moved) when the sum has no length.
    fn feedback(&mut self, store: &MemoryStore, top: &[NodeId], weight: f64) -> Result<bool> {
        let centroid = store.mean_embedding(top)?;
        // in f32, as the query vector is kept
        let w = weight as f32;
        let moved: Vec<f32> = self
            .query
            .vector
            .iter()
            .zip(&centroid)
            .map(|(&q, &c)| q + w * c)
            .collect();
        let norm = moved
            .iter()
            .map(|&x| f64::from(x) * f64::from(x))
            .sum::<f64>()
            .sqrt() as f32;
        if norm.is_nan() || norm <= 0.0 {
            return Ok(false);
        }
        self.query.vector = moved.into_iter().map(|x| x / norm).collect();
        Ok(true)
    }

    /// The passage column of `block` (the first rows, `ids`) with the
    /// session's vector, as `read_signals` measures it; `rescale`: the
    /// session's passage scale first set to these nodes' best.
    fn measure_passages(
        &mut self,
        store: &MemoryStore,
        ids: &[NodeId],
        block: &mut SignalBlock,
        rescale: bool,
    ) -> Result<()> {
        let passages = store.passage_similarities(&self.query.vector, ids)?;
        self.set_passages(block, &passages, rescale);
        Ok(())
    }

    /// The passage column of `block` from each node's best passage.
    fn set_passages(
        &mut self,
        block: &mut SignalBlock,
        passages: &[Option<(f32, u32)>],
        rescale: bool,
    ) {
        let sims: Vec<f64> = passages
            .iter()
            .map(|p| p.map_or(f64::NAN, |(s, _)| f64::from(s)))
            .collect();
        if rescale {
            self.query.best_passage = best_of(&sims);
        }
        for (k, row) in block.rows.iter_mut().enumerate() {
            row[2] = share_of_best(sims[k], self.query.best_passage);
            block.best_passage[k] = passages[k].map_or(0, |(_, i)| i);
        }
    }

    /// The dense columns of `block` (the first rows, `ids`) measured again
    /// with the moved vector, and the session's dense scales set to the
    /// pool's best.
    fn remeasure_dense(
        &mut self,
        store: &MemoryStore,
        ids: &[NodeId],
        block: &mut SignalBlock,
    ) -> Result<()> {
        // one dot product per node serves both columns (a node without
        // passages is its own best passage)
        store.vectors().validate(&self.query.vector)?;
        let unit = VectorIndex::normalize(&self.query.vector);
        let whole = store.vectors().similarities(&unit, ids);
        self.set_passages(block, &store.best_passages(&unit, ids, &whole), true);
        let sims: Vec<f64> = whole
            .into_iter()
            .map(|s| s.map_or(f64::NAN, f64::from))
            .collect();
        self.query.best_dense = best_of(&sims);
        for (k, row) in block.rows.iter_mut().enumerate() {
            row[1] = share_of_best(sims[k], self.query.best_dense);
            row[6] = raw_similarity(sims[k]);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::NewNode;
    use crate::store::StoreConfig;

    /// The default ranking with `replaced_below`, what others said as scored.
    fn ranked_at(replaced_below: f64) -> RankConfig {
        RankConfig {
            replaced_below,
            other_speaker_share: 1.0,
        }
    }

    fn session(text: &str, vector: Vec<f32>, time: TimeQuery) -> ReadSession {
        ReadSession::new(SessionQuery {
            text: text.into(),
            related: Vec::new(),
            vector,
            lexical_ranked: Vec::new(),
            vector_ranked: Vec::new(),
            best_lexical: 1.0,
            best_dense: 1.0,
            best_passage: 1.0,
            named: Vec::new(),
            speaker_asked: None,
            people: Vec::new(),
            time,
            fact_time: FactTime::Neutral,
        })
    }

    fn plan() -> PoolPlan {
        PoolPlan {
            time_window_nodes: 2,
            window_scan: 4096,
            feedback_weight: 0.0,
            feedback_nodes: 3,
            context_seeds: 1,
            context: ContextConfig {
                second_step_decay: 0.7,
                reply_link: 1.0,
            },
        }
    }

    fn chat() -> (MemoryStore, Vec<NodeId>) {
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let texts = [
            "we went hiking",
            "the lake was cold",
            "cello lessons start",
            "tea",
            "more tea",
        ];
        let ids = texts
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut n = NewNode::new(*t, vec![1.0, i as f32]);
                n.timestamp = Some(1_000 * i as i64);
                s.add_node(n).unwrap()
            })
            .collect();
        (s, ids)
    }

    #[test]
    fn pool_orders_sources_and_keeps_each_node_once() {
        let (s, ids) = chat();
        let mut r = session("cello", vec![1.0, 0.0], TimeQuery::Window(3_000, 4_001));
        let pool = r
            .pool(&s, &[ids[2]], &[ids[2], ids[0]], &plan(), None, None)
            .unwrap();
        // fused, the window's two, the passage hit not yet in, then context
        assert_eq!(&pool.ids[..4], &[ids[2], ids[3], ids[4], ids[0]]);
        assert_eq!(pool.sources.fused, 1);
        assert_eq!(pool.sources.time_window, 2);
        assert_eq!(pool.sources.passages, 1);
        assert_eq!(pool.ids.len(), 4 + pool.sources.context);
        let unique: HashSet<_> = pool.ids.iter().collect();
        assert_eq!(unique.len(), pool.ids.len());
        assert_eq!(pool.signals.rows.len(), pool.ids.len());
        assert!(pool.signals.facts.is_none());
    }

    #[test]
    fn a_window_leaves_out_the_node_at_its_end() {
        let (s, ids) = chat();
        // [3000, 4000): the node observed at 4000 is the next window's
        let mut r = session("cello", vec![1.0, 0.0], TimeQuery::Window(3_000, 4_000));
        let pool = r.pool(&s, &[], &[], &plan(), None, None).unwrap();
        assert_eq!(pool.sources.time_window, 1);
        assert_eq!(pool.ids[0], ids[3]);
        let matches = s.time_matches(&ids[3..], TimeQuery::Window(3_000, 4_000));
        assert_eq!(matches[0], 1.0);
        assert!(matches[1] < 1.0);
        // a reference ending where the window begins only touches it
        let touching = s.time_matches(&ids[2..3], TimeQuery::Window(3_001, 4_000));
        assert!(touching[0] < 1.0);
    }

    #[test]
    fn feedback_moves_the_vector_and_an_error_changes_nothing() {
        let (s, ids) = chat();
        let mut r = session("tea", vec![1.0, 0.0], TimeQuery::None);
        let mut p = plan();
        p.feedback_weight = 0.5;
        let before = r.query.vector.clone();
        assert!(r.pool(&s, &[ids[3], 99], &[], &p, None, None).is_err());
        assert_eq!(r.query.vector, before);
        let pool = r.pool(&s, &[ids[3], ids[4]], &[], &p, None, None).unwrap();
        assert_ne!(r.query.vector, before);
        let len: f32 = r.query.vector.iter().map(|x| x * x).sum();
        assert!((len - 1.0).abs() < 1e-5);
        // the dense share is of the pool's best, so its best is 1
        let best = pool.signals.rows[..2]
            .iter()
            .map(|row| row[1])
            .fold(0.0, f64::max);
        assert_eq!(best, 1.0);
    }

    #[test]
    fn a_pool_whose_feedback_cannot_move_measures_passages_with_its_own_vector() {
        // every node points along x, the query against it: the moved vector
        // (query + 0.5 * their mean) has no length, so the vector stays
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        // passages that lean the query's way (a passage share above 0)
        let ids: Vec<NodeId> = ["tea at noon", "more tea", "tea again"]
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut n = NewNode::new(*t, vec![1.0, 0.0]);
                n.passages = vec![
                    crate::passages::NewPassage::new(0, 3, vec![-1.0, 0.5 + i as f32]),
                    crate::passages::NewPassage::new(4, t.len() as u64, vec![0.2, 1.0]),
                ];
                s.add_node(n).unwrap()
            })
            .collect();
        let mut p = plan();
        p.feedback_weight = 0.5;
        p.context_seeds = 0;
        let mut r = session("tea", vec![-0.5, 0.0], TimeQuery::None);
        let pool = r.pool(&s, &ids, &[], &p, None, None).unwrap();
        assert_eq!(r.query.vector, vec![-0.5, 0.0]);
        let mut plain = session("tea", vec![-0.5, 0.0], TimeQuery::None);
        let measured = plain.signals(&s, &pool.ids, None, None).unwrap();
        assert_eq!(pool.signals.best_passage, measured.best_passage);
        assert!(measured.rows.iter().all(|row| row[2] > 0.0));
        for (a, b) in pool.signals.rows.iter().zip(&measured.rows) {
            // NaN-aware: every column, the passage share included
            assert_eq!(a.map(f64::to_bits), b.map(f64::to_bits));
        }
    }

    #[test]
    fn anchors_then_a_round_read_the_topical_matches_and_fail_whole() {
        let (s, ids) = chat();
        let mut r = session("tea", vec![1.0, 0.0], TimeQuery::None);
        let pool = r
            .pool(&s, &[ids[3], ids[4]], &[], &plan(), None, None)
            .unwrap();
        let near = r.anchor_context(&s, &plan().context, None);
        assert_eq!(near.len(), pool.ids.len());
        assert_eq!(r.topical.len(), pool.ids.len());
        let before = r.topical.clone();
        let cfg = plan().context;
        // an unknown candidate, or a `from` list of another length: nothing changes
        assert!(r
            .round(
                &s,
                &[ids[0], 99],
                &[ids[3], ids[3]],
                &[ids[3]],
                &cfg,
                None,
                None
            )
            .is_err());
        assert!(r
            .round(&s, &[ids[0]], &[], &[ids[3]], &cfg, None, None)
            .is_err());
        assert_eq!(r.topical, before);
        let (block, extra) = r
            .round(&s, &[ids[0]], &[ids[3]], &[ids[3]], &cfg, None, None)
            .unwrap();
        assert_eq!(block.rows.len(), 1);
        assert_eq!(extra[0].len(), ROUND_COLUMNS.len());
        // the round's candidate now lends its own match
        assert!(r.topical.contains_key(&ids[0]));
        for v in extra[0] {
            assert!((0.0..=1.0).contains(&v), "{v}");
        }
    }

    #[test]
    fn the_fact_that_held_takes_the_place_of_the_one_it_replaced() {
        use crate::facts::Supersedes;
        use crate::types::EdgeOrigin;
        let (mut s, ids) = chat();
        // "more tea" replaced "tea"
        s.add_supersedes(Supersedes {
            new: ids[4],
            old: ids[3],
            weight: 0.9,
            origin: EdgeOrigin::Controller,
        })
        .unwrap();
        // the replaced fact outranks two turns that outrank its replacement
        let found = [
            (ids[3], 0.9),
            (ids[0], 0.8),
            (ids[1], 0.7),
            (ids[4], 0.2),
            (ids[2], 0.1),
        ];
        let mut neutral = session("tea", vec![1.0, 0.0], TimeQuery::None);
        neutral.signals(&s, &ids, None, None).unwrap();
        let order = |r: &[(NodeId, f64)]| r.iter().map(|&(n, _)| n).collect::<Vec<_>>();
        assert_eq!(
            order(&neutral.rank(&s, &found, &ranked_at(0.99))),
            [ids[3], ids[0], ids[1], ids[4], ids[2]]
        );
        for fact_time in [FactTime::Present(None), FactTime::Present(Some(10_000))] {
            let mut present = session("tea", vec![1.0, 0.0], TimeQuery::None);
            present.query.fact_time = fact_time;
            present.signals(&s, &ids, None, None).unwrap();
            let ranked = present.rank(&s, &found, &ranked_at(0.99));
            // the replacement where the replaced fact stood, the history right after
            assert_eq!(order(&ranked), [ids[4], ids[3], ids[0], ids[1], ids[2]]);
            assert_eq!(ranked[0].1, 0.9);
            assert!((ranked[1].1 - 0.9 * 0.99).abs() < 1e-12);
        }
        // before the update was said, the old fact held: nothing moves
        let mut before = session("tea", vec![1.0, 0.0], TimeQuery::None);
        before.query.fact_time = FactTime::Present(Some(3_500));
        before.signals(&s, &ids, None, None).unwrap();
        assert_eq!(
            order(&before.rank(&s, &found, &ranked_at(0.99))),
            [ids[3], ids[0], ids[1], ids[4], ids[2]]
        );
    }

    /// A query about one speaker ranks what the others said at a share of
    /// its score; a speakerless node (unless one person's label heads it),
    /// and every node of a query that asks about nobody (or several
    /// people), keep theirs.
    #[test]
    fn rank_lowers_what_others_said_when_one_speaker_is_asked_about() {
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let said = [
            (Some("Ana"), "i play the cello"),
            (Some("Ben"), "you play so well, ana"),
            (None, "concert notes"),
            (Some("ANA"), "and the piano"),
        ];
        let ids: Vec<NodeId> = said
            .iter()
            .map(|&(who, text)| {
                let mut n = NewNode::new(text, vec![1.0, 0.0]);
                if let Some(w) = who {
                    n.provenance = vec![("speaker".into(), w.into())];
                }
                s.add_node(n).unwrap()
            })
            .collect();
        let found = [(ids[0], 0.5), (ids[1], 0.9), (ids[2], 0.6), (ids[3], 0.4)];
        let cfg = RankConfig {
            replaced_below: 0.99,
            other_speaker_share: 0.5,
        };
        let mut r = session("what does ana play", vec![1.0, 0.0], TimeQuery::None);
        let order = |r: &[(NodeId, f64)]| r.iter().map(|&(n, _)| n).collect::<Vec<_>>();
        assert_eq!(
            order(&r.rank(&s, &found, &cfg)),
            [ids[1], ids[2], ids[0], ids[3]]
        );
        r.query.speaker_asked = Some("ana".into());
        let ranked = r.rank(&s, &found, &cfg);
        assert_eq!(
            ranked,
            vec![(ids[2], 0.6), (ids[0], 0.5), (ids[1], 0.45), (ids[3], 0.4)]
        );
        // a share of 1 changes nothing
        let as_scored = RankConfig {
            other_speaker_share: 1.0,
            ..cfg
        };
        assert_eq!(
            order(&r.rank(&s, &found, &as_scored)),
            [ids[1], ids[2], ids[0], ids[3]]
        );
        // speakerless notes: one headed by one person's label is theirs
        let notes = [
            "Ana: I play the cello",
            "Ben: I play the drums\nand sing",
            "Ben: you play so well\nAna: thanks",
            "Note: the concert is on Friday",
        ];
        let mut s = MemoryStore::new(StoreConfig::new(2)).unwrap();
        let ids: Vec<NodeId> = notes
            .iter()
            .map(|t| s.add_node(NewNode::new(*t, vec![1.0, 0.0])).unwrap())
            .collect();
        let found = [(ids[0], 0.5), (ids[1], 0.9), (ids[2], 0.6), (ids[3], 0.4)];
        // without people no label is a voice: as scored
        assert_eq!(r.rank(&s, &found, &cfg)[0], (ids[1], 0.9));
        r.query.people = vec!["ana".into(), "ben".into()];
        // Ben's note ranks at half; the transcript of two voices and the
        // note no person heads keep their scores
        assert_eq!(
            r.rank(&s, &found, &cfg),
            vec![(ids[2], 0.6), (ids[0], 0.5), (ids[1], 0.45), (ids[3], 0.4)]
        );
        let people = r.query.people.clone();
        assert_eq!(single_voice(notes[1], &people).as_deref(), Some("ben"));
        assert_eq!(single_voice(notes[2], &people), None);
        assert_eq!(single_voice(notes[3], &people), None);
        assert_eq!(
            single_voice("  Ana: hi\nNote: x\nAna: bye", &people).as_deref(),
            Some("ana")
        );
    }

    #[test]
    fn rank_prefers_recorded_evidence_and_assess_reads_what_was_recorded() {
        let (s, ids) = chat();
        let mut r = session("more tea", vec![1.0, 0.0], TimeQuery::None);
        r.signals(&s, &ids, None, None).unwrap();
        assert!(r.record(&[ids[0]], &[0.9, 0.1], None).is_err());
        r.record(&[ids[3], ids[4]], &[0.2, 0.8], Some(&[0.3, 0.7]))
            .unwrap();
        // seeds keep the traversal's score; ties by id
        let found = [(ids[0], 0.5), (ids[3], 0.9), (ids[4], 0.1), (ids[1], 0.5)];
        let ranked = r.rank(&s, &found, &ranked_at(0.99));
        assert_eq!(
            ranked,
            vec![(ids[4], 0.7), (ids[0], 0.5), (ids[1], 0.5), (ids[3], 0.3)]
        );
        let tokens = s.tokenize("more tea");
        let q = AssessQuery {
            tokens: tokens.clone(),
            coverage: CoverageQuery {
                content_tokens: tokens.iter().cloned().collect(),
                asked: Vec::new(),
                people: ShortKeySet::default(),
            },
        };
        let got = r
            .assess(&s, &q, &ranked[..2], &[ids[3], ids[4]], None)
            .unwrap();
        assert_eq!(got.items.len(), 2);
        assert_eq!(got.items[0].relevance, 0.8);
        assert_eq!(got.items[1].relevance, 0.0); // never judged
        assert_eq!(got.items[0].entity_ok, 1.0); // the query names nobody
        assert_eq!(got.frontier_best, 0.8);
        assert_eq!(got.coverage, 1.0); // "more tea" holds both tokens
        assert!(got.known_terms > 0.0 && got.covered_terms == 1.0);
        assert!(r.assess(&s, &q, &[(99, 1.0)], &[], None).is_err());
    }
}
