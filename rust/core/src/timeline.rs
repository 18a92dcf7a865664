//! The memory's timeline: every node with a timestamp, ordered by
//! (timestamp, id), as a sorted set (for windows and nearest searches) and
//! as links from each node to the nodes right before and after it. The
//! read path asks for the turns next to a node hundreds of times a query;
//! a link is one array read where the set costs a descent per side.

use std::collections::BTreeSet;
use std::ops::Bound;

use crate::types::{NodeId, Timestamp};

const NONE: NodeId = NodeId::MAX;

#[derive(Clone, Debug, Default)]
pub struct Timeline {
    set: BTreeSet<(Timestamp, NodeId)>,
    /// By node id: the node before it and the node after it (`NONE`: none,
    /// or the id is not on the timeline).
    links: Vec<[NodeId; 2]>,
}

impl Timeline {
    /// The ordered set of (timestamp, id).
    pub fn set(&self) -> &BTreeSet<(Timestamp, NodeId)> {
        &self.set
    }

    pub fn len(&self) -> usize {
        self.set.len()
    }

    pub fn is_empty(&self) -> bool {
        self.set.is_empty()
    }

    /// Put node `id` observed at `ts` on the timeline (again: nothing changes).
    pub fn insert(&mut self, ts: Timestamp, id: NodeId) {
        if !self.set.insert((ts, id)) {
            return;
        }
        let before = self.set.range(..(ts, id)).next_back().map(|&(_, n)| n);
        let after = self
            .set
            .range((Bound::Excluded((ts, id)), Bound::Unbounded))
            .next()
            .map(|&(_, n)| n);
        let slot = id as usize;
        if self.links.len() <= slot {
            self.links.resize(slot + 1, [NONE, NONE]);
        }
        self.links[slot] = [before.unwrap_or(NONE), after.unwrap_or(NONE)];
        if let Some(b) = before {
            self.links[b as usize][1] = id;
        }
        if let Some(a) = after {
            self.links[a as usize][0] = id;
        }
    }

    /// Take node `id`, observed at `ts`, off the timeline (nothing when it is not on it).
    pub fn remove(&mut self, ts: Timestamp, id: NodeId) {
        if !self.set.remove(&(ts, id)) {
            return;
        }
        let [before, after] = self.links[id as usize];
        if before != NONE {
            self.links[before as usize][1] = after;
        }
        if after != NONE {
            self.links[after as usize][0] = before;
        }
        self.links[id as usize] = [NONE, NONE];
    }

    /// The node right after (`forward`) or right before node `id` on the
    /// timeline (None at an end, or for a node not on it).
    #[inline]
    pub fn step(&self, id: NodeId, forward: bool) -> Option<NodeId> {
        let next = self.links.get(id as usize)?[usize::from(forward)];
        (next != NONE).then_some(next)
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.set.len() * 32 + self.links.capacity() * 16
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// After any inserts and removals (equal timestamps, repeats,
        /// removals of absent nodes), each node's links are its neighbours
        /// in the ordered set, and a node off the timeline has none.
        #[test]
        fn links_are_the_sets_neighbours(
            ops in proptest::collection::vec((any::<bool>(), 0u64..40, 0i64..6), 0..120),
        ) {
            let mut t = Timeline::default();
            let mut at: std::collections::HashMap<NodeId, Timestamp> = Default::default();
            for (add, id, ts) in ops {
                if add {
                    // a node has one timestamp: keep its first
                    let ts = *at.entry(id).or_insert(ts);
                    t.insert(ts, id);
                } else if let Some(ts) = at.remove(&id) {
                    t.remove(ts, id);
                } else {
                    t.remove(ts, id);
                }
            }
            let order: Vec<NodeId> = t.set().iter().map(|&(_, n)| n).collect();
            prop_assert_eq!(order.len(), at.len());
            for (k, &id) in order.iter().enumerate() {
                prop_assert_eq!(t.step(id, false), k.checked_sub(1).map(|j| order[j]));
                prop_assert_eq!(t.step(id, true), order.get(k + 1).copied());
            }
            for id in 0..45u64 {
                if !at.contains_key(&id) {
                    prop_assert_eq!(t.step(id, true), None);
                    prop_assert_eq!(t.step(id, false), None);
                }
            }
        }
    }
}
