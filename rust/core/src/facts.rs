//! Facts that change: supersedes links between nodes and each fact's
//! validity on the world timeline.
//!
//! A link `new -> old` says the newer observation updates, replaces or
//! contradicts the older one's statement about the same subject. A fact is
//! valid from its event time (`valid_from`: set explicitly when its text dates
//! the event, else its observation timestamp) until the earliest `valid_from`
//! among the facts that supersede it (`valid_to`, exclusive; none while it is
//! current). That is world time, distinct from when it was recorded.
//!
//! Links form a DAG (a cycle would make "which one is current" undecidable),
//! at most one link per (new, old) pair; re-asserting keeps the larger weight.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use serde::{Deserialize, Serialize};

use crate::error::{check_unit, Error, Result};
use crate::graph::EdgeUpsert;
use crate::types::{EdgeOrigin, NodeId, Timestamp};

/// One supersedes link: `new` replaces what `old` stated.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Supersedes {
    pub new: NodeId,
    pub old: NodeId,
    pub weight: f32,
    pub origin: EdgeOrigin,
}

impl Supersedes {
    pub fn validate(&self) -> Result<()> {
        if self.new == self.old {
            return Err(Error::invalid(format!(
                "node {} cannot supersede itself",
                self.new
            )));
        }
        check_unit("supersedes weight", self.weight)
    }
}

/// The table as a snapshot stores it: plain lists, sorted, so equal tables
/// serialise to equal bytes.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FactsSnapshot {
    pub links: Vec<Supersedes>,
    /// Explicit event times (nodes whose validity does not start at their timestamp).
    pub valid_from: Vec<(NodeId, Timestamp)>,
}

#[derive(Clone, Debug, Default)]
pub struct FactTable {
    /// (new, old) -> (weight, origin)
    links: BTreeMap<(NodeId, NodeId), (f32, EdgeOrigin)>,
    /// old -> the nodes superseding it, ascending
    successors: HashMap<NodeId, BTreeSet<NodeId>>,
    /// new -> the nodes it supersedes, ascending
    predecessors: HashMap<NodeId, BTreeSet<NodeId>>,
    valid_from: HashMap<NodeId, Timestamp>,
}

impl FactTable {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    pub fn link(&self, new: NodeId, old: NodeId) -> Option<Supersedes> {
        self.links
            .get(&(new, old))
            .map(|&(weight, origin)| Supersedes {
                new,
                old,
                weight,
                origin,
            })
    }

    /// Every link, sorted by (new, old).
    pub fn links(&self) -> Vec<Supersedes> {
        self.links
            .iter()
            .map(|(&(new, old), &(weight, origin))| Supersedes {
                new,
                old,
                weight,
                origin,
            })
            .collect()
    }

    /// The nodes `id` supersedes directly, ascending.
    pub fn supersedes(&self, id: NodeId) -> Vec<NodeId> {
        self.predecessors
            .get(&id)
            .map_or_else(Vec::new, |s| s.iter().copied().collect())
    }

    /// The nodes that supersede `id` directly, ascending.
    pub fn superseded_by(&self, id: NodeId) -> Vec<NodeId> {
        self.successors
            .get(&id)
            .map_or_else(Vec::new, |s| s.iter().copied().collect())
    }

    pub fn explicit_valid_from(&self, id: NodeId) -> Option<Timestamp> {
        self.valid_from.get(&id).copied()
    }

    /// Whether `to` is reachable from `from` by following supersedes links
    /// towards older facts (`from` supersedes ... supersedes `to`).
    fn reaches_older(&self, from: NodeId, to: NodeId) -> bool {
        let mut stack = vec![from];
        let mut seen = BTreeSet::new();
        while let Some(n) = stack.pop() {
            if n == to {
                return true;
            }
            if seen.insert(n) {
                if let Some(olds) = self.predecessors.get(&n) {
                    stack.extend(olds.iter().copied());
                }
            }
        }
        false
    }

    /// Check a link against the table (node existence is the store's job).
    pub fn validate_link(&self, link: &Supersedes) -> Result<()> {
        link.validate()?;
        if self.links.contains_key(&(link.new, link.old)) {
            return Ok(()); // a re-assertion cannot close a cycle
        }
        if self.reaches_older(link.old, link.new) {
            return Err(Error::invalid(format!(
                "node {} already (transitively) supersedes node {}: the link would close a cycle",
                link.old, link.new
            )));
        }
        Ok(())
    }

    /// Insert a validated link, or keep the larger weight of an existing one.
    pub(crate) fn upsert(&mut self, link: &Supersedes) -> EdgeUpsert {
        let key = (link.new, link.old);
        if let Some(meta) = self.links.get_mut(&key) {
            if link.weight <= meta.0 {
                return EdgeUpsert::Unchanged;
            }
            *meta = (link.weight, link.origin);
            return EdgeUpsert::Strengthened;
        }
        self.links.insert(key, (link.weight, link.origin));
        self.successors
            .entry(link.old)
            .or_default()
            .insert(link.new);
        self.predecessors
            .entry(link.new)
            .or_default()
            .insert(link.old);
        EdgeUpsert::Inserted
    }

    pub(crate) fn set_valid_from(&mut self, id: NodeId, valid_from: Option<Timestamp>) {
        match valid_from {
            Some(t) => self.valid_from.insert(id, t),
            None => self.valid_from.remove(&id),
        };
    }

    /// Forget a node: its links in both directions and its event time.
    pub(crate) fn remove_node(&mut self, id: NodeId) {
        if let Some(olds) = self.predecessors.remove(&id) {
            for old in olds {
                self.links.remove(&(id, old));
                if let Some(s) = self.successors.get_mut(&old) {
                    s.remove(&id);
                    if s.is_empty() {
                        self.successors.remove(&old);
                    }
                }
            }
        }
        if let Some(news) = self.successors.remove(&id) {
            for new in news {
                self.links.remove(&(new, id));
                if let Some(p) = self.predecessors.get_mut(&new) {
                    p.remove(&id);
                    if p.is_empty() {
                        self.predecessors.remove(&new);
                    }
                }
            }
        }
        self.valid_from.remove(&id);
    }

    /// Everything `id` superseded, transitively, starting with `id` itself,
    /// newest first: each version before every version it replaced (ties:
    /// the later written, the larger id, first).
    pub fn history(&self, id: NodeId) -> Vec<NodeId> {
        // every version it replaced, transitively
        let mut versions: BTreeSet<NodeId> = BTreeSet::from([id]);
        let mut queue = VecDeque::from([id]);
        while let Some(n) = queue.pop_front() {
            for &old in self.predecessors.get(&n).into_iter().flatten() {
                if versions.insert(old) {
                    queue.push_back(old);
                }
            }
        }
        // newest first: a version only after every one of them that
        // replaced it (a link that skips a version, c -> a beside c -> b ->
        // a, must not put a before b); of those ready, the later written
        let mut replaced_by: HashMap<NodeId, usize> = versions
            .iter()
            .map(|&v| {
                let newer = self.successors.get(&v).into_iter().flatten();
                (v, newer.filter(|n| versions.contains(n)).count())
            })
            .collect();
        let mut ready = std::collections::BinaryHeap::from([id]);
        let mut out = Vec::with_capacity(versions.len());
        while let Some(n) = ready.pop() {
            out.push(n);
            for &old in self.predecessors.get(&n).into_iter().flatten() {
                let left = replaced_by.get_mut(&old).expect("a version");
                *left -= 1;
                if *left == 0 {
                    ready.push(old);
                }
            }
        }
        out
    }

    pub fn to_snapshot(&self) -> FactsSnapshot {
        let mut valid_from: Vec<(NodeId, Timestamp)> =
            self.valid_from.iter().map(|(&k, &v)| (k, v)).collect();
        valid_from.sort_unstable();
        FactsSnapshot {
            links: self.links(),
            valid_from,
        }
    }

    pub fn memory_bytes(&self) -> usize {
        self.links.len() * 64 + self.valid_from.len() * 32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// `history` holds exactly what a node replaced, transitively (a
        /// naive walk), starting with the node, and every version comes
        /// before each version it replaced, whatever links skip versions.
        #[test]
        fn history_is_every_replaced_version_newest_first(
            links in proptest::collection::vec((0u64..12, 0u64..12), 0..40),
        ) {
            let mut t = FactTable::new();
            for (a, b) in links {
                // newer ids replace older ones: never a cycle
                let (new, old) = (a.max(b), a.min(b));
                let link = Supersedes { new, old, weight: 1.0, origin: EdgeOrigin::Rule };
                if t.validate_link(&link).is_ok() {
                    t.upsert(&link);
                }
            }
            for id in 0u64..12 {
                let got = t.history(id);
                let mut expected = BTreeSet::new();
                let mut stack = vec![id];
                while let Some(n) = stack.pop() {
                    if expected.insert(n) {
                        stack.extend(t.supersedes(n));
                    }
                }
                prop_assert_eq!(got.first(), Some(&id));
                prop_assert_eq!(got.iter().copied().collect::<BTreeSet<_>>(), expected);
                prop_assert_eq!(got.len(), t.history(id).iter().collect::<BTreeSet<_>>().len());
                let at: HashMap<NodeId, usize> = got.iter().enumerate().map(|(i, &n)| (n, i)).collect();
                for link in t.links() {
                    if let (Some(&i), Some(&j)) = (at.get(&link.new), at.get(&link.old)) {
                        prop_assert!(i < j, "{} replaced {} but comes after it", link.new, link.old);
                    }
                }
            }
        }
    }

    #[test]
    fn a_link_that_skips_a_version_keeps_the_chain_in_order() {
        let mut t = FactTable::new();
        for (new, old) in [(1, 0), (2, 1), (2, 0)] {
            t.upsert(&Supersedes {
                new,
                old,
                weight: 1.0,
                origin: EdgeOrigin::Rule,
            });
        }
        assert_eq!(t.history(2), vec![2, 1, 0]);
    }
}
