//! Facts that change, on the read path: which facts of a supersedes chain
//! held at the time a query asks about, the signals the controller reads of
//! that, and which facts must rank below the one of their chain that held.
//!
//! A chain is what supersedes links join: a fact, the facts it replaced and
//! those that replaced it, transitively. A scoped search sees only the links
//! between nodes it may read. The per-query record (`FactState`) collects,
//! over the query's signal batches, which facts held and which did not; the
//! ranking reads it at the end.
//!
//! The rules are the read path's former Python ones (`tests/support/
//! validity_reference.py` keeps them as the oracle).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};

use crate::error::Result;
use crate::filter::Allowed;
use crate::signals::share_of_best;
use crate::store::MemoryStore;
use crate::types::{NodeId, Timestamp};
use crate::vector::VectorIndex;

/// A chain is read this far (nodes reachable through supersedes links).
pub const CHAIN_NODES: usize = 32;

/// The time a query wants facts to hold at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FactTime {
    /// No time and no tense: validity is not asked about.
    Neutral,
    /// Before a change ("used to", "before"): what was replaced held.
    Past,
    /// Now, or at the given time (`now=`).
    Present(Option<Timestamp>),
    /// A named stretch of time, `[from, to)`.
    Window(Timestamp, Timestamp),
}

/// A node's place in its chain as a search sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct FactChain {
    pub valid_from: Option<Timestamp>,
    pub valid_to: Option<Timestamp>,
    /// The facts it replaced, as (id, link weight).
    pub supersedes: Vec<(NodeId, f32)>,
    /// The facts that replaced it, as (id, link weight).
    pub superseded_by: Vec<(NodeId, f32)>,
}

impl FactChain {
    fn linked(&self) -> impl Iterator<Item = NodeId> + '_ {
        self.supersedes
            .iter()
            .chain(&self.superseded_by)
            .map(|&(id, _)| id)
    }
}

/// One query's record of the facts it measured: which held at its time and
/// which did not, and for each fact that did not, the facts of its chain that
/// did (the best of them takes its place when it ranked higher, and it
/// follows right below).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FactState {
    /// chain member -> the facts valid at the query's time whose chain holds it
    holders: HashMap<NodeId, BTreeSet<NodeId>>,
    /// facts not valid at the query's time -> the facts of their chain that were
    replaced: BTreeMap<NodeId, BTreeSet<NodeId>>,
    invalid: HashSet<NodeId>,
}

impl FactState {
    /// The facts that did not hold, each with the facts of its chain that
    /// did, ascending.
    pub fn replaced(&self) -> Vec<(NodeId, Vec<NodeId>)> {
        self.replaced
            .iter()
            .map(|(&id, holders)| (id, holders.iter().copied().collect()))
            .collect()
    }
}

/// The validity columns of a batch of nodes, each in [0, 1], NaN for a node
/// in no chain (it lacks them).
#[derive(Clone, Debug, PartialEq)]
pub struct FactColumns {
    /// The share of the asked time the node's fact held (1 or 0 for a point).
    pub valid_at_query_time: Vec<f64>,
    /// The share of it after the fact was replaced.
    pub superseded: Vec<f64>,
    /// The share of it before the fact began.
    pub not_yet_valid: Vec<f64>,
    /// For a fact that held: the best topical match in its chain, times that share.
    pub chain_match: Vec<f64>,
}

/// What the query fixes for the chain match: its text and vector, and its
/// best lexical score and dense similarity (the scales of the shares).
#[derive(Clone, Copy, Debug)]
pub struct ChainMatchQuery<'a> {
    pub text: &'a str,
    pub vector: &'a [f32],
    pub best_lexical: f64,
    pub best_dense: f64,
}

/// (held, after, before) of a fact valid over `[start, end)` at `time`.
fn shares(time: FactTime, chain: &FactChain) -> (f64, f64, f64) {
    let (start, end) = (chain.valid_from, chain.valid_to);
    let replaced = !chain.superseded_by.is_empty();
    match time {
        FactTime::Neutral => (0.0, 0.0, 0.0),
        FactTime::Past => {
            if replaced {
                (1.0, 0.0, 0.0)
            } else {
                (0.0, 0.0, 1.0)
            }
        }
        FactTime::Present(at) => {
            let gone = replaced && (at.is_none() || end.is_none_or(|e| at.is_some_and(|t| e <= t)));
            let begun =
                start.is_none() || at.is_none() || start.zip(at).is_some_and(|(s, t)| s <= t);
            let flag = |b: bool| if b { 1.0 } else { 0.0 };
            (flag(begun && !gone), flag(gone), flag(!begun))
        }
        FactTime::Window(lo, hi) => {
            // in i128: a window may span the whole i64 range
            let (lo, hi) = (i128::from(lo), i128::from(hi));
            let (start, end) = (start.map(i128::from), end.map(i128::from));
            let width = (hi - lo).max(1) as f64;
            let a = start.map_or(lo, |s| lo.max(s));
            let b = end.map_or(hi, |e| hi.min(e));
            let held = (b - a).max(0) as f64 / width;
            let after = end.map_or(0.0, |e| (hi - lo.max(e)).max(0) as f64 / width);
            let before = start.map_or(0.0, |s| (hi.min(s) - lo).max(0) as f64 / width);
            (held, after, before)
        }
    }
}

impl MemoryStore {
    /// Each node's chain as a search sees it (None for a node in no chain,
    /// or one whose links all lead outside `allowed`). Outside its scope a
    /// replacement does not count: the fact's end of validity then comes
    /// from the replacements the search sees.
    pub fn fact_chains_scoped(
        &self,
        ids: &[NodeId],
        allowed: Option<&Allowed>,
    ) -> Vec<Option<FactChain>> {
        ids.iter().map(|&id| self.fact_chain(id, allowed)).collect()
    }

    fn fact_chain(&self, id: NodeId, allowed: Option<&Allowed>) -> Option<FactChain> {
        let facts = self.facts();
        let olds = facts.supersedes(id);
        let news = facts.superseded_by(id);
        if olds.is_empty() && news.is_empty() {
            return None;
        }
        let (valid_from, mut valid_to) = self.validity(id).ok()?;
        let weight = |new: NodeId, old: NodeId| facts.link(new, old).map_or(0.0, |l| l.weight);
        let sees = |n: &NodeId| allowed.is_none_or(|a| a.contains(*n));
        let seen_news: Vec<NodeId> = news.iter().copied().filter(sees).collect();
        let supersedes: Vec<(NodeId, f32)> = olds
            .into_iter()
            .filter(sees)
            .map(|o| (o, weight(id, o)))
            .collect();
        if supersedes.is_empty() && seen_news.is_empty() {
            return None;
        }
        if seen_news.len() != news.len() {
            // as `validity`, over the replacements the search sees
            valid_to = seen_news
                .iter()
                .filter_map(|&n| self.valid_from(n).ok().flatten())
                .min()
                .map(|t| valid_from.map_or(t, |f| t.max(f)));
        }
        Some(FactChain {
            valid_from,
            valid_to,
            supersedes,
            superseded_by: seen_news.into_iter().map(|n| (n, weight(n, id))).collect(),
        })
    }

    /// Every node reachable through supersedes links from a chain's direct
    /// links, breadth first, at most `CHAIN_NODES`.
    fn chain_members(&self, chain: &FactChain, allowed: Option<&Allowed>) -> Vec<NodeId> {
        let mut found: Vec<NodeId> = chain.linked().collect();
        let mut seen: HashSet<NodeId> = found.iter().copied().collect();
        let mut frontier = found.clone();
        while !frontier.is_empty() && found.len() < CHAIN_NODES {
            let mut step = Vec::new();
            for next in self
                .fact_chains_scoped(&frontier, allowed)
                .into_iter()
                .flatten()
            {
                for r in next.linked() {
                    if seen.insert(r) {
                        step.push(r);
                    }
                }
            }
            found.extend_from_slice(&step);
            frontier = step;
        }
        found.truncate(CHAIN_NODES);
        found
    }

    /// The nodes one supersedes link away from any of `ids`, in order (with
    /// repeats), when the query asks about a time: the fact valid then is
    /// pooled even when its words match less, and the history stays in reach.
    pub fn chain_relatives(
        &self,
        ids: &[NodeId],
        time: FactTime,
        allowed: Option<&Allowed>,
    ) -> Vec<NodeId> {
        if time == FactTime::Neutral || self.facts().is_empty() {
            return Vec::new();
        }
        self.fact_chains_scoped(ids, allowed)
            .iter()
            .flatten()
            .flat_map(FactChain::linked)
            .collect()
    }

    /// The validity signals of `ids` for a query's time (see `FactColumns`),
    /// recording in `state` which facts held; None when the query names no
    /// time or tense, or no node is in a chain. The chain match reads the
    /// chain's facts' lexical score and similarity as shares of the query's
    /// best, half each. A link's weight is not applied again: it passed the
    /// relation threshold when it was written. An unknown id is an error.
    pub fn fact_signals(
        &self,
        state: &mut FactState,
        ids: &[NodeId],
        time: FactTime,
        query: &ChainMatchQuery<'_>,
        allowed: Option<&Allowed>,
    ) -> Result<Option<FactColumns>> {
        for &id in ids {
            self.require(id)?;
        }
        if time == FactTime::Neutral || ids.is_empty() || self.facts().is_empty() {
            return Ok(None);
        }
        self.vectors().validate(query.vector)?;
        let chains = self.fact_chains_scoped(ids, allowed);
        if chains.iter().all(Option::is_none) {
            return Ok(None);
        }
        let n = ids.len();
        let mut cols = FactColumns {
            valid_at_query_time: vec![f64::NAN; n],
            superseded: vec![f64::NAN; n],
            not_yet_valid: vec![f64::NAN; n],
            chain_match: vec![f64::NAN; n],
        };
        let mut valid_rows: Vec<(usize, Vec<NodeId>)> = Vec::new();
        for (row, (&id, chain)) in ids.iter().zip(&chains).enumerate() {
            let Some(chain) = chain else { continue };
            let (held, after, before) = shares(time, chain);
            cols.valid_at_query_time[row] = held.min(1.0);
            cols.superseded[row] = after.min(1.0);
            cols.not_yet_valid[row] = before.min(1.0);
            cols.chain_match[row] = 0.0;
            let members = self.chain_members(chain, allowed);
            if held > 0.0 {
                for &r in &members {
                    state.holders.entry(r).or_default().insert(id);
                    if state.invalid.contains(&r) {
                        state.replaced.entry(r).or_default().insert(id);
                    }
                }
                valid_rows.push((row, members));
            } else if after > 0.0 || before > 0.0 {
                state.invalid.insert(id);
                if let Some(holders) = state.holders.get(&id) {
                    state
                        .replaced
                        .entry(id)
                        .or_default()
                        .extend(holders.iter().copied());
                }
            }
        }
        let relatives: Vec<NodeId> = valid_rows
            .iter()
            .flat_map(|(_, members)| members.iter().copied())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        if relatives.is_empty() {
            return Ok(Some(cols));
        }
        let lexical = self.lexical_scores_scoped(query.text, &relatives, allowed);
        let unit = VectorIndex::normalize(query.vector);
        let matches: HashMap<NodeId, f64> = relatives
            .iter()
            .zip(&lexical)
            .map(|(&r, &lx)| {
                let sim = self.vectors().similarity(&unit, r).map_or(0.0, f64::from);
                let sim = if sim.is_nan() { 0.0 } else { sim };
                let m = 0.5 * share_of_best(f64::from(lx), query.best_lexical)
                    + 0.5 * share_of_best(sim, query.best_dense);
                (r, m)
            })
            .collect();
        for (row, members) in valid_rows {
            let best = members
                .iter()
                .map(|r| matches.get(r).copied().unwrap_or(0.0))
                .fold(f64::NEG_INFINITY, f64::max);
            cols.chain_match[row] = (best * cols.valid_at_query_time[row]).min(1.0);
        }
        Ok(Some(cols))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(from: Option<Timestamp>, to: Option<Timestamp>, replaced: bool) -> FactChain {
        FactChain {
            valid_from: from,
            valid_to: to,
            supersedes: vec![(7, 0.9)],
            superseded_by: if replaced { vec![(9, 0.9)] } else { vec![] },
        }
    }

    #[test]
    fn shares_of_the_asked_time() {
        let old = chain(Some(0), Some(100), true);
        let new = chain(Some(100), None, false);
        // the present: the replacement holds, the old fact is superseded
        assert_eq!(shares(FactTime::Present(None), &old), (0.0, 1.0, 0.0));
        assert_eq!(shares(FactTime::Present(None), &new), (1.0, 0.0, 0.0));
        // at a time before the change, the old fact held and the new one had not begun
        assert_eq!(shares(FactTime::Present(Some(50)), &old), (1.0, 0.0, 0.0));
        assert_eq!(shares(FactTime::Present(Some(50)), &new), (0.0, 0.0, 1.0));
        // "used to": what was replaced
        assert_eq!(shares(FactTime::Past, &old), (1.0, 0.0, 0.0));
        assert_eq!(shares(FactTime::Past, &new), (0.0, 0.0, 1.0));
        // a window across the change: half each
        assert_eq!(shares(FactTime::Window(50, 150), &old), (0.5, 0.5, 0.0));
        assert_eq!(shares(FactTime::Window(50, 150), &new), (0.5, 0.0, 0.5));
        // the widest window does not overflow
        let (held, _, _) = shares(FactTime::Window(i64::MIN, i64::MAX), &new);
        assert!(held > 0.0 && held <= 1.0);
    }

    #[test]
    fn shares_sum_to_at_most_one_over_any_window() {
        for (lo, hi) in [(0, 10), (-5, 5), (90, 110), (100, 100), (200, 300)] {
            for c in [chain(Some(0), Some(100), true), chain(None, None, false)] {
                let (a, b, d) = shares(FactTime::Window(lo, hi), &c);
                assert!(a + b + d <= 1.0 + 1e-12, "{lo} {hi}: {a} {b} {d}");
            }
        }
    }
}
