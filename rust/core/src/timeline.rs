//! The memory's timeline: every node with a timestamp, ordered by
//! (timestamp, id), as a sorted set (for windows and nearest searches) and
//! as links from each node to the nodes right before and after it. The
//! read path asks for the turns next to a node hundreds of times a query;
//! a link is one array read where the set costs a descent per side.

use std::collections::{BTreeSet, HashMap};
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
        link(&mut self.set, &mut self.links, ts, id);
    }

    /// Take node `id`, observed at `ts`, off the timeline (nothing when it is not on it).
    pub fn remove(&mut self, ts: Timestamp, id: NodeId) {
        unlink(&mut self.set, &mut self.links, ts, id);
    }

    /// The node right after (`forward`) or right before node `id` on the
    /// timeline (None at an end, or for a node not on it).
    #[inline]
    pub fn step(&self, id: NodeId, forward: bool) -> Option<NodeId> {
        step(&self.links, id, forward)
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.set.len() * 32 + self.links.capacity() * 16
    }
}

/// A session's line: its episode key, and whether it holds the session's
/// timestamped turns (else those without a timestamp, in write order).
pub type LineKey = (u64, bool);

/// Each session's turns on a line of their own, linked as the timeline's
/// are: a turn's nearest turns of its own session, however many turns of
/// other sessions lie between them on the timeline (threads kept at once: a
/// group chat's, an agent's with several users). The links of every line
/// share one table by node id (a node is on one line at most).
#[derive(Clone, Debug, Default)]
pub struct SessionLines {
    // std's SipHash: the keys come from session names the caller chooses
    sets: HashMap<LineKey, BTreeSet<(Timestamp, NodeId)>>,
    links: Vec<[NodeId; 2]>,
}

impl SessionLines {
    /// Put node `id` observed at `ts` on its session's line.
    pub fn insert(&mut self, line: LineKey, ts: Timestamp, id: NodeId) {
        link(self.sets.entry(line).or_default(), &mut self.links, ts, id);
    }

    /// Take node `id` off its session's line (nothing when it is not on it).
    pub fn remove(&mut self, line: LineKey, ts: Timestamp, id: NodeId) {
        if let Some(set) = self.sets.get_mut(&line) {
            unlink(set, &mut self.links, ts, id);
            if set.is_empty() {
                self.sets.remove(&line);
            }
        }
    }

    /// The turn of the same session right after (`forward`) or right
    /// before node `id` (None at an end, or for a node on no line).
    #[inline]
    pub fn step(&self, id: NodeId, forward: bool) -> Option<NodeId> {
        step(&self.links, id, forward)
    }

    /// Approximate heap bytes.
    pub fn memory_bytes(&self) -> usize {
        self.sets.values().map(|s| s.len() * 32 + 48).sum::<usize>() + self.links.capacity() * 16
    }
}

/// Insert `(ts, id)` into `set` and link it to its neighbours there.
fn link(
    set: &mut BTreeSet<(Timestamp, NodeId)>,
    links: &mut Vec<[NodeId; 2]>,
    ts: Timestamp,
    id: NodeId,
) {
    if !set.insert((ts, id)) {
        return;
    }
    let before = set.range(..(ts, id)).next_back().map(|&(_, n)| n);
    let after = set
        .range((Bound::Excluded((ts, id)), Bound::Unbounded))
        .next()
        .map(|&(_, n)| n);
    let slot = id as usize;
    if links.len() <= slot {
        links.resize(slot + 1, [NONE, NONE]);
    }
    links[slot] = [before.unwrap_or(NONE), after.unwrap_or(NONE)];
    if let Some(b) = before {
        links[b as usize][1] = id;
    }
    if let Some(a) = after {
        links[a as usize][0] = id;
    }
}

/// Take `(ts, id)` out of `set`, its neighbours there linked to each other.
fn unlink(
    set: &mut BTreeSet<(Timestamp, NodeId)>,
    links: &mut [[NodeId; 2]],
    ts: Timestamp,
    id: NodeId,
) {
    if !set.remove(&(ts, id)) {
        return;
    }
    let [before, after] = links[id as usize];
    if before != NONE {
        links[before as usize][1] = after;
    }
    if after != NONE {
        links[after as usize][0] = before;
    }
    links[id as usize] = [NONE, NONE];
}

#[inline]
fn step(links: &[[NodeId; 2]], id: NodeId, forward: bool) -> Option<NodeId> {
    let next = links.get(id as usize)?[usize::from(forward)];
    (next != NONE).then_some(next)
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

        /// The same for each session's line: a node's links are its
        /// neighbours among its own line's nodes, whatever the other lines.
        #[test]
        fn session_links_are_their_lines_neighbours(
            ops in proptest::collection::vec(
                (any::<bool>(), 0u64..40, 0i64..6, (0u64..3, any::<bool>())),
                0..160,
            ),
        ) {
            let mut t = SessionLines::default();
            let mut at: std::collections::HashMap<NodeId, (Timestamp, LineKey)> =
                Default::default();
            for (add, id, ts, line) in ops {
                if add {
                    // a node has one time and one session: keep its first
                    let (ts, line) = *at.entry(id).or_insert((ts, line));
                    t.insert(line, ts, id);
                } else if let Some((ts, line)) = at.remove(&id) {
                    t.remove(line, ts, id);
                } else {
                    t.remove(line, ts, id);
                }
            }
            for (&id, &(_, line)) in &at {
                let mut order: Vec<(Timestamp, NodeId)> = at
                    .iter()
                    .filter(|(_, &(_, l))| l == line)
                    .map(|(&n, &(ts, _))| (ts, n))
                    .collect();
                order.sort();
                let k = order.iter().position(|&(_, n)| n == id).unwrap();
                prop_assert_eq!(t.step(id, false), k.checked_sub(1).map(|j| order[j].1));
                prop_assert_eq!(t.step(id, true), order.get(k + 1).map(|&(_, n)| n));
            }
            for id in 0..45u64 {
                if !at.contains_key(&id) {
                    prop_assert_eq!(t.step(id, true), None);
                    prop_assert_eq!(t.step(id, false), None);
                }
            }
            prop_assert_eq!(t.sets.len(), at.values().map(|&(_, l)| l).collect::<std::collections::HashSet<_>>().len());
        }
    }
}
